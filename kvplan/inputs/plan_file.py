"""Plan files for ``kvplan check``: a TOML ``[deployment]`` and a list of ``[[assert]]`` entries, validated here.

The ``[deployment]`` keys are the shared scenario and memory options of every command, spelled with underscores
(``kv_dtype = "fp8"``, ``max_model_len = "32k"``); their values go through the same parsers and ``Scenario``
validation as the command line (``kvplan.options.scenarios.build_scenario``, through ``deployment_scenario``), so a
plan means what the same flags mean. This module checks the file's shape (unknown keys, wrong types) and the
assertions' own values; every error names the file, the line (when it can be found) and the key. Plain Python: no
pydantic on this path.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from kvplan.errors import KvplanError, shorten
from kvplan.inputs.request import SCENARIO_DEFAULTS

# deployment key -> the TOML types it takes (values reach build_scenario as text, exactly like the flags)
_TEXT = (str,)
_WHOLE = (int,)
_TOKENS = (int, str)
_NUMBER = (int, float, str)
DEPLOYMENT_KEYS: dict[str, tuple[type, ...]] = {
    "model": _TEXT, "hardware": _TEXT, "nodes": _WHOLE, "gpus": _WHOLE, "tp": _WHOLE, "pp": _WHOLE, "dp": _WHOLE,
    "ep": _WHOLE, "kv_dtype": _TEXT, "weight_dtype": _TEXT, "weights": _TEXT, "engine": _TEXT, "prompt": _TOKENS,
    "decode": _TOKENS, "mtp_layers": _WHOLE, "max_model_len": _TOKENS, "block_size": _WHOLE, "host_link_gbs": _NUMBER,
    # memory settings
    "gpu_memory_utilization": (int, float), "mem_fraction_static": (int, float), "kv_pool": _TEXT,
    "max_num_batched_tokens": _TOKENS, "max_num_seqs": _TOKENS, "activation_reserve": _TEXT, "runtime_reserve": _TEXT,
    "moe_a2a_backend": _TEXT,
    # a file of kvplan calibrate --save, relative to the plan (kvplan check --calibration FILE overrides it)
    "calibration": _TEXT,
}
SCENARIO_KEYS = tuple(SCENARIO_DEFAULTS)
# the command line's defaults for the keys that have one
DEPLOYMENT_DEFAULTS = {key: value for key, value in SCENARIO_DEFAULTS.items() if value is not None}

# metric -> (kind of bound, options it takes)
METRICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "weights_fit": ("bool", ()),
    "max_concurrency": ("count", ()),
    "kv_bytes_per_request": ("bytes", ()),
    "kv_bytes_per_request_per_gpu": ("bytes", ()),
    # tpot_seconds: kvplan tpot's closed form (batch; shape: steady (default) or cohort); ttft_seconds: the prompt's
    # prefill alone; with a percentile, either is that percentile of a simulated run (kvplan.calc.slo)
    "tpot_seconds": ("seconds", ("batch", "shape", "percentile", "requests", "rate", "users", "seed", "policy")),
    "ttft_seconds": ("seconds", ("percentile", "requests", "rate", "users", "seed", "policy")),
    # the SLO model's goodput (kvplan.calc.slo) over a --sweep-rate of the plan's workload: requests/s
    "goodput_rps": ("rps", ("sweep_rate", "ttft_slo", "tpot_slo", "slo_percentile", "slo_attainment", "requests",
                             "seed", "policy")),
    # kvplan pd's verdict (needs two instances) under the SLO keys given, as pd's flags (default: TPOT 50 ms at p99)
    "pd_disaggregation_pays": ("bool", ("ttft_slo", "tpot_slo", "slo_percentile", "slo_attainment")),
    # by simulation (kvplan simulate) of fixed-length requests of the deployment's prompt + decode
    "sim_recompute_rate": ("fraction", ("requests", "rate", "users", "seed", "policy")),
    "sim_tpot_seconds_p99": ("seconds", ("requests", "rate", "users", "seed", "policy")),
    "sim_swap_outs_per_second": ("number", ("requests", "rate", "users", "seed", "policy")),
    "swap_beats_recompute": ("bool", ("generated",)),
}
SIM_KEYS = ("requests", "rate", "users", "seed", "policy")
SLO_KEYS = ("ttft_slo", "tpot_slo", "slo_percentile", "slo_attainment")   # goodput_rps's / pd's targets, as flags
PERCENTILES = (50, 90, 99)     # the percentiles an assertion may read (kvplan.calc.slo.PERCENTILES, tested equal)
SWEEP_MAX_POINTS = 16          # a goodput_rps sweep's most rates: a check stays a few seconds
ASSERT_KEYS = ("metric", "name", "at_least", "at_most", "expect", "within_baseline", "batch", "shape",
               "generated", "percentile", "sweep_rate") + SIM_KEYS + SLO_KEYS
# with within_baseline = "5%": no worse than the baseline (``kvplan check --update-baseline``) by more than 5%;
# worse is higher for bytes and seconds, lower for counts
BASELINE_OP = {"count": ">=", "bytes": "<=", "seconds": "<=", "fraction": "<=", "number": "<=", "rps": ">="}
TOP_KEYS = ("deployment", "workload", "assert", "description", "extends")
# [workload]: the requests the sim_* assertions simulate (an assertion's own requests/rate/users/seed/policy win);
# without it, fixed-length requests of the deployment's prompt + decode
WORKLOAD_KEYS = ("preset", "prompt_dist", "output_dist", "trace", "requests", "rate", "users", "seed")
MAX_EXTENDS = 8           # plans a chain of extends may pass through


@dataclass(frozen=True)
class AssertSpec:
    index: int            # 1-based position among the file's [[assert]] entries
    name: str
    metric: str
    op: str               # ">=", "<=" or "=="
    bound: int | float | bool | None   # None: within_baseline (the baseline file gives it)
    batch: int | None = None
    generated: int | None = None
    source: Path | None = None   # the file that defines it (a plan it extends, or the plan itself)
    within_baseline: float | None = None   # the fraction the measured value may be worse than the baseline by
    baseline: float | None = None          # the baseline's value, filled in by the command from the baseline file
    sim: tuple = ()                        # (key, value) of the simulation options given (requests, rate, ...)
    shape: str | None = None               # tpot_seconds: the batch shape (None: kvplan tpot's default, steady)
    percentile: int | None = None          # tpot/ttft_seconds: that percentile of a simulated run (None: closed form)
    slo: tuple = ()                        # goodput_rps, pd_disaggregation_pays: (key, text) of the SLO keys given
    sweep_rate: str | None = None          # goodput_rps: FROM:TO:POINTS, as simulate --sweep-rate


@dataclass(frozen=True)
class PlanFile:
    path: Path
    description: str
    deployment: dict      # build_scenario keyword arguments, as text (None when not given)
    assertions: tuple[AssertSpec, ...]
    deployment_sources: tuple[tuple[str, Path], ...] = ()   # (key, the file that set it), for error locations
    workload: tuple[tuple[str, object], ...] = ()           # the [workload] keys given (checked), after extends


class _Where:
    """Finds the line of a key in the file's text, for error messages (a plain scan: tomllib keeps no lines)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.lines = path, text.splitlines()

    def _section_start(self, section: str, index: int | None) -> int:
        header = re.compile(r"^\s*\[\[\s*assert\s*\]\]" if section == "assert" else r"^\s*\[\s*" + section + r"\s*\]")
        seen = 0
        for n, line in enumerate(self.lines):
            if header.match(line):
                seen += 1
                if index is None or seen == index:
                    return n
        return -1

    def line(self, section: str | None, key: str | None, index: int | None = None) -> int | None:
        start = self._section_start(section, index) if section else -1
        if section and start < 0:
            return None
        if key is None:
            return start + 1
        pattern = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*=")
        for n in range(start + 1, len(self.lines)):
            if n > start + 1 and section and re.match(r"^\s*\[", self.lines[n]):
                break
            if pattern.match(self.lines[n]):
                return n + 1
        return start + 1 if section else None

    def error(self, message: str, hint: str, section: str | None = None, key: str | None = None,
              index: int | None = None) -> KvplanError:
        n = self.line(section, key, index)
        where = f"{self.path}:{n}" if n else str(self.path)
        return KvplanError(f"{where}: {message}", hint)


