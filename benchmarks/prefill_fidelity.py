"""kvplan's PREFILL price against published prefill measurements (issue 20/21, prefill20).
Run: `python benchmarks/prefill_fidelity.py`. The points, their sources and settings, and their split are in
tests/data/prefill_points.toml (split fixed by the order found, before any prediction was computed).

Two kinds of point:
* ``throughput``: a saturated prefill role's input tokens/s per GPU. Predicted as ``pd``'s prefill role prices it
  (``pd.PdModel.prefill``'s rule): one prompt per rank, under attention DP its routed experts spread over EP / DP
  GPUs, ``StepModel.prefill_seconds`` for the whole prompt; tokens/s per GPU = prompt / (that time x TP GPUs of the
  rank).
* ``ttft``: a concurrency-1 mean TTFT (ms), predicted as ``kvplan tpot``'s TTFT: the prompt's prefill in the engine's
  chunks plus its frontend latency.

The error is (predicted - measured) / measured for TTFT, and for throughput that of the equivalent time per token
(measured / predicted - 1), so a positive error always means kvplan is SLOWER than measured. The last line is the
median |error| over the held-out points.

prefill20e, a per-GPU fit of prefill_mfu (``fit_prefill_mfu``), its procedure written down before any of the new
points' predictions was computed:
1. The points: a GPU's ``fit`` points whose measured / peak is at most 1 (a physically impossible row cannot measure
   a prefill). Held-out points are never read by the fit.
2. Each point's priced compute time C at the preset's prefill_mfu m: kvplan's time is R + K / m (the compute part
   K / m; R the communication, fixed overhead and frontend), so with t(x) kvplan's time at prefill_mfu x,
   C = (t(m) - t(1)) / (1 - m) and R = t(m) - C. A point with C = 0 (every chunk bound by its weight read) or with
   measured - R <= 0 cannot inform the fit and is skipped.
3. The point's ratio of measured to priced compute time: (measured - R) / C (measured: the TTFT, or for a throughput
   the time of one prompt on its rank, prompt / (tokens/s per GPU x TP)).
4. The GPU's fitted prefill_mfu = m / median(ratio), rounded to 0.01, capped at 1.
5. Adoption: only where the GPU has at least one physically possible held-out point, and neither that GPU's held-out
   median |error| nor the whole held-out median |error| grows; otherwise the fit is reported, not adopted.

pf22, the ``line`` rows: each deployment's concurrency-1 TTFT rows at several prompt lengths (``deployment_lines``)
as intercept + slope x prompt, measured and kvplan's. The slope is the prefill's price per token, the intercept what
a request costs whatever its length. On the two DeepSeek-R1-on-H100 deployments kvplan's slope is not faster than the
measured one (SGLang TP16 over two nodes, P3/P4/P23: 13.5 vs 10.5 us/token; vLLM AWQ TP8, P8/P9/P24: 23.7 vs 24.2)
while the measured intercept is 171 vs kvplan's 34 ms and 36 vs 12 ms: the miss there is a per-request floor, which
no per-token mechanism (fewer tokens per expert, MLA's K/V up-projection) can carry. The only H200 pairs are
TensorRT-LLM's (P17/P20, P19/P22), where both the slope (53.3 and 34.7 vs 25.1 us/token) and the floor (79 and 69
vs -2 ms) miss."""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this tree's kvplan, not an installed copy

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "prefill_points.toml"


@dataclass(frozen=True)
class Point:
    id: str
    kind: str
    model: str
    hardware: str
    engine: str
    parallel: dict
    prompt: int
    measured: float
    split: str
    source: str
    assumed: str = ""
    weight_dtype: str | None = None
    prompts: int = 1            # throughput points: that many alike prompts in one pass (bench_one_batch's batch)


def load_points(path: Path = DATA) -> list[Point]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:                           # pragma: no cover  (pyproject's tomli below 3.11)
        import tomli as tomllib
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    return [Point(**p) for p in raw["point"]]


