"""``kvplan pd``: prefill/decode disaggregation against colocated serving, from the one step and prefill model.

For N GPUs in replicas (instances) of G = TP x PP GPUs serving requests of P prompt and D output tokens:

Colocated: every replica prefills its own arrivals. A prefill of P tokens takes T_pf of the replica (chunked by
max_num_batched_tokens); with B requests decoding, a request finishes every D / B steps, so each step carries on
average B / D prefills: mean TPOT = TPOT(B) + T_pf x B / D. Without chunking the step that carries a prefill
stalls for all of T_pf; chunked, each step carries at most one chunk (T_pf / chunks). Goodput: the largest B the
pool holds whose mean TPOT meets the SLO; tokens/s per replica = B / mean TPOT.

Disaggregated: n_p prefill instances and n_d = N / G - n_p decode instances. The KV of P tokens moves from the
prefill side to the decode side over each GPU's NIC (every receiving rank gets its own shard; an MLA latent,
whole on every TP rank, is sent once per receiving rank), overlapped layer by layer with the prefill (the last
layer's share is always exposed), plus a per-request handover. Decode instances run pure decode at the largest B
meeting the SLO. Requests/s = min(prefill capacity n_p / T_pf, decode capacity n_d x B / (D x TPOT)); the best
integer split maximises it; the idle share of the pool that is not the bottleneck is what the rounding costs.

The verdict compares goodput (output tokens/s under the SLO); the break-even is the first prompt:output ratio
(at the given output length, prompts growing) where disaggregation wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.calc import capacity, costs
from kvplan.calc.slo import SloTargets, steady_batch
from kvplan.errors import KvplanError
from kvplan.scenario import Scenario
from kvplan.specs.values import (
    Bytes,
    Count,
    Fraction,
    Note,
    Number,
    Rate,
    Ratio,
    Seconds,
    Tokens,
    default,
    derived,
    given,
    note,
)

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.simulate import SimulatedBatch

DEFAULT_TPOT_SLO = 0.05
TPOT_SLO_SOURCE = ("50 ms per output token: DeepSeek's production V3/R1 decode served 20-22 tokens/s per user "
                   "(github.com/deepseek-ai/open-infra-index, Day 6 inference system overview)")
DEFAULT_HANDOVER_SECONDS = 0.002
HANDOVER_SOURCE = "kvplan's assumption: ~2 ms per request to hand a prefilled request over (scheduling, one RPC)"
RATIOS = (10, 5, 2, 1, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01)   # prompt : output
WIN_MARGIN = 1.05   # disaggregation must beat colocated goodput by 5% to be recommended


@dataclass(frozen=True)
class PdOptions:
    """``targets``: the SLO model's TTFT and TPOT targets at a percentile (default: ``tpot_slo`` at p99, no TTFT
    target); given, its TPOT target (or the default 50 ms when it has none) replaces ``tpot_slo``."""

    tpot_slo: float = DEFAULT_TPOT_SLO
    nic_gbps: float | None = None
    prefill_gpus: int | None = None
    handover_seconds: float = DEFAULT_HANDOVER_SECONDS
    chunked: bool = True
    factors: dict | None = None
    targets: SloTargets | None = None

    def __post_init__(self) -> None:
        from dataclasses import replace

        t = self.targets if self.targets is not None else SloTargets(tpot=self.tpot_slo)
        if t.tpot is None:
            t = replace(t, tpot=self.tpot_slo)
        object.__setattr__(self, "targets", t)
        object.__setattr__(self, "tpot_slo", t.tpot)
        slo = self.tpot_slo
        if not (isinstance(slo, (int, float)) and math.isfinite(slo) and 1e-4 <= slo <= 10):
            raise KvplanError(f"--tpot-slo {self.tpot_slo!r} s is outside 0.1 ms .. 10 s", "give it like 50ms")
        if self.nic_gbps is not None and not (math.isfinite(self.nic_gbps) and 0.1 <= self.nic_gbps <= 10_000):
            raise KvplanError(f"--nic-gbps {self.nic_gbps!r} is outside 0.1 .. 10,000 GB/s", "give it like 50")


@dataclass(frozen=True)
class Side:
    """One way of serving at one prompt length: its batch, TPOT and goodput."""

    batch: int
    tpot: float
    requests_per_second: float
    tokens_per_second: float


@dataclass(frozen=True)
class RatioRow:
    prompt_tokens: int
    ratio: float
    colocated_tokens_per_second: float
    disaggregated_tokens_per_second: float
    prefill_instances: int
    disaggregation_wins: bool
    fits: bool

    @property
    def prompt(self) -> Tokens:
        return Tokens(self.prompt_tokens, derived("ratio x output tokens", f"{self.prompt_tokens:,}"))

    @property
    def prompt_over_output(self) -> Number:
        return Number(self.ratio, derived("a ratio of the sweep", f"{self.ratio:g}"))

    @property
    def colocated(self) -> Number:
        return Number(self.colocated_tokens_per_second if self.fits else None,
                      derived("simulated: instances x the output tokens/s of the largest batch meeting the "
                              "targets at this prompt", f"{self.colocated_tokens_per_second:,.0f}"))

    @property
    def disaggregated(self) -> Number:
        return Number(self.disaggregated_tokens_per_second if self.fits else None,
                      derived("closed form: the best split's requests/s x output tokens",
                              f"{self.disaggregated_tokens_per_second:,.0f}"))

    @property
    def label(self) -> Note:
        """The ratio as prompt:output, ``4:1`` or ``1:10``."""
        return ratio_label(self.prompt_over_output)


@dataclass(frozen=True)
class PdPlan:
    scenario: Scenario
    options: PdOptions
    instances: Count
    gpus_per_instance: Count
    prefill: Seconds
    prefill_chunks: Count
    interference_gpu_seconds: Seconds
    prefill_share: Fraction
    decode_over_prefill: Ratio
    colocated_batch: Count
    tpot_plain: Seconds
    tpot_colocated_mean: Seconds
    tpot_colocated_at: Seconds        # simulated, at the TPOT target's percentile
    ttft_colocated_at: Seconds        # simulated, at the TTFT target's percentile
    tpot_inflation: Ratio
    colocated_tokens_per_second: Number
    transfer_bytes_per_gpu: Bytes
    transfer: Seconds
    transfer_exposed: Seconds
    ttft_disaggregated: Seconds
    prefill_instances: Count
    decode_instances: Count
    decode_batch: Count
    tpot_decode: Seconds              # closed form: the decode instances' steady TPOT at their batch
    disaggregated_tokens_per_second: Number
    idle_share: Fraction
    recommend: bool
    reasons: tuple[Note, ...]
    ratios: tuple[RatioRow, ...]
    breakeven_ratio: Number
    nic: Rate
    margin: Ratio                     # disaggregated / colocated goodput
    disaggregated_meets: bool         # the disaggregated TTFT and TPOT meet the targets
    decided: tuple[Note, ...]         # the figures that decided each side's batch, with their margins


def ratio_label(ratio: Number) -> Note:
    """A prompt:output ratio as text: ``4:1`` at or above one, ``1:10`` below."""
    r = ratio.number()
    if r >= 1:
        return note("{r:g}:1", r=ratio)
    return note("1:{inverse:g}", inverse=Number(1 / r, derived("1 / (prompt / output)", f"1 / {r:g}")))


class _Model:
    """The step model and pool limits of the scenario's replica, reused for every prompt length."""

    def __init__(self, s: Scenario, o: PdOptions) -> None:
        import numpy as np

        self.s, self.o = s, o
        self.factors = costs.step_factors(s.hardware, **(o.factors or {}))
        self.step = costs.step_model(s, self.factors)
        self.pool = capacity.kv_pool(s).kv_pool_bytes
        mnbt, _ = s.engine_adapter.batch_limits_for(s)
        self.chunk = mnbt.number()
        self.batches = np.arange(1, 4097, dtype=float)

    def fit(self, context: int) -> int:
        return capacity.fit(self.pool, capacity.request_bytes(self.s, context))

    def tpot_by_batch(self, p: int, d: int):
        """Steady decode TPOT for batches 1..4096 with contexts spread over p..p+d."""
        return self.step.steady_tpot(p, d, self.batches)

    def prefill(self, p: int) -> float:
        return self.step.prefill_seconds(p, 0, self.chunk if self.o.chunked else None)

    def colocated(self, p: int, d: int) -> tuple[Side, float, float]:
        """Best batch meeting the SLO on mean TPOT with prefill interference: (side, plain TPOT, T_pf)."""
        import numpy as np

        limit = min(self.fit(p + d), len(self.batches))
        t_pf = self.prefill(p)
        plain = self.tpot_by_batch(p, d)[:limit]
        mean = costs.colocated_tpot(plain, t_pf, self.batches[:limit], d)
        ok = np.nonzero(mean <= self.o.tpot_slo)[0]
        if not len(ok):
            worst = float(mean[0]) if limit else math.inf
            return Side(0, worst, 0.0, 0.0), float(plain[0]) if limit else math.inf, t_pf
        # among batches meeting the SLO, the one with the most tokens/s
        tps = self.batches[:limit][ok] / mean[ok]
        i = ok[int(np.argmax(tps))]
        b = int(self.batches[i])
        rps = b / (d * mean[i] + t_pf) if d else 1 / t_pf
        return Side(b, float(mean[i]), rps, float(b / mean[i])), float(plain[i]), t_pf

    def ceiling(self, p: int, d: int) -> int:
        """No colocated batch above pure decode's (prefills only add to a step) or the KV pool's meets."""
        return min(max(self.decode_only(p, d).batch, 1), self.fit(p + d), len(self.batches))

    def decode_only(self, p: int, d: int) -> Side:
        import numpy as np

        limit = min(self.fit(p + d), len(self.batches))
        plain = self.tpot_by_batch(p, d)[:limit]
        ok = np.nonzero(plain <= self.o.tpot_slo)[0]
        if not len(ok):
            return Side(0, float(plain[0]) if limit else math.inf, 0.0, 0.0)
        tps = self.batches[:limit][ok] / plain[ok]
        i = ok[int(np.argmax(tps))]
        b = int(self.batches[i])
        return Side(b, float(plain[i]), b / (d * plain[i]) if d else math.inf, float(b / plain[i]))

    def colocated_simulated(self, scenario: Scenario, start: int, ceiling: int
                            ) -> tuple[int, SimulatedBatch, SimulatedBatch | None]:
        """The largest colocated batch in 1..``ceiling`` whose simulated run (``simulate.simulated_batch``: a closed
        loop of ``scenario``'s equal requests whose prefill chunks run among the decode steps as the engine schedules
        them) meets the targets at their percentile: galloping from ``start`` (the closed form's batch, near the
        answer) to a bracket, then bisection (the figures grow with the batch). Returns (batch, its run, the first
        batch above it, which misses, or None when the ceiling meets); batch 0 when batch 1 misses."""
        from kvplan.calc.simulate import simulated_batch

        runs: dict[int, SimulatedBatch] = {}
        targets = self.o.targets
        assert targets is not None

        def meets(b: int) -> bool:
            if b not in runs:
                runs[b] = simulated_batch(scenario, b, targets)
            return runs[b].verdict.meets

        ceiling = max(ceiling, 1)
        b, step = min(max(start, 1), ceiling), 1
        if meets(b):                 # gallop up to the first batch that misses
            lo = b
            while True:
                nxt = min(lo + step, ceiling)
                if not meets(nxt):
                    hi = nxt
                    break
                if nxt == ceiling:
                    return ceiling, runs[ceiling], None
                lo, step = nxt, step * 2
        else:                        # gallop down to a batch that meets
            hi = b
            while True:
                nxt = max(hi - step, 1)
                if meets(nxt):
                    lo = nxt
                    break
                if nxt == 1:
                    return 0, runs[1], runs[1]
                hi, step = nxt, step * 2
        while hi - lo > 1:           # lo meets, hi misses
            mid = (lo + hi) // 2
            if meets(mid):
                lo = mid
            else:
                hi = mid
        return lo, runs[lo], runs[hi]

    def split(self, p: int, d: int, instances: int, forced: int | None):
        """(best n_p, requests/s, decode side, T_pf, idle share) over integer splits."""
        t_pf = self.prefill(p)
        dec = self.decode_only(p, d)
        best = None
        choices = [forced] if forced else range(1, instances)
        for n_p in choices:
            n_d = instances - n_p
            if n_d < 1:
                continue
            cap_p = n_p / t_pf
            cap_d = n_d * dec.requests_per_second
            rps = min(cap_p, cap_d)
            idle = 1 - rps / max(cap_p, cap_d) if max(cap_p, cap_d) > 0 else 0.0
            if best is None or rps > best[1]:
                best = (n_p, rps, dec, t_pf, idle)
        return best


