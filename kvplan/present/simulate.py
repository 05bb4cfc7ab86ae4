"""``kvplan simulate`` presentation: the workload document's four key metrics first, then the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.calc.simulate import (
    OVERLOAD,
    OVERLOAD_BEHIND,
    OVERLOAD_RISE,
    POLICY_SOURCE,
    VICTIM_SOURCE,
    Deployment,
    SimPlan,
    SweepPlan,
    above_capacity,
    falls_behind,
    overloaded,
    ttft_key,
)
from kvplan.present.common import scenario_data, spec_notes
from kvplan.render.result import Chart, Result, Table
from kvplan.specs.values import Count, Note, Number, Seconds, Value, default, given, note

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.inputs.workload import Workload

KEY_METRICS = (
    ("peak KV per request, p50 (per GPU)", "peak_kv_bytes_per_request_p50"),
    ("peak KV per request, p99", "peak_kv_bytes_per_request_p99"),
    ("peak KV per request, max", "peak_kv_bytes_per_request_max"),
    ("swap-outs (with offloads)", "swap_out_count"), ("proactive offloads", "offload_count"),
    ("swap-ins", "swap_in_count"),
    ("swap-outs per request", "swap_out_per_request"), ("swap-outs per second", "swap_out_per_second"),
    ("swap-ins per second", "swap_in_per_second"), ("bytes swapped out per GPU", "swapped_bytes"),
    ("prompt tokens served by the prefix cache", "prefix_hit_tokens"),
    ("recomputed tokens", "recomputed_tokens"), ("recomputation rate (of generated tokens)", "recompute_rate"),
    ("requests preempted at least once", "preempted_share"), ("preemptions", "preemptions"),
    ("TPOT p50", "tpot_seconds_p50"), ("TPOT p99", "tpot_seconds_p99"), ("TPOT mean", "tpot_seconds_mean"),
)
# a scheduler that mixes prefill chunks into steps (vLLM V1) adds these
MIXED_METRICS = (
    ("recompute tokens the prefix cache served", "recompute_prefix_hit_tokens"),
    ("recomputed tokens without those hits", "recomputed_tokens_without_prefix_hits"),
    ("steps with prefill chunks", "mixed_steps"),
    ("prefill tokens per such step, mean", "prefill_tokens_per_mixed_step"),
)
# SGLang's HiCache adds these
HICACHE_METRICS = (
    ("prefix tokens loaded back from HiCache", "hicache_loaded_tokens"),
    ("HiCache loads per GPU", "hicache_loaded_bytes"), ("HiCache load time", "hicache_load_seconds"),
    ("HiCache writes per GPU", "hicache_written_bytes"), ("HiCache host pool per GPU", "hicache_host_pool_bytes"),
    ("HiCache host memory used, peak", "hicache_peak_host_bytes"),
)
# vLLM's CPU offloading connector adds these
OFFLOAD_METRICS = (
    ("resumes that loaded from the CPU pool", "offload_loads"),
    ("tokens loaded back instead of recomputed", "offload_loaded_tokens"),
    ("CPU offloading loads per GPU", "offload_loaded_bytes"), ("CPU offloading load time", "offload_load_seconds"),
    ("CPU offloading stores per GPU", "offload_stored_bytes"),
    ("batch stalled for a victim's stores", "offload_flush_stall_seconds"),
    ("CPU pool per GPU", "offload_cpu_pool_bytes"), ("CPU pool used, peak", "offload_peak_cpu_bytes"),
    ("CPU pool stores refused", "offload_refused_stores"),
)
SERVICE = (
    ("requests finished", "requests_finished"), ("generated tokens", "generated_tokens"),
    ("simulated time", "simulated_seconds"), ("TTFT p50", "ttft_seconds_p50"), ("TTFT p99", "ttft_seconds_p99"),
    ("queueing delay p50", "queue_seconds_p50"), ("queueing delay p99", "queue_seconds_p99"),
    ("throughput, output tokens/s", "throughput_tokens_per_second"),
    ("throughput, requests/s", "throughput_requests_per_second"),
    ("most requests decoding at once", "peak_running_requests"), ("most KV blocks held", "peak_kv_blocks_used"),
    ("most swapped KV in host DRAM per GPU", "peak_dram_bytes_per_gpu"),
    ("batch stalled for prefills", "prefill_stall_seconds"), ("batch stalled for swap-outs", "swap_stall_seconds"),
    ("decode steps", "decode_steps"), ("events", "events"),
)
SETUP = (("block size (tokens)", "block_tokens"), ("one block, every layer, per GPU", "block_bytes"),
         ("KV pool per GPU", "kv_pool_bytes"), ("KV blocks", "kv_blocks"),
         ("shared prefix, blocks cached once", "shared_prefix_blocks"), ("admission watermark", "watermark_blocks"),
         ("max batch", "max_batch"),
         ("offload threshold (blocks)", "offload_threshold_blocks"),
         ("prefill chunk (max_num_batched_tokens)", "max_num_batched_tokens"),
         ("host link per direction", "host_link_bytes_per_second"), ("host DRAM per GPU", "dram_bytes_per_gpu"),
         ("decode step at batch 1, no cache", "step_seconds_batch_1_no_cache"))
PER_REQUEST = ("request", "arrival", "prompt", "output", "TTFT", "TPOT", "queue", "preemptions", "swap-outs",
               "recomputed", "peak KV", "finish")


ASSUMPTIONS = (
    "One replica (a TP x PP group): requests arrive at it alone; DP replicas would each see their share.",
    "Prefills and re-prefills run alone (chunked by max_num_batched_tokens), stalling the batch's decode; "
    "the prefill gives the first output token.",
    "Swap-outs hold the step until the copy lands (the blocks are free only then); swap-ins overlap the "
    "batch's decode. Each link direction is a FIFO queue at the bidirectional rate.",
    f"Defaults: policy recompute ({POLICY_SOURCE}); victim newest ({VICTIM_SOURCE}).",
    "Admission: swapped requests first, then the waiting queue in order; no admission in the instant of a "
    "preemption.",
)


ONE_REPLICA = ASSUMPTIONS[0]
# vLLM V1 (kvplan.engines.vllm_scheduler) replaces the prefill, swap and admission assumptions
MIXED_ASSUMPTIONS = (
    ASSUMPTIONS[0],
    "Prefills run in chunks inside the steps, with the decode batch, under max_num_batched_tokens (vLLM V1); a "
    "prompt's first token comes at the end of the step that completes it.",
    "Preemption recomputes (V1 has no swap space); a resumed request finds its blocks not yet evicted in the "
    "prefix cache.",
    "Admission: the running requests first, then the waiting queue in order while the token budget and free "
    "blocks allow (no watermark); none in a step that preempted.",
)


def _leading_text(n: str | Note) -> str:
    """A note's literal text up to its first typed value."""
    if isinstance(n, str):
        return n
    return n.parts[0] if n.parts and isinstance(n.parts[0], str) else ""


