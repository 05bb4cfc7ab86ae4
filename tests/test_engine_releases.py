"""Engine rules by release (docs/engine-rules-by-release.md): each modelled change on both sides of the release
where it changed, with `--engine vllm==X.Y` / `sglang==X.Y` (or the same through ``kvplan.engines``).

Every expected number is worked out in the comment beside it from the rule the document quotes from the
release's own source (file named in each comment), never copied from kvplan's output.
"""

from __future__ import annotations

import pytest
from conftest import write_hardware  # the one hand-written GPU preset of the tests

from kvplan import engines
from kvplan.engines.base import release_text
from kvplan.errors import KvplanError
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.model import LayerGroup, ModelSpec
from kvplan.specs.parallel import Parallelism

GIB = 2**30


def concurrency(run_cli, *args: str) -> dict:
    r = run_cli("concurrency", *args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()




# --- choosing a release ------------------------------------------------------------------------------------
def test_plain_names_are_the_newest_release_the_document_covers():
    # "Newest" in the document: vLLM v0.33.0, SGLang v0.5.23.
    assert engines.get("vllm").version == (0, 33, 0)
    assert engines.get("sglang").version == (0, 5, 23)
    assert engines.get("vllm").release == "vLLM 0.31+ rules (read from the v0.31.0..v0.33.0 wheels)"


@pytest.mark.parametrize("text, version", [("vllm==0.17", (0, 17, 0)), ("VLLM==0.10.1", (0, 10, 1)),
                                           ("vllm==0.7.3", (0, 7, 3)), ("sglang==0.5.3", (0, 5, 3)),
                                           ("sglang==0.4.6", (0, 4, 6))])
def test_a_pinned_release_is_parsed(text, version):
    assert engines.get(text).version == version


def test_the_release_text_names_the_span_of_read_wheels():
    # v0.15.0-v0.16.x share every modelled rule: v0.17.0 changes the sampler bytes of the activation reserve
    # (SAMPLER_BYTES, 38.4 -> 14.9) and v0.18.0 the MLA block, so v0.16 and v0.17 are two spans; the wheels read
    # in the first are v0.15.0 and v0.16.0. v0.19.x alone counts padding without v0.20's 0.92.
    assert engines.get("vllm==0.16").release == "vLLM 0.15-0.16 rules (read from the v0.15.0..v0.16.0 wheels)"
    assert engines.get("vllm==0.17").release == "vLLM 0.17 rules (read from the v0.17.0 wheel)"
    assert engines.get("vllm==0.19").release == "vLLM 0.19 rules (read from the v0.19.0 wheel)"
    # V1 (v0.8.0) is its own span, read from the v0.8.5 wheel; v0.7.3 alone is V0
    assert engines.get("vllm==0.8.5").release == "vLLM 0.8 rules (read from the v0.8.5 wheel)"
    # SGLang v0.5.22 prints --attn-dp-size (launch_command): v0.5.20-v0.5.21 | v0.5.22 | v0.5.23+
    assert engines.get("sglang==0.5.21").release == \
        "SGLang 0.5.20-0.5.21 rules (read from the v0.5.20..v0.5.21 wheels)"
    assert engines.get("sglang==0.5.22").release == "SGLang 0.5.22 rules (read from the v0.5.22 wheel)"


# Release thresholds in an engine's modules that are not span boundaries, each with its reason.
NOT_BOUNDARIES = {(0, 0, 0): "NON_TORCH_GIB's floor key, below OLDEST",
                  (0, 8, 3): "--data-parallel-size: a printed flag carrying its own release (Flag.since)",
                  (0, 8, 5): "--long-prefill-token-threshold: refused below it, naming it (v0.8.0 falls back to V0; "
                             "v0.8.1-v0.8.4 not read); the 0.8 span's rules are read in the v0.8.5 wheel"}


def _release_literals(path):
    """Every (0, minor, patch) literal in a module's code, outside the READ_WHEELS list and the OLDEST/NEWEST line:
    the releases its rules compare against."""
    import ast
    tree = ast.parse(open(path).read())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if names & {"READ_WHEELS", "OLDEST", "NEWEST"}:
                skip |= {id(n) for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Tuple) and id(node) not in skip and len(node.elts) == 3
                and all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts)
                and node.elts[0].value == 0):
            out.add(tuple(e.value for e in node.elts))
    return out


@pytest.mark.parametrize("engine, paths", [("vllm", ["vllm.py", "vllm_scheduler.py"]),
                                           ("sglang", ["sglang.py", "sglang_scheduler.py"])])
def test_every_release_a_rule_compares_against_starts_its_own_labelled_span(engine, paths):
    import importlib
    import pathlib
    mod = importlib.import_module(f"kvplan.engines.{engine}")
    where = pathlib.Path(mod.__file__).parent
    found = set().union(*(_release_literals(where / p) for p in paths)) - set(NOT_BOUNDARIES)
    assert found - set(mod.BOUNDARIES) == set()
    # each boundary is its own label: the release just before it is labelled differently
    for b in mod.BOUNDARIES[1:]:
        assert engines.get(f"{engine}=={release_text(b)}").release.split(" rules")[0].split(" ")[1].startswith(
            release_text(b))


@pytest.mark.parametrize("text", ["vllm==0.7.2", "vllm==0.33.1", "vllm==1.0", "sglang==0.4.5", "sglang==0.5.24",
                                  "vllm==latest"])
def test_a_release_outside_the_document_is_refused_with_the_range(text):
    with pytest.raises(KvplanError) as err:
        engines.get(text)
    assert ("0.7.3 .. vllm==0.33.0" if text.startswith("vllm") else "0.4.6 .. sglang==0.5.23") in err.value.one_line()


def test_the_cli_refuses_an_unknown_release_in_one_line(run_cli):
    r = run_cli("concurrency", "--engine", "vllm==0.34", "-f", "json")
    assert r.code == 2
    assert r.err.count("\n") == 1 and "vllm==0.7.3 .. vllm==0.33.0" in r.err
    r = run_cli("concurrency", "--engine", "trtllm==1.0")
    assert r.code == 2 and "choose one of neutral, vllm, sglang" in r.err
    r = run_cli("concurrency", "--engine", "neutral==0.1")
    assert r.code == 2 and "no releases" in r.err