def locate(path: Path, section: str | None, key: str | None = None, index: int | None = None) -> str:
    """``path:line`` of a key (or of a section's header) for a message; the bare path when it cannot be found."""
    try:
        n = _Where(path, path.read_text(encoding="utf-8")).line(section, key, index)
    except (OSError, UnicodeDecodeError):
        n = None
    return f"{path}:{n}" if n else str(path)


def label(section: str, key: str | None, index: int | None = None) -> str:
    head = f"assert[{index}]" if section == "assert" else section
    return f"{head}.{key}" if key else head


def load(path: Path) -> PlanFile:
    """Read and check one plan file (its shape and the assertions; the deployment's values are checked by
    ``deployment_scenario``).

    ``extends = "base.toml"`` (relative to the plan) starts from another plan: its [deployment] keys, which the
    plan's own keys override, and its [[assert]] entries, which come before the plan's own. Chains are followed up
    to MAX_EXTENDS plans; a cycle is an error."""
    description, given, sources, entries, has_deployment, workload = _read(path, ())
    if not has_deployment:
        raise _where(path).error("a plan needs a [deployment] table", 'add [deployment] with model = "deepseek-r1", '
                                 '... (or extends = "base.toml")')
    if not entries:
        raise _where(path).error("a plan needs at least one [[assert]] entry", 'add [[assert]] with metric = '
                                 '"weights_fit"')
    deployment = {key: DEPLOYMENT_DEFAULTS.get(key) for key in DEPLOYMENT_KEYS} | given
    return PlanFile(path, description, deployment, tuple(entries), tuple(sources.items()), tuple(workload.items()))


