"""The records of a ``kvplan simulate`` run: its options (``SimOptions``), the replica's constants it used
(``Setup``) and everything it measured (``SimRun``). Below ``calc.simulate`` and ``calc.sim.metrics``, which both
read them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan.engines.scheduling import DEFAULT_POLICY, DEFAULT_VICTIM, DEFAULT_WATERMARK, POLICIES, VICTIMS
from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.inputs.workload import Workload
    from kvplan.scenario import Scenario


@dataclass(frozen=True)
class SimOptions:
    policy: str = DEFAULT_POLICY
    victim: str = DEFAULT_VICTIM
    max_batch: int | None = None          # None: the engine's max_num_seqs
    watermark: float = DEFAULT_WATERMARK
    dram_bytes_per_node: int | None = None
    offload_threshold: float | None = None  # proactive offload above this share of the pool's blocks (None: off)
    reference: bool = False               # one step at a time, each priced by StepModel.step (for the tests)
    # --speculative: (K draft tokens per verify step, the acceptance against context: ``kvplan.calc.tpot.Accept``
    # points) with the scenario's MTP layers drafting; each decode step is priced StepModel.speculative_step / the
    # batch's mean acceptance. (K, a0, slope), max(1, a0 - slope x context), reads as its points.
    speculative: tuple | None = None
    accept_source: str | None = None      # the published acceptance length's source (None: --accept given)
    hicache: Any = None                   # SGLang's HiCache (kvplan.engines.sglang_scheduler.HiCache; None: off)
    # vLLM's --async-scheduling / --no-async-scheduling (None: the pinned release's default, on from v0.14.0;
    # kvplan.engines.vllm.VllmEngine.async_scheduling)
    async_scheduling: bool | None = None
    # SGLang's --disable-overlap-schedule: True off, False on, None kvplan's default
    # (kvplan.engines.sglang_scheduler.overlap_schedule)
    disable_overlap_schedule: bool | None = None
    # SGLang's --scheduler-recv-interval: the scheduler polls for new requests every N iterations (None: 1, every one;
    # kvplan.engines.sglang_scheduler, "Polling")
    scheduler_recv_interval: int | None = None
    # vLLM's --kv-offloading-size in bytes (GiB x 2^30, the whole instance: all its TP x PP ranks): the native CPU
    # offloading connector (kvplan.engines.vllm_scheduler.CpuPool; None: off)
    kv_offloading_bytes: int | None = None
    # vLLM's --long-prefill-token-threshold (tokens; 0 or None: off, vLLM's default): each request's prefill chunk
    # capped at it (kvplan.engines.vllm_scheduler, "Long prefills"); --max-num-partial-prefills /
    # --max-long-partial-prefills: V0's, which V1 refuses unless 1 (kvplan.engines.vllm.VllmEngine.prefill_cap)
    long_prefill_token_threshold: int | None = None
    max_num_partial_prefills: int | None = None
    max_long_partial_prefills: int | None = None
    # called as on_event(state) at every event once the arrivals and swap-ins due have joined, and once at the end:
    # state is a dict of the live engine state (read-only: numpy arrays and tuples of request indexes), for the
    # tests' conservation checks (simulate.event_state names the keys)
    on_event: Callable[[dict], object] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise KvplanError(f"unknown preemption policy {self.policy!r}", "choose " + ", ".join(POLICIES))
        if self.victim not in VICTIMS:
            raise KvplanError(f"unknown victim rule {self.victim!r}", "choose " + ", ".join(VICTIMS))
        if self.max_batch is not None and not 1 <= self.max_batch <= 1_000_000:
            raise KvplanError(f"--max-batch {self.max_batch!r} is not in 1 .. 1,000,000", "give e.g. --max-batch 64")
        if self.offload_threshold is not None and not 0 < self.offload_threshold < 1:
            raise KvplanError(f"--offload-threshold {self.offload_threshold!r} is not in (0, 1)",
                              "give the pool occupancy to offload above, e.g. --offload-threshold 0.7")
        if self.speculative is not None:
            from kvplan.calc.tpot import normalize_accept

            k, *accept = self.speculative
            profile = normalize_accept(accept[0] if len(accept) == 1 else tuple(accept))
            object.__setattr__(self, "speculative", (k, profile))
            top = max(a for _, a in profile)
            if top > k + 1:
                raise KvplanError(f"--accept {top:g} is not in [1, {k + 1}], the tokens a verify step with {k} draft "
                                  "token(s) can accept", f"give --accept {k + 1} or less")
        if self.scheduler_recv_interval is not None and not 1 <= self.scheduler_recv_interval <= 1000:
            raise KvplanError(f"--scheduler-recv-interval {self.scheduler_recv_interval!r} is not in 1 .. 1,000 (above "
                              "1,000 a prefill batch, weight 1,000, no longer makes SGLang poll at once: not modelled)",
                              "give SGLang's poll interval in scheduler iterations, e.g. --scheduler-recv-interval 10")
        if not 0 <= self.watermark < 0.5:
            raise KvplanError(f"watermark {self.watermark!r} is not in [0, 0.5)", "give e.g. 0.01")


@dataclass(frozen=True)
class Setup:
    """The replica's constants the run used (plain numbers; the presenter types them)."""

    block_tokens: int
    block_bytes: int            # one block of every layer on the most loaded GPU
    pool_bytes: int
    total_blocks: int
    watermark_blocks: int
    max_batch: int
    max_batch_from_engine: bool
    chunk_tokens: int           # max_num_batched_tokens
    link_bytes_per_s: float
    dram_bytes_per_gpu: int | None
    base_step_s_at_1: float     # the step at batch 1 without cache reads (weights, comm, overhead)
    prefix_blocks: int = 0      # the shared prefix's one copy, outside total_blocks
    prefix_hit_tokens_each: int = 0


