"""kvplan simulate against published real serving runs (tests/data/serving_runs.toml, tools/fidelity_report.py).

Issue 19's target, on real serving runs published with their settings (chat and reasoning loads, several models
and rates): TPOT p50 and E2E within 7% median error, TTFT within 20%, and no false overload. The runs' sources
publish means, not p50s, so the harness compares kvplan's mean with the measured mean.

This file checks that every run carries its source, settings and figures, that the harness builds the runs' arrivals
as the data says, that it reports a run kvplan refuses instead of hiding it, and, on a fast subset of held-out runs
(< 20 s), asserts the errors measured NOW as a regression ceiling: they may only fall. The target is not met
today (docs/simulate-fidelity.md has the table: held-out median |error| TPOT 7.6%, TTFT 24.2%, E2E 7.9%, no false
overload in 22 runs; never seen, 17 runs: 17.2%, 26.5%, 18.6%, one false overload
(an L40S run whose simulated step is 29% slow, called by the service witness) (34.9% TTFT before vLLM's async
scheduling was modelled); 31.1%, 59.7%, 31.0% and 2 before the A100 preset's fix; never seen 2, 8 runs: 4.6%,
13.0%, 6.2%, none false, none missed; never seen 3, 53 DeepSeek-R1 runs in closed loops from InferenceX and dstack:
32.4%, 78.7%, 39.8%, none false, none missed); the ceilings are tightened as the errors fall.
The whole set runs in the tool (``python tools/fidelity_report.py``, under a minute), or here with
``KVPLAN_FIDELITY_ALL=1``.
"""

from __future__ import annotations

import copy
import os
import statistics
from pathlib import Path

import pytest
from conftest import load_source

DATA = Path(__file__).parent / "data" / "serving_runs.toml"
TOOL = Path(__file__).resolve().parent.parent / "tools" / "fidelity_report.py"

# held-out runs simulated here (about 1.5 s of CPU): on vLLM a dense TP2 chat stage, a reasoning run, a 70B TP4
# chat stage at its higher rate, and Mixtral-8x7B (MoE) at a rate it keeps up with and at one where kvplan says
# overload; on SGLang the 70B TP4 on H200 at 2 requests/s
SUBSET = ("65-01-ai-yi-34b-tp2-general-lite-2-1/stage0", "66-qwen2-5-7b-instruct-tp1-reasoning-lite-1-1/stage0",
          "60-llama-3-1-70b-tp4-general-lite-4-1/stage1", "11-mixtral-8x7b-tp2-roleplay",
          "9-mixtral-8x7b-tp2-general", "datacrunch-h200-llama-3.3-70b-tp4-sglang-random-1024/rate2")
