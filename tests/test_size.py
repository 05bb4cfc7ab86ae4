"""`kvplan size` figures, pinned by hand arithmetic and the workload document."""

import pytest

from kvplan.calc import kv
from kvplan.calc.size import plan_size
from kvplan.errors import KvplanError
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.scenario import Scenario
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.model import LayerGroup, ModelSpec
from kvplan.specs.parallel import Parallelism, pipeline_stages


def size_result(model, kv_dtype=KVDtype.BF16, parallelism=Parallelism(), include_mtp=False, compare=None, **kw):
    """The Result the CLI renders, for a scenario built as the CLI builds it (DP given: no fill-in)."""
    from kvplan.present.size import present

    s = Scenario(model=model, hardware=load_hardware("h200"), kv_dtype_request=kv_dtype, tp=parallelism.tp,
                 pp=parallelism.pp, dp=parallelism.dp, mtp_layers=model.mtp_layers if include_mtp else 0, **kw)
    return present(plan_size(s, compare=compare))


def size(*args, **kw) -> dict:
    """The size JSON document (raw numbers)."""
    import json

    from kvplan.render.output import to_json

    return json.loads(to_json(size_result(*args, **kw)))


def _llama8b_like(num_layers=32):
    return ModelSpec(
        id="toy", name="toy", sources=("hand-written test model",), num_layers=num_layers,
        groups=(LayerGroup(name="attn", layers=tuple(range(num_layers)),
                           kind={"kind": "full_attention", "kv_heads": 8, "head_dim_k": 128, "head_dim_v": 128,
                                 "q_heads": 32}),),
    )


def test_pipeline_stages_follow_vllm_get_pp_indices():
    # 32 layers over 3 stages: 10 each, the 2 left over go to the stages before the last: 11, 11, 10.
    assert [len(s) for s in pipeline_stages(32, 3)] == [11, 11, 10]
    # 61 layers over 2 stages: 30 each, the extra one to stage 0: 31, 30.
    assert [len(s) for s in pipeline_stages(61, 2)] == [31, 30]
    assert [len(s) for s in pipeline_stages(8, 8)] == [1] * 8


def test_pp_takes_the_largest_stage():
    model = _llama8b_like()
    # 11 layers x 4,096 B on stage 0 (bf16, TP=1).
    assert kv.kv_bytes_per_token_per_gpu(model, KVDtype.BF16, Parallelism(pp=3)).value == 11 * 4096
    # With TP=2 as well: 11 x 2,048.
    assert kv.kv_bytes_per_token_per_gpu(model, KVDtype.BF16, Parallelism(tp=2, pp=3)).value == 11 * 2048


def test_pp_beyond_layers_is_refused():
    with pytest.raises(KvplanError, match="pipeline stages"):
        size(_llama8b_like(4), kv_dtype=KVDtype.BF16, parallelism=Parallelism(pp=5))


def test_dp_does_not_change_per_request_bytes():
    model = _llama8b_like()
    a = size(model, kv_dtype=KVDtype.BF16, parallelism=Parallelism(tp=2, dp=4))
    assert a["kv_bytes_per_token_per_gpu"] == 32 * 2048
    assert a["parallelism"]["gpus"] == 8


def test_llama_3_1_8b_whole_and_per_gpu_at_tp8():
    # 2 x 32 layers x 8 heads x 128 x 2 B = 131,072 B/token; TP=8 -> 1 head per rank -> 16,384 B.
    data = size(load_model("llama-3.1-8b"), kv_dtype=KVDtype.BF16,
                            parallelism=Parallelism(tp=8), prompt_tokens=1000, decode_tokens=30000)
    assert data["kv_bytes_per_token"] == 131_072
    assert data["kv_bytes_per_token_per_gpu"] == 16_384
    assert data["peak_kv_bytes_per_request"] == 131_072 * 31_000
    assert data["peak_kv_bytes_per_request_per_gpu"] == 16_384 * 31_000
    assert data["state_bytes_per_request"] == 0


