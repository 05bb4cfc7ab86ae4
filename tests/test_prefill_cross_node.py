"""Issue 20, prefill20d: a prefill's TP all-reduce across nodes on NCCL's ring over the node's NICs
(costs.CROSS_NODE_ALLREDUCE_SOURCE), and the decode step's EP dispatch / combine inside an NVLink domain wider
than a node (gb200: scale_up.domain_gpus = 72). Every expectation is worked out by hand in its comment from the
presets' figures (H100 SXM: NVLink 450 GB/s per direction, 8 GPUs per node, one 50 GB/s NIC per GPU, efficiency.link
0.82, link_latency_us 26; GB200: NVLink 900 GB/s, 4-GPU trays in a 72-GPU NVLink domain, link 0.76; B300: NVLink
900, 100 GB/s NIC per GPU, link 0.76)."""

from __future__ import annotations

import pytest

from kvplan.calc import costs
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.render.output import note_text
from kvplan.scenario import Scenario


def _step(model="deepseek-r1", hw="h100-sxm", **kw):
    s = Scenario(model=load_model(model), hardware=load_hardware(hw), prompt_tokens=4096, decode_tokens=128, **kw)
    return costs.step_model(s, costs.step_factors(s.hardware))


def test_tp16_over_two_h100_nodes_all_reduces_over_the_nodes_nics():
    # P3 of tests/data/prefill_points.toml: DeepSeek-R1 at TP16 over two 8-GPU H100 nodes (SGLang).
    # NCCL's ring: each all-reduce moves 2 x (16 - 1) / 16 x 7,168 x 2 B = 26,880 B per token per rank, 2 per layer
    # = 53,760 B. Slowest link: min(NVLink 450, 8 GPUs x 50 GB/s NIC = 400) GB/s x 0.82 = 328 GB/s
    # -> 53,760 / 328e9 = 0.1639024 us per token per layer; latency 2 x 26 us per layer (NCCL outside graphs,
    # not the 9.3 us custom all-reduce, which runs inside one node only).
    step = _step(tp=16, nodes=2, engine="sglang")
    assert costs.cross_node_allreduce_rate(step.scenario.hardware, step.factors, 16) == pytest.approx(328e9)
    lat, per = step.prefill_tp_per_layer
    assert lat == pytest.approx(52e-6)
    assert per == pytest.approx(53_760 / 328e9, rel=1e-12)
    # a 4,096-token chunk: 61 layers x (52 us + 4,096 x 0.1639024 us = 723.34 us) = 44.124 ms; no EP, no PP
    assert step.prefill_comm(4096) == pytest.approx(0.044124, rel=1e-4)
    # the decode step's small all-reduce keeps its own price
    assert step.comm_per_layer[0] != lat
    assert any("NCCL's ring at 328 GB/s" in note_text(n) for n in step.notes)


def test_tp_inside_one_node_or_domain_keeps_the_nvlink_price():
    # TP8 on one H100 node: no NIC hop, 450 GB/s x 0.82 = 369 GB/s, the custom all-reduce's latency
    h100 = load_hardware("h100-sxm")
    f = costs.step_factors(h100)
    assert costs.cross_node_allreduce_rate(h100, f, 8) is None
    step = _step(tp=8, engine="sglang")
    assert step.prefill_tp_per_layer[1] == pytest.approx(2 * 2 * 7 / 8 * 7168 * 2 / 369e9, rel=1e-12)
    assert not any("NCCL's ring" in note_text(n) for n in step.notes)
    # GB200 TP8 over two 4-GPU trays stays inside the 72-GPU NVLink domain
    gb200 = load_hardware("gb200")
    assert costs.cross_node_allreduce_rate(gb200, costs.step_factors(gb200), 8) is None
    assert costs.cross_node_allreduce_rate(gb200, costs.step_factors(gb200), 72) is None


def test_a_nic_slower_than_nvlink_in_total_bounds_the_ring():
    # B300 at TP16: min(NVLink 900, 8 x 100 GB/s NICs = 800) x 0.76 = 608 GB/s: the NICs are the slowest link
    b300 = load_hardware("b300")
    assert costs.cross_node_allreduce_rate(b300, costs.step_factors(b300), 16) == pytest.approx(608e9)
    # H100 at TP32 (4 nodes): still 8 x 50 = 400 < 450, x 0.82
    h100 = load_hardware("h100-sxm")
    assert costs.cross_node_allreduce_rate(h100, costs.step_factors(h100), 32) == pytest.approx(328e9)
    # a preset without a NIC figure (A100 80GB): no cross-node price, the NVLink price stands
    a100 = load_hardware("a100-80gb")
    assert a100.node.nic_gb_s_per_direction_per_gpu is None
    assert costs.cross_node_allreduce_rate(a100, costs.step_factors(a100), 16) is None


