"""``kvplan check`` presentation: one table of assertions over every plan checked."""

from __future__ import annotations

from pathlib import Path

from kvplan.calc.check import CheckPlan, totals
from kvplan.present.common import scenario_data, spec_notes
from kvplan.render.result import Result, Table
from kvplan.specs.values import Note, Value, note


def present(plans: tuple[CheckPlan, ...], unit_column: bool = False) -> Result:
    """``unit_column``: add the unit of each row's raw numbers (for CSV, where cells are raw and one column mixes
    bytes, seconds and counts; tables and Markdown print each value with its unit already)."""
    rows: list[tuple[str | Value, ...]] = []   # plan, assertion, measured, op, bound, result, margin, unit
    data_plans = []
    for plan in plans:
        items = []
        for a in plan.assertions:
            rows.append((Path(plan.source).name, a.name, a.measured, a.op, a.bound, "pass" if a.passed else "FAIL",
                         a.margin, getattr(a.measured, "unit", "") or "-"))
            items.append({"name": a.name, "metric": a.metric, "op": a.op,
                          "measured": a.measured, "bound": a.bound, "passed": a.passed, "margin": a.margin,
                          "detail": a.detail})
        data_plans.append({"path": plan.source, "headline": plan.scenario.headline(),
                           "description": plan.description, "passed": plan.passed,
                           "scenario": scenario_data(plan.scenario), "assertions": items})
    first = plans[0].scenario.headline() if len(plans) == 1 else (
        f"kvplan check: {len(plans)} plans (" + ", ".join(Path(p.source).name for p in plans) + ")")
    total_v, failed_v, passed_v = totals(plans)
    failed = int(failed_v.value or 0)
    notes: list[str | Note] = [f"{p.source}: {p.scenario.headline()}" for p in plans] if len(plans) > 1 else []
    notes += [f"{a.name}: " + a.detail + (f" ({Path(p.source).name})" if len(plans) > 1 else "")
              for p in plans for a in p.assertions if not a.passed]
    notes.append(note("{passed:d} of {total:d} assertion(s) passed", passed=passed_v, total=total_v)
                 + (note("; {failed:d} failed.", failed=failed_v) if failed else "."))
    notes.append("Margin: measured - bound for >=, bound - measured for <= (positive = headroom); for true/false "
                 "metrics, the room on the figure the answer rests on.")
    # the unit column says what the raw numbers of measured, bound and margin are in (CSV and JSON carry raw
    # numbers; one column mixes bytes, seconds and counts)
    columns: tuple[str, ...] = ("plan", "assertion", "measured", "op", "bound", "result", "margin", "unit")
    if not unit_column:
        columns, rows = columns[:-1], [row[:-1] for row in rows]
    if len(plans) == 1:   # one plan: its name is in the headline already
        columns, rows = columns[1:], [row[1:] for row in rows]
    table = Table("kvplan check: assertions", columns, tuple(rows), primary=True)
    assumptions = tuple(dict.fromkeys(n for p in plans for n in spec_notes(p.scenario)))
    fails = []
    for p in plans:
        for a in p.assertions:
            if not a.passed:
                where = f" ({Path(p.source).name})" if len(plans) > 1 else ""
                fails += [(f"FAIL {a.name}{where}: measured", a.measured), (f"  bound ({a.op})", a.bound)]
    return Result("check", first, {"passed": failed == 0, "assertions_total": total_v, "assertions_failed": failed_v,
                                   "plans": data_plans},
                  (table,), tuple(notes), assumptions,
                  brief=(("assertions", total_v), ("failed", failed_v), *fails))
