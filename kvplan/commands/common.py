"""Options and parsers shared by the commands."""

from __future__ import annotations

from pathlib import Path

import typer

from kvplan.errors import KvplanError

FormatOpt = typer.Option("table", "--format", "-f", help="table, json, csv or markdown.")
PresetsDirOpt = typer.Option(None, "--presets-dir",
                             help="Folder of your own preset TOML files (also $KVPLAN_PRESETS_DIR).")


def parse_degree(text: str, name: str) -> int:
    from kvplan.parallel import MAX_DEGREE

    try:
        value = int(text)
    except ValueError:
        raise KvplanError(f"--{name} {text!r} is not a whole number", f"give --{name} as 1, 2, 4, 8, ...") from None
    if value < 1 or value > MAX_DEGREE:
        raise KvplanError(f"--{name} {value} is out of range", f"give --{name} between 1 and {MAX_DEGREE}")
    return value


def check_format(fmt: str) -> str:
    from kvplan.output import FORMATS

    if fmt not in FORMATS:
        raise KvplanError(f"unknown format {fmt!r}", "choose one of " + ", ".join(FORMATS))
    return fmt


def extra_dirs(presets_dir: Path | None) -> list[Path]:
    return [presets_dir] if presets_dir else []
