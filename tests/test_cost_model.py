"""The one cost model (``kvplan.calc.costs``) pinned by hand: the bidirectional factor only on a shared link, the
per-copy overhead in microseconds, the copy count of the contiguous layout, the host-link rate, and recompute
time F / (MFU x peak x TP).

The public functions are called with round numbers so that each expectation is a line of arithmetic; the
CLI's ``compare-preemption --format json`` is checked with the same rules. tools/mutation_probe.py names the
mutants (``bidir-*``, ``copy-overhead-*``, ``swap-copies-*``, ``host-link-*``, ``recompute-*``) they kill.
"""

from __future__ import annotations

import pytest

from kvplan.calc import costs
from kvplan.calc.costs import CostSettings

# One 2-layer GQA model with a sourced N_mm of 1e9, 4 query heads of 64 + 64 dims: attention FLOPs per
# (query, key) pair per layer 2 x 4 x (64 + 64) = 1,024 (QK^T + PV), 2,048 over both layers.
DENSE = '''type = "model"
id = "tiny-cost"
name = "tiny cost-model test model"
sources = ["hand-written test model"]
num_layers = 2
hidden_size = 256
intermediate_size = 1024
vocab_size = 1000
params_total = { value = 1e8, source = "test figure" }
params_active_matmul = { value = 1e9, source = "test figure" }

[[groups]]
name = "attention"
layers = "all"
kind = { kind = "full_attention", kv_heads = 2, head_dim_k = 64, head_dim_v = 64, q_heads = 4 }
'''

# One Mamba-2 layer (a fixed state) and one attention layer.
HYBRID = '''type = "model"
id = "tiny-hybrid-cost"
name = "tiny Mamba-2 hybrid"
sources = ["hand-written test model"]
num_layers = 2

[[groups]]
name = "ssm"
layers = [0]
kind = { kind = "mamba2", n_heads = 8, head_dim = 64, state_size = 128, n_groups = 1, conv_kernel = 4 }

[[groups]]
name = "attention"
layers = [1]
kind = { kind = "full_attention", kv_heads = 2, head_dim_k = 64, head_dim_v = 64, q_heads = 4 }
'''


def load(tmp_path, text: str, name: str):
    from kvplan import load_model

    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return load_model(str(path))


# --- swap time: n_copies x t_copy + bytes / (rate x f_bidir), the factor only on a shared link --------------
def test_swap_seconds_on_a_shared_and_an_idle_link():
    st = CostSettings(copy_overhead_us=2.0, bidir_factor=0.8)
    # 1,000 copies x 2 us = 2 ms; 1e9 B / (50e9 B/s x 0.8) = 25 ms -> 27 ms on a link shared by both directions.
    assert costs.swap_seconds(10**9, 1000, 50e9, st) == pytest.approx(0.027, rel=1e-12)
    # Idle link: no factor, 1e9 / 50e9 = 20 ms -> 22 ms.
    assert costs.swap_seconds(10**9, 1000, 50e9, st, shared_link=False) == pytest.approx(0.022, rel=1e-12)
    # No overhead: only the bytes (25 ms); no bytes: only the copies (2 ms).
    assert costs.swap_seconds(10**9, 1000, 50e9, CostSettings(copy_overhead_us=0, bidir_factor=0.8)) == \
        pytest.approx(0.025, rel=1e-12)
    assert costs.swap_seconds(0, 1000, 50e9, st) == pytest.approx(0.002, rel=1e-12)


# --- the host link --------------------------------------------------------------------------------------------
def test_host_link_rate_is_line_rate_times_efficiency_or_the_given_gb_s():
    from kvplan import load_hardware

    hw = load_hardware("h100-sxm")
    link = hw.host_link
    theo, eff = link.theoretical_gb_s_per_direction.value, link.large_copy_efficiency.value
    assert costs.host_link_rate(hw).value == pytest.approx(theo * eff * 1e9, rel=1e-12)
    # --host-link-gbs is in GB/s of 10^9 B/s: 50 -> 5e10 B/s (not 50 x 2^30 = 5.37e10).
    assert costs.host_link_rate(hw, 50).value == 50e9


