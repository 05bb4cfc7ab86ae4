"""The decode-step model and `kvplan tpot`, pinned by hand arithmetic, properties and synthetic calibration."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.calc import calibrate, costs
from kvplan.calc.tpot import TpotOptions, parse_accept, plan_tpot
from kvplan.errors import KvplanError
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.scenario import Scenario

IDEAL = ["--hbm-efficiency", "1", "--mfu", "1", "--overhead-us", "0", "--step-overhead-us", "0",
         "--moe-overhead-us", "0", "--request-overhead-us", "0"]
IDEAL_FACTORS = {"hbm": 1.0, "mfu": 1.0, "overhead_us_per_layer": 0.0, "overhead_us_per_step": 0.0,
                 "overhead_us_per_moe_layer": 0.0, "overhead_us_per_request": 0.0}


def tpot_json(run_cli, *args):
    r = run_cli("tpot", *args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


def test_dense_step_by_hand(run_cli):
    # Llama-3.1-8B bf16 on one H100 at ideal factors, one request at 1,000 tokens:
    #   weights 8.03e9 x 2 B = 16,060,000,000 B / 3.35e12 B/s = 4.794030 ms (the GEMMs, 2 x 7,504,658,432 FLOPs /
    #   989e12 = 15.2 us, are memory-bound); KV 32 layers x 4,096 B x 1,000 = 131,072,000 B / 3.35e12 = 39.13 us;
    #   attention 2 x 32 heads x 256 x 1,000 x 32 layers = 524,288,000 FLOPs / 989e12 = 0.53 us (memory-bound).
    d = tpot_json(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--batch", "1",
                  "--prompt", "1000", "--decode", "0", "--shape", "cohort", *IDEAL)
    b = d["step_breakdown"]["start"]
    assert b["weights_seconds"] == pytest.approx(16_060_000_000 / 3.35e12)
    assert b["kv_seconds"] == pytest.approx(131_072_000 / 3.35e12)
    assert b["attention_compute_seconds"] == pytest.approx(524_288_000 / 989e12)
    assert d["tpot_seconds_start"] == pytest.approx((16_060_000_000 + 131_072_000) / 3.35e12)
    assert d["bound"]["start"] == "weights (HBM)"


@pytest.mark.parametrize("batch, experts", [(1, 8), (64, 256 * (1 - (248 / 256) ** 64))])
def test_moe_reads_the_experts_the_tokens_touch(run_cli, batch, experts):
    # DeepSeek-R1 at TP8: uniform top-8 routing over 256 experts touches 256 x (1 - (1 - 8/256)^B) distinct experts
    # per MoE layer: 8 at batch 1, 222.46 at batch 64. One expert over the 58 MoE layers, on one of 8 GPUs:
    # 653.9e9 B of routed experts (fp8) / 256 / 8 = 319,287,109 B; read at 4.8e12 B/s.
    d = tpot_json(run_cli, "-m", "deepseek-r1", "--kv-dtype", "fp8", "--batch", str(batch), "--prompt", "1000",
                  "--decode", "0", "--shape", "cohort", *IDEAL)
    assert d["step_breakdown"]["start"]["moe_seconds"] == pytest.approx(experts * 653.9e9 / 2048 / 4.8e12, rel=1e-9)


def test_mla_decode_runs_in_the_absorbed_form(run_cli):
    # Attention DP (TP1, EP8): all 128 query heads on each GPU; absorbed MLA costs 2 x 128 x (2 x 512 + 64) FLOPs per
    # cached token per layer: 61 x 278,528 x 10,000 = 169,902,080,000 FLOPs at the bf16 peak 989e12 (attention runs in
    # bf16) = 171.79 us. At TP8 each GPU has 16 heads: an eighth.
    dp = tpot_json(run_cli, "-m", "deepseek-r1", "--kv-dtype", "fp8", "--tp", "1", "--ep", "8", "--batch", "1",
                   "--prompt", "10000", "--decode", "0", "--shape", "cohort", *IDEAL)
    assert dp["step_breakdown"]["start"]["attention_compute_seconds"] == pytest.approx(169_902_080_000 / 989e12)
    tp = tpot_json(run_cli, "-m", "deepseek-r1", "--kv-dtype", "fp8", "--batch", "1", "--prompt", "10000",
                   "--decode", "0", "--shape", "cohort", *IDEAL)
    assert tp["step_breakdown"]["start"]["attention_compute_seconds"] == pytest.approx(169_902_080_000 / 8 / 989e12)
    # the latent is whole on every rank: the KV read is the same at TP1 and TP8, 61 x 576 B x 10,000 tokens
    assert tp["step_breakdown"]["start"]["kv_seconds"] == pytest.approx(61 * 576 * 10_000 / 4.8e12)
    assert dp["step_breakdown"]["start"]["kv_seconds"] == tp["step_breakdown"]["start"]["kv_seconds"]


def test_ep_prices_an_all_to_all_only_across_attention_dp_ranks(run_cli):
    # DeepSeek-R1 fp8 on 8 x H200, batch 1. TP8 with EP8 (EP inside the TP group, no attention DP): every rank holds
    # the step's tokens after the attention all-reduce and the MoE output's all-reduce combines the local experts,
    # so only the two all-reduces per layer are priced (vLLM: use_all2all_kernels = dp_size > 1 and use_ep; SGLang:
    # --moe-a2a-backend none), as at TP8 without EP: 61 layers x 2 x (9.3 us + 2 x 7/8 x 7,168 x 2 B /
    # (450e9 x 0.114)) = 61 x 2 x (9.3 + 0.48905) us = 1.19427 ms.
    allreduces = 61 * 2 * (9.3e-6 + 2 * 7 / 8 * 7168 * 2 / (450e9 * 0.114))
    for ep in ([], ["--ep", "8"]):
        d = tpot_json(run_cli, "-m", "deepseek-r1", "--kv-dtype", "fp8", "--tp", "8", *ep, "--batch", "1",
                      "--prompt", "1000", "--decode", "0", "--shape", "cohort", *IDEAL)
        assert d["step_breakdown"]["start"]["comm_seconds"] == pytest.approx(allreduces)
        assert any("no all-to-all" in n for n in d["notes"]) == bool(ep)   # said, not silently dropped
    # TP1 DP8 EP8 (attention DP): no all-reduce; per MoE layer a dispatch and a combine over the EP group, each the
    # H200 preset's 30 us latency + 8 experts x 7,168 x 2 B x 7/8 / (450e9 x 0.82) for the one token:
    # 58 x 2 x (30 + 0.271962) us = 3.511548 ms.
    d = tpot_json(run_cli, "-m", "deepseek-r1", "--kv-dtype", "fp8", "--tp", "1", "--ep", "8", "--batch", "1",
                  "--prompt", "1000", "--decode", "0", "--shape", "cohort", *IDEAL)
    assert d["step_breakdown"]["start"]["comm_seconds"] == pytest.approx(58 * 2 * (30e-6 + 8 * 7168 * 2 * 7 / 8
                                                                                    / (450e9 * 0.82)))


def test_tp_all_reduce_and_overheads(run_cli):
    # Llama-3.1-70B at TP4 on H100, batch 2: per layer two in-graph all-reduces of 2 x 8,192 x 2 B, each
    # latency 9.3 us (vLLM's custom all-reduce, sglang PR #2904) + 2 x 3/4 x 32,768 B / (450e9 x 0.114)
    # = 9.3 us + 0.958 us; x 80 layers. Overheads: 80 x 15 us + 450 us = 1.65 ms (H100 preset) + 2 requests x 15 us.
    d = tpot_json(run_cli, "-m", "llama-3.1-70b", "-g", "h100-sxm", "--tp", "4", "--dp", "1", "--batch", "2",
                  "--prompt", "1000", "--decode", "0", "--shape", "cohort")
    b = d["step_breakdown"]["start"]
    per_token = 2 * 3 / 4 * 8192 * 2 / (450e9 * 0.114)
    assert b["comm_seconds"] == pytest.approx(80 * 2 * (9.3e-6 + per_token * 2))
    assert b["overhead_seconds"] == pytest.approx(80 * 15e-6 + 450e-6 + 2 * 15e-6)
    # the two new factors answer to their flags: 10 us all-reduces, 0 us per request
    d = tpot_json(run_cli, "-m", "llama-3.1-70b", "-g", "h100-sxm", "--tp", "4", "--dp", "1", "--batch", "2",
                  "--prompt", "1000", "--decode", "0", "--shape", "cohort", "--allreduce-latency-us", "10",
                  "--request-overhead-us", "0")
    b = d["step_breakdown"]["start"]
    assert b["comm_seconds"] == pytest.approx(80 * 2 * (10e-6 + per_token * 2))
    assert b["overhead_seconds"] == pytest.approx(80 * 15e-6 + 450e-6)


def test_experts_in_a_dtype_without_matrix_cores_stream_at_upcast_hbm():
    # gpt-oss-120b's MXFP4 experts: MI300X (bf16/fp8 peaks only) upcasts them, so they stream at upcast_hbm 0.37
    # (preset) instead of hbm 0.78; at batch 1 on TP1 the step touches 36 layers x 4 experts. B200 lists an FP4
    # peak, so nothing changes there. Moe time ratio = 0.78 / 0.37 exactly (memory-bound at batch 1).
    s = Scenario(model=load_model("gpt-oss-120b"), hardware=load_hardware("mi300x"), tp=1, dp=1,
                 prompt_tokens=1000, decode_tokens=0)
    step = costs.step_model(s)
    assert step.expert_bw_scale == pytest.approx(0.37 / 0.78)
    slow = step.step(1, 0.0, 0.0)["moe"]
    native = costs.step_model(s, costs.step_factors(s.hardware, upcast_hbm=0.78)).step(1, 0.0, 0.0)["moe"]
    assert slow / native == pytest.approx(0.78 / 0.37)
    assert costs.upcast("mxfp4", load_hardware("mi300x")) and not costs.upcast("mxfp4", load_hardware("b200"))
    assert costs.upcast("fp8", load_hardware("a100-80gb")) and not costs.upcast("bf16", load_hardware("a100-80gb"))
    assert costs.step_model(s.with_(hardware=load_hardware("b200"))).expert_bw_scale == 1.0


def test_ttft_is_the_chunked_prefill(run_cli):
    # Llama-3.1-8B, 16,384-token prompt, max_num_batched_tokens 8,192: two chunks, each compute-bound at
    # the H100 preset's prefill_mfu 0.70 (the neutral engine: no frontend latency): 2 x 7,504,658,432 x 8,192 +
    # attention; per chunk overhead 32 x 15 us + 450 us = 0.93 ms.
    d = tpot_json(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--prompt", "16384",
                  "--decode", "0", "--max-num-batched-tokens", "8192")
    from kvplan.calc import flops

    model = load_model("llama-3.1-8b")
    chunk = [flops.prefill_flops(model, 8192, 0), flops.prefill_flops(model, 16384, 8192)]
    expected = sum(f / (989e12 * 0.70) + 0.93e-3 for f in chunk)
    assert d["ttft_seconds"] == pytest.approx(expected, rel=1e-9)



def test_ttft_adds_the_engines_frontend_latency(run_cli):
    # the same prefill on --engine vllm: + vLLM's 1 ms frontend latency (engines/vllm.py: the API server's way in
    # and the first token's way out, fitted on the 'fit' runs of tests/data/serving_runs.toml)
    d = tpot_json(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--prompt", "16384",
                  "--decode", "0", "--max-num-batched-tokens", "8192", "--engine", "vllm")
    from kvplan.calc import flops

    model = load_model("llama-3.1-8b")
    chunk = [flops.prefill_flops(model, 8192, 0), flops.prefill_flops(model, 16384, 8192)]
    expected = sum(f / (989e12 * 0.70) + 0.93e-3 for f in chunk) + 0.001
    assert d["ttft_seconds"] == pytest.approx(expected, rel=1e-9)

def scenario(model="llama-3.1-8b", hw="h100-sxm", **kw):
    return Scenario(model=load_model(model), hardware=load_hardware(hw), tp=1, dp=1, **kw)


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 256), s=st.integers(1, 120_000), db=st.integers(0, 64), ds=st.integers(0, 10_000),
       model=st.sampled_from(["llama-3.1-8b", "gpt-oss-120b", "qwen3-32b"]))
def test_more_context_or_batch_is_never_faster_and_more_bandwidth_never_slower(b, s, db, ds, model):
    import dataclasses

    hw = load_hardware("h200")
    base = costs.step_model(Scenario(model=load_model(model), hardware=hw, tp=1, dp=1, prompt_tokens=1,
                                     decode_tokens=100))

    def t(step, batch, ctx):
        nbytes, nflops = step.request_cache(float(ctx))
        return float(step.step(batch, batch * nbytes, batch * nflops)["total"])

    assert t(base, b + db, s + ds) >= t(base, b, s)
    faster = dataclasses.replace(base, bw=base.bw * 1.5)
    assert t(faster, b, s) <= t(base, b, s)


def test_calibration_recovers_known_factors():
    # Synthetic points from the model itself at hbm 0.7, mfu 0.55 and 800 us per step (the per-layer overhead kept at
    # its prior): memory-bound (small batches) and compute-bound (batch 2,048 at short context) points.
    s = scenario()
    truth = costs.step_factors(s.hardware, hbm=0.7, mfu=0.55, overhead_us_per_step=800.0)
    step = costs.step_model(s, truth)
    pts = []
    for b, ctx in ((1, 1000), (4, 8000), (16, 20000), (64, 2000), (2048, 64), (1024, 128), (8, 60000)):
        nbytes, nflops = step.request_cache(float(ctx))
        pts.append(calibrate.Point(b, ctx, float(step.step(b, b * nbytes, b * nflops)["total"])))
    fit = calibrate.fit(s, tuple(pts), "synthetic", costs.step_factors(s.hardware))
    assert fit.hbm == pytest.approx(0.7, rel=1e-6)
    assert fit.mfu == pytest.approx(0.55, rel=1e-6)
    assert fit.overhead_us_per_step == pytest.approx(800.0, rel=1e-6)
    assert fit.rms_relative_error < 1e-9


def test_measured_file_drives_the_plan_and_saves_a_preset(run_cli, tmp_path):
    # Two points a GPU of half the preset's HBM efficiency would give (weights-bound, batch 1): the fitted factors
    # make the plan reproduce them; the saved preset loads with -g.
    s = scenario()
    truth = costs.step_factors(s.hardware, hbm=0.5)
    step = costs.step_model(s, truth)
    rows = ["batch,context,tpot_ms"]
    for b, ctx in ((1, 1000), (2, 30000), (8, 4000)):
        nbytes, nflops = step.request_cache(float(ctx))
        rows.append(f"{b},{ctx},{float(step.step(b, b * nbytes, b * nflops)['total']) * 1e3:.9f}")
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "cal.toml"
    d = tpot_json(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--measured",
                  str(tmp_path / "m.csv"), "--save-calibration", str(out))
    assert d["calibration"]["fitted"]["hbm"] == pytest.approx(0.5, rel=1e-4)
    assert d["calibration"]["rms_relative_error"] < 1e-6
    again = tpot_json(run_cli, "-m", "llama-3.1-8b", "-g", str(out), "--tp", "1", "--dp", "1")
    assert again["hardware"] == "h100-sxm-calibrated"
    assert again["factors"]["hbm"] == pytest.approx(0.5, rel=1e-4)


@pytest.mark.parametrize("text, match", [
    ("batch,context\n1,1000\n", "needs batch, context and tpot_ms"),
    ("batch,context,tpot_ms\n1,1000,-3\n", "must be a positive number"),
    ("batch,context,tpot_ms\n1.5,1000,3\n", "whole numbers"),
])
def test_bad_measured_files_are_one_line_errors(run_cli, tmp_path, text, match):
    (tmp_path / "m.csv").write_text(text)
    r = run_cli("tpot", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--measured", str(tmp_path / "m.csv"))
    assert r.code == 2 and match in r.err and r.err.count("\n") == 1, r.err


def test_speculation_pays_while_acceptance_holds_and_stops_when_it_falls():
    s = scenario("deepseek-r1", "h200", kv_dtype_request="fp8", mtp_layers=1).with_(tp=8, dp=None)
    good = plan_tpot(s, TpotOptions(batch=4, spec_tokens=1, accept=parse_accept("1.8")))
    assert good.spec.pays and good.spec.gain_mean.value > 1
    # acceptance falls to 1 by 30K tokens: 1.3 - 0.00001 x 31,000 = 0.99 -> 1: verify + draft cost, nothing gained
    bad = plan_tpot(s, TpotOptions(batch=4, spec_tokens=1, accept=parse_accept("1.3-0.00001/token")))
    assert bad.spec.accept_end.value == 1.0 and not bad.spec.pays
    # the MTP layer's KV per request: one more latent layer, 576 B x 31,000 tokens
    assert good.spec.draft_kv_bytes_per_request.value == 576 * 31_000


def test_batch_beyond_the_pool_is_refused(run_cli):
    r = run_cli("tpot", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--batch", "500")
    assert r.code == 2 and "does not fit" in r.err


def test_accept_parsing():
    # the acceptance against context as (context, acceptance) points: one for a flat one; a0 - slope x to 1 is the
    # line from (0, a0) to the context where it reaches 1: (2.4 - 1) / 0.00002 = 70,000 tokens
    assert parse_accept("2.4") == ((0.0, 2.4),)
    (c0, a0), (c1, a1) = parse_accept("2.4-0.00002/token")
    assert (c0, a0, a1) == (0.0, 2.4, 1.0) and c1 == pytest.approx(70_000)
    # a profile: ACCEPT@CONTEXT, contexts in kvplan's token units (1k = 1,000, 32Ki = 32,768; 1,000 with a comma)
    assert parse_accept("2.6@1k,2.0@32k") == ((1000.0, 2.6), (32000.0, 2.0))
    assert parse_accept("2.6@1,000, 2.0@32Ki") == ((1000.0, 2.6), (32768.0, 2.0))
    assert parse_accept("1.9@0") == ((0.0, 1.9),)
    with pytest.raises(KvplanError):
        parse_accept("fast")
    with pytest.raises(KvplanError):
        parse_accept("0.5")


@pytest.mark.parametrize("text, words", [
    ("2.0@32k,2.6@1k", "contexts must rise"),
    ("2.6@1k,2.0@1k", "contexts must rise"),
    ("0.5@1k", "is not in [1, 64]"),
    ("2.6@fast", "not a number of tokens"),
    ("2.6@1k@2k", "is not ACCEPT@CONTEXT"),
    ("@1k", "is not ACCEPT@CONTEXT"),
    ("2.6@1k,4.5@8k", "give --accept 4 or less"),     # 3 draft tokens verify at most 4 tokens, at any context
    # a stray comma leaves a point out: refused, not read as the one point before it (the context's "1k," once
    # parsed as 1k, the thousands separators being dropped)
    ("2.6@1k,", "has an empty point"),
    (",2.6@1k", "has an empty point"),
    ("2.6@1k,,2.0@32k", "has an empty point"),
    ("2.6@1k, ", "has an empty point"),
])
def test_bad_accept_profiles_are_one_line_errors(run_cli, text, words):
    r = run_cli("tpot", "-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp:3", "--accept", text)
    assert r.code == 2 and words in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_accept_at_interpolates_between_points_and_holds_beyond():
    from kvplan.calc.tpot import accept_at

    prof = parse_accept("2.6@1k,2.0@31k")
    # hand: at 16,000 tokens, halfway from 1,000 to 31,000: (2.6 + 2.0) / 2 = 2.3; at 11,000 a third of the way:
    # 2.6 - 0.6 / 3 = 2.4; below 1,000 the first value, past 31,000 the last
    got = accept_at(prof, [0, 1000, 11_000, 16_000, 31_000, 100_000])
    assert list(got) == pytest.approx([2.6, 2.6, 2.4, 2.3, 2.0, 2.0], abs=1e-12)


def test_tpot_takes_the_acceptance_at_its_contexts():
    # DeepSeek-R1, one MTP draft token, prompt 1,000 + decode 30,000: a profile of 1.85 at 1,000 and 1.25 at 31,000
    # accepts 1.85 at the start and 1.25 at the end; the effective TPOT at each end is (verify + draft) / that, so
    # against the flat 1.85 the end TPOT is 1.85 / 1.25 = 1.48x longer and the start the same
    s = scenario("deepseek-r1", "h200", mtp_layers=1).with_(tp=8, dp=None, prompt_tokens=1000, decode_tokens=30_000)
    flat = plan_tpot(s, TpotOptions(batch=4, spec_tokens=1, accept=parse_accept("1.85")))
    prof = plan_tpot(s, TpotOptions(batch=4, spec_tokens=1, accept=parse_accept("1.85@1k,1.25@31k")))
    assert prof.spec.accept_start.value == pytest.approx(1.85) and prof.spec.accept_end.value == pytest.approx(1.25)
    assert prof.spec.tpot_start.value == pytest.approx(flat.spec.tpot_start.value, rel=1e-12)
    assert prof.spec.tpot_end.value == pytest.approx(flat.spec.tpot_end.value * 1.85 / 1.25, rel=1e-12)
    assert prof.spec.gain_mean.value < flat.spec.gain_mean.value
    # the old (a0, slope) tuple reads as its points: 2.5 flat; points out of order or below 1 are refused
    assert TpotOptions(spec_tokens=2, accept=(2.5, 0.0)).accept == ((0.0, 2.5),)
    for bad in (((2000, 2.0), (1000, 2.5)), ((1000, 0.9), (2000, 1.5)), ()):
        with pytest.raises(KvplanError, match="rising contexts"):
            TpotOptions(spec_tokens=2, accept=bad)


def test_the_flat_acceptance_is_an_explained_assumption(run_cli):
    # no source gives DeepSeek's MTP head (or Llama-3.1-8B's EAGLE-3 head) at two contexts: --explain says the
    # published figure is held flat and cites heads measured falling with context; a profile says it is the user's
    r = run_cli("tpot", "-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp:3", "--explain")
    assert r.code == 0, r.err
    assert "Acceptance held flat in context" in r.out and "speculators/pull/684" in r.out
    r = run_cli("tpot", "-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp:3", "--accept", "2.6@1k,2.0@32k",
                "--explain")
    assert r.code == 0, r.err
    assert "Acceptance against context: 2.6 at 1,000 -> 2 at 32,000 tokens (--accept)" in r.out
    # JSON: the profile's points, as given (the published figure: one point at 0, flat)
    d = tpot_json(run_cli, "-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp:3", "--accept", "2.6@1k,2.0@32k")
    assert d["speculative"]["accept_profile"] == [{"context_tokens": 1000, "accept": 2.6},
                                                  {"context_tokens": 32000, "accept": 2.0}]
    d = tpot_json(run_cli, "-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp:3")
    assert d["speculative"]["accept_profile"] == [{"context_tokens": 0, "accept": 2.18}]


def test_table_cells_the_pool_cannot_hold_are_empty(run_cli):
    # DeepSeek-R1 fp8 at TP8 on H200: 45 requests of 31K tokens fit (the batch ceiling), but at 131,072 tokens a
    # request takes 61 x 576 x 131,072 B = 4.6 GB per GPU and the 46.21 GiB pool holds 10: batch 16 and up is empty.
    d = tpot_json(run_cli, "--kv-dtype", "fp8")
    rows = {r["batch"]: r for r in d["table"]}
    assert rows[8]["tpot_seconds_at_131072"] is not None
    assert rows[16]["tpot_seconds_at_131072"] is None and rows[45]["tpot_seconds_at_131072"] is None
    assert rows[45]["tpot_seconds_at_31000"] is not None


def test_acceptance_cannot_exceed_the_verified_tokens(run_cli):
    # k draft tokens verify at most k + 1 tokens per step
    r = run_cli("tpot", "--mtp-layers", "1", "--spec-tokens", "2", "--accept", "3.5")
    assert r.code == 2 and "give --accept 3 or less" in r.err
    ok = run_cli("tpot", "--mtp-layers", "1", "--spec-tokens", "2", "--accept", "3", "-f", "json")
    assert ok.code == 0, ok.err


def test_brief_shows_the_effective_speculative_tpot(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")   # the first line on one line
    # with a flat acceptance a, the effective TPOT is the verify step (draft + verify of K tokens, the same for
    # every a) divided by a: so a = 2.4 and a = 4 differ by exactly 4 / 2.4 in the brief's first figure
    def effective(a: str) -> float:
        r = run_cli("tpot", "--spec-tokens", "3", "--mtp-layers", "1", "--accept", a, "--brief")
        assert r.code == 0, r.err
        line = r.out.splitlines()[1]
        assert line.startswith("effective TPOT mean (speculative): ") and line.endswith(" ms"), line
        return float(line.split(": ")[1].removesuffix(" ms"))

    assert effective("2.4") / effective("4") == pytest.approx(4 / 2.4, rel=2e-3)   # 2 decimals printed
    assert "effective" not in run_cli("tpot", "--brief").out


def test_steady_contexts_are_the_midpoints_of_the_decode_whatever_the_batch():
    # 257 midpoints of 1,000..1,257: 1,000 + (i + 0.5) x 257 / 257 = 1,000.5, 1,001.5, ..., 1,256.5; mean 1,128.5
    ctx = costs.steady_contexts(1000, 257)
    assert len(ctx) == 257
    assert (ctx[0], ctx[1], ctx[-1]) == (1000.5, 1001.5, 1256.5)
    assert float(ctx.mean()) == pytest.approx(1128.5)


def test_one_steady_tpot_for_a_batch_in_tpot_pd_and_recommend():
    # A sliding window makes the average non-linear in context, so a different sample set would show: at prompt 100,
    # decode 100 and window 128, two contexts (125, 175) give a sliding-layer mean of (125 + 128) / 2 = 126.5 tokens,
    # the continuous mean 0.28 x 114 + 0.72 x 128 = 124.1. tpot, pd and recommend must all price the same one.
    import numpy as np

    from kvplan.calc import recommend
    from kvplan.calc.pd import PdOptions, _Model

    s = Scenario(model=load_model("gpt-oss-120b"), hardware=load_hardware("h100-sxm"), tp=1, dp=1,
                 prompt_tokens=100, decode_tokens=100)
    tpot = plan_tpot(s, TpotOptions(batch=2)).tpot_mean.value
    step = costs.step_model(s)
    mean_b, _ = step.steady_cache(100, 100)
    two_b, _ = step.request_cache(np.array([125.0, 175.0]))
    assert mean_b != pytest.approx(float(two_b.mean()), rel=1e-4)     # the test discriminates the sample set
    assert _Model(s, PdOptions()).tpot_by_batch(100, 100)[1] == pytest.approx(tpot, rel=1e-12)
    sb = recommend.slo_batch(s.with_(max_num_seqs=2), recommend.SloTargets(tpot=1.0), step)
    assert sb.batch == 2 and sb.decode_only == pytest.approx(tpot, rel=1e-12)   # the decode step alone at batch 2


def test_decode_gemms_are_counted_from_the_layer_kinds_and_the_moe_structure():
    # Llama-3.1-8B: 32 layers x (qkv, o_proj) + 32 dense MLPs x (gate_up, down) + the LM head = 64 + 64 + 1 = 129.
    assert costs.decode_gemms(load_model("llama-3.1-8b"), 0) == 129
    # gpt-oss-120b: 36 attention layers x 2 + 36 MoE layers x the router (no shared expert) + LM head = 109.
    assert costs.decode_gemms(load_model("gpt-oss-120b"), 36) == 109
    # DeepSeek-R1: 61 MLA layers x 5 (fused q/kv A, q_b, W_UK and W_UV bmm, o_proj) + 3 dense MLPs x 2 + 58 MoE
    # layers x (router + the shared expert's gate_up and down) + LM head = 305 + 6 + 174 + 1 = 486.
    assert costs.decode_gemms(load_model("deepseek-r1"), 58) == 486
    # DeepSeek-V3.2-Exp adds the indexer's wq_b, wk and weights_proj on all 61 layers: 486 + 61 x 3 = 669.
    assert costs.decode_gemms(load_model("deepseek-v3.2-exp"), 58) == 669
    # Qwen3-Next-80B-A3B: 36 Gated DeltaNet layers x 3 (in_proj_qkvz, in_proj_ba, out_proj) + 12 GQA layers x 2 + 48
    # MoE layers x (router + shared expert's 2) + LM head = 108 + 24 + 144 + 1 = 277.
    assert costs.decode_gemms(load_model("qwen3-next-80b-a3b"), 48) == 277
    # Mamba-2 (no preset): in_proj and out_proj
    from kvplan.specs.layers import Mamba2
    assert Mamba2(n_heads=8, head_dim=64, state_size=128).decode_gemms == 2


def test_each_dense_gemm_takes_at_least_the_floor(run_cli):
    # DeepSeek-R1 fp8 at TP8 on H200, batch 1, ideal bandwidth: the non-expert weights on one GPU stream in about
    # 0.5 ms, but its 486 GEMMs each take at least the generic Hopper floor of 10.3 us (sglang PR #5820, DeepGEMM
    # at TP8 decode shapes): 486 x 10.3 us = 5.0058 ms. A floor of 20 us doubles it; 0 leaves the byte time.
    args = ("-m", "deepseek-r1", "--kv-dtype", "fp8", "--tp", "8", "--batch", "1", "--prompt", "1000",
            "--decode", "0", "--shape", "cohort", *IDEAL)
    weights = tpot_json(run_cli, *args)["step_breakdown"]["start"]["weights_seconds"]
    assert weights == pytest.approx(486 * 10.3e-6)
    twenty = tpot_json(run_cli, *args, "--gemm-floor-us", "20")["step_breakdown"]["start"]["weights_seconds"]
    assert twenty == pytest.approx(486 * 20e-6)
    bytes_only = tpot_json(run_cli, *args, "--gemm-floor-us", "0")["step_breakdown"]["start"]["weights_seconds"]
    assert 0.3e-3 < bytes_only < 0.8e-3
    # the dense test above (Llama-3.1-8B at TP1) keeps the floor: 129 x 10.3 us = 1.33 ms is under its 4.79 ms read


def test_calibration_holds_a_floor_bound_step_constant():
    # gpt-oss-120b at TP8 on H100: the 109 dense GEMMs sit on their floor (109 x 10.3 us = 1.12 ms against a few
    # hundred us of bytes), so the fit's hbm comes from the experts and the KV, and the floor's time is kept whole.
    s = Scenario(model=load_model("gpt-oss-120b"), hardware=load_hardware("h100-sxm"), tp=8)
    truth = costs.step_factors(s.hardware, hbm=0.7, overhead_us_per_step=800.0)
    step = costs.step_model(s, truth)
    assert step.gemms * step.gemm_floor_s > step.dense_bytes / step.bw
    pts = []
    for b, ctx in ((1, 1000), (4, 8000), (16, 20000), (64, 2000), (8, 60000)):
        nbytes, nflops = step.request_cache(float(ctx))
        pts.append(calibrate.Point(b, ctx, float(step.step(b, b * nbytes, b * nflops)["total"])))
    fit = calibrate.fit(s, tuple(pts), "synthetic", costs.step_factors(s.hardware))
    assert fit.hbm == pytest.approx(0.7, rel=1e-6)
    assert fit.overhead_us_per_step == pytest.approx(800.0, rel=1e-6)


def test_decode_mean_is_the_trapezoid_rule():
    from kvplan.calc.tpot import _mean_over

    # steps of 1, 3 and 2 s at t = 0, 1 and 3: area (1 + 3) / 2 x 1 + (3 + 2) / 2 x 2 = 2 + 5 = 7 over 3 steps
    assert _mean_over([1.0, 3.0, 2.0], [0.0, 1.0, 3.0], 3) == pytest.approx(7 / 3, rel=1e-15)
    assert _mean_over([4.0], [0.0], 0) == 4.0   # no decode: the one step


def test_upcast_moe_latency_is_priced_per_moe_layer_only_for_upcast_experts():
    # gpt-oss-20b (24 MoE layers, MXFP4 experts) on one H100, which has no FP4 matrix cores: vLLM's default MXFP4
    # path there (triton_kernels matmul_ogs) adds the preset's upcast_moe_us, 71 us, per MoE layer:
    # 24 x 71 us = 1.704 ms per step, whatever the batch; --upcast-moe-us 0 (Marlin) takes it out.
    def step(model, gpu, **factors):
        s = Scenario(model=load_model(model), hardware=load_hardware(gpu), tp=1, dp=1)
        return costs.step_model(s, costs.step_factors(s.hardware, **factors))

    default, marlin = step("gpt-oss-20b", "h100-sxm"), step("gpt-oss-20b", "h100-sxm", upcast_moe_us=0.0)
    assert default.moe_latency_s == pytest.approx(24 * 71e-6)
    assert marlin.moe_latency_s == 0.0
    for b in (1, 8):
        with_it, without = default.step(b, 0.0, 0.0), marlin.step(b, 0.0, 0.0)
        assert with_it["moe"] - without["moe"] == pytest.approx(1.704e-3)
        assert with_it["total"] - without["total"] == pytest.approx(1.704e-3)
    assert default.step(0, 0.0, 0.0)["moe"] == 0.0          # no token, no MoE kernel
    # B200 multiplies MXFP4 natively: no upcast, no latency, even if one is given
    assert step("gpt-oss-20b", "b200", upcast_moe_us=79.0).moe_latency_s == 0.0
    # a dense model has no MoE layer: 0 x 71 us
    assert step("llama-3.1-8b", "h100-sxm").moe_latency_s == 0.0
    # only MoE layers count: DeepSeek-R1 (61 layers, the first 3 dense) with MXFP4 experts at TP8 on H100:
    # 58 x 71 us = 4.118 ms (61 x 71 us would be 4.331)
    s = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h100-sxm"), tp=8, weight_dtype="mxfp4")
    assert costs.step_model(s).moe_latency_s == pytest.approx(58 * 71e-6)


def test_upcast_moe_us_flag_reaches_the_step(run_cli):
    base = ("-m", "gpt-oss-20b", "-g", "h100-sxm", "--tp", "1", "--batch", "1", "--prompt", "1000",
            "--decode", "0", "--shape", "cohort")
    moe = tpot_json(run_cli, *base)["step_breakdown"]["start"]["moe_seconds"]
    off = tpot_json(run_cli, *base, "--upcast-moe-us", "0")["step_breakdown"]["start"]["moe_seconds"]
    ten = tpot_json(run_cli, *base, "--upcast-moe-us", "10")["step_breakdown"]["start"]["moe_seconds"]
    assert moe - off == pytest.approx(24 * 71e-6) and ten - off == pytest.approx(24 * 10e-6)


def test_speculative_mtp_takes_the_published_acceptance_lengths():
    from kvplan.calc.tpot import parse_speculative

    # DeepSeek's MTP module: "80% to 90%" acceptance of the second token (ISCA'25 section 2.3.3): 1 + 0.85 = 1.85;
    # SGLang's MTP blog (lmsys.org/blog/2025-07-17-mtp): accept length 2.18 with 3 draft tokens, 2.44 with 4
    assert parse_speculative("mtp")[:2] == (1, 1.85)
    assert parse_speculative("MTP:3")[:2] == (3, 2.18)
    assert parse_speculative("mtp:4")[:2] == (4, 2.44)
    for bad in ("eagle", "mtp:2", "mtp:x"):
        with pytest.raises(KvplanError):
            parse_speculative(bad)


def test_speculative_mtp_gain_on_deepseek_r1_matches_the_published_speedups(run_cli):
    # DeepSeek-R1 with one MTP draft token at batch 1: published TPOT speedups 1.63x (vLLM PR #12755, QPS 1, 81-82%
    # acceptance), 1.76x (SGLang PR #3582, batch 1) and "1.8x" (DeepSeek, ISCA'25 section 2.3.3). kvplan: the verify
    # step at 2 tokens plus one MTP layer's step, over 1.85 accepted tokens
    d = tpot_json(run_cli, "-m", "deepseek-r1", "-g", "h200", "--tp", "8", "--batch", "1", "--prompt", "1000",
                  "--decode", "1000", "--speculative", "mtp")
    sp = d["speculative"]
    assert sp["spec_tokens"] == 1 and sp["accept_start"] == 1.85 == sp["accept_end"]
    assert 1.55 <= sp["gain_mean"] <= 1.85
    # the user's --accept wins over the published figure; K stays the method's
    mine = tpot_json(run_cli, "-m", "deepseek-r1", "-g", "h200", "--tp", "8", "--batch", "1", "--prompt", "1000",
                     "--decode", "1000", "--speculative", "mtp:3", "--accept", "2.6-0.00001/token")["speculative"]
    assert mine["spec_tokens"] == 3 and mine["accept_start"] == pytest.approx(2.6 - 0.00001 * 1000)


def test_speculative_refusals_are_one_line(run_cli):
    cases = ((("-m", "glm-4.5", "--speculative", "mtp"), "not a DeepSeek model with MTP layers"),
             (("-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp:2"), "no published acceptance length"),
             (("-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp", "--spec-tokens", "1"),
              "--speculative and --spec-tokens both given"),
             # another drafter than the head whose acceptance was published: that figure is not its own
             (("-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp", "--draft-model", "llama-3.1-8b"),
              "not --draft-model llama-3.1-8b's"),
             (("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--speculative", "eagle3:3", "--draft-model",
               "llama-3.1-8b"), "the EAGLE-3 head's, not --draft-model llama-3.1-8b's"))
    for args, words in cases:
        r = run_cli("tpot", *args)
        assert r.code == 2 and words in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_speculative_with_a_draft_model_takes_the_given_acceptance(run_cli):
    # with --accept the acceptance is the user's, not the head's published figure: the draft model is priced
    r = run_cli("tpot", "-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp", "--draft-model", "llama-3.1-8b",
                "--accept", "1.5", "-f", "json")
    assert r.code == 0, r.err


def test_speculative_eagle3_takes_the_published_chain_acceptance():
    from kvplan.calc.tpot import parse_speculative

    # vllm-project/vllm#26191 (Llama-3.1-8B-Instruct + yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, chain of 7, MT-bench,
    # temperature 0): acceptance at token 0..6 = 0.74 0.54 0.41 0.31 0.23 0.17 0.13; a greedy chain of K accepts
    # 1 + the first K: K=1 1.74, K=3 1 + 0.74 + 0.54 + 0.41 = 2.69, K=7 3.53 = the mean acceptance length
    # (1 + 12,208 accepted / 4,816 drafts = 3.535)
    assert parse_speculative("eagle3")[:2] == (1, 1.74)
    assert parse_speculative("EAGLE3:3")[:2] == (3, 2.69)
    assert parse_speculative("eagle3:7")[:2] == (7, 3.53)
    assert parse_speculative("eagle3:2")[3] == "eagle3" and parse_speculative("mtp")[3] == "mtp"
    for bad in ("eagle3:8", "eagle3:0", "eagle"):
        with pytest.raises(KvplanError):
            parse_speculative(bad)


def test_speculative_eagle3_is_one_draft_layer_at_the_published_acceptance(run_cli):
    # the EAGLE-3 head is one Llama decoder layer (its config: 1 layer, hidden 4,096, 32 / 8 heads): kvplan prices
    # --speculative eagle3:3 exactly as --spec-tokens 3 --mtp-layers 1 --accept 2.69
    base = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--batch", "4", "--prompt", "1000", "--decode", "1000")
    eagle = tpot_json(run_cli, *base, "--speculative", "eagle3:3")["speculative"]
    by_hand = tpot_json(run_cli, *base, "--spec-tokens", "3", "--mtp-layers", "1", "--accept", "2.69")["speculative"]
    assert eagle["spec_tokens"] == 3 and eagle["accept_start"] == 2.69 == eagle["accept_end"]
    assert eagle["tpot_seconds_mean"] == pytest.approx(by_hand["tpot_seconds_mean"])
    # one layer's KV per request for the draft: 2 x 8 KV heads x 128 x 2 B x 2,000 tokens = 8,192,000 B
    assert eagle["draft_kv_bytes_per_request"] == 8_192_000
    r = run_cli("tpot", "-m", "deepseek-r1", "-g", "h200", "--speculative", "eagle3:3")
    assert r.code == 2 and "EAGLE-3 head" in r.err and len(r.err.strip().splitlines()) == 1, r.err
