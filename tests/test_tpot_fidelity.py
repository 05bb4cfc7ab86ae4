"""kvplan's TPOT against published decode measurements (benchmarks/tpot_fidelity.py holds the points and their
sources). Factors fitted to points (fidelity.IN_SAMPLE): the H100 and B200 per-layer and per-step overheads (B1a,
B3a), the per-request and per-MoE-layer overheads (B15a-e, gpt-oss-120b on 8 x H100; the MoE-layer one re-fitted
to 13 us with the per-GEMM floor priced, to 21 us with vLLM's in-graph all-reduce priced), MI300X's upcast_hbm
(B9a-c), A100's per-layer overhead (B23b, B23d; priced per MoE layer)
and H100's upcast_moe_us (B19b, B22b: vLLM's default MXFP4 MoE path on Hopper), the cross-node decode all-reduce's
latency per call in an engine (B27a, B27c: rule R3, 139 us). The per-GEMM floor (10.3 us)
is sourced from microbenchmarks (sglang PR #5820), not fitted. The never-seen set (fidelity.NEVER_SEEN) is pinned
apart, as ceilings.
The pins below are all out of sample; their tolerances are about 1.5 x today's error, so a rule changed by a step
shows. B17's TPOTs are derived from published throughput and mean TTFT (fidelity.clean_tpot_ms), pinned by hand."""

import importlib.util
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "tpot_fidelity", Path(__file__).resolve().parent.parent / "benchmarks" / "tpot_fidelity.py")
fidelity = importlib.util.module_from_spec(spec)
sys.modules["tpot_fidelity"] = fidelity
spec.loader.exec_module(fidelity)
BY_ID = {p.id: p for p in fidelity.POINTS}
# today 6.8% (7.8% before SGLang's shared-expert fusion on DeepSeek-R1 at TP8 on Hopper, B7; 8.7% with the MoE-layer
# overhead re-fitted to 21 us on B15 alone, before H100's upcast_moe_us and MI300X's upcast_hbm were re-fitted on their
# own fit points under it; 7.0% before that re-fit, 8.5% before a closed-loop run's TPOT took in the other requests'
# prefills, serving_tpot; 8.9% before H100's upcast_moe_us was fitted on B19b/B22b, 15.1% before A100's
# overhead_us_per_layer was fitted on B23b/d); worst B17a (DeepSeek-R1 NVFP4 on B200, SGLang, c4, +26.4%; B16b -25.3%
# before the re-fit): issue 20's targets (median <= 8%, every held-out point within 30%) were met on B1-B23.
# decode19b added B24a-g (Qwen3-14B on one A100, the tt-inference-server harness of B23) and B25 (Llama-3.1-8B on one
# A100 40GB, vLLM 0.23.0): held-out median 6.8% -> 7.0%, worst B24b (-31.0%, that harness's dense 128/1,024 row, 28.2
# ms where kvplan gives 19.5): the 30% target is missed on one point, and said so (docs/decode-measurements.md (C))
# relspeed20 added B26a-b (DeepSeek-V3 on ROCm, SGLang's Triton path; B26a fits vLLM's ROCm Triton MLA rule, 448 us
# per MLA layer) and B27a-d (DeepSeek-R1-0528 at TP16 over two H100 nodes, vLLM and SGLang): held-out median 7.0% (31
# points) -> 8.1% (34; 9.1% on the same 34 without the rule), worst B27b (-47.1%): kvplan's decode step prices a TP
# group wider than one node at the in-node all-reduce (docs/decode-measurements.md, relspeed20), so issue 20's 8% and
# 30% targets are missed on the 34 and said so; the 31 earlier points keep 7.0% (HELD_OUT_EARLIER)
# tpot20c: the tt harness's fixed-length closed loop runs in lockstep waves (B27b/d priced as the cohort's plain steps:
# -48% / -32% at 46 us per cross-node call), and rule R3 fits the cross-node decode all-reduce's per-call latency in an
# engine on B27a/B27c (139 us): held-out median 8.1% -> 7.2%, worst B27b -36.7% -> B24b -31.0% (B27b -23.0%, B27d
# +2.5%): the 8% target is met on the 34, the 30% one missed on B24b alone
HELD_OUT_MEDIAN, HELD_OUT_WORST, HELD_OUT_EARLIER = 0.075, 0.32, 0.0705


