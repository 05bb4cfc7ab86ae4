"""Exact weight bytes of a checkpoint, from its safetensors headers (never the tensors).

A safetensors file starts with an 8-byte little-endian header length N, then N bytes of JSON mapping each
tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (plus an optional ``__metadata__`` map of
strings); the tensor data follows (format: https://github.com/huggingface/safetensors, README "Format").
kvplan reads the 8 bytes and the header only, with bounded reads, and refuses a header longer than
``MAX_HEADER_BYTES`` (safetensors' own ``MAX_HEADER_SIZE``, safetensors/src/tensor.rs).

Each tensor's bytes are numel x its dtype's width (sub-byte dtypes such as F4 packed), checked against its
``data_offsets``. Quantized checkpoints need no special case because their packed tensors and scales are
tensors of the header: FP8 (F8_E4M3 weights + F32 ``weight_scale_inv`` blocks), MXFP4 (U8 ``*_blocks`` +
U8 ``*_scales``), NVFP4 (U8 packed weights + F8_E4M3 ``weight_scale`` + F32 ``weight_scale_2``), GPTQ/AWQ
(I32 ``qweight`` / ``qzeros`` + F16 ``scales``).

How the total is split (``kvplan.engines.budget.weights_per_gpu``): tensors whose names mark routed experts
(``EXPERT_PATTERN``: ``.experts.`` as in ``model.layers.3.mlp.experts.7.up_proj.weight``,
``block_sparse_moe.experts.``, ``feed_forward.experts.``; DeepSeek's ``shared_experts`` and Qwen's
``shared_expert`` do not match) are the routed-expert bytes, divided by EP; the rest by TP. MTP draft layers
shipped in the checkpoint (``model.layers.<i>`` with i >= num_hidden_layers, or ``mtp.*``) are counted apart:
the engines skip them unless MTP speculative decoding is on (vLLM ``DeepseekV2ForCausalLM.load_weights``
skips ``get_spec_layer_idx_from_weight_name``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError, shorten

MAX_HEADER_BYTES = 100_000_000
MAX_TENSORS = 2_000_000        # a checkpoint of a few thousand shards holds well under this
MAX_SHARDS = 10_000

# Bits per element of each safetensors dtype (safetensors/src/tensor.rs ``Dtype::bitsize``).
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64,
    "I64": 64, "U64": 64, "F64": 64,
}
EXPERT_PATTERN = re.compile(r"\.experts\.")
_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_FIX = "re-download the checkpoint (the file is damaged or not safetensors), or give --weights SIZE"


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass(frozen=True)
class CheckpointWeights:
    """Bytes of a checkpoint's tensors: all (``total``, MTP layers excluded), routed experts, MTP layers."""

    total: int
    experts: int
    mtp: int
    tensors: int
    files: int
    by_dtype: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        kinds = ", ".join(f"{k} {v:,} B" for k, v in sorted(self.by_dtype.items(), key=lambda kv: -kv[1]))
        text = (f"{self.tensors:,} tensors in {self.files} safetensors file(s): {self.total:,} B ({kinds}); "
                f"routed experts (names with .experts.) {self.experts:,} B")
        if self.mtp:
            text += f"; MTP layers {self.mtp:,} B more, not counted (loaded only for MTP speculative decoding)"
        return text


def _error(where: str, message: str) -> KvplanError:
    return KvplanError(f"safetensors file {where}: {message}", _FIX)


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """The JSON header of the safetensors file ``path`` and the size of its data section. Reads 8 + N bytes;
    a FIFO or device is refused unread; N above ``MAX_HEADER_BYTES`` or beyond the file is refused."""
    import json

    from kvplan.inputs.files import MAX_DEPTH, open_regular, too_deep

    where = str(path)
    fd, st = open_regular(path, "safetensors file", _FIX)
    try:
        head = _read_exactly(fd, 8, where)
        length = int.from_bytes(head, "little")
        if length > MAX_HEADER_BYTES:
            raise _error(where, f"declares a {length:,}-byte header, more than safetensors allows "
                                f"({MAX_HEADER_BYTES:,})")
        if length < 2 or 8 + length > st.st_size:
            raise _error(where, f"declares a {length:,}-byte header but the file is {st.st_size:,} bytes")
        raw = _read_exactly(fd, length, where)
    except OSError as err:
        raise _error(where, f"cannot be read: {err.strerror or err}") from None
    finally:
        os.close(fd)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _error(where, "the header is not JSON") from None
    if not isinstance(header, dict) or too_deep(header, MAX_DEPTH):
        raise _error(where, "the header is not a JSON object of tensors")
    return header, st.st_size - 8 - length


