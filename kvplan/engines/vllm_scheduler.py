"""vLLM V1's scheduler for ``kvplan simulate``: what ``--engine vllm`` (releases from v0.8.0, where V1 is the
default engine) decides each step, on the replica state of ``kvplan.engines.replica``. ``RuleBook``
(``kvplan.engines.scheduling``) stays the ``neutral`` engine's rules (the workload document's model) and a pinned
pre-V1 vLLM's (V0: watermark, swap space).

Read from vllm-project/vllm at commit 00024d31 (main after v0.11; the rules below hold in every V1 release but
where "By release" at the end says otherwise, as read in the wheels of v0.8.0 .. v0.33.0):
``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``, ``_preempt_request``), ``vllm/v1/core/kv_cache_manager.py``
(``get_computed_blocks``, ``allocate_slots``), ``vllm/v1/core/block_pool.py`` (``free_blocks``, ``get_new_blocks``)
and ``vllm/v1/core/kv_cache_utils.py`` (``FreeKVCacheBlockQueue``). The
rules, each with the code it follows:

* No admission watermark: ``allocate_slots`` returns None only when the blocks it needs exceed
  ``block_pool.get_num_free_blocks()`` (kv_cache_manager.py); the free count includes cached blocks that can be
  evicted.
* One step: the running requests first, in the order they were (re)admitted (``self.running``): a decoding
  request schedules one token; a request still in its prefill its next chunk, min(remaining tokens, token budget
  left) (scheduler.py, "First, schedule the RUNNING requests"); the token budget is ``max_num_batched_tokens``
  (``s.engine_adapter.batch_limits_for``). Without a chunk cap (``long_prefill_token_threshold`` 0, vLLM's
  default) at most one request is part-way through its prefill, the newest; with one, see "Long prefills" below.
* When a running request cannot get its blocks, the newest running request is preempted
  (``self.running.pop()``, scheduler.py), until it fits or the victim is the request itself; the victim's blocks
  are freed, its computed tokens reset to 0 and it goes to the FRONT of the waiting queue
  (``_preempt_request``: ``self.waiting.prepend_request``). A step that preempted schedules no waiting request
  (``if not preempted_reqs``) but runs the rest of the batch.
* Then the waiting queue in order while the budget lasts and fewer than ``max_num_seqs`` requests run: each
  takes min(its tokens less its prefix-cache hit, budget left) tokens and is admitted only when the blocks for its
  computed + scheduled tokens are free; the first that is not stops admission (``if new_blocks is None: break``).
  A request that cannot finish its prompt in the budget left runs a chunk now and the rest in later steps.
* A step runs its decode tokens and its prefill chunks in one forward pass, priced by
  ``kvplan.calc.costs.StepModel.mixed_step``; a request whose prompt (or recomputed cache) completes in a step gets
  its next token at the end of that step (``_update_after_schedule``/``update_from_output``: the chunk that reaches
  ``num_tokens`` samples a token).
* Recompute only: V1 has no swap space (``--policy swap`` is refused, ``simulation_scheduler`` in
  ``kvplan.engines.vllm``). A resumed request's tokens are its prompt and its output so far
  (``request.num_tokens``); it finds in the prefix cache what survived of its own blocks:
  ``KVCacheManager.free`` frees a request's blocks in reverse order (its tail first) to the TAIL of the free
  queue (``block_pool.free_blocks`` appends), and every allocation takes blocks from the queue's FRONT
  (``get_new_blocks``: ``free_block_queue.popleft``, evicting a cached block it takes). So the free queue is a
  FIFO of segments: a victim's blocks are evicted tail first as allocations reach them, and on resume its
  leading blocks not yet evicted are hits (``find_longest_cache_hit``: the longest run of cached blocks from the
  first), capped at ``num_tokens - 1`` tokens in whole blocks (``get_computed_blocks``: the last token is always
  computed for its logits); only full blocks are cached (``cache_full_blocks``). The hits are taken out of the
  free queue (``touch``); the rest of its tokens are re-prefilled in chunks like a prompt. Modelled for layer
  kinds whose every block boundary adds one block (full attention, MLA); with sliding windows or state layers a
  victim's own blocks are not reused (only the shared prefix is).
* A shared system prompt (``--shared-prefix``): its whole blocks are cached once, as in the rule book; the first
  prompt admitted computes them, every later one hits them (``allocate_slots`` caches a request's full blocks
  when it schedules them, so a request admitted after it in the same step hits them too).
* ``--victim`` other than ``newest`` is a what-if (vLLM without priorities always pops the newest): the victim is
  chosen by that rule among the running requests, the one part-way through its prefill included.

By release (``VllmEngine.simulation_scheduler`` passes the pinned release's rules; the sources are
``FULL_ISL_SOURCE`` and ``HASHLESS_FRONT_SOURCE`` in ``kvplan.engines.vllm``). Read unchanged through the v0.33.0
wheel: the newest victim (``self.running.pop()``), the victim to the waiting queue's front
(``waiting.prepend_request``), no admission in a step that preempted (``if not preempted_reqs``), the hit capped at
``num_tokens - 1`` (``get_computed_blocks``), a request's blocks freed tail first
(``free_blocks(reversed(...))``), allocations from the queue's front (``popleft_n``).

* From v0.19.0, admission reserves the whole input (``SchedulerConfig.scheduler_reserve_full_isl = True``;
  v0.19-v0.21 ``KVCacheManager.can_fit_full_sequence`` before ``allocate_slots``, from v0.22
  ``allocate_slots(full_sequence_must_fit=True)``, v0.33.0 kv_cache_manager.py l.531-548): a waiting or preempted
  request is admitted only when the blocks for all its tokens (``request.num_tokens``: its prompt and what it has
  generated, at most ``max_model_len``) are free, its hit blocks in the free queue counted among them (they leave
  it); before, only the blocks for its hit and first chunk. It applies to the waiting queue only: a running
  request's next chunk still takes what it needs and preempts for it. v0.18.0 has no such option.
* From v0.24.0, ``BlockPool.free_blocks`` puts the freed blocks that carry no block hash (a request's partial last
  block, a block taken for a step it did not run) at the FRONT of the free queue (``prepend_n``, in the order
  freed) and the hashed ones at its tail (``append_n``); v0.23.0 appends them all. So allocations take the
  blocks freed without a hash (a finished request's partial block included) before any cached block, and a
  victim's full blocks last longer in the queue. Modelled where a victim's blocks are reused (``reuse``); where
  they are not, the queue's order changes nothing kvplan reports.
* From v0.24.0 V1 has an admission watermark again (``SchedulerConfig.watermark``, ``--watermark``): with it,
  ``int(watermark x num_blocks)`` blocks stay free when a waiting or preempted request is admitted while any
  request runs. Its default is 0.0 (no watermark), which is what kvplan models in every V1 release; it is not an
  option of ``kvplan simulate`` for vLLM.
* Async scheduling (``--async-scheduling`` / ``--no-async-scheduling``, as vLLM's flag; on by default from v0.14.0,
  ``ASYNC_SINCE`` in ``kvplan.engines.vllm``; read in the v0.15.1 wheel, the rules the same in v0.12.0-v0.33.0). The
  engine core keeps two batches in flight (``vllm/v1/engine/core.py`` ``step_with_batch_queue``;
  ``max_concurrent_batches`` is 2 with async scheduling in ``vllm/v1/executor/multiproc_executor.py`` and
  ``uniproc_executor.py``): it schedules step N+1 and hands it to the workers, then blocks on step N and runs
  ``update_from_output`` on it, then takes the new requests from its input queue and schedules step N+2 while N+1
  runs. The scheduler counts step N's tokens as computed (``AsyncScheduler``'s output placeholders), so decoding
  and a prompt's chunks go on every step as before. What changes:

  - a step is decided when the step before it starts: a request that arrives while step N runs is first scheduled
    in step N+2 (one step later than with it off), and the requests that arrived by the start of step N are the
    ones step N+1 can admit;
  - a request whose last token comes out of step N is skipped in step N+1 (``schedule``: placeholders that reach
    ``max_tokens``, from v0.12.0), but it stays in ``self.running`` and holds its blocks until
    ``update_from_output(N)``, after step N+1 was decided: its max_num_seqs seat and its blocks are free for step N+2;
    its blocks then go to the free queue after step N+1's allocations (with the v0.24+ rule, its hashless blocks to
    the front after them);
  - a decision with nothing to run (every running request finishing, no seen request admitted) is an empty step:
    the GPU idles and the next decision is made at once when step N ends, with everything known;
  - the CPU work between steps (``schedule``, ``update_from_output``, the input preparation) overlaps the GPU; the
    step price is the same in both modes: kvplan's per-step overhead was fitted on vLLM v0.19.1 ITLs, taken with
    async scheduling on (its default there), and no published figure of the CPU gap with it off was found, so
    ``--no-async-scheduling`` changes only when requests are seen and freed, not the step's price.

  Modelled at the events: the first call of ``step`` after a step ends decides with the arrivals up to that step's
  start (``cut``) and with the requests that finished at its end taken back (``_late_out``), and frees them after
  its allocations (``_late_in``); with nothing new it lets the event loop's closed-form runs go on, in which
  nothing arrives or finishes before their last step.
* Speculative decoding (``--speculative`` K, MTP drafting; ``SPEC_SLOTS_SOURCE`` in ``kvplan.engines.vllm``): a
  running request's step schedules its next token and its K draft tokens (``num_tokens_with_spec``), and
  ``allocate_slots`` takes blocks for them and ``num_lookahead_tokens`` more, K where ``use_eagle()`` (MTP from
  v0.9.0): a decoding request holds the blocks of its context + 2K slots (+ K before v0.9.0), so its block
  boundaries, and the preemption they cause, come 2K tokens early. kvplan counts the slots in the block table
  (``VllmEngine.speculative_slots``; the replica's ``shift`` moves each request's block phase by them) from the
  request's admission on: vLLM's admission check and a waiting request's first chunk take no lookahead (v0.19.0
  ``effective_lookahead_tokens`` is 0 while ``num_computed_tokens`` is 0; ``can_fit_full_sequence`` counts
  ``request.num_tokens``), a running chunk K, so kvplan admits at most ceil(2K / block) blocks later than vLLM;
  nor does it cap the slots at ``max_model_len`` (``num_tokens_need_slot = min(..., max_model_len)``). With async
  scheduling ``num_new_tokens`` also counts the step before's ``num_output_placeholders``; how many slots that
  adds past the verified tokens was not worked out: kvplan counts 2K in both modes.
* Long prefills (``--long-prefill-token-threshold`` T, vLLM's flag; 0, the default in every release, is off;
  ``LONG_PREFILL_*`` in ``kvplan.engines.vllm``, read in the v0.8.0, v0.8.5, v0.26.0, v0.27.0 and v0.28.0-v0.33.0
  wheels). From v0.8.5 ``schedule`` caps a request's chunk at T (``if 0 < threshold < num_new_tokens``) in the
  running loop and in the waiting loop, before the budget's min: min(its tokens left, T, budget left). So several
  requests can be part-way through their prefill at once, each at the place in ``self.running`` it was admitted at,
  and a step walks the running requests in that order (``_step_capped``): a decoder one token, a request part-way
  its next chunk, each taking its blocks or popping the newest (the last in that order: a decoder or a request
  part-way) until they fit or it is itself the victim; then the waiting queue, each chunk capped, every request
  part-way holding a seat. From v0.31.0 the cap holds only when the running and waiting requests number more than
  one (``num_eligible_reqs > 1``, counted at the start of ``schedule``: the finished requests async scheduling still
  holds among the running, the waiting requests the decision sees); v0.30.0 caps a request alone too.
  ``long_prefill_token_threshold_adaptive`` (v0.31.0+, off by default) is not modelled. ``max_num_partial_prefills``
  / ``max_long_partial_prefills`` are V0's: other than 1 V1 falls back to V0 (through v0.11) or refuses
  (``_check_feature_supported``), so their 4%-of-``max_model_len`` default threshold never applies in V1; v0.27.0
  removed them. Refused with the cap: ``--kv-offloading-size``, a ``--victim`` what-if, and a cap of K or less with
  ``--speculative`` K (vLLM caps a decoder's 1 + K tokens too; kvplan counts a decoder as one token of the budget).

KV offloading (``--kv-offloading-size GiB``, the native CPU offloading connector; working from v0.14.0,
``OFFLOAD_SINCE`` in ``kvplan.engines.vllm``). Read in the v0.19.0 wheel (2a69949bd):
``vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py`` (``OffloadingConnectorScheduler``),
``.../offloading/worker.py``, ``vllm/v1/kv_offload/cpu/manager.py``, ``cpu/policies/lru.py``, ``cpu/spec.py`` and the
waiting loop of ``vllm/v1/core/sched/scheduler.py``; v0.14.0 has the same rules in ``offloading_connector.py`` and
``kv_offload/lru_manager.py``. ``CpuPool`` holds them; with offloading on every step is decided by ``step`` (the
stores are per step), so no closed-form decode runs are taken.

* The CPU pool: ``cpu_bytes_to_use // (page bytes x KV tensors x world_size)`` blocks (``CPUOffloadingSpec``):
  --kv-offloading-size x 2^30 over one block of every layer per GPU x TP x PP (the size is the whole instance's;
  each DP replica has its own). The shared prefix's blocks are one copy taken off it (every store touches them:
  they never become the least recently used).
* Store, write-through: after each step is decided, every scheduled request's full blocks of its computed +
  scheduled tokens not stored yet (``_get_reqs_to_store``, ``_next_stored_block_idx``), in ``yield_req_data``'s
  order (the requests first scheduled, then the running ones). ``prepare_store`` skips blocks already on the host
  and evicts for room the least recently used blocks that are ready and not being read; when too few are, nothing
  is stored and the request tries again at its next step. Then all its stored blocks are touched
  (``LRUCachePolicy.touch`` moves them to the end in reverse order: its first block is the most recent, so a group
  is evicted tail first).
* Timing: the worker defers each store to the start of the next step (``prepare_store_kv``: "so that offloading
  starts AFTER transfers related to token sampling") and copies it asynchronously: kvplan queues a step's stored
  blocks as one copy on the device-to-host direction of the host link at the step's end, priced
  ``costs.swap_seconds`` per block (``calc.simulate._link_costs``), off the critical path. A preemption flushes the
  victim's stores (``reqs_to_flush``; ``handle_preemptions`` waits for its store jobs before the step runs): the
  step waits until they have landed (counted as swap stall).
* Ready: a stored block reads as not ready (``BlockStatus.ref_cnt = -1``: neither loadable nor evictable) until
  ``complete_store``, which the scheduler calls for a preempted request at once (``build_connector_meta``) and for a
  finished one when the worker reports it (``finished_sending``); a running request's stores stay pinned.
* Load instead of recompute: a waiting request looked at by the waiting loop (``request.num_computed_tokens == 0``)
  is looked up after its GPU prefix hit (``get_num_new_matched_tokens``: its full blocks touched, then the ready
  blocks in a row from the hit's end, at least one). With a hit the scheduler allocates the blocks of the hit and the
  loaded tokens now (under the whole-input check from v0.19.0), takes no token budget and no seat, parks it as
  ``WAITING_FOR_REMOTE_KVS`` and goes on to the next request. The load starts on the host-to-device direction at
  once (``start_kv_transfers``), pins the blocks it reads, and is seen by the first decision made after it landed
  (``finished_recving``); then FCFS serves those requests first (``skipped_waiting``), each as a waiting request
  whose tokens past the loaded ones are scheduled (a load of every token recomputes the last:
  ``_update_waiting_for_remote_kv``). A request's stores go on after the loaded blocks.
* A loading victim holds no place in ``running`` until its load lands, so requests admitted in the meantime
  (in the same pass of the waiting loop, or while the load is in flight) come before it, and FCFS's victim, the last
  in ``running`` (``self.running.pop()``), is then often an older request: with offloading on, preemptions fall on
  fewer, older requests, trading recompute for queue waits and a longer TPOT tail (v0.19.0
  ``vllm/v1/core/sched/scheduler.py``: the FCFS pop, the ``WAITING_FOR_REMOTE_KVS`` skip and the append of the
  younger request in the same step).

Differences kvplan keeps (not modelled): a finished request's GPU blocks are freed at its finish (vLLM holds them
until the worker reports its stores done, at least one step later); each request's store is one job in vLLM, one
copy per step here; a copy is one per block (``swap_seconds``' copy overhead), not per layer; ``store_threshold``
(v0.19.0 ``reuse_manager.py``, default off) and the ``arc`` policy; sliding-window and state layers (refused), and
speculative decoding's slots with offloading (refused). New prompts find nothing on the host: kvplan's requests
share only the shared prefix, which the GPU's prefix cache always holds.
"""

