"""The engines' decode-kernel paths (issue 20 section 2): vLLM on ROCm gfx942 decodes an MLA model on Triton kernels
unless VLLM_ROCM_USE_AITER=1 (vllm-project/vllm PR #12662; vllm/envs.py leaves AITER off), a path the one published
step of it (sgl-project/sglang PR #3237: DeepSeek-V3 TP8, batch 4, 2,048 + 256 tokens, 38.50 ms a decode step) puts
far above kvplan's roofline. kvplan.engines.vllm.ROCM_TRITON_MLA_US (448 us per MLA layer, fitted on that point alone:
benchmarks/tpot_fidelity.py B26a) enters the per-layer overhead; SGLang's ROCm images run AITER (no rule)."""

from __future__ import annotations

import pytest

from kvplan.calc import costs
from kvplan.scenario import Scenario


def scenario(engine: str, hardware: str = "mi300x", model: str = "deepseek-r1", **extra) -> Scenario:
    return Scenario(model=model, hardware=hardware, engine=engine, tp=8, prompt_tokens=2048, decode_tokens=256,
                    **extra)


def per_layer(s: Scenario, **overrides) -> float:
    return costs.step_model(s, costs.step_factors(s.hardware, **overrides)).factors.value("overhead_us_per_layer")


def test_vllm_on_mi300x_adds_the_triton_path_per_mla_layer():
    # the generic 15 us per layer (the mi300x preset has none) + 448 us x 61 MLA layers / 61 layers = 463 us
    assert per_layer(scenario("vllm")) == pytest.approx(15 + 448)


def test_the_rule_is_per_platform_model_and_engine():
    # SGLang's ROCm images run AITER: no rule; Hopper and MI355X (AITER-based ATOM runs): none; a dense GQA model: none
    assert per_layer(scenario("sglang")) == pytest.approx(15)
    assert per_layer(scenario("vllm", hardware="h200")) == pytest.approx(15)
    assert per_layer(scenario("vllm", hardware="mi355x")) == pytest.approx(15)
    assert per_layer(scenario("vllm", model="llama-3.1-8b")) == pytest.approx(15)
    dense = scenario("vllm", model="llama-3.1-8b")
    assert dense.engine_adapter.decode_layer_latency(dense) is None
    assert per_layer(scenario("vllm", hardware="mi325x")) == pytest.approx(15 + 448)


def test_every_vllm_release_keeps_the_default_path():
    # VLLM_ROCM_USE_AITER defaults off in every release kvplan models (0.7.3 .. newest)
    assert per_layer(scenario("vllm==0.7.3")) == pytest.approx(15 + 448)


def test_a_given_overhead_is_kept():
    # --overhead-us (or a calibration) already says what the user's launch costs per layer
    assert per_layer(scenario("vllm"), overhead_us_per_layer=20.0) == pytest.approx(20)


def test_tpot_differs_by_engine_by_the_rule_alone():
    # the same deployment, vLLM against SGLang: every other step term is the same on mi300x (its preset gives the
    # all-reduce; SGLang fuses the shared expert on Hopper only), so the plain steps differ by 61 x 448 us = 27.33 ms
    steps = {}
    for engine in ("vllm", "sglang"):
        s = scenario(engine)
        model = costs.step_model(s)
        nbytes, nflops = model.steady_cache(2048, 256)
        steps[engine] = model.step(4, 4 * nbytes, 4 * nflops)["total"]
    assert steps["vllm"] - steps["sglang"] == pytest.approx(61 * 448e-6, rel=1e-9)


def test_the_fit_point_and_its_held_out_sibling():
    # B26a (fit): 38.50 ms published; B26b (held out, the fused MLA kernel): 35.81 ms, within 8% of the same price
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import tpot_fidelity as fidelity

    points = {p.id: p for p in fidelity.POINTS}
    assert fidelity.predict(points["B26a"]) == pytest.approx(38.50, rel=0.01)
    assert fidelity.predict(points["B26b"]) == pytest.approx(35.81, rel=0.08)
    assert "B26a" in fidelity.fit_ids() and "B26b" not in fidelity.fit_ids()


def test_tpot_explain_names_the_rule():
    from kvplan.calc.tpot import TpotOptions, plan_tpot

    plan = plan_tpot(scenario("vllm"), TpotOptions(batch=4))
    text = " ".join(str(n) for n in plan.notes)
    assert "12662" in text and "3237" in text and "VLLM_ROCM_USE_AITER" in text