# the subset's median |error| measured with vLLM V1's scheduler (kvplan.engines.vllm_scheduler: prefill chunks mixed
# into the decode steps, never priced below the decode step alone) for the vLLM runs and SGLang's for the SGLang run,
# with the H100's prefill_mfu 0.65 and each engine's frontend latency (vLLM 19 ms, SGLang 42 ms, 27 ms from sglov19;
# all fitted on the 'fit' runs only), the BLIS runs' TPOT taken as (e2e - ttft) / (output_tokens - 1) (tpot_from =
# "e2e": the source's itl divides by the client's count of output tokens): TPOT 6.6%, TTFT 29.5%, E2E 8.5%; no false
# overload (before the TPOT definition and the step floor: 8.3%, 29.5%, 8.9%). Two of its six runs are Mixtral, whose
# measured TTFT is 4-10x kvplan's (docs/simulate-fidelity.md), so its TTFT median sits on those. Rounded up: a
# regression ceiling, not the target
# With vLLM's decode all-reduce from its own in-graph kernel benchmark (engines/vllm.py DECODE_ALLREDUCE, fid19s):
# 6.4%, 29.2%, 9.3%
# With vLLM's async scheduling (async19: kvplan.engines.vllm_scheduler, on by default in v0.15.1) and the frontend
# latency refitted on the fit runs under it (19 -> 1 ms): 6.4%, 8.0%, 9.3% (async scheduling with the 19 ms still:
# TTFT 23.7% on this subset)
# Then (prefill20c) each prefill chunk's TP all-reduces priced outside prefill_mfu and prefill_mfu re-fitted
# compute-only on the fit runs (0.65 -> 0.70): TTFT 11.2% on this subset, a ceiling that ROSE (from 8.5%) with a
# structural change: the TP2 / TP4 runs' chunks now carry their all-reduces
# Then (sglov19, merged after prefill20c) SGLang's overlap scheduler and its frontend latency refitted (42 -> 27 ms):
# the subset's SGLang 70B rate-2 run's TTFT error 15.1% -> 16.2% (its rate-8 one 30.2% -> 9.0%), the vLLM runs
# unchanged: TTFT 11.7% on this subset, the ceiling rose from 11.5%
# Then (sgl19) a prefill round's first tokens together and SGLang's frontend latency refitted (27 -> 18 ms): the
# rate-2 run's TTFT error +16.2% -> +6.0%
SUBSET_CEILING = {"tpot": 0.07, "ttft": 0.12, "e2e": 0.095}
SUBSET_FALSE_OVERLOADS = 0
# the whole held-out set, measured likewise (tools/fidelity_report.py): 9.0%, 27.5%, 9.5%; no false overload (before
# the TPOT definition and the step floor: 11.7%, 27.5%, 9.5%; V1's scheduler at prefill_mfu 0.45 and no frontend
# latency: 17.7%, 31.4%, 21.7%; the rule book before: 11.4%, 38.6%, 36.9%, 4 false overloads)
# With vLLM's own decode all-reduce (fid19s): 7.4%, 28.3%, 9.0%
# With async scheduling and the frontend refitted (async19): 7.4%, 23.8%, 8.8% (async with the 19 ms: 7.4%, 41.5%,
# 9.1%)
HELD_OUT_CEILING = {"tpot": 0.075, "ttft": 0.24, "e2e": 0.09}
HELD_OUT_FALSE_OVERLOADS = 0
# the never-seen runs (split never_seen: 17 runs written into the data file, in three batches, each before kvplan
# ran on any of its runs; no factor fitted or changed after seeing them), measured once: TPOT 31.1%, TTFT 59.7%, E2E
# 31.0%, 2 false overloads (Llama-2-70B TP4 on A100-80GB and Qwen3-14B on L40S). The first 13 alone: 26.8%, 77.2%,
# 31.8%. Then (fid19r) two A100 preset terms found wrong on them and fixed from other sources (presets/hardware/
# a100-80gb.toml: the fitted 97 us per layer priced per MoE layer, prefill_mfu 0.74 from the H100's fitted share of
# its GEMM rate): 15.6%, 36.5%, 16.3%, 1 false overload (L40S Qwen3-14B). The A100 runs were used to diagnose, so
# this is no longer a clean out-of-sample figure for those terms.
# Then (vllm33) every vLLM run pinned to the release it ran (tools/fidelity_report.py engine_of: vllm==0.15.1, whose
# memory and scheduler rules apply): the medians unchanged, and the L40S Qwen3-14B run no longer a false overload
# (its pool 11.50 GiB instead of 10.69 GiB: v0.15 subtracts no CUDA-graph estimate, which starts at v0.20)
# Then (fid19s) vLLM's decode all-reduce from its own in-graph kernel benchmark, found by looking at the A100 TP 2/4
# runs' errors: 16.0%, 34.9%, 16.0%, no false overload; a ceiling so that it may only fall
# Then (async19) vLLM's async scheduling and the frontend latency refitted on the fit runs under it: 16.0%, 42.2%,
# 16.1%, no false overload: TTFT WORSE here (the A100 and L40S runs, whose decode step kvplan prices too long, now
# wait one such step more; docs/simulate-fidelity.md). The ceiling records it (it rose from 35.5%)
# Then (prefill20c) the prefill's communication priced apart and prefill_mfu re-fitted compute-only: 17.2%, 26.5%,
# 18.6%, no false overload: TTFT better, TPOT and E2E worse (the ceiling rose for those two, from 16.5%)
# Then (sglov19) SGLang's overlap scheduler and SGLang's frontend latency refitted on its fit runs under it (42 -> 27
# ms): alone 16.0%, 31.9%, 16.1%; merged with prefill20c: 17.2%, 26.5%, 18.6%, no false overload
# Then (l40s22) the L40S preset's compute shares from a measured BF16 matmul (0.743 of peak; mfu 0.74, prefill_mfu
# 0.67) in place of the generic 0.45: 5.8%, 26.5%, 12.3%, no false overload; the ceiling falls with it
NEVER_SEEN_CEILING = {"tpot": 0.065, "ttft": 0.27, "e2e": 0.13}
# Then (ovl21) the overload rule's service witness (completions short of the arrivals over the steady part) calls the
# L40S Qwen3-14B run at 2.5 then 6/s: its simulated run finishes 5.4/s in the 6/s stage (waiting queue 0 -> 352,
# mean TTFT 22 s) where the real server kept up: a false overload from its step price (TPOT +29%), not the rule.
# l40s22 priced that step from the L40S's measured matmul share (TPOT +1.3%): the false overload is gone, back to 0
NEVER_SEEN_FALSE_OVERLOADS = 0
# the second never-seen set (split never_seen_2: the 8 BLIS runs no earlier batch took, Mixtral-8x7B and -8x22B on
# H100 and A100, one at DP 2; committed before kvplan ran on them, and before the all-reduce change above), measured
# before that change: TPOT 7.2%, TTFT 21.6%, E2E 6.9%, no false overload, 1 missed (Mixtral-8x7B reasoning at 4/s,
# a real overload kvplan simulates with a 125 s TTFT but does not call). After it, with nothing fitted on them:
# 5.0%, 17.1%, 4.9%, the same missed overload. Then (tpot20s) the per-MoE-layer overhead re-fitted on its own fit
# points under vLLM's all-reduce (13 -> 21 us, benchmarks/tpot_fidelity.py B15; nothing fitted on these runs): the
# Mixtral steps grow by 32 x 8 us, 5.5%, 16.2%, 6.0%
# Then (async19) async scheduling and the frontend refitted (measured on the tree before tpot20s: 5.0%, 12.9%, 4.9%;
# with both: 5.5%, 12.3%, 6.1%); and the overload rule's steady rise (kvplan.calc.simulate._rises) calls the
# Mixtral-8x7B reasoning run: no missed overload
# Then (prefill20c) the prefill's communication priced apart and prefill_mfu re-fitted compute-only: 4.6%, 13.0%,
# 6.2% (TTFT 13.03%: the ceiling rose to 13.5%)
NEVER_SEEN_2_CEILING = {"tpot": 0.056, "ttft": 0.135, "e2e": 0.062}
NEVER_SEEN_2_FALSE_OVERLOADS = 0
NEVER_SEEN_2_MISSED_OVERLOADS = 0
# the third never-seen set (split never_seen_3, runs19n: DeepSeek-R1 TP 8 closed loops, both batches committed before
# kvplan ran on them; nothing fitted or changed after), measured once: InferenceX's 26 SGLang runs (H200, MI300X, B200;
# 2026 releases) TPOT 22.2%, TTFT 61.7%, E2E 24.1%; dstack's 27 (vLLM 0.7.x on H200 and MI300X, SGLang 0.4.2 on
# MI300X; March 2025) 60.5%, 93.1%, 66.3%; all 53: 48.3%, 89.9%, 57.7%; no false overload, no missed one (none of
# them is a real overload: closed loops). kvplan is fast on all but InferenceX's H200 and B200 (docs/simulate-
# fidelity.md, *Never seen 3*). Ceilings so that they may only fall
# Then (v0q22) vLLM V0's own batch limits (no chunked prefill for MLA: 256 sequences, max(max_model_len, 2048) tokens
# a pass, the profile run of a whole 163,840-token context on H200: KV pool 41.1 -> 20.1 GiB): dstack's 27 from
# 51.0%, 84.3%, 61.1% to 53.3%, 82.7%, 57.2% (its H200 vLLM nine: TTFT 85.8% -> 72.2%), all 53 from 32.4%, 78.7%,
# 39.8% to 33.5%, 69.7%, 39.8%; the TTFT ceilings and dstack's E2E lowered to them
# Then (lead, review of v0q22) the profile run's fused-MoE workspace sized for vLLM's 32,768-token MoE chunk, not the
# whole 163,840-token pass (VLLM_FUSED_MOE_CHUNK_SIZE, PR #7995): the H200 pool 20.1 -> 35.6 GiB, so most of v0q22's
# queueing goes: dstack's 27 at 53.3%, 83.5%, 61.2%, all 53 at 33.3%, 72.2%, 39.8% (sglpk22 merged); dstack's E2E
# ceiling back up to 0.615 and the whole set's TTFT to 0.725: the correction of an overstated term, said so
NEVER_SEEN_3_CEILING = {"inferencex-": {"tpot": 0.225, "ttft": 0.62, "e2e": 0.245},
                        "dstack-": {"tpot": 0.61, "ttft": 0.835, "e2e": 0.615},
                        "": {"tpot": 0.49, "ttft": 0.725, "e2e": 0.58}}


