"""kvplan.frozen: a lazily made class is, once used, the stdlib frozen dataclass; until then it costs no
generated methods. The expectations are the stdlib's documented dataclass behaviour
(https://docs.python.org/3/library/dataclasses.html), checked against ``@dataclass(frozen=True)`` itself."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.frozen import _PENDING, frozen, make

ROOT = Path(__file__).resolve().parents[1]


def _pair(kw_only: bool = False):
    """The same class body decorated both ways."""
    def body():
        class Point:
            x: int
            y: int = 2
            tags: tuple = dataclasses.field(default=())

            def norm1(self) -> int:
                return abs(self.x) + abs(self.y)
        return Point
    std = dataclasses.dataclass(frozen=True, kw_only=kw_only)(body())
    lazy = frozen(kw_only=True)(body()) if kw_only else frozen(body())
    return std, lazy


def test_not_made_until_used():
    _, lazy = _pair()
    assert _PENDING in lazy.__dict__
    assert "__init__" in lazy.__dict__ and lazy.__dict__["__init__"].__name__ == "__init__"
    p = lazy(1)
    assert _PENDING not in lazy.__dict__
    assert (p.x, p.y, p.tags, p.norm1()) == (1, 2, (), 3)


@pytest.mark.parametrize("first", ["instance", "fields", "is_dataclass", "params"])
def test_each_entry_point_makes_the_class(first):
    std, lazy = _pair()
    if first == "instance":
        lazy(1)
    elif first == "fields":
        assert [f.name for f in dataclasses.fields(lazy)] == ["x", "y", "tags"]
    elif first == "is_dataclass":
        assert dataclasses.is_dataclass(lazy)
    else:
        assert lazy.__dataclass_params__.frozen is True
    assert _PENDING not in lazy.__dict__
    assert [f.name for f in dataclasses.fields(lazy)] == [f.name for f in dataclasses.fields(std)]


def test_behaves_as_the_stdlib_frozen_dataclass():
    std, lazy = _pair()
    a, b, c = lazy(1, 5), lazy(1, 5), lazy(1, 6)
    assert a == b and a != c and hash(a) == hash(b)
    assert hash(a) == hash(std(1, 5))          # both hash the tuple of fields, (1, 5, ())
    assert repr(a).endswith("Point(x=1, y=5, tags=())") and repr(std(1, 5)).endswith("Point(x=1, y=5, tags=())")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.x = 9
    with pytest.raises(dataclasses.FrozenInstanceError):
        del a.y
    assert dataclasses.replace(a, y=7) == lazy(1, 7)
    assert dataclasses.asdict(a) == {"x": 1, "y": 5, "tags": ()}
    with pytest.raises(TypeError):
        lazy()                                  # x has no default


def test_stand_ins_work_on_an_instance_made_without_init():
    """Unpickling makes an instance with __new__ and fills __dict__: the first method call still makes the class."""
    _, lazy = _pair()
    p = object.__new__(lazy)
    p.__dict__.update(x=3, y=4, tags=())
    assert _PENDING in lazy.__dict__
    assert p == lazy(3, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 1


def test_kw_only():
    std, lazy = _pair(kw_only=True)
    with pytest.raises(TypeError):
        lazy(1)
    assert lazy(x=1).y == 2
    assert [f.kw_only for f in dataclasses.fields(lazy)] == [f.kw_only for f in dataclasses.fields(std)] == [True] * 3


def test_subclasses():
    @frozen
    class Base:
        a: int

        def __post_init__(self):
            if self.a < 0:
                raise ValueError("a < 0")

    class Plain(Base):           # not decorated: inherits the stand-ins, which make Base
        pass

    @frozen
    class Child(Base):           # decorated: making it makes Base first
        b: int = 0

    assert Plain(1).a == 1 and Plain(1) == Plain(1)
    assert Plain(1) != Base(1)   # the generated __eq__ compares only instances of the same class
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b"]
    assert Child(1, 2).b == 2
    with pytest.raises(ValueError, match="a < 0"):
        Child(-1)


def test_own_methods_are_kept():
    @frozen
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __eq__(self, other) -> bool:
            return isinstance(other, Named) and other.name.lower() == self.name.lower()

    assert repr(Named("x")) == "<x>"
    assert Named("A") == Named("a")
    # a frozen dataclass whose body defines __eq__ still gets the generated __hash__: hash of the field tuple
    assert hash(Named("a")) == hash(("a",))


def test_make_is_idempotent():
    _, lazy = _pair()
    assert make(lazy) is lazy and make(lazy) is lazy
    assert lazy(1).y == 2


def test_importing_the_specs_makes_no_layer_kind():
    """The start-up saving: importing kvplan.layers leaves every layer kind unmade until a model uses it."""
    code = ("import kvplan.layers as l, typing; from kvplan.frozen import _PENDING; "
            "kinds = typing.get_args(typing.get_args(l.LayerKind)[0]); "
            "print(len(kinds), sum(_PENDING in k.__dict__ for k in kinds))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    n, pending = map(int, out.split())
    assert n >= 6 and pending == n
