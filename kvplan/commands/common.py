"""Options shared by the commands, declared once (typer ``Annotated`` aliases), and ``scenario_command``, which
splices the shared scenario, memory and output options into each command's signature.

Every option takes text; the domain reads it (``kvplan.options.scenarios.build_scenario`` for the scenario,
``kvplan.inputs.options`` and ``kvplan.inputs.units`` for the rest), so bad input is one line naming the problem
and a fix, exit 2, and the command line, plan files and Python refuse the same things. Defaults are
``kvplan.inputs.request.SCENARIO_DEFAULTS``, the same in every command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.inputs.request import MEMORY_OPTIONS as MEMORY_KEYS
from kvplan.inputs.request import SCENARIO_DEFAULTS as D

# --- the deployment and the request (every command) ------------------------------------------------------------
ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", metavar="ID|FILE",
    help="Preset id, preset .toml, HF config.json, model directory, or a Hugging Face id org/name[@revision] "
         "(needs kvplan[hub]; the local HF cache first; a path or preset id wins). Default: deepseek-r1, the workload "
         "document's model (reasoning / long chain-of-thought serving: 1K prompt, 30K decode).")]
HardwareOpt = Annotated[str | None, typer.Option("--hardware", "-g", "--gpu", metavar="ID|FILE",
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
PromptOpt = Annotated[str | None, typer.Option("--prompt", metavar="TOKENS", help="Prompt tokens (1k = 1,000; 128Ki = "
                                        "131,072). Default 1k.")]
DecodeOpt = Annotated[str | None, typer.Option(
    "--decode", metavar="TOKENS", help="Decode (generated) tokens. Default 30k, shortened to fit the model's limit or "
                                       "--max-model-len (the first line says so).")]
MtpLayersOpt = Annotated[str | None, typer.Option(
    "--mtp-layers", metavar="N", help="MTP draft layers counted in the same pool (DeepSeek-R1 ships 1; default 0).")]
SpeculativeOpt = Annotated[str | None, typer.Option(   # tpot and simulate
    "--speculative", metavar="mtp[:K]|eagle3[:K]", help="Speculative decoding with DeepSeek's MTP head and K draft "
    "tokens (1, 3 or 4), or Llama-3.1-8B's EAGLE-3 head in a chain (K 1-7), at its published acceptance length "
    "unless --accept is given.")]
AcceptOpt = Annotated[str | None, typer.Option(
    "--accept", metavar="LEN", help="Tokens accepted per verify step, bonus included: 2.4, a profile against "
    "context 2.6@1k,2.0@32k (linear between, flat beyond), or 2.4-0.00002/token (falling to 1).")]
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
HOST_LINK_USERS = "concurrency (--dram offload), compare-preemption (swaps), recommend and simulate"
# A shared option a command takes (it is spliced into every command) but whose value changes nothing there:
# scenario_command(unused=(name, ...)) hides it on that command and refuses it when given, one line saying why and
# naming the commands that use it, so that a value given there is not taken to count. Name -> why.
# tests/test_user_pass.py walks every command's options and checks each one changes the output or is refused.
UNUSED_WHY = {
    "host_link_gbs": f"only {HOST_LINK_USERS} move KV over the host link",
    "block_size": "only concurrency, tpot, compare-preemption, pd, simulate, recommend and explain-log round KV up "
                  "to whole blocks",
    "weights": "the weights count only where the pool is sized (concurrency, tpot, compare-preemption, pd, "
               "simulate, recommend, explain-log, calibrate)",
    "weight_dtype": "the weights count only where the pool is sized (concurrency, tpot, compare-preemption, pd, "
                    "simulate, recommend, explain-log, calibrate)",
    "calibration": "it counts KV bytes, which no fitted step factor or reserve changes; concurrency, tpot, "
                   "compare-preemption, pd, simulate, recommend, explain-log and check take it",
    "kv_pool": "it prices one request's swap and recompute, whatever the pool; concurrency, tpot, pd, simulate and "
               "recommend plan on a given pool",
}

CalibrationOpt = Annotated[Path | None, typer.Option(
    "--calibration", metavar="FILE.toml",
    help="A calibration written by kvplan calibrate --save: its fitted step factors and memory reserve (for the model "
         "GPU and engine it was fitted for).")]

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
MoeA2aOpt = Annotated[str | None, typer.Option(
    "--moe-a2a-backend", metavar="BACKEND", help="SGLang's MoE all-to-all backend: none (default), deepep, ... "
                                                 "(an MoE model with --ep; deepep's reserve by release).")]
ChunkedPrefillOpt = Annotated[str | None, typer.Option(
    "--chunked-prefill-size", metavar="TOKENS", help="SGLang's prefill chunk and a prefill round's chunk budget "
                                                     "(default by GPU memory: 2048-16384).")]
MaxPrefillOpt = Annotated[str | None, typer.Option(
    "--max-prefill-tokens", metavar="TOKENS", help="SGLang's cap on a prefill round's tokens (default 16384).")]
DramOpt = Annotated[str | None, typer.Option("--dram", metavar="SIZE",
                                                help="Host DRAM per node for offloaded KV, e.g. 1TB (default: the "
                                                     "node's DRAM).")]
# --- SGLang's HiCache (simulate --engine sglang; flags as SGLang spells them) ----------------------------------------
HiCacheOpt = Annotated[bool, typer.Option("--enable-hierarchical-cache", "--enable-hicache", help="SGLang's HiCache: "
                                          "the radix tree's host-memory tier (--engine sglang).")]
HiCacheRatioOpt = Annotated[str | None, typer.Option("--hicache-ratio", metavar="R", help="HiCache's host pool over "
                                                     "the device pool (default 2).")]
HiCacheSizeOpt = Annotated[str | None, typer.Option("--hicache-size", metavar="GB", help="HiCache's host pool per "
                                                    "GPU in GB (overrides --hicache-ratio).")]
HiCacheWriteOpt = Annotated[str | None, typer.Option("--hicache-write-policy", metavar="POLICY", help="write_through "
                                                     "(default from SGLang v0.5.2) or write_through_selective.")]

# --- output ----------------------------------------------------------------------------------------------------
FormatOpt = Annotated[str, typer.Option("--format", "-f", metavar="FORMAT", help="table, json, csv or markdown.")]
ExplainOpt = Annotated[bool, typer.Option("--explain", help="Show how each figure was derived, with sources.")]
BriefOpt = Annotated[bool, typer.Option("--brief", help="Print only the first line and the headline figures.")]
TpotSloOpt = Annotated[str, typer.Option("--tpot-slo", metavar="TIME", help="TPOT service level, e.g. 50ms (default "
                                         "50ms: DeepSeek's production 20 tokens/s per user).")]
# --- the SLO model's targets (kvplan.calc.slo; simulate --sweep-rate, pd) ------------------------------------------
TtftSloOpt = Annotated[str | None, typer.Option("--ttft-slo", metavar="[pNN:]TIME", help="The TTFT target, at "
                                               "--slo-percentile unless p50: p90: or p99: leads it, e.g. 2s or "
                                               "p50:500ms.")]
SloPercentileOpt = Annotated[str | None, typer.Option("--slo-percentile", metavar="P", help="The percentile the "
                                                      "TTFT and TPOT targets are at: 50, 90 or 99 (default 99).")]
SloAttainmentOpt = Annotated[str | None, typer.Option("--slo-attainment", metavar="F", help="The share of requests "
                                                      "that must meet both targets, e.g. 0.9 or 90% (default 0.9, "
                                                      "DistServe's).")]
UnitsOpt = Annotated[str, typer.Option("--units", metavar="SYSTEM",
                                       help="iec (KiB, MiB, GiB) or si (kB, MB, GB) for sizes.")]
ContextsOpt = Annotated[str, typer.Option("--contexts", metavar="LIST",
                                          help="Comma-separated context lengths to tabulate.")]
PresetsDirOpt = Annotated[Path | None, typer.Option(
    "--presets-dir", metavar="DIR", help="Folder of your own preset TOML files (also $KVPLAN_PRESETS_DIR).")]

# --- the shared options, spliced into each command's signature once ---------------------------------------------
# (name, annotation, default) of the scenario options every command takes, in --help order.
_ANNOTATIONS = {
    "model": ModelOpt, "hardware": HardwareOpt, "nodes": NodesOpt, "gpus": GpusOpt, "tp": TpOpt, "pp": PpOpt,
    "dp": DpOpt, "ep": EpOpt, "kv_dtype": KvDtypeOpt, "weight_dtype": WeightDtypeOpt, "weights": WeightsOpt,
    "engine": EngineOpt, "prompt": PromptOpt, "decode": DecodeOpt, "mtp_layers": MtpLayersOpt,
    "max_model_len": MaxModelLenOpt, "block_size": BlockSizeOpt, "host_link_gbs": HostLinkOpt,
}
# --hardware's default is None on the command line (build_scenario fills in h200), so that -g h200 typed out is told
# from one not given where that matters: a start-up log's GPU, the one GPU a recommend --target search tries.
SCENARIO_OPTIONS = tuple((name, _ANNOTATIONS[name], None if name == "hardware" else default)
                         for name, default in D.items())
MEMORY_OPTIONS = dict(zip(MEMORY_KEYS, (GpuMemUtilOpt, MemFractionOpt, KvPoolOpt, MaxBatchedOpt, MaxSeqsOpt,
                                        ActivationOpt, RuntimeOpt, MoeA2aOpt, ChunkedPrefillOpt, MaxPrefillOpt),
                          strict=True))
OUTPUT_OPTIONS = (("units", UnitsOpt, "iec"), ("fmt", FormatOpt, "table"), ("explain", ExplainOpt, False),
                  ("brief", BriefOpt, False), ("presets_dir", PresetsDirOpt, None))


def _hidden(annotation):
    """The same option (its flags and metavar), hidden from --help and taking text: for a command that refuses it."""
    import typing

    info = typing.get_args(annotation)[1]   # typer.Option("--flag", "--alias"): the first flag is its `default`
    return Annotated[str | None, typer.Option(info.default, *info.param_decls, metavar=info.metavar, hidden=True)]


def scenario_command(memory: tuple[str, ...] = (), decode=None, host_link: bool = True, calibration: bool = True,
                     unused: tuple[str, ...] = ()):
    """Give a command the shared scenario, memory and output options, declared once here.

    The command is written as ``def cmd(scenario_args: dict, output: dict, <its own options>)``: ``scenario_args``
    holds the scenario and memory options as text (pass them to ``kvplan.options.scenarios.build_scenario``),
    ``output`` the output options (``fmt, explain, units, brief, presets_dir``). ``decode`` replaces the --decode
    option with another (name, annotation, default), e.g. compare-preemption's --generated; ``host_link`` False
    leaves it out; ``calibration`` False leaves out --calibration (a file of fitted factors, applied by
    ``build_scenario``); ``unused`` names shared options the command takes but never uses (``UNUSED_WHY``): hidden
    there, and refused when given (one line saying why and naming the commands that use it)."""
    import functools
    import inspect

    shared = [o for o in SCENARIO_OPTIONS if host_link or o[0] != "host_link_gbs"]
    if decode is not None:
        shared = [decode if name == "decode" else (name, ann, dflt) for name, ann, dflt in shared]
    if calibration:
        shared.append(("calibration", CalibrationOpt, None))
    shared += [(name, MEMORY_OPTIONS[name], None) for name in memory]
    missing = [name for name in unused if name not in UNUSED_WHY or name not in {n for n, _, _ in shared}]
    if missing:
        raise ValueError(f"scenario_command(unused=...): {missing} is no shared option of the command with a reason "
                         "in UNUSED_WHY")
    shared = [(n, _hidden(a), d) if n in unused else (n, a, d) for n, a, d in shared]

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
            for name in unused:
                if scenario[name] is not None:
                    from kvplan.errors import InputError

                    flag = "--" + name.replace("_", "-")
                    raise InputError(f"{flag} changes nothing in kvplan {func.__name__.replace('_', '-')}: "
                                     f"{UNUSED_WHY[name]}", f"drop {flag}")
            output = {name: kwargs.pop(name) for name, _, _ in OUTPUT_OPTIONS}
            scenario["presets_dir"] = output["presets_dir"]
            return func(scenario_args=scenario, output=output, **kwargs)

        own_hints = {p.name: p.annotation for p in own}
        command.__signature__ = inspect.Signature(params)
        command.__annotations__ = {**hints, **own_hints}
        del command.__wrapped__   # typer must read the spliced signature, not the inner one
        return command

    return wrap
