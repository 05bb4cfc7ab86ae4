"""Read a vLLM or SGLang start-up log: what it states about the deployment and its KV pool.

``read_log(path)`` returns a ``StartupLog``: the engine (``vllm`` or ``sglang``), its release when the log names
it, and each recognised fact with the line it came from. Pure and light: no third-party import. Lines the parser
does not recognise are ignored; a file with none of the recognised lines, or most of whose lines are not log output
(prose quoting a log line: ``_LOG_LINE``), is an error (exit 2).

Formats recognised (each written against the engine source at the release named; the public log excerpts in
``tests/data/logs/`` exercise them):

vLLM
  * config: ``Initializing a V1 LLM engine (v0.24.0) with config: model='...', dtype=torch.bfloat16,
    max_seq_len=..., tensor_parallel_size=8, pipeline_parallel_size=1, ..., kv_cache_dtype=auto``
    (vllm/v1/engine/core.py; V0 ``Initializing an LLM engine (v0.5.4)``, vllm/engine/llm_engine.py), and the
    ``non-default args: {'model': ..., 'tensor_parallel_size': 8, ...}`` dict (vllm/entrypoints/utils.py);
  * weights: ``Model loading took 14.2474 GiB`` (v1 gpu_model_runner.py), ``Loading model weights took
    14.9888 GB`` (V0 model_runner.py: float_memory_usage / 2**30, so GiB despite the label);
  * memory profile: V0 v0.6.4 one-liner ``Memory profiling results: total_gpu_memory=23.58GiB ...
    non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90``; v0.6.5+ table (``model
    weights take``, ``non_torch_memory``, ``PyTorch activation peak memory``, ``available_kv_cache_memory``,
    vllm/worker/worker.py); V1 ``Available KV cache memory: 8.11 GiB`` (vllm/v1/worker/gpu_worker.py);
  * pool: ``# GPU blocks: 1952`` (V0), ``GPU KV cache size: 198,784 tokens`` and ``Maximum concurrency for
    8,192 tokens per request: 24.27x`` (vllm/v1/core/kv_cache_utils.py, PR #13596);
  * CUDA graphs: ``Graph capturing finished in 5 secs, took 0.40 GiB``;
  * the April 2025 profile sentences (``total_gpu_memory (95.22GiB) x gpu_memory_utilization (0.90)``, ``model
    weights take 43.09GiB; non_torch_memory takes 7.33GiB; ...``), V1's ``Free memory on device (a/b GiB)``;
  * quantization (``quantization=fp8`` in the config line, ``'quantization': ...`` in the args), ``Using fp8 data
    type to store kv cache``.

SGLang
  * ``server_args=ServerArgs(model_path='...', tp_size=8, ..., mem_fraction_static=0.8, page_size=1, ...)``;
  * ``Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=33.80 GB, mem usage=13.06
    GB.`` (newer: ``quant=fp8, fmt=e4m3, avail mem=..., mem usage=...``); GB here is 2**30 bytes
    (python/sglang/srt/utils.py get_available_gpu_memory);
  * ``KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB`` (MHA) or ``..., KV size: 0.65
    GB`` (MLA) (python/sglang/srt/mem_cache/memory_pool.py);
  * ``max_total_num_tokens=..., chunked_prefill_size=..., max_prefill_tokens=..., max_running_requests=...,
    context_len=...`` (scheduler.py); ``Memory pool end. avail mem=...``; ``Capture cuda graph end. ... mem
    usage=0.47 GB``; ``Using KV cache dtype: torch.bfloat16``; ``quantization='fp8'`` and ``quant=fp8``.

Either engine: the fused-MoE tuning file it loads or misses (``.../configs/E=256,N=256,device_name=NVIDIA_H20,
dtype=int4_w4a16.json``) names the GPU and the experts' weight width; PyTorch's out-of-memory error (``GPU 0 has a
total capacity of 79.19 GiB``) the GPU's memory.

A fact stated by several ranks (``TP0``, ``TP1``, ...) keeps every value; ``StartupLog.least`` gives the
smallest (both engines size the pool by the most constrained rank).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kvplan.errors import KvplanError, shorten
from kvplan.inputs.request import SCENARIO_DEFAULTS

# A line longer than this is cut before matching (SGLang's ServerArgs line is ~6 KB).
MAX_LINE_CHARS = 20_000
WHAT = "start-up log"
# Lines starting with this are annotations, not log text (the public excerpts in tests/data/logs/ name their source
# so); an engine never starts a line with it.
COMMENT = "##"
# No figure a start-up log states (tokens, blocks, GiB, a concurrency) is this large: a larger one is refused, so
# no overflow or infinity reaches the arithmetic.
MAX_FIGURE = 1e15
FIX = "give a vLLM or SGLang start-up log (the text the server prints while starting)"


@dataclass(frozen=True)
class Fact:
    """One value the log states, where it states it."""

    name: str
    value: float | int | str
    line: int        # 1-based line number in the file
    text: str        # the line, cut to 200 characters

    def cite(self, path: str) -> str:
        return f"{path} line {self.line}: {self.text}"


@dataclass(frozen=True)
class StartupLog:
    path: str
    engine: str                      # "vllm" or "sglang"
    facts: dict[str, tuple[Fact, ...]] = field(default_factory=dict)
    release: tuple[int, int, int] | None = None
    mixed: str = ""                  # a warning: the other engine's lines the log also holds (ignored), or ""

    def has(self, name: str) -> bool:
        return name in self.facts

    def first(self, name: str) -> Fact | None:
        found = self.facts.get(name)
        return found[0] if found else None

    def least(self, name: str) -> Fact | None:
        """The fact with the smallest value over the ranks that print it."""
        found = self.facts.get(name)
        return min(found, key=lambda f: f.value) if found else None

    def value(self, name: str, default=None):
        fact = self.first(name)
        return default if fact is None else fact.value

    def names(self) -> list[str]:
        return sorted(self.facts)


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _int(text: str) -> int:
    return int(text.replace(",", ""))


_N = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
_Q = r"""['"]([^'"]{1,500})['"]"""
# (fact, engine, keyword that must be in the line, pattern, converter)
_RULES: tuple[tuple[str, str, str, re.Pattern, Callable[[str], float | int | str]], ...] = tuple(
    (name, engine, key, re.compile(pattern), conv) for name, engine, key, pattern, conv in (
        # --- vLLM ------------------------------------------------------------------------------------------
        ("release", "vllm", "LLM engine (v", r"LLM engine \(v([0-9]+\.[0-9]+(?:\.[0-9]+)?)", str),
        ("release", "vllm", "version ", r"\bversion\s+([0-9]+\.[0-9]+\.[0-9]+)\s*$", str),
        ("model", "vllm", "with config:", r"with config: model=" + _Q, str),
        ("model", "vllm", "non-default args", r"'model': " + _Q, str),
        ("model", "vllm", "non-default args", r"'model_tag': " + _Q, str),
        ("tp", "vllm", "tensor_parallel_size", r"tensor_parallel_size['\"]?[=:]\s*([0-9]+)", int),
        ("pp", "vllm", "pipeline_parallel_size", r"pipeline_parallel_size['\"]?[=:]\s*([0-9]+)", int),
        ("dp", "vllm", "data_parallel_size", r"data_parallel_size['\"]?[=:]\s*([0-9]+)", int),
        ("expert_parallel", "vllm", "enable_expert_parallel", r"'enable_expert_parallel': (True)", str),
        ("dtype", "vllm", "with config:", r"\bdtype=(?:torch\.)?([a-z0-9_]+)", str),
        ("kv_cache_dtype", "vllm", "kv_cache_dtype", r"kv_cache_dtype['\"]?[=:]\s*['\"]?([a-z0-9_]+)", str),
        ("block_size", "vllm", "block_size", r"'block_size': ([0-9]+)", int),
        ("max_model_len", "vllm", "max_seq_len=", r"\bmax_seq_len=([0-9]+)", int),
        ("max_model_len", "vllm", "'max_model_len'", r"'max_model_len': ([0-9]+)", int),
        ("gpu_memory_utilization", "vllm", "gpu_memory_utilization",
         r"gpu_memory_utilization['\"]?(?:[=:]|\s)\s*\(?([0-9.]+)", float),
        ("weights_gib", "vllm", "Model loading took", r"Model loading took " + _N + r" ?GiB", _num),
        ("weights_gib", "vllm", "Loading model weights took", r"Loading model weights took " + _N + r" ?GB", _num),
        ("weights_gib", "vllm", "model weights take", r"model weights take\s+" + _N + r" ?GiB", _num),
        ("total_gpu_memory_gib", "vllm", "total_gpu_memory", r"total_gpu_memory[=\s]\s*\(?" + _N + r" ?GiB", _num),
        ("non_torch_gib", "vllm", "non_torch_memory", r"non_torch_memory[=\s]\s*(?:takes\s+)?" + _N + r" ?GiB", _num),
        ("activation_peak_gib", "vllm", "activation peak memory",
         r"activation peak memory\s+(?:takes\s+)?" + _N + r" ?GiB", _num),
        ("available_kv_gib", "vllm", "Available KV cache memory",
         r"Available KV cache memory: " + _N + r" ?GiB", _num),
        ("available_kv_gib", "vllm", "available_kv_cache_memory",
         r"available_kv_cache_memory\s+" + _N + r" ?GiB", _num),
        ("available_kv_gib", "vllm", "kv_cache_size=", r"\bkv_cache_size=" + _N + r" ?GiB", _num),
        ("available_kv_gib", "vllm", "reserved for KV Cache is",
         r"reserved for KV Cache is " + _N + r" ?GiB", _num),
        ("gpu_blocks", "vllm", "GPU blocks:", r"(?:^|[\]#\s])GPU blocks: ([0-9,]+)", _int),
        ("kv_cache_tokens", "vllm", "GPU KV cache size:", r"GPU KV cache size: ([0-9,]+) tokens", _int),
        ("concurrency_len", "vllm", "Maximum concurrency for",
         r"Maximum concurrency for ([0-9,]+) tokens per request", _int),
        ("max_concurrency", "vllm", "Maximum concurrency for", r"tokens per request: " + _N + r"x", _num),
        ("cuda_graph_gib", "vllm", "Graph capturing finished", r"Graph capturing finished.*took " + _N
         + r" ?GiB", _num),
        ("quantization", "vllm", "with config:", r"\bquantization=([a-z0-9_]+)", str),
        ("quantization", "vllm", "non-default args", r"'quantization': '([a-z0-9_]+)'", str),
        ("kv_cache_dtype", "vllm", "data type to store kv cache", r"Using ([a-z0-9_]+) data type to store kv cache",
         str),
        ("total_gpu_memory_gib", "vllm", "Free memory on device",
         r"Free memory on device[^(]{0,40}\([0-9.]+/" + _N + r" ?GiB\)", _num),
        # --- SGLang ----------------------------------------------------------------------------------------
        ("model", "sglang", "server_args=", r"\bmodel_path=" + _Q, str),
        ("tp", "sglang", "server_args=", r"\btp_size=([0-9]+)", int),
        ("pp", "sglang", "server_args=", r"\bpp_size=([0-9]+)", int),
        ("dp", "sglang", "server_args=", r"\bdp_size=([0-9]+)", int),
        ("ep", "sglang", "server_args=", r"\bep_size=([0-9]+)", int),
        ("dtype", "sglang", "server_args=", r"\bdtype='([a-z0-9_]+)'", str),
        ("kv_cache_dtype", "sglang", "server_args=", r"\bkv_cache_dtype='([a-z0-9_]+)'", str),
        ("kv_cache_dtype", "sglang", "Using KV cache dtype", r"Using KV cache dtype: (?:torch\.)?([a-z0-9_]+)", str),
        ("quantization", "sglang", "server_args=", r"\bquantization='([a-z0-9_]+)'", str),
        ("quantization", "sglang", "Load weight end", r"\bquant=([a-z0-9_]+)", str),
        ("block_size", "sglang", "server_args=", r"\bpage_size=([0-9]+)", int),
        ("max_model_len", "sglang", "server_args=", r"\bcontext_length=([0-9]+)", int),
        ("max_model_len", "sglang", "max_total_num_tokens=", r"\bcontext_len=([0-9]+)", int),
        ("mem_fraction_static", "sglang", "server_args=", r"\bmem_fraction_static=([0-9.]+)", float),
        ("avail_after_load_gib", "sglang", "Load weight end", r"avail mem=" + _N + r" ?GB", _num),
        ("weights_gib", "sglang", "Load weight end", r"mem usage=" + _N + r" ?GB", _num),
        ("kv_tokens", "sglang", "KV Cache is allocated", r"#tokens: ([0-9,]+)", _int),
        ("k_size_gib", "sglang", "KV Cache is allocated", r"\bK size: " + _N + r" ?GB", _num),
        ("v_size_gib", "sglang", "KV Cache is allocated", r"\bV size: " + _N + r" ?GB", _num),
        ("kv_size_gib", "sglang", "KV Cache is allocated", r"\bKV size: " + _N + r" ?GB", _num),
        ("max_total_num_tokens", "sglang", "max_total_num_tokens=", r"max_total_num_tokens=([0-9,]+)", _int),
        ("avail_after_pool_gib", "sglang", "Memory pool end", r"Memory pool end\. avail mem=" + _N, _num),
        ("cuda_graph_gib", "sglang", "Capture cuda graph end", r"Capture cuda graph end.*mem usage=" + _N, _num),
        # --- a launch command pasted with the log (either engine; not used to tell the engines apart) ---------
        ("model", "any", "vllm serve ", r"vllm serve (?!--)(\S+)", str),
        ("model", "any", "--model", r"--model(?:-path)?[= ]+(?!--)(\S+)", str),
        ("tp", "any", "--t", r"--(?:tensor-parallel-size|tp-size|tp)[= ]+([0-9]+)", int),
        ("pp", "any", "--p", r"--(?:pipeline-parallel-size|pp-size|pp)[= ]+([0-9]+)", int),
        ("dp", "any", "--d", r"--(?:data-parallel-size|dp-size|dp)[= ]+([0-9]+)", int),
        ("ep", "any", "--ep", r"--(?:ep-size|ep)[= ]+([0-9]+)", int),
        ("expert_parallel", "any", "--enable-expert-parallel", r"--enable-expert-parallel()", str),
        ("dp_attention", "any", "--enable-dp-attention", r"--enable-dp-attention()", str),
        ("dp_attention", "any", "enable_dp_attention=True", r"enable_dp_attention=(True)", str),
        ("kv_cache_dtype", "any", "--kv-cache-dtype", r"--kv-cache-dtype[= ]+([a-z0-9_]+)", str),
        ("block_size", "any", "-size", r"--(?:block-size|page-size)[= ]+([0-9]+)", int),
        ("max_model_len", "any", "--", r"--(?:max-model-len|context-length)[= ]+([0-9]+)", int),
        ("gpu_memory_utilization", "any", "--gpu-memory-utilization",
         r"--gpu-memory-utilization[= ]+([0-9.]+)", float),
        ("mem_fraction_static", "any", "--mem-fraction-static", r"--mem-fraction-static[= ]+([0-9.]+)", float),
        ("max_total_tokens_cap", "any", "--max-total-tokens", r"--max-total-tokens[= ]+([0-9]+)", int),
        ("quantization", "any", "--quantization", r"--quantization[= ]+([a-z0-9_]+)", str),
        # the GPU: both engines name their fused-MoE tuning files after it ("E=128,N=384,device_name=NVIDIA_H100_80GB_
        # HBM3,dtype=fp8_w8a8.json", vllm/model_executor/layers/fused_moe/fused_moe.py get_config_file_name, and
        # sglang/srt/layers/moe/fused_moe_triton) and log the path; PyTorch's out-of-memory error states the total
        ("gpu_name", "any", "device_name=", r"device_name=([A-Za-z0-9_\-]+)", str),
        ("moe_weight_dtype", "any", "device_name=", r"device_name=[A-Za-z0-9_\-]+,dtype=([a-z0-9_]+)", str),
        ("total_gpu_memory_gib", "any", "total capacity of", r"has a total capacity of " + _N + r" ?GiB", _num),
    ))
# Facts whose presence says which engine wrote the log (parallelism and dtypes appear in both).
_ENGINE_FACTS = {"vllm": {"weights_gib", "available_kv_gib", "gpu_blocks", "kv_cache_tokens", "max_concurrency",
                          "release", "total_gpu_memory_gib"},
                 "sglang": {"kv_tokens", "max_total_num_tokens", "avail_after_load_gib", "avail_after_pool_gib",
                            "mem_fraction_static", "weights_gib"}}


_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
# What marks a line as the engine's output (or the launch command pasted with it) when kvplan reads no fact from it:
# a level word or a clock time (every vLLM and SGLang logger line: "INFO 12-13 19:54:18", "[2025-10-07 23:17:19
# TP0]"), a process tag ("(EngineCore pid=107)"), a launch command ("$ vllm serve ...", "  --tp 8 \\"), a traceback
# line or a progress bar ("100%|####|"). A file most of whose lines are none of these nor a fact line is prose that
# quotes a log line (a README), not a log.
_LOG_LINE = re.compile(r"\b(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\b|\d\d:\d\d:\d\d|\(\w+ (?:pid|rank)="
                       r"|^\s*(?:\$|--)|\\\s*$|vllm serve|sglang\.launch_server|^\s*(?:File \"|Traceback)|\d%\|")


def parse(text: str, path: str = "<log>") -> StartupLog:
    """The facts of a start-up log's text (see the module docstring)."""
    found: dict[str, dict[str, list[Fact]]] = {"vllm": {}, "sglang": {}, "any": {}}
    prose: list[int] = []     # the lines that are neither a fact line nor look like log output (_LOG_LINE)
    lines = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.startswith(COMMENT) or not raw.strip():
            continue
        lines += 1
        line = raw[:MAX_LINE_CHARS]
        facts_before = sum(len(v) for e in found.values() for v in e.values())
        shown = " ".join(line.split())
        if len(shown) > 200:
            shown = shown[:197] + "..."
        for name, engine, key, pattern, conv in _RULES:
            if key not in line:
                continue
            match = pattern.search(line)
            if match is None:
                continue
            figure = match.group(1)
            try:   # a figure of thousands of digits is refused unconverted (int() stops at 4,300 digits)
                value = conv(figure) if conv is str or len(figure) <= 40 else math.inf
            except (ValueError, OverflowError):
                continue
            if isinstance(value, (int, float)) and not value <= MAX_FIGURE:   # also inf and nan (float('1e999'))
                raise KvplanError(f"{WHAT} {path} line {number}: {shorten(figure)} is not a plausible "
                                  f"figure (kvplan reads counts and sizes up to {MAX_FIGURE:.0e})",
                                  "give the log as the engine printed it")
            found[engine].setdefault(name, []).append(Fact(name, value, number, shown))
        if sum(len(v) for e in found.values() for v in e.values()) == facts_before and not _LOG_LINE.search(line):
            prose.append(number)
    if any(found[e] for e in _ENGINE_FACTS) and 2 * len(prose) > lines:
        raise KvplanError(f"{WHAT} {path}: {len(prose)} of its {lines} lines are not log output (no level, time, "
                          f"launch command nor line kvplan reads; e.g. line {prose[0]}): it reads as prose quoting a "
                          "log, not a log", "give the log as the engine printed it (the server's own output)")
    score = {e: len(set(found[e]) & _ENGINE_FACTS[e]) for e in _ENGINE_FACTS}
    if not any(score.values()):
        raise KvplanError(f"{WHAT} {path} has none of the lines kvplan reads (e.g. vLLM's 'Available KV cache "
                          "memory' / 'GPU KV cache size', SGLang's 'KV Cache is allocated')", FIX)
    if score["vllm"] == score["sglang"]:
        raise KvplanError(f"{WHAT} {path} mixes vLLM and SGLang lines equally; kvplan cannot tell which engine "
                          "wrote it", "give one engine's log")
    engine = max(score, key=lambda e: score[e])
    facts = {name: tuple(items) for name, items in found[engine].items()}
    other = "sglang" if engine == "vllm" else "vllm"
    stray = sorted({f.line for name in set(found[other]) & _ENGINE_FACTS[other] for f in found[other][name]})
    mixed = ""
    if stray:
        shown = ", ".join(map(str, stray[:5])) + (f" and {len(stray) - 5} more" if len(stray) > 5 else "")
        mixed = (f"The log mixes engines: it is read as {_NAMES[engine]}'s ({score[engine]} of its facts against "
                 f"{score[other]}), and {_NAMES[other]}'s line(s) {shown} are ignored; give one engine's log.")
    for name, items in found["any"].items():   # the launch command fills what the log lines do not state
        facts.setdefault(name, tuple(items))
    release = None
    if "release" in facts:
        parts = [int(p) for p in str(facts["release"][0].value).split(".")] + [0, 0]
        release = (parts[0], parts[1], parts[2])
    return StartupLog(path, engine, facts, release, mixed)


