"""The KV pool and what fits in it: public, pure functions every command reuses.

* ``kv_pool(scenario)``: the engine's memory budget on one GPU (raises, with a fix that can be pasted, when the
  weights and reserves leave no pool);
* ``block_tokens(scenario)``: the block (page) size the engine uses;
* ``request_bytes(scenario, context)``: one request on the most loaded GPU (block-rounded, speculative slots,
  shared prefix and a draft model's KV included);
* ``shared_prefix_copy_bytes``: the one pooled copy of a shared system prompt;
* ``fit``: whole requests a pool holds; ``first_full_step``: the decode step at which B requests overfill it;
* ``host_tier``: what offloading to host DRAM would add, sized one way for every command.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.calc import kv
from kvplan.engines import budget as budget_mod
from kvplan.errors import KvplanError
from kvplan.scenario import Scenario
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.parallel import Parallelism
from kvplan.specs.values import Bytes, Count, Tokens, derived, given

HOST_DRAM_SOURCE = "node host DRAM from the hardware preset"
# vLLM: both flags exist from v0.11.1, but the native backend starts only from v0.14.0 (kvplan/engines/vllm.py
# OFFLOAD_SINCE, read from the wheels).
OFFLOAD_SETTINGS = ("vLLM: --kv-offloading-size with --kv-offloading-backend native (OffloadingConnector, "
                    "vLLM >= 0.14); "
                    "SGLang: --enable-hierarchical-cache (HiCache)")


def block_tokens(scenario: Scenario) -> Tokens:
    return scenario.engine_adapter.block_size(scenario.sized_model, scenario.block_size)


def request_bytes(scenario: Scenario, context: int, dtype: KVDtype | None = None, par: Parallelism | None = None,
                  block: int | None = None) -> int:
    """One request at ``context`` on the most loaded GPU: its own tokens plus the speculative lookahead slots,
    less the whole blocks of a shared prefix, plus a draft model's KV (at the same TP)."""
    dtype = dtype or scenario.kv_dtype
    par = par or scenario.parallelism
    block = block or block_tokens(scenario).number()
    ctx = context + scenario.spec_tokens
    own = kv.request_bytes_per_gpu(scenario.sized_model, dtype, par, ctx, block, scenario.token_budget,
                                   scenario.shared_prefix_tokens)
    if scenario.draft is not None:
        own += kv.request_bytes_per_gpu(scenario.draft, dtype, Parallelism(tp=par.tp), ctx, block,
                                        scenario.token_budget)
    return own


