"""The built-in presets: every one loads, every figure carries a source, and the KV bytes per token that
follow from each model's layers match hand arithmetic."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.inputs.presets import build_hardware, build_model, discover, load_hardware, load_model, validate
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec, Sourced

BF16, FP8 = KVDtype.BF16, KVDtype.FP8

EXPECTED_MODELS = {
    "deepseek-r1", "deepseek-r1-seed-gqa", "deepseek-v3.2-exp", "llama-3.1-70b", "llama-3.1-8b",
    "qwq-32b", "qwen3-32b", "qwen3-235b-a22b", "gpt-oss-120b",
    "gpt-oss-20b", "qwen3-30b-a3b", "deepseek-r1-distill-llama-70b", "deepseek-r1-distill-qwen-32b",
    "deepseek-v3.1", "kimi-k2", "glm-4.5", "glm-4.6", "minimax-m2", "qwen3-next-80b-a3b",
}
EXPECTED_HARDWARE = {"h100-sxm", "h200", "b200", "a100-80gb", "h20", "mi300x", "l40s", "h800", "h100-pcie", "mi325x",
                     "gb200", "mi355x", "b300"}
SOURCE_KINDS = {"D", "M", "T", "X", "C"}

BUILTIN = {kind: {pid: p for pid, p in presets.items() if p.builtin} for kind, presets in discover().items()}


def kv_bytes_per_token(model: ModelSpec, dtype: KVDtype) -> int:
    """Whole-model bytes each further token adds: sum over layers of every kind the layer carries.
    Sliding windows add nothing once full, so marginal bytes count only the layers that keep growing."""
    return sum(kind.marginal_bytes_per_token(dtype) for kinds in model.layer_kinds for kind in kinds)


def sourced_figures(obj, path: str = "") -> list[tuple[str, Sourced]]:
    """Every Sourced value anywhere inside a spec, with its field path."""
    found: list[tuple[str, Sourced]] = []
    for field in dataclasses.fields(obj):
        name = field.name
        value = getattr(obj, name)
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for key, item in items:
            where = f"{path}{name}" + (f"[{key}]" if key is not None else "")
            if isinstance(item, Sourced):
                found.append((where, item))
            elif dataclasses.is_dataclass(item):
                found.extend(sourced_figures(item, where + "."))
    return found


# --- every preset loads and is well formed ---------------------------------------------------------


def test_builtin_presets_are_all_there():
    assert EXPECTED_MODELS <= set(BUILTIN["model"])
    assert EXPECTED_HARDWARE <= set(BUILTIN["hardware"])


@pytest.mark.parametrize("kind", ["model", "hardware"])
def test_id_is_the_file_stem(kind):
    for preset_id, preset in BUILTIN[kind].items():
        assert preset.data["type"] == kind
        assert preset.data["id"] == preset.path.stem == preset_id


@pytest.mark.parametrize("model_id", sorted(EXPECTED_MODELS))
def test_model_loads_with_sources(model_id):
    model = load_model(model_id)
    assert model.id == model_id
    assert model.sources and all(s.strip() for s in model.sources)
    assert model.params_total is not None and model.params_active is not None
    assert model.params_active.value <= model.params_total.value
    for where, figure in sourced_figures(model):
        assert figure.source.strip(), f"{model_id}.{where} has no source"
        assert figure.kind in SOURCE_KINDS, f"{model_id}.{where} kind {figure.kind!r}"
    assert model.weight_bytes_estimate() is not None


@pytest.mark.parametrize("model_id", sorted(EXPECTED_MODELS - {"deepseek-r1-seed-gqa"}))
def test_real_models_cite_their_hf_config(model_id):
    model = load_model(model_id)
    assert any(s.startswith("https://huggingface.co/") and "config.json" in s for s in model.sources)


@pytest.mark.parametrize("hardware_id", sorted(EXPECTED_HARDWARE))
def test_hardware_loads_with_sources(hardware_id):
    hw = load_hardware(hardware_id)
    assert hw.id == hardware_id
    assert hw.sources and all(s.strip() for s in hw.sources)
    figures = sourced_figures(hw)
    assert {"hbm_capacity_gib", "hbm_bandwidth_tb_s", "dense_tflops[bf16]",
            "host_link.theoretical_gb_s_per_direction"} <= {where for where, _ in figures}
    for where, figure in figures:
        assert figure.source.strip(), f"{hardware_id}.{where} has no source"
        assert figure.kind in SOURCE_KINDS, f"{hardware_id}.{where} kind {figure.kind!r}"
    # 8 per HGX/OAM board; a GB200 NVL72 compute tray holds 2 superchips = 4 GPUs
    assert hw.node.gpus_per_node == (4 if hardware_id == "gb200" else 8)
    # The reported total is never above the vendor's figure read as GiB (hardware.md pitfall 1).
    if hw.hbm_capacity_vendor_gb is not None:
        assert hw.hbm_capacity_gib.value <= hw.hbm_capacity_vendor_gb.value


def test_hardware_efficiency_follows_the_link_generation():
    # hardware.md §9: pcie_eff_large 0.8 on Gen4, 0.87 on Gen5.
    for hardware_id in EXPECTED_HARDWARE:
        link = load_hardware(hardware_id).host_link
        if "PCIe" not in link.name:   # GB200's NVLink-C2C has its own measured copy rates
            continue
        expected = 0.8 if "Gen4" in link.name else 0.87
        assert link.large_copy_efficiency is not None
        assert link.large_copy_efficiency.value == expected, hardware_id


@pytest.mark.parametrize("kind,preset_id", [(kind, pid) for kind in ("model", "hardware")
                                             for pid in sorted(BUILTIN[kind])])
def test_builtin_preset_passes_pydantic_and_builds_the_same_spec(kind, preset_id):
    # Built-in presets skip pydantic at start-up (trusted); the strict boundary check must accept each of them
    # too, and give an equal object, so the trusted path hides no preset a user could not have written.
    preset = BUILTIN[kind][preset_id]
    build, cls = (build_model, ModelSpec) if kind == "model" else (build_hardware, HardwareSpec)
    trusted = build(preset.data, str(preset.path), trusted=True)
    checked = build(preset.data, str(preset.path), trusted=False)
    assert type(trusted) is type(checked) is cls
    assert trusted == checked
    # and the trusted object's own plain data validates back to it
    assert validate(cls, dataclasses.asdict(trusted), preset_id) == trusted
    assert (load_model if kind == "model" else load_hardware)(preset_id) == trusted


# --- KV bytes per token, pinned by hand --------------------------------------------------------------


def test_deepseek_r1_is_mla():
    model = load_model("deepseek-r1")
    # 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements):
    # bf16 61 x 576 x 2 = 70,272 B; fp8 61 x 576 x 1 = 35,136 B.
    assert kv_bytes_per_token(model, BF16) == 70_272
    assert kv_bytes_per_token(model, FP8) == 35_136
    assert model.mtp_layers == 1 and model.weight_dtype == "fp8"
    assert model.uses_kind("mla") and not model.uses_kind("full_attention")


def test_seed_gqa_reproduces_the_documents_arithmetic():
    model = load_model("deepseek-r1-seed-gqa")
    # The workload document: 2 (K and V) x 61 layers x 8 KV heads x 128 dims x 1 B = 124,928 B.
    assert kv_bytes_per_token(model, FP8) == 2 * 61 * 8 * 128 * 1 == 124_928
    assert "hypothetical" in model.description.lower() and "MLA" in model.description
    # 3.56x the real MLA cache: 124,928 / 35,136.
    assert kv_bytes_per_token(model, FP8) > 3 * kv_bytes_per_token(load_model("deepseek-r1"), FP8)


def test_deepseek_v32_adds_the_indexer_and_ds_mla_layout():
    model = load_model("deepseek-v3.2-exp")
    # fp8 -> fp8_ds_mla: 512 + 512/128 x 4 + 64 x 2 = 656 B; indexer 128 + 128/128 x 4 = 132 B (any dtype).
    # 61 x (656 + 132) = 61 x 788 = 48,068 B.
    assert kv_bytes_per_token(model, FP8) == 61 * (656 + 132) == 48_068
    # bf16: 576 x 2 = 1,152 B + 132 B indexer; 61 x 1,284 = 78,324 B.
    assert kv_bytes_per_token(model, BF16) == 61 * (1152 + 132) == 78_324
    assert all(len(kinds) == 2 for kinds in model.layer_kinds)
    indexer = next(g.kind for g in model.groups if g.kind.kind == "sparse_indexer")
    assert (indexer.index_head_dim, indexer.index_heads, indexer.index_topk) == (128, 64, 2048)


def test_llama_31_70b():
    # 2 x 80 layers x 8 KV heads x 128 dims x 2 B = 327,680 B.
    assert kv_bytes_per_token(load_model("llama-3.1-70b"), BF16) == 2 * 80 * 8 * 128 * 2 == 327_680


def test_qwen3_32b_uses_the_explicit_head_dim():
    model = load_model("qwen3-32b")
    # 2 x 64 layers x 8 KV heads x 128 dims x 2 B = 262,144 B.
    assert kv_bytes_per_token(model, BF16) == 2 * 64 * 8 * 128 * 2 == 262_144
    (kind,) = {g.kind for g in model.groups}
    # head_dim 128 from config.json, not hidden 5120 / 64 heads = 80.
    assert model.hidden_size // model.num_attention_heads == 80
    assert kind.head_dim_k == kind.head_dim_v == 128


def test_qwq_32b_has_no_sliding_window():
    model = load_model("qwq-32b")
    # 2 x 64 layers x 8 KV heads x 128 dims (5120 / 40) x 2 B = 262,144 B.
    assert kv_bytes_per_token(model, BF16) == 2 * 64 * 8 * 128 * 2 == 262_144
    assert not model.uses_kind("sliding_window")
    assert all(kinds[0].kind == "full_attention" for kinds in model.layer_kinds)


def test_qwen3_235b():
    # 2 x 94 layers x 4 KV heads x 128 dims x 2 B = 192,512 B.
    assert kv_bytes_per_token(load_model("qwen3-235b-a22b"), BF16) == 2 * 94 * 4 * 128 * 2 == 192_512


def test_gpt_oss_120b_alternates_sliding_and_full():
    model = load_model("gpt-oss-120b")
    # Only the 18 full layers keep growing: 18 x 2 x 8 KV heads x 64 dims x 2 B = 36,864 B.
    assert kv_bytes_per_token(model, BF16) == 18 * 2 * 8 * 64 * 2 == 36_864
    sliding = [i for i, kinds in enumerate(model.layer_kinds) if kinds[0].kind == "sliding_window"]
    assert sliding == list(range(0, 36, 2))  # layer 0 is sliding
    assert all(model.layer_kinds[i][0].window == 128 for i in sliding)
    # Within the window every layer holds tokens: 36 x 2 x 8 x 64 x 2 = 73,728 B.
    assert sum(k.cache_bytes_per_token(BF16) for kinds in model.layer_kinds for k in kinds) == 73_728
    assert model.weight_dtype == "mxfp4"


# --- hardware figures ---------------------------------------------------------------------------------


def test_hardware_pinned_figures():
    assert load_hardware("h200").hbm_capacity_gib.value == pytest.approx(140.40)
    assert load_hardware("b200").hbm_capacity_gib.value == pytest.approx(179.06)
    assert load_hardware("h100-sxm").dense_tflops["bf16"].value == 989
    assert load_hardware("b200").hbm_bandwidth_tb_s.value == pytest.approx(7.7)


def test_h20_capacity_is_marked_as_an_assumption():
    capacity = load_hardware("h20").hbm_capacity_gib
    assert capacity.kind == "X"
    assert "assumption" in capacity.source.lower()


def test_l40s_has_no_scale_up_link():
    assert load_hardware("l40s").scale_up is None


def test_h800_is_an_h100_die_with_cut_nvlink():
    h800, h100 = load_hardware("h800"), load_hardware("h100-sxm")
    # FlashMLA deep-dive (deepseek-ai/FlashMLA#75): 3.35 TB/s and 989 TFLOPS dense BF16, as on H100 SXM.
    assert h800.hbm_bandwidth_tb_s.value == h100.hbm_bandwidth_tb_s.value == 3.35
    assert h800.dense_tflops["bf16"].value == h100.dense_tflops["bf16"].value == 989
    # DeepSeek: 400 GB/s bidirectional theoretical = 200 per direction (DeepEP#16, DeepSeek-V3#28), against
    # H100's 900 / 2 = 450; ~160 GB/s achieved: 160 / 200 = 0.80.
    assert h800.scale_up.gb_s_per_direction.value == 200 and h100.scale_up.gb_s_per_direction.value == 450
    assert h800.efficiency.link.value == pytest.approx(160 / 200) and h800.efficiency.link.kind == "M"
    # one 400 Gb/s CX7 per GPU = 50 GB/s (DeepEP README)
    assert h800.node.nic_gb_s_per_direction_per_gpu.value == 400 / 8
    assert h800.hbm_capacity_gib.kind == "X" and "assumption" in h800.hbm_capacity_gib.source.lower()
    assert h800.price is None


def test_h100_pcie_datasheet_figures():
    hw = load_hardware("h100-pcie")
    # NVIDIA H100 PCIe: 2,000 GB/s HBM2e; 1,513 TFLOPS BF16 and 3,026 FP8 with sparsity, halved for dense.
    assert hw.hbm_bandwidth_tb_s.value == 2.0
    assert hw.dense_tflops["bf16"].value == 1513 // 2 and hw.dense_tflops["fp8"].value == 3026 / 2
    assert hw.scale_up is None                  # NVLink bridges join pairs only
    assert hw.price.usd_per_gpu_hour.value == 3.29 and hw.price.as_of == "2026-09-20"


def test_mi325x_is_mi300x_compute_with_more_hbm():
    mi325x, mi300x = load_hardware("mi325x"), load_hardware("mi300x")
    # AMD: 256 GB HBM3E at 6 TB/s against 192 GB at 5.3; the same CDNA3 dense peaks (1,307.4 / 2,614.9).
    assert (mi325x.hbm_capacity_vendor_gb.value, mi325x.hbm_bandwidth_tb_s.value) == (256, 6.0)
    assert mi325x.dense_tflops["bf16"].value == mi300x.dense_tflops["bf16"].value == 1307.4
    assert mi325x.dense_tflops["fp8"].value == mi300x.dense_tflops["fp8"].value == 2614.9
    # 256 x 191.98 / 192 = 255.97 GiB (the MI300X's reported-to-vendor ratio), marked as an assumption
    assert mi325x.hbm_capacity_gib.value == pytest.approx(256 * 191.98 / 192, abs=0.005)
    assert mi325x.hbm_capacity_gib.kind == "X"


@pytest.mark.parametrize("hardware_id,price", [("h100-sxm", 3.99), ("b200", 6.69), ("a100-80gb", 2.79),
                                               ("h100-pcie", 3.29)])
def test_public_prices_carry_offer_date_and_source(hardware_id, price):
    # Lambda on-demand per GPU-hour, https://lambda.ai/instances read 2026-09-20: 8x H100 SXM $3.99,
    # 8x B200 SXM6 $6.69, 8x A100 SXM 80 GB $2.79, 1x H100 PCIe $3.29.
    p = load_hardware(hardware_id).price
    assert p.usd_per_gpu_hour.value == price and p.as_of == "2026-09-20"
    assert "lambda.ai/instances" in p.usd_per_gpu_hour.source and p.offer.startswith("Lambda")


# --- the presets of reasoning models people deploy: KV per token and parameter counts by hand ---------------------
# Each model's figures below are worked out from its config.json (the numbers in the comments), independently of
# kvplan: KV bytes per token, the routed-expert parameters, and the active weight-matmul parameters, which must
# land within a stated tolerance of the count its model card publishes.

NEW_MODELS = {"gpt-oss-20b", "qwen3-30b-a3b", "deepseek-r1-distill-llama-70b", "deepseek-r1-distill-qwen-32b",
              "deepseek-v3.1", "kimi-k2", "glm-4.5", "glm-4.6", "minimax-m2", "qwen3-next-80b-a3b"}


def test_new_models_are_listed_with_the_others():
    assert NEW_MODELS <= set(BUILTIN["model"])
    assert NEW_MODELS <= EXPECTED_MODELS


def _within(derived: float, published: float, tolerance: float) -> bool:
    return abs(derived - published) <= tolerance * published


def test_gpt_oss_weights_are_mxfp4_experts_plus_bf16_rest():
    """The rule: expert matrices (layers x experts x 3 x 2880 x 2880) at 4.25 bits (MXFP4), every other parameter
    BF16. On gpt-oss-20b it gives the published index total_size exactly, so the 120b figure follows it."""
    # experts: 24 x 32 x 3 x 2880 x 2880 = 19,110,297,600 parameters;
    # 19,110,297,600 x 17 / 32 + (20,914,757,184 - 19,110,297,600) x 2 = 10,152,345,600 + 3,608,919,168
    assert load_model("gpt-oss-20b").weight_bytes.value == 13_761_264_768
    experts_120b = 36 * 128 * 3 * 2880 * 2880                      # 114,661,785,600
    m = load_model("gpt-oss-120b")
    assert m.expert_weight_bytes.value == experts_120b * 17 // 32 == 60_914_073_600
    assert m.weight_bytes.value == 60_914_073_600 + (116_829_156_672 - experts_120b) * 2 == 65_248_815_744


def test_gpt_oss_20b():
    model = load_model("gpt-oss-20b")
    # config.json: 24 layers alternating sliding (window 128, layer 0 first) and full, 8 KV heads x 64 dims.
    # Marginal: only the 12 full layers grow: 12 x 2 x 8 x 64 x 2 B = 24,576 B; within the window all 24 hold
    # tokens: 49,152 B.
    assert kv_bytes_per_token(model, BF16) == 12 * 2 * 8 * 64 * 2 == 24_576
    assert sum(k.cache_bytes_per_token(BF16) for kinds in model.layer_kinds for k in kinds) == 49_152
    assert [kinds[0].kind for kinds in model.layer_kinds[:2]] == ["sliding_window", "full_attention"]
    # experts: 24 layers x 32 x 3 x 2880 x 2880 = 19,110,297,600
    assert model.params_expert.value == pytest.approx(24 * 32 * 3 * 2880 * 2880, rel=1e-3)
    # active matmul: 24 x (2880x4096 + 2 x 2880x512 + 4096x2880 + 4 x 3 x 2880^2 + 2880x32) + 2880x201088
    # = 3,607,142,400, the card's "3.6B active" within 1%
    mm = 24 * (2880 * 4096 + 2 * 2880 * 512 + 4096 * 2880 + 4 * 3 * 2880 ** 2 + 2880 * 32) + 2880 * 201088
    assert model.params_active_matmul.value == mm == 3_607_142_400
    assert _within(mm, model.params_active.value, 0.01) and model.params_active.value == 3.6e9
    # the checkpoint index: 13,761,264,768 B (MXFP4 experts + BF16 rest), below 21B x 1 B
    assert model.weight_bytes.value == 13_761_264_768 and model.weight_dtype == "mxfp4"


def test_qwen3_30b_a3b():
    model = load_model("qwen3-30b-a3b")
    # 2 x 48 layers x 4 KV heads x 128 dims (explicit head_dim; 2048 / 32 would be 64) x 2 B = 98,304 B
    assert kv_bytes_per_token(model, BF16) == 2 * 48 * 4 * 128 * 2 == 98_304
    assert kv_bytes_per_token(model, FP8) == 49_152
    # experts: 48 x 128 x 3 x 2048 x 768 = 28,991,029,248
    assert model.params_expert.value == pytest.approx(48 * 128 * 3 * 2048 * 768, rel=1e-3)
    # active: 48 x (2048x4096 + 2 x 2048x512 + 4096x2048 + 8 x 3 x 2048x768 + 2048x128) + LM 2048x151936
    # = 3,041,656,832; + embedding 311,164,928 = 3.35B against the card's 3.3B: within 2%
    mm = 48 * (2048 * 4096 + 2 * 2048 * 512 + 4096 * 2048 + 8 * 3 * 2048 * 768 + 2048 * 128) + 2048 * 151936
    assert model.params_active_matmul.value == mm == 3_041_656_832
    assert _within(mm + 2048 * 151936, 3.3e9, 0.02)
    # total from config: experts + 48 x attention 18,874,368 + routers + embedding and LM head = 30.53B (card 30.5B)
    total = 48 * 128 * 3 * 2048 * 768 + 48 * (2 * 2048 * 4096 + 2 * 2048 * 512 + 2048 * 128) + 2 * 2048 * 151936
    assert _within(total, model.params_total.value, 0.01) and model.params_total.value == 30.5e9


@pytest.mark.parametrize("model_id,twin", [("deepseek-r1-distill-llama-70b", "llama-3.1-70b"),
                                            ("deepseek-r1-distill-qwen-32b", "qwq-32b")])
def test_r1_distills_keep_their_base_models_shape(model_id, twin):
    model, base = load_model(model_id), load_model(twin)
    if model_id.endswith("70b"):
        # Llama-3.3-70B: 2 x 80 layers x 8 KV heads x 128 dims (8192 / 64) x 2 B = 327,680 B
        assert kv_bytes_per_token(model, BF16) == 2 * 80 * 8 * 128 * 2 == 327_680
        # 80 x (2 x 8192 x 8192 + 2 x 8192 x 1024 + 3 x 8192 x 28672) + 8192 x 128256
        mm = 69_501_714_432
    else:
        # Qwen2.5-32B: 2 x 64 layers x 8 KV heads x 128 dims (5120 / 40) x 2 B = 262,144 B
        assert kv_bytes_per_token(model, BF16) == 2 * 64 * 8 * 128 * 2 == 262_144
        # 64 x (2 x 5120 x 5120 + 2 x 5120 x 1024 + 3 x 5120 x 27648) + 5120 x 152064
        mm = 31_984_189_440
        assert model.max_position_embeddings == 131072   # the distill's config, not QwQ's 40,960
    assert model.params_active_matmul.value == mm
    # dense: the matmul count plus the input embedding is within 2% of the published total
    assert _within(mm, model.params_total.value, 0.02)
    assert kv_bytes_per_token(model, BF16) == kv_bytes_per_token(base, BF16)
    assert any("DeepSeek-R1" in s and "README" in s for s in model.sources)


def test_deepseek_v31_is_r1_shaped():
    model, r1 = load_model("deepseek-v3.1"), load_model("deepseek-r1")
    # 61 layers x (512 + 64) latent: bf16 61 x 576 x 2 = 70,272 B; fp8 35,136 B - the same as R1
    assert kv_bytes_per_token(model, BF16) == 61 * 576 * 2 == 70_272
    assert kv_bytes_per_token(model, FP8) == 61 * 576 == 35_136
    assert model.groups == r1.groups and model.mtp_layers == 1
    assert (model.params_total.value, model.params_active.value) == (671e9, 37e9)


def test_kimi_k2_is_mla_with_384_experts():
    model = load_model("kimi-k2")
    # MLA latent 512 + 64 in 61 layers: 61 x 576 x 2 B = 70,272 B (bf16); 64 query heads do not change it
    assert kv_bytes_per_token(model, BF16) == 61 * 576 * 2 == 70_272
    assert kv_bytes_per_token(model, FP8) == 35_136
    (mla,) = {g.kind for g in model.groups}
    assert (mla.q_heads, mla.kv_lora_rank, mla.qk_rope_head_dim) == (64, 512, 64)
    # experts: 60 MoE layers x 384 x 3 x 7168 x 2048 = 1,014,686,023,680
    experts = 60 * 384 * 3 * 7168 * 2048
    assert model.params_expert.value == pytest.approx(experts, rel=1e-3)
    # per layer MLA: 7168x1536 + 1536x64x192 + 7168x576 + 512x64x256 + 64x128x7168 = 101,122,048
    mla_params = 101_122_048
    # active: 61 MLA + 1 dense MLP + 60 x (9 experts + router 7168x384) + LM head = 31,686,066,176
    mm = 61 * mla_params + 3 * 7168 * 18432 + 60 * (9 * 3 * 7168 * 2048 + 7168 * 384) + 7168 * 163840
    assert model.params_active_matmul.value == mm == 31_686_066_176
    assert _within(mm + 7168 * 163840, 32e9, 0.03)               # README: 32B activated; 32.86B is within 3%
    # total: the README's "1T" is rounded below the experts alone; the config total 1,026.4B is within 3% of it
    # experts + 61 x MLA + 1 dense MLP + 60 x (shared expert + router) + embeddings and LM head
    # = 1,014,686,023,680 + 6,168,444,928 + 396,361,728 + 2,807,562,240 + 2,348,810,240
    total = 1_026_407_202_816
    assert model.params_total.value == pytest.approx(total, rel=1e-4) and _within(total, 1e12, 0.03)
    assert model.params_expert.value < model.params_total.value  # the EP split needs a positive non-expert share


def test_glm_46_is_glm_45_with_a_200k_context():
    glm45, glm46 = load_model("glm-4.5"), load_model("glm-4.6")
    # the same 376,832 B per token (92 x 2 x 8 x 128 x 2 B); the context 202,752 (GLM-4.5: 131,072)
    assert kv_bytes_per_token(glm46, BF16) == kv_bytes_per_token(glm45, BF16) == 376_832
    assert (glm45.max_position_embeddings, glm46.max_position_embeddings) == (131_072, 202_752)
    assert glm46.params_active_matmul.value == glm45.params_active_matmul.value


def test_glm_45_gqa_with_explicit_head_dim():
    model = load_model("glm-4.5")
    # 2 x 92 layers x 8 KV heads x 128 dims x 2 B = 376,832 B (bf16)
    assert kv_bytes_per_token(model, BF16) == 2 * 92 * 8 * 128 * 2 == 376_832
    assert model.mtp_layers == 1
    # experts: 89 MoE layers x 160 x 3 x 5120 x 1536 = 335,963,750,400
    experts = 89 * 160 * 3 * 5120 * 1536
    assert model.params_expert.value == pytest.approx(experts, rel=1e-3)
    # active: 92 x (5120x12288 + 2 x 5120x1024 + 12288x5120) + 3 dense x 3x5120x12288
    # + 89 x (9 x 3x5120x1536 + 5120x160) + LM 5120x151552 = 32,854,016,000: card 32B within 3%
    mm = (92 * (2 * 5120 * 12288 + 2 * 5120 * 1024) + 3 * 3 * 5120 * 12288
          + 89 * (9 * 3 * 5120 * 1536 + 5120 * 160) + 5120 * 151552)
    assert model.params_active_matmul.value == mm == 32_854_016_000
    assert _within(mm, model.params_active.value, 0.03)
    # total from config without the MTP layer: 352.8B against the card's 355B, within 1%
    total = (experts + 92 * (2 * 5120 * 12288 + 2 * 5120 * 1024) + 3 * 3 * 5120 * 12288
             + 89 * (3 * 5120 * 1536 + 5120 * 160) + 2 * 5120 * 151552)
    assert _within(total, model.params_total.value, 0.01)


def test_minimax_m2_is_full_attention_everywhere():
    model = load_model("minimax-m2")
    # 2 x 62 layers x 8 KV heads x 128 dims x 2 B = 253,952 B (bf16): every layer keeps growing
    assert kv_bytes_per_token(model, BF16) == 2 * 62 * 8 * 128 * 2 == 253_952
    assert all(kinds == (model.groups[0].kind,) for kinds in model.layer_kinds)
    assert model.groups[0].kind.kind == "full_attention"
    # experts: 62 x 256 x 3 x 3072 x 1536 = 224,680,476,672
    experts = 62 * 256 * 3 * 3072 * 1536
    assert model.params_expert.value == pytest.approx(experts, rel=1e-3)
    # active: 62 x (3072x6144 + 2 x 3072x1024 + 6144x3072 + 8 x 3 x 3072x1536 + 3072x256) + LM 3072x200064
    # = 10,415,112,192 against the card's 10B: within 5%
    mm = 62 * (2 * 3072 * 6144 + 2 * 3072 * 1024 + 8 * 3 * 3072 * 1536 + 3072 * 256) + 3072 * 200064
    assert model.params_active_matmul.value == mm == 10_415_112_192
    assert _within(mm, model.params_active.value, 0.05)
    total = experts + 62 * (2 * 3072 * 6144 + 2 * 3072 * 1024 + 3072 * 256) + 2 * 3072 * 200064   # 228.7B
    assert _within(total, model.params_total.value, 0.01)


def test_qwen3_next_is_gated_deltanet_plus_full_attention():
    model = load_model("qwen3-next-80b-a3b")
    full = [i for i, kinds in enumerate(model.layer_kinds) if kinds[0].kind == "full_attention"]
    linear = [i for i, kinds in enumerate(model.layer_kinds) if kinds[0].kind == "gated_delta_net"]
    # layer i is full attention when (i + 1) % 4 == 0 (transformers Qwen3NextConfig): 3, 7, ..., 47
    assert full == [i for i in range(48) if (i + 1) % 4 == 0] and len(full) == 12
    assert linear == [i for i in range(48) if (i + 1) % 4] and len(linear) == 36
    # KV grows only in the 12 full layers: 12 x 2 x 2 KV heads x 256 dims x 2 B = 24,576 B per token (bf16)
    assert kv_bytes_per_token(model, BF16) == 12 * 2 * 2 * 256 * 2 == 24_576
    # each linear layer holds a fixed state per request: conv (4 - 1) x (128 x 16 x 2 + 128 x 32) = 24,576
    # elements and SSM 32 x 128 x 128 = 524,288 elements, both bf16: 49,152 + 1,048,576 = 1,097,728 B;
    # 36 layers: 39,518,208 B per request, whatever its length
    gdn = model.layer_kinds[0][0]
    assert gdn.state_bytes() == 3 * (128 * 16 * 2 + 128 * 32) * 2 + 32 * 128 * 128 * 2 == 1_097_728
    assert sum(k.state_bytes() for kinds in model.layer_kinds for k in kinds) == 36 * 1_097_728 == 39_518_208
    assert gdn.marginal_bytes_per_token(BF16) == 0
    # experts: 48 x 512 x 3 x 2048 x 512 = 77,309,411,328
    experts = 48 * 512 * 3 * 2048 * 512
    assert model.params_expert.value == pytest.approx(experts, rel=1e-3)
    # active: 36 x (2048 x 12288 + 2048 x 64 + 4096 x 2048) + 12 x (2048 x 8192 + 2 x 2048 x 512 + 4096 x 2048)
    # + 48 x (11 x 3 x 2048 x 512 + 2048 x 512 + 2048) + LM 2048 x 151936 = 3,562,373,120
    lin = 2048 * 12288 + 2048 * 64 + 4096 * 2048
    att = 2048 * 8192 + 2 * 2048 * 512 + 4096 * 2048
    mm = 36 * lin + 12 * att + 48 * (11 * 3 * 2048 * 512 + 2048 * 512 + 2048) + 2048 * 151936
    assert model.params_active_matmul.value == mm == 3_562_373_120
    # the card's "3B activated" is rounded: 3.56B is within 20% of it (and the name says A3B)
    assert _within(mm, model.params_active.value, 0.20)
    # total from config: experts + linear and attention layers + shared experts and routers + embedding and LM
    # head = 79.67B against the card's 80B, within 1%
    total = (experts + 36 * lin + 12 * att + 48 * (3 * 2048 * 512 + 2048 * 512 + 2048) + 2 * 2048 * 151936)
    assert _within(total, model.params_total.value, 0.01)


def test_gb200_per_gpu_figures_and_c2c_host_link():
    hw = load_hardware("gb200")
    # GB200 variant of B200 at 1,200 W: 2,500 / 5,000 / 10,000 TFLOPS dense; 8 TB/s
    assert [hw.dense_tflops[d].value for d in ("bf16", "fp8", "fp4")] == [2500, 5000, 10000]
    assert hw.hbm_bandwidth_tb_s.value == 8.0
    # Azure ND GB200 v6: FP8 GEMM 2,973.3 of 5,000 = 0.59; all-reduce 679.61 of 900 = 0.755 -> 0.76
    assert hw.efficiency.mfu.value == pytest.approx(2973.3 / 5000, abs=0.005)
    assert hw.efficiency.link.value == pytest.approx(679.61 / 900, abs=0.005)
    # 1 KB all-reduce on 4 GPUs at 0.10 GB/s busbw: 1,024 x 2 x 3/4 / 0.1e9 s = 15.36 us
    assert hw.efficiency.link_latency_us.value == pytest.approx(1024 * 2 * 3 / 4 / 0.1e9 * 1e6, abs=0.05)
    # NVLink-C2C: 900 GB/s bidirectional per superchip / 2 directions / 2 GPUs = 225 per GPU; measured 201 / 193
    link = hw.host_link
    assert link.theoretical_gb_s_per_direction.value == 900 / 2 / 2
    assert (link.measured_h2d_gb_s.value, link.measured_d2h_gb_s.value) == (201, 193)
    assert link.large_copy_efficiency.value == pytest.approx((201 + 193) / 2 / 225, abs=0.005)
    assert hw.hbm_capacity_gib.value == pytest.approx(185 * 79.65 / 80, abs=0.005)


def test_b300_is_a_b200_with_more_and_faster_hbm():
    hw, b200 = load_hardware("b300"), load_hardware("b200")
    # HGX B300: BF16 36 PFLOPS sparse and FP8 72 PFLOPS sparse per 8 GPUs -> / 2 / 8 = 2,250 and 4,500 dense
    assert hw.dense_tflops["bf16"].value == 36_000 / 2 / 8 == b200.dense_tflops["bf16"].value
    assert hw.dense_tflops["fp8"].value == 72_000 / 2 / 8 == b200.dense_tflops["fp8"].value
    assert hw.dense_tflops["fp4"].value == 105_000 / 8 > b200.dense_tflops["fp4"].value   # 13,125 vs 9,000
    assert hw.hbm_bandwidth_tb_s.value == 8.0 and hw.hbm_capacity_vendor_gb.value == 288
    assert hw.hbm_capacity_gib.value == pytest.approx(288 * 179.06 / 180, abs=0.01)   # kind X: scaled from B200
    assert hw.hbm_capacity_gib.kind == "X"
    assert hw.scale_up.gb_s_per_direction.value == 900 and hw.node.gpus_per_node == 8


def test_mi355x_doubles_the_mi300x_dense_peaks():
    hw, mi300x = load_hardware("mi355x"), load_hardware("mi300x")
    # CDNA4: 8 HBM3E stacks x 1024 bits x 8 Gbps = 8.192e12 B/s, quoted as 8 TB/s; 288 GB
    assert hw.hbm_bandwidth_tb_s.value == 8.0 and 8 * 1024 * 8e9 / 8 / 1e12 == pytest.approx(8.192)
    assert hw.hbm_capacity_vendor_gb.value == 288
    # 2.5 / 5 / 10 PFLOPS dense BF16 / FP8 / FP4; MI300X has no FP4 and 1,307.4 BF16
    assert [hw.dense_tflops[d].value for d in ("bf16", "fp8", "fp4")] == [2500, 5000, 10000]
    assert "fp4" not in mi300x.dense_tflops and hw.dense_tflops["bf16"].value > 1.9 * 1307.4
    assert hw.host_link.theoretical_gb_s_per_direction.kind == "X"   # assumed, not sourced
    assert hw.scale_up.gb_s_per_direction.value == pytest.approx(7 * 153.6 / 2)
