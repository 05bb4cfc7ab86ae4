"""Rules of the calculators that no other test pinned: each test here kills a mutant of tools/mutation_probe.py
(named in its comment) with an expected value worked out by hand, never kvplan's own output pasted back."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import write_hardware  # the one hand-written GPU preset of the tests

from kvplan.calc import calibrate, costs
from kvplan.calc.recommend import RecommendOptions, plan_recommend
from kvplan.calc.tpot import TpotOptions, plan_tpot
from kvplan.errors import KvplanError
from kvplan.inputs.hf_import import model_from_hf_config
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.scenario import Scenario

GIB = 2**30
LOGS = Path(__file__).parent / "data" / "logs"
# Llama-3.1-8B (meta-llama/Llama-3.1-8B config.json): 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 B (bf16)
# = 131,072 B of KV per token on one GPU (TP1, PP1).
LLAMA_TOKEN = 32 * 8 * 128 * 2 * 2
# A 1,000 + 3,000-token request: 4,000 tokens = 250 whole 16-token blocks, 4,000 x 131,072 = 524,288,000 B.
LLAMA_4K_REQUEST = 4000 * LLAMA_TOKEN
IDEAL = {"hbm": 1.0, "mfu": 1.0, "overhead_us_per_layer": 0.0, "overhead_us_per_step": 0.0,
         "overhead_us_per_moe_layer": 0.0, "overhead_us_per_request": 0.0}


def json_of(run_cli, *args):
    r = run_cli(*args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


def llama(**kw) -> Scenario:
    base = dict(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), gpus=1, tp=1,
                prompt_tokens=1000, decode_tokens=3000)
    base.update(kw)
    return Scenario(**base)


# --- check: the bounds of a plan's assertions ----------------------------------------------------------------------
def test_weights_fit_bound_is_the_room_left_after_both_reserves(run_cli, tmp_path):
    # check-weights-room-keeps-runtime and plan-us-as-ms. On an 80 GiB GPU at gpu_memory_utilization 0.9 with a 2 GiB
    # activation and a 1 GiB runtime reserve, the room for weights is 0.9 x what vLLM sees of the GPU (85,899,345,920
    # less the 0.70 GiB = 751,619,276 B a GPU without a measured driver reserve takes) - 2 GiB - 1 GiB
    # = int(0.9 x 85,147,726,644) - 3,221,225,472 = 76,632,953,979 - 3,221,225,472 = 73,411,728,507 B;
    # Llama-3.1-8B's 8.03e9 bf16 weights are 16,060,000,000 B.
    gpu = write_hardware(tmp_path, 80.0)
    plan = tmp_path / "plan.toml"
    plan.write_text(f"""[deployment]
model = "llama-3.1-8b"
hardware = "{gpu}"
gpus = 1
tp = 1
engine = "vllm"
gpu_memory_utilization = 0.9
activation_reserve = "2GiB"
runtime_reserve = "1GiB"
prompt = "1k"
decode = "3k"

[[assert]]
metric = "weights_fit"

[[assert]]
metric = "ttft_seconds"
at_most = "250us"
""")
    r = run_cli("check", str(plan), "-f", "json")
    assert r.code == 1, r.err                         # the 250 us TTFT fails: a 1,000-token prefill takes ~35 ms
    fit, ttft = (a for p in r.json()["plans"] for a in p["assertions"])
    assert (fit["measured"], fit["bound"]) == (16_060_000_000, 73_411_728_507)
    assert fit["margin"] == 73_411_728_507 - 16_060_000_000 and fit["passed"]
    assert ttft["bound"] == pytest.approx(250e-6, rel=1e-12)      # "us" is microseconds, 1e-6 s
    assert not ttft["passed"]


# --- startup_log: the log's facts as scenario options --------------------------------------------------------------
def write_log(tmp_path, name: str, *lines: str) -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def v0_config(release: str = "0.8.0", **sizes: int) -> str:
    """vLLM V0's config line (vllm/engine/llm_engine.py), with the parallel sizes given."""
    parallel = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return (f"INFO 01-01 00:00:00 llm_engine.py:234] Initializing an LLM engine (v{release}) with config: "
            "model='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=8192, "
            f"{parallel}, kv_cache_dtype=auto")


BLOCKS_1000 = "INFO 01-01 00:00:01 executor_base.py:92] # GPU blocks: 1000, # CPU blocks: 2048"


