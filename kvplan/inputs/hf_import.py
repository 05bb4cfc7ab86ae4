"""Build a ModelSpec from a Hugging Face ``config.json`` (a file, or a model folder holding one).

What is read, and how (each rule follows the transformers config class or the engines, see the comments):

* dense attention: ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads`` (absent or null
  means MHA, kv heads = query heads, unless the model's config class has another default) and ``head_dim``
  (explicit ``head_dim`` wins over ``hidden_size // num_attention_heads``; engine-kv-accounting.md pitfall 3);
* per-layer attention types: ``layer_types`` when present ("full_attention", "sliding_attention",
  "chunked_attention", "linear_attention", and the legacy "attention"/"mamba"), else the family rule of the
  config class (Gemma 3 ``sliding_window_pattern``, Gemma 2 / gpt-oss alternation, Qwen3-Next / Qwen3.5
  ``full_attention_interval``, Llama 4 ``no_rope_layers``, Qwen2/Qwen3 ``use_sliding_window`` +
  ``max_window_layers``), else a set ``sliding_window`` windows every layer (Mistral 7B v0.1);
* MLA (DeepSeek V2/V3/R1: ``kv_lora_rank`` ...) on every layer, with ``num_nextn_predict_layers`` as MTP
  layers; DeepSeek V3.2 adds the sparse-attention indexer (``index_head_dim`` ...) on every layer;
* Gated DeltaNet layers (Qwen3-Next, Qwen3.5): ``linear_*`` fields, conv state in the model dtype and SSM
  state in ``mamba_ssm_dtype`` when set (vLLM ``MambaStateDtypeCalculator``);
* multimodal checkpoints: the language model under ``text_config``;
* fields a shipped config leaves out: the config-class defaults in ``CLASS_DEFAULTS`` (pitfall 11).

Anything the importer cannot interpret fully (an unknown layer type, an SSM layout, a missing field) is a
KvplanError naming the field, never a guess. Defaults and derivations that were applied are listed in
``ModelSpec.notes``. A config.json is untrusted: the spec the importer builds (each dataclass checks its own
fields) is validated once more with pydantic at the end, as user presets are (``kvplan.inputs.validation.validate``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

from kvplan.errors import KvplanError, shorten
from kvplan.inputs import checkpoint
from kvplan.specs.layers import MLA, FullAttention, GatedDeltaNet, SlidingWindowAttention, SparseIndexer, StateDtype
from kvplan.specs.model import LayerGroup, ModelSpec, Sourced

CONFIG_NAME = "config.json"
MAX_LAYERS = 10_000  # ModelSpec.num_layers limit; checked before any per-layer list is built
INDEX_NAME = "model.safetensors.index.json"

_FULL, _SLIDING, _CHUNKED, _LINEAR = "full_attention", "sliding_attention", "chunked_attention", "linear_attention"

# transformers ``_LEGACY_LAYER_TYPE_REMAP`` (configuration_utils.py): old names still found in shipped configs.
_LEGACY_LAYER_TYPES: dict[str, str] = {"attention": _FULL, "mamba": _LINEAR}
_KNOWN_LAYER_TYPES = (_FULL, _SLIDING, _CHUNKED, _LINEAR)

# Config-class defaults for fields a shipped config.json may leave out: transformers fills an absent field
# from the model's config class, so kvplan does the same (engine-kv-accounting.md, pitfall 11). Values read
# from huggingface/transformers, src/transformers/models/<family>/configuration_<family>.py. Only fields the
# importer uses are listed. An explicit ``null`` in the config is not "absent" and takes no default.
# Gated DeltaNet defaults shared by Qwen3NextConfig, Qwen3_5TextConfig and Qwen3_5MoeTextConfig: every 4th layer
# (i + 1) % 4 == 0 is full attention; 16 key / 32 value heads of 128 dims; conv kernel 4.
_QWEN_LINEAR_DEFAULTS = {
    "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
}

CLASS_DEFAULTS: dict[str, tuple[str, dict[str, Any]]] = {
    # Gemma3TextConfig (gemma3/configuration_gemma3.py, both the __init__ and the dataclass versions):
    # head_dim=256, num_key_value_heads=4, sliding_window=4096, sliding_window_pattern=6 (layer i slides
    # unless (i + 1) % 6 == 0), vocab_size=262_208, max_position_embeddings=131_072.
    "gemma3_text": ("transformers Gemma3TextConfig", {
        "head_dim": 256, "num_key_value_heads": 4, "sliding_window": 4096, "sliding_window_pattern": 6,
        "vocab_size": 262_208, "max_position_embeddings": 131_072,
    }),
    # Gemma2Config (gemma2/configuration_gemma2.py): head_dim=256, num_key_value_heads=4, sliding_window=4096,
    # vocab_size=256_000, max_position_embeddings=8192; layer i slides when (i + 1) % 2 != 0 (fixed).
    "gemma2": ("transformers Gemma2Config", {
        "head_dim": 256, "num_key_value_heads": 4, "sliding_window": 4096,
        "vocab_size": 256_000, "max_position_embeddings": 8192,
    }),
    # GptOssConfig (gpt_oss/configuration_gpt_oss.py): head_dim=64, num_key_value_heads=8, sliding_window=128,
    # vocab_size=201_088, max_position_embeddings=131_072; layer i slides when (i + 1) % 2 != 0.
    "gpt_oss": ("transformers GptOssConfig", {
        "head_dim": 64, "num_key_value_heads": 8, "sliding_window": 128,
        "vocab_size": 201_088, "max_position_embeddings": 131_072,
    }),
    # MistralConfig (mistral/configuration_mistral.py): sliding_window=4096 (so an absent key windows every
    # layer; Mistral 7B v0.2+ ship "sliding_window": null), num_key_value_heads=8, vocab_size=32_000,
    # max_position_embeddings=4096*32; head_dim defaults to hidden_size // num_attention_heads.
    "mistral": ("transformers MistralConfig", {
        "sliding_window": 4096, "num_key_value_heads": 8, "vocab_size": 32_000,
        "max_position_embeddings": 4096 * 32,
    }),
    # Qwen2Config (qwen2/configuration_qwen2.py): use_sliding_window=False, sliding_window=4096,
    # max_window_layers=28 (layers i >= max_window_layers slide when use_sliding_window),
    # num_key_value_heads=32, vocab_size=151_936, max_position_embeddings=32_768.
    "qwen2": ("transformers Qwen2Config", {
        "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28,
        "num_key_value_heads": 32, "vocab_size": 151_936, "max_position_embeddings": 32_768,
    }),
    # Qwen3Config (qwen3/configuration_qwen3.py): as Qwen2, plus head_dim=128.
    "qwen3": ("transformers Qwen3Config", {
        "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28, "head_dim": 128,
        "num_key_value_heads": 32, "vocab_size": 151_936, "max_position_embeddings": 32_768,
    }),
    # Qwen3MoeConfig (qwen3_moe/configuration_qwen3_moe.py): use_sliding_window=False, sliding_window=4096,
    # num_key_value_heads=4, vocab_size=151_936, max_position_embeddings=32_768 (no max_window_layers).
    "qwen3_moe": ("transformers Qwen3MoeConfig", {
        "use_sliding_window": False, "sliding_window": 4096, "num_key_value_heads": 4,
        "vocab_size": 151_936, "max_position_embeddings": 32_768,
    }),
    # Qwen3NextConfig (qwen3_next/configuration_qwen3_next.py): head_dim=256, num_key_value_heads=2,
    # full_attention_interval=4 (layer i is full attention when (i + 1) % 4 == 0, else linear attention),
    # linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128,
    # linear_conv_kernel_dim=4, vocab_size=151_936, max_position_embeddings=32_768.
    "qwen3_next": ("transformers Qwen3NextConfig", {
        "head_dim": 256, "num_key_value_heads": 2, **_QWEN_LINEAR_DEFAULTS,
        "vocab_size": 151_936, "max_position_embeddings": 32_768,
    }),
    # Qwen3_5TextConfig (qwen3_5/configuration_qwen3_5.py): head_dim=256, num_key_value_heads=4, the same
    # full_attention_interval rule and linear_* defaults as Qwen3-Next, vocab_size=248_320,
    # max_position_embeddings=32_768.
    "qwen3_5_text": ("transformers Qwen3_5TextConfig", {
        "head_dim": 256, "num_key_value_heads": 4, **_QWEN_LINEAR_DEFAULTS,
        "vocab_size": 248_320, "max_position_embeddings": 32_768,
    }),
    # Qwen3_5MoeTextConfig (qwen3_5_moe/configuration_qwen3_5_moe.py): as Qwen3.5 with num_key_value_heads=2.
    "qwen3_5_moe_text": ("transformers Qwen3_5MoeTextConfig", {
        "head_dim": 256, "num_key_value_heads": 2, **_QWEN_LINEAR_DEFAULTS,
        "vocab_size": 248_320, "max_position_embeddings": 32_768,
    }),
    # Llama4TextConfig (llama4/configuration_llama4.py): head_dim=128, num_key_value_heads=8,
    # attention_chunk_size=8192, no_rope_layer_interval=4 (an empty or absent no_rope_layers means layer i
    # uses RoPE, i.e. chunked attention, unless (i + 1) % 4 == 0), vocab_size=202_048,
    # max_position_embeddings=4096*32.
    "llama4_text": ("transformers Llama4TextConfig", {
        "head_dim": 128, "num_key_value_heads": 8, "attention_chunk_size": 8192, "no_rope_layer_interval": 4,
        "vocab_size": 202_048, "max_position_embeddings": 4096 * 32,
    }),
}

# The text model_type of multimodal wrappers whose text_config may not say it (transformers sub_configs).
_TEXT_MODEL_TYPES = {
    "gemma3": "gemma3_text",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
    "llama4": "llama4_text",
}

# Families whose config classes derive layer types the same way when ``layer_types`` is absent.
_ALTERNATING_SLIDING = {"gemma2", "gpt_oss"}  # sliding when (i + 1) % 2 != 0
_FULL_ATTENTION_INTERVAL = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"}
# Gated DeltaNet families: their "linear_attention" layers are GDN (vLLM qwen3_next.py / qwen3_5.py).
_GDN_MODEL_TYPES = _FULL_ATTENTION_INTERVAL
_GDN_FIELDS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
               "linear_value_head_dim", "linear_conv_kernel_dim")

# Recurrent / SSM / other layouts kvplan does not read from an HF config. Naming them gives a clear error
# instead of a full-attention guess.
_UNSUPPORTED_MODEL_TYPES = {
    "mamba", "mamba2", "falcon_mamba", "nemotron_h", "falcon_h1", "jamba", "zamba", "zamba2", "bamba",
    "granitemoehybrid", "plamo2", "lfm2", "minimax", "minimax_m1", "kimi_linear", "rwkv", "rwkv5", "rwkv6",
    "rwkv7", "recurrent_gemma", "xlstm", "deepseek_v4",
}
_UNSUPPORTED_FIELDS = (
    "hybrid_override_pattern", "layers_block_type", "attn_layer_indices", "attn_type_list",
    "linear_attn_config", "compress_ratios", "ssm_state_size", "mamba_d_state", "state_size",
)

_TORCH_DTYPES = {
    "bfloat16": "bf16", "bf16": "bf16",
    "float16": "fp16", "fp16": "fp16", "half": "fp16",
    "float32": "fp32", "fp32": "fp32", "float": "fp32",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
}
_STATE_DTYPES = {"bf16", "fp16", "fp32"}

_FIX_CONFIG = "fix that field in the config, or describe the model in a preset TOML"


class _Fields:
    """Field lookup in the language-model config, with config-class defaults and error messages."""

    def __init__(self, text: dict[str, Any], top: dict[str, Any], prefix: str, model_type: str | None,
                 source: str) -> None:
        self.text, self.top, self.prefix, self.model_type, self.source = text, top, prefix, model_type, source
        self.defaults_from, self.defaults = CLASS_DEFAULTS.get(model_type or "", ("", {}))
        self.used_defaults: dict[str, Any] = {}

    def name(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def error(self, message: str, hint: str = _FIX_CONFIG) -> KvplanError:
        return KvplanError(f"{self.source}: {message}", hint)

    def has(self, key: str) -> bool:
        return key in self.text

    def get(self, key: str) -> Any:
        """The config's value; the class default when the key is absent; None for an explicit null."""
        if key in self.text:
            return self.text[key]
        if key in self.defaults:
            self.used_defaults[key] = self.defaults[key]
            return self.defaults[key]
        return None

    def whole(self, key: str, *, minimum: int = 1, maximum: int | None = None) -> int | None:
        """A whole number within [minimum, maximum], or None when the config does not set it."""
        value = self.get(key)
        return None if value is None else self._whole(key, value, minimum, maximum)

    def need(self, key: str, *, minimum: int = 1, maximum: int | None = None, why: str = "") -> int:
        """``whole`` of a key the model needs (``why``): missing or null is an error."""
        value = self.get(key)
        if value is None:
            state = "null" if key in self.text else "missing"
            need = f" ({why})" if why else ""
            raise self.error(f"{self.name(key)} is {state}{need}", f"set {key} in the config")
        return self._whole(key, value, minimum, maximum)

    def _whole(self, key: str, value: Any, minimum: int, maximum: int | None) -> int:
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float)
                                                                      and value.is_integer())):
            raise self.error(f"{self.name(key)} = {shorten(value)} is not a whole number")
        if int(value) < minimum:
            raise self.error(f"{self.name(key)} = {shorten(value)} must be at least {minimum}")
        if maximum is not None and int(value) > maximum:
            raise self.error(f"{self.name(key)} = {shorten(value)} is more than kvplan accepts ({maximum:,})")
        return int(value)

    def dim(self, key: str) -> int | None:
        """An informational dimension: a whole number or nothing (never an error)."""
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return None
        return value

    def first(self, *keys: str) -> Any:
        """The first key set in the language-model config, then in the top-level config."""
        for cfg in (self.text, self.top):
            for key in keys:
                if cfg.get(key) is not None:
                    return cfg[key]
        return None


