"""A scenario from user values as the command line gives them: the options of a command (text, None when not
given), a plan file's ``[deployment]``, or a vLLM / SGLang start-up log. Every path builds the ``Scenario`` through
``kvplan.inputs.request.resolve`` (each field read by its option's parser), so the command line, plan files, logs and
Python accept and refuse the same values with the same one-line messages.

This layer sits above the calculators (a log's KV dtype and pool are matched with ``calc.explain_log``) and below
the commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError, KvplanError
from kvplan.inputs.options import extra_dirs
from kvplan.inputs.request import (
    DEFAULT_REQUEST_TEXT,
    MEMORY_OPTIONS,
    OPTION_FIELDS,
    POOL_OPTIONS,
    SCENARIO_DEFAULTS,
    resolve,
)
from kvplan.scenario import Scenario

if TYPE_CHECKING:
    from kvplan.inputs.plan_file import PlanFile
    from kvplan.inputs.startup_log import StartupLog


# --- the options as the command line gives them ----------------------------------------------------------------
def build_scenario(*, presets_dir: str | Path | None = None, decode_flag: str = "--decode",
                   **options: Any) -> Scenario:
    """The scenario the options describe (the command line's and a plan's ``[deployment]`` names: ``prompt``,
    ``kv_dtype``, ``kv_pool``, ..., as text; None or missing: not given, the default). ``decode_flag`` names the
    --decode option in messages (compare-preemption's --generated). ``calibration``: a file of ``kvplan calibrate
    --save`` (``kvplan.inputs.calibration_file.apply``: its fitted step factors and memory reserve)."""
    calibration = options.pop("calibration", None)
    if options.get("hardware") is None:   # not given (None from the command line): the default, read with the presets
        options["hardware"] = SCENARIO_DEFAULTS["hardware"]   # folder like a named GPU (a user h200.toml wins)
    unknown = [k for k in options if k not in SCENARIO_DEFAULTS and k not in MEMORY_OPTIONS and k not in POOL_OPTIONS]
    if unknown:
        raise InputError(f"unknown scenario option {unknown[0]!r}",
                         "give one of " + ", ".join((*SCENARIO_DEFAULTS, *MEMORY_OPTIONS, *POOL_OPTIONS)))
    given = {k: v for k, v in options.items() if v is not None}
    if "kv_pool" in given:
        # a given pool is planned on as it is: the options that size it from the GPU's memory would do nothing
        sizing = [k for k in ("gpu_memory_utilization", "mem_fraction_static", "activation_reserve", "runtime_reserve")
                  if k in given]
        if sizing:
            flag = "--" + sizing[0].replace("_", "-")
            raise InputError(f"{flag} sizes the KV pool, which --kv-pool gives (it would have no effect)",
                             f"drop {flag}, or drop --kv-pool to size the pool from it")
    fields = {k: given.pop(k) for k in list(given) if k not in OPTION_FIELDS}
    typed = resolve(fields, given, presets_dir, decode_flag)
    if calibration is not None:
        from kvplan.inputs.calibration_file import apply, read_calibration

        cal = read_calibration(calibration)
        reserve_applied = cal.runtime_reserve_bytes is not None and typed.get("runtime_reserve_bytes") is None
        typed = apply(cal, typed)
    s = Scenario(**typed)
    par = s.parallelism
    if calibration is not None:
        from kvplan.inputs.calibration_file import check_release, check_tp

        check_tp(cal, par.tp, s.tp_defaulted)
        check_release(cal, s.engine_adapter.version, reserve_applied)
    if s.gpus is not None and s.dp is not None and par.gpus < s.gpus:
        # --gpus N says to plan N GPUs; a layout given in full on fewer would drop the rest without a word
        replica = par.tp * par.pp
        fill = f"give --dp {s.gpus // replica} to use them all, or " if s.gpus % replica == 0 else ""
        raise InputError(f"--gpus {s.gpus} but TP x PP x DP = {par.gpus} ({par.tp} x {par.pp} x {par.dp}) plans only "
                         f"{par.gpus} of them", f"{fill}give --gpus {par.gpus}")
    return s


# --- a start-up log --------------------------------------------------------------------------------------------
def scenario_from_log(log: StartupLog, options: dict[str, Any], **extra: Any) -> tuple[Scenario, list[str], list[str]]:
    """The deployment a start-up log describes: its settings over the scenario ``options`` (text, as the command
    line gives them; ``kvplan.inputs.startup_log.scenario_args`` merges them and refuses an option that contradicts
    the log), built by ``build_scenario`` (``extra``: more scenario options, e.g. ``shared_prefix``). Returns
    (scenario, notes, warnings). explain-log and concurrency --from-log build their deployment here."""
    from kvplan.calc.explain_log import matching_kv_dtype
    from kvplan.inputs.presets import discover, load_hardware, load_model
    from kvplan.inputs.startup_log import kv_dtype_option
    from kvplan.inputs.startup_log import scenario_args as merge
    from kvplan.inputs.units import parse_tokens

    if options.get("kv_pool") is not None:
        raise InputError("--kv-pool given with a start-up log", "drop --kv-pool: the pool is read from the log")
    dirs = extra_dirs(options.get("presets_dir"))
    found = discover(dirs)

    def per_node(hardware: str) -> int:
        return load_hardware(hardware, dirs).node.gpus_per_node

    def hbm_of() -> dict[str, tuple[float, bool]]:
        specs = {gpu: load_hardware(gpu, dirs).hbm_capacity_gib for gpu in sorted(found["hardware"])}
        return {gpu: (hbm.value, hbm.kind == "M") for gpu, hbm in specs.items()}

    def releases(engine: str) -> tuple[Any, Any, str]:
        import importlib

        from kvplan import engines

        oldest, newest = importlib.import_module(f"kvplan.engines.{engine}").RELEASES
        return oldest, newest, engines.get(engine).release

    # --hardware not given is None from the command line (any GPU named, h200 included, is given); an options dict
    # without the key (Python) reads as not given too
    hardware_given = options.get("hardware") is not None
    merged = {**SCENARIO_DEFAULTS, **{k: v for k, v in options.items() if k != "hardware" or v is not None}}
    args, notes, warnings = merge(log, merged, per_node, found["model"], hbm_of, releases,
                                  hardware_given=hardware_given)
    if args.get("max_model_len") is not None and options.get("max_model_len") is None and (
            args.get("prompt") is not None and args.get("decode") is not None):
        # the request the user gave, against the log's limit (a request not given is fitted into it by the scenario)
        limit = parse_tokens(args["max_model_len"], "--max-model-len")
        context = parse_tokens(args["prompt"], "--prompt", allow_zero=True) + parse_tokens(
            args["decode"], "--decode", allow_zero=True)
        if context > limit:
            raise InputError(f"the request's {context:,} tokens (--prompt + --decode) exceed the log's max_model_len "
                             f"of {limit:,}; the engine would reject it", f"give --prompt and --decode that fit in "
                                                                          f"{limit:,} tokens")
    if log.has("dp_attention") and args.get("ep") is None and int(args.get("dp") or 1) > 1:
        # SGLang's DP attention replicates attention per DP rank but keeps the MoE sharded over all tp_size GPUs
        if load_model(args["model"], dirs).params_expert is not None:
            args["ep"] = str(int(args["tp"]) * int(args["dp"]))
            notes.append(f"DP attention keeps the MoE layers sharded over all {args['ep']} GPUs: kvplan splits the "
                         f"routed experts {args['ep']} ways (EP={args['ep']}); attention and dense layers are "
                         "counted whole on every GPU.")
    scenario = build_scenario(**args, **extra)
    if kv_dtype_option(log) is None and options.get("kv_dtype", "auto") == "auto":   # nobody said
        match = matching_kv_dtype(scenario, log)
        if match is not None:
            before = scenario.kv_dtype.value
            scenario = scenario.with_(kv_dtype_request=match[0])
            notes.append(f"KV dtype {match[0]}: the log does not state it, and its {match[1]} agrees with "
                         f"{match[0]}'s bytes per token, not {before}'s (the engine default).")
    return scenario, notes, warnings


def pool_from_log(options: dict[str, Any], path: str | Path, extra: dict[str, Any] | None = None
                  ) -> tuple[Scenario, str, tuple[str, ...], tuple[str, ...]]:
    """The deployment the start-up log at ``path`` describes (as ``scenario_from_log`` rebuilds it) with the KV pool
    per GPU it states (``concurrency --from-log``). Returns (scenario, where the pool came from, notes, warnings)."""
    from typing import cast

    from kvplan.calc.explain_log import logged_pool
    from kvplan.inputs.startup_log import read_log

    if options.get("kv_pool") is not None:
        raise InputError("--kv-pool and --from-log both give the pool", "drop one of them")
    log = read_log(Path(path))
    scenario, notes, warnings = scenario_from_log(log, options, **(extra or {}))
    pool, what = logged_pool(scenario, log)
    return (scenario.with_(kv_pool_bytes=int(cast(float, pool.value))), f"the start-up log {path} ({what})",
            tuple(notes), tuple(warnings))


# --- a plan file's [deployment] -------------------------------------------------------------------------------
def deployment_scenario(spec: PlanFile, presets_dir: str | Path | None = None):
    """The plan's deployment through the command line's own parsers and Scenario rules
    (``build_scenario``); their messages name flags (``--tp``), rewritten here to the plan's
    keys (``deployment.tp``), with the file and line."""
    from kvplan.inputs.plan_file import DEPLOYMENT_DEFAULTS, keys_named, locate, plan_keys

    try:
        return build_scenario(**spec.deployment, presets_dir=presets_dir)
    except KvplanError as err:
        set_in = dict(spec.deployment_sources)
        # the keys the message names, those the plan (or a plan it extends) sets away from the default first: the
        # line to point at
        defaults = {**DEPLOYMENT_DEFAULTS, **DEFAULT_REQUEST_TEXT}
        named = sorted(keys_named(err.message), key=lambda k: (k not in set_in,
                                                               spec.deployment.get(k) == defaults.get(k)))
        rename = plan_keys
        where = locate(set_in.get(named[0], spec.path) if named else spec.path, "deployment",
                       named[0] if named else None)
        message = rename(err.message) or err.message
        if "deployment." not in message:
            message = f"[deployment] {named[0] if named else ''}: {message}".replace(" :", ":")
        raise type(err)(f"{where}: {message}", rename(err.hint)) from None