def test_a_logged_pipeline_counts_in_the_gpus(run_cli, tmp_path):
    # log-gpus-ignore-pp: TP 2 x PP 2 x DP 1 = 4 GPUs (without PP: 2, fewer than the 4 one replica needs).
    path = write_log(tmp_path, "pp.log", v0_config(tensor_parallel_size=2, pipeline_parallel_size=2), BLOCKS_1000)
    doc = json_of(run_cli, "explain-log", path, "--prompt", "1000", "--decode", "3000")
    assert (doc["parallelism"]["tp"], doc["parallelism"]["pp"], doc["parallelism"]["gpus"]) == (2, 2, 4)
    assert doc["nodes"] == 1                            # ceil(4 / 8 GPUs per node)


def test_logged_expert_parallelism_spans_tp_and_dp(run_cli, tmp_path):
    # log-expert-parallel-tp-only: --enable-expert-parallel makes EP = TP x DP = 2 x 2 = 4 (vLLM's EP group is the
    # whole TP x DP world), not TP alone (2).
    path = write_log(tmp_path, "ep.log",
                     "INFO 01-01 00:00:00 utils.py:300] non-default args: {'model': 'Qwen/Qwen3-30B-A3B', "
                     "'tensor_parallel_size': 2, 'data_parallel_size': 2, 'enable_expert_parallel': True}",
                     "INFO 01-01 00:00:01 gpu_worker.py:200] Available KV cache memory: 40.00 GiB")
    doc = json_of(run_cli, "explain-log", path, "--prompt", "1000", "--decode", "3000")
    assert (doc["parallelism"]["tp"], doc["parallelism"]["dp"], doc["parallelism"]["ep"]) == (2, 2, 4)


def test_a_release_older_than_the_rules_follows_the_oldest(run_cli, tmp_path):
    # log-release-not-pinned-up: vLLM 0.5.4 is older than the oldest release kvplan has rules for (0.7.3,
    # kvplan.engines.vllm.RELEASES): the plan follows 0.7.3's rules and says so.
    path = write_log(tmp_path, "old.log", v0_config("0.5.4", tensor_parallel_size=1), BLOCKS_1000)
    doc = json_of(run_cli, "explain-log", path, "--prompt", "1000", "--decode", "3000")
    assert any("The log's vllm 0.5.4 is outside the releases kvplan has rules for; it follows 0.7.3's." in n
               for n in doc["notes"]), doc["notes"]


# --- explain_log: the logged pool and what it holds ----------------------------------------------------------------
def test_vllm_blocks_are_turned_into_tokens_then_bytes(run_cli, tmp_path):
    # explain-vllm-blocks-as-tokens and explain-requests-one-replica. No "Available KV cache memory" line, so the pool
    # is the logged blocks x 16 tokens x 131,072 B = 1,000 x 16 x 131,072 = 2,097,152,000 B per GPU (without the
    # block size: 131,072,000 B, which holds no 4,000-token request).
    path = write_log(tmp_path, "blocks.log", v0_config(tensor_parallel_size=1, data_parallel_size=2), BLOCKS_1000)
    doc = json_of(run_cli, "explain-log", path, "--prompt", "1000", "--decode", "3000")
    assert doc["kv_pool_bytes_per_gpu"] == 1000 * 16 * LLAMA_TOKEN == 2_097_152_000
    # a 4,000-token request: 524,288,000 B; floor(2,097,152,000 / 524,288,000) = 4 per replica, x DP 2 = 8
    assert doc["kv_bytes_per_request_per_gpu"] == LLAMA_4K_REQUEST
    assert doc["max_concurrency_per_replica"] == 4
    assert doc["max_concurrency"] == 8


def test_sglang_k_size_is_half_the_cell(run_cli):
    # explain-sglang-k-is-kv. Qwen3-235B-A22B at TP4, bf16 KV: 94 layers x 1 KV head per rank (4 / 4) x (128 K + 128 V)
    # x 2 B = 48,128 B per token; K alone is half, 24,064 B: (367,404 + 1) x 24,064 B = 8.234 GiB, the log's
    # "K size: 8.23 GB". Taking the whole cell as K would match fp8's 24,064 B cell instead and plan fp8 KV.
    doc = json_of(run_cli, "explain-log", str(LOGS / "sglang-qwen3-235b-a22b-fp8-4xh100.log"), "-g", "h100-sxm")
    assert doc["kv_dtype"] == "bf16"
    # pool = (8.23 + 8.23) GiB = 17,673,790,423 B; a 31,000-token request 31,000 x 48,128 = 1,491,968,000 B;
    # 17,673,790,423 // 1,491,968,000 = 11 (fp8 would hold 23)
    assert doc["kv_bytes_per_request_per_gpu"] == 31_000 * 48_128
    assert doc["max_concurrency"] == 11


