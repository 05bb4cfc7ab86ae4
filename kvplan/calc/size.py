"""``kvplan size``: bytes per token, by layer kind, at a set of contexts, and the peak of one request.

``plan_size(scenario)`` returns a ``SizePlan`` of typed values, each with its derivation; presentation lives in
``kvplan.present.size``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.calc import kv
from kvplan.errors import KvplanError
from kvplan.scenario import Scenario
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.layers import MLA
from kvplan.specs.model import ModelSpec
from kvplan.specs.parallel import Parallelism
from kvplan.specs.values import Bytes, Count, Note, Ratio, TokenBytes, Tokens, derived, note

DEFAULT_CONTEXTS = kv.DEFAULT_CONTEXTS

DTYPE_SOURCE = ("KV dtype rules: vllm-project/vllm vllm/v1/kv_cache_interface.py @001cabc1; SGLang "
                "get_cell_size_per_token (sgl-project/sglang @001ccef0)")


@dataclass(frozen=True)
class GroupBytes:
    """One layer group's cache bytes: per layer, per token for the whole group, per TP rank, and fixed state."""

    name: str
    kind: str
    label: str
    holds: str
    grows_with_context: bool
    layers: Count
    per_layer: Bytes           # one layer, one copy
    per_token_model: Bytes     # all the group's layers
    per_layer_per_gpu: Bytes   # one layer on one TP rank
    state_per_layer: Bytes
    state_group: Bytes


@dataclass(frozen=True)
class ContextBytes:
    """The KV of one request at one context, whole model and per GPU."""

    context: Tokens
    whole_model: Bytes
    per_gpu: Bytes
    over_limit: bool


@dataclass(frozen=True)
class Comparison:
    """The model beside another (by default the workload document's GQA example): per token, request, GPU."""

    other_id: str
    other_layout: str
    own_layout: str
    tokens: Tokens
    requests: Count
    tp_shown: Count
    other_per_token: Bytes
    own_per_token: Bytes
    other_per_request: Bytes
    own_per_request: Bytes
    other_for_requests: Bytes
    own_for_requests: Bytes
    other_per_token_per_gpu: Bytes
    own_per_token_per_gpu: Bytes
    other_gpu_refused: str          # why the other model has no per-GPU figure ("" when it has one)
    why: Note
    ratio: Ratio                    # the other model's bytes per token / this model's


@dataclass(frozen=True)
class SizePlan:
    """`kvplan size`'s plan: bytes per token by layer group, and the totals per token and per request."""

    scenario: Scenario
    model: ModelSpec                 # as sized (MTP layers included when asked for)
    groups: tuple[GroupBytes, ...]
    kv_bytes_per_token: Bytes
    kv_bytes_per_token_per_gpu: Bytes
    state_bytes_per_request: Bytes
    state_bytes_per_request_per_gpu: Bytes
    peak_kv_bytes_per_request: Bytes
    peak_kv_bytes_per_request_per_gpu: Bytes
    contexts: tuple[ContextBytes, ...]
    comparison: Comparison | None
    comparison_refused: str          # why a requested comparison could not be made ("" otherwise)
    stage_text: str


def _stage_text(per_gpu: kv.PerGpu, par: Parallelism) -> str:
    if par.pp == 1:
        return ""
    return f", pipeline stage {per_gpu.stage_index} (layers {per_gpu.stage.start}-{per_gpu.stage.stop - 1})"


def layout(model: ModelSpec) -> str:
    return "; ".join(f"{g.count} x {g.kind.label}" if len(model.groups) > 1 else g.kind.label for g in model.groups)


def group_bytes(model: ModelSpec, dtype: KVDtype, tp: int) -> tuple[GroupBytes, ...]:
    out = []
    sources = tuple(model.sources) + (DTYPE_SOURCE,)
    for g in model.groups:
        symbolic, substituted = g.kind.formula(dtype, 1)
        per_layer = g.kind.cache_bytes_per_token(dtype, 1)
        per_rank = g.kind.cache_bytes_per_token(dtype, tp)
        sym_tp, sub_tp = g.kind.formula(dtype, tp)
        state = g.kind.state_bytes(1)
        out.append(GroupBytes(
            g.name, g.kind.kind, g.kind.label, g.kind.holds(), g.kind.grows_with_context,
            Count(g.count, derived("layers that carry this kind", f"{g.count}", *model.sources)),
            TokenBytes(per_layer, derived(symbolic, substituted, *sources)),
            TokenBytes(per_layer * g.count, derived("layers x bytes per token per layer",
                                               f"{g.count} x {per_layer:,} = {per_layer * g.count:,} B", *sources)),
            TokenBytes(per_rank, derived(sym_tp + f" (one TP rank of {tp})", sub_tp, *sources)),
            Bytes(state, derived(symbolic, substituted, *sources) if state else derived("no fixed state", "0")),
            Bytes(state * g.count, derived("layers x state per layer",
                                           f"{g.count} x {state:,} = {state * g.count:,} B")),
        ))
    return tuple(out)


