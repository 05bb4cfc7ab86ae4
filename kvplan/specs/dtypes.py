"""KV-cache data types: bytes per element and the scale overhead each one carries.

Rules follow the engines' own accounting (as read from
vLLM's ``vllm/v1/kv_cache_interface.py`` at commit 001cabc1 and SGLang's ``get_cell_size_per_token``):

* ``bf16`` / ``fp16``: 2 bytes per element, no scales.
* ``fp8`` (per-tensor scale, e4m3 or e5m2): 1 byte per element; the one scale per tensor costs nothing
  per token.
* ``fp8_per_token_head`` / ``int8_per_token_head``: 1 byte per element plus one fp32 scale (4 bytes)
  per token per head, for K and for V separately (vLLM ``AttentionSpec``: ``+ 2*block*heads*4``).
* ``nvfp4``: packed 4-bit data plus one fp8 scale per 16 elements, so a vector of ``d`` elements takes
  ``d//2 + d//16`` bytes (vLLM ``nvfp4_kv_cache_full_dim``; SGLang's FP4 cell is the same 9/16 B/elem).
* ``fp8_ds_mla``: DeepSeek's FP8 MLA layout, only for MLA latents: fp8 latent, one fp32 scale per 128
  latent elements, and the RoPE part kept in bf16: ``r + r//128*4 + rope*2`` = 656 B for r=512, rope=64.
"""

from __future__ import annotations

from enum import Enum

from kvplan.errors import KvplanError


class KVDtype(str, Enum):
    """A KV cache dtype kvplan can size, and the bytes one cached vector takes in it."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    FP8_PER_TOKEN_HEAD = "fp8_per_token_head"
    INT8_PER_TOKEN_HEAD = "int8_per_token_head"
    NVFP4 = "nvfp4"
    FP8_DS_MLA = "fp8_ds_mla"

    @property
    def is_per_token_head(self) -> bool:
        return self in (KVDtype.FP8_PER_TOKEN_HEAD, KVDtype.INT8_PER_TOKEN_HEAD)

    def vector_bytes(self, elements: int) -> int:
        """Bytes to store one cached vector of ``elements`` values (one head's K, say) for one token."""
        if self in (KVDtype.BF16, KVDtype.FP16):
            return 2 * elements
        if self is KVDtype.FP8:
            return elements
        if self.is_per_token_head:
            return elements + 4
        if self is KVDtype.NVFP4:
            if elements % 16:
                raise KvplanError(f"nvfp4 needs vectors whose length is a multiple of 16, got {elements}",
                                  "choose fp8 or bf16 for this model")
            return elements // 2 + elements // 16
        raise KvplanError(f"kv dtype {self.value} applies only to MLA latents",
                          "use fp8 for attention heads, fp8_ds_mla only for DeepSeek MLA models")


_ALIASES = {
    "bf16": KVDtype.BF16,
    "bfloat16": KVDtype.BF16,
    "fp16": KVDtype.FP16,
    "float16": KVDtype.FP16,
    "half": KVDtype.FP16,
    "fp8": KVDtype.FP8,
    "fp8_e4m3": KVDtype.FP8,
    "fp8_e5m2": KVDtype.FP8,
    "fp8_per_token_head": KVDtype.FP8_PER_TOKEN_HEAD,
    "int8_per_token_head": KVDtype.INT8_PER_TOKEN_HEAD,
    "nvfp4": KVDtype.NVFP4,
    "fp4": KVDtype.NVFP4,
    "fp8_ds_mla": KVDtype.FP8_DS_MLA,
}


def parse_kv_dtype(text: str | KVDtype) -> KVDtype:
    if isinstance(text, KVDtype):
        return text
    key = text.strip().lower().replace("-", "_")
    if key not in _ALIASES:
        raise KvplanError(f"unknown kv dtype {text!r}",
                          "choose one of " + ", ".join(d.value for d in KVDtype))
    return _ALIASES[key]


# Bytes per weight parameter by checkpoint dtype (for weights on each GPU, not for the KV cache).
WEIGHT_BYTES_PER_PARAM = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    # MXFP4: 4-bit values plus one 8-bit scale per 32 values = 4.25 bits.
    "mxfp4": 4.25 / 8,
    # NVFP4: 4-bit values plus one fp8 scale per 16 values = 4.5 bits.
    "nvfp4": 4.5 / 8,
    "int4": 0.5,
}
