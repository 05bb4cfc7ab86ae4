"""``kvplan simulate``: a stream of reasoning requests through each replica's KV pool, event to event.

The pieces are the other commands': the pool and per-request bytes from ``kvplan.calc.capacity`` (the pool is
rounded down to whole blocks of one block of every layer), step times from the one decode-step model
(``kvplan.calc.costs.step_model``), the prefill and re-prefill from its ``prefill_seconds`` in chunks of
max_num_batched_tokens, swaps from ``costs.swap_seconds`` over ``costs.host_link_rate``, and the host-DRAM tier
from ``capacity.host_tier``.

The engine of one replica is three pieces and the event loop here that drives them: the replica's state and the
mechanics every engine shares (``kvplan.engines.replica``: the pool, the queues, the running batch, the host tier);
the scheduler, which decides admission, preemption and its victim, swap or recompute, proactive offload and
resumption (``kvplan.engines.scheduling``: the interface, and ``RuleBook``, whose module docstring is the rule book
this engine follows); and the prices and the figures (``kvplan.calc.sim.steps``: a run of steps, a prefill, a swap,
in closed form; ``kvplan.calc.sim.metrics``: the run's arrays and metrics from what its events recorded).

A deployment of DP > 1 replicas (``simulate_deployment``, which ``plan_simulate`` calls): each replica is this
engine on its own pool (``kvplan concurrency``'s pool per replica), with the requests ``route`` gives it by
``ROUTING`` (round-robin in arrival order; a closed loop's users and requests dealt alike), and ``merge_runs``
makes the deployment's run: per-request figures are their replica's, counts, bytes, steps, events and stalls
summed, the simulated time the longest replica's, the peaks the busiest replica's, the timeline summed. DP = 1
is ``simulate`` itself, unchanged.

Speed: between events nothing changes but the contexts, each one token per step, so a run of k steps is summed
in closed form: a request's cache bytes and attention FLOPs are affine in its context between the caps of its
layer kinds (windows, top-k), the step is base(B) + max(bytes / BW, FLOPs / peak), and the sum of the max of two
affine series splits at their crossing. A run ends at the next completion, cap crossing, arrival or swap-in
landing (found by bisection on the closed-form sum), or the step that overfills the pool. The running batch is
kept incrementally (a request's context is a fixed offset plus the global step count while it runs): the sum of
contexts, the requests per block phase (which step each starts its next block at) and a heap of completion steps
are updated as requests join and leave, so with every block boundary adding one block and no caps (the common case)
an event costs O(log n) plus O(block), with no pass over the batch; otherwise (windows, top-k caps) each event
gathers the batch into numpy arrays and bisects on the blocks it holds after k steps. ``reference=True`` runs the
same engine one step at a time and prices each step with ``StepModel.step`` directly: the tests' check on the
closed forms.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property, partial
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from kvplan.calc import capacity, costs
from kvplan.calc.sim.metrics import (
    MARKS_KEPT,
    TIMELINE_BUCKETS,
    Timeline,
    client_ttft,
    fold_marks,
    request_arrays,
    run_metrics,
    timeline_arrays,
    timeline_buckets,
    timeline_values,
    waiting_at_last_arrival,
)
from kvplan.calc.sim.records import Setup, SimOptions, SimRun
from kvplan.calc.sim.steps import Prices, _affine_max_sum, _block_table, _first_step_reaching, _last_step_that_fits
from kvplan.engines.replica import ReplicaState
from kvplan.engines.schedulers import scheduler_for
from kvplan.engines.scheduling import (
    DEFAULT_POLICY,
    DEFAULT_VICTIM,
    DEFAULT_WATERMARK,
    POLICIES,
    POLICY_SOURCE,
    VICTIM_SOURCE,
    VICTIMS,
    WATERMARK_SOURCE,
    RuleBook,
    Scheduler,
)
from kvplan.errors import KvplanError
from kvplan.inputs.workload import Workload
from kvplan.scenario import Scenario
from kvplan.specs.values import Count, Fraction, Note, Number, Seconds, Value, default, derived, given, note

MAX_EVENTS = 20_000_000
# the names other modules and the tests import from here (the rule book's constants, the closed forms and the
# metrics' timeline live in the modules the docstring names)
__all__ = ["COMPARE_KEYS", "DEFAULT_POLICY", "DEFAULT_VICTIM", "DEFAULT_WATERMARK", "MAX_EVENTS", "OVERLOAD",
           "OVERLOAD_MIN", "OVERLOAD_SHARE", "PARALLEL_MIN_REQUESTS", "POLICIES", "POLICY_SOURCE", "ROUTING",
           "TIMELINE_BUCKETS", "VICTIMS", "VICTIM_SOURCE", "WATERMARK_SOURCE", "Burst", "Deployment", "Setup",
           "SimOptions", "SimPlan", "SimRun", "SweepPlan", "Timeline", "_affine_max_sum", "_first_step_reaching",
           "_last_step_that_fits", "_sum_timelines", "deployment", "event_state", "meets_targets", "merge_runs",
           "overloaded", "parse_compare", "parse_sweep", "plan_simulate", "plan_sweep", "route", "routing_note",
           "simulate", "simulate_deployment", "timeline_buckets", "timeline_values"]
# the overload verdict and the TTFT target of --sweep-rate (issue 19)
__all__ += ["Overload", "TTFT_PERCENTILES", "overload_values", "overload_verdict", "parse_ttft_slo", "ttft_key",
            "OVERLOAD_RISE", "OVERLOAD_RISE_SHARE", "OVERLOAD_SAMPLES", "steady_rise", "waiting_samples"]
# the service witness of the overload verdict (issue 21): completions against arrivals over the run's steady part
__all__ += ["OVERLOAD_BEHIND", "OVERLOAD_RAMP_PERCENTILE", "OVERLOAD_SIGMAS", "falls_behind", "steady_window"]
# a launch fed a rate, judged as a --sweep-rate point (recommend --target rate>=R, issue 21)
__all__ += ["LOAD_REQUESTS", "SimulatedLoad", "load_requests", "simulated_load"]
# the capacity witness of the overload verdict (issue 21/19): the offered rate against the closed-form sustained rate
__all__ += ["CAPACITY_MARGIN", "above_bound", "above_capacity", "closed_form_capacity"]


# --compare: settings a variant may change; everything else (the arrivals, lengths, seed, deployment) is the base's
# (engine: the variant runs that engine's memory rules and scheduler on the same requests)
COMPARE_KEYS = ("policy", "victim", "kv-dtype", "engine", "max-batch", "dram", "offload-threshold",  # threshold: F/off
                "hicache",    # SGLang's HiCache: on, off or a write policy
                "kv-offloading-size")    # vLLM's CPU offloading connector: GiB or off


def parse_compare(text: str) -> tuple[tuple[tuple[str, str], ...], ...]:
    """``--compare`` text: variants separated by commas, each ``key=value`` or several joined by ``+``
    (``policy=swap+kv-dtype=bf16``); a bare policy or victim name stands for ``policy=NAME`` / ``victim=NAME``.
    Keys are ``COMPARE_KEYS`` (``kv_dtype`` is read as ``kv-dtype``). Returns each variant's (key, value) pairs."""
    example = "give e.g. --compare policy=swap,policy=recompute,kv-dtype=bf16"
    if not text.strip():
        raise KvplanError("--compare is empty", example)
    variants = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise KvplanError(f"--compare {text!r} has an empty variant", example)
        pairs: dict[str, str] = {}
        for part in item.split("+"):
            part = part.strip()
            if "=" not in part:
                low = part.lower()
                if low in POLICIES:
                    key, value = "policy", low
                elif low in VICTIMS:
                    key, value = "victim", low
                else:
                    raise KvplanError(f"--compare variant {part!r} is not key=value",
                                      "keys: " + ", ".join(COMPARE_KEYS) + "; " + example)
            else:
                key, value = (x.strip() for x in part.split("=", 1))
                key = key.lower().replace("_", "-").removeprefix("--")
            if key not in COMPARE_KEYS:
                raise KvplanError(f"--compare key {key!r} is not one a variant can change",
                                  "choose " + ", ".join(COMPARE_KEYS))
            if not value:
                raise KvplanError(f"--compare variant {item!r} gives {key} no value", example)
            if key in pairs:
                raise KvplanError(f"--compare variant {item!r} sets {key} twice", "give each key once per variant")
            pairs[key] = value
        variants.append(tuple(pairs.items()))
    if len(variants) > 12:
        raise KvplanError(f"--compare has {len(variants)} variants", "give at most 12 (one table column each)")
    return tuple(variants)


@dataclass(frozen=True)
class _Replica:
    """The replica's constants from the scenario (the pool in whole blocks, the engine's limits, the host link)."""

    pool: int
    block: int
    hit: int                   # the shared prefix's whole blocks, in tokens: cached once
    block_bytes: int
    prefix_blocks: int
    total_blocks: int
    chunk: int
    max_batch: int
    watermark_blocks: int
    link: float


