"""`kvplan explain-log FILE`: rebuild the deployment from a vLLM or SGLang start-up log, reproduce the engine's
figures, say where kvplan's budget differs, and plan the workload on the logged pool."""

from pathlib import Path
from typing import Annotated

import typer

from kvplan.commands.common import scenario_command
from kvplan.commands.output import check_output_options, emit

LogArg = Annotated[Path, typer.Argument(metavar="FILE", help="A vLLM or SGLang start-up log.")]


@scenario_command(memory=("max_num_batched_tokens", "max_num_seqs", "activation_reserve", "runtime_reserve"),
                  unused=("host_link_gbs",))
def explain_log(scenario_args: dict, output: dict, file: LogArg) -> None:
    """Rebuild a deployment from its start-up log, reproduce the engine's figures and plan the workload on its pool."""
    from kvplan.calc.explain_log import plan_explain_log
    from kvplan.inputs.startup_log import read_log
    from kvplan.options.scenarios import scenario_from_log
    from kvplan.present.explain_log import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    log = read_log(file)
    scenario_args = {**scenario_args, "kv_pool": None, "gpu_memory_utilization": None, "mem_fraction_static": None}
    scenario, notes, warnings = scenario_from_log(log, scenario_args)
    emit(present(plan_explain_log(scenario, log), tuple(notes), tuple(warnings)), fmt, output["explain"],
         output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("explain-log", short_help="Explain an engine's start-up log; plan on its pool.")(explain_log)
