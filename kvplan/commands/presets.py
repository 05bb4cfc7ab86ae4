"""`kvplan presets list|show`: the built-in and user presets, every figure with its source."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kvplan.commands.common import FormatOpt, PresetsDirOpt, check_format, emit, extra_dirs

presets_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                          help="List and show the built-in and user presets.")


@presets_app.command("list")
def presets_list(fmt: FormatOpt = "table", presets_dir: PresetsDirOpt = None) -> None:
    """List every preset: id, type, name, and where it comes from."""
    from kvplan.presets import discover
    from kvplan.result import Result, Table

    fmt = check_format(fmt)
    found = discover(extra_dirs(presets_dir))
    rows = []
    for kind in ("model", "hardware"):
        for pid, preset in sorted(found[kind].items()):
            rows.append((pid, kind, preset.data.get("name", ""), "built-in" if preset.builtin else str(preset.path)))
    data = {"presets": [{"id": r[0], "type": r[1], "name": r[2], "origin": r[3]} for r in rows]}
    headline = f"{len(rows)} presets: {sum(r[1] == 'model' for r in rows)} models, " \
               f"{sum(r[1] == 'hardware' for r in rows)} GPUs"
    emit(Result("presets list", headline, data, (Table("Presets", ("id", "type", "name", "origin"), tuple(rows),
                                               primary=True),)), fmt, False, "iec", False)


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
    from kvplan.presets import _unknown, build_hardware, build_model, discover
    from kvplan.result import Result, Table

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
    from kvplan.presets import builtin_dir

    if kind not in ("hardware", "model"):
        raise KvplanError(f"no template for {kind!r}", "give hardware or model")
    sys.stdout.write((builtin_dir() / "templates" / f"{kind}.toml").read_text())


def register(app: typer.Typer) -> None:
    app.add_typer(presets_app, name="presets")
