"""Properties that must hold for every layer kind, dtype and parallelism (hypothesis)."""

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvplan.calc import kv
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.layers import MLA, FullAttention, SlidingWindowAttention
from kvplan.specs.model import LayerGroup, ModelSpec
from kvplan.specs.parallel import Parallelism, pipeline_stages

DTYPES = [KVDtype.BF16, KVDtype.FP16, KVDtype.FP8, KVDtype.FP8_PER_TOKEN_HEAD, KVDtype.NVFP4]


@given(kv_heads=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 32]), head=st.sampled_from([64, 80, 96, 128, 256]),
       tp=st.sampled_from([1, 2, 3, 4, 6, 8, 16, 32, 64]), dtype=st.sampled_from(DTYPES))
def test_gqa_tp_split_never_loses_bytes(kv_heads, head, tp, dtype):
    attn = FullAttention(kv_heads=kv_heads, head_dim_k=head, head_dim_v=head)
    assume(kv_heads % tp == 0 or tp % kv_heads == 0)   # the KV heads split evenly or replicate evenly
    whole = attn.cache_bytes_per_token(dtype)
    per_rank = attn.cache_bytes_per_token(dtype, tp)
    # Split or replicated, the ranks together hold at least one copy; replication never exceeds one head each.
    assert per_rank * tp >= whole
    assert per_rank == whole // kv_heads * max(1, kv_heads // tp)


@given(tp=st.sampled_from([1, 2, 4, 8, 16]), dtype=st.sampled_from([KVDtype.BF16, KVDtype.FP8, KVDtype.NVFP4]))
def test_mla_is_whole_on_every_rank(tp, dtype):
    mla = MLA(kv_lora_rank=512, qk_rope_head_dim=64, q_heads=128)
    assert mla.cache_bytes_per_token(dtype, tp) == mla.cache_bytes_per_token(dtype)


@given(window=st.integers(1, 100_000), a=st.integers(0, 500_000), b=st.integers(0, 500_000))
def test_sliding_window_is_monotone_and_capped(window, a, b):
    swa = SlidingWindowAttention(kv_heads=8, head_dim_k=64, head_dim_v=64, window=window)
    lo, hi = sorted((a, b))
    assert swa.bytes_at_context(KVDtype.BF16, lo) <= swa.bytes_at_context(KVDtype.BF16, hi)
    assert swa.bytes_at_context(KVDtype.BF16, hi) <= window * swa.cache_bytes_per_token(KVDtype.BF16)


@given(layers=st.integers(1, 200), pp=st.integers(1, 64))
def test_pipeline_stages_cover_every_layer_once(layers, pp):
    assume(pp <= layers)
    stages = pipeline_stages(layers, pp)
    assert len(stages) == pp
    assert [i for s in stages for i in s] == list(range(layers))
    sizes = [len(s) for s in stages]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=50)
@given(layers=st.integers(2, 96), pp=st.integers(1, 8), tp=st.sampled_from([1, 2, 4, 8]),
       context=st.integers(1, 300_000))
def test_per_gpu_never_exceeds_whole_model(layers, pp, tp, context):
    assume(pp <= layers)
    model = ModelSpec(id="t", name="t", sources=("test",), num_layers=layers, groups=(
        LayerGroup(name="a", layers=tuple(range(layers)),
                   kind={"kind": "full_attention", "kv_heads": 8, "head_dim_k": 128, "head_dim_v": 128}),))
    par = Parallelism(tp=tp, pp=pp)
    whole = kv.kv_bytes_at_context(model, KVDtype.BF16, context)
    per_gpu = kv.kv_bytes_at_context_per_gpu(model, KVDtype.BF16, context, par).value
    assert per_gpu <= whole
    # The most loaded stage holds ceil(layers / pp) layers at most, each split over tp.
    assert per_gpu * tp * pp >= whole
