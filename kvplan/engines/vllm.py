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
    gpu_generation,
    hub_model_id,
    keep_flags,
    known_other_gpu,
    pinned,
    release_text,
    rule_span,
    sparse_attention,
)
from kvplan.specs.dtypes import KVDtype
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
# Releases where a rule kvplan models changes (each named where it is used below).
BOUNDARIES: tuple[Release, ...] = (OLDEST, (0, 9, 0), (0, 10, 1), (0, 11, 0), (0, 12, 0), (0, 14, 0), (0, 15, 0),
                                   (0, 18, 0), (0, 19, 0), (0, 20, 0), (0, 21, 0), (0, 29, 0))


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


# --- kvplan simulate's scheduler ----------------------------------------------------------------------------------
# V1 is the default engine from v0.8.0 (vllm/envs.py: VLLM_USE_V1 defaults to "1"); before it V0's scheduler ran
# (vllm/core/scheduler.py: watermark, swap space), which is the rule book kvplan's neutral engine follows.
V1_SINCE: Release = (0, 8, 0)
V1_SOURCE = blob("v0.8.0", "vllm/envs.py", "VLLM_USE_V1 defaults to 1: the V1 engine and its scheduler "
                 "(vllm/v1/core/sched/scheduler.py) serve by default")
NO_SWAP_SOURCE = ("vLLM V1 preempts by recompute only: no swap space (vllm/v1/core/sched/scheduler.py "
                  "_preempt_request frees the blocks; docs.vllm.ai configuration/optimization 'Preemption')")
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

    def memory_fraction(self, scenario, par):
        if scenario.gpu_memory_utilization is not None:
            return Number(scenario.gpu_memory_utilization, given("--gpu-memory-utilization"))
        if self.since((0, 20, 0)):
            return Number(DEFAULT_GPU_MEMORY_UTILIZATION, default(
                "vLLM's gpu_memory_utilization, 0.92 from v0.20.0 (0.9 before)", UTILIZATION_SOURCE))
        return Number(OLD_GPU_MEMORY_UTILIZATION, default(
            "vLLM's gpu_memory_utilization, 0.9 through v0.19.x", OLD_UTILIZATION_SOURCE))

    def runtime_reserve(self, scenario):
        reserve = super().runtime_reserve(scenario)
        if scenario.runtime_reserve_bytes is not None:
            return reserve
        if self.since((0, 20, 0)):
            why = default("1 GiB runtime reserve, where kvplan counts the CUDA-graph estimate vLLM v0.20+ subtracts "
                          "from the KV budget (measured at start-up; give --runtime-reserve from the log)",
                          CUDAGRAPH_SOURCE, RUNTIME_RESERVE_SOURCE)
        else:
            why = default("1 GiB runtime reserve (vLLM before v0.20 does not subtract a CUDA-graph estimate: "
                          "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is '0' in v0.18-v0.19 and absent before)",
                          tag_source("v0.19.0", "vllm/envs.py"), RUNTIME_RESERVE_SOURCE)
        return Bytes(int(reserve.value), why)

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
        if not fits:
            warnings.append(f"vLLM would refuse to start: one {mml:,}-token request needs "
                         f"{cfg.needed_for_one_request_bytes / 2**30:.2f} GiB of KV but the check allows "
                         f"{cfg.fit_available_bytes / 2**30:.2f} GiB; lower --max-model-len.")
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
    def simulation_scheduler(self, policy: str, victim: str, max_seqs: int, budget: int,
                             offload_threshold: float | None, reuse: bool, prefix_blocks: int):
        """``kvplan simulate``'s scheduler for this release: vLLM V1's (``kvplan.engines.vllm_scheduler``) from
        ``V1_SINCE``, else None (the caller runs the rule book: V0's watermark and swap space). Refuses what V1
        cannot do: swap, and the offloading connector (not modelled)."""
        from kvplan.errors import KvplanError

        if not self.since(V1_SINCE):
            return None
        if policy != "recompute":
            raise KvplanError(f"--policy {policy} swaps, and vLLM V1 ({release_text(V1_SINCE)} and later) has no swap "
                              "space: it preempts by recompute", f"drop --policy, or pin vllm=={release_text(OLDEST)} "
                              "(V0, which swaps), or use --engine neutral for the swap what-if")
        if offload_threshold is not None:
            raise KvplanError("--offload-threshold with --engine vllm: kvplan does not model vLLM's KV offloading "
                              "connector yet", "drop --offload-threshold, or use --engine neutral for the offload "
                              "what-if")
        if max_seqs > budget:
            raise KvplanError(f"max_num_seqs {max_seqs:,} is more than max_num_batched_tokens {budget:,}, which vLLM "
                              "refuses at start-up", "lower --max-batch, or raise --max-num-batched-tokens")
        from kvplan.engines.vllm_scheduler import V1Scheduler

        return V1Scheduler(victim, max_seqs, budget, reuse, prefix_blocks)

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
                                   "--max-model-len", "--block-size")
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
        notes.append("prefix caching is on by default in vLLM V1; no flag is needed")
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