@pytest.mark.parametrize("point_id, tolerance", [
    ("B1b", 0.05), ("B1c", 0.05),       # Llama-3.1-8B batch 1 at 32K and 125K on H100: the KV slope (+1%, +2%)
    ("B2", 0.05),                       # the same with FP8 KV (-3%)
    ("B3b", 0.08),                      # B200 at 125K (+4%)
    ("B4a", 0.12),                      # batch 8 at 20K (-7%)
    # DeepSeek-R1 TP8 on H200 (SGLang v0.5.7), batch 8, 16 and 64: the per-GEMM floor on 370 GEMMs, SGLang fusing
    # the shared expert into the MoE kernel (+2%, +1%, -7%; +10%, +8%, -3% on 486 GEMMs with the MoE-layer overhead
    # at 21 us; before the floor -17%, -14%, -17%)
    ("B7a", 0.04), ("B7b", 0.04), ("B7d", 0.10),
    ("B10", 0.25),                      # gpt-oss-120b TP8 on MI300X, batch 1 (-19%)
    ("B16d", 0.25),                     # the same at concurrency 64, a later vLLM (-18%)
    # DeepSeek-R1 NVFP4 TP8/EP8 on B200 (SGLang), concurrency 4 and 16 (+20%, +9%; before -19%, -20%): the B200
    # floor is Hopper's by proxy; B17c +14.6% since prefill20c priced the closed loop's prefills' TP8 all-reduces
    ("B17a", 0.30), ("B17c", 0.16),
    # new held-out points (B18+). Qwen3-30B-A3B on one A100, batch 1 (+3%, +1%, -2%; -38..-39% before A100's
    # overhead_us_per_layer was fitted on B23b and B23d of the same run, so these are checks of its context slope
    # more than of the fit)
    ("B23a", 0.06), ("B23c", 0.04), ("B23e", 0.05),
    ("B20a", 0.23), ("B20c", 0.23),     # gpt-oss-20b on one B200, batch 1, BF16 1K and FP8 KV 125K (-15%, -15%)
    # gpt-oss-20b on one H100 on vLLM's default MXFP4 path (matmul_ogs): batch 8 at 20K (+1%) and batch 1 (+7%);
    # -23% and -40% before upcast_moe_us (79 us per MoE layer, fitted on B19b and B22b)
    ("B22a", 0.03), ("B19a", 0.10),
    # DeepSeek-R1-0528 TP16 over two H100 nodes at concurrency 32, lockstep waves, 139 us per cross-node call (rule R3,
    # fitted on the concurrency-1 rows): SGLang +2.5%, vLLM -23.0% (-32% and -48% at nccl-tests' 46 us)
    ("B27d", 0.05), ("B27b", 0.30),
])
def test_out_of_sample_points_within_tolerance(point_id, tolerance):
    p = BY_ID[point_id]
    assert p.id not in fidelity.fit_ids()
    assert fidelity.predict(p) == pytest.approx(p.tpot_ms, rel=tolerance), p.source


def test_the_points_before_this_pass_stay_within_25_percent():
    # B1-B17 (30 points): today's worst B16b, MI300X TP8 concurrency 8 (-25.3%); median 6.6%, 8.8% over their 20
    # points no factor was fitted to
    old = {p.id: abs(fidelity.predict(p) - p.tpot_ms) / p.tpot_ms for p in fidelity.POINTS
           if p not in fidelity.NEW_POINTS}
    assert len(old) == 30
    assert max(old.values()) <= 0.27   # B17a +26.4% since the MoE-layer overhead re-fit (21 us)
    assert statistics.median(old.values()) <= 0.10
    assert statistics.median(e for i, e in old.items() if i not in fidelity.IN_SAMPLE) <= 0.12