def plan_size(scenario: Scenario, contexts: tuple[int, ...] = DEFAULT_CONTEXTS, compare: ModelSpec | None = None,
              requests_for_comparison: int = 10) -> SizePlan:
    """Bytes per token by layer kind, per request at each of ``contexts`` and per GPU for ``scenario``; with
    ``compare``, the same for another model side by side."""
    model = scenario.sized_model
    dtype, par = scenario.kv_dtype, scenario.parallelism
    sources = tuple(model.sources) + (DTYPE_SOURCE,)
    context = scenario.context_tokens
    groups = group_bytes(model, dtype, par.tp)

    per_token = kv.kv_bytes_per_token(model, dtype)
    growing = [g for g in model.groups if g.kind.grows_with_context]
    terms = " + ".join(f"{g.count} x {g.kind.cache_bytes_per_token(dtype):,}" for g in growing) or "0"
    per_token_v = TokenBytes(per_token, derived(
        "sum over groups that grow with context: layers x bytes per token per layer (sliding-window and state "
        "layers add nothing past the window)", f"{terms} = {per_token:,} B", *sources))
    pt_gpu = kv.kv_bytes_per_token_per_gpu(model, dtype, par)
    terms_gpu = " + ".join(f"{kv.layers_in(g, pt_gpu.stage)} x {g.kind.cache_bytes_per_token(dtype, par.tp):,}"
                           for g in growing) or "0"
    per_token_gpu_v = TokenBytes(pt_gpu.value, derived(
        "the same sum with each kind's per-rank bytes at TP, over the layers of the most loaded pipeline stage",
        f"{terms_gpu} = {pt_gpu.value:,} B" + _stage_text(pt_gpu, par), *sources))

    state = kv.state_bytes_per_request(model)
    state_terms = " + ".join(f"{g.count} x {g.kind.state_bytes():,}" for g in model.groups if g.kind.state_bytes())
    state_v = Bytes(state, derived("sum over state layers: layers x fixed state per layer",
                                   f"{state_terms or '0'} = {state:,} B", *sources))
    st_gpu = kv.state_bytes_per_gpu(model, par)
    state_gpu_v = Bytes(st_gpu.value, derived("the same on the most loaded GPU (per-rank state, largest stage)",
                                              f"{st_gpu.value:,} B" + _stage_text(st_gpu, par), *sources))

    peak = kv.kv_bytes_at_context(model, dtype, context)
    held = " + ".join(f"{g.count} x {g.kind.cache_bytes_per_token(dtype):,} x {g.kind.tokens_held(context):,}"
                      for g in model.groups if g.kind.cache_bytes_per_token(dtype))
    peak_v = Bytes(peak, derived("sum over groups: layers x bytes per token x tokens held at the context (+ state)",
                                 f"{held or '0'}{' + ' + format(state, ',') if state else ''} = {peak:,} B at "
                                 f"{context:,} tokens", *sources))
    pk_gpu = kv.kv_bytes_at_context_per_gpu(model, dtype, context, par)
    peak_gpu_v = Bytes(pk_gpu.value, derived("the same on the most loaded GPU (per-rank bytes, largest stage)",
                                             f"{pk_gpu.value:,} B at {context:,} tokens" + _stage_text(pk_gpu, par),
                                             *sources))

    rows = []
    for c in sorted(set(contexts) | {context}):
        whole = kv.kv_bytes_at_context(model, dtype, c)
        gpu = kv.kv_bytes_at_context_per_gpu(model, dtype, c, par).value
        rows.append(ContextBytes(
            Tokens(c, derived("a context of the sweep (--contexts) or the request's own", f"{c:,}")),
            Bytes(whole, derived("sum over groups: layers x bytes per token x min(context, cap) + state",
                                 f"{whole:,} B at {c:,} tokens", *sources)),
            Bytes(gpu, derived("the same with per-rank bytes on the most loaded GPU", f"{gpu:,} B", *sources)),
            scenario.over_limit(c)))

    comparison, refused = None, ""
    if compare is not None:
        try:
            comparison = _comparison(scenario, model, compare, per_token, requests_for_comparison)
        except KvplanError as err:  # e.g. a dtype the other model cannot store: show this model alone
            refused = f"no comparison with {compare.id}: {err.message}"
    return SizePlan(scenario, model, groups, per_token_v, per_token_gpu_v, state_v, state_gpu_v, peak_v, peak_gpu_v,
                    tuple(rows), comparison, refused, _stage_text(pk_gpu, par))


