"""HF config.json import: real shipped configs, loaded from files written to tmp_path.

Each fixture copies the fields of a real shipped config.json (sources in the comment above it; fields the
importer does not read, such as vision towers and rope scaling, are trimmed or kept only where they shape
the file). Expected bytes are hand arithmetic written in the comments, not the code's output:
KV bytes per token = sum over layers of each layer kind's cache_bytes_per_token(bf16), per-request state =
sum of state_bytes().
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import KvplanError
from kvplan.inputs.hf_import import load_hf_model, model_from_hf_config
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.model import ModelSpec


def kv_per_token(spec: ModelSpec, dtype: KVDtype = KVDtype.BF16) -> int:
    return sum(kind.cache_bytes_per_token(dtype) for kinds in spec.layer_kinds for kind in kinds)


def marginal_per_token(spec: ModelSpec, dtype: KVDtype = KVDtype.BF16) -> int:
    return sum(kind.marginal_bytes_per_token(dtype) for kinds in spec.layer_kinds for kind in kinds)


def state_per_request(spec: ModelSpec) -> int:
    return sum(kind.state_bytes() for kinds in spec.layer_kinds for kind in kinds)


def layers_of(spec: ModelSpec, kind: str) -> list[int]:
    return sorted(i for g in spec.groups if g.kind.kind == kind for i in g.layers)


def write_model(tmp_path: Path, name: str, config: dict, index: dict | None = None) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    if index is not None:
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


# meta-llama/Llama-3.1-8B-Instruct config.json.
LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": True, "vocab_size": 128256,
}
LLAMA_INDEX = {"metadata": {"total_size": 16060522496},
               "weight_map": {"lm_head.weight": "model-00004-of-00004.safetensors"}}

# Qwen/QwQ-32B config.json (a Qwen2 config: sliding_window set but use_sliding_window false).
QWQ_32B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02,
    "intermediate_size": 27648, "max_position_embeddings": 40960, "max_window_layers": 64,
    "model_type": "qwen2", "num_attention_heads": 40, "num_hidden_layers": 64, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 152064,
}

# Qwen/Qwen3-32B config.json: head_dim 128 although hidden_size / heads = 5120 / 64 = 80.
QWEN3_32B = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 25600,
    "max_position_embeddings": 40960, "max_window_layers": 64, "model_type": "qwen3",
    "num_attention_heads": 64, "num_hidden_layers": 64, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}

# mistralai/Mistral-7B-v0.1 config.json: sliding window 4096 on every layer, no head_dim.
MISTRAL_7B_V01 = {
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000,
}

# google/gemma-3-27b-it config.json: the language model under text_config, which leaves out
# sliding_window_pattern, vocab_size and max_position_embeddings (Gemma3TextConfig defaults apply).
GEMMA3_27B_IT = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
    "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
    "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {
        "head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
        "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
        "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
    },
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {
        "hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
        "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
        "patch_size": 14, "vision_use_head": False,
    },
}

# deepseek-ai/DeepSeek-V2-Lite config.json: MLA with q_lora_rank null.
DEEPSEEK_V2_LITE = {
    "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001, "bos_token_id": 100000, "eos_token_id": 100001, "first_k_dense_replace": 1,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 10944,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v2",
    "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64,
    "n_shared_experts": 2, "norm_topk_prob": False, "num_attention_heads": 16, "num_experts_per_tok": 6,
    "num_hidden_layers": 27, "num_key_value_heads": 16, "pretraining_tp": 1, "q_lora_rank": None,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax", "seq_aux": True,
    "tie_word_embeddings": False, "topk_group": 1, "topk_method": "greedy", "torch_dtype": "bfloat16",
    "transformers_version": "4.33.1", "use_cache": True, "v_head_dim": 128, "vocab_size": 102400,
}

# deepseek-ai/DeepSeek-R1 config.json: MLA, one MTP layer, FP8 weights.
DEEPSEEK_R1 = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu",
    "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
    "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
    "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
    "transformers_version": "4.46.3", "use_cache": True, "v_head_dim": 128, "vocab_size": 129280,
}

# deepseek-ai/DeepSeek-V3.2-Exp config.json: the R1 layout plus the sparse-attention indexer.
DEEPSEEK_V32_EXP = {
    **{k: v for k, v in DEEPSEEK_R1.items() if k not in ("architectures", "model_type")},
    "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
    "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048,
}

# openai/gpt-oss-120b config.json: alternating sliding (window 128) / full layers, head_dim 64, MXFP4.
GPT_OSS_120B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02,
    "intermediate_size": 2880, "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
    "num_experts_per_tok": 4, "num_hidden_layers": 36, "num_key_value_heads": 8, "num_local_experts": 128,
    "output_router_logits": False, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"],
                            "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0", "use_cache": True,
    "vocab_size": 201088,
}

# Qwen/Qwen3-Next-80B-A3B-Instruct config.json: every 4th layer full attention, the rest Gated DeltaNet.
QWEN3_NEXT_80B = {
    "architectures": ["Qwen3NextForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "full_attention_interval": 4,
    "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 5120, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_next",
    "moe_intermediate_size": 512, "norm_topk_prob": True, "num_attention_heads": 16, "num_experts": 512,
    "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2,
    "output_router_logits": False, "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 10000000, "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 512, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.57.0.dev0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}

# Qwen/Qwen3.5-27B config.json: text_config with layer_types (3 linear + 1 full, x16), 48 value heads,
# mamba_ssm_dtype float32, dtype bfloat16, one MTP layer.
QWEN35_27B = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "image_token_id": 248056, "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "dtype": "bfloat16",
        "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu",
        "hidden_size": 5120, "intermediate_size": 17408,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 16,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
        "linear_num_value_heads": 48, "linear_value_head_dim": 128, "mamba_ssm_dtype": "float32",
        "max_position_embeddings": 262144, "model_type": "qwen3_5_text", "mtp_num_hidden_layers": 1,
        "num_attention_heads": 24, "num_hidden_layers": 64, "num_key_value_heads": 4,
        "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-06,
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10],
                            "partial_rotary_factor": 0.25, "rope_theta": 10000000, "rope_type": "default"},
        "tie_word_embeddings": False, "vocab_size": 248320,
    },
    "tie_word_embeddings": False, "video_token_id": 248057,
    "vision_config": {"depth": 27, "hidden_size": 1152, "model_type": "qwen3_5", "out_hidden_size": 5120},
}

# meta-llama/Llama-4-Scout-17B-16E-Instruct config.json (text_config only; no_rope_layers ships empty).
LLAMA4_SCOUT = {
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
    "text_config": {
        "attention_bias": False, "attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
        "intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 10485760,
        "model_type": "llama4_text", "no_rope_layers": [], "num_attention_heads": 40,
        "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8,
        "num_local_experts": 16, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
        "vocab_size": 202048,
    },
    "torch_dtype": "bfloat16",
}


# --- dense GQA --------------------------------------------------------------------------------------------

def test_llama_31_8b_from_file_and_from_folder_with_index(tmp_path):
    folder = write_model(tmp_path, "Llama-3.1-8B-Instruct", LLAMA_31_8B, LLAMA_INDEX)
    # 32 layers x 8 KV heads x (128 K + 128 V) x 2 B = 32 x 4,096 = 131,072 B per token.
    expected = 131_072
    for spec in (load_hf_model(folder), load_hf_model(folder / "config.json")):
        assert spec.num_layers == 32
        assert kv_per_token(spec) == expected
        assert marginal_per_token(spec) == expected
        assert state_per_request(spec) == 0
        assert spec.weight_dtype == "bf16"
        assert (spec.hidden_size, spec.num_attention_heads, spec.vocab_size, spec.max_position_embeddings) == (
            4096, 32, 128256, 131072)
        assert spec.id == "llama-3.1-8b-instruct"
        assert spec.sources == (str(folder / "config.json"),)
    spec = load_hf_model(folder)
    assert spec.weight_bytes is not None
    assert spec.weight_bytes.value == 16_060_522_496
    assert "model.safetensors.index.json" in spec.weight_bytes.source
    assert spec.weight_bytes.kind == "C"


def test_missing_num_key_value_heads_means_mha(tmp_path):
    config = {k: v for k, v in LLAMA_31_8B.items() if k != "num_key_value_heads"}
    spec = load_hf_model(write_model(tmp_path, "llama-mha", config))
    # MHA: 32 KV heads; 32 layers x 32 x 256 x 2 B = 524,288 B per token.
    assert kv_per_token(spec) == 32 * 32 * 256 * 2 == 524_288
    assert any("MHA" in note for note in spec.notes)


def test_qwq_32b_sliding_window_off_when_use_sliding_window_false(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "QwQ-32B", QWQ_32B))
    # No window anywhere: 64 layers x 8 KV heads x 256 x 2 B = 64 x 4,096 = 262,144 B, all of it marginal.
    assert kv_per_token(spec) == 64 * 8 * 256 * 2 == 262_144
    assert marginal_per_token(spec) == 262_144
    assert layers_of(spec, "sliding_window") == []
    assert any("use_sliding_window is false" in note for note in spec.notes)


def test_qwen2_max_window_layers_when_use_sliding_window_true():
    # Qwen2Config: layers i >= max_window_layers slide. 8 layers, max_window_layers 6 -> layers 6 and 7.
    config = {**QWQ_32B, "num_hidden_layers": 8, "max_window_layers": 6, "use_sliding_window": True,
              "sliding_window": 4096}
    spec = model_from_hf_config(config, "qwen2-test")
    assert layers_of(spec, "sliding_window") == [6, 7]
    assert layers_of(spec, "full_attention") == [0, 1, 2, 3, 4, 5]
    # Marginal: the 6 full layers x 4,096 B = 24,576 B per token.
    assert marginal_per_token(spec) == 6 * 4096
    # Qwen2Config: use_sliding_window true with sliding_window null windows nothing.
    spec = model_from_hf_config({**config, "sliding_window": None}, "qwen2-test")
    assert layers_of(spec, "full_attention") == list(range(8))


def test_qwen3_32b_explicit_head_dim_wins(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "Qwen3-32B", QWEN3_32B) / "config.json")
    # head_dim 128 (not 5120 / 64 = 80): 64 layers x 8 x (128 + 128) x 2 B = 262,144 B per token.
    assert kv_per_token(spec) == 64 * 8 * 256 * 2 == 262_144
    assert kv_per_token(spec) != 64 * 8 * 160 * 2  # what hidden_size / heads would give
    assert spec.groups[0].kind.head_dim_k == 128


def test_mistral_7b_v01_windows_every_layer(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "Mistral-7B-v0.1", MISTRAL_7B_V01))
    # head_dim = 4096 / 32 = 128; 32 layers x 8 x 256 x 2 B = 131,072 B per cached token.
    assert kv_per_token(spec) == 32 * 8 * 256 * 2 == 131_072
    assert layers_of(spec, "sliding_window") == list(range(32))
    assert marginal_per_token(spec) == 0
    # At 32,768 tokens each layer holds only its 4,096-token window: 131,072 x 4,096 B.
    at_32k = sum(k.bytes_at_context(KVDtype.BF16, 32_768) for kinds in spec.layer_kinds for k in kinds)
    assert at_32k == 131_072 * 4096
    assert any("every layer is windowed" in note for note in spec.notes)


def test_mistral_sliding_window_default_and_explicit_null():
    absent = {k: v for k, v in MISTRAL_7B_V01.items() if k != "sliding_window"}
    # MistralConfig default sliding_window=4096 applies to an absent key ...
    spec = model_from_hf_config(absent, "mistral-absent")
    assert {g.kind.window for g in spec.groups} == {4096}
    assert any("MistralConfig" in note for note in spec.notes)
    # ... but an explicit null (Mistral 7B v0.2+) means no window.
    spec = model_from_hf_config({**MISTRAL_7B_V01, "sliding_window": None}, "mistral-null")
    assert layers_of(spec, "full_attention") == list(range(32))


# --- sliding-window patterns and multimodal nesting -------------------------------------------------------

def test_gemma3_27b_nested_text_config_with_class_defaults(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "gemma-3-27b-it", GEMMA3_27B_IT))
    # Pattern 6 (Gemma3TextConfig default): full at i = 5, 11, ..., 59 -> 10 full, 62 - 10 = 52 sliding.
    assert layers_of(spec, "full_attention") == list(range(5, 62, 6))
    assert len(layers_of(spec, "sliding_window")) == 52
    assert {g.kind.window for g in spec.groups if g.kind.kind == "sliding_window"} == {1024}
    # Every layer: 16 KV heads x (128 + 128) x 2 B = 8,192 B; 62 x 8,192 = 507,904 B per cached token.
    assert kv_per_token(spec) == 62 * 2 * 16 * 128 * 2 == 507_904
    # Past the 1,024 window only the 10 full layers grow: 10 x 2 x 16 x 128 x 2 = 81,920 B per token.
    assert marginal_per_token(spec) == 10 * 2 * 16 * 128 * 2 == 81_920
    # Absent from text_config, so Gemma3TextConfig defaults.
    assert spec.vocab_size == 262_208
    assert spec.max_position_embeddings == 131_072
    assert spec.hidden_size == 5376
    assert spec.weight_dtype == "bf16"  # top-level torch_dtype
    assert any("Gemma3TextConfig" in note and "sliding_window_pattern=6" in note for note in spec.notes)


def test_gemma3_text_defaults_for_absent_head_fields():
    # A gemma3_text config without head_dim, num_key_value_heads, sliding_window or pattern:
    # Gemma3TextConfig gives head_dim 256, 4 KV heads, window 4096, pattern 6.
    config = {"model_type": "gemma3_text", "num_hidden_layers": 12, "num_attention_heads": 8,
              "hidden_size": 2304, "torch_dtype": "bfloat16"}
    spec = model_from_hf_config(config, "gemma3-defaults")
    assert layers_of(spec, "full_attention") == [5, 11]
    assert {g.kind.window for g in spec.groups if g.kind.kind == "sliding_window"} == {4096}
    # 12 layers x 4 heads x (256 + 256) x 2 B = 49,152 B per cached token.
    assert kv_per_token(spec) == 12 * 4 * 512 * 2 == 49_152


def test_gpt_oss_120b_alternating_layers(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "gpt-oss-120b", GPT_OSS_120B))
    assert layers_of(spec, "sliding_window") == list(range(0, 36, 2))
    assert layers_of(spec, "full_attention") == list(range(1, 36, 2))
    # head_dim 64 (2880 / 64 = 45 would be wrong): per layer 8 x (64 + 64) x 2 B = 2,048 B;
    # 36 x 2,048 = 73,728 B per cached token, 18 full x 2,048 = 36,864 B marginal.
    assert kv_per_token(spec) == 36 * 8 * 128 * 2 == 73_728
    assert marginal_per_token(spec) == 18 * 8 * 128 * 2 == 36_864
    assert {g.kind.window for g in spec.groups if g.kind.kind == "sliding_window"} == {128}
    assert spec.weight_dtype == "mxfp4"


def test_llama4_scout_chunked_attention_from_no_rope_interval(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "Llama-4-Scout-17B-16E-Instruct", LLAMA4_SCOUT))
    # Empty no_rope_layers -> interval 4: layers 3, 7, ..., 47 are full (NoPE), 36 are chunked (8,192).
    assert layers_of(spec, "full_attention") == list(range(3, 48, 4))
    assert {g.kind.window for g in spec.groups if g.kind.kind == "sliding_window"} == {8192}
    # 48 layers x 8 x (128 + 128) x 2 B = 196,608 B; marginal 12 full layers x 4,096 B = 49,152 B.
    assert kv_per_token(spec) == 48 * 8 * 256 * 2 == 196_608
    assert marginal_per_token(spec) == 12 * 8 * 256 * 2 == 49_152
    assert any("chunked attention" in note for note in spec.notes)


# --- MLA and the sparse-attention indexer -----------------------------------------------------------------

def test_deepseek_v2_lite_mla_with_null_q_lora_rank(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "DeepSeek-V2-Lite", DEEPSEEK_V2_LITE))
    assert [g.kind.kind for g in spec.groups] == ["mla"]
    mla = spec.groups[0].kind
    assert (mla.kv_lora_rank, mla.qk_rope_head_dim, mla.q_lora_rank, mla.q_heads) == (512, 64, None, 16)
    # 27 layers x (512 + 64) x 2 B = 27 x 1,152 = 31,104 B per token.
    assert kv_per_token(spec) == 27 * (512 + 64) * 2 == 31_104
    assert spec.mtp_layers == 0


def test_deepseek_r1_mla_mtp_and_fp8_weights(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "DeepSeek-R1", DEEPSEEK_R1))
    # 61 layers x 1,152 B = 70,272 B per token in bf16; per-tensor fp8: 61 x 576 = 35,136 B.
    assert kv_per_token(spec) == 61 * 1152 == 70_272
    assert kv_per_token(spec, KVDtype.FP8) == 61 * 576 == 35_136
    assert spec.mtp_layers == 1
    assert spec.weight_dtype == "fp8"
    assert spec.groups[0].kind.fp8_layout == "per_tensor"


def test_deepseek_v32_exp_mla_plus_indexer(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "DeepSeek-V3.2-Exp", DEEPSEEK_V32_EXP))
    assert layers_of(spec, "mla") == list(range(61))
    assert layers_of(spec, "sparse_indexer") == list(range(61))
    # Indexer key: 128 fp8 + 128/128 x 4 B scale = 132 B per layer, whatever the KV dtype.
    # bf16: 61 x (1,152 + 132) = 61 x 1,284 = 78,324 B per token.
    assert kv_per_token(spec) == 61 * (1152 + 132) == 78_324
    # fp8 -> fp8_ds_mla for V3.2: 512 + 4 x 4 + 64 x 2 = 656 B; 61 x (656 + 132) = 61 x 788 = 48,068 B.
    assert kv_per_token(spec, KVDtype.FP8) == 61 * (656 + 132) == 48_068
    assert spec.mtp_layers == 1


# --- hybrid linear attention ------------------------------------------------------------------------------

def test_qwen3_next_80b_gated_deltanet(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "Qwen3-Next-80B-A3B-Instruct", QWEN3_NEXT_80B))
    # full_attention_interval 4: layers 3, 7, ..., 47 full (12), the other 36 Gated DeltaNet.
    assert layers_of(spec, "full_attention") == list(range(3, 48, 4))
    assert len(layers_of(spec, "gated_delta_net")) == 36
    # KV: 12 layers x 2 KV heads x (256 + 256) x 2 B = 24,576 B per token.
    assert kv_per_token(spec) == 12 * 2 * 512 * 2 == 24_576
    # GDN state per layer (bf16 conv and SSM): conv 3 x (128 x 16 x 2 + 128 x 32) x 2 B = 49,152 B,
    # SSM 32 x 128 x 128 x 2 B = 1,048,576 B; 1,097,728 B per layer x 36 layers = 39,518,208 B per request.
    per_layer = 1_097_728
    assert state_per_request(spec) == 36 * per_layer == 39_518_208
    gdn = next(g.kind for g in spec.groups if g.kind.kind == "gated_delta_net")
    assert (gdn.conv_dtype, gdn.ssm_dtype) == ("bf16", "bf16")


def test_qwen35_27b_layer_types_and_fp32_ssm_state(tmp_path):
    spec = load_hf_model(write_model(tmp_path, "Qwen3.5-27B", QWEN35_27B))
    assert layers_of(spec, "full_attention") == list(range(3, 64, 4))
    assert len(layers_of(spec, "gated_delta_net")) == 48
    # KV: 16 full layers x 4 KV heads x (256 + 256) x 2 B = 65,536 B per token.
    assert kv_per_token(spec) == 16 * 4 * 512 * 2 == 65_536
    # GDN state per layer: conv (bf16, the model dtype) 3 x (128 x 16 x 2 + 128 x 48) x 2 B = 61,440 B;
    # SSM (mamba_ssm_dtype float32) 48 x 128 x 128 x 4 B = 3,145,728 B; 3,207,168 B x 48 = 153,944,064 B.
    per_layer = 3_207_168
    assert state_per_request(spec) == 48 * per_layer == 153_944_064
    gdn = next(g.kind for g in spec.groups if g.kind.kind == "gated_delta_net")
    assert (gdn.conv_dtype, gdn.ssm_dtype) == ("bf16", "fp32")
    assert spec.mtp_layers == 1
    assert spec.vocab_size == 248_320


def test_presets_load_model_routes_to_the_importer(tmp_path):
    from kvplan.inputs.presets import load_model

    folder = write_model(tmp_path, "Qwen3-32B", QWEN3_32B)
    assert kv_per_token(load_model(str(folder))) == 262_144
    assert kv_per_token(load_model(str(folder / "config.json"))) == 262_144


# --- errors: one line, a hint, never a traceback --------------------------------------------------------

def assert_user_error(err: KvplanError, *words: str) -> None:
    assert "\n" not in err.one_line()
    assert err.hint
    for word in words:
        assert word in err.message


def test_unknown_layer_type_is_named(tmp_path):
    config = {**GPT_OSS_120B, "layer_types": ["sliding_attention", "mystery_attention"] * 18}
    with pytest.raises(KvplanError) as info:
        load_hf_model(write_model(tmp_path, "odd", config))
    assert_user_error(info.value, "layer_types[1]", "mystery_attention")


def test_missing_num_hidden_layers_is_named(tmp_path):
    config = {k: v for k, v in LLAMA_31_8B.items() if k != "num_hidden_layers"}
    with pytest.raises(KvplanError) as info:
        load_hf_model(write_model(tmp_path, "no-layers", config))
    assert_user_error(info.value, "num_hidden_layers")


def test_missing_num_hidden_layers_in_text_config_is_named():
    config = {**GEMMA3_27B_IT, "text_config": {k: v for k, v in GEMMA3_27B_IT["text_config"].items()
                                                 if k != "num_hidden_layers"}}
    with pytest.raises(KvplanError) as info:
        model_from_hf_config(config, "gemma")
    assert_user_error(info.value, "text_config.num_hidden_layers")


def test_bad_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"num_hidden_layers": 32,,}')
    with pytest.raises(KvplanError) as info:
        load_hf_model(path)
    assert_user_error(info.value, "not valid JSON", "line 1")


def test_bad_safetensors_index_json(tmp_path):
    folder = write_model(tmp_path, "llama", LLAMA_31_8B)
    (folder / "model.safetensors.index.json").write_text("{")
    with pytest.raises(KvplanError) as info:
        load_hf_model(folder)
    assert_user_error(info.value, "safetensors index", "not valid JSON")


def test_missing_file_and_folder_without_config(tmp_path):
    with pytest.raises(KvplanError) as info:
        load_hf_model(tmp_path / "nope" / "config.json")
    assert_user_error(info.value, "does not exist")
    with pytest.raises(KvplanError) as info:
        load_hf_model(tmp_path)
    assert_user_error(info.value, "no config.json")


def test_config_not_an_object(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[1, 2]")
    with pytest.raises(KvplanError) as info:
        load_hf_model(path)
    assert_user_error(info.value, "not a JSON object")


def test_ssm_only_config_is_refused():
    # A Mamba-2 config: no attention layout kvplan can infer from an HF config.
    config = {"model_type": "mamba2", "num_hidden_layers": 64, "hidden_size": 2560, "num_heads": 80,
              "head_dim": 64, "state_size": 128, "n_groups": 1, "conv_kernel": 4}
    with pytest.raises(KvplanError) as info:
        model_from_hf_config(config, "mamba2")
    assert_user_error(info.value, "mamba2")


def test_hybrid_pattern_field_is_refused():
    config = {"model_type": "some_hybrid", "num_hidden_layers": 4, "num_attention_heads": 8,
              "hidden_size": 1024, "hybrid_override_pattern": "M*M-"}
    with pytest.raises(KvplanError) as info:
        model_from_hf_config(config, "hybrid")
    assert_user_error(info.value, "hybrid_override_pattern")


def test_layer_types_length_mismatch():
    config = {**GPT_OSS_120B, "layer_types": ["sliding_attention", "full_attention"] * 17}
    with pytest.raises(KvplanError) as info:
        model_from_hf_config(config, "gpt-oss")
    assert_user_error(info.value, "layer_types", "34", "36")


def test_sliding_layers_need_a_window():
    config = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
              "layer_types": ["sliding_attention", "full_attention"]}
    with pytest.raises(KvplanError) as info:
        model_from_hf_config(config, "no-window")
    assert_user_error(info.value, "sliding_window")


def test_indexer_without_mla_is_refused():
    config = {**QWEN3_32B, "index_head_dim": 128}
    with pytest.raises(KvplanError) as info:
        model_from_hf_config(config, "indexer")
    assert_user_error(info.value, "index_head_dim", "kv_lora_rank")


def test_linear_fields_without_a_layer_pattern_are_refused():
    config = {k: v for k, v in QWEN3_NEXT_80B.items() if k != "full_attention_interval"}
    config["model_type"] = "some_new_qwen"
    with pytest.raises(KvplanError) as info:
        model_from_hf_config(config, "linear")
    assert_user_error(info.value, "layer_types")


def test_non_integer_field_is_named():
    with pytest.raises(KvplanError) as info:
        model_from_hf_config({**QWEN3_32B, "head_dim": "128"}, "qwen3")
    assert_user_error(info.value, "head_dim", "whole number")


@pytest.mark.parametrize("change, field", [
    ({"num_hidden_layers": 10**12}, "num_hidden_layers"),       # refused before any per-layer list is built
    ({"sliding_window": 10**7}, "window"),                       # beyond what the layer kind accepts
    ({"num_key_value_heads": 0}, "num_key_value_heads"),
    ({"architectures": 3, "model_type": ["mistral"], "num_hidden_layers": None}, "num_hidden_layers"),
])
def test_out_of_range_or_wrongly_typed_values_are_user_errors(change, field):
    with pytest.raises(KvplanError) as info:
        model_from_hf_config({**MISTRAL_7B_V01, **change}, "mistral")
    assert_user_error(info.value, field)


def test_deepseek_v32_attention_cap_when_mla_carries_index_topk():
    spec = model_from_hf_config(DEEPSEEK_V32_EXP, "v32")
    assert spec.groups[0].kind.index_topk == 2048
    assert model_from_hf_config(DEEPSEEK_R1, "r1").groups[0].kind.index_topk is None


def test_weight_dtype_without_a_parameter_count_is_refused_not_ignored(tmp_path, run_cli):
    # a folder with only a checkpoint size (no parameter count): params x --weight-dtype cannot be formed, so the
    # flag would silently change nothing; it is refused, exit 2, naming the flag
    # (a config without hidden_size: the parameter count cannot be derived from its dims)
    config = {**{k: v for k, v in LLAMA_31_8B.items() if k != "hidden_size"}, "head_dim": 128}
    folder = write_model(tmp_path, "llama", config, {"metadata": {"total_size": 16_060_522_496}})
    ok = run_cli("concurrency", "-m", str(folder), "--tp", "1", "--brief")
    assert ok.code == 0, ok.err
    bad = run_cli("concurrency", "-m", str(folder), "--tp", "1", "--weight-dtype", "fp8", "--brief")
    assert bad.code == 2 and "--weight-dtype" in bad.err and len(bad.err.strip().splitlines()) == 1, bad.err
