"""Pure KV arithmetic over a model: whole-model and per-GPU bytes, per token and at a context.

No layer kind is special-cased here: each group's kind answers for its own bytes, and these
functions only sum over groups (and over the layers of one pipeline stage).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.model import LayerGroup, ModelSpec
from kvplan.specs.parallel import Parallelism, pipeline_stages

# The contexts a table of KV per request shows unless --contexts says otherwise (size, concurrency).
DEFAULT_CONTEXTS = (1024, 8192, 32768, 65536, 131072)


def layers_in(group: LayerGroup, stage: range | None) -> int:
    """How many of the group's layers lie in a pipeline stage (all of them for None)."""
    if stage is None:
        return group.count
    return sum(1 for i in group.layers if stage.start <= i < stage.stop)


def kv_bytes_per_token(model: ModelSpec, dtype: KVDtype, tp: int = 1, stage: range | None = None) -> int:
    """Bytes each further token adds once past every sliding window (one TP rank when tp > 1)."""
    return sum(g.kind.marginal_bytes_per_token(dtype, tp) * layers_in(g, stage) for g in model.groups)


def state_bytes_per_request(model: ModelSpec, tp: int = 1, stage: range | None = None) -> int:
    return sum(g.kind.state_bytes(tp) * layers_in(g, stage) for g in model.groups)


def kv_bytes_at_context(model: ModelSpec, dtype: KVDtype, context: int, tp: int = 1,
                        stage: range | None = None) -> int:
    """Bytes one request at ``context`` tokens holds: every layer's cached tokens plus fixed state."""
    return sum(g.kind.bytes_at_context(dtype, context, tp) * layers_in(g, stage) for g in model.groups)


def check_parallelism(model: ModelSpec, par: Parallelism) -> None:
    model.check_tp(par.tp)
    if par.pp > model.num_layers:
        raise KvplanError(f"pp={par.pp} is more pipeline stages than the {model.num_layers} layers of {model.id}",
                          f"choose pp <= {model.num_layers}")


@dataclass(frozen=True)
class PerGpu:
    """The most loaded GPU's share of one request: which stage, and its bytes."""

    stage_index: int
    stage: range
    value: int


def most_loaded(model: ModelSpec, par: Parallelism, measure) -> PerGpu:
    """Apply ``measure(stage)`` to every pipeline stage and keep the largest."""
    stages = pipeline_stages(model.num_layers, par.pp)
    values = [measure(stage) for stage in stages]
    best = max(range(len(stages)), key=lambda i: values[i])
    return PerGpu(best, stages[best], values[best])


def kv_bytes_per_token_per_gpu(model: ModelSpec, dtype: KVDtype, par: Parallelism) -> PerGpu:
    return most_loaded(model, par, lambda st: kv_bytes_per_token(model, dtype, par.tp, st))


def kv_bytes_at_context_per_gpu(model: ModelSpec, dtype: KVDtype, context: int, par: Parallelism) -> PerGpu:
    return most_loaded(model, par, lambda st: kv_bytes_at_context(model, dtype, context, par.tp, st))


def state_bytes_per_gpu(model: ModelSpec, par: Parallelism) -> PerGpu:
    return most_loaded(model, par, lambda st: state_bytes_per_request(model, par.tp, st))


def contexts_sweep(model: ModelSpec, dtype: KVDtype, contexts: Iterable[int], par: Parallelism
                   ) -> list[tuple[int, int, int]]:
    """(context, whole-model bytes, most-loaded-GPU bytes) for each context."""
    return [(c, kv_bytes_at_context(model, dtype, c), kv_bytes_at_context_per_gpu(model, dtype, c, par).value)
            for c in contexts]


def request_bytes_per_gpu(model: ModelSpec, dtype: KVDtype, par: Parallelism, context: int, block: int,
                          token_budget: int | None = None, shared_prefix: int = 0) -> int:
    """Bytes one request at ``context`` holds on the most loaded GPU, with each layer's tokens rounded up to
    whole blocks; each kind's ``tokens_cap`` bounds what it keeps, ``token_budget`` caps the growing kinds, and
    the first ``shared_prefix // block`` whole blocks of a shared prefix are not the request's own.

    Exact Python integers (no int64 wrap-around at absurd dimensions)."""
    shared = (shared_prefix // block) * block
    worst = 0
    for stage in pipeline_stages(model.num_layers, par.pp):
        total = 0
        for g in model.groups:
            n = layers_in(g, stage)
            if not n:
                continue
            per_token = g.kind.cache_bytes_per_token(dtype, par.tp)
            if per_token:
                held = g.kind.tokens_held(context)
                if g.kind.grows_with_context:
                    if token_budget is not None:
                        held = min(held, token_budget)
                    held = max(held - shared, 0)
                total += -(-held // block) * block * per_token * n
            total += g.kind.state_bytes(par.tp) * n
        worst = max(worst, total)
    return worst
