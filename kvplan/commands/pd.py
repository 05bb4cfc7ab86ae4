"""`kvplan pd`: does prefill/decode disaggregation pay for this deployment and workload?"""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.commands.common import (
    BlockSizeOpt,
    BriefOpt,
    DecodeOpt,
    DpOpt,
    EngineOpt,
    EpOpt,
    ExplainOpt,
    FormatOpt,
    GpuMemUtilOpt,
    GpusOpt,
    HardwareOpt,
    KvDtypeOpt,
    KvPoolOpt,
    MaxBatchedOpt,
    MaxModelLenOpt,
    ModelOpt,
    MtpLayersOpt,
    NodesOpt,
    PpOpt,
    PresetsDirOpt,
    PromptOpt,
    TpOpt,
    UnitsOpt,
    WeightDtypeOpt,
    build_scenario,
    check_output_options,
    emit,
    optional,
    parse_fraction,
    parse_link_gbs,
    parse_seconds,
)


def pd(
    model: ModelOpt = None,
    hardware: HardwareOpt = "h200",
    nodes: NodesOpt = "1",
    gpus: GpusOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = "1",
    dp: DpOpt = None,
    ep: EpOpt = None,
    kv_dtype: KvDtypeOpt = "auto",
    weight_dtype: WeightDtypeOpt = None,
    engine: EngineOpt = "neutral",
    prompt: PromptOpt = "1k",
    decode: DecodeOpt = "30k",
    mtp_layers: MtpLayersOpt = None,
    max_model_len: MaxModelLenOpt = None,
    block_size: BlockSizeOpt = None,
    gpu_memory_utilization: GpuMemUtilOpt = None,
    kv_pool: KvPoolOpt = None,
    max_num_batched_tokens: MaxBatchedOpt = None,
    tpot_slo: Annotated[str, typer.Option("--tpot-slo", metavar="TIME", help="TPOT service level, e.g. 50ms "
                                          "(default 50ms: DeepSeek's production 20 tokens/s per user).")] = "50ms",
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
    units: UnitsOpt = "iec",
    fmt: FormatOpt = "table",
    explain: ExplainOpt = False,
    brief: BriefOpt = False,
    presets_dir: PresetsDirOpt = None,
) -> None:
    """Colocated vs disaggregated prefill/decode: interference, KV transfer, best split, break-even, verdict."""
    from kvplan.calc.pd import PdOptions, plan_pd
    from kvplan.commands.common import parse_degree, parse_float
    from kvplan.present.pd import present

    fmt = check_output_options(fmt, units, brief)
    scenario = build_scenario(
        model=model, hardware=hardware, nodes=nodes, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep, kv_dtype=kv_dtype,
        weight_dtype=weight_dtype, engine=engine, prompt=prompt, decode=decode, mtp_layers=mtp_layers,
        max_model_len=max_model_len, block_size=block_size, host_link_gbs=None, presets_dir=presets_dir,
        gpu_memory_utilization=gpu_memory_utilization, kv_pool=kv_pool,
        max_num_batched_tokens=max_num_batched_tokens)
    handover = parse_float(handover_ms, "--handover-ms", "2") / 1000 if handover_ms is not None else None
    options = PdOptions(
        tpot_slo=parse_seconds(tpot_slo, "tpot-slo"), nic_gbps=optional(parse_link_gbs, nic_gbps),
        prefill_gpus=optional(parse_degree, prefill_gpus, "prefill-gpus"), chunked=not no_chunked,
        factors={k: v for k, v in {"hbm": optional(parse_fraction, hbm_efficiency, "hbm-efficiency"),
                                   "mfu": optional(parse_fraction, mfu, "mfu")}.items() if v is not None},
        **({"handover_seconds": handover} if handover is not None else {}))
    emit(present(plan_pd(scenario, options)), fmt, explain, units, brief)


def register(app: typer.Typer) -> None:
    app.command("pd", short_help="Does prefill/decode disaggregation pay?")(pd)
