"""The command line: parse, call a calculator, render. Nothing is computed here.

Heavy modules (numpy, plotting, simulation) are imported inside the commands that use them, so
``kvplan --help`` and ``kvplan size`` start fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from kvplan.errors import KvplanError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="kvplan: plan the KV cache of LLM serving for long chain-of-thought decode.",
)
presets_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                          help="List and show the built-in and user presets.")
app.add_typer(presets_app, name="presets")

SEED_MODEL = "deepseek-r1"
SEED_COMPARE = "deepseek-r1-seed-gqa"

FormatOpt = typer.Option("table", "--format", "-f", help="table, json, csv or markdown.")
PresetsDirOpt = typer.Option(None, "--presets-dir",
                             help="Folder of your own preset TOML files (also $KVPLAN_PRESETS_DIR).")


def _degree(text: str, name: str) -> int:
    from kvplan.parallel import MAX_DEGREE

    try:
        value = int(text)
    except ValueError:
        raise KvplanError(f"--{name} {text!r} is not a whole number", f"give --{name} as 1, 2, 4, 8, ...") from None
    if value < 1 or value > MAX_DEGREE:
        raise KvplanError(f"--{name} {value} is out of range", f"give --{name} between 1 and {MAX_DEGREE}")
    return value


def _check_format(fmt: str) -> str:
    from kvplan.output import FORMATS

    if fmt not in FORMATS:
        raise KvplanError(f"unknown format {fmt!r}", "choose one of " + ", ".join(FORMATS))
    return fmt


def _extra_dirs(presets_dir: Path | None) -> list[Path]:
    return [presets_dir] if presets_dir else []


@app.command()
def size(
    model: str | None = typer.Option(
        None, "--model", "-m",
        help="Preset id, preset .toml, HF config.json or model directory. Without it: the workload "
             "document's scenario (deepseek-r1, fp8 KV, 30k decode) beside its GQA worked example."),
    kv_dtype: str | None = typer.Option(
        None, "--kv-dtype",
        help="bf16, fp16, fp8, fp8_per_token_head, int8_per_token_head, nvfp4, fp8_ds_mla. "
             "Default bf16 (the engines' default), fp8 in the no-argument scenario."),
    tp: str = typer.Option("1", "--tp", help="Tensor-parallel degree of attention."),
    pp: str = typer.Option("1", "--pp", help="Pipeline-parallel stages."),
    dp: str = typer.Option("1", "--dp", help="Data-parallel attention ranks (split requests, not bytes)."),
    prompt: str = typer.Option("1k", "--prompt", help="Prompt tokens (30k = 30,000; 128Ki = 131,072)."),
    decode: str = typer.Option("30k", "--decode", help="Decode (generated) tokens."),
    contexts: str = typer.Option("1Ki,8Ki,32Ki,64Ki,128Ki", "--contexts",
                                 help="Comma-separated context lengths to tabulate."),
    include_mtp: bool = typer.Option(False, "--include-mtp", help="Count the checkpoint's MTP draft layers."),
    compare: str | None = typer.Option(None, "--compare", help="Another model to show side by side."),
    units: str = typer.Option("iec", "--units", help="iec (KiB, MiB, GiB) or si (kB, MB, GB) for sizes."),
    fmt: str = FormatOpt,
    explain: bool = typer.Option(False, "--explain", help="Show how each figure was derived, with sources."),
    presets_dir: Path | None = PresetsDirOpt,
) -> None:
    """Bytes per token, KV per request at each context, and the peak per request, whole model and per GPU."""
    from kvplan.calc.size import SizeRequest
    from kvplan.calc.size import size as run_size
    from kvplan.dtypes import KVDtype, parse_kv_dtype
    from kvplan.output import render
    from kvplan.parallel import Parallelism
    from kvplan.presets import load_model
    from kvplan.units import parse_tokens

    fmt = _check_format(fmt)
    if units not in ("iec", "si"):
        raise KvplanError(f"unknown unit system {units!r}", "choose iec (GiB) or si (GB)")
    dirs = _extra_dirs(presets_dir)
    scenario = model is None
    spec = load_model(model or SEED_MODEL, dirs)
    dtype = parse_kv_dtype(kv_dtype) if kv_dtype else (KVDtype.FP8 if scenario else KVDtype.BF16)
    compare_ref = compare or (SEED_COMPARE if scenario else None)
    request = SizeRequest(
        model=spec,
        kv_dtype=dtype,
        parallelism=Parallelism(tp=_degree(tp, "tp"), pp=_degree(pp, "pp"), dp=_degree(dp, "dp")),
        prompt_tokens=parse_tokens(prompt, "--prompt", allow_zero=True),
        decode_tokens=parse_tokens(decode, "--decode", allow_zero=True),
        contexts=tuple(parse_tokens(c, "--contexts") for c in contexts.split(",") if c.strip()),
        include_mtp=include_mtp,
        compare=load_model(compare_ref, dirs) if compare_ref else None,
        units=units,
    )
    if request.prompt_tokens + request.decode_tokens == 0:
        raise KvplanError("--prompt and --decode are both 0", "give the request at least one token")
    render(run_size(request), fmt, explain)


@presets_app.command("list")
def presets_list(fmt: str = FormatOpt, presets_dir: Path | None = PresetsDirOpt) -> None:
    """List every preset: id, type, name, and where it comes from."""
    from kvplan.output import render
    from kvplan.presets import discover
    from kvplan.result import Result, Table

    fmt = _check_format(fmt)
    found = discover(_extra_dirs(presets_dir))
    rows = []
    for kind in ("model", "hardware"):
        for pid, preset in sorted(found[kind].items()):
            rows.append((pid, kind, preset.data.get("name", ""), "built-in" if preset.builtin else str(preset.path)))
    data = {"presets": [{"id": r[0], "type": r[1], "name": r[2], "origin": r[3]} for r in rows]}
    render(Result("presets list", data, (Table("Presets", ("id", "type", "name", "origin"), tuple(rows),
                                               primary=True),)), fmt)


def _flatten(prefix: str, value, rows: list) -> None:
    if isinstance(value, dict) and "value" in value and "source" in value:
        rows.append((prefix, value["value"], value["source"] + (f" [{value['kind']}]" if value.get("kind") else "")))
    elif isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, rows)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for i, v in enumerate(value):
            _flatten(f"{prefix}[{i}]", v, rows)
    else:
        rows.append((prefix, value if not isinstance(value, list) else ", ".join(map(str, value)), ""))


@presets_app.command("show")
def presets_show(preset_id: str = typer.Argument(..., help="The preset's id."), fmt: str = FormatOpt,
                 presets_dir: Path | None = PresetsDirOpt) -> None:
    """Show one preset: every field, its value and its source."""
    from kvplan.output import render
    from kvplan.presets import _unknown, build_hardware, build_model, discover
    from kvplan.result import Result, Table

    fmt = _check_format(fmt)
    found = discover(_extra_dirs(presets_dir))
    for kind in ("model", "hardware"):
        if preset_id in found[kind]:
            preset = found[kind][preset_id]
            (build_model if kind == "model" else build_hardware)(preset.data, str(preset.path))  # validate
            rows: list = []
            _flatten("", {k: v for k, v in preset.data.items() if k != "type"}, rows)
            data = {"id": preset_id, "type": kind, "path": str(preset.path), "preset": preset.data}
            table = Table(f"{kind} preset {preset_id} ({preset.path})", ("field", "value", "source"),
                          tuple(rows), primary=True)
            render(Result("presets show", data, (table,)), fmt)
            return
    raise _unknown("model or hardware", preset_id, sorted(found["model"]) + sorted(found["hardware"]))


def main() -> None:
    try:
        app(standalone_mode=True)
    except KvplanError as err:
        print(err.one_line(), file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:  # e.g. piped into head
        sys.exit(0)
    except Exception as err:  # a bug, not bad input: say so in one line unless asked for the traceback
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        print(f"internal error: {type(err).__name__}: {err} (a kvplan bug; rerun with KVPLAN_DEBUG=1 and report "
              "the traceback)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
