"""SGLang: the token pool (``max_total_num_tokens``), its cell size per token, page size and default memory fraction.

Rules read from sgl-project/sglang at commit 001ccef0:
``python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py``
(rest_memory, cell size per token, rounding to pages) and ``python/sglang/srt/server_args.py`` (the default
mem_fraction_static from a reserved-memory bucket by GPU size).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.dtypes import KVDtype
from kvplan.engines.base import Engine, EngineReport
from kvplan.errors import KvplanError
from kvplan.layers import MLA, FullAttention, GatedDeltaNet, Mamba2, SlidingWindowAttention, SparseIndexer
from kvplan.model import ModelSpec
from kvplan.parallel import Parallelism, pipeline_stages
from kvplan.values import Bytes, Count, Number, TokenBytes, Tokens, default, derived, given

COMMIT = "001ccef0"
SOURCE = (f"sgl-project/sglang @{COMMIT}: python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py "
          "(https://github.com/sgl-project/sglang)")
FRACTION_SOURCE = (f"SGLang server_args.py @{COMMIT}: default mem_fraction_static = round((GPU memory - reserved) / "
                   "GPU memory, 3), reserved bucketed by GPU size: < 35 GiB 2.8 + ps/10, < 90 GiB 9.5 + ps/2, "
                   "< 160 GiB 12 + ps/2, else 32 (ps = TP x PP)")


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


@dataclass(frozen=True)
class SglangPool:
    cell_size_bytes: int
    max_total_num_tokens: int
    page_size: int


class SglangEngine(Engine):
    id = "sglang"
    release = f"SGLang as read at commit {COMMIT}"
    sources = (SOURCE,)
    fraction_name = "mem_fraction_static"
    settings = frozenset({"mem_fraction_static", "kv_pool_bytes", "max_model_len", "max_num_seqs", "block_size",
                          "runtime_reserve_bytes"})
    # What each kind adds to SGLang's per-token cell: attention heads, the MLA latent, the NSA indexer key; a
    # sliding window counts like full attention in the combined cell; linear-attention / SSM state lives in a
    # separate mamba pool and adds nothing to the cell.
    kind_table = {FullAttention: "cell", SlidingWindowAttention: "cell (swa pool)", MLA: "cell", SparseIndexer: "cell",
                  GatedDeltaNet: "mamba pool", Mamba2: "mamba pool"}
    # Page size: 1 token, except FlashMLA's 64-token pages.
    block_tokens_table = {FullAttention: 1, SlidingWindowAttention: 1, MLA: 64, SparseIndexer: 1, GatedDeltaNet: 1,
                          Mamba2: 1}
    defaults_of = "SGLang"
    default_steps_gib = (35.0, 90.0, 160.0)   # the reserved-memory buckets of the default mem_fraction_static

    def batch_limits(self, hw):
        # SGLang sizes chunked prefill and running requests itself; kvplan only needs a bound for admission.
        why = default("SGLang has no vLLM-style batch defaults; kvplan bounds admission by the pool")
        return Tokens(8192, why), Count(1024, why)

    def memory_fraction(self, scenario, par):
        if scenario.mem_fraction_static is not None:
            return Number(scenario.mem_fraction_static, given("--mem-fraction-static"))
        hw = scenario.hardware
        gib = hw.hbm_capacity_gib.value
        ps = par.tp * par.pp
        reserved = reserved_gib(gib, ps)
        value = sglang_default_mem_fraction(gib, ps)
        if value <= 0:
            raise KvplanError(f"{scenario.model.id} does not fit on {hw.id} with SGLang: its default reserve of "
                              f"{reserved:g} GiB leaves nothing of the {gib:g} GiB GPU",
                              "use a larger GPU, or give --mem-fraction-static")
        return Number(value, derived("round((GPU memory - reserved) / GPU memory, 3)",
                                     f"round(({gib:g} - {reserved:g}) / {gib:g}, 3) = {value:g}", FRACTION_SOURCE))

    def activation_reserve(self, scenario, model, par):
        return Bytes(0, default("inside SGLang's 1 - mem_fraction_static headroom", FRACTION_SOURCE))

    def cell_size(self, model: ModelSpec, dtype: KVDtype, par: Parallelism) -> int:
        """Per-token bytes on one rank over this PP stage's layers: GQA heads per attention-TP rank, MLA latent
        whole, indexer added for NSA, sliding layers counted like full ones; only attention layers of
        hybrid-linear models count (their mamba pool is separate)."""
        worst = 0
        for stage in pipeline_stages(model.num_layers, par.pp):
            cell = sum(k.cache_bytes_per_token(dtype, par.tp) for i in stage for k in model.layer_kinds[i]
                       if self.spec_of(k) != "mamba pool")
            worst = max(worst, cell)
        return worst

    def pool(self, model, dtype, par, rest_memory_bytes, page_size=None) -> SglangPool:
        cell = self.cell_size(model, dtype, par)
        page = page_size or int(self.block_size(model).value)
        tokens = rest_memory_bytes // cell if cell else 0
        tokens = tokens // page * page
        return SglangPool(cell, tokens, page)

    def report(self, scenario, model, par, pool_bytes, block):
        sg = self.pool(model, scenario.kv_dtype, par, pool_bytes, scenario.block_size)
        cell = TokenBytes(sg.cell_size_bytes, derived("sum over this rank's attention layers of bytes per token",
                                                 f"{sg.cell_size_bytes:,} B", SOURCE))
        tokens = Tokens(sg.max_total_num_tokens, derived(
            "rest_memory // cell size, rounded down to whole pages",
            f"{pool_bytes:,} // {sg.cell_size_bytes:,} -> {sg.max_total_num_tokens:,} (page {sg.page_size})", SOURCE))
        page = Tokens(sg.page_size, given("--block-size") if scenario.block_size else
                      default("1 token, 64 for FlashMLA", SOURCE))
        notes = ()
        if any(type(g.kind) is SlidingWindowAttention for g in model.groups):
            notes = ("SGLang splits hybrid-SWA pools by swa_full_tokens_ratio; kvplan reports the combined cell.",)
        rows = (("cell size (bytes per token on this rank)", cell), ("max_total_num_tokens", tokens),
                ("page size (tokens)", page))
        data = {"sglang_max_total_num_tokens": tokens, "sglang_cell_size_bytes": cell, "sglang_page_size": page}
        return EngineReport(f"SGLang accounting ({self.release})", rows, data, notes)


ENGINE = SglangEngine()


def sglang_cell_size(model, dtype, par) -> int:
    return ENGINE.cell_size(model, dtype, par)


def sglang_pool(model, dtype, par, rest_memory_bytes, page_size=None) -> SglangPool:
    return ENGINE.pool(model, dtype, par, rest_memory_bytes, page_size)