def _replicas(s, dep: Deployment | None) -> tuple[str, list[Note], tuple[str | Note, ...]]:
    """For a deployment of DP > 1 replicas (the plan's ``Deployment``): the headline's words, its notes (the
    routing) and the assumptions (one replica: nothing added, the assumptions as they are)."""
    if dep is None:
        return "", [], ASSUMPTIONS + spec_notes(s)
    each = note("{dp} DP replicas (TP x PP groups), each its own KV pool and engine, as one replica is simulated; "
                "requests reach each by the routing rule (notes), and no replica sees another's.", dp=dep.replicas)
    # the headline is text (Result.headline), so its one figure is put in here
    return (f"; {dep.replicas.number():,} replicas, round-robin", list(dep.notes),
            (each, *ASSUMPTIONS[1:]) + spec_notes(s))


def present(plan: SimPlan, inputs: dict, per_request: bool = False) -> Result:
    """``inputs``: the workload's and engine's settings as typed values (from the command)."""
    r, m = plan.run, plan.metrics
    s, o = r.scenario, r.options
    rules = r.scheduler or f"{o.policy}, victim {o.victim}"     # the engine's own scheduler, or the rule book's
    key = Table(f"The workload document's key metrics: {rules}", ("metric", "value"),
                tuple((label, m[name]) for label, name in KEY_METRICS + MIXED_METRICS + HICACHE_METRICS
                      + OFFLOAD_METRICS if name in m),
                primary=not per_request)
    extra = (("DP replicas", "replicas"), ("replicas given requests", "replicas_serving")) if "replicas" in m else ()
    service = Table("Service", ("figure", "value"), tuple(
        ("time prefill chunks added to steps" if r.mixed_prefill and name == "prefill_stall_seconds" else label,
         m[name]) for label, name in (*extra, *SERVICE)))
    setup = Table("The replica", ("figure", "value"), tuple((label, plan.setup[name]) for label, name in SETUP))
    tables = [key, service, setup]
    if per_request:
        tables.append(Table("Per request", PER_REQUEST + (("replica",) if r.replicas > 1 else ()), plan.per_request,
                            primary=True))
    chart, timeline = _timeline(plan)
    data = {**scenario_data(s), "workload": r.workload.describe, "policy": o.policy, "victim": o.victim,
            "inputs": inputs, "replica": plan.setup, **m, "overloaded": overloaded(m), "timeline": timeline}
    dp_head, dp_notes, assumptions = _replicas(s, plan.deployment)
    if r.mixed_prefill:
        assumptions = assumptions[:1] + MIXED_ASSUMPTIONS[1:] + assumptions[len(ASSUMPTIONS):]
    elif r.scheduler:    # the engine's scheduler: its notes give its rules in place of the rule book's
        assumptions = tuple(a for a in assumptions if a not in ASSUMPTIONS[1:])
    if o.speculative is not None:   # the acceptance against context: flat, or the user's profile
        from kvplan.calc.tpot import accept_assumption

        assumptions = (*assumptions, accept_assumption(o.speculative[1], o.accept_source))
    if o.speculative is not None:   # the setting as numbers (the notes and assumptions say it in words)
        data["speculative"] = {"spec_tokens": o.speculative[0],
                               "accept_profile": [{"context_tokens": c, "accept": a} for c, a in o.speculative[1]],
                               "accept_source": o.accept_source}
    if r.scheduler:
        data.update(scheduler=r.scheduler, preemption_cause=r.preemption_cause)
    # the scheduler's own note (its rules with sources) stands for the plan's short one (what --compare shows)
    said = any(str(n).startswith("Scheduler:") for n in r.scheduler_notes)
    own = [n for n in plan.notes if not (said and _leading_text(n).startswith("Scheduler:"))]
    notes: list[str | Note] = [f"Workload: {r.workload.describe}.", *dp_notes, *r.scheduler_notes, *own]
    notes += _workload_notes(r.workload)
    if m["preemptions"].value:
        notes.append(note("{n} preemptions" + (f" ({r.preemption_cause})" if r.scheduler else "")
                          + ": {swapped} swapped, {rate:.1%} of the generated tokens recomputed.",
                          n=m["preemptions"], swapped=m["swap_out_count"], rate=m["recompute_rate"])
                     if m["recompute_rate"].value is not None else "")
    else:
        notes.append("No request was preempted: the pool held every batch the engine admitted.")
    brief: tuple[tuple[str, Value], ...] = (
        ("TPOT p50", m["tpot_seconds_p50"]), ("TPOT p99", m["tpot_seconds_p99"]),
        ("recompute rate", m["recompute_rate"]), ("swap-outs/s", m["swap_out_per_second"]),
        ("throughput tokens/s", m["throughput_tokens_per_second"]))
    lead, warnings = overload_words(m)
    if warnings:   # --brief: the capacity first
        brief = (("sustained requests/s (overloaded)", m["sustained_requests_per_second"]), *brief)
    return Result("simulate", lead + s.headline(r.workload.lengths) + dp_head + f"; {rules}",
                  data, tuple(tables),
                  tuple(n for n in notes if n), assumptions, () if per_request else (chart,), brief, warnings,
                  warnings_first=bool(warnings))


