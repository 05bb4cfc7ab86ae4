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
