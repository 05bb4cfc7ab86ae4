"""Engine rules pinned with numbers worked out by hand: SGLang's memory fraction buckets and page size, vLLM's
sliding-window usage, hybrid group size and batch defaults, the activation estimate under TP, Mamba-2 group
replication and the TP shown by ``kvplan size --compare``.

Every expected figure is derived in the comment beside it, from the rule as the engines state it, never from
kvplan's output. Inputs sit on both sides of each threshold so that moving the rule by one (35 -> 36, 1.5 -> 1.4,
``<`` -> ``<=``, a dropped ``+ 1`` or ``// tp``) changes an asserted number; tools/mutation_probe.py checks that.

Everything goes through the CLI's ``--format json`` (keys from README.md's "JSON contract"), with small model
and hardware presets written to tmp_path, so the tests survive refactors of the code behind the CLI.
"""

from __future__ import annotations

import pytest
from conftest import write_hardware  # the one hand-written GPU preset of the tests

GIB = 2**30

# bf16 llama-3.1-8b: 32 layers x 8 KV heads x (128 + 128) x 2 B = 131,072 B per token on one GPU.
LLAMA_8B_TOKEN = 32 * 8 * 256 * 2




# A small dense model: weights 1e8 params x 2 B (bf16) = 200,000,000 B; 2 KV heads allow TP 2.
TINY = '''type = "model"
id = "tiny-gqa"
name = "tiny GQA"
sources = ["hand-written test model"]
num_layers = 2
hidden_size = 256
intermediate_size = 1024
vocab_size = 1000
params_total = { value = 1e8, source = "test figure" }

[[groups]]
name = "attention"
layers = "all"
kind = { kind = "full_attention", kv_heads = 2, head_dim_k = 64, head_dim_v = 64, q_heads = 4 }
'''


def write_model(tmp_path, text: str, name: str = "model") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return str(path)


def hybrid_attention_model(sliding_layers: int, full_layers: int, window: int) -> str:
    """Sliding layers first, then full ones; 1 KV head x 64 dims: (128 + 128) B = 256 B per token per layer."""
    n = sliding_layers + full_layers
    return f'''type = "model"
id = "tiny-swa-{sliding_layers}-{full_layers}"
name = "tiny sliding + full"
sources = ["hand-written test model"]
num_layers = {n}

[[groups]]
name = "sliding"
layers = {{ start = 0, stop = {sliding_layers} }}
kind = {{ kind = "sliding_window", kv_heads = 1, head_dim_k = 64, head_dim_v = 64, q_heads = 1, window = {window} }}

[[groups]]
name = "full"
layers = {{ start = {sliding_layers}, stop = {n} }}
kind = {{ kind = "full_attention", kv_heads = 1, head_dim_k = 64, head_dim_v = 64, q_heads = 1 }}
'''


def concurrency_json(run_cli, *args: str) -> dict:
    r = run_cli("concurrency", *args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


# --- SGLang's default mem_fraction_static -----------------------------------------------------------------
# SGLang v0.4.8-v0.5.2 (server_args.py) reserves memory by GPU size, in GiB, with ps = tp x pp (pinned 0.5.2):
#   < 35: 2.8 + ps/10;  < 90: 9.5 + ps/2;  < 160: 12 + ps/2;  else 32;  fraction = round((mem - reserved) / mem, 3).
# Each boundary is tested just below and at the threshold, with ps = 1:
@pytest.mark.parametrize("hbm_gib, expected", [
    (34.9, 0.917),   # < 35: reserved 2.8 + 0.1 = 2.9;  32.0 / 34.9 = 0.91691 (ps/5 would give 31.9/34.9 = 0.914)
    (35.0, 0.714),   # >= 35: reserved 9.5 + 0.5 = 10;  25 / 35 = 0.71429 (the small bucket would give 0.917)
    (89.9, 0.889),   # < 90: reserved 10;  79.9 / 89.9 = 0.88877 (ps/4 would give 80.15/89.9 = 0.892)
    (90.0, 0.861),   # >= 90: reserved 12 + 0.5 = 12.5;  77.5 / 90 = 0.86111 (the < 90 bucket: 80/90 = 0.889)
    (159.9, 0.922),  # < 160: reserved 12.5;  147.4 / 159.9 = 0.92183 (12 + ps would give 146.9/159.9 = 0.919)
    (160.0, 0.8),    # >= 160: reserved 32;  128 / 160 = 0.8 (the < 160 bucket: 147.5/160 = 0.922; 31: 0.806)
])
def test_sglang_default_mem_fraction_on_both_sides_of_each_bucket(run_cli, tmp_path, hbm_gib, expected):
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, TINY), "-g", write_hardware(tmp_path, hbm_gib),
                         "--tp", "1", "--engine", "sglang==0.5.2")
    assert d["mem_fraction_static"] == pytest.approx(expected, abs=1e-9)
    assert d["budget"]["utilization"] == pytest.approx(expected, abs=1e-9)


