"""``kvplan size``: bytes per token, by layer kind, at a set of contexts, and the peak of one request."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.calc import kv
from kvplan.dtypes import KVDtype
from kvplan.errors import KvplanError
from kvplan.model import ModelSpec
from kvplan.parallel import Parallelism
from kvplan.result import Derivation, Result, Table
from kvplan.units import format_bytes

DEFAULT_CONTEXTS = (1024, 8192, 32768, 65536, 131072)

DTYPE_SOURCE = ("KV dtype rules: vLLM vllm/v1/kv_cache_interface.py @001cabc1 and SGLang get_cell_size_per_token, "
                "as summarised in shared/reference/engine-kv-accounting.md")


@dataclass(frozen=True)
class SizeRequest:
    model: ModelSpec
    kv_dtype: KVDtype
    parallelism: Parallelism = Parallelism()
    prompt_tokens: int = 1000
    decode_tokens: int = 30000
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    include_mtp: bool = False
    compare: ModelSpec | None = None
    requests_for_comparison: int = 10
    units: str = "iec"


def _stage_text(per_gpu: kv.PerGpu, par: Parallelism) -> str:
    if par.pp == 1:
        return ""
    return f", pipeline stage {per_gpu.stage_index} (layers {per_gpu.stage.start}-{per_gpu.stage.stop - 1})"


def _group_rows(model: ModelSpec, dtype: KVDtype, par: Parallelism, fmt) -> list[tuple]:
    rows = []
    for g in model.groups:
        per_layer = g.kind.cache_bytes_per_token(dtype, 1)
        per_layer_rank = g.kind.cache_bytes_per_token(dtype, par.tp)
        holds = g.kind.holds()
        state = g.kind.state_bytes(1)
        rows.append((
            g.name, g.kind.label, g.count, holds,
            per_layer if per_layer else "-",
            per_layer * g.count if per_layer else "-",
            per_layer_rank if per_layer else "-",
            fmt(state * g.count) if state else "-",
        ))
    return rows


def _layout(model: ModelSpec) -> str:
    return "; ".join(f"{g.count} x {g.kind.label}" if len(model.groups) > 1 else g.kind.label for g in model.groups)


def _comparison(req: SizeRequest, model: ModelSpec, own_per_token: int) -> tuple[dict, Table, str]:
    """Side by side with another model at the same dtype (the default: the document's GQA example).
    ``model`` is the planned model as sized (MTP layers included when asked for)."""
    other = req.compare
    assert other is not None
    dtype = req.kv_dtype
    tokens = req.decode_tokens
    n = req.requests_for_comparison
    other_per_token = kv.kv_bytes_per_token(other, dtype)
    tp_shown = req.parallelism.tp if req.parallelism.tp > 1 else 8
    per_gpu_par = Parallelism(tp=tp_shown)
    own_gpu = kv.kv_bytes_per_token_per_gpu(model, dtype, per_gpu_par).value
    try:
        other.check_tp(tp_shown)
        other_gpu: int | None = kv.kv_bytes_per_token_per_gpu(other, dtype, per_gpu_par).value
    except KvplanError:  # the other model may refuse this TP; the comparison then omits it
        other_gpu = None
    own_request = kv.kv_bytes_at_context(model, dtype, tokens)
    other_request = kv.kv_bytes_at_context(other, dtype, tokens)

    def row(spec: ModelSpec, per_token: int, request: int, per_gpu: int | None) -> tuple:
        return (spec.id, _layout(spec), f"{per_token:,} B", f"{request / 1e9:,.2f} GB",
                f"{request * n / 1e9:,.1f} GB", f"{per_gpu:,} B" if per_gpu is not None else "n/a")

    table = Table(
        title=f"Workload document's arithmetic vs the real architecture ({dtype.value} KV, {tokens:,} decode tokens"
              ", GB = 10^9 B as the document counts)",
        columns=("model", "cache per layer", "per token", f"{tokens:,} tokens", f"{n} requests",
                 f"per token per GPU at TP={tp_shown}"),
        rows=(row(other, other_per_token, other_request, other_gpu),
              row(model, own_per_token, own_request, own_gpu)),
    )
    ratio = other_per_token / own_per_token if own_per_token else float("inf")
    own_mla = model.uses_kind("mla")
    other_mla = other.uses_kind("mla")
    if own_mla and not other_mla:
        why = (f"Why they differ: {other.id} caches K and V ({_layout(other)}) in every layer; "
               f"{model.id} caches one {_layout(model)} latent per layer, {ratio:.2f}x fewer "
               f"bytes per token. But the latent is whole on every TP rank, so at TP={tp_shown} each GPU holds "
               f"{own_gpu:,} B/token"
               + (f" against {other_gpu:,} B/token for the sharded GQA example" if other_gpu is not None else "")
               + ": TP adds no KV room per request for MLA (attention data-parallelism does).")
    else:
        why = (f"{other.id} takes {ratio:.2f}x the bytes per token of {model.id}; at TP={tp_shown} per GPU: "
               f"{own_gpu:,} B vs " + (f"{other_gpu:,} B." if other_gpu is not None else "n/a."))
    data = {
        "model": other.id,
        "kv_bytes_per_token": other_per_token,
        "tokens": tokens,
        "kv_bytes_per_request": other_request,
        "requests": n,
        "kv_bytes_for_requests": other_request * n,
        "tp_shown": tp_shown,
        "kv_bytes_per_token_per_gpu": other_gpu,
        "this_model_kv_bytes_per_token_per_gpu": own_gpu,
        "why": why,
    }
    return data, table, why


def size(req: SizeRequest) -> Result:
    base_model = req.model
    model = base_model.with_mtp_layers() if req.include_mtp else base_model
    dtype, par = req.kv_dtype, req.parallelism
    kv.check_parallelism(model, par)
    fmt = lambda b: format_bytes(b, req.units)  # noqa: E731

    context = req.prompt_tokens + req.decode_tokens
    if context == 0:
        raise KvplanError("--prompt and --decode are both 0", "give the request at least one token")
    per_token = kv.kv_bytes_per_token(model, dtype)
    per_token_gpu = kv.kv_bytes_per_token_per_gpu(model, dtype, par)
    state = kv.state_bytes_per_request(model)
    state_gpu = kv.state_bytes_per_gpu(model, par)
    peak = kv.kv_bytes_at_context(model, dtype, context)
    peak_gpu = kv.kv_bytes_at_context_per_gpu(model, dtype, context, par)
    contexts = sorted(set(req.contexts) | {context})
    sweep = kv.contexts_sweep(model, dtype, contexts, par)

    notes: list[str] = []
    assumptions = [
        "Engine-neutral accounting: a sliding-window layer holds min(context, window) tokens; no block rounding "
        "(engines round up to whole blocks and, in vLLM, hold window - 1 + max_num_batched_tokens for sliding layers).",
        "Per GPU = the most loaded GPU: TP splits KV heads (replicated when tp > kv_heads; MLA latents and "
        "indexer keys are whole on every rank); PP takes the largest stage; DP splits requests, not bytes.",
        "Weight quantization is not KV quantization: the KV dtype is what --kv-dtype says.",
    ]
    if base_model.mtp_layers and not req.include_mtp:
        assumptions.append(f"{base_model.mtp_layers} MTP draft layer(s) of {base_model.id} not counted "
                           "(--include-mtp adds them; engines allocate them in the same pool when MTP is on).")
    # What the preset or the config import assumed or could not verify (e.g. transformers defaults applied).
    assumptions.extend(f"{base_model.id}: {note}" for note in base_model.notes)
    dtype_note = model.effective_kv_dtype_note(dtype)
    if dtype_note:
        notes.append(dtype_note)
    max_pos = model.max_position_embeddings
    if max_pos and context > max_pos:
        notes.append(f"the request's {context:,} tokens exceed {model.id}'s max_position_embeddings {max_pos:,}.")

    breakdown_cols = ("group", "layer kind", "layers", "holds", "B/token/layer", "B/token (model)",
                      f"per GPU, TP={par.tp}", "state/request")
    tables = [
        Table(f"{model.name}: KV per token by layer kind ({dtype.value} KV)", breakdown_cols,
              tuple(_group_rows(model, dtype, par, fmt))),
        Table(f"KV per request at each context ({par.describe()})",
              ("context tokens", "whole model", "per GPU", "note"),
              tuple((c, fmt(whole), fmt(gpu),
                     "this request" if c == context else ("> max context" if max_pos and c > max_pos else ""))
                    for c, whole, gpu in sweep), primary=True),
        Table("Summary", ("figure", "whole model", "per GPU"), (
            ("KV bytes per token (past every window)", f"{per_token:,} B", f"{per_token_gpu.value:,} B"),
            ("fixed state per request", fmt(state), fmt(state_gpu.value)),
            (f"peak per request ({req.prompt_tokens:,} prompt + {req.decode_tokens:,} decode)",
             fmt(peak), fmt(peak_gpu.value)),
        )),
    ]

    data = {
        "model": model.id,
        "kv_dtype": dtype.value,
        "parallelism": {"tp": par.tp, "pp": par.pp, "dp": par.dp, "ep": par.ep, "gpus": par.gpus},
        "prompt_tokens": req.prompt_tokens,
        "decode_tokens": req.decode_tokens,
        "context_tokens": context,
        "include_mtp": req.include_mtp,
        "kv_bytes_per_token": per_token,
        "kv_bytes_per_token_per_gpu": per_token_gpu.value,
        "state_bytes_per_request": state,
        "state_bytes_per_request_per_gpu": state_gpu.value,
        "peak_kv_bytes_per_request": peak,
        "peak_kv_bytes_per_request_per_gpu": peak_gpu.value,
        "by_group": [
            {"group": g.name, "kind": g.kind.kind, "label": g.kind.label, "layers": g.count,
             "grows_with_context": g.kind.grows_with_context,
             "kv_bytes_per_token_per_layer": g.kind.cache_bytes_per_token(dtype, 1),
             "kv_bytes_per_token_per_layer_per_gpu": g.kind.cache_bytes_per_token(dtype, par.tp),
             "state_bytes_per_layer": g.kind.state_bytes(1)}
            for g in model.groups
        ],
        "contexts": [{"context_tokens": c, "kv_bytes": whole, "kv_bytes_per_gpu": gpu} for c, whole, gpu in sweep],
    }

    if req.compare is not None:
        try:
            cmp_data, cmp_table, why = _comparison(req, model, per_token)
        except KvplanError as err:  # e.g. a dtype the other model cannot store: show this model alone
            notes.append(f"no comparison with {req.compare.id}: {err.message}")
        else:
            data["comparison"] = cmp_data
            tables.append(cmp_table)
            notes.append(why)

    derivations = _derivations(model, dtype, par, context, per_token, per_token_gpu, state, peak, peak_gpu, fmt)
    return Result("size", data, tuple(tables), tuple(notes), tuple(assumptions), tuple(derivations))


def _derivations(model: ModelSpec, dtype: KVDtype, par: Parallelism, context: int, per_token: int,
                 per_token_gpu: kv.PerGpu, state: int, peak: int, peak_gpu: kv.PerGpu, fmt) -> list[Derivation]:
    sources = tuple(model.sources) + (DTYPE_SOURCE,)
    out = []
    for g in model.groups:
        symbolic, substituted = g.kind.formula(dtype, 1)
        out.append(Derivation(f"per layer, group {g.name!r} ({g.kind.kind})", substituted.split(" = ")[-1],
                              symbolic, substituted, sources))
        if par.tp > 1:
            symbolic_tp, substituted_tp = g.kind.formula(dtype, par.tp)
            out.append(Derivation(f"per layer per GPU at TP={par.tp}, group {g.name!r}",
                                  substituted_tp.split(" = ")[-1].split(" (")[0], symbolic_tp, substituted_tp,
                                  sources))
    growing = [g for g in model.groups if g.kind.grows_with_context]
    terms = " + ".join(f"{g.count} x {g.kind.cache_bytes_per_token(dtype):,}" for g in growing) or "0"
    out.append(Derivation("kv_bytes_per_token", f"{per_token:,} B",
                          "sum over groups that grow with context: layers x bytes per token per layer "
                          "(sliding-window and state layers add nothing past the window)",
                          f"{terms} = {per_token:,} B", sources))
    terms_gpu = " + ".join(
        f"{kv.layers_in(g, per_token_gpu.stage)} x {g.kind.cache_bytes_per_token(dtype, par.tp):,}"
        for g in growing) or "0"
    out.append(Derivation("kv_bytes_per_token_per_gpu", f"{per_token_gpu.value:,} B",
                          "same sum with each kind's per-rank bytes at TP, over the layers of the most loaded "
                          "pipeline stage",
                          f"{terms_gpu} = {per_token_gpu.value:,} B" + _stage_text(per_token_gpu, par), sources))
    if state:
        out.append(Derivation("state_bytes_per_request", fmt(state),
                              "sum over state layers: layers x fixed state per layer",
                              " + ".join(f"{g.count} x {g.kind.state_bytes():,}" for g in model.groups
                                         if g.kind.state_bytes()) + f" = {state:,} B", sources))
    held = " + ".join(f"{g.count} x {g.kind.cache_bytes_per_token(dtype):,} x {g.kind.tokens_held(context):,}"
                      for g in model.groups if g.kind.cache_bytes_per_token(dtype))
    out.append(Derivation("peak_kv_bytes_per_request", fmt(peak),
                          "sum over groups: layers x bytes per token x tokens held at context (+ state)",
                          f"{held}{' + ' + format(state, ',') if state else ''} = {peak:,} B"
                          f" at {context:,} tokens", sources))
    out.append(Derivation("peak_kv_bytes_per_request_per_gpu", fmt(peak_gpu.value),
                          "the same on the most loaded GPU (per-rank bytes, largest pipeline stage)",
                          f"{peak_gpu.value:,} B" + _stage_text(peak_gpu, par), sources))
    return out
