"""Figures belong to plans, text to the output layer (issue 17).

* No presenter (kvplan/present/) computes a figure or formats a number: no ``derived(`` call and no ``format_*``
  number formatter; they arrange the plan's typed values (and ``Note``s of them) into a Result.
* F-string number formats (``{x:,}``, ``{t * 1e3:.1f}``) left in the calculators and presenters, outside
  derivation text (``derived``/``default``/``given``) and refusals (``KvplanError``), are counted per module
  against a ceiling that can only go down: a note that carries a number carries the typed value
  (``kvplan.specs.values.note``), which the output layer formats per ``--units``. The count is an upper bound:
  derivation text built into a variable before it reaches ``derived`` counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent / "kvplan"
SKIP_CALLS = {"derived", "Derivation", "default", "given", "KvplanError", "DoesNotFit"}   # refusals: KvplanErrors

# present/ modules another piece of work still has to convert (each entry says why); the list can only shrink
EXEMPT_PRESENTERS: dict[str, str] = {}

# f-string number formats left per module (counted by number_formats below). Lower a ceiling when you convert a
# module's notes; never raise one: give the note typed values instead.
CEILINGS = {
    "calc/calibrate.py": 0, "calc/capacity.py": 5, "calc/check.py": 6,
    "calc/concurrency.py": 0, "calc/costs.py": 0, "calc/explain_log.py": 0, "calc/flops.py": 4, "calc/kv.py": 0,
    "calc/pd.py": 1, "calc/preemption.py": 2, "calc/recommend.py": 1, "calc/simulate.py": 0, "calc/size.py": 17,
    "calc/sizing.py": 2, "calc/tpot.py": 1, "engines/budget.py": 9, "inputs/workload.py": 10,
    "present/__init__.py": 0, "present/check.py": 0, "present/common.py": 2, "present/concurrency.py": 1,
    "present/explain_log.py": 0, "present/pd.py": 1, "present/preemption.py": 0, "present/presets.py": 0,
    "present/recommend.py": 0, "present/simulate.py": 5, "present/size.py": 0, "present/tpot.py": 1,
}


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def number_formats(source: str) -> int:
    """F-string fields with a format spec, and format_* calls, outside derivation text and refusals."""
    found = 0

    def visit(node: ast.AST, skipped: bool) -> None:
        nonlocal found
        if isinstance(node, ast.Call) and _name(node.func) in SKIP_CALLS:
            skipped = True
        if not skipped and (isinstance(node, ast.FormattedValue) and node.format_spec is not None
                            or isinstance(node, ast.Call) and _name(node.func).startswith("format_")):
            found += 1
        for child in ast.iter_child_nodes(node):
            visit(child, skipped)

    visit(ast.parse(source), False)
    return found


def computing_calls(source: str) -> list[str]:
    """``derived(`` calls and ``format_*`` formatters a module calls or imports."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and (_name(node.func) == "derived" or _name(node.func).startswith("format_")):
            out.append(f"line {node.lineno}: {_name(node.func)}(")
        if isinstance(node, ast.ImportFrom):
            out += [f"line {node.lineno}: imports {a.name}" for a in node.names
                    if a.name == "derived" or a.name.startswith("format_")]
    return out


def test_the_counters_see_what_they_count():
    # two formatted fields; the one inside derived() and the refusal do not count; a format_* call does
    src = ('x = f"{a:,} and {b:.2f}"\ny = derived("f", f"{c:,}")\nraise KvplanError(f"{d:,}")\n'
           'z = format_bytes(1)\nw = f"{e}"\n')
    assert number_formats(src) == 3
    assert computing_calls(src) == ["line 2: derived(", "line 4: format_bytes("]
    assert computing_calls("from kvplan.render.output import format_seconds as t\n") == [
        "line 1: imports format_seconds"]


def test_presenters_compute_no_figure_and_format_no_number():
    found = {}
    for path in sorted((ROOT / "present").glob("*.py")):
        calls = computing_calls(path.read_text())
        if path.name in EXEMPT_PRESENTERS:
            assert calls, f"present/{path.name} is clean now: remove it from EXEMPT_PRESENTERS"
        elif calls:
            found[path.name] = calls
    assert not found, f"presenters that compute or format (move it into the plan, or use a Note): {found}"


def test_number_formats_in_notes_only_go_down():
    # the calculators (the simulator's pieces included), the presenters, and the calculator-like modules that sit
    # lower for the layer rules: the budget waterfall, the replica and its scheduler, the request stream
    files = [*(ROOT / "calc").rglob("*.py"), *(ROOT / "present").glob("*.py"),
             *(ROOT / "engines" / name for name in ("budget.py", "replica.py", "scheduling.py")),
             ROOT / "inputs" / "workload.py"]
    counts = {str(p.relative_to(ROOT)): number_formats(p.read_text()) for p in sorted(files)}
    over = {m: (n, CEILINGS.get(m, 0)) for m, n in counts.items() if n > CEILINGS.get(m, 0)}
    assert not over, f"more f-string number formats than the ceiling (count, ceiling): {over}; give notes typed values"
    assert set(CEILINGS) <= set(counts), f"ceilings for modules that are gone: {set(CEILINGS) - set(counts)}"
