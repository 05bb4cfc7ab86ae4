"""Issue 20 §2 (xnode20): a decode step's TP all-reduce over a TP group that spans nodes runs on NCCL, not on the
engines' in-node custom all-reduce (costs.CROSS_NODE_DECODE_ALLREDUCE_SOURCE). Every expectation is worked out by
hand in its comment from published figures: NCCL's small all-reduce over two 8-GPU Hopper nodes with one 400 Gb/s
NIC per GPU, 46.3-47.8 us at 4-512 B (github.com/NVIDIA/nccl/issues/1244) outside an engine; inside one, 139 us per
call (rule R3 of benchmarks/tpot_fidelity.py: fitted on the concurrency-1 decode of DeepSeek-R1-0528 at TP16 over two
H100 nodes, github.com/tenstorrent/tt-inference-server/issues/356, B27a and B27c; tests/test_tpot_fidelity.py refits
it); the H100 SXM preset's NVLink 450 GB/s, 8 GPUs per node, one 50 GB/s NIC per GPU, efficiency.link 0.82;
DeepSeek-R1's 61 layers and hidden size 7,168 (its config.json)."""

from __future__ import annotations

import pytest

from kvplan.calc import costs
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.render.output import note_text
from kvplan.scenario import Scenario


def _step(model="deepseek-r1", hw="h100-sxm", **kw):
    s = Scenario(model=load_model(model), hardware=load_hardware(hw), prompt_tokens=128, decode_tokens=128, **kw)
    return costs.step_model(s, costs.step_factors(s.hardware))


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_tp16_over_two_h100_nodes_prices_the_decode_all_reduce_on_nccl(engine):
    # B27 of benchmarks/tpot_fidelity.py: DeepSeek-R1 at TP16 over two H100 nodes. Per layer 2 all-reduces, each
    # 139 us of NCCL latency (not SGLang's generic 9.3 us nor vLLM's 6.45 us custom all-reduce), so 278 us; bytes:
    # the ring moves 2 x (16 - 1) / 16 x 7,168 x 2 B = 26,880 B per token per all-reduce, 53,760 B per layer, at
    # min(450, 8 x 50 = 400) GB/s x 0.82 = 328 GB/s -> 0.163902 us per token per layer.
    step = _step(tp=16, nodes=2, engine=engine)
    lat, per = step.comm_per_layer
    assert lat == pytest.approx(278e-6, rel=1e-12)
    assert per == pytest.approx(53_760 / 328e9, rel=1e-12)
    # a step of 32 requests: 61 x (278 us + 32 x 0.16390244 us = 283.244878 us) = 17,277.94 us; no EP all-to-all
    # (EP off), no PP send
    assert step.step(32, 0.0, 0.0)["comm"] == pytest.approx(17_277.94e-6, rel=1e-5)
    # one request: 61 x (278 + 0.163902) us = 16,967.998 us
    assert step.step(1, 0.0, 0.0)["comm"] == pytest.approx(16_967.998e-6, rel=1e-5)
    assert any("decode step's TP all-reduces run on NCCL at 139 us per call and 328 GB/s" in note_text(n)
               for n in step.notes)


def test_tp_inside_one_node_keeps_the_custom_all_reduce():
    # TP8 on one H100 node: SGLang's decode all-reduce at the generic custom all-reduce, 9.3 us per call and
    # 2 all-reduces x 2 x 7/8 x 7,168 x 2 B = 50,176 B per token per layer at 450 GB/s x 0.114 = 51.3 GB/s
    step = _step(tp=8, engine="sglang")
    lat, per = step.comm_per_layer
    assert lat == pytest.approx(2 * 9.3e-6, rel=1e-12)
    assert per == pytest.approx(50_176 / 51.3e9, rel=1e-9)
    assert not any("decode step's TP all-reduces run on NCCL" in note_text(n) for n in step.notes)


def test_a_preset_without_a_nic_figure_keeps_the_in_node_price():
    # A100 80GB has no NIC rate: no cross-node ring is priced (as the prefill's), the decode price stands
    step = _step(hw="a100-80gb", tp=16, nodes=2, engine="sglang")
    assert step.comm_per_layer[0] == pytest.approx(2 * step.factors.value("allreduce_latency_us") * 1e-6)