def test_held_out_error_ceiling():
    # Issue 20's targets: >= 40 points, fit on at most half, held-out median <= 8% and every held-out point within
    # 30%. Pinned here as today's ceilings (HELD_OUT_MEDIAN, HELD_OUT_WORST), to be lowered as the model improves.
    errors = fidelity.errors()
    fit = fidelity.fit_ids()
    held = {i: abs(e) for i, e in errors.items() if i not in fit}
    assert len(errors) >= 40 and len(fit) <= len(errors) / 2
    assert statistics.median(held.values()) <= HELD_OUT_MEDIAN
    assert max(held.values()) <= HELD_OUT_WORST
    earlier = [e for i, e in held.items() if fidelity.run_of(i) not in {"B26", "B27"}]
    assert len(earlier) == 31 and statistics.median(earlier) <= HELD_OUT_EARLIER
    # the held-out points from a run no fit point shares (18: B2, B4, B7, B10, B16, B17, B25): today 12.8% (14.0%
    # before B25)
    apart = [e for i, e in held.items() if fidelity.run_of(i) not in {fidelity.run_of(j) for j in fit}]
    assert len(apart) == 18 and statistics.median(apart) <= 0.15


def test_run_of_groups_a_sweep():
    assert fidelity.run_of("B23c") == fidelity.run_of("B23e") == "B23" and fidelity.run_of("B10") == "B10"
    assert fidelity.run_of("B24f") == fidelity.run_of("B24g") == "B24"    # a table of seven rows: a..g


def test_the_a100_points_of_this_pass_are_priced_by_hand():
    # B24a: Qwen3-14B (tests/data/serving_runs.toml's config: 40 layers, hidden 5,120, MLP 17,408, 8 KV heads of 128,
    # vocabulary 151,936 untied) = 0.7779 B embedding + 0.7779 B LM head + 40 x (62.9 M attention + 267.4 M MLP) =
    # 14.77 B parameters, 29.53 GB in bf16; one A100 at 2.039 TB/s x 0.79: 18.33 ms; + 40 x 15 + 450 us of overhead
    # + 15 us per request + the KV read of 192 tokens (128..256) x 163,840 B = 0.02 ms: 19.42 ms (published 24.3)
    assert fidelity.model_ref("qwen3-14b").endswith("config.json")
    assert fidelity.model_ref("llama-3.1-8b") == "llama-3.1-8b"
    assert fidelity.predict(BY_ID["B24a"]) == pytest.approx(19.42, rel=0.005)
    # B25: the 40GB card's HBM2 at 1,555 GB/s: the preset's share scaled, 0.79 x 1,555 / 2,039 = 0.6025, so 2.039 TB/s
    # x 0.6025 = 1.2285 TB/s; Llama-3.1-8B's 16.06 GB in 13.07 ms + 32 x 15 + 450 us + 15 us + 1,088 tokens x 131,072 B
    # of KV (0.12 ms): 14.13 ms against the published ~13.3 (+6%)
    assert dict(BY_ID["B25"].factors)["hbm"] == pytest.approx(0.6025, abs=1e-4)
    assert fidelity.predict(BY_ID["B25"]) == pytest.approx(14.13, rel=0.005)
    # the tt harness's dense rows are slower than kvplan by 13-31% (B24b/d/f held out: 28.2, 27.6, 22.8 ms published)
    for pid, published in (("B24b", 28.2), ("B24d", 27.6), ("B24f", 22.8)):
        assert BY_ID[pid].tpot_ms == published and pid not in fidelity.fit_ids()
        assert -0.32 <= fidelity.predict(BY_ID[pid]) / published - 1 <= -0.12


def test_new_points_split_by_position_alone():
    # the rule in the module's docstring: the 1st, 3rd, ... new point is fit, the 2nd, 4th, ... held out
    ids = [p.id for p in fidelity.NEW_POINTS]
    assert fidelity.NEW_FIT == set(ids[0::2]) and not fidelity.NEW_FIT & set(ids[1::2])
    assert not fidelity.NEW_FIT & fidelity.IN_SAMPLE and len(set(BY_ID)) == len(fidelity.POINTS)


def test_clean_tpot_takes_the_ttft_out_of_concurrency_over_throughput():
    # B17a by hand: 4 requests x 1,024 tokens / (8 GPUs x 59.7 tok/s) = 4,096 / 477.6 = 8.57621 s per request;
    # less the mean TTFT 0.1996 s = 8.37661 s over 1,023 tokens after the first = 8.18828 ms (concurrency /
    # throughput alone: 4 / 477.6 = 8.37521 ms).
    assert fidelity.clean_tpot_ms(4, 477.6, 199.6, 1024) == pytest.approx(8.18828, rel=1e-5)
    # no TTFT: E2E / (n - 1), a hair above concurrency / throughput: 2 x 100 / 50 = 4 s / 99 = 40.404 ms
    assert fidelity.clean_tpot_ms(2, 50.0, 0.0, 100) == pytest.approx(4000 / 99)