def _where(path: Path) -> _Where:
    from kvplan.inputs.presets import read_text

    return _Where(path, read_text(path, "plan", "give the path of a plan .toml file"))


def _read(path: Path, chain: tuple[Path, ...]):
    """(description, the deployment keys given, {key: file}, assertions, whether any file has a [deployment]) of
    a plan and the plans it extends; ``load`` checks that the whole has a deployment and an assertion."""
    from kvplan.inputs.presets import parse_toml, read_text

    # the same hardened reader as presets: FIFOs and devices refused unread, size and nesting bounded; the text is
    # read once, for the document and for the lines errors name
    text = read_text(path, "plan", "save it as a UTF-8 TOML file")
    doc = parse_toml(text, path, "plan", "a plan nests a few levels; fix the file")
    where = _Where(path, text)
    for key in doc:
        if key in DEPLOYMENT_KEYS:   # e.g. calibration = "FILE.toml" written above [deployment]
            raise where.error(f"{shorten(key)} is a key of [deployment], not of the plan's top level",
                              f"move {key} = ... under the [deployment] line", key=key)
        if key not in TOP_KEYS:
            raise where.error(f"unknown top-level key {shorten(key)}", "a plan has [deployment], [[assert]] entries, "
                              "an optional description and an optional extends", key=key)
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise where.error("description must be text", 'write description = "..."', key="description")
    given: dict = {}
    sources: dict = {}
    workload: dict = {}
    entries: list[AssertSpec] = []
    has_deployment = False
    if "extends" in doc:
        ref = doc["extends"]
        if not isinstance(ref, str) or not ref.strip():
            raise where.error(f"extends = {shorten(ref)} is not the path of a plan", 'write extends = "base.toml"',
                              key="extends")
        if "\x00" in ref:
            raise where.error(f"extends = {shorten(ref)} holds a NUL character", 'write extends = "base.toml"',
                              key="extends")
        base = Path(ref) if Path(ref).is_absolute() else path.parent / ref
        try:
            me, target = path.resolve(), base.resolve()
        except (OSError, RuntimeError):   # RuntimeError: a symlink loop (Python < 3.13; OSError from 3.13)
            raise where.error(f"extends = {shorten(ref)} goes through a loop of symbolic links",
                              "point extends at the plan file itself", key="extends") from None
        if target in chain + (me,):
            raise where.error(f"extends = {shorten(ref)} comes back to a plan already in the chain",
                              "break the cycle of extends", key="extends")
        if len(chain) + 1 >= MAX_EXTENDS:
            raise where.error(f"extends passes through more than {MAX_EXTENDS} plans", "flatten the chain",
                              key="extends")
        base_description, given, sources, entries, has_deployment, workload = _read(base, chain + (me,))
        description = description or base_description
    table = doc.get("deployment")
    if table is not None:
        has_deployment = True
        own = _deployment_given(table, where, path)
        given = given | own
        sources = sources | {key: path for key in own}
    if "workload" in doc:
        own = _workload_given(doc["workload"], where, path)
        workload = merge_workload(workload, own)
    raw = doc.get("assert")
    if raw is not None and (not isinstance(raw, list) or not raw or not all(isinstance(e, dict) for e in raw)):
        raise where.error("assert must be a list of [[assert]] tables", 'add [[assert]] with metric = "weights_fit"')
    entries = entries + [_assertion(e, i, where, path) for i, e in enumerate(raw or (), start=1)]
    seen: set[str] = set()
    for a in entries:   # names key the baseline file and the JUnit test cases: one each
        if a.name in seen:
            raise where.error(f"assertion name {a.name!r} is used twice (here or in a plan this extends)",
                              "give each [[assert]] its own name", "assert", "name", a.index)
        seen.add(a.name)
    return description, given, sources, entries, has_deployment, workload