def overload_words(m: dict) -> tuple[str, tuple[Note, ...]]:
    """An overloaded run (``overloaded`` on its metrics): the headline's lead, which says so, and the warning printed
    right under the headline with the arrival rate and the capacity estimate (typed values: the headline is text,
    which carries no figure); ("", ()) for a run that keeps up."""
    if not overloaded(m):
        return "", ()
    mid, end = m["waiting_at_mid_arrival"], m["waiting_at_last_arrival"]
    said: list[Note] = []
    if (end.value or 0) > (mid.value or 0):
        said.append(note("the waiting queue grew from {mid:,d} requests at the middle of the arrivals to {end:,d} at "
                         "the last one", mid=mid, end=end))
    if falls_behind(m):
        said.append(note("over the run's steady part {went:,d} requests finished while {came:,d} arrived (the "
                         "requests in the system grew, beyond the running batch's growth: a backlog waiting, "
                         "retracted or preempted)",
                         went=m["completions_steady_part"], came=m["arrivals_steady_part"]))
    bound = m.get("closed_form_capacity_requests_per_second") or m["sustained_requests_per_second"]
    if above_capacity(m):
        said.append(note("requests were offered at {rate:.3g}/s, more than 5% above the {cap:.3g}/s the pool-bound "
                         "batch sustains in closed form", rate=m["offered_rate_requests_per_second"], cap=bound))
    if not said:
        said.append(note("the waiting queue was longer at every look through the arrivals than at the one before"))
    # the capacity witness alone: the run's own sustained rate is not read (no queue grew), the closed form's stands
    cap = m["sustained_requests_per_second"] if m["sustained_requests_per_second"].value is not None else bound
    how = "its completions while requests waited" if cap is m["sustained_requests_per_second"] else "in closed form"
    warning = (note("Overloaded: requests arrive at {rate:.3g}/s over the second half of the arrivals, and the "
                    "deployment sustains {cap:.3g} requests/s (" + how + "): ",
                    rate=m["arrival_rate_second_half_requests_per_second"], cap=cap)
               + Note.join("; ", said)
               + note(", so TTFT and queueing grow with the run's length and are no steady state. Lower the rate "
                      "below {cap:.3g}/s, or add replicas.", cap=cap))
    return "OVERLOADED: arrivals outpace the service, capacity below; ", (warning,)


