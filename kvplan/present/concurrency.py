"""``kvplan concurrency`` presentation."""

from __future__ import annotations

from kvplan.calc.concurrency import SEED_BATCH_RANGE, SPARSIFICATION_CAVEAT, ConcurrencyPlan
from kvplan.present.common import scenario_data, spec_notes
from kvplan.render.result import Chart, Result, Table
from kvplan.specs.layers import MLA
from kvplan.specs.values import Count, Note, Tokens, given, note


def present(plan: ConcurrencyPlan) -> Result:
    s = plan.scenario
    notes = _notes(plan)
    tables = _tables(plan)
    unsupported = [c.dtype.value for c in plan.grid[0].cells if c.requests.value is None] if plan.grid else []
    if unsupported:
        reasons = {c.dtype.value: c.reason for c in plan.grid[0].cells if c.reason}
        notes.append("n/a: " + "; ".join(f"{d}: {reasons[d]}" for d in unsupported))
    if plan.engine_report is not None:
        tables.append(Table(plan.engine_report.title, ("figure", "value"), plan.engine_report.rows))

    data = _data(plan)
    brief = (("KV pool per GPU", plan.budget.kv_pool), ("KV per request per GPU", plan.request_bytes_per_gpu),
             ("max concurrent requests, deployment", plan.max_concurrency),
             ("max concurrent requests per replica", plan.max_concurrency_per_replica),
             (f"decode steps until {plan.overflow[0].batch.value} requests fill the pool",
              plan.overflow[0].decode_steps_until_full if plan.overflow[0].decode_steps_until_full.value is not None
              else note("never within {decode} steps", decode=Tokens(s.decode_tokens))))
    warnings = plan.engine_report.warnings if plan.engine_report is not None else ()
    return Result("concurrency", s.headline(), data, tuple(tables), tuple(notes), _assumptions(plan),
                  (_chart(plan),), brief, warnings)


def _notes(plan: ConcurrencyPlan) -> list[str | Note]:
    """The notes before the n/a reasons, in order: the batch ceiling, the overflow runs, the layout, the dtype, the
    engine and the pool's origin, the host tier."""
    s, b = plan.scenario, plan.budget
    model, par, hw, dtype = s.sized_model, s.parallelism, s.hardware, s.kv_dtype
    per_replica = plan.max_concurrency_per_replica.number()
    replicas, context = plan.replicas.number(), s.context_tokens
    notes: list[str | Note] = []
    _, seqs = s.engine_adapter.batch_limits_for(s)
    per_replica_v, prompt_v = plan.max_concurrency_per_replica, Tokens(s.prompt_tokens)
    if per_replica > seqs.number():   # the pool holds more than the engine runs at once
        notes.append(note("The pool holds {n} such requests per replica, but the engine runs at most {seqs} at once "
                          "(max_num_seqs / max_running_requests): the rest wait in its queue (raise the limit, e.g. "
                          "--max-num-seqs, to run them).", n=per_replica_v, seqs=seqs))
    lo, hi = SEED_BATCH_RANGE
    notes.append(
        note("Batch ceiling at {context} tokens: {n:d} request(s) per replica", context=Tokens(context),
             n=per_replica_v)
        + (note(" x {replicas:d} replicas = {total:d}", replicas=plan.replicas, total=plan.max_concurrency)
           if replicas > 1 else "")
        + f"; the workload document recommends batches of {lo}-{hi} for long reasoning requests"
        + (" (fits)." if per_replica >= hi else note(f" ({hi} does not fit; {{n:d}} does).", n=per_replica_v)))
    for run in plan.overflow:
        label = note("{batch} requests", batch=run.batch) + (" (what an engine admits on prompt cost)"
                                                             if run.admitted_on_prompt_cost else "")
        if run.decode_steps_until_full.value is None:
            notes.append(note("{label} decoding together from a {prompt}-token prompt never fill the pool within "
                              "{decode} decode steps.", label=label, prompt=prompt_v, decode=Tokens(s.decode_tokens)))
        else:
            notes.append(note(
                "{label} decoding together from a {prompt}-token prompt fill the pool after {steps} decode steps "
                "(~{full} at {tpot:ms:.3g} ms/token). Cap the batch, or offload to DRAM: offloading may wait until "
                "the pool is {threshold:.1%} full (the host link drains {drain:,.0f}x faster than the batch grows).",
                label=label, prompt=prompt_v, steps=run.decode_steps_until_full, full=run.seconds_until_full,
                tpot=run.tpot, threshold=run.offload_threshold_fraction, drain=run.drain_ratio))
    if model.uses(MLA) and par.tp > 1 and replicas == 1:
        notes.append(f"MLA latents are whole on every TP rank: TP={par.tp} holds {par.tp} copies of each request's "
                     f"KV; attention data-parallelism (--tp 1 --dp {par.tp} --ep {par.tp}) keeps one copy.")
    if model.uses(MLA) and par.tp == 1 and replicas > 1 and not par.ep and model.params_expert is not None:
        notes.append(f"Each of the {replicas} DP ranks holds a whole copy of the weights; add --ep {replicas} to "
                     "split the routed experts across them (attention data-parallelism with expert parallelism).")
    dtype_note = model.effective_kv_dtype_note(dtype)
    if dtype_note:
        notes.append(dtype_note)
    if s.token_budget is not None:
        notes.append(note("Token budget {budget} per request (what-if). ", budget=Tokens(s.token_budget))
                     + SPARSIFICATION_CAVEAT)
    if any(r.over_limit for r in plan.grid):
        notes.append(note("Rows marked '> max context' are longer than the {limit} tokens the engine serves.",
                          limit=Tokens(s.context_limit)))
    if s.engine == "neutral":
        notes.append("Engine-neutral accounting: block rounding per attention kind; --engine vllm or sglang "
                     "reproduces an engine's own figures.")
    if plan.engine_report is not None:
        notes.extend(plan.engine_report.notes)   # its warnings go in Result.warnings, printed first
    if plan.options.pool_origin is not None:
        notes.append(f"KV pool per GPU taken from {plan.options.pool_origin}, instead of kvplan's own budget.")
    if not b.given_pool:
        step = s.engine_adapter.boundary_note(hw)
        if step:
            notes.append(step)

    notes.append("The L2 host-DRAM tier is what offloading would add; it is off unless enabled "
                 f"({plan.host.enabled_by}).")
    return notes


