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

from dataclasses import dataclass

from kvplan.calc import flops
from kvplan.errors import KvplanError
from kvplan.hardware import HardwareSpec
from kvplan.model import ModelSpec
from kvplan.values import Rate, derived, given

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
LAYOUT_SOURCE = ("vllm-project/vllm PR #27743 (>= 0.12): one contiguous block across all layers (Llama-3.1-8B 32 KB "
                 "-> 2 MB); the V0 layout copies each layer's K and V blocks separately")


@dataclass(frozen=True)
class CostSettings:
    """The cost model's tunable factors, each with a sourced default."""

    mfu: float = DEFAULT_MFU
    compute_dtype: str = "auto"
    copy_overhead_us: float = DEFAULT_COPY_OVERHEAD_US
    bidir_factor: float = DEFAULT_BIDIR_FACTOR
    layout: str = "contiguous"
    sync_swap: bool = False

    def __post_init__(self) -> None:
        import math

        def ok(x, lo, hi):
            return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and lo <= x <= hi

        if not ok(self.mfu, 0.01, 1):
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


def compute_dtype_for(model: ModelSpec, hw: HardwareSpec, requested: str) -> str:
    dtype = requested
    if dtype == "auto":
        dtype = "fp8" if model.weight_dtype == "fp8" and "fp8" in hw.dense_tflops else "bf16"
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
    """Re-prefill of tokens prefix..context on ``tp`` GPUs: F / (MFU x peak x TP)."""
    return flops.prefill_flops(model, context, prefix) / (mfu * peak_flops * tp)
