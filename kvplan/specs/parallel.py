"""Parallelism: how a model's KV cache splits over GPUs.

kvplan's meaning of each degree (documented in the README):

* ``tp``: tensor parallelism of attention inside one replica. KV heads split over tp ranks
  (GQA: max(1, kv_heads // tp) heads per rank); an MLA latent is whole on every rank.
* ``pp``: pipeline stages; layers split over stages as vLLM's ``get_pp_indices`` does (even split, the
  remainder going to the stages just before the last). The most loaded stage sets the per-GPU figure.
* ``dp``: data-parallel attention ranks (this covers plain replicas and "attention DP" for MLA
  models): each serves its own requests, so dp multiplies the pool, not the bytes of one request.
* ``ep``: expert parallelism of MoE weights; it moves weights, never KV.

GPUs used = tp x pp x dp.
"""

from dataclasses import dataclass
from typing import Annotated

from kvplan.specs.layers import SPEC_CONFIG, Range, check_fields

MAX_DEGREE = 4096

Degree = Annotated[int, Range(ge=1, le=MAX_DEGREE)]


@dataclass(frozen=True, kw_only=True)
class Parallelism:
    """Degrees of tensor, pipeline, data and expert parallelism (module docstring)."""

    __pydantic_config__ = SPEC_CONFIG

    tp: Degree = 1
    pp: Degree = 1
    dp: Degree = 1
    ep: Degree | None = None

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def describe(self) -> str:
        parts = [f"TP={self.tp}", f"PP={self.pp}", f"DP={self.dp}"]
        if self.ep:
            parts.append(f"EP={self.ep}")
        return " ".join(parts) + f" ({self.gpus} GPU{'s' if self.gpus != 1 else ''})"


def pipeline_stages(num_layers: int, pp: int) -> list[range]:
    """Layer index ranges per pipeline stage: ``num_layers // pp`` each, and the remainder added one
    layer at a time to the stages before the last (vLLM ``get_pp_indices``)."""
    base = num_layers // pp
    sizes = [base] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i % pp] += 1
    stages, start = [], 0
    for size in sizes:
        stages.append(range(start, start + size))
        start += size
    return stages
