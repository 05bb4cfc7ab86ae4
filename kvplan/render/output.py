"""The one output layer: every command's ``Result`` rendered as tables, JSON, CSV or Markdown.

Only this module turns numbers into text. Typed values (``kvplan.specs.values``) are formatted per format and
``--units``: tables and Markdown print ``1.01 GiB``, ``1,024``, ``12.5 ms``, ``3.20x``; CSV and JSON carry the
raw number (units in the CSV header, ``context tokens (tokens)``, or in the JSON key name). Every format
starts with the result's headline (the deployment and KV dtype); in CSV it is a ``#`` comment line.

Tables fit the width: the terminal's, or ``COLUMNS`` when piped (80 when neither says). Text columns wrap;
number columns never split. A terminal gets rich (bold titles and headers); output that is not a terminal
prints no styles, and ``kvplan.render.textlayout`` writes the same text without importing rich.
"""

from __future__ import annotations

import io
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from kvplan.inputs.units import format_bytes
from kvplan.render.result import Result, Table
from kvplan.specs.values import (
    Bandwidth,
    Bytes,
    Count,
    Figure,
    Flops,
    Fraction,
    Note,
    Number,
    Rate,
    Ratio,
    Seconds,
    TokenBytes,
    Tokens,
    UsdPerHour,
    Value,
)

FORMATS = ("table", "json", "csv", "markdown")
DEFAULT_WIDTH = 80


# --- numbers as text -------------------------------------------------------------------------------------------
def format_seconds(seconds: float) -> str:
    if seconds == 0:
        return "0 s"
    a = abs(seconds)
    if a < 1e-3:
        return f"{seconds * 1e6:,.1f} us"
    if a < 1:
        return f"{seconds * 1e3:,.2f} ms"
    if a < 600:
        return f"{seconds:,.2f} s"
    if a < 7200:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.1f} h"


# a time with its unit (a note's ``{t:time:,.1f}``): the unit that keeps the number short; a TTFT of minutes is
# never printed as hundreds of thousands of milliseconds
_TIME_UNITS = ((1e-3, 1e6, "us"), (10.0, 1e3, "ms"), (600.0, 1.0, "s"), (7200.0, 1 / 60, "min"))


def time_text(seconds: float, number: str = ",.1f") -> str:
    """Seconds as text with the unit that suits them: us below 1 ms, ms below 10 s, s below 10 min, min below 2 h,
    else h; each in the format ``number``."""
    a = abs(seconds)
    for below, times, name in _TIME_UNITS:
        if a < below and (a or name == "ms"):      # zero in ms (a wait of none: "0.0 ms")
            return f"{format(seconds * times, number)} {name}"
    return f"{format(seconds / 3600, number)} h"


def format_flops(flop: float) -> str:
    for scale, name in ((1e18, "EFLOP"), (1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP")):
        if abs(flop) >= scale:
            return f"{flop / scale:,.3g} {name}"
    return f"{flop:,.3g} FLOP"


# scale words of a note's figure: (multiply, divide), so that 50e9 / 1e9 prints 50 as the old text did
_SCALES = {"ms": (1e3, 1), "us": (1e6, 1), "k": (1, 1e3), "M": (1, 1e6), "G": (1, 1e9), "T": (1, 1e12)}
_BYTE_UNITS = {"KiB": (2 ** 10, "kB", 1e3), "MiB": (2 ** 20, "MB", 1e6), "GiB": (2 ** 30, "GB", 1e9),
               "TiB": (2 ** 40, "TB", 1e12)}


def figure_text(figure: Figure, units: str = "iec") -> str:
    """One typed value of a note as text (``kvplan.specs.values.note`` describes the specs)."""
    value, spec = figure.value, figure.spec
    if not spec or value.value is None:
        return text(value, units)
    v = value.value
    if isinstance(value, Bytes):
        unit, _, number = spec.partition(":")
        if unit in _BYTE_UNITS:
            iec, si_name, si = _BYTE_UNITS[unit]
            size, name = (iec, unit) if units == "iec" else (si, si_name)
            return f"{format(v / size, number or ',.2f')} {name}"
        if spec.startswith(".") and spec[1:].isdigit():
            return format_bytes(v, units, int(spec[1:]))
    scale, sep, number = spec.partition(":")
    if sep and scale == "time":
        return time_text(v, number)
    if sep and scale in _SCALES:
        times, over = _SCALES[scale]
        return format(v * times / over if over != 1 else v * times, number)
    return format(v, spec)


def note_text(item: str | Note, units: str = "iec") -> str:
    """A note, assumption, warning or reason as text: its typed values formatted per ``units``."""
    if isinstance(item, Note):
        return "".join(p if isinstance(p, str) else figure_text(p, units) for p in item.parts)
    return item


def text(value: Any, units: str = "iec") -> str:
    """A cell or figure as text for tables, Markdown and --explain."""
    if isinstance(value, Note):
        return note_text(value, units)
    if isinstance(value, Value):
        v = value.value
        if v is None:
            return "-"
        if isinstance(v, float) and not math.isfinite(v):
            return "inf" if v > 0 else "-inf" if v < 0 else "-"
        if isinstance(value, TokenBytes):
            return f"{int(v):,} B"
        if isinstance(value, Bytes):
            return format_bytes(v, units)
        if isinstance(value, (Tokens, Count)):
            return f"{int(v):,}"
        if isinstance(value, Seconds):
            return format_seconds(v)
        if isinstance(value, Ratio):
            return f"{v:,.2f}x"
        if isinstance(value, Fraction):
            return f"{v:.1%}"
        if isinstance(value, Bandwidth):
            return f"{v / 1e12:,.2f} TB/s"
        if isinstance(value, Rate):
            return f"{v / 1e9:,.2f} GB/s"
        if isinstance(value, UsdPerHour):
            return f"${v:,.2f}/h"
        if isinstance(value, Flops):
            return format_flops(v)
        if isinstance(value, Number):
            return f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:,.4g}"
        return f"{v:,}" if isinstance(v, int) else f"{v:,.4g}"
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}"
    return str(value)


