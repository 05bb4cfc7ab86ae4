"""Typed values: a number, what it measures, and how it was obtained.

Calculators return bytes, tokens, seconds, ratios and counts as these types, never as text; only the output
layer (``kvplan.render.output``) turns them into text, per format and ``--units``. Each value may carry a
``Derivation`` (formula, the formula with the numbers put in, sources), so ``--explain`` and the JSON
``derivations`` cover every computed figure by construction. A value the user gave, or a default the engine
or kvplan applies, carries an input derivation (``given(...)`` / ``default(...)``).

No third-party import here: this module is on every command's start-up path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Derivation:
    """How one figure was obtained. ``kind``: "computed", "input" (given by the user) or "default"."""

    formula: str
    substituted: str = ""
    sources: tuple[str, ...] = ()
    kind: str = "computed"

    def to_dict(self) -> dict:
        return {"formula": self.formula, "substituted": self.substituted, "sources": list(self.sources),
                "kind": self.kind}


def derived(formula: str, substituted: str = "", *sources: str) -> Derivation:
    return Derivation(formula, substituted, tuple(s for s in sources if s))


def given(flag: str) -> Derivation:
    return Derivation(f"given with {flag}", kind="input")


def default(why: str, *sources: str) -> Derivation:
    return Derivation(f"default: {why}", sources=tuple(s for s in sources if s), kind="input")


@dataclass(frozen=True)
class Value:
    """A typed number. ``value`` may be None (not applicable / unknown: printed as "-" and JSON null)."""

    value: int | float | None
    why: Derivation | None = None

    unit: ClassVar[str] = ""          # the unit suffix JSON keys and CSV headers carry
    integral: ClassVar[bool] = False  # stored as an int

    def __post_init__(self) -> None:
        v = self.value
        if v is None:
            return
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            # numpy scalars come through int()/float(); anything else is a bug in a calculator
            try:
                v = int(v) if self.integral else float(v)
            except (TypeError, ValueError):
                raise TypeError(f"{type(self).__name__} needs a number, got {v!r}") from None
            object.__setattr__(self, "value", v)
        if self.integral and isinstance(v, float) and math.isfinite(v):
            object.__setattr__(self, "value", int(v))

    def raw(self) -> int | float | None:
        """The JSON / CSV form: the plain number, None for a missing or non-finite one."""
        v = self.value
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v

    def number(self) -> float:
        """The number of a value the caller knows is there (a calculator's own figure, never "not applicable"):
        typed without None. None is a kvplan bug and a TypeError, as ``int(value)`` of it would be."""
        v = self.value
        if v is None:
            raise TypeError(f"{type(self).__name__} has no number, and its caller needs one")
        return v

    def explained(self, why: Derivation) -> Value:
        return type(self)(self.value, why)

    def __bool__(self) -> bool:  # a value is "there" when it has a number
        return self.value is not None


class _Whole(Value):
    """A value stored as an int."""

    integral = True

    def number(self) -> int:
        return int(super().number())


class Bytes(_Whole):
    unit = "bytes"


class TokenBytes(Bytes):
    """Bytes per token (per layer or per model): small exact figures, printed as ``70,272 B``."""


class Tokens(_Whole):
    unit = "tokens"


class Count(_Whole):
    """A count of things: requests, blocks, GPUs, copies, steps."""


class Seconds(Value):
    unit = "seconds"


class Ratio(Value):
    """A dimensionless ratio printed as 3.20x."""


class Fraction(Value):
    """A fraction in [0, 1] printed as a percentage (or as given for engine fractions)."""


class Rate(Value):
    """Bytes per second (one direction unless the name says otherwise)."""

    unit = "bytes_per_second"


class Bandwidth(Rate):
    """A memory bandwidth in bytes per second, printed in TB/s (HBM figures are TB/s on every datasheet)."""


class UsdPerHour(Value):
    """A price in US dollars per hour (of one GPU)."""

    unit = "usd_per_hour"


class Flops(Value):
    unit = "flop"


class Number(Value):
    """Any other plain number (an MFU, a utilization setting, a score)."""


@dataclass(frozen=True)
class Figure:
    """A typed value placed in a note, with how the output layer prints it (``spec``; see ``note``)."""

    value: Value
    spec: str = ""


@dataclass(frozen=True)
class Note:
    """A note, assumption or reason made of literal text and typed values: the output layer formats the values
    (per ``--units``; JSON and CSV as the table prints them), so a calculator's note never carries a number as
    text. Notes join with ``+`` (to text or another note) and ``Note.join``."""

    parts: tuple[str | Figure, ...]

    def figures(self) -> tuple[Value, ...]:
        return tuple(p.value for p in self.parts if isinstance(p, Figure))

    def __add__(self, other: str | Note) -> Note:
        return Note(self.parts + (other.parts if isinstance(other, Note) else (other,)))

    def __radd__(self, other: str) -> Note:
        return Note((other,) + self.parts)

    @staticmethod
    def join(sep: str, items) -> Note:
        parts: list[str | Figure] = []
        for i, item in enumerate(items):
            if i:
                parts.append(sep)
            parts.extend(item.parts if isinstance(item, Note) else (item,))
        return Note(tuple(parts))


def note(template: str, **values: Value | str | Note) -> Note:
    """A ``Note`` from a template: ``note("the pool holds {pool} for {n} requests", pool=Bytes(...), n=Count(...))``.

    ``{name}`` prints the value as a table cell does (bytes per ``--units``); ``{name:SPEC}`` with a Python format
    spec prints the plain number (``{ratio:.2f}``); a scale word first prints it scaled: ``{t:ms:.3g}`` (seconds
    as milliseconds), ``us``, ``k``, ``M``, ``G``, ``T``; ``{t:time:,.1f}`` prints seconds with the unit that
    suits them (``38.2 ms``, ``14.6 s``, ``9.0 min``: the unit is part of the figure); for bytes a unit,
    ``{pool:GiB:,.1f}``, prints
    ``12.3 GiB`` (``11.4 GB`` with ``--units si``) and ``{pool:.1}`` picks the unit with one decimal. A text value
    is put in as it is; a plain number is refused (give the typed value). ``{{`` and ``}}`` are literal braces."""
    import re

    parts: list[str | Figure] = []
    at = 0
    for m in re.finditer(r"\{\{|\}\}|\{([A-Za-z_]\w*)(?::([^{}]*))?\}", template):
        parts.append(template[at:m.start()])
        at = m.end()
        if m.group(1) is None:
            parts.append(m.group(0)[0])
            continue
        value = values[m.group(1)]
        if isinstance(value, Value):
            parts.append(Figure(value, m.group(2) or ""))
        elif isinstance(value, Note):
            parts.extend(value.parts)
        elif isinstance(value, str):
            parts.append(value)
        else:
            raise TypeError(f"note value {m.group(1)}={value!r}: give a typed value (Bytes, Count, ...) or text")
    parts.append(template[at:])
    merged: list[str | Figure] = []
    for p in parts:   # adjacent text pieces as one
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        elif p != "":
            merged.append(p)
    return Note(tuple(merged))
