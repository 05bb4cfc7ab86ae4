"""The rules of ``kvplan.scenario.Scenario``, pinned by hand: the DP fill-in, the default TP, EP dividing
TP x DP, the request-length limit, settings an engine does not honour, and the ``auto`` KV dtype.

Each expected figure is worked out in the comment beside it from the rule as the Scenario docstring and the
engines state it, never copied from kvplan's output. The CLI's ``--format json`` is the interface (README,
"JSON contract"), plus one check that the Python API refuses what the CLI refuses. tools/mutation_probe.py
names the mutants (``scenario-*``, ``kv-dtype-*``, ``*-honours-*``) these tests kill.
"""

from __future__ import annotations

import pytest


def ok(run_cli, *args: str) -> dict:
    r = run_cli(*args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


def refused(run_cli, *args: str) -> str:
    """The one-line error of a refused command line (exit 2, no traceback)."""
    r = run_cli(*args, "-f", "json")
    assert r.code == 2, (r.code, r.out[-300:], r.err)
    assert "Traceback" not in r.err
    return r.err


def model_toml(tmp_path, q_heads: int, kv_heads: int, name: str, weight_dtype: str = "bf16") -> str:
    """A two-layer GQA model written here, so that the heads (which decide the TP it allows) are the test's."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f'''type = "model"
id = "{name}"
name = "test model {name}"
sources = ["hand-written test model"]
num_layers = 2
hidden_size = 256
intermediate_size = 1024
vocab_size = 1000
weight_dtype = "{weight_dtype}"
params_total = {{ value = 1e8, source = "test figure" }}

[[groups]]
name = "attention"
layers = "all"
kind = {{ kind = "full_attention", kv_heads = {kv_heads}, head_dim_k = 64, head_dim_v = 64, q_heads = {q_heads} }}
''')
    return str(path)


# --- DP fill-in: dp = GPUs // (TP x PP) -------------------------------------------------------------------
def test_dp_fills_the_gpus_left_by_tp_times_pp(run_cli):
    # One 8-GPU H100 node, TP 2 x PP 2: 8 // (2 x 2) = 2 replicas, 2 x 2 x 2 = 8 GPUs (TP alone: 8 // 2 = 4,
    # which would plan 16 GPUs on an 8-GPU node).
    p = ok(run_cli, "size", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "2", "--pp", "2")["parallelism"]
    assert (p["tp"], p["pp"], p["dp"], p["gpus"], p["dp_filled"]) == (2, 2, 2, 8, True)


def test_dp_fill_refuses_gpus_that_do_not_split(run_cli):
    # 6 GPUs into TP 2 x PP 2 = 4-GPU replicas: 6 % 4 = 2 GPUs left over, refused (6 % 2 = 0 would pass if
    # PP were forgotten).
    err = refused(run_cli, "size", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "6", "--tp", "2", "--pp", "2")
    assert "do not split" in err


def test_given_dp_must_fit_the_gpus(run_cli):
    # TP 2 x PP 2 x DP 3 = 12 GPUs > 8 on one node: refused (TP x DP alone = 6 would fit). DP 2: exactly 8.
    err = refused(run_cli, "size", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "2", "--pp", "2", "--dp", "3")
    assert "12 GPUs" in err
    p = ok(run_cli, "size", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "2", "--pp", "2", "--dp", "2")
    assert p["parallelism"]["gpus"] == 8
    assert p["parallelism"]["dp_filled"] is False


# --- the TP default: the largest power of two <= GPUs per node (and <= --gpus) the model allows ----------
@pytest.mark.parametrize("gpus, tp", [
    ("4", 4),   # 4 planned GPUs on an 8-GPU node: min(8, 4) = 4 -> TP 4, DP 1 (a TP of 8 would not fit 4 GPUs)
    ("2", 2),   # min(8, 2) = 2 -> TP 2
])
def test_default_tp_is_capped_by_the_planned_gpus(run_cli, gpus, tp):
    # llama-3.1-8b: 8 KV heads, 32 query heads, so every power of two up to 8 is allowed.
    p = ok(run_cli, "size", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", gpus)["parallelism"]
    assert (p["tp"], p["dp"], p["gpus"]) == (tp, 1, tp)


@pytest.mark.parametrize("q_heads, kv_heads, tp, dp", [
    # 4 query heads: TP 8 does not divide them (4 % 8 = 4); TP 4 does -> TP 4, DP 8 // 4 = 2.
    (4, 2, 4, 2),
    # 6 query heads: 6 % 8 = 6 and 6 % 4 = 2 refuse 8 and 4; TP 2 divides 6 and the 2 KV heads -> TP 2, DP 4.
    # (Stopping after one halving failure would give TP 1, DP 8; skipping the model check would pick 8.)
    (6, 2, 2, 4),
])
def test_default_tp_is_the_largest_power_of_two_the_model_allows(run_cli, tmp_path, q_heads, kv_heads, tp, dp):
    m = model_toml(tmp_path, q_heads, kv_heads, f"gqa-q{q_heads}")
    d = ok(run_cli, "size", "-m", m, "-g", "h100-sxm")
    p = d["parallelism"]
    assert (p["tp"], p["dp"], p["gpus"]) == (tp, dp, 8)
    assert "the largest the model allows" in d["headline"]


# --- EP must divide TP x DP ---------------------------------------------------------------------------------
def test_ep_must_divide_tp_times_dp_not_the_pp_stages(run_cli):
    # 4 GPUs as TP 2 x PP 2 x DP 1: TP x DP = 2. EP 4 does not divide 2 -> refused, though it divides
    # TP x PP x DP = 4 (pipeline stages hold different layers, so they cannot share one layer's experts).
    base = ("size", "-m", "qwen3-235b-a22b", "-g", "h100-sxm", "--gpus", "4", "--tp", "2", "--pp", "2")
    err = refused(run_cli, *base, "--ep", "4")
    assert "--ep 4 does not divide TP x DP = 2" in err
    assert ok(run_cli, *base, "--ep", "2")["parallelism"]["ep"] == 2


def test_ep_may_span_the_dp_ranks(run_cli):
    # TP 2 x DP 4 = 8: EP 8 divides 8 (it does not divide TP = 2 alone, yet is the usual DP-attention + EP setup).
    p = ok(run_cli, "size", "-m", "qwen3-235b-a22b", "-g", "h100-sxm", "--tp", "2", "--ep", "8")["parallelism"]
    assert (p["tp"], p["dp"], p["ep"]) == (2, 4, 8)


# --- the request-length limit: prompt + decode + speculative slots <= limit ---------------------------------
def test_request_limit_counts_the_speculative_slots(run_cli):
    base = ("concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-pool", "1GiB",
            "--max-model-len", "1000", "--prompt", "500")
    # 500 + 499 + 1 slot = 1,000 = the limit: served.
    assert ok(run_cli, *base, "--decode", "499", "--spec-tokens", "1")["context_tokens"] == 999
    # 500 + 500 = 1,000 without slots: served.
    assert ok(run_cli, *base, "--decode", "500")["context_tokens"] == 1000
    # 500 + 500 + 1 slot = 1,001 > 1,000: refused (the engine would reject it).
    err = refused(run_cli, *base, "--decode", "500", "--spec-tokens", "1")
    assert "1,001 tokens" in err and "speculative" in err


def test_request_limit_defaults_to_max_position_embeddings(run_cli):
    # llama-3.1-8b: max_position_embeddings 131,072. 131,072 + 0 is served; 131,072 + 1 is refused.
    base = ("size", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--prompt", "131072")
    assert ok(run_cli, *base, "--decode", "0")["context_tokens"] == 131_072
    assert "max_position_embeddings" in refused(run_cli, *base, "--decode", "1")


# --- settings an engine does not honour are refused ---------------------------------------------------------
# SGLang has no vLLM-style --max-num-batched-tokens, --gpu-memory-utilization or --activation-reserve (its
# headroom is 1 - mem_fraction_static); vLLM and the neutral count have no --mem-fraction-static.
@pytest.mark.parametrize("engine, flag, value", [
    ("sglang", "--max-num-batched-tokens", "4096"),
    ("sglang", "--gpu-memory-utilization", "0.8"),
    ("sglang", "--activation-reserve", "2GiB"),
    ("vllm", "--mem-fraction-static", "0.8"),
    ("neutral", "--mem-fraction-static", "0.8"),
])
def test_a_setting_the_engine_ignores_is_refused(run_cli, engine, flag, value):
    err = refused(run_cli, "concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--engine", engine,
                  flag, value)
    assert f"{flag} is not a setting of --engine {engine}" in err


@pytest.mark.parametrize("engine, others", [("vllm", "(sglang)"), ("neutral", "(sglang)")])
def test_the_fix_names_only_engines_that_have_the_setting(run_cli, engine, others):
    # --mem-fraction-static is SGLang's alone (the neutral count and vLLM size by --gpu-memory-utilization): the fix
    # must not send a vLLM user to --engine neutral, which refuses it too
    err = refused(run_cli, "concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--engine", engine,
                  "--mem-fraction-static", "0.8")
    assert err.rstrip().endswith(f"use an engine that has it {others})"), err


@pytest.mark.parametrize("engine, flag", [
    ("sglang", "--mem-fraction-static"),
    ("vllm", "--gpu-memory-utilization"),
    ("neutral", "--gpu-memory-utilization"),
])
def test_a_setting_the_engine_honours_is_used(run_cli, engine, flag):
    base = ("concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--engine", engine)
    d = ok(run_cli, *base, flag, "0.5")
    assert d["budget"]["utilization"] == 0.5
    # Weights, activations and runtime reserve do not depend on the fraction, so the pool at 0.6 is larger by
    # 0.1 x the memory the fraction applies to (within a byte of rounding): the HBM, or for vLLM what the CUDA
    # driver reports, the HBM less the H100's 0.46 GiB (vLLM's logged total_gpu_memory 79.19 GiB of 79.65), for
    # SGLang the free memory before the weights, that less the 0.79 GiB CUDA context at TP1 (profile_max_num_token)
    d6 = ok(run_cli, *base, flag, "0.6")
    grown = d6["kv_pool_bytes_per_gpu"] - d["kv_pool_bytes_per_gpu"]
    hidden = {"vllm": int(0.46 * 2**30), "sglang": int((0.46 + 0.79) * 2**30)}.get(engine, 0)
    base_bytes = d["budget"]["hbm_bytes"] - hidden
    assert grown == pytest.approx(0.1 * base_bytes, abs=2)


def test_the_python_api_refuses_what_the_cli_refuses():
    import kvplan

    with pytest.raises(kvplan.KvplanError, match="--max-num-batched-tokens is not a setting of --engine sglang"):
        kvplan.Scenario(model=kvplan.load_model("llama-3.1-8b"), hardware=kvplan.load_hardware("h100-sxm"),
                        tp=1, engine="sglang", max_num_batched_tokens=4096)


# --- kv_dtype auto: the model's activation dtype (bf16 for the built-in presets) ----------------------------
def test_auto_kv_dtype_is_bf16_for_a_builtin_preset_and_fp16_for_fp16_weights(run_cli, tmp_path):
    d = ok(run_cli, "size", "-m", "llama-3.1-8b", "--tp", "1")
    assert (d["kv_dtype"], d["kv_dtype_auto"]) == ("bf16", True)
    # fp16 weights: the engines keep an fp16 KV cache (vLLM cache_dtype "auto" = the model dtype); same 2 B.
    fp16 = model_toml(tmp_path, 4, 2, "gqa-fp16", weight_dtype="fp16")
    d = ok(run_cli, "size", "-m", fp16, "--tp", "1")
    assert (d["kv_dtype"], d["kv_dtype_auto"]) == ("fp16", True)
    assert "fp16 KV (auto" in d["headline"]


def test_auto_is_case_insensitive(run_cli):
    d = ok(run_cli, "size", "-m", "llama-3.1-8b", "--tp", "1", "--kv-dtype", "AUTO")
    assert (d["kv_dtype"], d["kv_dtype_auto"]) == ("bf16", True)


def test_context_rows_past_the_limit_count_the_speculative_slots(run_cli):
    # --max-model-len 8,192 with 8 lookahead slots: a row at 8,185 tokens needs 8,193 and is past the limit, as the
    # request itself would be refused (8,185 + 8 > 8,192); a row at 8,184 needs exactly 8,192 and is not.
    d = run_cli("concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-pool", "10GiB",
                "--max-model-len", "8192", "--spec-tokens", "8", "--prompt", "1000", "--decode", "1000",
                "--contexts", "8184,8185", "-f", "json").json()
    rows = {r["context_tokens"]: r["over_context_limit"] for r in d["by_context"]}
    assert rows[8184] is False and rows[8185] is True


def test_default_tp_divides_the_gpus_given(run_cli):
    # --gpus 6 on an 8-GPU node: the default TP is the largest power of two <= 6 that divides 6, i.e. 2 (4 would
    # leave 6 / 4 replicas); DP fills in 3.
    d = run_cli("size", "-m", "llama-3.1-8b", "--gpus", "6", "-f", "json").json()
    assert (d["parallelism"]["tp"], d["parallelism"]["dp"]) == (2, 3)


@pytest.mark.parametrize("args, needle", [
    (("concurrency", "-m", "llama-3.1-70b", "--ep", "8"), "no routed experts"),
    (("concurrency", "-g", "h20", "--kv-dtype", "nvfp4"), "nvfp4 KV needs FP4 tensor cores"),
    (("concurrency", "--gpus", "6", "--tp", "8", "--dp", "1"), "raise --gpus to 8"),
    (("size", "--brief", "--explain"), "--brief and --explain both given"),
])
def test_settings_that_cannot_apply_are_refused(run_cli, args, needle):
    r = run_cli(*args)
    assert r.code == 2 and needle in r.err, r.err


def test_every_public_name_resolves_and_the_api_matches_the_cli(run_cli):
    """Each name in kvplan.__all__ resolves (lazily), and a plan through the Python API gives the CLI's figure."""
    import kvplan

    for name in kvplan.__all__:
        assert getattr(kvplan, name) is not None, name
    s = kvplan.Scenario(model=kvplan.load_model("deepseek-r1"), hardware=kvplan.load_hardware("h200"))
    plan = kvplan.plan_recommend(s)
    cli = run_cli("recommend", "-f", "json").json()
    assert plan.batch.value == cli["batch"] and plan.kv_dtype.value == cli["kv_dtype_recommended"]
    assert kvplan.present_recommend(plan).data["batch"].value == cli["batch"]
    with pytest.raises(AttributeError):
        kvplan.plan_nothing  # noqa: B018


def test_default_tp_stays_within_the_gpus_given_even_with_dp_given():
    """--gpus 4 --dp 1 on an 8-GPU node: the default TP is the largest power of two <= 4 GPUs that the model allows
    (Llama-3.1-70B: 8 KV heads, so 4), not the node's 8, which would need more GPUs than given."""
    import kvplan

    s = kvplan.Scenario(model=kvplan.load_model("llama-3.1-70b"), hardware=kvplan.load_hardware("h100-sxm"),
                        gpus=4, dp=1)
    assert (s.parallelism.tp, s.parallelism.dp, s.parallelism.gpus) == (4, 1, 4)
