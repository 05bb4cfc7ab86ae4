"""Public LLM-serving traces in their own formats, read into kvplan's ``Trace`` (``kvplan.inputs.workload``).

The formats (docs/traces.md), each read from the file's header (CSV) or first record (JSON lines), or named:

* ``azure``: the Azure LLM inference traces 2023 and 2024 (Azure/AzurePublicDataset, AzureLLMInferenceDataset2023.md
  and AzureLLMInferenceDataset2024.md: "TIMESTAMP | Invocation time", "ContextTokens | Number of context tokens",
  "GeneratedTokens | Number of generated tokens"). CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``, the time a
  wall-clock datetime ``2023-11-16 18:15:46.6805900`` (up to 9 fractional digits read exactly, as integer
  nanoseconds, so two stamps 100 ns apart stay 100 ns apart).
* ``burstgpt``: BurstGPT (HPMLL/BurstGPT, README.md "Schema": "Timestamp: request submission time, seconds from
  0:00:00 on the first day"; Model, Request tokens, Response tokens, Total tokens, Log Type). CSV
  ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``; the README's announced ``Session ID``
  and ``Elapsed time`` columns are known and not used. Rows with 0 response tokens are the README's failures
  ("some failure that Response tokens are 0s"): skipped, and the run says how many.
* ``mooncake``: Mooncake's FAST'25 traces (kvcache-ai/Mooncake, FAST25-release/README.md and
  FAST25-release/traces/*.jsonl): JSON lines of ``timestamp`` (ms), ``input_length``, ``output_length`` and
  ``hash_ids``, one id per 512-token block of the prompt (the last block partial: ceil(input_length / 512) ids), an
  id shared by two requests being a shared prefix. The ids are carried as ``PrefixBlocks``.
* ``kvplan``: kvplan's own CSV / JSON lines of ``prompt_tokens,output_tokens[,arrival_s]`` (read by
  ``kvplan.inputs.workload.read_trace``).

Every public format's arrivals are made relative to its earliest row (the first row of a sorted file), and a file
out of time order is sorted (stably: rows of one time keep the file's order) and said so; kvplan's own format
must be sorted (its rows are the requests in order). A column a format does not define is refused, as is a file
that matches no format (the message names the formats tried and their headers). Rows with 0 output tokens in a
public format are skipped and counted (nothing to decode); a prompt of 0 tokens is refused.

Layer: ``kvplan.inputs``; numpy is imported inside the functions that build arrays.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.errors import KvplanError

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.specs.values import Note

FORMATS = ("kvplan", "azure", "burstgpt", "mooncake")
MOONCAKE_BLOCK_TOKENS = 512     # one hash id per 512-token block (FAST25-release/traces: ceil(input_length / 512) ids)
_MAX_ID = 2**63 - 1             # a hash id is kept as an int64


@dataclass(frozen=True)
class Format:
    id: str
    name: str
    header: str                 # the columns as the format writes them (its docs' spelling)
    required: tuple[str, ...]   # lower-case names
    optional: tuple[str, ...] = ()
    json: bool = False          # JSON lines (else CSV with a header row)


SPECS = {
    "kvplan": Format("kvplan", "kvplan trace", "prompt_tokens,output_tokens[,arrival_s] (CSV or JSON lines)",
                     ("prompt_tokens", "output_tokens"), ("arrival_s",)),
    "azure": Format("azure", "Azure LLM inference trace", "TIMESTAMP,ContextTokens,GeneratedTokens",
                    ("timestamp", "contexttokens", "generatedtokens")),
    "burstgpt": Format("burstgpt", "BurstGPT trace",
                       "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
                       ("timestamp", "model", "request tokens", "response tokens", "total tokens", "log type"),
                       ("session id", "elapsed time")),
    "mooncake": Format("mooncake", "Mooncake trace", "JSON lines of timestamp, input_length, output_length, hash_ids",
                       ("timestamp", "input_length", "output_length"), ("hash_ids",), json=True),
}
# the CSV formats' column names as they write them (a header is matched in lower case), for messages
_SPELLING = {
    "azure": {"timestamp": "TIMESTAMP", "contexttokens": "ContextTokens", "generatedtokens": "GeneratedTokens"},
    "burstgpt": {"timestamp": "Timestamp", "model": "Model", "request tokens": "Request tokens",
                 "response tokens": "Response tokens", "total tokens": "Total tokens", "log type": "Log Type",
                 "session id": "Session ID", "elapsed time": "Elapsed time"}}
# the names that mark a format in a header (any one of them)
_MARKS = {"kvplan": {"prompt_tokens", "output_tokens", "arrival_s"}, "azure": {"contexttokens", "generatedtokens"},
          "burstgpt": {"request tokens", "response tokens"}, "mooncake": {"input_length", "output_length", "hash_ids"}}


def _tried() -> str:
    return "; ".join(f"{s.id}: {s.header}" for s in SPECS.values())


def detect(path, names: list[str], is_json: bool, named: str | None, written: list[str]) -> str:
    """The format of a file whose header (CSV, in lower case) or first record (JSON lines) has ``names`` (as the
    file writes them: ``written``): ``named`` if given and it fits, else the one the names mark. Refuses a named
    format the file is not, and a file that matches none (naming the formats tried and their headers)."""
    marked = [f for f in FORMATS if _MARKS[f] & set(names) and (f == "kvplan" or SPECS[f].json == is_json)]
    what = "first record has the keys" if is_json else "header is"
    shown = (", " if is_json else ",").join(written)[:120]
    if named is not None:
        if named not in marked:
            kind = "JSON lines" if is_json else "a CSV"
            looks = f"; it looks like {marked[0]}" if len(marked) == 1 else ""
            raise KvplanError(f"--trace-format {named}: trace {path} is {kind} whose {what} {shown!r}, not "
                              f"{named}'s ({SPECS[named].header}){looks}",
                              "drop --trace-format to detect the format, or give the file it names")
        return named
    if len(marked) != 1:
        why = "matches no trace format" if not marked else f"matches {' and '.join(marked)} at once"
        raise KvplanError(f"trace {path} {why}: its {what} {shown!r}; tried {_tried()}",
                          "give a file in one of these formats, or name it with --trace-format")
    return marked[0]


def check_format(text: str | None) -> str | None:
    """``--trace-format``: auto (None) or one of ``FORMATS``."""
    if text is None or text.strip().lower() == "auto":
        return None
    name = text.strip().lower()
    if name not in FORMATS:
        raise KvplanError(f"--trace-format {text[:40]!r} is not a trace format", "choose auto, " + ", ".join(FORMATS))
    return name


def check_columns(fmt: str, names: list[str], where: str, is_json: bool) -> None:
    """Refuse a column (key) the format does not define, and one it needs that is missing."""
    spec = SPECS[fmt]
    spell = _SPELLING.get(fmt, {})
    thing = "key" if is_json and fmt != "kvplan" else "column"
    for name in names:
        if name not in spec.required and name not in spec.optional:
            raise KvplanError(f"{where}: {thing} {name[:40]!r} is not one of the {spec.name}'s ({spec.header})",
                              f"drop that {thing}, or name another format with --trace-format")
    for name in spec.required:
        if name not in names:
            raise KvplanError(f"{where}: no {spell.get(name, name)} {thing}", f"give {spec.header}")


# === the rows of each public format ===============================================================================
@dataclass(frozen=True)
class PrefixBlocks:
    """Mooncake's ``hash_ids``: request i's prompt blocks are ``ids[offsets[i]:offsets[i + 1]]`` in prompt order,
    each ``block_tokens`` tokens (its last block partial); an id in two requests is a prefix they share. SGLang's
    scheduler (``kvplan.engines.sglang_scheduler``) reuses them in its radix tree."""

    ids: Any                    # int64 array, every request's ids one after the other
    offsets: Any                # int64 array of n + 1 offsets
    block_tokens: int = MOONCAKE_BLOCK_TOKENS

    @property
    def requests(self) -> int:
        return len(self.offsets) - 1

    def head(self, n: int) -> PrefixBlocks:
        """The first ``n`` requests' blocks."""
        end = int(self.offsets[n])
        return PrefixBlocks(self.ids[:end], self.offsets[:n + 1], self.block_tokens)

    def take(self, indexes) -> PrefixBlocks:
        """The blocks of the requests at ``indexes`` (e.g. one DP replica's), in that order."""
        import numpy as np

        idx = np.asarray(indexes, dtype=np.int64)
        lengths = np.diff(self.offsets)[idx]
        offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        at = np.repeat(self.offsets[:-1][idx] - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
        return PrefixBlocks(self.ids[at], offsets, self.block_tokens)

    def _groups(self):
        """The ids sorted stably (numpy's hash-free way: ``np.unique`` took 1.6 s on 1.5M ids where a sort takes
        0.09 s): the sort order, where each id's run starts, and each position's request."""
        import numpy as np

        order = np.argsort(self.ids, kind="stable")
        ids = self.ids[order]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else np.zeros(0, dtype=np.int64)
        req = np.repeat(np.arange(self.requests), np.diff(self.offsets))
        return order, starts, req

    def distinct_blocks(self) -> int:
        return len(self._groups()[1])

    def shared_blocks(self) -> int:
        """Ids that occur in more than one request."""
        import numpy as np

        order, starts, req = self._groups()
        if not len(starts):
            return 0
        reqs = req[order]                      # non-decreasing within an id's run: the sort is stable
        new_request = np.r_[True, reqs[1:] != reqs[:-1]]
        new_request[starts] = True
        return int((np.add.reduceat(new_request.astype(np.int64), starts) > 1).sum())

    def hit_tokens(self, prompts) -> int:
        """The prompt tokens an infinite prefix cache would serve, the requests taken in order: a request's leading
        blocks, up to its first block no earlier request had, each ``block_tokens`` tokens and the last one its
        own (``prompts[i] - block_tokens * (blocks - 1)``): min(leading hits x block_tokens, prompt)."""
        import numpy as np

        n = self.requests
        if n == 0 or len(self.ids) == 0:
            return 0
        order, starts, req = self._groups()
        at_start = np.zeros(len(order), dtype=np.int64)
        at_start[starts] = 1
        run = np.cumsum(at_start) - 1                                     # each sorted position's id run
        first = np.empty(len(order), dtype=np.int64)
        first[order] = order[starts][run]                                 # the first position of each one's id
        lengths = np.diff(self.offsets)
        begin = self.offsets[:-1][req]
        seen = first < begin                                              # first seen in an earlier request
        first_miss = np.where(seen, lengths[req], np.arange(len(order)) - begin)
        leading = np.zeros(n, dtype=np.int64)
        leading[lengths > 0] = np.minimum.reduceat(first_miss, self.offsets[:-1][lengths > 0])
        return int(np.minimum(leading * self.block_tokens, np.asarray(prompts, dtype=np.int64)).sum())


@dataclass(frozen=True)
class Rows:
    """A public trace's requests in arrival order: lengths, arrivals (s, the first at 0), file lines, Mooncake's
    blocks, and the facts the run says (rows skipped, the file's order, models)."""

    prompts: tuple[int, ...]
    outputs: tuple[int, ...]
    arrivals: tuple[float, ...]
    lines: tuple[int, ...]
    blocks: PrefixBlocks | None
    facts: tuple[Note, ...]
    start: str                  # the first arrival as the file writes it


def _tokens(value, where: str, name: str, count: Callable[[Any, str, str], int]) -> int:
    """A token count: 0, else ``count``'s (kvplan's reader of a trace's token count, bounded)."""
    if type(value) is int and value == 0 or (isinstance(value, str) and re.fullmatch(r"\s*0+\s*", value)):
        return 0
    return count(value, where, name)


def _number(value, where: str, name: str, most: float, unit: str) -> float:
    try:
        t = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        t = math.nan
    if not math.isfinite(t) or not 0 <= t <= most:
        raise KvplanError(f"{where}: {name} = {str(value)[:40]!r} is not a time in 0 .. {most:.0e} {unit}",
                          "fix that value")
    return t


_STAMP = re.compile(r"\s*(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
                    r"(Z|[+-]\d{2}:\d{2})?\s*")


def azure_stamp_ns(value, where: str) -> int:
    """An Azure ``TIMESTAMP`` (``2023-11-16 18:15:46.6805900``, optionally with a UTC offset, ``+00:00`` or ``Z``)
    as integer nanoseconds since 1970 (read as UTC without an offset; only differences are used)."""
    import calendar
    import datetime

    m = _STAMP.fullmatch(value) if isinstance(value, str) else None
    try:
        if m is None:
            raise ValueError
        parts = [int(g) for g in m.groups()[:6]]
        stamp = datetime.datetime(*parts)   # type: ignore[arg-type]  # checks the day of the month, the hour, ...
    except ValueError:
        raise KvplanError(f"{where}: TIMESTAMP = {str(value)[:40]!r} is not a date and time like "
                          "2023-11-16 18:15:46.6805900", "fix that value") from None
    frac = (m.group(7) or "").ljust(9, "0")
    zone = m.group(8) or "Z"
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return (calendar.timegm(stamp.timetuple()) - offset) * 10**9 + int(frac)


def public_rows(path, fmt: str, rows: list[tuple[int, dict]], count: Callable[[Any, str, str], int],
                max_clock: float) -> Rows:
    """The requests of a public trace's rows ((file line, column -> value), the columns checked): each token count
    read by ``count`` (value, where, column name), each arrival at most ``max_clock`` s after the first."""
    from kvplan.specs.values import Count, note

    names = {"azure": ("timestamp", "contexttokens", "generatedtokens"),
             "burstgpt": ("timestamp", "request tokens", "response tokens"),
             "mooncake": ("timestamp", "input_length", "output_length")}[fmt]
    spell = _SPELLING.get(fmt, {})
    t_name, p_name, o_name = (spell.get(n, n) for n in names)
    has_blocks = fmt == "mooncake" and "hash_ids" in rows[0][1]
    stamps: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    lines: list[int] = []
    blocks: list[list[int]] = []
    models: dict[str, int] = {}
    skipped = 0
    for no, row in rows:
        where = f"trace {path} line {no}"
        prompt = _tokens(row[names[1]], where, p_name, count)
        output = _tokens(row[names[2]], where, o_name, count)
        if prompt == 0:
            raise KvplanError(f"{where}: {p_name} = 0, a request with no prompt", "fix that row, or drop it")
        if fmt == "azure":
            stamp: float = azure_stamp_ns(row["timestamp"], where)
        else:
            stamp = _number(row["timestamp"], where, t_name, max_clock * (1 if fmt == "burstgpt" else 1000),
                            "s" if fmt == "burstgpt" else "ms")
        if has_blocks != ("hash_ids" in row):
            raise KvplanError(f"{where}: hash_ids is given on some lines only", "give it on every line or none")
        ids = _hash_ids(row["hash_ids"], prompt, where) if has_blocks else []
        if output == 0:
            skipped += 1
            continue
        if fmt == "burstgpt":
            model = str(row["model"]).strip()[:40]
            models[model] = models.get(model, 0) + 1
        stamps.append(stamp)
        prompts.append(prompt)
        outputs.append(output)
        lines.append(no)
        blocks.append(ids)
    facts: list[Note] = []
    if skipped:
        why = "BurstGPT's failed requests" if fmt == "burstgpt" else "nothing to decode"
        facts.append(note("{skipped} rows of the trace have 0 " + o_name + " (" + why + ") and are skipped.",
                          skipped=Count(skipped)))
    if not prompts:
        raise KvplanError(f"trace {path}: every row has 0 {o_name}", "give a trace with requests that decode")
    order = list(range(len(prompts)))
    if any(stamps[i] < stamps[i - 1] for i in range(1, len(stamps))):
        order.sort(key=stamps.__getitem__)     # stable: rows of one time keep the file's order
        moved = sum(1 for i, j in enumerate(order) if i != j)
        facts.append(note("The trace's rows are not in time order: sorted by " + t_name + " ({moved} rows moved; "
                          "rows of one time keep the file's order).", moved=Count(moved)))
    first = stamps[order[0]]
    per_second = {"azure": 10**9, "burstgpt": 1, "mooncake": 1000}[fmt]   # ns, s, ms
    arrivals = []
    for i in order:
        t = (stamps[i] - first) / per_second   # a correctly rounded quotient (884 ms is 0.884 s)
        if t > max_clock:
            raise KvplanError(f"trace {path} line {lines[i]}: {t_name} is {t:.3g} s after the first request, past "
                              f"the {max_clock:.0e} s the simulator's clock resolves a decode step in",
                              "split the trace, or give --trace-speed to compress it")
        arrivals.append(t)
    if len(models) > 1:
        mix = ", ".join(f"{name} {count:,}" for name, count in sorted(models.items(), key=lambda kv: -kv[1]))
        facts.append(note("The trace mixes {k} models' requests (" + mix + "); every request is simulated on the "
                          "scenario's model.", k=Count(len(models))))
    start = _start_text(fmt, first)
    return Rows(tuple(prompts[i] for i in order), tuple(outputs[i] for i in order), tuple(arrivals),
                tuple(lines[i] for i in order), _blocks([blocks[i] for i in order]) if has_blocks else None,
                tuple(facts), start)


def _start_text(fmt: str, first: float | int) -> str:
    if fmt == "azure":
        import datetime

        sec, ns = divmod(int(first), 10**9)
        day = datetime.datetime.fromtimestamp(sec, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        return f"{day}.{ns:09d}".rstrip("0").rstrip(".")
    return f"{first:g} s" if fmt == "burstgpt" else f"{first:g} ms"


def _hash_ids(value, prompt: int, where: str) -> list[int]:
    need = -(-prompt // MOONCAKE_BLOCK_TOKENS)
    if not isinstance(value, list) or not all(type(v) is int and 0 <= v <= _MAX_ID for v in value):
        raise KvplanError(f"{where}: hash_ids is not a list of block ids (whole numbers >= 0)", "fix that row")
    if len(value) != need:
        raise KvplanError(f"{where}: hash_ids has {len(value):,} ids, but a prompt of {prompt:,} tokens has {need:,} "
                          f"blocks of {MOONCAKE_BLOCK_TOKENS} tokens", "give one id per 512-token block of the prompt")
    return value


def _blocks(per_request: list[list[int]]) -> PrefixBlocks:
    import numpy as np

    offsets = np.zeros(len(per_request) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in per_request], out=offsets[1:])
    ids = np.fromiter((v for b in per_request for v in b), dtype=np.int64, count=int(offsets[-1]))
    return PrefixBlocks(ids, offsets)


def prefix_note(blocks: PrefixBlocks, prompts) -> Note:
    """What the run says of Mooncake's hash_ids: read, simulated by SGLang's scheduler only, and the share an
    infinite cache would hit."""
    import numpy as np

    from kvplan.specs.values import Count, Fraction, Tokens, derived, note

    total = int(np.asarray(prompts, dtype=np.int64).sum())
    hit = blocks.hit_tokens(prompts)
    why = derived("leading blocks seen in an earlier request, each 512 tokens (the last its own), over the "
                  "prompt tokens")
    return note("The trace's hash_ids ({distinct} distinct {size}-token blocks, {shared} of them in more than one "
                "request) are read; only --engine sglang simulates prefix reuse across requests from them (its "
                "radix tree), the other engines do not: an infinite prefix cache would serve {share:.1%} of the "
                "prompt tokens ({hit} of {total}); --shared-prefix models one shared system prompt.",
                distinct=Count(blocks.distinct_blocks()), size=Tokens(blocks.block_tokens),
                shared=Count(blocks.shared_blocks()), share=Fraction(hit / total if total else 0.0, why),
                hit=Tokens(hit), total=Tokens(total))
