"""``kvplan tpot`` presentation."""

from __future__ import annotations

from kvplan.calc.tpot import COMPONENTS, TpotPlan
from kvplan.present.common import scenario_data, spec_notes
from kvplan.render.result import Chart, Result, Table
from kvplan.specs.values import Count, Note, Tokens, Value, default, note

FACTORS = ("hbm", "mfu", "prefill_mfu", "link", "link_latency_us", "allreduce_latency_us", "allreduce_link",
           "overhead_us_per_layer",
           "overhead_us_per_step", "overhead_us_per_moe_layer", "overhead_us_per_request", "upcast_hbm",
           "gemm_floor_us", "upcast_moe_us")
LABELS = {"weights": "weights (HBM)", "moe": "MoE experts (HBM)", "kv": "KV reads (HBM)",
          "attention_compute": "attention compute", "comm": "communication", "overhead": "fixed overhead"}


def present(plan: TpotPlan, calibration=None) -> Result:
    s, o = plan.scenario, plan.options
    par = s.parallelism
    f = plan.factors
    notes = list(plan.notes)
    phases = (("start", plan.start), ("middle", plan.mid), ("end", plan.end))
    prompt_v = Tokens(s.prompt_tokens)
    summary = Table(note("TPOT over a {decode}-token decode from a {prompt}-token prompt, batch "
                         f"{plan.batch.value} ({o.shape})", decode=Tokens(s.decode_tokens), prompt=prompt_v),
                    ("figure", "value"), (
        ("TPOT at the start", plan.start.tpot), ("TPOT in the middle", plan.mid.tpot),
        ("TPOT at the end", plan.end.tpot),
        ("TPOT, mean over the decode", plan.tpot_mean), ("whole decode", plan.decode_seconds),
        ("tokens/s per user", plan.tokens_per_second_per_user),
        ("tokens/s per replica", plan.tokens_per_second_per_replica),
        (f"tokens/s per GPU ({par.tp * par.pp} GPUs per replica)", plan.tokens_per_second_per_gpu),
        ("KV-bound from context (tokens)", plan.kv_bound_from_context_tokens
         if plan.kv_bound_from_context_tokens.value else "never (weight-bound)"),
        (note("TTFT for the {prompt}-token prompt", prompt=prompt_v), plan.ttft),
        ("most requests of this length per replica", plan.max_batch),
    ))
    breakdown = Table("Where a step's time goes", ("component",) + tuple(name for name, _ in phases), tuple(
        (LABELS[c],) + tuple(ph.breakdown[c] for _, ph in phases) for c in COMPONENTS)
        + (("bound",) + tuple(ph.bound for _, ph in phases),))
    grid = Table(f"TPOT by batch and context (B requests all at context S; up to {plan.max_batch.value} per replica)",
                 ("batch",) + tuple(note("{c}", c=Tokens(c)) for c in plan.table_contexts),
                 tuple((b,) + row for b, row in zip(plan.table_batches, plan.table, strict=True)), primary=True)
    # the factors the step was priced with (a factor that IS an engine term's value is named with the engine), and
    # the engine's terms as rows of their own table: the values the cost model used (costs.EngineTerm)
    used = plan.factors_used or f
    terms = plan.engine_terms
    replaced = {t.factor for t in terms if t.factor is not None and getattr(used, t.factor) is t.value}
    factors = Table("Efficiency factors", ("factor", "value", "from"), tuple(
        (f"{name} ({s.engine_adapter.id})" if name in replaced else name, getattr(used, name),
         getattr(used, name).why.formula) for name in FACTORS))
    tables = [summary, breakdown, grid, factors]
    if terms:
        tables.append(Table(f"The engine's terms ({s.engine_adapter.display_name})", ("term", "value", "how"), tuple(
            (t.label, t.value, t.value.why.formula if t.value.why else "") for t in terms)))
    data = {
        **scenario_data(s),
        "batch": plan.batch, "shape": o.shape, "max_batch_per_replica": plan.max_batch,
        "tpot_seconds_start": plan.start.tpot, "tpot_seconds_mid": plan.mid.tpot, "tpot_seconds_end": plan.end.tpot,
        "tpot_seconds_mean": plan.tpot_mean, "decode_seconds": plan.decode_seconds,
        "tokens_per_second_per_user": plan.tokens_per_second_per_user,
        "tokens_per_second_per_replica": plan.tokens_per_second_per_replica,
        "tokens_per_second_per_gpu": plan.tokens_per_second_per_gpu,
        "bound": {name: ph.bound for name, ph in (("start", plan.start), ("mid", plan.mid), ("end", plan.end))},
        "step_breakdown": {name: {f"{c}_seconds": ph.breakdown[c] for c in COMPONENTS}
                           for name, ph in (("start", plan.start), ("mid", plan.mid), ("end", plan.end))},
        "kv_bound_from_context_tokens": plan.kv_bound_from_context_tokens,
        "ttft_seconds": plan.ttft,
        "factors": {name: getattr(used, name) for name in FACTORS},
        "engine_terms": {t.key: t.value for t in terms},
        "table": [{"batch": Count(b, default("a batch of the table")), **{f"tpot_seconds_at_{c}": cell
                                  for c, cell in zip(plan.table_contexts, row, strict=True)}}
                  for b, row in zip(plan.table_batches, plan.table, strict=True)],
    }
    if plan.spec is not None:
        sp = plan.spec
        tables.insert(1, Table(f"Speculative decoding: {sp.spec_tokens.value} draft token(s) per step", ("figure",
                               "start", "end"), (
            ("accepted tokens per verify step", sp.accept_start, sp.accept_end),
            ("effective TPOT", sp.tpot_start, sp.tpot_end),
            ("plain TPOT (the same batch, started together)", sp.plain_start, sp.plain_end),
        )))
        data["speculative"] = {"spec_tokens": sp.spec_tokens, "accept_start": sp.accept_start,
                               "accept_end": sp.accept_end, "tpot_seconds_start": sp.tpot_start,
                               "tpot_seconds_end": sp.tpot_end, "tpot_seconds_mean": sp.tpot_mean,
                               "gain_mean": sp.gain_mean, "draft_kv_bytes_per_request": sp.draft_kv_bytes_per_request,
                               "pays": sp.pays, "accept_profile": [{"context_tokens": c, "accept": a}
                                                                   for c, a in sp.accept_profile]}
        if not sp.pays:
            notes.append(note("Speculation no longer pays by the end of the decode: {accept:.2f} tokens accepted per "
                              "verify step do not cover the verify and draft cost.", accept=sp.accept_end))
        else:
            notes.append(note("Speculative decoding: mean effective TPOT {tpot:ms:.2f} ms, {gain:.2f}x faster than "
                              "plain decode.", tpot=sp.tpot_mean, gain=sp.gain_mean))
    if calibration is not None:
        tables.append(Table(f"Calibration against {calibration.source}", ("batch", "context", "measured", "predicted",
                                                                          "error"), calibration.rows))
        data["calibration"] = calibration.data
        notes.append(calibration.note)
    kv_from = plan.kv_bound_from_context_tokens
    notes.insert(0, f"At batch {plan.batch.value} the step is bound by {plan.start.bound} at the start and by "
                    f"{plan.end.bound} at the end"
                 + (note("; the KV reads overtake the weights from {kv_from} tokens.", kv_from=kv_from)
                    if kv_from.value else "."))
    assumptions: tuple[str | Note, ...] = (
        "One replica: a TP x PP group (with --ep, one DP rank and the EP group its experts span); PP stages run one "
        "after another for a token and are not overlapped.",
        "Per operator, time = max(bytes / (HBM x hbm), FLOPs / (peak x mfu)); GEMMs at the weights' dtype peak, "
        "attention at the bf16 peak; activations bf16 for communication.",
        "MoE: uniform top-k routing, E x (1 - (1 - k/E)^T) distinct experts read for T tokens.",
        "Speculative draft of MTP layers costs one decoder layer per draft token; a draft model its own step.",
    ) + spec_notes(s)
    if plan.spec is not None and o.accept is not None:   # the acceptance against context: flat, or the user's
        from kvplan.calc.tpot import accept_assumption

        assumptions += (accept_assumption(o.accept, o.accept_source),)
    brief: tuple[tuple[str, Value | str], ...] = (
        ("TPOT mean", plan.tpot_mean), ("TPOT at the end", plan.end.tpot),
        ("tokens/s per GPU", plan.tokens_per_second_per_gpu), ("TTFT", plan.ttft), ("bound at the end", plan.end.bound))
    if plan.spec is not None:   # the figure speculative decoding was asked for: the TPOT a user sees
        brief = (("effective TPOT mean (speculative)", plan.spec.tpot_mean),
                 ("effective TPOT at the end (speculative)", plan.spec.tpot_end)) + brief
    return Result("tpot", s.headline() + f"; batch {plan.batch.value} ({o.shape})", data, tuple(tables),
                  tuple(notes), assumptions, (), brief)


def chart(plan: TpotPlan) -> Chart:
    """TPOT against context, one series per batch (for --plot)."""
    return Chart("TPOT by context", "context tokens", tuple(f"{c:,}" for c in plan.table_contexts),
                 tuple((f"batch {b}", tuple(float(cell.value) * 1e3 if cell.value is not None else float("nan")
                                            for cell in row))
                       for b, row in zip(plan.table_batches, plan.table, strict=True)), "TPOT, ms", legend="batch")
