"""h200pf20 (issue 20): the H200's prefill efficiency against published H200 prefill points
(tests/data/prefill_points.toml P16-P22, benchmarks/prefill_fidelity.py). The points land; the H200 preset keeps the
generic prefill_mfu (0.45) because the fit half cannot inform a fit and the H100's 0.70 makes the held-out H200
points worse."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from conftest import load_source

ROOT = Path(__file__).resolve().parent.parent
pf = load_source("prefill_fidelity", ROOT / "benchmarks" / "prefill_fidelity.py")
BY_ID = {p.id: p for p in pf.load_points()}
H200 = [p for p in pf.load_points() if p.hardware == "h200"]


def test_h200_points_and_their_split_were_fixed_before_any_prediction():
    # appended after P15 (fit), the file's alternation continued: P16 held out, P17 fit, ...
    assert [(p.id, p.split) for p in H200] == [("P16", "held_out"), ("P17", "fit"), ("P18", "held_out"),
                                                ("P19", "fit"), ("P20", "held_out"), ("P21", "fit"),
                                                ("P22", "held_out")]
    assert all("github.com/" in p.source for p in H200)
    assert BY_ID["P16"].prompts == 16 and all(p.prompts == 1 for p in H200[1:])


def test_a_pass_of_several_prompts_by_hand():
    # P16: SGLang bench_one_batch, DeepSeek-V3.1 (fp8), TP8 on H200, 16 prompts of 512 tokens in one pass.
    # Per GPU, linear: 2 x 36,624,596,992 matmul parameters (the V3 config, tests/test_prefill_fidelity.py) x 8,192
    #   tokens / 8 = 75.0072e12 FLOPs at the fp8 peak 1,979e12;
    # attention (MLA, BF16): 16 prompts x 4,997,120 FLOPs per causal pair x 512^2 / 2 = 131,072 pairs / 8
    #   = 1.30996e12 FLOPs at the bf16 peak 989e12 (one 8,192-token prompt would count 8,192^2 / 2 pairs: 16x more).
    # Compute at prefill_mfu m: (75.0072e12 / 1,979e12 + 1.30996e12 / 989e12) / m = 39.2261 ms / m, above the
    # weight read (83.9 GB per GPU / (4.8 TB/s x 0.84) = 20.8 ms) at 0.45 and 0.90 alike, so
    # T(0.45) - T(0.90) = 39.2261 / 0.90 = 43.585 ms (the communication and overhead cancel).
    p = BY_ID["P16"]
    t = {m: p.prompt * p.prompts / (pf.predict(p, m) * p.parallel["tp"]) for m in (0.45, 0.90)}
    assert t[0.45] - t[0.90] == pytest.approx(39.2261e-3 / 0.90, rel=2e-3)
    # the measured figure is per GPU: 28,418.14 tokens/s for the node / 8, i.e. the PR's pass of 0.28827 s
    assert p.measured == pytest.approx(28418.14 / 8, abs=0.01)
    assert pf.seconds(p, p.measured) == pytest.approx(0.28827, rel=1e-4)
    # kvplan prices the pass faster than SGLang ran it, at the generic 0.45 already: the pass takes
    # 8,192 / (3,552.27 x 8) = 288.3 ms measured
    assert pf.error(p, pf.predict(p)) < -0.3


def test_points_kvplan_cannot_express_are_named_and_left_out():
    # P18 / P21: TensorRT-LLM's TP8 x EP4 — kvplan places a quarter of DeepSeek-R1's experts on each GPU, which does
    # not fit 140.4 GiB; the rows keep their split and leave every median and the fit
    assert not pf.expressible(BY_ID["P18"]) and not pf.expressible(BY_ID["P21"])
    assert pf.expressible(BY_ID["P17"])
    ids = [p.id for p, _, _ in pf.rows()]
    assert "P18" not in ids and "P21" not in ids and "P17" in ids


def test_the_h200_fit_half_cannot_inform_a_fit():
    # P17 / P19: DeepSeek-R1 fp8, 1,600 tokens, TP8 on H200. Per GPU the linear FLOPs 2 x 36,624,596,992 x 1,600 / 8
    # = 14.6498e12 at 0.45 x 1,979e12 = 16.450 ms, the MLA attention 4,997,120 x 1,600^2 / 2 / 8 = 0.79954e12 at
    # 0.45 x 989e12 = 1.797 ms: 18.25 ms, below the weight read 20.80 ms — the chunk is priced by its weights at any
    # prefill_mfu, so its priced compute time is 0 and the procedure (step 2) skips it; P21 is not expressible:
    # the H200 has no fit point and no fit
    for i in ("P17", "P19"):
        assert pf.compute_ratio(BY_ID[i]) is None
    assert "h200" not in pf.fit_prefill_mfu()


def test_the_h100_figure_makes_the_held_out_h200_points_worse():
    # the same-die proxy (the H100's 0.70) against the held-out H200 points kvplan can express (P16, P20, P22): all
    # three are slower than kvplan already at 0.45, so a faster prefill moves every one further away
    held = [p for p in H200 if p.split == "held_out" and pf.expressible(p)]
    assert [p.id for p in held] == ["P16", "P20", "P22"]
    at = {m: [pf.error(p, pf.predict(p, m)) for p in held] for m in (0.45, 0.70)}
    assert all(e < 0 for e in at[0.45])
    assert all(b < a for a, b in zip(at[0.45], at[0.70], strict=True))
    assert statistics.median(abs(e) for e in at[0.70]) > statistics.median(abs(e) for e in at[0.45])


def test_h200_preset_keeps_the_generic_prefill_mfu_and_says_why():
    from kvplan.calc import costs
    from kvplan.inputs.presets import load_hardware
    hw = load_hardware("h200")
    assert hw.efficiency.prefill_mfu is None
    assert costs.step_factors(hw).value("prefill_mfu") == costs.GENERIC_FACTORS["prefill_mfu"][0] == 0.45
    assert any("h200pf20" in n and "prefill_mfu" in n for n in hw.notes)