@pytest.fixture(scope="module")
def tool():
    if not TOOL.exists():   # the installed-wheel run: the tool lives in the source tree only
        pytest.skip("tools/fidelity_report.py is not beside this test")
    return load_source("fidelity_report", TOOL)


@pytest.fixture(scope="module")
def data(tool):
    return tool.load(DATA)


def test_every_run_has_a_source_settings_and_figures(tool, data):
    runs = tool.check(data)
    assert len(runs) >= 16
    for run in runs:
        repo, _, path = run["source"].partition("@")
        assert repo.count("/") == 1 and len(path.split(":")[0]) == 40, run["source"]   # owner/name@commit:path
        stat = run["statistic"]
        assert run["measured"][f"ttft_{stat}"] > 0 and run["measured"][f"itl_{stat}"] > 0 and run["assumed"]
    # the spread the issue asks for: two engines, chat and reasoning, dense and MoE, several models, TPs and rates
    assert {r["engine"] for r in runs} == {"vllm", "sglang"}
    assert {r["load"] for r in runs} == {"chat", "reasoning"}
    assert any(r["moe"] for r in runs) and any(not r["moe"] for r in runs)
    assert len({r["model"] for r in runs}) >= 5 and {r["tp"] for r in runs} >= {1, 2, 4}
    assert len({rate for r in runs for rate, _ in r.get("stages", [])}) >= 5
    # the split is the file's rule, fixed before any error was computed: odd positions fit, even held out; the runs
    # added later are all never_seen, after the others (written down before kvplan ran on them)
    first = [r["split"] for r in runs if not r["split"].startswith("never_seen")]
    assert first == ["fit" if i % 2 == 0 else "held_out" for i in range(len(first))]
    later = [r["split"] for r in runs[len(first):]]
    seen, seen2, seen3 = (later.count(f"never_seen{s}") for s in ("", "_2", "_3"))
    assert later == ["never_seen"] * seen + ["never_seen_2"] * seen2 + ["never_seen_3"] * seen3
    assert seen >= 7 and seen2 >= 8 and seen3 >= 12


@pytest.mark.parametrize("field", ["source", "measured", "max_num_batched_tokens", "assumed"])
def test_a_run_without_its_source_or_settings_is_refused(tool, data, field):
    broken = copy.deepcopy(data)
    del broken["runs"][3][field]
    with pytest.raises(ValueError, match=f"run 4 .*no {field}"):
        tool.check(broken)