def test_sglang_profiled_tokens_are_whole_pages(run_cli, tmp_path):
    # explain-sglang-tokens-not-paged. SGLang's profile (model_runner.py profile_max_num_token): rest = available
    # after the weights - (available + weights) x (1 - mem_fraction_static) = 60.01 - 75.01 x 0.2 = 45.008 GiB;
    # / 131,072 B per token = 45.008 x 8,192 = 368,705.5 -> 368,705 tokens, down to whole 16-token pages: 368,704.
    path = write_log(tmp_path, "sglang.log",
                     "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
                     "tp_size=1, dtype='auto', kv_cache_dtype='auto', mem_fraction_static=0.8, page_size=16)",
                     "[2026-01-01 00:00:01] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
                     "avail mem=60.01 GB, mem usage=15.00 GB.",
                     "[2026-01-01 00:00:02] KV Cache is allocated. #tokens: 368704, K size: 22.50 GB, V size: 22.50 GB")
    doc = json_of(run_cli, "explain-log", path, "-g", "h100-sxm", "--prompt", "1000", "--decode", "3000")
    rows = {row["figure"]: row for row in doc["reproduced"]}
    assert rows["max_total_num_tokens"]["kvplan"] == 368_704 and rows["max_total_num_tokens"]["agrees"]
    # K: (368,704 + 16) x 65,536 B = 24,164,433,920 B = 22.505 GiB -> "22.50"
    assert rows["K size (GiB, the log's 'GB'; V is the same)"]["kvplan"] == (368_704 + 16) * 65_536


# --- hf_import: layer layouts and weight widths from config.json ---------------------------------------------------
GEMMA2 = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "num_hidden_layers": 6,
          "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_size": 2304,
          "intermediate_size": 9216, "sliding_window": 4096, "vocab_size": 256_000, "max_position_embeddings": 8192,
          "torch_dtype": "bfloat16"}


def test_gemma2_slides_on_even_layers():
    # hf-alternating-from-0. Gemma2Config (transformers configuration_gemma2.py): layer i is sliding when
    # (i + 1) % 2 != 0, so layers 0, 2, 4 slide and 1, 3, 5 are full attention.
    spec = model_from_hf_config(GEMMA2, "gemma2")
    sliding = sorted(i for g in spec.groups if g.kind.kind == "sliding_window" for i in g.layers)
    full = sorted(i for g in spec.groups if g.kind.kind == "full_attention" for i in g.layers)
    assert (sliding, full) == ([0, 2, 4], [1, 3, 5])


@pytest.mark.parametrize("method, bits, dtype", [("gptq", 4, "int4"), ("gptq", 8, "int8"), ("awq", 4, "int4")])
def test_gptq_and_awq_bits_are_the_weight_width(method, bits, dtype):
    # hf-gptq-bits-swapped: quantization_config bits 4 is int4 weights, 8 is int8.
    config = {**GEMMA2, "quantization_config": {"quant_method": method, "bits": bits}}
    assert model_from_hf_config(config, "quantized").weight_dtype == dtype


# --- workload: the lengths and arrivals kvplan simulate draws -----------------------------------------------------
def test_uniform_p99_is_the_99th_of_100_integers():
    # workload-uniform-p99-plus-one: uniform:1,100 draws each of 1..100 with probability 1 / 100, so P(X <= 99) = 0.99
    # and the 0.99 quantile is 99 (not 100). uniform:1,1000: P(X <= 990) = 0.99 -> 990.
    from kvplan.inputs.workload import parse_dist

    assert parse_dist("uniform:1,100", "--prompt-dist").p99() == 99
    assert parse_dist("uniform:1,1000", "--prompt-dist").p99() == 990


