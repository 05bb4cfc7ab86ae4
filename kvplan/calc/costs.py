"""The one cost model: what moving or rebuilding KV costs, in seconds. Every command prices through here.

* ``host_link_rate``: the effective host-link rate per direction (line rate x large-copy efficiency, or the
  user's ``--host-link-gbs``);
* ``swap_copies`` / ``swap_seconds``: one direction of a swap, t = n_copies x t_copy + bytes / (BW x f_bidir);
* ``compute_peak`` / ``recompute_seconds``: re-prefilling S - h tokens, T = F / (MFU x peak x TP GPUs), with
  F from ``kvplan.calc.flops``.

Sources: per-copy overhead ~2.3 us per cudaMemcpyAsync measured on H20 (github.com/taco-project/FlexKV/pull/193);
large-copy efficiency from measured pinned copies (github.com/tinygrad/open-gpu-kernel-modules/issues/29: RTX 5090
Gen5 56.3 / 57.3 of 64 GB/s); the bidirectional factor from the vLLM offloading-connector blog
(blog.vllm.ai/2026/01/08/kv-offloading-connector.html: 83.4 GB/s total vs ~50 GB/s one way, H100). Recompute
FLOPs follow DeepSeek-V3's ISCA'25 paper (arXiv 2505.09343 §2.2.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, cast

from kvplan.calc import flops
from kvplan.errors import KvplanError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.layers import MLA, FullAttention
from kvplan.specs.model import ModelSpec
from kvplan.specs.values import Count, Note, Number, Rate, Seconds, Value, default, derived, given, note

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.scenario import Scenario

DEFAULT_MFU = 0.45
DEFAULT_COPY_OVERHEAD_US = 2.3
DEFAULT_BIDIR_FACTOR = 0.83
LAYOUTS = ("contiguous", "per-layer")
COMPUTE_DTYPES = ("auto", "bf16", "fp16", "fp8", "fp4", "int8")

MFU_SOURCE = ("prefill MFU 0.45, inside the 30-50% end-to-end range usually quoted for prefill "
              "(zeroentropy.dev/concepts/mfu)")
COPY_SOURCE = ("~2.3 us per cudaMemcpyAsync, measured on H20 (github.com/taco-project/FlexKV/pull/193); "
               "t ~ n_copies x t_copy + bytes / BW_large")
BW_SOURCE = ("large pinned copies reach 56.3 / 57.3 of 64 GB/s on PCIe Gen5 "
             "(github.com/tinygrad/open-gpu-kernel-modules/issues/29)")
BIDIR_SOURCE = ("vLLM offloading-connector blog (blog.vllm.ai, 2026-01-08): bidirectional DMA 83.4 GB/s in total vs "
                "~50 GB/s single-direction on H100 with 2 MB blocks -> 41.7 / 50 = 0.83 per direction")
ASYNC_SOURCE = ("vLLM OffloadingConnector stores asynchronously; a preempted request's load back from CPU is on its "
                "critical path (vllm-project/vllm PR #29870). vLLM V0 swapped inside the engine step.")
LOCKSTEP_SOURCE = (
    "attention-DP ranks step together in ONE forward per iteration: each rank's scheduler picks its own batch (a "
    "prefill when its waiting queue has one, else its decode batch), then all-gathers every rank's token count and "
    "forward mode before the forward (prepare_mlp_sync_batch_raw: the local batch keeps its own forward mode, extend "
    "or decode; a rank without requests runs an idle batch; is_extend_in_batch is any rank's), "
    "sgl-project/sglang@01ac007 python/sglang/srt/managers/scheduler_dp_attn_mixin.py; vLLM: \"forward passes must "
    "be aligned\" and ranks without requests run dummy forward passes (docs.vllm.ai/en/v0.12.0/serving/"
    "data_parallel_deployment/; vllm/v1/engine/core.py DPEngineCoreProc). So every rank's MoE layers wait for the "
    "slowest rank: a rank decoding in a pass where another prefills runs its decode step in that pass, which lasts "
    "the prefill's time; ranks whose prompts wait at the same iteration prefill them in the same pass (attention per "
    "rank, the experts over every rank's tokens). Nothing aligns them by default (SGLang's PrefillDelayer is optional)"
    ": prompts arriving during a pass share the next one (PASS_SHARING_SOURCE)")
PASS_SHARING_SOURCE = (
    "kvplan's reading of LOCKSTEP_SOURCE under Poisson arrivals (Lambda = R x the rate per rank, T = one prompt's "
    "pass): a pass is started by one prompt; the prompts that arrive during a pass wait for the next iteration and "
    "share it, so a busy period of back-to-back passes has e^(Lambda T) passes (each continues with probability "
    "1 - e^(-Lambda T)) and 1 + Lambda T e^(Lambda T) prompts (Wald), N = Lambda T + e^(-Lambda T) prompts a pass, "
    "at most R (one prompt a rank); each rank's timeline then pays R / N passes per prompt of its own, each with the "
    "experts' FLOPs of N prompts (1 pass of R prompts saturated, as pd's prefill role; R passes of 1 prompt alone)")
PREFILL_PACKING_SOURCE = (
    "an engine that runs prefills as passes of their own packs the waiting prompts into one forward up to its token "
    "budget: vLLM V0 Scheduler._schedule_prefills takes the waiting queue in order while budget.can_schedule("
    "num_new_tokens=uncached tokens, num_new_seqs) holds (max_num_batched_tokens, max_num_seqs), else stops, and "
    "_schedule_default schedules no decode in a step that has prefills (github.com/vllm-project/vllm/blob/v0.7.3/"
    "vllm/core/scheduler.py); SGLang's PrefillAdder adds waiting requests to one prefill batch until its chunk "
    "budget (--chunked-prefill-size) or --max-prefill-tokens is spent (sgl-project/sglang v0.5.23 python/sglang/srt/"
    "managers/schedule_policy.py PrefillAdder.add_one_req, mem_cache/prefill_budget.py PrefillBudget)")
PASS_CREDIT_ROUNDS = 8   # Little's law rounds of a rank's decode batch at its rate (``with_pass_sharing``)
LAYOUT_SOURCE = ("vllm-project/vllm PR #27743 (>= 0.12): one contiguous block across all layers (Llama-3.1-8B 32 KB "
                 "-> 2 MB); the V0 layout copies each layer's K and V blocks separately")


@dataclass(frozen=True)
class CostSettings:
    """The cost model's tunable factors, each with a sourced default. ``mfu`` None: the GPU preset's prefill_mfu
    (compute-only, as the one prefill price takes it), else kvplan's generic one (``step_factors``)."""

    mfu: float | None = None
    compute_dtype: str = "auto"
    copy_overhead_us: float = DEFAULT_COPY_OVERHEAD_US
    bidir_factor: float = DEFAULT_BIDIR_FACTOR
    layout: str = "contiguous"
    sync_swap: bool = False

    def __post_init__(self) -> None:
        import math

        def ok(x, lo, hi):
            return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and lo <= x <= hi

        if self.mfu is not None and not ok(self.mfu, 0.01, 1):
            raise KvplanError(f"MFU {self.mfu!r} is not in [0.01, 1]", "give --mfu like 0.45 (a fraction of the peak)")
        if not ok(self.bidir_factor, 0.01, 1):
            raise KvplanError(f"bidirectional factor {self.bidir_factor!r} is not in [0.01, 1]",
                              "give --bidir-factor like 0.83 (1 = idle link)")
        if not ok(self.copy_overhead_us, 0, 1e6):
            raise KvplanError(f"per-copy overhead {self.copy_overhead_us!r} us is not a sensible non-negative number",
                              "give --copy-overhead-us like 2.3 (0 for none)")
        if self.layout not in LAYOUTS:
            raise KvplanError(f"unknown copy layout {self.layout!r}", "choose " + " or ".join(LAYOUTS))
        if self.compute_dtype not in COMPUTE_DTYPES:
            raise KvplanError(f"unknown compute dtype {self.compute_dtype!r}", "choose " + ", ".join(COMPUTE_DTYPES))


def host_link_rate(hw: HardwareSpec, override_gbs: float | None = None) -> Rate:
    """Effective bytes/s per direction of one GPU's host link."""
    link = hw.host_link
    if override_gbs is not None:
        return Rate(override_gbs * 1e9, given("--host-link-gbs"))
    theo = link.theoretical_gb_s_per_direction
    eff = link.large_copy_efficiency
    if eff is None:
        return Rate(theo.value * 1e9, derived(
            "line rate per direction (the preset has no large-copy efficiency)",
            f"{theo.value:g} GB/s ({link.name})", theo.cite()))
    bw = theo.value * eff.value * 1e9
    return Rate(bw, derived("line rate per direction x large-copy efficiency",
                            f"{theo.value:g} x {eff.value:g} = {bw / 1e9:.2f} GB/s ({link.name})",
                            theo.cite(), eff.cite(), BW_SOURCE))