def _basename(name: str) -> str:
    return name.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]


def _text_config(config: dict[str, Any], source: str) -> tuple[dict[str, Any], str]:
    text = config.get("text_config")
    if text is None:
        return config, ""
    if not isinstance(text, dict):
        raise KvplanError(f"{source}: text_config is not an object", _FIX_CONFIG)
    return text, "text_config."


def _reject_unsupported(f: _Fields) -> None:
    if f.model_type in _UNSUPPORTED_MODEL_TYPES:
        raise f.error(f"model_type {shorten(f.model_type)}: kvplan does not read this recurrent/SSM or compressed "
                      "attention layout from an HF config",
                      "describe the model in a preset TOML (e.g. mamba2 groups) instead")
    for key in _UNSUPPORTED_FIELDS:
        if f.text.get(key) is not None:
            raise f.error(f"{f.name(key)} describes a layer layout kvplan does not read from an HF config "
                          f"(model_type {shorten(f.model_type)})",
                          "describe the model in a preset TOML (e.g. mamba2 groups) instead")


def _layer_types(f: _Fields, n: int, notes: list[str]) -> list[str]:
    """Per-layer attention type names, from ``layer_types`` or the family rule of the config class."""
    explicit = f.text.get("layer_types")
    if explicit is not None:
        if not isinstance(explicit, list) or not all(isinstance(t, str) for t in explicit):
            raise f.error(f"{f.name('layer_types')} is not a list of names")
        if len(explicit) != n:
            raise f.error(f"{f.name('layer_types')} has {len(explicit)} entries but num_hidden_layers is {n}")
        types = [_LEGACY_LAYER_TYPES.get(t, t) for t in cast("list[str]", explicit)]
        unknown = sorted({t for t in types if t not in _KNOWN_LAYER_TYPES})
        if unknown:
            at = types.index(unknown[0])
            raise f.error(f"{f.name('layer_types')}[{at}] = {shorten(explicit[at])} is a layer type kvplan does not "
                          f"know (it knows {', '.join(_KNOWN_LAYER_TYPES)})",
                          "describe the model in a preset TOML instead")
        return types

    mt = f.model_type
    if mt == "gemma3_text":
        # Gemma3TextConfig: "sliding_attention" if (i + 1) % sliding_window_pattern else "full_attention".
        pattern = f.need("sliding_window_pattern")
        notes.append(f"layer types from sliding_window_pattern={pattern}: layer i is full attention when "
                     f"(i + 1) % {pattern} == 0, else sliding")
        return [_SLIDING if (i + 1) % pattern else _FULL for i in range(n)]
    if mt in _ALTERNATING_SLIDING:
        notes.append(f"layer types from the {mt} rule: even layers sliding, odd layers full attention")
        return [_SLIDING if (i + 1) % 2 else _FULL for i in range(n)]
    if mt == "llama4_text":
        flags = f.get("no_rope_layers")
        if not flags:  # Llama4TextConfig: an empty list means "derive from the interval"
            interval = f.need("no_rope_layer_interval")
            flags = [int((i + 1) % interval != 0) for i in range(n)]
            notes.append(f"layer types from no_rope_layer_interval={interval}: every {interval}th layer is a "
                         "full-attention NoPE layer, the others chunked attention")
        if not isinstance(flags, list) or len(flags) < n:
            raise f.error(f"{f.name('no_rope_layers')} needs one 0/1 entry per layer ({n})")
        return [_CHUNKED if flags[i] else _FULL for i in range(n)]
    if mt in _FULL_ATTENTION_INTERVAL or f.has("full_attention_interval"):
        # Qwen3NextConfig / Qwen3_5TextConfig: "linear_attention" if (i + 1) % interval else "full_attention".
        interval = f.need("full_attention_interval")
        notes.append(f"layer types from full_attention_interval={interval}: layer i is full attention when "
                     f"(i + 1) % {interval} == 0, else linear attention")
        return [_LINEAR if (i + 1) % interval else _FULL for i in range(n)]
    if any(f.has(key) for key in _GDN_FIELDS):
        raise f.error(f"the config has linear-attention fields ({', '.join(k for k in _GDN_FIELDS if f.has(k))}) "
                      "but no layer_types or full_attention_interval saying which layers use them",
                      "add layer_types to the config")
    use_sliding = f.get("use_sliding_window")
    if use_sliding is not None:
        window = f.get("sliding_window")
        if not use_sliding or window is None:
            if window is not None:
                notes.append(f"sliding_window={window} is ignored: use_sliding_window is false")
            return [_FULL] * n
        # Qwen2Config: "sliding_attention" if sliding_window is set and i >= max_window_layers.
        first_sliding = f.need("max_window_layers", minimum=0,
                              why="use_sliding_window is true and the first max_window_layers layers are full")
        notes.append(f"use_sliding_window: layers {first_sliding}.. slide (max_window_layers={first_sliding})")
        return [_SLIDING if i >= first_sliding else _FULL for i in range(n)]
    if f.get("sliding_window") is not None:
        notes.append("sliding_window is set and the config has no per-layer pattern: every layer is windowed")
        return [_SLIDING] * n
    return [_FULL] * n


