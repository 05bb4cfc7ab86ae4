"""SGLang's scheduler for ``kvplan simulate --engine sglang``: what SGLang decides between its forward passes,
driving the replica state and mechanics of ``kvplan.engines.replica`` through the ``Scheduler`` interface of
``kvplan.engines.scheduling``. The rules are read from the SGLang v0.5.23 wheel (``sglang-0.5.23``, PyPI; SGLang
wheels carry no commit, so each rule cites the release tag and the file under ``python/sglang/srt/``). The release
the adapter is pinned to does not change them (older releases are not read for the scheduler: a note says so).

Units: kvplan's pool is in blocks of one SGLang page (``block`` tokens, 1 unless a backend forces pages); SGLang's
admission counts tokens, so the pool's available tokens are its free blocks x block, and a page is ``block``
tokens. Each request's ``max_new_tokens`` is its output length (a benchmark client's ``max_tokens``), and it stops
there without ``ignore_eos``.

* **New-token ratio** (``managers/scheduler_components/new_token_ratio_tracker.py`` @v0.5.23,
  ``NewTokenRatioTracker.from_config``; defaults ``environ.py`` @v0.5.23: ``SGLANG_INIT_NEW_TOKEN_RATIO`` 0.7,
  ``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`` 0.14, ``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`` 600; ``--schedule-
  conservativeness`` 1.0, ``arg_groups/fields/schedule.py`` @v0.5.23, x 0.3 under DP attention,
  ``arg_groups/parallel_hook.py`` @v0.5.23): init = min(0.7 x conservativeness, 1), floor = min(init x 0.14, 1),
  decay = (init - floor) / 600 per decode step that did not retract (``Scheduler.update_running_batch``,
  ``managers/scheduler.py`` @v0.5.23: ``decay_step`` = max(ratio - decay, floor)). In closed form, j decode steps
  after it was set to r0 the ratio is max(r0 - j x decay, floor); after a retraction it is set to
  min(1, (sum of the kept requests' output tokens + 20 x kept) / (sum of their max_new_tokens + 1))
  (``estimate_new_token_ratio_after_retract``, ``SGLANG_RETRACT_DECODE_STEPS`` 20) and the step that follows the
  retraction does not decay it (j counts from the step after). It is reset to init when the scheduler idles
  (``Scheduler.on_idle``: nothing to prefill or decode), here when a request arrives at an empty replica after
  its last request finished (not at the same instant).
* **Admission** (``managers/schedule_policy.py`` @v0.5.23 ``PrefillAdder``, ``mem_cache/prefill_budget.py``
  @v0.5.23 ``PrefillBudget``; ``Scheduler._get_new_batch_prefill_raw``): between forward passes, before any decode
  (a prefill batch runs first when one can be formed), the waiting queue in order (``--schedule-policy`` fcfs,
  the default): a prefill round takes requests while rem_total = available tokens - reserved > 0, where reserved
  is, for each running request, min(max_new_tokens - output tokens, 4096) x ratio (``CLIP_MAX_NEW_TOKENS``
  4096, ``_get_running_request_total_token_offset``), and for each request taken in this round its extension
  (paged) + one page + min(max_new_tokens, 4096) (``_update_prefill_budget``, ``PrefillBudget.reserve``). A
  request is taken when its extension + min(max_new_tokens - output tokens, 4096) + one page < rem_total
  (``add_one_req``, ``PrefillBudget.check_prefill``); its extension is its input (prompt, and for a retracted
  request its output tokens too) less the cached prefix. A round also ends (and the next begins at once, with no
  decode between) when its chunk budget (``--chunked-prefill-size``) or ``--max-prefill-tokens`` (16384) is spent
  (``budget_state``: ``OTHER``); a request longer than the chunk left is chunked (``_select_prefill_admission``),
  its chunks run back to back (a chunked request continues first in every round, ``add_chunked_req``) and the
  round of its last chunk goes on with the chunk budget that chunk leaves, the requests of the earlier rounds then
  running. When a request does not fit (``NO_TOKEN``), or the batch holds ``--max-running-requests``, the batch is
  "full" (``batch_is_full``) and no admission is tried again until the running batch shrinks (a request finishes
  or is retracted; ``get_next_batch_to_run``, ``update_running_batch``). Into an empty replica a request that
  fails the check is admitted anyway (SGLang caps such a request's max_new_tokens to the pool when it arrives,
  ``Scheduler.handle_generate_request``; kvplan keeps its length).
* **Prefill**: prefill batches run between decode batches, not mixed into them (``--enable-mixed-chunk`` is off
  by default, ``Scheduler._get_new_batch_prefill_raw`` mixes only with it); the decode batch stalls meanwhile.
  A round's requests are one extend batch, one forward (``PACK_SOURCE``: ``_get_new_batch_prefill_raw`` makes one
  ``ScheduleBatch.init_new`` of the adder's ``can_run_list`` and one ``prepare_for_extend``), so kvplan prices them
  as one pass (``StepModel.prefill_pass_seconds`` of their (cached, fill) token ranges: one weight read, their
  summed tokens, each one's attention on its own cache; with HiCache the longer of it and the pass's load-backs,
  summed), their first tokens at its end. A request the round chunks runs alone, in chunks of
  ``chunked_prefill_size`` (``prefill_seconds``), between the pass before it and the pass after it (SGLang's first
  chunk shares the batch before, its last chunk the batch after: not modelled). Their first tokens come together:
  SGLang processes a prefill batch's result once, after its forward (``managers/scheduler_components/
  batch_result_processor.py`` @v0.5.23 ``process_batch_result_prefill``: ``copy_done.synchronize()``, then one
  ``stream_output(batch.reqs, ...)`` for the batch, a request still being chunked skipped; the same single call
  in v0.4.0's ``managers/scheduler.py`` and v0.5.9's ``managers/scheduler_output_processor_mixin.py``, the
  releases of the SGLang runs in ``tests/data/serving_runs.toml``), so the new requests a
  round prefills up to one it chunks have their first token when the last of them has its own; a chunked request
  starts the next such group (its last chunk's batch holds the round's later requests). kvplan ends the group
  before the chunked request's first chunk (SGLang's batch holds that chunk too: those tokens come a chunk early
  here), and a request whose prefill gives its last token (one output token, or a re-prefill's last) finishes at
  the end of the pass so far, its own and the earlier members' (SGLang streams it at the whole pass's end; its
  finish, and a closed loop's next arrival, are set when it is taken). Defaults by GPU memory
  (``arg_groups/memory_hook.py`` @v0.5.23 ``_handle_gpu_memory_settings``): < 20 GiB 2048, < 35 GiB and < 60 GiB
  4096, < 90 GiB and < 160 GiB 8192, else 16384; divided by the attention-DP size under DP attention
  (``arg_groups/parallel_hook.py`` @v0.5.23). ``--chunked-prefill-size`` and ``--max-prefill-tokens`` as given
  replace the defaults (``PREFILL_LIMITS_SOURCE``: the scheduler hands both to every ``PrefillAdder``, as its
  ``rem_chunk_tokens`` and ``rem_input_tokens``); a given chunk is divided by the attention-DP size too and must be
  whole pages (``CHUNK_PAGE_SOURCE``); SGLang's -1 (no chunking) is refused, not modelled. The prefill gives a
  token: a new request's first, a retracted request's next (SGLang re-prefills its input and every output token,
  ``Req.init_next_round_input``).
* **Running cap**: ``--max-running-requests`` (``--max-num-seqs``) or SGLang's default
  (``mem_cache/kv_cache_configurator.py`` @v0.5.23 ``resolve_max_num_reqs``): min(clamp(int(token capacity /
  context length x 512), 2048, 4096), token capacity // 2).
* **Retraction** (``managers/schedule_batch.py`` @v0.5.23 ``ScheduleBatch.check_decode_mem``,
  ``retract_decode``, ``_get_decode_retraction_order``; ``--retraction-policy`` length, the default): before a
  decode step whose new pages do not fit the free ones, requests are retracted in order of fewest output tokens,
  then longest input (ties: the later in the batch), at least one per call and until the step fits, always
  keeping one. A retracted request frees its KV and goes to the back of the waiting queue
  (``Scheduler._add_request_to_queue``); it re-prefills its input and outputs when admitted again, past what the
  radix tree still holds of it (below). Retractions are counted as preemptions (cause: retract).
* **Radix cache** (``mem_cache/common.py`` @v0.5.23 ``release_kv_cache``, ``checkpoint_kv_cache``,
  ``match_kv_cache``; ``mem_cache/unified_radix_cache.py`` ``checkpoint_into_tree``; ``mem_cache/radix_cache.py``
  ``evict``, ``inc_lock_ref``/``dec_lock_ref``; ``mem_cache/allocator/base.py`` ``evict_to_free_tokens``;
  ``managers/schedule_batch.py`` ``release_req``; ``managers/schedule_policy.py`` ``add_one_req``,
  ``_commit_prefill_admission``). SGLang's default tree cache is ``UnifiedRadixCache`` with the ``"lru"``
  eviction policy (``mem_cache/registry.py`` ``default_radix_cache_factory``). After a request's prefill its
  page-aligned tokens are inserted into the tree (``checkpoint_kv_cache``: ``cache_protected_len`` becomes them):
  its prompt, and for a re-prefill its prompt and outputs so far. A finished request's whole cache (prompt +
  output - 1 tokens, page-aligned) is inserted (``release_kv_cache(checkpoint=True)``; the leaf split at the
  prompt). A retracted request's ``release_kv_cache(checkpoint=False)`` frees only its tokens past
  ``cache_protected_len`` and unlocks its path, which stays in the tree. A path in the tree locked by a running
  request is not evictable; every other path is, and counts as free (SGLang's admission and ``check_decode_mem``
  read available + evictable, which is kvplan's free blocks). An allocation short of unused pages evicts its
  shortfall: the least recently used leaf first (its ``last_access_time``, set when the path was inserted or
  matched), whole nodes, then the leaf its parent becomes. ``retract_decode`` first evicts all it can (the
  failed ``check_decode_mem``), and after each victim ``release_req`` evicts until (requests kept) x 20 tokens
  are unused and the check until the step's pages are. A request a prefill round looks at is matched
  (``init_next_round_input``: its path used now); taken, its path is locked (``_commit_prefill_admission``) and
  its extension is its fill less the longest of the shared prefix and its own path; the admission check runs
  with its path locked, so its own cached blocks leave the free ones as they leave the extension (the check is
  the one above). A round's allocation evicts after its requests are locked (a request finished at its prefill
  enters the tree after that). So a victim's prompt is a prefix hit on resume only if what ran since did not
  need its pages: release_req's (kept x 20)-token eviction alone takes any victim whose freed outputs fall short
  of it, and a victim's path (last used at its prefill) is evicted before the caches of requests that finished
  after it. kvplan's tree: below the shared prefix (``--shared-prefix``, outside the pool), each request's own
  segments, one node per insert; with a Mooncake trace's ``hash_ids`` (``--trace``), a prompt is first a chain of
  nodes, one per 512-token block (an id stands for its block and every block before it, so a request matches
  the leading ids present; a node longer than the request's own block is not a match), which requests share:
  a node is locked while any request holding it runs, and a request's own segments hang below its whole chain.
  The match of a prompt is capped at its length less one token (SGLang computes the last token; the node stays
  whole). kvplan inserts a round's requests into the tree one after another, so a later one in a round hits the
  blocks an earlier one inserted (SGLang's batch computes both). Modelled where every page above the shared prefix
  is one block (no sliding windows or state layers; otherwise a victim re-prefills all past the shared prefix, an upper
  bound, and hash_ids are not used). Not modelled: ``calc_priority``'s match of every waiting request each
  round (the Rust tree core's fast match, whose effect on access times the wheel's Python does not show: kvplan
  refreshes only the requests a round looks at), the partial-node split of a match that ends inside a node.
* **HiCache** (``--enable-hierarchical-cache``; ``HICACHE_SOURCE``): the radix tree's host-memory tier, in ``_HiTree``.
  The host pool is ``--hicache-size`` GB per GPU / the bytes per token, else ``--hicache-ratio`` (2) x the device pool's
  tokens, in whole pages plus one padding page from v0.5.6 (``pool_host/base.py``). A node the tree inserts counts one
  insert and is written through when that reaches the write policy's threshold (``_inc_hit_count_and_check``: 1 for
  write_through, the default from v0.5.2, 2 for write_through_selective, the default before; kvplan's tree inserts each
  node once, so write_through_selective writes nothing), its unbacked ancestors first (``_build_backup_kv_action``),
  each making room by host eviction (the least recently used host leaf: host only, no child, ``_is_host_leaf``) and the
  first that finds none ending the backup (``_execute_kv_backup``). Device eviction of a backed leaf demotes it (its
  device pages freed, the node kept on host: ``_demote``); an unbacked one is deleted. A match walks device and host
  nodes; its host part (capped as above) of 10 tokens or more (``load_back_threshold``) is loaded back (``load_back``),
  the nodes locked on the device again and their pages allocated with the round's (evicted after it, as the rest),
  priced by ``costs.swap_seconds`` for their bytes with a copy per page over the host link shared by both directions;
  the prefill of that request takes the longer of its compute and the load (the forward waits layer by layer,
  ``LayerDoneCounter``). A smaller host hit is computed again into the same nodes (``_unevict_node_on_insert``). The
  admission check counts the host hit in the extension (``add_one_req``: ``fill - prefix_len`` on the device); the
  round's chunk budget does not. Write-through copies run on the write stream: their bytes and link time are reported,
  not put on the critical path, and a node whose write is in flight is not locked (SGLang locks it until the ack).
  write_back (backup at eviction, the reclaim of host duplicates) is refused, not modelled. SGLang does not swap
  preempted requests: ``--policy swap`` / ``swap-then-recompute`` and ``--offload-threshold`` are refused with
  ``--engine sglang``.
* **Overlap scheduler** (``OVERLAP_SOURCE``; on by default, off with ``--disable-overlap-schedule`` and with
  pipeline parallelism, ``OVERLAP_PP_SOURCE``). ``Scheduler.event_loop_overlap`` launches batch N+1 before it
  processes batch N's result (``process_batch_result``, which waits for N's forward): the CPU work of one batch runs
  under the other's forward, and batch N+1 is decided (``get_next_batch_to_run``) while N runs, from what was known
  when N started. What changes:

  - an arrival during batch N is first scheduled in N+2 (``ingest_requests`` runs before each decision); the
    requests that arrived by N's start are the ones N+1 can take (kvplan's round is one batch here: a prompt
    chunked over several SGLang batches is one round);
  - a request whose last token comes out of batch N is not decoded in N+1 (``_reqs_finishing_inflight``,
    ``enable_skip_finishing_decode``), but it is not finished yet when N+1 is decided: it holds its running seat,
    its pages and its locked radix path (N+1's prefill admission counts them) until N's result is processed after
    that decision (``release_kv_cache``), and the batch-full flag clears once that decision dropped it
    (``update_running_batch``). A request finished at its prefill (one output token) is held alike;
  - a decision that would run nothing while finishing requests hold their pages (no prefill, and no decode: every
    request finishing, or the decode short of pages, which ``update_running_batch`` then skips instead of
    retracting) is an empty batch: the GPU idles until N ends and the next decision is made with everything known;
  - a first token (and a last) is streamed when its batch's result is processed, at that batch's end, as without
    overlap: TTFT moves only by the later admission.

  Modelled at the events: the first ``admit`` after a batch sees the arrivals up to the time of the call before
  (where that batch started; ``cut``) and the finished requests still holding what they held (``late``, processed
  after the decision by ``_late_in``); a decision that hid something has the next decode run be one step. kvplan's
  step price has no CPU term between batches (its per-step overhead is the generic figure fitted on vLLM), so the
  flag changes when requests are seen and freed, not a step's price. Not modelled: a request retracted while its
  token is in flight loses that token (``process_batch_result`` skips a retracted request: it re-prefills one
  token less, and a request retracted in flight after its prefill has its first token again later); the
  reservation's one in-flight token per running request; hybrid linear-attention models' ``no_buffer`` Mamba
  radix cache, which turns the overlap off (``arg_groups/overrides.py``: kvplan's tree is not modelled for them).
* **Polling** (``--scheduler-recv-interval N``, 1 by default; ``RECV_SOURCE``, the same in v0.5.9): the scheduler
  reads new requests from the tokenizer (``recv_requests``) only when ``SchedulerRecvSkipper.handle`` says so: each
  iteration adds its last batch's weight to a counter (a decode batch 1, no batch 1, any other, a prefill batch
  among them, 1000) and polls when the counter reaches N, resetting it to 0. So while decoding a new request is
  received every N decode steps; the iteration after a prefill batch polls; an idle loop spins and polls at once.
  kvplan: a request is received by the first poll after its arrival (what that decision sees: with the overlap
  scheduler, the arrivals up to the start of the batch in flight), and a prefill round takes only received ones;
  while one waits unreceived, each run is one step. N is capped at 1000 (above it a prefill batch would not make
  the next iteration poll).
* ``--victim`` other than the default is a what-if: it picks the retracted requests (one at a time, by kvplan's
  rule) in place of SGLang's order, and a note says so. SGLang has no admission watermark.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Callable, MutableSequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.engines.scheduling import DEFAULT_VICTIM, DEFAULT_WATERMARK, RuleBook, Scheduler
from kvplan.errors import KvplanError

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.replica import ReplicaState

RELEASE = "v0.5.23"
WHERE = f"sgl-project/sglang @{RELEASE} python/sglang/srt/"
INIT_NEW_TOKEN_RATIO = 0.7            # SGLANG_INIT_NEW_TOKEN_RATIO (environ.py)
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14     # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
NEW_TOKEN_RATIO_DECAY_STEPS = 600     # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
RETRACT_DECODE_STEPS = 20             # SGLANG_RETRACT_DECODE_STEPS
CLIP_MAX_NEW_TOKENS = 4096            # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION (schedule_policy.py)
MAX_PREFILL_TOKENS = 16384            # --max-prefill-tokens (arg_groups/fields/schedule.py)
CONSERVATIVENESS = 1.0                # --schedule-conservativeness
DP_ATTENTION_CONSERVATIVENESS = 0.3   # x under DP attention (arg_groups/parallel_hook.py)
RATIO_SOURCE = WHERE + "managers/scheduler_components/new_token_ratio_tracker.py; environ.py"
RETRACT_SOURCE = WHERE + "managers/schedule_batch.py (retract_decode, _get_decode_retraction_order)"
ADMISSION_SOURCE = WHERE + "managers/schedule_policy.py (PrefillAdder); mem_cache/prefill_budget.py"
CHUNK_SOURCE = WHERE + "arg_groups/memory_hook.py (_handle_gpu_memory_settings)"
CHUNK_DP_SOURCE = WHERE + "arg_groups/parallel_hook.py (_handle_data_parallelism: chunked_prefill_size // attn_dp_size)"
CHUNK_PAGE_SOURCE = WHERE + "arg_groups/validation_hook.py (chunked_prefill_size % page_size == 0)"
PREFILL_LIMITS_SOURCE = WHERE + ("managers/scheduler.py (PrefillAdder(..., max_prefill_tokens, chunked_prefill_size)); "
                                 "managers/schedule_policy.py (PrefillAdder: rem_input_tokens, rem_chunk_tokens, "
                                 "budget_state, _select_prefill_admission); arg_groups/fields/schedule.py "
                                 "(max_prefill_tokens 16384, chunked_prefill_size None: by GPU memory)")
PACK_SOURCE = WHERE + ("managers/scheduler.py (_get_new_batch_prefill_raw: ScheduleBatch.init_new(can_run_list, "
                      "...), new_batch.prepare_for_extend(): a round's requests are one extend batch, one forward)")
RUNNING_SOURCE = WHERE + "mem_cache/kv_cache_configurator.py (resolve_max_num_reqs)"
OVERLAP_SOURCE = WHERE + ("managers/scheduler.py (event_loop_overlap, _reqs_finishing_inflight, "
                          "update_running_batch); arg_groups/fields/schedule.py (disable_overlap_schedule = False)")
RECV_SOURCE = WHERE + ("managers/scheduler_components/recv_skipper.py (SchedulerRecvSkipper.handle); environ.py "
                      "(SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE 1, _NONE 1, _DEFAULT 1000); managers/scheduler.py "
                      "(recv_requests)")
OVERLAP_PP_SOURCE = WHERE + "arg_groups/overrides.py (_pipeline_parallel_overlap_disable)"
OVERLAP_DEFAULT = True                # SGLang's default (disable_overlap_schedule = False)
# --chunked-prefill-size by GPU memory (GiB, exclusive upper bounds); the last applies above them all
CHUNK_BY_GPU_GIB = ((20, 2048), (35, 4096), (60, 4096), (90, 8192), (160, 8192))
CHUNK_LARGEST_GPU = 16384
# HiCache (module docstring, "HiCache")
HICACHE_SINCE = (0, 4, 6)             # --enable-hierarchical-cache, --hicache-ratio/-size/-write-policy
HICACHE_FLAGS_SOURCE = "sgl-project/sglang @v0.4.6 python/sglang/srt/server_args.py (--enable-hierarchical-cache)"
HICACHE_RATIO = 2.0                   # --hicache-ratio in cache mode (arg_groups/hicache_hook.py)
WRITE_POLICIES = ("write_through", "write_through_selective", "write_back")
WRITE_THROUGH_SINCE = (0, 5, 2)       # the default policy: write_through_selective before (server_args.py @v0.5.1)
WRITE_THROUGH_THRESHOLD = {"write_through": 1, "write_through_selective": 2}   # unified_radix_cache.init_hicache
LOAD_BACK_THRESHOLD = 10              # tokens: a smaller host hit is recomputed (init_hicache load_back_threshold)
# The host pool's pages: v0.4.6-v0.5.5 round the host tokens down to whole pages (memory_pool.py @v0.4.6,
# memory_pool_host.py @v0.5.3-v0.5.5: size - size % page_size); from v0.5.6 one padding page more, page_num =
# size // page_size + 1 (memory_pool_host.py @v0.5.6-v0.5.10, pool_host/base.py @v0.5.23 HostKVCache.__init__).
HOST_PADDING_PAGE_SINCE = (0, 5, 6)
HOST_PAGES_SOURCE = ("sgl-project/sglang @v0.5.5 python/sglang/srt/mem_cache/memory_pool_host.py (size - size % "
                     "page_size) .. @v0.5.6 (page_num = size // page_size + 1) .. @v0.5.23 mem_cache/pool_host/"
                     "base.py HostKVCache.__init__")
HICACHE_SOURCE = WHERE + ("mem_cache/unified_radix_cache.py (init_hicache, load_back, _execute_kv_backup), "
                          "mem_cache/unified_cache/unified_tree_core.py (evict_device_leaf, _demote, "
                          "_inc_hit_count_and_check, _is_host_leaf), mem_cache/pool_host/base.py, "
                          "managers/schedule_policy.py (add_one_req: needs_host_load_back)")


@dataclass(frozen=True)
class HiCache:
    """SGLang's HiCache settings (``--enable-hierarchical-cache``): the write policy (None: the release's
    default), the host pool as a ratio of the device pool (None: 2) or a size in GB (``--hicache-size``, which
    overrides the ratio)."""

    write_policy: str | None = None
    ratio: float | None = None
    size_gb: float | None = None
    padding_page: bool = True   # the host pool's extra page (HOST_PADDING_PAGE_SINCE; _hicache_for sets it)

    def __post_init__(self) -> None:
        if self.write_policy is not None and self.write_policy not in WRITE_POLICIES:
            raise KvplanError(f"--hicache-write-policy {self.write_policy!r} is not SGLang's",
                              "choose " + ", ".join(WRITE_POLICIES))
        if self.ratio is not None and not 0 < self.ratio <= 1000:
            raise KvplanError(f"--hicache-ratio {self.ratio:g} is not in (0, 1000]",
                              "give the host pool's size over the device pool's, e.g. --hicache-ratio 2")
        if self.size_gb is not None and not 0 < self.size_gb <= 1_000_000:
            raise KvplanError(f"--hicache-size {self.size_gb:g} GB is not in (0, 1,000,000]",
                              "give the host pool per GPU in GB, e.g. --hicache-size 100")


def chunked_prefill_size(hbm_gib: float, attn_dp: int = 1) -> int:
    """SGLang's default ``--chunked-prefill-size`` for a GPU of ``hbm_gib`` (divided by the attention-DP size)."""
    size = next((c for limit, c in CHUNK_BY_GPU_GIB if hbm_gib * 1024 < limit * 1024), CHUNK_LARGEST_GPU)
    return size // attn_dp


