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


def test_tp_all_reduce_of_a_prefill_chunk_at_the_large_message_rate():
    # DeepSeek-R1 AWQ (int4) on 8 H100 at TP8 under vLLM: 2 all-reduces per layer, each moving 2 x (8 - 1) / 8 x
    # 7,168 x 2 B = 25,088 B per token. A 4,096-token chunk's message is 58.7 MB: NCCL's large-message rate,
    # 450 GB/s x the H100's link efficiency 0.82 = 369 GB/s -> 0.067989 us per token per all-reduce, 0.135978 us per
    # token per layer; latency 2 x 6.45 us per layer (vLLM's all-reduce latency). The decode step keeps its own
    # price (450 GB/s x 0.44 for decode-sized messages).
    step = _step(tp=8, weight_dtype="int4", engine="vllm")
    per_token = 2 * 2 * 7 / 8 * 7168 * 2 / (450e9 * 0.82)
    assert step.prefill_tp_per_layer == pytest.approx((2 * 6.45e-6, per_token))
    assert step.comm_per_layer == pytest.approx((2 * 6.45e-6, 2 * 2 * 7 / 8 * 7168 * 2 / (450e9 * 0.44)))
    # a 4,096-token chunk: 61 layers x (12.9 us + 4,096 x 0.135978 us) = 61 x 569.85 us = 34.761 ms; no EP
    # all-to-all (EP inside TP), no PP
    assert step.prefill_ep_per_moe_layer == (0.0, 0.0)
    assert step.prefill_comm(4096) == pytest.approx(61 * (12.9e-6 + 4096 * per_token), rel=1e-9)
    assert step.prefill_comm(4096) == pytest.approx(0.034761, rel=1e-4)
    assert step.prefill_comm(0) == 0.0
    # and prefill_seconds adds it to the compute (no overlap): one chunk of 4,096
    no_comm = step.prefill_seconds(4096) - step.prefill_comm(4096)
    assert no_comm > 0 and step.prefill_seconds(4096) == pytest.approx(no_comm + 0.034761, abs=5e-6)


def test_ep_across_nodes_on_deepep_normal_kernels():
    # P1 of tests/data/prefill_points.toml: DeepSeek-R1 on 32 H100 (4 nodes), DP32 attention + EP32, SGLang.
    # 8 of 256 experts (64 per node) touch 4 x (1 - (192 x 191 x ... x 185) / (256 x 255 x ... x 249))
    #   = 4 x (1 - 0.096446) = 3.614214 nodes, own node included (DeepEP's logical count);
    # per token per MoE layer: 3.614214 x 7,168 x (1.03125 B FP8 + scale / (58/50 of the 50 GB/s NIC)
    #   + 2 B BF16 / (57/50 of it)) = 1.36963 us; latency 2 x 26 us (the H100 preset's link_latency_us)
    step = _step(tp=1, dp=32, ep=32, nodes=4, engine="sglang")
    assert costs.touched_groups(4, 256, 8) == pytest.approx(3.614214, rel=1e-6)
    lat, per = step.prefill_ep_per_moe_layer
    assert lat == pytest.approx(52e-6) and per == pytest.approx(1.36963e-6, rel=1e-5)
    # a 4,096-token prompt per rank (pd's saturated prefill role: experts over EP / DP = 1 GPU): 58 MoE layers x
    # (52 us + 4,096 x 1.36963 us) = 0.328397 s of communication, + compute 300.0287e12 / (1,979e12 x pm) +
    # 41.9189e12 MLA attention / (989e12 x pm) + 2.583 ms overhead
    pm = _pm()
    compute = 300_028_697_358_336 / (1979e12 * pm) + 41_918_880_808_960 / (989e12 * pm)
    assert step.prefill_seconds(4096, 0, None, 1) == pytest.approx(compute + 0.328397 + 0.002583, rel=1e-5)


def test_ep_inside_the_nvlink_domain_uses_the_scale_up_link():
    # GB200 NVL72: EP8 over two 4-GPU trays stays on NVLink (scale_up.domain_gpus = 72). 8 of 256 experts over 8
    # GPUs of 32: 8 x (1 - (224 x ... x 217) / (256 x ... x 249)) GPUs touched, each sent FP8 at 153/160 and combined
    # BF16 at 158/160 of 900 GB/s x the GB200's link efficiency
    step = _step(hw="gb200", tp=1, dp=8, ep=8, nodes=2, engine="sglang")
    miss = 1.0
    for i in range(8):
        miss *= (224 - i) / (256 - i)
    eff = step.factors.value("link")
    per = 8 * (1 - miss) * 7168 * (1.03125 / (153 / 160) + 2 / (158 / 160)) / (900e9 * eff)
    assert step.prefill_ep_per_moe_layer[1] == pytest.approx(per, rel=1e-9)
    assert per > 0
    # on H100 (8-GPU nodes, no wider domain) the same EP8 is intranode too, at 450 GB/s x 0.82
    h100 = _step(tp=1, dp=8, ep=8, engine="sglang")
    assert h100.prefill_ep_per_moe_layer[1] == pytest.approx(per * 900e9 * eff / (450e9 * 0.82), rel=1e-9)
    # EP16 on H100 crosses nodes: 2 nodes, at 43/50 of the NIC
    two = _step(tp=1, dp=16, ep=16, nodes=2, engine="sglang")
    m2 = 1.0
    for i in range(8):
        m2 *= (128 - i) / (256 - i)
    assert two.prefill_ep_per_moe_layer[1] == pytest.approx(
        2 * (1 - m2) * 7168 * (1.03125 + 2) / (43 / 50) / 50e9, rel=1e-9)