# keys that come as a set: a new source of lengths replaces the old one whole, and so do new arrivals
WORKLOAD_GROUPS = (("preset", "prompt_dist", "output_dist", "trace"), ("rate", "users"))


def merge_workload(base: dict, own: dict) -> dict:
    """``base``'s [workload] keys overridden by ``own``'s (a plan over the plan it extends, an assertion's keys over
    its plan's): where ``own`` gives any key of a group (lengths, arrivals), ``base``'s whole group goes."""
    for group in WORKLOAD_GROUPS:
        if set(group) & set(own):
            base = {k: v for k, v in base.items() if k not in group}
    return base | own


def _workload_given(table, where: _Where, path: Path) -> dict:
    """The [workload] keys this file gives, checked: lengths from a preset, distributions or a trace (one source),
    arrivals from rate or users (one), requests and seed. Distributions and the preset are parsed here so a typo
    is an error at its line; a trace is read when an assertion simulates it."""
    from kvplan.inputs import workload as wl

    if not isinstance(table, dict):
        raise where.error("workload must be a table", "write it as [workload]", key="workload")

    def fail(message: str, hint: str, key: str | None = None) -> KvplanError:
        return where.error(message, hint, "workload", key)

    out: dict = {}
    for key, value in table.items():
        name = label("workload", key)
        if key not in WORKLOAD_KEYS:
            raise fail(f"unknown key {label('workload', shorten(key))}", "[workload] takes " + ", ".join(WORKLOAD_KEYS),
                       key)
        if key in ("preset", "prompt_dist", "output_dist", "trace"):
            if not isinstance(value, str) or not value.strip():
                raise fail(f"{name} = {shorten(value)} is not text", f"e.g. {_WORKLOAD_EXAMPLES[key]}", key)
            if key in ("prompt_dist", "output_dist"):
                _checked(lambda k=key, v=value: wl.parse_dist(v, label("workload", k)), fail, key)
            elif key == "trace":
                trace = Path(value)
                value = str(trace if trace.is_absolute() else path.parent / trace)
            else:
                value = _relative(value, path)
                _checked(lambda v=value: wl.load_workload(v), fail, key)
            out[key] = value.strip()
        else:
            out[key] = _sim_option(key, value, name, fail)
    if "preset" in out and ({"prompt_dist", "output_dist"} & set(out)):
        raise fail("workload.preset sets the length distributions", "drop prompt_dist / output_dist, or preset",
                   "prompt_dist" if "prompt_dist" in out else "output_dist")
    if "trace" in out and ({"preset", "prompt_dist", "output_dist"} & set(out)):
        raise fail("workload.trace gives each request's lengths", "drop preset / prompt_dist / output_dist, or "
                   "trace", "trace")
    if "rate" in out and "users" in out:
        raise fail("workload.rate and users are two ways to make arrivals", "give one of them", "users")
    return out


_WORKLOAD_EXAMPLES = {"preset": 'preset = "long-cot-bench"', "prompt_dist": 'prompt_dist = "fixed:1k"',
                      "output_dist": 'output_dist = "lognormal:mean=20k,p99=100k"', "trace": 'trace = "trace.csv"'}


