"""``kvplan check``: a plan's assertions measured with the other commands' calculators.

``plan_check(scenario, assertions)`` returns a ``CheckPlan``: for each assertion its measured value (a typed value
carrying the derivation of the calculator that produced it), the bound, pass or fail, and the margin (positive =
headroom, in the measured value's own type). Nothing is priced here: the weights and pool come from the engine's
budget (``capacity``), concurrency from ``plan_concurrency``, bytes per request from ``plan_size``, TPOT from
``plan_tpot`` and swap vs recompute from ``plan_preemption``; each is computed at most once per plan.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kvplan.errors import DoesNotFit, KvplanError
from kvplan.inputs.plan_file import AssertSpec
from kvplan.scenario import Scenario
from kvplan.specs.values import (
    Bytes,
    Count,
    Fraction,
    Note,
    Number,
    Ratio,
    Seconds,
    Tokens,
    Value,
    default,
    derived,
    given,
    note,
)

if TYPE_CHECKING:
    from kvplan.calc.concurrency import ConcurrencyPlan
    from kvplan.calc.preemption import PreemptionPlan
    from kvplan.calc.simulate import SimPlan, SweepPlan
    from kvplan.calc.size import SizePlan
    from kvplan.calc.tpot import TpotPlan

T = TypeVar("T")
_BOUND_TYPES = {"count": Count, "bytes": Bytes, "seconds": Seconds, "fraction": Fraction, "number": Number,
                "rps": Number}
SIM_REQUESTS = 200          # a simulated assertion's requests unless it says (enough for a p99 over 2 requests)
SIM_USERS = 8               # closed-loop users unless it gives a rate (kvplan simulate's default)


@dataclass(frozen=True)
class AssertionResult:
    index: int
    name: str
    metric: str
    op: str                 # ">=", "<="; for true/false metrics the comparison the answer rests on ("<=", ">")
    measured: Value
    bound: Value
    passed: bool
    margin: Value           # measured - bound for ">=", bound - measured for "<="; None for true/false metrics
    detail: str | Note      # what was measured, in words (a Note when it carries a figure)


@dataclass(frozen=True)
class CheckPlan:
    scenario: Scenario
    source: str             # the plan file
    description: str
    assertions: tuple[AssertionResult, ...]

    @property
    def passed(self) -> bool:
        return all(a.passed for a in self.assertions)

    @property
    def failed(self) -> int:
        return sum(not a.passed for a in self.assertions)


class AssertionNotEvaluated(KvplanError):
    """A calculator's refusal of one assertion, in the plan's words, with where the plan states the assertion
    (``kvplan check`` points at that file and line)."""

    def __init__(self, message: str, hint: str | None, index: int, source: Path | None, key: str | None) -> None:
        super().__init__(message, hint)
        self.assert_index = index
        self.assert_source = source
        self.assert_key = key      # the assertion's own key the message names (batch, generated), if it gives it


class _Lazy:
    """Each calculator run at most once per plan."""

    def __init__(self, scenario: Scenario, workload: tuple = ()) -> None:
        self.s = scenario
        self.workload = dict(workload)
        self._cache: dict[Any, Any] = {}

    def get(self, key: object, make: Callable[[], T]) -> T:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]   # what ``make`` returned for this key

    def size(self) -> SizePlan:
        from kvplan.calc.size import plan_size

        return self.get("size", lambda: plan_size(self.s, (self.s.context_tokens,)))

    def concurrency(self) -> ConcurrencyPlan:
        from kvplan.calc.concurrency import ConcurrencyOptions, plan_concurrency

        options = ConcurrencyOptions(contexts=(self.s.context_tokens,))
        return self.get("concurrency", lambda: plan_concurrency(self.s, options))

    def tpot(self, batch: int | None, shape: str | None = None) -> TpotPlan:
        from kvplan.calc.tpot import TpotOptions, plan_tpot

        o = TpotOptions() if batch is None else TpotOptions(batch=batch)
        o = TpotOptions(batch=o.batch, shape=shape or o.shape, batches=(o.batch,), contexts=(self.s.context_tokens,))
        return self.get(("tpot", o.batch, o.shape), lambda: plan_tpot(self.s, o))

    def preemption(self, generated: int | None) -> PreemptionPlan:
        from kvplan.calc.preemption import plan_preemption

        s = self.s if generated is None else self.s.with_(decode_tokens=generated)
        return self.get(("preemption", s.decode_tokens), lambda: plan_preemption(s, sweep=(s.decode_tokens,)))


def sim_options(lazy: _Lazy, sim: tuple) -> dict:
    """The simulation an assertion asks for: the plan's [workload], then the assertion's own keys (its rate or
    users replace the workload's arrivals)."""
    from kvplan.inputs.plan_file import merge_workload

    return merge_workload(dict(lazy.workload), dict(sim))


def _workload(s: Scenario, o: dict, rate: float | None, users: int | None):
    """The requests an assertion simulates (``o``: its ``sim_options``), at ``rate`` or with ``users`` (a timed
    trace's own arrivals when both are None)."""
    from kvplan.inputs import workload as wl

    trace = wl.read_trace(Path(o["trace"])) if "trace" in o else None
    requests = o.get("requests", len(trace.prompts) if trace is not None else SIM_REQUESTS)
    pmax = omax = None
    sources: tuple = ()
    if "preset" in o:
        preset = wl.load_workload(o["preset"])
        prompt, output, pmax, omax, sources = (preset.prompt, preset.output, preset.prompt_max,
                                               preset.output_max, preset.sources)
    else:
        prompt = wl.parse_dist(o.get("prompt_dist", f"fixed:{s.prompt_tokens}"), "workload.prompt_dist")
        output = wl.parse_dist(o.get("output_dist", f"fixed:{s.decode_tokens}"), "workload.output_dist")
    return wl.build(requests=requests, seed=o.get("seed", 0), prompt=prompt, output=output,
                    max_len=s.context_limit or wl.MAX_TOKENS, prompt_max=pmax, output_max=omax, rate=rate,
                    users=users, trace=trace, sources=sources)


def _simulate(lazy: _Lazy, sim: tuple) -> SimPlan:
    from kvplan.calc.simulate import SimOptions, plan_simulate
    from kvplan.inputs import workload as wl

    o = sim_options(lazy, sim)
    s = lazy.s

    def run() -> SimPlan:
        timed = False
        if "trace" in o:
            timed = wl.read_trace(Path(o["trace"])).arrivals is not None
        rate = o.get("rate")
        users = o.get("users", None if rate is not None or timed else SIM_USERS)
        options = SimOptions(policy=o["policy"]) if "policy" in o else SimOptions()
        return plan_simulate(s, _workload(s, o, rate, users), options)

    return lazy.get(("simulate", tuple(sorted(o.items()))), run)


def _targets(a: AssertSpec):
    """The assertion's SLO keys (ttft_slo, tpot_slo, slo_percentile, slo_attainment) read as the flags are, named as
    the plan's keys in messages and derivations."""
    from kvplan.calc.slo import parse_targets

    keys = dict(a.slo)
    where = f"assert[{a.index}]."
    return parse_targets(ttft=keys.get("ttft_slo"), tpot=keys.get("tpot_slo"), percentile=keys.get("slo_percentile"),
                         attainment=keys.get("slo_attainment"),
                         names=tuple(where + k for k in ("ttft_slo", "tpot_slo", "slo_percentile", "slo_attainment")))


def _sweep(lazy: _Lazy, a: AssertSpec) -> SweepPlan:
    """goodput_rps: ``simulate --sweep-rate`` of the plan's workload (its arrivals replaced by each swept rate's
    Poisson arrivals) under the assertion's SLO targets (``kvplan.calc.slo``), in order in this process; at most
    ``SWEEP_MAX_POINTS`` rates of the workload's requests (200 unless it says), so a check stays a few seconds."""
    from kvplan.calc.simulate import SimOptions, parse_sweep, plan_sweep

    o = {k: v for k, v in sim_options(lazy, a.sim).items() if k not in ("rate", "users")}
    if "trace" in o:
        raise KvplanError(f"assert[{a.index}] ({a.name}): goodput_rps sweeps Poisson arrivals over the workload's "
                          "lengths, and a [workload] trace gives its own", "give the [workload] as prompt_dist / "
                          "output_dist or a preset")
    targets = _targets(a)
    assert a.sweep_rate is not None          # plan_file requires it for goodput_rps
    rates = parse_sweep(a.sweep_rate)
    s = lazy.s
    options = SimOptions(policy=o["policy"]) if "policy" in o else SimOptions()

    def run() -> SweepPlan:
        works = [(r, _workload(s, o, r, None)) for r in rates]
        return plan_sweep(s, works, options, None, None, workers=1, slo=targets)

    return lazy.get(("sweep", a.sweep_rate, tuple(sorted(o.items())), targets), run)


def plan_check(scenario: Scenario, assertions: tuple[AssertSpec, ...], source: str = "",
               description: str = "", workload: tuple = ()) -> CheckPlan:
    """``workload``: the plan's [workload] keys (``PlanFile.workload``), which sim_* assertions simulate."""
    lazy = _Lazy(scenario, workload)
    results = []
    for a in assertions:
        try:
            results.append(_evaluate(lazy, a, source))
        except KvplanError as err:  # the deployment cannot be priced for this assertion: say which one
            text = f"{err.message} {err.hint or ''}"
            named = [k for k in ("batch", "generated") if f"--{k}" in text] + [
                k for k in ("ttft_slo", "tpot_slo", "slo_percentile", "slo_attainment", "sweep_rate")
                if f"assert[{a.index}].{k}" in text]
            raise AssertionNotEvaluated(f"cannot evaluate assert[{a.index}] ({a.name}): {_own_keys(err.message, a)}",
                                        _own_keys(err.hint, a), a.index, a.source,
                                        named[0] if named and (getattr(a, named[0], None) is not None
                                                               or named[0] in dict(a.slo)) else None) from None
    return CheckPlan(scenario, source, description, tuple(results))


def _own_keys(text: str | None, a: AssertSpec) -> str | None:
    """A calculator's message names flags (``--batch``); in a plan they are the assertion's keys."""
    return None if text is None else re.sub(r"--(batch|generated)\b", rf"assert[{a.index}].\1", text)


def _bound_value(a: AssertSpec, source: str) -> Value:
    from kvplan.inputs.plan_file import METRICS

    cls = _BOUND_TYPES[METRICS[a.metric][0]]
    if a.within_baseline is not None:   # the baseline's value, made worse by the allowed fraction
        if a.baseline is None:
            raise KvplanError(f"assert[{a.index}] ({a.name}) gives within_baseline but its baseline value is not "
                              "filled in", "set the assertion's baseline from the plan's baseline file, as kvplan "
                                           "check does (write the file with kvplan check PLAN --update-baseline)")
        sign = "-" if a.op == ">=" else "+"
        bound = a.baseline * (1 - a.within_baseline if a.op == ">=" else 1 + a.within_baseline)
        if cls is Count:
            bound = math.ceil(bound) if a.op == ">=" else math.floor(bound)
        return cls(bound, derived(f"baseline x (1 {sign} within_baseline)",
                                  f"{a.baseline:.6g} x (1 {sign} {a.within_baseline:g}) = {bound:.6g}",
                                  f"{source} assert[{a.index}].within_baseline and its baseline file"))
    key = "at_least" if a.op == ">=" else "at_most"
    return cls(a.bound, given(f"{source} assert[{a.index}].{key}"))


def _compare(a: AssertSpec, measured: Value, bound: Value, detail: str | Note) -> AssertionResult:
    m = measured.value
    if m is None:   # a note's figures print only in the output layer: the derivation's numbers are text
        margin = type(measured)(None, derived("no measured value", detail if isinstance(detail, str) else "-"))
        return AssertionResult(a.index, a.name, a.metric, a.op, measured, bound, False, margin, detail)
    b = bound.number()
    if a.op == ">=":
        passed = m >= b
        margin = type(measured)(m - b, derived("measured - bound", f"{m:,} - {b:,} = {m - b:,}"))
    else:
        passed = m <= b
        diff = b - m
        shown = f"{b:.6g} - {m:.6g} = {diff:.6g}" if isinstance(diff, float) else f"{b:,} - {m:,} = {diff:,}"
        margin = type(measured)(diff, derived("bound - measured", shown))
    return AssertionResult(a.index, a.name, a.metric, a.op, measured, bound, passed, margin, detail)


def _weights_fit(s: Scenario, a: AssertSpec) -> AssertionResult:
    # the engine's own budget, without kv_pool's refusal: the room left for weights after the reserves
    b = s.engine_adapter.budget(s, s.sized_model, s.parallelism)
    detail = "weights per GPU against the engine's room for them (fraction x HBM less the reserves)"
    if b.given_pool:   # planned from a known pool: the weights are taken to fit beside it
        measured = Bytes(b.kv_pool_bytes, b.kv_pool.why)
        bound = Bytes(1, default("a KV pool given with kv_pool: the weights fit when the pool is at least 1 B"))
        diff = b.kv_pool_bytes - 1
        margin = Bytes(diff if a.bound else -diff, derived("KV pool - 1 B", f"{diff:,} B"))
        return AssertionResult(a.index, a.name, a.metric, ">=" if a.bound else "<", measured, bound,
                               b.fits == a.bound, margin, "the KV pool given with kv_pool")
    requested, activation, runtime = b.requested.number(), b.activation.number(), b.runtime.number()
    room = requested - activation - runtime
    weights = b.weights.number()
    measured = Bytes(weights, b.weights.why)
    bound = Bytes(room, derived(f"{b.fraction_name} x HBM - activation reserve - runtime reserve",
                                f"{requested:,} - {activation:,} - {runtime:,} = {room:,} B"))
    if a.bound:
        margin = Bytes(room - weights, derived("room - weights per GPU", f"{room:,} - {weights:,} = "
                                                                        f"{room - weights:,} B"))
    else:
        margin = Bytes(weights - room, derived("weights per GPU - room", f"{weights:,} - {room:,} = "
                                                                        f"{weights - room:,} B"))
    op = "<=" if a.bound else ">"
    return AssertionResult(a.index, a.name, a.metric, op, measured, bound, b.fits == a.bound, margin, detail)


def _swap_beats_recompute(lazy: _Lazy, a: AssertSpec) -> AssertionResult:
    p = lazy.preemption(a.generated)
    ratio = p.this.recompute_over_swap
    swap_wins = p.cheaper == "swap"
    bound = Ratio(1.0, default("swap beats recompute when recompute time / exposed swap time > 1 (and the "
                               "host tier holds the request)"))
    r = ratio.value
    if r is None:
        margin = Ratio(None, derived("no ratio", "-"))
    elif a.bound:
        margin = Ratio(r - 1.0, derived("recompute / swap - 1", f"{r:.4g} - 1"))
    else:
        margin = Ratio(1.0 - r, derived("1 - recompute / swap", f"1 - {r:.4g}"))
    generated = int(p.scenario.decode_tokens)
    detail = (note("recompute / exposed swap time for a request preempted after {generated} generated tokens",
                   generated=Tokens(generated))
              + ("" if p.host_fits is not False else "; the host tier cannot hold it"))
    op = ">" if a.bound else "<="
    return AssertionResult(a.index, a.name, a.metric, op, ratio, bound, swap_wins == a.bound, margin, detail)


def _pd_pays(lazy: _Lazy, a: AssertSpec) -> AssertionResult:
    """kvplan pd's verdict under the assertion's SLO keys, as ``kvplan pd --ttft-slo ... --tpot-slo ...`` gives it
    (none: pd's default, TPOT 50 ms at p99), so the gate and the command agree on one deployment."""
    from dataclasses import replace

    from kvplan.calc.pd import DEFAULT_TPOT_SLO, PdOptions, plan_pd

    targets = _targets(a)
    if targets.tpot is None:      # pd's own default, named as such
        targets = replace(targets, tpot=DEFAULT_TPOT_SLO, tpot_origin="kvplan pd's default TPOT SLO")
    d = lazy.get(("pd", targets), lambda: plan_pd(lazy.s, PdOptions(targets=targets)))
    t = d.options.targets
    assert t is not None      # PdOptions fills it in
    colo, disagg = d.colocated_tokens_per_second.number(), d.disaggregated_tokens_per_second.number()
    ratio = Ratio(disagg / colo if colo else None,
                  derived("disaggregated tokens/s / colocated tokens/s (kvplan pd's goodput under " + " and ".join(
                      f"{name} p{q} <= {v * 1e3:g} ms" for name, q, v in t.bounds()) + ")",
                          f"{disagg:,.6g} / {colo:,.6g}"))
    bound = Ratio(1.0, default("disaggregation pays when kvplan pd recommends it (its goodput beats colocated by "
                               "pd's margin under the assertion's SLO keys, else pd's default TPOT SLO)"))
    r = ratio.value
    margin = Ratio(None if r is None else (r - 1.0 if a.bound else 1.0 - r),
                   derived("disaggregated / colocated - 1" if a.bound else "1 - disaggregated / colocated",
                           "-" if r is None else f"{r:.4g}"))
    detail = "kvplan pd's verdict: " + (Note.join("; ", d.reasons) if d.reasons else
                                          ("disaggregate" if d.recommend else "do not disaggregate"))
    return AssertionResult(a.index, a.name, a.metric, ">" if a.bound else "<=", ratio, bound,
                           d.recommend == a.bound, margin, detail)


def _evaluate(lazy: _Lazy, a: AssertSpec, source: str) -> AssertionResult:
    s = lazy.s
    if a.metric == "weights_fit":
        return _weights_fit(s, a)
    if a.metric == "swap_beats_recompute":
        return _swap_beats_recompute(lazy, a)
    if a.metric == "pd_disaggregation_pays":
        return _pd_pays(lazy, a)

    bound = _bound_value(a, source)
    context = Tokens(s.context_tokens)
    if a.metric == "max_concurrency":
        c = lazy.concurrency()
        return _compare(a, c.max_concurrency, bound,
                        note("requests of {ctx} tokens the deployment holds at once (all replicas)", ctx=context))
    if a.metric == "kv_bytes_per_request":
        z = lazy.size()
        return _compare(a, z.peak_kv_bytes_per_request, bound,
                        note("peak KV of one request at {ctx} tokens, whole model", ctx=context))
    if a.metric == "kv_bytes_per_request_per_gpu":
        z = lazy.size()
        return _compare(a, z.peak_kv_bytes_per_request_per_gpu, bound,
                        note("peak KV of one request at {ctx} tokens on the most loaded GPU", ctx=context))
    if a.metric in ("tpot_seconds", "ttft_seconds") and a.percentile is not None:
        from kvplan.calc.slo import percentile_figure

        plan = _simulate(lazy, a.sim)
        o = sim_options(lazy, a.sim)
        kind = a.metric.split("_")[0]
        return _compare(a, percentile_figure(plan.run, kind, a.percentile), bound,
                        f"{kind.upper()} p{a.percentile} simulated over {plan.run.workload.describe}, policy "
                        f"{o.get('policy', 'recompute')}, seed {o.get('seed', 0)} (kvplan.calc.slo)")
    if a.metric == "goodput_rps":
        sweep = _sweep(lazy, a)
        assert sweep.goodput is not None
        tokens = sweep.goodput.tokens_per_second
        words = Note.join(" and ", sweep.slo.notes() if sweep.slo is not None else [])
        share = note(" with at least {att:.0%} of requests meeting both", att=sweep.targets["slo_attainment_at_least"])
        top = sweep.goodput.requests_per_second.value is not None and (
            sweep.goodput.requests_per_second.value == sweep.rate_values[-1].value)
        detail = (("every swept rate" + f" ({a.sweep_rate}) meets " + words + share + ": the goodput is at least the "
                   "highest (sweep higher to find it)" if top else
                   f"the highest swept rate ({a.sweep_rate}) at which it and every lower rate meet " + words + share)
                  + note("; {tok:,.0f} output tokens/s there", tok=tokens) if tokens.value is not None
                  else f"no swept rate ({a.sweep_rate}) meets " + words + share)
        return _compare(a, sweep.goodput.requests_per_second, bound, detail)
    if a.metric == "tpot_seconds":
        try:
            t = lazy.tpot(a.batch, a.shape)
        except DoesNotFit as err:   # the deployment no longer holds the batch: the assertion fails
            why = _own_keys(err.message, a) or err.message
            return _compare(a, Seconds(None, derived("no TPOT: the batch does not fit", why)), bound, why)
        return _compare(a, t.end.tpot, bound,
                        note("TPOT at the end of the {decode}-token decode, batch "
                             f"{t.batch.number()} ({t.options.shape})", decode=Tokens(s.decode_tokens)))
    if a.metric.startswith("sim_"):
        plan = _simulate(lazy, a.sim)
        o = sim_options(lazy, a.sim)
        metric = {"sim_recompute_rate": "recompute_rate", "sim_tpot_seconds_p99": "tpot_seconds_p99",
                  "sim_swap_outs_per_second": "swap_out_per_second"}[a.metric]
        return _compare(a, plan.metrics[metric], bound,
                        f"{metric} simulated over {plan.run.workload.describe}, policy "
                        f"{o.get('policy', 'recompute')}, seed {o.get('seed', 0)}")
    if a.metric == "ttft_seconds":
        t = lazy.tpot(None)
        return _compare(a, t.ttft, bound, note("TTFT of the {prompt}-token prompt: its chunked prefill alone",
                                               prompt=Tokens(s.prompt_tokens)))
    raise AssertionError(a.metric)  # pragma: no cover - plan_file.METRICS and this function list the same metrics


def totals(plans: tuple[CheckPlan, ...]) -> tuple[Count, Count, Count]:
    """(assertions checked, failed, passed) over the plans, as typed counts with their derivations."""
    total = sum(len(p.assertions) for p in plans)
    failed = sum(not a.passed for p in plans for a in p.assertions)
    return (Count(total, derived("assertions in the plans", f"{total}")),
            Count(failed, derived("assertions whose measured value misses the bound", f"{failed} of {total}")),
            Count(total - failed, derived("assertions - failed", f"{total} - {failed}")))