@pytest.mark.parametrize("point_id, tpot_ms", [
    # (c x 1,024 / (8 x out/GPU) - TTFT) / 1,023, the figures of InferenceX issue 870's B200 table:
    ("B17a", 8.19),     # (4,096 / 477.6 - 0.1996) / 1,023
    ("B17b", 9.36),     # (8,192 / 838.4 - 0.1972) / 1,023 = 9.3586
    ("B17c", 11.48),    # (16,384 / 1,354.4 - 0.3549) / 1,023 = 11.4780
    ("B17d", 13.79),    # (32,768 / 2,259.2 - 0.3944) / 1,023 = 13.7926
])
def test_b17_tpot_excludes_the_published_ttft(point_id, tpot_ms):
    assert BY_ID[point_id].tpot_ms == pytest.approx(tpot_ms, abs=0.005)


def test_every_point_cites_a_source_and_in_sample_ids_exist():
    # a repository or a web page's address (B25: a benchmark post on johnmusgrave.com)
    assert all("github.com/" in p.source or p.source.startswith("johnmusgrave.com/p/") for p in fidelity.POINTS)
    assert fidelity.IN_SAMPLE <= set(BY_ID)


def test_never_seen_points_are_apart_and_reported_before_the_last_line():
    # 26 points collected after the model was set (InferenceX #828's other gpt-oss-120b H100 sweeps, ROCm/ATOM
    # #409's DeepSeek-R1 TP8): none is a fit or held-out point. Today median 6.9%, 25 of 26 within 30% (N9, the
    # published TP8 c64 1K/8K outlier at 16.0 ms, -55.8%), each run priced with its engine (engine_of: vLLM's
    # in-graph all-reduce, vllm#24532, taken from the simulate-fidelity work, not from these points); before that
    # 9.4% and 24 (N26, DeepSeek-R1 on MI355X at c64, +33% -> +20%); before the other requests' prefills were
    # priced (serving_tpot) 9.1% and 22 (N15-N16, 8K/1K at c64, -34%/-36%, now -25%/-21%): pinned as ceilings.
    ids = {p.id for p in fidelity.NEVER_SEEN}
    assert len(ids) == 26 and not ids & set(BY_ID) and not ids & fidelity.fit_ids()
    never = fidelity.never_seen_errors()
    assert statistics.median(map(abs, never.values())) <= 0.07
    assert sum(abs(e) <= 0.30 for e in never.values()) >= 25
    # N1: gpt-oss-120b TP4 c64 1K/1K on Marlin, 9.89 ms published (-3.8% today; +4.1% with the generic
    # all-reduce: 9.86 ms of decode step + 63 of the other requests' 1K prefills, ~7 ms each, per 1,024 tokens =
    # +0.43 ms)
    n1 = next(p for p in fidelity.NEVER_SEEN if p.id == "N1")
    assert n1.factors == fidelity.MARLIN and fidelity.predict(n1) == pytest.approx(9.89, rel=0.05)
    lines = fidelity.table().splitlines()
    assert lines[-1].startswith("held_out_median_error: ") and lines[-3].startswith("never_seen: 26 points")


def test_marlin_runs_carry_no_upcast_moe_latency():
    # InferenceX's H100 script exports VLLM_MXFP4_USE_MARLIN=1: B15 is priced with --upcast-moe-us 0, so the H100
    # preset's 71 us per MoE layer (fitted on B19b, B22b) does not reach it; without the override B15a would gain
    # 36 MoE layers x 71 us = 2.556 ms
    b15a = BY_ID["B15a"]
    assert b15a.factors == fidelity.MARLIN
    bare = fidelity.replace(b15a, factors=())
    assert fidelity.predict(bare) - fidelity.predict(b15a) == pytest.approx(2.556, rel=1e-3)


