"""What every command returns: data, tables to show, and how each figure was derived.

Commands build a ``Result``; ``kvplan.output`` renders it as a rich table, JSON, CSV or Markdown. The
JSON document is ``Result.data`` plus ``assumptions``, ``derivations`` and ``notes``: a stable contract
documented in the README.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Derivation:
    """How one figure was obtained: the formula, the same formula with the numbers put in, and the
    sources of every preset value it used."""

    figure: str
    value: str
    formula: str
    substituted: str
    sources: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "value": self.value, "formula": self.formula,
                "substituted": self.substituted, "sources": list(self.sources)}


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    # The table CSV output prints (one per result).
    primary: bool = False


@dataclass(frozen=True)
class Chart:
    """A small chart: one value per x label for each named series (rendered as bars in a terminal, or as a
    PNG with --plot where the command offers it)."""

    title: str
    x_label: str
    x_values: tuple[str, ...]
    series: tuple[tuple[str, tuple[float, ...]], ...]
    y_label: str = ""


@dataclass(frozen=True)
class Result:
    command: str
    data: dict[str, Any]
    tables: tuple[Table, ...]
    notes: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    derivations: tuple[Derivation, ...] = field(default_factory=tuple)
    charts: tuple[Chart, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            **self.data,
            "notes": list(self.notes),
            "assumptions": list(self.assumptions),
            "derivations": [d.to_dict() for d in self.derivations],
        }

    def primary_table(self) -> Table:
        for table in self.tables:
            if table.primary:
                return table
        return self.tables[0]
