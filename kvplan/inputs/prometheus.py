"""A Prometheus text-format scrape of an engine's ``/metrics`` (``curl http://HOST:8000/metrics > metrics.txt``), read
for ``kvplan calibrate``.

The text exposition format (https://prometheus.io/docs/instrumenting/exposition_formats/): ``# HELP`` / ``# TYPE``
and other ``#`` lines are comments; every other non-blank line is one sample, ``name{label="value",...} value
[timestamp]``, the value a float (``NaN``, ``+Inf``, ``-Inf`` allowed). A histogram ``h`` is the samples
``h_bucket{le="..."}``, ``h_sum`` and ``h_count``. Parsed here by kvplan's own bounded reader (no client library):
at most ``MAX_LINES`` lines of ``MAX_LINE_CHARS`` characters, each malformed sample line refused with its number.

The vLLM metrics kvplan compares (docs/design/metrics.md and vllm/v1/metrics/loggers.py of vllm-project/vllm, read
at main 0328b592 / a6f0308c): ``vllm:num_preemptions_total`` (counter; ``vllm:num_preemptions`` in older releases),
``vllm:kv_cache_usage_perc`` (gauge, a fraction 0-1 despite its name; ``vllm:gpu_cache_usage_perc`` before),
``vllm:num_requests_running`` (gauge), the histograms ``vllm:time_to_first_token_seconds`` and
``vllm:inter_token_latency_seconds`` (``vllm:time_per_output_token_seconds`` before it was renamed;
``vllm:request_time_per_output_token_seconds`` per request). SGLang's (sgl-project/sglang
``python/sglang/srt/metrics/collector.py`` at main 00ae9c15): ``sglang:num_running_reqs``, ``sglang:token_usage``
(the fraction of the KV pool's tokens in use), ``sglang:num_retracted_requests_total`` (SGLang retracts where vLLM
preempts), ``sglang:time_to_first_token_seconds`` and ``sglang:inter_token_latency_seconds``. Series of one name (one
per label set, e.g. one per ``engine`` of a DP deployment) are summed; a fraction is their mean.

SGLang's scheduler gauges carry ``tp_rank``, ``pp_rank`` and ``moe_ep_rank`` labels (plus ``dp_rank`` under data
parallelism): at the release kvplan pins, v0.5.23, ``SchedulerMetricsCollector.init_new``
(python/sglang/srt/observability/metrics_collector.py, where v0.5.x's metrics/collector.py moved) logs on the
scheduler with attn_tp_rank 0 and attn_cp_rank 0 of each attention group (every rank with
--enable-metrics-for-all-schedulers), and the TP ranks of one group, like the PP stages (scheduler_pp_mixin.py
forwards each request to the next stage), hold the same requests. So series that differ only in those three labels
count the same requests once: kvplan keeps the lowest-ranked one (``SCHEDULER_RANK_LABELS``) and sums over the
rest (the ``dp_rank`` groups, whose requests are disjoint).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from kvplan.errors import KvplanError, shorten

WHAT = "metrics scrape"
FIX = "give the text of the engine's /metrics endpoint as it serves it (curl http://HOST:PORT/metrics)"
MAX_LINES = 1_000_000
MAX_LINE_CHARS = 65_536
MAX_SERIES = 200_000

# the figures kvplan compares, by the names the engines give them (the first the scrape holds is taken)
RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs")
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions", "sglang:num_retracted_requests_total")
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
TPOT = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
        "vllm:request_time_per_output_token_seconds", "sglang:inter_token_latency_seconds")
TTFT = ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds")

# labels that split one SGLang scheduler group's series into copies (module docstring)
SCHEDULER_RANK_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"')

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
# one label set: {name="value",...}, values quoted with \\ \" \n escapes (a "}" inside a value is no end)
_LABELS = r'\{(?:[^"{}]|"(?:[^"\\\n]|\\.)*")*\}'
_SAMPLE = re.compile(rf"^({_NAME})\s*({_LABELS})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_FLOAT = re.compile(r"^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|Inf|inf|NaN|nan)$")


@dataclass(frozen=True)
class Sample:
    value: float
    line: int
    labels: str


@dataclass(frozen=True)
class Scrape:
    """The samples of one scrape by metric name (labels kept as their text, for histogram buckets)."""

    path: str
    samples: dict[str, tuple[Sample, ...]] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return name in self.samples

    def series(self, name: str) -> tuple[Sample, ...]:
        """The series of ``name``, an SGLang scheduler group's copies (one per TP / PP / EP rank) counted once: the
        lowest-ranked of them (module docstring)."""
        found = self.samples.get(name, ())
        if not name.startswith("sglang:"):
            return found
        kept: dict[tuple, tuple[tuple[int, ...], Sample]] = {}
        for s in found:
            labels = dict(_LABEL.findall(s.labels))
            group = tuple(sorted((k, v) for k, v in labels.items() if k not in SCHEDULER_RANK_LABELS))
            rank = tuple(int(labels[k]) if labels.get(k, "").isdigit() else 0 for k in SCHEDULER_RANK_LABELS)
            if group not in kept or rank < kept[group][0]:
                kept[group] = (rank, s)
        return tuple(s for _, s in kept.values())

    def total(self, name: str) -> float | None:
        """The sum over the series of ``name`` (None: not in the scrape)."""
        found = self.series(name)
        return None if not found else math.fsum(s.value for s in found)

    def first_name(self, *names: str) -> str | None:
        """The first of ``names`` the scrape holds."""
        return next((n for n in names if n in self.samples), None)

    def line_of(self, name: str) -> int:
        return self.samples[name][0].line

    def histogram_mean(self, base: str) -> tuple[float, float, float] | None:
        """(sum, count, mean) of the histogram ``base`` over its series; None when absent or empty."""
        total, count = self.total(base + "_sum"), self.total(base + "_count")
        if total is None or count is None or count <= 0:
            return None
        return total, count, total / count


def looks_like(text: str) -> bool:
    """Whether ``text`` reads as a Prometheus scrape: a ``# TYPE`` line or a ``vllm:`` / ``sglang:`` sample."""
    head = text[:200_000]
    return bool(re.search(r"^# (?:TYPE|HELP) " + _NAME, head, re.M) or re.search(r"^(?:vllm|sglang):\w+", head, re.M))


