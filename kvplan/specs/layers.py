"""Layer kinds. Each kind knows its own cache bytes and how they split under tensor parallelism.

Every kind answers the same questions, so no calculator branches on layer kind:

* ``cache_bytes_per_token(dtype, tp)``: bytes one cached token takes in one layer, on one TP rank
  (``tp=1`` gives the whole layer);
* ``tokens_cap`` / ``tokens_held(context)``: the most tokens a request keeps (None: all; a window; 0 for a
  fixed state), and how many it keeps at ``context``;
* ``grows_with_context``: whether each further token adds bytes forever (False past a window);
* ``state_bytes(tp)``: fixed per-request state of one layer on one rank (linear attention / SSM);
* ``bytes_at_context(dtype, context, tp)``: the layer's bytes for one request;
* ``check_tp(tp)``: raises a user error for a TP the engines refuse;
* ``formula(dtype, tp)``: the per-layer arithmetic as text, symbolic and with numbers substituted.

And for prefill (recompute) FLOPs and swap copies, beyond the weight matmuls the model counts as N_mm:

* ``attention_flops_per_pair()``: forward FLOPs per (query, key) pair in one layer (QK^T and PV);
* ``attended_keys_cap()``: the most keys one query attends to (a window, a top-k), None for all;
* ``state_flops_per_token()``: per-token FLOPs of a recurrent state (linear attention / SSM);
* ``prefill_attention_flops(context, prefix)``: one layer's such FLOPs to prefill tokens prefix..context;
* ``attention_flops_formula()``: that arithmetic as text;
* ``swap_copies(context, block_tokens)``: copies one layer needs in a per-layer paged swap layout.

TP rules (vLLM vllm/v1/kv_cache_interface.py @001cabc1; SGLang get_num_kv_heads): GQA heads per rank =
max(1, kv_heads // tp), so KV heads are replicated when tp > kv_heads and a TP that neither divides nor is
divided by kv_heads is refused; the MLA latent and the sparse-attention indexer key are one "head" and are
whole on every rank; linear-attention state is split by heads.
"""

from dataclasses import dataclass, fields
from types import NoneType, UnionType
from typing import Annotated, ClassVar, Literal, Union, get_args, get_origin

from kvplan.errors import KvplanError
from kvplan.specs.dtypes import KVDtype

STATE_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}

# --- spec fields: plain frozen dataclasses, checked without pydantic ------------------------------------
# The spec classes (layer kinds here, ModelSpec, HardwareSpec, Parallelism) are stdlib dataclasses, so the
# trusted path (built-in presets, calculators) never imports pydantic's model machinery. Field constraints
# are ``Annotated`` metadata objects that serve both sides: ``check_fields`` (called by each spec's
# ``__post_init__``) applies them to any construction, and pydantic, validating untrusted data at the
# boundary with ``TypeAdapter(ModelSpec)`` (kvplan.inputs.presets), reads the same objects through
# ``__get_pydantic_core_schema__``, importing pydantic_core only then.

# Pydantic reads this from a stdlib dataclass: an unknown key in a preset is an error, not ignored.
SPEC_CONFIG = {"extra": "forbid"}


class Range:
    """A whole number (never a bool, a float or a string) within bounds: ``gt``/``ge`` below, ``le`` above."""

    __slots__ = ("gt", "ge", "le")

    def __init__(self, *, gt: int | None = None, ge: int | None = None, le: int | None = None) -> None:
        self.gt, self.ge, self.le = gt, ge, le

    def problem(self, name: str, value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name} = {value!r} is not a whole number"
        if self.gt is not None and value <= self.gt:
            return f"{name} = {value} must be greater than {self.gt}"
        if self.ge is not None and value < self.ge:
            return f"{name} = {value} must be at least {self.ge}"
        if self.le is not None and value > self.le:
            return f"{name} = {value:,} must be at most {self.le:,}"
        return None

    def __get_pydantic_core_schema__(self, source, handler):
        from pydantic_core import core_schema

        return core_schema.int_schema(strict=True, gt=self.gt, ge=self.ge, le=self.le)


