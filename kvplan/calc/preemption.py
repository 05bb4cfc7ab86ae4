"""``kvplan compare-preemption``: swap a preempted request's KV to host DRAM and back, or recompute it.

A request preempted after a prompt of P tokens and G generated tokens (the scenario's decode) holds S = P + G
tokens of KV. Every price comes from the one cost model, ``kvplan.calc.costs``:

Swap, per GPU and per direction: t = n_copies x t_copy + bytes_per_gpu / (BW_large x f_bidir). bytes_per_gpu is
the GPU's own KV shard at S, replication included (an MLA latent is whole on every TP rank, so every rank copies
all of it over its own host link); n_copies from the copy layout: ``contiguous`` (vLLM >= 0.12 offloading: one
copy per block across all layers) or ``per-layer`` (old vLLM swap: one copy per layer per block per tensor).
Swap-out is asynchronous, swap-in is on the request's critical path: exposed = swap-in (both directions with
``sync_swap``, vLLM V0).

Recompute: F = 2 N_mm (S - h) + attention, priced by the one prefill price (kvplan.calc.costs.StepModel.
prefill_seconds): in chunks of max_num_batched_tokens, each max(weight read, F_chunk on this GPU / (MFU x dense peak))
(dense matmuls and attention over TP, routed experts over EP, MLA's attention core at the BF16 peak; the MFU
compute-only) + the chunk's communication (TP all-reduces, EP dispatch / combine, PP sends; not overlapped) + the
step's fixed overhead; batch_stall_gpu_seconds = T x TP (the GPU time the co-running batch loses on the request's
GPUs).

recompute_over_swap = T / exposed swap time; the crossover is the smallest context in the swept range where
the cheaper option differs from the one at the range's shortest context.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import cast

from kvplan.calc import capacity, costs, flops, kv
from kvplan.calc.costs import CostSettings
from kvplan.errors import KvplanError
from kvplan.scenario import Scenario
from kvplan.specs.values import (
    Bytes,
    Count,
    Flops,
    Note,
    Number,
    Rate,
    Ratio,
    Seconds,
    Tokens,
    default,
    derived,
    given,
    note,
)

swap_copies = costs.swap_copies  # re-exported: the copy count is part of this comparison

DEFAULT_SWEEP = (1000, 2000, 5000, 10000, 20000, 50000, 100000)
V0_SWAP_SPACE_BYTES = 4 * 2**30
STALL_SOURCE = ("kvplan definition; one large prefill inside a decode batch can inflate TPOT 2-30x (DistServe, "
                "arXiv 2401.09670)")
FORMULA_SOURCE = ("recompute is cheaper only if BW < bytes / (f_bidir x (T_rc / directions - n_copies x t_copy)): "
                  "kvplan's break-even, from the swap and recompute times above")


@dataclass(frozen=True)
class PreemptionRow:
    generated: Tokens
    context: Tokens
    prefix_hit: Tokens
    swap_bytes_per_gpu: Bytes
    copies: Count
    swap_one_way: Seconds
    swap_one_way_idle_link: Seconds
    swap_exposed: Seconds
    swap_batch_stall: Seconds
    flops_matmul: Flops
    flops_attention: Flops
    flops_total: Flops
    recompute: Seconds
    batch_stall: Seconds
    recompute_over_swap: Ratio
    recompute_cheaper: bool
    over_limit: bool


@dataclass(frozen=True)
class LayoutCase:
    label: str
    layout: str
    block_tokens: int
    copies: Count
    swap_exposed: Seconds
    recompute_over_swap: Ratio
    cheaper: str


@dataclass(frozen=True)
class PreemptionPlan:
    scenario: Scenario
    settings: CostSettings
    block: Tokens
    link: Rate
    compute_dtype: str
    peak: Number                    # FLOP/s per GPU
    n_mm: flops.MatmulParams
    rows: tuple[PreemptionRow, ...]
    this: PreemptionRow
    crossover: Tokens               # None: no change of sign in range
    breakeven: Rate                 # None: recompute is cheaper at any link rate
    host: capacity.HostTier
    host_fits: bool | None
    cases: tuple[LayoutCase, ...]
    cheaper: str
    sweep_range: tuple[Tokens, Tokens]
    link_both_ways: Rate            # the effective link with swaps both ways at once (x bidir factor)
    v0_swap_requests: Count         # such requests vLLM V0's default 4 GiB --swap-space holds (None: no bytes)
    copy_overhead_dominates: bool   # the per-copy overhead outweighs the transfer itself
    mfu: Number                     # the prefill MFU priced: --mfu, else the GPU preset's prefill_mfu (its source)


def evaluate(s: Scenario, st: CostSettings, context: int, prefix_hit: int, block: int, link: float, prefill,
             layout: str | None = None) -> PreemptionRow:
    """Every figure of the comparison at one context (exact integers for bytes and copies)."""
    model, par, tp = s.sized_model, s.parallelism, s.parallelism.tp
    layout = layout or st.layout
    h = min(prefix_hit, context)
    nbytes = kv.kv_bytes_at_context_per_gpu(model, s.kv_dtype, context, par).value
    copies = costs.swap_copies(model, context, block, layout)
    one_way = costs.swap_seconds(nbytes, copies, link, st)
    idle = costs.swap_seconds(nbytes, copies, link, st, shared_link=False)
    directions = 2 if st.sync_swap else 1
    exposed = directions * one_way
    f_lin = flops.linear_flops(model, context, h)
    f_att = flops.attention_flops(model, context, h)
    f_all = f_lin + f_att
    step, chunk = prefill
    t_rc = step.prefill_seconds(context, h, chunk)
    chunks = max(1, -(-(context - h) // chunk))
    # the price's three parts, as prefill_seconds sums them chunk by chunk: communication, fixed overhead, compute
    sizes = [min(chunk, context - start) for start in range(h, context, chunk)] or [0]
    comm = sum(step.prefill_comm(n) for n in sizes)
    fixed = len(sizes) * step.overhead_s if context > h else 0.0
    compute = t_rc - comm - fixed
    mla_bf16 = step.prefill_mla_flops_s is not None and step.prefill_mla_flops_s != step.prefill_flops_s
    ep = s.parallelism.ep or tp
    peak = step.prefill_flops_s / st.mfu
    ratio = t_rc / exposed if exposed > 0 else float("inf")
    srcs = tuple(model.sources)
    t0 = st.copy_overhead_us
    held = " + ".join(f"{g.count} x {g.kind.cache_bytes_per_token(s.kv_dtype, tp):,} x {g.kind.tokens_held(context):,}"
                      for g in model.groups if g.kind.cache_bytes_per_token(s.kv_dtype, tp))
    pairs = "; ".join(f"{name} ({n} layers): {sub}" for name, n, _, sub in flops.attention_terms(model))
    return PreemptionRow(
        Tokens(context - s.prompt_tokens, derived("generated tokens before the preemption",
                                                  f"{context - s.prompt_tokens:,}")),
        Tokens(context, derived("prompt + generated", f"{s.prompt_tokens:,} + {context - s.prompt_tokens:,}")),
        Tokens(h, derived("min(--prefix-hit, S)", f"{h:,}")),
        Bytes(nbytes, derived("sum over groups: layers x per-rank bytes per token x tokens held (+ state), "
                              "replication included", f"{held or '0'} = {nbytes:,} B at S = {context:,}", *srcs)),
        Count(copies, derived(f"{layout}: " + ("sum over layers of tensors x ceil(tokens held / block), + one per "
                                               "state tensor" if layout == "per-layer" else
                                               "ceil(tokens held / block), one copy per block across all layers "
                                               "(+1 state)"), f"block {block} -> {copies:,}", costs.LAYOUT_SOURCE)),
        Seconds(one_way, derived("n_copies x per-copy overhead + bytes / (BW_large x bidirectional factor)",
                                 f"{copies:,} x {t0:g} us + {nbytes:,} B / ({link / 1e9:.2f} GB/s x "
                                 f"{st.bidir_factor:g}) = {one_way:.4g} s", costs.COPY_SOURCE, costs.BIDIR_SOURCE)),
        Seconds(idle, derived("the same on an idle link (factor 1)", f"{idle:.4g} s")),
        Seconds(exposed, derived("swap-in only (swap-out asynchronous), or both directions with --sync-swap",
                                 f"{directions} x {one_way:.4g} = {exposed:.4g} s", costs.ASYNC_SOURCE)),
        Seconds(2 * one_way * tp if st.sync_swap else 0.0,
                derived("GPU-seconds a synchronous swap blocks the batch (0 when asynchronous)",
                        f"2 x {one_way:.4g} x {tp}" if st.sync_swap else "0")),
        Flops(f_lin, derived("2 x N_mm x (S - h)", f"2 x {flops.matmul_params(model).value:,.0f} x ({context:,} - "
                                                   f"{h:,}) = {f_lin:.4g}", *srcs)),
        Flops(f_att, derived("sum over groups: layers x FLOPs per (query, key) pair x (pairs(S) - pairs(h)) "
                             "(+ state FLOPs); pairs(n) = n^2/2, capped by windows / top-k",
                             f"{pairs or 'none'} -> {f_att:.4g}",
                             flops.FLOPS_SOURCE)),
        Flops(f_all, derived("matmul + attention FLOPs", f"{f_lin:.4g} + {f_att:.4g} = {f_all:.4g}")),
        Seconds(t_rc, derived(
            "the one prefill price (costs.StepModel.prefill_seconds), summed over chunks of max_num_batched_tokens: "
            "max(weights / (HBM x hbm), the chunk's FLOPs on this GPU / (MFU x dense peak of the compute dtype)) "
            "(dense matmuls and attention over TP, routed experts over EP, MLA's attention core at the BF16 peak; "
            "the MFU is compute-only) + the chunk's communication (TP all-reduces, EP dispatch / combine, PP sends; "
            "not overlapped) + the step's fixed overhead",
            f"{chunks} chunk(s) of {chunk:,}: compute {compute * 1e3:.3f} ms ({f_all:.4g} FLOPs at {st.mfu:g} x "
            f"{peak / 1e12:,g} TFLOP/s" + (f", MLA core at {step.prefill_mla_flops_s / st.mfu / 1e12:,g}"
                                              if mla_bf16 and step.prefill_mla_flops_s else "")
            + f", over TP {tp} / EP {ep}; each chunk at least the weight read {step.weight_read_seconds * 1e3:.3f} ms)"
            f" + communication {comm * 1e3:.3f} ms + {chunks} x {step.overhead_s * 1e3:.3f} ms = {t_rc:.4g} s",
            _mfu_source(step), costs.PREFILL_ALLREDUCE_SOURCE,
            *((costs.MLA_BF16_SOURCE,) if mla_bf16 else ()))),
        Seconds(t_rc * tp, derived("recompute seconds x TP GPUs (GPU-seconds)", f"{t_rc:.4g} x {tp}", STALL_SOURCE)),
        Ratio(ratio, derived("recompute seconds / exposed swap seconds", f"{t_rc:.4g} / {exposed:.4g} = {ratio:.4g}")),
        t_rc < exposed, s.over_limit(context))


def plan_preemption(s: Scenario, settings: CostSettings | None = None, prefix_hit_tokens: int = 0,
                    sweep: tuple[int, ...] = DEFAULT_SWEEP, dram_bytes_per_node: int | None = None) -> PreemptionPlan:
    """Swap or recompute a request of ``s`` preempted at its full context (module docstring): the time of each
    from the one cost model, the verdict, and the same over the ``sweep`` of contexts."""
    st = settings or CostSettings()
    model, hw = s.sized_model, s.hardware
    context = s.context_tokens
    if not 0 <= prefix_hit_tokens < context:
        raise KvplanError(f"prefix hit {prefix_hit_tokens:,} is not in [0, {context:,})",
                          "the prefix-cache hit must be shorter than prompt + generated")
    capacity.kv_pool(s)   # the deployment must hold the weights, as in concurrency
    block_v = capacity.block_tokens(s)
    block = block_v.number()
    link_v = costs.host_link_rate(hw, s.host_link_gbs)
    link = float(link_v.number())
    dtype = costs.compute_dtype_for(model, hw, st.compute_dtype)
    peak = costs.compute_peak(hw, dtype)
    peak_v = Number(peak, default(f"dense {dtype} peak of {hw.id}", hw.dense_tflops[dtype].cite())
                    if st.compute_dtype == "auto" else given("--compute-dtype"))
    # the one prefill price (kvplan.calc.costs), at the MFU and compute dtype asked for; no --mfu: the GPU preset's
    # prefill_mfu (compute-only since prefill20c, as the price takes it; kvplan's generic one for a GPU without it)
    factors = costs.step_factors(hw, prefill_mfu=st.mfu)
    mfu_v = cast(Number, factors.prefill_mfu) if st.mfu is None else Number(st.mfu, given("--mfu"))
    st = dataclasses.replace(st, mfu=factors.value("prefill_mfu"))
    assert st.mfu is not None
    step = costs.step_model(s, factors)
    step = dataclasses.replace(step, prefill_flops_s=peak * st.mfu)
    prefill = (step, s.engine_adapter.batch_limits_for(s)[0].number())
    n_mm = flops.matmul_params(model)

    generated = sorted(set(sweep) | {s.decode_tokens})
    contexts = [s.prompt_tokens + g for g in generated if s.prompt_tokens + g > 0]
    rows = [evaluate(s, st, c, prefix_hit_tokens, block, link, prefill) for c in contexts]
    this = rows[contexts.index(context)]

    crossover = _crossover(s, st, contexts, rows, prefix_hit_tokens, block, link, prefill)
    crossover_v = Tokens(crossover, derived(
        "smallest S in the table's range where the cheaper option differs from the shortest row's (table rows, "
        "then bisection on whole tokens)", f"range {contexts[0]:,}..{contexts[-1]:,}: "
        + (f"recompute cheaper below {crossover:,}" if crossover and rows[0].recompute_cheaper else
           f"swap cheaper below {crossover:,}" if crossover else "no change of sign")))
    nbytes, copies = this.swap_bytes_per_gpu.number(), this.copies.number()
    directions = 2 if st.sync_swap else 1
    budget = float(this.recompute.number()) / directions - copies * st.copy_overhead_us * 1e-6
    be = nbytes / (st.bidir_factor * budget) if budget > 0 and nbytes else None
    breakeven = Rate(be, derived(
        "BW* = bytes / (f_bidir x (T_rc / directions - n_copies x t_copy)); recompute is cheaper below BW*",
        f"{nbytes:,} / ({st.bidir_factor:g} x ({this.recompute.value:.4g} / {directions} - {copies:,} x "
        f"{st.copy_overhead_us:g}e-6)) = {be / 1e9:.2f} GB/s" if be else
        "T_rc / directions <= n_copies x t_copy: recompute is cheaper at any link rate", FORMULA_SOURCE))

    # the host tier sized as concurrency sizes it: the request's block-rounded bytes on each GPU
    host = capacity.host_tier(s, capacity.request_bytes(s, context, block=block), dram_bytes_per_node)
    dram = host.bytes_per_node.value   # None: no host DRAM figure for this GPU
    fits = None if dram is None else host.request_bytes_on_node.number() <= dram

    default_block = s.engine_adapter.block_size(model).number()
    cases = [(f"as configured: {st.layout}, {block}-token blocks", st.layout, block)]
    for layout, b, why in (("per-layer", 16, "vLLM V0 swap: per layer, K and V apart"),
                           ("contiguous", default_block, "vLLM >= 0.12 offloading layout")):
        if (layout, b) != (st.layout, block):
            cases.append((f"{layout}, {b}-token blocks ({why})", layout, b))
    layout_cases = []
    for label, layout, b in cases:
        e = evaluate(s, st, context, prefix_hit_tokens, b, link, prefill, layout)
        layout_cases.append(LayoutCase(label, layout, b, e.copies, e.swap_exposed, e.recompute_over_swap,
                                       "recompute" if e.recompute_cheaper else "swap"))
    cheaper = "recompute" if this.recompute_cheaper or fits is False else "swap"
    sweep_range = (Tokens(contexts[0], derived("the shortest context of the table")),
                   Tokens(contexts[-1], derived("the longest context of the table")))
    both = Rate(link * st.bidir_factor, derived("effective per-direction rate x bidirectional factor",
                                                f"{link:,.0f} x {st.bidir_factor:g}", costs.BIDIR_SOURCE))
    v0 = Count(V0_SWAP_SPACE_BYTES // nbytes if nbytes else None, derived(
        "vLLM V0's default --swap-space (4 GiB per GPU) // swap bytes per GPU",
        f"{V0_SWAP_SPACE_BYTES:,} // {nbytes:,}"))
    dominates = copies * st.copy_overhead_us * 1e-6 > nbytes / (link * st.bidir_factor)
    return PreemptionPlan(s, st, block_v, link_v, dtype, peak_v, n_mm, tuple(rows), this, crossover_v, breakeven,
                          host, fits, tuple(layout_cases), cheaper, sweep_range, both, v0, dominates, mfu_v)


def _mfu_source(step: costs.StepModel) -> str:
    """The prefill MFU's source as the recompute line cites it: --mfu, or the preset's (generic) figure's own."""
    d = cast(Number, step.factors.prefill_mfu).why
    assert d is not None
    return "--mfu" if d.formula.startswith("given") else "; ".join(d.sources)


