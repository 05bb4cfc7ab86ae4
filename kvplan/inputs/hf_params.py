"""Parameter counts from the dimensions of a Hugging Face ``config.json`` (no weights needed).

The count follows the modules the transformers / vLLM model classes build from the config; each rule names
its class. Per decoder layer:

* attention, GQA: q ``H x nq·d``, k and v ``H x nkv·d``, o ``nq·d x H``; biases when the class has them
  (Qwen2Attention: q/k/v bias; ``attention_bias``: q/k/v/o bias, as Llama and gpt-oss); Qwen3 q_norm/k_norm
  (d each); gpt-oss attention sinks (nq).
* attention, MLA (DeepseekV2/V3): q_a ``H x q_lora`` + norm + q_b ``q_lora x n·(nope+rope)`` (or q
  ``H x n·(nope+rope)`` when q_lora_rank is null), kv_a ``H x (r+rope)`` + norm, kv_b ``r x n·(nope+v)``, o
  ``n·v x H``; the V3.2 indexer (wq_b, wk, k_norm weight+bias, weights_proj).
* MLP: gated (gate, up, down) ``3 x H x I``. MoE layers (DeepSeek: i >= first_k_dense_replace and
  i % moe_layer_freq == 0; Qwen MoE: i not in mlp_only_layers and (i+1) % decoder_sparse_step == 0;
  Mixtral/gpt-oss: every layer): E routed experts of ``3 x H x I_e`` (gpt-oss adds its expert biases
  ``2 I_e + H``), a router ``H x E`` (+E: gpt-oss router bias, DeepSeek V3 e_score_correction_bias), shared
  experts (DeepSeek ``n_shared_experts x 3 x H x I_e``; Qwen ``shared_expert_intermediate_size`` with its
  ``H x 1`` gate).
* two RMSNorms (2H); a final norm (H); the input embedding ``V x H``; the LM head ``V x H`` unless
  ``tie_word_embeddings``.

Totals exclude MTP draft layers (the published counts do: DeepSeek-V3's README gives 671B main model + 14B MTP
module); they are counted apart as one decoder layer + eh_proj ``2H x H`` + three norms + their own embedding
and head copies (DeepSeek's checkpoint layout). ``active`` is total less the routed experts a token does not
use (k of E), input embedding included (as dense presets give active = total); ``matmul`` (kvplan's N_mm) is
active less the input embedding. Layouts this module does not count (linear attention, Llama 4's interleaved
MoE, SSMs) give None and a note, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ParamCount:
    total: int
    active: int
    matmul: int
    routed: int
    embedding: int
    mtp: int
    formula: str

    @property
    def is_moe(self) -> bool:
        return self.routed > 0


class _Missing(Exception):
    pass


def _need(f: Any, key: str) -> int:
    value = f.dim(key)
    if value is None:
        raise _Missing(key)
    return value


def _optional(f: Any, key: str, default: int = 0) -> int:
    value = f.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _attention(f: Any, H: int, mt: str) -> tuple[int, str]:
    if f.get("kv_lora_rank") is not None:
        n, r = _need(f, "num_attention_heads"), _need(f, "kv_lora_rank")
        rope, nope, v = _need(f, "qk_rope_head_dim"), _need(f, "qk_nope_head_dim"), _need(f, "v_head_dim")
        q_lora = f.dim("q_lora_rank")
        q = H * q_lora + q_lora + q_lora * n * (nope + rope) if q_lora else H * n * (nope + rope)
        params = q + H * (r + rope) + r + r * n * (nope + v) + n * v * H
        text = f"MLA {params:,}"
        if f.get("index_head_dim") is not None:
            dim, heads = _need(f, "index_head_dim"), _need(f, "index_n_heads")
            indexer = (q_lora or H) * heads * dim + H * dim + 2 * dim + H * heads
            params += indexer
            text += f" + indexer {indexer:,}"
        return params, text
    nq = _need(f, "num_attention_heads")
    nkv = f.dim("num_key_value_heads") or nq
    d = f.dim("head_dim") or H // nq
    params = 2 * H * nq * d + 2 * H * nkv * d
    extra = 0
    if f.get("attention_bias") is True:
        extra += nq * d + 2 * nkv * d + H
    elif mt == "qwen2":
        extra += nq * d + 2 * nkv * d
    if mt in ("qwen3", "qwen3_moe"):
        extra += 2 * d
    if mt == "gpt_oss":
        extra += nq
    return params + extra, f"attention {params + extra:,}"


def _experts(f: Any) -> int:
    for key in ("n_routed_experts", "num_local_experts", "num_experts"):
        value = f.dim(key)
        if value:
            return value
    return 0


def _is_moe_layer(f: Any, i: int, E: int) -> bool:
    if not E:
        return False
    if f.get("n_routed_experts") is not None:
        freq = _optional(f, "moe_layer_freq", 1) or 1
        return i >= _optional(f, "first_k_dense_replace") and i % freq == 0
    only = f.get("mlp_only_layers") or []
    step = _optional(f, "decoder_sparse_step", 1) or 1
    return i not in only and (i + 1) % step == 0


def count_params(f: Any, num_layers: int, mtp_layers: int) -> tuple[ParamCount | None, str]:
    """The parameter count of the config read through ``f`` (``kvplan.inputs.hf_import._Fields``), and a note: the
    formula when counted, the reason when not."""
    mt = f.model_type or ""
    types = f.get("layer_types")
    if mt.startswith("llama4") or f.has("full_attention_interval") or mt in ("qwen3_next", "qwen3_5_text",
                                                                            "qwen3_5_moe_text") \
            or (isinstance(types, list) and "linear_attention" in types):
        return None, f"parameter count not derived from the config: kvplan does not count {mt} layouts"
    try:
        H, V = _need(f, "hidden_size"), _need(f, "vocab_size")
        attention, attention_text = _attention(f, H, mt)
        E = _experts(f)
        k = f.dim("num_experts_per_tok") or f.dim("experts_per_token") or 0
        moe_layers = sum(_is_moe_layer(f, i, E) for i in range(num_layers))
        dense_layers = num_layers - moe_layers
        dense_mlp = 3 * H * _need(f, "intermediate_size") if dense_layers else 0
        moe_mlp = routed_layer = 0
        if moe_layers:
            if not k:
                raise _Missing("num_experts_per_tok")
            width = f.dim("moe_intermediate_size") or _need(f, "intermediate_size")
            per_expert = 3 * H * width + (2 * width + H if mt == "gpt_oss" else 0)
            routed_layer = E * per_expert
            router = H * E + (E if mt == "gpt_oss" or f.get("topk_method") == "noaux_tc" else 0)
            shared = _optional(f, "n_shared_experts") * 3 * H * width
            shared_width = _optional(f, "shared_expert_intermediate_size")
            if shared_width:
                shared += 3 * H * shared_width + H
            moe_mlp = routed_layer + router + shared
    except _Missing as missing:
        return None, f"parameter count not derived from the config: {missing} is missing"
    tie = f.get("tie_word_embeddings")
    if tie is None:
        tie = f.top.get("tie_word_embeddings", mt.startswith("gemma"))
    embedding = V * H
    head = 0 if tie else V * H
    norms = 2 * H
    layer_dense, layer_moe = attention + dense_mlp + norms, attention + moe_mlp + norms
    total = dense_layers * layer_dense + moe_layers * layer_moe + H + embedding + head
    routed = moe_layers * routed_layer
    unused = routed - routed * k // E if E else 0
    active = total - unused
    mtp = mtp_layers * ((layer_moe if moe_layers else layer_dense) + 2 * H * H + 3 * H + 2 * V * H)
    formula = (f"{dense_layers} dense layers x ({attention_text} + MLP {dense_mlp:,} + norms {norms:,}) + "
               f"{moe_layers} MoE layers x ({attention_text} + MoE {moe_mlp:,} + norms {norms:,}) + final norm {H:,}"
               f" + embedding {V:,} x {H:,}" + (" (tied LM head)" if tie else f" + LM head {V:,} x {H:,}")
               + f" = {total:,}")
    if routed:
        formula += f"; routed experts {routed:,}, {k} of {E} used per token: active {active:,}"
    if mtp:
        formula += f"; MTP layers {mtp:,} more, not counted"
    return ParamCount(total, active, active - embedding, routed, embedding, mtp, formula), formula
