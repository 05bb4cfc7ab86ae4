"""``costs.StepModel.prefill_seconds`` made structural (issue 20/21, prefill20c): the compute dtype follows the
scenario's --weight-dtype (int4 / W4A16 at the BF16 peak), MLA's prefill attention at the BF16 peak, and (part b)
the chunk's own communication priced outside prefill_mfu. Every expectation is worked out by hand in its comment
from the presets' figures (H100 SXM: 989 BF16 / 1,979 FP8 TFLOP/s dense, prefill_mfu as the preset has it)."""

from __future__ import annotations

import pytest

from kvplan.calc import costs
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.scenario import Scenario


def _step(model="deepseek-r1", hw="h100-sxm", **kw):
    s = Scenario(model=load_model(model), hardware=load_hardware(hw), prompt_tokens=4096, decode_tokens=128, **kw)
    return costs.step_model(s, costs.step_factors(s.hardware))


def _pm(hw="h100-sxm"):
    return load_hardware(hw).efficiency.prefill_mfu.value


def test_compute_dtype_follows_the_weight_dtype_override():
    # DeepSeek-R1's preset is FP8: GEMMs at the FP8 peak, 1,979e12 x prefill_mfu
    assert _step(tp=8).prefill_flops_s == pytest.approx(1979e12 * _pm())
    # --weight-dtype int4 (AWQ, W4A16): the sized model keeps fp8, but the kernels multiply at the BF16 peak
    assert _step(tp=8, weight_dtype="int4").prefill_flops_s == pytest.approx(989e12 * _pm())
    # and the decode step's GEMMs too: 989e12 x the H100's mfu 0.70
    assert _step(tp=8, weight_dtype="int4").flops == pytest.approx(989e12 * 0.70)
    # a BF16 model with --weight-dtype fp8 (W8A8 FP8 on Hopper) runs at the FP8 peak
    assert _step("llama-3.1-8b", tp=1, weight_dtype="fp8").prefill_flops_s == pytest.approx(1979e12 * _pm())
    assert _step("llama-3.1-8b", tp=1).prefill_flops_s == pytest.approx(989e12 * _pm())
    # a 4-bit float override keeps the preset model's rule (FP8 for DeepSeek)
    assert _step(tp=8, weight_dtype="nvfp4").prefill_flops_s == pytest.approx(1979e12 * _pm())


def test_mla_attention_is_priced_at_the_bf16_peak():
    # DeepSeek-R1, 4,096 tokens, TP8 on H100. MLA prefill attention (MHA mode): 61 layers x 128 heads x
    # (2 x 192 QK + 2 x 128 PV) = 4,997,120 FLOPs per pair x 4,096^2 / 2 = 8,388,608 pairs = 41,918,880,808,960 FLOPs
    # At prefill_flops_s (FP8) it would weigh 41.92e12; at the BF16 peak it weighs 1,979 / 989 times that.
    step = _step(tp=8)
    assert step.prefill_mla_flops_s == pytest.approx(989e12 * _pm())
    assert step.prefill_attention(4096) == pytest.approx(41_918_880_808_960 * 1979 / 989, rel=1e-9)
    # a model without MLA: its attention FLOPs as flops.attention_flops counts them (Llama-3.1-8B: 32 layers x
    # 32 heads x (2 x 128 + 2 x 128) = 524,288 per pair x 4,096^2 / 2 = 4,398,046,511,104)
    llama = _step("llama-3.1-8b", tp=1)
    assert llama.prefill_mla_flops_s is None
    assert llama.prefill_attention(4096) == pytest.approx(4_398_046_511_104, rel=1e-9)
