"""Hugging Face ids, checkpoint weight bytes from safetensors headers, and parameter counts from config dims.

The Hub is never reached: each test builds the Hugging Face cache layout on disk (``hub/models--org--name/``
with ``refs/main``, ``snapshots/<rev>/`` links into ``blobs/``, as huggingface_hub's cache does) and runs with
HF_HUB_OFFLINE=1 (tests/conftest.py makes every test offline with an empty cache). Expected bytes are hand
arithmetic (numel x element size, summed) written next to each figure; published parameter counts cite their
model card, and the configs cite the published config.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from test_hf_import import DEEPSEEK_R1, GPT_OSS_120B, LLAMA_31_8B, QWEN3_32B, QWQ_32B

from kvplan.engines.budget import weights_per_gpu
from kvplan.errors import KvplanError
from kvplan.inputs import checkpoint
from kvplan.inputs.hf_import import load_hf_model, model_from_hf_config
from kvplan.specs.parallel import Parallelism

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

REV = "0123456789abcdef0123456789abcdef01234567"

# A tiny Qwen3-MoE-shaped config (2 layers, 4 routed experts): only what the importer needs.
TINY_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 4, "moe_intermediate_size": 4,
    "intermediate_size": 16, "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 16,
    "max_position_embeddings": 65536, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                                                                "lm_head"]},
}

# Two shards. Bytes = numel x element size (F16 2, U8 1, I32 4, F32 4):
SHARD_1 = {
    "model.embed_tokens.weight": np.zeros((16, 8), np.float16),                       # 128 x 2 = 256
    "model.layers.0.self_attn.q_proj.weight": np.zeros((8, 8), np.float16),           # 64 x 2 = 128
    "model.layers.0.mlp.experts.gate_up_proj_blocks": np.zeros((4, 16, 2, 16), np.uint8),  # 2048 x 1 = 2048 E
    "model.layers.0.mlp.experts.gate_up_proj_scales": np.zeros((4, 16, 2), np.uint8),      # 128 x 1 = 128 E
}
SHARD_2 = {
    "model.layers.1.mlp.experts.0.down_proj.qweight": np.zeros((8, 4), np.int32),     # 32 x 4 = 128 E
    "model.layers.1.mlp.experts.0.down_proj.scales": np.zeros((2, 4), np.float32),    # 8 x 4 = 32 E
    "model.layers.1.mlp.shared_experts.up_proj.weight": np.zeros((8, 8), np.float16),  # 64 x 2 = 128 (not routed)
    "lm_head.weight": np.zeros((16, 8), np.float16),                                  # 256
    "model.norm.weight": np.zeros((8,), np.float32),                                  # 32
}
TOTAL = 256 + 128 + 2048 + 128 + 128 + 32 + 128 + 256 + 32   # = 3,136 B
EXPERTS = 2048 + 128 + 128 + 32                              # = 2,336 B (names with .experts.)
REST = TOTAL - EXPERTS                                       # = 800 B
SHARDS = {"model-00001-of-00002.safetensors": SHARD_1, "model-00002-of-00002.safetensors": SHARD_2}


def write_shards(folder: Path) -> dict[str, Path]:
    """The shards and their index in ``folder``; returns name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    paths, weight_map = {}, {}
    for name, tensors in SHARDS.items():
        safetensors_numpy.save_file(tensors, str(folder / name))
        paths[name] = folder / name
        weight_map.update({t: name for t in tensors})
    index = {"metadata": {"total_size": TOTAL}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    (folder / "config.json").write_text(json.dumps(TINY_MOE))
    return paths


def hf_cache(root: Path, repo_id: str, files: dict[str, bytes], rev: str = REV, ref: str | None = "main") -> Path:
    """The huggingface_hub cache layout: blobs named by content hash, snapshots/<rev>/<file> symlinks to them,
    refs/<ref> holding the revision."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = repo / "snapshots" / rev
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / name)
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(rev)
    return snapshot


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An offline Hugging Face cache at tmp_path/hub, set for huggingface_hub (HF_HUB_CACHE, HF_HUB_OFFLINE)."""
    constants = pytest.importorskip("huggingface_hub.constants")
    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return root


def cached_tiny(cache: Path, tmp_path: Path, repo_id: str = "tiny-org/Tiny-MoE", shards: bool = True,
                ref: str | None = "main") -> Path:
    built = write_shards(tmp_path / "built")
    files = {"config.json": (tmp_path / "built" / "config.json").read_bytes(),
             "model.safetensors.index.json": (tmp_path / "built" / "model.safetensors.index.json").read_bytes()}
    if shards:
        files.update({name: path.read_bytes() for name, path in built.items()})
    return hf_cache(cache, repo_id, files, ref=ref)


# --- checkpoint bytes from the headers -----------------------------------------------------------------------

def test_local_folder_weights_are_the_header_bytes_and_experts_split_by_ep(tmp_path):
    write_shards(tmp_path / "Tiny-MoE")
    spec = load_hf_model(tmp_path / "Tiny-MoE")
    assert spec.weight_bytes.value == TOTAL == 3136
    assert spec.expert_weight_bytes.value == EXPERTS == 2336
    assert "safetensors headers" in spec.weight_bytes.source
    # TP=4: 3,136 / 4 = 784. TP=2, EP=4: experts 2,336 / 4 = 584 + the rest 800 / 2 = 400 -> 984.
    # TP=2, PP=2, EP=2: 2,336 / (2 x 2) = 584 + 800 / (2 x 2) = 200 -> 784.
    assert weights_per_gpu(spec, Parallelism(tp=4, pp=1, dp=1)).value == 784
    assert weights_per_gpu(spec, Parallelism(tp=2, pp=1, dp=2, ep=4)).value == 984
    assert weights_per_gpu(spec, Parallelism(tp=2, pp=2, dp=1, ep=2)).value == 784
    assert any("quantization_config: quant_method='mxfp4'" in n and "modules_to_not_convert" in n
               for n in spec.notes), spec.notes


def test_hub_id_reads_the_cache_offline_with_exact_bytes(cache, tmp_path, run_cli):
    cached_tiny(cache, tmp_path)
    out = run_cli("concurrency", "-m", "tiny-org/Tiny-MoE", "-g", "h200", "--tp", "2", "--dp", "4", "--ep", "4",
                  "-f", "json")
    assert out.code == 0, out.err
    data = json.loads(out.out)
    assert data["budget"]["weights_bytes"] == 984   # 2,336 / 4 + 800 / 2, as above
    why = data["derivations"]["budget.weights_bytes"]
    assert "safetensors headers of tiny-org/Tiny-MoE" in why["substituted"] and "routed-expert tensors" in \
        why["substituted"]
    assert data["model"] == "tiny-moe"


def test_hub_revision_names_a_snapshot(cache, tmp_path, run_cli):
    cached_tiny(cache, tmp_path, ref=None)   # no refs/main: only the commit itself finds it
    assert run_cli("size", "-m", "tiny-org/Tiny-MoE", "--brief").code == 2
    out = run_cli("size", "-m", f"tiny-org/Tiny-MoE@{REV}", "--tp", "1", "--gpus", "1", "-f", "json")
    assert out.code == 0, out.err


def test_hub_without_cached_shards_uses_the_index_total(cache, tmp_path):
    from kvplan.inputs.presets import load_model

    cached_tiny(cache, tmp_path, shards=False)
    spec = load_model("tiny-org/Tiny-MoE")
    assert spec.weight_bytes.value == TOTAL and spec.expert_weight_bytes is None
    assert any("shards are not here" in n for n in spec.notes)
    # the expert share then comes from the parameter counts (params_expert / params_total)
    assert spec.params_expert is not None


def test_weights_flag_overrides_and_is_named(cache, tmp_path, run_cli):
    cached_tiny(cache, tmp_path)
    out = run_cli("concurrency", "-m", "tiny-org/Tiny-MoE", "--tp", "4", "--dp", "2", "--weights", "8000B",
                  "-f", "json")
    assert out.code == 0, out.err
    data = json.loads(out.out)
    assert data["budget"]["weights_bytes"] == 2000   # 8,000 / TP 4
    assert "given with --weights" in data["derivations"]["budget.weights_bytes"]["substituted"]
    both = run_cli("concurrency", "-m", "tiny-org/Tiny-MoE", "--weights", "8kB", "--weight-dtype", "fp8")
    assert both.code == 2 and "--weights and --weight-dtype" in both.err and len(both.err.splitlines()) == 1


def test_mtp_layers_counted_apart():
    # DeepSeek layout: num_hidden_layers 61, one MTP layer at model.layers.61 (skipped by the engines).
    found = checkpoint.account([checkpoint.Tensor("model.layers.60.mlp.experts.0.w", "BF16", (4,), 8),
                                checkpoint.Tensor("model.layers.61.mlp.experts.0.w", "BF16", (4,), 8),
                                checkpoint.Tensor("model.layers.61.eh_proj.weight", "BF16", (2,), 4)], 1, 61, 1)
    assert (found.total, found.experts, found.mtp) == (8, 8, 12)
    assert checkpoint.account([checkpoint.Tensor("model.layers.61.x", "BF16", (2,), 4)], 1, 61, 0).mtp == 0


# --- hostile headers ------------------------------------------------------------------------------------------

def test_absurd_header_length_is_refused_unread(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes((2**40).to_bytes(8, "little") + b"{}")
    with pytest.raises(KvplanError) as info:
        checkpoint.read_header(path)
    assert "more than safetensors allows" in info.value.message


@pytest.mark.parametrize("header,words", [
    ({"w": {"dtype": "F16", "shape": [4], "data_offsets": [0, 6]}}, "data_offsets span 6"),   # 4 x 2 = 8, not 6
    ({"w": {"dtype": "Q9", "shape": [4], "data_offsets": [0, 4]}}, "dtype 'Q9'"),
    ({"w": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}}, "truncated"),             # no data follows
    ({"w": {"dtype": "F16", "shape": [-4], "data_offsets": [0, 8]}}, "not a list of whole numbers"),
])
def test_bad_headers_are_one_line_errors(tmp_path, header, words):
    raw = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(raw).to_bytes(8, "little") + raw)
    with pytest.raises(KvplanError) as info:
        checkpoint.read_checkpoint([path], 2)
    assert words in info.value.message


