"""Engine adapters, one module each: ``neutral`` (kvplan's own count), ``vllm``, ``sglang``.

``get("vllm")`` returns the adapter; ``NAMES`` are the choices the CLI offers. A new engine is one module with
an ``ENGINE`` instance of an ``Engine`` subclass (see ``base.py``), registered in ``_MODULES``.
"""

from __future__ import annotations

import importlib

from kvplan.engines.base import Engine, EngineReport
from kvplan.errors import KvplanError

_MODULES = {"neutral": "kvplan.engines.neutral", "vllm": "kvplan.engines.vllm", "sglang": "kvplan.engines.sglang"}
NAMES = tuple(_MODULES)


def get(name: str | Engine) -> Engine:
    """The adapter for an engine name (case-insensitive)."""
    if isinstance(name, Engine):
        return name
    key = str(name).strip().lower()
    if key not in _MODULES:
        raise KvplanError(f"unknown engine {name!r}", "choose one of " + ", ".join(NAMES))
    return importlib.import_module(_MODULES[key]).ENGINE


def default_block_size(model, engine: str = "vllm") -> int:
    """Tokens per KV block (page) the engine picks for this model's layer kinds."""
    return int(get(engine).block_size(model).value)


def vllm_config(*args, **kwargs):
    from kvplan.engines.vllm import vllm_config as config

    return config(*args, **kwargs)


def sglang_default_mem_fraction(gpu_mem_gib: float, parallel_size: int) -> float:
    from kvplan.engines.sglang import sglang_default_mem_fraction as fraction

    return fraction(gpu_mem_gib, parallel_size)


def sglang_pool(*args, **kwargs):
    from kvplan.engines.sglang import sglang_pool as pool

    return pool(*args, **kwargs)


def sglang_cell_size(*args, **kwargs):
    from kvplan.engines.sglang import sglang_cell_size as cell

    return cell(*args, **kwargs)


__all__ = ["NAMES", "Engine", "EngineReport", "get", "default_block_size", "vllm_config",
           "sglang_default_mem_fraction", "sglang_pool", "sglang_cell_size"]
