#!/usr/bin/env python3
"""Mutation probe: does the test suite notice when a rule changes by one?

Each mutant below is a one-line edit (file, original snippet, replacement). For every mutant the probe writes
the edit into a private copy of the repository, runs ``python -m pytest -x -q`` there, and reports

* ``killed``   - the suite failed (or timed out): some test pins the rule;
* ``survived`` - the suite still passed: no test notices the change;
* ``stale``    - the original snippet is no longer in the file (the code moved; update or drop the mutant);
* ``ambiguous``- the snippet occurs more than once, so the edit would not be one line (make it longer).

The working tree is never written to: the tree is copied to a temporary directory (one copy per worker) and
pytest runs there with the copy's root first on PYTHONPATH, so others may keep editing while it runs. With
``--rev REV`` the copy is the commit REV (``git archive``, which touches neither the index nor the working
tree) plus the test files of the working tree's ``tests/`` that REV does not have: new tests against committed
code while someone else is half-way through changing it. ``--worktree-tests`` takes every file of the working
tree's ``tests/`` instead, so that edits to existing test files are tested against REV too.

Usage::

    python tools/mutation_probe.py                 # every mutant; exit 0
    python tools/mutation_probe.py --strict        # exit 1 if any mutant survives (or the baseline fails)
    python tools/mutation_probe.py -k sglang -j 4  # mutants whose name contains "sglang", 4 at a time
    python tools/mutation_probe.py --list          # names and status of the snippets, without running pytest
    python tools/mutation_probe.py --rev HEAD      # code as committed, plus your new test files
    python tools/mutation_probe.py --rev HEAD --worktree-tests   # ... plus your edits to existing test files

Standard library only. See docs/mutation-testing.md.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    """One rule changed by one line. ``edits`` are alternatives, tried in order: (file, original, replacement).
    The first whose original occurs exactly once is applied; the file is a hint, and when the snippet is not
    there every ``*.py`` under the package is searched, so a mutant follows code that moved to another module.
    Give a second alternative when a refactor rewrites the line itself."""
    name: str
    edits: tuple[tuple[str, str, str], ...]


def M(name: str, path: str, original: str, replacement: str, *more: tuple[str, str, str]) -> Mutant:
    return Mutant(name, ((path, original, replacement), *more))


SGL = "kvplan/engines/sglang.py"
SGS = "kvplan/engines/sglang_scheduler.py"
VLLM = "kvplan/engines/vllm.py"
V1S = "kvplan/engines/vllm_scheduler.py"
NEUTRAL = "kvplan/engines/neutral.py"
BASE = "kvplan/engines/base.py"
CONC = "kvplan/calc/concurrency.py"
CAP = "kvplan/calc/capacity.py"
COSTS = "kvplan/calc/costs.py"
PRE = "kvplan/calc/preemption.py"
BUDGET = "kvplan/engines/budget.py"
LAYERS = "kvplan/specs/layers.py"
REC = "kvplan/calc/recommend.py"
SIZING = "kvplan/calc/sizing.py"
SCEN = "kvplan/scenario.py"
OUT = "kvplan/render/output.py"
TL = "kvplan/render/textlayout.py"
CHECK = "kvplan/calc/check.py"
PLAN = "kvplan/inputs/plan_file.py"
LOG = "kvplan/inputs/startup_log.py"
EXPLAIN = "kvplan/calc/explain_log.py"
WL = "kvplan/inputs/workload.py"
CALIB = "kvplan/calc/calibrate.py"
HF = "kvplan/inputs/hf_import.py"
TPOT = "kvplan/calc/tpot.py"
PD = "kvplan/calc/pd.py"
MUTANTS: tuple[Mutant, ...] = (
    # a new user's pass (tests/test_user_pass.py): nothing given is silently dropped
    M("user27-gpus-unused-off", "kvplan/options/scenarios.py",
      "if s.gpus is not None and s.dp is not None and par.gpus < s.gpus:",
      "if s.gpus is not None and s.dp is not None and par.gpus < s.gpus - 2:"),
    M("user27-gpus-unused-fill-dp", "kvplan/options/scenarios.py", "        replica = par.tp * par.pp\n",
      "        replica = par.tp\n"),
    M("user27-max-batch-above-seqs", "kvplan/options/simulate.py", "and seqs is not None and max_batch > seqs:",
      "and seqs is not None and max_batch > seqs + 8:"),
    M("user27-max-batch-at-seqs", "kvplan/options/simulate.py", "and seqs is not None and max_batch > seqs:",
      "and seqs is not None and max_batch >= seqs // 2:"),
    M("user27-compare-max-batch", "kvplan/options/simulate.py", '    if "max_batch" in changes:\n',
      '    if False:\n'),
    M("user27-target-kv-dtype", "kvplan/options/recommend.py",
      "dtypes = None if built.kv_dtype_auto else (built.kv_dtype.value,)", "dtypes = None"),
    M("user27-target-gpu", "kvplan/options/recommend.py", "    if hardware_given is not None:    # -g names",
      "    if False:    # -g names"),
    M("user27-target-layout", "kvplan/options/recommend.py", 'for key in ("gpus", "nodes", "tp", "pp", "dp", "ep"):',
      'for key in ("gpus", "nodes", "pp", "ep"):'),
    M("user27-target-gpu-and-candidates", "kvplan/options/recommend.py",
      "            return None       # -g is one of the candidates", "            pass       # -g is one of"),
    M("user27-target-dtype-origin", "kvplan/commands/recommend.py", "        if r.dtypes is None:     # a --kv-dtype",
      "        if True:     # a --kv-dtype"),
    M("user27-tp-pp-beyond-gpus", "kvplan/scenario.py", "        if self.dp is None and tp * pp <= gpus:",
      "        if self.dp is None:"),
    M("user27-write-fifo", "kvplan/inputs/files.py",
      '    if kind == "bad":\n        raise KvplanError(f"{what} {path} {why}", "give the name of a regular file',
      '    if False:\n        raise KvplanError(f"{what} {path} {why}", "give the name of a regular file'),
    M("user27-junit-fifo", "kvplan/commands/check.py", '        check_writable(junit, "--junit")', "        pass"),
    M("user27-calibrate-backend", "kvplan/inputs/bench_results.py",
      'backend=backend.strip().lower() if isinstance(backend, str) else None)', 'backend=None)'),
    M("user27-calibrate-backend-warn", "kvplan/options/calibrate.py", "    if other is not None:   # the engine is",
      "    if False:   # the engine is"),
    M("user27-emit-token-budget", "kvplan/engines/base.py",
      "        if chunk is not None and s.max_num_batched_tokens is not None:", "        if False:"),
    M("user27-explain-csv", "kvplan/commands/output.py", '    if explain and fmt == "csv":', "    if False:"),
    M("user27-calibrate-lengths", "kvplan/options/calibrate.py", '    for key in ("prompt", "decode"):    # each run',
      '    for key in ():    # each run'),
    M("user27-include-mtp-none", "kvplan/options/command.py", "        if not built.model.mtp_layers:   # it would",
      "        if False:   # it would"),
    M("user27-emit-fraction-given-pool", "kvplan/engines/base.py",
      "        if s.kv_pool_bytes is None:\n            flags.append(Flag(fraction",
      "        if True:\n            flags.append(Flag(fraction"),
    M("user27-recommend-pd-row-nodes", "kvplan/calc/recommend.py", "nodes=max(s.nodes, -(-two // per_node))",
      "nodes=s.nodes"),
    # --- SGLang's default mem_fraction_static buckets --------------------------------------------------------
    M("sglang-bucket-35", SGL, "gpu_mem_gib < 35:", "gpu_mem_gib < 36:"),
    M("sglang-bucket-35-le", SGL, "gpu_mem_gib < 35:", "gpu_mem_gib <= 35:"),
    M("sglang-bucket-90", SGL, "gpu_mem_gib < 90:", "gpu_mem_gib < 91:"),
    M("sglang-bucket-160", SGL, "gpu_mem_gib < 160:", "gpu_mem_gib < 161:"),
    M("sglang-reserved-small", SGL, "2.8 + parallel_size / 10", "2.8 + parallel_size / 5"),
    M("sglang-reserved-mid", SGL, "9.5 + parallel_size / 2", "9.5 + parallel_size / 4"),
    M("sglang-reserved-large", SGL, "12 + parallel_size / 2", "12 + parallel_size"),
    M("sglang-reserved-huge", SGL, "return 32", "return 31"),
    M("sglang-parallel-size-no-pp", SGL, "ps = par.tp * par.pp", "ps = par.tp"),
    M("sglang-ignores-given-fraction", SGL, "if scenario.mem_fraction_static is not None:", "if False:"),
    M("vllm-ignores-given-utilization", VLLM, "if scenario.gpu_memory_utilization is not None:", "if False:"),
    # --- vLLM's memory budget by release (tests/test_pool_prediction.py against published memory profiles) ------
    M("vllm-sampler-drop-at-v0.16", VLLM, "SAMPLER_BYTES = {(0, 8, 0): 38.4, (0, 17, 0): 14.9}",
      "SAMPLER_BYTES = {(0, 8, 0): 38.4, (0, 16, 0): 14.9}"),
    M("vllm-no-driver-reserve", VLLM, "visible = hw.hbm_bytes - _gib(gib)", "visible = hw.hbm_bytes"),
    M("vllm-graphs-in-budget-from-v0.19", VLLM,
      "        if not self.since((0, 20, 0)):\n            return Bytes(0, default(",
      "        if not self.since((0, 19, 0)):\n            return Bytes(0, default("),
    M("vllm-quantized-embedding-quantized", VLLM, "extra += embed * (2.0 - per) / (par.tp * par.pp)",
      "extra += 0"),
    M("vllm-moe-workspace-dropped", VLLM, "total = int(max(sampler, forward) + moe + stage_in)",
      "total = int(max(sampler, forward) + stage_in)"),
    M("vllm-non-torch-tp1-everywhere", VLLM, "gib = tp1 if par.tp == 1 else tp2 + step * math.log2(par.tp / 2)",
      "gib = tp1"),
    # --- SGLang page size and token pool ---------------------------------------------------------------------
    # (the pre-refactor rule "page = block if block > 16 else 1" is now the page table: 1 token, 64 for MLA)
    # (page_rule, per release and GPU, replaced the table for pages: its form is tried first, since the table's
    # text is still there but no longer read for pages)
    M("sglang-page-ge16", SGL, 'return 1, "attention: fa3 (Hopper) or flashinfer, page 1"',
      'return 16, "attention: fa3 (Hopper) or flashinfer, page 1"',
      (SGL, "block_tokens_table = {FullAttention: 1,", "block_tokens_table = {FullAttention: 16,")),
    M("sglang-page-mla-1", SGL, 'return 64, "Blackwell, v0.5.4+: DeepSeek-architecture MLA defaults',
      'return 1, "Blackwell, v0.5.4+: DeepSeek-architecture MLA defaults',
      (SGL, "SlidingWindowAttention: 1, MLA: 64,", "SlidingWindowAttention: 1, MLA: 1,")),
    M("sglang-page-dsa-1", SGL, 'return 64, "DeepSeek DSA/NSA (V3.2): page 64 x index_kpool"',
      'return 1, "DeepSeek DSA/NSA (V3.2): page 64 x index_kpool"'),
    # sglang-page-always-block and sglang-page-swa-16 dropped: page_rule gives every non-MLA kind the one
    # attention page, so both are now sglang-page-ge16.
    M("sglang-pool-not-page-rounded", SGL, "tokens = tokens // page * page", "tokens = tokens"),
    M("sglang-cell-drops-swa", SGL, 'SlidingWindowAttention: "cell (swa pool)"',
      'SlidingWindowAttention: "mamba pool"'),
    # --- vLLM hybrid groups and sliding-window usage ---------------------------------------------------------
    M("vllm-swa-plus-one-block", VLLM, "max_num_batched_tokens, max_model_len), block) + 1)",
      "max_num_batched_tokens, max_model_len), block))"),
    M("vllm-swa-window-minus-one", VLLM, "min(window - 1 + max_num_batched_tokens",
      "min(window + max_num_batched_tokens"),
    M("vllm-swa-no-max-len-cap", VLLM, "min(window - 1 + max_num_batched_tokens, max_model_len)",
      "(window - 1 + max_num_batched_tokens)"),
    M("vllm-group-size-1.4", VLLM, "largest < 1.5 * smallest", "largest < 1.4 * smallest"),
    M("vllm-group-size-1.6", VLLM, "largest < 1.5 * smallest", "largest < 1.6 * smallest"),
    M("vllm-group-size-le", VLLM, "largest < 1.5 * smallest", "largest <= 1.5 * smallest"),
    # --- vLLM block table and kind table ---------------------------------------------------------------------
    M("vllm-block-32", VLLM, "block_tokens_table = {FullAttention: 16,", "block_tokens_table = {FullAttention: 32,"),
    M("vllm-mla-block-16", VLLM, "SlidingWindowAttention: 16, MLA: 64,", "SlidingWindowAttention: 16, MLA: 16,"),
    M("vllm-swa-as-full", VLLM, 'SlidingWindowAttention: "sliding_window"', 'SlidingWindowAttention: "full"'),
    M("neutral-kind-table-no-indexer", NEUTRAL, 'SparseIndexer: "indexer key", ', ""),
    M("engine-unknown-kind-as-full", BASE, "return self.kind_table[type(kind)]",
      'return self.kind_table.get(type(kind), "full")'),
    # --- vLLM batch defaults and the activation estimate ------------------------------------------------------
    M("batch-defaults-gt70", VLLM, "hbm_capacity_gib.value >= 70 and", "hbm_capacity_gib.value > 70 and"),
    M("batch-defaults-a100-ignored", VLLM, 'and "a100" not in hw.id.lower()', ""),
    M("activation-no-tp-split", BUDGET, "3 * inter // par.tp", "3 * inter"),
    M("activation-logits-fp16", BUDGET, "max_num_seqs * (model.vocab_size or 0) * 4",
      "max_num_seqs * (model.vocab_size or 0) * 2"),
    # --- overflow timing and admission ------------------------------------------------------------------------
    M("offload-threshold-no-tpot", CONC, "growth * (evict / t) / pool", "growth * evict / pool"),
    M("offload-threshold-one-step-more", CONC, "1 - growth * (evict / t)", "1 - growth * (1 + evict / t)"),
    M("growth-not-times-batch", CONC, "growth = batch * marginal", "growth = marginal"),
    M("evict-link-at-line-rate", COSTS, "bw = theo.value * eff.value * 1e9", "bw = theo.value * 1e9"),
    M("admitted-on-full-pool", CONC, "capacity.fit(pool, prompt_cost, shared)))",
      "capacity.fit(pool, prompt_cost, 0)))",
      (CAP, "fit(pool_bytes, prompt_cost, shared_copy_bytes)))", "fit(pool_bytes, prompt_cost, 0)))")),
    M("admitted-after-one-step", CONC, "prompt_cost = capacity.request_bytes(s, s.prompt_tokens, block=block)",
      "prompt_cost = capacity.request_bytes(s, s.prompt_tokens + 1, block=block)",
      (CAP, "prompt_cost = request_bytes(scenario, scenario.prompt_tokens)",
       "prompt_cost = request_bytes(scenario, scenario.prompt_tokens + 1)")),
    M("admitted-uncapped", CAP, "return int(min(max_seqs.number(), fit(pool_bytes, prompt_cost, shared_copy_bytes)))",
      "return int(fit(pool_bytes, prompt_cost, shared_copy_bytes))"),
    M("shared-prefix-copy-unrounded", CAP, "whole = (scenario.shared_prefix_tokens // block) * block",
      "whole = scenario.shared_prefix_tokens"),
    M("shared-prefix-copy-ceil", CAP, "whole = (scenario.shared_prefix_tokens // block) * block",
      "whole = -(-scenario.shared_prefix_tokens // block) * block"),
    M("shared-prefix-request-unrounded", "kvplan/calc/kv.py", "shared = (shared_prefix // block) * block",
      "shared = shared_prefix"),
    # --- capacity: fit and the first full step ----------------------------------------------------------------
    M("fit-ignores-shared-copy", CAP, "return max(pool_bytes - shared_copy_bytes, 0) // max(per_request_bytes, 1)",
      "return max(pool_bytes, 0) // max(per_request_bytes, 1)"),
    M("fit-negative-when-shared-exceeds-pool", CAP, "max(pool_bytes - shared_copy_bytes, 0) //",
      "(pool_bytes - shared_copy_bytes) //"),
    M("fit-rounds-to-nearest", CAP, "return max(pool_bytes - shared_copy_bytes, 0) // max(per_request_bytes, 1)",
      "return round(max(pool_bytes - shared_copy_bytes, 0) / max(per_request_bytes, 1))"),
    M("first-full-step-skips-step-0", CAP, "lo, hi = 0, scenario.decode_tokens", "lo, hi = 1, scenario.decode_tokens"),
    M("first-full-step-last-fitting", CAP, "            lo = mid + 1\n    return lo",
      "            lo = mid + 1\n    return lo - 1"),
    M("first-full-step-at-equality", CAP, "+ shared_copy_bytes > pool_bytes", "+ shared_copy_bytes >= pool_bytes"),
    M("first-full-step-no-shared-copy", CAP, "+ shared_copy_bytes > pool_bytes", " > pool_bytes"),
    M("first-full-step-never-checked", CAP, "if not full(scenario.decode_tokens):",
      "if not full(scenario.decode_tokens - 1):"),
    # --- host tiers (one rule: capacity.host_tier, for concurrency and compare-preemption) ------------------
    M("l2-dram-cap-whole-node", CAP, "per_gpu = Bytes(int(node.value) // per_node,",
      "per_gpu = Bytes(int(node.value),"),
    M("l2-dram-given-whole-node", CAP, 'node = Bytes(dram_bytes_per_node, given("--dram"))',
      'node = Bytes(dram_bytes_per_node * per_node, given("--dram"))'),
    # l2-host-ratio-one dropped: the 2 x pool host-DRAM cap it mutated was removed by the refactor (the tier is
    # the node's DRAM, tests/test_overflow_and_tiers.py::test_l2_does_not_depend_on_the_hbm_pool).
    M("l3-ssd-whole-node", CONC, "ssd_gpu = options.ssd_bytes_per_node // per_node",
      "ssd_gpu = options.ssd_bytes_per_node"),
    M("preemption-shards-per-node-tp", CAP, "gpus_on_node = min(par.tp * par.pp, per_node)",
      "gpus_on_node = par.tp * par.pp"),
    M("preemption-shards-per-node-full", CAP, "gpus_on_node = min(par.tp * par.pp, per_node)",
      "gpus_on_node = per_node"),
    M("host-tier-shards-ignore-pp", CAP, "gpus_on_node = min(par.tp * par.pp, per_node)",
      "gpus_on_node = min(par.tp, per_node)"),
    # --- cost model -----------------------------------------------------------------------------------------
    M("bidir-on-idle-link", COSTS, "factor = settings.bidir_factor if shared_link else 1.0",
      "factor = settings.bidir_factor"),
    M("bidir-never", COSTS, "factor = settings.bidir_factor if shared_link else 1.0", "factor = 1.0"),
    M("copy-overhead-ms", COSTS, "copies * settings.copy_overhead_us * 1e-6",
      "copies * settings.copy_overhead_us * 1e-3"),
    M("copy-overhead-dropped", COSTS, "return copies * settings.copy_overhead_us * 1e-6 + nbytes",
      "return nbytes"),
    M("host-link-override-gib", COSTS, "Rate(override_gbs * 1e9,", "Rate(override_gbs * 2**30,"),
    M("swap-copies-floor", COSTS, "return -(-held // block_tokens) + (1 if has_state else 0)",
      "return held // block_tokens + (1 if has_state else 0)"),
    M("swap-copies-no-state-copy", COSTS, "return -(-held // block_tokens) + (1 if has_state else 0)",
      "return -(-held // block_tokens)"),
    M("recompute-fn-no-tp", COSTS, "/ (mfu * peak_flops * tp)", "/ (mfu * peak_flops)"),
    M("recompute-fn-no-mfu", COSTS, "/ (mfu * peak_flops * tp)", "/ (peak_flops * tp)"),
    # compare-preemption's recompute: F / (MFU x peak x TP); later priced by the step model's prefill_seconds
    M("recompute-no-tp", COSTS, "linear = 2 * (params - routed) * n / tp", "linear = 2 * (params - routed) * n"),
    M("recompute-no-mfu", PRE, "t_rc = f_all / (st.mfu * peak * tp)", "t_rc = f_all / (peak * tp)",
      (PRE, "step = dataclasses.replace(step, prefill_flops_s=peak * st.mfu)",
       "step = dataclasses.replace(step, prefill_flops_s=peak)")),
    M("sync-swap-one-direction", PRE, "exposed = directions * one_way", "exposed = one_way"),
    M("breakeven-overhead-ms", PRE, "- copies * st.copy_overhead_us * 1e-6", "- copies * st.copy_overhead_us * 1e-3"),
    # --- Scenario: deployment shape -------------------------------------------------------------------------
    M("scenario-dp-fill-ignores-pp", SCEN, "dp = gpus // (tp * pp)", "dp = gpus // tp"),
    M("scenario-dp-fill-check-ignores-pp", SCEN, "if gpus % (tp * pp):", "if gpus % tp:"),
    M("scenario-tp-default-below-node", SCEN, "while tp * 2 <= cap:", "while tp * 2 < cap:"),
    M("scenario-tp-default-ignores-gpus", SCEN, "tp = self._default_tp(sized, min(per_node, gpus),",
      "tp = self._default_tp(sized, per_node,"),
    M("scenario-tp-default-unchecked", SCEN, "                model.check_tp(tp)\n                if divides",
      "                if divides"),
    M("scenario-tp-default-halving-to-1", SCEN, "            except KvplanError:\n                pass",
      "            except KvplanError:\n                return 1"),
    M("scenario-ep-divides-tp-only", SCEN, "(tp * dp) % self.ep", "tp % self.ep"),
    M("scenario-ep-counts-pp", SCEN, "(tp * dp) % self.ep", "(tp * pp * dp) % self.ep"),
    M("scenario-dp-given-over-gpus-allowed", SCEN, "if tp * pp * dp > gpus:", "if tp * dp > gpus:"),
    # --- Scenario: request limit, settings, KV dtype --------------------------------------------------------
    M("scenario-limit-no-spec-slots", SCEN, "self.context_tokens + self.spec_tokens > limit",
      "self.context_tokens > limit"),
    M("scenario-limit-at-equality", SCEN, "self.context_tokens + self.spec_tokens > limit",
      "self.context_tokens + self.spec_tokens >= limit"),
    M("scenario-settings-never-refused", SCEN, "if getattr(self, name) is not None and name not in adapter.settings:",
      "if False:"),
    M("sglang-honours-batched-tokens", SGL, 'settings = frozenset({"mem_fraction_static", "kv_pool_bytes",',
      'settings = frozenset({"mem_fraction_static", "max_num_batched_tokens", "kv_pool_bytes",'),
    M("sglang-honours-activation-reserve", SGL, '"runtime_reserve_bytes", "moe_a2a_backend"})',
      '"runtime_reserve_bytes", "moe_a2a_backend", "activation_reserve_bytes"})'),
    M("vllm-honours-mem-fraction", VLLM, 'settings = frozenset({"gpu_memory_utilization", "kv_pool_bytes",',
      'settings = frozenset({"gpu_memory_utilization", "mem_fraction_static", "kv_pool_bytes",'),
    M("kv-dtype-auto-fp8", SCEN, "else KVDtype.BF16) if auto", "else KVDtype.FP8) if auto"),
    M("kv-dtype-auto-ignores-fp16-weights", SCEN, 'KVDtype.FP16 if model.weight_dtype == "fp16"',
      'KVDtype.FP16 if model.weight_dtype == "float16"'),
    M("kv-dtype-auto-case-sensitive", SCEN, 'req.strip().lower() == "auto"', 'req == "auto"'),
    # --- output: CSV units, table formatting, raw JSON -------------------------------------------------------
    M("csv-header-no-unit", OUT, 'header.append(f"{col} ({unit})" if unit and unit not in col else col)',
      "header.append(col)"),
    M("csv-header-unit-twice", OUT, "if unit and unit not in col else col", "if unit else col"),
    M("text-token-bytes-as-bytes", OUT, "if isinstance(value, TokenBytes):", "if isinstance(value, Rate):"),
    M("text-bytes-ignore-units", OUT, "return format_bytes(v, units)", 'return format_bytes(v, "iec")'),
    M("json-values-as-text", OUT, "        return value.raw()\n    if isinstance(value, Note)",
      "        return text(value)\n    if isinstance(value, Note)"),
    M("csv-cells-as-text", OUT, 'writer.writerow(["" if (c := raw(v)) is None else c for v in row])',
      'writer.writerow(["" if (c := text(v)) is None else c for v in row])'),
    # --- SGLang release facts (docs/engine-rules-by-release.md section 10) ---------------------------------------
    M("sglang-dp-running-per-rank", SGL, "value=str(plan.batch.value * par.dp)", "value=str(plan.batch.value)"),
    M("sglang-pp-size-in-0.4.6", SGL, "PP_SIZE_SINCE = (0, 4, 7)", "PP_SIZE_SINCE = (0, 4, 6)"),
    M("sglang-fp4-a-release-early", SGL, "FP4_E2M1_SINCE, NVFP4_SINCE = (0, 5, 5), (0, 5, 16)",
      "FP4_E2M1_SINCE, NVFP4_SINCE = (0, 5, 4), (0, 5, 16)"),
    M("sglang-nvfp4-name-a-release-early", SGL, "FP4_E2M1_SINCE, NVFP4_SINCE = (0, 5, 5), (0, 5, 16)",
      "FP4_E2M1_SINCE, NVFP4_SINCE = (0, 5, 5), (0, 5, 15)"),
    M("pinned-release-accepts-any-kv-dtype", "kvplan/engines/base.py",
      "if first is None or self.version is None or self.version >= first[0]:",
      "if first is None or self.version is None or self.version >= (0,):"),
    # --- vLLM release facts (docs/engine-rules-by-release.md section 11) -----------------------------------------
    M("vllm-offload-flags-a-release-early", VLLM, "OFFLOAD_SINCE: Release = (0, 14, 0)",
      "OFFLOAD_SINCE: Release = (0, 13, 0)"),
    M("vllm-mla-fp8-a-release-early", VLLM, "MLA_FP8_SINCE: Release = (0, 10, 2)",
      "MLA_FP8_SINCE: Release = (0, 10, 1)"),
    M("vllm-nvfp4-when-named", VLLM, "KVDtype.NVFP4: ((0, 21, 0), blob(", "KVDtype.NVFP4: ((0, 20, 0), blob("),
    M("vllm-per-token-head-a-release-early", VLLM, "KVDtype.FP8_PER_TOKEN_HEAD: ((0, 20, 0),",
      "KVDtype.FP8_PER_TOKEN_HEAD: ((0, 19, 0),"),
    M("vllm-mla-runs-nvfp4", VLLM, "if mla and kv_dtype is KVDtype.NVFP4:",
      "if mla and kv_dtype is KVDtype.NVFP4 and False:"),
    M("vllm-ds-mla-without-indexer", VLLM,
      "if mla and kv_dtype is KVDtype.FP8_DS_MLA and SparseIndexer not in kinds:",
      "if mla and kv_dtype is KVDtype.FP8_DS_MLA:"),
    M("sglang-fp4-gqa-in-055", SGL, "FP4_MHA_SINCE = (0, 5, 6)", "FP4_MHA_SINCE = (0, 5, 5)"),
    M("sglang-pp-launches-on-046", SGL, "if par.pp > 1 and not self.since(PP_SIZE_SINCE):",
      "if par.pp > 1 and False:"),
    M("sglang-takes-per-token-head", SGL, "        if kv_dtype not in SGLANG_KV_FLAGS:\n",
      "        if kv_dtype not in SGLANG_KV_FLAGS and False:\n"),
    M("vllm-v32-before-sparse-backend", VLLM, "DS_MLA_SINCE: Release = (0, 11, 0)",
      "DS_MLA_SINCE: Release = (0, 10, 2)"),
    M("vllm-fp8-mla-any-gpu-in-0102", VLLM, "MLA_FP8_ANY_GPU_AFTER: Release = (0, 11, 1)",
      "MLA_FP8_ANY_GPU_AFTER: Release = (0, 10, 2)"),
    # --- unstyled table layout (kvplan/render/textlayout.py: rich's layout without rich) ------------------------------
    M("layout-min-width-without-padding", TL, "floor = max(0, column.min_width + 1)",
      "floor = max(0, column.min_width)"),
    M("layout-cut-truncated", TL, "share = min(lim, round(r * total / left_ratio))",
      "share = min(lim, int(r * total / left_ratio))"),
    M("layout-header-top-aligned", TL, "rendered[k] = blank + r if n == 0 else r + blank", "rendered[k] = r + blank"),
    M("layout-right-keeps-spaces", TL, "piece = piece.rstrip()[:width]", "piece = piece[:width]"),
    M("layout-later-columns-padded-twice", TL, "return 2 if self.first else 1", "return 2"),
    M("layout-box-extra-divider", TL, "return 2 + n_columns - 1", "return 2 + n_columns"),
    M("layout-no-remeasure", TL, "[column_range(c, cs, w)[1] or 0", "[w or 0"),
    M("layout-fold-offset", TL, "used = len(piece)", "used = 0"),
    M("layout-spaces-no-width", TL, "(max(map(len, words)) if words else longest_line)",
      "(max(map(len, words)) if words else 0)"),
    M("layout-tty-plain", OUT, "if not out.isatty() and plain_ok(", "if plain_ok("),
    # --- compare-preemption host DRAM (now capacity.host_tier, above) ---------------------------------------
    # --- layer kinds -----------------------------------------------------------------------------------------
    M("mamba2-groups-not-replicated", LAYERS, "return self.n_groups if self.n_groups % tp == 0 else tp",
      "return self.n_groups"),
    M("mamba2-conv-kernel-full", LAYERS, "(self.conv_kernel - 1) * ((inner + 2 * self._groups(tp)",
      "(self.conv_kernel) * ((inner + 2 * self._groups(tp)"),
    M("mamba2-ssm-heads-unsplit", LAYERS, "(self.n_heads // tp) * self.head_dim * self.state_size",
      "self.n_heads * self.head_dim * self.state_size"),
    M("gdn-ssm-heads-unsplit", LAYERS, "(self.num_v_heads // tp) * self.head_k_dim * self.head_v_dim",
      "self.num_v_heads * self.head_k_dim * self.head_v_dim"),
    M("gqa-no-replication-floor", LAYERS, "return max(1, self.kv_heads // tp)", "return self.kv_heads // tp"),
    M("sliding-window-cap-plus-one", LAYERS, "    def tokens_cap(self) -> int | None:\n        return self.window",
      "    def tokens_cap(self) -> int | None:\n        return self.window + 1"),
    # --- kvplan size --compare -------------------------------------------------------------------------------
    M("compare-tp-default-1", "kvplan/calc/size.py", ".tp > 1 else 8", ".tp > 1 else 1"),
    M("compare-tp-ignores-given", "kvplan/calc/size.py", "tp_shown = ", "tp_shown = 8 or "),
    # --- KV sums ---------------------------------------------------------------------------------------------
    M("kv-stage-bound-inclusive", "kvplan/calc/kv.py", "if stage.start <= i < stage.stop",
      "if stage.start <= i <= stage.stop"),
    # --- the decode step model, tpot and pd (kvplan/calc/costs.py, tpot.py, pd.py) ---------------------------
    M("speculative-mtp1-accept", TPOT, "    1: (1.85, ", "    1: (1.9, "),
    M("speculative-any-mtp-model", "kvplan/options/command.py",
      'if not built.model.mtp_layers or not built.model.id.startswith("deepseek-"):', "if not built.model.mtp_layers:"),
    M("speculative-user-accept-ignored", "kvplan/options/command.py",
      "    if accept is None:\n        return built, k, f",
      "    if True:\n        return built, k, f"),
    M("upcast-moe-latency-off", COSTS, 'moe_latency = moe_layers * f.value("upcast_moe_us") * 1e-6 if upcast_experts',
      'moe_latency = 0 * f.value("upcast_moe_us") * 1e-6 if upcast_experts'),
    M("upcast-moe-latency-every-moe", COSTS, "1e-6 if upcast_experts else 0.0", "1e-6 if is_moe else 0.0"),
    M("upcast-moe-latency-per-layer", COSTS, 'moe_latency = moe_layers * f.value("upcast_moe_us")',
      'moe_latency = model.num_layers * f.value("upcast_moe_us")'),
    M("upcast-moe-latency-at-batch-0", COSTS, "self.moe_latency_s * (tokens > 0)", "self.moe_latency_s"),
    M("step-moe-coverage-k", COSTS, "(1 - (1 - self.top_k / self.num_experts) ** t)",
      "(1 - (1 - (self.top_k + 1) / self.num_experts) ** t)"),
    M("step-attention-bf16-peak", COSTS, "compute_peak(hw, \"bf16\") * f.value(\"mfu\")", "peak * f.value(\"mfu\")"),
    M("step-two-allreduces", COSTS, "comm_layer = (2 * allreduce_latency, 2 * per_token)",
      "comm_layer = (allreduce_latency, per_token)"),
    M("step-overhead-per-layer", COSTS, "(model.num_layers * f.value(\"overhead_us_per_layer\")",
      "((model.num_layers - 1) * f.value(\"overhead_us_per_layer\")"),
    M("prefill-weight-floor", COSTS, "total += max(weights, compute) + self.prefill_comm(n) + self.overhead_s",
      "total += compute + self.prefill_comm(n) + self.overhead_s"),
    M("prefill-experts-over-ep", COSTS, "2 * routed * n / ep", "2 * routed * n / tp"),
    M("mla-absorbed-flops", LAYERS, "/ tp * (2 * self.kv_lora_rank + self.qk_rope_head_dim)",
      "/ tp * (self.kv_lora_rank + self.qk_rope_head_dim)"),
    M("tpot-cells-past-pool", "kvplan/calc/tpot.py", "if batches[i] <= holds[j] else", "if True else"),
    M("tpot-accept-bound", "kvplan/calc/tpot.py", "if top > k + 1:", "if top > k + 2:"),
    M("pd-mean-tpot-interference", COSTS, "return plain + prefill_seconds * others / max(decode_tokens, 1)",
      "return plain + prefill_seconds * others / max(decode_tokens, 1) / 2"),
    M("pd-exposed-last-layer", "kvplan/calc/pd.py", "exposed = max(transfer / layers, transfer - t_pf)",
      "exposed = max(0.0, transfer - t_pf)"),
    M("scenario-limit-spec-rows", SCEN, "return limit is not None and context + self.spec_tokens > limit",
      "return limit is not None and context > limit"),
    M("scenario-default-tp-divides", SCEN, "if divides is None or divides % tp == 0:", "if True:"),
    M("scenario-ep-dense", SCEN, "if self.ep is not None and model.params_expert is None:", "if False:"),
    # --- kvplan recommend, its --target search and --emit flags ---------------------------------------------
    M("recommend-slo-batch-off-by-one", "kvplan/calc/slo.py",
      "            lo = mid\n        else:\n            hi = mid\n    return lo, hi\n",
      "            lo = mid\n        else:\n            hi = mid\n    return lo - 1, hi\n"),
    M("recommend-tier-not-capped", REC, "tier_gpu = min(tier_gpu, int(dram_gpu.value))",
      "tier_gpu = max(tier_gpu, int(dram_gpu.value))"),
    M("recommend-prefix-share-rule", REC, "agrees = share.number() < PREFILL_SHARE_SMALL",
      "agrees = share.number() <= 1"),
    M("recommend-swap-always", REC, "swap_wins = not this.recompute_cheaper", "swap_wins = True"),
    M("flags-first-release", BASE, "version is not None and version < f.since:",
      "version is not None and version <= f.since:"),
    M("sglang-hicache-ratio-cap", SGL, "ratio = min(HICACHE_RATIO, dram / pool)",
      "ratio = max(HICACHE_RATIO, dram / pool)"),
    M("vllm-offload-gib", VLLM, "offload_bytes_per_replica.value // 2**30", "offload_bytes_per_replica.value // 10**9"),
    M("sizing-tpot-at-needed-batch", SIZING, "        ok &= b >= min(need, top)", "        ok &= b >= 1"),
    M("sizing-rate-all-replicas", SIZING, "        rate = closed_form_rate(par.dp, batch or (i + 1),",
      "        rate = closed_form_rate(1, batch or (i + 1),"),
    M("sizing-concurrency-all-replicas", SIZING, "capacity.fit(pool, capacity.request_bytes(s, ctx)) * par.dp",
      "capacity.fit(pool, capacity.request_bytes(s, ctx))"),
    M("sizing-tie-more-room", SIZING, "                                    -c.concurrency))",
      "                                    c.concurrency))"),
    M("sizing-each-gpu-type-shown", SIZING,
      "shown = (firsts + [c for c in passing if c not in firsts])[:max(top, len(firsts))]", "shown = passing[:top]"),
    # --- check: [workload] and units ---------------------------------------------------------------------------
    M("check-assertion-arrivals-win", "kvplan/inputs/plan_file.py", "        if set(group) & set(own):",
      "        if False:"),
    M("plan-seconds-need-a-unit", "kvplan/inputs/plan_file.py",
      "raise fail(f\"{name} = {shorten(value)} has no unit\", f'write it as a duration with its unit",
      "return float(value)\n        raise fail(f\"{name} = {shorten(value)} has no unit\", f'write it as a "
      "duration with its unit"),
    # --- check: assertions against their bounds (kvplan/calc/check.py, kvplan/inputs/plan_file.py) -------------
    M("check-at-least-strict", CHECK, "        passed = m >= b\n", "        passed = m > b\n"),
    M("check-at-most-strict", CHECK, "        passed = m <= b\n", "        passed = m < b\n"),
    M("check-baseline-count-rounds-outward", CHECK,
      "bound = math.ceil(bound) if a.op == \">=\" else math.floor(bound)",
      "bound = math.floor(bound) if a.op == \">=\" else math.ceil(bound)"),
    M("check-baseline-allowance-wrong-way", CHECK,
      "a.baseline * (1 - a.within_baseline if a.op == \">=\" else 1 + a.within_baseline)",
      "a.baseline * (1 + a.within_baseline if a.op == \">=\" else 1 - a.within_baseline)"),
    M("check-weights-room-keeps-runtime", CHECK,
      "room = requested - activation - runtime\n", "room = requested - activation\n"),
    M("check-margin-sign", CHECK, "margin = type(measured)(m - b,", "margin = type(measured)(b - m,"),
    M("plan-us-as-ms", PLAN, '{"ms": 1e-3, "s": 1.0, "us": 1e-6}', '{"ms": 1e-3, "s": 1.0, "us": 1e-3}'),
    M("plan-baseline-count-op", PLAN, 'BASELINE_OP = {"count": ">=",', 'BASELINE_OP = {"count": "<=",'),
    M("plan-percent-over-10", PLAN, "number = float(value.strip()[:-1]) / 100",
      "number = float(value.strip()[:-1]) / 10"),
    M("plan-extends-one-more", PLAN, "if len(chain) + 1 >= MAX_EXTENDS:", "if len(chain) + 1 > MAX_EXTENDS:"),
    # --- startup_log: what a log states, as scenario options (kvplan/inputs/startup_log.py) -------------------
    M("log-nodes-floor", LOG, 'out["nodes"] = str(-(-gpus // per_node(out["hardware"])))',
      'out["nodes"] = str(gpus // per_node(out["hardware"]))'),
    M("log-gpus-ignore-pp", LOG, 'gpus = int(out["tp"]) * int(out.get("pp") or 1) * int(out["dp"])',
      'gpus = int(out["tp"]) * int(out["dp"])'),
    M("log-dp-attention-keeps-tp", LOG, "        tp_value //= dp_value\n", "        tp_value //= 1\n"),
    M("log-expert-parallel-tp-only", LOG, 'out["ep"] = str(int(out["tp"]) * int(out["dp"]))',
      'out["ep"] = str(int(out["tp"]))'),
    M("log-release-not-pinned-up", LOG, "pinned = min(max(log.release, oldest), newest)",
      "pinned = min(log.release, newest)"),
    M("log-least-is-most", LOG, "return min(found, key=lambda f: f.value) if found else None",
      "return max(found, key=lambda f: f.value) if found else None"),
    M("log-memory-match-tight", LOG, "MEMORY_MATCH = 0.015", "MEMORY_MATCH = 0.005"),
    # --- explain_log: the log's pool and the engine's figures reproduced (kvplan/calc/explain_log.py) -------------
    M("explain-sglang-no-page-slots", EXPLAIN, "slots = _whole(tokens_fact) + page", "slots = _whole(tokens_fact)"),
    M("explain-sglang-k-is-kv", EXPLAIN, '"K size (GiB, the log\'s \'GB\'; V is the same)", size / 2',
      '"K size (GiB, the log\'s \'GB\'; V is the same)", size'),
    M("explain-sglang-profile-fraction", EXPLAIN, "rest = after - before * (1 - fraction)",
      "rest = after - before * fraction"),
    M("explain-sglang-tokens-not-paged", EXPLAIN, "tokens = max(int(rest * GIB // profile_cell), 0) // page * page",
      "tokens = max(int(rest * GIB // profile_cell), 0)"),
    M("explain-vllm-blocks-as-tokens", EXPLAIN,
      'tokens = _whole(fact) * block if name == "gpu_blocks" else _whole(fact)', "tokens = _whole(fact)"),
    M("explain-requests-one-replica", EXPLAIN, "total_v = Count(fit * replicas,", "total_v = Count(fit,"),
    M("explain-rounding-band-tight", EXPLAIN, "HALF_CENT = 0.005", "HALF_CENT = 0.0005"),
    # --- workload: length distributions, traces, caps (kvplan/inputs/workload.py) -------------------------------
    M("workload-uniform-p99-plus-one", WL, "return self.a + math.ceil(0.99 * (self.b - self.a + 1)) - 1",
      "return self.a + math.ceil(0.99 * (self.b - self.a + 1))"),
    M("workload-uniform-exclusive", WL, "rng.integers(int(self.a), int(self.b), endpoint=True,",
      "rng.integers(int(self.a), int(self.b), endpoint=False,"),
    M("workload-lognormal-larger-root", WL, "sigma = Z99 - math.sqrt(Z99 ** 2 - 2 * gap)",
      "sigma = Z99 + math.sqrt(Z99 ** 2 - 2 * gap)"),
    M("workload-lognormal-mean-as-median", WL, 'LengthDist("lognormal", math.log(mean) - sigma ** 2 / 2, sigma, raw)',
      'LengthDist("lognormal", math.log(mean), sigma, raw)'),
    M("workload-prompt-cap-full-length", WL, "prompts = np.minimum(drawn_p, max_len - 1)",
      "prompts = np.minimum(drawn_p, max_len)"),
    M("workload-output-uncapped", WL, "outputs = np.minimum(drawn_o, max_len - prompts)", "outputs = drawn_o"),
    M("workload-duration-inclusive", WL, 'np.searchsorted(arrivals, duration_s, side="left")',
      'np.searchsorted(arrivals, duration_s, side="right")'),
    M("workload-trace-equal-times-refused", WL, "            if t < last:\n", "            if t <= last:\n"),
    # --- calibrate: fitting hbm, mfu and the overhead to measured points (kvplan/calc/calibrate.py) -------------
    M("calibrate-ms-over-100", CALIB, 't / 1000 if name.endswith("_ms") else t',
      't / 100 if name.endswith("_ms") else t'),
    M("calibrate-zero-accepted", CALIB, "if not math.isfinite(value) or value <= 0:",
      "if not math.isfinite(value) or value < 0:"),
    M("calibrate-fractional-context", CALIB, "if batch != int(batch) or context != int(context):",
      "if batch != int(batch):"),
    M("calibrate-comments-read", CALIB, "(line for line in text.splitlines() if not line.startswith(\"#\"))",
      "(line for line in text.splitlines())"),
    M("calibrate-hbm-uncapped", CALIB, "hbm = min(max(1 / u, 0.01), 1.0) if u > 0 else 1.0",
      "hbm = max(1 / u, 0.01) if u > 0 else 1.0"),
    M("calibrate-negative-overhead", CALIB, "per_step = max(values.get(2, per_step), 0.0)",
      "per_step = values.get(2, per_step)"),
    # --- hf_import: a config.json's layer layout and dtypes (kvplan/inputs/hf_import.py) ------------------------
    M("hf-gemma3-pattern-from-0", HF, "return [_SLIDING if (i + 1) % pattern else _FULL for i in range(n)]",
      "return [_SLIDING if i % pattern else _FULL for i in range(n)]"),
    M("hf-alternating-from-0", HF, "return [_SLIDING if (i + 1) % 2 else _FULL for i in range(n)]",
      "return [_SLIDING if i % 2 else _FULL for i in range(n)]"),
    M("hf-llama4-nope-from-0", HF, "flags = [int((i + 1) % interval != 0) for i in range(n)]",
      "flags = [int(i % interval != 0) for i in range(n)]"),
    M("hf-linear-interval-from-0", HF, "return [_LINEAR if (i + 1) % interval else _FULL for i in range(n)]",
      "return [_LINEAR if i % interval else _FULL for i in range(n)]"),
    M("hf-max-window-layers-exclusive", HF, "return [_SLIDING if i >= first_sliding else _FULL for i in range(n)]",
      "return [_SLIDING if i > first_sliding else _FULL for i in range(n)]"),
    M("hf-no-kv-heads-as-mqa", HF, "            kv_heads = q_heads\n", "            kv_heads = 1\n"),
    M("hf-gptq-bits-swapped", HF, 'return "int4" if quant["bits"] == 4 else "int8"',
      'return "int8" if quant["bits"] == 4 else "int4"'),
    M("hf-v32-fp8-per-tensor", HF, 'fp8_layout = "ds_mla" if is_v32 else "per_tensor"', 'fp8_layout = "per_tensor"'),
    # --- tpot: the decode figures of kvplan tpot (kvplan/calc/tpot.py) --------------------------------------------
    M("tpot-per-gpu-ignores-pp", TPOT, "    gpus = par.tp * par.pp\n\n", "    gpus = par.tp\n\n"),
    M("tpot-per-gpu-per-replica", TPOT, "per_gpu = Number(b / mean / gpus,", "per_gpu = Number(b / mean,"),
    M("tpot-batch-at-fit-refused", TPOT, "    if b > fit:\n", "    if b >= fit:\n"),
    M("tpot-accept-no-floor", TPOT, "return ((0.0, float(a0)), ((a0 - 1) / slope, 1.0))",
      "return ((0.0, float(a0)), (a0 / slope, 0.0))"),
    M("tpot-mtp-one-draft-step", COSTS, "draft = k * mtp * per_layer", "draft = mtp * per_layer"),
    # simulate --speculative (kvplan/calc/sim/steps.py's Prices, tests/test_simulate_speculative.py)
    M("sim-spec-accept-ignored", "kvplan/calc/sim/steps.py", "w, cd, a0 = self.spec_k + 1, self.cd, self.a0",
      "w, cd, a0 = self.spec_k + 1, self.cd, 1.0"),
    M("sim-spec-verify-k-tokens", "kvplan/calc/sim/steps.py", "w, cd, a0 = self.spec_k + 1, self.cd, self.a0",
      "w, cd, a0 = self.spec_k, self.cd, self.a0"),
    M("sim-spec-one-draft-step", "kvplan/calc/sim/steps.py", "self.cd = self.spec_k * self.mtp / sm.layers",
      "self.cd = self.mtp / sm.layers"),
    M("sim-spec-run-crosses-the-clamp", "kvplan/calc/sim/steps.py", "                if last < k:",
      "                if last < 0:"),
    M("sim-spec-clamped-accept-zero", "kvplan/calc/sim/steps.py",
      "alpha = float(np.sum(self.acc0[piece])) + float(acc1 @ x)", "alpha = float(acc1 @ x)"),
    M("sim-spec-digamma-series", "kvplan/calc/sim/steps.py", "inv * (1 / 120 - inv", "inv * (1 / 121 - inv"),
    M("sim-spec-inverse-sum-shift", "kvplan/calc/sim/steps.py",
      "return (_digamma(z - t0 + 1) - _digamma(z - t1 + 1)) / beta",
      "return (_digamma(z - t0) - _digamma(z - t1)) / beta"),
    M("sim-spec-accept-unclamped", "kvplan/calc/sim/steps.py",
      "np.mean(np.interp(np.asarray(x, dtype=float), self.xs, self.ys))",
      "np.mean(self.ys[0] + 0 * np.asarray(x, dtype=float))"),
    # acceptance against context (--accept A@CONTEXT,...: kvplan/calc/tpot.py's Accept, steps.py's pieces)
    M("spec20-accept-at-ignores-points", TPOT, "return np.interp(np.asarray(contexts, dtype=float), xs, ys)",
      "return np.interp(np.asarray(contexts, dtype=float), xs, ys * 0 + ys[0])"),
    M("spec20-parse-equal-contexts", TPOT, "if points and c <= points[-1][0]:", "if points and c < points[-1][0]:"),
    M("spec20-parse-split-thousands", TPOT, 'parts = re.split(r",(?=\\s*" + _ACCEPT_NUMBER + r"\\s*@)", text)',
      'parts = text.split(",")'),
    M("spec20-tpot-top-first-point", TPOT, "top = max(a for _, a in o.accept)", "top = o.accept[0][1]"),
    M("spec20-sim-top-first-point", "kvplan/calc/sim/records.py", "top = max(a for _, a in profile)",
      "top = profile[0][1]"),
    M("spec20-sim-piece-intercepts", "kvplan/calc/sim/steps.py", "ys[:-1] - slope * xs[:-1]",
      "ys[:-1] - slope * xs[1:]"),
    M("spec20-sim-run-crosses-a-point", "kvplan/calc/sim/steps.py",
      "last = math.ceil(gap)", "last = math.ceil(gap) + 1"),
    M("spec20-sim-rising-digamma-sign", "kvplan/calc/sim/steps.py",
      "return (_digamma(w + t1) - _digamma(w + t0)) / -beta", "return (_digamma(w + t1) - _digamma(w + t0)) / beta"),
    M("spec20-sim-profile-ignored", "kvplan/calc/sim/steps.py", "self.varies = bool(np.any(ys != ys[0]))",
      "self.varies = False"),
    M("spec20-tpot-no-accept-assumption", "kvplan/present/tpot.py",
      "assumptions += (accept_assumption(o.accept, o.accept_source),)", "assumptions += ()"),
    M("spec20-sim-no-accept-assumption", "kvplan/present/simulate.py",
      "assumptions = (*assumptions, accept_assumption(o.speculative[1], o.accept_source))",
      "assumptions = (*assumptions,)"),
    M("spec20-mtp-draft-kv-dropped", "kvplan/options/command.py",
      "        built = built.with_(mtp_layers=built.model.mtp_layers)\n    if accept is None:",
      "        pass\n    if accept is None:"),
    M("spec20-normalize-order-unchecked", TPOT, "rising = all(c1 > c0 for", "rising = True or all(c1 > c0 for"),
    M("spec20-eagle3-draft-kv-dropped", "kvplan/options/command.py", "built = built.with_(mtp_layers=1)",
      "built = built.with_(mtp_layers=0)"),
    M("sim-spec-mixed-plain", "kvplan/calc/sim/steps.py", "return mixed - alone + decode, decode",
      "return mixed, alone"),
    M("spec-verify-runs-the-mtp-layer", COSTS, "    if speculative and scenario.mtp_layers:",
      "    if False and scenario.mtp_layers:"),
    M("sim-spec-verify-runs-the-mtp-layer", "kvplan/calc/simulate.py",
      "sm = costs.step_model(s, speculative=o.speculative is not None)", "sm = costs.step_model(s)"),
    M("spec-step-draft-no-layer-overhead", COSTS,
      'per_layer = (plain - self.overhead_s) / self.layers + self.factors.value("overhead_us_per_layer") * 1e-6',
      "per_layer = (plain - self.overhead_s) / self.layers"),
    M("tpot-kv-bound-ignores-moe", TPOT, 'split["attention"] > split["weights"] + split["moe"]',
      'split["attention"] > split["weights"]'),
    # --- pd: disaggregated against colocated (kvplan/calc/pd.py) ---------------------------------------------------
    M("pd-ttft-no-handover", PD, "fixed = t_pf + exposed + o.handover_seconds + front",
      "fixed = t_pf + exposed + front"),
    M("pd-transfer-line-rate", PD, "transfer = nbytes / (nic * link_eff)", "transfer = nbytes / nic"),
    M("pd-colocated-one-instance", PD, "col_rps = good_rate * instances", "col_rps = good_rate"),
    M("pd-split-max-capacity", PD, "bound = min(n_p * c_p, n_d * c_d)", "bound = max(n_p * c_p, n_d * c_d)"),
    M("pd-nic-gib", PD, "Rate(o.nic_gbps * 1e9,", "Rate(o.nic_gbps * 2**30,"),
    M("pd-share-unshared-decode", PD, "share = t_pf / (t_pf + d * plain / col.batch)",
      "share = t_pf / (t_pf + d * plain)"),
    # the prefill queue (M/D/c) and the TTFT the SLO model judges there
    M("pd-queue-one-server", PD, "free = start[i - servers] + service", "free = start[i - 1] + service"),
    M("pd-queue-ttft-without-prefill", PD, "ok = wait_q + fixed <= targets.ttft", "ok = wait_q <= targets.ttft"),
    # the decode role's pool holds requests at the mean context, as its steady TPOT prices them
    # a role layout must leave one instance of the other role
    M("pd-role-takes-every-gpu", PD, "spare = 0 if colocated else par.pp ", "spare = 0 "),
    # the split's prefill GPUs count its TP
    M("pd-split-counts-instances-not-gpus", PD, "n_d = (total - n_p * lp.gpus) // ld.gpus",
      "n_d = (total - n_p) // ld.gpus"),
    # --- recommend (further rules; the first four are above) --------------------------------------------------------
    M("recommend-small-batch-strict", REC, "agrees = batch <= SMALL_BATCH", "agrees = batch < SMALL_BATCH"),
    M("recommend-share-decode-unshared", REC, "replica_seconds = t_pf + s.decode_tokens * tpot_b / batch",
      "replica_seconds = t_pf + s.decode_tokens * tpot_b"),
    M("recommend-victim-young-max", REC, "young = min(VICTIM_SHORT_TOKENS, s.decode_tokens)",
      "young = max(VICTIM_SHORT_TOKENS, s.decode_tokens)"),
    M("recommend-tier-replica-ignores-pp", REC, "    tp_ranks = par.tp * par.pp\n", "    tp_ranks = par.tp\n"),
    M("recommend-batch-ignores-engine-cap", REC, "ceiling = max(min(cap, engine_cap, MAX_BATCH), 1)",
      "ceiling = max(min(cap, MAX_BATCH), 1)"),
    # --- the batch row from the SLO model (issue 21): simulated, searched, and the --target search's best ------------
    M("advice-batch-closed-form", REC, "batch = meeting or ceiling", "batch = closed or ceiling"),
    M("advice-bisection-stops-early", "kvplan/calc/slo.py", "    while hi - lo > 1:           # lo meets, hi misses",
      "    while hi - lo > 2:           # lo meets, hi misses"),
    M("advice-search-not-rejudged", SIZING, "found[j] = _rejudge(c, scen[id(c)], targets, slo)", "found[j] = c"),
    M("advice-rejudge-ignores-need", SIZING, "batch = sb.meeting if sb.meeting >= need else 0",
      "batch = sb.meeting"),
    M("advice-rejudge-rate-at-closed-batch", SIZING, "rate = closed_form_rate(par.dp, sb.batch, sb.prefill",
      "rate = closed_form_rate(par.dp, c.batch, sb.prefill"),
    # --- the Hub: the cache's absent files are not asked for ----------------------------------------------------
    M("hub-known-absent", "kvplan/inputs/hub.py", "        known_absent = found is not None and path is None",
      "        known_absent = False"),
    # --- simulate: the scheduler's rule book, the replica's mechanics, the step prices and the metrics ------------
    M("simulate-fewest-tokens-oldest-of-equals",
      "kvplan/engines/scheduling.py", "return b - 1 - int(np.argmin(ctx[::-1]))",
      "return int(np.argmin(ctx))"),
    M("simulate-protect-the-longer-half-rounded-up",
      "kvplan/engines/scheduling.py", "free_[np.argsort(-ctx, kind=\"stable\")[: b // 2]]",
      "free_[np.argsort(-ctx, kind=\"stable\")[: (b + 1) // 2]]"),
    M("simulate-admit-watermark-strict",
      "kvplan/engines/scheduling.py", "if not (free - need >= wm and", "if not (free - need > wm and",
      ("kvplan/engines/scheduling.py", "if not (free - need >= self.wm_blocks and (thr",
       "if not (free - need > self.wm_blocks and (thr"),      # admit's check of the waiting head alone
      ("kvplan/calc/simulate.py", "(g[i] - 1 if g[i] else 0)] >= wm:",          # run_book's
       "(g[i] - 1 if g[i] else 0)] > wm:")),
    M("simulate-resume-watermark-strict", "kvplan/engines/scheduling.py", "return r.free - need >= self.wm_blocks",
      "return r.free - need > self.wm_blocks"),
    M("simulate-admit-in-the-preemption-instant",
      "kvplan/engines/scheduling.py", "if r.preempted or not (r.waiting or r.swapped):",
      "if not (r.waiting or r.swapped):",
      ("kvplan/calc/simulate.py", "if (waiting or swapped) and not r.preempted:",   # run_book's copy of the rule
       "if waiting or swapped:")),
    M("simulate-recompute-to-the-back",
      "kvplan/engines/scheduling.py", "r.waiting.appendleft(i)   # recompute", "r.waiting.append(i)   # recompute",
      ("kvplan/calc/simulate.py", "                    waiting.appendleft(i)\n",    # run_book's inline preemption
       "                    waiting.append(i)\n")),
    # --- simulate: run_book's written-out copies (speed19r): the inline preemption, overflow step and run price ---
    M("speed-inline-preempt-blocks-of-the-next-token", "kvplan/calc/simulate.py",
      "                    h = btl[cache]\n", "                    h = btl[cache + 1]\n"),
    M("speed-inline-preempt-need-not-reduced", "kvplan/calc/simulate.py",
      "                    need1 -= btl[cache + 1] - btl[cache]\n", "                    need1 -= 1\n"),
    M("speed-inline-preempt-oldest-victim", "kvplan/calc/simulate.py",
      "                    i = running.pop()\n                    v = xo_l[i]",
      "                    i = running.pop(0)\n                    v = xo_l[i]"),
    M("speed-inline-preempt-tokens-one-short", "kvplan/calc/simulate.py",
      "                    g[i] = cache + 1 - Pl[i]\n", "                    g[i] = cache - Pl[i]\n"),
    M("speed-fused-step-no-event", "kvplan/calc/simulate.py",
      "                events += 1\n                if not events & 4095 or events > MAX_EVENTS:\n"
      "                    _every_4096(r, events, progress)\n                mark((r.now,",
      "                if not events & 4095 or events > MAX_EVENTS:\n"
      "                    _every_4096(r, events, progress)\n                mark((r.now,"),
    M("speed-overflow-step-wraps-one-early", "kvplan/calc/simulate.py",
      "k, added = q * block + block - s0 + m - 1, q * b + acc[m - 1]",
      "k, added = q * block + block - s0 + m - 2, q * b + acc[m - 2]"),
    M("speed-overflow-step-one-past", "kvplan/calc/simulate.py",
      "                        m = bisect_right(acc, rest)\n",
      "                        m = bisect_right(acc, rest + 1)\n"),
    # the run's price: run_book and decode_fast call steps._affine_max_sum (no written-out copy)
    M("speed-run-price-crossing-rounded-down", "kvplan/calc/sim/steps.py",
      "return min(max(math.ceil(-d0 / d1), 0), k), v0, v1, u0, u1",
      "return min(max(math.floor(-d0 / d1), 0), k), v0, v1, u0, u1"),
    M("speed-run-price-one-side-only", "kvplan/calc/sim/steps.py",
      "        return k * b0 + b1 * k * (k - 1) / 2\n", "        return k * a0 + a1 * k * (k - 1) / 2\n"),
    # --- speed19s: decode_fast (every scheduler's O(1) run written out), mixed_parts' batch terms, the batch's
    # join order, the per-request rows built when read ---
    M("speed19s-decode-fast-one-step-price-smaller", "kvplan/calc/simulate.py",   # (speed19w: in runner, shared)
      "                    now += step0 + (u0 if u0 >= v0 else v0)\n"
      "                else:                             # the next arrival or copy landing",
      "                    now += step0 + (v0 if u0 >= v0 else u0)\n"
      "                else:                             # the next arrival or copy landing"),
    M("speed19s-decode-fast-no-one-step-after-preemption", "kvplan/calc/simulate.py",
      "            one = r.preempted and not (steps_itself and not may_admit_soon(",
      "            one = False and not (steps_itself and not may_admit_soon("),
    M("speed19s-decode-fast-cut-run-keeps-its-blocks", "kvplan/calc/simulate.py",
      "added = need1 if k == 1 else r.crossings(k, s0, b)   # the blocks of the steps run",
      "added = added   # the blocks of the steps run"),
    M("speed19s-decode-fast-overflow-ignored", "kvplan/calc/simulate.py",
      "over = added > limit          # past the free blocks: the overflow step ends it",
      "over = added > limit + 10**9  # past the free blocks: the overflow step ends it"),
    M("speed19s-decode-fast-blind-to-arrivals", "kvplan/engines/replica.py",
      "upcoming = arrivals[0][0] if arrivals else math.inf", "upcoming = math.inf"),
    M("speed19s-decode-fast-with-speculative", "kvplan/calc/simulate.py",
      "self.engine_fast = type(sched) is not RuleBook and fast and prices.spec is None",
      "self.engine_fast = type(sched) is not RuleBook and fast"),
    M("speed19s-mixed-parts-reads-only", COSTS, "read = kv if kv >= att else att", "read = kv"),
    M("speed19s-mixed-parts-no-overhead", COSTS, "alone = dense_moe + read + comm + overhead",
      "alone = dense_moe + read + comm"),
    M("speed19s-mixed-parts-terms-of-batch-1", COSTS, "d = self.step(batch, 0.0, 0.0)", "d = self.step(1, 0.0, 0.0)"),
    M("speed19s-complete-the-next-in-line", "kvplan/engines/replica.py",
      "del running[bisect.bisect_left(running, seq[i], key=seq.__getitem__)]",
      "del running[min(bisect.bisect_right(running, seq[i], key=seq.__getitem__), len(running) - 1)]"),
    M("speed19s-join-order-not-counted", "kvplan/engines/replica.py", "self.joins += 1", "self.joins += 0"),
    M("speed19s-per-request-rows-empty", "kvplan/calc/simulate.py", "        return _request_rows(self.run)\n",
      "        return ()\n"),
    M("simulate-offload-keeps-two", "kvplan/engines/scheduling.py", "while moved < excess and len(running) > 1:",
      "while moved < excess and len(running) > 2:"),
    M("simulate-threshold-runs-unbounded",
      "kvplan/engines/scheduling.py", "return min(r.free, room) if need <= room else r.free",
      "return r.free"),
    M("simulate-swap-priced-on-an-idle-link", "kvplan/calc/sim/steps.py", "self.settings, shared_link=True)",
      "self.settings, shared_link=False)"),
    # (a swap-in never starts before its own copy out lands: the batch waits for a preemption's copies, an offload
    # joins the swapped queue once its copy has landed; so the swap_ready term cannot bind, and its mutant lives)
    M("simulate-swap-ins-overlap", "kvplan/engines/replica.py",
      "start = max(self.now, self.in_free, self.swap_ready[i])", "start = max(self.now, self.swap_ready[i])"),
    M("simulate-new-while-a-swapped-one-waits", "kvplan/engines/scheduling.py",
      "if not self._fits(r, need, holders):\n                self._stopped(r)\n                return False",
      "if not self._fits(r, need, holders):\n                self._stopped(r)\n                return True"),
    M("simulate-first-prompt-hits-the-prefix",
      "kvplan/engines/replica.py", "cached = self.hit if self.prefix_cached else 0",
      "cached = self.hit"),
    M("simulate-percentile-lower", "kvplan/calc/sim/metrics.py", "float(np.percentile(values, q))",
      "float(np.percentile(values, q, method=\"lower\"))"),
    M("simulate-preempted-share-counts-all", "kvplan/calc/sim/metrics.py", "int((r.preemptions > 0).sum())",
      "int((r.preemptions >= 0).sum())"),
    # --- simulate --engine sglang: SGLang v0.5.23's scheduler (kvplan/engines/sglang_scheduler.py) ---------------
    M("sgsched-ratio-init", SGS, "INIT_NEW_TOKEN_RATIO = 0.7", "INIT_NEW_TOKEN_RATIO = 0.8"),
    M("sgsched-ratio-floor-factor", SGS, "MIN_NEW_TOKEN_RATIO_FACTOR = 0.14", "MIN_NEW_TOKEN_RATIO_FACTOR = 0.2"),
    M("sgsched-ratio-decay-steps", SGS, "NEW_TOKEN_RATIO_DECAY_STEPS = 600", "NEW_TOKEN_RATIO_DECAY_STEPS = 500"),
    M("sgsched-retract-decode-steps", SGS, "RETRACT_DECODE_STEPS = 20", "RETRACT_DECODE_STEPS = 10"),
    M("sgsched-clip-max-new-tokens", SGS, "CLIP_MAX_NEW_TOKENS = 4096", "CLIP_MAX_NEW_TOKENS = 3000"),
    M("sgsched-dp-attention-conservativeness", SGS, "DP_ATTENTION_CONSERVATIVENESS = 0.3",
      "DP_ATTENTION_CONSERVATIVENESS = 1.0"),
    M("sgsched-retract-shortest-input", SGS, "heapq.heappush(self.order, (offset - prompt, -prompt, -k, i))",
      "heapq.heappush(self.order, (offset - prompt, prompt, -k, i))"),
    M("sgsched-retracted-to-the-front", SGS, "            r.waiting.append(i)", "            r.waiting.appendleft(i)"),
    M("sgsched-retract-none-when-it-fits", SGS, "while len(running) > 1 and (not victims or need > r.free):",
      "while len(running) > 1 and need > r.free:"),
    M("sgsched-ratio-decays-in-the-retraction-step", SGS, "self.s0, self.lag = steps, 1",
      "self.s0, self.lag = steps, 0"),
    M("sgsched-no-idle-reset", SGS, "if r.now > batch.last_done:", "if False:"),
    M("sgsched-full-batch-retried", SGS,
      "(r.done - late, self.retractions) == self.full_mark:\n            took = False",
      "(r.done - late, self.retractions) == self.full_mark and False:\n            took = False"),
    M("sgsched-round-charges-ratio", SGS, "charge = block + min(Ll[i], CLIP_MAX_NEW_TOKENS) + ",
      "charge = block + ratio * min(Ll[i], CLIP_MAX_NEW_TOKENS) + "),
    M("sgsched-check-ignores-outputs-so-far", SGS,
      "fill - on_device + min(Ll[i] - gi, CLIP_MAX_NEW_TOKENS) + block <",
      "fill - on_device + min(Ll[i], CLIP_MAX_NEW_TOKENS) + block <"),
    M("sgsched-reprefill-gives-no-token", SGS, "g[i] = gi + 1                         # the re-prefill",
      "g[i] = gi                             # the re-prefill"),
    M("sgsched-chunk-round-keeps-its-own-reserve", SGS, "reserved = ratio * (batch.to_go(steps) - own)",
      "reserved = ratio * batch.to_go(steps)"),
    M("sgsched-running-cap-off-by-one", SGS, "if len(running) + seats >= self.max_batch:",
      "if len(running) + seats > self.max_batch:"),
    M("sgsched-chunk-b200", SGS, "(90, 8192), (160, 8192))", "(90, 8192), (160, 16384))"),
    # SGLang's radix tree: what a retracted request keeps (sglang_scheduler._Tree)
    M("sgsched-radix-off", SGS, "victim=victim, radix=reuse, hashes=", "victim=victim, radix=False, hashes="),
    M("sgsched-radix-no-release-req-eviction", SGS,
      "tree.settle(r.free, max(-(-len(running) * RETRACT_DECODE_STEPS // block), need))",
      "tree.settle(r.free, need)"),
    M("sgsched-radix-no-eviction-before-retracting", SGS,
      "tree.settle(r.free, need)                # check_decode_mem", "pass  # check_decode_mem"),
    M("sgsched-radix-access-not-refreshed", SGS, "                nodes[key][3] = clock\n",
      "                nodes[key][3] = nodes[key][3] or clock\n"),
    M("sgsched-radix-head-not-matched", SGS, "                tree.touch(nodes)\n", "                pass\n"),
    M("sgsched-radix-finished-keeps-prompt-only", SGS, "r.free += tree.retire(i, r.Pl[i] + r.Ll[i] - 1)",
      "r.free += tree.retire(i, r.Pl[i])"),
    M("sgsched-radix-finished-evicted-first", SGS, "if done and (not lru or done[0][0] < lru[0][0]):",
      "if done:"),
    M("sgsched-radix-insert-not-page-aligned", SGS, "end = tokens // block * block\n        self.clock += 1",
      "end = tokens\n        self.clock += 1"),
    M("sgsched-hash-ids-ignored", SGS, "hashes=hashes if reuse else None, notes=tuple(notes),",
      "hashes=None, notes=tuple(notes),"),
    M("sgsched-hash-hit-not-capped", SGS, "return found, min(end, (fill - 1) // self.block * self.block)",
      "return found, min(end, fill)"),
    M("sgsched-hash-locked-node-taken-again", SGS, "            if not node[2]:\n                newly +=",
      "            if True:\n                newly +="),
    M("sgsched-hash-longer-block-matches", SGS, "if node is None or node[5] > prompt:", "if node is None:"),
    M("sgsched-radix-check-ignores-the-locked-path", SGS, "block < (free - locking) * block",
      "block < free * block"),
    # SGLang's HiCache (sglang_scheduler._HiTree): the host tier of the radix tree
    M("sglang-hicache-off", SGS, "                if self.hicache is not None:\n                    threshold",
      "                if False:\n                    threshold"),
    M("sglang-hicache-ratio-default", SGS, "HICACHE_RATIO = 2.0 ", "HICACHE_RATIO = 1.5 "),
    M("sglang-hicache-size-ignored", SGS, "        if hc.size_gb:\n            tokens",
      "        if False:\n            tokens"),
    M("sglang-hicache-size-decimal-gb", SGS, "int(hc.size_gb * 1e9 // (block_bytes / self.block))",
      "int(hc.size_gb * 2**30 // (block_bytes / self.block))"),
    M("sglang-hicache-load-threshold", SGS, "LOAD_BACK_THRESHOLD = 10 ", "LOAD_BACK_THRESHOLD = 8 "),
    M("sglang-hicache-load-threshold-le", SGS, "if cached - on_device < LOAD_BACK_THRESHOLD:",
      "if cached - on_device <= LOAD_BACK_THRESHOLD:"),
    M("sglang-hicache-load-free", SGS, "                        self.load_t = self.load_cost(tree.loaded_now)",
      "                        self.load_t = 0.0"),
    M("sglang-hicache-load-added-to-prefill", SGS,
      "t = max(r.prefill(fill, cached), self.load_t)", "t = r.prefill(fill, cached) + self.load_t"),
    M("sglang-hicache-load-not-allocated", SGS, "                    r.free -= tree.loaded_now\n",
      "                    pass\n"),
    M("sglang-hicache-check-counts-host-hit-as-cached", SGS,
      "fill - on_device + min(Ll[i] - gi, CLIP_MAX_NEW_TOKENS) + block <",
      "fill - cached + min(Ll[i] - gi, CLIP_MAX_NEW_TOKENS) + block <"),
    M("sglang-hicache-demote-deletes", SGS, "            if node[7]:                              # demoted",
      "            if False:                                # demoted"),
    M("sglang-hicache-no-ancestor-backup", SGS, "        while up is not None and not nodes[up][7]:\n            chain",
      "        while False:\n            chain"),
    M("sglang-hicache-backup-without-room", SGS,
      "            if short > 0 and self.evict_host(short) < short:\n                return",
      "            if short > 0 and self.evict_host(short) < short:\n                pass"),
    M("sglang-hicache-no-host-eviction", SGS, "            if short > 0 and self.evict_host(short) < short:",
      "            if short > 0:"),
    M("sglang-hicache-host-evicts-newest", SGS, "heapq.heappush(self.hlru, (stamp, self.pushes, key))",
      "heapq.heappush(self.hlru, (-stamp, self.pushes, key))"),
    # (no mutant on evict_host's node[8], a host leaf has no child: it is equivalent. A node enters hlru only
    # childless (settle's demote, evict_host's parent, touch) with its stamp of that moment; a child is added only
    # by checkpoint's _add, under path[-1], and checkpoint then stamps the whole path with a new clock, so an entry
    # whose stamp still matches is of a node that gained no child since; mut26 checked it with an assertion in
    # place of the check, over test_sim_sglang_hicache.py and test_sim_sglang.py: never reached)
    M("sglang-hicache-selective-writes", SGS, '"write_through_selective": 2}', '"write_through_selective": 1}'),
    M("sglang-hicache-default-policy-release", SGS, "WRITE_THROUGH_SINCE = (0, 5, 2)",
      "WRITE_THROUGH_SINCE = (0, 5, 1)"),
    M("sglang-hicache-host-touch-not-pushed", SGS,
      "                    elif not node[8]:\n                        self._hpush(key, clock)",
      "                    elif False:\n                        self._hpush(key, clock)"),
    M("sglang-hicache-locking-counts-host-nodes", SGS,
      "return sum(nodes[key][4] for key in keys if not nodes[key][2] and nodes[key][6])",
      "return sum(nodes[key][4] for key in keys if not nodes[key][2])"),
    M("sglang-hicache-link-one-way", "kvplan/calc/simulate.py",
      "return costs.swap_seconds(n * block_bytes, n, link, settings, shared_link=True)",
      "return costs.swap_seconds(n * block_bytes, n, link, settings, shared_link=False)"),
    M("vllm-v1-admits-in-a-step-that-preempted", V1S,
      "if not preempted:                      # then the waiting queue", "if True:  # then the waiting queue"),
    # (the loop runs the rest of the batch in the step that preempted at once, so r.preempted is False at the next
    # look unless every request left, when admitting at once is the same as one empty step later: no mutant there)
    M("vllm-v1-victim-to-the-back", V1S, "r.release(i)\n        r.waiting.appendleft(i)",
      "r.release(i)\n        r.waiting.append(i)"),
    M("vllm-v1-hit-takes-every-token", V1S, "cap = (r.Pl[i] + r.g[i] - 1) // block",
      "cap = (r.Pl[i] + r.g[i]) // block"),
    M("vllm-v1-no-eviction-of-a-victim", V1S, "own = max(0, min(start + n - max(front, start), full))",
      "own = max(0, min(n, full))"),
    M("vllm-v1-no-prefix-reuse", V1S, "self.seg[i] = (start, n, cached // r.block - self.hb)",
      "self.seg[i] = (start, n, 0)"),
    M("vllm-v1-budget-ignores-decodes", V1S, "left = self.budget - len(running)", "left = self.budget"),
    M("vllm-v1-prompt-not-chunked", V1S, "head = i, hit, min(rest, left)", "head = i, hit, rest"),
    M("vllm-v1-one-seq-too-many", V1S, "len(running) + len(chunks) + late < self.max_seqs",
      "len(running) + len(chunks) + late <= self.max_seqs"),
    M("vllm-v1-step-priced-without-chunks", V1S, "t, alone = self.mixed(spans)", "alone, t = self.mixed(spans)"),
    M("vllm-v1-newest-is-a-decoder", V1S, "return len(r.running) - (part < 0)", "return len(r.running) - 1"),
    M("vllm-v1-recompute-counts-new-tokens", V1S, "tally.recomputed[i] += max(0, min(e, redo[i]) - a)",
      "tally.recomputed[i] += e - a"),
    # (which labels of a resumed victim's segment leave the queue does not matter: the front crosses the segment
    # after the same pops either way, and the labels are its own; a mutant there lives) but that they leave does
    M("vllm-v1-hits-left-in-the-queue", V1S, "self.removed += own", "self.removed += 0"),
    M("vllm-v1-head-needs-a-spare-block", V1S, "return head if self._need(r, head) <= room else None",
      "return head if self._need(r, head) < room else None"),
    # (no mutant on may_admit_soon: after a preemption the head is the last victim, whose blocks for its tokens
    # exceed what its leaving freed, so it cannot fit in the next step unless decodes leave under a block of the
    # budget; nor on wants_step's free - need1: a step it wrongly lets through runs no chunk, priced as the decode
    # step the loop would have run)
    # the V1 rules by release (kvplan/engines/vllm.py FULL_ISL_SINCE, HASHLESS_FRONT_SINCE; vllm_scheduler.py)
    M("vllm33-full-isl-release-early", VLLM, "FULL_ISL_SINCE: Release = (0, 19, 0)",
      "FULL_ISL_SINCE: Release = (0, 18, 0)"),
    M("vllm33-full-isl-release-late", VLLM, "FULL_ISL_SINCE: Release = (0, 19, 0)",
      "FULL_ISL_SINCE: Release = (0, 20, 0)"),
    M("vllm33-front-release-early", VLLM, "HASHLESS_FRONT_SINCE: Release = (0, 24, 0)",
      "HASHLESS_FRONT_SINCE: Release = (0, 23, 0)"),
    M("vllm33-front-release-late", VLLM, "HASHLESS_FRONT_SINCE: Release = (0, 24, 0)",
      "HASHLESS_FRONT_SINCE: Release = (0, 25, 0)"),
    M("vllm33-full-isl-off", V1S, "return r.btl[r.Pl[i] + r.g[i]] if self.full_isl else r.btl[hit + c]",
      "return r.btl[hit + c]"),
    M("vllm33-full-isl-prompt-only", V1S, "return r.btl[r.Pl[i] + r.g[i]] if self.full_isl else r.btl[hit + c]",
      "return r.btl[r.Pl[i]] if self.full_isl else r.btl[hit + c]"),
    M("vllm33-full-isl-less-the-hit", V1S, "return r.btl[r.Pl[i] + r.g[i]] if self.full_isl else r.btl[hit + c]",
      "return r.btl[r.Pl[i] + r.g[i]] - r.btl[hit] if self.full_isl else r.btl[hit + c]"),
    M("vllm33-front-off", V1S, "self.full_isl, self.front = full_isl, hashless_front and reuse",
      "self.full_isl, self.front = full_isl, False"),
    M("vllm33-front-not-taken-first", V1S, "        if self.lifo:\n            t = min(k, self.lifo)",
      "        if False:\n            t = min(k, self.lifo)"),
    M("vllm33-finish-not-fronted", V1S, "if (self.front or self.asyn) and r.on_finish is None:",
      "if self.asyn and r.on_finish is None:"),
    M("vllm33-victim-all-to-the-tail", V1S,
      "        full = min(n, max(0, cached // r.block - self.hb))\n        self._advance(r)\n        start",
      "        full = n\n        self._advance(r)\n        start"),
    M("lead27-late-free-all-to-the-tail", V1S, "                full = min(n, max(0, cached // r.block - self.hb))",
      "                full = n"),
    M("vllm33-finish-cache-counts-the-last-token", V1S, "self._free(r, i, r.Pl[i] + r.g[i] - 1)",
      "self._free(r, i, r.Pl[i] + r.g[i])"),
    M("vllm33-labels-ignore-the-front", V1S, "\n        start = r.freed - self.fronted", "\n        start = r.freed"),
    # (no mutant on _hit's lookahead past the front's hashless blocks, pops -= min(pops, self.lifo): every release
    # that fronts them also reserves the whole input, whose need, btl[tokens], does not depend on the hit, so the
    # lookahead's answer (does the head fit) is the same either way)
    M("vllm33-reference-no-full-isl", "tests/sim_reference.py", "whole_input = release >= (0, 19, 0)",
      "whole_input = False"),
    M("vllm33-reference-no-front", "tests/sim_reference.py", "hashless_first = release >= (0, 24, 0)",
      "hashless_first = False"),
    M("vllm33-output-names-old-rules", V1S, "\"whole-input\" if full_isl else \"first-chunk\"",
      "\"first-chunk\" if full_isl else \"whole-input\""),
    M("vllm-v1-partial-chunk-ignores-the-budget", V1S, "c = min(r.Pl[p] + r.g[p] - have, left)",
      "c = r.Pl[p] + r.g[p] - have"),
    M("vllm-v1-weights-read-per-token-kind", COSTS,
      "mixed = float(max(max(self.weight_read_seconds, compute) + self.overhead_s + extra, alone))",
      "mixed = float(max(self.weight_read_seconds + compute + self.overhead_s + extra, alone))"),
    M("mixed-step-may-undercut-the-decode-step", COSTS,
      "mixed = float(max(max(self.weight_read_seconds, compute) + self.overhead_s + extra, alone))",
      "mixed = float(max(self.weight_read_seconds, compute) + self.overhead_s + extra)"),
    M("fidelity-tpot-compared-with-the-sources-itl", "tools/fidelity_report.py",
      'if metric == "tpot" and run.get("tpot_from") == "e2e":', "if False:"),
    M("moe-expert-width-without-intermediate-size", COSTS,
      "(model.moe_intermediate_size or model.intermediate_size or 0)", "(model.moe_intermediate_size or 0)"),
    M("vllm-v0-release-runs-v1", VLLM, "if not self.since(V1_SINCE):\n            if async_scheduling:",
      "if False:\n            if async_scheduling:"),
    # --- SGLang's default fraction by release (pool20: v0.4.6-v0.4.7 fixed fractions, v0.4.8-v0.5.2 extras, v0.5.3+
    # prefill CUDA graphs and speculative reserve) ------------------------------------------------------------------
    M("sglang-fixed-fraction-tp8", SGL, "((16, 0.79), (8, 0.81)", "((16, 0.79), (8, 0.83)"),
    M("sglang-fixed-fraction-tp1", SGL, "(2, 0.87), (1, 0.88))", "(2, 0.87), (1, 0.87))"),
    M("sglang-v046-large-gpu-keeps-13", SGL, "(mib - 13 * 1024) / mib", "(mib - 12 * 1024) / mib"),
    M("sglang-v047-large-cuda-gpu", SGL, "if mib > 180_000 and not amd:", "if mib > 180_000:"),
    M("sglang-v047-keeps-18", SGL, "keep = 20 if speculative else 18", "keep = 20 if speculative else 17"),
    M("sglang-v047-spec-x095", SGL, "value, why = value * 0.95", "value, why = value * 0.96"),
    M("sglang-v048-no-spec-reserve", SGL, "SPEC_RESERVE_GIB, DP_ATTENTION_RESERVE_GIB = 2.0, 4.0",
      "SPEC_RESERVE_GIB, DP_ATTENTION_RESERVE_GIB = 0.0, 4.0"),
    M("sglang-v048-no-dp-reserve", SGL, "SPEC_RESERVE_GIB, DP_ATTENTION_RESERVE_GIB = 2.0, 4.0",
      "SPEC_RESERVE_GIB, DP_ATTENTION_RESERVE_GIB = 2.0, 0.0"),
    M("sglang-prefill-graphs-from-v059", SGL, "PREFILL_GRAPHS_SINCE, PREFILL_BCG_SINCE, BCG_DP_SINCE, BCG_MLA_SINCE = "
      "(0, 5, 10)", "PREFILL_GRAPHS_SINCE, PREFILL_BCG_SINCE, BCG_DP_SINCE, BCG_MLA_SINCE = (0, 5, 9)"),
    M("sglang-prefill-graph-4mb", SGL, "return n * 8.0,", "return n * 4.0,"),
    M("sglang-prefill-graph-mla-1gib", SGL, 'return 1536.0, "1.5 GiB', 'return 1024.0, "1.5 GiB'),
    M("sglang-prefill-graph-on-amd", SGL, 'or par.pp > 1 or "amd" in hw.name.lower():', "or par.pp > 1:"),
    M("sglang-prefill-graph-with-pp", SGL, 'or par.pp > 1 or "amd" in hw.name.lower():',
      'or "amd" in hw.name.lower():'),
    M("sglang-prefill-graph-trtllm-mla-kept", SGL, 'if not dsa and gpu_generation(hw) == "blackwell":', "if False:"),
    M("sglang-prefill-graph-dp-always", SGL, "if dp and not self.since(BCG_DP_SINCE):", "if False:"),
    M("sglang-prefill-graph-mla-bcg-always", SGL, "if mla and self.since(PREFILL_BCG_SINCE):", "if False:"),
    M("sglang-prefill-graph-last-size", SGL, "*range(4608, max_tokens + 1, 512)]", "*range(4608, max_tokens, 512)]"),
    # (speculative decoding's reserve before the 10 GB floor instead of after it is an equivalent mutant for kvplan:
    # every v0.5.3+ default reserve above 60 GB already exceeds the floor, 512 + 8,192 x 1.5 = 12,800 MB)
    M("sglang-spec-4gib-era", SGL, "((0, 5, 10), 4096.0)", "((0, 5, 10), 2048.0)"),
    M("sglang-spec-gone-in-v0514", SGL, "(((0, 5, 14), 0.0),", "(((0, 5, 15), 0.0),"),
    # --- DeepEP's low-latency buffer and SGLang's reserve for it (pool20r) ------------------------------------------
    M("pool-sglang-deepep-dispatch-header", SGL, "dispatch_msg = 16 + 2 * hidden", "dispatch_msg = 2 * hidden"),
    M("pool-sglang-deepep-combine-scales", SGL, "combine_msg = 4 * scales + 2 * hidden", "combine_msg = 2 * hidden"),
    M("pool-sglang-deepep-send-dispatch", SGL, "send = max(tokens * dispatch_msg, ", "send = max(0, "),
    M("pool-sglang-deepep-recv-combine", SGL, "recv = experts * tokens * max(dispatch_msg, combine_msg)",
      "recv = experts * tokens * dispatch_msg"),
    M("pool-sglang-deepep-signal-align", SGL, "signal = -(-experts * 4 // 128) * 128", "signal = experts * 4"),
    M("pool-sglang-deepep-one-buffer", SGL, "total = 2 * (send + recv + signal)", "total = send + recv + signal"),
    M("pool-sglang-deepep-round", SGL, "return (total + 128) // 128 * 128", "return total"),
    M("pool-sglang-deepep-tokens", SGL, "DEEPEP_TOKENS_PER_RANK = 128", "DEEPEP_TOKENS_PER_RANK = 256"),
    M("pool-sglang-deepep-reserve-since", SGL, "DEEPEP_RESERVE_SINCE = 2048.0, (0, 5, 15)",
      "DEEPEP_RESERVE_SINCE = 2048.0, (0, 5, 14)"),
    M("pool-sglang-deepep-reserve-size", SGL, "DEEPEP_RESERVE_MB, DEEPEP_RESERVE_SINCE = 2048.0,",
      "DEEPEP_RESERVE_MB, DEEPEP_RESERVE_SINCE = 3072.0,"),
    M("pool-sglang-deepep-row-without-ep", SGL, "if par.ep is not None and par.ep > 1 and a2a in (",
      "if par.ep is not None and par.ep > 8 and a2a in ("),
    M("pool-sglang-deepep-note-reserve-always", SGL,
      "if deepep.number() > (DEEPEP_RESERVE_MB * 2**20 if self.since(DEEPEP_RESERVE_SINCE) else 0):",
      "if deepep.number() > DEEPEP_RESERVE_MB * 2**20:"),
    # --- the 20-35 GB bucket by release (pool20r) -------------------------------------------------------------------
    M("pool-sglang-small-gpu-v0520", SGL, "(((0, 5, 20), (35 * 1024, 4096, 48, 160))",
      "(((0, 5, 21), (35 * 1024, 4096, 48, 160))"),
    M("pool-sglang-small-gpu-v055", SGL, "((0, 5, 5), (35 * 1024, 2048, 24, 80))",
      "((0, 5, 4), (35 * 1024, 2048, 24, 80))"),
    M("pool-sglang-small-gpu-v053-bs", SGL, "((0, 5, 3), (35 * 1024, 2048, 16, 80)))",
      "((0, 5, 3), (35 * 1024, 2048, 24, 80)))"),
    M("pool-sglang-small-gpu-large-tp", SGL, "((0, 5, 5), (35 * 1024, 2048, 24, 80))",
      "((0, 5, 5), (35 * 1024, 2048, 24, 160))"),
    M("pool-sglang-small-gpu-ignored", SGL, "    return tuple(small if top == 35 * 1024 else",
      "    return tuple((top, c, a, b) if top == 35 * 1024 else"),
    M("pool-sglang-small-gpu-chunk-unversioned", SGL, "prefill_graph_sizes(chunked_prefill_mb(gpu_mb, self.version))",
      "prefill_graph_sizes(chunked_prefill_mb(gpu_mb))"),
    M("pool-sglang-small-gpu-reserve-unversioned", SGL, "attn_dp, prefill, spec + deepep, self.version)",
      "attn_dp, prefill, spec + deepep)"),
    # --- calibrate: prefill_mfu from light runs' TTFT; the engine a calibration was fitted with; plan files naming
    # one (pool20) -------------------------------------------------------------------------------------------------
    M("calibrate-every-run-light", CALIB, "LIGHT_BATCH = 1.5", "LIGHT_BATCH = 1000.0"),
    M("calibrate-ttft-without-frontend", CALIB, "return step.prefill_seconds(load.prompt, 0, chunk) + "
      "frontend_seconds(step.scenario).number()", "return step.prefill_seconds(load.prompt, 0, chunk)"),
    # (dropping the early return at prefill_mfu's upper bound is equivalent: the bisection then converges to 1.0)
    M("calibration-engine-unchecked", "kvplan/inputs/calibration_file.py",
      'if engine_id != cal.engine.split("==")[0].strip().lower():', "if False:"),
    M("plan-calibration-not-relative", PLAN, "            value = str(path.parent / value)",
      "            value = str(value)"),
    # --- tpot fidelity: a closed-loop run's TPOT takes in the other requests' prefills (tpot20r) ------------------
    M("tpot-serving-own-prefill-too", "benchmarks/tpot_fidelity.py", "prefill_s, concurrency, output_tokens)",
      "prefill_s, concurrency + 1, output_tokens)"),
    M("tpot-serving-no-prefill", "benchmarks/tpot_fidelity.py", "return costs.colocated_tpot(decode_step_s, prefill_s,",
      "return costs.colocated_tpot(decode_step_s, 0.0,"),
    M("tpot-eagle3-rates-shifted", "kvplan/calc/tpot.py", "round(1 + sum(EAGLE3_RATES[:k]), 2)",
      "round(1 + sum(EAGLE3_RATES[:k - 1]), 2)"),
    M("tpot-eagle3-any-model", "kvplan/options/command.py", "if built.model.id not in EAGLE3_TARGETS:", "if False:"),
    M("tpot-eagle3-no-draft-layer", "kvplan/options/command.py", "            built = built.with_(mtp_layers=1)",
      "            pass"),
    M("tpot-median-itl-ignored", "benchmarks/tpot_fidelity.py", "    if point.median_itl:   # the median",
      "    if False:   # the median"),
    M("check-cli-calibration-ignored", "kvplan/commands/check.py", "    if calibration is not None:   # --calibration",
      "    if False:   # --calibration"),
    # --- fid19r: the A100 preset's MoE latency per MoE layer, its prefill_mfu (tests/test_simulate_fidelity.py) -----
    M("fid19r-a100-moe-latency-per-layer", "presets/hardware/a100-80gb.toml",
      "overhead_us_per_moe_layer = { value = 95.0", "overhead_us_per_layer = { value = 95.0"),
    M("fid19r-a100-prefill-mfu-generic", "presets/hardware/a100-80gb.toml", "prefill_mfu = { value = 0.74",
      "prefill_mfu = { value = 0.45"),
    # fid19s: vLLM's decode all-reduce from its own in-graph kernel benchmark (engines/vllm.py, costs.engine_factors)
    M("fid19s-vllm-allreduce-dropped", "kvplan/engines/vllm.py", "    decode_allreduce = DECODE_ALLREDUCE\n", ""),
    M("fid19s-vllm-allreduce-share", "kvplan/engines/vllm.py", "DECODE_ALLREDUCE = (6.45, 0.44,",
      "DECODE_ALLREDUCE = (6.45, 0.42,"),
    M("fid19s-vllm-allreduce-latency", "kvplan/engines/vllm.py", "DECODE_ALLREDUCE = (6.45, 0.44,",
      "DECODE_ALLREDUCE = (9.3, 0.44,"),
    M("fid19s-engine-factors-ignored", "kvplan/calc/costs.py",
      "    f = engine_factors(factors or step_factors(hw), scenario)", "    f = factors or step_factors(hw)"),
    M("fid19s-engine-factors-override-flags", "kvplan/calc/costs.py",
      'if why is not None and why.formula == f"default: generic {name}":', "if why is not None:"),
    M("fid19s-engine-factors-one-only", "kvplan/calc/costs.py",
      '(("allreduce_latency_us", latency, "decode all-reduce latency, us"),\n'
      '                                   ("allreduce_link", share, "decode all-reduce share of the link"))',
      '(("allreduce_link", share, "decode all-reduce share of the link"),)'),
    M("fid19s-harness-dp-ignored", "tools/fidelity_report.py", '"gpus": str(run["tp"] * dp)', '"gpus": str(run["tp"])'),
    # --- runs19n: the harness's third never-seen set (closed loops, the client's own TPOT, the KV dtype launched) -----
    M("runs19n-tpot-from-tpot-reads-itl", "tools/fidelity_report.py",
      'return "tpot" if metric == "tpot" and run.get("tpot_from") == "tpot" else MEASURED_KEY[metric]',
      "return MEASURED_KEY[metric]"),
    M("runs19n-kv-dtype-not-passed", "tools/fidelity_report.py",
      'scenario["kv_dtype"] = str(run["kv_dtype"])', "pass"),
    M("runs19n-closed-loop-lengths-fixed", "tools/fidelity_report.py",
      'dists = {"prompt_dist": run.get("prompt_dist"), "output_dist": run.get("output_dist")} if closed else {}',
      "dists = {}"),
    M("runs19n-tpot-from-unchecked", "tools/fidelity_report.py",
      'if run.get("tpot_from", "itl") not in TPOT_FROM:', "if False:"),
    M("runs19n-split-unknown", "tools/fidelity_report.py",
      'SPLITS = ("fit", "held_out", "never_seen", "never_seen_2", "never_seen_3")',
      'SPLITS = ("fit", "held_out", "never_seen", "never_seen_2")'),
    # --- pd21: a request's TPOT holds the OTHER requests' prefills; attention DP per role; pd's pruned searches -----
    M("pd21-own-prefill-in-tpot", COSTS, "    others = concurrency - 1\n", "    others = concurrency\n"),
    M("pd21-cycle-without-own-prefill", PD, "rps = self.batches[:limit][ok] / (d * mean[ok] + t_pf)",
      "rps = self.batches[:limit][ok] / (d * mean[ok])"),
    M("pd21-share-counts-prefills-twice", PD, "share = t_pf / (t_pf + d * plain / col.batch)",
      "share = t_pf / (t_pf + d * col.tpot / col.batch)"),
    M("pd21-recommend-share-on-mean", REC, "    tpot_b = sb.decode_only\n", "    tpot_b = sb.tpot_mean\n"),
    M("pd21-adp-gpus-one-rank", PD, "return self.tp * self.pp * self.dp", "return self.tp * self.pp"),
    M("pd21-adp-not-searched", PD, "        if moe:     # attention DP", "        if False:     # attention DP"),
    M("pd21-adp-prefill-one-rank", PD, "c_p, c_d = lp.dp / service, ld.dp * side.requests_per_second",
      "c_p, c_d = 1 / service, ld.dp * side.requests_per_second"),
    M("pd21-adp-decode-one-rank", PD, "c_p, c_d = lp.dp / service, ld.dp * side.requests_per_second",
      "c_p, c_d = lp.dp / service, side.requests_per_second"),
    M("pd21-adp-queue-one-server-per-instance", PD, "servers = n_p * lp.dp ", "servers = n_p "),
    M("pd21-adp-colocated-one-rank", PD, "col_rps = good_rate * instances * col_lay.dp",
      "col_rps = good_rate * instances"),
    M("pd21-adp-prefill-whole-ep", PD, "spread = par.ep // par.dp if", "spread = None if"),
    M("pd21-prune-keeps-searching", PD,
      "                if hi <= beat:\n                    return None\n        return lo",
      "                pass\n        return lo"),
    M("pd21-own-layout-twice", PD, "if any(one == o and ranks == r for o, r in tried):", "if False:"),
    # user26: hostile input to the new options (tests/test_scenario_rules.py, test_tpot.py, test_bad_input.py,
    # test_sim_sglang_hicache.py, test_simulate_speculative.py, test_pd_goodput.py)
    M("user26-setting-fix-names-every-other-engine", "kvplan/scenario.py",
      "users = [e for e in NAMES if e != adapter.id and name in get(e).settings]",
      "users = [e for e in NAMES if e != adapter.id]"),
    M("user26-accept-stray-comma-read", "kvplan/calc/tpot.py", 'if re.search(r"(?:^|,)\\s*(?:,|$)", text):',
      "if False:"),
    M("user26-speculative-draft-model-takes-published", "kvplan/options/command.py",
      "if built.draft is not None and accept is None:", "if False:"),
    M("user26-kv-pool-ignores-fractions", "kvplan/options/scenarios.py", "        if sizing:\n",
      "        if False:\n"),
    M("user26-compare-hicache-drops-host-pool", "kvplan/options/simulate.py",
      "return chosen if base is None else dataclasses.replace(base, write_policy=chosen.write_policy)",
      "return chosen"),
    M("user26-compare-hicache-value-unnamed", "kvplan/options/simulate.py",
      'if low != "on" and low not in WRITE_POLICIES:', "if False:"),
    M("user26-host-pool-beyond-dram", "kvplan/calc/simulate.py",
      "if dram_bytes_per_gpu is not None and pool_bytes > dram_bytes_per_gpu:", "if False:"),
    M("user26-sim-json-no-speculative", "kvplan/present/simulate.py",
      "    if o.speculative is not None:   # the setting as numbers", "    if False:   # the setting as numbers"),
    M("user26-recommend-ttft-unjudged-unsaid", "kvplan/calc/recommend.py",
      "if o.slo is not None and o.slo.ttft is not None else \"\")", "if False else \"\")"),
    M("user26-recommend-pd-reasons-last-row", "kvplan/calc/recommend.py",
      'else tuple(r.reason for r in rows if r.key == "pd"),', "else (rows[-1].reason,),"),
    M("user26-small-host-pool-unsaid", "kvplan/engines/sglang_scheduler.py",
      "if self.host_blocks <= pool_blocks:   # --hicache-ratio <= 1", "if False:   # --hicache-ratio <= 1"),
    M("user26-small-host-pool-off-by-one", "kvplan/engines/sglang_scheduler.py",
      "if self.host_blocks <= pool_blocks:   # --hicache-ratio <= 1", "if self.host_blocks < pool_blocks:   #"),
    M("user26-pd-zero-goodput-ratio", "kvplan/present/pd.py",
      'ratio = ("{margin:.2f}x" if plan.colocated_requests_per_second.number() else',
      'ratio = ("{margin:.2f}x" if True else'),
    # pd: the scenario's own attention-DP layout (--tp T --dp R --ep T x A) as instances of A ranks
    M("lead26-pd-own-adp-off", "kvplan/calc/pd.py", "    ranks = ep // g if (ep > g and ep % g == 0",
      "    ranks = 1 if (ep > g and ep % g == 0"),
    M("lead26-pd-own-adp-instances", "kvplan/calc/pd.py", "    instances = par.dp // ranks\n",
      "    instances = par.dp\n"),
    M("lead26-pd-own-adp-hint-dp", "kvplan/calc/pd.py", 'flags += [f"--dp {2 * ranks}"]', 'flags += [f"--dp {2}"]'),
    M("lead26-token-comma-any", "kvplan/inputs/units.py", 'if "," in stripped and not re.fullmatch(',
      'if False and not re.fullmatch('),
    M("lead26-token-comma-group-of-two", "kvplan/inputs/units.py", r'(,\d{3})+(\.\d*)?', r'(,\d{2,3})+(\.\d*)?'),
    M("lead26-pd-own-adp-one-rank", "kvplan/calc/pd.py", "(rm.s if i or lay.dp > 1 else rm.s.with_(dp=1))",
      "(rm.s if i else rm.s.with_(dp=1))"),
    # tpot20s: SGLang's shared-expert fusion on DeepSeek-V3/R1 (Hopper, EP off) and its price in the step
    M("tpot20s-fusion-any-gpu", SGL, 'gpu_generation(scenario.hardware) != "hopper" or ', ""),
    M("tpot20s-fusion-under-ep", SGL, "(par.ep or 1) > 1 or model.num_experts", "model.num_experts"),
    M("tpot20s-fusion-any-experts", SGL, "model.num_experts != 256\n", "model.num_experts < 1\n"),
    M("tpot20s-fusion-any-shared", SGL, "or model.shared_experts != 1):", "or not model.shared_experts):"),
    M("tpot20s-fusion-any-attention", SGL, "if MLA not in kinds or sparse_attention(kinds):", "if False:"),
    M("tpot20s-fusion-never", SGL, "        return SHARED_FUSION_SOURCE\n", "        return None\n"),
    M("tpot20s-fused-keeps-gemms", COSTS, "shared = 2 if model.shared_experts and not fused_shared else 0",
      "shared = 2 if model.shared_experts else 0"),
    M("tpot20s-fused-not-read", COSTS, "\n                       + self.fused_experts * (t > 0))", ")"),
    M("tpot20s-fused-read-twice", COSTS, "        dense_bytes -= fused * expert_each\n", ""),
    M("tpot20s-fused-weight-read", COSTS, "experts = self.experts_on_gpu + self.fused_experts\n",
      "experts = self.experts_on_gpu\n"),
    # sgl20s: SGLang's HiCache host pool pages by release, --moe-a2a-backend's DeepEP reserve
    M("sgl20s-host-no-padding-page", SGS, "tokens // self.block + (1 if hc.padding_page else 0)",
      "tokens // self.block"),
    M("sgl20s-host-padding-every-release", SGS, "tuple(version) >= HOST_PADDING_PAGE_SINCE", "True"),
    M("sgl20s-host-padding-since-057", SGS, "HOST_PADDING_PAGE_SINCE = (0, 5, 6)",
      "HOST_PADDING_PAGE_SINCE = (0, 5, 7)"),
    M("sgl20s-deepep-reserve-always", SGL, 'if a2a == "deepep" and self.since(DEEPEP_RESERVE_SINCE) else 0.0',
      'if a2a == "deepep" else 0.0'),
    M("sgl20s-a2a-graphs-kept-0516", SGL, "BCG_A2A_SINCE, BCG_A2A_BACKENDS = (0, 5, 17)",
      "BCG_A2A_SINCE, BCG_A2A_BACKENDS = (0, 5, 15)"),
    M("sgl20s-a2a-graphs-any-backend", SGL, "or a2a not in BCG_A2A_BACKENDS)", ")"),
    M("sgl20s-deepep-bcg-delta-none", SGL, "return mb + DEEPEP_BCG_RESERVE_MB, why", "return mb, why"),
    M("sgl20s-a2a-dense-allowed", SGL, "        if not model.num_experts:\n            return (f\"--moe-a2a-backend",
      "        if False:\n            return (f\"--moe-a2a-backend"),
    M("sgl20s-a2a-no-ep-allowed", SGL, "if par.ep is None or par.ep <= 1:", "if par.ep is not None and par.ep < 1:"),
    M("sgl20s-pcie-init-tp2", SGL, "pcie = tp_group > 2 and", "pcie = tp_group > 1 and"),
    M("sgl20s-pcie-init-no-nccl", SGL, "INIT_GIB[0] + PCIE_NCCL_GIB if pcie", "INIT_GIB[0] if pcie"),
    M("sgl20s-pcie-init-any-gpu", SGL, "and hw.scale_up is None and", "and"),
    M("sgl20s-dp-split-off", SGL, "if dp_attention(par) and scenario.weights_bytes is None:",
      "if False and scenario.weights_bytes is None:"),
    M("sgl20s-dp-split-no-shared", SGL, "shared = 0 if deepep else moe_layers", "shared = 0 if True else moe_layers"),
    M("sgl20s-dp-split-shared-with-deepep", SGL, "shared = 0 if deepep else moe_layers",
      "shared = 0 if False else moe_layers"),
    M("sgl20s-dp-split-no-dense", SGL, "dense = max(model.num_layers - moe_layers, 0) * 3",
      "dense = max(model.num_layers - moe_layers, 0) * 0"),
    M("sgl20s-dp-split-whole", SGL, "* (1 - 1 / group) / par.pp)", "/ par.pp)"),
    M("sgl20s-nsa-0.8-every-release", SGL, "if (start <= self.version < end and sparse_attention(",
      "if (start <= self.version and sparse_attention("),
    M("sgl20s-nsa-0.8-any-model", SGL, "< end and sparse_attention(self.kinds(scenario.sized_model))",
      "< end and True"),
    M("sgl20s-nsa-0.8-not-over-given", SGL, 'and "amd" not in scenario.hardware.name.lower()):\n            given_too',
      'and "amd" not in scenario.hardware.name.lower() and scenario.mem_fraction_static is None):\n'
      '            given_too'),
    M("sgl20s-mxfp4-pad-128", SGL, "MXFP4_PAD, MXFP4_BLOCK = 256, 32", "MXFP4_PAD, MXFP4_BLOCK = 128, 32"),
    M("sgl20s-mxfp4-pad-any-gpu", SGL, 'if gpu_generation(hw) == "blackwell" and scenario.weights_bytes is None',
      "if scenario.weights_bytes is None"),
    M("sgl20s-mxfp4-pad-no-bias", SGL, "+ 2 * inter * 2\n", "\n"),
    M("sgl20s-mxfp4-pad-tp-ignored", SGL, "    part = inter // tp\n", "    part = inter\n"),
    # --- async19: vLLM's async scheduling (kvplan/engines/vllm_scheduler.py, vllm.py ASYNC_*) and the overload rule's
    # steady rise (kvplan/calc/simulate.py _rises); killed by tests/test_simulate_async.py, test_simulate_overload.py
    M("async19-arrivals-seen-at-once", V1S, "self.cut, self.call_at = self.call_at, r.now",
      "self.cut, self.call_at = r.now, r.now"),
    M("async19-arrivals-never-late", V1S, "self.cut, self.call_at = self.call_at, r.now",
      "self.cut, self.call_at = math.inf, r.now"),
    M("async19-finished-freed-at-once", V1S, "        if self.asyn:\n            n = r.held[i]",
      "        if False:\n            n = r.held[i]"),
    M("async19-finished-seat-free", V1S, "len(running) + len(chunks) + late < self.max_seqs",
      "len(running) + len(chunks) < self.max_seqs"),
    M("async19-finished-blocks-free", V1S, "r.free -= self.late_blocks\n        r.freed -= self.late_blocks",
      "r.freed -= 0\n        r.freed -= 0"),
    M("async19-late-hashless-to-the-tail", V1S,
      "                self.lifo += n - full\n                self.fronted += n - full\n            r.free += n",
      "                self.lifo += 0\n                self.fronted += n - full\n            r.free += n"),
    M("async19-late-no-step", V1S, "        if self.partial < 0 and not self.late and not (self.off",
      "        if self.partial < 0 and not (self.off"),
    M("async19-unseen-head-admitted", V1S, "               and arrival[waiting[0]] <= cut):",
      "               and True):"),
    # v1chunk19: vLLM V1's --long-prefill-token-threshold (kvplan/engines/vllm_scheduler.py "Long prefills")
    M("v1chunk19-running-chunk-uncapped", V1S, "                if 0 < cap < c:\n                    c = cap\n",
      "                if False:\n                    c = cap\n"),
    M("v1chunk19-admitted-chunk-uncapped", V1S, "            if 0 < cap < c:\n                c = cap\n",
      "            if False:\n                c = cap\n"),
    M("v1chunk19-capped-even-alone", V1S, "        return self.cap if n > 1 else 0", "        return self.cap"),
    M("v1chunk19-alone-counts-no-waiting", V1S, "        if n < 2:\n            w, arrival, cut = r.waiting",
      "        if False:\n            w, arrival, cut = r.waiting"),
    M("v1chunk19-alone-rule-from-0-30", VLLM, "LONG_PREFILL_ALONE_SINCE: Release = (0, 31, 0)",
      "LONG_PREFILL_ALONE_SINCE: Release = (0, 30, 0)"),
    M("v1chunk19-prefilled-joins-at-the-end", V1S, "            else:\n                r.join_at(i)\n        r.partial",
      "            else:\n                r.join(i)\n        r.partial"),
    M("v1chunk19-part-way-holds-no-seat", V1S, "len(running) + len(parts) + late < self.max_seqs",
      "len(running) + late < self.max_seqs"),
    M("v1chunk19-max-len-refused-from-0-26", VLLM, "LONG_PREFILL_MAX_LEN_SINCE: Release = (0, 27, 0)",
      "LONG_PREFILL_MAX_LEN_SINCE: Release = (0, 26, 0)"),
    M("v1chunk19-partial-prefills-any-value", VLLM, "            if value != 1:", "            if value < 1:"),
    M("v1chunk19-join-at-phase-unshifted", "kvplan/engines/replica.py",
      "        self.phase[(-self.shift - v) % self.block] += 1", "        self.phase[-v % self.block] += 1"),
    M("async19-default-from-0-13", VLLM, "ASYNC_SINCE: Release = (0, 14, 0)", "ASYNC_SINCE: Release = (0, 13, 0)"),
    M("async19-pp-keeps-it-on-0-14", VLLM, "if pp > 1 and not self.since(ASYNC_PP_UNTIL):", "if False:"),
    M("async19-flag-off-ignored", VLLM, 'return False, "off: --no-async-scheduling"',
      'return True, "off: --no-async-scheduling"'),
    M("async19-on-from-0-11", VLLM, "ASYNC_SKIP_SINCE: Release = (0, 12, 0)", "ASYNC_SKIP_SINCE: Release = (0, 11, 0)"),
    M("async19-overload-rise-share-10", "kvplan/calc/simulate.py", "OVERLOAD_RISE_SHARE = 0.05",
      "OVERLOAD_RISE_SHARE = 0.1"),
    M("async19-overload-rise-not-strict", "kvplan/calc/simulate.py",
      "any(b <= a for a, b in zip(samples, samples[1:], strict=False))",
      "any(b < a for a, b in zip(samples, samples[1:], strict=False))"),
    M("async19-overload-rise-not-in-metrics", "kvplan/calc/simulate.py",
      "rise is not None and _rises(rise.value or 0, n))", "False)"),
    M("async19-overload-four-looks", "kvplan/calc/simulate.py", "OVERLOAD_SAMPLES = 8", "OVERLOAD_SAMPLES = 4"),
    M("async19-overload-rise-no-floor", "kvplan/calc/simulate.py",
      "return steady_rise > max(OVERLOAD_RISE_SHARE * requests, OVERLOAD_MIN)",
      "return steady_rise > OVERLOAD_RISE_SHARE * requests"),
    M("async19-overload-verdict-no-rise", "kvplan/calc/simulate.py",
      "over = open_arrivals and (_grows(w_end, w_mid, n) or _rises(rise, n))",
      "over = open_arrivals and _grows(w_end, w_mid, n)"),
    M("async19-overload-last-look-not-last-arrival", "kvplan/calc/simulate.py",
      "for k in range(1, OVERLOAD_SAMPLES)] + [last]", "for k in range(0, OVERLOAD_SAMPLES)]"),
    # --- pd21s: attention-DP ranks in lockstep price every rank's prefill; one attention-DP instance split ---------
    M("pd21s-lockstep-none", COSTS, "    lockstep = min(par.dp, par.ep // par.tp) if",
      "    lockstep = 1 if False and"),
    M("pd21s-lockstep-dp-only", COSTS, "    lockstep = min(par.dp, par.ep // par.tp) if", "    lockstep = par.dp if"),
    M("pd21s-prefill-lockstep-ignored", COSTS, "        if lockstep and self.lockstep_ranks > 1:",
      "        if False:"),
    M("pd21s-mixed-lockstep-whole-pass", COSTS,
      "return mixed + (self.lockstep_ranks / self.pass_ranks - 1) * (mixed - alone), alone",
      "return mixed * self.lockstep_ranks / self.pass_ranks, alone"),
    M("pd21s-mixed-lockstep-ignored", COSTS,
      "return mixed + (self.lockstep_ranks / self.pass_ranks - 1) * (mixed - alone), alone",
      "return mixed, alone"),
    M("pd21s-sim-prefill-alone", "kvplan/calc/sim/steps.py",
      "return self.sm.prefill_seconds(tokens, cached, self.chunk, lockstep=True)",
      "return self.sm.prefill_seconds(tokens, cached, self.chunk)"),
    M("pd21s-colocated-closed-form-saturated", PD, "        t_pf = self.colocated_prefill(p, rate, d)\n",
      "        t_pf = self.prefill(p)\n"),
    M("pd21s-one-adp-instance-refused", PD, "    if instances < 2 and ranks == 1:", "    if instances < 2:"),
    M("pd21s-colocated-no-whole-layouts", PD, "    spare = 0 if colocated else par.pp", "    spare = par.pp"),
    M("pd21s-rounding-note-never", PD, "    if col_rps and dis.fluid / col_rps > WIN_MARGIN >= margin:",
      "    if False:"),
    M("pd21s-rounding-note-always", PD, "    if col_rps and dis.fluid / col_rps > WIN_MARGIN >= margin:",
      "    if col_rps:"),
    M("pd21s-first-token-after-stall", "kvplan/engines/replica.py",
      "        return max((r - 1) * (t - alone) / r, 0.0) if r > 1 else 0.0", "        return 0.0"),
    M("pd21s-replica-not-told-lockstep", "kvplan/calc/simulate.py",
      "    r.lockstep = sm.lockstep_ranks / sm.pass_ranks",
      "    r.lockstep = 1.0"),
    M("pd21s-brief-pd-no-margin", REC, '": {m:.2f}x colocated goodput (the bar 1.05x)" if', '"" if'),
    M("pd21s-brief-pd-no-slo", "kvplan/present/recommend.py", '("PD", plan.pd_verdict or plan.row("pd").value)',
      '("PD", plan.row("pd").value)'),
    M("pd21s-no-split-hint-not-two-instances", PD, "        if own_instances < 2:     # one attention-DP instance",
      "        if False:     # one attention-DP instance"),
    # --- speed19t: _first_step_reaching's probes written out, run_book's next event inline, complete()'s inline
    # finish (the tests: test_sim_fast_paths.py's hand cases and its definition, the reference equality tests) ---
    M("speed19t-first-step-crossing-rounded-down", "kvplan/calc/sim/steps.py",
      "cross, a0, a1, b0, b1 = max(math.ceil(-d0 / d1), 0), v0, v1, u0, u1",
      "cross, a0, a1, b0, b1 = max(math.floor(-d0 / d1), 0), v0, v1, u0, u1"),
    M("speed19t-first-step-parallel-loser", "kvplan/calc/sim/steps.py",
      "cross, a0, a1, b0, b1 = (math.inf if d0 >= 0 else 0), u0, u1, v0, v1",
      "cross, a0, a1, b0, b1 = (0 if d0 >= 0 else math.inf), u0, u1, v0, v1"),
    M("speed19t-first-step-second-side-one-short", "kvplan/calc/sim/steps.py",
      "(n * b0 + b1 * n * (m + mid - 1) / 2)", "(n * b0 + b1 * n * (m + mid - 2) / 2)"),
    # (no mutant on the probes' order or on dropping the guess's second probe: the bisection finds the same first
    # step either way, only later)
    M("speed19t-run-book-blind-to-arrivals", "kvplan/calc/simulate.py",
      "copy landing (ReplicaState.next_event_at)\n                    upcoming = arrivals[0][0] if arrivals else inf\n",
      "copy landing (ReplicaState.next_event_at)\n                    upcoming = inf\n"),
    M("speed19t-run-book-blind-to-swap-ins", "kvplan/calc/simulate.py",
      "arrivals else inf\n                    if landing and landing[0][0] < upcoming:\n"
      "                        upcoming = landing[0][0]",
      "arrivals else inf\n                    if False:\n                        upcoming = landing[0][0]"),
    M("speed19t-complete-inline-phase-kept", "kvplan/engines/replica.py",
      "            self.phase[(-v - self.shift) % self.block] -= 1\n            in_run[i] = False",
      "            in_run[i] = False"),
    M("speed19t-complete-inline-blocks-kept", "kvplan/engines/replica.py",
      "            self.free += held\n            self.freed += held", "            self.freed += held"),
    M("speed19t-complete-inline-for-closed-loops", "kvplan/engines/replica.py",
      "plain = self.on_finish is None and not self.closed", "plain = self.on_finish is None"),
    # RuleBook._admit_waiting's written-out prefill_prompt and join
    M("speed19t-admit-inline-no-prefix-hit", "kvplan/engines/scheduling.py",
      "hit = r.hit if r.prefix_cached else 0", "hit = 0"),
    M("speed19t-admit-inline-first-token-at-admission", "kvplan/engines/scheduling.py",
      "r.now = now = now + t\n", "r.now = now + t\n"),
    M("lead27-admit-inline-first-token-no-lockstep", "kvplan/engines/scheduling.py",
      "tally.first_token[i] = now - r.first_token_back(t) if r.lockstep > 1 else now", "tally.first_token[i] = now"),
    M("speed19t-admit-inline-join-phase", "kvplan/engines/scheduling.py",
      "phase[-v % block] += 1", "phase[v % block] += 1"),
    M("speed19t-admit-inline-join-order", "kvplan/engines/scheduling.py",
      "r.seq[i] = r.joins\n                r.joins += 1", "r.seq[i] = r.joins\n                r.joins += 0"),
    M("speed19t-admit-inline-done-step", "kvplan/engines/scheduling.py",
      "r.done_at[i] = d = r.El[i] - v", "r.done_at[i] = d = r.El[i] - v + 1"),
    # (no mutant on V1Scheduler.may_admit_soon's whole-input shortcut or on the no-room record it leaves: the
    # shortcut's answer is the lookup's, by the argument in its comment, which test_sim_fast_paths.py's
    # test_v1_whole_input_head_never_fits_after_a_preemption checks on preempting runs; and the record only skips
    # checks that free - need, never growing over decode steps, makes fail anyway, whatever free it records)
    # prefill20: benchmarks/prefill_fidelity.py's harness rules (pd's saturated-role spread, per GPU, error sign)
    M("prefill20-harness-no-spread", "benchmarks/prefill_fidelity.py",
      "seconds = step.prefill_seconds(p.prompt, 0, None, spread, prompts=p.prompts)",
      "seconds = step.prefill_seconds(p.prompt, 0, None, prompts=p.prompts)"),
    M("prefill20-harness-per-replica", "benchmarks/prefill_fidelity.py",
      "return p.prompt * p.prompts / seconds / par.tp", "return p.prompt * p.prompts / seconds"),
    M("prefill20-harness-throughput-error-sign", "benchmarks/prefill_fidelity.py",
      "return p.measured / predicted - 1", "return predicted / p.measured - 1"),
    M("prefill20-harness-utilisation-per-gpu", "benchmarks/prefill_fidelity.py",
      "return f / (p.measured / 1e3 * s.parallelism.tp * peak)", "return f / (p.measured / 1e3 * peak)"),
    M("user27b-calibration-tp-unchecked", "kvplan/inputs/calibration_file.py",
      "    if tp != cal.tp:\n        how", "    if False:\n        how"),
    M("user27b-host-link-unused-accepted", "kvplan/commands/common.py",
      "                if scenario[name] is not None:", "                if False:"),
    M("user27b-trace-times-unsaid", "kvplan/options/simulate.py",
      "if tr is not None and tr.arrivals is not None and (users is not None or rate is not None):",
      "if tr is not None and tr.arrivals is not None and users is None and rate is not None:"),
    M("user27b-seed-note-unsaid", "kvplan/options/simulate.py",
      "if seed is not None and (tr is not None or fixed) and rate is None:",
      "if seed is not None and tr is not None and rate is None:"),
    M("user27b-seed-note-when-drawn", "kvplan/options/simulate.py",
      "if seed is not None and (tr is not None or fixed) and rate is None:",
      "if seed is not None and (tr is not None or fixed):"),
    M("user27b-preset-limit-unchecked", "kvplan/inputs/presets.py",
      "elif _is_number(number) and top is not None and not number <= top:", "elif False:"),
    M("user27b-preset-params-limit", "kvplan/inputs/presets.py", "MAX_PARAMS = 1e14", "MAX_PARAMS = 1e15"),
    M("user27b-preset-weight-bytes-limit", "kvplan/inputs/presets.py",
      'return MAX_WEIGHT_BYTES if name.endswith("weight_bytes") else MAX_PARAMS', "return MAX_PARAMS * 100"),
    M("user27b-preset-hardware-unlimited", "kvplan/inputs/presets.py",
      'limit=lambda name: None if name == "hbm_capacity_gib" else MAX_HARDWARE_FIGURE)', "limit=None)"),
    M("user27b-log-prose-unchecked", "kvplan/inputs/startup_log.py",
      "and 2 * len(prose) > lines:", "and False:"),
    M("user27b-log-prose-threshold", "kvplan/inputs/startup_log.py",
      "and 2 * len(prose) > lines:", "and len(prose) > lines:"),
    M("user27b-log-line-no-level", "kvplan/inputs/startup_log.py",
      'r"\\b(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\\b|\\d\\d:\\d\\d:\\d\\d|', 'r"NOLEVEL|'),
    # vllm19x: vLLM V1's speculative slots (the K drafts and K lookahead slots a running request holds)
    M("vllm19x-spec-no-lookahead", VLLM, "            return 2 * k, (f\"{k} draft",
      "            return k, (f\"{k} draft"),
    M("vllm19x-spec-lookahead-always", VLLM, "        return k, (f\"{k} draft slots per running request",
      "        return 2 * k, (f\"{k} draft slots per running request"),
    M("vllm19x-spec-lookahead-release", VLLM, "SPEC_LOOKAHEAD_SINCE: Release = (0, 9, 0)",
      "SPEC_LOOKAHEAD_SINCE: Release = (0, 9, 1)"),
    M("vllm19x-spec-slots-before-v1", VLLM, "        if not self.since(V1_SINCE):\n            return 0, \"\", \"\"",
      "        if False:\n            return 0, \"\", \"\""),
    M("vllm19x-spec-table-unshifted", "kvplan/calc/simulate.py", "        bt = bt[slots:]", "        bt = bt[0:]"),
    M("vllm19x-spec-phase-unshifted", "kvplan/engines/replica.py",
      "        self.phase[(-v - self.shift) % self.block] += 1",
      "        self.phase[-v % self.block] += 1"),
    M("vllm19x-spec-fit-unshifted", "kvplan/calc/simulate.py",
      "_last_step_that_fits(x + self.r.shift, self.r.block", "_last_step_that_fits(x, self.r.block"),
    M("vllm19x-spec-slots-not-set", "kvplan/calc/simulate.py", "    r.shift = slots\n", "    r.shift = 0\n"),
    M("vllm19x-spec-peak-check-unshifted", "kvplan/calc/simulate.py",
      "peak_blocks = table[-(-(P + L - 1 + slots) // u.block)]", "peak_blocks = table[-(-(P + L - 1) // u.block)]"),
    # sglpool20: an NVFP4 ModelOpt MLA checkpoint's bf16 parts in SGLang
    M("sglpool20-nvfp4-no-wkc-copies", SGL, "             + layers * kv_b * 2 / tp)", "             + 0)"),
    M("sglpool20-nvfp4-qa-split", SGL, "layers * whole * (2 - p / tp)", "layers * whole * (2 - p) / tp"),
    M("sglpool20-nvfp4-no-router", SGL, "    router = (model.num_experts or 0) * hidden", "    router = 0"),
    M("sglpool20-nvfp4-head-replicated", SGL, "vocab * hidden * (2 - p) / head_group / par.pp",
      "vocab * hidden * (2 - p) / par.pp"),
    M("sglpool20-nvfp4-attn-fp4", SGL, "layers * split * (2 - p) / tp", "0"),
    M("sglpool20-nvfp4-off", SGL, "        if nvfp4 and scenario.weights_bytes is None:", "        if False:"),
    M("sglpool20-nvfp4-head-tp-only", SGL, "    head_group = tp * (par.dp if dp_attention(par) else 1)",
      "    head_group = tp"),
    M("sglpool20-nvfp4-any-dtype", SGL, '        nvfp4 = scenario.weight_dtype == "nvfp4" or',
      "        nvfp4 = True or"),
    # decode19b: the A100 points of benchmarks/tpot_fidelity.py (B24 from serving_runs.toml's config, B25 at the 40GB
    # card's HBM rate) and the run grouping of a seven-row table
    M("decode19b-run-of-five-letters", "benchmarks/tpot_fidelity.py",
      'return point_id.rstrip("abcdefghijklmnopqrstuvwxyz")', 'return point_id.rstrip("abcde")'),
    M("decode19b-a40gb-unscaled", "benchmarks/tpot_fidelity.py",
      'A40GB = (("hbm", round(0.79 * 1555 / 2039, 4)),)', 'A40GB = (("hbm", 0.79),)'),
    M("decode19b-model-ref-presets-only", "benchmarks/tpot_fidelity.py",
      "    if model not in configs:\n        return model", "    if True:\n        return model"),
    M("decode19b-b24-row-misread", "benchmarks/tpot_fidelity.py",
      '("d", 2048, 128, 27.6)', '("d", 2048, 128, 24.3)'),
    M("decode19b-b25-no-factor", "benchmarks/tpot_fidelity.py",
      'engine="vllm 0.23.0", factors=A40GB)', 'engine="vllm 0.23.0")'),
    # user28: shared options a command takes but never reads are refused (kvplan/commands/common.py's unused=...);
    # tests/test_user_pass.py::test_every_shared_option_counts_or_is_refused walks every command's options
    M("user28-size-block-size-accepted", "kvplan/commands/size.py",
      '"host_link_gbs", "block_size", "weights"', '"host_link_gbs", "weights"'),
    M("user28-size-calibration-accepted", "kvplan/commands/size.py",
      '"weight_dtype", "calibration"))', '"weight_dtype"))'),
    M("user28-calibrate-host-link-accepted", "kvplan/commands/calibrate.py",
      'unused=("host_link_gbs", "block_size")', 'unused=("block_size",)'),
    M("user28-explain-log-host-link-accepted", "kvplan/commands/explain_log.py",
      'unused=("host_link_gbs",)', 'unused=()'),
    M("user28-preemption-kv-pool-accepted", "kvplan/commands/preemption.py",
      'unused=("kv_pool",)', 'unused=()'),
    # tpot: --batch above a given --max-num-seqs is refused; the most requests per replica stop at it
    M("user28-tpot-batch-over-max-num-seqs", "kvplan/options/tpot.py",
      "if seqs is not None and options.batch > seqs:", "if False:"),
    M("user28-tpot-max-batch-uncapped", "kvplan/calc/tpot.py",
      "if s.max_num_seqs is not None and fit > s.max_num_seqs:", "if False:"),
    # user28: a --kv-pool given reaches recommend --emit (tests/test_user_pass.py::test_kv_pool_*)
    M("user28-kv-pool-flag-not-emitted", "kvplan/engines/base.py",
      "            flags += self.pool_flags(plan, fraction) or [Flag(",
      "            flags += [] or [Flag("),
    M("user28-kv-pool-fraction-rounded-down", "kvplan/engines/base.py",
      "shown = math.ceil(value * 1000) / 1000", "shown = math.floor(value * 1000) / 1000"),
    M("user28-kv-pool-fraction-over-one", "kvplan/engines/base.py",
      "        if value > 1:\n            return []", "        if False:\n            return []"),
    M("user28-vllm-kv-memory-any-release", "kvplan/engines/vllm.py",
      "if self.version is not None and self.version < KV_MEMORY_SINCE:", "if False:"),
    M("user28-sglang-max-total-tokens-bytes", "kvplan/engines/sglang.py",
      'cap = Flag("--max-total-tokens", str(sg.max_total_num_tokens),',
      'cap = Flag("--max-total-tokens", str(s.kv_pool_bytes),'),
    # user28: a trace written as one JSON array is named as such (test_user_pass::test_a_json_array_trace_*)
    M("user28-trace-json-array-unsaid", "kvplan/inputs/workload.py",
      'if body[0][1].lstrip().startswith("["):', "if False:"),
    # user28: -g h200 typed out is given (test_user_pass::test_hardware_h200_typed_out_*)
    M("user28-log-hardware-h200-not-given", "kvplan/options/scenarios.py",
      'hardware_given = options.get("hardware") is not None',
      'hardware_given = options.get("hardware") not in (None, "h200")'),
    M("user28-target-hardware-h200-not-given", "kvplan/options/recommend.py",
      "    if hardware is None:   # not given", '    if hardware is None or hardware == "h200":   # not given'),
    # user28: tpot says which --batches / --contexts rows it leaves out (test_user_pass::test_tpot_says_which_*)
    M("user28-tpot-batches-dropped-unsaid", "kvplan/calc/tpot.py", "    if over:   # rows asked for", "    if False:"),
    M("user28-tpot-contexts-dropped-unsaid", "kvplan/calc/tpot.py",
      "    if beyond and o.contexts != TABLE_CONTEXTS:", "    if False:"),
    M("user28-default-gpu-without-presets-dir", "kvplan/options/scenarios.py",
      'options["hardware"] = SCENARIO_DEFAULTS["hardware"]', 'options.pop("hardware", None)'),
    # prefill20c: the prefill price made structural (tests/test_prefill_price.py, tests/test_prefill_fidelity.py)
    M("pf20c-dtype-ignores-override", "kvplan/calc/costs.py",
      'dtype = compute_dtype_for(model, hw, "auto", s.weight_dtype)', 'dtype = compute_dtype_for(model, hw, "auto")'),
    M("pf20c-int4-at-fp8", "kvplan/calc/costs.py",
      'FOLLOWS_WEIGHT_DTYPE = ("fp8", "int4", "int8", "bf16", "fp16", "fp32")',
      'FOLLOWS_WEIGHT_DTYPE = ("fp8", "int8", "bf16", "fp16", "fp32")'),
    M("pf20c-fp4-override-bf16", "kvplan/calc/costs.py",
      "wd = weight_dtype if weight_dtype in FOLLOWS_WEIGHT_DTYPE else model.weight_dtype",
      "wd = weight_dtype or model.weight_dtype"),
    M("pf20c-mla-at-fp8", "kvplan/calc/costs.py",
      "* (scale if isinstance(g.kind, MLA) else 1)", "* 1"),
    M("pf20c-no-prefill-comm", "kvplan/calc/costs.py",
      "total += max(weights, compute) + self.prefill_comm(n) + self.overhead_s",
      "total += max(weights, compute) + self.overhead_s"),
    M("pf20c-tp-decode-share", "kvplan/calc/costs.py",
      'prefill_tp = ((2 * allreduce_latency, ring_bytes / (link * f.value("link")))',
      'prefill_tp = ((2 * allreduce_latency, ring_bytes / (link * f.value("allreduce_link")))'),
    M("pf20c-ep-no-own-node", "kvplan/calc/costs.py",
      "copies = touched_groups(ep / hw.node.gpus_per_node, experts, top_k)",
      "copies = touched_groups(ep / hw.node.gpus_per_node, experts, top_k) - 1"),
    M("pf20c-ep-all-nodes", "kvplan/calc/costs.py",
      "    return groups * (1 - miss)\n", "    return groups\n"),
    M("pf20c-ep-bf16-dispatch", "kvplan/calc/costs.py",
      "dispatch = FP8_DISPATCH_BYTES if fp8_dispatch else 2.0", "dispatch = 2.0"),
    M("pf20c-ep-not-per-tp", "kvplan/calc/costs.py",
      "(dispatch / share_d + 2.0 / share_c) / rate / tp", "(dispatch / share_d + 2.0 / share_c) / rate"),
    M("pf20c-ep-no-domain", "kvplan/calc/costs.py",
      "domain = (hw.scale_up.domain_gpus if hw.scale_up and hw.scale_up.domain_gpus else None) or hw.node.",
      "domain = None or hw.node."),
    M("pf20c-ep-nearest-size", "kvplan/calc/costs.py",
      "key = min(DEEPEP_INTERNODE_SHARE, key=lambda n: (abs(n - ep), n))", "key = 64"),
    M("pf20c-mixed-no-chunk-comm", "kvplan/calc/costs.py",
      "extra += self.prefill_comm(tokens - batch, mixed=True)", "extra += 0.0"),
    M("pd21u-decode-pool-at-mean", "kvplan/calc/pd.py",
      "return min(self.fit(p + d), self.max_seqs, len(self.batches))",
      "return min(self.fit(p + -(-d // 2)), self.max_seqs, len(self.batches))"),
    M("pd21u-decode-own-limit", "kvplan/calc/pd.py",
      "        limit = self.batch_limit(p, d)\n        plain = self.tpot_by_batch(p, d)[:limit]\n"
      "        ok = np.nonzero(",
      "        limit = min(self.fit(p + d // 2), len(self.batches))\n        plain = self.tpot_by_batch(p, d)[:limit]\n"
      "        ok = np.nonzero("),
    M("pd21u-climb-uncapped", "kvplan/calc/pd.py",
      "hi = min(lo * (1.25 if k < 4 else 2.0), upper)", "hi = lo * (1.25 if k < 4 else 2.0)"),
    M("pd21u-climb-unbounded", "kvplan/calc/pd.py",
      "                if lo >= upper:\n                    return lo, points[lo], None\n",
      "                if k >= 4:\n                    return lo, points[lo], None\n"),
    M("pd21u-lockstep-note-never", "kvplan/calc/pd.py",
      '    if dis.decode.dp < 2 or engine == "vllm":', "    if True:"),
    M("pd21u-lockstep-note-on-vllm", "kvplan/calc/pd.py",
      '    if dis.decode.dp < 2 or engine == "vllm":', "    if dis.decode.dp < 2:"),
    M("pd21u-prefill-role-lockstep", "kvplan/calc/pd.py",
      "            passes = m.prefill_passes(p)\n",
      "            passes = (m.colocated_prefill(p),)\n"),
    M("pd21u-prefill-role-one-rank", "kvplan/calc/pd.py",
      "            c_p, c_d = lp.dp / service, ld.dp * side.requests_per_second",
      "            c_p, c_d = 1 / service, ld.dp * side.requests_per_second"),
    M("pd21u-decode-gpu-ignored", "kvplan/calc/pd.py",
      "    for lay, m in (roles if decode_roles is None else decode_roles):", "    for lay, m in roles:"),
    M("pd21u-role-gpu-unchecked", "kvplan/calc/pd.py",
      "        if rs is not s and not any(rm.fit(", "        if False and not any(rm.fit("),
    M("pd21u-own-tp-unpinned", "kvplan/calc/pd.py",
      ".with_(tp=lay.tp, prompt_tokens=p, decode_tokens=d)", ".with_(prompt_tokens=p, decode_tokens=d)"),
    M("pd21u-beat-probe-inverted", "kvplan/calc/pd.py",
      "(beat > hi if meets(hi) else beat < hi) and not meets(beat):",
      "(beat > hi if meets(hi) else beat < hi) and meets(beat):"),
    # --- sglov19: SGLang's overlap scheduler (sglang_scheduler "Overlap scheduler"; WIP, off by default) ----------
    M("sglov19-overlap-sees-every-arrival", "kvplan/engines/sglang_scheduler.py",
      "            if arrival[i] > cut:", "            if False:"),
    M("sglov19-overlap-no-held-seats", "kvplan/engines/sglang_scheduler.py",
      "            if len(running) + seats >= self.max_batch:", "            if len(running) >= self.max_batch:"),
    M("sglov19-overlap-no-forced-step", "kvplan/engines/sglang_scheduler.py",
      "            r.preempted = True                       # the event loop's next run is one step (as after",
      "            pass                                     # the event loop's next run is one step (as after"),
    M("sglov19-overlap-cut-is-now", "kvplan/engines/sglang_scheduler.py",
      "        self.cut = self.call_at if ran and (r.running or self.late) else math.inf",
      "        self.cut = r.now if ran and (r.running or self.late) else math.inf"),
    M("sglov19-overlap-flag-not-refused", "kvplan/engines/schedulers.py",
      'if getattr(o, "disable_overlap_schedule", False) and engine.id != "sglang":',
      'if False:'),
    # the next two act only when a decode is short of pages solely because requests finishing in flight still hold
    # theirs: test_overlap_when_finishing_requests_hold_the_pages_a_decode_needs_equals_the_reference (found by search)
    M("sglov19-overlap-no-empty-batch-redo", "kvplan/engines/sglang_scheduler.py",
      "            if not r.running or self.need1() > r.free:", "            if False:"),
    M("sglov19-overlap-full-clears-at-finish", "kvplan/engines/sglang_scheduler.py",
      "and (r.done - late, self.retractions) == self.full_mark:",
      "and (r.done, self.retractions) == self.full_mark:"),
    M("sglov19-overlap-retracts-while-finishing", "kvplan/engines/sglang_scheduler.py",
      "        if self.late:                                # (overlap) requests finishing in flight: no",
      "        if False:                                    # (overlap) requests finishing in flight: no"),
    M("sglov19-overlap-round-frees-its-finished", "kvplan/engines/sglang_scheduler.py",
      "                old, self.late = self.late[:late], self.late[late:]",
      "                old, self.late = self.late, []"),
    # prefill20d: a prefill TP all-reduce across nodes on NCCL's ring over the node's NICs; the decode step's EP
    # dispatch / combine inside an NVLink domain wider than a node (tests/test_prefill_cross_node.py)
    M("pf20d-cross-no-nic-total", "kvplan/calc/costs.py",
      "rate = hw.node.gpus_per_node * nic.value * 1e9", "rate = nic.value * 1e9"),
    M("pf20d-cross-no-link-min", "kvplan/calc/costs.py",
      "rate = min(rate, link.value * 1e9)", "rate = rate"),
    M("pf20d-cross-no-efficiency", "kvplan/calc/costs.py",
      '    return rate * f.value("link")\n', "    return rate\n"),
    M("pf20d-cross-inside-domain", "kvplan/calc/costs.py",
      "if tp <= scale_up_domain(hw) or nic is None:", "if tp <= hw.node.gpus_per_node // 2 or nic is None:"),
    M("pf20d-cross-custom-latency", "kvplan/calc/costs.py",
      "else (2 * latency, ring_bytes / cross))", "else (2 * allreduce_latency, ring_bytes / cross))"),
    M("pf20d-cross-ignored", "kvplan/calc/costs.py",
      "cross = cross_node_allreduce_rate(hw, f, par.tp)", "cross = None"),
    M("pf20d-domain-node-only", "kvplan/calc/costs.py",
      "return hw.scale_up.domain_gpus if hw.scale_up and hw.scale_up.domain_gpus else hw.node.gpus_per_node",
      "return hw.node.gpus_per_node"),
    M("pf20d-decode-ep-node-only", "kvplan/calc/costs.py",
      "rate = link if par.ep <= scale_up_domain(hw) else", "rate = link if par.ep <= hw.node.gpus_per_node else"),
    M("pf20d-preempt-comm-missing", "kvplan/calc/preemption.py",
      "comm = sum(step.prefill_comm(n) for n in sizes)", "comm = 0.0"),
    # user28b: pd's hint for one instance names the degree above one (test_user_pass::test_pd_one_instance_hint_*)
    M("user28b-pd-hint-smaller-tp-always", "kvplan/calc/pd.py",
      'for flag, degree in (("--tp", s.parallelism.tp), ("--pp", s.parallelism.pp)) if degree > 1]',
      'for flag, degree in (("--tp", s.parallelism.tp),) if degree > 0]'),
    # user28b: size --compare the model itself is refused (test_user_pass::test_size_compare_with_the_model_itself_*)
    M("user28b-size-compare-itself-accepted", "kvplan/options/command.py",
      "    if compare is not None and other == built.model:", "    if False:"),
    # user28b: every built-in model has a name beyond its id (test_user_pass::test_presets_list_shows_a_name_*)
    M("user28b-qwq-name-is-its-id", "presets/models/qwq-32b.toml",
      'name = "QwQ-32B (32.5B dense reasoning model)"', 'name = "QwQ-32B"'),
    # user28b: pd's TTFT with the unit that reads, a long TTFT without a target named (test_user_pass::test_pd_long_*)
    M("user28b-pd-colocated-ttft-in-ms", "kvplan/calc/pd.py",
      '"{t:ms:,.1f} ms, TTFT " + f"p{fq} " + "{f:time:,.1f}",',
      '"{t:ms:,.1f} ms, TTFT " + f"p{fq} " + "{f:ms:,.1f} ms",'),
    M("user28b-time-text-ms-to-an-hour", "kvplan/render/output.py",
      '(10.0, 1e3, "ms"), (600.0, 1.0, "s")', '(3600.0, 1e3, "ms"), (600.0, 1.0, "s")'),
    M("user28b-time-text-zero-in-us", "kvplan/render/output.py",
      'if a < below and (a or name == "ms"):', "if a < below:"),
    M("user28b-pd-long-ttft-unsaid", "kvplan/calc/pd.py",
      "v.value is not None and v.number() >= LONG_TTFT_SECONDS]", "v.value is not None and v.number() >= math.inf]"),
    M("user28b-pd-long-ttft-said-with-a-target", "kvplan/calc/pd.py",
      "    if targets.ttft is not None:\n        return None\n    long =", "    long ="),
    M("user28b-pd-long-ttft-always", "kvplan/calc/pd.py",
      "v.value is not None and v.number() >= LONG_TTFT_SECONDS]", "v.value is not None]"),
    # user28b: pd names the layouts it chose over the --tp given (test_user_pass::test_pd_*layouts*)
    M("user28b-pd-layout-note-unsaid", "kvplan/calc/pd.py",
      '    if all(replace(lay, gpu="") == own for lay in chosen):', "    if True:"),
    M("user28b-pd-layout-note-always", "kvplan/calc/pd.py",
      '    if all(replace(lay, gpu="") == own for lay in chosen):', "    if False:"),
    M("user28b-pd-layout-note-colocated-only", "kvplan/calc/pd.py",
      "    chosen = (col_lay, dis.prefill, dis.decode)", "    chosen = (col_lay,)"),
    M("user28b-pd-layout-note-given-tp-in-notes", "kvplan/calc/pd.py",
      "    given_tp = layout if layout is not None and not s.tp_defaulted else None",
      "    given_tp = None"),
    # --- sglspeed: SGLang's scheduler in its own loop (simulate._EventLoop.run_sglang) and its written-out steps ---
    M("sglspeed-loop-on-the-vectorized-path", "kvplan/calc/simulate.py",
      "self.engine_fast = type(sched) is not RuleBook and fast and prices.spec is None",
      "self.engine_fast = type(sched) is not RuleBook and prices.spec is None"),
    M("sglspeed-loop-blind-to-arrivals", "kvplan/calc/simulate.py",   # (speed19w: runner's, shared with run_book)
      "if now + run_time > upcoming:     # stop at the step",
      "if now + run_time > upcoming + 1e12:     # stop at the step"),
    M("sglspeed-loop-no-one-step-after-retraction", "kvplan/calc/simulate.py",   # (speed19w: in runner, shared)
      "            if k == 1 or one:                     # one step",
      "            if k == 1:                     # one step"),
    M("sglspeed-loop-late-kept-through-the-run", "kvplan/calc/simulate.py",
      "limit = room_for_run(r, need1)        # blocks the run may add",
      "limit = r.free                        # blocks the run may add"),
    M("sglspeed-loop-overflow-ignored", "kvplan/calc/simulate.py",   # (speed19w: in runner, shared)
      "                if over:                          # ReplicaState.last_step_that_fits written out",
      "                if False:                          # ReplicaState.last_step_that_fits written out"),
    M("sglspeed-loop-cut-run-keeps-its-blocks", "kvplan/calc/simulate.py",
      "added = need1 if k == 1 else r.crossings(k, s0, b)   # the blocks of the steps run",
      "added = added   # the blocks of the steps run"),
    M("sglspeed-loop-one-step-price-smaller", "kvplan/calc/simulate.py",   # (speed19w: in runner, shared)
      "                k = 1\n                now += step0 + (u0 if u0 >= v0 else v0)",
      "                k = 1\n                now += step0 + (v0 if u0 >= v0 else u0)"),
    M("sglspeed-round-join-phase-not-counted", SGS, "                r.phase[(-v - r.shift) % block] += 1\n",
      "                r.phase[(-v - r.shift) % block] += 0\n"),
    M("sglspeed-round-join-done-at-prompt", SGS, "                r.done_at[i] = d = r.El[i] - v\n",
      "                r.done_at[i] = d = r.El[i] - v + 1\n"),
    M("sglspeed-retract-leave-next-token-blocks", SGS, "            r.held[i] = btl[cache]\n",
      "            r.held[i] = btl[cache + 1]\n"),
    M("sglspeed-retract-leave-phase-kept", SGS, "            r.phase[(-v - r.shift) % block] -= 1\n",
      "            r.phase[(-v - r.shift) % block] -= 0\n"),
    M("sglspeed-retract-next-in-line", SGS,
      "del running[bisect.bisect_left(running, r.seq[i], key=r.seq.__getitem__)]",
      "del running[min(bisect.bisect_right(running, r.seq[i], key=r.seq.__getitem__), len(running) - 1)]"),
    # (no mutant on the round end's settle when none of its requests finished, ``elif tree.evictable > r.free``: it is
    # equivalent. Every later reader of the tree settles first - the next round's start, retract_decode's
    # check_decode_mem, a finish's _into_tree - and nothing touches, locks or adds a node before it, so the same
    # leaves go in the same LRU order, a little later; sglspeed's mutant survived test_sim_sglang*.py)
    # --- pd300v: a mixed step's chunk in the step's one dispatch / combine, at the decode step's backend rate
    M("pd300v-mixed-chunk-at-deepep-rate", COSTS,
      "            per = self.mixed_ep_per_token", "            pass"),
    M("pd300v-mixed-chunk-at-decode-rate", COSTS,
      "        return per / (self.top_k * (ep - 1) / ep)", "        return per"),
    M("pd300v-colocated-tries-one-replica-twice", "kvplan/calc/pd.py",
      "        if _replica_key(h[2]) not in seen:", "        if True:"),
    M("pd300v-mixed-latency-twice", COSTS,
      "extra = read + comm - comm0 + self.request_overhead_s * batch if batch else 0.0",
      "extra = read + comm + self.request_overhead_s * batch if batch else 0.0"),
    # sglpool20c: what SGLang's weight load adds beyond the parameters; an unmeasured GPU's reserve on a PCIe host
    M("sglpool20c-load-off", SGL, "        if scenario.weights_bytes is None:\n            load = ",
      "        if False:\n            load = "),
    M("sglpool20c-load-one-rank", SGL, "load = LOAD_OVERHEAD_GIB[0] if ranks == 1 else LOAD_OVERHEAD_GIB[1]",
      "load = LOAD_OVERHEAD_GIB[0]"),
    M("sglpool20c-load-tp1-value", SGL, "LOAD_OVERHEAD_GIB = (0.11, 0.26)", "LOAD_OVERHEAD_GIB = (0.0, 0.26)"),
    M("sglpool20c-pcie-hidden-off", SGL, "        unmeasured = pcie and not self.driver_measured(hw)",
      "        unmeasured = False"),
    M("sglpool20c-pcie-hidden-any-gpu", SGL, "        unmeasured = pcie and not self.driver_measured(hw)",
      "        unmeasured = pcie"),
    M("sglpool20c-pcie-hidden-tp1-too", SGL, "        unmeasured = pcie and not self.driver_measured(hw)",
      "        unmeasured = not self.driver_measured(hw)"),
    M("sglpool20c-pcie-no-nccl", SGL, "driver, init = 0.0, PCIE_HIDDEN_GIB + PCIE_NCCL_GIB",
      "driver, init = 0.0, PCIE_HIDDEN_GIB"),
    M("sglpool20c-alone-note-off", SGL, "        alone = ranks == 1 and not self.driver_measured(hw)",
      "        alone = False"),
    # pool20d: the host a GPU preset names ([node] os) sets SGLang's pre-load memory on an unmeasured GPU alone
    M("pool20d-host-ignored", SGL, "        host = hw.node.os if alone else None", "        host = None"),
    M("pool20d-host-any-gpu", SGL, "        host = hw.node.os if alone else None", "        host = hw.node.os"),
    M("pool20d-host-swapped", SGL, "PCIE_HIDDEN_GIB if host == \"linux\" else WINDOWS_HIDDEN_GIB",
      "WINDOWS_HIDDEN_GIB if host == \"linux\" else PCIE_HIDDEN_GIB"),
    M("pool20d-host-keeps-driver", SGL, "            driver, init = 0.0, PCIE_HIDDEN_GIB if host",
      "            init = PCIE_HIDDEN_GIB if host"),
    M("pool20d-host-unused-silent", SGL, "measured driver reserve\" if hw.node.os and not host else \"\")",
      "measured driver reserve\" if False else \"\")"),
    M("pool20d-vllm-host-silent", "kvplan/engines/vllm.py", "        if hw.node.os:\n            how +=",
      "        if False:\n            how +="),
    M("pool20d-gdn-warning-every-release", "kvplan/engines/vllm.py",
      "and self.since(GDN_GRAPH_TRANSIENT_SINCE) and GatedDeltaNet", "and GatedDeltaNet"),
    M("pool20d-gdn-warning-any-model", "kvplan/engines/vllm.py",
      "and self.since(GDN_GRAPH_TRANSIENT_SINCE) and GatedDeltaNet in self.kinds(model)):",
      "and self.since(GDN_GRAPH_TRANSIENT_SINCE)):"),
    M("pool20d-gdn-warning-since-0.25", "kvplan/engines/vllm.py", "GDN_GRAPH_TRANSIENT_SINCE: Release = (0, 26, 0)",
      "GDN_GRAPH_TRANSIENT_SINCE: Release = (0, 25, 0)"),
    M("pool20d-gdn-warning-given-pool", "kvplan/engines/vllm.py",
      "        if (scenario.kv_pool_bytes is None and scenario.runtime_reserve_bytes is None\n"
      "                and self.since(GDN",
      "        if (scenario.runtime_reserve_bytes is None\n                and self.since(GDN"),
    M("pool20d-os-unchecked", "kvplan/specs/hardware.py", "if self.os is not None and self.os not in HOST_OSES:",
      "if False:"),
    # pool20e: the never-seen vLLM logs are planned with every setting their deployment had (batch limits, GPU preset)
    M("pool20e-unseen-batched-tokens-dropped", "benchmarks/pool_fidelity.py",
      'max_num_batched_tokens=entry.get("max_num_batched_tokens"),', "max_num_batched_tokens=None,"),
    M("pool20e-unseen-presets-dir-dropped", "benchmarks/pool_fidelity.py",
      'prompt=1000, decode=1000, presets_dir=data / "presets")\n\n\ndef predict',
      'prompt=1000, decode=1000)\n\n\ndef predict'),
    # tpot20b: the issue-828 sweep's release on its points (benchmarks/tpot_fidelity.py metadata, read from the branch)
    M("tpot20b-ix828-release-dropped", "benchmarks/tpot_fidelity.py",
      '"B15": "vllm v0.15.1"', '"B15": "vllm (version not stated)"'),
    M("tpot20b-ix828-never-seen-release-dropped", "benchmarks/tpot_fidelity.py",
      'engine="vllm v0.15.1 (Marlin MoE)"', 'engine="vllm (Marlin MoE)"'),
    # --- pd21v: attention DP as one forward for every rank; prompts sharing a pass; other passes lengthen a step
    M("pd21v-sharing-no-exp-term", COSTS,
      "        return float(min(r, max(1.0, x + math.exp(-x))))", "        return float(min(r, max(1.0, x)))"),
    M("pd21v-sharing-no-cap", COSTS,
      "        return float(min(r, max(1.0, x + math.exp(-x))))", "        return float(max(1.0, x + math.exp(-x)))"),
    M("pd21v-other-passes-stall", COSTS,
      "            return own + (self.lockstep_ranks / n - 1) * max(own - self._least_step, 0.0)",
      "            return self.lockstep_ranks / n * own"),
    M("pd21v-shared-pass-experts-alone", COSTS,
      "            ep = (self.scenario.parallelism.ep or self.scenario.parallelism.tp) / n",
      "            ep = (self.scenario.parallelism.ep or self.scenario.parallelism.tp) / 1"),
    M("pd21v-mixed-shared-no-experts", COSTS,
      "        shared = (self.pass_ranks - 1) * self._routed_per_token * (tokens - batch)",
      "        shared = 0.0 * self._routed_per_token * (tokens - batch)"),
    M("pd21v-mixed-every-rank-a-pass", COSTS,
      "        return mixed + (self.lockstep_ranks / self.pass_ranks - 1) * (mixed - alone), alone",
      "        return mixed + (self.lockstep_ranks - 1) * (mixed - alone), alone"),
    M("pd21v-credit-least-step", COSTS,
      "            credit = float(self.steady_tpot(prompt_tokens, decode_tokens, min(b, cap)))",
      "            credit = None"),
    M("pd21v-credit-batch-one", COSTS,
      "                b = min(cap, max(1.0, rate_per_rank * decode_tokens",
      "                b = min(cap, max(1.0, 0.0 * decode_tokens"),
    M("pd21v-sim-first-token-every-rank", "kvplan/calc/simulate.py",
      "    r.lockstep = sm.lockstep_ranks / sm.pass_ranks", "    r.lockstep = sm.lockstep_ranks"),
    M("pd21v-sim-rate-counts-n", "kvplan/calc/simulate.py",
      "        return (len(a) - 1) / span if span > 0 else 0.0", "        return len(a) / span if span > 0 else 0.0"),
    M("pd21v-sim-no-sharing", "kvplan/calc/simulate.py",
      "    if sm.lockstep_ranks > 1:      # attention DP", "    if False:      # attention DP"),
    M("pd21v-closed-form-rate-zero", PD,
      "        rate = float(self.decode_only(p, d).requests_per_second) if self.step.lockstep_ranks > 1 else 0.0",
      "        rate = 0.0"),
    M("pd21v-note-always", PD,
      "    if lock <= own * 1.5:", "    if False:"),
    # relspeed20: the engines' decode-kernel paths (vLLM's ROCm Triton MLA path)
    M("relspeed20-triton-us-zero", VLLM, "ROCM_TRITON_MLA_US = 448.0", "ROCM_TRITON_MLA_US = 0.0"),
    M("relspeed20-triton-gpus-hopper", VLLM, 'ROCM_TRITON_GPUS = ("mi300x", "mi325x")',
      'ROCM_TRITON_GPUS = ("mi300x", "mi325x", "h200")'),
    M("relspeed20-triton-mi325x-dropped", VLLM, 'ROCM_TRITON_GPUS = ("mi300x", "mi325x")',
      'ROCM_TRITON_GPUS = ("mi300x",)'),
    M("relspeed20-triton-any-model", VLLM,
      "        if MLA not in kinds or sparse_attention(kinds):\n            return None\n"
      "        return ROCM_TRITON_MLA_US",
      "        if sparse_attention(kinds):\n            return None\n"
      "        return ROCM_TRITON_MLA_US"),
    M("relspeed20-rule-ignores-given", COSTS,
      'if rule is not None and why is not None and why.formula.startswith("default:")',
      "if rule is not None and why is not None"),
    M("relspeed20-rule-replaces-overhead", COSTS, "Number(base_value + per_layer, derived(",
      "Number(per_layer, derived("),
    M("relspeed20-rule-per-layer-not-mla", COSTS, "per_layer = term.number() * mla / layers",
      "per_layer = term.number() * mla / (2 * layers)"),
    M("relspeed20-sglang-gets-rule", BASE,
      "        rule for this engine, release, GPU and model.\"\"\"\n        return None",
      "        rule for this engine, release, GPU and model.\"\"\"\n"
      "        return (448.0, 'x') if 'mi3' in str(scenario.hardware.id) else None"),
    # --- audit20: a calibration's memory reserve is tied to the release whose budget it was fitted in
    M("audit20-save-drops-release", "kvplan/options/calibrate.py",
      '"engine": adapter.id + release,', '"engine": adapter.id,'),
    M("audit20-release-check-skipped", "kvplan/options/scenarios.py",
      "        check_release(cal, s.engine_adapter.version, reserve_applied)", "        pass"),
    M("audit20-release-check-ignores-given-reserve", "kvplan/options/scenarios.py",
      'reserve_applied = cal.runtime_reserve_bytes is not None and typed.get("runtime_reserve_bytes") is None',
      "reserve_applied = cal.runtime_reserve_bytes is not None"),
    M("audit20-release-check-on-step-only-files", "kvplan/inputs/calibration_file.py",
      "    if not reserve_applied or fitted is None", "    if fitted is None"),
    M("audit20-release-compare-minor-only", "kvplan/inputs/calibration_file.py",
      "tuple(version) == fitted:", "tuple(version)[:1] == fitted[:1]:"),
    M("audit20-malformed-pin-accepted", "kvplan/inputs/calibration_file.py",
      '    if "==" in engine and pinned_release(engine) is None:', "    if False:"),
    M("audit20-headline-default-request", "kvplan/present/calibrate.py",
      'lengths = "each run\'s own request lengths" if plan.loads else "no benchmark run"', "lengths = None"),
    M("audit20-reserve-source-not-set", "kvplan/inputs/calibration_file.py",
      '        out["runtime_reserve_source"] = (', "        _ = ("),
    M("audit20-given-reserve-always-flag", "kvplan/engines/base.py",
      "    if source is None:\n        return Bytes(value, given(\"--runtime-reserve\"))",
      "    if True:\n        return Bytes(value, given(\"--runtime-reserve\"))"),
    M("audit20-sglang-reserve-flag-only", "kvplan/engines/sglang.py",
      "            return given_reserve(scenario)", "            return Bytes(scenario.runtime_reserve_bytes, "
      "given(\"--runtime-reserve\"))"),
    # --- speed19v: one event loop for the engines' schedulers (simulate._EventLoop.run_fast); vLLM V1's newest
    # victim written out (V1Scheduler.preempt), the step's no-chunk checks inline and its head reused by _admit ---
    M("speed19v-loop-v1-steps-not-asked", "kvplan/calc/simulate.py",
      "            if steps_itself:\n                if step(r):",
      "            if steps_itself:\n                if False:"),
    M("speed19v-loop-v1-batch-waits-after-preemption", "kvplan/calc/simulate.py",
      "                if not (steps_itself and running):\n                    continue",
      "                if True:\n                    continue"),
    M("speed19v-preempt-victim-to-the-back", V1S, "waiting.appendleft(i)              # to the waiting queue's front",
      "waiting.append(i)                  # to the waiting queue's front"),
    M("speed19v-preempt-phase-kept", V1S, "            phase[(-v - shift) % block] -= 1\n",
      "            phase[(-v - shift) % block] -= 0\n"),
    M("speed19v-preempt-no-reuse", V1S, "seg[i] = (r.freed, n, cache // block - hb)", "pass"),
    M("speed19v-preempt-fronted-reuse-all", V1S, "seg[i] = (start, full, cache // block - hb)",
      "seg[i] = (start, n, cache // block - hb)"),
    M("speed19v-preempt-labels-ignore-the-front", V1S, "                start = r.freed - self.fronted\n",
      "                start = r.freed\n"),
    M("speed19v-preempt-no-redo", V1S, "redo[i] = cache if cache > done else done", "redo[i] = done"),
    # (killed by test_sim_reference.py::test_vllm_v1_one_block_victims_at_a_block_boundary; it had survived the others:
    # not counting a victim's own next-step block off the shortfall pops one victim more only when the free blocks
    # after the pops fall within the victims' crossings of the shortfall, which a victim's many blocks outrun in every
    # run of those tests; a case with one-block victims at a block boundary would kill it)
    M("speed19v-preempt-victims-step-blocks-kept", V1S, "need -= btl[cache + 1] - n", "need -= btl[cache] - n"),
    M("speed19v-preempt-victim-tokens-one-more", V1S, "g[i] = cache + 1 - Pl[i]", "g[i] = cache + 2 - Pl[i]"),
    M("speed19v-step-head-room-without-decodes", V1S,
      "first = self._head(r, self.budget - b, free - need1, need1)",
      "first = self._head(r, self.budget - b, free, need1)"),
    M("speed19v-step-head-checked-past-the-batch", V1S,
      "            if b >= self.max_seqs or b >= self.budget:\n                return False\n            # the head",
      "            if b > self.max_seqs or b >= self.budget:\n                return False\n            # the head"),
    # --- speed19w: run_book's and run_fast's run in one closure (simulate._EventLoop.runner: the speed19s/sglspeed
    # mutants above on the run now hit both loops); a whole-input head that does not fit turned away before its hit;
    # prefill_attention's per-kind terms read once (StepModel._attention_terms) ---
    M("speed19w-head-full-isl-exact-fit-refused", V1S, "            if r.btl[r.Pl[i] + r.g[i]] > room:\n",
      "            if r.btl[r.Pl[i] + r.g[i]] >= room:\n"),
    M("speed19w-head-full-isl-one-token-more", V1S, "            if r.btl[r.Pl[i] + r.g[i]] > room:\n",
      "            if r.btl[r.Pl[i] + r.g[i] + 1] > room:\n"),
    M("speed19w-attention-terms-mla-unscaled", COSTS,
      "                          scale if isinstance(kind, MLA) else 1))", "                          1))"),
    M("speed19w-attention-terms-state-dropped", COSTS,
      "total += count * (per_pair * pairs + per_token * (end - start)) * scale",
      "total += count * (per_pair * pairs) * scale"),
    M("speed19w-attention-terms-cap-ignored", COSTS,
      "            if kind.attended_keys_cap() is not None or not (", "            if not ("),
    M("speed19w-attention-terms-pairs-from-zero", COSTS,
      "pairs, total = end * end / 2 - start * start / 2, 0.0", "pairs, total = end * end / 2, 0.0"),
    # --- debt19: V1Scheduler's one _seat for the three admission loops; _head with _peek folded in (may_admit_soon
    # asks _head); _advance returns at once when nothing was allocated since; _hit's cap without min() ---
    M("debt19-seat-fresh-not-noted", V1S,
      "            if self.off is not None:\n                self.fresh.append(i)\n", "            pass\n"),
    M("debt19-load-blocks-not-taken", V1S, "self._seat(r, i, hit, ext, None)", "self._seat(r, i, hit, 0, None)"),
    M("debt19-advance-skips-one-block", V1S, "        if not k:                             # nothing allocated",
      "        if k < 2:                             # nothing allocated"),
    # (no mutant on may_admit_soon's room free - pops, now asked of _head: dropping the pops survived
    # test_simulate_vllm and test_sim_vllm_offload, for the reason given at vllm-v1-head-needs-a-spare-block above)
    M("debt19-hit-not-capped", V1S, "return (hit if hit < cap else cap) * block", "return hit * block"),
    # --- adv21: vLLM V0 swaps to its --swap-space; plans priced as launched; pd's goodput rate judged for overload
    M("adv21-v0-has-no-swap-space", "kvplan/engines/vllm.py",
      "return None if self.since(V1_SINCE) else V0_SWAP_SOURCE", "return None"),
    M("adv21-v0-swap-flags-dropped", "kvplan/engines/vllm.py",
      'if plan.preemption_mode == "swap" and not self.since(V1_SINCE):', "if False:"),
    M("adv21-v0-prefix-flag-dropped", "kvplan/engines/vllm.py",
      '        if self.since(V1_SINCE):\n            notes.append("prefix caching is on',
      '        if True:\n            notes.append("prefix caching is on'),
    M("adv21-recommend-swaps-only-with-offload", "kvplan/calc/recommend.py",
      "swaps = offload or (swap_space is not None and room)", "swaps = offload"),
    M("adv21-recommend-not-launched", "kvplan/calc/recommend.py",
      "return s if s.max_model_len is not None else s.with_(max_model_len=s.context_tokens)", "return s"),
    M("adv21-search-not-launched", "kvplan/calc/sizing.py", "    base = launched(base)", "    base = base"),
    M("adv21-rate-overload-blind", "kvplan/calc/simulate.py",
      ' "waiting_at_last_arrival": waiting_at_last_arrival(run),', ""),
    # --- vllmoff19: vLLM's native CPU offloading connector (kvplan.engines.vllm_scheduler.CpuPool)
    M("vllmoff19-store-no-touch", "kvplan/engines/vllm_scheduler.py",
      "        self.groups.move_to_end(i)\n        self.used += n\n", "        self.used += n\n"),
    M("vllmoff19-lookup-no-touch", "kvplan/engines/vllm_scheduler.py",
      "        self.groups.move_to_end(i)\n        full = tokens // block\n", "        full = tokens // block\n"),
    M("vllmoff19-lookup-past-holes", "kvplan/engines/vllm_scheduler.py",
      "ready[k + n] == hit_blocks + n and", "ready[k + n] >= hit_blocks + n and"),
    M("vllmoff19-victim-stores-never-ready", "kvplan/engines/vllm_scheduler.py",
      "            off.ready(i)\n            off.flush_at = max(", "            off.flush_at = max("),
    M("vllmoff19-running-stores-evictable", "kvplan/engines/vllm_scheduler.py",
      "        g[1].extend(new)", "        g[0].extend(new)"),
    M("vllmoff19-no-flush-stall", "kvplan/engines/vllm_scheduler.py",
      "if off is not None and off.flush_at > r.now:", "if off is not None and off.flush_at > r.now + 1e9:"),
    M("vllmoff19-load-takes-no-time", "kvplan/engines/vllm_scheduler.py",
      "        self.in_free = max(now, self.in_free) + t\n", "        self.in_free = max(now, self.in_free)\n"),
    M("vllmoff19-loaded-tokens-recomputed", "kvplan/engines/vllm_scheduler.py",
      "after = hit + ext - (hit + ext == tokens)", "after = hit"),
    M("vllmoff19-cpu-pool-per-rank", "kvplan/engines/vllm_scheduler.py",
      "self.offload_bytes // (block_bytes * world) - self.hb", "self.offload_bytes // block_bytes - self.hb"),
    M("vllmoff19-load-admits-on-first-chunk", "kvplan/engines/vllm_scheduler.py",
      "if (btl[tokens] if self.full_isl else btl[hit + ext]) > r.free:", "if btl[hit + ext] > r.free:"),
    M("vllmoff19-store-one-token-ahead", "kvplan/engines/vllm_scheduler.py",
      "full = (xo_l[i] + steps - 1) // block", "full = (xo_l[i] + steps) // block"),
    M("vllmoff19-landed-load-seen-late", "kvplan/engines/vllm_scheduler.py",
      "            if lands > seen:\n                k += 1",
      "            if lands > seen + 0.5:\n                k += 1"),
    # xnode20: a decode step's TP all-reduce over a TP group spanning nodes runs on NCCL (test_decode_cross_node.py)
    M("xnode20-decode-cross-node-custom-all-reduce", COSTS,
      "            if cross is not None:\n                # the decode",
      "            if False:\n                # the decode"),
    M("xnode20-decode-cross-node-one-call", COSTS, "comm_layer = (2 * CROSS_NODE_DECODE_ALLREDUCE_US * 1e-6,",
      "comm_layer = (CROSS_NODE_DECODE_ALLREDUCE_US * 1e-6,"),
    M("xnode20-decode-cross-node-latency", COSTS, "CROSS_NODE_DECODE_ALLREDUCE_US = 139.0",
      "CROSS_NODE_DECODE_ALLREDUCE_US = 26.0"),
    M("xnode20-decode-cross-node-nvlink-rate", COSTS, "ring_bytes / cross)\n",
      "ring_bytes / (link * f.value('link')))\n"),
    # user29: a reasoning-workload user's pass (tests/test_user_pass.py)
    M("user29-trace-requests-off", "kvplan/options/simulate.py",
      "if tr is not None and n_given is not None and n_given > len(tr.prompts):",
      "if tr is not None and n_given is not None and n_given > len(tr.prompts) * 100:"),
    M("user29-trace-requests-at-rows", "kvplan/options/simulate.py",
      "if tr is not None and n_given is not None and n_given > len(tr.prompts):",
      "if tr is not None and n_given is not None and n_given >= len(tr.prompts):"),
    M("user29-trace-int-digits", WL, 'if len(text.lstrip("+-").lstrip("0")) > 9:',
      'if len(text.lstrip("+-").lstrip("0")) > 9999:'),
    M("user29-trace-int-sign", WL, 'if not re.fullmatch(r"[+-]?[0-9]+", text):',
      'if not re.fullmatch(r"[0-9]+", text):'),
    M("user29-plan-deployment-key-top", PLAN, "        if key in DEPLOYMENT_KEYS:   # e.g. calibration",
      "        if False:   # e.g. calibration"),
    M("user29-log-model-contradiction", LOG,
      "        if match is not None and str(args[\"model\"]).strip().casefold() in named",
      "        if False and str(args[\"model\"]).strip().casefold() in named"),
    M("user29-log-model-same-preset", LOG,
      "                match.casefold() != str(args[\"model\"]).strip().casefold()):", "                True):"),
    M("user29-bench-model-off", "kvplan/options/calibrate.py", "    if len(models) == 1:\n        _check_model(",
      "    if len(models) == -1:\n        _check_model("),
    M("user29-bench-model-same", "kvplan/options/calibrate.py",
      "if match is None or match.casefold() == planned.casefold() or",
      "if match is None or"),
    M("user29-weights-floor-off", SCEN, "            if self.weights_bytes < least:",
      "            if self.weights_bytes < least / 1e6:"),
    M("user29-weights-floor-8bit", SCEN, "            least_per = min(WEIGHT_BYTES_PER_PARAM.values())",
      "            least_per = 1.0"),
    M("user29-near-miss-stems-off", "kvplan/inputs/presets.py",
      "    close = list(dict.fromkeys(stems + difflib", "    close = list(dict.fromkeys(difflib"),
    M("user29-dram-unused-off", "kvplan/options/simulate.py",
      "    if dram is not None and compare is None and offload_threshold is None and not hicache and (",
      "    if False and ("),
    M("user29-dram-unused-swap-too", "kvplan/options/simulate.py",
      "            policy.strip().lower() == \"recompute\"):", "            True):"),
    M("user29-pd-colocated-rate-label", "kvplan/present/pd.py",
      '(f"TPOT at the goodput rate, p{tq} (simulated)", plan.tpot_colocated_at)',
      '(f"TPOT with prefills, p{tq} (simulated)", plan.tpot_colocated_at)'),
    M("user29-near-miss-stem-order", "kvplan/inputs/presets.py", "key=lambda k: (-ratio[k], k))",
      "key=lambda k: (ratio[k], k))"),
    # prefill20e: the per-GPU prefill_mfu fit of benchmarks/prefill_fidelity.py and compare-preemption's default MFU
    M("prefill20e-fit-reads-held-out", "benchmarks/prefill_fidelity.py",
      'if p.split != "fit" or implied_utilisation(p) > 1:', "if implied_utilisation(p) > 1:"),
    M("prefill20e-fit-keeps-impossible", "benchmarks/prefill_fidelity.py",
      'if p.split != "fit" or implied_utilisation(p) > 1:', 'if p.split != "fit":'),
    M("prefill20e-ratio-no-rest", "benchmarks/prefill_fidelity.py",
      "return (seconds(p, p.measured) - rest) / compute", "return seconds(p, p.measured) / compute"),
    M("prefill20e-preempt-generic-default", "kvplan/calc/preemption.py",
      "factors = costs.step_factors(hw, prefill_mfu=st.mfu)",
      "factors = costs.step_factors(hw, prefill_mfu=st.mfu or costs.DEFAULT_MFU)"),
    M("prefill20e-preempt-given-as-default", "kvplan/calc/preemption.py",
      'mfu_v = cast(Number, factors.prefill_mfu) if st.mfu is None else Number(st.mfu, given("--mfu"))',
      "mfu_v = cast(Number, factors.prefill_mfu)"),
    # h200pf20: benchmarks/prefill_fidelity.py's pass of several prompts (P16) and its inexpressible points (P18, P21)
    M("h200pf20-pass-one-prompt", "benchmarks/prefill_fidelity.py",
      "seconds = step.prefill_seconds(p.prompt, 0, None, spread, prompts=p.prompts)",
      "seconds = step.prefill_seconds(p.prompt * p.prompts, 0, None, spread)"),
    M("h200pf20-pass-seconds-one-prompt", "benchmarks/prefill_fidelity.py",
      'return figure / 1e3 if p.kind == "ttft" else p.prompt * p.prompts / (figure * p.parallel["tp"])',
      'return figure / 1e3 if p.kind == "ttft" else p.prompt / (figure * p.parallel["tp"])'),
    M("h200pf20-inexpressible-kept", "benchmarks/prefill_fidelity.py",
      "return [p for p in (points or load_points()) if expressible(p)]", "return list(points or load_points())"),
    # fix20: release spans (tests/test_engine_releases.py); SGLang /metrics scheduler copies, a defaulted GPU, the
    # /metrics TTFT's frontend latency (tests/test_calibrate_command.py)
    M("fix20-vllm-no-v0.17-span", VLLM, "(0, 15, 0), (0, 17, 0), (0, 18, 0)", "(0, 15, 0), (0, 18, 0)"),
    M("fix20-vllm-no-v0.8-span", VLLM, "(OLDEST, (0, 8, 0), (0, 9, 0)", "(OLDEST, (0, 9, 0)"),
    M("fix20-sglang-no-v0.5.22-span", SGL, "(0, 5, 20), (0, 5, 22), (0, 5, 23)", "(0, 5, 20), (0, 5, 23)"),
    M("fix20-scrape-tp-copies-summed", "kvplan/inputs/prometheus.py",
      '("tp_rank", "pp_rank", "moe_ep_rank")', '("pp_rank", "moe_ep_rank")'),
    M("fix20-scrape-pp-copies-summed", "kvplan/inputs/prometheus.py",
      '("tp_rank", "pp_rank", "moe_ep_rank")', '("tp_rank", "moe_ep_rank")'),
    M("fix20-scrape-dp-groups-collapsed", "kvplan/inputs/prometheus.py", "if k not in SCHEDULER_RANK_LABELS)",
      'if k not in (*SCHEDULER_RANK_LABELS, "dp_rank"))'),
    M("fix20-scrape-vllm-deduplicated-too", "kvplan/inputs/prometheus.py", 'if not name.startswith("sglang:"):',
      "if False:"),
    M("fix20-scrape-fraction-over-copies", "kvplan/inputs/prometheus.py",
      "value /= len(scrape.series(name))", "value /= len(scrape.samples[name])"),
    M("fix20-reserve-fitted-on-defaulted-gpu", "kvplan/options/calibrate.py",
      'if scenario_args.get("hardware") is None and any(GPU_DEFAULTED in x for x in warnings):', "if False:"),
    M("fix20-save-on-defaulted-gpu", "kvplan/options/calibrate.py", "    if p.gpu_defaulted:\n        raise",
      "    if False:\n        raise"),
    M("fix20-no-log-gpu-default-unmarked", "kvplan/options/calibrate.py",
      '        if scenario_args.get("hardware") is None:\n            gpu_defaulted',
      "        if False:\n            gpu_defaulted"),
    M("fix20-metrics-ttft-prefill-alone", CALIB, "client_ttft(st, one, chunk) if is_ttft",
      "st.prefill_seconds(p, 0, chunk) if is_ttft"),
    # --- polish: the engine's terms shown as priced (costs.EngineTerm; tpot's table, JSON, --explain) ----------------
    M("polish-engine-terms-unrecorded", COSTS, "return replace(f, **out, engine_terms=f.engine_terms + tuple(terms)) "
      "if out else f", "return replace(f, **out) if out else f"),
    M("polish-allreduce-term-a-copy", COSTS, "out[name] = term     # the factor IS the term's value",
      "out[name] = Number(term.number(), term.why)"),
    M("polish-fused-term-dropped", COSTS, "        engine_terms += (EngineTerm(",
      "        engine_terms + (EngineTerm("),
    M("polish-tpot-shows-base-factors", "kvplan/calc/tpot.py", "tuple(notes), step.factors, terms)",
      "tuple(notes), factors, terms)"),
    M("polish-frontend-term-dropped", "kvplan/calc/tpot.py", "frontend),) if fe else ())", "frontend),) if 0 else ())"),
    M("polish-engine-table-dropped", "kvplan/present/tpot.py", "    if terms:\n        tables.append(",
      "    if not terms:\n        tables.append("),
    M("polish-replaced-factor-unnamed", "kvplan/present/tpot.py",
      'f"{name} ({s.engine_adapter.id})" if name in replaced', 'f"{name}" if name in replaced'),
    # --- polish: recommend's KV dtype row: typed counts, the launch flag's clause -----------------------------------
    M("polish-dtype-counts-as-text", "kvplan/calc/recommend.py", 'note(f"{d.value} " + "{n}", n=n)',
      'f"{d.value} {n.value}"'),
    M("polish-dtype-flag-whole-reason", BASE, 'Flag("--kv-cache-dtype", kv, plan.row("kv_dtype").first)',
      'Flag("--kv-cache-dtype", kv, plan.row("kv_dtype").reason)'),
    M("polish-row-reason-left-str", "kvplan/calc/recommend.py",
      '            object.__setattr__(self, "reason", Note((self.reason,)))', "            pass"),
    # --- polish: start-up, the modules `size` and `concurrency` do not need stay unloaded -----------------------------
    M("polish-neutral-loads-vllm", NEUTRAL, "from kvplan.engines.base import Engine\n",
      "from kvplan.engines import vllm  # noqa: F401\nfrom kvplan.engines.base import Engine\n"),
    M("polish-costs-loads-calibration-reader", COSTS, "    from kvplan.specs.hardware import CALIBRATED\n",
      "    from kvplan.inputs.calibration_file import CALIBRATED\n"),
    # --- adv21g: recommend's --ttft-slo judged on the launched deployment and held by the --target search ---------
    M("adv21g-ttft-verdict-always-met", REC, "    if unloaded.number() > targets.ttft:\n", "    if False:\n"),
    M("adv21g-ttft-unloaded-without-prefill", REC, "    v = t_pf + fe.number()\n", "    v = fe.number()\n"),
    M("adv21g-search-ignores-ttft", "kvplan/calc/sizing.py", "        if alone > slo.ttft:\n", "        if False:\n"),
    M("adv21g-search-ttft-not-passed", "kvplan/calc/sizing.py", "found.append(_evaluate(s, targets, slo))",
      "found.append(_evaluate(s, targets))"),
    M("adv21g-check-pd-ignores-slo-keys", "kvplan/calc/check.py",
      'lambda: plan_pd(lazy.s, PdOptions(targets=targets)))', 'lambda: plan_pd(lazy.s))'),
    M("adv21g-sweep-brief-lower-bound-unsaid", "kvplan/present/simulate.py",
      "if capacity.value is not None and capacity.value == last.value else", "if False else"),
    M("adv21g-check-goodput-lower-bound-unsaid", "kvplan/calc/check.py",
      "top = sweep.goodput.requests_per_second.value is not None and (", "top = False and ("),
    M("adv21g-pd-differs-infinite-margin", REC, "    if math.isfinite(pd.margin.number()):\n        return note(",
      "    if True:\n        return note("),
    # pd21g: pd verdicts that hold under load (tests/test_pd_load.py, test_pd.py)
    M("pd21g-no-sustained-cap", PD, "        cap = self.sustained(p, d)[0]\n", "        cap = math.inf\n"),
    M("pd21g-sustained-without-prefill", PD, "            rate = b / (d * plain + b * t_pf)",
      "            rate = b / (d * plain)"),
    M("pd21g-sustained-at-the-slo-batch", PD, "        b = self.batch_limit(p, d)\n        if b < 1:",
      "        b = max(self.colocated(p, d)[0].batch, 1)\n        if b < 1:"),
    M("pd21g-mixed-price-never", PD,
      "if not (self.o.chunked and self.s.engine_adapter.mixes_prefill_chunks()):", "if True:"),
    M("pd21g-mixed-chunk-without-decode-tokens", PD, "        chunk = max(self.chunk - b, 1)",
      "        chunk = self.chunk"),
    M("pd21g-vllm-mixes-never", VLLM, "        return self.since(V1_SINCE)\n\n    def decode_layer_latency",
      "        return False\n\n    def decode_layer_latency"),
    M("pd21g-prefill-one-prompt-a-pass", PD, "        return max(1, min(self.chunk // max(p, 1), self.max_seqs))",
      "        return 1"),
    M("pd21g-packed-flops-once", COSTS, "            n = (end - start) * prompts", "            n = end - start"),
    M("pd21g-packed-attention-once", COSTS, "attention = self.prefill_attention(end, start) * prompts / tp",
      "attention = self.prefill_attention(end, start) / tp"),
    M("pd21g-queue-one-prompt-a-pass", PD, "        while j < n and j - i < k and arr[j] <= start:",
      "        while False:"),
    M("pd21g-queue-takes-more-than-k", PD, "        while j < n and j - i < k and arr[j] <= start:",
      "        while j < n and arr[j] <= start:"),
    M("pd21g-capacity-one-prompt-a-pass", PD, "            service = held[-1] / len(held) ",
      "            service = held[0] "),
    M("pd21g-nic-not-per-prompt", PD, "held = tuple(max(t, j * transfer) for", "held = tuple(max(t, transfer) for"),
    M("pd21g-breakeven-lowest-win", PD, "    if wins[-1]:\n        i = len(wins) - 1", "    if False:\n        i = 0"),
    M("pd21g-breakeven-no-bracket", PD, "        return order[i], order[i - 1] if i > 0 else None, priced",
      "        return order[i], None, priced"),
    M("pd21g-breakeven-lowest-win-below-a-loss", PD, "    return order[i], order[i + 1], priced",
      "    return order[wins.index(True)], None, priced"),
    # tpot20c: the tt harness's lockstep waves (tests/test_tpot_fidelity.py) and rule R3's 139 us per cross-node call
    M("tpot20c-lockstep-prefills-back", "benchmarks/tpot_fidelity.py", "    if point.lockstep:     # a wave's",
      "    if False:     # a wave's"),
    M("tpot20c-lockstep-b27-off", "benchmarks/tpot_fidelity.py", "lockstep=c > 1)", "lockstep=False)"),
    M("tpot20c-lockstep-every-b27", "benchmarks/tpot_fidelity.py", "lockstep=c > 1)", "lockstep=True)"),
    M("tpot20c-r3-nccl-tests-latency", COSTS, "CROSS_NODE_DECODE_ALLREDUCE_US = 139.0",
      "CROSS_NODE_DECODE_ALLREDUCE_US = 46.0"),
    M("tpot20c-r3-latency-off-by-ten", COSTS, "CROSS_NODE_DECODE_ALLREDUCE_US = 139.0",
      "CROSS_NODE_DECODE_ALLREDUCE_US = 129.0"),
    # tpot20e: the engine runs' step against their published median ITL (tests/test_tpot_fidelity.py)
    M("tpot20e-step-is-serving", "benchmarks/tpot_fidelity.py",
      "    return {p.id: (predict(replace(p, median_itl=True)) - engine_run_itl_ms(p.id))",
      "    return {p.id: (predict(p) - engine_run_itl_ms(p.id))"),
    M("tpot20e-itl-row-shifted", "benchmarks/tpot_fidelity.py",
      'DSTACK_MEDIAN_ITL[run_of(point_id)]["abcdef".index(point_id[-1])]',
      'DSTACK_MEDIAN_ITL[run_of(point_id)]["abcdef".index(point_id[-1]) - 1]'),
    # SGLang: --scheduler-recv-interval (polls every N iterations)
    M("fid19n-poll-no-cut", SGS, "cut, arrival, seats = min(self.cut, self.recv_cut), r.tally.arrival",
      "cut, arrival, seats = self.cut, r.tally.arrival"),
    M("fid19n-poll-not-after-prefill", SGS,
      "            if took and self.recv_interval > 1:      # the iteration after",
      "            if False:      # the iteration after"),
    M("fid19n-poll-idle-waits", SGS,
      "        if not r.running and not self.late:\n            self.recv_step, self.recv_cut",
      "        if False:\n            self.recv_step, self.recv_cut"),
    M("fid19n-poll-off-by-one", SGS, "        if k >= self.recv_interval:", "        if k > self.recv_interval:"),
    M("fid19n-poll-overlap-sees-now", SGS,
      "self.recv_cut = self.cut if self.overlap and self.cut < math.inf else r.now", "self.recv_cut = r.now"),
    M("fid19n-poll-no-one-step", SGS, "                r.preempted = True                   # not received yet",
      "                pass                   # not received yet"),
    # SGLang: a prefill round's new requests have their first tokens together (one batch, one result; sgl19, first
    # tried as 19e39e1's fid19n-pass mutants)
    M("sgl19-pass-tokens-each-own", SGS, "        for j in together[:-1]:\n            first[j] = last",
      "        for j in together[:-1]:\n            pass"),
    M("sgl19-pass-not-split-at-chunk", SGS,
      "            if ext_p > rem_chunk:                     # chunked: the pass before ends with its first chunk\n"
      "                _one_pass(r, together)", "            if False:\n                _one_pass(r, together)"),
    M("sgl19-pass-takes-one-token-requests", SGS, "                if Ll[i] > 1:", "                if Ll[i] > 0:"),
    M("sgl19-pass-kept-across-rounds", SGS, "        _one_pass(r, together)\n        return admitted",
      "        return admitted"),
    M("sgl19-pass-at-the-first-end", SGS, "        last = first[together[-1]]", "        last = first[together[0]]"),
    M("sgl19-frontend-27ms", "kvplan/engines/sglang.py", "FRONTEND_LATENCY_S = 0.018", "FRONTEND_LATENCY_S = 0.027"),
    M("fid19n-poll-any-engine", "kvplan/engines/schedulers.py",
      'if (getattr(o, "scheduler_recv_interval", None) or 1) > 1 and engine.id != "sglang":', "if False:"),
    M("fid19n-poll-unbounded", "kvplan/calc/sim/records.py",
      "not 1 <= self.scheduler_recv_interval <= 1000", "not 1 <= self.scheduler_recv_interval"),
    # aud21h: pd's first screen says why a verdict changes more than once, and a decode-dominant verdict's reasoning
    M("aud21h-flips-not-first-screen", PD, "lock_note, flips_note,\n", "lock_note,\n"),
    M("aud21h-flips-no-engine-cause", PD,
      "flips_note = _flips(rows, None if o.chunked and s.engine_adapter.mixes_prefill_chunks() else own[1])",
      "flips_note = _flips(rows, None)"),
    M("aud21h-flips-short-row", PD, "short = fit[fit.index(at[0]) - 1].prompt_tokens", "short = at[0].prompt_tokens"),
    M("aud21h-flips-packed-whole-pass", PD, 'values["packed"] = Seconds(passes[-1] / k,',
      'values["packed"] = Seconds(passes[-1],'),
    M("aud21h-dominant-any-share", PD, "if recommend or not share.number() < 1 - 1 / WIN_MARGIN:",
      "if recommend:"),
    M("aud21h-dominant-idle-role", PD, '"prefill" if cap_p > cap_d else "decode"',
      '"prefill" if cap_p < cap_d else "decode"'),
    M("aud21h-assumption-always-mixed", "kvplan/present/pd.py",
      "if o.chunked and s.engine_adapter.mixes_prefill_chunks() else", "if True else"),
    # --- rec21h: recommend's launch judged under a rate target (the SLO model's simulation) ----------------------
    M("rec21h-search-ignores-load", SIZING, "        if not load.verdict.meets:\n", "        if False:\n"),
    M("rec21h-search-load-at-half-rate", SIZING, "load = simulated_load(s, rate_t.bound, slo, sb.batch,",
      "load = simulated_load(s, rate_t.bound / 2, slo, sb.batch,"),
    M("rec21h-load-not-the-launched-batch", REC, "load = simulated_load(s, rate_t.bound, slo, batch,",
      "load = simulated_load(s, rate_t.bound, slo, cap,"),
    M("rec21h-ttft-alone-under-load", REC,
      "    if load is not None:\n        got = load.figures[f\"ttft_seconds_p{q}\"]",
      "    if False:\n        got = load.figures[f\"ttft_seconds_p{q}\"]"),
    M("rec21h-rate-verdict-ignores-load", REC, "                met = met and load.verdict.meets\n",
      "                met = met\n"),
    M("rec21h-tpot-verdict-ignores-load", REC,
      "                met = met and got.value is not None and got.value <= t.bound\n", "                met = met\n"),
    M("rec21h-load-ignores-overload", "kvplan/calc/simulate.py", "point, sweep_verdict(point, targets, None))",
      'point, sweep_verdict({k: v for k, v in point.items() if k != "waiting_at_last_arrival"}, targets, None))'),
    M("rec21h-load-requests-no-floor", "kvplan/calc/simulate.py",
      "return min(max(4 * max_batch * replicas, LOAD_REQUESTS[0]), LOAD_REQUESTS[1])",
      "return min(4 * max_batch * replicas, LOAD_REQUESTS[1])"),
    M("rec21h-rate-one-replica", REC, "    v = replicas * one.number()\n", "    v = one.number()\n"),
    M("rec21h-steady-batch-d-not-d-minus-1", "kvplan/calc/slo.py", "    time = ttft + (output_tokens - 1) * tpot",
      "    time = ttft + output_tokens * tpot"),
    M("rec21h-alone-basis-unsaid", "kvplan/present/recommend.py",
      '"basis": LOAD_BASIS if ld is not None else ALONE_BASIS}', '"basis": LOAD_BASIS}'),
)


IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", "*.egg-info",
                                ".venv", "venv", "build", "dist", "*.pyc")


PACKAGE = "kvplan"


def locate(root: Path, m: Mutant) -> tuple[str, tuple[str, str, str] | None]:
    """('ok', (file, original, replacement)) for the edit to apply, or ('stale' | 'ambiguous', None)."""
    ambiguous = False
    sources = sorted(p for p in (root / PACKAGE).rglob("*.py") if "__pycache__" not in p.parts)
    for hint, original, replacement in m.edits:
        hinted = root / hint
        if hinted.is_file():
            count = hinted.read_text(encoding="utf-8").count(original)
            if count == 1:
                return "ok", (hint, original, replacement)
            ambiguous |= count > 1
        found = [p for p in sources if p != hinted for _ in range(p.read_text(encoding="utf-8").count(original))]
        if len(found) == 1:
            return "ok", (found[0].relative_to(root).as_posix(), original, replacement)
        ambiguous |= len(found) > 1
    return ("ambiguous" if ambiguous else "stale"), None


def make_copy(dest: Path, rev: str | None, worktree_tests: bool = False) -> None:
    if rev is None:
        shutil.copytree(ROOT, dest, ignore=IGNORE, symlinks=True)
        return
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], capture_output=True,
                             check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    for test in sorted((ROOT / "tests").rglob("*")):   # test files REV does not have yet (new, uncommitted)
        rel = test.relative_to(ROOT)
        if test.is_file() and "__pycache__" not in rel.parts and (worktree_tests or not (dest / rel).exists()):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(test, dest / rel)


def run_pytest(copy: Path, timeout: float, pytest_args: list[str]) -> tuple[str, float, str]:
    env = dict(os.environ)
    env.pop("KVPLAN_TEST_INSTALLED", None)   # test the copy, never an installed wheel
    env["PYTHONPATH"] = str(copy) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *pytest_args]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, ""
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    failed = [ln for ln in lines if ln.startswith(("FAILED ", "ERROR "))]
    tail = (failed or lines or [""])[0 if failed else -1]
    return ("passed" if proc.returncode == 0 else "failed"), time.monotonic() - start, tail[:140]


def probe(mutants: list[Mutant], jobs: int, timeout: float, pytest_args: list[str],
          rev: str | None, worktree_tests: bool = False) -> tuple[list[tuple[Mutant, str, str, str]], bool]:
    """(mutant, status, file mutated, detail) per mutant, and whether the unmutated suite passed."""
    results: dict[str, tuple[str, str, str]] = {}
    runnable: list[tuple[Mutant, tuple[str, str, str]]] = []
    with tempfile.TemporaryDirectory(prefix="kvplan-mutants-") as tmp:
        copies = []
        for i in range(max(1, min(jobs, len(mutants) or 1))):
            dest = Path(tmp) / f"copy{i}"
            make_copy(dest, rev, worktree_tests)
            copies.append(dest)
        for m in mutants:   # snippets are looked up in the copy: what is tested is what is mutated
            status, edit = locate(copies[0], m)
            if edit is not None:
                runnable.append((m, edit))
            else:
                results[m.name] = (status, m.edits[0][0], "")
        verdict, seconds, tail = run_pytest(copies[0], timeout, pytest_args)
        baseline_ok = verdict == "passed"
        print(f"baseline (no mutation): {verdict} in {seconds:.1f} s  {tail}")
        if not baseline_ok:
            print("the unmutated suite does not pass, so every mutant would look killed; fix the suite first")
            return [(m, *results.get(m.name, ("not run", m.edits[0][0], ""))) for m in mutants], False

        work: queue.Queue[tuple[Mutant, tuple[str, str, str]]] = queue.Queue()
        for item in runnable:
            work.put(item)
        lock = threading.Lock()

        def worker(copy: Path) -> None:
            while True:
                try:
                    m, (path, original, replacement) = work.get_nowait()
                except queue.Empty:
                    return
                target = copy / path
                original_text = target.read_text(encoding="utf-8")
                target.write_text(original_text.replace(original, replacement, 1), encoding="utf-8")
                try:
                    verdict, seconds, tail = run_pytest(copy, timeout, pytest_args)
                finally:
                    target.write_text(original_text, encoding="utf-8")
                status = "survived" if verdict == "passed" else "killed"
                detail = f"{seconds:.1f} s" + (f", {verdict}: {tail}" if verdict != "passed" else "")
                with lock:
                    results[m.name] = (status, path, detail)
                    print(f"  {status:9} {m.name}  ({detail})", flush=True)

        threads = [threading.Thread(target=worker, args=(c,)) for c in copies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return [(m, *results[m.name]) for m in mutants], True


def list_mutants(mutants: list[Mutant], rev: str | None, worktree_tests: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="kvplan-mutants-") as tmp:
        root = ROOT
        if rev is not None:
            root = Path(tmp) / "copy"
            make_copy(root, rev, worktree_tests)
        for m in mutants:
            status, edit = locate(root, m)
            print(f"{status:9} {m.name:34} {edit[0] if edit else m.edits[0][0]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 if a mutant survives or the baseline fails")
    parser.add_argument("-k", dest="select", action="append", default=[],
                        help="run only mutants whose name contains this (repeatable)")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="mutants run in parallel (one copy each)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per pytest run; a timeout kills")
    parser.add_argument("--rev", help="mutate this commit (plus test files it does not have yet)")
    parser.add_argument("--worktree-tests", action="store_true",
                        help="with --rev: every test file of the working tree's tests/, edited ones too")
    parser.add_argument("--list", action="store_true", help="list the mutants and whether their snippets are found")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments after --, e.g. -- tests/test_size.py")
    args = parser.parse_args(argv)

    names = [m.name for m in MUTANTS]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        print(f"duplicate mutant names: {', '.join(duplicates)}")
        return 1 if args.strict else 0
    mutants = [m for m in MUTANTS if not args.select or any(s in m.name for s in args.select)]
    if args.list:
        list_mutants(mutants, args.rev, args.worktree_tests)
        return 0

    where = (f"{ROOT} at {args.rev} (plus " + ("the working tree's tests" if args.worktree_tests else "new test files")
             + ")") if args.rev else str(ROOT)
    print(f"{len(mutants)} mutant(s) of {where}, pytest run in a temporary copy")
    rows, baseline_ok = probe(mutants, args.jobs, args.timeout, args.pytest_args, args.rev, args.worktree_tests)
    counts: dict[str, int] = {}
    print()
    for m, status, path, _detail in rows:
        counts[status] = counts.get(status, 0) + 1
        print(f"{status:9} {m.name:34} {path}")
    total = ", ".join(f"{counts[s]} {s}" for s in ("killed", "survived", "stale", "ambiguous", "not run")
                      if s in counts)
    print(f"\ntotal: {len(rows)} mutants: {total}")
    failed = not baseline_ok or counts.get("survived", 0) > 0
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