def _deployment_given(table, where: _Where, path: Path) -> dict:
    """The [deployment] keys this file gives, checked for name and type, as text."""
    if not isinstance(table, dict):
        raise where.error("deployment must be a table", "write it as [deployment]", key="deployment")
    out: dict = {}
    for key, value in table.items():
        if key not in DEPLOYMENT_KEYS:
            close = [k for k in DEPLOYMENT_KEYS if k.replace("_", "") == key.replace("-", "").replace("_", "")]
            hint = f"did you mean {close[0]}?" if close else "known keys: " + ", ".join(DEPLOYMENT_KEYS)
            raise where.error(f"unknown key {label('deployment', shorten(key))}", hint, "deployment", key)
        types = DEPLOYMENT_KEYS[key]
        if isinstance(value, bool) or not isinstance(value, types) or (
                isinstance(value, float) and not math.isfinite(value)):
            want = " or ".join({str: "text", int: "a whole number", float: "a number"}[t] for t in types)
            raise where.error(f"{label('deployment', key)} = {shorten(value)} has the wrong type: give {want}",
                              f"e.g. {_EXAMPLES.get(key, key + ' = ...')}", "deployment", key)
        if key == "model" and isinstance(value, str):
            value = _relative(value, path)
        if key == "calibration" and isinstance(value, str) and not Path(value).is_absolute():
            value = str(path.parent / value)
        out[key] = str(value)
    return out


_EXAMPLES = {"model": 'model = "deepseek-r1"', "hardware": 'hardware = "h200"', "tp": "tp = 8", "gpus": "gpus = 8",
             "nodes": "nodes = 1", "pp": "pp = 1", "dp": "dp = 1", "ep": "ep = 8", "kv_dtype": 'kv_dtype = "fp8"',
             "engine": 'engine = "vllm"', "prompt": 'prompt = "1k"', "decode": 'decode = "30k"',
             "kv_pool": 'kv_pool = "40GiB"', "gpu_memory_utilization": "gpu_memory_utilization = 0.9",
             "calibration": 'calibration = "cal.toml"'}


def _relative(ref: str, plan_path: Path) -> str:
    """A model given as a file path is read relative to the plan file (a preset id is left alone)."""
    if ref.endswith((".toml", ".json")) or "/" in ref:
        candidate = plan_path.parent / ref
        if not Path(ref).is_absolute() and candidate.exists():
            return str(candidate)
    return ref


