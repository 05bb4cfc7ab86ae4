"""``kvplan recommend --target``: search hardware presets x GPU counts x TP/PP/DP(/EP) layouts x KV dtypes for the
deployments that meet the targets, ranked by GPUs used, then by price per hour where the preset gives one.

Targets:
- ``concurrency>=N@C``: requests of C tokens (default: the scenario's prompt + decode) that fit in the KV pools of
  every replica together (``capacity.fit`` per replica x DP).
- ``tpot<=T``: first in closed form, some batch of the scenario's requests decodes at a steady mean TPOT <= T (the one
  cost model, with the batch's prefills run in between); then the passing layouts, best first, are judged by the SLO
  model as ``recommend``'s batch row is (``recommend.slo_batch``: the simulated closed loop's TPOT at the SLO's
  percentile, p99 by default) until one meets: that one is the best, and its batch the one the launch command sets.
  With a concurrency target, the batch must also carry ceil(N / DP) requests per replica.
- ``rate>=R`` (requests/s): in closed form DP x B / (prefill + (decode - 1) x TPOT(B)) (``recommend.closed_form_rate``,
  the SLO model's steady batch) at the batch B the other targets allow (the largest within capacity and max_num_seqs
  that meets the TPOT target); then, for the layouts rejudged, the layout launched at that batch and fed R requests/s
  (``recommend.load_run``: ``simulate.simulated_load``'s Poisson arrivals, a ``--sweep-rate`` point, on up to three
  draws, each of which must meet; the run of the layout emitted is carried into recommend's plan, not simulated again)
  must keep up and meet the SLO's TTFT and TPOT percentiles and attainment, as ``recommend`` judges the launch it
  emits.
- ``--ttft-slo`` (recommend's, beside the targets): a layout on which a request alone waits longer than the TTFT
  target for its first token (its prefill + the engine's frontend, ``recommend.unloaded_ttft``) meets it at no rate
  and fails; with a rate target the load run above judges it under that rate.
Each layout's TPOT over batches 1..capacity is one numpy evaluation of the step model (``StepModel.step`` over an
array of batches), so a search over hundreds of layouts stays well under a second per hardware preset.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from kvplan.calc import capacity, costs
from kvplan.errors import KvplanError
from kvplan.scenario import Scenario

_TARGET = re.compile(r"\s*(concurrency|tpot|rate)\s*(>=|<=)\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*"
                     r"([a-zA-Z/]*)\s*(?:@\s*([0-9.]+\s*[kKmM]?i?))?\s*")
_WANTS = {"concurrency": ">=", "tpot": "<=", "rate": ">="}
MAX_BATCH = 4096
NODE_COUNTS = (1, 2, 4)


@dataclass(frozen=True)
class Target:
    metric: str          # concurrency | tpot | rate
    op: str
    bound: float         # requests, seconds or requests/s
    context: int | None  # concurrency@C
    text: str


def parse_target(text: str) -> Target:
    """A sizing target from its text: ``concurrency>=N[@CONTEXT]``, ``tpot<=T`` or ``rate>=R`` (a KvplanError
    naming the forms otherwise)."""
    from kvplan.inputs.units import parse_tokens

    m = _TARGET.fullmatch(text)
    if not m:
        raise KvplanError(f"--target {text!r} is not a target kvplan knows",
                          "write concurrency>=64@31k, tpot<=40ms or rate>=2rps")
    metric, op, number, unit, at = m.groups()
    if op != _WANTS[metric]:
        raise KvplanError(f"--target {text!r}: {metric} is a {'floor' if _WANTS[metric] == '>=' else 'ceiling'}",
                          f"write {metric}{_WANTS[metric]}...")
    value = float(number)
    unit = unit.lower()
    if metric == "tpot":
        scale = {"ms": 1e-3, "s": 1.0, "us": 1e-6}.get(unit)
        if scale is None:
            raise KvplanError(f"--target {text!r}: a TPOT needs a unit", "write tpot<=40ms")
        value *= scale
    elif metric == "rate":
        if unit not in ("rps", "/s", "req/s", ""):
            raise KvplanError(f"--target {text!r}: a rate is in requests per second", "write rate>=2rps")
    elif unit:
        raise KvplanError(f"--target {text!r}: concurrency is a number of requests", "write concurrency>=64@31k")
    if at is not None and metric != "concurrency":
        raise KvplanError(f"--target {text!r}: only concurrency takes @context", "drop the @ part")
    if not math.isfinite(value) or value <= 0 or (metric == "concurrency" and value > 10_000_000):
        raise KvplanError(f"--target {text!r}: the bound must be a positive, sensible number",
                          "write concurrency>=64@31k, tpot<=40ms or rate>=2rps")
    context = parse_tokens(at.replace(" ", ""), "--target @context") if at else None
    return Target(metric, op, value, context, text.strip())


SEARCH = "kvplan.calc.sizing: capacity.fit per replica x DP; steady TPOT from the step model; DP x B / request time"


@dataclass(frozen=True)
class Candidate:
    hardware: str
    gpus: int
    nodes: int
    tp: int
    pp: int
    dp: int
    ep: int | None
    kv_dtype: str
    concurrency: int            # at the concurrency target's context (or the scenario's)
    batch: int                  # the running batch per replica the targets allow (0: none)
    tpot_seconds: float         # at that batch (batch 1 when none)
    requests_per_second: float
    usd_per_hour: float | None  # GPUs x the preset's price per GPU-hour, when it has one
    failed: tuple[str, ...]     # the targets it misses, each with its number
    basis: str = "closed form"  # how its batch and TPOT were judged: "closed form" or "simulated" (the SLO model)
    # the launch under the rate target as _rejudge judged it (recommend.load_run; None: not run), carried into
    # recommend's plan of the best layout (plan_recommend's ``load``) so the same draws are not simulated twice
    load: Any = field(default=None, compare=False, repr=False)

    @property
    def meets(self) -> bool:
        return not self.failed

    @property
    def layout(self) -> str:
        return f"TP{self.tp} x PP{self.pp} x DP{self.dp}" + (f", EP{self.ep}" if self.ep else "")

    def figures(self) -> dict:
        """The candidate's figures as typed values, each with its derivation (the JSON and the table's cells)."""
        from kvplan.specs.values import Count, Number, Seconds, default, derived

        sim = self.basis == "simulated"
        return {"hardware": self.hardware, "gpus": Count(self.gpus, default("the layout's GPUs")),
                "nodes": Count(self.nodes, default("the layout's nodes")),
                "tp": Count(self.tp, default("the layout's TP")), "pp": Count(self.pp, default("the layout's PP")),
                "dp": Count(self.dp, default("the layout's DP replicas")),
                "ep": Count(self.ep, default("the layout's EP")) if self.ep else self.ep, "kv_dtype": self.kv_dtype,
                "concurrency": Count(self.concurrency, derived("requests that fit per replica x DP",
                                                               str(self.concurrency), SEARCH)),
                "batch": Count(self.batch, derived(
                    "simulated: the largest closed-loop batch within capacity whose TPOT at the SLO's percentile "
                    "meets the target (recommend's batch row)" if sim else "closed form: the largest batch within "
                    "capacity whose steady mean TPOT, its prefills included, meets the TPOT target", str(self.batch))),
                "tpot_seconds": Seconds(self.tpot_seconds, derived(
                    "simulated: TPOT at the SLO's percentile at the batch" if sim else "closed form: steady mean TPOT "
                    "at the batch, its prefills included (a mean, not a percentile)", f"{self.tpot_seconds:.4g}")),
                "basis": self.basis,
                "requests_per_second": Number(self.requests_per_second, derived(
                    "DP x batch / (prefill + decode x TPOT)", f"{self.requests_per_second:.4g}")),
                "usd_per_hour": Number(self.usd_per_hour, derived("GPUs x the preset's price per GPU-hour",
                                                                  f"{self.usd_per_hour}")),
                "failed": list(self.failed)}


@dataclass(frozen=True)
class SizingPlan:
    targets: tuple[Target, ...]
    considered: int
    skipped: int                # layouts the model or GPU refuses (heads not divisible, weights do not fit)
    ranked: tuple[Candidate, ...]   # those meeting every target: each GPU type's best first, in rank order
    near_misses: tuple[Candidate, ...]   # cheaper (fewer GPUs) layouts that miss, closest first
    best: Candidate | None


def _price(hw) -> float | None:
    price = getattr(hw, "price", None)
    value = getattr(price, "usd_per_gpu_hour", None) if price is not None else None
    value = getattr(value, "value", value)
    return float(value) if isinstance(value, (int, float)) else None


def _layouts(model, gpn: int):
    """(nodes, gpus, tp, pp) shapes: part or all of one node, or whole nodes (PP across nodes or not)."""
    for nodes in NODE_COUNTS:
        counts = [g for g in (1, 2, 4, 8, 16) if g <= gpn] if nodes == 1 else [nodes * gpn]
        for gpus in counts:
            for tp in (1, 2, 4, 8, 16):
                if tp > gpn or gpus % tp:
                    continue
                for pp in sorted({1, nodes}):
                    if gpus % (tp * pp):
                        continue
                    yield nodes, gpus, tp, pp


def _miss(what: str, tpot: float, tail: str = "") -> str:
    return f"{what}: {tpot * 1e3:.1f} ms{tail}"


def _rate_miss(what: str, rate: float) -> str:
    return f"{what}: {rate:.3g} rps"


def _load_miss(what: str, load, slo) -> str:
    """A layout's miss under the rate, in a line: the figure of the load run that failed (``SimulatedLoad.deciding``;
    its number when it is a time; the launch's full figures are recommend's to show) and the draw it failed on."""
    d = load.deciding(slo)
    at = f"{what}: simulated at that rate, "
    seed = f" (seed {load.seed})"
    if d.label == "overload":
        return at + "the queue grows without bound" + seed
    if d.label == "attainment":
        return at + "fewer requests than the attainment target meet the SLO" + seed
    return _miss(at + d.label, d.figure.number(), ", above its target" + seed)


def _evaluate(s: Scenario, targets: tuple[Target, ...], slo=None) -> Candidate:
    """``s`` against ``targets`` in closed form; with ``slo`` (``kvplan.calc.slo.SloTargets``) its TTFT target too, on
    a request alone (``recommend.unloaded_ttft``: a layout whose prefill alone exceeds it meets it at no rate)."""
    import numpy as np

    from kvplan.calc.recommend import closed_form_rate

    par = s.parallelism
    pool = int(capacity.kv_pool(s).kv_pool_bytes)
    conc_t = next((t for t in targets if t.metric == "concurrency"), None)
    tpot_t = next((t for t in targets if t.metric == "tpot"), None)
    rate_t = next((t for t in targets if t.metric == "rate"), None)
    ctx = conc_t.context if conc_t and conc_t.context else s.context_tokens
    concurrency = capacity.fit(pool, capacity.request_bytes(s, ctx)) * par.dp
    fit = capacity.fit(pool, capacity.request_bytes(s, s.context_tokens))
    mnbt, seqs = s.engine_adapter.batch_limits_for(s)
    top = min(fit, seqs.number(), MAX_BATCH)
    failed = []
    if conc_t and concurrency < conc_t.bound:
        failed.append(f"{conc_t.text}: {concurrency}")
    need = math.ceil(conc_t.bound / par.dp) if conc_t else 1
    batch, tpot, rate = 0, math.inf, 0.0
    if top >= 1:
        step = costs.step_model(s)
        b = np.arange(1, top + 1, dtype=float)
        t_pf = step.prefill_seconds(s.prompt_tokens, 0, mnbt.number())
        # the one TPOT recommend then plans the batch on: the decode step with the batch's prefills in between
        series = costs.colocated_tpot(step.steady_tpot(s.prompt_tokens, s.decode_tokens, b), t_pf, b,
                                      s.decode_tokens)
        ok = np.ones(top, dtype=bool)
        if tpot_t:
            ok &= series <= tpot_t.bound
        ok &= b >= min(need, top)
        idx = np.nonzero(ok)[0]
        i = int(idx[-1]) if len(idx) else min(need, top) - 1
        batch = int(idx[-1]) + 1 if len(idx) else 0
        tpot = float(series[i])
        rate = closed_form_rate(par.dp, batch or (i + 1), t_pf, tpot, s.decode_tokens).number()
    if tpot_t and (batch == 0 or tpot > tpot_t.bound):
        failed.append(_miss(tpot_t.text, tpot, f" at batch {need}" if conc_t else ""))
    if rate_t and rate < rate_t.bound:
        failed.append(_rate_miss(rate_t.text, rate))
    if slo is not None and slo.ttft is not None:
        from kvplan.calc.recommend import unloaded_ttft

        alone = unloaded_ttft(s).number()
        if alone > slo.ttft:
            failed.append(_miss(f"{slo.ttft_origin}: TTFT p{slo.ttft_percentile}", alone,
                                " for a request alone (its prefill)"))
    price = _price(s.hardware)
    return Candidate(s.hardware.id, par.gpus, s.nodes, par.tp, par.pp, par.dp, par.ep, s.kv_dtype.value,
                     concurrency, batch, tpot, rate, None if price is None else price * par.gpus, tuple(failed))


def _rejudge(c: Candidate, s: Scenario, targets: tuple[Target, ...], slo) -> Candidate:
    """``c`` judged again with recommend's batch row (``recommend.slo_batch``: the simulated closed loop at the
    SLO's percentile), so the best layout's batch is the one recommend plans and the launch command sets; with a
    rate target, the layout launched at that batch is then fed the rate (``recommend.load_run``) and judged
    under it as recommend judges it: the queue keeps up, TTFT and TPOT at the SLO's percentiles, the attainment."""
    from dataclasses import replace

    from kvplan.calc.recommend import closed_form_rate, slo_batch

    sb = slo_batch(s, slo)
    par = s.parallelism
    conc_t = next((t for t in targets if t.metric == "concurrency"), None)
    rate_t = next((t for t in targets if t.metric == "rate"), None)
    need = math.ceil(conc_t.bound / par.dp) if conc_t else 1
    batch = sb.meeting if sb.meeting >= need else 0
    rate = closed_form_rate(par.dp, sb.batch, sb.prefill, sb.tpot_mean, s.decode_tokens).number()
    failed = []      # c met every target in closed form (its concurrency stays: the pool is no simulation's)
    if batch == 0:
        failed.append(_miss(f"{slo.tpot_origin}: TPOT p{slo.tpot_percentile}", sb.tpot, f" simulated at batch "
                            f"{sb.batch}" + (f", {sb.meeting} < {need} needed" if sb.meeting else "")))
    if rate_t and rate < rate_t.bound:
        failed.append(_rate_miss(rate_t.text, rate))
    load = None
    if rate_t and not failed:       # the launch at the rate asked, simulated: recommend's load run, carried to it
        from kvplan.calc.recommend import load_run

        load = load_run(s, rate_t.bound, slo, sb.batch, origin="--target " + rate_t.text)
        if not load.verdict.meets:
            failed.append(_load_miss(rate_t.text, load, slo))
    return replace(c, batch=batch, tpot_seconds=sb.tpot, requests_per_second=rate, failed=tuple(failed),
                   basis="simulated", load=load)


