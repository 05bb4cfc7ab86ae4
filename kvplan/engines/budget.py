"""The memory budget of one GPU, as a waterfall down to the KV pool.

HBM as the device reports it x the engine's memory fraction - weights on this GPU - activation/workspace
reserve - CUDA-graph and runtime reserve = KV pool. The waterfall and the weight and activation estimates
are engine-independent; which fraction, which reserves and which batch limits apply is each engine
adapter's business (``kvplan.engines``), which calls ``waterfall``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.specs.dtypes import WEIGHT_BYTES_PER_PARAM
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.parallel import Parallelism
from kvplan.specs.values import Bytes, Derivation, Number, derived

GIB = 2**30


@dataclass(frozen=True)
class Budget:
    """One GPU's waterfall. ``fraction_name`` is the engine's name for the fraction (vLLM's
    gpu_memory_utilization, SGLang's mem_fraction_static)."""

    hbm: Bytes
    fraction: Number
    fraction_name: str
    requested: Bytes
    weights: Bytes
    activation: Bytes
    runtime: Bytes
    kv_pool: Bytes
    given_pool: bool = False
    origin: str = "given with --kv-pool"   # where a given pool came from (--kv-pool, a start-up log)
    # What the CUDA driver reports as the device's total (vLLM's total_gpu_memory), which the fraction applies to,
    # when the engine's rules say it is below the preset's HBM; None: the fraction applies to the HBM itself.
    visible: Bytes | None = None
    # The runtime reserve's parts when the engine's rules split it (``runtime`` is their sum): non-torch memory
    # (CUDA runtime, NCCL and custom all-reduce buffers) and the CUDA-graph memory subtracted from the budget.
    non_torch: Bytes | None = None
    cuda_graphs: Bytes | None = None
    # The row that takes the HBM down to ``visible``: vLLM's driver reserve; SGLang's also counts the CUDA context and
    # the distributed set-up before the weights load (its pre-load free memory).
    hidden_label: str = "- memory the CUDA driver does not report"

    @property
    def kv_pool_bytes(self) -> int:
        return self.kv_pool.number()

    @property
    def fits(self) -> bool:
        return self.kv_pool_bytes > 0

    @property
    def reserved_bytes(self) -> int:
        return self.weights.number() + self.activation.number() + self.runtime.number()

    def lines(self) -> tuple[tuple[str, Bytes, str], ...]:
        if self.given_pool:
            return ((f"KV pool ({self.origin})", self.kv_pool, "planned from a known pool"),)
        neg = lambda b: Bytes(-b.value, b.why)  # noqa: E731
        head: tuple[tuple[str, Bytes, str], ...] = (("HBM as reported by the device", self.hbm,
                                                     "hardware preset hbm_capacity_gib"),)
        if self.visible is not None and self.visible.number() != self.hbm.number():
            hidden = Bytes(self.visible.number() - self.hbm.number(), self.visible.why)
            head += ((self.hidden_label, hidden, _why(self.visible)),)
        if self.non_torch is not None and self.cuda_graphs is not None:
            runtime: tuple[tuple[str, Bytes, str], ...] = (
                ("- non-torch memory (CUDA, NCCL, all-reduce)", neg(self.non_torch), _why(self.non_torch)),
                ("- CUDA-graph memory in the budget", neg(self.cuda_graphs), _why(self.cuda_graphs)))
        else:
            runtime = (("- CUDA-graph and runtime reserve", neg(self.runtime), _why(self.runtime)),)
        return head + (
            (f"x {self.fraction_name} {self.fraction.value:g}", self.requested, _why(self.fraction)),
            ("- weights on this GPU", neg(self.weights), _why(self.weights)),
            ("- activation / workspace reserve", neg(self.activation), _why(self.activation)),
        ) + runtime + (("= KV pool per GPU", self.kv_pool, "what the KV cache may use"),)


def _why(value) -> str:
    why = value.why
    if why is None:
        return ""
    return why.substituted or why.formula


def given_pool(pool_bytes: int) -> Budget:
    zero = Bytes(0, Derivation("not counted: the pool was given with --kv-pool", kind="input"))
    pool = Bytes(pool_bytes, Derivation("given with --kv-pool", kind="input"))
    return Budget(zero, Number(None), "fraction", zero, zero, zero, zero, pool, True)


def waterfall(hw: HardwareSpec, fraction: Number, fraction_name: str, weights: Bytes, activation: Bytes,
              runtime: Bytes, visible: Bytes | None = None, non_torch: Bytes | None = None,
              cuda_graphs: Bytes | None = None) -> Budget:
    """pool = floor(HBM x fraction) - weights - activation - runtime, each term carrying its derivation. With
    ``visible`` (what the CUDA driver reports as the total) the fraction applies to that instead of the HBM;
    ``non_torch`` and ``cuda_graphs``, when given, are the parts ``runtime`` sums (shown as two rows)."""
    if fraction.value is None or not 0 < fraction.value <= 1:
        raise KvplanError(f"{fraction_name} {fraction.value} is not in (0, 1]", "give a fraction such as 0.9")
    hbm = Bytes(hw.hbm_bytes, derived("hbm_capacity_gib x 2^30", f"{hw.hbm_capacity_gib.value:g} x 2^30 = "
                                      f"{hw.hbm_bytes:,} B", hw.hbm_capacity_gib.cite()))
    base, base_name = (hbm.number(), "HBM") if visible is None else (visible.number(), "CUDA-visible memory")
    requested_bytes = int(base * fraction.value)
    requested = Bytes(requested_bytes, derived(f"{base_name} x {fraction_name}",
                                               f"{base:,} x {fraction.value:g} = {requested_bytes:,} B"))
    pool_bytes = requested_bytes - weights.number() - activation.number() - runtime.number()
    terms = (hbm, fraction, weights, activation, runtime) + ((visible,) if visible is not None else ())
    srcs = tuple(s for v in terms if v.why for s in v.why.sources)
    pool = Bytes(pool_bytes, Derivation(
        f"{base_name} x {fraction_name} - weights - activation reserve - runtime reserve",
        f"{base:,} x {fraction.value:g} - {weights.value:,} - {activation.value:,} - {runtime.value:,} = "
        f"{pool_bytes:,} B", srcs))
    return Budget(hbm, fraction, fraction_name, requested, weights, activation, runtime, pool, visible=visible,
                  non_torch=non_torch, cuda_graphs=cuda_graphs)


def total_weight_bytes(model: ModelSpec, weight_dtype: str | None = None,
                       weights: int | None = None) -> tuple[float, str, tuple[str, ...]]:
    """(bytes, how, sources) of all the model's weights: ``weights`` (--weights SIZE) when given, else params x
    ``weight_dtype`` (--weight-dtype), else the checkpoint's bytes (its safetensors headers or index), else
    params x the config's dtype. The one place the weight total is decided; ``how`` names the source."""
    if weights is not None and weight_dtype is not None:
        raise KvplanError("--weights and --weight-dtype both given",
                          "drop one: --weights is the total itself, --weight-dtype prices params x that dtype")
    if weights is not None:
        return float(weights), f"{weights:,} B given with --weights", ()
    params = model.params_total
    if weight_dtype is not None:
        if params is None:
            raise KvplanError(f"--weight-dtype {weight_dtype} needs {model.id}'s parameter count, which it does not "
                              "give (only a checkpoint size)",
                              "drop --weight-dtype (the checkpoint size is used), or give --weights SIZE")
        per = WEIGHT_BYTES_PER_PARAM[weight_dtype]
        total = params.value * per
        how = f"{params.value:,.0f} params x {per:g} B ({weight_dtype}, given with --weight-dtype)"
        sources: tuple[str, ...] = (params.cite(),)
    else:
        estimate = model.weight_bytes_estimate()
        if estimate is None:
            raise KvplanError(f"{model.id} has no parameter count or checkpoint size, so its weights are unknown",
                              "give --weights SIZE or --kv-pool, or use a model directory with its safetensors "
                              "files or model.safetensors.index.json")
        total, how = estimate
        figure = model.weight_bytes or model.params_total
        sources = (figure.cite(),) if figure is not None else ()
    return total, how, sources


def expert_share(model: ModelSpec, weight_dtype: str | None = None) -> tuple[float, str, tuple[str, ...]] | None:
    """(fraction, how, sources) of the weight total that is routed experts: the checkpoint's routed-expert
    tensor bytes over its total (exact), unless ``weight_dtype`` prices every parameter alike, then (and when
    the checkpoint's tensors are unknown) params_expert / params_total. None for a model without routed experts."""
    if weight_dtype is None and model.expert_weight_bytes is not None and model.weight_bytes is not None:
        experts, total = model.expert_weight_bytes.value, model.weight_bytes.value
        return experts / total, f"routed-expert tensors {experts:,.0f} B of the checkpoint's {total:,.0f} B", (
            model.expert_weight_bytes.cite(),)
    if model.params_expert is not None and model.params_total is not None:
        return (model.params_expert.value / model.params_total.value, "params_expert / params_total",
                (model.params_expert.cite(),))
    return None


def weights_per_gpu(model: ModelSpec, par: Parallelism, weight_dtype: str | None = None,
                    weights: int | None = None) -> Bytes:
    """Weight bytes on the most loaded GPU. Without --ep every weight is split over tp x pp; with --ep the
    routed experts split over ep (and pp) and the rest over tp x pp, replicated across DP ranks.
    ``weight_dtype`` (--weight-dtype) replaces the checkpoint size by params x that dtype, ``weights``
    (--weights) by the total given. Approximations: embeddings, LM head and every non-expert matrix divide by
    TP (vLLM shards them; norms and routers, a few MB, are in fact replicated), and PP stages split evenly."""
    total, how, sources = total_weight_bytes(model, weight_dtype, weights)
    share = expert_share(model, weight_dtype) if par.ep else None
    if share is not None and par.ep:
        fraction, share_how, share_sources = share
        experts = round(total * fraction)   # whole bytes: the exact tensor bytes when the share is the checkpoint's
        rest = total - experts
        per_gpu = experts / (par.ep * par.pp) + rest / (par.tp * par.pp)
        note = (f"{total:,.0f} B ({how}): routed experts {fraction:.1%} ({share_how}) / (EP={par.ep} x PP={par.pp})"
                f" + the rest / (TP={par.tp} x PP={par.pp})")
        formula = "routed experts / (EP x PP) + other weights / (TP x PP)"
        sources += share_sources
    else:
        per_gpu = total / (par.tp * par.pp)
        note = f"{total:,.0f} B ({how}) / (TP={par.tp} x PP={par.pp})"
        formula = "weights / (TP x PP)"
        if par.ep:
            note += f" (--ep {par.ep} not applied: {model.id} has no routed experts to split)"
    return Bytes(int(per_gpu), derived(formula, f"{note} = {int(per_gpu):,} B", *sources))


def activation_estimate(model: ModelSpec, par: Parallelism, max_num_batched_tokens: int,
                        max_num_seqs: int) -> Bytes:
    """kvplan's estimate of the profile-run activation peak (not measured; override with --activation-reserve).

    Peak live tensors in one forward pass of T = max_num_batched_tokens tokens: the residual stream and its
    normalised copy (4 x hidden per token, bf16) plus the MLP's gate, up and activated intermediate
    (3 x intermediate / tp per token, bf16; for MoE, experts_per_token x moe_intermediate + shared experts),
    plus the sampler's fp32 logits for max_num_seqs rows (vocab x 4 B each). For comparison, vLLM logs
    report "PyTorch activation peak memory" of 1.1-1.8 GiB for 0.5B-16B models.
    """
    hidden = model.hidden_size
    if hidden is None:
        return Bytes(int(1.5 * GIB), derived("1.5 GiB flat: the model has no hidden_size",
                                             "vLLM logs show 1.1-1.8 GiB activation peaks"))
    if model.moe_intermediate_size and model.experts_per_token:
        inter = model.moe_intermediate_size * (model.experts_per_token + (model.shared_experts or 0))
    else:
        inter = model.intermediate_size or 4 * hidden
    per_token = (4 * hidden + 3 * inter // par.tp) * 2
    logits = max_num_seqs * (model.vocab_size or 0) * 4
    total = max_num_batched_tokens * per_token + logits
    return Bytes(int(total), derived(
        "max_num_batched_tokens x (4 x hidden + 3 x intermediate / TP) x 2 B + max_num_seqs x vocab x 4 B "
        "(kvplan's estimate of the profile-run peak)",
        f"{max_num_batched_tokens:,} x (4 x {hidden:,} + 3 x {inter:,}/{par.tp}) x 2 + {max_num_seqs:,} x "
        f"{model.vocab_size or 0:,} x 4 = {int(total):,} B"))


def smallest_fitting(model: ModelSpec, hw: HardwareSpec, par: Parallelism,
                     fits: Callable[[Parallelism], bool]) -> Parallelism | None:
    """The fewest GPUs (tp x pp, keeping the model's TP rules) for which ``fits`` holds (the caller decides,
    with its own reserves and its own per-request bytes at that parallelism).

    Only shapes that fill whole nodes, or fit inside one, are considered; on a tie TP stays inside a node
    (tensor parallelism across nodes is slow) and the pipeline is as short as possible."""
    per_node = hw.node.gpus_per_node
    candidates = []
    for tp in (1, 2, 4, 8, 16, 32, 64):
        try:
            model.check_tp(tp)
        except KvplanError:
            continue
        for pp in range(1, 33):
            gpus = tp * pp
            if pp > model.num_layers or (gpus % per_node and per_node % gpus):
                continue
            trial = Parallelism(tp=tp, pp=pp, dp=1, ep=par.ep if par.ep and tp % par.ep == 0 else None)
            if fits(trial):
                candidates.append(trial)
                break
    if not candidates:
        return None
    return min(candidates, key=lambda p: (p.tp * p.pp, p.tp > per_node, p.pp))
