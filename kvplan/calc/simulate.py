"""``kvplan simulate``: a stream of reasoning requests through each replica's KV pool, event to event.

The pieces are the other commands': the pool and per-request bytes from ``kvplan.calc.capacity`` (the pool is
rounded down to whole blocks of one block of every layer), step times from the one decode-step model
(``kvplan.calc.costs.step_model``), the prefill and re-prefill from its ``prefill_seconds`` in chunks of
max_num_batched_tokens, swaps from ``costs.swap_seconds`` over ``costs.host_link_rate``, and the host-DRAM tier
from ``capacity.host_tier``.

The engine, one replica:

* Admission (between steps): swapped-out requests first, oldest first (vLLM V0's scheduler resumes swapped
  requests before it admits new ones), then the waiting queue in order (recompute-preempted requests at its
  front, as vLLM V1 prepends them); a request is admitted while fewer than ``max_batch`` requests hold blocks
  and the blocks its cache needs leave the watermark free (vLLM V0's BlockSpaceManager: watermark 0.01 of the
  blocks); with nothing else holding blocks, the watermark is waived. No admission in the instant of a
  preemption (vLLM V1 schedules no waiting request in a step that preempted).
* A prefill (new prompt, or the re-prefill of a recomputed request's whole cache) runs alone: the batch's decode
  stalls for it. The prefill produces the first output token.
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

import bisect
import dataclasses
import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass, field

from kvplan.calc import capacity, costs
from kvplan.calc.workload import Workload
from kvplan.errors import KvplanError
from kvplan.scenario import Scenario

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
MAX_EVENTS = 20_000_000


@dataclass(frozen=True)
class SimOptions:
    policy: str = DEFAULT_POLICY
    victim: str = DEFAULT_VICTIM
    max_batch: int | None = None          # None: the engine's max_num_seqs
    watermark: float = DEFAULT_WATERMARK
    dram_bytes_per_node: int | None = None
    offload_threshold: float | None = None  # proactive offload above this share of the pool's blocks (None: off)
    reference: bool = False               # one step at a time, each priced by StepModel.step (for the tests)
    # called as on_event(state) at every event once the arrivals and swap-ins due have joined, and once at the end:
    # state is a dict of the live engine state (read-only: numpy arrays and tuples of request indexes), for the
    # tests' conservation checks (simulate.event_state names the keys)
    on_event: object = field(default=None, compare=False, repr=False)

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
        if not 0 <= self.watermark < 0.5:
            raise KvplanError(f"watermark {self.watermark!r} is not in [0, 0.5)", "give e.g. 0.01")


# --compare: settings a variant may change; everything else (the arrivals, lengths, seed, deployment) is the base's
COMPARE_KEYS = ("policy", "victim", "kv-dtype", "max-batch", "dram", "offload-threshold")  # threshold: F or off


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
    prompts: object
    outputs: object
    arrival: object
    admitted: object            # first admission (start of the first prefill)
    first_token: object
    finish: object
    preemptions: object
    swap_outs: object
    swap_ins: object
    recomputed: object          # tokens re-prefilled
    peak_bytes: object          # per GPU, at the request's longest cache
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
    offloads: object = None     # per request: proactive offloads (also counted in swap_outs)
    offload_threshold_blocks: int | None = None
    prefix_hit_tokens: object = None  # per request: prompt tokens the prefix cache served (0: a miss)
    timeline: tuple = ()        # (times, blocks held, running, swapped out or leaving, DRAM bytes) at each event
    replicas: int = 1           # DP replicas that served requests (merged by ``merge_runs``; 1: one engine run)
    replica_of: object = None   # per request: the replica it was routed to (None: one replica)


def _block_table(s: Scenario, block: int, block_bytes: int, longest: int):
    """(table, nbytes): request_bytes(c) = nbytes[ceil(c / block)] and blocks(c) = table[ceil(c / block)], the
    blocks of one block-bytes each that it fills. A request's bytes are constant between block boundaries: every
    layer rounds its tokens up to whole blocks, and ceil(min(c, cap) / block) = min(ceil(c / block),
    ceil(cap / block)) for a kind that keeps at most cap tokens (simulate refuses speculative slots, which would
    shift the context)."""
    import numpy as np

    kmax = -(-longest // block) + 2
    nbytes = np.array([capacity.request_bytes(s, k * block, block=block) for k in range(kmax + 1)], dtype=np.int64)
    return -(-nbytes // block_bytes), nbytes


def _caps(s: Scenario):
    """Contexts where some layer kind's decode reads or FLOPs stop growing linearly (windows, top-k)."""
    import numpy as np

    caps = set()
    for g in s.sized_model.groups:
        for cap in (g.kind.tokens_cap, g.kind.attended_keys_cap(), getattr(g.kind, "index_topk", None)):
            if cap:
                caps.add(int(cap))
    return np.array(sorted(caps), dtype=np.int64)


def _last_step_that_fits(x, block: int, slack: int) -> int:
    """The most decode steps a batch whose next step reads contexts ``x`` can run with ``slack`` blocks to spare
    after its first step, when every block boundary a request crosses adds exactly one block (no windows).

    After k steps request i holds ceil((x_i + k - 1) / block) blocks, one more each time x_i + k - 1 passes a
    multiple of block: at steps c_i = 2 + (-x_i mod block), c_i + block, ... The pool overflows at the
    (slack + 1)-th crossing of all of them: the (slack mod b)-th smallest c_i, (slack div b) blocks on. The
    batch runs to the step before it."""
    import numpy as np

    q, r = divmod(int(slack), len(x))
    c = 2 + (-x) % block
    return int(np.partition(c, r)[r]) + q * block - 1


def _lin(p0, p1, t0, t1):
    """sum_{t=t0}^{t1-1} (p0 + p1 t)."""
    n = t1 - t0
    return n * p0 + p1 * n * (t0 + t1 - 1) / 2 if n > 0 else 0.0


def _affine_max_sum(u0, u1, v0, v1, k):
    """sum_{t=0}^{k-1} max(u0 + u1 t, v0 + v1 t), in closed form: series a wins on [0, m), b on [m, k) (the same
    arithmetic as ``_lin`` on each side; a side with no terms is left out rather than added as 0.0)."""
    d0, d1 = u0 - v0, u1 - v1
    if d1 == 0:                  # parallel: one wins throughout
        m, a0, a1, b0, b1 = (k if d0 >= 0 else 0), u0, u1, v0, v1
    elif d1 > 0:                 # u wins from the crossing on
        m, a0, a1, b0, b1 = min(max(math.ceil(-d0 / d1), 0), k), v0, v1, u0, u1
    else:
        m, a0, a1, b0, b1 = min(max(math.floor(-d0 / d1) + 1, 0), k), u0, u1, v0, v1
    if m >= k:
        return k * a0 + a1 * k * (k - 1) / 2
    if m <= 0:
        return k * b0 + b1 * k * (k - 1) / 2
    return m * a0 + a1 * m * (m - 1) / 2 + _lin(b0, b1, m, k)


