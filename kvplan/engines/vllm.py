"""vLLM v1: blocks, KV-cache groups, the start-up log lines, and the defaults that size the pool, by release.

``VllmEngine()`` follows the newest release docs/engine-rules-by-release.md covers (v0.33.0);
``VllmEngine((0, 17, 0))`` (``--engine vllm==0.17``) follows an older one where a modelled rule differs. Each rule
cites the release tag and file it was read from; links use the tag, e.g.
https://github.com/vllm-project/vllm/blob/v0.20.0/vllm/config/cache.py. Rules that did not change across the
releases read (page sizes per spec in ``vllm/v1/kv_cache_interface.py``; grouping in
``vllm/v1/core/kv_cache_utils.py``; ``get_batch_defaults`` in ``vllm/engine/arg_utils.py``) were read at commit
001cabc1. Layer kinds answer for their own bytes; this module only groups layers the way vLLM does and applies
its rounding. Every pipeline stage is a worker; num_blocks is the minimum over workers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kvplan.engines.base import (
    GPU_GENERATION_RULE,
    RUNTIME_RESERVE_SOURCE,
    Engine,
    EngineReport,
    Flag,
    LaunchCommand,
    Release,
    _preset_named,
    gpu_generation,
    hub_model_id,
    keep_flags,
    known_other_gpu,
    pinned,
    release_text,
    rule_span,
    sparse_attention,
)
from kvplan.specs.dtypes import WEIGHT_BYTES_PER_PARAM, KVDtype
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.layers import MLA, FullAttention, GatedDeltaNet, Mamba2, SlidingWindowAttention, SparseIndexer
from kvplan.specs.model import ModelSpec
from kvplan.specs.parallel import Parallelism, pipeline_stages
from kvplan.specs.values import Bytes, Count, Number, Ratio, Tokens, default, derived, given

COMMIT = "001cabc1"
# kvplan's KV dtype -> vLLM's --kv-cache-dtype (None: "auto", the model's dtype; vllm/config/cache.py CacheDType)
VLLM_KV_FLAGS = {KVDtype.BF16: None, KVDtype.FP16: None, KVDtype.FP8: "fp8", KVDtype.NVFP4: "nvfp4",
                 KVDtype.FP8_DS_MLA: "fp8_ds_mla", KVDtype.FP8_PER_TOKEN_HEAD: "fp8_per_token_head",
                 KVDtype.INT8_PER_TOKEN_HEAD: "int8_per_token_head"}
SOURCE = (f"vllm-project/vllm @{COMMIT}: vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py "
          "(https://github.com/vllm-project/vllm)")

# --- releases ----------------------------------------------------------------------------------------------------
OLDEST, NEWEST = (0, 7, 3), (0, 33, 0)
RELEASES = (OLDEST, NEWEST)
# The wheels docs/engine-rules-by-release.md read (v0.7.3, v0.8.5, v0.9.0, v0.9.2, v0.10.0-v0.10.2, v0.11.0-v0.11.2,
# then every minor release v0.12.0 ... v0.33.0).
READ_WHEELS: tuple[Release, ...] = ((0, 7, 3), (0, 8, 5), (0, 9, 0), (0, 9, 2), (0, 10, 0), (0, 10, 1), (0, 10, 2),
                                    (0, 11, 0), (0, 11, 1), (0, 11, 2)) + tuple((0, m, 0) for m in range(12, 34))
# Releases where a rule kvplan models changes (each named where it is used below): 0.8 V1 (V1_SINCE, the V1
# sampler bytes); 0.10.2 fp8 MLA and --kv-cache-memory-bytes; 0.11.1 fp8_ds_mla and fp8 MLA on any GPU; 0.17 the
# smaller sampler bytes (SAMPLER_BYTES); 0.26 the Gated DeltaNet graph-estimate warning (GDN_GRAPH_TRANSIENT_SINCE);
# 0.27 and 0.31 simulate's --long-prefill-token-threshold (LONG_PREFILL_MAX_LEN_SINCE, LONG_PREFILL_ALONE_SINCE).
# Not a boundary: v0.8.3's --data-parallel-size, a printed flag that carries its own release (Flag.since), and no
# wheel between v0.8.0 and v0.8.3 was read; nor v0.8.5's --long-prefill-token-threshold (LONG_PREFILL_SINCE),
# refused below it with its release named, the 0.8 span's rules read in the v0.8.5 wheel.
BOUNDARIES: tuple[Release, ...] = (OLDEST, (0, 8, 0), (0, 9, 0), (0, 10, 1), (0, 10, 2), (0, 11, 0), (0, 11, 1),
                                   (0, 12, 0), (0, 14, 0), (0, 15, 0), (0, 17, 0), (0, 18, 0), (0, 19, 0), (0, 20, 0),
                                   (0, 21, 0), (0, 24, 0), (0, 26, 0), (0, 27, 0), (0, 29, 0), (0, 31, 0))


def tag_source(tag: str, path: str, what: str = "") -> str:
    return f"vllm-project/vllm @{tag} {path}" + (f" ({what})" if what else "")


# gpu_memory_utilization: a plain CacheConfig field default, 0.9 through v0.19.x and 0.92 from v0.20.0
# (PR #38284, with the CUDA-graph estimate turned on in the same release).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
OLD_GPU_MEMORY_UTILIZATION = 0.9
UTILIZATION_SOURCE = tag_source("v0.20.0", "vllm/config/cache.py", "CacheConfig.gpu_memory_utilization = 0.92, "
                                "PR #38284")
OLD_UTILIZATION_SOURCE = tag_source("v0.19.0", "vllm/config/cache.py", "CacheConfig.gpu_memory_utilization = 0.9")
CUDAGRAPH_SOURCE = tag_source("v0.20.0", "vllm/envs.py, vllm/v1/worker/gpu_worker.py",
                              "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default '1'; determine_available_memory "
                              "subtracts cudagraph_memory_estimate_applied")
MLA_OLD_SOURCE = tag_source("v0.17.0", "vllm/platforms/cuda.py", "CudaPlatformBase.check_and_update_config forces "
                            "the MLA block: FlashMLA 64, CUTLASS_MLA 128, FlashInfer-MLA 64")
MLA_NEW_SOURCE = tag_source("v0.18.0", "vllm/platforms/interface.py, vllm/platforms/cuda.py",
                            "update_block_size_for_backend -> get_preferred_block_size: 16 if the backend takes it, "
                            "else its smallest kernel block; _get_backend_priorities")
SPARSE_SOURCE = tag_source("v0.33.0", "vllm/v1/attention/backends/mla/flashmla_sparse.py",
                           "FLASHMLA_SPARSE kernel block [64]; v0.11.0-v0.17.x cuda.py forces 64")
HYBRID_OLD_SOURCE = tag_source("v0.19.0", "vllm/model_executor/models/config.py",
                               "HybridAttentionMambaModelConfig.verify_and_update_config")
HYBRID_NEW_SOURCE = tag_source("v0.33.0", "vllm/platforms/interface.py", "Platform._align_hybrid_block_size "
                               "(from v0.20.0)")
FIT_SOURCES = {
    (0, 7, 3): tag_source("v0.13.0", "vllm/v1/core/kv_cache_utils.py", "check_enough_kv_cache_memory: sum over "
                          "layers of max_memory_usage_bytes"),
    (0, 14, 0): tag_source("v0.14.0", "vllm/v1/core/kv_cache_utils.py", "_max_memory_usage_bytes_from_groups: "
                           "first group's blocks only"),
    (0, 19, 0): tag_source("v0.19.0", "vllm/v1/core/kv_cache_utils.py", "_max_memory_usage_bytes_from_groups: "
                           "group_size x page x blocks over all groups, PR #36030"),
    (0, 29, 0): tag_source("v0.29.0", "vllm/v1/core/kv_cache_utils.py", "bytes_per_block x blocks over all groups, "
                           "against available minus the null block"),
}
LOG_SOURCES = {
    (0, 7, 3): tag_source("v0.8.5", "vllm/v1/core/kv_cache_utils.py", "num_blocks x block_size"),
    (0, 9, 0): tag_source("v0.20.0", "vllm/v1/core/kv_cache_utils.py", "_report_kv_cache_config: "
                          "num_blocks // len(kv_cache_groups) x min_block_size"),
    (0, 21, 0): tag_source("v0.21.0", "vllm/v1/core/kv_cache_utils.py", "_report_kv_cache_config: "
                           "int(max_concurrency x max_model_len)"),
}


def blob(tag: str, path: str, what: str) -> str:
    return f"github.com/vllm-project/vllm/blob/{tag}/{path} {what}"


# --kv-cache-dtype values that arrived after v0.7.3 (whose choices are auto, fp8, fp8_e5m2, fp8_e4m3 in
# vllm/engine/arg_utils.py), each from the release's wheel; fp8 is in every release kvplan models.
KV_DTYPE_SINCE: dict[KVDtype, tuple[Release, str]] = {
    # v0.11.0 had the layout only internally (DeepseekV32ForCausalLM.verify_and_update_config turns fp8 into it)
    KVDtype.FP8_DS_MLA: ((0, 11, 1), blob("v0.11.1", "vllm/config/cache.py", "CacheDType (v0.11.0's has no "
                                          "fp8_ds_mla; there DeepSeek V3.2 gets it from --kv-cache-dtype fp8)")),
    KVDtype.FP8_PER_TOKEN_HEAD: ((0, 20, 0), blob("v0.20.0", "vllm/config/cache.py", "CacheDType; TRITON_ATTN "
                                                  "supported_kv_cache_dtypes (PR #38378; not in v0.19.1)")),
    KVDtype.INT8_PER_TOKEN_HEAD: ((0, 20, 0), blob("v0.20.0", "vllm/config/cache.py", "CacheDType; TRITON_ATTN "
                                                   "supported_kv_cache_dtypes (PR #38378; not in v0.19.1)")),
    # v0.20.0-v0.20.2 accept the name, but no backend runs it: FlashInfer raises "nvfp4 KV cache is not yet supported"
    KVDtype.NVFP4: ((0, 21, 0), blob("v0.21.0", "vllm/v1/attention/backends/flashinfer.py", "supported_kv_cache_dtypes "
                                     "(v0.20.x's CacheDType names nvfp4, but its FlashInfer backend raises 'not yet "
                                     "supported'; PR #40177)")),
}
# fp8 KV for an MLA latent: every MLA backend of v0.7.3-v0.10.1 raises NotImplementedError for an fp8 cache (V0
# TritonMLA/FlashMLA, V1 FlashMLA, TritonMLA, CutlassMLA: "... with FP8 KV cache not yet supported"); v0.10.2's V1
# FlashMLA (Hopper) and CUTLASS MLA (Blackwell) take it (Triton MLA, the other GPUs' backend, still refuses).
MLA_FP8_SINCE: Release = (0, 10, 2)
# The MLA attention backends' supported_kv_cache_dtypes (vllm/v1/attention/backends/mla/*.py, read in the v0.21.0
# and v0.33.0 wheels): none lists nvfp4 (v0.33.0's flashmla_sparse has its own nvfp4_ds_mla, which kvplan does not
# model), and only the sparse (DSA) backends, flashmla_sparse and flashinfer_mla_sparse, list fp8_ds_mla.
MLA_BACKENDS_SOURCE = ("github.com/vllm-project/vllm/tree/v0.33.0/vllm/v1/attention/backends/mla "
                       "supported_kv_cache_dtypes of each backend (the same in v0.21.0)")
# DeepSeek V3.2's fp8_ds_mla layout runs in the sparse (DSA) MLA backend, which v0.11.0 brings with V3.2 support:
# v0.10.2's wheel has no flashmla_sparse.py and no DeepseekV32ForCausalLM in the model registry.
DS_MLA_SINCE: Release = (0, 11, 0)
DS_MLA_SOURCE = blob("v0.11.0", "vllm/v1/attention/backends/mla/flashmla_sparse.py", "(absent from v0.10.2, as "
                     "DeepseekV32ForCausalLM is from its vllm/model_executor/models/registry.py)")
# v0.10.2-v0.11.0: Triton MLA (the backend of GPUs other than Hopper and Blackwell) still raises for an fp8 cache
# (docs/engine-rules-by-release.md section 11); later releases were not read for it, so they are not refused.
MLA_FP8_ANY_GPU_AFTER: Release = (0, 11, 1)
MLA_FP8_SOURCE = blob("v0.10.2", "vllm/v1/attention/backends/mla/flashmla.py", "FlashMLAImpl passes descale_q/k "
                      "(v0.10.1's __init__ raises 'FlashMLA V1 with FP8 KV cache not yet supported'); "
                      "mla/cutlass_mla.py")


# --kv-offloading-size / --kv-offloading-backend (vllm/config/cache.py, vllm/config/vllm.py
# _post_init_kv_transfer_config, vllm/v1/kv_offload/cpu.py): both from v0.11.1; printed from v0.14.0, the first
# release where the native backend starts (see launch_command).
OFFLOAD_SINCE: Release = (0, 14, 0)
OFFLOAD_SIZE_SOURCE = blob("v0.14.0", "vllm/config/vllm.py", "_post_init_kv_transfer_config: native -> "
                           "cpu_bytes_to_use = kv_offloading_size x 2^30 (PR #24498), GiB summed over the TP x PP "
                           "ranks (vllm/v1/kv_offload/cpu.py); the flag is in v0.11.1, but v0.11.1-v0.13.0 pass "
                           "num_cpu_blocks 0, which CPUOffloadingSpec refuses")
OFFLOAD_BACKEND_SOURCE = blob("v0.14.0", "vllm/config/cache.py", "kv_offloading_backend: KVOffloadingBackend = "
                              "'native' (Literal['native', 'lmcache']; v0.11.1-v0.13.0: default None, and native "
                              "fails at start-up)")


# --kv-cache-memory-bytes (CacheConfig.kv_cache_memory_bytes: the KV cache per GPU in bytes; when set,
# gpu_memory_utilization is ignored): in the v0.10.2 wheel's vllm/engine/arg_utils.py, not in v0.10.1.1's.
KV_MEMORY_SINCE: Release = (0, 10, 2)
KV_MEMORY_SOURCE = blob("v0.10.2", "vllm/config/cache.py", "CacheConfig.kv_cache_memory_bytes: 'Size of KV Cache per "
                        "GPU in bytes ... (when not-None) ignores gpu_memory_utilization'; the flag in "
                        "vllm/engine/arg_utils.py (absent from v0.10.1.1)")


# --- kvplan simulate's scheduler ----------------------------------------------------------------------------------
# V1 is the default engine from v0.8.0 (vllm/envs.py: VLLM_USE_V1 defaults to "1"); before it V0's scheduler ran
# (vllm/core/scheduler.py: watermark, swap space), which is the rule book kvplan's neutral engine follows.
V1_SINCE: Release = (0, 8, 0)
V1_SOURCE = blob("v0.8.0", "vllm/envs.py", "VLLM_USE_V1 defaults to 1: the V1 engine and its scheduler "
                 "(vllm/v1/core/sched/scheduler.py) serve by default")
V0_SWAP_SOURCE = blob("v0.7.3", "vllm/core/scheduler.py", "_preempt: a single-sequence request is recomputed unless "
                      "user_specified_preemption_mode is 'swap' (--preemption-mode swap, vllm/engine/arg_utils.py), "
                      "which swaps its blocks out to the CPU swap space: --swap-space, 'CPU swap space size (GiB) per "
                      "GPU', default 4")
V0_PREFIX_SOURCE = blob("v0.7.3", "vllm/engine/arg_utils.py", "EngineArgs.__post_init__: enable_prefix_caching None "
                        "-> bool(envs.VLLM_USE_V1), off under V0; --enable-prefix-caching turns it on")
# V0's batch limits (before V1_SINCE), which the rule book runs with: max_num_seqs 256 and, with chunked prefill off,
# max_num_batched_tokens max(max_model_len, 2048) (vllm/config.py SchedulerConfig.__post_init__, _DEFAULT_MAX_NUM_
# BATCHED_TOKENS 2048), so that one prefill pass takes every waiting prompt that fits. Chunked prefill is off for an MLA
# model whatever the context (v0.7.3 vllm/config.py VllmConfig.__post_init__: "MLA is enabled; forcing chunked prefill
# and prefix caching to be disabled", vllm-project/vllm PR #12642; from PR #12639 MLA may chunk in V0 but only when
# asked: v0.8.x arg_utils.py _set_default_args_v0 "Chunked prefill not supported for Multimodal or MLA in V0" leaves it
# off) and for any model whose context is at most 32K; past 32K V0 turns it on for other models (then kvplan keeps
# its 8192-token estimate of a pass, as activation_reserve does).
V0_MAX_NUM_SEQS = 256
# The fused-MoE kernel runs a forward of many tokens in chunks: fused_experts_impl takes M = min(tokens, CHUNK_SIZE)
# with CHUNK_SIZE = envs.VLLM_FUSED_MOE_CHUNK_SIZE, whose default is "32768" (vllm/envs.py, PR #7995), and sizes its
# intermediate caches for M tokens; so the profile run's MoE workspace stops growing at 32,768 tokens (it matters
# where a pass is longer: V0 without chunked prefill at a long max_model_len, or a given max_num_batched_tokens)
FUSED_MOE_CHUNK_TOKENS = 32768
FUSED_MOE_CHUNK_SOURCE = ("github.com/vllm-project/vllm vllm/envs.py VLLM_FUSED_MOE_CHUNK_SIZE (default 32768 since "
                          "vllm-project/vllm PR #7995, Aug 2024, from 64K; ROCm's fork ROCm/vllm PR #207 went back to "
                          "64K), vllm/model_executor/layers/fused_moe/fused_moe.py fused_experts_impl: M = "
                          "min(num_tokens, CHUNK_SIZE), the intermediate caches sized for M tokens")
V0_MIN_BATCHED_TOKENS = 2048
V0_LONG_CONTEXT = 32768
V0_LONG_BATCHED_ESTIMATE = 8192
V0_BATCH_SOURCE = blob("v0.7.3", "vllm/config.py, vllm/engine/arg_utils.py", "SchedulerConfig: max_num_seqs 256; "
                       "max_num_batched_tokens max(max_model_len, 2048) without chunked prefill; VllmConfig."
                       "__post_init__ forces chunked prefill off for MLA (PR #12642; v0.8.x _set_default_args_v0 "
                       "keeps it off by default for MLA in V0); chunked prefill by default only past 32K of context")
NO_SWAP_SOURCE = ("vLLM V1 preempts by recompute only: no swap space (vllm/v1/core/sched/scheduler.py "
                  "_preempt_request frees the blocks; docs.vllm.ai configuration/optimization 'Preemption')")
# V1's admission and free-queue rules that changed after the commit kvplan.engines.vllm_scheduler was read at
# (each read in the wheels of the releases on both sides; docs/engine-rules-by-release.md section 12).
# From v0.19.0 SchedulerConfig.scheduler_reserve_full_isl defaults to True: a waiting (or preempted) request is
# admitted only when the blocks of ALL its tokens (request.num_tokens, capped at max_model_len) are free, less its
# prefix-cache hit's blocks that are not free; v0.18.0 has no such option (only the first chunk's blocks are checked).
FULL_ISL_SINCE: Release = (0, 19, 0)
FULL_ISL_SOURCE = blob("v0.19.0", "vllm/v1/core/sched/scheduler.py, vllm/v1/core/kv_cache_manager.py",
                       "scheduler_reserve_full_isl: bool = True (vllm/config/scheduler.py); the waiting loop breaks "
                       "when not can_fit_full_sequence(request): get_num_blocks_to_allocate(num_tokens="
                       "min(request.num_tokens, max_model_len)) > get_num_free_blocks(); from v0.22 the same check "
                       "is allocate_slots(full_sequence_must_fit=True), v0.33.0 kv_cache_manager.py l.531-548")
# From v0.24.0 BlockPool.free_blocks puts the freed blocks that carry no block hash (a request's partial last block,
# blocks past its computed tokens) at the FRONT of the free queue (prepend_n), the hashed ones at its tail
# (append_n): the next allocations take the hashless blocks before any cached one. v0.23.0 appends them all (its
# prepend flag is passed only for a sliding window's or Mamba's scratch blocks). v0.28.0 also fronts every block
# when prefix caching is off (no change where it is on, as kvplan models it).
HASHLESS_FRONT_SINCE: Release = (0, 24, 0)
HASHLESS_FRONT_SOURCE = blob("v0.24.0", "vllm/v1/core/block_pool.py", "free_blocks: blocks_without_hash -> "
                             "free_block_queue.prepend_n, blocks_with_hash -> append_n (v0.33.0 l.816-847, "
                             "blocks_to_evict_first / blocks_to_evict_last); v0.23.0 append_n for all")
# Speculative decoding's KV slots (kvplan simulate --speculative: K MTP draft tokens per verify step). A running
# request's step schedules num_new_tokens = num_tokens_with_spec - num_computed_tokens = its next token plus its K
# draft tokens, and allocate_slots(request, num_new_tokens, num_lookahead_tokens) takes blocks for num_computed +
# num_new + num_lookahead tokens (vllm/v1/core/kv_cache_manager.py, "< new > | < lookahead >"), where the scheduler's
# num_lookahead_tokens is num_speculative_tokens when speculative_config.use_eagle() (the drafter writes KV past the
# verified tokens). use_eagle() takes MTP from v0.9.0 (vllm/config.py: method in ("eagle", "eagle3",
# "deepseek_mtp"); v0.11.0+ "mtp"; v0.33.0 VllmConfig.num_lookahead_tokens the same for EAGLE/MTP); in v0.8.5 it is
# ("eagle", "eagle3") only, so an MTP request reserves its K drafts alone. So a decoding request holds the blocks of
# its context + 2K slots (K before v0.9.0); read in the v0.8.5, v0.9.0, v0.11.0, v0.12.0, v0.19.0 and v0.33.0 wheels.
# (--speculative eagle3 is use_eagle() in v0.8.5 too, so 2K there; simulate's options carry no method, and kvplan
# counts K on v0.8.x for both.)
SPEC_LOOKAHEAD_SINCE: Release = (0, 9, 0)
SPEC_SLOTS_SOURCE = blob("v0.19.0", "vllm/v1/core/sched/scheduler.py, vllm/v1/core/kv_cache_manager.py",
                         "allocate_slots(request, num_new_tokens (= 1 + the K drafts, num_tokens_with_spec), "
                         "num_lookahead_tokens=self.num_lookahead_tokens (= num_speculative_tokens when "
                         "use_eagle(), MTP included from v0.9.0)): num_tokens_need_slot = computed + new + lookahead")
# From v0.24.0 V1 has an admission watermark again: SchedulerConfig.watermark (--watermark), default 0.0, keeps
# int(watermark x num_blocks) blocks free when a waiting or preempted request is admitted while any request runs
# (allocate_slots: watermark_blocks if has_scheduled_reqs and status WAITING/PREEMPTED). At its default it keeps
# nothing free, which is what kvplan models in every V1 release (vllm/config/scheduler.py at v0.24.0: watermark:
# float = Field(default=0.0, ge=0.0, lt=1.0); vllm/v1/core/kv_cache_manager.py: watermark_blocks = int(watermark x
# num_blocks), added to the blocks a waiting/preempted request needs when has_scheduled_reqs). kvplan takes no
# --watermark, so none can be given and ignored.
# Async scheduling (vllm/v1/core/sched/async_scheduler.py, vllm/v1/engine/core.py step_with_batch_queue): the engine
# core schedules step N+1 while the GPU runs step N (a batch queue of two: max_concurrent_batches is 2 with async
# scheduling in the mp and uni executors), so a step is decided from what the engine knew when the step before it
# started: a request that arrives during step N is first scheduled in step N+2, and a request whose last token comes
# out of step N still holds its blocks and its max_num_seqs seat when step N+1 is decided (update_from_output(N) frees
# them after schedule(N+1); the scheduler skips it in N+1 once its placeholders reach max_tokens). When that decision
# schedules nothing, the GPU idles and the next decision is made at once with everything known (an empty batch-queue
# entry). kvplan.engines.vllm_scheduler models it; --no-async-scheduling turns it off as vLLM's flag does.
# Off by default through v0.13 (SchedulerConfig.async_scheduling: bool = False); from v0.14.0 the default is None,
# which VllmConfig.__post_init__ turns on unless a speculative method other than EAGLE/MTP, disable_padded_drafter_batch
# or an executor other than mp/uni/external_launcher (Ray, by choice) forbids it, and in v0.14.x also
# pipeline_parallel_size > 1 (v0.15.0 drops that check; PR #32359). kvplan's --speculative is MTP, which keeps it on.
ASYNC_SINCE: Release = (0, 14, 0)
ASYNC_SOURCE = blob("v0.14.0", "vllm/config/scheduler.py, vllm/config/vllm.py", "async_scheduling: bool = "
                    "Field(default=None); VllmConfig.__post_init__ sets it True unless an incompatible option "
                    "(v0.13.0: async_scheduling: bool = False; the same default-on rule read in v0.15.1 l.589-622 "
                    "and v0.33.0)")
ASYNC_PP_UNTIL: Release = (0, 15, 0)     # v0.14.x: pipeline_parallel_size > 1 turns the default off
ASYNC_PP_SOURCE = blob("v0.14.0", "vllm/config/vllm.py", "'Async scheduling is not yet supported with "
                       "pipeline_parallel_size > 1 and will be disabled' (gone in v0.15.0)")
# The scheduler's skip of a request whose in-flight token reaches max_tokens (scheduler.py schedule, "Async
# scheduling: Avoid scheduling an extra step ...") is in v0.12.0 and later, not in v0.11.0, whose async scheduler runs
# such a request one wasted step more: kvplan models async scheduling from v0.12.0 only.
ASYNC_SKIP_SINCE: Release = (0, 12, 0)
ASYNC_SKIP_SOURCE = blob("v0.12.0", "vllm/v1/core/sched/scheduler.py", "schedule: num_output_placeholders > 0 and "
                         "num_computed_tokens + 2 - num_output_placeholders >= num_prompt_tokens + max_tokens -> "
                         "skip (absent from v0.11.0)")
ASYNC_LOOP_SOURCE = blob("v0.15.1", "vllm/v1/engine/core.py", "EngineCore.step_with_batch_queue: schedule and "
                         "execute_model(non_block) the next batch, then block on the oldest and update_from_output "
                         "it; vllm/v1/executor/multiproc_executor.py max_concurrent_batches = 2 with async "
                         "scheduling; vllm/v1/core/sched/async_scheduler.py output placeholders")
# --long-prefill-token-threshold in V1 (docs/engine-rules-by-release.md section 12; each read in the wheels named).
# vllm/v1/core/sched/scheduler.py schedule caps num_new_tokens at the threshold when 0 < threshold < num_new_tokens,
# in the running loop and in the waiting loop alike, before the token budget's min; 0 (the default, every release)
# is off. v0.8.0's V1 has no such cap: setting it (or max_num_partial_prefills / max_long_partial_prefills) falls back
# to V0 (vllm/engine/arg_utils.py _is_v1_supported_oracle, "Concurrent Partial Prefill"); v0.8.5 is the first wheel
# read whose V1 scheduler caps (v0.8.1-v0.8.4 not read: refused). From v0.31.0 the cap holds only while the running
# and waiting requests number more than one (num_eligible_reqs > 1: a request alone gets the whole budget), and
# long_prefill_token_threshold_adaptive (default off, not modelled) may raise it; v0.30.0 caps always. A threshold
# above max_model_len is refused from v0.27.0 (SchedulerConfig.verify_max_model_len); before, that check ran only
# with max_num_partial_prefills > 1, so it was accepted and caps nothing.
LONG_PREFILL_SINCE: Release = (0, 8, 5)
LONG_PREFILL_SOURCE = blob("v0.8.5", "vllm/v1/core/sched/scheduler.py", "schedule: if 0 < scheduler_config."
                           "long_prefill_token_threshold < num_new_tokens: num_new_tokens = threshold (running and "
                           "waiting loops; v0.8.0: arg_utils.py falls back to V0 when it is set)")
LONG_PREFILL_ALONE_SINCE: Release = (0, 31, 0)
LONG_PREFILL_ALONE_SOURCE = blob("v0.31.0", "vllm/v1/core/sched/scheduler.py", "schedule: num_eligible_reqs = "
                                 "len(running) + len(waiting) (+ kv_holding_waiting); long_prefill_token_threshold "
                                 "= threshold if num_eligible_reqs > 1 else 0 (v0.30.0: always the threshold)")
LONG_PREFILL_MAX_LEN_SINCE: Release = (0, 27, 0)
LONG_PREFILL_MAX_LEN_SOURCE = blob("v0.27.0", "vllm/config/scheduler.py", "verify_max_model_len: ValueError "
                                   "'long_prefill_token_threshold (...) cannot be greater than the max_model_len' "
                                   "(v0.26.0: only under max_num_partial_prefills > 1)")
# max_num_partial_prefills / max_long_partial_prefills (default 1): V0's concurrent partial prefills, which V1 never
# ran: through v0.11 a value other than 1 falls back to V0 (arg_utils.py _raise_or_fallback "Concurrent Partial
# Prefill"), then raises (_check_feature_supported, read in v0.19.0 and v0.26.0); v0.27.0 removed both flags. Their
# 4%-of-max_model_len default threshold (SchedulerConfig.__post_init__ under max_num_partial_prefills > 1) so never
# applies in V1.
PARTIAL_PREFILLS_UNTIL: Release = (0, 27, 0)
PARTIAL_PREFILLS_SOURCE = blob("v0.26.0", "vllm/engine/arg_utils.py", "_check_feature_supported: max_num_partial_"
                               "prefills or max_long_partial_prefills != 1 -> _raise_unsupported_error('Concurrent "
                               "Partial Prefill') (v0.8.5-v0.11.0: _raise_or_fallback to V0; v0.27.0: no such flags)")
# vLLM checks max_num_batched_tokens >= max_num_seqs at start-up (vllm/config/scheduler.py SchedulerConfig verify)
SEQS_WITHIN_BUDGET_SOURCE = blob("v0.11.0", "vllm/config/scheduler.py", "max_num_batched_tokens must be >= "
                                 "max_num_seqs")

def _rule_of(table: dict, version: Release):
    """The entry of a {first release: rule} table that holds at ``version``."""
    return table[max(k for k in table if k <= version)]
BATCH_DEFAULTS_SOURCE = (f"vLLM EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py @{COMMIT}): on GPUs with "
                         ">= 70 GiB "
                         "that are not A100, the API server defaults to max_num_batched_tokens 8192 and max_num_seqs "
                         "1024; otherwise 2048 / 256")
BLOCK_SOURCE = tag_source("v0.33.0", "vllm/config/cache.py, vllm/v1/attention/backends/flash_attn.py",
                          "DEFAULT_BLOCK_SIZE 16; FLASH_ATTN and FLASHINFER take 16")


def default_batch_limits(hw) -> tuple[int, int]:
    if hw.hbm_capacity_gib.value >= 70 and "a100" not in hw.id.lower():
        return 8192, 1024
    return 2048, 256


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --- memory: what vLLM's profile run measures and subtracts from the budget, by release -------------------------
# Read from published memory-profile logs (tests/data/memory_profiles/, docs/pool-prediction.md): each constant
# below is taken from the logs the index marks 'fit' only, and rounded towards the smaller pool; the 'held-out'
# half checks it. vLLM's budget (vllm/v1/worker/gpu_worker.py determine_available_memory): KV pool =
# total_gpu_memory x gpu_memory_utilization - weights - the profile run's torch peak increase - its non-torch
# increase (- the CUDA-graph estimate from v0.20.0); total_gpu_memory is what torch.cuda.mem_get_info reports.
PROFILE_LOGS = "tests/data/memory_profiles/index.toml (published vLLM start-up logs; docs/pool-prediction.md)"
LLMD_V019 = ("github.com/llm-d-incubation/llm-d-planner @d3121e0 accuracy/results/v0.19.0/logs (vLLM v0.19.0 DEBUG "
             "start-up logs on H100)")
LLMD_V011 = ("github.com/llm-d-incubation/llm-d-planner @e37bea2 docs/empirical-vllm-memory-results.md (vLLM v0.11.0 "
             "on H100)")
LLMD_SWEEP = ("github.com/llm-d-incubation/llm-d-planner @a95e9f6 accuracy/results/version-sweep (Qwen3-14B on H100, "
              "vLLM v0.15.0-v0.18.0)")
V0_PROFILE = "github.com/vllm-project/vllm/pull/10511 (V0 memory profiler, Llama-3-8B TP1/TP2 sanity checks)"
# GiB the CUDA driver keeps out of torch.cuda.mem_get_info's total, against the nvidia-smi total the presets carry:
# H100 80GB 79.65 - 79.19 (v0.19 logs, 'worker init memory snapshot: ... total_memory=79.19GiB'); H20 95.58 - 95.22
# (github.com/LMCache/LMCache/issues/503, tests/data/logs/vllm-v0.8-deepseek-int4-h20.log); B200 179.06 - 178.36
# (github.com/vllm-project/vllm/pull/21489, 'Free memory on device (177.66/178.36 GiB)'). The H100 PCIe and H800
# carry the H100 SXM's 80 GB part. Other NVIDIA GPUs take the largest seen (0.70), AMD ones none.
DRIVER_RESERVE_GIB = {"h100-sxm": 0.46, "h100-pcie": 0.46, "h800": 0.46, "h20": 0.36, "b200": 0.70}
UNKNOWN_DRIVER_RESERVE_GIB = 0.70
DRIVER_RESERVE_SOURCE = (f"{LLMD_V019}; github.com/LMCache/LMCache/issues/503; github.com/vllm-project/vllm/pull/21489 "
                         "(the logged total_gpu_memory against the preset's nvidia-smi total)")
# Bytes per (request x vocabulary entry) of the sampler's dummy run in the profile (gpu_model_runner.profile_run ->
# _dummy_sampler_run over min(max_num_seqs, max_num_batched_tokens) rows of full-vocabulary logits, gathered on
# every TP rank): fitted to the dense 'fit' logs, where it dominates (a bf16 logits tensor, its fp32 copy and the
# sampler's temporaries). It fell between v0.16 and v0.17 (Qwen3-14B: 5.64 -> 2.23 GiB, LLMD_SWEEP).
SAMPLER_BYTES = {(0, 8, 0): 38.4, (0, 17, 0): 14.9}
V0_SAMPLER_BYTES = 41.2   # V0 (before v0.8): 256 sequences, Llama-3-8B 1.26 GiB (V0_PROFILE)
HIDDEN_BYTES = 2.5        # per token x hidden size alive through the sampler (Llama 8B -> 70B, Qwen2.5 7B -> 72B)
# Non-torch increase of the profile run, GiB per GPU: (TP 1, TP 2) and the step per doubling beyond TP 2.
NON_TORCH_GIB = {(0, 0, 0): (1.79, 3.64, 0.12), (0, 8, 0): (0.64, 1.90, 0.12), (0, 11, 0): (0.13, 0.55, 0.12),
                 (0, 12, 0): (0.13, 2.21, 0.12), (0, 18, 0): (0.27, 2.09, 0.12)}
NON_TORCH_SOURCES = {
    (0, 0, 0): f"{V0_PROFILE}: TP1 1.79 GiB; TP2 as TP1 plus the TP2 all-reduce buffers of later releases",
    (0, 8, 0): ("vllm/v1/worker/gpu_worker.py of the early V1 releases: non-torch = device used - torch allocated "
                "after the profile, the CUDA context (0.51 GiB in the v0.19 init snapshot) included at TP1; TP>=2 "
                "from the one v0.9.2/v0.10.0 log (Qwen3-235B-FP8 on 4 x H100, 8.11 GiB pool, LMCache connector "
                "buffers included: 1.9 + 0.12 at TP4); estimates"),
    (0, 11, 0): f"{LLMD_V011}: 0.13 GiB at TP1, 0.54-0.55 at TP2",
    (0, 12, 0): (f"{LLMD_SWEEP}: 0.13 GiB at TP1; TP>=2 not measured between v0.12 and v0.17, the v0.19 figure is "
                 "kept (the safe side)"),
    (0, 18, 0): f"{LLMD_V019}: 0.25-0.27 GiB at TP1, 2.06-2.11 at TP2, 2.13-2.21 at TP4 (custom all-reduce, NCCL)",
}
# The CUDA-graph estimate vLLM subtracts from v0.20.0 (CUDAGRAPH_SOURCE), GiB per GPU: a + b x layers on the GPU,
# an upper envelope of the estimates the v0.19 'fit' logs print ('CUDA graph pool memory: ... (estimated)',
# 0.54-1.70 GiB for 16-80 layers).
CUDA_GRAPH_GIB = (0.30, 0.02)
# From v0.26.0 a Gated DeltaNet hybrid's CUDA-graph estimate also charges the first FULL sample's forward over
# max_num_batched_tokens of context (about 128 KiB a batched token on Qwen3.5-122B-A10B: 4.2 GiB estimated against
# 0.56 in v0.23 for the same graphs, the pool 18-24% smaller; open when read): kvplan does not model it and says so.
GDN_GRAPH_TRANSIENT_SINCE: Release = (0, 26, 0)
GDN_GRAPH_TRANSIENT_SOURCE = "github.com/vllm-project/vllm/issues/50780 (v0.26.0 against v0.23.1, identical estimator)"
# MXFP4 MoE weights on the Triton backend (Hopper and others): vLLM's loaded experts exceed the checkpoint by
# ~0.8 MiB per expert per layer on every rank (gpt-oss-120b at TP1: 64.38 GiB loaded against 60.77 GiB of
# checkpoint over 36 x 128 experts, LLMD_V011); swizzled layout, estimate.
MXFP4_PAD_BYTES_PER_EXPERT = int(0.80 * 2**20)


def _gib(x: float) -> int:
    return int(x * 2**30)


# A request's time outside the engine steps, added to TTFT and E2E: V1's API server process takes the HTTP request,
# applies the chat template and tokenizes, and hands the request to the EngineCore process over ZMQ; the first
# token comes back the same way (AsyncLLM's output handler detokenizes it, the server streams the chunk)
# (vllm-project/vllm vllm/v1/engine/async_llm.py, vllm/v1/engine/core_client.py). kvplan found no published
# measurement of the whole path, so the figure is fitted on the 20 vLLM 'fit' runs of tests/data/serving_runs.toml
# (vLLM v0.15.1, H100, inference-perf clients; 1 ms grid, H100 prefill_mfu 0.65): the least summed median |error| /
# target of TPOT, TTFT and E2E. Fitted first (19 ms) with every step decided at its start; refitted (async19) once
# kvplan modelled vLLM's async scheduling, on by default in v0.15.1 (kvplan.engines.vllm_scheduler), which puts one
# more decode step between an arrival and its first chunk: 1 ms. The fit is flat from 1 to 8 ms (score 2.66-2.78,
# against 3.64 at 19 ms), and 1 ms is below the 8-12 ms one client measured between its TTFT and vLLM's own
# vllm:time_to_first_token_seconds (vllm-project/vllm#54628, a 0.5B model on a laptop GPU): the TTFT still left
# on small models at light load is not the frontend's; with the chunk priced at a higher prefill_mfu (0.75, 0.85)
# the same fit gives 11 and 13 ms (docs/simulate-fidelity.md, "vLLM's async scheduling").
FRONTEND_LATENCY_S = 0.001
FRONTEND_SOURCE = ("kvplan fit: 1 ms per request (API server in: HTTP, chat template, tokenization, ZMQ to the "
                   "EngineCore; out: detokenize and stream the first token; vllm/v1/engine/async_llm.py), the least "
                   "summed median |error| / target of TPOT, TTFT and E2E on the 20 vLLM v0.15.1 H100 'fit' runs of "
                   "tests/data/serving_runs.toml with vLLM's async scheduling modelled (19 ms before it; flat from 1 "
                   "to 8 ms)")

# The decode step's TP all-reduce as vLLM runs it: in the CUDA graph, on its custom all-reduce (one-stage at decode
# sizes). vLLM's own benchmark (benchmarks/kernels/benchmark_device_communicators.py, which times CUDA-graph replays)
# on 4 x H100, hidden 8192, bf16, column ca_1stage: (32, 8192) = 0.5 MiB 10 us, 1 MiB 14, 1.5 MiB 19, 2 MiB 23,
# 3 MiB 30, 4 MiB 38 (vllm-project/vllm#24532, 2025-09, before v0.15.1). Least squares over the six: 6.45 us + 7.94 us
# per MiB; kvplan's form, latency + 2 (TP - 1) / TP x bytes / (link x share), at TP 4 on NVLink 4 (450 GB/s per
# direction): share = 1.5 x 1,048,576 B / (450 GB/s x 7.94 us) = 0.44. The generic figure it replaces (9.3 us +
# 0.114 of the link: SGLang's PR 2904, measured outside CUDA graphs) prices 1 MiB at TP 4 at 40 us, 2.8x this.
DECODE_ALLREDUCE = (6.45, 0.44, "vLLM's custom all-reduce in CUDA graphs on 4 x H100 (vllm-project/vllm#24532, its "
                    "benchmarks/kernels/benchmark_device_communicators.py, column ca_1stage: 0.5-4 MiB in 10-38 us): "
                    "least squares 6.45 us + 7.94 us per MiB, i.e. 0.44 of NVLink 4's 450 GB/s at TP 4")

# vLLM on ROCm gfx942 (MI300X, MI325X) runs an MLA model's decode on Triton kernels unless told otherwise: the
# Triton MLA backend (vllm-project/vllm PR #12662, "use the Triton MLA backend on ROCm to enable DeepSeek", v0.7.2;
# the AITER MLA backend is taken only with VLLM_ROCM_USE_AITER=1, which vllm/envs.py leaves off: "Disable aiter ops
# unless specifically enabled"), with the Triton block-FP8 GEMM and fused-MoE kernels tuned for MI300X
# (ROCm/vllm PR #434). SGLang's ROCm images run AITER instead (docker/rocm.Dockerfile: ENV SGLANG_USE_AITER=1), so the
# SGLang adapter has no such rule. The one published step of that Triton path: DeepSeek-V3 TP8, batch 4, 2,048 + 256
# tokens, 38.50 ms a decode step on SGLang's Triton MLA kernel (sgl-project/sglang PR #3237, the kernel vLLM's
# TritonMLA backend ports); kvplan's roofline prices the step at far less. ROCM_TRITON_MLA_US is that gap per MLA
# layer, fitted to that point alone (benchmarks/tpot_fidelity.py B26a, rule R2: least squares of the relative error,
# 1 us grid); B26b (the fused kernel) held out. Every release kvplan models keeps the default (envs.py), so the rule
# is per platform, not per release.
ROCM_TRITON_GPUS = ("mi300x", "mi325x")
ROCM_TRITON_MLA_US = 448.0   # fitted on B26a: 38.50 ms priced at 38.48 ms (1 us grid, 0..2,000 us)
ROCM_TRITON_SOURCE = (
    "vLLM on ROCm gfx942 decodes MLA on Triton kernels by default (Triton MLA: vllm-project/vllm PR #12662; AITER "
    "only with VLLM_ROCM_USE_AITER=1, off in vllm/envs.py); fitted to the one published step of that path, "
    "DeepSeek-V3 TP8 batch 4 at 2,048 + 256 tokens, 38.50 ms (sgl-project/sglang PR #3237; "
    "benchmarks/tpot_fidelity.py B26a, B26b held out)")


@dataclass(frozen=True)
class VllmConfig:
    block_size: int
    num_blocks: int
    num_groups: int
    group_size: int
    padding_layers: int
    page_bytes_per_layer: int          # hybrid models: the one unified page size; uniform: sum over layers
    uniform: bool
    kv_cache_tokens: int               # "GPU KV cache size: N tokens", v0.9.0-v0.20.x: num_blocks // groups x block
    kv_cache_tokens_late: int          # v0.21.0+: int(max_concurrency * max_model_len)
    max_concurrency: float             # "Maximum concurrency for max_model_len tokens per request: x"
    max_model_len: int
    blocks_per_request: int
    needed_for_one_request_bytes: int  # _check_enough_kv_cache_memory's figure, by the release's rule
    mamba_page_padding: float          # fraction the mamba page is padded by (0 when none)
    kv_cache_tokens_logged: int = 0    # the line the selected release prints
    fit_available_bytes: int = 0       # what the check compares with (v0.29+: the pool less the null block)
    given_block_size: int | None = None


class VllmEngine(Engine):
    id = "vllm"
    version: Release   # always pinned to one release (the newest by default)
    sources = (SOURCE,)
    fraction_name = "gpu_memory_utilization"
    settings = frozenset({"gpu_memory_utilization", "kv_pool_bytes", "max_model_len", "max_num_batched_tokens",
                          "max_num_seqs", "block_size", "activation_reserve_bytes", "runtime_reserve_bytes"})
    # vLLM's spec per kind: MLA and the V3.2 indexer are MLAAttentionSpec, a FullAttentionSpec type, so they
    # group with full attention (UniformTypeKVCacheSpecs).
    kind_table = {FullAttention: "full", MLA: "full", SparseIndexer: "full", SlidingWindowAttention: "sliding_window",
                  GatedDeltaNet: "mamba", Mamba2: "mamba"}
    # Blocks by kind where neither release nor GPU matters; MLA's block is chosen by ``mla_block`` (release, GPU
    # generation, KV dtype) and 64 here is only its value for a GPU kvplan cannot place.
    block_tokens_table = {FullAttention: 16, SlidingWindowAttention: 16, MLA: 64, SparseIndexer: 16,
                          GatedDeltaNet: 16, Mamba2: 16}
    defaults_of = "vLLM"
    frontend_latency = (FRONTEND_LATENCY_S, FRONTEND_SOURCE)
    decode_allreduce = DECODE_ALLREDUCE
    default_steps_gib = (70.0,)   # get_batch_defaults: >= 70 GiB -> 8192 / 1024

    def __init__(self, version: Release = NEWEST, name: str = "") -> None:
        self.version = version
        self.name = name
        start, end = rule_span(version, BOUNDARIES)
        wheels = [w for w in READ_WHEELS if w >= start and (end is None or w < end)]
        first, last = wheels[0], wheels[-1]
        span = f"{release_text(start)}+" if end is None else (
            release_text(start) if first == last else f"{release_text(start)}-{release_text(last)}")
        read = f"v{'.'.join(map(str, first))} wheel" if first == last else \
            f"v{'.'.join(map(str, first))}..v{'.'.join(map(str, last))} wheels"
        self.release = f"vLLM {span} rules (read from the {read})"

    def since(self, version: Release) -> bool:
        return self.version >= version

    def mixes_prefill_chunks(self) -> bool:
        """From ``V1_SINCE`` (V1_SOURCE): V1's scheduler schedules the running requests' decode tokens and a waiting
        request's prompt chunk in one step under max_num_batched_tokens (``kvplan.engines.vllm_scheduler``, the
        module docstring's "One step"); V0 ran prefills as steps of their own."""
        return self.since(V1_SINCE)

    def decode_layer_latency(self, scenario) -> tuple[float, str] | None:
        """ROCM_TRITON_MLA_US per MLA layer for an MLA model (DSA's sparse models excepted: another backend) on a
        gfx942 preset (ROCM_TRITON_GPUS), every release (ROCM_TRITON_SOURCE); None elsewhere."""
        if not ROCM_TRITON_MLA_US or not _preset_named(scenario.hardware, ROCM_TRITON_GPUS):
            return None
        kinds = self.kinds(scenario.sized_model)
        if MLA not in kinds or sparse_attention(kinds):
            return None
        return ROCM_TRITON_MLA_US, ROCM_TRITON_SOURCE

    kv_dtype_since = KV_DTYPE_SINCE

    def kv_dtype_problem(self, kv_dtype: KVDtype, model: ModelSpec | None = None,
                         hardware: HardwareSpec | None = None) -> tuple[str, str] | None:
        """For an MLA model first the dtypes no MLA backend runs in any release (nvfp4; fp8_ds_mla without DSA's
        sparse indexer), then the release table, then fp8 for an MLA latent: before v0.10.2 no MLA backend takes
        it; V3.2's fp8_ds_mla layout needs v0.11.0's sparse backend; and in v0.10.2-v0.11.0 only Hopper's FlashMLA
        and Blackwell's CUTLASS MLA take it."""
        if model is None:
            return super().kv_dtype_problem(kv_dtype, model, hardware)
        kinds = self.kinds(model)
        mla = MLA in kinds
        if mla and kv_dtype is KVDtype.NVFP4:
            return (f"vLLM has no nvfp4 KV cache for MLA models ({model.id}): no MLA attention backend lists it "
                    f"({MLA_BACKENDS_SOURCE})", "choose --kv-dtype fp8 (SGLang's MLA pool has an FP4 cache)")
        if mla and kv_dtype is KVDtype.FP8_DS_MLA and SparseIndexer not in kinds:
            return (f"vLLM runs fp8_ds_mla only in its sparse (DSA) MLA backends, and {model.id} has no sparse "
                    f"indexer ({MLA_BACKENDS_SOURCE})", "choose --kv-dtype fp8 for a dense-attention MLA model")
        problem = super().kv_dtype_problem(kv_dtype, model, hardware)
        if problem is not None or not mla or kv_dtype is not KVDtype.FP8:
            return problem
        stored = {g.kind.stored_dtype(kv_dtype) for g in model.groups if type(g.kind) is MLA}
        if not self.since(MLA_FP8_SINCE):
            return (f"{self.display_name} has no fp8 KV cache for MLA models: every MLA backend raises "
                    f"NotImplementedError (first in {release_text(MLA_FP8_SINCE)}: {MLA_FP8_SOURCE})",
                    f"pin vllm=={release_text(DS_MLA_SINCE if KVDtype.FP8_DS_MLA in stored else MLA_FP8_SINCE)} "
                    "or newer, or choose --kv-dtype bf16")
        if KVDtype.FP8_DS_MLA in stored and not self.since(DS_MLA_SINCE):
            return (f"{self.display_name} has no sparse (DSA) MLA backend for {model.id}'s fp8_ds_mla cache (first "
                    f"in {release_text(DS_MLA_SINCE)}: {DS_MLA_SOURCE})",
                    f"pin vllm=={release_text(DS_MLA_SINCE)} or newer")
        if (KVDtype.FP8 in stored and not self.since(MLA_FP8_ANY_GPU_AFTER) and hardware is not None
                and known_other_gpu(hardware)):
            return (f"{self.display_name} runs an fp8 MLA cache only on Hopper (FlashMLA) and Blackwell (CUTLASS "
                    f"MLA); on the {hardware.id} its Triton MLA backend raises NotImplementedError "
                    f"({MLA_FP8_SOURCE}; still so in v0.11.0)", "choose --kv-dtype bf16 on this GPU")
        return None

    def offload_settings(self, generic: str) -> str:
        if self.since(OFFLOAD_SINCE):
            return generic
        return (f"{self.display_name} has no working native offloading (--kv-offloading-size with the native backend "
                f"starts from {release_text(OFFLOAD_SINCE)}: {OFFLOAD_SIZE_SOURCE}); pin a newer vLLM, or SGLang's "
                "--enable-hierarchical-cache (HiCache)")

    def batch_limits(self, hw):
        mnbt, mns = default_batch_limits(hw)
        why = default(f"{hw.id}: {hw.hbm_capacity_gib.value:g} GiB", BATCH_DEFAULTS_SOURCE)
        return Tokens(mnbt, why), Count(mns, why)

    def v0_batch_limits(self, scenario, model) -> tuple[int, int, str]:
        """V0's default (max_num_batched_tokens, max_num_seqs) for ``model`` under ``scenario`` and why
        (V0_BATCH_SOURCE): 256 sequences; without chunked prefill (an MLA model, or a context of at most 32K) a
        pass of max(max_model_len, 2048) tokens, else kvplan's 8192-token estimate."""
        mml = scenario.max_model_len or model.max_position_embeddings or V0_MIN_BATCHED_TOKENS
        mla = MLA in self.kinds(model)
        if mla or mml <= V0_LONG_CONTEXT:
            why = ("chunked prefill off: " + ("MLA in V0" if mla else f"context {mml:,} <= 32K")
                   + f"; max(max_model_len {mml:,}, 2048)")
            return max(mml, V0_MIN_BATCHED_TOKENS), V0_MAX_NUM_SEQS, why
        return V0_LONG_BATCHED_ESTIMATE, V0_MAX_NUM_SEQS, (f"chunked prefill on past 32K (context {mml:,}): "
                                                           "kvplan's 8192-token estimate")

    def batch_limits_for(self, scenario):
        """The release's defaults under the scenario's flags: V0 (before ``V1_SINCE``) its own
        (``v0_batch_limits``), V1 the API server's by GPU memory (``batch_limits``)."""
        model = getattr(scenario, "sized_model", None) or getattr(scenario, "model", None)
        if self.since(V1_SINCE) or not isinstance(model, ModelSpec):
            return super().batch_limits_for(scenario)
        mnbt_n, mns_n, how = self.v0_batch_limits(scenario, model)
        mnbt = Tokens(mnbt_n, default(f"{self.release}: {how}", V0_BATCH_SOURCE))
        mns = Count(mns_n, default(f"{self.release}: V0's max_num_seqs 256", V0_BATCH_SOURCE))
        if scenario.max_num_batched_tokens is not None:
            mnbt = Tokens(scenario.max_num_batched_tokens, given("--max-num-batched-tokens"))
        if scenario.max_num_seqs is not None:
            mns = Count(scenario.max_num_seqs, given("--max-num-seqs"))
        return mnbt, mns

    def memory_fraction(self, scenario, par):
        if scenario.gpu_memory_utilization is not None:
            return Number(scenario.gpu_memory_utilization, given("--gpu-memory-utilization"))
        if self.since((0, 20, 0)):
            return Number(DEFAULT_GPU_MEMORY_UTILIZATION, default(
                "vLLM's gpu_memory_utilization, 0.92 from v0.20.0 (0.9 before)", UTILIZATION_SOURCE))
        return Number(OLD_GPU_MEMORY_UTILIZATION, default(
            "vLLM's gpu_memory_utilization, 0.9 through v0.19.x", OLD_UTILIZATION_SOURCE))

    def runtime_reserve(self, scenario):
        """The flat reserve of a deployment kvplan cannot size (no model or layout at hand); ``budget`` replaces it
        by the non-torch and CUDA-graph rows of this release."""
        reserve = super().runtime_reserve(scenario)
        if scenario.runtime_reserve_bytes is not None:
            return reserve
        return Bytes(int(reserve.value), default("1 GiB runtime reserve", RUNTIME_RESERVE_SOURCE))

    # --- memory budget (see the constants above and docs/pool-prediction.md) ----------------------------------
    def budget(self, scenario, model, par):
        """vLLM's waterfall for this release: the fraction applies to the memory the CUDA driver reports, the
        weights are what vLLM loads, the activation is the profile run's peak, and the runtime reserve is the
        non-torch increase plus, from v0.20, the CUDA-graph estimate."""
        from kvplan.engines import budget as budget_mod

        b = super().budget(scenario, model, par)
        if b.given_pool:
            return b
        weights = self.loaded_weights(b.weights, scenario, model, par)
        if scenario.runtime_reserve_bytes is not None:
            non_torch = cuda_graphs = None
            runtime = b.runtime
        else:
            non_torch, cuda_graphs = self.non_torch_memory(par), self.cuda_graph_memory(model, par)
            total = non_torch.number() + cuda_graphs.number()
            runtime = Bytes(total, derived("non-torch memory + CUDA-graph memory in the budget",
                                           f"{non_torch.value:,} + {cuda_graphs.value:,} = {total:,} B"))
        return budget_mod.waterfall(scenario.hardware, b.fraction, self.fraction_name, weights, b.activation,
                                    runtime, visible=self.visible_memory(scenario.hardware),
                                    non_torch=non_torch, cuda_graphs=cuda_graphs)

    def visible_memory(self, hw: HardwareSpec) -> Bytes:
        """torch.cuda.mem_get_info's total, which vLLM multiplies by gpu_memory_utilization: the preset's HBM less
        what the CUDA driver keeps (DRIVER_RESERVE_GIB; none on AMD)."""
        amd = "amd" in hw.name.lower()
        key = next((k for k in DRIVER_RESERVE_GIB if hw.id.lower() == k), None)
        gib = 0.0 if amd else DRIVER_RESERVE_GIB[key] if key else UNKNOWN_DRIVER_RESERVE_GIB
        how = ("AMD: ROCm reports the whole HBM" if amd else f"{hw.id}: {gib:g} GiB" if key else
               f"{hw.id}: not measured, the largest reserve seen ({gib:g} GiB, an estimate)")
        visible = hw.hbm_bytes - _gib(gib)
        if hw.node.os:
            how += (f"; the preset's host ([node] os = {hw.node.os}) does not move it: vLLM sizes the pool from the "
                    "total, not from the free memory")
        return Bytes(visible, derived("HBM - what the CUDA driver keeps (vLLM's total_gpu_memory)",
                                      f"{hw.hbm_bytes:,} - {_gib(gib):,} ({how}) = {visible:,} B",
                                      DRIVER_RESERVE_SOURCE))

    def loaded_weights(self, weights: Bytes, scenario, model: ModelSpec, par: Parallelism) -> Bytes:
        """The checkpoint's weights as vLLM holds them: a quantized dtype priced per parameter leaves the
        embedding and LM head in the activation dtype (vLLM's quantization methods skip VocabParallelEmbedding and
        ParallelLMHead), with 16-bit group scales for int4; MXFP4 MoE experts take their padded layout."""
        extra, why = 0.0, []
        dtype = scenario.weight_dtype or model.weight_dtype
        priced = scenario.weights_bytes is None and (scenario.weight_dtype is not None or model.weight_bytes is None)
        per = WEIGHT_BYTES_PER_PARAM.get(dtype, 2.0)
        if priced and per < 2.0 and model.vocab_size and model.hidden_size and model.params_total:
            embed = 2 * model.vocab_size * model.hidden_size
            extra += embed * (2.0 - per) / (par.tp * par.pp)
            why.append(f"embedding + LM head 2 x {model.vocab_size:,} x {model.hidden_size:,} kept in bf16 "
                       f"(+{2.0 - per:g} B each)")
            if dtype == "int4":
                scales = (model.params_total.value - embed) * 2 / 128
                extra += scales / (par.tp * par.pp)
                why.append("int4 group-128 fp16 scales (2 B per 128 weights)")
        if dtype == "mxfp4" and model.num_experts and model.experts_per_token:
            experts = model.num_experts * _cdiv(model.num_layers, par.pp) // (par.ep or 1)
            extra += experts * MXFP4_PAD_BYTES_PER_EXPERT
            why.append(f"MXFP4 experts' padded layout, {experts:,.0f} experts x 0.8 MiB (estimate)")
        if not extra:
            return weights
        total = int(weights.number() + extra)
        base = weights.why
        return Bytes(total, derived((base.formula if base else "weights") + " + what vLLM adds on load",
                                    f"{weights.value:,} + {int(extra):,} ({'; '.join(why)}) = {total:,} B",
                                    *(base.sources if base else ()), PROFILE_LOGS))

    def activation_reserve(self, scenario, model, par):
        """The profile run's torch peak increase (vllm/v1/worker/gpu_model_runner.py profile_run): a forward pass
        of max_num_batched_tokens tokens, then the sampler's dummy run over min(max_num_seqs,
        max_num_batched_tokens) requests of full-vocabulary logits. Peak = max(sampler + the hidden states it
        follows, the dense MLP's forward transients) + the fused-MoE workspace; the last pipeline stage also holds
        the hidden states it received. V0 (before v0.8): 256 sequences and, without chunked prefill (contexts up to
        32K), a batch of max(max_model_len, 2048) tokens."""
        if scenario.activation_reserve_bytes is not None:
            return super().activation_reserve(scenario, model, par)
        mnbt_v, mns_v = self.batch_limits_for(scenario)
        mnbt, mns = mnbt_v.number(), mns_v.number()
        if not self.since((0, 8, 0)):
            # V0's own limits (v0_batch_limits): chunked prefill off for MLA and for contexts up to 32K, where one
            # step prefills a whole max_model_len prompt; past 32K (other models) 8192 tokens is kvplan's estimate
            v0_mnbt, v0_mns, _ = self.v0_batch_limits(scenario, model)
            mnbt = scenario.max_num_batched_tokens or v0_mnbt
            mns = scenario.max_num_seqs or v0_mns
            per_entry = V0_SAMPLER_BYTES
            src = V0_PROFILE
        else:
            per_entry = _rule_of(SAMPLER_BYTES, self.version)
            src = LLMD_SWEEP if self.since((0, 17, 0)) else LLMD_V011
        hidden, vocab = model.hidden_size or 0, model.vocab_size or 0
        if not hidden or not vocab:
            return super().activation_reserve(scenario, model, par)
        reqs = min(mns, mnbt)
        sampler = reqs * vocab * per_entry + HIDDEN_BYTES * mnbt * hidden
        inter = model.intermediate_size or 0
        forward = mnbt * (3 * inter // par.tp + 2 * hidden) * 2 if inter else 0
        moe = 0
        expert_inter = model.moe_intermediate_size or (inter if model.num_experts else 0)
        if expert_inter and model.experts_per_token and (scenario.weight_dtype or model.weight_dtype) != "mxfp4":
            chunk = min(mnbt, FUSED_MOE_CHUNK_TOKENS)
            moe = chunk * model.experts_per_token * (3 * expert_inter // par.tp + hidden) * 2
            forward = 0   # the experts' transients are the workspace
        stage_in = 4 * mnbt * hidden if par.pp > 1 else 0
        total = int(max(sampler, forward) + moe + stage_in)
        return Bytes(total, derived(
            "max(requests x vocab x B/entry + 2.5 B x tokens x hidden, tokens x (3 x intermediate / TP + 2 x hidden) "
            "x 2 B) + min(tokens, 32,768: the fused-MoE chunk) x experts/token x (3 x moe_intermediate / TP + "
            "hidden) x 2 B (+ 4 B x tokens x hidden on the last pipeline stage)",
            f"max({reqs:,} x {vocab:,} x {per_entry:g} + {HIDDEN_BYTES:g} x {mnbt:,} x {hidden:,}, {forward:,}) + "
            f"{moe:,} + {stage_in:,} = {total:,} B ({self.release}; requests = min(max_num_seqs {mns:,}, "
            f"max_num_batched_tokens {mnbt:,}))", src, PROFILE_LOGS, FUSED_MOE_CHUNK_SOURCE))

    def non_torch_memory(self, par: Parallelism) -> Bytes:
        """The profile run's non-torch increase for this release and TP degree (NON_TORCH_GIB)."""
        import math

        tp1, tp2, step = _rule_of(NON_TORCH_GIB, self.version)
        gib = tp1 if par.tp == 1 else tp2 + step * math.log2(par.tp / 2)
        how = "TP 1" if par.tp == 1 else f"TP {par.tp}: {tp2:g} + {step:g} x log2(TP / 2)"
        return Bytes(_gib(gib), derived("non-torch memory per GPU (CUDA runtime, NCCL, custom all-reduce buffers)",
                                        f"{how} = {gib:.2f} GiB ({self.release})",
                                        _rule_of(NON_TORCH_SOURCES, self.version), PROFILE_LOGS))

    def memory_estimates(self, scenario, model: ModelSpec, par: Parallelism) -> list[str]:
        """The budget rows of this deployment that rest on an estimate rather than a measured release rule."""
        out = []
        hw = scenario.hardware
        if "amd" not in hw.name.lower() and hw.id.lower() not in DRIVER_RESERVE_GIB:
            out.append(f"the memory the CUDA driver keeps on {hw.id} (not measured: "
                       f"{UNKNOWN_DRIVER_RESERVE_GIB:g} GiB)")
        if scenario.activation_reserve_bytes is None:
            if not self.since((0, 8, 0)):
                out.append("the V0 profile run's activation peak")
            elif model.num_experts and (scenario.weight_dtype or model.weight_dtype) != "mxfp4":
                out.append("the fused-MoE workspace in the activation peak")
        if scenario.runtime_reserve_bytes is None:
            if (not self.since((0, 11, 0)) or par.tp > 4
                    or (par.tp > 1 and self.since((0, 12, 0)) and not self.since((0, 18, 0)))):
                out.append(f"the non-torch memory at TP {par.tp} in {self.display_name}")
            if self.since((0, 20, 0)):
                out.append("the CUDA-graph estimate vLLM subtracts (0.30 + 0.02 GiB per layer)")
        dtype = scenario.weight_dtype or model.weight_dtype
        if dtype == "mxfp4" and model.num_experts:
            out.append("the MXFP4 experts' padded layout")
        return out

    def cuda_graph_memory(self, model: ModelSpec, par: Parallelism) -> Bytes:
        """From v0.20.0 vLLM subtracts its CUDA-graph estimate from the KV budget (CUDAGRAPH_SOURCE); before, graphs
        are captured after the pool is sized, out of the 1 - gpu_memory_utilization headroom."""
        if not self.since((0, 20, 0)):
            return Bytes(0, default("0: before v0.20 vLLM captures CUDA graphs after sizing the pool "
                                    "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is '0' in v0.18-v0.19 and absent "
                                    "before), outside gpu_memory_utilization", tag_source("v0.19.0", "vllm/envs.py")))
        layers = _cdiv(model.num_layers, par.pp)
        a, b = CUDA_GRAPH_GIB
        gib = a + b * layers
        return Bytes(_gib(gib), derived("CUDA-graph estimate: a + b x layers on the GPU (an estimate)",
                                        f"{a:g} + {b:g} x {layers} = {gib:.2f} GiB", CUDAGRAPH_SOURCE, LLMD_V019))

    # --- blocks ------------------------------------------------------------------------------------------------
    def mla_block(self, kind: MLA, sparse: bool, hardware, kv_dtype: KVDtype | None) -> tuple[int, str, str]:
        """(tokens, why, source) of vLLM's default block for an MLA model on this GPU with this KV dtype."""
        gen = gpu_generation(hardware)
        if sparse:
            return 64, "sparse MLA (DeepSeek V3.2): FlashMLA-sparse kernel blocks of 64", SPARSE_SOURCE
        if not self.since((0, 18, 0)):
            if gen == "blackwell" and self.since((0, 15, 0)):
                if kind.qk_nope_head_dim == 128:
                    return 64, "Blackwell, v0.15-v0.17: FlashInfer MLA (qk_nope_head_dim 128) forced to 64", \
                        MLA_OLD_SOURCE
                return 128, "Blackwell, v0.15-v0.17: CUTLASS MLA (qk_nope_head_dim is not 128) forced to 128", \
                    MLA_OLD_SOURCE
            if gen == "blackwell" and self.since((0, 10, 1)):
                return 128, "Blackwell, v0.10.1-v0.14: CUTLASS MLA forced to 128", \
                    tag_source("v0.14.0", "vllm/platforms/cuda.py", "CUTLASS_MLA default on SM100, block 128")
            return 64, "v0.17 and earlier: FlashMLA forced to 64", MLA_OLD_SOURCE
        if gen == "hopper":
            if kv_dtype in (None, KVDtype.BF16, KVDtype.FP16):
                return 16, "Hopper, v0.18+: FLASH_ATTN_MLA (16-bit KV) takes 16", tag_source(
                    "v0.33.0", "vllm/v1/attention/backends/mla/flashattn_mla.py", "MultipleOf(16), "
                    "kv dtypes auto/fp16/bf16") + "; " + MLA_NEW_SOURCE
            return 64, f"Hopper, v0.18+: {kv_dtype.value} KV rules out FLASH_ATTN_MLA, FLASHMLA's kernel block is 64", \
                tag_source("v0.33.0", "vllm/v1/attention/backends/mla/flashmla.py", "[64]") + "; " + MLA_NEW_SOURCE
        if gen == "blackwell":
            return 32, "Blackwell, v0.18+: FLASHINFER_MLA takes [32, 64], the smallest is chosen", tag_source(
                "v0.33.0", "vllm/v1/attention/backends/mla/flashinfer_mla.py", "[32, 64]") + "; " + MLA_NEW_SOURCE
        return 64, ("GPU neither Hopper nor Blackwell by kvplan's rule (" + GPU_GENERATION_RULE + "): the "
                    "document gives no backend for it; kvplan keeps FlashMLA's 64"), MLA_OLD_SOURCE

    def block_size(self, model, given_tokens=None, hardware=None, kv_dtype=None):
        if given_tokens is not None:
            return super().block_size(model, given_tokens)
        hardware, kv_dtype = self._hardware_and_dtype(hardware, kv_dtype)
        kinds = self.kinds(model)
        sparse = sparse_attention(kinds)
        sizes, why, sources = {}, [], [BLOCK_SOURCE]
        for k, kind in kinds.items():
            if k is MLA:
                sizes[k], reason, src = self.mla_block(kind, sparse, hardware, kv_dtype)
                why.append(f"MLA {sizes[k]} ({reason})")
                sources.append(src)
            else:
                sizes[k] = self.block_tokens_table[k]
                why.append(f"{k.__name__} {sizes[k]}")
        block = max(sizes.values())
        return Tokens(block, default(f"{self.release}: the largest block any layer kind needs ({'; '.join(why)})",
                                     *sources))

    def spec_type(self, kind) -> str:
        spec = self.spec_of(kind)
        return f"sliding_window({kind.window})" if spec == "sliding_window" else spec

    def hybrid_block(self, given_block: int | None, default_block: int, mamba_page: int, attn_page_1tok: int,
                     mla: bool) -> tuple[int, int, str]:
        """(block, alignment, rule) for a model with attention and state layers: the attention block that makes a
        page as large as the state page, rounded to the alignment; a given smaller block is raised to it, a larger
        one kept (every release)."""
        if self.since((0, 20, 0)):
            align = max(default_block, given_block or default_block)
            if mla:
                align = max(align, 128)
            rule = "v0.20+: align = max(backend's smallest kernel block, block size)" + ("; MLA >= 128" if mla else "")
        else:
            align = 64 if mla and self.since((0, 12, 0)) else 16
            rule = f"v0.10-v0.19: align {align} ({'MLA' if mla else 'attention'})"
        target = align * _cdiv(mamba_page, align * attn_page_1tok)
        block = target if given_block is None or given_block < target else given_block
        return block, align, rule

    def config(self, model: ModelSpec, dtype: KVDtype, par: Parallelism, pool_bytes: int, max_model_len: int,
               max_num_batched_tokens: int, block_size: int | None = None, hardware=None) -> VllmConfig:
        results = [self._stage(model, dtype, par.tp, stage, pool_bytes, max_model_len, max_num_batched_tokens,
                               block_size, hardware) for stage in pipeline_stages(model.num_layers, par.pp)]
        return min(results, key=lambda r: r.num_blocks)

    def log_formula(self) -> str:
        """Which 'GPU KV cache size' formula this release prints: 'blocks' (v0.7-v0.8), 'groups' (v0.9-v0.20) or
        'concurrency' (v0.21+)."""
        if self.since((0, 21, 0)):
            return "concurrency"
        return "groups" if self.since((0, 9, 0)) else "blocks"

    def _logged_tokens(self, num_blocks: int, num_groups: int, block: int, late: int) -> int:
        return {"concurrency": late, "groups": num_blocks // num_groups * block,
                "blocks": num_blocks * block}[self.log_formula()]

    def _stage(self, model, dtype, tp, stage, pool_bytes, max_model_len, max_num_batched_tokens, block_size,
               hardware=None):
        kinds_per_layer = model.layer_kinds
        layers = [kinds_per_layer[i] for i in stage]
        default_block = int(self.block_size(model, None, hardware, dtype).value)
        block = block_size or default_block
        spec = {id(k): self.spec_type(k) for kinds in layers for k in kinds}
        types = set(spec.values())
        attn_kinds = [k for kinds in layers for k in kinds if spec[id(k)] != "mamba"]
        mamba_kinds = [k for kinds in layers for k in kinds if spec[id(k)] == "mamba"]
        padding_fraction = 0.0

        if types == {"full"}:
            # One group (uniform or UniformTypeKVCacheSpecs): a block holds every layer's page.
            page_total = sum(k.cache_bytes_per_token(dtype, tp) * block for kinds in layers for k in kinds)
            num_blocks = pool_bytes // page_total if page_total else 0
            blocks_per_request = _cdiv(max_model_len, block)
            max_conc = num_blocks / blocks_per_request
            needed = blocks_per_request * page_total
            late = int(max_conc * max_model_len)
            available = pool_bytes - page_total if self.since((0, 29, 0)) else pool_bytes
            return VllmConfig(block, num_blocks, 1, len(layers), 0, page_total, True, num_blocks * block,
                              late, max_conc, max_model_len, blocks_per_request, needed, 0.0,
                              self._logged_tokens(num_blocks, 1, block, late), available, block_size)

        # Hybrid: every layer's page is unified to one size.
        attn_page_1tok = max((k.cache_bytes_per_token(dtype, tp) for k in attn_kinds), default=0)
        if mamba_kinds:
            mamba_page = max(k.state_bytes(tp) for k in mamba_kinds)
            if attn_page_1tok:
                block, _, _ = self.hybrid_block(block_size, default_block, mamba_page, attn_page_1tok,
                                                any(type(k) is MLA for k in attn_kinds))
            page = block * attn_page_1tok if attn_page_1tok else mamba_page
            padding_fraction = page / mamba_page - 1 if mamba_page else 0.0
        else:
            page = block * attn_page_1tok

        counts = Counter(spec[id(k)] for kinds in layers for k in kinds)
        smallest, largest = min(counts.values()), max(counts.values())
        group_size = largest if largest < 1.5 * smallest else smallest
        groups = {t: _cdiv(n, group_size) for t, n in counts.items()}
        num_groups = sum(groups.values())
        padding_layers = num_groups * group_size - sum(counts.values())
        num_blocks = pool_bytes // page // group_size

        def max_usage(spec_type: str) -> int:
            if spec_type == "full":
                return _cdiv(max_model_len, block) * page
            if spec_type == "mamba":
                return page  # mamba_cache_mode "none": one page (no speculative blocks)
            window = int(spec_type.split("(")[1].rstrip(")"))
            return (_cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block) + 1) * page

        per_group_usage = sum(max_usage(t) * g for t, g in groups.items())
        blocks_per_request = _cdiv(group_size * per_group_usage, page * group_size)
        max_conc = num_blocks / blocks_per_request if blocks_per_request else 0.0
        first_type = spec[id(layers[0][0])]
        if self.since((0, 19, 0)):
            # group_size x page x blocks over every group: padding layers are counted.
            needed = group_size * page * sum(_cdiv(max_usage(t), page) * g for t, g in groups.items())
        elif self.since((0, 14, 0)):
            # group_size x page x the first group's blocks (groups are built in layer order).
            needed = group_size * page * _cdiv(max_usage(first_type), page)
        else:
            needed = sum(max_usage(t) * n for t, n in counts.items())   # real layers only
        available = pool_bytes - group_size * page if self.since((0, 29, 0)) else pool_bytes
        tokens = num_blocks // num_groups * block
        late = int(max_conc * max_model_len)
        return VllmConfig(block, num_blocks, num_groups, group_size, padding_layers, page, False, tokens,
                          late, max_conc, max_model_len, blocks_per_request, needed, padding_fraction,
                          self._logged_tokens(num_blocks, num_groups, block, late), available, block_size)

    def _fit_rule(self, uniform: bool) -> str:
        if uniform:
            rule = "blocks for max_model_len x page bytes of every layer"
        elif self.since((0, 19, 0)):
            rule = "group_size x page x blocks summed over every KV cache group (padding layers counted)"
        elif self.since((0, 14, 0)):
            rule = "group_size x page x blocks of the first KV cache group only"
        else:
            rule = "sum over real layers of each spec's max memory usage (no padding layers)"
        if self.since((0, 29, 0)):
            rule += "; compared with the pool less one block (the null block)"
        return f"_check_enough_kv_cache_memory, {self.release}: {rule}"

    def report(self, scenario, model, par, pool_bytes, block):
        mml = scenario.max_model_len or model.max_position_embeddings or scenario.context_tokens
        mnbt, _ = self.batch_limits_for(scenario)
        cfg = self.config(model, scenario.kv_dtype, par, pool_bytes, mml, int(mnbt.value), scenario.block_size,
                          scenario.hardware)
        src = (SOURCE,)
        mml_v = Tokens(mml, given("--max-model-len") if scenario.max_model_len else
                       default("the model's max_position_embeddings"))
        num_blocks = Count(cfg.num_blocks, derived(
            "min over pipeline workers of pool // page bytes (// layers per group for hybrid models)",
            f"{pool_bytes:,} // {cfg.page_bytes_per_layer:,}" + (f" // {cfg.group_size}" if not cfg.uniform else "")
            + f" = {cfg.num_blocks:,}", *src))
        hybrid_rule = (HYBRID_NEW_SOURCE if self.since((0, 20, 0)) else HYBRID_OLD_SOURCE)
        if cfg.mamba_page_padding:
            block_formula = ("hybrid attention + state: align x cdiv(state page, align x attention page per token); "
                             "a smaller --block-size is raised to it" + (
                                 ", and from v0.20 a given --block-size is the alignment" if self.since((0, 20, 0))
                                 else ""))
            block_v = Tokens(cfg.block_size, derived(block_formula, f"{cfg.block_size}" + (
                f" (--block-size {cfg.given_block_size} given)" if cfg.given_block_size else ""), hybrid_rule, *src))
        else:
            block_v = Tokens(cfg.block_size, given("--block-size") if cfg.given_block_size else
                             self.block_size(model, None, scenario.hardware, scenario.kv_dtype).why)
        tokens_mid = Tokens(cfg.kv_cache_tokens, derived(
            "num_blocks // groups x block (the 'GPU KV cache size' line, v0.9.0-v0.20.x)",
            f"{cfg.num_blocks:,} // {cfg.num_groups} x {cfg.block_size} = {cfg.kv_cache_tokens:,}",
            LOG_SOURCES[(0, 9, 0)]))
        tokens_late = Tokens(cfg.kv_cache_tokens_late, derived(
            "int(max_concurrency x max_model_len) (the same line from v0.21.0)",
            f"int({cfg.max_concurrency:.4f} x {mml:,}) = {cfg.kv_cache_tokens_late:,}", LOG_SOURCES[(0, 21, 0)]))
        tokens = {"concurrency": tokens_late, "groups": tokens_mid}.get(self.log_formula()) or Tokens(
            cfg.kv_cache_tokens_logged, derived(
                "num_blocks x block (the 'GPU KV cache size' line, v0.7-v0.8)",
                f"{cfg.num_blocks:,} x {cfg.block_size} = {cfg.kv_cache_tokens_logged:,}", LOG_SOURCES[(0, 7, 3)]))
        conc = Ratio(cfg.max_concurrency, derived(
            "num_blocks / blocks one max_model_len request needs (its groups' max memory usage)",
            f"{cfg.num_blocks:,} / {cfg.blocks_per_request:,} = {cfg.max_concurrency:.4f}", *src))
        fit_src = _rule_of(FIT_SOURCES, self.version)
        needed = Bytes(cfg.needed_for_one_request_bytes, derived(
            self._fit_rule(cfg.uniform), f"{cfg.needed_for_one_request_bytes:,} B for {mml:,} tokens", fit_src))
        available = Bytes(cfg.fit_available_bytes, derived(
            "the KV pool" + (" less one block (the null block BlockPool holds back)" if self.since((0, 29, 0))
                             else ""),
            f"{pool_bytes:,}" + (f" - {pool_bytes - cfg.fit_available_bytes:,}" if self.since((0, 29, 0)) else "")
            + f" = {cfg.fit_available_bytes:,} B", fit_src))
        groups = Count(cfg.num_groups, derived("KV cache groups (hybrid: cdiv(layers of each spec, group size))",
                                               f"{cfg.num_groups} x {cfg.group_size} layers", *src))
        padding = Count(cfg.padding_layers, derived("groups x group size - layers", f"{cfg.padding_layers}", *src))
        fits = cfg.needed_for_one_request_bytes <= cfg.fit_available_bytes
        rows = (("num_blocks (min over workers)", num_blocks),
                ("vLLM's block size (tokens; hybrid: state-aligned)", block_v),
                ("KV cache groups", groups), ("layers per group", cfg.group_size), ("padding layers", padding),
                ("GPU KV cache size (log line), tokens", tokens),
                (f"Maximum concurrency for {mml:,} tokens per request", conc),
                ("KV needed for one max_model_len request", needed))
        data = {"num_blocks": num_blocks, "vllm_kv_cache_tokens": tokens,
                "vllm_kv_cache_tokens_v0_9_to_v0_20": tokens_mid,
                "vllm_kv_cache_tokens_late_versions": tokens_late, "vllm_max_concurrency": conc,
                "vllm_max_model_len": mml_v, "vllm_block_size": block_v, "vllm_kv_cache_groups": groups,
                "vllm_padding_layers": padding, "vllm_needed_for_one_max_len_request_bytes": needed,
                "vllm_fit_check_available_bytes": available, "vllm_fits_one_max_len_request": fits}
        notes, warnings = [], []
        if scenario.kv_pool_bytes is None:
            estimates = self.memory_estimates(scenario, model, par)
            notes.append("kvplan predicted this pool from vLLM's memory rules for the release "
                         "(docs/pool-prediction.md: checked against published memory profiles)" + (
                             "; estimates, on the safe side: " + "; ".join(estimates) if estimates else "")
                         + ". Give --kv-pool from the log's 'Available KV cache memory' to plan from vLLM's own "
                         "figure.")
        if not fits:
            warnings.append(f"vLLM would refuse to start: one {mml:,}-token request needs "
                         f"{cfg.needed_for_one_request_bytes / 2**30:.2f} GiB of KV but the check allows "
                         f"{cfg.fit_available_bytes / 2**30:.2f} GiB; lower --max-model-len.")
        if (scenario.kv_pool_bytes is None and scenario.runtime_reserve_bytes is None
                and self.since(GDN_GRAPH_TRANSIENT_SINCE) and GatedDeltaNet in self.kinds(model)):
            warnings.append("This pool may be optimistic by a few GiB per GPU: from v0.26 vLLM's CUDA-graph estimate "
                            "for a Gated DeltaNet hybrid also counts a profiling transient that grows with "
                            "max_num_batched_tokens (about 128 KiB a batched token reported), which kvplan's "
                            f"0.30 + 0.02 GiB a layer leaves out ({GDN_GRAPH_TRANSIENT_SOURCE}); give --kv-pool from "
                            "the log's 'Available KV cache memory', or lower --max-num-batched-tokens.")
        if cfg.padding_layers and self.since((0, 19, 0)):
            notes.append(f"From v0.19 vLLM's start-up check counts the {cfg.padding_layers} padding layer(s) of its "
                         "KV cache groups.")
        if not cfg.uniform:
            notes.append("Hybrid model: vLLM's 'GPU KV cache size' line is not capacity; read 'Maximum concurrency'.")
        if cfg.mamba_page_padding:
            notes.append(f"vLLM pads the linear-attention state page by {cfg.mamba_page_padding:.1%} to match "
                         f"the {cfg.block_size}-token attention block.")
        return EngineReport(f"vLLM v1 accounting ({self.release})", rows, data, tuple(notes), tuple(warnings))


    # --- launch flags (kvplan recommend --emit vllm) -------------------------------------------------------------
    def async_scheduling(self, requested: bool | None, pp: int = 1) -> tuple[bool, str]:
        """Whether this release schedules asynchronously (``ASYNC_SINCE``), and why: ``requested`` is
        --async-scheduling / --no-async-scheduling (None: the release's default, off before v0.14.0, and off in
        v0.14.x with pipeline parallelism). Turning it on is refused before ``ASYNC_SKIP_SINCE``."""
        from kvplan.errors import KvplanError

        if requested is False:
            return False, "off: --no-async-scheduling"
        if requested:
            if not self.since(ASYNC_SKIP_SINCE):
                raise KvplanError(f"--async-scheduling with {self.display_name}: kvplan models vLLM's async "
                                  f"scheduling from {release_text(ASYNC_SKIP_SINCE)} ({ASYNC_SKIP_SOURCE})",
                                  f"pin vllm>={release_text(ASYNC_SKIP_SINCE)}, or drop --async-scheduling")
            return True, "on: --async-scheduling"
        if not self.since(ASYNC_SINCE):
            return False, f"off: the default before {release_text(ASYNC_SINCE)} ({ASYNC_SOURCE})"
        if pp > 1 and not self.since(ASYNC_PP_UNTIL):
            return False, f"off: pipeline parallelism ({ASYNC_PP_SOURCE})"
        return True, f"on: the default from {release_text(ASYNC_SINCE)} ({ASYNC_SOURCE})"

    def simulation_scheduler(self, policy: str, victim: str, max_seqs: int, budget: int,
                             offload_threshold: float | None, reuse: bool, prefix_blocks: int, *,
                             async_scheduling: bool | None = None, pp: int = 1, speculative: tuple | None = None,
                             offload_bytes: int | None = None, long_prefill: tuple[int, bool, str] = (0, False, "")):
        """``kvplan simulate``'s scheduler for this release: vLLM V1's (``kvplan.engines.vllm_scheduler``) from
        ``V1_SINCE``, else None (the caller runs the rule book: V0's watermark and swap space). Refuses what V1
        cannot do: swap, and the offloading connector (not modelled). ``async_scheduling``: --async-scheduling /
        --no-async-scheduling, None for the release's default (``async_scheduling``). ``speculative``: simulate's
        --speculative (K, acceptance), whose slots each running request holds (``speculative_slots``).
        ``offload_bytes``: --kv-offloading-size in bytes (the native CPU offloading connector, from
        ``OFFLOAD_SINCE``; None: off). ``long_prefill``: ``prefill_cap``'s (cap, alone rule, why)."""
        from kvplan.errors import KvplanError

        if not self.since(V1_SINCE):
            if async_scheduling:
                raise KvplanError(f"--async-scheduling with {self.display_name}: it is vLLM V1's, which starts at "
                                  f"{release_text(V1_SINCE)}", f"pin vllm>={release_text(ASYNC_SKIP_SINCE)}")
            if offload_bytes is not None:
                raise KvplanError(f"--kv-offloading-size with {self.display_name}: native KV offloading works from "
                                  f"{release_text(OFFLOAD_SINCE)} ({OFFLOAD_SIZE_SOURCE})",
                                  f"pin vllm>={release_text(OFFLOAD_SINCE)}, or drop --kv-offloading-size")
            return None
        on, why = self.async_scheduling(async_scheduling, pp)
        if policy != "recompute":
            raise KvplanError(f"--policy {policy} swaps, and vLLM V1 ({release_text(V1_SINCE)} and later) has no swap "
                              "space: it preempts by recompute", f"drop --policy, or pin vllm=={release_text(OLDEST)} "
                              "(V0, which swaps), or use --engine neutral for the swap what-if")
        if offload_threshold is not None:
            raise KvplanError("--offload-threshold with --engine vllm: vLLM has no proactive offload above an "
                              "occupancy; its native CPU offloading connector writes every full block through",
                              "use --kv-offloading-size GiB for vLLM's connector, or --engine neutral for the "
                              "threshold what-if")
        if offload_bytes is not None:
            if not self.since(OFFLOAD_SINCE):
                raise KvplanError(f"--kv-offloading-size with {self.display_name}: native KV offloading works from "
                                  f"{release_text(OFFLOAD_SINCE)} ({OFFLOAD_SIZE_SOURCE})",
                                  f"pin vllm>={release_text(OFFLOAD_SINCE)}, or drop --kv-offloading-size")
            if speculative is not None:
                raise KvplanError("--kv-offloading-size with --speculative: kvplan does not model vLLM's offloading "
                                  "with speculative decoding's slots", "drop one of them")
        cap, cap_alone, cap_why = long_prefill
        if cap and offload_bytes is not None:
            raise KvplanError("--long-prefill-token-threshold with --kv-offloading-size: kvplan does not model the "
                              "capped chunks with vLLM's offloading connector", "drop one of them")
        if cap and speculative is not None and cap <= speculative[0]:
            raise KvplanError(f"--long-prefill-token-threshold {cap:,} with --speculative: vLLM caps a decoding "
                              f"request's 1 + {speculative[0]} tokens too (scheduler.py: num_tokens_with_spec), which "
                              "kvplan does not model", f"give a threshold above {speculative[0]}, or drop one of them")
        if cap and victim != "newest":
            raise KvplanError(f"--long-prefill-token-threshold with --victim {victim}: kvplan models the capped chunks "
                              "with vLLM's own victim only (the newest)", "drop --victim")
        if max_seqs > budget:
            raise KvplanError(f"max_num_seqs {max_seqs:,} is more than max_num_batched_tokens {budget:,}, which vLLM "
                              "refuses at start-up", "lower --max-batch, or raise --max-num-batched-tokens")
        from kvplan.engines.vllm_scheduler import V1Scheduler

        slots, slots_why, _ = self.speculative_slots(speculative[0]) if speculative is not None else (0, "", "")
        return V1Scheduler(victim, max_seqs, budget, reuse, prefix_blocks, full_isl=self.since(FULL_ISL_SINCE),
                           hashless_front=self.since(HASHLESS_FRONT_SINCE), async_scheduling=on, async_why=why,
                           spec_slots=slots, spec_why=slots_why, offload_bytes=offload_bytes,
                           offload_why=f"{offload_bytes / 2**30:g} GiB (--kv-offloading-size, "
                                       f"{release_text(OFFLOAD_SINCE)}+)" if offload_bytes is not None else "",
                           prefill_cap=cap, cap_alone=cap_alone, cap_why=cap_why)

    def prefill_cap(self, threshold: int | None, partial: int | None, long_partial: int | None,
                    max_model_len: int | None) -> tuple[int, bool, str]:
        """simulate's --long-prefill-token-threshold for this release: (the cap in tokens, 0 for none; whether it
        holds only while more than one request runs or waits; why), or a refusal where the release does not take
        the value (the constants above, with their sources). --max-num-partial-prefills /
        --max-long-partial-prefills: only 1 (V1 has no concurrent partial prefills), and only through v0.26."""
        from kvplan.errors import KvplanError

        for flag, value in (("--max-num-partial-prefills", partial), ("--max-long-partial-prefills", long_partial)):
            if value is None:
                continue
            if self.since(PARTIAL_PREFILLS_UNTIL):
                raise KvplanError(f"{flag} with {self.display_name}: the flag is gone from "
                                  f"{release_text(PARTIAL_PREFILLS_UNTIL)} ({PARTIAL_PREFILLS_SOURCE})",
                                  f"drop {flag}")
            if value != 1:
                raise KvplanError(f"{flag} {value} with --engine vllm: vLLM V1 has no concurrent partial prefills "
                                  f"(1 only; another value falls back to V0 or is refused: {PARTIAL_PREFILLS_SOURCE})",
                                  f"drop {flag}, or use --long-prefill-token-threshold to cap each chunk")
        if not threshold:
            return 0, False, ""
        if not self.since(LONG_PREFILL_SINCE):
            raise KvplanError(f"--long-prefill-token-threshold with {self.display_name}: vLLM V1 caps a prefill "
                              f"chunk from {release_text(LONG_PREFILL_SINCE)}, the first release kvplan read that does "
                              f"({LONG_PREFILL_SOURCE})", f"pin vllm>={release_text(LONG_PREFILL_SINCE)}, or drop "
                              "--long-prefill-token-threshold")
        if max_model_len is not None and threshold > max_model_len and self.since(LONG_PREFILL_MAX_LEN_SINCE):
            raise KvplanError(f"--long-prefill-token-threshold {threshold:,} is more than max_model_len "
                              f"{max_model_len:,}, which vLLM refuses at start-up ({LONG_PREFILL_MAX_LEN_SOURCE})",
                              f"give at most {max_model_len:,}, or 0 for no cap")
        alone = self.since(LONG_PREFILL_ALONE_SINCE)
        why = (f"each prefill chunk at most {threshold:,} tokens (long_prefill_token_threshold, "
               f"{release_text(LONG_PREFILL_SINCE)}+)"
               + (f", not while one request runs or waits alone ({release_text(LONG_PREFILL_ALONE_SINCE)}+)"
                  if alone else f", even alone (before {release_text(LONG_PREFILL_ALONE_SINCE)})"))
        return threshold, alone, why

    def speculative_slots(self, k: int) -> tuple[int, str, str]:
        """KV slots a decoding request holds past its context with --speculative K (MTP drafting), why, and the
        source: vLLM
        V1 allocates its K draft tokens and, from v0.9.0, K lookahead slots more (``SPEC_SLOTS_SOURCE``); a release
        before V1 reserves none kvplan models."""
        if not self.since(V1_SINCE):
            return 0, "", ""
        if self.since(SPEC_LOOKAHEAD_SINCE):
            return 2 * k, (f"{k} draft + {k} lookahead slots per running request (allocate_slots, MTP in use_eagle "
                           f"from {release_text(SPEC_LOOKAHEAD_SINCE)})"), SPEC_SLOTS_SOURCE
        return k, (f"{k} draft slots per running request (allocate_slots; MTP lookahead slots from "
                   f"{release_text(SPEC_LOOKAHEAD_SINCE)})"), SPEC_SLOTS_SOURCE

    def host_tier_problem(self) -> tuple[str, str] | None:
        """Before OFFLOAD_SINCE vLLM has no working DRAM tier, and its V1 engine (the one kvplan plans) has no swap:
        it preempts by recompute only, so a recommendation must not say "offload on" or "swap first"."""
        if self.since(OFFLOAD_SINCE):
            return None
        from kvplan.engines.scheduling import POLICY_SOURCE

        if not self.since(V1_SINCE):   # V0: no offloading tier, but a swap space of its own (``swap_space``)
            return (f"{self.display_name} has no native KV offloading (--kv-offloading-size with the native backend "
                    f"starts from {release_text(OFFLOAD_SINCE)}: {OFFLOAD_SIZE_SOURCE}); its V0 engine swaps a "
                    f"preempted request to the CPU swap space only with --preemption-mode swap ({V0_SWAP_SOURCE})",
                    f"pin vllm>={release_text(OFFLOAD_SINCE)} for native KV offloading, or use SGLang's "
                    "--enable-hierarchical-cache (HiCache)")
        return (f"{self.display_name} has no working native KV offloading (--kv-offloading-size with the native "
                f"backend starts from {release_text(OFFLOAD_SINCE)}: {OFFLOAD_SIZE_SOURCE}) and no swap: a "
                f"preempted request is recomputed ({POLICY_SOURCE})",
                f"pin vllm>={release_text(OFFLOAD_SINCE)} for native KV offloading, or use SGLang's "
                "--enable-hierarchical-cache (HiCache)")

    def swap_space(self) -> str | None:
        """vLLM V0 (before ``V1_SINCE``) swaps a preempted request when started with --preemption-mode swap, to its
        --swap-space (GiB per GPU); V1 has no swap (``NO_SWAP_SOURCE``)."""
        return None if self.since(V1_SINCE) else V0_SWAP_SOURCE

    def pool_flags(self, plan, fraction: str) -> list[Flag]:
        """A --kv-pool given: --kv-cache-memory-bytes from v0.10.2 (vLLM then ignores --gpu-memory-utilization, so
        that flag is not printed); before it, the fraction that leaves the pool (``Engine.pool_flags``)."""
        if self.version is not None and self.version < KV_MEMORY_SINCE:
            return super().pool_flags(plan, fraction)
        pool = plan.scenario.kv_pool_bytes
        return [Flag("--kv-cache-memory-bytes", str(pool), f"the --kv-pool given, {pool:,} B per GPU: vLLM sizes its "
                     "KV cache to it and ignores --gpu-memory-utilization", KV_MEMORY_SINCE, KV_MEMORY_SOURCE)]

    def launch_command(self, plan) -> LaunchCommand:
        """``vllm serve`` with the recommendation's layout, KV dtype, batch, memory fraction, length and DRAM tier.
        Each flag names the first release that has it as printed; a pinned older release drops it (said why)."""
        s, par = plan.scenario, plan.scenario.parallelism
        flags: list[Flag] = []
        if par.tp > 1:
            flags.append(Flag("--tensor-parallel-size", str(par.tp), "the layout's TP degree"))
        if par.pp > 1:
            flags.append(Flag("--pipeline-parallel-size", str(par.pp), "the layout's PP degree"))
        if par.dp > 1:
            flags.append(Flag("--data-parallel-size", str(par.dp), f"{par.dp} replicas, each with its own pool",
                              (0, 8, 3), "V1 data parallelism, present in v0.8.3 (github.com/vllm-project/vllm/"
                              "issues/18702)"))
        notes = []
        if par.ep and par.ep > 1:
            if par.ep == par.tp * par.dp:
                flags.append(Flag("--enable-expert-parallel", None, f"EP {par.ep} = TP x DP: vLLM spans the experts "
                                  "over every TP x DP rank", (0, 8, 0),
                                  "PR #14305, merged 2025-03-06, first in v0.8.0 (github.com/vllm-project/vllm/"
                                  "pull/14305)"))
            else:
                notes.append(f"EP {par.ep} is not TP x DP = {par.tp * par.dp}: vLLM's expert parallelism is always "
                             "TP x DP, so this layout cannot be launched as planned")
        flags += self.sizing_flags(plan, "vLLM", VLLM_KV_FLAGS, "--max-num-seqs", "--gpu-memory-utilization",
                                   "--max-model-len", "--block-size", "--max-num-batched-tokens")
        if plan.offload:
            gib = max(1, int(plan.offload_bytes_per_replica.value // 2**30))
            why = ("the DRAM tier, GiB for the whole instance (all TP x PP ranks): preempted requests' blocks are "
                   "reloaded from it instead of recomputed")
            # Both flags are CacheConfig fields from v0.11.1 (v0.11.0 has neither), but through v0.13.0 the native
            # backend passes kv_connector_extra_config num_cpu_blocks 0, which CPUOffloadingSpec refuses
            # ("num_cpu_blocks must be specified"). From v0.14.0 it passes cpu_bytes_to_use = size x 2^30, which
            # CPUOffloadingSpec divides by the block bytes of all world_size ranks: GiB for the instance.
            flags.append(Flag("--kv-offloading-size", str(gib), why, OFFLOAD_SINCE, OFFLOAD_SIZE_SOURCE))
            flags.append(Flag("--kv-offloading-backend", "native", "vLLM's own CPU offloading connector",
                              OFFLOAD_SINCE, OFFLOAD_BACKEND_SOURCE))
        if plan.preemption_mode == "swap" and not self.since(V1_SINCE):
            # V0's swap space (per GPU), which --preemption-mode swap fills with a preempted request's blocks
            gib = max(1, int(plan.offload_bytes_per_gpu.value // 2**30))
            flags.append(Flag("--preemption-mode", "swap", "V0 recomputes a single-sequence request unless told to "
                              "swap, and a swap is cheaper here (see preemption)", None, V0_SWAP_SOURCE))
            flags.append(Flag("--swap-space", str(gib), "the CPU swap space per GPU, room to park every running "
                              "request once (V0's default is 4 GiB)", None, V0_SWAP_SOURCE))
        if self.since(V1_SINCE):
            notes.append("prefix caching is on by default in vLLM V1; no flag is needed")
        else:
            flags.append(Flag("--enable-prefix-caching", None, "the prefix cache row: on (V0's default is off)", None,
                              V0_PREFIX_SOURCE))
        kept, omitted = keep_flags(flags, self.version, "vLLM")
        return LaunchCommand("vllm" if self.version is None else self.display_name,
                             f"vllm serve {hub_model_id(s.model)}", kept, omitted, tuple(notes))


ENGINE = VllmEngine(NEWEST)
_PINNED: dict[Release, VllmEngine] = {}


def for_release(version: Release) -> VllmEngine:
    """The adapter for one vLLM release (docs/engine-rules-by-release.md covers v0.7.3 .. v0.33.0)."""
    return pinned(VllmEngine, _PINNED, version, OLDEST, NEWEST, "vllm", "vLLM")


def vllm_config(model, dtype, par, pool_bytes, max_model_len, max_num_batched_tokens, block_size=None,
                hardware=None, engine: VllmEngine | None = None) -> VllmConfig:
    """vLLM's num_blocks, logged token count and maximum concurrency for a pool on each GPU (newest release unless
    ``engine`` pins one)."""
    return (engine or ENGINE).config(model, dtype, par, pool_bytes, max_model_len, max_num_batched_tokens,
                                     block_size, hardware)
