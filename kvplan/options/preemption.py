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
from kvplan.options.command import size_bytes, tokens_parser

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.costs import CostSettings
    from kvplan.scenario import Scenario

# the tokens generated before the preemption when --generated is not given (fitted into the model's limit)
DEFAULT_GENERATED_TOKENS = 20000


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
                             optional(parse_list, sweep, tokens_parser("--sweep"), "sweep") or DEFAULT_SWEEP,
                             optional(size_bytes, dram, "--dram"))


def preemption_scenario(scenario_args: dict[str, Any]) -> Scenario:
    """compare-preemption's scenario: the request's prompt and --generated (``scenario_args["decode"]``; None: not
    given, DEFAULT_GENERATED_TOKENS fitted into the model's limit like the scenario's default decode, the prompt
    kept and the first line saying so). A --generated the user gave that is too long is refused, naming it."""
    from kvplan.errors import ScenarioError
    from kvplan.inputs.request import DEFAULT_DECODE_TOKENS, _tokens
    from kvplan.options.scenarios import build_scenario

    args = {**scenario_args, "decode": None, "decode_flag": "--generated"}
    try:
        base = build_scenario(**args)   # generated not given: the scenario's default decode, fitted into the limit
    except ScenarioError:
        probe = build_scenario(**{**args, "decode": "0"})   # raises what is wrong besides the request's length
        raise ScenarioError(f"--prompt {probe.prompt_tokens:,} leaves no room for a generated token in "
                            f"{_where(probe)} of {probe.context_limit:,}", "shorten --prompt" + _raise(probe)) from None
    generated = scenario_args.get("decode")
    limit = base.context_limit
    if generated is None:
        if limit is None or base.prompt_tokens + DEFAULT_GENERATED_TOKENS + base.spec_tokens <= limit:
            return base.with_(decode=DEFAULT_GENERATED_TOKENS)
        # both defaults are too long: the fitted decode is the room the prompt leaves, the same for either
        said = (base.request_fitted or "").replace(f"the default decode of {DEFAULT_DECODE_TOKENS:,}",
                                                   f"the default generated of {DEFAULT_GENERATED_TOKENS:,}")
        object.__setattr__(base, "request_fitted", said)   # the scenario's own first-line words, for --generated
        return base
    tokens = _tokens("--generated", allow_zero=True)(generated)
    prompt = base.prompt_tokens if base.prompt_given else 0   # a default prompt is shortened to make room
    if limit is not None and prompt + tokens + base.spec_tokens > limit:
        raise ScenarioError(
            f"the request's {prompt + tokens + base.spec_tokens:,} tokens (" + ("prompt + " if prompt else "")
            + "generated" + (" + speculative slots" if base.spec_tokens else "")
            + f") exceed {_where(base)} of {limit:,}; "
            "the engine would reject it", ("shorten --prompt/--generated" if prompt else "shorten --generated")
            + _raise(base))
    return build_scenario(**{**args, "decode": generated})


def _where(s: Scenario) -> str:
    if s.max_model_len is not None:
        return "--max-model-len"
    return f"{s.model.id}'s maximum context (max_position_embeddings)"


def _raise(s: Scenario) -> str:
    return "" if s.max_model_len is not None else ", or raise the limit with --max-model-len (rope scaling)"


# --- pd --------------------------------------------------------------------------------------------------------
