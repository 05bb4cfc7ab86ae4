"""Each command's own options (beyond the scenario) -> the calculator's options, checked here for the command line
and Python alike: ``concurrency_options(batch="8", tpot="50ms", contexts="1k,8k")`` takes text or numbers and
refuses what ``kvplan concurrency --batch ...`` refuses with the same message. simulate's are
``kvplan.options.simulate``; the scenario's ``kvplan.inputs.request``.

Layer: the calculators' option classes (``kvplan.calc.*``) are imported inside each function.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError
from kvplan.inputs.options import (
    DEFAULT_CONTEXTS_TEXT,
    extra_dirs,
    optional,
    parse_contexts,
    parse_degree,
    parse_float,
    parse_fraction,
    parse_link_gbs,
    parse_list,
    parse_microseconds,
    parse_seconds,
)

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.calibrate import Calibration
    from kvplan.calc.concurrency import ConcurrencyOptions
    from kvplan.calc.costs import CostSettings
    from kvplan.calc.pd import PdOptions
    from kvplan.calc.recommend import RecommendOptions
    from kvplan.calc.sizing import Target
    from kvplan.calc.tpot import TpotOptions
    from kvplan.scenario import Scenario
    from kvplan.specs.hardware import HardwareSpec
    from kvplan.specs.model import ModelSpec

# size's side-by-side model when --model is not given: the workload document's GQA worked example
SEED_COMPARE = "deepseek-r1-seed-gqa"


def _scenario(scenario: Scenario | dict[str, Any], **extra: Any) -> Scenario:
    """A ``Scenario``, or the one the scenario options (text, ``build_scenario``'s keywords) describe."""
    from kvplan.options.scenarios import build_scenario

    if isinstance(scenario, dict):
        return build_scenario(**scenario, **extra)
    given = {k: v for k, v in extra.items() if v is not None}
    return scenario.with_(**given) if given else scenario


def _tokens(flag: str, allow_zero: bool = False):
    from kvplan.inputs.units import parse_tokens

    return lambda value: parse_tokens(value, flag, allow_zero)


def _size(value: Any, flag: str) -> int:
    from kvplan.inputs.units import parse_size

    return value if type(value) is int and value > 0 else parse_size(value if isinstance(value, str) else str(value),
                                                                   flag)


# --- size ------------------------------------------------------------------------------------------------------
def size_request(scenario: Scenario | dict[str, Any], *, contexts: Any = DEFAULT_CONTEXTS_TEXT,
                 compare: str | Path | None = None, include_mtp: bool = False,
                 presets_dir: str | Path | None = None) -> tuple[Scenario, tuple[int, ...], ModelSpec | None]:
    """(the scenario, the contexts to tabulate, the model shown beside it) of ``kvplan size``. ``include_mtp``: the
    checkpoint's own MTP layers (not with --mtp-layers). Without --compare and --model, the side-by-side model is
    the workload document's GQA example."""
    from kvplan.inputs.presets import load_model

    args = scenario if isinstance(scenario, dict) else None
    if include_mtp and args is not None and args.get("mtp_layers") is not None:
        raise InputError("--include-mtp and --mtp-layers both given", "give only --mtp-layers N")
    built = _scenario(scenario)
    if include_mtp:
        built = built.with_(mtp_layers=built.model.mtp_layers)
    default = SEED_COMPARE if args is not None and args.get("model") is None else None
    ref = compare if compare is not None else default
    other = load_model(str(ref), extra_dirs(presets_dir)) if ref is not None else None
    return built, parse_contexts(contexts), other


# --- concurrency -----------------------------------------------------------------------------------------------
def concurrency_options(*, batch: Any = "8", tpot: Any = None, dram: Any = None, ssd: Any = None,
                        contexts: Any = DEFAULT_CONTEXTS_TEXT, dtypes: Any = None,
                        pool_origin: str | None = None) -> ConcurrencyOptions:
    """``kvplan concurrency``'s --batch, --tpot, --dram, --ssd, --contexts and --dtypes."""
    from kvplan.calc.concurrency import ConcurrencyOptions
    from kvplan.inputs.units import parse_tokens
    from kvplan.specs.dtypes import parse_kv_dtype

    return ConcurrencyOptions(
        batch=parse_tokens(batch, "--batch"),
        tpot_seconds=optional(parse_seconds, tpot, "tpot"),
        dram_bytes_per_node=optional(_size, dram, "--dram"),
        ssd_bytes_per_node=optional(_size, ssd, "--ssd"),
        contexts=parse_contexts(contexts),
        dtypes=optional(parse_list, dtypes, parse_kv_dtype, "dtypes"),
        pool_origin=pool_origin,
    )


# --- tpot ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TpotRequest:
    scenario: Scenario
    options: TpotOptions
    calibration: Calibration | None = None   # the factors fitted to --measured points


MAX_SPEC_VERIFY = 16   # draft tokens per verify step (engines verify 1-8)
FACTOR_FLAGS = {   # TpotOptions.factors key -> the flag, and whether it is a fraction (else microseconds)
    "hbm": ("hbm-efficiency", True), "mfu": ("mfu", True), "prefill_mfu": ("prefill-mfu", True),
    "overhead_us_per_layer": ("--overhead-us", False), "overhead_us_per_step": ("--step-overhead-us", False),
    "overhead_us_per_moe_layer": ("--moe-overhead-us", False),
    "overhead_us_per_request": ("--request-overhead-us", False), "gemm_floor_us": ("--gemm-floor-us", False),
    "allreduce_latency_us": ("--allreduce-latency-us", False),
}


def tpot_request(scenario: Scenario | dict[str, Any], *, batch: Any = "8", shape: str = "steady",
                 batches: Any = None, contexts: Any = DEFAULT_CONTEXTS_TEXT, factors: dict[str, Any] | None = None,
                 spec_tokens: Any = None, draft_model: Any = None, accept: str | None = None,
                 measured: str | Path | None = None, save_calibration: str | Path | None = None) -> TpotRequest:
    """``kvplan tpot``'s options: ``factors`` by ``FACTOR_FLAGS`` key (hbm, mfu, overhead_us_per_layer, ...; text
    or numbers); with ``measured`` points, the factors not given are fitted to them (``kvplan.calc.calibrate``)."""
    from kvplan.calc.tpot import TpotOptions, parse_accept
    from kvplan.inputs.units import parse_tokens

    if save_calibration is not None and measured is None:
        raise InputError("--save-calibration needs --measured", "give the measured points to fit")
    built = _scenario(scenario, draft_model=draft_model)
    given = factors or {}
    unknown = [k for k in given if k not in FACTOR_FLAGS]
    if unknown:
        raise InputError(f"unknown step-model factor {unknown[0]!r}", "give one of " + ", ".join(FACTOR_FLAGS))
    parsed = {key: optional(parse_fraction if fraction else parse_microseconds, given.get(key), flag)
              for key, (flag, fraction) in FACTOR_FLAGS.items()}
    k = parse_tokens(spec_tokens, "--spec-tokens", allow_zero=True) if spec_tokens is not None else 0
    if k > MAX_SPEC_VERIFY:
        raise InputError(f"--spec-tokens {k} is more draft tokens than engines verify (1-8)", "give 1 to 8")
    if k and not (built.mtp_layers or built.draft):
        raise InputError("--spec-tokens needs a drafter", "add --mtp-layers 1 (DeepSeek's MTP) or --draft-model ID")
    if accept is not None and not k:
        raise InputError("--accept applies to speculative decoding", "add --spec-tokens K, or drop --accept")
    calibration = None
    if measured is not None:
        from kvplan.calc import calibrate, costs

        points = calibrate.read_points(Path(measured))
        prior = costs.step_factors(built.hardware, **{k_: v for k_, v in parsed.items() if v is not None})
        calibration = calibrate.fit(built, points, str(measured), prior)
        parsed.update({k_: v for k_, v in calibration.overrides.items() if parsed.get(k_) is None})
    options = TpotOptions(
        batch=parse_tokens(batch, "--batch"), shape=shape.strip().lower(),
        batches=optional(parse_list, batches, _tokens("--batches"), "batches") or TpotOptions.batches,
        contexts=parse_contexts(contexts), spec_tokens=k, accept=parse_accept(accept) if accept is not None else None,
        factors={k_: v for k_, v in parsed.items() if v is not None})
    return TpotRequest(built, options, calibration)


# --- compare-preemption ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PreemptionRequest:
    settings: CostSettings
    prefix_hit_tokens: int
    sweep: tuple[int, ...]
    dram_bytes_per_node: int | None


def preemption_request(*, dram: Any = None, prefix_hit: Any = "0", mfu: Any = None, compute_dtype: str = "auto",
                       layout: str = "contiguous", copy_overhead_us: Any = None, bidir_factor: Any = None,
                       sync_swap: bool = False, sweep: Any = None) -> PreemptionRequest:
    """``kvplan compare-preemption``'s options: the cost settings, the prefix hit, the sweep of generated tokens and
    the host DRAM (``plan_preemption``'s keywords)."""
    from kvplan.calc.costs import CostSettings
    from kvplan.calc.preemption import DEFAULT_SWEEP
    from kvplan.inputs.units import parse_tokens

    given = {
        "mfu": optional(parse_fraction, mfu, "mfu"),
        "copy_overhead_us": optional(parse_float, copy_overhead_us, "--copy-overhead-us", "2.3"),
        "bidir_factor": optional(parse_fraction, bidir_factor, "bidir-factor"),
    }
    settings = CostSettings(compute_dtype=compute_dtype.strip().lower(),
                            layout=layout.strip().lower().replace("_", "-"),
                            sync_swap=sync_swap, **{k: v for k, v in given.items() if v is not None})
    return PreemptionRequest(settings, parse_tokens(prefix_hit, "--prefix-hit", allow_zero=True),
                             optional(parse_list, sweep, _tokens("--sweep"), "sweep") or DEFAULT_SWEEP,
                             optional(_size, dram, "--dram"))


# --- pd --------------------------------------------------------------------------------------------------------
def pd_options(*, tpot_slo: Any = "50ms", nic_gbps: Any = None, prefill_gpus: Any = None, handover_ms: Any = None,
               chunked: bool = True, hbm_efficiency: Any = None, mfu: Any = None) -> PdOptions:
    """``kvplan pd``'s options."""
    from kvplan.calc.pd import PdOptions

    handover = parse_float(handover_ms, "--handover-ms", "2") / 1000 if handover_ms is not None else None
    if handover is not None and not 0 <= handover <= 3600:
        raise InputError(f"--handover-ms {handover_ms!r} is not a time in [0, 3,600,000] ms",
                         "give --handover-ms as the per-request handover in milliseconds, e.g. 2")
    return PdOptions(
        tpot_slo=parse_seconds(tpot_slo, "tpot-slo"), nic_gbps=optional(parse_link_gbs, nic_gbps, "--nic-gbps"),
        prefill_gpus=optional(parse_degree, prefill_gpus, "prefill-gpus"), chunked=chunked,
        factors={k: v for k, v in {"hbm": optional(parse_fraction, hbm_efficiency, "hbm-efficiency"),
                                   "mfu": optional(parse_fraction, mfu, "mfu")}.items() if v is not None},
        **({"handover_seconds": handover} if handover is not None else {}))


# --- recommend -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecommendRequest:
    scenario: Scenario
    options: RecommendOptions
    emit: str | None = None                     # the engine whose launch command to print
    target: str | None = None                   # --target as given, and parsed (for the layout search)
    targets: tuple[Target, ...] | None = None
    candidates: tuple[HardwareSpec, ...] = ()   # the GPUs the search tries (--candidates, else every GPU preset)
    notes: tuple[str, ...] = ()


def recommend_request(scenario: dict[str, Any], *, tpot_slo: Any = "50ms", dram: Any = None, nic_gbps: Any = None,
                      target: str | None = None, candidates: str | None = None, emit: str | None = None,
                      presets_dir: str | Path | None = None) -> RecommendRequest:
    """``kvplan recommend``'s options. ``emit`` with the neutral engine plans with that engine's own accounting
    (said in a note); with another engine it is refused."""
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
    built = build_scenario(**scenario)
    options = RecommendOptions(tpot_slo=parse_seconds(tpot_slo, "tpot-slo"),
                               dram_bytes_per_node=optional(_size, dram, "--dram"),
                               nic_gbps=optional(parse_link_gbs, nic_gbps, "--nic-gbps"))
    if target is None:
        return RecommendRequest(built, options, wanted, notes=notes)
    from kvplan.calc.sizing import parse_target
    from kvplan.inputs.presets import discover, load_hardware

    targets = tuple(parse_target(t) for t in target.split(",") if t.strip())
    if not targets:
        raise InputError("--target is empty", "give --target concurrency>=64@31k (or tpot<=40ms, rate>=2rps)")
    if len({t.metric for t in targets}) < len(targets):
        raise InputError(f"--target {target!r} names a metric twice", "give each of concurrency, tpot, rate once")
    dirs = extra_dirs(presets_dir)
    ids = ([c.strip() for c in candidates.split(",") if c.strip()] if candidates is not None
           else sorted(discover(dirs)["hardware"]))
    if not ids:
        raise InputError("--candidates is empty", "give GPU preset ids, e.g. --candidates h100-sxm,h200")
    specs = tuple(load_hardware(i, dirs) for i in dict.fromkeys(ids))   # each GPU once
    return RecommendRequest(built, options, wanted, target, targets, specs, notes)