def swap_copies(model: ModelSpec, context: int, block_tokens: int, layout: str) -> int:
    """Copies per direction per GPU. contiguous: one per block of the longest-held sequence (all layers in one
    copy), plus one for fixed state if any; per-layer: each layer's own copies (K and V apart)."""
    if layout == "per-layer":
        return sum(g.count * g.kind.swap_copies(context, block_tokens) for g in model.groups)
    held = max(g.kind.tokens_held(context) for g in model.groups)
    has_state = any(g.kind.state_bytes() for g in model.groups)
    return -(-held // block_tokens) + (1 if has_state else 0)


def swap_seconds(nbytes: int, copies: int, rate_bytes_s: float, settings: CostSettings, shared_link: bool = True
                 ) -> float:
    """One direction: n_copies x per-copy overhead + bytes / (rate x bidirectional factor when the link is shared)."""
    factor = settings.bidir_factor if shared_link else 1.0
    return copies * settings.copy_overhead_us * 1e-6 + nbytes / (rate_bytes_s * factor)


# Weight dtypes whose GEMMs run at the peak of another dtype than the preset model's (--weight-dtype): FP8
# checkpoints run W8A8 on the FP8 matrix cores where the GPU has them; int4 (AWQ / GPTQ, W4A16) dequantizes to 16 bit
# inside the kernel and multiplies at the BF16 peak (vLLM's Marlin / AWQ kernels take fp16/bf16 activations,
# vllm-project/vllm@2ab31a8 vllm/model_executor/layers/quantization/awq_marlin.py,
# AWQMarlinLinearMethod); bf16 / fp16 / int8 (weight-only)
# at the BF16 peak. 4-bit float overrides (nvfp4, mxfp4) keep the preset model's rule: their activation dtype
# depends on the kernel and GPU and is not settled here.
FOLLOWS_WEIGHT_DTYPE = ("fp8", "int4", "int8", "bf16", "fp16", "fp32")


def compute_dtype_for(model: ModelSpec, hw: HardwareSpec, requested: str, weight_dtype: str | None = None) -> str:
    """The dtype whose dense peak prices the GEMMs: ``requested`` unless "auto"; then FP8 where the weights are FP8
    and the GPU has an FP8 peak, else BF16. ``weight_dtype``: the scenario's --weight-dtype, which the sized model
    does not carry (it keeps the preset's dtype) and which decides when it is one of FOLLOWS_WEIGHT_DTYPE."""
    dtype = requested
    if dtype == "auto":
        wd = weight_dtype if weight_dtype in FOLLOWS_WEIGHT_DTYPE else model.weight_dtype
        dtype = "fp8" if wd == "fp8" and "fp8" in hw.dense_tflops else "bf16"
    if not hw.dense_tflops:
        raise KvplanError(f"{hw.id} has no dense_tflops in its preset, which the recompute price needs",
                          "add [dense_tflops] bf16 = { value = ..., source = \"...\" } to the hardware preset")
    if dtype not in hw.dense_tflops:
        raise KvplanError(f"{hw.id} has no dense {dtype} peak in its preset",
                          "choose --compute-dtype " + " or ".join(sorted(hw.dense_tflops)))
    return dtype


def compute_peak(hw: HardwareSpec, dtype: str) -> float:
    """Dense peak FLOP/s of one GPU in ``dtype``."""
    return hw.dense_tflops[dtype].value * 1e12


def recompute_seconds(model: ModelSpec, context: int, prefix: int, mfu: float, peak_flops: float, tp: int) -> float:
    """The compute floor of a re-prefill of tokens prefix..context on ``tp`` GPUs: F / (MFU x peak x TP). The price
    the commands use is ``StepModel.prefill_seconds``, which adds each chunk's weight reads and fixed overhead."""
    return flops.prefill_flops(model, context, prefix) / (mfu * peak_flops * tp)


# === the decode step and the prefill ==============================================================================
# One replica (a TP x PP group; with attention data-parallelism, one DP rank and the EP group its experts span).
# A step's time is the sum over operators of a per-operator roofline, max(bytes / (HBM peak x hbm), FLOPs /
# (dense peak x mfu)), plus communication and fixed overhead. Operators, each summed over the model's layers:
#   dense GEMMs: the non-expert weights on this GPU (attention projections, dense MLPs, shared experts, LM head),
#                2 x (N_mm - routed active params) / TP FLOPs per token; and at least gemms x gemm_floor_us, since
#                each decode GEMM kernel takes a floor whatever its bytes (decode_gemms counts them: each layer
#                kind's own projections, the MLPs, routers, shared experts and LM head). The sum of per-GEMM maxima
#                is bounded below by max(sum of byte times, sum of floors): exact when every GEMM is under the
#                floor (DeepSeek or gpt-oss at TP8) or every one over it (Llama-3.1-8B at TP1).
#   MoE GEMMs:   the distinct routed experts the step's tokens touch on this GPU, E x (1 - (1 - k/E)^T) of them
#                for T tokens through the EP group, 2 x routed active params / TP FLOPs per token;
#   attention:   every request's cache bytes at its context on this GPU (each layer kind's decode_read_bytes:
#                windows capped, MLA latents whole on every rank, sparse top-k, state read and written) and its
#                FLOPs (decode_flops: GQA 4 x q_heads x head_dim x S, MLA in the absorbed form, ...).
# Communication: 2 TP all-reduces per layer and, with an EP group wider than the TP group (EP over attention-DP
# ranks), a dispatch and a combine per MoE layer, each latency + bytes / (link x link efficiency); PP adds a send
# per stage boundary. Overhead: per layer and per step.
# EP inside the TP group (EP <= TP, no attention DP) has no all-to-all: every TP rank already holds the step's
# tokens after the attention all-reduce, runs its local experts, and the MoE output's all-reduce (one of the two
# per layer) combines them. vLLM: FusedMoEParallelConfig.use_all2all_kernels = dp_size > 1 and use_ep
# (vllm-project/vllm@00c1c6a vllm/model_executor/layers/fused_moe/config.py); SGLang: the default
# --moe-a2a-backend none "disables all-to-all for EP. Uses All-Reduce or All-Gather for token dispatch"
# (sgl-project/sglang@020017c docs/advanced_features/expert_parallelism.md). An explicit all-to-all backend at
# EP = TP without attention DP (SGLang --moe-a2a-backend deepep) is not modelled.

MLA_BF16_SOURCE = (
    "MLA's core attention runs in BF16 while the matmuls run in FP8: \"matrix multiplications and dispatch "
    "transmissions adopt the FP8 format ..., while core MLA computations and combine transmissions use the BF16 "
    "format\" (DeepSeek's inference-system overview, github.com/deepseek-ai/open-infra-index 202502OpenSourceWeek/"
    "day_6_one_more_thing_deepseekV3R1_inference_system_overview.md); vLLM's MLA prefill up-projects the latent and "
    "runs FlashAttention on the model's BF16 activations (vllm-project/vllm@37fa5c0 vllm/v1/attention/backends/mla/"
    "common.py, the \"compute friendly approach\" for prefill), as SGLang's DeepSeek prefill (MHA mode, "
    "python/sglang/srt/models/deepseek_v2.py forward_normal)")

# A prefill chunk's TP all-reduce moves chunk tokens x hidden x 2 B per layer, megabytes (7,168 x 2 B x 4,096
# tokens = 58.7 MB for DeepSeek), where the decode step's allreduce_link (the custom all-reduce's share of the link
# at 4 KB - 1 MB, github.com/sgl-project/sglang/pull/2904) does not apply: kvplan prices it at the preset's `link`
# efficiency, the large-message bus bandwidth of an NCCL all-reduce (H100: ~370 of 450 GB/s,
# github.com/NVIDIA/nccl-tests/issues/212), with the decode all-reduce's latency per call.
PREFILL_ALLREDUCE_SOURCE = ("a prefill chunk's TP all-reduce is a large message (chunk x hidden x 2 B): priced at "
                            "the scale-up link x efficiency.link, NCCL's large-message all-reduce bus bandwidth "
                            "(github.com/NVIDIA/nccl-tests/issues/212), 2 per layer, not overlapped")

# A TP group wider than the scale-up domain (DeepSeek-R1 at TP16 over two 8-GPU H100 nodes) all-reduces through NCCL,
# not the engines' custom all-reduce (vLLM's and SGLang's run inside one NVLink domain only). NCCL's ring moves
# S x 2(n-1)/n bytes per rank (nccl-tests doc/PERFORMANCE.md, "AllReduce": t = (S / B) x 2(n-1)/n, B the rank's
# bottleneck "NVLink, PCI, QPI, or network"). Across nodes each ring channel leaves a node through one NIC and NCCL
# runs its channels over all the node's NICs, so the ring's bus bandwidth is the node's total NIC rate: "If we use
# ring, the busbw is going to reflect exactly what's going through the NICs" (NCCL maintainer,
# github.com/NVIDIA/nccl-tests/issues/160), a DGX-A100 with 8 x 200 Gb/s NICs measuring 192 GB/s all-reduce busbw
# (github.com/NVIDIA/nccl/issues/812), 46-48 GB/s per 400 Gb/s NIC (github.com/NVIDIA/nccl-tests/issues/290).
# kvplan prices it at the slower of the scale-up link x efficiency.link and the node's GPUs x the preset's NIC rate
# per GPU x efficiency.link (the decode step's NIC efficiency), with NCCL's latency per call (efficiency.
# link_latency_us, nccl-tests' small all-reduce outside CUDA graphs) in place of the custom all-reduce's. On two
# nodes NCCL may pick its tree, which moves fewer bytes over the NICs (nccl/issues/812); not priced (the ring is the
# upper bound of the two).
CROSS_NODE_ALLREDUCE_SOURCE = (
    "a TP all-reduce across nodes runs on NCCL's ring: S x 2(n-1)/n bytes per rank over the slowest link "
    "(github.com/NVIDIA/nccl-tests doc/PERFORMANCE.md), the node's NICs together, one ring channel per NIC ('the busbw "
    "is going to reflect exactly what's going through the NICs', github.com/NVIDIA/nccl-tests/issues/160; 8 x 200 "
    "Gb/s NICs -> 192 GB/s busbw, github.com/NVIDIA/nccl/issues/812): min(scale-up link, GPUs per node x NIC per GPU) "
    "x efficiency.link, NCCL's latency per call (efficiency.link_latency_us)")


# A decode step's TP all-reduces (2 per layer, batch x hidden x 2 B: 14 KB at batch 1, 459 KB at 32 for DeepSeek) on a
# TP group that spans nodes do not run on the engines' custom all-reduce either: vLLM's CustomAllreduce returns before
# setup when not all(in_the_same_node_as(group)) ("Custom allreduce is disabled because this process group spans
# across nodes", vllm/distributed/device_communicators/custom_all_reduce.py) and SGLang's copy of it logs the same
# line for a multi-node TP group (sgl-project/sglang@004e656 python/sglang/srt/distributed/device_communicators/
# custom_all_reduce.py; a world of 16 is also outside its _SUPPORTED_WORLD_SIZES), so it falls back to NCCL (pynccl).
# NCCL's small-message all-reduce over two 8-GPU Hopper nodes with one ConnectX-7 NDR (400 Gb/s) NIC per GPU takes
# 46.3-47.8 us for 4 B - 512 B in nccl-tests, outside an engine (NCCL 2.21.5; github.com/NVIDIA/nccl/issues/1244, 16 x
# H20, the first table). Inside a serving engine a decode step pays more per call: on DeepSeek-R1-0528 at TP16 over two
# 8 x H100 nodes over InfiniBand (github.com/tenstorrent/tt-inference-server/issues/356), 46 us left vLLM's and SGLang's
# concurrency-1 steps 12.2 and 10.6 ms short (25.9 and 23.1 ms measured), the same ~10.5 ms SGLang misses at
# concurrency 32 (the harness's lockstep waves: a plain step), i.e. a cost per call, not per token. kvplan takes
# 139 us per call, the least-squares fit of the relative error (1 us grid) on the two concurrency-1 points alone,
# pre-registered as rule R3 in benchmarks/tpot_fidelity.py; held out, concurrency 32 is then -23% (vLLM) and +2.5%
# (SGLang), from -48% and -32% at 46 us. Plus the message's ring bytes at the cross-node bus bandwidth
# (CROSS_NODE_ALLREDUCE_SOURCE).
# What makes up the ~93 us above nccl-tests (host proxy progress of NCCL's network sends inside CUDA graphs, the
# ranks' skew at each of the step's 122 barriers, the engines' per-step CPU broadcast across nodes) is not measured
# by any source found: a fitted figure from one H100 cluster, used for every GPU and any number of nodes, and an upper
# bound: the same cluster's one-node vLLM step (DeepSeek-R1-0528-AWQ at TP8, issue 356's table of 2025-07-10) is 7.2 ms
# slower than kvplan with no cross-node call in it, so part of the excess may not be cross-node (~86 us a call if all
# of it carried over; docs/decode-measurements.md, tpot20c).
CROSS_NODE_DECODE_ALLREDUCE_US = 139.0
CROSS_NODE_DECODE_ALLREDUCE_SOURCE = (
    "a decode step's TP all-reduce across nodes runs on NCCL, not the custom all-reduce (vLLM's and SGLang's "
    "custom_all_reduce.py: 'disabled because this process group spans across nodes'): 139 us per call inside a "
    "serving engine, fitted (tpot_fidelity rule R3) on vLLM's and SGLang's concurrency-1 decode of DeepSeek-R1-0528 at "
    "TP16 over two 8 x H100 nodes (github.com/tenstorrent/tt-inference-server/issues/356); nccl-tests outside an "
    "engine: 46.3-47.8 us at 4-512 B (github.com/NVIDIA/nccl/issues/1244); + ring bytes at the cross-node bus "
    "bandwidth")

def scale_up_domain(hw: HardwareSpec) -> int:
    """GPUs on one scale-up (NVLink) domain: the preset's scale_up.domain_gpus where it has one (an NVL72 rack of
    4-GPU trays), else one node."""
    return hw.scale_up.domain_gpus if hw.scale_up and hw.scale_up.domain_gpus else hw.node.gpus_per_node


def cross_node_allreduce_rate(hw: HardwareSpec, f: StepFactors, tp: int) -> float | None:
    """Bytes/s of a TP all-reduce's bus bandwidth when the TP group of ``tp`` GPUs spans more than one scale-up
    domain (CROSS_NODE_ALLREDUCE_SOURCE): min(scale-up link, GPUs per node x NIC per GPU) x efficiency.link; None
    when TP fits in the domain or the preset has no NIC rate."""
    nic = hw.node.nic_gb_s_per_direction_per_gpu
    if tp <= scale_up_domain(hw) or nic is None:
        return None
    rate = hw.node.gpus_per_node * nic.value * 1e9
    link = hw.scale_up.gb_s_per_direction if hw.scale_up else None
    if link is not None:
        rate = min(rate, link.value * 1e9)
    return rate * f.value("link")

# A prefill's EP dispatch and combine run on DeepEP's normal (high-throughput) kernels (SGLang's --moe-a2a-backend
# deepep in prefill, as LMSYS's large-EP prefill runs). DeepEP's legacy (V1) README figures, measured on H800 with one
# CX7 400 Gb/s NIC per GPU (~50 GB/s) and ~160 GB/s NVLink, DeepSeek-V3's setting (4,096 tokens, hidden 7,168,
# top-4 groups, top-8 experts, FP8 dispatch, BF16 combine): internode bottleneck bandwidth (RDMA) dispatch / combine
# 43 / 43 GB/s at EP16, 58 / 57 at EP32, 51 / 50 at EP64; intranode (NVLink) 153 / 158 GB/s at EP8
# (github.com/deepseek-ai/DeepEP@dd758ca docs/legacy.md "Performance"; the README at 77bb07a). Their test counts the
# logical bytes: one copy of a token per node its experts touch, the token's own node included, FP8 with one 4-byte
# scale per 128 values (tests/test_internode.py@77bb07a: num_rdma_token_sent x hidden, fp8_factor (1 + 4/128) / 2 of
# BF16). kvplan takes each figure as a share of the link it ran on (RDMA: of the 50 GB/s NIC; NVLink: of the 160
# GB/s) and applies it to the preset's link: NIC line rate per GPU across nodes, scale-up line rate x link
# efficiency inside the scale-up domain.
DEEPEP_SOURCE = ("DeepEP normal kernels (github.com/deepseek-ai/DeepEP@dd758ca docs/legacy.md, Performance: H800, "
                 "CX7 400 Gb/s; DeepSeek-V3 setting, FP8 dispatch, BF16 combine): internode dispatch / combine 43 / 43 "
                 "GB/s at EP16, 58 / 57 at EP32, 51 / 50 at EP64 of a ~50 GB/s NIC; intranode 153 / 158 GB/s of "
                 "~160 GB/s NVLink; logical bytes = one copy per node (internode) or GPU (intranode) a token's "
                 "experts touch, own included (tests/test_internode.py@77bb07a); no overlap with compute priced")
DEEPEP_INTERNODE_SHARE = {16: (43 / 50, 43 / 50), 32: (58 / 50, 57 / 50), 64: (51 / 50, 50 / 50)}
DEEPEP_INTRANODE_SHARE = (153 / 160, 158 / 160)
FP8_DISPATCH_BYTES = 1 + 4 / 128     # per hidden value: FP8 plus one FP32 scale per 128 (DeepEP's fp8_factor)


def touched_groups(groups: float, experts: int, top_k: int) -> float:
    """Expected number of ``groups`` equal groups of ``experts`` (nodes or GPUs) that ``top_k`` distinct experts
    drawn uniformly touch: groups x (1 - C(E - E/groups, k) / C(E, k)). Node-limited routing (DeepSeek-V3's
    topk_group) caps it at its group limit; kvplan does not cap it (the limit, 4 nodes, is no bound at 4 nodes
    or fewer)."""
    if groups <= 1 or not experts or not top_k:
        return min(groups, 1.0)
    per = experts / groups
    miss = 1.0
    for i in range(top_k):
        miss *= max(experts - per - i, 0.0) / (experts - i)
    return groups * (1 - miss)


def prefill_ep_price(hw: HardwareSpec, f: StepFactors, ep: int, tp: int, experts: int, top_k: int, hidden: int,
                     fp8_dispatch: bool) -> tuple[float, float] | None:
    """(latency s, s per prompt token of one TP rank) of one MoE layer's prefill dispatch + combine over an EP group
    of ``ep`` GPUs wider than TP, on DeepEP's normal kernels (DEEPEP_SOURCE); None without a link rate. Across nodes
    (EP beyond the scale-up domain): each token goes once to each node its top-k experts touch, at DeepEP's RDMA
    share of the NIC for the nearest EP size measured; inside the domain: once to each GPU touched, at its NVLink
    share of the scale-up link. A TP rank of a token's tokens sends 1 / TP of them."""
    domain = (hw.scale_up.domain_gpus if hw.scale_up and hw.scale_up.domain_gpus else None) or hw.node.gpus_per_node
    dispatch = FP8_DISPATCH_BYTES if fp8_dispatch else 2.0
    if ep <= domain:
        link = hw.scale_up.gb_s_per_direction if hw.scale_up else None
        if link is None:
            return None
        rate = link.value * 1e9 * f.value("link")
        share_d, share_c = DEEPEP_INTRANODE_SHARE
        copies = touched_groups(ep, experts, top_k)
    else:
        nic = hw.node.nic_gb_s_per_direction_per_gpu
        if nic is None:
            return None
        rate = nic.value * 1e9
        key = min(DEEPEP_INTERNODE_SHARE, key=lambda n: (abs(n - ep), n))
        share_d, share_c = DEEPEP_INTERNODE_SHARE[key]
        copies = touched_groups(ep / hw.node.gpus_per_node, experts, top_k)
    per_token = copies * hidden * (dispatch / share_d + 2.0 / share_c) / rate / tp
    return 2 * f.value("link_latency_us") * 1e-6, per_token


# A vLLM step that mixes prefill chunks into the decode batch is one forward pass over the flattened tokens: each MoE
# layer dispatches and combines once, every token of the step together, through the one all-to-all manager the
# process built from --all2all-backend (ParallelConfig.all2all_backend, default "allgather_reducescatter"; the
# DeepEP backends, when chosen, run for every step alike): vllm-project/vllm vllm/config/parallel.py
# (all2all_backend) and vllm/distributed/device_communicators/all2all.py (AgRsAll2AllManager.dispatch: one
# all_gatherv of every DP rank's rows by their counts; combine: one reduce_scatterv), read at the stored snapshot
# 0014300; the NCCL all_gatherv is grouped broadcasts, one per root (device_communicators/pynccl.py). So a mixed
# step pays each latency once, and a chunk's rows add, on every rank, the time to broadcast them once and to reduce
# their outputs once: 2 x hidden x 2 B a token at the link, not DeepEP's normal-kernel price of a prefill-only step
# nor the decode price's top-k x (EP - 1) / EP copies (StepModel.mixed_ep_per_token). At EP8 on H200 NVLink:
# 2 x 7,168 x 2 B / (450 GB/s x 0.82) = 0.078 us a token (DeepEP normal 0.32 us; the decode price 0.54 us).
MIXED_STEP_A2A_SOURCE = ("vLLM: one all-to-all backend per process (--all2all-backend, default "
                         "allgather_reducescatter: all_gatherv dispatch, reduce_scatterv combine) and one dispatch / "
                         "combine per MoE layer for every token of a step, prefill chunks and decode tokens together "
                         "(vllm-project/vllm vllm/config/parallel.py all2all_backend; vllm/distributed/"
                         "device_communicators/all2all.py AgRsAll2AllManager)")

# Generic defaults for a GPU whose preset has no [efficiency] table. Each is a rule of thumb with its source.
GENERIC_FACTORS = {
    "hbm": (0.80, "generic: memory-bound copies reach 0.78-0.87 of peak HBM bandwidth on A100, H100, H200 and MI300X "
                  "(github.com/Azure/AI-benchmarking-guide Azure_Results, HBM Bandwidth)"),
    "mfu": (0.60, "generic: large dense GEMMs reach 0.44-0.82 of the datasheet peak on A100-MI300X "
                  "(github.com/Azure/AI-benchmarking-guide Azure_Results, GEMM)"),
    "prefill_mfu": (DEFAULT_MFU, MFU_SOURCE),
    "link": (0.75, "generic: 8-GPU all-reduce bus bandwidth reaches 0.71-0.82 of the scale-up link "
                   "(github.com/Azure/AI-benchmarking-guide; github.com/NVIDIA/nccl-tests/issues/212)"),
    "link_latency_us": (30.0, "generic: a 1 KB all-reduce over 8 GPUs takes 26-49 us outside CUDA graphs "
                              "(github.com/Azure/AI-benchmarking-guide Azure_Results, NCCL/RCCL Bandwidth)"),
    "overhead_us_per_layer": (15.0, "generic, from H100: the vLLM FP8 KV-cache blog's Llama-3.1-8B batch-1 ITL "
                                    "intercept 6.44 ms less the weight read leaves 0.93 ms = 32 x 15 us + 450 us"),
    "overhead_us_per_step": (450.0, "generic, from H100: see overhead_us_per_layer"),
    "overhead_us_per_moe_layer": (21.0, "generic, fitted (least squares over a 1 us grid, the per-GEMM floor "
                                        "and vLLM's in-graph all-reduce priced; 13 us under the generic "
                                        "all-reduce) to one source: gpt-oss-120b MXFP4 on 8 x H100 at TP8, 1K/1K, "
                                        "vLLM, TPOT 3.72-7.36 ms at concurrency 4-64 (github.com/SemiAnalysisAI/"
                                        "InferenceX/issues/828); the routing, permutation and grouped-GEMM launch "
                                        "of each MoE layer beyond its GEMM floors (checked on DeepSeek-R1, SGLang, "
                                        "8 x H200: InferenceX/issues/870)"),
    "allreduce_latency_us": (9.3, "generic, from H100: a decode step's small TP all-reduce runs inside the CUDA graph "
                                  "on the engine's custom all-reduce, 9.3 us for 4 KB at TP8 on H100 (vLLM's, "
                                  "measured even without graphs; github.com/sgl-project/sglang/pull/2904), not "
                                  "nccl-tests' 26-49 us outside graphs"),
    "allreduce_link": (0.114, "generic, from H100: the same custom all-reduce takes 45.0 us for 1 MB at TP8 "
                              "(github.com/sgl-project/sglang/pull/2904), so (45.0 - 9.3) us = 1.75 x 1 MB / "
                              "(450 GB/s x 0.114): decode-sized messages see a small share of the link"),
    "overhead_us_per_request": (15.0, "generic, fitted with overhead_us_per_moe_layer to one source: gpt-oss-120b on "
                                      "8 x H100 TP8, vLLM, concurrency 4-64 (github.com/SemiAnalysisAI/InferenceX/"
                                      "issues/828): the TPOT slope over batch beyond the kernels' (per request per "
                                      "step: scheduling, input preparation, sampling, output processing)"),
    "gemm_floor_us": (10.3, "generic, from Hopper: a decode-shaped GEMM takes at least ~10 us whatever its bytes: "
                            "DeepGEMM block-FP8 at DeepSeek's TP8 shapes, M = 1, 10.3 us for N = 3,072, K = 1,536 "
                            "(4.7 MB) and 13.6 us for N = 512, K = 7,168 (3.7 MB) (github.com/sgl-project/sglang/pull/"
                            "5820); Triton block-FP8 N = 2,112, K = 7,168 on H100, 1.30 TFLOP/s at M = 1 = 23 us for "
                            "15 MB (github.com/vllm-project/vllm/pull/23280): the smallest, 10.3 us, is the floor"),
    "upcast_hbm": (None, "generic: as hbm (weights in a dtype the GPU has no matrix cores for stream like any)"),
    "upcast_moe_us": (0.0, "generic: no fixed latency beyond the experts' bytes for experts upcast in-kernel (a GPU "
                           "preset sets it where its default MoE path for such experts is latency-bound at decode)"),
}

# Weight dtypes a GPU multiplies natively only if its preset lists that dense peak; otherwise the GEMM kernels
# upcast them in-kernel (e.g. MXFP4 on MI300X/gfx942: vLLM ROCm runs the MoE with triton_kernels' matmul_ogs on
# BF16 matrix cores, vllm-project/vllm vllm/model_executor/layers/quantization/mxfp4.py get_mxfp4_backend), and
# they stream at the GPU's upcast_hbm.
NATIVE_KEY = {"mxfp4": "fp4", "nvfp4": "fp4", "fp8": "fp8", "int8": "int8", "int4": "int4"}


def upcast(dtype: str | None, hw: HardwareSpec) -> bool:
    """Whether weights of ``dtype`` are upcast in-kernel on ``hw`` (no dense peak of theirs in the preset)."""
    key = NATIVE_KEY.get(dtype or "")
    return key is not None and key not in (hw.dense_tflops or {})


STEADY_SAMPLES = 257  # contexts a steady batch's mean request is averaged over (every command: one TPOT per batch)
COHORT_POINTS = 65    # steps a cohort's mean step is integrated over


def steady_contexts(prompt: int, decode: int):
    """The contexts a steady batch is averaged over: STEADY_SAMPLES midpoints of prompt..prompt+decode, whatever the
    batch. Under continuous batching each request slot cycles through every context of the decode, so over the
    decode the batch's mean request is the mean over the whole range (a batch of 1 included: its mean TPOT)."""
    import numpy as np

    return prompt + (np.arange(STEADY_SAMPLES) + 0.5) * decode / STEADY_SAMPLES


@dataclass(frozen=True)
class EngineTerm:
    """One term the engine adapter puts into the cost model (``engine_factors``, ``step_model``, ``frontend_seconds``):
    ``value`` is the very typed value the price is computed from (a factor the term replaces IS this value), with
    its formula, numbers and source; ``key`` names it in JSON, ``label`` in a table; ``factor`` is the StepFactors
    field it sets or adds to (None: a term of its own)."""

    key: str
    label: str
    value: Value
    factor: str | None = None


@dataclass(frozen=True)
class StepFactors:
    """The efficiency factors in use, each a typed value saying where it came from; ``engine_terms``: what the
    engine adapter changed in them (``engine_factors``), in the order applied."""

    hbm: object
    mfu: object
    prefill_mfu: object
    link: object
    link_latency_us: object
    overhead_us_per_layer: object
    overhead_us_per_step: object
    overhead_us_per_moe_layer: object
    allreduce_latency_us: object
    allreduce_link: object
    overhead_us_per_request: object
    upcast_hbm: object
    gemm_floor_us: object
    upcast_moe_us: object
    engine_terms: tuple[EngineTerm, ...] = ()

    def value(self, name: str) -> float:
        return float(getattr(self, name).value)


def step_factors(hw: HardwareSpec, **overrides: float | None) -> StepFactors:
    """The factors: a value given (--hbm-efficiency, --mfu, --overhead-us, ... or a calibration), else the hardware
    preset's [efficiency], else kvplan's generic default."""
    from kvplan.specs.hardware import CALIBRATED
    from kvplan.specs.values import default

    flags = {"hbm": "--hbm-efficiency", "mfu": "--mfu", "prefill_mfu": "--prefill-mfu",
             "link": "--link-efficiency", "link_latency_us": "--link-latency-us",
             "overhead_us_per_layer": "--overhead-us", "overhead_us_per_step": "--step-overhead-us",
             "overhead_us_per_moe_layer": "--moe-overhead-us", "allreduce_latency_us": "--allreduce-latency-us",
             "allreduce_link": "an override of allreduce_link", "overhead_us_per_request": "--request-overhead-us",
             "upcast_hbm": "an override of upcast_hbm", "gemm_floor_us": "--gemm-floor-us",
             "upcast_moe_us": "--upcast-moe-us"}
    out = {}
    for name, (generic, source) in GENERIC_FACTORS.items():
        given_value = overrides.get(name)
        preset = getattr(hw.efficiency, name)
        if given_value is not None:
            out[name] = Number(given_value, given(flags[name]))
        elif preset is not None:
            what = (f"{name} fitted (--calibration)" if preset.source.startswith(CALIBRATED)
                    else f"{hw.id} preset efficiency.{name}")
            out[name] = Number(preset.value, default(what, preset.cite()))
        elif generic is None:   # upcast_hbm: as hbm
            out[name] = Number(out["hbm"].value, default(f"generic {name}: as hbm", source))
        else:
            out[name] = Number(generic, default(f"generic {name}", source))
    return StepFactors(**out)  # type: ignore[arg-type]   # one typed value per factor field, by GENERIC_FACTORS


def engine_factors(f: StepFactors, scenario: Scenario) -> StepFactors:
    """``f`` with the engine's own terms applied, each recorded in ``engine_terms`` as the typed value the factor is
    made of: its decode all-reduce (its adapter's ``decode_allreduce``: a published benchmark of its in-graph kernel)
    in place of kvplan's generic allreduce_latency_us and allreduce_link, and its decode-kernel path's extra latency
    per MLA layer (``decode_layer_latency``) added to overhead_us_per_layer; a value the GPU preset, a flag or a
    calibration gave is kept. Applying it again changes nothing (the factors are no longer the defaults it
    replaces)."""
    from dataclasses import replace

    adapter = scenario.engine_adapter
    engine = adapter.id
    out: dict[str, object] = {}
    terms: list[EngineTerm] = []
    fact = adapter.decode_allreduce
    if fact is not None:
        latency, share, source = fact
        for name, value, label in (("allreduce_latency_us", latency, "decode all-reduce latency, us"),
                                   ("allreduce_link", share, "decode all-reduce share of the link")):
            old = getattr(f, name)
            why = old.why
            if why is not None and why.formula == f"default: generic {name}":
                term = Number(value, derived(f"{engine}'s in-graph decode all-reduce, not the generic {name}",
                                             f"{value:g} (generic {old.value:g})", source))
                out[name] = term     # the factor IS the term's value
                terms.append(EngineTerm(f"decode_{name}", label, term, name))
    # the engine's default decode-kernel path on this deployment (Engine.decode_layer_latency): its extra latency per
    # MLA layer on top of the per-layer overhead, unless a flag or a calibration gave that overhead
    rule = adapter.decode_layer_latency(scenario)
    base_value = f.value("overhead_us_per_layer")
    why = getattr(f.overhead_us_per_layer, "why", None)
    if rule is not None and why is not None and why.formula.startswith("default:") \
            and "(--calibration)" not in why.formula:
        extra, source = rule
        mla = sum(g.count for g in scenario.sized_model.groups if isinstance(g.kind, MLA))
        layers = scenario.sized_model.num_layers or 1
        term = Number(extra, derived(
            f"{engine}'s default decode-kernel path on {scenario.hardware.id}: its latency per MLA layer "
            "beyond kvplan's roofline", f"{extra:g} us x {mla} MLA layers of {layers}", source))
        per_layer = term.number() * mla / layers
        out["overhead_us_per_layer"] = Number(base_value + per_layer, derived(
            f"overhead_us_per_layer + {engine}'s decode-kernel path: {term.number():g} us per MLA layer",
            f"{base_value:g} + {term.number():g} x {mla} / {layers} = {base_value + per_layer:g} us", *why.sources,
            source))
        terms.append(EngineTerm("decode_kernel_us_per_mla_layer", "decode kernels, us per MLA layer", term,
                                "overhead_us_per_layer"))
    return replace(f, **out, engine_terms=f.engine_terms + tuple(terms)) if out else f


@dataclass(frozen=True)
class StepModel:
    """The per-GPU constants of one replica's decode step (plain floats: the hot path is numpy over batches and
    contexts)."""

    scenario: Scenario
    factors: StepFactors
    bw: float                      # achievable HBM bytes/s
    expert_bw_scale: float         # routed experts stream at bw x this (upcast_hbm / hbm when upcast, else 1)
    flops: float                   # achievable dense FLOP/s of the GEMMs in decode (the weights' dtype)
    attention_flops_s: float       # achievable FLOP/s of attention (bf16: attention cores run in bf16)
    prefill_flops_s: float         # achievable dense FLOP/s in prefill
    dense_bytes: float             # non-expert weights read per step on one GPU of a TP group (all layers)
    dense_flops_per_token: float
    expert_bytes_each: float       # one routed expert's bytes on one GPU, summed over the MoE layers
    experts_on_gpu: float          # routed experts with a slice on this GPU
    num_experts: int               # E (0 for a dense model)
    top_k: int
    tokens_per_rank_to_ep: float   # T / B: tokens through the EP group per request of this rank
    moe_flops_per_token: float
    layers: int
    moe_layers: int
    hidden: int
    comm_per_layer: tuple[float, float]    # (latency s, s per token) of the TP all-reduces of one layer
    ep_per_moe_layer: tuple[float, float]  # (latency s, s per token) of one MoE layer's dispatch + combine
    pp_send: tuple[float, float]           # (latency s, s per token) of the PP sends of one step
    overhead_s: float              # per step: layers x per-layer + per-step
    request_overhead_s: float      # per request per step
    gemms: int                     # GEMM kernels of one step (every layer's projections and MLP, the LM head)
    gemm_floor_s: float            # the least one GEMM takes (efficiency.gemm_floor_us)
    moe_latency_s: float           # per step: MoE layers x upcast_moe_us when the experts are upcast, else 0
    notes: tuple[str | Note, ...]
    fused_experts: float = 0.0     # shared experts the engine runs inside the MoE kernel: read whenever a token runs
    lockstep_ranks: int = 1        # attention-DP ranks that step together (EP over them): LOCKSTEP_SOURCE
    prefill_mla_flops_s: float | None = None   # achievable FLOP/s of MLA's prefill attention (BF16: MLA_BF16_SOURCE);
                                               # None: prefill_flops_s
    prefill_ep_per_moe_layer: tuple[float, float] = (0.0, 0.0)   # (latency s, s per prompt token) of one MoE layer's
                                                                 # prefill dispatch + combine (DEEPEP_SOURCE)
    prefill_tp_per_layer: tuple[float, float] = (0.0, 0.0)   # (latency s, s per prompt token) of one layer's two
                                                             # TP all-reduces of a prefill chunk (large messages)
    pass_ranks: float = 1.0        # N: attention-DP ranks' prompts that share one prefill pass (1 .. lockstep_ranks;
                                   # ``with_pass_sharing``, PASS_SHARING_SOURCE)
    pass_credit: float | None = None   # this rank's decode step that another rank's pass runs inside it (s; None: the
                                       # least step, batch 1): ``with_pass_sharing``
    engine_terms: tuple[EngineTerm, ...] = ()   # the engine adapter's terms in this step (factors.engine_terms and
                                                # the step's own: EngineTerm), for tables and --explain

    def shared_pass_ranks(self, rate_per_rank: float, prompt_tokens: int, chunk_tokens: int | None = None) -> float:
        """N, the prompts one prefill pass of this attention-DP instance holds when each of its R ranks receives
        ``rate_per_rank`` prompts a second (Poisson): Lambda T + e^(-Lambda T), Lambda = R x the rate, T one prompt's
        pass alone (``prefill_seconds``), at least 1 and at most R (PASS_SHARING_SOURCE). 1 without attention DP."""
        import math

        r = self.lockstep_ranks
        if r <= 1 or not rate_per_rank > 0:
            return 1.0
        x = r * rate_per_rank * self.prefill_seconds(prompt_tokens, 0, chunk_tokens)
        return float(min(r, max(1.0, x + math.exp(-x))))

    def with_pass_sharing(self, rate_per_rank: float, prompt_tokens: int, chunk_tokens: int | None = None,
                          decode_tokens: int = 0, batch: float | None = None, max_batch: int | None = None
                          ) -> StepModel:
        """This step model with ``pass_ranks`` = ``shared_pass_ranks`` and ``pass_credit`` = the rank's own decode
        step at its batch (``steady_tpot``): ``batch`` (a closed loop's users), else by Little's law at the rate, B =
        rate x D x step(B) (iterated from 1, at most ``max_batch``), else (no output given) the least step: the
        lockstep prices (``prefill_seconds`` with lockstep, ``mixed_parts``) of a deployment whose ranks receive
        ``rate_per_rank`` prompts a second."""
        from dataclasses import replace

        n = self.shared_pass_ranks(rate_per_rank, prompt_tokens, chunk_tokens)
        credit = None
        if self.lockstep_ranks > 1 and decode_tokens > 0 and (batch or rate_per_rank > 0):
            cap = float(max_batch) if max_batch else math.inf
            b = float(batch) if batch else 1.0
            for _ in range(0 if batch else PASS_CREDIT_ROUNDS):
                b = min(cap, max(1.0, rate_per_rank * decode_tokens
                                 * float(self.steady_tpot(prompt_tokens, decode_tokens, b))))
            credit = float(self.steady_tpot(prompt_tokens, decode_tokens, min(b, cap)))
        if n == self.pass_ranks and credit == self.pass_credit:
            return self
        return replace(self, pass_ranks=n, pass_credit=credit)

    def request_cache(self, contexts, dtype=None):
        """(bytes read, attention FLOPs) of one decode token of one request at each context, on one GPU of the
        TP group, summed over every layer (numbers or numpy arrays)."""
        s = self.scenario
        dtype = dtype or s.kv_dtype
        tp = s.parallelism.tp
        nbytes, nflops = 0, 0
        for g in s.sized_model.groups:
            nbytes = nbytes + g.count * g.kind.decode_read_bytes(dtype, contexts, tp)
            nflops = nflops + g.count * g.kind.decode_flops(contexts, tp)
        return nbytes, nflops

    def step(self, batch, cache_bytes, attention_flops, tokens_per_request=1):
        """One decode step of ``batch`` requests (arrays broadcast) whose cache reads and attention FLOPs are
        ``cache_bytes`` and ``attention_flops`` in total; ``tokens_per_request`` > 1 for a speculative verify
        step. Returns the time split: weights, moe, kv, attention, comm, overhead, total (seconds). Plain numbers in,
        plain numbers out (no numpy import); arrays broadcast with numpy."""
        if all(isinstance(x, (int, float)) for x in (batch, cache_bytes, attention_flops)):
            maximum, as_float, full = max, float, (lambda like, value: value)
        else:
            import numpy as np

            maximum, full = np.maximum, np.full_like

            def as_float(x):
                return np.asarray(x, dtype=float)
        b = as_float(batch)
        tokens = b * tokens_per_request
        # each dense GEMM takes at least the floor: their sum at least gemms x floor (a lower bound of the sum of
        # per-GEMM maxima, exact when every GEMM is under the floor, as at TP8, or every one over it)
        dense = maximum(maximum(self.dense_bytes / self.bw, self.dense_flops_per_token * tokens / self.flops),
                        self.gemms * self.gemm_floor_s + tokens * 0.0)
        if self.num_experts:
            t = tokens * self.tokens_per_rank_to_ep
            touched = (self.experts_on_gpu * (1 - (1 - self.top_k / self.num_experts) ** t)
                       + self.fused_experts * (t > 0))
            moe = maximum(touched * self.expert_bytes_each / (self.bw * self.expert_bw_scale),
                          self.moe_flops_per_token * tokens / self.flops) + self.moe_latency_s * (tokens > 0)
        else:
            moe = tokens * 0.0
        kv = as_float(cache_bytes) / self.bw
        att = as_float(attention_flops) * tokens_per_request / self.attention_flops_s
        attention = maximum(kv, att)
        lat, per_tok = self.comm_per_layer
        comm = self.layers * (lat + per_tok * tokens)
        lat, per_tok = self.ep_per_moe_layer
        comm = comm + self.moe_layers * (lat + per_tok * tokens)
        lat, per_tok = self.pp_send
        comm = comm + lat + per_tok * tokens
        overhead = self.overhead_s + self.request_overhead_s * b
        total = dense + moe + attention + comm + overhead
        return {"weights": dense, "moe": moe, "kv": kv, "attention_compute": att, "attention": attention,
                "comm": comm, "overhead": full(total, 0.0) + overhead, "total": total}

    def speculative_step(self, batch, cache_bytes, attention_flops, k: int, mtp: int):
        """One speculative step of ``batch`` requests with an MTP drafter (DeepSeek's): the target's verify step
        over k + 1 tokens per request (``step``'s ``tokens_per_request``) plus k draft steps of ``mtp`` MTP layers,
        each layer at the plain step's time per layer (its weights, attention and communication; the step's fixed
        overhead once, the per-layer overhead for each). Returns plain, verify, draft and total (seconds; arrays
        broadcast). The one price ``tpot --speculative`` and ``simulate --speculative`` divide by the accepted
        tokens."""
        plain = self.step(batch, cache_bytes, attention_flops)["total"]
        verify = self.step(batch, cache_bytes, attention_flops, tokens_per_request=k + 1)["total"]
        per_layer = (plain - self.overhead_s) / self.layers + self.factors.value("overhead_us_per_layer") * 1e-6
        draft = k * mtp * per_layer
        return {"plain": plain, "verify": verify, "draft": draft, "total": verify + draft}

    def steady_cache(self, prompt: int, decode: int):
        """(cache bytes, attention FLOPs) of the mean request of a steady batch, whose contexts are spread evenly
        over prompt..prompt+decode (``steady_contexts``): multiply by the batch for the step. The one steady
        average: tpot, pd, recommend, check and the layout search all price a steady batch through here."""
        import numpy as np

        nbytes, nflops = self.request_cache(steady_contexts(prompt, decode))
        return float(np.mean(nbytes)), float(np.mean(nflops))

    def steady_tpot(self, prompt: int, decode: int, batches):
        """The decode step of a steady batch (``steady_cache``'s mean request times the batch) for each of
        ``batches`` (a number or a numpy array): what tpot's steady shape, pd, recommend and the layout search
        price a batch at."""
        mean_b, mean_f = self.steady_cache(prompt, decode)
        return self.step(batches, batches * mean_b, batches * mean_f)["total"]

    def cohort_mean(self, batch: int, prompt: int, steps: int) -> float:
        """The mean step of ``batch`` requests decoding together from ``prompt`` for ``steps`` steps (trapezoid
        over COHORT_POINTS steps, plain floats: no numpy import)."""
        n = COHORT_POINTS - 1
        ts = [max(steps, 0) * i / n for i in range(n + 1)]
        series = []
        for t in ts:
            nbytes, nflops = self.request_cache(float(prompt + t))
            series.append(float(self.step(batch, batch * nbytes, batch * nflops)["total"]))
        if steps <= 0:
            return series[0]
        return sum((series[i] + series[i + 1]) / 2 * (ts[i + 1] - ts[i]) for i in range(n)) / steps

    @cached_property
    def mixed_ep_per_token(self) -> float:
        """Seconds per prefill-chunk token of one MoE layer's dispatch + combine inside a mixed vLLM step, on vLLM's
        default all-to-all, allgather_reducescatter (MIXED_STEP_A2A_SOURCE): the chunk's tokens reach every other
        rank once in the all-gather (grouped NCCL broadcasts, each root's rows pipelined once through a link) and
        their partial outputs come back once in the reduce-scatter: 2 x hidden x 2 B at the link the decode step's
        all-to-all runs on. That is the decode price (``ep_per_moe_layer``: 2 x top-k x hidden x 2 B x (EP - 1) / EP
        at that link) without its top-k x (EP - 1) / EP copies. Every lockstep rank waits for it (``mixed_parts``).
        Cached, as ``weight_read_seconds``."""
        per = self.ep_per_moe_layer[1]
        ep = self.scenario.parallelism.ep or 1
        if not per or not self.top_k or ep < 2:
            return 0.0
        return per / (self.top_k * (ep - 1) / ep)

    @cached_property
    def weight_read_seconds(self) -> float:
        """Reading every weight on this GPU once (a prefill chunk touches every expert). Cached: the step model is
        frozen, and ``mixed_parts`` reads it at every step with prefill chunks."""
        experts = self.experts_on_gpu + self.fused_experts
        return (self.dense_bytes + experts * self.expert_bytes_each / self.expert_bw_scale) / self.bw

    def prefill_attention(self, end: int, start: int = 0) -> float:
        """A chunk's attention FLOPs (tokens start..end against a cache of ``start``, all layers, before the TP split)
        in FLOPs at the prefill rate: MLA layers' FLOPs count prefill_flops_s / prefill_mla_flops_s times, since
        their core runs in BF16 where the matmuls may run in FP8 (MLA_BF16_SOURCE)."""
        terms = self._attention_terms
        if terms is not None:                 # the same sum, term by term, with each layer kind's constants read once
            pairs, total = end * end / 2 - start * start / 2, 0.0   # causal_pairs(end) - causal_pairs(start)
            for count, per_pair, per_token, scale in terms:
                total += count * (per_pair * pairs + per_token * (end - start)) * scale
            return total
        model = self.scenario.sized_model
        mla = self.prefill_mla_flops_s
        if mla is None or mla == self.prefill_flops_s:
            return flops.attention_flops(model, end, start)
        scale = self.prefill_flops_s / mla
        return sum(g.count * g.kind.prefill_attention_flops(end, start) * (scale if isinstance(g.kind, MLA) else 1)
                   for g in model.groups)

    def prefill_comm(self, tokens: int, mixed: bool = False) -> float:
        """The communication of a prefill chunk of ``tokens`` tokens on this GPU (no overlap with compute: no source
        read shows a prefill hiding it; SGLang's two-batch overlap is not modelled): the TP all-reduces of every
        layer (``prefill_tp_per_layer``, 2 per layer, at the large-message rate: PREFILL_ALLREDUCE_SOURCE), the EP
        dispatch and combine of every MoE layer at DeepEP's normal-kernel rate (``prefill_ep_per_moe_layer``), the PP
        sends (``pp_send``). ``mixed``: the chunk rides in a step with decode tokens (``mixed_parts``), whose one
        dispatch / combine per MoE layer carries every token of the step on vLLM's one all-to-all backend: the
        chunk's EP bytes at ``mixed_ep_per_token`` (MIXED_STEP_A2A_SOURCE); the latencies are the step's, each paid
        once (``mixed_parts`` drops the decode step's own)."""
        if tokens <= 0:
            return 0.0
        lat, per = self.prefill_tp_per_layer
        comm = self.layers * (lat + per * tokens)
        lat, per = self.prefill_ep_per_moe_layer
        if mixed:
            per = self.mixed_ep_per_token
        comm += self.moe_layers * (lat + per * tokens)
        lat, per = self.pp_send
        return comm + lat + per * tokens

    def prefill_seconds(self, prompt_tokens: int, prefix_tokens: int = 0, chunk_tokens: int | None = None,
                        expert_gpus: float | None = None, lockstep: bool = False, prompts: int = 1) -> float:
        """Time to prefill (or recompute) tokens prefix..prompt in chunks of ``chunk_tokens``
        (max_num_batched_tokens): each chunk is one step, max(weights / (HBM x hbm), FLOPs / (peak x prefill_mfu))
        (MLA's attention FLOPs at the BF16 peak: ``prefill_attention``), plus the chunk's communication
        (``prefill_comm``: TP all-reduces, EP dispatch / combine, PP sends; not overlapped), plus the step's fixed
        overhead. prefill_mfu is a compute-only figure: the communication is priced on its own. The one prefill
        price of tpot (TTFT), pd and compare-preemption.
        ``expert_gpus``: the GPUs the prompt's routed-expert FLOPs spread over (default the EP group, a prompt
        prefilled alone); under attention DP with every rank prefilling at once each rank's prompt has EP / DP of
        them (``pd``'s saturated prefill role). ``lockstep``: the time the prefill takes from this rank's own
        timeline in a serving deployment (the simulator's and ``pd``'s colocated price): under attention DP
        (``lockstep_ranks`` R > 1) every pass holds every rank (LOCKSTEP_SOURCE) and N = ``pass_ranks`` ranks'
        prompts share one (PASS_SHARING_SOURCE), so each prompt of this rank costs its timeline R / N passes, each
        with the routed experts' FLOPs of N prompts (EP / N expert GPUs a prompt). Its own pass T stalls its decode;
        in the other R / N - 1 passes it runs its decode step (its local batch keeps its decode forward mode), which
        the pass lengthens to T: those cost it T - its decode step, at least ``step(1)`` (the least step, weights
        and overhead) credited: T + (R / N - 1) x max(T - step(1), 0) (N = R: one pass, the prefill role's price);
        1 x without attention DP.
        ``prompts``: that many alike prompts packed into each pass (a saturated prefill instance fills its token
        budget with waiting prompts: SGLang's PrefillAdder, vLLM's max_num_batched_tokens): each chunk's linear FLOPs,
        attention FLOPs and communication are ``prompts`` times one prompt's, the weights still read once a pass; the
        time of the whole pass (``pd``'s prefill role divides it by ``prompts``)."""
        if lockstep and self.lockstep_ranks > 1:
            n = self.pass_ranks
            ep = (self.scenario.parallelism.ep or self.scenario.parallelism.tp) / n
            own = self.prefill_seconds(prompt_tokens, prefix_tokens, chunk_tokens, ep, prompts=prompts)
            return own + (self.lockstep_ranks / n - 1) * max(own - self._least_step, 0.0)
        s = self.scenario
        model, tp = s.sized_model, s.parallelism.tp
        chunk = chunk_tokens or max(prompt_tokens - prefix_tokens, 1)
        total, start = 0.0, prefix_tokens
        # dense matmuls split over TP; the routed experts' over the EP group (each expert where it lives)
        routed = self.moe_flops_per_token * tp / 2
        ep = expert_gpus or s.parallelism.ep or tp
        params, weights = flops.matmul_params(model).value, self.weight_read_seconds   # the same for every chunk
        while start < prompt_tokens:
            end = min(prompt_tokens, start + chunk)
            n = (end - start) * prompts
            linear = 2 * (params - routed) * n / tp + 2 * routed * n / ep
            attention = self.prefill_attention(end, start) * prompts / tp
            compute = (linear + attention) / self.prefill_flops_s
            total += max(weights, compute) + self.prefill_comm(n) + self.overhead_s
            start = end
        return total

    def prefill_pass_seconds(self, ranges, chunk_tokens: int | None = None, lockstep: bool = False,
                             expert_gpus: float | None = None) -> float:
        """One prefill pass of several prompts: ``ranges`` holds each prompt's token range (start, end), tokens
        start..end computed against its cache of ``start`` (a prefix hit), the waiting prompts an engine packs into
        one forward up to its token budget (PREFILL_PACKING_SOURCE). The pass is one step over their summed tokens:
        every weight read once, max(weights / (HBM x hbm), (linear FLOPs of the summed tokens + each prompt's own
        attention FLOPs) / (peak x prefill_mfu)), plus the summed tokens' communication (``prefill_comm``) and the
        step's fixed overhead, as ``prefill_seconds`` prices one chunk; N alike prompts are ``prefill_seconds(...,
        prompts=N)``. One range is ``prefill_seconds`` of it (chunked by ``chunk_tokens`` when longer: a prompt
        over the budget runs alone); several must sum to at most ``chunk_tokens``. ``lockstep`` and
        ``expert_gpus`` as in ``prefill_seconds``."""
        if len(ranges) == 1:
            start, end = ranges[0]
            return self.prefill_seconds(end, start, chunk_tokens, expert_gpus, lockstep)
        if self.lockstep_ranks > 1 and lockstep:     # as prefill_seconds: R / N passes on this rank's clock
            par, n = self.scenario.parallelism, self.pass_ranks
            own = self.prefill_pass_seconds(ranges, chunk_tokens, expert_gpus=(par.ep or par.tp) / n)
            return own + max(own - self._least_step, 0.0) * (self.lockstep_ranks / n - 1)
        tokens = sum(end - start for start, end in ranges)
        if chunk_tokens and tokens > chunk_tokens:
            raise ValueError(f"a pass of {len(ranges)} prompts holds {tokens} tokens, over the budget {chunk_tokens}")
        s = self.scenario
        tp = s.parallelism.tp
        routed = self.moe_flops_per_token * tp / 2
        ep = expert_gpus or s.parallelism.ep or tp
        params = flops.matmul_params(s.sized_model).value
        memo = self._chunk_attention
        attention = 0.0
        for start, end in ranges:         # attention per prompt: each attends to its own cache only
            a = memo.get((start, end))
            if a is None:
                a = memo[start, end] = self.prefill_attention(end, start)
            attention += a
        linear = 2 * (params - routed) * tokens / tp + 2 * routed * tokens / ep
        compute = (linear + attention / tp) / self.prefill_flops_s
        return max(self.weight_read_seconds, compute) + self.prefill_comm(tokens) + self.overhead_s


    def mixed_step(self, batch, cache_bytes: float, attention_flops: float, chunks=()) -> float:
        """One engine step that runs ``batch`` decode tokens (their caches' reads and attention FLOPs in total, as
        ``step`` takes them) and prefill chunks in the same forward pass (vLLM V1's chunked prefill mixes them):
        ``chunks`` is a sequence of token ranges (start, end), each a request's tokens start..end computed against
        its cache of ``start`` tokens. With no chunk it is ``step(batch, cache_bytes, attention_flops)["total"]``.
        With chunks, built from the two prices it sits between:

        * the linear layers run once for every token of the pass: every weight on this GPU read once
          (``weight_read_seconds``, as a prefill chunk reads them) against the linear FLOPs of the chunks' tokens
          and the decode tokens together plus the chunks' attention FLOPs, at the prefill rate (``prefill_seconds``'
          per-chunk compute, ``flops.attention_flops`` for each range), the larger of the two;
        * plus the per-step overhead once (``overhead_s``), as a prefill chunk pays it;
        * plus the chunks' communication (``prefill_comm``: prefill_mfu is compute-only), in the step's one
          dispatch / combine per MoE layer and its all-reduces: each latency once for the whole step (the decode
          tokens' own dropped), the chunks' EP bytes on the all-to-all backend that carries every token of the pass,
          vLLM's default all-gather / reduce-scatter (``mixed_ep_per_token``, MIXED_STEP_A2A_SOURCE);
        * plus what the decode tokens add to that pass in ``step``: their attention term (cache reads against
          attention FLOPs), their communication beyond the step's fixed latency, and their per-request overhead.

        So a pass of chunks alone (batch 0) is ``prefill_seconds``' price of those chunks as one step but for their
        EP bytes (at ``mixed_ep_per_token``: vLLM's all-gather, where ``prefill_seconds`` prices DeepEP's normal
        kernels), and the decode tokens' own weight and expert reads are not paid twice. And the pass is never
        priced below the decode tokens' step without the chunks (``step(...)["total"]``): adding tokens to a forward
        pass cannot make it shorter."""
        return self.mixed_parts(batch, cache_bytes, attention_flops, chunks)[0]

    def mixed_parts(self, batch, cache_bytes: float, attention_flops: float, chunks=()) -> tuple[float, float]:
        """(``mixed_step``, the same step without its chunks: ``step(...)["total"]``, 0 with no decode token).
        Plain numbers: ``step``'s terms that depend on the batch alone are computed once per batch
        (``_batch_terms``), its attention term per call: the same sums in the same order."""
        read = comm = 0.0             # the decode tokens' attention term (cache reads against FLOPs), communication
        if batch:
            terms = self._batch_terms.get(batch)
            if terms is None:
                d = self.step(batch, 0.0, 0.0)
                terms = self._batch_terms[batch] = (d["weights"] + d["moe"], d["comm"], d["overhead"])
            dense_moe, comm, overhead = terms
            kv, att = float(cache_bytes) / self.bw, float(attention_flops) / self.attention_flops_s
            read = kv if kv >= att else att
            alone = dense_moe + read + comm + overhead          # step's total: the same terms, the same order
        else:
            alone = 0.0
        if not chunks:
            return (alone if batch else float(self.step(0, 0.0, 0.0)["total"])), alone
        per_token, comm0 = self._mixed_constants
        tp = self.scenario.parallelism.tp
        tokens = batch
        attention = 0.0
        memo = self._chunk_attention
        for start, end in chunks:
            tokens += end - start
            a = memo.get((start, end))
            if a is None:
                a = memo[start, end] = self.prefill_attention(end, start)
            attention += a
        # the other N - 1 ranks' alike chunks sharing this pass add their routed experts' FLOPs (PASS_SHARING_SOURCE)
        shared = (self.pass_ranks - 1) * self._routed_per_token * (tokens - batch)
        compute = (per_token * tokens + shared + attention / tp) / self.prefill_flops_s
        extra = read + comm - comm0 + self.request_overhead_s * batch if batch else 0.0
        # the chunks' own communication: the latencies once for the step (the decode step's comm0 dropped above), the
        # chunks' EP bytes in the step's one dispatch / combine on its backend (mixed_ep_per_token)
        extra += self.prefill_comm(tokens - batch, mixed=True)
        # never less than the decode tokens' step alone: adding a chunk's tokens to a forward pass cannot shorten it
        # (the decode step's GEMM floor and its own weight terms can exceed weight_read_seconds, as on Mixtral-8x7B
        # at TP2, where the pass with a chunk priced 2.4 ms under the same batch without it)
        mixed = float(max(max(self.weight_read_seconds, compute) + self.overhead_s + extra, alone))
        # attention DP in lockstep: N = pass_ranks ranks' (alike) chunks share a pass, so per chunk of its own this
        # rank's timeline holds R / N such passes: R / N - 1 of its steps lengthen from its decode alone to the pass
        # with chunks (LOCKSTEP_SOURCE, PASS_SHARING_SOURCE)
        return mixed + (self.lockstep_ranks / self.pass_ranks - 1) * (mixed - alone), alone

    @cached_property
    def _least_step(self) -> float:
        """This rank's decode step that another rank's prefill pass runs inside it (``prefill_seconds`` with
        lockstep): ``pass_credit``, or the least step (batch 1, no cache read)."""
        if self.pass_credit is not None:
            return self.pass_credit
        return float(self.step(1, 0.0, 0.0)["total"])

    @cached_property
    def _routed_per_token(self) -> float:
        """The routed experts' FLOPs per prefill token on this GPU (over the EP group), as ``prefill_seconds``
        counts them."""
        s = self.scenario
        return 2 * (self.moe_flops_per_token * s.parallelism.tp / 2) / (s.parallelism.ep or s.parallelism.tp)

    @cached_property
    def _batch_terms(self) -> dict[int, tuple[float, float, float]]:
        """``step``'s terms of a batch that do not depend on its caches: (weights + moe, comm, overhead), memoized
        by batch (``mixed_parts``)."""
        return {}

    @cached_property
    def _chunk_attention(self) -> dict[tuple[int, int], float]:
        """``flops.attention_flops`` of a chunk's token range, memoized (a prompt length repeats)."""
        return {}

    @cached_property
    def _attention_terms(self) -> tuple[tuple[int, int, int, float | int], ...] | None:
        """``prefill_attention``'s terms when no layer caps its keys and every kind's prefill FLOPs are the plain
        per-pair and per-token ones (``layers._Kind.prefill_attention_flops``; MLA without ``index_topk``): (layers,
        FLOPs per (query, key) pair, state FLOPs per token, MLA's BF16 scale or 1) per group, so a chunk's attention
        FLOPs are count x (per_pair x (causal_pairs(end) - causal_pairs(start)) + per_token x (end - start)) x scale
        summed in the groups' order: the same operations as the kinds' own (a chunk range a vLLM V1 step or an
        SGLang re-prefill has not priced before costs no method calls). None: the kinds' methods."""
        plain = FullAttention.prefill_attention_flops    # the base rule, inherited by every kind but MLA
        mla = self.prefill_mla_flops_s
        scale = 1 if mla is None or mla == self.prefill_flops_s else self.prefill_flops_s / mla
        terms = []
        for g in self.scenario.sized_model.groups:
            kind = g.kind
            if kind.attended_keys_cap() is not None or not (type(kind).prefill_attention_flops is plain or (
                    isinstance(kind, MLA) and kind.index_topk is None)):
                return None
            terms.append((g.count, kind.attention_flops_per_pair(), kind.state_flops_per_token(),
                          scale if isinstance(kind, MLA) else 1))
        return tuple(terms)

    @cached_property
    def _mixed_constants(self) -> tuple[float, float]:
        """(linear FLOPs per token of a prefill pass, as ``prefill_seconds`` counts them; the step's communication
        with no token: its fixed latencies)."""
        s = self.scenario
        tp = s.parallelism.tp
        routed = self.moe_flops_per_token * tp / 2
        ep = s.parallelism.ep or tp
        per_token = 2 * (flops.matmul_params(s.sized_model).value - routed) / tp + 2 * routed / ep
        return per_token, float(self.step(0, 0.0, 0.0)["comm"])


def frontend_seconds(scenario: Scenario) -> Seconds:
    """A request's latency outside the engine's steps (its engine adapter's ``frontend_latency``: the API server's
    way in and the first token's way out), added once to its TTFT and its E2E, never to TPOT."""
    engine = scenario.engine_adapter
    value, source = engine.frontend_latency
    return Seconds(value, default(f"{engine.id} frontend latency per request", source))


def colocated_tpot(plain, prefill_seconds: float, concurrency, decode_tokens: int):
    """Mean TPOT of a request in a colocated replica whose ``concurrency`` requests each bring one prefill per
    ``decode_tokens`` steps (steady state: a slot starts a request as its last one finishes). A request's own prefill
    runs before its first token (its TTFT), so the prefills that fall among its decode steps are the OTHER
    requests': (concurrency - 1) of them over its ``decode_tokens`` steps, TPOT = plain + prefill x (concurrency - 1)
    / decode (chunked or not, the same GPU time); at concurrency 1, the plain step. The replica's cycle, D x TPOT +
    T_pf = D x plain + concurrency x T_pf, holds every prefill: requests/s = concurrency / (D x TPOT + T_pf).
    ``plain`` and ``concurrency`` may be numpy arrays."""
    others = concurrency - 1
    others = others * (others > 0)      # none below one request (numpy arrays too)
    return plain + prefill_seconds * others / max(decode_tokens, 1)


def step_model(scenario: Scenario, factors: StepFactors | None = None, speculative: bool = False) -> StepModel:
    """The decode-step constants for the scenario's replica. ``speculative``: the target model's steps only, its
    MTP layers left to the drafter (``StepModel.speculative_step`` prices them as the draft's steps), so a verify
    step does not run them again."""
    from kvplan.engines.budget import expert_share, total_weight_bytes, weights_per_gpu

    if speculative and scenario.mtp_layers:
        scenario = scenario.with_(mtp_layers=0)
    s, model, hw = scenario, scenario.sized_model, scenario.hardware
    par = s.parallelism
    f = engine_factors(factors or step_factors(hw), scenario)
    notes: list[str | Note] = []
    for term in f.engine_terms:
        if term.key == "decode_kernel_us_per_mla_layer":
            notes.append(note("{engine}'s default decode-kernel path on {hw}: {extra:g} us more per MLA layer, the "
                              "per-layer overhead {per_layer:g} us ({source})", engine=s.engine_adapter.id, hw=hw.id,
                              extra=term.value, per_layer=cast(Number, f.overhead_us_per_layer),
                              source=", ".join(term.value.why.sources if term.value.why else ())))
    if hw.hbm_bandwidth_tb_s is None:
        raise KvplanError(f"{hw.id} has no hbm_bandwidth_tb_s in its preset, which the decode step needs",
                          "add hbm_bandwidth_tb_s = { value = ..., source = \"...\" } to the hardware preset")
    bw = hw.hbm_bandwidth_tb_s.value * 1e12 * f.value("hbm")
    dtype = compute_dtype_for(model, hw, "auto", s.weight_dtype)
    peak = compute_peak(hw, dtype)
    # All weights of one TP group (PP stages run one after another for a token, so their layers add up).
    one_stage = weights_per_gpu(model, type(par)(tp=par.tp, pp=1, dp=par.dp, ep=par.ep), s.weight_dtype,
                                s.weights_bytes)
    total_bytes = total_weight_bytes(model, s.weight_dtype, s.weights_bytes)[0]   # the experts' share of this
    n_mm = flops.matmul_params(model).value
    E, k = model.num_experts or 0, model.experts_per_token or 0
    is_moe = model.params_expert is not None and model.params_total is not None and k
    if is_moe:
        share = expert_share(model, s.weight_dtype)
        # is_moe: params_expert and params_total are set, so expert_share answers (by them at the latest)
        assert share is not None and model.params_expert is not None
        expert_bytes_total = total_bytes * share[0]
        # an expert's width: moe_intermediate_size, or intermediate_size where the config has no other (Mixtral's
        # MixtralConfig names the expert width intermediate_size and has no dense MLP), as kvplan.inputs.hf_params
        # and the vLLM adapter's activation peak read it
        per_expert_params = 3 * (model.hidden_size or 0) * (model.moe_intermediate_size or model.intermediate_size or 0)
        moe_layers = round(model.params_expert.value / (E * per_expert_params)) if E and per_expert_params else 0
        routed_active = k * per_expert_params * moe_layers
        if par.ep:
            experts_on_gpu, split = E / par.ep, 1
            tokens_to_ep = par.ep / par.tp
        else:
            experts_on_gpu, split = E, par.tp
            tokens_to_ep = 1.0
        expert_each = expert_bytes_total / E / split if E else 0.0
        dense_bytes = float(one_stage.number()) - experts_on_gpu * expert_each
        if not E:
            notes.append(f"{model.id} has no num_experts: every routed expert is read every step")
    else:
        moe_layers, routed_active, experts_on_gpu, expert_each, tokens_to_ep = 0, 0, 0, 0.0, 1.0
        dense_bytes = float(one_stage.number())
    # An engine that runs the shared experts inside the fused MoE kernel (SGLang on DeepSeek-V3/R1, Hopper, EP off):
    # their weights stream there, always touched, each a routed expert's shape split over TP; no GEMMs of their own
    fused_why = s.engine_adapter.fused_shared_experts(s) if is_moe and E else None
    fused = float(model.shared_experts or 0) if fused_why else 0.0
    shared_active = fused * per_expert_params * moe_layers if fused else 0
    engine_terms = f.engine_terms
    if fused and fused_why:
        dense_bytes -= fused * expert_each
        unfused, fewer = decode_gemms(model, moe_layers), decode_gemms(model, moe_layers, fused_shared=True)
        gemms_saved = Count(unfused - fewer, derived(
            f"{s.engine_adapter.id} runs the shared experts in the fused MoE kernel: their gate_up and down "
            "GEMMs leave the step",
            f"{unfused} - {fewer} GEMMs ({moe_layers} MoE layers)", fused_why))
        engine_terms += (EngineTerm("fused_shared_expert_gemms_saved",
                                    "shared-expert GEMMs fused away",
                                    gemms_saved),)
        notes.append(note("{engine} runs the model's shared expert inside the fused MoE kernel: {gemms} fewer dense "
                          "GEMMs, its weights read with the routed experts' ({why})", engine=s.engine_adapter.id,
                          gemms=gemms_saved, why=fused_why))
    link = hw.scale_up.gb_s_per_direction.value * 1e9 if hw.scale_up and hw.scale_up.gb_s_per_direction else None
    latency = f.value("link_latency_us") * 1e-6
    allreduce_latency = f.value("allreduce_latency_us") * 1e-6
    hidden = model.hidden_size or 0
    act = 2  # bf16 activations
    comm_layer = prefill_tp = (0.0, 0.0)
    if par.tp > 1 and hidden:
        if link is None:
            notes.append(f"{hw.id} has no scale-up link rate: TP all-reduces are not priced")
        else:
            per_token = 2 * (par.tp - 1) / par.tp * hidden * act / (link * f.value("allreduce_link"))
            comm_layer = (2 * allreduce_latency, 2 * per_token)
            # a prefill chunk's all-reduce moves chunk x hidden x 2 B (MBs): the large-message rate; across nodes
            # NCCL's ring over the node's NICs (CROSS_NODE_ALLREDUCE_SOURCE)
            cross = cross_node_allreduce_rate(hw, f, par.tp)
            ring_bytes = 2 * 2 * (par.tp - 1) / par.tp * hidden * act     # 2 all-reduces per layer, per token
            if cross is not None:
                # the decode step's too: NCCL, not the in-node custom all-reduce (CROSS_NODE_DECODE_ALLREDUCE_SOURCE)
                comm_layer = (2 * CROSS_NODE_DECODE_ALLREDUCE_US * 1e-6, ring_bytes / cross)
            prefill_tp = ((2 * allreduce_latency, ring_bytes / (link * f.value("link"))) if cross is None
                          else (2 * latency, ring_bytes / cross))
            if cross is not None:
                nic_gpu = hw.node.nic_gb_s_per_direction_per_gpu.value if hw.node.nic_gb_s_per_direction_per_gpu else 0
                nic_total = hw.node.gpus_per_node * nic_gpu
                notes.append(note("TP={tp} spans more than one scale-up domain: a prefill's TP all-reduces run on "
                                  "NCCL's ring at {rate:G:.0f} GB/s and {lat:us:g} us per call, not the custom "
                                  "all-reduce",
                                  tp=Count(par.tp),
                                  rate=Rate(cross, derived(
                                      "min(scale-up link, GPUs per node x NIC per GPU) x efficiency.link",
                                      f"min({link / 1e9:g}, {hw.node.gpus_per_node} x "
                                      f"{nic_gpu:g} = {nic_total:g}) GB/s x "
                                      f"{f.value('link'):g}", CROSS_NODE_ALLREDUCE_SOURCE)),
                                  lat=Seconds(latency, derived("efficiency.link_latency_us",
                                                               f"{f.value('link_latency_us'):g} us"))))
                notes.append(note("TP={tp} spans more than one scale-up domain: a decode step's TP all-reduces run on "
                                  "NCCL at {lat:us:g} us per call and {rate:G:.0f} GB/s, not the in-node custom "
                                  "all-reduce",
                                  tp=Count(par.tp),
                                  lat=Seconds(CROSS_NODE_DECODE_ALLREDUCE_US * 1e-6,
                                              default("NCCL's small all-reduce across nodes",
                                                      CROSS_NODE_DECODE_ALLREDUCE_SOURCE)),
                                  rate=Rate(cross, derived("the cross-node ring's bus bandwidth (as the prefill's)",
                                                           f"{cross / 1e9:g} GB/s", CROSS_NODE_ALLREDUCE_SOURCE))))
    ep_layer = (0.0, 0.0)
    if par.ep and 1 < par.ep <= par.tp and is_moe:
        notes.append(f"EP={par.ep} lies inside the TP={par.tp} group: no all-to-all is priced (every rank holds the "
                     f"step's tokens; the MoE output's all-reduce combines the experts), as vLLM and SGLang's default "
                     f"--moe-a2a-backend none run it")
    if par.ep and par.ep > par.tp and hidden and is_moe:   # an all-to-all only across attention-DP ranks
        nic = hw.node.nic_gb_s_per_direction_per_gpu
        # inside the scale-up domain (an NVL72 rack: scale_up.domain_gpus) on NVLink, beyond it on the NIC
        rate = link if par.ep <= scale_up_domain(hw) else (nic.value * 1e9 if nic else None)
        if rate is None:
            notes.append(f"{hw.id} has no link rate for EP={par.ep}: dispatch and combine are not priced")
        else:
            per_token = k * hidden * act * (par.ep - 1) / par.ep / (rate * f.value("link"))
            ep_layer = (2 * latency, 2 * per_token)
    prefill_ep = (0.0, 0.0)
    if par.ep and par.ep > par.tp and hidden and is_moe and E:
        fp8_dispatch = (s.weight_dtype or model.weight_dtype) == "fp8"
        price = prefill_ep_price(hw, f, par.ep, par.tp, E, k, hidden, fp8_dispatch)
        if price is None:
            notes.append(f"{hw.id} has no link rate for EP={par.ep}: a prefill's dispatch and combine are not priced")
        else:
            prefill_ep = price
    pp_send = (0.0, 0.0)
    if par.pp > 1 and hidden:
        nic = hw.node.nic_gb_s_per_direction_per_gpu
        rate = nic.value * 1e9 if nic else (link or 0)
        if rate:
            pp_send = ((par.pp - 1) * latency, (par.pp - 1) * hidden * act / rate)
    overhead = (model.num_layers * f.value("overhead_us_per_layer") + moe_layers * f.value("overhead_us_per_moe_layer")
                + f.value("overhead_us_per_step")) * 1e-6
    expert_dtype = s.weight_dtype or model.weight_dtype
    gemms = decode_gemms(model, moe_layers if is_moe else 0, fused_shared=bool(fused))
    floor_s, read_s = gemms * f.value("gemm_floor_us") * 1e-6, dense_bytes / bw
    if floor_s > read_s:
        notes.append(note("the step's {gemms} dense GEMMs take at least {gemms} x {gemm_floor:g} us = "
                          "{floor:ms:.2f} ms, more than reading their weights ({read:ms:.2f} ms): the weights term is "
                          "that floor while it exceeds their FLOP time (efficiency.gemm_floor_us, --gemm-floor-us)",
                          gemms=Count(gemms), gemm_floor=Number(f.value("gemm_floor_us")),
                          floor=Seconds(floor_s, derived("dense GEMMs x gemm_floor_us",
                                                         f"{gemms} x {f.value('gemm_floor_us'):g} us")),
                          read=Seconds(read_s, derived("dense weight bytes / HBM rate",
                                                       f"{dense_bytes:,.0f} / {bw:,.0f}"))))
    upcast_experts = bool(is_moe and upcast(expert_dtype, hw))
    scale = f.value("upcast_hbm") / f.value("hbm") if upcast_experts else 1.0
    if scale != 1.0:
        notes.append(note("{hw} has no " f"{NATIVE_KEY[expert_dtype]} matrix cores: the {expert_dtype} experts are "
                          "upcast in-kernel and stream at {upcast:g} of peak HBM (efficiency.upcast_hbm)",
                          hw=hw.id, upcast=Number(f.value("upcast_hbm"))))
    # The upcast MoE path's fixed latency per MoE layer (efficiency.upcast_moe_us): on Hopper vLLM runs MXFP4
    # experts through triton_kernels' matmul_ogs by default, latency-bound at a few tokens per expert; Marlin
    # (VLLM_MXFP4_USE_MARLIN=1) is not, and --upcast-moe-us 0 says so.
    moe_latency = moe_layers * f.value("upcast_moe_us") * 1e-6 if upcast_experts else 0.0
    if moe_latency:
        notes.append(note("the {layers} MoE layers' upcast {dtype} experts add {us:g} us each whatever their bytes: "
                          "{total:ms:.2f} ms per step (efficiency.upcast_moe_us; --upcast-moe-us 0 for a MoE path "
                          "without it, such as vLLM's Marlin, VLLM_MXFP4_USE_MARLIN=1)",
                          layers=Count(moe_layers), dtype=expert_dtype, us=Number(f.value("upcast_moe_us")),
                          total=Seconds(moe_latency, derived("MoE layers x upcast_moe_us",
                                                             f"{moe_layers} x {f.value('upcast_moe_us'):g} us"))))
    # attention-DP ranks in lockstep: the EP group's EP / TP ranks (MoE, DP > 1; EP within TP is one rank)
    lockstep = min(par.dp, par.ep // par.tp) if is_moe and par.ep and par.dp > 1 else 1
    return StepModel(s, f, bw, scale, peak * f.value("mfu"), compute_peak(hw, "bf16") * f.value("mfu"),
                     peak * f.value("prefill_mfu"), dense_bytes,
                     2 * (n_mm - routed_active - shared_active) / par.tp, expert_each,
                     experts_on_gpu, E if is_moe else 0, k, tokens_to_ep, 2 * (routed_active + shared_active) / par.tp,
                     model.num_layers, moe_layers, hidden, comm_layer, ep_layer, pp_send, overhead,
                     f.value("overhead_us_per_request") * 1e-6, gemms, f.value("gemm_floor_us") * 1e-6,
                     moe_latency, tuple(notes), fused, max(lockstep, 1),
                     compute_peak(hw, "bf16") * f.value("prefill_mfu")
                     if any(isinstance(g.kind, MLA) for g in model.groups) else None, prefill_ep, prefill_tp,
                     engine_terms=engine_terms)


def decode_gemms(model: ModelSpec, moe_layers: int, fused_shared: bool = False) -> int:
    """GEMM kernels one decode step runs outside the routed experts (whose grouped GEMM is the MoE operator): each
    layer kind's own projections (``decode_gemms`` of its kind), per dense layer the MLP's gate_up and down, per
    MoE layer the router and, with shared experts, their gate_up and down, and the LM head. Merged projections
    count once (vLLM and SGLang run gate and up as one MergedColumnParallelLinear). ``fused_shared``: the engine runs
    the shared experts inside the routed experts' kernel (``Engine.fused_shared_experts``), so they add none."""
    attention = sum(g.count * g.kind.decode_gemms for g in model.groups)
    shared = 2 if model.shared_experts and not fused_shared else 0
    mlp = 2 * (model.num_layers - moe_layers) + moe_layers * (1 + shared)
    return attention + mlp + 1