@dataclass(frozen=True)
class SimRun:
    """Everything a run measured: per-request arrays (numpy) and totals."""

    scenario: Scenario
    options: SimOptions
    workload: Workload
    setup: Setup
    prompts: Any
    outputs: Any
    arrival: Any
    admitted: Any            # first admission (start of the first prefill)
    first_token: Any
    finish: Any
    preemptions: Any
    swap_outs: Any
    swap_ins: Any
    recomputed: Any          # tokens re-prefilled
    peak_bytes: Any          # per GPU, at the request's longest cache
    simulated_seconds: float
    swapped_out_bytes: int
    swapped_in_bytes: int
    decode_steps: int
    events: int
    peak_blocks_used: int
    peak_dram_bytes: int
    peak_running: int
    prefill_seconds: float      # time the batch stalled for prefills and re-prefills
    swap_stall_seconds: float   # time the batch waited for swap-outs
    offloads: Any = None     # per request: proactive offloads (also counted in swap_outs)
    offload_threshold_blocks: int | None = None
    prefix_hit_tokens: Any = None  # per request: prompt tokens the prefix cache served (0: a miss)
    timeline: tuple = ()        # (times, blocks held, running, swapped out or leaving, DRAM bytes) at each event
    replicas: int = 1           # DP replicas that served requests (merged by ``merge_runs``; 1: one engine run)
    replica_of: Any = None   # per request: the replica it was routed to (None: one replica)
    scheduler: str = ""         # whose scheduler ran, from which release's rules ("": kvplan's rule book)
    scheduler_notes: tuple = ()     # what it says about its rules
    preemption_cause: str = "no free block"   # what every preemption of this scheduler is
    recompute_hit_tokens: Any = None   # per request: a resumed victim's tokens its own cached blocks served
    mixed_steps: int = 0        # steps that ran prefill chunks with the decode batch (vLLM V1)
    mixed_prefill_tokens: int = 0      # the prefill tokens those steps ran
    mixed_prefill: bool = False        # the scheduler ran prefills inside steps (vLLM V1), not alone
    hicache: Any = None         # SGLang's HiCache: what its host tier did (SglangScheduler.hicache_stats; None: off)
    offload: Any = None         # vLLM's CPU offloading connector: what it did (CpuPool.stats; None: off)