def test_the_pinned_engine_is_named_in_the_output(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")   # the first line on one line
    d = concurrency(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--engine", "vllm==0.19")
    assert d["engine"] == "vllm==0.19"
    assert d["engine_release"] == "vLLM 0.19 rules (read from the v0.19.0 wheel)"
    table = run_cli("concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--engine", "vllm==0.19")
    assert "vllm==0.19 engine" in table.out.splitlines()[0]


# --- vLLM default gpu_memory_utilization (vllm/config/cache.py: 0.9 @v0.19.0, 0.92 @v0.20.0) -------------------
def test_vllm_default_fraction_moves_to_092_in_v020(run_cli, tmp_path):
    # An 80 GiB GPU: HBM = 80 x 2^30 = 85,899,345,920 B, of which vLLM sees 85,899,345,920 - int(0.70 x 2^30) =
    # 85,147,726,644 B (a GPU without a measured driver reserve takes the largest seen). Weights, activation and
    # non-torch memory are the same in both releases; v0.20 also subtracts its CUDA-graph estimate, 0.30 + 0.02 x 32
    # layers = 0.94 GiB = 1,009,317,314 B, so the pools differ by
    #   int(85,147,726,644 x 0.92) - int(85,147,726,644 x 0.9) - 1,009,317,314
    #   = 78,335,908,512 - 76,632,953,979 - 1,009,317,314 = 693,637,219 B.
    gpu = write_hardware(tmp_path, 80, "gpu-80")
    old = concurrency(run_cli, "-m", "llama-3.1-8b", "-g", gpu, "--tp", "1", "--engine", "vllm==0.19")
    new = concurrency(run_cli, "-m", "llama-3.1-8b", "-g", gpu, "--tp", "1", "--engine", "vllm==0.20")
    newest = concurrency(run_cli, "-m", "llama-3.1-8b", "-g", gpu, "--tp", "1", "--engine", "vllm")
    assert old["budget"]["utilization"] == 0.9
    assert new["budget"]["utilization"] == 0.92 == newest["budget"]["utilization"]
    assert new["kv_pool_bytes_per_gpu"] - old["kv_pool_bytes_per_gpu"] == 693_637_219
    assert newest["kv_pool_bytes_per_gpu"] == new["kv_pool_bytes_per_gpu"]


def test_neutral_keeps_the_09_fraction(run_cli, tmp_path):
    # kvplan's neutral count is not an engine release: it keeps vLLM's 0.9 (v0.19.0 and earlier).
    d = concurrency(run_cli, "-m", "llama-3.1-8b", "-g", write_hardware(tmp_path, 80, "gpu-80"), "--tp", "1")
    assert d["budget"]["utilization"] == 0.9


# --- vLLM MLA block size by release, GPU generation and KV dtype ------------------------------------------------
# <= v0.17 (vllm/platforms/cuda.py @v0.17.0): FlashMLA forced to 64; on Blackwell CUTLASS_MLA 128 (v0.10.1-v0.14),
# FlashInfer MLA 64 when qk_nope_head_dim == 128 (v0.15-v0.17). >= v0.18 (platforms/interface.py @v0.18.0): the
# backend's preferred block; Hopper bf16 FLASH_ATTN_MLA 16, Hopper fp8 FLASHMLA 64, Blackwell FLASHINFER_MLA 32.
# DeepSeek-R1: qk_nope_head_dim 128.
@pytest.mark.parametrize("gpu, engine, dtype, block", [
    ("h200", "vllm==0.17", "bf16", 64),
    ("h200", "vllm==0.18", "bf16", 16),
    ("h200", "vllm", "bf16", 16),
    ("h200", "vllm==0.17", "fp8", 64),
    ("h200", "vllm", "fp8", 64),
    ("h20", "vllm", "bf16", 16),
    ("b200", "vllm==0.10", "bf16", 64),
    ("b200", "vllm==0.10.1", "bf16", 128),
    ("b200", "vllm==0.14", "bf16", 128),
    ("b200", "vllm==0.15", "bf16", 64),
    ("b200", "vllm==0.17", "bf16", 64),
    ("b200", "vllm==0.18", "bf16", 32),
    ("b200", "vllm", "fp8", 32),
])
def test_vllm_mla_block_by_release_gpu_and_dtype(run_cli, gpu, engine, dtype, block):
    d = concurrency(run_cli, "-m", "deepseek-r1", "-g", gpu, "--engine", engine, "--kv-dtype", dtype,
                    "--kv-pool", "20GiB")
    assert d["block_size"] == block
    assert d["vllm_block_size"] == block


def test_the_mla_block_sizes_the_request(run_cli):
    # DeepSeek-R1 bf16, 1,000 + 30,000 = 31,000 tokens, latent (512 + 64) x 2 B = 1,152 B per layer, 61 layers:
    #   16-token blocks: cdiv(31,000, 16) = 1,938 blocks = 31,008 tokens -> 61 x 31,008 x 1,152 = 2,178,994,176 B
    #   64-token blocks: cdiv(31,000, 64) = 485 blocks = 31,040 tokens -> 61 x 31,040 x 1,152 = 2,181,242,880 B
    new = concurrency(run_cli, "-m", "deepseek-r1", "-g", "h200", "--engine", "vllm", "--kv-dtype", "bf16",
                      "--kv-pool", "20GiB")
    old = concurrency(run_cli, "-m", "deepseek-r1", "-g", "h200", "--engine", "vllm==0.17", "--kv-dtype", "bf16",
                      "--kv-pool", "20GiB")
    assert new["kv_bytes_per_request_per_gpu"] == 2_178_994_176
    assert old["kv_bytes_per_request_per_gpu"] == 2_181_242_880


def test_sparse_mla_stays_on_64_token_blocks(run_cli):
    # DeepSeek V3.2 (index_topk): FLASHMLA_SPARSE kernel block [64], in v0.17 (forced) and v0.18+ (backend).
    for engine in ("vllm==0.17", "vllm"):
        d = concurrency(run_cli, "-m", "deepseek-v3.2-exp", "-g", "h200", "--engine", engine, "--kv-dtype", "bf16",
                        "--kv-pool", "20GiB")
        assert d["block_size"] == 64


def test_block_size_keeps_the_old_call_and_takes_hardware_and_dtype():
    model = load_model("deepseek-r1")
    vllm = engines.get("vllm")
    # No GPU given: kvplan cannot place it, so MLA keeps FlashMLA's 64 (the old answer).
    assert vllm.block_size(model).value == 64
    assert vllm.block_size(model, 128).value == 128
    assert vllm.block_size(model, hardware=load_hardware("h200"), kv_dtype=KVDtype.BF16).value == 16
    assert vllm.block_size(model, hardware=load_hardware("h100-sxm"), kv_dtype=KVDtype.BF16).value == 16  # h100-*
    assert vllm.block_size(model, hardware=load_hardware("h200"), kv_dtype=KVDtype.FP8).value == 64
    assert vllm.block_size(model, hardware=load_hardware("b200"), kv_dtype=KVDtype.BF16).value == 32
    # An A100 is neither Hopper nor Blackwell by kvplan's preset-id rule.
    assert vllm.block_size(model, hardware=load_hardware("a100-80gb"), kv_dtype=KVDtype.BF16).value == 64
    # GQA is 16 everywhere (FLASH_ATTN / FLASHINFER take 16).
    assert vllm.block_size(load_model("llama-3.1-8b"), hardware=load_hardware("b200")).value == 16


# --- vLLM start-up fit check (_check_enough_kv_cache_memory, vllm/v1/core/kv_cache_utils.py) --------------------
def gemma3_like() -> ModelSpec:
    # 52 sliding (window 1024) + 10 full layers, layer 0 sliding; 1 KV head x 64: (64 + 64) x 2 = 256 B per token
    # per layer, so a 16-token page is 4,096 B. Group size: 52 < 1.5 x 10 is false -> 10; sliding cdiv(52, 10) =
    # 6 groups + 1 full group = 7 groups of 10, 70 - 62 = 8 padding layers.
    full_idx = tuple(range(5, 62, 6))[:10]
    slide_idx = tuple(i for i in range(62) if i not in full_idx)
    attn = {"kv_heads": 1, "head_dim_k": 64, "head_dim_v": 64}
    return ModelSpec(id="g3-like", name="g3-like", sources=("test",), num_layers=62, groups=(
        LayerGroup(name="local", layers=slide_idx, kind={"kind": "sliding_window", "window": 1024, **attn}),
        LayerGroup(name="global", layers=full_idx, kind={"kind": "full_attention", **attn})))


# max_model_len 4,096, max_num_batched_tokens 2,048, block 16:
#   full layer: cdiv(4,096, 16) = 256 blocks; sliding layer: cdiv(min(1,023 + 2,048, 4,096), 16) + 1 = 192 + 1 = 193.
#   <= v0.13: real layers: 4,096 x (52 x 193 + 10 x 256) = 4,096 x 12,596           = 51,593,216 B
#   v0.14-v0.18: first group only (sliding): 10 x 4,096 x 193                        =  7,905,280 B
#   v0.19+: every group, padding counted: 10 x 4,096 x (6 x 193 + 1 x 256) = 40,960 x 1,414 = 57,917,440 B
NEEDED = {"vllm==0.13": 51_593_216, "vllm==0.14": 7_905_280, "vllm==0.18": 7_905_280, "vllm==0.19": 57_917_440,
          "vllm==0.28": 57_917_440, "vllm": 57_917_440}


@pytest.mark.parametrize("engine", list(NEEDED))
def test_vllm_fit_check_needed_bytes_by_release(engine):
    cfg = engines.vllm_config(gemma3_like(), KVDtype.BF16, Parallelism(), 100 * 2**20, 4096, 2048,
                              engine=engines.get(engine))
    assert (cfg.num_groups, cfg.group_size, cfg.padding_layers) == (7, 10, 8)
    assert cfg.needed_for_one_request_bytes == NEEDED[engine]


def gemma_report(engine: str, pool: int) -> dict:
    import json

    from kvplan.calc.concurrency import ConcurrencyOptions, plan_concurrency
    from kvplan.present.concurrency import present
    from kvplan.render.output import to_json
    from kvplan.scenario import Scenario
    s = Scenario(model=gemma3_like(), hardware=load_hardware("h100-sxm"), tp=1, engine=engine, kv_pool_bytes=pool,
                 max_model_len=4096, max_num_batched_tokens=2048, prompt_tokens=100, decode_tokens=100)
    return json.loads(to_json(present(plan_concurrency(s, ConcurrencyOptions()))))


def test_vllm_019_counts_padding_layers_in_the_start_up_check():
    # A pool of 55,000,000 B lies between the v0.13/v0.18 figures and v0.19's 57,917,440 B: v0.18 starts,
    # v0.19 refuses.
    assert gemma_report("vllm==0.18", 55_000_000)["vllm_fits_one_max_len_request"] is True
    assert gemma_report("vllm==0.13", 55_000_000)["vllm_fits_one_max_len_request"] is True
    d = gemma_report("vllm==0.19", 55_000_000)
    assert d["vllm_fits_one_max_len_request"] is False
    assert d["vllm_needed_for_one_max_len_request_bytes"] == 57_917_440


def test_vllm_029_holds_back_the_null_block():
    # v0.29+: the check compares with the pool less one block, 10 layers x 4,096 B = 40,960 B. A pool of exactly
    # 57,917,440 B passes in v0.28 (needed <= pool) and fails in v0.29 (57,876,480 available).
    old = gemma_report("vllm==0.28", 57_917_440)
    new = gemma_report("vllm==0.29", 57_917_440)
    assert old["vllm_fits_one_max_len_request"] is True
    assert old["vllm_fit_check_available_bytes"] == 57_917_440
    assert new["vllm_fits_one_max_len_request"] is False
    assert new["vllm_fit_check_available_bytes"] == 57_876_480


# --- vLLM hybrid attention + state block alignment (models/config.py @v0.19.0; platforms/interface.py @v0.33.0) --
def qwen3_next_like() -> ModelSpec:
    # The document's worked example (section 4): 12 full layers (2 KV heads x 256) + 36 GDN layers (16 k-heads,
    # 32 v-heads, dims 128, conv kernel 4), bf16, TP 1.
    # State page = (3 x (2 x 16 x 128 + 32 x 128) + 32 x 128 x 128) x 2 = (24,576 + 524,288) x 2 = 1,097,728 B;
    # attention = 2 x (256 + 256) x 2 = 2,048 B per token.
    gdn = {"kind": "gated_delta_net", "num_k_heads": 16, "num_v_heads": 32, "head_k_dim": 128, "head_v_dim": 128}
    full = {"kind": "full_attention", "kv_heads": 2, "head_dim_k": 256, "head_dim_v": 256, "q_heads": 16}
    return ModelSpec(id="q3n-like", name="q3n-like", sources=("test",), num_layers=48, groups=(
        LayerGroup(name="linear", kind=gdn, layers=tuple(i for i in range(48) if i % 4 != 3)),
        LayerGroup(name="full", kind=full, layers=tuple(range(3, 48, 4)))))


# align 16: 16 x cdiv(1,097,728, 16 x 2,048 = 32,768) = 16 x 34 = 544 (33.5 rounded up);
# v0.20+ with --block-size 64 as the alignment: 64 x cdiv(1,097,728, 131,072) = 64 x 9 = 576;
# --block-size 1024: 1024 x cdiv(1,097,728, 2,097,152) = 1024 (not smaller than the target, kept).
@pytest.mark.parametrize("engine, given, block", [
    ("vllm==0.19", None, 544), ("vllm", None, 544),
    ("vllm==0.19", 16, 544), ("vllm", 16, 544),       # a smaller --block-size is raised in every release
    ("vllm==0.19", 64, 544), ("vllm==0.20", 64, 576), ("vllm", 64, 576),
    ("vllm==0.19", 1024, 1024), ("vllm", 1024, 1024),
])
def test_vllm_hybrid_alignment_applies_to_a_given_block(engine, given, block):
    cfg = engines.vllm_config(qwen3_next_like(), KVDtype.BF16, Parallelism(), 10 * GIB, 262_144, 8192, given,
                              engine=engines.get(engine))
    assert cfg.block_size == block
    assert cfg.page_bytes_per_layer == block * 2048


# --- vLLM "GPU KV cache size: N tokens" (kv_cache_utils.py @v0.20.0 and @v0.21.0) -------------------------------
def test_vllm_log_line_formula_changes_in_v021(run_cli):
    # llama-3.1-8b bf16 TP 1: 32 x 8 x 256 x 2 = 131,072 B per token, 16-token page 2,097,152 B. A pool of
    # 1,000 pages + 5 B -> num_blocks 1,000. max_model_len 1,000 -> cdiv(1,000, 16) = 63 blocks per request,
    # max concurrency 1,000 / 63 = 15.873...
    #   v0.9-v0.20: num_blocks // 1 group x 16 = 16,000 tokens;  v0.21+: int(15.873... x 1,000) = 15,873.
    args = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-pool", f"{1000 * 2_097_152 + 5}B",
            "--max-model-len", "1000", "--prompt", "100", "--decode", "100")
    old = concurrency(run_cli, *args, "--engine", "vllm==0.20")
    new = concurrency(run_cli, *args, "--engine", "vllm==0.21")
    assert old["num_blocks"] == new["num_blocks"] == 1000
    assert old["vllm_kv_cache_tokens"] == 16_000
    assert new["vllm_kv_cache_tokens"] == 15_873
    for d in (old, new):   # both formulas stay in the JSON
        assert d["vllm_kv_cache_tokens_v0_9_to_v0_20"] == 16_000
        assert d["vllm_kv_cache_tokens_late_versions"] == 15_873


def test_vllm_log_line_before_v09_ignores_groups():
    # The gemma-like model: pool 7,000 pages of 10 layers -> num_blocks = 28,672,000 // 4,096 // 10 = 700.
    # v0.8: num_blocks x block = 700 x 16 = 11,200; v0.9: 700 // 7 groups x 16 = 1,600.
    pool = 700 * 10 * 4096
    old = engines.vllm_config(gemma3_like(), KVDtype.BF16, Parallelism(), pool, 4096, 2048,
                              engine=engines.get("vllm==0.8.5"))
    new = engines.vllm_config(gemma3_like(), KVDtype.BF16, Parallelism(), pool, 4096, 2048,
                              engine=engines.get("vllm==0.9"))
    assert old.num_blocks == new.num_blocks == 700
    assert old.kv_cache_tokens_logged == 11_200
    assert new.kv_cache_tokens_logged == 1_600


# --- SGLang page size by attention backend (server_args.py @v0.5.4, @v0.5.7; arg_groups/overrides.py @v0.5.23) -
# DeepSeek-R1 bf16: 61 x (512 + 64) x 2 = 70,272 B per token. 1 GiB // 70,272 = 15,279 tokens; in 64-token pages
# 238 x 64 = 15,232.
@pytest.mark.parametrize("gpu, engine, page, tokens", [
    ("h200", "sglang", 1, 15_279),          # Hopper: fa3, page 1, in every release
    ("h200", "sglang==0.5.3", 1, 15_279),
    ("b200", "sglang==0.5.3", 1, 15_279),   # Blackwell before v0.5.4: flashinfer, page 1
    ("b200", "sglang==0.5.4", 64, 15_232),  # v0.5.4+: trtllm_mla, page 64
    ("b200", "sglang", 64, 15_232),
])
def test_sglang_mla_page_by_gpu_and_release(run_cli, gpu, engine, page, tokens):
    d = concurrency(run_cli, "-m", "deepseek-r1", "-g", gpu, "--tp", "1", "--kv-dtype", "bf16", "--engine", engine,
                    "--kv-pool", "1GiB")
    assert d["sglang_page_size"] == page
    assert d["block_size"] == page
    assert d["sglang_cell_size_bytes"] == 70_272
    assert d["sglang_max_total_num_tokens"] == tokens


def test_sglang_trtllm_mla_replaces_a_page_it_does_not_take(run_cli):
    # trtllm_mla forces 64 unless the page is 32 or 64 (v0.5.4+ on Blackwell); fa3 on Hopper keeps 16.
    def page(gpu, engine, given):
        return concurrency(run_cli, "-m", "deepseek-r1", "-g", gpu, "--tp", "1", "--kv-dtype", "bf16",
                           "--engine", engine, "--kv-pool", "1GiB", "--block-size", given)["sglang_page_size"]

    assert page("b200", "sglang", "16") == 64
    assert page("b200", "sglang", "32") == 32
    assert page("b200", "sglang==0.5.3", "16") == 16
    assert page("h200", "sglang", "16") == 16


@pytest.mark.parametrize("engine, given, page, tokens", [
    # llama-3.1-8b cell 131,072 B; pool 10 GiB + 5 cells + 7 B -> 81,925 tokens, in 64-token pages 81,920.
    ("sglang==0.5.6", None, 1, 81_925),     # Blackwell GQA before v0.5.7: flashinfer, page 1
    ("sglang==0.5.7", None, 64, 81_920),    # v0.5.7+: trtllm_mha, page 64
    ("sglang==0.5.22", "128", 64, 81_920),  # trtllm_mha keeps only 16 / 32 / 64 before v0.5.23
    ("sglang", "128", 128, 81_920),         # v0.5.23 also keeps 128 (81,925 // 128 = 640 pages = 81,920)
])
def test_sglang_blackwell_gqa_page(run_cli, engine, given, page, tokens):
    pool = 10 * GIB + 5 * 131_072 + 7
    args = ["-m", "llama-3.1-8b", "-g", "b200", "--tp", "1", "--engine", engine, "--kv-pool", f"{pool}B"]
    d = concurrency(run_cli, *args, *(["--block-size", given] if given else []))
    assert d["sglang_page_size"] == page
    assert d["sglang_max_total_num_tokens"] == tokens


def test_sglang_hopper_gqa_stays_on_page_1(run_cli):
    d = concurrency(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--engine", "sglang",
                    "--kv-pool", "1GiB")
    assert d["sglang_page_size"] == 1


# --- SGLang DeepSeek V3.2 cell (model_runner.py @v0.5.3; pool_configurator.py @v0.5.16, @v0.5.17) ---------------
# 61 layers, latent 512 + 64, indexer 128 + 128/128 x 4 = 132 B.
@pytest.mark.parametrize("engine, dtype, cell", [
    ("sglang==0.5.3", "fp8", 61 * 576),           # 35,136: raw fp8 latent, no indexer
    ("sglang==0.5.4", "fp8", 61 * (576 + 132)),   # 43,188
    ("sglang==0.5.16", "fp8", 61 * (576 + 132)),
    ("sglang==0.5.17", "fp8", 61 * (656 + 132)),  # 48,068: 512 + 512/128 x 4 + 64 x 2 = 656, as the pool
    ("sglang", "fp8", 61 * (656 + 132)),
    ("sglang==0.5.3", "bf16", 61 * 1152),         # 70,272
    ("sglang==0.5.4", "bf16", 61 * (1152 + 132)),  # 78,324
])
def test_sglang_v32_cell_by_release(run_cli, engine, dtype, cell):
    d = concurrency(run_cli, "-m", "deepseek-v3.2-exp", "-g", "h200", "--tp", "8", "--kv-dtype", dtype,
                    "--engine", engine, "--kv-pool", "10GiB")
    assert d["sglang_cell_size_bytes"] == cell
    # The pool allocates the stored latent plus the indexer in every release (fp8: 61 x 788 = 48,068 B).
    assert d["sglang_pool_bytes_per_token"] == 61 * ((656 if dtype == "fp8" else 1152) + 132)
    assert d["sglang_page_size"] == 64   # DSA: page 64 x index_kpool


# --- SGLang SSM state dtype (server_args.py @v0.5.8; configs/mamba_utils.py @v0.5.23): fp32 --------------------
def test_sglang_counts_the_ssm_state_in_fp32():
    # 36 GDN layers at TP 1: conv 3 x 8,192 x 2 B (bf16) = 49,152 + SSM 32 x 128 x 128 x 4 B (fp32) = 2,097,152
    # -> 2,146,304 B per layer, x 36 = 77,266,944 B. (The model's bf16 state would be 36 x 1,097,728 = 39,518,208.)
    model = qwen3_next_like()
    assert engines.get("sglang").state_bytes_per_request(model, Parallelism()) == 77_266_944
    assert engines.get("sglang==0.5.2").state_bytes_per_request(model, Parallelism()) == 77_266_944
    # The GDN layers add nothing to the token cell (separate mamba pool): 12 x 2 x 512 x 2 = 24,576 B.
    assert engines.sglang_cell_size(model, KVDtype.BF16, Parallelism()) == 24_576


# --- SGLang default mem_fraction_static (server_args.py @v0.5.2, PR #7054; replaced in v0.5.3, PR #10975) ------
def test_sglang_fraction_buckets_by_release(run_cli):
    # H200 140.40 GiB at TP 8: reserved 12 + 8/2 = 16 GiB; round((140.40 - 16) / 140.40, 3) = round(0.88604, 3)
    # = 0.886 from v0.4.8. v0.4.6-v0.4.7 (server_args.py in those wheels) had no reserve: above 81,920 MiB v0.4.6
    # keeps 13 GiB, (143,770 - 13,312) / 143,770 = 0.907408; v0.4.7 above 96 GiB takes min(0.88 + 49,152 x 0.12 /
    # 143,770, (143,770 - 18,432) / 143,770) = min(0.92103, 0.871795) = 0.871795.
    args = ("-m", "llama-3.1-8b", "-g", "h200", "--tp", "8")
    assert concurrency(run_cli, *args, "--engine", "sglang==0.4.8")["mem_fraction_static"] == 0.886
    assert concurrency(run_cli, *args, "--engine", "sglang==0.4.7")["mem_fraction_static"] == pytest.approx(
        0.871795, abs=5e-6)
    assert concurrency(run_cli, *args, "--engine", "sglang==0.4.6")["mem_fraction_static"] == pytest.approx(
        0.907408, abs=5e-6)
    assert concurrency(run_cli, *args, "--engine", "sglang==0.4.7", "--mem-fraction-static", "0.8")[
        "mem_fraction_static"] == 0.8
    # From v0.5.3 the reserve is built in MB (server_args.py @v0.5.3): 512 + 8,192 x 1.5 + 8 / 8 x 1,024 + 512 x 2
    # = 14,848 MB; round((143,770 - 14,848) / 143,770, 3) = 0.897. v0.5.23 (arg_groups/memory_hook.py) adds the
    # prefill CUDA graphs it captures by default on CUDA: 58 sizes up to the 8,192-token chunk x 8 MB = 464 MB,
    # round((143,769.6 - 15,312) / 143,769.6, 3) = round(0.89350, 3) = 0.893. The output says what it omits.
    old = concurrency(run_cli, *args, "--engine", "sglang==0.5.2")
    assert concurrency(run_cli, *args, "--engine", "sglang==0.5.3")["mem_fraction_static"] == 0.897
    new = concurrency(run_cli, *args, "--engine", "sglang")
    assert old["mem_fraction_static"] == 0.886 and new["mem_fraction_static"] == 0.893
    assert not any("v0.5.23's reserve" in n for n in old["notes"])
    assert any("v0.5.23's reserve" in n for n in new["notes"])


def test_sglang_v0_4_6_and_v0_4_7_fixed_fractions():
    # server_args.py @v0.4.6 / @v0.4.7: up to 81,920 MiB the fraction is fixed by parallel size, 0.88 / 0.87 / 0.85 /
    # 0.81 at 1 / 2 / 4 / 8; v0.4.7 counts TP x PP. H100 (81,559 MiB) is below the line.
    from kvplan.scenario import Scenario

    def frac(engine, **kw):
        s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), engine=engine, **kw)
        return s.engine_adapter.memory_fraction(s, s.parallelism).value

    assert [frac("sglang==0.4.6", tp=t) for t in (1, 2, 4, 8)] == [0.88, 0.87, 0.85, 0.81]
    assert frac("sglang==0.4.7", tp=2, pp=2) == 0.85   # TP x PP 4 (v0.4.6 has no PP)
    # v0.4.7 with speculative decoding on a GPU up to 96 GiB: x 0.95 (0.88 x 0.95 = 0.836)
    assert frac("sglang==0.4.7", tp=1, spec_tokens=3) == pytest.approx(0.836)
    assert frac("sglang==0.4.6", tp=1, spec_tokens=3) == 0.88
    # v0.4.7 on a CUDA GPU above 180,000 MiB (B200, 183,357 MiB): 0.79; on MI300X (AMD, 191.98 GiB = 196,587.52 MiB)
    # the 96 GiB rule: min(0.88 + 49,152 x 0.12 / 196,587.52, (196,587.52 - 18,432) / 196,587.52)
    # = min(0.91000, 0.906240) = 0.906240
    s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("b200"), engine="sglang==0.4.7", tp=1)
    assert s.engine_adapter.memory_fraction(s, s.parallelism).value == 0.79
    s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("mi300x"), engine="sglang==0.4.7", tp=1)
    assert s.engine_adapter.memory_fraction(s, s.parallelism).value == pytest.approx(0.906240, abs=5e-7)


