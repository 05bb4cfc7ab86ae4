"""`kvplan simulate`: a stream of reasoning requests through one replica's KV pool, event to event, and the
workload document's key metrics (peak KV per request, swap frequency, recomputation rate, TPOT)."""

from pathlib import Path
from typing import Annotated

import typer

from kvplan.commands.common import (
    AcceptOpt,
    DramOpt,
    HiCacheOpt,
    HiCacheRatioOpt,
    HiCacheSizeOpt,
    HiCacheWriteOpt,
    SloAttainmentOpt,
    SloPercentileOpt,
    SpeculativeOpt,
    TtftSloOpt,
    scenario_command,
)
from kvplan.commands.output import check_output_options, emit


@scenario_command(memory=("gpu_memory_utilization", "mem_fraction_static", "kv_pool", "max_num_batched_tokens",
                          "max_num_seqs", "moe_a2a_backend", "chunked_prefill_size", "max_prefill_tokens"))
def simulate(
    scenario_args: dict,
    output: dict,
    rate: Annotated[str | None, typer.Option("--rate", metavar="R", help="Poisson arrivals, requests/s.")] = None,
    users: Annotated[str | None, typer.Option("--users", metavar="N", help="A closed loop of N users (default 8 "
                                              "when neither --rate nor a timed --trace is given).")] = None,
    think: Annotated[str, typer.Option("--think", metavar="SECONDS", help="Closed loop: a user's pause between "
                                       "a finish and its next request (default 0).")] = "0",
    duration: Annotated[str | None, typer.Option("--duration", metavar="SECONDS", help="Submit no request at or "
                                                 "after this time (the run drains what was submitted).")] = None,
    requests: Annotated[str | None, typer.Option("--requests", metavar="N", help="Requests (default 1,000; with "
                                                 "--trace, its rows).")] = None,
    prompt_dist: Annotated[str | None, typer.Option(
        "--prompt-dist", "--prompt-len", metavar="DIST", help="fixed:N, uniform:A,B, lognormal:mean=M,p99=Q or "
        "lognormal:p50=M,p99=Q (default fixed at --prompt).")] = None,
    output_dist: Annotated[str | None, typer.Option(
        "--output-dist", "--output-len", metavar="DIST", help="The same for outputs (default fixed at --decode).")
    ] = None,
    max_len: Annotated[str | None, typer.Option("--max-len", metavar="TOKENS", help="Cap on prompt + output "
                                                "(default --max-model-len, else the model's limit).")] = None,
    workload: Annotated[str | None, typer.Option("--workload", metavar="ID|FILE", help="A workload preset: "
                                                 "r1-production, long-cot-bench, or a .toml.")] = None,
    trace: Annotated[Path | None, typer.Option("--trace", metavar="FILE", help="CSV or JSON lines of prompt_tokens,"
                                               "output_tokens[,arrival_s], or an Azure LLM inference, BurstGPT or "
                                               "Mooncake trace (docs/traces.md).")] = None,
    trace_format: Annotated[str | None, typer.Option("--trace-format", metavar="FORMAT", help="auto (default: "
                                                     "from the header or first record), kvplan, azure, burstgpt "
                                                     "or mooncake.")] = None,
    trace_speed: Annotated[str | None, typer.Option("--trace-speed", metavar="X", help="Divide the trace's "
                                                    "arrival times by X (2: twice the rate).")] = None,
    trace_rate: Annotated[str | None, typer.Option("--trace-rate", metavar="R", help="Scale the trace's arrival "
                                                   "times to a mean rate of R requests/s.")] = None,
    max_batch: Annotated[str | None, typer.Option("--max-batch", metavar="N", help="Most requests holding blocks "
                                                  "(default: the engine's max_num_seqs).")] = None,
    policy: Annotated[str, typer.Option("--policy", metavar="POLICY", help="swap, recompute (default: vLLM V1's "
                                        "only mode) or swap-then-recompute.")] = "recompute",
    victim: Annotated[str, typer.Option("--victim", metavar="RULE", help="newest (vLLM's), "
                                        "longest-first-protected or fewest-tokens.")] = "newest",
    seed: Annotated[str, typer.Option("--seed", metavar="N", help="Random seed (default 0).")] = "0",
    dram: DramOpt = None,
    offload_threshold: Annotated[str | None, typer.Option("--offload-threshold", metavar="F", help="Proactive "
                                                          "offload: above this share of the pool's blocks, move "
                                                          "requests' KV to host DRAM without stalling the batch "
                                                          "(e.g. 0.7).")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", metavar="FILE.png", help="Write the timeline (pool "
                                              "occupancy, running batch, swapped requests, DRAM) as a PNG "
                                              "(needs matplotlib).")] = None,
    shared_prefix: Annotated[str | None, typer.Option(
        "--shared-prefix", metavar="TOKENS", help="A system prompt every prompt starts with, cached once (prefix "
        "caching): one copy in the pool, and its prefill skipped after the first request.")] = None,
    compare: Annotated[str | None, typer.Option("--compare", metavar="VARIANTS", help="The same arrivals under "
                                                "other settings, side by side: comma-separated key=value "
                                                "(policy, victim, kv-dtype, engine, max-batch, dram, "
                                                "offload-threshold, hicache, kv-offloading-size; join keys "
                                                "with +), "
                                                "e.g. policy=swap,kv-dtype=bf16.")] = None,
    sweep_rate: Annotated[str | None, typer.Option("--sweep-rate", metavar="FROM:TO:POINTS", help="Poisson "
                                                   "arrivals at each of POINTS rates from FROM to TO requests/s: "
                                                   "the highest rate meeting --tpot-slo / --ttft-slo / "
                                                   "--max-recompute-rate."
                                                   )] = None,
    tpot_slo: Annotated[str | None, typer.Option("--tpot-slo", metavar="TIME", help="With --sweep-rate: the TPOT "
                                                 "target, at --slo-percentile unless pNN: leads it, e.g. 50ms."
                                                 )] = None,
    max_recompute_rate: Annotated[str | None, typer.Option("--max-recompute-rate", metavar="F", help="With "
                                                           "--sweep-rate: the most recomputed tokens per "
                                                           "generated token, e.g. 0.05.")] = None,
    ttft_slo: TtftSloOpt = None,
    slo_percentile: SloPercentileOpt = None,
    slo_attainment: SloAttainmentOpt = None,
    speculative: SpeculativeOpt = None,
    accept: AcceptOpt = None,
    hicache: HiCacheOpt = False,
    hicache_ratio: HiCacheRatioOpt = None,
    hicache_size: HiCacheSizeOpt = None,
    hicache_write_policy: HiCacheWriteOpt = None,
    async_scheduling: Annotated[bool | None, typer.Option(
        "--async-scheduling/--no-async-scheduling", help="vLLM's async scheduling (each step decided while the one "
        "before it runs), as vLLM's flag: on by default from v0.14.0, off before; from v0.12.0.")] = None,
    kv_offloading_size: Annotated[str | None, typer.Option(
        "--kv-offloading-size", metavar="GiB", help="vLLM's native CPU offloading connector, as vLLM's flag: its CPU "
        "buffer in GiB for the whole instance (all TP x PP ranks); from v0.14.0.")] = None,
    long_prefill_token_threshold: Annotated[str | None, typer.Option(
        "--long-prefill-token-threshold", metavar="TOKENS", help="vLLM's flag: cap each request's prefill chunk in a "
        "step at this many tokens (0: off, the default); from v0.31.0 not while it is the only request.")] = None,
    max_num_partial_prefills: Annotated[str | None, typer.Option(
        "--max-num-partial-prefills", metavar="N", help="vLLM's flag (through v0.26): V1 runs only 1, the "
        "default.")] = None,
    max_long_partial_prefills: Annotated[str | None, typer.Option(
        "--max-long-partial-prefills", metavar="N", help="vLLM's flag (through v0.26): V1 runs only 1, the "
        "default.")] = None,
    disable_overlap_schedule: Annotated[bool, typer.Option(
        "--disable-overlap-schedule", help="SGLang's flag: turn off its overlap scheduler (each batch decided while "
        "the one before it runs; on by default).")] = False,
    scheduler_recv_interval: Annotated[str | None, typer.Option(
        "--scheduler-recv-interval", metavar="N", help="SGLang's flag: poll for new requests every N scheduler "
        "iterations (default 1; a prefill batch makes the next iteration poll).")] = None,
) -> None:
    """Simulate a request stream through the KV pool: preemption, swap, recompute, TPOT, TTFT."""
    from kvplan.calc.simulate import plan_simulate, plan_sweep
    from kvplan.errors import KvplanError
    from kvplan.options.simulate import simulate_request
    from kvplan.present.simulate import present, present_compare, present_sweep, typed_inputs
    from kvplan.render.progress import LazyProgress

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    run = simulate_request(
        scenario_args, rate=rate, users=users, think=think, duration=duration, requests=requests,
        prompt_dist=prompt_dist, output_dist=output_dist, max_len=max_len, workload=workload, trace=trace,
        max_batch=max_batch, policy=policy, victim=victim, seed=seed, dram=dram, offload_threshold=offload_threshold,
        shared_prefix=shared_prefix, compare=compare, sweep_rate=sweep_rate, tpot_slo=tpot_slo,
        max_recompute_rate=max_recompute_rate, plot=plot, trace_format=trace_format, trace_speed=trace_speed,
        trace_rate=trace_rate, ttft_slo=ttft_slo, slo_percentile=slo_percentile, slo_attainment=slo_attainment,
        speculative=speculative, accept=accept, hicache=hicache, hicache_ratio=hicache_ratio,
        hicache_size=hicache_size, hicache_write_policy=hicache_write_policy, async_scheduling=async_scheduling,
        kv_offloading_size=kv_offloading_size, long_prefill_token_threshold=long_prefill_token_threshold,
        max_num_partial_prefills=max_num_partial_prefills, max_long_partial_prefills=max_long_partial_prefills,
        disable_overlap_schedule=disable_overlap_schedule, scheduler_recv_interval=scheduler_recv_interval)
    scenario, work, options, given = run.scenario, run.workload, run.options, run.given
    if run.sweep is not None:
        bar = LazyProgress(f"sweep of {len(run.sweep)} rates")
        try:
            sweep = plan_sweep(scenario, list(run.sweep), options, run.tpot_slo, run.max_recompute_rate, progress=bar,
                               slo=run.slo)
        finally:
            bar.close()
        inputs = typed_inputs(requests=run.requests, seed=run.seed, rate=None, users=None, think=run.think_s,
                              duration=run.duration_s, was_given={"requests": given["requests"], "seed": given["seed"]})
        emit(present_sweep(sweep, scenario, work, options, inputs), fmt, output["explain"], output["units"],
             output["brief"])
        return
    if run.variants is not None and fmt == "csv":
        raise KvplanError("--format csv is the per-request table of one run", "drop --compare, or use -f json")
    bar = LazyProgress(f"simulating {run.requests:,} requests")
    try:
        plan = plan_simulate(scenario, work, options, progress=bar)
    finally:
        bar.close()
    inputs = typed_inputs(requests=run.requests, seed=run.seed, rate=run.rate, users=work.users,
                          think=run.think_s, duration=run.duration_s, was_given=given)
    if run.variants is not None:
        runs = [("base", plan)]
        for label, _, v_scenario, v_options in run.variants:
            bar = LazyProgress(f"variant {label}")
            try:
                runs.append((label, plan_simulate(v_scenario, work, v_options, progress=bar)))
            finally:
                bar.close()
        emit(present_compare(runs, [(), *(pairs for _, pairs, _, _ in run.variants)], inputs), fmt,
             output["explain"], output["units"], output["brief"])
        return
    result = present(plan, inputs, per_request=fmt == "csv")
    if plot is not None:
        from kvplan.present.simulate import timeline_chart
        from kvplan.render.plot import write_chart_png

        write_chart_png(timeline_chart(plan), plot, result.headline)
    emit(result, fmt, output["explain"], output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("simulate", short_help="Simulate a request stream through the KV pool.")(simulate)