def _first_step_reaching(step0, u0, u1, v0, v1, k, target, elapsed_k):
    """(j, elapsed(j)) for the fewest steps j in 1 .. k whose time elapsed(j) = j step0 + _affine_max_sum(u0, u1,
    v0, v1, j) reaches ``target`` (k itself, at ``elapsed_k``, when none before it does): a bisection over
    elapsed(lo) < target <= elapsed(hi), its first two probes the root of the series that wins at step 0,
    (c1 / 2) j^2 + (step0 + c0 - c1 / 2) j = target, rounded up, and the step below it (elapsed grows by at least
    step0 a step, so any probes that keep the bracket end at the same j; without a crossing these two close it)."""
    c0, c1 = (u0, u1) if u0 >= v0 else (v0, v1)
    lin, quad = step0 + c0 - c1 / 2, c1 / 2
    disc = lin * lin + 4 * quad * target
    guess = math.ceil(2 * target / (lin + math.sqrt(disc))) if lin > 0 and disc >= 0 else k // 2
    lo, hi, at_hi = 0, k, elapsed_k
    for mid in (guess, guess - 1):
        if lo < mid < hi:
            t = mid * step0 + _affine_max_sum(u0, u1, v0, v1, mid)
            if t >= target:
                hi, at_hi = mid, t
            else:
                lo = mid
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = mid * step0 + _affine_max_sum(u0, u1, v0, v1, mid)
        if t >= target:
            hi, at_hi = mid, t
        else:
            lo = mid
    return hi, at_hi


def _affine_pieces(sm, caps):
    """A request's cache bytes and attention FLOPs per decode token are affine in its context on each piece between
    the caps (every layer kind reads min(context, cap) keys and a fixed state): piece j is [caps[j-1], caps[j]]
    (from 0; the last one unbounded). Returns (bytes at context 0, bytes per token, FLOPs at 0, FLOPs per token) of
    each piece, as arrays, from ``StepModel.request_cache`` at two contexts inside it."""
    import numpy as np

    edges = [0.0, *(float(c) for c in caps)]
    lo = np.array(edges)
    hi = np.array(edges[1:] + [edges[-1] + 2.0**20])
    (b_lo, f_lo), (b_hi, f_hi) = sm.request_cache(lo), sm.request_cache(hi)
    b_lo, f_lo, b_hi, f_hi = (np.broadcast_to(np.asarray(v, dtype=float), lo.shape) for v in (b_lo, f_lo, b_hi, f_hi))
    b1, f1 = (b_hi - b_lo) / (hi - lo), (f_hi - f_lo) / (hi - lo)
    return b_lo - b1 * lo, b1, f_lo - f1 * lo, f1


def _timeline_arrays(marks: list) -> tuple:
    """(times, blocks held, running, swapped, DRAM bytes) as numpy arrays from the engine's marks: a flat list,
    five numbers per mark (the engine extends it by each mark's tuple: one flat float conversion here, about a
    third of the time of converting a list of tuples)."""
    import numpy as np

    if not marks:
        return (np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
                np.zeros(1, dtype=np.int64))
    m = np.array(marks, dtype=float).reshape(-1, 5)   # the counts and bytes are exact in a float64: < 2^53
    return (m[:, 0].copy(), *(m[:, j].astype(np.int64) for j in range(1, 5)))


