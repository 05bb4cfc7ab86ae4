"""The model spec: identity, sources, parameter counts, and layers as groups of layer kinds.

A layer may hold more than one cache (DeepSeek V3.2 layers hold an MLA latent *and* an indexer key),
so a group is "one layer kind, and the layer indices that carry it"; two groups may name the same
layer. Every layer index must be carried by at least one group.
"""

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Annotated

from kvplan.errors import KvplanError
from kvplan.specs.dtypes import WEIGHT_BYTES_PER_PARAM, KVDtype
from kvplan.specs.layers import SPEC_CONFIG, Finite, LayerKind, MinLen, Range, check_fields

Dim = Annotated[int, Range(gt=0, le=100_000_000)]


@dataclass(frozen=True, kw_only=True)
class Sourced:
    """A figure and where it comes from. ``kind``: D datasheet/vendor, M measured, T third-party,
    X derived by us (the source then shows the arithmetic), C read from the model's own config."""

    __pydantic_config__ = SPEC_CONFIG

    value: Annotated[float, Finite()]
    source: Annotated[str, MinLen(3)]
    kind: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if type(self.value) is not float:  # a whole number from TOML or a caller: stored as the float it is
            object.__setattr__(self, "value", float(self.value))

    def cite(self) -> str:
        return f"{self.source} [{self.kind}]" if self.kind else self.source


