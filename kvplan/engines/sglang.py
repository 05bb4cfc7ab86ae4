"""SGLang: the token pool (``max_total_num_tokens``), its cell size per token, page size and default memory fraction,
by release.

``SglangEngine()`` follows the newest release docs/engine-rules-by-release.md covers (v0.5.23);
``SglangEngine((0, 5, 3))`` (``--engine sglang==0.5.3``) an older one where a modelled rule differs. SGLang wheels
carry no commit, so rules cite the release tag, e.g.
https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/overrides.py. The rest-memory and
rounding-to-pages rules (``model_runner_kv_cache_mixin.py``) were read at commit 001ccef0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import cast

from kvplan.engines import budget as budget_mod
from kvplan.engines.base import (
    GPU_GENERATION_RULE,
    Engine,
    EngineReport,
    Flag,
    LaunchCommand,
    Release,
    given_reserve,
    gpu_generation,
    hub_model_id,
    keep_flags,
    pinned,
    release_text,
    rule_span,
    sparse_attention,
)
from kvplan.errors import KvplanError
from kvplan.specs.dtypes import WEIGHT_BYTES_PER_PARAM, KVDtype
from kvplan.specs.layers import (
    MLA,
    FullAttention,
    GatedDeltaNet,
    Mamba2,
    RecurrentState,
    SlidingWindowAttention,
    SparseIndexer,
)
from kvplan.specs.model import ModelSpec
from kvplan.specs.parallel import Parallelism, pipeline_stages
from kvplan.specs.values import Bytes, Count, Number, TokenBytes, Tokens, default, derived, given

# kvplan's KV dtype -> SGLang's --kv-cache-dtype (None: "auto"); fp8_ds_mla is SGLang's fp8_e4m3 on an MLA/NSA model.
# The newest spelling; ``SglangEngine.kv_flags`` gives a release's own (nvfp4 was fp4_e2m1 before v0.5.16).
SGLANG_KV_FLAGS = {KVDtype.BF16: None, KVDtype.FP16: None, KVDtype.FP8: "fp8_e4m3", KVDtype.NVFP4: "nvfp4",
                   KVDtype.FP8_DS_MLA: "fp8_e4m3"}
# --kv-cache-dtype choices by release (server_args.py; v0.5.23 arg_groups/fields/model.py): v0.4.6-v0.5.4 auto,
# fp8_e5m2, fp8_e4m3 (+ bf16, bfloat16 from v0.5.4); v0.5.5 adds fp4_e2m1 (PR #10078: FP4 E2M1 values, one
# 1-byte scale per 16, 4.5 bits, the MLA pool only until v0.5.6's MHATokenToKVPoolFP4); v0.5.16 adds nvfp4 and
# fp4_mx_block16 (the old fp4_e2m1 recipe renamed; fp4_e2m1 stays a choice through v0.5.20 but
# mem_cache/kv_cache_dtype.py raises "deprecated. Use --kv-cache-dtype=fp4_mx_block16"); v0.5.21 drops fp4_e2m1.
FP4_E2M1_SINCE, NVFP4_SINCE = (0, 5, 5), (0, 5, 16)
FP4_E2M1_SOURCE = ("sgl-project/sglang @v0.5.5 python/sglang/srt/server_args.py (--kv-cache-dtype choices gain "
                   "fp4_e2m1; v0.5.4 has auto, fp8_e5m2, fp8_e4m3, bf16, bfloat16)")
# --max-running-requests under DP attention is the whole server's: each attention-DP rank takes
# max_running_requests // dp_size (v0.4.6-v0.5.3 managers/tp_worker.py TpModelWorker.__init__; v0.5.7
# model_executor/model_runner.py; v0.5.23 mem_cache/kv_cache_configurator.py resolve_max_num_reqs,
# max_running_requests // attn_dp_size). Plain --dp-size replicas each keep the whole value (divisor 1).
DP_RUNNING_SOURCE = ("sgl-project/sglang @v0.4.6 python/sglang/srt/managers/tp_worker.py (max_running_requests // "
                     "dp_size with --enable-dp-attention) .. @v0.5.23 python/sglang/srt/mem_cache/"
                     "kv_cache_configurator.py (resolve_max_num_reqs: max_running_requests // attn_dp_size)")
# FP4 for a non-MLA (MHA/GQA) cache: v0.5.5 sizes its cell at element_size(float4_e2m1fn_x2), a byte per value, and
# stores without quantizing; MHATokenToKVPoolFP4 arrives in v0.5.6 (mem_cache/memory_pool.py, model_runner.py).
FP4_MHA_SINCE = (0, 5, 6)
FP4_MHA_SOURCE = ("sgl-project/sglang @v0.5.6 python/sglang/srt/mem_cache/memory_pool.py MHATokenToKVPoolFP4 "
                  "(absent from v0.5.5, whose model_runner.py profile_max_num_token counts 1 byte per value)")
PP_SIZE_SINCE = (0, 4, 7)
PP_SIZE_SOURCE = ("sgl-project/sglang @v0.4.7 python/sglang/srt/server_args.py (--pipeline-parallel-size / "
                  "--pp-size; v0.4.6 has no pipeline parallelism flag)")
HICACHE_RATIO = 2.0
HICACHE_SOURCE = ("--enable-hierarchical-cache and --hicache-ratio (host pool / device pool, > 1): "
                  "sgl-project/sglang @v0.4.6 python/sglang/srt/server_args.py, and every release to v0.5.23; "
                  "docs.sglang.io/advanced_features/hicache_best_practices.html")
# DeepSeek-V3/R1's shared expert inside the fused MoE kernel, on by default in every release read:
# determine_n_share_experts_fusion / determine_num_fused_shared_experts in python/sglang/srt/models/deepseek_v2.py.
SHARED_FUSION_SOURCE = (
    "sgl-project/sglang python/sglang/srt/models/deepseek_v2.py: v0.4.6 determine_n_share_experts_fusion (on for "
    "DeepseekV3ForCausalLM, 256 routed experts, SM90+, without DeepEP), v0.4.7 determine_num_fused_shared_experts "
    "(on unless --disable-shared-experts-fusion, EP MoE or DeepEP), v0.5.7 and v0.5.23 the same check (NVIDIA SM80+, "
    "n_shared_experts 1, off under expert parallelism on NVIDIA); v0.5.7 server_args.py sets flashinfer_trtllm MoE "
    "(and so no fusion) for DeepSeek fp8/fp4 on SM100 (PR #4918 introduced the fusion)")
COMMIT = "001ccef0"
SOURCE = (f"sgl-project/sglang @{COMMIT}: python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py "
          "(https://github.com/sgl-project/sglang)")
FRACTION_SOURCE = ("sgl-project/sglang @v0.5.2 python/sglang/srt/server_args.py (PR #7054, v0.4.8-v0.5.2): default "
                   "mem_fraction_static = round((GPU memory - reserved) / GPU memory, 3), reserved bucketed by GPU "
                   "size: < 35 GiB 2.8 + ps/10, < 90 GiB 9.5 + ps/2, < 160 GiB 12 + ps/2, else 32 (ps = TP x PP)")
# v0.4.8-v0.5.2 add to that reserve 2 GiB with speculative decoding ("draft model and larger cuda graph buffers"; 6 GiB
# for v0.5.2's STANDALONE algorithm, a separate draft LM) and 4 GiB with DP attention (server_args.py __post_init__,
# read in the v0.4.8 and v0.5.2 wheels).
SPEC_RESERVE_GIB, DP_ATTENTION_RESERVE_GIB = 2.0, 4.0
RESERVE_EXTRAS_SOURCE = ("sgl-project/sglang @v0.4.8 and @v0.5.2 python/sglang/srt/server_args.py (reserved_mem += "
                         "2 GiB with a speculative algorithm, += 4 GiB with --enable-dp-attention)")
# v0.4.6 and v0.4.7 had no reserve: fixed fractions by parallel size on GPUs up to 81,920 MiB (nvidia-smi's total),
# 0.79 / 0.81 / 0.85 / 0.87 / 0.88 at >= 16 / >= 8 / >= 4 / >= 2 / 1 (v0.4.6: TP, it has no PP; v0.4.7: TP x PP).
# Above 81,920 MiB v0.4.6 keeps 13 GiB free, (GPU - 13 GiB) / GPU, unrounded; v0.4.7 starts from 0.88 and takes
# 0.79 on a CUDA GPU above 180,000 MiB, else above 96 GiB min(f + 48 GiB x (1 - f) / GPU, (GPU - 18 GiB) / GPU)
# (20 GiB with speculative decoding), and x 0.95 at or below 96 GiB with speculative decoding (read in the v0.4.6
# and v0.4.7 wheels).
FIXED_FRACTIONS = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
FIXED_FRACTION_SOURCE = ("sgl-project/sglang @v0.4.6 and @v0.4.7 python/sglang/srt/server_args.py (__post_init__: "
                         "mem_fraction_static by tensor (v0.4.7: tensor x pipeline) parallel size up to 81,920 MiB; "
                         "the large-GPU branch)")

# --- releases ----------------------------------------------------------------------------------------------------
OLDEST, NEWEST = (0, 4, 6), (0, 5, 23)
RELEASES = (OLDEST, NEWEST)
# Releases where a rule kvplan models changes: 0.4.7 the fixed fractions by TP x PP and the large-GPU rule; 0.4.8
# the reserve buckets; 0.5.3 those buckets replaced, V3.2 cell
# without the indexer; 0.5.4 trtllm_mla pages on Blackwell, the indexer in the cell; 0.5.7 trtllm_mha pages on
# Blackwell; 0.5.10 prefill CUDA graphs by default and a 4 GiB speculative reserve; 0.5.14 no speculative reserve;
# 0.5.15 breakable prefill graphs; 0.5.17 the V3.2 cell at the pool's 656 B, prefill graphs under DP attention and
# DSA; 0.5.18 prefill graphs for MLA; 0.5.23 trtllm_mha also keeps 128-token pages. Also: 0.5.0 --moe-a2a-backend
# (MOE_A2A_SINCE); 0.5.2 HiCache's write_through default (sglang_scheduler.WRITE_THROUGH_SINCE); 0.5.5 fp4_e2m1 KV
# and the small-GPU buckets; 0.5.6 fp4 KV under MHA and HiCache's padding page; 0.5.16 nvfp4 KV; 0.5.20 the
# small-GPU buckets again; 0.5.22 --attn-dp-size in place of --enable-dp-attention (launch_command).
BOUNDARIES: tuple[Release, ...] = (OLDEST, (0, 4, 7), (0, 4, 8), (0, 5, 0), (0, 5, 2), (0, 5, 3), (0, 5, 4),
                                   (0, 5, 5), (0, 5, 6), (0, 5, 7), (0, 5, 10), (0, 5, 14), (0, 5, 15), (0, 5, 16),
                                   (0, 5, 17), (0, 5, 18), (0, 5, 20), (0, 5, 22), (0, 5, 23))


def tag_source(tag: str, path: str, what: str = "") -> str:
    return f"sgl-project/sglang @{tag} python/sglang/srt/{path}" + (f" ({what})" if what else "")


NEW_FRACTION_SOURCE = tag_source("v0.5.3", "server_args.py", "PR #10975: reserve from chunked prefill, CUDA-graph "
                                 "batch sizes and TP x PP")
MAX_TOTAL_TOKENS_SOURCE = tag_source("v0.5.23", "model_executor/model_runner.py", "max_total_num_tokens = "
                                     "min(the profiled tokens, --max-total-tokens), then whole pages")
PAGE_SOURCE = tag_source("v0.5.23", "arg_groups/overrides.py", "_mla_backend_page_constraints, _page_size_default")
BACKEND_SOURCE = tag_source("v0.5.23", "arg_groups/model_override_base.py", "get_default_attn_backend")
DSA_PAGE_SOURCE = tag_source("v0.5.23", "arg_groups/model_overrides/deepseek_v2.py", "_deepseek_family_overrides: "
                             "page 64 x index_kpool for DeepSeek DSA")
TRTLLM_MLA_SOURCE = tag_source("v0.5.4", "server_args.py", "DeepSeek-V3/R1 architecture on SM100: trtllm_mla, page "
                               "forced to 64 unless 32 or 64")
TRTLLM_MHA_SOURCE = tag_source("v0.5.7", "server_args.py", "SM100 default trtllm_mha, page forced to 64 unless 16, "
                               "32 or 64 (v0.5.23: or 128)")
CELL_SOURCES = {
    (0, 4, 6): tag_source("v0.5.3", "model_executor/model_runner.py", "profile_max_num_token: (kv_lora_rank + "
                          "qk_rope_head_dim) x layers x element size, no indexer"),
    (0, 5, 4): tag_source("v0.5.16", "model_executor/pool_configurator.py", "_compute_cell_size: 576 x element size "
                          "+ 132 B indexer per layer"),
    (0, 5, 17): tag_source("v0.5.17", "model_executor/pool_configurator.py", "_compute_cell_size: "
                           "calculate_mla_kv_cache_dim x element size + indexer"),
}
POOL_DIM_SOURCE = tag_source("v0.5.23", "mem_cache/kv_cache_configurator.py", "calculate_mla_kv_cache_dim: fp8 "
                             "512 + 512/128 x 4 + 64 x 2 = 656")
SSM_DTYPE_SOURCE = (tag_source("v0.5.8", "server_args.py", "--mamba-ssm-dtype default float32") + "; "
                    + tag_source("v0.5.23", "configs/mamba_utils.py", "mamba2_state_dtype: the config's "
                                 "mamba_ssm_dtype, else float32; conv state bfloat16"))


# From v0.5.3 (PR #10975) the default reserve is built, in MB, from the chunked-prefill size and the decode CUDA-graph
# batch sizes SGLang picks by GPU memory and TP (arg_groups/memory_hook.py _handle_gpu_memory_settings, read in the
# v0.5.23 wheel): reserved = 512 + max(chunked_prefill_size, 2048) x 1.5 + TP x PP / 8 x 1024 + decode max_bs x 2,
# at least 10,240 MB on a GPU above 60 GB; mem_fraction_static = round((GPU MB - reserved) / GPU MB, 3). Checked:
# 0.911 on MI355X TP1 (PR #18263's printed value; 16,384 chunk, max_bs 512; AMD captures no prefill graphs). The
# prefill CUDA graphs and speculative decoding's reserve change by release (PREFILL_GRAPH_SOURCE, SPEC_RESERVE_MB);
# DeepEP's 2 GiB (v0.5.15+, --moe-a2a-backend deepep): deepep_buffer below; kvplan has no all-to-all backend option.
RESERVE_SOURCE = tag_source("v0.5.23", "arg_groups/memory_hook.py", "_handle_gpu_memory_settings, "
                            "reserve_for_graph_mb")
# (GPU memory below, MB: (chunked_prefill_size, decode max_bs at TP < 4, at TP >= 4)) by the same function's buckets
CAPACITY_BUCKETS_MB = ((20 * 1024, 2048, 8, 8), (35 * 1024, 4096, 48, 160), (60 * 1024, 4096, 32, 160),
                       (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512), (math.inf, 16384, 512, 512))
# The 20-35 GB bucket (A10, RTX 4090 / 5090) by release, read in the wheels (server_args.py _handle_gpu_memory_settings,
# from v0.5.20 arg_groups/memory_hook.py): chunked prefill 2,048 and max_bs 16 / 80 in v0.5.3-v0.5.4, max_bs 24 / 80
# in v0.5.5-v0.5.19 (read in v0.5.5, v0.5.8, v0.5.10, v0.5.14, v0.5.15, v0.5.18, v0.5.19), 4,096 and 48 / 160 from
# v0.5.20 (v0.5.20, v0.5.22, v0.5.23). The other buckets are the same in every wheel read from v0.5.3.
SMALL_GPU_BUCKETS = (((0, 5, 20), (35 * 1024, 4096, 48, 160)), ((0, 5, 5), (35 * 1024, 2048, 24, 80)),
                     ((0, 5, 3), (35 * 1024, 2048, 16, 80)))
SMALL_GPU_SOURCE = ("sgl-project/sglang @v0.5.3, @v0.5.4, @v0.5.5, @v0.5.19, @v0.5.20 python/sglang/srt/"
                    "server_args.py / arg_groups/memory_hook.py (_handle_gpu_memory_settings, gpu_mem < 35 * 1024)")


def capacity_buckets(version: tuple[int, ...] = (0, 5, 23)) -> tuple[tuple[float, int, int, int], ...]:
    """CAPACITY_BUCKETS_MB with the 20-35 GB bucket of ``version`` (SMALL_GPU_BUCKETS)."""
    small = next(b for since, b in SMALL_GPU_BUCKETS if version >= since) if version >= (0, 5, 3) else \
        SMALL_GPU_BUCKETS[-1][1]
    return tuple(small if top == 35 * 1024 else (top, c, a, b) for top, c, a, b in CAPACITY_BUCKETS_MB)


def chunked_prefill_mb(gpu_mb: float, version: tuple[int, ...] = (0, 5, 23)) -> int:
    """The default chunked_prefill_size SGLang v0.5.3+ picks by GPU memory (CAPACITY_BUCKETS_MB, by release)."""
    return next(c for top, c, _, _ in capacity_buckets(version) if gpu_mb < top)


def reserved_mb(gpu_mb: float, tp: int, pp: int, attn_dp: int = 1, prefill_graphs_mb: float = 0.0,
                after_floor_mb: float = 0.0, version: tuple[int, ...] = (0, 5, 23), chunk: int | None = None) -> float:
    """v0.5.3+'s default reserve below mem_fraction_static, in MB (RESERVE_SOURCE). ``tp`` is SGLang's --tp-size
    (every rank under DP attention); ``attn_dp`` > 1 adds DP attention's padding, max_bs x dp x 3 (x 4.5 above a
    max_bs of 300), part of reserve_for_graph_mb, which comes before the 10 GB floor, as the prefill CUDA graphs'
    ``prefill_graphs_mb`` does (prefill_graph_mb); ``after_floor_mb`` (speculative decoding's, by release) is added
    after the floor; ``chunk``: --chunked-prefill-size as given (None: the bucket's; the reserve takes it before DP
    attention divides it, as _handle_gpu_memory_settings runs before _handle_data_parallelism)."""
    default, bs_small, bs_large = next((c, a, b) for top, c, a, b in capacity_buckets(version) if gpu_mb < top)
    chunk = default if chunk is None else chunk
    max_bs = bs_small if tp < 4 else bs_large
    graphs: float = max_bs * 2
    if attn_dp > 1:
        graphs += max_bs * attn_dp * 3 + (max_bs * attn_dp * 1.5 if max_bs > 300 else 0)
    reserved = 512 + max(chunk, 2048) * 1.5 + tp * pp / 8 * 1024 + graphs + prefill_graphs_mb
    return (max(reserved, 10 * 1024) if gpu_mb > 60 * 1024 else reserved) + after_floor_mb


# Prefill CUDA graphs in the default reserve, by release (each read in that release's wheel, server_args.py, from
# v0.5.18 also arg_groups/memory_hook.py): none by default in v0.5.3-v0.5.9 (--enable-piecewise-cuda-graph is
# opt-in); v0.5.10-v0.5.14 capture torch-compile piecewise graphs by default, off under DP attention, PP > 1 or on a
# non-CUDA GPU; v0.5.15 makes the breakable graph (BCG) the CUDA default, off under DP attention and for MLA;
# v0.5.17 keeps it for DP attention and for DeepSeek's DSA, v0.5.18 for every MLA model, but the DeepSeek-V3
# architecture on trtllm_mla (Blackwell, v0.5.4+), which v0.5.16+ turn off. The reserve: 8 MB per captured size
# (4..32 by 4, 48..256 by 16, 288..512 by 32, 576..1,024 by 64, 1,280..4,096 by 256, then by 512 up to the chunked
# prefill size: 58 sizes at 8,192 tokens), or 1.5 GiB flat with an MLA backend; before the 10 GB floor.
PREFILL_GRAPHS_SINCE, PREFILL_BCG_SINCE, BCG_DP_SINCE, BCG_MLA_SINCE = (0, 5, 10), (0, 5, 15), (0, 5, 17), (0, 5, 18)
PREFILL_GRAPH_SOURCE = ("sgl-project/sglang @v0.5.9, @v0.5.10, @v0.5.14, @v0.5.15, @v0.5.16, @v0.5.17, @v0.5.18 "
                        "python/sglang/srt/server_args.py (piecewise / prefill CUDA graph default, its "
                        "incompatibility rules, len(bs) x 8 MB or 1.5 GiB with MLA in the reserve); @v0.5.23 "
                        "arg_groups/memory_hook.py reserve_for_graph_mb, arg_groups/cuda_graph_hook.py")
# Speculative decoding in the v0.5.3+ reserve, after the 10 GB floor: + 2 GiB (EAGLE / MTP drafts; 6 GiB for
# STANDALONE, 0 for NGRAM) in v0.5.3-v0.5.9, + 4 GiB in v0.5.10-v0.5.13, none from v0.5.14 (server_args.py read in
# the v0.5.3, v0.5.8, v0.5.9, v0.5.10, v0.5.13 and v0.5.14 wheels).
SPEC_RESERVE_MB = (((0, 5, 14), 0.0), ((0, 5, 10), 4096.0), ((0, 5, 3), 2048.0))
SPEC_RESERVE_SOURCE = ("sgl-project/sglang @v0.5.3..@v0.5.14 python/sglang/srt/server_args.py (reserved_mem += 2 "
                       "GiB, from v0.5.10 4 GiB, for a speculative algorithm other than STANDALONE / NGRAM; removed "
                       "in v0.5.14)")


# DeepEP (--moe-a2a-backend deepep): its expert-parallel all-to-all buffers are allocated on the first MoE forward
# (the warm-up / decode CUDA-graph capture), after the KV pool, so they come out of the 1 - mem_fraction_static
# headroom, not the pool. SGLang sizes the Buffer (layers/moe/token_dispatcher/deepep.py DeepEPBuffer.get_deepep_buffer,
# read in the v0.5.10 wheel) from DeepEP's own hints: in low-latency mode (decode; 'auto' runs both) num_rdma_bytes =
# Buffer.get_low_latency_rdma_size_hint(SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK = 128, hidden, ranks, routed
# experts). DeepEP's LowLatencyLayout (deepseek-ai/DeepEP @v1.2.1 csrc/config.hpp): a dispatch message is 16 B +
# max(2 x hidden, hidden + 4 x hidden / 128), a combine message 4 x hidden / 128 + 2 x hidden; two (odd/even) send
# buffers of max(tokens x dispatch msg, experts x tokens x combine msg), two receive buffers of experts x tokens x the
# larger message, two signalling buffers of experts x 4 B rounded up to 128; the total rounded up past a 128-B
# boundary. Independent of the rank count. From v0.5.15 SGLang's default reserve adds a flat 2 GiB for it when the
# decode CUDA graphs run (arg_groups/memory_hook.py reserve_for_deepep_a2a_mb @v0.5.23), after the 10 GB floor:
# enough for DeepSeek-V3's 1.78 GiB, not for Kimi-K2's 384 experts (2.67 GiB). With --moe-a2a-backend deepep kvplan
# subtracts that reserve from the default fraction (memory_fraction); the buffer itself is a report row.
DEEPEP_TOKENS_PER_RANK = 128
DEEPEP_RESERVE_MB, DEEPEP_RESERVE_SINCE = 2048.0, (0, 5, 15)
# --moe-a2a-backend (PR #8658; v0.5.0rc0's server_args.py has it, v0.4.6-v0.4.10 only --enable-deepep-moe): the
# choices of v0.5.23 (arg_groups/fields/exec_.py). Any backend but none turns the prefill CUDA graphs off: the
# piecewise ones (v0.5.10-v0.5.14) and the breakable ones in v0.5.15-v0.5.16 ("MoE A2A backend" in their
# incompatibility lists); from v0.5.17 breakable graphs stay on for none, deepep, megamoe and flashinfer ("unvalidated
# a2a backend"), and deepep adds 1 GiB to the graph reserve, before the floor ("Prefill-BCG DeepEP delta";
# absent from the v0.5.16 wheel). Read in the v0.5.10, v0.5.14, v0.5.15, v0.5.16, v0.5.17, v0.5.18 and v0.5.23 wheels.
MOE_A2A_BACKENDS = ("none", "deepep", "mooncake", "nixl", "mori", "ascend_fuseep", "flashinfer", "megamoe",
                    "deepep_v2", "ascend_tp", "pplx", "flashinfer_megamoe")
MOE_A2A_SINCE = (0, 5, 0)
BCG_A2A_SINCE, BCG_A2A_BACKENDS = (0, 5, 17), ("none", "deepep", "megamoe", "flashinfer")
DEEPEP_BCG_RESERVE_MB = 1024.0
MOE_A2A_SOURCE = ("sgl-project/sglang @v0.5.0rc0 python/sglang/srt/server_args.py (--moe-a2a-backend; "
                  "--enable-deepep-moe before); " + tag_source("v0.5.23", "arg_groups/fields/exec_.py",
                                                                "moe_a2a_backend choices"))
A2A_GRAPH_SOURCE = ("sgl-project/sglang @v0.5.10..@v0.5.16 python/sglang/srt/server_args.py (prefill CUDA graphs off "
                    "for a MoE A2A backend); @v0.5.17 (breakable graphs kept for none, deepep, megamoe, flashinfer; "
                    "+ 1 GiB Prefill-BCG DeepEP delta); " + tag_source("v0.5.23", "arg_groups/memory_hook.py",
                                                                        "reserve_for_graph_mb"))
DEEPEP_SOURCE = ("deepseek-ai/DeepEP @v1.2.1 csrc/config.hpp (LowLatencyLayout, get_low_latency_rdma_size_hint); "
                 "sgl-project/sglang @v0.5.10 python/sglang/srt/layers/moe/token_dispatcher/deepep.py "
                 "(DeepEPBuffer.get_deepep_buffer), environ.py (SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK = 128); "
                 + tag_source("v0.5.23", "arg_groups/memory_hook.py", "reserve_for_deepep_a2a_mb: 2 * 1024 MB"))


def deepep_low_latency_bytes(hidden: int, experts: int, tokens: int = DEEPEP_TOKENS_PER_RANK) -> int:
    """DeepEP's low-latency RDMA buffer (bytes per GPU) for a model's hidden size and routed experts (DEEPEP_SOURCE)."""
    scales = hidden // 128
    dispatch_msg = 16 + 2 * hidden   # DeepEP's max(2 x hidden, hidden + 4 x scales): it asserts 4 x scales <= hidden
    combine_msg = 4 * scales + 2 * hidden
    send = max(tokens * dispatch_msg, experts * tokens * combine_msg)
    recv = experts * tokens * max(dispatch_msg, combine_msg)
    signal = -(-experts * 4 // 128) * 128
    total = 2 * (send + recv + signal)
    return (total + 128) // 128 * 128


def deepep_buffer(model: ModelSpec, version: Release = NEWEST) -> Bytes | None:
    """The DeepEP buffer a --moe-a2a-backend deepep deployment of ``model`` allocates per GPU, with SGLang's reserve
    for it by release in the derivation; None for a dense model or one without a hidden size."""
    if not model.num_experts or not model.hidden_size:
        return None
    hidden, experts = model.hidden_size, model.num_experts
    size = deepep_low_latency_bytes(hidden, experts)
    reserve = DEEPEP_RESERVE_MB * 2**20 if version >= DEEPEP_RESERVE_SINCE else 0.0
    cover = ("covered by" if size <= reserve else "more than") + f" SGLang's {reserve / 2**30:g} GiB reserve for it"
    return Bytes(size, derived(
        "2 x (send + receive + signalling) of DeepEP's low-latency layout, 128 tokens per rank; outside the KV pool, "
        "inside 1 - mem_fraction_static",
        f"hidden {hidden}, {experts} experts: {size / 2**30:.2f} GiB ({cover})", DEEPEP_SOURCE))


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill graphs SGLang captures up to ``max_tokens`` (PREFILL_GRAPH_SOURCE's list)."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]
    return sum(1 for x in sizes if x <= max_tokens)


def dp_attention(par: Parallelism) -> bool:
    """SGLang's DP attention: experts over the DP ranks (the layout launch_command emits --enable-dp-attention for)."""
    return par.dp > 1 and par.ep is not None and par.ep > par.tp


# profile_max_num_token: rest = free memory after the weights - (free memory before them) x (1 - mem_fraction_static),
# i.e. pre-load free memory x mem_fraction_static - the weights' memory (mem_cache/kv_cache_configurator.py
# _profile_available_bytes @v0.5.23; model_runner.py @v0.4.6-v0.5.2). The pre-load free memory ("Load weight begin.
# avail mem=") is the CUDA-visible total less the CUDA context and torch.distributed / NCCL / custom all-reduce
# set-up: fitted on the 'fit' logs of tests/data/memory_profiles (SGLang): 0.79 GiB at TP1 (MI355X, Qwen3-30B-A3B:
# 287.97 - (230.20 + 56.98)) and 2.65 GiB at TP >= 2 (H100 TP4, Qwen3-235B-A22B-FP8: 79.19 - (16.46 + 54.72) / 0.93);
# the held-out H200 TP8 log prints 137.29 GiB against 140.40 - 0.46 - 2.65 = 137.29.
INIT_GIB = (0.79, 2.65)
# Above two GPUs without a scale-up link (PCIe only: the preset has no [scale_up]), SGLang turns its custom all-reduce
# off ("Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs":
# distributed/device_communicators/custom_all_reduce.py, every release read from v0.4.6), so the set-up is the
# one-rank context plus the NCCL communicator alone: 0.13 GiB ("Init torch distributed ends. mem usage=0.13 GB",
# the 'fit' log of QwQ-32B on 4 x L4).
PCIE_NCCL_GIB = 0.13
PCIE_INIT_SOURCE = ("sgl-project/sglang @v0.4.6 python/sglang/srt/distributed/device_communicators/"
                    "custom_all_reduce.py (off above two PCIe-only GPUs); kvplan fit: 0.13 GiB of NCCL set-up, "
                    "tests/data/memory_profiles sglang-qwq-32b-4xl4-tp4")
# On such a PCIe-only multi-GPU host, an NVIDIA GPU without a measured driver reserve (vLLM's DRIVER_RESERVE_GIB;
# kvplan otherwise takes the largest seen, 0.70 GiB, and the MI355X context, 0.79) hides 0.73 GiB before the
# distributed set-up: driver reserve and CUDA context together, read from the 'fit' log of QwQ-32B on 4 x L4
# (22.49 GiB nvidia-smi total - 21.63 free before the load - 0.13 of NCCL set-up). A one-GPU deployment on such a GPU
# keeps the larger reserve: the 'fit' 24 GB log (Docker Desktop on Windows) hides 1.60 GiB, the display and WSL2
# holding the rest, and kvplan cannot tell the host; NCCL runs on Linux only, so a TP > 2 PCIe host is a Linux server.
PCIE_HIDDEN_GIB = 0.73
# What the one-GPU 'fit' log under Docker Desktop on Windows hides (23.99 - 22.39 GiB); kvplan's 0.70 + 0.79 for an
# unmeasured GPU alone stays near it, and the budget row says so.
WINDOWS_HIDDEN_GIB = 1.60
# Where the preset states its host ([node] os), one GPU of an unmeasured kind hides that host's figure instead: on
# Linux the driver reserve and CUDA context read on the PCIe host above, PCIE_HIDDEN_GIB (one rank sets up no NCCL
# communicator: SGLang's GroupCoordinator builds PyNccl only for a group of two or more, distributed/parallel_state.py
# @v0.4.6), on Windows (WSL2, Docker Desktop) WINDOWS_HIDDEN_GIB. Not fitted to the one-GPU Linux logs: the held-out
# Mistral-7B log (SGLang v0.4.0, issue #2468) implies 23.21-23.29 GiB free before the load on its 24 GB card, 0.70-0.78
# hidden: v0.4.0's model_runner.py sizes the pool as v0.4.6 does (profile_max_num_token: free after the load - free
# before it x (1 - 0.88); server_args.py: 0.88 at TP 1, no small-GPU change to the fraction), so the gap to kvplan's
# 1.49 is the host's, not SGLang's.
HOST_HIDDEN_SOURCE = ("kvplan: tests/data/memory_profiles sglang-qwq-32b-4xl4-tp4 (Linux, 0.73 GiB) and "
                      "sglang-llama-3.1-8b-24gb-tp1 (Docker Desktop on Windows, 1.60 GiB), the preset's [node] os; "
                      + tag_source("v0.4.6", "distributed/parallel_state.py", "PyNcclCommunicator only when "
                                   "world_size > 1"))
PCIE_HIDDEN_SOURCE = ("kvplan fit: 22.49 - 21.63 - 0.13 = 0.73 GiB, tests/data/memory_profiles sglang-qwq-32b-4xl4-tp4 "
                      "(the held-out 4 x RTX 4090 log checks it: 23.99 - 0.73 - 0.13 = 23.13 GiB against 23.08)")
# What the weight load adds beyond the parameters' bytes ("Load weight end. ... mem usage" less the checkpoint's
# bytes per rank; model_runner.py load_model measures it with get_available_gpu_memory, which empties the cache, so
# only memory still held counts). Read from the 'fit' logs that print it, against kvplan's own parameter bytes: one
# rank 0.11 GiB (mean of Llama-3.1-8B on 24 GB 0.06, Qwen3-0.6B on RTX 5080 0.14, Llama-3.1-8B on H100 0.13); more
# ranks 0.26 GiB (mean of QwQ-32B TP4 on L4 0.29, Qwen3-32B TP4 on B200 0.23). Every release the logs cover (v0.4.1
# .. v0.5.13). What it is, worked out by hand (not fitted): SGLang's rotary cache, kept in fp32 on CUDA and shared by
# the layers (layers/rotary_embedding.py @v0.4.6: max_position x rotary_dim x 4 B: 0.06 GiB for Llama-3.1's 131,072,
# 0.02 for Qwen3's 40,960), and PyTorch's caching allocator, which rounds every allocation of 10 MiB or more up to
# 2 MiB (c10/cuda/CUDACachingAllocator.cpp kRoundLarge) and cannot return a segment a parameter still holds: at TP 1
# the dense shapes of these models are whole multiples of 2 MiB (no loss), at TP 4 they are not (QwQ-32B's per-rank
# fused QKV 17.5 MiB, o_proj 12.5, gate_up 135, down 67.5: 3.5 MiB a layer x 64 = 0.22 GiB; Qwen3-32B 0.22; the
# held-out Qwen3-14B at TP4 0.18 + 0.02 = 0.20 against its logged 0.20). The rest, 0.0-0.1 GiB, is unexplained.
LOAD_OVERHEAD_GIB = (0.11, 0.26)
LOAD_OVERHEAD_SOURCE = ("kvplan fit on tests/data/memory_profiles/index.toml [[sglang_log]] 'fit' entries with a "
                        "logged mem usage (Load weight end) against their parameter bytes; explained by sgl-project/"
                        "sglang @v0.4.6 python/sglang/srt/layers/rotary_embedding.py (fp32 cos_sin_cache) and "
                        "pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp (kRoundLarge = 2 MiB)")
INIT_SOURCE = ("kvplan fit on tests/data/memory_profiles/index.toml [[sglang_log]] 'fit' entries (Load weight begin / "
               "end avail mem); " + tag_source("v0.5.23", "mem_cache/kv_cache_configurator.py",
                                               "_profile_available_bytes"))


# Under DP attention SGLang replicates the attention and the input embedding on every rank (attention TP 1:
# VocabParallelEmbedding(enable_tp=not is_dp_attention_enabled())), but splits over the whole --tp-size group the LM
# head (ParallelLMHead, vocab-parallel unless --enable-dp-lm-head), the dense layers' MLP (unless
# --moe-dense-tp-size 1) and the shared experts (unless DeepEP, which keeps them whole on each rank):
# models/deepseek_v2.py and models/qwen3_moe.py read in the v0.5.3 wheel. kvplan's weights split every non-expert
# weight by the attention TP, so the adapter takes those three parts off (1 - 1 / group) of theirs, priced at the
# model's mean bytes per parameter; an MoE model's LM head is taken as untied (DeepSeek, Qwen3-MoE, gpt-oss, Kimi).
DP_SPLIT_SOURCE = tag_source("v0.5.3", "models/deepseek_v2.py", "embed_tokens enable_tp=not is_dp_attention_enabled(); "
                             "lm_head use_attn_tp_group=enable_dp_lm_head; dense MLP tp unless "
                             "enable_moe_dense_fully_dp; shared_experts tp_size=1 only with DeepEP")


# MXFP4 experts on Blackwell: SGLang runs gpt-oss's MoE with FlashInfer's MXFP4 kernel there (server_args.py:
# moe_runner_backend = "flashinfer_mxfp4" on SM100 for an MXFP4 checkpoint) and its Mxfp4MoEMethod.create_weights
# pads both the per-partition intermediate size and the hidden size up to a multiple of 256 (triton_kernels on
# Hopper: 32, 2,880 already is): per expert and layer, w13 2 x I x H / 2 B + its scales 2 x I x H / 32 B + a bf16
# bias 2 x I x 2 B, w2 H x I / 2 B + scales H x I / 32 + bias H x 2 B, with I, H padded (layers/quantization/
# mxfp4.py and server_args.py read in the v0.5.3 wheel).
MXFP4_PAD, MXFP4_BLOCK = 256, 32
MXFP4_PAD_SOURCE = (tag_source("v0.5.3", "layers/quantization/mxfp4.py", "Mxfp4MoEMethod.create_weights: round_up("
                                "intermediate, 256), round_up(hidden, 256) with flashinfer on SM100") + "; "
                    + tag_source("v0.5.3", "server_args.py", "GptOssForCausalLM: flashinfer_mxfp4 on SM100"))


def mxfp4_expert_bytes(hidden: int, inter: int) -> int:
    """One MXFP4 expert's bytes in one layer as SGLang allocates it (weights, uint8 block scales, bf16 biases)."""
    return (2 * inter * hidden // 2 + 2 * inter * hidden // MXFP4_BLOCK + 2 * inter * 2
            + hidden * inter // 2 + hidden * inter // MXFP4_BLOCK + hidden * 2)


def mxfp4_blackwell_padding(model: ModelSpec, par: Parallelism) -> tuple[int, str]:
    """(bytes per GPU, how) SGLang's FlashInfer MXFP4 layout on Blackwell adds to an MXFP4 MoE checkpoint's experts
    (MXFP4_PAD_SOURCE); 0 when nothing is padded."""
    hidden, inter = model.hidden_size, model.moe_intermediate_size
    if model.weight_dtype != "mxfp4" or not (hidden and inter and model.num_experts and model.params_expert):
        return 0, ""
    experts = model.num_experts / (par.ep if par.ep else 1)
    tp = 1 if par.ep else par.tp      # without EP, each rank holds every expert's 1 / TP slice of the intermediate
    part = inter // tp
    layers = round(model.params_expert.value / (model.num_experts * 3 * hidden * inter)) / par.pp
    pad = lambda n: -(-n // MXFP4_PAD) * MXFP4_PAD  # noqa: E731
    extra = mxfp4_expert_bytes(pad(hidden), pad(part)) - mxfp4_expert_bytes(hidden, part)
    total = int(extra * experts * layers)
    return total, (f"{extra:,} B per expert and layer (hidden {hidden} -> {pad(hidden)}, intermediate {part} -> "
                   f"{pad(part)}) x {experts:g} experts x {layers:g} layers")


# An NVFP4 DeepSeek-V3-architecture (MLA) checkpoint as NVIDIA's ModelOpt recipe writes it (nvidia/DeepSeek-R1-FP4 and
# its kin): the quantizer is switched off for "*attn*" and "*head*" (NVIDIA/TensorRT-Model-Optimizer
# @1030a221 examples/deepseek/ptq.py, ptq(): mtq_cfg["quant_cfg"]["*attn*"] = {"enable": False} unless mla_quant,
# "*head*" likewise), and the input embedding and the MoE router are no linears it quantizes, so every MLA projection,
# the embedding, the LM head and the router stay bf16; SGLang honours the checkpoint's exclude_modules with unquantized
# linears (layers/quantization/modelopt_quant.py ModelOptFp4Config.get_quant_method @v0.4.10). In SGLang's DeepSeek
# model the q/kv A-projection is one ReplicatedLinear (fused_qkv_a_proj_with_mqa: hidden x (q_lora_rank +
# kv_lora_rank + qk_rope_head_dim)) and the router (MoEGate: n_routed_experts x hidden) is whole on every rank, while
# q_b / kv_b / o_proj split by the attention TP, the embedding and LM head by vocabulary; post_load_weights then keeps
# contiguous copies of kv_b_proj's bf16 weight as w_kc and w_vc beside it (models/deepseek_v2.py @v0.4.10).
# kvplan's --weight-dtype nvfp4 prices every parameter at 4.5 bits / TP, so the adapter adds the difference.
NVFP4_MLA_SOURCE = ("NVIDIA/TensorRT-Model-Optimizer @1030a221 examples/deepseek/ptq.py (\"*attn*\" and \"*head*\" "
                    "quantizers disabled); " + tag_source("v0.4.10", "models/deepseek_v2.py",
                                                         "fused_qkv_a_proj_with_mqa ReplicatedLinear, MoEGate, "
                                                         "post_load_weights w_kc / w_vc copies of kv_b_proj")
                    + "; " + tag_source("v0.4.10", "layers/quantization/modelopt_quant.py",
                                        "ModelOptFp4Config exclude_modules"))


def nvfp4_mla_bf16_bytes(model: ModelSpec, par: Parallelism) -> tuple[int, str]:
    """(bytes per GPU, how) an NVFP4 ModelOpt MLA checkpoint holds in SGLang above params x 4.5 bits / TP
    (NVFP4_MLA_SOURCE): bf16 MLA projections (q_b, kv_b, o split by the attention TP; the fused q/kv A-projection
    whole), router (whole), embedding and LM head (split by vocabulary), and the w_kc / w_vc copies of kv_b.
    0 for a model without a q_lora_rank MLA group and its dims."""
    mla = next((g.kind for g in model.groups if isinstance(g.kind, MLA)), None)
    hidden, vocab = model.hidden_size, model.vocab_size
    if mla is None or not (hidden and vocab and mla.q_heads and mla.q_lora_rank and mla.qk_nope_head_dim
                           and mla.v_head_dim):
        return 0, ""
    p = WEIGHT_BYTES_PER_PARAM["nvfp4"]
    heads, qr, r = mla.q_heads, mla.q_lora_rank, mla.kv_lora_rank
    nope, rope, v = mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim
    kv_b = r * heads * (nope + v)
    split = qr * heads * (nope + rope) + kv_b + heads * v * hidden          # q_b + kv_b + o_proj per layer
    whole = hidden * (qr + r + rope)                                        # fused_qkv_a_proj_with_mqa per layer
    moe_layers = 0
    if model.params_expert and model.num_experts and model.moe_intermediate_size:
        moe_layers = round(model.params_expert.value / (model.num_experts * 3 * hidden * model.moe_intermediate_size))
    router = (model.num_experts or 0) * hidden
    tp, layers = par.tp, model.num_layers / par.pp
    head_group = tp * (par.dp if dp_attention(par) else 1)   # the LM head splits over the whole TP group
    extra = (layers * split * (2 - p) / tp + layers * whole * (2 - p / tp)
             + moe_layers / par.pp * router * (2 - p / tp)
             + vocab * hidden * (2 - p) / tp / par.pp + vocab * hidden * (2 - p) / head_group / par.pp
             + layers * kv_b * 2 / tp)
    how = (f"{layers:g} layers x (q_b + kv_b + o_proj {split:,} x (2 - {p:g}) / {tp} + fused q/kv A {whole:,} x "
           f"(2 - {p:g}/{tp}) + w_kc/w_vc {kv_b:,} x 2 / {tp}) + {moe_layers} routers {router:,} x (2 - {p:g}/{tp}) "
           f"+ embedding and LM head {vocab:,} x {hidden:,} x (2 - {p:g}) / ({tp}, {head_group})")
    return int(extra), how


def dp_attention_split_params(model: ModelSpec, deepep: bool = False) -> tuple[float, str]:
    """(parameters, what) of the weights SGLang splits over the whole TP group under DP attention where kvplan
    keeps them whole per attention-TP rank: the LM head, the dense layers' MLP, the shared experts (not with
    DeepEP). Parts whose dims the model does not give count 0."""
    hidden, vocab = model.hidden_size or 0, model.vocab_size or 0
    lm_head = vocab * hidden
    moe_layers = 0
    if model.params_expert and model.num_experts and model.moe_intermediate_size and hidden:
        moe_layers = round(model.params_expert.value / (model.num_experts * 3 * hidden * model.moe_intermediate_size))
    dense = max(model.num_layers - moe_layers, 0) * 3 * hidden * (model.intermediate_size or 0) if moe_layers else 0
    shared = 0 if deepep else moe_layers * (model.shared_experts or 0) * 3 * hidden * (model.moe_intermediate_size or 0)
    what = (f"LM head {lm_head:,}" + (f" + {model.num_layers - moe_layers} dense MLPs {dense:,}" if dense else "")
            + (f" + {moe_layers} layers' shared experts {shared:,}" if shared else ""))
    return float(lm_head + dense + shared), what


# v0.5.3 forces mem_fraction_static = 0.8 for DeepSeek's NSA / DSA models (V3.2) on CUDA, a given value included
# ("Setting mem fraction static to 0.8 for DeepSeek NSA", server_args.py @v0.5.3, with DP attention, page 64 and, on
# Blackwell, an fp8 cache); PR #11309 (merged 2025-10-07, absent from the v0.5.4 wheel) removed it.
NSA_FIXED_FRACTION, NSA_FIXED_SPAN = 0.8, ((0, 5, 3), (0, 5, 4))
NSA_FIXED_SOURCE = tag_source("v0.5.3", "server_args.py", "is_deepseek_nsa: mem_fraction_static = 0.8; gone in v0.5.4")


def reserved_gib(gpu_mem_gib: float, parallel_size: int) -> float:
    if gpu_mem_gib < 35:
        return 2.8 + parallel_size / 10
    if gpu_mem_gib < 90:
        return 9.5 + parallel_size / 2
    if gpu_mem_gib < 160:
        return 12 + parallel_size / 2
    return 32


def sglang_default_mem_fraction(gpu_mem_gib: float, parallel_size: int) -> float:
    return round((gpu_mem_gib - reserved_gib(gpu_mem_gib, parallel_size)) / gpu_mem_gib, 3)


# A request's time outside the scheduler's batches, added to TTFT and E2E: the TokenizerManager (HTTP, tokenization)
# sends the request to the Scheduler process over ZMQ, and the first token goes out through the DetokenizerManager
# process and back to the TokenizerManager before the HTTP stream (sgl-project/sglang
# python/sglang/srt/managers/tokenizer_manager.py, detokenizer_manager.py): two more process hops than vLLM V1. Fitted,
# with no published measurement found: the least median TTFT error on the 3 SGLang 'fit' runs of
# tests/data/serving_runs.toml (Llama-3.3-70B TP4 on H200, late-2024 release, sglang.bench_serving, the H200's
# generic prefill_mfu 0.45), on a 1 ms grid. First fitted (42 ms) with every batch decided at its start; refitted
# (sglov19) once kvplan modelled SGLang's overlap scheduler (kvplan.engines.sglang_scheduler), which puts an arrival a
# batch later: 27 ms (fit TTFT 6.4%, held-out 15.5%, never-seen 10.5%; 42 ms under it: 23.8%, 20.2%, 12.1%; the
# same procedure without it still gives 42). Refitted again (sgl19) once kvplan gave a prefill round's new requests
# their first tokens together, at the round's end (SGLang streams a prefill batch's result once, after its forward:
# process_batch_result_prefill, kvplan.engines.sglang_scheduler "Prefill"), which puts all but the last of a round's
# first tokens later: 18 ms (median |TTFT error| on the SGLang runs, 27 ms and the tokens staggered -> 18 ms and
# together: fit 3.7% -> 6.2%, held-out 12.6% -> 7.5%, never-seen 12.6% -> 15.1%, never_seen_3 56.3% -> 61.5%; 27 ms
# with the rule: 16.7%, 10.3%, 17.9%, 56.2%). Three runs of one deployment: a weak fit.
FRONTEND_LATENCY_S = 0.018
FRONTEND_SOURCE = ("kvplan fit: 18 ms per request (TokenizerManager in, Scheduler over ZMQ, DetokenizerManager out; "
                   "python/sglang/srt/managers/), the least median TTFT error on the 3 SGLang H200 'fit' runs of "
                   "tests/data/serving_runs.toml with SGLang's overlap scheduler and a prefill batch's first tokens "
                   "together modelled (27 ms before the latter, 42 ms before both; one deployment: a weak fit)")


@dataclass(frozen=True)
class SglangPool:
    cell_size_bytes: int
    max_total_num_tokens: int
    page_size: int


class SglangEngine(Engine):
    id = "sglang"
    version: Release   # always pinned to one release (the newest by default)
    sources = (SOURCE,)
    fraction_name = "mem_fraction_static"
    settings = frozenset({"mem_fraction_static", "kv_pool_bytes", "max_model_len", "max_num_seqs", "block_size",
                          "runtime_reserve_bytes", "moe_a2a_backend", "chunked_prefill_size", "max_prefill_tokens"})
    # What each kind adds to SGLang's per-token cell: attention heads, the MLA latent, the NSA indexer key; a
    # sliding window counts like full attention in the combined cell; linear-attention / SSM state lives in a
    # separate mamba pool and adds nothing to the cell.
    kind_table = {FullAttention: "cell", SlidingWindowAttention: "cell (swa pool)", MLA: "cell", SparseIndexer: "cell",
                  GatedDeltaNet: "mamba pool", Mamba2: "mamba pool"}
    # Page size with no --page-size: 1 token (_page_size_default) for every kind; ``block_size`` applies the
    # backend rules by release and GPU on top of this table.
    block_tokens_table = {FullAttention: 1, SlidingWindowAttention: 1, MLA: 1, SparseIndexer: 1, GatedDeltaNet: 1,
                          Mamba2: 1}
    defaults_of = "SGLang"
    frontend_latency = (FRONTEND_LATENCY_S, FRONTEND_SOURCE)

    def fused_shared_experts(self, scenario) -> str | None:
        """SGLang runs DeepSeek-V3/R1's one shared expert as a 257th expert of the fused MoE kernel (top-k + 1) unless
        told not to (--disable-shared-experts-fusion): for DeepseekV3ForCausalLM with 256 routed experts and one shared
        expert, without expert parallelism on NVIDIA (SM90+ in v0.4.6-v0.4.7, SM80+ from v0.5.x). kvplan applies it
        on Hopper with EP off, the case every release read agrees on; Blackwell runs DeepSeek fp8/fp4 on the
        flashinfer_trtllm MoE runner in v0.5.7, which sets --disable-shared-experts-fusion, and AMD's rule changed
        between releases (off in v0.4.7, on from gfx942 in v0.5.7), so neither is fused here. The model check: an MLA
        model without DSA's sparse indexer (V3.2 is another architecture), 256 routed experts, one shared."""
        model, par = scenario.sized_model, scenario.parallelism
        if (gpu_generation(scenario.hardware) != "hopper" or (par.ep or 1) > 1 or model.num_experts != 256
                or model.shared_experts != 1):
            return None
        kinds = self.kinds(model)
        if MLA not in kinds or sparse_attention(kinds):
            return None
        return SHARED_FUSION_SOURCE
    default_steps_gib = (35.0, 90.0, 160.0)   # the reserved-memory buckets of the default mem_fraction_static
    # fp8 (fp8_e4m3) is a --kv-cache-dtype choice in v0.4.6 already, so only the FP4 cache has a first release: the
    # 4.5-bit FP4 E2M1 cache kvplan counts as nvfp4 arrives as fp4_e2m1 in v0.5.5 (see kv_flags).
    kv_dtype_since = {KVDtype.NVFP4: (FP4_E2M1_SINCE, FP4_E2M1_SOURCE)}

    def kv_dtype_problem(self, kv_dtype, model=None, hardware=None):
        """A dtype SGLang has no --kv-cache-dtype for in any release (the per-token-head ones); fp8_ds_mla, which
        SGLang stores as plain fp8_e4m3 on an MLA model without DSA's indexer; then the release table, and FP4 for
        a non-MLA attention cache before v0.5.6 (v0.5.5's FP4 pool is MLA's only)."""
        if kv_dtype not in SGLANG_KV_FLAGS:
            return (f"SGLang has no {kv_dtype.value} KV cache (its --kv-cache-dtype choices: auto, fp8_e5m2, "
                    "fp8_e4m3, bf16, fp4 ones; server_args.py v0.4.6-v0.5.23)", "choose --kv-dtype fp8 or bf16")
        kinds = {} if model is None else self.kinds(model)
        if kv_dtype is KVDtype.FP8_DS_MLA and MLA in kinds and SparseIndexer not in kinds:
            return (f"SGLang stores {model.id}'s MLA cache in fp8 as plain fp8_e4m3, not in the fp8_ds_mla layout "
                    "(only DeepSeek V3.2's NSA pool has it)", "choose --kv-dtype fp8")
        problem = super().kv_dtype_problem(kv_dtype, model, hardware)
        if (problem is None and kv_dtype is KVDtype.NVFP4 and not self.since(FP4_MHA_SINCE)
                and (FullAttention in kinds or SlidingWindowAttention in kinds)):
            return (f"{self.display_name} has FP4 KV only in its MLA pool: {model.id}'s attention cache would be "
                    f"stored a byte per value, as fp8 (first in {release_text(FP4_MHA_SINCE)}: {FP4_MHA_SOURCE})",
                    f"pin sglang=={release_text(FP4_MHA_SINCE)} or newer, or choose --kv-dtype fp8")
        return problem

    def moe_a2a_problem(self, backend, model, par) -> tuple[str, str] | None:
        """--moe-a2a-backend: one of SGLang's choices (MOE_A2A_SOURCE), for an MoE model whose experts the layout
        spreads over EP ranks (SGLang sets --ep-size to --tp-size for it); before v0.5.0 DeepEP alone, as
        --enable-deepep-moe."""
        if backend not in MOE_A2A_BACKENDS:
            return (f"--moe-a2a-backend {backend!r} is not SGLang's", "choose one of " + ", ".join(MOE_A2A_BACKENDS))
        if backend == "none":
            return None
        if not model.num_experts:
            return (f"--moe-a2a-backend {backend}: {model.id} is dense, with no routed experts to dispatch",
                    "drop --moe-a2a-backend for a dense model")
        if par.ep is None or par.ep <= 1:
            ranks = par.tp * par.dp if par.dp > 1 and par.tp == 1 else par.tp
            fix = (f"give --ep {ranks} (SGLang sets --ep-size to --tp-size for an all-to-all backend)" if ranks > 1
                   else "drop --moe-a2a-backend: one GPU has no all-to-all")
            return (f"--moe-a2a-backend {backend} dispatches experts over expert-parallel ranks, and this layout "
                    "has none", fix)
        if backend != "deepep" and not self.since(MOE_A2A_SINCE):
            return (f"{self.display_name} has no --moe-a2a-backend {backend} (the flag is first in v0.5.0rc0; before "
                    "it DeepEP alone, as --enable-deepep-moe)", "pin sglang==0.5.1 or newer, or give deepep")
        return None

    def layout_problem(self, par) -> tuple[str, str] | None:
        if par.pp > 1 and not self.since(PP_SIZE_SINCE):
            return (f"{self.display_name} has no pipeline parallelism (--pp-size first in "
                    f"{release_text(PP_SIZE_SINCE)}: {PP_SIZE_SOURCE})",
                    f"pin sglang=={release_text(PP_SIZE_SINCE)} or newer, or plan --pp 1")
        return None

    def kv_flags(self) -> dict:
        """kvplan's KV dtype -> this release's --kv-cache-dtype value. nvfp4 is "nvfp4" from v0.5.16 (server_args.py
        @v0.5.16); v0.5.5-v0.5.15 name their FP4 cache fp4_e2m1 (same 4.5 bits per value; v0.5.16 renames that recipe
        fp4_mx_block16 and mem_cache/kv_cache_dtype.py refuses fp4_e2m1)."""
        if self.since(NVFP4_SINCE):
            return SGLANG_KV_FLAGS
        return {**SGLANG_KV_FLAGS, KVDtype.NVFP4: "fp4_e2m1"}

    def __init__(self, version: Release = NEWEST, name: str = "") -> None:
        self.version = version
        self.name = name
        start, end = rule_span(version, BOUNDARIES)
        last = None if end is None else (end[0], end[1], end[2] - 1)
        span = f"{release_text(start)}+" if last is None else (
            release_text(start) if last == start else f"{release_text(start)}-{release_text(last)}")
        hi = NEWEST if last is None else last
        read = f"v{'.'.join(map(str, start))} wheel" if hi == start else \
            f"v{'.'.join(map(str, start))}..v{'.'.join(map(str, hi))} wheels"
        self.release = f"SGLang {span} rules (read from the {read})"

    def since(self, version: Release) -> bool:
        return self.version >= version

    def batch_limits(self, hw):
        # SGLang sizes chunked prefill and running requests itself; kvplan only needs a bound for admission.
        why = default("SGLang has no vLLM-style batch defaults; kvplan bounds admission by the pool")
        return Tokens(8192, why), Count(1024, why)

    def memory_fraction(self, scenario, par):
        start, end = NSA_FIXED_SPAN
        if (start <= self.version < end and sparse_attention(self.kinds(scenario.sized_model))
                and "amd" not in scenario.hardware.name.lower()):
            given_too = "" if scenario.mem_fraction_static is None else (
                f" (it overrides the --mem-fraction-static {scenario.mem_fraction_static:g} given)")
            return Number(NSA_FIXED_FRACTION, derived("v0.5.3 sets 0.8 for DeepSeek NSA / DSA models",
                                                      f"0.8{given_too}", NSA_FIXED_SOURCE))
        if scenario.mem_fraction_static is not None:
            return Number(scenario.mem_fraction_static, given("--mem-fraction-static"))
        hw = scenario.hardware
        speculative = bool(scenario.spec_tokens or scenario.mtp_layers or scenario.draft is not None)
        if not self.since((0, 4, 8)):
            return self._fixed_fraction(hw, par, speculative)
        gib = hw.hbm_capacity_gib.value
        ps = par.tp * par.pp
        reserved = reserved_gib(gib, ps)
        value = sglang_default_mem_fraction(gib, ps)
        if value <= 0:
            raise KvplanError(f"{scenario.model.id} does not fit on {hw.id} with SGLang: its default reserve of "
                              f"{reserved:g} GiB leaves nothing of the {gib:g} GiB GPU",
                              "use a larger GPU, or give --mem-fraction-static")
        if self.since((0, 5, 3)):
            mb = gib * 1024
            attn_dp = par.dp if dp_attention(par) else 1
            a2a = scenario.moe_a2a_backend or "none"
            chunk = scenario.chunked_prefill_size
            prefill, prefill_why = self.prefill_graph_mb(scenario.sized_model, hw, par, mb, a2a, chunk)
            spec = next(v for since, v in SPEC_RESERVE_MB if self.since(since)) if speculative else 0.0
            deepep = DEEPEP_RESERVE_MB if a2a == "deepep" and self.since(DEEPEP_RESERVE_SINCE) else 0.0
            res_mb = reserved_mb(mb, par.tp * attn_dp, par.pp, attn_dp, prefill, spec + deepep, self.version, chunk)
            value = round((mb - res_mb) / mb, 3)
            extra = (f"; chunked prefill {chunk:,} as given (--chunked-prefill-size)" if chunk is not None else "") + (
                f"; prefill CUDA graphs: {prefill_why}" if prefill_why else "") + (
                f"; + {spec:,.0f} MB after the floor with speculative decoding" if spec else "") + (
                f"; + {deepep:,.0f} MB after the floor for DeepEP's buffers" if deepep else "")
            return Number(value, derived(
                "round((GPU MB - reserved) / GPU MB, 3), reserved = 512 + chunked prefill x 1.5 + TP x PP / 8 x 1024 "
                "+ decode CUDA-graph max_bs x 2 + prefill CUDA graphs (by release) (at least 10,240 above 60 GB; + "
                "DP attention's max_bs x DP x 3, x 4.5 above 300; + speculative decoding's and DeepEP's, by release)",
                f"round(({mb:,.0f} - {res_mb:,.0f}) / {mb:,.0f}, 3) = {value:g}{extra}", NEW_FRACTION_SOURCE,
                RESERVE_SOURCE, *((SMALL_GPU_SOURCE,) if 20 * 1024 <= mb < 35 * 1024 else ()),
                *((PREFILL_GRAPH_SOURCE,) if prefill_why else ()),
                *((SPEC_RESERVE_SOURCE,) if spec else ()),
                *((DEEPEP_SOURCE, A2A_GRAPH_SOURCE) if a2a != "none" else ())))
        extras = [(SPEC_RESERVE_GIB, "speculative decoding")] if speculative else []
        if dp_attention(par):
            extras.append((DP_ATTENTION_RESERVE_GIB, "DP attention"))
        if extras:
            reserved += sum(g for g, _ in extras)
            value = round((gib - reserved) / gib, 3)
        formula = "round((GPU memory - reserved) / GPU memory, 3), reserve buckets of v0.4.8-v0.5.2" + "".join(
            f" + {g:g} GiB with {what}" for g, what in extras)
        return Number(value, derived(formula, f"round(({gib:g} - {reserved:g}) / {gib:g}, 3) = {value:g}",
                                     FRACTION_SOURCE, *((RESERVE_EXTRAS_SOURCE,) if extras else ())))

    def prefill_graph_mb(self, model: ModelSpec, hw, par: Parallelism, gpu_mb: float,
                         a2a: str = "none", chunk: int | None = None) -> tuple[float, str]:
        """(MB, why) the default reserve holds for prefill CUDA graphs in this release (PREFILL_GRAPH_SOURCE), with
        the MoE all-to-all backend ``a2a`` (A2A_GRAPH_SOURCE); why is empty when the release captures none for this
        deployment by default."""
        if not self.since(PREFILL_GRAPHS_SINCE) or par.pp > 1 or "amd" in hw.name.lower():
            return 0.0, ""
        if a2a != "none" and (not self.since(BCG_A2A_SINCE) or a2a not in BCG_A2A_BACKENDS):
            return 0.0, ""
        mb, why = self._prefill_graphs(model, hw, par, gpu_mb, chunk)
        if mb and a2a == "deepep":
            return mb + DEEPEP_BCG_RESERVE_MB, why + " + 1 GiB for DeepEP under breakable graphs"
        return mb, why

    def _prefill_graphs(self, model: ModelSpec, hw, par: Parallelism, gpu_mb: float,
                        chunk: int | None = None) -> tuple[float, str]:
        """prefill_graph_mb without an all-to-all backend, past its release, PP and GPU checks; up to ``chunk`` tokens
        (--chunked-prefill-size as given; None: the GPU's default), the prefill graphs' max_bs (memory_hook.py)."""
        kinds = self.kinds(model)
        mla, dsa, dp = MLA in kinds, sparse_attention(kinds), dp_attention(par)
        if dp and not self.since(BCG_DP_SINCE):
            return 0.0, ""
        if mla and self.since(PREFILL_BCG_SINCE):
            if not self.since(BCG_DP_SINCE) or not (dsa or self.since(BCG_MLA_SINCE)):
                return 0.0, ""
            if not dsa and gpu_generation(hw) == "blackwell":   # the DeepSeek-V3 architecture on trtllm_mla
                return 0.0, ""
        if mla:
            return 1536.0, "1.5 GiB with an MLA backend"
        n = prefill_graph_sizes(chunked_prefill_mb(gpu_mb, self.version)) if chunk is None else \
            prefill_graph_sizes(chunk)
        return n * 8.0, f"{n} sizes x 8 MB"

    def _fixed_fraction(self, hw, par: Parallelism, speculative: bool) -> Number:
        """v0.4.6-v0.4.7's default mem_fraction_static (FIXED_FRACTION_SOURCE): no reserve, fixed fractions by
        parallel size on GPUs up to 81,920 MiB, a large-GPU rule above."""
        mib = hw.hbm_capacity_gib.value * 1024
        v047 = self.since((0, 4, 7))
        size = par.tp * par.pp   # v0.4.6 reads TP alone, and has no PP
        fixed = next(f for least, f in FIXED_FRACTIONS if size >= least)
        if not v047:
            if mib <= 81920:
                return Number(fixed, derived("v0.4.6: fixed by TP up to 81,920 MiB (0.88 / 0.87 / 0.85 / 0.81 / "
                                             "0.79 from TP 1 / 2 / 4 / 8 / 16)", f"TP {size}: {fixed:g}",
                                             FIXED_FRACTION_SOURCE))
            value = (mib - 13 * 1024) / mib
            return Number(value, derived("v0.4.6 above 81,920 MiB: (GPU MiB - 13 GiB) / GPU MiB",
                                         f"({mib:,.0f} - 13,312) / {mib:,.0f} = {value:.4f}", FIXED_FRACTION_SOURCE))
        value = fixed if mib <= 81920 else 0.88
        amd = "amd" in hw.name.lower()
        if mib > 180_000 and not amd:
            value, why = 0.79, "0.79 on a CUDA GPU above 180,000 MiB"
        elif mib > 96 * 1024:
            keep = 20 if speculative else 18
            value = min(value + 48 * 1024 * (1 - value) / mib, (mib - keep * 1024) / mib)
            why = f"min(0.88 + 48 GiB x 0.12 / GPU, (GPU - {keep} GiB) / GPU) above 96 GiB"
        else:
            why = f"fixed by TP x PP {size} up to 81,920 MiB" if mib <= 81920 else "0.88 from 81,920 MiB to 96 GiB"
            if speculative:
                value, why = value * 0.95, why + ", x 0.95 with speculative decoding"
        return Number(value, derived("v0.4.7's default mem_fraction_static", f"{why}: {value:.4f}",
                                     FIXED_FRACTION_SOURCE))

    def runtime_reserve(self, scenario):
        if scenario.runtime_reserve_bytes is not None:
            return given_reserve(scenario)
        return Bytes(0, default("SGLang reserves nothing below its fraction: CUDA graphs and activations live in "
                                "1 - mem_fraction_static", SOURCE))

    def driver_reserve_gib(self, hw) -> tuple[float, str]:
        """(GiB, source) the CUDA driver keeps below the preset's HBM (vLLM's driver-reserve rule; none on AMD); the
        budget also takes off the context and distributed set-up (INIT_GIB) to get the pre-load free memory."""
        from kvplan.engines.vllm import DRIVER_RESERVE_GIB, DRIVER_RESERVE_SOURCE, UNKNOWN_DRIVER_RESERVE_GIB

        amd = "amd" in hw.name.lower()
        driver = 0.0 if amd else DRIVER_RESERVE_GIB.get(hw.id.lower(), UNKNOWN_DRIVER_RESERVE_GIB)
        return driver, DRIVER_RESERVE_SOURCE

    def driver_measured(self, hw) -> bool:
        """Whether the CUDA driver reserve of ``hw`` is measured (vLLM's DRIVER_RESERVE_GIB) or is AMD's (none)."""
        from kvplan.engines.vllm import DRIVER_RESERVE_GIB

        return "amd" in hw.name.lower() or hw.id.lower() in DRIVER_RESERVE_GIB

    def budget(self, scenario, model, par):
        b = super().budget(scenario, model, par)
        if b.given_pool:
            return b
        hw = scenario.hardware
        driver, driver_src = self.driver_reserve_gib(hw)
        ranks = par.tp * par.pp * (par.dp if dp_attention(par) else 1)   # one process group spans them
        tp_group = par.tp * (par.dp if dp_attention(par) else 1)
        pcie = tp_group > 2 and hw.scale_up is None and "amd" not in hw.name.lower()
        init = INIT_GIB[0] if ranks == 1 else (INIT_GIB[0] + PCIE_NCCL_GIB if pcie else INIT_GIB[1])
        unmeasured = pcie and not self.driver_measured(hw)
        if unmeasured:   # driver reserve and context read together from a PCIe-only multi-GPU host
            driver, init = 0.0, PCIE_HIDDEN_GIB + PCIE_NCCL_GIB
        alone = ranks == 1 and not self.driver_measured(hw)   # the safe side, said in the row (WINDOWS_HIDDEN_GIB)
        host = hw.node.os if alone else None
        if host is not None:   # the preset names its host: that host's figure, driver reserve and context together
            driver, init = 0.0, PCIE_HIDDEN_GIB if host == "linux" else WINDOWS_HIDDEN_GIB
        hidden = int((driver + init) * 2**30)
        visible = Bytes(hw.hbm_bytes - hidden, derived(
            "HBM - CUDA driver reserve - CUDA context and distributed set-up (SGLang's pre-load free memory)" + (
                "; no custom all-reduce above two PCIe-only GPUs: the context and NCCL alone" if pcie else "") + (
                "; an unmeasured GPU on a PCIe-only Linux host: driver reserve and context 0.73 GiB together"
                if unmeasured else "") + (
                f"; an unmeasured GPU alone on a {host.capitalize()} host (the preset's [node] os): driver reserve "
                "and context together" if host else
                f"; an unmeasured GPU alone: the safe side, {WINDOWS_HIDDEN_GIB:g} GiB hidden under Windows / WSL2 "
                f"was seen, about {PCIE_HIDDEN_GIB:g} on Linux (up to {driver + init - PCIE_HIDDEN_GIB:.2f} GiB more "
                "pre-load memory; say the host with [node] os in the GPU preset)" if alone else "") + (
                f"; the preset's host ([node] os = {hw.node.os}) is not used: it sets the hidden memory only for one "
                "GPU without a measured driver reserve" if hw.node.os and not host else ""),
            f"{hw.hbm_capacity_gib.value:g} - {driver:g} - {init:g} GiB = {(hw.hbm_bytes - hidden) / 2**30:.2f} GiB",
            driver_src, INIT_SOURCE, *((PCIE_INIT_SOURCE,) if pcie else ()),
            *((PCIE_HIDDEN_SOURCE,) if unmeasured else ()), *((HOST_HIDDEN_SOURCE,) if host else ())))
        weights = b.weights
        if scenario.weights_bytes is None:
            load = LOAD_OVERHEAD_GIB[0] if ranks == 1 else LOAD_OVERHEAD_GIB[1]
            why = weights.why
            total = weights.number() + int(load * 2**30)
            weights = Bytes(total, derived(
                (why.formula if why else "weights per GPU") + " + what SGLang's weight load adds beyond the "
                "parameters (lazily loaded kernels, rotary caches, first collectives' buffers)",
                (f"{why.substituted} " if why else f"{weights.number():,} B ") + f"+ {load:g} GiB "
                f"({'one rank' if ranks == 1 else f'{ranks} ranks'}) = {total:,} B",
                *(why.sources if why else ()), LOAD_OVERHEAD_SOURCE))
        if dp_attention(par) and scenario.weights_bytes is None:
            weights = self._dp_attention_weights(scenario, model, par, weights)
        if gpu_generation(hw) == "blackwell" and scenario.weights_bytes is None and scenario.weight_dtype is None:
            extra, how = mxfp4_blackwell_padding(model, par)
            if extra:
                why = weights.why
                weights = Bytes(weights.number() + extra, derived(
                    (why.formula if why else "weights per GPU") + " + SGLang's MXFP4 expert padding on Blackwell",
                    f"{weights.number():,} + {how} = {weights.number() + extra:,} B",
                    *(why.sources if why else ()), MXFP4_PAD_SOURCE))
        nvfp4 = scenario.weight_dtype == "nvfp4" or (scenario.weight_dtype is None and model.weight_dtype == "nvfp4"
                                                     and model.weight_bytes is None)
        if nvfp4 and scenario.weights_bytes is None:
            extra, how = nvfp4_mla_bf16_bytes(model, par)
            if extra:
                why = weights.why
                weights = Bytes(weights.number() + extra, derived(
                    (why.formula if why else "weights per GPU") + " + what an NVFP4 (ModelOpt) MLA checkpoint keeps "
                    "in bf16 in SGLang: attention, router, embedding, LM head, the w_kc / w_vc copies",
                    f"{weights.number():,} + {how} = {weights.number() + extra:,} B",
                    *(why.sources if why else ()), NVFP4_MLA_SOURCE))
        out = budget_mod.waterfall(hw, b.fraction, self.fraction_name, weights, b.activation, b.runtime,
                                   visible=visible)
        return replace(out, hidden_label="- driver reserve, CUDA context, NCCL set-up")

    def _dp_attention_weights(self, scenario, model, par: Parallelism, weights: Bytes) -> Bytes:
        """kvplan's weights per GPU less what SGLang's DP attention splits over the whole TP group
        (dp_attention_split_params, DP_SPLIT_SOURCE), at the model's mean bytes per parameter."""
        if model.params_total is None:
            return weights
        total, _, _ = budget_mod.total_weight_bytes(model, scenario.weight_dtype, None)
        per_param = total / model.params_total.value
        params, what = dp_attention_split_params(model, scenario.moe_a2a_backend == "deepep")
        group = par.tp * par.dp
        saved = int(params * per_param * (1 - 1 / group) / par.pp)
        if saved <= 0:
            return weights
        value = weights.number() - saved
        why = weights.why
        return Bytes(value, derived(
            (why.formula if why else "weights per GPU") + "; under SGLang's DP attention less the LM head, dense "
            "MLPs and shared experts split over the whole TP group",
            f"{weights.number():,} - ({what}) params x {per_param:.3f} B x (1 - 1/{group}) = {value:,} B",
            *(why.sources if why else ()), DP_SPLIT_SOURCE))

    def activation_reserve(self, scenario, model, par):
        return Bytes(0, default("inside SGLang's 1 - mem_fraction_static headroom", FRACTION_SOURCE))

    # --- pages -------------------------------------------------------------------------------------------------
    def page_rule(self, model: ModelSpec, given_page: int | None, hardware) -> tuple[int, str, str]:
        """(page, why, source): the default attention backend's page for this model on this GPU, or what it makes
        of a given --page-size."""
        gen = gpu_generation(hardware)
        kinds = self.kinds(model)
        if sparse_attention(kinds) and given_page is None:
            return 64, "DeepSeek DSA/NSA (V3.2): page 64 x index_kpool", DSA_PAGE_SOURCE
        if MLA in kinds:
            if gen == "blackwell" and self.since((0, 5, 4)):
                if given_page in (32, 64):
                    return given_page, "trtllm_mla keeps a given page of 32 or 64", TRTLLM_MLA_SOURCE
                return 64, "Blackwell, v0.5.4+: DeepSeek-architecture MLA defaults to trtllm_mla, page 64", \
                    TRTLLM_MLA_SOURCE
            if given_page is not None:
                return given_page, "given", PAGE_SOURCE
            where = {"hopper": "Hopper: fa3", "blackwell": "Blackwell before v0.5.4: triton / flashinfer"}.get(
                gen or "", "a GPU kvplan cannot place (" + GPU_GENERATION_RULE + "); page_size's default")
            return 1, f"MLA, {where}, page 1", BACKEND_SOURCE + "; " + PAGE_SOURCE
        if gen == "blackwell" and self.since((0, 5, 7)):
            kept = (16, 32, 64, 128) if self.since((0, 5, 23)) else (16, 32, 64)
            if given_page is not None and given_page in kept:
                return given_page, f"trtllm_mha keeps a given page in {list(kept)}", TRTLLM_MHA_SOURCE
            return 64, "Blackwell, v0.5.7+: default backend trtllm_mha, page 64", TRTLLM_MHA_SOURCE
        if given_page is not None:
            return given_page, "given", PAGE_SOURCE
        return 1, "attention: fa3 (Hopper) or flashinfer, page 1", BACKEND_SOURCE + "; " + PAGE_SOURCE

    def block_size(self, model, given_tokens=None, hardware=None, kv_dtype=None):
        hardware, _ = self._hardware_and_dtype(hardware, kv_dtype)
        page, why, source = self.page_rule(model, given_tokens, hardware)
        if given_tokens is not None and page == given_tokens:
            return super().block_size(model, given_tokens)
        return Tokens(page, default(f"{self.release}: {why}", source))

    # --- cells -------------------------------------------------------------------------------------------------
    def _nsa_cell_bytes(self, kind, dtype: KVDtype, tp: int) -> int:
        """One layer's bytes per token in the profiling cell of a DeepSeek V3.2 (NSA/DSA) model."""
        if type(kind) is SparseIndexer:
            return kind.cache_bytes_per_token(dtype, tp) if self.since((0, 5, 4)) else 0
        if type(kind) is MLA and kind.stored_dtype(dtype) is KVDtype.FP8_DS_MLA and not self.since((0, 5, 17)):
            return KVDtype.FP8.vector_bytes(kind.latent_dim)     # 576 x 1 B: the raw latent, not the pool's 656
        return kind.cache_bytes_per_token(dtype, tp)

    def cell_size(self, model: ModelSpec, dtype: KVDtype, par: Parallelism) -> int:
        """Per-token bytes on one rank over this PP stage's layers: GQA heads per attention-TP rank, MLA latent
        whole, indexer added for NSA (by release), sliding layers counted like full ones; only attention layers of
        hybrid-linear models count (their mamba pool is separate)."""
        sparse = SparseIndexer in self.kinds(model)
        worst = 0
        for stage in pipeline_stages(model.num_layers, par.pp):
            cell = sum((self._nsa_cell_bytes(k, dtype, par.tp) if sparse else k.cache_bytes_per_token(dtype, par.tp))
                       for i in stage for k in model.layer_kinds[i] if self.spec_of(k) != "mamba pool")
            worst = max(worst, cell)
        return worst

    def pool_cell_size(self, model: ModelSpec, dtype: KVDtype, par: Parallelism) -> int:
        """Per-token bytes the pool allocates (the latent at its stored size, indexer included)."""
        worst = 0
        for stage in pipeline_stages(model.num_layers, par.pp):
            worst = max(worst, sum(k.cache_bytes_per_token(dtype, par.tp) for i in stage
                                   for k in model.layer_kinds[i] if self.spec_of(k) != "mamba pool"))
        return worst

    def state_bytes_per_request(self, model: ModelSpec, par: Parallelism) -> int:
        """The mamba pool's bytes for one request on the most loaded rank: SSM state fp32, conv state bf16."""
        worst = 0
        for stage in pipeline_stages(model.num_layers, par.pp):
            # the kinds kind_table puts in the mamba pool are the recurrent-state ones (GatedDeltaNet, Mamba2)
            states = [cast(RecurrentState, k) for i in stage for k in model.layer_kinds[i]
                      if self.spec_of(k) == "mamba pool"]
            worst = max(worst, sum(replace(k, ssm_dtype="fp32", conv_dtype="bf16").state_bytes(par.tp)
                                   for k in states))
        return worst

    def pool(self, model, dtype, par, rest_memory_bytes, page_size=None, hardware=None) -> SglangPool:
        cell = self.cell_size(model, dtype, par)
        page = int(self.block_size(model, page_size, hardware, dtype).value)
        tokens = rest_memory_bytes // cell if cell else 0
        tokens = tokens // page * page
        return SglangPool(cell, tokens, page)

    def report(self, scenario, model, par, pool_bytes, block):
        sg = self.pool(model, scenario.kv_dtype, par, pool_bytes, scenario.block_size, scenario.hardware)
        kinds = self.kinds(model)
        sparse = SparseIndexer in kinds
        cell_src = CELL_SOURCES[max(k for k in CELL_SOURCES if k <= self.version)] if sparse else SOURCE
        cell = TokenBytes(sg.cell_size_bytes, derived(
            "sum over this rank's attention layers of bytes per token" + (
                f" (DeepSeek V3.2 profiling cell, {self.release})" if sparse else ""),
            f"{sg.cell_size_bytes:,} B", cell_src))
        tokens = Tokens(sg.max_total_num_tokens, derived(
            "rest_memory // cell size, rounded down to whole pages",
            f"{pool_bytes:,} // {sg.cell_size_bytes:,} -> {sg.max_total_num_tokens:,} (page {sg.page_size})", SOURCE))
        page = self.block_size(model, scenario.block_size, scenario.hardware, scenario.kv_dtype)
        rows = [("cell size (bytes per token on this rank)", cell), ("max_total_num_tokens", tokens),
                ("page size (tokens)", page)]
        data = {"sglang_max_total_num_tokens": tokens, "sglang_cell_size_bytes": cell, "sglang_page_size": page}
        notes = []
        if SlidingWindowAttention in kinds:
            notes.append("SGLang splits hybrid-SWA pools by swa_full_tokens_ratio; kvplan reports the combined cell.")
        if sparse:
            pool_cell = self.pool_cell_size(model, scenario.kv_dtype, par)
            pool_v = TokenBytes(pool_cell, derived("sum over this rank's layers of the bytes the pool allocates",
                                                   f"{pool_cell:,} B", POOL_DIM_SOURCE))
            rows.append(("pool bytes per token (allocated)", pool_v))
            data["sglang_pool_bytes_per_token"] = pool_v
            if pool_cell != sg.cell_size_bytes:
                notes.append(f"This SGLang release sizes the token pool with a {sg.cell_size_bytes:,} B cell but "
                             f"allocates {pool_cell:,} B per token (fixed in v0.5.17).")
        if any(self.spec_of(k) == "mamba pool" for k in kinds.values()):
            state = self.state_bytes_per_request(model, par)
            state_v = Bytes(state, derived("sum over this rank's linear-attention / SSM layers of conv state (bf16) "
                                           "+ SSM state (fp32, SGLang's default)", f"{state:,} B", SSM_DTYPE_SOURCE))
            rows.append(("mamba pool state per request (SSM fp32)", state_v))
            data["sglang_state_bytes_per_request"] = state_v
            notes.append("SGLang keeps linear-attention / SSM state in a separate mamba pool, SSM state in fp32 by "
                         "default (from v0.5.9 a config's mamba_ssm_dtype wins); kvplan's request figures use the "
                         "model's state dtype.")
        a2a = scenario.moe_a2a_backend or "none"
        deepep = deepep_buffer(model, self.version) if par.ep is not None and par.ep > 1 and a2a in (
            "none", "deepep") else None
        if deepep is not None:
            rows.append(("DeepEP buffer (--moe-a2a-backend deepep; outside the pool)" if a2a == "deepep" else
                         "DeepEP buffer, if --moe-a2a-backend deepep (outside the pool)", deepep))
            data["sglang_deepep_buffer_bytes"] = deepep
            if deepep.number() > (DEEPEP_RESERVE_MB * 2**20 if self.since(DEEPEP_RESERVE_SINCE) else 0):
                notes.append("With --moe-a2a-backend deepep, DeepEP's buffer exceeds what this release reserves for "
                             "it below mem_fraction_static: lower --mem-fraction-static by the difference.")
        if scenario.mem_fraction_static is None and scenario.kv_pool_bytes is None and self.since((0, 5, 3)):
            notes.append("The default mem_fraction_static follows SGLang "
                         f"v{'.'.join(map(str, self.version))}'s reserve (chunked prefill, "
                         "decode and prefill CUDA graphs, TP x PP, DP attention's padding, speculative decoding, "
                         "DeepEP); multimodal encoders and post-capture sizing are not counted, so with those, give "
                         "--mem-fraction-static from the server log.")
        return EngineReport(f"SGLang accounting ({self.release})", tuple(rows), data, tuple(notes))


    # --- launch flags (kvplan recommend --emit sglang) -----------------------------------------------------------
    def pool_flags(self, plan, fraction: str) -> list[Flag]:
        """A --kv-pool given: SGLang's token pool is min(what --mem-fraction-static leaves, --max-total-tokens),
        in whole pages (``MAX_TOTAL_TOKENS_SOURCE``, every release kvplan models), so the fraction that leaves the
        pool (``Engine.pool_flags``) and the pool in tokens (``pool``: bytes // cell size, whole pages) as the cap."""
        s = plan.scenario
        sg = self.pool(s.sized_model, s.kv_dtype, s.parallelism, s.kv_pool_bytes, s.block_size, s.hardware)
        cap = Flag("--max-total-tokens", str(sg.max_total_num_tokens), f"the --kv-pool given in tokens: "
                   f"{s.kv_pool_bytes:,} B // {sg.cell_size_bytes:,} B per token, whole pages of {sg.page_size}; "
                   "SGLang's pool is at most this", None, MAX_TOTAL_TOKENS_SOURCE)
        return [*super().pool_flags(plan, fraction), cap]

    def launch_command(self, plan) -> LaunchCommand:
        """``python -m sglang.launch_server`` with the recommendation's layout, KV dtype, batch, memory fraction,
        length and host tier (HiCache). Each flag names the first release that has it as printed."""
        s, par = plan.scenario, plan.scenario.parallelism
        flags: list[Flag] = [Flag("--model-path", hub_model_id(s.model), "the model")]
        dp_attn = dp_attention(par)
        if dp_attn:   # experts over the DP ranks: SGLang's DP attention, its --tp-size spans every rank
            flags.append(Flag("--tp-size", str(par.tp * par.dp), f"SGLang's DP attention: --tp-size is every rank "
                              f"(attention TP {par.tp} x DP {par.dp})"))
        elif par.tp > 1:
            flags.append(Flag("--tp-size", str(par.tp), "the layout's TP degree"))
        if par.pp > 1:
            flags.append(Flag("--pp-size", str(par.pp), "the layout's PP degree", PP_SIZE_SINCE, PP_SIZE_SOURCE))
        if par.dp > 1:
            flags.append(Flag("--dp-size", str(par.dp), f"{par.dp} attention DP ranks, each with its own pool"
                              if dp_attn else f"{par.dp} replicas, each with its own pool"))
        if dp_attn:
            flags.append(Flag("--enable-dp-attention", None, f"attention data-parallel over {par.dp} ranks while "
                              f"the experts span EP {par.ep}"))
        a2a = s.moe_a2a_backend or "none"
        if a2a == "deepep" and self.version < MOE_A2A_SINCE:
            flags.append(Flag("--enable-deepep-moe", None, "DeepEP's all-to-all (given as --moe-a2a-backend deepep; "
                              "this release's spelling)", None, MOE_A2A_SOURCE))
        elif a2a != "none":
            flags.append(Flag("--moe-a2a-backend", a2a, "the MoE all-to-all backend given", MOE_A2A_SINCE,
                              MOE_A2A_SOURCE))
        if par.ep and par.ep > 1:
            flags.append(Flag("--ep-size", str(par.ep), f"experts spread over {par.ep} GPUs"))
            if self.version is not None and self.version < (0, 5, 0):
                flags.append(Flag("--enable-ep-moe", None, "releases before --moe-a2a-backend (PR #8658, merged "
                                  "2025-08-01) switch EP on with it"))
        sizing = self.sizing_flags(plan, "SGLang", self.kv_flags(), "--max-running-requests", "--mem-fraction-static",
                                   "--context-length", "--page-size")
        if dp_attn:   # SGLang splits the flag over the attention-DP ranks: give it the whole server's batch
            sizing = [replace(f, value=str(plan.batch.value * par.dp),
                              reason=f"{plan.batch.value} per attention-DP rank x {par.dp} ranks: SGLang gives each "
                              f"rank max_running_requests // dp_size", source=DP_RUNNING_SOURCE)
                      if f.flag == "--max-running-requests" else f for f in sizing]
        flags += sizing
        notes = []
        if plan.offload:
            # HiCache's host pool mirrors the device pool (write-through), so it must be larger than the device pool
            # (--hicache-ratio > 1; its documented example is 2): kvplan asks for 2 where the DRAM holds it, else
            # the largest ratio the DRAM per GPU allows.
            pool = int(plan.kv_pool_bytes.value)
            dram = plan.host_dram_bytes_per_gpu.value
            ratio = min(HICACHE_RATIO, dram / pool) if pool and dram else 0
            if ratio > 1:
                flags.append(Flag("--enable-hierarchical-cache", None, "HiCache: the host-DRAM tier", None,
                                  HICACHE_SOURCE))
                flags.append(Flag("--hicache-ratio", f"{math.floor(ratio * 100) / 100:g}",
                                  f"host pool / device pool: {ratio * pool / 2**30:,.1f} GiB of host DRAM per GPU "
                                  f"for the {pool / 2**30:,.1f} GiB pool (must exceed 1; the host has "
                                  f"{dram / 2**30:,.1f} GiB per GPU)", None, HICACHE_SOURCE))
            else:
                notes.append("the host DRAM per GPU is not larger than the device pool, and HiCache's host pool "
                             "must be: no HiCache flags")
        if dp_attn:
            notes.append(f"--max-running-requests is the whole server's under DP attention: SGLang gives each of the "
                         f"{par.dp} ranks max_running_requests // dp_size, here {plan.batch.value} (every release: "
                         "v0.4.6 managers/tp_worker.py .. v0.5.23 mem_cache/kv_cache_configurator.py "
                         "resolve_max_num_reqs)")
            if self.since((0, 5, 22)):
                notes.append(f"from v0.5.22 SGLang deprecates --enable-dp-attention (still accepted, with a warning) "
                             f"for --attn-dp-size {par.dp} in place of --dp-size {par.dp} --enable-dp-attention")
        notes.append("the radix (prefix) cache is on by default; no flag is needed")
        kept, omitted = keep_flags(flags, self.version, "SGLang")
        return LaunchCommand("sglang" if self.version is None else self.display_name,
                             "python -m sglang.launch_server", kept, omitted, tuple(notes))


ENGINE = SglangEngine(NEWEST)
_PINNED: dict[Release, SglangEngine] = {}


def for_release(version: Release) -> SglangEngine:
    """The adapter for one SGLang release (docs/engine-rules-by-release.md covers v0.4.6 .. v0.5.23)."""
    return pinned(SglangEngine, _PINNED, version, OLDEST, NEWEST, "sglang", "SGLang")


def sglang_cell_size(model, dtype, par, engine: SglangEngine | None = None) -> int:
    return (engine or ENGINE).cell_size(model, dtype, par)


def sglang_pool(model, dtype, par, rest_memory_bytes, page_size=None, hardware=None,
                engine: SglangEngine | None = None) -> SglangPool:
    return (engine or ENGINE).pool(model, dtype, par, rest_memory_bytes, page_size, hardware)