def model_ref(model: str) -> str:
    """A preset id, or a model kvplan has no preset for (qwen3-14b) from its config.json as
    tests/data/serving_runs.toml keeps it: benchmarks/tpot_fidelity.py's ``model_ref``, the one rule for both."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tpot_fidelity import model_ref as ref
    return ref(model)


def scenario(p: Point):
    from kvplan.inputs.presets import load_hardware, load_model
    from kvplan.scenario import Scenario
    return Scenario(model=load_model(model_ref(p.model)), hardware=load_hardware(p.hardware), prompt_tokens=p.prompt,
                    decode_tokens=128, weight_dtype=p.weight_dtype, engine=p.engine, **p.parallel)


def predict(p: Point, prefill_mfu: float | None = None) -> float:
    """kvplan's figure in the point's unit: tokens/s per GPU (throughput) or ms (ttft); at the preset's prefill_mfu
    or at ``prefill_mfu`` when given."""
    from kvplan.calc import costs
    from kvplan.calc.tpot import TpotOptions, plan_tpot
    s = scenario(p)
    over = {} if prefill_mfu is None else {"prefill_mfu": prefill_mfu}
    if p.kind == "ttft":
        return plan_tpot(s, TpotOptions(batch=1, factors=over or None)).ttft.value * 1e3
    step = costs.step_model(s, costs.step_factors(s.hardware, **over))
    par = s.parallelism
    spread = par.ep // par.dp if par.dp > 1 and par.ep and par.ep > par.tp else None
    seconds = step.prefill_seconds(p.prompt, 0, None, spread, prompts=p.prompts)
    return p.prompt * p.prompts / seconds / par.tp


def implied_utilisation(p: Point) -> float:
    """The measured figure as a fraction of the GPUs' dense peak, on kvplan's own FLOP count of the prompt
    (``flops.prefill_flops``: the weight matmuls + the causal attention): tokens/s per GPU x FLOPs per token / peak,
    or FLOPs / (TTFT x GPUs of the replica x peak). Above 1 the figure is impossible on that GPU (P6, P7: a
    concurrency-1 TTFT faster than the A100's bf16 peak allows; the likeliest cause is the engine's prefix cache
    hitting the sweep's repeated prompt), so such a point cannot measure a prefill. The peak is the one kvplan prices
    the prefill at (``StepModel.prefill_flops_s`` / prefill_mfu)."""
    from kvplan.calc import costs, flops
    s = scenario(p)
    step = costs.step_model(s, costs.step_factors(s.hardware))
    peak = step.prefill_flops_s / step.factors.value("prefill_mfu")
    f = flops.prefill_flops(s.sized_model, p.prompt)
    if p.kind == "ttft":
        return f / (p.measured / 1e3 * s.parallelism.tp * peak)
    return p.measured * f / p.prompt / peak             # FLOPs per token of one prompt: the same with ``prompts``


def comm_share(p: Point) -> float:
    """The share of kvplan's prefill time that is communication (``StepModel.prefill_comm`` of the prompt's chunks:
    TP all-reduces, EP dispatch / combine on DeepEP's normal kernels, PP sends; prefill_mfu is compute-only since
    prefill20c)."""
    from kvplan.calc import costs
    s = scenario(p)
    step = costs.step_model(s, costs.step_factors(s.hardware))
    par = s.parallelism
    spread = par.ep // par.dp if par.dp > 1 and par.ep and par.ep > par.tp else None
    chunk = s.engine_adapter.batch_limits_for(s)[0].number() if p.kind == "ttft" else None
    total = step.prefill_seconds(p.prompt, 0, chunk, spread, prompts=p.prompts)
    size = chunk or p.prompt
    comm = sum(step.prefill_comm(min(size, p.prompt - start) * p.prompts) for start in range(0, p.prompt, size))
    return comm / total


def error(p: Point, predicted: float) -> float:
    """Signed relative error of kvplan's time: + = kvplan slower than measured."""
    if p.kind == "ttft":
        return predicted / p.measured - 1
    return p.measured / predicted - 1


def expressible(p: Point) -> bool:
    """Whether kvplan can price the point's deployment at all (h200pf20: TensorRT-LLM's TP8 x EP4 DeepSeek-R1 rows,
    P18 and P21, are not: kvplan puts a quarter of the experts on each GPU, which does not fit an H200). Such a point
    stays in the data with its split (fixed before any prediction) and is left out of every median and of the fit."""
    from kvplan.errors import KvplanError
    try:
        predict(p)
    except KvplanError:
        return False
    return True


