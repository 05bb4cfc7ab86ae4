"""`kvplan tpot`: time per output token over a growing decode, TTFT, a batch x context table, speculative
decoding, and calibration to measured points."""

from pathlib import Path
from typing import Annotated

import typer

from kvplan.commands.common import AcceptOpt, SpeculativeOpt, scenario_command
from kvplan.commands.output import check_output_options, emit


@scenario_command(memory=("gpu_memory_utilization", "mem_fraction_static", "kv_pool", "max_num_batched_tokens",
                          "max_num_seqs"), unused=("host_link_gbs",))
def tpot(
    scenario_args: dict,
    output: dict,
    batch: Annotated[str, typer.Option("--batch", metavar="N", help="Requests decoding together (default 8).")] = "8",
    shape: Annotated[str, typer.Option("--shape", metavar="SHAPE", help="steady (continuous batching: contexts "
                                       "spread over the decode; default) or cohort (all start together).")] = "steady",
    batches: Annotated[str | None, typer.Option("--batches", metavar="LIST", help="Batch sizes for the table "
                                                "(default 1,2,4,...,256, up to what the pool holds).")] = None,
    contexts: Annotated[str, typer.Option("--contexts", metavar="LIST", help="Contexts for the table.")
                        ] = "1Ki,8Ki,32Ki,64Ki,128Ki",
    hbm_efficiency: Annotated[str | None, typer.Option(
        "--hbm-efficiency", metavar="FRACTION", help="Achievable fraction of HBM bandwidth (default: the GPU "
                                                     "preset's).")] = None,
    mfu: Annotated[str | None, typer.Option("--mfu", metavar="FRACTION", help="Achievable fraction of the dense peak "
                                            "in decode GEMMs (default: the GPU preset's).")] = None,
    prefill_mfu: Annotated[str | None, typer.Option("--prefill-mfu", metavar="FRACTION",
                                                    help="The same for prefill (TTFT).")] = None,
    overhead_us: Annotated[str | None, typer.Option("--overhead-us", metavar="US", help="Fixed overhead per layer "
                                                    "per step, microseconds.")] = None,
    step_overhead_us: Annotated[str | None, typer.Option("--step-overhead-us", metavar="US", help="Fixed overhead "
                                                         "per step (scheduling, sampling), microseconds.")] = None,
    moe_overhead_us: Annotated[str | None, typer.Option("--moe-overhead-us", metavar="US", help="Fixed overhead "
                                                        "per MoE layer per step (routing, permutation).")] = None,
    gemm_floor_us: Annotated[str | None, typer.Option("--gemm-floor-us", metavar="US", help="The least one "
                                                      "decode GEMM takes (default: the GPU preset's).")] = None,
    upcast_moe_us: Annotated[str | None, typer.Option("--upcast-moe-us", metavar="US", help="Fixed latency per "
                                                      "MoE layer of experts upcast in-kernel (MXFP4 on Hopper: "
                                                      "the GPU preset's; 0 for vLLM's Marlin path).")] = None,
    request_overhead_us: Annotated[str | None, typer.Option("--request-overhead-us", metavar="US", help="Overhead "
                                                            "per request per step (scheduling, sampling, outputs)."
                                                            )] = None,
    allreduce_latency_us: Annotated[str | None, typer.Option("--allreduce-latency-us", metavar="US", help="Latency "
                                                             "of one decode TP all-reduce (in-graph, custom kernel)."
                                                             )] = None,
    spec_tokens: Annotated[str | None, typer.Option("--spec-tokens", metavar="K", help="Draft tokens per verify step "
                                                    "(with --mtp-layers or --draft-model).")] = None,
    draft_model: Annotated[str | None, typer.Option("--draft-model", metavar="ID|FILE",
                                                    help="A draft model for speculative decoding.")] = None,
    speculative: SpeculativeOpt = None,
    accept: AcceptOpt = None,
    measured: Annotated[Path | None, typer.Option("--measured", metavar="FILE", help="CSV or JSON of measured "
                                                  "points (batch, context, tpot_ms or itl_ms): fit the factors.")
                        ] = None,
    save_calibration: Annotated[Path | None, typer.Option("--save-calibration", metavar="FILE.toml", help="Write "
                                                          "the fitted factors as a hardware preset (-g FILE.toml).")
                                ] = None,
    plot: Annotated[Path | None, typer.Option("--plot", metavar="FILE.png",
                                              help="Write TPOT against context per batch to a PNG.")] = None,
) -> None:
    """TPOT over a growing decode (start, middle, end, mean), TTFT, tokens/s, and where the step's time goes."""
    from kvplan.calc.tpot import plan_tpot
    from kvplan.options.tpot import tpot_request
    from kvplan.present.tpot import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    factors = {"hbm": hbm_efficiency, "mfu": mfu, "prefill_mfu": prefill_mfu, "overhead_us_per_layer": overhead_us,
               "overhead_us_per_step": step_overhead_us, "overhead_us_per_moe_layer": moe_overhead_us,
               "overhead_us_per_request": request_overhead_us, "gemm_floor_us": gemm_floor_us,
               "allreduce_latency_us": allreduce_latency_us, "upcast_moe_us": upcast_moe_us}
    request = tpot_request(scenario_args, batch=batch, shape=shape, batches=batches, contexts=contexts,
                           factors=factors, spec_tokens=spec_tokens, draft_model=draft_model, accept=accept,
                           measured=measured, save_calibration=save_calibration, speculative=speculative)
    scenario, calibration = request.scenario, request.calibration
    plan = plan_tpot(scenario, request.options)
    result = present(plan, _calibration_view(calibration) if calibration else None)
    if save_calibration is not None:
        _save_calibration(scenario, calibration, save_calibration)
    if plot is not None:
        from kvplan.present.tpot import chart
        from kvplan.render.plot import write_chart_png

        write_chart_png(chart(plan), plot, result.headline)
    emit(result, fmt, output["explain"], output["units"], output["brief"])