def test_a_mixed_pass_of_chunks_alone_is_the_prefill_price():
    # mixed_step's docstring: a pass of chunks alone (no decode token) is prefill_seconds' price of those chunks as
    # one step, communication included: Llama-3.1-70B at TP4 on H100, one 2,048-token chunk. Its all-reduces:
    # 80 layers x (2 x 9.3 us + 2,048 x 2 x 2 x 3/4 x 8,192 x 2 B / (450 GB/s x 0.82)) = 80 x (18.6 + 272.8) us
    step = _step("llama-3.1-70b", tp=4)
    per_token = 2 * 2 * 3 / 4 * 8192 * 2 / (450e9 * 0.82)
    assert step.prefill_comm(2048) == pytest.approx(80 * (2 * 9.3e-6 + 2048 * per_token), rel=1e-9)
    assert step.mixed_step(0, 0.0, 0.0, [(0, 2048)]) == pytest.approx(step.prefill_seconds(2048, 0, 2048), rel=1e-12)
    # and with decode tokens in the pass, the chunk's communication is still paid (on top of the decode tokens')
    with_chunk = step.mixed_step(8, 8 * 1e6, 8 * 1e9, [(0, 2048)])
    assert with_chunk > step.prefill_seconds(2048, 0, 2048)


def test_a_mixed_steps_chunk_rides_the_steps_one_dispatch_at_its_backend_rate():
    # pd300v: vLLM runs one all-to-all backend per process (--all2all-backend, default allgather_reducescatter) and a
    # step that mixes a prefill chunk into the decode batch dispatches and combines once per MoE layer, every token
    # together (costs.MIXED_STEP_A2A_SOURCE): all_gatherv (grouped NCCL broadcasts, one per root) and reduce_scatterv.
    # DeepSeek-R1 on 8 x H200, TP1 DP8 EP8, vLLM: 58 MoE layers; the decode step's EP price per MoE layer is 2 x 30 us
    # latency (h200 link_latency_us) and, per token, dispatch + combine of 8 experts x 7,168 x 2 B x 7/8 off-GPU
    # over NVLink 450 GB/s x 0.82 (h200 link): 2 x 8 x 7168 x 2 x 0.875 / 369e9 = 0.5439 us. A chunk token in the
    # mixed step is broadcast once and its output reduced once: 2 x 7168 x 2 / 369e9 = 0.07771 us.
    from dataclasses import replace

    s = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"), prompt_tokens=300,
                 decode_tokens=300, kv_dtype_request="fp8", engine="vllm").with_(tp=1, dp=8, ep=8)
    sm = replace(costs.step_model(s, costs.step_factors(s.hardware)), lockstep_ranks=1)   # this rank's own pass
    link = 450e9 * 0.82
    per = 2 * 8 * 7168 * 2 * 0.875 / link
    assert sm.ep_per_moe_layer == pytest.approx((60e-6, per), rel=1e-9)
    chunk_per = 2 * 7168 * 2 / link
    assert sm.mixed_ep_per_token == pytest.approx(chunk_per, rel=1e-9)
    assert chunk_per == pytest.approx(0.07771e-6, rel=1e-3)
    no_ep = replace(sm, ep_per_moe_layer=(0.0, 0.0), prefill_ep_per_moe_layer=(0.0, 0.0))
    # a 300-token chunk alone: its EP share is 58 x (60 us + 300 x 0.07771 us) = 4.832 ms, neither DeepEP's
    # normal-kernel rate a prefill-only step pays (prefill_ep_per_moe_layer, 0.32 us a token here: 9.03 ms) nor the
    # decode price's 0.54 us (12.94 ms)
    chunk = [(0, 300)]
    ep_share = sm.mixed_parts(0, 0.0, 0.0, chunk)[0] - no_ep.mixed_parts(0, 0.0, 0.0, chunk)[0]
    assert ep_share == pytest.approx(58 * (60e-6 + 300 * chunk_per), rel=1e-9)
    assert ep_share == pytest.approx(4.832e-3, rel=1e-3)
    # with 64 decode tokens in the same step the dispatch latency is paid once: dropping it from both the decode
    # and the prefill price lowers the pass by exactly 58 x 60 us = 3.48 ms, not twice that
    no_lat = replace(sm, ep_per_moe_layer=(0.0, per), prefill_ep_per_moe_layer=(0.0, sm.prefill_ep_per_moe_layer[1]))
    mb, mf = sm.steady_cache(300, 300)
    with_lat = sm.mixed_parts(64, 64 * mb, 64 * mf, chunk)
    without = no_lat.mixed_parts(64, 64 * mb, 64 * mf, chunk)
    assert with_lat[0] - without[0] == pytest.approx(58 * 60e-6, rel=1e-9)
    # a prefill-only step (prefill_seconds) keeps DeepEP's normal-kernel rate; a layout without an all-to-all
    # (EP inside TP) has no mixed rate either
    assert sm.prefill_comm(300) == pytest.approx(58 * (60e-6 + 300 * sm.prefill_ep_per_moe_layer[1]), rel=1e-9)
    tp8 = costs.step_model(s.with_(tp=8, dp=1, ep=None))
    assert tp8.mixed_ep_per_token == 0.0
