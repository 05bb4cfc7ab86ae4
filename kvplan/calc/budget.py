"""The memory budget of one GPU, as a waterfall down to the KV pool.

HBM as the device reports it x memory-utilization fraction (vLLM's meaning: a fraction of *total*
memory, engine-kv-accounting.md 2.2) - weights on this GPU - activation/workspace reserve - CUDA-graph
and runtime reserve = KV pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.hardware import HardwareSpec
from kvplan.model import ModelSpec
from kvplan.parallel import Parallelism

GIB = 2**30

# vLLM's default gpu_memory_utilization (a fraction of total device memory).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
DEFAULT_UTILIZATION_SOURCE = ("vLLM default gpu_memory_utilization = 0.9 (fraction of total memory; "
                              "engine-kv-accounting.md 2.2)")

# vLLM EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py): on GPUs with >= 70 GiB that are not
# A100, the API server defaults to max_num_batched_tokens 8192 and max_num_seqs 1024; otherwise 2048/256.
BATCH_DEFAULTS_SOURCE = ("vLLM EngineArgs.get_batch_defaults: >= 70 GiB and not A100 -> max_num_batched_tokens "
                         "8192, max_num_seqs 1024 (API server); otherwise 2048 / 256")


def default_batch_limits(hw: HardwareSpec) -> tuple[int, int]:
    if hw.hbm_capacity_gib.value >= 70 and "a100" not in hw.id.lower():
        return 8192, 1024
    return 2048, 256


# Non-torch memory (CUDA context, NCCL buffers) and CUDA-graph capture. vLLM memory-profiling logs show
# non_torch_memory of 0.02-0.93 GiB (0.93 GiB for a TP=8 DeepSeek-V2.5 run) and "Graph capturing finished
# ... took 0.09-0.40 GiB" (public vLLM startup logs). kvplan reserves 1 GiB by default.
DEFAULT_RUNTIME_RESERVE_BYTES = 1 * GIB
RUNTIME_RESERVE_SOURCE = ("kvplan default 1 GiB: vLLM logs show non_torch_memory 0.02-0.93 GiB and CUDA-graph capture "
                          "0.09-0.40 GiB (public vLLM startup logs)")


@dataclass(frozen=True)
class WaterfallLine:
    label: str
    bytes: int
    note: str


@dataclass(frozen=True)
class Budget:
    hbm_bytes: int
    utilization: float
    weights_bytes: int
    weights_note: str
    activation_bytes: int
    activation_note: str
    runtime_bytes: int
    runtime_note: str
    kv_pool_bytes: int
    given_pool: bool
    # What the fraction is called: vLLM's gpu_memory_utilization or SGLang's mem_fraction_static.
    fraction_name: str = "gpu_memory_utilization"
    fraction_note: str = "fraction of total memory (vLLM's meaning)"

    @property
    def requested_bytes(self) -> int:
        return int(self.hbm_bytes * self.utilization)

    @property
    def fits(self) -> bool:
        return self.kv_pool_bytes > 0

    def lines(self) -> list[WaterfallLine]:
        if self.given_pool:
            return [WaterfallLine("KV pool (given with --kv-pool)", self.kv_pool_bytes, "planned from a known pool")]
        return [
            WaterfallLine("HBM as reported by the device", self.hbm_bytes, "hardware preset hbm_capacity_gib"),
            WaterfallLine(f"x {self.fraction_name} {self.utilization:g}", self.requested_bytes, self.fraction_note),
            WaterfallLine("- weights on this GPU", -self.weights_bytes, self.weights_note),
            WaterfallLine("- activation / workspace reserve", -self.activation_bytes, self.activation_note),
            WaterfallLine("- CUDA-graph and runtime reserve", -self.runtime_bytes, self.runtime_note),
            WaterfallLine("= KV pool per GPU", self.kv_pool_bytes, "what the KV cache may use"),
        ]


def weights_per_gpu(model: ModelSpec, par: Parallelism) -> tuple[int, str]:
    """Weight bytes on the most loaded GPU. Without --ep every weight is split over tp x pp; with --ep the
    routed experts split over ep (and pp) and the rest over tp x pp, replicated across DP ranks."""
    estimate = model.weight_bytes_estimate()
    if estimate is None:
        raise KvplanError(f"{model.id} has no parameter count or checkpoint size, so its weights are unknown",
                          "give --kv-pool, or use a model directory with model.safetensors.index.json")
    total, how = estimate
    if par.ep and model.params_expert is not None and model.params_total is not None:
        expert_share = model.params_expert.value / model.params_total.value
        experts = total * expert_share
        rest = total - experts
        per_gpu = experts / (par.ep * par.pp) + rest / (par.tp * par.pp)
        note = (f"{how}; routed experts {expert_share:.1%} split over EP={par.ep} x PP={par.pp}, "
                f"the rest over TP={par.tp} x PP={par.pp}")
    else:
        per_gpu = total / (par.tp * par.pp)
        note = f"{how}; split over TP={par.tp} x PP={par.pp}"
        if par.ep:
            note += f" (--ep {par.ep} not applied: {model.id} has no params_expert to split)"
    return int(per_gpu), note


def activation_estimate(model: ModelSpec, par: Parallelism, max_num_batched_tokens: int,
                        max_num_seqs: int) -> tuple[int, str]:
    """kvplan's estimate of the profile-run activation peak (not measured; override with --activation-reserve).

    Peak live tensors in one forward pass of T = max_num_batched_tokens tokens: the residual stream and its
    normalised copy (4 x hidden per token, bf16) plus the MLP's gate, up and activated intermediate
    (3 x intermediate / tp per token, bf16; for MoE, experts_per_token x moe_intermediate + shared experts),
    plus the sampler's fp32 logits for max_num_seqs rows (vocab x 4 B each). For comparison, vLLM logs
    report "PyTorch activation peak memory" of 1.1-1.8 GiB for 0.5B-16B models.
    """
    hidden = model.hidden_size
    if hidden is None:
        return int(1.5 * GIB), "1.5 GiB flat: model has no hidden_size (vLLM logs show 1.1-1.8 GiB peaks)"
    if model.moe_intermediate_size and model.experts_per_token:
        inter = model.moe_intermediate_size * (model.experts_per_token + (model.shared_experts or 0))
    else:
        inter = model.intermediate_size or 4 * hidden
    per_token = (4 * hidden + 3 * inter // par.tp) * 2
    logits = max_num_seqs * (model.vocab_size or 0) * 4
    total = max_num_batched_tokens * per_token + logits
    note = (f"estimate: {max_num_batched_tokens:,} tokens x (4 x {hidden:,} + 3 x {inter:,}/{par.tp}) x 2 B"
            f" + {max_num_seqs:,} seqs x {model.vocab_size or 0:,} vocab x 4 B")
    return int(total), note


def budget(model: ModelSpec, hw: HardwareSpec, par: Parallelism, utilization: float,
           max_num_batched_tokens: int, max_num_seqs: int, kv_pool_bytes: int | None = None,
           activation_bytes: int | None = None, runtime_bytes: int | None = None,
           extra_weights: tuple[int, str] | None = None) -> Budget:
    if not 0 < utilization <= 1:
        raise KvplanError(f"gpu memory utilization {utilization} is not in (0, 1]", "give a fraction such as 0.9")
    if kv_pool_bytes is not None:
        return Budget(hw.hbm_bytes, utilization, 0, "", 0, "", 0, "", kv_pool_bytes, True)
    weights, weights_note = weights_per_gpu(model, par)
    if extra_weights:
        weights += extra_weights[0]
        weights_note += f"; + {extra_weights[1]}"
    if activation_bytes is None:
        activation_bytes, act_note = activation_estimate(model, par, max_num_batched_tokens, max_num_seqs)
    else:
        act_note = "given with --activation-reserve"
    if runtime_bytes is None:
        runtime_bytes, run_note = DEFAULT_RUNTIME_RESERVE_BYTES, RUNTIME_RESERVE_SOURCE
    else:
        run_note = "given with --runtime-reserve"
    pool = int(hw.hbm_bytes * utilization) - weights - activation_bytes - runtime_bytes
    return Budget(hw.hbm_bytes, utilization, weights, weights_note, activation_bytes, act_note, runtime_bytes,
                  run_note, pool, False)


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
