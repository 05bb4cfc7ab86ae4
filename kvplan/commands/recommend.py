"""`kvplan recommend`: the workload document's configuration table for this deployment, and the engine flags."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.commands.common import TpotSloOpt, build_scenario, check_output_options, emit, scenario_command


@scenario_command(memory=("gpu_memory_utilization", "mem_fraction_static", "kv_pool", "max_num_batched_tokens",
                          "max_num_seqs"))
def recommend(
    scenario_args: dict,
    output: dict,
    tpot_slo: TpotSloOpt = "50ms",
    dram: Annotated[str | None, typer.Option("--dram", metavar="SIZE", help="Host DRAM per node for the KV tier "
                                             "(default: the GPU preset's node).")] = None,
    emit_engine: Annotated[str | None, typer.Option("--emit", metavar="ENGINE", help="Also print the launch "
                                                    "command that realises the plan: vllm or sglang (a release "
                                                    "with --engine vllm==X.Y).")] = None,
) -> None:
    """KV dtype, batch, offload, preemption, PD and prefix cache for this deployment, each with its reason."""
    from kvplan.calc.recommend import RecommendOptions, plan_recommend
    from kvplan.commands.common import optional, parse_seconds
    from kvplan.errors import KvplanError
    from kvplan.present.recommend import present
    from kvplan.units import parse_size

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    if emit_engine is not None:
        wanted = emit_engine.strip().lower()
        if wanted not in ("vllm", "sglang"):
            raise KvplanError(f"--emit {emit_engine!r} is not an engine kvplan can launch",
                              "give --emit vllm or sglang")
        engine = scenario_args["engine"].split("==")[0].strip().lower()
        if engine == "neutral":
            scenario_args = {**scenario_args, "engine": wanted}
        elif engine != wanted:
            raise KvplanError(f"--emit {wanted} with --engine {scenario_args['engine']}: the flags must realise the "
                              "plan of the same engine", f"give --engine {wanted} (or drop --engine)")
    scenario = build_scenario(**scenario_args)
    options = RecommendOptions(tpot_slo=parse_seconds(tpot_slo, "tpot-slo"),
                               dram_bytes_per_node=optional(parse_size, dram, "--dram"))
    plan = plan_recommend(scenario, options)
    launch = scenario.engine_adapter.launch_command(plan) if emit_engine is not None else None
    emit(present(plan, launch), fmt, output["explain"], output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("recommend", short_help="The configuration table for this deployment, and engine flags.")(recommend)
