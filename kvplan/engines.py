"""Engine-faithful KV accounting: vLLM v1 blocks and groups, SGLang's token pool.

Formulas as read from the engines' source and summarised, with file paths and commits, in
shared/reference/engine-kv-accounting.md (vLLM ``vllm/v1/kv_cache_interface.py`` and
``vllm/v1/core/kv_cache_utils.py`` at commit 001cabc1; SGLang ``model_runner_kv_cache_mixin.py`` at
001ccef0). Layer kinds answer for their own bytes; this module only groups layers the way each engine
does and applies its rounding.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kvplan.dtypes import KVDtype
from kvplan.model import ModelSpec
from kvplan.parallel import Parallelism, pipeline_stages

VLLM_SOURCE = ("vLLM v1 kv_cache_interface.py / kv_cache_utils.py @001cabc1 (engine-kv-accounting.md 2.1-2.2)")
SGLANG_FRACTION_SOURCE = ("SGLang default mem_fraction_static = (GPU memory - reserved) / GPU memory, reserved "
                          "bucketed by GPU size (server_args.py, anchors.md 1.2)")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _spec_type(kind) -> str:
    if kind.kind in ("gated_delta_net", "mamba2"):
        return "mamba"
    if kind.kind == "sliding_window":
        return f"sliding_window({kind.window})"
    return "full"   # full attention, MLA and the V3.2 indexer are all FullAttentionSpec types in vLLM


def default_block_size(model: ModelSpec, engine: str = "vllm") -> int:
    """The engine's tokens per KV block: the largest a layer kind asks for (``engine_block_tokens``: vLLM's 16,
    64 for FlashMLA, which vllm/platforms/cuda.py forces). SGLang pages one token at a time unless a kind
    needs a larger page (FlashMLA: 64)."""
    block = max(g.kind.engine_block_tokens for g in model.groups)
    if engine == "sglang":
        return block if block > 16 else 1
    return block


@dataclass(frozen=True)
class VllmConfig:
    block_size: int
    num_blocks: int
    num_groups: int
    group_size: int
    padding_layers: int
    page_bytes_per_layer: int          # hybrid models: the one unified page size; uniform: sum over layers
    uniform: bool
    kv_cache_tokens: int               # the "GPU KV cache size: N tokens" line (mid-2025 formula)
    kv_cache_tokens_late: int          # later versions: int(max_concurrency * max_model_len)
    max_concurrency: float             # "Maximum concurrency for max_model_len tokens per request: x"
    max_model_len: int
    blocks_per_request: int
    needed_for_one_request_bytes: int  # _check_enough_kv_cache_memory's figure
    mamba_page_padding: float          # fraction the mamba page is padded by (0 when none)


def vllm_config(model: ModelSpec, dtype: KVDtype, par: Parallelism, pool_bytes: int, max_model_len: int,
                max_num_batched_tokens: int, block_size: int | None = None) -> VllmConfig:
    """vLLM v1's num_blocks, logged token count and maximum concurrency for a pool on each GPU.

    Every pipeline stage is a worker; num_blocks is the minimum over workers (pitfall 9)."""
    results = [_vllm_stage(model, dtype, par.tp, stage, pool_bytes, max_model_len, max_num_batched_tokens,
                           block_size) for stage in pipeline_stages(model.num_layers, par.pp)]
    return min(results, key=lambda r: r.num_blocks)


def _vllm_stage(model: ModelSpec, dtype: KVDtype, tp: int, stage: range, pool_bytes: int, max_model_len: int,
                max_num_batched_tokens: int, block_size: int | None) -> VllmConfig:
    kinds_per_layer = model.layer_kinds
    layers = [kinds_per_layer[i] for i in stage]
    align = default_block_size(model, "vllm")
    block = block_size or align
    types = {_spec_type(k) for kinds in layers for k in kinds}
    attn_kinds = [k for kinds in layers for k in kinds if _spec_type(k) != "mamba"]
    mamba_kinds = [k for kinds in layers for k in kinds if _spec_type(k) == "mamba"]
    padding_fraction = 0.0

    if types == {"full"}:
        # One group (uniform or UniformTypeKVCacheSpecs): a block holds every layer's page.
        page_total = sum(k.cache_bytes_per_token(dtype, tp) * block for kinds in layers for k in kinds)
        num_blocks = pool_bytes // page_total if page_total else 0
        blocks_per_request = _cdiv(max_model_len, block)
        max_conc = num_blocks / blocks_per_request
        needed = blocks_per_request * page_total
        return VllmConfig(block, num_blocks, 1, len(layers), 0, page_total, True, num_blocks * block,
                          int(max_conc * max_model_len), max_conc, max_model_len, blocks_per_request, needed,
                          0.0)

    # Hybrid: every layer's page is unified to one size.
    attn_page_1tok = max((k.cache_bytes_per_token(dtype, tp) for k in attn_kinds), default=0)
    if mamba_kinds:
        mamba_page = max(k.state_bytes(tp) for k in mamba_kinds)
        if block_size is None and attn_page_1tok:
            # HybridAttentionMambaModelConfig: attention block = align * cdiv(mamba_page, align * attn_page_1tok).
            block = align * _cdiv(mamba_page, align * attn_page_1tok)
        page = block * attn_page_1tok if attn_page_1tok else mamba_page
        padding_fraction = page / mamba_page - 1 if mamba_page else 0.0
    else:
        page = block * attn_page_1tok

    counts = Counter(_spec_type(k) for kinds in layers for k in kinds)
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
    needed = sum(max_usage(t) * n for t, n in counts.items())
    tokens = num_blocks // num_groups * block
    return VllmConfig(block, num_blocks, num_groups, group_size, padding_layers, page, False, tokens,
                      int(max_conc * max_model_len), max_conc, max_model_len, blocks_per_request, needed,
                      padding_fraction)


# SGLang default mem_fraction_static: round((gpu_mem - reserved) / gpu_mem, 3) with reserved_mem bucketed by GPU
# memory (GB as SGLang counts them, i.e. GiB): (2.8 + ps/10) below 35, (9.5 + ps/2) below 90, (12 + ps/2) below
# 160, 32 above; ps = parallel size (server_args.py excerpts, engine-kv-accounting / anchors.md 1.2).
def sglang_default_mem_fraction(gpu_mem_gib: float, parallel_size: int) -> float:
    if gpu_mem_gib < 35:
        reserved = 2.8 + parallel_size / 10
    elif gpu_mem_gib < 90:
        reserved = 9.5 + parallel_size / 2
    elif gpu_mem_gib < 160:
        reserved = 12 + parallel_size / 2
    else:
        reserved = 32
    return round((gpu_mem_gib - reserved) / gpu_mem_gib, 3)


@dataclass(frozen=True)
class SglangPool:
    cell_size_bytes: int
    max_total_num_tokens: int
    page_size: int


def sglang_cell_size(model: ModelSpec, dtype: KVDtype, par: Parallelism) -> int:
    """Per-token bytes on one rank over this PP stage's layers: GQA heads per attention-TP rank, MLA latent
    whole, indexer added for NSA, sliding layers counted like full ones; only attention layers of
    hybrid-linear models count (their mamba pool is separate)."""
    worst = 0
    for stage in pipeline_stages(model.num_layers, par.pp):
        cell = sum(k.cache_bytes_per_token(dtype, par.tp) for i in stage for k in model.layer_kinds[i])
        worst = max(worst, cell)
    return worst


def sglang_pool(model: ModelSpec, dtype: KVDtype, par: Parallelism, rest_memory_bytes: int,
                page_size: int | None = None) -> SglangPool:
    cell = sglang_cell_size(model, dtype, par)
    page = page_size or default_block_size(model, "sglang")
    tokens = rest_memory_bytes // cell if cell else 0
    tokens = tokens // page * page
    return SglangPool(cell, tokens, page)