@dataclass(frozen=True, kw_only=True)
class LayerGroup:
    """One layer kind and the layer indices (unique, kept sorted) that carry it."""

    __pydantic_config__ = SPEC_CONFIG

    name: str
    kind: LayerKind
    layers: tuple[Annotated[int, Range(ge=0)], ...]

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.layers:
            raise ValueError("a layer group needs at least one layer")
        if len(set(self.layers)) != len(self.layers):
            raise ValueError("a layer group lists a layer twice")
        object.__setattr__(self, "layers", tuple(sorted(self.layers)))

    @property
    def count(self) -> int:
        return len(self.layers)


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model: identity and sources, its layers as groups of layer kinds, and its parameter counts and dims."""

    __pydantic_config__ = SPEC_CONFIG

    id: str
    name: str
    description: str = ""
    sources: Annotated[tuple[str, ...], MinLen(1)]
    num_layers: Annotated[int, Range(gt=0, le=10_000)]
    groups: Annotated[tuple[LayerGroup, ...], MinLen(1)]
    # MTP / next-token-prediction draft layers shipped with the checkpoint; not in num_layers and not
    # counted unless asked for (vLLM and SGLang allocate their KV in the same pool when MTP is on).
    mtp_layers: Annotated[int, Range(ge=0, le=64)] = 0
    params_total: Sourced | None = None
    params_active: Sourced | None = None
    # N_mm: active weight-matmul parameters per token, input embedding excluded, LM head included
    # (the notation of kvplan.calc.flops); prefill FLOPs = 2 x N_mm x tokens + attention.
    params_active_matmul: Sourced | None = None
    weight_dtype: str = "bf16"
    weight_bytes: Sourced | None = None
    # Bytes of the routed-expert tensors within weight_bytes (a checkpoint's safetensors headers, tensors named
    # ``.experts.``): what expert parallelism divides by EP, the rest being divided by TP.
    expert_weight_bytes: Sourced | None = None
    hidden_size: Dim | None = None
    num_attention_heads: Dim | None = None
    vocab_size: Dim | None = None
    max_position_embeddings: Dim | None = None
    # MoE and MLP dims (config.json), used for the activation-reserve estimate and for splitting
    # weights under expert parallelism. params_expert: all routed-expert parameters of the model.
    intermediate_size: Dim | None = None
    moe_intermediate_size: Dim | None = None
    experts_per_token: Dim | None = None
    shared_experts: Dim | None = None
    # Routed experts per MoE layer (config.json n_routed_experts / num_experts / num_local_experts); with
    # experts_per_token it sets how many distinct experts a decode step reads.
    num_experts: Dim | None = None
    params_expert: Sourced | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_fields(self)
        if self.weight_dtype not in WEIGHT_BYTES_PER_PARAM:
            raise ValueError(f"unknown weight dtype {self.weight_dtype!r}; one of {', '.join(WEIGHT_BYTES_PER_PARAM)}")
        for name in ("params_total", "params_active", "weight_bytes", "params_expert", "params_active_matmul"):
            figure = getattr(self, name)
            if figure is not None and figure.value <= 0:
                raise ValueError(f"{name} must be positive, got {figure.value}")
        experts = self.expert_weight_bytes
        if experts is not None and (self.weight_bytes is None or not 0 <= experts.value <= self.weight_bytes.value):
            raise ValueError("expert_weight_bytes needs weight_bytes, and must be between 0 and weight_bytes")
        self._layers_covered()

    def _layers_covered(self) -> None:
        carried: set[int] = set()
        for group in self.groups:
            beyond = [i for i in group.layers if i >= self.num_layers]
            if beyond:
                raise ValueError(f"group {group.name!r} names layer {beyond[0]} but the model has "
                                 f"{self.num_layers} layers (0..{self.num_layers - 1})")
            carried.update(group.layers)
        missing = sorted(set(range(self.num_layers)) - carried)
        if missing:
            raise ValueError(f"layers {missing[:5]} carry no cache kind; every layer needs a group")

    @cached_property
    def layer_kinds(self) -> tuple[tuple[LayerKind, ...], ...]:
        """For each layer index, the kinds it carries."""
        per_layer: list[list[LayerKind]] = [[] for _ in range(self.num_layers)]
        for group in self.groups:
            for i in group.layers:
                per_layer[i].append(group.kind)
        return tuple(tuple(kinds) for kinds in per_layer)

    def with_mtp_layers(self, count: int | None = None) -> "ModelSpec":
        """The model with ``count`` MTP draft layers appended (default: the checkpoint's own), each carrying the
        kinds of the last layer."""
        count = self.mtp_layers if count is None else count
        if not count:
            return self
        if count > 64:
            raise KvplanError(f"{count:,} MTP layers is absurd (DeepSeek ships 1, a spec allows at most 64)",
                              "give 0 to a few MTP layers")
        last = self.num_layers - 1
        extra = tuple(range(self.num_layers, self.num_layers + count))
        groups = tuple(replace(g, layers=g.layers + extra) if last in g.layers else g for g in self.groups)
        # replace() builds a new object (checked again), so the cached per-layer view is not carried over.
        try:
            return replace(self, groups=groups, num_layers=self.num_layers + count, mtp_layers=0,
                           name=f"{self.name} + {count} MTP layer(s)")
        except ValueError as err:  # e.g. more layers than a spec allows
            raise KvplanError(f"{self.id} with {count} MTP layer(s): {err}", "give fewer MTP layers") from None

    def check_tp(self, tp: int) -> None:
        for group in self.groups:
            try:
                group.kind.check_tp(tp)
            except KvplanError as err:
                raise KvplanError(f"{self.id}: {err.message} (layer group {group.name!r})", err.hint) from None

    def weight_bytes_estimate(self) -> tuple[float, str] | None:
        """Weight bytes for the whole model: the checkpoint size when known, else params x dtype."""
        if self.weight_bytes is not None:
            return self.weight_bytes.value, f"checkpoint size: {self.weight_bytes.cite()}"
        if self.params_total is not None:
            per = WEIGHT_BYTES_PER_PARAM[self.weight_dtype]
            return (self.params_total.value * per,
                    f"{self.params_total.value:,.0f} params x {per:g} B ({self.weight_dtype})")
        return None

    def uses(self, *kinds: type) -> bool:
        """Whether any layer group is of one of these kind classes, exactly (``SlidingWindowAttention`` is not
        ``FullAttention`` here, as in the engines' kind tables)."""
        return any(type(g.kind) in kinds for g in self.groups)

    def uses_kind(self, kind_name: str) -> bool:
        """``uses`` by the ``kind`` tag (``"mla"``); code should test classes with ``uses`` (kept for callers that
        still pass a tag)."""
        return any(g.kind.kind == kind_name for g in self.groups)

    def effective_kv_dtype_note(self, dtype: KVDtype) -> str | None:
        for g in self.groups:
            stored = getattr(g.kind, "stored_dtype", None)
            if stored is not None and stored(dtype) is not dtype:
                return (f"{self.id} stores an {dtype.value} MLA cache as {stored(dtype).value} "
                        f"(vLLM maps any fp8 cache dtype to fp8_ds_mla for DeepSeek V3.2)")
        return None
