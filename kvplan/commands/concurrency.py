"""`kvplan concurrency`: memory budget, max concurrency, overflow timing and DRAM tiers."""

from __future__ import annotations

from pathlib import Path

import typer

from kvplan.commands.common import (
    SEED_HARDWARE,
    ContextsOpt,
    ExplainOpt,
    FormatOpt,
    PresetsDirOpt,
    UnitsOpt,
    check_format,
    check_units,
    extra_dirs,
    load_model_or_scenario,
    optional,
    parse_contexts,
    parse_degree,
    parse_fraction,
    parse_list,
    parse_seconds,
)
from kvplan.errors import KvplanError

ENGINES = ("neutral", "vllm", "sglang")


def concurrency(
    model: str | None = typer.Option(None, "--model", "-m", help="Preset id, preset .toml, config.json or "
                                        "model directory. Default: the workload document's deepseek-r1, fp8 KV."),
    hardware: str = typer.Option(SEED_HARDWARE, "--hardware", "-g", help="GPU preset id or .toml."),
    nodes: str = typer.Option("1", "--nodes", help="Nodes (each with the preset's GPUs per node)."),
    tp: str | None = typer.Option(None, "--tp", help="Tensor parallel (default: all GPUs of one node)."),
    pp: str = typer.Option("1", "--pp", help="Pipeline stages."),
    dp: str | None = typer.Option(None, "--dp", help="Data-parallel attention ranks (default: fill the nodes)."),
    ep: str | None = typer.Option(None, "--ep", help="Expert parallel degree for MoE weights."),
    kv_dtype: str | None = typer.Option(None, "--kv-dtype", help="KV dtype (default bf16; fp8 in the scenario)."),
    prompt: str = typer.Option("1k", "--prompt", help="Prompt tokens."),
    decode: str = typer.Option("30k", "--decode", help="Decode tokens."),
    gpu_memory_utilization: str | None = typer.Option(
        None, "--gpu-memory-utilization", help="Fraction of total HBM (vLLM's meaning; default 0.9)."),
    kv_pool: str | None = typer.Option(None, "--kv-pool", help="Plan from a known KV pool per GPU, e.g. 52.36GiB "
                                          "(vLLM's 'Available KV cache memory')."),
    max_model_len: str | None = typer.Option(None, "--max-model-len", help="vLLM max_model_len (default: the "
                                                "model's max_position_embeddings)."),
    max_num_batched_tokens: str | None = typer.Option(None, "--max-num-batched-tokens"),
    max_num_seqs: str | None = typer.Option(None, "--max-num-seqs"),
    block_size: str | None = typer.Option(None, "--block-size", help="Tokens per KV block (default 16; 64 MLA)."),
    engine: str = typer.Option("neutral", "--engine", help="neutral, vllm or sglang accounting."),
    mem_fraction_static: str | None = typer.Option(None, "--mem-fraction-static", help="SGLang's fraction."),
    activation_reserve: str | None = typer.Option(None, "--activation-reserve", help="Override, e.g. 2GiB."),
    runtime_reserve: str | None = typer.Option(None, "--runtime-reserve", help="Override, e.g. 1GiB."),
    dram: str | None = typer.Option(None, "--dram", help="Host DRAM per node given to KV, e.g. 1TB."),
    ssd: str | None = typer.Option(None, "--ssd", help="SSD per node given to KV (L3), e.g. 15TB."),
    batch: str = typer.Option("8", "--batch", help="Requests decoding together, for overflow timing."),
    tpot: str | None = typer.Option(None, "--tpot", help="Time per output token, e.g. 50ms."),
    shared_prefix: str = typer.Option("0", "--shared-prefix", help="System-prompt tokens shared by all requests."),
    mtp_layers: str = typer.Option("0", "--mtp-layers", help="MTP draft layers in the same pool (R1: 1)."),
    spec_tokens: str = typer.Option("0", "--spec-tokens", help="Speculative lookahead slots each request reserves."),
    draft_model: str | None = typer.Option(None, "--draft-model", help="A draft model preset sharing the pool."),
    token_budget: str | None = typer.Option(None, "--token-budget", help="What-if: cap each request's KV tokens."),
    contexts: str = ContextsOpt,
    dtypes: str = typer.Option("bf16,fp8,nvfp4", "--dtypes", help="KV dtypes for the table."),
    plot: Path | None = typer.Option(None, "--plot", help="Write concurrency vs context to a PNG (matplotlib)."),
    units: str = UnitsOpt,
    fmt: str = FormatOpt,
    explain: bool = ExplainOpt,
    presets_dir: Path | None = PresetsDirOpt,
) -> None:
    """How many long requests fit, when the pool overflows, and what DRAM, FP8 and budgets buy."""
    from kvplan.calc.budget import DEFAULT_GPU_MEMORY_UTILIZATION
    from kvplan.calc.concurrency import ConcurrencyRequest
    from kvplan.calc.concurrency import concurrency as run
    from kvplan.dtypes import parse_kv_dtype
    from kvplan.output import render
    from kvplan.parallel import Parallelism
    from kvplan.presets import load_hardware, load_model
    from kvplan.units import parse_size, parse_tokens

    fmt = check_format(fmt)
    if engine not in ENGINES:
        raise KvplanError(f"unknown engine {engine!r}", "choose neutral, vllm or sglang")
    for flag, value, needs in (("--mem-fraction-static", mem_fraction_static, "sglang"),
                               ("--max-model-len", max_model_len, "vllm")):
        if value is not None and engine != needs:
            raise KvplanError(f"{flag} applies only to --engine {needs}", f"add --engine {needs}, or drop {flag}")
    if gpu_memory_utilization is not None and engine == "sglang":
        raise KvplanError("--gpu-memory-utilization is vLLM's fraction; SGLang uses --mem-fraction-static",
                          "give --mem-fraction-static with --engine sglang")
    check_units(units)
    dirs = extra_dirs(presets_dir)
    spec, dtype = load_model_or_scenario(model, kv_dtype, dirs)
    hw = load_hardware(hardware, dirs)
    n_nodes = parse_degree(nodes, "nodes")
    gpus = n_nodes * hw.node.gpus_per_node
    tp_v = parse_degree(tp, "tp") if tp is not None else min(hw.node.gpus_per_node, gpus)
    pp_v = parse_degree(pp, "pp")
    if dp is not None:
        dp_v = parse_degree(dp, "dp")
    else:
        if gpus % (tp_v * pp_v):
            raise KvplanError(f"{gpus} GPUs do not split into TP={tp_v} x PP={pp_v} replicas",
                              "give --dp, or a TP x PP that divides the GPU count")
        dp_v = max(1, gpus // (tp_v * pp_v))
    par = Parallelism(tp=tp_v, pp=pp_v, dp=dp_v, ep=optional(parse_degree, ep, "ep"))
    request = ConcurrencyRequest(
        model=spec, hardware=hw, kv_dtype=dtype, parallelism=par, nodes=n_nodes,
        prompt_tokens=parse_tokens(prompt, "--prompt", allow_zero=True),
        decode_tokens=parse_tokens(decode, "--decode", allow_zero=True),
        gpu_memory_utilization=parse_fraction(gpu_memory_utilization, "gpu-memory-utilization")
        if gpu_memory_utilization is not None else DEFAULT_GPU_MEMORY_UTILIZATION,
        kv_pool_bytes=optional(parse_size, kv_pool, "--kv-pool"),
        max_model_len=optional(parse_tokens, max_model_len, "--max-model-len"),
        max_num_batched_tokens=optional(parse_tokens, max_num_batched_tokens, "--max-num-batched-tokens"),
        max_num_seqs=optional(parse_tokens, max_num_seqs, "--max-num-seqs"),
        block_size=optional(parse_degree, block_size, "block-size"),
        engine=engine,
        mem_fraction_static=optional(parse_fraction, mem_fraction_static, "mem-fraction-static"),
        activation_reserve_bytes=optional(parse_size, activation_reserve, "--activation-reserve"),
        runtime_reserve_bytes=optional(parse_size, runtime_reserve, "--runtime-reserve"),
        dram_bytes_per_node=optional(parse_size, dram, "--dram"),
        ssd_bytes_per_node=optional(parse_size, ssd, "--ssd"),
        batch=parse_tokens(batch, "--batch"),
        tpot_seconds=optional(parse_seconds, tpot, "tpot"),
        shared_prefix_tokens=parse_tokens(shared_prefix, "--shared-prefix", allow_zero=True),
        mtp_layers=parse_tokens(mtp_layers, "--mtp-layers", allow_zero=True),
        spec_tokens=parse_tokens(spec_tokens, "--spec-tokens", allow_zero=True),
        draft=optional(load_model, draft_model, dirs),
        token_budget=optional(parse_tokens, token_budget, "--token-budget"),
        contexts=parse_contexts(contexts),
        dtypes=parse_list(dtypes, parse_kv_dtype, "dtypes"),
        units=units,
    )
    result = run(request)
    if plot is not None:  # before rendering, so that a bad --plot fails without half an answer printed
        from kvplan.plot import write_chart_png

        write_chart_png(result.charts[0], plot)
    render(result, fmt, explain)


def register(app: typer.Typer) -> None:
    app.command("concurrency")(concurrency)