def read_log(path: Path) -> StartupLog:
    """The facts of the start-up log at ``path``, read with kvplan's hardened reader (size limit, no FIFOs or
    devices, UTF-8 text only)."""
    from kvplan.inputs.presets import read_text

    text = read_text(Path(path), WHAT, FIX)
    if "\x00" in text:
        raise KvplanError(f"{WHAT} {shorten(str(path))} holds NUL bytes: it is a binary file, not a log", FIX)
    return parse(text, str(path))


# --- what the facts mean to kvplan ------------------------------------------------------------------------------
# The engines' KV dtype names, as kvplan's --kv-dtype takes them ("auto" stays auto).
_KV_DTYPES = {"auto": "auto", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16",
              "fp16": "fp16", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "float8_e4m3fn": "fp8",
              "float8_e5m2": "fp8", "fp8_ds_mla": "fp8_ds_mla", "nvfp4": "nvfp4"}


def kv_dtype_option(log: StartupLog) -> tuple[str, Fact] | None:
    """The --kv-dtype the log's KV cache dtype stands for, and the fact it comes from (None: not stated or not a
    dtype kvplan models)."""
    for fact in log.facts.get("kv_cache_dtype", ()):
        value = _KV_DTYPES.get(str(fact.value).lower())
        if value is not None:
            return value, fact
    return None