def test_llama_3_1_8b_nvfp4_and_per_token_head():
    model = load_model("llama-3.1-8b")
    # nvfp4: 32 layers x 8 heads x 2 x (64 + 8) B = 36,864 B/token.
    assert kv.kv_bytes_per_token(model, KVDtype.NVFP4) == 36_864
    # per-token-head fp8: 32 x 8 x 2 x (128 + 4) = 67,584 B/token.
    assert kv.kv_bytes_per_token(model, KVDtype.FP8_PER_TOKEN_HEAD) == 67_584


def test_gqa_replication_when_tp_exceeds_kv_heads():
    model = load_model("llama-3.1-70b")
    # 80 layers x 1 head x (128 + 128) x 2 B = 40,960 B at TP=8 and, replicated, at TP=16 and TP=32.
    for tp in (8, 16, 32):
        assert kv.kv_bytes_per_token_per_gpu(model, KVDtype.BF16, Parallelism(tp=tp)).value == 40_960


def test_impossible_tp_rejected():
    # Qwen3-235B-A22B has 4 KV heads: TP=6 neither divides 4 nor is a multiple of it.
    with pytest.raises(KvplanError, match="neither divides"):
        size(load_model("qwen3-235b-a22b"), kv_dtype=KVDtype.BF16, parallelism=Parallelism(tp=6))


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_deepseek_r1_mla_same_at_any_tp(tp):
    model = load_model("deepseek-r1")
    par = Parallelism(tp=tp)
    # 61 layers x (512 + 64) x 2 B = 70,272 (bf16); x 1 B = 35,136 (fp8); whole latent on every rank.
    assert kv.kv_bytes_per_token(model, KVDtype.BF16) == 70_272
    assert kv.kv_bytes_per_token(model, KVDtype.FP8) == 35_136
    assert kv.kv_bytes_per_token_per_gpu(model, KVDtype.BF16, par).value == 70_272
    assert kv.kv_bytes_per_token_per_gpu(model, KVDtype.FP8, par).value == 35_136


def test_deepseek_r1_mtp_layer_only_when_asked():
    model = load_model("deepseek-r1")
    without = size(model, kv_dtype=KVDtype.FP8)
    with_mtp = size(model, kv_dtype=KVDtype.FP8, include_mtp=True)
    assert without["kv_bytes_per_token"] == 61 * 576
    assert with_mtp["kv_bytes_per_token"] == 62 * 576     # one MTP layer, one more latent


def test_deepseek_v3_2_fp8_layout_and_indexer():
    model = load_model("deepseek-v3.2-exp")
    # fp8 -> fp8_ds_mla (656 B) + indexer 132 B, per layer: 61 x 788 = 48,068 B/token.
    assert kv.kv_bytes_per_token(model, KVDtype.FP8) == 61 * (656 + 132) == 48_068
    assert kv.kv_bytes_per_token_per_gpu(model, KVDtype.FP8, Parallelism(tp=8)).value == 48_068
    # bf16: 61 x (1,152 + 132) = 78,324.
    assert kv.kv_bytes_per_token(model, KVDtype.BF16) == 78_324


def test_seed_worked_example():
    # The document: 2 x 61 x 8 x 128 x 1 B = 124,928 B (~125 KB); x 30,000 tokens = 3.75 GB; x 10 > 37 GB.
    seed = load_model("deepseek-r1-seed-gqa")
    assert kv.kv_bytes_per_token(seed, KVDtype.FP8) == 124_928
    per_request = kv.kv_bytes_at_context(seed, KVDtype.FP8, 30_000)
    assert per_request == 3_747_840_000
    assert round(per_request / 1e9, 2) == 3.75
    assert 10 * per_request > 37e9


def test_default_scenario_comparison_block():
    result = size(load_model("deepseek-r1"), kv_dtype=KVDtype.FP8, compare=load_model("deepseek-r1-seed-gqa"))
    cmp = result["comparison"]
    assert cmp["kv_bytes_per_token"] == 124_928
    assert cmp["kv_bytes_per_request"] == 3_747_840_000
    assert cmp["kv_bytes_for_requests"] == 37_478_400_000
    # Per GPU at TP=8: the GQA example shards to 1 head: 2 x 61 x 1 x 128 = 15,616 B; MLA stays 35,136 B.
    assert cmp["kv_bytes_per_token_per_gpu"] == 15_616
    assert cmp["this_model_kv_bytes_per_token_per_gpu"] == 35_136
    assert "replicated" in cmp["why"] or "whole on every TP rank" in cmp["why"]
    assert result["kv_bytes_per_token"] == 35_136


