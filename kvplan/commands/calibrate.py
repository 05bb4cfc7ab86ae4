"""`kvplan calibrate FILE...`: compare kvplan's figures with what the user's own runs measured (a start-up log,
vllm bench serve / SGLang bench_serving results, a /metrics scrape), fit the step factors and the memory reserve to
them, and write a calibration file every planning command takes (--calibration FILE)."""

from pathlib import Path
from typing import Annotated

import typer

from kvplan.commands.common import scenario_command
from kvplan.commands.output import check_output_options, emit

FilesArg = Annotated[list[Path], typer.Argument(
    metavar="FILE", help="Start-up logs, vllm bench serve --save-result JSON, SGLang bench_serving JSONL, and "
                            "/metrics scrapes, each recognised by its content.")]


@scenario_command(memory=("gpu_memory_utilization", "mem_fraction_static", "max_num_batched_tokens", "max_num_seqs",
                          "activation_reserve", "runtime_reserve"), calibration=False,
                  unused=("host_link_gbs", "block_size"))
def calibrate(
    scenario_args: dict,
    output: dict,
    files: FilesArg,
    save: Annotated[Path | None, typer.Option("--save", metavar="FILE.toml", help="Write the fitted values, their "
                                              "residuals and the inputs (every command takes it: --calibration)."
                                              )] = None,
) -> None:
    """Compare kvplan with your measured runs, fit the step factors and memory reserve, write a calibration."""
    from kvplan.options.calibrate import calibrate_request, plan
    from kvplan.options.calibrate import save as save_file
    from kvplan.present.calibrate import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    request = calibrate_request(scenario_args, files)
    p = plan(request)
    if save is not None:
        save_file(p, save)
    emit(present(p, request.notes, request.warnings), fmt, output["explain"], output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("calibrate", short_help="Fit kvplan to your own runs (logs, bench results, /metrics).")(calibrate)