def _read_exactly(fd: int, count: int, where: str) -> bytes:
    chunks, got = [], 0
    while got < count:
        chunk = os.read(fd, min(count - got, 1 << 20))
        if not chunk:
            raise _error(where, f"ends after {got:,} of the {count:,} header bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def tensors(header: dict[str, Any], where: str, data_bytes: int | None = None) -> list[Tensor]:
    """The tensors a header lists, each checked: a known dtype, a shape of whole numbers, and ``data_offsets``
    spanning numel x width bytes within the data section (``data_bytes``, when known)."""
    found = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise _error(where, f"tensor {shorten(name)} is not an object")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in DTYPE_BITS:
            raise _error(where, f"tensor {shorten(name)} has dtype {shorten(dtype)}, which kvplan does not know "
                                f"(it knows {', '.join(DTYPE_BITS)})")
        if not isinstance(shape, list) or not all(_whole(d) for d in shape):
            raise _error(where, f"tensor {shorten(name)} has shape {shorten(shape)}, not a list of whole numbers")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_whole(o) for o in offsets)
                and offsets[0] <= offsets[1]):
            raise _error(where, f"tensor {shorten(name)} has data_offsets {shorten(offsets)}, not [begin, end]")
        numel = 1
        for d in shape:
            numel *= d
        bits = numel * DTYPE_BITS[dtype]
        span = offsets[1] - offsets[0]
        if bits % 8 or bits // 8 != span:
            raise _error(where, f"tensor {shorten(name)}: {dtype} {shape} is {bits / 8:,g} bytes but its "
                                f"data_offsets span {span:,}")
        if data_bytes is not None and offsets[1] > data_bytes:
            raise _error(where, f"tensor {shorten(name)} ends at byte {offsets[1]:,} of a {data_bytes:,}-byte data "
                                "section (the file is truncated)")
        found.append(Tensor(name, dtype, tuple(shape), span))
        if len(found) > MAX_TENSORS:
            raise _error(where, f"lists more than {MAX_TENSORS:,} tensors")
    return found


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def is_mtp(name: str, num_layers: int, mtp_layers: int) -> bool:
    """Whether a tensor belongs to an MTP draft layer: ``mtp.*`` (Qwen3.5), or ``model.layers.<i>`` with
    i >= num_hidden_layers in a config that declares MTP layers (DeepSeek V3/R1 layer 61)."""
    if not mtp_layers:
        return False
    if name.startswith(("mtp.", "model.mtp.")):
        return True
    m = _LAYER_INDEX.search(name)
    return m is not None and name.startswith(("model.layers.", "language_model.model.layers.")) \
        and int(m.group(1)) >= num_layers


def account(all_tensors: list[Tensor], files: int, num_layers: int, mtp_layers: int = 0) -> CheckpointWeights:
    """The checkpoint's bytes: the total without MTP layers, the routed experts' share of it, the MTP bytes."""
    total = experts = mtp = 0
    by_dtype: dict[str, int] = {}
    for t in all_tensors:
        if is_mtp(t.name, num_layers, mtp_layers):
            mtp += t.nbytes
            continue
        total += t.nbytes
        by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + t.nbytes
        if EXPERT_PATTERN.search(t.name):
            experts += t.nbytes
    return CheckpointWeights(total, experts, mtp, len(all_tensors), files, by_dtype)


def shard_names(index: Any, where: str) -> list[str]:
    """The safetensors files a ``model.safetensors.index.json`` names in its ``weight_map``, in order."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise KvplanError(f"safetensors index {where} has no weight_map",
                          "fix or remove model.safetensors.index.json")
    names = list(dict.fromkeys(weight_map.values()))
    for name in names:
        if not isinstance(name, str) or not name.endswith(".safetensors") or "/" in name or "\\" in name \
                or name.startswith("."):
            raise KvplanError(f"safetensors index {where}: weight_map names {shorten(name)}, not a .safetensors "
                              "file beside the index", "fix or remove model.safetensors.index.json")
    if len(names) > MAX_SHARDS:
        raise KvplanError(f"safetensors index {where} names {len(names):,} files", "fix the index")
    return names


def read_checkpoint(paths: list[Path], num_layers: int, mtp_layers: int = 0) -> CheckpointWeights:
    """``account`` of the tensors in the headers of local safetensors files."""
    found: list[Tensor] = []
    for path in paths:
        header, data_bytes = read_header(path)
        found += tensors(header, str(path), data_bytes)
    return account(found, len(paths), num_layers, mtp_layers)


def quantization_note(config: dict[str, Any]) -> str | None:
    """The checkpoint's ``quantization_config`` in one line (method, format, block size, modules left
    unconverted), for the model's notes."""
    quant = config.get("quantization_config")
    text = config.get("text_config")
    if quant is None and isinstance(text, dict):
        quant = text.get("quantization_config")
    if not isinstance(quant, dict):
        return None
    shown = []
    for key in ("quant_method", "quant_algo", "fmt", "bits", "group_size", "weight_block_size", "kv_cache_quant_algo",
                "modules_to_not_convert", "ignore", "ignored_layers", "exclude_modules"):
        if quant.get(key) is not None:
            shown.append(f"{key}={shorten(quant[key])}")
    return "quantization_config: " + (", ".join(shown) if shown else shorten(quant))
