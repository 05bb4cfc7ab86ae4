"""``kvplan pd``: prefill/decode disaggregation against colocated serving, from the one step and prefill model.

For N GPUs in replicas (instances) of G = TP x PP GPUs serving requests of P prompt and D output tokens:

Colocated: every replica prefills its own arrivals. A prefill of P tokens takes T_pf of the replica (chunked by
max_num_batched_tokens); with B requests decoding, a request finishes every D / B steps, so each step carries on
average B / D prefills, of which a request sees the other B - 1 (its own is its TTFT): mean TPOT = TPOT(B) +
T_pf x (B - 1) / D (``costs.colocated_tpot``). Without chunking the step that carries a prefill stalls for all of
T_pf; chunked, each step carries at most one chunk (T_pf / chunks). The closed form's batch: the largest B the pool
holds whose mean TPOT meets the SLO; requests/s per replica = B / (D x TPOT + T_pf), the cycle holding all B
prefills.

Disaggregated: each role gets its own layout (TP, with EP inside the TP group for a MoE model, or attention DP: R
ranks of TP GPUs with EP = TP x R over them, each rank its own requests and pool; PP as the scenario's), searched
separately, and the GPUs are split into n_p prefill instances of G_p GPUs and n_d decode instances of G_d, n_p G_p
+ n_d G_d <= N; a layout that cannot hold the weights and one request's KV is never used. A prefill instance (each
attention-DP rank of one) takes the prompts waiting when it starts a pass, up to k = its token budget // P, in one
pass T(k) (the weights read once; a prompt alone: T_pf); the KV of P tokens moves to the decode side over
each GPU's NIC (each decode GPU receives its shard and each prefill GPU sends its own; an MLA latent, whole on
every TP rank, goes to every rank), overlapped layer by layer with the prefill (the last layer's share is always
exposed), plus a per-request handover. Decode instances run pure decode at the largest B meeting the TPOT target
(closed form: equal requests, no prefills). The requests/s a split serves is bounded by min(n_p R_p k / max(T(k),
k x transfer), n_d R_d x B / (D x TPOT)) (R = 1 without attention DP); with a TTFT target, its goodput is the highest
Poisson rate under that bound whose TTFT (the prefill queue's wait, simulated FCFS over n_p R_p servers, each taking
the prompts waiting, up to k, in one pass, + T_pf + the exposed transfer + the handover + the frontend latency)
meets the target at its percentile and attainment.

The verdict compares goodput (requests/s meeting both targets; x D output tokens/s): the colocated side's is the
highest Poisson rate whose simulated run meets the targets, at most the rate the pool-capped batch sustains in
closed form (``_Model.sustained``: above it the queue grows, which a short run may not show). The break-even is
the bracket found among the table's ratios and this request's (at the given output length): the lowest ratio of
the run at the top where disaggregation wins, and the ratio next below it, where colocated serving wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.calc import capacity, costs
from kvplan.calc.closed_form import COLOCATED_SHARING_ROUNDS as COLOCATED_SHARING_ROUNDS
from kvplan.calc.closed_form import DEFAULT_HANDOVER_SECONDS as DEFAULT_HANDOVER_SECONDS
from kvplan.calc.closed_form import DEFAULT_TPOT_SLO as DEFAULT_TPOT_SLO
from kvplan.calc.closed_form import HANDOVER_SOURCE as HANDOVER_SOURCE
from kvplan.calc.closed_form import PREFILL_ROLE_SOURCE as PREFILL_ROLE_SOURCE
from kvplan.calc.closed_form import TPOT_SLO_SOURCE as TPOT_SLO_SOURCE
from kvplan.calc.closed_form import ClosedFormReplica
from kvplan.calc.closed_form import PdOptions as PdOptions
from kvplan.calc.closed_form import Side as Side
from kvplan.calc.slo import SloTargets
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

RATIOS = (50, 20, 10, 5, 2, 1, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01)   # prompt : output
WIN_MARGIN = 1.05   # disaggregation must beat colocated goodput by 5% to be recommended
# with no TTFT target, a TTFT at the goodput rate from this long up is named under the verdict (it counts as
# goodput all the same): 10 s, a judgement (no source), 5x the 2 s TTFT target of AIConfigurator's chat case (issue 21)
LONG_TTFT_SECONDS = 10.0


@dataclass(frozen=True)
class RatioRow:
    prompt_tokens: int
    ratio: float
    colocated_tokens_per_second: float
    disaggregated_tokens_per_second: float
    prefill_instances: int
    disaggregation_wins: bool
    fits: bool
    split: str = ""        # the disaggregated split found, in words
    colocated_layout: str = ""
    margin: float = 0.0    # disaggregated / colocated goodput

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
                      derived("the best split's goodput (simulated prefill queue, closed-form decode) x output "
                              "tokens",
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
    disaggregated: Disaggregated      # the best split: layouts, instances and figures
    colocated_requests_per_second: Number
    disaggregated_requests_per_second: Number
    disaggregated_capacity: Number    # the split's capacity bound, requests/s
    fluid_requests_per_second: Number  # the same layouts in fractions of an instance
    split_efficiency: Fraction        # capacity / fluid: what the integer split costs
    ttft_disaggregated_at: Seconds    # simulated prefill queue, at the TTFT target's percentile, at the goodput rate
    prefill_wait_at: Seconds
    prefill_tp: Count
    decode_tp: Count
    role_layouts: Count
    fluid_margin: Ratio               # fluid / colocated goodput
    colocated_tp: Count
    prefill_disaggregated: Seconds    # T_pf on the prefill role's layout
    breakeven_below: Number           # the priced ratio on the break-even's other side (colocated wins), or None
    colocated_rate_requests: Count    # the Poisson requests simulated at each colocated rate (seed 0)
    colocated_layout: RoleLayout | None = None   # the colocated instance's layout (searched)
    first_screen: tuple[Note, ...] = ()          # said under the verdict: layouts chosen over the given, a long TTFT
    prefill_batch: Count | None = None           # k: the prompts a saturated prefill rank packs into one pass
    prefill_packed: Seconds | None = None        # T(k) / k on the prefill role: a saturated rank's time per prompt

    @property
    def colocated_degrees(self) -> dict[str, Count]:
        """The colocated layout's EP and attention-DP ranks: ``colocated_ep``, ``colocated_attention_dp``."""
        lay = self.colocated_layout
        if lay is None:
            return {}
        return {f"colocated_{key}": Count(getattr(lay, attr), derived(f"the colocated layout's {what} (searched)",
                                                                      lay.label))
                for key, attr, what in (("ep", "ep", "EP"), ("attention_dp", "dp", "attention-DP ranks"))}

    @property
    def role_degrees(self) -> dict[str, Count]:
        """The split's EP and attention-DP ranks per role: ``prefill_ep``, ``prefill_attention_dp``, ``decode_ep``,
        ``decode_attention_dp``."""
        return {f"{role}_{key}": Count(getattr(lay, attr), derived(f"the {role} role's {what} (searched)", lay.label))
                for role, lay in (("prefill", self.disaggregated.prefill), ("decode", self.disaggregated.decode))
                for key, attr, what in (("ep", "ep", "EP"), ("attention_dp", "dp", "attention-DP ranks"))}


def ratio_label(ratio: Number) -> Note:
    """A prompt:output ratio as text: ``4:1`` at or above one, ``1:10`` below."""
    r = ratio.number()
    if r >= 1:
        return note("{r:.3g}:1", r=ratio)
    return note("1:{inverse:.3g}", inverse=Number(1 / r, derived("1 / (prompt / output)", f"1 / {r:g}")))


