"""Start-up logs: the parser against the log text itself, and kvplan's reproduction of each engine's figures by
hand arithmetic. Every file in tests/data/logs/ is a trimmed public excerpt whose first lines (``## source:``) name
the issue or pull request and the engine release it came from."""

from pathlib import Path

import pytest

from kvplan.errors import KvplanError
from kvplan.inputs.startup_log import parse, read_log

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
    assert lg.value("max_concurrency") == 24.27
    assert lg.value("concurrency_len") == 8_192
    # 198,784 tokens are whole 16-token blocks: 12,424 x 16
    assert lg.value("kv_cache_tokens") == 12_424 * 16


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
    # runtime: the log names no release, so kvplan's newest vLLM rules: non-torch 0.27 GiB at TP1 plus the v0.20+
    # CUDA-graph estimate 0.30 + 0.02 x 32 layers = 0.94 GiB, against the log's non_torch_memory 1.79 GiB: -0.58 GiB
    assert rows["non-torch + CUDA graphs"]["difference"] == int(0.27 * GIB) + int(0.94 * GIB) - int(1.79 * GIB)
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
    # bf16 (1,152 + 132 = 1,284 B x 61 = 78,324 B): (975,488 x 78,324) / 2^30 = 71.16 GiB, not the log's 43.67
    bad = run_cli("explain-log", str(LOGS / "sglang-deepseek-v3.2-exp-8xb200-dp8.log"), "-g", "b200", "--kv-dtype",
                  "bf16", "-f", "json")
    assert bad.json()["reproduced"][0]["kvplan"] == 975_488 * 78_324
    assert not bad.json()["reproduced"][0]["agrees"]


