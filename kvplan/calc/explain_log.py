"""``kvplan explain-log``: rebuild a deployment from its start-up log, reproduce the engine's own figures from
the pool the log states, say where kvplan's own budget differs from the log and by how much, and plan the
reasoning workload on the logged pool.

``logged_pool(scenario, log)`` is the KV pool per GPU the log states (vLLM: "Available KV cache memory" or its
older spellings, else the logged blocks or tokens x kvplan's bytes per token; SGLang: the allocated tokens x
kvplan's cell size). ``plan_explain_log(scenario, log)`` returns an ``ExplainLogPlan``; ``kvplan.present.
explain_log`` shows it. The engine's figures come from the engine adapter (``report``, ``config``, ``cell_size``),
the workload from ``kvplan.calc.capacity``.

Rounding: the engines print GiB to two decimals, so a pool read from the log is known to +-0.005 GiB; a
reproduced figure that falls inside what that band allows "agrees"; outside it, the difference is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kvplan.calc import capacity, kv
from kvplan.engines.budget import Budget
from kvplan.errors import KvplanError
from kvplan.inputs.startup_log import Fact, StartupLog
from kvplan.scenario import Scenario
from kvplan.specs.values import (
    Bytes,
    Count,
    Derivation,
    Note,
    Number,
    Ratio,
    TokenBytes,
    Tokens,
    Value,
    derived,
    note,
)

if TYPE_CHECKING:
    from kvplan.engines.base import Engine

E = TypeVar("E", bound="Engine")
GIB = 2**30
HALF_CENT = 0.005     # half the last printed digit of a two-decimal GiB figure
SGLANG_POOL_SOURCE = ("sgl-project/sglang python/sglang/srt/mem_cache/memory_pool.py: each layer's K and V "
                      "buffers hold size + page_size tokens; the log prints their bytes / 2^30 to two decimals")
SGLANG_PROFILE_SOURCE = ("sgl-project/sglang python/sglang/srt/model_executor/model_runner.py profile_max_num_token: "
                         "rest = available after the weights - memory before them x (1 - mem_fraction_static); "
                         "tokens = rest x 2^30 // cell size")


def _number(fact: Fact) -> float:
    """A measured fact's number (GiB, a ratio): the log reader parses those lines as numbers, never as text."""
    v = fact.value
    if isinstance(v, str):
        raise TypeError(f"start-up log fact {fact.name} is text ({v!r}), not a number")
    return v


def _whole(fact: Fact) -> int:
    """A counted fact's number (tokens, blocks): the log reader parses those lines as whole numbers."""
    v = fact.value
    if not isinstance(v, int):
        raise TypeError(f"start-up log fact {fact.name} is {v!r}, not a whole number")
    return v


def _adapter(s: Scenario, log: StartupLog, kind: type[E]) -> E:
    """The deployment's engine adapter as the engine that wrote the log (whose own rules explain its figures)."""
    adapter = s.engine_adapter
    if not isinstance(adapter, kind):
        raise KvplanError(f"the deployment's engine is {adapter.display_name}, but {log.engine} wrote the start-up "
                          f"log {log.path}", f"give the deployment engine={log.engine!r} (scenario_from_log "
                                             "rebuilds it so)")
    return adapter


def logged(value_type: type[Value], fact: Fact, path: str, scale: float = 1.0) -> Value:
    """A figure the log states, as a typed value citing its line."""
    v = _number(fact)
    return value_type(v * scale if scale != 1.0 else v, Derivation(f"from the start-up log, {fact.cite(path)}",
                                                                   kind="input"))


@dataclass(frozen=True)
class Comparison:
    """One figure the log states next to kvplan's: logged, kvplan, kvplan - logged, and what explains it."""

    label: str | Note
    logged: Value
    kvplan: Value
    difference: Value
    agrees: bool
    why: str | Note


@dataclass(frozen=True)
class ExplainLogPlan:
    scenario: Scenario          # the deployment rebuilt from the log, with the logged pool
    log: StartupLog
    pool: Bytes                 # the KV pool per GPU the log states
    reproduced: tuple[Comparison, ...]
    budget: Budget | None       # kvplan's own budget for this deployment (None when it cannot be computed)
    budget_error: str
    budget_rows: tuple[Comparison, ...]
    request_bytes_per_gpu: Bytes
    requests_per_replica: Count
    requests: Count
    capacity_tokens: Tokens
    notes: tuple[str | Note, ...]
    warnings: tuple[str | Note, ...]


