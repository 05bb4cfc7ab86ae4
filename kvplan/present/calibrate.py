"""``kvplan calibrate`` presentation: every compared figure (measured, kvplan before and after the fit, errors),
the fitted factors and reserve with their residuals, and each run's load."""

from __future__ import annotations

from kvplan.calc.calibrate import CalibratePlan
from kvplan.present.common import scenario_data
from kvplan.render.result import Result, Table
from kvplan.specs.values import Tokens, Value, default, note

FACTOR_LABELS = {"hbm": "hbm (fraction of HBM bandwidth)", "mfu": "mfu (fraction of the dense peak)",
                 "overhead_us_per_step": "per-step overhead (us)",
                 "prefill_mfu": "prefill_mfu (fraction of the dense peak in prefill)"}


def present(plan: CalibratePlan, settings_notes: tuple[str, ...] = (), settings_warnings: tuple[str, ...] = ()
            ) -> Result:
    s = plan.scenario
    figures = Table("Measured against kvplan (error = (kvplan - measured) / measured)",
                    ("figure", "source", "measured", "kvplan", "error", "after fit", "error after", "status"),
                    tuple((c.figure, _short(c.source), c.measured if c.measured is not None else "-",
                           c.before if c.before is not None else "-", c.error_before if c.error_before is not None
                           else "-", c.after if c.after is not None else "-",
                           c.error_after if c.error_after is not None else "-", c.status)
                          for c in plan.compared), primary=True)
    fit = plan.step_fit
    factor_rows: list[tuple[str, Value, Value, str]] = [
        (FACTOR_LABELS[k], plan.prior[k], plan.fitted[k], "fitted" if k in plan.free else "kept (not fitted)")
        for k in FACTOR_LABELS]
    if plan.reserve is not None:
        r = plan.reserve
        factor_rows.append(("runtime reserve per GPU", r.reserve_before, r.reserve_fitted, "fitted to the logged pool"))
    factors = Table("Fitted values", ("value", "before", "after", "how"), tuple(factor_rows))
    loads = Table("Each run's load per replica", ("run", "tool", "requests in flight", "mean prompt",
                                                 "mean output", "how"),
                  tuple((_short(ld.run.source), ld.run.tool, ld.batch_value,
                         Tokens(ld.prompt, default("the run's mean input")),
                         Tokens(ld.decode, default("the run's mean output")), ld.how)
                        for ld in plan.loads))
    tables = [figures, factors] + ([loads] if plan.loads else [])
    notes: list = list(settings_notes) + list(plan.notes)
    if fit is not None and plan.rms is not None:
        notes.append(note("Step factors fitted to {n} run(s): rms relative error {rms:.1%} after the fit.",
                          n=_count(len(fit.points)), rms=plan.rms))
    if plan.reserve is not None:
        notes.append(note("Runtime reserve {reserve:GiB:,.2f} per GPU reproduces the logged pool (residual "
                          "{residual:GiB:+,.3f}).", reserve=plan.reserve.reserve_fitted,
                          residual=plan.reserve.residual))
    notes += [f"{c.figure} ({c.source}): {c.why}." for c in plan.compared if c.status == "not comparable"]
    data = {
        **scenario_data(s),
        "sources": list(plan.sources),
        "compared": [{"figure": c.figure, "source": c.source, "status": c.status, "why": c.why,
                      "measured": c.measured, "kvplan_before": c.before, "kvplan_after": c.after,
                      "error_before": c.error_before, "error_after": c.error_after} for c in plan.compared],
        "fitted": {k: plan.fitted[k] for k in plan.free},
        "prior": dict(plan.prior),
        "step_fit": None if fit is None else {"rms_relative_error": plan.rms, "iterations": _count(fit.iterations),
                                              "points": list(plan.fit_points)},
        "memory": None if plan.reserve is None else {
            "logged_pool_bytes": plan.reserve.logged_pool, "predicted_pool_bytes": plan.reserve.predicted_pool,
            "runtime_reserve_bytes_before": plan.reserve.reserve_before,
            "runtime_reserve_bytes": plan.reserve.reserve_fitted, "pool_after_bytes": plan.reserve.pool_after,
            "residual_bytes": plan.reserve.residual},
        "runs": [{"source": ld.run.source, "tool": ld.run.tool, "batch_per_replica": ld.batch_value,
                  "prompt_tokens": Tokens(ld.prompt, default("the run's mean input")),
                  "decode_tokens": Tokens(ld.decode, default("the run's mean output"))} for ld in plan.loads],
    }
    brief = tuple((f"{c.figure} error ({_short(c.source)})", c.error_before) for c in plan.compared
                  if c.error_before is not None and c.status == "fitted") + tuple((f"fitted {k}", plan.fitted[k])
                                                                                for k in plan.free)
    if plan.reserve is not None:
        brief += (("fitted runtime reserve", plan.reserve.reserve_fitted),)
    assumptions = (
        "TPOT: kvplan tpot's steady batch (contexts spread over the run's mean prompt .. prompt + output) at the run's "
        "requests in flight per replica; a rate-driven run's from Little's law (completed/s x mean E2E).",
        "TTFT: one prefill in chunks of max_num_batched_tokens; under load the measured one also queues.",
        "The memory reserve is fitted as the runtime reserve; the fitted factors apply to this model on this GPU.",
    )
    # the scenario's default request is no run's: each run is compared at its own mean prompt and output
    lengths = "each run's own request lengths" if plan.loads else "no benchmark run"
    return Result("calibrate", s.headline(lengths), data, tuple(tables), tuple(notes), assumptions, (), brief,
                  tuple(settings_warnings), warnings_first=True)


def _short(source: str) -> str:
    """A source as the table shows it: the file's name (with its line), the folder left to the JSON."""
    return source.replace("\\", "/").rsplit("/", 1)[-1]


def _count(n: int):
    from kvplan.specs.values import Count

    return Count(n, default("counted"))