def _state_dtype(f: _Fields, value: Any, field: str) -> StateDtype:
    name = _TORCH_DTYPES.get(str(value).lower()) if value is not None else None
    if name not in _STATE_DTYPES:
        raise f.error(f"{field} = {shorten(value)} is not a state dtype kvplan knows (float32, bfloat16, float16)")
    return cast(StateDtype, name)


class _Heads(TypedDict):
    """The attention-head fields full and sliding-window layers share."""

    kv_heads: int
    head_dim_k: int
    head_dim_v: int
    q_heads: int


def _attention_groups(f: _Fields, types: list[str], notes: list[str]) -> list[tuple[str, Any, list[int]]]:
    layers: dict[str, list[int]] = {}
    for i, t in enumerate(types):
        layers.setdefault(t, []).append(i)
    groups: list[tuple[str, Any, list[int]]] = []

    if any(t in layers for t in (_FULL, _SLIDING, _CHUNKED)):
        q_heads = f.need("num_attention_heads", why="attention layers need it")
        kv_heads = f.whole("num_key_value_heads")
        if kv_heads is None:
            kv_heads = q_heads
            notes.append(f"num_key_value_heads absent: MHA, {q_heads} KV heads")
        head_dim = f.whole("head_dim")
        if head_dim is None:
            hidden = f.need("hidden_size", why="head_dim is absent, so it is hidden_size / heads")
            if hidden % q_heads:
                raise f.error(f"head_dim is absent and hidden_size {hidden} is not a multiple of "
                              f"num_attention_heads {q_heads}", "add head_dim to the config")
            head_dim = hidden // q_heads
            notes.append(f"head_dim absent: hidden_size / num_attention_heads = {hidden} / {q_heads} = {head_dim}")
        heads = _Heads(kv_heads=kv_heads, head_dim_k=head_dim, head_dim_v=head_dim, q_heads=q_heads)
        if _FULL in layers:
            groups.append(("full_attention", FullAttention(**heads), layers[_FULL]))
        if _SLIDING in layers:
            window = f.need("sliding_window", why="some layers are sliding_attention")
            if f.get("use_sliding_window") is False:
                raise f.error("layer_types has sliding_attention layers but use_sliding_window is false")
            groups.append(("sliding_window", SlidingWindowAttention(window=window, **heads), layers[_SLIDING]))
        if _CHUNKED in layers:
            chunk = f.need("attention_chunk_size", why="some layers are chunked_attention")
            notes.append(f"chunked attention (chunk {chunk:,}) counted as a sliding window of {chunk:,} tokens: "
                         "a request holds at most one chunk per layer, as vLLM's ChunkedLocalAttentionSpec")
            groups.append((f"chunked_attention (window {chunk})",
                           SlidingWindowAttention(window=chunk, **heads), layers[_CHUNKED]))

    if _LINEAR in layers:
        if f.model_type not in _GDN_MODEL_TYPES:
            missing = [k for k in _GDN_FIELDS if not f.has(k)]
            if missing:
                raise f.error(f"layer type 'linear_attention' in model_type {shorten(f.model_type)}: kvplan reads "
                              f"linear attention only as Gated DeltaNet, and {f.name(missing[0])} is missing",
                              "describe the model in a preset TOML instead")
            notes.append(f"linear_attention layers of model_type {shorten(f.model_type)} read as Gated DeltaNet "
                         "from the linear_* fields")
        nk, nv, dk, dv, conv = (f.need(k, why="linear_attention layers need it") for k in _GDN_FIELDS)
        model_dtype = f.first("dtype", "torch_dtype")
        if model_dtype is None:
            conv_dtype: StateDtype = "bf16"
            notes.append("no dtype/torch_dtype in the config: linear-attention conv state taken as bf16")
        else:
            conv_dtype = _state_dtype(f, model_dtype, "dtype")
        ssm_value = f.first("mamba_ssm_dtype")
        ssm_dtype = conv_dtype if ssm_value is None else _state_dtype(f, ssm_value, f.name("mamba_ssm_dtype"))
        groups.append(("gated_delta_net", GatedDeltaNet(
            num_k_heads=nk, num_v_heads=nv, head_k_dim=dk, head_v_dim=dv, conv_kernel=conv,
            conv_dtype=conv_dtype, ssm_dtype=ssm_dtype), layers[_LINEAR]))
    return groups