def test_header_longer_than_the_file(tmp_path, run_cli):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA_31_8B))
    (folder / "model.safetensors").write_bytes((500).to_bytes(8, "little") + b"{}")
    out = run_cli("size", "-m", str(folder))
    assert out.code == 2 and "500-byte header but the file is 10 bytes" in out.err and len(out.err.splitlines()) == 1


# --- errors: no extra, offline, precedence --------------------------------------------------------------------

def test_without_huggingface_hub_a_hub_id_is_one_line_exit_2(run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)   # import huggingface_hub -> ImportError
    out = run_cli("size", "-m", "some-org/some-model")
    assert out.code == 2 and len(out.err.strip().splitlines()) == 1, out.err
    assert 'pip install "kvplan[hub]"' in out.err


def test_offline_and_not_cached_is_one_line_exit_2(cache, run_cli):
    out = run_cli("size", "-m", "Qwen/QwQ-32B")
    assert out.code == 2 and len(out.err.strip().splitlines()) == 1, out.err
    assert "not in the Hugging Face cache" in out.err and "HF_HUB_OFFLINE" in out.err
    assert "-m qwq-32b" in out.err   # the built-in preset of the same model is suggested


def test_a_local_folder_wins_over_a_hub_id(tmp_path, run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)   # the Hub is not even importable
    folder = tmp_path / "someorg" / "Llama-3.1-8B"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(LLAMA_31_8B))
    monkeypatch.chdir(tmp_path)
    assert run_cli("size", "-m", "someorg/Llama-3.1-8B", "--brief").code == 0


