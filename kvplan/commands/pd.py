"""`kvplan pd`: does prefill/decode disaggregation pay for this deployment and workload?"""

from typing import Annotated

import typer

from kvplan.commands.common import SloAttainmentOpt, SloPercentileOpt, TpotSloOpt, TtftSloOpt, scenario_command
from kvplan.commands.output import check_output_options, emit


@scenario_command(memory=("gpu_memory_utilization", "mem_fraction_static", "kv_pool", "max_num_batched_tokens"),
                  host_link=False)
def pd(
    scenario_args: dict,
    output: dict,
    tpot_slo: TpotSloOpt = "50ms",
    ttft_slo: TtftSloOpt = None,
    slo_percentile: SloPercentileOpt = None,
    slo_attainment: SloAttainmentOpt = None,
    nic_gbps: Annotated[str | None, typer.Option("--nic-gbps", metavar="GB/S", help="NIC per GPU per direction for "
                                                 "the KV transfer (default: the GPU preset's).")] = None,
    prefill_gpus: Annotated[str | None, typer.Option("--prefill-gpus", metavar="N", help="GPUs for prefill "
                                                     "instances (default: the best split).")] = None,
    prefill_gpu: Annotated[str | None, typer.Option("--prefill-gpu", metavar="ID|FILE", help="GPU preset of the "
                                                    "prefill instances (default: --gpu's).")] = None,
    decode_gpu: Annotated[str | None, typer.Option("--decode-gpu", metavar="ID|FILE", help="GPU preset of the "
                                                   "decode instances (default: --gpu's).")] = None,
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
    from kvplan.calc.pd import plan_pd
    from kvplan.options.command import pd_options
    from kvplan.options.scenarios import build_scenario
    from kvplan.present.pd import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    scenario = build_scenario(**scenario_args)
    options = pd_options(tpot_slo=tpot_slo, ttft_slo=ttft_slo, slo_percentile=slo_percentile,
                         slo_attainment=slo_attainment, nic_gbps=nic_gbps, prefill_gpus=prefill_gpus,
                         prefill_gpu=prefill_gpu, decode_gpu=decode_gpu,
                         handover_ms=handover_ms,
                         chunked=not no_chunked, hbm_efficiency=hbm_efficiency, mfu=mfu)
    emit(present(plan_pd(scenario, options)), fmt, output["explain"], output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("pd", short_help="Does prefill/decode disaggregation pay?")(pd)
