"""The request stream ``kvplan simulate`` drives through the pool: arrivals, prompt and output lengths.

* Lengths: ``fixed:N``, ``uniform:A,B`` (inclusive) and ``lognormal:mean=M,p99=Q`` (or ``p50=M,p99=Q``), each
  capped at a maximum; a lognormal's (mu, sigma) solve mean = exp(mu + sigma^2 / 2) (or p50 = exp(mu)) and
  p99 = exp(mu + z99 sigma), z99 = 2.3263 (the standard normal's 0.99 quantile).
* Arrivals: Poisson at ``rate`` requests/s (exponential gaps), a closed loop of ``users`` with a think time (the
  next request of a user arrives ``think`` seconds after its last one finished: the simulator draws those), or
  the ``arrival_s`` column of a trace.
* Traces: CSV with a header, or JSON lines, of ``prompt_tokens,output_tokens[,arrival_s]``; read through
  ``kvplan.inputs.files.read_text`` (regular files only, bounded size), at most ``MAX_TRACE_ROWS`` rows, and every
  problem is one line naming the line.
* Presets: ``presets/workloads/<id>.toml``, data with the source of every figure.

Every draw comes from ``numpy.random.Generator`` streams spawned from one ``SeedSequence(seed)`` (prompts,
outputs, arrivals apart), so a seed gives the same requests on every machine, and the same lengths at any rate.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.errors import KvplanError

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.inputs.traces import PrefixBlocks
    from kvplan.specs.values import Note

Z99 = 2.3263478740408408          # the standard normal's 0.99 quantile
# The most requests one run simulates, and so the longest trace read (its lines are counted before any is parsed):
# where the slowest shapes still finish in ~10-20 s on a 2-CPU machine (measured 2026-12-01, llama-3.1-8b on 8 x
# H100 as DP8, 1,000 + 30,000-token requests: 50,000 at --rate 1 in 7 s and 340 MB, --users 1000 in 11 s (20-24 s
# with the machine loaded), a trace all at t=0 in 12-17 s; 1,000,000 at --rate 1 took 158 s and 4.7 GiB, and a
# 1,000,000-line trace 21 s to read alone). tests/test_simulate_bounds.py has the other sizes.
MAX_REQUESTS = 50_000
MAX_TRACE_ROWS = MAX_REQUESTS
# The most requests one command simulates over its runs (--sweep-rate's points, --compare's variants and the base)
MAX_TOTAL_REQUESTS = 200_000
MAX_TOKENS = 10_000_000           # no request is longer than this (kvplan.inputs.units bounds token counts alike)
# The simulated clock stays under this many seconds (~32 years): a float64 time there still resolves 0.1 us
# (2^-23 s), so a millisecond decode step adds to it exactly enough; at 1e300 s a step adds nothing and every TPOT
# came out 0. Arrivals past it are refused, and so the lowest --rate.
MAX_CLOCK_S = 1e9
_UNCAPPED = 10**15                # a draw's cap when only the engine's limit cuts it (after the draw)
MIN_RATE = 1e-6                   # requests/s: one every 11.6 days
DISTS = ("fixed:N", "uniform:A,B", "lognormal:mean=M,p99=Q", "lognormal:p50=M,p99=Q")


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution. kind fixed: a = N; uniform: a..b inclusive; lognormal: a = mu, b = sigma of
    ln(tokens). ``text`` is how it was written."""

    kind: str
    a: float
    b: float
    text: str

    def sample(self, rng, n: int, cap: int):
        """``n`` lengths, each at least 1 and at most ``cap``, as int64."""
        import numpy as np

        if self.kind == "fixed":
            x = np.full(n, self.a, dtype=float)
        elif self.kind == "uniform":
            x = rng.integers(int(self.a), int(self.b), endpoint=True, size=n).astype(float)
        else:
            x = np.rint(rng.lognormal(self.a, self.b, size=n))
        return np.clip(x, 1, max(cap, 1)).astype(np.int64)

    def mean(self) -> float:
        """The uncapped mean."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        return math.exp(self.a + self.b ** 2 / 2)

    def p99(self) -> float:
        """The uncapped 0.99 quantile (fixed and uniform: exact for the integers drawn)."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return self.a + math.ceil(0.99 * (self.b - self.a + 1)) - 1
        return math.exp(self.a + Z99 * self.b)