def test_sglang_fraction_counts_the_parallel_size_and_sets_the_pool(run_cli, tmp_path):
    # 79.65 GiB at TP 8: reserved 9.5 + 8/2 = 13.5;  (79.65 - 13.5) / 79.65 = 0.830508 -> 0.831.
    d = concurrency_json(run_cli, "-m", "llama-3.1-8b", "-g", write_hardware(tmp_path, 79.65), "--tp", "8",
                         "--engine", "sglang==0.5.2")
    assert d["mem_fraction_static"] == pytest.approx(0.831, abs=1e-9)
    # 160 GiB at TP 1: fraction 0.8 (above). rest = pre-load free memory x 0.8 - weights (profile_max_num_token),
    # the pre-load memory 160 GiB - 0.70 GiB (driver reserve of an unmeasured GPU) - 0.79 GiB (context at TP1)
    #   = 171,798,691,840 - 1,599,875,317 = 170,198,816,523 B; x 0.8 = 136,159,053,218; - 200,000,000 weights
    #   - what SGLang's load adds at one rank, int(0.11 x 2^30) = 118,111,600
    #   = 135,840,941,618 B (no activation or runtime term for SGLang).
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, TINY), "-g", write_hardware(tmp_path, 160.0),
                         "--tp", "1", "--engine", "sglang==0.5.2")
    assert d["kv_pool_bytes_per_gpu"] == 135_840_941_618


# --- SGLang page size -------------------------------------------------------------------------------------
def test_sglang_pages_gqa_one_token_at_a_time(run_cli):
    # page_size 1 unless a kind needs more than 16 tokens. Pool 10 GiB + 5 cells + 7 B, cell 131,072 B:
    # 10,738,073,607 // 131,072 = 81,925 tokens, kept whole with page 1 (a 16-token page would give 81,920).
    pool = 10 * GIB + 5 * LLAMA_8B_TOKEN + 7
    d = concurrency_json(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--engine", "sglang",
                         "--kv-pool", f"{pool}B")
    assert d["sglang_page_size"] == 1
    assert d["block_size"] == 1
    assert d["sglang_cell_size_bytes"] == LLAMA_8B_TOKEN
    assert d["sglang_max_total_num_tokens"] == 81_925


def test_sglang_pages_mla_by_the_default_backend(run_cli):
    # DeepSeek-R1, bf16 MLA latent: 61 layers x (512 + 64) x 2 B = 70,272 B per token (whole on every rank).
    # On Hopper (H200) SGLang's default attention backend is FA3 (sgl-project/sglang docs/backend/
    # attention_backend.md: "FlashAttention 3 (Default for Hopper Machines, e.g., H100, H200, H20)"), with the
    # default page size of 1: 1 GiB // 70,272 = 15,279 tokens (70,272 x 15,279 = 1,073,685,888 <= 2^30).
    base = ("-m", "deepseek-r1", "-g", "h200", "--tp", "1", "--kv-dtype", "bf16", "--engine", "sglang",
            "--kv-pool", "1GiB")
    d = concurrency_json(run_cli, *base)
    assert d["sglang_page_size"] == 1
    assert d["sglang_cell_size_bytes"] == 70_272
    assert d["sglang_max_total_num_tokens"] == 15_279
    # With 64-token pages (what the FlashMLA backend uses), rounded down to whole pages: 238 x 64 = 15,232.
    d = concurrency_json(run_cli, *base, "--page-size", "64")
    assert d["sglang_page_size"] == 64
    assert d["sglang_max_total_num_tokens"] == 15_232


