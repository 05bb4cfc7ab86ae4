"""``kvplan concurrency``: the KV pool, how many long requests fit, when the pool overflows, and what a DRAM
tier, FP8 and a token budget buy.

Definitions (the JSON contract in the README repeats them):

* a *replica* is one TP x PP group serving its own requests; DP ranks (attention data-parallel ranks or
  plain replicas) multiply the replicas;
* ``max_concurrency``: whole requests at the request's context (prompt + decode) over the whole deployment;
  ``max_concurrency_per_replica`` for one replica;
* ``kv_capacity_tokens``: tokens one replica's pool holds past every window (pool / per-GPU bytes per token,
  rounded down to blocks); ``kv_capacity_tokens_total`` for the deployment.

``plan_concurrency(scenario, options)`` returns a ``ConcurrencyPlan``; ``kvplan.present.concurrency`` shows it.
The pool, per-request bytes, admission, overflow and host tier come from ``kvplan.calc.capacity``, the host
link from ``kvplan.calc.costs``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.calc import capacity, costs, kv
from kvplan.engines.base import EngineReport
from kvplan.engines.budget import Budget
from kvplan.errors import KvplanError
from kvplan.scenario import Scenario
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.values import Bytes, Count, Fraction, Rate, Ratio, Seconds, Tokens, default, derived, given

# The workload document's batch-size recommendation for long reasoning requests.
SEED_BATCH_RANGE = (2, 8)
DEFAULT_BATCH = 8

# Per-token decode time used for overflow timing when --tpot is not given: DeepSeek's production V3/R1
# decode served "20-22 tokens per second" per user (deepseek-ai/open-infra-index, "Day 6" inference system
# overview), i.e. ~50 ms/token.
DEFAULT_TPOT_SECONDS = 0.05
TPOT_SOURCE = ("DeepSeek V3/R1 production: 20-22 tok/s per user -> ~50 ms/token "
               "(github.com/deepseek-ai/open-infra-index, "
               "Day 6 inference system overview)")

SPARSIFICATION_CAVEAT = ("H2O / SnapKV-style budgets keep tokens by attention score, but a reasoning step may "
                         "refer to any distant conclusion; the workload document prefers FP8 over aggressive "
                         "sparsification, and low budgets can lengthen the chains they shorten (arXiv 2512.12008).")


def default_dtypes(hw) -> tuple[KVDtype, ...]:
    """bf16 and fp8 everywhere; nvfp4 only where the GPU has FP4 tensor cores (Blackwell)."""
    return (KVDtype.BF16, KVDtype.FP8) + ((KVDtype.NVFP4,) if "fp4" in hw.dense_tflops else ())


@dataclass(frozen=True)
class ConcurrencyOptions:
    """`kvplan concurrency`'s own inputs beyond the scenario (checked here: the CLI and Python refuse alike)."""

    batch: int = DEFAULT_BATCH
    tpot_seconds: float | None = None
    dram_bytes_per_node: int | None = None
    ssd_bytes_per_node: int | None = None
    contexts: tuple[int, ...] = kv.DEFAULT_CONTEXTS
    dtypes: tuple[KVDtype, ...] | None = None   # None: default_dtypes(hardware)
    pool_origin: str | None = None   # the scenario's given pool came from here (e.g. "the start-up log X, line N")

    def __post_init__(self) -> None:
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or not 1 <= self.batch <= 1_000_000:
            raise KvplanError(f"--batch {self.batch!r} is not a whole number in 1 .. 1,000,000",
                              "give the number of requests decoding together")
        for name in ("dram_bytes_per_node", "ssd_bytes_per_node"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                raise KvplanError(f"{name} {v!r} is not a positive number of bytes", "give a size like 1TB")
        if not self.contexts:
            raise KvplanError("no contexts to tabulate", "give --contexts as a comma-separated list")


@dataclass(frozen=True)
class GridCell:
    """How many requests fit at one context in one KV dtype (None, with the reason, when none can)."""

    dtype: KVDtype
    requests: Count          # None when the model cannot store this dtype
    reason: str              # why the cell is empty ("" otherwise)


@dataclass(frozen=True)
class GridRow:
    """One context's row of the dtype grid."""

    context: Tokens
    cells: tuple[GridCell, ...]
    over_limit: bool


@dataclass(frozen=True)
class OverflowRun:
    """A batch decoding past the pool: when it fills, and what offloading or evicting then costs."""

    batch: Count
    tpot: Seconds
    admitted_on_prompt_cost: bool
    decode_steps_until_full: Count     # None: never within the decode
    seconds_until_full: Seconds
    offload_threshold_fraction: Fraction
    evict_one_request_seconds: Seconds
    growth_bytes_per_step: Bytes
    # how many times faster the host link drains the pool than the batch grows it
    drain_ratio: Ratio


@dataclass(frozen=True)
class ConcurrencyPlan:
    """`kvplan concurrency`'s plan: the pool, the per-request bytes, the fit, the dtype grid, overflow, tiers."""

    scenario: Scenario
    options: ConcurrencyOptions
    budget: Budget
    block: Tokens
    request_bytes_per_gpu: Bytes
    shared_prefix_copy: Bytes
    max_concurrency_per_replica: Count
    replicas: Count
    max_concurrency: Count
    kv_capacity_tokens: Tokens
    kv_capacity_tokens_total: Tokens
    dtypes: tuple[KVDtype, ...]
    grid: tuple[GridRow, ...]
    tpot: Seconds
    host_link: Rate
    overflow: tuple[OverflowRun, ...]
    host: capacity.HostTier
    ssd_bytes_per_gpu: Bytes
    ssd_requests: Count
    engine_report: EngineReport | None


def cohort_tpot(scenario: Scenario, step_model, batch: int, steps: int) -> Seconds:
    """The mean decode step of ``batch`` requests decoding together from the prompt for ``steps`` steps, from the
    step model (kvplan.calc.costs)."""
    mean = step_model.cohort_mean(batch, scenario.prompt_tokens, steps)
    return Seconds(mean, derived("mean decode step of the batch over its steps (the step model, kvplan tpot)",
                                 f"batch {batch}, steps 0..{steps:,}: {mean * 1e3:.3f} ms"))


def overflow_run(scenario: Scenario, batch: int, pool: int, shared_copy: int, tpot: Seconds | None, link: Rate,
                 admitted: bool = False, step_model=None) -> OverflowRun:
    """Steps until ``batch`` requests fill the pool, and the offload threshold that keeps it from overflowing:
    evicting one request at the overflow context takes bytes / D2H rate, during which the batch keeps growing by
    batch x bytes per token per step. ``tpot`` None: the step model's mean step for this batch."""
    model, par, dtype = scenario.sized_model, scenario.parallelism, scenario.kv_dtype
    step = capacity.first_full_step(scenario, batch, pool, shared_copy)
    at = step if step is not None else scenario.decode_tokens
    if tpot is None:
        tpot = cohort_tpot(scenario, step_model, batch, at)
    victim = capacity.request_bytes(scenario, scenario.prompt_tokens + at)
    rate, t = link.number(), tpot.number()
    evict = victim / rate
    marginal = kv.kv_bytes_per_token_per_gpu(model, dtype, par).value
    growth = batch * marginal
    threshold = max(0.0, 1 - growth * (evict / t) / pool) if pool > 0 else 0.0
    steps_v = Count(step, derived("first decode step t with batch x request bytes(prompt + t) + shared copy > pool "
                                  "(bisection over t)", f"batch {batch}, pool {pool:,} B -> step {step}"
                                  if step is not None else f"batch {batch} never fills {pool:,} B"))
    secs = Seconds(None if step is None else step * t,
                   derived("steps x TPOT", f"{step} x {t:g} s" if step is not None else "never"))
    return OverflowRun(
        Count(batch, given("--batch") if not admitted else derived(
            "what an engine admits on prompt cost: min(max_num_seqs, usable pool // bytes of the prompt)",
            f"{batch}")), tpot,
        admitted, steps_v, secs,
        Fraction(threshold, derived("max(0, 1 - growth per step x (evict seconds / TPOT) / pool)",
                                    f"1 - {growth:,} x ({evict:.4g} / {t:g}) / {pool:,} = {threshold:.4f}")),
        Seconds(evict, derived("victim bytes at the overflow context / host-link rate",
                               f"{victim:,} / {rate:,.0f} = {evict:.4g} s")),
        Bytes(growth, derived("batch x bytes per token per GPU past every window", f"{batch} x {marginal:,}")),
        Ratio(rate * t / max(growth, 1), derived(
            "host-link rate x TPOT / growth per step", f"{rate:,.0f} x {t:g} / {max(growth, 1):,}")))


def plan_concurrency(scenario: Scenario, options: ConcurrencyOptions | None = None) -> ConcurrencyPlan:
    """The KV pool of ``scenario``, how many of its requests fit (per replica and in all), when the pool overflows,
    and what a DRAM tier, FP8 and a token budget change; ``options`` as ``kvplan concurrency``'s flags."""
    options = options or ConcurrencyOptions()
    s, model, par, hw = scenario, scenario.sized_model, scenario.parallelism, scenario.hardware
    dtype = s.kv_dtype
    b = capacity.kv_pool(s)
    if options.pool_origin is not None and b.given_pool:
        from dataclasses import replace

        from kvplan.specs.values import Derivation

        b = replace(b, origin=f"from {options.pool_origin}", kv_pool=Bytes(
            b.kv_pool_bytes, Derivation(f"from {options.pool_origin}", kind="input")))
    pool = b.kv_pool_bytes
    block_v = capacity.block_tokens(s)
    block = block_v.number()
    context = s.context_tokens
    replicas = par.dp
    sources = tuple(model.sources) + s.engine_adapter.sources

    shared = capacity.shared_prefix_copy_bytes(s, block=block)
    shared_v = Bytes(shared, derived("one copy of the shared prefix's whole blocks: bytes(floor(shared / block) x "
                                     "block tokens)", f"{s.shared_prefix_tokens:,} tokens -> {shared:,} B"))
    per_req = capacity.request_bytes(s, context, block=block)
    per_req_v = Bytes(per_req, derived(
        "sum over groups on the most loaded GPU: layers x ceil(tokens held / block) x block x per-rank bytes per "
        "token + fixed state" + (" - the shared prefix's whole blocks" if shared else "")
        + (" + speculative slots" if s.spec_tokens else "") + (" + the draft model's KV" if s.draft else ""),
        f"at {context:,} tokens, block {block}: {per_req:,} B", *sources))
    per_replica = capacity.fit(pool, per_req, shared)
    per_replica_v = Count(per_replica, derived("floor((pool - shared prefix copy) / per-request bytes)",
                                               f"floor(({pool:,} - {shared:,}) / {per_req:,}) = {per_replica}"))
    replicas_v = Count(replicas, derived("DP ranks, each with its own pool", f"{replicas}"))
    total_v = Count(per_replica * replicas, derived("per replica x replicas",
                                                    f"{per_replica} x {replicas} = {per_replica * replicas}"))
    per_token_gpu = kv.kv_bytes_per_token_per_gpu(model, dtype, par).value
    cap = (pool // per_token_gpu) // block * block if per_token_gpu else 0
    cap_v = Tokens(cap, derived("floor(pool / per-GPU bytes per token past every window), rounded down to blocks",
                                f"floor({pool:,} / {per_token_gpu:,}) -> {cap:,} tokens", *sources))
    cap_total = Tokens(cap * replicas, derived("per replica x replicas", f"{cap:,} x {replicas}"))

    dtypes = options.dtypes or default_dtypes(hw)
    if KVDtype.NVFP4 in dtypes and "fp4" not in hw.dense_tflops:   # the rule Scenario applies to --kv-dtype
        raise KvplanError(f"nvfp4 KV needs FP4 tensor cores (Blackwell); the {hw.id} preset has no fp4 peak",
                          "drop nvfp4 from --dtypes on this GPU")
    contexts = sorted(set(options.contexts) | {context})
    per_dtype: dict[KVDtype, tuple[list[int] | None, str]] = {}
    for d in dtypes:
        try:
            s.engine_adapter.refuse_kv_dtype(d, s.model, s.hardware)   # a release, model or GPU it cannot run
            shared_d = capacity.shared_prefix_copy_bytes(s, d, block)
            per_dtype[d] = ([capacity.fit(pool, capacity.request_bytes(s, c, d, block=block), shared_d) * replicas
                             for c in contexts], "")
        except KvplanError as err:
            per_dtype[d] = (None, err.message)
    if all(counts is None for counts, _ in per_dtype.values()):   # no column to show: say why, not an empty table
        names = ",".join(d.value for d in dtypes)
        raise KvplanError(f"--dtypes {names}: no KV dtype of the list can be used here ({per_dtype[dtypes[0]][1]})",
                          "give --dtypes with one this model takes, e.g. bf16,fp8")
    grid = []
    for i, c in enumerate(contexts):
        cells = []
        for d in dtypes:
            counts, reason = per_dtype[d]
            value = counts[i] if counts is not None else None
            cells.append(GridCell(d, Count(value, derived(
                f"floor((pool - shared copy) / request bytes at the context, {d.value} KV) x replicas",
                f"{value} at {c:,} tokens" if value is not None else reason)), reason))
        grid.append(GridRow(Tokens(c, derived("a context of --contexts or the request's own", f"{c:,}")),
                            tuple(cells), s.over_limit(c)))

    step_model = None
    if options.tpot_seconds is not None:
        tpot = Seconds(options.tpot_seconds, given("--tpot"))
    else:
        try:
            step_model = costs.step_model(s)
            tpot = None   # each batch's own step time
        except KvplanError:   # e.g. a preset without HBM bandwidth: the published production figure
            tpot = Seconds(DEFAULT_TPOT_SECONDS, default("~50 ms per decode step", TPOT_SOURCE))
    link = costs.host_link_rate(hw, s.host_link_gbs)
    admitted = capacity.admitted_on_prompt_cost(s, pool, shared)
    runs = [overflow_run(s, options.batch, pool, shared, tpot, link, step_model=step_model)]
    if admitted > options.batch:
        runs.append(overflow_run(s, admitted, pool, shared, tpot, link, admitted=True, step_model=step_model))
    tpot = runs[0].tpot

    host = capacity.host_tier(s, per_req, options.dram_bytes_per_node)
    per_node = hw.node.gpus_per_node
    if options.ssd_bytes_per_node:
        ssd_gpu = options.ssd_bytes_per_node // per_node
        ssd = Bytes(ssd_gpu, derived("--ssd per node / GPUs per node", f"{options.ssd_bytes_per_node:,} // {per_node}"))
        on_node = per_req * min(par.tp * par.pp, per_node)   # as the host tier: one shard per GPU on the node
        ssd_n = Count(options.ssd_bytes_per_node // max(on_node, 1), derived(
            "floor(SSD per node / request bytes on the node), as the host-DRAM tier",
            f"{options.ssd_bytes_per_node:,} // {on_node:,}"))
    else:
        ssd, ssd_n = Bytes(None, default("no --ssd given")), Count(None, default("no --ssd given"))
    report = s.engine_adapter.report(s, model, par, pool, block)
    return ConcurrencyPlan(s, options, b, block_v, per_req_v, shared_v, per_replica_v, replicas_v, total_v, cap_v,
                           cap_total, dtypes, tuple(grid), tpot, link, tuple(runs), host, ssd, ssd_n, report)
