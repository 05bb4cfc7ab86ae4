"""`kvplan size`: bytes per token, by layer kind, at a set of contexts, and the peak per request."""

from typing import Annotated

import typer

from kvplan.commands.common import ContextsOpt, scenario_command
from kvplan.commands.output import check_output_options, emit
from kvplan.inputs.options import DEFAULT_CONTEXTS_TEXT


@scenario_command(unused=("host_link_gbs", "block_size", "weights", "weight_dtype", "calibration"))
def size(
    scenario_args: dict,
    output: dict,
    include_mtp: Annotated[bool, typer.Option("--include-mtp", hidden=True,
                                              help="Same as --mtp-layers with the checkpoint's own count.")] = False,
    contexts: ContextsOpt = DEFAULT_CONTEXTS_TEXT,
    compare: Annotated[str | None, typer.Option("--compare", metavar="ID|FILE",
                                                help="Another model to show side by side (default: the workload "
                                                     "document's GQA worked example, when --model is not given).")
                       ] = None,
) -> None:
    """Bytes per token, KV per request at each context, and the peak per request, whole model and per GPU."""
    from kvplan.calc.size import plan_size
    from kvplan.options.command import size_request
    from kvplan.present.size import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    scenario, tabulated, other = size_request(scenario_args, contexts=contexts, compare=compare,
                                              include_mtp=include_mtp, presets_dir=output["presets_dir"])
    emit(present(plan_size(scenario, tabulated, other)), fmt, output["explain"], output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("size")(size)