def timeline_chart(plan: SimPlan) -> Chart:
    return _timeline(plan)[0]


def _timeline(plan: SimPlan):
    """The plan's timeline as a chart (sparklines, or --plot) and as JSON rows. A chart's title and x labels are
    text (``Chart``), so their figures are put in here."""
    t = plan.timeline
    chart = Chart(f"Timeline over {t.span.number():,.0f} s ({t.slices.number()} slices, each the slice's peak)",
                  "s", tuple(f"{t0:.0f}" for t0 in t.starts),
                  (("pool occupancy %", t.occupancy_percent), ("running requests", t.running),
                   ("swapped requests", t.swapped), ("DRAM GiB per GPU", t.dram_gib_per_gpu)),
                  timeline=True)
    return chart, list(t.rows)


def typed_inputs(*, requests: int, seed: int, rate, users, think: float, duration, was_given: dict) -> dict:
    """The run's settings as typed inputs, each given or a default with its source."""

    def how(name: str, why: str):
        return given(f"--{name}") if was_given.get(name) else default(why)

    out: dict[str, Value] = {
        "requests": Count(requests, how("requests", "1,000 requests: kvplan's default, enough for a p99 over "
                                                    "10 requests")),
        "seed": Count(seed, how("seed", "seed 0"))}
    if rate is not None:
        out["rate_requests_per_second"] = Number(rate, given("--rate"))
    if users is not None:
        out["users"] = Count(users, how("users", "8 users: the workload document's batch of 2-8 long requests"))
        out["think_seconds"] = Seconds(think, how("think", "no think time"))
    if duration is not None:
        out["duration_seconds"] = Seconds(duration, given("--duration"))
    return out


COMPARE_METRICS = (
    ("recomputation rate", "recompute_rate"), ("requests preempted", "preempted_share"),
    ("preemptions", "preemptions"), ("swap-outs", "swap_out_count"), ("proactive offloads", "offload_count"),
    ("swap-outs per minute", "swap_out_per_minute"),
    ("bytes swapped out per GPU", "swapped_bytes"), ("TPOT p50", "tpot_seconds_p50"),
    ("TPOT p99", "tpot_seconds_p99"), ("TTFT p50", "ttft_seconds_p50"), ("TTFT p99", "ttft_seconds_p99"),
    ("throughput, output tokens/s", "throughput_tokens_per_second"), ("simulated time", "simulated_seconds"),
    ("peak KV per request, p99", "peak_kv_bytes_per_request_p99"), ("KV blocks", "kv_blocks"),
    ("most requests decoding at once", "peak_running_requests"),
)