def _tokens(text: str, flag: str, whole: str) -> int:
    from kvplan.inputs.units import parse_tokens

    try:
        return parse_tokens(text, flag)
    except KvplanError as err:
        raise KvplanError(f"{flag} {whole!r}: {err.message}", err.hint) from None


def parse_dist(text: str, flag: str) -> LengthDist:
    """``fixed:N``, ``uniform:A,B`` or ``lognormal:mean=M,p99=Q`` / ``lognormal:p50=M,p99=Q`` (token counts may
    carry kvplan's suffixes: 30k, 32Ki)."""
    raw = text.strip()
    hint = "write it as " + ", ".join(DISTS)
    kind, sep, rest = raw.partition(":")
    kind = kind.strip().lower()
    if not sep or kind not in ("fixed", "uniform", "lognormal"):
        raise KvplanError(f"{flag} {text!r} is not a length distribution", hint)
    if kind == "fixed":
        n = _tokens(rest, flag, text)
        return LengthDist("fixed", n, n, raw)
    if kind == "uniform":
        parts = rest.split(",")
        if len(parts) != 2:
            raise KvplanError(f"{flag} {text!r} needs two bounds", "write it as uniform:A,B (A <= B)")
        lo, hi = (_tokens(p, flag, text) for p in parts)
        if lo > hi:
            raise KvplanError(f"{flag} {text!r}: the lower bound is above the upper one", "write uniform:A,B, A <= B")
        return LengthDist("uniform", lo, hi, raw)
    fields = {}
    for part in rest.split(","):
        m = re.fullmatch(r"\s*(mean|p50|p99)\s*=\s*(\S+)\s*", part)
        if not m or m.group(1) in fields:
            raise KvplanError(f"{flag} {text!r} is not lognormal:mean=M,p99=Q", hint)
        fields[m.group(1)] = _tokens(m.group(2), flag, text)
    if set(fields) not in ({"mean", "p99"}, {"p50", "p99"}):
        raise KvplanError(f"{flag} {text!r} needs p99 and one of mean or p50", hint)
    q = fields["p99"]
    if "p50" in fields:
        mu = math.log(fields["p50"])
        if q <= fields["p50"]:
            raise KvplanError(f"{flag} {text!r}: p99 must be above p50", "give a p99 larger than the p50")
        return LengthDist("lognormal", mu, (math.log(q) - mu) / Z99, raw)
    mean = fields["mean"]
    # ln(p99 / mean) = z sigma - sigma^2 / 2: the smaller root sigma = z - sqrt(z^2 - 2 ln(p99 / mean)).
    gap = math.log(q / mean)
    if gap <= 0:
        raise KvplanError(f"{flag} {text!r}: p99 must be above the mean", "give a p99 larger than the mean")
    if Z99 ** 2 < 2 * gap:
        ratio = math.exp(Z99 ** 2 / 2)
        raise KvplanError(f"{flag} {text!r}: no lognormal has a p99 {q / mean:.1f}x its mean (at most {ratio:.1f}x)",
                          "give the median instead: lognormal:p50=M,p99=Q")
    sigma = Z99 - math.sqrt(Z99 ** 2 - 2 * gap)
    return LengthDist("lognormal", math.log(mean) - sigma ** 2 / 2, sigma, raw)


# === presets ======================================================================================================
@dataclass(frozen=True)
class WorkloadPreset:
    id: str
    name: str
    prompt: LengthDist
    prompt_max: int | None
    output: LengthDist
    output_max: int | None
    sources: tuple[str, ...]
    path: str