def _mla_groups(f: _Fields, config: dict[str, Any], n: int, notes: list[str]) -> list[tuple[str, Any, list[int]]]:
    explicit = f.text.get("layer_types")
    if isinstance(explicit, list):
        other = sorted({str(t) for t in explicit} - {_FULL, "attention"})
        if other:
            raise f.error(f"{f.name('layer_types')} has {shorten(other[0])} in an MLA model; kvplan reads MLA on "
                          "every layer only", "describe the model in a preset TOML instead")
    every = list(range(n))
    architectures = [a for cfg in (config, f.text) if isinstance(cfg.get("architectures"), list)
                     for a in cfg["architectures"]]
    is_v32 = "DeepseekV32ForCausalLM" in architectures or f.model_type == "deepseek_v32"
    indexer = f.get("index_head_dim") is not None
    # vLLM DeepseekV32ForCausalLM.verify_and_update_config maps any fp8 KV cache dtype to fp8_ds_mla.
    fp8_layout = "ds_mla" if is_v32 else "per_tensor"
    mla_fields: dict[str, Any] = dict(
        kv_lora_rank=f.need("kv_lora_rank"),
        qk_rope_head_dim=f.need("qk_rope_head_dim", why="the MLA latent is kv_lora_rank + rope"),
        qk_nope_head_dim=f.whole("qk_nope_head_dim"),
        v_head_dim=f.whole("v_head_dim"),
        q_heads=f.whole("num_attention_heads"),
        q_lora_rank=f.whole("q_lora_rank"),
        fp8_layout=fp8_layout,
    )
    if indexer and "index_topk" in {field.name for field in dataclasses.fields(MLA)}:
        # DeepSeek Sparse Attention: each query attends to the index_topk keys its indexer picks.
        mla_fields["index_topk"] = f.whole("index_topk")
    mla = MLA(**mla_fields)
    groups: list[tuple[str, Any, list[int]]] = [("mla", mla, every)]
    if indexer:
        kinds = f.text.get("indexer_types")
        if kinds is not None and (not isinstance(kinds, list) or any(k != "full" for k in kinds)):
            raise f.error(f"{f.name('indexer_types')} = {shorten(kinds)}: kvplan reads an indexer key cache on every "
                          "layer only", "describe the model in a preset TOML instead")
        groups.append(("sparse_indexer", SparseIndexer(
            index_head_dim=f.need("index_head_dim"),
            index_heads=f.whole("index_n_heads"),
            index_topk=f.whole("index_topk"),
        ), every))
        if not is_v32:
            notes.append("sparse-attention indexer on every layer; fp8 MLA layout left per-tensor (vLLM forces "
                         "fp8_ds_mla only for DeepseekV32ForCausalLM)")
    return groups