def prefill_limits(s: Any, attn_dp: int, block: int) -> tuple[int, str]:
    """The prefill chunk of scenario ``s`` and where it comes from: ``--chunked-prefill-size`` as given, else SGLang's
    default for the GPU (``chunked_prefill_size``), either divided by the attention-DP size (``CHUNK_DP_SOURCE``: the
    division applies to a given size too). A chunk that is not whole pages, or below one page per rank, is refused:
    SGLang asserts chunked_prefill_size % page_size == 0 (``CHUNK_PAGE_SOURCE``)."""
    given = s.chunked_prefill_size
    if given is None:
        return chunked_prefill_size(s.hardware.hbm_capacity_gib.value, attn_dp), \
            f"SGLang's default for {s.hardware.id}" + (f" / {attn_dp} attention-DP ranks" if attn_dp > 1 else "")
    if given % block:
        raise KvplanError(f"--chunked-prefill-size {given:,} is not a whole number of SGLang's {block}-token pages; "
                          f"SGLang refuses to start ({CHUNK_PAGE_SOURCE})",
                          f"give a multiple of {block}, e.g. --chunked-prefill-size {max(given // block, 1) * block}")
    chunk = given // attn_dp
    if chunk < block:
        raise KvplanError(f"--chunked-prefill-size {given:,} over {attn_dp} attention-DP ranks leaves less than one "
                          f"{block}-token page a rank", f"give at least {block * attn_dp:,}")
    return chunk, "given" + (f" / {attn_dp} attention-DP ranks" if attn_dp > 1 else "")