def _tables(plan: ConcurrencyPlan) -> list[Table]:
    s, b, hw, host = plan.scenario, plan.budget, plan.scenario.hardware, plan.host
    context, prompt_v = s.context_tokens, Tokens(s.prompt_tokens)
    host_note = "if offloading is enabled"
    return [
        Table(f"Memory budget per GPU ({hw.name})", ("line", "bytes", "note"),
              tuple((label, value, note) for label, value, note in b.lines())),
        Table(note("Concurrency at {context} tokens ({prompt} prompt + {decode} decode)", context=Tokens(context),
                   prompt=prompt_v, decode=Tokens(s.decode_tokens)),
              ("figure", "value"), (
                  ("KV pool per GPU", b.kv_pool),
                  ("KV per request on the most loaded GPU (block-rounded)", plan.request_bytes_per_gpu),
                  ("block size (tokens)", plan.block),
                  ("max concurrent requests per replica", plan.max_concurrency_per_replica),
                  ("replicas (DP ranks)", plan.replicas),
                  ("max concurrent requests, deployment", plan.max_concurrency),
                  ("KV capacity per replica (tokens past every window)", plan.kv_capacity_tokens),
              )),
        Table("Concurrent requests (deployment) by context and KV dtype",
              ("context tokens",) + tuple(d.value for d in plan.dtypes) + ("note",),
              tuple((r.context,) + tuple(c.requests if c.requests.value is not None else "n/a" for c in r.cells)
                    + ("this request" if r.context.value == context else "> max context" if r.over_limit else "",)
                    for r in plan.grid), primary=True),
        Table("Tiers: where preempted or overflowing KV can go", ("tier", "capacity per GPU", "requests held",
                                                                  "note"), (
            ("L1 HBM KV pool", b.kv_pool, plan.max_concurrency_per_replica, "requests per replica"),
            ("L2 host DRAM", host.bytes_per_gpu, host.requests_per_node, "requests per node, " + host_note),
            ("L3 SSD", plan.ssd_bytes_per_gpu, plan.ssd_requests,
             "requests per node (--ssd per node)" if plan.ssd_bytes_per_gpu.value else "give --ssd SIZE per node"),
        )),
    ]


