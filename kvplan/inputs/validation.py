"""Untrusted data validated into a spec dataclass by pydantic (``TypeAdapter`` over the stdlib dataclasses: strict
whole numbers, unknown keys refused, every ``Annotated`` constraint and ``__post_init__`` invariant checked), each
problem named by its field on one line. pydantic is imported here only, on first use.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError
from kvplan.inputs.files import MAX_DEPTH

_ADAPTERS: dict[type, Any] = {}
FIELD_HINT = "fix that field in the preset"


def _adapter(cls: type) -> Any:
    """pydantic's TypeAdapter of ``cls``, built once per class."""
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def _listed(err: Any) -> list[tuple[tuple, str]]:
    """(location, message) of every problem a pydantic ValidationError lists."""
    return [(tuple(e["loc"]), " ".join(str(e["msg"]).split())) for e in err.errors(include_url=False)]


def problems(cls: type, data: Any) -> list[tuple[tuple, str]]:
    """Every problem pydantic finds validating ``data`` into a ``cls``, as (location, message)."""
    from pydantic import ValidationError

    try:
        _adapter(cls).validate_python(data)
    except ValidationError as err:
        return _listed(err)
    except RecursionError:
        return [((), f"nested more than {MAX_DEPTH} levels deep")]
    return []


def joined(found: list[tuple[tuple, str]]) -> str:
    """The problems on one line, each as ``field.path: message``."""
    parts = []
    for loc, msg in found:
        where = ".".join(str(p) for p in loc)
        parts.append((f"{where} {msg}" if msg.startswith("= ") else f"{where}: {msg}") if where else msg)
    return "; ".join(dict.fromkeys(parts))


def validate(cls: type, data: Any, where: str, hint: str = FIELD_HINT) -> Any:
    """``data`` validated into a ``cls`` by pydantic: strict whole numbers, unknown keys refused, every field
    constraint and invariant checked. Problems are one KvplanError line naming each field."""
    from pydantic import ValidationError

    try:
        return _adapter(cls).validate_python(data)
    except ValidationError as err:
        raise KvplanError(f"{where}: {joined(_listed(err))}", hint) from None
    except RecursionError:
        raise KvplanError(f"{where}: nested more than {MAX_DEPTH} levels deep", hint) from None
