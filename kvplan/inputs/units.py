"""Parsing and printing quantities with explicit units.

Decimal units (kB, MB, GB, TB; GB/s) are powers of 10; binary units (KiB, MiB, GiB, TiB) are powers
of 2. The two are never mixed silently: a bare number of bytes is refused where a size is expected,
and every printed size names its unit.

Token counts accept ``k``/``K`` (x1,000), ``M`` (x1,000,000) and ``Ki`` (x1,024) suffixes, so
``30k`` is 30,000 tokens (the workload document's "30K decode") and ``128Ki`` is 131,072.
"""

from __future__ import annotations

import math
import re

from kvplan.errors import InputError, shorten

_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_RATE_UNITS = {"gb/s": 10**9, "mb/s": 10**6, "tb/s": 10**12, "gib/s": 2**30, "mib/s": 2**20}
_TOKEN_SUFFIX = {"": 1, "k": 1000, "m": 1_000_000, "ki": 1024, "mi": 1024 * 1024}

# A token count above this is surely a typo (no served model has a context near a billion tokens).
MAX_TOKENS = 100_000_000
# A size above this is surely a typo (1 PB).
MAX_BYTES = 10**15

# Digits, then an optional fraction, then an optional exponent; written so that no two parts can match the same
# digits (a long run of digits must not make a failing match backtrack quadratically).
_DIGITS = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_NUMBER = "(" + _DIGITS + ")"
# Text longer than this is no number kvplan takes (the regexes never see it).
MAX_NUMBER_TEXT = 64


def _check_length(text: str, what: str, example: str) -> None:
    if len(text) > MAX_NUMBER_TEXT:
        raise InputError(f"{what} {shorten(text)} is too long to be a number", f"write it like {example}")


def _finite_positive(value: float, what: str, text: str, allow_zero: bool = False) -> None:
    if math.isnan(value) or math.isinf(value):
        raise InputError(f"{what} {text!r} is not a finite number", "give a plain positive number")
    if value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{what} {text!r} must be {'non-negative' if allow_zero else 'positive'}",
                         "give a positive number")


# A token count: a number (or nan/inf, refused with their own message) and an optional suffix, any case.
_TOKENS = r"([+-]?" + _DIGITS + r"|[+-]?nan|[+-]?inf)\s*([kKmM]i?)?"


def _plain_count(raw: str) -> tuple[str, str] | None:
    """(digits, suffix) of a plain count, ASCII digits and an optional k, M, Ki or Mi (``30000``, ``30k``,
    ``128Ki``): exactly what ``parse_tokens``'s pattern captures from such text, found without compiling it. None
    for anything else (a sign, a fraction, an exponent, spaces), which the pattern then reads."""
    if not raw.isascii():
        return None
    suffix = raw[-2:] if raw[-2:].lower() in ("ki", "mi") else raw[-1:] if raw[-1:].lower() in ("k", "m") else ""
    digits = raw[:len(raw) - len(suffix)]
    return (digits, suffix) if digits.isdigit() else None


_NOT_TOKENS = ("--requests", "--batch", "--users", "--max-batch", "--max-num-seqs", "--seed", "--spec-tokens",
               "--max-num-partial-prefills", "--max-long-partial-prefills")


def parse_tokens(text: str | int | float, what: str = "token count", allow_zero: bool = False) -> int:
    """Parse a token count such as ``30000``, ``30k``, ``1.5M`` or ``128Ki`` (also other whole counts: requests,
    batch sizes; their messages then say "a whole number", not "tokens")."""
    tokens = not what.startswith(_NOT_TOKENS)
    unit = " tokens" if tokens else ""
    scale_hint = "check the unit: 30k means 30,000 tokens" if tokens else "check the unit: 1k means 1,000"
    if not isinstance(text, str):   # a number from Python or a plan file reads as its text: the same messages
        text = str(text)
    _check_length(text, what, "30000, 30k or 128Ki")
    stripped = text.strip()
    if "," in stripped and not re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?\s*[A-Za-z]*", stripped):
        raise InputError(f"{what} {text!r} has a comma that is not a thousands separator",
                         "write thousands as 30,000 (groups of three digits) or 30000")
    raw = stripped.replace(",", "").replace("_", "")
    parts = _plain_count(raw)
    if parts is None:
        m = re.fullmatch(_TOKENS, raw, flags=re.IGNORECASE)
        if not m:
            raise InputError(f"{what} {text!r} is not {'a number of tokens' if tokens else 'a whole number'}",
                             "write it like 30000, 30k or 128Ki")
        parts = (m.group(1), m.group(2) or "")
    number = float(parts[0])
    _finite_positive(number, what, text, allow_zero)
    scaled = number * _TOKEN_SUFFIX[parts[1].lower()]
    if scaled > MAX_TOKENS:  # also infinity (1e308k): refused before any rounding
        raise InputError(f"{what} {text!r} is absurdly large (over {MAX_TOKENS:,}{unit})", scale_hint)
    if abs(scaled - round(scaled)) > 1e-9 * max(1.0, abs(scaled)):
        raise InputError(f"{what} {text!r} is not a whole number", "give a whole number, e.g. 30000 or 30k")
    value = int(round(scaled))
    if value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{what} {raw!r} must be {'non-negative' if allow_zero else 'positive'}",
                         f"give a positive number{' of tokens' if tokens else ''}")
    if value > MAX_TOKENS:
        raise InputError(f"{what} {raw!r} is absurdly large (over {MAX_TOKENS:,}{unit})", scale_hint)
    return value


