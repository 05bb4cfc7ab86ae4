"""``kvplan compare-preemption``'s own options -> ``PreemptionRequest``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.inputs.options import (
    optional,
    parse_float,
    parse_fraction,
    parse_list,
)
from kvplan.options.command import _size, _tokens

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.costs import CostSettings


@dataclass(frozen=True)
class PreemptionRequest:
    settings: CostSettings
    prefix_hit_tokens: int
    sweep: tuple[int, ...]
    dram_bytes_per_node: int | None


def preemption_request(*, dram: Any = None, prefix_hit: Any = "0", mfu: Any = None, compute_dtype: str = "auto",
                       layout: str = "contiguous", copy_overhead_us: Any = None, bidir_factor: Any = None,
                       sync_swap: bool = False, sweep: Any = None) -> PreemptionRequest:
    """``kvplan compare-preemption``'s options: the cost settings, the prefix hit, the sweep of generated tokens and
    the host DRAM (``plan_preemption``'s keywords)."""
    from kvplan.calc.costs import CostSettings
    from kvplan.calc.preemption import DEFAULT_SWEEP
    from kvplan.inputs.units import parse_tokens

    given = {
        "mfu": optional(parse_fraction, mfu, "mfu"),
        "copy_overhead_us": optional(parse_float, copy_overhead_us, "--copy-overhead-us", "2.3"),
        "bidir_factor": optional(parse_fraction, bidir_factor, "bidir-factor"),
    }
    settings = CostSettings(compute_dtype=compute_dtype.strip().lower(),
                            layout=layout.strip().lower().replace("_", "-"),
                            sync_swap=sync_swap, **{k: v for k, v in given.items() if v is not None})
    return PreemptionRequest(settings, parse_tokens(prefix_hit, "--prefix-hit", allow_zero=True),
                             optional(parse_list, sweep, _tokens("--sweep"), "sweep") or DEFAULT_SWEEP,
                             optional(_size, dram, "--dram"))


# --- pd --------------------------------------------------------------------------------------------------------
