"""Pieces every presenter uses: the scenario's inputs as typed data, and its assumptions."""

from __future__ import annotations

from kvplan.scenario import DEFAULT_DECODE_TOKENS, DEFAULT_PROMPT_TOKENS, Scenario
from kvplan.specs.values import Count, Tokens, default, given


def _input(value, flag: str, was_given: bool, why: str):
    return given(flag) if was_given else default(why)


def _given(s: Scenario, name: str, default_: int) -> bool:
    """Whether the prompt or decode is the user's (one given at the default's value reads as the default)."""
    return getattr(s, f"{name}_given") and getattr(s, f"{name}_tokens") != default_


def _default_length(s: Scenario, name: str, default_: int) -> str:
    fitted = not getattr(s, f"{name}_given") and getattr(s, f"{name}_tokens") != default_
    return f"{default_:,} tokens" + (f", shortened to fit the limit of {s.context_limit:,}" if fitted else "")


def scenario_data(s: Scenario) -> dict:
    """The deployment and request as JSON data: each number an input or a default, never unexplained."""
    par = s.parallelism
    return {
        "model": s.model.id,
        "hardware": s.hardware.id,
        "kv_dtype": s.kv_dtype.value,
        "kv_dtype_auto": s.kv_dtype_auto,
        "engine": s.engine,
        "engine_release": s.engine_adapter.release,
        "parallelism": {
            "tp": Count(par.tp, _input(par.tp, "--tp", not s.tp_defaulted, "every GPU of one node (or the largest "
                                       "power of two the model allows)")),
            "pp": Count(par.pp, _input(par.pp, "--pp", s.pp != 1, "1")),
            "dp": Count(par.dp, _input(par.dp, "--dp", s.dp is not None, "the replicas that fill the GPUs")),
            "ep": Count(par.ep, given("--ep")) if par.ep else None,
            "gpus": Count(par.gpus, default("TP x PP x DP")),
            "dp_filled": s.dp_filled,
        },
        "nodes": Count(s.nodes, _input(s.nodes, "--nodes", s.nodes != 1, "1")),
        "prompt_tokens": Tokens(s.prompt_tokens, _input(None, "--prompt", _given(s, "prompt", DEFAULT_PROMPT_TOKENS),
                                                        _default_length(s, "prompt", DEFAULT_PROMPT_TOKENS))),
        "decode_tokens": Tokens(s.decode_tokens, _input(None, "--decode", _given(s, "decode", DEFAULT_DECODE_TOKENS),
                                                        _default_length(s, "decode", DEFAULT_DECODE_TOKENS))),
        "context_tokens": Tokens(s.context_tokens, default("prompt + decode")),
        "context_limit_tokens": Tokens(s.context_limit, given("--max-model-len") if s.max_model_len else
                                       default("the model's max_position_embeddings")),
    }


def spec_notes(s: Scenario, *extra_specs) -> tuple[str, ...]:
    """What the model's and hardware's presets assumed or could not verify."""
    specs = (s.model, s.hardware) + tuple(x for x in extra_specs if x is not None)
    return tuple(f"{spec.id}: {note}" for spec in specs for note in spec.notes)
