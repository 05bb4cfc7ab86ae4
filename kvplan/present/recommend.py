"""``kvplan recommend`` presentation: the configuration table, its figures, and the launch command."""

from __future__ import annotations

from kvplan.calc.recommend import RecommendPlan
from kvplan.present.common import scenario_data
from kvplan.render.result import Result, Table, Verbatim
from kvplan.specs.values import Count, Note, Number, Tokens, default, given, note


def _sizing_table(sizing, typed: list[dict], ttft: str | Note = "") -> Table:
    """The ranked layouts; ``typed``: their ``Candidate.figures()`` (the same cells the JSON carries); ``ttft``: the
    TTFT target the search also held (a request alone within it), "" for none."""
    rows = []
    for c, d in zip(sizing.ranked, typed, strict=True):
        rows.append((c.hardware, d["gpus"], c.layout, c.kv_dtype, d["concurrency"], d["batch"], d["tpot_seconds"],
                     d["requests_per_second"], d["usd_per_hour"]))
    return Table("Layouts meeting " + ", ".join(t.text for t in sizing.targets) + (
        " and a request alone within " + ttft if ttft else "") + " (each GPU type's best first, "
                 "fewest GPUs first)",
                 ("GPU", "GPUs", "layout", "KV dtype", "concurrency", "batch meeting TPOT", "TPOT", "requests/s",
                  "USD/hour"),
                 tuple(rows))