def max_running_requests(token_capacity: int, context_len: int | None) -> int:
    """SGLang's default ``--max-running-requests`` per worker for a pool of ``token_capacity`` tokens."""
    estimated = int(token_capacity / context_len * 512) if context_len else 0
    return min(max(min(estimated, 4096), 2048), token_capacity // 2)


def dp_attention(par: Any) -> bool:
    """SGLang's DP attention: DP > 1 with the experts spread past the attention TP group (as kvplan launches it)."""
    return par.dp > 1 and bool(par.ep) and par.ep > par.tp


class _Batch:
    """The running batch as the scheduler reads it, kept incrementally (the event loop's runs do not visit it):
    each member's completion step d (``ReplicaState.done_at``: it has d - steps output tokens to go), so that
    sum min(d - steps, clip) = sum of the near ones' d - steps x near + clip x far, the far ones (d - steps >=
    clip) moving near as steps pass (a heap by d), the near ones that completed (d <= steps) leaving (a heap);
    the sums of their prompts and outputs; and a heap of (output tokens less steps, -prompt, -join order) for
    SGLang's retraction order. Entries of a request that left are skipped by their join number."""

    def __init__(self, n: int, clip: int) -> None:
        self.clip = clip
        self.gen = [-1] * n               # the join number of its current membership (-1: not a member)
        self.near_of = [False] * n
        self.d = [0] * n
        self.near: list[tuple[int, int, int]] = []
        self.far: list[tuple[int, int, int]] = []
        self.order: list[tuple[int, int, int, int]] = []
        self.near_sum = self.n_near = self.n_far = self.sum_p = self.sum_l = 0
        self.joins = 0
        self.last_done = -math.inf        # when the last member found done finished

    def join(self, i: int, d: int, steps: int, prompt: int, output: int, offset: int) -> None:
        """Request i joins, done at step d; ``offset``: its context less the steps (ReplicaState.xo_l)."""
        self.joins += 1
        k = self.joins
        self.gen[i], self.d[i] = k, d
        self.sum_p += prompt
        self.sum_l += output
        if d - steps < self.clip:
            self.near_of[i] = True
            self.near_sum += d
            self.n_near += 1
            heapq.heappush(self.near, (d, k, i))
        else:
            self.near_of[i] = False
            self.n_far += 1
            heapq.heappush(self.far, (d, k, i))
        heapq.heappush(self.order, (offset - prompt, -prompt, -k, i))

    def drop(self, i: int, prompt: int, output: int) -> None:
        """Request i leaves before it is done (retracted)."""
        if self.near_of[i]:
            self.near_sum -= self.d[i]
            self.n_near -= 1
        else:
            self.n_far -= 1
        self.sum_p -= prompt
        self.sum_l -= output
        self.gen[i] = -1

    def catch_up(self, steps: int, Pl: list[int], Ll: list[int], finish: MutableSequence[float]) -> None:
        """Far members within clip of done move near; near members done by ``steps`` leave (``finish``: the
        requests' finish times)."""
        far, near, gen, clip = self.far, self.near, self.gen, self.clip
        while far and far[0][0] - steps < clip:
            d, k, i = heapq.heappop(far)
            if gen[i] == k:
                self.near_of[i] = True
                self.n_far -= 1
                self.n_near += 1
                self.near_sum += d
                heapq.heappush(near, (d, k, i))
        while near and near[0][0] <= steps:
            d, k, i = heapq.heappop(near)
            if gen[i] == k:
                self.near_sum -= d
                self.n_near -= 1
                self.sum_p -= Pl[i]
                self.sum_l -= Ll[i]
                gen[i] = -1
                if finish[i] > self.last_done:
                    self.last_done = finish[i]

    def to_go(self, steps: int) -> int:
        """sum over the members of min(output tokens to go, clip) (after ``catch_up``)."""
        return self.near_sum - steps * self.n_near + self.clip * self.n_far

    def next_victim(self, in_run: list[bool]) -> int:
        """The member SGLang retracts first: fewest output tokens, then longest prompt, then the later to join."""
        order, gen = self.order, self.gen
        while True:
            _, _, negk, i = heapq.heappop(order)
            if gen[i] == -negk and in_run[i]:
                return i


class _Tree:
    """The radix tree as far as the pool needs it (module docstring, "Radix cache"). Nodes: Mooncake hash blocks
    (key: the hash id; a request's prompt is a chain of them) and each request's own segments (key: (request,
    end)), one per insert, below its prompt's chain (or the shared prefix). Each node holds the blocks of its
    tokens, page-aligned (``start`` .. ``end``, absolute, priced by the block table). A running request locks the
    nodes of its path (``path``: its keys from the root); a node no request locks is evictable and its blocks are
    free (SGLang's available + evictable is kvplan's ``ReplicaState.free``), so locking a node takes its blocks
    from the free ones and unlocking gives them back. A running request's ``held`` blocks are those of its cache
    not in the tree. Eviction: the least recently used leaf first (``stamp``: when its path was last matched or
    inserted), whole nodes, its parent then a leaf in turn."""

    def __init__(self, r: ReplicaState, hashes: Any = None, chunk: int = 512) -> None:
        self.r, self.btl, self.block = r, r.btl, r.block
        self.hashes, self.chunk = hashes, chunk      # per request its hash ids (PrefixBlocks), or None
        # key -> [parent key (None: the root), children, lockers, stamp, blocks, end token]
        self.nodes: dict[Any, list[Any]] = {}
        self.own: dict[int, list[Any]] = {}          # a request's own segments still in the tree, root first
        self.path: dict[int, list[Any]] = {}         # a running request's locked nodes, root first
        self.in_tree: dict[int, int] = {}            # their blocks
        self.pending: dict[int, tuple[int, int]] = {}   # without hash ids: a running request's last insert (end,
        # stamp), made a node only when it leaves the batch unfinished (retracted)
        self.lru: list[tuple[int, int, Any]] = []    # (stamp, push order, key) of evictable leaves, stale skipped
        # without hash ids nobody matches a finished request's path again: its segments leave the tree for this
        # queue, in stamp order (a finish is the newest use), as (stamp, blocks of each segment, root first)
        self.done: deque[tuple[int, list[int]]] = deque()
        self.pushes = 0
        self.clock = 0
        self.evictable = 0
        self.lazy = hashes is None                   # no hash ids: pending inserts, finished paths to ``done``
        self.dev_end = 0                             # (HiCache, ``_HiTree``: the last match's device part)
        self.loaded_now = 0                          # (HiCache: the blocks the last take brought back)

    def _ids(self, i: int) -> list[int]:
        h = self.hashes
        if h is None:
            return []
        return h.ids[int(h.offsets[i]):int(h.offsets[i + 1])].tolist()

    def _push(self, key: Any, stamp: int) -> None:
        self.pushes += 1
        heapq.heappush(self.lru, (stamp, self.pushes, key))

    def settle(self, free: int, margin: int = 0) -> None:
        """Evict least recently used leaves until ``margin`` blocks of the ``free`` ones hold nothing cached (an
        allocation evicts its shortfall: ``evict_to_free_tokens``)."""
        lru, nodes, done = self.lru, self.nodes, self.done
        while self.evictable > free - margin:
            while lru:                               # the heap's top, past stale entries
                st, _, key = lru[0]
                node = nodes.get(key)
                if node is None or node[3] != st or node[2] or node[1]:
                    heapq.heappop(lru)
                    continue
                break
            if done and (not lru or done[0][0] < lru[0][0]):
                segs = done[0][1]
                self.evictable -= segs.pop()
                if not segs:
                    done.popleft()
                continue
            if not lru:
                break
            st, _, key = heapq.heappop(lru)
            node = nodes[key]
            self.evictable -= node[4]
            del nodes[key]
            if type(key) is tuple:
                own = self.own[key[0]]
                own.pop()
                if not own:
                    del self.own[key[0]]
            up = node[0]
            if up is not None:
                parent = nodes[up]
                parent[1] -= 1
                if not parent[1] and not parent[2]:
                    self._push(up, parent[3])

    def match(self, i: int, fill: int) -> tuple[list[Any], int]:
        """Request i's path in the tree now, root first, and the tokens it covers (at most fill - 1, page-aligned):
        its prompt's hash chain while the ids are there, then its own segments (only past a whole chain)."""
        nodes = self.nodes
        ids = self._ids(i)
        found: list[Any] = []
        if ids:
            prompt = self.r.Pl[i]
            for h in ids:
                node = nodes.get(h)
                if node is None or node[5] > prompt:     # (a block longer than its own: not the same tokens)
                    break
                found.append(h)
        if len(found) == len(ids):
            found += self.own.get(i, ())
        end = nodes[found[-1]][5] if found else 0
        return found, min(end, (fill - 1) // self.block * self.block)

    def touch(self, keys: list[Any]) -> None:
        """A path matched or inserted now: its nodes the most recently used."""
        if keys:
            self.clock += 1
            clock, nodes = self.clock, self.nodes
            for key in keys:
                nodes[key][3] = clock
            last = nodes[keys[-1]]
            if not last[2] and not last[1]:
                self._push(keys[-1], clock)

    def take(self, i: int, keys: list[Any]) -> int:
        """Request i locks its matched nodes; returns the blocks that were evictable (now taken from the free ones
        by the caller)."""
        if not keys:
            self.path[i], self.in_tree[i] = [], 0
            return 0
        newly = held = 0
        nodes = self.nodes
        for key in keys:
            node = nodes[key]
            if not node[2]:
                newly += node[4]
            node[2] += 1
            held += node[4]
        self.evictable -= newly
        self.path[i] = list(keys)
        self.in_tree[i] = held
        return newly

    def newly(self, keys: list[Any]) -> int:
        """The blocks of the nodes no request locks (what locking them takes from the free ones)."""
        nodes = self.nodes
        return sum(nodes[key][4] for key in keys if not nodes[key][2])

    def _add(self, i: int, key: Any, start: int, end: int, own: bool) -> None:
        """A node of running request i's, locked by it; its blocks leave i's held ones for the tree."""
        path = self.path[i]
        up = path[-1] if path else None
        n = self.btl[end] - self.btl[start]
        self.nodes[key] = [up, 0, 1, 0, n, end]
        if up is not None:
            self.nodes[up][1] += 1
        path.append(key)
        self.in_tree[i] += n
        self.r.held[i] -= n
        if own:
            self.own.setdefault(i, []).append(key)

    def checkpoint(self, i: int, tokens: int) -> None:
        """Running request i's first ``tokens`` inserted (page-aligned down): the hash blocks of its prompt not in
        the tree, then one segment of its own to the end; its path touched now (it is locked: no LRU entry)."""
        block, path, nodes = self.block, self.path[i], self.nodes
        end = tokens // block * block
        self.clock += 1
        if self.lazy:                            # its own segment made only if it is retracted (``materialize``)
            self.pending[i] = (end, self.clock)
            return
        at = nodes[path[-1]][5] if path else 0
        whole = True
        if self.hashes is not None:
            ids = self._ids(i)
            prompt = self.r.Pl[i]
            for j in range(len(path), len(ids)):        # its chain past the matched part (the path is that chain)
                stop = min(prompt, (j + 1) * self.chunk) // block * block
                if stop > end or ids[j] in nodes:      # (an id seen below another prefix: not a chain; kept own)
                    break
                if stop > at:
                    self._add(i, ids[j], at, stop, False)
                    at = stop
            whole = len(path) >= len(ids)
        if end > at and whole:
            self._add(i, (i, end), at, end, True)
        clock = self.clock
        for key in path:
            nodes[key][3] = clock

    def materialize(self, i: int) -> None:
        """Without hash ids, running request i's last insert as a node (its segment past its path, locked by it;
        its blocks leave its held ones), its path stamped when the insert was: before it leaves the batch."""
        got = self.pending.pop(i, None)
        if got is None:
            return
        end, stamp = got
        path, nodes = self.path[i], self.nodes
        at = nodes[path[-1]][5] if path else 0
        if end > at:
            self._add(i, (i, end), at, end, True)
        for key in path:
            nodes[key][3] = stamp

    def retire(self, i: int, tokens: int | None = None) -> int:
        """Finished request i, without hash ids: its path (its own segments only) and, with ``tokens``, its cache's
        last segment to them (page-aligned down, inserted now) leave the tree for ``done``; returns the blocks
        they hold, now evictable (given back to the free ones by the caller)."""
        nodes, path = self.nodes, self.path.pop(i, ())
        self.own.pop(i, None)
        self.in_tree.pop(i, None)
        at = nodes[path[-1]][5] if path else 0
        stamp = nodes[path[-1]][3] if path else 0
        segs = [nodes.pop(key)[4] for key in path]
        got = self.pending.pop(i, None)
        if got is not None:                      # its last insert, not made a node
            end, stamp = got
            if end > at:
                n = self.btl[end] - self.btl[at]
                segs.append(n)
                self.r.held[i] -= n
                at = end
        if tokens is not None:
            self.clock += 1
            stamp = self.clock
            end = tokens // self.block * self.block
            if end > at:
                n = self.btl[end] - self.btl[at]
                segs.append(n)
                self.r.held[i] -= n
        total = sum(segs)
        if total:
            self.done.append((stamp, segs))
        self.evictable += total
        return total

    def release(self, i: int) -> int:
        """Request i (out of the batch) unlocks its path; returns the blocks that became evictable (given back to
        the free ones by the caller)."""
        freed = 0
        nodes = self.nodes
        for key in self.path.pop(i, ()):
            node = nodes[key]
            node[2] -= 1
            if not node[2]:
                freed += node[4]
                if not node[1]:
                    self._push(key, node[3])
        self.in_tree.pop(i, None)
        self.evictable += freed
        return freed

class _HiTree(_Tree):
    """The radix tree with HiCache's host tier (module docstring, "HiCache"). A node is also on the device or not
    (host only) and backed up to host memory or not: [parent, device children, lockers, stamp, blocks, end,
    on device, backed, children, inserts]. Device eviction takes the least recently used device leaf (no child on
    the device): a backed one is demoted (its blocks freed, the node kept on host), another deleted; host eviction
    (to make room for a backup) takes the least recently used host leaf (host only, no child). Write-through backs
    a node up when its inserts reach the policy's threshold (1 write_through, 2 write_through_selective), with its
    unbacked ancestors first, stopping at the first the host pool cannot hold. Paths are kept as nodes throughout
    (no ``pending`` inserts, no ``done`` queue): a finished request's backups hold host memory until evicted."""

    def __init__(self, r: ReplicaState, hashes: Any, host_blocks: int, threshold: int) -> None:
        super().__init__(r, hashes)
        self.lazy = False
        self.host_blocks, self.threshold = host_blocks, threshold
        self.host_used = self.peak_host = 0
        self.written = 0                              # blocks written to host memory
        self.hlru: list[tuple[int, int, Any]] = []   # (stamp, push order, key) of host leaves, stale skipped
        self.dev_end = 0                              # the last match's tokens on the device (capped)
        self.loaded_now = 0                           # the blocks the last take brought back to the device

    def _hpush(self, key: Any, stamp: int) -> None:
        self.pushes += 1
        heapq.heappush(self.hlru, (stamp, self.pushes, key))

    def _add(self, i: int, key: Any, start: int, end: int, own: bool) -> None:
        """A node of running request i's (inserted once: its first hit), backed up when that reaches the
        write-through threshold (``_inc_hit_count_and_check``)."""
        path, nodes = self.path[i], self.nodes
        up = path[-1] if path else None
        n = self.btl[end] - self.btl[start]
        nodes[key] = [up, 0, 1, 0, n, end, True, False, 0, 1]
        if up is not None:
            parent = nodes[up]
            parent[1] += 1
            parent[8] += 1
        path.append(key)
        self.in_tree[i] += n
        self.r.held[i] -= n
        if own:
            self.own.setdefault(i, []).append(key)
        if 1 >= self.threshold:
            self.back_up(key)

    def back_up(self, key: Any) -> None:
        """Write-through: the node's unbacked ancestors, then it, to host memory (``_build_backup_kv_action``),
        each making room by host eviction; stops at the first the pool cannot hold (``_execute_kv_backup``)."""
        nodes = self.nodes
        chain = [key]
        up = nodes[key][0]
        while up is not None and not nodes[up][7]:
            chain.append(up)
            up = nodes[up][0]
        for k in reversed(chain):
            node = nodes[k]
            n = node[4]
            short = n - (self.host_blocks - self.host_used)
            if short > 0 and self.evict_host(short) < short:
                return
            node[7] = True
            self.host_used += n
            self.written += n
            if self.host_used > self.peak_host:
                self.peak_host = self.host_used

    def evict_host(self, need: int) -> int:
        """Host leaves out, least recently used first, until ``need`` blocks of host memory are freed (or none is
        left); returns the blocks freed (``drive_host_eviction``)."""
        hlru, nodes = self.hlru, self.nodes
        freed = 0
        while freed < need:
            while hlru:
                st, _, key = hlru[0]
                node = nodes.get(key)
                if node is None or node[3] != st or node[6] or node[8] or node[2]:
                    heapq.heappop(hlru)
                    continue
                break
            if not hlru:
                break
            _, _, key = heapq.heappop(hlru)
            node = nodes.pop(key)
            freed += node[4]
            self.host_used -= node[4]
            self._unlink(key)
            up = node[0]
            if up is not None:
                parent = nodes[up]
                parent[8] -= 1
                if not parent[8] and not parent[6] and not parent[2]:
                    self._hpush(up, parent[3])
        return freed

    def _unlink(self, key: Any) -> None:
        if type(key) is tuple:                       # a request's own segment: the last of its list
            own = self.own[key[0]]
            own.pop()
            if not own:
                del self.own[key[0]]

    def settle(self, free: int, margin: int = 0) -> None:
        """Device eviction until ``margin`` blocks of the ``free`` ones hold nothing cached: the least recently used
        device leaf demoted to host when backed (``_demote``), else deleted (``_delete_unbacked_device_leaf``)."""
        lru, nodes = self.lru, self.nodes
        while self.evictable > free - margin:
            while lru:
                st, _, key = lru[0]
                node = nodes.get(key)
                if node is None or node[3] != st or node[2] or node[1] or not node[6]:
                    heapq.heappop(lru)
                    continue
                break
            if not lru:
                break
            st, _, key = heapq.heappop(lru)
            node = nodes[key]
            self.evictable -= node[4]
            up = node[0]
            if node[7]:                              # demoted: the node stays, host only
                node[6] = False
                if not node[8]:
                    self._hpush(key, st)
            else:                                    # (no child: a backed child's ancestors are backed)
                del nodes[key]
                self._unlink(key)
                if up is not None:
                    nodes[up][8] -= 1
            if up is not None:                       # (a device node's parent is on the device)
                parent = nodes[up]
                parent[1] -= 1
                if not parent[1] and not parent[2]:
                    self._push(up, parent[3])

    def match(self, i: int, fill: int) -> tuple[list[Any], int]:
        """``_Tree.match`` over device and host nodes; ``dev_end``: the tokens of its leading device nodes."""
        found, on_path = super().match(i, fill)
        nodes = self.nodes
        end = 0
        for key in found:
            node = nodes[key]
            if not node[6]:
                break
            end = node[5]
        self.dev_end = min(end, on_path)
        return found, on_path

    def touch(self, keys: list[Any]) -> None:
        if keys:
            self.clock += 1
            clock, nodes = self.clock, self.nodes
            for key in keys:
                node = nodes[key]
                node[3] = clock
                if not node[2]:                      # a leaf of either tier gets its new stamp in its heap
                    if node[6]:
                        if not node[1]:
                            self._push(key, clock)
                    elif not node[8]:
                        self._hpush(key, clock)

    def newly(self, keys: list[Any]) -> int:
        nodes = self.nodes
        return sum(nodes[key][4] for key in keys if not nodes[key][2] and nodes[key][6])

    def take(self, i: int, keys: list[Any]) -> int:
        """``_Tree.take``; its host-only nodes come back to the device, locked (loaded back, or recomputed into
        them: ``_unevict_node_on_insert``): returns their blocks, which the caller allocates."""
        nodes = self.nodes
        newly = self.newly(keys)
        loaded = 0
        for key in keys:
            node = nodes[key]
            if not node[6]:
                node[6] = True
                loaded += node[4]
                if node[0] is not None:
                    nodes[node[0]][1] += 1
        held = 0
        for key in keys:
            node = nodes[key]
            node[2] += 1
            held += node[4]
        self.evictable -= newly
        self.path[i] = list(keys)
        self.in_tree[i] = held
        self.loaded_now = loaded
        return newly


class SglangScheduler(Scheduler):
    """SGLang v0.5.23's rules (module docstring) on one replica of ``n`` requests, blocks of ``block`` tokens:
    prefill rounds of ``chunk`` tokens (and ``max_prefill`` tokens), at most ``max_batch`` running requests; the
    new-token ratio from ``conservativeness``; ``victim``: None for SGLang's retraction order, else kvplan's
    rule of that name (a what-if)."""

    engine_rules = f"SGLang {RELEASE} scheduler (retract_decode, new-token-ratio admission)"
    preemption_cause = "retract"

    def __init__(self, *, max_batch: int, chunk: int, block: int, conservativeness: float = CONSERVATIVENESS,
                 max_prefill: int = MAX_PREFILL_TOKENS, victim: str | None = None, radix: bool = False,
                 hashes: Any = None, notes: tuple[str, ...] = (), hicache: HiCache | None = None,
                 overlap: bool = False, recv_interval: int = 1) -> None:
        self.max_batch, self.chunk, self.block, self.max_prefill = max_batch, chunk, block, max_prefill
        # --scheduler-recv-interval (module docstring, "Polling"): the requests received are those that arrived by
        # ``recv_cut``, the time the last poll saw up to; the poll after ``recv_step`` decode steps; a prefill round's
        # (steps, time seen) for the poll of the iteration after it
        self.recv_interval = recv_interval
        self.recv_cut = math.inf if recv_interval <= 1 else -math.inf
        self.recv_step = 0
        self.round_poll: tuple[int, float] | None = None
        # the overlap scheduler (module docstring, "Overlap scheduler"): each batch decided while the one before runs
        self.overlap = overlap
        self.cut = math.inf               # the decision being made sees the arrivals up to this time
        self.call_at = -math.inf          # the time of the last call of ``admit`` ...
        self.steps_at = self.rounds_at = -1   # ... and the decode steps and prefill rounds run by then
        self.rounds = 0
        # requests finished at the end of the batch just ended, their results not yet processed: (request, blocks
        # it still holds, finished at its prefill), and when ((time, steps)) that batch ended
        self.late: list[tuple[int, int, bool]] = []
        self.late_at: tuple[float, int] = (math.nan, -1)
        self.held_seats = 0               # the running seats they hold in the round being formed
        self.need1: Callable[[], int] = lambda: 0   # the blocks the next decode step adds (the event loop's)
        self.init = min(INIT_NEW_TOKEN_RATIO * conservativeness, 1.0)
        self.floor = min(self.init * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self.decay = (self.init - self.floor) / NEW_TOKEN_RATIO_DECAY_STEPS
        # the ratio was set to r0 at step count s0; ``lag`` steps after s0 do not decay it (1 after a retraction)
        self.r0, self.s0, self.lag = self.init, 0, 0
        self.whatif = RuleBook("recompute", victim, max_batch, 0, None) if victim else None
        self.reads_contexts = self.whatif is not None and self.whatif.reads_contexts
        self.notes = notes
        self.full = False                 # batch_is_full: no admission until the batch shrinks
        self.full_mark = (0, 0)           # (requests done, retractions) when it was set
        self.retractions = 0
        self.batch: _Batch | None = None
        self.radix = radix                # the radix tree keeps what requests computed (module docstring)
        self.hashes = hashes              # a Mooncake trace's hash ids (PrefixBlocks): prompts share tree nodes
        self.tree: _Tree | None = None
        self.in_round = False             # a prefill round is being formed: finishes wait for its allocation
        self.round_done: list[tuple[int, int]] = []   # (request, blocks it held) finished in the round
        self.r: ReplicaState | None = None
        self.hicache = hicache            # HiCache's host tier (None: off)
        self.host_blocks = 0              # its host pool, in blocks (``bind_link``)
        self.load_cost: Callable[[int], float] = lambda blocks: 0.0   # seconds to load blocks back (``bind_link``)
        self.write_cost: Callable[[int], float] = lambda blocks: 0.0  # seconds to write blocks through
        self.load_t = 0.0                 # the load-back the next prefill overlaps
        self.host_hits: list[int] = []    # per request: tokens loaded back from host memory
        self.loaded_blocks = 0
        self.load_seconds = 0.0

    def bind_link(self, block_bytes: int, pool_blocks: int, load_cost: Callable[[int], float],
                  write_cost: Callable[[int], float]) -> None:
        """The replica's prices for HiCache (from ``kvplan.calc.costs`` through the event loop): a block's bytes,
        the device pool's blocks (the shared prefix's copy included), and the seconds to move n blocks each way
        over the host link. The host pool: --hicache-size GB / bytes per token, else --hicache-ratio x the device
        pool's tokens, in whole pages rounded down, plus one padding page from v0.5.6 (HOST_PAGES_SOURCE)."""
        hc = self.hicache
        if hc is None:
            return
        if hc.size_gb:
            tokens = int(hc.size_gb * 1e9 // (block_bytes / self.block))
        else:
            tokens = int(pool_blocks * self.block * (hc.ratio if hc.ratio is not None else HICACHE_RATIO))
        self.host_blocks = tokens // self.block + (1 if hc.padding_page else 0)
        self.load_cost, self.write_cost = load_cost, write_cost
        if self.host_blocks <= pool_blocks:   # --hicache-ratio <= 1, or a small --hicache-size: said, not silent
            self.notes = (*self.notes, f"HiCache's host pool ({self.host_blocks:,} blocks) is not larger than the "
                          f"device pool ({pool_blocks:,}): SGLang v0.5.23 warns that the host tier's hit rate is "
                          "reduced (mem_cache/pool_host/base.py HostKVCache.__init__); earlier releases assert a "
                          "larger host pool and do not start")

    def hicache_stats(self) -> dict[str, Any] | None:
        """What the host tier did (None when HiCache is off): per request the tokens loaded back, the blocks
        written through and loaded back, the seconds the loads took (overlapped with their prefills), the host
        pool and its peak, in blocks."""
        if self.late and self.r is not None:       # (overlap) the last batch's results processed
            self._late_in(self.r, self._take_late())
        if self.hicache is None:
            return None
        tree = self.tree
        written = tree.written if isinstance(tree, _HiTree) else 0
        n = self.r.next_id if self.r is not None else 0
        return {"host_hit_tokens": self.host_hits[:n], "written_blocks": written,
                "write_seconds": self.write_cost(written) if written else 0.0, "loaded_blocks": self.loaded_blocks,
                "load_seconds": self.load_seconds, "host_blocks": self.host_blocks,
                "peak_host_blocks": tree.peak_host if isinstance(tree, _HiTree) else 0,
                "write_policy": self.hicache.write_policy}

    def replica_limits(self) -> dict[str, int]:
        return {"chunk": self.chunk, "max_batch": self.max_batch, "watermark_blocks": 0}

    def _batch(self, r: ReplicaState) -> _Batch:
        if self.batch is None:
            self.batch = _Batch(r.n, CLIP_MAX_NEW_TOKENS)
            if self.radix:
                if self.hicache is not None:
                    threshold = WRITE_THROUGH_THRESHOLD[self.hicache.write_policy or "write_through"]
                    self.tree = _HiTree(r, self.hashes, self.host_blocks, threshold)
                    self.host_hits = [0] * r.n
                else:
                    self.tree = _Tree(r, self.hashes)
            if self.radix or self.overlap:       # hear of each finish (the tree keeps it; overlap holds it back)
                self.r = r
                r.on_finish = self._finished
        return self.batch

    # --- the radix tree -----------------------------------------------------------------------------------------
    def _finished(self, i: int) -> None:
        """Request i finishes (its blocks not yet freed): its whole cache goes into the tree, page-aligned, touched
        now (``release_kv_cache(checkpoint=True)``); one finished at its prefill waits for the round's allocation."""
        r, tree = self.r, self.tree
        assert r is not None
        if self.overlap:                             # its result is processed after the next batch is decided: it
            self.late.append((i, r.held[i], self.in_round))   # keeps its blocks, seat and locked path until then
            r.held[i] = 0                            # (ReplicaState.release, which follows, frees nothing now)
            self.late_at = (r.now, r.steps)
            return
        assert tree is not None
        self._into_tree(i)

    def _into_tree(self, i: int) -> None:
        """``_finished``'s tree work for request i."""
        r, tree = self.r, self.tree
        assert r is not None and tree is not None
        if self.in_round:                            # (its held blocks are already those not in the tree)
            tree.checkpoint(i, r.Pl[i] + r.Ll[i] - 1)
            tree.materialize(i)
            self.round_done.append((i, r.held[i]))
            return
        r.held[i] -= tree.in_tree[i]                 # (leave() counted its whole cache)
        if tree.evictable > r.free:
            tree.settle(r.free)
        if tree.lazy:
            r.free += tree.retire(i, r.Pl[i] + r.Ll[i] - 1)
        else:
            tree.checkpoint(i, r.Pl[i] + r.Ll[i] - 1)
            r.free += tree.release(i)

    def _prefill_new(self, r: ReplicaState, i: int, cached: int) -> None:
        """New request i's prompt past the ``cached`` tokens the tree held (``ReplicaState.prefill_prompt`` with
        its own hit); the prefill gives its first token."""
        tally = r.tally
        tally.admitted[i] = r.now
        t = max(r.prefill(r.Pl[i], cached), self.load_t)   # HiCache: its forward waits layer by layer for the load
        self.load_t = 0.0
        tally.prefix_hits[i] = cached
        r.prefix_cached = True
        r.now += t
        r.g[i] = 1
        tally.first_token[i] = r.now - r.first_token_back(t)
        tally.stall_prefill += t

    # --- the new-token ratio ------------------------------------------------------------------------------------
    def ratio(self, steps: int) -> float:
        """The ratio after ``steps`` decode steps in all: r0 less a decay per step past the lag, at least the
        floor."""
        j = steps - self.s0 - self.lag
        if j <= 0:
            return self.r0
        return max(self.r0 - j * self.decay, self.floor)

    # --- admission ----------------------------------------------------------------------------------------------
    # --- the overlap scheduler -----------------------------------------------------------------------------------
    def _take_late(self) -> list[tuple[int, int, bool]]:
        late, self.late = self.late, []
        return late

    def _late_in(self, r: ReplicaState, late: list[tuple[int, int, bool]]) -> None:
        """The finished requests' results processed (``process_batch_result`` after the next batch was decided):
        their blocks freed and their caches into the radix tree, in the order they finished."""
        tree = self.tree
        for i, held, in_round in late:
            r.held[i] = held
            if tree is not None:
                if in_round:                         # finished at its prefill: as at a round's end
                    tree.checkpoint(i, r.Pl[i] + r.Ll[i] - 1)
                    tree.materialize(i)
                    r.free += tree.retire(i) if tree.lazy else tree.release(i)
                else:
                    self._into_tree(i)
            r.release(i)

    def admit(self, r: ReplicaState) -> bool:
        """One prefill round (module docstring); True when it prefilled (time passed). With the overlap scheduler a
        decision that would run nothing is made again at once with everything known, and one that hid something
        from the waiting queue (an arrival not seen yet, finished requests still holding their seats and blocks)
        has the next decode run be one step, so that the next decision comes after it."""
        waiting = r.waiting
        if self.overlap:
            # what the decision made now sees (module docstring, "Overlap scheduler"): after a batch that ran up to
            # now, the arrivals up to the start of that batch (``cut``: the time of the call before, where every run
            # and round starts); after the GPU idled (or with no batch run since the last call), everything
            if self.late and self.late_at != (r.now, r.steps):   # processed long since: the replica idled
                self._late_in(r, self._take_late())
            ran = r.steps != self.steps_at or self.rounds != self.rounds_at
            self.cut = self.call_at if ran and (r.running or self.late) else math.inf
            self.call_at, self.steps_at, self.rounds_at = r.now, r.steps, self.rounds
        if self.recv_interval > 1:
            self._poll(r)
        if r.preempted or not waiting:
            return False
        late = len(self.late)                        # (overlap) seats still held by finished requests
        if self.full and (r.running or late) and (r.done - late, self.retractions) == self.full_mark:
            took = False                             # batch_is_full: no admission until the batch shrinks
        else:
            took = self._admit(r)
        if self.recv_interval > 1 and not took and r.running:
            arrival = r.tally.arrival
            if max(arrival[waiting[0]], arrival[waiting[-1]]) > self.recv_cut:
                r.preempted = True                   # not received yet: the next run is one step (a poll to come)
        if not self.overlap or took:
            return took
        if self.late:
            finished = self._take_late()
            if not r.running or self.need1() > r.free:
                # an empty batch (update_running_batch skips the decode while finishing requests hold their pages):
                # the GPU idles until the batch in flight ends, then the next is decided with everything known
                self._late_in(r, finished)
                self.cut = math.inf
                return self._admit(r)
            self._late_in(r, finished)               # a decode step decided: the finished are processed
            r.preempted = True                       # the event loop's next run is one step (as after a retraction),
        elif r.tally.arrival[waiting[0]] > self.cut:  # so the next decision, which sees more, comes after it
            r.preempted = True
        return False

    def _poll(self, r: ReplicaState) -> None:
        """--scheduler-recv-interval N (module docstring, "Polling"): whether the decision made now polled the
        tokenizer's socket, and what the last poll saw. The iteration after a prefill batch polls (its weight 1000
        reaches N); an idle loop polls at once; otherwise every N decode steps after the last poll. A poll that
        fell inside a run of several steps saw nothing new: a request waiting unreceived makes every run one step
        (``admit``), so the runs of several steps have none."""
        if self.round_poll is not None:
            self.recv_step, self.recv_cut = self.round_poll
            self.round_poll = None
        if not r.running and not self.late:
            self.recv_step, self.recv_cut = r.steps, r.now
            return
        k = r.steps - self.recv_step
        if k >= self.recv_interval:
            self.recv_step += k // self.recv_interval * self.recv_interval
            if self.recv_step == r.steps:            # this decision polls: it sees what the decision sees
                self.recv_cut = self.cut if self.overlap and self.cut < math.inf else r.now

    def _admit(self, r: ReplicaState) -> bool:
        """``admit``'s prefill round."""
        running, steps, Pl, Ll = r.running, r.steps, r.Pl, r.Ll
        start = r.now
        batch = self._batch(r)
        late = self.held_seats = len(self.late)      # (overlap) seats still held by finished requests
        self.full = False                            # (admit looked: the batch shrank, or it was not full)
        if not running and not late:
            batch.catch_up(steps, Pl, Ll, r.tally.finish)
            if r.now > batch.last_done:     # the clock moved on with nothing to run: on_idle reset the ratio
                self.r0, self.s0, self.lag = self.init, steps, 0
        mark = (r.done - late, self.retractions)     # a request done in this round shrinks the batch after it
        tree = self.tree
        if tree is not None:
            if tree.evictable > r.free:
                tree.settle(r.free)                  # what the decode steps since allocated
            self.in_round = True
        took = False
        try:
            took = self._round(r, batch, mark)
            return took
        finally:
            if tree is not None:                     # the round's allocation evicts, then its finished go in
                self.in_round = False
                done, self.round_done = self.round_done, []
                if done:
                    tree.settle(r.free - sum(h for _, h in done))
                    for i, _ in done:
                        r.free += tree.retire(i) if tree.lazy else tree.release(i)
                elif tree.evictable > r.free:
                    tree.settle(r.free)
            if took and self.recv_interval > 1:      # the iteration after a prefill batch polls (weight 1000)
                self.round_poll = (r.steps, start if self.overlap else r.now)
            if took and self.overlap:                # (overlap) then the results of the batch before are processed;
                self.rounds += 1                     # the round's own finished wait for the next decision
                old, self.late = self.late[:late], self.late[late:]
                self._late_in(r, old)
                if self.late:
                    self.late_at = (r.now, r.steps)

    def _round(self, r: ReplicaState, batch: _Batch, mark: tuple[int, int]) -> bool:
        """The prefill round of ``admit``."""
        waiting, running, steps, block = r.waiting, r.running, r.steps, r.block
        Pl, Ll, g, btl = r.Pl, r.Ll, r.g, r.btl
        tree = self.tree
        hi = tree is not None and type(tree) is _HiTree
        j = steps - self.s0 - self.lag               # self.ratio(steps), written out
        ratio = self.r0 if j <= 0 else max(self.r0 - j * self.decay, self.floor)
        far, near = batch.far, batch.near            # batch.catch_up when a member is due to move or leave
        if (far and far[0][0] - steps < batch.clip) or (near and near[0][0] <= steps):
            batch.catch_up(steps, Pl, Ll, r.tally.finish)
        reserved = ratio * batch.to_go(steps)
        rem_chunk, rem_input, taken = self.chunk, self.max_prefill, 0.0
        admitted = False
        cut, arrival, seats = min(self.cut, self.recv_cut), r.tally.arrival, self.held_seats
        together: list[int] = []                  # new requests of the pass in progress (one forward, one result)
        ranges: list[tuple[int, int]] = []        # the pass's prompts' token ranges (start, end), priced at its end
        load = [0.0]                              # HiCache: the pass's load-backs over the host link, summed
        while waiting:
            i = waiting[0]
            if arrival[i] > cut:                      # (overlap) not seen yet: it arrived during the batch in flight
                break
            if len(running) + seats >= self.max_batch:
                self.full, self.full_mark = True, mark
                break
            gi = g[i]
            fill = Pl[i] + gi                         # the prefill's tokens: the input and any outputs
            cached = r.hit if r.prefix_cached else 0  # what the prefill skips: the shared prefix, or its path
            locking = 0                               # the blocks its match takes from the evictable ones
            nodes: list[Any] = []
            on_device = cached                        # its prefix on the device (HiCache: the rest is on host)
            if tree is not None and (tree.hashes is not None or i in tree.own):   # (own: nonempty lists)
                nodes, on_path = tree.match(i, fill)  # matched (init_next_round_input)
                tree.touch(nodes)
                if hi:                                # a host hit of 10 tokens or more is loaded back
                    on_device = max(cached, tree.dev_end)
                    cached = max(cached, on_path)
                    if cached - on_device < LOAD_BACK_THRESHOLD:
                        cached = on_device
                else:
                    cached = on_device = max(cached, on_path)
                locking = tree.newly(nodes)
            run = fill - cached                       # the tokens it computes (its extension)
            # the check runs with its path locked (add_one_req): the extension past its device prefix against the
            # free tokens less those
            free = r.free
            if not (fill - on_device + min(Ll[i] - gi, CLIP_MAX_NEW_TOKENS) + block < (free - locking) * block
                    - reserved - taken) and (running or admitted or seats):
                self.full, self.full_mark = True, mark
                break
            ext_p = -(-run // block) * block
            first = rem_chunk // block * block        # what the round's chunk budget takes of it
            if ext_p > rem_chunk and first <= 0:
                break                                 # no page left in this round: the next one takes it
            waiting.popleft()
            need = btl[fill]
            if tree is None:
                r.held[i] = need
                r.free = free - need
            else:                                     # its path locked, the rest of its fill allocated
                if nodes:
                    tree.take(i, nodes)
                    r.held[i] = max(0, need - tree.in_tree[i])
                else:                                 # (tree.take of no nodes, written out)
                    tree.path[i], tree.in_tree[i], tree.loaded_now = [], 0, 0
                    r.held[i] = need
                r.free = free - locking - r.held[i]
                if hi and tree.loaded_now:            # host nodes back on the device: loaded, or recomputed
                    r.free -= tree.loaded_now
                    if cached > on_device:
                        self.load_t = self.load_cost(tree.loaded_now)
                        self.load_seconds += self.load_t
                        self.loaded_blocks += tree.loaded_now
                        self.host_hits[i] += cached - on_device
            if r.total_blocks - r.free > r.tally.peak_used:
                r.tally.peak_used = r.total_blocks - r.free
            chunked = ext_p > rem_chunk
            if chunked:                               # the pass before ends with its first chunk; it runs alone
                self._pass(r, ranges, load, together)
            if gi == 0:
                if Ll[i] > 1:                         # (one that finishes at its prefill keeps its own end)
                    together.append(i)
                if chunked:
                    if cached != (r.hit if r.prefix_cached else 0):
                        self._prefill_new(r, i, cached)
                    else:
                        r.prefill_prompt(i)
                else:                                 # one of the pass: priced with it, its first token at its end
                    tally = r.tally
                    tally.admitted[i] = r.now
                    tally.prefix_hits[i] = cached
                    r.prefix_cached = True
                    g[i] = 1
                    ranges.append((cached, fill))
                    load[0] += self.load_t
                    self.load_t = 0.0
            else:                                     # retracted: its fill again past the cached tokens
                tally = r.tally
                if chunked:
                    t = max(r.prefill(fill, cached), self.load_t)     # HiCache: its forward waits for the load
                    r.now += t
                    tally.stall_prefill += t
                else:
                    ranges.append((cached, fill))
                    load[0] += self.load_t
                self.load_t = 0.0
                tally.recomputed[i] += fill - cached
                tally.recompute_hits[i] += cached - r.hit
                g[i] = gi + 1                         # the re-prefill gives the next token
            if tree is not None:
                tree.checkpoint(i, fill)              # checkpoint_kv_cache after the prefill
            finished = g[i] >= Ll[i]
            admitted = True
            charge = block + min(Ll[i], CLIP_MAX_NEW_TOKENS) + (need * block if finished else 0)
            if finished:
                if ranges and not chunked:            # done at its prefill: at the end of the pass so far
                    start = r.now
                    t = self._price(r, ranges, load[0])
                    r.now = start + t
                    if gi == 0:
                        r.tally.first_token[i] = r.now - r.first_token_back(t)
                    r.finished(i)                     # its blocks stay charged until the round ends
                    batch.last_done = r.now
                    r.now = start
                else:
                    r.finished(i)                     # its blocks stay charged until the round ends
                    batch.last_done = r.now
            elif r.xo_used:
                r.join(i)
                batch.join(i, r.done_at[i], steps, Pl[i], Ll[i], r.xo_l[i])
            else:                                     # ReplicaState.join written out (no numpy copy)
                v = Pl[i] + g[i] - steps
                r.xo_l[i] = v
                r.sum_xo += v
                r.phase[(-v - r.shift) % block] += 1
                r.in_run[i] = True
                r.done_at[i] = d = r.El[i] - v
                heapq.heappush(r.done_heap, (d, i))
                r.seq[i] = r.joins
                r.joins += 1
                running.append(i)
                batch.join(i, d, steps, Pl[i], Ll[i], v)
            if chunked:                               # chunked: its last chunk's round goes on
                rest = run - first                    # then chunks of chunked_prefill_size; the last:
                last = -(-(rest - self.chunk * ((rest - 1) // self.chunk)) // block) * block
                rem_chunk, rem_input = self.chunk - last, self.max_prefill - last
                own = 0 if finished else min(r.done_at[i] - steps, CLIP_MAX_NEW_TOKENS)
                reserved = ratio * (batch.to_go(steps) - own)   # the round's earlier requests now run
                taken = float(charge)
            else:
                rem_chunk -= ext_p
                rem_input -= ext_p
                taken += charge
            if not r.free * block - reserved - taken > 0:   # budget_state: NO_TOKEN
                self.full, self.full_mark = True, mark
                break
            if rem_chunk <= 0 or rem_input <= 0:      # budget_state: OTHER, the round ends
                break
        self._pass(r, ranges, load, together)
        return admitted

    @staticmethod
    def _price(r: ReplicaState, ranges: list[tuple[int, int]], load: float) -> float:
        """One prefill pass of ``ranges`` (module docstring, "Prefill"): ``StepModel.prefill_pass_seconds``, one
        prompt ``prefill_seconds``; with HiCache the longer of it and the pass's load-backs."""
        if len(ranges) == 1:
            start, end = ranges[0]
            t = r.prefill(end, start)
        else:
            assert r.prefill_pass is not None, "SGLang's scheduler packs a round's prompts: the replica prices a pass"
            t = r.prefill_pass(ranges)
        return max(t, load)

    def _pass(self, r: ReplicaState, ranges: list[tuple[int, int]], load: list[float], together: list[int]) -> None:
        """The pass in progress runs: priced once (``_price``), the clock past it, and the first tokens of its new
        requests (and of a chunked request before them) at its end; emptied for the next pass."""
        if ranges:
            t = self._price(r, ranges, load[0])
            r.now += t
            r.tally.stall_prefill += t
            first = r.now - r.first_token_back(t)
            ft = r.tally.first_token
            for j in together:
                ft[j] = first
            ranges.clear()
            load[0] = 0.0
        together.clear()                          # (a chunked request with no pass after it keeps its own)

    # --- retraction ---------------------------------------------------------------------------------------------
    def preempt(self, r: ReplicaState, need: int) -> None:
        """retract_decode: victims out (at least one, one kept) until the next step's ``need`` blocks fit; each
        goes to the back of the waiting queue; the ratio is estimated again from the kept requests."""
        if self.late:                                # (overlap) requests finishing in flight: no retraction; the
            self._late_in(r, self._take_late())      # decode waits for their pages (update_running_batch)
            return
        running, steps, Pl, Ll, xo_l, btl, block = r.running, r.steps, r.Pl, r.Ll, r.xo_l, r.btl, r.block
        batch = self._batch(r)
        far, near = batch.far, batch.near            # batch.catch_up when a member is due to move or leave
        if (far and far[0][0] - steps < batch.clip) or (near and near[0][0] <= steps):
            batch.catch_up(steps, Pl, Ll, r.tally.finish)
        tree = self.tree
        if tree is not None and tree.evictable > r.free - need:
            tree.settle(r.free, need)                # check_decode_mem evicts what the step is short of
        victims: list[int] = []
        while len(running) > 1 and (not victims or need > r.free):
            if self.whatif is None:
                i = batch.next_victim(r.in_run)
                del running[bisect.bisect_left(running, r.seq[i], key=r.seq.__getitem__)]   # (join order)
            else:
                i = running.pop(self.whatif.victim(r))
            victims.append(i)
            cache = xo_l[i] + steps - 1
            need -= btl[cache + 1] - btl[cache]
            v = xo_l[i]                              # ReplicaState.leave written out: its tokens and blocks now
            r.sum_xo -= v
            r.phase[(-v - r.shift) % block] -= 1
            r.in_run[i] = False
            r.g[i] = v + steps - Pl[i]
            r.held[i] = btl[cache]
            if tree is not None:
                r.held[i] -= tree.in_tree[i]         # (leave() counted its whole cache)
                tree.materialize(i)
            r.release(i)
            batch.drop(i, Pl[i], Ll[i])
            if tree is not None:                     # its path up to its last checkpoint stays, evictable; then
                r.free += tree.release(i)            # release_req evicts (kept x 20 tokens), the check the step's
                tree.settle(r.free, max(-(-len(running) * RETRACT_DECODE_STEPS // block), need))
        for i in victims:
            r.tally.preemptions[i] += 1
            r.waiting.append(i)
        self.retractions += 1
        kept = len(running)
        out = r.sum_xo + kept * steps - batch.sum_p      # the kept requests' output tokens
        self.r0 = min(1.0, (out + RETRACT_DECODE_STEPS * kept) / (batch.sum_l + 1))
        self.s0, self.lag = steps, 1
        r.preempted = True

    def room_for_run(self, r: ReplicaState, need: int) -> int | None:
        if self.late:                                # (overlap) the decode is decided: the finished are processed
            self._late_in(r, self._take_late())      # (the event loop reads the free blocks again)
        return r.free


def for_scenario(s: Any, o: Any, total_blocks: int, block: int, reuse: bool = False,
                 hashes: Any = None) -> SglangScheduler:
    """The scheduler of ``s`` (an SGLang scenario) with simulate's options ``o``: refuses what SGLang does not do
    (swapping preempted requests, proactive offload), and notes what departs from its rules."""
    if o.policy != "recompute" or o.offload_threshold is not None:
        what = "--offload-threshold" if o.offload_threshold is not None else f"--policy {o.policy}"
        raise KvplanError(f"{what}: SGLang does not swap or offload running requests to host DRAM; its host tier "
                          "is HiCache, a radix-cache tier",
                          "drop it, and give --enable-hierarchical-cache for SGLang's host tier")
    hicache = getattr(o, "hicache", None)
    adapter = s.engine_adapter
    version = getattr(adapter, "version", None)
    if hicache is not None:
        hicache = _hicache_for(hicache, version, reuse, adapter)
    par = s.parallelism
    attn_dp = par.dp if dp_attention(par) else 1
    chunk, chunk_from = prefill_limits(s, attn_dp, block)
    max_prefill = s.max_prefill_tokens or MAX_PREFILL_TOKENS
    if o.max_batch is not None or s.max_num_seqs is not None:
        max_batch, cap_from = o.max_batch or s.max_num_seqs, "given"
    else:
        max_batch, cap_from = max_running_requests(total_blocks * block, s.context_limit), "SGLang's default"
    conservativeness = CONSERVATIVENESS * (DP_ATTENTION_CONSERVATIVENESS if attn_dp > 1 else 1.0)
    notes = [f"Scheduler: SGLang {RELEASE}'s rules (kvplan.engines.sglang_scheduler): admission reserves each "
             "running request's remaining max_new_tokens (at most 4096) x a new-token ratio that starts at "
             f"{min(INIT_NEW_TOKEN_RATIO * conservativeness, 1.0):g} and decays per decode step to "
             f"{MIN_NEW_TOKEN_RATIO_FACTOR:g} of it; prefill rounds of {chunk:,} tokens (chunked_prefill_size, "
             f"{chunk_from}) and at most {max_prefill:,} (max_prefill_tokens, "
             f"{'given' if s.max_prefill_tokens else 'default'}) run between decode steps (no --enable-mixed-chunk, "
             "SGLang's default); a step short of pages retracts the requests with the fewest output tokens (then "
             "the longest input), which re-prefill later; "
             f"at most {max_batch:,} running ({cap_from}).",
             "SGLang's max_new_tokens per request is taken as its output length (a benchmark client's max_tokens), "
             "without ignore_eos; "
             + ("a retracted request re-prefills past what SGLang's radix tree still holds of it (its prompt and "
                "the outputs of an earlier re-prefill, until LRU eviction takes them)." if reuse else
                "a retracted request re-prefills its whole input and output past the shared prefix (the radix "
                "tree's reuse is modelled only where every page is one block: no sliding windows or state layers; "
                "an upper bound).")]
    if hicache is not None:
        notes.append(_hicache_note(hicache))
    if version is not None and tuple(version) != (0, 5, 23):
        notes.append(f"{adapter.display_name}: the scheduler follows SGLang {RELEASE}'s rules; this release's own "
                     "scheduler is not read.")
    disable = getattr(o, "disable_overlap_schedule", None)
    overlap, why = overlap_schedule(par, disable)
    if overlap or disable is not None:
        notes.append(f"Overlap scheduler {why}" + (
            ": each batch is decided while the one before it runs, so an arrival is first scheduled a batch later "
            "and a finished request's seat and pages are freed a batch later (its last token and a first token come "
            "out at their batch's end as without it); kvplan prices no CPU time between batches, so the flag "
            "changes when requests are seen and freed, not a step's price." if overlap else "."))
    recv = getattr(o, "scheduler_recv_interval", None) or 1
    if recv > 1:
        notes.append(f"--scheduler-recv-interval {recv}: SGLang's scheduler polls for new requests every {recv} "
                     "iterations (a decode step counts 1, a prefill batch makes the next iteration poll; "
                     f"{RECV_SOURCE}), so a request that arrives during decoding waits up to {recv} decode steps "
                     "before a prefill round can take it.")
    victim = o.victim if o.victim != DEFAULT_VICTIM else None
    if victim:
        notes.append(f"--victim {victim} is a what-if: SGLang retracts the requests with the fewest output tokens "
                     "first (then the longest input); this run retracts by kvplan's rule instead.")
    if o.watermark != DEFAULT_WATERMARK:
        notes.append("SGLang has no admission watermark: the watermark option is not used.")
    if hashes is not None:
        notes.append(
            f"Prefix reuse from the trace's hash_ids: SGLang's radix tree holds each prompt as a chain of its "
            f"{hashes.block_tokens}-token blocks (an id is its block with everything before it), shared by the "
            "requests whose ids match, locked while they run and evicted least recently used first with the rest "
            "of the tree; a prompt's hit is its leading blocks in the tree (at most its length less one token), "
            "and a round's later request hits what an earlier one inserted (kvplan inserts them one by one)."
            if reuse else
            "The trace's hash_ids are not simulated here: the radix tree is modelled only where every page is "
            "one block (no sliding windows or state layers).")
    return SglangScheduler(max_batch=max_batch, chunk=chunk, block=block, conservativeness=conservativeness,
                           victim=victim, radix=reuse, hashes=hashes if reuse else None, notes=tuple(notes),
                           hicache=hicache, overlap=overlap, recv_interval=recv, max_prefill=max_prefill)


def overlap_schedule(par: Any, disable: bool | None) -> tuple[bool, str]:
    """Whether SGLang runs its overlap scheduler (``event_loop_overlap``) for a deployment, and why:
    ``--disable-overlap-schedule`` turns it off, and so does pipeline parallelism (``OVERLAP_PP_SOURCE``); None:
    kvplan's default (``OVERLAP_DEFAULT``, off while the rules are work in progress), False: on."""
    if disable:
        return False, "off: --disable-overlap-schedule"
    if par.pp > 1:
        return False, f"off: pipeline parallelism ({OVERLAP_PP_SOURCE})"
    if disable is None and not OVERLAP_DEFAULT:
        return False, "off: kvplan's default while its overlap rules are work in progress (SGLang's default is on)"
    return True, f"on: SGLang's default ({OVERLAP_SOURCE})"


def _hicache_for(hc: HiCache, version: Any, reuse: bool, adapter: Any) -> HiCache:
    """The HiCache settings a run models: the release's default write policy filled in; refused where the
    release lacks HiCache, for write_back (not modelled) and where the radix tree is not modelled."""
    import dataclasses

    if version is not None and tuple(version) < HICACHE_SINCE:
        raise KvplanError(f"--enable-hierarchical-cache: {adapter.display_name} has no HiCache (first in "
                          f"v{'.'.join(map(str, HICACHE_SINCE))}: {HICACHE_FLAGS_SOURCE})",
                          f"pin sglang=={'.'.join(map(str, HICACHE_SINCE))} or newer, or drop it")
    policy = hc.write_policy
    if policy is None:
        policy = "write_through" if version is None or tuple(version) >= WRITE_THROUGH_SINCE else \
            "write_through_selective"
    if policy == "write_back":
        raise KvplanError("--hicache-write-policy write_back: simulate does not model it (its backup at eviction "
                          "and its reclaim of host duplicates)", "give write_through (the default) or "
                          "write_through_selective")
    if not reuse:
        raise KvplanError("--enable-hierarchical-cache: simulate models SGLang's radix tree, and so HiCache, only "
                          "where every page is one block (this model has sliding windows or state layers)",
                          "drop --enable-hierarchical-cache for this model")
    padding = version is None or tuple(version) >= HOST_PADDING_PAGE_SINCE
    return dataclasses.replace(hc, write_policy=policy, padding_page=padding)


def _hicache_note(hc: HiCache) -> str:
    pool = (f"{hc.size_gb:g} GB per GPU (--hicache-size)" if hc.size_gb else
            f"{hc.ratio if hc.ratio is not None else HICACHE_RATIO:g} x the device pool (--hicache-ratio)")
    writes = ("every node the tree inserts is written through to host memory (its unbacked ancestors first)"
              if hc.write_policy == "write_through" else
              "a node is written to host memory at its second insert, which kvplan's tree never makes (each node "
              "is inserted once), so nothing is written and HiCache keeps nothing")
    return (f"HiCache ({hc.write_policy}): a host pool of {pool}; {writes}; a device eviction demotes a backed node "
            "to host memory (deleting an unbacked one), host eviction takes the least recently used host leaf, and "
            f"a prefix hit of {LOAD_BACK_THRESHOLD} tokens or more on host nodes is loaded back over the host link "
            "(its prefill waits for the load, layer by layer: the longer of the two), so a retracted request's "
            "path, demoted rather than lost, is a load-back instead of a recompute. Write-through copies run on "
            "their own stream (not on the critical path).")
