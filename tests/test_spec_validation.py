"""The spec classes are plain frozen dataclasses: their invariants hold on every construction, user presets
are validated strictly (pydantic at the boundary), and the trusted built-in path never loads pydantic."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan
from kvplan.errors import KvplanError
from kvplan.inputs.presets import build_hardware, build_model, load_hardware, load_model
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.hardware import HardwareSpec, HostLink, NodeSpec
from kvplan.specs.layers import MLA, FullAttention, SlidingWindowAttention
from kvplan.specs.model import LayerGroup, ModelSpec, Sourced
from kvplan.specs.parallel import Parallelism

ATTN = {"kind": "full_attention", "kv_heads": 2, "head_dim_k": 64, "head_dim_v": 64}


def model_data(**kind_fields) -> dict:
    return {"type": "model", "id": "tiny", "name": "Tiny", "sources": ["made up for a test"], "num_layers": 2,
            "groups": [{"name": "attn", "layers": "all", "kind": {**ATTN, **kind_fields}}]}


def user_error(data: dict) -> str:
    with pytest.raises(KvplanError) as info:
        build_model(data, "tiny.toml")
    line = info.value.one_line()
    assert "\n" not in line and line.startswith("error: tiny.toml: ")
    return line


# --- strict types in a user preset ------------------------------------------------------------------


@pytest.mark.parametrize("value", [True, "8", 8.0, None])
def test_a_preset_whole_number_must_be_a_whole_number(value):
    # pydantic models read kv_heads = true as 1 and "8" as 8; the boundary check refuses both now.
    line = user_error(model_data(kv_heads=value))
    assert "groups.0.kind.full_attention.kv_heads" in line and "valid integer" in line


def test_a_preset_figure_must_be_a_number():
    data = {**model_data(), "params_total": {"value": True, "source": "a card"}}
    assert "params_total.value: Input should be a valid number" in user_error(data)
    data["params_total"] = {"value": "8e9", "source": "a card"}
    assert "params_total.value" in user_error(data)


def test_every_problem_of_a_bad_preset_is_reported_on_one_line():
    data = {**model_data(kv_heads=0, head_dim_k=2_000_000, colour="red"), "weight_dtype": 4}
    line = user_error(data)
    for where in ("groups.0.kind.full_attention.kv_heads: Input should be greater than 0",
                  "groups.0.kind.full_attention.head_dim_k: Input should be less than or equal to 1000000",
                  "groups.0.kind.full_attention.colour", "weight_dtype"):
        assert where in line, where
    assert line.count(";") == 3  # four problems, joined


def test_unknown_layer_kind_and_missing_kind_are_named():
    assert "groups.0.kind" in user_error(model_data(kind="rnn")) and "'rnn'" in user_error(model_data(kind="rnn"))
    data = model_data()
    del data["groups"][0]["kind"]["kind"]
    assert "groups.0.kind" in user_error(data)


def test_empty_lists_are_named_once():
    data = {**model_data(), "sources": [], "groups": []}
    line = user_error(data)
    assert "sources: should have at least 1 item" in line and "groups: should have at least 1 item" in line


def test_a_valid_user_preset_gives_the_same_spec_as_direct_construction():
    spec = build_model(model_data(q_heads=8), "tiny.toml")
    direct = ModelSpec(id="tiny", name="Tiny", sources=("made up for a test",), num_layers=2, groups=(
        LayerGroup(name="attn", layers=(1, 0), kind=FullAttention(kv_heads=2, head_dim_k=64, head_dim_v=64,
                                                                   q_heads=8)),))
    assert spec == direct and direct.groups[0].layers == (0, 1)
    # 2 layers x 2 heads x (64 + 64) x 2 B = 1,024 B per token.
    assert sum(k.cache_bytes_per_token(KVDtype.BF16) for kinds in spec.layer_kinds for k in kinds) == 1024


def test_user_hardware_preset_is_checked_strictly(tmp_path):
    from kvplan.inputs.presets import builtin_dir

    text = (builtin_dir() / "hardware" / "h100-sxm.toml").read_text()
    path = tmp_path / "hw.toml"
    path.write_text(text.replace("gpus_per_node = 8", "gpus_per_node = true"))
    assert "gpus_per_node = true" in path.read_text()
    with pytest.raises(KvplanError, match=r"node\.gpus_per_node: Input should be a valid integer"):
        load_hardware(str(path))
    path.write_text(text)
    assert load_hardware(str(path)) == load_hardware("h100-sxm")


def test_a_bad_user_preset_is_one_line_on_the_cli(run_cli, tmp_path):
    (tmp_path / "tiny.toml").write_text(
        'type = "model"\nid = "tiny"\nname = "Tiny"\nsources = ["made up"]\nnum_layers = 2\n'
        '[[groups]]\nname = "attn"\nlayers = "all"\n'
        'kind = { kind = "full_attention", kv_heads = "8", head_dim_k = true, head_dim_v = 64 }\n')
    r = run_cli("size", "-m", "tiny", "--presets-dir", str(tmp_path))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "kv_heads" in r.err and "head_dim_k" in r.err


# --- invariants on direct construction (__post_init__) -------------------------------------------------


@pytest.mark.parametrize("build, needle", [
    (lambda: FullAttention(kv_heads=8, head_dim_k=128, head_dim_v=128, q_heads=12), "not a multiple"),
    (lambda: FullAttention(kv_heads=True, head_dim_k=128, head_dim_v=128), "kv_heads = True is not a whole"),
    (lambda: FullAttention(kv_heads=8, head_dim_k=1_000_001, head_dim_v=128), "at most 1,000,000"),
    (lambda: FullAttention(kv_heads=0, head_dim_k=128, head_dim_v=128), "greater than 0"),
    (lambda: SlidingWindowAttention(kv_heads=8, head_dim_k=64, head_dim_v=64, window=0), "window"),
    (lambda: MLA(kv_lora_rank=512, qk_rope_head_dim=64, fp8_layout="ds"), "fp8_layout"),
    (lambda: LayerGroup(name="a", kind=MLA(kv_lora_rank=512, qk_rope_head_dim=64), layers=()), "at least one"),
    (lambda: LayerGroup(name="a", kind=MLA(kv_lora_rank=512, qk_rope_head_dim=64), layers=(1, 1)), "twice"),
    (lambda: LayerGroup(name="a", kind=MLA(kv_lora_rank=512, qk_rope_head_dim=64), layers=(-1,)), "at least 0"),
    (lambda: Sourced(value=float("nan"), source="test"), "finite"),
    (lambda: Sourced(value=1.0, source="ab"), "at least 3 characters"),
    (lambda: Parallelism(tp=0), "tp = 0"),
    (lambda: Parallelism(dp=4097), "at most 4,096"),
    (lambda: Parallelism(ep=True), "ep = True"),
    (lambda: NodeSpec(gpus_per_node=1025), "gpus_per_node"),
])
def test_constructor_checks(build, needle):
    with pytest.raises(ValueError, match=needle):
        build()


def _tiny(**changes) -> ModelSpec:
    fields = dict(id="t", name="t", sources=("test",), num_layers=2,
                  groups=(LayerGroup(name="a", layers=(0, 1), kind=FullAttention(**{k: v for k, v in ATTN.items()
                                                                                     if k != "kind"})),))
    return ModelSpec(**{**fields, **changes})


def test_model_invariants():
    with pytest.raises(ValueError, match=r"layers \[2\] carry no cache kind"):
        _tiny(num_layers=3)
    with pytest.raises(ValueError, match="names layer 1 but the model has 1 layers"):
        _tiny(num_layers=1)
    with pytest.raises(ValueError, match="num_layers = 10,001 must be at most 10,000"):
        _tiny(num_layers=10_001)
    with pytest.raises(ValueError, match="mtp_layers = 65"):
        _tiny(mtp_layers=65)
    with pytest.raises(ValueError, match="unknown weight dtype 'fp7'"):
        _tiny(weight_dtype="fp7")
    with pytest.raises(ValueError, match="params_total must be positive"):
        _tiny(params_total=Sourced(value=0, source="test"))
    with pytest.raises(ValueError, match="sources needs at least 1 item"):
        _tiny(sources=())
    assert _tiny(sources=["a list"]).sources == ("a list",)  # sequences become tuples, as before


def test_hardware_invariants():
    h100 = load_hardware("h100-sxm")
    with pytest.raises(ValueError, match="host_link.large_copy_efficiency is a fraction"):
        dataclasses.replace(h100, host_link=dataclasses.replace(
            h100.host_link, large_copy_efficiency=Sourced(value=1.2, source="test")))
    with pytest.raises(ValueError, match=r"unknown compute dtype\(s\) \['fp6'\]"):
        dataclasses.replace(h100, dense_tflops={**h100.dense_tflops, "fp6": Sourced(value=1, source="test")})
    # A preset needs only the figures a calculation uses: no bandwidth or compute peak is required to exist.
    bare = dataclasses.replace(h100, dense_tflops={}, hbm_bandwidth_tb_s=None)
    assert bare.hbm_bytes == h100.hbm_bytes
    with pytest.raises(ValueError, match="absurd"):
        dataclasses.replace(h100, hbm_capacity_gib=Sourced(value=100_001, source="test"))
    with pytest.raises(ValueError, match="node.host_dram_gb must be positive"):
        dataclasses.replace(h100, node=NodeSpec(host_dram_gb=Sourced(value=-1, source="test")))
    assert isinstance(h100.host_link, HostLink) and h100.node.gpus_per_node == 8
    # 79.65 GiB as the device reports it: 80 x 2^30 - 0.35 x 2^30 = 85,899,345,920 - 375,809,638.4
    # = 85,523,536,281.6, rounded to 85,523,536,282 B.
    assert h100.hbm_bytes == 85_523_536_282


def test_figures_are_stored_as_floats():
    # A whole number from TOML or a caller is the float it stands for (pydantic coerced it the same way).
    assert type(Sourced(value=4, source="test").value) is float
    assert type(load_hardware("h100-sxm").dense_tflops["bf16"].value) is float


def test_plain_dicts_for_nested_specs_are_built():
    group = LayerGroup(name="w", layers=[3, 0, 1, 2], kind={"kind": "sliding_window", "window": 128, **{
        k: v for k, v in ATTN.items() if k != "kind"}})
    assert type(group.kind) is SlidingWindowAttention and group.layers == (0, 1, 2, 3)
    # 2 heads x (64 + 64) x 2 B = 512 B per token, at most 128 tokens: 65,536 B at any longer context.
    assert group.kind.bytes_at_context(KVDtype.BF16, 10_000) == 128 * 512 == 65_536
    with pytest.raises(ValueError, match="unknown field.s. colour for FullAttention"):
        LayerGroup(name="w", layers=(0,), kind={"kind": "full_attention", "kv_heads": 2, "head_dim_k": 64,
                                                "head_dim_v": 64, "colour": "red"})


def test_replace_checks_again_and_specs_are_frozen():
    par = Parallelism(tp=8, dp=2)
    assert dataclasses.replace(par, pp=2).gpus == 8 * 2 * 2 == 32
    with pytest.raises(ValueError):
        dataclasses.replace(par, tp=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        par.tp = 4  # type: ignore[misc]


def test_mtp_layers_are_bounded_and_relaid():
    r1 = load_model("deepseek-r1")
    grown = r1.with_mtp_layers(2)
    # 61 + 2 = 63 layers, each with the MLA latent of the last: 63 x 576 x 1 B (fp8) = 36,288 B per token.
    assert grown.num_layers == 63 and len(grown.layer_kinds) == 63
    assert sum(k.cache_bytes_per_token(KVDtype.FP8) for kinds in grown.layer_kinds for k in kinds) == 36_288
    with pytest.raises(KvplanError, match="absurd"):
        r1.with_mtp_layers(1_000_000)


def test_builtin_presets_load_without_pydantic():
    # The trusted path (built-in presets, spec classes, the size calculator) imports none of pydantic.
    code = ("import sys\n"
            "from kvplan.inputs.presets import load_model, load_hardware\n"
            "from kvplan.calc.size import plan_size\n"
            "from kvplan.present.size import present\n"
            "from kvplan.scenario import Scenario\n"
            "present(plan_size(Scenario(model=load_model('deepseek-r1'), hardware=load_hardware('h200'),\n"
            "                           kv_dtype_request='fp8')))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(Path(kvplan.__file__).resolve().parent.parent)).stdout
    assert out.strip() == "[]", out


def test_untrusted_path_still_builds_builtin_files_equally():
    from kvplan.inputs.presets import builtin_dir, read_toml

    path = builtin_dir() / "models" / "deepseek-v3.2-exp.toml"
    assert build_model(read_toml(path), str(path)) == load_model("deepseek-v3.2-exp")
    hw_path = builtin_dir() / "hardware" / "b200.toml"
    assert build_hardware(read_toml(hw_path), str(hw_path)) == load_hardware("b200")
    assert isinstance(load_hardware("b200"), HardwareSpec)
