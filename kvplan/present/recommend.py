"""``kvplan recommend`` presentation: the configuration table, its figures, and the launch command."""

from __future__ import annotations

from kvplan.calc.recommend import RecommendPlan, load_draws, load_outcome, load_seed
from kvplan.present.common import scenario_data
from kvplan.render.result import Result, Table, Verbatim
from kvplan.specs.values import Count, Fraction, Note, Number, Seconds, Tokens, default, given, note


def _sizing_table(sizing, typed: list[dict], ttft: str | Note = "", loaded: bool = False) -> Table:
    """The ranked layouts; ``typed``: their ``Candidate.figures()`` (the same cells the JSON carries); ``ttft``: the
    TTFT target the search also held (a request alone within it, or with a rate target (``loaded``) the best layout
    under that rate), "" for none."""
    rows = []
    for c, d in zip(sizing.ranked, typed, strict=True):
        rows.append((c.hardware, d["gpus"], c.layout, c.kv_dtype, d["concurrency"], d["batch"], d["tpot_seconds"],
                     d["requests_per_second"], d["usd_per_hour"]))
    return Table("Layouts meeting " + ", ".join(t.text for t in sizing.targets) + (
        (" and " + ttft + (" (a request alone; the best under the rate)" if loaded else " for a request alone"))
        if ttft else "") + " (each GPU type's best first, "
                 "fewest GPUs first)",
                 ("GPU", "GPUs", "layout", "KV dtype", "concurrency", "batch meeting TPOT", "TPOT", "requests/s",
                  "USD/hour"),
                 tuple(rows))


LOAD_BASIS = ("simulated (the SLO model): the launched deployment, every DP replica at most --max-num-seqs running, "
              "fed the --target rate as Poisson arrivals of equal requests and judged as a kvplan simulate "
              "--sweep-rate point: the queue keeps up, TTFT and TPOT at their percentiles, the attainment; on up "
              "to 3 Poisson draws (seeds 0, 1, 2; up to 3 runs): it meets only if every draw meets, the draws stop "
              "at the first miss; the figures shown are that miss, or when all meet the draw nearest its target")
ALONE_BASIS = ("closed form: a request alone (its prefill + the engine's frontend latency); no rate was given, so the "
               "TTFT under load is not judged (--target rate>=R judges the launch at that rate)")