# --- vLLM sliding-window usage -----------------------------------------------------------------------------
# vLLM SlidingWindowSpec.max_memory_usage_bytes: cdiv(min(window - 1 + max_num_batched_tokens, max_model_len),
# block) + 1 blocks (the window need not start on a block boundary); full attention: cdiv(max_model_len, block).
# Model: 2 sliding (window 129) + 2 full layers, 256 B per token per layer, block 16 -> page 16 x 256 = 4,096 B;
# group size 2, so num_blocks = pool // page // 2 = 8,192,000 // 4,096 // 2 = 1,000.
SWA_POOL = "8192000B"


def test_vllm_sliding_window_blocks_with_the_extra_block(run_cli, tmp_path):
    # max_model_len 4096, max_num_batched_tokens 2048: window - 1 + 2048 = 2176 = 136 blocks exactly (so a
    # window without the - 1 would need 137), + 1 = 137; full layers 4096 / 16 = 256; 393 blocks per request.
    # max concurrency 1000 / 393 = 2.54453 (no + 1: 1000/392 = 2.5510; no - 1: 1000/394 = 2.5381).
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, hybrid_attention_model(2, 2, 129)), "-g", "h100-sxm",
                         "--tp", "1", "--engine", "vllm", "--kv-pool", SWA_POOL, "--prompt", "100", "--decode", "900",
                         "--max-model-len", "4096", "--max-num-batched-tokens", "2048")
    assert d["num_blocks"] == 1000
    assert d["vllm_kv_cache_groups"] == 2
    assert d["vllm_max_concurrency"] == pytest.approx(1000 / 393, abs=1e-4)


def test_vllm_sliding_window_usage_is_capped_at_max_model_len(run_cli, tmp_path):
    # max_model_len 1024 < 2176: sliding layers hold cdiv(1024, 16) + 1 = 65 blocks, full layers 64: 129 per
    # request; 1000 / 129 = 7.75194 (uncapped: 64 + 137 = 201 -> 4.9751).
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, hybrid_attention_model(2, 2, 129)), "-g", "h100-sxm",
                         "--tp", "1", "--engine", "vllm", "--kv-pool", SWA_POOL, "--prompt", "100", "--decode", "900",
                         "--max-model-len", "1024", "--max-num-batched-tokens", "2048")
    assert d["vllm_max_concurrency"] == pytest.approx(1000 / 129, abs=1e-4)


# --- vLLM hybrid group size --------------------------------------------------------------------------------
# vLLM _get_kv_cache_groups_uniform_page_size (vllm/v1/core/kv_cache_utils.py): group_size = max layers of a type
# if max < 1.5 x min, else min (older releases used 1.25); each type splits into cdiv(layers, group_size) groups,
# and num_blocks = pool // page // group_size.
@pytest.mark.parametrize("sliding, full, groups, padding, num_blocks", [
    # 2 + 3: 3 < 1.5 x 2 = 3 is false -> group size 2; full 2 groups + sliding 1 = 3 groups of 2, 6 - 5 = 1
    # padding layer; 8,192,000 // 4,096 // 2 = 1,000 blocks. (With <= or 1.6: group size 3, 2 groups, 666 blocks.)
    (2, 3, 3, 1, 1000),
    # 5 + 7: 7 < 7.5 -> group size 7; 1 + 1 = 2 groups of 7, 14 - 12 = 2 padding; 2,000 // 7 = 285 blocks.
    # (With 1.4: 7 < 7.0 is false, group size 5, 2 + 1 = 3 groups, 3 padding, 400 blocks.)
    (5, 7, 2, 2, 285),
])
def test_vllm_hybrid_group_size_threshold(run_cli, tmp_path, sliding, full, groups, padding, num_blocks):
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, hybrid_attention_model(sliding, full, 128)),
                         "-g", "h100-sxm", "--tp", "1", "--engine", "vllm", "--kv-pool", SWA_POOL,
                         "--prompt", "100", "--decode", "900", "--max-model-len", "4096")
    assert d["vllm_kv_cache_groups"] == groups
    assert d["vllm_padding_layers"] == padding
    assert d["num_blocks"] == num_blocks


