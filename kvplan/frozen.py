"""``@frozen``: a stdlib frozen dataclass whose generated methods are made on first use.

``dataclasses.dataclass`` writes and compiles five or six methods per class (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``) when the class statement runs: about 0.4 ms a class
here, ~12 ms for the 37 classes ``kvplan size`` imports, while a run instantiates fewer than half of them. So
``@frozen`` leaves the class plain and puts stand-ins in its namespace: the first instance, comparison, hash,
``repr``, or read of ``__dataclass_fields__`` / ``__dataclass_params__`` (which ``dataclasses.fields``,
``replace``, ``is_dataclass`` and pydantic's ``TypeAdapter`` do) removes them and applies
``dataclasses.dataclass(frozen=True, ...)`` to the class, in place. From then on it *is* that dataclass, so
``fields()``, ``replace()``, frozen assignment errors and pydantic validation behave exactly as before.

Making a class compiles the source text ``dataclasses`` generates for it, most of its cost. ``make`` lends
``dataclasses`` an ``exec`` that looks each text up first in ``kvplan.cache`` (one entry per class: the exact
texts and the code objects compiled from them, for this Python build) and compiles only a text it has not seen,
exactly as ``exec`` would (``compile(text, "<string>", "exec")``, no inherited future flags); the class is then
the same as without the cache. Not thread-safe while a class is being made (kvplan makes them on one thread).

Only the options kvplan uses are offered (``kw_only``); ``slots=True`` makes a new class and cannot be lazy.
"""

from __future__ import annotations

import dataclasses
import sys

try:
    from typing import dataclass_transform
except ImportError:  # Python 3.10: only type checkers read it
    def dataclass_transform(**_):
        return lambda f: f

# Methods dataclass(frozen=True) generates; each is stood in for unless the class body defines it.
_METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")
_ATTRS = ("__dataclass_fields__", "__dataclass_params__")
_PENDING = "_kvplan_frozen_pending"
_CODE = type(compile("", "", "exec"))


def make(cls: type) -> type:
    """Apply the dataclass decorator now (idempotent): ``cls`` from then on is a plain stdlib dataclass."""
    pending = cls.__dict__.get(_PENDING)
    if pending is None:
        return cls
    names, options = pending
    delattr(cls, _PENDING)
    for name in names:
        delattr(cls, name)
    from kvplan import cache

    directory = cache.cache_dir()
    if directory is None:
        return dataclasses.dataclass(cls, frozen=True, **options)
    file = directory / f"dataclasses-{sys.implementation.cache_tag}" / f"{cls.__module__}.{cls.__qualname__}.marshal"
    known = cache.read(file, cls.__module__, cls.__qualname__)
    known = known if isinstance(known, dict) else {}
    used: dict[str, object] = {}

    def cached_exec(source, globals=None, locals=None):
        if isinstance(source, str):
            code = known.get(source)
            if code is None or type(code) is not _CODE:
                code = compile(source, "<string>", "exec", dont_inherit=True)
            used[source] = code
            source = code
        return exec(source, globals, locals)

    had = "exec" in dataclasses.__dict__
    prior = dataclasses.__dict__.get("exec")
    dataclasses.exec = cached_exec  # a module global shadows the builtin for dataclasses' own calls
    try:
        made = dataclasses.dataclass(cls, frozen=True, **options)
    finally:
        if had:
            dataclasses.exec = prior
        else:
            del dataclasses.exec
    if used.keys() != known.keys():
        cache.write(file, used, cls.__module__, cls.__qualname__)
    return made


class _Attr:
    """``__dataclass_fields__`` / ``__dataclass_params__`` before the class is made: reading it makes the class
    that owns the stand-in (not a subclass that inherited it) and returns the real value."""

    __slots__ = ("owner", "name")

    def __init__(self, owner: type, name: str) -> None:
        self.owner, self.name = owner, name

    def __get__(self, instance, cls):
        make(self.owner)
        return getattr(cls if instance is None else instance, self.name)


def _method(owner: type, name: str):
    def stand_in(self, *args, **kwargs):
        make(owner)
        return getattr(owner, name)(self, *args, **kwargs)

    stand_in.__name__ = stand_in.__qualname__ = name
    return stand_in


@dataclass_transform(frozen_default=True)
def frozen(cls: type | None = None, /, *, kw_only: bool = False):
    """``@frozen`` or ``@frozen(kw_only=True)``: ``@dataclass(frozen=True[, kw_only=True])``, made on first use."""

    def wrap(cls: type) -> type:
        names = tuple(n for n in _METHODS + _ATTRS if n not in cls.__dict__)
        for name in names:
            setattr(cls, name, _Attr(cls, name) if name in _ATTRS else _method(cls, name))
        setattr(cls, _PENDING, (names, {"kw_only": kw_only} if kw_only else {}))
        return cls

    return wrap if cls is None else wrap(cls)
