"""Per-layer bytes for each layer kind, against hand arithmetic and the engines' published formulas."""

from dataclasses import replace

import pytest

from kvplan.errors import KvplanError
from kvplan.specs.dtypes import KVDtype, parse_kv_dtype
from kvplan.specs.layers import MLA, FullAttention, GatedDeltaNet, Mamba2, SlidingWindowAttention, SparseIndexer

LLAMA_ATTN = FullAttention(kv_heads=8, head_dim_k=128, head_dim_v=128, q_heads=32)
R1_MLA = MLA(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, q_heads=128)


def test_gqa_bf16_and_fp8():
    # 8 heads x (128 K + 128 V) x 2 B = 4,096 B per layer per token; fp8 halves it.
    assert LLAMA_ATTN.cache_bytes_per_token(KVDtype.BF16) == 4096
    assert LLAMA_ATTN.cache_bytes_per_token(KVDtype.FP8) == 2048


def test_per_token_head_scale_overhead():
    # vLLM AttentionSpec: + 2 x heads x 4 B of fp32 scales per token: 8 x (128+4 + 128+4) = 2,112 B.
    assert LLAMA_ATTN.cache_bytes_per_token(KVDtype.FP8_PER_TOKEN_HEAD) == 2112
    assert LLAMA_ATTN.cache_bytes_per_token(KVDtype.INT8_PER_TOKEN_HEAD) == 2112


def test_nvfp4_packed_plus_block_scales():
    # nvfp4_kv_cache_full_dim(128) = 128//2 + 128//16 = 64 + 8 = 72 B per head vector;
    # 8 heads x (72 K + 72 V) = 1,152 B: 9/16 of a byte per element (1,152 / 2,048 = 0.5625).
    assert LLAMA_ATTN.cache_bytes_per_token(KVDtype.NVFP4) == 1152
    with pytest.raises(KvplanError):
        FullAttention(kv_heads=1, head_dim_k=72, head_dim_v=72).cache_bytes_per_token(KVDtype.NVFP4)


def test_gqa_tp_split_and_replication():
    # TP=8: 1 head per rank -> 512 B; TP=16: max(1, 8 // 16) = 1 head (replicated) -> still 512 B.
    assert LLAMA_ATTN.cache_bytes_per_token(KVDtype.BF16, tp=8) == 512
    assert LLAMA_ATTN.cache_bytes_per_token(KVDtype.BF16, tp=16) == 512
    assert LLAMA_ATTN.cache_bytes_per_token(KVDtype.BF16, tp=2) == 2048


@pytest.mark.parametrize("tp", [3, 6, 12])
def test_gqa_impossible_tp(tp):
    with pytest.raises(KvplanError, match="neither divides"):
        LLAMA_ATTN.check_tp(tp)


def test_query_heads_must_divide():
    # 40 query heads (QwQ-32B) and TP=16: 8 KV heads divide 16 but 40 % 16 != 0.
    with pytest.raises(KvplanError, match="query heads"):
        FullAttention(kv_heads=8, head_dim_k=128, head_dim_v=128, q_heads=40).check_tp(16)


def test_mla_latent_whole_on_every_rank():
    # (512 + 64) x 2 B = 1,152 B (bf16); x 1 B = 576 (fp8); same on every TP rank.
    for tp in (1, 2, 8, 16):
        assert R1_MLA.cache_bytes_per_token(KVDtype.BF16, tp) == 1152
        assert R1_MLA.cache_bytes_per_token(KVDtype.FP8, tp) == 576


def test_mla_fp8_ds_layout():
    # 512 fp8 + 512/128 x 4 B scales + 64 x 2 B bf16 rope = 512 + 16 + 128 = 656.
    assert R1_MLA.cache_bytes_per_token(KVDtype.FP8_DS_MLA) == 656
    v32 = replace(R1_MLA, fp8_layout="ds_mla")
    assert v32.cache_bytes_per_token(KVDtype.FP8) == 656
    assert v32.cache_bytes_per_token(KVDtype.BF16) == 1152


def test_mla_nvfp4_and_refusals():
    # SGLang MLA FP4 cell: 576//2 + 576//16 = 288 + 36 = 324 B.
    assert R1_MLA.cache_bytes_per_token(KVDtype.NVFP4) == 324
    with pytest.raises(KvplanError):
        R1_MLA.cache_bytes_per_token(KVDtype.FP8_PER_TOKEN_HEAD)
    with pytest.raises(KvplanError):
        LLAMA_ATTN.cache_bytes_per_token(KVDtype.FP8_DS_MLA)


def test_indexer_is_132_bytes_whatever_the_dtype():
    # vLLM DeepseekV32IndexerCache: 128 + 128//128 x 4 = 132 B, uint8.
    idx = SparseIndexer(index_head_dim=128)
    for dtype in (KVDtype.BF16, KVDtype.FP8, KVDtype.NVFP4):
        assert idx.cache_bytes_per_token(dtype, tp=8) == 132


def test_sliding_window_holds_at_most_the_window():
    swa = SlidingWindowAttention(kv_heads=8, head_dim_k=64, head_dim_v=64, window=128)
    # 8 x (64 + 64) x 2 B = 2,048 B per token.
    assert swa.bytes_at_context(KVDtype.BF16, 100) == 100 * 2048
    assert swa.bytes_at_context(KVDtype.BF16, 10_000) == 128 * 2048
    assert swa.marginal_bytes_per_token(KVDtype.BF16) == 0


def test_gated_delta_net_state():
    # Qwen3-Next GDN: 16 K heads, 32 V heads, 128 x 128, conv kernel 4, bf16.
    gdn = GatedDeltaNet(num_k_heads=16, num_v_heads=32, head_k_dim=128, head_v_dim=128, conv_kernel=4)
    conv = 3 * (128 * 16 * 2 + 128 * 32) * 2     # 3 x 8,192 x 2 = 49,152 B
    ssm = 32 * 128 * 128 * 2                      # 1,048,576 B
    assert gdn.state_bytes() == conv + ssm == 1_097_728
    assert gdn.bytes_at_context(KVDtype.BF16, 100_000) == 1_097_728   # no growth with context
    # TP=4: conv 3 x 2,048 x 2 = 12,288; ssm 8 x 128 x 128 x 2 = 262,144.
    assert gdn.state_bytes(tp=4) == 12_288 + 262_144
    # fp32 SSM state (Qwen3.5's mamba_ssm_dtype: float32) doubles the SSM part only.
    assert replace(gdn, ssm_dtype="fp32").state_bytes() == conv + 2 * ssm
    with pytest.raises(KvplanError):
        gdn.check_tp(3)


def test_mamba2_state():
    # 128 heads x 64 head_dim = 8,192 inner; 8 groups, state 128, conv 4, bf16.
    m = Mamba2(n_heads=128, head_dim=64, state_size=128, n_groups=8, conv_kernel=4)
    conv = 3 * (8192 + 2 * 8 * 128) * 2      # 3 x 10,240 x 2 = 61,440
    ssm = 128 * 64 * 128 * 2                  # 2,097,152
    assert m.state_bytes() == conv + ssm


def test_parse_kv_dtype_aliases_and_errors():
    assert parse_kv_dtype("fp8_e4m3") is KVDtype.FP8
    assert parse_kv_dtype("bfloat16") is KVDtype.BF16
    with pytest.raises(KvplanError, match="unknown kv dtype"):
        parse_kv_dtype("fp6")
