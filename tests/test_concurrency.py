"""`kvplan concurrency`: budget, engine-faithful accounting against public engine logs, and monotonicity."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import engines
from kvplan.calc.concurrency import ConcurrencyOptions, plan_concurrency
from kvplan.errors import KvplanError
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.scenario import Scenario
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.parallel import Parallelism

GIB = 2**30


OPTIONS = {"batch", "tpot_seconds", "dram_bytes_per_node", "ssd_bytes_per_node", "contexts", "dtypes"}


def scenario(model="llama-3.1-8b", hardware="h100-sxm", dtype=KVDtype.BF16, par=Parallelism(), hw=None, **kw):
    spec = load_model(model) if isinstance(model, str) else model
    return Scenario(model=spec, hardware=hw or load_hardware(hardware), kv_dtype_request=dtype,
                    tp=par.tp, pp=par.pp, dp=par.dp, ep=par.ep, **kw)


def run(model="llama-3.1-8b", hardware="h100-sxm", dtype=KVDtype.BF16, par=Parallelism(), hw=None, **kw):
    """The concurrency JSON document (raw numbers) for a scenario built like the CLI builds it."""
    import json

    from kvplan.present.concurrency import present
    from kvplan.render.output import to_json

    options = ConcurrencyOptions(**{k: v for k, v in kw.items() if k in OPTIONS})
    s = scenario(model, hardware, dtype, par, hw, **{k: v for k, v in kw.items() if k not in OPTIONS})
    return json.loads(to_json(present(plan_concurrency(s, options))))


def test_budget_waterfall_by_hand():
    # Llama-3.1-8B bf16 on one H100 SXM, TP=1:
    #   HBM 79.65 GiB = 85,523,536,282 B; x 0.9 = 76,971,182,653 B
    #   weights 8.03e9 params x 2 B = 16,060,000,000 B
    #   activations 8,192 x (4 x 4,096 + 3 x 14,336) x 2 B + 1,024 x 128,256 x 4 B = 973,078,528 + 525,336,576
    #   runtime 1 GiB = 1,073,741,824 B
    d = run(par=Parallelism(tp=1), nodes=1)
    b = d["budget"]
    assert b["hbm_bytes"] == 85_523_536_282
    assert b["weights_bytes"] == 16_060_000_000
    assert b["activation_bytes"] == 1_498_415_104
    assert b["runtime_bytes"] == 1_073_741_824
    assert d["kv_pool_bytes_per_gpu"] == 76_971_182_653 - 16_060_000_000 - 1_498_415_104 - 1_073_741_824


def test_vllm_num_blocks_llama_8b_public_log():
    # Public vLLM log, Llama-3.1-8B bf16, TP=1 (RTX A5000): "Available KV cache memory: 5.29 GiB",
    # "GPU KV cache size: 43,296 tokens". Page = 16 tokens x 32 layers x 4,096 B = 2,097,152 B per block;
    # 43,296 tokens = 2,706 blocks. The log rounds GiB to 2 decimals, so the pool lies in [5.285, 5.295) GiB.
    model = load_model("llama-3.1-8b")
    par = Parallelism()
    lo = engines.vllm_config(model, KVDtype.BF16, par, int(5.285 * GIB), 2048, 2048)
    hi = engines.vllm_config(model, KVDtype.BF16, par, int(5.295 * GIB), 2048, 2048)
    assert lo.kv_cache_tokens <= 43_296 <= hi.kv_cache_tokens
    exact = engines.vllm_config(model, KVDtype.BF16, par, 2706 * 2_097_152, 2048, 2048)
    assert exact.num_blocks == 2706 and exact.kv_cache_tokens == 43_296


def test_vllm_concurrency_llama_70b_fp8_public_log():
    # Public vLLM log, Llama-3.3-70B (same architecture as 3.1-70B), fp8 KV, one GPU, max_model_len 32,000:
    # "Available KV cache memory: 5.11 GiB", "GPU KV cache size: 33,504 tokens",
    # "Maximum concurrency for 32,000 tokens per request: 1.05x".
    # Page = 16 x 80 layers x 8 heads x 256 x 1 B = 2,621,440 B; 33,504 tokens = 2,094 blocks;
    # 2,094 / cdiv(32,000, 16) = 2,094 / 2,000 = 1.047.
    model = load_model("llama-3.1-70b")
    cfg = engines.vllm_config(model, KVDtype.FP8, Parallelism(), 2094 * 2_621_440, 32_000, 8192)
    assert cfg.kv_cache_tokens == 33_504
    assert round(cfg.max_concurrency, 2) == 1.05
    lo = engines.vllm_config(model, KVDtype.FP8, Parallelism(), int(5.105 * GIB), 32_000, 8192)
    hi = engines.vllm_config(model, KVDtype.FP8, Parallelism(), int(5.115 * GIB), 32_000, 8192)
    assert lo.kv_cache_tokens <= 33_504 <= hi.kv_cache_tokens


def test_vllm_min_over_workers_pitfall_qwen3_235b():
    # vllm-project/vllm#21348: Qwen3-235B-A22B-FP8, TP=4, bf16 KV: "Available KV cache memory: 8.11 GiB",
    # "GPU KV cache size: 178,880 tokens". Per rank: 1 KV head -> page 16 x 94 x 1 x 256 x 2 = 770,048 B;
    # 8.11 GiB / 770,048 = 11,308 blocks = 180,928 tokens. The log's 178,880 is 1.1% lower: num_blocks is the
    # minimum over workers while the logged memory is rank 0's (engine-kv-accounting.md pitfall 9).
    model = load_model("qwen3-235b-a22b")
    cfg = engines.vllm_config(model, KVDtype.BF16, Parallelism(tp=4), int(8.11 * GIB), 40_960, 8192)
    assert cfg.kv_cache_tokens == 180_928
    assert 178_880 < cfg.kv_cache_tokens < 178_880 * 1.015


def test_sglang_cell_size_qwen3_235b_public_log():
    # Same issue, SGLang TP=4: "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB".
    # Cell per token on one rank = 94 layers x 1 head x (128 + 128) x 2 B = 48,128 B; K alone is half:
    # 367,404 x 24,064 B = 8.841e9 B = 8.23 GiB (SGLang's "GB" are 2^30).
    model = load_model("qwen3-235b-a22b")
    par = Parallelism(tp=4)
    cell = engines.sglang_cell_size(model, KVDtype.BF16, par)
    assert cell == 48_128
    assert round(367_404 * cell / 2 / GIB, 2) == 8.23
    pool = engines.sglang_pool(model, KVDtype.BF16, par, 367_404 * 48_128 + 48_127, page_size=1)
    assert pool.max_total_num_tokens == 367_404


def test_vllm_sliding_window_model_gpt_oss():
    # gpt-oss-120b, TP=1, bf16, pool 10 GiB, max_model_len 131,072, max_num_batched_tokens 8,192.
    # Page per layer = 16 x 8 heads x (64 + 64) x 2 B = 32,768 B. 18 sliding + 18 full layers -> 2 groups of 18.
    # num_blocks = 10 GiB // 32,768 // 18 = 327,680 // 18 = 18,204; logged tokens = 18,204 // 2 x 16 = 145,632.
    # Blocks per request = cdiv(131,072, 16) + (cdiv(min(128 - 1 + 8,192, 131,072), 16) + 1) = 8,192 + 521.
    model = load_model("gpt-oss-120b")
    cfg = engines.vllm_config(model, KVDtype.BF16, Parallelism(), 10 * GIB, 131_072, 8192)
    assert (cfg.num_groups, cfg.group_size, cfg.padding_layers) == (2, 18, 0)
    assert cfg.num_blocks == 18_204
    assert cfg.kv_cache_tokens == 145_632
    assert cfg.blocks_per_request == 8_713
    assert cfg.max_concurrency == pytest.approx(18_204 / 8_713)


def test_vllm_gemma3_style_grouping_and_padding():
    # 52 sliding + 10 full layers: group size 10 -> 6 sliding groups (8 padding layers) + 1 full = 7 groups
    # (engine-kv-accounting.md 2.2, Gemma-3-27B).
    from kvplan.specs.model import LayerGroup, ModelSpec

    full_idx = tuple(range(5, 62, 6))[:10]
    slide_idx = tuple(i for i in range(62) if i not in full_idx)
    attn = {"kv_heads": 16, "head_dim_k": 128, "head_dim_v": 128}
    model = ModelSpec(id="g3", name="g3", sources=("test",), num_layers=62, groups=(
        LayerGroup(name="local", layers=slide_idx, kind={"kind": "sliding_window", "window": 1024, **attn}),
        LayerGroup(name="global", layers=full_idx, kind={"kind": "full_attention", **attn})))
    cfg = engines.vllm_config(model, KVDtype.BF16, Parallelism(), 10 * GIB, 131_072, 8192)
    assert (cfg.num_groups, cfg.group_size, cfg.padding_layers) == (7, 10, 8)


def test_vllm_hybrid_linear_block_size_and_padding():
    # Qwen3-Next-like: 12 full layers (2 KV heads x 256) + 36 GDN layers, bf16, TP=1.
    # Attention page for one token = 2 x (256 + 256) x 2 = 2,048 B; GDN state page = 1,097,728 B.
    # Block = 16 x cdiv(1,097,728, 16 x 2,048) = 16 x 34 = 544 tokens; page = 544 x 2,048 = 1,114,112 B
    # (the state page padded by 1.49%). Groups: 36 and 12 -> group size 12 -> 3 + 1 = 4 groups.
    from kvplan.specs.model import LayerGroup, ModelSpec

    gdn = {"kind": "gated_delta_net", "num_k_heads": 16, "num_v_heads": 32, "head_k_dim": 128, "head_v_dim": 128}
    full = {"kind": "full_attention", "kv_heads": 2, "head_dim_k": 256, "head_dim_v": 256, "q_heads": 16}
    model = ModelSpec(id="q3n", name="q3n", sources=("test",), num_layers=48, groups=(
        LayerGroup(name="linear", kind=gdn, layers=tuple(i for i in range(48) if i % 4 != 3)),
        LayerGroup(name="full", kind=full, layers=tuple(range(3, 48, 4)))))
    cfg = engines.vllm_config(model, KVDtype.BF16, Parallelism(), 10 * GIB, 262_144, 8192)
    assert cfg.block_size == 544
    assert cfg.page_bytes_per_layer == 1_114_112
    assert cfg.num_groups == 4 and cfg.group_size == 12
    assert cfg.mamba_page_padding == pytest.approx(1_114_112 / 1_097_728 - 1)
    # num_blocks = 10 GiB // 1,114,112 // 12 = 9,637 // 12 = 803.
    assert cfg.num_blocks == 803


def test_mla_replication_under_tp_vs_attention_dp():
    # DeepSeek-R1 fp8 on 8 x H200 with a 40 GiB pool per GPU, 31,000-token requests, FlashMLA blocks of 64:
    # per request per GPU = 61 x cdiv(31,000, 64) x 64 x 576 B = 61 x 31,040 x 576 = 1,090,621,440 B (TP=8 or TP=1:
    # the latent is whole on every rank). 40 GiB // that = 39 per GPU.
    # TP=8: one replica -> 39 requests. DP=8 (attention data-parallel): 8 replicas -> 312.
    tp8 = run("deepseek-r1", "h200", KVDtype.FP8, Parallelism(tp=8), kv_pool_bytes=40 * GIB)
    dp8 = run("deepseek-r1", "h200", KVDtype.FP8, Parallelism(tp=1, dp=8, ep=8), kv_pool_bytes=40 * GIB)
    assert tp8["kv_bytes_per_request_per_gpu"] == 1_090_621_440 == dp8["kv_bytes_per_request_per_gpu"]
    assert tp8["max_concurrency"] == 39
    assert dp8["max_concurrency"] == 312


def test_ep_moves_expert_weights_only():
    # DeepSeek-R1 fp8: 671e9 B of weights, routed experts 653.9e9 (97.45%). DP=8 EP=8, TP=1:
    # experts 671e9 x 653.9/671 / 8 + the rest (671e9 - 653.9e9) / 1 = 81.7375e9 + 17.1e9 per GPU.
    d = run("deepseek-r1", "h200", KVDtype.FP8, Parallelism(tp=1, dp=8, ep=8))
    assert d["budget"]["weights_bytes"] == pytest.approx(653.9e9 / 8 + 17.1e9, rel=1e-6)


def test_weights_do_not_fit_deepseek_r1_on_one_h100_node():
    # 671e9 B / 8 = 83.9 GB per GPU > 0.9 x 79.65 GiB = 77.0 GB.
    with pytest.raises(KvplanError) as err:
        run("deepseek-r1", "h100-sxm", KVDtype.FP8, Parallelism(tp=8))
    assert "does not fit" in err.value.message
    # the hint can be pasted: it names --nodes and the DP degree, not only the TP x PP shape
    assert "16 (--tp 8 --pp 2 --nodes 2 --dp 1)" in err.value.hint


def test_two_h100_nodes_hold_deepseek_r1():
    d = run("deepseek-r1", "h100-sxm", KVDtype.FP8, Parallelism(tp=8, pp=2), nodes=2)
    assert d["max_concurrency"] > 0 and d["parallelism"]["gpus"] == 16


def test_overflow_timing_by_hand():
    # Llama-3.1-8B bf16, a 10 GiB pool, 4 requests from a 1,000-token prompt, blocks of 16:
    # 4 x ceil(c / 16) x 16 x 131,072 > 10 GiB  <=>  ceil(c / 16) x 16 > 20,480  <=>  c >= 20,481,
    # i.e. after 20,481 - 1,000 = 19,481 decode steps; at 20 ms/token that is 389.62 s.
    d = run(kv_pool_bytes=10 * GIB, batch=4, prompt_tokens=1000, decode_tokens=30_000, tpot_seconds=0.02)
    first = d["overflow"][0]
    assert first["batch"] == 4
    assert first["decode_steps_until_full"] == 19_481
    assert first["seconds_until_full"] == pytest.approx(389.62)


def test_shared_prefix_counted_once():
    # 10 GiB pool, 4,096-token prompt all shared, 4,096 decode: each request holds 4,096 own tokens
    # (512 MiB); the shared copy takes 512 MiB once: (10 - 0.5) GiB // 0.5 GiB = 19. Without sharing: 10.
    shared = run(kv_pool_bytes=10 * GIB, prompt_tokens=4096, decode_tokens=4096, shared_prefix_tokens=4096)
    alone = run(kv_pool_bytes=10 * GIB, prompt_tokens=4096, decode_tokens=4096)
    assert shared["max_concurrency"] == 19 and alone["max_concurrency"] == 10


def test_token_budget_what_if():
    # A 4,096-token budget: 512 MiB per request whatever the context -> 20 in 10 GiB; 31,000 tokens -> 2.
    capped = run(kv_pool_bytes=10 * GIB, token_budget=4096)
    full = run(kv_pool_bytes=10 * GIB)
    assert capped["max_concurrency"] == 20 and full["max_concurrency"] == 2


def test_mtp_layer_draws_on_the_pool():
    # One more MLA layer: 62 x 31,040 x 576 B = 1,108,500,480 B per request.
    d = run("deepseek-r1", "h200", KVDtype.FP8, Parallelism(tp=8), kv_pool_bytes=40 * GIB, mtp_layers=1)
    assert d["kv_bytes_per_request_per_gpu"] == 62 * 31_040 * 576


def test_spec_lookahead_slots_add_tokens():
    # 3 lookahead slots: 31,003 tokens -> cdiv(31,003, 64) x 64 = 31,040, same blocks as 31,000; 61 more -> 31,064
    # crosses into the next block: 61 x 31,104 x 576 B.
    three = run("deepseek-r1", "h200", KVDtype.FP8, Parallelism(tp=8), kv_pool_bytes=40 * GIB, spec_tokens=3)
    many = run("deepseek-r1", "h200", KVDtype.FP8, Parallelism(tp=8), kv_pool_bytes=40 * GIB, spec_tokens=64)
    assert three["kv_bytes_per_request_per_gpu"] == 61 * 31_040 * 576
    assert many["kv_bytes_per_request_per_gpu"] == 61 * 31_104 * 576


def test_dram_tier_defaults_and_override():
    # One rule for every command: the node's host DRAM (2 TB on an H200 node), a request parking one shard on
    # each of the min(TP x PP, 8) GPUs it spans. Per request per GPU 1,090,621,440 B (above) x 8 = 8,724,971,520 B
    # per node; 2,000,000,000,000 // 8,724,971,520 = 229 requests; per GPU 2e12 / 8 = 250e9 B.
    d = run("deepseek-r1", "h200", KVDtype.FP8, Parallelism(tp=8), kv_pool_bytes=40 * GIB)
    assert d["tiers"]["l2_dram_bytes_per_gpu"] == 250_000_000_000
    assert d["tiers"]["l2_requests"] == 229
    # --dram 100GB per node: 12.5e9 per GPU, 100e9 // 8,724,971,520 = 11 requests.
    o = run("deepseek-r1", "h200", KVDtype.FP8, Parallelism(tp=8), kv_pool_bytes=40 * GIB,
            dram_bytes_per_node=100_000_000_000)
    assert o["tiers"]["l2_dram_bytes_per_gpu"] == 12_500_000_000
    assert o["tiers"]["l2_requests"] == 11


@settings(max_examples=25, deadline=None)
@given(extra_gib=st.floats(min_value=0, max_value=200), context=st.integers(min_value=1, max_value=131_072))
def test_more_hbm_never_lowers_concurrency(extra_gib, context):
    base_hw = load_hardware("h200")
    from dataclasses import replace

    bigger = replace(base_hw, hbm_capacity_gib=replace(
        base_hw.hbm_capacity_gib, value=base_hw.hbm_capacity_gib.value + extra_gib))
    model = load_model("llama-3.1-70b")
    par = Parallelism(tp=8)

    def conc(hw, dtype):
        s = Scenario(model=model, hardware=hw, kv_dtype_request=dtype, tp=par.tp, dp=1, prompt_tokens=0,
                     decode_tokens=context)
        return plan_concurrency(s).max_concurrency.value

    assert conc(bigger, KVDtype.BF16) >= conc(base_hw, KVDtype.BF16)
    assert conc(base_hw, KVDtype.FP8) >= conc(base_hw, KVDtype.BF16)
    b200 = load_hardware("b200")   # nvfp4 KV needs FP4 tensor cores
    assert conc(b200, KVDtype.NVFP4) >= conc(b200, KVDtype.FP8)


def test_context_table_is_monotone_in_context_and_dtype():
    d = run("deepseek-r1", "b200", KVDtype.FP8, Parallelism(tp=8),   # nvfp4 needs FP4 tensor cores
            dtypes=(KVDtype.BF16, KVDtype.FP8, KVDtype.NVFP4))
    rows = d["by_context"]
    for dtype in ("bf16", "fp8", "nvfp4"):
        values = [r[dtype] for r in rows]
        assert values == sorted(values, reverse=True)
    assert all(r["fp8"] >= r["bf16"] and r["nvfp4"] >= r["fp8"] for r in rows)


def test_cli_concurrency_json_and_errors(run_cli):
    r = run_cli("concurrency", "-f", "json")
    assert r.code == 0, r.err
    data = r.json()
    for key in ("kv_pool_bytes_per_gpu", "max_concurrency", "kv_capacity_tokens"):
        assert isinstance(data[key], int)
    v = run_cli("concurrency", "--engine", "vllm", "--kv-pool", "40GiB", "-f", "json").json()
    assert isinstance(v["num_blocks"], int) and isinstance(v["vllm_max_concurrency"], float)
    assert "vllm_kv_cache_tokens" in v
    for args, needle in [(("--gpu-memory-utilization", "1.5"), "gpu-memory-utilization"),
                         (("--engine", "trt"), "unknown engine"),
                         (("--tpot", "50"), "needs a unit"),
                         (("--nodes", "0"), "--nodes"),
                         (("--ep", "64"), "--ep"),
                         (("--hardware", "h300"), "unknown hardware"),
                         (("--kv-pool", "40"), "no unit"),
                         (("--hardware", "h100-sxm"), "does not fit")]:
        bad = run_cli("concurrency", *args)
        assert bad.code == 2, (args, bad.err)
        assert len(bad.err.strip().splitlines()) == 1 and needle in bad.err, (args, bad.err)


def test_plot_writes_a_png(run_cli, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "conc.png"
    r = run_cli("concurrency", "--plot", str(out), "-f", "json")
    assert r.code == 0, r.err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = run_cli("concurrency", "--plot", str(tmp_path / "conc.svg"))
    assert bad.code == 2 and "png" in bad.err


def test_plot_without_matplotlib_is_a_user_error(run_cli, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    r = run_cli("concurrency", "--plot", str(tmp_path / "x.png"))
    assert r.code == 2 and "kvplan[plot]" in r.err


def test_nvfp4_in_the_dtype_table_follows_the_kv_dtype_rule(run_cli):
    # --kv-dtype nvfp4 is refused on H200 (no FP4 tensor cores); --dtypes nvfp4 showed a column there anyway
    r = run_cli("concurrency", "--dtypes", "bf16,nvfp4")
    assert r.code == 2 and "FP4 tensor cores" in r.err and "--dtypes" in r.err, r.err
    assert run_cli("concurrency", "-g", "b200", "--dtypes", "nvfp4", "--brief").code == 0


def test_a_pool_larger_than_the_engines_batch_limit_says_so(run_cli):
    # 200-token requests on one H100: thousands fit the pool, vLLM runs at most --max-num-seqs 64 at once
    r = run_cli("concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--prompt", "100", "--decode",
                "100", "--engine", "vllm", "--max-num-seqs", "64", "-f", "json")
    assert any("the engine runs at most 64 at once" in n for n in r.json()["notes"])
    assert not any("runs at most" in n for n in run_cli("concurrency", "-f", "json").json()["notes"])


def test_a_dtype_the_engine_cannot_run_has_no_bars(run_cli):
    # vLLM runs no nvfp4 cache for an MLA model (its MLA backends' supported_kv_cache_dtypes): the table says n/a,
    # and the chart leaves the series out instead of drawing bars of 0 requests
    r = run_cli("concurrency", "--engine", "vllm", "-m", "deepseek-r1", "-g", "b200", "-f", "json")
    assert r.code == 0, r.err
    assert all(cell is None for cell in _dtype_column(r.json(), "nvfp4"))
    r = run_cli("concurrency", "--engine", "vllm", "-m", "deepseek-r1", "-g", "b200")
    chart = r.out[r.out.index("Concurrent requests by context\n"):]
    assert " bf16 " in chart and " fp8 " in chart and "nvfp4" not in chart.split("•")[0]


def _dtype_column(doc: dict, dtype: str) -> list:
    return [row[dtype] for row in doc["by_context"]]