def _figure_key(label: str) -> str:
    """The figure a verdict's ``decided_by`` names: "TPOT p99" -> tpot_seconds_p99, "attainment" -> slo_attainment."""
    if label == "attainment":
        return "slo_attainment"
    name, q = label.split()
    return f"{name.lower()}_seconds_{q}"


def _decided(targets: SloTargets, b: int, miss, tpot_q: Seconds, ttft_q: Seconds, b_dec: int,
             dec_tpot: Seconds, ttft: Seconds, dis_meets: bool) -> tuple[Note, ...]:
    """The figures that decided each side's batch, with their margins to the targets, as notes."""
    tq, fq = targets.tpot_percentile, targets.ttft_percentile
    tpot_slo = Seconds(targets.tpot, given(targets.tpot_origin))
    col = note(f"colocated batch {b}: TPOT p{tq} " + "{v:ms:,.1f} ms (simulated) against {slo:ms:g} ms", v=tpot_q,
               slo=tpot_slo)
    if targets.ttft is not None:
        col = col + note(f", TTFT p{fq} " + "{v:ms:,.1f} ms (simulated) against {slo:ms:g} ms", v=ttft_q,
                         slo=Seconds(targets.ttft, given(targets.ttft_origin)))
    if miss is not None:
        label = miss.verdict.decided_by
        key = _figure_key(label)
        fig = miss.figures[key]
        col = col + note(f"; batch {miss.users.value} misses on its {label} " + (
            "{v:.1%}" if key == "slo_attainment" else "{v:ms:,.1f} ms"), v=fig)
    else:
        col = col + note("; no larger batch: pure decode's TPOT or the KV pool stops it there")
    dis = note(f"disaggregated decode batch {b_dec}: TPOT " + "{v:ms:,.1f} ms (closed form: equal requests, no "
               "prefills) against {slo:ms:g} ms; TTFT {t:ms:,.1f} ms (closed form, no prefill queueing)", v=dec_tpot,
               slo=tpot_slo, t=ttft)
    if targets.ttft is not None:
        dis = dis + note(" against {slo:ms:g} ms" + ("" if dis_meets else ": missed, so no goodput"),
                         slo=Seconds(targets.ttft, given(targets.ttft_origin)))
    return col, dis


