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


# --- the compiled-method cache (kvplan.cache) ------------------------------------------------------------------

def _fresh(cache_dir: Path, monkeypatch, fields_src: str, name: str = "Cached"):
    """A new lazy class named ``name`` in this module, its body ``fields_src``, made through the cache."""
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(cache_dir))
    ns: dict = {}
    exec(f"class {name}:\n" + "".join(f"    {line}\n" for line in fields_src.splitlines()), {}, ns)
    cls = ns[name]
    cls.__module__, cls.__qualname__ = __name__, name
    return frozen(cls)


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.rglob("*.marshal"))


def test_code_cache_written_then_used(tmp_path, monkeypatch):
    calls = []
    real_compile = compile
    monkeypatch.setattr("builtins.compile", lambda *a, **k: calls.append(a[0]) or real_compile(*a, **k))
    first = _fresh(tmp_path, monkeypatch, "a: int\nb: str = 'x'")
    assert first(1).b == "x"
    made_cold = len(calls)
    assert made_cold >= 5                       # __init__, __repr__, __eq__, __hash__, __setattr__, __delattr__
    assert [p.name for p in _entries(tmp_path)] == ["test_frozen.Cached.marshal"]
    calls.clear()
    second = _fresh(tmp_path, monkeypatch, "a: int\nb: str = 'x'")
    s = second(2)
    assert calls == []                          # every method came from the cache
    assert (s.a, s.b, repr(s).endswith("Cached(a=2, b='x')"), s == second(2), hash(s) == hash((2, "x"))) == \
        (2, "x", True, True, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.a = 3


def test_code_cache_keyed_by_the_exact_text(tmp_path, monkeypatch):
    """The same class name with other fields must not reuse the old methods."""
    _fresh(tmp_path, monkeypatch, "a: int")(1)
    other = _fresh(tmp_path, monkeypatch, "a: int\nb: int = 7")
    obj = other(1)
    assert (obj.a, obj.b) == (1, 7)
    assert [f.name for f in dataclasses.fields(other)] == ["a", "b"]


@pytest.mark.parametrize("entry", [b"", b"\x00garbage", None])
def test_code_cache_bad_entry_falls_back(tmp_path, monkeypatch, entry):
    cls = _fresh(tmp_path, monkeypatch, "a: int")
    cls(1)
    (path,) = _entries(tmp_path)
    if entry is None:   # a valid entry whose code objects are not code
        import marshal

        stamp, value = marshal.loads(path.read_bytes())
        path.write_bytes(marshal.dumps((stamp, {k: "not code" for k in value})))
    else:
        path.write_bytes(entry)
    again = _fresh(tmp_path, monkeypatch, "a: int")
    assert again(5).a == 5 and again(5) == again(5)


def test_exec_is_given_back(tmp_path, monkeypatch):
    assert "exec" not in dataclasses.__dict__
    _fresh(tmp_path, monkeypatch, "a: int")(1)
    assert "exec" not in dataclasses.__dict__
    bad = _fresh(tmp_path, monkeypatch, "a: int = 1\nb: int")   # a field without a default after one with
    with pytest.raises(TypeError):
        bad(1)
    assert "exec" not in dataclasses.__dict__


def test_cache_off_compiles(tmp_path, monkeypatch):
    cls = _fresh(tmp_path, monkeypatch, "a: int")
    monkeypatch.setenv("KVPLAN_CACHE_DIR", "off")
    assert cls(3).a == 3
    assert _entries(tmp_path) == []


def test_every_kvplan_class_is_a_valid_dataclass():
    """A lazy class's definition errors (a field without a default after one with) surface on first use, not at
    import: make every @frozen class in the package here, so none can hide until a user reaches it."""
    import importlib

    import kvplan

    package = Path(kvplan.__file__).parent
    made = 0
    for path in sorted(package.rglob("*.py")):   # a file walk: kvplan.calc is a namespace package
        name = ".".join(("kvplan", *path.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
        module = importlib.import_module(name)
        for obj in list(vars(module).values()):
            if isinstance(obj, type) and obj.__module__ == name and (
                    _PENDING in obj.__dict__ or dataclasses.is_dataclass(obj)):
                make(obj)
                assert dataclasses.is_dataclass(obj) and obj.__dataclass_params__.frozen in (True, False)
                made += 1
    assert made >= 86        # 86 @frozen classes when this test was written, plus plain dataclasses