class _Model(ClosedFormReplica):
    """The closed-form replica (``closed_form.ClosedFormReplica``) and its colocated goodput, simulated
    (``simulate``)."""

    def colocated_goodput(self, scenario: Scenario, top: float, users: int, beat: float = 0.0):
        """Colocated goodput of one instance: the highest Poisson rate of ``scenario``'s equal requests whose
        simulated run (``simulate.simulated_rate``: a ``--sweep-rate`` point, judged by overload and the one SLO
        model) meets the targets, by bisection to ``COLOCATED_TOLERANCE`` from ``top`` (the closed loop's rate at
        its largest batch meeting the TPOT target, near the answer): up while ``top`` meets (x 1.25 four times, then
        doubling) to the first rate that misses or to pure decode's rate on the same replica (``decode_only``:
        prefills only add to a step, so no colocated rate above it is priced, the decode role's own bound), else
        down by halves to a rate that meets. The climb had stopped at top x 1.25^4: where the closed form's
        lockstep prefill price puts ``top`` far under the answer (short prompts on attention-DP ranks) colocated was
        reported at a rate whose TPOT p99 was far under its target (DeepSeek-R1 300 + 300, TP1 DP8 EP8 on vLLM:
        34 ms against 50). Returns (rate, its point, the first rate above it that misses or None); rate 0 when
        even ``top`` / 64 misses. ``beat``: a rate the caller needs beaten (another layout's); None as soon as the
        search cannot end above it (the answer is at most pure decode's rate, and below every rate that missed),
        so the runs it would still take are saved and every answer that can beat it is the same."""
        from kvplan.calc.simulate import simulated_rate

        targets = self.o.targets
        assert targets is not None
        n = min(max(COLOCATED_REQUESTS[0], 4 * users), COLOCATED_REQUESTS[1])
        points: dict = {}
        p, d = scenario.prompt_tokens, scenario.decode_tokens
        # no rate above what the pool-capped batch sustains (``sustained``): a run of a few hundred requests lets a
        # 1.25x overload pass when the pool caps the batch (Qwen3-30B-A3B, H100 TP1, fp8 KV, 16K + 300: 1.80
        # requests/s accepted, the closed form 1.48, a run of 2,000 requests sustaining 1.49)
        cap = self.sustained(p, d)[0]
        top = min(top, cap)
        upper = min(max(float(self.decode_only(p, d).requests_per_second), top), cap)

        def meets(r: float) -> bool:
            if r not in points:
                points[r] = simulated_rate(scenario, r, targets, n)
            return points[r].verdict.meets

        if upper <= beat:
            return None
        # the rates that miss are those above the answer (the bisection's premise): where ``beat`` lies in the range
        # still open after ``top`` (above it when it meets, below it when it misses), one run at ``beat`` that misses
        # ends the search, the answer being below it; one that meets is kept for the search, whose rates are the same
        hi = top
        if 0 < beat < upper and (beat > hi if meets(hi) else beat < hi) and not meets(beat):
            return None
        if meets(hi):
            lo, k = hi, 0
            while True:
                if lo >= upper:
                    return lo, points[lo], None
                hi = min(lo * (1.25 if k < 4 else 2.0), upper)
                k += 1
                if not meets(hi):
                    break
                lo = hi
        else:
            if hi <= beat:
                return None
            lo = hi / 2
            while not meets(lo):
                hi, lo = lo, lo / 2
                if hi <= beat:
                    return None
                if lo < top / 64:
                    return 0.0, points[hi], points[hi]
        if hi <= beat:
            return None
        while hi - lo > COLOCATED_TOLERANCE * hi:
            mid = (lo + hi) / 2
            if meets(mid):
                lo = mid
            else:
                hi = mid
                if hi <= beat:
                    return None
        return lo, points[lo], points[hi]

    def colocated_simulated(self, scenario: Scenario, start: int, ceiling: int
                            ) -> tuple[int, SimulatedBatch, SimulatedBatch | None]:
        """The largest colocated batch in 1..``ceiling`` whose simulated run (``simulate.simulated_batch``: a closed
        loop of ``scenario``'s equal requests whose prefill chunks run among the decode steps as the engine schedules
        them) meets the targets at their percentile: galloping from ``start`` (the closed form's batch, near the
        answer) to a bracket, then bisection (the figures grow with the batch). Returns (batch, its run, the first
        batch above it, which misses, or None when the ceiling meets); batch 0 when batch 1 misses."""
        from dataclasses import replace

        from kvplan.calc.simulate import simulated_batch
        from kvplan.calc.slo import largest_meeting

        runs: dict[int, SimulatedBatch] = {}
        targets = self.o.targets
        assert targets is not None
        tpot_only = replace(targets, ttft=None)   # a closed loop's TTFT is its users' lockstep, not a queue's

        def meets(b: int) -> bool:
            if b not in runs:
                runs[b] = simulated_batch(scenario, b, tpot_only)
            return runs[b].verdict.meets

        b, hi = largest_meeting(meets, start, ceiling)
        if b == 0:
            return 0, runs[1], runs[1]
        return b, runs[b], runs[hi] if hi is not None else None


# --- the disaggregated side: per-role layouts, the prefill queue and the KV transfer -----------------------------
PREFILL_QUEUE_REQUESTS = 4000   # Poisson arrivals simulated through the prefill queue at each rate tried
PREFILL_QUEUE_SEED = 0
RATE_TOLERANCE = 1e-3           # the goodput rate's bisection stops within 0.1% of the rate
TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)
ATTENTION_DP_DEGREES = (2, 4, 8, 16, 32)   # attention-DP ranks per instance tried for a MoE model (EP = TP x DP)
COLOCATED_TRIED = 2             # colocated layouts simulated besides the scenario's own (best by the closed form)
COLOCATED_REQUESTS = (200, 1500)  # Poisson requests per colocated rate tried: 4 x the batch, within these
COLOCATED_TOLERANCE = 0.02      # the colocated goodput's bisection stops within 2% of the rate


@dataclass(frozen=True)
class RoleLayout:
    """One role's instance: TP x PP GPUs, with EP inside the TP group (``ep`` = tp) or none; or, for a MoE model,
    ``dp`` attention data-parallel ranks of TP x PP GPUs each, the experts spread over all of them (``ep`` = tp x
    dp: SGLang's --enable-dp-attention, vLLM's --data-parallel-size with --enable-expert-parallel): each rank runs
    attention on its own requests with its own KV pool (an MLA latent is no longer copied on every GPU of the
    instance), the ranks exchange tokens for the experts (the step model's EP all-to-all)."""

    tp: int
    pp: int = 1
    ep: int | None = None
    dp: int = 1
    gpu: str = ""          # the role's GPU when it is not the scenario's (--prefill-gpu, --decode-gpu)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def label(self) -> str:
        return (f"TP{self.tp}" + (f" PP{self.pp}" if self.pp > 1 else "") + (f" DP{self.dp}" if self.dp > 1 else "")
                + (f" EP{self.ep}" if self.ep else "") + (f" on {self.gpu}" if self.gpu else ""))


def role_layouts(s: Scenario, o: PdOptions, colocated: bool = False, gpu: str = ""
                 ) -> tuple[tuple[RoleLayout, _Model], ...]:
    """The instance layouts a role may take on the scenario's GPUs, each with its step model and pool: TP of 1, 2,
    4, ... up to a node (the scenario's own TP too), at the scenario's PP, leaving at least one instance of the
    smallest layout for the other role; for a MoE model, with and without EP over the TP group (only with, when the
    scenario gives --ep), and attention DP: ``ATTENTION_DP_DEGREES`` ranks of each TP with EP over all of them
    (TP x DP). A layout the model's or the engine's rules refuse (experts that do not fit, EP that does not divide)
    or whose weights leave no KV pool is left out, so no role holds part of the model. A layout's ``_Model`` is one
    rank's (its step, pool and batch limits): an attention-DP instance is ``dp`` of them. ``colocated``: the layouts
    colocated serving may take besides those, which no role can: an instance of every GPU left (the other role's
    share is not needed; attention DP up to the GPU count, its ranks in lockstep). ``gpu``: the GPU's name in the
    layouts' labels, for a role on a GPU of its own (``role_scenario``)."""
    from dataclasses import replace

    par, hw = s.parallelism, s.hardware
    total = par.gpus
    spare = 0 if colocated else par.pp      # GPUs a layout leaves for the other role
    tps = sorted({t for t in TP_DEGREES if t <= hw.node.gpus_per_node} | {par.tp})
    moe = s.sized_model.params_expert is not None
    out = []
    for t in tps:
        if t * par.pp + spare > total:
            continue
        eps: tuple[int | None, ...] = (None,)
        if moe and t > 1:
            eps = (t,) if par.ep else (None, t)
        lays = [RoleLayout(t, par.pp, e) for e in eps]
        if moe:     # attention DP: EP over every rank of the instance
            lays += [RoleLayout(t, par.pp, t * a, a) for a in ATTENTION_DP_DEGREES if t * a * par.pp + spare <= total]
        if colocated:      # only what the roles' layouts leave out: instances of more than total - PP GPUs
            lays = [lay for lay in lays if lay.gpus + par.pp > total]
        for lay in lays:
            try:
                rs = s.with_(tp=t, pp=par.pp, dp=lay.dp, ep=lay.ep)
                m = _Model(rs, o)
            except KvplanError:
                continue
            out.append((replace(lay, gpu=gpu) if gpu else lay, m))
    return tuple(out)