def test_sglang_v0_4_8_reserve_extras_for_speculative_and_dp_attention():
    # server_args.py @v0.4.8-v0.5.2: reserved += 2 GiB with a speculative algorithm, += 4 GiB with DP attention.
    # H100 79.65 GiB TP1: reserved 9.5 + 0.5 = 10 GiB -> round(69.65 / 79.65, 3) = 0.874; with speculative decoding
    # 12 GiB -> round(67.65 / 79.65, 3) = 0.849. From v0.5.3 (H100 81,559 MB, TP1: 13,440 MB before any prefill
    # graph) speculative decoding adds, after the 10 GB floor, 2,048 MB in v0.5.3-v0.5.9: round((81,559 - 15,488) /
    # 81,559, 3) = 0.810; 4,096 MB in v0.5.10-v0.5.13, which also hold 58 prefill graphs x 8 = 464 MB: 18,000 ->
    # 0.779; nothing from v0.5.14: 13,904 -> 0.830 either way (0.835 without the graphs, v0.5.9).
    from kvplan.scenario import Scenario

    def frac(engine, **kw):
        s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), engine=engine, tp=1, **kw)
        return s.engine_adapter.memory_fraction(s, s.parallelism).value

    assert frac("sglang==0.5.2") == 0.874 and frac("sglang==0.5.2", spec_tokens=3) == 0.849
    # the bucket's parallel size is TP x PP: TP 2 x PP 2 reserves 9.5 + 4/2 = 11.5 GiB -> round(68.15 / 79.65, 3)
    # = 0.856 (TP alone would give 10.5 GiB, 0.868)
    s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), engine="sglang==0.5.2", tp=2,
                 pp=2)
    assert s.engine_adapter.memory_fraction(s, s.parallelism).value == 0.856
    assert frac("sglang==0.5.9") == 0.835 and frac("sglang==0.5.9", spec_tokens=3) == 0.810
    assert frac("sglang==0.5.13") == 0.830 and frac("sglang==0.5.13", spec_tokens=3) == 0.779
    assert frac("sglang==0.5.14", mtp_layers=1) == frac("sglang") == frac("sglang", spec_tokens=3) == 0.830
    # DP attention (SGLang --tp 8 --dp 8 --enable-dp-attention; kvplan's TP 1 x DP 8, EP 8) on H200: kvplan's v0.4.8
    # bucket takes its TP x PP, 1: reserved = 12 + 1/2 + 4 = 16.5 GiB -> round((140.40 - 16.5) / 140.40, 3) = 0.882
    s = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"), engine="sglang==0.5.2", tp=1, dp=8,
                 ep=8, weight_dtype="fp8")
    assert s.engine_adapter.memory_fraction(s, s.parallelism).value == 0.882