def usable_points(points: list[Point] | None = None) -> list[Point]:
    return [p for p in (points or load_points()) if expressible(p)]


def rows(mfu: dict[str, float] | None = None) -> list[tuple[Point, float, float]]:
    """Every expressible point's prediction and error, at the presets' prefill_mfu or, for a GPU in ``mfu``, at that
    figure."""
    mfu = mfu or {}
    return [(p, (pr := predict(p, mfu.get(p.hardware))), error(p, pr)) for p in usable_points()]


def seconds(p: Point, figure: float) -> float:
    """A figure in the point's unit as the time of its one prompt (s): a TTFT, or prompt / (tokens/s per GPU x TP)."""
    return figure / 1e3 if p.kind == "ttft" else p.prompt * p.prompts / (figure * p.parallel["tp"])


def compute_ratio(p: Point) -> float | None:
    """Step 2-3 of the fit (module docstring): measured / priced compute time, None when the point cannot inform."""
    m = scenario(p).hardware.efficiency.prefill_mfu
    m_val = m.value if m is not None else _generic_prefill_mfu()
    t_m, t_1 = seconds(p, predict(p)), seconds(p, predict(p, 1.0))
    if m_val >= 1:
        return None
    compute = (t_m - t_1) / (1 - m_val)
    rest = t_m - compute
    if compute <= 0 or seconds(p, p.measured) - rest <= 0:
        return None
    return (seconds(p, p.measured) - rest) / compute


def _generic_prefill_mfu() -> float:
    from kvplan.calc import costs
    return costs.GENERIC_FACTORS["prefill_mfu"][0]


def fit_prefill_mfu(points: list[Point] | None = None) -> dict[str, tuple[float, float, list[str]]]:
    """Step 1-4 of the fit (module docstring): per GPU, (the preset's prefill_mfu, the fitted one, the points used)."""
    out: dict[str, tuple[float, float, list[str]]] = {}
    by_gpu: dict[str, list[tuple[str, float]]] = {}
    for p in usable_points(points):
        if p.split != "fit" or implied_utilisation(p) > 1:
            continue
        r = compute_ratio(p)
        if r is not None:
            by_gpu.setdefault(p.hardware, []).append((p.id, r))
    from kvplan.inputs.presets import load_hardware
    for gpu, used in by_gpu.items():
        m = load_hardware(gpu).efficiency.prefill_mfu
        m_val = m.value if m is not None else _generic_prefill_mfu()
        fitted = min(1.0, round(m_val / statistics.median(r for _, r in used), 2))
        out[gpu] = (m_val, fitted, [i for i, _ in used])
    return out


def held_out_median(data: list[tuple[Point, float, float]], gpu: str | None = None) -> float | None:
    errs = [abs(e) for p, _, e in data
            if p.split == "held_out" and (gpu is None or p.hardware == gpu) and (gpu is None or
                                                                               implied_utilisation(p) <= 1)]
    return statistics.median(errs) if errs else None


def adopt(fits: dict[str, tuple[float, float, list[str]]]) -> dict[str, bool]:
    """Step 5 of the fit: a GPU's fitted prefill_mfu is adopted only where its physically possible held-out points
    exist and neither their median |error| nor the whole held-out median |error| grows."""
    before = rows()
    out = {}
    for gpu, (_, fitted, _) in fits.items():
        after = rows({gpu: fitted})
        b_gpu, a_gpu = held_out_median(before, gpu), held_out_median(after, gpu)
        b_all, a_all = held_out_median(before), held_out_median(after)
        assert b_all is not None and a_all is not None
        out[gpu] = b_gpu is not None and a_gpu is not None and a_gpu <= b_gpu and a_all <= b_all
    return out


