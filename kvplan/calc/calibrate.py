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

from kvplan.calc import costs
from kvplan.errors import KvplanError, shorten

MAX_POINTS = 10_000
MAX_FILE_BYTES = 10_000_000
# A measured point outside these bounds is refused: past them the fit's arithmetic overflows (a 1e308 ms TPOT gave
# an infinite per-step overhead) or the point is no decode step (a TPOT over an hour, a batch of a billion).
MAX_BATCH = 1_000_000
MAX_CONTEXT = 100_000_000          # kvplan.inputs.units.MAX_TOKENS
MIN_TPOT_S, MAX_TPOT_S = 1e-6, 3600.0   # the range --tpot-slo takes (kvplan.inputs.options.parse_seconds)


@dataclass(frozen=True)
class Point:
    batch: int
    context: int
    tpot_seconds: float


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


def fit(scenario, points: tuple[Point, ...], source: str, factors: costs.StepFactors | None = None,
        max_iterations: int = 50) -> Calibration:
    import numpy as np

    f = factors or costs.step_factors(scenario.hardware)
    step = costs.step_model(scenario, f)
    hbm, mfu = f.value("hbm"), f.value("mfu")
    per_step = f.value("overhead_us_per_step") * 1e-6
    b = np.array([p.batch for p in points], dtype=float)
    ctx = np.array([p.context for p in points], dtype=float)
    t = np.array([p.tpot_seconds for p in points], dtype=float)
    nbytes, nflops = step.request_cache(ctx)
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
        rest = fixed["comm"] + (fixed["overhead"] - per_step) + _floor_bound_seconds(model, b)
        cols = [mem_cols, cmp_cols, np.ones_like(t)]
        keep = [i for i, c in enumerate(cols) if np.any(c > 0)]
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
    return Calibration(source, points, hbm, mfu, per_step * 1e6, tuple(float(x) for x in pred), rms, iterations)


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
