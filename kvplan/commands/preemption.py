"""`kvplan compare-preemption`: swap a preempted request over the host link, or recompute it."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.commands.common import (
    ActivationOpt,
    BlockSizeOpt,
    BriefOpt,
    DpOpt,
    DramOpt,
    EngineOpt,
    EpOpt,
    ExplainOpt,
    FormatOpt,
    GpuMemUtilOpt,
    GpusOpt,
    HardwareOpt,
    HostLinkOpt,
    KvDtypeOpt,
    KvPoolOpt,
    MaxModelLenOpt,
    MemFractionOpt,
    ModelOpt,
    MtpLayersOpt,
    NodesOpt,
    PpOpt,
    PresetsDirOpt,
    PromptOpt,
    RuntimeOpt,
    TpOpt,
    UnitsOpt,
    WeightDtypeOpt,
    build_scenario,
    check_output_options,
    emit,
    optional,
    parse_float,
    parse_fraction,
    parse_list,
)


def compare_preemption(
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
    generated: Annotated[str, typer.Option("--generated", "--decode", metavar="TOKENS",
                                           help="Tokens generated before the preemption (default 20k).")] = "20k",
    mtp_layers: MtpLayersOpt = None,
    max_model_len: MaxModelLenOpt = None,
    block_size: BlockSizeOpt = None,
    host_link_gbs: HostLinkOpt = None,
    gpu_memory_utilization: GpuMemUtilOpt = None,
    mem_fraction_static: MemFractionOpt = None,
    kv_pool: KvPoolOpt = None,
    activation_reserve: ActivationOpt = None,
    runtime_reserve: RuntimeOpt = None,
    dram: DramOpt = None,
    prefix_hit: Annotated[str, typer.Option(
        "--prefix-hit", metavar="TOKENS", help="Tokens recompute recovers from the prefix cache, in "
                                               "[0, prompt + generated).")] = "0",
    mfu: Annotated[str | None, typer.Option("--mfu", metavar="FRACTION",
                                               help="Prefill MFU in [0.01, 1] (default 0.45).")] = None,
    compute_dtype: Annotated[str, typer.Option(
        "--compute-dtype", metavar="DTYPE",
        help="Peak used for recompute: auto (fp8 for fp8-weight models on fp8 GPUs, else bf16), bf16, fp8, fp4.")
    ] = "auto",
    layout: Annotated[str, typer.Option(
        "--layout", metavar="LAYOUT", help="contiguous (vLLM >= 0.12 offloading: one copy per block across layers) "
                                           "or per-layer (old vLLM swap: one copy per layer per block, K and V apart).")
    ] = "contiguous",
    copy_overhead_us: Annotated[str | None, typer.Option(
        "--copy-overhead-us", metavar="US", help="Per-copy overhead in microseconds (default 2.3; 0 for none).")
    ] = None,
    bidir_factor: Annotated[str | None, typer.Option(
        "--bidir-factor", metavar="FRACTION", help="Per-direction rate factor while swap-ins and swap-outs overlap "
                                                   "(default 0.83; 1 = idle link).")] = None,
    sync_swap: Annotated[bool, typer.Option("--sync-swap", help="Both directions block the engine step (vLLM V0) "
                                                                "instead of an asynchronous swap-out.")] = False,
    sweep: Annotated[str | None, typer.Option("--sweep", metavar="LIST", help="Generated-token counts to tabulate "
                                                 "(default 1k,2k,5k,10k,20k,50k,100k).")] = None,
    units: UnitsOpt = "iec",
    fmt: FormatOpt = "table",
    explain: ExplainOpt = False,
    brief: BriefOpt = False,
    presets_dir: PresetsDirOpt = None,
) -> None:
    """Swap a preempted request to host DRAM and back, or recompute it: times, ratio, crossover, advice."""
    from kvplan.calc.costs import CostSettings
    from kvplan.calc.preemption import DEFAULT_SWEEP, plan_preemption
    from kvplan.present.preemption import present
    from kvplan.units import parse_size, parse_tokens

    fmt = check_output_options(fmt, units, brief)
    scenario = build_scenario(
        model=model, hardware=hardware, nodes=nodes, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep, kv_dtype=kv_dtype,
        weight_dtype=weight_dtype, engine=engine, prompt=prompt, decode=generated, decode_flag="--generated",
        mtp_layers=mtp_layers, max_model_len=max_model_len, block_size=block_size, host_link_gbs=host_link_gbs,
        presets_dir=presets_dir, gpu_memory_utilization=gpu_memory_utilization,
        mem_fraction_static=mem_fraction_static, kv_pool=kv_pool, activation_reserve=activation_reserve,
        runtime_reserve=runtime_reserve)
    given = {
        "mfu": optional(parse_fraction, mfu, "mfu"),
        "copy_overhead_us": optional(parse_float, copy_overhead_us, "--copy-overhead-us", "2.3"),
        "bidir_factor": optional(parse_fraction, bidir_factor, "bidir-factor"),
    }
    settings = CostSettings(compute_dtype=compute_dtype.strip().lower(),
                            layout=layout.strip().lower().replace("_", "-"),
                            sync_swap=sync_swap, **{k: v for k, v in given.items() if v is not None})
    plan = plan_preemption(
        scenario, settings, prefix_hit_tokens=parse_tokens(prefix_hit, "--prefix-hit", allow_zero=True),
        sweep=optional(parse_list, sweep, lambda g: parse_tokens(g, "--sweep"), "sweep") or DEFAULT_SWEEP,
        dram_bytes_per_node=optional(parse_size, dram, "--dram"))
    emit(present(plan), fmt, explain, units, brief)


def register(app: typer.Typer) -> None:
    app.command("compare-preemption", short_help="Swap a preempted request, or recompute it?")(
        compare_preemption)