class Finite:
    """A finite number: an int or a float, never a bool or a string (stored as a float)."""

    __slots__ = ()

    def problem(self, name: str, value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{name} = {value!r} is not a number"
        if value != value or value in (float("inf"), float("-inf")):
            return f"{name} = {value!r} must be a finite number"
        return None

    def __get_pydantic_core_schema__(self, source, handler):
        from pydantic_core import core_schema

        return core_schema.float_schema(strict=True, allow_inf_nan=False)


class MinLen:
    """A string or tuple of at least ``n`` items."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def problem(self, name: str, value) -> str | None:
        if len(value) < self.n:
            what = "character" if isinstance(value, str) else "item"
            return f"{name} needs at least {self.n} {what}{'s' if self.n != 1 else ''}, got {len(value)}"
        return None

    def __get_pydantic_core_schema__(self, source, handler):
        from pydantic_core import PydanticCustomError, core_schema

        schema = handler(source)
        if schema.get("type") == "str":
            return {**schema, "min_length": self.n}
        n = self.n

        def at_least(value):
            # after the items validated: a tuple's own min_length would also count the items that failed
            if len(value) < n:
                raise PydanticCustomError("too_short", "should have at least {n} item(s), got {got}",
                                          {"n": n, "got": len(value)})
            return value

        return core_schema.no_info_after_validator_function(at_least, schema)


class _OneOf:
    __slots__ = ("choices",)

    def __init__(self, choices: tuple) -> None:
        self.choices = choices

    def problem(self, name: str, value) -> str | None:
        if value not in self.choices:
            return f"{name} = {value!r} is not one of {', '.join(map(repr, self.choices))}"
        return None


class Tagged:
    """A union of spec classes told apart by the string field ``key`` (each class's default for it): the
    trusted constructor dispatches on it, and pydantic builds a tagged union from it."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def choices(self, union) -> dict[str, type]:
        # the tag is each class's plain default, a class attribute
        return {getattr(cls, self.key): cls for cls in get_args(union)}

    def __get_pydantic_core_schema__(self, source, handler):
        from pydantic_core import core_schema

        return core_schema.tagged_union_schema(
            {tag: handler.generate_schema(cls) for tag, cls in self.choices(source).items()}, self.key)


def split_annotated(tp) -> tuple[object, tuple]:
    """(type, metadata) of an ``Annotated`` type; (type, ()) otherwise."""
    if get_origin(tp) is Annotated:
        base, *meta = get_args(tp)
        return base, tuple(meta)
    return tp, ()


def strip_optional(tp) -> tuple[object, bool]:
    """(T, True) for ``T | None``; (tp, False) otherwise."""
    if get_origin(tp) in (Union, UnionType):
        args = get_args(tp)
        if NoneType in args:
            rest = tuple(a for a in args if a is not NoneType)
            return (rest[0] if len(rest) == 1 else Union[rest]), True  # noqa: UP007 - a runtime union of types
    return tp, False


def construct(tp, value):
    """The value of type ``tp`` that plain data describes: a dict given for a spec dataclass becomes that
    dataclass (the layer-kind union dispatching on ``kind``), recursively, and lists become tuples. Values
    that already are spec objects are kept. Nothing is type-checked here beyond what each dataclass's
    ``__post_init__`` checks: this builds trusted data (the built-in presets); untrusted data goes through
    pydantic (``kvplan.inputs.validation.validate``)."""
    if value is None:
        return None
    tp = strip_optional(tp)[0]
    tp, meta = split_annotated(tp)
    for m in meta:
        if isinstance(m, Tagged) and isinstance(value, dict):
            return construct(m.choices(tp)[value[m.key]], value)
    origin = get_origin(tp)
    if origin is tuple and isinstance(value, (list, tuple)):
        item = get_args(tp)[0]
        return tuple(construct(item, v) for v in value)
    if origin is dict and isinstance(value, dict):
        item = get_args(tp)[1]
        return {k: construct(item, v) for k, v in value.items()}
    if isinstance(value, dict) and isinstance(tp, type) and hasattr(tp, "__dataclass_fields__"):
        types = {f.name: f.type for f in fields(tp)}
        unknown = sorted(set(value) - set(types))
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)} for {tp.__name__}")
        return tp(**{k: construct(types[k], v) for k, v in value.items()})
    return value