def test_hub_id_syntax():
    from kvplan.inputs.hub import parse_hub_id

    assert parse_hub_id("Qwen/QwQ-32B") == ("Qwen/QwQ-32B", None)
    assert parse_hub_id("deepseek-ai/DeepSeek-R1@main") == ("deepseek-ai/DeepSeek-R1", "main")
    for bad in ("qwq-32b", "a/b/c", "org/na--me", "org/x.json", "/abs/path", "org/"):
        assert parse_hub_id(bad) is None, bad


# --- parameter counts from the architecture -------------------------------------------------------------------

# meta-llama/Llama-3.1-70B config.json (https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json):
# the 8B's fields with these dims.
LLAMA_31_70B = {**LLAMA_31_8B, "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
                "num_hidden_layers": 80}
# Qwen/Qwen3-30B-A3B config.json (https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json).
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
    "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936, "tie_word_embeddings": False,
    "max_position_embeddings": 40960, "torch_dtype": "bfloat16", "attention_bias": False,
}
# Qwen/Qwen3-235B-A22B config.json (https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json).
QWEN3_235B_A22B = {**QWEN3_30B_A3B, "hidden_size": 4096, "num_hidden_layers": 94, "num_attention_heads": 64,
                   "intermediate_size": 12288, "moe_intermediate_size": 1536}