def _assertion(entry: dict, index: int, where: _Where, path: Path | None = None) -> AssertSpec:
    def fail(message: str, hint: str, key: str | None = None) -> KvplanError:
        return where.error(message, hint, "assert", key, index)

    for key in entry:
        if key not in ASSERT_KEYS:
            raise fail(f"unknown key {label('assert', shorten(key), index)}",
                       "an assertion takes " + ", ".join(ASSERT_KEYS), key)
    metric = entry.get("metric")
    if metric is None:
        raise fail(f"{label('assert', None, index)} has no metric", "add metric = one of " + ", ".join(METRICS))
    if not isinstance(metric, str) or metric not in METRICS:
        raise fail(f"{label('assert', 'metric', index)} = {shorten(metric)} is not a known metric",
                   "choose one of " + ", ".join(METRICS), "metric")
    kind, options = METRICS[metric]
    for key in ("batch", "shape", "generated", "percentile", "sweep_rate") + SIM_KEYS + SLO_KEYS:
        if key in entry and key not in options:
            raise fail(f"{label('assert', key, index)} does not apply to {metric}",
                       f"drop {key}" + (f" ({metric} takes {', '.join(options)})" if options else ""), key)
    name = entry.get("name", metric)
    if not isinstance(name, str) or not name.strip():
        raise fail(f"{label('assert', 'name', index)} must be non-empty text", 'write name = "..."', "name")
    if not name.isprintable() or len(name) > 200:   # control characters would reach terminals and JUnit XML
        raise fail(f"{label('assert', 'name', index)} has control characters or is over 200 characters",
                   "write the name in plain printable text", "name")

    bounds = [k for k in ("at_least", "at_most", "expect") if k in entry]
    within = None
    if "within_baseline" in entry:
        within = _fraction(entry["within_baseline"], label("assert", "within_baseline", index), fail)
    if kind == "bool":
        if within is not None:
            raise fail(f"{label('assert', 'within_baseline', index)}: {metric} is true or false, with no baseline "
                       "to be near", "use expect = true or expect = false", "within_baseline")
        if [b for b in bounds if b != "expect"]:
            raise fail(f"{label('assert', bounds[0], index)}: {metric} is true or false",
                       "use expect = true (the default) or expect = false", bounds[0])
        expect = entry.get("expect", True)
        if not isinstance(expect, bool):
            raise fail(f"{label('assert', 'expect', index)} = {shorten(expect)} is not true or false",
                       "write expect = true or expect = false", "expect")
        op, bound = "==", expect
    else:
        given_bounds = bounds + (["within_baseline"] if "within_baseline" in entry else [])
        if "expect" in bounds or len(given_bounds) != 1:
            raise fail(f"{label('assert', None, index)} ({metric}) needs exactly one of at_least, at_most or "
                       "within_baseline", f"e.g. {_BOUND_EXAMPLES[kind]}",
                       given_bounds[1] if len(given_bounds) > 1 else None)
        key = given_bounds[0]
        if key == "within_baseline":
            op, bound = BASELINE_OP[kind], None
        else:
            op, bound = (">=" if key == "at_least" else "<="), _bound(kind, entry[key], label("assert", key, index),
                                                                      fail, key)
    batch = generated = None
    from kvplan.inputs.units import parse_tokens

    if "batch" in entry:
        whole = _whole(entry["batch"], "batch", index, fail)
        batch = _checked(lambda: parse_tokens(whole, label("assert", "batch", index)), fail, "batch")
    if "generated" in entry:
        value = entry["generated"]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise fail(f"{label('assert', 'generated', index)} = {shorten(value)} has the wrong type",
                       'give tokens like generated = "20k"', "generated")
        generated = _checked(lambda: parse_tokens(value, label("assert", "generated", index)), fail, "generated")
    sim = tuple((key, _sim_option(key, entry[key], label("assert", key, index), fail)) for key in SIM_KEYS
                if key in entry)
    if "rate" in entry and "users" in entry:
        raise fail(f"{label('assert', 'rate', index)} and users are two ways to make arrivals", "give one of them",
                   "users")
    shape = entry.get("shape")
    if shape is not None and shape not in ("steady", "cohort"):
        raise fail(f"{label('assert', 'shape', index)} = {shorten(shape)} is not a batch shape",
                   'give shape = "steady" (contexts spread over the decode) or "cohort" (all start together)', "shape")
    percentile = _percentile(entry["percentile"], label("assert", "percentile", index), fail) \
        if "percentile" in entry else None
    if percentile is None and metric in ("tpot_seconds", "ttft_seconds") and sim:
        key = next(k for k, _ in sim)
        raise fail(f"{label('assert', key, index)}: {metric} is simulated only at a percentile",
                   f"add percentile = 99, or drop {key}", key)
    if percentile is not None and (batch is not None or shape is not None):
        key = "batch" if batch is not None else "shape"
        raise fail(f"{label('assert', key, index)}: a {metric} percentile is read from a simulated run, whose "
                   "batch the arrivals make", f"drop {key}, or percentile", key)
    slo: list = []
    sweep_rate = None
    if metric in ("goodput_rps", "pd_disaggregation_pays"):
        for key in SLO_KEYS:
            if key in entry:
                value = entry[key]
                ok = isinstance(value, str) and value.strip() if key in ("ttft_slo", "tpot_slo") else (
                    not isinstance(value, bool) and isinstance(value, (int, float, str)))
                if not ok:
                    raise fail(f"{label('assert', key, index)} = {shorten(value)} has the wrong type",
                               f"e.g. {_SLO_EXAMPLES[key]}", key)
                slo.append((key, str(value)))
    if metric == "goodput_rps":
        if not {"ttft_slo", "tpot_slo"} & set(entry):
            raise fail(f"{label('assert', None, index)} (goodput_rps) needs a ttft_slo and/or a tpot_slo",
                       'e.g. ttft_slo = "2s" and tpot_slo = "50ms"', None)
        value = entry.get("sweep_rate")
        if not isinstance(value, str) or value.count(":") != 2:
            raise fail(f"{label('assert', 'sweep_rate', index)} = {shorten(value)} is not FROM:TO:POINTS",
                       'e.g. sweep_rate = "0.5:8:16" (at most 16 points)', "sweep_rate" if value is not None else None)
        points = value.split(":")[2].strip()
        if not points.isdigit() or not 1 <= int(points) <= SWEEP_MAX_POINTS:
            raise fail(f"{label('assert', 'sweep_rate', index)} = {shorten(value)}: POINTS must be 1 .. "
                       f"{SWEEP_MAX_POINTS} in a check (it stays a few seconds)",
                       'e.g. sweep_rate = "0.5:8:16"', "sweep_rate")
        sweep_rate = value.strip()
    return AssertSpec(index, name.strip(), metric, op, bound, batch, generated, path, within, None, sim, shape,
                      percentile, tuple(slo), sweep_rate)