def workloads_dir() -> Path:
    from kvplan.inputs.presets import builtin_dir

    return builtin_dir() / "workloads"


def workload_ids() -> tuple[str, ...]:
    folder = workloads_dir()
    return tuple(sorted(p.stem for p in folder.glob("*.toml"))) if folder.is_dir() else ()


def load_workload(ref: str) -> WorkloadPreset:
    """A built-in workload preset by id, or a workload .toml file."""
    from kvplan.inputs.files import read_toml

    ids = workload_ids()
    path = workloads_dir() / f"{ref.strip().lower()}.toml"
    if ref.strip().lower() not in ids:
        # not a preset: a path that exists (or a dangling link) is read as a file, whose reader says what is wrong
        # with it (a device, a folder, a link loop), rather than "unknown workload"
        if not ref.endswith(".toml") and not (Path(ref).exists() or Path(ref).is_symlink()):
            raise KvplanError(f"unknown workload {ref!r}", "choose " + ", ".join(ids) + " or give a workload .toml")
        path = Path(ref)
    data = read_toml(path, "workload file", "give a workload preset .toml",
                     "a workload nests a few levels; fix the file")
    where = f"workload {path.name}"

    def part(name: str) -> tuple[LengthDist, int | None, str]:
        table = data.get(name)
        if not isinstance(table, dict) or not isinstance(table.get("dist"), str):
            raise KvplanError(f"{where} has no [{name}] dist = \"...\"", f"add [{name}] with dist = \"fixed:1000\"")
        cap = table.get("max")
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_TOKENS):
            raise KvplanError(f"{where}: [{name}] max = {cap!r} is not a token count", "give a whole number >= 1")
        source = table.get("source")
        if not isinstance(source, str) or not source.strip():
            raise KvplanError(f"{where}: [{name}] has no source", "say where the figures come from: source = \"...\"")
        return parse_dist(table["dist"], f"{where} [{name}] dist"), cap, source

    prompt, pmax, psrc = part("prompt")
    output, omax, osrc = part("output")
    return WorkloadPreset(str(data.get("id", path.stem)), str(data.get("name", path.stem)), prompt, pmax, output,
                          omax, (psrc, osrc), str(path))


# === traces =======================================================================================================
@dataclass(frozen=True)
class Trace:
    """A trace's requests in arrival order: lengths, arrivals (s; None: untimed), and where they came from: the
    file, its format (``kvplan.inputs.traces.FORMATS``), each request's file line, Mooncake's prefix blocks, the
    facts the run says of it (rows skipped or sorted) and its first arrival as the file writes it."""

    prompts: tuple[int, ...]
    outputs: tuple[int, ...]
    arrivals: tuple[float, ...] | None
    path: str
    format: str = "kvplan"
    lines: tuple[int, ...] = ()
    blocks: PrefixBlocks | None = None
    facts: tuple[Note, ...] = ()
    start: str = ""


def _trace_int(value, where: str, name: str) -> int:
    if isinstance(value, bool):
        raise KvplanError(f"{where}: {name} = {value!r} is not a whole number of tokens", "fix that value")
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise KvplanError(f"{where}: {name} = {value[:40]!r} is not a whole number of tokens", "fix that value")
        if len(text.lstrip("+-").lstrip("0")) > 9:   # whole, out of range; not parsed (int() refuses 4,300+ digits)
            raise KvplanError(f"{where}: {name} = {text[:40]!r} is not a token count in 1 .. {MAX_TOKENS:,}",
                              "fix that value")
        value = int(text)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise KvplanError(f"{where}: {name} = {value!r} is not a token count in 1 .. {MAX_TOKENS:,}",
                          "fix that value")
    return value


