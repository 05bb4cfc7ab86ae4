"""`kvplan explain-log FILE`: rebuild the deployment from a vLLM or SGLang start-up log, reproduce the engine's
figures, say where kvplan's budget differs, and plan the workload on the logged pool."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.commands.common import build_scenario, check_output_options, emit, extra_dirs, scenario_command

LogArg = Annotated[Path, typer.Argument(metavar="FILE", help="A vLLM or SGLang start-up log.")]


def scenario_from_log(log, scenario_args: dict):
    """The deployment a log describes: its settings over the scenario options (kvplan.startup_log.scenario_args),
    built by ``build_scenario``. Returns (scenario, notes)."""
    from kvplan.errors import KvplanError
    from kvplan.presets import discover, load_hardware
    from kvplan.startup_log import scenario_args as merge
    from kvplan.units import parse_tokens

    if scenario_args.get("kv_pool") is not None:
        raise KvplanError("--kv-pool given with a start-up log", "drop --kv-pool: the pool is read from the log")
    dirs = extra_dirs(scenario_args.get("presets_dir"))
    per_node = load_hardware(scenario_args["hardware"], dirs).node.gpus_per_node
    args, notes = merge(log, scenario_args, per_node, discover(dirs)["model"])
    if args.get("max_model_len") is not None:
        limit = parse_tokens(args["max_model_len"], "--max-model-len")
        context = parse_tokens(args["prompt"], "--prompt", allow_zero=True) + parse_tokens(
            args["decode"], "--decode", allow_zero=True)
        if context > limit and scenario_args.get("max_model_len") is None:
            raise KvplanError(f"the request's {context:,} tokens (--prompt + --decode) exceed the log's max_model_len "
                              f"of {limit:,}; the engine would reject it", f"give --prompt and --decode that fit in "
                                                                           f"{limit:,} tokens")
    return build_scenario(**args), notes


@scenario_command(memory=("max_num_batched_tokens", "max_num_seqs", "activation_reserve", "runtime_reserve"))
def explain_log(scenario_args: dict, output: dict, file: LogArg) -> None:
    """Rebuild a deployment from its start-up log, reproduce the engine's figures and plan the workload on its pool."""
    from kvplan.calc.explain_log import plan_explain_log
    from kvplan.present.explain_log import present
    from kvplan.startup_log import read_log

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    log = read_log(file)
    scenario_args = {**scenario_args, "kv_pool": None, "gpu_memory_utilization": None, "mem_fraction_static": None}
    scenario, notes = scenario_from_log(log, scenario_args)
    emit(present(plan_explain_log(scenario, log), tuple(notes)), fmt, output["explain"], output["units"],
         output["brief"])


def register(app: typer.Typer) -> None:
    app.command("explain-log", short_help="Explain an engine's start-up log; plan on its pool.")(explain_log)