def raw(value: Any, units: str = "iec") -> Any:
    """The JSON / CSV form of a cell or a data tree: typed values become plain numbers (a note its text, per
    ``units``); JSON has no infinity."""
    if isinstance(value, Value):
        return value.raw()
    if isinstance(value, Note):
        return note_text(value, units)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: raw(v, units) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [raw(v, units) for v in value]
    return value


def _as_text(table: Table, units: str) -> Table:
    """The table with its title and column headers as text (either may be a ``Note`` carrying figures); the
    functions below take tables that went through it (``_headers``, ``_title``)."""
    if isinstance(table.title, str) and all(isinstance(c, str) for c in table.columns):
        return table
    from dataclasses import replace

    return replace(table, title=note_text(table.title, units),
                   columns=tuple(note_text(c, units) for c in table.columns))


def _headers(table: Table) -> tuple[str, ...]:
    """The column headers of a table ``_as_text`` returned (text by then)."""
    return tuple(c if isinstance(c, str) else note_text(c) for c in table.columns)


def _title(table: Table) -> str:
    return table.title if isinstance(table.title, str) else note_text(table.title)


def _column_type(table: Table, i: int) -> type | None:
    """The one typed-value class of a column (ignoring blanks), or None for text or mixed columns."""
    kinds = {type(row[i]) for row in table.rows if isinstance(row[i], Value)}
    texts = [row[i] for row in table.rows if not isinstance(row[i], Value) and row[i] not in (None, "", "-")]
    if len(kinds) == 1 and not texts:
        return kinds.pop()
    return None


def _is_number_column(table: Table, i: int) -> bool:
    if not table.rows:
        return False
    cells = [row[i] for row in table.rows]
    return all(isinstance(c, (Value, int, float)) and not isinstance(c, bool) or c in (None, "", "-", "n/a")
               for c in cells) and any(isinstance(c, (Value, int, float)) for c in cells)


# --- formats ---------------------------------------------------------------------------------------------------
def to_json(result: Result, units: str = "iec") -> str:
    derivations = {path: {"value": value.raw(), **why.to_dict()} for path, (value, why) in
                   result.derivations().items()}
    doc = {"command": result.command, "headline": result.headline, **raw(result.data, units),
           "warnings": [note_text(n, units) for n in result.warnings],
           "notes": [note_text(n, units) for n in result.all_notes()],
           "assumptions": [note_text(n, units) for n in result.assumptions], "derivations": derivations}
    import json  # here: the table path needs neither json nor csv

    return json.dumps(doc, indent=2, allow_nan=False)


