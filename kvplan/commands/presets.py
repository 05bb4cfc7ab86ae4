"""`kvplan presets list|show`: the built-in and user presets, every figure with its source."""

import sys
from typing import Annotated

import typer

from kvplan.commands.common import FormatOpt, PresetsDirOpt
from kvplan.commands.output import check_format, emit
from kvplan.inputs.options import extra_dirs

presets_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                          help="List and show the built-in and user presets.")


TypeOpt = Annotated[str | None, typer.Option("--type", "-t", metavar="TYPE",
                                              help="Only presets of this type: model, hardware or workload.")]
SearchArg = Annotated[str | None, typer.Argument(metavar="[WORD]",
                                                 help="Only presets whose id or name contains WORD (any case).")]


@presets_app.command("list")
def presets_list(word: SearchArg = None, kind: TypeOpt = None, fmt: FormatOpt = "table",
                 presets_dir: PresetsDirOpt = None) -> None:
    """List the presets: id, type, name, where each comes from, and for GPUs HBM, bandwidth and price."""
    from kvplan.inputs.catalogue import catalogue
    from kvplan.present.presets import present_list

    fmt = check_format(fmt)
    entries, total = catalogue(extra_dirs(presets_dir), kind, word)
    emit(present_list(entries, total, kind.strip().lower() if kind else None, word), fmt, False, "iec", False)


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
def presets_show(preset_id: Annotated[str, typer.Argument(help="The preset's id.")], fmt: FormatOpt = "table",
                 presets_dir: PresetsDirOpt = None) -> None:
    """Show one preset: every field, its value and its source."""
    from kvplan.inputs.presets import _unknown, build_hardware, build_model, discover
    from kvplan.render.result import Result, Table

    fmt = check_format(fmt)
    found = discover(extra_dirs(presets_dir))
    for kind in ("model", "hardware"):
        if preset_id in found[kind]:
            preset = found[kind][preset_id]
            (build_model if kind == "model" else build_hardware)(preset.data, str(preset.path))  # validate
            rows: list = []
            _flatten("", {k: v for k, v in preset.data.items() if k != "type"}, rows)
            data = {"id": preset_id, "type": kind, "path": str(preset.path), "preset": preset.data}
            table = Table(f"{kind} preset {preset_id} ({preset.path})", ("field", "value", "source"),
                          tuple(rows), primary=True)
            headline = f"{kind} preset {preset_id}: {preset.data.get('name', '')}"
            emit(Result("presets show", headline, data, (table,)), fmt, False, "iec", False)
            return
    raise _unknown("model or hardware", preset_id, sorted(found["model"]) + sorted(found["hardware"]))



@presets_app.command("template")
def presets_template(kind: Annotated[str, typer.Argument(metavar="hardware|model",
                                                         help="Which preset to print a template of.")]) -> None:
    """Print a commented TOML template for your own hardware or model preset."""
    from kvplan.errors import KvplanError
    from kvplan.inputs.presets import builtin_dir

    if kind not in ("hardware", "model"):
        raise KvplanError(f"no template for {kind!r}", "give hardware or model")
    sys.stdout.write((builtin_dir() / "templates" / f"{kind}.toml").read_text())


def register(app: typer.Typer) -> None:
    app.add_typer(presets_app, name="presets")