def test_a_pinned_release_refuses_a_kv_dtype_it_predates(monkeypatch):
    # The rule (engines.base.Engine.kv_dtype_since), with a table of this test's own: a dtype first in 0.12.0 is
    # refused by 0.11.0 and accepted by 0.12.0 and by the unpinned (newest) adapter.
    from kvplan.scenario import Scenario

    vllm_cls = type(engines.get("vllm"))
    monkeypatch.setattr(vllm_cls, "kv_dtype_since", {KVDtype.FP8: ((0, 12, 0), "the test's table")})
    model, hw = load_model("qwen3-32b"), load_hardware("h100-sxm")
    with pytest.raises(KvplanError) as err:
        Scenario(model=model, hardware=hw, engine="vllm==0.11.0", kv_dtype_request="fp8")
    line = err.value.one_line()
    assert "vllm==0.11 has no fp8 KV cache (first in 0.12: the test's table)" in line   # as --engine names it
    assert "(fix: pin vllm==0.12 or newer" in line
    for engine in ("vllm==0.12.0", "vllm"):
        assert Scenario(model=model, hardware=hw, engine=engine, kv_dtype_request="fp8").kv_dtype is KVDtype.FP8
    assert Scenario(model=model, hardware=hw, engine="vllm==0.11.0").kv_dtype is KVDtype.BF16   # not in the table