def _trace_time(value, where: str) -> float:
    try:
        t = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        t = math.nan
    if not math.isfinite(t) or not 0 <= t <= MAX_CLOCK_S:
        raise KvplanError(f"{where}: arrival_s = {str(value)[:40]!r} is not a time in 0 .. {MAX_CLOCK_S:.0e} s",
                          "fix that value")
    return t


def read_trace(path: Path, fmt: str | None = None) -> Trace:
    """A trace: a CSV (header row naming the columns) or JSON lines, in kvplan's format (prompt_tokens,
    output_tokens[, arrival_s]) or a public one (``kvplan.inputs.traces``), ``fmt`` or detected (None)."""
    import csv
    import json

    from kvplan.inputs import traces
    from kvplan.inputs.files import read_text

    text = read_text(path, "trace", "give a CSV or JSON-lines file of prompt_tokens,output_tokens[,arrival_s], or "
                     "an Azure, BurstGPT or Mooncake trace")
    lines = text.removeprefix("\ufeff").splitlines()   # a byte-order mark is no part of the header
    body = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    if not body:
        raise KvplanError(f"trace {path} is empty", "give one request per line")
    if body[0][1].lstrip().startswith("["):   # json.dump of a list: no CSV header, and not JSON lines
        raise KvplanError(f"trace {path} is a JSON array; kvplan reads JSON lines, one JSON object per line",
                          "write one JSON object per line, e.g. jq -c '.[]' FILE > FILE.jsonl")
    is_json = body[0][1].lstrip().startswith("{")
    if len(body) > MAX_TRACE_ROWS + (0 if is_json else 1):   # a CSV's header is no request
        raise KvplanError(f"trace {path} has {len(body):,} lines, more than the {MAX_TRACE_ROWS:,} requests one run "
                          "simulates", f"split it into files of at most {MAX_TRACE_ROWS:,} requests")
    rows: list[tuple[int, dict]] = []
    header: list[str] = []
    written: list[str] = []   # the header as the file writes it (matched in lower case), for messages
    if is_json:
        for no, line in body:
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                raise KvplanError(f"trace {path} line {no}: not a JSON object", "one {...} object per line") from None
            except ValueError:   # an integer of over 4,300 digits (Python's int-from-text limit)
                raise KvplanError(f"trace {path} line {no}: a number of thousands of digits is no token count",
                                  "fix that value") from None
            if not isinstance(row, dict):
                raise KvplanError(f"trace {path} line {no}: not a JSON object", "one {...} object per line")
            rows.append((no, row))
    else:
        reader = csv.reader(line for _, line in body)
        try:
            written = [h.strip() for h in next(reader)]
            header = [h.lower() for h in written]
            twice = sorted({h for h in header if header.count(h) > 1})
            if twice:
                raise KvplanError(f"trace {path}: the header names {', '.join(twice)} twice",
                                  "give each column once: prompt_tokens,output_tokens[,arrival_s]")
            for (no, _), values in zip(body[1:], reader, strict=False):
                if reader.line_num > len(rows) + 2:   # this row took more than its own line
                    raise KvplanError(f"trace {path} line {no}: a quoted field runs on to the next line",
                                      "close the quote on the line it opens (one request per line)")
                if len(values) != len(header):
                    raise KvplanError(f"trace {path} line {no}: {len(values)} fields, the header has {len(header)}",
                                      "give every row the header's columns")
                rows.append((no, dict(zip(header, values, strict=True))))
        except csv.Error as err:
            raise KvplanError(f"trace {path}: not valid CSV ({err})", "give a CSV with a header row") from None
    if not rows:
        raise KvplanError(f"trace {path} has a header and no requests", "give one request per line")
    names = list(rows[0][1]) if is_json else header
    fmt = traces.detect(path, names, is_json, fmt, names if is_json else written)
    for no, row in rows if is_json else rows[:1]:   # a CSV's header once, each JSON line's keys
        traces.check_columns(fmt, list(row), f"trace {path}" + (f" line {no}" if is_json else ""), is_json)
    if fmt != "kvplan":
        r = traces.public_rows(path, fmt, rows, _trace_int, MAX_CLOCK_S)
        return Trace(r.prompts, r.outputs, r.arrivals, str(path), fmt, r.lines, r.blocks, r.facts, r.start)
    has_time = "arrival_s" in rows[0][1]
    prompts, outputs, times = [], [], []
    last = 0.0
    for no, row in rows:
        where = f"trace {path} line {no}"
        for name in ("prompt_tokens", "output_tokens"):
            if name not in row:
                raise KvplanError(f"{where}: no {name} column", "give prompt_tokens,output_tokens[,arrival_s]")
        prompts.append(_trace_int(row["prompt_tokens"], where, "prompt_tokens"))
        outputs.append(_trace_int(row["output_tokens"], where, "output_tokens"))
        if has_time != ("arrival_s" in row):
            raise KvplanError(f"{where}: arrival_s is given on some lines only", "give it on every line or none")
        if has_time:
            t = _trace_time(row["arrival_s"], where)
            if t < last:
                raise KvplanError(f"{where}: arrival_s {t:g} is before the line above's {last:g}",
                                  "sort the trace by arrival_s")
            last = t
            times.append(t)
    return Trace(tuple(prompts), tuple(outputs), tuple(times) if has_time else None, str(path),
                 lines=tuple(no for no, _ in rows))


