"""``kvplan calibrate``'s inputs: the files (each recognised by its content: a vLLM / SGLang start-up log, a
``vllm bench serve`` JSON, an SGLang ``bench_serving`` JSONL, a Prometheus scrape of ``/metrics``), the deployment
(the log's, over the scenario options, as ``explain-log`` rebuilds it; else the options alone), and the calibration
file ``--save`` writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.calibrate import CalibratePlan
    from kvplan.inputs.bench_results import BenchRun
    from kvplan.inputs.prometheus import Scrape
    from kvplan.inputs.startup_log import StartupLog
    from kvplan.scenario import Scenario

MAX_FILES = 64
FIX = ("give start-up logs, vllm bench serve --save-result JSON, SGLang bench_serving JSONL or a /metrics scrape")


@dataclass(frozen=True)
class CalibrateRequest:
    scenario: Scenario
    log: StartupLog | None
    runs: tuple[BenchRun, ...]
    scrapes: tuple[Scrape, ...]
    notes: tuple[str, ...]
    warnings: tuple[str, ...]
    gpu_defaulted: str = ""   # why the GPU is kvplan's default, neither given (-g) nor read from the log; "": it is not


# a memory reserve fitted on a GPU the deployment may not have run on is meaningless (a Qwen3-235B 4 x H100 SGLang
# log planned on the default H200: +342%, a 56 GiB reserve)
GPU_FIX = "give -g/--hardware with the GPU the deployment ran on (kvplan presets list --type hardware)"


def kind_of(text: str) -> str:
    """What a file's text is: "bench" (a JSON object or JSONL of them), "metrics" (Prometheus text) or "log"."""
    from kvplan.inputs import bench_results, prometheus

    if bench_results.looks_like(text):
        return "bench"
    if prometheus.looks_like(text):
        return "metrics"
    return "log"


def calibrate_request(scenario_args: dict[str, Any], files: list[Path] | tuple[Path, ...]) -> CalibrateRequest:
    """Read every file by its content and build the deployment (module docstring)."""
    from kvplan.errors import KvplanError
    from kvplan.inputs import bench_results, prometheus, startup_log
    from kvplan.inputs.presets import read_text
    from kvplan.options.scenarios import build_scenario, scenario_from_log

    if not files:
        raise InputError("kvplan calibrate needs at least one file", FIX)
    for key in ("prompt", "decode"):    # each run's own lengths are what kvplan is compared with
        if scenario_args.get(key) is not None:
            raise InputError(f"--{key} {scenario_args[key]}: kvplan calibrate takes each run's prompt and output "
                             "lengths from its files", f"drop --{key}")
    if len(files) > MAX_FILES:
        raise InputError(f"{len(files)} files given; kvplan calibrate reads at most {MAX_FILES}", "give fewer files")
    logs: list[StartupLog] = []
    runs: list[BenchRun] = []
    scrapes: list[Scrape] = []
    for path in files:
        text = read_text(Path(path), "calibration input", FIX)
        if "\x00" in text:
            raise KvplanError(f"calibration input {path} holds NUL bytes: a binary file", FIX)
        kind = kind_of(text)
        if kind == "bench":
            runs.extend(bench_results.parse(text, str(path)))
        elif kind == "metrics":
            scrapes.append(prometheus.parse(text, str(path)))
        else:
            try:
                logs.append(startup_log.parse(text, str(path)))
            except KvplanError as err:
                raise KvplanError(f"{path} is no file kvplan calibrate reads ({err.message})", FIX) from None
    if len(logs) > 1:
        raise InputError(f"{len(logs)} start-up logs given ({logs[0].path}, {logs[1].path})",
                         "give the one start-up log of the deployment the runs measured")
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    gpu_defaulted = ""
    if logs:
        from kvplan.inputs.startup_log import GPU_DEFAULTED

        scenario, n, w = scenario_from_log(logs[0], scenario_args)
        notes, warnings = tuple(str(x) for x in n), tuple(str(x) for x in w)
        if scenario_args.get("hardware") is None and any(GPU_DEFAULTED in x for x in warnings):
            # the reserve is fitted to the logged pool, on the GPU's memory: refused on a guessed GPU
            raise InputError(f"{logs[0].path} names no GPU kvplan has a preset for and -g/--hardware is not given: "
                             f"a memory reserve fitted on kvplan's default {scenario.hardware.id} would be "
                             "meaningless", GPU_FIX)
    else:
        scenario = build_scenario(**scenario_args)
        if scenario_args.get("hardware") is None:
            gpu_defaulted = f"-g/--hardware is not given: the fit is on kvplan's default {scenario.hardware.id}"
    engine = scenario.engine_adapter.id
    other = next((r for r in runs if r.backend in ("vllm", "sglang") and engine in ("vllm", "sglang")
                  and r.backend != engine), None)
    given = scenario_args.get("engine")
    if other is not None and given is not None and str(given).strip().lower() != "neutral":
        # its TPOT is the other engine's steps: fitting them as this engine's would mislead
        raise InputError(f"--engine {given} contradicts {other.source}, which measured backend {other.backend}",
                         f"give --engine {other.backend}, or the runs of a {engine} server")
    if other is not None:   # the engine is the log's: said, as the runs of several models are
        warnings += (f"{other.source} measured backend {other.backend}, not the log's {engine}: kvplan fits "
                     f"{engine}'s step factors to it.",)
    models = sorted({r.model for r in runs if r.model})
    if len(models) == 1:
        _check_model(scenario, models[0], next(r.source for r in runs if r.model == models[0]),
                     scenario_args.get("presets_dir"))
    if len(models) > 1:
        warnings += (f"The runs name {len(models)} models ({', '.join(models[:3])}): kvplan calibrates "
                     f"{scenario.model.id} to all of them.",)
    return CalibrateRequest(scenario, logs[0] if logs else None, tuple(runs), tuple(scrapes), notes, warnings,
                            gpu_defaulted)


