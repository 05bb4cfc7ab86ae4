"""JSON text of a result document, the same text as ``json.dumps(doc, indent=2, allow_nan=False)``, without importing
the ``json`` package: its ``__init__`` imports the decoder and scanner too, which compile their regular expressions
at import (about 1.5 ms of a ~60 ms start-up, on the ``-f json`` path only; the output layer never parses JSON).

The rules are the JSON standard's (RFC 8259) as ``json.dumps`` applies them with its defaults: strings escaped to
ASCII (``\\"``, ``\\\\``, the short escapes ``\\b \\f \\n \\r \\t``, any other character outside space .. ``~`` as
``\\uXXXX``, lowercase hex, above U+FFFF as a UTF-16 surrogate pair), finite floats as ``float.__repr__``, NaN and
infinities refused, dict keys made strings (numbers, booleans and null as their JSON text), tuples as arrays, two
spaces of indent per level, ``", "`` between items at line ends and ``": "`` after keys."""

from __future__ import annotations

from typing import Any

# every ASCII character json.dumps escapes: control characters, DEL, the quote and the backslash
_ESCAPES: dict[int, str] = {i: f"\\u{i:04x}" for i in (*range(0x20), 0x7F)}
_ESCAPES.update({ord("\b"): "\\b", ord("\f"): "\\f", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t",
                 ord('"'): '\\"', ord("\\"): "\\\\"})


def _string(s: str) -> str:
    if s.isascii():
        return '"' + s.translate(_ESCAPES) + '"'
    out = []
    for ch in s:
        o = ord(ch)
        if o < 0x80:
            out.append(_ESCAPES.get(o, ch))
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:                                   # a UTF-16 surrogate pair
            o -= 0x10000
            out.append(f"\\u{0xD800 | (o >> 10):04x}\\u{0xDC00 | (o & 0x3FF):04x}")
    return '"' + "".join(out) + '"'


def _float(x: float) -> str:
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"Out of range float values are not JSON compliant: {x!r}")
    return float.__repr__(x)


def _key(k: Any) -> str:
    if isinstance(k, str):
        return _string(k)
    if k is True or k is False or k is None:
        return '"' + {True: "true", False: "false", None: "null"}[k] + '"'
    if isinstance(k, int):
        return '"' + int.__repr__(k) + '"'
    if isinstance(k, float):
        return '"' + _float(k) + '"'
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


def _write(value: Any, level: int, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_string(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float(value))
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = "\n" + "  " * (level + 1)
        out.append("[")
        for i, item in enumerate(value):
            out.append(inner if i == 0 else "," + inner)
            _write(item, level + 1, out)
        out.append("\n" + "  " * level + "]")
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = "\n" + "  " * (level + 1)
        out.append("{")
        for i, (k, item) in enumerate(value.items()):
            out.append((inner if i == 0 else "," + inner) + _key(k) + ": ")
            _write(item, level + 1, out)
        out.append("\n" + "  " * level + "}")
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(doc: Any) -> str:
    """``doc`` as JSON text, two spaces of indent: ``json.dumps(doc, indent=2, allow_nan=False)``'s text."""
    out: list[str] = []
    _write(doc, 0, out)
    return "".join(out)
