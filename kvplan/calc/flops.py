"""Prefill (recompute) FLOPs of a model: the weight matmuls plus each layer kind's attention or state work.

    F_pf(S, h) = 2 x N_mm x (S - h) + sum over layer groups of layers x kind.prefill_attention_flops(S, h)

(DeepSeek-V3, ISCA'25, arXiv 2505.09343 §2.2.1). N_mm is the model's active weight-matmul parameters per token,
input embedding excluded and LM head included. For full attention a kind's term is A_layer x (S^2 - h^2)/2
with A_layer its FLOPs per (query, key) pair, i.e. the causal average DeepSeek's own 250 GFLOP/token
figure uses (ISCA'25, arXiv 2505.09343 §2.2.1). Windows and
top-k caps bound the keys per query; linear-attention/SSM layers add a per-token state term.

Counted: QK^T and PV matmuls of attention (2 FLOP per multiply-add), the indexer's scores, recurrent state
updates. Not counted: softmax, norms, RoPE, activation functions, biases, MoE routing beyond the router
matmul in N_mm, and the MTP draft layer. Everything here works on numbers and on numpy arrays alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.specs.model import ModelSpec

FLOPS_SOURCE = ("prefill FLOPs 2 x N_mm x (S - h) + A x (S^2 - h^2)/2: the FLOP count of DeepSeek-V3, ISCA'25; "
                "causal halving as in DeepSeek's 250 GFLOP/token (arXiv 2505.09343 §2.2.1)")


@dataclass(frozen=True)
class MatmulParams:
    """N_mm and where it came from."""

    value: float
    source: str
    estimated: bool = False


def matmul_params(model: ModelSpec) -> MatmulParams:
    """N_mm from the preset's sourced ``params_active_matmul``; failing that, params_active less the input
    embedding (vocab x hidden), an estimate that also counts norms and biases."""
    if model.params_active_matmul is not None:
        return MatmulParams(model.params_active_matmul.value, model.params_active_matmul.cite())
    if model.params_active is not None and model.vocab_size and model.hidden_size:
        embedding = model.vocab_size * model.hidden_size
        value = model.params_active.value - embedding
        if value > 0:
            return MatmulParams(
                value,
                f"estimate: params_active {model.params_active.value:,.0f} ({model.params_active.cite()}) - input "
                f"embedding {model.vocab_size:,} x {model.hidden_size:,} = {value:,.0f}; counts norms and biases, "
                "and assumes an untied LM head inside params_active",
                estimated=True)
    raise KvplanError(f"{model.id} has no params_active_matmul (N_mm) and no params_active, vocab_size and "
                      "hidden_size to estimate it from",
                      "add params_active_matmul (active matmul params per token, input embedding excluded) to the "
                      "model preset")


def attention_flops(model: ModelSpec, context, prefix=0):
    """Prefill FLOPs beyond the weight matmuls for tokens prefix..context, summed over every layer."""
    return sum(g.count * g.kind.prefill_attention_flops(context, prefix) for g in model.groups)


def linear_flops(model: ModelSpec, context, prefix=0):
    return 2 * matmul_params(model).value * (context - prefix)


def prefill_flops(model: ModelSpec, context, prefix=0):
    """FLOPs to prefill (recompute) a request of ``context`` tokens of which ``prefix`` are already cached."""
    return linear_flops(model, context, prefix) + attention_flops(model, context, prefix)


def forward_flops_per_token(model: ModelSpec, context):
    """Average forward FLOPs per token over a prefill of ``context`` tokens: 2 x N_mm + A x S / 2 uncapped.
    Three times this is the training cost per token in DeepSeek's convention (forward + 2x backward)."""
    return prefill_flops(model, context) / context


def attention_coefficient(model: ModelSpec) -> int:
    """A: attention FLOPs per (query, key) pair summed over layers (caps and state terms aside)."""
    return sum(g.count * g.kind.attention_flops_per_pair() for g in model.groups)


def attention_terms(model: ModelSpec) -> list[tuple[str, int, str, str]]:
    """(group name, layers, symbolic, substituted) for each group with attention or state FLOPs."""
    out = []
    for g in model.groups:
        symbolic, substituted = g.kind.attention_flops_formula()
        if substituted != "0":
            out.append((g.name, g.count, symbolic, substituted))
    return out