# openai/gpt-oss-20b config.json (https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json): the 120b's
# fields with 24 layers and 32 local experts.
GPT_OSS_20B = {**GPT_OSS_120B, "num_hidden_layers": 24, "num_local_experts": 32,
               "layer_types": ["sliding_attention", "full_attention"] * 12}
# mistralai/Mixtral-8x7B-v0.1 config.json (https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json).
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000, "tie_word_embeddings": False,
    "max_position_embeddings": 32768, "sliding_window": None, "torch_dtype": "bfloat16",
}

# (config, field, published value, unit of its last digit, source). A published count matches when the computed
# one rounds to it (|computed - published| <= half a unit of the last digit): 0.01-0.2% for totals. "Active" is
# compared in the publisher's convention: Mistral and Qwen count the input embedding (params_active), OpenAI and
# DeepSeek do not (params_active_matmul, kvplan's N_mm).
PUBLISHED = [
    (LLAMA_31_70B, "params_total", 70.6e9, 0.1e9, "Llama-3.1-70B model page: 70.6B params"),
    (QWEN3_32B, "params_total", 32.8e9, 0.1e9, "Qwen3-32B model card: Number of Parameters 32.8B"),
    (DEEPSEEK_R1, "params_total", 671e9, 1e9, "DeepSeek-R1 model card: 671B total"),
    (DEEPSEEK_R1, "params_active_matmul", 37e9, 1e9, "DeepSeek-R1 model card: 37B activated"),
    (QWEN3_235B_A22B, "params_total", 235e9, 1e9, "Qwen3-235B-A22B model card: 235B in total"),
    (QWEN3_235B_A22B, "params_active", 22e9, 1e9, "Qwen3-235B-A22B model card: 22B activated"),
    (QWEN3_30B_A3B, "params_total", 30.5e9, 0.1e9, "Qwen3-30B-A3B model card: 30.5B in total"),
    (GPT_OSS_120B, "params_total", 116.83e9, 0.01e9, "gpt-oss model card (arXiv 2508.10925) Table 1: 116.83B"),
    (GPT_OSS_120B, "params_active_matmul", 5.13e9, 0.01e9, "gpt-oss model card Table 1: 5.13B active"),
    (GPT_OSS_20B, "params_total", 20.91e9, 0.01e9, "gpt-oss model card Table 1: 20.91B"),
    (GPT_OSS_20B, "params_active_matmul", 3.61e9, 0.01e9, "gpt-oss model card Table 1: 3.61B active"),
    (MIXTRAL_8X7B, "params_total", 46.7e9, 0.1e9, "Mistral, Mixtral of experts (mistral.ai/news/mixtral-of-experts)"
                                                  ": 46.7B total"),
    (MIXTRAL_8X7B, "params_active", 12.9e9, 0.1e9, "Mistral, Mixtral of experts: 12.9B per token"),
]


@pytest.mark.parametrize("config,field,published,unit,source", PUBLISHED,
                         ids=[f"{p[4].split(':')[0]}-{p[1]}" for p in PUBLISHED])