def csv_header(col: str | Note) -> str:
    """A CSV column header: a figure in it as its raw number and unit (``1024 tokens``, not ``1,024``), so the
    header reads as plain text like the cells under it."""
    if isinstance(col, str):
        return col
    return "".join(p if isinstance(p, str) else f"{p.value.raw()} {p.value.unit}".strip() for p in col.parts)


def brief_json(result: Result, units: str = "iec") -> str:
    """``--brief -f json``: the headline figures as a list of {figure, value, unit}, the value the raw number (a
    typed value's base unit in ``unit``: bytes, seconds, tokens...; null for a count, a ratio or text), then the
    warnings that qualify them."""
    figures = []
    for label, value in result.brief:
        unit = getattr(value, "unit", "") if isinstance(value, Value) else ""
        figures.append({"figure": note_text(label, units).strip(), "value": raw(value, units), "unit": unit or None})
    doc = {"command": result.command, "headline": result.headline, "brief": figures,
           "warnings": [note_text(n, units) for n in result.warnings]}
    import json

    return json.dumps(doc, indent=2, allow_nan=False)


def to_csv(result: Result) -> str:
    import csv
    from dataclasses import replace

    primary = result.primary_table()
    table = replace(primary, columns=tuple(csv_header(c) for c in primary.columns))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    buf.write(f"# {result.headline}\n")
    header = []
    for i, col in enumerate(_headers(table)):
        kind = _column_type(table, i)
        unit = getattr(kind, "unit", "") if kind else ""
        header.append(f"{col} ({unit})" if unit and unit not in col else col)
    writer.writerow(header)
    for row in table.rows:
        writer.writerow(["" if (c := raw(v)) is None else c for v in row])
    return buf.getvalue()


def _md_escape(text_: str) -> str:
    return text_.replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table, units: str) -> str:
    table = _as_text(table, units)
    lines = [f"### {_title(table)}", "", "| " + " | ".join(_md_escape(c) for c in _headers(table)) + " |",
             "|" + "|".join("---:" if _is_number_column(table, i) and i else "---"
                            for i in range(len(_headers(table)))) + "|"]
    lines += ["| " + " | ".join(_md_escape(text(v, units)) for v in row) + " |" for row in table.rows]
    return "\n".join(lines)


def to_markdown(result: Result, explain: bool = False, units: str = "iec") -> str:
    parts = [f"**{_md_escape(result.headline)}**"]
    if result.lead_notes():
        parts.append("\n".join(f"- {note_text(n, units)}" for n in result.lead_notes()))
    parts += [_md_table(t, units) for t in result.tables if t.shown_in("markdown")]
    parts += [f"### {v.title}\n\n```{v.language}\n{v.text}\n```" for v in result.verbatim]
    if result.tail_notes():
        parts.append("\n".join(f"- {note_text(n, units)}" for n in result.tail_notes()))
    if explain:
        parts.append("\n".join(["### How each figure was derived", ""] + _explain_lines(result, units, "- ")))
    return "\n\n".join(parts) + "\n"


def _explain_lines(result: Result, units: str, bullet: str) -> list[str]:
    lines, inputs = [], []
    for path, (value, why) in result.derivations().items():
        shown = text(value, units)
        if why.kind != "computed":
            inputs.append(f"{bullet}{path} = {shown}: {why.formula}")
            continue
        lines.append(f"{bullet}{path} = {shown}")
        lines.append(f"    formula: {why.formula}")
        if why.substituted:
            lines.append(f"    numbers: {why.substituted}")
    lines += ["", "Inputs and defaults"] + inputs
    lines += ["", "Assumptions"] + [f"{bullet}{note_text(a, units)}" for a in result.assumptions]
    sources = sorted({s for _, why in result.derivations().values() for s in why.sources})
    lines += ["", "Sources"] + [f"{bullet}{s}" for s in sources]
    return lines


SPARK = "▁▂▃▄▅▆▇█"


def sparklines(chart) -> str:
    """A timeline: one line per series, one cell per x slice, eight levels from 0 to the series' own peak."""
    name_w = max(len(name) for name, _ in chart.series)
    lines = [chart.title]
    for name, values in chart.series:
        peak = max(values, default=0)
        cells = "".join(SPARK[min(int(v / peak * len(SPARK)), len(SPARK) - 1)] if peak > 0 else SPARK[0]
                        for v in values)
        lines.append(f"  {name.ljust(name_w)} {cells} peak {peak:,.3g}")
    span = len(chart.x_values)
    first, last = chart.x_values[0], f"{chart.x_values[-1]} {chart.x_label}"
    lines.append(f"  {' ' * name_w} {first}{last.rjust(max(span - len(first), len(last) + 1))}")
    return "\n".join(lines)