# === the workload =================================================================================================
@dataclass(frozen=True)
class Workload:
    """The requests: lengths in submission order and, for open arrivals, their times (None: a closed loop of
    ``users`` that the simulator drives, each user's next request ``think_s`` after its last finished)."""

    prompts: object            # int64 arrays
    outputs: object
    arrivals: object | None    # float64 seconds, non-decreasing; None for a closed loop
    users: int | None
    think_s: float
    duration_s: float | None   # no request is submitted at or after this time
    describe: str              # one line: how the requests were made
    sources: tuple[str, ...] = ()
    lengths: str = ""          # the request lengths, for the headline ("1,000 + 30,000 tokens", "prompts ..., ...")
    cut: Note | None = None    # how many drawn lengths the engine's limit cut, if any
    blocks: PrefixBlocks | None = None   # a Mooncake trace's prompt blocks (SGLang's scheduler reuses them)
    notes: tuple[Note, ...] = ()         # what the run says of the trace (rows skipped or sorted, hash_ids)


def check_requests(requests: int, runs: int = 1, what: str = "") -> None:
    """Refuse more than ``MAX_REQUESTS`` requests in a run, or ``MAX_TOTAL_REQUESTS`` over ``runs`` runs (``what``
    names them: "--sweep-rate's 20 rates"), before any is drawn or simulated."""
    if not 1 <= requests <= MAX_REQUESTS:
        hint = "give at least 1" if requests < 1 else (
            f"give at most --requests {MAX_REQUESTS} (more takes minutes; repeat the run with other --seed values)")
        raise KvplanError(f"--requests {requests:,} is not in 1 .. {MAX_REQUESTS:,}", hint)
    if requests * runs > MAX_TOTAL_REQUESTS:
        raise KvplanError(f"{what} x --requests {requests:,} simulate {requests * runs:,} requests, more than "
                          f"{MAX_TOTAL_REQUESTS:,}", f"give at most --requests {MAX_TOTAL_REQUESTS // runs}, or "
                          "fewer runs")


