"""Engines are adapters: every layer kind maps through every engine's own table, and a kind an engine does not
know is refused, never counted as full attention."""

import typing

import pytest

from kvplan import engines
from kvplan.errors import KvplanError
from kvplan.specs.layers import LayerKind, SlidingWindowAttention
from kvplan.specs.model import LayerGroup, ModelSpec


def layer_kind_classes():
    union = typing.get_args(LayerKind)[0]
    return typing.get_args(union)


def test_the_union_lists_six_kinds():
    names = {k.__name__ for k in layer_kind_classes()}
    assert names == {"FullAttention", "SlidingWindowAttention", "MLA", "SparseIndexer", "GatedDeltaNet", "Mamba2"}


@pytest.mark.parametrize("engine", engines.NAMES)
@pytest.mark.parametrize("kind", layer_kind_classes(), ids=lambda k: k.__name__)
def test_every_kind_has_a_rule_in_every_engine(engine, kind):
    adapter = engines.get(engine)
    assert kind in adapter.kind_table, f"{engine} has no spec for {kind.__name__}"
    assert kind in adapter.block_tokens_table, f"{engine} has no block size for {kind.__name__}"


def test_an_unknown_kind_is_refused_not_taken_for_full_attention():
    class Ring(SlidingWindowAttention):   # a new kind that subclasses a known one must still be mapped
        pass

    kind = Ring(kv_heads=8, head_dim_k=128, head_dim_v=128, window=4096)
    for name in engines.NAMES:
        with pytest.raises(KvplanError, match="no rule for layer kind Ring"):
            engines.get(name).spec_of(kind)


def test_a_model_with_an_unknown_kind_fails_in_block_sizing():
    class Ring(SlidingWindowAttention):
        pass

    model = ModelSpec(id="ring", name="ring", sources=("test",), num_layers=2, groups=(
        LayerGroup(name="r", layers=(0, 1), kind=Ring(kv_heads=8, head_dim_k=128, head_dim_v=128, window=64)),))
    with pytest.raises(KvplanError, match="no rule"):
        engines.get("vllm").block_size(model)


def test_the_cli_offers_the_registry_engines(run_cli):
    bad = run_cli("concurrency", "--engine", "trtllm")
    assert bad.code == 2 and "choose one of neutral, vllm, sglang" in bad.err


def test_python_and_cli_refuse_the_same_engine():
    from kvplan.inputs.presets import load_hardware, load_model
    from kvplan.scenario import Scenario

    with pytest.raises(KvplanError, match="unknown engine 'trtllm'"):
        Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), engine="trtllm")
    with pytest.raises(KvplanError, match="--mem-fraction-static is not a setting of --engine vllm"):
        Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), engine="vllm",
                 mem_fraction_static=0.8)


@pytest.mark.parametrize("engine, hw, step", [("neutral", "h100-sxm", "70"), ("vllm", "h100-sxm", "70"),
                                              ("sglang", "a100-80gb", "90")])
def test_plans_near_an_engine_default_step_say_so(run_cli, engine, hw, step):
    # H100: 79.65 GiB is within 15% of vLLM's 70 GiB batch-default step (|79.65 - 70| = 9.65 <= 10.5);
    # A100 80 GiB is within 15% of SGLang's 90 GiB reserve bucket (10 <= 13.5). H200 (140.4 GiB) is far from
    # vLLM's step.
    d = run_cli("concurrency", "-m", "llama-3.1-8b", "-g", hw, "--engine", engine, "-f", "json").json()
    assert any(f"defaults step at {step} GiB" in n for n in d["notes"]), d["notes"]
    far = run_cli("concurrency", "-m", "llama-3.1-8b", "-g", "h200", "--engine", "vllm", "-f", "json").json()
    assert not any("defaults step" in n for n in far["notes"])   # |140.4 - 70| = 70.4 > 10.5
