"""`kvplan concurrency`: memory budget, max concurrency, overflow timing and DRAM tiers."""

from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.commands.common import ContextsOpt, DramOpt, scenario_command
from kvplan.commands.output import check_output_options, emit
from kvplan.inputs.options import DEFAULT_CONTEXTS_TEXT


@scenario_command(memory=("gpu_memory_utilization", "mem_fraction_static", "kv_pool", "max_num_batched_tokens",
                          "max_num_seqs", "activation_reserve", "runtime_reserve", "moe_a2a_backend"))
def concurrency(
    scenario_args: dict,
    output: dict,
    dram: DramOpt = None,
    ssd: Annotated[str | None, typer.Option("--ssd", metavar="SIZE",
                                            help="SSD per node given to KV (L3), e.g. 15TB.")] = None,
    batch: Annotated[str, typer.Option("--batch", metavar="N",
                                       help="Requests decoding together, for overflow timing (default 8).")] = "8",
    tpot: Annotated[str | None, typer.Option("--tpot", metavar="TIME", help="Time per output token, e.g. 50ms "
                                             "(default: each batch's decode step from the step model).")] = None,
    shared_prefix: Annotated[str | None, typer.Option(
        "--shared-prefix", metavar="TOKENS", help="System-prompt tokens shared by all requests (one pooled copy).")
    ] = None,
    spec_tokens: Annotated[str | None, typer.Option(
        "--spec-tokens", metavar="N", help="Speculative lookahead slots each request reserves.")] = None,
    draft_model: Annotated[str | None, typer.Option(
        "--draft-model", metavar="ID|FILE", help="A draft model whose KV and weights share the pool.")] = None,
    token_budget: Annotated[str | None, typer.Option(
        "--token-budget", metavar="TOKENS", help="What-if: cap each request's KV tokens (H2O / SnapKV-style).")
    ] = None,
    contexts: ContextsOpt = DEFAULT_CONTEXTS_TEXT,
    dtypes: Annotated[str | None, typer.Option(
        "--dtypes", metavar="LIST", help="KV dtypes for the table (default bf16,fp8, and nvfp4 on GPUs with FP4).")
    ] = None,
    from_log: Annotated[Path | None, typer.Option(
        "--from-log", metavar="FILE", help="Take the KV pool per GPU from a vLLM or SGLang start-up log.")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", metavar="FILE.png",
                                              help="Write concurrency vs context to a PNG (matplotlib).")] = None,
) -> None:
    """How many long requests fit, when the pool overflows, and what DRAM, FP8 and budgets buy."""
    from kvplan.calc.concurrency import plan_concurrency
    from kvplan.options.command import concurrency_options
    from kvplan.options.scenarios import build_scenario, pool_from_log
    from kvplan.present.concurrency import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    extra: dict[str, Any] = {"shared_prefix": shared_prefix, "spec_tokens": spec_tokens, "draft_model": draft_model,
             "token_budget": token_budget}
    origin, notes, warnings = None, tuple[str, ...](), tuple[str, ...]()
    if from_log is None:
        scenario = build_scenario(**scenario_args, **extra)
    else:
        scenario, origin, notes, warnings = pool_from_log(scenario_args, from_log, extra)
    options = concurrency_options(batch=batch, tpot=tpot, dram=dram, ssd=ssd, contexts=contexts, dtypes=dtypes,
                                  pool_origin=origin)
    result = present(plan_concurrency(scenario, options))
    if notes or warnings:   # how the deployment was read from the log
        from dataclasses import replace

        result = replace(result, warnings=warnings + result.warnings, notes=notes + result.notes)
    if plot is not None:  # before rendering, so that a bad --plot fails without half an answer printed
        from kvplan.render.plot import write_chart_png

        write_chart_png(result.charts[0], plot, result.headline)
    emit(result, fmt, output["explain"], output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("concurrency", short_help="How many long requests fit; overflow; tiers.")(concurrency)