def _check_model(scenario: Scenario, measured: str, source: str, presets_dir: Any) -> None:
    """Refuse a deployment whose model is a preset other than the one the runs name (their ``model_id``, mapped as a
    start-up log's model is): its steps fitted to another model's would be neither's. A model given as a file (a
    fine-tune's config.json) is not checked."""
    from kvplan.inputs.options import extra_dirs
    from kvplan.inputs.presets import discover
    from kvplan.inputs.startup_log import preset_for_model

    models = discover(extra_dirs(presets_dir))["model"]
    match = preset_for_model(measured, models)
    planned = scenario.model.id
    if match is None or match.casefold() == planned.casefold() or planned.casefold() not in {
            pid.casefold() for pid in models}:
        return
    raise InputError(f"the model {planned} contradicts {source}, which measured {measured} (kvplan's preset {match})",
                     f"give -m {match}, or the runs of {planned}")


def plan(request: CalibrateRequest) -> CalibratePlan:
    from dataclasses import replace

    from kvplan.calc.calibrate import plan_calibrate

    p = plan_calibrate(request.scenario, request.log, request.runs, request.scrapes)
    return replace(p, gpu_defaulted=request.gpu_defaulted) if request.gpu_defaulted else p


def save(p: CalibratePlan, path: Path) -> None:
    """Write the calibration file of ``p`` (``kvplan.inputs.calibration_file``): what was fitted, the residual of
    every compared figure, and the inputs."""
    from kvplan.errors import KvplanError
    from kvplan.inputs.calibration_file import to_toml, write

    if p.gpu_defaulted:
        raise KvplanError(f"--save refused: {p.gpu_defaulted}, which the runs may not have measured", GPU_FIX)
    if not p.free and p.reserve is None:
        raise KvplanError("nothing was fitted, so there is no calibration to --save",
                          "give a benchmark run with a mean TPOT, or the deployment's start-up log")
    s = p.scenario
    adapter = s.engine_adapter
    # the release the reserve was fitted in (kvplan.inputs.calibration_file.check_release): X.Y as --engine takes it
    release = "" if adapter.version is None else "==" + ".".join(
        str(x) for x in (adapter.version if adapter.version[2] else adapter.version[:2]))
    head = {"model": s.model.id, "hardware": s.hardware.id, "engine": adapter.id + release, "tp": s.parallelism.tp,
            "sources": list(p.sources)}
    step: dict[str, Any] = {k: p.fitted[k].number() for k in p.free}
    if p.step_fit is not None and step:
        step["points"] = len(p.step_fit.points)
        step["rms_relative_error"] = p.step_fit.rms_relative_error
    memory: dict[str, Any] = {}
    if p.reserve is not None:
        r = p.reserve
        memory = {"runtime_reserve_bytes": r.reserve_fitted.number(), "residual_bytes": r.residual.number(),
                  "logged_pool_bytes": r.logged_pool.number(), "predicted_pool_bytes": r.predicted_pool.number()}
    residuals = [{"figure": c.figure, "source": c.source, "status": c.status,
                  "measured": _raw(c.measured), "kvplan_before": _raw(c.before), "kvplan_after": _raw(c.after),
                  "error_before": _raw(c.error_before), "error_after": _raw(c.error_after)}
                 for c in p.compared]
    write(Path(path), to_toml(head, step, memory, residuals))


def _raw(value: Any) -> float | None:
    return None if value is None or value.value is None else float(value.value)
