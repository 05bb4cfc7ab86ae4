"""An independent, token-by-token reference for ``kvplan simulate --engine sglang`` (the tests' check on
``kvplan/engines/sglang_scheduler.py`` driven by the event loop).

Written from SGLang v0.5.23's rules as that module's docstring states them (read from the release's
``python/sglang/srt/managers/schedule_policy.py``, ``schedule_batch.py``, ``scheduler.py`` and
``scheduler_components/new_token_ratio_tracker.py``), with none of the engine's functions: no block table, no
closed-form ratio or step sums, no replica state. One ``Req`` per request; each loop turn is one SGLang scheduler
iteration: a prefill round (the waiting queue in order, admission by the new-token reservation) or one decode step
(with its memory check, retraction and ratio decay), each decode step priced by ``StepModel.step`` for the batch it
holds. Inputs are kvplan's public ones, as ``tests/sim_reference.py`` uses them: the pool and block
(``kvplan.calc.capacity``), the request's bytes at a context, and the one cost model (``kvplan.calc.costs``).

The rules (one replica; tokens = blocks x block, a page = one block):

1. Arrivals join the back of the waiting queue at their time; what happens during a step or a prefill is seen when
   it ends. A closed loop's next request arrives ``think`` seconds after a completion.
2. Each iteration, first a prefill round if the waiting queue has requests, the batch is not "full" and no
   retraction happened since the last decode step: requests in queue order while the running batch (with the
   round's) holds fewer than the running cap and
   ``extend + min(output - generated, 4096) + page < free tokens - reserved``, where ``reserved`` is
   ``sum over running requests of min(output - generated, 4096) x ratio`` plus, for each request taken in this
   round, ``page + min(output, 4096)`` (its extension is in the blocks it now holds). ``extend`` is the prompt
   (and a retracted request's generated tokens) less the shared prefix once it is cached. After a request is
   taken: free tokens - reserved <= 0 ends admission ("full"); the round's chunk budget (chunked_prefill_size,
   and max_prefill_tokens: the scenario's --chunked-prefill-size / --max-prefill-tokens, else the GPU's default and
   16384) spent ends the round (the next iteration starts another). A request longer than
   the chunk left: its first chunk is that budget (whole pages), then whole chunks; the round of its last chunk
   takes it as its only earlier member (the others now running) with the chunk budget less that chunk (paged).
   A request that fails the check stops admission and makes the batch full, unless nothing runs or was taken
   (then it is taken anyway); so does the running cap. "Full" clears when the running batch shrinks (a request
   finishes, also at its prefill, or is retracted) or is empty.
3. A taken request gets blocks for its prompt (a retracted one: prompt + generated). The requests a round takes
   are one extend batch, one forward (SGLang v0.5.23 ``Scheduler._get_new_batch_prefill_raw``: one
   ``ScheduleBatch.init_new`` of the adder's ``can_run_list``): one pass priced once at its end by
   ``StepModel.prefill_pass_seconds`` of their (cached, fill) token ranges (one alone: ``prefill_seconds``; with
   HiCache the longer of it and the pass's load-backs, summed), until a request the round chunks: that one ends the
   pass before it and is priced alone in chunks of chunked_prefill_size (``StepModel.prefill_seconds``), and the
   requests after it are the next pass. The prefill gives a token (the first, or a retracted request's next); a
   request it gives its last token finishes at the end of the pass so far (its own and the earlier members').
   Its recomputed tokens: prompt + generated - prefix.
   Under attention DP (R = ``StepModel.lockstep_ranks`` > 1: the ranks step together in one forward) N ranks'
   prompts share a pass, N = min(R, max(1, x + e^-x)), x = R x the rank's arrival rate x one prompt's pass alone
   (the rate: (n - 1) / the arrivals' span; a closed loop's U / (think + D x the steady step of U + that pass), D
   and the prompt the workload's means); each pass prices its prompts with their experts over EP / N GPUs (own); the
   rank's clock pays own + (R / N - 1) x max(own - s, 0) (the other passes lengthen one of its decode steps each):
   s its steady step at the batch (a closed loop's users; else Little's law at the rate, B = rate x D x step(B) from
   1, 8 rounds, at most the running cap); a first token comes at the end of its own pass. The new requests a
   round takes are one SGLang batch whose result is processed once: their first tokens all come at the latest of
   theirs, in groups that a request the round chunks ends (before it) and starts; a request with one output
   token (done at its prefill) keeps its own.
4. Otherwise a decode step: if the batch's next tokens need more blocks than are free, retract: requests in order
   of fewest generated tokens, then longest prompt (the later in the batch among equals), at least one and until
   it fits, keeping one; each frees its blocks and goes to the back of the waiting queue; the ratio becomes
   min(1, (sum generated + 20 x kept) / (sum outputs + 1)) over the kept. Else the ratio decays: max(ratio -
   decay, floor). Then the step runs for the batch as it is.
5. Ratio: init = 0.7 (x 0.3 under DP attention), floor = init x 0.14, decay = (init - floor) / 600; reset to init
   when an iteration has nothing to run (idle).
6. Radix tree (where every page past the shared prefix is one block: no windows or state layers): a request's
   path holds its tokens up to its last insert, whole pages: its prompt after its first prefill, its prompt and
   outputs after a re-prefill, all its cache (prompt + output - 1 tokens) when it finishes. A running request's
   path is locked; every other path is evictable and its blocks count as free. Free tokens that no path holds are
   "unused"; when an allocation (a decode step's, a prefill round's after the round) finds fewer unused than it
   needs, the least recently used path (matched or inserted longest ago) loses its last segment, and so on until
   they suffice. A decode step short of free blocks first evicts all it can, then retracts; a victim's path (to
   its last insert) stays, and after each victim evictions make unused at least max(20 x kept requests, the
   step's need). A waiting request looked at by a round is matched (its path used now); taken, its path is
   locked and its extension is fill - max(shared prefix, its path); the admission check is on that extension
   against free tokens less its locked path.
8. Overlap scheduler (``overlap``: on by default, as SGLang's; off with pipeline parallelism or ``overlap=False``):
   each decision
   is made while the batch before it runs, so after a batch (a prefill round or a decode step) the next decision
   sees the arrivals up to that batch's start only (the waiting queue is taken from its front while its head arrived
   by then), and the requests that finished at its end (at a decode step, or at their prefill) still hold their
   blocks, their running seats and their locked paths; they are processed (into the tree, blocks freed, "full"
   cleared) once the decision is made: after a round's allocation, or before a decode step. A decision that would
   run nothing while they hold theirs (no request taken, and nothing left running or the step short of blocks) is
   an empty batch: they are processed and the decision made again at once, seeing every arrival. After a turn that
   ran no batch (idle), the decision sees everything.
9. Polling (``recv_interval`` N, SGLang's --scheduler-recv-interval; 1: every turn): a turn first adds the weight of
   the turn before's batch to a counter (a prefill round 1000, a decode step or none 1) and polls when it reaches N
   (the counter back to 0), or at once when nothing runs or is held; a poll receives the arrivals the turn's
   decision sees (rule 8), and a prefill round takes only received requests.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass, field

from sim_reference import decode_price  # rule 8, speculative decoding: the same rule as the rule book's reference

from kvplan.calc import capacity, costs

MAX_TURNS = 5_000_000
CLIP = 4096


@dataclass
class Req:
    id: int
    prompt: int
    output: int
    generated: int = 0
    blocks: int = 0
    arrival: float = float("nan")
    admitted: float = float("nan")
    first_token: float = float("nan")
    finish: float = float("nan")
    preemptions: int = 0
    recomputed: int = 0
    peak_bytes: int = 0
    prefix_hit_tokens: int = 0
    blocks_charged: int = 0         # tokens of blocks its last prefill took (a round charges them till it ends)
    done: bool = False
    recompute_hit_tokens: int = 0   # tokens its re-prefills found on its own path in the radix tree
    path: list = field(default_factory=list)   # its radix-tree path: the token counts its inserts ended at
    used: int = 0                   # when its path was last matched or inserted (a counter)
    running: bool = False           # admitted and not finished or retracted: its path is locked
    hpath: list = field(default_factory=list)  # the hash ids of its prompt it holds while running
    dev: list = field(default_factory=list)    # HiCache: per segment of its path, whether it is on the device
    backed: list = field(default_factory=list)  # HiCache: per segment, whether host memory holds a copy
    host_hit_tokens: int = 0        # HiCache: tokens its prefills loaded back from host memory


@dataclass
class RefRun:
    reqs: list
    block_tokens: int
    total_blocks: int
    chunk: int
    max_running: int
    simulated_seconds: float = 0.0
    decode_steps: int = 0
    peak_blocks_used: int = 0
    peak_running: int = 0
    prefill_seconds: float = 0.0
    ratios: list = field(default_factory=list)     # (step count, ratio) after every retraction
    host_blocks: int = 0                           # HiCache: the host pool
    written_blocks: int = 0                        # HiCache: blocks written through
    peak_host_blocks: int = 0

    def column(self, name: str) -> list:
        return [getattr(r, name) for r in self.reqs]


def default_chunk(hbm_gib: float) -> int:
    """chunked_prefill_size by GPU memory (memory_hook.py @v0.5.23)."""
    for below, size in ((20, 2048), (35, 4096), (60, 4096), (90, 8192), (160, 8192)):
        if hbm_gib < below:
            return size
    return 16384


def run(s, workload, max_batch: int | None = None, victim: str | None = None, speculative=None,
        hicache: dict | None = None, overlap: bool | None = None, recv_interval: int = 1) -> RefRun:
    """``recv_interval``: SGLang's --scheduler-recv-interval (rule 9). ``hicache``: SGLang's HiCache (rule 7),
    {"policy": write_through | write_through_selective, "ratio": R,
    "size_gb": G} (None: off)."""
    block = int(capacity.block_tokens(s).value)
    alone = dataclasses.replace(s, shared_prefix_tokens=0)
    block_bytes = capacity.request_bytes(alone, block) - capacity.request_bytes(alone, 0)
    hit = s.shared_prefix_tokens // block * block
    copy_blocks = -(-capacity.shared_prefix_copy_bytes(s, block=block) // block_bytes) if hit else 0
    total_blocks = int(capacity.kv_pool(s).kv_pool_bytes) // block_bytes - copy_blocks
    par = s.parallelism
    overlap = (True if overlap is None else overlap) and par.pp == 1   # rule 8
    attn_dp = par.dp if (par.dp > 1 and par.ep and par.ep > par.tp) else 1
    # rule 2's budgets: the scenario's --chunked-prefill-size (divided over the attention-DP ranks like the default)
    # and --max-prefill-tokens, else SGLang's defaults
    chunk = (s.chunked_prefill_size or default_chunk(s.hardware.hbm_capacity_gib.value)) // attn_dp
    max_prefill = s.max_prefill_tokens or 16384
    tokens = total_blocks * block
    if max_batch is None and s.max_num_seqs is None:
        est = int(tokens / s.context_limit * 512) if s.context_limit else 0
        max_running = min(max(min(est, 4096), 2048), tokens // 2)
    else:
        max_running = max_batch or s.max_num_seqs
    init = min(0.7 * (0.3 if attn_dp > 1 else 1.0), 1.0)
    floor = min(init * 0.14, 1.0)
    decay = (init - floor) / 600
    sm = costs.step_model(s, speculative=speculative is not None)   # rule 8: the target's layers
    ranks = sm.lockstep_ranks
    n_share, least = 1.0, 0.0
    if ranks > 1:          # rule 3: the prompts that share a pass
        import math

        p_mean = int(sum(int(x) for x in workload.prompts) / len(workload.prompts))
        d_mean = max(int(sum(int(x) for x in workload.outputs) / len(workload.outputs)), 1)
        arr = workload.arrivals
        if arr is not None:
            a = [float(x) for x in arr]
            rate = (len(a) - 1) / (a[-1] - a[0]) if len(a) > 1 and a[-1] > a[0] else 0.0
        else:
            u = int(workload.users or 0)
            cyc = workload.think_s + d_mean * float(sm.steady_tpot(p_mean, d_mean, u)) + sm.prefill_seconds(p_mean)
            rate = u / cyc if u else 0.0
        if rate > 0:
            x = ranks * rate * sm.prefill_seconds(p_mean, 0, chunk)
            n_share = min(ranks, max(1.0, x + math.exp(-x)))
        least = float(sm.step(1, 0.0, 0.0)["total"])
        if arr is None and workload.users:
            least = float(sm.steady_tpot(p_mean, d_mean, float(workload.users)))
        elif rate > 0:       # Little's law: B = rate x D x step(B), 8 rounds from 1, at most the running cap
            b = 1.0
            for _ in range(8):
                b = min(float(max_running), max(1.0, rate * d_mean * float(sm.steady_tpot(p_mean, d_mean, b))))
            least = float(sm.steady_tpot(p_mean, d_mean, b))
    share_ep = (par.ep or par.tp) / n_share

    def lock_price(tokens: int, cached: int) -> float:
        """Rule 3's price of a prefill on this rank's clock (its own pass: ``own_pass``)."""
        own = own_pass(tokens, cached)
        return own + (ranks / n_share - 1) * max(own - least, 0.0) if ranks > 1 else own

    def own_pass(tokens: int, cached: int) -> float:
        return sm.prefill_seconds(tokens, cached, chunk, share_ep if ranks > 1 else None)

    def pass_price(ranges: list) -> float:
        """Rule 3's price of one pass of several prompts' (cached, fill) ranges on this rank's clock: the cost model's
        pass (one weight read, the summed tokens, each prompt's attention), its experts as ``own_pass``'s."""
        if len(ranges) == 1:
            return lock_price(ranges[0][1], ranges[0][0])
        own = sm.prefill_pass_seconds(list(ranges), chunk, expert_gpus=share_ep if ranks > 1 else None)
        return own + (ranks / n_share - 1) * max(own - least, 0.0) if ranks > 1 else own

    def ahead(t: float) -> float:
        """Rule 3: how long before a pass of ``t`` s ends its prompts have their first tokens (their own pass's end)."""
        q = ranks / n_share
        return max((q - 1) * (t - least) / q, 0.0) if q > 1 else 0.0

    reqs = [Req(i, int(p), int(o)) for i, (p, o) in enumerate(zip(workload.prompts, workload.outputs, strict=True))]
    out = RefRun(reqs, block, total_blocks, chunk, max_running)
    memo: dict[int, int] = {}

    def nbytes(cache: int) -> int:
        if cache not in memo:
            memo[cache] = capacity.request_bytes(s, cache)
        return memo[cache]

    def blocks_for(cache: int) -> int:
        return -(-nbytes(cache) // block_bytes)

    def paged(t: int) -> int:
        return -(-t // block) * block

    # the radix tree is modelled where each page above the shared prefix is one more block
    longest = max(int(p) + int(o) for p, o in zip(workload.prompts, workload.outputs, strict=True))
    k = (longest - hit) // block
    tree = k <= 0 or blocks_for(hit + k * block) == k
    clock = [0]
    # rule 7, HiCache: the host pool in whole pages, one padding page more (a ratio of the device pool's tokens, or
    # GB / bytes per token)
    write_through = hicache is not None and hicache.get("policy", "write_through") == "write_through"
    if hicache is not None:
        if hicache.get("size_gb"):
            host_tokens = int(hicache["size_gb"] * 1e9 // (block_bytes / block))
        else:
            host_tokens = int((total_blocks + copy_blocks) * block * hicache.get("ratio", 2.0))
        # SGLang v0.5.6+ (pool_host/base.py HostKVCache.__init__): page_num = size // page_size + 1
        out.host_blocks = host_tokens // block + 1
    link = float(costs.host_link_rate(s.hardware, s.host_link_gbs).value)

    def load_seconds(n: int) -> float:
        """n blocks over the host link, a copy each, the link shared by both directions."""
        return costs.swap_seconds(n * block_bytes, n, link, costs.CostSettings(), shared_link=True)
    # a Mooncake trace's hash ids: each request's prompt a chain of 512-token blocks, an id shared being the same
    # block after the same prefix; the tree's hash nodes are {id: [start, end, parent id, last used]}
    blocks = getattr(workload, "blocks", None) if tree else None
    chain = [[] for _ in reqs] if blocks is None else [
        [int(x) for x in blocks.ids[int(blocks.offsets[i]):int(blocks.offsets[i + 1])]] for i in range(len(reqs))]
    hnodes: dict[int, list] = {}

    def node_blocks(h: int) -> int:
        return blocks_for(hnodes[h][1]) - blocks_for(hnodes[h][0])

    def chain_end(r: Req) -> int:
        """Where its own segments start: past its whole prompt chain as the tree holds it (0 without hash ids); a
        block another request inserted from a shorter prompt ends where that prompt did."""
        if chain[r.id] and chain[r.id][-1] in hnodes:
            return hnodes[chain[r.id][-1]][1]
        return min(r.prompt, 512 * len(chain[r.id])) // block * block if chain[r.id] else 0

    def own_blocks(r: Req) -> int:
        """The blocks of its own segments on the device (a top part of its path)."""
        ends = [e for e, d in zip(r.path, r.dev, strict=True) if d]
        return blocks_for(ends[-1]) - blocks_for(chain_end(r)) if ends else 0

    def seg_blocks(r: Req, j: int) -> int:
        return blocks_for(r.path[j]) - blocks_for(r.path[j - 1] if j else chain_end(r))

    def matched_chain(r: Req) -> list:
        ids = []
        for h in chain[r.id]:
            if h not in hnodes or hnodes[h][1] > r.prompt:
                break
            ids.append(h)
        return ids

    def lockers() -> list:
        return [q for q in reqs if q.running]

    def locked_ids() -> set:
        return {h for q in lockers() for h in q.hpath}

    def real_free() -> int:
        """free counts each holder's whole cache: a hash node two running requests hold is counted once."""
        if not tree:
            return free
        return free + sum(node_blocks(h) for q in lockers() for h in q.hpath) - sum(
            node_blocks(h) for h in locked_ids())

    def touch_path(r: Req, ids: list, own: bool) -> None:
        clock[0] += 1
        for h in ids:
            hnodes[h][3] = clock[0]
        if own:
            r.used = clock[0]

    def match(r: Req, fill: int) -> tuple:
        """(its matched chain ids, whether its own segments are matched, the tokens they cover, capped, the tokens
        of its leading nodes on the device, capped)"""
        ids = matched_chain(r)
        whole = len(ids) == len(chain[r.id])
        own = whole and bool(r.path)
        end = r.path[-1] if own else (hnodes[ids[-1]][1] if ids else 0)
        cap = (fill - 1) // block * block
        on_device = 0
        for h in ids:
            if not hnodes[h][4]:
                break
            on_device = hnodes[h][1]
        else:
            if own:
                on_device = max([on_device] + [e for e, d in zip(r.path, r.dev, strict=True) if d])
        return ids, own, min(end, cap), min(on_device, cap)

    def insert(r: Req, tokens: int) -> None:
        """Its first ``tokens`` into the tree (it is running): the chain's missing blocks, then its own segment."""
        end = tokens // block * block
        ids = chain[r.id]
        at = hnodes[r.hpath[-1]][1] if r.hpath else 0
        stopped = False
        for j in range(len(r.hpath), len(ids)):
            stop = min(r.prompt, 512 * (j + 1)) // block * block
            if stop > end or ids[j] in hnodes:
                stopped = True
                break
            if stop > at:
                hnodes[ids[j]] = [at, stop, r.hpath[-1] if r.hpath else None, 0, True, False]
                r.hpath.append(ids[j])
                at = stop
                if write_through:
                    back_up(("hash", ids[j]))
        if not stopped and len(r.hpath) == len(ids):
            if end > (r.path[-1] if r.path else chain_end(r)):
                r.path.append(end)
                r.dev.append(True)
                r.backed.append(False)
                if write_through:
                    back_up(("own", r.id, len(r.path) - 1))
        touch_path(r, r.hpath, True)

    def parents(on_device: bool) -> set:
        """The hash nodes with a child (on the device, with ``on_device``)."""
        out = {v[2] for v in hnodes.values() if v[4] or not on_device}
        return out | {chain[q.id][-1] for q in reqs if q.path and chain[q.id] and (q.dev[0] or not on_device)}

    def leaves() -> list:
        """(last used, kind, key) of every evictable device leaf: nothing below it on the device."""
        locked = locked_ids()
        out = [(q.used, "own", q.id) for q in reqs if q.path and q.dev[0] and not q.running]
        below = parents(True)
        out += [(v[3], "hash", h) for h, v in hnodes.items() if v[4] and h not in locked and h not in below]
        return out

    def host_leaves() -> list:
        """(last used, kind, key) of every host leaf: on host only, nothing below it."""
        out = [(q.used, "own", q.id) for q in reqs if q.path and not q.dev[-1] and not q.running]
        below = parents(False)
        out += [(v[3], "hash", h) for h, v in hnodes.items() if not v[4] and h not in below]
        return out

    def unused() -> int:
        locked = locked_ids()
        return real_free() - sum(own_blocks(q) for q in reqs if q.path and not q.running) - sum(
            node_blocks(h) for h in hnodes if h not in locked and hnodes[h][4])

    def evict(want: int) -> None:
        """Least recently used device leaves out until ``want`` free blocks hold nothing cached: a backed one
        stays on host only, another leaves the tree."""
        while tree and unused() < want:
            cands = leaves()
            if not cands:
                break
            _, kind, key = min(cands)
            if kind == "own":
                q = reqs[key]
                j = max(k for k in range(len(q.path)) if q.dev[k])
                if q.backed[j]:
                    q.dev[j] = False
                else:
                    assert j == len(q.path) - 1
                    q.path.pop()
                    q.dev.pop()
                    q.backed.pop()
            elif hnodes[key][5]:
                hnodes[key][4] = False
            else:
                del hnodes[key]

    host = {"used": 0}

    def evict_host(need: int) -> int:
        freed = 0
        while freed < need:
            cands = host_leaves()
            if not cands:
                break
            _, kind, key = min(cands)
            if kind == "own":
                q = reqs[key]
                n = seg_blocks(q, len(q.path) - 1)
                q.path.pop()
                q.dev.pop()
                q.backed.pop()
            else:
                n = node_blocks(key)
                del hnodes[key]
            freed += n
            host["used"] -= n
        return freed

    def up_of(ref: tuple):
        if ref[0] == "own":
            q = reqs[ref[1]]
            if ref[2]:
                return ("own", q.id, ref[2] - 1)
            return ("hash", chain[q.id][-1]) if chain[q.id] else None
        p = hnodes[ref[1]][2]
        return None if p is None else ("hash", p)

    def is_backed(ref: tuple) -> bool:
        return reqs[ref[1]].backed[ref[2]] if ref[0] == "own" else hnodes[ref[1]][5]

    def back_up(ref: tuple) -> None:
        """Rule 7's write-through: its unbacked ancestors first, then it; each makes room by host eviction and the
        first that finds none ends the backup."""
        todo = [ref]
        up = up_of(ref)
        while up is not None and not is_backed(up):
            todo.append(up)
            up = up_of(up)
        for x in reversed(todo):
            n = seg_blocks(reqs[x[1]], x[2]) if x[0] == "own" else node_blocks(x[1])
            short = n - (out.host_blocks - host["used"])
            if short > 0 and evict_host(short) < short:
                return
            if x[0] == "own":
                reqs[x[1]].backed[x[2]] = True
            else:
                hnodes[x[1]][5] = True
            host["used"] += n
            out.written_blocks += n
            out.peak_host_blocks = max(out.peak_host_blocks, host["used"])

    now = 0.0
    free = total_blocks
    running: list[Req] = []
    waiting: list[Req] = []
    pending: list[tuple[float, int]] = []
    if workload.arrivals is not None:
        for i, t in enumerate(workload.arrivals):
            heapq.heappush(pending, (float(t), i))
        submitted = len(reqs)
    else:
        submitted = min(int(workload.users), len(reqs))
        for i in range(submitted):
            heapq.heappush(pending, (0.0, i))
    ratio = init
    full = False
    retracted_now = False
    warm = False
    late: list = []                          # rule 8: (request, finished at its prefill) not yet processed
    cut = float("inf")                       # rule 8: the decision sees the arrivals up to this time
    started = None                           # rule 8: when the batch of the turn before started (None: none ran)
    received = float("inf") if recv_interval <= 1 else -float("inf")   # rule 9: arrivals by then were received
    counter, weight = 0, 0                   # rule 9: the poll counter, the weight of the turn before's batch

    def finish(r: Req, later: bool = False) -> None:
        nonlocal submitted
        r.done, r.finish = True, now
        if workload.arrivals is None and submitted < len(reqs):
            t = now + workload.think_s
            if workload.duration_s is None or t < workload.duration_s:
                heapq.heappush(pending, (t, submitted))
                submitted += 1
        if overlap:
            late.append(r)                   # rule 8: processed after the next decision
        else:
            release(r, later)

    def release_late() -> None:
        nonlocal full
        if late:
            full = False
        for r in late:
            release(r)
        late.clear()

    def release(r: Req, later: bool = False) -> None:
        nonlocal free
        if tree:
            insert(r, r.prompt + r.output - 1)
        keep = 0
        if tree and later:                   # finished at its prefill: its path stays locked until the round ends
            keep = sum(node_blocks(h) for h in r.hpath) + own_blocks(r)
        elif tree:
            r.running = False
            r.hpath = []
        free += r.blocks - keep
        r.blocks = keep

    def remaining(r: Req) -> int:
        return min(r.output - r.generated, CLIP)

    def prefill_round() -> bool:
        """One prefill round; True when it took a request."""
        nonlocal now, free, full, warm
        base = list(running)                 # the running batch as the round starts
        members: list[Req] = []              # taken in this round (and still charged in it)
        budget = [chunk, max_prefill]
        took = shrank = False
        round_done: list[Req] = []           # rule 8: finished at their prefill in this round
        seats = len(late)                    # rule 8: seats held by the batch before's finished (not this round's)
        ended: list[Req] = []                # finished at their prefill: into the tree after the allocation
        group: list[Req] = []                # rule 3: new requests of one pass, their first tokens at its end
        ranges: list[tuple[int, int]] = []   # rule 3: the pass's (cached, fill) token ranges, priced at its end
        pass_load = [0.0]                    # rule 7: the pass's load-backs, one after the other on the link

        def pass_ends() -> None:
            nonlocal now
            if ranges:
                t = max(pass_price(ranges), pass_load[0])
                now += t
                out.prefill_seconds += t
                for q in group:
                    q.first_token = now - ahead(t)
                ranges.clear()
                pass_load[0] = 0.0
            elif group:
                end = max(q.first_token for q in group)
                for q in group:
                    q.first_token = end
            group.clear()

        while waiting:
            r = waiting[0]
            if r.arrival > min(cut, received):   # rule 8: not seen yet; rule 9: not received yet
                break
            if len(running) + seats >= max_running:
                full = True
                break
            fill = r.prompt + r.generated
            shared = hit if warm else 0
            cached, locking, ids, on_device, own = shared, 0, [], shared, False
            if tree:                         # matched: its chain's blocks in the tree, then its own segments
                ids, own, on_path, dev_path = match(r, fill)
                touch_path(r, ids, own)
                cached = max(shared, on_path)
                on_device = max(shared, dev_path)
                if cached - on_device < 10:  # rule 7: a host hit under 10 tokens is recomputed
                    cached = on_device
                held = locked_ids()
                locking = sum(node_blocks(h) for h in ids if h not in held and hnodes[h][4]) + (
                    own_blocks(r) if own else 0)
            ext = fill - cached
            reserved = sum(remaining(q) * ratio for q in base) + sum(
                block + min(q.output, CLIP) + (q.blocks_charged if q.done else 0) for q in members)
            if not fill - on_device + remaining(r) + block < (real_free() - locking) * block - reserved:
                if running or took or seats:
                    full = True
                    break
            first = budget[0] // block * block
            if paged(ext) > budget[0] and first <= 0:
                break
            waiting.pop(0)
            took = True
            k = blocks_for(fill)
            r.blocks, free = k, free - k
            r.running = True
            r.hpath = list(ids)
            back = 0                         # its host nodes come back to the device: loaded, or recomputed
            for h in ids:
                if not hnodes[h][4]:
                    hnodes[h][4] = True
                    back += node_blocks(h)
            if own:
                for j in range(len(r.path)):
                    if not r.dev[j]:
                        r.dev[j] = True
                        back += seg_blocks(r, j)
            load = load_seconds(back) if back and cached > on_device else 0.0
            r.host_hit_tokens += cached - on_device
            out.peak_blocks_used = max(out.peak_blocks_used, total_blocks - real_free())
            chunked = paged(ext) > budget[0]
            if chunked:                      # rule 3: a chunked request ends the pass before, runs alone and
                pass_ends()                  # starts the next group
            if r.generated == 0:
                if r.output > 1:
                    group.append(r)
                r.admitted = now
                r.prefix_hit_tokens = cached
                warm = True
            else:
                r.recomputed += fill - cached
                r.recompute_hit_tokens += cached - hit
            if chunked:
                t = max(lock_price(fill, cached), load)
                out.prefill_seconds += t
                if r.generated == 0:
                    r.first_token = now + t - ahead(t)
                now += t
            else:                            # rule 3: one of the pass, priced when it ends
                ranges.append((cached, fill))
                pass_load[0] += load
            if tree:
                insert(r, fill)
            r.generated += 1
            r.peak_bytes = max(r.peak_bytes, nbytes(fill))
            r.blocks_charged = k * block
            if r.generated >= r.output:
                k = r.blocks
                if not chunked:              # rule 3: done at its prefill, at the end of the pass so far
                    t = max(pass_price(ranges), pass_load[0])
                    if r.generated == 1:
                        r.first_token = now + t - ahead(t)
                    at, now = now, now + t
                    finish(r, later=True)
                    now = at
                else:
                    finish(r, later=True)
                if overlap:
                    round_done.append(r)
                else:
                    ended.append((r, k - r.blocks))
                shrank = True
            else:
                running.append(r)
            if paged(ext) > budget[0]:
                # chunked: whole chunks after the first; the round of the last chunk has only it as a member
                rest = ext - first
                while rest > chunk:
                    rest -= chunk
                base = [q for q in running if q is not r]
                members = [r]
                budget = [chunk - paged(rest), max_prefill - paged(rest)]
            else:
                members.append(r)
                budget = [budget[0] - paged(ext), budget[1] - paged(ext)]
            reserved = sum(remaining(q) * ratio for q in base) + sum(
                block + min(q.output, CLIP) + (q.blocks_charged if q.done else 0) for q in members)
            if not real_free() * block - reserved > 0:
                full = True
                break
            if budget[0] <= 0 or budget[1] <= 0:
                break
        pass_ends()
        if tree:                             # the round's allocation (those that ended still held their blocks)
            evict(sum(k for _, k in ended))
            for r, _ in ended:
                free += r.blocks
                r.blocks = 0
                r.running = False
                r.hpath = []
        if took and overlap:                 # rule 8: then the batch before's finished are processed; this round's
            old = [q for q in late if q not in round_done]   # own wait for the next decision
            late[:] = [q for q in late if q in round_done]
            for q in old:
                release(q)
            if old:
                full = False
        elif shrank:
            full = False
        return took

    def pick(batch: list[Req]) -> int:
        """The next request to retract: SGLang's order, or kvplan's what-if rule."""
        if victim is None:
            best = None
            for j, q in enumerate(batch):     # the smallest (generated, -prompt); the later of equals
                if best is None or (q.generated, -q.prompt) <= (batch[best].generated, -batch[best].prompt):
                    best = j
            return best
        cache = [q.prompt + q.generated - 1 for q in batch]
        if victim == "fewest-tokens":
            best = 0
            for j in range(len(batch)):
                if cache[j] <= cache[best]:
                    best = j
            return best
        order = sorted(range(len(batch)), key=lambda j: (-cache[j], j))
        protected = set(order[: len(batch) // 2])
        return max(j for j in range(len(batch)) if j not in protected)

    def short() -> int:
        return need_step() - real_free()

    def need_step() -> int:
        return sum(blocks_for(q.prompt + q.generated) - q.blocks for q in running)

    turns = 0
    while not all(r.done for r in reqs[:submitted]) or pending:
        turns += 1
        if turns > MAX_TURNS:
            raise RuntimeError("the SGLang reference passed its turn limit")
        while pending and pending[0][0] <= now:
            t, i = heapq.heappop(pending)
            reqs[i].arrival = t
            waiting.append(reqs[i])
        cut = started if overlap and started is not None and (running or late) else float("inf")   # rule 8
        started = now
        if recv_interval > 1:                # rule 9
            counter += weight
            if (not running and not late) or counter >= recv_interval:
                counter = 0
                received = cut if cut < float("inf") else now
            weight = 1
        if not running and not late:
            full = False
        if waiting and not full and not retracted_now and prefill_round():
            weight = 1000                    # rule 9: a prefill batch
            continue
        if late:                             # rule 8
            if not running or short() > 0:   # an empty batch: decided again at once, seeing everything
                release_late()
                cut = float("inf")
                if waiting and not full and not retracted_now and prefill_round():
                    weight = 1000            # rule 9
                    continue
            else:
                release_late()
        if not running:
            started = None
            if not pending:
                if waiting:
                    continue
                break
            ratio = init                    # on_idle
            now = max(now, pending[0][0])
            continue
        if short() > 0:
            evict(need_step())               # check_decode_mem: all it can
            victims = []
            while len(running) > 1 and (not victims or short() > 0):
                q = running.pop(pick(running))
                victims.append(q)
                free += q.blocks
                q.blocks = 0
                q.running = False
                q.hpath = []
                q.preemptions += 1
                evict(max(-(-20 * len(running) // block), need_step()))
            waiting.extend(victims)
            ratio = min(1.0, (sum(q.generated for q in running) + 20 * len(running))
                        / (sum(q.output for q in running) + 1))
            out.ratios.append((out.decode_steps, ratio))
            full = False
            retracted_now = True
        else:
            ratio = max(ratio - decay, floor)
        evict(need_step())                   # the step's blocks come from unused ones
        b = len(running)
        out.peak_running = max(out.peak_running, b)
        reads = [sm.request_cache(float(q.prompt + q.generated)) for q in running]
        dt = decode_price(s, sm, b, sum(float(x[0]) for x in reads), sum(float(x[1]) for x in reads),
                          [q.prompt + q.generated for q in running], speculative)   # sim_reference's rule 8
        now += dt
        out.decode_steps += 1
        retracted_now = False
        for q in running:
            q.generated += 1
            k = blocks_for(q.prompt + q.generated - 1)
            free -= k - q.blocks
            q.blocks = k
            q.peak_bytes = max(q.peak_bytes, nbytes(q.prompt + q.generated - 1))
        out.peak_blocks_used = max(out.peak_blocks_used, total_blocks - real_free())
        done = [q for q in running if q.generated >= q.output]
        for q in done:
            running.remove(q)
            finish(q)
        if done and not overlap:             # (rule 8: once they are processed)
            full = False
    release_late()                           # rule 8: the last batch's results
    out.simulated_seconds = now
    out.reqs = reqs[:submitted]
    return out
