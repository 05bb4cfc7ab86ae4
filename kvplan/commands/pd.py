"""`kvplan pd`: does prefill/decode disaggregation pay for this deployment and workload?"""

from typing import Annotated

import typer

from kvplan.commands.common import TpotSloOpt, scenario_command
from kvplan.commands.output import check_output_options, emit
from kvplan.inputs.options import optional, parse_degree, parse_float, parse_fraction, parse_link_gbs, parse_seconds
from kvplan.inputs.request import build_scenario


@scenario_command(memory=("gpu_memory_utilization", "kv_pool", "max_num_batched_tokens"), host_link=False)
def pd(
    scenario_args: dict,
    output: dict,
    tpot_slo: TpotSloOpt = "50ms",
    nic_gbps: Annotated[str | None, typer.Option("--nic-gbps", metavar="GB/S", help="NIC per GPU per direction for "
                                                 "the KV transfer (default: the GPU preset's).")] = None,
    prefill_gpus: Annotated[str | None, typer.Option("--prefill-gpus", metavar="N", help="GPUs for prefill "
                                                     "instances (default: the best split).")] = None,
    handover_ms: Annotated[str | None, typer.Option("--handover-ms", metavar="MS", help="Per-request handover "
                                                    "overhead of disaggregation (default 2).")] = None,
    no_chunked: Annotated[bool, typer.Option("--no-chunked", help="Colocated prefills stall the decode batch whole "
                                             "(no chunked prefill).")] = False,
    hbm_efficiency: Annotated[str | None, typer.Option("--hbm-efficiency", metavar="FRACTION",
                                                       help="Achievable fraction of HBM bandwidth.")] = None,
    mfu: Annotated[str | None, typer.Option("--mfu", metavar="FRACTION",
                                            help="Achievable fraction of the dense peak in decode GEMMs.")] = None,
) -> None:
    """Colocated vs disaggregated prefill/decode: interference, KV transfer, best split, break-even, verdict."""
    from kvplan.calc.pd import PdOptions, plan_pd
    from kvplan.present.pd import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    scenario = build_scenario(**scenario_args)
    handover = parse_float(handover_ms, "--handover-ms", "2") / 1000 if handover_ms is not None else None
    if handover is not None and not 0 <= handover <= 3600:
        from kvplan.errors import KvplanError

        raise KvplanError(f"--handover-ms {handover_ms!r} is not a time in [0, 3,600,000] ms",
                          "give --handover-ms as the per-request handover in milliseconds, e.g. 2")
    options = PdOptions(
        tpot_slo=parse_seconds(tpot_slo, "tpot-slo"), nic_gbps=optional(parse_link_gbs, nic_gbps, "--nic-gbps"),
        prefill_gpus=optional(parse_degree, prefill_gpus, "prefill-gpus"), chunked=not no_chunked,
        factors={k: v for k, v in {"hbm": optional(parse_fraction, hbm_efficiency, "hbm-efficiency"),
                                   "mfu": optional(parse_fraction, mfu, "mfu")}.items() if v is not None},
        **({"handover_seconds": handover} if handover is not None else {}))
    emit(present(plan_pd(scenario, options)), fmt, output["explain"], output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("pd", short_help="Does prefill/decode disaggregation pay?")(pd)