def _diff(kind: type[Value], kvplan_value: float, logged_value: float, formula: str = "kvplan - log") -> Value:
    d = kvplan_value - logged_value
    return kind(d, derived(formula, f"{kvplan_value:,.6g} - {logged_value:,.6g} = {d:,.6g}"))


def logged_pool(scenario: Scenario, log: StartupLog) -> tuple[Bytes, str]:
    """(pool per GPU, what it was read from) for the log of ``scenario``'s deployment. A pool over the GPU's HBM is
    the log's figure that is wrong (edited, cut, or of another deployment), said so: not the --kv-pool the user
    never gave, as the scenario's own check of the pool would say."""
    pool, what = _logged_pool(scenario, log)
    hw = scenario.hardware
    if pool.number() > hw.hbm_bytes:
        raise KvplanError(f"the start-up log's KV pool ({what}) is {pool.number() / 2**30:,.2f} GiB per GPU, more than "
                          f"the {hw.id}'s {hw.hbm_capacity_gib.value:g} GiB of HBM: the log's figure cannot be right "
                          "for this deployment", "check the log is whole and of this deployment (its GPU: --hardware; "
                          "its --tp)")
    return pool, what


def _logged_pool(scenario: Scenario, log: StartupLog) -> tuple[Bytes, str]:
    s, path = scenario, log.path
    model, par, dtype = s.sized_model, s.parallelism, s.kv_dtype
    if log.engine == "vllm":
        avail = log.least("available_kv_gib")
        if avail is not None:
            gib = _number(avail)
            pool = int(gib * GIB)
            return Bytes(pool, derived("the log's available KV cache memory x 2^30 (the least over the workers "
                                       "that print it)", f"{gib:g} GiB x 2^30 = {pool:,} B",
                                       f"start-up log {avail.cite(path)}")), "available KV cache memory"
        per_token = kv.kv_bytes_per_token_per_gpu(model, dtype, par).value
        for name, what in (("gpu_blocks", "GPU blocks"), ("kv_cache_tokens", "GPU KV cache size")):
            fact = log.least(name)
            if fact is None:
                continue
            block = capacity.block_tokens(s).number()
            tokens = _whole(fact) * block if name == "gpu_blocks" else _whole(fact)
            pool = tokens * per_token
            return Bytes(pool, derived(f"the log's {what} in tokens x kvplan's bytes per token per GPU",
                                       f"{tokens:,} x {per_token:,} = {pool:,} B", f"start-up log {fact.cite(path)}")
                         ), what
    else:
        sizes = _sglang_sizes(log)
        if sizes:
            total = sum(_number(f) for f in sizes)
            pool = int(total * GIB)
            return Bytes(pool, derived("the log's allocated KV size x 2^30 (SGLang's 'GB' is 2^30 bytes)" if len(
                sizes) == 1 else "the log's allocated K size + V size x 2^30 (SGLang's 'GB' is 2^30 bytes)",
                " + ".join(f"{f.value:g}" for f in sizes) + f" GiB x 2^30 = {pool:,} B",
                *(f"start-up log {f.cite(path)}" for f in sizes), SGLANG_POOL_SOURCE)), "allocated KV size"
        fact = log.least("kv_tokens") or log.least("max_total_num_tokens")
        if fact is not None:
            from kvplan.engines.sglang import SglangEngine

            cell = _adapter(s, log, SglangEngine).pool_cell_size(model, dtype, par)
            pool = _whole(fact) * cell
            return Bytes(pool, derived("the log's KV tokens x kvplan's SGLang pool bytes per token (cell)",
                                       f"{fact.value:,} x {cell:,} = {pool:,} B", f"start-up log {fact.cite(path)}")
                         ), "allocated KV tokens"
    raise KvplanError(f"the {log.engine} log {path} states no KV pool (no available KV memory, blocks or tokens "
                      "line)", "give the part of the log with the KV cache lines")


def _sglang_sizes(log: StartupLog) -> tuple[Fact, ...]:
    """The logged allocation of the least rank: (KV size,) for MLA, (K size, V size) for MHA, () when not logged."""
    both, k, v = log.least("kv_size_gib"), log.least("k_size_gib"), log.least("v_size_gib")
    return (both,) if both is not None else (k, v) if k is not None and v is not None else ()