def test_constant_arrivals_are_evenly_spaced_per_stage(tool):
    # stages 2.5/s for 4 s then 6/s for 1 s: 10 requests 0.4 s apart (0 .. 3.6 s), then 6 requests 1/6 s apart
    # from 4 s; the measured stage 1 alone starts at 0
    import numpy as np

    run = {"stages": [[2.5, 4], [6.0, 1]], "arrivals": "constant", "stage": -1}
    t = tool.arrivals(run)
    assert len(t) == 16 and t[9] == pytest.approx(3.6) and t[10] == 4.0 and t[15] == pytest.approx(4 + 5 / 6)
    assert np.all(np.diff(t[:10]) == pytest.approx(0.4))
    one = tool.arrivals({**run, "stage": 1})
    assert len(one) == 6 and one[0] == 0.0 and one[-1] == pytest.approx(5 / 6)


def test_a_run_kvplan_refuses_is_reported_not_hidden(tool, data, tmp_path):
    # a 5,000-token prompt against max_model_len 4,096: kvplan refuses it; the harness keeps the message and counts
    # the run as failed in its split
    run = dict(tool.check(data)[1], prompt_tokens=5000)
    res = tool.simulate_run(run, data.get("models", {}), tmp_path)
    assert "error" in res and "4,096" in res["error"]
    assert tool.median_errors([run], [res], run["split"])["failed"] == 1


def _errors(tool, data, runs):
    results = tool.run_all(runs, data.get("models", {}))
    for run, res in zip(runs, results, strict=True):
        assert "error" not in res, (run["id"], res["error"])
    return results


def test_held_out_subset_stays_within_the_measured_ceiling(tool, data):
    runs = [r for r in tool.check(data) if r["id"] in SUBSET]
    assert len(runs) == len(SUBSET) and all(r["split"] == "held_out" for r in runs)
    results = _errors(tool, data, runs)
    for metric, ceiling in SUBSET_CEILING.items():
        median = statistics.median(abs(res[f"{metric}_error"]) for res in results)
        assert median <= ceiling, (metric, median)
    assert sum(res["overloaded"] and run["measured_overload"] is False
               for run, res in zip(runs, results, strict=True)) <= SUBSET_FALSE_OVERLOADS
    # the overloaded run says how much it sustains: below the 20/s its second stage offers
    over = [res for res in results if res["overloaded"]]
    assert all(res["capacity_rps"] is not None and 0 < res["capacity_rps"] < 20 for res in over)


def _within_ceiling(tool, data, split, ceiling, false_overloads, missed_overloads=None):
    """Every run of ``split`` simulated: its median |error| per metric at most ``ceiling``, its false overloads at
    most ``false_overloads`` (and its missed ones at most ``missed_overloads``, when given); the split's runs
    returned."""
    runs = [r for r in tool.check(data) if r["split"] == split]
    m = tool.median_errors(runs, _errors(tool, data, runs), split)
    for metric, most in ceiling.items():
        assert m[metric] <= most, (metric, m[metric])
    assert m["false_overload"] <= false_overloads
    if missed_overloads is not None:
        assert m["missed_overload"] <= missed_overloads
    return runs


@pytest.mark.skipif(not os.environ.get("KVPLAN_FIDELITY_ALL"), reason="the whole set: KVPLAN_FIDELITY_ALL=1")
def test_every_held_out_run_stays_within_the_measured_ceiling(tool, data):
    _within_ceiling(tool, data, "held_out", HELD_OUT_CEILING, HELD_OUT_FALSE_OVERLOADS)


def test_every_never_seen_run_stays_within_the_measured_ceiling(tool, data):
    # 17 runs, about 20 s of CPU: the out-of-sample set (new models, TP8, A100, L40S, SGLang's 405B on H200)
    runs = _within_ceiling(tool, data, "never_seen", NEVER_SEEN_CEILING, NEVER_SEEN_FALSE_OVERLOADS)
    assert len(runs) == 17 and {r["gpu"] for r in runs} == {"h100-sxm", "a100-80gb", "l40s", "h200"}


def test_every_run_of_the_second_never_seen_set_stays_within_the_measured_ceiling(tool, data):
    # 8 runs, about 2 s of CPU; two of them real overloads (measured_overload true), two at DP 2
    runs = _within_ceiling(tool, data, "never_seen_2", NEVER_SEEN_2_CEILING, NEVER_SEEN_2_FALSE_OVERLOADS,
                           NEVER_SEEN_2_MISSED_OVERLOADS)
    assert len(runs) == 8 and sum(r["measured_overload"] is True for r in runs) == 2
    assert [r.get("dp", 1) for r in runs].count(2) == 2


def test_a_data_parallel_run_is_built_as_its_replicas(tool, data, tmp_path):
    # 32-mixtral-8x7b-tp2-general-2-2: dp 2 (the results file's column) of TP 2 is 4 GPUs, two replicas that the
    # arrivals are dealt to round-robin; stage 0 at 8/s for 600 s is 4,800 requests in all
    run = next(r for r in tool.check(data) if r["id"] == "32-mixtral-8x7b-tp2-general-2-2/stage0")
    s, w, _ = tool.build(run, data.get("models", {}), tmp_path)
    assert (s.parallelism.tp, s.parallelism.dp) == (2, 2) and len(w.arrivals) == 4800