def present_compare(runs: list[tuple[str, SimPlan]], settings: list, inputs: dict) -> Result:
    """``--compare``: the same requests and arrivals under each run's settings, one column per run (the first is
    the command line's own settings, ``base``); ``settings``: each run's (key, value) changes to the base."""
    base = runs[0][1].run
    s = base.scenario

    def figure(plan: SimPlan, name: str):
        return plan.metrics[name] if name in plan.metrics else plan.setup[name]

    rows = [("policy", *(p.run.options.policy for _, p in runs)),
            ("victim", *(p.run.options.victim for _, p in runs)),
            ("KV dtype", *(p.run.scenario.kv_dtype.value for _, p in runs)),
            ("max batch", *(p.setup["max_batch"] for _, p in runs))]
    if any(p.run.options.offload_threshold is not None for _, p in runs):
        rows.append(("offload threshold (blocks)", *(p.setup["offload_threshold_blocks"] for _, p in runs)))
    rows += [(label, *(figure(p, name) for _, p in runs)) for label, name in COMPARE_METRICS]
    table = Table("The same arrivals under each setting", ("figure", *(label for label, _ in runs)), tuple(rows),
                  primary=True)
    compare = [{"label": label, "changes": dict(changes), "policy": p.run.options.policy,
                "victim": p.run.options.victim, "kv_dtype": p.run.scenario.kv_dtype.value,
                "replica": p.setup, **p.metrics}
               for (label, p), changes in zip(runs, settings, strict=True)]
    data = {**scenario_data(s), "workload": base.workload.describe, "inputs": inputs, "compare": compare}
    notes: list[str | Note] = [
        f"Workload: {base.workload.describe}; every column simulates the same requests and arrival times.",
        "base: the command line's own settings; each other column changes only the keys it names."]
    dp_head, dp_notes, assumptions = _replicas(s, runs[0][1].deployment)
    notes += dp_notes
    for label, p in runs:
        notes += [f"{label}: " + n for n in p.notes]
    notes += _workload_notes(base.workload)
    brief = tuple((f"{label} TPOT p99", p.metrics["tpot_seconds_p99"]) for label, p in runs) + tuple(
        (f"{label} recompute rate", p.metrics["recompute_rate"]) for label, p in runs)
    return Result("simulate", s.headline(base.workload.lengths) + dp_head + f"; {len(runs)} settings compared",
                  data, (table,), tuple(notes), assumptions, (), brief)


SWEEP_COLUMNS = (("TPOT p50", "tpot_seconds_p50"), ("TPOT p99", "tpot_seconds_p99"),
                 ("recompute rate", "recompute_rate"), ("preempted", "preempted_share"),
                 ("swap-outs/min", "swap_out_per_minute"), ("TTFT p99", "ttft_seconds_p99"),
                 ("tokens/s", "throughput_tokens_per_second"))