# Checkpoint-name suffixes that do not change the architecture (tried when the name itself is no preset).
_SUFFIXES = ("-fp8", "-bf16", "-instruct", "-chat", "-awq", "-int4", "-int8", "-fp4", "-2507", "-0528")


def preset_for_model(name: str, presets) -> str | None:
    """The built-in or user preset a logged model name or path names (``deepseek-ai/DeepSeek-R1`` ->
    ``deepseek-r1``), trying the name with common quantisation / release suffixes removed."""
    from kvplan.inputs.presets import _preset_for_hf_id

    ref = name.rstrip("/")
    if "/models--" in ref:   # a Hugging Face cache path: .../models--org--name/snapshots/<hash>
        ref = ref.split("/models--", 1)[1].split("/", 1)[0].replace("--", "/")
    match = _preset_for_hf_id(ref, presets)
    base = ref.rsplit("/", 1)[-1].lower()
    while match is None:
        stripped = next((base[: -len(s)] for s in _SUFFIXES if base.endswith(s)), None)
        if stripped is None:
            break
        base = stripped
        match = _preset_for_hf_id(base, presets)
    return match


# The scenario options' defaults (kvplan.inputs.request): an option at its default was not given by the user, so a
# --hardware h200 typed out reads as not given.
DEFAULT_HARDWARE = SCENARIO_DEFAULTS["hardware"]
# the words of every warning _hardware gives when neither --hardware nor the log names the GPU (kvplan calibrate
# refuses to fit a memory reserve on it: kvplan.options.calibrate)
GPU_DEFAULTED = "kvplan's default"
_UNSET = {**SCENARIO_DEFAULTS, "gpu_memory_utilization": None, "mem_fraction_static": None}