def _mtp_layers(f: _Fields) -> int:
    """MTP draft layers: DeepSeek/GLM ``num_nextn_predict_layers``, Qwen3.5 ``mtp_num_hidden_layers``."""
    for cfg, prefix in ((f.text, f.prefix), (f.top, "")):
        for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
            value = cfg.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise f.error(f"{prefix}{key} = {shorten(value)} is not a whole number of layers")
            return value
    return 0


def _weight_dtype(f: _Fields, notes: list[str]) -> str:
    quant = f.first("quantization_config")
    if isinstance(quant, dict):
        if quant.get("kv_cache_quant_algo") or quant.get("kv_cache_scheme"):
            notes.append("the checkpoint declares a KV-cache quantization "
                         f"({quant.get('kv_cache_quant_algo') or quant.get('kv_cache_scheme')}); kvplan's KV dtype "
                         "is chosen separately (engine-kv-accounting.md, pitfall 10)")
        method = str(quant.get("quant_method", "")).lower()
        algo = str(quant.get("quant_algo", "")).upper()
        if method in ("fp8", "mxfp4"):
            return method
        if method in ("awq", "gptq") and quant.get("bits") in (4, 8):
            return "int4" if quant["bits"] == 4 else "int8"
        if method == "modelopt" and algo in ("FP8", "NVFP4"):
            return algo.lower()
        if method == "compressed-tensors":   # llm-compressor checkpoints (RedHatAI FP8-dynamic, W8A8, W4A16)
            groups = quant.get("config_groups")
            weights = [g.get("weights") or {} for g in groups.values()] if isinstance(groups, dict) else []
            kinds = {(w.get("num_bits"), w.get("type")) for w in weights if isinstance(w, dict)}
            named: dict[tuple[Any, Any], str] = {(8, "float"): "fp8", (8, "int"): "int8", (4, "int"): "int4",
                                                 (4, "float"): "nvfp4"}
            if len(kinds) == 1 and next(iter(kinds)) in named:
                return named[next(iter(kinds))]
        notes.append(f"quantization_config quant_method {shorten(method or '?')} is not mapped to a weight dtype; "
                     "weight dtype taken from torch_dtype")
    value = f.first("torch_dtype", "dtype")
    if value is None:
        notes.append("no torch_dtype/dtype in the config: weight dtype taken as bf16")
        return "bf16"
    name = _TORCH_DTYPES.get(str(value).lower())
    if name is None:
        raise f.error(f"torch_dtype = {shorten(value)} is not a dtype kvplan knows", "use bfloat16, float16 or float32")
    return name


