"""`kvplan explain-log FILE`: rebuild the deployment from a vLLM or SGLang start-up log, reproduce the engine's
figures, say where kvplan's budget differs, and plan the workload on the logged pool."""

from pathlib import Path
from typing import Annotated

import typer

from kvplan.commands.common import build_scenario, check_output_options, emit, extra_dirs, scenario_command

LogArg = Annotated[Path, typer.Argument(metavar="FILE", help="A vLLM or SGLang start-up log.")]


def scenario_from_log(log, scenario_args: dict, **extra):
    """The deployment a log describes: its settings over the scenario options (kvplan.inputs.startup_log.scenario_args),
    built by ``build_scenario`` (``extra``: the command's own scenario keywords, e.g. --shared-prefix). Returns
    (scenario, notes, warnings). explain-log and concurrency --from-log both build their deployment here."""
    from kvplan.calc.explain_log import matching_kv_dtype
    from kvplan.errors import KvplanError
    from kvplan.inputs.presets import discover, load_hardware, load_model
    from kvplan.inputs.startup_log import kv_dtype_option
    from kvplan.inputs.startup_log import scenario_args as merge
    from kvplan.inputs.units import parse_tokens

    if scenario_args.get("kv_pool") is not None:
        raise KvplanError("--kv-pool given with a start-up log", "drop --kv-pool: the pool is read from the log")
    dirs = extra_dirs(scenario_args.get("presets_dir"))
    found = discover(dirs)

    def per_node(hardware: str) -> int:
        return load_hardware(hardware, dirs).node.gpus_per_node

    def hbm_of() -> dict[str, tuple[float, bool]]:
        specs = {gpu: load_hardware(gpu, dirs).hbm_capacity_gib for gpu in sorted(found["hardware"])}
        return {gpu: (hbm.value, hbm.kind == "M") for gpu, hbm in specs.items()}

    args, notes, warnings = merge(log, scenario_args, per_node, found["model"], hbm_of)
    if args.get("max_model_len") is not None:
        limit = parse_tokens(args["max_model_len"], "--max-model-len")
        context = parse_tokens(args["prompt"], "--prompt", allow_zero=True) + parse_tokens(
            args["decode"], "--decode", allow_zero=True)
        if context > limit and scenario_args.get("max_model_len") is None:
            raise KvplanError(f"the request's {context:,} tokens (--prompt + --decode) exceed the log's max_model_len "
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
    if kv_dtype_option(log) is None and scenario_args.get("kv_dtype", "auto") == "auto":   # nobody said
        match = matching_kv_dtype(scenario, log)
        if match is not None:
            before = scenario.kv_dtype.value
            scenario = scenario.with_(kv_dtype_request=match[0])
            notes.append(f"KV dtype {match[0]}: the log does not state it, and its {match[1]} agrees with "
                         f"{match[0]}'s bytes per token, not {before}'s (the engine default).")
    return scenario, notes, warnings


@scenario_command(memory=("max_num_batched_tokens", "max_num_seqs", "activation_reserve", "runtime_reserve"))
def explain_log(scenario_args: dict, output: dict, file: LogArg) -> None:
    """Rebuild a deployment from its start-up log, reproduce the engine's figures and plan the workload on its pool."""
    from kvplan.calc.explain_log import plan_explain_log
    from kvplan.inputs.startup_log import read_log
    from kvplan.present.explain_log import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    log = read_log(file)
    scenario_args = {**scenario_args, "kv_pool": None, "gpu_memory_utilization": None, "mem_fraction_static": None}
    scenario, notes, warnings = scenario_from_log(log, scenario_args)
    emit(present(plan_explain_log(scenario, log), tuple(notes), tuple(warnings)), fmt, output["explain"],
         output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("explain-log", short_help="Explain an engine's start-up log; plan on its pool.")(explain_log)
