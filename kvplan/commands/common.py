"""Options shared by the commands, declared once, and the one place that turns them into a ``Scenario``.

Every option is a typer ``Annotated`` alias taking text; kvplan parses the text itself (``kvplan.inputs.units``,
the parsers below) so that bad input is one line naming the problem and a fix, exit 2. Defaults are the
scenario's (``kvplan.scenario``) and are the same in every command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.errors import KvplanError

# --- the deployment and the request (every command) ------------------------------------------------------------
ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", metavar="ID|FILE",
    help="Preset id, preset .toml, HF config.json, model directory, or a Hugging Face id org/name[@revision] "
         "(needs kvplan[hub]; the local HF cache first; a path or preset id wins). Default: deepseek-r1, the workload "
         "document's model (reasoning / long chain-of-thought serving: 1K prompt, 30K decode).")]
HardwareOpt = Annotated[str, typer.Option("--hardware", "-g", "--gpu", metavar="ID|FILE",
                                          help="GPU preset id or .toml (default h200).")]
NodesOpt = Annotated[str, typer.Option("--nodes", metavar="N", help="Nodes, each with the preset's GPUs per node.")]
GpusOpt = Annotated[str | None, typer.Option("--gpus", metavar="N",
                                                help="Plan N GPUs (default: every GPU of the nodes).")]
TpOpt = Annotated[str | None, typer.Option("--tp", metavar="N", help="Tensor parallel degree (default: every GPU "
                                              "of one node, or the largest power of two the model allows).")]
PpOpt = Annotated[str, typer.Option("--pp", metavar="N", help="Pipeline stages (default 1).")]
DpOpt = Annotated[str | None, typer.Option("--dp", metavar="N", help="Data-parallel replicas / attention-DP ranks "
                                              "(default: as many as fill the GPUs; the first line says so).")]
EpOpt = Annotated[str | None, typer.Option("--ep", metavar="N", help="Expert-parallel degree for MoE weights.")]
KvDtypeOpt = Annotated[str, typer.Option(
    "--kv-dtype", metavar="DTYPE",
    help="auto (the engines' default: the model's activation dtype, bf16), bf16, fp16, fp8, fp8_per_token_head, "
         "int8_per_token_head, nvfp4, fp8_ds_mla. Aliases: bfloat16; float16, half; fp8_e4m3, fp8_e5m2 (= fp8); "
         "fp4 (= nvfp4).")]
WeightDtypeOpt = Annotated[str | None, typer.Option(
    "--weight-dtype", metavar="DTYPE", help="Weights as params x this dtype instead of the checkpoint's bytes "
                                            "(bf16, fp8, int8, mxfp4, nvfp4, int4).")]
WeightsOpt = Annotated[str | None, typer.Option(
    "--weights", metavar="SIZE", help="The model's total weight bytes (all GPUs), e.g. 642GB, instead of the "
                                      "checkpoint's; split over TP/PP/EP like the checkpoint.")]
EngineOpt = Annotated[str, typer.Option("--engine", metavar="NAME",
                                        help="Accounting: neutral (default), vllm or sglang.")]
PromptOpt = Annotated[str, typer.Option("--prompt", metavar="TOKENS", help="Prompt tokens (1k = 1,000; 128Ki = "
                                        "131,072). Default 1k.")]
DecodeOpt = Annotated[str, typer.Option("--decode", metavar="TOKENS", help="Decode (generated) tokens. Default 30k.")]
MtpLayersOpt = Annotated[str | None, typer.Option(
    "--mtp-layers", metavar="N", help="MTP draft layers counted in the same pool (DeepSeek-R1 ships 1; default 0).")]
MaxModelLenOpt = Annotated[str | None, typer.Option(
    "--max-model-len", "--context-length", metavar="TOKENS",
    help="The engine's longest request (vLLM --max-model-len, SGLang --context-length); default: the model's "
         "max_position_embeddings.")]
BlockSizeOpt = Annotated[str | None, typer.Option(
    "--block-size", "--block-tokens", "--page-size", metavar="TOKENS",
    help="Tokens per KV block / page (default: the engine's choice for the model's layer kinds).")]
HostLinkOpt = Annotated[str | None, typer.Option(
    "--host-link-gbs", "--pcie-gbps", metavar="GB/S",
    help="Effective host-link rate per direction in GB/s (10^9 B/s), e.g. 50 or 50GB/s (default: the preset's "
         "line rate x large-copy efficiency).")]

# --- memory settings (commands that size the pool) -------------------------------------------------------------
GpuMemUtilOpt = Annotated[str | None, typer.Option(
    "--gpu-memory-utilization", metavar="FRACTION",
    help="vLLM's fraction of total HBM (default 0.92; 0.9 before v0.20).")]
MemFractionOpt = Annotated[str | None, typer.Option(
    "--mem-fraction-static", metavar="FRACTION", help="SGLang's fraction (default: SGLang's bucket by GPU size).")]
KvPoolOpt = Annotated[str | None, typer.Option(
    "--kv-pool", metavar="SIZE", help="Plan from a known KV pool per GPU, e.g. 52.36GiB (vLLM's 'Available KV "
                                      "cache memory').")]
MaxBatchedOpt = Annotated[str | None, typer.Option(
    "--max-num-batched-tokens", metavar="TOKENS", help="vLLM's token budget per step (default 8192 on >= 70 GiB "
                                                       "GPUs other than A100, else 2048).")]
MaxSeqsOpt = Annotated[str | None, typer.Option(
    "--max-num-seqs", metavar="N", help="Most requests running at once (vLLM default 1024 on >= 70 GiB GPUs other "
                                        "than A100, else 256).")]
ActivationOpt = Annotated[str | None, typer.Option(
    "--activation-reserve", metavar="SIZE", help="Activation reserve per GPU, e.g. 2GiB (default: estimate).")]
RuntimeOpt = Annotated[str | None, typer.Option("--runtime-reserve", metavar="SIZE",
                                                   help="CUDA-graph and runtime reserve per GPU (default 1GiB).")]
DramOpt = Annotated[str | None, typer.Option("--dram", metavar="SIZE",
                                                help="Host DRAM per node for offloaded KV, e.g. 1TB (default: the "
                                                     "node's DRAM).")]

# --- output ----------------------------------------------------------------------------------------------------
FormatOpt = Annotated[str, typer.Option("--format", "-f", metavar="FORMAT", help="table, json, csv or markdown.")]
ExplainOpt = Annotated[bool, typer.Option("--explain", help="Show how each figure was derived, with sources.")]
BriefOpt = Annotated[bool, typer.Option("--brief", help="Print only the first line and the headline figures.")]
TpotSloOpt = Annotated[str, typer.Option("--tpot-slo", metavar="TIME", help="TPOT service level, e.g. 50ms (default "
                                         "50ms: DeepSeek's production 20 tokens/s per user).")]
UnitsOpt = Annotated[str, typer.Option("--units", metavar="SYSTEM",
                                       help="iec (KiB, MiB, GiB) or si (kB, MB, GB) for sizes.")]
ContextsOpt = Annotated[str, typer.Option("--contexts", metavar="LIST",
                                          help="Comma-separated context lengths to tabulate.")]
PresetsDirOpt = Annotated[Path | None, typer.Option(
    "--presets-dir", metavar="DIR", help="Folder of your own preset TOML files (also $KVPLAN_PRESETS_DIR).")]

DEFAULT_CONTEXTS_TEXT = "1Ki,8Ki,32Ki,64Ki,128Ki"


# --- parsers ---------------------------------------------------------------------------------------------------
def parse_degree(text: str, name: str) -> int:
    from kvplan.specs.parallel import MAX_DEGREE

    try:
        value = int(text.strip())
    except ValueError:
        raise KvplanError(f"--{name} {text!r} is not a whole number", f"give --{name} as 1, 2, 4, 8, ...") from None
    if value < 1 or value > MAX_DEGREE:
        raise KvplanError(f"--{name} {value} is out of range", f"give --{name} between 1 and {MAX_DEGREE}")
    return value


def check_format(fmt: str) -> str:
    from kvplan.render.output import FORMATS

    if fmt not in FORMATS:
        raise KvplanError(f"unknown format {fmt!r}", "choose one of " + ", ".join(FORMATS))
    return fmt


def extra_dirs(presets_dir: Path | None) -> list[Path]:
    return [presets_dir] if presets_dir else []


def parse_fraction(text: str, name: str, allow_one: bool = True) -> float:
    try:
        value = float(text)
    except ValueError:
        raise KvplanError(f"--{name} {text!r} is not a number", f"give --{name} as a fraction such as 0.9") from None
    if not (0 < value < 1 or (allow_one and value == 1)):
        raise KvplanError(f"--{name} {text!r} is not in (0, 1{']' if allow_one else ')'}",
                          f"give --{name} as a fraction such as 0.9")
    return value


def parse_float(text: str, flag: str, example: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise KvplanError(f"{flag} {text!r} is not a number", f"give {flag} like {example}") from None
    if not math.isfinite(value):
        raise KvplanError(f"{flag} {text!r} is not a finite number", f"give {flag} like {example}")
    return value


def parse_seconds(text: str, name: str) -> float:
    """A duration with its unit: 50ms, 0.05s."""
    import math
    import re

    m = re.fullmatch(r"\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ms|s|us)\s*", text)
    if not m:
        raise KvplanError(f"--{name} {text!r} needs a unit", f"write --{name} like 50ms or 0.05s")
    value = float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[m.group(2)]
    if not math.isfinite(value) or not 1e-6 <= value <= 3600:
        raise KvplanError(f"--{name} {text!r} is out of range", f"give --{name} between 1us and 3600s")
    return value


def parse_link_gbs(text: str, flag: str = "--host-link-gbs") -> float:
    """Effective per-direction GB/s: a plain number (GB/s, 10^9 B/s) or a rate with its unit (50GB/s)."""
    import math

    from kvplan.inputs.units import parse_rate

    try:
        value = float(text)
    except ValueError:
        return parse_rate(text, flag) / 1e9
    if not (value > 0 and math.isfinite(value)):
        raise KvplanError(f"{flag} {text!r} must be a positive number of GB/s", "give it like 50 or 50GB/s")
    return value


def optional(parse, value, *args, **kwargs):
    """``parse(value, ...)`` for an option that was given, None for one that was not."""
    return None if value is None else parse(value, *args, **kwargs)


def parse_list(text: str, parse, name: str) -> tuple:
    """A comma-separated option (``--contexts 1k,8k``), each item parsed; an empty list is an error."""
    items = tuple(parse(item) for item in text.split(",") if item.strip())
    if not items:
        raise KvplanError(f"--{name} {text!r} lists nothing", f"give --{name} as a comma-separated list")
    return items


def check_units(units: str) -> str:
    if units not in ("iec", "si"):
        raise KvplanError(f"unknown unit system {units!r}", "choose iec (GiB) or si (GB)")
    return units


def parse_contexts(text: str) -> tuple[int, ...]:
    from kvplan.inputs.units import parse_tokens

    return parse_list(text, lambda c: parse_tokens(c, "--contexts"), "contexts")


def build_scenario(*, model: str | None, hardware: str, nodes: str, gpus: str | None, tp: str | None, pp: str,
                   dp: str | None, ep: str | None, kv_dtype: str, weight_dtype: str | None, engine: str, prompt: str,
                   decode: str, mtp_layers: str | None, max_model_len: str | None, block_size: str | None,
                   host_link_gbs: str | None, presets_dir: Path | None, decode_flag: str = "--decode",
                   weights: str | None = None, **settings):
    """The scenario the options describe. ``settings``: memory and pool options as text (None when not given)."""
    from kvplan.inputs.presets import load_hardware, load_model
    from kvplan.inputs.units import parse_size, parse_tokens
    from kvplan.scenario import SEED_MODEL, Scenario

    dirs = extra_dirs(presets_dir)
    spec = load_model(SEED_MODEL if model is None else model, dirs)
    sizes = {"kv_pool": "kv_pool_bytes", "activation_reserve": "activation_reserve_bytes",
             "runtime_reserve": "runtime_reserve_bytes"}
    parsed = {}
    for key, text in settings.items():
        if text is None:
            continue
        if key in sizes:
            parsed[sizes[key]] = parse_size(text, "--" + key.replace("_", "-"))
        elif key in ("gpu_memory_utilization", "mem_fraction_static"):
            parsed[key] = parse_fraction(text, key.replace("_", "-"))
        elif key in ("max_num_batched_tokens", "max_num_seqs", "token_budget"):
            parsed[key] = parse_tokens(text, "--" + key.replace("_", "-"))
        elif key in ("shared_prefix", "spec_tokens"):
            parsed["shared_prefix_tokens" if key == "shared_prefix" else key] = parse_tokens(
                text, "--" + key.replace("_", "-"), allow_zero=True)
        elif key == "draft_model":
            parsed["draft"] = load_model(text, dirs)
        else:  # pragma: no cover - a command passed an option this function does not know
            raise AssertionError(key)
    return Scenario(
        model=spec, hardware=load_hardware(hardware, dirs), kv_dtype_request=kv_dtype,
        nodes=parse_degree(nodes, "nodes"), gpus=optional(parse_degree, gpus, "gpus"),
        tp=optional(parse_degree, tp, "tp"), pp=parse_degree(pp, "pp"), dp=optional(parse_degree, dp, "dp"),
        ep=optional(parse_degree, ep, "ep"), engine=engine, weight_dtype=weight_dtype,
        weights_bytes=optional(parse_size, weights, "--weights"),
        prompt_tokens=parse_tokens(prompt, "--prompt", allow_zero=True),
        decode_tokens=parse_tokens(decode, decode_flag, allow_zero=True),
        mtp_layers=parse_mtp_layers(mtp_layers),
        max_model_len=optional(parse_tokens, max_model_len, "--max-model-len"),
        block_size=optional(parse_degree, block_size, "block-size"),
        host_link_gbs=optional(parse_link_gbs, host_link_gbs), **parsed)


def parse_mtp_layers(text: str | None) -> int:
    from kvplan.inputs.units import parse_tokens
    from kvplan.scenario import MAX_MTP_LAYERS

    if text is None:
        return 0
    value = parse_tokens(text, "--mtp-layers", allow_zero=True)
    if value > MAX_MTP_LAYERS:
        raise KvplanError(f"--mtp-layers {value:,} is absurd (DeepSeek ships 1)", "give 0 to a few layers")
    return value


def emit(result, fmt: str, explain: bool, units: str, brief: bool) -> None:
    from kvplan.render.output import render

    if brief and explain:
        raise KvplanError("--brief and --explain both given", "drop one: --brief prints the headline figures only")
    if brief and fmt not in ("table",):
        raise KvplanError(f"--brief prints the table format's headline figures, not {fmt}",
                          "drop --brief, or drop --format")
    try:
        render(result, fmt, explain, units=units, brief=brief)
    except BrokenPipeError:  # piped into head: the reader has what it wanted, not an error
        from kvplan.cli import _quiet_stdout

        _quiet_stdout()
        raise SystemExit(0) from None
    except OSError as err:  # a full disk, a closed file
        from kvplan.cli import _quiet_stdout

        _quiet_stdout()
        raise KvplanError(f"cannot write the output: {err.strerror or err}",
                          "check the disk, file or pipe it goes to") from None


def check_output_options(fmt: str, units: str, brief: bool) -> str:
    """Checked before any work, so a bad --format fails fast."""
    fmt = check_format(fmt)
    check_units(units)
    if brief and fmt != "table":
        raise KvplanError(f"--brief prints the table format's headline figures, not {fmt}",
                          "drop --brief, or drop --format")
    return fmt


# --- the shared options, spliced into each command's signature once ---------------------------------------------
# (name, annotation, default) of the scenario options every command takes, in --help order.
SCENARIO_OPTIONS = (
    ("model", ModelOpt, None), ("hardware", HardwareOpt, "h200"), ("nodes", NodesOpt, "1"), ("gpus", GpusOpt, None),
    ("tp", TpOpt, None), ("pp", PpOpt, "1"), ("dp", DpOpt, None), ("ep", EpOpt, None),
    ("kv_dtype", KvDtypeOpt, "auto"), ("weight_dtype", WeightDtypeOpt, None), ("weights", WeightsOpt, None),
    ("engine", EngineOpt, "neutral"),
    ("prompt", PromptOpt, "1k"), ("decode", DecodeOpt, "30k"), ("mtp_layers", MtpLayersOpt, None),
    ("max_model_len", MaxModelLenOpt, None), ("block_size", BlockSizeOpt, None),
    ("host_link_gbs", HostLinkOpt, None),
)
MEMORY_OPTIONS = {
    "gpu_memory_utilization": GpuMemUtilOpt, "mem_fraction_static": MemFractionOpt, "kv_pool": KvPoolOpt,
    "max_num_batched_tokens": MaxBatchedOpt, "max_num_seqs": MaxSeqsOpt, "activation_reserve": ActivationOpt,
    "runtime_reserve": RuntimeOpt,
}
OUTPUT_OPTIONS = (("units", UnitsOpt, "iec"), ("fmt", FormatOpt, "table"), ("explain", ExplainOpt, False),
                  ("brief", BriefOpt, False), ("presets_dir", PresetsDirOpt, None))


def scenario_command(memory: tuple[str, ...] = (), decode=None, host_link: bool = True):
    """Give a command the shared scenario, memory and output options, declared once here.

    The command is written as ``def cmd(scenario_args: dict, output: dict, <its own options>)``: ``scenario_args``
    holds the scenario and memory options as text (pass them to ``build_scenario``), ``output`` the output
    options (``fmt, explain, units, brief, presets_dir``). ``decode`` replaces the --decode option with another
    (name, annotation, default), e.g. compare-preemption's --generated; ``host_link`` False leaves it out."""
    import functools
    import inspect

    shared = [o for o in SCENARIO_OPTIONS if host_link or o[0] != "host_link_gbs"]
    if decode is not None:
        shared = [decode if name == "decode" else (name, ann, dflt) for name, ann, dflt in shared]
    shared += [(name, MEMORY_OPTIONS[name], None) for name in memory]

    def wrap(func):
        # The annotations as written (evaluated in the command module if they are strings). Not
        # typing.get_type_hints: before Python 3.11 it wraps an option whose default is None in Optional[...],
        # hiding its Annotated typer.Option, so typer would name it after the parameter (--emit-engine, not --emit)
        own = [p for name, p in inspect.signature(func, eval_str=True).parameters.items()
               if name not in ("scenario_args", "output")]
        hints = {name: ann for name, ann, _ in shared + list(OUTPUT_OPTIONS)}

        def param(name, ann, default):
            return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=default)

        params = ([param(*o) for o in shared] + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
                  + [param(*o) for o in OUTPUT_OPTIONS])

        @functools.wraps(func)
        def command(**kwargs):
            scenario = {name: kwargs.pop(name) for name, _, _ in shared}
            if decode is not None:
                scenario["decode"] = scenario.pop(decode[0])
                scenario["decode_flag"] = "--" + decode[0].replace("_", "-")
            if not host_link:
                scenario["host_link_gbs"] = None
            output = {name: kwargs.pop(name) for name, _, _ in OUTPUT_OPTIONS}
            scenario["presets_dir"] = output["presets_dir"]
            return func(scenario_args=scenario, output=output, **kwargs)

        own_hints = {p.name: p.annotation for p in own}
        command.__signature__ = inspect.Signature(params)
        command.__annotations__ = {**hints, **own_hints}
        del command.__wrapped__   # typer must read the spliced signature, not the inner one
        return command

    return wrap