# A logged device name (torch.cuda.get_device_name, "_" for spaces in the MoE file names) -> kvplan's GPU preset;
# the first pattern that matches wins (None: a GPU kvplan has no preset for). Names as the devices report them,
# e.g. NVIDIA_H100_80GB_HBM3, NVIDIA_H100_PCIe, NVIDIA_H100_NVL, NVIDIA_H20, NVIDIA_H20-3e (141 GB), NVIDIA_B200,
# NVIDIA_A100-SXM4-80GB, AMD_Instinct_MI300X: the file names under vllm/model_executor/layers/fused_moe/configs/
# (vllm-project/vllm at 47c4439a3b8ab40b269567c372569c11903a8024).
_GPU_NAMES = tuple((re.compile(pattern), preset) for pattern, preset in (
    (r"GB200", "gb200"), (r"B300", "b300"), (r"B200", "b200"), (r"H200", "h200"), (r"H100.*PCIE", "h100-pcie"),
    (r"H100.*NVL", None), (r"H100", "h100-sxm"), (r"H800", "h800"), (r"H20 3E", None), (r"\bH20\b", "h20"),
    (r"A100.*80", "a100-80gb"),
    (r"L40S", "l40s"), (r"MI300X", "mi300x"), (r"MI325X", "mi325x"), (r"MI355X", "mi355x")))
