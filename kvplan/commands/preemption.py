"""`kvplan compare-preemption`: swap a preempted request over the host link, or recompute it."""

from typing import Annotated

import typer

from kvplan.commands.common import DramOpt, scenario_command
from kvplan.commands.output import check_output_options, emit

GeneratedOpt = Annotated[str | None, typer.Option(
    "--generated", "--decode", metavar="TOKENS",
    help="Tokens generated before the preemption (default 20k, shortened to fit the model's limit).")]


@scenario_command(memory=("gpu_memory_utilization", "mem_fraction_static", "kv_pool", "activation_reserve",
                          "runtime_reserve", "moe_a2a_backend"),
                  decode=("generated", GeneratedOpt, None), unused=("kv_pool",))
def compare_preemption(
    scenario_args: dict,
    output: dict,
    dram: DramOpt = None,
    prefix_hit: Annotated[str, typer.Option(
        "--prefix-hit", metavar="TOKENS", help="Tokens recompute recovers from the prefix cache, in "
                                               "[0, prompt + generated).")] = "0",
    mfu: Annotated[str | None, typer.Option("--mfu", metavar="FRACTION",
                                               help="Prefill MFU in [0.01, 1], compute-only (default: the GPU "
                                                    "preset's prefill_mfu).")] = None,
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
) -> None:
    """Swap a preempted request to host DRAM and back, or recompute it: times, ratio, crossover, advice."""
    from kvplan.calc.preemption import plan_preemption
    from kvplan.options.preemption import preemption_request, preemption_scenario
    from kvplan.present.preemption import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    scenario = preemption_scenario(scenario_args)
    r = preemption_request(dram=dram, prefix_hit=prefix_hit, mfu=mfu, compute_dtype=compute_dtype, layout=layout,
                           copy_overhead_us=copy_overhead_us, bidir_factor=bidir_factor, sync_swap=sync_swap,
                           sweep=sweep)
    plan = plan_preemption(scenario, r.settings, prefix_hit_tokens=r.prefix_hit_tokens, sweep=r.sweep,
                           dram_bytes_per_node=r.dram_bytes_per_node)
    emit(present(plan), fmt, output["explain"], output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("compare-preemption", short_help="Swap a preempted request, or recompute it?")(
        compare_preemption)