# KV dtypes tried when the log does not state its own (the engines' defaults and the common override).
TRIED_KV_DTYPES = ("bf16", "fp8")


def matching_kv_dtype(scenario: Scenario, log: StartupLog) -> tuple[str, str] | None:
    """(the KV dtype whose bytes per token reproduce the log's exact figures, what was compared) when the
    scenario's own dtype does not and exactly one other does; None otherwise (the scenario's agrees, the log has
    nothing to compare, or no dtype or several do). Compared: SGLang's logged K/V (or KV) size against (tokens +
    page) x cell; vLLM's logged tokens or blocks against the available KV memory // block bytes."""
    avail = log.least("available_kv_gib")

    def agrees(s: Scenario) -> tuple[bool | None, str]:
        rows: list[Comparison] = []
        if log.engine == "sglang":
            rows = _sglang_reproduction(s, log)[:1] if _sglang_sizes(log) else []
        elif avail is not None and (log.has("kv_cache_tokens") or log.has("gpu_blocks")):
            rows = _vllm_reproduction(s, log, int(_number(avail) * GIB))[:1]
        if not rows:
            return None, ""
        label = rows[0].label   # a count or size the log states: plain text (only the concurrency row's is a note)
        return rows[0].agrees, label if isinstance(label, str) else "logged figure"

    mine, label = agrees(scenario)
    if mine is None or mine:
        return None
    matches = []
    for name in TRIED_KV_DTYPES:
        try:
            other = scenario.with_(kv_dtype_request=name)
            if other.kv_dtype == scenario.kv_dtype:
                continue
            if agrees(other)[0]:
                matches.append(name)
        except KvplanError:
            continue
    return (matches[0], label) if len(matches) == 1 else None


def _vllm_reproduction(s: Scenario, log: StartupLog, pool: int) -> list[Comparison]:
    from kvplan.engines.vllm import VllmConfig, VllmEngine

    adapter, model, par = _adapter(s, log, VllmEngine), s.sized_model, s.parallelism
    mnbt, _ = adapter.batch_limits_for(s)
    mml = s.max_model_len or model.max_position_embeddings or s.context_tokens

    def cfg(pool_bytes: int) -> VllmConfig:
        return adapter.config(model, s.kv_dtype, par, pool_bytes, mml, mnbt.number(), s.block_size, s.hardware)

    c = cfg(pool)
    avail = log.least("available_kv_gib")
    if avail is not None:   # what the two-decimal GiB figure allows
        gib = _number(avail)
        lo, hi = cfg(int((gib - HALF_CENT) * GIB)), cfg(int((gib + HALF_CENT) * GIB))
    else:
        lo = hi = c
    rows: list[Comparison] = []
    path = log.path
    block_bytes = c.page_bytes_per_layer * (c.group_size if not c.uniform else 1)
    for name, label, mine, lo_v, hi_v in (
            ("gpu_blocks", "GPU blocks", c.num_blocks, lo.num_blocks, hi.num_blocks),
            ("kv_cache_tokens", "GPU KV cache size (tokens)", c.kv_cache_tokens_logged, lo.kv_cache_tokens_logged,
             hi.kv_cache_tokens_logged)):
        fact = log.least(name)
        if fact is None:
            continue
        stated = _whole(fact)
        kind: type[Value] = Count if name == "gpu_blocks" else Tokens
        value = kind(mine, derived("the engine adapter's rule (" + adapter.release + ") on the logged pool",
                                   f"pool {pool:,} B, block {c.block_size}, page {c.page_bytes_per_layer:,} B -> "
                                   f"{mine:,}"))
        agrees = lo_v <= stated <= hi_v
        gap = mine - stated
        blocks = gap // c.block_size if name == "kv_cache_tokens" else gap
        band = {"lo": kind(lo_v), "hi": kind(hi_v)}
        if agrees:
            why = (note("agrees: the log's two-decimal GiB figure allows {lo}-{hi}", **band) if avail is not None else
                   "agrees")
        else:
            why = note("differs by {gap} ({blocks} blocks = {bytes:GiB:.3f}) beyond the rounding band {lo}-{hi}: the "
                       "engine sizes the pool by the worker with the least memory and a connector or another release "
                       "may hold back blocks; the log line read is one worker's", gap=kind(gap), blocks=Count(blocks),
                       bytes=Bytes(blocks * block_bytes), **band)
        rows.append(Comparison(label, logged(kind, fact, path), value, _diff(kind, mine, stated), agrees, why))
    fact = log.least("max_concurrency")
    if fact is not None:
        ratio = Ratio(c.max_concurrency, derived("num_blocks / blocks one max_model_len request needs",
                                                f"{c.num_blocks:,} / {c.blocks_per_request:,} = "
                                                f"{c.max_concurrency:.4f}"))
        concurrency = _number(fact)
        agrees = round(lo.max_concurrency - 0.005, 2) <= concurrency <= round(hi.max_concurrency + 0.005, 2)
        mml_v = Tokens(mml)
        why = (note("agrees (the log prints two decimals; max_model_len {mml})", mml=mml_v) if agrees else
               note("differs by {gap:+.2f}x at max_model_len {mml}", mml=mml_v,
                    gap=Ratio(c.max_concurrency - concurrency)))
        rows.append(Comparison(note("Maximum concurrency for {mml} tokens per request", mml=mml_v),
                               logged(Ratio, fact, path),
                               ratio, _diff(Ratio, c.max_concurrency, concurrency), agrees, why))
    return rows