# How far a logged total (PyTorch's, a little under nvidia-smi's: 79.22 GiB on an H100 SXM whose nvidia-smi total is
# 79.65) may be from a preset's HBM and still name it.
MEMORY_MATCH = 0.015


def gpu_preset(name: str) -> str | None:
    """The GPU preset a logged device name stands for (None: none kvplan has)."""
    text = " ".join(name.upper().replace("_", " ").replace("-", " ").split())
    return next((preset for pattern, preset in _GPU_NAMES if pattern.search(text)), None)


# Weight dtypes: the engines' --quantization methods whose weight width is fixed, and checkpoint-name tokens.
_QUANT_WEIGHTS = {"fp8": "fp8", "fbgemm_fp8": "fp8", "mxfp4": "mxfp4", "modelopt_fp4": "nvfp4", "nvfp4": "nvfp4"}
_NAME_WEIGHTS = {"fp8": "fp8", "nvfp4": "nvfp4", "mxfp4": "mxfp4"}
# vLLM's fused-MoE dtype selectors (fused_moe.py get_config_dtype_str: "fp8_w8a8", "int8_w8a16", "int4_w4a16")
_MOE_WEIGHTS = {"fp8_w8a8": "fp8", "int8_w8a8": "int8", "int8_w8a16": "int8", "int4_w4a16": "int4"}


