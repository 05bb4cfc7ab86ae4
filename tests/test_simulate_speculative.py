"""``kvplan simulate --speculative mtp[:K]``: every decode step priced by the one speculative price
(``costs.StepModel.speculative_step``, tpot's) over the batch's mean acceptance length, against the token-by-token
references (``tests/sim_reference.py``'s rule 8), by hand for one step, and against published speed-ups."""

from __future__ import annotations

import pytest
import sim_reference as ref  # tests/ is on sys.path (rootdir-less test modules)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_reference import BASE, assert_same, assert_same_v1, small_work

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario

R1 = dict(BASE, mtp_layers="1")     # DeepSeek-R1 with its one MTP layer counted (what --speculative sets)
# acceptance lengths: flat (SGLang's MTP blog, DeepSeek's ISCA'25 figure) and falling with context, to 1 at 800 and
# at 160 tokens (steep: most requests decode at 1 in the mixed steps of vLLM V1)
SPECS = {"flat mtp:3": (3, 2.18, 0.0), "falling": (3, 2.6, 0.002), "mtp:1": (1, 1.85, 0.0), "steep": (3, 2.6, 0.01),
         # profiles (--accept A@CONTEXT,...): falling over three points (flat below 200 and past 1,200 tokens, the
         # small traces' contexts run 50 .. 1,500), and rising (a run's batch acceptance grows a step)
         "profile": (3, ((200.0, 2.6), (600.0, 2.0), (1200.0, 1.3))), "rising": (3, ((100.0, 1.6), (900.0, 2.4))),
         # a sharp fall to 1 at a point between two contexts (150.5 tokens): a run must stop before it
         "kink": (3, ((0.0, 3.5), (150.5, 1.0)))}


@pytest.mark.parametrize("policy", ["recompute", "swap"])
@pytest.mark.parametrize("spec", sorted(SPECS))
def test_neutral_engine_equals_the_reference(policy, spec):
    s = build_scenario(**R1, kv_pool="400MiB")
    work = small_work()
    o = sim.SimOptions(policy=policy, speculative=SPECS[spec])
    fast = sim.simulate(s, work, o)
    r = ref.run(s, work, policy, "newest", speculative=SPECS[spec])
    assert_same(fast, r)
    assert fast.preemptions.sum() > 0


def test_the_step_by_step_mode_equals_the_reference():
    # SimOptions(reference=True): each step priced by Prices.step (the mean of max(1, a0 - slope x) over the batch)
    s = build_scenario(**R1, kv_pool="400MiB")
    work = small_work()
    fast = sim.simulate(s, work, sim.SimOptions(reference=True, speculative=SPECS["steep"]))
    assert_same(fast, ref.run(s, work, speculative=SPECS["steep"]))


def test_fp8_kv_verify_compute_bound_equals_the_reference():
    # FP8 KV: the verify step's attention over K + 1 tokens outlasts its cache reads, so the closed form's
    # max(u, (K+1) v) and max(u, v) cross at different steps
    s = build_scenario(**dict(R1, kv_dtype="fp8"), kv_pool="200MiB")
    work = small_work()
    fast = sim.simulate(s, work, sim.SimOptions(speculative=SPECS["flat mtp:3"]))
    assert_same(fast, ref.run(s, work, speculative=SPECS["flat mtp:3"]))


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_vllm_v1_equals_the_reference(spec):
    s = build_scenario(**dict(R1, engine="vllm"), kv_pool="400MiB", max_num_batched_tokens="128")
    work = small_work()
    fast = sim.simulate(s, work, sim.SimOptions(max_batch=64, speculative=SPECS[spec]))
    r = ref.run_vllm(s, work, "newest", max_batch=64, speculative=SPECS[spec])
    assert_same_v1(fast, r)
    assert fast.mixed_steps > 0 and fast.preemptions.sum() > 0


