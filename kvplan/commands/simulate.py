"""`kvplan simulate`: a stream of reasoning requests through one replica's KV pool, event to event, and the
workload document's key metrics (peak KV per request, swap frequency, recomputation rate, TPOT)."""

from pathlib import Path
from typing import Annotated

import typer

from kvplan.commands.common import (
    DramOpt,
    build_scenario,
    check_output_options,
    emit,
    parse_float,
    parse_seconds,
    scenario_command,
)

DEFAULT_USERS = 8
DEFAULT_REQUESTS = 1000


@scenario_command(memory=("gpu_memory_utilization", "kv_pool", "max_num_batched_tokens", "max_num_seqs"))
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
                                               "output_tokens[,arrival_s].")] = None,
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
                                                "(policy, victim, kv-dtype, max-batch, dram, "
                                                "offload-threshold; join keys with +), "
                                                "e.g. policy=swap,kv-dtype=bf16.")] = None,
    sweep_rate: Annotated[str | None, typer.Option("--sweep-rate", metavar="FROM:TO:POINTS", help="Poisson "
                                                   "arrivals at each of POINTS rates from FROM to TO requests/s: "
                                                   "the highest rate meeting --tpot-slo / --max-recompute-rate."
                                                   )] = None,
    tpot_slo: Annotated[str | None, typer.Option("--tpot-slo", metavar="TIME", help="With --sweep-rate: the TPOT "
                                                 "p99 target, e.g. 50ms.")] = None,
    max_recompute_rate: Annotated[str | None, typer.Option("--max-recompute-rate", metavar="F", help="With "
                                                           "--sweep-rate: the most recomputed tokens per "
                                                           "generated token, e.g. 0.05.")] = None,
) -> None:
    """Simulate a request stream through the KV pool: preemption, swap, recompute, TPOT, TTFT."""
    from kvplan.calc import workload as wl
    from kvplan.calc.simulate import SimOptions, parse_compare, parse_sweep, plan_simulate, plan_sweep
    from kvplan.errors import KvplanError
    from kvplan.inputs.units import parse_size, parse_tokens
    from kvplan.present.simulate import present, present_compare, present_sweep, typed_inputs
    from kvplan.render.progress import LazyProgress

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    if plot is not None:
        if compare is not None or sweep_rate is not None:
            raise KvplanError("--plot draws one run's timeline", "drop --compare / --sweep-rate, or --plot")
        if plot.suffix.lower() != ".png":
            raise KvplanError(f"--plot {plot} is not a .png file", "give a file name ending in .png")
    if shared_prefix is not None:
        scenario_args = {**scenario_args, "shared_prefix": shared_prefix}
    scenario = build_scenario(**scenario_args)
    if rate is not None and users is not None:
        raise KvplanError("--rate and --users are two ways to make arrivals", "give one of them")
    if workload is not None and (prompt_dist or output_dist):
        raise KvplanError("--workload sets the length distributions", "drop --prompt-dist / --output-dist, or "
                                                                      "--workload")
    if scenario.decode_tokens == 0 and output_dist is None and workload is None:
        raise KvplanError("simulate needs at least one output token per request", "give --decode 1 or more, or "
                          "--output-dist")
    if sweep_rate is None and (tpot_slo is not None or max_recompute_rate is not None):
        raise KvplanError("--tpot-slo and --max-recompute-rate are the targets of a --sweep-rate",
                          "give --sweep-rate FROM:TO:POINTS, or drop the targets")
    if sweep_rate is not None:
        for flag, value in (("--rate", rate), ("--users", users), ("--compare", compare), ("--trace", trace)):
            if value is not None:
                raise KvplanError(f"--sweep-rate sets the arrivals itself, so {flag} does not combine with it",
                                  f"drop {flag}, or --sweep-rate")
    rate_v = parse_float(rate, "--rate", "0.5") if rate is not None else None
    users_v = parse_tokens(users, "--users") if users is not None else None
    think_v = _seconds(think, "--think", allow_zero=True)
    duration_v = _seconds(duration, "--duration") if duration is not None else None
    seed_v = parse_tokens(seed, "--seed", allow_zero=True)
    tr = wl.read_trace(trace) if trace is not None else None
    timed_trace = tr is not None and tr.arrivals is not None
    if think.strip() not in ("0", "0s") and (rate is not None or timed_trace or sweep_rate is not None):
        raise KvplanError("--think is the closed loop's pause between a user's requests; with --rate or a timed "
                          "--trace arrivals do not wait on completions", "drop --think, or give --users instead")
    sweep_rates = parse_sweep(sweep_rate) if sweep_rate is not None else None
    slo_v = parse_seconds(tpot_slo, "tpot-slo") if tpot_slo is not None else None
    mrr_v = parse_float(max_recompute_rate, "--max-recompute-rate", "0.05") if max_recompute_rate is not None else None
    if mrr_v is not None and not 0 <= mrr_v <= 100:
        raise KvplanError(f"--max-recompute-rate {max_recompute_rate!r} is not in [0, 100]",
                          "give recomputed tokens per generated token, e.g. 0.05")
    if sweep_rates is not None:
        rate_v = sweep_rates[0]
    elif rate_v is None and users_v is None and not timed_trace:
        users_v = DEFAULT_USERS
    n = parse_tokens(requests, "--requests") if requests is not None else (
        len(tr.prompts) if tr is not None else DEFAULT_REQUESTS)
    limit = scenario.context_limit
    cap = parse_tokens(max_len, "--max-len") if max_len is not None else (limit or wl.MAX_TOKENS)
    if limit is not None and cap > limit:
        raise KvplanError(f"--max-len {cap:,} is above the engine's limit of {limit:,} tokens",
                          "raise --max-model-len, or lower --max-len")
    sources: tuple[str, ...] = ()
    pmax = omax = workload_id = None
    if workload is not None:
        preset = wl.load_workload(workload)
        workload_id = preset.id
        prompt_d, output_d, pmax, omax, sources = (preset.prompt, preset.output, preset.prompt_max,
                                                    preset.output_max, preset.sources)
    else:
        prompt_d = wl.parse_dist(prompt_dist or f"fixed:{scenario.prompt_tokens}", "--prompt-dist")
        output_d = wl.parse_dist(output_dist or f"fixed:{scenario.decode_tokens}", "--output-dist")
        if prompt_dist is None and output_dist is None and scenario.prompt_tokens + scenario.decode_tokens > cap:
            raise KvplanError(f"the request ({scenario.prompt_tokens:,} + {scenario.decode_tokens:,} tokens) is "
                              f"longer than --max-len {cap:,}", "raise --max-len, or lower --prompt / --decode")
    def make(rate_r):
        return wl.build(requests=n, seed=seed_v, prompt=prompt_d, output=output_d, max_len=cap, prompt_max=pmax,
                        output_max=omax, rate=rate_r, users=users_v, think_s=think_v, duration_s=duration_v,
                        trace=tr, sources=sources, name=workload_id)

    work = make(rate_v)
    options = SimOptions(policy=policy.strip().lower(), victim=victim.strip().lower(),
                         max_batch=parse_tokens(max_batch, "--max-batch") if max_batch is not None else None,
                         dram_bytes_per_node=parse_size(dram, "--dram") if dram is not None else None,
                         offload_threshold=parse_float(offload_threshold, "--offload-threshold", "0.7")
                         if offload_threshold is not None else None)
    if sweep_rates is not None:
        bar = LazyProgress(f"sweep of {len(sweep_rates)} rates")
        try:
            sweep = plan_sweep(scenario, [(r, make(r)) for r in sweep_rates], options, slo_v, mrr_v, progress=bar)
        finally:
            bar.close()
        inputs = typed_inputs(requests=len(work.prompts), seed=seed_v, rate=None, users=None, think=think_v,
                              duration=duration_v, was_given={"requests": requests is not None, "seed": seed != "0"})
        emit(present_sweep(sweep, scenario, work, options, inputs), fmt, output["explain"], output["units"],
             output["brief"])
        return
    variants = parse_compare(compare) if compare is not None else None
    if variants is not None and fmt == "csv":
        raise KvplanError("--format csv is the per-request table of one run", "drop --compare, or use -f json")
    bar = LazyProgress(f"simulating {len(work.prompts):,} requests")
    try:
        plan = plan_simulate(scenario, work, options, progress=bar)
    finally:
        bar.close()
    inputs = typed_inputs(requests=len(work.prompts), seed=seed_v, rate=rate_v, users=work.users, think=think_v,
                          duration=duration_v, was_given={"requests": requests is not None, "seed": seed != "0",
                                                          "users": users is not None, "think": think != "0"})
    if variants is not None:
        runs = [("base", plan)]
        for pairs in variants:
            v_scenario, v_options = _variant(scenario_args, options, pairs)
            bar = LazyProgress(f"variant {'+'.join(v for _, v in pairs)}")
            try:
                runs.append(("+".join(v for _, v in pairs), plan_simulate(v_scenario, work, v_options, progress=bar)))
            finally:
                bar.close()
        emit(present_compare(runs, [(), *variants], inputs), fmt, output["explain"], output["units"], output["brief"])
        return
    if plot is not None:
        from kvplan.present.simulate import timeline_chart
        from kvplan.render.plot import write_chart_png

        write_chart_png(timeline_chart(plan), plot)
    emit(present(plan, inputs, per_request=fmt == "csv"), fmt, output["explain"], output["units"], output["brief"])


