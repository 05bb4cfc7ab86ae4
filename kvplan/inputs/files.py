"""Reading untrusted files: what is at a path (without opening it), the bytes of a regular file only (a FIFO, a
device or a socket refused unread, the size bounded), and TOML and JSON documents nested at most ``MAX_DEPTH`` levels.
Every problem is one ``KvplanError`` line naming the file.

The bottom of ``kvplan.inputs``: presets, Hugging Face configs, safetensors headers, plan files, start-up logs and
traces all read through here, and it imports nothing of kvplan but ``kvplan.errors``.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError

# A preset or config file bigger than this is not a preset or a config (a safetensors index of a very large
# checkpoint is a few MB).
MAX_FILE_BYTES = 32 * 2**20
# Tables and arrays nested deeper than this are refused before anything walks them (a preset nests 3 deep, an
# HF config about 5).
MAX_DEPTH = 32

_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _special_kind(mode: int) -> str:
    return next((name for test, name in _SPECIAL if test(mode)), "not a regular file")


def probe(path: Path) -> tuple[str, str]:
    """What is at ``path``, without opening it: ``("file" | "dir", "")``, ``("missing", why)`` or
    ``("bad", why)`` where ``why`` completes "<path> ..." (a FIFO, a device, a symlink loop, a name too long)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        try:
            if os.path.islink(path):
                return "missing", f"is a symlink to {os.readlink(path)}, which does not exist"
        except (OSError, ValueError):
            pass
        return "missing", "does not exist"
    except ValueError:  # an embedded NUL character
        return "bad", "is not a usable path (it contains a NUL character)"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "bad", "is a symlink loop (or too many levels of symlinks)"
        if err.errno == errno.ENAMETOOLONG:
            return "bad", "is not a usable path: it is too long for the file system"
        return "bad", f"cannot be read: {err.strerror or err}"
    if stat.S_ISREG(st.st_mode):
        return "file", ""
    if stat.S_ISDIR(st.st_mode):
        return "dir", ""
    return "bad", f"is {_special_kind(st.st_mode)}, not a file"


def open_regular(path: Path, what: str, fix: str) -> tuple[int, os.stat_result]:
    """A blocking file descriptor on the regular file ``path`` and its stat. A folder, a FIFO, a device or a
    socket is refused without being read (opened non-blocking, checked again after opening). Close the fd."""
    kind, why = probe(path)
    if kind == "dir":
        raise KvplanError(f"{what} {path} is a folder, not a file", fix)
    if kind != "file":
        raise KvplanError(f"{what} {path} {why}", fix)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise KvplanError(f"cannot read {what} {path}: {err.strerror or err}", "check the path") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the check and the open
            raise KvplanError(f"{what} {path} is {_special_kind(st.st_mode)}, not a file", fix)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def check_writable(path: Path, what: str) -> None:
    """Refuse, without opening it, a path to write that is not a regular file (or not there yet): a FIFO would
    block the run until something reads it, a device would swallow the output, a folder cannot be written."""
    kind, why = probe(Path(path))
    if kind == "dir":
        raise KvplanError(f"{what} {path} is a folder, not a file", "give the name of a file to write")
    if kind == "bad":
        raise KvplanError(f"{what} {path} {why}", "give the name of a regular file to write")


def read_text(path: Path, what: str, fix: str) -> str:
    """The UTF-8 text of the regular file ``path`` (``open_regular``); a file over ``MAX_FILE_BYTES`` is refused."""
    fd, st = open_regular(path, what, fix)
    try:
        if st.st_size > MAX_FILE_BYTES:
            raise KvplanError(f"{what} {path} is {st.st_size:,} bytes, too big to be a {what}",
                              f"give the {what} itself (at most {MAX_FILE_BYTES // 2**20} MiB)")
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise KvplanError(f"{what} {path} is over {MAX_FILE_BYTES:,} bytes, too big to be a {what}",
                              f"give the {what} itself (at most {MAX_FILE_BYTES // 2**20} MiB)")
    except OSError as err:
        raise KvplanError(f"cannot read {what} {path}: {err.strerror or err}", "check the path") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise KvplanError(f"{what} {path} is not UTF-8 text", fix) from None


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether tables/arrays nest more than ``limit`` levels (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def parse_toml(text: str, path: Path, what: str = "preset file",
               deep_fix: str = "a preset nests a few levels; fix the file") -> dict[str, Any]:
    """The TOML document of ``text`` (read from ``path``): syntax errors, integers too long to convert and nesting
    deeper than ``MAX_DEPTH`` are one-line errors naming the file."""
    if sys.version_info >= (3, 11):  # imported on use: only a run that reads a preset file pays for it
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise KvplanError(f"{what} {path} is not valid TOML: {err}", "fix the TOML syntax") from None
    except RecursionError:
        data = None
    except ValueError as err:  # e.g. an integer with more digits than Python converts
        raise KvplanError(f"{what} {path} is not valid TOML: {err}", "fix the TOML syntax") from None
    if data is None or too_deep(data):
        raise KvplanError(f"{what} {path} nests tables or arrays more than {MAX_DEPTH} levels deep", deep_fix)
    return data


def read_toml(path: Path, what: str = "preset file", fix: str = "save it as a UTF-8 TOML file",
              deep_fix: str = "a preset nests a few levels; fix the file") -> dict[str, Any]:
    """``parse_toml`` of the regular file ``path`` (read by ``read_text``: FIFOs refused unread, size bounded)."""
    return parse_toml(read_text(path, what, fix), path, what, deep_fix)


_TOO_DEEP = object()


def read_json(path: Path, what: str, fix: str = "give a JSON file",
              deep_fix: str = "a Hugging Face config nests a few levels; fix the file") -> Any:
    """The parsed JSON of a regular file (read by ``read_text``), with the same bounds as ``parse_toml``."""
    import json

    text = read_text(path, what, fix)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise KvplanError(f"{what} {path} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}",
                          "fix the JSON syntax") from None
    except RecursionError:
        data = _TOO_DEEP
    except ValueError as err:  # e.g. an integer with more digits than Python converts
        raise KvplanError(f"{what} {path} is not valid JSON: {err}", "fix the JSON syntax") from None
    if data is _TOO_DEEP or too_deep(data):
        raise KvplanError(f"{what} {path} nests objects or arrays more than {MAX_DEPTH} levels deep", deep_fix)
    return data