def test_serving_tpot_adds_the_other_requests_prefills():
    # a closed loop of 9 requests, 1,000 output tokens each, 100 ms per prefill, 7.0 ms decode step: while one
    # request decodes, the 8 others each start a new request once (one prefill per 1,000 steps per slot; the
    # request's own prefill is its TTFT), so 8 x 100 ms / 1,000 tokens = +0.8 ms per token: 7.8 ms
    assert fidelity.serving_tpot(7.0e-3, 0.100, 9, 1000) == pytest.approx(7.8e-3)
    # concurrency 1: the request's own prefill only, before its first token: the step alone
    assert fidelity.serving_tpot(7.0e-3, 0.100, 1, 1000) == pytest.approx(7.0e-3)
    # twice the output, half the stretch: 7.0 + 8 x 100 / 2,000 = 7.4 ms
    assert fidelity.serving_tpot(7.0e-3, 0.100, 9, 2000) == pytest.approx(7.4e-3)


def test_median_itl_points_are_the_plain_step_and_tpot_points_are_not():
    # B4 and B22 publish a median inter-token latency (the FP8 KV blog's Tables 4-5): a step that also runs a prefill
    # is a rare gap, so the median is the plain decode step; the same point read as a per-request TPOT gains the
    # 7 other requests' 20K prefills per 2,000 tokens (each hundreds of ms on Llama-3.1-8B, H100: 20,000 x 2 x 8e9
    # FLOPs = 320 TFLOP at ~0.5-0.6 PFLOP/s), i.e. more than 1 ms
    b4a = BY_ID["B4a"]
    assert b4a.median_itl and BY_ID["B22a"].median_itl and not BY_ID["B7a"].median_itl
    from dataclasses import replace
    as_tpot = fidelity.predict(replace(b4a, median_itl=False))
    assert as_tpot - fidelity.predict(b4a) > 1.0
    # every point that is not a median ITL is a per-request TPOT from a closed loop; B26's bench_one_batch "Decode.
    # median latency" is a plain step of one fixed batch (no prefill among its steps), priced the same way
    assert {p.id for p in fidelity.POINTS if p.median_itl} == {"B4a", "B4b", "B22a", "B22b", "B26a", "B26b"}


def test_each_point_is_priced_with_the_engine_that_ran_it():
    # vLLM runs (vLLM forks and plugins included) take vLLM's engine facts, SGLang's SGLang's; TensorRT-LLM and
    # anything else kvplan has no adapter for, the neutral model
    assert fidelity.engine_of(BY_ID["B1a"]) == "vllm"            # "vllm v0.19.1"
    assert fidelity.engine_of(BY_ID["B7a"]) == "sglang"          # "sglang v0.5.7"
    n17 = next(p for p in fidelity.NEVER_SEEN if p.id == "N17")
    assert fidelity.engine_of(n17) == "vllm"                     # "vllm + ATOM plugin"
    assert fidelity.engine_of(replace(BY_ID["B1a"], engine="TensorRT-LLM 0.18")) == "neutral"


def test_the_issue_828_sweep_carries_its_launch_and_n9_stands_apart_in_it():
    # tpot20b: the sweep's branch (SemiAnalysisAI/InferenceX@6913cc829, claude/issue-828-20260301-0603) pins the image
    # vllm/vllm-openai:v0.15.1 and launches with --max-num-seqs = the concurrency and max-cudagraph-capture-size 2048:
    # B15a-e (1K/1K, TP8) and N1-N16 (the other tables of the same issue) carry that release
    issue_828 = [p for p in fidelity.POINTS if fidelity.run_of(p.id) == "B15"]
    issue_828 += [p for p in fidelity.NEVER_SEEN if p.source == fidelity.IX828_ALL]
    assert len(issue_828) == 5 + 16
    assert all(p.engine.startswith("vllm v0.15.1") for p in issue_828)
    assert all("v0.15.1" in p.source and "max-num-seqs = concurrency" in p.source for p in issue_828)
    # the sweep's own rows, 1K/1K -> 1K/8K at the same TP and concurrency, as published: TP8 c4 3.72 -> 3.68 (-1.1%),
    # c8 4.05 -> 4.00 (-1.2%), c16 4.83 -> 4.5 (-6.8%), c32 5.82 -> 5.6 (-3.8%), TP4 c64 9.89 -> 9.6 (-2.9%), TP2 c64
    # 15.21 -> 14.6 (-4.0%); TP8 c64 7.36 -> 16.0 (x 2.17, N9): the one row where the 8K decode costs anything
    tpot = {(dict(p.parallel)["tp"], p.batch, p.prompt, p.decode): p.tpot_ms for p in issue_828}
    ratios = {(tp, c): tpot[tp, c, 1024, 8192] / tpot[tp, c, 1024, 1024]
              for tp, c in ((8, 4), (8, 8), (8, 16), (8, 32), (8, 64), (4, 64), (2, 64))}
    assert ratios.pop((8, 64)) == pytest.approx(16.0 / 7.36)
    assert all(0.93 <= r <= 1.0 for r in ratios.values())
    # kvplan prices N9 near B15e (7.38 against 7.40 ms: the 8K decode's longer KV reads offset by the other requests'
    # prefills spread over 8,192 output tokens rather than 1,024); kept as published, outside 30%
    never = fidelity.never_seen_errors()
    assert never["N9"] == pytest.approx(7.38 / 16.0 - 1, abs=0.01)


