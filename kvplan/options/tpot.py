"""``kvplan tpot``'s own options (the step-model factors, the batch and context grid, speculative decoding, a
calibration) -> ``TpotRequest``; a module of its own so that other commands do not build its class at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError
from kvplan.inputs.options import (
    DEFAULT_CONTEXTS_TEXT,
    optional,
    parse_contexts,
    parse_fraction,
    parse_list,
    parse_microseconds,
)
from kvplan.options.command import as_scenario, tokens_parser
from kvplan.options.command import speculative as speculative_option

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.calibrate import Calibration
    from kvplan.calc.tpot import TpotOptions
    from kvplan.scenario import Scenario


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
    "upcast_moe_us": ("--upcast-moe-us", False),
    "allreduce_latency_us": ("--allreduce-latency-us", False),
}


def tpot_request(scenario: Scenario | dict[str, Any], *, batch: Any = "8", shape: str = "steady",
                 batches: Any = None, contexts: Any = DEFAULT_CONTEXTS_TEXT, factors: dict[str, Any] | None = None,
                 spec_tokens: Any = None, draft_model: Any = None, accept: str | None = None,
                 measured: str | Path | None = None, save_calibration: str | Path | None = None,
                 speculative: str | None = None) -> TpotRequest:
    """``kvplan tpot``'s options: ``factors`` by ``FACTOR_FLAGS`` key (hbm, mfu, overhead_us_per_layer, ...; text
    or numbers); with ``measured`` points, the factors not given are fitted to them (``kvplan.calc.calibrate``)."""
    from kvplan.calc.tpot import TpotOptions, parse_accept
    from kvplan.inputs.units import parse_tokens

    if save_calibration is not None and measured is None:
        raise InputError("--save-calibration needs --measured", "give the measured points to fit")
    built = as_scenario(scenario, draft_model=draft_model)
    given = factors or {}
    unknown = [k for k in given if k not in FACTOR_FLAGS]
    if unknown:
        raise InputError(f"unknown step-model factor {unknown[0]!r}", "give one of " + ", ".join(FACTOR_FLAGS))
    parsed = {key: optional(parse_fraction if fraction else parse_microseconds, given.get(key), flag)
              for key, (flag, fraction) in FACTOR_FLAGS.items()}
    k = parse_tokens(spec_tokens, "--spec-tokens", allow_zero=True) if spec_tokens is not None else 0
    accept_source = None
    if speculative is not None:   # a method with published acceptance: its draft tokens, its acceptance, MTP layers
        built, k, accept, accept_source = speculative_option(built, speculative, accept, spec_tokens)
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
        batches=optional(parse_list, batches, tokens_parser("--batches"), "batches") or TpotOptions.batches,
        contexts=parse_contexts(contexts), spec_tokens=k, accept=parse_accept(accept) if accept is not None else None,
        factors={k_: v for k_, v in parsed.items() if v is not None}, accept_source=accept_source)
    seqs = built.max_num_seqs
    if seqs is not None and options.batch > seqs:   # the engine runs at most max_num_seqs requests at once
        raise InputError(f"--batch {options.batch:,} is more than --max-num-seqs {seqs:,}, the most requests the "
                         "engine runs at once", f"give --batch {seqs:,} or less, or a larger --max-num-seqs")
    return TpotRequest(built, options, calibration)


# --- compare-preemption ----------------------------------------------------------------------------------------