def present(plan: RecommendPlan, launch=None, sizing=None, extra_notes: tuple[str, ...] = ()) -> Result:
    s, o = plan.scenario, plan.options
    slo = o.slo
    assert slo is not None      # RecommendOptions fills it in
    rows = tuple((r.setting, r.value, r.reason, r.document, "yes" if r.agrees else "no") for r in plan.rows)
    title = note("Recommended configuration for {prompt} + {decode}-token requests", prompt=Tokens(s.prompt_tokens),
                 decode=Tokens(s.decode_tokens))
    # one wide table for markdown (a design document) and CSV; in a terminal the same figures as two narrower ones
    table = Table(title, ("setting", "recommended", "why (kvplan's numbers)", "the workload document", "agrees"), rows,
                  primary=True, formats=("markdown", "csv"))
    short = Table(title, ("setting", "recommended", "the workload document", "agrees"),
                  tuple((r[0], r[1], r[3], r[4]) for r in rows), formats=("table",))
    why = Table("Why, in kvplan's numbers", ("setting", "why"), tuple((r[0], r[2]) for r in rows), formats=("table",))
    notes = [r.setting + ": differs from the document: " + r.why_differs + "." for r in plan.rows
             if not r.agrees and r.why_differs]
    notes += [n for r in plan.rows for n in r.notes]
    notes += [n[0].upper() + n[1:] + "." for n in extra_notes]
    tables = [table, short, why]
    data = {
        **scenario_data(s),
        **({"context_limit_tokens": Tokens(s.context_limit, default(
            "prompt + decode: the --max-model-len / --context-length the launch command prints, which the plan is "
            "priced with"))} if plan.context_limit_launched else {}),
        "tpot_slo_seconds": Number(o.tpot_slo, given(o.slo_origin) if o.slo_origin else default("50 ms")),
        "tpot_slo_basis": (f"simulated (the SLO model): TPOT at p{slo.tpot_percentile} of a closed loop of batch "
                           "users of equal requests on one replica, the engine scheduling their prefills among the "
                           "decode steps, with the attainment target; the closed form's mean is where the search "
                           "starts"),
        **slo.values(),
        "recommendations": [{"key": r.key, "setting": r.setting, "value": r.value, "reason": r.reason,
                             "document": r.document, "agrees_with_document": r.agrees,
                             "why_differs": r.why_differs} for r in plan.rows],
        "kv_dtype_recommended": plan.kv_dtype.value,
        "requests_by_kv_dtype": {d.dtype.value: d.requests_per_replica for d in plan.dtype_options},
        "kv_pool_bytes_per_gpu": plan.kv_pool_bytes,
        "batch": plan.batch, "batch_capacity": plan.batch_capacity, "batch_tpot_slo": plan.batch_slo,
        "batch_engine_limit": plan.batch_engine_limit,
        "next_request_overflow_step": plan.next_request_overflow_step, "tpot_seconds_at_batch": plan.tpot_at_batch,
        "tpot_seconds_mean_at_batch": plan.tpot_mean_at_batch, "batch_closed_form": plan.batch_closed_form,
        "admitted_on_prompt_cost": plan.admitted_on_prompt_cost, "admitted_overflow_step": plan.admitted_overflow_step,
        "kv_offload": plan.offload, "offload_bytes_per_gpu": plan.offload_bytes_per_gpu,
        "offload_bytes_per_replica": plan.offload_bytes_per_replica,
        "host_dram_bytes_per_gpu": plan.host_dram_bytes_per_gpu, "offload_threshold": plan.offload_threshold,
        "preemption_mode": plan.preemption_mode, "swap_seconds": plan.swap_seconds,
        "recompute_seconds": plan.recompute_seconds, "recompute_over_swap": plan.recompute_over_swap,
        "recompute_seconds_young": plan.recompute_young_seconds, "crossover_tokens": plan.crossover,
        "victim": plan.victim, "recommend_disaggregation": plan.disaggregate, "pd_reasons": list(plan.pd_reasons),
        "prefix_cache": plan.prefix_cache, "prefill_seconds": plan.prefill_seconds,
        "prefill_share": plan.prefill_share,
    }
    if sizing is not None:
        ranked = [c.figures() for c in sizing.ranked]
        tables.insert(0, _sizing_table(sizing, ranked, plan.ttft.target if plan.ttft is not None else ""))
        if sizing.near_misses:
            tables.insert(1, Table("Near misses (fewer GPUs than the best, or a GPU type with no layout that meets "
                                   "the targets)", ("GPU", "GPUs", "layout", "KV dtype",
                                                                             "misses"),
                                   tuple((c.hardware, c.figures()["gpus"], c.layout,
                                          c.kv_dtype, "; ".join(c.failed)) for c in sizing.near_misses)))
        b = sizing.best
        wanted = ", ".join(t.text for t in sizing.targets) + (
            " and --ttft-slo for a request alone" if plan.ttft is not None else "")
        notes.insert(0, f"Sizing: {len(sizing.ranked)} shown of the layouts meeting {wanted}; {sizing.considered} "
                        f"layouts tried, {sizing.skipped} refused by the model or GPU (heads not divisible, weights "
                        f"do not fit). The table below plans the best: {b.hardware} x {b.gpus}, {b.layout}, "
                        f"{b.kv_dtype} KV.")
        if plan.targets:
            tables.insert(1, Table("Targets, judged on the recommended deployment at its batch (TPOT simulated at "
                                   f"p{slo.tpot_percentile})", ("target", "this deployment", "met"),
                                   tuple((v.target, v.figure, "yes" if v.met else "NO") for v in
                                         plan.targets + ((plan.ttft,) if plan.ttft is not None else ()))))
            notes += [f"Target {v.target} is not met at the recommended batch: " + v.figure + "."
                      for v in plan.targets if not v.met]
            data["targets"] = [{"target": v.target, "met": v.met, "figure": v.figure} for v in plan.targets]
        data["sizing"] = {"targets": [t.text for t in sizing.targets], "layouts_tried": Count(
            sizing.considered, default("GPU presets x GPU counts x layouts x KV dtypes")),
            "candidates": ranked,
            "near_misses": [c.figures() for c in sizing.near_misses]}
    t = plan.ttft
    if t is not None:     # --ttft-slo, judged on a request alone (the PD row judges it under load)
        data["ttft_seconds_unloaded"] = plan.ttft_unloaded
        data["ttft_target"] = {"target": t.target, "met": t.met, "figure": t.figure}
        if t.met:
            notes.append("TTFT target " + t.target + ": " + t.figure + ".")
        else:
            notes.insert(0, "TTFT target " + t.target + " is NOT met: " + t.figure + ".")
    if launch is not None:
        flag_rows = tuple((f.text(), f.reason) for f in launch.flags)
        tables.append(Table(f"Launch command ({launch.engine})", ("flag", "why"),
                            ((launch.program, "the engine and model"),) + flag_rows))
        data["launch"] = {"engine": launch.engine, "command": launch.text(),
                          "flags": [{"flag": f.flag, "value": f.value, "reason": f.reason} for f in launch.flags],
                          "omitted": [{"flag": f, "why": why} for f, why in launch.omitted],
                          "notes": list(launch.notes)}
        notes += [f"Not printed: {f}: {why}." for f, why in launch.omitted]
        notes += [n[0].upper() + n[1:] + "." for n in launch.notes]
    agree = sum(r.agrees for r in plan.rows)
    brief: tuple[tuple[str, object], ...] = (
        ("KV dtype", plan.kv_dtype.value), ("batch", plan.batch), ("KV offload", plan.row("kv_offload").value),
        ("preemption", plan.preemption_mode), ("PD", plan.pd_verdict or plan.row("pd").value))
    if t is not None:
        brief += (("TTFT target", t.target + note(": met by a request alone ({ttft:ms:,.1f} ms); under load see PD"
                                                  if t.met else ": NOT met: a request alone waits {ttft:ms:,.1f} ms",
                                                  ttft=plan.ttft_unloaded)),)
    verbatim = (Verbatim(f"Launch command ({launch.engine}), to paste", launch.text()),) if launch else ()
    return Result("recommend", s.headline(), data, tuple(tables), tuple(notes), brief=brief, verbatim=verbatim,
                  assumptions=(f"{agree} of {len(plan.rows)} rows agree with the workload document's general advice; "
                               "each row's figures come from kvplan's capacity and cost models (kvplan concurrency, "
                               "tpot, compare-preemption, pd).",))
