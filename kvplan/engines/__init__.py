"""Engine adapters, one module each: ``neutral`` (kvplan's own count), ``vllm``, ``sglang``.

``get("vllm")`` returns the adapter; ``NAMES`` are the choices the CLI offers. A new engine is one module with
an ``ENGINE`` instance of an ``Engine`` subclass (see ``base.py``), registered in ``_MODULES``.

``get("vllm")`` follows the newest release docs/engine-rules-by-release.md covers; ``get("vllm==0.17")`` (or
``sglang==0.5.3``, ``X.Y`` meaning ``X.Y.0``) follows the rules of that release. A module with releases has
``RELEASES = (oldest, newest)`` and ``for_release(version)``.
"""

from __future__ import annotations

import importlib
import re

from kvplan.engines.base import Engine, EngineReport
from kvplan.errors import KvplanError, shorten

_MODULES = {"neutral": "kvplan.engines.neutral", "vllm": "kvplan.engines.vllm", "sglang": "kvplan.engines.sglang"}
NAMES = tuple(_MODULES)


# compiled on first use (by ``re``'s cache): only a pinned release reads it
_RELEASE = r"v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?"


def _range_text(module) -> str:
    oldest, newest = (".".join(map(str, v)) for v in module.RELEASES)
    return f"{module.ENGINE.id}=={oldest} .. {module.ENGINE.id}=={newest}"


def get(name: str | Engine) -> Engine:
    """The adapter for an engine name (case-insensitive), optionally pinned to a release: ``vllm==0.17``."""
    if isinstance(name, Engine):
        return name
    key, pinned, wanted = str(name).strip().lower().partition("==")
    key = key.strip()
    if key not in _MODULES:
        raise KvplanError(f"unknown engine {shorten(name)}", "choose one of " + ", ".join(NAMES)
                          + " (vllm==X.Y or sglang==X.Y selects a release)")
    module = importlib.import_module(_MODULES[key])
    if not pinned:
        return module.ENGINE
    if not hasattr(module, "RELEASES"):
        raise KvplanError(f"--engine {key} has no releases to choose from", f"give --engine {key}")
    match = re.fullmatch(_RELEASE, wanted.strip())
    version = match and (int(match[1]), int(match[2]), int(match[3] or 0))
    oldest, newest = module.RELEASES
    if not version or not oldest <= version <= newest:
        raise KvplanError(f"{shorten(name)} is not a release kvplan has rules for",
                          f"give a release in {_range_text(module)} (docs/engine-rules-by-release.md), or plain "
                          f"--engine {key} for the newest")
    return module.for_release(version)


def default_block_size(model, engine: str = "vllm") -> int:
    """Tokens per KV block (page) the engine picks for this model's layer kinds."""
    return get(engine).block_size(model).number()


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