def prefill_queue_waits(rate: float, servers: int, service, requests: int = PREFILL_QUEUE_REQUESTS,
                        seed: int = PREFILL_QUEUE_SEED):
    """The waits of ``requests`` Poisson arrivals at ``rate``/s through ``servers`` prefill ranks serving first
    come, first served. ``service`` a number: each request alone for ``service`` s (M/D/c); the wait is start -
    arrival. With equal service times the server that frees first is the one that took the request ``servers``
    places earlier, so start_i = max(arrival_i, start_(i - servers) + service): the queue in one pass.
    ``service`` a sequence: batch service, ``service[j - 1]`` the pass of j prompts packed together (j = 1 ..
    k): a rank that frees (or, idle, meets an arrival) takes every prompt waiting then, up to k, in one pass; the
    wait is the pass's end - arrival - ``service[0]`` (the queue and what packing adds to a prompt alone), so a
    prompt that finds the ranks idle waits 0 and its TTFT is one prompt's pass. The same seeded draws at every rate
    (arrivals = unit exponential gaps / rate), so the waits grow with the rate."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0, requests)) / rate
    if not isinstance(service, (int, float)):
        return _batch_service_waits(arrivals, servers, tuple(service))
    start = arrivals.tolist()
    for i in range(servers, requests):
        free = start[i - servers] + service
        if free > start[i]:
            start[i] = free
    return np.asarray(start) - arrivals


def _batch_service_waits(arrivals, servers: int, passes: tuple[float, ...]):
    """``prefill_queue_waits``' batch service: the rank that frees first (a heap of free times) takes the waiting
    prompts from the queue's head, every one arrived by the time it starts (at least the head, up to
    ``len(passes)``), and ends them together after ``passes[j - 1]``."""
    import heapq

    import numpy as np

    k, n = len(passes), len(arrivals)
    arr = arrivals.tolist()
    starts, extra = arr[:], [0.0] * n       # each prompt's pass start, and what its pass takes beyond a lone one's
    free = [0.0] * servers
    i = 0
    while i < n:
        start = max(heapq.heappop(free), arr[i])
        j = i + 1
        while j < n and j - i < k and arr[j] <= start:
            j += 1
        more = passes[j - i - 1] - passes[0]
        for x in range(i, j):
            starts[x], extra[x] = start, more
        heapq.heappush(free, start + passes[j - i - 1])
        i = j
    return np.asarray(starts) - arrivals + np.asarray(extra)


@dataclass(frozen=True)
class Disaggregated:
    """The best disaggregated deployment found for one request length: its layouts and split, its figures, and its
    goodput (requests/s meeting the targets; 0 when no rate does)."""

    prefill: RoleLayout
    decode: RoleLayout
    prefill_instances: int
    decode_instances: int
    prefill_seconds: float
    decode_batch: int
    decode_tpot: float
    transfer_bytes: int          # on the busiest NIC: max(a decode GPU's shard, a prefill GPU's shard)
    transfer: float
    exposed: float
    ttft_unloaded: float         # T_pf + exposed + handover + frontend: no queue
    capacity: float              # min(n_p / max(T_pf, transfer), n_d x B / (D x TPOT)), requests/s
    fluid: float                 # the same layouts split in fractions of an instance: N / (G_p / c_p + G_d / c_d)
    requests_per_second: float   # goodput
    ttft_at: float               # TTFT at the TTFT target's percentile at the goodput rate (simulated queue)
    wait_at: float               # the prefill queue's wait at that percentile
    limited_by: str              # what stops the rate: "TTFT p99", "prefill capacity", "decode capacity"
    layouts: int                 # role layouts that hold the model
    splits: int                  # (prefill layout, decode layout, n_p) splits priced
    prefill_batch: int = 1       # k: the prompts a saturated prefill rank packs into one pass
    prefill_pass: float = 0.0    # max(T(k), k x transfer): a packed pass, k prompts
    prefill_service: float = 0.0  # prefill_pass / k: a saturated prefill rank's time per prompt


def _prefill_ttft(rate: float, n_p: int, service, fixed: float, targets: SloTargets):
    """(TTFT at the target's percentile, its queue wait there, whether the targets hold) at ``rate``: the
    simulated prefill queue's waits + ``fixed`` (T_pf + exposed transfer + handover + frontend), judged by the one
    SLO model (percentile form, then attainment; the decode TPOT meets by construction). ``service``: a prompt's
    service time, or the passes of 1 .. k prompts packed (``prefill_queue_waits``' batch service)."""
    import numpy as np

    from kvplan.calc.slo import attainment

    waits = prefill_queue_waits(rate, n_p, service)
    q = targets.ttft_percentile
    wait_q = float(np.percentile(waits, q))
    ttft = waits + fixed
    ok = True
    if targets.ttft is not None:
        share = attainment(ttft, np.full(len(ttft), np.nan), targets)
        ok = wait_q + fixed <= targets.ttft and share is not None and share >= targets.attainment
    return wait_q + fixed, wait_q, ok


def search_disaggregated(s: Scenario, o: PdOptions, roles, p: int, d: int, total: int, nic: float, link_eff: float,
                         forced_prefill_gpus: int | None, decode_roles=None) -> Disaggregated | None:
    """The disaggregated deployment with the highest goodput for P = ``p``, D = ``d`` on ``total`` GPUs over every
    pair of ``roles`` (``role_layouts``) and every prefill instance count (``forced_prefill_gpus``: only splits with
    that many prefill GPUs): the splits priced in order of their capacity bound, the prefill queue simulated only for
    a split whose bound beats the best goodput so far. None when no split serves a request. ``decode_roles``: the
    decode role's layouts when it runs on a GPU of its own (``--decode-gpu``; default ``roles``)."""
    from kvplan.calc.costs import frontend_seconds

    targets = o.targets
    assert targets is not None
    front = frontend_seconds(s).number()
    pre, dec = [], []
    for lay, m in roles:
        if m.fit(p + 1) >= 1:
            passes = m.prefill_passes(p)
            pre.append((lay, m, passes[0], capacity.request_bytes(m.s, p), passes))
    for lay, m in (roles if decode_roles is None else decode_roles):
        side = m.decode_only(p, d)
        if side.batch:
            dec.append((lay, m, side, capacity.request_bytes(m.s, p)))
    layers = s.sized_model.num_layers
    cands = []
    for lp, _, t_pf, send, passes in pre:
        for ld, _, side, recv in dec:
            nbytes = max(send, recv)
            transfer = nbytes / (nic * link_eff)
            exposed = max(transfer / layers, transfer - t_pf)
            # a pass of j prompts holds its rank for T(j) and its NIC for j transfers (one request's KV at a time)
            held = tuple(max(t, j * transfer) for j, t in enumerate(passes, 1))
            service = held[-1] / len(held)       # a saturated rank's time per prompt: k prompts a pass
            # an instance's capacities: each attention-DP rank prefills k prompts a pass and decodes its own batch
            c_p, c_d = lp.dp / service, ld.dp * side.requests_per_second
            fluid = total / (lp.gpus / c_p + ld.gpus / c_d)
            n_p = 0
            while True:
                n_p += 1
                n_d = (total - n_p * lp.gpus) // ld.gpus
                if n_d < 1:
                    break
                if forced_prefill_gpus is not None and n_p * lp.gpus != forced_prefill_gpus:
                    continue
                bound = min(n_p * c_p, n_d * c_d)
                used = n_p * lp.gpus + n_d * ld.gpus
                cands.append((bound, -used, lp, ld, n_p, n_d, t_pf, side, nbytes, transfer, exposed, service, fluid,
                              held))
    if not cands:
        return None
    cands.sort(key=lambda c: (-c[0], -c[1]))
    best: Disaggregated | None = None
    for bound, _, lp, ld, n_p, n_d, t_pf, side, nbytes, transfer, exposed, service, fluid, held in cands:
        if best is not None and bound <= best.requests_per_second:
            break
        fixed = t_pf + exposed + o.handover_seconds + front
        servers = n_p * lp.dp      # prefill servers: every attention-DP rank of every prefill instance
        limited = ("prefill capacity" if servers / service <= n_d * ld.dp * side.requests_per_second
                   else "decode capacity")
        ttft_top, wait_top, ok_top = _prefill_ttft(bound, servers, held, fixed, targets)
        if ok_top:
            rate, ttft_at, wait_at = bound, ttft_top, wait_top
        else:
            # only a TTFT target fails here (the decode TPOT meets by construction)
            assert targets.ttft is not None
            limited = f"TTFT p{targets.ttft_percentile}" if ttft_top > targets.ttft else "TTFT attainment"
            lo, hi = 0.0, bound
            floor = best.requests_per_second if best is not None else -1.0
            if not _prefill_ttft(bound * RATE_TOLERANCE, servers, held, fixed, targets)[2]:
                rate = 0.0
            else:
                lo = bound * RATE_TOLERANCE
                while hi - lo > RATE_TOLERANCE * hi:
                    mid = (lo + hi) / 2
                    if _prefill_ttft(mid, servers, held, fixed, targets)[2]:
                        lo = mid
                    else:
                        hi = mid
                        if hi <= floor:
                            break     # its rate ends below hi, so not above the best found: the rest is saved
                rate = lo
            if hi <= floor:
                continue
            ttft_at, wait_at, _ = (_prefill_ttft(rate, servers, held, fixed, targets) if rate
                                   else (fixed, 0.0, False))
        if best is None or rate > best.requests_per_second:
            best = Disaggregated(lp, ld, n_p, n_d, float(t_pf), side.batch, float(side.tpot), nbytes,
                                 float(transfer), float(exposed), float(fixed), float(bound), float(fluid),
                                 float(rate), float(ttft_at), float(wait_at), limited, len(roles), len(cands),
                                 len(held), float(held[-1]), float(service))
    return best


def _figure_key(label: str) -> str:
    """The figure a verdict's ``decided_by`` names: "TPOT p99" -> tpot_seconds_p99, "attainment" -> slo_attainment."""
    if label == "attainment":
        return "slo_attainment"
    name, q = label.split()
    return f"{name.lower()}_seconds_{q}"


def _decided(targets: SloTargets, b: int, miss, closed_tpot: Seconds, good, dis: Disaggregated,
             dec_tpot: Seconds, ttft: Seconds, wait: Seconds, dis_meets: bool, eff: Fraction,
             fluid: Number, fluid_margin: Ratio, margin: Ratio, per: str = "instance", capped: Number | None = None,
             capped_batch: int = 0) -> tuple[Note, ...]:
    """The figures that decided each side, with their margins to the targets, as notes: the colocated closed loop's
    batch (TPOT) and its goodput rate (TTFT and TPOT at the percentile under Poisson arrivals), the disaggregated
    split."""
    tq, fq = targets.tpot_percentile, targets.ttft_percentile
    tpot_slo = Seconds(targets.tpot, given(targets.tpot_origin))
    rate, tpot_q, ttft_q, rate_miss = good
    col = note(f"colocated batch {b}: TPOT p{tq} " + "{v:ms:,.1f} ms (simulated) against {slo:ms:g} ms",
               v=closed_tpot, slo=tpot_slo)
    if miss is not None:
        label = miss.verdict.decided_by
        key = _figure_key(label)
        col = col + note(f"; batch {miss.users.value} misses on its {label} " + (
            "{v:.1%}" if key == "slo_attainment" else "{v:time:,.1f}"), v=miss.figures[key])
    else:
        col = col + note("; the KV pool or pure decode's TPOT caps it")
    col = col + note("; goodput {r:,.3g} requests/s per " + per + " (Poisson): TPOT " + f"p{tq} "
                     + "{t:ms:,.1f} ms, TTFT " + f"p{fq} " + "{f:time:,.1f}",
                     r=Number(rate, derived("the highest rate meeting the targets (bisection)", f"{rate:.6g}")),
                     t=tpot_q, f=ttft_q)
    if targets.ttft is not None:
        col = col + note(" against {slo:ms:g} ms", slo=Seconds(targets.ttft, given(targets.ttft_origin)))
    if capped is not None:
        col = col + note(f"; decided in closed form: the KV pool's batch of {capped_batch} sustains at most "
                         "{r:,.3g} requests/s (a longer run's queue grows above it)", r=capped)
    elif rate_miss is not None:
        label = rate_miss.verdict.decided_by
        key = "" if label == "overload" else _figure_key(label)
        col = col + note("; {r:,.3g} requests/s misses on its " + label + (
            "" if not key else " {v:.1%}" if key == "slo_attainment" else " {v:time:,.1f}"),
            r=Number(rate_miss.rate, derived("the first rate tried above the goodput that misses",
                                             f"{rate_miss.rate:.6g}")),
            **({"v": rate_miss.figures[key]} if key else {}))
    q = targets.ttft_percentile
    out = note(f"disaggregated {_split_text(dis)}: decode batch {dis.decode_batch}, TPOT " + "{v:ms:,.1f} ms "
               "(closed form) against {slo:ms:g} ms; " + f"TTFT p{q} "
               + "{t:time:,.1f} at the goodput rate (simulated prefill queue: wait {w:time:,.1f})", v=dec_tpot,
               slo=tpot_slo, t=ttft, w=wait)
    if targets.ttft is not None:
        out = out + note(" against {slo:ms:g} ms" + ("" if dis_meets else ": missed even unloaded, so no goodput"),
                         slo=Seconds(targets.ttft, given(targets.ttft_origin)))
    # against no colocated goodput the ratio is no figure (infinite, or 0 / 0): say so instead of "infx". The
    # fractional split's rate is a capacity (no prefill queue): held by a TTFT target, the split serves far less than
    # it, so the ratio to colocated goodput is named as a capacity's and the goodput ratio is said beside it
    if not math.isfinite(fluid_margin.number()):
        against = "(colocated: no goodput)"
    elif dis.limited_by.startswith("TTFT"):
        against = "(a capacity, no TTFT queue: {fm:.2f}x colocated goodput; {m:.2f}x under " + dis.limited_by + ")"
    else:
        against = "({fm:.2f}x colocated)"
    out = out + note(f"; held by {dis.limited_by}; whole instances reach " + "{eff:.0%} of a fractional split's "
                     "{fluid:,.3g} requests/s " + against, eff=eff, fluid=fluid, fm=fluid_margin, m=margin)
    return col, out


def _smaller_layout(s: Scenario, ranks: int) -> str:
    """The hint's other way to two instances: a smaller degree of the layout that is above one (--tp 1 --pp 2 on 2
    GPUs: a smaller --pp, never a smaller --tp than 1); none for an attention-DP instance."""
    if ranks != 1:
        return ""
    smaller = [flag for flag, degree in (("--tp", s.parallelism.tp), ("--pp", s.parallelism.pp)) if degree > 1]
    return ", or a smaller " + " or ".join(smaller) if smaller else ""


def _two_instances(s: Scenario, g: int, ranks: int = 1) -> str:
    """The options that give the deployment two instances of ``g`` GPUs, each a change from what it has (so the
    hint changes the outcome when pasted): --dp 2 over a --dp the user pinned, --gpus over a --gpus given, and the
    --nodes that hold them; a default TP is pinned (it would grow with the GPUs)."""
    need, per_node = 2 * g * ranks, s.hardware.node.gpus_per_node
    flags = [f"--tp {s.parallelism.tp}"] if s.tp_defaulted else []
    flags += [f"--dp {2 * ranks}"] if s.dp is not None else []     # attention DP: 2 instances of its ranks
    if s.gpus is not None and s.gpus < need:
        flags.append(f"--gpus {need}")
    if need > s.nodes * per_node:
        flags.append(f"--nodes {-(-need // per_node)}")
    return " ".join(flags)


def role_scenario(s: Scenario, gpu: str | None, flag: str) -> Scenario:
    """The scenario a role runs on with ``--prefill-gpu`` / ``--decode-gpu``: the same model, engine, settings and
    GPU count on that GPU preset (or file), over as many of its nodes as the GPUs take; ``s`` itself when not given
    or the same GPU."""
    if gpu is None:
        return s
    from kvplan.inputs import presets

    try:
        hw = presets.load_hardware(str(gpu), [])
    except KvplanError as err:
        raise KvplanError(f"{flag} {gpu}: {err.message}", err.hint.replace("--hardware", flag) if err.hint else
                          f"give {flag} as a GPU preset id (kvplan presets list) or a file") from None
    if hw == s.hardware:
        return s
    total = s.parallelism.gpus
    try:
        return s.with_(hardware=hw, nodes=-(-total // hw.node.gpus_per_node), gpus=total)
    except KvplanError as err:
        raise KvplanError(f"{flag} {hw.id}: {err.message}", err.hint) from None


def plan_pd(scenario: Scenario, options: PdOptions | None = None) -> PdPlan:
    """Prefill/decode disaggregation against colocated serving for ``scenario`` (module docstring): goodput, TPOT
    and TTFT of each, the best prefill:decode split, and the KV transfer between them."""
    o = options or PdOptions()
    s = scenario
    par, hw = s.parallelism, s.hardware
    g = par.tp * par.pp
    ep = par.ep or 1
    # the scenario's own layout with attention DP (--tp T --dp R.. --ep T x A, a MoE model): instances of A ranks of
    # T GPUs each, the experts over all of them, as the role layouts pd searches (RoleLayout's docstring)
    ranks = ep // g if (ep > g and ep % g == 0 and s.sized_model.params_expert is not None
                        and par.dp % (ep // g) == 0) else 1
    instances = par.dp // ranks
    # one attention-DP instance (--tp 1 --dp 32 --ep 32): colocated is that instance, and the roles' layouts are
    # searched on its GPUs (each role its own smaller attention-DP or TP layout); refused below only if no split holds
    # the model. One TP instance keeps the refusal: its hint gives two instances of the user's own layout.
    if instances < 2 and ranks == 1:
        what = f"TP x PP = {g}" + (f" x {ranks} attention-DP ranks (EP {ep})" if ranks > 1 else "")
        raise KvplanError(f"{par.gpus} GPU(s) make {instances} instance(s) of {what}: disaggregation needs two",
                          f"plan two instances ({_two_instances(s, g, ranks)})" + _smaller_layout(s, ranks))
    if ep > g * ranks:      # the EP group spans instances: a prefill or decode instance alone would miss experts
        raise KvplanError(f"--ep {ep} spans {-(-ep // g)} instances of {g} GPU(s): split into prefill and decode, an "
                          f"instance holds {g} of the {ep} expert shards, not every expert",
                          f"give --tp {ep} so each instance holds the whole EP group, or --ep {g}")
    if o.prefill_gpus is not None and not 0 < o.prefill_gpus < par.gpus:
        raise KvplanError(f"--prefill-gpus {o.prefill_gpus} leaves no GPU for decode or prefill of the {par.gpus}",
                          f"give a number of GPUs between 1 and {par.gpus - 1}")
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
    total = par.gpus
    roles = role_layouts(s, o)
    s_p = role_scenario(s, o.prefill_hardware, "--prefill-gpu")
    s_d = role_scenario(s, o.decode_hardware, "--decode-gpu")
    pre_roles = roles if s_p is s else role_layouts(s_p, o, gpu=s_p.hardware.id)
    dec_roles = roles if s_d is s else role_layouts(s_d, o, gpu=s_d.hardware.id)
    for flag, rs, rl, tokens, what in (("--prefill-gpu", s_p, pre_roles, p, "prompt"),
                                       ("--decode-gpu", s_d, dec_roles, p + d, "request")):
        if rs is not s and not any(rm.fit(tokens + (what == "prompt")) >= 1 for _, rm in rl):
            raise KvplanError(f"{flag} {rs.hardware.id}: no layout of at most {total - par.pp} of its GPUs holds "
                              f"{s.model.id} and a {tokens:,}-token {what}",
                              f"give a GPU with more memory ({flag}) or more GPUs (--nodes)")
    own = ((RoleLayout(par.tp, par.pp, par.ep, ranks), _Model(s.with_(dp=ranks), o)) if ranks > 1 else
           (RoleLayout(par.tp, par.pp, par.ep), m))
    own_instances = instances
    col_roles = roles + role_layouts(s, o, colocated=True)    # colocated may also take an instance of every GPU
    col_lay, cm, instances, one, (good_rate, good_pt, good_miss) = _colocated_layout(col_roles, own, instances, p, d,
                                                                                       total)
    mean_col, _, _ = cm.colocated(p, d)       # the closed form on the mean: where the closed loop's search starts
    b_sim, sim, miss = cm.colocated_simulated(one, mean_col.batch, cm.ceiling(p, d))
    g = col_lay.gpus
    _, _, t_pf = cm.colocated(p, d)
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
    plain = float(cm.tpot_by_batch(p, d)[b_sim - 1])
    mean_b = float(costs.colocated_tpot(plain, t_pf, b_sim, d))
    sim_tps = float(sim.tokens_per_second.value or 0.0)
    col = Side(b_sim, mean_b, sim_tps / d, sim_tps)
    chunks = max(1, math.ceil(p / cm.chunk)) if o.chunked else 1
    # a request's GPU time: its prefill and its share of D plain decode steps (the mean TPOT holds the other
    # requests' prefills, which are theirs)
    share = t_pf / (t_pf + d * plain / col.batch) if col.batch else 1.0
    dec_over_pf = (d * plain / col.batch) / t_pf if col.batch and t_pf else math.inf
    closed_tpot_q = sim.figures[f"tpot_seconds_p{targets.tpot_percentile}"]
    figs = good_pt.figures if good_pt is not None else sim.figures    # at the goodput rate (Poisson), simulated
    tpot_q = figs[f"tpot_seconds_p{targets.tpot_percentile}"]
    ttft_q = figs[f"ttft_seconds_p{targets.ttft_percentile}"]

    # the disaggregated side: every pair of role layouts and split, the prefill queue and the KV transfer
    # the KV crosses a prefill GPU's NIC and a decode GPU's: the slower of the two roles' GPUs (one GPU: its own)
    role_hws = [hw] if s_p is s_d is s else [rs.hardware for rs in (s_p, s_d)]
    nics = [(h, h.node.nic_gb_s_per_direction_per_gpu) for h in role_hws]
    if o.nic_gbps is not None:
        nic_v = Rate(o.nic_gbps * 1e9, given("--nic-gbps"))
    elif all(n is not None for _, n in nics):
        slow, nic = min(((h, n) for h, n in nics if n is not None), key=lambda hn: hn[1].value)
        nic_v = Rate(nic.value * 1e9, default(f"{slow.id} NIC per GPU per direction" + (
            " (the slower of the two roles' GPUs)" if len(nics) > 1 and s_p.hardware.id != s_d.hardware.id else ""),
            nic.cite()))
    else:
        bare = next(h for h, n in nics if n is None)
        raise KvplanError(f"{bare.id} has no nic_gb_s_per_direction_per_gpu in its preset, which the KV transfer "
                          "needs", "give --nic-gbps (GB/s per GPU per direction)")
    link_eff = min(m.factors.value("link"), *(costs.step_factors(h, **(o.factors or {})).value("link")
                                               for h in role_hws))
    dis = search_disaggregated(s, o, pre_roles, p, d, total, nic_v.number(), link_eff, o.prefill_gpus, dec_roles)
    if dis is None and o.prefill_gpus is not None:
        sizes = sorted({lay.gpus for lay, _ in roles})
        raise KvplanError(f"no split of {total} GPUs has {o.prefill_gpus} prefill GPUs: the layouts that hold the "
                          "model take " + ", ".join(str(x) for x in sizes) + " GPU(s) an instance",
                          f"give --prefill-gpus as a multiple of {sizes[0]} below {total}" if sizes else
                          "drop --prefill-gpus")
    if dis is None:
        holds = sorted({lay.gpus for lay, _ in roles})       # role layouts hold the model's weights and a pool
        why = (f": the smallest role layout that holds the model takes {holds[0]} GPUs, leaving {total - holds[0]} for "
               "the other role" if holds else f": no layout of at most {total - par.pp} GPUs (one role's share, the "
               "other role's instance left out) holds them")
        need = 2 * (holds[0] if holds else max(total, par.tp * par.pp * ranks))
        per_node = hw.node.gpus_per_node
        if own_instances < 2:     # one attention-DP instance: two of it (a --dp given doubles with them)
            hint = f"plan two instances ({_two_instances(s, par.tp * par.pp, ranks)})"
        elif need > per_node:
            hint = f"give {need} GPUs or more (--nodes {-(-need // per_node)})"
        else:
            hint = f"give {need} GPUs or more (--gpus {need})"
        raise KvplanError(f"no split of {total} GPUs into prefill and decode instances holds the model and a "
                          f"{p + d:,}-token request" + why, hint)
    col_rps = good_rate * instances * col_lay.dp      # per replica (an attention-DP rank) x replicas
    # which rule decided the colocated rate: the closed form's sustained rate of the pool-capped batch, or the run
    sus_rate, sus_b, sus_pf, sus_tpot = cm.sustained(p, d)
    pool_capped = bool(good_rate > 0 and good_rate >= sus_rate * (1 - 1e-9))
    col_tps = col_rps * d
    dis_rps = float(dis.requests_per_second)
    dis_tps = dis_rps * d
    dis_meets = bool(dis_rps > 0)
    n_p, n_d = dis.prefill_instances, dis.decode_instances
    recommend = bool(dis_rps > col_rps * WIN_MARGIN)

    rows = []
    for r in RATIOS if o.table else ():
        pr = max(1, int(round(r * d)))
        fits = bool(not s.over_limit(pr + d) and any(rm.fit(pr + d) >= 1 for _, rm in (own, *roles)))
        if not fits:
            rows.append(RatioRow(pr, r, 0.0, 0.0, 0, False, False))
            continue
        # the row at this request's own prompt is the request's search, already done (the same layouts and SLO)
        c_lay, _, n, _, (c_rate, _, _) = (_colocated_layout(col_roles, own, own_instances, pr, d, total) if pr != p else
                                          (col_lay, cm, instances, one, (good_rate, good_pt, good_miss)))
        c_tps = c_rate * n * c_lay.dp * d
        rd = (search_disaggregated(s, o, pre_roles, pr, d, total, nic_v.number(), link_eff, o.prefill_gpus,
                                   dec_roles) if pr != p
              else dis)
        r_tps = rd.requests_per_second * d if rd is not None else 0.0
        rows.append(RatioRow(pr, r, c_tps, r_tps, rd.prefill_instances if rd is not None else 0,
                             bool(r_tps > c_tps * WIN_MARGIN), True,
                             _split_text(rd, short=True) if rd is not None else "no split holds the model",
                             f"{n} {c_lay.label}", r_tps / c_tps if c_tps else math.inf))
    flips_note = _flips(rows, None if o.chunked and s.engine_adapter.mixes_prefill_chunks() else own[1])
    breakeven, below, priced = _breakeven(rows, p, d, recommend)
    pre_m = next(m for lay, m in pre_roles if lay == dis.prefill)     # the prefill role's model: its token budget

    t_pf_v = Seconds(t_pf, derived("prefill of P tokens in chunks of max_num_batched_tokens (the step model's prefill)",
                 f"{p:,} tokens, {chunks} chunk(s): {t_pf * 1e3:.3f} ms"))
    share_v = Fraction(share, derived("T_pf / (T_pf + D x TPOT(B) / B), TPOT(B) without prefills",
                                      f"{t_pf:.6g} / ({t_pf:.6g} + {d:,} x {plain:.6g} / {col.batch})"))
    plain_v = Seconds(plain, derived("TPOT of the colocated batch without prefills", f"{plain * 1e3:.3f} ms"))
    col_tpot_v = Seconds(col.tpot, derived("closed form: TPOT(B) + T_pf x (B - 1) / D",
                                           f"{plain:.6g} + {t_pf:.6g} x ({col.batch} - 1) / {d:,}"))
    ranks_text = f" x {col_lay.dp} attention-DP ranks" if col_lay.dp > 1 else ""
    if pool_capped:
        col_rps_v = Number(col_rps, derived(
            "closed form: instances x the rate the pool-capped batch sustains, B / (D x TPOT(B) + B x T_pf) at B = "
            "the KV pool's batch (T_pf as the engine's steps pay it: a pass of the B / D prompts waiting at a step, "
            "per prompt, where prefills are passes of their own); no rate above it is sustained, and the "
            "simulated run at it (a --sweep-rate point) meets the targets",
            f"{instances} x {good_rate:.6g}{ranks_text}; {sus_b} / ({d:,} x {sus_tpot:.6g} + {sus_b} x "
            f"{sus_pf:.6g}) = {sus_rate:.6g}"))
    else:
        col_rps_v = Number(col_rps, derived(
            "simulated: instances x the highest Poisson rate per instance whose run meets the targets (a "
            "--sweep-rate point: not overloaded, TTFT and TPOT at their percentile, attainment; bisection to 2%; "
            "under the pool-capped batch's sustained rate in closed form)",
            f"{instances} x {good_rate:.6g}{ranks_text}; sustained at most {sus_rate:.6g} (B = {sus_b})"))
    col_tps_v = Number(col_tps, derived("colocated goodput requests/s x D output tokens", f"{col_rps:.6g} x {d:,}"))
    nbytes_v = Bytes(dis.transfer_bytes, derived(
        "the request's KV at P tokens on the busiest NIC: max(a decode GPU's shard, a prefill GPU's shard)",
        f"{dis.transfer_bytes:,} B"))
    transfer_v = Seconds(dis.transfer, derived("bytes per GPU / (NIC per GPU x link efficiency)",
                     f"{dis.transfer_bytes:,} / ({nic_v.number() / 1e9:g} GB/s x {link_eff:g})"))
    exposed_v = Seconds(dis.exposed, derived("max(transfer / layers, transfer - T_pf): overlapped layer by layer "
                                             "with the "
                    "prefill", f"max({dis.transfer:.6g} / {s.sized_model.num_layers}, {dis.transfer:.6g} - "
                    f"{dis.prefill_seconds:.6g})"))
    q = targets.ttft_percentile
    dis_rps_v = Number(dis_rps, derived(
        "the highest Poisson rate under the split's capacity whose simulated prefill-queue TTFT meets the targets "
        "(bisection to 0.1%; the capacity itself when no TTFT target is given or it holds there)",
        f"{dis_rps:.6g} requests/s ({dis.limited_by})"))
    dis_tps_v = Number(dis_tps, derived("goodput requests/s x D output tokens; 0 when no rate meets the targets",
                                        f"{dis_rps:.6g} x {d:,}"))
    r_p, r_d = dis.prefill.dp, dis.decode.dp       # attention-DP ranks of an instance (1: none)
    if r_p == r_d == 1:
        cap_v = Number(dis.capacity, derived("closed form: min(n_p x k / max(T(k), k x transfer), n_d x B / (D x "
                                             "TPOT)), k the prompts a prefill pass packs",
                                             f"min({n_p} x {dis.prefill_batch} / {dis.prefill_pass:.6g}, {n_d} x "
                                             f"{dis.decode_batch} / ({d:,} x {dis.decode_tpot:.6g}))"))
    else:
        cap_v = Number(dis.capacity, derived(
            "closed form: min(n_p x R_p x k / max(T(k), k x transfer), n_d x R_d x B / (D x TPOT)), R an instance's "
            "attention-DP ranks (each prefills its own k prompts a pass and decodes its own batch of B)",
            f"min({n_p} x {r_p} x {dis.prefill_batch} / {dis.prefill_pass:.6g}, {n_d} x {r_d} x {dis.decode_batch} "
            f"/ ({d:,} x {dis.decode_tpot:.6g}))"))
    fluid_v = Number(dis.fluid, derived("closed form: the same layouts split in fractions of an instance: N / (G_p x "
                                        "max(T(k), k x transfer) / k + G_d x D x TPOT / B)" + (
                                            "" if r_p == r_d == 1 else ", G the GPUs of one attention-DP rank"),
                                        f"{total} / ({dis.prefill.gpus // r_p} x "
                                        f"{dis.prefill_service:.6g} + {dis.decode.gpus // r_d} x "
                                        f"{d:,} x {dis.decode_tpot:.6g} / {dis.decode_batch})"))
    split_eff = dis.capacity / dis.fluid if dis.fluid else 1.0
    split_eff_v = Fraction(split_eff, derived("the integer split's capacity / the fractional split's",
                                              f"{dis.capacity:.6g} / {dis.fluid:.6g}"))
    cap_p = n_p * r_p / dis.prefill_service
    cap_d = n_d * r_d * dis.decode_batch / (d * dis.decode_tpot)
    idle = 1 - min(cap_p, cap_d) / max(cap_p, cap_d)
    idle_v = Fraction(idle, derived("1 - the smaller pool's capacity / the larger's", f"{idle:.4f}"))
    ttft_v = Seconds(dis.ttft_unloaded, derived("closed form: T_pf + exposed transfer + handover + frontend latency "
                                                "(no queue)",
                 f"{dis.prefill_seconds:.6g} + {dis.exposed:.6g} + {o.handover_seconds:g} + "
                 f"{dis.ttft_unloaded - dis.prefill_seconds - dis.exposed - o.handover_seconds:.6g}"))
    ttft_at_v = Seconds(dis.ttft_at, derived(f"simulated: p{q} of the prefill queue's wait (FCFS over n_p "
                                             "instances, M/D/c, "
                    f"{PREFILL_QUEUE_REQUESTS:,} Poisson arrivals) + the TTFT without a queue, at the goodput rate",
                    f"{dis.wait_at:.6g} + {dis.ttft_unloaded:.6g}"))
    wait_v = Seconds(dis.wait_at, derived(f"simulated: p{q} of the prefill queue's wait at the goodput rate",
                 f"{dis.wait_at:.6g} at {dis_rps:.6g} requests/s on {n_p} instance(s)"
                 + (f" of {r_p} attention-DP ranks" if r_p > 1 else "")))
    dec_tpot_v = Seconds(dis.decode_tpot, derived("closed form: the steady TPOT of the pure decode batch",
                     f"B = {dis.decode_batch}"))
    reasons: tuple[Note, ...] = (
        note("prefill is {share:.1%} of a colocated replica's time ({t_pf:ms:,.1f} ms per request against {d} decode "
             f"steps at {{tpot:ms:,.1f}} ms shared by {col.batch} requests)", share=share_v, t_pf=t_pf_v,
             d=Tokens(d), tpot=plain_v),
        note(f"colocated: {{rps:,.3g}} requests/s ({{tps:,.0f}} output tokens/s) on {instances} instances"
             + f" of {col_lay.label} at batch {col.batch}"
             + (" per attention-DP rank" if col_lay.dp > 1 else "")
             + f" (TPOT p{targets.tpot_percentile} {{q:ms:,.1f}} ms simulated, SLO {{slo:ms:g}} ms; mean "
             "{tpot:ms:,.1f} ms in closed form)", rps=col_rps_v, tps=col_tps_v, q=tpot_q, slo=Seconds(o.tpot_slo),
             tpot=col_tpot_v),
        note("disaggregated: {rps:,.3g} requests/s ({tps:,.0f} output tokens/s) on " + _split_text(dis)
             + f" at decode batch {dis.decode_batch}; the rate is held by {dis.limited_by}; the integer split reaches "
             "{eff:.0%} of a fractional one's {fluid:,.3g} requests/s", rps=dis_rps_v, tps=dis_tps_v, eff=split_eff_v,
             fluid=fluid_v),
        note("KV transfer {nbytes:MiB:,.1f} per GPU over {nic:G:g} GB/s: {transfer:ms:,.2f} ms, {exposed:ms:,.2f} ms "
             "exposed after the prefill", nbytes=nbytes_v, nic=nic_v, transfer=transfer_v, exposed=exposed_v))
    # what decides a split's win over attention-DP colocated ranks: on the first screen (``first``)
    lock_note = _lockstep_note(dec_roles, dis, p, d, s.engine_adapter.id) if recommend else None
    margin = dis_rps / col_rps if col_rps else math.inf
    if col_rps and dis.fluid / col_rps > WIN_MARGIN >= margin and dis.capacity <= WIN_MARGIN * col_rps:
        # the verdict rests on whole instances: name it, so a verdict that moves with the prompt is read as rounding
        # (only when the integer split's capacity is itself under the bar: above it, a TTFT target holds the rate)
        reasons += (note(f"Whole instances decide this verdict: on {total} GPUs the split's instances round its "
                         "rate to {m:.2f}x colocated, under the 1.05x bar, where a fractional split would reach "
                         "{fm:.2f}x; with more GPUs (or a layout that divides them better) disaggregation can win "
                         "here", m=Ratio(margin, derived("disaggregated / colocated goodput",
                                                         f"{dis_rps:.6g} / {col_rps:.6g}")),
                         fm=Ratio(dis.fluid / col_rps, derived("the fractional split's requests/s / colocated "
                                                               "goodput", f"{dis.fluid:.6g} / {col_rps:.6g}"))),)
    margin_v = Ratio(margin, derived("disaggregated goodput / colocated goodput (requests/s meeting the targets)",
                                     f"{dis_rps:.6g} / {col_rps:.6g}"))
    breakeven_v = Number(breakeven, derived(
        "the prompt:output ratios of the table and this request in order: the lowest of the run of ratios at the top "
        "where disaggregation wins by 5% (where it wins at the largest; else the lowest where it wins)",
        ", ".join(f"{r:.4g} {'wins' if w else 'loses'}" for r, w in priced)
        + (f": {breakeven:.4g}" if breakeven is not None else ": none")
        + (f", next to {below:.4g}" if below is not None else "")))
    below_v = Number(below, derived("the priced ratio next to the break-even on the side where colocated serving "
                                    "wins (the break-even lies between the two; no ratio between them was priced)",
                                    f"{below:g}" if below is not None else "none: disaggregation wins at every ratio"))
    fluid_margin_v = Ratio(dis.fluid / col_rps if col_rps else math.inf, derived(
        "the fractional split's requests/s (a capacity: no prefill queue) / colocated goodput: the margin without "
        "the integer split's rounding nor a TTFT target",
        f"{dis.fluid:.6g} / {col_rps:.6g}"))
    decided = _decided(targets, col.batch, miss, closed_tpot_q, (good_rate, tpot_q, ttft_q, good_miss), dis,
                       dec_tpot_v, ttft_at_v, wait_v, dis_meets,
                       split_eff_v, fluid_v, fluid_margin_v, margin_v,
                       f"instance of {col_lay.label}" if col_lay.dp == 1 else f"rank of {col_lay.label}",
                       Number(sus_rate, derived("closed form: B / (D x TPOT(B) + B x T_pf), B the KV pool's batch",
                                                f"{sus_b} / ({d:,} x {sus_tpot:.6g} + {sus_b} x {sus_pf:.6g})"))
                       if pool_capped else None, sus_b)
    # the layouts chosen: under the verdict against a --tp the user gave; first among the notes against a default TP
    layout = _layout_note(s, own[0], own_instances, col_lay, instances, dis)
    given_tp = layout if layout is not None and not s.tp_defaulted else None
    if layout is not None and given_tp is None:
        reasons = (layout,) + reasons
    # a verdict that changes more than once over the table's prompts says why on the first screen (issue 21)
    first = tuple(n for n in (given_tp, _long_ttft_note(targets, ttft_q, ttft_at_v), lock_note, flips_note,
                              _decode_dominant_note(recommend, share_v, dec_over_pf, t_pf, plain, col.batch, d, idle_v,
                                                    "prefill" if cap_p > cap_d else "decode"))
                  if n is not None)
    return PdPlan(
        s, o, Count(instances, derived("colocated instances: N // (TP x PP) of the layout with the most closed-form "
                                       "goodput", f"{total} // {g}")),
        Count(g, derived("TP x PP of the colocated layout", col_lay.label)),
        t_pf_v, Count(chunks, derived("ceil(P / chunk)", "")),
        Seconds(t_pf * (g // col_lay.dp), derived("prefill seconds x the GPUs that run it: the instance's, or an "
                                                   "attention-DP rank's (GPU-seconds per request)",
                                                   f"{t_pf:.6g} x {g // col_lay.dp}")),
        share_v,
        Ratio(dec_over_pf, derived("decode GPU time per request / prefill GPU time per request: (D x TPOT(B) / B) / "
                                   "T_pf, TPOT(B) without prefills",
                                   f"({d:,} x {plain:.6g} / {col.batch}) / {t_pf:.6g}")),
        Count(col.batch, derived("simulated: the largest batch whose run meets the targets at their percentile "
                                 "(bisection)", f"B = {col.batch}")),
        plain_v,
        col_tpot_v,
        tpot_q, ttft_q,
        Ratio(col.tpot / plain if plain else 1.0, derived("mean colocated TPOT / plain TPOT",
                                                          f"{col.tpot:.6g} / {plain:.6g}")),
        col_tps_v, nbytes_v, transfer_v, exposed_v,
        ttft_v,
        Count(n_p, derived("the split with the most goodput" if not o.prefill_gpus else "given with --prefill-gpus",
                           f"{n_p} instance(s) of {dis.prefill.label}")),
        Count(n_d, derived("(N - n_p x G_p) // G_d", f"({total} - {n_p} x {dis.prefill.gpus}) // {dis.decode.gpus}")),
        Count(dis.decode_batch, derived("the decode batch with the most tokens/s meeting the SLO",
                                        f"B = {dis.decode_batch}")),
        dec_tpot_v,
        dis_tps_v, idle_v, recommend, reasons, tuple(rows), breakeven_v,
        nic_v, margin_v, dis_meets, decided,
        dis, col_rps_v, dis_rps_v, cap_v, fluid_v, split_eff_v, ttft_at_v, wait_v,
        Count(dis.prefill.tp, derived("the prefill role's TP (searched)", dis.prefill.label)),
        Count(dis.decode.tp, derived("the decode role's TP (searched)", dis.decode.label)),
        Count(dis.layouts, derived("role layouts that hold the model", f"{dis.layouts}")), fluid_margin_v,
        Count(col_lay.tp, derived("the colocated layout's TP (searched)", col_lay.label)),
        Seconds(dis.prefill_seconds, derived("prefill of P tokens on the prefill role's layout (the step model's "
                                             "prefill" + ("; the attention-DP ranks' prompts in one aligned pass, each "
                                                          "with EP / R of the expert GPUs)" if dis.prefill.dp > 1
                                                          else ")"),
                                             f"{p:,} tokens on {dis.prefill.label}",
                                             *((PREFILL_ROLE_SOURCE,) if dis.prefill.dp > 1 else ()))),
        below_v,
        Count(good_pt.figures["requests_finished"].value if good_pt is not None else None,
              derived("4 x the batch, within " + " .. ".join(f"{x:,}" for x in COLOCATED_REQUESTS)
                      + "; seed 0", f"{good_pt.figures['requests_finished'].value:,} requests" if good_pt is not None
                      else "no rate simulated")), col_lay, first,
        Count(dis.prefill_batch, derived("min(max_num_batched_tokens // P, max_num_seqs), at least 1: the prompts "
                                         "a saturated prefill rank packs into one pass (its token budget)",
                                         f"min({pre_m.chunk:,} // {p:,}, {pre_m.max_seqs:,})")),
        Seconds(dis.prefill_service, derived(
            "max(T(k), k x transfer) / k: a pass of k prompts on the prefill role's layout (the step model's prefill "
            "with k prompts: the weights read once, k prompts' FLOPs and communication), per prompt",
            f"{dis.prefill_pass:.6g} / {dis.prefill_batch}")))


def _breakeven(rows, p: int, d: int, recommend: bool
               ) -> tuple[float | None, float | None, list[tuple[float, bool]]]:
    """(the break-even ratio, the priced ratio on its other side, the (ratio, disaggregation wins) priced): over
    the table's rows that fit and this request (prompt:output ``p`` / ``d``, its verdict ``recommend``) in order of
    the ratio, the last place the verdict changes as the ratio grows. Where disaggregation wins at the largest ratio:
    the lowest ratio of the run at the top where it wins, and the ratio next below it (colocated wins there); else
    the highest ratio where it wins, and the ratio next above it (colocated wins from there on). The break-even
    lies between the two. None when disaggregation wins nowhere; the other None when it wins at every ratio
    priced."""
    points = {r.ratio: r.disaggregation_wins for r in rows if r.fits}
    if not any(math.isclose(r.prompt_tokens, p) for r in rows if r.fits):
        points[p / d] = recommend
    order = sorted(points)
    wins = [points[r] for r in order]
    priced = list(zip(order, wins, strict=True))
    if not any(wins):
        return None, None, priced
    if wins[-1]:
        i = len(wins) - 1
        while i > 0 and wins[i - 1]:
            i -= 1
        return order[i], order[i - 1] if i > 0 else None, priced
    i = len(wins) - 1 - wins[::-1].index(True)      # the highest ratio where it wins; the next one up loses
    return order[i], order[i + 1], priced


def _layout_note(s: Scenario, own: RoleLayout, own_instances: int, col_lay: RoleLayout, instances: int,
                 dis: Disaggregated) -> Note | None:
    """Where the layouts pd chose are not the scenario's own (the headline's): that pd searched them and which it
    chose against the --tp given (or defaulted), so the headline's TP x DP is not read as the layout priced."""
    from dataclasses import replace

    chosen = (col_lay, dis.prefill, dis.decode)
    if all(replace(lay, gpu="") == own for lay in chosen):
        return None
    tp = f"TP{s.parallelism.tp} by default" if s.tp_defaulted else f"--tp {s.parallelism.tp} given"
    return note(f"Layouts searched: pd prices each side on the layout that serves it best among those that hold the "
                f"model on the {s.parallelism.gpus} GPUs, not only the headline's {own_instances} x {own.label} "
                f"({tp}): colocated {instances} x {col_lay.label}, disaggregated {_split_text(dis)}.")


def _long_ttft_note(targets: SloTargets, colocated: Seconds, disaggregated: Seconds) -> Note | None:
    """With no TTFT target, a TTFT at either side's goodput rate of ``LONG_TTFT_SECONDS`` or more, named: goodput then
    counts requests whatever they waited for their first token."""
    if targets.ttft is not None:
        return None
    long = [(side, v) for side, v in (("colocated", colocated), ("disaggregated", disaggregated))
            if v.value is not None and v.number() >= LONG_TTFT_SECONDS]
    if not long:
        return None
    q = targets.ttft_percentile
    parts = [note(f"{side}'s " + "{v:time:,.1f}", v=v) for side, v in long]
    return (note(f"No TTFT target was given: at the goodput rate TTFT p{q} is ") + Note.join(" and ", parts)
            + note(", counted as goodput all the same; give --ttft-slo (e.g. 2s) to count only requests that meet "
                   "one."))


def _decode_dominant_note(recommend: bool, share: Fraction, dec_over_pf: float, t_pf: float, plain: float, batch: int,
                          d: int, idle: Fraction, idle_role: str) -> Note | None:
    """The workload document's reasoning, in this request's numbers, on the first screen: when colocated serving wins
    and prefill is under 1 - 1 / 1.05 (4.8%) of a colocated replica's time, a split frees at most that share of a
    replica for decode (were its decode steps no faster alone: ``tpot_inflation`` says how much the prefills slow
    them), short of the 5% a split must gain, while its prefill instances idle. None otherwise."""
    if recommend or not share.number() < 1 - 1 / WIN_MARGIN:
        return None
    ratio = Ratio(dec_over_pf, derived("decode GPU time per request / prefill GPU time per request: (D x TPOT(B) / "
                                       "B) / T_pf", f"({d:,} x {plain:.6g} / {batch}) / {t_pf:.6g}"))
    return note("Decode-dominant: decode {r:,.1f}x a request's prefill GPU time; prefill {share:.1%} of a replica's "
                "(a split must free 4.8%); split " + idle_role + " idle {idle:.1%}.",
                r=ratio, share=share, idle=idle)


def _replica_key(lay: RoleLayout) -> tuple:
    """A layout as the replica the step model prices: EP at or inside TP is no EP (no all-to-all)."""
    return lay.tp, lay.pp, lay.dp, lay.ep if lay.ep and lay.ep > lay.tp else None, lay.gpu


def _colocated_layout(roles, own, own_instances: int, p: int, d: int, total: int):
    """The colocated layout for P = ``p``, D = ``d`` and its goodput: among the scenario's own (``own_instances``
    instances) and the role layouts (N // G instances each) that hold a request, the scenario's own and the best
    ``COLOCATED_TRIED`` by the closed form on the mean are searched for their goodput under Poisson arrivals
    (``_Model.colocated_goodput``, from the closed form's rate); the one serving the most requests/s x instances is
    kept (the scenario's own first among equals; one whose pure decode rate cannot beat the best found is not
    searched), so colocated serving gets the same layout freedom as each role.
    Returns (layout, model, instances, the one-instance scenario, (goodput requests/s per instance, its point, the
    first rate that misses))."""
    held = []
    for i, (lay, rm) in enumerate((own, *roles)):
        n = own_instances if i == 0 else total // lay.gpus
        if n < 1 or rm.fit(p + d) < 1:
            continue
        side, _, _ = rm.colocated(p, d)      # one rank's: an attention-DP instance serves lay.dp of them
        held.append((i, -side.requests_per_second * n * lay.dp, lay, rm, n, side))
    # the layouts tried besides the scenario's own are distinct replicas: EP inside the TP group runs no all-to-all
    # (the step model prices TP8 EP8 as TP8), so a role layout that is the same replica as one ranked before it does
    # not take one of the COLOCATED_TRIED places (on DeepSeek-R1 300 + 300, vLLM, TP8 and TP8 EP8 took both, after
    # the scenario's own TP8, and TP1 DP8 EP8 was never simulated)
    seen = {_replica_key(h[2]) for h in held if h[0] == 0}
    roles_held = []
    for h in sorted((h for h in held if h[0]), key=lambda h: h[1]):
        if _replica_key(h[2]) not in seen:
            seen.add(_replica_key(h[2]))
            roles_held.append(h)
    held = [h for h in held if h[0] == 0] + roles_held[:COLOCATED_TRIED]
    if not held:
        lay, rm = own
        held = [(0, 0.0, lay, rm, own_instances, rm.colocated(p, d)[0])]
    best = None
    tried: list[tuple[Scenario, int]] = []
    for i, _, lay, rm, n, side in sorted(held, key=lambda h: (h[1], h[0])):
        dec = rm.decode_only(p, d)
        ranks = n * lay.dp
        if best is not None and float(dec.requests_per_second) * ranks <= best[0]:
            continue      # pure decode's rate bounds a colocated one (prefills only add to the steps)
        # one replica simulated: the scenario's own instance, or one rank of a role layout (an attention-DP rank's
        # step model prices its EP all-to-all and every rank's prefill in lockstep, as simulate's DP note says)
        # (TP pinned: the scenario's own TP, defaulted, is the same replica as the role layout of that TP, and is
        # recognised below as one searched already instead of simulated again)
        one = (rm.s if i or lay.dp > 1 else rm.s.with_(dp=1)).with_(tp=lay.tp, prompt_tokens=p, decode_tokens=d)
        if any(one == o and ranks == r for o, r in tried):
            continue      # the same replica and count as one searched already (the scenario's own among the roles)
        tried.append((one, ranks))
        top = float(side.requests_per_second) if side.batch else float(dec.requests_per_second) / 2
        beat = best[0] / ranks if best is not None else 0.0
        good = (rm.colocated_goodput(one, top, max(side.batch, dec.batch, 1), beat) if top > 0
                else (0.0, None, None))
        if good is None:
            continue      # it could not end above the best found
        if best is None or good[0] * ranks > best[0]:
            best = (good[0] * ranks, lay, rm, n, one, good)
    assert best is not None
    return best[1:]


def _lockstep_note(roles, dis: Disaggregated, p: int, d: int, engine: str) -> Note | None:
    """When the split wins with attention-DP decode ranks on an engine whose colocated rank pays its prompt as a
    pass of the whole instance (the neutral engine and SGLang: ``costs.LOCKSTEP_SOURCE``), a note putting that price
    in numbers at the colocated closed form's rate on that layout: N prompts share a pass (``costs.
    PASS_SHARING_SOURCE``), so each prompt costs every rank its own pass T plus R / N - 1 other passes that lengthen
    one of its decode steps each, T - the least step: what the split's decode ranks never pay. At a short prompt it
    is most of the margin (DeepSeek-R1 300 + 300 on TP1 DP8 EP8), where vLLM's chunks mixed into decode steps keep
    colocated ahead. None otherwise."""
    if dis.decode.dp < 2 or engine == "vllm":
        return None
    rm = next((m for lay, m in roles if lay == dis.decode), None)
    if rm is None:
        return None
    chunk = rm.chunk if rm.o.chunked else None
    rate = float(rm.colocated(p, d)[0].requests_per_second)
    shared = rm.sharing(p, d, rate)
    n = shared.pass_ranks
    lock = rm.colocated_prefill(p, rate, d)
    own = shared.prefill_seconds(p, 0, chunk, (dis.decode.ep or dis.decode.tp) / n)
    if lock <= own * 1.5:
        return None
    least = shared._least_step
    return note(f"Colocated {dis.decode.label} ranks would pay {{lock:ms:,.1f}} ms a prompt: its {{own:ms:,.1f}} ms "
                "pass + {k:,.2f} unaligned passes of other ranks x ({own:ms:,.1f} - {least:ms:,.1f} ms decode step).",
                own=Seconds(own, derived("the step model's prefill of P tokens, the experts' FLOPs of N prompts",
                                         f"{p:,} tokens on {dis.decode.label}")),
                k=Number(dis.decode.dp / n - 1, derived(
                    "R / N - 1, N = Lambda T + e^(-Lambda T) prompts sharing a pass (1 .. R; StepModel.shared_pass_"
                    "ranks) at the colocated closed form's rate on the decode layout",
                    f"{dis.decode.dp} / {n:.6g} - 1 at {rate:.6g} requests/s a rank", costs.PASS_SHARING_SOURCE)),
                least=Seconds(float(least), derived("the rank's decode step at its batch (Little's law at the rate), "
                                                    "which runs inside another rank's pass", f"{least:.6g}")),
                lock=Seconds(lock, derived("T + (R / N - 1) x (T - the decode step) (StepModel.prefill_seconds("
                                           "lockstep=True), costs.LOCKSTEP_SOURCE)",
                                           f"{own:.6g} + {dis.decode.dp / n - 1:.6g} x ({own:.6g} - {least:.6g})")))


def _flips(rows, own_passes: _Model | None) -> Note | None:
    """When the table's verdict changes more than once as the prompt grows, a note naming where and why: the rows'
    colocated layouts and disaggregated splits (each row is searched on its own, and whole instances round
    differently at each length), the largest distance of a flipping row's margin from the 1.05x bar, and, where the
    shortest prompts disaggregate on an engine whose colocated prefills are passes of their own (``own_passes``: the
    colocated model of the scenario's layout; None where the engine mixes prefill chunks into its decode steps,
    vLLM V1), the colocated prefill's price per prompt at the longest of those prompts as pd prices it
    (``_Model.sustained``: the B / D prompts waiting at a step of the pool-capped batch share a pass) against the
    prefill role's packed pass of k prompts (kvplan's SGLang scheduler, which the simulated colocated runs use,
    prices a round's prompts as one pass too). None when the verdict changes at most once."""
    fit = sorted((r for r in rows if r.fits), key=lambda r: r.prompt_tokens)
    at = [b for a, b in zip(fit, fit[1:], strict=False) if a.disaggregation_wins != b.disaggregation_wins]
    if len(at) < 2:
        return None
    near = max(abs(r.margin / WIN_MARGIN - 1) for r in at)
    where = ", ".join(f"{r.prompt_tokens:,} ({r.colocated_layout} colocated, {r.split} split)" for r in at)
    text = (f"The verdict changes {len(at)} times as the prompt grows (at {where}); each row's layouts and split are "
            "searched on their own and whole instances round differently at each length; the flipping rows' margins "
            "lie within {near:.0%} of the 1.05x bar")
    values: dict = {"near": Fraction(near, derived("max |margin / 1.05 - 1| over the rows where the verdict changes",
                                                   f"{near:.4f}"))}
    if own_passes is not None and fit[0].disaggregation_wins:
        short = fit[fit.index(at[0]) - 1].prompt_tokens       # the longest prompt of the run at the bottom
        passes = own_passes.prefill_passes(short)
        k = len(passes)
        label = own_passes.s.parallelism.tp
        d = own_passes.s.decode_tokens
        rate, batch, t_pf, _ = own_passes.sustained(short, d)
        shared = own_passes.packed_prefill(short, d, batch, rate)[1] if batch >= 1 else 1.0
        values["colocated"] = Seconds(t_pf, derived(
            "the colocated replica's prefill per prompt as pd prices it (_Model.sustained / packed_prefill): the "
            "B / D prompts waiting at a step of its pool-capped batch B share one pass, T(k) / k",
            f"{short:,} tokens on TP{label}, B = {batch:,}, D = {d:,}: k = {shared:.4g}"))
        values["shared"] = Number(shared, derived("B / D, within 1 .. the prompts the token budget takes",
                                                  f"{batch:,} / {d:,} -> {shared:.4g}"))
        values["packed"] = Seconds(passes[-1] / k, derived(
            "T(k) / k: k prompts in one pass (the weights read once), per prompt",
            f"{passes[-1]:.6g} / {k}"))
        values["short"] = Tokens(short, derived("the longest prompt of the table's run of shortest prompts where "
                                                "disaggregation wins", f"{short}"))
        text += ("; at {short:,} tokens and under the split wins: on this engine colocated prompts are prefill passes "
                 "between decode steps (the neutral rule book's and SGLang's default, no mixed chunks), the "
                 "{shared:.3g} prompts waiting at a step of the pool-capped batch sharing one, {colocated:ms:,.2f} ms "
                 f"a prompt on TP{label} (kvplan's SGLang scheduler, which the simulated colocated runs use, prices a "
                 "round's prompts as one pass too), where a prefill-role rank packs "
                 f"{k} into one pass at {{packed:ms:,.2f}} ms each; --engine vllm mixes prefill chunks into decode "
                 "steps")
    return note(text + ".", **values)


def _split_text(dis: Disaggregated, short: bool = False) -> str:
    """The split as words: ``1 x TP2 prefill + 1 x TP1 decode``, or short: ``1 TP2 : 1 TP1``."""
    if short:
        return f"{dis.prefill_instances} {dis.prefill.label} : {dis.decode_instances} {dis.decode.label}"
    return (f"{dis.prefill_instances} x {dis.prefill.label} prefill + {dis.decode_instances} x {dis.decode.label} "
            "decode")