def line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """The least-squares line y = intercept + slope x through the points (at least two distinct x): (intercept,
    slope)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def deployment_lines(data: list[tuple[Point, float, float]] | None = None
                     ) -> list[tuple[list[str], tuple[float, float], tuple[float, float]]]:
    """pf22: each deployment's concurrency-1 TTFT rows at two or more prompt lengths (the same model, GPU, engine,
    parallelism and weights) as a line over the prompt length, measured and kvplan's: (the point ids, (measured
    intercept ms, measured slope ms per token), (kvplan's intercept, kvplan's slope)). The intercept is what a request
    costs whatever its length (the frontend, a pass's fixed costs), the slope the prefill's price per token, so the
    two say which part of a TTFT miss is the per-token prefill price (prefill_mfu, the FLOP count, communication) and
    which is a per-request floor the prefill price cannot carry. Uses every split: it fits nothing."""
    data = data if data is not None else rows()
    groups: dict[tuple, list[tuple[Point, float]]] = {}
    for p, pr, _ in data:
        if p.kind != "ttft":
            continue
        key = (p.model, p.hardware, p.engine, tuple(sorted(p.parallel.items())), p.weight_dtype)
        groups.setdefault(key, []).append((p, pr))
    out = []
    for members in groups.values():
        if len({p.prompt for p, _ in members}) < 2:
            continue
        xs = [float(p.prompt) for p, _ in members]
        out.append(([p.id for p, _ in members], line(xs, [p.measured for p, _ in members]),
                    line(xs, [pr for _, pr in members])))
    return out


def main() -> None:
    data = rows()
    print("| id | split | kind | model | GPU | parallel | prompt | measured | kvplan | error | measured / peak "
          "| comm share |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p, pr, e in data:
        unit = "tok/s/GPU" if p.kind == "throughput" else "ms"
        par = " ".join(f"{k}{v}" for k, v in p.parallel.items())
        print(f"| {p.id} | {p.split} | {p.kind} | {p.model}{' ' + p.weight_dtype if p.weight_dtype else ''} | "
              f"{p.hardware} | {par} | {p.prompt:,} | {p.measured:,.1f} {unit} | {pr:,.1f} | {e:+.1%} | "
              f"{implied_utilisation(p):.2f} | {comm_share(p):.0%} |")
    for split in ("fit", "held_out"):
        errs = [abs(e) for p, _, e in data if p.split == split]
        ok = [abs(e) for p, _, e in data if p.split == split and implied_utilisation(p) <= 1]
        print(f"{split}: median |error| {statistics.median(errs):.1%} over {len(errs)} points; "
              f"{statistics.median(ok):.1%} over the {len(ok)} physically possible ones (measured / peak <= 1)")
    groups: dict[str, list[float]] = {}
    for p, _, e in data:
        groups.setdefault(f"{p.model} on {p.hardware} ({p.kind})", []).append(e)
    for g, es in groups.items():
        print(f"  {g}: median error {statistics.median(es):+.1%} ({len(es)} points)")
    for ids, (m0, m1), (k0, k1) in deployment_lines(data):
        print(f"  line {'/'.join(ids)}: measured {m0:.1f} ms + {m1 * 1e3:.1f} us/token; kvplan {k0:.1f} ms + "
              f"{k1 * 1e3:.1f} us/token")
    if "--fit" in sys.argv:
        fits = fit_prefill_mfu()
        adopted = adopt(fits)
        for gpu, (m, fitted, used) in fits.items():
            after = rows({gpu: fitted})
            b, a = held_out_median(data, gpu), held_out_median(after, gpu)
            print(f"  fit {gpu}: prefill_mfu {m:g} -> {fitted:g} on {', '.join(used)}; its held-out median |error| "
                  + (f"{b:.1%} -> {a:.1%}" if b is not None and a is not None else "(no held-out point)")
                  + f"; all held-out {held_out_median(data):.1%} -> {held_out_median(after):.1%}: "
                  + ("adopt" if adopted[gpu] else "report only"))
    left = [p.id for p in load_points() if not expressible(p)]
    if left:
        print(f"  not expressible in kvplan (left out of every median and the fit): {', '.join(left)}")
    held = [abs(e) for p, _, e in data if p.split == "held_out"]
    print(f"held_out_median_error: {statistics.median(held) * 100:.1f}%")


if __name__ == "__main__":
    main()