def simulate(s: Scenario, workload: Workload, options: SimOptions | None = None, progress=None) -> SimRun:
    """``progress(done, total)``, when given, is called every 4,096 events with the requests finished."""
    import numpy as np

    o = options or SimOptions()
    model, hw = s.sized_model, s.hardware
    if s.spec_tokens or s.token_budget:
        raise KvplanError("simulate does not model speculative slots or token budgets yet",
                          "drop --spec-tokens / --token-budget")
    pool = int(capacity.kv_pool(s).kv_pool_bytes)
    block = int(capacity.block_tokens(s).value)
    hit = (s.shared_prefix_tokens // block) * block          # the shared prefix's whole blocks: cached once
    own = dataclasses.replace(s, shared_prefix_tokens=0) if s.shared_prefix_tokens else s
    block_bytes = capacity.request_bytes(own, block) - capacity.request_bytes(own, 0)
    if block_bytes <= 0:
        raise KvplanError(f"{model.id} caches nothing per token", "simulate models a KV cache that grows")
    prefix_blocks = -(-capacity.shared_prefix_copy_bytes(s, block=block) // block_bytes)
    total_blocks = pool // block_bytes - prefix_blocks
    if total_blocks <= 0:
        raise KvplanError(f"the shared prefix's {prefix_blocks:,} blocks fill the {pool // block_bytes:,}-block pool",
                          "lower --shared-prefix, or enlarge the pool")
    mnbt, mns = s.engine_adapter.batch_limits_for(s)
    chunk = int(mnbt.value)
    max_batch = o.max_batch or int(mns.value)
    wm_blocks = int(o.watermark * total_blocks)
    link = float(costs.host_link_rate(hw, s.host_link_gbs).value)
    settings = costs.CostSettings()
    sm = costs.step_model(s)

    P = np.asarray(workload.prompts, dtype=np.int64)
    L = np.asarray(workload.outputs, dtype=np.int64)
    n = len(P)
    if s.shared_prefix_tokens and int(P.min()) < s.shared_prefix_tokens:
        i = int(np.argmin(P))
        raise KvplanError(f"request {i + 1}'s prompt ({int(P[i]):,} tokens) is shorter than the --shared-prefix "
                          f"{s.shared_prefix_tokens:,} every prompt starts with",
                          "lower --shared-prefix, or give prompts at least that long (--prompt-dist)")
    longest_cache = int((P + L - 1).max())
    table, bytes_at = _block_table(s, block, block_bytes, longest_cache + 1)
    peak_blocks = table[-(-(P + L - 1) // block)]
    if int(peak_blocks.max()) > total_blocks:
        i = int(np.argmax(peak_blocks))
        raise KvplanError(f"request {i + 1} ({int(P[i]):,} + {int(L[i]):,} tokens) needs {int(peak_blocks[i]):,} "
                          f"KV blocks, more than the {total_blocks:,} the pool holds",
                          "lower --max-len or the output lengths, or give the replica more GPUs")
    host = capacity.host_tier(s, capacity.request_bytes(s, longest_cache), o.dram_bytes_per_node)
    dram_cap = int(host.bytes_per_gpu.value) if host.bytes_per_gpu.value is not None else None
    if o.policy == "swap-then-recompute" and dram_cap is None:
        raise KvplanError(f"{hw.id} has no host_dram_gb in its preset, which swap-then-recompute needs",
                          "give --dram SIZE per node")

    # blocks_of(c) = bt[c]: the block table indexed by tokens (one lookup instead of a ceiling division and a lookup)
    bt = table[-(-np.arange(len(table) * block - block + 1) // block)]

    def blocks_of(cache):
        return bt[cache]

    # each block boundary a running request can cross adds exactly one block (no windows; a shared prefix's
    # blocks, where the table is flat, lie below every prompt)
    unit_steps = bool(np.all(np.diff(table[int(P.min()) // block:]) == 1))

    caps = _caps(s)
    bw, afs = sm.bw, sm.attention_flops_s
    seg_b0, seg_b1, seg_f0, seg_f1 = _affine_pieces(sm, caps)
    one_b0, one_b1, one_f0, one_f1 = (float(v[0]) for v in (seg_b0, seg_b1, seg_f0, seg_f1))   # no caps
    base_memo: dict[int, float] = {}

    def base(b: int) -> float:
        if b not in base_memo:
            base_memo[b] = float(sm.step(b, 0, 0)["total"])
        return base_memo[b]

    prefill_memo: dict[tuple[int, int], float] = {}

    def prefill(tokens: int, cached: int = 0) -> float:
        if (tokens, cached) not in prefill_memo:
            prefill_memo[tokens, cached] = sm.prefill_seconds(tokens, cached, chunk)
        return prefill_memo[tokens, cached]

    def swap_cost(cache: int) -> tuple[int, float]:
        nbytes = int(bytes_at[-(-cache // block)])
        copies = costs.swap_copies(model, cache, block, settings.layout)
        return nbytes, costs.swap_seconds(nbytes, copies, link, settings, shared_link=True)

    # --- state ---------------------------------------------------------------------------------------------
    g = [0] * n                                 # tokens generated so far (Python ints: scalar work per request)
    held = [0] * n                              # blocks held in HBM
    nan = math.nan                              # per request, as Python lists (numpy arrays at the end)
    arrival, admitted, first_token, finish = [nan] * n, [nan] * n, [nan] * n, [nan] * n
    preemptions, swap_outs, swap_ins, recomputed = [0] * n, [0] * n, [0] * n, [0] * n
    in_dram = [0] * n                           # bytes per GPU parked in host DRAM
    swap_ready = [0.0] * n                      # when the swap-out copy has landed

    now = 0.0
    free = total_blocks
    running: list[int] = []                     # in the order they (re)joined the batch: the last is the newest
    waiting: deque[int] = deque()
    swapped: deque[int] = deque()
    landing: list[tuple[float, int]] = []       # swap-ins in flight: (lands at, request)
    leaving: list[tuple[float, int]] = []       # proactive offloads in flight: (lands in DRAM at, request)
    offloads = [0] * n
    prefix_hits = [0] * n                       # prompt tokens found in the prefix cache at the first prefill
    prefix_cached = False
    thr = int(o.offload_threshold * total_blocks) if o.offload_threshold is not None else None
    leaving_blocks = 0                          # blocks still held by offloads in flight
    landing_blocks = 0                          # blocks reserved by swap-ins in flight
    E = P + L                                   # the context at which a request is done
    # The running batch, kept up to date as requests join and leave rather than rebuilt per event: running request
    # i reads xo[i] + steps tokens in the next step (every one gains a token per step, so xo[i] is fixed while it
    # runs); its g and held are brought up to date when it leaves the batch (and for on_event). ``phase`` counts the
    # running requests by (-xo) mod block, which says at which steps each starts a new block; ``done_heap`` holds
    # (steps at which it is done, request), stale entries (a request that left) skipped when they surface.
    xo = np.zeros(n, dtype=np.int64)            # (and as Python ints, for the scalar work)
    xo_l = [0] * n
    in_run = [False] * n
    done_at = [0] * n
    phase = [0] * block
    sum_xo = 0
    done_heap: list[tuple[int, int]] = []
    fast = unit_steps and not caps.size and not o.reference   # the O(1) path: no windows, no caps
    has_caps, reference, on_event = bool(caps.size), o.reference, o.on_event
    xo_used = not fast or o.victim != "newest"  # the numpy copy of xo: the vectorized path and the victim rules
    heappush = heapq.heappush
    Pl, Ll, El, btl = P.tolist(), L.tolist(), E.tolist(), bt.tolist()   # Python ints for the scalar work
    arrivals: list[tuple[float, int]] = []      # heap of pending arrivals
    if workload.arrivals is not None:
        times = np.asarray(workload.arrivals, dtype=float)
        arrivals = [(float(t), i) for i, t in enumerate(times)]   # already sorted: a valid heap
        next_id = n
    else:
        users = min(int(workload.users), n)
        arrivals = [(0.0, i) for i in range(users)]
        next_id = users
    out_free = in_free = 0.0
    dram_used = peak_dram = 0
    swapped_out_bytes = swapped_in_bytes = 0
    done = 0
    steps = events = 0
    peak_used = peak_running = 0
    stall_prefill = stall_swap = 0.0
    no_admit = False                            # a preemption happened and no step has run since
    adm_head, adm_free, adm_hold, adm_leaving = None, -1, 0, 0   # where admission last stopped (see stopped())

    def finished(i: int) -> None:
        nonlocal free, done, next_id
        finish[i] = now
        free += held[i]
        held[i] = 0
        done += 1
        if workload.arrivals is None and next_id < n:
            t = now + workload.think_s
            if workload.duration_s is None or t < workload.duration_s:
                heapq.heappush(arrivals, (t, next_id))
                next_id += 1

    def join(i: int) -> None:
        nonlocal sum_xo
        v = Pl[i] + g[i] - steps
        xo_l[i] = v
        if xo_used:
            xo[i] = v
        sum_xo += v
        phase[-v % block] += 1
        in_run[i] = True
        done_at[i] = d = El[i] - v
        heappush(done_heap, (d, i))
        running.append(i)

    def leave(i: int) -> None:
        """Request i leaves the running batch (the caller takes it out of ``running``): its tokens and blocks now."""
        nonlocal sum_xo
        v = xo_l[i]
        sum_xo -= v
        phase[-v % block] -= 1
        in_run[i] = False
        g[i] = v + steps - Pl[i]
        held[i] = btl[v + steps - 1]

    def crossings(k: int, s0: int, b: int) -> int:
        """Blocks the running batch adds in its next k steps (each block boundary adds one): each request starts
        a block once every ``block`` steps, the ones in phase s0 at the first step, s0 + 1 at the second, ..."""
        q, m = divmod(k, block)
        end = s0 + m
        part = sum(phase[s0:end]) if end <= block else sum(phase[s0:]) + sum(phase[:end - block])
        return b * q + part

    def last_step_that_fits(limit: int, s0: int, b: int) -> tuple[int, int]:
        """The most steps whose added blocks stay within ``limit``, and the blocks they add: q full rounds of
        ``block`` steps add b blocks each, then the phases in step order until the rest is passed."""
        q, rest = divmod(limit, b)
        acc = list(itertools.accumulate(phase[s0:]))   # the phases from s0 on, then (if the rest reaches past
        if acc[-1] <= rest:                             # them all) those before s0: no rotated copy of the list
            acc = list(itertools.accumulate(phase[:s0], initial=acc[-1]))
            m = bisect.bisect_right(acc, rest, 1)
            return q * block + block - s0 + m - 1, q * b + acc[m - 1]
        m = bisect.bisect_right(acc, rest)
        return q * block + m, q * b + (acc[m - 1] if m else 0)

    def event_state() -> dict:
        for i in running:
            g[i] = xo_l[i] + steps - Pl[i]
            held[i] = btl[xo_l[i] + steps - 1]
        return {"now": now, "free_blocks": free, "total_blocks": total_blocks,
                "held_blocks": np.array(held, dtype=np.int64), "generated": np.array(g, dtype=np.int64),
                "in_dram": np.array(in_dram, dtype=np.int64), "dram_used": dram_used, "finish": np.array(finish),
                "running": tuple(running), "waiting": tuple(waiting), "swapped": tuple(swapped),
                "landing": tuple(i for _, i in landing), "not_arrived": tuple(i for _, i in arrivals),
                "leaving": tuple(i for _, i in leaving), "prefix_blocks": prefix_blocks,
                "swapped_out_bytes": swapped_out_bytes, "swapped_in_bytes": swapped_in_bytes}

    def fits(need: int) -> bool:
        if not (running or landing or leaving):
            return need <= free
        if thr is not None and total_blocks - free - leaving_blocks + need > thr:
            return False          # with a threshold, admission and resumption keep the occupancy under it
        return free - need >= wm_blocks

    def stopped() -> None:
        """Admission stopped at a queue's head: remember the state it could not get past. A request's blocks only
        grow, so while the same head leads, the free blocks have not grown, the holders not shrunk and the
        offloads in flight hold the same blocks, it cannot get in (the main loop skips the call)."""
        nonlocal adm_head, adm_free, adm_hold, adm_leaving
        adm_head = swapped[0] if swapped else ~waiting[0]
        adm_free, adm_hold, adm_leaving = free, len(running) + len(landing) + len(leaving), leaving_blocks

    def admit() -> None:
        nonlocal free, now, in_free, stall_prefill, dram_used, swapped_in_bytes, peak_used, prefix_cached
        nonlocal landing_blocks
        while swapped and len(running) + len(landing) + len(leaving) < max_batch:
            i = swapped[0]
            cache = Pl[i] + g[i] - 1
            need = btl[cache]
            if not fits(need):
                stopped()
                return            # swapped requests go first: nothing new while one waits
            swapped.popleft()
            held[i] = need
            free -= need
            landing_blocks += need
            nbytes, t = swap_cost(cache)
            start = max(now, in_free, swap_ready[i])
            in_free = start + t
            heapq.heappush(landing, (in_free, i))
            swap_ins[i] += 1
            swapped_in_bytes += nbytes
        if swapped:
            stopped()             # the batch is full
            return
        holders = len(running) + len(landing) + len(leaving)   # only a join below adds one
        while waiting and holders < max_batch:
            i = waiting[0]
            gi = g[i]
            cache = Pl[i] + (gi - 1 if gi else 0)
            need = btl[cache]
            if not (free - need >= wm_blocks and (thr is None or total_blocks - free - leaving_blocks + need <= thr)
                    if holders else need <= free):        # fits(need), inline: the waiting queue is the hot path
                stopped()
                return
            waiting.popleft()
            held[i] = need
            free -= need
            if total_blocks - free > peak_used:
                peak_used = total_blocks - free
            if gi == 0:                                    # a new request: its prompt, and the first token
                admitted[i] = now
                cached = hit if prefix_cached else 0       # the first prompt computes the prefix; later ones hit
                t = prefill(Pl[i], cached)
                prefix_hits[i] = cached
                prefix_cached = True
                now += t
                g[i] = 1
                first_token[i] = now
            else:                                          # a recomputed one: its cache again, past the prefix
                t = prefill_memo.get((cache, hit)) or prefill(cache, hit)
                now += t
                recomputed[i] += cache - hit
            stall_prefill += t
            if (gi or 1) >= Ll[i]:                        # its tokens now: the first from the prefill, or as before
                finished(i)
            else:
                join(i)
                holders += 1
        if waiting:
            stopped()             # the batch is full

    def choose_victim() -> int:
        if o.victim == "newest":
            return len(running) - 1
        ctx = xo[np.array(running, dtype=np.int64)]    # the caches less the same steps: the same order
        b = len(ctx)
        if o.victim == "fewest-tokens":                # the smallest cache, the newest (last) of equals
            return b - 1 - int(np.argmin(ctx[::-1]))
        # the longer half by cache, the older of equals, is protected (a stable sort of -cache keeps batch order
        # among equals); the newest of the rest goes
        free_ = np.ones(b, dtype=bool)
        free_[np.argsort(-ctx, kind="stable")[: b // 2]] = False
        return b - 1 - int(np.argmax(free_[::-1]))

    def copy_out(i: int, nbytes: int, t: float) -> float:
        """Request i's cache onto the out-direction FIFO of the host link, into DRAM; returns when it lands."""
        nonlocal out_free, dram_used, peak_dram, swapped_out_bytes
        out_free = max(now, out_free) + t
        swap_ready[i] = out_free
        in_dram[i] = nbytes
        dram_used += nbytes
        peak_dram = max(peak_dram, dram_used)
        swapped_out_bytes += nbytes
        swap_outs[i] += 1
        return out_free

    policy, newest = o.policy, o.victim == "newest"

    def preempt(need: int) -> None:
        """Victims out until the next step's blocks (``need`` beyond what the batch holds) fit."""
        nonlocal free, now, stall_swap, no_admit
        wait_until = now
        while need > free:
            i = running.pop() if newest else running.pop(choose_victim())
            leave(i)
            cache = Pl[i] + g[i] - 1
            need -= btl[cache + 1] - btl[cache]
            preemptions[i] += 1
            swap = False                             # recompute copies nothing
            if policy != "recompute":                # swap-then-recompute swaps while DRAM has room
                nbytes, t = swap_cost(cache)
                swap = policy == "swap" or dram_used + nbytes <= dram_cap
            if swap:
                wait_until = max(wait_until, copy_out(i, nbytes, t))
                swapped.append(i)
            else:
                waiting.appendleft(i)
            free += held[i]
            held[i] = 0
        stall_swap += wait_until - now
        now = wait_until
        no_admit = True

    def offload(excess: int) -> bool:
        """Proactive offload: victims (by the victim rule) leave the batch at once, until the blocks they hold cover
        ``excess`` or one request is left; each copy joins the out-direction queue of the host link and the batch
        does not wait for it; its blocks stay held until the copy lands. False when DRAM has no room for one."""
        nonlocal leaving_blocks
        moved = 0
        while moved < excess and len(running) > 1:
            j = choose_victim()
            i = running[j]
            cache = xo_l[i] + steps - 1
            nbytes, t = swap_cost(cache)
            if dram_cap is not None and dram_used + nbytes > dram_cap:
                break
            running.pop(j)
            leave(i)
            heapq.heappush(leaving, (copy_out(i, nbytes, t), i))
            offloads[i] += 1
            leaving_blocks += held[i]
            moved += held[i]
        return moved > 0

    marks: list = []                            # the timeline: the state as a run starts and as it ends, flat
    mark = marks.extend                         # (five numbers a mark: see _timeline_arrays)
    heappop, inf, max_events = heapq.heappop, math.inf, MAX_EVENTS   # locals in the loop


    while done < n:
        events += 1
        if progress is not None and not events & 4095:
            progress(done, n)
        if events > max_events:
            raise KvplanError(f"the simulation passed {MAX_EVENTS:,} events (the pool thrashes)",
                              "lower the arrival rate or --max-batch, or enlarge the pool")
        # events due now: arrivals join the queue, swap-ins that landed join the batch
        while arrivals and arrivals[0][0] <= now:
            t, i = heappop(arrivals)
            arrival[i] = t
            waiting.append(i)
        while leaving and leaving[0][0] <= now:   # an offload landed in DRAM: its blocks are free now
            _, i = heappop(leaving)
            leaving_blocks -= held[i]
            free += held[i]
            held[i] = 0
            swapped.append(i)
        while landing and landing[0][0] <= now:
            _, i = heappop(landing)
            landing_blocks -= held[i]
            dram_used -= in_dram[i]
            in_dram[i] = 0
            join(i)
        if on_event is not None:
            on_event(event_state())
        if not no_admit and (waiting or swapped) and not (
                free <= adm_free and len(running) + len(landing) + len(leaving) >= adm_hold
                and leaving_blocks == adm_leaving and (swapped[0] if swapped else ~waiting[0]) == adm_head):
            before = now
            admit()
            if now > before:
                continue          # prefills took time: take what arrived meanwhile first
        out = len(swapped) + len(leaving)
        mark((now, total_blocks - free, len(running), out, dram_used))   # a run starts
        if not running and no_admit:
            no_admit = False
            continue
        if not running:
            upcoming = [q[0][0] for q in (arrivals, landing, leaving) if q]
            if not upcoming:
                if done < n and (waiting or swapped):
                    no_admit = False
                    continue
                break
            now = max(now, min(upcoming))
            no_admit = False
            continue
        b = len(running)
        if fast:
            s0 = (steps - 1) % block              # the phase whose next token starts a block
            need1 = phase[s0]                     # blocks the next step adds
        else:
            ids = np.array(running, dtype=np.int64)
            x = xo[ids] + steps                   # what the next step reads; the cache after it
            held_sum = total_blocks - free - landing_blocks - leaving_blocks   # the running batch holds the rest
            need1 = int(bt[x].sum()) - held_sum

            def need_after(k: int, x=x, held_sum=held_sum) -> int:
                return int(bt[x + (k - 1)].sum()) - held_sum

        if need1 > free:
            preempt(need1)
            continue
        limit = free                              # blocks the run may add
        if thr is not None and b > 1:
            room = thr - (total_blocks - free - leaving_blocks)
            if need1 > room and offload(need1 - room):
                continue
            if need1 <= room:
                limit = min(free, room)
        top = done_heap[0]
        while not in_run[top[1]] or done_at[top[1]] != top[0]:
            heappop(done_heap)                    # a request that left the batch since
            top = done_heap[0]
        k = k_done = top[0] - steps               # steps until the first completion
        if has_caps:
            nxt = np.searchsorted(caps, x, side="right")
            within = nxt < caps.size
            if within.any():
                k = min(k, int((caps[nxt[within]] - x[within]).min()) + 1)
        if reference or no_admit:                 # after a preemption, admission is looked at again in one step
            k = 1
        added = None                              # blocks the run adds, once known
        if k > 1:                                 # the step that overfills the pool (or passes the threshold) ends it
            if fast:
                if b * (k // block) > limit:      # the full rounds of block steps alone pass it: no phase sum
                    k, added = last_step_that_fits(limit, s0, b)
                else:
                    added = crossings(k, s0, b)
                    if added > limit:
                        k, added = last_step_that_fits(limit, s0, b)
            elif need_after(k) > limit:
                if unit_steps:
                    k = _last_step_that_fits(x, block, limit - need1)
                else:
                    lo, hi = 1, k                  # need_after(lo) <= free < need_after(hi)
                    while hi - lo > 1:
                        mid = (lo + hi) // 2
                        if need_after(mid) > limit:
                            hi = mid
                        else:
                            lo = mid
                    k = lo
        if b > peak_running:                      # the batch of a step that runs (not one a preemption trims)
            peak_running = b
        if reference:
            cb, cf = sm.request_cache(x.astype(float))
            run_time = float(sm.step(b, float(np.sum(cb)), float(np.sum(cf)))["total"])
        else:
            # the batch's cache bytes and FLOPs at the run's first step and their growth per step, from the
            # affine pieces between the caps: sum_i (a + s x_i) = n a + s sum(x) on each piece
            if has_caps:
                cnt = np.bincount(nxt, minlength=caps.size + 1)
                sx = np.bincount(nxt, weights=x, minlength=caps.size + 1)
                u1, v1 = float(cnt @ seg_b1), float(cnt @ seg_f1)
                u0, v0 = float(cnt @ seg_b0) + float(sx @ seg_b1), float(cnt @ seg_f0) + float(sx @ seg_f1)
                u0, u1, v0, v1 = u0 / bw, u1 / bw, v0 / afs, v1 / afs
            else:                                 # the growth per step only matters for a run of two or more
                sx = float(sum_xo + b * steps)
                u0, v0 = (b * one_b0 + sx * one_b1) / bw, (b * one_f0 + sx * one_f1) / afs
            step0 = base_memo.get(b) or base(b)
            if k == 1:                            # one step: the larger of the two at its start (as the sum has it)
                run_time = step0 + (u0 if u0 >= v0 else v0)
                upcoming = inf                    # whatever falls during it is seen at its end
            else:
                if not has_caps:
                    u1, v1 = b * one_b1 / bw, b * one_f1 / afs
                run_time = k * step0 + _affine_max_sum(u0, u1, v0, v1, k)
                upcoming = min(arrivals[0][0] if arrivals else inf, landing[0][0] if landing else inf,
                               leaving[0][0] if leaving else inf)
            if now + run_time > upcoming:         # stop at the step during which the next event falls
                k, run_time = _first_step_reaching(step0, u0, u1, v0, v1, k, upcoming - now, run_time)
                added = None
        if added is None:
            added = (need1 if k == 1 else crossings(k, s0, b)) if fast else need_after(k)
        now += run_time
        steps += k
        free -= added
        if total_blocks - free > peak_used:
            peak_used = total_blocks - free
        # the run's end, before completions free their blocks (the batch, the requests out and DRAM as it started)
        mark((now, total_blocks - free, b, out, dram_used))
        no_admit = False
        if k == k_done:                           # the first completion is at the run's end
            gone = set()
            while done_heap and done_heap[0][0] == steps:
                _, i = heappop(done_heap)
                if in_run[i] and done_at[i] == steps:
                    gone.add(i)
            for i in sorted(gone, key=running.index) if len(gone) > 1 else gone:   # in batch order
                running.remove(i)
                leave(i)
                finished(i)

    if o.on_event is not None:
        o.on_event(event_state())
    arrival, admitted, first_token, finish = (np.array(a, dtype=float)
                                              for a in (arrival, admitted, first_token, finish))
    preemptions, swap_outs, swap_ins, recomputed, offloads, prefix_hits = (
        np.array(a, dtype=np.int64) for a in (preemptions, swap_outs, swap_ins, recomputed, offloads, prefix_hits))
    if next_id < n:     # a closed loop's --duration ended before every request was submitted: the run is the rest
        (P, L, arrival, admitted, first_token, finish, preemptions, swap_outs, swap_ins, recomputed, offloads,
         prefix_hits) = (a[:next_id] for a in (P, L, arrival, admitted, first_token, finish, preemptions, swap_outs,
                                               swap_ins, recomputed, offloads, prefix_hits))
    setup = Setup(block, block_bytes, pool, total_blocks, wm_blocks, max_batch, o.max_batch is None, chunk, link,
                  dram_cap, base(1), prefix_blocks, hit)
    peak_bytes = bytes_at[-(-(P + L - 1) // block)]
    return SimRun(s, o, workload, setup, P, L, arrival, admitted, first_token, finish, preemptions, swap_outs,
                  swap_ins, recomputed, peak_bytes, now, swapped_out_bytes, swapped_in_bytes, steps, events,
                  peak_used, peak_dram, peak_running, stall_prefill, stall_swap, offloads, thr, prefix_hits,
                  _timeline_arrays(marks))


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

    n = len(workload.prompts)
    P, L = np.asarray(workload.prompts), np.asarray(workload.outputs)
    if workload.arrivals is not None:
        active, users = min(replicas, n), None
    else:
        u = min(int(workload.users), n)
        active = min(replicas, u)
        users = [len(range(r, u, replicas)) for r in range(active)]
    out = []
    for r in range(active):
        idx = np.arange(r, n, active)
        arr = None if workload.arrivals is None else np.asarray(workload.arrivals, dtype=float)[idx]
        out.append((idx, dataclasses.replace(workload, prompts=P[idx], outputs=L[idx], arrivals=arr,
                                             users=None if users is None else users[r])))
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
                                        "offloads", "prefix_hit_tokens")}

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
        timeline=_sum_timelines([run.timeline for run in runs]), replicas=len(runs), replica_of=rep[order])


def routing_note(dp: int, serving: int, n: int) -> str:
    """The note every simulate output carries for a deployment of DP > 1 replicas."""
    idle = f" ({dp - serving:,} got no request)" if serving < dp else ""
    return (f"{dp:,} DP replicas, each its own KV pool and engine{idle}; requests routed {ROUTING}. Per-request "
            f"percentiles are over all {n:,} requests, counts, bytes, steps and stalls summed, throughput the "
            "deployment's, simulated time the longest replica's, peaks (running, blocks held, DRAM per GPU) the "
            "busiest replica's; the timeline sums the replicas (occupancy over all their pools, DRAM the mean "
            "per GPU).")


def simulate_deployment(s: Scenario, workload: Workload, options: SimOptions | None = None,
                        progress=None) -> SimRun:
    """The deployment's DP replicas, each its own pool and engine (``simulate``), the requests routed by
    ``ROUTING`` and the runs merged (``merge_runs``). DP = 1 is ``simulate`` itself."""
    o = options or SimOptions()
    dp = s.parallelism.dp
    if dp == 1:
        return simulate(s, workload, o, progress)
    routed = route(workload, dp)
    n = len(workload.prompts)
    runs: list[SimRun] = []
    for _, w in routed:
        base = sum(len(run.prompts) for run in runs)
        step = None if progress is None else (lambda done, _total, base=base: progress(base + done, n))
        runs.append(simulate(s, w, o, step))
    return merge_runs(s, o, workload, routed, runs)


# === the metrics, as typed values =================================================================================
@dataclass(frozen=True)
class SimPlan:
    run: SimRun
    metrics: dict               # name -> typed value (kvplan.specs.values), JSON keys with their units
    setup: dict                 # the replica's constants as typed values
    per_request: tuple          # rows of typed values
    notes: tuple[str, ...]


TIMELINE_BUCKETS = 40


def timeline_buckets(run: SimRun, buckets: int = TIMELINE_BUCKETS):
    """The run's timeline in ``buckets`` equal slices of the simulated time: for each slice its start and, per
    series, the most it reached (the state in force at the slice's start, and every mark inside it; the engine
    marks the state as each run of steps starts, after admissions, and as it ends, before completions free
    their blocks, so a run's peak occupancy is seen). Series:
    pool occupancy (blocks held / the blocks requests draw from), running requests, requests swapped out (in DRAM
    or on their way), DRAM bytes per GPU."""
    import numpy as np

    t, used, running, swapped, dram = run.timeline
    end = max(run.simulated_seconds, 1e-12)
    edges = np.linspace(0.0, end, buckets + 1)
    first = np.maximum(np.searchsorted(t, edges[:-1], side="right") - 1, 0)
    last = np.maximum(np.searchsorted(t, edges[1:], side="left"), first + 1)
    # DP replicas: blocks held over every replica's pool, running and swapped summed, DRAM the mean per GPU
    series = {"pool_occupancy": used / max(run.setup.total_blocks * run.replicas, 1), "running_requests": running,
              "swapped_requests": swapped, "dram_bytes_per_gpu": dram / run.replicas if run.replicas > 1 else dram}
    out = {name: [float(v[a:b].max()) for a, b in zip(first, last, strict=True)] for name, v in series.items()}
    return [float(x) for x in edges[:-1]], out


def _pct(values, q: float) -> float | None:
    import numpy as np

    return float(np.percentile(values, q)) if len(values) else None


OVERLOAD_SHARE = 0.1   # a sweep point is overloaded when this share of its requests still waits at the last arrival


def _waiting_at_last_arrival(r, Count, derived):
    """Requests that had arrived but not yet started when the last one arrived: bounded when the deployment keeps
    up with the arrivals, a growing share of the run when it does not (the queue grows without bound)."""
    import numpy as np

    if not len(r.arrival):
        return Count(0, derived("no requests"))
    last = float(r.arrival.max())
    waiting = int(np.count_nonzero((r.arrival <= last) & (r.admitted > last)))
    return Count(waiting, derived("requests arrived by the last arrival and not yet admitted then",
                                  f"{waiting:,} of {len(r.arrival):,} at t = {last:.6g} s"))


def plan_simulate(s: Scenario, workload: Workload, options: SimOptions | None = None, progress=None) -> SimPlan:
    from kvplan.specs.values import Bytes, Count, Fraction, Number, Seconds, Tokens, default, derived, given

    o = options or SimOptions()
    r = simulate_deployment(s, workload, o, progress)
    u = r.setup
    n = len(r.prompts)
    gen = int(r.outputs.sum())
    T = r.simulated_seconds
    ttft = r.first_token - r.arrival
    queue = r.admitted - r.arrival
    multi = r.outputs > 1
    tpot = (r.finish[multi] - r.first_token[multi]) / (r.outputs[multi] - 1)
    recomputed = int(r.recomputed.sum())
    preempted = int((r.preemptions > 0).sum())
    so, si = int(r.swap_outs.sum()), int(r.swap_ins.sum())
    off = int(r.offloads.sum()) if r.offloads is not None else 0
    hits_n = int((r.prefix_hit_tokens > 0).sum()) if r.prefix_hit_tokens is not None else 0
    hits_tok = int(r.prefix_hit_tokens.sum()) if r.prefix_hit_tokens is not None else 0

    dp = s.parallelism.dp

    def many(text: str) -> str:
        """A derivation's words for a deployment of several DP replicas (none for one: its text is unchanged)."""
        return text if dp > 1 else ""

    def pct(name: str, values, q: float, cls, what: str):
        v = _pct(values, q)
        return cls(v, derived(f"p{q:g} of {what} over {len(values):,} requests (numpy linear interpolation)",
                              f"{name} = {v:.6g}" if v is not None else "no requests"))

    def ratio(cls, num, den, formula: str, names: str):
        v = num / den if den else None
        return cls(v, derived(formula, f"{names}: {num:,.6g} / {den:,.6g}" + (f" = {v:.6g}" if v is not None else "")))

    m = {
        "requests_finished": Count(n, derived("requests that finished (every request runs to the end)", f"{n:,}")),
        "generated_tokens": Tokens(gen, derived("sum of the output lengths", f"{gen:,} tokens")),
        "simulated_seconds": Seconds(T, derived("time of the last completion (the first arrival at 0 s or later)"
                                                + many(", the longest replica's"), f"{T:.6g} s")),
        "peak_kv_bytes_per_request_p50": pct("p50", r.peak_bytes, 50, Bytes, "request_bytes at each request's "
                                             "longest cache (prompt + output - 1 tokens, block-rounded, per GPU)"),
        "peak_kv_bytes_per_request_p99": pct("p99", r.peak_bytes, 99, Bytes, "the same"),
        "peak_kv_bytes_per_request_max": Bytes(int(r.peak_bytes.max()), derived(
            "largest request_bytes at a request's longest cache", f"{int(r.peak_bytes.max()):,} B")),
        "preemptions": Count(int(r.preemptions.sum()), derived("sum of preemptions", f"{int(r.preemptions.sum()):,}")),
        "preempted_share": ratio(Fraction, preempted, n, "requests preempted at least once / requests",
                                 "preempted / requests"),
        "swap_out_count": Count(so, derived("sum of swap-outs (preemptions by swap and proactive offloads)",
                                            f"{so:,} ({off:,} offloads)")),
        "offload_count": Count(off, derived("proactive offloads: requests moved to DRAM above the threshold",
                                            f"{off:,}" if o.offload_threshold is not None else "0 (no threshold)")),
        "swap_in_count": Count(si, derived("sum of swap-ins", f"{si:,}")),
        "swapped_bytes": Bytes(r.swapped_out_bytes, derived("bytes per GPU copied out to host DRAM"
                                                            + many(", summed over the replicas"),
                                                            f"{r.swapped_out_bytes:,} B")),
        "swap_out_per_request": ratio(Number, so, n, "swap-outs / requests", "swap-outs / requests"),
        "swap_in_per_request": ratio(Number, si, n, "swap-ins / requests", "swap-ins / requests"),
        "swap_out_per_second": ratio(Number, so, T, "swap-outs / simulated seconds", "swap-outs / s"),
        "swap_in_per_second": ratio(Number, si, T, "swap-ins / simulated seconds", "swap-ins / s"),
        "swap_out_per_minute": ratio(Number, 60 * so, T, "60 x swap-outs / simulated seconds", "60 x swap-outs / s"),
        "prefix_hit_tokens": Tokens(hits_tok, derived("prompt tokens the prefix cache served (whole blocks of the "
                                                      "shared prefix, every prompt after the first)",
                                                      f"{hits_n:,} hits x {u.prefix_hit_tokens_each:,} tokens = "
                                                      f"{hits_tok:,}")),
        "recomputed_tokens": Tokens(recomputed, derived("sum over recomputes of the cache re-prefilled "
                                                        "(prompt + generated - 1 tokens)", f"{recomputed:,} tokens")),
        "recompute_rate": ratio(Fraction, recomputed, gen, "recomputed tokens / generated tokens",
                                "recomputed / generated"),
        "tpot_seconds_p50": pct("p50", tpot, 50, Seconds, "TPOT = (finish - first token) / (output - 1)"),
        "tpot_seconds_p99": pct("p99", tpot, 99, Seconds, "TPOT"),
        "tpot_seconds_mean": Seconds(float(tpot.mean()) if len(tpot) else None, derived(
            "mean of the per-request TPOT", f"{float(tpot.mean()):.6g} s" if len(tpot) else "no requests")),
        "ttft_seconds_p50": pct("p50", ttft, 50, Seconds, "TTFT = first token - arrival (queueing + prefill)"),
        "ttft_seconds_p99": pct("p99", ttft, 99, Seconds, "TTFT"),
        "queue_seconds_p50": pct("p50", queue, 50, Seconds, "queueing delay = first admission - arrival"),
        "queue_seconds_p99": pct("p99", queue, 99, Seconds, "queueing delay"),
        "waiting_at_last_arrival": _waiting_at_last_arrival(r, Count, derived),
        "throughput_tokens_per_second": ratio(Number, gen, T, "generated tokens / simulated seconds",
                                              "tokens / s"),
        "throughput_requests_per_second": ratio(Number, n, T, "requests / simulated seconds", "requests / s"),
        "peak_running_requests": Count(r.peak_running, derived("most requests decoding in one step"
                                                               + many(" (the busiest replica's)"),
                                                               f"{r.peak_running:,}")),
        "peak_kv_blocks_used": Count(r.peak_blocks_used, derived("most blocks held at once (running, landing)"
                                                                 + many(" in one replica's pool (the busiest)"),
                                                                 f"{r.peak_blocks_used:,} of {u.total_blocks:,}")),
        "peak_dram_bytes_per_gpu": Bytes(r.peak_dram_bytes, derived("most bytes per GPU parked in host DRAM at once"
                                                                    + many(" (the busiest replica's)"),
                                                              f"{r.peak_dram_bytes:,} B")),
        "prefill_stall_seconds": Seconds(r.prefill_seconds, derived(
            "time the batch stood still for prefills and re-prefills" + many(", summed over the replicas"),
            f"{r.prefill_seconds:.6g} s")),
        "swap_stall_seconds": Seconds(r.swap_stall_seconds, derived(
            "time the batch waited for swap-out copies" + many(", summed over the replicas"),
            f"{r.swap_stall_seconds:.6g} s")),
        "decode_steps": Count(r.decode_steps, derived("decode steps simulated", f"{r.decode_steps:,}")),
        "events": Count(r.events, derived("scheduler events (runs of steps between them are summed in closed form)",
                                          f"{r.events:,}")),
    }
    setup = {
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
            WATERMARK_SOURCE)),
        "max_batch": Count(u.max_batch, default("the engine's max_num_seqs") if u.max_batch_from_engine
                           else given("--max-batch")),
        "max_num_batched_tokens": Tokens(u.chunk_tokens, default("the engine's max_num_batched_tokens "
                                                                 "(the prefill chunk)")),
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
    notes = []
    if dp > 1:
        m["replicas"] = Count(dp, derived("the deployment's DP replicas, each its own pool and engine", f"DP={dp}"))
        m["replicas_serving"] = Count(r.replicas, derived(
            "replicas the routing gave requests (" + ROUTING + ")", f"{r.replicas:,} of {dp:,}"))
    if o.policy == "swap" and u.dram_bytes_per_gpu is not None and r.peak_dram_bytes > u.dram_bytes_per_gpu:
        notes.append(f"The swapped-out KV peaked at {r.peak_dram_bytes / 2**30:,.1f} GiB per GPU, past the host tier's "
                     f"{u.dram_bytes_per_gpu / 2**30:,.1f} GiB: --policy swap-then-recompute respects the tier.")
    return SimPlan(r, m, setup, tuple(rows), tuple(notes))


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
    if not 1 <= n <= 200 or (n == 1) != (a == b):
        raise KvplanError(f"--sweep-rate {text!r}: POINTS must be 2 .. 200 (or 1 with FROM = TO)", example)
    return tuple(a + (b - a) * i / (n - 1) for i in range(n)) if n > 1 else (a,)


@dataclass(frozen=True)
class SweepPlan:
    rates: tuple[float, ...]
    points: tuple[dict, ...]             # each rate's metrics (plan_simulate's, typed)
    meets: tuple[bool, ...]
    capacity: float | None               # the highest rate at which it and every lower rate meet the targets
    tpot_slo: float | None
    max_recompute_rate: float | None
    workers: int                         # processes the points ran in (1: serial)


def _sweep_point(job):
    s, work, o = job
    try:
        return plan_simulate(s, work, o).metrics
    except KvplanError as err:           # KvplanError does not pickle its hint: carry it as data
        return ("error", err.message, err.hint)


OVERLOAD_MIN = 10      # ... and more than this many (a burst of a handful of requests is not a growing queue)


def overloaded(metrics: dict) -> bool:
    """The deployment does not keep up with this rate: more than OVERLOAD_SHARE of the run's requests, and more
    than OVERLOAD_MIN, still wait to start when the last one arrives (a stable queue stays short; an overloaded one
    holds a growing share)."""
    if "waiting_at_last_arrival" not in metrics or "requests_finished" not in metrics:
        return False
    n = metrics["requests_finished"].value or 0
    return (metrics["waiting_at_last_arrival"].value or 0) > max(OVERLOAD_SHARE * n, OVERLOAD_MIN)


def meets_targets(metrics: dict, tpot_slo: float | None, max_recompute_rate: float | None) -> bool:
    """TPOT p99 <= the SLO and the recompute rate <= its cap (a target not given always holds), and the deployment
    keeps up with the rate (``overloaded``): a queue that grows without bound meets no target, whatever the TPOT of
    the requests that do run."""
    tpot, rate = metrics["tpot_seconds_p99"].value, metrics["recompute_rate"].value
    ok_tpot = tpot_slo is None or (tpot is not None and tpot <= tpot_slo)
    return (ok_tpot and (max_recompute_rate is None or (rate or 0.0) <= max_recompute_rate)
            and not overloaded(metrics))


def plan_sweep(s: Scenario, works: list, options: SimOptions, tpot_slo: float | None,
               max_recompute_rate: float | None, workers: int | None = None, progress=None) -> SweepPlan:
    """Each ``(rate, workload)`` simulated with the same options; points run in processes
    (``concurrent.futures.ProcessPoolExecutor``) when there are at least ``PARALLEL_MIN_REQUESTS`` requests in all
    and more than one CPU, else in order. Every point is the same deterministic function of its inputs, so the
    results do not depend on how they ran. ``progress(done, total)`` is called as points finish."""
    import os

    if tpot_slo is None and max_recompute_rate is None:
        raise KvplanError("--sweep-rate finds the highest rate that meets a target, and none was given",
                          "give --tpot-slo and/or --max-recompute-rate")
    jobs = [(s, w, options) for _, w in works]
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
    meets = tuple(meets_targets(m, tpot_slo, max_recompute_rate) for m in results)
    capacity = None
    for (rate, _), ok in zip(works, meets, strict=True):
        if not ok:
            break
        capacity = rate
    return SweepPlan(tuple(r for r, _ in works), tuple(results), meets, capacity, tpot_slo, max_recompute_rate,
                     workers)
