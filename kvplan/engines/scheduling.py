"""The scheduler of ``kvplan simulate``'s replica: what an engine decides between decode steps. ``Scheduler`` is
the interface (admission, preemption with its victim and its swap-or-recompute choice, proactive offload, and
resumption of swapped requests); ``RuleBook`` is today's rules, below (``kvplan.engines.sglang_scheduler`` is
SGLang's own; ``kvplan.engines.schedulers`` picks one per engine). The state it decides on and the mechanics it
uses (a request joins, leaves, is copied out or back, is prefilled) are ``kvplan.engines.replica``'s; the event
loop that calls it between runs of steps, and the step prices, are ``kvplan.calc.simulate``'s. This module imports
neither calc nor numpy at import time.

The rule book (``RuleBook``), one replica:

* Admission (between steps): swapped-out requests first, oldest first (vLLM V0's scheduler resumes swapped
  requests before it admits new ones), then the waiting queue in order (recompute-preempted requests at its
  front, as vLLM V1 prepends them); a request is admitted while fewer than ``max_batch`` requests hold blocks
  and the blocks its cache needs leave the watermark free (vLLM V0's BlockSpaceManager: watermark 0.01 of the
  blocks); with nothing else holding blocks, the watermark is waived. No admission in the instant of a
  preemption (vLLM V1 schedules no waiting request in a step that preempted).
* Prefills (new prompts, and re-prefills of recomputed requests' caches) run as passes of their own: the batch's
  decode stalls for them. The requests admitted in a row share one pass while their tokens sum to at most the token
  budget (max_num_batched_tokens; a prompt over it runs alone, in chunks), priced once by the cost model
  (``StepModel.prefill_pass_seconds``: one weight read, each prompt's own attention), as vLLM V0's
  ``_schedule_prefills`` and SGLang's PrefillAdder pack them (``costs.PREFILL_PACKING_SOURCE``). The pass produces
  its new requests' first output tokens, at its end.
* A decode step: every running request reads its P + g cached tokens (g generated so far) and writes one, so its
  cache grows by one token; a block is allocated when the cache crosses a block boundary. A request is done when
  it has generated its output; its blocks are freed at once.
* When the next step needs more blocks than are free, victims are preempted until it fits. ``recompute``: the
  blocks are dropped; on resume the cache (P + g - 1 tokens) is re-prefilled. ``swap``: the cache is copied to
  host DRAM over the host link; the step waits for the copy (the blocks are free only then); on resume, blocks
  are reserved and the copy back runs while the others decode; the request rejoins the batch when it lands.
  Each direction of the link is a FIFO queue priced at the bidirectional rate (transfers queue, never overlap
  within a direction). ``swap-then-recompute`` swaps while the DRAM tier has room; ``swap`` assumes it always
  has (and says when the peak went past the tier).
* Proactive offload (``offload_threshold`` F, off by default; the workload document's "large L2, low
  threshold"): T = int(F x blocks). Occupancy is the blocks held by running requests and swap-ins in flight (not
  by offloads still copying out). Before a decode step with two or more requests running, if occupancy plus the
  blocks the step adds exceeds T, victims (by the victim rule, as for preemption) leave the batch at once until the
  blocks they hold cover the excess or one request is left; it is not a preemption (the request keeps its
  tokens, ``preemptions`` does not count it; ``swap_outs`` and ``offloads`` do). Each copy joins the
  out-direction FIFO of the host link like a swap-out, but the batch does not wait for it: its blocks stay held
  until the copy lands and are freed at the first event after (the end of the step it lands in); the request
  then joins the swapped queue and comes back as a swapped request does (a swap-in over the in-direction FIFO).
  With a threshold, admission and resumption also keep occupancy plus the request's blocks at most T (waived
  when nothing holds blocks). With a known DRAM tier an offload that does not fit in it is not made. Runs of
  steps end at the step before occupancy would pass T (the same closed form as the pool's overflow). The pool's
  overflow is checked first: a preemption does not wait for offloads in flight to free their blocks.
* A shared system prompt (the scenario's ``shared_prefix_tokens`` S; every prompt starts with it, so a prompt
  shorter than S is refused) with prefix caching on (vLLM V1's default): its whole blocks, H = floor(S / block) x
  block tokens, are one copy outside the blocks requests draw from (the pool's blocks less the copy's; never
  evicted), and a request's own blocks are those of its cache less H (``capacity.request_bytes``). The first
  prompt prefilled computes all of it (a miss); every later one prefills tokens H .. P only
  (``prefill_seconds(P, H)``), and a recompute re-prefills H .. cache (``recomputed`` counts cache - H).
* Victims: ``newest`` (vLLM V1 pops the most recently scheduled request), ``fewest-tokens`` (the fewest cached
  tokens: vLLM RFC #54644's least-computed-first), ``longest-first-protected`` (the longer half of the batch by
  context is protected; the newest of the rest goes).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from heapq import heappush
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.replica import ReplicaState

POLICIES = ("swap", "recompute", "swap-then-recompute")
VICTIMS = ("newest", "longest-first-protected", "fewest-tokens")
DEFAULT_POLICY = "recompute"
POLICY_SOURCE = ("vLLM V1 preempts by recompute only (docs.vllm.ai, configuration/optimization, 'Preemption'; "
                 "vllm-project/vllm#18115)")
DEFAULT_VICTIM = "newest"
VICTIM_SOURCE = "vLLM V1 scheduler: without priorities the victim is self.running.pop(), the newest request"
DEFAULT_WATERMARK = 0.01
WATERMARK_SOURCE = ("vLLM V0 BlockSpaceManager(watermark=0.01): watermark_blocks = int(0.01 x num_gpu_blocks) kept "
                    "free at admission (vllm/core/block_manager.py)")


class Scheduler(ABC):
    """The decisions an engine makes between decode steps. The event loop calls ``admit`` at every event, then,
    before a run of steps whose first step needs ``need`` more blocks, ``preempt`` when they are not free, else
    ``room_for_run``. ``reads_contexts``: the scheduler reads the running requests' contexts (``ReplicaState.xo``),
    so the state keeps that array up to date."""

    reads_contexts: bool = False
    engine_rules: str = ""                # whose rules these are, for the output ("": kvplan's rule book)
    preemption_cause: str = "no free block"
    notes: tuple[str, ...] = ()           # what the output says about them

    def replica_limits(self) -> dict[str, int]:
        """The replica constants the engine sets itself (``chunk``, ``max_batch``, ``watermark_blocks``) in place of
        the batch limits and options simulate read; none for the rule book."""
        return {}

    # a scheduler that runs some steps itself (vLLM V1's mixed prefill + decode steps): the loop calls ``step``
    # after ``admit`` at every event, and runs its closed-form decode steps only when ``step`` returns False
    steps_itself: bool = False
    describe: str = ("kvplan's rule book (kvplan.engines.scheduling: V0-style watermark admission, prefills packed "
                     "in passes of their own, swap or recompute)")

    def step(self, r: ReplicaState) -> bool:
        """Run the next step here when it is not a plain decode step of the running batch; True when it ran one."""
        return False

    def may_admit_soon(self, r: ReplicaState, pops: int) -> bool:
        """(With ``steps_itself``) after a preemption, whether the step after this one might admit a waiting
        request (``pops``: the blocks the two steps' decodes take); False lets the loop's run go on past it."""
        return True

    @abstractmethod
    def admit(self, r: ReplicaState) -> bool:
        """Resume swapped requests and admit waiting ones, now; True when prefills took time (the loop then takes
        what arrived meanwhile first)."""

    @abstractmethod
    def preempt(self, r: ReplicaState, need: int) -> None:
        """Make ``need`` blocks free by taking requests out of the batch (the next step needs them)."""

    @abstractmethod
    def room_for_run(self, r: ReplicaState, need: int) -> int | None:
        """The blocks the next run of steps may add (its first step adds ``need``, which are free), or None when
        the scheduler moved requests out instead (the loop looks again)."""


class RuleBook(Scheduler):
    """The rules of the module docstring: ``policy`` and ``victim`` from ``POLICIES`` and ``VICTIMS``; at most
    ``max_batch`` requests hold blocks; admission keeps ``watermark_blocks`` free and, with a threshold of
    ``threshold_blocks`` (None: off), the occupancy at most it, which proactive offload also keeps; the prompts it
    admits in a row share a prefill pass of at most ``budget`` tokens (None: each prompt a pass of its own)."""

    def __init__(self, policy: str, victim: str, max_batch: int, watermark_blocks: int,
                 threshold_blocks: int | None, budget: int | None = None) -> None:
        self.policy, self.victim_rule, self.newest = policy, victim, victim == "newest"
        self.budget = budget      # the tokens one prefill pass packs (max_num_batched_tokens); None: a pass a prompt
        self.max_batch, self.wm_blocks, self.thr = max_batch, watermark_blocks, threshold_blocks
        self.reads_contexts = not self.newest
        self._np: Any = None
        if not self.newest:
            import numpy as np

            self._np = np
        # where admission last stopped (see _stopped): the head it could not get past and the state then
        self._head: int | None = None
        self._free, self._hold, self._leaving = -1, 0, 0

    # --- admission and resumption ------------------------------------------------------------------------------
    def admit(self, r: ReplicaState) -> bool:
        if r.preempted or not (r.waiting or r.swapped):
            return False
        # admission stopped at this head before, and nothing it needs has changed since: the free blocks have not
        # grown, the holders not shrunk and the offloads in flight hold the same blocks (a request's blocks only
        # grow, so it still cannot get in)
        if (r.free <= self._free and len(r.running) + len(r.landing) + len(r.leaving) >= self._hold
                and r.leaving_blocks == self._leaving and (r.swapped[0] if r.swapped else ~r.waiting[0]) == self._head):
            return False
        if not r.swapped:         # the waiting queue's head alone, inline: most often it still does not fit
            holders = len(r.running) + len(r.landing) + len(r.leaving)
            if holders >= self.max_batch:
                self._stopped(r)
                return False
            i = r.waiting[0]
            gi = r.g[i]
            need = r.btl[r.Pl[i] + (gi - 1 if gi else 0)]
            free, thr = r.free, self.thr
            if not (free - need >= self.wm_blocks and (thr is None or r.total_blocks - free - r.leaving_blocks + need
                                                       <= thr) if holders else need <= free):
                self._head, self._free, self._leaving, self._hold = ~i, free, r.leaving_blocks, holders
                return False
        before = r.now
        if self._resume(r):
            self._admit_waiting(r)
        return r.now > before

    def _fits(self, r: ReplicaState, need: int, holders: int) -> bool:
        """Blocks for ``need`` leave the watermark free and (with a threshold) the occupancy at most it; with
        nothing holding blocks, the free blocks are enough."""
        if not holders:
            return need <= r.free
        if self.thr is not None and r.occupancy() + need > self.thr:
            return False
        return r.free - need >= self.wm_blocks

    def _stopped(self, r: ReplicaState) -> None:
        """Admission stopped at a queue's head: remember the state it could not get past."""
        self._head = r.swapped[0] if r.swapped else ~r.waiting[0]
        self._free, self._leaving = r.free, r.leaving_blocks
        self._hold = len(r.running) + len(r.landing) + len(r.leaving)

    def _resume(self, r: ReplicaState) -> bool:
        """Swapped requests first, oldest first, while they fit; False when one is still out (none new then)."""
        swapped = r.swapped
        while swapped and (holders := r.holders()) < self.max_batch:
            i = swapped[0]
            cache = r.Pl[i] + r.g[i] - 1
            need = r.btl[cache]
            if not self._fits(r, need, holders):
                self._stopped(r)
                return False
            swapped.popleft()
            r.swap_in(i, need, cache)
        if swapped:
            self._stopped(r)      # the batch is full
            return False
        return True

    def _admit_waiting(self, r: ReplicaState) -> None:
        """The waiting queue in order while it fits: a new request's prompt, a recomputed one's cache (past the
        shared prefix); the prompts admitted in a row are packed into one prefill pass while their tokens sum to at
        most ``budget`` (vLLM V0's _schedule_prefills budget loop, SGLang's PrefillAdder:
        ``costs.PREFILL_PACKING_SOURCE``; one over the budget runs alone, in chunks), priced once
        (``StepModel.prefill_pass_seconds``), their first tokens at its end; then the queue again. A request whose
        tokens are all there at its prefill is done."""
        waiting, Pl, g, btl, wm, thr = r.waiting, r.Pl, r.g, r.btl, self.wm_blocks, self.thr
        holders = r.holders()     # admission adds one (its blocks are reserved), a finish at its prefill takes it off
        tally, budget = r.tally, self.budget
        members: list[tuple[int, int, int, int]] = []      # the pass: (request, generated, start, end)
        tokens = 0
        while True:
            while waiting and holders < self.max_batch:
                i = waiting[0]
                gi = g[i]
                cache = Pl[i] + (gi - 1 if gi else 0)
                need = btl[cache]
                free = r.free
                if not (free - need >= wm and (thr is None or r.total_blocks - free - r.leaving_blocks + need <= thr)
                        if holders else need <= free):     # _fits, inline: the waiting queue is the hot path
                    break
                # the first prompt ever computes the shared prefix, every later one (and every recompute) hits it
                start = r.hit if (gi or r.prefix_cached) else 0
                if members and budget is not None and tokens + cache - start > budget:
                    break             # over the pass's token budget: this pass runs, the next one starts here
                waiting.popleft()
                r.held[i] = need      # reserved
                r.free = free = free - need
                if r.total_blocks - free > tally.peak_used:
                    tally.peak_used = r.total_blocks - free
                if gi == 0:
                    tally.admitted[i] = r.now
                    tally.prefix_hits[i] = start
                    r.prefix_cached = True
                members.append((i, gi, start, cache))
                tokens += cache - start
                holders += 1
                if budget is None:
                    break             # no packing: each prompt a pass of its own
            if not members:
                if waiting:
                    self._stopped(r)  # the head does not fit, or the batch is full
                return
            holders -= self._run_pass(r, members)
            members = []
            tokens = 0

    def _run_pass(self, r: ReplicaState, members: list[tuple[int, int, int, int]]) -> int:
        """One prefill pass of ``members`` (request, generated, start, end), the batch standing still: its price,
        each new request's first token at its end, each recomputed one's tokens counted; then each joins the batch,
        or is done when its tokens are all there. Returns how many were done (they hold no blocks now)."""
        tally, g, Ll = r.tally, r.g, r.Ll
        if len(members) == 1:
            _, _, start, end = members[0]
            t = r.prefill(end, start)
        else:
            assert r.prefill_pass is not None, "a replica whose rule book packs prefills has a pass price"
            t = r.prefill_pass([(start, end) for _, _, start, end in members])
        r.now = now = r.now + t
        tally.stall_prefill += t
        first = now - r.first_token_back(t) if r.lockstep > 1 else now
        done = 0
        block, phase = r.block, r.phase
        for i, gi, start, end in members:
            if gi == 0:
                g[i] = 1
                tally.first_token[i] = first
            else:
                tally.recomputed[i] += end - start
            if (gi or 1) >= Ll[i]:        # its tokens now: the first from the prefill, or as before
                r.finished(i)
                done += 1
            elif r.xo_used:
                r.join(i)
            else:     # ReplicaState.join written out (no numpy copy); no V1 release runs here, so r.shift == 0
                v = r.Pl[i] + g[i] - r.steps
                r.xo_l[i] = v
                r.sum_xo += v
                phase[-v % block] += 1
                r.in_run[i] = True
                r.done_at[i] = d = r.El[i] - v
                heappush(r.done_heap, (d, i))
                r.seq[i] = r.joins
                r.joins += 1
                r.running.append(i)
        return done

    # --- victims, preemption, offload -------------------------------------------------------------------------
    def victim(self, r: ReplicaState) -> int:
        """The victim's place in ``r.running`` by the victim rule."""
        if self.newest:
            return len(r.running) - 1
        np = self._np
        ctx = r.xo[np.array(r.running, dtype=np.int64)]   # the caches less the same steps: the same order
        b = len(ctx)
        if self.victim_rule == "fewest-tokens":            # the smallest cache, the newest (last) of equals
            return b - 1 - int(np.argmin(ctx[::-1]))
        # the longer half by cache, the older of equals, is protected (a stable sort of -cache keeps batch order
        # among equals); the newest of the rest goes
        free_ = np.ones(b, dtype=bool)
        free_[np.argsort(-ctx, kind="stable")[: b // 2]] = False
        return b - 1 - int(np.argmax(free_[::-1]))

    def preempt(self, r: ReplicaState, need: int) -> None:
        """Victims out until the next step's blocks (``need`` beyond what the batch holds) fit; the step waits for
        the swap-outs' copies, and no admission follows in the same instant."""
        wait_until = r.now
        running, btl, preemptions, recompute = r.running, r.btl, r.tally.preemptions, self.policy == "recompute"
        while need > r.free:
            i = running.pop() if self.newest else running.pop(self.victim(r))
            r.leave(i)
            cache = r.Pl[i] + r.g[i] - 1
            need -= btl[cache + 1] - btl[cache]
            preemptions[i] += 1
            landed = None if recompute else self._swap_out(r, i, cache)
            if landed is None:
                r.waiting.appendleft(i)   # recompute: to the front of the waiting queue (vLLM V1 prepends)
            else:
                wait_until = max(wait_until, landed)
                r.swapped.append(i)
            r.release(i)
        r.tally.stall_swap += wait_until - r.now
        r.now = wait_until
        r.preempted = True

    def _swap_out(self, r: ReplicaState, i: int, cache: int) -> float | None:
        """A preempted request's cache copied out by the policy (when its copy lands), or None to recompute it:
        ``swap`` always swaps, ``swap-then-recompute`` while the DRAM tier has room (recompute copies nothing)."""
        if self.policy == "recompute":
            return None
        nbytes, t = r.swap_cost(cache)
        if self.policy == "swap" or r.dram_used + nbytes <= (r.dram_cap or 0):
            return r.copy_out(i, nbytes, t)
        return None

    def room_for_run(self, r: ReplicaState, need: int) -> int | None:
        """Without a threshold (or one request running) the free blocks. With one: when the first step would pass
        it, offload (None) if that moved anyone; else runs end before occupancy would pass it."""
        if self.thr is None or len(r.running) <= 1:
            return r.free
        room = self.thr - r.occupancy()
        if need > room and self.offload(r, need - room):
            return None
        return min(r.free, room) if need <= room else r.free

    def offload(self, r: ReplicaState, excess: int) -> bool:
        """Proactive offload: victims (by the victim rule) leave the batch at once, until the blocks they hold cover
        ``excess`` or one request is left; each copy joins the out-direction queue of the host link and the batch
        does not wait for it; its blocks stay held until the copy lands. False when DRAM has no room for one."""
        moved = 0
        running = r.running
        while moved < excess and len(running) > 1:
            j = self.victim(r)
            i = running[j]
            nbytes, t = r.swap_cost(r.cache(i))
            if r.dram_cap is not None and r.dram_used + nbytes > r.dram_cap:
                break
            running.pop(j)
            r.offload_out(i, nbytes, t)
            moved += r.held[i]
        return moved > 0