def _comparison(scenario: Scenario, model: ModelSpec, other: ModelSpec, own_per_token: int, n: int) -> Comparison:
    """Side by side with another model at the same dtype (the default: the document's GQA worked example);
    per GPU at the scenario's TP, or TP=8 when the scenario has none."""
    dtype = scenario.kv_dtype
    tokens = scenario.decode_tokens
    tp_shown = scenario.parallelism.tp if scenario.parallelism.tp > 1 else 8
    par = Parallelism(tp=tp_shown)
    other_per_token = kv.kv_bytes_per_token(other, dtype)
    own_gpu = kv.kv_bytes_per_token_per_gpu(model, dtype, par).value
    refused = ""
    try:
        other.check_tp(tp_shown)
        other_gpu: int | None = kv.kv_bytes_per_token_per_gpu(other, dtype, par).value
    except KvplanError as err:  # the other model may refuse this TP; its per-GPU figure is then n/a, with why
        other_gpu, refused = None, err.message
    own_req = kv.kv_bytes_at_context(model, dtype, tokens)
    other_req = kv.kv_bytes_at_context(other, dtype, tokens)
    srcs = tuple(other.sources) + (DTYPE_SOURCE,)
    ratio = other_per_token / own_per_token if own_per_token else float("inf")
    t = Tokens(tokens, derived("the request's decode tokens", f"{tokens:,}"))

    def b(value, formula, numbers, s=srcs, kind=Bytes):
        return kind(value, derived(formula, numbers, *s))

    other_gpu_v = b(other_gpu, f"per-rank bytes per token at TP={tp_shown}",
                    f"{other_gpu:,} B" if other_gpu is not None else f"n/a: {refused}", kind=TokenBytes)
    own_gpu_v = b(own_gpu, f"per-rank bytes per token at TP={tp_shown}", f"{own_gpu:,} B", tuple(model.sources),
                  kind=TokenBytes)
    ratio_v = Ratio(ratio, derived(f"{other.id} bytes per token / {model.id} bytes per token",
                                   f"{other_per_token:,} / {own_per_token:,}"))
    ids = {"other": other.id, "model": model.id}   # text values: a brace in an id stays literal
    if model.uses(MLA) and not other.uses(MLA):
        why = (note("Why they differ: {other} caches K and V ({other_layout}) in every layer; {model} caches one "
                    "{model_layout} latent per layer, {ratio:.2f}x fewer bytes per token. But the latent is whole on "
                    f"every TP rank, so at TP={tp_shown} each GPU holds {{own}}/token", ratio=ratio_v, own=own_gpu_v,
                    other_layout=layout(other), model_layout=layout(model), **ids)
               + (note(" against {other}/token for the sharded GQA example", other=other_gpu_v)
                  if other_gpu is not None else "")
               + ": TP adds no KV room per request for MLA (attention data-parallelism does).")
    else:
        why = (note("{other} takes {ratio:.2f}x the bytes per token of {model}; " f"at TP={tp_shown} per GPU: "
                    "{model} {own}, {other} ", ratio=ratio_v, own=own_gpu_v, **ids)
               + (note("{other}.", other=other_gpu_v) if other_gpu is not None else f"n/a ({refused})."))

    return Comparison(
        other.id, layout(other), layout(model), t,
        Count(n, derived("requests the workload document counts", f"{n}")),
        Count(tp_shown, derived("the scenario's TP, or 8 when it is 1", f"{tp_shown}")),
        b(other_per_token, "sum over layers of bytes per token", f"{other_per_token:,} B", kind=TokenBytes),
        b(own_per_token, "sum over layers of bytes per token", f"{own_per_token:,} B", tuple(model.sources),
          kind=TokenBytes),
        b(other_req, "bytes at the decode length", f"{other_req:,} B at {tokens:,} tokens"),
        b(own_req, "bytes at the decode length", f"{own_req:,} B at {tokens:,} tokens", tuple(model.sources)),
        b(other_req * n, "requests x bytes per request", f"{n} x {other_req:,} = {other_req * n:,} B"),
        b(own_req * n, "requests x bytes per request", f"{n} x {own_req:,} = {own_req * n:,} B", tuple(model.sources)),
        other_gpu_v, own_gpu_v, refused, why, ratio_v)