def _variant(scenario_args: dict, options, pairs: tuple[tuple[str, str], ...]):
    """The scenario and options of one --compare variant: the base's with the variant's keys replaced."""
    import dataclasses

    from kvplan.inputs.units import parse_size, parse_tokens

    args, changes = dict(scenario_args), {}
    for key, value in pairs:
        if key == "kv-dtype":
            args["kv_dtype"] = value
        elif key == "policy":
            changes["policy"] = value.lower()
        elif key == "victim":
            changes["victim"] = value.lower()
        elif key == "max-batch":
            changes["max_batch"] = parse_tokens(value, "--compare max-batch")
        elif key == "dram":
            changes["dram_bytes_per_node"] = parse_size(value, "--compare dram")
        elif key == "offload-threshold":
            changes["offload_threshold"] = (None if value.lower() == "off"
                                            else parse_float(value, "--compare offload-threshold", "0.7"))
    return build_scenario(**args), dataclasses.replace(options, **changes)


def _seconds(text: str, flag: str, allow_zero: bool = False) -> float:
    from kvplan.errors import KvplanError

    value = parse_float(text.strip().removesuffix("s"), flag, "600")
    if value < 0 or (value == 0 and not allow_zero) or value > 1e9:
        raise KvplanError(f"{flag} {text!r} is not a time in {'[0' if allow_zero else '(0'}, 1e9] s",
                          f"give {flag} in seconds, e.g. 600")
    return value


def register(app: typer.Typer) -> None:
    app.command("simulate", short_help="Simulate a request stream through the KV pool.")(simulate)