def build(*, requests: int, seed: int, prompt: LengthDist, output: LengthDist, max_len: int,
          prompt_max: int | None = None, output_max: int | None = None, rate: float | None = None,
          users: int | None = None, think_s: float = 0.0, duration_s: float | None = None,
          trace: Trace | None = None, sources: tuple[str, ...] = (), name: str | None = None,
          trace_speed: float | None = None, trace_rate: float | None = None) -> Workload:
    """Draw the requests. Each prompt is capped at min(prompt_max, max_len - 1) and each output at
    min(output_max, max_len - prompt): no request is longer than the engine serves; a trace's request longer than
    that is refused, naming its line. ``name``: the workload preset's id, if the lengths came from one (it leads
    ``lengths``). ``trace_speed``: a timed trace's arrivals divided by it (2: twice the rate); ``trace_rate``:
    divided so that the mean rate, (n - 1) / the span of the n arrivals, is this many requests/s."""
    import numpy as np

    if (rate is None) == (users is None) and not (trace is not None and trace.arrivals is not None):
        raise KvplanError("give one of --rate (open arrivals) or --users (a closed loop)",
                          "e.g. --rate 0.5 or --users 32")
    timed = trace is not None and trace.arrivals is not None and rate is None and users is None
    _check_speed(trace_speed, trace_rate, timed, trace is not None)
    check_requests(requests)
    if max_len < 2:
        raise KvplanError(f"the longest request ({max_len} tokens) leaves no room for an output", "raise --max-len")
    cut = None
    gen_prompt, gen_output, gen_arrival = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    if trace is not None:
        n = min(requests, len(trace.prompts))
        prompts = np.asarray(trace.prompts[:n], dtype=np.int64)
        outputs = np.asarray(trace.outputs[:n], dtype=np.int64)
        longest = int((prompts + outputs).max())
        if longest > max_len:
            # an engine refuses such a request whole, and kvplan with it: vLLM's OpenAI server raises "This model's
            # maximum context length is ..." when prompt + max_tokens > max_model_len (vllm-project/vllm,
            # vllm/entrypoints/openai/serving_engine.py, _validate_prompt_and_tokenize, commit 0030b9ff; read for
            # this rule). Cutting its output would simulate a request the trace does not have.
            i = int(np.argmax(prompts + outputs > max_len))
            row = f"line {trace.lines[i]} (request {i + 1})" if trace.lines else f"request {i + 1}"
            raise KvplanError(f"trace {trace.path} {row} has {int(prompts[i]):,} + {int(outputs[i]):,} tokens, more "
                              f"than the {max_len:,} the engine serves", "raise --max-len / --max-model-len, or trim "
                              "the trace")
        describe = f"{n:,} requests from {trace.path}" + (
            f" ({_trace_name(trace.format)} format)" if trace.format != "kvplan" else "")
        lengths = f"lengths from {trace.path}"
    else:
        n = requests
        # drawn under the preset's caps only, then cut to the engine's limit (the same lengths as cutting in the
        # draw: sample() clips after drawing), so that the cuts can be counted and said
        drawn_p = prompt.sample(gen_prompt, n, prompt_max or _UNCAPPED)
        prompts = np.minimum(drawn_p, max_len - 1)
        drawn_o = output.sample(gen_output, n, output_max or _UNCAPPED)
        outputs = np.minimum(drawn_o, max_len - prompts)
        describe = f"{n:,} requests, prompts {prompt.text}, outputs {output.text}"
        cut = _cut_note(int((prompts < drawn_p).sum()), int((outputs < drawn_o).sum()), n, max_len)
        lengths = _lengths_text(prompt, output, prompt_max, output_max, name)
    arrivals = None
    scaled: Note | None = None
    if timed:
        assert trace is not None and trace.arrivals is not None
        arrivals = np.asarray(trace.arrivals[:n], dtype=float)
        describe += ", arrivals from the trace" + (f" (relative to its first, {trace.start})" if trace.start else "")
        arrivals, scaled = _speed_up(arrivals, trace_speed, trace_rate)
        if scaled is not None:
            describe += ", scaled in time (notes)"
    elif rate is not None:
        if not (math.isfinite(rate) and MIN_RATE <= rate <= 1e6):
            raise KvplanError(f"--rate {rate!r} is not in [{MIN_RATE:g}, 1,000,000] requests/s", "give e.g. --rate 0.5")
        arrivals = np.cumsum(gen_arrival.exponential(1.0 / rate, size=n))
        if arrivals[-1] > MAX_CLOCK_S:
            raise KvplanError(f"at --rate {rate:g} the {n:,} requests arrive over {arrivals[-1]:.3g} s, past the "
                              f"{MAX_CLOCK_S:.0e} s the simulator's clock resolves a decode step in",
                              f"give --rate {n / MAX_CLOCK_S * 2:.2g} or more, or fewer --requests")
        describe += f", Poisson arrivals at {rate:g}/s"
    else:
        assert users is not None  # the check at the top: --rate, --users or a trace's arrivals
        if not 1 <= users <= 100_000:
            raise KvplanError(f"--users {users:,} is not in 1 .. 100,000", "give e.g. --users 32")
        if not (math.isfinite(think_s) and 0 <= think_s <= 1e6):
            raise KvplanError(f"--think {think_s!r} is not a time in 0 .. 1,000,000 s", "give e.g. --think 0")
        if think_s * math.ceil(n / users) > MAX_CLOCK_S:
            raise KvplanError(f"--think {think_s:g} s between each user's {math.ceil(n / users):,} requests runs past "
                              f"the {MAX_CLOCK_S:.0e} s the simulator's clock resolves a decode step in",
                              "give a shorter --think, more --users or fewer --requests")
        describe += f", a closed loop of {users:,} users (think {think_s:g} s)"
    if duration_s is not None:
        if not (math.isfinite(duration_s) and duration_s > 0):
            raise KvplanError(f"--duration {duration_s!r} is not a positive time", "give e.g. --duration 600s")
        if arrivals is not None:
            keep = int(np.searchsorted(arrivals, duration_s, side="left"))
            if keep == 0:
                raise KvplanError(f"no request arrives within --duration {duration_s:g} s",
                                  "give a longer --duration or a higher --rate")
            prompts, outputs, arrivals = prompts[:keep], outputs[:keep], arrivals[:keep]
        describe += f", submitted before {duration_s:g} s"
    blocks: PrefixBlocks | None = None
    notes: tuple[Note, ...] = ()
    if trace is not None:
        from kvplan.inputs.traces import prefix_note

        notes = trace.facts + ((scaled,) if timed and scaled is not None else ())
        if trace.blocks is not None:
            blocks = trace.blocks.head(len(prompts))
            notes += (prefix_note(blocks, prompts),)
    return Workload(prompts, outputs, arrivals, users if arrivals is None else None, think_s, duration_s, describe,
                    sources, lengths, cut, blocks, notes)