# --- SGLang release facts: KV dtypes, DP-attention batch, first release of a launch flag ----------------------------
def sglang_launch(engine: str, **kw):
    from kvplan.calc.recommend import plan_recommend
    from kvplan.scenario import Scenario

    base = dict(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), gpus=1, tp=1,
                kv_pool_bytes=64 * GIB, prompt_tokens=1000, decode_tokens=30_000, engine=engine,
                mem_fraction_static=0.85)   # a fraction given, as the old tests did
    base.update(kw)
    s = Scenario(**base)
    plan = plan_recommend(s)
    lc = s.engine_adapter.launch_command(plan)
    return plan, lc, {f.flag: f.value for f in lc.flags}


@pytest.mark.parametrize("engine, accepted", [
    # --kv-cache-dtype choices (python/sglang/srt/server_args.py): v0.5.4 auto, fp8_e5m2, fp8_e4m3, bf16, bfloat16;
    # v0.5.5 adds fp4_e2m1 (PR #10078, 4-bit values + one 1-byte scale per 16).
    ("sglang==0.4.6", False), ("sglang==0.5.4", False), ("sglang==0.5.5", True), ("sglang", True)])
def test_sglang_fp4_kv_cache_first_in_055(engine, accepted):
    # The MLA pool's FP4 cache (DeepSeek-R1): v0.5.5's mem_cache/memory_pool.py MLATokenToKVPoolFP4
    from kvplan.scenario import Scenario

    model, hw = load_model("deepseek-r1"), load_hardware("b200")   # kvplan asks FP4 tensor cores for nvfp4
    if accepted:
        assert Scenario(model=model, hardware=hw, engine=engine, kv_dtype_request="nvfp4").kv_dtype is KVDtype.NVFP4
        return
    with pytest.raises(KvplanError) as err:
        Scenario(model=model, hardware=hw, engine=engine, kv_dtype_request="nvfp4")
    line = err.value.one_line()
    assert "has no nvfp4 KV cache (first in 0.5.5" in line and "v0.5.5" in line and "server_args.py" in line
    assert "(fix: pin sglang==0.5.5 or newer" in line


@pytest.mark.parametrize("engine, accepted", [("sglang==0.5.5", False), ("sglang==0.5.6", True), ("sglang", True)])
def test_sglang_fp4_for_a_gqa_cache_first_in_056(engine, accepted):
    # v0.5.5's FP4 cache is MLA's only: its model_runner.py profile_max_num_token sizes an MHA cell at
    # element_size(float4_e2m1fn_x2), a byte per value, and MHATokenToKVPool stores without quantizing;
    # MHATokenToKVPoolFP4 arrives in v0.5.6 (mem_cache/memory_pool.py). Read in the v0.5.5 and v0.5.6 wheels.
    from kvplan.scenario import Scenario

    model, hw = load_model("llama-3.1-8b"), load_hardware("b200")
    if accepted:
        assert Scenario(model=model, hardware=hw, engine=engine, kv_dtype_request="nvfp4").kv_dtype is KVDtype.NVFP4
        return
    with pytest.raises(KvplanError, match=r"FP4 KV only in its MLA pool.*first in 0\.5\.6"):
        Scenario(model=model, hardware=hw, engine=engine, kv_dtype_request="nvfp4")


