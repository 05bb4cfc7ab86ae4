"""`kvplan size`: bytes per token, by layer kind, at a set of contexts, and the peak per request."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.commands.common import (
    DEFAULT_CONTEXTS_TEXT,
    BlockSizeOpt,
    BriefOpt,
    ContextsOpt,
    DecodeOpt,
    DpOpt,
    EngineOpt,
    EpOpt,
    ExplainOpt,
    FormatOpt,
    GpusOpt,
    HardwareOpt,
    HostLinkOpt,
    KvDtypeOpt,
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
    extra_dirs,
    parse_contexts,
)

SEED_COMPARE = "deepseek-r1-seed-gqa"


def size(
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
    include_mtp: Annotated[bool, typer.Option("--include-mtp", hidden=True,
                                              help="Same as --mtp-layers with the checkpoint's own count.")] = False,
    max_model_len: MaxModelLenOpt = None,
    block_size: BlockSizeOpt = None,
    host_link_gbs: HostLinkOpt = None,
    contexts: ContextsOpt = DEFAULT_CONTEXTS_TEXT,
    compare: Annotated[str | None, typer.Option("--compare", metavar="ID|FILE",
                                                   help="Another model to show side by side (default: the workload "
                                                        "document's GQA worked example, when --model is not given).")
                       ] = None,
    units: UnitsOpt = "iec",
    fmt: FormatOpt = "table",
    explain: ExplainOpt = False,
    brief: BriefOpt = False,
    presets_dir: PresetsDirOpt = None,
) -> None:
    """Bytes per token, KV per request at each context, and the peak per request, whole model and per GPU."""
    from kvplan.calc.size import plan_size
    from kvplan.errors import KvplanError
    from kvplan.present.size import present
    from kvplan.presets import load_model

    fmt = check_output_options(fmt, units, brief)
    if include_mtp and mtp_layers is not None:
        raise KvplanError("--include-mtp and --mtp-layers both given", "give only --mtp-layers N")
    scenario = build_scenario(model=model, hardware=hardware, nodes=nodes, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep,
                              kv_dtype=kv_dtype, weight_dtype=weight_dtype, engine=engine, prompt=prompt,
                              decode=decode, mtp_layers=mtp_layers, max_model_len=max_model_len,
                              block_size=block_size, host_link_gbs=host_link_gbs, presets_dir=presets_dir)
    if include_mtp:
        scenario = scenario.with_(mtp_layers=scenario.model.mtp_layers)
    compare_ref = compare if compare is not None else (SEED_COMPARE if model is None else None)
    other = load_model(compare_ref, extra_dirs(presets_dir)) if compare_ref is not None else None
    plan = plan_size(scenario, parse_contexts(contexts), other)
    emit(present(plan), fmt, explain, units, brief)


def register(app: typer.Typer) -> None:
    app.command("size", short_help="KV bytes per token and per request, per GPU.")(size)