MAX_SPEED = 1e6   # --trace-speed / the factor --trace-rate makes: as --rate's bounds, 1e-6 .. 1e6


def _trace_name(fmt: str) -> str:
    from kvplan.inputs.traces import SPECS

    return SPECS[fmt].name


def _check_speed(speed: float | None, rate: float | None, timed: bool, traced: bool) -> None:
    """``--trace-speed`` / ``--trace-rate``: one of them, each in range, and only on a trace's own arrivals."""
    if speed is None and rate is None:
        return
    flag = "--trace-speed" if speed is not None else "--trace-rate"
    if speed is not None and rate is not None:
        raise KvplanError("--trace-speed and --trace-rate are two ways to scale the trace's time", "give one of them")
    if not timed:
        raise KvplanError(f"{flag} scales a timed trace's arrivals" + (
            "; --rate / --users replace them" if traced else ", and there is no --trace"),
            "give a --trace with arrival times (and no --rate / --users), or drop " + flag)
    value = speed if speed is not None else rate
    assert value is not None
    low = 1.0 / MAX_SPEED if speed is not None else MIN_RATE
    if not (math.isfinite(value) and low <= value <= MAX_SPEED):
        what = "a speed-up" if speed is not None else "requests/s"
        raise KvplanError(f"{flag} {value!r} is not in [{low:g}, {MAX_SPEED:,.0f}] ({what})",
                          "give e.g. --trace-speed 2 (twice the rate)" if speed is not None else
                          "give e.g. --trace-rate 0.5")


