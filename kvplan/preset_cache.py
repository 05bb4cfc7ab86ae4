"""A cache of the built-in presets' parsed TOML, so that a run neither imports tomllib nor parses the two files it
reads (about 2-3 ms of a ~50 ms start-up).

Only built-in (trusted, shipped) files go through it; a user's files are always read and validated afresh. Each
entry is ``marshal`` data (stdlib, no import cost, and loading it runs no code) of ``(stamp, document)``, where the
stamp is kvplan's version, the Python version, the file's path, its modification time in nanoseconds and its size:
any change to any of them re-parses the file. A missing, unreadable, corrupt or foreign entry, a document marshal
cannot hold, or a cache folder that cannot be written all fall back to parsing, silently (the result is the same).

Where: ``$KVPLAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvplan``, else ``~/.cache/kvplan``; ``KVPLAN_CACHE_DIR=off``
(or empty) turns it off.
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
MAX_ENTRY_BYTES = 4 * 2**20   # a built-in preset's document is a few KB


def cache_dir() -> Path | None:
    env = os.environ.get(ENV_VAR)
    if env is not None:
        return None if env.strip().lower() in ("", "off") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kvplan"


def _read_entry(file: Path) -> Any:
    """The marshalled entry, or None: never blocks on a FIFO or reads a huge file."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(file, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            return None
        return marshal.loads(os.read(fd, MAX_ENTRY_BYTES + 1))
    finally:
        os.close(fd)


def load(path: Path, parse: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """``parse(path)``, through the cache."""
    directory = cache_dir()
    try:
        st = os.stat(path)
    except OSError:
        directory = None
    if directory is None:
        return parse(path)
    from kvplan import __version__

    stamp = (__version__, sys.version, str(path), st.st_mtime_ns, st.st_size)
    file = directory / f"presets-{__version__}" / f"{path.parent.name}-{path.stem}.marshal"
    try:
        cached = _read_entry(file)
        if (isinstance(cached, tuple) and len(cached) == 2 and cached[0] == stamp
                and isinstance(cached[1], dict)):
            return cached[1]
    except Exception:  # noqa: BLE001 - missing, unreadable or corrupt: parse instead
        pass
    data = parse(path)
    tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")
    try:
        blob = marshal.dumps((stamp, data))
        file.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as out:
            out.write(blob)
        os.replace(tmp, file)
    except (OSError, ValueError):  # a read-only home, or a value marshal cannot hold (a TOML date)
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return data
