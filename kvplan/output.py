"""One rendering layer for every command: rich table, JSON, CSV or Markdown.

Commands never format text themselves; they return a ``Result`` and the CLI calls ``render``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from typing import Any

from kvplan.result import Result, Table

FORMATS = ("table", "json", "csv", "markdown")


def _cell(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}"
    return str(value)


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such a float becomes null (the table shows it as inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def to_json(result: Result) -> str:
    return json.dumps(_finite(result.to_dict()), indent=2, allow_nan=False)


def to_csv(result: Result) -> str:
    table = result.primary_table()
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow([str(v) for v in row])
    return buf.getvalue()


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(table: Table) -> str:
    lines = [f"### {table.title}", "", "| " + " | ".join(_md_escape(c) for c in table.columns) + " |",
             "|" + "|".join("---" for _ in table.columns) + "|"]
    lines += ["| " + " | ".join(_md_escape(_cell(v)) for v in row) + " |" for row in table.rows]
    return "\n".join(lines)


def to_markdown(result: Result, explain: bool = False) -> str:
    parts = [_md_table(t) for t in result.tables]
    if result.notes:
        parts.append("\n".join(f"- {n}" for n in result.notes))
    if explain:
        parts.append(_explain_markdown(result))
    return "\n\n".join(parts) + "\n"


def _explain_markdown(result: Result) -> str:
    lines = ["### How each figure was derived", ""]
    for d in result.derivations:
        lines.append(f"- **{d.figure}** = {d.value}: `{d.formula}`; `{d.substituted}`")
    lines += ["", "Assumptions:"] + [f"- {a}" for a in result.assumptions]
    sources = sorted({s for d in result.derivations for s in d.sources})
    lines += ["", "Sources:"] + [f"- {s}" for s in sources]
    return "\n".join(lines)


def terminal_chart(chart, width: int = 40) -> str:
    """Horizontal bars, one block per x value, one line per series, on a log scale (the longest bar is
    ``width`` cells) so that small counts at long contexts stay visible."""
    peak = math.log10(1 + max((v for _, values in chart.series for v in values), default=0)) or 1
    label_w = max(len(x) for x in chart.x_values)
    name_w = max(len(name) for name, _ in chart.series)
    lines = [f"{chart.title}"]
    for i, x in enumerate(chart.x_values):
        for j, (name, values) in enumerate(chart.series):
            value = values[i]
            cells = math.log10(1 + max(value, 0)) / peak * width
            bar = "█" * int(cells) + ("▌" if cells - int(cells) >= 0.5 else "")
            head = x.rjust(label_w) if j == 0 else " " * label_w
            lines.append(f"  {head}  {name.ljust(name_w)} {bar} {value:,.0f}")
    if chart.y_label:
        lines.append(f"  ({chart.y_label}; bars on a log scale)")
    return "\n".join(lines)


def _looks_numeric(value: Any) -> bool:
    if isinstance(value, (int, float)):
        return True
    text = str(value)
    return text in ("-", "", "n/a") or text[:1].isdigit()


def _rich_table(table: Table):
    from rich.table import Table as RichTable

    rt = RichTable(title=table.title, title_justify="left", title_style="bold")
    for i, col in enumerate(table.columns):
        numeric = all(_looks_numeric(row[i]) for row in table.rows) if table.rows else False
        rt.add_column(col, justify="right" if numeric and i else "left", overflow="fold")
    for row in table.rows:
        rt.add_row(*(_cell(v) for v in row))
    return rt


def print_table(result: Result, explain: bool = False, file=None) -> None:
    from rich.console import Console

    console = Console(file=file or sys.stdout, width=None if (file or sys.stdout).isatty() else 160,
                      soft_wrap=False)
    for table in result.tables:
        console.print(_rich_table(table))
    for chart in result.charts:
        console.print(terminal_chart(chart), highlight=False, markup=False)
    for note in result.notes:
        console.print(f"• {note}", highlight=False, markup=False)
    if explain:
        console.print()
        console.print("How each figure was derived", style="bold")
        for d in result.derivations:
            console.print(f"  {d.figure} = {d.value}", style="bold", highlight=False, markup=False)
            console.print(f"    formula: {d.formula}", highlight=False, markup=False)
            console.print(f"    numbers: {d.substituted}", highlight=False, markup=False)
        console.print("Assumptions", style="bold")
        for a in result.assumptions:
            console.print(f"  - {a}", highlight=False, markup=False)
        console.print("Sources", style="bold")
        for s in sorted({s for d in result.derivations for s in d.sources}):
            console.print(f"  - {s}", highlight=False, markup=False)


def render(result: Result, fmt: str = "table", explain: bool = False, file=None) -> None:
    out = file or sys.stdout
    if fmt == "json":
        out.write(to_json(result) + "\n")
    elif fmt == "csv":
        out.write(to_csv(result))
    elif fmt == "markdown":
        out.write(to_markdown(result, explain))
    else:
        print_table(result, explain, file=out)