_SLO_EXAMPLES = {"ttft_slo": 'ttft_slo = "2s" (or "p90:2s")', "tpot_slo": 'tpot_slo = "50ms"',
                 "slo_percentile": "slo_percentile = 99", "slo_attainment": 'slo_attainment = "90%"'}


def _percentile(value, name: str, fail) -> int:
    """percentile = 99 (or "p99"): one of PERCENTILES."""
    text = value.strip().lower().removeprefix("p") if isinstance(value, str) else value
    if isinstance(text, str) and text.isdigit():
        text = int(text)
    if isinstance(text, bool) or text not in PERCENTILES:
        raise fail(f"{name} = {shorten(value)} is not one of " + ", ".join(str(p) for p in PERCENTILES),
                   "write percentile = 99 (or 90, 50)", "percentile")
    return int(text)


def _sim_option(key: str, value, name: str, fail):
    """requests, users (whole, >= 1), seed (whole, >= 0), rate (requests/s, > 0), policy (text)."""
    if key == "policy":
        if not isinstance(value, str):
            raise fail(f"{name} = {shorten(value)} is not text", 'write policy = "swap"', key)
        return value
    if key == "rate":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and 0 < value <= 1e6):
            raise fail(f"{name} = {shorten(value)} is not a rate in (0, 1e6] requests/s", "write rate = 0.5", key)
        return float(value)
    from kvplan.inputs.workload import MAX_REQUESTS

    low, high = (0, 2**32 - 1) if key == "seed" else (1, MAX_REQUESTS if key == "requests" else 100_000)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise fail(f"{name} = {shorten(value)} is not a whole number in {low:,} .. {high:,}", f"write {key} = 200",
                   key)
    return value


