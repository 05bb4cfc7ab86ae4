"""The calibration file ``kvplan calibrate --save FILE.toml`` writes and every planning command takes with
``--calibration FILE``: the step factors and the memory reserve fitted to the user's own runs, for one model on one
GPU, with their residuals and the files they were fitted to.

::

    type = "calibration"
    version = 1
    model = "llama-3.1-8b"        # the preset id (or config) it was fitted for: another model is refused
    hardware = "h100-sxm"         # the GPU preset id: another GPU is refused
    engine = "vllm==0.19"         # the engine whose budget the reserve was fitted in, and its release (neutral: none)
    tp = 1                        # the TP it was fitted at: another TP is refused (check_tp)
    sources = ["bench.json", "startup.log"]

    [step]                        # kvplan.calc.costs factors; those not fitted are absent (the preset's apply)
    hbm = 0.61
    overhead_us_per_step = 880.0
    prefill_mfu = 0.58            # from light runs' mean TTFT (see kvplan.calc.calibrate.fit_prefill)
    points = 5
    rms_relative_error = 0.004

    [memory]                      # applied as the runtime reserve when --runtime-reserve is not given
    runtime_reserve_bytes = 2147483648
    residual_bytes = 0

    [[residuals]]                 # what the fit left, per figure (information: not read back)
    figure = "TPOT (mean)"
    ...

Applied by ``apply`` where the scenario is built (``kvplan.options.scenarios.build_scenario``): the fitted factors
replace the GPU preset's ``[efficiency]`` values (so every command's step model, ``kvplan.calc.costs.step_factors``,
takes them, citing this file), and the reserve fills ``--runtime-reserve`` when it is not given. A reserve is
fitted in one release's budget (vLLM's activation, non-torch and CUDA-graph rows move by release:
docs/pool-prediction.md), so a file with one is refused under another release (``check_release``); the step
factors alone carry to any release of the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvplan.errors import InputError, shorten
from kvplan.specs.hardware import CALIBRATED  # how a fitted factor's source starts

WHAT = "calibration file"
FIX = "give a file written by kvplan calibrate --save FILE.toml"
STEP_FACTORS = {"hbm": (0.0, 1.0, False), "mfu": (0.0, 1.0, False), "overhead_us_per_step": (0.0, 1e6, True),
                "prefill_mfu": (0.0, 1.0, False)}
MAX_RESERVE_BYTES = 2**44        # 16 TiB: no GPU holds more
_TOP = {"type", "version", "model", "hardware", "engine", "tp", "sources", "step", "memory", "residuals"}
_STEP_INFO = {"points", "rms_relative_error"}
_MEMORY_INFO = {"residual_bytes", "logged_pool_bytes", "predicted_pool_bytes"}
_PIN = r"v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?"   # kvplan.engines.get's release text (X.Y means X.Y.0)


@dataclass(frozen=True)
class CalibrationFile:
    path: str
    model: str
    hardware: str
    engine: str
    tp: int
    factors: dict[str, float]          # STEP_FACTORS names that were fitted
    runtime_reserve_bytes: int | None
    sources: tuple[str, ...]


def _bad(path: Path, what: str) -> InputError:
    return InputError(f"{WHAT} {shorten(str(path))}: {what}", FIX)


def _text(doc: dict, key: str, path: Path) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value.strip() or len(value) > 500:
        raise _bad(path, f"{key} must be a name (the one it was fitted for)")
    return value


def _value(table: dict, key: str, path: Path, low: float, high: float, zero_ok: bool) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not (
            (low <= value if zero_ok else low < value) and value <= high):
        raise _bad(path, f"{key} = {shorten(value)} is out of range ({'' if zero_ok else 'over '}{low:g} "
                         f"to {high:g})")
    return float(value)


def parse(doc: dict[str, Any], path: Path) -> CalibrationFile:
    """The calibration of a parsed TOML document (module docstring), every value checked."""
    if doc.get("type") != "calibration":
        raise _bad(path, 'it has no type = "calibration" line')
    if doc.get("version") != 1:
        raise _bad(path, f"version {shorten(doc.get('version'))} is not one kvplan reads (1)")
    unknown = sorted(set(doc) - _TOP)
    if unknown:
        raise _bad(path, f"unknown key {unknown[0]!r}")
    tp = doc.get("tp")
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= 4096:
        raise _bad(path, "tp must be a whole number of GPUs")
    step = doc.get("step", {})
    memory = doc.get("memory", {})
    if not isinstance(step, dict) or not isinstance(memory, dict):
        raise _bad(path, "[step] and [memory] must be tables")
    extra = sorted((set(step) - set(STEP_FACTORS) - _STEP_INFO) | (set(memory) - {"runtime_reserve_bytes"}
                                                                     - _MEMORY_INFO))
    if extra:
        raise _bad(path, f"unknown key {extra[0]!r} in [step] or [memory]")
    factors = {k: _value(step, k, path, *STEP_FACTORS[k]) for k in STEP_FACTORS if k in step}
    reserve = None
    if "runtime_reserve_bytes" in memory:
        value = memory["runtime_reserve_bytes"]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RESERVE_BYTES:
            raise _bad(path, f"runtime_reserve_bytes = {shorten(value)} is not a size in bytes")
        reserve = value
    if not factors and reserve is None:
        raise _bad(path, "it holds no fitted value ([step] factors or [memory] runtime_reserve_bytes)")
    sources = doc.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources) or len(sources) > 1000:
        raise _bad(path, "sources must be a list of file names")
    engine = _text(doc, "engine", path)
    if "==" in engine and pinned_release(engine) is None:
        raise _bad(path, f"engine = {shorten(engine)} is no engine name and release (e.g. vllm==0.19)")
    return CalibrationFile(str(path), _text(doc, "model", path), _text(doc, "hardware", path),
                           engine, tp, factors, reserve, tuple(sources))


def pinned_release(engine: str) -> tuple[int, int, int] | None:
    """The release an engine text pins (``vllm==0.19`` -> (0, 19, 0)); None when it pins none or is malformed."""
    import re

    match = re.fullmatch(_PIN, engine.partition("==")[2].strip())
    return (int(match[1]), int(match[2]), int(match[3] or 0)) if match else None


def read_calibration(path: str | Path) -> CalibrationFile:
    """The calibration file at ``path`` (kvplan's hardened TOML reader, then ``parse``)."""
    from kvplan.inputs.files import read_toml

    p = Path(path)
    return parse(read_toml(p, WHAT, FIX, "a calibration file nests two levels; give one kvplan wrote"), p)


def apply(cal: CalibrationFile, typed: dict[str, Any]) -> dict[str, Any]:
    """The scenario fields ``typed`` (``kvplan.inputs.request.resolve``'s output) with the calibration applied: the
    GPU preset's efficiency factors replaced by the fitted ones, and the runtime reserve when none was given.
    Refused for another model, GPU or engine (vllm, sglang, neutral) than it was fitted for (another TP: ``check_tp``,
    once the scenario's layout is known)."""
    from kvplan.inputs.request import SEED_HARDWARE, SEED_MODEL
    from kvplan.specs.model import Sourced

    model, hw = typed.get("model"), typed.get("hardware")
    model_id, hw_id = (model.id if model is not None else SEED_MODEL), (hw.id if hw is not None else SEED_HARDWARE)
    if model_id != cal.model:
        raise InputError(f"--calibration {shorten(cal.path)} was fitted for {cal.model}, not {model_id}",
                         f"give -m {cal.model}, or calibrate {model_id} with its own runs")
    if hw_id != cal.hardware:
        raise InputError(f"--calibration {shorten(cal.path)} was fitted on {cal.hardware}, not {hw_id}",
                         f"give -g {cal.hardware}, or calibrate on {hw_id} with its own runs")
    engine_text = typed.get("engine") or "neutral"
    engine_id = getattr(engine_text, "id", None) or str(engine_text).partition("==")[0].strip().lower()   # an
    # adapter's id, or kvplan.engines.get's key as it reads a name
    if engine_id != cal.engine.split("==")[0].strip().lower():
        # refused, as another model or GPU is: the reserve was fitted in that engine's budget and the step factors
        # to that engine's measured steps
        raise InputError(f"--calibration {shorten(cal.path)} was fitted with --engine {cal.engine}, not "
                         f"{engine_text}", f"give --engine {cal.engine}, or calibrate with --engine {engine_id}")
    out = dict(typed)
    if hw is not None and cal.factors:
        why = f"{CALIBRATED}{cal.path} (fitted by kvplan calibrate to " + ", ".join(cal.sources or ("runs",)) + ")"
        eff = replace(hw.efficiency, **{k: Sourced(value=v, source=why, kind="M") for k, v in cal.factors.items()})
        out["hardware"] = replace(hw, efficiency=eff)
    if cal.runtime_reserve_bytes is not None and out.get("runtime_reserve_bytes") is None:
        out["runtime_reserve_bytes"] = cal.runtime_reserve_bytes
        out["runtime_reserve_source"] = (f"{CALIBRATED}{cal.path} (fitted by kvplan calibrate to "
                                         + ", ".join(cal.sources or ("a start-up log",)) + ")")
    return out


def check_tp(cal: CalibrationFile, tp: int, defaulted: bool) -> None:
    """Refuse the calibration at another TP than it was fitted at (its ``tp``), as another model or GPU is: the
    fitted step overhead holds that TP's all-reduces per step, and the reserve is per GPU at that TP (vLLM's own
    grows with TP, ``kvplan.engines.vllm``), so neither carries to another TP."""
    if tp != cal.tp:
        how = " (the default: every GPU of one node)" if defaulted else ""
        raise InputError(f"--calibration {shorten(cal.path)} was fitted at TP={cal.tp}, not TP={tp}{how}",
                         f"give --tp {cal.tp}, or calibrate at TP={tp} with its own runs")


def check_release(cal: CalibrationFile, version: tuple[int, int, int] | None, reserve_applied: bool) -> None:
    """Refuse the calibration's memory reserve under another release of its engine than the one it was fitted in
    (the file's ``engine = "vllm==X.Y"``; ``version``: the planned adapter's release): the reserve closes the gap
    between that release's budget and the logged pool, and the budget's other rows move by release (vLLM's sampler
    bytes per logit 38.4 -> 14.9 at v0.17: Qwen3-14B on one H100 plans 45.35 GiB where its v0.16 log shows 41.94).
    Nothing is refused when the reserve is not applied (--runtime-reserve given) or the file pins no release."""
    fitted = pinned_release(cal.engine)
    if not reserve_applied or fitted is None or version is None or tuple(version) == fitted:
        return
    engine = cal.engine.partition("==")[0].strip()
    text = ".".join(str(x) for x in (version if version[2] else version[:2]))
    raise InputError(f"--calibration {shorten(cal.path)}: its memory reserve was fitted in {cal.engine}'s budget, "
                     f"not {engine}=={text}'s",
                     f"give --engine {cal.engine}, or --runtime-reserve SIZE, or calibrate with {engine}=={text}'s "
                     "start-up log")


def _toml_value(v: Any) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return repr(float(v)) if math.isfinite(v) else json.dumps(str(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def to_toml(head: dict[str, Any], step: dict[str, Any], memory: dict[str, Any],
            residuals: list[dict[str, Any]]) -> str:
    """The file's text: ``head`` (model, hardware, engine, tp, sources), the [step] and [memory] tables (empty:
    left out) and one [[residuals]] table per compared figure."""
    out = ["# kvplan calibration: the step factors and memory reserve fitted to measured runs (kvplan calibrate).",
           "# Every planning command takes it: --calibration FILE.", 'type = "calibration"', "version = 1"]
    out += [f"{k} = {_toml_value(v)}" for k, v in head.items()]
    for name, table in (("step", step), ("memory", memory)):
        if table:
            out += ["", f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    for row in residuals:
        out += ["", "[[residuals]]"] + [f"{k} = {_toml_value(v)}" for k, v in row.items() if v is not None]
    return "\n".join(out) + "\n"


def write(path: Path, text: str) -> None:
    """Write the file (a .toml name), one line when it cannot be written."""
    from kvplan.errors import KvplanError

    if path.suffix != ".toml":
        raise KvplanError(f"--save {shorten(str(path))} is not a .toml file", "give a file name ending in .toml")
    from kvplan.inputs.files import check_writable

    check_writable(path, "--save")
    try:
        path.write_text(text)
    except (OSError, ValueError) as err:
        raise KvplanError(f"cannot write {shorten(str(path))}: {getattr(err, 'strerror', None) or err}",
                          "check the folder exists and is writable") from None
