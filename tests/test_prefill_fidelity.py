"""benchmarks/prefill_fidelity.py and its data, tests/data/prefill_points.toml (issue 20/21, prefill20): the data
file's sources, settings and split, and the harness's prediction on two points worked out by hand."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "prefill_fidelity", Path(__file__).resolve().parent.parent / "benchmarks" / "prefill_fidelity.py")
assert spec and spec.loader
pf = importlib.util.module_from_spec(spec)
sys.modules["prefill_fidelity"] = pf
spec.loader.exec_module(pf)

POINTS = pf.load_points()
BY_ID = {p.id: p for p in POINTS}


def test_every_point_is_cited_with_its_settings():
    assert len(POINTS) >= 9
    for p in POINTS:
        assert p.kind in ("ttft", "throughput"), p.id
        assert re.search(r"(github\.com/|https://)", p.source), p.id          # a URL or repo reference
        assert p.prompt > 0 and p.measured > 0, p.id
        assert p.engine in ("vllm", "sglang", "neutral"), p.id
        assert "tp" in p.parallel, p.id
        assert p.assumed, f"{p.id}: say what the source does not state"
        pf.scenario(p)                                                          # the settings make a scenario


def test_split_is_the_order_found():
    # fixed before any prediction: 1st, 3rd, ... fit; 2nd, 4th, ... held out
    assert [p.split for p in POINTS] == ["fit" if i % 2 == 0 else "held_out" for i in range(len(POINTS))]


def test_ttft_on_one_a100_by_hand():
    # P5: Qwen3-30B-A3B, bf16, one A100 80GB, vLLM, a 2,048-token prompt (one chunk: vLLM's 2,048 batched tokens).
    # Matmul parameters per token (config.json): 48 layers x (q 2048x4096 + k,v 2 x 2048x512 + o 4096x2048
    #   + 8 experts x 3 x 2048x768 + router 2048x128) + LM head 2048x151,936
    #   = 48 x 56,885,248 + 311,164,928 = 3,041,656,832
    # linear FLOPs = 2 x 3,041,656,832 x 2,048 = 12,458,626,383,872
    # attention (causal, S^2/2 pairs, FlashAttention's count): 48 layers x 32 heads x (2 x 128 QK + 2 x 128 PV)
    #   = 786,432 FLOPs per pair x 2,048^2 / 2 = 2,097,152 pairs = 1,649,267,441,664
    # compute = 14,107,893,825,536 / (312e12 bf16 x 0.74 prefill_mfu = 230.88e12) = 61.105 ms; the weights
    #   (30.5B x 2 B = 61 GB over 2.039 TB/s x efficiency, about 38 ms) are below it, so the chunk is compute-bound.
    # TTFT = 61.105 + the step overhead (A100 preset 5.73 ms) + vLLM's frontend (1.0 ms) = 67.835 ms; TP1: no comm
    p = BY_ID["P5"]
    assert pf.predict(p) == pytest.approx(61.105 + 5.73 + 1.0, rel=2e-3)
    assert pf.error(p, pf.predict(p)) == pytest.approx(67.835 / 81.0 - 1, abs=2e-3)       # -16.3%: kvplan faster


def test_saturated_ep_prefill_per_gpu_by_hand():
    # P1: DeepSeek-R1 (V3 architecture), fp8, 32 H100 as DP32 attention + EP32, a 4,096-token prompt per rank: under
    # attention DP every rank prefills its own prompt, whose routed experts spread over EP / DP = 1 GPU's worth.
    # Matmul parameters per token 36,624,596,992 (preset, from config.json):
    # linear = 2 x 36,624,596,992 x 4,096 = 300,028,697,358,336
    # MLA prefill attention (SGLang's MHA form): 61 layers x 128 heads x (2 x 192 QK + 2 x 128 PV) = 4,997,120 per
    #   pair x 4,096^2 / 2 = 8,388,608 pairs = 41,918,880,808,960, run in BF16 (costs.MLA_BF16_SOURCE)
    # compute = 300.0287e12 / (1,979e12 fp8 x 0.65 = 1,286.35e12) = 233.241 ms
    #   + 41.9189e12 / (989e12 bf16 x 0.65 = 642.85e12) = 65.208 ms, + 2.58 ms step overhead
    # + DeepEP internode dispatch / combine (test_prefill_price: 58 MoE layers x (52 us + 4,096 x 1.36963 us))
    #   = 328.397 ms
    # tokens/s per GPU = 4,096 / 0.629426 = 6,507.5 against the 6,288 LMSYS measured (50,302 per node / 8)
    p = BY_ID["P1"]
    pm = pf.scenario(p).hardware.efficiency.prefill_mfu.value
    compute = 300_028_697_358_336 / (1979e12 * pm) + 41_918_880_808_960 / (989e12 * pm)
    assert pf.predict(p) == pytest.approx(4096 / (compute + 0.00258 + 0.328397), rel=2e-3)
    assert pf.error(p, pf.predict(p)) == pytest.approx(6287.75 * (compute + 0.00258 + 0.328397) / 4096 - 1, abs=2e-3)
    assert pf.implied_utilisation(p) == pytest.approx(6287.75 * 341.948e12 / 4096 / 1979e12, rel=2e-3)  # 0.265


def test_impossible_rows_are_flagged():
    # P6: 4,096 tokens in 75.2 ms on one A100 needs more than its 312 TFLOP/s bf16 peak: kvplan's FLOPs
    # 2 x 3,041,656,832 x 4,096 + 786,432 x 4,096^2 / 2 = 31.514e12, / 0.0752 s = 419 TFLOP/s = 1.34 x peak
    assert pf.implied_utilisation(BY_ID["P6"]) == pytest.approx(1.343, abs=0.01)
    assert pf.implied_utilisation(BY_ID["P5"]) < 1


def test_last_line(capsys):
    pf.main()
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"held_out_median_error: \d+\.\d%", last)


def test_rates_are_per_gpu_of_a_tp_rank():
    # P1's deployment with TP2 attention ranks (DP16 x TP2, EP32): each rank of 2 GPUs prefills its own 4,096-token
    # prompt, its routed experts over EP / DP = 2 GPUs, so each GPU does half of P1's per-rank FLOPs:
    # compute / 2 + 2.58 ms overhead + communication: the TP2 all-reduces (2 per layer of 2 x 1/2 x 7,168 x 2 B
    # at the large-message rate 450 GB/s x 0.82, latency 9.3 us each): 61 x (18.6 us + 4,096 x 0.077702 us)
    # = 20.549 ms, and DeepEP's dispatch / combine, each TP rank sending half its tokens: 58 x (52 us + 4,096 x
    # 1.36963 / 2 us) = 165.707 ms
    from dataclasses import replace
    p = replace(BY_ID["P1"], parallel={"tp": 2, "dp": 16, "ep": 32, "nodes": 4})
    pm = pf.scenario(p).hardware.efficiency.prefill_mfu.value
    compute = (300_028_697_358_336 / (1979e12 * pm) + 41_918_880_808_960 / (989e12 * pm)) / 2
    assert pf.predict(p) == pytest.approx(4096 / (compute + 0.00258 + 0.020549 + 0.165707) / 2, rel=2e-3)
    # P3: 16 GPUs (TP16) take 199.7 ms for 4,096 tokens: 341.948e12 / (0.1997 x 16 x 1,979e12) = 0.0541 of peak
    assert pf.implied_utilisation(BY_ID["P3"]) == pytest.approx(0.0541, abs=5e-4)
