"""kvplan simulate against published real serving runs (tests/data/serving_runs.toml, tools/fidelity_report.py).

Issue 19's target, on real serving runs published with their settings (chat and reasoning loads, several models
and rates): TPOT p50 and E2E within 7% median error, TTFT within 20%, and no false overload. The runs' sources
publish means, not p50s, so the harness compares kvplan's mean with the measured mean.

This file checks that every run carries its source, settings and figures, that the harness builds the runs' arrivals
as the data says, that it reports a run kvplan refuses instead of hiding it, and, on a fast subset of held-out runs
(< 20 s), asserts the errors measured NOW as a regression ceiling: they may only fall. The target is not met
today (docs/simulate-fidelity.md has the table: held-out median |error| TPOT 7.4%, TTFT 23.8%, E2E 8.8%, no false
overload in 22 runs; never seen, 17 runs: 16.0%, 42.2%, 16.1%, no false overload (34.9% TTFT before vLLM's async
scheduling was modelled); 31.1%, 59.7%, 31.0% and 2 before the A100 preset's fix; never seen 2, 8 runs: 5.0%,
12.9%, 4.9%, none false, none missed); the ceilings are tightened as the errors fall.
The whole set runs in the tool (``python tools/fidelity_report.py``, under a minute), or here with
``KVPLAN_FIDELITY_ALL=1``.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import statistics
from pathlib import Path

import pytest

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
SUBSET_CEILING = {"tpot": 0.07, "ttft": 0.085, "e2e": 0.095}
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
# a100-80gb.toml: the fitted 97 us per layer priced per MoE layer, prefill_mfu 0.68 from the H100's fitted share of
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
# Then (sglov19) SGLang's overlap scheduler and SGLang's frontend latency refitted on its fit runs under it (42 -> 27
# ms): 16.0%, 31.9%, 16.1%, no false overload (the four SGLang 405B runs' TTFT: the high-rate ones were far under)
NEVER_SEEN_CEILING = {"tpot": 0.165, "ttft": 0.325, "e2e": 0.165}
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
NEVER_SEEN_2_CEILING = {"tpot": 0.056, "ttft": 0.13, "e2e": 0.062}
NEVER_SEEN_2_FALSE_OVERLOADS = 0
NEVER_SEEN_2_MISSED_OVERLOADS = 0


@pytest.fixture(scope="module")
def tool():
    if not TOOL.exists():   # the installed-wheel run: the tool lives in the source tree only
        pytest.skip("tools/fidelity_report.py is not beside this test")
    spec = importlib.util.spec_from_file_location("fidelity_report", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    assert len({rate for r in runs for rate, _ in r["stages"]}) >= 5
    # the split is the file's rule, fixed before any error was computed: odd positions fit, even held out; the runs
    # added later are all never_seen, after the others (written down before kvplan ran on them)
    first = [r["split"] for r in runs if not r["split"].startswith("never_seen")]
    assert first == ["fit" if i % 2 == 0 else "held_out" for i in range(len(first))]
    later = [r["split"] for r in runs[len(first):]]
    seen = later.count("never_seen")
    assert later == ["never_seen"] * seen + ["never_seen_2"] * (len(later) - seen)
    assert seen >= 7 and len(later) - seen >= 8


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
    assert {tool.engine_of(r) for r in runs if r["engine"] == "vllm"} == {"vllm==0.15.1"}
    assert {tool.engine_of(r) for r in runs if r["engine"] == "sglang"} == {"sglang"}
    run = next(r for r in runs if r["release"].startswith("inference-sim/vllm fork of v0.15.1"))
    s, _, _ = tool.build(run, data.get("models", {}), tmp_path)
    assert s.engine_adapter.version == (0, 15, 1)


def test_ttft_and_e2e_carry_the_engines_frontend_latency(tool, data, tmp_path):
    # the per-request latency outside the steps (the API server's way in and the first token's way out): vLLM 1 ms
    # and SGLang 27 ms, each fitted on the 'fit' runs (engines/vllm.py, engines/sglang.py); none for neutral. It is
    # on every TTFT and E2E, never on TPOT: a light qwen2.5-7b run, 20 requests at 1/s
    import numpy as np

    from kvplan.calc import costs
    from kvplan.calc import simulate as sim
    from kvplan.engines.neutral import Neutral
    from kvplan.engines.sglang import SglangEngine
    from kvplan.engines.vllm import VllmEngine

    assert (VllmEngine.frontend_latency[0], SglangEngine.frontend_latency[0], Neutral.frontend_latency[0]) == \
        (0.001, 0.027, 0.0)
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
    # prefill_mfu 0.68: the H100's fitted 0.65 over its BF16 large-GEMM share 0.78, times the A100's measured
    # 256.5 / 312 = 0.822: 0.685, rounded down to 0.68
    from kvplan.calc import costs
    from kvplan.scenario import Scenario

    dense = costs.step_model(Scenario(model="llama-3.1-8b", hardware="a100-80gb", gpus="1", engine="vllm"))
    moe = costs.step_model(Scenario(model="qwen3-30b-a3b", hardware="a100-80gb", gpus="1", engine="vllm"))
    assert moe.moe_layers == 48 and moe.layers == 48
    assert moe.overhead_s == pytest.approx(5730e-6)
    assert dense.overhead_s == pytest.approx(930e-6)
    assert dense.factors.value("prefill_mfu") == 0.68
    assert dense.prefill_flops_s == pytest.approx(312e12 * 0.68)
    assert 0.65 / 0.78 * 256.5 / 312 == pytest.approx(0.685, abs=0.001)


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