def test_lengths_are_capped_to_what_the_engine_serves():
    # workload-prompt-cap-full-length and workload-output-uncapped, max_len 4,096 tokens a request:
    # a 5,000-token prompt is cut to 4,095 (one token left for the output) and its 10-token output to 4,096 - 4,095 = 1;
    # a 1,000-token prompt keeps its length and its 5,000-token output is cut to 4,096 - 1,000 = 3,096.
    from kvplan.inputs import workload as wl

    long_prompt = wl.build(requests=3, seed=0, prompt=wl.parse_dist("fixed:5000", "p"),
                           output=wl.parse_dist("fixed:10", "o"), max_len=4096, users=1)
    assert (list(long_prompt.prompts), list(long_prompt.outputs)) == ([4095] * 3, [1] * 3)
    long_output = wl.build(requests=3, seed=0, prompt=wl.parse_dist("fixed:1000", "p"),
                           output=wl.parse_dist("fixed:5000", "o"), max_len=4096, users=1)
    assert (list(long_output.prompts), list(long_output.outputs)) == ([1000] * 3, [3096] * 3)


def test_duration_submits_only_what_arrives_before_it():
    # workload-duration-inclusive: a trace arriving at 0, 1 and 2 s with --duration 2s submits the first two; no
    # request is submitted at or after the duration.
    from kvplan.inputs import workload as wl

    trace = wl.Trace((100, 100, 100), (10, 10, 10), (0.0, 1.0, 2.0), "trace.csv")
    work = wl.build(requests=3, seed=0, prompt=wl.parse_dist("fixed:1", "p"), output=wl.parse_dist("fixed:1", "o"),
                    max_len=4096, trace=trace, duration_s=2.0)
    assert list(work.arrivals) == [0.0, 1.0]


# --- calibrate: reading measured points and the fitted factors' bounds ---------------------------------------------
@pytest.mark.parametrize("text, match", [
    ("batch,context,tpot_ms\n1,1000,0\n", "must be a positive number"),           # calibrate-zero-accepted
    ("batch,context,tpot_ms\n1,1000.5,3\n", "whole numbers"),                      # calibrate-fractional-context
])
def test_measured_points_refused(tmp_path, text, match):
    (tmp_path / "m.csv").write_text(text)
    with pytest.raises(KvplanError, match=match):
        calibrate.read_points(tmp_path / "m.csv")


def test_measured_csv_comment_lines_are_skipped(tmp_path):
    # calibrate-comments-read: a "#" line before the header is a comment, not the header (read as the header, the
    # columns would be "# measured on ..." and no batch column).
    (tmp_path / "m.csv").write_text("# measured on one H100, vLLM 0.11\nbatch,context,tpot_ms\n2,4000,7.5\n")
    assert calibrate.read_points(tmp_path / "m.csv") == (calibrate.Point(2, 4000, 0.0075),)


def _points(s, factors, contexts, scale=1.0, shift=0.0):
    step = costs.step_model(s, factors)
    out = []
    for b, ctx in contexts:
        nbytes, nflops = step.request_cache(float(ctx))
        out.append(calibrate.Point(b, ctx, float(step.step(b, b * nbytes, b * nflops)["total"]) * scale + shift))
    return tuple(out)


MEMORY_BOUND = ((1, 1000), (1, 30000), (2, 8000))   # Llama-3.1-8B at TP1: weights-bound, no GEMM floor


def test_fitted_hbm_efficiency_is_at_most_one():
    # calibrate-hbm-uncapped. With every overhead 0, a memory-bound step is bytes / (peak x hbm): points taking half
    # the peak-bandwidth time fit 1 / hbm = u = 0.5, hbm = 2, which no GPU reaches: capped at 1.0. The model at 1.0
    # then predicts twice each point, a relative error of 1 at every point.
    s = llama(gpus=None, dp=1)
    prior = costs.step_factors(s.hardware, **IDEAL)
    fit = calibrate.fit(s, _points(s, prior, MEMORY_BOUND, scale=0.5), "halved", prior)
    assert fit.hbm == 1.0
    assert fit.rms_relative_error == pytest.approx(1.0, rel=1e-9)