def _params(f: _Fields, n: int, mtp_layers: int, source: str, notes: list[str], moe: bool) -> dict[str, Sourced]:
    """params_total, params_active, params_active_matmul and params_expert counted from the config's dims."""
    from kvplan.inputs.hf_params import count_params

    count, formula = count_params(f, n, mtp_layers)
    if count is None:
        notes.append(formula)
        return {}
    cite = lambda what, value: Sourced(value=value, source=f"{what} derived from {source}: {formula}",  # noqa: E731
                                       kind="X")
    params = {"params_total": cite("parameters", count.total), "params_active": cite("active", count.active),
              "params_active_matmul": cite("N_mm (active, input embedding excluded)", count.matmul)}
    if count.routed and moe:
        params["params_expert"] = cite("routed-expert parameters", count.routed)
    return params


def _describe(groups: list[tuple[str, Any, list[int]]], n: int) -> str:
    parts = []
    for name, kind, layers in groups:
        label = getattr(kind, "label", kind.kind)
        parts.append(f"{len(layers)} x {name} ({label})")
    return f"Imported from a Hugging Face config: {n} layers; " + "; ".join(parts) + "."


def model_from_hf_config(config: dict, source: str, weight_bytes: int | None = None, *,
                         model_id: str | None = None, weight_source: str | None = None,
                         weights: WeightsFound | None = None) -> ModelSpec:
    """The ModelSpec a parsed HF ``config.json`` describes. ``source`` names the file in messages and in
    ``ModelSpec.sources``; ``weight_bytes`` (e.g. a safetensors index's total_size) becomes
    ``weight_bytes``, cited as ``weight_source``; ``weights`` (what ``find_weights`` found: safetensors headers,
    or an index's total_size) replaces both. The parameter counts come from the config's dimensions
    (``kvplan.inputs.hf_params``)."""
    if weights is not None and weights.tensors is None:
        weight_bytes, weight_source = weights.total_size, weights.source
    from kvplan.inputs.validation import validate

    if not isinstance(config, dict):
        raise KvplanError(f"{source}: the config is not a JSON object", "give a Hugging Face config.json")
    try:
        spec = _build(config, source, weight_bytes, model_id, weight_source, weights)
    except ValueError as err:  # a value the layer kinds or ModelSpec refuse (e.g. a zero or huge window)
        raise KvplanError(f"{source}: {err}", _FIX_CONFIG) from None
    except (TypeError, KeyError, IndexError, AttributeError) as err:
        # a field of a shape no config class gives it (a table where a list belongs, ...): the config is
        # untrusted, so this is the user's file to fix, not a kvplan bug
        raise KvplanError(f"{source}: a field has an unexpected shape ({type(err).__name__}: {err})",
                          _FIX_CONFIG) from None
    # The boundary check user presets get: pydantic over the same dataclasses, from the spec's plain data.
    return validate(ModelSpec, dataclasses.asdict(spec), source, _FIX_CONFIG)


