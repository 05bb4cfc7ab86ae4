"""The option parsers: one user value (text from the command line or a plan file, or a number from Python) to a
typed value, or an ``InputError`` naming the option and a fix.

A number reads as its text (``str(value)``): ``parse_degree(-1, "tp")`` and ``--tp -1`` are refused with the same
message, so the command line, plan files and Python refuse the same values alike. Sizes, rates and token counts are
``kvplan.inputs.units``; these are the rest (degrees, fractions, plain numbers, durations, lists).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kvplan.errors import InputError

T = TypeVar("T")
Value = str | int | float

# --contexts when it is not given: size's and concurrency's table of contexts
DEFAULT_CONTEXTS_TEXT = "1Ki,8Ki,32Ki,64Ki,128Ki"


def _text(value: Value) -> str:
    return value if isinstance(value, str) else str(value)


def parse_degree(value: Value, name: str) -> int:
    """A parallel degree or GPU / node count (``--tp 8``): a whole number in 1 .. MAX_DEGREE."""
    from kvplan.specs.parallel import MAX_DEGREE

    if type(value) is int:
        number = value
    else:
        text = _text(value)
        try:
            number = int(text.strip())
        except ValueError:
            raise InputError(f"--{name} {text!r} is not a whole number",
                             f"give --{name} as 1, 2, 4, 8, ...") from None
    if number < 1 or number > MAX_DEGREE:
        raise InputError(f"--{name} {number} is out of range", f"give --{name} between 1 and {MAX_DEGREE}")
    return number


def parse_fraction(value: Value, name: str, allow_one: bool = True) -> float:
    """A fraction in (0, 1] (or (0, 1) without ``allow_one``): ``--gpu-memory-utilization 0.9``."""
    text = _text(value)
    try:
        number = float(text)
    except ValueError:
        raise InputError(f"--{name} {text!r} is not a number", f"give --{name} as a fraction such as 0.9") from None
    if not (0 < number < 1 or (allow_one and number == 1)):
        raise InputError(f"--{name} {text!r} is not in (0, 1{']' if allow_one else ')'}",
                         f"give --{name} as a fraction such as 0.9")
    return number


def parse_float(value: Value, flag: str, example: str) -> float:
    """A finite number (``--rate 0.5``); the caller checks its range."""
    import math

    text = _text(value)
    try:
        number = float(text)
    except ValueError:
        raise InputError(f"{flag} {text!r} is not a number", f"give {flag} like {example}") from None
    if not math.isfinite(number):
        raise InputError(f"{flag} {text!r} is not a finite number", f"give {flag} like {example}")
    return number


def parse_seconds(value: Value, name: str) -> float:
    """A duration with its unit: 50ms, 0.05s (a bare number has none, and is refused)."""
    import math
    import re

    text = _text(value)
    m = re.fullmatch(r"\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ms|s|us)\s*", text)
    if not m:
        raise InputError(f"--{name} {text!r} needs a unit", f"write --{name} like 50ms or 0.05s")
    seconds = float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[m.group(2)]
    if not math.isfinite(seconds) or not 1e-6 <= seconds <= 3600:
        raise InputError(f"--{name} {text!r} is out of range", f"give --{name} between 1us and 3600s")
    return seconds


def parse_plain_seconds(value: Value, flag: str, allow_zero: bool = False) -> float:
    """A time in seconds, the unit optional (``--duration 600``, ``600s``), in (0, 1e9] (or [0, 1e9])."""
    number = parse_float(_text(value).strip().removesuffix("s"), flag, "600")
    if number < 0 or (number == 0 and not allow_zero) or number > 1e9:
        raise InputError(f"{flag} {_text(value)!r} is not a time in {'[0' if allow_zero else '(0'}, 1e9] s",
                         f"give {flag} in seconds, e.g. 600")
    return number


def parse_microseconds(value: Value, flag: str) -> float:
    """An overhead in microseconds, the unit optional (``--overhead-us 15``), in 0 .. 1,000,000."""
    number = parse_float(_text(value).strip().removesuffix("us"), flag, "15")
    if not 0 <= number <= 1e6:
        raise InputError(f"{flag} {_text(value)!r} is not in 0 .. 1,000,000 us", f"give {flag} like 15")
    return number


def parse_link_gbs(value: Value, flag: str = "--host-link-gbs") -> float:
    """Effective per-direction GB/s: a plain number (GB/s, 10^9 B/s) or a rate with its unit (50GB/s)."""
    import math

    from kvplan.inputs.units import parse_rate

    text = _text(value)
    try:
        number = float(text)
    except ValueError:
        return parse_rate(text, flag) / 1e9
    if not (number > 0 and math.isfinite(number)):
        raise InputError(f"{flag} {text!r} must be a positive number of GB/s", "give it like 50 or 50GB/s")
    return number


def optional(parse: Callable[..., T], value: Any, *args: Any, **kwargs: Any) -> T | None:
    """``parse(value, ...)`` for an option that was given, None for one that was not."""
    return None if value is None else parse(value, *args, **kwargs)


def parse_list(value: Value | tuple | list, parse: Callable[[Any], T], name: str) -> tuple[T, ...]:
    """A comma-separated option (``--contexts 1k,8k``; from Python also a list), each item parsed; an empty list
    is an error."""
    raw = value if isinstance(value, (tuple, list)) else _text(value).split(",")
    items = tuple(parse(item) for item in raw if not isinstance(item, str) or item.strip())
    if not items:
        raise InputError(f"--{name} {value!r} lists nothing", f"give --{name} as a comma-separated list")
    return items


def parse_contexts(value: Value | tuple | list) -> tuple[int, ...]:
    from kvplan.inputs.units import parse_tokens

    return parse_list(value, lambda c: parse_tokens(c, "--contexts"), "contexts")


def extra_dirs(presets_dir: str | Path | None) -> list[Path]:
    """The user's preset folders (``--presets-dir``) to search before the built-in ones."""
    return [Path(presets_dir)] if presets_dir else []