def test_decode_ep_inside_the_nvl72_domain_is_priced_on_nvlink():
    # GB200 NVL72, DeepSeek-R1 TP1 DP16 EP16 over four 4-GPU trays: EP16 <= 72 GPUs of the NVLink domain, so the
    # decode step's dispatch + combine run on NVLink: 8 experts x 7,168 x 2 B x (16 - 1) / 16 = 107,520 B per token
    # each way, / (900 GB/s x 0.76 = 684 GB/s) = 0.157193 us, 2 x that per MoE layer; latency 2 x 15.4 us
    # (the GB200's link_latency_us). Before, EP16 > 4 GPUs per tray looked for a NIC the gb200 preset has not:
    # dispatch and combine went unpriced.
    step = _step(hw="gb200", tp=1, dp=16, ep=16, nodes=4, engine="sglang")
    lat, per = step.ep_per_moe_layer
    assert lat == pytest.approx(2 * 15.4e-6)
    assert per == pytest.approx(2 * 107_520 / 684e9, rel=1e-12)
    assert not any("no link rate for EP=16: dispatch" in note_text(n) for n in step.notes)
    # H100 EP16 over two 8-GPU nodes still crosses the NIC: 50 GB/s x 0.82 = 41 GB/s
    h100 = _step(tp=1, dp=16, ep=16, nodes=2, engine="sglang")
    assert h100.ep_per_moe_layer[1] == pytest.approx(2 * 107_520 / 41e9, rel=1e-12)
    # and EP8 on one H100 node on NVLink: 8 x 7,168 x 2 x 7/8 = 100,352 B / 369 GB/s
    one = _step(tp=1, dp=8, ep=8, engine="sglang")
    assert one.ep_per_moe_layer[1] == pytest.approx(2 * 100_352 / 369e9, rel=1e-12)


def test_compare_preemption_explains_its_recompute_as_compute_plus_communication():
    # Llama-3.1-8B at TP2 on H100, 1,000 prompt + 1,000 generated = 2,000 tokens re-prefilled in one chunk. Its
    # communication: 32 layers x 2 all-reduces x (2 - 1) / 2 x 2 x 4,096 x 2 B = 16,384 B per token per layer at
    # 450 GB/s x 0.82 = 369 GB/s -> 32 x 2,000 x 16,384 / 369e9 = 2.84167 ms, + 32 x 2 x the all-reduce latency.
    # The explanation names it, and compute + communication + overhead add up to the price.
    from kvplan.calc.costs import CostSettings
    from kvplan.calc.preemption import plan_preemption

    s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), prompt_tokens=1000,
                 decode_tokens=1000, tp=2)
    plan = plan_preemption(s, CostSettings(), 0, (1000,))
    step = costs.step_model(s, costs.step_factors(s.hardware, prefill_mfu=CostSettings().mfu))
    lat = step.factors.value("allreduce_latency_us") * 1e-6
    comm = 32 * 2000 * 16_384 / 369e9 + 32 * 2 * lat
    why = plan.this.recompute.why
    assert why is not None
    assert "communication (TP all-reduces, EP dispatch / combine, PP sends" in why.formula
    assert "the MFU is compute-only" in why.formula
    assert f"communication {comm * 1e3:.3f} ms" in why.substituted
    assert "1 chunk(s) of" in why.substituted and " x " in why.substituted


def test_nvlink_slower_than_the_nodes_nics_bounds_the_ring():
    # an H100 node with a 100 GB/s NIC per GPU (hypothetical): 8 x 100 = 800 GB/s of NICs against 450 GB/s NVLink,
    # so the ring's slowest link is NVLink: 450 x 0.82 = 369 GB/s
    from dataclasses import replace

    from kvplan.specs.model import Sourced

    h100 = load_hardware("h100-sxm")
    fast = replace(h100, node=replace(h100.node, nic_gb_s_per_direction_per_gpu=Sourced(value=100, source="test")))
    assert costs.cross_node_allreduce_rate(fast, costs.step_factors(fast), 16) == pytest.approx(369e9)