@pytest.mark.parametrize("engine", ["sglang==0.4.6", "sglang"])
def test_sglang_fp8_kv_cache_is_in_every_release(engine):
    # v0.4.6 server_args.py: --kv-cache-dtype choices ["auto", "fp8_e5m2", "fp8_e4m3"]; fp8 and fp8_ds_mla are
    # both SGLang's fp8_e4m3, so neither has a first release within v0.4.6 .. v0.5.23.
    from kvplan.scenario import Scenario

    assert type(engines.get("sglang")).kv_dtype_since.keys() == {KVDtype.NVFP4}
    s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), engine=engine,
                 kv_dtype_request="fp8")
    assert s.kv_dtype is KVDtype.FP8


@pytest.mark.parametrize("engine, value", [
    # v0.5.5-v0.5.15 server_args.py: the FP4 choice is fp4_e2m1. v0.5.16 server_args.py adds nvfp4 (and
    # fp4_mx_block16), and mem_cache/kv_cache_dtype.py raises on fp4_e2m1 ("deprecated"); v0.5.21+ (arg_groups/
    # fields/model.py in v0.5.23) no longer lists fp4_e2m1 at all.
    ("sglang==0.5.6", "fp4_e2m1"), ("sglang==0.5.15", "fp4_e2m1"), ("sglang==0.5.16", "nvfp4"),
    ("sglang==0.5.21", "nvfp4"), ("sglang", "nvfp4")])
def test_sglang_fp4_launch_flag_by_release(engine, value):
    _, _, flags = sglang_launch(engine, hardware=load_hardware("b200"), kv_dtype_request="nvfp4")
    assert flags["--kv-cache-dtype"] == value


@pytest.mark.parametrize("engine", ["sglang==0.4.6", "sglang==0.5.3", "sglang"])
def test_sglang_max_running_requests_under_dp_attention_is_the_whole_servers(engine):
    # Every release divides the flag over the attention-DP ranks: v0.4.6 managers/tp_worker.py
    # (server_args.max_running_requests // (dp_size if enable_dp_attention else 1)); v0.5.23
    # mem_cache/kv_cache_configurator.py resolve_max_num_reqs (max_running_requests // attn_dp_size, attn_dp_size =
    # dp_size by arg_groups/parallel_hook.py handle_deprecated_dp_attention). So a rank holding B requests needs
    # B x 8 on the command line, and 8 x B // 8 = B.
    plan, lc, flags = sglang_launch(engine, model=load_model("deepseek-r1"), hardware=load_hardware("h200"), gpus=8,
                                    dp=8, ep=8, kv_pool_bytes=20 * GIB)
    assert "--enable-dp-attention" in flags and flags["--dp-size"] == "8"
    assert int(flags["--max-running-requests"]) == 8 * plan.batch.value
    assert int(flags["--max-running-requests"]) // 8 == plan.batch.value
    assert any("whole server's under DP attention" in n for n in lc.notes)


def test_sglang_plain_dp_replicas_keep_the_per_replica_batch():
    # Without --enable-dp-attention the divisor is 1 (same files): each --dp-size replica takes the whole value.
    plan, _, flags = sglang_launch("sglang", gpus=2, dp=2, kv_pool_bytes=16 * GIB)
    assert "--enable-dp-attention" not in flags
    assert flags["--max-running-requests"] == str(plan.batch.value)


def test_sglang_enable_dp_attention_deprecated_from_0522():
    # v0.5.22 server_args.py registers --enable-dp-attention as DeprecatedStoreTrueAction (new_flag
    # "--attn-dp-size <dp-size>"); v0.5.21 has no --attn-dp-size. The old spelling still works, so it is kept.
    kw = dict(model=load_model("deepseek-r1"), hardware=load_hardware("h200"), gpus=8, dp=8, ep=8,
              kv_pool_bytes=20 * GIB)
    for engine, noted in (("sglang==0.5.21", False), ("sglang==0.5.22", True), ("sglang", True)):
        _, lc, flags = sglang_launch(engine, **kw)
        assert "--enable-dp-attention" in flags
        assert any("--attn-dp-size 8" in n for n in lc.notes) is noted


@pytest.mark.parametrize("engine, kept", [("sglang==0.4.6", False), ("sglang==0.4.7", True), ("sglang", True)])
def test_sglang_pp_size_first_in_047(engine, kept):
    # v0.4.7 server_args.py adds "--pipeline-parallel-size", "--pp-size"; v0.4.6 has neither, so a PP layout cannot be
    # launched there at all: the scenario is refused (dropping the flag would launch another layout)
    args = dict(model=load_model("qwen3-32b"), hardware=load_hardware("h100-sxm"), gpus=4, tp=2, pp=2)
    if not kept:
        with pytest.raises(KvplanError) as err:
            sglang_launch(engine, **args)
        line = err.value.one_line()
        assert "has no pipeline parallelism (--pp-size first in 0.4.7" in line and "v0.4.7" in line
        assert "(fix: pin sglang==0.4.7 or newer, or plan --pp 1)" in line
        return
    _, lc, flags = sglang_launch(engine, **args)
    assert flags["--pp-size"] == "2" and not [f for f, _ in lc.omitted if f.startswith("--pp-size")]


def test_sglang_other_launch_flags_are_in_every_release():
    # v0.4.6 server_args.py already has --model-path, --tp-size, --dp-size, --ep-size (alias of
    # --expert-parallel-size), --enable-dp-attention, --kv-cache-dtype, --max-running-requests,
    # --mem-fraction-static, --context-length, --page-size, --enable-hierarchical-cache and --hicache-ratio (and
    # v0.5.23 still does: arg_groups/fields/*.py, --enable-dp-attention in server_args.py): nothing is dropped.
    kw = dict(model=load_model("deepseek-r1"), hardware=load_hardware("h200"), gpus=8, dp=8, ep=8,
              kv_pool_bytes=20 * GIB, block_size=64, kv_dtype_request="fp8")
    _, lc, flags = sglang_launch("sglang==0.4.6", **kw)
    assert lc.omitted == ()
    for flag in ("--model-path", "--tp-size", "--dp-size", "--enable-dp-attention", "--ep-size", "--kv-cache-dtype",
                 "--max-running-requests", "--mem-fraction-static", "--context-length", "--page-size"):
        assert flag in flags


# --- vLLM --kv-cache-dtype values by release (docs/engine-rules-by-release.md §11) --------------------------------
# Each pair is (the last release without it, the first with it), read from the wheels: vllm/config/cache.py's
# CacheDType literal (v0.11.0 has auto bfloat16 fp8 fp8_e4m3 fp8_e5m2 fp8_inc; v0.11.1 adds fp8_ds_mla; v0.19.1
# has no per-token-head values, v0.20.0 adds int8_per_token_head, fp8_per_token_head and nvfp4), and for nvfp4
# vllm/v1/attention/backends/flashinfer.py: v0.20.0-v0.20.2 raise "nvfp4 KV cache is not yet supported", v0.21.0
# lists nvfp4 in supported_kv_cache_dtypes. fp8 is in v0.7.3's arg_utils.py choices, so every release has it.
@pytest.mark.parametrize("dtype, model, hardware, before, first", [
    ("fp8_ds_mla", "deepseek-v3.2-exp", "h200", "0.11.0", "0.11.1"),
    ("fp8_per_token_head", "qwen3-32b", "h100-sxm", "0.19.1", "0.20.0"),
    ("int8_per_token_head", "qwen3-32b", "h100-sxm", "0.19.1", "0.20.0"),
    ("nvfp4", "qwen3-32b", "b200", "0.20.2", "0.21.0"),
])
def test_vllm_kv_dtypes_arrive_in_their_first_release(dtype, model, hardware, before, first):
    from kvplan.scenario import Scenario

    m, hw = load_model(model), load_hardware(hardware)
    with pytest.raises(KvplanError) as err:
        Scenario(model=m, hardware=hw, engine=f"vllm=={before}", kv_dtype_request=dtype)
    line = err.value.one_line()
    assert f"no {dtype} KV cache" in line and f"pin vllm=={first.removesuffix('.0')} or newer" in line
    assert f"github.com/vllm-project/vllm/blob/v{first}/" in line
    for engine in (f"vllm=={first}", "vllm"):
        assert Scenario(model=m, hardware=hw, engine=engine, kv_dtype_request=dtype).kv_dtype.value == dtype


