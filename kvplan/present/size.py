"""``kvplan size`` presentation."""

from __future__ import annotations

from kvplan.calc.size import SizePlan
from kvplan.present.common import scenario_data, spec_notes
from kvplan.render.result import Result, Table
from kvplan.specs.values import Count, Note, Tokens, default, given, note

SEED_COMPARE = "deepseek-r1-seed-gqa"


def present(plan: SizePlan) -> Result:
    s, model = plan.scenario, plan.model
    dtype, par = s.kv_dtype, s.parallelism
    notes: list[str | Note] = []
    assumptions = [
        "Engine-neutral accounting: a sliding-window layer holds min(context, window) tokens; no block rounding "
        "(engines round up to whole blocks and, in vLLM, hold window - 1 + max_num_batched_tokens for sliding layers).",
        "Per GPU = the most loaded GPU: TP splits KV heads (replicated when tp > kv_heads; MLA latents and "
        "indexer keys are whole on every rank); PP takes the largest stage; DP splits requests, not bytes.",
        "Weight quantization is not KV quantization: the KV dtype is what --kv-dtype says (auto: the model's "
        "activation dtype, as the engines do).",
    ]
    base = s.model
    if base.mtp_layers and not s.mtp_layers:
        assumptions.append(f"{base.mtp_layers} MTP draft layer(s) of {base.id} not counted "
                           f"(--mtp-layers {base.mtp_layers} adds them; engines allocate them in the same pool when "
                           "MTP is on).")
    assumptions.extend(spec_notes(s))
    dtype_note = model.effective_kv_dtype_note(dtype)
    if dtype_note:
        notes.append(dtype_note)
    limit = s.context_limit
    if any(r.over_limit for r in plan.contexts):
        notes.append(note("Rows marked '> max context' are longer than the {limit} tokens the engine serves.",
                          limit=Tokens(limit)))

    tables = [
        Table(f"{model.name}: KV per token by layer kind ({dtype.value} KV)",
              ("group", "layer kind", "layers", "holds", "B/token/layer", "B/token (model)",
               f"B/token/layer per GPU (TP={par.tp})", "state/request"),
              tuple((g.name, g.label, g.layers, g.holds, g.per_layer if g.per_layer.value else None,
                     g.per_token_model if g.per_layer.value else None,
                     g.per_layer_per_gpu if g.per_layer.value else None,
                     g.state_group if g.state_group.value else None) for g in plan.groups)),
        Table(f"KV per request at each context (TP={par.tp}, PP={par.pp})",
              ("context tokens", "whole model", "per GPU", "note"),
              tuple((r.context, r.whole_model, r.per_gpu,
                     "this request" if r.context.value == s.context_tokens else
                     ("> max context" if r.over_limit else "")) for r in plan.contexts), primary=True),
        Table("Summary", ("figure", "whole model", "per GPU"), (
            ("KV bytes per token (past every window)", plan.kv_bytes_per_token, plan.kv_bytes_per_token_per_gpu),
            ("fixed state per request", plan.state_bytes_per_request, plan.state_bytes_per_request_per_gpu),
            (note("peak per request ({prompt} prompt + {decode} decode)", prompt=Tokens(s.prompt_tokens),
                  decode=Tokens(s.decode_tokens)),
             plan.peak_kv_bytes_per_request, plan.peak_kv_bytes_per_request_per_gpu),
        )),
    ]
    data = {
        **scenario_data(s),
        "mtp_layers": Count(s.mtp_layers, given("--mtp-layers") if s.mtp_layers else default("0: no MTP layers")),
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "kv_bytes_per_token_per_gpu": plan.kv_bytes_per_token_per_gpu,
        "state_bytes_per_request": plan.state_bytes_per_request,
        "state_bytes_per_request_per_gpu": plan.state_bytes_per_request_per_gpu,
        "peak_kv_bytes_per_request": plan.peak_kv_bytes_per_request,
        "peak_kv_bytes_per_request_per_gpu": plan.peak_kv_bytes_per_request_per_gpu,
        "by_group": [
            {"group": g.name, "kind": g.kind, "label": g.label, "layers": g.layers,
             "grows_with_context": g.grows_with_context, "kv_bytes_per_token_per_layer": g.per_layer,
             "kv_bytes_per_token_per_layer_per_gpu": g.per_layer_per_gpu, "state_bytes_per_layer": g.state_per_layer}
            for g in plan.groups],
        "contexts": [{"context_tokens": r.context, "kv_bytes": r.whole_model, "kv_bytes_per_gpu": r.per_gpu,
                      "over_context_limit": r.over_limit} for r in plan.contexts],
    }
    c = plan.comparison
    if plan.comparison_refused:
        notes.append(plan.comparison_refused)
    if c is not None:
        seed = c.other_id == SEED_COMPARE
        title = (note(f"Workload document's arithmetic vs the real architecture ({dtype.value} KV, {{tokens}} decode "
                      "tokens)", tokens=c.tokens) if seed else
                 note("{other} beside {model} " f"({dtype.value} KV, {{tokens}} decode tokens)", tokens=c.tokens,
                      other=c.other_id, model=model.id))
        gpu_col = f"per token per GPU at TP={c.tp_shown.value}"
        other_gpu = c.other_per_token_per_gpu if c.other_per_token_per_gpu.value is not None else "n/a"
        tables.append(Table(title, ("model", "cache per layer", "per token", note("{tokens} tokens", tokens=c.tokens),
                                    f"{c.requests.value} requests", gpu_col), (
            (c.other_id, c.other_layout, c.other_per_token, c.other_per_request, c.other_for_requests, other_gpu),
            (model.id, c.own_layout, c.own_per_token, c.own_per_request, c.own_for_requests,
             c.own_per_token_per_gpu))))
        if seed and dtype.value != "fp8":
            notes.append("The workload document counts its worked example in FP8 (125 KB per token, 3.75 GB per "
                         "30K-token request); --kv-dtype fp8 reproduces its figures.")
        if c.other_gpu_refused:
            notes.append(f"{c.other_id} per GPU at TP={c.tp_shown.value}: n/a because {c.other_gpu_refused}.")
        notes.append(c.why)
        data["comparison"] = {
            "model": c.other_id, "kv_bytes_per_token": c.other_per_token, "tokens": c.tokens,
            "kv_bytes_per_request": c.other_per_request, "requests": c.requests,
            "kv_bytes_for_requests": c.other_for_requests, "tp_shown": c.tp_shown,
            "kv_bytes_per_token_per_gpu": c.other_per_token_per_gpu,
            "this_model_kv_bytes_per_token_per_gpu": c.own_per_token_per_gpu, "why": c.why}
    brief = (("KV bytes per token", plan.kv_bytes_per_token),
             ("KV bytes per token per GPU", plan.kv_bytes_per_token_per_gpu),
             (note("peak KV per request at {ctx} tokens", ctx=Tokens(s.context_tokens)),
              plan.peak_kv_bytes_per_request),
             ("peak KV per request per GPU", plan.peak_kv_bytes_per_request_per_gpu))
    return Result("size", s.headline(), data, tuple(tables), tuple(notes), tuple(assumptions), brief=brief)