# --- vLLM batch defaults and the activation estimate --------------------------------------------------------
# vLLM EngineArgs.get_batch_defaults: >= 70 GiB and not an A100 -> max_num_batched_tokens 8192, max_num_seqs 1024;
# otherwise 2048 / 256. kvplan's activation estimate (kvplan/engines/budget.py docstring) of the tiny model,
# hidden 256, intermediate 1024, vocab 1000, at TP 1: per token (4 x 256 + 3 x 1024) x 2 B = 8,192 B, so
#   8192 x 8,192 + 1024 x 1000 x 4 = 67,108,864 + 4,096,000 = 71,204,864 B   (8192 / 1024)
#   2048 x 8,192 +  256 x 1000 x 4 = 16,777,216 + 1,024,000 = 17,801,216 B   (2048 / 256)
ACT_LARGE_BATCH = 71_204_864
ACT_SMALL_BATCH = 17_801_216


@pytest.mark.parametrize("hbm_gib, hw_id, expected", [
    (70.0, "gpu-70", ACT_LARGE_BATCH),    # exactly 70 GiB counts as large
    (69.99, "gpu-69", ACT_SMALL_BATCH),
    (80.0, "gpu-80", ACT_LARGE_BATCH),
    (80.0, "my-a100-80", ACT_SMALL_BATCH),  # the same memory, but an A100
])
def test_vllm_batch_defaults_by_memory_and_a100(run_cli, tmp_path, hbm_gib, hw_id, expected):
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, TINY), "-g", write_hardware(tmp_path, hbm_gib, hw_id),
                         "--tp", "1")
    assert d["budget"]["activation_bytes"] == expected


def test_shipped_a100_gets_the_small_batch_defaults(run_cli, tmp_path):
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, TINY), "-g", "a100-80gb", "--tp", "1")
    assert d["budget"]["activation_bytes"] == ACT_SMALL_BATCH


def test_activation_mlp_term_splits_over_tp(run_cli, tmp_path):
    # TP 2 on the A100 (2048 / 256): per token (4 x 256 + 3 x 1024 // 2) x 2 = (1024 + 1536) x 2 = 5,120 B;
    # 2048 x 5,120 + 256 x 4,000 = 10,485,760 + 1,024,000 = 11,509,760 B (unsplit: 17,801,216).
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, TINY), "-g", "a100-80gb", "--tp", "2")
    assert d["budget"]["activation_bytes"] == 11_509_760


# --- Mamba-2 state under TP ---------------------------------------------------------------------------------
# vLLM mamba2_state_shape with extra_groups_for_head_shards: groups that do not divide tp are replicated up to
# tp (MambaMixer2 allows that only for n_groups == 1). conv state (conv_kernel - 1) x (n_heads x head_dim +
# 2 x groups x state) / tp, SSM state (n_heads / tp) x head_dim x state, both bf16 here.
def mamba_model(n_groups: int) -> str:
    return f'''type = "model"
id = "tiny-mamba-g{n_groups}"
name = "tiny Mamba-2 hybrid"
sources = ["hand-written test model"]
num_layers = 2

[[groups]]
name = "ssm"
layers = [0]
kind = {{ kind = "mamba2", n_heads = 8, head_dim = 64, state_size = 128, n_groups = {n_groups}, conv_kernel = 4 }}

[[groups]]
name = "attention"
layers = [1]
kind = {{ kind = "full_attention", kv_heads = 2, head_dim_k = 64, head_dim_v = 64, q_heads = 4 }}
'''