def shared_prefix_copy_bytes(scenario: Scenario, dtype: KVDtype | None = None, block: int | None = None) -> int:
    """The pool's one copy of the shared prefix: the whole blocks requests give up (floor(shared / block))."""
    block = block or block_tokens(scenario).number()
    whole = (scenario.shared_prefix_tokens // block) * block
    if not whole:
        return 0
    return kv.request_bytes_per_gpu(scenario.sized_model, dtype or scenario.kv_dtype, scenario.parallelism,
                                    whole, block)


def fit(pool_bytes: int, per_request_bytes: int, shared_copy_bytes: int = 0) -> int:
    """Whole requests a pool holds: floor((pool - shared copy) / per request), at least 0."""
    return max(pool_bytes - shared_copy_bytes, 0) // max(per_request_bytes, 1)


def admitted_on_prompt_cost(scenario: Scenario, pool_bytes: int, shared_copy_bytes: int = 0) -> int:
    """The batch an engine admits when it charges only the prompt's blocks (vLLM v1 admits on the prefill's block
    cost, not the eventual decode's), capped by max_num_seqs."""
    _, max_seqs = scenario.engine_adapter.batch_limits_for(scenario)
    prompt_cost = request_bytes(scenario, scenario.prompt_tokens)
    return int(min(max_seqs.number(), fit(pool_bytes, prompt_cost, shared_copy_bytes)))


def first_full_step(scenario: Scenario, batch: int, pool_bytes: int, shared_copy_bytes: int = 0) -> int | None:
    """The first decode step at which ``batch`` requests decoding together from the prompt overfill the pool
    (None when they never do within the decode). A request's bytes never shrink as it decodes, so a bisection
    over the steps finds it without evaluating every step."""
    block = block_tokens(scenario).number()
    p = scenario.prompt_tokens

    def full(step: int) -> bool:
        return batch * request_bytes(scenario, p + step, block=block) + shared_copy_bytes > pool_bytes

    if not full(scenario.decode_tokens):
        return None
    lo, hi = 0, scenario.decode_tokens
    while lo < hi:
        mid = (lo + hi) // 2
        if full(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def kv_pool(scenario: Scenario, par: Parallelism | None = None) -> budget_mod.Budget:
    """The engine's budget on one GPU at the scenario's parallelism; refuses a deployment whose weights and
    reserves leave no pool, naming the fewest GPUs that hold the weights and one request (flags to paste)."""
    par = par or scenario.parallelism
    adapter = scenario.engine_adapter
    b = adapter.budget(scenario, scenario.sized_model, par)
    if not b.fits:
        _raise_does_not_fit(scenario, b)
    return b


def _raise_does_not_fit(scenario: Scenario, b: budget_mod.Budget):
    hw, par, model = scenario.hardware, scenario.parallelism, scenario.sized_model
    context = scenario.context_tokens

    def holds_one_request(trial: Parallelism) -> bool:
        try:
            tb = scenario.engine_adapter.budget(scenario, model, trial)
        except KvplanError:
            return False
        return tb.kv_pool_bytes >= request_bytes(scenario, context, par=trial)

    # Attention data-parallelism without expert parallelism replicates every expert on every rank: EP over the
    # TP x DP ranks may be all it takes.
    ep = par.tp * par.dp
    with_ep = Parallelism(tp=par.tp, pp=par.pp, dp=par.dp, ep=ep)
    if par.dp > 1 and not par.ep and model.params_expert is not None and holds_one_request(with_ep):
        fix = f"split the routed experts over the {ep} GPUs: add --ep {ep}"
        raise KvplanError(f"{scenario.model.id} does not fit on {hw.id} at TP={par.tp} PP={par.pp} DP={par.dp} "
                          f"without expert parallelism: each GPU holds {b.weights.number() / 2**30:,.1f} GiB of "
                          "weights (every routed expert of its TP shard)", fix)
    best = budget_mod.smallest_fitting(model, hw, par, holds_one_request)
    if best is None:
        fix = "no TP x PP up to 64 x 32 fits with these reserves; quantize the weights or use a larger GPU"
    else:
        gpus = best.tp * best.pp
        nodes = -(-gpus // hw.node.gpus_per_node)
        flags = f"--tp {best.tp} --pp {best.pp}" + (f" --nodes {nodes}" if nodes > 1 else "") + " --dp 1"
        if par.ep:
            flags += f" --ep {best.ep or best.tp}"
        fix = f"the fewest GPUs that hold the weights and one {context:,}-token request: {gpus} ({flags})"
    base = b.hbm if b.visible is None else b.visible   # vLLM applies its fraction to what the CUDA driver reports
    what = (f"weights, activations and runtime take {b.reserved_bytes / 2**30:,.1f} GiB per GPU but "
            f"{b.fraction_name} {b.fraction.value:g} x {base.number() / 2**30:,.2f} GiB leaves "
            f"{b.requested.number() / 2**30:,.1f} GiB")
    raise KvplanError(f"{scenario.model.id} does not fit on {hw.id} at TP={par.tp} PP={par.pp}: {what}", fix)


@dataclass(frozen=True)
class HostTier:
    """What offloading to host DRAM would add (nothing is offloaded unless the engine setting enables it)."""

    bytes_per_node: Bytes
    bytes_per_gpu: Bytes
    request_bytes_on_node: Bytes
    requests_per_node: Count
    enabled_by: str = OFFLOAD_SETTINGS


def host_tier(scenario: Scenario, request_bytes_per_gpu: int, dram_bytes_per_node: int | None = None) -> HostTier:
    """Host DRAM per node (``--dram``, else the node's host DRAM) and the requests it holds: a request spans
    min(TP x PP, GPUs per node) GPUs of a node, each parking its own shard."""
    hw, par = scenario.hardware, scenario.parallelism
    per_node = hw.node.gpus_per_node
    if dram_bytes_per_node is not None:
        node = Bytes(dram_bytes_per_node, given("--dram"))
    elif hw.node.host_dram_gb is not None:
        value = int(hw.node.host_dram_gb.value * 1e9)
        node = Bytes(value, derived("the node's host DRAM (nothing kept back for the OS or the engine)",
                                    f"{hw.node.host_dram_gb.value:g} GB = {value:,} B", hw.node.host_dram_gb.cite()))
    else:
        node = Bytes(None, derived("unknown: the hardware preset has no host_dram_gb"))
    gpus_on_node = min(par.tp * par.pp, per_node)
    on_node = request_bytes_per_gpu * gpus_on_node
    req_on_node = Bytes(on_node, derived("request bytes per GPU x min(TP x PP, GPUs per node)",
                                         f"{request_bytes_per_gpu:,} x min({par.tp} x {par.pp}, {per_node}) = "
                                         f"{on_node:,} B"))
    enabled_by = scenario.engine_adapter.offload_settings(OFFLOAD_SETTINGS)
    if node.value is None:
        return HostTier(node, Bytes(None), req_on_node, Count(None), enabled_by)
    per_gpu = Bytes(int(node.value) // per_node, derived("host DRAM per node / GPUs per node",
                                                         f"{node.value:,} // {per_node}"))
    fits = int(node.value) // on_node if on_node else 0
    count = Count(fits, derived("floor(host DRAM per node / request bytes on the node)",
                                f"{node.value:,} // {on_node:,} = {fits:,}"))
    return HostTier(node, per_gpu, req_on_node, count, enabled_by)
