"""Prefill FLOPs, pinned by DeepSeek's published figure and by hand arithmetic."""

import sys

import pytest

from kvplan.calc import flops
from kvplan.errors import KvplanError
from kvplan.inputs.presets import load_model
from kvplan.specs.layers import causal_pairs
from kvplan.specs.model import LayerGroup, ModelSpec, Sourced


def test_deepseek_v3_training_cost_250_gflop_per_token_at_4k():
    # ISCA'25 (arXiv 2505.09343 §2.2.1, Table 2): DeepSeek-V3 costs ~250 GFLOP per token to train at a
    # sequence length of 4096; training = 3 x forward. preemption-pd-workload.md §1.1:
    # 3 x (73.2 + 4.997e6 x 4096 / 2 / 1e9) = 250, so forward ~ 83.4 GFLOP/token.
    model = load_model("deepseek-r1")
    forward = flops.forward_flops_per_token(model, 4096)
    assert 3 * forward == pytest.approx(250e9, rel=0.01)
    assert forward == pytest.approx(83.4e9, rel=0.005)


def test_deepseek_r1_matmul_params_and_mla_coefficient():
    model = load_model("deepseek-r1")
    # MLA projections per layer: 7168x1536 + 1536x128x192 + 7168x576 + 512x128x256 + 128x128x7168
    #   = 11,010,048 + 37,748,736 + 4,128,768 + 16,777,216 + 117,440,512 = 187,105,280
    # dense MLP (3 layers): 3 x 7168 x 18432 = 396,361,728
    # MoE (58 layers): 9 x 3 x 7168 x 2048 + 7168 x 256 = 396,361,728 + 1,835,008 = 398,196,736
    # LM head: 7168 x 129280 = 926,679,040
    # 61 x 187,105,280 + 3 x 396,361,728 + 58 x 398,196,736 + 926,679,040 = 36,624,596,992 (the document: 36.62 B)
    assert flops.matmul_params(model).value == 36_624_596_992
    # MHA-mode prefill: 2 x 128 heads x (128 nope + 64 rope + 128 v) = 81,920 per layer; x 61 = 4,997,120.
    assert flops.attention_coefficient(model) == 4_997_120


def test_llama_3_1_8b_by_hand():
    model = load_model("llama-3.1-8b")
    # Per layer: q 4096x4096 (16,777,216) + k, v 2 x 4096x1024 (8,388,608) + o 4096x4096 (16,777,216)
    #   + MLP 3 x 4096 x 14336 (176,160,768) = 218,103,808; x 32 = 6,979,321,856
    # + LM head 4096 x 128256 = 525,336,576 -> N_mm = 7,504,658,432
    n_mm = 7_504_658_432
    assert flops.matmul_params(model).value == n_mm
    # A = 4 x L x n_q x d_h = 4 x 32 x 32 x 128 = 524,288 (8 KV heads do not enter).
    assert flops.attention_coefficient(model) == 4 * 32 * 32 * 128 == 524_288
    # Prefill of 2,048 tokens: 2 x 7,504,658,432 x 2,048 + 524,288 x 2,048^2 / 2
    #   = 15,009,316,864 x 2,048 + 524,288 x 2,097,152
    #   = 30,739,080,937,472 + 1,099,511,627,776 = 31,838,592,565,248
    assert flops.prefill_flops(model, 2048) == pytest.approx(31_838_592_565_248, rel=1e-12)


def test_prefix_hit_subtracts_the_cached_part():
    model = load_model("llama-3.1-8b")
    s, h = 21_000, 1_000
    # 2 N (S - h) + A (S^2 - h^2) / 2
    expected = 2 * 7_504_658_432 * (s - h) + 524_288 * (s * s - h * h) / 2
    assert flops.prefill_flops(model, s, h) == pytest.approx(expected, rel=1e-12)
    assert flops.prefill_flops(model, s, h) == pytest.approx(flops.prefill_flops(model, s)
                                                             - flops.prefill_flops(model, h), rel=1e-12)


def test_causal_pairs_with_a_cap():
    assert causal_pairs(1000) == 500_000
    assert causal_pairs(100, 128) == 5_000              # below the cap: 100^2 / 2
    assert causal_pairs(1000, 128) == 128 * 1000 - 128 * 128 / 2    # 119,808


def test_sliding_window_layers_are_capped():
    model = load_model("gpt-oss-120b")
    # 18 full + 18 sliding (window 128) layers, 64 query heads x (64 + 64): 2 x 64 x 128 = 16,384 per pair.
    s = 1000
    full = 18 * 16_384 * s * s / 2                      # 18 x 16,384 x 500,000
    sliding = 18 * 16_384 * (128 * s - 128 * 128 / 2)   # 18 x 16,384 x 119,808
    assert flops.attention_flops(model, s) == pytest.approx(full + sliding, rel=1e-12)