@pytest.mark.parametrize("kv_dtype", ["auto", "fp8"])
def test_one_step_by_hand(kv_dtype):
    # One request, prompt 1,000, 2 output tokens: the prefill gives the first, one decode step the second, reading
    # the 1,001-token cache. With --speculative mtp:3 at a flat 2.18 (SGLang's MTP blog) that step is the target's
    # verify step (its 61 layers) over 3 + 1 tokens plus 3 draft steps of the MTP layer, each the plain step's time
    # per layer (its fixed overhead once, the per-layer overhead for each), over 2.18 accepted tokens. The three
    # step prices come from StepModel.step (the one cost model); the sum and the division are written out here. With
    # FP8 KV the verify step's attention over 4 tokens outlasts its cache reads (it is compute-bound where one token
    # is not): the K + 1 tokens show.
    s = build_scenario(**dict(R1, prompt="1000", decode="2", tp="8", dp="1", kv_dtype=kv_dtype))
    sm = costs.step_model(s, speculative=True)    # the target's 61 layers: the MTP layer is the drafter
    cb, cf = (float(v) for v in sm.request_cache(1001.0))
    if kv_dtype == "fp8":
        assert 3 * cf / sm.attention_flops_s > cb / sm.bw
    plain = float(sm.step(1, cb, cf)["total"])
    verify = float(sm.step(1, cb, cf, tokens_per_request=4)["total"])
    opl = sm.factors.value("overhead_us_per_layer") * 1e-6
    layers = sm.layers
    assert layers == 61 and s.sized_model.num_layers == 62   # the MTP layer's KV is in the pool, not in the verify
    draft = 3 * 1 * ((plain - sm.overhead_s) / layers + opl)
    want = (verify + draft) / 2.18
    work = wl.build(requests=1, seed=0, prompt=wl.parse_dist("fixed:1000", "p"),
                    output=wl.parse_dist("fixed:2", "o"), max_len=2000, users=1)
    run = sim.simulate(s, work, sim.SimOptions(speculative=(3, 2.18, 0.0)))
    assert float(run.finish[0] - run.first_token[0]) == pytest.approx(want, rel=1e-12)
    plain_run = sim.simulate(s.with_(mtp_layers=0), work, sim.SimOptions())
    assert float(plain_run.finish[0] - plain_run.first_token[0]) == pytest.approx(plain, rel=1e-12)
    assert want < plain                       # it pays at batch 1


def sim_json(run_cli, *args):
    import json

    r = run_cli("simulate", "-m", "deepseek-r1", "-g", "h200", "--tp", "8", "-f", "json", *args)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_speedup_at_batch_1_matches_the_published_ones(run_cli):
    # DeepSeek-R1 with one MTP draft token, one user at a time (batch 1): published TPOT speed-ups 1.63x (vLLM PR
    # #12755, QPS 1, 81-82% acceptance), 1.76x (SGLang PR #3582, batch 1), "1.8x" (DeepSeek, ISCA'25 section 2.3.3)
    args = ("--users", "1", "--requests", "3", "--prompt", "1000", "--decode", "1000")
    plain = sim_json(run_cli, *args)
    spec = sim_json(run_cli, *args, "--speculative", "mtp")
    gain = plain["tpot_seconds_mean"] / spec["tpot_seconds_mean"]
    assert 1.55 <= gain <= 1.85
    # the same price as tpot's: one request decoding alone is tpot's batch 1 over the same contexts
    tp = run_cli("tpot", "-m", "deepseek-r1", "-g", "h200", "--tp", "8", "--batch", "1", "--prompt", "1000",
                 "--decode", "1000", "--speculative", "mtp", "-f", "json")
    import json

    tpot_spec = json.loads(tp.out)["speculative"]
    assert spec["tpot_seconds_mean"] == pytest.approx(tpot_spec["tpot_seconds_mean"], rel=1e-3)
    assert gain == pytest.approx(tpot_spec["gain_mean"], rel=1e-3)


