"""vLLM v1: blocks, KV-cache groups, the start-up log lines, and the defaults that size the pool.

Rules read from vllm-project/vllm at commit 001cabc1: ``vllm/v1/kv_cache_interface.py`` (page sizes per spec:
FullAttentionSpec, SlidingWindowSpec, MLAAttentionSpec, MambaSpec), ``vllm/v1/core/kv_cache_utils.py`` (groups,
num_blocks, "GPU KV cache size", "Maximum concurrency", ``_check_enough_kv_cache_memory``),
``vllm/engine/arg_utils.py`` (``get_batch_defaults``) and ``vllm/config/cache.py`` (gpu_memory_utilization 0.9,
DEFAULT_BLOCK_SIZE 16). Layer kinds answer for their own bytes; this module only groups layers the way vLLM
does and applies its rounding. Every pipeline stage is a worker; num_blocks is the minimum over workers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kvplan.dtypes import KVDtype
from kvplan.engines.base import Engine, EngineReport
from kvplan.layers import MLA, FullAttention, GatedDeltaNet, Mamba2, SlidingWindowAttention, SparseIndexer
from kvplan.model import ModelSpec
from kvplan.parallel import Parallelism, pipeline_stages
from kvplan.values import Bytes, Count, Number, Ratio, Tokens, default, derived, given

COMMIT = "001cabc1"
SOURCE = (f"vllm-project/vllm @{COMMIT}: vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py "
          "(https://github.com/vllm-project/vllm)")
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
UTILIZATION_SOURCE = (f"vLLM CacheConfig.gpu_memory_utilization default 0.9, a fraction of total memory "
                      f"(vllm/config/cache.py @{COMMIT})")
BATCH_DEFAULTS_SOURCE = (f"vLLM EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py @{COMMIT}): on GPUs with "
                         ">= 70 GiB "
                         "that are not A100, the API server defaults to max_num_batched_tokens 8192 and max_num_seqs "
                         "1024; otherwise 2048 / 256")
BLOCK_SOURCE = ("vLLM CacheConfig.DEFAULT_BLOCK_SIZE = 16; FlashMLA pages MLA caches in blocks of 64 "
                "(vllm/platforms/cuda.py; deepseek-ai/FlashMLA README)")


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
    kv_cache_tokens: int               # the "GPU KV cache size: N tokens" line (mid-2025 formula)
    kv_cache_tokens_late: int          # later versions: int(max_concurrency * max_model_len)
    max_concurrency: float             # "Maximum concurrency for max_model_len tokens per request: x"
    max_model_len: int
    blocks_per_request: int
    needed_for_one_request_bytes: int  # _check_enough_kv_cache_memory's figure
    mamba_page_padding: float          # fraction the mamba page is padded by (0 when none)


class VllmEngine(Engine):
    id = "vllm"
    release = f"vLLM v1 as read at commit {COMMIT}"
    sources = (SOURCE,)
    fraction_name = "gpu_memory_utilization"
    settings = frozenset({"gpu_memory_utilization", "kv_pool_bytes", "max_model_len", "max_num_batched_tokens",
                          "max_num_seqs", "block_size", "activation_reserve_bytes", "runtime_reserve_bytes"})
    # vLLM's spec per kind: MLA and the V3.2 indexer are MLAAttentionSpec, a FullAttentionSpec type, so they
    # group with full attention (UniformTypeKVCacheSpecs).
    kind_table = {FullAttention: "full", MLA: "full", SparseIndexer: "full", SlidingWindowAttention: "sliding_window",
                  GatedDeltaNet: "mamba", Mamba2: "mamba"}
    block_tokens_table = {FullAttention: 16, SlidingWindowAttention: 16, MLA: 64, SparseIndexer: 16,
                          GatedDeltaNet: 16, Mamba2: 16}
    defaults_of = "vLLM"
    default_steps_gib = (70.0,)   # get_batch_defaults: >= 70 GiB -> 8192 / 1024

    def batch_limits(self, hw):
        mnbt, mns = default_batch_limits(hw)
        why = default(f"{hw.id}: {hw.hbm_capacity_gib.value:g} GiB", BATCH_DEFAULTS_SOURCE)
        return Tokens(mnbt, why), Count(mns, why)

    def memory_fraction(self, scenario, par):
        if scenario.gpu_memory_utilization is not None:
            return Number(scenario.gpu_memory_utilization, given("--gpu-memory-utilization"))
        return Number(DEFAULT_GPU_MEMORY_UTILIZATION, default("vLLM's gpu_memory_utilization", UTILIZATION_SOURCE))

    def spec_type(self, kind) -> str:
        spec = self.spec_of(kind)
        return f"sliding_window({kind.window})" if spec == "sliding_window" else spec

    def config(self, model: ModelSpec, dtype: KVDtype, par: Parallelism, pool_bytes: int, max_model_len: int,
               max_num_batched_tokens: int, block_size: int | None = None) -> VllmConfig:
        results = [self._stage(model, dtype, par.tp, stage, pool_bytes, max_model_len, max_num_batched_tokens,
                               block_size) for stage in pipeline_stages(model.num_layers, par.pp)]
        return min(results, key=lambda r: r.num_blocks)

    def _stage(self, model, dtype, tp, stage, pool_bytes, max_model_len, max_num_batched_tokens, block_size):
        kinds_per_layer = model.layer_kinds
        layers = [kinds_per_layer[i] for i in stage]
        align = int(self.block_size(model).value)
        block = block_size or align
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
            return VllmConfig(block, num_blocks, 1, len(layers), 0, page_total, True, num_blocks * block,
                              int(max_conc * max_model_len), max_conc, max_model_len, blocks_per_request, needed, 0.0)

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
        needed = sum(max_usage(t) * n for t, n in counts.items())
        tokens = num_blocks // num_groups * block
        return VllmConfig(block, num_blocks, num_groups, group_size, padding_layers, page, False, tokens,
                          int(max_conc * max_model_len), max_conc, max_model_len, blocks_per_request, needed,
                          padding_fraction)

    def report(self, scenario, model, par, pool_bytes, block):
        mml = scenario.max_model_len or model.max_position_embeddings or scenario.context_tokens
        mnbt, _ = self.batch_limits_for(scenario)
        cfg = self.config(model, scenario.kv_dtype, par, pool_bytes, mml, int(mnbt.value), scenario.block_size)
        src = (SOURCE,)
        mml_v = Tokens(mml, given("--max-model-len") if scenario.max_model_len else
                       default("the model's max_position_embeddings"))
        num_blocks = Count(cfg.num_blocks, derived(
            "min over pipeline workers of pool // page bytes (// layers per group for hybrid models)",
            f"{pool_bytes:,} // {cfg.page_bytes_per_layer:,}" + (f" // {cfg.group_size}" if not cfg.uniform else "")
            + f" = {cfg.num_blocks:,}", *src))
        block_v = Tokens(cfg.block_size, derived(
            "the block size; hybrid attention + state models: align x cdiv(state page, align x attention page "
            "per token), even for a given --block-size" if cfg.mamba_page_padding else "the block size",
            f"{cfg.block_size}", *src))
        tokens = Tokens(cfg.kv_cache_tokens, derived(
            "num_blocks // groups x block (the 'GPU KV cache size' line, mid-2025 releases)",
            f"{cfg.num_blocks:,} // {cfg.num_groups} x {cfg.block_size} = {cfg.kv_cache_tokens:,}", *src))
        tokens_late = Tokens(cfg.kv_cache_tokens_late, derived(
            "int(max_concurrency x max_model_len) (the same line in later releases)",
            f"int({cfg.max_concurrency:.4f} x {mml:,}) = {cfg.kv_cache_tokens_late:,}", *src))
        conc = Ratio(cfg.max_concurrency, derived(
            "num_blocks / blocks one max_model_len request needs (its groups' max memory usage)",
            f"{cfg.num_blocks:,} / {cfg.blocks_per_request:,} = {cfg.max_concurrency:.4f}", *src))
        needed = Bytes(cfg.needed_for_one_request_bytes, derived(
            "sum over layer specs of max memory usage at max_model_len (_check_enough_kv_cache_memory)",
            f"{cfg.needed_for_one_request_bytes:,} B for {mml:,} tokens", *src))
        groups = Count(cfg.num_groups, derived("KV cache groups (hybrid: cdiv(layers of each spec, group size))",
                                               f"{cfg.num_groups} x {cfg.group_size} layers", *src))
        padding = Count(cfg.padding_layers, derived("groups x group size - layers", f"{cfg.padding_layers}", *src))
        fits = cfg.needed_for_one_request_bytes <= pool_bytes
        rows = (("num_blocks (min over workers)", num_blocks), ("block size (tokens)", block_v),
                ("KV cache groups", groups), ("layers per group", cfg.group_size), ("padding layers", padding),
                ("GPU KV cache size (log line), tokens", tokens),
                (f"Maximum concurrency for {mml:,} tokens per request", conc),
                ("KV needed for one max_model_len request", needed))
        data = {"num_blocks": num_blocks, "vllm_kv_cache_tokens": tokens,
                "vllm_kv_cache_tokens_late_versions": tokens_late, "vllm_max_concurrency": conc,
                "vllm_max_model_len": mml_v, "vllm_block_size": block_v, "vllm_kv_cache_groups": groups,
                "vllm_padding_layers": padding, "vllm_fits_one_max_len_request": fits}
        notes = []
        if not fits:
            notes.append(f"vLLM would refuse to start: one {mml:,}-token request needs "
                         f"{cfg.needed_for_one_request_bytes / 2**30:.2f} GiB of KV but the pool is "
                         f"{pool_bytes / 2**30:.2f} GiB; lower --max-model-len.")
        if not cfg.uniform:
            notes.append("Hybrid model: vLLM's 'GPU KV cache size' line is not capacity; read 'Maximum concurrency'.")
        if cfg.mamba_page_padding:
            notes.append(f"vLLM pads the linear-attention state page by {cfg.mamba_page_padding:.1%} to match "
                         f"the {cfg.block_size}-token attention block.")
        return EngineReport(f"vLLM v1 accounting ({self.release})", rows, data, tuple(notes))


ENGINE = VllmEngine()


def vllm_config(model, dtype, par, pool_bytes, max_model_len, max_num_batched_tokens, block_size=None) -> VllmConfig:
    """vLLM's num_blocks, logged token count and maximum concurrency for a pool on each GPU."""
    return ENGINE.config(model, dtype, par, pool_bytes, max_model_len, max_num_batched_tokens, block_size)