def test_deepseek_v3_2_indexer_and_top_k():
    model = load_model("deepseek-v3.2-exp")
    idx = 2 * 64 * (128 + 1)          # indexer: 64 heads x 128-dim scores + weighted sum = 16,512 per pair
    sparse = 2 * 128 * (2 * 512 + 64)  # MLA in MQA mode: 128 heads x (576 QK + 512 PV) = 278,528 per pair
    mha = 2 * 128 * (128 + 64 + 128)   # MHA mode: 81,920 per pair
    long_s = 131_072
    # Long prefill: top-2048 keys per query in MQA mode, indexer over every key.
    expected_long = 61 * (sparse * (2048 * long_s - 2048 ** 2 / 2) + idx * long_s ** 2 / 2)
    assert flops.attention_flops(model, long_s) == pytest.approx(expected_long, rel=1e-12)
    # Short prefill (4,096): the masked MHA mode over every key is cheaper (81,920 x 8.39e6 < 278,528 x 6.29e6).
    short_s = 4096
    expected_short = 61 * (mha * short_s ** 2 / 2 + idx * short_s ** 2 / 2)
    assert flops.attention_flops(model, short_s) == pytest.approx(expected_short, rel=1e-12)
    # Matmuls: V3's 36,624,596,992 + indexer 61 x (1536x8192 + 7168x128 + 7168x64) = 61 x 13,959,168.
    assert flops.matmul_params(model).value == 36_624_596_992 + 61 * 13_959_168


def test_linear_attention_state_is_linear_in_context():
    gdn = {"kind": "gated_delta_net", "num_k_heads": 16, "num_v_heads": 32, "head_k_dim": 128, "head_v_dim": 128}
    full = {"kind": "full_attention", "kv_heads": 2, "head_dim_k": 256, "head_dim_v": 256, "q_heads": 16}
    model = ModelSpec(
        id="hybrid", name="toy hybrid", sources=("test",), num_layers=48,
        params_active_matmul=Sourced(value=1e9, source="test figure"),
        groups=(LayerGroup(name="linear", kind=gdn, layers=tuple(i for i in range(48) if i % 4 != 3)),
                LayerGroup(name="full", kind=full, layers=tuple(range(3, 48, 4)))),
    )
    s = 10_000
    # GDN: 7 x 32 x 128 x 128 = 3,670,016 FLOP per token per layer, 36 layers, linear in S.
    # Full: 2 x 16 x (256 + 256) = 16,384 per pair, 12 layers, S^2 / 2 pairs.
    expected = 36 * 3_670_016 * s + 12 * 16_384 * s * s / 2
    assert flops.attention_flops(model, s) == pytest.approx(expected, rel=1e-12)
    assert flops.prefill_flops(model, s) == pytest.approx(2 * 1e9 * s + expected, rel=1e-12)


def test_arrays_match_numbers():
    np = pytest.importorskip("numpy")
    for model_id in ("deepseek-r1", "deepseek-v3.2-exp", "gpt-oss-120b"):
        model = load_model(model_id)
        contexts = [100, 2_048, 21_000, 131_072]
        vector = flops.prefill_flops(model, np.array(contexts, dtype=float), np.array([0, 10, 1000, 0.0]))
        scalar = [flops.prefill_flops(model, c, h) for c, h in zip(contexts, [0, 10, 1000, 0], strict=True)]
        assert list(vector) == pytest.approx(scalar, rel=1e-12)


@pytest.mark.parametrize("model_id, embedding, published", [
    # N_mm + input embedding vs the card's activated parameters (embedding counted there).
    ("qwen3-235b-a22b", 151_936 * 4096, 22e9),          # 21.57 B + 0.62 B = 22.19 B vs "22B activated"
    ("llama-3.1-8b", 128_256 * 4096, 8.03e9),           # + norms 266,240 = 8,030,261,248 (safetensors / 2)
    ("llama-3.1-70b", 128_256 * 8192, 70.55e9),
])
def test_matmul_params_agree_with_published_totals(model_id, embedding, published):
    model = load_model(model_id)
    assert flops.matmul_params(model).value + embedding == pytest.approx(published, rel=0.01)


def test_matmul_params_fallback_and_error():
    base = dict(id="toy", name="toy", sources=("test",), num_layers=2,
                groups=(LayerGroup(name="a", layers=(0, 1), kind={"kind": "full_attention", "kv_heads": 8,
                                                                 "head_dim_k": 128, "head_dim_v": 128,
                                                                 "q_heads": 32}),))
    estimated = flops.matmul_params(ModelSpec(**base, params_active=Sourced(value=8.03e9, source="card"),
                                              vocab_size=128_256, hidden_size=4096))
    # 8.03e9 - 128,256 x 4,096 (525,336,576) = 7,504,663,424
    assert estimated.estimated and estimated.value == 8.03e9 - 525_336_576
    with pytest.raises(KvplanError, match="params_active_matmul"):
        flops.matmul_params(ModelSpec(**base))


def test_flops_need_query_heads():
    model = ModelSpec(id="toy", name="toy", sources=("test",), num_layers=1,
                      params_active_matmul=Sourced(value=1e9, source="test"),
                      groups=(LayerGroup(name="a", layers=(0,), kind={"kind": "full_attention", "kv_heads": 8,
                                                                      "head_dim_k": 128, "head_dim_v": 128}),))
    with pytest.raises(KvplanError, match="q_heads"):
        flops.prefill_flops(model, 1000)


def test_flops_module_does_not_import_numpy():
    import subprocess

    code = ("import sys, kvplan.calc.flops, kvplan.commands.preemption, kvplan.specs.layers; "
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
