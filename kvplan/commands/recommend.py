"""`kvplan recommend`: the workload document's configuration table for this deployment, and the engine flags."""

from typing import Annotated

import typer

from kvplan.commands.common import TpotSloOpt, scenario_command
from kvplan.commands.output import check_output_options, emit
from kvplan.inputs.options import extra_dirs, optional, parse_link_gbs, parse_seconds
from kvplan.inputs.request import build_scenario


@scenario_command(memory=("gpu_memory_utilization", "mem_fraction_static", "kv_pool", "max_num_batched_tokens",
                          "max_num_seqs"))
def recommend(
    scenario_args: dict,
    output: dict,
    tpot_slo: TpotSloOpt = "50ms",
    dram: Annotated[str | None, typer.Option("--dram", metavar="SIZE", help="Host DRAM per node for the KV tier "
                                             "(default: the GPU preset's node).")] = None,
    nic_gbps: Annotated[str | None, typer.Option("--nic-gbps", metavar="GB/S", help="NIC per GPU per direction for "
                                                 "the PD row's KV transfer (default: the GPU preset's).")] = None,
    target: Annotated[str | None, typer.Option("--target", metavar="TARGETS", help="Search GPU presets x GPU counts "
                                               "x TP/PP/DP/EP layouts x KV dtypes for the fewest GPUs meeting "
                                               "comma-separated targets, e.g. 'concurrency>=64@31k,tpot<=40ms,"
                                               "rate>=2rps', then recommend for the best.")] = None,
    candidates: Annotated[str | None, typer.Option("--candidates", metavar="GPU,GPU", help="GPU presets the "
                                                   "--target search tries (default: every GPU preset).")] = None,
    emit_engine: Annotated[str | None, typer.Option("--emit", metavar="ENGINE", help="Also print the launch "
                                                    "command that realises the plan: vllm or sglang (a release "
                                                    "with --engine vllm==X.Y).")] = None,
) -> None:
    """KV dtype, batch, offload, preemption, PD and prefix cache for this deployment, each with its reason."""
    from kvplan.calc.recommend import RecommendOptions, plan_recommend
    from kvplan.errors import KvplanError
    from kvplan.inputs.units import parse_size
    from kvplan.present.recommend import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    switched = None
    if emit_engine is not None:
        wanted = emit_engine.strip().lower()
        if wanted not in ("vllm", "sglang"):
            raise KvplanError(f"--emit {emit_engine!r} is not an engine kvplan can launch",
                              "give --emit vllm or sglang")
        engine = scenario_args["engine"].split("==")[0].strip().lower()
        if engine == "neutral":
            scenario_args = {**scenario_args, "engine": wanted}
            switched = (f"--emit {wanted} plans with {wanted}'s own accounting (its memory fraction, batch limits and "
                        f"block sizes), so the flags realise the figures; without --emit the table uses the neutral "
                        f"engine, whose figures can differ")
        elif engine != wanted:
            raise KvplanError(f"--emit {wanted} with --engine {scenario_args['engine']}: the flags must realise the "
                              "plan of the same engine", f"give --engine {wanted} (or drop --engine)")
    if candidates is not None and target is None:
        raise KvplanError("--candidates without --target", "give --target to search, or drop --candidates")
    scenario = build_scenario(**scenario_args)
    options = RecommendOptions(tpot_slo=parse_seconds(tpot_slo, "tpot-slo"),
                               dram_bytes_per_node=optional(parse_size, dram, "--dram"),
                               nic_gbps=optional(parse_link_gbs, nic_gbps, "--nic-gbps"))
    sizing = None
    if target is not None:
        import dataclasses

        sizing, scenario = _search(scenario, target, candidates, output["presets_dir"])
        options = dataclasses.replace(options, dtype_origin="chosen by the --target search")
    plan = plan_recommend(scenario, options)
    launch = scenario.engine_adapter.launch_command(plan) if emit_engine is not None else None
    emit(present(plan, launch, sizing, (switched,) if switched else ()), fmt, output["explain"], output["units"],
         output["brief"])


def _search(scenario, target: str, candidates: str | None, presets_dir):
    """The sizing search, and the best layout's scenario (the one recommend then plans)."""
    from kvplan.calc.sizing import parse_target, search
    from kvplan.errors import KvplanError
    from kvplan.inputs.presets import discover, load_hardware

    targets = tuple(parse_target(t) for t in target.split(",") if t.strip())
    if not targets:
        raise KvplanError("--target is empty", "give --target concurrency>=64@31k (or tpot<=40ms, rate>=2rps)")
    if len({t.metric for t in targets}) < len(targets):
        raise KvplanError(f"--target {target!r} names a metric twice", "give each of concurrency, tpot, rate once")
    dirs = extra_dirs(presets_dir)
    ids = ([c.strip() for c in candidates.split(",") if c.strip()] if candidates is not None
           else sorted(discover(dirs)["hardware"]))
    if not ids:
        raise KvplanError("--candidates is empty", "give GPU preset ids, e.g. --candidates h100-sxm,h200")
    specs = {i: load_hardware(i, dirs) for i in ids}
    plan = search(scenario, targets, tuple(specs.values()))
    if plan.best is None:
        misses = "; ".join(f"{c.hardware} x {c.gpus} {c.layout} {c.kv_dtype}: misses " + ", ".join(c.failed)
                           for c in plan.near_misses[:2])
        raise KvplanError(f"no layout of {plan.considered} meets {target}" + (f" (closest: {misses})" if misses
                                                                               else ""),
                          "relax a target, or add GPU presets with --candidates / --presets-dir")
    b = plan.best
    hardware = next(h for h in specs.values() if h.id == b.hardware)   # the spec the search ran on, not re-read
    best = scenario.with_(hardware=hardware, nodes=b.nodes, gpus=b.gpus, tp=b.tp, pp=b.pp,
                          dp=None, ep=b.ep, kv_dtype_request=b.kv_dtype)
    return plan, best


def register(app: typer.Typer) -> None:
    app.command("recommend", short_help="The configuration table for this deployment, and engine flags.")(recommend)