def _checks(meta: tuple) -> tuple:
    return tuple(m for m in meta if hasattr(m, "problem"))


def _is_nested(tp) -> bool:
    """Whether a field type holds spec dataclasses (directly, in a tuple or dict, or as a tagged union)."""
    tp, meta = split_annotated(strip_optional(tp)[0])
    if any(isinstance(m, Tagged) for m in meta) or (isinstance(tp, type) and hasattr(tp, "__dataclass_fields__")):
        return True
    return get_origin(tp) in (tuple, dict) and _is_nested(get_args(tp)[-1 if get_origin(tp) is dict else 0])


def _plan(cls: type) -> tuple:
    """Per field: (name, type, may be None, is a tuple, holds specs, checks on the value, checks on each item)."""
    plan = []
    for f in fields(cls):
        tp, optional = strip_optional(f.type)
        base, meta = split_annotated(tp)
        checks = _checks(meta)
        if get_origin(base) is Literal:
            checks += (_OneOf(get_args(base)),)
        is_tuple = get_origin(base) is tuple
        item_checks = _checks(split_annotated(get_args(base)[0])[1]) if is_tuple else ()
        nested = _is_nested(f.type)
        if checks or item_checks or is_tuple or nested:
            plan.append((f.name, f.type, optional, is_tuple, nested, checks, item_checks))
    return tuple(plan)


_PLANS: dict[type, tuple] = {}


def check_fields(spec) -> None:
    """Apply the ``Annotated`` constraints of a spec dataclass to its values. Any sequence given for a tuple
    field becomes a tuple, and plain dicts given for nested specs become those specs (``construct``), as
    pydantic models accepted them. Raises ValueError naming the field."""
    cls = type(spec)
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _plan(cls)
    for name, tp, optional, is_tuple, nested, checks, item_checks in plan:
        value = getattr(spec, name)
        if value is None and optional:
            continue
        if is_tuple and not isinstance(value, tuple):
            if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
                raise ValueError(f"{name} = {value!r} is not a list")
            value = tuple(value)
            object.__setattr__(spec, name, value)
        if nested:
            built = construct(tp, value)
            if built is not value:
                value = built
                object.__setattr__(spec, name, value)
        for check in checks:
            problem = check.problem(name, value)
            if problem:
                raise ValueError(problem)
        for i, item in enumerate(value if item_checks else ()):
            for check in item_checks:
                problem = check.problem(f"{name}[{i}]", item)
                if problem:
                    raise ValueError(problem)


PositiveInt = Annotated[int, Range(gt=0, le=1_000_000)]


def causal_pairs(tokens, cap: int | None = None):
    """(query, key) pairs a causal prefill of ``tokens`` tokens scores, each query seeing at most ``cap`` keys.

    Continuous form, the convention of DeepSeek's 250 GFLOP/token figure (arXiv 2505.09343 §2.2.1;
    formula 2, §1.1): query at position i sees min(i, cap) keys, so tokens^2/2 uncapped and
    cap*tokens - cap^2/2 once past the cap. Element-wise on numpy arrays too (numpy is not imported here).
    """
    if cap is None:
        return tokens * tokens / 2
    held = (tokens + cap - abs(tokens - cap)) / 2  # min(tokens, cap), array-safe
    return held * held / 2 + (tokens - held) * cap


def _need(value: int | None, what: str, kind: str) -> int:
    if value is None:
        raise KvplanError(f"the {kind} layer has no {what}, which its attention FLOPs need",
                          f"set {what} in the model preset")
    return value


