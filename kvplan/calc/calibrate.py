"""Fitting the step model's efficiency factors to measured decode points (``kvplan tpot --measured FILE``).

A measured point is (batch, context, TPOT): B requests all at context S take T seconds a step. Given which side of
each operator's roofline binds, the model is linear in u = 1 / hbm, v = 1 / mfu and the per-step overhead c:

    T = u x (bytes of the memory-bound operators / HBM peak) + v x (FLOPs of the compute-bound ones / peak)
        + communication + layers x per-layer overhead + c

so least squares gives (u, v, c) for a fixed assignment; kvplan alternates between assigning the binding side
and solving, until the assignment stops changing. A factor no point depends on (e.g. mfu when every point is
memory-bound) keeps its prior value. The result feeds the same step model, and ``--save-calibration`` writes it
as a hardware preset a later run loads with ``-g FILE.toml``.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.calc import costs
from kvplan.errors import KvplanError, shorten

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.inputs.bench_results import BenchRun
    from kvplan.inputs.prometheus import Scrape
    from kvplan.inputs.startup_log import StartupLog
    from kvplan.scenario import Scenario
    from kvplan.specs.values import Bytes, Number, Value

MAX_POINTS = 10_000
MAX_FILE_BYTES = 10_000_000
# A measured point outside these bounds is refused: past them the fit's arithmetic overflows (a 1e308 ms TPOT gave
# an infinite per-step overhead) or the point is no decode step (a TPOT over an hour, a batch of a billion).
MAX_BATCH = 1_000_000
MAX_CONTEXT = 100_000_000          # kvplan.inputs.units.MAX_TOKENS
MIN_TPOT_S, MAX_TPOT_S = 1e-6, 3600.0   # the range --tpot-slo takes (kvplan.inputs.options.parse_seconds)


@dataclass(frozen=True)
class Point:
    """B requests at context S take T seconds a step; with ``decode`` D > 0 the point is a steady batch whose
    contexts spread over S..S + D (``costs.StepModel.steady_cache``: a benchmark run's mean request)."""

    batch: float
    context: int
    tpot_seconds: float
    decode: int = 0


@dataclass(frozen=True)
class Calibration:
    source: str
    points: tuple[Point, ...]
    hbm: float
    mfu: float
    overhead_us_per_step: float
    predicted: tuple[float, ...]
    rms_relative_error: float
    iterations: int

    @property
    def overrides(self) -> dict:
        return {"hbm": self.hbm, "mfu": self.mfu, "overhead_us_per_step": self.overhead_us_per_step}


def _number(row: dict, names: tuple[str, ...], where: str):
    for name in names:
        if name in row and row[name] not in (None, ""):
            try:
                value = float(row[name])
            except (TypeError, ValueError):
                raise KvplanError(f"{where}: {name} = {shorten(row[name])} is not a number", "fix that value") from None
            except OverflowError:   # an integer past float's range
                raise KvplanError(f"{where}: {name} = {shorten(row[name])} is too large to be measured",
                                  "fix that value") from None
            if not math.isfinite(value) or value <= 0:
                raise KvplanError(f"{where}: {name} = {shorten(row[name])} must be a positive number",
                                  "fix that value")
            return name, value
    return None, None


def read_points(path: Path) -> tuple[Point, ...]:
    """Rows of batch, context (or context_tokens) and one of tpot_ms, itl_ms, tpot_s, from CSV or JSON (a list of
    objects, or {"points": [...]})."""
    try:
        if not path.is_file():
            raise KvplanError(f"--measured {path} is not a regular file", "give a CSV or JSON file of measured points")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise KvplanError(f"--measured {path} is larger than 10 MB", "give a smaller file of measured points")
        text = path.read_text()
    except OSError as err:
        raise KvplanError(f"cannot read --measured {path}: {err.strerror}", "check the path") from None
    except UnicodeDecodeError:
        raise KvplanError(f"--measured {path} is not UTF-8 text", "save it as CSV or JSON") from None
    if path.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as err:   # ValueError: also an integer of over 4,300 digits
            raise KvplanError(f"--measured {path} is not valid JSON: {str(err)[:80]}", "fix the JSON") from None
        rows = doc.get("points") if isinstance(doc, dict) else doc
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise KvplanError(f"--measured {path}: expected a list of objects", 'write [{"batch": 1, ...}, ...]')
    else:
        rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    if not rows:
        raise KvplanError(f"--measured {path} has no points", "give at least one row of batch, context, tpot_ms")
    if len(rows) > MAX_POINTS:
        raise KvplanError(f"--measured {path} has over {MAX_POINTS:,} points", "give fewer points")
    points = []
    for i, row in enumerate(rows, 1):
        where = f"--measured {path} row {i}"
        _, batch = _number(row, ("batch",), where)
        _, context = _number(row, ("context", "context_tokens"), where)
        name, t = _number(row, ("tpot_ms", "itl_ms", "tpot_s", "tpot_seconds"), where)
        if batch is None or context is None or t is None:
            raise KvplanError(f"{where} needs batch, context and tpot_ms (or itl_ms, tpot_s)",
                              "write a header row: batch,context,tpot_ms")
        if batch != int(batch) or context != int(context):
            raise KvplanError(f"{where}: batch and context are whole numbers", "fix that row")
        seconds = t / 1000 if name.endswith("_ms") else t
        if batch > MAX_BATCH or context > MAX_CONTEXT or not MIN_TPOT_S <= seconds <= MAX_TPOT_S:
            raise KvplanError(f"{where}: batch {batch:g}, context {context:g}, TPOT {seconds:g} s is past what kvplan "
                              f"fits (batch up to {MAX_BATCH:,}, context up to {MAX_CONTEXT:,} tokens, TPOT 1 us .. "
                              "3,600 s)", "fix that row")
        points.append(Point(int(batch), int(context), seconds))
    return tuple(points)


FREE = ("hbm", "mfu", "overhead_us_per_step")
FACTORS = FREE + ("prefill_mfu",)   # every factor calibrate reports: the step fit's three and the prefill one
# A run with at most this many requests in flight per replica is taken as light: its TTFT is one prefill on an idle
# replica plus the engine's frontend latency (no queueing, no decode steps sharing the chunks). Only such runs fit
# prefill_mfu; a heavier run's TTFT is a lower bound and is compared, not fitted.
LIGHT_BATCH = 1.5


def client_ttft(step, load: Load, chunk: int) -> float:
    """kvplan's TTFT of a light run's mean request: its prefill in chunks (costs.StepModel.prefill_seconds) plus
    the engine's frontend latency (the client's TTFT, as the SLO model prices it)."""
    from kvplan.calc.costs import frontend_seconds

    return step.prefill_seconds(load.prompt, 0, chunk) + frontend_seconds(step.scenario).number()


def fit_prefill_mfu(scenario: Scenario, loads: tuple[Load, ...], factors: dict[str, float], chunk: int
                    ) -> tuple[float, tuple[Load, ...]] | None:
    """prefill_mfu that zeroes the mean relative error of the light runs' mean TTFT (client_ttft), by bisection
    over 0.01..1 (each run's TTFT falls as prefill_mfu grows, so their mean error does); the other factors at
    ``factors``. None when no run is light and gives a mean TTFT. A bound is returned when the runs lie past it
    (e.g. every chunk bound by its weight read, where prefill_mfu changes nothing)."""
    light = tuple(ld for ld in loads if ld.batch <= LIGHT_BATCH and "mean" in ld.run.ttft_s)
    if not light:
        return None

    def error(pm: float) -> float:
        step = costs.step_model(scenario, costs.step_factors(scenario.hardware, **{**factors, "prefill_mfu": pm}))
        return sum((client_ttft(step, ld, chunk) - ld.run.ttft_s["mean"]) / ld.run.ttft_s["mean"]
                   for ld in light) / len(light)

    lo, hi = 0.01, 1.0
    if error(hi) >= 0:
        return hi, light
    if error(lo) <= 0:
        return lo, light
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if error(mid) > 0 else (lo, mid)
    return (lo + hi) / 2, light


def _caches(step, points: tuple[Point, ...]):
    """(cache bytes, attention FLOPs) of each point's mean request, as arrays."""
    import numpy as np

    if not any(p.decode for p in points):
        return step.request_cache(np.array([p.context for p in points], dtype=float))
    pairs = [step.steady_cache(p.context, p.decode) if p.decode else step.request_cache(float(p.context))
             for p in points]
    return (np.array([float(a) for a, _ in pairs]), np.array([float(f) for _, f in pairs]))


def fit(scenario, points: tuple[Point, ...], source: str, factors: costs.StepFactors | None = None,
        max_iterations: int = 50, free: tuple[str, ...] = FREE) -> Calibration:
    """Least squares of the points' relative errors over the ``free`` factors (of ``FREE``); the others keep their
    value in ``factors``."""
    import numpy as np

    f = factors or costs.step_factors(scenario.hardware)
    step = costs.step_model(scenario, f)
    hbm, mfu = f.value("hbm"), f.value("mfu")
    per_step = f.value("overhead_us_per_step") * 1e-6
    b = np.array([p.batch for p in points], dtype=float)
    t = np.array([p.tpot_seconds for p in points], dtype=float)
    nbytes, nflops = _caches(step, points)
    assignment = None
    iterations = 0
    for _ in range(max_iterations):
        iterations += 1
        model = replace(step, bw=step.bw / f.value("hbm") * hbm, flops=step.flops / f.value("mfu") * mfu,
                        attention_flops_s=step.attention_flops_s / f.value("mfu") * mfu,
                        overhead_s=step.overhead_s - f.value("overhead_us_per_step") * 1e-6 + per_step)
        split = _operators(model, b, nbytes, nflops)
        now = (tuple(tuple(bool(x) for x in mem) for mem, *_ in split.values()),
               tuple(bool(x) for x in _floor_bound(model, b)))
        if now == assignment:
            break
        assignment = now
        # columns: memory seconds at hbm = 1, compute seconds at mfu = 1, and 1 for the per-step overhead
        mem_cols = sum(np.where(mem, m1, 0.0) for mem, m1, c1 in split.values())
        cmp_cols = sum(np.where(mem, 0.0, c1) for mem, m1, c1 in split.values())
        fixed = model.step(b, b * nbytes, b * nflops)
        # the upcast MoE path's latency (costs.StepModel.moe_latency_s) is a constant like the floors
        rest = (fixed["comm"] + (fixed["overhead"] - per_step) + _floor_bound_seconds(model, b)
                + model.moe_latency_s * (b > 0))
        cols = [mem_cols, cmp_cols, np.ones_like(t)]
        keep = [i for i, c in enumerate(cols) if np.any(c > 0) and FREE[i] in free]
        held = (1 / hbm, 1 / mfu, per_step)   # the factors not fitted, at their value: moved to the known part
        rest = rest + sum(cols[i] * held[i] for i in range(3) if i not in keep)
        # relative least squares: each point weighted by 1 / T
        a = np.stack([cols[i] / t for i in keep], axis=1)
        y = (t - rest) / t
        sol, *_ = np.linalg.lstsq(a, y, rcond=None)
        values = dict(zip(keep, sol, strict=True))
        u = values.get(0, 1 / hbm)
        v = values.get(1, 1 / mfu)
        per_step = max(values.get(2, per_step), 0.0)
        hbm = min(max(1 / u, 0.01), 1.0) if u > 0 else 1.0
        mfu = min(max(1 / v, 0.01), 1.0) if v > 0 else 1.0
    fitted = replace(step, bw=step.bw / f.value("hbm") * hbm, flops=step.flops / f.value("mfu") * mfu,
                     attention_flops_s=step.attention_flops_s / f.value("mfu") * mfu,
                     overhead_s=step.overhead_s - f.value("overhead_us_per_step") * 1e-6 + per_step)
    pred = fitted.step(b, b * nbytes, b * nflops)["total"]
    rms = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return Calibration(source, points, float(hbm), float(mfu), float(per_step * 1e6), tuple(float(x) for x in pred),
                       rms, iterations)


def _floor_seconds(model):
    return model.gemms * model.gemm_floor_s


def _floor_bound(model, b):
    """Where the dense GEMMs sit on their per-GEMM floor (above both their byte and FLOP times): there their time
    is a constant, not a function of hbm or mfu."""
    import numpy as np

    floor = _floor_seconds(model)
    return np.asarray(floor > np.maximum(model.dense_bytes / model.bw, model.dense_flops_per_token * b / model.flops))


def _floor_bound_seconds(model, b):
    import numpy as np

    return np.where(_floor_bound(model, b), _floor_seconds(model), 0.0)


def _operators(model, b, nbytes, nflops):
    """For each roofline operator at the model's current factors: (memory-bound?, memory seconds at hbm = 1,
    compute seconds at mfu = 1)."""
    import numpy as np

    hw = model.scenario.hardware
    peak_bw = hw.hbm_bandwidth_tb_s.value * 1e12
    gemm_peak = costs.compute_peak(hw, costs.compute_dtype_for(model.scenario.sized_model, hw, "auto"))
    att_peak = costs.compute_peak(hw, "bf16")
    ops = {"dense": (model.dense_bytes + 0 * b, model.dense_flops_per_token * b, gemm_peak)}
    if model.num_experts:
        share = 1 - (1 - model.top_k / model.num_experts) ** (b * model.tokens_per_rank_to_ep)
        touched = model.experts_on_gpu * share
        # experts upcast in-kernel stream at upcast_hbm: their bytes count 1 / expert_bw_scale over
        ops["moe"] = (touched * model.expert_bytes_each / model.expert_bw_scale, model.moe_flops_per_token * b,
                      gemm_peak)
    ops["attention"] = (b * nbytes, b * nflops, att_peak)
    out = {}
    for name, (nb, nf, peak) in ops.items():
        mem1, cmp1 = np.asarray(nb, dtype=float) / peak_bw, np.asarray(nf, dtype=float) / peak
        rate = model.attention_flops_s if name == "attention" else model.flops
        mem_bound = nb / model.bw >= nf / rate
        if name == "dense":   # on the floor: neither column (its constant time is in the fit's rest)
            on_floor = _floor_bound(model, b)
            mem1, cmp1 = np.where(on_floor, 0.0, mem1), np.where(on_floor, 0.0, cmp1)
        out[name] = (np.asarray(mem_bound), mem1, cmp1)
    return out


# --- kvplan calibrate: every figure a user's runs can be compared on, and the fit ---------------------------------
@dataclass(frozen=True)
class Compared:
    """One measured figure against kvplan's prediction before and after the fit (``status``: "fitted" when it is
    one of the points the factors were fitted to, "compared", "lower bound" (kvplan's figure leaves out what the
    run adds, e.g. queueing), "agrees" / "disagrees" (a yes/no expectation), or "not comparable", with ``why``)."""

    figure: str
    source: str
    measured: Value | None
    before: Value | None
    after: Value | None
    error_before: Value | None
    error_after: Value | None
    status: str
    why: str


@dataclass(frozen=True)
class ReserveFit:
    """The runtime reserve that makes kvplan's budget give the logged pool (pool = HBM x fraction - weights -
    activation - runtime: linear in the reserve)."""

    logged_pool: Bytes
    predicted_pool: Bytes
    reserve_before: Bytes
    reserve_fitted: Bytes
    pool_after: Bytes
    residual: Bytes


@dataclass(frozen=True)
class Load:
    """What a benchmark run puts on one replica: the batch, the mean request, and how kvplan read them."""

    run: BenchRun
    batch: float                # requests decoding together per replica
    batch_value: Number         # the same, with how it was read
    how: str
    prompt: int
    decode: int


@dataclass(frozen=True)
class CalibratePlan:
    scenario: Scenario
    loads: tuple[Load, ...]
    compared: tuple[Compared, ...]
    step_fit: Calibration | None
    free: tuple[str, ...]
    prior: dict[str, Number]    # factor name -> its value before the fit
    fitted: dict[str, Number]   # factor name -> after it (fitted, or kept)
    reserve: ReserveFit | None
    sources: tuple[str, ...]
    notes: tuple[str, ...]
    rms: Value | None = None                       # the step fit's rms relative error
    fit_points: tuple[dict[str, Value], ...] = ()  # each fitted point: its load, measured and fitted TPOT
    gpu_defaulted: str = ""   # why the GPU is kvplan's default, not given nor read from a log ("": it is not)


def run_load(scenario: Scenario, run: BenchRun) -> Load:
    """The replica's batch of a run: SGLang's own mean concurrency; a closed loop's --max-concurrency (request rate
    infinite); else Little's law, completed requests/s x mean E2E latency. Divided by the DP replicas."""
    from kvplan.specs.values import Number, derived

    dp = scenario.parallelism.dp
    if run.tool_concurrency is not None:
        total, how = run.tool_concurrency, f"SGLang's concurrency {run.tool_concurrency} (sum of E2E / duration)"
    elif run.max_concurrency is not None and run.request_rate is None:
        total = min(run.max_concurrency, run.completed)
        how = f"closed loop at max_concurrency {run.max_concurrency} (request rate inf)"
    else:
        rate = run.request_throughput or (run.completed / run.duration_s if run.duration_s else run.request_rate)
        if rate is None or run.mean_e2e_s is None:
            raise KvplanError(f"benchmark result {run.source} gives neither its concurrency nor a throughput and "
                              "E2E latency to derive it from", "give a result with request_throughput and latencies")
        total = rate * run.mean_e2e_s
        how = (f"Little's law: {round(rate, 4)} req/s x mean E2E {round(run.mean_e2e_s, 4)} s ({run.e2e_from})"
               + ("" if run.max_concurrency is None else f", capped at max_concurrency {run.max_concurrency}"))
        if run.max_concurrency is not None:
            total = min(total, run.max_concurrency)
    batch = max(total / dp, 1.0)
    prompt, decode = max(round(run.mean_input_tokens), 1), max(round(run.mean_output_tokens), 1)
    how = f"{how}; / {dp} replica(s) = {round(batch, 4)}"
    return Load(run, batch, Number(batch, derived("concurrency / DP replicas (at least 1)", how, run.source)), how,
                prompt, decode)


def _rel(mine: float | None, measured: float | None):
    from kvplan.specs.values import Fraction, derived

    if mine is None or measured is None or measured == 0:
        return None
    return Fraction((mine - measured) / measured, derived("(kvplan - measured) / measured",
                                                          f"({mine:.6g} - {measured:.6g}) / {measured:.6g}"))


def _seconds(value: float | None, why):
    from kvplan.specs.values import Seconds

    return None if value is None else Seconds(value, why)


def _step_figures(load: Load, steps: tuple, chunk: int) -> list[Compared]:
    """TPOT (mean, median, p99), ITL and TTFT of one run against the step model before and after the fit."""
    from kvplan.specs.values import Seconds, derived

    run, b, p, d = load.run, load.batch, load.prompt, load.decode
    tpot = [float(st.steady_tpot(p, d, b)) for st in steps]
    ttft = [client_ttft(st, load, chunk) for st in steps]
    how = f"steady batch of {round(b, 4)} requests over {p} + {d} tokens"
    out = []
    for metric, stats, label in (("tpot", run.tpot_s, "TPOT"), ("itl", run.itl_s, "ITL")):
        for stat in ("mean", "median", "p99"):
            if stat not in stats:
                continue
            measured = Seconds(stats[stat], derived(f"{stat}_{metric}_ms / 1000", f"{stats[stat]:.6g} s", run.source))
            name = f"{label} {stat}"
            if stat == "p99":
                out.append(Compared(name, run.source, measured, None, None, None, None, "not comparable",
                                    "kvplan prices the steady mean step, not its tail (prefill chunks and "
                                    "scheduling stalls make the p99)"))
                continue
            before, after = (_seconds(t, derived("kvplan tpot's steady step (costs.StepModel.steady_tpot)", how))
                             for t in tpot)
            fitted = metric == "tpot" and stat == "mean"
            out.append(Compared(name, run.source, measured, before, after, _rel(tpot[0], stats[stat]),
                                _rel(tpot[1], stats[stat]), "fitted" if fitted else "compared",
                                how + (": one of the points the step factors are fitted to" if fitted else "")))
    for stat in ("mean", "median", "p99"):
        if stat not in run.ttft_s:
            continue
        measured = Seconds(run.ttft_s[stat], derived(f"{stat}_ttft_ms / 1000", f"{run.ttft_s[stat]:.6g} s",
                                                     run.source))
        if stat == "p99":
            out.append(Compared(f"TTFT {stat}", run.source, measured, None, None, None, None, "not comparable",
                                "kvplan prices one prefill, not the queueing tail"))
            continue
        before, after = (_seconds(t, derived("one prefill in chunks of max_num_batched_tokens (costs.StepModel."
                                             "prefill_seconds) + the engine's frontend latency",
                                             f"{p:,} tokens, chunk {chunk:,}")) for t in ttft)
        alone = b <= LIGHT_BATCH
        fitted = alone and stat == "mean"
        out.append(Compared(f"TTFT {stat}", run.source, measured, before, after, _rel(ttft[0],
                                                                                    run.ttft_s[stat]),
                            _rel(ttft[1], run.ttft_s[stat]), "fitted" if fitted else
                            "compared" if alone else "lower bound",
                            "one prefill on an idle replica (prefill_mfu is fitted to the light runs' mean)" if fitted
                            else "one prefill on an idle replica" if alone else
                            f"one prefill on an idle replica; at {round(b, 3)} requests in flight the measured TTFT "
                            "also waits in the queue and shares steps with decodes"))
    return out


def _pool_and_reserve(scenario: Scenario, log: StartupLog | None
                      ) -> tuple[list[Compared], ReserveFit | None, int | None]:
    """The logged pool against kvplan's budget, and the runtime reserve that reproduces it. Returns (figures, fit,
    the pool per GPU to compare KV usage against: the logged one, else kvplan's)."""
    from kvplan.calc.explain_log import logged_pool
    from kvplan.specs.values import Bytes, derived

    adapter = scenario.engine_adapter
    try:
        budget = adapter.budget(scenario, scenario.sized_model, scenario.parallelism)
        predicted = budget.kv_pool.number()
    except KvplanError as err:
        budget, predicted, why = None, None, err.message
    if budget is not None and not budget.fits:   # a budget that leaves no pool is no figure (explain-log's rule)
        why = ("kvplan's budget leaves no pool: the weights and reserves take more than HBM x "
               f"{budget.fraction_name} (kvplan explain-log says what does not fit)")
        budget, predicted = None, None
    if log is None:
        return [], None, predicted
    pool, what = logged_pool(scenario, log)
    logged = pool.number()
    if budget is None or predicted is None:
        return [Compared("KV pool per GPU", log.path, pool, None, None, None, None, "not comparable",
                         f"kvplan's budget cannot be computed: {why}")], None, logged
    before_reserve = budget.runtime.number()
    raw = before_reserve + predicted - logged
    clamped = raw < 0
    fitted = max(raw, 0)
    after_budget = adapter.budget(scenario.with_(runtime_reserve_bytes=fitted), scenario.sized_model,
                                  scenario.parallelism)
    after = after_budget.kv_pool.number()
    residual = after - logged
    fit = ReserveFit(
        pool, budget.kv_pool, budget.runtime,
        Bytes(fitted, derived("runtime reserve + (kvplan's pool - logged pool)" + (", at least 0" if clamped else ""),
                              f"{before_reserve:,} + ({predicted:,} - {logged:,}) = {raw:,}"
                              + (" -> 0" if clamped else ""), log.path)),
        Bytes(after, derived("kvplan's budget with the fitted runtime reserve", f"{after:,} B")),
        Bytes(residual, derived("pool after the fit - logged pool", f"{after:,} - {logged:,} = {residual:,}")))
    figure = Compared("KV pool per GPU", log.path, pool, budget.kv_pool, fit.pool_after,
                      _rel(predicted, logged), _rel(after, logged), "fitted",
                      f"the log's {what} against kvplan's {adapter.id} budget; the runtime reserve is fitted to it"
                      + (" (it would be negative: kvplan's other terms already take more than the log shows)"
                         if clamped else ""))
    return [figure], fit, logged


def _scrape_figures(scenario: Scenario, scrape: Scrape, loads: tuple[Load, ...], pool: int | None, steps: tuple,
                    chunk: int) -> list[Compared]:
    """Preemptions, KV usage and the latency histograms of a /metrics scrape against kvplan's expectation."""
    from kvplan.calc import capacity
    from kvplan.inputs import prometheus
    from kvplan.specs.values import Count, Fraction, derived

    src = scrape.path
    out: list[Compared] = []
    one = loads[0] if len(loads) == 1 else None
    unknown = ("no benchmark run of this scrape given: its request lengths and load are unknown (give the run's "
               "bench result with it)" if not loads else
               f"{len(loads)} benchmark runs given: the scrape's counters and histograms cover them all since the "
               "server started (give one run's result with its scrape)" if one is None else "")
    running = prometheus.figure(scrape, *prometheus.RUNNING)
    preempt = prometheus.figure(scrape, *prometheus.PREEMPTIONS)
    if preempt is not None:
        name, count = preempt
        measured = Count(int(count), derived(name, f"{count:g}", f"{src} line {scrape.line_of(name)}"))
        if one is None or pool is None:
            out.append(Compared("preemptions", src, measured, None, None, None, None, "not comparable",
                                unknown or "kvplan's pool cannot be computed"))
        else:
            b = max(1, math.ceil(one.batch))
            need = capacity.request_bytes(scenario, one.prompt + one.decode)
            holds = capacity.fit(pool, need)
            expect_none = b <= holds
            expected = Count(0 if expect_none else b - holds, derived(
                "requests in flight past what the pool holds at their full length (0: none preempted)",
                f"{b} in flight, the pool holds {holds} of {one.prompt + one.decode:,} tokens"))
            agrees = (count == 0) == expect_none
            out.append(Compared("preemptions", src, measured, expected, expected, None, None,
                                "agrees" if agrees else "disagrees",
                                f"{b} requests of {one.prompt + one.decode} tokens against a pool holding {holds}: "
                                + ("kvplan expects none" if expect_none else "kvplan expects preemptions")))
    usage = prometheus.figure(scrape, *prometheus.KV_USAGE, fraction=True)
    if usage is not None:
        name, value = usage
        measured_f = Fraction(value, derived(name + " (mean over its series)", f"{value:.4g}",
                                             f"{src} line {scrape.line_of(name)}"))
        if one is None or pool is None or running is None:
            why = unknown or ("kvplan's pool cannot be computed" if pool is None else
                              "the scrape has no running-requests gauge to size the snapshot's batch")
            out.append(Compared("KV cache usage", src, measured_f, None, None, None, None, "not comparable", why))
        else:
            n = running[1] / scenario.parallelism.dp
            context = one.prompt + one.decode // 2
            need = capacity.request_bytes(scenario, context)
            share = n * need / pool
            exp_v = Fraction(share, derived(
                "running requests per replica x one request's blocks at the run's mean context / pool",
                f"{n:g} x {need:,} / {pool:,} = {share:.4g}"))
            out.append(Compared("KV cache usage", src, measured_f, exp_v, exp_v, _rel(share, value),
                                _rel(share, value), "compared",
                                f"{round(running[1])} running (the same scrape) at the run's mean context {context} "
                                "tokens (prompt + half the decode): a snapshot, the run's mean is kvplan's"))
    for label, bases, is_ttft in (("TPOT mean (/metrics)", prometheus.TPOT, False),
                                  ("TTFT mean (/metrics)", prometheus.TTFT, True)):
        got = prometheus.histogram(scrape, *bases)
        if got is None:
            continue
        name, mean, count = got
        measured_s = _seconds(mean, derived(f"{name}_sum / {name}_count", f"{mean:.6g} s over {count:g} observations",
                                            f"{src} line {scrape.line_of(name + '_sum')}"))
        if one is None:
            out.append(Compared(label, src, measured_s, None, None, None, None, "not comparable", unknown))
            continue
        load_b, p, d = one.batch, one.prompt, one.decode
        # TTFT as tpot prices it: the prefill plus the engine's frontend latency (client_ttft)
        mine = [client_ttft(st, one, chunk) if is_ttft else float(st.steady_tpot(p, d, load_b)) for st in steps]
        before, after = (_seconds(t, derived("kvplan's prefill + the engine's frontend latency" if is_ttft
                                             else "kvplan tpot's steady step",
                                             f"the run {one.run.source}: {load_b:.4g} requests, {p:,} + {d:,} tokens"))
                         for t in mine)
        out.append(Compared(label, src, measured_s, before, after, _rel(mine[0], mean), _rel(mine[1], mean),
                            "lower bound" if is_ttft and load_b > 1.5 else "compared",
                            "the histogram covers every request since the server started: taken as the run's"))
    if not out:
        out.append(Compared("metrics", src, None, None, None, None, None, "not comparable",
                            "the scrape holds none of the preemption counter, the KV usage gauge, the TPOT or TTFT "
                            "histograms (kvplan.inputs.prometheus names them)"))
    return out


def plan_calibrate(scenario: Scenario, log: StartupLog | None = None, runs: tuple[BenchRun, ...] = (),
                   scrapes: tuple[Scrape, ...] = ()) -> CalibratePlan:
    """Every figure the given runs, scrapes and start-up log can be compared on, kvplan's prediction and error before
    and after fitting: the step factors to each run's mean TPOT (a steady point at its batch and mean request), the
    runtime reserve to the logged pool."""
    from kvplan.specs.values import Number, derived

    prior_f = costs.step_factors(scenario.hardware)
    prior_step = costs.step_model(scenario, prior_f)
    loads = tuple(run_load(scenario, r) for r in runs)
    points = tuple(Point(ld.batch, ld.prompt, ld.run.tpot_s["mean"], ld.decode) for ld in loads
                   if "mean" in ld.run.tpot_s)
    distinct = len({(round(p.batch, 6), p.context, p.decode) for p in points})
    free = ("hbm", "overhead_us_per_step", "mfu")[:distinct]
    notes: list[str] = []
    step_fit = None
    if points:
        step_fit = fit(scenario, points, ", ".join(sorted({ld.run.source for ld in loads})), prior_f,
                       free=tuple(free))
        at_bound = [f"{name} {round(value, 4)}" for name, value, low, high in (
            ("hbm", step_fit.hbm, 0.01, 1.0), ("mfu", step_fit.mfu, 0.01, 1.0),
            ("overhead_us_per_step", step_fit.overhead_us_per_step, 0.0, math.inf))
            if name in free and value in (low, high)]
        if at_bound:
            notes.append("The fit stopped at a bound (" + ", ".join(at_bound) + "): the measured steps are outside "
                         "what kvplan's step model reaches for this deployment; check the model, --tp, --gpus / --dp "
                         "and the GPU are the ones the runs measured.")
        if distinct < 3:
            notes.append(f"{distinct} distinct load(s): kvplan fits {', '.join(free)} only (one factor per distinct "
                         "point); the others keep the GPU preset's values. Runs at more concurrencies fit all three.")
    fitted_values = ({"hbm": step_fit.hbm, "mfu": step_fit.mfu, "overhead_us_per_step": step_fit.overhead_us_per_step}
                     if step_fit else {})
    fitted_values = {k: v for k, v in fitted_values.items() if k in free}
    mnbt, _ = scenario.engine_adapter.batch_limits_for(scenario)
    chunk = mnbt.number()
    prefill = fit_prefill_mfu(scenario, loads, fitted_values, chunk)
    if prefill is not None:
        fitted_values["prefill_mfu"], light = prefill
        if prefill[0] in (0.01, 1.0):
            notes.append(f"The prefill fit stopped at a bound (prefill_mfu {round(prefill[0], 4)}): the light runs' "
                         "TTFT is outside what kvplan's prefill reaches (at 1.0, more than a prefill at the full "
                         "dense peak: queueing or a slower frontend; at 0.01, less).")
        notes.append(f"prefill_mfu is fitted to the mean TTFT of {len(light)} light run(s) (at most {LIGHT_BATCH} "
                     "requests in flight per replica), taken as one prefill on an idle replica plus the engine's "
                     "frontend latency; heavier runs' TTFT is compared as a lower bound.")
    elif loads:
        notes.append(f"No run is light (at most {LIGHT_BATCH} requests in flight per replica) with a mean TTFT: "
                     "prefill_mfu is not fitted.")
    fitted_f = costs.step_factors(scenario.hardware, **fitted_values)
    fitted_step = costs.step_model(scenario, fitted_f)
    steps = (prior_step, fitted_step)
    compared, reserve, pool = _pool_and_reserve(scenario, log)
    for ld in loads:
        compared += _step_figures(ld, steps, chunk)
    for sc in scrapes:
        compared += _scrape_figures(scenario, sc, loads, pool, steps, chunk)
    prior = {k: prior_f.__getattribute__(k) for k in FACTORS}
    how = {k: "least squares over the runs' mean TPOT (relative error)" for k in FREE}
    how["prefill_mfu"] = "the mean relative error of the light runs' mean TTFT set to zero (bisection)"
    fitted = {k: (Number(fitted_values[k], derived(how[k], f"{fitted_values[k]:.6g}",
                                                   *(ld.run.source for ld in loads)))
                  if k in fitted_values else prior[k]) for k in FACTORS}
    sources = tuple(dict.fromkeys(([log.path] if log is not None else []) + [r.source.rsplit(":", 1)[0]
                                  if r.source.rsplit(":", 1)[-1].isdigit() else r.source for r in runs]
                                  + [s.path for s in scrapes]))
    if not points:
        notes.append("No run gives a mean TPOT: the step factors are not fitted.")
    if log is None:
        notes.append("No start-up log: the memory reserve is not fitted.")
    rms: Value | None = None
    rows: tuple[dict[str, Value], ...] = ()
    if step_fit is not None:
        from kvplan.specs.values import Fraction, Seconds, Tokens

        rms = Fraction(step_fit.rms_relative_error, derived("sqrt(mean(((fitted - measured) / measured)^2))",
                                                            f"{step_fit.rms_relative_error:.4g}"))
        why = derived("a fitted point: the run's load and mean TPOT, and the fitted step", "")
        rows = tuple({"batch": Number(p.batch, why), "context_tokens": Tokens(p.context, why),
                      "decode_tokens": Tokens(p.decode, why), "measured_tpot_seconds": Seconds(p.tpot_seconds, why),
                      "fitted_tpot_seconds": Seconds(pred, why)}
                     for p, pred in zip(step_fit.points, step_fit.predicted, strict=True))
    return CalibratePlan(scenario, loads, tuple(compared), step_fit, tuple(k for k in FACTORS if k in fitted_values),
                         prior, fitted, reserve, sources, tuple(notes), rms, rows)
