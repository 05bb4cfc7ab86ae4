"""``kvplan recommend``'s own options (the TPOT SLO, DRAM, NIC, ``--target`` and ``--candidates``) ->
``RecommendRequest``, with the checks between them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError
from kvplan.inputs.options import (
    extra_dirs,
    optional,
    parse_link_gbs,
    parse_seconds,
)
from kvplan.options.command import size_bytes

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.recommend import RecommendOptions
    from kvplan.calc.sizing import Target
    from kvplan.scenario import Scenario
    from kvplan.specs.hardware import HardwareSpec


@dataclass(frozen=True)
class RecommendRequest:
    scenario: Scenario
    options: RecommendOptions
    emit: str | None = None                     # the engine whose launch command to print
    target: str | None = None                   # --target as given, and parsed (for the layout search)
    targets: tuple[Target, ...] | None = None
    candidates: tuple[HardwareSpec, ...] = ()   # the GPUs the search tries (--candidates, else -g, else every preset)
    notes: tuple[str, ...] = ()
    dtypes: tuple[str, ...] | None = None       # the KV dtypes the search tries (--kv-dtype given: that one; None: all)


def recommend_request(scenario: dict[str, Any], *, tpot_slo: Any = None, dram: Any = None, nic_gbps: Any = None,
                      target: str | None = None, candidates: str | None = None, emit: str | None = None,
                      presets_dir: str | Path | None = None, ttft_slo: Any = None, slo_percentile: Any = None,
                      slo_attainment: Any = None) -> RecommendRequest:
    """``kvplan recommend``'s options. ``emit`` with the neutral engine plans with that engine's own accounting
    (said in a note); with another engine it is refused. The TPOT SLO the batch is planned on: a ``tpot<=T`` target's
    T (the tighter of the two when ``--tpot-slo`` is also given), else ``--tpot-slo``, else 50 ms; it is judged at
    ``--slo-percentile`` (default p99) with ``--slo-attainment`` (kvplan.calc.slo), and ``--ttft-slo`` is judged on a
    request alone, under a ``rate>=R`` target's rate when one is given, and by the PD row (a closed loop's TTFT is its
    users' lockstep, so the batch row holds the TPOT target only)."""
    from kvplan.calc.recommend import RecommendOptions
    from kvplan.options.scenarios import build_scenario

    notes: tuple[str, ...] = ()
    wanted = None
    if emit is not None:
        wanted = emit.strip().lower()
        if wanted not in ("vllm", "sglang"):
            raise InputError(f"--emit {emit!r} is not an engine kvplan can launch", "give --emit vllm or sglang")
        engine = str(scenario.get("engine", "neutral")).split("==")[0].strip().lower()
        if engine == "neutral":
            scenario = {**scenario, "engine": wanted}
            notes = (f"--emit {wanted} plans with {wanted}'s own accounting (its memory fraction, batch limits and "
                     f"block sizes), so the flags realise the figures; without --emit the table uses the neutral "
                     f"engine, whose figures can differ",)
        elif engine != wanted:
            raise InputError(f"--emit {wanted} with --engine {scenario['engine']}: the flags must realise the plan of "
                             "the same engine", f"give --engine {wanted} (or drop --engine)")
    if candidates is not None and target is None:
        raise InputError("--candidates without --target", "give --target to search, or drop --candidates")
    hardware_given = None
    if target is not None:
        hardware_given = _search_conflicts(scenario, candidates)
    built = build_scenario(**scenario)
    targets: tuple[Target, ...] = ()
    if target is not None:
        from kvplan.calc.sizing import parse_target

        targets = tuple(parse_target(t) for t in target.split(",") if t.strip())
        if not targets:
            raise InputError("--target is empty", "give --target concurrency>=64@31k (or tpot<=40ms, rate>=2rps)")
        if len({t.metric for t in targets}) < len(targets):
            raise InputError(f"--target {target!r} names a metric twice", "give each of concurrency, tpot, rate once")
    slo, origin = _slo(tpot_slo, next((t for t in targets if t.metric == "tpot"), None))
    if targets and not any(t.metric == "tpot" for t in targets):
        # the batch is planned on the TPOT SLO in any case, so the search holds it too: its batch is the emitted one
        from kvplan.calc.sizing import parse_target

        targets += (parse_target(f"tpot<={slo * 1e3:g}ms"),)
        notes += (f"the search also holds the TPOT SLO {slo * 1e3:g} ms ({origin or 'the default'}) the batch is "
                  "planned on, so the batch it finds is the one the launch command sets",)
    from dataclasses import replace

    from kvplan.calc.slo import parse_targets

    slo_targets = replace(parse_targets(ttft=ttft_slo, percentile=slo_percentile, attainment=slo_attainment),
                          tpot=slo, tpot_origin=origin or "the 50 ms default")
    options = RecommendOptions(tpot_slo=slo, slo=slo_targets, dram_bytes_per_node=optional(size_bytes, dram, "--dram"),
                               nic_gbps=optional(parse_link_gbs, nic_gbps, "--nic-gbps"), slo_origin=origin,
                               targets=targets)
    if target is None:
        return RecommendRequest(built, options, wanted, notes=notes)
    from kvplan.inputs.presets import discover, load_hardware

    dirs = extra_dirs(presets_dir)
    if hardware_given is not None:    # -g names the GPU: the search tries it alone (the scenario's own spec)
        specs: tuple[HardwareSpec, ...] = (built.hardware,)
    else:
        ids = ([c.strip() for c in candidates.split(",") if c.strip()] if candidates is not None
               else sorted(discover(dirs)["hardware"]))
        if not ids:
            raise InputError("--candidates is empty", "give GPU preset ids, e.g. --candidates h100-sxm,h200")
        specs = tuple(load_hardware(i, dirs) for i in dict.fromkeys(ids))   # each GPU once
    dtypes = None if built.kv_dtype_auto else (built.kv_dtype.value,)   # --kv-dtype given: the search keeps it
    return RecommendRequest(built, options, wanted, target, targets, specs, notes, dtypes)