def weight_dtype_option(log: StartupLog) -> tuple[str | None, str]:
    """(the --weight-dtype the log states, why) — from a logged quantization method, else a checkpoint name with an
    -FP8 / -NVFP4 / -MXFP4 part; (None, why) when it states none kvplan models (why is "" when it states nothing)."""
    unknown = ""
    for fact in log.facts.get("quantization", ()):
        value = _QUANT_WEIGHTS.get(str(fact.value).lower())
        if value is not None:
            return value, f"the log's quantization {fact.value} (line {fact.line})"
        unknown = f"the log's quantization {fact.value} (line {fact.line}) is no weight width kvplan models"
    moe = log.first("moe_weight_dtype")   # the fused-MoE tuning file's dtype: the experts' weights, most of a MoE
    if moe is not None and str(moe.value) in _MOE_WEIGHTS:
        return _MOE_WEIGHTS[str(moe.value)], f"the fused-MoE kernel's dtype {moe.value} (line {moe.line})"
    model = log.first("model")
    if model is not None:
        base = str(model.value).rstrip("/").rsplit("/", 1)[-1].lower()
        for token in re.split(r"[-_.]", base):
            if token in _NAME_WEIGHTS:
                return _NAME_WEIGHTS[token], f"the checkpoint name {base} (line {model.line})"
    return None, unknown


def _release_text(version: tuple[int, int, int]) -> str:
    major, minor, patch = version
    return f"{major}.{minor}" if patch == 0 else f"{major}.{minor}.{patch}"


