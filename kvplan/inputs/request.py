"""User values -> a validated ``Scenario``: the one boundary every way in goes through.

The command line, plan files (``kvplan.inputs.plan_file``), start-up logs (``scenario_from_log``) and Python
(``kvplan.Scenario(model="qwq-32b", hardware="h100-sxm", gpus=2, decode="32k")``) all turn their values into a
scenario here, so they accept and refuse the same things with the same one-line messages:

* ``resolve`` reads each scenario field from what the user gave: a preset id, a path or a Hugging Face id for the
  model and GPU (``kvplan.inputs.presets``), a unit string ("30k", "80GiB", "50GB/s") or a number for the rest,
  each through its option's parser (``kvplan.inputs.options``, ``kvplan.inputs.units``), whose message names the
  option's flag. A value already typed (a ``ModelSpec``, an int in range) is taken as it is. ``Scenario`` calls it
  from ``__post_init__``, so typed and text values alike are checked by one table, ``FIELDS``.
* ``OPTION_FIELDS``: the option names (``prompt``, ``decode``, ``kv_dtype``, ``kv_pool``, ...) of the fields
  whose name differs; ``Scenario`` takes both spellings.
* ``build_scenario``: the scenario of the options as the command line and plan files give them (text).

Layer: below ``kvplan.scenario`` (which imports this module); ``build_scenario`` and ``scenario_from_log`` import the
scenario (and the log's KV dtype match from ``kvplan.calc.explain_log``) inside the function.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError, KvplanError
from kvplan.inputs.options import extra_dirs, parse_degree, parse_fraction, parse_link_gbs

if TYPE_CHECKING:  # pragma: no cover
    pass

# The workload document's scenario (the reasoning / long chain-of-thought workload kvplan is built for:
# DeepSeek-R1 on an 8-GPU H200 node, a 1K-token prompt and a 30K-token decode), planned when no option is given.
SEED_MODEL = "deepseek-r1"
SEED_HARDWARE = "h200"
DEFAULT_PROMPT_TOKENS = 1000
DEFAULT_DECODE_TOKENS = 30000
# the default request as the command line writes it (not given, --prompt and --decode plan it, fitted into the limit)
DEFAULT_REQUEST_TEXT = {"prompt": "1k", "decode": "30k"}
MAX_MTP_LAYERS = 64
MAX_SPEC_TOKENS = 1024

# The scenario options as the command line and plan files spell them, with their defaults as text (None: not
# given), in --help order. An option at its default was not given (a start-up log fills it). --prompt and --decode
# have none here: not given, the scenario plans its default request (1K + 30K) fitted into the model's limit.
SCENARIO_DEFAULTS: dict[str, str | None] = {
    "model": None, "hardware": SEED_HARDWARE, "nodes": "1", "gpus": None, "tp": None, "pp": "1", "dp": None,
    "ep": None, "kv_dtype": "auto", "weight_dtype": None, "weights": None, "engine": "neutral", "prompt": None,
    "decode": None, "mtp_layers": None, "max_model_len": None, "block_size": None, "host_link_gbs": None,
}
# the memory and pool options (each command takes some; None when not given)
MEMORY_OPTIONS = ("gpu_memory_utilization", "mem_fraction_static", "kv_pool", "max_num_batched_tokens",
                  "max_num_seqs", "activation_reserve", "runtime_reserve", "moe_a2a_backend", "chunked_prefill_size",
                  "max_prefill_tokens")
# what a command adds to the pool (concurrency, simulate)
POOL_OPTIONS = ("shared_prefix", "spec_tokens", "draft_model", "token_budget")
# option name -> Scenario field, where they differ
OPTION_FIELDS = {"kv_dtype": "kv_dtype_request", "weights": "weights_bytes", "prompt": "prompt_tokens",
                 "decode": "decode_tokens", "kv_pool": "kv_pool_bytes",
                 "activation_reserve": "activation_reserve_bytes",
                 "runtime_reserve": "runtime_reserve_bytes", "shared_prefix": "shared_prefix_tokens",
                 "draft_model": "draft"}


# --- one field -------------------------------------------------------------------------------------------------
def _tokens(flag: str, allow_zero: bool = False, most: int | None = None, why: str = "") -> Callable:
    from kvplan.inputs.units import MAX_TOKENS, parse_tokens

    low, high = (0 if allow_zero else 1), MAX_TOKENS

    def parse(value: Any) -> int:
        n = value if type(value) is int and low <= value <= high else parse_tokens(value, flag, allow_zero)
        if most is not None and n > most:
            raise InputError(f"{flag} {n:,} is absurd ({why})", "give the speculative tokens per step"
                             if flag == "--spec-tokens" else "give 0 to a few layers")
        return n

    return parse


def _chunk(value: Any) -> int:
    """SGLang's --chunked-prefill-size: a positive token count; SGLang's -1 (chunked prefill off) is refused, not
    modelled (every prefill is priced and scheduled in chunks)."""
    if isinstance(value, (int, str)) and str(value).strip() in ("-1", "0") or type(value) is int and value < 0:
        raise InputError(f"--chunked-prefill-size {value}: SGLang's chunked prefill off (-1, or 0) is not modelled by "
                         "kvplan", "give a chunk size in tokens, e.g. --chunked-prefill-size 8192")
    return _tokens("--chunked-prefill-size")(value)


def _degree(name: str) -> Callable:
    return lambda value: parse_degree(value, name)


def _fraction(name: str) -> Callable:
    def parse(value: Any) -> float:
        if type(value) is float and 0 < value <= 1:
            return value
        return parse_fraction(value, name)

    return parse


def _size(flag: str, low: int) -> Callable:
    """A size: text with its unit ("80GiB"), or from Python a whole number of bytes (``low`` or more)."""
    from kvplan.inputs.units import MAX_BYTES, parse_size

    def parse(value: Any) -> int:
        if type(value) is int:
            if not low <= value <= MAX_BYTES:
                raise InputError(f"{flag} {value:,} bytes is out of range",
                                 f"give {flag} as a size with its unit, e.g. 80GiB, or {low:,} to {MAX_BYTES:,} bytes")
            return value
        return parse_size(value if isinstance(value, str) else str(value), flag)

    return parse


def _link(value: Any) -> float:
    import math

    if type(value) in (int, float) and value > 0 and math.isfinite(value):
        return float(value)   # the scenario checks its range with the command line's message
    return parse_link_gbs(value)


def _text(flag: str, what: str) -> Callable:
    def parse(value: Any) -> str:
        if not isinstance(value, str):
            raise InputError(f"{flag} {value!r} is not {what}", f"give {flag} as text, e.g. {_EXAMPLES[flag]}")
        return value

    return parse


_EXAMPLES = {"--engine": "vllm", "--weight-dtype": "fp8", "--kv-dtype": "fp8", "--moe-a2a-backend": "deepep"}


def _kv_dtype(value: Any) -> Any:
    from kvplan.specs.dtypes import KVDtype

    return value if isinstance(value, KVDtype) else _text("--kv-dtype", "a KV dtype")(value)


# Scenario field -> its parser (the option's flag in every message), in the order the command line reads them
FIELDS: dict[str, Callable] = {
    "gpu_memory_utilization": _fraction("gpu-memory-utilization"),
    "mem_fraction_static": _fraction("mem-fraction-static"),
    "kv_pool_bytes": _size("--kv-pool", 1),
    "max_num_batched_tokens": _tokens("--max-num-batched-tokens"),
    "max_num_seqs": _tokens("--max-num-seqs"),
    "activation_reserve_bytes": _size("--activation-reserve", 0),
    "runtime_reserve_bytes": _size("--runtime-reserve", 0),
    "moe_a2a_backend": _text("--moe-a2a-backend", "an all-to-all backend"),   # its choices: the engine's
    "chunked_prefill_size": _chunk,
    "max_prefill_tokens": _tokens("--max-prefill-tokens"),
    "shared_prefix_tokens": _tokens("--shared-prefix", allow_zero=True),
    "spec_tokens": _tokens("--spec-tokens", allow_zero=True, most=MAX_SPEC_TOKENS, why="engines use 1-8"),
    "token_budget": _tokens("--token-budget"),
    "kv_dtype_request": _kv_dtype,
    "nodes": _degree("nodes"), "gpus": _degree("gpus"), "tp": _degree("tp"), "pp": _degree("pp"),
    "dp": _degree("dp"), "ep": _degree("ep"),
    "engine": _text("--engine", "an engine name"),
    "weight_dtype": _text("--weight-dtype", "a weight dtype"),
    "weights_bytes": _size("--weights", 1),
    "prompt_tokens": _tokens("--prompt", allow_zero=True),
    "decode_tokens": _tokens("--decode", allow_zero=True),
    "mtp_layers": _tokens("--mtp-layers", allow_zero=True, most=MAX_MTP_LAYERS, why="DeepSeek ships 1"),
    "max_model_len": _tokens("--max-model-len"),
    "block_size": _degree("block-size"),
    "host_link_gbs": _link,
}
_SPECS = ("model", "hardware", "draft")


def _spec(field: str, value: Any, dirs: list[Path]) -> Any:
    """The model, GPU or draft model of a preset id, a path or a Hub id (a spec is taken as it is)."""
    from kvplan.specs.hardware import HardwareSpec
    from kvplan.specs.model import ModelSpec

    if isinstance(value, HardwareSpec if field == "hardware" else ModelSpec):
        return value
    if isinstance(value, (str, Path)):
        from kvplan.inputs import presets

        try:
            return (presets.load_hardware if field == "hardware" else presets.load_model)(str(value), dirs)
        except InputError:
            raise
        except KvplanError as err:
            raise InputError(err.message, err.hint) from None
    flag = {"model": "--model", "hardware": "--hardware", "draft": "--draft-model"}[field]
    kind = "HardwareSpec" if field == "hardware" else "ModelSpec"
    raise InputError(f"{flag} {value!r} is not a preset id, a file or a {kind}",
                     f"give {flag} as a preset id (kvplan presets list) or a path, or a {kind}")


def resolve(values: dict[str, Any], options: dict[str, Any], presets_dir: str | Path | None = None,
            decode_flag: str = "--decode") -> dict[str, Any]:
    """The typed value of every scenario field in ``values`` (field name -> what the user gave) and ``options``
    (option name -> value, e.g. ``decode="32k"``, for the fields ``OPTION_FIELDS`` renames; None: not given),
    each read by its parser in ``FIELDS``. ``decode_flag`` names --decode in messages (compare-preemption's
    --generated). Raises ``InputError`` with the command line's message for the same value."""
    values = dict(values)
    for option, value in options.items():
        if value is not None:
            values[OPTION_FIELDS[option]] = value
    dirs = extra_dirs(presets_dir)
    out: dict[str, Any] = {}
    for field in ("model", *FIELDS, "hardware", "draft"):   # the order the command line reads its options in
        if field not in values:
            continue
        value = values[field]
        if field in _SPECS:
            if value is None and field != "draft":
                value = SEED_MODEL if field == "model" else SEED_HARDWARE
            out[field] = None if value is None else _spec(field, value, dirs)
        elif value is None:
            out[field] = None
        elif field == "decode_tokens" and decode_flag != "--decode":
            out[field] = _tokens(decode_flag, allow_zero=True)(value)
        else:
            out[field] = FIELDS[field](value)
    return out