def terminal_chart(chart, width: int = 40) -> str:
    """Horizontal bars on a linear scale (the longest bar is ``width`` cells), one line per series and x."""
    if chart.timeline:
        return sparklines(chart)
    peak = max((v for _, values in chart.series for v in values), default=0) or 1
    label_w = max(len(x) for x in chart.x_values)
    name_w = max(len(name) for name, _ in chart.series)
    lines = [f"{chart.title}"]
    for i, x in enumerate(chart.x_values):
        for j, (name, values) in enumerate(chart.series):
            value = values[i]
            cells = max(value, 0) / peak * width
            bar = "█" * int(cells) + ("▌" if cells - int(cells) >= 0.5 else "")
            head = x.rjust(label_w) if j == 0 else " " * label_w
            lines.append(f"  {head}  {name.ljust(name_w)} {bar} {value:,.0f}")
    if chart.y_label:
        lines.append(f"  ({chart.y_label}; linear scale)")
    return "\n".join(lines)


def output_width(file) -> int:
    """``COLUMNS`` when set to a sane number, else the terminal's width, else 80."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and 20 <= int(env) <= 1000:
        return int(env)
    try:
        if file.isatty():
            return max(20, os.get_terminal_size(file.fileno()).columns)
    except (AttributeError, OSError, ValueError):
        pass
    return DEFAULT_WIDTH


def _column_widths(table: Table, rows: list[list[str]]) -> list[tuple[int, int, bool]]:
    """(minimum, natural, is-number) width of each column, from the table's cells as text (``rows``): a number
    column is never narrower than its widest cell; a text column may wrap down to its longest word (at most 14)."""
    out = []
    for i, col in enumerate(_headers(table)):
        cells = [row[i] for row in rows]
        number = bool(i) and _is_number_column(table, i)
        natural = max([len(c) for c in cells] + [len(col)])
        if number:  # rich keeps a header's longest word whole where it can: count it
            low = max([len(c) for c in cells] + [min(len(w), 14) for w in col.split()])
        else:
            words = [w for c in cells + [col] for w in c.split()]
            low = min(max(map(len, words), default=1), 14)
        out.append((low, natural, number))
    return out


def _layout_columns(table: Table, cols: list[int], widths) -> list:
    """The ``textlayout`` columns of ``table``'s columns ``cols``: numbers right-justified, and no column narrower
    than its ``low`` width plus its padding (rich's ``min_width`` counts the padding, one space each side)."""
    from kvplan.render.textlayout import Column

    return [Column(_headers(table)[i], right=widths[i][2], min_width=widths[i][0] + 2, first=n == 0)
            for n, i in enumerate(cols)]


def _rich_table(title: str, columns, rows: list[list[str]]):
    from rich import box
    from rich.table import Table as RichTable

    rt = RichTable(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, collapse_padding=True)
    for column in columns:
        rt.add_column(column.header, justify="right" if column.right else "left", overflow="fold",
                      min_width=column.min_width)
    for row in rows:
        rt.add_row(*row)
    return rt


# The characters a line a text column keeps before a table's optional columns give way (Table.optional).
TEXT_ROOM = 24


def _dropped(table: Table, cells: list[list[str]], widths, widest: list[int], width: int) -> set[int]:
    """The optional columns left out at this width: the last first, while the columns kept exceed the width, each
    counted at its widest cell, a text column's capped at ``TEXT_ROOM`` or its longest word (it would fold a word
    narrower), each padded by 2, plus the box."""
    def room(k: int) -> int:
        if widths[k][2]:
            return widest[k]
        longest_word = max((len(w) for row in cells for w in row[k].split()), default=0)
        return min(widest[k], max(TEXT_ROOM, longest_word))

    shown, dropped = list(range(len(widths))), set()
    for i in reversed(table.optional):
        if sum(room(k) + 2 for k in shown) + len(shown) + 1 <= width:
            break
        shown.remove(i)
        dropped.add(i)
    return dropped


def table_parts(table: Table, units: str, width: int) -> list[tuple[str, list, list[list[str]]]]:
    """(title, columns, rows of text) of the table as printed ``width`` columns wide: one part, or, when its
    narrowest layout is wider than the output, several that each repeat the first (key) column, so that a wide
    table prints in parts instead of being cropped."""
    from kvplan.render.textlayout import plain_ok, table_minimum

    table = _as_text(table, units)
    cells = [[text(v, units) for v in row] for row in table.rows]
    widths = _column_widths(table, cells)
    # one cell per character, as kvplan.render.textlayout lays out; else (wide characters) rich measures the text
    plain = plain_ok([*_headers(table), *(c for row in cells for c in row)], None)
    cell_len: Callable[[str], int] = len
    if not plain:
        from rich.cells import cell_len as rich_cell_len

        cell_len = rich_cell_len
    # Cheap bounds first: each column's minimum is at least its min_width (low + 2, padding included) and at most
    # its widest cell or header plus the padding (2); the box adds an edge each side and a divider between
    # columns. Only a group between the bounds is laid out.
    widest = [max([cell_len(row[i]) for row in cells] + [cell_len(col), low])
              for i, (col, (low, _, _)) in enumerate(zip(_headers(table), widths, strict=True))]

    def part(cols: list[int], title: str):
        return title, _layout_columns(table, cols, widths), [[row[i] for i in cols] for row in cells]

    def minimum(columns, rows) -> int:
        if plain:
            return table_minimum(columns, rows, width)
        from rich.console import Console

        console = Console(width=width, file=io.StringIO())
        return _rich_table("", columns, rows).__rich_measure__(console, console.options).minimum

    def fits(cols: list[int]) -> bool:
        edges = len(cols) + 1
        if sum(widest[i] + 2 for i in cols) + edges <= width - 6:
            return True
        if sum(widths[i][0] + 2 for i in cols) > width - 6:
            return False
        _, columns, rows = part(cols, "")
        return minimum(columns, rows) <= width - 6   # rich crops a table near its minimum

    everything = [i for i in range(len(widths)) if i not in _dropped(table, cells, widths, widest, width)]
    if len(everything) <= 2 or fits(everything):
        return [part(everything, _title(table))]
    groups, current = [], [0]
    for i in everything[1:]:
        if len(current) > 1 and not fits(current + [i]):
            groups.append(current)
            current = [0]
        current.append(i)
    groups.append(current)
    return [part(cols, _title(table) if n == 0 else "... continued") for n, cols in enumerate(groups)]


def _blocks(result: Result, explain: bool, units: str, width: int) -> list[tuple]:
    """What a table-format output prints, in order: ("headline", text), ("table", title, columns, rows),
    ("text", text), ("bold", text) and ("verbatim", text: printed as it is, never wrapped)."""
    blocks: list[tuple] = [("headline", result.headline)]
    blocks += [("text", f"• {note_text(note, units)}") for note in result.lead_notes()]
    for table in result.tables:
        if table.shown_in("table"):
            blocks += [("table", *p) for p in table_parts(table, units, width)]
    for chart in result.charts:
        blocks.append(("text", terminal_chart(chart, width=max(10, min(40, width - 40)))))
    for v in result.verbatim:
        blocks += [("bold", v.title), ("text", ""), ("verbatim", v.text), ("text", "")]
    blocks += [("text", f"• {note_text(note, units)}") for note in result.tail_notes()]
    if explain:
        blocks += [("text", ""), ("bold", "How each figure was derived")]
        blocks += [("text", line) for line in _explain_lines(result, units, "  - ")]
    return blocks


def _block_texts(blocks: list[tuple]):
    for block in blocks:
        if block[0] == "table":
            _, title, columns, rows = block
            yield title
            yield from (c.header for c in columns)
            yield from (cell for row in rows for cell in row)
        else:
            yield block[1]


def write_plain(blocks: list[tuple], out, width: int) -> None:
    """The blocks as unstyled text (``kvplan.render.textlayout``: rich's layout, without rich)."""
    from kvplan.render.textlayout import table_lines, text_lines

    lines: list[str] = []
    for block in blocks:
        if block[0] == "table":
            _, title, columns, rows = block
            lines += table_lines(title, columns, rows, width)
        elif block[0] == "verbatim":
            lines += block[1].split("\n")
        else:
            lines += text_lines(block[1], width)
    out.write("\n".join(lines) + "\n")


def write_rich(blocks: list[tuple], out, width: int) -> None:
    """The blocks through rich (a terminal: bold titles and headers, its colour rules)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:   # rich exits 1 on a closed pipe; let the command layer decide
            raise BrokenPipeError("the reader closed the pipe")

    console = _Console(file=out, width=width, soft_wrap=False, highlight=False, markup=False, emoji=False,
                       color_system="auto" if out.isatty() else None)
    for block in blocks:
        if block[0] == "table":
            console.print(_rich_table(*block[1:]))
        elif block[0] == "bold":
            console.print(block[1], style="bold")
        elif block[0] == "verbatim":
            console.print(block[1], soft_wrap=True)   # no wrapping: a pasted line must stay whole
        elif block[1]:
            console.print(block[1])
        else:
            console.print()


def print_table(result: Result, explain: bool = False, file=None, units: str = "iec") -> None:
    """The table format: rich on a terminal; anywhere else (no styles to print) the same text from
    ``kvplan.render.textlayout``, which does not import rich."""
    from kvplan.render.textlayout import plain_ok

    out = file or sys.stdout
    width = output_width(out)
    blocks = _blocks(result, explain, units, width)
    if not out.isatty() and plain_ok(_block_texts(blocks), getattr(out, "encoding", None)):
        write_plain(blocks, out, width)
    else:
        write_rich(blocks, out, width)


def print_brief(result: Result, file=None, units: str = "iec") -> None:
    from kvplan.render.textlayout import text_lines

    out = file or sys.stdout
    width = output_width(out)
    out.write("\n".join(text_lines(result.headline, width)) + "\n")
    out.writelines(line + "\n" for lead in result.lead for line in text_lines(note_text(lead, units), width))
    warnings = [f"warning: {note_text(warning, units)}\n" for warning in result.warnings]
    if result.warnings_first:
        out.writelines(warnings)
    for label, value in result.brief:
        out.write(f"{note_text(label, units)}: {text(value, units)}\n")
    if not result.warnings_first:
        out.writelines(warnings)


def render(result: Result, fmt: str = "table", explain: bool = False, file=None, units: str = "iec",
           brief: bool = False) -> None:
    out = file or sys.stdout
    if fmt == "json":
        out.write((brief_json(result, units) if brief else to_json(result, units)) + "\n")
    elif fmt == "csv":
        out.write(to_csv(result))
    elif fmt == "markdown":
        out.write(to_markdown(result, explain, units))
    elif brief:
        print_brief(result, out, units)
    else:
        print_table(result, explain, file=out, units=units)
    out.flush()


def to_junit(result: Result, units: str = "iec") -> str:
    """JUnit XML of a ``kvplan check`` result: one test suite per plan, one test case per assertion, the failure
    message naming the measured value and the bound (numbers as the table prints them)."""
    import xml.etree.ElementTree as ET

    plans = result.data["plans"]
    root = ET.Element("testsuites", name="kvplan check", tests=str(sum(len(p["assertions"]) for p in plans)),
                      failures=str(sum(not a["passed"] for p in plans for a in p["assertions"])))
    for plan in plans:
        items = plan["assertions"]
        suite = ET.SubElement(root, "testsuite", name=plan["path"], tests=str(len(items)),
                              failures=str(sum(not a["passed"] for a in items)), errors="0", skipped="0")
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="headline",
                      value=plan.get("headline", result.headline))
        for a in items:
            case = ET.SubElement(suite, "testcase", name=a["name"], classname=plan["path"])
            if not a["passed"]:
                message = (f"{a['name']}: measured {text(a['measured'], units)}, bound {a['op']} "
                           f"{text(a['bound'], units)} (margin {text(a['margin'], units)})")
                failure = ET.SubElement(case, "failure", message=message, type="AssertionFailed")
                failure.text = f"{message}\n{note_text(a['detail'], units)}"
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def junit_error(plan: str, message: str) -> str:
    """JUnit XML for a plan that could not be checked (exit 2): one test case in error, so CI shows why instead of
    a missing or stale report."""
    import re
    import xml.etree.ElementTree as ET

    clean = re.sub(r"[^\t\n\r\x20-\ud7ff\ue000-\ufffd]", "?", message)   # characters XML 1.0 allows
    root = ET.Element("testsuites", name="kvplan check", tests="1", failures="0", errors="1")
    suite = ET.SubElement(root, "testsuite", name=plan, tests="1", failures="0", errors="1", skipped="0")
    case = ET.SubElement(suite, "testcase", name="the plan is valid", classname=plan)
    ET.SubElement(case, "error", message=clean, type="InvalidPlan").text = clean
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of a dead pipe or a full disk is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