def _hardware(log: StartupLog, args: dict, hbm_of, hardware_given: bool | None = None
              ) -> tuple[str, list[str], list[str]]:
    """(the --hardware for the log, notes, warnings): the preset the logged device name stands for, else the preset
    nearest the logged total memory, else the option as given (a warning when that is kvplan's default).
    ``hardware_given``: whether the user named the GPU (None: a value other than the default counts as named)."""
    given = (args.get("hardware", DEFAULT_HARDWARE) != DEFAULT_HARDWARE if hardware_given is None
             else hardware_given)
    chosen = str(args.get("hardware", DEFAULT_HARDWARE))
    name, total = log.first("gpu_name"), log.least("total_gpu_memory_gib")
    fix = "give --hardware with the GPU it ran on (kvplan presets list --type hardware, or a .toml of your own)"
    if name is not None:
        preset = gpu_preset(str(name.value))
        if preset is None:
            if given:
                return chosen, [f"GPU {chosen} as given with --hardware; the log's {name.value} (line {name.line}) "
                                "has no kvplan preset."], []
            return chosen, [], [f"The log's GPU {name.value} (line {name.line}) has no kvplan preset: planned on "
                                f"{chosen}, {GPU_DEFAULTED}; {fix}."]
        if given and chosen.lower() != preset and not chosen.lower().endswith(".toml"):
            raise KvplanError(f"--hardware {chosen} contradicts the log, whose GPU is {name.value} (line "
                              f"{name.line}, kvplan's {preset})", f"drop --hardware, or give --hardware {preset}")
        if not given:
            return preset, [f"GPU {preset}: the log's device {name.value} (line {name.line})."], []
        return chosen, [], []
    if given:
        return chosen, [], []     # plan_explain_log warns when the logged total is not the preset's
    if total is not None:
        # nearest first; among equals, a preset whose HBM was measured before one that assumes it
        logged = float(total.value)
        near = sorted((abs(hbm - logged), not measured, gpu) for gpu, (hbm, measured) in hbm_of().items()
                      if abs(hbm - logged) <= MEMORY_MATCH * logged)
        if near:
            best, others = near[0][2], [gpu for _, _, gpu in near[1:]]
            return best, [], [f"The log names no GPU; its total memory {total.value:g} GiB (line {total.line}) is "
                              f"nearest the {best} preset" + (f" (also near: {', '.join(others)})" if others else "")
                              + f": planned on {best}; {fix}."]
        return chosen, [], [f"The log's GPU has {total.value:g} GiB (line {total.line}), which no kvplan preset "
                            f"has: planned on {chosen}, {GPU_DEFAULTED}; {fix}."]
    return chosen, [], [f"The log does not state its GPU: planned on {chosen}, {GPU_DEFAULTED}; {fix}."]


