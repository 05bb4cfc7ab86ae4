"""An independent, token-by-token reference for ``kvplan simulate`` (the tests' check on the event-driven engine).

Written from the rules ``kvplan/engines/scheduling.py`` documents (the rule book), with none of the engine's
functions: no block table, no closed-form sums, no bisection, no numpy state arrays. One ``Req`` object per request,
one decode step per loop turn, each step priced by ``StepModel.step`` for the batch it actually holds. It uses only
kvplan's public inputs: the pool and block size (``kvplan.calc.capacity``), the request's bytes at a context
(``capacity.request_bytes``), the host tier (``capacity.host_tier``), the one cost model (``kvplan.calc.costs``:
``step_model``, ``StepModel.prefill_seconds``, ``prefill_pass_seconds``, ``swap_copies``, ``swap_seconds``,
``host_link_rate``) and the engine's batch limits. Slow on purpose: clarity over speed.

The rules, as documented by the engine (one replica):

1. Arrivals join the back of the waiting queue at their time (a closed loop of N users: N requests at 0 s, and the
   next one ``think`` seconds after a request finishes, until the requests or the duration run out; the requests a
   duration kept from being submitted are not part of the run). Things that
   happen during a decode step or a prefill are seen when it ends.
2. A swap-in that has landed puts its request back at the end of the running batch (it becomes the newest).
3. Admission, between steps, unless a preemption happened at this instant and no step has run since (a preemption
   that empties the batch does not block it): first the swapped-out requests in the order they were swapped out
   (vLLM V0's scheduler appends a swapped-out group to ``self.swapped`` and resumes from its front:
   vllm-project/vllm ``vllm/core/scheduler.py`` ``_preempt_by_swap`` / ``_schedule_swapped``; none new while one of
   them is still out), then the waiting queue from its front. Each needs fewer than ``max_batch`` requests
   holding blocks (running, landing swap-ins and offloads still copying out) and its blocks to leave the watermark
   ``int(watermark x blocks)`` free; with nothing holding blocks the watermark is waived. The first request that
   does not fit stops admission.
   * A swapped request: its blocks are reserved now, its copy back starts when the host-to-device direction of the
     link is free and its copy out has landed; it holds blocks while it lands.
   * A new request: blocks for its prompt, a prefill of the prompt while the batch stands still; the prefill gives
     the first token. A recomputed request: blocks for its whole cache (prompt + generated - 1), a prefill of all of
     it; those tokens count as recomputed. The requests admitted in a row share one prefill pass while the tokens
     they compute sum to at most max_num_batched_tokens (vLLM V0's ``_schedule_prefills`` budget loop; SGLang's
     PrefillAdder): the next that would pass it starts the next pass. A pass of several is priced
     ``StepModel.prefill_pass_seconds`` of their token ranges, one alone ``StepModel.prefill_seconds`` (chunked by
     max_num_batched_tokens when longer); the pass's requests hold their blocks (and count as holding them for
     the next admission) from their admission, and their first tokens come at its end.
   * A request whose output is one token is done at its prefill.
   After prefills took time, what arrived meanwhile is queued before admission looks again.
4. A decode step: each running request with g tokens generated reads and writes its cache of prompt + g tokens and
   generates one more token. If the batch's caches after the step need more blocks than are free, victims are
   preempted first, one by one, until it fits:
   * ``newest``: the last to (re)join the batch; ``fewest-tokens``: the smallest cache (the newest of equals);
     ``longest-first-protected``: the longer half of the batch by cache (the older of equals) is protected, the
     newest of the rest goes.
   * ``recompute`` (or ``swap-then-recompute`` when the host tier has no room for its bytes): its blocks are
     dropped and it goes to the front of the waiting queue. ``swap``: its bytes go to DRAM, its copy out is
     queued on the device-to-host direction of the link, its blocks are free at once, and the step waits until
     the last of this preemption's copies has landed.
5. A request that has generated its output is done at the end of that step; its blocks are freed at once.

6. Proactive offload (``offload_threshold`` F): T = int(F x blocks). Occupancy is the blocks held by the running
   batch and the landing swap-ins, not by offloads still copying out. Before a decode step of two or more
   requests (after the pool's own shortfall, which preempts first), if occupancy plus the blocks the step adds
   passes T, victims (the victim rule) leave the batch at once, each copied out like a swap-out (the batch does
   not wait), until the blocks they hold cover the excess or one request is left; an offload the host tier has no
   room for is not made (and none after it). An offloaded request keeps its blocks until its copy has landed, seen
   at the end of the step it lands in; then its blocks are free and it joins the back of the swapped queue. It is
   not a preemption; it counts as an offload and a swap-out. With a threshold, admission also needs occupancy
   plus the request's blocks to stay at most T (unless nothing holds blocks).
7. A shared prefix of S tokens (prefix caching): its whole blocks, H = floor(S / block) x block tokens, are one copy
   of ceil(copy bytes / block bytes) blocks taken out of the pool; a request's own bytes are its cache's less that
   prefix (``request_bytes`` of the scenario with the prefix). The first prompt ever prefilled computes all of it;
   every later prompt prefills tokens H .. P (it hits H tokens); a recompute re-prefills H .. cache and counts
   cache - H tokens as recomputed.
8. Speculative decoding (``speculative`` = (K, a0, slope) or (K, (context, acceptance) points), with the scenario's
   MTP layers drafting): a decode step still gives each request one token, priced StepModel.speculative_step of the
   target's step model (its MTP layers are the draft's: ``step_model(s, speculative=True)``) over the batch's mean
   acceptance length (``decode_price``); in ``run_vllm`` the decode part of a step with chunks is priced so, its
   chunks as without.

9. (``run_vllm``) Speculative decoding's slots: with K draft tokens every allocation of a request (its decode
   step's, a chunk's, the admission check) is for its tokens + D slots, D = 2K from vLLM v0.9.0 (the K drafts it
   verifies and K lookahead slots: MTP is ``use_eagle()``), K before (the drafts alone).

Bytes per request are ``request_bytes(cache)`` rounded up to whole blocks of one block of every layer
(``request_bytes(block) - request_bytes(0)`` with no shared prefix); the pool holds ``floor(pool / block bytes)``
of them, less the shared prefix's copy.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass, field

from kvplan.calc import capacity, costs

MAX_TURNS = 5_000_000
WAITING, RUNNING, SWAPPED, LANDING, DONE, NOT_YET = "waiting", "running", "swapped", "landing", "done", "not yet"
LEAVING = "leaving"                 # an offload whose copy out is still on the link (it holds its blocks)


@dataclass
class Req:
    id: int
    prompt: int
    output: int
    state: str = NOT_YET
    generated: int = 0
    blocks: int = 0                 # blocks held in HBM
    dram: int = 0                   # bytes parked in host DRAM
    copied_out_at: float = 0.0      # when its last swap-out copy landed
    lands_at: float = 0.0           # when its swap-in lands
    arrival: float = float("nan")
    admitted: float = float("nan")
    first_token: float = float("nan")
    finish: float = float("nan")
    preemptions: int = 0
    swap_outs: int = 0
    swap_ins: int = 0
    recomputed: int = 0
    peak_bytes: int = 0
    offloads: int = 0
    prefix_hit_tokens: int = 0
    recompute_hit_tokens: int = 0

    @property
    def cache(self) -> int:
        """Tokens in its KV cache between steps: the prompt and every generated token but the last."""
        return self.prompt + max(self.generated - 1, 0)


@dataclass
class RefRun:
    reqs: list
    block_tokens: int
    block_bytes: int
    total_blocks: int
    watermark_blocks: int
    simulated_seconds: float = 0.0
    decode_steps: int = 0
    swapped_out_bytes: int = 0
    swapped_in_bytes: int = 0
    peak_blocks_used: int = 0
    peak_dram_bytes: int = 0
    peak_running: int = 0
    prefill_seconds: float = 0.0
    swap_stall_seconds: float = 0.0
    steps: list = field(default_factory=list)    # (batch, seconds) of every decode step
    mixed_steps: int = 0                         # steps that ran prefill chunks (run_vllm)
    mixed_prefill_tokens: int = 0
    offload: dict | None = None                  # the CPU offloading connector's counts (run_vllm rule 8)

    def column(self, name: str) -> list:
        return [getattr(r, name) for r in self.reqs]


def _first_arrivals(workload, n: int) -> tuple[list[tuple[float, int]], int]:
    """The heap of (arrival time, request id) a run starts with, and how many requests it submitted: every request at
    its arrival time, or a closed loop's first request per user at 0 s."""
    pending: list[tuple[float, int]] = []
    if workload.arrivals is not None:
        for i, t in enumerate(workload.arrivals):
            heapq.heappush(pending, (float(t), i))
        return pending, n
    submitted = min(int(workload.users), n)
    for i in range(submitted):
        heapq.heappush(pending, (0.0, i))
    return pending, submitted