def test_tpot_from_e2e_is_the_decode_time_per_generated_token(tool, data):
    # Llama-2-7B codegen, stage 0 (the validation repo's means): e2e 1,810.3 ms, ttft 25.0 ms, 247 output tokens:
    # (1,810.3 - 25.0) / 246 = 7.26 ms per generated token, where its itl_mean (9.26 ms) divides by the client's
    # count of output tokens, (1,810.3 - 25.0) / 9.26 + 1 = 194 of the 247 generated
    run = next(r for r in tool.check(data) if r["id"] == "20260217-155451-llama-2-7b-tp1-codegen/stage0")
    m = run["measured"]
    assert run["tpot_from"] == "e2e" and run["output_tokens"] == 247
    assert m["e2e_mean"] == pytest.approx(1810.3, abs=0.05) and m["ttft_mean"] == pytest.approx(25.0, abs=0.05)
    assert tool.measured_figure(run, "tpot") == pytest.approx((m["e2e_mean"] - m["ttft_mean"]) / 246)
    assert tool.measured_figure(run, "tpot") == pytest.approx(7.26, abs=0.005)
    assert (m["e2e_mean"] - m["ttft_mean"]) / m["itl_mean"] + 1 == pytest.approx(193.7, abs=0.1)
    assert tool.measured_figure(dict(run, tpot_from="itl"), "tpot") == m["itl_mean"]
    assert tool.measured_figure(run, "ttft") == m["ttft_mean"] and tool.measured_figure(run, "e2e") == m["e2e_mean"]
    # SGLang's bench_serving publishes its own ITL p50: compared as published
    sg = next(r for r in tool.check(data) if r["engine"] == "sglang")
    assert "tpot_from" not in sg and tool.measured_figure(sg, "tpot") == sg["measured"]["itl_p50"]
    broken = copy.deepcopy(data)
    broken["runs"][0]["tpot_from"] = "tokens"
    with pytest.raises(ValueError, match="run 1 .*tpot_from"):
        tool.check(broken)


def test_each_vllm_run_runs_its_own_releases_rules(tool, data, tmp_path):
    """A run of vLLM v0.15.1 (or a fork of it) is simulated as ``vllm==0.15.1``: that release's memory rules and
    V1 scheduler rules (the first chunk admits, every freed block to the queue's tail), not the default release's;
    a release that names no version (SGLang's ``latest`` image) runs the engine's default."""
    runs = tool.check(data)
    # BLIS's runs: v0.15.1 (or its fork); dstack's DeepSeek-R1 runs of March 2025 (never_seen_3): 0.7.4.dev181 on
    # H200 and 0.7.3.dev138 on MI300X, V0's rules
    assert {tool.engine_of(r) for r in runs if r["engine"] == "vllm"} == {"vllm==0.15.1", "vllm==0.7.4", "vllm==0.7.3"}
    assert {tool.engine_of(r) for r in runs if r["engine"] == "vllm" and not r["id"].startswith("dstack-")} == \
        {"vllm==0.15.1"}
    assert {tool.engine_of(r) for r in runs if r["engine"] == "sglang"} == {"sglang"}
    run = next(r for r in runs if r["release"].startswith("inference-sim/vllm fork of v0.15.1"))
    s, _, _ = tool.build(run, data.get("models", {}), tmp_path)
    assert s.engine_adapter.version == (0, 15, 1)


def test_ttft_and_e2e_carry_the_engines_frontend_latency(tool, data, tmp_path):
    # the per-request latency outside the steps (the API server's way in and the first token's way out): vLLM 1 ms
    # and SGLang 18 ms, each fitted on the 'fit' runs (engines/vllm.py, engines/sglang.py); none for neutral. It is
    # on every TTFT and E2E, never on TPOT: a light qwen2.5-7b run, 20 requests at 1/s
    import numpy as np

    from kvplan.calc import costs
    from kvplan.calc import simulate as sim
    from kvplan.engines.neutral import Neutral
    from kvplan.engines.sglang import SglangEngine
    from kvplan.engines.vllm import VllmEngine

    assert (VllmEngine.frontend_latency[0], SglangEngine.frontend_latency[0], Neutral.frontend_latency[0]) == \
        (0.001, 0.018, 0.0)
    run = dict(next(r for r in tool.check(data) if r["id"] == "64-qwen2-5-7b-instruct-tp1-roleplay-1-1/stage0"),
               stages=[[1.0, 20]], stage=0)
    s, w, o = tool.build(run, data.get("models", {}), tmp_path)
    assert costs.frontend_seconds(s).value == 0.001
    plan = sim.plan_simulate(s, w, o)
    r = plan.run
    engine_ttft = r.first_token - r.arrival
    assert plan.metrics["ttft_seconds_p50"].value == pytest.approx(float(np.percentile(engine_ttft, 50)) + 0.001)
    res = tool.simulate_run(run, data.get("models", {}), tmp_path)
    assert res["ttft"] == pytest.approx(float(engine_ttft.mean()) * 1e3 + 1)
    assert res["e2e"] == pytest.approx(float((r.finish - r.arrival).mean()) * 1e3 + 1)
    multi = r.outputs > 1
    tpot = (r.finish - r.first_token)[multi] / (r.outputs[multi] - 1)
    assert res["tpot"] == pytest.approx(float(tpot.mean()) * 1e3)