def test_the_tt_harness_runs_in_lockstep_waves():
    # tpot20c: tenstorrent/tt-inference-server@8e4adb3 (as fc87cf3, before the issue-356 runs) benchmarking/
    # run_benchmarks.py sends --dataset-name cleaned-random --random-input-len ISL --random-output-len OSL --ignore-eos
    # (range ratio 1.0: every request the same length) with num_prompts = 8 x concurrency at 128-token outputs
    # (benchmark_config.get_num_prompts): the 32 requests of a wave end at one step and the next 32 arrive together, so
    # their prefills fall before their first tokens. B27b/d are priced as the cohort's plain steps, no prefill in them;
    # the concurrency-1 rows are one request at a time (nothing to lock)
    assert {p.id for p in fidelity.POINTS if p.lockstep} == {"B27b", "B27d"}
    b27d = BY_ID["B27d"]
    steady = replace(b27d, lockstep=False)
    # the steady reading adds the 31 other requests' prefills per 128 tokens: 31 / 128 x a 128-token prefill at TP16
    # over two nodes (about 21 ms) = about 5 ms more per token
    assert 4.0 < fidelity.predict(steady) - fidelity.predict(b27d) < 6.5


def test_r3_fits_the_cross_node_call_on_the_concurrency_1_rows_alone():
    # Rule R3 (pre-registered in the module): the latency per call of the decode step's cross-node TP all-reduce, by
    # least squares of the relative error over a 1 us grid on B27a and B27c (the fit points that run TP across nodes);
    # the step is linear in it (61 layers x 2 calls), so two prices fix the line. It gives the shipped 139 us
    from kvplan.calc import costs

    fit = [BY_ID["B27a"], BY_ID["B27c"]]
    assert all(p.id in fidelity.fit_ids() for p in fit)
    shipped = costs.CROSS_NODE_DECODE_ALLREDUCE_US
    try:
        costs.CROSS_NODE_DECODE_ALLREDUCE_US = 0.0
        at0 = [fidelity.predict(p) for p in fit]
        costs.CROSS_NODE_DECODE_ALLREDUCE_US = 1000.0
        at1000 = [fidelity.predict(p) for p in fit]
    finally:
        costs.CROSS_NODE_DECODE_ALLREDUCE_US = shipped

    def loss(x):
        return sum((a + (b - a) * x / 1000 - p.tpot_ms) ** 2 / p.tpot_ms ** 2
                   for a, b, p in zip(at0, at1000, fit, strict=True))

    # each call costs 61 x 2 = 122 calls a step: 1,000 us a call adds 122 ms to either step
    assert [b - a for a, b in zip(at0, at1000, strict=True)] == pytest.approx([122.0, 122.0], rel=1e-6)
    assert min(range(1001), key=loss) == shipped == 139.0