def test_the_json_carries_the_speculative_setting_as_numbers(run_cli):
    # K and the acceptance profile as given (1.8 at 1,000 tokens, 1.5 at 32,000), not only the notes' words; the
    # published figure's source when --accept is not given (DeepSeek-R1's MTP head at K = 1: 1.85)
    args = ("--users", "1", "--requests", "2", "--prompt", "1000", "--decode", "100", "--speculative", "mtp")
    given = sim_json(run_cli, *args, "--accept", "1.8@1k,1.5@32k")["speculative"]
    assert given == {"spec_tokens": 1, "accept_source": None,
                     "accept_profile": [{"context_tokens": 1000, "accept": 1.8},
                                        {"context_tokens": 32000, "accept": 1.5}]}
    published = sim_json(run_cli, *args)["speculative"]
    assert published["accept_profile"] == [{"context_tokens": 0, "accept": 1.85}] and published["accept_source"]
    assert "speculative" not in sim_json(run_cli, *args[:-2])


def test_the_gain_shrinks_with_the_batch_and_the_falling_acceptance(run_cli):
    # vLLM PR #12755: 1.63x at QPS 1 but 1.18x at QPS 2 - the verify step's K + 1 tokens cost more as the batch
    # grows; and an acceptance falling with context (--accept A-SLOPE/token) gives less than the flat one
    args = ("--users", "32", "--requests", "64", "--prompt", "1000", "--decode", "2000")
    plain = sim_json(run_cli, *args)["tpot_seconds_mean"]
    flat = sim_json(run_cli, *args, "--speculative", "mtp:3")["tpot_seconds_mean"]
    falling = sim_json(run_cli, *args, "--speculative", "mtp:3", "--accept",
                       "2.18-0.0004/token")["tpot_seconds_mean"]
    one = sim_json(run_cli, "--users", "1", "--requests", "2", "--prompt", "1000", "--decode", "2000")
    one_spec = sim_json(run_cli, "--users", "1", "--requests", "2", "--prompt", "1000", "--decode", "2000",
                        "--speculative", "mtp:3")
    assert 1 < plain / flat < one["tpot_seconds_mean"] / one_spec["tpot_seconds_mean"]
    assert flat < falling


def test_refusals_are_one_line_and_tpots(run_cli):
    cases = ((("-m", "glm-4.5", "--speculative", "mtp"), "not a DeepSeek model with MTP layers"),
             (("-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp:2"), "no published acceptance length"),
             (("-m", "deepseek-r1", "-g", "h200", "--accept", "2"), "--accept is the acceptance of --speculative"),
             (("-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp", "--accept", "2.5"), "not in [1, 2]"),
             (("-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp", "--accept", "1.5@1k,2.5@8k"),
              "not in [1, 2]"),
             (("-m", "deepseek-r1", "-g", "h200", "--speculative", "mtp:3", "--accept", "2.0@32k,2.6@1k"),
              "contexts must rise"))
    for args, words in cases:
        r = run_cli("simulate", *args, "--requests", "2")
        assert r.code == 2 and words in r.err and len(r.err.strip().splitlines()) == 1, r.err


@pytest.mark.parametrize("spec", ["flat mtp:3", "falling", "profile"])
def test_sglang_scheduler_equals_its_reference(spec):
    # SGLang's own scheduler (DeepSeek-R1 over 8 attention-DP ranks, its retract_decode) with the same rule 8
    import sim_reference_sglang as ref_sg
    from test_sim_sglang import R1_DP, work
    from test_sim_sglang import assert_same as assert_same_sglang

    s = build_scenario(**dict(R1_DP, engine="sglang", mtp_layers="1"), kv_pool="600MiB")
    w = work(100, "uniform:200,3000", "uniform:600,1500", rate=30)
    fast = sim.simulate(s, w, sim.SimOptions(speculative=SPECS[spec]))
    assert_same_sglang(fast, ref_sg.run(s, w, speculative=SPECS[spec]))
    assert fast.preemptions.sum() > 0