def test_sglang_kv_dtype_read_from_the_sizes_and_the_pool_is_the_logged_size(run_cli):
    r = run_cli("explain-log", str(LOGS / "sglang-deepseek-v3.2-exp-8xb200-dp8.log"), "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    # the log states no KV dtype; only fp8's 48,068 B reproduces "KV size: 43.67 GB" (bf16's 78,324 B gives 71.16)
    assert doc["kv_dtype"] == "fp8" and any("KV dtype fp8" in n and "not bf16" in n for n in doc["notes"])
    assert doc["hardware"] == "h200"
    # the pool is the logged size, 43.67 x 2^30 = 46,890,305,454 B -- not tokens x a cell
    assert doc["kv_pool_bytes_per_gpu"] == int(43.67 * GIB) == 46_890_305_454
    # the capacity is the engine's own count: "#tokens: 975424" (not 43.67 GiB // 48,068 B = 975,499)
    assert doc["kv_capacity_tokens"] == 975_424 and int(43.67 * GIB) // 48_068 == 975_499
    # no GPU line in the excerpt: a warning, printed first, says it was assumed
    assert doc["warnings"][0].startswith("The log does not state its GPU: planned on h200")
    assert "give --hardware" in doc["warnings"][0]
    # DP attention: the MoE stays sharded over the 8 GPUs -> EP 8
    assert doc["parallelism"]["ep"] == 8


def test_a_pool_that_does_not_fit_is_never_printed(run_cli):
    r = run_cli("explain-log", str(LOGS / "sglang-deepseek-v3.2-exp-8xb200-dp8.log"), "--weight-dtype", "bf16",
                "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert all(row["figure"] != "KV pool per GPU" for row in doc["budget"])
    # bf16 weights at TP 1, EP 8: 653.9e9 experts x 2 B / 8 + (671e9 - 653.9e9) x 2 B = 163.475e9 + 34.2e9
    # = 197.675e9 B, less what SGLang's DP attention splits over the 8 ranks (the LM head, 3 dense MLPs and the
    # shared experts, 4,670,095,360 params x 2 B x 7/8 = 8,172,666,880 B): 189,502,333,120 B, plus what SGLang's
    # load adds above one rank, int(0.26 x 2^30) = 279,172,874 B: 189,781,505,994 B = 176.75 GiB per GPU, more than
    # the H200's 140.40 GiB holds
    warning = next(w for w in doc["warnings"] if "leaves no KV pool" in w)
    assert f"{(197.675e9 - 8_172_666_880 + 279_172_874) / GIB:,.2f}" == "176.75"
    assert "176.75 GiB of bf16 weights per GPU (TP=1 x PP=1, EP=8)" in warning
    assert "do not fit" in warning
    table = run_cli("explain-log", str(LOGS / "sglang-deepseek-v3.2-exp-8xb200-dp8.log"), "--weight-dtype", "bf16")
    assert table.code == 0 and "leaves no KV pool" in table.out
    pool_lines = [line for line in table.out.splitlines() if "KV pool per GPU" in line]
    assert pool_lines and all("(from the log)" in line for line in pool_lines)   # no budget row, no negative pool


def test_gpu_read_from_a_device_name_or_the_total_memory(run_cli):
    from kvplan.inputs.startup_log import gpu_preset

    # device names as vLLM's fused-MoE config files spell them (vllm/model_executor/layers/fused_moe/configs/)
    assert [gpu_preset(n) for n in ("NVIDIA_H100_80GB_HBM3", "NVIDIA_H100_PCIe", "NVIDIA_H100_NVL", "NVIDIA_H200",
                                    "NVIDIA_H20", "NVIDIA_H20-3e", "NVIDIA_B200", "NVIDIA_GB200",
                                    "NVIDIA_A100-SXM4-80GB", "AMD_Instinct_MI300X", "NVIDIA_GeForce_RTX_5090")] == \
        ["h100-sxm", "h100-pcie", None, "h200", "h20", None, "b200", "gb200", "a100-80gb", "mi300x", None]
    moe = ("INFO [fused_moe.py:720] Using configuration from /x/configs/E=128,N=384,device_name=NVIDIA_B200,"
           "dtype=fp8_w8a8.json for MoE layer.\n")
    lg = parse(moe + "GPU KV cache size: 178,880 tokens\n")
    assert lg.value("gpu_name") == "NVIDIA_B200"
    oom = parse("torch.OutOfMemoryError: CUDA out of memory. GPU 0 has a total capacity of 79.19 GiB of which 1 GiB "
                "is free.\nGPU KV cache size: 5 tokens\n")
    assert oom.value("total_gpu_memory_gib") == 79.19
    # the V0 profile's total_gpu_memory 79.22 GiB: h100-sxm (79.65, measured) is nearest; h100-pcie and h800 have
    # the same 79.65 but assumed, a100-80gb 80.0 is 0.98% away (within 1.5%) -> planned on h100-sxm, with a warning
    r = run_cli("explain-log", str(LOGS / "vllm-v0.6.5-llama3-8b-1xh100.log"), "-m", "llama-3.1-8b", "-f", "json")
    doc = r.json()
    assert doc["hardware"] == "h100-sxm"
    assert "nearest the h100-sxm preset (also near: h100-pcie, h800, a100-80gb)" in doc["warnings"][0]
    # the RTX 3090's 23.58 GiB is no preset's: the default, loudly
    r = run_cli("explain-log", str(LOGS / "vllm-v0.6-llama3.1-8b-rtx3090.log"), "-m", "llama-3.1-8b", "--decode",
                "20k", "-f", "json")
    assert "23.58 GiB (line 4), which no kvplan preset has" in r.json()["warnings"][0]


def test_weight_dtype_from_the_name_or_the_quantization_line():
    from kvplan.inputs.startup_log import weight_dtype_option

    assert weight_dtype_option(log("vllm-v1-qwen3-235b-a22b-fp8-4xh100.log"))[0] == "fp8"    # ".../Qwen3-...-FP8"
    assert weight_dtype_option(log("sglang-deepseek-v4-pro-fp8-8xh200.log")) == (
        "fp8", "the log's quantization fp8 (line 3)")                                        # "quant=fp8, fmt=e4m3"
    # 'quantization': 'modelopt' is FP8 or NVFP4; the checkpoint name ...-nvfp4 settles it
    assert weight_dtype_option(log("vllm-v0.24-qwen3.6-35b-a3b-rtx5090.log"))[0] == "nvfp4"
    assert weight_dtype_option(log("vllm-v0.6.5-llama3-8b-1xh100.log")) == (None, "")
    assert parse("INFO Using fp8 data type to store kv cache. It reduces the GPU memory footprint.\n"
                 "GPU KV cache size: 5 tokens\n").value("kv_cache_dtype") == "fp8"


def test_explain_log_and_concurrency_from_log_agree(run_cli):
    path = str(LOGS / "vllm-v1-qwen3-235b-a22b-fp8-4xh100.log")
    conc = run_cli("concurrency", "--from-log", path, "--tp", "4", "-f", "json")
    expl = run_cli("explain-log", path, "-f", "json")
    assert conc.code == 0 and expl.code == 0, conc.err + expl.err
    c, e = conc.json(), expl.json()
    for key in ("model", "hardware", "parallelism", "kv_dtype", "engine", "engine_release"):
        assert c[key] == e[key], key
    assert (c["model"], c["parallelism"]["tp"], c["engine"], c["kv_dtype"]) == ("qwen3-235b-a22b", 4, "vllm", "bf16")
    # 8.11 GiB = 8,708,169,236 B // 1,492,353,024 B (31,000 tokens = 1,938 blocks x 16 x 48,128 B) = 5 in both
    assert c["max_concurrency"] == e["max_concurrency"] == 5
    assert any("Weights fp8" in n for n in c["notes"]) and c["warnings"][0].startswith("The log does not state")


# --- explain-log: bad input --------------------------------------------------------------------------------------
def test_contradicting_option_is_refused(run_cli):
    r = run_cli("explain-log", str(LOGS / "vllm-v1-qwen3-235b-a22b-fp8-4xh100.log"), "--tp", "8")
    assert r.code == 2 and "--tp 8 contradicts the log, which says 4" in r.err


def test_unknown_model_asks_for_model(run_cli):
    r = run_cli("explain-log", str(LOGS / "vllm-v0.6.5-llama3-8b-1xh100.log"))
    assert r.code == 2 and "give --model" in r.err and "Meta-Llama-3-8B" in r.err


def test_request_longer_than_the_logged_max_model_len(run_cli):
    # a request the user gave (the default one is fitted into the limit: tests/test_first_use_defaults.py)
    r = run_cli("explain-log", str(LOGS / "vllm-v0.6-llama3.1-8b-rtx3090.log"), "-m", "llama-3.1-8b",
                "--prompt", "1k", "--decode", "30k")
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
    r = run_cli("concurrency", "--from-log", path, "--tp", "8")
    assert r.code == 2 and "--tp 8 contradicts the log, which says 4" in r.err
    r = run_cli("concurrency", "--from-log", path, "--weight-dtype", "bf16")
    assert r.code == 2 and "--weight-dtype bf16 contradicts the log" in r.err
    r = run_cli("concurrency", "--from-log", path, "--engine", "sglang")
    assert r.code == 2 and "contradicts the log, which vllm wrote" in r.err
    r = run_cli("concurrency", "--from-log", path, "--kv-pool", "8GiB", "--tp", "4")
    assert r.code == 2 and "drop one of them" in r.err


def test_gpu_and_weight_width_from_the_fused_moe_file_name(run_cli):
    path = LOGS / "vllm-v0.8-deepseek-int4-h20.log"
    lg = read_log(path)
    # "...configs/E=256,N=256,device_name=NVIDIA_H20,dtype=int4_w4a16.json"; the one-line profile of April 2025
    assert (lg.value("gpu_name"), lg.value("moe_weight_dtype")) == ("NVIDIA_H20", "int4_w4a16")
    assert (lg.value("total_gpu_memory_gib"), lg.value("gpu_memory_utilization"), lg.value("weights_gib"),
            lg.value("non_torch_gib"), lg.value("activation_peak_gib"), lg.value("available_kv_gib")) == \
        (95.22, 0.90, 43.09, 7.33, 6.30, 28.98)
    r = run_cli("explain-log", str(path), "-m", "deepseek-r1", "--tp", "8", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["hardware"] == "h20" and doc["warnings"] == []
    assert any("GPU h20: the log's device NVIDIA_H20 (line 3)" in n for n in doc["notes"])
    assert any("Weights int4: the fused-MoE kernel's dtype int4_w4a16" in n for n in doc["notes"])
    rows = {row["figure"]: row for row in doc["budget"]}
    # int4 weights at TP 8: 671e9 x 0.5 B / 8 = 41,937,500,000 B, plus what vLLM keeps beside them: the embedding and
    # LM head (2 x 129,280 x 7,168 = 1,853,358,080 params) at bf16, +1.5 B each / 8 = 347,504,640 B, and fp16 group
    # scales per 128 weights, (671e9 - 1,853,358,080) x 2 / 128 / 8 = 1,306,927,035 B: 43,591,931,675 B = 40.60 GiB
    # against the logged 43.09 GiB
    assert rows["weights on this GPU"]["kvplan"] == 41_937_500_000 + 347_504_640 + 1_306_927_035
    assert rows["weights on this GPU"]["difference"] == 43_591_931_675 - int(43.09 * GIB)
    # the H20 preset's 95.58 GiB (an assumption in the preset) against the logged 95.22: +0.36 GiB
    assert abs(rows["HBM of the GPU"]["difference"] - 0.36 * GIB) < 2**20
    refused = run_cli("explain-log", str(path), "-m", "deepseek-r1", "--tp", "8", "-g", "h100-sxm")
    assert refused.code == 2 and "--hardware h100-sxm contradicts the log, whose GPU is NVIDIA_H20" in refused.err
    assert "give --hardware h20" in refused.err
    wrong_width = run_cli("explain-log", str(path), "-m", "deepseek-r1", "--tp", "8", "--weight-dtype", "fp8")
    assert wrong_width.code == 2 and "--weight-dtype fp8 contradicts the log" in wrong_width.err


@pytest.mark.parametrize("name, options, other", [
    ("sglang-qwen3-235b-a22b-fp8-4xh100.log", {"hardware": "h100-sxm"}, "neutral"),
    ("sglang-qwen3-235b-a22b-fp8-4xh100.log", {"hardware": "h100-sxm"}, "vllm"),
    ("vllm-v1-qwen3-235b-a22b-fp8-4xh100.log", {}, "sglang"),
])
def test_explain_log_of_another_engines_deployment_is_one_error(name, options, other):
    # the library's plan_explain_log takes any scenario; one of another engine has none of the log engine's rules
    # (SGLang's pool cell, vLLM's block config): a one-line error, not an AttributeError
    from kvplan.calc.explain_log import plan_explain_log
    from kvplan.options.scenarios import build_scenario, scenario_from_log

    lg = log(name)
    s, _, _ = scenario_from_log(lg, options)
    other_s = build_scenario(model=s.model.id, hardware=s.hardware.id, tp=str(s.parallelism.tp), engine=other)
    with pytest.raises(KvplanError, match=f"the deployment's engine is {other}, but {lg.engine} wrote the start-up "
                                          "log"):
        plan_explain_log(other_s, lg)