# --- copies per direction, contiguous layout -------------------------------------------------------------------
def test_contiguous_copies_are_the_blocks_of_the_longest_sequence_plus_one_for_state(tmp_path):
    dense = load(tmp_path, DENSE, "dense")
    hybrid = load(tmp_path, HYBRID, "hybrid")
    # 1,000 tokens in 16-token blocks: cdiv(1000, 16) = 63 copies (62.5 rounded up; 62 would drop the tail).
    assert costs.swap_copies(dense, 1000, 16, "contiguous") == 63
    # With a Mamba-2 layer the fixed state is one more copy: 64.
    assert costs.swap_copies(hybrid, 1000, 16, "contiguous") == 64


# --- recompute: T = F / (MFU x peak x TP) -----------------------------------------------------------------------
def test_recompute_seconds_divides_by_mfu_peak_and_tp(tmp_path):
    model = load(tmp_path, DENSE, "dense")
    # S = 1,000, h = 200: matmul 2 x 1e9 x 800 = 1.6e12 FLOP; attention 2,048 x (1000^2/2 - 200^2/2)
    # = 2,048 x 480,000 = 983,040,000 FLOP; F = 1,600,983,040,000.
    # MFU 0.5 x 1e15 FLOP/s x TP 2 = 1e15 FLOP/s: 1.60098304e-3 s (no TP: 3.2e-3; no MFU: 0.8e-3).
    assert costs.recompute_seconds(model, 1000, 200, 0.5, 1e15, 2) == pytest.approx(1.60098304e-3, rel=1e-12)
    assert costs.recompute_seconds(model, 1000, 200, 0.25, 1e15, 1) == pytest.approx(6.40393216e-3, rel=1e-12)


