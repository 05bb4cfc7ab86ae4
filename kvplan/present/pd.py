"""``kvplan pd`` presentation."""

from __future__ import annotations

from kvplan.calc.pd import PdPlan, ratio_label
from kvplan.present.common import scenario_data, spec_notes
from kvplan.render.result import Result, Table
from kvplan.specs.values import Number, Tokens, default, given, note


def present(plan: PdPlan) -> Result:
    s, o = plan.scenario, plan.options
    t = o.targets
    assert t is not None
    decode_v = Tokens(s.decode_tokens)
    targets = t.notes()
    under = targets[0]
    for extra in targets[1:]:
        under = under + " and " + extra
    be = plan.breakeven_ratio.value
    below = plan.breakeven_below

    def breakeven_text(first: str, at: bool):
        """The break-even found, its first word capitalised as ``first`` gives it ("b" or "B"); ``at``: with the
        output length it holds at (the headline's own says it)."""
        if not be:
            found = note(("n" if first == "b" else "N") + "o break-even: disaggregation wins at no prompt:output "
                         "from 1:100 to 50:1")
        elif below.value is None:
            found = note(("n" if first == "b" else "N") + "o break-even: disaggregation wins at every prompt:output "
                         "priced, from ") + ratio_label(plan.breakeven_ratio)
        else:
            sides = [(below, "colocate"), (plan.breakeven_ratio, "disaggregate")]
            (lo, lo_says), (hi, hi_says) = sorted(sides, key=lambda side: side[0].number())
            found = (note(first + f"reak-even: {lo_says} at prompt:output ") + ratio_label(lo) + f", {hi_says} at "
                     + ratio_label(hi))
        return found + note(" at {decode} output tokens", decode=decode_v) if at else found

    breakeven = breakeven_text("b", False)
    # no colocated goodput leaves the ratio no figure (infinite, or 0 / 0 when neither side meets the targets)
    ratio = ("{margin:.2f}x" if plan.colocated_requests_per_second.number() else
             "neither meets the targets" if not plan.disaggregated_requests_per_second.number() else
             "colocated has no goodput")
    verdict = ("Disaggregate" if plan.recommend else "Do not disaggregate") + note(
        ": goodput {dis:,.3g} vs {col:,.3g} requests/s colocated ({dtps:,.0f} vs {ctps:,.0f} output tokens/s; "
        + ratio + ", the bar is 1.05x; ", dis=plan.disaggregated_requests_per_second,
        col=plan.colocated_requests_per_second, dtps=plan.disaggregated_tokens_per_second,
        ctps=plan.colocated_tokens_per_second, margin=plan.margin) + breakeven + ") under " + under + "."
    tq, fq = t.tpot_percentile, t.ttft_percentile
    colocated = Table(note(f"Colocated: {plan.instances.value} instance(s) of {plan.gpus_per_instance.value} GPU(s), "
                           "{prompt} prompt + {decode} output tokens", prompt=Tokens(s.prompt_tokens), decode=decode_v),
                      ("figure", "value"), (
        ("prefill (T_pf) per request", plan.prefill), ("prefill chunks", plan.prefill_chunks),
        ("prefill GPU-seconds per request", plan.interference_gpu_seconds),
        ("prefill share of a replica's time", plan.prefill_share),
        ("decode / prefill GPU time", plan.decode_over_prefill),
        ("batch under the SLO", plan.colocated_batch), ("TPOT without prefills", plan.tpot_plain),
        ("TPOT with prefills, mean (closed form)", plan.tpot_colocated_mean),
        # the Poisson run at the goodput rate (not at the batch above): said, as the disaggregated table says it
        (f"TPOT at the goodput rate, p{tq} (simulated)", plan.tpot_colocated_at),
        (f"TTFT at the goodput rate, p{fq} (simulated)", plan.ttft_colocated_at),
        ("TPOT inflation", plan.tpot_inflation), ("goodput, requests/s", plan.colocated_requests_per_second),
        ("goodput, output tokens/s", plan.colocated_tokens_per_second)))
    disaggregated = Table("Disaggregated", ("figure", "value"), (
        ("KV transfer per GPU", plan.transfer_bytes_per_gpu), ("NIC per GPU per direction", plan.nic),
        ("KV transfer", plan.transfer), ("exposed after the prefill", plan.transfer_exposed),
        ("prefill (T_pf) on the prefill layout", plan.prefill_disaggregated),
        ("prompts a prefill pass packs, saturated", plan.prefill_batch),
        ("prefill per prompt, packed", plan.prefill_packed),
        ("TTFT unloaded (prefill + exposed transfer + handover)", plan.ttft_disaggregated),
        ("role layouts that hold the model", plan.role_layouts),
        ("prefill TP", plan.prefill_tp), ("prefill instances", plan.prefill_instances),
        ("decode TP", plan.decode_tp), ("decode instances", plan.decode_instances),
        ("decode batch under the SLO", plan.decode_batch),
        ("decode TPOT (closed form)", plan.tpot_decode), ("idle share of the larger pool", plan.idle_share),
        ("capacity of the split, requests/s", plan.disaggregated_capacity),
        ("fractional split, requests/s", plan.fluid_requests_per_second),
        ("integer / fractional split", plan.split_efficiency),
        (f"prefill queue wait, p{fq} (simulated)", plan.prefill_wait_at),
        (f"TTFT at the goodput rate, p{fq} (simulated)", plan.ttft_disaggregated_at),
        ("goodput, requests/s", plan.disaggregated_requests_per_second),
        ("goodput, output tokens/s", plan.disaggregated_tokens_per_second)))
    rows: list[tuple] = []
    for r in plan.ratios:
        if not r.fits:
            rows.append((r.label, r.prompt, None, None, None, "does not fit"))
            continue
        rows.append((r.label, r.prompt, r.colocated, r.disaggregated, r.split,
                     "disaggregate" if r.disaggregation_wins else "colocate"))
    sweep = Table(note("By prompt:output ratio at {decode} output tokens", decode=decode_v), ("prompt:output",
                  "prompt tokens",
                  "colocated tok/s", "disaggregated tok/s", "split prefill : decode", "better"), tuple(rows),
                  primary=True)
    notes = list(plan.reasons) + [breakeven_text("B", True) + "."]
    data = {
        **scenario_data(s),
        "tpot_slo_seconds": Number(o.tpot_slo, default("50 ms") if o.tpot_slo == 0.05 else given("--tpot-slo")),
        **t.values(),
        "instances": plan.instances, "gpus_per_instance": plan.gpus_per_instance,
        "prefill_seconds": plan.prefill, "interference_gpu_seconds_per_request": plan.interference_gpu_seconds,
        "prefill_share": plan.prefill_share, "decode_over_prefill": plan.decode_over_prefill,
        "colocated_batch": plan.colocated_batch, "tpot_seconds_plain": plan.tpot_plain,
        "tpot_seconds_colocated_mean": plan.tpot_colocated_mean,
        f"tpot_seconds_colocated_p{tq}": plan.tpot_colocated_at,
        f"ttft_seconds_colocated_p{fq}": plan.ttft_colocated_at,
        "colocated_tp": plan.colocated_tp, **plan.colocated_degrees,
        "tpot_inflation": plan.tpot_inflation, "colocated_tokens_per_second": plan.colocated_tokens_per_second,
        "kv_transfer_bytes_per_gpu": plan.transfer_bytes_per_gpu, "kv_transfer_seconds": plan.transfer,
        "kv_transfer_exposed_seconds": plan.transfer_exposed, "ttft_seconds_disaggregated": plan.ttft_disaggregated,
        "nic_bytes_per_second": plan.nic, "prefill_instances": plan.prefill_instances,
        "decode_instances": plan.decode_instances, "decode_batch": plan.decode_batch,
        "tpot_seconds_decode": plan.tpot_decode, "idle_share": plan.idle_share,
        "disaggregated_tokens_per_second": plan.disaggregated_tokens_per_second,
        "breakeven_prompt_over_output": plan.breakeven_ratio,
        "breakeven_colocated_side_prompt_over_output": plan.breakeven_below,
        "recommend_disaggregation": plan.recommend, "disaggregated_over_colocated": plan.margin,
        "disaggregated_meets_slo": plan.disaggregated_meets, "decided_by": list(plan.decided),
        "colocated_requests_per_second": plan.colocated_requests_per_second,
        "disaggregated_requests_per_second": plan.disaggregated_requests_per_second,
        "disaggregated_capacity_requests_per_second": plan.disaggregated_capacity,
        "fluid_requests_per_second": plan.fluid_requests_per_second, "split_efficiency": plan.split_efficiency,
        "fluid_over_colocated": plan.fluid_margin,
        f"ttft_seconds_disaggregated_p{fq}": plan.ttft_disaggregated_at,
        f"prefill_wait_seconds_p{fq}": plan.prefill_wait_at,
        "prefill_tp": plan.prefill_tp, "decode_tp": plan.decode_tp,
        "prefill_seconds_disaggregated": plan.prefill_disaggregated,
        "prefill_prompts_per_pass": plan.prefill_batch,
        "prefill_seconds_per_prompt_packed": plan.prefill_packed,
        "colocated_requests_per_rate": plan.colocated_rate_requests,
        **plan.role_degrees,
        "role_layouts": plan.role_layouts, "disaggregated_limited_by": plan.disaggregated.limited_by,
        "reasons": list(plan.reasons), "first_screen_notes": list(plan.first_screen),
        "by_ratio": [{"prompt_over_output": r.prompt_over_output, "prompt_tokens": r.prompt,
                      "colocated_tokens_per_second": r.colocated,
                      "disaggregated_tokens_per_second": r.disaggregated,
                      "disaggregation_wins": r.disaggregation_wins, "fits": r.fits, "split": r.split,
                      "colocated_layout": r.colocated_layout}
                     for r in plan.ratios],
    }
    assumptions = (
        "Identical requests saturate every instance. Colocated: the simulator serves a closed loop of the batch's "
        "users (the engine schedules the prefill chunks among the decode steps) and the batch is judged on the TTFT "
        "and TPOT at the targets' percentile (in the ratio table too). "
        "Disaggregated: each role's layout (TP, EP inside the TP group, or for a MoE model attention DP with EP over "
        "its ranks) and the split searched over the GPUs (colocated too, among the role layouts); decode in closed "
        "form (a steady batch of equal requests); TTFT from a simulated FCFS prefill queue (Poisson arrivals, "
        "each attention-DP rank a server taking the prompts waiting, up to its token budget, in one pass) "
        "plus the exposed KV transfer and the handover. EP never spans instances.",
        ("Colocated prefills run in chunks of max_num_batched_tokens inside decode steps (--no-chunked: whole)."
         if o.chunked and s.engine_adapter.mixes_prefill_chunks() else
         "Colocated prefills run as passes of their own between decode steps (no mixed chunks): the prompts waiting "
         "at a step share one pass up to the token budget (B / D of them a pass when saturated; kvplan's SGLang "
         "simulator prices a round's prompts as one pass too), a longer prompt alone in chunks of it (--no-chunked: "
         "whole)."),
        "The KV moves over each GPU's NIC in parallel, overlapped with the prefill layer by layer; every receiving "
        "TP rank gets its own shard (an MLA latent goes to every rank).",
        "Prefill and decode instances run on the same GPU type, each role at the scenario's PP; a prefill rank "
        "packs the prompts waiting when it starts a pass, up to its token budget.",
        "The KV transfer runs at the NIC rate times the preset's link efficiency.",
    ) + spec_notes(s)
    brief = (("colocated requests/s", plan.colocated_requests_per_second),
             ("disaggregated requests/s", plan.disaggregated_requests_per_second))
    return Result("pd", s.headline() + f"; TPOT SLO {o.tpot_slo * 1e3:g} ms at p{tq}", data,
                  (colocated, disaggregated, sweep), tuple(notes), assumptions, (), brief,
                  lead=(verdict, *plan.decided, *plan.first_screen))