def present_sweep(sweep: SweepPlan, s, work, options, inputs: dict) -> Result:
    """``--sweep-rate``: one row per arrival rate, its SLO attainment, whether it meets the targets (and, when not,
    the figure that decided: ``sweep_verdict``), and the goodput (the highest rate at which it and every lower rate
    meet them: ``kvplan.calc.slo.goodput``) in requests/s and output tokens/s."""
    rates, capacity, tgt = sweep.rate_values, sweep.capacity_value, sweep.targets
    first, last = rates[0], rates[-1]
    slo = sweep.slo
    words = slo.notes() if slo is not None else []     # the SLO model's targets in words (TPOT p99 <= 50 ms)
    tq = slo.tpot_percentile if slo is not None else 99
    q = sweep.ttft_percentile
    if "recompute_rate_at_most" in tgt:
        words.append(note("recompute rate <= {cap:g}", cap=tgt["recompute_rate_at_most"]))
    targets = Note.join(" and ", words)
    if "slo_attainment_at_least" in tgt:
        targets = targets + note(" with at least {a:.0%} of requests meeting the latency targets",
                                 a=tgt["slo_attainment_at_least"])
    columns: tuple[tuple[str, str], ...] = SWEEP_COLUMNS
    if tq != 99 and f"tpot_seconds_p{tq}_at_most" in tgt:   # the target's percentile beside p50 and p99
        columns = (*columns[:2], (f"TPOT p{tq}", f"tpot_seconds_p{tq}"), *columns[2:])
    if sweep.ttft_slo is not None and q != 99:    # the target's percentile beside the p99 the table always shows
        columns = (*columns[:-1], (f"TTFT p{q}", ttft_key(q)), columns[-1])
    if all("slo_attainment" in m for m in sweep.points) and "slo_attainment_at_least" in tgt:
        columns = (*columns, ("SLO attainment", "slo_attainment"))
    decided = sweep.decided_by or tuple("" if ok else ("overload" if over else "")
                                        for ok, over in zip(sweep.meets, sweep.overloaded, strict=True))
    rows = tuple((rate, *(m[name] for _, name in columns), "yes" if ok else (f"no ({why})" if why else "no"))
                 for rate, m, ok, why in zip(rates, sweep.points, sweep.meets, decided, strict=True))
    table = Table(f"Poisson arrivals at each rate: {options.policy}, victim {options.victim}",
                  ("requests/s", *(label for label, _ in columns), "meets"), rows, primary=True)
    points = [{"rate_requests_per_second": rate, "meets_targets": ok, "decided_by": why or None, "overloaded": over,
               **m}
              for rate, m, ok, why, over in zip(rates, sweep.points, sweep.meets, decided, sweep.overloaded,
                                                strict=True)]
    good = sweep.goodput
    tokens = good.tokens_per_second if good is not None else Number(None)
    data = {**scenario_data(s), "workload": work.describe, "policy": options.policy, "victim": options.victim,
            "inputs": inputs, "targets": tgt, "capacity_requests_per_second": capacity,
            "goodput_requests_per_second": capacity, "goodput_tokens_per_second": tokens,
            "sweep_processes": sweep.processes, "sweep": points}
    if capacity.value is None:
        verdict = note("No swept rate meets {targets}: the goodput is below {first:g} requests/s.", targets=targets,
                       first=first)
    elif capacity.value == last.value:
        verdict = note("Every swept rate meets {targets}: the goodput is at least {last:g} requests/s "
                       "({tok:,.0f} output tokens/s; sweep higher).", targets=targets, last=last, tok=tokens)
    else:
        verdict = note("Goodput: {cap:g} requests/s ({tok:,.0f} output tokens/s at the workload's mean output) meets "
                       "{targets}; the next rate does not (a swept rate, not interpolated).", cap=capacity, tok=tokens,
                       targets=targets)
    share, least = OVERLOAD
    looks, rise = OVERLOAD_RISE
    sigmas, ramp = OVERLOAD_BEHIND
    notes: list[str | Note] = [verdict, note(
        "Workload at each rate: the same {n} requests (seed {seed:d}); Poisson gaps scale as 1 / rate. A rate also "
        "fails when it overloads the deployment: the waiting queue grows, between the middle of the arrivals and "
        "the last one, by more than {share:.0%} of the requests (and more than {least:d}), or it is longer at each of "
        "{looks:d} looks through the arrivals than at the one before and grows by more than {rise:.0%} of them, or "
        "over the run's steady part (from the middle of the arrivals, or once the first half's requests had their "
        "p{ramp:d} time in system, to the last arrival) fewer requests finish than arrive, beyond the running batch's "
        "growth (a batch still filling is no backlog), by more than {sigmas:d} x sqrt(2 x those arrivals), the "
        "Poisson noise of a deployment that keeps up (more requests resolve a rate nearer the capacity).",
        n=sweep.requests, seed=inputs["seed"], share=share, least=least, looks=looks, rise=rise, sigmas=sigmas,
        ramp=ramp)]
    over = next(((rate, m) for rate, m, o in zip(rates, sweep.points, sweep.overloaded, strict=True) if o), None)
    if over is not None and "sustained_requests_per_second" in over[1]:
        notes.insert(2, note("Overloaded from {rate:g} requests/s: the arrivals outpace the service there; the "
                             "deployment sustains {cap:.3g} requests/s at that rate.", rate=over[0],
                             cap=over[1]["sustained_requests_per_second"]))
    b = sweep.burst   # a passing burst: say so
    warnings = [] if b is None else [note(
        "At {rate:g} requests/s the {n} requests arrive within {arrivals:,.0f} s, less than a mean request's "
        "{decode:,.0f} s decode: the run is a burst, not a steady state, so the capacity may be overstated; raise "
        "--requests", rate=b.rate, n=b.requests, arrivals=b.arrivals, decode=b.decode)]
    dp_head, dp_notes, assumptions = _replicas(s, sweep.deployment)
    notes += dp_notes
    notes += _workload_notes(work)
    # the headline is text (Result.headline), so its figures are put in here
    return Result("simulate", s.headline(work.lengths) + dp_head
                  + f"; rate sweep {first.number():g} .. {last.number():g} requests/s",
                  data, (table,), tuple(notes), assumptions, (),
                  ((("goodput requests/s, at least (every swept rate meets; sweep higher)", capacity)
                    if capacity.value is not None and capacity.value == last.value else
                    ("goodput requests/s", capacity)), ("goodput output tokens/s", tokens)), tuple(warnings))


def _workload_notes(work: Workload) -> list[str | Note]:
    """What the workload adds to the notes: the lengths its limit cut, a trace's facts, and where its figures come
    from."""
    notes: list[str | Note] = [work.cut] if work.cut is not None else []
    notes += work.notes   # a trace's facts: rows skipped or sorted, Mooncake's hash_ids (SGLang reuses them)
    if work.sources:
        notes.append("Workload sources: " + "; ".join(work.sources) + ".")
    return notes