# --- the swap rules through compare-preemption -----------------------------------------------------------------
def test_compare_preemption_prices_the_swap_with_the_cost_model(run_cli, tmp_path):
    hw = tmp_path / "gpu.toml"
    hw.write_text('''type = "hardware"
id = "cost-gpu"
name = "test GPU"
sources = ["hand-written test preset"]
hbm_capacity_gib = { value = 80, source = "test figure" }
hbm_bandwidth_tb_s = { value = 3.0, source = "test figure" }

[dense_tflops]
bf16 = { value = 1000, source = "test figure" }

[host_link]
name = "test link"
theoretical_gb_s_per_direction = { value = 50, source = "test figure" }
large_copy_efficiency = { value = 0.8, source = "test figure" }

[node]
gpus_per_node = 8
host_dram_gb = { value = 1000, source = "test figure" }
''')
    m = tmp_path / "dense.toml"
    m.write_text(DENSE)
    r = run_cli("compare-preemption", "-m", str(m), "-g", str(hw), "--tp", "2", "--prompt", "200",
                "--generated", "800", "--prefix-hit", "200", "--mfu", "0.5", "--copy-overhead-us", "2",
                "--bidir-factor", "0.8", "--sweep", "800", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    # KV at S = 1,000 on one of TP 2 ranks: 2 layers x (2 KV heads // 2 = 1) x (64 + 64) x 2 B = 512 B per token,
    # 512,000 B. Link 50 GB/s x 0.8 = 40e9 B/s. Copies cdiv(1000, 16) = 63.
    assert d["host_link_bytes_per_second"] == pytest.approx(40e9, rel=1e-12)
    assert d["swap_bytes_per_gpu"] == 512_000
    assert d["swap_copies_per_direction"] == 63
    # Swap-in: 63 x 2e-6 + 512,000 / (40e9 x 0.8) = 1.26e-4 + 1.6e-5 = 1.42e-4 s; idle link 1.26e-4 + 1.28e-5.
    assert d["swap_in_seconds"] == pytest.approx(1.42e-4, rel=1e-9)
    assert d["swap_in_seconds_idle_link"] == pytest.approx(1.388e-4, rel=1e-9)
    assert d["swap_exposed_seconds"] == pytest.approx(1.42e-4, rel=1e-9)
    # (compare-preemption's recompute time is the step model's prefill price, with a per-chunk fixed overhead on
    # top of F / (MFU x peak x TP): pinned with the step model, not here.)


def test_a_prefill_spreads_its_expert_flops_over_the_ep_group(run_cli):
    # DeepSeek-R1 fp8 at TP1 with EP8 (attention DP over the node), S = 21,000: the dense matmuls and attention of
    # one request run on its own GPU, its routed experts' FLOPs on the 8 GPUs of the EP group:
    #   routed active params = 8 experts x 3 x 7,168 x 2,048 x 58 MoE layers = 20,434,845,696
    #   dense = N_mm 36,624,596,992 - routed = 16,189,751,296
    #   per GPU: 2 x 16,189,751,296 x 21,000 + 2 x 20,434,845,696 x 21,000 / 8 = 6.799696e14 + 1.072829e14 FLOP at
    #   0.45 x 1,979e12 (fp8) = 0.884007 s, + MLA attention 4,997,120 x 21,000^2 / 2 = 1.101865e15 FLOP at
    #   0.45 x 989e12 (its core runs in bf16) = 2.475823 s, every chunk compute-bound, + 3 chunks x 2.583 ms of fixed
    #   overhead (61 x 15 + 58 x 21 + 450 us), + the prefill's EP8 dispatch / combine on NVLink (DeepEP normal
    #   kernels): 8 of 256 experts touch 8 x (1 - 224 x ... x 217 / (256 x ... x 249)) = 8 x 0.661832 GPUs,
    #   7,168 x (1.03125 / (153/160) + 2 / (158/160)) B each at 450 GB/s x 0.82 = 0.319224 us per token per MoE
    #   layer: 58 x (3 x 2 x 30 us + 21,000 x 0.319224 us) = 0.399255 s -> 3.766834 s.
    # (Dividing the experts' FLOPs by TP instead of EP would add 0.94 s.)
    d = run_cli("compare-preemption", "--kv-dtype", "fp8", "--tp", "1", "--ep", "8", "-f", "json").json()
    linear = 2 * 16_189_751_296 * 21_000 + 2 * 20_434_845_696 * 21_000 / 8
    attention = 4_997_120 * 21_000 ** 2 / 2
    assert d["recompute_seconds"] == pytest.approx(linear / (0.45 * 1979e12) + attention / (0.45 * 989e12)
                                                   + 3 * 2.583e-3 + 0.399255, rel=1e-5)


def test_weight_dtype_scales_the_routed_experts_and_the_dense_weights_alike():
    # Qwen3-235B-A22B: --weight-dtype fp8 is 1 byte per parameter, int4 half a byte (budget.WEIGHT_BYTES_PER_PARAM),
    # so every byte the step reads from weights halves, experts and the rest alike (the experts' share of the
    # params, params_expert / params_total, does not depend on the dtype)
    from kvplan.inputs.presets import load_hardware, load_model
    from kvplan.scenario import Scenario

    def sm(dtype):
        return costs.step_model(Scenario(model=load_model("qwen3-235b-a22b"), hardware=load_hardware("h200"),
                                         weight_dtype=dtype))

    fp8, int4 = sm("fp8"), sm("int4")
    assert fp8.expert_bytes_each == pytest.approx(2 * int4.expert_bytes_each, rel=1e-12)
    assert fp8.dense_bytes == pytest.approx(2 * int4.dense_bytes, rel=1e-6)
    # and the dense part is a real share of the weights: (params_total - params_expert) x 1 B / TP 8
    model = load_model("qwen3-235b-a22b")
    dense_params = model.params_total.value - model.params_expert.value
    assert fp8.dense_bytes == pytest.approx(dense_params / 8, rel=1e-6)
