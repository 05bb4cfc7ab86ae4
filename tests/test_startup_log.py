"""Start-up logs: the parser against the log text itself, and kvplan's reproduction of each engine's figures by
hand arithmetic. Every file in tests/data/logs/ is a trimmed public excerpt whose first lines (``## source:``) name
the issue or pull request and the engine release it came from."""

from pathlib import Path

import pytest

from kvplan.errors import KvplanError
from kvplan.startup_log import parse, read_log

LOGS = Path(__file__).parent / "data" / "logs"
GIB = 2**30


def log(name):
    return read_log(LOGS / name)


def test_every_excerpt_names_its_public_source():
    files = sorted(LOGS.glob("*.log"))
    assert len(files) >= 8
    for path in files:
        first = path.read_text().splitlines()[0]
        assert first.startswith("## source: https://github.com/"), path.name


# --- the parser: values as the log text states them ----------------------------------------------------------
def test_vllm_v1_qwen3_235b():
    lg = log("vllm-v1-qwen3-235b-a22b-fp8-4xh100.log")
    assert lg.engine == "vllm"
    assert lg.value("available_kv_gib") == 8.11          # "Available KV cache memory: 8.11 GiB"
    assert lg.value("kv_cache_tokens") == 178_880        # "GPU KV cache size: 178,880 tokens"
    assert lg.value("tp") == 4                           # "--tensor-parallel-size 4" in the pasted command
    assert lg.value("model") == "/path/to/Qwen3-235B-A22B-FP8"


def test_vllm_v0_memory_profile_table():
    lg = log("vllm-v0.6.5-llama3-8b-1xh100.log")
    assert (lg.value("total_gpu_memory_gib"), lg.value("gpu_memory_utilization"), lg.value("weights_gib"),
            lg.value("non_torch_gib"), lg.value("activation_peak_gib"), lg.value("available_kv_gib")) == \
        (79.22, 0.90, 14.96, 1.79, 1.26, 53.29)
    assert lg.release is None


def test_vllm_v0_one_line_profile_and_blocks():
    lg = log("vllm-v0.6-llama3.1-8b-rtx3090.log")
    assert lg.value("weights_gib") == 14.9888            # "Loading model weights took 14.9888 GB"
    assert lg.value("available_kv_gib") == 2.89          # "kv_cache_size=2.89GiB"
    assert lg.value("non_torch_gib") == 0.35
    assert lg.value("gpu_blocks") == 1478                # "# GPU blocks: 1478"
    assert (lg.value("concurrency_len"), lg.value("max_concurrency")) == (29_000, 0.82)


def test_vllm_v0_8_5_ranks_and_concurrency():
    lg = log("vllm-v0.8.5-qwen3-tp4.log")
    assert [f.value for f in lg.facts["weights_gib"]] == [14.2474, 14.2474]   # two ranks print it
    assert lg.value("kv_cache_tokens") == 198_784
    # v0.8.5 prints num_blocks x block and num_tokens / max_model_len (PR #13596): 198,784 / 8,192 = 24.265 -> 24.27
    assert lg.value("max_concurrency") == 24.27 == round(198_784 / 8_192, 2)
    assert 198_784 % 16 == 0                              # whole 16-token blocks: 12,424


def test_vllm_v0_24_release_and_non_default_args():
    lg = log("vllm-v0.24-qwen3.6-35b-a3b-rtx5090.log")
    assert lg.release == (0, 24, 0)                       # "Initializing a V1 LLM engine (v0.24.0)"
    assert lg.value("kv_cache_dtype") == "fp8" and lg.value("max_model_len") == 131_072
    # v0.21+: tokens = int(max_concurrency x max_model_len); 567,978 / 131,072 = 4.3333 -> "4.33x"
    assert round(567_978 / 131_072, 2) == lg.value("max_concurrency") == 4.33


def test_sglang_mha_and_mla_lines():
    mha = log("sglang-qwen3-235b-a22b-fp8-4xh100.log")
    assert mha.engine == "sglang"
    assert (mha.value("kv_tokens"), mha.value("k_size_gib"), mha.value("v_size_gib")) == (367_404, 8.23, 8.23)
    assert (mha.value("tp"), mha.value("mem_fraction_static")) == (4, 0.93)
    mla = log("sglang-kt-deepseek-v3-bf16-tp2.log")
    assert [f.value for f in mla.facts["kv_tokens"]] == [10_000, 10_000]      # TP0 and TP1
    assert (mla.value("kv_size_gib"), mla.value("avail_after_load_gib"), mla.value("weights_gib")) == \
        (0.65, 33.80, 13.06)
    assert mla.least("avail_after_pool_gib").value == 30.11                   # TP1 has less than TP0's 33.08
    assert mla.value("kv_cache_dtype") == "bfloat16" and mla.value("max_total_tokens_cap") == 10_000


def test_sglang_newer_load_weight_line():
    lg = log("sglang-deepseek-v4-pro-fp8-8xh200.log")
    assert (lg.value("avail_after_load_gib"), lg.value("weights_gib")) == (12.25, 125.65)
    assert lg.value("tp") is None           # the "## deployment:" annotation is not log text