def _fraction(value, name: str, fail) -> float:
    """within_baseline: "5%" or 0.05, in [0, 1]."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            number = float(value.strip()[:-1]) / 100
        except ValueError:
            number = math.nan
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        number = math.nan
    if not (math.isfinite(number) and 0 <= number <= 1):
        raise fail(f"{name} = {shorten(value)} is not a fraction in 0 .. 1", 'write it like "5%" or 0.05',
                   "within_baseline")
    return number


_BOUND_EXAMPLES = {"fraction": 'at_most = "2%"', "number": "at_most = 0.1", "rps": "at_least = 2.5",
                   "count": "at_least = 32", "bytes": 'at_most = "1.2GiB"', "seconds": 'at_most = "40ms"'}


def _whole(value, key: str, index: int, fail):
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"{label('assert', key, index)} = {shorten(value)} is not a whole number", f"write {key} = 8", key)
    return value


def _checked(parse, fail, key: str):
    try:
        return parse()
    except KvplanError as err:
        raise fail(err.message, err.hint or "", key) from None


def _bound(kind: str, value, name: str, fail, key: str):
    from kvplan.inputs.units import parse_size

    if isinstance(value, bool):
        raise fail(f"{name} = {shorten(value)} is not a number", f"e.g. {_BOUND_EXAMPLES[kind]}", key)
    if kind in ("fraction", "number", "rps"):
        number = _fraction(value, name, fail) if kind == "fraction" else value
        if kind in ("number", "rps") and (isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value >= 0)):
            raise fail(f"{name} = {shorten(value)} is not a number of 0 or more", "e.g. at_most = 0.1", key)
        return float(number)
    if kind == "count":
        if not isinstance(value, int):
            raise fail(f"{name} = {shorten(value)} is not a whole number", "e.g. at_least = 32", key)
        if value < 0:
            raise fail(f"{name} = {value} is negative", "give a count of requests, 0 or more", key)
        return value
    if kind == "bytes":
        if isinstance(value, (int, float)):   # a bare number would be read as bytes: 2 meaning 2 GiB fails silently
            raise fail(f"{name} = {shorten(value)} has no unit", f'write it as a size with its unit, e.g. "{value}GiB" '
                       f'or "{value}B"', key)
        if not isinstance(value, str):
            raise fail(f"{name} = {shorten(value)} is not a size", 'give a size with its unit, e.g. "1.2GiB"', key)
        return _checked(lambda: parse_size(value, name), fail, key)
    # seconds: text with a unit ("40ms"); a bare number is refused (40 meaning 40 ms would pass as 40 s)
    if isinstance(value, (int, float)):
        raise fail(f"{name} = {shorten(value)} has no unit", f'write it as a duration with its unit, e.g. "{value}ms" '
                   f'or "{value}s"', key)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ms|s|us)\s*", value)
        if not m:
            raise fail(f"{name} = {shorten(value)} is not a duration", 'write it with its unit, e.g. "40ms"', key)
        seconds = float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[m.group(2)]
    else:
        raise fail(f"{name} = {shorten(value)} is not a duration", 'e.g. at_most = "40ms"', key)
    if not math.isfinite(seconds) or seconds <= 0:
        raise fail(f"{name} = {shorten(value)} must be a positive duration", 'e.g. at_most = "40ms"', key)
    return seconds


# --- the deployment --------------------------------------------------------------------------------------------
def plan_keys(text: str | None) -> str | None:
    """A message about the deployment in the plan's words: ``--tp 8`` -> ``deployment.tp 8``."""
    if text is None:
        return None
    for k in DEPLOYMENT_KEYS:
        text = re.sub(r"--" + re.escape(k.replace("_", "-")) + r"\b", f"deployment.{k}", text)
    return text


def keys_named(message: str) -> list[str]:
    """The deployment keys a message names, as flags first (``--tp``) then in words (``kv dtype``), each in the
    order the message names them."""
    def first(pattern: str) -> list[str]:
        found = [(m.start(), k) for k in DEPLOYMENT_KEYS
                 if (m := re.search(pattern.format(k.replace("_", "-"), k.replace("_", "[ _-]")), message,
                                    flags=re.IGNORECASE))]
        return [k for _, k in sorted(found)]

    return first(r"--{0}\b") + first(r"\b{1}\b")


# --- baselines (within_baseline assertions) ---------------------------------------------------------------------
def baseline_path(plan: Path) -> Path:
    """PLAN.toml -> PLAN.baseline.json, beside the plan."""
    return plan.with_name(plan.stem + ".baseline.json")


def read_baseline(target: Path, plan: Path, names: list[str]) -> dict:
    """The values of a baseline file (``kvplan check --update-baseline`` wrote it), each a finite number of 0 or more
    for an assertion of the plan."""
    from kvplan.inputs.presets import read_json

    fix = ((f"remove the link {target}, then " if target.is_symlink() else "")
           + f"run kvplan check {plan} --update-baseline")
    if not target.exists() and not target.is_symlink():   # a link (dangling, a loop): its reader says what it is
        raise KvplanError(f"{plan} has within_baseline assertions but no baseline {target}", fix)
    document = read_json(target, "baseline", fix, "a baseline is one level of values; rerun --update-baseline")
    values = document.get("values") if isinstance(document, dict) else None
    if not isinstance(values, dict):
        raise KvplanError(f"baseline {target} has no values table", fix)
    if document.get("plan") not in (None, plan.name):
        raise KvplanError(f"baseline {target} was written for {shorten(document.get('plan'))}, not {plan.name}", fix)
    for key, v in values.items():
        if key not in names:
            raise KvplanError(f"baseline {target} has a value for {shorten(key)}, which is no assertion of {plan}",
                              fix)
        try:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v)) and v >= 0
        except OverflowError:
            ok = False
        if not ok:
            raise KvplanError(f"baseline {target}: {shorten(key)} = {shorten(v)} is not a finite number of 0 or "
                              "more", fix)
    return values