@pytest.mark.parametrize(("alpha", "beta", "t0", "t1"), [(78.0, 0.06, 0, 1000), (72.0, 6e-4, 5, 4000),
                                                         (5.0, 0.004, 0, 999), (3.0, 0.5, 0, 4),
                                                         (40.0, 1.0, 0, 39), (10.0, -0.01, 0, 1000),
                                                         (64.0, -2e-3, 7, 5000)])
def test_the_closed_form_inverse_sums_equal_the_sums_written_out(alpha, beta, t0, t1):
    # sum_t 1 / (alpha - beta t) over a run: the batch's acceptance falling by beta a step. Written out term by term
    # here (math.fsum); the engine's digamma differences within 1e-12
    import math

    from kvplan.calc.sim.steps import _inverse_sum, _ratio_sum

    want = math.fsum(1.0 / (alpha - beta * t) for t in range(t0, t1))
    assert _inverse_sum(alpha, beta, t0, t1) == pytest.approx(want, rel=1e-12)
    # (p + q t) / (alpha - beta t) for a step time growing q a step
    want = math.fsum((2.0 + 0.01 * t) / (alpha - beta * t) for t in range(t0, t1))
    assert _ratio_sum(2.0, 0.01, alpha, beta, t0, t1) == pytest.approx(want, rel=1e-12)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), requests=st.integers(1, 20), rate=st.sampled_from([2.0, 20.0, 200.0]),
       spec=st.sampled_from(sorted(SPECS)), policy=st.sampled_from(["recompute", "swap"]),
       pool=st.sampled_from(["150MiB", "400MiB"]), engine=st.sampled_from(["neutral", "vllm", "vllm==0.8.5"]))
def test_random_small_traces_equal_the_references(seed, requests, rate, spec, policy, pool, engine):
    # (vllm==0.8.5: V1 whose requests hold K speculative slots, not 2K: the reference's rule 9)
    if engine != "neutral" and policy == "swap":
        policy = "recompute"             # vLLM V1 recomputes only
    s = build_scenario(**dict(R1, engine=engine), kv_pool=pool)
    work = small_work(seed=seed, requests=requests, rate=rate)
    fast = sim.simulate(s, work, sim.SimOptions(policy=policy, speculative=SPECS[spec]))
    if engine != "neutral":
        assert_same_v1(fast, ref.run_vllm(s, work, "newest", speculative=SPECS[spec]))
    else:
        assert_same(fast, ref.run(s, work, policy, "newest", speculative=SPECS[spec]))


def test_one_step_by_hand_at_the_profiles_acceptance():
    # The one-step run above with --accept 2.6@1k,1.6@2k: the decode step reads the 1,001-token cache, where the
    # profile accepts 2.6 - (2.6 - 1.6) x 1 / 1,000 = 2.599 tokens a verify step (linear between its points)
    s = build_scenario(**dict(R1, prompt="1000", decode="2", tp="8", dp="1"))
    sm = costs.step_model(s, speculative=True)
    cb, cf = (float(v) for v in sm.request_cache(1001.0))
    total = float(sm.speculative_step(1, cb, cf, 3, 1)["total"])
    work = wl.build(requests=1, seed=0, prompt=wl.parse_dist("fixed:1000", "p"),
                    output=wl.parse_dist("fixed:2", "o"), max_len=2000, users=1)
    run = sim.simulate(s, work, sim.SimOptions(speculative=(3, ((1000.0, 2.6), (2000.0, 1.6)))))
    assert float(run.finish[0] - run.first_token[0]) == pytest.approx(total / 2.599, rel=1e-12)