def test_fitted_step_overhead_is_never_negative():
    # calibrate-negative-overhead. Points of the model at hbm 0.5 less 100 us each: the exact least-squares answer is
    # u = 2 (hbm 0.5) and a per-step overhead c = -100 us, which is no overhead: floored at 0 us. Every prediction is
    # then 100 us over its point: rms relative error = sqrt(mean((100 us / T_i)^2)).
    s = llama(gpus=None, dp=1)
    prior = costs.step_factors(s.hardware, **IDEAL)
    pts = _points(s, costs.step_factors(s.hardware, **{**IDEAL, "hbm": 0.5}), MEMORY_BOUND, shift=-100e-6)
    fit = calibrate.fit(s, pts, "shifted", prior)
    assert fit.overhead_us_per_step == 0.0
    assert fit.hbm == pytest.approx(0.5, rel=1e-9)
    expected = math.sqrt(sum((100e-6 / p.tpot_seconds) ** 2 for p in pts) / len(pts))
    assert fit.rms_relative_error == pytest.approx(expected, rel=1e-6)


# --- tpot ----------------------------------------------------------------------------------------------------------
def test_tokens_per_gpu_divide_by_tp_times_pp(run_cli):
    # tpot-per-gpu-ignores-pp and tpot-per-gpu-per-replica: a replica of TP 1 x PP 2 is 2 GPUs, so tokens/s per GPU is
    # the replica's batch / TPOT over 2 (the stages are not overlapped).
    d = json_of(run_cli, "tpot", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--pp", "2", "--dp", "1",
                "--prompt", "1000", "--decode", "3000")
    assert d["tokens_per_second_per_replica"] == pytest.approx(8 / d["tpot_seconds_mean"], rel=1e-12)
    assert d["tokens_per_second_per_gpu"] == pytest.approx(d["tokens_per_second_per_replica"] / 2, rel=1e-12)


def test_a_batch_the_pool_holds_exactly_is_accepted(run_cli):
    # tpot-batch-at-fit-refused: a pool of exactly 4 x 524,288,000 B holds 4 requests of 4,000 tokens: --batch 4 runs,
    # --batch 5 is refused.
    args = ("tpot", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--prompt", "1000", "--decode",
            "3000", "--kv-dtype", "bf16", "--kv-pool", f"{4 * LLAMA_4K_REQUEST}B")
    d = json_of(run_cli, *args, "--batch", "4")
    assert (d["batch"], d["max_batch_per_replica"]) == (4, 4)
    r = run_cli(*args, "--batch", "5")
    assert r.code == 2 and "--batch 5 does not fit: one replica's KV pool holds 4 requests" in r.err


def test_mtp_drafting_costs_k_draft_layers():
    # tpot-mtp-one-draft-step. With every overhead 0, one MTP draft step is one decoder layer: plain step / layers, the
    # target's layers (DeepSeek-R1's 61: its 1 MTP layer, counted in the pool, is the drafter's and runs only in the
    # draft steps, not in the verify or plain step). With k = 2 draft tokens the draft costs 2 x 1 MTP layer x
    # plain / 61, and the effective TPOT at the start is (verify step of k + 1 = 3 tokens + draft) / accepted tokens
    # (2.5, no slope); one draft step only (the mutant) would be (verify + plain / 61) / 2.5.
    import numpy as np

    s = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"), kv_dtype_request="fp8", tp=8, dp=1,
                 mtp_layers=1, prompt_tokens=1000, decode_tokens=3000)
    plan = plan_tpot(s, TpotOptions(batch=4, spec_tokens=2, accept=(2.5, 0.0), factors=IDEAL))
    step = costs.step_model(s.with_(mtp_layers=0), costs.step_factors(s.hardware, **IDEAL))
    nbytes, nflops = step.request_cache(np.array([1000.0]))
    plain = float(step.step(4, 4 * nbytes, 4 * nflops)["total"][0])
    verify = float(step.step(4, 4 * nbytes, 4 * nflops, tokens_per_request=3)["total"][0])
    assert plan.spec.plain_start.value == pytest.approx(plain, rel=1e-12)
    assert s.sized_model.num_layers == 61 + 1 and step.layers == 61
    assert plan.spec.tpot_start.value == pytest.approx((verify + 2 * plain / 61) / 2.5, rel=1e-9)


def test_kv_bound_context_counts_the_experts_with_the_weights():
    # tpot-kv-bound-ignores-moe: the context from which the batch's attention outlasts the weight reads compares it
    # with the dense weights AND the experts read that step. At the reported context, attention must exceed both.
    s = Scenario(model=load_model("qwen3-30b-a3b"), hardware=load_hardware("h100-sxm"), tp=1, dp=1,
                 prompt_tokens=1000, decode_tokens=3000)
    plan = plan_tpot(s, TpotOptions(batch=8))
    at = plan.kv_bound_from_context_tokens.value
    step = costs.step_model(s, plan.factors)
    nbytes, nflops = step.request_cache(float(at))
    split = step.step(8, 8 * nbytes, 8 * nflops)
    assert float(split["moe"]) > 0
    assert float(split["attention"]) > float(split["weights"] + split["moe"])