def _two_instances(s: Scenario, g: int) -> str:
    """The options that give the deployment two instances of ``g`` GPUs, each a change from what it has (so the
    hint changes the outcome when pasted): --dp 2 over a --dp the user pinned, --gpus over a --gpus given, and the
    --nodes that hold them; a default TP is pinned (it would grow with the GPUs)."""
    need, per_node = 2 * g, s.hardware.node.gpus_per_node
    flags = [f"--tp {s.parallelism.tp}"] if s.tp_defaulted else []
    flags += ["--dp 2"] if s.dp is not None else []
    if s.gpus is not None and s.gpus < need:
        flags.append(f"--gpus {need}")
    if need > s.nodes * per_node:
        flags.append(f"--nodes {-(-need // per_node)}")
    return " ".join(flags)


def plan_pd(scenario: Scenario, options: PdOptions | None = None) -> PdPlan:
    """Prefill/decode disaggregation against colocated serving for ``scenario`` (module docstring): goodput, TPOT
    and TTFT of each, the best prefill:decode split, and the KV transfer between them."""
    o = options or PdOptions()
    s = scenario
    par, hw = s.parallelism, s.hardware
    g = par.tp * par.pp
    instances = par.dp
    if instances < 2:
        raise KvplanError(f"{par.gpus} GPU(s) make {instances} instance(s) of TP x PP = {g}: disaggregation needs two",
                          f"plan two instances ({_two_instances(s, g)}), or a smaller --tp")
    ep = par.ep or 1
    if ep > g:      # the EP group spans instances: a prefill or decode instance alone would miss experts
        raise KvplanError(f"--ep {ep} spans {-(-ep // g)} instances of {g} GPU(s): split into prefill and decode, an "
                          f"instance holds {g} of the {ep} expert shards, not every expert",
                          f"give --tp {ep} so each instance holds the whole EP group, or --ep {g}")
    if o.prefill_gpus is not None:
        if o.prefill_gpus % g or not 0 < o.prefill_gpus < instances * g:
            raise KvplanError(f"--prefill-gpus {o.prefill_gpus} is not a whole number of {g}-GPU instances below "
                              f"{instances * g}", f"give a multiple of {g} between {g} and {(instances - 1) * g}")
    m = _Model(s, o)
    p, d = s.prompt_tokens, s.decode_tokens
    if p < 1 or d < 1:
        raise KvplanError("pd compares serving requests with both a prompt and an output",
                          "give --prompt and --decode of at least one token each")
    if m.fit(p + d) < 1:
        raise KvplanError(f"one request of {p + d:,} tokens does not fit in an instance's KV pool",
                          "shorten --prompt/--decode, use a smaller --kv-dtype, or larger instances (--tp)")
    targets = o.targets
    assert targets is not None      # PdOptions fills it in
    mean_col, _, t_pf = m.colocated(p, d)       # the closed form on the mean: where the search starts
    b_sim, sim, miss = m.colocated_simulated(s, mean_col.batch, m.ceiling(p, d))
    if b_sim == 0:
        label = sim.verdict.decided_by
        key = _figure_key(label)
        v = sim.figures[key].value
        flag = "--ttft-slo" if label.startswith("TTFT") else "--tpot-slo"
        fix = (f"give {flag} {math.ceil(v * 1e3 * 1.1)}ms or more" if v is not None and key != "slo_attainment"
               else "give a lower --slo-attainment")
        raise KvplanError(f"no colocated batch meets the {o.tpot_slo * 1e3:g} ms TPOT SLO"
                          + (f" and the {targets.ttft * 1e3:g} ms TTFT SLO" if targets.ttft is not None else "")
                          + f": even one request misses on its {label}"
                          + (f", {v * 1e3:,.1f} ms (simulated)" if v is not None and key != "slo_attainment" else ""),
                          fix)
    plain = float(m.tpot_by_batch(p, d)[b_sim - 1])
    mean_b = float(costs.colocated_tpot(plain, t_pf, b_sim, d))
    sim_tps = float(sim.tokens_per_second.value or 0.0)
    col = Side(b_sim, mean_b, sim_tps / d, sim_tps)
    chunks = max(1, math.ceil(p / m.chunk)) if o.chunked else 1
    share = t_pf / (t_pf + d * col.tpot / col.batch) if col.batch else 1.0
    dec_over_pf = (d * col.tpot / col.batch) / t_pf if col.batch and t_pf else math.inf
    tpot_q = sim.figures[f"tpot_seconds_p{targets.tpot_percentile}"]
    ttft_q = sim.figures[f"ttft_seconds_p{targets.ttft_percentile}"]

    # the KV of the prompt, moved to the decode side: each receiving GPU gets its shard at P tokens
    nbytes = capacity.request_bytes(s, p)
    nic = hw.node.nic_gb_s_per_direction_per_gpu
    if o.nic_gbps is not None:
        nic_v = Rate(o.nic_gbps * 1e9, given("--nic-gbps"))
    elif nic is not None:
        nic_v = Rate(nic.value * 1e9, default(f"{hw.id} NIC per GPU per direction", nic.cite()))
    else:
        raise KvplanError(f"{hw.id} has no nic_gb_s_per_direction_per_gpu in its preset, which the KV transfer needs",
                          "give --nic-gbps (GB/s per GPU per direction)")
    link_eff = m.factors.value("link")
    transfer = nbytes / (nic_v.number() * link_eff)
    layers = s.sized_model.num_layers
    exposed = max(transfer / layers, transfer - t_pf)
    ttft = t_pf + exposed + o.handover_seconds

    forced = o.prefill_gpus // g if o.prefill_gpus else None
    n_p, rps, dec, _, idle = m.split(p, d, instances, forced)
    # disaggregated decode is a steady batch of equal requests: closed form, TTFT without prefill queueing
    steady = steady_batch(dec.batch, ttft, dec.tpot, d, targets) if dec.batch else None
    dis_meets = steady is not None and steady.verdict.meets
    dis_tps = rps * d if dis_meets else 0.0
    col_tps = col.tokens_per_second * instances

    recommend = bool(dis_tps > col_tps * WIN_MARGIN)
    rows = []
    for r in RATIOS:
        pr = max(1, int(round(r * d)))
        fits = bool(not s.over_limit(pr + d) and m.fit(pr + d) >= 1)
        if not fits:
            rows.append(RatioRow(pr, r, 0.0, 0.0, 0, False, False))
            continue
        c, _, _ = m.colocated(pr, d)
        cb, crun, _ = m.colocated_simulated(s.with_(prompt_tokens=pr, decode_tokens=d), c.batch, m.ceiling(pr, d))
        c_tps = float(crun.tokens_per_second.value or 0.0) * instances if cb else 0.0
        n, rr, _, _, _ = m.split(pr, d, instances, None)
        rows.append(RatioRow(pr, r, c_tps, float(rr * d), n, bool(rr * d > c_tps * WIN_MARGIN), True))
    wins = [row for row in sorted(rows, key=lambda x: x.ratio) if row.fits and row.disaggregation_wins]
    breakeven = wins[0].ratio if wins else None

    def sec(v, formula, numbers):
        return Seconds(v, derived(formula, numbers))

    t_pf_v = sec(t_pf, "prefill of P tokens in chunks of max_num_batched_tokens (the step model's prefill)",
                 f"{p:,} tokens, {chunks} chunk(s): {t_pf * 1e3:.3f} ms")
    share_v = Fraction(share, derived("T_pf / (T_pf + D x TPOT / B)", f"{t_pf:.6g} / ({t_pf:.6g} + {d:,} x "
                                      f"{col.tpot:.6g} / {col.batch})"))
    col_tpot_v = sec(col.tpot, "closed form: TPOT(B) + T_pf x B / D", f"{plain:.6g} + {t_pf:.6g} x {col.batch} / {d:,}")
    col_tps_v = Number(col_tps, derived("simulated: instances x the batch's output tokens / simulated time",
                                        f"{instances} x {sim_tps:.6g}"))
    nbytes_v = Bytes(nbytes, derived("the request's KV at P tokens on one receiving GPU", f"{nbytes:,} B"))
    transfer_v = sec(transfer, "bytes per GPU / (NIC per GPU x link efficiency)",
                     f"{nbytes:,} / ({nic_v.number() / 1e9:g} GB/s x {link_eff:g})")
    exposed_v = sec(exposed, "max(transfer / layers, transfer - T_pf): overlapped layer by layer with the prefill",
                    f"max({transfer:.6g} / {layers}, {transfer:.6g} - {t_pf:.6g})")
    dis_tps_v = Number(dis_tps, derived("closed form: min(n_p / T_pf, n_d x B / (D x TPOT)) x D (output tokens/s); "
                                        "0 when the TTFT misses its target",
                                        f"{rps:.6g} x {d:,}" if dis_meets else "the targets are missed"))
    idle_v = Fraction(idle, derived("1 - throughput / the larger pool's capacity", f"{idle:.4f}"))
    reasons = (
        note("prefill is {share:.1%} of a colocated replica's time ({t_pf:ms:,.1f} ms per request against {d} decode "
             f"steps at {{tpot:ms:,.1f}} ms shared by {col.batch} requests)", share=share_v, t_pf=t_pf_v,
             d=Tokens(d), tpot=col_tpot_v),
        note(f"colocated: {{tps:,.0f}} output tokens/s on {instances} instances at batch {col.batch} (TPOT "
             f"p{targets.tpot_percentile} {{q:ms:,.1f}} ms simulated, SLO {{slo:ms:g}} ms; mean {{tpot:ms:,.1f}} ms in "
             "closed form)", tps=col_tps_v, q=tpot_q, slo=Seconds(o.tpot_slo), tpot=col_tpot_v),
        note(f"disaggregated: {{tps:,.0f}} tokens/s with {n_p} prefill and {instances - n_p} decode instance(s) at "
             f"batch {dec.batch}; the rounding leaves {{idle:.0%}} of the larger pool idle", tps=dis_tps_v,
             idle=idle_v),
        note("KV transfer {nbytes:MiB:,.1f} per GPU over {nic:G:g} GB/s: {transfer:ms:,.2f} ms, {exposed:ms:,.2f} ms "
             "exposed after the prefill", nbytes=nbytes_v, nic=nic_v, transfer=transfer_v, exposed=exposed_v))
    ttft_v = sec(ttft, "closed form: T_pf + exposed transfer + handover (no prefill queueing)",
                 f"{t_pf:.6g} + {exposed:.6g} + {o.handover_seconds:g}")
    dec_tpot_v = sec(dec.tpot, "closed form: the steady TPOT of the pure decode batch", f"B = {dec.batch}")
    margin = dis_tps / col_tps if col_tps else math.inf
    margin_v = Ratio(margin, derived("disaggregated goodput / colocated goodput (closed form / simulated)",
                                     f"{dis_tps:.6g} / {col_tps:.6g}"))
    decided = _decided(targets, col.batch, miss, tpot_q, ttft_q, dec.batch, dec_tpot_v, ttft_v, dis_meets)
    return PdPlan(
        s, o, Count(instances, derived("DP replicas: instances of TP x PP GPUs", f"{instances}")),
        Count(g, derived("TP x PP", f"{par.tp} x {par.pp}")),
        t_pf_v, Count(chunks, derived("ceil(P / chunk)", "")),
        sec(t_pf * g, "prefill seconds x the instance's GPUs (GPU-seconds per request)", f"{t_pf:.6g} x {g}"),
        share_v,
        Ratio(dec_over_pf, derived("decode GPU time per request / prefill GPU time per request",
                                   f"({d:,} x {col.tpot:.6g} / {col.batch}) / {t_pf:.6g}")),
        Count(col.batch, derived("simulated: the largest batch whose run meets the targets at their percentile "
                                 "(bisection)", f"B = {col.batch}")),
        sec(plain, "TPOT of the colocated batch without prefills", f"{plain * 1e3:.3f} ms"),
        col_tpot_v,
        tpot_q, ttft_q,
        Ratio(col.tpot / plain if plain else 1.0, derived("mean colocated TPOT / plain TPOT",
                                                          f"{col.tpot:.6g} / {plain:.6g}")),
        col_tps_v, nbytes_v, transfer_v, exposed_v,
        ttft_v,
        Count(n_p, derived("the integer split with the most requests/s" if not forced else "given with --prefill-gpus",
                           f"{n_p} of {instances}")),
        Count(instances - n_p, derived("instances - prefill instances", f"{instances} - {n_p}")),
        Count(dec.batch, derived("the decode batch with the most tokens/s meeting the SLO", f"B = {dec.batch}")),
        dec_tpot_v,
        dis_tps_v, idle_v, recommend, reasons, tuple(rows),
        Number(breakeven, derived("the smallest prompt:output ratio of the table at which disaggregation wins by 5%",
                                  f"{breakeven:g}" if breakeven else "none in 10:1 .. 1:100")),
        nic_v, margin_v, dis_meets, decided)