def test_a_falling_profile_slows_the_decode_by_its_acceptance(run_cli):
    # one user, prompt 1,000 + 2,000 decoded: a profile flat at the published 2.18 (mtp:3) equals the flat run; one
    # falling to 1.09 (half) by 3,000 tokens is slower, and one holding 2.18 to 1,000 then falling is between
    args = ("--users", "1", "--requests", "2", "--prompt", "1000", "--decode", "2000", "--speculative", "mtp:3")
    flat = sim_json(run_cli, *args)["tpot_seconds_mean"]
    same = sim_json(run_cli, *args, "--accept", "2.18@1k,2.18@3k")["tpot_seconds_mean"]
    half = sim_json(run_cli, *args, "--accept", "2.18@1k,1.09@3k")["tpot_seconds_mean"]
    late = sim_json(run_cli, *args, "--accept", "2.18@2k,1.09@3k")["tpot_seconds_mean"]
    assert same == pytest.approx(flat, rel=1e-12)
    assert flat < late < half
    # --explain: the published figure held flat is an assumption (with the heads measured falling); a profile too
    r = run_cli("simulate", "-m", "deepseek-r1", "-g", "h200", "--tp", "8", *args, "--explain")
    assert r.code == 0 and "Acceptance held flat in context" in r.out and "issues/47602" in r.out, r.err
    r = run_cli("simulate", "-m", "deepseek-r1", "-g", "h200", "--tp", "8", *args, "--accept", "2.18@2k,1.09@3k",
                "--explain")
    assert r.code == 0 and "Acceptance against context: 2.18 at 2,000 -> 1.09 at 3,000 tokens" in r.out, r.err


def test_the_draft_layers_kv_shares_the_pool(run_cli):
    # vLLM V1 allocates the drafter's attention layers in the same KV pool as the target's (v0.23.0
    # vllm/v1/spec_decode/llm_base_proposer.py load_model: the draft layers are the attention layers the draft
    # model adds, gpu_model_runner.get_kv_cache_spec gives each a spec): one more layer's bytes per token.
    # DeepSeek-R1's MTP layer: MLA 576 x 2 B = 1,152 B a token a layer; a 64-token block 64 x 61 x 1,152 = 4,497,408
    # B plain, 64 x 62 x 1,152 = 4,571,136 B with --speculative
    args = ("--users", "1", "--requests", "2", "--prompt", "1000", "--decode", "100")
    assert sim_json(run_cli, *args)["replica"]["block_bytes"] == 4_497_408
    assert sim_json(run_cli, *args, "--speculative", "mtp:3")["replica"]["block_bytes"] == 4_571_136
    # Llama-3.1-8B's EAGLE-3 head (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B: one decoder layer, 8 KV heads x 128):
    # 2 x 8 x 128 x 2 B = 4,096 B a token a layer, 32 layers plain and 33 with the head
    import json

    def llama(*extra):
        r = run_cli("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "-f", "json", *args, *extra)
        assert r.code == 0, r.err
        rep = json.loads(r.out)["replica"]
        return rep["block_bytes"] / rep["block_tokens"]
    assert llama() == 32 * 4096 and llama("--speculative", "eagle3:3") == 33 * 4096


@pytest.mark.parametrize("model, pool", [("deepseek-v3.2-exp", "400MiB"), ("gpt-oss-120b", "30MiB")])
def test_vllm_v1_speculative_slots_off_the_fast_path_equal_the_reference(model, pool):
    # vLLM V1 holds blocks for each running request's context + 2K slots (the reference's rule 9): a top-k capped
    # model (DeepSeek-V3.2's DSA: the closed-form overflow step of the vectorized path) and one with sliding windows
    # (gpt-oss: the bisection), both preempting
    s = build_scenario(**dict(BASE, model=model, engine="vllm", mtp_layers="1"), kv_pool=pool,
                       max_num_batched_tokens="128")
    work = small_work()
    fast = sim.simulate(s, work, sim.SimOptions(max_batch=64, speculative=SPECS["flat mtp:3"]))
    assert_same_v1(fast, ref.run_vllm(s, work, "newest", max_batch=64, speculative=SPECS["flat mtp:3"]))
    assert fast.preemptions.sum() > 0