def test_parameter_count_matches_the_published_figure(config, field, published, unit, source):
    value = getattr(model_from_hf_config(config, "config.json"), field).value
    assert abs(value - published) <= unit / 2, f"{field} {value:,.0f} vs {source}"


def test_qwen3_30b_a3b_active_within_qwen_rounding():
    # Qwen3-30B-A3B model card: "3.3B activated". Counted: 48 layers x (attention 2 x 2048 x 4096 + 2 x 2048 x 512
    # + q/k norms 256 + router 2048 x 128 + 8 experts x 3 x 2048 x 768 + norms 4096) + embedding and head
    # 2 x 151,936 x 2,048 + final norm 2,048 = 3,353,... ; Qwen truncates to 3.3B, so within 2% (k = 7 of 128
    # would give 3.13B, 5% low).
    value = model_from_hf_config(QWEN3_30B_A3B, "c").params_active.value
    assert abs(value - 3.3e9) / 3.3e9 < 0.02


@pytest.mark.parametrize("config,params", [
    # meta-llama/Llama-3.1-8B model.safetensors.index.json total_size 16,060,522,496 B / 2 (bf16) = 8,030,261,248;
    # by hand: 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 + 2 x 4096) + 2 x 128256 x 4096 + 4096.
    (LLAMA_31_8B, 8_030_261_248),
    # meta-llama/Llama-3.1-70B index total_size 141,107,412,992 B / 2 (presets/models/llama-3.1-70b.toml source).
    (LLAMA_31_70B, 70_553_706_496),
    # Qwen/QwQ-32B index total_size 65,527,752,704 B / 2 = 32,763,876,352 (the Qwen2.5-32B architecture; its
    # model card's "32.5B" is 0.8% below what the checkpoint holds).
    (QWQ_32B, 32_763_876_352),
])
def test_dense_counts_equal_the_checkpoint_exactly(config, params):
    assert model_from_hf_config(config, "c").params_total.value == params


def test_deepseek_r1_counts_match_the_preset_arithmetic():
    spec = model_from_hf_config(DEEPSEEK_R1, "c")
    # presets/models/deepseek-r1.toml: routed experts 58 x 256 x 3 x 7168 x 2048 = 653,908,770,816 exactly.
    assert spec.params_expert.value == 653_908_770_816
    # N_mm by hand there (norms and the router bias left out) 36,624,596,992; the count adds 61 x (2 x 7168 + 1536
    # + 512) norms + 7168 + 58 x 256 e_score_correction_bias = 1,007,360: 36,625,604,352
    assert spec.params_active_matmul.value == 36_624_596_992 + 61 * (2 * 7168 + 1536 + 512) + 7168 + 58 * 256
    assert spec.num_experts == 256


def test_tied_embeddings_count_once():
    untied = model_from_hf_config(LLAMA_31_8B, "c").params_total.value
    tied = model_from_hf_config({**LLAMA_31_8B, "tie_word_embeddings": True}, "c").params_total.value
    assert untied - tied == 128256 * 4096


def test_a_cached_model_needs_no_network_without_hf_hub_offline(monkeypatch):
    """The README's cache (tests/data/hf-cache) records, as huggingface_hub does after a 404, that QwQ-32B's
    revision has no model.safetensors.index.json and no model.safetensors (.no_exist/REV/...): with
    HF_HUB_OFFLINE unset, kvplan must take the parameter count from the config and ask the Hub for nothing."""
    hub = pytest.importorskip("huggingface_hub")
    from kvplan.inputs.presets import load_model

    cache = str(Path(__file__).parent / "data" / "hf-cache")
    monkeypatch.setenv("HF_HUB_CACHE", cache)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", cache)
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", False)

    def no_network(*args, **kwargs):
        raise AssertionError("kvplan asked the Hub for a file the cache knows is absent")

    monkeypatch.setattr(hub, "hf_hub_download", no_network)
    monkeypatch.setattr(hub, "get_safetensors_metadata", no_network)
    model = load_model("Qwen/QwQ-32B")
    # 64 x (62,921,728 + 424,673,280 + 10,240) + 5,120 + 2 x 152,064 x 5,120 = 32,763,876,352 (the checkpoint's)
    assert model.params_total.value == 32_763_876_352
