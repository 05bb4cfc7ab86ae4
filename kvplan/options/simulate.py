"""``kvplan simulate``'s options -> the scenario, the workload, the engine's policies and the run's plan (one run,
a ``--compare`` of variants, or a ``--sweep-rate``), checked here for the command line and Python alike.

``simulate_request(scenario, rate=..., users=..., ...)`` takes the options as the command line gives them (text)
or as Python values (numbers, a ``Path``) and refuses what the command refuses with the same one-line messages
(two ways to make arrivals, a --think without a closed loop, a --max-len over the engine's limit, ...). The
command then only runs ``kvplan.calc.simulate``'s ``plan_simulate`` / ``plan_sweep`` on what it returns.

Layer: the workload readers (``kvplan.inputs.workload``: length distributions, presets, traces) and the simulator's
``SimOptions`` / ``parse_compare`` / ``parse_sweep`` are imported inside the function.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kvplan.errors import InputError, shorten
from kvplan.inputs.options import optional, parse_float, parse_plain_seconds

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.simulate import SimOptions
    from kvplan.calc.slo import SloTargets
    from kvplan.inputs.workload import Workload
    from kvplan.scenario import Scenario

DEFAULT_USERS = 8
DEFAULT_REQUESTS = 1000


@dataclass(frozen=True)
class SimulateRequest:
    """What ``kvplan simulate`` runs: the scenario, the workload (at the first sweep rate for a sweep), the
    simulator's options, and for a sweep its (rate, workload) points and targets, for a comparison its variants
    (label, (key, value) pairs, scenario, options). ``requests`` (the workload's), ``seed``, ``rate``,
    ``think_s``, ``duration_s`` and ``given`` (which run options were given) are for the presenter's inputs."""

    scenario: Scenario
    workload: Workload
    options: SimOptions
    requests: int
    seed: int
    rate: float | None
    think_s: float
    duration_s: float | None
    given: dict[str, bool]
    sweep: tuple[tuple[float, Workload], ...] | None = None
    tpot_slo: float | None = None
    max_recompute_rate: float | None = None
    ttft_slo: float | None = None        # --ttft-slo's seconds, at ttft_percentile
    ttft_percentile: int = 99
    slo: SloTargets | None = None        # a sweep's SLO targets (kvplan.calc.slo), parsed once from the options
    variants: tuple[tuple[str, tuple[tuple[str, str], ...], Scenario, SimOptions], ...] | None = None
    plot: Path | None = None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def simulate_request(scenario: Scenario | dict[str, Any], *, rate: Any = None, users: Any = None, think: Any = "0",
                     duration: Any = None, requests: Any = None, prompt_dist: str | None = None,
                     output_dist: str | None = None, max_len: Any = None, workload: str | None = None,
                     trace: str | Path | None = None, max_batch: Any = None, policy: str = "recompute",
                     victim: str = "newest", seed: Any = "0", dram: Any = None, offload_threshold: Any = None,
                     shared_prefix: Any = None, compare: str | None = None, sweep_rate: str | None = None,
                     tpot_slo: Any = None, max_recompute_rate: Any = None,
                     plot: str | Path | None = None, trace_format: str | None = None, trace_speed: Any = None,
                     trace_rate: Any = None, ttft_slo: Any = None, slo_percentile: Any = None,
                     slo_attainment: Any = None, speculative: str | None = None,
                     accept: str | None = None, hicache: Any = False, hicache_ratio: Any = None,
                     hicache_size: Any = None, hicache_write_policy: str | None = None,
                     async_scheduling: bool | None = None,
                     disable_overlap_schedule: bool | None = None,
                     kv_offloading_size: Any = None, long_prefill_token_threshold: Any = None,
                     max_num_partial_prefills: Any = None,
                     max_long_partial_prefills: Any = None,
                     scheduler_recv_interval: Any = None) -> SimulateRequest:
    """The checked run of ``kvplan simulate``'s options (module docstring). ``scenario``: a ``Scenario``, or the
    scenario options as the command line gives them (``kvplan.options.scenarios.build_scenario``'s keywords)."""
    import copy
    import dataclasses

    from kvplan.calc.simulate import SimOptions, parse_compare, parse_sweep
    from kvplan.calc.slo import parse_targets
    from kvplan.inputs import workload as wl
    from kvplan.inputs.traces import check_format
    from kvplan.inputs.units import parse_tokens
    from kvplan.options.command import size_bytes
    from kvplan.options.scenarios import build_scenario

    plot = Path(plot) if plot is not None else None
    if plot is not None:
        if compare is not None or sweep_rate is not None:
            raise InputError("--plot draws one run's timeline", "drop --compare / --sweep-rate, or --plot")
        if plot.suffix.lower() != ".png":
            raise InputError(f"--plot {plot} is not a .png file", "give a file name ending in .png")
    _check_trace_options(scenario, trace, trace_format, workload, prompt_dist, output_dist)
    args: dict[str, Any] | None = None
    if isinstance(scenario, dict):
        args = scenario if shared_prefix is None else {**scenario, "shared_prefix": shared_prefix}
        base = build_scenario(**args)
    else:
        base = scenario if shared_prefix is None else scenario.with_(shared_prefix_tokens=shared_prefix)
    spec = None
    if speculative is not None:   # tpot's option, parsed by the same function: K, the acceptance, the MTP layers
        from kvplan.calc.tpot import parse_accept
        from kvplan.options.command import speculative as speculative_option

        base, k, accept_text, accept_source = speculative_option(base, speculative, accept)
        spec = (k, parse_accept(accept_text), accept_source)
        if args is not None:      # --compare rebuilds a variant's scenario from these: with the MTP layers
            args = {**args, "mtp_layers": str(base.mtp_layers)}
    elif accept is not None:
        raise InputError("--accept is the acceptance of --speculative", "add --speculative mtp:K, or drop --accept")
    if rate is not None and users is not None:
        raise InputError("--rate and --users are two ways to make arrivals", "give one of them")
    if workload is not None and (prompt_dist or output_dist):
        raise InputError("--workload sets the length distributions", "drop --prompt-dist / --output-dist, or "
                                                                     "--workload")
    if base.decode_tokens == 0 and output_dist is None and workload is None:
        raise InputError("simulate needs at least one output token per request", "give --decode 1 or more, or "
                         "--output-dist")
    if sweep_rate is None and any(v is not None for v in (tpot_slo, max_recompute_rate, ttft_slo, slo_percentile,
                                                           slo_attainment)):
        raise InputError("--tpot-slo, --ttft-slo, --slo-percentile, --slo-attainment and --max-recompute-rate are "
                         "the targets of a --sweep-rate", "give --sweep-rate FROM:TO:POINTS, or drop the targets")
    if sweep_rate is not None:
        for flag, value in (("--rate", rate), ("--users", users), ("--compare", compare), ("--trace", trace)):
            if value is not None:
                raise InputError(f"--sweep-rate sets the arrivals itself, so {flag} does not combine with it",
                                 f"drop {flag}, or --sweep-rate")
    rate_v = optional(parse_float, rate, "--rate", "0.5")
    users_v = optional(parse_tokens, users, "--users")
    think_v = parse_plain_seconds(think, "--think", allow_zero=True)
    duration_v = optional(parse_plain_seconds, duration, "--duration")
    seed_v = parse_tokens(seed, "--seed", allow_zero=True)
    n_given = parse_tokens(requests, "--requests") if requests is not None else None
    if n_given is not None:   # before any work (the trace's reading included)
        wl.check_requests(n_given)
    speed_v = optional(parse_float, trace_speed, "--trace-speed", "2")
    trace_rate_v = optional(parse_float, trace_rate, "--trace-rate", "0.5")
    tr = wl.read_trace(Path(trace), check_format(trace_format)) if trace is not None else None
    if tr is not None and n_given is not None and n_given > len(tr.prompts):
        # a trace is replayed, never extended: more requests than its rows would be asked and not simulated
        raise InputError(f"--requests {n_given:,} is more than the {len(tr.prompts):,} requests of the trace "
                         f"{shorten(tr.path)}", f"give --requests {len(tr.prompts):,} or fewer (its first rows), or "
                                                "drop --requests to replay every row")
    if tr is not None and base.request_fitted:
        # the trace gives the lengths: the default request fitted into the limit is no part of the run, and the
        # first line does not say it was shortened (a copy: the caller's scenario is left as it is)
        base = copy.copy(base)
        object.__setattr__(base, "request_fitted", None)
    timed_trace = tr is not None and tr.arrivals is not None
    thinks = _text(think).strip() not in ("0", "0s")
    if thinks and (rate is not None or timed_trace or sweep_rate is not None):
        raise InputError("--think is the closed loop's pause between a user's requests; with --rate or a timed "
                         "--trace arrivals do not wait on completions", "drop --think, or give --users instead")
    sweep_rates = parse_sweep(sweep_rate) if sweep_rate is not None else None
    slo = parse_targets(ttft=ttft_slo, tpot=tpot_slo, percentile=slo_percentile, attainment=slo_attainment)
    mrr_v = optional(parse_float, max_recompute_rate, "--max-recompute-rate", "0.05")
    if mrr_v is not None and not 0 <= mrr_v <= 100:
        raise InputError(f"--max-recompute-rate {max_recompute_rate!r} is not in [0, 100]",
                         "give recomputed tokens per generated token, e.g. 0.05")
    if sweep_rates is not None:
        rate_v = sweep_rates[0]
    elif rate_v is None and users_v is None and not timed_trace:
        users_v = DEFAULT_USERS
    n = n_given if n_given is not None else (len(tr.prompts) if tr is not None else DEFAULT_REQUESTS)
    if sweep_rates is not None:
        wl.check_requests(n, len(sweep_rates), f"--sweep-rate's {len(sweep_rates)} rates")
    elif compare is not None:
        runs = len(parse_compare(compare)) + 1
        wl.check_requests(n, runs, f"--compare's {runs} runs (the base and each variant)")
    limit = base.context_limit
    cap = parse_tokens(max_len, "--max-len") if max_len is not None else (limit or wl.MAX_TOKENS)
    if limit is not None and cap > limit:
        raise InputError(f"--max-len {cap:,} is above the engine's limit of {limit:,} tokens",
                         "raise --max-model-len, or lower --max-len")
    sources: tuple[str, ...] = ()
    pmax = omax = None
    workload_id = None
    if workload is not None:
        preset = wl.load_workload(workload)
        workload_id = preset.id
        prompt_d, output_d, pmax, omax, sources = (preset.prompt, preset.output, preset.prompt_max,
                                                    preset.output_max, preset.sources)
    else:
        prompt_d = wl.parse_dist(prompt_dist or f"fixed:{base.prompt_tokens}", "--prompt-dist")
        output_d = wl.parse_dist(output_dist or f"fixed:{base.decode_tokens}", "--output-dist")
        if tr is None and prompt_dist is None and output_dist is None and base.prompt_tokens + base.decode_tokens > cap:
            raise InputError(f"the request ({base.prompt_tokens:,} + {base.decode_tokens:,} tokens) is "
                             f"longer than --max-len {cap:,}", "raise --max-len, or lower --prompt / --decode")

    def make(rate_r: float | None) -> Workload:
        made = wl.build(requests=n, seed=seed_v, prompt=prompt_d, output=output_d, max_len=cap, prompt_max=pmax,
                        output_max=omax, rate=rate_r, users=users_v, think_s=think_v, duration_s=duration_v,
                        trace=tr, sources=sources, name=workload_id, trace_speed=speed_v, trace_rate=trace_rate_v)
        said = _run_notes(tr, rate_r, users_v if users is not None else None, seed_v if _text(seed) != "0" else None,
                          prompt_d.kind == output_d.kind == "fixed")
        return dataclasses.replace(made, notes=made.notes + said) if said else made

    work = make(rate_v)
    if dram is not None and compare is None and offload_threshold is None and not hicache and (
            policy.strip().lower() == "recompute"):
        # recompute copies nothing out, and nothing else fills the host tier: the DRAM given would be printed, unused
        raise InputError("--dram sizes the host tier, which this run never uses: --policy recompute (the default) "
                         "copies nothing out", "give --policy swap or swap-then-recompute or --offload-threshold F "
                         "(--engine neutral), or --enable-hierarchical-cache (--engine sglang); or drop --dram")
    max_batch_v = optional(parse_tokens, max_batch, "--max-batch")
    _check_max_batch(max_batch_v, base, "--max-batch")
    options = SimOptions(policy=policy.strip().lower(), victim=victim.strip().lower(),
                         max_batch=max_batch_v,
                         dram_bytes_per_node=optional(size_bytes, dram, "--dram"),
                         offload_threshold=optional(parse_float, offload_threshold, "--offload-threshold", "0.7"),
                         speculative=spec[:2] if spec else None, accept_source=spec[2] if spec else None,
                         hicache=hicache_option(hicache, hicache_ratio, hicache_size, hicache_write_policy),
                         async_scheduling=async_scheduling,
                         disable_overlap_schedule=disable_overlap_schedule or None,
                         kv_offloading_bytes=offloading_bytes(kv_offloading_size),
                         long_prefill_token_threshold=optional(parse_tokens, long_prefill_token_threshold,
                                                               "--long-prefill-token-threshold", allow_zero=True),
                         max_num_partial_prefills=optional(parse_tokens, max_num_partial_prefills,
                                                           "--max-num-partial-prefills"),
                         max_long_partial_prefills=optional(parse_tokens, max_long_partial_prefills,
                                                            "--max-long-partial-prefills"),
                         scheduler_recv_interval=optional(parse_tokens, scheduler_recv_interval,
                                                          "--scheduler-recv-interval"))
    given = {"requests": requests is not None, "seed": _text(seed) != "0", "users": users is not None,
             "think": _text(think) != "0"}
    run = SimulateRequest(scenario=base, workload=work, options=options, requests=len(cast(Sized, work.prompts)),
                          seed=seed_v, rate=rate_v, think_s=think_v, duration_s=duration_v, given=given, plot=plot)
    if sweep_rates is not None:
        return dataclasses.replace(run, rate=None, sweep=tuple((r, make(r)) for r in sweep_rates),
                                   tpot_slo=slo.tpot, max_recompute_rate=mrr_v, ttft_slo=slo.ttft,
                                   ttft_percentile=slo.ttft_percentile, slo=slo)
    if compare is not None:
        run = dataclasses.replace(run, variants=tuple(_variant(base, args, options, pairs)
                                                      for pairs in parse_compare(compare)))
    return run


def _run_notes(tr: Any, rate: float | None, users: int | None, seed: int | None, fixed: bool) -> tuple[Any, ...]:
    """What the run options change that the workload line alone would hide: a timed trace's arrival times replaced
    by --users' closed loop or --rate's Poisson arrivals, and a --seed (``seed``: given, not the default) that draws
    nothing (the lengths fixed or the trace's, the arrivals the trace's or a closed loop's: no random draw)."""
    from kvplan.specs.values import Note

    out = []
    if tr is not None and tr.arrivals is not None and (users is not None or rate is not None):
        how, flag = ((f"a closed loop of {users:,} users", "--users") if users is not None
                     else (f"Poisson arrivals at {rate:g}/s", "--rate"))
        out.append(Note((f"The arrival times of the trace {shorten(tr.path)} are not used: {how} ({flag}) submits "
                         f"its requests instead; drop {flag} to replay the trace's times.",)))
    if seed is not None and (tr is not None or fixed) and rate is None:
        lengths = "come from the trace" if tr is not None else "are fixed"
        out.append(Note((f"--seed {seed} changes nothing here: the lengths {lengths} and the arrivals are not "
                         "drawn (the seed draws --prompt-dist, --output-dist or --workload lengths and --rate's "
                         "Poisson arrivals).",)))
    return tuple(out)


def offloading_bytes(size: Any) -> int | None:
    """vLLM's --kv-offloading-size (GiB for the whole instance, a positive number) in bytes, None when not given."""
    gib = optional(parse_float, size, "--kv-offloading-size", "64")
    if gib is None:
        return None
    if not gib > 0:
        raise InputError(f"--kv-offloading-size {gib:g} is not a positive size in GiB",
                         "give vLLM's CPU buffer for the whole instance, e.g. --kv-offloading-size 64")
    return int(gib * 2**30)


def hicache_option(enable: Any, ratio: Any = None, size: Any = None, policy: str | None = None) -> Any:
    """SGLang's HiCache settings from the options (``kvplan.engines.sglang_scheduler.HiCache``; None: off); its
    settings without ``--enable-hierarchical-cache`` are refused."""
    from kvplan.engines.sglang_scheduler import HiCache

    given = [flag for flag, v in (("--hicache-ratio", ratio), ("--hicache-size", size),
                                  ("--hicache-write-policy", policy)) if v is not None]
    if not enable:
        if given:
            raise InputError(f"{given[0]} sets up HiCache, which is off", "add --enable-hierarchical-cache, or drop "
                                                                           f"{given[0]}")
        return None
    return HiCache(write_policy=policy.strip().lower() if policy is not None else None,
                   ratio=optional(parse_float, ratio, "--hicache-ratio", "2"),
                   size_gb=optional(parse_float, size, "--hicache-size", "100"))


def _check_trace_options(scenario: Scenario | dict[str, Any], trace: Any, trace_format: Any, workload: Any,
                         prompt_dist: Any, output_dist: Any) -> None:
    """A trace gives every request's lengths, so the options that make lengths do not combine with it (each would
    be ignored); --trace-format names the format of a --trace."""
    if trace is None:
        if trace_format is not None:
            raise InputError("--trace-format names the format of a --trace", "give --trace FILE, or drop "
                                                                             "--trace-format")
        return
    if isinstance(scenario, dict):
        prompt, decode = scenario.get("prompt") is not None, scenario.get("decode") is not None
    else:
        prompt, decode = scenario.prompt_given, scenario.decode_given
    for flag, value in (("--workload", workload), ("--prompt-dist", prompt_dist), ("--output-dist", output_dist),
                        ("--prompt", prompt or None), ("--decode", decode or None)):
        if value is not None:
            raise InputError(f"--trace gives each request's prompt and output lengths, so {flag} does not combine "
                             "with it", f"drop {flag}, or --trace")


def _hicache_variant(value: str, base: Any) -> Any:
    """--compare hicache=on|off|POLICY: off (None), or HiCache with the release's default policy (on) or the one
    named, keeping the host pool the base run was given (--hicache-ratio / --hicache-size)."""
    import dataclasses

    from kvplan.engines.sglang_scheduler import WRITE_POLICIES

    low = value.strip().lower()
    if low == "off":
        return None
    if low != "on" and low not in WRITE_POLICIES:
        raise InputError(f"--compare hicache value {shorten(value)} is not on, off or an SGLang write policy",
                         "give hicache=on, hicache=off, hicache=write_through or hicache=write_through_selective")
    chosen = hicache_option(True, policy=None if low == "on" else low)
    return chosen if base is None else dataclasses.replace(base, write_policy=chosen.write_policy)


def _check_max_batch(max_batch: int | None, scenario: Scenario, flag: str, sep: str = " ") -> None:
    """A batch cap above a given --max-num-seqs is refused: the engine runs at most max_num_seqs requests, so the
    run would simulate a batch it never runs."""
    seqs = scenario.max_num_seqs
    if max_batch is not None and seqs is not None and max_batch > seqs:
        raise InputError(f"{flag}{sep}{max_batch} is more than --max-num-seqs {seqs:,}, the most requests the engine "
                         "runs at once", f"give one of them, or a {flag} no larger than --max-num-seqs")


def _variant(base: Scenario, args: dict[str, Any] | None, options: SimOptions,
             pairs: tuple[tuple[str, str], ...]) -> tuple[str, tuple[tuple[str, str], ...], Scenario, SimOptions]:
    """One --compare variant: its label, pairs, and the base's scenario and options with its keys replaced."""
    import dataclasses

    from kvplan.inputs.units import parse_size, parse_tokens
    from kvplan.options.scenarios import build_scenario

    scenario, changes, rebuilt = base, dict[str, Any](), dict[str, str]()
    for key, value in pairs:
        if key in ("kv-dtype", "engine"):    # the variant's scenario: the base's with these options replaced
            rebuilt[key] = value
        elif key == "policy":
            changes["policy"] = value.lower()
        elif key == "victim":
            changes["victim"] = value.lower()
        elif key == "max-batch":
            changes["max_batch"] = parse_tokens(value, "--compare max-batch")
        elif key == "dram":
            changes["dram_bytes_per_node"] = parse_size(value, "--compare dram")
        elif key == "hicache":              # on, off, or a write policy (on: the release's default)
            changes["hicache"] = _hicache_variant(value, options.hicache)
        elif key == "kv-offloading-size":   # GiB for the instance, or off
            changes["kv_offloading_bytes"] = None if value.strip().lower() == "off" else offloading_bytes(value)
        elif key == "offload-threshold":
            changes["offload_threshold"] = (None if value.lower() == "off"
                                            else parse_float(value, "--compare offload-threshold", "0.7"))
    if rebuilt:
        if args is not None:
            scenario = build_scenario(**{**args, **{k.replace("-", "_"): v for k, v in rebuilt.items()}})
        else:
            fields = {"kv-dtype": "kv_dtype_request", "engine": "engine"}
            scenario = base.with_(**{fields[k]: v for k, v in rebuilt.items()})
    if "max_batch" in changes:
        _check_max_batch(changes["max_batch"], scenario, "--compare max-batch", "=")
    return "+".join(v for _, v in pairs), pairs, scenario, dataclasses.replace(options, **changes)