# --- pd ------------------------------------------------------------------------------------------------------------
PD_ARGS = ("pd", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "2", "--prompt", "8000", "--decode", "500")


def test_pd_ttft_adds_the_handover(run_cli):
    # pd-ttft-no-handover: TTFT disaggregated, without a queue = the prefill role's prefill + exposed transfer + the
    # 2 ms handover (DEFAULT_HANDOVER_SECONDS, kvplan's stated assumption); the neutral engine has no frontend latency.
    d = json_of(run_cli, *PD_ARGS)
    assert d["ttft_seconds_disaggregated"] == pytest.approx(
        d["prefill_seconds_disaggregated"] + d["kv_transfer_exposed_seconds"] + 0.002, rel=1e-12)


def test_pd_nic_option_is_gigabytes_per_second(run_cli):
    # pd-nic-gib: --nic-gbps 25 is 25 x 10^9 B/s (GB, not GiB). The busiest NIC carries the larger shard of the two
    # roles' layouts (Llama-3.1-8B: 32 layers x 8 KV heads x 256 x 2 B = 131,072 B per token on one GPU, halved per
    # TP doubling) x 8,000 tokens: at TP1 1,048,576,000 B / (25e9 x 0.82, the h100-sxm preset's link efficiency) =
    # 51.15 ms (at TP2 on both sides, half of that).
    d = json_of(run_cli, *PD_ARGS, "--nic-gbps", "25")
    assert d["nic_bytes_per_second"] == 25e9
    nbytes = 131_072 // min(d["prefill_tp"], d["decode_tp"]) * 8000
    assert d["kv_transfer_bytes_per_gpu"] == nbytes
    assert d["kv_transfer_seconds"] == pytest.approx(nbytes / (25e9 * 0.82), rel=1e-12)


# --- recommend -----------------------------------------------------------------------------------------------------
def test_batch_of_eight_agrees_with_the_documents_small_batch():
    # recommend-small-batch-strict: the document's "small (2-8)" includes 8. A pool of exactly 8 x 524,288,000 B holds
    # 8 bf16 requests of 4,000 tokens; Llama-3.1-8B decodes 8 of them well inside the 50 ms SLO (~8 ms).
    plan = plan_recommend(llama(kv_dtype_request="bf16", kv_pool_bytes=8 * LLAMA_4K_REQUEST))
    assert (plan.batch_capacity.value, plan.batch.value) == (8, 8)
    assert plan.row("batch").agrees
    nine = plan_recommend(llama(kv_dtype_request="bf16", kv_pool_bytes=9 * LLAMA_4K_REQUEST))
    assert nine.batch.value == 9 and not nine.row("batch").agrees


def test_offload_per_replica_counts_every_pipeline_stage():
    # recommend-tier-replica-ignores-pp: the tier per replica is the tier per GPU x TP x PP GPUs = x 2 at TP1 x PP2.
    plan = plan_recommend(llama(gpus=2, pp=2, decode_tokens=30_000, kv_pool_bytes=64 * GIB))
    assert plan.offload and plan.offload_bytes_per_gpu.value > 0
    assert plan.offload_bytes_per_replica.value == 2 * plan.offload_bytes_per_gpu.value


def test_batch_without_an_slo_batch_is_capped_by_the_engine():
    # recommend-batch-ignores-engine-cap: when no batch meets the SLO (0.1 ms: batch 1 alone takes ~5 ms), the batch
    # is min(capacity, max_num_seqs) = min(16, 4) = 4. The pool of 16 x 524,288,000 B holds 16 bf16 requests.
    plan = plan_recommend(llama(kv_dtype_request="bf16", kv_pool_bytes=16 * LLAMA_4K_REQUEST, max_num_seqs=4),
                          RecommendOptions(tpot_slo=1e-4))
    assert (plan.batch_slo.value, plan.batch_capacity.value, plan.batch_engine_limit.value) == (0, 16, 4)
    assert plan.batch.value == 4