def _calibration_view(cal):
    from types import SimpleNamespace

    from kvplan.specs.values import Fraction, Number, Seconds, Tokens, derived, given

    rows = tuple((p.batch, Tokens(p.context, given("--measured")),
                  Seconds(p.tpot_seconds, derived("measured", cal.source)),
                  Seconds(pred, derived("the fitted step model", f"{pred:.6g} s")),
                  Fraction((pred - p.tpot_seconds) / p.tpot_seconds, derived(
                      "(predicted - measured) / measured",
                      f"({pred:.6g} - {p.tpot_seconds:.6g}) / {p.tpot_seconds:.6g}")))
                 for p, pred in zip(cal.points, cal.predicted, strict=True))
    data = {"points": [{"batch": Number(p.batch, given("--measured")),
                        "context_tokens": Tokens(p.context, given("--measured")),
                        "measured_tpot_seconds": Seconds(p.tpot_seconds, derived("measured", cal.source)),
                        "predicted_tpot_seconds": Seconds(pred, derived("the fitted step model", f"{pred:.6g} s"))}
                       for p, pred in zip(cal.points, cal.predicted, strict=True)],
            "fitted": {"hbm": Number(cal.hbm, derived("least squares over the points", f"{cal.hbm:.4f}")),
                       "mfu": Number(cal.mfu, derived("least squares over the points", f"{cal.mfu:.4f}")),
                       "overhead_us_per_step": Number(cal.overhead_us_per_step, derived(
                           "least squares over the points", f"{cal.overhead_us_per_step:.1f}"))},
            "rms_relative_error": Number(cal.rms_relative_error, derived("sqrt(mean(((pred - meas) / meas)^2))",
                                                                         f"{cal.rms_relative_error:.4f}")),
            "iterations": Number(cal.iterations, derived("assign-and-solve rounds until stable", f"{cal.iterations}"))}
    note = (f"Calibrated to {len(cal.points)} measured point(s) in {cal.source}: hbm {cal.hbm:.3f}, mfu {cal.mfu:.3f}, "
            f"per-step overhead {cal.overhead_us_per_step:,.0f} us; rms error {cal.rms_relative_error:.1%}.")
    return SimpleNamespace(source=cal.source, rows=rows, data=data, note=note)


def _save_calibration(scenario, cal, path: Path) -> None:
    """The GPU's preset with the fitted [efficiency], as a new preset a later run loads with -g FILE.toml."""
    from kvplan.errors import KvplanError
    from kvplan.inputs.preset_writer import hardware_toml

    text = hardware_toml(scenario.hardware, {
        "hbm": cal.hbm, "mfu": cal.mfu, "overhead_us_per_step": cal.overhead_us_per_step},
        f"fitted by kvplan tpot --measured {cal.source} ({len(cal.points)} points, rms {cal.rms_relative_error:.1%})")
    if path.suffix != ".toml":
        raise KvplanError(f"--save-calibration {path} is not a .toml file", "give a file name ending in .toml")
    from kvplan.inputs.files import check_writable

    check_writable(path, "--save-calibration")
    try:
        path.write_text(text)
    except OSError as err:
        raise KvplanError(f"cannot write {path}: {err.strerror}", "check the folder exists and is writable") from None


def register(app: typer.Typer) -> None:
    app.command("tpot", short_help="Time per output token over a long decode.")(tpot)