def test_a100_prices_its_fitted_moe_latency_per_moe_layer_not_per_dense_layer():
    # presets/hardware/a100-80gb.toml: the 97 us per layer fitted on Qwen3-30B-A3B (48 layers, every one MoE) is the
    # fused-MoE kernel's latency, so it is priced per MoE layer: the generic 15 us per layer plus the preset's 95 per
    # MoE layer (in place of the generic 13) make 110 us per MoE layer, the 97 + 13 it paid before, so the MoE model's
    # fixed overhead is unchanged: 48 x 110 + 450 = 5,730 us. A dense
    # model pays the generic 15 us per layer: Llama-3.1-8B, 32 x 15 + 450 = 930 us (it paid 32 x 97 + 450 = 3,554).
    # prefill_mfu 0.74: the H100's fitted 0.70 (compute-only, prefill20c) over its BF16 large-GEMM share 0.78, times
    # the A100's measured 256.5 / 312 = 0.822: 0.738, rounded to 0.74
    from kvplan.calc import costs
    from kvplan.scenario import Scenario

    dense = costs.step_model(Scenario(model="llama-3.1-8b", hardware="a100-80gb", gpus="1", engine="vllm"))
    moe = costs.step_model(Scenario(model="qwen3-30b-a3b", hardware="a100-80gb", gpus="1", engine="vllm"))
    assert moe.moe_layers == 48 and moe.layers == 48
    assert moe.overhead_s == pytest.approx(5730e-6)
    assert dense.overhead_s == pytest.approx(930e-6)
    assert dense.factors.value("prefill_mfu") == 0.74
    assert dense.prefill_flops_s == pytest.approx(312e12 * 0.74)
    assert 0.70 / 0.78 * 256.5 / 312 == pytest.approx(0.738, abs=0.001)


def test_vllm_prices_its_decode_all_reduce_from_its_own_in_graph_kernel():
    # vLLM's custom all-reduce in CUDA graphs on 4 x H100, hidden 8192 (vllm-project/vllm#24532, ca_1stage): 0.5 MiB
    # 10 us, 1 MiB 14, 1.5 MiB 19, 2 MiB 23, 3 MiB 30, 4 MiB 38. Least squares by hand: mean x 2, mean y 22.33,
    # Sxx 8.5, Sxy 67.5, slope 7.94 us per MiB, intercept 22.33 - 2 x 7.94 = 6.45 us. At TP 4 the bytes term is
    # 2 x 3/4 x bytes / (450 GB/s x share), so share = 1.5 x 1,048,576 / (450e9 x 7.94e-6) = 0.44.
    # Llama-3.1-70B (80 layers, hidden 8192) at TP 4 on H100, batch 64: each of the 160 all-reduces carries
    # 64 x 8,192 x 2 B = 1 MiB: 6.45 + 1.5 x 1,048,576 / (450e9 x 0.44) s = 6.45 + 7.944 = 14.39 us (the benchmark's
    # 1 MiB row: 14 us), 2.303 ms a step; the generic figure (9.3 us, 0.114) gives 9.3 + 30.67 = 39.97 us, 6.40 ms.
    from kvplan.calc import costs
    from kvplan.scenario import Scenario

    def comm(engine, hardware="h100-sxm", **flags):
        s = Scenario(model="llama-3.1-70b", hardware=hardware, gpus="4", tp="4", engine=engine)
        f = costs.step_factors(s.hardware, **flags)
        return costs.step_model(s, f).step(64, 0.0, 0.0)["comm"]

    assert comm("vllm") == pytest.approx(160 * (6.45 + 1.5 * 1_048_576 / (450e9 * 0.44) * 1e6) * 1e-6, rel=1e-9)
    assert comm("vllm") == pytest.approx(2.303e-3, abs=2e-6)
    generic = 160 * (9.3 + 1.5 * 1_048_576 / (450e9 * 0.114) * 1e6) * 1e-6
    assert comm("sglang") == pytest.approx(generic, rel=1e-9) and comm("neutral") == pytest.approx(generic, rel=1e-9)
    assert generic == pytest.approx(6.395e-3, abs=2e-6)
    # a value given (a flag or calibration) or a GPU preset's own is kept: --allreduce-latency-us 20 keeps 20 us with
    # vLLM's share; MI300X's preset (7.2 us, 0.24 of 448 GB/s... its own measured kernel) is not replaced
    assert comm("vllm", allreduce_latency_us=20.0) == pytest.approx(
        160 * (20.0 + 1.5 * 1_048_576 / (450e9 * 0.44) * 1e6) * 1e-6, rel=1e-9)
    mi = Scenario(model="llama-3.1-70b", hardware="mi300x", gpus="4", tp="4", engine="vllm")
    f = costs.step_model(mi).factors
    assert (f.value("allreduce_latency_us"), f.value("allreduce_link")) == (7.2, 0.24)
    v = costs.step_model(Scenario(model="llama-3.1-70b", hardware="h100-sxm", gpus="4", tp="4", engine="vllm")).factors
    assert "vllm-project/vllm#24532" in v.allreduce_link.why.sources[0]


# ---- the third never-seen set (runs19n): SGLang DeepSeek-R1 FP8 TP 8 closed loops measured by InferenceX ----------

