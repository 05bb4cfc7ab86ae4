"""`kvplan check PLAN...`: a deployment plan's assertions, with exit codes for CI (0 all pass, 1 any fails,
2 a plan is invalid or cannot be evaluated) and optional JUnit XML."""

from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.commands.common import BriefOpt, CalibrationOpt, FormatOpt, PresetsDirOpt, UnitsOpt


def check(
    plans: Annotated[list[Path], typer.Argument(metavar="PLAN", help="Plan .toml files: [deployment] and "
                                                "[[assert]] entries (see examples/plans/).")],
    junit: Annotated[Path | None, typer.Option("--junit", metavar="FILE.xml",
                                               help="Also write JUnit XML: one test case per assertion.")] = None,
    update_baseline: Annotated[bool, typer.Option("--update-baseline", help="Write each plan's measured values to "
                                                  "PLAN.baseline.json, which within_baseline assertions compare "
                                                  "against (they pass against the values just written).")] = False,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
    brief: BriefOpt = False,
    presets_dir: PresetsDirOpt = None,
    calibration: CalibrationOpt = None,
) -> None:
    """Check deployment plans: each assertion's measured value, bound, pass/fail and margin."""
    from kvplan.commands.output import check_output_options, emit
    from kvplan.errors import KvplanError
    from kvplan.present.check import present

    fmt = check_output_options(fmt, units, brief)
    if junit is not None and junit.suffix.lower() != ".xml":
        raise KvplanError(f"--junit {junit} is not an .xml file", "give a file name ending in .xml")
    if junit is not None:
        from kvplan.inputs.files import check_writable

        check_writable(junit, "--junit")     # before any plan runs: a FIFO would block the run at the end
    checked = []
    for path in plans:
        try:
            checked.append(_check_one(path, presets_dir, update_baseline, calibration))
        except KvplanError as err:
            if junit is not None:   # CI still gets a report, naming the plan that could not be checked
                from kvplan.render.output import junit_error

                _write(junit, junit_error(str(path), err.message))
            raise
    result = present(tuple(checked), unit_column=fmt == "csv")
    if junit is not None:
        from kvplan.render.output import to_junit

        _write(junit, to_junit(result, units))
    emit(result, fmt, False, units, brief)
    if not result.data["passed"]:
        raise SystemExit(1)


def _check_one(path: Path, presets_dir, update_baseline: bool, calibration=None):
    from dataclasses import replace

    from kvplan.calc.check import plan_check
    from kvplan.errors import KvplanError
    from kvplan.inputs.plan_file import load, plan_keys
    from kvplan.options.scenarios import deployment_scenario

    spec = load(path)
    if calibration is not None:   # --calibration FILE: every plan's, over its own [deployment] calibration
        spec = replace(spec, deployment={**spec.deployment, "calibration": str(calibration)})
    scenario = deployment_scenario(spec, presets_dir)
    try:
        assertions = _with_baselines(spec, path, update_baseline, scenario)
        return plan_check(scenario, assertions, str(path), spec.description, spec.workload)
    except KvplanError as err:
        if getattr(err, "assert_index", None) is None:   # about the plan or its baseline file: named already
            raise
        from kvplan.inputs.plan_file import locate

        where = locate(getattr(err, "assert_source", None) or path, "assert", getattr(err, "assert_key", None),
                       getattr(err, "assert_index", None))
        raise KvplanError(f"{where}: {plan_keys(err.message)}", plan_keys(err.hint)) from None


def _write(target: Path, text: str) -> None:
    from kvplan.errors import KvplanError

    try:
        target.write_text(text, encoding="utf-8")
    except OSError as err:
        raise KvplanError(f"cannot write {target}: {err.strerror or err}",
                          "check the folder exists and is writable") from None


def _with_baselines(spec, path: Path, update: bool, scenario):
    """The plan's assertions with each within_baseline one's baseline value: read from PLAN.baseline.json, or,
    with --update-baseline, measured now and written there first."""
    import dataclasses
    import json

    from kvplan.calc.check import plan_check
    from kvplan.errors import KvplanError
    from kvplan.inputs.plan_file import baseline_path, read_baseline

    target = baseline_path(path)
    wanted = [a for a in spec.assertions if a.within_baseline is not None]
    names = [a.name for a in spec.assertions]
    values: dict[str, Any]   # unique: plan_file.load refuses a name used twice
    if update:
        first = plan_check(scenario, tuple(dataclasses.replace(a, baseline=0.0) if a.within_baseline is not None
                                           else a for a in spec.assertions), str(path), workload=spec.workload)
        values = {r.name: r.measured.raw() for r in first.assertions if isinstance(r.measured.raw(), (int, float))}
        document = {"plan": path.name, "written_by": "kvplan check --update-baseline", "values": values}
        from kvplan.inputs.files import check_writable

        check_writable(target, "the baseline")
        if target.is_symlink():   # writing through it would overwrite whatever it points at
            raise KvplanError(f"the baseline {target} is a symbolic link; kvplan check --update-baseline does not "
                              "write through a link", f"remove the link ({target}) and run --update-baseline again")
        try:
            target.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        except OSError as err:
            raise KvplanError(f"cannot write the baseline {target}: {err.strerror or err}",
                              "check the folder is writable") from None
    elif not wanted:
        return spec.assertions
    else:
        values = read_baseline(target, path, names)
    out = []
    for a in spec.assertions:
        if a.within_baseline is not None:
            if a.name not in values:
                raise KvplanError(f"{target} has no baseline for {a.name!r}",
                                  f"run kvplan check {path} --update-baseline")
            a = dataclasses.replace(a, baseline=float(values[a.name]))
        out.append(a)
    return tuple(out)


def register(app: typer.Typer) -> None:
    app.command("check", short_help="Check deployment plans' assertions (exit 1 on a failure).")(check)
