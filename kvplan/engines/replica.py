"""One replica's engine state between events, and the mechanics every scheduler shares.

The state: the KV pool (its blocks, free or held by each request), the queues (arrivals not yet due, waiting,
swapped out, swap-ins landing, offloads leaving), the running batch (kept incrementally, below), the host tier
(the two directions of the host link, each a FIFO, and the DRAM the copies fill) and the clock. The mechanics: a
request joins or leaves the batch, finishes, is reserved blocks, is copied out or back, is prefilled. Whom to
admit, preempt or offload, and how, is the scheduler's (``kvplan.engines.scheduling``); the event loop and the step
prices are ``kvplan.calc.simulate``'s, which builds this state from the scenario's numbers (so nothing here reads a
scenario or a cost model: prices come in as two functions).

The running batch: running request i reads xo[i] + steps tokens in the next step (every one gains a token per
step, so xo[i] is fixed while it runs); its g and held are brought up to date when it leaves the batch (and by
``sync``). ``phase`` counts the running requests by (-xo - shift) mod block, which says at which steps each starts a new
block; ``done_heap`` holds (steps at which it is done, request), stale entries (a request that left) skipped when
they surface. Per-request state is kept in Python lists (scalar work per request); numpy only in ``xo``, the
contexts the vectorized path and the victim rules read (the caller gives the array).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any


class Tally:
    """What the events record: per request (typed arrays, numpy arrays at the end) and in all. The scheduler's
    decisions and the state's mechanics write it; ``kvplan.calc.sim.metrics`` turns it into the run's figures."""

    __slots__ = ("arrival", "admitted", "first_token", "finish", "preemptions", "swap_outs", "swap_ins",
                 "recomputed", "offloads", "prefix_hits", "recompute_hits", "mixed_steps", "mixed_tokens",
                 "swapped_out_bytes", "swapped_in_bytes", "peak_used",
                 "peak_dram", "peak_running", "stall_prefill", "stall_swap", "events", "marks", "timeline")

    def __init__(self, n: int) -> None:
        # typed arrays, 8 bytes an entry (a list of Python floats costs ~32): a million requests' tally is ~90 MB
        times, counts = array("d", [math.nan]) * n, array("q", [0]) * n
        self.arrival, self.admitted, self.first_token, self.finish = times, times[:], times[:], times[:]
        self.preemptions, self.swap_outs, self.swap_ins, self.recomputed = counts, counts[:], counts[:], counts[:]
        self.offloads = counts[:]
        self.prefix_hits = counts[:]        # prompt tokens found in the prefix cache at the first prefill
        self.recompute_hits = counts[:]     # a resumed victim's tokens found in the prefix cache (its own blocks)
        self.mixed_steps = self.mixed_tokens = 0   # steps that ran prefill chunks, and the chunks' tokens
        self.swapped_out_bytes = self.swapped_in_bytes = 0
        self.peak_used = self.peak_dram = self.peak_running = 0
        self.stall_prefill = self.stall_swap = 0.0   # the batch standing still for prefills, and for swap-outs
        self.events = 0
        # the timeline, five numbers a mark, flat: the latest marks in a list (its extend is ~8x an array's), moved
        # into ``timeline`` by the event loop every 4,096 events, which past MARKS_KEPT marks it folds into cells
        # of time (kvplan.calc.sim.metrics.fold_marks): bounded
        self.marks: list[float] = []
        self.timeline = array("d")


class ReplicaState:
    """One replica: its pool, queues, running batch, host tier and clock (module docstring)."""

    __slots__ = ("lockstep", "lockstep_least", "n", "block", "total_blocks", "prefix_blocks", "hit", "dram_cap", "Pl",
                 "Ll", "El", "btl", "xo", "xo_used", "prefill", "prefill_pass", "swap_cost", "closed", "think_s",
                 "duration_s", "tally",
                 "now", "steps", "free", "landing_blocks", "leaving_blocks", "g", "held", "in_dram", "swap_ready",
                 "xo_l", "in_run", "done_at", "phase", "sum_xo", "done_heap", "running", "waiting", "swapped",
                 "landing", "leaving", "arrivals", "times", "open_next", "next_id", "done", "out_free", "in_free",
                 "dram_used", "prefix_cached", "preempted", "freed", "partial", "on_finish", "seq", "joins", "shift")

    def __init__(self, *, prompts: list[int], outputs: list[int], block: int, blocks_at: list[int], total_blocks: int,
                 prefix_blocks: int, prefix_hit: int, dram_cap: int | None, contexts: Any, contexts_used: bool,
                 prefill: Callable[[int, int], float], swap_cost: Callable[[int], tuple[int, float]],
                 arrivals: list[float] | None, users: int, think_s: float, duration_s: float | None,
                 prefill_pass: Callable[[list[tuple[int, int]]], float] | None = None) -> None:
        """``blocks_at[c]``: the blocks a cache of c tokens fills; ``contexts``: a numpy int64 array of one entry per
        request, written only when ``contexts_used``; ``prefill(tokens, cached)`` and ``swap_cost(cache)`` (bytes,
        seconds of one direction) are the prices, ``prefill_pass(ranges)`` the price of one pass of several prompts'
        (start, end) token ranges (``costs.StepModel.prefill_pass_seconds``); ``arrivals``: each request's time
        (sorted), or None for a closed loop of ``users`` users who think ``think_s`` after a completion, submitting
        until ``duration_s``."""
        n = len(prompts)
        self.n, self.block, self.total_blocks, self.hit, self.dram_cap = n, block, total_blocks, prefix_hit, dram_cap
        self.prefix_blocks = prefix_blocks       # the shared prefix's one copy, outside total_blocks
        self.Pl, self.Ll = prompts, outputs
        self.El = [p + q for p, q in zip(prompts, outputs, strict=True)]   # the context at which a request is done
        self.btl, self.xo, self.xo_used = blocks_at, contexts, contexts_used
        self.prefill, self.swap_cost = prefill, swap_cost
        self.prefill_pass = prefill_pass
        # attention-DP ranks in lockstep: R / N passes a prompt (costs.StepModel.lockstep_ranks / pass_ranks); a
        # prefill's price holds the other passes after its own, which is where its first token comes
        # (first_token_back), each less the decode step it runs inside (lockstep_least: StepModel.pass_credit)
        self.lockstep = 1.0
        self.lockstep_least = 0.0              # a prefill's price credits each other pass this much (its decode step)
        self.tally = Tally(n)
        self.now = 0.0
        self.steps = 0
        self.free = total_blocks
        self.landing_blocks = 0                  # blocks reserved by swap-ins in flight
        self.leaving_blocks = 0                  # blocks still held by offloads in flight
        self.g = [0] * n                         # tokens generated so far
        self.held = [0] * n                      # blocks held in HBM
        self.in_dram = [0] * n                   # bytes per GPU parked in host DRAM
        self.swap_ready = [0.0] * n              # when the swap-out copy has landed
        self.xo_l, self.in_run, self.done_at = [0] * n, [False] * n, [0] * n
        self.phase = [0] * block
        # slots a running request holds past its cache (speculative decoding's, vLLM V1's; ``blocks_at`` already
        # counts them): its block boundaries, and so its phase, move by as many tokens
        self.shift = 0
        self.sum_xo = 0
        self.done_heap: list[tuple[int, int]] = []
        # each request's place in join order (the joins so far when it last joined): ``running`` is in join order
        # (only ``join`` appends to it), so a request's place in it is found by bisection on these (a typed array:
        # a list would keep an int object per request, ~30 MB a million)
        self.seq = array("q", [0]) * n
        self.joins = 0
        self.running: list[int] = []             # in the order they (re)joined the batch: the last is the newest
        self.waiting: deque[int] = deque()
        self.swapped: deque[int] = deque()
        self.landing: list[tuple[float, int]] = []   # swap-ins in flight: (lands at, request), a heap
        self.leaving: list[tuple[float, int]] = []   # proactive offloads in flight: (lands in DRAM at, request)
        self.closed, self.think_s, self.duration_s = arrivals is None, think_s, duration_s
        # the arrivals not yet due, a heap: open arrivals (sorted) hold only their next one there, the rest waits in
        # ``times`` from ``open_next`` on (one heap entry, not a million tuples)
        self.times: list[float] = []
        self.open_next = 0
        if arrivals is not None:
            self.times = arrivals
            self.arrivals = [(arrivals[0], 0)] if n else []
            self.open_next = 1
            self.next_id = n
        else:
            self.next_id = min(users, n)
            self.arrivals = [(0.0, i) for i in range(self.next_id)]
        self.done = 0
        self.out_free = self.in_free = 0.0       # when each direction of the host link is free
        self.dram_used = 0
        self.prefix_cached = False               # the shared prefix is in the cache (after the first prefill)
        self.preempted = False                   # a preemption happened and no step has run since
        self.freed = total_blocks                # blocks ever put on the free queue (the pool's own first)
        # the requests part-way through their prefill, each with its tokens done: (request, tokens, request, ...)
        self.partial: tuple[int, ...] = ()
        # a scheduler that keeps a finished request's cache (SGLang's radix tree) hears of each finish, before its
        # blocks are freed
        self.on_finish: Callable[[int], None] | None = None

    # --- the pool -----------------------------------------------------------------------------------------------
    def holders(self) -> int:
        """Requests holding blocks: running, landing swap-ins, offloads still copying out."""
        return len(self.running) + len(self.landing) + len(self.leaving)

    def next_event_at(self) -> float:
        """When the next arrival, swap-in landing or offload landing in DRAM falls (inf when none is due): where a
        run of decode steps must stop to let it be seen."""
        arrivals, landing, leaving = self.arrivals, self.landing, self.leaving
        upcoming = arrivals[0][0] if arrivals else math.inf
        if landing and landing[0][0] < upcoming:
            upcoming = landing[0][0]
        if leaving and leaving[0][0] < upcoming:
            upcoming = leaving[0][0]
        return upcoming

    def occupancy(self) -> int:
        """Blocks held by the running batch and the landing swap-ins (not by offloads still copying out)."""
        return self.total_blocks - self.free - self.leaving_blocks

    def reserve(self, i: int, need: int) -> None:
        self.held[i] = need
        self.free -= need

    def release(self, i: int) -> None:
        self.free += self.held[i]
        self.freed += self.held[i]
        self.held[i] = 0

    # --- the running batch --------------------------------------------------------------------------------------
    def join(self, i: int) -> None:
        v = self.Pl[i] + self.g[i] - self.steps
        self.xo_l[i] = v
        if self.xo_used:
            self.xo[i] = v
        self.sum_xo += v
        self.phase[(-v - self.shift) % self.block] += 1
        self.in_run[i] = True
        self.done_at[i] = d = self.El[i] - v
        heapq.heappush(self.done_heap, (d, i))
        self.seq[i] = self.joins
        self.joins += 1
        self.running.append(i)

    def join_at(self, i: int) -> None:
        """``join``, at the place ``seq[i]`` already gives it (vLLM V1 with a prefill cap: a request keeps the place
        it was admitted at while it prefills over several steps): into ``running`` by bisection, no new place
        taken."""
        v = self.Pl[i] + self.g[i] - self.steps
        self.xo_l[i] = v
        if self.xo_used:
            self.xo[i] = v
        self.sum_xo += v
        self.phase[(-self.shift - v) % self.block] += 1
        self.in_run[i] = True
        self.done_at[i] = d = self.El[i] - v
        heapq.heappush(self.done_heap, (d, i))
        bisect.insort(self.running, i, key=self.seq.__getitem__)

    def leave(self, i: int) -> None:
        """Request i leaves the running batch (the caller takes it out of ``running``): its tokens and blocks now."""
        v = self.xo_l[i]
        self.sum_xo -= v
        self.phase[(-v - self.shift) % self.block] -= 1
        self.in_run[i] = False
        self.g[i] = v + self.steps - self.Pl[i]
        self.held[i] = self.btl[v + self.steps - 1]

    def cache(self, i: int) -> int:
        """Running request i's cached tokens (after the steps so far)."""
        return self.xo_l[i] + self.steps - 1

    def sync(self) -> None:
        """Bring the running requests' tokens and blocks up to date (for a snapshot)."""
        for i in self.running:
            self.g[i] = self.xo_l[i] + self.steps - self.Pl[i]
            self.held[i] = self.btl[self.xo_l[i] + self.steps - 1]

    def finished(self, i: int) -> None:
        """Request i is done now: its blocks are freed, and a closed loop's user submits its next request after
        thinking (while requests and the duration last)."""
        if self.on_finish is not None:
            self.on_finish(i)
        self.tally.finish[i] = self.now
        self.release(i)
        self.done += 1
        if self.closed and self.next_id < self.n:
            t = self.now + self.think_s
            if self.duration_s is None or t < self.duration_s:
                heapq.heappush(self.arrivals, (t, self.next_id))
                self.next_id += 1

    def complete(self) -> None:
        """The requests done at this step leave the batch (in batch order) and finish."""
        heap, steps, in_run, done_at = self.done_heap, self.steps, self.in_run, self.done_at
        gone: list[int] = []
        while heap and heap[0][0] == steps:
            _, i = heapq.heappop(heap)
            if in_run[i] and done_at[i] == steps and i not in gone:
                gone.append(i)
        running, seq = self.running, self.seq
        plain = self.on_finish is None and not self.closed   # nobody hears of a finish, no user submits again
        for i in sorted(gone, key=seq.__getitem__) if len(gone) > 1 else gone:
            del running[bisect.bisect_left(running, seq[i], key=seq.__getitem__)]   # its place, in log time
            if not plain:
                self.leave(i)
                self.finished(i)
                continue
            # leave() and finished() written out: its tokens now, its blocks freed, done
            v = self.xo_l[i]
            self.sum_xo -= v
            self.phase[(-v - self.shift) % self.block] -= 1
            in_run[i] = False
            self.g[i] = v + steps - self.Pl[i]
            held = self.btl[v + steps - 1]
            self.tally.finish[i] = self.now
            self.free += held
            self.freed += held
            self.held[i] = 0
            self.done += 1

    def crossings(self, k: int, s0: int, b: int) -> int:
        """Blocks the running batch adds in its next k steps (each block boundary adds one): each request starts
        a block once every ``block`` steps, the ones in phase s0 at the first step, s0 + 1 at the second, ..."""
        phase, block = self.phase, self.block
        q, m = divmod(k, block)
        end = s0 + m
        part = sum(phase[s0:end]) if end <= block else sum(phase[s0:]) + sum(phase[:end - block])
        return b * q + part

    def last_step_that_fits(self, limit: int, s0: int, b: int) -> tuple[int, int]:
        """The most steps whose added blocks stay within ``limit``, and the blocks they add: q full rounds of
        ``block`` steps add b blocks each, then the phases in step order until the rest is passed."""
        phase, block = self.phase, self.block
        q, rest = divmod(limit, b)
        acc = list(itertools.accumulate(phase[s0:]))   # the phases from s0 on, then (if the rest reaches past
        if acc[-1] <= rest:                             # them all) those before s0: no rotated copy of the list
            acc = list(itertools.accumulate(phase[:s0], initial=acc[-1]))
            m = bisect.bisect_right(acc, rest, 1)
            return q * block + block - s0 + m - 1, q * b + acc[m - 1]
        m = bisect.bisect_right(acc, rest)
        return q * block + m, q * b + (acc[m - 1] if m else 0)

    # --- the host tier ------------------------------------------------------------------------------------------
    def copy_out(self, i: int, nbytes: int, t: float) -> float:
        """Request i's cache onto the out-direction FIFO of the host link, into DRAM; returns when it lands."""
        tally = self.tally
        self.out_free = max(self.now, self.out_free) + t
        self.swap_ready[i] = self.out_free
        self.in_dram[i] = nbytes
        self.dram_used += nbytes
        tally.peak_dram = max(tally.peak_dram, self.dram_used)
        tally.swapped_out_bytes += nbytes
        tally.swap_outs[i] += 1
        return self.out_free

    def swap_in(self, i: int, need: int, cache: int) -> None:
        """Swapped request i gets its ``need`` blocks now; its copy back starts when the in-direction of the link is
        free and its copy out has landed, and it joins the batch when the copy lands."""
        self.reserve(i, need)
        self.landing_blocks += need
        nbytes, t = self.swap_cost(cache)
        start = max(self.now, self.in_free, self.swap_ready[i])
        self.in_free = start + t
        heapq.heappush(self.landing, (self.in_free, i))
        self.tally.swap_ins[i] += 1
        self.tally.swapped_in_bytes += nbytes

    def offload_out(self, i: int, nbytes: int, t: float) -> None:
        """Running request i (already out of ``running``) leaves the batch for DRAM without the batch waiting: its
        blocks stay held until the copy lands."""
        self.leave(i)
        heapq.heappush(self.leaving, (self.copy_out(i, nbytes, t), i))
        self.tally.offloads[i] += 1
        self.leaving_blocks += self.held[i]

    def take_due(self) -> None:
        """What is due now: arrivals join the waiting queue, offloads that landed in DRAM free their blocks and
        join the swapped queue, swap-ins that landed join the batch."""
        arrivals, waiting, leaving, landing = self.arrivals, self.waiting, self.leaving, self.landing
        now, heappop = self.now, heapq.heappop
        if self.closed:
            while arrivals and arrivals[0][0] <= now:
                t, i = heappop(arrivals)
                self.tally.arrival[i] = t
                waiting.append(i)
        elif arrivals and arrivals[0][0] <= now:
            times, j, n, arrival = self.times, self.open_next, self.n, self.tally.arrival
            while arrivals and arrivals[0][0] <= now:
                t, i = arrivals[0]
                if j < n:
                    arrivals[0] = (times[j], j)     # the next open arrival takes the heap's one place
                    j += 1
                else:
                    arrivals.pop()
                arrival[i] = t
                waiting.append(i)
            self.open_next = j
        while leaving and leaving[0][0] <= now:
            _, i = heappop(leaving)
            self.leaving_blocks -= self.held[i]
            self.release(i)
            self.swapped.append(i)
        while landing and landing[0][0] <= now:
            _, i = heappop(landing)
            self.landing_blocks -= self.held[i]
            self.dram_used -= self.in_dram[i]
            self.in_dram[i] = 0
            self.join(i)

    def idle(self) -> bool:
        """Nothing runs: the clock moves on to what comes next. False when nothing will (the run is over)."""
        if self.preempted:
            self.preempted = False
            return True
        upcoming = [q[0][0] for q in (self.arrivals, self.landing, self.leaving) if q]
        if not upcoming:
            if self.done < self.n and (self.waiting or self.swapped):
                self.preempted = False
                return True
            return False
        self.now = max(self.now, min(upcoming))
        self.preempted = False
        return True

    # --- prefills -----------------------------------------------------------------------------------------------
    def prefill_prompt(self, i: int) -> float:
        """New request i's prompt, the batch standing still: the first prompt computes the shared prefix, every
        later one hits it. The prefill gives the first token. Returns its time."""
        tally = self.tally
        tally.admitted[i] = self.now
        cached = self.hit if self.prefix_cached else 0
        t = self.prefill(self.Pl[i], cached)
        tally.prefix_hits[i] = cached
        self.prefix_cached = True
        self.now += t
        self.g[i] = 1
        tally.first_token[i] = self.now - self.first_token_back(t)
        tally.stall_prefill += t
        return t

    def first_token_back(self, t: float, alone: float | None = None) -> float:
        """How long before the end of a step of ``t`` s (``alone``: its decode part without prefill chunks; a
        prefill's: ``lockstep_least``) a prompt it completes has its first token: 0, or under attention DP in
        lockstep (r = R / N passes a prompt) the other passes' part, t = own + (r - 1) x (own - alone)
        (``costs.StepModel.mixed_parts``, ``prefill_seconds``), so own = (t + (r - 1) x alone) / r and the first
        token comes t - own = (r - 1) x (t - alone) / r early."""
        r = self.lockstep
        if alone is None:
            alone = self.lockstep_least
        return max((r - 1) * (t - alone) / r, 0.0) if r > 1 else 0.0

    def prefill_again(self, i: int, cache: int) -> float:
        """Recomputed request i's cache again, past the cached prefix. Returns its time."""
        t = self.prefill(cache, self.hit)
        self.now += t
        self.tally.recomputed[i] += cache - self.hit
        self.tally.stall_prefill += t
        return t
