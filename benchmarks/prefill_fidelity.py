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
median |error| over the held-out points."""

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


def load_points(path: Path = DATA) -> list[Point]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:                           # pragma: no cover  (pyproject's tomli below 3.11)
        import tomli as tomllib
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    return [Point(**p) for p in raw["point"]]


def scenario(p: Point):
    from kvplan.inputs.presets import load_hardware, load_model
    from kvplan.scenario import Scenario
    return Scenario(model=load_model(p.model), hardware=load_hardware(p.hardware), prompt_tokens=p.prompt,
                    decode_tokens=128, weight_dtype=p.weight_dtype, engine=p.engine, **p.parallel)


def predict(p: Point) -> float:
    """kvplan's figure in the point's unit: tokens/s per GPU (throughput) or ms (ttft)."""
    from kvplan.calc import costs
    from kvplan.calc.tpot import TpotOptions, plan_tpot
    s = scenario(p)
    if p.kind == "ttft":
        return plan_tpot(s, TpotOptions(batch=1)).ttft.value * 1e3
    step = costs.step_model(s, costs.step_factors(s.hardware))
    par = s.parallelism
    spread = par.ep // par.dp if par.dp > 1 and par.ep and par.ep > par.tp else None
    seconds = step.prefill_seconds(p.prompt, 0, None, spread)
    return p.prompt / seconds / par.tp


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
    return p.measured * f / p.prompt / peak


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
    total = step.prefill_seconds(p.prompt, 0, chunk, spread)
    size = chunk or p.prompt
    comm = sum(step.prefill_comm(min(size, p.prompt - start)) for start in range(0, p.prompt, size))
    return comm / total


def error(p: Point, predicted: float) -> float:
    """Signed relative error of kvplan's time: + = kvplan slower than measured."""
    if p.kind == "ttft":
        return predicted / p.measured - 1
    return p.measured / predicted - 1


def rows() -> list[tuple[Point, float, float]]:
    return [(p, (pr := predict(p)), error(p, pr)) for p in load_points()]


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
    held = [abs(e) for p, _, e in data if p.split == "held_out"]
    print(f"held_out_median_error: {statistics.median(held) * 100:.1f}%")


if __name__ == "__main__":
    main()