def _sglang_reproduction(s: Scenario, log: StartupLog) -> list[Comparison]:
    from kvplan.engines.sglang import SglangEngine

    adapter, model, par, path = _adapter(s, log, SglangEngine), s.sized_model, s.parallelism, log.path
    cell = adapter.pool_cell_size(model, s.kv_dtype, par)
    page = capacity.block_tokens(s).number()
    rows: list[Comparison] = []
    tokens_fact = log.least("kv_tokens") or log.least("max_total_num_tokens")
    sizes = _sglang_sizes(log)
    both = log.least("kv_size_gib")
    if tokens_fact is not None and sizes:
        slots = _whole(tokens_fact) + page
        size = slots * cell / GIB
        fact = sizes[0]   # the KV size (MLA), else the K size (V is the same)
        if both is not None:
            label, mine = "KV size (GiB, the log's 'GB')", size
        else:
            label, mine = "K size (GiB, the log's 'GB'; V is the same)", size / 2
        tolerance = HALF_CENT
        value = Bytes(int(mine * GIB), derived("(tokens + page) x pool bytes per token" + (" / 2 (K or V)" if
                                                                                            both is None else ""),
                                               f"({tokens_fact.value:,} + {page}) x {cell:,} B = {slots * cell:,} B",
                                               SGLANG_POOL_SOURCE, *s.engine_adapter.sources))
        logged_b = logged(Bytes, fact, path, GIB)
        printed = _number(fact)
        agrees = abs(mine - printed) <= tolerance + 1e-9
        # in the log's own unit (GiB, printed to two decimals), whatever --units says
        why = (note("agrees: {cell} per token on each GPU ({mine:.4f} GiB printed as {printed:.2f})",
                    cell=TokenBytes(cell), mine=Number(mine), printed=Number(printed)) if agrees
               else note("differs by {gap:+.3f} GiB: kvplan's cell of {cell} per token is not the engine's for this "
                         "model, KV dtype or TP", gap=Number(mine - printed), cell=TokenBytes(cell)))
        rows.append(Comparison(label, logged_b, value, _diff(Bytes, int(mine * GIB), int(printed * GIB)),
                               agrees, why))
    avail, usage = log.least("avail_after_load_gib"), log.first("weights_gib")
    fraction = s.mem_fraction_static
    if tokens_fact is not None and avail is not None and usage is not None and fraction is not None:
        after, stated = _number(avail), _whole(tokens_fact)
        before = after + _number(usage)
        rest = after - before * (1 - fraction)
        profile_cell = adapter.cell_size(model, s.kv_dtype, par)   # the cell SGLang sizes the pool with
        tokens = max(int(rest * GIB // profile_cell), 0) // page * page
        cap_fact = log.first("max_total_tokens_cap")
        cap = None if cap_fact is None else _whole(cap_fact)
        capped = min(tokens, cap) if cap else tokens
        profiled = Tokens(capped, derived(
            "(available after the weights - (available after + weights) x (1 - mem_fraction_static)) x 2^30 // cell,"
            " to whole pages" + (", at most --max-total-tokens" if cap else ""),
            f"({after:g} - {before:g} x {1 - fraction:.3g}) GiB = {rest:.3f} GiB; // {profile_cell:,} B -> "
            f"{tokens:,}"
            + (f", capped at {cap:,}" if cap else ""), SGLANG_PROFILE_SOURCE))
        agrees = capped == stated
        if not agrees:
            tokens_why: str | Note = note(
                "differs by {gap:+,} tokens: the memory before the weights is taken as available after + the weights' "
                "usage (rounded to 0.01 GB each), and other ranks may have less", gap=Tokens(capped - stated))
        elif cap and cap < tokens:
            tokens_why = "agrees" + note(" (--max-total-tokens {cap} caps the {tokens} the memory allows)",
                                         cap=Tokens(cap), tokens=Tokens(tokens))
        else:
            tokens_why = "agrees"
        rows.append(Comparison("max_total_num_tokens", logged(Tokens, tokens_fact, path), profiled,
                               _diff(Tokens, capped, stated), agrees, tokens_why))
    return rows


def _budget_rows(s: Scenario, log: StartupLog, b: Budget, pool: Bytes) -> list[Comparison]:
    path = log.path
    rows: list[Comparison] = []

    def add(label: str, fact_names: tuple[str, ...], mine: Bytes, why_more: str, why_less: str) -> None:
        facts = [f for f in (log.least(n) if n == "available_kv_gib" else log.first(n) for n in fact_names)
                 if f is not None]
        if not facts:
            return
        total = sum(_number(f) for f in facts)
        logged_v = Bytes(int(total * GIB), Derivation("from the start-up log, " + " + ".join(
            f.cite(path) for f in facts), kind="input"))
        gap = mine.number() - logged_v.number()
        agrees = abs(gap) <= len(facts) * HALF_CENT * GIB
        why = "agrees" if agrees else (why_more if gap > 0 else why_less) + note(" ({gap:GiB:+.2f})", gap=Bytes(gap))
        rows.append(Comparison(label, logged_v, mine, _diff(Bytes, mine.number(), logged_v.number()), agrees,
                               why))

    add("HBM of the GPU", ("total_gpu_memory_gib",), b.hbm,
        "the hardware preset has more memory than the logged GPU reports: give --hardware for that GPU",
        "the hardware preset has less memory than the logged GPU reports: give --hardware for that GPU")
    add("weights on this GPU", ("weights_gib",), b.weights,
        "kvplan's weights are larger (checkpoint size or --weight-dtype; the logged checkpoint may be quantised or "
        "keep experts elsewhere)", "kvplan's weights are smaller than what the engine loaded")
    add("activation / profile peak", ("activation_peak_gib",), b.activation,
        "kvplan's activation estimate is above the engine's measured peak",
        "the engine's measured peak is above kvplan's estimate")
    add("non-torch + CUDA graphs", ("non_torch_gib", "cuda_graph_gib"), b.runtime,
        "kvplan's runtime reserve is above what the log measured",
        "the log measured more non-torch / CUDA-graph memory than kvplan's runtime reserve")
    if log.engine == "vllm":
        add("KV pool per GPU", ("available_kv_gib",), b.kv_pool,
            "kvplan's budget leaves a larger pool than the engine found", "the engine found a larger pool")
    else:
        gap = b.kv_pool.number() - pool.number()
        rows.append(Comparison("KV pool per GPU", pool, b.kv_pool, _diff(Bytes, b.kv_pool.number(), pool.number()),
                               abs(gap) <= HALF_CENT * GIB,
                               "agrees" if abs(gap) <= HALF_CENT * GIB else
                               note("kvplan's budget leaves {gap:GiB:+.2f} against the logged pool", gap=Bytes(gap))))
    return rows


def does_not_fit(s: Scenario, b: Budget) -> Note:
    """Why kvplan's own budget leaves no KV pool for the deployment, with its numbers."""
    par, wd = s.parallelism, s.weight_dtype or s.model.weight_dtype
    requested, activation, runtime, weights = (b.requested.number(), b.activation.number(), b.runtime.number(),
                                               b.weights.number())
    usable = requested - activation - runtime
    usable_v = Bytes(usable, derived("requested - activation - runtime", f"{requested:,} - {activation:,} - "
                                     f"{runtime:,}"))
    short = Bytes(usable - weights, derived("usable - weights", f"{usable:,} - {weights:,}"))
    return (note("kvplan's own budget leaves no KV pool: {weights:GiB:,.2f} of " f"{wd} weights per GPU "
                 f"(TP={par.tp} x PP={par.pp}", weights=b.weights) + (f", EP={par.ep}" if par.ep else "")
            + note(") do not fit in the {usable:GiB:,.2f} left of {hw}'s {hbm:GiB:,.2f} x "
                   f"{b.fraction_name} {{fraction:g}} after the activation and runtime reserves ({{short:GiB:+,.2f}}); "
                   "the engine fitted its pool, so the GPU, the weight dtype or the layout differs (give --hardware, "
                   "--weight-dtype or --weights)", hw=s.hardware.id, usable=usable_v, hbm=b.hbm, fraction=b.fraction,
                   short=short))


def plan_explain_log(scenario: Scenario, log: StartupLog) -> ExplainLogPlan:
    """``scenario``: the deployment rebuilt from the log (without a --kv-pool); the pool comes from the log."""
    pool, _ = logged_pool(scenario, log)
    pool_bytes = pool.number()
    s = scenario.with_(kv_pool_bytes=max(pool_bytes, 1))
    notes: list[str | Note] = []
    warnings: list[str | Note] = []
    reproduced = tuple(_vllm_reproduction(s, log, pool_bytes) if log.engine == "vllm"
                       else _sglang_reproduction(s, log))
    budget: Budget | None = None
    error = ""
    budget_rows: tuple[Comparison, ...] = ()
    try:
        budget = scenario.engine_adapter.budget(scenario, scenario.sized_model, scenario.parallelism)
        budget_rows = tuple(_budget_rows(scenario, log, budget, pool))
        if not budget.fits:   # a negative pool is no figure: say what does not fit instead
            budget_rows = tuple(r for r in budget_rows if r.label != "KV pool per GPU")
            warnings.append(does_not_fit(scenario, budget))
    except KvplanError as err:
        error = err.message
        notes.append(f"kvplan's own budget for this deployment cannot be computed: {err.message}.")
    hbm = log.first("total_gpu_memory_gib")
    hbm_gib = 0.0 if hbm is None else _number(hbm)
    if hbm is not None and abs(hbm_gib - s.hardware.hbm_capacity_gib.value) > 0.02 * hbm_gib:
        # both in GiB, the unit the log and the preset state them in
        warnings.append(note("The log's GPU has {log:g} GiB " f"(line {hbm.line}) but the {{hw}} preset has "
                             "{preset:g} GiB: kvplan's budget is for another GPU; give --hardware for the logged one.",
                             hw=s.hardware.id, log=Number(float(hbm_gib)),
                             preset=Number(s.hardware.hbm_capacity_gib.value)))
    for c in reproduced:
        if not c.agrees:
            notes.append(c.label + ": " + c.why + ".")
    context = s.context_tokens
    per_req = capacity.request_bytes(s, context)
    per_req_v = Bytes(per_req, derived("KV of one request on the most loaded GPU, block-rounded (kvplan's count)",
                                       f"at {context:,} tokens: {per_req:,} B", *s.sized_model.sources))
    fit = capacity.fit(pool_bytes, per_req)
    fit_v = Count(fit, derived("floor(logged pool / request bytes)", f"floor({pool_bytes:,} / {per_req:,}) = "
                                                                      f"{fit}"))
    replicas = s.parallelism.dp
    total_v = Count(fit * replicas, derived("per replica x DP replicas", f"{fit} x {replicas} = {fit * replicas}"))
    per_token = kv.kv_bytes_per_token_per_gpu(s.sized_model, s.kv_dtype, s.parallelism).value
    tokens_fact = log.least("kv_tokens") if log.engine == "sglang" else None
    if tokens_fact is not None:   # SGLang counts its pool in tokens: its own figure, not a division of rounded GiB
        cap = _whole(tokens_fact)
        cap_v = Tokens(cap, Derivation(f"from the start-up log, {tokens_fact.cite(log.path)}", kind="input"))
    else:
        cap = pool_bytes // per_token if per_token else 0
        cap_v = Tokens(cap, derived("floor(logged pool / bytes per token per GPU)",
                                    f"floor({pool_bytes:,} / {per_token:,}) = {cap:,}"))
    return ExplainLogPlan(s, log, pool, reproduced, budget, error, budget_rows, per_req_v, fit_v, total_v, cap_v,
                          tuple(notes), tuple(warnings))