def decode_price(s, sm, b: int, cache_bytes: float, att_flops: float, contexts, speculative=None) -> float:
    """Rule 8, speculative decoding (``simulate --speculative``: K draft tokens, acceptance a0 falling by slope a
    token): a decode step gives each request one token at StepModel.speculative_step (the verify step over K + 1
    tokens and the MTP draft's K steps) over the batch's mean acceptance length, the mean of max(1, a0 - slope x
    context) over its requests; without it, StepModel.step."""
    if speculative is None:
        return float(sm.step(b, cache_bytes, att_flops)["total"])
    total = float(sm.speculative_step(b, cache_bytes, att_flops, speculative[0], s.mtp_layers or 1)["total"])
    return total / (sum(accept_at_context(speculative, c) for c in contexts) / len(contexts))


def accept_at_context(speculative, c: int) -> float:
    """One request's acceptance at context c: (K, a0, slope) is max(1, a0 - slope c); (K, points) the points'
    line through the two around c ((context, acceptance), contexts rising), the end value beyond them."""
    if len(speculative) == 3:
        _, a0, slope = speculative
        return max(1.0, a0 - slope * c)
    points = speculative[1]
    if c <= points[0][0]:
        return points[0][1]
    for (c0, a0), (c1, a1) in zip(points, points[1:], strict=False):
        if c <= c1:
            return a0 + (a1 - a0) * (c - c0) / (c1 - c0)
    return points[-1][1]