@dataclass(frozen=True, kw_only=True)
class _Kind:
    """What every layer kind answers (module docstring); the defaults are those of a layer that caches nothing."""

    __pydantic_config__ = SPEC_CONFIG

    grows_with_context: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_fields(self)

    def check_tp(self, tp: int) -> None:  # pragma: no cover - overridden where a rule applies
        return None

    def cache_bytes_per_token(self, dtype: KVDtype, tp: int = 1) -> int:
        return 0

    @property
    def tokens_cap(self) -> int | None:
        """The most tokens one request keeps in this layer: None for every token, a window, or 0 for a
        fixed state."""
        return None

    def tokens_held(self, context: int) -> int:
        cap = self.tokens_cap
        return context if cap is None else min(context, cap)

    def holds(self) -> str:
        cap = self.tokens_cap
        return "every token" if cap is None else ("fixed state" if cap == 0 else f"last {cap:,} tokens")

    def state_bytes(self, tp: int = 1) -> int:
        return 0

    def bytes_at_context(self, dtype: KVDtype, context: int, tp: int = 1) -> int:
        return self.cache_bytes_per_token(dtype, tp) * self.tokens_held(context) + self.state_bytes(tp)

    def marginal_bytes_per_token(self, dtype: KVDtype, tp: int = 1) -> int:
        """Bytes each further token adds once past any window (0 for windows and fixed state)."""
        return self.cache_bytes_per_token(dtype, tp) if self.grows_with_context else 0

    # --- prefill FLOPs beyond the weight matmuls, and swap copies ------------------------------------
    # Tensors a per-layer paged layout copies separately for each block (attention heads: K and V apart).
    swap_tensors: ClassVar[int] = 1

    def attention_flops_per_pair(self) -> int:
        return 0

    def attended_keys_cap(self) -> int | None:
        return None

    def state_flops_per_token(self) -> int:
        return 0

    def prefill_attention_flops(self, context, prefix=0):
        """This layer's FLOPs beyond its weight matmuls to prefill tokens prefix..context (numbers or arrays)."""
        cap = self.attended_keys_cap()
        return (self.attention_flops_per_pair() * (causal_pairs(context, cap) - causal_pairs(prefix, cap))
                + self.state_flops_per_token() * (context - prefix))

    def attention_flops_formula(self) -> tuple[str, str]:
        return "no attention or state FLOPs beyond the weight matmuls", "0"

    # --- decode: one new token per request ---------------------------------------------------------------
    # GEMM kernels one decode step launches for this layer's own projections (the MLP's, the router's and the LM
    # head's are counted by kvplan.calc.costs from the model's MoE structure); each costs at least the GPU's
    # per-GEMM floor (efficiency.gemm_floor_us).
    decode_gemms: ClassVar[int] = 0

    # Numbers or numpy arrays of contexts alike (numpy is not imported here).
    def decode_keys(self, context):
        """Cached tokens one decode query reads: every held token, or a top-k where a kind picks them."""
        return _capped(context, self.tokens_cap)

    def decode_read_bytes(self, dtype: KVDtype, context, tp: int = 1):
        """Cache bytes one decode step moves for one request at ``context`` in this layer on one TP rank: the
        keys it reads, and a fixed state read and written back."""
        return self.cache_bytes_per_token(dtype, tp) * self.decode_keys(context) + 2 * self.state_bytes(tp)

    def decode_flops_per_key(self, tp: int = 1) -> float:
        """FLOPs per attended key of one decode query on one TP rank (QK^T and PV)."""
        return self.attention_flops_per_pair() / tp

    def decode_flops(self, context, tp: int = 1):
        """FLOPs beyond the weight matmuls of one decode token of one request on one TP rank."""
        return (self.decode_flops_per_key(tp) * _capped(context, self.attended_keys_cap())
                + self.state_flops_per_token() / tp)

    def swap_copies(self, context: int, block_tokens: int) -> int:
        """Copies to move one request's cache of this layer when each block of each tensor is its own copy,
        plus one per tensor of fixed state."""
        blocks = -(-self.tokens_held(context) // block_tokens)
        return self.swap_tensors * (blocks + (1 if self.state_bytes() else 0))


def _capped(context, cap):
    """min(context, cap), for numbers and numpy arrays; cap None means no cap."""
    if cap is None:
        return context
    return (context + cap - abs(context - cap)) / 2 if not isinstance(context, int) else min(context, cap)


def _check_heads_divisible(what: str, heads: int | None, tp: int) -> None:
    if heads is not None and heads % tp:
        raise KvplanError(f"tp={tp} does not divide the {heads} {what}",
                          f"choose a tp that divides {heads}")


@dataclass(frozen=True, kw_only=True)
class FullAttention(_Kind):
    """Full causal attention with K/V heads: MHA (kv_heads = q_heads), GQA, or MQA (kv_heads = 1)."""

    kind: Literal["full_attention"] = "full_attention"
    kv_heads: PositiveInt
    head_dim_k: PositiveInt
    head_dim_v: PositiveInt
    q_heads: PositiveInt | None = None
    swap_tensors: ClassVar[int] = 2  # K and V caches are separate tensors in a per-layer layout
    # fused qkv_proj and o_proj (vllm-project/vllm vllm/model_executor/models/llama.py LlamaAttention:
    # QKVParallelLinear + RowParallelLinear)
    decode_gemms: ClassVar[int] = 2

    def attention_flops_per_pair(self) -> int:
        # QK^T: 2*n_q*d_k, PV: 2*n_q*d_v; the number of KV heads does not change FLOPs (formula 1).
        return 2 * _need(self.q_heads, "q_heads", self.kind) * (self.head_dim_k + self.head_dim_v)

    def attention_flops_formula(self) -> tuple[str, str]:
        cap = self.attended_keys_cap()
        where = f", at most {cap:,} keys per query" if cap else ""
        return (f"2 x q_heads x (head_dim_k + head_dim_v) FLOP per (query, key) pair (QK^T + PV){where}",
                f"2 x {self.q_heads} x ({self.head_dim_k} + {self.head_dim_v}) = {self.attention_flops_per_pair():,}")

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

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.q_heads is not None and self.q_heads % self.kv_heads:
            raise ValueError(f"q_heads {self.q_heads} is not a multiple of kv_heads {self.kv_heads}")

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


@dataclass(frozen=True, kw_only=True)
class SlidingWindowAttention(FullAttention):
    """Attention over the last ``window`` tokens only: a request never holds more than the window.

    The engine-neutral count is min(context, window) tokens. vLLM holds window - 1 +
    max_num_batched_tokens tokens, plus one block (vLLM SlidingWindowSpec.max_memory_usage_bytes @001cabc1); that
    engine-specific figure belongs to the engine-faithful mode.
    """

    kind: Literal["sliding_window"] = "sliding_window"  # type: ignore[assignment]
    window: PositiveInt
    grows_with_context: ClassVar[bool] = False

    @property
    def label(self) -> str:
        return super().label + f", window {self.window:,}"

    @property
    def tokens_cap(self) -> int | None:
        return self.window

    def attended_keys_cap(self) -> int | None:
        return self.window


@dataclass(frozen=True, kw_only=True)
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
    # dtype is fp8 (vLLM DeepseekV32ForCausalLM.verify_and_update_config @001cabc1).
    fp8_layout: Literal["per_tensor", "ds_mla"] = "per_tensor"
    # DeepSeek Sparse Attention (V3.2): each query attends to the index_topk keys its indexer picks, in MLA's
    # MQA (absorbed) mode, each latent shared across all query heads (DeepSeek-V3.2-Exp report, "Instantiate
    # DSA Under MLA").
    index_topk: PositiveInt | None = None
    # Decode in the absorbed form: the q/kv A-projection (fused_qkv_a_proj_with_mqa with a q_lora_rank, else
    # q_proj and kv_a_proj_with_mqa apart), q_b_proj (with a q_lora_rank), the W_UK and W_UV batched matmuls
    # (torch.bmm with w_kc, w_vc) and o_proj: 5 either way (sgl-project/sglang@3e4a39e
    # python/sglang/srt/models/deepseek_v2.py, DeepseekV2AttentionMLA.forward_absorb).
    decode_gemms: ClassVar[int] = 5

    def _mha_pair_flops(self) -> int:
        # prefill in "MHA mode": QK^T over nope + rope dims, PV over v_head_dim (formula 1)
        return 2 * _need(self.q_heads, "q_heads", self.kind) * (
            _need(self.qk_nope_head_dim, "qk_nope_head_dim", self.kind) + self.qk_rope_head_dim
            + _need(self.v_head_dim, "v_head_dim", self.kind))

    def attention_flops_per_pair(self) -> int:
        if self.index_topk is not None:  # absorbed: QK^T over the 576-dim latent, PV over the 512-dim one
            return 2 * _need(self.q_heads, "q_heads", self.kind) * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        return self._mha_pair_flops()

    def attended_keys_cap(self) -> int | None:
        return self.index_topk

    def decode_keys(self, context):
        # Sparse attention reads only the index_topk latents the indexer picks; dense MLA reads every one.
        return _capped(context, self.index_topk)

    def decode_flops_per_key(self, tp: int = 1) -> float:
        # Decode runs MLA in the absorbed (MQA) form: QK^T over the kv_lora_rank + rope latent and PV over the
        # kv_lora_rank part, for each of this rank's query heads (DeepSeek-V2, arXiv 2405.04434 §2.1.2).
        return 2 * _need(self.q_heads, "q_heads", self.kind) / tp * (2 * self.kv_lora_rank + self.qk_rope_head_dim)

    def prefill_attention_flops(self, context, prefix=0):
        sparse = super().prefill_attention_flops(context, prefix)
        if self.index_topk is None:
            return sparse
        # Short prefills run DSA as a masked MHA-mode attention over every key (DeepSeek-V3.2-Exp report,
        # inference costs): count whichever mode costs less.
        dense = self._mha_pair_flops() * (causal_pairs(context) - causal_pairs(prefix))
        return (sparse + dense - abs(sparse - dense)) / 2  # min, array-safe

    def attention_flops_formula(self) -> tuple[str, str]:
        per_pair = self.attention_flops_per_pair()
        mha = ("2 x q_heads x (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) FLOP per pair (prefill, MHA mode)",
               f"2 x {self.q_heads} x ({self.qk_nope_head_dim} + {self.qk_rope_head_dim} + {self.v_head_dim})"
               f" = {self._mha_pair_flops():,}")
        if self.index_topk is None:
            return mha
        return (f"2 x q_heads x (2 x kv_lora_rank + qk_rope_head_dim) FLOP per pair (MQA/absorbed mode), at most "
                f"index_topk = {self.index_topk:,} keys per query; or, when cheaper (short prefills), {mha[0]} over "
                "every key",
                f"2 x {self.q_heads} x (2 x {self.kv_lora_rank} + {self.qk_rope_head_dim}) = {per_pair:,}; "
                f"MHA mode {mha[1]}")

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


@dataclass(frozen=True, kw_only=True)
class SparseIndexer(_Kind):
    """DeepSeek V3.2 sparse-attention indexer key cache: one fp8 key of index_head_dim per token per
    layer with one fp32 scale per quant_block elements; stored as uint8 whatever the KV dtype, and whole
    on every TP rank (vLLM DeepseekV32IndexerCache: MLAAttentionSpec(num_kv_heads=1, head_size=132))."""

    kind: Literal["sparse_indexer"] = "sparse_indexer"
    index_head_dim: PositiveInt
    quant_block_size: PositiveInt = 128
    index_heads: PositiveInt | None = None
    index_topk: PositiveInt | None = None
    # wq_b, wk and weights_proj (vllm-project/vllm vllm/model_executor/models/deepseek_v2.py, Indexer)
    decode_gemms: ClassVar[int] = 3

    def attention_flops_per_pair(self) -> int:
        # The indexer scores every earlier key: index_heads dot products of index_head_dim (2*H*d), then the
        # weighted sum over heads of ReLU(score) (2*H). It runs in fp8; kvplan charges it like the rest.
        return 2 * _need(self.index_heads, "index_heads", self.kind) * (self.index_head_dim + 1)

    def attention_flops_formula(self) -> tuple[str, str]:
        return ("2 x index_heads x (index_head_dim + 1) FLOP per pair: head scores q.k plus their weighted sum; "
                "scores every earlier key (no cap)",
                f"2 x {self.index_heads} x ({self.index_head_dim} + 1) = {self.attention_flops_per_pair():,}")

    @property
    def label(self) -> str:
        return f"sparse-attention indexer key {self.index_head_dim} fp8 + scales"

    def cache_bytes_per_token(self, dtype: KVDtype, tp: int = 1) -> int:
        return self.index_head_dim + self.index_head_dim // self.quant_block_size * 4

    def formula(self, dtype: KVDtype, tp: int = 1) -> tuple[str, str]:
        d, b = self.index_head_dim, self.quant_block_size
        return ("index_head_dim x 1 B + index_head_dim/quant_block x 4 B (independent of the KV dtype)",
                f"{d} + {d // b} x 4 = {self.cache_bytes_per_token(dtype, tp):,} B")


StateDtype = Literal["fp32", "bf16", "fp16"]


@dataclass(frozen=True, kw_only=True)
class RecurrentState(_Kind):
    """A layer whose cache is a fixed state per request (linear attention, SSM): a convolution state and an
    SSM state, each in its own dtype, split by heads under TP. Subclasses give the two element counts."""

    conv_kernel: PositiveInt = 4
    conv_dtype: StateDtype = "bf16"
    ssm_dtype: StateDtype = "bf16"
    grows_with_context: ClassVar[bool] = False
    swap_tensors: ClassVar[int] = 2  # conv state and SSM state

    def _conv_elems(self, tp: int) -> int:
        raise NotImplementedError

    def _ssm_elems(self, tp: int) -> int:
        raise NotImplementedError

    @property
    def tokens_cap(self) -> int | None:
        return 0

    def state_bytes(self, tp: int = 1) -> int:
        return (self._conv_elems(tp) * STATE_DTYPE_BYTES[self.conv_dtype]
                + self._ssm_elems(tp) * STATE_DTYPE_BYTES[self.ssm_dtype])

    def _state_numbers(self, tp: int) -> str:
        return (f"{self._conv_elems(tp):,} x {STATE_DTYPE_BYTES[self.conv_dtype]} + {self._ssm_elems(tp):,} x"
                f" {STATE_DTYPE_BYTES[self.ssm_dtype]} = {self.state_bytes(tp):,} B")


@dataclass(frozen=True, kw_only=True)
class GatedDeltaNet(RecurrentState):
    """Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5): a fixed state per request per layer.

    Shapes per vLLM ``gated_delta_net_state_shape``: conv state (conv_kernel - 1) x
    (head_k_dim*num_k_heads*2 + head_v_dim*num_v_heads)/tp, and SSM state (num_v_heads/tp) x head_k_dim x
    head_v_dim. Speculative-decoding extra conv rows are not counted here.
    """

    kind: Literal["gated_delta_net"] = "gated_delta_net"
    # in_proj_qkvz, in_proj_ba and out_proj (vllm-project/vllm vllm/model_executor/models/qwen3_next.py,
    # Qwen3NextGatedDeltaNet)
    decode_gemms: ClassVar[int] = 3
    num_k_heads: PositiveInt
    num_v_heads: PositiveInt
    head_k_dim: PositiveInt
    head_v_dim: PositiveInt

    def state_flops_per_token(self) -> int:
        # Recurrent delta rule per state element (num_v_heads x dk x dv): decay 1, retrieval S^T k 2,
        # rank-1 update 2, readout S^T q 2 = 7. The conv1d, gates and chunked-form extras are not counted.
        return 7 * self.num_v_heads * self.head_k_dim * self.head_v_dim

    def attention_flops_formula(self) -> tuple[str, str]:
        return ("7 x num_v_heads x head_k_dim x head_v_dim FLOP per token (linear in context: decay, S^T k, "
                "rank-1 update, readout)",
                f"7 x {self.num_v_heads} x {self.head_k_dim} x {self.head_v_dim} = {self.state_flops_per_token():,}")

    @property
    def label(self) -> str:
        return (f"Gated DeltaNet state, {self.num_v_heads} V heads x {self.head_k_dim}x{self.head_v_dim}"
                f" ({self.ssm_dtype}), conv {self.conv_kernel}")

    def check_tp(self, tp: int) -> None:
        _check_heads_divisible("linear-attention key heads", self.num_k_heads, tp)
        _check_heads_divisible("linear-attention value heads", self.num_v_heads, tp)

    def _conv_elems(self, tp: int) -> int:
        return (self.conv_kernel - 1) * (
            (self.head_k_dim * self.num_k_heads * 2 + self.head_v_dim * self.num_v_heads) // tp)

    def _ssm_elems(self, tp: int) -> int:
        return (self.num_v_heads // tp) * self.head_k_dim * self.head_v_dim

    def formula(self, dtype: KVDtype, tp: int = 1) -> tuple[str, str]:
        return ("(conv_kernel-1) x (dk*nk*2 + dv*nv)/tp x conv_bytes + (nv/tp) x dk x dv x ssm_bytes, per request",
                self._state_numbers(tp))


@dataclass(frozen=True, kw_only=True)
class Mamba2(RecurrentState):
    """Mamba-2 SSM layer: fixed state per request. Shapes per vLLM ``mamba2_state_shape``: conv state
    (conv_kernel - 1) x (intermediate + 2*n_groups*state_size)/tp, SSM state (n_heads/tp) x head_dim x
    state_size; groups that do not divide tp are replicated up to tp."""

    kind: Literal["mamba2"] = "mamba2"
    # in_proj and out_proj (vllm-project/vllm vllm/model_executor/layers/mamba/mamba_mixer2.py, MambaMixer2)
    decode_gemms: ClassVar[int] = 2
    n_heads: PositiveInt
    head_dim: PositiveInt
    state_size: PositiveInt
    n_groups: PositiveInt = 1

    def state_flops_per_token(self) -> int:
        # Per state element (n_heads x head_dim x state_size): decay 1, dt*x*B^T update 2, readout with C 2 = 5.
        # The conv1d and gating are not counted.
        return 5 * self.n_heads * self.head_dim * self.state_size

    def attention_flops_formula(self) -> tuple[str, str]:
        return ("5 x n_heads x head_dim x state_size FLOP per token (linear in context: decay, update, readout)",
                f"5 x {self.n_heads} x {self.head_dim} x {self.state_size} = {self.state_flops_per_token():,}")

    @property
    def label(self) -> str:
        return f"Mamba-2 state, {self.n_heads} heads x {self.head_dim} x {self.state_size}"

    def check_tp(self, tp: int) -> None:
        _check_heads_divisible("SSM heads", self.n_heads, tp)

    def _groups(self, tp: int) -> int:
        return self.n_groups if self.n_groups % tp == 0 else tp

    def _conv_elems(self, tp: int) -> int:
        inner = self.n_heads * self.head_dim
        return (self.conv_kernel - 1) * ((inner + 2 * self._groups(tp) * self.state_size) // tp)

    def _ssm_elems(self, tp: int) -> int:
        return (self.n_heads // tp) * self.head_dim * self.state_size

    def formula(self, dtype: KVDtype, tp: int = 1) -> tuple[str, str]:
        return ("(conv_kernel-1) x (n_heads*head_dim + 2*n_groups*state)/tp x conv_bytes"
                " + (n_heads/tp) x head_dim x state x ssm_bytes, per request", self._state_numbers(tp))


# One layer kind, told apart by its ``kind`` string.
LayerKind = Annotated[
    FullAttention | SlidingWindowAttention | MLA | SparseIndexer | GatedDeltaNet | Mamba2,
    Tagged("kind"),
]