def _never_seen_3(tool, data, source="inferencex-"):
    """The never_seen_3 runs of one source (their ids start with it): InferenceX's first batch, dstack's second."""
    return [r for r in tool.check(data) if r["split"] == "never_seen_3" and r["id"].startswith(source)]


def test_the_third_never_seen_set_is_the_rule_it_names(tool, data):
    """tests/data/serving_runs.toml's never_seen_3 header: every SGLang DeepSeek-R1 FP8, single-node, no-MTP, TP 8 row
    of InferenceX's fixture with an image, on H200 (9 rows: 1k/8k at CONC 4-64, 1k/1k and 8k/1k at 4 and 8) and MI300X
    (15: three shapes at CONC 4-64), plus the B200's two of the H200's 1k/8k campaign; each a closed loop of CONC users
    sending CONC x 10 requests, its settings pinned to an InferenceX commit."""
    runs = _never_seen_3(tool, data)
    assert len(runs) == 26
    by_gpu = {g: sorted((r["workload"], r["users"]) for r in runs if r["gpu"] == g) for g in ("h200", "mi300x", "b200")}
    assert sum(len(v) for v in by_gpu.values()) == 26
    assert [u for w, u in by_gpu["h200"] if w == "random-1k-8k-ratio-0.8"] == [4, 8, 16, 32, 64]
    assert len(by_gpu["h200"]) == 9 and len(by_gpu["mi300x"]) == 15
    assert by_gpu["b200"] == [("random-1k-8k-ratio-0.8", 4), ("random-1k-8k-ratio-0.8", 32)]
    for run in runs:
        assert (run["engine"], run["model"], run["tp"], run["arrivals"]) == ("sglang", "deepseek-r1", 8, "closed")
        assert run["requests"] == 10 * run["users"] and run["tpot_from"] == "tpot" and run["statistic"] == "p50"
        repo, _, rest = run["settings_source"].partition("@")
        assert repo == "SemiAnalysisAI/InferenceX" and len(rest.split(":")[0]) == 40, run["settings_source"]
        assert "#run=" in run["source"] and run["measured_overload"] is False
    # the load the brief prefers: 12 of them reasoning-like (1k prompt, 8k decode)
    assert sum(r["load"] == "reasoning" for r in runs) == 12


def test_the_third_never_seen_sets_lengths_are_the_clients_range_ratio(tool, data):
    """The client draws each length uniformly from int(0.8 x L)..L (RANDOM_RANGE_RATIO 0.8): 1,024 -> 819..1,024
    (0.8 x 1,024 = 819.2), 8,192 -> 6,553..8,192 (6,553.6), means 921.5 and 7,372.5. The published means agree with
    it: E2E = TTFT + TPOT x (output - 1) per request, so e2e_mean ~ ttft_mean + tpot_mean x (7,372.5 - 1). H200 1k/8k
    at CONC 4: 259.41 + 10.2643 x 7,371.5 = 75,922 ms against 74,791 published, +1.5%; had the outputs been
    uniform 1..8,192 (ratio 0), the mean would be 4,096.5 and the sum 42,294 ms, -43%. Every run within 2%."""
    runs = _never_seen_3(tool, data)
    h = next(r for r in runs if r["id"] == "inferencex-h200-dsr1-fp8-sglang-1k8k/conc4")
    assert (h["prompt_dist"], h["output_dist"]) == ("uniform:819,1024", "uniform:6553,8192")
    assert (h["prompt_tokens"], h["output_tokens"]) == (921.5, 7372.5)
    m = h["measured"]
    assert m["ttft_mean"] + m["tpot_mean"] * 7371.5 == pytest.approx(75922, abs=1)
    assert m["e2e_mean"] == pytest.approx(74791.3, abs=0.1)
    for run in runs:
        m = run["measured"]
        lo, hi = (int(x) for x in run["output_dist"].split(":")[1].split(","))
        assert lo == int(0.8 * hi) and run["output_tokens"] == (lo + hi) / 2
        lo, hi = (int(x) for x in run["prompt_dist"].split(":")[1].split(","))
        assert lo == int(0.8 * hi) and run["prompt_tokens"] == (lo + hi) / 2
        pred = m["ttft_mean"] + m["tpot_mean"] * (run["output_tokens"] - 1)
        assert pred == pytest.approx(m["e2e_mean"], rel=0.02), run["id"]


def test_tpot_from_tpot_compares_the_clients_own_tpot(tool, data):
    # H200 streams every 10th token (--stream-interval 10): its median ITL, 102.46 ms, is ten tokens apart; the
    # client's median TPOT, 10.2711 ms, is kvplan's TPOT. tpot_from = "tpot" compares the latter
    run = next(r for r in _never_seen_3(tool, data) if r["id"] == "inferencex-h200-dsr1-fp8-sglang-1k8k/conc4")
    m = run["measured"]
    assert (m["tpot_p50"], m["itl_p50"]) == (10.2711, 102.4603)
    assert tool.measured_figure(run, "tpot") == 10.2711
    assert tool.measured_figure(dict(run, tpot_from="itl"), "tpot") == 102.4603
    assert tool.measured_figure(run, "ttft") == m["ttft_p50"] and tool.measured_figure(run, "e2e") == m["e2e_p50"]
    broken = copy.deepcopy(data)
    at = next(i for i, r in enumerate(broken["runs"]) if r["id"] == run["id"])
    del broken["runs"][at]["measured"]["tpot_p50"]
    with pytest.raises(ValueError, match=f"run {at + 1} .*measured tpot_p50 missing"):
        tool.check(broken)
    broken["runs"][at]["tpot_from"] = "chunk"
    with pytest.raises(ValueError, match=f"run {at + 1} .*tpot_from 'chunk'"):
        tool.check(broken)