def _load_table(plan: RecommendPlan) -> Table:
    """The launch under the rate target: each SLO figure of the simulated run beside its target, how it was obtained,
    and whether it is met; the closed form's rate beside the simulated queue."""
    ld, slo = plan.load, plan.options.slo
    assert ld is not None and slo is not None
    m = ld.figures
    sim = note("simulated: {n} Poisson requests over {dp} replica(s), at most {b} running each; seed {seed} of "
               "{k} draw(s)", n=ld.requests, dp=Count(plan.scenario.parallelism.dp), b=ld.max_batch,
               seed=Count(ld.seed), k=Count(len(ld.draws) or 1))
    rows: list[tuple] = []
    for name, q, bound in (("TTFT", slo.ttft_percentile, slo.ttft), ("TPOT", slo.tpot_percentile, slo.tpot)):
        got = m[f"{name.lower()}_seconds_p{q}"]
        rows.append((f"{name} p{q}", got, note("<= {b:ms:g} ms", b=Seconds(bound)) if bound is not None else "-",
                     sim, "-" if bound is None else "yes" if got.value is not None and got.value <= bound else "NO"))
    att = m["slo_attainment"]
    rows.append(("SLO attainment", att, note(">= {a:.0%}", a=Fraction(slo.attainment)), sim,
                 "yes" if att.value is not None and att.value >= slo.attainment else "NO"))
    over = ld.verdict.decided_by == "overload"
    rows.append(("queue keeps up", "no: it grows" if over else "yes", "no growing queue", sim, "NO" if over else "yes"))
    rows.append(("requests/s the batch serves", plan.rate_closed_form, note(">= {r:g}", r=ld.rate),
                 "closed form: Little's law at the batch", "yes" if plan.rate_closed_form.number() >= ld.rate.number()
                 else "NO"))
    return Table(note("The launch under its target rate: {rate:g} requests/s", rate=ld.rate),
                 ("figure", "this launch", "target", "obtained by", "met"), tuple(rows))


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
        tables.insert(0, _sizing_table(sizing, ranked, plan.ttft.target if plan.ttft is not None else "",
                                       plan.load is not None))
        if sizing.near_misses:
            tables.insert(1, Table("Near misses (fewer GPUs than the best, or a GPU type with no layout that meets "
                                   "the targets)", ("GPU", "GPUs", "layout", "KV dtype",
                                                                             "misses"),
                                   tuple((c.hardware, c.figures()["gpus"], c.layout,
                                          c.kv_dtype, "; ".join(c.failed)) for c in sizing.near_misses)))
        b = sizing.best
        wanted = ", ".join(t.text for t in sizing.targets) + (
            "" if plan.ttft is None else " and --ttft-slo under that rate" if plan.load is not None
            else " and --ttft-slo for a request alone")
        notes.insert(0, f"Sizing: {len(sizing.ranked)} shown of the layouts meeting {wanted}; {sizing.considered} "
                        f"layouts tried, {sizing.skipped} refused by the model or GPU (heads not divisible, weights "
                        f"do not fit). The table below plans the best: {b.hardware} x {b.gpus}, {b.layout}, "
                        f"{b.kv_dtype} KV.")
        if plan.targets:
            tables.insert(1, Table("Targets, judged on the recommended deployment at its batch (TPOT simulated at "
                                   f"p{slo.tpot_percentile}" + ("; the rate, and TPOT and TTFT again, simulated under "
                                                                "it" if plan.load is not None else "") + ")",
                                   ("target", "this deployment", "met"),
                                   tuple((v.target, v.figure, "yes" if v.met else "NO") for v in
                                         plan.targets + ((plan.ttft,) if plan.ttft is not None else ()))))
            notes += [f"Target {v.target} is not met at the recommended batch: " + v.figure + "."
                      for v in plan.targets if not v.met]
            data["targets"] = [{"target": v.target, "met": v.met, "figure": v.figure} for v in plan.targets]
        data["sizing"] = {"targets": [t.text for t in sizing.targets], "layouts_tried": Count(
            sizing.considered, default("GPU presets x GPU counts x layouts x KV dtypes")),
            "candidates": ranked,
            "near_misses": [c.figures() for c in sizing.near_misses]}
    ld = plan.load
    if ld is not None:    # a rate target: the launch fed that rate, simulated (kvplan.calc.simulate.simulated_load)
        tables.insert(2 if sizing is not None and plan.targets else 0, _load_table(plan))
        m = ld.figures
        kt, kp = f"ttft_seconds_p{slo.ttft_percentile}", f"tpot_seconds_p{slo.tpot_percentile}"
        data["load"] = {
            "basis": LOAD_BASIS, "rate_requests_per_second": ld.rate, "requests": ld.requests,
            "max_num_seqs_per_replica": ld.max_batch, kt: m[kt], kp: m[kp], "slo_attainment": m["slo_attainment"],
            "overloaded": ld.verdict.decided_by == "overload", "meets": ld.verdict.meets,
            "decided_by": ld.verdict.decided_by, "requests_per_second_closed_form": plan.rate_closed_form,
            "seed": load_seed(ld.seed),
            "draws": [{"seed": load_seed(r.seed), "meets": r.verdict.meets, "decided_by": r.verdict.decided_by,
                       kt: r.figures[kt], kp: r.figures[kp], "slo_attainment": r.figures["slo_attainment"]}
                      for r in (ld.draws or (ld,))]}
        notes.append(note("Under {rate:g} requests/s the launch was ", rate=ld.rate) + load_draws(ld, slo) + ".")
        if not ld.verdict.meets:
            notes.insert(0, note("Under {rate:g} requests/s the launch misses: ", rate=ld.rate)
                         + load_outcome(ld, slo) + ".")
    t = plan.ttft
    if t is not None:     # --ttft-slo: under the rate target when one is given, else a request alone's (said)
        data["ttft_seconds_unloaded"] = plan.ttft_unloaded
        data["ttft_target"] = {"target": t.target, "met": t.met, "figure": t.figure,
                               "basis": LOAD_BASIS if ld is not None else ALONE_BASIS}
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
    if t is not None and ld is not None:
        kt = f"ttft_seconds_p{slo.ttft_percentile}"
        brief += (("TTFT target", t.target + note((": met" if t.met else ": NOT met") + f": TTFT p{slo.ttft_percentile}"
                                                  " {got:ms:,.1f} ms under {rate:g} requests/s (simulated)",
                                                  got=ld.figures[kt], rate=ld.rate)),)
    elif t is not None:
        brief += (("TTFT target", t.target + note(": met by a request alone ({ttft:ms:,.1f} ms; no rate given, so "
                                                  "not judged under load)" if t.met else
                                                  ": NOT met: a request alone waits {ttft:ms:,.1f} ms",
                                                  ttft=plan.ttft_unloaded)),)
    if ld is not None:
        brief += (("under load", note("{rate:g} requests/s: ", rate=ld.rate) + (
            note("meets the SLO on each of {k} Poisson draws (simulated)", k=Count(len(ld.draws) or 1))
            if ld.verdict.meets else "misses: " + load_outcome(ld, slo) + note(" (simulated, seed {seed})",
                                                                               seed=Count(ld.seed)))),)
    verbatim = (Verbatim(f"Launch command ({launch.engine}), to paste", launch.text()),) if launch else ()
    return Result("recommend", s.headline(), data, tuple(tables), tuple(notes), brief=brief, verbatim=verbatim,
                  assumptions=(f"{agree} of {len(plan.rows)} rows agree with the workload document's general advice; "
                               "each row's figures come from kvplan's capacity and cost models (kvplan concurrency, "
                               "tpot, compare-preemption, pd).",))