from __future__ import annotations

import bisect
import heapq
import math
from typing import TYPE_CHECKING

from kvplan.engines.scheduling import Scheduler

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    from kvplan.engines.replica import ReplicaState

SOURCE_COMMIT = "00024d31"
SOURCE = (f"vllm-project/vllm @{SOURCE_COMMIT}: vllm/v1/core/sched/scheduler.py (Scheduler.schedule, "
          "_preempt_request), vllm/v1/core/kv_cache_manager.py, vllm/v1/core/block_pool.py")
NAME = "vLLM V1 scheduler"


def pick_victim(rule: str, caches: list[int]) -> int:
    """The victim's place among requests in batch order with these cached tokens: ``newest`` the last,
    ``fewest-tokens`` the smallest cache (the newest of equals), ``longest-first-protected`` the newest of those
    outside the longer half by cache (the older of equals protected first)."""
    b = len(caches)
    if rule == "newest":
        return b - 1
    if rule == "fewest-tokens":
        best = 0
        for j, c in enumerate(caches):
            if c <= caches[best]:
                best = j
        return best
    protected = set(sorted(range(b), key=lambda j: (-caches[j], j))[: b // 2])
    return max(j for j in range(b) if j not in protected)


class V1Scheduler(Scheduler):
    """The module docstring's rules. ``budget``: max_num_batched_tokens; ``max_seqs``: max_num_seqs (or
    --max-batch); ``reuse``: a victim's surviving blocks are prefix-cache hits (every block boundary adds one
    block); ``prefix_blocks``: the shared prefix's whole blocks (H / block)."""

    steps_itself = True
    describe = (f"vLLM V1 scheduler (vllm-project/vllm @{SOURCE_COMMIT} vllm/v1/core/sched/scheduler.py: prefill "
                "chunks mixed into decode steps, no watermark, recompute reusing the victim's cached blocks)")
    rules: tuple[str, ...] = ()              # the release's rules that differ from the commit read, with sources

    def replica_limits(self) -> dict[str, int]:
        """No admission watermark in V1 (allocate_slots takes any free block)."""
        return {"watermark_blocks": 0}

    def __init__(self, victim: str, max_seqs: int, budget: int, reuse: bool, prefix_blocks: int, *,
                 full_isl: bool = False, hashless_front: bool = False, async_scheduling: bool = False,
                 async_why: str = "", spec_slots: int = 0, spec_why: str = "",
                 offload_bytes: int | None = None, offload_why: str = "", prefill_cap: int = 0,
                 cap_alone: bool = False, cap_why: str = "") -> None:
        self.victim_rule, self.newest = victim, victim == "newest"
        # async scheduling (module docstring, "Async scheduling"): each step decided when the one before it started
        self.asyn = async_scheduling
        self.cut = math.inf                  # the step being decided sees the arrivals up to this time
        self.call_at = math.inf              # the time of the last call of ``step``
        self.late: list[tuple[int, int, int]] = []   # finished since: (request, blocks, cached tokens), not yet freed
        self.late_blocks = 0                 # their blocks
        # the pinned release's rules (module docstring, "By release"): admission needs the blocks of all the
        # request's tokens (v0.19+); freed blocks without a hash go to the free queue's front (v0.24+)
        self.full_isl, self.front = full_isl, hashless_front and reuse
        self.rules = (
            ("admission needs the blocks of all the request's tokens (scheduler_reserve_full_isl, v0.19+)"
             if full_isl else "admission needs the first chunk's blocks (before v0.19: no scheduler_reserve_full_isl)"),
            ("freed blocks without a hash go to the free queue's front (block_pool.free_blocks, v0.24+)"
             if hashless_front else "every freed block goes to the free queue's tail (block_pool.free_blocks, "
             "before v0.24)"),
            ("async scheduling " + (async_why or ("on" if async_scheduling else "off"))
             + (": each step decided while the one before it runs (an arrival first scheduled a step later, a "
                "finished request's blocks and seat freed a step later)" if async_scheduling else "")),
            *((f"speculative decoding: each running request holds the blocks of its tokens + {spec_slots} slots: "
               f"{spec_why}; kvplan reserves them from admission on",) if spec_slots else ()),
            *((f"native CPU offloading, {offload_why}: full blocks written through to an LRU CPU pool, a waiting "
               "victim loads what is left of its blocks there instead of recomputing them (offloading_connector "
               "OffloadingConnectorScheduler, kv_offload/cpu)",) if offload_bytes is not None else ()),
            *((f"long prefills: {cap_why}",) if prefill_cap else ()))
        # --long-prefill-token-threshold (module docstring, "Long prefills"): each chunk at most ``cap`` tokens (0:
        # off), from v0.31 only while more than one request runs or waits (``cap_alone``); then ``parts`` holds the
        # requests part-way through their prefill, in the order they were admitted (their places ``r.seq``)
        self.cap, self.cap_alone = prefill_cap, cap_alone
        self.parts: list[int] = []
        # vLLM's CPU offloading connector (module docstring, "KV offloading"): the pool's size in bytes for the whole
        # instance; ``bind_offload`` turns it into blocks and gives the link's prices
        self.offload_bytes = offload_bytes
        self.off: CpuPool | None = None
        self.spec_slots = spec_slots         # (the replica's block table and phases count them: ``r.shift``)
        # the output's one-line name of the rules (``engine_rules``)
        self.short = ("mixed prefill chunks, recompute reusing cached blocks, "
                      + ("whole-input" if full_isl else "first-chunk") + " admission"
                      + (", hashless blocks first" if hashless_front else "")
                      + (", async scheduling" if async_scheduling else "")
                      + (f", speculative slots: {spec_slots} a request" if spec_slots else "")
                      + (", CPU offloading" if offload_bytes is not None else "")
                      + (f", prefill chunks capped at {prefill_cap:,} tokens" if prefill_cap else ""))
        self.describe = (f"vLLM V1 scheduler (vllm-project/vllm @{SOURCE_COMMIT} vllm/v1/core/sched/scheduler.py: "
                         "prefill chunks mixed into decode steps, no watermark, recompute reusing the victim's "
                         "cached blocks; by release: " + "; ".join(self.rules) + ")")
        self.reads_contexts = False          # the victim rules read caches from the state's Python lists
        self.max_seqs, self.budget, self.reuse, self.hb = max_seqs, budget, reuse, prefix_blocks
        self.partial = -1                    # the request part-way through its prefill (the newest), or -1
        self.computed: dict[int, int] = {}   # its computed tokens
        self.redo: dict[int, int] = {}       # a victim's tokens computed before (what its resume computes again)
        # the free queue as labels: every block freed gets the next label (the pool's own blocks 0 .. total - 1
        # first), allocations take the lowest labels still there; survivors taken back on a resume leave gaps
        # (with ``front``: a freed block without a hash goes before them all, a stack of ``lifo`` blocks that
        # allocations take first, and gets no label: the labels are r.freed - fronted)
        self.head = 0                        # the lowest label still in the queue (past the gaps)
        self.seen = 0                        # blocks allocated so far, as last brought up to date
        self.removed = 0                     # blocks taken back out of the middle (hits on resume)
        self.lifo = 0                        # blocks without a hash at the queue's front (``front`` only)
        self.fronted = 0                     # blocks ever put there
        self.gaps: list[tuple[int, int]] = []     # (first label, past the last) of ranges taken out, a heap
        self.seg: dict[int, tuple[int, int, int]] = {}   # a waiting victim: (first label, blocks, full own blocks)
        self.need1: Callable[[], int] = lambda: 0        # the blocks the running batch's next decode step adds
        # a step's price with its chunks, and without them
        self.mixed: Callable[[list[tuple[int, int]]], tuple[float, float]] = lambda chunks: (0.0, 0.0)
        self._no_room: tuple[int, int, int, int, int] | None = None   # where the waiting head last did not fit
        self.r: ReplicaState | None = None   # the replica, once a finish must be heard of (``front``)
        self.fresh: list[int] = []           # (offloading) the requests first scheduled in this step

    # --- the free queue -----------------------------------------------------------------------------------------
    def _advance(self, r: ReplicaState) -> None:
        """Bring the queue's front up to the allocations made so far (freed - removed - free; a release changes
        freed and free alike): the blocks at the front without a hash first, then the labels."""
        target = r.freed - self.removed - r.free
        k = target - self.seen
        if not k:                             # nothing allocated since (most calls): the front is where it was
            return
        self.seen = target
        if self.lifo:
            t = min(k, self.lifo)
            self.lifo -= t
            k -= t
        gaps = self.gaps
        while k > 0:
            if gaps and gaps[0][0] < self.head + k:
                start, end = heapq.heappop(gaps)
                k -= start - self.head
                self.head = end
            else:
                self.head += k
                k = 0

    def _free(self, r: ReplicaState, i: int, cached: int) -> tuple[int, int]:
        """Request i's blocks are about to be freed with ``cached`` tokens computed (before ``r.release``): its
        full blocks of those tokens keep their hash, the rest (its partial last block, blocks past its computed
        tokens) have none. With ``front`` those go to the queue's front (after the allocations so far took what
        was there). Returns the first label its blocks get and how many get one."""
        n = r.held[i]
        if not self.front:
            return r.freed, n
        full = min(n, max(0, cached // r.block - self.hb))
        self._advance(r)
        start = r.freed - self.fronted
        self.lifo += n - full
        self.fronted += n - full
        return start, full

    def _finished(self, i: int) -> None:
        """A finished request's blocks (``ReplicaState.on_finish``, before they are freed): the hashless to the
        front (``front`` only). With async scheduling the next step is decided before they are freed: noted
        (``late``), and ``_late_out`` takes them back until that decision is made."""
        r = self.r
        assert r is not None
        off = self.off
        if off is not None:                  # its stored blocks ready on the host (nothing looks them up again)
            off.ready(i)
            off.nxt.pop(i, None)
            off.done.pop(i, None)
        if self.asyn:
            n = r.held[i]
            self.late.append((i, n, r.Pl[i] + r.g[i] - 1))
            self.late_blocks += n
            return
        self._free(r, i, r.Pl[i] + r.g[i] - 1)

    def _late_out(self, r: ReplicaState) -> None:
        """Async scheduling: the requests that finished at the end of the step before still hold their blocks
        while the next step is decided (update_from_output frees them after schedule): take them out of the free
        count again (``ReplicaState.release`` counted them already)."""
        r.free -= self.late_blocks
        r.freed -= self.late_blocks

    def _late_in(self, r: ReplicaState) -> None:
        """... and free them once the decision has taken its blocks, in the order they finished (the hashless to
        the queue's front with ``front``, as ``_free``)."""
        if not self.late:
            return
        for _i, n, cached in self.late:
            if self.front:
                full = min(n, max(0, cached // r.block - self.hb))
                self._advance(r)
                self.lifo += n - full
                self.fronted += n - full
            r.free += n
            r.freed += n
        self.late.clear()
        self.late_blocks = 0

    def _out(self, r: ReplicaState, i: int, cached: int) -> None:
        """Victim i out of the batch (the caller took it out of ``running``): its blocks to the queue's tail, tail
        block first, its full blocks of ``cached`` tokens still hashed; to the front of the waiting queue."""
        r.tally.preemptions[i] += 1
        off = self.off
        if off is not None:                  # its stores flushed: ready on the host once they land
            off.ready(i)
            off.flush_at = max(off.flush_at, off.done.get(i, 0.0))
        start, n = self._free(r, i, cached)
        if self.reuse:
            self.seg[i] = (start, n, cached // r.block - self.hb)
        self.redo[i] = max(self.redo.get(i, 0), cached)
        r.release(i)
        r.waiting.appendleft(i)

    def _hit(self, r: ReplicaState, i: int, pops: int = 0) -> int:
        """Request i's prefix-cache hit in tokens, now or after ``pops`` more blocks are taken from the queue's
        front (a step's decode blocks, taken before the waiting queue is looked at): the shared prefix's blocks
        (once cached) and, for a victim, its leading own blocks not yet evicted; whole blocks, at most its tokens
        less one."""
        block = r.block
        cap = (r.Pl[i] + r.g[i] - 1) // block
        own = 0
        seg = self.seg.get(i)
        if seg is not None:
            self._advance(r)
            front = self.head
            pops -= min(pops, self.lifo)      # the blocks without a hash go first
            if pops:                          # where the front would be, past the gaps (nothing is changed)
                for gs, ge in sorted(self.gaps):
                    if gs >= front + pops:
                        break
                    pops -= gs - front
                    front = ge
                front += pops
            start, n, full = seg
            own = max(0, min(start + n - max(front, start), full))
        hit = (self.hb + own if r.prefix_cached else own) if self.hb else own
        return (hit if hit < cap else cap) * block

    def _take_back(self, r: ReplicaState, i: int, hit: int) -> None:
        """A resumed victim's hit blocks leave the middle of the free queue (the labels of its leading blocks)."""
        start, n, _ = self.seg.pop(i)
        own = hit // r.block - (self.hb if r.prefix_cached else 0)
        if own > 0:
            self._advance(r)
            heapq.heappush(self.gaps, (start + n - own, start + n))
            self.removed += own

    # --- the Scheduler interface ----------------------------------------------------------------------------------
    def admit(self, r: ReplicaState) -> bool:
        return False                          # admission is part of a step (``step``)

    def room_for_run(self, r: ReplicaState, need: int) -> int | None:
        return r.free

    def _caches(self, r: ReplicaState) -> list[int]:
        return [r.xo_l[i] + r.steps - 1 for i in r.running]

    def preempt(self, r: ReplicaState, need: int) -> None:
        """A decode step whose blocks are not free: victims out (the newest, or by the what-if rule) until the
        rest fits; the step runs without admissions."""
        if not self.newest:
            while need > r.free:
                need -= self._pop(r, self._victim(r, -1))
            r.preempted = True
            return
        # the newest (``_victim``) out, ``_pop``, ``ReplicaState.leave``, ``_out``, ``_free`` and
        # ``ReplicaState.release`` written out (the event loop's one call per preemption): the same state, in order
        running, btl, Pl, g, held, xo_l, phase = r.running, r.btl, r.Pl, r.g, r.held, r.xo_l, r.phase
        block, shift, steps, in_run = r.block, r.shift, r.steps, r.in_run
        preemptions, waiting, seg, redo, hb = r.tally.preemptions, r.waiting, self.seg, self.redo, self.hb
        front, reuse = self.front, self.reuse
        while need > r.free:
            i = running.pop()
            v = xo_l[i]                        # leave: its tokens and blocks now
            r.sum_xo -= v
            phase[(-v - shift) % block] -= 1
            in_run[i] = False
            cache = v + steps - 1              # its cached tokens (prompt + generated - 1)
            g[i] = cache + 1 - Pl[i]
            n = btl[cache]                     # its blocks
            preemptions[i] += 1
            if front:                          # _free: its hashless blocks to the queue's front
                full = min(n, max(0, cache // block - hb))
                self._advance(r)
                start = r.freed - self.fronted
                self.lifo += n - full
                self.fronted += n - full
                if reuse:
                    seg[i] = (start, full, cache // block - hb)
            elif reuse:
                seg[i] = (r.freed, n, cache // block - hb)
            done = redo.get(i, 0)
            redo[i] = cache if cache > done else done
            r.free += n                        # release
            r.freed += n
            held[i] = 0
            waiting.appendleft(i)              # to the waiting queue's front
            need -= btl[cache + 1] - n
        r.preempted = True

    def _cap_now(self, r: ReplicaState, late: int) -> int:
        """The chunk cap of the decision being made (0: none): ``cap``, or from v0.31 (``cap_alone``) 0 while at most
        one request runs or waits (scheduler.py ``num_eligible_reqs``: the running ones, those part-way through
        their prefill and, with async scheduling, the ``late`` ones that finished at the step before among them,
        and the waiting ones seen; the waiting queue is in arrival order past its victims, who were all seen)."""
        if not self.cap_alone:
            return self.cap
        n = len(r.running) + len(self.parts) + late
        if n < 2:
            w, arrival, cut = r.waiting, r.tally.arrival, self.cut
            for k in range(min(len(w), 2)):
                if arrival[w[k]] <= cut:
                    n += 1
        return self.cap if n > 1 else 0

    def _head(self, r: ReplicaState, left: int, room: int, pops: int = 0) -> tuple[int, int, int] | None:
        """The waiting queue's head as a step with ``left`` of its budget would take it, after ``pops`` more blocks
        leave the queue's front: (request, hit tokens, tokens scheduled); None when its blocks (``_need``) are not
        among the ``room`` free ones."""
        i = r.waiting[0]
        # whole-input admission (``full_isl``): those are the blocks of all its tokens, whatever its hit, so a head
        # that does not fit is turned away before its hit is looked up (``_hit``'s one change, the free queue's front
        # brought up to date, is made first by whatever changes the queue next)
        if self.full_isl:
            if r.btl[r.Pl[i] + r.g[i]] > room:
                return None
        hit = self._hit(r, i, pops)
        rest = r.Pl[i] + r.g[i] - hit
        if self.cap:                          # (--long-prefill-token-threshold: the cap this decision applies)
            t = self._cap_now(r, len(self.late))
            if 0 < t < rest:
                rest = t
        head = i, hit, min(rest, left)
        return head if self._need(r, head) <= room else None

    def _need(self, r: ReplicaState, head: tuple[int, int, int]) -> int:
        """The free blocks the waiting head needs to be admitted: for its hit and first chunk, or (``full_isl``)
        for all its tokens, its hit blocks among them (they are free blocks it takes out of the queue)."""
        i, hit, c = head
        return r.btl[r.Pl[i] + r.g[i]] if self.full_isl else r.btl[hit + c]

    def may_admit_soon(self, r: ReplicaState, pops: int) -> bool:
        """Right after a preemption (no admission in this step): could the next step admit the waiting head, once
        this step's and its own decode blocks (``pops``) have left the queue's front? That is the check the next
        step makes. If it cannot, no later step of the run can either: each block a decode step takes is one
        fewer free, and takes at most one of the head's cached blocks (one more it needs), so free - need, both
        after the step's own blocks, never grows while only decode steps run."""
        b = len(r.running)
        if not r.waiting or b >= self.max_seqs or b >= self.budget:
            return False
        # whole-input admission (``full_isl``): never, with nothing to look up. The head is the last victim v; before
        # it left, the step's blocks N exceeded the free F; it frees its h blocks and takes its d of N off, and needs
        # btl[its tokens] = h + d: F + h - (N - d) - next >= h + d would be F - N - next >= 0, false
        if self.full_isl or self._head(r, self.budget - b, r.free - pops, pops) is None:
            # as ``step`` records a head that does not fit: the same head, batch, freed and taken-back blocks at
            # no more than the free blocks after the next step (a run of two or more steps) still cannot fit
            self._no_room = (r.waiting[0], b, r.freed, self.removed, r.free - pops)
            return False
        return True

    def _victim(self, r: ReplicaState, part: int) -> int:
        """The victim's place in ``running`` (``len(running)``: the request part-way through its prefill, the
        newest, which holds ``part`` computed tokens; -1 when there is none)."""
        if self.newest:
            return len(r.running) - (part < 0)
        return pick_victim(self.victim_rule, self._caches(r) + ([part] if part >= 0 else []))

    def _pop(self, r: ReplicaState, j: int, taken: bool = False) -> int:
        """Decoding request at place j out of the batch, preempted; returns the blocks its step would have added.
        ``taken``: the step's blocks were already taken for it, and go back to the free queue with its own."""
        i = r.running.pop(j)
        r.leave(i)
        cache = r.Pl[i] + r.g[i] - 1
        if taken:
            r.held[i] = r.btl[cache + 1]
        self._out(r, i, cache)
        return r.btl[cache + 1] - r.btl[cache]

    def step(self, r: ReplicaState) -> bool:
        """One step with prefill chunks, or False to let the event loop run decode steps."""
        if self.asyn:
            # the step is decided when the one before it started (the last call: every step or run of steps starts
            # at one): the arrivals up to then are seen. After a call that ran nothing (an empty decision, below) the
            # next is made at once, at the same time, seeing everything; after the GPU idled, the decision sees no
            # request (all arrived since), runs nothing, and so is made again at once
            self.cut, self.call_at = self.call_at, r.now
        if (self.front or self.asyn) and r.on_finish is None:   # hear of each finish before its blocks are freed
            self.r = r
            r.on_finish = self._finished
        if self.off is not None and r.on_finish is None:     # (offloading: a finish makes its stores ready)
            self.r = r
            r.on_finish = self._finished
        if self.cap:
            return self._step_capped(r)
        # the step carries a prefill chunk: one is part-way, or the waiting queue's head gets in; with async
        # scheduling also a step decided while requests that finished at the end of the step before still hold
        # their blocks and seats (``late``). (A head that arrived during the step before gets a step of its own here
        # too when it fits, which runs without it: it is not seen yet.) Otherwise False: the event loop's run
        # With offloading every step runs here (its stores are per step).
        if self.partial < 0 and not self.late and not (self.off is not None and (r.running or self.off.loading)):
            waiting = r.waiting
            if not waiting or r.preempted:
                return False
            b = len(r.running)
            if b >= self.max_seqs or b >= self.budget:
                return False
            # the head did not fit before and nothing it needs has changed since: the same head and batch, no
            # block freed or taken back, no more blocks free (pops can shrink a victim's hit, and with it the blocks
            # a chunk cut by the budget needs, but by one block for each block they take: free - need, both after
            # the step's decode blocks, never grows; see may_admit_soon)
            head, freed, free = waiting[0], r.freed, r.free
            nr = self._no_room
            if (nr is not None and nr[0] == head and nr[1] == b and nr[2] == freed and nr[3] == self.removed
                    and free <= nr[4]):
                return False
            need1 = self.need1() if b else 0
            if need1 > free:
                return False
            first = self._head(r, self.budget - b, free - need1, need1)
            if first is None:
                self._no_room = (head, b, freed, self.removed, free)
                return False
        else:
            first = None
        running, tally, btl, computed = r.running, r.tally, r.btl, self.computed
        late = len(self.late)                  # seats still held by requests finished at the step before
        if self.off is not None:               # the loads this decision sees landed: unpinned on the host
            self.fresh.clear()
            seen = min(self.cut, r.now)
            for x in self.off.loading:
                if x[1] <= seen:
                    self.off.landed(x[0])
        if late:
            self._late_out(r)
        need1 = self.need1() if running else 0
        preempted = False
        p = self.partial
        while need1 > r.free:                  # the decoders first: victims out until their blocks fit
            preempted = True
            j = self._victim(r, computed[p] if p >= 0 else -1)
            if j == len(running):              # the request part-way through its prefill
                self._out(r, p, computed[p])
                self.partial = p = -1
            else:
                need1 -= self._pop(r, j)
        r.free -= need1                        # the decoders' blocks, taken from the queue first
        left = self.budget - len(running)
        chunks: list[tuple[int, int, int]] = []   # (request, first token, past the last) computed this step
        if p >= 0 and left > 0:                # the part-way prefill's next chunk
            have = computed[p]
            c = min(r.Pl[p] + r.g[p] - have, left)
            while btl[have + c] - r.held[p] > r.free:
                preempted = True
                j = self._victim(r, have)
                if j == len(running):
                    self._out(r, p, have)
                    self.partial = p = -1
                    break
                self._pop(r, j, taken=True)    # (the chunk keeps its size, as allocate_slots is retried with it)
            if p >= 0:
                r.free -= btl[have + c] - r.held[p]
                r.held[p] = btl[have + c]
                chunks.append((p, have, have + c))
                left -= c
                computed[p] = have + c
                if have + c == r.Pl[p] + r.g[p]:
                    self.partial = -1
        if not preempted:                      # then the waiting queue, while the budget and the batch allow
            self._admit(r, left, chunks, late, first)
        used = r.total_blocks - r.free
        if used > tally.peak_used:
            tally.peak_used = used
        self._late_in(r)                       # the finished requests' blocks, freed after the decision
        b = len(running)
        r.partial = (self.partial, computed[self.partial]) if self.partial >= 0 else ()
        off = self.off
        if not chunks and not b:               # nothing runs this step: the request part-way preempted itself, or
            r.preempted = True                 # (async scheduling) an empty decision, made again at once
            if off is not None and off.loading and not preempted:   # only loads in flight: on to the first to land
                upcoming = min(x[1] for x in off.loading)
                if r.arrivals and r.arrivals[0][0] < upcoming:
                    upcoming = r.arrivals[0][0]
                r.now = max(r.now, upcoming)
                self.call_at = math.inf       # (async) the GPU idled: the next decision sees everything
            return True
        if off is not None and off.flush_at > r.now:   # a victim's stores land before the step runs (the flush)
            off.stats["flush_stall_seconds"] += off.flush_at - r.now
            tally.stall_swap += off.flush_at - r.now
            r.now = off.flush_at
        spans = [(a, e) for _, a, e in chunks]
        t, alone = self.mixed(spans)
        if chunks:
            tally.stall_prefill += t - alone
            tally.mixed_steps += 1
            tally.mixed_tokens += sum(e - a for a, e in spans)
        redo = self.redo
        for i, a, e in chunks:                 # tokens a victim computes again
            if i in redo:
                tally.recomputed[i] += max(0, min(e, redo[i]) - a)
        if b + len(chunks) > tally.peak_running:
            tally.peak_running = b + len(chunks)
        r.now += t
        r.steps += 1
        r.preempted = False
        tally.marks.extend((r.now, used, b, 0, 0))
        if off is not None:
            self._store(r, off, chunks)
        r.complete()
        for i, _, e in chunks:                 # a token at the end of the step that completes the prompt
            if e < r.Pl[i] + r.g[i]:
                continue
            computed.pop(i, None)
            redo.pop(i, None)
            if r.g[i] == 0:
                tally.first_token[i] = r.now - r.first_token_back(t, alone)
            r.g[i] += 1
            if r.g[i] >= r.Ll[i]:
                r.finished(i)
            else:
                r.join(i)
        return True

    def _step_capped(self, r: ReplicaState) -> bool:
        """``step`` with --long-prefill-token-threshold (module docstring, "Long prefills"): several requests may be
        part-way through their prefill (``parts``), each at the place it was admitted, so the step walks the
        running requests in that order as scheduler.py does: a decoder one token, a request prefilling its next
        chunk (min(its tokens left, the cap, the budget left)), each taking its blocks or preempting the newest
        (the last in that order) until they fit or it is itself the victim. Then the waiting queue as ``_admit``,
        each chunk capped. False when no chunk would run (the event loop's run).

        The budget never runs out before the last of the batch (vLLM's ``while ... token_budget > 0`` leaves no one
        behind): every request ahead of the last admitted one, L, took all it asked for in the step L was admitted
        in (the budget was left for L), and asks no more since (a chunk min(tokens left, cap) only shrinks, a
        finished prefill asks one token), so only L can be cut, and nobody is behind it. The reference
        (tests/sim_reference.py rule 10) walks the batch with the budget check, so a case that broke this would
        show there."""
        parts, running, btl, computed, tally = self.parts, r.running, r.btl, self.computed, r.tally
        if not parts and not self.late:
            waiting = r.waiting
            if not waiting or r.preempted:
                return False
            b = len(running)
            if b >= self.max_seqs or b >= self.budget:
                return False
            need1 = self.need1() if b else 0
            if need1 > r.free or self._head(r, self.budget - b, r.free - need1, need1) is None:
                return False
        late = len(self.late)                  # seats still held by requests finished at the step before
        cap = self._cap_now(r, late)           # (decided before anything of this step is)
        if late:
            self._late_out(r)
        seq, in_run, Pl, g, held = r.seq, r.in_run, r.Pl, r.g, r.held
        order = list(heapq.merge(running, parts, key=seq.__getitem__))   # vLLM's self.running
        left = self.budget
        preempted = False
        chunks: list[tuple[int, int, int]] = []   # (request, first token, past the last) computed this step
        k = 0
        while k < len(order):
            i = order[k]
            if in_run[i]:
                c = 1
                cache = r.xo_l[i] + r.steps - 1
                need = btl[cache + 1] - btl[cache]
            else:
                have = computed[i]
                c = Pl[i] + g[i] - have
                if 0 < cap < c:
                    c = cap
                c = min(c, left)
                need = btl[have + c] - held[i]
            victim = -1
            while need > r.free:               # the newest out (``self.running.pop()``) until it fits
                preempted = True
                victim = order.pop()
                if in_run[victim]:
                    self._pop(r, len(running) - 1)
                else:
                    parts.remove(victim)
                    self._out(r, victim, computed[victim])
                if victim == i:
                    break
            if victim == i:
                break
            r.free -= need
            if not in_run[i]:
                held[i] += need
                chunks.append((i, have, have + c))
                computed[i] = have + c
            left -= c
            k += 1
        if not preempted:                      # the waiting queue next, each chunk capped
            self._admit_capped(r, left, chunks, late, cap)
        used = r.total_blocks - r.free
        if used > tally.peak_used:
            tally.peak_used = used
        self._late_in(r)                       # the finished requests' blocks, freed after the decision
        b = len(running)
        r.partial = tuple(x for i in parts for x in (i, computed[i]))
        if not chunks and not b:               # nothing runs this step: the request part-way preempted itself, or
            r.preempted = True                 # (async scheduling) an empty decision, made again at once
            return True
        computed_now = [(a, e) for _, a, e in chunks]
        t, alone = self.mixed(computed_now)
        if chunks:
            tally.stall_prefill += t - alone
            tally.mixed_steps += 1
            tally.mixed_tokens += sum(e - a for a, e in computed_now)
        redo = self.redo
        for i, a, e in chunks:                 # tokens a victim computes again
            if i in redo:
                tally.recomputed[i] += max(min(e, redo[i]) - a, 0)
        if b + len(chunks) > tally.peak_running:
            tally.peak_running = b + len(chunks)
        r.now += t
        r.steps += 1
        r.preempted = False
        tally.marks.extend((r.now, used, b, 0, 0))
        r.complete()
        for i, _, e in chunks:                 # a token at the end of the step that completes the prompt
            if e < Pl[i] + g[i]:
                continue
            parts.remove(i)
            computed.pop(i, None)
            redo.pop(i, None)
            if g[i] == 0:
                tally.first_token[i] = r.now - r.first_token_back(t, alone)
            g[i] += 1
            if g[i] >= r.Ll[i]:
                r.finished(i)
            else:
                r.join_at(i)
        r.partial = tuple(x for i in parts for x in (i, computed[i]))
        return True

    def _seat(self, r: ReplicaState, i: int, hit: int, c: int, chunks: list[tuple[int, int, int]] | None) -> None:
        """The waiting head i admitted with ``hit`` tokens found cached and its first ``c`` tokens after them: out of
        the waiting queue; a victim's hit blocks taken back out of the free queue (``_take_back``) and counted as its
        recompute hit, a request seen for the first time its admission time and prefix hit (and, offloading, noted as
        first scheduled in this step); the shared prefix cached from now on; the blocks of hit + c tokens taken from
        the free ones and its chunk (hit, hit + c) into the step's ``chunks`` (None: a load from the CPU pool, whose
        tokens are computed once it lands). The caller spends the chunk's tokens of the budget."""
        r.waiting.popleft()
        tally = r.tally
        if i in self.seg:
            self._take_back(r, i, hit)
            tally.recompute_hits[i] += hit - (self.hb * r.block if r.prefix_cached else 0)
        elif r.g[i] == 0 and i not in self.redo:
            tally.admitted[i] = r.now
            tally.prefix_hits[i] = hit
            if self.off is not None:
                self.fresh.append(i)
        if self.hb:
            r.prefix_cached = True
        r.held[i] = n = r.btl[hit + c]
        r.free -= n
        if chunks is not None:
            chunks.append((i, hit, hit + c))

    def _admit_capped(self, r: ReplicaState, left: int, chunks: list[tuple[int, int, int]], late: int,
                      cap: int) -> None:
        """``_admit`` with the chunk cap: each admitted request takes the next place (``r.seq``) and joins ``parts``
        until its prefill completes; every request part-way holds a seat."""
        running, parts, tally, computed = r.running, self.parts, r.tally, self.computed
        waiting, arrival, seen_to = r.waiting, tally.arrival, self.cut
        while (waiting and left > 0 and len(running) + len(parts) + late < self.max_seqs
               and arrival[waiting[0]] <= seen_to):
            i = waiting[0]
            hit = self._hit(r, i)
            c = r.Pl[i] + r.g[i] - hit
            if 0 < cap < c:
                c = cap
            c = min(c, left)
            if self._need(r, (i, hit, c)) > r.free:
                break
            self._seat(r, i, hit, c, chunks)
            left -= c
            computed[i] = hit + c
            r.seq[i] = r.joins                # its place in the batch, kept while it prefills
            r.joins += 1
            parts.append(i)

    def _admit(self, r: ReplicaState, left: int, chunks: list[tuple[int, int, int]], late: int,
               first: tuple[int, int, int] | None = None) -> None:
        """The waiting queue from its front into the step, while the budget (``left`` tokens) and the batch allow
        and the head's blocks are free; ``late`` seats are still held by requests that finished at the step before
        (async scheduling), and a request arrived after ``cut`` is not seen yet."""
        if self.off is not None:
            return self._admit_off(r, left, chunks, late)
        running, tally, computed = r.running, r.tally, self.computed
        waiting, arrival, cut = r.waiting, tally.arrival, self.cut
        while (waiting and left > 0 and len(running) + len(chunks) + late < self.max_seqs
               and arrival[waiting[0]] <= cut):
            # the head as the step's check found it (``first``: nothing ran, no chunk, no late seat, the step's
            # decode blocks taken from the queue's front since, the same budget left), or looked up
            head, first = (first, None) if first is not None else (self._head(r, left, r.free), None)
            if head is None:
                break
            i, hit, c = head
            self._seat(r, i, hit, c, chunks)
            left -= c
            if hit + c < r.Pl[i] + r.g[i]:
                self.partial, computed[i] = i, hit + c

    def _admit_off(self, r: ReplicaState, left: int, chunks: list[tuple[int, int, int]], late: int) -> None:
        """``V1Scheduler._admit`` with the CPU offloading connector (module docstring, "KV offloading"): first the
        requests whose loads this decision sees landed, in the order their loads started (FCFS serves
        ``skipped_waiting`` first; those still loading are skipped); then the waiting queue, where a victim whose blocks
        after its GPU hit are on the host loads them (its blocks taken now, no token budget, no seat) and the next
        request is looked at."""
        off = self.off
        assert off is not None
        running, tally, btl, computed = r.running, r.tally, r.btl, self.computed
        waiting, arrival, cut_at, block = r.waiting, tally.arrival, self.cut, r.block
        seen = min(cut_at, r.now)
        seats = self.max_seqs - late         # (late: seats still held by requests finished at the step before)
        k = 0
        loading = off.loading
        while k < len(loading) and left > 0 and len(running) + len(chunks) < seats:
            i, lands, _n, after = loading[k]
            if lands > seen:
                k += 1
                continue
            tokens = r.Pl[i] + r.g[i]
            c = min(tokens - after, left)
            if (self.full_isl and btl[tokens] - r.held[i] > r.free) or btl[after + c] - r.held[i] > r.free:
                return                            # the first that does not fit stops admission
            del loading[k]
            r.free -= btl[after + c] - r.held[i]
            r.held[i] = btl[after + c]
            chunks.append((i, after, after + c))
            left -= c
            if after + c < tokens:
                self.partial, computed[i] = i, after + c
        while waiting and left > 0 and len(running) + len(chunks) < seats and arrival[waiting[0]] <= cut_at:
            i = waiting[0]
            hit = self._hit(r, i)
            tokens = r.Pl[i] + r.g[i]
            hits = off.lookup(i, hit // block, tokens, block)
            if hits:
                ext = hits * block
                if (btl[tokens] if self.full_isl else btl[hit + ext]) > r.free:
                    break
            else:
                c = min(tokens - hit, left)
                if self._need(r, (i, hit, c)) > r.free:
                    break
            if hits:                              # the load: its blocks now, its tokens once it lands
                self._seat(r, i, hit, ext, None)
                after = hit + ext - (hit + ext == tokens)
                off.start_load(i, r.now, hit // block, hits, after)
                off.stats["loaded_tokens"] += ext
                continue
            self._seat(r, i, hit, c, chunks)
            left -= c
            if hit + c < tokens:
                self.partial, computed[i] = i, hit + c


    def _store(self, r: ReplicaState, off: CpuPool, chunks: list[tuple[int, int, int]]) -> None:
        """The step's stores (``_get_reqs_to_store``, in ``yield_req_data``'s order: the requests first scheduled in
        this step, then the running ones: the decoders in batch order, then the other chunks): each request's full
        blocks of its computed tokens not stored yet; together one copy on the device-to-host direction of the link,
        queued at the step's end (submitted at the start of the next step, which it does not hold up)."""
        block, steps, xo_l = r.block, r.steps, r.xo_l
        fresh = self.fresh
        done: list[int] = []
        total = 0
        for i, _a, e in chunks:
            if i in fresh:
                n = off.store(i, e // block)
                if n:
                    total += n
                    done.append(i)
        nxt, hb, store = off.nxt, off.hb, off.store
        for i in r.running:                  # (a block boundary once every ``block`` steps: looked at inline)
            full = (xo_l[i] + steps - 1) // block
            if full > nxt.get(i, hb):
                n = store(i, full)
                if n:
                    total += n
                    done.append(i)
        for i, _a, e in chunks:
            if i not in fresh:
                n = off.store(i, e // block)
                if n:
                    total += n
                    done.append(i)
        if total:
            t = off.store_s(total)
            off.out_free = max(r.now, off.out_free) + t
            off.stats["stored_blocks"] += total
            off.stats["store_seconds"] += t
            for i in done:
                off.done[i] = off.out_free


    def bind_offload(self, block_bytes: int, world: int, store_s: Callable[[int], float],
                      load_s: Callable[[int], float]) -> int:
        """The CPU pool from ``--kv-offloading-size`` (bytes for the whole instance): ``cpu_bytes_to_use // (one
        block's bytes per GPU x TP x PP)`` blocks (v0.19.0 ``kv_offload/cpu/spec.py``), the shared prefix's copy taken
        off; the link's prices of n blocks each way. Returns the CPU pool's blocks (0: none)."""
        if self.offload_bytes is None:
            return 0
        cap = max(0, self.offload_bytes // (block_bytes * world) - self.hb)
        self.off = CpuPool(cap, self.hb, block_bytes)
        self.off.store_s, self.off.load_s = store_s, load_s
        return cap


class CpuPool:
    """vLLM's native CPU offloading connector (``--kv-offloading-size``, v0.14.0+), as the module docstring's
    "KV offloading" says: ``cap`` CPU blocks, LRU over groups (one per request: its blocks are touched together,
    its highest block index least recent), each block stored while its request runs not ready (not evictable, not
    loadable) until the request is preempted or finishes, the blocks being loaded pinned until the load lands.
    Block indices count every block of the request's tokens; the shared prefix's ``hb`` blocks are one copy held
    outside ``cap`` (the caller takes them off)."""

    def __init__(self, cap: int, hb: int, block_bytes: int) -> None:
        from collections import OrderedDict

        self.cap, self.hb, self.block_bytes = cap, hb, block_bytes
        self.used = 0
        self.groups: OrderedDict[int, list] = OrderedDict()   # request -> [ready (sorted), busy (sorted), pin]
        self.nxt: dict[int, int] = {}       # the next block index to store (``_next_stored_block_idx``)
        self.done: dict[int, float] = {}    # when the request's last store lands on the host
        self.loading: list[list] = []       # [request, lands at, blocks, tokens after] in the order loads started
        self.out_free = self.in_free = 0.0  # when each direction of the host link is free
        self.flush_at = 0.0                 # a victim's stores must land before the next step runs
        self.store_s: Callable[[int], float] = lambda n: 0.0
        self.load_s: Callable[[int], float] = lambda n: 0.0
        self.stats = {"cpu_blocks": cap, "stored_blocks": 0, "store_seconds": 0.0, "loads": 0, "loaded_blocks": 0,
                      "loaded_tokens": 0, "load_seconds": 0.0, "evicted_blocks": 0, "failed_stores": 0,
                      "peak_cpu_blocks": 0, "flush_stall_seconds": 0.0}

    def _evict(self, n: int, mine: int, start: int, full: int) -> bool:
        """``LRUCachePolicy.evict``: n ready, unpinned blocks from the least recent end (a group's highest index
        first), or none and False when fewer are evictable; request ``mine``'s blocks start .. full - 1 (the ones the
        store was asked for) are protected."""
        take: list[tuple[int, int, int, int]] = []     # (request, blocks from its ready list's top, kept range)
        found = 0
        for i, (ready, _busy, pin) in self.groups.items():
            lo, hi = pin if pin else (0, 0)
            plo, phi = (start, full) if i == mine else (0, 0)
            k = sum(1 for b in ready if not lo <= b < hi and not plo <= b < phi)
            if k:
                k = min(k, n - found)
                take.append((i, k, plo, phi))
                found += k
                if found == n:
                    break
        if found < n:
            return False
        for i, k, plo, phi in take:
            ready, busy, pin = self.groups[i]
            lo, hi = pin if pin else (0, 0)
            j = len(ready) - 1
            while k:
                if not lo <= ready[j] < hi and not plo <= ready[j] < phi:
                    del ready[j]
                    k -= 1
                j -= 1
            if not ready and not busy:
                del self.groups[i]
        self.used -= n
        self.stats["evicted_blocks"] += n
        return True

    def store(self, i: int, full: int) -> int:
        """Request i's blocks up to ``full`` not stored yet (``_get_reqs_to_store``, ``prepare_store``): evicts for
        room, or stores nothing (retried at its next step) when too few are evictable; the group is touched."""
        start = self.nxt.get(i, self.hb)
        if full <= start:
            return 0
        g = self.groups.get(i)
        new = list(range(start, full))
        if g is not None and ((g[0] and g[0][-1] >= start) or (g[1] and g[1][-1] >= start)):
            have = set(g[0]) | set(g[1])     # already on the host (past a hole a load stopped at): not again
            new = [b for b in new if b not in have]
        n = len(new)
        if n > self.cap - self.used and not self._evict(n - (self.cap - self.used), i, start, full):
            self.stats["failed_stores"] += 1
            return 0
        self.nxt[i] = full
        if not n:
            return 0
        g = self.groups.get(i)               # (the eviction may have emptied it)
        if g is None:
            g = self.groups[i] = [[], [], None]
        g[1].extend(new)
        self.groups.move_to_end(i)
        self.used += n
        if self.used > self.stats["peak_cpu_blocks"]:
            self.stats["peak_cpu_blocks"] = self.used
        return n

    def ready(self, i: int) -> None:
        """Request i preempted (its stores flushed) or finished: its stored blocks become ready."""
        g = self.groups.get(i)
        if g is not None and g[1]:
            g[0] = sorted(g[0] + g[1])
            g[1] = []

    def lookup(self, i: int, hit_blocks: int, tokens: int, block: int) -> int:
        """``get_num_new_matched_tokens``: the group touched; the ready blocks of i in a row from its GPU hit's end,
        within its full blocks of ``tokens`` (0 when less than a block could load)."""
        g = self.groups.get(i)
        if g is None:
            return 0
        self.groups.move_to_end(i)
        full = tokens // block
        ready = g[0]
        k = bisect.bisect_left(ready, hit_blocks)
        n = 0
        while k + n < len(ready) and ready[k + n] == hit_blocks + n and hit_blocks + n < full:
            n += 1
        return n

    def start_load(self, i: int, now: float, first: int, n: int, after: int) -> None:
        """Request i's n blocks from ``first`` onto the host-to-device direction at ``now``, pinned until they land;
        its stores resume after them; ``after``: its computed tokens once they land."""
        self.groups[i][2] = (first, first + n)
        t = self.load_s(n)
        self.in_free = max(now, self.in_free) + t
        self.loading.append([i, self.in_free, n, after])
        self.nxt[i] = first + n
        st = self.stats
        st["loads"] += 1
        st["loaded_blocks"] += n
        st["load_seconds"] += t

    def landed(self, i: int) -> None:
        g = self.groups.get(i)
        if g is not None:
            g[2] = None

