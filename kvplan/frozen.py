"""``@frozen``: a stdlib frozen dataclass whose generated methods are made on first use.

``dataclasses.dataclass`` writes and compiles five or six methods per class (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``) when the class statement runs: about 0.4 ms a class
here, ~12 ms for the 37 classes ``kvplan size`` imports, while a run instantiates fewer than half of them. So
``@frozen`` leaves the class plain and puts stand-ins in its namespace: the first instance, comparison, hash,
``repr``, or read of ``__dataclass_fields__`` / ``__dataclass_params__`` (which ``dataclasses.fields``,
``replace``, ``is_dataclass`` and pydantic's ``TypeAdapter`` do) removes them and applies
``dataclasses.dataclass(frozen=True, ...)`` to the class, in place. From then on it *is* that dataclass, so
``fields()``, ``replace()``, frozen assignment errors and pydantic validation behave exactly as before.

Only the options kvplan uses are offered (``kw_only``); ``slots=True`` makes a new class and cannot be lazy.
"""

from __future__ import annotations

import dataclasses

try:
    from typing import dataclass_transform
except ImportError:  # Python 3.10: only type checkers read it
    def dataclass_transform(**_):
        return lambda f: f

# Methods dataclass(frozen=True) generates; each is stood in for unless the class body defines it.
_METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")
_ATTRS = ("__dataclass_fields__", "__dataclass_params__")
_PENDING = "_kvplan_frozen_pending"


def make(cls: type) -> type:
    """Apply the dataclass decorator now (idempotent): ``cls`` from then on is a plain stdlib dataclass."""
    pending = cls.__dict__.get(_PENDING)
    if pending is None:
        return cls
    names, options = pending
    delattr(cls, _PENDING)
    for name in names:
        delattr(cls, name)
    return dataclasses.dataclass(cls, frozen=True, **options)


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