def _build(config: dict[str, Any], source: str, weight_bytes: int | None, model_id: str | None,
           weight_source: str | None, weights: WeightsFound | None = None) -> ModelSpec:
    text, prefix = _text_config(config, source)
    model_type = text.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        outer = config.get("model_type")
        model_type = _TEXT_MODEL_TYPES.get(outer, outer) if isinstance(outer, str) else None
    f = _Fields(text, config, prefix, model_type, source)
    _reject_unsupported(f)
    n = f.need("num_hidden_layers", maximum=MAX_LAYERS, why="kvplan needs the layer count")
    notes: list[str] = []

    if f.get("kv_lora_rank") is not None:
        groups = _mla_groups(f, config, n, notes)
    elif f.get("index_head_dim") is not None:
        raise f.error(f"{f.name('index_head_dim')} is set but kv_lora_rank is not: a sparse-attention indexer "
                      "without an MLA latent is a layout kvplan does not read",
                      "describe the model in a preset TOML instead")
    else:
        groups = _attention_groups(f, _layer_types(f, n, notes), notes)

    mtp_layers = _mtp_layers(f)
    weight_dtype = _weight_dtype(f, notes)
    dims = {key: f.dim(key) for key in ("hidden_size", "num_attention_heads", "vocab_size", "max_position_embeddings")}
    # MLP / MoE dims for the activation-reserve estimate (kvplan.engines.budget). gpt-oss names its per-expert
    # width intermediate_size and its experts per token experts_per_token.
    dims["experts_per_token"] = f.dim("num_experts_per_tok") or f.dim("experts_per_token")
    dims["shared_experts"] = f.dim("n_shared_experts")
    if f.get("model_type") == "gpt_oss":
        dims["moe_intermediate_size"] = f.dim("intermediate_size")
    else:
        dims["intermediate_size"] = f.dim("intermediate_size")
        dims["moe_intermediate_size"] = f.dim("moe_intermediate_size")
    dims["num_experts"] = f.dim("n_routed_experts") or f.dim("num_local_experts") or f.dim("num_experts")
    params = _params(f, n, mtp_layers, source, notes, dims["num_experts"] is not None)
    expert_bytes = None
    if weights is not None:
        notes.extend(weights.notes)
        if weights.tensors is not None:
            found = checkpoint.account(weights.tensors, weights.files, n, mtp_layers)
            weight_bytes, weight_source = found.total, f"{weights.source}: {found.describe()}"
            if found.experts:
                expert_bytes = Sourced(value=found.experts, source=f"{weights.source}: tensors named .experts.",
                                       kind="C")
    quant = checkpoint.quantization_note(config)
    if quant:
        notes.append(quant)
    if f.used_defaults:
        shown = ", ".join(f"{k}={v}" for k, v in f.used_defaults.items())
        notes.insert(0, f"absent from the config, defaults of {f.defaults_from}: {shown}")

    figures: dict[str, Any] = {**params, **dims}   # parameter counts and dims, by ModelSpec field
    raw_name = config.get("_name_or_path") if isinstance(config.get("_name_or_path"), str) else None
    name = model_id or (_basename(raw_name) if raw_name else "") or "hf-config"
    return ModelSpec(
        id=name.lower().replace(" ", "-"),
        name=name,
        description=_describe(groups, n),
        sources=(source,),
        num_layers=n,
        groups=tuple(LayerGroup(name=g, kind=kind, layers=tuple(layers)) for g, kind, layers in groups),
        mtp_layers=mtp_layers,
        weight_dtype=weight_dtype,
        weight_bytes=None if weight_bytes is None else Sourced(
            value=weight_bytes, source=weight_source or f"{source}: weight bytes", kind="C"),
        expert_weight_bytes=expert_bytes,
        **figures,
        notes=tuple(notes),
    )


def _read_json(path: Path, what: str) -> Any:
    """The parsed JSON of a regular file (``kvplan.inputs.files.read_json``: FIFOs refused unread, size and nesting
    bounded)."""
    from kvplan.inputs.files import read_json

    return read_json(path, what)


