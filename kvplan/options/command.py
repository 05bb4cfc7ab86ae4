"""Each command's own options (beyond the scenario) -> the calculator's options, checked here for the command line
and Python alike: ``concurrency_options(batch="8", tpot="50ms", contexts="1k,8k")`` takes text or numbers and
refuses what ``kvplan concurrency --batch ...`` refuses with the same message. simulate's are
``kvplan.options.simulate``; the scenario's ``kvplan.inputs.request``.

Layer: the calculators' option classes (``kvplan.calc.*``) are imported inside each function.
"""

from __future__ import annotations

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
    parse_seconds,
)

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.concurrency import ConcurrencyOptions
    from kvplan.calc.pd import PdOptions
    from kvplan.scenario import Scenario
    from kvplan.specs.model import ModelSpec

# size's side-by-side model when --model is not given: the workload document's GQA worked example
SEED_COMPARE = "deepseek-r1-seed-gqa"


def as_scenario(scenario: Scenario | dict[str, Any], **extra: Any) -> Scenario:
    """A ``Scenario``, or the one the scenario options (text, ``build_scenario``'s keywords) describe."""
    from kvplan.options.scenarios import build_scenario

    if isinstance(scenario, dict):
        return build_scenario(**scenario, **extra)
    given = {k: v for k, v in extra.items() if v is not None}
    return scenario.with_(**given) if given else scenario


def tokens_parser(flag: str, allow_zero: bool = False):
    from kvplan.inputs.units import parse_tokens

    return lambda value: parse_tokens(value, flag, allow_zero)


def speculative(built: Scenario, speculative: str, accept: str | None,
                spec_tokens: Any = None) -> tuple[Scenario, int, str, str | None]:
    """``--speculative mtp[:K]`` with an optional ``--accept`` (``tpot`` and ``simulate`` share it): (the scenario
    with the model's MTP layers counted, K, the acceptance text, its published source; None when ``--accept`` was
    given), refused for a model without DeepSeek's MTP head or with ``--spec-tokens``."""
    from kvplan.calc.tpot import parse_speculative

    if spec_tokens is not None:
        raise InputError("--speculative and --spec-tokens both given",
                         "give --speculative mtp:K, or --spec-tokens K with --accept A")
    k, published, source, method = parse_speculative(speculative)
    if built.draft is not None and accept is None:
        # the published acceptance lengths are the named head's (DeepSeek's MTP, Llama-3.1-8B's EAGLE-3), not
        # those of another drafter: applying them to --draft-model's would price a figure nobody measured
        raise InputError(f"--speculative {speculative.strip()}: its published acceptance is "
                         f"{'the EAGLE-3 head' if method == 'eagle3' else 'the MTP head'}'s, not --draft-model "
                         f"{built.draft.id}'s", f"give --accept A measured for {built.draft.id}, or drop "
                                                "--draft-model")
    if method == "eagle3":
        from kvplan.calc.tpot import EAGLE3_TARGETS

        if built.model.id not in EAGLE3_TARGETS:
            targets = ", ".join(EAGLE3_TARGETS)
            raise InputError(f"--speculative eagle3: the published acceptance lengths are {targets}'s EAGLE-3 head, "
                             f"not {built.model.id}'s",
                             f"give --spec-tokens {k} with --mtp-layers 1 (or --draft-model ID) and --accept A")
        # the EAGLE-3 head is one decoder layer of the target's shape (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's config:
        # 1 layer, hidden 4,096, 32 / 8 heads, intermediate 14,336): priced and pooled as one MTP layer
        if not built.mtp_layers and not built.draft:
            built = built.with_(mtp_layers=1)
        return (built, k, f"{published:g}", source) if accept is None else (built, k, accept, None)
    if not built.model.mtp_layers or not built.model.id.startswith("deepseek-"):
        raise InputError(f"--speculative mtp: the published acceptance lengths are DeepSeek-V3/R1's MTP head, "
                         f"and {built.model.id} is not a DeepSeek model with MTP layers",
                         f"give --spec-tokens {k} with --mtp-layers 1 (or --draft-model ID) and --accept A")
    if not built.mtp_layers and not built.draft:
        built = built.with_(mtp_layers=built.model.mtp_layers)
    if accept is None:
        return built, k, f"{published:g}", source
    return built, k, accept, None   # the user's --accept, not the published figure


