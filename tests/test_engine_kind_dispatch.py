"""Engines dispatch on the layer-kind classes through their tables: every kind of the ``LayerKind`` union goes
through every engine's model-level rules, and a kind an engine's table does not know (a test-local subclass of a
known one included) is refused with a one-line error by each of those rules and by a whole plan, never half
handled (e.g. passing an MLA dtype check because its ``kind`` tag still says "mla")."""

import typing
from dataclasses import dataclass

import pytest

import kvplan
from kvplan import engines
from kvplan.errors import KvplanError
from kvplan.inputs.presets import load_hardware
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.layers import (
    MLA,
    FullAttention,
    GatedDeltaNet,
    LayerKind,
    Mamba2,
    SlidingWindowAttention,
    SparseIndexer,
)
from kvplan.specs.model import LayerGroup, ModelSpec
from kvplan.specs.parallel import Parallelism

# One instance of every kind in the union (shapes of DeepSeek-V3, Llama-3 and Qwen3-Next layers).
INSTANCES = {
    FullAttention: FullAttention(kv_heads=8, head_dim_k=128, head_dim_v=128, q_heads=64),
    SlidingWindowAttention: SlidingWindowAttention(kv_heads=8, head_dim_k=128, head_dim_v=128, window=4096),
    MLA: MLA(kv_lora_rank=512, qk_rope_head_dim=64),
    SparseIndexer: SparseIndexer(index_head_dim=128),
    GatedDeltaNet: GatedDeltaNet(num_k_heads=16, num_v_heads=32, head_k_dim=128, head_v_dim=128),
    Mamba2: Mamba2(n_heads=128, head_dim=64, state_size=128),
}


def model_of(*kinds) -> ModelSpec:
    return ModelSpec(id="test-model", name="test model", sources=("test",), num_layers=2,
                     params_total=kvplan.load_model("deepseek-r1").params_total,
                     groups=tuple(LayerGroup(name=f"g{i}", layers=(0, 1), kind=k) for i, k in enumerate(kinds)))


@dataclass(frozen=True, kw_only=True)
class LatentV2(MLA):
    """A new kind no engine maps: its ``kind`` tag is still "mla", as a subclass's is unless it sets its own."""


def test_the_instances_cover_the_union():
    assert set(INSTANCES) == set(typing.get_args(typing.get_args(LayerKind)[0]))


@pytest.mark.parametrize("engine", engines.NAMES)
@pytest.mark.parametrize("kind", list(INSTANCES), ids=lambda k: k.__name__)
def test_every_kind_goes_through_every_engine(engine, kind):
    adapter = engines.get(engine)
    # an attention layer beside a state layer, as hybrid models have them
    model = model_of(INSTANCES[kind]) if kind not in (GatedDeltaNet, Mamba2) else model_of(
        INSTANCES[FullAttention], INSTANCES[kind])
    assert kind in adapter.kinds(model)
    assert adapter.block_size(model, hardware=load_hardware("h200")).value >= 1
    adapter.kv_dtype_problem(KVDtype.BF16, model)


def test_dispatch_is_by_class():
    vllm, sglang = engines.get("vllm"), engines.get("sglang")
    mla, gqa = model_of(INSTANCES[MLA]), model_of(INSTANCES[FullAttention])
    # vLLM: no nvfp4 for an MLA latent (no MLA backend lists it); a GQA model is not refused for it
    assert "no nvfp4 KV cache for MLA models" in vllm.kv_dtype_problem(KVDtype.NVFP4, mla)[0]
    assert vllm.kv_dtype_problem(KVDtype.NVFP4, gqa) is None
    # SGLang stores fp8_ds_mla as plain fp8_e4m3 on an MLA model without the sparse indexer ...
    assert "plain fp8_e4m3" in sglang.kv_dtype_problem(KVDtype.FP8_DS_MLA, mla)[0]
    # ... but not on one with it (DeepSeek V3.2's NSA pool)
    assert sglang.kv_dtype_problem(KVDtype.FP8_DS_MLA, model_of(INSTANCES[MLA], INSTANCES[SparseIndexer])) is None
    assert model_of(INSTANCES[SlidingWindowAttention]).uses(SlidingWindowAttention)
    assert not model_of(INSTANCES[SlidingWindowAttention]).uses(FullAttention)   # exact class, as the tables


ENTRIES = {
    "kinds": lambda e, m: e.kinds(m),
    "block_size": lambda e, m: e.block_size(m, hardware=load_hardware("h200")),
    "kv_dtype_problem fp8": lambda e, m: e.kv_dtype_problem(KVDtype.FP8, m),
    "kv_dtype_problem nvfp4": lambda e, m: e.kv_dtype_problem(KVDtype.NVFP4, m),
    "kv_dtype_problem fp8_ds_mla": lambda e, m: e.kv_dtype_problem(KVDtype.FP8_DS_MLA, m),
}


@pytest.mark.parametrize("engine", engines.NAMES)
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_a_kind_not_in_the_table_is_refused_by_every_rule(engine, entry):
    adapter = engines.get(engine)
    with pytest.raises(KvplanError) as err:
        ENTRIES[entry](adapter, model_of(INSTANCES[FullAttention], LatentV2(kv_lora_rank=512, qk_rope_head_dim=64)))
    assert err.value.message == f"the {adapter.id} adapter has no rule for layer kind LatentV2"
    assert err.value.hint == f"add LatentV2 to kvplan/engines/{adapter.id}.py's kind table"


def test_engine_specific_rules_refuse_it_too():
    model = model_of(LatentV2(kv_lora_rank=512, qk_rope_head_dim=64))
    vllm, sglang = engines.get("vllm"), engines.get("sglang")
    refusals = [lambda: vllm.config(model, KVDtype.BF16, Parallelism(), 2**30, 4096, 8192),
                lambda: sglang.cell_size(model, KVDtype.BF16, Parallelism()),
                lambda: sglang.pool(model, KVDtype.BF16, Parallelism(), 2**30)]
    for refuse in refusals:
        with pytest.raises(KvplanError, match="no rule for layer kind LatentV2"):
            refuse()


@pytest.mark.parametrize("engine", engines.NAMES)
def test_a_plan_with_an_unmapped_kind_fails_in_one_line(engine):
    model = model_of(LatentV2(kv_lora_rank=512, qk_rope_head_dim=64))
    with pytest.raises(KvplanError, match=f"the {engine} adapter has no rule for layer kind LatentV2"):
        s = kvplan.Scenario(model=model, hardware=load_hardware("h200"), engine=engine, kv_dtype_request="bf16")
        kvplan.plan_concurrency(s)