def _data(plan: ConcurrencyPlan) -> dict:
    s, b, host = plan.scenario, plan.budget, plan.host
    data = {
        **scenario_data(s),
        "budget": {"hbm_bytes": b.hbm, "utilization": b.fraction, "fraction_name": b.fraction_name,
                   "weights_bytes": b.weights, "activation_bytes": b.activation, "runtime_bytes": b.runtime,
                   "given_pool": b.given_pool},
        "kv_pool_bytes_per_gpu": b.kv_pool,
        "block_size": plan.block,
        "kv_bytes_per_request_per_gpu": plan.request_bytes_per_gpu,
        "max_concurrency": plan.max_concurrency,
        "max_concurrency_per_replica": plan.max_concurrency_per_replica,
        "replicas": plan.replicas,
        "kv_capacity_tokens": plan.kv_capacity_tokens,
        "kv_capacity_tokens_total": plan.kv_capacity_tokens_total,
        "by_context": [{"context_tokens": r.context, "over_context_limit": r.over_limit,
                        **{c.dtype.value: c.requests for c in r.cells}} for r in plan.grid],
        "overflow": [{"batch": r.batch, "admitted_on_prompt_cost": r.admitted_on_prompt_cost,
                      "decode_steps_until_full": r.decode_steps_until_full, "seconds_until_full": r.seconds_until_full,
                      "tpot_seconds": r.tpot, "offload_threshold_fraction": r.offload_threshold_fraction,
                      "evict_one_request_seconds": r.evict_one_request_seconds,
                      "growth_bytes_per_step": r.growth_bytes_per_step} for r in plan.overflow],
        "tpot_seconds": plan.tpot,
        "tiers": {"l2_dram_bytes_per_node": host.bytes_per_node, "l2_dram_bytes_per_gpu": host.bytes_per_gpu,
                  "l2_requests": host.requests_per_node, "l2_enabled_by": host.enabled_by,
                  "l3_ssd_bytes_per_gpu": plan.ssd_bytes_per_gpu, "l3_requests": plan.ssd_requests,
                  "offload_threshold_fraction": plan.overflow[-1].offload_threshold_fraction,
                  "d2h_bytes_per_second": plan.host_link},
        "shared_prefix_tokens": Count(s.shared_prefix_tokens, given("--shared-prefix")),
        "shared_prefix_copy_bytes": plan.shared_prefix_copy,
        "token_budget": Count(s.token_budget, given("--token-budget")) if s.token_budget else None,
        **(plan.engine_report.data if plan.engine_report is not None else {}),
    }
    if b.fraction_name == "mem_fraction_static":
        data["mem_fraction_static"] = b.fraction
    return data


def _chart(plan: ConcurrencyPlan) -> Chart:
    return Chart("Concurrent requests by context", "context tokens",
                  tuple(f"{r.context.number():,}" for r in plan.grid),
                  tuple((d.value, tuple(float(r.cells[i].requests.value or 0) for r in plan.grid))
                        for i, d in enumerate(plan.dtypes)
                        # a dtype the engine cannot run (n/a in the table) has no bars rather than bars of 0
                        if any(r.cells[i].requests.value is not None for r in plan.grid)),
                  "requests, deployment", legend="KV dtype", log_y=True)


def _assumptions(plan: ConcurrencyPlan) -> tuple:
    s = plan.scenario
    return (
        "Pool per GPU from the waterfall unless --kv-pool gives it; every GPU of a replica has the same pool.",
        "A request's KV on the most loaded GPU sets the fit (TP replication and the largest PP stage included).",
        f"Each layer's tokens are rounded up to whole {plan.block.value}-token blocks ({s.engine} rule).",
        "Sliding-window layers hold min(context, window) tokens in the neutral count; vLLM mode adds "
        "max_num_batched_tokens - 1 and a block.",
        "Overflow timing uses --tpot when given, else each batch's mean decode step from the step model "
        "(kvplan tpot).",
        "Host DRAM: the whole node's DRAM (or --dram), nothing kept back for the OS or the engine; a request parks "
        "one shard per GPU it spans on the node.",
    ) + spec_notes(s, s.draft)