def size_bytes(value: Any, flag: str) -> int:
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
    built = as_scenario(scenario)
    if include_mtp:
        if not built.model.mtp_layers:   # it would add nothing: said, not ignored
            raise InputError(f"--include-mtp: {built.model.id} ships no MTP layers",
                             "drop --include-mtp, or give --mtp-layers N for a what-if")
        built = built.with_(mtp_layers=built.model.mtp_layers)
    default = SEED_COMPARE if args is not None and args.get("model") is None else None
    ref = compare if compare is not None else default
    other = load_model(str(ref), extra_dirs(presets_dir)) if ref is not None else None
    if compare is not None and other == built.model:    # the same spec: a side-by-side table of one model twice
        raise InputError(f"--compare {compare} is the model sized (--model {built.model.id}): a model compared "
                         "with itself", "give --compare another model (kvplan presets list), or drop --compare")
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
        dram_bytes_per_node=optional(size_bytes, dram, "--dram"),
        ssd_bytes_per_node=optional(size_bytes, ssd, "--ssd"),
        contexts=parse_contexts(contexts),
        dtypes=optional(parse_list, dtypes, parse_kv_dtype, "dtypes"),
        pool_origin=pool_origin,
    )


# --- tpot ------------------------------------------------------------------------------------------------------
def pd_options(*, tpot_slo: Any = "50ms", ttft_slo: Any = None, slo_percentile: Any = None, slo_attainment: Any = None,
               nic_gbps: Any = None, prefill_gpus: Any = None, handover_ms: Any = None, chunked: bool = True,
               hbm_efficiency: Any = None, mfu: Any = None, prefill_gpu: Any = None,
               decode_gpu: Any = None) -> PdOptions:
    """``kvplan pd``'s options: the SLO model's targets (``--tpot-slo`` and ``--ttft-slo`` at ``--slo-percentile``,
    ``--slo-attainment``; kvplan.calc.slo) and the disaggregation's own."""
    from kvplan.calc.pd import DEFAULT_HANDOVER_SECONDS, PdOptions
    from kvplan.calc.slo import parse_targets

    handover = parse_float(handover_ms, "--handover-ms", "2") / 1000 if handover_ms is not None else None
    if handover is not None and not 0 <= handover <= 3600:
        raise InputError(f"--handover-ms {handover_ms!r} is not a time in [0, 3,600,000] ms",
                         "give --handover-ms as the per-request handover in milliseconds, e.g. 2")
    targets = parse_targets(ttft=ttft_slo, tpot=tpot_slo, percentile=slo_percentile, attainment=slo_attainment)
    return PdOptions(
        tpot_slo=parse_seconds(tpot_slo, "tpot-slo") if targets.tpot is None else targets.tpot, targets=targets,
        nic_gbps=optional(parse_link_gbs, nic_gbps, "--nic-gbps"),
        prefill_gpus=optional(parse_degree, prefill_gpus, "prefill-gpus"), chunked=chunked,
        factors={k: v for k, v in {"hbm": optional(parse_fraction, hbm_efficiency, "hbm-efficiency"),
                                   "mfu": optional(parse_fraction, mfu, "mfu")}.items() if v is not None},
        handover_seconds=handover if handover is not None else DEFAULT_HANDOVER_SECONDS,
        prefill_hardware=str(prefill_gpu).strip() or None if prefill_gpu is not None else None,
        decode_hardware=str(decode_gpu).strip() or None if decode_gpu is not None else None)


# --- recommend -------------------------------------------------------------------------------------------------