def test_a_closed_loop_run_is_built_with_its_users_drawn_lengths_and_kv_dtype(tool, data, tmp_path):
    # MI300X 1k/8k at CONC 4: 4 users, 40 requests, no arrival times (the simulator drives the loop), prompts drawn
    # from 819..1,024 and outputs from 6,553..8,192, the KV cache in fp8 (--kv-cache-dtype fp8_e4m3) and
    # --mem-fraction-static 0.8; H200 1k/8k keeps the engine's KV dtype (bf16) and --max-running-requests 256
    import numpy as np

    from kvplan.specs.dtypes import KVDtype

    runs = {r["id"]: r for r in _never_seen_3(tool, data)}
    s, w, _ = tool.build(runs["inferencex-mi300x-dsr1-fp8-sglang-1k8k/conc4"], data.get("models", {}), tmp_path)
    assert w.arrivals is None and w.users == 4 and len(w.prompts) == 40
    assert 819 <= int(np.min(w.prompts)) and int(np.max(w.prompts)) <= 1024
    assert 6553 <= int(np.min(w.outputs)) and int(np.max(w.outputs)) <= 8192
    assert len(set(np.asarray(w.outputs).tolist())) > 30          # drawn, not one fixed length
    assert s.kv_dtype is KVDtype.FP8 and s.mem_fraction_static == 0.8 and s.parallelism.tp == 8
    s, w, _ = tool.build(runs["inferencex-h200-dsr1-fp8-sglang-1k8k/conc4"], data.get("models", {}), tmp_path)
    assert s.kv_dtype is KVDtype.BF16 and s.max_num_seqs == 256 and w.users == 4


def test_the_third_never_seen_sets_second_batch_is_the_rule_it_names(tool, data):
    """dstack's DeepSeek-R1 rows (never_seen_3's second batch): every vLLM row on H200 and MI300X and every SGLang row
    on MI300X of the random dataset (range ratio 1), nine each: 3,200-token prompts with 800-token outputs at 4..128
    users, and 1,600, 3,200 and 6,400 at 128; the prefix-cache rows (range ratio 0) and H200's SGLang (DP attention)
    are not in it."""
    runs = _never_seen_3(tool, data, "dstack-")
    assert len(runs) == 27 and len(_never_seen_3(tool, data, "")) == 26 + 27
    for gpu, engine in (("h200", "vllm"), ("mi300x", "vllm"), ("mi300x", "sglang")):
        mine = [r for r in runs if (r["gpu"], r["engine"]) == (gpu, engine)]
        assert sorted((r["output_tokens"], r["users"]) for r in mine) == [
            (800, 4), (800, 8), (800, 16), (800, 32), (800, 64), (800, 128), (1600, 128), (3200, 128), (6400, 128)]
    for run in runs:
        assert (run["model"], run["tp"], run["arrivals"], run["requests"], run["prompt_tokens"]) == \
            ("deepseek-r1", 8, "closed", 500, 3200)
        assert "prompt_dist" not in run and run["source"].startswith("dstackai/benchmarks@7f37e669")
        # fixed lengths: each request's E2E is its TTFT + TPOT x (800 - 1), so the published means obey it exactly
        # (H200 vLLM at 4 users: 975.6508 + 25.73 x 799 = 21,533.92 ms against the e2e_mean 21,533.90); a length
        # off by 1% would miss by about as much
        m = run["measured"]
        assert m["ttft_mean"] + m["tpot_mean"] * (run["output_tokens"] - 1) == pytest.approx(m["e2e_mean"], rel=1e-3)
    h = next(r for r in runs if r["id"] == "dstack-h200-dsr1-vllm-3200-800/conc4")
    assert h["source"].endswith("#line=25") and h["measured"]["tpot_p50"] == 25.7346   # median_itl_ms: 25.6931
    assert 975.6508 + 25.73 * 799 == pytest.approx(h["measured"]["e2e_mean"], abs=0.05)


def test_every_run_of_the_third_never_seen_set_stays_within_the_measured_ceiling(tool, data):
    # 53 runs, about 3 s of CPU: each batch's medians and the whole set's, no false overload
    runs = _never_seen_3(tool, data, "")
    results = _errors(tool, data, runs)
    for source, ceiling in NEVER_SEEN_3_CEILING.items():
        mine = [(run, res) for run, res in zip(runs, results, strict=True) if run["id"].startswith(source)]
        m = tool.median_errors([run for run, _ in mine], [res for _, res in mine], "never_seen_3")
        assert m["runs"] == {"inferencex-": 26, "dstack-": 27, "": 53}[source] and m["failed"] == 0
        for metric, most in ceiling.items():
            assert m[metric] <= most, (source, metric, m[metric])
        assert m["false_overload"] == 0 and m["missed_overload"] == 0
