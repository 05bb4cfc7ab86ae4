"""kvplan's engine-neutral accounting: the arithmetic every engine shares, with vLLM's defaults for the
memory fraction and batch limits, and each layer kind's tokens rounded up to whole blocks."""

from __future__ import annotations

from kvplan.engines import vllm
from kvplan.engines.base import Engine
from kvplan.layers import MLA, FullAttention, GatedDeltaNet, Mamba2, SlidingWindowAttention, SparseIndexer


class Neutral(Engine):
    id = "neutral"
    release = "engine-neutral (vLLM's default fraction and batch limits)"
    sources = vllm.VllmEngine.sources
    fraction_name = "gpu_memory_utilization"
    settings = frozenset({"gpu_memory_utilization", "kv_pool_bytes", "max_model_len", "max_num_batched_tokens",
                          "max_num_seqs", "block_size", "activation_reserve_bytes", "runtime_reserve_bytes"})
    kind_table = {FullAttention: "attention", SlidingWindowAttention: "window", MLA: "latent",
                  SparseIndexer: "indexer key", GatedDeltaNet: "state", Mamba2: "state"}
    block_tokens_table = vllm.VllmEngine.block_tokens_table
    default_steps_gib = vllm.VllmEngine.default_steps_gib
    defaults_of = "vLLM"

    def batch_limits(self, hw):
        return vllm.VllmEngine().batch_limits(hw)

    def memory_fraction(self, scenario, par):
        return vllm.VllmEngine().memory_fraction(scenario, par)


ENGINE = Neutral()