def _search_conflicts(scenario: dict[str, Any], candidates: str | None) -> str | None:
    """With --target the search chooses the GPUs and the layout: a layout given too is refused (the search would
    replace it); a GPU given (-g) is the one GPU the search tries, refused beside --candidates that leave it out.
    Returns the -g to search alone, or None."""
    from kvplan.inputs.request import SCENARIO_DEFAULTS

    for key in ("gpus", "nodes", "tp", "pp", "dp", "ep"):
        value = scenario.get(key)
        if value is not None and str(value).strip() != str(SCENARIO_DEFAULTS[key]):
            raise InputError(f"--{key} {value} with --target: the search chooses the GPU count and the TP x PP x DP "
                             "(EP) layout itself", f"drop --{key} to search, or drop --target to plan that layout")
    hardware = scenario.get("hardware")
    if hardware is None:   # not given (the command line's --hardware is None then; -g h200 typed out is given)
        return None
    if candidates is not None:
        if str(hardware).strip() in [c.strip() for c in candidates.split(",")]:
            return None       # -g is one of the candidates: the search tries them all
        raise InputError(f"-g {hardware} is not among --candidates {candidates}, the GPUs the --target search tries",
                         f"add it to --candidates (--candidates {hardware},...), or drop --candidates to search -g "
                         "alone")
    return str(hardware)


def _slo(tpot_slo: Any, target: Target | None) -> tuple[float, str]:
    """(the TPOT SLO in seconds, who set it): the --target's tpot bound, --tpot-slo, or the 50 ms default; with
    both given, the tighter, so the batch planned on it meets both."""
    given_slo = None if tpot_slo is None else parse_seconds(tpot_slo, "tpot-slo")
    if target is None:
        return (0.05, "") if given_slo is None else (given_slo, "--tpot-slo")
    if given_slo is not None and given_slo < target.bound:
        return given_slo, "--tpot-slo (tighter than --target " + target.text + ")"
    return target.bound, "--target " + target.text
