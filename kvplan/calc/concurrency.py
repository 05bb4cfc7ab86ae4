"""``kvplan concurrency``: the KV pool, how many long requests fit, when the pool overflows, and what a DRAM
tier, FP8 and a token budget buy.

Definitions (the JSON contract in the README repeats them):

* a *replica* is one TP x PP group serving its own requests; DP ranks (attention data-parallel ranks or
  plain replicas) multiply the replicas;
* ``max_concurrency``: whole requests at the request's context (prompt + decode) over the whole deployment;
  ``max_concurrency_per_replica`` for one replica;
* ``kv_capacity_tokens``: tokens one replica's pool holds past every window (pool / per-GPU bytes per token,
  rounded down to blocks); ``kv_capacity_tokens_total`` for the deployment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan import engines
from kvplan.calc import budget as budget_mod
from kvplan.calc import kv
from kvplan.calc.size import DEFAULT_CONTEXTS
from kvplan.dtypes import KVDtype
from kvplan.errors import KvplanError
from kvplan.hardware import HardwareSpec
from kvplan.model import ModelSpec
from kvplan.parallel import Parallelism, pipeline_stages
from kvplan.result import Chart, Derivation, Result, Table
from kvplan.units import format_bytes

DEFAULT_DTYPES = (KVDtype.BF16, KVDtype.FP8, KVDtype.NVFP4)

# The workload document's batch-size recommendation for long reasoning requests.
SEED_BATCH_RANGE = (2, 8)
DEFAULT_BATCH = 8

# Per-token decode time used for overflow timing when --tpot is not given: DeepSeek's production V3/R1
# decode served "20-22 tokens per second" per user (open-infra-index Day 6, lines 75-76), i.e. ~50 ms/token.
DEFAULT_TPOT_SECONDS = 0.05
TPOT_SOURCE = "DeepSeek V3/R1 production: 20-22 tok/s per user -> ~50 ms/token (open-infra-index Day 6)"

# Host tier size relative to the HBM KV pool when --dram is not given: SGLang HiCache's best-practice
# `--hicache-ratio 2` (host pool = 2 x device pool; docs.sglang.io hicache_best_practices), capped by the
# node's host DRAM share per GPU.
DEFAULT_HOST_RATIO = 2.0
HOST_RATIO_SOURCE = "SGLang HiCache best practice --hicache-ratio 2 (host pool = 2 x HBM pool)"

SPARSIFICATION_CAVEAT = ("H2O / SnapKV-style budgets keep tokens by attention score, but a reasoning step may "
                         "refer to any distant conclusion; the workload document prefers FP8 over aggressive "
                         "sparsification, and low budgets can lengthen the chains they shorten (arXiv 2512.12008).")


@dataclass(frozen=True)
class ConcurrencyRequest:
    model: ModelSpec
    hardware: HardwareSpec
    kv_dtype: KVDtype
    parallelism: Parallelism
    nodes: int = 1
    prompt_tokens: int = 1000
    decode_tokens: int = 30000
    gpu_memory_utilization: float = budget_mod.DEFAULT_GPU_MEMORY_UTILIZATION
    kv_pool_bytes: int | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    block_size: int | None = None
    engine: str = "neutral"
    mem_fraction_static: float | None = None
    activation_reserve_bytes: int | None = None
    runtime_reserve_bytes: int | None = None
    dram_bytes_per_node: int | None = None
    ssd_bytes_per_node: int | None = None
    batch: int = DEFAULT_BATCH
    tpot_seconds: float | None = None
    shared_prefix_tokens: int = 0
    # Speculative decoding: MTP draft layers in the same pool (None: none; the CLI's --mtp-layers), and the
    # lookahead slots each request reserves (vLLM num_lookahead_tokens, PR #16370; SGLang PR #20872).
    mtp_layers: int | None = None
    spec_tokens: int = 0
    draft: ModelSpec | None = None
    token_budget: int | None = None
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    dtypes: tuple[KVDtype, ...] = DEFAULT_DTYPES
    units: str = "iec"


def request_bytes_per_gpu(model: ModelSpec, dtype: KVDtype, par: Parallelism, contexts, block: int,
                          token_budget: int | None = None, shared_prefix: int = 0):
    """Bytes one request holds on the most loaded GPU at each context (numpy array in, array out), with each
    layer's tokens rounded up to whole blocks; each kind's ``tokens_cap`` bounds what it keeps."""
    import numpy as np

    ctx = np.asarray(contexts, dtype=np.int64)
    shared = (shared_prefix // block) * block
    worst = np.zeros_like(ctx)
    for stage in pipeline_stages(model.num_layers, par.pp):
        total = np.zeros_like(ctx)
        for g in model.groups:
            n = kv.layers_in(g, stage)
            if not n:
                continue
            per_token = g.kind.cache_bytes_per_token(dtype, par.tp)
            if per_token:
                cap = g.kind.tokens_cap
                held = ctx if cap is None else np.minimum(ctx, cap)
                if g.kind.grows_with_context:
                    if token_budget is not None:
                        held = np.minimum(held, token_budget)
                    held = np.maximum(held - shared, 0)
                total = total + (-(-held // block)) * block * per_token * n
            total = total + g.kind.state_bytes(par.tp) * n
        worst = np.maximum(worst, total)
    return worst


def _draft_bytes(req: ConcurrencyRequest, dtype: KVDtype, contexts, block: int, par: Parallelism | None = None):
    import numpy as np

    if req.draft is None:
        return np.zeros(len(contexts), dtype=np.int64)
    tp = (par or req.parallelism).tp
    draft_par = Parallelism(tp=tp)
    req.draft.check_tp(tp)
    return request_bytes_per_gpu(req.draft, dtype, draft_par, contexts, block, req.token_budget)


def _budget_for(req: ConcurrencyRequest, model: ModelSpec, par: Parallelism) -> budget_mod.Budget:
    """The waterfall for one parallelism, with every override the request carries (reserves, the engine's
    memory fraction, a draft model's weights)."""
    hw = req.hardware
    mnbt, mns = budget_mod.default_batch_limits(hw)
    mnbt = req.max_num_batched_tokens or mnbt
    mns = req.max_num_seqs or mns
    extra = None
    if req.draft is not None and req.kv_pool_bytes is None:
        est = req.draft.weight_bytes_estimate()
        if est is not None:
            extra = (int(est[0] / par.tp), f"draft {req.draft.id} weights / TP")
    if req.engine == "sglang" and req.kv_pool_bytes is None:
        return _sglang_budget(req, model, par, extra)
    return budget_mod.budget(model, hw, par, req.gpu_memory_utilization, mnbt, mns, req.kv_pool_bytes,
                             req.activation_reserve_bytes, req.runtime_reserve_bytes, extra)


def _resolve_budget(req: ConcurrencyRequest, model: ModelSpec) -> budget_mod.Budget:
    b = _budget_for(req, model, req.parallelism)
    if not b.fits:
        _raise_does_not_fit(req, model, b)
    return b


def _sglang_budget(req: ConcurrencyRequest, model: ModelSpec, par: Parallelism, extra) -> budget_mod.Budget:
    """SGLang: rest_memory = available after weights - total x (1 - mem_fraction_static), i.e.
    total x mem_fraction_static - weights - the CUDA context and buffers (the runtime reserve), which are
    already in use when SGLang measures the available memory. Activations live in the 1 - fraction headroom."""
    hw = req.hardware
    given = req.mem_fraction_static is not None
    mfs = req.mem_fraction_static if given else engines.sglang_default_mem_fraction(hw.hbm_capacity_gib.value,
                                                                                      par.tp * par.pp)
    b = budget_mod.budget(model, hw, par, mfs, 0, 0, None, 0, req.runtime_reserve_bytes, extra)
    return replace(b, fraction_name="mem_fraction_static",
                   fraction_note="given with --mem-fraction-static" if given else engines.SGLANG_FRACTION_SOURCE,
                   activation_note="inside SGLang's 1 - mem_fraction_static headroom")


def _one_request_bytes(req: ConcurrencyRequest, model: ModelSpec, par: Parallelism) -> int:
    """One request at its full context on the most loaded GPU of ``par``, as the calculator counts it."""
    block = req.block_size or engines.default_block_size(model, "sglang" if req.engine == "sglang" else "vllm")
    ctx = [req.prompt_tokens + req.decode_tokens + req.spec_tokens]
    return int((request_bytes_per_gpu(model, req.kv_dtype, par, ctx, block, req.token_budget)
                + _draft_bytes(req, req.kv_dtype, ctx, block, par))[0])


def _raise_does_not_fit(req: ConcurrencyRequest, model: ModelSpec, b: budget_mod.Budget):
    hw, par = req.hardware, req.parallelism
    need = b.weights_bytes + b.activation_bytes + b.runtime_bytes
    context = req.prompt_tokens + req.decode_tokens

    def holds_one_request(trial: Parallelism) -> bool:
        return _budget_for(req, model, trial).kv_pool_bytes >= _one_request_bytes(req, model, trial)

    best = budget_mod.smallest_fitting(model, hw, par, holds_one_request)
    if best is None:
        fix = "no TP x PP up to 64 x 32 fits with these reserves; quantize the weights or use a larger GPU"
    else:
        gpus = best.tp * best.pp
        nodes = -(-gpus // hw.node.gpus_per_node)
        fix = (f"the fewest GPUs that hold the weights and one {context:,}-token request: {gpus} "
               f"(--tp {best.tp} --pp {best.pp}, {nodes} node{'s' if nodes > 1 else ''} of {hw.node.gpus_per_node})")
    raise KvplanError(
        f"{model.id} does not fit on {hw.id} at TP={par.tp} PP={par.pp}: weights, activations and runtime take "
        f"{need / 1e9:,.1f} GB per GPU but {b.fraction_name} {b.utilization:g} x {b.hbm_bytes / 2**30:,.2f} GiB "
        f"leaves {b.requested_bytes / 1e9:,.1f} GB", fix)


def concurrency(req: ConcurrencyRequest) -> Result:
    import numpy as np

    model = req.model.with_mtp_layers(req.mtp_layers) if req.mtp_layers else req.model
    par, hw, dtype = req.parallelism, req.hardware, req.kv_dtype
    kv.check_parallelism(model, par)
    gpus = req.nodes * hw.node.gpus_per_node
    if par.gpus > gpus:
        raise KvplanError(f"TP x PP x DP = {par.gpus} GPUs but {req.nodes} node(s) of {hw.id} have {gpus}",
                          "add --nodes or lower --tp/--pp/--dp")
    if par.ep and (par.tp * par.dp) % par.ep:
        raise KvplanError(f"--ep {par.ep} does not divide TP x DP = {par.tp * par.dp}",
                          "give an EP degree that divides the GPUs of the TP and DP ranks")
    if req.prompt_tokens + req.decode_tokens == 0:
        raise KvplanError("--prompt and --decode are both 0", "give the request at least one token")
    if req.batch < 1:
        raise KvplanError("--batch must be at least 1", "give the number of requests decoding together")
    if req.kv_pool_bytes is not None and req.kv_pool_bytes > hw.hbm_bytes:
        raise KvplanError(f"--kv-pool {req.kv_pool_bytes / 2**30:,.2f} GiB is more than the {hw.id}'s "
                          f"{hw.hbm_capacity_gib.value:g} GiB of HBM", "give the pool of one GPU, e.g. from vLLM's "
                          "'Available KV cache memory' line")
    if req.mtp_layers is not None and req.mtp_layers > 64:
        raise KvplanError(f"--mtp-layers {req.mtp_layers} is absurd (DeepSeek ships 1)", "give 0 to a few layers")
    if req.spec_tokens > 1024:
        raise KvplanError(f"--spec-tokens {req.spec_tokens} is absurd (engines use 1-8)",
                          "give the speculative tokens per step")
    fmt = lambda n: format_bytes(n, req.units)  # noqa: E731

    b = _resolve_budget(req, model)
    pool = b.kv_pool_bytes
    block = req.block_size or engines.default_block_size(model, "sglang" if req.engine == "sglang" else "vllm")
    context = req.prompt_tokens + req.decode_tokens
    replicas = par.dp
    shared = req.shared_prefix_tokens
    if shared and shared > req.prompt_tokens:
        raise KvplanError(f"--shared-prefix {shared:,} is longer than the {req.prompt_tokens:,}-token prompt",
                          "give a shared prefix no longer than --prompt")

    # Shared system-prompt prefix: one copy in the pool, not one per request.
    # Each request stops holding floor(shared / block) blocks of it, so the one copy is charged the same.
    shared_blocks = (shared // block) * block
    shared_copy = int(request_bytes_per_gpu(model, dtype, par, [shared_blocks], block)[0]) if shared_blocks else 0
    usable = pool - shared_copy

    def fit(per_request_bytes):
        per = np.maximum(per_request_bytes, 1)
        return np.maximum(usable, 0) // per

    def request_bytes(d: KVDtype, contexts):
        """One request on the most loaded GPU at each context: its own tokens plus the speculative lookahead
        slots, less the shared prefix, plus a draft model's KV."""
        ctx = np.asarray(contexts, dtype=np.int64) + req.spec_tokens
        return (request_bytes_per_gpu(model, d, par, ctx, block, req.token_budget, shared)
                + _draft_bytes(req, d, ctx, block))

    per_req = request_bytes(dtype, [context])
    per_request_gpu = int(per_req[0])
    per_replica = int(fit(per_req)[0])
    total = per_replica * replicas
    per_token_gpu = kv.kv_bytes_per_token_per_gpu(model, dtype, par).value
    capacity_tokens = (pool // per_token_gpu) // block * block if per_token_gpu else 0

    # Concurrency against context and KV dtype, vectorized over contexts for each dtype.
    contexts = np.array(sorted(set(req.contexts) | {context}), dtype=np.int64)
    grid_rows = []
    series = []
    for d in req.dtypes:
        try:
            per = request_bytes(d, contexts)
            shared_d = (int(request_bytes_per_gpu(model, d, par, [shared_blocks], block)[0])
                        if shared_blocks else 0)
            counts = (np.maximum(pool - shared_d, 0) // np.maximum(per, 1)) * replicas
        except KvplanError:
            counts = np.full(len(contexts), -1)
        series.append((d.value, counts))
    for i, c in enumerate(contexts):
        grid_rows.append((int(c),) + tuple(("n/a" if s[1][i] < 0 else int(s[1][i])) for s in series))

    # Overflow timing: B requests decode together from prompt P; step t holds B x bytes(P + t) per GPU. Two
    # batches: --batch, and what an engine admits when it charges only the prompt's blocks (vLLM v1 admits on
    # prefill block cost, not eventual decode cost: preemption-pd-workload.md 2.2), capped by max_num_seqs.
    def bytes_at_step(step: int) -> int:
        return int(request_bytes(dtype, [req.prompt_tokens + step])[0])

    def first_full_step(batch: int) -> int | None:
        """The first decode step at which ``batch`` requests overfill the pool. A request's bytes never shrink
        as it decodes, so a bisection over the steps finds it without materialising every step."""
        def full(step: int) -> bool:
            return batch * bytes_at_step(step) + shared_copy > pool

        if not full(req.decode_tokens):
            return None
        lo, hi = 0, req.decode_tokens
        while lo < hi:
            mid = (lo + hi) // 2
            if full(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    max_seqs = req.max_num_seqs or budget_mod.default_batch_limits(hw)[1]
    admitted = int(min(max_seqs, max(usable, 0) // max(bytes_at_step(0), 1)))
    tpot = req.tpot_seconds if req.tpot_seconds is not None else DEFAULT_TPOT_SECONDS
    tpot_note = "given with --tpot" if req.tpot_seconds is not None else TPOT_SOURCE

    # Tiers: host DRAM (L2), optional SSD (L3), per GPU share of the node.
    per_gpu_share = hw.node.gpus_per_node
    node_dram = hw.node.host_dram_gb.value * 1e9 if hw.node.host_dram_gb else None
    if req.dram_bytes_per_node is not None:
        l2_per_gpu = req.dram_bytes_per_node / per_gpu_share
        l2_note = f"--dram {fmt(req.dram_bytes_per_node)} per node / {per_gpu_share} GPUs"
    else:
        cap = node_dram / per_gpu_share if node_dram else float("inf")
        l2_per_gpu = min(DEFAULT_HOST_RATIO * pool, cap)
        l2_note = (f"{HOST_RATIO_SOURCE}" + (f", capped at node DRAM {node_dram / 1e9:,.0f} GB / {per_gpu_share} "
                                             f"GPUs ({hw.node.host_dram_gb.source})" if node_dram else ""))
    l2_per_gpu = int(l2_per_gpu)
    parked_l2 = l2_per_gpu // max(per_request_gpu, 1)
    l3_per_gpu = int(req.ssd_bytes_per_node / per_gpu_share) if req.ssd_bytes_per_node else 0
    parked_l3 = l3_per_gpu // max(per_request_gpu, 1) if l3_per_gpu else 0
    link = hw.host_link
    eff = link.large_copy_efficiency.value if link.large_copy_efficiency else 0.8
    d2h_bytes_s = link.theoretical_gb_s_per_direction.value * 1e9 * eff
    marginal_gpu = kv.kv_bytes_per_token_per_gpu(model, dtype, par).value

    def overflow(batch: int) -> dict:
        """Steps until B requests fill the pool, and the offload threshold that keeps it from overflowing:
        evicting one request at the overflow context takes bytes / D2H bandwidth, during which the batch
        keeps growing by B x bytes per token per step."""
        step = first_full_step(batch)
        victim = bytes_at_step(step if step is not None else req.decode_tokens)
        evict = victim / d2h_bytes_s
        growth = batch * marginal_gpu
        threshold = max(0.0, 1 - growth * (evict / tpot) / pool) if pool > 0 else 0.0
        return {"batch": batch, "decode_steps_until_full": step,
                "seconds_until_full": None if step is None else step * tpot, "offload_threshold_fraction":
                round(threshold, 4), "evict_one_request_seconds": evict, "growth_bytes_per_step": growth}

    overflow_runs = [overflow(req.batch)] + ([overflow(admitted)] if admitted > req.batch else [])

    notes: list[str] = []
    lo, hi = SEED_BATCH_RANGE
    notes.append(
        f"Batch ceiling at {context:,} tokens: {per_replica} request(s) per replica"
        + (f" x {replicas} replicas = {total}" if replicas > 1 else "")
        + f"; the workload document recommends batches of {lo}-{hi} for long reasoning requests"
        + (" (fits)." if per_replica >= hi else f" ({hi} does not fit; {per_replica} does).")
    )
    for run in overflow_runs:
        label = (f"{run['batch']:,} requests" + (" (what an engine admits on prompt cost)"
                                                  if run is not overflow_runs[0] else ""))
        if run["decode_steps_until_full"] is None:
            notes.append(f"{label} decoding together from a {req.prompt_tokens:,}-token prompt never fill the pool "
                         f"within {req.decode_tokens:,} decode steps.")
        else:
            drain = d2h_bytes_s * tpot / max(run["growth_bytes_per_step"], 1)
            notes.append(f"{label} decoding together from a {req.prompt_tokens:,}-token prompt fill the pool after "
                         f"{run['decode_steps_until_full']:,} decode steps (~{run['seconds_until_full']:,.0f} s at "
                         f"{tpot * 1000:g} ms/token). Cap the batch, or offload to DRAM: offloading may wait until "
                         f"the pool is {run['offload_threshold_fraction']:.1%} full (the host link drains {drain:,.0f}x"
                         f" faster than the batch grows).")
    if model.uses_kind("mla") and par.tp > 1 and replicas == 1:
        notes.append(f"MLA latents are whole on every TP rank: TP={par.tp} holds {par.tp} copies of each request's "
                     f"KV; attention data-parallelism (--tp 1 --dp {par.tp} --ep {par.tp}) keeps one copy.")
    dtype_note = model.effective_kv_dtype_note(dtype)
    if dtype_note:
        notes.append(dtype_note)
    if req.token_budget is not None:
        notes.append(f"Token budget {req.token_budget:,} per request (what-if). " + SPARSIFICATION_CAVEAT)
    engine_data: dict = {}
    tables = [
        Table(f"Memory budget per GPU ({hw.name}, {par.describe()})", ("line", "bytes", "note"),
              tuple((ln.label, fmt(ln.bytes) if ln.bytes >= 0 else "-" + fmt(-ln.bytes), ln.note)
                    for ln in b.lines())),
        Table(f"Concurrency at {context:,} tokens ({req.prompt_tokens:,} prompt + {req.decode_tokens:,} decode), "
              f"{dtype.value} KV, {req.engine} accounting",
              ("figure", "value"), (
                  ("KV pool per GPU", fmt(pool)),
                  ("KV per request on the most loaded GPU (block-rounded)", fmt(per_request_gpu)),
                  ("block size (tokens)", block),
                  ("max concurrent requests per replica", per_replica),
                  ("replicas (DP ranks)", replicas),
                  ("max concurrent requests, deployment", total),
                  ("KV capacity per replica (tokens past every window)", capacity_tokens),
              )),
        Table(f"Concurrent requests (deployment) by context and KV dtype, {par.describe()}",
              ("context tokens",) + tuple(d.value for d in req.dtypes), tuple(grid_rows), primary=True),
        Table("Tiers: where preempted or overflowing KV can go (per GPU)", ("tier", "capacity per GPU",
                                                                            "requests held", "note"), (
            ("L1 HBM KV pool", fmt(pool), per_replica, "from the budget above"),
            ("L2 host DRAM", fmt(l2_per_gpu), parked_l2, l2_note),
            ("L3 SSD", fmt(l3_per_gpu) if l3_per_gpu else "-", parked_l3 if l3_per_gpu else "-",
             "--ssd per node / GPUs" if l3_per_gpu else "give --ssd SIZE per node"),
        )),
    ]

    if req.engine == "vllm":
        mml = req.max_model_len or model.max_position_embeddings or context
        mnbt = req.max_num_batched_tokens or budget_mod.default_batch_limits(hw)[0]
        cfg = engines.vllm_config(model, dtype, par, pool, mml, mnbt, req.block_size)
        engine_data = {"num_blocks": cfg.num_blocks, "vllm_kv_cache_tokens": cfg.kv_cache_tokens,
                       "vllm_kv_cache_tokens_late_versions": cfg.kv_cache_tokens_late,
                       "vllm_max_concurrency": round(cfg.max_concurrency, 4), "vllm_max_model_len": mml,
                       "vllm_block_size": cfg.block_size, "vllm_kv_cache_groups": cfg.num_groups,
                       "vllm_padding_layers": cfg.padding_layers,
                       "vllm_fits_one_max_len_request": cfg.needed_for_one_request_bytes <= pool}
        rows = [("num_blocks (min over workers)", cfg.num_blocks), ("block size", cfg.block_size),
                ("KV cache groups x layers per group", f"{cfg.num_groups} x {cfg.group_size}"),
                ("padding layers", cfg.padding_layers),
                ("GPU KV cache size (log line)", f"{cfg.kv_cache_tokens:,} tokens"),
                (f"Maximum concurrency for {mml:,} tokens per request", f"{cfg.max_concurrency:.2f}x"),
                ("KV needed for one max_model_len request", fmt(cfg.needed_for_one_request_bytes))]
        tables.append(Table("vLLM v1 accounting (engine-faithful)", ("figure", "value"), tuple(rows)))
        if cfg.needed_for_one_request_bytes > pool:
            notes.append(f"vLLM would refuse to start: one {mml:,}-token request needs "
                         f"{cfg.needed_for_one_request_bytes / 2**30:.2f} GiB of KV but the pool is "
                         f"{pool / 2**30:.2f} GiB; lower --max-model-len.")
        if not cfg.uniform:
            notes.append("Hybrid model: vLLM's 'GPU KV cache size' line is not capacity (pitfall 5); read "
                         "'Maximum concurrency'.")
        if cfg.mamba_page_padding:
            notes.append(f"vLLM pads the linear-attention state page by {cfg.mamba_page_padding:.1%} to match "
                         f"the {cfg.block_size}-token attention block.")
    elif req.engine == "sglang":
        pool_sg = engines.sglang_pool(model, dtype, par, pool, req.block_size)
        engine_data = {"sglang_max_total_num_tokens": pool_sg.max_total_num_tokens,
                       "sglang_cell_size_bytes": pool_sg.cell_size_bytes, "sglang_page_size": pool_sg.page_size,
                       "mem_fraction_static": b.utilization if not b.given_pool else None}
        tables.append(Table("SGLang accounting (engine-faithful)", ("figure", "value"), (
            ("cell size (bytes per token on this rank)", pool_sg.cell_size_bytes),
            ("max_total_num_tokens", pool_sg.max_total_num_tokens),
            ("page size", pool_sg.page_size),
        )))
        if any(g.kind.kind == "sliding_window" for g in model.groups):
            notes.append("SGLang splits hybrid-SWA pools by swa_full_tokens_ratio; kvplan reports the combined cell.")
    else:
        notes.append("Engine-neutral accounting: block rounding per attention kind; --engine vllm or sglang "
                     "reproduces an engine's own figures.")

    data = {
        "model": model.id,
        "hardware": hw.id,
        "kv_dtype": dtype.value,
        "engine": req.engine,
        "parallelism": {"tp": par.tp, "pp": par.pp, "dp": par.dp, "ep": par.ep, "gpus": par.gpus},
        "nodes": req.nodes,
        "prompt_tokens": req.prompt_tokens,
        "decode_tokens": req.decode_tokens,
        "context_tokens": context,
        "budget": {"hbm_bytes": b.hbm_bytes, "utilization": b.utilization, "weights_bytes": b.weights_bytes,
                   "activation_bytes": b.activation_bytes, "runtime_bytes": b.runtime_bytes,
                   "given_pool": b.given_pool},
        "kv_pool_bytes_per_gpu": pool,
        "block_size": block,
        "kv_bytes_per_request_per_gpu": per_request_gpu,
        "max_concurrency": total,
        "max_concurrency_per_replica": per_replica,
        "replicas": replicas,
        "kv_capacity_tokens": capacity_tokens,
        "kv_capacity_tokens_total": capacity_tokens * replicas,
        "by_context": [{"context_tokens": int(c), **{s[0]: (None if s[1][i] < 0 else int(s[1][i])) for s in series}}
                       for i, c in enumerate(contexts)],
        "overflow": overflow_runs,
        "tpot_seconds": tpot,
        "tiers": {"l2_dram_bytes_per_gpu": l2_per_gpu, "l2_requests": int(parked_l2),
                  "l3_ssd_bytes_per_gpu": l3_per_gpu, "l3_requests": int(parked_l3),
                  "offload_threshold_fraction": overflow_runs[-1]["offload_threshold_fraction"],
                  "d2h_bytes_per_second": d2h_bytes_s},
        "shared_prefix_tokens": shared,
        "token_budget": req.token_budget,
        **engine_data,
    }
    chart = Chart(f"Concurrent requests by context ({par.describe()})", "context tokens",
                  tuple(f"{int(c):,}" for c in contexts),
                  tuple((name, tuple(float(max(v, 0)) for v in values)) for name, values in series),
                  "requests, deployment")
    derivations = _derivations(req, model, b, block, context, per_request_gpu, per_replica, total, capacity_tokens,
                               per_token_gpu, shared_copy, l2_per_gpu, l2_note, fmt)
    assumptions = (
        "Pool per GPU from the waterfall unless --kv-pool gives it; every GPU of a replica has the same pool.",
        "A request's KV on the most loaded GPU sets the fit (TP replication and the largest PP stage included).",
        "Each layer's tokens are rounded up to whole blocks (vLLM: 16 for GQA, 64 for FlashMLA).",
        "Sliding-window layers hold min(context, window) tokens in the neutral count; vLLM mode adds "
        "max_num_batched_tokens - 1 and a block.",
        f"Overflow timing uses {tpot * 1000:g} ms per decode step ({tpot_note}).",
    ) + tuple(f"{spec.id}: {note}" for spec in (req.model, req.hardware) for note in spec.notes)
    return Result("concurrency", data, tuple(tables), tuple(notes), assumptions, tuple(derivations), (chart,))


def _derivations(req, model, b, block, context, per_request_gpu, per_replica, total, capacity_tokens, per_token_gpu,
                 shared_copy, l2_per_gpu, l2_note, fmt) -> list[Derivation]:
    sources = tuple(model.sources) + tuple(req.hardware.sources) + (engines.VLLM_SOURCE,)
    hw = req.hardware
    out = []
    if not b.given_pool:
        if b.fraction_name == "mem_fraction_static":
            fraction_source = b.fraction_note
        elif b.utilization == budget_mod.DEFAULT_GPU_MEMORY_UTILIZATION:
            fraction_source = budget_mod.DEFAULT_UTILIZATION_SOURCE
        else:
            fraction_source = "gpu_memory_utilization given with --gpu-memory-utilization"
        out.append(Derivation(
            "kv_pool_bytes_per_gpu", fmt(b.kv_pool_bytes),
            f"HBM x {b.fraction_name} - weights - activation reserve - runtime reserve",
            f"{b.hbm_bytes:,} x {b.utilization:g} - {b.weights_bytes:,} - {b.activation_bytes:,} - "
            f"{b.runtime_bytes:,} = {b.kv_pool_bytes:,} B (weights: {b.weights_note}; activations: "
            f"{b.activation_note})",
            tuple(x.cite() for x in (hw.hbm_capacity_gib, model.weight_bytes or model.params_total) if x)
            + (fraction_source, b.runtime_note)))
    else:
        out.append(Derivation("kv_pool_bytes_per_gpu", fmt(b.kv_pool_bytes), "given with --kv-pool",
                              f"{b.kv_pool_bytes:,} B"))
    out.append(Derivation(
        "kv_bytes_per_request_per_gpu", fmt(per_request_gpu),
        "sum over groups on the most loaded GPU: layers x ceil(tokens held / block) x block x per-rank bytes "
        "per token + fixed state" + (" - the shared prefix" if shared_copy else ""),
        f"at {context:,} tokens, block {block}: {per_request_gpu:,} B", sources))
    out.append(Derivation(
        "max_concurrency", f"{total}",
        "floor((pool - shared prefix copy) / per-request bytes) x replicas",
        f"floor(({b.kv_pool_bytes:,} - {shared_copy:,}) / {per_request_gpu:,}) = {per_replica} x "
        f"{req.parallelism.dp} = {total}", sources))
    out.append(Derivation(
        "kv_capacity_tokens", f"{capacity_tokens:,}",
        "floor(pool / per-GPU bytes per token past every window), rounded down to blocks",
        f"floor({b.kv_pool_bytes:,} / {per_token_gpu:,}) -> {capacity_tokens:,} tokens", sources))
    out.append(Derivation("l2_dram_bytes_per_gpu", fmt(l2_per_gpu),
                          "--dram per node / GPUs per node, else min(2 x pool, node DRAM / GPUs per node)",
                          l2_note, tuple(s for s in (hw.node.host_dram_gb.cite() if hw.node.host_dram_gb else None,)
                                         if s)))
    return out