@pytest.mark.parametrize("n_groups, per_gpu", [
    # n_groups 1 at TP 2: replicated to 2 groups. conv 3 x (512 + 2 x 2 x 128) / 2 = 3 x 512 = 1,536 elements,
    # x 2 B = 3,072; SSM 4 x 64 x 128 x 2 B = 65,536; 68,608 B. (Unreplicated: 3 x 384 x 2 + 65,536 = 67,840.)
    (1, 68_608),
    # n_groups 4 divides TP 2: conv 3 x (512 + 2 x 4 x 128) / 2 = 3 x 768 = 2,304 elements x 2 = 4,608;
    # + 65,536 = 70,144 B.
    (4, 70_144),
])
def test_mamba2_groups_replicate_when_tp_does_not_divide_them(run_cli, tmp_path, n_groups, per_gpu):
    r = run_cli("size", "-m", write_model(tmp_path, mamba_model(n_groups)), "--tp", "2", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["state_bytes_per_request_per_gpu"] == per_gpu
    # TP 1, n_groups 1: conv 3 x (512 + 256) x 2 = 4,608; SSM 8 x 64 x 128 x 2 = 131,072; 135,680 B.
    if n_groups == 1:
        assert d["state_bytes_per_request"] == 135_680


# --- kvplan size --compare: the TP of the per-GPU column ----------------------------------------------------
def test_compare_shows_the_given_tp(run_cli):
    # TP 2: llama-3.1-70b 80 layers x (8 // 2 = 4 heads) x 512 B = 163,840 B per token per GPU;
    # llama-3.1-8b 32 x 4 x 512 = 65,536 B.
    r = run_cli("size", "-m", "llama-3.1-8b", "--tp", "2", "--compare", "llama-3.1-70b", "-f", "json")
    assert r.code == 0, r.err
    cmp = r.json()["comparison"]
    assert cmp["tp_shown"] == 2
    assert cmp["kv_bytes_per_token_per_gpu"] == 163_840
    assert cmp["this_model_kv_bytes_per_token_per_gpu"] == 65_536


def test_compare_without_tp_shows_tp_8(run_cli):
    # TP 1 given (the default): the column is shown at TP 8: 80 x 1 x 512 = 40,960 and 32 x 1 x 512 = 16,384 B.
    r = run_cli("size", "-m", "llama-3.1-8b", "--compare", "llama-3.1-70b", "-f", "json")
    assert r.code == 0, r.err
    cmp = r.json()["comparison"]
    assert cmp["tp_shown"] == 8
    assert cmp["kv_bytes_per_token_per_gpu"] == 40_960
    assert cmp["this_model_kv_bytes_per_token_per_gpu"] == 16_384


# --- SGLang: the parallel size counts PP; sliding layers in the cell, one-token pages ------------------------
def test_sglang_parallel_size_is_tp_times_pp(run_cli, tmp_path):
    # 100 GiB (the < 160 GiB bucket) at TP 1 x PP 2: ps = 2, reserved 12 + 2/2 = 13; (100 - 13) / 100 = 0.87
    # (ps = TP alone: 12.5 -> 0.875).
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, TINY), "-g", write_hardware(tmp_path, 100.0),
                         "--tp", "1", "--pp", "2", "--engine", "sglang==0.5.2")
    assert d["mem_fraction_static"] == pytest.approx(0.87, abs=1e-9)


def test_sglang_counts_sliding_layers_in_a_one_token_page_cell(run_cli, tmp_path):
    # 2 sliding + 2 full layers of 256 B per token: SGLang's combined cell counts all four: 1,024 B per token
    # (dropping the sliding layers: 512). Pages of 1 token (a 16-token page only for kinds that need more).
    # 8,192,000 B // 1,024 = 8,000 tokens.
    d = concurrency_json(run_cli, "-m", write_model(tmp_path, hybrid_attention_model(2, 2, 128)), "-g", "h100-sxm",
                         "--tp", "1", "--engine", "sglang", "--kv-pool", SWA_POOL, "--prompt", "100",
                         "--decode", "900")
    assert d["sglang_cell_size_bytes"] == 1024
    assert d["sglang_page_size"] == 1
    assert d["sglang_max_total_num_tokens"] == 8000