def test_vllm_fp8_is_in_every_release():
    from kvplan.scenario import Scenario

    # v0.7.3 vllm/engine/arg_utils.py: --kv-cache-dtype choices ['auto', 'fp8', 'fp8_e5m2', 'fp8_e4m3']
    s = Scenario(model=load_model("qwen3-32b"), hardware=load_hardware("h100-sxm"), engine="vllm==0.7.3",
                 kv_dtype_request="fp8")
    assert s.kv_dtype is KVDtype.FP8


def test_vllm_fp8_kv_for_mla_arrives_in_v0_10_2(run_cli):
    from kvplan.scenario import Scenario

    # v0.10.1 (and v0.10.1.1): every MLA backend raises NotImplementedError for an fp8 cache, e.g.
    # vllm/v1/attention/backends/mla/flashmla.py FlashMLAImpl.__init__ "FlashMLA V1 with FP8 KV cache not yet
    # supported", mla/cutlass_mla.py likewise, and v0.7.3's only one, attention/backends/triton_mla.py, at decode.
    # v0.10.2's FlashMLA passes descale_q/descale_k and CUTLASS MLA takes fp8 (unless FORCE_OLD_CUTLASS_MLA).
    r1, h200 = load_model("deepseek-r1"), load_hardware("h200")
    for old in ("vllm==0.7.3", "vllm==0.10.1"):
        with pytest.raises(KvplanError) as err:
            Scenario(model=r1, hardware=h200, tp=8, engine=old, kv_dtype_request="fp8")
        assert "no fp8 KV cache for MLA models" in err.value.one_line()
        assert "pin vllm==0.10.2 or newer" in err.value.one_line()
        assert Scenario(model=r1, hardware=h200, tp=8, engine=old).kv_dtype is KVDtype.BF16   # bf16 is fine
    for new in ("vllm==0.10.2", "vllm"):
        assert Scenario(model=r1, hardware=h200, tp=8, engine=new, kv_dtype_request="fp8").kv_dtype is KVDtype.FP8
    # the rule is MLA's: a GQA model takes fp8 in v0.7.3
    assert Scenario(model=load_model("llama-3.1-8b"), hardware=h200, engine="vllm==0.7.3",
                    kv_dtype_request="fp8").kv_dtype is KVDtype.FP8
    # recommend's automatic dtype does not pick fp8 for v0.10.1 (it would not start), and does for v0.10.2
    args = ("-m", "deepseek-r1", "-g", "h200", "--tp", "8", "--emit", "vllm", "-f", "json")
    old = run_cli("recommend", *args, "--engine", "vllm==0.10.1")
    assert old.code == 0, old.err
    assert old.json()["kv_dtype_recommended"] == "bf16"
    assert "--kv-cache-dtype" not in old.json()["launch"]["command"]
    new = run_cli("recommend", *args, "--engine", "vllm==0.10.2")
    assert new.code == 0, new.err
    assert new.json()["kv_dtype_recommended"] == "fp8" and "--kv-cache-dtype fp8" in new.json()["launch"]["command"]


# --- vLLM --kv-offloading-size / --kv-offloading-backend (docs/engine-rules-by-release.md §11) ---------------------
def test_vllm_offloading_flags_are_printed_from_v0_14(run_cli):
    # v0.11.0 vllm/config/cache.py has neither field; v0.11.1-v0.13.0 have both, but vllm/config/vllm.py
    # _post_init_kv_transfer_config gives the native backend num_cpu_blocks 0 and vllm/v1/kv_offload/cpu.py
    # CPUOffloadingSpec raises "num_cpu_blocks must be specified": the pair cannot start there. v0.14.0 passes
    # cpu_bytes_to_use = size x 2^30 (GiB for the instance) and defaults the backend to "native".
    args = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "1", "--kv-pool", "64GiB", "--tpot-slo", "1s",
            "--dram", "2TB", "--emit", "vllm", "-f", "json")
    for release, present in (("0.11.0", False), ("0.13.0", False), ("0.14.0", True), ("0.33.0", True)):
        r = run_cli("recommend", *args, "--engine", f"vllm=={release}")
        assert r.code == 0, r.err
        command = r.json()["launch"]["command"]
        assert ("--kv-offloading-size" in command) is present, release
        assert ("--kv-offloading-backend native" in command) is present, release
    # v0.13.0 is not planned an offload at all: its offload row says why and names v0.14 (issue 21)
    rows = run_cli("recommend", *args, "--engine", "vllm==0.13.0").json()["recommendations"]
    offload = next(r for r in rows if r["key"] == "kv_offload")
    assert "0.14" in offload["reason"] and "num_cpu_blocks" in offload["reason"]


def test_vllm_refuses_the_mla_caches_no_mla_backend_runs():
    # vllm/v1/attention/backends/mla/*.py supported_kv_cache_dtypes, read in the v0.21.0 and v0.33.0 wheels: no MLA
    # backend lists nvfp4, and only the sparse (DSA) ones, flashmla_sparse and flashinfer_mla_sparse, list
    # fp8_ds_mla. SGLang's MLA pool has an FP4 cache (v0.5.5+), and the neutral engine plans either layout.
    from kvplan.scenario import Scenario

    r1, v32, b200 = load_model("deepseek-r1"), load_model("deepseek-v3.2-exp"), load_hardware("b200")
    with pytest.raises(KvplanError, match="vLLM has no nvfp4 KV cache for MLA models"):
        Scenario(model=r1, hardware=b200, engine="vllm", kv_dtype_request="nvfp4")
    with pytest.raises(KvplanError, match="fp8_ds_mla only in its sparse"):
        Scenario(model=r1, hardware=b200, engine="vllm", kv_dtype_request="fp8_ds_mla")
    assert Scenario(model=v32, hardware=b200, engine="vllm", kv_dtype_request="fp8_ds_mla").kv_dtype \
        is KVDtype.FP8_DS_MLA
    for engine in ("sglang", "neutral"):
        assert Scenario(model=r1, hardware=b200, engine=engine, kv_dtype_request="nvfp4").kv_dtype is KVDtype.NVFP4
    # a GQA model keeps vLLM's nvfp4 (FlashInfer lists it from v0.21.0)
    assert Scenario(model=load_model("qwen3-32b"), hardware=b200, engine="vllm",
                    kv_dtype_request="nvfp4").kv_dtype is KVDtype.NVFP4


def test_vllm_v32_fp8_needs_the_sparse_backend_of_0110():
    # DeepSeek V3.2 stores fp8 as fp8_ds_mla, which runs in the sparse (DSA) MLA backend: v0.10.2's wheel has no
    # vllm/v1/attention/backends/mla/flashmla_sparse.py and its model registry no DeepseekV32ForCausalLM; v0.11.0
    # brings both. Before v0.10.2 no MLA backend takes fp8 at all.
    from kvplan.scenario import Scenario

    v32, h200 = load_model("deepseek-v3.2-exp"), load_hardware("h200")
    with pytest.raises(KvplanError) as err:
        Scenario(model=v32, hardware=h200, engine="vllm==0.10.2", kv_dtype_request="fp8")
    assert "no sparse (DSA) MLA backend" in err.value.one_line() and "pin vllm==0.11 or newer" in err.value.one_line()
    with pytest.raises(KvplanError) as err:
        Scenario(model=v32, hardware=h200, engine="vllm==0.10.1", kv_dtype_request="fp8")
    assert "no fp8 KV cache for MLA models" in err.value.one_line() and "pin vllm==0.11 or newer" in \
        err.value.one_line()
    assert Scenario(model=v32, hardware=h200, engine="vllm==0.11.0", kv_dtype_request="fp8").kv_dtype is KVDtype.FP8


