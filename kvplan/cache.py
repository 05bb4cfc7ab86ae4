"""kvplan's start-up cache: what every run would otherwise redo, kept as ``marshal`` data in the user's cache
folder. Two kinds of entry, both for kvplan's own (trusted, shipped) code and files only:

* ``load_preset``: a built-in preset's parsed TOML document, so that a run neither imports tomllib nor parses
  the files it reads. A user's files are always read and validated afresh.
* ``kvplan.frozen``'s compiled dataclass methods: the code objects ``dataclasses`` compiles from the source text
  it generates for a class, keyed by that exact text (about 0.1 ms a method, ~6 per class).
* ``read_spec`` / ``write_spec``: a built-in preset's *built* spec (a ``ModelSpec`` or ``HardwareSpec`` and the
  spec objects inside it), so that a run neither builds nor checks it again and does not make the dataclasses it
  is made of (``kvplan.frozen``: they are made when something asks for ``fields()``, ``==``, ``repr`` ...). It is
  stored as each object's class and attributes; besides the preset file, the entry is keyed by the modification
  time and size of every kvplan source file whose code shaped it (its classes' modules and the builders), as
  Python's own bytecode cache is. Only kvplan's ``@frozen`` classes and plain values (text, numbers, None,
  tuples, lists, dicts with text keys) are stored; a spec holding anything else is not cached.

Each entry is ``(stamp, value)``; the stamp holds kvplan's version and the exact Python build (``sys.version``:
marshal and bytecode formats are per build), and for a preset its path, modification time in nanoseconds and
size: any change misses. A missing, unreadable, corrupt or foreign entry, a value marshal cannot hold, or a
folder that cannot be written all fall back to doing the work (the result is the same), silently except for a
``KVPLAN_CACHE_DIR`` the user set that cannot be written: one warning line a run. Entries are
written whole (a temporary file, then a rename). Like Python's own ``__pycache__``, the folder holds code that
is run: it is the user's own folder, read only by the user's kvplan.

Where: ``$KVPLAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvplan`` (when absolute), else ``~/.cache/kvplan`` (none
without a home folder); ``KVPLAN_CACHE_DIR=off`` (or empty) turns it off.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV_VAR = "KVPLAN_CACHE_DIR"
MAX_ENTRY_BYTES = 4 * 2**20   # an entry is a few KB


def cache_dir() -> Path | None:
    env = os.environ.get(ENV_VAR)
    if env is not None:
        return None if env.strip().lower() in ("", "off") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, or relative (which the XDG spec says to ignore)
        home = os.path.expanduser("~")
        if not os.path.isabs(home):  # no home at all: no cache rather than a "~" folder here
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "kvplan"


def _stamp(*key: Any) -> tuple:
    from kvplan import __version__

    return (__version__, sys.version, *key)


def read(file: Path, *key: Any) -> Any:
    """The value stored under ``file`` for this stamp, or None (missing, corrupt, another stamp). Never blocks on
    a FIFO or reads a huge file."""
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            return None
        # the size it has (os.read allocates the whole count asked for: 4 MiB would cost ~20 us an entry)
        entry = marshal.loads(os.read(fd, st.st_size + 1))
    except Exception:  # noqa: BLE001 - unreadable or corrupt (marshal raises ValueError, EOFError, TypeError)
        return None
    finally:
        os.close(fd)
    if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == _stamp(*key):
        return entry[1]
    return None


def write(file: Path, value: Any, *key: Any) -> None:
    """Store ``value`` under ``file`` for this stamp; silently nothing if the folder or the value cannot be."""
    tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")
    try:
        blob = marshal.dumps((_stamp(*key), value))
        file.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as out:
            out.write(blob)
        os.replace(tmp, file)
    except (OSError, ValueError) as err:  # a read-only home, or a value marshal cannot hold (a TOML date)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError) and os.environ.get(ENV_VAR):  # the user chose that folder: say it is unusable
            _warn_once(f"cannot write kvplan's start-up cache in {os.environ[ENV_VAR]}: {err.strerror or err} "
                       f"(runs work, only slower) (fix: give {ENV_VAR} a folder you can write, or {ENV_VAR}=off)")


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """One stderr line per distinct message and process (not ``presets.warn``: a class can be made while
    kvplan.presets is still being imported)."""
    from kvplan.errors import sanitize

    line = f"warning: {sanitize(message)}"
    if line not in _warned:
        _warned.add(line)
        print(line, file=sys.stderr)


def load_preset(path: Path, parse: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """``parse(path)`` of a built-in preset, through the cache."""
    directory = cache_dir()
    try:
        st = os.stat(path)
    except OSError:
        directory = None
    if directory is None:
        return parse(path)
    from kvplan import __version__

    file = directory / f"presets-{__version__}" / f"{path.parent.name}-{path.stem}.marshal"
    key = (str(path), st.st_mtime_ns, st.st_size)
    data = read(file, *key)
    if isinstance(data, dict):
        return data
    data = parse(path)
    write(file, data, *key)
    return data


# --- built specs -----------------------------------------------------------------------------------------------
# Modules whose code builds or checks a spec besides its classes' own modules (each entry names those).
SPEC_BUILDERS = ("kvplan.presets", "kvplan.layers", "kvplan.dtypes", "kvplan.frozen", "kvplan.cache")


def _spec_file(path: Path) -> Path | None:
    directory = cache_dir()
    if directory is None:
        return None
    from kvplan import __version__

    return directory / f"specs-{__version__}" / f"{path.parent.name}-{path.stem}.marshal"


def _file_stamp(path: str | Path) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(path), st.st_mtime_ns, st.st_size


def _encode(value: Any, modules: set[str]) -> Any:
    """``value`` as marshal data: plain values as they are, containers and spec objects as tagged tuples.
    Raises ValueError for anything else."""
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return value
    if kind is tuple or kind is list:
        return ("t" if kind is tuple else "l", tuple(_encode(v, modules) for v in value))
    if kind is dict and all(type(k) is str for k in value):
        return ("d", {k: _encode(v, modules) for k, v in value.items()})
    module = getattr(kind, "__module__", "")
    if module.startswith("kvplan.") and _is_frozen(kind):
        modules.add(module)
        return ("o", module, kind.__qualname__, {k: _encode(v, modules) for k, v in vars(value).items()})
    raise ValueError(f"cannot store a {kind.__name__}")


def _is_frozen(cls: type) -> bool:
    """Whether ``cls`` is a ``kvplan.frozen`` class (made or not yet made)."""
    from kvplan.frozen import _PENDING

    pending = _PENDING in cls.__dict__
    params = cls.__dict__.get("__dataclass_params__")
    return pending or (params is not None and getattr(params, "frozen", False))


def _decode(value: Any, classes: dict[tuple[str, str], type]) -> Any:
    if type(value) is not tuple:
        return value
    tag = value[0]
    if tag == "t":
        return tuple(_decode(v, classes) for v in value[1])
    if tag == "l":
        return [_decode(v, classes) for v in value[1]]
    if tag == "d":
        return {k: _decode(v, classes) for k, v in value[1].items()}
    _, module, qualname, attrs = value
    cls = classes.get((module, qualname))
    if cls is None:
        import importlib

        if module != "kvplan" and not module.startswith("kvplan."):   # an entry names kvplan's spec classes only
            raise ValueError(f"{module}.{qualname} is not a kvplan class")
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if not (isinstance(cls, type) and cls.__module__ == module and cls.__qualname__ == qualname
                and _is_frozen(cls)):
            raise ValueError(f"{module}.{qualname} is not a spec class")
        classes[module, qualname] = cls
    obj = object.__new__(cls)   # as unpickling does: the attributes set directly, no __init__ or checks
    vars(obj).update({k: _decode(v, classes) for k, v in attrs.items()})
    return obj


def read_spec(path: Path) -> tuple[Any, Any] | None:
    """``(meta, spec)`` as ``write_spec`` stored them for the built-in preset file ``path``, or None (no entry, the
    file or a source it depends on changed, a bad entry)."""
    file = _spec_file(path)
    key = _file_stamp(path) if file is not None else None
    if key is None:
        return None
    entry = read(file, *key)
    if not (isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[0], tuple)):
        return None
    sources, meta, payload = entry
    if any(not isinstance(s, tuple) or not s or _file_stamp(s[0]) != s for s in sources):
        return None
    try:
        return meta, _decode(payload, {})
    except Exception:  # noqa: BLE001 - a corrupt or stale entry: build the spec instead
        return None


def write_spec(path: Path, meta: Any, spec: Any) -> None:
    """Store the spec built from the built-in preset file ``path`` (``meta``: marshal data kept beside it)."""
    file = _spec_file(path)
    key = _file_stamp(path) if file is not None else None
    if key is None:
        return
    modules: set[str] = set(SPEC_BUILDERS)
    try:
        payload = _encode(spec, modules)
    except (ValueError, TypeError, RecursionError):   # TypeError: an object without a __dict__
        return
    sources = []
    for name in sorted(modules):
        source = getattr(sys.modules.get(name), "__file__", None)
        stamp = _file_stamp(source) if source else None
        if stamp is None:   # a module without a source file to key on: do not cache
            return
        sources.append(stamp)
    # A file changed since this process imported kvplan may not be what it loaded (a long-lived process, an edit
    # between reading the preset and now): store nothing rather than old work under a new stamp.
    from kvplan import _IMPORTED_NS

    if any(stamp[1] >= _IMPORTED_NS for stamp in (key, *sources)):
        return
    write(file, (tuple(sources), meta, payload), *key)
