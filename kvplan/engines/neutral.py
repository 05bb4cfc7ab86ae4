"""kvplan's engine-neutral accounting: the arithmetic every engine shares, with vLLM's batch limits, the
0.9 memory fraction vLLM used through v0.19.x, and each layer kind's tokens rounded up to whole blocks (the
block sizes of vLLM's kind table, whatever the GPU)."""

from __future__ import annotations

from typing import Any

from kvplan.engines.base import Engine
from kvplan.specs.layers import MLA, FullAttention, GatedDeltaNet, Mamba2, SlidingWindowAttention, SparseIndexer
from kvplan.specs.values import Number, default, given


class _VllmAttribute:
    """A class attribute that is the vLLM adapter's own (the same object), looked up when read: a command that needs
    no block size, batch limit or memory fraction (``kvplan size``) never loads kvplan.engines.vllm."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        from kvplan.engines import vllm

        return getattr(vllm.VllmEngine, self.name)


class Neutral(Engine):
    id = "neutral"
    # Not tied to an engine release: the fraction is vLLM's 0.9 (v0.19.0 and earlier), kept because neutral has no
    # CUDA-graph subtraction to offset (vLLM v0.20 raised it to 0.92 for that), and the 1 GiB runtime reserve
    # stands for non-torch memory and graphs alike.
    release = "engine-neutral (vLLM's 0.9 fraction of v0.19 and earlier, and its batch limits)"
    sources = _VllmAttribute()
    fraction_name = "gpu_memory_utilization"
    settings = frozenset({"gpu_memory_utilization", "kv_pool_bytes", "max_model_len", "max_num_batched_tokens",
                          "max_num_seqs", "block_size", "activation_reserve_bytes", "runtime_reserve_bytes"})
    kind_table = {FullAttention: "attention", SlidingWindowAttention: "window", MLA: "latent",
                  SparseIndexer: "indexer key", GatedDeltaNet: "state", Mamba2: "state"}
    block_tokens_table = _VllmAttribute()
    default_steps_gib = _VllmAttribute()
    defaults_of = "vLLM"

    def batch_limits(self, hw):
        from kvplan.engines import vllm

        return vllm.ENGINE.batch_limits(hw)

    def memory_fraction(self, scenario, par):
        from kvplan.engines import vllm

        if scenario.gpu_memory_utilization is not None:
            return Number(scenario.gpu_memory_utilization, given("--gpu-memory-utilization"))
        return Number(vllm.OLD_GPU_MEMORY_UTILIZATION, default(
            "kvplan's neutral fraction: vLLM's gpu_memory_utilization through v0.19.x", vllm.OLD_UTILIZATION_SOURCE))


ENGINE = Neutral()