def recommendation(plan: PreemptionPlan) -> Note:
    """The verdict at the request's context, and what would flip it, as a note of the plan's figures."""
    s, st, this = plan.scenario, plan.settings, plan.this
    tp = s.parallelism.tp
    ctx = Tokens(s.context_tokens)
    host = plan.host
    if plan.host_fits is False:
        return note("Recompute: swapping is impossible here, the node's {dram} of host DRAM cannot hold the "
                    "request's {need} of KV.", dram=host.bytes_per_node, need=host.request_bytes_on_node)
    crossover, be = plan.crossover, plan.breakeven
    if plan.cheaper == "swap":
        text = note("Swap first, recompute last: at {ctx} tokens swap-in exposes {exposed} against {rc} of re-prefill "
                    "({ratio:,.1f}x), and re-prefill would also take {stall:,.2f} GPU-seconds of decode from the batch "
                    f"on its {tp} GPUs.", ctx=ctx, exposed=this.swap_exposed, rc=this.recompute,
                    ratio=this.recompute_over_swap, stall=this.batch_stall)
        flips = []
        if be:
            flips.append(note("the host link fell below {be} effective per direction (now {link})", be=be,
                              link=plan.link))
        if crossover:
            flips.append(note("the context were under {crossover} tokens", crossover=crossover))
        for case in plan.cases[1:]:
            if case.cheaper == "recompute":
                flips.append(note(f"copies were {case.layout} {case.block_tokens}-token blocks ({{exposed}})",
                                  exposed=case.swap_exposed))
        lo, hi = plan.sweep_range
        if not crossover:
            text += note(" No context in the table ({lo}-{hi} tokens) flips it", lo=lo, hi=hi)
            text += "." if flips else ", nor does any copy layout shown."
        return text + (" Recompute would win only if " + Note.join("; or if ", flips) + "." if flips else "")
    why = []
    if plan.copy_overhead_dominates:
        why.append(note("{copies} copies x {overhead:g} us of per-copy overhead dominate the transfer",
                        copies=this.copies, overhead=Number(st.copy_overhead_us)))
    if be and plan.link.number() < be.number():
        why.append(note("the link ({link}) is below the {be} break-even", link=plan.link, be=be))
    text = (note("Recompute: at {ctx} tokens re-prefill ({rc}) beats swap-in ({exposed})", ctx=ctx, rc=this.recompute,
                 exposed=this.swap_exposed)
            + (" because " + Note.join(" and ", why) if why else "") + ".")
    if crossover:
        text += note(" Swap wins from {crossover} tokens on.", crossover=crossover)
    return text + note(" Re-prefill still costs the batch {stall:,.2f} GPU-seconds of decode; an asynchronous "
                       "swap-in costs it none.", stall=this.batch_stall)


def _crossover(s, st, contexts, rows, prefix_hit, block, link, prefill) -> int | None:
    """Smallest context in the range where the cheaper option differs from the first row's: the first sign change
    between rows, refined by bisection on whole tokens."""
    first = rows[0].recompute_cheaper
    flips = [i for i in range(1, len(rows)) if rows[i].recompute_cheaper != first]
    if not flips:
        return None
    lo, hi = contexts[flips[0] - 1], contexts[flips[0]]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if evaluate(s, st, mid, prefix_hit, block, link, prefill).recompute_cheaper == first:
            lo = mid
        else:
            hi = mid
    return hi
