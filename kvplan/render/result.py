"""What every command hands to the output layer: a headline, typed data, tables, notes.

A calculator returns a typed, frozen plan; a command's presentation step turns the plan into a ``Result``:
``headline`` (the deployment and KV dtype, printed first in every format), ``data`` (nested dicts and lists
of typed ``kvplan.specs.values`` values, the JSON document), ``tables`` (rows of typed values and text), ``brief``
(the headline figures for ``--brief``), notes and assumptions. ``kvplan.render.output`` renders it; nothing here
formats a number.

Derivations are not listed by hand: ``derivations()`` walks ``data`` and collects the derivation every value
carries, keyed by its JSON path (``by_context[].fp8`` for a figure of every row of a list).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kvplan.specs.values import Derivation, Note, Value


@dataclass(frozen=True)
class Table:
    """A table of typed cells (formatted only by kvplan.render.output); rows align with ``columns``."""

    # the title and headers are Notes where they carry a figure (formatted per --units like any note)
    title: str | Note
    columns: tuple[str | Note, ...]
    rows: tuple[tuple[Any, ...], ...]
    # The table CSV output prints (one per result).
    primary: bool = False
    # The formats that print it (None: every format): a wide table can go to markdown and CSV while the terminal
    # gets narrower ones with the same figures.
    formats: tuple[str, ...] | None = None
    # Columns (indices, never the first) a terminal may leave out, the last first, while the table would squeeze
    # a text column narrower than ``TEXT_ROOM`` characters a line: a wider terminal shows more of them.
    optional: tuple[int, ...] = ()

    def shown_in(self, fmt: str) -> bool:
        return self.formats is None or fmt in self.formats


@dataclass(frozen=True)
class Chart:
    """A small chart: one value per x label for each named series (rendered as bars in a terminal, or as a
    PNG with --plot where the command offers it)."""

    title: str
    x_label: str
    x_values: tuple[str, ...]
    series: tuple[tuple[str, tuple[float, ...]], ...]
    y_label: str = ""
    legend: str = ""
    log_y: bool = False
    # a timeline: x values are equal slices of time; a terminal prints one sparkline per series (each scaled to its
    # own peak), --plot one panel per series on a linear time axis
    timeline: bool = False


@dataclass(frozen=True)
class Verbatim:
    """Text a user copies as it is (a launch command, one flag per line with `` \\`` continuations): every format
    prints it unwrapped, Markdown in a fenced block."""

    title: str
    text: str
    language: str = "sh"


@dataclass(frozen=True)
class Result:
    """What a presenter hands the output layer: headline, JSON data tree, tables, notes, charts, --brief figures."""

    command: str
    headline: str
    data: dict[str, Any]
    tables: tuple[Table, ...]
    # notes, assumptions and warnings are text or ``Note``s (text with typed values, formatted per --units)
    notes: tuple[str | Note, ...] = ()
    assumptions: tuple[str | Note, ...] = ()
    charts: tuple[Chart, ...] = ()
    # (label, value) pairs --brief prints after the headline
    brief: tuple[tuple[str | Note, Any], ...] = ()
    # notes that overturn or qualify the answer (the engine would not start; swap is impossible): printed first
    # among the notes, and by --brief after its figures
    warnings: tuple[str | Note, ...] = ()
    # the warnings printed right after the headline, before the tables (explain-log: the GPU the log does not
    # state was assumed, which every figure below depends on); else first among the notes
    warnings_first: bool = False
    # the answer's own lines, printed right after the headline and before the tables, and by --brief after the
    # headline (pd's verdict and the figure that decided each side): first among the notes in JSON, no warnings
    lead: tuple[str | Note, ...] = ()
    # printed after the tables and charts, before the notes
    verbatim: tuple[Verbatim, ...] = ()

    def lead_notes(self) -> tuple[str | Note, ...]:
        """The lines printed before the tables: the lead, then the warnings when ``warnings_first``."""
        return self.lead + (self.warnings if self.warnings_first else ())

    def tail_notes(self) -> tuple[str | Note, ...]:
        """The notes printed under the tables: the warnings (unless printed first), then the notes."""
        return self.notes if self.warnings_first else self.warnings + self.notes

    def all_notes(self) -> tuple[str | Note, ...]:
        """The lead, the warnings, then the notes: every note a format without a place before the tables prints."""
        return self.lead + self.warnings + self.notes

    def primary_table(self) -> Table:
        for table in self.tables:
            if table.primary:
                return table
        return self.tables[0]

    def derivations(self) -> dict[str, tuple[Value, Derivation]]:
        """Every derivation in ``data`` by JSON path; for a list, the first row's stands for the rest."""
        found: dict[str, tuple[Value, Derivation]] = {}
        for path, value in walk_values(self.data):
            if value.why is not None and path not in found:
                found[path] = (value, value.why)
        return found


def walk_values(obj: Any, path: str = "") -> Iterator[tuple[str, Value]]:
    """(JSON path, value) for every typed value inside nested dicts and lists; list items share ``name[]``."""
    if isinstance(obj, Value):
        yield path, obj
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield from walk_values(item, f"{path}.{key}" if path else str(key))
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from walk_values(item, f"{path}[]")