@pytest.mark.parametrize("gpu, engine, accepted", [
    # docs/engine-rules-by-release.md section 11: from v0.10.2 FlashMLA (Hopper) and CUTLASS MLA (Blackwell) take an
    # fp8 cache, while Triton MLA, the other GPUs' backend, still raises in v0.10.2 and v0.11.0
    ("a100-80gb", "vllm==0.10.2", False), ("l40s", "vllm==0.11.0", False), ("mi300x", "vllm==0.11.0", False),
    ("h200", "vllm==0.10.2", True), ("b200", "vllm==0.10.2", True), ("a100-80gb", "vllm==0.11.1", True)])
def test_vllm_fp8_mla_on_other_gpus_waits_for_triton_mla(gpu, engine, accepted):
    from kvplan.scenario import Scenario

    args = dict(model=load_model("deepseek-r1"), hardware=load_hardware(gpu), nodes=2, engine=engine,
                kv_dtype_request="fp8")
    if accepted:
        assert Scenario(**args).kv_dtype is KVDtype.FP8
        return
    with pytest.raises(KvplanError, match="only on Hopper .FlashMLA. and Blackwell"):
        Scenario(**args)


def test_a_refusal_names_the_rule_that_holds_in_the_release_it_suggests():
    # nvfp4 on an MLA model: no vLLM release runs it, so the message is that rule, not "pin 0.21" (which would then
    # refuse it for MLA); nvfp4 on a GPU without FP4 units is refused for the GPU before any release rule
    from kvplan.scenario import Scenario

    with pytest.raises(KvplanError, match="no nvfp4 KV cache for MLA models"):
        Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("b200"), engine="vllm==0.20.2",
                 kv_dtype_request="nvfp4")
    with pytest.raises(KvplanError, match="needs FP4 tensor cores"):
        Scenario(model=load_model("qwen3-32b"), hardware=load_hardware("h200"), engine="vllm==0.19.1",
                 kv_dtype_request="nvfp4")


def test_sglang_refuses_the_caches_it_has_no_name_or_layout_for():
    # SGLang's --kv-cache-dtype choices (server_args.py, v0.4.6-v0.5.23) have no per-token-head scaled dtypes, and it
    # stores an fp8 MLA cache as plain fp8_e4m3 except in DeepSeek V3.2's NSA pool (the 656-byte cell)
    from kvplan.scenario import Scenario

    with pytest.raises(KvplanError, match="SGLang has no fp8_per_token_head KV cache"):
        Scenario(model=load_model("qwen3-32b"), hardware=load_hardware("h200"), engine="sglang",
                 kv_dtype_request="fp8_per_token_head")
    with pytest.raises(KvplanError, match="as plain fp8_e4m3"):
        Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"), engine="sglang",
                 kv_dtype_request="fp8_ds_mla")
    assert Scenario(model=load_model("deepseek-v3.2-exp"), hardware=load_hardware("h200"), engine="sglang",
                    kv_dtype_request="fp8_ds_mla").kv_dtype is KVDtype.FP8_DS_MLA


def test_h800_is_hopper_and_gb200_blackwell():
    # H800: NVIDIA Hopper (SM90), the H100 for China; GB200: two B200 (SM100) with a Grace CPU
    from kvplan.engines.base import gpu_generation, known_other_gpu

    assert gpu_generation(load_hardware("h800")) == "hopper"
    assert gpu_generation(load_hardware("gb200")) == "blackwell"
    assert gpu_generation(load_hardware("b300")) is None   # SM103: the engines' SM100 checks not read for it
    assert known_other_gpu(load_hardware("a100-80gb")) and not known_other_gpu(load_hardware("h800"))


@pytest.mark.parametrize("engine, works", [("vllm==0.13.0", False), ("vllm==0.14.0", True), ("vllm", True)])
def test_the_dram_tier_note_says_when_a_pinned_vllm_cannot_offload(run_cli, engine, works):
    # v0.11.1-v0.13.0 have --kv-offloading-size, but the native backend passes num_cpu_blocks 0, which
    # CPUOffloadingSpec refuses (vllm/v1/kv_offload/cpu.py); v0.14.0 starts it (vllm/config/vllm.py)
    doc = concurrency(run_cli, "--engine", engine, "-m", "qwen3-32b", "-g", "h100-sxm", "--tp", "2")
    enabled_by = doc["tiers"]["l2_enabled_by"]
    if works:
        assert enabled_by.startswith("vLLM: --kv-offloading-size with --kv-offloading-backend native")
    else:
        assert enabled_by.startswith("vllm==0.13 has no working native offloading") and "from 0.14" in enabled_by


def test_sglang_prefill_graph_reserve_by_release():
    # PREFILL_GRAPH_SOURCE (server_args.py in the v0.5.9..v0.5.18 wheels): captured sizes 4..32 by 4 (8), 48..256 by
    # 16 (14), 288..512 by 32 (8), 576..1,024 by 64 (8), 1,280..4,096 by 256 (12), then by 512: 50 up to 4,096, 58 up
    # to 8,192 (+ 4,608..8,192: 8), 74 up to 16,384 (+ 24)
    from kvplan.engines.sglang import prefill_graph_sizes
    from kvplan.scenario import Scenario

    assert [prefill_graph_sizes(n) for n in (2048, 4096, 8192, 16384)] == [42, 50, 58, 74]

    def mb(engine, model, gpu, **kw):
        s = Scenario(model=load_model(model), hardware=load_hardware(gpu), engine=engine, **kw)
        return s.engine_adapter.prefill_graph_mb(s.sized_model, s.hardware, s.parallelism,
                                                 s.hardware.hbm_capacity_gib.value * 1024)[0]

    r1 = dict(tp=8, weight_dtype="fp8")
    # DeepSeek-R1 (MLA, DeepSeek-V3 architecture): none before v0.5.10; 1.5 GiB with the piecewise graphs of
    # v0.5.10-v0.5.14; none in v0.5.15-v0.5.17 (the breakable graph is off for MLA without DSA); 1.5 GiB from v0.5.18
    # on Hopper, none on Blackwell (trtllm_mla turns it off)
    assert [mb(f"sglang=={v}", "deepseek-r1", "h200", **r1) for v in ("0.5.9", "0.5.10", "0.5.14", "0.5.15",
                                                                      "0.5.17", "0.5.18")] == [0, 1536, 1536, 0, 0,
                                                                                               1536]
    assert mb("sglang==0.5.10", "deepseek-r1", "b200", **r1) == 1536 and mb("sglang", "deepseek-r1", "b200", **r1) == 0
    # DSA (DeepSeek-V3.2) keeps the breakable graph from v0.5.17
    assert mb("sglang==0.5.15", "deepseek-v3.2-exp", "h200", **r1) == 0
    assert mb("sglang==0.5.17", "deepseek-v3.2-exp", "h200", **r1) == 1536
    # a dense model on H200 (chunk 8,192): 58 x 8 = 464 MB from v0.5.10; none with PP > 1 or on AMD
    assert mb("sglang==0.5.9", "llama-3.1-8b", "h200", tp=1) == 0
    assert mb("sglang==0.5.10", "llama-3.1-8b", "h200", tp=1) == mb("sglang", "llama-3.1-8b", "h200", tp=1) == 464
    assert mb("sglang", "llama-3.1-8b", "h200", tp=1, pp=2) == 0 and mb("sglang", "llama-3.1-8b", "mi300x", tp=1) == 0
    # DP attention (TP 1 x DP 4, EP 4): off with it until v0.5.17
    dp = dict(tp=1, dp=4, ep=4)
    assert [mb(f"sglang=={v}", "qwen3-30b-a3b", "h200", **dp) for v in ("0.5.10", "0.5.15", "0.5.17")] == [0, 0, 464]