def test_a_file_with_no_recognised_line_is_one_error(tmp_path):
    path = tmp_path / "notes.log"
    path.write_text("hello\nINFO server started\n")
    with pytest.raises(KvplanError, match="none of the lines kvplan reads"):
        read_log(path)
    with pytest.raises(KvplanError, match="none of the lines"):
        parse("## source: https://example.org GPU KV cache size: 5 tokens\n")   # annotations are skipped


def test_binary_and_fifo_are_refused(tmp_path):
    import os

    junk = tmp_path / "junk.log"
    junk.write_bytes(b"GPU KV cache size: 5 tokens\x00\x01\x02")
    with pytest.raises(KvplanError, match="NUL"):
        read_log(junk)
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with pytest.raises(KvplanError, match="FIFO"):
        read_log(fifo)


# --- explain-log: the engines' figures reproduced, by hand ---------------------------------------------------
def test_vllm_tokens_from_available_memory_and_the_gap(run_cli):
    r = run_cli("explain-log", str(LOGS / "vllm-v1-qwen3-235b-a22b-fp8-4xh100.log"), "-g", "h100-sxm",
                "--weight-dtype", "fp8", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    # Qwen3-235B: 94 layers x 4 KV heads / TP 4 x 128 x 2 (K, V) x 2 B = 48,128 B per token per GPU.
    # 8.11 GiB = 8,708,169,236 B // (16 x 48,128) = 11,308 blocks -> 180,928 tokens; the log says 178,880
    # (11,180 blocks): 128 blocks = 2,048 tokens more than the rounding of "8.11" allows (180,816-181,040).
    row = doc["reproduced"][0]
    assert (row["logged"], row["kvplan"], row["difference"], row["agrees"]) == (178_880, 180_928, 2_048, False)
    assert "worker with the least memory" in row["why"]
    assert doc["kv_pool_bytes_per_gpu"] == int(8.11 * GIB)
    # the workload: 31,000 tokens = 1,938 blocks x 16 x 48,128 = 1,492,353,024 B; 8,708,169,236 // that = 5
    assert doc["kv_bytes_per_request_per_gpu"] == 1_938 * 16 * 48_128
    assert doc["max_concurrency"] == 5


def test_vllm_v0_blocks_and_concurrency_agree(run_cli):
    r = run_cli("explain-log", str(LOGS / "vllm-v0.6-llama3.1-8b-rtx3090.log"), "-m", "llama-3.1-8b", "-g", "l40s",
                "--decode", "20k", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    blocks, conc = doc["reproduced"]
    # Llama-3.1-8B: 32 x 8 x 128 x 2 x 2 = 131,072 B/token; a 16-token block 2,097,152 B.
    # 2.89 GiB // 2,097,152 = 1,479 (2.885-2.895 GiB allows 1,477-1,482); the log: 1,478.
    assert (blocks["logged"], blocks["kvplan"], blocks["agrees"]) == (1478, 1479, True)
    # 1,479 / cdiv(29,000, 16) = 1,479 / 1,813 = 0.8158 -> 0.82, the log's "0.82x"
    assert conc["logged"] == 0.82 and round(conc["kvplan"], 4) == round(1479 / 1813, 4) and conc["agrees"]
    # the GPU is not the preset's: the log says 23.58 GiB, l40s has 44.99
    assert any("23.58 GiB" in n for n in doc["notes"])


def test_vllm_budget_against_the_memory_profile(run_cli):
    r = run_cli("explain-log", str(LOGS / "vllm-v0.6.5-llama3-8b-1xh100.log"), "-m", "llama-3.1-8b", "-g",
                "h100-sxm", "-f", "json")
    assert r.code == 0, r.err
    rows = {row["figure"]: row for row in r.json()["budget"]}
    # HBM: h100-sxm preset 79.65 GiB vs the log's 79.22 GiB: +0.43 GiB
    assert abs(rows["HBM of the GPU"]["difference"] - 0.43 * GIB) < 2
    # runtime: kvplan's 1 GiB reserve vs the log's non_torch_memory 1.79 GiB: -0.79 GiB
    assert rows["non-torch + CUDA graphs"]["difference"] == GIB - int(1.79 * GIB)
    assert not rows["non-torch + CUDA graphs"]["agrees"]
    assert rows["weights on this GPU"]["logged"] == int(14.96 * GIB)


def test_sglang_mha_k_size_from_tokens(run_cli):
    r = run_cli("explain-log", str(LOGS / "sglang-qwen3-235b-a22b-fp8-4xh100.log"), "-g", "h100-sxm", "-f", "json")
    assert r.code == 0, r.err
    row = r.json()["reproduced"][0]
    # K: (367,404 + 1 page) x 94 layers x 1 KV head (4 / TP 4) x 128 x 2 B = 8,841,233,920 B = 8.2341 GiB -> "8.23"
    assert row["kvplan"] == (367_404 + 1) * 94 * 128 * 2 and row["agrees"]
    assert round(row["kvplan"] / GIB, 2) == 8.23


def test_sglang_mla_kv_size_and_max_total_tokens(run_cli):
    r = run_cli("explain-log", str(LOGS / "sglang-kt-deepseek-v3-bf16-tp2.log"), "-m", "deepseek-r1", "-g", "l40s",
                "--decode", "5k", "-f", "json")
    assert r.code == 0, r.err
    size, tokens = r.json()["reproduced"]
    # MLA: (10,000 + 1) x 61 layers x 576 x 2 B = 702,790,272 B = 0.6545 GiB -> "0.65"
    assert size["kvplan"] == 10_001 * 61 * 1152 and size["agrees"]
    # rest = 33.80 - (33.80 + 13.06) x (1 - 0.9) = 29.114 GiB; // 70,272 = 444,855 tokens, capped at 10,000
    assert tokens["kvplan"] == 10_000 and tokens["agrees"] and "444,855" in tokens["why"]
    assert int((33.80 - 46.86 * 0.1) * GIB // 70_272) == 444_855


def test_sglang_dsa_with_dp_attention(run_cli):
    r = run_cli("explain-log", str(LOGS / "sglang-deepseek-v3.2-exp-8xb200-dp8.log"), "-g", "b200", "--kv-dtype",
                "fp8", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["parallelism"]["tp"], doc["parallelism"]["dp"]) == (1, 8)   # --tp 8 --dp 8 --enable-dp-attention
    row = doc["reproduced"][0]
    # fp8 DS-MLA 656 B + indexer 132 B = 788 B x 61 layers = 48,068 B; page 64:
    # (975,424 + 64) x 48,068 = 46,889,757,184 B = 43.670 GiB -> "43.67"
    assert row["kvplan"] == (975_424 + 64) * 48_068 and row["agrees"]
    # without fp8 (bf16: 1,152 + 132 = 1,284 B x 61 = 78,324 B) the size would not agree
    bad = run_cli("explain-log", str(LOGS / "sglang-deepseek-v3.2-exp-8xb200-dp8.log"), "-g", "b200", "-f", "json")
    assert not bad.json()["reproduced"][0]["agrees"]


# --- explain-log: bad input --------------------------------------------------------------------------------------
def test_contradicting_option_is_refused(run_cli):
    r = run_cli("explain-log", str(LOGS / "vllm-v1-qwen3-235b-a22b-fp8-4xh100.log"), "--tp", "8")
    assert r.code == 2 and "--tp 8 contradicts the log, which says 4" in r.err


def test_unknown_model_asks_for_model(run_cli):
    r = run_cli("explain-log", str(LOGS / "vllm-v0.6.5-llama3-8b-1xh100.log"))
    assert r.code == 2 and "give --model" in r.err and "Meta-Llama-3-8B" in r.err


def test_request_longer_than_the_logged_max_model_len(run_cli):
    r = run_cli("explain-log", str(LOGS / "vllm-v0.6-llama3.1-8b-rtx3090.log"), "-m", "llama-3.1-8b")
    assert r.code == 2 and "max_model_len of 29,000" in r.err


def test_explain_log_takes_no_pool_option(run_cli):
    r = run_cli("explain-log", str(LOGS / "vllm-v1-qwen3-235b-a22b-fp8-4xh100.log"), "--kv-pool", "10GiB")
    assert r.code == 2 and "No such option: --kv-pool" in r.err   # the pool is the log's


# --- concurrency --from-log ------------------------------------------------------------------------------------
def test_concurrency_takes_the_pool_from_the_log(run_cli):
    path = str(LOGS / "vllm-v1-qwen3-235b-a22b-fp8-4xh100.log")
    r = run_cli("concurrency", "--from-log", path, "-m", "qwen3-235b-a22b", "-g", "h100-sxm", "--tp", "4", "--gpus",
                "4", "--engine", "vllm", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    # 8.11 GiB = 8,708,169,236 B; a 31,000-token request is 1,938 blocks x 16 x 48,128 B = 1,492,353,024 B -> 5
    assert doc["kv_pool_bytes_per_gpu"] == int(8.11 * GIB) and doc["max_concurrency"] == 5
    assert any("taken from the start-up log" in n for n in doc["notes"])
    assert "start-up log" in doc["derivations"]["kv_pool_bytes_per_gpu"]["formula"]
    # the same pool given with --kv-pool: the same answer
    same = run_cli("concurrency", "--kv-pool", "8.11GiB", "-m", "qwen3-235b-a22b", "-g", "h100-sxm",
                   "--tp", "4", "--gpus", "4", "--engine", "vllm", "-f", "json").json()
    assert same["max_concurrency"] == 5


def test_concurrency_from_log_refuses_another_tp_and_a_second_pool(run_cli):
    path = str(LOGS / "vllm-v1-qwen3-235b-a22b-fp8-4xh100.log")
    r = run_cli("concurrency", "--from-log", path, "-m", "qwen3-235b-a22b")
    assert r.code == 2 and "TP 4" in r.err and "give --tp 4" in r.err
    r = run_cli("concurrency", "--from-log", path, "--kv-pool", "8GiB", "--tp", "4")
    assert r.code == 2 and "drop one of them" in r.err