def _speed_up(arrivals, speed: float | None, rate: float | None):
    """The arrivals divided by the speed (``rate``: the speed that makes their mean rate ``rate``), and the note that
    says so (None: not scaled)."""
    from kvplan.specs.values import Number, derived, given, note

    if speed is None and rate is None:
        return arrivals, None
    n, span = len(arrivals), float(arrivals[-1] - arrivals[0])
    said = None
    if rate is not None:
        if n < 2 or span <= 0:
            raise KvplanError("--trace-rate needs a trace whose arrivals span some time (the first and last differ)",
                              "give --trace-speed, or a --rate of Poisson arrivals")
        mean = (n - 1) / span
        speed = rate / mean
        if not 1.0 / MAX_SPEED <= speed <= MAX_SPEED:
            raise KvplanError(f"--trace-rate {rate:g} is {speed:.3g} times the trace's mean rate of {mean:.3g} "
                              f"requests/s, outside [{1.0 / MAX_SPEED:g}, {MAX_SPEED:,.0f}]",
                              "give a rate nearer the trace's own")
        mean_v = Number(mean, derived("(requests - 1) / (last arrival - first)"))
        said = note("--trace-rate {rate:g}: the trace's arrival times are divided by {speed:.4g}, its mean rate of "
                    "{mean:.4g} requests/s (the gaps over their span) made {rate:g}.", rate=Number(rate,
                    given("--trace-rate")), speed=Number(speed, derived("--trace-rate / the trace's mean rate")),
                    mean=mean_v)
    assert speed is not None
    scaled = arrivals / speed
    if scaled[-1] > MAX_CLOCK_S:
        raise KvplanError(f"at {speed:g}x speed the trace's last request arrives at {scaled[-1]:.3g} s, past the "
                          f"{MAX_CLOCK_S:.0e} s the simulator's clock resolves a decode step in",
                          f"give a speed of {float(arrivals[-1]) / MAX_CLOCK_S:.2g} or more, or fewer --requests")
    return scaled, said or note("--trace-speed {speed:g}: the trace's arrival times are divided by {speed:g} "
                                "({speed:g} times its rate).", speed=Number(speed, given("--trace-speed")))


def _cut_note(prompts: int, outputs: int, n: int, max_len: int) -> Note | None:
    """The note that says how many drawn lengths the engine's limit cut (None: none)."""
    from kvplan.specs.values import Count, Tokens, derived, note

    if not (prompts or outputs):
        return None
    why = derived("drawn lengths over the limit of prompt + output")
    counts = {"p": Count(prompts, why), "o": Count(outputs, why), "n": Count(n), "limit": Tokens(max_len)}
    which = " and ".join(part for k, part in ((prompts, "{p} prompts"), (outputs, "{o} outputs")) if k)
    return note(f"The engine's limit cut the lengths drawn: {which} of the {{n}} requests were cut to fit its "
                "{limit}-token limit of prompt + output.", **counts)


def _lengths_text(prompt: LengthDist, output: LengthDist, prompt_max: int | None, output_max: int | None,
                  name: str | None) -> str:
    """The lengths in a few words: "1,000 + 30,000 tokens" when both are fixed, else each distribution as written
    (with a preset's cap), led by the preset's id."""
    if prompt.kind == output.kind == "fixed" and name is None:
        return f"{int(prompt.a):,} + {int(output.a):,} tokens"

    def one(what: str, d: LengthDist, cap: int | None) -> str:
        text = f"{int(d.a):,} tokens" if d.kind == "fixed" else d.text
        return f"{what} {text}" + (f" up to {cap:,}" if cap is not None else "")

    text = one("prompts", prompt, prompt_max) + ", " + one("outputs", output, output_max)
    return f"{name} workload: {text}" if name else text
