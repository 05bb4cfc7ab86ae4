"""User-facing errors: one line naming the problem, one hint naming a fix.

Messages often quote what the user gave (a path, a config value), and that text is untrusted: it may hold
newlines or control characters, or be megabytes long. ``KvplanError.one_line`` is the single place that makes
any message safe to print as one line: control characters are escaped, very long runs are cut, and the whole
line is bounded. ``shorten`` gives a short ``repr`` of a value for building messages in the first place.
"""

from __future__ import annotations

import re
import reprlib

# A quoted value longer than this is cut (``shorten``).
MAX_VALUE_CHARS = 80
# A run of non-space characters longer than this is cut in the printed line (a path stays readable).
MAX_RUN_CHARS = 160
# The message and the hint are each cut to this many characters.
MAX_PART_CHARS = 1200

_REPR = reprlib.Repr()
_REPR.maxstring = MAX_VALUE_CHARS
_REPR.maxother = MAX_VALUE_CHARS
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlong = 40

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# compiled on first use (by ``re``'s cache): most runs print no message
_RUN = r"\S{" + str(MAX_RUN_CHARS + 1) + ",}"


def shorten(value: object) -> str:
    """A ``repr`` of ``value`` cut to about 80 characters, safe for any nesting depth."""
    try:
        text = _REPR.repr(value)
    except (RecursionError, ValueError):  # ValueError: an int too long to convert to text
        text = f"<{type(value).__name__}>"
    if isinstance(value, (str, bytes, list, dict, tuple)) and len(value) > MAX_VALUE_CHARS:
        text += f" ({len(value):,} {'chars' if isinstance(value, str) else 'items'})"
    return text


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def sanitize(text: str, limit: int = MAX_PART_CHARS) -> str:
    """``text`` as one printable line: control and non-printable characters escaped, long runs of non-space
    characters cut in the middle, and at most about ``limit`` characters."""
    text = str(text)
    if len(text) > 4 * limit:  # never walk a multi-megabyte message character by character
        text = text[: 3 * limit] + "..." + text[-limit // 2:]
    if not text.isprintable():
        text = "".join(c if c.isprintable() else _escape(c) for c in text)
    text = re.sub(_RUN, lambda m: m.group(0)[:100] + "..." + m.group(0)[-40:], text)
    if len(text) > limit:
        text = text[: limit - 60] + f"... ({len(text) - limit + 60:,} more chars) ..." + text[-40:]
    return text


class KvplanError(Exception):
    """An input the user can fix. The CLI prints it on one line and exits 2."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        if self.hint:
            return f"error: {sanitize(self.message)} (fix: {sanitize(self.hint)})"
        return f"error: {sanitize(self.message)}"


class InputError(KvplanError):
    """A user value kvplan cannot read: a number, a unit, a preset id, a file (``kvplan.inputs``). Its message is
    the same whether the value came from the command line, a plan file, a start-up log or Python."""


class DoesNotFit(KvplanError):
    """A batch or request the deployment's KV pool cannot hold (``kvplan.calc.tpot``): on the command line a bad
    --batch, exit 2; in a plan (``kvplan check``) a fact about the deployment, reported as a failed assertion."""


class ScenarioError(KvplanError):
    """A deployment or request the scenario's rules refuse (``kvplan.scenario``: the shape, the engine's rules,
    the request's length). ``Scenario(...)`` raises this or ``InputError``, never a plain ``KvplanError``."""
