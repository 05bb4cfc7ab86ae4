"""``kvplan compare-preemption`` presentation."""

from __future__ import annotations

from kvplan.calc import costs
from kvplan.calc.preemption import PreemptionPlan, recommendation
from kvplan.present.common import scenario_data, spec_notes
from kvplan.render.result import Result, Table
from kvplan.specs.layers import MLA
from kvplan.specs.values import Count, Note, Number, Tokens, default, given, note


def data_tp(s) -> Count:
    return Count(s.parallelism.tp, default("the GPUs that hold and recompute the request (TP)"))


def _setting(value: float, default_value: float, flag: str, source: str) -> Number:
    return Number(value, default(f"{default_value:g}", source) if value == default_value else given(flag))


def present(plan: PreemptionPlan) -> Result:
    s, st, this = plan.scenario, plan.settings, plan.this
    model, hw, tp = s.sized_model, s.hardware, s.parallelism.tp
    rec = recommendation(plan)
    nbytes = this.swap_bytes_per_gpu
    prompt_v, ctx_v, bidir_v, mfu_v = (Tokens(s.prompt_tokens), Tokens(s.context_tokens), Number(st.bidir_factor),
                                       plan.mfu)
    swap_cols = ("swap each way", "exposed in + out") if st.sync_swap else ("swap-in",)
    rows = []
    for r in plan.rows:
        row_note = "this request" if r.context.value == s.context_tokens else ""
        if r.context.number() <= r.prefix_hit.number():
            row_note = (row_note + "; " if row_note else "") + "all in the prefix cache"
        if r.over_limit:
            row_note = (row_note + "; " if row_note else "") + "> max context"
        swap_cells = (r.swap_one_way, r.swap_exposed) if st.sync_swap else (r.swap_exposed,)
        rows.append((r.generated, r.context, r.swap_bytes_per_gpu, r.copies, *swap_cells, r.flops_total, r.recompute,
                     r.batch_stall, r.recompute_over_swap, "recompute" if r.recompute_cheaper else "swap", row_note))
    host = plan.host
    host_text = (note("{need} of {dram}: room for {n} such requests", need=host.request_bytes_on_node,
                      dram=host.bytes_per_node, n=host.requests_per_node)
                 if host.bytes_per_node.value is not None else
                 note("{need} (node DRAM not in the preset)", need=host.request_bytes_on_node))
    swap_word = "swap in + out (sync)" if st.sync_swap else "swap-in"
    tables = (
        Table(note("{model} on {hw} " f"x TP={tp}: preempted after {{prompt}} prompt + G generated tokens, swap vs "
                   "recompute", prompt=prompt_v, model=model.name, hw=hw.name),
              ("generated G", "context S", "KV/GPU", "copies", *swap_cols, "recompute FLOPs", "recompute",
               "stall GPU-s", "rc/swap", "cheaper", "note"), tuple(rows), primary=True),
        Table(note("This request (S = {ctx} tokens)", ctx=ctx_v), ("figure", "value"), (
            ("swap bytes per GPU (each direction)", this.swap_bytes_per_gpu),
            (f"copies per direction ({st.layout}, {plan.block.value}-token blocks)", this.copies),
            ("host link, effective per direction", plan.link),
            (note("with swaps both ways at once (x {bidir:g})", bidir=bidir_v), plan.link_both_ways),
            ("swap-out / swap-in, each" + (" (swap-out overlaps decode)" if not st.sync_swap else
                                           " (both block the engine step)"), this.swap_one_way),
            ("swap time on the request's critical path", this.swap_exposed),
            ("recompute FLOPs", this.flops_total),
            (note("recompute at MFU {mfu:g}, " f"{plan.compute_dtype} peak x {tp} GPUs, + communication", mfu=mfu_v),
             this.recompute),
            ("batch stall (recompute), GPU-s", this.batch_stall),
            ("recompute / swap", this.recompute_over_swap),
            ("break-even host link (effective, per direction)",
             plan.breakeven if plan.breakeven.value else "none: recompute is faster at any link rate"),
            ("crossover context in the table's range", plan.crossover if plan.crossover.value else "none"),
            ("host DRAM for the swapped request (this node)", host_text),
        )),
        Table("What flips the choice at this context", ("copy layout", "copies/dir", f"exposed {swap_word}",
                                                         "recompute", "recompute/swap", "cheaper"),
              tuple((c.label, c.copies, c.swap_exposed, this.recompute, c.recompute_over_swap, c.cheaper)
                    for c in plan.cases)),
    )
    data = {
        **scenario_data(s),
        "tp": data_tp(s),
        "generated_tokens": Tokens(s.decode_tokens, given("--generated")),
        "prefix_hit_tokens": this.prefix_hit,
        "layout": st.layout,
        "block_tokens": plan.block,
        "copy_overhead_us": _setting(st.copy_overhead_us, costs.DEFAULT_COPY_OVERHEAD_US, "--copy-overhead-us",
                                     costs.COPY_SOURCE),
        "bidir_factor": _setting(st.bidir_factor, costs.DEFAULT_BIDIR_FACTOR, "--bidir-factor", costs.BIDIR_SOURCE),
        "sync_swap": st.sync_swap,
        "host_link_bytes_per_second": plan.link,
        "swap_bytes_per_gpu": this.swap_bytes_per_gpu,
        "swap_copies_per_direction": this.copies,
        "swap_out_seconds": this.swap_one_way,
        "swap_in_seconds": this.swap_one_way,
        "swap_in_seconds_idle_link": this.swap_one_way_idle_link,
        "swap_exposed_seconds": this.swap_exposed,
        "swap_batch_stall_gpu_seconds": this.swap_batch_stall,
        "params_active_matmul": Number(plan.n_mm.value, default(plan.n_mm.source)),
        "compute_dtype": plan.compute_dtype,
        "peak_flops_per_second_per_gpu": plan.peak,
        "mfu": plan.mfu,
        "recompute_flops": this.flops_total,
        "recompute_flops_matmul": this.flops_matmul,
        "recompute_flops_attention": this.flops_attention,
        "recompute_seconds": this.recompute,
        "batch_stall_gpu_seconds": this.batch_stall,
        "recompute_over_swap": this.recompute_over_swap,
        "cheaper": plan.cheaper,
        "breakeven_host_link_bytes_per_second": plan.breakeven,
        "crossover_context_tokens": plan.crossover,
        "host_bytes_per_node": host.request_bytes_on_node,
        "host_dram_bytes_per_node": host.bytes_per_node,
        "host_dram_requests_fit": host.requests_per_node,
        "host_dram_fits": plan.host_fits,
        "recommendation": rec,
        "scenarios": [{"scenario": c.label, "layout": c.layout,
                       "block_tokens": Tokens(c.block_tokens, default("the copy layout's block size")),
                       "swap_copies_per_direction": c.copies, "swap_exposed_seconds": c.swap_exposed,
                       "recompute_over_swap": c.recompute_over_swap, "cheaper": c.cheaper} for c in plan.cases],
        "sweep": [{"generated_tokens": r.generated, "context_tokens": r.context, "prefix_hit_tokens": r.prefix_hit,
                   "swap_bytes_per_gpu": r.swap_bytes_per_gpu, "swap_copies_per_direction": r.copies,
                   "swap_out_seconds": r.swap_one_way, "swap_in_seconds": r.swap_one_way,
                   "swap_exposed_seconds": r.swap_exposed, "recompute_flops": r.flops_total,
                   "recompute_seconds": r.recompute, "batch_stall_gpu_seconds": r.batch_stall,
                   "recompute_over_swap": r.recompute_over_swap,
                   "cheaper": "recompute" if r.recompute_cheaper else "swap"} for r in plan.rows],
    }
    notes: list[str | Note] = [rec]
    if nbytes.value:
        notes.append(note("vLLM V0's default --swap-space of 4 GiB per GPU holds {n} such request(s) ({nbytes} per "
                          "GPU each).", n=plan.v0_swap_requests, nbytes=nbytes))
    if plan.n_mm.estimated:
        notes.append(f"N_mm for {model.id} is an estimate: {plan.n_mm.source}.")
    if model.uses(MLA) and tp > 1:
        notes.append(note(f"The MLA latent is whole on every TP rank: each of the {tp} GPUs swaps all {{nbytes}} over "
                          f"its own link while recompute splits over all {tp}, so TP={tp} divides the recompute/swap "
                          f"ratio by {tp} (a sharded GQA cache keeps it).", nbytes=nbytes))
    if model.params_active and model.params_total and model.params_active.value < model.params_total.value:
        notes.append("With expert parallelism or attention data-parallelism across the node, a recompute prefill "
                     "stalls the whole EP group, not only the request's TP GPUs.")
    assumptions: list[str | Note] = [
        "Swap copies the request's KV shard of each GPU over that GPU's own host link, all GPUs in parallel; "
        "pinned, NUMA-local host buffers.",
        note("Per-direction rate x {bidir:g}: swap-ins of resumed requests share the link with swap-outs (a preemption "
             "storm, or the offloading connector's stores); --bidir-factor 1 for an idle link.", bidir=bidir_v),
        "Swap-out overlaps decode (asynchronous offloading) and stalls no one; swap-in delays only this request."
        if not st.sync_swap else "Synchronous swap (vLLM V0): both directions block the engine step for every request.",
        note("Recompute re-prefills S - h tokens at MFU {mfu:g} of the " f"{plan.compute_dtype} dense peak on all {tp} "
             "GPUs (compute only), plus each chunk's communication (TP all-reduces, EP dispatch / combine, PP sends), "
             "not overlapped; causal attention counted as pairs = S^2/2 (keys per query capped by windows / top-k).",
             mfu=mfu_v),
        "batch_stall_gpu_seconds = recompute seconds x TP GPUs: the GPU time the co-running batch loses on the "
        "request's GPUs (a whole decode stall for a non-chunked prefill; the same GPU time spread out when chunked).",
        "Host DRAM: the whole node's DRAM (or --dram), nothing kept back for the OS or the engine; a request parks "
        "one shard per GPU it spans on the node.",
    ]
    if plan.compute_dtype == "fp8" and model.uses(MLA):
        assumptions.append("The matmuls at the fp8 peak and MLA's attention core at the BF16 peak, as DeepSeek runs "
                           "it (the prefill price's MLA rule, costs.MLA_BF16_SOURCE).")
    assumptions.extend(spec_notes(s))
    brief = (("swap bytes per GPU", this.swap_bytes_per_gpu), ("swap-in exposed", this.swap_exposed),
             ("recompute", this.recompute), ("recompute / swap", this.recompute_over_swap), ("cheaper", plan.cheaper))
    warnings: tuple[str | Note, ...] = ()
    if plan.host_fits is False:   # the verdict rests on it: a warning, printed first like the note it was
        warnings, notes = (notes[0],), notes[1:]
    return Result("compare-preemption", s.headline(), data, tables, tuple(notes), tuple(assumptions), brief=brief,
                  warnings=warnings)