def scenario_args(log: StartupLog, args: dict, per_node, presets, hbm_of, releases, hardware_given: bool | None = None
                  ) -> tuple[dict, list[str], list[str]]:
    """``args`` (the scenario options as text, ``kvplan.options.scenarios.build_scenario``'s keywords) with what the
    log states filled in, notes saying where each value came from, and warnings (what the log does not state and
    kvplan assumed). An option the user gave that contradicts the log is an error; one the log does not state is
    kept. ``per_node(hardware)``: GPUs per node of a hardware option (for --nodes); ``presets``: the model presets
    the logged model name is looked up in; ``hbm_of()``: {GPU preset: (HBM GiB, measured?)}, to match a logged total
    memory; ``releases(engine)``: (oldest, newest) release tuples kvplan has rules for and the newest's name (the
    engine adapters' facts, which sit above this layer); ``hardware_given``: whether the user named the GPU (None: a
    --hardware other than kvplan's default counts as named)."""
    out, notes = dict(args), list[str]()
    out["hardware"], notes, warnings = _hardware(log, args, hbm_of, hardware_given)
    if log.mixed:
        warnings.append(log.mixed)

    def given(name: str) -> bool:
        return args.get(name) != _UNSET.get(name, object())

    def take(name: str, value, fact: Fact | None, flag: str) -> None:
        if given(name) and str(args[name]).strip().lower() != str(value).lower():
            where = f" (line {fact.line})" if fact else ""
            raise KvplanError(f"{flag} {args[name]} contradicts the log, which says {value}{where}",
                              f"drop {flag} (the log states it), or give the log of that deployment")
        out[name] = str(value)

    # engine: the log's, pinned to its release where kvplan has rules for it
    engine_text = str(args.get("engine", "neutral")).strip().lower()
    if given("engine"):
        if engine_text.partition("==")[0].strip() != log.engine:
            raise KvplanError(f"--engine {args['engine']} contradicts the log, which {log.engine} wrote",
                              f"drop --engine, or give --engine {log.engine}==X.Y to choose its release")
    else:
        oldest, newest, newest_name = releases(log.engine)
        if log.release is None:
            out["engine"] = log.engine
            notes.append(f"The log names no {log.engine} release: kvplan follows its newest rules "
                         f"({newest_name}); give --engine {log.engine}==X.Y for another.")
        else:
            pinned = min(max(log.release, oldest), newest)
            out["engine"] = f"{log.engine}=={_release_text(pinned)}"
            if pinned != log.release:
                notes.append(f"The log's {log.engine} {_release_text(log.release)} is outside the releases kvplan "
                             f"has rules for; it follows {_release_text(pinned)}'s.")
    # model: a preset the logged name maps to, unless --model was given
    logged_model = log.first("model")
    if args.get("model") is None:
        if logged_model is None:
            raise KvplanError(f"the log {log.path} does not name its model", "give --model (a preset id or a "
                              "config.json)")
        match = preset_for_model(str(logged_model.value), presets)
        if match is None:
            raise KvplanError(f"the log's model {shorten(str(logged_model.value))} (line {logged_model.line}) is no "
                              "kvplan preset", "give --model with a preset id or the checkpoint's config.json")
        out["model"] = match
        notes.append(f"Model {match}: the preset the log's {logged_model.value} names (line {logged_model.line}).")
    elif logged_model is not None:
        match = preset_for_model(str(logged_model.value), presets)
        named = {pid.casefold() for pid in presets}
        if match is not None and str(args["model"]).strip().casefold() in named and (
                match.casefold() != str(args["model"]).strip().casefold()):
            # another preset than the log's: its bytes per token against the log's pool would explain nothing
            raise KvplanError(f"--model {args['model']} contradicts the log, which names "
                              f"{shorten(str(logged_model.value))} (line {logged_model.line}), kvplan's preset {match}",
                              "drop --model (the log states it), or give the log of that deployment")
        notes.append(f"Model {args['model']} as given with --model; the log names {logged_model.value} "
                     f"(line {logged_model.line}).")
    # parallelism: SGLang's --enable-dp-attention splits the TP group into DP attention ranks
    tp, dp = log.first("tp"), log.first("dp")
    tp_value, dp_value = (int(tp.value) if tp else None), (int(dp.value) if dp else None)   # whole (their rules)
    if log.has("dp_attention") and tp_value and dp_value and dp_value > 1:
        if tp_value % dp_value:
            raise KvplanError(f"the log's tp {tp_value} is not a multiple of its dp {dp_value} (DP attention)",
                              "check the log")
        notes.append(f"DP attention: the log's tp {tp_value} x dp {dp_value} is {tp_value} GPUs of attention TP "
                     f"{tp_value // dp_value}; kvplan plans --tp {tp_value // dp_value} --dp {dp_value}.")
        tp_value //= dp_value
    if tp_value:
        take("tp", tp_value, tp, "--tp")
    elif not given("tp"):
        out["tp"] = "1"
        notes.append("The log states no tensor-parallel size: TP=1 (vLLM's and SGLang's default).")
    if dp_value:
        take("dp", dp_value, dp, "--dp")
    elif not given("dp"):
        out["dp"] = "1"
    if log.has("pp"):
        take("pp", log.value("pp"), log.first("pp"), "--pp")
    ep = log.first("ep")
    if ep is not None and int(ep.value) > 1:
        take("ep", ep.value, ep, "--ep")
    elif log.has("expert_parallel") and not given("ep"):
        out["ep"] = str(int(out["tp"]) * int(out["dp"]))
        notes.append(f"Expert parallelism on: EP = TP x DP = {out['ep']} (vLLM --enable-expert-parallel).")
    gpus = int(out["tp"]) * int(out.get("pp") or 1) * int(out["dp"])
    if not given("nodes") and not given("gpus"):
        out["nodes"] = str(-(-gpus // per_node(out["hardware"])))
        out["gpus"] = str(gpus)
    # KV dtype, block / page, context limit, memory fraction
    kv = kv_dtype_option(log)
    if kv is not None:
        take("kv_dtype", kv[0], kv[1], "--kv-dtype")
    if log.has("block_size"):
        take("block_size", log.value("block_size"), log.first("block_size"), "--block-size")
    mml = log.first("max_model_len") or log.first("concurrency_len")
    if mml is not None:
        take("max_model_len", mml.value, mml, "--max-model-len")
    fraction = "gpu_memory_utilization" if log.engine == "vllm" else "mem_fraction_static"
    if log.has(fraction):
        take(fraction, log.value(fraction), log.first(fraction), "--" + fraction.replace("_", "-"))
    weight_dtype, why = weight_dtype_option(log)
    if weight_dtype is not None and args.get("weights") is None:
        if given("weight_dtype") and str(args["weight_dtype"]).strip().lower() != weight_dtype:
            raise KvplanError(f"--weight-dtype {args['weight_dtype']} contradicts the log: {why} says {weight_dtype}",
                              "drop --weight-dtype, or give the log of that deployment")
        out["weight_dtype"] = weight_dtype
        if not given("weight_dtype"):
            notes.append(f"Weights {weight_dtype}: {why}.")
    elif why and not given("weight_dtype"):
        notes.append(f"{why[0].upper()}{why[1:]}: the weights are the model preset's; give --weight-dtype for "
                     "another width.")
    return out, notes, warnings