def parse_size(text: str, what: str = "size") -> int:
    """Parse a size with an explicit unit (``80GiB``, ``141GB``, ``512MiB``) into bytes."""
    _check_length(text, what, "80GiB or 141GB")
    raw = text.strip().replace(",", "").replace("_", "")
    m = re.fullmatch(_NUMBER + r"\s*([a-zA-Z]+)?", raw)
    if not m:
        raise InputError(f"{what} {text!r} is not a size", "write it like 80GiB or 141GB")
    if m.group(2) is None:
        raise InputError(f"{what} {text!r} has no unit", "say GiB (2^30 bytes) or GB (10^9 bytes), e.g. 80GiB")
    unit = m.group(2).lower()
    if unit not in _SIZE_UNITS:
        raise InputError(f"{what} {text!r} has an unknown unit {m.group(2)!r}",
                         "use one of B, kB, MB, GB, TB, KiB, MiB, GiB, TiB")
    _check_bytes_not_bits(m.group(2), what, text)
    number = float(m.group(1))
    _finite_positive(number, what, text)
    value = number * _SIZE_UNITS[unit]
    if value > MAX_BYTES:
        raise InputError(f"{what} {text!r} is absurdly large", "check the unit")
    if value < 1:
        raise InputError(f"{what} {text!r} is less than one byte", "check the number and its unit")
    return int(round(value))


def _check_bytes_not_bits(unit: str, what: str, text: str) -> None:
    """A lowercase b means bits (Gb, Gb/s): refuse it rather than read bits as bytes."""
    if unit.endswith("b"):
        raise InputError(f"{what} {text!r} is in bits ({unit}); kvplan takes bytes",
                         f"write bytes with a capital B, e.g. {unit[:-1]}B (1 byte = 8 bits)")


def parse_rate(text: str, what: str = "bandwidth") -> float:
    """Parse a bandwidth with an explicit unit (``64GB/s``) into bytes per second."""
    _check_length(text, what, "64GB/s")
    raw = text.strip().replace(",", "").replace(" ", "")
    m = re.fullmatch(_NUMBER + r"([a-zA-Z]+/s)?", raw)
    if not m or m.group(2) is None:
        raise InputError(f"{what} {text!r} has no unit", "write it like 64GB/s (10^9 bytes per second)")
    unit = m.group(2).lower()
    if unit not in _RATE_UNITS:
        raise InputError(f"{what} {text!r} has an unknown unit {m.group(2)!r}",
                         "use GB/s, MB/s, TB/s, GiB/s or MiB/s")
    _check_bytes_not_bits(m.group(2)[:-2], what, text)
    number = float(m.group(1))
    _finite_positive(number, what, text)
    rate = number * _RATE_UNITS[unit]
    if not 1e6 <= rate <= 1e15:
        raise InputError(f"{what} {text!r} is outside 1 MB/s .. 1 PB/s", "check the number and its unit")
    return rate


def format_bytes(n: float, system: str = "iec", digits: int = 2) -> str:
    """Print bytes with an explicit unit: ``iec`` gives KiB/MiB/GiB, ``si`` gives kB/MB/GB."""
    if system not in ("iec", "si"):
        raise ValueError(f"unknown unit system {system!r}")
    base, names = (1024, ("B", "KiB", "MiB", "GiB", "TiB", "PiB")) if system == "iec" else (
        1000, ("B", "kB", "MB", "GB", "TB", "PB"))
    value = float(n)
    for name in names:
        if abs(value) < base or name == names[-1]:
            if name == "B":
                return f"{int(round(value)):,} B"
            return f"{value:,.{digits}f} {name}"
        value /= base
    raise AssertionError("unreachable")