def search(base: Scenario, targets: tuple[Target, ...], hardware: tuple, dtypes: tuple | None = None,
           top: int = 8, slo=None) -> SizingPlan:
    """Every layout of ``base``'s model and request on each GPU preset in ``hardware``, evaluated against
    ``targets`` in closed form; then the passing layouts, best first, judged again by the SLO model's simulation
    (``slo``: ``kvplan.calc.slo.SloTargets``, default the tpot target at p99) until one meets: that one is the
    best."""
    from kvplan.calc.concurrency import default_dtypes
    from kvplan.calc.recommend import launched

    if not targets:
        raise KvplanError("no --target to search for", "give --target concurrency>=64@31k (or tpot<=, rate>=)")
    base = launched(base)     # the layouts as their launch commands start them (--max-model-len printed)
    found, considered, skipped = [], 0, 0
    scen: dict[int, Scenario] = {}
    moe = bool(base.model.num_experts)
    for hw in hardware:
        for nodes, gpus, tp, pp in _layouts(base.model, hw.node.gpus_per_node):
            for dtype in dtypes or default_dtypes(hw):
                considered += 1
                try:
                    s = base.with_(hardware=hw, nodes=nodes, gpus=gpus, tp=tp, pp=pp, dp=None,
                                   ep=None, kv_dtype_request=dtype)
                    if moe and s.parallelism.tp * s.parallelism.dp > 1:
                        s = s.with_(ep=s.parallelism.tp * s.parallelism.dp)
                    found.append(_evaluate(s, targets, slo))
                    scen[id(found[-1])] = s
                except KvplanError:
                    skipped += 1

    def price_key(c: Candidate):
        return c.usd_per_hour if c.usd_per_hour is not None else math.inf

    # fewest GPUs, then the cheapest hour, then KV dtypes with a published reasoning evaluation (fp4 last), then
    # the most requests per second, then the most room (concurrency) on a tie
    passing = sorted((c for c in found if c.meets),
                     key=lambda c: (c.gpus, price_key(c), c.kv_dtype == "nvfp4", -round(c.requests_per_second, 9),
                                    -c.concurrency))
    tpot_t = next((t for t in targets if t.metric == "tpot"), None)
    if tpot_t is not None:
        from kvplan.calc.slo import SloTargets

        slo = slo if slo is not None else SloTargets(tpot=tpot_t.bound, tpot_origin=tpot_t.text)
        for c in passing:      # best first, until one meets under the simulation
            j = found.index(c)
            found[j] = _rejudge(c, scen[id(c)], targets, slo)
            if found[j].meets:
                break
        passing = [c for c in found if c.meets and c.basis == "simulated"][:1] + sorted(
            (c for c in found if c.meets and c.basis != "simulated"), key=lambda c: (
                c.gpus, price_key(c), c.kv_dtype == "nvfp4", -round(c.requests_per_second, 9), -c.concurrency))
    best = passing[0] if passing else None
    # shown: each GPU type's best layout first (so one GPU type's variants do not hide another that also meets the
    # targets), then the next best layouts overall
    firsts = list({c.hardware: c for c in reversed(passing)}.values())
    firsts.sort(key=passing.index)
    shown = (firsts + [c for c in passing if c not in firsts])[:max(top, len(firsts))]
    # near misses: layouts on fewer GPUs than the best, and the closest layout of each GPU type with none passing
    limit = best.gpus if best else math.inf
    passing_types = {c.hardware for c in passing}
    misses = sorted((c for c in found if not c.meets and (c.gpus < limit or c.hardware not in passing_types)),
                    key=lambda c: (len(c.failed), -c.gpus, -c.concurrency))
    return SizingPlan(targets, considered, skipped, tuple(shown), tuple(misses[:3]), best)
