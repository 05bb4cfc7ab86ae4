"""`kvplan compare-preemption`: swap a preempted request over the host link, or recompute it."""

from __future__ import annotations

from pathlib import Path

import typer

from kvplan.commands.common import (
    SEED_HARDWARE,
    ExplainOpt,
    FormatOpt,
    PresetsDirOpt,
    check_format,
    extra_dirs,
    load_model_or_scenario,
    optional,
    parse_degree,
    parse_fraction,
    parse_list,
)
from kvplan.errors import KvplanError


def _parse_float(text: str, flag: str, example: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise KvplanError(f"{flag} {text!r} is not a number", f"give {flag} like {example}") from None
    if not math.isfinite(value):
        raise KvplanError(f"{flag} {text!r} is not a finite number", f"give {flag} like {example}")
    return value


def _parse_link(text: str) -> float:
    """Effective per-direction GB/s: a plain number (GB/s, 10^9 B/s) or a rate with its unit (50GB/s)."""
    from kvplan.units import parse_rate

    try:
        value = float(text)
    except ValueError:
        return parse_rate(text, "--pcie-gbps") / 1e9
    if not (value > 0 and value < float("inf")):
        raise KvplanError(f"--pcie-gbps {text!r} must be a positive number of GB/s", "give it like 50 or 50GB/s")
    return value


def compare_preemption(
    model: str | None = typer.Option(
        None, "--model", "-m",
        help="Preset id, preset .toml, HF config.json or model directory. Without it: the workload document's "
             "case, deepseek-r1 with an fp8 KV cache."),
    hardware: str = typer.Option(SEED_HARDWARE, "--hardware", "--gpu", help="Hardware preset id or .toml."),
    tp: str = typer.Option("8", "--tp", help="Tensor-parallel degree (GPUs holding and recomputing the request)."),
    kv_dtype: str | None = typer.Option(
        None, "--kv-dtype", help="KV cache dtype. Default fp8 without --model (the document's case), else bf16."),
    prompt: str = typer.Option("1k", "--prompt", help="Prompt tokens (1k = 1,000)."),
    generated: str = typer.Option("20k", "--generated", help="Tokens generated before the preemption."),
    prefix_hit: str = typer.Option("0", "--prefix-hit",
                                   help="Tokens recompute recovers from the prefix cache, in [0, prompt + generated)."),
    mfu: str | None = typer.Option(None, "--mfu", help="Prefill MFU in [0.01, 1]; default 0.45 (hardware.md §9)."),
    compute_dtype: str = typer.Option(
        "auto", "--compute-dtype",
        help="Peak used for recompute: auto (fp8 for fp8-weight models on fp8 GPUs, else bf16), bf16, fp8, fp4."),
    pcie_gbps: str | None = typer.Option(
        None, "--pcie-gbps",
        help="Pin the effective host-link rate per direction, GB/s (default: line rate x large-copy efficiency)."),
    block_tokens: str | None = typer.Option(
        None, "--block-tokens",
        help="Tokens per copied block (default: 64 for MLA models (FlashMLA), else 16 (vLLM))."),
    layout: str = typer.Option(
        "contiguous", "--layout",
        help="contiguous (vLLM >= 0.12 offloading: one copy per block across layers) or per-layer "
             "(old vLLM swap: one copy per layer per block, K and V apart)."),
    copy_overhead_us: str | None = typer.Option(
        None, "--copy-overhead-us", help="Per-copy overhead, us; default 2.3 (hardware.md §7); 0 for none."),
    bidir_factor: str | None = typer.Option(
        None, "--bidir-factor",
        help="Per-direction rate factor while swap-ins and swap-outs overlap; default 0.83 (vLLM blog 83.4/2/50); "
             "1 = idle link."),
    sync_swap: bool = typer.Option(False, "--sync-swap",
                                   help="Both directions block the engine step (vLLM V0) instead of async swap-out."),
    sweep: str | None = typer.Option(None, "--sweep", help="Generated-token counts to tabulate (default "
                                     "1k,2k,5k,10k,20k,50k,100k)."),
    fmt: str = FormatOpt,
    explain: bool = ExplainOpt,
    presets_dir: Path | None = PresetsDirOpt,
) -> None:
    """Swap a preempted request to host DRAM and back, or recompute it: times, ratio, crossover, advice."""
    from kvplan.calc.preemption import PreemptionRequest
    from kvplan.calc.preemption import compare_preemption as run
    from kvplan.output import render
    from kvplan.presets import load_hardware
    from kvplan.units import parse_tokens

    fmt = check_format(fmt)
    dirs = extra_dirs(presets_dir)
    spec, dtype = load_model_or_scenario(model, kv_dtype, dirs)
    hw = load_hardware(hardware, dirs)
    # Options left out take the calculator's sourced defaults (PreemptionRequest).
    given = {
        "mfu": optional(parse_fraction, mfu, "mfu"),
        "copy_overhead_us": optional(_parse_float, copy_overhead_us, "--copy-overhead-us", "2.3"),
        "bidir_factor": optional(parse_fraction, bidir_factor, "bidir-factor"),
        "sweep": optional(parse_list, sweep, lambda g: parse_tokens(g, "--sweep"), "sweep"),
    }
    request = PreemptionRequest(
        model=spec,
        hardware=hw,
        kv_dtype=dtype,
        tp=parse_degree(tp, "tp"),
        prompt_tokens=parse_tokens(prompt, "--prompt", allow_zero=True),
        generated_tokens=parse_tokens(generated, "--generated", allow_zero=True),
        prefix_hit_tokens=parse_tokens(prefix_hit, "--prefix-hit", allow_zero=True),
        compute_dtype=compute_dtype.strip().lower(),
        pcie_gb_s=optional(_parse_link, pcie_gbps),
        block_tokens=optional(parse_degree, block_tokens, "block-tokens"),
        layout=layout.strip().lower().replace("_", "-"),
        sync_swap=sync_swap,
        **{k: v for k, v in given.items() if v is not None},
    )
    render(run(request), fmt, explain)


def register(app: typer.Typer) -> None:
    app.command("compare-preemption")(compare_preemption)