def test_sliding_window_model_per_token_counts_full_layers_only():
    model = load_model("gpt-oss-120b")
    data = size(model, kv_dtype=KVDtype.BF16, prompt_tokens=1000, decode_tokens=9000)
    # 18 full layers x 8 heads x (64 + 64) x 2 B = 36,864 B/token past the window.
    assert data["kv_bytes_per_token"] == 36_864
    # At 10,000 tokens: 18 x 2,048 x 10,000 (full) + 18 x 2,048 x 128 (sliding, window 128).
    assert data["peak_kv_bytes_per_request"] == 18 * 2048 * 10_000 + 18 * 2048 * 128
    # Below the window every layer holds every token: 36 x 2,048 x 100.
    assert kv.kv_bytes_at_context(model, KVDtype.BF16, 100) == 36 * 2048 * 100


def test_hybrid_linear_model_state_is_fixed_per_request():
    gdn = {"kind": "gated_delta_net", "num_k_heads": 16, "num_v_heads": 32, "head_k_dim": 128, "head_v_dim": 128}
    full = {"kind": "full_attention", "kv_heads": 2, "head_dim_k": 256, "head_dim_v": 256, "q_heads": 16}
    model = ModelSpec(
        id="qwen3-next-like", name="toy hybrid", sources=("test",), num_layers=48,
        groups=(LayerGroup(name="linear", kind=gdn, layers=tuple(i for i in range(48) if i % 4 != 3)),
                LayerGroup(name="full", kind=full, layers=tuple(range(3, 48, 4)))),
    )
    data = size(model, kv_dtype=KVDtype.BF16, prompt_tokens=0, decode_tokens=1000,
                            parallelism=Parallelism(tp=2))
    # full: 12 layers x 2 heads x (256 + 256) x 2 B = 24,576 B/token; state: 36 x 1,097,728 B.
    assert data["kv_bytes_per_token"] == 24_576
    assert data["state_bytes_per_request"] == 36 * 1_097_728
    assert data["peak_kv_bytes_per_request"] == 24_576 * 1000 + 36 * 1_097_728
    # TP=2: 1 KV head per rank (12,288 B/token); GDN conv 3 x 4,096 x 2 + ssm 16 x 128 x 128 x 2 per layer.
    assert data["kv_bytes_per_token_per_gpu"] == 12_288
    assert data["state_bytes_per_request_per_gpu"] == 36 * (3 * 4096 * 2 + 16 * 128 * 128 * 2)


def test_explain_has_formula_with_numbers_and_sources():
    result = size_result(load_model("deepseek-r1"), kv_dtype=KVDtype.FP8, parallelism=Parallelism(tp=8))
    by_figure = {path: why for path, (_, why) in result.derivations().items()}
    d = by_figure["kv_bytes_per_token"]
    assert "61 x 576" in d.substituted and "35,136" in d.substituted
    assert any("huggingface.co/deepseek-ai" in s for s in d.sources)
    assert "kv_bytes_per_token_per_gpu" in by_figure


def test_mtp_copy_recomputes_its_layer_view():
    # A copy that kept the cached per-layer view of 61 layers would be wrong for the 62-layer model.
    model = load_model("deepseek-r1")
    assert len(model.layer_kinds) == 61
    grown = model.with_mtp_layers(1)
    assert grown.num_layers == 62 and len(grown.layer_kinds) == 62


def test_comparison_uses_the_model_as_sized():
    # With the MTP layer: 62 x 576 = 35,712 B/token, whole on every TP rank, so the per-GPU column agrees.
    result = size(load_model("deepseek-r1"), kv_dtype=KVDtype.FP8, include_mtp=True,
                  compare=load_model("deepseek-r1-seed-gqa"))
    assert result["kv_bytes_per_token"] == 35_712
    assert result["comparison"]["this_model_kv_bytes_per_token_per_gpu"] == 35_712