def test_never_seen_set_2_stands_apart_and_is_reported():
    # tpot20c: the rest of tenstorrent/tt-inference-server issue 356, written before any prediction, never fitted.
    # T1-T7: vLLM, DeepSeek-R1-0528-AWQ at TP8 on one 8 x H100 node (16.1-16.6 ms as published), 4-bit weights on
    # vLLM's Marlin MoE (no upcast_moe_us); T8-T13: the SGLang two-node table of B27c (23.2-24.0 ms)
    t = {p.id: p for p in fidelity.NEVER_SEEN_TT356}
    assert list(t) == [f"T{i}" for i in range(1, 14)]
    assert not set(t) & ({p.id for p in fidelity.POINTS} | {p.id for p in fidelity.NEVER_SEEN})
    awq = [t[f"T{i}"] for i in range(1, 8)]
    assert all(p.weight_dtype == "int4" and dict(p.factors) == {"upcast_moe_us": 0.0} for p in awq)
    assert all(dict(p.parallel) == {"tp": 8} and p.batch == 1 for p in awq)
    assert [p.tpot_ms for p in awq] == [16.1, 16.1, 16.1, 16.3, 16.4, 16.4, 16.6]
    two_nodes = [t[f"T{i}"] for i in range(8, 14)]
    assert all(dict(p.parallel) == {"tp": 16, "nodes": 2} for p in two_nodes)
    errors = fidelity.never_seen_tt356_errors()
    # the two-node rows sit beside the fit point B27c (23.1 ms at 128/128): today +0..+3%
    assert max(abs(errors[p.id]) for p in two_nodes) <= 0.05
    # the one-node AWQ rows: kvplan is 45-46% under (8.9 ms), the same cluster's single-node step as slow as its
    # two-node one is above kvplan's; pinned as today's ceiling, reported (docs/decode-measurements.md, tpot20c)
    assert all(-0.50 <= errors[p.id] <= -0.40 for p in awq)
    text = fidelity.table()
    assert "never_seen_2: one node, vLLM AWQ TP8: 7 points" in text


def test_engine_runs_miss_in_the_decode_step_not_the_closed_loop():
    # tpot20e: dstack's raw data (github.com/dstackai/benchmarks @7f37e66 Deepseek-R1/raw_data/online_results.csv,
    # h200 rows at 3,200/800) publish each row's median ITL beside its mean TPOT. Copied by hand (ms, 2 decimals):
    itl = fidelity.DSTACK_MEDIAN_ITL
    assert itl["E1"] == (25.69, 31.28, 49.74, 51.96, 63.24, 65.21)     # vLLM 0.7.4.dev181, c4..c128
    assert itl["E2"] == (42.85, 43.43, 50.51, 59.34, 70.33, 85.89)     # SGLang 0.4.3.post2, DP attention
    assert itl["E3"] == (54.88, 55.79, 56.06, 60.57, 68.98, 80.10)     # TensorRT-LLM 0.17 PyTorch backend
    assert fidelity.engine_run_itl_ms("E2c") == 50.51 and fidelity.engine_run_itl_ms("E3f") == 80.10
    # The source's own arithmetic: at concurrency 4 and 8 the mean TPOT is within 0.8 ms of the median ITL on every
    # engine (25.73 - 25.69, 31.28 - 31.28, 43.58 - 42.85, 43.82 - 43.43, 55.12 - 54.88, 55.92 - 55.79), so the
    # published TPOT there is the step, and SGLang's (1 request per DP rank at both) and TensorRT-LLM's (54.88 -> 56.06
    # ms from concurrency 4 to 16) are nearly flat in the batch: a cost per step
    by_id = {p.id: p for p in fidelity.ENGINE_RUNS}
    for run in ("E1", "E2", "E3"):
        for x in "ab":
            assert 0 <= by_id[run + x].tpot_ms - fidelity.engine_run_itl_ms(run + x) <= 0.8
    # kvplan's plain step (no prefill of another request in it) against that median ITL: every row 35% or more under;
    # pinned as today's ceiling (docs/decode-measurements.md, tpot20e), reported apart like the TPOT errors
    steps = fidelity.engine_run_step_errors()
    assert set(steps) == set(by_id)
    assert all(-0.85 <= e <= -0.35 for e in steps.values())
    # at concurrency 128 the closed loop adds to kvplan's TPOT (11.1 ms on vLLM) what the step comparison leaves out
    assert steps["E1f"] < fidelity.engine_run_errors()["E1f"] - 0.05
    assert "kvplan's plain step against the published median ITL" in fidelity.table()