def run(s, workload, policy: str = "recompute", victim: str = "newest", max_batch: int | None = None,
        watermark: float = 0.01, dram_bytes_per_node: int | None = None,
        offload_threshold: float | None = None, speculative=None) -> RefRun:
    # --- the replica's constants -----------------------------------------------------------------------------
    block = int(capacity.block_tokens(s).value)
    alone = dataclasses.replace(s, shared_prefix_tokens=0)         # one block of every layer, no prefix taken off
    block_bytes = capacity.request_bytes(alone, block) - capacity.request_bytes(alone, 0)
    hit = s.shared_prefix_tokens // block * block                 # H: the prefix's whole blocks
    copy_blocks = -(-capacity.shared_prefix_copy_bytes(s, block=block) // block_bytes) if hit else 0
    total_blocks = int(capacity.kv_pool(s).kv_pool_bytes) // block_bytes - copy_blocks
    wm = int(watermark * total_blocks)
    cap_t = int(offload_threshold * total_blocks) if offload_threshold is not None else None
    mnbt, mns = s.engine_adapter.batch_limits_for(s)
    chunk = int(mnbt.value)
    max_batch = max_batch or int(mns.value)
    link = float(costs.host_link_rate(s.hardware, s.host_link_gbs).value)
    settings = costs.CostSettings()
    sm = costs.step_model(s, speculative=speculative is not None)   # rule 8: the target's layers

    prompts = [int(p) for p in workload.prompts]
    outputs = [int(x) for x in workload.outputs]
    reqs = [Req(i, p, o) for i, (p, o) in enumerate(zip(prompts, outputs, strict=True))]
    longest = max(p + o - 1 for p, o in zip(prompts, outputs, strict=True))
    tier = capacity.host_tier(s, capacity.request_bytes(s, longest), dram_bytes_per_node)
    dram_cap = tier.bytes_per_gpu.value
    out = RefRun(reqs, block, block_bytes, total_blocks, wm)

    bytes_memo: dict[int, int] = {}
    read_memo: dict[int, tuple[float, float]] = {}

    def nbytes(cache: int) -> int:
        if cache not in bytes_memo:
            bytes_memo[cache] = capacity.request_bytes(s, cache)
        return bytes_memo[cache]

    def blocks_for(cache: int) -> int:
        return -(-nbytes(cache) // block_bytes)

    def reads(context: int) -> tuple[float, float]:
        if context not in read_memo:
            b, f = sm.request_cache(float(context))
            read_memo[context] = (float(b), float(f))
        return read_memo[context]

    def copy_seconds(cache: int) -> float:
        copies = costs.swap_copies(s.sized_model, cache, block, settings.layout)
        return costs.swap_seconds(nbytes(cache), copies, link, settings, shared_link=True)

    # --- state -----------------------------------------------------------------------------------------------
    now = 0.0
    free = total_blocks
    running: list[Req] = []          # in the order they (re)joined the batch
    waiting: list[Req] = []
    swapped: list[Req] = []
    landing: list[Req] = []
    leaving: list[Req] = []          # offloads copying out (lands_at: when the copy lands)
    pending, submitted = _first_arrivals(workload, len(reqs))     # (arrival time, request id)
    d2h_free = h2d_free = 0.0        # when each direction of the host link is next idle
    dram_used = 0
    may_admit = True
    prefix_warm = False              # a prompt has been prefilled: the shared prefix is cached

    def take(r: Req, k: int) -> None:
        nonlocal free
        r.blocks += k
        free -= k
        out.peak_blocks_used = max(out.peak_blocks_used, total_blocks - free)

    def release(r: Req) -> None:
        nonlocal free
        free += r.blocks
        r.blocks = 0

    def done(r: Req) -> None:
        nonlocal submitted
        r.state, r.finish = DONE, now
        release(r)
        if workload.arrivals is None and submitted < len(reqs):
            t = now + workload.think_s
            if workload.duration_s is None or t < workload.duration_s:
                heapq.heappush(pending, (t, submitted))
                submitted += 1

    in_pass: list = []               # the prefill pass being formed: (request, first token computed, end)

    def holding() -> int:
        return len(running) + len(landing) + len(leaving) + len(in_pass)

    def occupancy() -> int:
        return (sum(r.blocks for r in running) + sum(r.blocks for r in landing)
                + sum(r.blocks for r, _, _ in in_pass))

    def room_for(k: int) -> bool:
        if holding() == 0:
            return k <= free
        if cap_t is not None and occupancy() + k > cap_t:
            return False
        return free - k >= wm

    def note_peak(r: Req) -> None:
        r.peak_bytes = max(r.peak_bytes, nbytes(r.cache))

    def head_if_it_fits(queue: list) -> Req | None:
        """The queue's first request, holding its blocks, if the batch cap and the watermark let it in."""
        if not queue or holding() >= max_batch:
            return None
        k = blocks_for(queue[0].cache)
        if not room_for(k):
            return None
        r = queue.pop(0)
        take(r, k)
        return r

    def admit() -> None:
        nonlocal now, h2d_free, prefix_warm
        while (r := head_if_it_fits(swapped)) is not None:
            start = max(now, h2d_free, r.copied_out_at)
            h2d_free = start + copy_seconds(r.cache)
            r.state, r.lands_at = LANDING, h2d_free
            landing.append(r)
            r.swap_ins += 1
            out.swapped_in_bytes += nbytes(r.cache)
        if swapped:
            return
        while True:       # one prefill pass a turn: the prompts admitted in a row while their tokens fit the budget
            tokens = 0
            while waiting:
                head = waiting[0]
                start = hit if (head.generated or prefix_warm) else 0
                if in_pass and tokens + head.cache - start > chunk:
                    break
                r = head_if_it_fits(waiting)
                if r is None:
                    break
                if r.generated == 0:
                    r.admitted = now
                    r.prefix_hit_tokens = start
                    prefix_warm = True
                in_pass.append((r, start, r.cache))
                tokens += r.cache - start
            if not in_pass:
                return
            if len(in_pass) == 1:
                _, start, end = in_pass[0]
                t = sm.prefill_seconds(end, start, chunk)
            else:
                t = sm.prefill_pass_seconds([(a, e) for _, a, e in in_pass], chunk)
            now += t
            out.prefill_seconds += t
            members = in_pass[:]
            in_pass.clear()
            for r, start, end in members:
                if r.generated == 0:
                    r.generated = 1
                    r.first_token = now
                else:
                    r.recomputed += end - start
                note_peak(r)
                if r.generated >= r.output:
                    done(r)
                else:
                    r.state = RUNNING
                    running.append(r)

    def pick_victim() -> int:
        if victim == "newest":
            return len(running) - 1
        if victim == "fewest-tokens":
            best = 0
            for j, r in enumerate(running):
                if r.cache <= running[best].cache:     # the newest of equals
                    best = j
            return best
        order = sorted(range(len(running)), key=lambda j: (-running[j].cache, j))
        protected = set(order[: len(running) // 2])
        return max(j for j in range(len(running)) if j not in protected)

    def blocks_short() -> int:
        return sum(blocks_for(r.cache + 1) - r.blocks for r in running) - free

    def copy_out(r: Req) -> float:
        """r's cache onto the device-to-host queue of the link and into DRAM; returns when the copy lands."""
        nonlocal d2h_free, dram_used
        size = nbytes(r.cache)
        d2h_free = max(now, d2h_free) + copy_seconds(r.cache)
        r.copied_out_at = d2h_free
        r.dram = size
        dram_used += size
        out.peak_dram_bytes = max(out.peak_dram_bytes, dram_used)
        out.swapped_out_bytes += size
        r.swap_outs += 1
        return d2h_free

    def preempt() -> None:
        nonlocal now
        until = now
        while blocks_short() > 0:
            r = running.pop(pick_victim())
            r.preemptions += 1
            size = nbytes(r.cache)
            if policy == "swap" or (policy == "swap-then-recompute" and dram_used + size <= dram_cap):
                until = max(until, copy_out(r))
                r.state = SWAPPED
                swapped.append(r)
            else:
                r.state = WAITING
                waiting.insert(0, r)
            release(r)
        out.swap_stall_seconds += until - now
        now = until

    def step_adds() -> int:
        return sum(blocks_for(r.cache + 1) - r.blocks for r in running)

    def offload() -> bool:
        """Victims out to DRAM, without waiting, until the threshold's excess is covered; False if none went."""
        excess = occupancy() + step_adds() - cap_t
        moved = 0
        while moved < excess and len(running) > 1:
            j = pick_victim()
            r = running[j]
            if dram_cap is not None and dram_used + nbytes(r.cache) > dram_cap:
                break
            running.pop(j)
            r.lands_at = copy_out(r)
            r.offloads += 1
            r.state = LEAVING
            leaving.append(r)
            moved += r.blocks
        return moved > 0

    # --- the loop: one decode step (or one admission, preemption or wait) per turn -----------------------------
    turns = 0
    while any(r.state != DONE for r in reqs):
        turns += 1
        if turns > MAX_TURNS:
            raise RuntimeError(f"the reference passed {MAX_TURNS:,} turns: a trace too long for it, or a loop")
        while pending and pending[0][0] <= now:
            t, i = heapq.heappop(pending)
            reqs[i].arrival, reqs[i].state = t, WAITING
            waiting.append(reqs[i])
        for r in sorted((r for r in leaving if r.lands_at <= now), key=lambda r: (r.lands_at, r.id)):
            leaving.remove(r)
            release(r)
            r.state = SWAPPED
            swapped.append(r)
        for r in sorted((r for r in landing if r.lands_at <= now), key=lambda r: (r.lands_at, r.id)):
            landing.remove(r)
            dram_used -= r.dram
            r.dram = 0
            r.state = RUNNING
            running.append(r)
        if may_admit:
            before = now
            admit()
            if now > before:
                continue
        if not running:
            if not may_admit:
                may_admit = True
                continue
            nxt = [t for t, _ in pending[:1]] + [r.lands_at for r in landing + leaving]
            if not nxt:
                if waiting or swapped:
                    continue
                break
            now = max(now, min(nxt))
            continue
        if blocks_short() > 0:
            preempt()
            may_admit = False
            continue
        if cap_t is not None and len(running) > 1 and occupancy() + step_adds() > cap_t and offload():
            continue
        # one decode step for the batch as it is
        b = len(running)
        out.peak_running = max(out.peak_running, b)
        cache_bytes = sum(reads(r.prompt + r.generated)[0] for r in running)
        att_flops = sum(reads(r.prompt + r.generated)[1] for r in running)
        dt = decode_price(s, sm, b, cache_bytes, att_flops, [r.prompt + r.generated for r in running], speculative)
        now += dt
        out.decode_steps += 1
        out.steps.append((b, dt))
        for r in running:
            r.generated += 1
            take(r, blocks_for(r.cache) - r.blocks)
            note_peak(r)
        may_admit = True
        for r in [r for r in running if r.generated >= r.output]:
            running.remove(r)
            done(r)
    out.simulated_seconds = now
    # a closed loop whose duration ended first never submitted the last requests: they are not part of the run
    assert all(r.state == NOT_YET for r in reqs[submitted:])
    out.reqs = reqs[:submitted]
    return out


# === vLLM V1 (``--engine vllm``): one engine step per loop turn =====================================================
# Written from the rules kvplan/engines/vllm_scheduler.py documents (vLLM V1's Scheduler.schedule), with real block
# ids: a free queue of ids (the pool's, then every freed request's in reverse order, its tail first), allocations
# from its front (evicting what a block cached), a victim's full blocks hashed by (request, place) until evicted,
# and on resume the run of its leading blocks still hashed taken back out of the queue.
#
# 1. Arrivals join the back of the waiting queue; what falls during a step is seen at its end.
# 2. A step: the decoding requests (each one token, blocks for its computed tokens + 1) in batch order, then the
#    request part-way through its prefill (the newest: min(its remaining tokens, budget left) tokens). While the
#    decoders' blocks are not free, a victim leaves (``newest``: the last of the batch, the part-way one counted
#    as the newest; other rules over the batch's cached tokens); then while the part-way chunk's are not, likewise
#    (a decoder that leaves then gives back the block it had just taken too). A victim's blocks go to the free
#    queue, tail first; it goes to the front of the waiting queue with its tokens (prompt + generated).
# 3. With no victim this step: the waiting queue from its front while the budget lasts and fewer than max_batch
#    requests run: hit = min(shared prefix blocks (once a prompt has been admitted) + its leading own blocks still
#    hashed, (tokens - 1) // block) whole blocks; it takes min(tokens - hit, budget left) tokens and needs blocks
#    for hit + those tokens among the free ones (its hit blocks are among them); the first that does not fit stops.
# 4. The step's price: StepModel.mixed_step(decoders, their reads at prompt + generated, chunks). A decoder gains
#    a token; a chunk that reaches the request's tokens gives it a token (its first, or the next after a
#    recompute). A request with all its output is done at the step's end (batch order), its blocks freed.
# By release (the scenario's pinned vLLM; the wheels read on both sides of each boundary):
# 5. From v0.19.0 (SchedulerConfig.scheduler_reserve_full_isl = True) rule 3's admission needs blocks for all the
#    request's tokens (prompt + generated), not for hit + the chunk, among the free ones.
# 6. From v0.24.0 (BlockPool.free_blocks: blocks without a hash prepended) a freed request's blocks that hold no
#    full block of its computed tokens (its partial last block, a block just taken for a step it did not run) go
#    to the FRONT of the free queue, in the order freed (its tail first at the very front); its full blocks go to
#    the back as before (a finished request's too: they are hashed, though nothing kvplan runs hits them again).
# 7. Async scheduling (on by default from v0.14.0; ``async_scheduling`` True/False as vLLM's flag): vLLM decides each
#    step while the step before it runs, so the decision made when a step starts sees only what the engine knew when
#    the step before it started: a request that arrived after that (during the step just ended) is not seen (the
#    waiting queue is taken from its front only while its head arrived by then; a victim arrived long before), and
#    the requests that finished at the end of the step just ended still hold their blocks and count against
#    max_batch; their blocks are freed once the decision has taken its own, in the order they finished. A decision
#    that would run nothing (no decoder, no chunk, no victim) is an empty step: at once the finished requests' blocks
#    are freed and the waiting queue looked at again with every arrival seen. After a turn that ran no step (idle,
#    or every request preempted), the next decision sees everything.
# 8. vLLM's native CPU offloading connector (``kv_offloading_bytes``, from v0.14.0), one entry per offloaded block
#    keyed (request, place) in an ordered dict, least recently used first, as vLLM's LRUCachePolicy holds them (the
#    shared prefix's blocks are one copy outside the CPU pool of C = bytes // (block bytes x TP x PP) - shared
#    blocks). An entry is -1 (stored while its request runs: neither loadable nor evictable), 0 (ready) or the
#    loads reading it.
#    a. Stores, at the end of every step, in this order: the requests first scheduled in the step, the decoders in
#       batch order, the other chunks: a request's places from where it stopped (``shared`` at first) up to its full
#       blocks of its computed tokens, those not on the host yet; when fewer than those are free, the first ready
#       entries of the dict (not its own places asked for) are evicted, or, when too few are, nothing is stored (it
#       tries again at its next step); the new entries go to the dict's end, then all its places below the new end
#       are touched (the last place first, so its first ends most recent). All the step's stored blocks are one copy
#       on the device-to-host direction of the host link (``_link_costs``), queued at the step's end; the request's
#       stores land when it does.
#    b. A victim's and a finished request's entries become ready; before the next step that runs, the clock waits
#       until every victim's stores have landed (counted as swap stall).
#    c. The waiting queue (after the loads of rule d): each request looked at touches its places below its full
#       blocks; then from its GPU hit's block on, its ready places in a row (within its full blocks) can load. With
#       any: it is admitted when blocks for its tokens (rule 5) or else for hit + loaded tokens are free; it takes
#       blocks for hit + loaded tokens now, no budget and no seat; its places loaded count one reader more; the load
#       starts now on the host-to-device direction, after the loads before it; its stores go on after the loaded
#       ones; it leaves the waiting queue. Without: as rule 3.
#    d. A load is seen by a decision that sees arrivals up to a time it landed by (at once after a turn without a
#       step); then its readers are taken off, and, in the order the loads started, before the waiting queue, while
#       the budget lasts and seats are left: a seen one takes min(tokens - loaded, budget) tokens (its computed
#       tokens are hit + loaded, one less when that is all its tokens) when the blocks for them (and, rule 5, for
#       all its tokens) are free, else the waiting is over for this step; loads not seen are passed over.
#    e. A turn with nothing to run but loads in flight moves the clock to the first of them to land (or an arrival
#       before it).
# 10. A chunk cap T (``long_prefill_token_threshold``, vLLM's --long-prefill-token-threshold; from v0.8.5): the turn
#    takes the batch in its order (the order requests were admitted in; a request keeps its place while it prefills
#    over several turns), while budget is left: a decoder one token and blocks for its computed tokens + 1; a
#    request still prefilling min(its tokens left, T, budget left) tokens and their blocks. While its blocks are not
#    free the last of the batch is preempted (rule 2's victim), until they are or it was itself the victim, which
#    ends the batch's part of the turn. Once the budget is spent the rest of the batch waits the turn out (a decoder
#    gains no token). Rule 3's waiting requests each take min(tokens - hit, T, budget left); every request still
#    prefilling holds a seat. From v0.31.0 T applies only when the batch (with rule 7's finished-but-held requests)
#    and the waiting requests seen number more than one; before, always.
DECODE, PREFILL = "decode", "prefill"
ASYNC_SINCE = (0, 14, 0)


def run_vllm(s, workload, victim: str = "newest", max_batch: int | None = None, speculative=None,
             async_scheduling: bool | None = None, kv_offloading_bytes: int | None = None,
             long_prefill_token_threshold: int = 0) -> RefRun:
    block = int(capacity.block_tokens(s).value)
    alone = dataclasses.replace(s, shared_prefix_tokens=0)
    block_bytes = capacity.request_bytes(alone, block) - capacity.request_bytes(alone, 0)
    hit_tokens = s.shared_prefix_tokens // block * block
    shared = hit_tokens // block
    copy_blocks = -(-capacity.shared_prefix_copy_bytes(s, block=block) // block_bytes) if hit_tokens else 0
    total_blocks = int(capacity.kv_pool(s).kv_pool_bytes) // block_bytes - copy_blocks
    mnbt, mns = s.engine_adapter.batch_limits_for(s)
    budget0 = int(mnbt.value)
    max_batch = max_batch or int(mns.value)
    release = s.engine_adapter.version
    whole_input = release >= (0, 19, 0)            # rule 5
    hashless_first = release >= (0, 24, 0)         # rule 6
    asyn = release >= ASYNC_SINCE if async_scheduling is None else async_scheduling   # rule 7
    cap_t = long_prefill_token_threshold       # rule 10
    cap_only_with_company = release >= (0, 31, 0)
    # rule 9: a request holds the blocks of its tokens and D slots more (vLLM V1's allocate_slots: the K drafts it
    # verifies and, from v0.9.0, where MTP is use_eagle(), the K lookahead slots the drafter writes)
    ahead = 0 if speculative is None else speculative[0] * (2 if release >= (0, 9, 0) else 1)
    sm = costs.step_model(s, speculative=speculative is not None)   # rule 8: the target's layers
    prompts = [int(p) for p in workload.prompts]
    outputs = [int(x) for x in workload.outputs]
    reqs = [Req(i, p, o) for i, (p, o) in enumerate(zip(prompts, outputs, strict=True))]
    longest = max(p + o - 1 for p, o in zip(prompts, outputs, strict=True))
    out = RefRun(reqs, block, block_bytes, total_blocks, 0)

    memo: dict[int, int] = {}

    def blocks_for(tokens: int) -> int:
        if tokens not in memo:
            memo[tokens] = -(-capacity.request_bytes(s, tokens) // block_bytes)
        return memo[tokens]

    def slots_for(tokens: int) -> int:
        return blocks_for(tokens + ahead)      # rule 9

    # a victim's blocks are found again only where each block above the shared prefix is one block of tokens
    reuse = all(blocks_for(hit_tokens + m * block) - blocks_for(hit_tokens + (m - 1) * block) == 1
                for m in range(1, (longest - hit_tokens) // block + 2))

    queue = list(range(total_blocks))            # free block ids, front first
    hashed: dict[int, tuple[int, int]] = {}      # block id -> (request, its place), while cached and free
    owned: dict[int, list[int]] = {r.id: [] for r in reqs}
    left_behind: dict[int, list[int]] = {}       # a victim's blocks as it left them (place order)
    computed = {r.id: 0 for r in reqs}
    high = {r.id: 0 for r in reqs}               # the most tokens it ever had computed
    status: dict[int, str] = {}
    now = 0.0
    running: list[Req] = []
    waiting: list[Req] = []
    pending, submitted = _first_arrivals(workload, len(reqs))
    prefix_warm = False
    started: float | None = None                 # rule 7: when the last step that ran started (None: no step since)
    late: list[Req] = []                         # rule 7: finished at the end of the step before, blocks still held
    # rule 8: the CPU offloading connector
    offloading = kv_offloading_bytes is not None
    world = s.parallelism.tp * s.parallelism.pp
    cpu_cap = max(0, kv_offloading_bytes // (block_bytes * world) - shared) if offloading else 0
    link = float(costs.host_link_rate(s.hardware, s.host_link_gbs).value)

    def move(n: int) -> float:
        return costs.swap_seconds(n * block_bytes, n, link, costs.CostSettings(), shared_link=True)

    cpu: dict[tuple[int, int], int] = {}         # (request, place) -> -1 stored while running, 0 ready, readers
    stop_at = {r.id: shared for r in reqs}       # the next place to store
    stores_land = {r.id: 0.0 for r in reqs}
    loads: list[list] = []                       # [request, lands at, places, tokens once landed], in start order
    d2h = h2d = 0.0
    flush_until = 0.0
    out.offload = {"loads": 0, "loaded_blocks": 0, "loaded_tokens": 0, "stored_blocks": 0, "evicted_blocks": 0,
                   "failed_stores": 0, "peak_cpu_blocks": 0, "load_seconds": 0.0, "store_seconds": 0.0,
                   "flush_stall_seconds": 0.0, "cpu_blocks": cpu_cap}
    LOADING = "loading"

    def touch(rid: int, upto: int) -> None:
        for k in reversed(range(upto)):
            if (rid, k) in cpu:
                cpu[(rid, k)] = cpu.pop((rid, k))   # to the end: most recent

    def store(r: Req, full: int) -> int:
        start = stop_at[r.id]
        if full <= start:
            return 0
        asked = [(r.id, k) for k in range(start, full)]
        new = [key for key in asked if key not in cpu]
        short = len(new) - (cpu_cap - len(cpu))
        if short > 0:
            gone = []
            for key, readers in cpu.items():
                if readers == 0 and key not in asked:
                    gone.append(key)
                    if len(gone) == short:
                        break
            if len(gone) < short:
                out.offload["failed_stores"] += 1
                return 0
            for key in gone:
                del cpu[key]
            out.offload["evicted_blocks"] += short
        stop_at[r.id] = full
        if not new:
            return 0
        for key in new:
            cpu[key] = -1
        touch(r.id, full)
        out.offload["peak_cpu_blocks"] = max(out.offload["peak_cpu_blocks"], len(cpu))
        return len(new)

    def make_ready(rid: int) -> None:
        for key in cpu:
            if key[0] == rid and cpu[key] == -1:
                cpu[key] = 0

    def tokens(r: Req) -> int:
        return r.prompt + r.generated

    def take_front(r: Req, k: int) -> None:
        for _ in range(k):
            bid = queue.pop(0)
            hashed.pop(bid, None)                # evicted
            owned[r.id].append(bid)

    def free_all(r: Req, cached_tokens: int, victim: bool) -> None:
        """r's blocks to the back of the queue, its last block first; a victim's full own blocks of its
        ``cached_tokens`` stay hashed. Rule 6: its blocks past those full ones go to the queue's front instead."""
        mine = owned[r.id]
        full = (cached_tokens // block - shared) if reuse else 0
        first: list[int] = []
        for k in range(len(mine) - 1, -1, -1):
            if hashless_first and reuse and k >= full:
                first.append(mine[k])
                continue
            queue.append(mine[k])
            if victim and k < full:
                hashed[mine[k]] = (r.id, k)
        queue[:0] = first
        owned[r.id] = []

    def preempt(r: Req) -> None:
        running.remove(r)
        r.preemptions += 1
        if offloading:                           # rule 8b
            nonlocal flush_until
            make_ready(r.id)
            flush_until = max(flush_until, stores_land[r.id])
        left_behind[r.id] = list(owned[r.id])
        free_all(r, computed[r.id], True)
        computed[r.id] = 0
        status[r.id] = WAITING
        waiting.insert(0, r)

    def choose() -> Req:
        if victim == "newest":
            return running[-1]
        caches = [computed[r.id] for r in running]
        if victim == "fewest-tokens":
            best = 0
            for j, c in enumerate(caches):
                if c <= caches[best]:
                    best = j
            return running[best]
        order = sorted(range(len(running)), key=lambda j: (-caches[j], j))
        protected = set(order[: len(running) // 2])
        return running[max(j for j in range(len(running)) if j not in protected)]

    def finish(r: Req) -> None:
        nonlocal submitted
        r.state, r.finish = DONE, now
        r.peak_bytes = capacity.request_bytes(s, r.prompt + r.output - 1)
        running.remove(r)
        if offloading:                           # rule 8b
            make_ready(r.id)
        if asyn:
            late.append(r)                       # rule 7: freed after the next decision
        else:
            free_all(r, computed[r.id], False)
        if workload.arrivals is None and submitted < len(reqs):
            t = now + workload.think_s
            if workload.duration_s is None or t < workload.duration_s:
                heapq.heappush(pending, (t, submitted))
                submitted += 1

    turns = 0
    while any(r.state != DONE for r in reqs[:submitted]):
        turns += 1
        if turns > MAX_TURNS:
            raise RuntimeError(f"the reference passed {MAX_TURNS:,} turns")
        while pending and pending[0][0] <= now:
            t, i = heapq.heappop(pending)
            reqs[i].arrival, reqs[i].state = t, WAITING
            waiting.append(reqs[i])
        budget = budget0
        preempted = False
        chunks: list[tuple[Req, int, int]] = []
        seen = started if asyn and started is not None else float("inf")   # rule 7
        if cap_t:                                # rule 10: the batch in its order
            company = len(running) + len(late) + sum(1 for q in waiting if q.arrival <= seen)
            T = cap_t if (company > 1 or not cap_only_with_company) else 0
            decoders = []
            k = 0
            while k < len(running) and budget > 0:
                r = running[k]
                if status[r.id] == DECODE:
                    c = 1
                else:
                    c = tokens(r) - computed[r.id]
                    if 0 < T < c:
                        c = T
                    c = min(c, budget)
                want = slots_for(computed[r.id] + c) - len(owned[r.id])
                while want > len(queue):
                    v = running[-1]
                    preempt(v)
                    preempted = True
                    if v is r:
                        break
                if r not in running:
                    break
                take_front(r, want)
                if status[r.id] == DECODE:
                    decoders.append(r)
                else:
                    chunks.append((r, computed[r.id], computed[r.id] + c))
                budget -= c
                k += 1
        while not cap_t and sum(slots_for(computed[r.id] + 1) - len(owned[r.id]) for r in running
                                if status[r.id] == DECODE) > len(queue):
            preempt(choose())
            preempted = True
        if not cap_t:
            decoders = [r for r in running if status[r.id] == DECODE]
            for r in decoders:
                take_front(r, slots_for(computed[r.id] + 1) - len(owned[r.id]))
            budget -= len(decoders)
        part = [r for r in running if status[r.id] == PREFILL]
        if part and budget > 0 and not cap_t:
            p = part[0]
            c = min(tokens(p) - computed[p.id], budget)
            while slots_for(computed[p.id] + c) - len(owned[p.id]) > len(queue):
                v = choose()
                preempted = True
                preempt(v)
                if v is p:
                    break
                decoders.remove(v)
            if p in running:
                take_front(p, slots_for(computed[p.id] + c) - len(owned[p.id]))
                chunks.append((p, computed[p.id], computed[p.id] + c))
                budget -= c
        fresh: list[Req] = []                    # rule 8a: first scheduled in this step
        while not preempted:
            blocked = False
            if offloading:                       # rule 8d
                lseen = min(seen, now)
                for ld in loads:
                    if ld[1] <= lseen and ld[2] is not None:
                        for key in ld[2]:
                            cpu[key] -= 1
                        ld[2] = None
                k = 0
                while k < len(loads) and budget > 0 and len(running) + len(late) < max_batch:
                    q, lands, _places, after = loads[k]
                    if lands > lseen:
                        k += 1
                        continue
                    c = min(tokens(q) - after, budget)
                    if ((whole_input and blocks_for(tokens(q)) - len(owned[q.id]) > len(queue))
                            or blocks_for(after + c) - len(owned[q.id]) > len(queue)):
                        blocked = True
                        break
                    loads.pop(k)
                    take_front(q, blocks_for(after + c) - len(owned[q.id]))
                    computed[q.id] = after
                    status[q.id] = PREFILL
                    q.state = RUNNING
                    running.append(q)
                    chunks.append((q, after, after + c))
                    budget -= c
            while (not blocked and waiting and budget > 0 and len(running) + len(late) < max_batch
                   and waiting[0].arrival <= seen):
                q = waiting[0]
                cap = (tokens(q) - 1) // block
                own = 0
                before = left_behind.get(q.id, [])
                while own < len(before) and hashed.get(before[own]) == (q.id, own):
                    own += 1
                base = shared if prefix_warm else 0
                got = min(base + own, cap)
                own_used = max(0, got - base)
                hit = got * block
                c = tokens(q) - hit
                if cap_t and 0 < T < c:             # rule 10
                    c = T
                c = min(c, budget)
                ext = 0
                if offloading:                   # rule 8c: touched, then its ready places in a row after the hit
                    full = tokens(q) // block
                    touch(q.id, full)
                    if full * block - hit >= block:
                        while got + ext < full and cpu.get((q.id, got + ext), -1) >= 0:
                            ext += 1
                if ext:
                    if blocks_for(tokens(q) if whole_input else hit + ext * block) > len(queue):
                        break
                elif slots_for(tokens(q) if whole_input else hit + c) > len(queue):
                    break
                waiting.pop(0)
                for bid in before[:own_used]:     # hits: out of the free queue, back to the request
                    queue.remove(bid)
                    del hashed[bid]
                    owned[q.id].append(bid)
                left_behind.pop(q.id, None)
                if q.preemptions:
                    q.recompute_hit_tokens += own_used * block
                else:
                    q.admitted, q.prefix_hit_tokens = now, hit
                if hit_tokens:
                    prefix_warm = True
                if ext:                          # rule 8c: the load
                    places = [(q.id, got + k) for k in range(ext)]
                    for key in places:
                        cpu[key] += 1
                    took = move(ext)
                    h2d = max(now, h2d) + took
                    after = hit + ext * block
                    loads.append([q, h2d, places, after - (after == tokens(q))])
                    stop_at[q.id] = got + ext
                    take_front(q, blocks_for(after) - len(owned[q.id]))
                    status[q.id] = LOADING
                    q.state = LOADING
                    out.offload["loads"] += 1
                    out.offload["loaded_blocks"] += ext
                    out.offload["loaded_tokens"] += ext * block
                    out.offload["load_seconds"] += took
                    continue
                if not q.preemptions:
                    fresh.append(q)
                take_front(q, slots_for(hit + c) - len(owned[q.id]))
                computed[q.id] = hit
                status[q.id] = PREFILL
                running.append(q)
                chunks.append((q, hit, hit + c))
                budget -= c
            if decoders or chunks or not asyn or (not late and seen == float("inf")):
                break
            for r in late:                       # rule 7: an empty step; decided again at once, seeing everything
                free_all(r, computed[r.id], False)
            late.clear()
            seen = float("inf")
            if cap_t:                            # rule 10: the new decision counts again
                company = len(running) + sum(1 for q in waiting if q.arrival <= seen)
                T = cap_t if (company > 1 or not cap_only_with_company) else 0
        out.peak_blocks_used = max(out.peak_blocks_used, total_blocks - len(queue))
        for r in late:                           # rule 7: the finished requests' blocks, after the decision
            free_all(r, computed[r.id], False)
        late.clear()
        b = len(decoders)
        if not b and not chunks:
            started = None
            if preempted:
                continue
            if loads:                            # rule 8e
                now = max(now, min(min(ld[1] for ld in loads), pending[0][0] if pending else float("inf")))
                continue
            if pending:
                now = max(now, pending[0][0])
                continue
            break
        decided = now
        if offloading and flush_until > now:     # rule 8b: the victims' stores land first
            out.offload["flush_stall_seconds"] += flush_until - now
            out.swap_stall_seconds += flush_until - now
            now = flush_until
        cb = sum(float(sm.request_cache(float(tokens(r)))[0]) for r in decoders)
        cf = sum(float(sm.request_cache(float(tokens(r)))[1]) for r in decoders)
        spans = [(a, e) for _, a, e in chunks]
        dt = sm.mixed_step(b, cb, cf, spans)
        if chunks:
            out.prefill_seconds += dt - (sm.mixed_step(b, cb, cf, ()) if b else 0.0)
            out.mixed_steps += 1
            out.mixed_prefill_tokens += sum(e - a for a, e in spans)
        if b and speculative is not None:    # rule 8: the decode tokens' part priced speculatively
            dt += decode_price(s, sm, b, cb, cf, [tokens(r) for r in decoders], speculative) - sm.mixed_step(
                b, cb, cf, ())
        for q, a, e in chunks:
            q.recomputed += max(0, min(e, high[q.id]) - a)
        out.peak_running = max(out.peak_running, b + len(chunks))
        started = decided
        now += dt
        out.decode_steps += 1
        out.steps.append((b, dt))
        for r in decoders:
            computed[r.id] += 1
            r.generated += 1
        for q, _, e in chunks:
            computed[q.id] = e
            if e == tokens(q):
                if q.generated == 0:
                    q.first_token = now
                q.generated += 1
                status[q.id] = DECODE
        if offloading:                           # rule 8a: the step's stores, one copy at its end
            total = 0
            storing = []
            order = ([(q, e) for q, _, e in chunks if q in fresh] + [(r, computed[r.id]) for r in decoders]
                     + [(q, e) for q, _, e in chunks if q not in fresh])
            for r, have in order:
                n = store(r, have // block)
                if n:
                    total += n
                    storing.append(r)
            if total:
                took = move(total)
                d2h = max(now, d2h) + took
                out.offload["stored_blocks"] += total
                out.offload["store_seconds"] += took
                for r in storing:
                    stores_land[r.id] = d2h
        for r in list(running):
            high[r.id] = max(high[r.id], computed[r.id])
            if status[r.id] == DECODE and r.generated >= r.output:
                finish(r)
    out.simulated_seconds = now
    out.reqs = reqs[:submitted]
    return out
