"""Options and parsers shared by the commands."""

from __future__ import annotations

from pathlib import Path

import typer

from kvplan.errors import KvplanError

# The workload document's scenario, which every command plans when --model is not given.
SEED_MODEL = "deepseek-r1"
SEED_HARDWARE = "h200"

FormatOpt = typer.Option("table", "--format", "-f", help="table, json, csv or markdown.")
ExplainOpt = typer.Option(False, "--explain", help="Show how each figure was derived, with sources.")
UnitsOpt = typer.Option("iec", "--units", help="iec (KiB, MiB, GiB) or si (kB, MB, GB) for sizes.")
ContextsOpt = typer.Option("1Ki,8Ki,32Ki,64Ki,128Ki", "--contexts",
                           help="Comma-separated context lengths to tabulate.")
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


def parse_fraction(text: str, name: str, allow_one: bool = True) -> float:
    try:
        value = float(text)
    except ValueError:
        raise KvplanError(f"--{name} {text!r} is not a number", f"give --{name} as a fraction such as 0.9") from None
    if not (0 < value < 1 or (allow_one and value == 1)):
        raise KvplanError(f"--{name} {text!r} is not in (0, 1{']' if allow_one else ')'}",
                          f"give --{name} as a fraction such as 0.9")
    return value


def parse_seconds(text: str, name: str) -> float:
    """A duration with its unit: 50ms, 0.05s."""
    import math
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ms|s|us)\s*", text)
    if not m:
        raise KvplanError(f"--{name} {text!r} needs a unit", f"write --{name} like 50ms or 0.05s")
    value = float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[m.group(2)]
    if not math.isfinite(value) or not 1e-6 <= value <= 3600:
        raise KvplanError(f"--{name} {text!r} is out of range", f"give --{name} between 1us and 3600s")
    return value


def optional(parse, value, *args, **kwargs):
    """``parse(value, ...)`` for an option that was given, None for one that was not."""
    return None if value is None else parse(value, *args, **kwargs)


def parse_list(text: str, parse, name: str) -> tuple:
    """A comma-separated option (``--contexts 1k,8k``), each item parsed; an empty list is an error."""
    items = tuple(parse(item) for item in text.split(",") if item.strip())
    if not items:
        raise KvplanError(f"--{name} {text!r} lists nothing", f"give --{name} as a comma-separated list")
    return items


def check_units(units: str) -> str:
    if units not in ("iec", "si"):
        raise KvplanError(f"unknown unit system {units!r}", "choose iec (GiB) or si (GB)")
    return units


def load_model_or_scenario(model: str | None, kv_dtype: str | None, dirs: list[Path]):
    """The model asked for, or the workload document's DeepSeek-R1; and the KV dtype asked for, else fp8 for the
    scenario (the document's recommendation) and bf16 otherwise (the engines' default)."""
    from kvplan.dtypes import KVDtype, parse_kv_dtype
    from kvplan.presets import load_model

    spec = load_model(SEED_MODEL if model is None else model, dirs)
    if kv_dtype is not None:
        dtype = parse_kv_dtype(kv_dtype)
    else:
        dtype = KVDtype.FP8 if model is None else KVDtype.BF16
    return spec, dtype


def parse_contexts(text: str) -> tuple[int, ...]:
    from kvplan.units import parse_tokens

    return parse_list(text, lambda c: parse_tokens(c, "--contexts"), "contexts")