def _replica(s: Scenario, o: SimOptions) -> _Replica:
    if s.spec_tokens or s.token_budget:
        raise KvplanError("simulate does not model speculative slots or token budgets yet",
                          "drop --spec-tokens / --token-budget")
    pool = int(capacity.kv_pool(s).kv_pool_bytes)
    block = int(_known(capacity.block_tokens(s)))
    hit = (s.shared_prefix_tokens // block) * block          # the shared prefix's whole blocks: cached once
    own = dataclasses.replace(s, shared_prefix_tokens=0) if s.shared_prefix_tokens else s
    block_bytes = capacity.request_bytes(own, block) - capacity.request_bytes(own, 0)
    if block_bytes <= 0:
        raise KvplanError(f"{s.sized_model.id} caches nothing per token", "simulate models a KV cache that grows")
    prefix_blocks = -(-capacity.shared_prefix_copy_bytes(s, block=block) // block_bytes)
    total_blocks = pool // block_bytes - prefix_blocks
    if total_blocks <= 0:
        raise KvplanError(f"the shared prefix's {prefix_blocks:,} blocks fill the {pool // block_bytes:,}-block pool",
                          "lower --shared-prefix, or enlarge the pool")
    mnbt, mns = s.engine_adapter.batch_limits_for(s)
    link = float(_known(costs.host_link_rate(s.hardware, s.host_link_gbs)))
    return _Replica(pool, block, hit, block_bytes, prefix_blocks, total_blocks, int(_known(mnbt)),
                    o.max_batch or int(_known(mns)), int(o.watermark * total_blocks), link)


def _known(v: Value) -> int | float:
    """A typed value's number (every figure simulate reads from the other calculators has one)."""
    assert v.value is not None, v
    return v.value


def _requests(s: Scenario, workload: Workload, u: _Replica, slots: int = 0):
    """The prompts and outputs (numpy), the block table and its bytes (``_block_table``, ``slots`` tokens past the
    longest cache: the speculative slots a running request holds), refused when a prompt is shorter than the shared
    prefix or a request could never fit the pool."""
    import numpy as np

    P = np.asarray(workload.prompts, dtype=np.int64)
    L = np.asarray(workload.outputs, dtype=np.int64)
    if s.shared_prefix_tokens and int(P.min()) < s.shared_prefix_tokens:
        i = int(np.argmin(P))
        raise KvplanError(f"request {i + 1}'s prompt ({int(P[i]):,} tokens) is shorter than the --shared-prefix "
                          f"{s.shared_prefix_tokens:,} every prompt starts with",
                          "lower --shared-prefix, or give prompts at least that long (--prompt-dist)")
    longest_cache = int((P + L - 1).max())
    table, bytes_at = _block_table(s, u.block, u.block_bytes, longest_cache + 1 + slots)
    peak_blocks = table[-(-(P + L - 1 + slots) // u.block)]
    if int(peak_blocks.max()) > u.total_blocks:
        i = int(np.argmax(peak_blocks))
        raise KvplanError(f"request {i + 1} ({int(P[i]):,} + {int(L[i]):,} tokens"
                          + (f" + {slots:,} speculative slots" if slots else "") + f") needs {int(peak_blocks[i]):,} "
                          f"KV blocks, more than the {u.total_blocks:,} the pool holds",
                          "lower --max-len or the output lengths, or give the replica more GPUs")
    return P, L, table, bytes_at, longest_cache


def _rate_per_rank(sm: costs.StepModel, workload: Workload, P, L) -> float:
    """The prompts a second this attention-DP rank receives, which sets how many ranks' prompts share a prefill
    pass (``StepModel.shared_pass_ranks``): open arrivals, (n - 1) / their span; a closed loop of U users, U / (think
    + the mean output x the steady decode step of U + one prompt's pass alone), its requests' cycle without
    interference (the ranks alike)."""
    arr = workload.arrivals
    if arr is not None:
        import numpy as np

        a = np.asarray(arr, dtype=float)
        span = float(a[-1] - a[0]) if len(a) > 1 else 0.0
        return (len(a) - 1) / span if span > 0 else 0.0
    users = int(workload.users or 0)
    if users < 1:
        return 0.0
    p, d = int(P.mean()), max(int(L.mean()), 1)
    cycle = workload.think_s + d * float(sm.steady_tpot(p, d, users)) + sm.prefill_seconds(p)
    return users / cycle if cycle > 0 else 0.0


def _check_host_pool(pool_bytes: int, dram_bytes_per_gpu: int | None) -> None:
    """HiCache's host pool per GPU must fit the host DRAM per GPU: SGLang allocates it whole at start-up and
    refuses to start when the host has less free memory (``HostKVCache.__init__``, "Not enough host memory
    available", every release from v0.4.6; v0.5.23 ``mem_cache/pool_host/base.py``, which also keeps 10 GiB free,
    not counted here)."""
    if dram_bytes_per_gpu is not None and pool_bytes > dram_bytes_per_gpu:
        raise KvplanError(f"HiCache's host pool of {pool_bytes / 2**30:,.2f} GiB per GPU is more than the "
                          f"{dram_bytes_per_gpu / 2**30:,.2f} GiB of host DRAM per GPU (--dram, else the node's); "
                          "SGLang would not start (not enough host memory)",
                          "lower --hicache-ratio or --hicache-size, or give the node's DRAM with --dram")


def simulate(s: Scenario, workload: Workload, options: SimOptions | None = None, progress=None) -> SimRun:
    """``progress(done, total)``, when given, is called every 4,096 events with the requests finished."""
    import numpy as np

    o = options or SimOptions()
    u = _replica(s, o)
    sm = costs.step_model(s, speculative=o.speculative is not None)   # the MTP layers are the drafter's
    # speculative decoding's slots past each running request's context, where the engine's scheduler reserves them
    # (vLLM V1: the K drafts and the lookahead, ``VllmEngine.speculative_slots``); 0 elsewhere
    slots_of = getattr(s.engine_adapter, "speculative_slots", None)
    slots = slots_of(o.speculative[0])[0] if slots_of is not None and o.speculative is not None else 0
    P, L, table, bytes_at, longest_cache = _requests(s, workload, u, slots)
    host = capacity.host_tier(s, capacity.request_bytes(s, longest_cache), o.dram_bytes_per_node)
    dram_cap = int(host.bytes_per_gpu.value) if host.bytes_per_gpu.value is not None else None
    if o.policy == "swap-then-recompute" and dram_cap is None:
        raise KvplanError(f"{s.hardware.id} has no host_dram_gb in its preset, which swap-then-recompute needs",
                          "give --dram SIZE per node")
    # blocks_of(c) = bt[c]: the block table indexed by tokens (one lookup instead of a ceiling division and a lookup)
    bt = table[-(-np.arange(len(table) * u.block - u.block + 1) // u.block)]
    if slots:                # a request of c tokens holds the blocks of c + slots: bt[c] = blocks_of(c + slots)
        bt = bt[slots:]
    # each block boundary a running request can cross adds exactly one block (no windows; a shared prefix's
    # blocks, where the table is flat, lie below every prompt)
    unit_steps = bool(np.all(np.diff(table[int(P.min()) // u.block:]) == 1))
    thr = int(o.offload_threshold * u.total_blocks) if o.offload_threshold is not None else None
    hb = u.hit // u.block
    # a victim's own blocks are reused on resume where every block boundary above the shared prefix adds one block
    reuse = bool(np.all(np.diff(table[hb:]) == 1))
    sched = scheduler_for(s, o, max_batch=u.max_batch, watermark_blocks=u.watermark_blocks, threshold_blocks=thr,
                          total_blocks=u.total_blocks, block=u.block, chunk=u.chunk, reuse=reuse,
                          prefix_blocks=hb, hashes=workload.blocks)      # the engine's own, or the rule book
    u = dataclasses.replace(u, **sched.replica_limits())
    if sm.lockstep_ranks > 1:      # attention DP: how many ranks' prompts share a prefill pass (PASS_SHARING_SOURCE)
        sm = sm.with_pass_sharing(_rate_per_rank(sm, workload, P, L), int(P.mean()), u.chunk,
                                  max(int(L.mean()), 1), workload.users if workload.arrivals is None else None,
                                  u.max_batch)
    prices = Prices(s, sm, u.block, u.chunk, bytes_at, u.link, o.reference, o.speculative)
    bind = getattr(sched, "bind_link", None)
    if bind is not None:     # SGLang's HiCache: blocks over the host link, priced by the one cost model
        bind(u.block_bytes, u.total_blocks + u.prefix_blocks, *_link_costs(u.block_bytes, u.link))
        _check_host_pool(getattr(sched, "host_blocks", 0) * u.block_bytes, dram_cap)
    bind_off = getattr(sched, "bind_offload", None)
    if bind_off is not None and o.kv_offloading_bytes is not None:   # vLLM's CPU offloading connector
        if not reuse:
            raise KvplanError(f"--kv-offloading-size with {s.sized_model.id}: its sliding-window or state layers do "
                              "not add one block per block of tokens, and kvplan models vLLM's CPU offloading only for "
                              "full attention and MLA", "drop --kv-offloading-size, or simulate a full-attention or "
                              "MLA model")
        world = s.parallelism.tp * s.parallelism.pp
        if dram_cap is not None and o.kv_offloading_bytes > dram_cap * world:
            raise KvplanError(f"--kv-offloading-size {o.kv_offloading_bytes / 2**30:g} GiB is more than the "
                              f"{dram_cap * world / 2**30:,.2f} GiB of host DRAM of the replica's {world} GPUs "
                              "(--dram, else the node's); vLLM pins that buffer at start-up",
                              "lower --kv-offloading-size, or "
                              "give the node's DRAM with --dram")
        bind_off(u.block_bytes, world, *_link_costs(u.block_bytes, u.link))
    fast = unit_steps and not prices.has_caps and not prices.reference   # the O(1) path: no windows, no caps
    arrivals = None if workload.arrivals is None else np.asarray(workload.arrivals, dtype=float).tolist()
    r = ReplicaState(prompts=P.tolist(), outputs=L.tolist(), block=u.block, blocks_at=bt.tolist(),
                     total_blocks=u.total_blocks, prefix_blocks=u.prefix_blocks, prefix_hit=u.hit, dram_cap=dram_cap,
                     contexts=np.zeros(len(P), dtype=np.int64), contexts_used=not fast or sched.reads_contexts,
                     prefill=prices.prefill, swap_cost=prices.swap_cost, arrivals=arrivals,
                     users=int(workload.users or 0), think_s=workload.think_s, duration_s=workload.duration_s,
                     prefill_pass=prices.prefill_pass)
    r.lockstep = sm.lockstep_ranks / sm.pass_ranks      # passes on this rank's clock per prompt of its own
    r.lockstep_least = sm._least_step if sm.lockstep_ranks > 1 else 0.0
    r.shift = slots
    _EventLoop(r, sched, prices, bt, fast, unit_steps).run(o.on_event, progress)
    if o.on_event is not None:
        o.on_event(event_state(r))
    per = request_arrays(r.tally, r.next_id)
    P, L = P[:r.next_id], L[:r.next_id]
    setup = Setup(u.block, u.block_bytes, u.pool, u.total_blocks, u.watermark_blocks, u.max_batch, o.max_batch is None,
                  u.chunk, u.link, dram_cap, prices.base(1), u.prefix_blocks, u.hit)
    t = r.tally
    return SimRun(s, o, workload, setup, P, L, per["arrival"], per["admitted"], per["first_token"], per["finish"],
                  per["preemptions"], per["swap_outs"], per["swap_ins"], per["recomputed"],
                  bytes_at[-(-(P + L - 1) // u.block)], r.now, t.swapped_out_bytes, t.swapped_in_bytes, r.steps,
                  t.events, t.peak_used, t.peak_dram, t.peak_running, t.stall_prefill, t.stall_swap, per["offloads"],
                  thr, per["prefix_hits"], timeline_arrays(t.timeline), scheduler=sched.engine_rules,
                  scheduler_notes=sched.notes, preemption_cause=sched.preemption_cause,
                  recompute_hit_tokens=per["recompute_hits"], mixed_steps=t.mixed_steps,
                  mixed_prefill_tokens=t.mixed_tokens, mixed_prefill=sched.steps_itself,
                  hicache=stats() if (stats := getattr(sched, "hicache_stats", None)) is not None else None,
                  offload=dict(off.stats) if (off := getattr(sched, "off", None)) is not None else None)


def _link_costs(block_bytes: int, link: float):
    """Seconds to load n blocks back from host memory, and to write n through to it (each block one copy, the
    link shared by both directions): ``costs.swap_seconds``."""
    settings = costs.CostSettings()

    def move(n: int) -> float:
        return costs.swap_seconds(n * block_bytes, n, link, settings, shared_link=True)
    return move, move


def event_state(r: ReplicaState) -> dict:
    """The live engine state at an event, for ``SimOptions.on_event`` (read-only: numpy arrays and tuples of
    request indexes; the running requests' tokens and blocks brought up to date)."""
    import numpy as np

    r.sync()
    return {"now": r.now, "free_blocks": r.free, "total_blocks": r.total_blocks,
            "held_blocks": np.array(r.held, dtype=np.int64), "generated": np.array(r.g, dtype=np.int64),
            "in_dram": np.array(r.in_dram, dtype=np.int64), "dram_used": r.dram_used,
            "finish": np.array(r.tally.finish), "running": tuple(r.running), "waiting": tuple(r.waiting),
            "swapped": tuple(r.swapped), "landing": tuple(i for _, i in r.landing),
            "not_arrived": (*(i for _, i in r.arrivals), *range(r.open_next, r.n if r.times else 0)),
            "leaving": tuple(i for _, i in r.leaving),
            "prefilling": r.partial[0::2], "prefilled_tokens": r.partial[1::2],
            "prefix_blocks": r.prefix_blocks, "swapped_out_bytes": r.tally.swapped_out_bytes,
            "swapped_in_bytes": r.tally.swapped_in_bytes}


def _every_4096(r: ReplicaState, events: int, progress) -> None:
    """The event loop's book-keeping every 4,096 events: progress, the latest marks moved into the timeline (folded
    past ``MARKS_KEPT`` marks: bounded, a few MiB); and its stop past ``MAX_EVENTS``."""
    if events > MAX_EVENTS:
        raise KvplanError(f"the simulation passed {MAX_EVENTS:,} events (the pool thrashes)",
                          "lower the arrival rate or --max-batch, or enlarge the pool")
    if progress is not None:
        progress(r.done, r.n)
    timeline, marks = r.tally.timeline, r.tally.marks
    timeline.fromlist(marks)
    marks.clear()
    if len(timeline) > 5 * MARKS_KEPT:
        fold_marks(timeline)


class _EventLoop:
    """The event loop of one replica: at each event what is due joins (``ReplicaState.take_due``), the scheduler
    admits, then the running batch decodes a run of steps to the next event, summed in closed form
    (``kvplan.calc.sim.steps``). A run ends at the first completion, a cap crossing (a window or top-k), the step
    that overfills the pool (or, with a threshold, passes it), or the step an arrival or a copy landing falls in.
    After a preemption, or with ``reference``, a run is one step."""

    def __init__(self, r: ReplicaState, sched: Scheduler, prices: Prices, bt: Any, fast: bool,
                 unit_steps: bool) -> None:
        self.r, self.sched, self.prices, self.bt, self.fast, self.unit_steps = r, sched, prices, bt, fast, unit_steps
        self.mark = r.tally.marks.extend        # the timeline: the state as a run starts and as it ends, flat
        self.steps_itself = sched.steps_itself
        # the rule book without a threshold: the run may add every free block (``room_for_run`` is r.free)
        self.room_free = type(sched) is RuleBook and sched.thr is None
        # the rule book on the O(1) path: its own loop (``run_book``), which writes out the plain run's price (so
        # not with speculative decoding, whose price per accepted token only ``Prices.run`` knows)
        self.book = type(sched) is RuleBook and fast and prices.spec is None
        # the engines' schedulers (vLLM V1, SGLang) on the O(1) path without speculative decoding: ``run_fast``
        self.engine_fast = type(sched) is not RuleBook and fast and prices.spec is None
        if sched.steps_itself:                  # what a scheduler that runs mixed steps reads of the loop
            s: Any = sched
            s.need1 = self.need1
            s.mixed = partial(prices.mixed, r)   # (a partial: no Python frame of its own per step)
        if getattr(sched, "overlap", False):     # SGLang's overlap scheduler asks if the next decode step fits
            sched_: Any = sched
            sched_.need1 = self.need1

    def run(self, on_event, progress) -> None:
        r, sched, mark = self.r, self.sched, self.mark
        marks, timeline = r.tally.marks, r.tally.timeline
        running, n, total = r.running, r.n, r.total_blocks
        arrivals, landing, leaving = r.arrivals, r.landing, r.leaving
        steps_itself = sched.steps_itself
        if self.book and on_event is None:
            return self.run_book(progress)
        if self.engine_fast and on_event is None:
            return self.run_fast(progress)
        # observed, speculative, or off the O(1) path: ``decode`` and ``Prices.run``, against which the tests hold
        # ``run_book`` and ``run_fast``
        decode = self.decode
        events = 0
        while r.done < n:
            events += 1
            if not events & 4095 or events > MAX_EVENTS:
                _every_4096(r, events, progress)
            now = r.now
            if (arrivals and arrivals[0][0] <= now) or (leaving and leaving[0][0] <= now) or (
                    landing and landing[0][0] <= now):
                r.take_due()
            if on_event is not None:
                on_event(event_state(r))
            if (r.waiting or r.swapped) and sched.admit(r):
                continue          # prefills took time: take what arrived meanwhile first
            if steps_itself and sched.step(r):
                continue          # a step with prefill chunks ran (one event)
            out = len(r.swapped) + len(r.leaving)
            mark((r.now, total - r.free, len(running), out, r.dram_used))   # a run starts
            if not running:
                if r.idle():
                    continue
                break
            decode(out)
        r.tally.events = events
        timeline.fromlist(marks)
        marks.clear()

    def runner(self):
        """The running batch's next run of steps on the O(1) path (``fast``: no caps, no windows, not
        ``reference``) without speculative decoding, the tail ``run_book`` and ``run_fast`` share: ``decode_run(b,
        steps, s0, need1, limit, free, out, one)`` runs the b requests of the batch from ``steps`` (phase s0, whose
        next step adds need1 blocks) to the first completion, the step that passes ``limit`` (the blocks the run may
        add, of ``free``) or the step an arrival or a copy landing falls in, or one step with ``one`` (after a
        preemption); ``out`` requests are swapped or leaving. Its price (``Prices.run`` without caps: its terms
        here, their sum by ``steps._affine_max_sum``), its blocks (``ReplicaState.crossings``), its overflow step
        (``ReplicaState.last_step_that_fits``) and the next event (``ReplicaState.next_event_at``) written out, the
        same arithmetic in the same order, so the same runs, times and marks; then the run's end mark and the
        completions at it. A closure over the replica's state, so a call reads no attribute of the loop."""
        r, mark, tally = self.r, self.mark, self.r.tally
        total, block, phase = r.total_blocks, r.block, r.phase
        arrivals, landing, leaving = r.arrivals, r.landing, r.leaving
        heap, in_run, done_at = r.done_heap, r.in_run, r.done_at
        prices = self.prices
        one_b0, one_b1, one_f0, one_f1 = prices.one
        bw, afs, base = prices.bw, prices.afs, prices.base
        heappop, inf = heapq.heappop, math.inf

        def decode_run(b: int, steps: int, s0: int, need1: int, limit: int, free: int, out: int, one: bool) -> None:
            top = heap[0]
            while not in_run[top[1]] or done_at[top[1]] != top[0]:
                heappop(heap)                     # a request that left the batch since
                top = heap[0]
            k = k_done = top[0] - steps           # steps until the first completion
            if b > tally.peak_running:            # the batch of a step that runs (not one a preemption trims)
                tally.peak_running = b
            now = r.now
            sx = float(r.sum_xo + b * steps)
            u0, v0 = (b * one_b0 + sx * one_b1) / bw, (b * one_f0 + sx * one_f1) / afs
            step0 = base(b)
            if k == 1 or one:                     # one step: the larger of the two at its start
                k = 1
                now += step0 + (u0 if u0 >= v0 else v0)
                added = need1
            else:
                over = b * (k // block) > limit   # the full rounds of block steps alone pass it: no phase sum
                if not over:
                    q, m = divmod(k, block)       # ReplicaState.crossings
                    end = s0 + m
                    added = b * q + (sum(phase[s0:end]) if end <= block else
                                     sum(phase[s0:]) + sum(phase[:end - block]))
                    over = added > limit          # past the free blocks: the overflow step ends it
                if over:                          # ReplicaState.last_step_that_fits written out
                    q, rest = divmod(limit, b)
                    acc = list(accumulate(phase[s0:]))
                    if acc[-1] <= rest:           # past the phases from s0 on: those before s0, from where they end
                        acc = list(accumulate(phase[:s0], initial=acc[-1]))
                        m = bisect_right(acc, rest, 1)
                        k, added = q * block + block - s0 + m - 1, q * b + acc[m - 1]
                    else:
                        m = bisect_right(acc, rest)
                        k, added = q * block + m, q * b + (acc[m - 1] if m else 0)
                if k == 1:
                    now += step0 + (u0 if u0 >= v0 else v0)
                else:                             # the next arrival or copy landing (ReplicaState.next_event_at)
                    upcoming = arrivals[0][0] if arrivals else inf
                    if landing and landing[0][0] < upcoming:
                        upcoming = landing[0][0]
                    if leaving and leaving[0][0] < upcoming:
                        upcoming = leaving[0][0]
                    u1, v1 = b * one_b1 / bw, b * one_f1 / afs
                    run_time = k * step0 + _affine_max_sum(u0, u1, v0, v1, k)
                    if now + run_time > upcoming:     # stop at the step during which the next event falls
                        k, run_time = _first_step_reaching(step0, u0, u1, v0, v1, k, upcoming - now, run_time)
                        added = need1 if k == 1 else r.crossings(k, s0, b)   # the blocks of the steps run
                    now += run_time
            r.now = now
            r.steps = steps + k
            r.free = free = free - added
            used = total - free
            if used > tally.peak_used:
                tally.peak_used = used
            # the run's end, before completions free their blocks (the batch, the requests out and DRAM as it started)
            mark((now, used, b, out, r.dram_used))
            r.preempted = False
            if k == k_done:                       # the first completion is at the run's end
                r.complete()

        return decode_run

    def run_book(self, progress) -> None:
        """``run`` and ``decode`` for the rule book on the O(1) path (``fast``: no caps, no windows, not
        ``reference``) with no observer, in one function: the run's price (``Prices.run`` without caps: its terms
        here, their sum by ``steps._affine_max_sum``) and its blocks (``ReplicaState.crossings``) written out, the
        same arithmetic in the same order, so the same events, runs, times and marks (the equality tests against the
        references run it). The run itself is ``runner``'s, shared with ``run_fast``."""
        r, sched = self.r, self.sched
        assert isinstance(sched, RuleBook)
        mark, decode_run = self.mark, self.runner()
        marks, timeline = r.tally.marks, r.tally.timeline
        running, n, total, block, phase = r.running, r.n, r.total_blocks, r.block, r.phase
        arrivals, landing, leaving, waiting, swapped = r.arrivals, r.landing, r.leaving, r.waiting, r.swapped
        tally, in_run = r.tally, r.in_run
        room_free, admit, preempt, admit_waiting = self.room_free, sched.admit, sched.preempt, sched._admit_waiting
        g, btl, Pl = r.g, r.btl, r.Pl
        max_batch, thr, wm = sched.max_batch, sched.thr, sched.wm_blocks
        # preemption written out (below) for the newest victim under recompute: no swap, no offload, no threshold
        fused = sched.newest and sched.policy == "recompute" and thr is None
        xo_l, held, preemptions = r.xo_l, r.held, tally.preemptions
        events = 0
        while r.done < n:
            events += 1
            if not events & 4095 or events > MAX_EVENTS:
                _every_4096(r, events, progress)
            now = r.now
            if (arrivals and arrivals[0][0] <= now) or (leaving and leaving[0][0] <= now) or (
                    landing and landing[0][0] <= now):
                r.take_due()
            free = r.free
            # RuleBook.admit's first checks written out: none in the instant of a preemption, none while the queue's
            # head it stopped at is as it was (no more free blocks, no fewer holders, the same offloads), and none
            # when the waiting head (nothing swapped) still does not fit (its one-request check, recorded as a stop)
            if (waiting or swapped) and not r.preempted:
                holders = len(running) + len(landing) + len(leaving)
                head = swapped[0] if swapped else ~waiting[0]
                if not (free <= sched._free and holders >= sched._hold and r.leaving_blocks == sched._leaving
                        and head == sched._head):
                    i = ~head
                    if swapped or thr is not None or not 0 < holders < max_batch:
                        if admit(r):
                            continue      # prefills took time: take what arrived meanwhile first
                        free = r.free
                    elif free - btl[Pl[i] + (g[i] - 1 if g[i] else 0)] >= wm:   # the head fits: nothing swapped to
                        before = r.now    # resume, so admit's next step, the waiting queue in order
                        admit_waiting(r)
                        if r.now > before:
                            continue      # prefills took time: take what arrived meanwhile first
                        free = r.free
                    else:                 # the waiting head does not fit: admission stops at it
                        sched._head, sched._free, sched._leaving, sched._hold = head, free, r.leaving_blocks, holders
            out = len(swapped) + len(leaving) if swapped or leaving else 0
            b = len(running)
            mark((r.now, total - free, b, out, r.dram_used))   # a run starts
            if not b:
                if r.idle():
                    continue
                break
            # decode: the running batch's next run of steps, unless its first step needs more blocks than are free
            steps = r.steps
            s0 = (steps - 1) % block              # the phase whose next token starts a block
            need1 = phase[s0]                     # blocks the next step adds
            if need1 > free:
                if not fused:
                    preempt(r, need1)             # the rule book looks at its queues again first
                    continue
                # RuleBook.preempt written out for the newest victim under recompute (no swap price, no wait):
                # the newest leave (ReplicaState.leave and release) until the next step's blocks fit, each to the
                # front of the waiting queue
                while need1 > free:
                    i = running.pop()
                    v = xo_l[i]
                    r.sum_xo -= v
                    phase[-v % block] -= 1
                    in_run[i] = False
                    cache = v + steps - 1
                    g[i] = cache + 1 - Pl[i]
                    need1 -= btl[cache + 1] - btl[cache]
                    preemptions[i] += 1
                    waiting.appendleft(i)
                    h = btl[cache]
                    free += h
                    r.freed += h
                    held[i] = 0
                r.free = free
                tally.stall_swap += 0.0           # RuleBook.preempt's wait (none under recompute)
                r.preempted = True
                b = len(running)
                if not b:
                    continue                      # the rule book looks at its queues again first
                # the next event, in the same instant: nothing more is due (this event took what is due now), no
                # admission (RuleBook.admit's first check: none in the instant of a preemption); a run starts, its
                # first step's blocks (the victims' phases taken off need1) now free
                events += 1
                if not events & 4095 or events > MAX_EVENTS:
                    _every_4096(r, events, progress)
                mark((r.now, total - free, b, out, r.dram_used))
            limit = free if room_free else sched.room_for_run(r, need1)   # blocks the run may add
            if limit is None:
                continue
            # after a preemption, admission is looked at again in one step
            decode_run(b, steps, s0, need1, limit, free, out, r.preempted)
        tally.events = events
        timeline.fromlist(marks)
        marks.clear()

    def run_fast(self, progress) -> None:
        """``run`` and ``decode`` in one function for the engines' schedulers (vLLM V1, SGLang) on the O(1) path
        (``fast``: no caps, no windows, not ``reference``) without speculative decoding (whose price per accepted
        token only ``Prices.run`` knows) and without an observer: the run's price (``Prices.run`` without caps: its
        terms here, their sum by ``steps._affine_max_sum``), its blocks (``ReplicaState.crossings``), its overflow
        step (``ReplicaState.last_step_that_fits``) and the next event (``ReplicaState.next_event_at``) written out,
        the same arithmetic in the same order, so the same events, runs, times and marks (the tests hold it to
        ``run`` with ``decode``; the equality tests against the references run it). One loop for every engine's
        scheduler; the rule book has ``run_book``, and the run itself is ``runner``'s, which both share."""
        r, sched = self.r, self.sched
        mark, decode_run = self.mark, self.runner()
        marks, timeline = r.tally.marks, r.tally.timeline
        running, n, total, block, phase = r.running, r.n, r.total_blocks, r.block, r.phase
        arrivals, landing, leaving, waiting, swapped = r.arrivals, r.landing, r.leaving, r.waiting, r.swapped
        admit, preempt, room_for_run = sched.admit, sched.preempt, sched.room_for_run
        # a scheduler that runs its steps itself (vLLM V1) admits in its step, and runs the rest of the batch in the
        # step that preempted, at once; one that admits between runs (SGLang) looks at its queues again first
        step: Any = getattr(sched, "step", None)
        steps_itself, may_admit_soon = sched.steps_itself, sched.may_admit_soon
        events = 0
        while r.done < n:
            events += 1
            if not events & 4095 or events > MAX_EVENTS:
                _every_4096(r, events, progress)
            now = r.now
            if (arrivals and arrivals[0][0] <= now) or (leaving and leaving[0][0] <= now) or (
                    landing and landing[0][0] <= now):
                r.take_due()
            if steps_itself:
                if step(r):
                    continue      # a step with prefill chunks ran (one event)
            elif (waiting or swapped) and admit(r):
                continue          # prefills took time: take what arrived meanwhile first
            out = len(swapped) + len(leaving) if swapped or leaving else 0
            b = len(running)
            mark((r.now, total - r.free, b, out, r.dram_used))   # a run starts
            if not b:
                if r.idle():
                    continue
                break
            # decode: the running batch's next run of steps, unless its first step needs more blocks than are free
            steps = r.steps
            s0 = (steps - 1) % block              # the phase whose next token starts a block
            need1 = phase[s0]                     # blocks the next step adds
            if need1 > r.free:
                while True:
                    preempt(r, need1)             # the scheduler's victims out until the step fits
                    if not (steps_itself and running):
                        break
                    steps = r.steps
                    s0 = (steps - 1) % block
                    need1 = phase[s0]             # (the victims' phases taken off)
                    if need1 <= r.free:
                        break
                if not (steps_itself and running):
                    continue                      # the queues are looked at again first
                b = len(running)
            limit = room_for_run(r, need1)        # blocks the run may add
            if limit is None:
                continue
            # after a preemption, admission is looked at again in one step (vLLM V1: unless it cannot admit then)
            one = r.preempted and not (steps_itself and not may_admit_soon(r, need1 + phase[steps % block]))
            decode_run(b, steps, s0, need1, limit, r.free, out, one)   # (SGLang's overlap frees its finished there)
        r.tally.events = events
        timeline.fromlist(marks)
        marks.clear()

    def decode(self, out: int) -> None:
        """The running batch's next run of steps, unless its first step needs more blocks than are free (the
        scheduler preempts) or the scheduler offloads first."""
        r, fast = self.r, self.fast
        while True:
            b, steps, free = len(r.running), r.steps, r.free
            s0, x, held_sum = 0, None, 0
            if fast:
                s0 = (steps - 1) % r.block            # the phase whose next token starts a block
                need1 = r.phase[s0]                   # blocks the next step adds
            else:
                np = _numpy()
                x = r.xo[np.array(r.running, dtype=np.int64)] + steps   # what the next step reads
                held_sum = r.total_blocks - free - r.landing_blocks - r.leaving_blocks   # the batch's blocks
                need1 = int(self.bt[x].sum()) - held_sum
            if need1 <= free:
                break
            self.sched.preempt(r, need1)
            # a scheduler that runs its steps itself (vLLM V1) runs the rest of the batch in the step that
            # preempted, at once; the rule book looks at its queues again first
            if not (self.sched.steps_itself and r.running):
                return
        limit = self.sched.room_for_run(r, need1)   # blocks the run may add
        if limit is None:
            return
        if r.free != free:                        # (SGLang's overlap frees the finished requests there)
            free = r.free
            if not fast:                          # the batch's blocks, and so the step's, without theirs
                held_sum = r.total_blocks - free - r.landing_blocks - r.leaving_blocks
                need1 = int(self.bt[x].sum()) - held_sum
        heap, in_run, done_at = r.done_heap, r.in_run, r.done_at
        top = heap[0]
        while not in_run[top[1]] or done_at[top[1]] != top[0]:
            heapq.heappop(heap)                   # a request that left the batch since
            top = heap[0]
        k = k_done = top[0] - steps               # steps until the first completion
        prices, tally = self.prices, r.tally
        nxt = None
        if prices.has_caps:
            k, nxt = prices.cap_steps(x, k)
        if prices.reference or (r.preempted and not (self.steps_itself and fast and not self.sched.may_admit_soon(
                r, need1 + r.phase[steps % r.block]))):
            k = 1                                 # after a preemption, admission is looked at again in one step
        added = None                              # the blocks the run adds, once known
        upcoming = math.inf                       # what falls during a single step is seen at its end
        if k > 1:
            if fast:                              # the step that overfills the pool (or passes the threshold) ends it
                if b * (k // r.block) > limit:    # the full rounds of block steps alone pass it: no phase sum
                    k, added = r.last_step_that_fits(limit, s0, b)
                else:
                    added = r.crossings(k, s0, b)
                    if added > limit:
                        k, added = r.last_step_that_fits(limit, s0, b)
            else:
                k = self.fit(k, x, held_sum, need1, limit)
            upcoming = r.next_event_at()
        if b > tally.peak_running:                # the batch of a step that runs (not one a preemption trims)
            tally.peak_running = b
        now = r.now
        k, run_time, cut = prices.run(b, k, r.sum_xo + b * steps, x, nxt, now, upcoming)
        if added is None or cut:
            added = (need1 if k == 1 else r.crossings(k, s0, b)) if fast else self.need_after(x, held_sum, k)
        r.now = now = now + run_time
        r.steps = steps + k
        r.free = free = free - added
        used = r.total_blocks - free
        if used > tally.peak_used:
            tally.peak_used = used
        # the run's end, before completions free their blocks (the batch, the requests out and DRAM as it started)
        self.mark((now, used, b, out, r.dram_used))
        r.preempted = False
        if k == k_done:                           # the first completion is at the run's end
            r.complete()

    def need1(self) -> int:
        """The blocks the running batch's next decode step adds."""
        r = self.r
        if self.fast:
            return r.phase[(r.steps - 1) % r.block]
        np = _numpy()
        x = r.xo[np.array(r.running, dtype=np.int64)] + r.steps
        return int(self.bt[x].sum() - self.bt[x - 1].sum())

    def need_after(self, x, held_sum: int, k: int) -> int:
        """Blocks the batch of contexts ``x`` adds in k steps (the vectorized path)."""
        return int(self.bt[x + (k - 1)].sum()) - held_sum

    def fit(self, k: int, x, held_sum: int, need1: int, limit: int) -> int:
        """The vectorized path's run of k steps cut at the step before the blocks it adds pass ``limit``."""
        if self.need_after(x, held_sum, k) <= limit:
            return k
        if self.unit_steps:
            return _last_step_that_fits(x + self.r.shift, self.r.block, limit - need1)
        lo, hi = 1, k                             # need_after(lo) <= limit < need_after(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.need_after(x, held_sum, mid) > limit:
                hi = mid
            else:
                lo = mid
        return lo


def _numpy():
    import numpy as np

    return np


# === DP replicas: routing the requests, merging the runs ==========================================================
ROUTING = ("round-robin in arrival order (request i, the i-th to arrive, to replica i mod DP), as a simple load "
           "balancer; a closed loop's users are dealt alike (user u to replica u mod DP) and so are its requests "
           "(request i to replica i mod the replicas with users), each replica's users taking its own in order")


def route(workload: Workload, replicas: int) -> list[tuple[object, Workload]]:
    """The requests each DP replica serves, by ``ROUTING``: (their indexes in the workload, their workload), for
    the replicas that get any. Open arrivals (Poisson or a timed trace) are in arrival order already (the
    workload's times are non-decreasing; equal times keep submission order). A closed loop of U users over N
    requests runs min(DP, U) replicas, replica r with the users u = r, r + DP, ... and the requests i = r, r + R,
    ... (R the replicas with users); a user's next request is the next of its replica's list, not the
    deployment's (each replica is an independent engine)."""
    import numpy as np

    P, L = np.asarray(workload.prompts), np.asarray(workload.outputs)
    n = len(P)
    if workload.arrivals is not None:
        active, users = min(replicas, n), None
    else:
        assert workload.users is not None          # a closed loop has its users
        u = min(int(workload.users), n)
        active = min(replicas, u)
        users = [len(range(r, u, replicas)) for r in range(active)]
    out: list[tuple[object, Workload]] = []
    for r in range(active):
        idx = np.arange(r, n, active)
        arr = None if workload.arrivals is None else np.asarray(workload.arrivals, dtype=float)[idx]
        blocks = None if workload.blocks is None else workload.blocks.take(idx)
        out.append((idx, dataclasses.replace(workload, prompts=P[idx], outputs=L[idx], arrivals=arr,
                                             users=None if users is None else users[r], blocks=blocks)))
    return out


def _sum_timelines(timelines: list[tuple]) -> tuple:
    """The deployment's timeline: every replica's marks, each with the other replicas' state then added, in time
    order. Blocks held, running, swapped and DRAM bytes are sums over the replicas. Another replica's state at a
    time: running, swapped and DRAM those of its last mark at or before it (a replica marks each run of steps as it
    starts and ends, and those do not change within a run); its blocks held interpolated linearly between its
    marks (within a run they grow with the steps, about linearly in time); before its first mark and after its
    last (its last completion) nothing."""
    import numpy as np

    parts = []
    for r, (t, *series) in enumerate(timelines):
        total = [np.array(v, dtype=np.int64) for v in series]
        for q, (tq, used, *other) in enumerate(timelines):
            if q == r:
                continue
            total[0] += np.rint(np.interp(t, tq, used, left=0.0, right=0.0)).astype(np.int64)
            j = np.searchsorted(tq, t, side="right") - 1
            live = (j >= 0) & (t <= tq[-1])
            for acc, v in zip(total[1:], other, strict=True):
                acc += np.where(live, v[np.maximum(j, 0)], 0)
        parts.append((t, *total))
    times = np.concatenate([p[0] for p in parts])
    order = np.argsort(times, kind="stable")
    return (times[order], *(np.concatenate([p[k] for p in parts])[order] for k in range(1, 5)))


def merge_runs(s: Scenario, o: SimOptions, workload: Workload, routed: list, runs: list[SimRun]) -> SimRun:
    """One run of the deployment from its replicas' runs: per-request arrays back in the workload's order (each
    request's figures are its replica's), counts, bytes, steps, events and stall times summed, the simulated time
    the longest replica's, peaks (blocks held, requests running, DRAM bytes per GPU) the busiest replica's (each
    replica has its own pool), the timeline summed (``_sum_timelines``)."""
    import numpy as np

    idx = np.concatenate([ix[:len(run.prompts)] for (ix, _), run in zip(routed, runs, strict=True)])
    order = np.argsort(idx, kind="stable")
    rep = np.concatenate([np.full(len(run.prompts), k, dtype=np.int64) for k, run in enumerate(runs)])

    def cat(name: str):
        return np.concatenate([getattr(run, name) for run in runs])[order]

    per = {name: cat(name) for name in ("prompts", "outputs", "arrival", "admitted", "first_token", "finish",
                                        "preemptions", "swap_outs", "swap_ins", "recomputed", "peak_bytes",
                                        "offloads", "prefix_hit_tokens", "recompute_hit_tokens")}

    def total(name: str):
        return sum(getattr(run, name) for run in runs)

    return dataclasses.replace(
        runs[0], scenario=s, options=o, workload=workload, **per,
        simulated_seconds=max(run.simulated_seconds for run in runs),
        swapped_out_bytes=total("swapped_out_bytes"), swapped_in_bytes=total("swapped_in_bytes"),
        decode_steps=total("decode_steps"), events=total("events"),
        peak_blocks_used=max(run.peak_blocks_used for run in runs),
        peak_dram_bytes=max(run.peak_dram_bytes for run in runs),
        peak_running=max(run.peak_running for run in runs),
        prefill_seconds=total("prefill_seconds"), swap_stall_seconds=total("swap_stall_seconds"),
        timeline=_sum_timelines([run.timeline for run in runs]), replicas=len(runs), replica_of=rep[order],
        mixed_steps=total("mixed_steps"), mixed_prefill_tokens=total("mixed_prefill_tokens"),
        hicache=_merged_hicache([run.hicache for run in runs], order),
        offload=None if runs[0].offload is None else {
            k: (max(run.offload[k] for run in runs) if k.startswith(("peak", "cpu")) else
                sum(run.offload[k] for run in runs)) for k in runs[0].offload})


def _merged_hicache(stats: list, order) -> dict | None:
    """SGLang's HiCache figures of the replicas as one: per-request loads in the workload's order, blocks and
    seconds summed, the host pool and its peak the busiest replica's (each replica has its own)."""
    import numpy as np

    if stats[0] is None:
        return None
    hits = np.concatenate([np.asarray(st["host_hit_tokens"], dtype=np.int64) for st in stats])[order]
    summed = {k: sum(st[k] for st in stats) for k in ("written_blocks", "write_seconds", "loaded_blocks",
                                                        "load_seconds")}
    return {**stats[0], **summed, "host_hit_tokens": hits.tolist(),
            "peak_host_blocks": max(st["peak_host_blocks"] for st in stats)}


def routing_note(replicas: Count, serving: Count, requests: Count) -> Note:
    """The note every simulate output carries for a deployment of DP > 1 replicas: ``replicas`` (DP), those the
    routing gave requests, and the requests routed."""
    dp, busy = replicas.number(), serving.number()
    idle = note(" ({idle} got no request)", idle=Count(dp - busy, derived(
        "DP replicas - replicas given requests", f"{dp:,} - {busy:,} = {dp - busy:,}"))) if busy < dp else ""
    return note("{dp} DP replicas, each its own KV pool and engine{idle}; requests routed {routing}. Per-request "
                "percentiles are over all {n} requests, counts, bytes, steps and stalls summed, throughput the "
                "deployment's, simulated time the longest replica's, peaks (running, blocks held, DRAM per GPU) the "
                "busiest replica's; the timeline sums the replicas (occupancy over all their pools, DRAM the mean "
                "per GPU).", dp=replicas, idle=idle, routing=ROUTING, n=requests)


@dataclass(frozen=True)
class Deployment:
    """A deployment of DP > 1 replicas, for the outputs: its replicas and the notes on them (the routing, and the
    coupling of MoE layers when EP spans the DP ranks)."""

    replicas: Count
    notes: tuple[Note, ...]


def deployment(s: Scenario, serving: Count, requests: Count) -> Deployment | None:
    """The deployment's replicas and notes (``routing_note``); None for one replica (DP = 1)."""
    par = s.parallelism
    if par.dp == 1:
        return None
    replicas = _replicas_value(par.dp)
    notes = [routing_note(replicas, serving, requests)]
    if par.ep and par.ep > par.tp:
        notes.append(note("EP={ep:d} spans the {dp} DP ranks (attention DP): the ranks' MoE layers run each step "
                          "together, so a rank's step waits for the slowest; simulated here as replicas alike, each "
                          "rank's clock paying every prefill pass of its group, where the prompts that arrive during "
                          "a pass share the next one (R / N passes a prompt, N prompts a pass: costs."
                          "PASS_SHARING_SOURCE; its own first token at its own pass's end); other differences "
                          "between the ranks' steps are not modelled.",
                          ep=Count(par.ep, default("the deployment's EP")), dp=replicas))
    return Deployment(replicas, tuple(notes))


def _replicas_value(dp: int) -> Count:
    return Count(dp, derived("the deployment's DP replicas, each its own pool and engine", f"DP={dp}"))


def simulate_deployment(s: Scenario, workload: Workload, options: SimOptions | None = None,
                        progress=None) -> SimRun:
    """The deployment's DP replicas, each its own pool and engine (``simulate``), the requests routed by
    ``ROUTING`` and the runs merged (``merge_runs``). DP = 1 is ``simulate`` itself."""
    o = options or SimOptions()
    dp = s.parallelism.dp
    if dp == 1:
        return simulate(s, workload, o, progress)
    routed = route(workload, dp)
    prompts: Any = workload.prompts         # the workload's arrays (``object`` in its type)
    n = len(prompts)
    runs: list[SimRun] = []
    for _, w in routed:
        base = sum(len(run.prompts) for run in runs)
        step = None if progress is None else (lambda done, _total, base=base: progress(base + done, n))
        runs.append(simulate(s, w, o, step))
    return merge_runs(s, o, workload, routed, runs)


# === the metrics, as typed values =================================================================================
@dataclass(frozen=True)
class SimPlan:
    """A run and every figure its outputs show, as typed values, and its notes as ``Note``s of them (the output
    layer formats them per --units; the presenter only places them)."""

    run: SimRun
    metrics: dict               # name -> typed value (kvplan.specs.values), JSON keys with their units
    setup: dict                 # the replica's constants as typed values
    notes: tuple[Note, ...]
    deployment: Deployment | None   # DP > 1: the replicas and the notes on them (routing_note)
    timeline: Timeline              # the run's timeline in equal slices

    @cached_property
    def per_request(self) -> tuple:
        """Rows of typed values, one per request (``_request_rows``): built when read (--per-request), not for a
        sweep's points, which read the metrics (a third of a 10K-request point's time went to these rows)."""
        return _request_rows(self.run)


OVERLOAD_SHARE = 0.1   # overloaded: the waiting queue grows by more than this share of the requests (_grows)


def plan_simulate(s: Scenario, workload: Workload, options: SimOptions | None = None, progress=None) -> SimPlan:
    o = options or SimOptions()
    r = simulate_deployment(s, workload, o, progress)
    dp = s.parallelism.dp
    m = run_metrics(r, dp, o)
    if dp > 1:
        m["replicas"] = _replicas_value(dp)
        m["replicas_serving"] = Count(r.replicas, derived(
            "replicas the routing gave requests (" + ROUTING + ")", f"{r.replicas:,} of {dp:,}"))
    m.update(overload_values(overload_verdict(r)))
    m.update(closed_form_capacity(s, r, o))
    setup = _setup_values(s, o, r)
    notes = []
    u = r.setup
    if s.engine_adapter.id != "neutral":
        notes.append(note("Scheduler: {scheduler}.", scheduler=r.scheduler))
    if r.mixed_prefill and o.victim != DEFAULT_VICTIM:
        notes.append(note("--victim {victim} is a what-if: vLLM V1 without request priorities preempts the newest "
                          "running request (self.running.pop() in vllm/v1/core/sched/scheduler.py).",
                          victim=o.victim))
    if o.speculative is not None:
        from kvplan.calc.tpot import accept_note, describe_accept

        k, profile = o.speculative
        slots_of = getattr(s.engine_adapter, "speculative_slots", None)
        slots, slots_why, slots_source = slots_of(k) if slots_of is not None else (0, "", "")
        accept = Number(profile[0][1], derived("tokens accepted per verify step, the bonus token included (at the "
                                               "profile's first context)", describe_accept(profile),
                                               o.accept_source or "--accept"))
        notes.append(note("Speculative decoding: {k} MTP draft token(s) per step, accepting ", k=Count(k))
                     + (note("{accept:g}", accept=accept) if len(profile) == 1 else accept_note(profile))
                     + "; each decode step costs the verify step over K + 1 tokens and the K draft steps, over the "
                     "batch's mean acceptance at its requests' contexts ("
                     + (note("each running request holds blocks for its context + {slots} slots, the drafts and "
                             "lookahead vLLM V1's allocate_slots reserves", slots=Count(slots, derived(
                                 "the engine's speculative slots a running request holds", slots_why, slots_source)))
                        if slots else "the draft slots engines reserve beyond the context are not counted")
                     + "; the draft layers' KV is: it shares the pool).")
    if o.policy == "swap" and u.dram_bytes_per_gpu is not None and r.peak_dram_bytes > u.dram_bytes_per_gpu:
        notes.append(note("The swapped-out KV peaked at {peak:GiB:,.1f} per GPU, past the host tier's "
                          "{tier:GiB:,.1f}: --policy swap-then-recompute respects the tier.",
                          peak=m["peak_dram_bytes_per_gpu"], tier=setup["dram_bytes_per_gpu"]))
    return SimPlan(r, m, setup, tuple(notes),
                   deployment(s, m.get("replicas_serving", Count(1)), m["requests_finished"]), timeline_values(r))


def _chunk_why(s: Scenario, chunk: int) -> Any:
    """Where the prefill chunk comes from: SGLang's --chunked-prefill-size as given (over the attention-DP ranks, as
    ``kvplan.engines.sglang_scheduler.prefill_limits`` divides it), else the engine's own."""
    if s.chunked_prefill_size is None:
        return default("the engine's max_num_batched_tokens (the prefill chunk)")
    return derived("SGLang's --chunked-prefill-size as given // attention-DP ranks",
                   f"{s.chunked_prefill_size:,} // {s.chunked_prefill_size // max(chunk, 1)} = {chunk:,}")


def _setup_values(s: Scenario, o: SimOptions, r: SimRun) -> dict:
    """The replica's constants as typed values."""
    from kvplan.specs.values import Bytes, Count, Seconds, Tokens, default, derived, given

    u = r.setup
    return {
        "block_tokens": Tokens(u.block_tokens, default("the engine's block size for the model's layer kinds")),
        "block_bytes": Bytes(u.block_bytes, derived("request_bytes(block) - request_bytes(0): one block of every "
                                                    "layer on the most loaded GPU", f"{u.block_bytes:,} B")),
        "kv_pool_bytes": capacity.kv_pool(s).kv_pool,
        "kv_blocks": Count(u.total_blocks, derived(
            "floor(pool / block bytes) - the shared prefix's blocks",
            f"{u.pool_bytes:,} // {u.block_bytes:,} - {u.prefix_blocks:,} = {u.total_blocks:,}")),
        "shared_prefix_blocks": Count(u.prefix_blocks, derived(
            "ceil(the shared prefix's one copy / block bytes): its whole blocks, cached once",
            f"{u.prefix_hit_tokens_each:,} tokens -> {u.prefix_blocks:,} blocks")),
        "watermark_blocks": Count(u.watermark_blocks, derived(
            "int(watermark x blocks)", f"int({o.watermark:g} x {u.total_blocks:,}) = {u.watermark_blocks:,}",
            WATERMARK_SOURCE) if not r.mixed_prefill else default(
            "vLLM V1 keeps no admission watermark: allocate_slots fails only when the blocks it needs exceed the free "
            "ones (vllm/v1/core/kv_cache_manager.py)")),
        "max_batch": Count(u.max_batch, default("the engine's max_num_seqs") if u.max_batch_from_engine
                           else given("--max-batch")),
        "max_num_batched_tokens": Tokens(u.chunk_tokens, _chunk_why(s, u.chunk_tokens)),
        "host_link_bytes_per_second": costs.host_link_rate(s.hardware, s.host_link_gbs),
        "dram_bytes_per_gpu": Bytes(u.dram_bytes_per_gpu, derived(
            "host DRAM per node / GPUs per node (capacity.host_tier)", f"{u.dram_bytes_per_gpu:,} B"
            if u.dram_bytes_per_gpu is not None else "unknown")),
        "offload_threshold_blocks": Count(r.offload_threshold_blocks, derived(
            "int(--offload-threshold x blocks)", f"int({o.offload_threshold:g} x {u.total_blocks:,}) = "
            f"{r.offload_threshold_blocks:,}") if o.offload_threshold is not None else default("no threshold")),
        "step_seconds_batch_1_no_cache": Seconds(u.base_step_s_at_1, derived(
            "the decode-step model at batch 1 with no cache reads (weights, communication, overhead)",
            f"{u.base_step_s_at_1:.6g} s")),
    }


def _request_rows(r: SimRun) -> tuple:
    """The per-request table: one row of typed values per request."""
    from kvplan.specs.values import Bytes, Count, Seconds, Tokens, derived

    n = len(r.prompts)
    ttft = client_ttft(r)
    queue = r.admitted - r.arrival
    src = derived("simulated", "per request")
    rows = []
    for i in range(n):
        t = (float(r.finish[i] - r.first_token[i]) / (int(r.outputs[i]) - 1)) if r.outputs[i] > 1 else None
        rows.append((Count(i + 1, src), Seconds(float(r.arrival[i]), src), Tokens(int(r.prompts[i]), src),
                     Tokens(int(r.outputs[i]), src), Seconds(float(ttft[i]), src), Seconds(t, src),
                     Seconds(float(queue[i]), src), Count(int(r.preemptions[i]), src),
                     Count(int(r.swap_outs[i]), src), Tokens(int(r.recomputed[i]), src),
                     Bytes(int(r.peak_bytes[i]), src), Seconds(float(r.finish[i]), src))
                    + ((Count(int(r.replica_of[i]), derived(ROUTING, "replica index from 0")),)
                       if r.replica_of is not None else ()))
    return tuple(rows)


if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.slo import Goodput, SloTargets, Verdict


# === --sweep-rate: the highest arrival rate that meets the targets ================================================
PARALLEL_MIN_REQUESTS = 20_000     # below this many simulated requests in all, processes cost more than they save


def parse_sweep(text: str) -> tuple[float, ...]:
    """``A:B:N``: N rates evenly spaced from A to B requests/s, both included (N = 1: A alone, B = A)."""
    example = "give --sweep-rate FROM:TO:POINTS, e.g. 0.5:8:16"
    parts = text.split(":")
    if len(parts) != 3:
        raise KvplanError(f"--sweep-rate {text!r} is not FROM:TO:POINTS", example)
    try:
        a, b = float(parts[0]), float(parts[1])
        n = int(parts[2])
    except ValueError:
        raise KvplanError(f"--sweep-rate {text!r}: FROM and TO are rates, POINTS a whole number", example) from None
    if not (math.isfinite(a) and math.isfinite(b) and 0 < a <= b <= 1e6):
        raise KvplanError(f"--sweep-rate {text!r} needs 0 < FROM <= TO <= 1e6 requests/s", example)
    from kvplan.inputs.workload import MIN_RATE

    if a < MIN_RATE:   # below it the simulated clock cannot resolve a decode step (kvplan.inputs.workload)
        raise KvplanError(f"--sweep-rate {text!r}: FROM is below the lowest rate, {MIN_RATE:g} requests/s", example)
    if not 1 <= n <= 200 or (n == 1) != (a == b):
        raise KvplanError(f"--sweep-rate {text!r}: POINTS must be 2 .. 200 (or 1 with FROM = TO)", example)
    return tuple(a + (b - a) * i / (n - 1) for i in range(n)) if n > 1 else (a,)


@dataclass(frozen=True)
class Burst:
    """A rate that meets the targets only because its requests all arrive before a mean request has decoded: the
    run is a burst, not a steady state."""

    rate: Number
    requests: Count
    arrivals: Seconds            # the time the requests take to arrive: requests / rate
    decode: Seconds              # a mean request's decode: mean TPOT x generated tokens / requests


@dataclass(frozen=True)
class SweepPlan:
    """A ``--sweep-rate``: each rate's metrics and verdict, as numbers (for the library) and as typed values (for the
    outputs); what needs the scenario or the requests (``requests``, ``deployment``, ``burst``) is worked out when
    first read."""

    rates: tuple[float, ...]
    points: tuple[dict, ...]             # each rate's metrics (plan_simulate's, typed)
    meets: tuple[bool, ...]
    capacity: float | None               # the highest rate at which it and every lower rate meet the targets
    tpot_slo: float | None
    max_recompute_rate: float | None
    workers: int                         # processes the points ran in (1: serial)
    # the same as typed values, for the outputs
    rate_values: tuple[Number, ...]      # each rate, with FROM + (TO - FROM) x i / (POINTS - 1)
    capacity_value: Number               # with the rates that met the targets
    targets: dict[str, Value]            # the targets given: tpot_seconds_p99_at_most, recompute_rate_at_most
    processes: Count
    serving: Count                       # the fewest replicas the routing gave requests over the rates (1: DP = 1)
    scenario: Scenario | None = None
    workload: Workload | None = None     # the first rate's (every rate simulates the same requests)
    ttft_slo: float | None = None        # the TTFT target, at ttft_percentile
    ttft_percentile: int = 99
    slo: SloTargets | None = None        # the SLO model's targets (kvplan.calc.slo), the TPOT and TTFT above
    decided_by: tuple[str, ...] = ()     # each rate: the figure that failed first ("" when it meets; sweep_verdict)
    goodput: Goodput | None = None       # the SLO model's goodput: capacity, and its output tokens/s

    @cached_property
    def overloaded(self) -> tuple[bool, ...]:
        """Each rate: whether its queue grew through the run (``overloaded``)."""
        return tuple(overloaded(m) for m in self.points)

    @cached_property
    def requests(self) -> Count:
        """The requests each rate simulates."""
        assert self.workload is not None
        prompts: Any = self.workload.prompts     # the workload's array (``object`` in its type)
        n = len(prompts)
        return Count(n, derived("the workload's requests, the same at every rate", f"{n:,}"))

    @cached_property
    def deployment(self) -> Deployment | None:
        """DP > 1: the replicas and the notes on them (``deployment``), for the fewest replicas given requests."""
        assert self.scenario is not None
        return deployment(self.scenario, self.serving, self.requests)

    @cached_property
    def burst(self) -> Burst | None:
        """The first passing rate whose requests arrive within a mean request's decode (``Burst``), or None."""
        n = self.requests.number()
        for rate, m, ok in zip(self.rate_values, self.points, self.meets, strict=True):
            tpot_mean, gen = m["tpot_seconds_mean"].value, m["generated_tokens"].value
            if ok and tpot_mean and gen and n:
                decode = tpot_mean * gen / n
                r = rate.number()
                if n / r < decode:
                    return Burst(rate, self.requests, Seconds(n / r, derived(
                        "requests / rate: the time the requests take to arrive", f"{n:,} / {r:g} = {n / r:.6g} s")),
                        Seconds(decode, derived("mean TPOT x generated tokens / requests",
                                                f"{tpot_mean:.6g} x {gen:,} / {n:,} = {decode:.6g} s")))
        return None


def _sweep_values(rates: tuple[float, ...], points: tuple[dict, ...], meets: tuple[bool, ...],
                  capacity: float | None, tpot_slo: float | None, max_recompute_rate: float | None,
                  workers: int, ttft_slo: float | None = None, ttft_percentile: int = 99,
                  slo: SloTargets | None = None) -> dict:
    """SweepPlan's typed fields (``rate_values`` .. ``serving``)."""
    n = len(rates)
    first, last = rates[0], rates[-1]
    t = targets_of(tpot_slo, ttft_slo, ttft_percentile, slo)
    rate_values = tuple(Number(r, derived("FROM + (TO - FROM) x i / (POINTS - 1)",
                                          f"{first:g} + ({last:g} - {first:g}) x {i} / {max(n - 1, 1)} = {r:.6g}"
                                          if n > 1 else f"{r:g}"))
                        for i, r in enumerate(rates))
    capacity_value = Number(capacity, derived(
        "the highest swept rate at which it and every lower rate"
        + (f" (and at least {t.attainment:.0%} of requests meeting the latency targets)" if t.any else "")
        + " meet " + " and ".join([f"{name} p{q} <= {v * 1e3:g} ms" for name, q, v in t.bounds()]
                                  + ([f"recompute rate <= {max_recompute_rate:g}"]
                                     if max_recompute_rate is not None else [])),
        "meeting: " + (", ".join(f"{r:g}" for r, ok in zip(rates, meets, strict=True) if ok) or "none")
        + f" of {n} rates; capacity = "
        + (f"{capacity:g} requests/s" if capacity is not None else "below the lowest rate")))
    targets: dict[str, Value] = dict(t.values())
    if max_recompute_rate is not None:
        targets["recompute_rate_at_most"] = Fraction(max_recompute_rate, given("--max-recompute-rate"))
    serving = min((int(m["replicas_serving"].value) for m in points if "replicas_serving" in m), default=1)
    return {"rate_values": rate_values, "capacity_value": capacity_value, "targets": targets,
            "processes": Count(workers, default("one process per CPU when the sweep simulates 20,000 requests or "
                                                "more, else 1")),
            "serving": Count(serving, derived("the fewest replicas the routing gave requests over the swept rates",
                                              f"{serving:,}"))}


def _sweep_point(job):
    s, work, o, targets = job
    try:
        plan = plan_simulate(s, work, o)
    except KvplanError as err:           # KvplanError does not pickle its hint: carry it as data
        return ("error", err.message, err.hint)
    from kvplan.calc import slo

    # TTFT p90, the one --ttft-slo percentile the run's metrics do not carry, in every point (the JSON's keys)
    m = {**plan.metrics, "ttft_seconds_p90": slo.percentile_figure(plan.run, "ttft", 90)}
    return {**m, **slo.run_figures(plan.run, targets, m)}


OVERLOAD_MIN = 10      # ... and more than this many (a burst of a handful of requests is not a growing queue)
# the steady rise: the waiting queue, looked at the end of each of OVERLOAD_SAMPLES equal parts of the arrival span,
# is longer at every look than at the one before, and longer at the last than at the first by more than
# OVERLOAD_RISE_SHARE of the requests (and OVERLOAD_MIN) (_rises)
OVERLOAD_SAMPLES = 8
OVERLOAD_RISE_SHARE = 0.05
# the rules' figures as typed values, for the notes that state them
OVERLOAD = (Fraction(OVERLOAD_SHARE, default("kvplan's overload rule: the waiting queue grows by this share of "
                                             "the requests over the second half of the arrivals")),
            Count(OVERLOAD_MIN, default("kvplan's overload rule: and by more than this many")))
OVERLOAD_RISE = (Count(OVERLOAD_SAMPLES, default("kvplan's overload rule: the waiting queue is looked at the end of "
                                                 "each of this many equal parts of the arrival span")),
                 Fraction(OVERLOAD_RISE_SHARE, default("kvplan's overload rule: a queue longer at every look than "
                                                       "at the one before grows by this share of the requests")))
# the service witness (_falls_behind): over the run's steady part (``steady_window``: from the middle of the arrivals,
# or later, once the requests that arrived first have had their time in system, to the last arrival), the
# deployment finished fewer requests than arrived, by more than OVERLOAD_SIGMAS standard deviations of that
# difference for a deployment that keeps up
OVERLOAD_SIGMAS = 3
OVERLOAD_RAMP_PERCENTILE = 90
OVERLOAD_BEHIND = (Count(OVERLOAD_SIGMAS, default(
    "kvplan's overload rule: completions fall short of the arrivals over the steady part of the run by more than "
    "this many standard deviations of a deployment that keeps up, sqrt(2 x the arrivals) (Poisson counts: variance "
    "= mean; one-sided normal tail at 3 sigma: 0.13%)")),
                   Count(OVERLOAD_RAMP_PERCENTILE, default(
    "kvplan's overload rule: the steady part starts once the requests that arrived by the middle of the arrivals "
    "have had this percentile of their time in system (the ramp, while the batch fills, is no steady state)")))
SERVICE_SOURCE = ("kvplan's overload rule, service witness (issue 21): arrivals - completions over a window is the "
                  "growth of the requests in the system; for a deployment that keeps up it differs from 0 by two "
                  "Poisson counts of at most the window's arrivals each, variance <= 2 x arrivals; 3 sigma. Less "
                  "the growth of the running batch: the batch filling (Little's law: a steady population L = rate x "
                  "W, W = prefill + D x TPOT(L), each request admitted slowing every step, so near the capacity "
                  "the fill lasts several times in system); a backlog is requests in the system not running")
TTFT_PERCENTILES = (50, 90, 99)   # the --ttft-slo percentiles (p99 unless the target names another)


def _grows(waiting_end: int, waiting_mid: int, requests: int) -> bool:
    """The overload rule's first part: the waiting queue grew, between the middle of the arrivals and the last one,
    by more than OVERLOAD_SHARE of the requests and more than OVERLOAD_MIN. A queue that keeps up stays short (its
    length at the two instants differs by a few requests); one that does not grows by (arrival rate - service rate)
    x half the arrival span: at arrivals 1.25 x what the deployment sustains, by 10% of the requests (a strong
    overload, or one that starts late in the run: a batch that fills the pool first)."""
    return waiting_end - waiting_mid > max(OVERLOAD_SHARE * requests, OVERLOAD_MIN)


def _rises(steady_rise: int, requests: int) -> bool:
    """The second part: the queue grew through the run (``steady_rise``: its growth from the first look to the last
    when it was longer at every one of the OVERLOAD_SAMPLES looks than at the one before, else 0) by more than
    OVERLOAD_RISE_SHARE of the requests and more than OVERLOAD_MIN. A queue that keeps up falls back to a few
    requests between looks; one fed at a steady rate x times what the deployment sustains grows by about (1 - 1 / x)
    of the arrivals at every look: at 1.06 x, by 5% of the requests over the seven eighths of the span after the
    first look (the first part needs 1.25 x)."""
    return steady_rise > max(OVERLOAD_RISE_SHARE * requests, OVERLOAD_MIN)


def _falls_behind(arrivals: int, completions: int, filled: int = 0) -> bool:
    """The third part, the service witness (issue 21): over the run's steady part (``steady_window``) the deployment
    finished fewer requests than arrived, by more than OVERLOAD_SIGMAS x sqrt(2 x arrivals) (no floor is needed: the
    shortfall is at most the arrivals, and 3 x sqrt(2 x A) exceeds A below 18 arrivals). The shortfall is the growth
    of the requests in the system (arrived and not finished: waiting, running, or preempted), which the waiting-queue
    parts miss when the engine admits what the pool takes and the backlog piles up as running requests that slow
    every step, or as preempted ones (admitted once, so not counted as waiting).
    The tolerance: a deployment that keeps up finishes, over a window of length T, the requests that arrived over
    the same window shifted by their time in system W; the two counts share the arrivals of the overlap and differ
    by those of two stretches of length min(W, T), independent Poisson counts of mean rate x min(W, T) each, so the
    shortfall has variance 2 x rate x min(W, T) <= 2 x the window's arrivals. Three standard deviations of that
    bound: a run that keeps up is called overloaded with probability below 0.13% (one-sided normal tail). Arrivals
    1.25 x what the deployment sustains over a window of 475 arrivals fall short by 95 > 3 x sqrt(950) = 92.5.
    ``filled``: the growth of the running batch over the window (``running_at``), taken off the shortfall: a
    deployment that keeps up admits each arrival while its batch is under its limit, and the requests in the system
    rise as the batch fills towards Little's steady population L = rate x W, W = prefill + D x TPOT(L); each request
    admitted slows every step, so W rises with L and near the deployment's capacity the fill takes several times in
    system, longer than a run of a thousand requests lasts (pd's 1,500-request colocated runs: 30 + 300 tokens at
    67.65/s, the running batch 441 -> 562 over the steady part, 738 arrived, 611 finished). What is left is the
    backlog: requests in the system not running (waiting, retracted, preempted), which grows once the batch is at
    its limit and the arrivals outpace it. A batch still filling at the last arrival is no evidence either way:
    the witness reads only the backlog."""
    return arrivals - completions - filled > OVERLOAD_SIGMAS * math.sqrt(2 * arrivals)


def steady_window(arrival, finish, first: float, middle: float) -> tuple[float, float]:
    """The start of the run's steady part, which ends at the last arrival: the middle of the arrivals, or later,
    ``first`` + the OVERLOAD_RAMP_PERCENTILE-th percentile of the time in system (finish - arrival) of the requests
    that arrived by the middle, when they take longer (the batch fills over about one time in system; before that
    fewer finish than arrive in a deployment that keeps up). A start at or past ``last`` leaves no steady part: the
    service witness abstains (a burst, or requests that outlast the arrival span). Returns (start, that percentile of
    the time in system)."""
    import numpy as np

    early = arrival <= middle
    ramp = float(np.percentile(finish[early] - arrival[early], OVERLOAD_RAMP_PERCENTILE)) if np.any(early) else 0.0
    return max(middle, first + ramp), ramp


def running_at(r, t: float) -> int | None:
    """The running batch at ``t`` (requests admitted and not finished, preempted or swapped out: the timeline's
    ``running`` series in force at ``t``, summed over DP replicas); None when the run kept no timeline."""
    import numpy as np

    timeline: Any = getattr(r, "timeline", ())
    if len(timeline) < 3 or not len(timeline[0]):
        return None
    times, running = np.asarray(timeline[0], dtype=float), np.asarray(timeline[2])
    i = int(np.searchsorted(times, t, side="right")) - 1
    return int(running[i]) if i >= 0 else 0


def waiting_samples(arrival, admitted, first: float, last: float) -> tuple[int, ...]:
    """The waiting queue (arrived and not yet admitted) at the end of each of OVERLOAD_SAMPLES equal parts of the
    arrival span ``first`` .. ``last`` (the last look at the last arrival)."""
    import numpy as np

    looks = [first + (last - first) * k / OVERLOAD_SAMPLES for k in range(1, OVERLOAD_SAMPLES)] + [last]
    return tuple(int(np.count_nonzero((arrival <= t) & (admitted > t))) for t in looks)


def steady_rise(samples: tuple[int, ...]) -> int:
    """The queue's growth from the first look to the last when it is longer at every look than at the one before,
    else 0 (``_rises``)."""
    if len(samples) < 2 or any(b <= a for a, b in zip(samples, samples[1:], strict=False)):
        return 0
    return samples[-1] - samples[0]


@dataclass(frozen=True)
class Overload:
    """Whether the arrivals outpaced the service, from the run's timeline (``overload_verdict``)."""

    overloaded: bool
    open_arrivals: bool                 # False: a closed loop, whose users wait on their answers (never overloaded)
    middle: float                       # the middle of the arrival span, s
    last: float                         # the last arrival, s
    waiting_mid: int                    # requests arrived and not yet admitted at ``middle``
    waiting_end: int                    # ... at ``last``
    arrival_rate: float | None          # arrivals per second after ``middle`` (to ``last``)
    window_end: float                   # the end of the window the capacity is read over
    completions: int                    # requests that finished in [middle, window_end]
    capacity: float | None              # completions / (window_end - middle): the rate the deployment sustains
    samples: tuple[int, ...] = ()       # the queue at the end of each eighth of the arrival span (waiting_samples)
    rise: int = 0                       # its steady rise (steady_rise): last - first when it rose at every look
    steady_start: float | None = None   # the start of the steady part (steady_window), None: no steady part
    steady_arrivals: int | None = None  # requests that arrived in (steady_start, last]
    steady_completions: int | None = None   # requests that finished in (steady_start, last]
    first: float = 0.0                  # the first arrival, s
    ramp: float = 0.0                   # the p90 time in system of the requests that arrived by ``middle``, s
    steady_running: tuple[int, int] | None = None   # the running batch at steady_start and at last (running_at)


def overload_verdict(r: SimRun) -> Overload:
    """The run's overload verdict (``_grows`` on the queue at the middle of the arrivals and at the last one, or
    ``_rises`` on its steady rise through the arrival span, or ``_falls_behind``: fewer requests finished than arrived
    over the steady part, ``steady_window``) and its capacity estimate: the requests that finished per
    second from the middle of the arrivals to the last admission (while the queue was never empty, the deployment
    ran as fast as it can; a run that keeps up is read to the last arrival). A closed loop is never overloaded (each
    user waits for its answer)."""
    import numpy as np

    arrival, admitted, finish = r.arrival, r.admitted, r.finish
    n = len(arrival)
    open_arrivals = r.workload.arrivals is not None
    if not n:
        return Overload(False, open_arrivals, 0.0, 0.0, 0, 0, None, 0.0, 0, None)
    first, last = float(arrival.min()), float(arrival.max())
    middle = first + (last - first) / 2

    def waiting(t: float) -> int:
        return int(np.count_nonzero((arrival <= t) & (admitted > t)))

    w_mid, w_end = waiting(middle), waiting(last)
    samples = waiting_samples(arrival, admitted, first, last)
    rise = steady_rise(samples)
    rate = float(np.count_nonzero(arrival > middle)) / (last - middle) if last > middle else None
    start: float | None = None
    ramp = 0.0
    if open_arrivals:
        start, ramp = steady_window(arrival, finish, first, middle)
        if start >= last:
            start = None
    came = int(np.count_nonzero((arrival > start) & (arrival <= last))) if start is not None else None
    went = int(np.count_nonzero((finish > start) & (finish <= last))) if start is not None else None
    batch: tuple[int, int] | None = None
    if start is not None:
        at_start, at_last = running_at(r, start), running_at(r, last)
        batch = (at_start, at_last) if at_start is not None and at_last is not None else None
    filled = batch[1] - batch[0] if batch is not None else 0
    behind = came is not None and went is not None and _falls_behind(came, went, filled)
    over = open_arrivals and (_grows(w_end, w_mid, n) or _rises(rise, n) or behind)
    end = max(float(admitted.max()), last) if over else last
    done = int(np.count_nonzero((finish >= middle) & (finish <= end)))
    capacity = done / (end - middle) if end > middle else None
    return Overload(over, open_arrivals, middle, last, w_mid, w_end, rate, end, done, capacity, samples, rise,
                    start, came, went, first, ramp, batch)


def overload_values(v: Overload) -> dict:
    """The verdict's figures as the run's metrics (typed values, from which ``overloaded`` reads the verdict again:
    a closed loop's queue at the middle is None, never overloaded; the sustained rate is given only when
    overloaded)."""
    why_mid = derived("requests arrived by the middle of the arrival span and not yet admitted then",
                      f"{v.waiting_mid:,} at t = {v.middle:.6g} s") if v.open_arrivals else derived(
                      "a closed loop: each user waits for its answer, so the arrivals cannot outpace the service",
                      f"{v.waiting_end:,} waiting at the last submission")
    rate = Number(v.arrival_rate, derived("arrivals after the middle of the arrival span / (last arrival - middle)",
                                          f"over {v.middle:.6g} .. {v.last:.6g} s" + (f" = {v.arrival_rate:.6g}/s"
                                          if v.arrival_rate is not None else ": no span")))
    cap = Number(v.capacity if v.overloaded else None, derived(
        "requests finished per second from the middle of the arrivals to the last admission (the queue never "
        "empty: the rate the deployment sustains); given only when overloaded",
        f"{v.completions:,} / ({v.window_end:.6g} - {v.middle:.6g}) s" + (f" = {v.capacity:.6g}/s"
                                                                         if v.capacity is not None else "")
        if v.overloaded else "not overloaded"))
    rise = Count(v.rise if v.open_arrivals else None, derived(
        "the waiting queue's growth from the first to the last of its looks at the end of each eighth of the arrival "
        "span when it was longer at every look than at the one before, else 0",
        ("looks " + ", ".join(f"{q:,}" for q in v.samples) + ": "
         + (f"{v.samples[-1]:,} - {v.samples[0]:,} = {v.rise:,}" if v.rise else "not longer at every look: 0"))
        if v.open_arrivals else "a closed loop"))
    if v.steady_start is None:
        why = "a closed loop" if not v.open_arrivals else (
            "no steady part: the requests that arrived by the middle of the arrivals were still in the system at the "
            "last arrival (their p90 time in system outlasts the arrival span)")
        came = Count(None, derived("requests that arrived over the run's steady part", why))
        went = Count(None, derived("requests that finished over the run's steady part", why))
        grew = Count(None, derived("the running batch's growth over the run's steady part", why))
    else:
        filled = v.steady_running[1] - v.steady_running[0] if v.steady_running is not None else 0
        grew = Count(filled if v.steady_running is not None else None, derived(
            "the running batch's growth over the run's steady part (the timeline's running requests at the last "
            "arrival - at the start): the batch filling towards Little's steady population, not a backlog",
            (f"{v.steady_running[1]:,} - {v.steady_running[0]:,} = {filled:,} at {v.last:.6g} and "
             f"{v.steady_start:.6g} s" if v.steady_running is not None else "the run kept no timeline: 0 taken"),
            SERVICE_SOURCE))
        came = Count(v.steady_arrivals, derived(
            "requests that arrived over the run's steady part: after max(the middle of the arrivals, the first + the "
            "p90 time in system of the requests that arrived by the middle), to the last arrival",
            f"start max({v.middle:.6g}, {v.first:.6g} + {v.ramp:.6g}) = {v.steady_start:.6g} s; "
            f"{v.steady_arrivals:,} in ({v.steady_start:.6g}, {v.last:.6g}] s", SERVICE_SOURCE))
        short = (v.steady_arrivals or 0) - (v.steady_completions or 0)
        bound = OVERLOAD_SIGMAS * math.sqrt(2 * (v.steady_arrivals or 0))
        backlog = short - filled
        went = Count(v.steady_completions, derived(
            "requests that finished over the run's steady part; overloaded when arrivals - completions - the "
            "running batch's growth > 3 x sqrt(2 x arrivals): the requests in the system not running (waiting, "
            "retracted, preempted) grew past the Poisson noise of a deployment that keeps up",
            f"{v.steady_completions:,} in ({v.steady_start:.6g}, {v.last:.6g}] s; "
            f"{v.steady_arrivals:,} - {v.steady_completions:,} = {short:,}"
            + (f" - {filled:,} (the running batch's growth) = {backlog:,}" if filled > 0
               else f" + {-filled:,} (the running batch's shrinking) = {backlog:,}" if filled else "")
            + (" >" if backlog > bound else " <=")
            + f" 3 x sqrt(2 x {v.steady_arrivals:,}) = {bound:.1f}", SERVICE_SOURCE))
    return {"waiting_at_mid_arrival": Count(v.waiting_mid if v.open_arrivals else None, why_mid),
            "waiting_steady_rise": rise, "arrivals_steady_part": came, "completions_steady_part": went,
            "running_growth_steady_part": grew,
            "arrival_rate_second_half_requests_per_second": rate, "sustained_requests_per_second": cap}


def overloaded(metrics: dict) -> bool:
    """The deployment does not keep up with the rate: ``_grows`` on the run's queue at the last arrival and at the
    middle of the arrivals, or ``_rises`` on its steady rise, or ``_falls_behind`` on its arrivals and completions
    over the steady part (``overload_values``; a middle not given counts as an empty queue, one given as None is a
    closed loop: never overloaded; no steady part: that witness abstains). The same verdict as ``overload_verdict`` on
    the run, or ``above_capacity``: the capacity witness, whose figures (``closed_form_capacity``) only the metrics
    carry."""
    if "waiting_at_last_arrival" not in metrics or "requests_finished" not in metrics:
        return False
    mid = metrics.get("waiting_at_mid_arrival")
    if mid is not None and mid.value is None:
        return False
    n = metrics["requests_finished"].value or 0
    rise = metrics.get("waiting_steady_rise")
    return _grows(metrics["waiting_at_last_arrival"].value or 0, mid.value if mid is not None else 0, n) or (
        rise is not None and _rises(rise.value or 0, n)) or falls_behind(metrics) or above_capacity(metrics)


def falls_behind(metrics: dict) -> bool:
    """The service witness on the run's metrics (``_falls_behind`` on ``arrivals_steady_part``,
    ``completions_steady_part`` and ``running_growth_steady_part``, 0 when not given; False when the run has no
    steady part or is a closed loop)."""
    came, went = metrics.get("arrivals_steady_part"), metrics.get("completions_steady_part")
    grew = metrics.get("running_growth_steady_part")
    filled = grew.value if grew is not None and grew.value is not None else 0
    return (came is not None and went is not None and came.value is not None and went.value is not None
            and _falls_behind(came.value, went.value, filled))


def parse_ttft_slo(text: str) -> tuple[float, int]:
    """``--ttft-slo``: a time (the TTFT p99 target) or ``pNN:TIME`` for another of ``TTFT_PERCENTILES``
    (``p50:500ms``, ``p90:2s``). Returns (seconds, percentile). The SLO model's parser (``kvplan.calc.slo``)."""
    from kvplan.calc.slo import parse_slo

    return parse_slo(text, "--ttft-slo")


def ttft_key(percentile: int) -> str:
    """The metric a TTFT target at this percentile reads."""
    return f"ttft_seconds_p{percentile}"


def targets_of(tpot_slo: float | None, ttft_slo: float | None = None, ttft_percentile: int = 99,
               slo: SloTargets | None = None) -> SloTargets:
    """The SLO targets of a sweep: ``slo`` when given, else TPOT p99 and TTFT at its percentile, attainment 0.90."""
    from kvplan.calc.slo import SloTargets

    return slo if slo is not None else SloTargets(ttft=ttft_slo, tpot=tpot_slo, ttft_percentile=ttft_percentile)


def sweep_verdict(metrics: dict, targets: SloTargets, max_recompute_rate: float | None) -> Verdict:
    """One rate's verdict and the figure that decided it: "overload" when the queue grows without bound (it meets
    no target, whatever the TPOT of the requests that do run), else the SLO model's (``kvplan.calc.slo.judge``:
    the percentile form, then the attainment), else "recompute rate" over its cap."""
    from kvplan.calc.slo import Verdict, judge

    if overloaded(metrics):
        return Verdict(False, "overload")
    v = judge(metrics, targets)
    if not v.meets:
        return v
    rate = metrics["recompute_rate"].value
    if max_recompute_rate is not None and (rate or 0.0) > max_recompute_rate:
        return Verdict(False, "recompute rate")
    return v


def meets_targets(metrics: dict, tpot_slo: float | None, max_recompute_rate: float | None,
                  ttft_slo: float | None = None, ttft_percentile: int = 99, slo: SloTargets | None = None) -> bool:
    """TPOT p99 <= the SLO, TTFT at its percentile <= its SLO, the attainment >= its target (``slo`` gives all
    three; ``kvplan.calc.slo``) and the recompute rate <= its cap (a target not given always holds), and the
    deployment keeps up with the rate (``overloaded``): ``sweep_verdict``'s verdict."""
    return sweep_verdict(metrics, targets_of(tpot_slo, ttft_slo, ttft_percentile, slo), max_recompute_rate).meets


def plan_sweep(s: Scenario, works: list, options: SimOptions, tpot_slo: float | None,
               max_recompute_rate: float | None, workers: int | None = None, progress=None, *,
               ttft_slo: float | None = None, ttft_percentile: int = 99, slo: SloTargets | None = None) -> SweepPlan:
    """Each ``(rate, workload)`` simulated with the same options; points run in processes
    (``concurrent.futures.ProcessPoolExecutor``) when there are at least ``PARALLEL_MIN_REQUESTS`` requests in all
    and more than one CPU, else in order. Every point is the same deterministic function of its inputs, so the
    results do not depend on how they ran. ``progress(done, total)`` is called as points finish. ``ttft_slo``: the
    TTFT target at ``ttft_percentile`` (one of ``TTFT_PERCENTILES``); ``slo``: the SLO model's targets
    (``kvplan.calc.slo.SloTargets``), in place of ``tpot_slo`` / ``ttft_slo``. Each rate is judged by
    ``sweep_verdict``; the capacity is the SLO model's goodput (``kvplan.calc.slo.goodput``)."""
    import os

    from kvplan.calc import slo as slo_model

    t = targets_of(tpot_slo, ttft_slo, ttft_percentile, slo)
    if not t.any and max_recompute_rate is None:
        raise KvplanError("--sweep-rate finds the highest rate that meets a target, and none was given",
                          "give --tpot-slo, --ttft-slo and/or --max-recompute-rate")
    jobs = [(s, w, options, t) for _, w in works]
    if workers is None:
        total = sum(len(w.prompts) for _, w in works)
        workers = min(len(jobs), os.cpu_count() or 1) if total >= PARALLEL_MIN_REQUESTS else 1
    results: list = [None] * len(jobs)
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(workers) as ex:
            futures = {ex.submit(_sweep_point, job): i for i, job in enumerate(jobs)}
            for count, fut in enumerate(as_completed(futures), 1):
                results[futures[fut]] = fut.result()
                if progress:
                    progress(count, len(jobs))
    else:
        for i, job in enumerate(jobs):
            results[i] = _sweep_point(job)
            if progress:
                progress(i + 1, len(jobs))
    for r in results:
        if isinstance(r, tuple):
            raise KvplanError(r[1], r[2])
    verdicts = tuple(sweep_verdict(m, t, max_recompute_rate) for m in results)
    meets = tuple(v.meets for v in verdicts)
    rates, points = tuple(r for r, _ in works), tuple(results)
    work = works[0][1] if works else None
    outputs: Any = getattr(work, "outputs", None)
    mean_out = float(outputs.mean()) if outputs is not None and len(outputs) else None
    good = slo_model.goodput(rates, meets, mean_out, t, max_recompute_rate)
    capacity = good.requests_per_second.value
    return SweepPlan(rates, points, meets, capacity, t.tpot, max_recompute_rate, workers,
                     **_sweep_values(rates, points, meets, capacity, t.tpot, max_recompute_rate, workers, t.ttft,
                                     t.ttft_percentile, t),
                     scenario=s, workload=work, ttft_slo=t.ttft, ttft_percentile=t.ttft_percentile, slo=t,
                     decided_by=tuple(v.decided_by for v in verdicts), goodput=good)


# === a deployment's batch under the SLO model: a closed loop of equal requests =====================================
@dataclass(frozen=True)
class SimulatedBatch:
    """A closed loop of ``batch`` users sending equal requests, simulated: the run's SLO figures and verdict."""

    users: Number
    figures: dict                 # ttft_seconds_pQ, tpot_seconds_pQ, slo_attainment (typed, "simulated: ...")
    verdict: Verdict
    tokens_per_second: Value      # the run's output tokens / simulated time


BATCH_REQUESTS_PER_USER = 3       # each user sends this many requests: a steady batch after the first wave


def simulated_batch(s: Scenario, batch: int, targets: SloTargets, requests: int | None = None, seed: int = 0,
                    ) -> SimulatedBatch:
    """The scenario's deployment serving a closed loop of ``batch`` users, each sending equal requests of the
    scenario's prompt + decode one after another (``BATCH_REQUESTS_PER_USER`` each unless ``requests`` says), through
    the simulator, whose engine schedules the prefills among the decode steps as that engine does: the figures a
    closed form of the mean misses (a step that carries a prefill lengthens every running request's TPOT; the p99
    sees it). For ``pd``'s colocated side and ``recommend``'s batch row: judge the batch on the TPOT percentile."""
    from kvplan.calc.slo import judge, run_figures
    from kvplan.inputs import workload as wl

    n = requests if requests is not None else max(BATCH_REQUESTS_PER_USER * batch, 20)
    work = wl.build(requests=n, seed=seed, prompt=wl.parse_dist(f"fixed:{s.prompt_tokens}", "--prompt"),
                    output=wl.parse_dist(f"fixed:{s.decode_tokens}", "--decode"),
                    max_len=s.context_limit or wl.MAX_TOKENS, users=batch)
    run = simulate(s, work, SimOptions(max_batch=batch))     # one replica (instance): the batch is its own
    figures = run_figures(run, targets)
    gen, T = int(run.outputs.sum()), run.simulated_seconds
    return SimulatedBatch(Number(batch, derived("simulated: closed-loop users of one replica, one request each at "
                                                "a time", f"{batch:,} users, {n:,} requests")),
                          figures, judge(figures, targets),
                          Number(gen / T if T else None, derived("simulated: output tokens / simulated time",
                                                                 f"{gen:,} / {T:.6g} s")))


@dataclass(frozen=True)
class SimulatedRate:
    """One replica fed Poisson arrivals of equal requests at one rate, simulated, judged as a ``--sweep-rate`` point
    is (``sweep_verdict``'s order: overload, then the SLO model)."""

    rate: float
    figures: dict                 # the run's metrics and its SLO figures (typed)
    verdict: Verdict


def simulated_rate(s: Scenario, rate: float, targets: SloTargets, requests: int, seed: int = 0) -> SimulatedRate:
    """The scenario's replica (one instance) serving ``requests`` equal requests of its prompt + decode arriving as
    a Poisson stream at ``rate``/s, through the simulator and its engine's scheduler, judged by ``sweep_verdict``: a
    point of ``simulate --sweep-rate`` on that workload. For ``pd``'s colocated goodput (the highest rate that meets,
    the same judgement as the disaggregated side's Poisson prefill queue)."""
    from kvplan.calc import slo
    from kvplan.inputs import workload as wl

    work = wl.build(requests=requests, seed=seed, prompt=wl.parse_dist(f"fixed:{s.prompt_tokens}", "--prompt"),
                    output=wl.parse_dist(f"fixed:{s.decode_tokens}", "--decode"),
                    max_len=s.context_limit or wl.MAX_TOKENS, rate=rate)
    run = simulate(s, work, SimOptions())
    # the queue at the last arrival too: ``overloaded`` reads it (without it every rate passed as keeping up, and pd
    # called a rate goodput whose queue grew through the run, which the same --sweep-rate point calls overload)
    m = {**overload_values(overload_verdict(run)), "waiting_at_last_arrival": waiting_at_last_arrival(run),
         "requests_finished": Count(len(run.finish), derived("simulated: requests run to their last token",
                                                             f"{len(run.finish):,}")),
         **slo.run_figures(run, targets)}
    # sweep_verdict's order without its recompute cap: overload first, then the SLO model
    return SimulatedRate(rate, m, slo.Verdict(False, "overload") if overloaded(m) else slo.judge(m, targets))


LOAD_REQUESTS = (1000, 4000)   # Poisson requests in a launch's load run: 4 x its running requests, within these


@dataclass(frozen=True)
class SimulatedLoad:
    """A launched deployment (every DP replica, at most ``max_batch`` running each) fed Poisson arrivals of equal
    requests at ``rate``/s, simulated and judged as a ``--sweep-rate`` point is (``sweep_verdict``: overload, then
    the SLO model): the run ``kvplan simulate --rate R --requests N --max-batch B`` on that launch prints."""

    rate: Number                  # requests/s of the whole deployment
    requests: Count
    max_batch: Count
    figures: dict                 # the run's metrics and its SLO figures (typed, each "simulated: ...")
    verdict: Verdict
    seed: int = 0                 # the Poisson draw's seed (kvplan simulate --seed)
    draws: tuple = ()             # every draw judged with it, in seed order, itself among them ((): one run)

    def deciding(self, targets: SloTargets):
        """The figure that decides the verdict, typed (``slo.deciding``: the failed one with its number, or the one
        nearest its target when the run meets)."""
        from kvplan.calc.slo import deciding

        return deciding(self.figures, targets, self.verdict)


def load_requests(max_batch: int, replicas: int) -> int:
    """How many requests a load run draws: 4 x the running requests of every replica (the first wave fills the
    batch, the rest run in steady state), at least 1,000 (a p99 over 1,000 requests rests on its 10 slowest) and at
    most 4,000."""
    return min(max(4 * max_batch * replicas, LOAD_REQUESTS[0]), LOAD_REQUESTS[1])


def simulated_load(s: Scenario, rate: float, targets: SloTargets, max_batch: int, requests: int | None = None,
                   seed: int = 0, origin: str = "--rate") -> SimulatedLoad:
    """``s`` as its launch command starts it (``max_batch`` = its --max-num-seqs per replica) serving ``rate``
    requests/s of its prompt + decode as a Poisson stream, ``requests`` of them (``load_requests`` unless given),
    routed over its DP replicas (``plan_simulate``, what ``kvplan simulate --rate`` runs), judged by
    ``sweep_verdict`` (the queue keeps up, then TTFT and TPOT at the targets' percentiles and the attainment). For
    ``recommend``'s launch under a ``--target rate>=R`` and the ``--target`` search that emits it; ``origin``: who
    gave the rate."""
    from kvplan.inputs import workload as wl

    dp = s.parallelism.dp
    n = requests if requests is not None else load_requests(max_batch, dp)
    work = wl.build(requests=n, seed=seed, prompt=wl.parse_dist(f"fixed:{s.prompt_tokens}", "--prompt"),
                    output=wl.parse_dist(f"fixed:{s.decode_tokens}", "--decode"),
                    max_len=s.context_limit or wl.MAX_TOKENS, rate=rate)
    point = _sweep_point((s, work, SimOptions(max_batch=max_batch), targets))
    if isinstance(point, tuple):        # ("error", message, hint)
        raise KvplanError(point[1], point[2])
    return SimulatedLoad(
        Number(rate, given(origin)),
        Count(n, derived("Poisson requests simulated: 4 x --max-num-seqs x DP replicas, within 1,000 .. 4,000",
                         f"min(max(4 x {max_batch:,} x {dp:,}, 1,000), 4,000) = {n:,}"
                         if requests is None else f"{n:,} (given)")),
        Count(max_batch, derived("the launch's --max-num-seqs / --max-running-requests per replica",
                                 f"{max_batch:,}")),
        point, sweep_verdict(point, targets, None), seed)


# === the capacity witness (issue 21/19): the offered rate against the closed-form sustained rate ===================
# The closed form (``closed_form.ClosedFormReplica.sustained``, which pd's ``_Model`` inherits: B / (D x TPOT(B) +
# B x T_pf), one cost model, kvplan.calc.costs) is a
# fluid bound: a saturated replica whose pool holds B requests at their mean context finishes at most that many
# requests a second; a run fed faster piles requests up however short it is. It rounds: D decode steps where the
# engine runs D - 1 after the prefill's token (1/D), an integer batch (1/B), the step priced at the batch's mean
# context. T_pf is the cheapest a prompt can cost where prefills are passes of their own: the pass of as many prompts
# as the token budget holds (``prefill_passes``' least T(j) / j), since a replica that falls behind has a queue to
# fill its passes; a bound priced at the saturated packing B / D was beaten by the simulator itself (Qwen3-30B-A3B
# SGLang H100 500 + 100 at 38/s: bound 30.9/s at 1.61 prompts a pass, the run kept up at 37.8/s; at 16 a pass the
# bound is 44.1/s). Where chunks ride in decode steps (vLLM V1) T_pf is ``steps_prefill``'s. CAPACITY_MARGIN covers
# the rounding: with D and B at least CAPACITY_MIN_TOKENS and CAPACITY_MIN_BATCH (1/64 + 1/64 = 3.1%) the rest, 1.9%,
# for the mean-context term. The offered rate of n Poisson arrivals is itself a draw: its standard deviation is
# rate / sqrt(n - 1), so the witness takes 3 of them off it (``CAPACITY_SIGMAS``; a false call < 0.13%) before it
# compares: 100 arrivals at 7/s may come at 8.1/s by chance, which is no overload.
CAPACITY_MARGIN = 0.05
CAPACITY_SIGMAS = 3
CAPACITY_MIN_TOKENS = 64
CAPACITY_MIN_BATCH = 64
CAPACITY_SPREAD = 0.1      # equal-ish lengths: every prompt and every output within 10% of its mean
CAPACITY_SOURCE = ("kvplan's overload rule, capacity witness (issue 21): the pool-bound batch B = the KV pool at the "
                   "mean context p + d/2 (every request holds its KV, the contexts spread over p .. p + d), its step "
                   "and prefill from the one cost model (kvplan.calc.costs; pd's sustained rate, "
                   "kvplan.calc.closed_form.ClosedFormReplica.sustained, with the prefill at its cheapest packing); a "
                   "fluid bound, overloaded when the offered rate less 3 Poisson standard deviations (rate / "
                   "sqrt(n - 1)) is above it by more than 5%")


def closed_form_capacity(s: Scenario, r: SimRun, o: SimOptions | None = None) -> dict:
    """The capacity witness's figures for the run: the offered rate (requests - 1 over the arrival span) and the
    closed-form sustained rate of the scenario's replica at the workload's lengths (pd's ``sustained`` at B = the
    pool at the mean context p + d/2, the engine's max_num_seqs and ``max_batch``: the fluid bound; CAPACITY_SOURCE).
    It abstains (both None, with why) where the closed form does not price the run: a closed loop; lengths not
    equal-ish (a prompt or output more than CAPACITY_SPREAD from its mean: with varying lengths the batch's mean
    context and the prefill's cost are not those of the mean request, and no bound at the mean is proved); DP > 1
    (routing); speculative decoding, host offload, HiCache or a shared prefix (service the closed form does not
    price); D < CAPACITY_MIN_TOKENS or B < CAPACITY_MIN_BATCH (its rounding above the margin)."""
    import numpy as np

    o = o or SimOptions()
    w = r.workload
    prompts, outputs = np.asarray(w.prompts), np.asarray(w.outputs)
    n = len(prompts)
    times = np.asarray(w.arrivals if w.arrivals is not None else [], dtype=float)
    first, last = (float(times.min()), float(times.max())) if len(times) else (0.0, 0.0)
    why = ""
    if w.arrivals is None:
        why = "a closed loop: each user waits for its answer"
    elif n < 2 or last <= first:
        why = "no arrival span"
    elif any(len(x) == 0 or float(x.max()) > (1 + CAPACITY_SPREAD) * float(x.mean())
             or float(x.min()) < (1 - CAPACITY_SPREAD) * float(x.mean()) for x in (prompts, outputs)):
        why = "lengths vary by more than 10% of their mean: the closed form prices equal requests"
    elif s.parallelism.dp > 1:
        why = "DP > 1: the closed form prices one replica, the routing is the run's"
    elif o.speculative or o.dram_bytes_per_node or o.offload_threshold is not None or o.hicache is not None \
            or o.kv_offloading_bytes or s.shared_prefix_tokens or getattr(w, "blocks", None) is not None:
        why = ("speculative decoding, host offload, HiCache, a shared prefix or a trace's reused blocks: service the "
               "closed form does not price")
    p, d = (int(round(float(prompts.mean()))), int(round(float(outputs.mean())))) if n else (0, 0)
    if not why and d < CAPACITY_MIN_TOKENS:
        why = f"outputs of {d} tokens: the rounding (1/D) exceeds the margin below {CAPACITY_MIN_TOKENS}"
    rate = cap = None
    b, t_pf, tpot = 0, 0.0, 0.0
    if not why:
        from kvplan.calc.closed_form import ClosedFormReplica, PdOptions

        m = ClosedFormReplica(s, PdOptions())
        b = min(m.fit(p + d // 2), m.max_seqs, o.max_batch or m.max_seqs, len(m.batches))
        if b < CAPACITY_MIN_BATCH:
            why = f"a pool-bound batch of {b}: the rounding (1/B) exceeds the margin below {CAPACITY_MIN_BATCH}"
        else:
            cap, b, t_pf, tpot = m.sustained(p, d, b)
            if not (m.o.chunked and s.engine_adapter.mixes_prefill_chunks()):
                passes = m.prefill_passes(p)
                t_pf = min(t / j for j, t in enumerate(passes, start=1))
                cap = b / (d * tpot + b * t_pf)
            rate = (n - 1) / (last - first)
    offered = Number(rate, derived("the offered rate: (requests - 1) / (last arrival - first arrival)",
                                   f"({n:,} - 1) / ({last:.6g} - {first:.6g}) s = "
                                   f"{rate:.6g}/s" if rate is not None else f"abstains: {why}", CAPACITY_SOURCE))
    spread = rate * CAPACITY_SIGMAS / math.sqrt(n - 1) if rate is not None else None
    noise = Number(spread, derived("the offered rate's Poisson allowance: 3 x rate / sqrt(requests - 1)",
                                   f"3 x {rate:.6g} / sqrt({n:,} - 1) = {spread:.6g}/s"
                                   if rate is not None and spread is not None else f"abstains: {why}",
                                   CAPACITY_SOURCE))
    bound = Number(cap, derived(
        "the closed-form sustained rate B / (D x TPOT(B) + B x T_pf), B the pool-bound batch at the mean context, "
        "T_pf a prompt's prefill at its cheapest packing; overloaded when the offered rate less its Poisson allowance "
        "> it x (1 + 5%)",
        f"B = min(pool at {p:,} + {d // 2:,} tokens, max_num_seqs) = {b:,}; {b:,} / ({d:,} x {tpot * 1e3:.4g} ms + "
        f"{b:,} x {t_pf * 1e3:.4g} ms) = {cap:.6g}/s; {rate:.6g} - {spread:.6g} "
        f"{'>' if above_bound(rate, cap, spread) else '<='} {cap:.6g} x 1.05 = {cap * (1 + CAPACITY_MARGIN):.6g}"
        if cap is not None and rate is not None and spread is not None
        else f"abstains: {why}",
        CAPACITY_SOURCE))
    return {"offered_rate_requests_per_second": offered, "offered_rate_allowance_requests_per_second": noise,
            "closed_form_capacity_requests_per_second": bound}


def above_bound(rate: float | None, capacity: float | None, allowance: float | None = 0.0) -> bool:
    """The capacity witness's rule: the offered rate, less its Poisson ``allowance`` (CAPACITY_SIGMAS standard
    deviations), exceeds the closed-form sustained rate by more than CAPACITY_MARGIN (False when a figure is missing:
    the witness abstains)."""
    return (rate is not None and capacity is not None and allowance is not None
            and rate - allowance > capacity * (1 + CAPACITY_MARGIN))


def above_capacity(metrics: dict) -> bool:
    """The capacity witness on the run's metrics (``closed_form_capacity``'s figures)."""
    rate, cap = metrics.get("offered_rate_requests_per_second"), metrics.get("closed_form_capacity_requests_per_second")
    noise = metrics.get("offered_rate_allowance_requests_per_second")
    return (rate is not None and cap is not None and noise is not None
            and above_bound(rate.value, cap.value, noise.value))
