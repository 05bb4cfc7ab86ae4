"""`kvplan size`: bytes per token, by layer kind, at a set of contexts, and the peak per request."""

from __future__ import annotations

from pathlib import Path

import typer

from kvplan.commands.common import (
    ContextsOpt,
    ExplainOpt,
    FormatOpt,
    PresetsDirOpt,
    UnitsOpt,
    check_format,
    check_units,
    extra_dirs,
    load_model_or_scenario,
    parse_contexts,
    parse_degree,
)

SEED_COMPARE = "deepseek-r1-seed-gqa"


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
    contexts: str = ContextsOpt,
    include_mtp: bool = typer.Option(False, "--include-mtp", help="Count the checkpoint's MTP draft layers."),
    compare: str | None = typer.Option(None, "--compare", help="Another model to show side by side."),
    units: str = UnitsOpt,
    fmt: str = FormatOpt,
    explain: bool = ExplainOpt,
    presets_dir: Path | None = PresetsDirOpt,
) -> None:
    """Bytes per token, KV per request at each context, and the peak per request, whole model and per GPU."""
    from kvplan.calc.size import SizeRequest
    from kvplan.calc.size import size as run_size
    from kvplan.output import render
    from kvplan.parallel import Parallelism
    from kvplan.presets import load_model
    from kvplan.units import parse_tokens

    fmt = check_format(fmt)
    check_units(units)
    dirs = extra_dirs(presets_dir)
    scenario = model is None
    spec, dtype = load_model_or_scenario(model, kv_dtype, dirs)
    compare_ref = compare if compare is not None else (SEED_COMPARE if scenario else None)
    request = SizeRequest(
        model=spec,
        kv_dtype=dtype,
        parallelism=Parallelism(tp=parse_degree(tp, "tp"), pp=parse_degree(pp, "pp"), dp=parse_degree(dp, "dp")),
        prompt_tokens=parse_tokens(prompt, "--prompt", allow_zero=True),
        decode_tokens=parse_tokens(decode, "--decode", allow_zero=True),
        contexts=parse_contexts(contexts),
        include_mtp=include_mtp,
        compare=load_model(compare_ref, dirs) if compare_ref is not None else None,
        units=units,
    )
    render(run_size(request), fmt, explain)



def register(app: typer.Typer) -> None:
    app.command("size")(size)
