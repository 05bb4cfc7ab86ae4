"""Layer kinds. Each kind knows its own cache bytes and how they split under tensor parallelism.

Every kind answers the same questions, so no calculator branches on layer kind:

* ``cache_bytes_per_token(dtype, tp)``: bytes one cached token takes in one layer, on one TP rank
  (``tp=1`` gives the whole layer);
* ``tokens_held(context)``: how many tokens of a request at ``context`` the layer keeps;
* ``grows_with_context``: whether each further token adds bytes forever (False past a window);
* ``state_bytes(tp)``: fixed per-request state of one layer on one rank (linear attention / SSM);
* ``bytes_at_context(dtype, context, tp)``: the layer's bytes for one request;
* ``check_tp(tp)``: raises a user error for a TP the engines refuse;
* ``formula(dtype, tp)``: the per-layer arithmetic as text, symbolic and with numbers substituted.

TP rules (engine-kv-accounting.md, pitfalls 1 and 2): GQA heads per rank = max(1, kv_heads // tp), so
KV heads are replicated when tp > kv_heads and a TP that neither divides nor is divided by kv_heads is
refused; the MLA latent and the sparse-attention indexer key are one "head" and are whole on every
rank; linear-attention state is split by heads.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from kvplan.dtypes import KVDtype
from kvplan.errors import KvplanError

STATE_DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}

PositiveInt = Annotated[int, Field(gt=0, le=1_000_000)]


class _Kind(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    grows_with_context: ClassVar[bool] = True

    def check_tp(self, tp: int) -> None:  # pragma: no cover - overridden where a rule applies
        return None

    def cache_bytes_per_token(self, dtype: KVDtype, tp: int = 1) -> int:
        return 0

    def tokens_held(self, context: int) -> int:
        return context

    def state_bytes(self, tp: int = 1) -> int:
        return 0

    def bytes_at_context(self, dtype: KVDtype, context: int, tp: int = 1) -> int:
        return self.cache_bytes_per_token(dtype, tp) * self.tokens_held(context) + self.state_bytes(tp)

    def marginal_bytes_per_token(self, dtype: KVDtype, tp: int = 1) -> int:
        """Bytes each further token adds once past any window (0 for windows and fixed state)."""
        return self.cache_bytes_per_token(dtype, tp) if self.grows_with_context else 0


def _check_heads_divisible(what: str, heads: int | None, tp: int) -> None:
    if heads is not None and heads % tp:
        raise KvplanError(f"tp={tp} does not divide the {heads} {what}",
                          f"choose a tp that divides {heads}")


class FullAttention(_Kind):
    """Full causal attention with K/V heads: MHA (kv_heads = q_heads), GQA, or MQA (kv_heads = 1)."""

    kind: Literal["full_attention"] = "full_attention"
    kv_heads: PositiveInt
    head_dim_k: PositiveInt
    head_dim_v: PositiveInt
    q_heads: PositiveInt | None = None

    @property
    def label(self) -> str:
        if self.q_heads is not None and self.q_heads == self.kv_heads:
            flavour = "MHA"
        elif self.kv_heads == 1:
            flavour = "MQA"
        else:
            flavour = "GQA"
        dims = f"{self.head_dim_k}" if self.head_dim_k == self.head_dim_v else f"{self.head_dim_k}/{self.head_dim_v}"
        return f"{flavour}, {self.kv_heads} KV heads x {dims} dims"

    def kv_heads_per_rank(self, tp: int) -> int:
        return max(1, self.kv_heads // tp)

    def check_tp(self, tp: int) -> None:
        if self.kv_heads % tp and tp % self.kv_heads:
            raise KvplanError(
                f"tp={tp} neither divides nor is a multiple of the {self.kv_heads} KV heads",
                f"choose a tp that divides {self.kv_heads} or is a multiple of it",
            )
        _check_heads_divisible("query heads", self.q_heads, tp)

    def cache_bytes_per_token(self, dtype: KVDtype, tp: int = 1) -> int:
        return self.kv_heads_per_rank(tp) * (dtype.vector_bytes(self.head_dim_k) + dtype.vector_bytes(self.head_dim_v))

    def formula(self, dtype: KVDtype, tp: int = 1) -> tuple[str, str]:
        heads = self.kv_heads_per_rank(tp)
        head_text = f"{heads}" if tp == 1 else f"max(1, {self.kv_heads} // {tp}) = {heads}"
        k, v = dtype.vector_bytes(self.head_dim_k), dtype.vector_bytes(self.head_dim_v)
        symbolic = "kv_heads_per_rank x (bytes(K head) + bytes(V head))"
        substituted = f"{head_text} x ({k} + {v}) = {self.cache_bytes_per_token(dtype, tp):,} B"
        return symbolic, substituted


class SlidingWindowAttention(FullAttention):
    """Attention over the last ``window`` tokens only: a request never holds more than the window.

    The engine-neutral count is min(context, window) tokens. vLLM holds window - 1 +
    max_num_batched_tokens tokens, plus one block (engine-kv-accounting.md, pitfall 6); that
    engine-specific figure belongs to the engine-faithful mode.
    """

    kind: Literal["sliding_window"] = "sliding_window"  # type: ignore[assignment]
    window: PositiveInt
    grows_with_context: ClassVar[bool] = False

    @property
    def label(self) -> str:
        return super().label + f", window {self.window:,}"

    def tokens_held(self, context: int) -> int:
        return min(context, self.window)


class MLA(_Kind):
    """Multi-head latent attention (DeepSeek V2/V3/R1): one latent of kv_lora_rank + qk_rope_head_dim
    per token per layer, whole on every TP rank."""

    kind: Literal["mla"] = "mla"
    kv_lora_rank: PositiveInt
    qk_rope_head_dim: PositiveInt
    qk_nope_head_dim: PositiveInt | None = None
    v_head_dim: PositiveInt | None = None
    q_heads: PositiveInt | None = None
    q_lora_rank: PositiveInt | None = None
    # How an "fp8" request is stored. "per_tensor": 1 B per latent element. "ds_mla": DeepSeek's FP8 MLA
    # layout (656 B/layer for r=512, rope=64), which vLLM forces for DeepSeek V3.2 whenever the cache
    # dtype is fp8 (DeepseekV32ForCausalLM.verify_and_update_config, engine-kv-accounting.md).
    fp8_layout: Literal["per_tensor", "ds_mla"] = "per_tensor"

    @property
    def latent_dim(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def label(self) -> str:
        return f"MLA {self.kv_lora_rank} + rope {self.qk_rope_head_dim} = {self.latent_dim}"

    def check_tp(self, tp: int) -> None:
        _check_heads_divisible("query heads", self.q_heads, tp)

    def _ds_mla_bytes(self) -> int:
        if self.kv_lora_rank % 128:
            raise KvplanError(f"fp8_ds_mla needs kv_lora_rank divisible by 128, got {self.kv_lora_rank}",
                              "use fp8 or bf16")
        return self.kv_lora_rank + self.kv_lora_rank // 128 * 4 + self.qk_rope_head_dim * 2

    def stored_dtype(self, dtype: KVDtype) -> KVDtype:
        if dtype is KVDtype.FP8 and self.fp8_layout == "ds_mla":
            return KVDtype.FP8_DS_MLA
        return dtype

    def cache_bytes_per_token(self, dtype: KVDtype, tp: int = 1) -> int:
        dtype = self.stored_dtype(dtype)
        if dtype is KVDtype.FP8_DS_MLA:
            return self._ds_mla_bytes()
        if dtype.is_per_token_head:
            raise KvplanError(f"{dtype.value} is not defined for an MLA latent",
                              "use fp8, fp8_ds_mla, nvfp4 or bf16 for MLA models")
        return dtype.vector_bytes(self.latent_dim)

    def formula(self, dtype: KVDtype, tp: int = 1) -> tuple[str, str]:
        stored = self.stored_dtype(dtype)
        total = self.cache_bytes_per_token(dtype, tp)
        tp_note = "" if tp == 1 else f" (whole latent on each of {tp} TP ranks)"
        if stored is KVDtype.FP8_DS_MLA:
            r, rope = self.kv_lora_rank, self.qk_rope_head_dim
            return ("kv_lora_rank x 1 B + kv_lora_rank/128 x 4 B scales + qk_rope_head_dim x 2 B",
                    f"{r} + {r // 128} x 4 + {rope} x 2 = {total:,} B{tp_note}")
        return ("bytes((kv_lora_rank + qk_rope_head_dim) elements)",
                f"bytes({self.kv_lora_rank} + {self.qk_rope_head_dim} = {self.latent_dim}) in {stored.value}"
                f" = {total:,} B{tp_note}")


class SparseIndexer(_Kind):
    """DeepSeek V3.2 sparse-attention indexer key cache: one fp8 key of index_head_dim per token per
    layer with one fp32 scale per quant_block elements; stored as uint8 whatever the KV dtype, and whole
    on every TP rank (vLLM DeepseekV32IndexerCache: MLAAttentionSpec(num_kv_heads=1, head_size=132))."""

    kind: Literal["sparse_indexer"] = "sparse_indexer"
    index_head_dim: PositiveInt
    quant_block_size: PositiveInt = 128
    index_heads: PositiveInt | None = None
    index_topk: PositiveInt | None = None

    @property
    def label(self) -> str:
        return f"sparse-attention indexer key {self.index_head_dim} fp8 + scales"

    def cache_bytes_per_token(self, dtype: KVDtype, tp: int = 1) -> int:
        return self.index_head_dim + self.index_head_dim // self.quant_block_size * 4

    def formula(self, dtype: KVDtype, tp: int = 1) -> tuple[str, str]:
        d, b = self.index_head_dim, self.quant_block_size
        return ("index_head_dim x 1 B + index_head_dim/quant_block x 4 B (independent of the KV dtype)",
                f"{d} + {d // b} x 4 = {self.cache_bytes_per_token(dtype, tp):,} B")


def _state_dtype_bytes(name: str) -> int:
    return STATE_DTYPE_BYTES[name]


StateDtype = Literal["fp32", "bf16", "fp16"]


class GatedDeltaNet(_Kind):
    """Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5): a fixed state per request per layer.

    Shapes per vLLM ``gated_delta_net_state_shape``: conv state (conv_kernel - 1) x
    (head_k_dim*num_k_heads*2 + head_v_dim*num_v_heads)/tp, and SSM state (num_v_heads/tp) x head_k_dim x
    head_v_dim. Speculative-decoding extra conv rows are not counted here.
    """

    kind: Literal["gated_delta_net"] = "gated_delta_net"
    num_k_heads: PositiveInt
    num_v_heads: PositiveInt
    head_k_dim: PositiveInt
    head_v_dim: PositiveInt
    conv_kernel: PositiveInt = 4
    conv_dtype: StateDtype = "bf16"
    ssm_dtype: StateDtype = "bf16"
    grows_with_context: ClassVar[bool] = False

    @property
    def label(self) -> str:
        return (f"Gated DeltaNet state, {self.num_v_heads} V heads x {self.head_k_dim}x{self.head_v_dim}"
                f" ({self.ssm_dtype}), conv {self.conv_kernel}")

    def check_tp(self, tp: int) -> None:
        _check_heads_divisible("linear-attention key heads", self.num_k_heads, tp)
        _check_heads_divisible("linear-attention value heads", self.num_v_heads, tp)

    def cache_bytes_per_token(self, dtype: KVDtype, tp: int = 1) -> int:
        return 0

    def tokens_held(self, context: int) -> int:
        return 0

    def _conv_elems(self, tp: int) -> int:
        return (self.conv_kernel - 1) * (
            (self.head_k_dim * self.num_k_heads * 2 + self.head_v_dim * self.num_v_heads) // tp)

    def _ssm_elems(self, tp: int) -> int:
        return (self.num_v_heads // tp) * self.head_k_dim * self.head_v_dim

    def state_bytes(self, tp: int = 1) -> int:
        return (self._conv_elems(tp) * _state_dtype_bytes(self.conv_dtype)
                + self._ssm_elems(tp) * _state_dtype_bytes(self.ssm_dtype))

    def formula(self, dtype: KVDtype, tp: int = 1) -> tuple[str, str]:
        c, s = self._conv_elems(tp), self._ssm_elems(tp)
        return ("(conv_kernel-1) x (dk*nk*2 + dv*nv)/tp x conv_bytes + (nv/tp) x dk x dv x ssm_bytes, per request",
                f"{self.conv_kernel - 1} x {c // (self.conv_kernel - 1):,} x {_state_dtype_bytes(self.conv_dtype)}"
                f" + {self.num_v_heads // tp} x {self.head_k_dim} x {self.head_v_dim} x"
                f" {_state_dtype_bytes(self.ssm_dtype)} = {self.state_bytes(tp):,} B"
                f" ({c:,} + {s:,} elements)")


class Mamba2(_Kind):
    """Mamba-2 SSM layer: fixed state per request. Shapes per vLLM ``mamba2_state_shape``: conv state
    (conv_kernel - 1) x (intermediate + 2*n_groups*state_size)/tp, SSM state (n_heads/tp) x head_dim x
    state_size; groups that do not divide tp are replicated up to tp."""

    kind: Literal["mamba2"] = "mamba2"
    n_heads: PositiveInt
    head_dim: PositiveInt
    state_size: PositiveInt
    n_groups: PositiveInt = 1
    conv_kernel: PositiveInt = 4
    conv_dtype: StateDtype = "bf16"
    ssm_dtype: StateDtype = "bf16"
    grows_with_context: ClassVar[bool] = False

    @property
    def label(self) -> str:
        return f"Mamba-2 state, {self.n_heads} heads x {self.head_dim} x {self.state_size}"

    def check_tp(self, tp: int) -> None:
        _check_heads_divisible("SSM heads", self.n_heads, tp)

    def tokens_held(self, context: int) -> int:
        return 0

    def _groups(self, tp: int) -> int:
        return self.n_groups if self.n_groups % tp == 0 else tp

    def _conv_elems(self, tp: int) -> int:
        inner = self.n_heads * self.head_dim
        return (self.conv_kernel - 1) * ((inner + 2 * self._groups(tp) * self.state_size) // tp)

    def _ssm_elems(self, tp: int) -> int:
        return (self.n_heads // tp) * self.head_dim * self.state_size

    def state_bytes(self, tp: int = 1) -> int:
        return (self._conv_elems(tp) * _state_dtype_bytes(self.conv_dtype)
                + self._ssm_elems(tp) * _state_dtype_bytes(self.ssm_dtype))

    def formula(self, dtype: KVDtype, tp: int = 1) -> tuple[str, str]:
        return ("(conv_kernel-1) x (n_heads*head_dim + 2*n_groups*state)/tp x conv_bytes"
                " + (n_heads/tp) x head_dim x state x ssm_bytes, per request",
                f"{self._conv_elems(tp):,} x {_state_dtype_bytes(self.conv_dtype)} + {self._ssm_elems(tp):,} x"
                f" {_state_dtype_bytes(self.ssm_dtype)} = {self.state_bytes(tp):,} B")


LayerKind = Annotated[
    FullAttention | SlidingWindowAttention | MLA | SparseIndexer | GatedDeltaNet | Mamba2,
    Field(discriminator="kind"),
]
