"""`kvplan size`: bytes per token, by layer kind, at a set of contexts, and the peak per request."""

from typing import Annotated

import typer

from kvplan.commands.common import ContextsOpt, scenario_command
from kvplan.commands.output import check_output_options, emit
from kvplan.inputs.options import DEFAULT_CONTEXTS_TEXT, extra_dirs, parse_contexts
from kvplan.inputs.request import build_scenario

SEED_COMPARE = "deepseek-r1-seed-gqa"


@scenario_command()
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
    from kvplan.errors import KvplanError
    from kvplan.inputs.presets import load_model
    from kvplan.present.size import present

    fmt = check_output_options(output["fmt"], output["units"], output["brief"])
    if include_mtp and scenario_args["mtp_layers"] is not None:
        raise KvplanError("--include-mtp and --mtp-layers both given", "give only --mtp-layers N")
    scenario = build_scenario(**scenario_args)
    if include_mtp:
        scenario = scenario.with_(mtp_layers=scenario.model.mtp_layers)
    model = scenario_args["model"]
    compare_ref = compare if compare is not None else (SEED_COMPARE if model is None else None)
    other = load_model(compare_ref, extra_dirs(output["presets_dir"])) if compare_ref is not None else None
    plan = plan_size(scenario, parse_contexts(contexts), other)
    emit(present(plan), fmt, output["explain"], output["units"], output["brief"])


def register(app: typer.Typer) -> None:
    app.command("size")(size)