def parse(text: str, path: str = "<metrics>") -> Scrape:
    """The samples of a scrape's text (module docstring); a malformed sample line is refused with its number."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise KvplanError(f"{WHAT} {path} has over {MAX_LINES:,} lines", FIX)
    found: dict[str, list[Sample]] = {}
    series = 0
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if len(line) > MAX_LINE_CHARS:
            raise KvplanError(f"{WHAT} {path} line {number} is over {MAX_LINE_CHARS:,} characters", FIX)
        match = _SAMPLE.match(line)
        if match is None or not _FLOAT.match(match.group(3)):
            raise KvplanError(f"{WHAT} {path} line {number}: {shorten(line)} is not a sample (name{{labels}} value)",
                              FIX)
        series += 1
        if series > MAX_SERIES:
            raise KvplanError(f"{WHAT} {path} has over {MAX_SERIES:,} samples", "give one engine's /metrics")
        found.setdefault(match.group(1), []).append(Sample(float(match.group(3)), number, match.group(2) or ""))
    if not found:
        raise KvplanError(f"{WHAT} {path} has no samples", FIX)
    return Scrape(path, {name: tuple(items) for name, items in found.items()})


def read_scrape(path: Path) -> Scrape:
    """The scrape at ``path`` (kvplan's hardened reader: regular files only, size-bounded, UTF-8)."""
    from kvplan.inputs.presets import read_text

    return parse(read_text(Path(path), WHAT, FIX), str(path))


def figure(scrape: Scrape, *names: str, fraction: bool = False) -> tuple[str, float] | None:
    """(name, total) of the first of ``names`` the scrape holds, checked: a finite number >= 0 (<= 1 for a
    ``fraction``); None when none of them is there."""
    name = scrape.first_name(*names)
    if name is None:
        return None
    value = scrape.total(name)
    assert value is not None
    limit = len(scrape.series(name)) if fraction else math.inf   # a fraction per series, summed over the series
    if not (math.isfinite(value) and 0 <= value <= limit):
        raise KvplanError(f"{WHAT} {scrape.path} line {scrape.line_of(name)}: {name} is {value:g}, not a "
                          + ("fraction in 0..1" if fraction else "finite count >= 0"), FIX)
    if fraction:
        value /= len(scrape.series(name))   # the mean over the series (one per engine / DP rank)
    return name, value


def histogram(scrape: Scrape, *bases: str) -> tuple[str, float, float] | None:
    """(name, mean seconds, observations) of the first histogram of ``bases`` the scrape holds with observations;
    a NaN / infinite / negative sum is refused."""
    for base in bases:
        got = scrape.histogram_mean(base)
        if got is None:
            continue
        total, count, mean = got
        if not (math.isfinite(total) and math.isfinite(count) and total >= 0):
            raise KvplanError(f"{WHAT} {scrape.path} line {scrape.line_of(base + '_sum')}: {base}_sum {total:g} / "
                              f"_count {count:g} is no mean", FIX)
        return base, mean, count
    return None