def _total_size(index: Any, index_path: Any) -> int | None:
    """``metadata.total_size`` of a safetensors index (None when the index does not carry it)."""
    metadata = index.get("metadata") if isinstance(index, dict) else None
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, bool) or not isinstance(total, (int, float)) or total <= 0:
        return None
    if not math.isfinite(total) or total > 1e15:
        raise KvplanError(f"safetensors index {index_path}: metadata.total_size {shorten(total)} is not a sensible "
                          "byte count",
                          "fix or remove model.safetensors.index.json")
    return int(total)


SINGLE_FILE = "model.safetensors"


@dataclass
class WeightsFound:
    """A checkpoint's weights as found: the tensors of its safetensors headers (``tensors``, from ``files``
    files), or failing that an index's ``total_size``; ``source`` says where; ``notes`` what was missing."""

    source: str
    tensors: list[checkpoint.Tensor] | None = None
    files: int = 0
    total_size: int | None = None
    notes: list[str] = field(default_factory=list)


def find_weights(find: Callable[[str], Path | None], where: str,
                 remote: Callable[[list[str]], list[checkpoint.Tensor]] | None = None) -> WeightsFound | None:
    """The weights of a checkpoint whose files ``find(name)`` locates (a path, or None when absent): the
    headers of the shards ``model.safetensors.index.json`` lists (or of ``model.safetensors``); shards not
    found locally are read by ``remote(names)`` (header-only range reads) when given; failing both, the
    index's ``metadata.total_size`` (exact total, no expert split). None when there is no safetensors file."""
    index_path = find(INDEX_NAME)
    if index_path is not None:
        index = _read_json(index_path, "safetensors index")
        total = _total_size(index, index_path)
        has_map = isinstance(index, dict) and index.get("weight_map")
        names = checkpoint.shard_names(index, str(index_path)) if has_map else []
        paths = [find(name) for name in names]
        local = [p for p in paths if p is not None]
        if names and len(local) == len(paths):
            found: list[checkpoint.Tensor] = []
            for path in local:
                header, data_bytes = checkpoint.read_header(path)
                found += checkpoint.tensors(header, str(path), data_bytes)
            return WeightsFound(f"safetensors headers of {where}", found, len(local))
        if names and remote is not None:
            return WeightsFound(f"safetensors headers of {where} (read remotely)", remote(names), len(names))
        source = f"{index_path}: metadata.total_size = {total:,} B" if total else str(index_path)
        missing = sum(p is None for p in paths)
        why = (f"{missing} of its {len(names)} shards are not here" if names else "it has no weight_map")
        note = (f"weights from {INDEX_NAME} metadata.total_size: {why}, so the routed-expert share is estimated "
                "from the parameter counts" if total else
                f"{index_path} has no usable metadata.total_size and {why}; weight bytes unknown")
        return WeightsFound(source, total_size=total, notes=[note])
    single = find(SINGLE_FILE)
    if single is not None:
        header, data_bytes = checkpoint.read_header(single)
        return WeightsFound(f"safetensors header of {single}", checkpoint.tensors(header, str(single), data_bytes), 1)
    if remote is not None:
        found = remote([SINGLE_FILE])
        if found:
            return WeightsFound(f"safetensors header of {where}/{SINGLE_FILE} (read remotely)", found, 1)
    return None


def load_hf_model(path: Path) -> ModelSpec:
    """A model from an HF ``config.json`` file or a model folder (its ``config.json``, and the weight size from
    ``model.safetensors.index.json`` when the folder has one)."""
    from kvplan.inputs.files import probe

    try:
        path = Path(path).expanduser()
    except RuntimeError:  # ~user with no such user
        raise KvplanError(f"model config {path}: cannot expand ~", "give the full path") from None
    kind, why = probe(path)
    if kind == "dir":
        config_path = path / CONFIG_NAME
        inner, inner_why = probe(config_path)
        if inner == "missing":
            raise KvplanError(f"model folder {path} has no {CONFIG_NAME}",
                              "point at a Hugging Face model folder or at its config.json")
        if inner != "file":
            raise KvplanError(f"{config_path} {inner_why or 'is a folder, not a file'}",
                              f"make {CONFIG_NAME} in the model folder a regular file")
        model_id: str | None = path.resolve().name
    elif kind == "file":
        config_path = path
        model_id = None
    else:
        raise KvplanError(f"model config {path} {why}",
                          "give a Hugging Face config.json file or a model folder holding one")

    config = _read_json(config_path, "model config")
    if model_id is None:
        raw = config.get("_name_or_path") if isinstance(config, dict) else None
        if isinstance(raw, str) and raw.strip("/\\"):
            model_id = _basename(raw)
        elif config_path.name == CONFIG_NAME:
            model_id = config_path.resolve().parent.name
        else:
            model_id = config_path.stem

    folder = config_path.parent

    def find(name: str) -> Path | None:
        candidate = folder / name
        kind, why = probe(candidate)
        if kind == "missing":
            return None
        if kind != "file":
            what = "safetensors index" if name == INDEX_NAME else "safetensors file"
            raise KvplanError(f"{what} {candidate} {why or 'is a folder, not a file'}",
                              f"make {name} a regular file, or remove it")
        return candidate

    weights = find_weights(find, str(folder))
    return model_from_hf_config(config, str(config_path), model_id=model_id or None, weights=weights)
