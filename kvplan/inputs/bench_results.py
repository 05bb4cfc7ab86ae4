"""Benchmark results a user already holds, read for ``kvplan calibrate``: the JSON ``vllm bench serve --save-result``
writes (one object; ``--append-result`` appends one per line) and the JSONL SGLang's ``python -m
sglang.bench_serving --output-file`` appends (one object per run and line).

Field names as the tools write them (read from their source, never copied):

* vLLM, ``vllm/benchmarks/serve.py`` (vllm-project/vllm main at 009e6d4a): the run's settings ``backend`` /
  ``endpoint_type``, ``model_id``, ``num_prompts``, ``request_rate`` (a number, or the string ``"inf"``),
  ``burstiness``, ``max_concurrency`` (null when not set); the results ``duration`` (s), ``completed``, ``failed``,
  ``total_input_tokens``, ``total_output_tokens``, ``request_throughput`` (req/s), ``latencies`` (each request's
  E2E, s), and per ``--percentile-metrics`` (default ttft,tpot,itl) ``mean_/median_/std_<m>_ms`` and ``p<P>_<m>_ms``
  for m in ttft, tpot, itl, e2el; with ``--save-detailed`` also ``input_lens``, ``output_lens``, ``ttfts`` (s) and
  ``itls`` (per request, a list of s).
* SGLang, ``python/sglang/bench_serving.py`` (sgl-project/sglang main at 0033168f): ``backend``, ``dataset_name``,
  ``request_rate``, ``max_concurrency``, ``duration``, ``completed``, ``total_input_tokens``,
  ``total_output_tokens``, ``request_throughput``, ``mean_/median_/std_/p99_e2e_latency_ms``,
  ``mean_/median_/std_/p99_ttft_ms``, ``..._tpot_ms``, ``..._itl_ms`` (p95 too), ``concurrency`` (the sum of the
  requests' E2E latencies over the duration: the mean number in flight) and ``accept_length``; with
  ``--output-details`` also ``input_lens``, ``output_lens``, ``ttfts``, ``itls``.

A figure kvplan uses must be a finite number >= 0 (a TPOT > 0); NaN, infinities, text and absurd sizes are refused
in one line naming the file, the line (JSONL) and the field. Fields kvplan does not use are not checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError, shorten

WHAT = "benchmark result"
FIX = "give the JSON vllm bench serve --save-result wrote, or SGLang bench_serving's --output-file JSONL"
VLLM, SGLANG = "vllm bench serve", "sglang bench_serving"
MAX_RUNS = 10_000
MAX_REQUESTS = 10_000_000       # per-request lists longer than this are no benchmark run
MAX_TOKENS = 100_000_000        # kvplan.inputs.units.MAX_TOKENS: a mean length past it is no request
MAX_MS = 3.6e9                  # 1,000 hours: a latency past it is no measurement
STATS = ("mean", "median", "p99")
_VLLM_KEYS = frozenset({"endpoint_type", "num_prompts", "mean_e2el_ms", "median_e2el_ms", "burstiness", "label",
                        "max_output_tokens_per_s"})
_SGLANG_KEYS = frozenset({"mean_e2e_latency_ms", "median_e2e_latency_ms", "total_output_tokens_retokenized",
                          "concurrency", "accept_length", "random_input_len", "sharegpt_output_len"})


@dataclass(frozen=True)
class BenchRun:
    """One benchmark run: the load, the mean request, and the latency statistics (seconds)."""

    source: str                      # the file, with ":line" for a line of a JSONL file
    tool: str                        # VLLM or SGLANG
    model: str | None
    request_rate: float | None       # requests/s; None: infinite (every request sent at once)
    max_concurrency: int | None
    completed: int
    duration_s: float | None
    request_throughput: float | None  # completed requests/s
    mean_input_tokens: float
    mean_output_tokens: float
    mean_e2e_s: float | None
    e2e_from: str                    # which field mean_e2e_s came from
    tool_concurrency: float | None   # SGLang's own mean in-flight requests (sum of E2E / duration)
    ttft_s: dict[str, float] = field(default_factory=dict)   # STATS -> seconds, those the file has
    tpot_s: dict[str, float] = field(default_factory=dict)
    itl_s: dict[str, float] = field(default_factory=dict)
    detailed: bool = False           # per-request lists saved
    backend: str | None = None       # the server the tool measured (its "backend"), as the file names it


def looks_like(text: str) -> bool:
    """Whether ``text`` reads as JSON of a benchmark: its first character is ``{``, or it is a whole JSON array (an
    SGLang log's lines start with "[2025-01-01 12:00:00]")."""
    import json

    head = text.lstrip()[:1]
    if head != "[":
        return head == "{"
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _objects(text: str, path: str) -> list[tuple[str, dict]]:
    """(where, object) of a JSON document or of each line of a JSONL file."""
    import json

    def load(chunk: str, where: str) -> Any:
        try:
            return json.loads(chunk)
        except RecursionError:
            raise KvplanError(f"{WHAT} {where} nests too deep", FIX) from None
        except ValueError as err:   # JSONDecodeError, and integers of over 4,300 digits
            raise KvplanError(f"{WHAT} {where} is not valid JSON: {str(err)[:80]}", FIX) from None

    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    if whole is not None:
        docs = [(path, whole)]
    else:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) > MAX_RUNS:
            raise KvplanError(f"{WHAT} {path} has over {MAX_RUNS:,} runs", "give fewer runs")
        docs = [(f"{path}:{n}", load(line, f"{path} line {n}")) for n, line in lines]
    for where, doc in docs:
        if not isinstance(doc, dict):
            raise KvplanError(f"{WHAT} {where} is not a JSON object of one run", FIX)
    return docs


def _number(doc: dict, key: str, where: str, *, positive: bool = False, most: float = math.inf) -> float | None:
    """A figure of the run: None when absent or null; refused unless a finite number in range."""
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KvplanError(f"{WHAT} {where}: {key} = {shorten(value)} is not a number", FIX)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or number < 0 or (positive and number == 0) or number > most:
        bound = f" (at most {most:g})" if math.isfinite(most) else ""
        raise KvplanError(f"{WHAT} {where}: {key} = {shorten(value)} must be a finite number "
                          f"{'> 0' if positive else '>= 0'}{bound}", FIX)
    return number


def _series(doc: dict, key: str, where: str, nested: bool = False) -> list[float] | None:
    """A per-request list (``itls``: a list per request, flattened); None when absent."""
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_REQUESTS:
        raise KvplanError(f"{WHAT} {where}: {key} is not a list of up to {MAX_REQUESTS:,} requests", FIX)
    items = [x for row in value for x in (row if isinstance(row, list) else [row])] if nested else value
    if len(items) > 10 * MAX_REQUESTS:
        raise KvplanError(f"{WHAT} {where}: {key} holds over {10 * MAX_REQUESTS:,} values", FIX)
    out = []
    for x in items:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not (
                math.isfinite(float(x)) and float(x) >= 0):
            raise KvplanError(f"{WHAT} {where}: {key} holds {shorten(x)}, not a finite number >= 0", FIX)
        out.append(float(x))
    return out


def _tool(doc: dict, where: str) -> str:
    keys = set(doc)
    vllm, sglang = len(keys & _VLLM_KEYS), len(keys & _SGLANG_KEYS)
    if not ({"completed"} <= keys and (vllm or sglang)) or vllm == sglang:
        raise KvplanError(f"{WHAT} {where} is neither a vllm bench serve result nor an SGLang bench_serving one "
                          "(no completed / mean_e2el_ms / concurrency fields)", FIX)
    return VLLM if vllm > sglang else SGLANG


def _stats(doc: dict, metric: str, where: str, detail: list[float] | None) -> dict[str, float]:
    out = {}
    for stat in STATS:
        ms = _number(doc, f"{stat}_{metric}_ms", where, most=MAX_MS)
        if ms is not None:
            out[stat] = ms / 1000
    if "mean" not in out and detail:
        out["mean"] = math.fsum(detail) / len(detail)
    return out


def _run(doc: dict, where: str) -> BenchRun:
    tool = _tool(doc, where)
    completed = _number(doc, "completed", where, most=MAX_REQUESTS)
    if completed is None or completed < 1 or completed != int(completed):
        raise KvplanError(f"{WHAT} {where}: completed must be a whole number of requests >= 1", FIX)
    n = int(completed)
    rate_text = doc.get("request_rate")
    rate = None if rate_text in (None, "inf", "Infinity") or (
        isinstance(rate_text, float) and math.isinf(rate_text)) else _number(doc, "request_rate", where, positive=True)
    concurrency = _number(doc, "max_concurrency", where, positive=True, most=MAX_REQUESTS)
    inputs, outputs = _series(doc, "input_lens", where), _series(doc, "output_lens", where)
    means = []
    for total_key, lens, name in (("total_input_tokens", inputs, "input"), ("total_output_tokens", outputs, "output")):
        total = _number(doc, total_key, where, most=MAX_TOKENS * MAX_REQUESTS)
        if total is not None:
            means.append(total / n)
        elif lens:
            means.append(math.fsum(lens) / len(lens))
        else:
            raise KvplanError(f"{WHAT} {where} has no {total_key} (nor {name}_lens)", FIX)
    if not means[1] >= 1:
        raise KvplanError(f"{WHAT} {where}: {means[1]:g} output tokens per request is no decode", FIX)
    if max(means) > MAX_TOKENS:
        raise KvplanError(f"{WHAT} {where}: a mean request of {max(means):,.0f} tokens is past what kvplan plans", FIX)
    ttfts, itls = _series(doc, "ttfts", where), _series(doc, "itls", where, nested=True)
    latencies = _series(doc, "latencies", where)
    ttft, tpot, itl = _stats(doc, "ttft", where, ttfts), _stats(doc, "tpot", where, None), _stats(doc, "itl", where,
                                                                                                   itls)
    e2e_key = "e2el" if tool == VLLM else "e2e_latency"
    e2e_ms = _number(doc, f"mean_{e2e_key}_ms", where, most=MAX_MS)
    e2e, e2e_from = (e2e_ms / 1000, f"mean_{e2e_key}_ms") if e2e_ms is not None else (None, "")
    if e2e is None and latencies:
        e2e, e2e_from = math.fsum(latencies) / len(latencies), "the mean of latencies"
    if e2e is None and "mean" in ttft and "mean" in tpot:
        e2e = ttft["mean"] + tpot["mean"] * (means[1] - 1)
        e2e_from = "mean TTFT + mean TPOT x (mean output tokens - 1)"
    model, backend = doc.get("model_id"), doc.get("backend")
    return BenchRun(
        source=where, tool=tool, model=model if isinstance(model, str) else None, request_rate=rate,
        max_concurrency=int(concurrency) if concurrency is not None else None, completed=n,
        duration_s=_number(doc, "duration", where, positive=True), request_throughput=_number(
            doc, "request_throughput", where, positive=True), mean_input_tokens=means[0],
        mean_output_tokens=means[1], mean_e2e_s=e2e, e2e_from=e2e_from,
        tool_concurrency=_number(doc, "concurrency", where, positive=True, most=MAX_REQUESTS) if tool == SGLANG
        else None, ttft_s=ttft, tpot_s=tpot, itl_s=itl, detailed=bool(ttfts or itls or inputs),
        backend=backend.strip().lower() if isinstance(backend, str) else None)


def parse(text: str, path: str = "<bench>") -> tuple[BenchRun, ...]:
    """The runs of a benchmark result's text (module docstring)."""
    docs = _objects(text, path)
    if not docs:
        raise KvplanError(f"{WHAT} {path} has no run", FIX)
    return tuple(_run(doc, where) for where, doc in docs)


def read_runs(path: Path) -> tuple[BenchRun, ...]:
    """The runs of the benchmark result at ``path`` (kvplan's hardened reader)."""
    from kvplan.inputs.presets import read_text

    return parse(read_text(Path(path), WHAT, FIX), str(path))
