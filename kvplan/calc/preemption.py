"""``kvplan compare-preemption``: swap a preempted request's KV to host DRAM and back, or recompute it.

A request preempted after a prompt of P tokens and G generated tokens holds S = P + G tokens of KV.

Swap, per GPU and per direction (hardware.md §7):
    t = n_copies x t_copy + bytes_per_gpu / (BW_large x f_bidir)
  bytes_per_gpu: the GPU's own KV shard at S, replication included (an MLA latent is whole on every TP rank,
  so every rank copies all of it over its own host link); n_copies from the copy layout: ``contiguous``
  (vLLM >= 0.12 offloading: one copy per block across all layers) or ``per-layer`` (old vLLM swap: one copy
  per layer per block per tensor, K and V apart); BW_large = the host link's per-direction rate x the
  preset's large-copy efficiency, or ``pcie_gb_s`` as given; f_bidir: the per-direction slowdown when
  swap-ins and swap-outs share the link. Swap-out is asynchronous (vLLM OffloadingConnector), swap-in is on
  the request's critical path: exposed = swap-in (both directions when ``sync_swap``, vLLM V0).

Recompute (preemption-pd-workload.md §0 formulas 2-3): F = 2 N_mm (S - h) + attention, timed as
    T = F / (MFU x dense peak of the compute dtype x TP GPUs).
batch_stall_gpu_seconds = T x TP: GPU-seconds of compute the co-running batch loses on the request's GPUs
(a non-chunked prefill stops their decode steps for T; chunked prefill spreads the same GPU time out).

recompute_over_swap = T / exposed swap time; the crossover is the smallest context in the swept range
where the cheaper option differs from the one at the range's shortest context (recompute cheaper below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.calc import flops, kv
from kvplan.dtypes import KVDtype
from kvplan.engines import default_block_size
from kvplan.errors import KvplanError
from kvplan.hardware import HardwareSpec
from kvplan.model import ModelSpec
from kvplan.parallel import Parallelism
from kvplan.result import Derivation, Result, Table
from kvplan.units import format_bytes

DEFAULT_SWEEP = (1000, 2000, 5000, 10000, 20000, 50000, 100000)
DEFAULT_MFU = 0.45
DEFAULT_COPY_OVERHEAD_US = 2.3
DEFAULT_BIDIR_FACTOR = 0.83
LAYOUTS = ("contiguous", "per-layer")
COMPUTE_DTYPES = ("auto", "bf16", "fp16", "fp8", "fp4", "int8")
V0_SWAP_SPACE_BYTES = 4 * 2**30

DOC = "shared/reference/preemption-pd-workload.md"
HW = "shared/reference/hardware.md"
MFU_SOURCE = (f"{HW} §9 prefill_mfu 0.45 (range 0.3-0.6; end-to-end prefill MFU 30-50% [R68], kernel ceiling "
              "~0.65-0.8, §6)")
COPY_SOURCE = (f"{HW} §7: t ~ n_copies x 2.3 us + bytes / BW_large; ~2.3 us per cudaMemcpyAsync measured on H20 "
               "[R58] (§9 swap_overhead_per_copy_us)")
BW_SOURCE = (f"{HW} §3 rule of thumb and §9 pcie_eff_large: a large contiguous pinned copy reaches ~80% of the "
             "per-direction rate on Gen4, ~85-90% on Gen5")
BIDIR_SOURCE = ("vLLM offloading-connector blog 2026-01-08, lines 143-146: bidirectional DMA 83.4 GB/s in total vs "
                f"~50 GB/s single-direction (2 MB blocks, H100) -> 41.7 / 50 = 0.83 per direction ({DOC} §2.3); "
                f"{HW} pitfall 4: RTX 5090 56 -> 51 GB/s (0.91) [R42], A100 H2D 25 -> ~11 GB/s (0.44) [R41]")
ASYNC_SOURCE = (f"{DOC} §0 formula 4 and §2.3: the vLLM OffloadingConnector stores asynchronously; a preempted "
                "request's load back from CPU (PR #29870) is on its critical path but overlaps other requests' "
                "compute. vLLM V0 swapped inside the engine step (both directions blocking).")
LAYOUT_SOURCE = (f"{DOC} §2.3 and {HW} §7 [R59]: vLLM PR #27743 (>= 0.12) made one contiguous block across all "
                 "layers (x 2 x num_layers: Llama-3.1-8B 32 KB -> 2 MB); the old layout copies each layer's K and V "
                 "blocks separately (8-72 KB)")
BLOCK_SOURCE = ("block tokens: vLLM CacheConfig.DEFAULT_BLOCK_SIZE = 16 "
                "(docs.vllm.ai/en/stable/api/vllm/config/cache/); "
                f"FlashMLA pages MLA caches in blocks of 64 (deepseek-ai/open-infra-index README, Day 1; {DOC} §1.1)")
FORMULA5_SOURCE = (f"{DOC} §0 formula 5 (recompute cheaper only if BW_pcie < b_kv x MFU x F / (2 N_mm + A S / 2)), "
                   "here with the per-copy overhead, the bidirectional factor and TP added")
PEAK_SOURCE = "dense peak TFLOP/s of the compute dtype from the hardware preset"
STALL_SOURCE = (f"kvplan definition; a prefill inside a decode batch stalls or slows every co-batched request "
                f"({DOC} §3.1 DistServe retrospective: one large prefill can inflate TPOT 2-30x)")


@dataclass(frozen=True)
class PreemptionRequest:
    model: ModelSpec
    hardware: HardwareSpec
    kv_dtype: KVDtype
    tp: int = 8
    prompt_tokens: int = 1000
    generated_tokens: int = 20000
    prefix_hit_tokens: int = 0
    mfu: float = DEFAULT_MFU
    compute_dtype: str = "auto"
    pcie_gb_s: float | None = None          # effective per direction, GB/s (1e9 B/s); pins BW_large
    block_tokens: int | None = None         # None: the layer kinds' engine block size
    layout: str = "contiguous"
    copy_overhead_us: float = DEFAULT_COPY_OVERHEAD_US
    bidir_factor: float = DEFAULT_BIDIR_FACTOR
    sync_swap: bool = False
    sweep: tuple[int, ...] = DEFAULT_SWEEP  # generated-token counts for the table

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.generated_tokens


@dataclass(frozen=True)
class _Setup:
    par: Parallelism
    block_tokens: int
    block_note: str
    bw: float               # effective single-direction bytes/s
    bw_text: str
    bw_sources: tuple[str, ...]
    compute_dtype: str
    peak: float             # FLOP/s per GPU
    peak_source: str
    n_mm: flops.MatmulParams


def _check(ok: bool, message: str, hint: str) -> None:
    if not ok:
        raise KvplanError(message, hint)


def _finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _resolve(req: PreemptionRequest) -> _Setup:
    model, hw = req.model, req.hardware
    s = req.context_tokens
    _check(s > 0, "the request has no tokens (prompt + generated = 0)", "give --prompt or --generated above 0")
    _check(_finite(req.mfu) and 0.01 <= req.mfu <= 1, f"MFU {req.mfu!r} is not in [0.01, 1]",
           "give --mfu like 0.45 (a fraction of the dense peak)")
    _check(0 <= req.prefix_hit_tokens < s, f"prefix hit {req.prefix_hit_tokens:,} is not in [0, {s:,})",
           "the prefix-cache hit must be shorter than prompt + generated")
    _check(req.layout in LAYOUTS, f"unknown copy layout {req.layout!r}", "choose " + " or ".join(LAYOUTS))
    _check(_finite(req.bidir_factor) and 0.01 <= req.bidir_factor <= 1,
           f"bidirectional factor {req.bidir_factor!r} is not in [0.01, 1]",
           "give --bidir-factor like 0.83 (1 = idle link)")
    _check(_finite(req.copy_overhead_us) and 0 <= req.copy_overhead_us <= 1e6,
           f"per-copy overhead {req.copy_overhead_us!r} us is not a sensible non-negative number",
           "give --copy-overhead-us like 2.3 (0 for none)")
    _check(req.block_tokens is None or req.block_tokens >= 1, f"block tokens {req.block_tokens!r} must be >= 1",
           "give --block-tokens like 16 or 64")
    _check(req.pcie_gb_s is None or (_finite(req.pcie_gb_s) and 0.01 <= req.pcie_gb_s <= 1e5),
           f"host link rate {req.pcie_gb_s!r} GB/s is outside 0.01 .. 100,000 GB/s", "give --pcie-gbps like 50")
    par = Parallelism(tp=req.tp)
    kv.check_parallelism(model, par)

    if req.block_tokens is None:
        block = default_block_size(model)
        block_note = f"{block} (engine default for {model.id}'s layer kinds)"
    else:
        block = req.block_tokens
        block_note = f"{block} (given)"

    link = hw.host_link
    if req.pcie_gb_s is not None:
        bw, bw_text, bw_sources = req.pcie_gb_s * 1e9, f"{req.pcie_gb_s:g} GB/s (given, effective)", ("--pcie-gbps",)
    else:
        theo = link.theoretical_gb_s_per_direction
        eff = link.large_copy_efficiency
        if eff is None:
            bw = theo.value * 1e9
            bw_text = f"{theo.value:g} GB/s ({link.name} line rate; the preset has no large-copy efficiency)"
            bw_sources = (theo.cite(),)
        else:
            bw = theo.value * eff.value * 1e9
            bw_text = f"{theo.value:g} x {eff.value:g} = {bw / 1e9:.2f} GB/s ({link.name})"
            bw_sources = (theo.cite(), eff.cite(), BW_SOURCE)

    dtype = req.compute_dtype
    _check(dtype in COMPUTE_DTYPES, f"unknown compute dtype {dtype!r}", "choose " + ", ".join(COMPUTE_DTYPES))
    if dtype == "auto":
        dtype = "fp8" if model.weight_dtype == "fp8" and "fp8" in hw.dense_tflops else "bf16"
    _check(dtype in hw.dense_tflops, f"{hw.id} has no dense {dtype} peak in its preset",
           "choose --compute-dtype " + " or ".join(sorted(hw.dense_tflops)))
    peak = hw.dense_tflops[dtype]
    return _Setup(par, block, block_note, bw, bw_text, bw_sources, dtype, peak.value * 1e12, peak.cite(),
                  flops.matmul_params(model))


def swap_copies(model: ModelSpec, context: int, block_tokens: int, layout: str) -> int:
    """Copies per direction per GPU. contiguous: one per block of the longest-held sequence (all layers in one
    copy), plus one for fixed state if any; per-layer: each layer's own copies (K and V apart)."""
    if layout == "per-layer":
        return sum(g.count * g.kind.swap_copies(context, block_tokens) for g in model.groups)
    held = max(g.kind.tokens_held(context) for g in model.groups)
    has_state = any(g.kind.state_bytes() for g in model.groups)
    return -(-held // block_tokens) + (1 if has_state else 0)


def _evaluate(req: PreemptionRequest, st: _Setup, contexts, layout: str | None = None,
              block_tokens: int | None = None) -> dict:
    """Every figure of the comparison at each context, as numpy arrays (one vectorised pass)."""
    import numpy as np

    layout = layout or req.layout
    block = block_tokens or st.block_tokens
    model, tp = req.model, req.tp
    s = np.asarray(contexts, dtype=np.int64)
    h = np.minimum(req.prefix_hit_tokens, s)
    nbytes = np.array([kv.kv_bytes_at_context_per_gpu(model, req.kv_dtype, int(c), st.par).value for c in s],
                      dtype=np.int64)
    copies = np.array([swap_copies(model, int(c), block, layout) for c in s], dtype=np.int64)
    overhead = copies * (req.copy_overhead_us * 1e-6)
    one_way = overhead + nbytes / (st.bw * req.bidir_factor)
    one_way_alone = overhead + nbytes / st.bw
    directions = 2 if req.sync_swap else 1
    exposed = directions * one_way
    swap_stall = 2 * one_way * tp if req.sync_swap else np.zeros(len(s))
    sf, hf = s.astype(float), h.astype(float)
    f_lin = flops.linear_flops(model, sf, hf)
    f_att = flops.attention_flops(model, sf, hf) + np.zeros(len(s))
    f_all = f_lin + f_att
    t_rc = f_all / (req.mfu * st.peak * tp)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(exposed > 0, t_rc / exposed, np.inf)
    return {"context": s, "prefix": h, "bytes": nbytes, "copies": copies, "one_way": one_way,
            "one_way_alone": one_way_alone, "exposed": exposed, "swap_stall": swap_stall, "flops_linear": f_lin,
            "flops_attention": f_att, "flops": f_all, "recompute": t_rc, "stall": t_rc * tp, "ratio": ratio,
            "recompute_cheaper": t_rc < exposed}


def _crossover(req: PreemptionRequest, st: _Setup, contexts, cheaper) -> int | None:
    """Smallest context in [min, max] of ``contexts`` where the cheaper option differs from the first one's:
    the first sign change between table rows, refined by bisection on whole tokens (the two costs cross once
    between rows; block rounding adds steps of a few microseconds)."""
    first = bool(cheaper[0])
    flips = [i for i in range(1, len(contexts)) if bool(cheaper[i]) != first]
    if not flips:
        return None
    lo, hi = int(contexts[flips[0] - 1]), int(contexts[flips[0]])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if bool(_evaluate(req, st, [mid])["recompute_cheaper"][0]) == first:
            lo = mid
        else:
            hi = mid
    return hi


def _time(seconds: float) -> str:
    if seconds == 0:
        return "0"
    if seconds < 1:
        return f"{seconds * 1e3:,.2f} ms"
    return f"{seconds:,.2f} s"


def _gbs(bps: float) -> str:
    return f"{bps / 1e9:,.2f} GB/s"


def compare_preemption(req: PreemptionRequest) -> Result:
    st = _resolve(req)
    model, hw, tp = req.model, req.hardware, req.tp
    s_req = req.context_tokens

    # The table: each generated count of the sweep (and the request's own), vectorised.
    generated = sorted(set(req.sweep) | {req.generated_tokens})
    rows_g = [g for g in generated if req.prompt_tokens + g > 0]
    contexts = [req.prompt_tokens + g for g in rows_g]
    ev = _evaluate(req, st, contexts)
    i_req = contexts.index(s_req)
    crossover = _crossover(req, st, contexts, ev["recompute_cheaper"])

    def at(key):
        value = ev[key][i_req]
        return int(value) if key in ("bytes", "copies", "context", "prefix") else float(value)

    nbytes, copies = at("bytes"), at("copies")
    one_way, exposed, t_rc, ratio = at("one_way"), at("exposed"), at("recompute"), at("ratio")
    f_all, f_lin, f_att = at("flops"), at("flops_linear"), at("flops_attention")
    t0 = req.copy_overhead_us * 1e-6
    directions = 2 if req.sync_swap else 1
    budget = t_rc / directions - copies * t0
    breakeven = nbytes / (req.bidir_factor * budget) if budget > 0 and nbytes else None

    # Host DRAM: a request at TP=t parks t GPUs' shards, min(t, gpus_per_node) of them on each node.
    on_node = min(tp, hw.node.gpus_per_node)
    host_node_bytes = nbytes * on_node
    dram = hw.node.host_dram_gb.value * 1e9 if hw.node.host_dram_gb is not None else None
    host_fit = int(dram // host_node_bytes) if dram is not None and host_node_bytes else None
    fits = None if dram is None else host_node_bytes <= dram

    # What flips it: the same request under the other copy layouts.
    scenarios = [(f"as configured: {req.layout}, {st.block_tokens}-token blocks", req.layout, st.block_tokens)]
    for layout, block, why in (("per-layer", 16, "vLLM V0 swap: per layer, K and V apart"),
                               ("contiguous", default_block_size(model), "vLLM >= 0.12 offloading layout")):
        if (layout, block) != (req.layout, st.block_tokens):
            scenarios.append((f"{layout}, {block}-token blocks ({why})", layout, block))
    scen_rows, scen_data = [], []
    for label, layout, block in scenarios:
        e = _evaluate(req, st, [s_req], layout, block)
        cheaper = "recompute" if e["recompute_cheaper"][0] else "swap"
        scen_rows.append((label, int(e["copies"][0]), _time(float(e["exposed"][0])), _time(t_rc),
                          f"{float(e['ratio'][0]):,.1f}x", cheaper))
        scen_data.append({"scenario": label, "layout": layout, "block_tokens": block,
                          "swap_copies_per_direction": int(e["copies"][0]),
                          "swap_exposed_seconds": float(e["exposed"][0]), "recompute_over_swap": float(e["ratio"][0]),
                          "cheaper": cheaper})

    cheaper_req = "recompute" if ev["recompute_cheaper"][i_req] else "swap"
    if fits is False:
        cheaper_req = "recompute"
    recommendation = _recommend(req, st, cheaper_req, fits, exposed, t_rc, ratio, breakeven, crossover,
                                scen_data, host_node_bytes, dram, copies, t0, nbytes, contexts)

    max_pos = model.max_position_embeddings
    sweep_rows, sweep_data = [], []
    for i, g in enumerate(rows_g):
        c = contexts[i]
        cheaper = "recompute" if ev["recompute_cheaper"][i] else "swap"
        note = "this request" if c == s_req else ""
        if c <= req.prefix_hit_tokens:
            note = (note + "; " if note else "") + "all in the prefix cache"
        if max_pos and c > max_pos:
            note = (note + "; " if note else "") + "> max context"
        swap_cells = ((_time(float(ev["one_way"][i])), _time(float(ev["exposed"][i]))) if req.sync_swap
                      else (_time(float(ev["exposed"][i])),))
        sweep_rows.append((g, c, format_bytes(int(ev["bytes"][i]), "si"), int(ev["copies"][i]),
                           *swap_cells, f"{float(ev['flops'][i]) / 1e12:,.0f}", _time(float(ev["recompute"][i])),
                           f"{float(ev['stall'][i]):,.2f}", f"{float(ev['ratio'][i]):,.1f}x", cheaper, note))
        sweep_data.append({
            "generated_tokens": g, "context_tokens": c, "prefix_hit_tokens": int(ev["prefix"][i]),
            "swap_bytes_per_gpu": int(ev["bytes"][i]), "swap_copies_per_direction": int(ev["copies"][i]),
            "swap_out_seconds": float(ev["one_way"][i]), "swap_in_seconds": float(ev["one_way"][i]),
            "swap_exposed_seconds": float(ev["exposed"][i]), "recompute_flops": float(ev["flops"][i]),
            "recompute_seconds": float(ev["recompute"][i]), "batch_stall_gpu_seconds": float(ev["stall"][i]),
            "recompute_over_swap": float(ev["ratio"][i]), "cheaper": cheaper,
        })

    swap_word = "swap in + out (sync)" if req.sync_swap else "swap-in"
    swap_cols = ("swap each way", "exposed in + out") if req.sync_swap else ("swap-in",)
    tables = (
        Table(f"{model.name}, {req.kv_dtype.value} KV, {hw.name} x TP={tp}: preempted after {req.prompt_tokens:,} "
              "prompt + G generated tokens, swap vs recompute",
              ("generated G", "context S", "KV/GPU", "copies", *swap_cols, "recompute TFLOP", "recompute",
               "stall GPU-s", "rc/swap", "cheaper", "note"),
              tuple(sweep_rows), primary=True),
        Table(f"This request (S = {s_req:,} tokens)", ("figure", "value"), (
            ("swap bytes per GPU (each direction)", f"{nbytes:,} B ({format_bytes(nbytes, 'si')})"),
            ("copies per direction", f"{copies:,} ({req.layout}, {st.block_note} tokens per block)"),
            ("host link, effective per direction", st.bw_text),
            ("with swaps both ways at once", f"x {req.bidir_factor:g} = {_gbs(st.bw * req.bidir_factor)}"),
            ("swap-out / swap-in, each", _time(one_way) + (" (swap-out overlaps decode)" if not req.sync_swap
                                                           else " (both block the engine step)")),
            ("swap time on the request's critical path", _time(exposed)),
            ("recompute FLOPs", f"{f_all:.4g} ({f_lin:.3g} matmul + {f_att:.3g} attention)"
                                + (f", {at('prefix'):,} tokens from the prefix cache" if at("prefix") else "")),
            (f"recompute at MFU {req.mfu:g}, {st.compute_dtype} peak x {tp} GPUs", _time(t_rc)),
            ("batch stall (recompute)", f"{t_rc * tp:,.3f} GPU-s"),
            ("recompute / swap", f"{ratio:,.1f}x"),
            ("break-even host link (effective, per direction)",
             _gbs(breakeven) if breakeven else "none: recompute is faster at any link rate"),
            ("crossover context in the table's range", f"{crossover:,} tokens" if crossover else "none"),
            ("host DRAM for the swapped request (this node)",
             f"{format_bytes(host_node_bytes, 'si')} of {dram / 1e9:,.0f} GB: room for {host_fit:,} such requests"
             if dram is not None else f"{format_bytes(host_node_bytes, 'si')} (node DRAM not in the preset)"),
        )),
        Table("What flips the choice at this context", ("copy layout", "copies/dir", f"exposed {swap_word}",
                                                         "recompute", "recompute/swap", "cheaper"),
              tuple(scen_rows)),
    )

    data = {
        "model": model.id,
        "hardware": hw.id,
        "kv_dtype": req.kv_dtype.value,
        "tp": tp,
        "prompt_tokens": req.prompt_tokens,
        "generated_tokens": req.generated_tokens,
        "context_tokens": s_req,
        "prefix_hit_tokens": req.prefix_hit_tokens,
        "layout": req.layout,
        "block_tokens": st.block_tokens,
        "copy_overhead_us": req.copy_overhead_us,
        "bidir_factor": req.bidir_factor,
        "sync_swap": req.sync_swap,
        "host_link_gb_s_effective": st.bw / 1e9,
        "swap_bytes_per_gpu": nbytes,
        "swap_copies_per_direction": copies,
        "swap_out_seconds": one_way,
        "swap_in_seconds": one_way,
        "swap_in_seconds_idle_link": at("one_way_alone"),
        "swap_exposed_seconds": exposed,
        "swap_batch_stall_gpu_seconds": at("swap_stall"),
        "params_active_matmul": st.n_mm.value,
        "attention_flops_per_pair": flops.attention_coefficient(model),
        "compute_dtype": st.compute_dtype,
        "peak_tflops_per_gpu": st.peak / 1e12,
        "mfu": req.mfu,
        "recompute_flops": f_all,
        "recompute_flops_matmul": f_lin,
        "recompute_flops_attention": f_att,
        "recompute_seconds": t_rc,
        "batch_stall_gpu_seconds": t_rc * tp,
        "recompute_over_swap": ratio,
        "cheaper": cheaper_req,
        "breakeven_pcie_gb_s": breakeven / 1e9 if breakeven else None,
        "crossover_context_tokens": crossover,
        "host_bytes_per_request": nbytes * tp,
        "host_bytes_per_node": host_node_bytes,
        "host_dram_gb": dram / 1e9 if dram is not None else None,
        "host_dram_requests_fit": host_fit,
        "host_dram_fits": fits,
        "recommendation": recommendation,
        "scenarios": scen_data,
        "sweep": sweep_data,
    }

    notes = [recommendation]
    if nbytes:
        v0 = V0_SWAP_SPACE_BYTES // nbytes
        notes.append(f"vLLM V0's default --swap-space of 4 GiB per GPU holds {v0:,} such request(s) "
                     f"({format_bytes(nbytes, 'si')} per GPU each; {DOC} §2.1, §2.5).")
    if st.n_mm.estimated:
        notes.append(f"N_mm for {model.id} is an estimate: {st.n_mm.source}.")
    if model.uses_kind("mla") and tp > 1:
        notes.append(f"The MLA latent is whole on every TP rank: each of the {tp} GPUs swaps all "
                     f"{format_bytes(nbytes, 'si')} over its own link while recompute splits over all {tp}, so "
                     f"TP={tp} divides the recompute/swap ratio by {tp} (a sharded GQA cache keeps it).")
    moe = model.params_active and model.params_total and model.params_active.value < model.params_total.value
    if moe:
        notes.append("With expert parallelism or attention data-parallelism across the node, a recompute prefill "
                     f"stalls the whole EP group, not only the request's TP GPUs ({DOC} §3.1).")

    assumptions = [
        "Swap copies the request's KV shard of each GPU over that GPU's own host link, all GPUs in parallel; "
        "pinned, NUMA-local host buffers (hardware.md pitfall 7).",
        f"Per-direction rate x {req.bidir_factor:g}: swap-ins of resumed requests share the link with swap-outs "
        "(a preemption storm, or the offloading connector's stores); --bidir-factor 1 for an idle link.",
        "Swap-out overlaps decode (asynchronous offloading) and stalls no one; swap-in delays only this request."
        if not req.sync_swap else
        "Synchronous swap (vLLM V0): both directions block the engine step for every request.",
        f"Recompute re-prefills S - h tokens at MFU {req.mfu:g} of the {st.compute_dtype} dense peak on all {tp} GPUs; "
        "causal attention counted as pairs = S^2/2 (keys per query capped by windows / top-k).",
        "batch_stall_gpu_seconds = recompute seconds x TP GPUs: the GPU time the co-running batch loses on the "
        "request's GPUs (a whole decode stall for a non-chunked prefill; the same GPU time spread out when chunked).",
        "Host DRAM: the whole node's host_dram_gb, shared by its GPUs, with nothing reserved for the OS or weights.",
    ]
    if st.compute_dtype == "fp8" and model.uses_kind("mla"):
        assumptions.append("All FLOPs charged at the fp8 peak; DeepSeek runs the MLA core in BF16, so recompute is "
                           f"optimistic by up to ~1.5x at long S, which only widens a swap win ({DOC} §2.5).")

    derivations = _derivations(req, st, s_req, at, nbytes, copies, one_way, exposed, t_rc, ratio, breakeven,
                               crossover, f_all, f_lin, f_att, host_node_bytes, dram, host_fit, on_node)
    return Result("compare-preemption", data, tables, tuple(notes), tuple(assumptions), tuple(derivations))


def _recommend(req, st, cheaper, fits, exposed, t_rc, ratio, breakeven, crossover, scen_data, host_node_bytes,
               dram, copies, t0, nbytes, contexts) -> str:
    s = req.context_tokens
    if fits is False:
        return (f"Recompute: swapping is impossible here, the node's {dram / 1e9:,.0f} GB of host DRAM cannot hold "
                f"the request's {format_bytes(host_node_bytes, 'si')} of KV.")
    if cheaper == "swap":
        text = (f"Swap first, recompute last: at {s:,} tokens swap-in exposes {_time(exposed)} against "
                f"{_time(t_rc)} of re-prefill ({ratio:,.1f}x), and re-prefill would also take "
                f"{t_rc * req.tp:,.2f} GPU-seconds of decode from the batch on its {req.tp} GPUs.")
        flips = []
        if breakeven:
            flips.append(f"the host link fell below {_gbs(breakeven)} effective per direction "
                         f"(now {_gbs(st.bw)})")
        if crossover:
            flips.append(f"the context were under {crossover:,} tokens")
        for sc in scen_data[1:]:
            if sc["cheaper"] == "recompute":
                flips.append(f"copies were {sc['layout']} {sc['block_tokens']}-token blocks "
                             f"({_time(sc['swap_exposed_seconds'])})")
        lo, hi = min(contexts), max(contexts)
        if not crossover:
            text += f" No context in the table ({lo:,}-{hi:,} tokens) flips it"
            text += "." if flips else ", nor does any copy layout shown."
        return text + (" Recompute would win only if " + "; or if ".join(flips) + "." if flips else "")
    why = []
    if copies * t0 > nbytes / (st.bw * req.bidir_factor):
        why.append(f"{copies:,} copies x {req.copy_overhead_us:g} us of per-copy overhead dominate the transfer")
    if breakeven and st.bw < breakeven:
        why.append(f"the link ({_gbs(st.bw)}) is below the {_gbs(breakeven)} break-even")
    text = (f"Recompute: at {s:,} tokens re-prefill ({_time(t_rc)}) beats swap-in ({_time(exposed)})"
            + (f" because {' and '.join(why)}" if why else "") + ".")
    if crossover:
        text += f" Swap wins from {crossover:,} tokens on."
    text += (f" Re-prefill still costs the batch {t_rc * req.tp:,.2f} GPU-seconds of decode; an asynchronous "
             "swap-in costs it none.")
    return text


def _derivations(req, st, s, at, nbytes, copies, one_way, exposed, t_rc, ratio, breakeven, crossover, f_all,
                 f_lin, f_att, host_node_bytes, dram, host_fit, on_node) -> list[Derivation]:
    model, tp, h = req.model, req.tp, at("prefix")
    msrc = tuple(model.sources)
    out = [Derivation("N_mm (active matmul params per token)", f"{st.n_mm.value:,.0f}",
                      "active weight-matmul parameters per token, input embedding excluded, LM head included",
                      st.n_mm.source, msrc + (DOC + " notation",))]
    for name, count, symbolic, substituted in flops.attention_terms(model):
        out.append(Derivation(f"attention FLOPs, group {name!r} ({count} layers)", substituted.split(" = ")[-1],
                              symbolic, substituted, msrc + (flops.FLOPS_SOURCE,)))
    groups = " + ".join(f"{g.count} x {g.kind.attention_flops_per_pair():,}"
                        + (f" [<= {g.kind.attended_keys_cap():,} keys]" if g.kind.attended_keys_cap() else "")
                        for g in model.groups if g.kind.attention_flops_per_pair())
    out.append(Derivation(
        "recompute_flops", f"{f_all:.4g} FLOP",
        "2 x N_mm x (S - h) + sum over groups: layers x FLOPs per pair x (pairs(S) - pairs(h)) (+ state FLOPs x "
        "(S - h)); pairs(n) = n^2/2, or cap x n - cap^2/2 past a window / top-k cap",
        f"2 x {st.n_mm.value:,.0f} x ({s:,} - {h:,}) = {f_lin:.4g}; attention A = {groups or '0'} -> {f_att:.4g}; "
        f"total {f_all:.4g}", msrc + (flops.FLOPS_SOURCE,)))
    out.append(Derivation(
        "recompute_seconds", _time(t_rc), "F / (MFU x dense peak of the compute dtype x TP GPUs)",
        f"{f_all:.4g} / ({req.mfu:g} x {st.peak / 1e12:,g} TFLOP/s ({st.compute_dtype}) x {tp}) = {t_rc:.4g} s",
        (MFU_SOURCE if req.mfu == DEFAULT_MFU else "--mfu", st.peak_source, PEAK_SOURCE)))
    out.append(Derivation("batch_stall_gpu_seconds", f"{t_rc * tp:,.3f} GPU-s", "recompute seconds x TP GPUs",
                          f"{t_rc:.4g} x {tp} = {t_rc * tp:.4g}", (STALL_SOURCE,)))
    held = " + ".join(f"{g.count} x {g.kind.cache_bytes_per_token(req.kv_dtype, tp):,} x {g.kind.tokens_held(s):,}"
                      for g in model.groups if g.kind.cache_bytes_per_token(req.kv_dtype, tp))
    out.append(Derivation(
        "swap_bytes_per_gpu", f"{nbytes:,} B",
        "sum over groups: layers x bytes per token on one TP rank x tokens held (+ fixed state), replication "
        "included (kv_bytes_at_context_per_gpu)", f"{held or '0'} = {nbytes:,} B at S = {s:,}",
        msrc + ("shared/reference/engine-kv-accounting.md pitfalls 1-2",)))
    if req.layout == "per-layer":
        terms = " + ".join(f"{g.count} x {g.kind.swap_copies(s, st.block_tokens):,}" for g in model.groups)
        copy_formula = ("per-layer: sum over layers of tensors (K and V apart) x ceil(tokens held / block tokens), "
                        "+ one per state tensor")
    else:
        terms = f"ceil({max(g.kind.tokens_held(s) for g in model.groups):,} / {st.block_tokens})"
        copy_formula = "contiguous: ceil(tokens held / block tokens), one copy per block across all layers (+1 state)"
    out.append(Derivation("swap_copies_per_direction", f"{copies:,}", copy_formula, f"{terms} = {copies:,}",
                          (LAYOUT_SOURCE, BLOCK_SOURCE)))
    out.append(Derivation("host link rate, effective per direction", _gbs(st.bw),
                          "theoretical per direction x large-copy efficiency, unless --pcie-gbps pins it",
                          st.bw_text, st.bw_sources))
    out.append(Derivation(
        "swap_out_seconds = swap_in_seconds", _time(one_way),
        "n_copies x per-copy overhead + bytes / (BW_large x bidirectional factor)",
        f"{copies:,} x {req.copy_overhead_us:g} us + {nbytes:,} B / ({st.bw / 1e9:.2f} GB/s x {req.bidir_factor:g})"
        f" = {one_way:.4g} s", (COPY_SOURCE, BIDIR_SOURCE)))
    out.append(Derivation(
        "swap_exposed_seconds", _time(exposed),
        "swap-in only (swap-out asynchronous), or both directions with --sync-swap",
        f"{2 if req.sync_swap else 1} x {one_way:.4g} = {exposed:.4g} s", (ASYNC_SOURCE,)))
    out.append(Derivation("recompute_over_swap", f"{ratio:,.2f}", "recompute_seconds / swap_exposed_seconds",
                          f"{t_rc:.4g} / {exposed:.4g} = {ratio:.4g}", (DOC + " §2.5",)))
    out.append(Derivation(
        "breakeven_pcie_gb_s", _gbs(breakeven) if breakeven else "none",
        "BW* = bytes / (f_bidir x (T_rc / directions - n_copies x overhead)); recompute is cheaper below BW*",
        (f"{nbytes:,} / ({req.bidir_factor:g} x ({t_rc:.4g} / {2 if req.sync_swap else 1} - {copies:,} x "
         f"{req.copy_overhead_us:g}e-6)) = {_gbs(breakeven)}") if breakeven else
        "T_rc / directions <= n_copies x overhead: recompute is cheaper at any link rate",
        (FORMULA5_SOURCE,)))
    out.append(Derivation(
        "crossover_context_tokens", f"{crossover:,}" if crossover else "none in range",
        "smallest S in the table's range where the cheaper option differs from the shortest row's; table rows "
        "then bisection on whole tokens",
        f"range {req.prompt_tokens + min(req.sweep + (req.generated_tokens,)):,}.."
        f"{req.prompt_tokens + max(req.sweep + (req.generated_tokens,)):,} tokens: "
        + (f"recompute cheaper below {crossover:,}, swap from there" if crossover else "no change of sign"),
        (DOC + " §0 formulas 3-5",)))
    node = req.hardware.node
    out.append(Derivation(
        "host DRAM", f"{host_fit:,} requests" if host_fit is not None else "n/a",
        "floor(node host DRAM / (bytes per GPU x GPUs of the request on the node))",
        (f"{dram / 1e9:,.0f} GB / ({nbytes:,} B x min({tp}, {node.gpus_per_node})) = {host_fit:,}"
         if dram is not None else "the hardware preset has no host_dram_gb"),
        (node.host_dram_gb.cite(),) if node.host_dram_gb is not None else ("hardware preset",)))
    return out
