"""`kvplan recommend`: the workload document's configuration table for this deployment, and the engine flags."""

from typing import Annotated

import typer

from kvplan.commands.common import SloAttainmentOpt, SloPercentileOpt, TtftSloOpt, scenario_command
from kvplan.commands.output import check_output_options, emit


@scenario_command(memory=("gpu_memory_utilization", "mem_fraction_static", "kv_pool", "max_num_batched_tokens",
                          "max_num_seqs", "moe_a2a_backend"))
def recommend(
    scenario_args: dict,
    output: dict,
    tpot_slo: Annotated[str | None, typer.Option("--tpot-slo", metavar="TIME", help="TPOT service level the batch "
                                                 "is planned on, e.g. 50ms (default: a --target tpot<=T's T, else "
                                                 "50ms, DeepSeek's production 20 tokens/s per user).")] = None,
    dram: Annotated[str | None, typer.Option("--dram", metavar="SIZE", help="Host DRAM per node for the KV tier "
                                             "(default: the GPU preset's node).")] = None,
    nic_gbps: Annotated[str | None, typer.Option("--nic-gbps", metavar="GB/S", help="NIC per GPU per direction for "
                                                 "the PD row's KV transfer (default: the GPU preset's).")] = None,
    target: Annotated[str | None, typer.Option("--target", metavar="TARGETS", help="Search GPU presets x GPU counts "
                                               "x TP/PP/DP/EP layouts x KV dtypes for the fewest GPUs meeting "
                                               "comma-separated targets, e.g. 'concurrency>=64@31k,tpot<=40ms,"
                                               "rate>=2rps', then recommend for the best.")] = None,
    candidates: Annotated[str | None, typer.Option("--candidates", metavar="GPU,GPU", help="GPU presets the "
                                                   "--target search tries (default: the -g given, else every GPU "
                                                   "preset).")] = None,
    ttft_slo: TtftSloOpt = None,
    slo_percentile: SloPercentileOpt = None,
    slo_attainment: SloAttainmentOpt = None,
    emit_engine: Annotated[str | None, typer.Option("--emit", metavar="ENGINE", help="Also print the launch "
                                                    "command that realises the plan: vllm or sglang (a release "
                                                    "with --engine vllm==X.Y).")] = None,
) -> None:
    """KV dtype, batch, offload, preemption, PD and prefix cache for this deployment, each with its reason."""
    from kvplan.calc.recommend import plan_recommend
    from kvplan.options.recommend import recommend_request
    from kvplan.present.recommend import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    r = recommend_request(scenario_args, tpot_slo=tpot_slo, dram=dram, nic_gbps=nic_gbps, target=target,
                          candidates=candidates, emit=emit_engine, presets_dir=output["presets_dir"],
                          ttft_slo=ttft_slo, slo_percentile=slo_percentile, slo_attainment=slo_attainment)
    scenario, options, sizing = r.scenario, r.options, None
    if r.targets is not None:
        import dataclasses

        sizing, scenario = _search(r)
        if r.dtypes is None:     # a --kv-dtype given stays the user's (the search tried only it)
            options = dataclasses.replace(options, dtype_origin="chosen by the --target search")
    plan = plan_recommend(scenario, options, load=sizing.best.load if sizing is not None and sizing.best else None)
    launch = scenario.engine_adapter.launch_command(plan) if r.emit is not None else None
    emit(present(plan, launch, sizing, r.notes), fmt, output["explain"], output["units"], output["brief"])


def _search(r):
    """The sizing search over the request's targets and GPUs, and the best layout's scenario (the one recommend then
    plans)."""
    from kvplan.calc.sizing import search
    from kvplan.errors import KvplanError

    plan = search(r.scenario, r.targets, r.candidates, dtypes=r.dtypes, slo=r.options.slo)
    if plan.best is None:
        misses = "; ".join(f"{c.hardware} x {c.gpus} {c.layout} {c.kv_dtype}: misses " + ", ".join(c.failed)
                           for c in plan.near_misses[:2])
        ttft = " and --ttft-slo (a request alone)" if r.options.slo is not None and r.options.slo.ttft is not None \
            else ""
        raise KvplanError(f"no layout of {plan.considered} meets {r.target}{ttft}" + (f" (closest: {misses})" if misses
                                                                                       else ""),
                          "relax a target, or add GPU presets with --candidates / --presets-dir")
    b = plan.best
    hardware = next(h for h in r.candidates if h.id == b.hardware)   # the spec the search ran on, not re-read
    best = r.scenario.with_(hardware=hardware, nodes=b.nodes, gpus=b.gpus, tp=b.tp, pp=b.pp,
                            dp=None, ep=b.ep, kv_dtype_request=b.kv_dtype)
    return plan, best


def register(app: typer.Typer) -> None:
    app.command("recommend", short_help="The configuration table for this deployment, and engine flags.")(recommend)
