"""``kvplan recommend``: the workload document's configuration table, each row computed for this deployment.

``plan_recommend(scenario, options)`` returns a ``RecommendPlan``: for KV dtype, batch size, KV offload, preemption
(mode and victim), PD disaggregation and prefix cache, the value kvplan's own models give, the reason in numbers,
the document's general advice, and whether they agree (and why not). Nothing is priced here: capacity comes from
``capacity``, step and prefill times from the one cost model (``costs.step_model``), swap vs recompute from
``plan_preemption`` and the PD verdict from ``plan_pd``. The engine flags that realise a plan are the engine
adapters' (``kvplan.engines.<engine>.launch_flags``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvplan.calc import capacity, costs
from kvplan.calc.slo import SloTargets
from kvplan.errors import KvplanError
from kvplan.scenario import Scenario
from kvplan.specs.dtypes import KVDtype
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
    derived,
    given,
    note,
)

DOCUMENT = "the workload document's engineering configuration table (docs/README: the workload)"
# The workload document's rows: (setting, recommended, why), in its order.
DOCUMENT_ROWS = {
    "kv_offload": ("large L2 (DRAM), low threshold", "per-request decode KV grows fast; offload early"),
    "kv_dtype": ("FP8 (decode)", "more capacity; accuracy impact on reasoning to be evaluated"),
    "batch": ("small (2-8)", "avoid several long requests exhausting KV together"),
    "preemption": ("swap first, recompute last", "recomputing a 10K+-token request is very costly"),
    "pd": ("not recommended", "decode-dominant; transfer overhead > gain"),
    "prefix_cache": ("limited gain, keep on for the system prompt", "little cross-request prefix reuse"),
}
SETTING_NAMES = {"kv_dtype": "KV dtype", "batch": "batch size (running requests)",
                 "kv_offload": "KV offload (DRAM tier)", "preemption": "preemption mode and victim",
                 "pd": "PD disaggregation", "prefix_cache": "prefix cache"}

FP8_ACCURACY = ("vLLM FP8 KV-cache blog (github.com/vllm-project/vllm-project.github.io, "
                "_posts/2026-04-22-fp8-kvcache.md): on AIME25, GPQA-Diamond, MATH500 and LiveCodeBench-v6, "
                "Qwen3-30B-A3B-Thinking-2507 with FP8 KV lost at most 1-2 points (lowest recovery 97%, GPQA-Diamond); "
                "on Hopper an FP8-accumulation bug once cut 128K needle-in-a-haystack from 91% to 13% until a "
                "two-level accumulation fix restored 89%")
FP4_ACCURACY = ("no published evaluation of FP4 KV on long reasoning benchmarks was found; kvplan does not "
                "recommend it without one")
SMALL_BATCH = 8            # the document's "small (2-8)"
VICTIM_SHORT_TOKENS = 1024  # the young request the victim rule compares against
PREFILL_SHARE_SMALL = 0.05  # below this share of the replica time a request costs, a prefix cache saves little


@dataclass(frozen=True)
class RecommendOptions:
    tpot_slo: float = 0.05                  # seconds; DeepSeek's production 20 tokens/s per user
    dram_bytes_per_node: int | None = None  # None: the hardware preset's host DRAM
    dtype_origin: str = "--kv-dtype"        # who fixed a KV dtype that is not auto (the flag, or the --target search)
    nic_gbps: float | None = None           # GB/s per GPU per direction for the PD transfer (None: the GPU preset's)
    slo_origin: str = ""                    # who set tpot_slo: "" (the 50 ms default), --tpot-slo, --target tpot<=T
    targets: tuple = ()                     # the --target ones (kvplan.calc.sizing.Target), each judged on the plan
    slo: SloTargets | None = None           # the SLO model's targets (None: tpot_slo at p99); its TPOT is tpot_slo

    def __post_init__(self) -> None:
        from dataclasses import replace

        t = self.slo if self.slo is not None else SloTargets(tpot=self.tpot_slo, tpot_origin=self.slo_origin
                                                             or "the 50 ms default")
        object.__setattr__(self, "slo", replace(t, tpot=self.tpot_slo))
        slo = self.tpot_slo
        target = self.slo_origin.startswith("--target")   # a target's bound: the search says when none meets it
        if not (isinstance(slo, (int, float)) and math.isfinite(slo) and (slo > 0 if target else slo >= 1e-4)
                and slo <= 10):
            raise KvplanError(f"--tpot-slo {slo!r} s is outside 0.1 ms .. 10 s", "give it like 50ms")
        v = self.dram_bytes_per_node
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise KvplanError(f"--dram {v!r} is not a positive number of bytes", "give a size like 2TB")


@dataclass(frozen=True)
class Row:
    key: str
    setting: str
    value: str | Note       # the recommendation, in words
    reason: str | Note      # why, in numbers: always a Note once made (its figures typed, formatted by the output
                            # layer: note_text(row.reason) is the text)
    document: str           # the document's advice
    agrees: bool
    why_differs: str | Note  # "" when it agrees
    notes: tuple[str | Note, ...] = ()   # sources and caveats the presenter prints under the table
    first: str | Note = ""                # the reason's first clause, what a launch flag quotes ("" : none)

    def __post_init__(self) -> None:
        if isinstance(self.reason, str):   # words alone are a Note of one part
            object.__setattr__(self, "reason", Note((self.reason,)))


@dataclass(frozen=True)
class TargetVerdict:
    """One ``--target`` judged on the recommended deployment at its batch (the numbers the launch command sets)."""

    target: str | Note   # the --target as given, or the --ttft-slo target in words
    met: bool
    figure: Note    # the plan's number for it, and the model it was judged on


@dataclass(frozen=True)
class DtypeOption:
    dtype: KVDtype
    requests_per_replica: Count     # None when the model cannot store this dtype
    request_bytes_per_gpu: Bytes


@dataclass(frozen=True)
class RecommendPlan:
    scenario: Scenario              # the deployment with the recommended KV dtype
    options: RecommendOptions
    rows: tuple[Row, ...]
    kv_dtype: KVDtype
    dtype_options: tuple[DtypeOption, ...]
    batch: Count
    batch_capacity: Count
    batch_slo: Count
    batch_engine_limit: Count
    next_request_overflow_step: Count
    tpot_at_batch: Seconds
    admitted_on_prompt_cost: Count
    admitted_overflow_step: Count
    offload: bool
    offload_bytes_per_gpu: Bytes
    offload_bytes_per_replica: Bytes
    host_dram_bytes_per_gpu: Bytes
    offload_threshold: Fraction
    preemption_mode: str
    swap_seconds: Seconds
    recompute_seconds: Seconds
    recompute_over_swap: Ratio
    recompute_young_seconds: Seconds
    crossover: Tokens
    victim: str
    disaggregate: bool
    pd_reasons: tuple[str | Note, ...]
    prefix_cache: bool
    prefill_seconds: Seconds
    prefill_share: Fraction
    kv_pool_bytes: Bytes
    targets: tuple[TargetVerdict, ...] = ()
    tpot_mean_at_batch: Seconds = Seconds(None)    # closed form: the mean with the prefills in between
    batch_closed_form: Count = Count(None)         # closed form's batch: where the simulated search starts
    pd_verdict: Note | None = None                 # the PD row's verdict, its margin and the SLO that decides it
    context_limit_launched: bool = False           # the limit is the launch command's (``launched``), not given
    ttft_unloaded: Seconds = Seconds(None)         # a request alone: its prefill + the engine's frontend latency
    ttft: TargetVerdict | None = None              # --ttft-slo judged on the deployment (None: no TTFT target)
    load: Any = None                               # the launch under a rate target (simulate.SimulatedLoad; None:
                                                   # no rate given, so TTFT is a request alone's)
    rate_closed_form: Number = Number(None)        # Little's law at the batch (slo.steady_batch) x DP replicas

    def row(self, key: str) -> Row:
        return next(r for r in self.rows if r.key == key)


def _fits(s: Scenario, dtype: KVDtype, pool_of) -> DtypeOption:
    """``dtype``'s requests in its own pool (``pool_of(dtype)``); none, with the reason, where the scenario's engine
    release lacks the dtype (the check Scenario makes of --kv-dtype)."""
    try:
        s.engine_adapter.refuse_kv_dtype(dtype, s.model, s.hardware)
        pool = pool_of(dtype)
        block = capacity.block_tokens(s).number()
        per = capacity.request_bytes(s, s.context_tokens, dtype, block=block)
        n = capacity.fit(pool, per, capacity.shared_prefix_copy_bytes(s, dtype, block))
    except KvplanError as err:
        return DtypeOption(dtype, Count(None, derived(err.message)), Bytes(None, derived(err.message)))
    return (DtypeOption(dtype, Count(n, derived("floor((pool - shared copy) / request bytes), one replica",
                                                f"{pool:,} B // {per:,} B = {n}")),
                        Bytes(per, derived("request bytes per GPU at prompt + decode", f"{per:,} B"))))


def _choose_dtype(s: Scenario, pool_of) -> tuple[KVDtype, tuple[DtypeOption, ...], str]:
    from kvplan.calc.concurrency import default_dtypes

    options = tuple(_fits(s, d, pool_of) for d in default_dtypes(s.hardware))
    by = {o.dtype: o for o in options}
    if not s.kv_dtype_auto:
        return s.kv_dtype, options, "given"
    fp8 = by.get(KVDtype.FP8)
    if fp8 is not None and fp8.requests_per_replica.value is not None:
        return KVDtype.FP8, options, "fp8"
    return s.kv_dtype, options, "default"


MAX_BATCH = 4096   # the largest batch searched (the sizing search's too)


@dataclass(frozen=True)
class SloBatch:
    """The batch row's answer from the one SLO model (``kvplan.calc.slo``): the largest closed-loop batch of the
    scenario's equal requests whose simulated run (the engine's scheduler putting the prefills among the decode
    steps) meets the TPOT target at its percentile and attainment; the closed form on the mean is where the search
    starts and is shown beside it."""

    batch: int                 # the batch planned: ``meeting``, or the ceiling when no batch meets
    meeting: int               # the largest batch whose simulated run meets the TPOT target (0: none)
    ceiling: int               # min(the pool's requests, the engine's max_num_seqs, MAX_BATCH)
    capacity: int              # the pool's requests at prompt + decode
    engine_cap: int
    closed: int                # the closed form's batch: largest whose mean TPOT (prefills in between) meets
    tpot: float                # simulated TPOT at the target's percentile at ``batch``
    tpot_mean: float           # closed form: the mean TPOT at ``batch`` with its prefills in between
    decode_only: float         # closed form: the decode step alone at ``batch`` (kvplan tpot --batch)
    prefill: float             # T_pf of the prompt in max_num_batched_tokens chunks
    miss: int | None           # the first batch above ``meeting`` tried, which misses (None: the ceiling meets)
    miss_tpot: float | None    # its simulated TPOT at the percentile
    runs: int                  # closed loops simulated
    figures: dict              # the simulated run at ``batch``: its SLO figures (typed)
    tokens_per_second: float   # the simulated run at ``batch``: output tokens / simulated time


def slo_batch(s: Scenario, targets: SloTargets, step=None) -> SloBatch:
    """The batch row's batch for ``s`` under ``targets``' TPOT (``SloBatch``): ``slo.largest_meeting`` over
    ``simulate.simulated_batch`` (a closed loop of B users, 3 requests each, on one replica), from the closed form's
    batch. ``recommend`` and the ``--target`` search both call it, so the search's batch is the one the launch
    command sets."""
    from dataclasses import replace

    import numpy as np

    from kvplan.calc.simulate import simulated_batch
    from kvplan.calc.slo import largest_meeting

    step = step or costs.step_model(s)
    pool = int(capacity.kv_pool(s).kv_pool_bytes)
    block = capacity.block_tokens(s).number()
    cap = capacity.fit(pool, capacity.request_bytes(s, s.context_tokens, block=block),
                       capacity.shared_prefix_copy_bytes(s, block=block))
    mnbt, seqs = s.engine_adapter.batch_limits_for(s)
    engine_cap = int(seqs.number())
    ceiling = max(min(cap, engine_cap, MAX_BATCH), 1)
    t_pf = step.prefill_seconds(s.prompt_tokens, 0, mnbt.number())
    b = np.arange(1, ceiling + 1, dtype=float)
    plain = step.steady_tpot(s.prompt_tokens, s.decode_tokens, b)
    mean = costs.colocated_tpot(plain, t_pf, b, s.decode_tokens)
    assert targets.tpot is not None
    ok = np.nonzero(mean <= targets.tpot)[0]
    closed = int(ok[-1]) + 1 if len(ok) else 0
    tpot_only = replace(targets, ttft=None)    # a closed loop's TTFT is its users' lockstep, not a queue's
    runs: dict = {}

    def meets(n: int) -> bool:
        if n not in runs:
            runs[n] = simulated_batch(s, n, tpot_only)
        return runs[n].verdict.meets

    meeting, hi = largest_meeting(meets, closed or 1, ceiling)
    batch = meeting or ceiling
    meets(batch)     # the planned batch's run (the ceiling's when none meets)
    key = f"tpot_seconds_p{targets.tpot_percentile}"
    run = runs[batch]
    miss = None if meeting == 0 else hi
    return SloBatch(batch, meeting, ceiling, cap, engine_cap, closed, float(run.figures[key].value),
                    float(mean[batch - 1]), float(plain[batch - 1]), float(t_pf), miss,
                    float(runs[miss].figures[key].value) if miss is not None else None, len(runs), run.figures,
                    float(run.tokens_per_second.value or 0.0))


def unloaded_ttft(s: Scenario, step=None) -> Seconds:
    """A request's TTFT on an idle replica of ``s``: its prompt's chunked prefill + the engine's frontend latency
    (``kvplan tpot``'s TTFT). Every request of a run waits at least this (a queue or another request's steps only add
    to it), so it bounds every percentile of the TTFT from below: a TTFT target under it holds at no rate."""
    step = step or costs.step_model(s)
    mnbt, _ = s.engine_adapter.batch_limits_for(s)
    t_pf, fe = step.prefill_seconds(s.prompt_tokens, 0, mnbt.number()), costs.frontend_seconds(s)
    v = t_pf + fe.number()
    return Seconds(v, derived("a request alone: its prompt's prefill in max_num_batched_tokens chunks + the engine's "
                              "frontend latency (kvplan tpot's TTFT); a lower bound of every request's TTFT",
                              f"{s.prompt_tokens:,} tokens: {t_pf * 1e3:.3f} ms + {fe.number() * 1e3:g} ms = "
                              f"{v * 1e3:.3f} ms", *(fe.why.sources if fe.number() and fe.why else ())))


def ttft_verdict(s: Scenario, targets: SloTargets, unloaded: Seconds, load=None) -> TargetVerdict | None:
    """``--ttft-slo`` judged on the deployment the launch command starts. Under a rate (``load``: the launch fed
    that rate, ``load_run``: the draw shown of up to three) on the TTFT at the target's percentile of that run;
    without one on a request alone (``unloaded_ttft``, closed form), said to be that: missed at any rate when a
    request alone waits longer than the target, otherwise met alone, the TTFT under load left unjudged. None without
    a TTFT target."""
    if targets.ttft is None:
        return None
    q = targets.ttft_percentile
    slo = Seconds(targets.ttft, given(targets.ttft_origin))
    text = note(f"TTFT p{q} " + "<= {slo:ms:g} ms (" + targets.ttft_origin + ")", slo=slo)
    figs: dict[str, Value | str | Note] = dict(ttft=unloaded, slo=slo, prompt=Tokens(s.prompt_tokens))
    alone = ("a request alone waits {ttft:ms:,.1f} ms for its first token (closed form: its {prompt}-token prefill "
             "and the engine's frontend)")
    if unloaded.number() > targets.ttft:
        return TargetVerdict(text, False, note(
            alone + ", above {slo:ms:g} ms: no batch and no arrival rate meets it on this layout (more TP to shorten "
            "the prefill, or a prefill pool: the PD row)", **figs))
    if load is not None:
        got = load.figures[f"ttft_seconds_p{q}"]
        met = got.value is not None and got.value <= targets.ttft
        return TargetVerdict(text, met, note(
            f"TTFT p{q} " + "{got:ms:,.1f} ms under {rate:g} requests/s (simulated: Poisson arrivals of equal "
            "requests, {n} of them over {dp} replica(s), the queue and the prefills among the decode steps), "
            + ("within" if met else "above") + " {slo:ms:g} ms; " + alone, got=got, rate=load.rate, n=load.requests,
            dp=Count(s.parallelism.dp), **figs))
    return TargetVerdict(text, True, note(
        alone + ", within {slo:ms:g} ms. This is a request alone's TTFT: no rate was given, so the TTFT under load "
        "is not judged here (give --target rate>=R to judge the launch at that rate; the PD row judges it at pd's "
        "goodput)", **figs))


def closed_form_rate(replicas: int, batch: int, prefill: float, tpot: float, decode: int) -> Number:
    """The requests/s ``replicas`` replicas serve with ``batch`` equal requests running on each, in the SLO model's
    closed form (``slo.steady_batch``: Little's law, batch / (TTFT + (output - 1) x TPOT)) with the request's
    prefill as its TTFT in the batch and ``tpot`` the batch's mean TPOT with the other requests' prefills in between
    (``costs.colocated_tpot``), times the replicas. ``recommend``'s rate target and the ``--target`` search's rate
    both read it."""
    from kvplan.calc.slo import steady_batch

    one = steady_batch(batch, prefill, tpot, decode, SloTargets()).requests_per_second
    v = replicas * one.number()
    return Number(v, derived("closed form (Little's law, the SLO model's steady batch): DP x batch / (TTFT + "
                             "(output - 1) x TPOT), the prefill as TTFT and the mean TPOT with the prefills in between",
                             f"{replicas:,} x {batch:,} / ({prefill:.6g} + {decode - 1:,} x {tpot:.6g}) = {v:.6g}"))


def rate_target(o: RecommendOptions):
    """The ``--target rate>=R`` among ``o``'s targets (None: no rate given)."""
    return next((t for t in o.targets if t.metric == "rate"), None)


def launched(s: Scenario) -> Scenario:
    """The deployment a launch command starts: it prints --max-model-len / --context-length as the request's context
    when none was given (``Engine.sizing_flags``), so the plan is priced with that limit set, not the model's. The
    two differ where the limit sizes memory: vLLM before v0.8 (V0) profiles a step of max(max_model_len, 2048)
    tokens and keeps chunked prefill off up to 32K tokens of context (``VllmEngine.activation_reserve``), so a pool
    planned at the model's 131,072-token limit held one request more than the launched engine's."""
    return s if s.max_model_len is not None else s.with_(max_model_len=s.context_tokens)


def plan_recommend(scenario: Scenario, options: RecommendOptions | None = None, load=None) -> RecommendPlan:
    """The configuration table for ``scenario`` (module docstring): KV dtype, batch, offload, preemption, PD and
    prefix cache, each with kvplan's value, the reason in numbers and the document's advice; priced on the deployment
    its launch command starts (``launched``). ``load``: the launch's run under the rate target already judged (the
    ``--target`` search's ``Candidate.load``, ``load_run`` on this scenario at this batch), used as it is when its
    rate and batch are this plan's instead of simulating the same draws again; otherwise ignored."""
    from kvplan.calc.concurrency import overflow_run
    from kvplan.calc.pd import PdOptions, plan_pd
    from kvplan.calc.preemption import plan_preemption

    o = options or RecommendOptions()
    base = launched(scenario)

    def pool_of(dtype: KVDtype) -> int:
        return int(capacity.kv_pool(base.with_(kv_dtype_request=dtype)).kv_pool_bytes)

    dtype, dtype_options, why_dtype = _choose_dtype(base, pool_of)
    s = base if dtype == base.kv_dtype else base.with_(kv_dtype_request=dtype)
    par = s.parallelism
    budget = capacity.kv_pool(s)
    pool = int(budget.kv_pool_bytes)
    block = capacity.block_tokens(s).number()
    shared = capacity.shared_prefix_copy_bytes(s, block=block)
    per_req = capacity.request_bytes(s, s.context_tokens, block=block)
    cap = capacity.fit(pool, per_req, shared)
    if cap < 1:
        raise KvplanError(f"one {s.context_tokens:,}-token request does not fit the {pool:,} B KV pool per replica "
                          f"with {dtype.value} KV", "add GPUs (--gpus, --nodes), or shorten --decode")
    rows = [_dtype_row(s, dtype, dtype_options, why_dtype, o.dtype_origin)]

    # --- batch -----------------------------------------------------------------------------------------------
    step = costs.step_model(s)
    slo = o.slo
    assert slo is not None     # RecommendOptions fills it in
    sb = slo_batch(s, slo, step)
    engine_cap, slo_b, batch, t_pf = sb.engine_cap, sb.meeting, sb.batch, sb.prefill
    q = slo.tpot_percentile
    next_step = capacity.first_full_step(s, cap + 1, pool, shared)
    cap_v = Count(cap, derived("floor((pool - shared prefix copy) / per-request bytes at prompt + decode)",
                               f"floor(({pool:,} - {shared:,}) / {per_req:,}) = {cap}"))
    slo_v = Count(slo_b, derived(
        f"simulated: the largest batch whose closed loop of equal requests (the engine scheduling their prefills "
        f"among the decode steps) meets TPOT p{q} <= the SLO with {slo.attainment:.0%} attainment (slo.largest_meeting"
        f" from the closed form's batch, {sb.runs} runs)",
        f"SLO {o.tpot_slo * 1e3:g} ms{_origin(o)} -> {slo_b}" + (
            f"; batch {sb.miss} misses at {sb.miss_tpot * 1e3:.2f} ms" if sb.miss is not None and sb.miss_tpot
            is not None else "; the ceiling meets" if slo_b else "; batch 1 misses")))
    batch_v = Count(batch, derived("min(HBM capacity, engine max_num_seqs) when no batch meets the SLO, else the "
                                   "largest simulated batch meeting it (within both)",
                                   f"min({cap}, {slo_b if slo_b else 'none'}, {engine_cap}) = {batch}"))
    next_v = Count(next_step, derived("first decode step at which one more request (cap + 1) fills the pool",
                                      f"batch {cap + 1}: step {next_step}"))
    tpot_v = sb.figures[f"tpot_seconds_p{q}"]
    mean_v = Seconds(sb.tpot_mean, derived("closed form: steady mean TPOT at the batch with its prefills in between "
                                           "(TPOT(B) + T_pf x (B - 1) / D: the other requests' prefills)",
                                           f"batch {batch}: {sb.tpot_mean * 1e3:.3f} ms"))
    closed_v = Count(sb.closed, derived("closed form: the largest batch whose mean TPOT with the prefills in between "
                                        "meets the SLO (where the simulated search starts)", f"{sb.closed}"))
    rows.append(_batch_row(s, sb, o, pool, per_req, next_step))
    rate_v = closed_form_rate(par.dp, batch, t_pf, sb.tpot_mean, s.decode_tokens)
    rate_t = rate_target(o)
    if rate_t is None:
        load = None
    elif not (load is not None and load.max_batch.number() == batch and load.rate.number() == rate_t.bound):
        # the launch at the rate asked: TTFT and TPOT under load, the SLO model's simulation (the search's run of
        # this launch is carried in instead when it gave one)
        load = load_run(s, rate_t.bound, slo, batch, origin="--target " + rate_t.text)
    verdicts = _verdicts(s, o, sb, cap, rate_v, load)
    ttft_unloaded = unloaded_ttft(s, step)
    ttft = ttft_verdict(s, slo, ttft_unloaded, load)

    # --- preemption and offload ------------------------------------------------------------------------------
    young = min(VICTIM_SHORT_TOKENS, s.decode_tokens) if s.decode_tokens else 0
    pre = plan_preemption(s, sweep=tuple(sorted({young, s.decode_tokens})), dram_bytes_per_node=o.dram_bytes_per_node)
    this = pre.this
    young_row = next(r for r in pre.rows if r.context.number() == s.prompt_tokens + young)
    swap_wins = not this.recompute_cheaper
    link = costs.host_link_rate(s.hardware, s.host_link_gbs)
    admitted = capacity.admitted_on_prompt_cost(s, pool, shared)
    admitted_run = overflow_run(s, admitted, pool, shared, None, link, admitted=True, step_model=step)
    host = pre.host
    dram_gpu = host.bytes_per_gpu
    tier_gpu = batch * per_req
    if dram_gpu.value is not None:
        tier_gpu = min(tier_gpu, int(dram_gpu.value))
    tp_ranks = par.tp * par.pp
    lacks = s.engine_adapter.host_tier_problem()   # a release with no DRAM tier: no offload
    # ... which may still swap to a space of its own (vLLM V0's --swap-space); otherwise it recomputes only
    swap_space = s.engine_adapter.swap_space() if lacks else None
    room = swap_wins and dram_gpu.value is not None and tier_gpu >= per_req
    offload = lacks is None and room
    swaps = offload or (swap_space is not None and room)
    tier_v = Bytes(tier_gpu if swaps else 0, derived(
        "min(batch x request bytes per GPU, host DRAM per GPU): room to park every running request once"
        + ("" if offload else " (the engine's swap space: it has no offloading tier)"),
        f"min({batch} x {per_req:,}, {dram_gpu.value if dram_gpu.value is not None else 'unknown'}) = {tier_gpu:,} B"
        if swaps else "no tier: " + (lacks[0] if lacks else "recompute is cheaper" if not swap_wins else
                                       "the host DRAM is unknown (give --dram)" if dram_gpu.value is None else
                                       "the host DRAM per GPU holds no whole request")))
    tier_replica = Bytes(tier_v.number() * tp_ranks, derived("tier per GPU x TP x PP GPUs of a replica",
                                                            f"{tier_v.number():,} x {tp_ranks}"))
    threshold = admitted_run.offload_threshold_fraction
    rows.append(_offload_row(s, offload, swap_wins, tier_v, dram_gpu, batch, per_req, admitted, admitted_run,
                             threshold, lacks))
    mode = "swap" if swaps else "recompute"
    victim = "fewest tokens held (the youngest request)"
    rows.append(_preemption_row(s, pre, this, young, young_row, mode, victim, offload,
                                lacks if swap_space is None else None, None if offload else swap_space))

    # --- PD and prefix cache ---------------------------------------------------------------------------------
    pd_s, doubled = s, ""
    if par.dp < 2:   # one instance has nothing to split: price the decision at two instances
        pin = {"tp": par.tp, "pp": par.pp, "dp": None}
        per_node, two = s.hardware.node.gpus_per_node, s.planned_gpus * 2   # --gpus given: the nodes they need too
        pd_s = (s.with_(gpus=two, nodes=max(s.nodes, -(-two // per_node)), **pin) if s.gpus is not None or
                s.planned_gpus < per_node else s.with_(nodes=s.nodes * 2, **pin))
        plural = "s" if s.planned_gpus > 1 else ""
        doubled = (f"One instance of {s.planned_gpus} GPU{plural} has nothing to split; at two instances "
                   f"({pd_s.planned_gpus} GPUs): ")
    try:
        pd = plan_pd(pd_s, PdOptions(tpot_slo=o.tpot_slo, nic_gbps=o.nic_gbps, table=False, targets=o.slo))
    except KvplanError as err:   # e.g. a GPU preset without a NIC figure: the row says what is missing
        pd = None
        # a TTFT target under load reaches this row only (the batch's closed loop does not judge TTFT; ttft_verdict
        # judges a request alone): say it went unjudged under load
        unjudged = (" The --ttft-slo target is judged on this row only under load, so only a request alone was "
                    "judged against it (the TTFT target line)."
                    if o.slo is not None and o.slo.ttft is not None else "")
        rows.append(Row("pd", SETTING_NAMES["pd"], "not priced", (f"kvplan pd cannot price the split: {err.message}"
                        f" ({err.hint})." if err.hint else f"kvplan pd cannot price the split: {err.message}.")
                        + unjudged, DOCUMENT_ROWS["pd"][0], False, "not priced: " + (err.hint or err.message)))
    if pd is not None:
        rows.append(Row("pd", SETTING_NAMES["pd"], "disaggregate" if pd.recommend else "colocate (do not disaggregate)",
                        doubled + Note.join(" ", pd.reasons[:2]), DOCUMENT_ROWS["pd"][0], not pd.recommend,
                        "" if not pd.recommend else _pd_differs(pd)))
    # a request's share of the replica's time: its prefill alone, its decode steps shared with the batch (the plain
    # step: the mean TPOT holds the other requests' prefills, which are theirs, not this request's)
    tpot_b = sb.decode_only
    replica_seconds = t_pf + s.decode_tokens * tpot_b / batch
    share = t_pf / replica_seconds if replica_seconds > 0 else 0.0
    pf_v = Seconds(t_pf, derived("prefill of the prompt in max_num_batched_tokens chunks (the cost model)",
                                 f"{s.prompt_tokens:,} tokens: {t_pf * 1e3:.2f} ms"))
    share_v = Fraction(share, derived("prefill / (prefill + decode x the decode step at the batch / batch): the "
                                      "prefill's share of the replica time one request costs",
                                      f"{t_pf:.4g} / ({t_pf:.4g} + {s.decode_tokens:,} x {tpot_b:.4g} / {batch}) = "
                                      f"{share:.4f}"))
    rows.append(_prefix_row(s, pf_v, share_v))

    return RecommendPlan(
        s, o, tuple(rows), dtype, dtype_options, batch_v, cap_v, slo_v,
        Count(engine_cap, s.engine_adapter.batch_limits_for(s)[1].why), next_v, tpot_v,
        Count(admitted, derived("what an engine admits on prompt cost: min(max_num_seqs, usable pool // prompt "
                                "bytes)", f"{admitted}")), admitted_run.decode_steps_until_full,
        offload, tier_v, tier_replica, dram_gpu, threshold, mode, this.swap_exposed, this.recompute,
        this.recompute_over_swap, young_row.recompute, pre.crossover, victim, bool(pd and pd.recommend),
        tuple(pd.reasons) if pd is not None else tuple(r.reason for r in rows if r.key == "pd"),
        True, pf_v, share_v, budget.kv_pool, verdicts, mean_v, closed_v, _pd_verdict(pd),
        scenario.max_model_len is None, ttft_unloaded, ttft, load, rate_v)


def _pd_differs(pd) -> Note:
    """Why a split differs from the document's "not recommended": the goodput margin, or, where colocated serving
    meets the targets at no rate (the margin is no multiple of nothing), the split's own goodput."""
    if math.isfinite(pd.margin.number()):
        return note("this workload's prompts are long enough against its outputs that a prefill pool pays "
                    "(disaggregated / colocated goodput {m:.2f}x under the SLO; kvplan pd gives the break-even)",
                    m=pd.margin)
    return note("colocated serving meets the SLO at no rate here, while the split serves {rps:,.3g} requests/s "
                "(kvplan pd gives each side's figures)", rps=pd.disaggregated_requests_per_second)


def _pd_verdict(pd) -> Note | None:
    """The PD row's verdict in a line: disaggregate or not, the goodput margin against the 1.05x bar, and the SLO
    targets that decided it (None when pd did not price the split)."""
    import math

    if pd is None:
        return None
    t = pd.options.targets
    text = ("disaggregate" if pd.recommend else "colocate (do not disaggregate)") + (
        ": {m:.2f}x colocated goodput (the bar 1.05x)" if math.isfinite(pd.margin.number())
        else ": colocated has no goodput") + f" under TPOT p{t.tpot_percentile} <= " + "{tpot:ms:g} ms"
    values = {"m": pd.margin, "tpot": Seconds(t.tpot, given(t.tpot_origin))}
    if t.ttft is not None:
        text += f" and TTFT p{t.ttft_percentile} <= " + "{ttft:ms:g} ms"
        values["ttft"] = Seconds(t.ttft, given(t.ttft_origin))
    return note(text, **values)


def _verdicts(s: Scenario, o: RecommendOptions, sb: SloBatch, cap: int, rate_v: Number, load=None):
    """Each --target judged on this plan at its batch per replica (what --max-num-seqs sets) and DP replicas; TPOT
    as the batch row judges it (the simulated closed loop at the SLO's percentile); the rate in closed form
    (``closed_form_rate``: Little's law at the batch, with the mean TPOT). With a rate target, ``load`` (the launch
    fed that rate, simulated: ``load_run``, every draw meeting) judges the rate (the queue keeps up, the SLO holds)
    and the TPOT again under that load."""
    dp, batch = s.parallelism.dp, sb.batch
    slo = o.slo
    assert slo is not None
    q = slo.tpot_percentile
    out = []
    figs: dict[str, Value | str | Note] = dict(batch=Count(batch), dp=Count(dp), tpot=sb.figures[f"tpot_seconds_p{q}"],
                                               mean=Seconds(sb.tpot_mean), prefill=Seconds(sb.prefill),
                                               decode=Tokens(s.decode_tokens), d1=Tokens(s.decode_tokens - 1))
    under = "" if load is None else note(
        "under {load_rate:g} requests/s (simulated: Poisson arrivals of equal requests, {n} of them over {dp} "
        "replica(s), at most {batch} running each)", load_rate=load.rate, n=load.requests, **figs)
    for t in o.targets:
        if t.metric == "tpot":
            met = sb.tpot <= t.bound and sb.meeting > 0
            figure = note(f"TPOT p{q} " + "{tpot:ms:,.2f} ms at batch {batch} (simulated: a closed loop of {batch} "
                          "users of equal requests, the prefills among the decode steps)", **figs)
            if load is not None:
                got = load.figures[f"tpot_seconds_p{q}"]
                met = met and got.value is not None and got.value <= t.bound
                figure += note(f"; TPOT p{q} " + "{got:ms:,.2f} ms ", got=got) + under
            out.append(TargetVerdict(t.text, met, figure))
        elif t.metric == "concurrency":
            ctx = t.context or s.context_tokens
            held = capacity.fit(int(capacity.kv_pool(s).kv_pool_bytes), capacity.request_bytes(s, ctx),
                                capacity.shared_prefix_copy_bytes(s)) if ctx != s.context_tokens else cap
            out.append(TargetVerdict(t.text, batch * dp >= t.bound and held * dp >= t.bound, note(
                "{batch} running per replica x {dp} replica(s) = {running}; the pools hold {held} requests of {ctx} "
                "tokens", running=Count(batch * dp), held=Count(held * dp), ctx=Tokens(ctx), **figs)))
        else:
            met = rate_v.number() >= t.bound
            figure = note("closed form (Little's law): {dp} x {batch} / ({prefill:.4g} + {d1} x {mean:.4g}) s = "
                          "{rate:.3g} requests/s", rate=rate_v, **figs)
            if load is not None:
                met = met and load.verdict.meets
                figure += "; " + under + ": " + load_outcome(load, slo)
            out.append(TargetVerdict(t.text, met, figure))
    return tuple(out)


LOAD_SEEDS = (0, 1, 2)     # the Poisson draws a launch under a rate target is judged on (kvplan simulate --seed)


def load_run(s: Scenario, rate: float, targets: SloTargets, max_batch: int, origin: str = "--rate"):
    """The launch (``max_batch`` running per replica) fed ``rate`` requests/s, judged on up to ``len(LOAD_SEEDS)``
    Poisson draws (``simulate.simulated_load`` with seeds 0, 1, 2, each its own arrivals): it meets only if every
    draw meets. The draws stop at the first that misses, which is the run returned (the verdict is a miss whatever
    the later draws give); when all meet, the run returned is the draw nearest its target (its deciding figure's
    highest share of the target, ``SimulatedLoad.deciding``). ``draws`` on the result holds every draw run. Why: one
    draw's p99 over 1,000 requests rests on its 10 slowest, and a boundary case turned on it (RAG 32,000 + 500 on
    4 x H200, TP4: TTFT p99 2,005.5 ms on seed 0 against a 2 s target, 2,108.5 and 2,135.6 ms on seeds 1 and 2).
    Cost: up to three load runs instead of one (each ~0.1-0.3 s on the cases of tests/test_recommend_load.py)."""
    from dataclasses import replace

    from kvplan.calc.simulate import simulated_load

    runs = []
    for seed in LOAD_SEEDS:
        runs.append(simulated_load(s, rate, targets, max_batch, seed=seed, origin=origin))
        if not runs[-1].verdict.meets:
            break
    shown = runs[-1] if not runs[-1].verdict.meets else max(runs, key=lambda r: r.deciding(targets).share)
    return replace(shown, draws=tuple(runs))


def load_seed(seed: int) -> Count:
    """A load draw's seed, typed (the JSON's ``load.seed`` and ``load.draws[].seed``)."""
    return Count(seed, derived("a Poisson draw of the load run (recommend.LOAD_SEEDS: seeds 0, 1, 2; kvplan simulate "
                               "--seed)", str(seed)))


def load_draws(load, targets: SloTargets) -> Note:
    """How the load run was judged, in words: the draws run, the rule, the shown draw and the spread of its deciding
    figure over the draws (the percentile's sampling error, measured)."""
    draws = load.draws or (load,)
    d = load.deciding(targets)
    seeds = ", ".join(str(r.seed) for r in draws)
    values = [r.figures[d.key] for r in draws]
    rule = (f"judged on {len(draws)} Poisson draw(s) of {len(LOAD_SEEDS)} (seeds {seeds}; each must meet, the draws "
            "stop at the first miss)")
    if d.key == "slo_attainment":
        spec = "{v:.1%}"
    elif d.key.endswith(tuple(f"_p{q}" for q in (50, 90, 99))):
        spec = "{v:ms:,.1f} ms"
    else:
        spec = "{v}"
    spread = Note.join(", ", (note(spec, v=v) for v in values))
    which = "the draw that misses" if not load.verdict.meets else "the draw nearest its target"
    return note(rule + "; shown: seed {seed}, " + which + "; " + d.label + " over the draws: ",
                seed=Count(load.seed)) + spread


def load_outcome(load, targets: SloTargets) -> Note:
    """The load run's verdict in words: it keeps up and meets the SLO, or the figure that failed (the queue grows,
    TTFT or TPOT at its percentile, the attainment) with its number (``SimulatedLoad.deciding``)."""
    v = load.verdict
    if v.meets:
        return note("the queue keeps up and the SLO holds ({att:.1%} of requests meet it)",
                    att=load.figures["slo_attainment"])
    d = load.deciding(targets)
    if d.label == "overload":
        return note("the queue grows without bound (overloaded: {waiting} requests waiting at the last arrival)",
                    waiting=d.figure)
    if d.label == "attainment":
        return note("{att:.1%} of requests meet the SLO, under the {want:.0%} attainment target",
                    att=d.figure, want=Fraction(targets.attainment))
    return note(d.label + " {got:ms:,.1f} ms, above {slo:ms:g} ms", got=d.figure, slo=d.target)


# --- rows ----------------------------------------------------------------------------------------------------
def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def _dtype_row(s: Scenario, dtype: KVDtype, opts, why: str, origin: str = "--kv-dtype") -> Row:
    counts = {o.dtype: o.requests_per_replica for o in opts}
    # the counts as typed figures (the output layer prints 4,032 in a table, as every count)
    text = Note.join(", ", (note(f"{d.value} " + "{n}", n=n) if n.value is not None else f"{d.value} -"
                            for d, n in counts.items()))
    base, mine = counts.get(KVDtype.BF16), counts.get(dtype)
    gain = (note(" ({gain:.2f}x bf16's)", gain=Ratio(mine.value / base.value, derived(
        f"requests per replica in {dtype.value} / in bf16", f"{mine.value} / {base.value}")))
            if base is not None and base.value and mine is not None and mine.value and dtype != KVDtype.BF16
            else "")
    first = note("requests of {L} tokens per replica: ", L=Tokens(s.context_tokens)) + text + gain
    reason = first + ("; FP8 KV cost at most 1-2 points on reasoning benchmarks (vLLM's FP8 KV-cache evaluation, "
                      "see the notes)")
    notes = [f"KV dtype accuracy: {FP8_ACCURACY}."]
    refused = {o.dtype: o.requests_per_replica.why.formula for o in opts if o.requests_per_replica.value is None}
    fp4 = counts.get(KVDtype.NVFP4)
    if fp4 is not None and fp4.value is not None:
        reason += note("; nvfp4 would hold {n}, but no reasoning evaluation of FP4 KV was found", n=fp4)
        notes.append(f"FP4 KV: {FP4_ACCURACY}.")
    notes += [f"{d.value} is not planned: {why}." for d, why in refused.items()]
    if why == "given":
        given_first = f"--kv-dtype {dtype.value} as given" if origin == "--kv-dtype" else f"{dtype.value}, {origin}"
        reason, first = given_first + "; " + reason, Note((given_first,))
    agrees = dtype == KVDtype.FP8
    differs = "" if agrees else ((f"--kv-dtype {dtype.value} was given" if origin == "--kv-dtype" else
                                  f"{dtype.value} was {origin}") if why == "given" else
                                 (f"fp8 cannot be planned here ({refused[KVDtype.FP8]}), so {dtype.value} stays"
                                  if KVDtype.FP8 in refused else
                                  f"this model or GPU cannot store fp8 KV, so {dtype.value} stays"))
    return Row("kv_dtype", SETTING_NAMES["kv_dtype"], dtype.value, reason + ".", DOCUMENT_ROWS["kv_dtype"][0],
               agrees, differs, tuple(notes), first=first)


def _origin(o: RecommendOptions) -> str:
    return f" ({o.slo_origin})" if o.slo_origin else ""


def _batch_row(s, sb: SloBatch, o: RecommendOptions, pool, per_req, next_step) -> Row:
    slo = o.slo
    assert slo is not None
    q = slo.tpot_percentile
    cap, slo_b, engine_cap, batch = sb.capacity, sb.meeting, sb.engine_cap, sb.batch
    slo_text = note(f"the TPOT SLO p{q} " + "{slo:ms:g} ms" + _origin(o), slo=Seconds(o.tpot_slo))
    figs: dict[str, Value | str | Note] = dict(batch=Count(batch), tpot=Seconds(sb.tpot), slo=slo_text,
                                               cap=Count(engine_cap))
    # the first clause says what set the batch (the launch command's --max-num-seqs quotes it: the plan's
    # batch_reason)
    at = f"TPOT p{q} " + "{tpot:ms:,.1f} ms (simulated)"
    if slo_b and slo_b < min(cap, engine_cap, MAX_BATCH):
        first = note("batch {batch}, the largest meeting {slo}: " + at, **figs)
    elif not slo_b:
        first = note("batch {batch}: no batch meets {slo} (batch 1 already exceeds it), so the batch is the capacity "
                     "limit; " + at, **figs)
    elif engine_cap < cap:
        first = note("batch {batch}, the engine's max_num_seqs {cap}: " + at + ", within {slo}", **figs)
    else:
        first = note("batch {batch}, the most the pool holds: " + at + ", within {slo}", **figs)
    parts = [first, note("max batch {cap} per replica at {L} tokens: the {pool:GiB:,.1f} pool holds {cap} requests of "
                         "{per_req:MiB:,.1f} per GPU", cap=Count(cap), L=Tokens(s.context_tokens), pool=Bytes(pool),
                         per_req=Bytes(per_req))]
    if next_step is not None:
        parts.append(note(f"a {_ordinal(cap + 1)} request overflows HBM at decode step {{step}}",
                          step=Count(next_step)))
    judged = ("TPOT judged by the SLO model: the simulated closed loop of {batch} users of equal requests, the engine "
              f"scheduling their prefills among the decode steps, at p{q} with " "{att:.0%} attainment; ")
    miss = (note("batch {miss} misses at {miss_tpot:ms:,.1f} ms; ", miss=Count(sb.miss),
                 miss_tpot=Seconds(sb.miss_tpot)) if sb.miss is not None and sb.miss_tpot is not None else "")
    parts.append(note(judged, batch=Count(batch), att=Fraction(slo.attainment)) + miss + note(
        "the closed form's mean with the prefills in between is {mean:ms:,.1f} ms (batch {closed} by it), the decode "
        "step alone (kvplan tpot --batch {batch}) {alone:ms:,.1f} ms", batch=Count(batch), mean=Seconds(sb.tpot_mean),
        closed=Count(sb.closed), alone=Seconds(sb.decode_only)))
    agrees = batch <= SMALL_BATCH
    differs = "" if agrees else (
        note("the document's 2-8 comes from one card with ~37 GB left for a 3.75 GB request; this replica's pool is "
             "{pool:GiB:,.1f} per GPU for {per_req:MiB:,.1f} per request per GPU, " f"so {cap} fit",
             pool=Bytes(pool), per_req=Bytes(per_req))
        + (" and decode stays within the SLO" if slo_b else ""))
    return Row("batch", SETTING_NAMES["batch"], f"{batch}", Note.join("; ", parts) + ".", DOCUMENT_ROWS["batch"][0],
               agrees, differs, first=first)


def _offload_row(s, offload, swap_wins, tier_v, dram_gpu, batch, per_req, admitted, run, threshold,
                 lacks=None) -> Row:
    full = run.decode_steps_until_full.value
    per_req_v = Bytes(per_req)
    evict, growth = run.evict_one_request_seconds, run.growth_bytes_per_step
    value: str | Note
    reason: str | Note
    if offload:
        value = (note("on: {tier:GiB:,.1f} DRAM per GPU; ", tier=tier_v)
                 + (note("start offloading at {threshold:.0%} of the pool", threshold=threshold)
                    if threshold.value < 0.99 else "offload on demand (one eviction outruns a step's growth)"))
        reason = note(f"the tier parks every one of the {batch} running requests once ({{per_req:MiB:,.1f}} per GPU "
                      "each) of {dram:GiB:,.1f} host DRAM per GPU, so a preemption swaps instead of recomputing",
                      per_req=per_req_v, dram=dram_gpu)
        if full is not None and admitted > batch:
            reason += (note("; an engine admitting on prompt cost takes {admitted} requests, which fill HBM at decode "
                            "step {full}; evicting one takes {evict:ms:,.1f} ms while the pool grows "
                            "{growth:MiB:,.1f} per step", admitted=Count(admitted), full=run.decode_steps_until_full,
                            evict=evict, growth=growth)
                       + (note(", hence the {threshold:.0%} threshold", threshold=threshold)
                          if threshold.value < 0.99 else ""))
        agrees = threshold.value < 0.95 or full is None
        differs = "" if agrees else note("a large tier, yes, but no low threshold: the host link evicts a request "
                                         "in {evict:ms:,.1f} ms while the pool grows {growth:MiB:,.1f} per step, so "
                                         "offloading can wait until the pool is full", evict=evict, growth=growth)
        if full is None:
            reason += "; at these lengths the admitted batch never fills HBM, so the tier serves preemption only"
    else:
        value = "off"
        if lacks:
            value = f"off ({s.engine_adapter.display_name} has none)"
            reason = f"{lacks[0]}; {lacks[1]}"
        elif not swap_wins:
            reason = ("recompute is cheaper than a swap round trip for a request of this length, so a DRAM tier "
                      "buys nothing for preemption")
        elif dram_gpu.value is None:
            value = "unknown"
            reason = "the hardware preset has no host DRAM figure; give --dram to size the tier"
        else:
            reason = note("the host DRAM per GPU ({dram:GiB:,.1f}) holds no whole request", dram=dram_gpu)
        agrees = False
        differs = ("short requests: " if not swap_wins and not lacks else "") + reason
    return Row("kv_offload", SETTING_NAMES["kv_offload"], value, reason + ".", DOCUMENT_ROWS["kv_offload"][0],
               agrees, differs)


def _preemption_row(s, pre, this, young, young_row, mode, victim, offload, lacks=None, swap_space=None) -> Row:
    """``lacks``: (what the release does, the fix) when it can neither offload nor swap; ``swap_space``: the source
    when it swaps to a space of its own instead of a DRAM tier (vLLM V0)."""
    g = Tokens(s.decode_tokens)
    reason = note("preempted after {g} generated tokens, recomputing costs {rc:,.3f} s against {swap:ms:,.1f} ms to "
                  "swap ({ratio:,.1f}x)", g=g, rc=this.recompute, swap=this.swap_exposed,
                  ratio=this.recompute_over_swap)
    if pre.crossover.value is not None:
        reason += note("; the cheaper option changes at {crossover} tokens", crossover=pre.crossover)
    if young and young != g.value:
        reason += note("; victim: a request {young} tokens in costs {young_rc:ms:,.1f} ms to recompute against "
                       "{rc:,.3f} s for one at {g}, so preempt the youngest and protect long chains",
                       young=Tokens(young), young_rc=young_row.recompute, rc=this.recompute, g=g)
    swap_cheaper = not this.recompute_cheaper
    # vLLM from v0.14.0 swaps nothing out: its CPU offloading connector writes every full block through to the tier
    # and a victim loads what is left of it back (kvplan simulate --kv-offloading-size models it); V0 releases swap
    value = (f"swap (--preemption-mode swap: {s.engine_adapter.display_name}'s swap space)" if mode == "swap" and
             swap_space else
             "load the victim's blocks back from the CPU offloading tier (vLLM writes them through), recompute the "
             "rest" if mode == "swap" and s.engine_adapter.id == "vllm" else
             "swap first (to the DRAM tier), recompute last" if mode == "swap" else
             f"recompute (the only mode {s.engine_adapter.display_name} has)" if lacks else
             "recompute (no DRAM tier to swap to)" if swap_cheaper else "recompute") + f"; victim: {victim}"
    agrees = mode == "swap"
    differs = "" if agrees else (f"{s.engine_adapter.display_name} cannot swap: it recomputes a preempted request "
                                 f"({lacks[1]})" if lacks else
                                 "swap would be cheaper, but there is no DRAM tier to swap to (see KV offload)"
                                 if swap_cheaper else "recompute is cheaper than the swap round trip at this "
                                 "request length")
    return Row("preemption", SETTING_NAMES["preemption"], value, reason + ".", DOCUMENT_ROWS["preemption"][0],
               agrees, differs)


def _prefix_row(s, prefill: Seconds, share: Fraction) -> Row:
    shared = s.shared_prefix_tokens
    reason = note("the {prompt}-token prefill takes {prefill:ms:,.1f} ms, {share:.2%} of the replica time a request "
                  "costs (its decode steps are shared by the batch), so even a full prefix hit saves at most that",
                  prompt=Tokens(s.prompt_tokens), prefill=prefill, share=share)
    if shared:
        reason += note("; the {shared}-token shared prompt is stored once per replica", shared=Tokens(shared))
    agrees = share.number() < PREFILL_SHARE_SMALL
    differs = "" if agrees else note("prefill is {share:.0%} of the replica time a request costs here, so prefix hits "
                                     "are worth having: keep it on and route repeat prefixes to the same replica",
                                     share=share)
    return Row("prefix_cache", SETTING_NAMES["prefix_cache"], "on", reason + ".", DOCUMENT_ROWS["prefix_cache"][0],
               agrees, differs)
