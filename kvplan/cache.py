"""kvplan's start-up cache: what every run would otherwise redo, kept as ``marshal`` data in the user's cache
folder. Two kinds of entry, both for kvplan's own (trusted, shipped) code and files only:

* ``load_preset``: a built-in preset's parsed TOML document, so that a run neither imports tomllib nor parses
  the files it reads. A user's files are always read and validated afresh.
* ``kvplan.frozen``'s compiled dataclass methods: the code objects ``dataclasses`` compiles from the source text
  it generates for a class, keyed by that exact text (about 0.1 ms a method, ~6 per class).

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
        entry = marshal.loads(os.read(fd, MAX_ENTRY_BYTES + 1))
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
