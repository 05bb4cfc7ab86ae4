"""kvplan simulate: hand-checkable runs, the event-driven engine against a step-by-step reference, the workload's
distributions and presets, the JSON contract, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_json_contract import numeric_paths  # tests/ is on sys.path (rootdir-less test modules)

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario

BASE = dict(model=None, hardware="h200", nodes="1", gpus=None, tp=None, pp="1", dp=None, ep=None, kv_dtype="auto",
            weight_dtype=None, engine="neutral", prompt="1k", decode="30k", mtp_layers=None, max_model_len=None,
            block_size=None, host_link_gbs=None, presets_dir=None)

# Llama-3.1-8B, BF16 KV, TP 1: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B per token; with
# 16-token blocks one block of every layer is 16 x 131,072 = 2,097,152 B = 2 MiB.
LLAMA = dict(BASE, model="llama-3.1-8b", hardware="h100-sxm", tp="1", dp="1", block_size="16")
BLOCK_BYTES = 2 * 32 * 8 * 128 * 2 * 16


def scenario(**changes):
    return build_scenario(**{**BASE, **changes})


def fixed_work(n, prompt, output, users=None, rate=None, seed=0):
    return wl.build(requests=n, seed=seed, prompt=wl.parse_dist(f"fixed:{prompt}", "p"),
                    output=wl.parse_dist(f"fixed:{output}", "o"), max_len=200_000, users=users, rate=rate)


# --- one request, no contention -------------------------------------------------------------------------------
def test_single_request_ttft_is_the_prefill_and_decode_is_the_sum_of_its_steps():
    s = scenario(kv_dtype="fp8")
    P, OUT = 1000, 3001
    run = sim.simulate(s, fixed_work(1, P, OUT, users=1))
    sm = costs.step_model(s)
    chunk = int(s.engine_adapter.batch_limits_for(s)[0].value)
    # TTFT: the prompt's prefill alone (nothing queued ahead: queueing delay 0)
    assert run.admitted[0] == 0
    assert run.first_token[0] == pytest.approx(sm.prefill_seconds(P, 0, chunk), rel=1e-12)
    # the decode: O - 1 = 3,000 steps; step j reads P + j cached tokens (j = 1 .. 3,000), each priced alone
    assert run.decode_steps == OUT - 1
    by_hand = 0.0
    for j in range(1, OUT):
        b, f = sm.request_cache(float(P + j))
        by_hand += float(sm.step(1, b, f)["total"])
    assert run.finish[0] - run.first_token[0] == pytest.approx(by_hand, rel=1e-9)
    assert run.preemptions.sum() == 0 and run.recomputed.sum() == 0


# --- a pool that holds exactly N requests ---------------------------------------------------------------------
# Each request: 1,000 prompt + 1,001 output tokens, so its longest cache is 1,000 + 1,001 - 1 = 2,000 tokens =
# 2,000 / 16 = 125 blocks. A pool of 4 x 125 = 500 blocks = 500 x 2 MiB = 1,000 MiB holds exactly 4 of them.
POOL_4 = "1000MiB"


def pool_run(users, policy="recompute", max_batch=None, victim="newest"):
    s = build_scenario(**LLAMA, kv_pool=POOL_4)
    return sim.simulate(s, fixed_work(users, 1000, 1001, users=users),
                        sim.SimOptions(policy=policy, victim=victim, max_batch=max_batch))


def test_the_pool_is_block_rounded_and_holds_exactly_four():
    run = pool_run(4)
    assert run.setup.block_bytes == BLOCK_BYTES
    assert run.setup.total_blocks == 500          # 1,000 MiB / 2 MiB
    assert run.setup.watermark_blocks == 5        # int(0.01 x 500)
    assert run.preemptions.sum() == 0
    assert run.peak_blocks_used == 500            # all four at 125 blocks at the end
    assert (run.peak_bytes == 125 * BLOCK_BYTES).all()


def test_the_fifth_request_waits_under_a_batch_cap():
    run = pool_run(5, max_batch=4)
    assert run.preemptions.sum() == 0
    first_four_done = run.finish[:4].min()
    assert run.admitted[4] == pytest.approx(first_four_done, rel=1e-12)   # admitted when the first one finishes


def test_the_fifth_request_preempts_by_the_policy():
    # Five admitted at once (5 x ceil(1,000 / 16) = 5 x 63 = 315 blocks leave 185 >= the 5-block watermark);
    # growing together they need 5 x ceil(c / 16) > 500 blocks once c > 1,600 tokens: someone is preempted.
    rc = pool_run(5, "recompute")
    sw = pool_run(5, "swap")
    assert rc.preemptions.sum() >= 1 and rc.recomputed.sum() > 0 and rc.swap_outs.sum() == 0
    assert sw.preemptions.sum() >= 1 and sw.recomputed.sum() == 0
    assert sw.swap_outs.sum() == sw.swap_ins.sum() == sw.preemptions.sum()
    # the newest (the fifth admitted) is the victim; it is preempted at a cache of at least 1,600 tokens
    assert rc.preemptions[4] >= 1
    assert rc.recomputed[4] >= 1600
    for run in (rc, sw):   # conservation: every request finishes, every token generated once
        assert np.isfinite(run.finish).all()
        assert int(run.outputs.sum()) == 5 * 1001


def test_no_admission_in_the_instant_of_a_preemption(monkeypatch):
    # With no watermark, the preemption above leaves 500 - 400 = 100 blocks free, exactly the fifth's cache (1,600
    # tokens = 100 blocks): admitted in that instant it would take them back and the next step would preempt it again,
    # forever. vLLM V1 schedules no waiting request in a step that preempted: the step runs first (the four take 4
    # more blocks), and the fifth waits until the four finish. A short event cap turns the loop into a failure.
    monkeypatch.setattr(sim, "MAX_EVENTS", 2_000)
    s = build_scenario(**LLAMA, kv_pool=POOL_4)
    run = sim.simulate(s, fixed_work(5, 1000, 1001, users=5), sim.SimOptions(watermark=0.0))
    assert run.setup.watermark_blocks == 0
    assert list(run.preemptions) == [0, 0, 0, 0, 1]
    assert run.recomputed[4] == 1600
    assert run.finish[4] > run.finish[:4].max()    # back only after the four finished


def test_one_request_in_five_is_preempted_once_and_the_metrics_say_so():
    # The run above by hand: the five grow together from 1,000 tokens; the step that would make each cache 1,601
    # tokens needs 5 x ceil(1,601 / 16) = 505 > 500 blocks, so the newest (the fifth) goes at a cache of 1,600 tokens
    # (100 blocks). The other four then fit to their end (4 x 125 = 500 blocks) and finish at the same step; the
    # fifth comes back alone. One preemption, one request of five preempted: a share of 1 / 5 = 0.2.
    for policy in ("recompute", "swap"):
        s = build_scenario(**LLAMA, kv_pool=POOL_4)
        plan = sim.plan_simulate(s, fixed_work(5, 1000, 1001, users=5), sim.SimOptions(policy=policy))
        m = plan.metrics
        assert list(plan.run.preemptions) == [0, 0, 0, 0, 1]
        assert m["preemptions"].value == 1
        assert m["preempted_share"].value == pytest.approx(0.2, rel=1e-12)
        if policy == "recompute":   # its 1,600 cached tokens re-prefilled, of 5 x 1,001 generated
            assert m["recomputed_tokens"].value == 1600
            assert m["recompute_rate"].value == pytest.approx(1600 / 5005, rel=1e-12)
            assert m["swap_out_count"].value == 0
        else:                       # swapped out once and back once, nothing recomputed
            assert m["swap_out_count"].value == m["swap_in_count"].value == 1
            assert m["recomputed_tokens"].value == 0


def test_swap_and_recompute_on_the_same_seed():
    s = scenario(kv_dtype="fp8", kv_pool="2GiB")
    work = wl.build(requests=60, seed=7, prompt=wl.parse_dist("uniform:200,2000", "p"),
                    output=wl.parse_dist("lognormal:mean=3000,p99=12000", "o"), max_len=40_000, rate=4.0)
    swap = sim.simulate(s, work, sim.SimOptions(policy="swap"))
    rec = sim.simulate(s, work, sim.SimOptions(policy="recompute"))
    assert swap.recomputed.sum() == 0 and swap.swap_outs.sum() > 0
    assert rec.recomputed.sum() > 0 and rec.swap_outs.sum() == 0
    assert (swap.outputs == rec.outputs).all()    # the same requests


# --- event to event == step by step -----------------------------------------------------------------------------
@pytest.mark.parametrize("policy", sim.POLICIES)
@pytest.mark.parametrize("victim", sim.VICTIMS)
@pytest.mark.parametrize("model", [None, "llama-3.1-8b", "gpt-oss-120b"])
def test_event_driven_equals_the_step_by_step_reference(policy, victim, model):
    extra = {"tp": "1", "hardware": "h100-sxm"} if model == "llama-3.1-8b" else {}
    s = scenario(model=model, kv_pool="1GiB" if model == "gpt-oss-120b" else "2GiB", **extra)
    work = wl.build(requests=30, seed=11, prompt=wl.parse_dist("uniform:100,3000", "p"),
                    output=wl.parse_dist("lognormal:mean=1500,p99=6000", "o"), max_len=12_000, rate=3.0)
    opts = dict(policy=policy, victim=victim, dram_bytes_per_node=3 * 10**9)
    fast = sim.simulate(s, work, sim.SimOptions(**opts))
    ref = sim.simulate(s, work, sim.SimOptions(**opts, reference=True))
    for name in ("preemptions", "swap_outs", "swap_ins", "recomputed", "peak_bytes"):
        assert (getattr(fast, name) == getattr(ref, name)).all(), name
    assert fast.decode_steps == ref.decode_steps
    assert fast.events < ref.events                   # the point: far fewer events
    for name in ("first_token", "finish", "admitted"):
        np.testing.assert_allclose(getattr(fast, name), getattr(ref, name), rtol=1e-9)


def test_the_closed_form_sum_of_a_max_of_two_series():
    # max(10 - t, 2 + t) over t = 0..9: 10, 9, 8, 7, 6 (t <= 4), then 7, 8, 9, 10, 11 (t = 5..9): 40 + 45 = 85
    assert sim._affine_max_sum(10, -1, 2, 1, 10) == pytest.approx(85)
    # parallel series: the larger one throughout, 3 + 4 + 5 = 12
    assert sim._affine_max_sum(3, 1, 1, 1, 3) == pytest.approx(12)
    # a rising series that crosses inside the first step (at t = 0.5): max(10 t, 5) over t = 0..2 is 5, 10, 20 = 35
    # (the constant wins at t = 0 only; starting the rising one at t = 0 would give 0 + 10 + 20 = 30)
    assert sim._affine_max_sum(0, 10, 5, 0, 3) == pytest.approx(35)


def test_the_step_an_event_falls_in():
    # step0 = 1 s plus max(10 - t, 2 + t): steps of 11, 10, 9, 8, 7 s (t = 0..4), then 8, 9, 10, 11, 12 s, so the
    # time after j steps is 11, 21, 30, 38, 45, 53, 62, 72, 83, 95 s; the series that wins at step 0 (10 - t) would
    # put the root of 60 s past the crossing, so the two first probes miss and the bisection finishes
    def first(target, k=10, elapsed_k=95.0):
        return sim._first_step_reaching(1.0, 10.0, -1.0, 2.0, 1.0, k, target, elapsed_k)
    assert first(60.0) == (7, 62.0)
    assert first(62.0) == (7, 62.0)                   # reaching the target counts
    assert first(62.5) == (8, 72.0)
    assert first(5.0) == (1, 11.0)
    assert first(94.0) == (10, 95.0)                  # the run's last step: elapsed(k) as given, not recomputed
    # one series, no crossing: 3 s a step, the root of 3j = 9 is j = 3 exactly; a hair more needs the 4th step
    assert sim._first_step_reaching(1.0, 2.0, 0.0, 0.0, 0.0, 10, 9.0, 30.0) == (3, 9.0)
    assert sim._first_step_reaching(1.0, 2.0, 0.0, 0.0, 0.0, 10, 9.0001, 30.0) == (4, 12.0)


# --- the workload -----------------------------------------------------------------------------------------------
def test_lognormal_mean_and_p99_match_the_parameters():
    d = wl.parse_dist("lognormal:mean=2133,p99=15063", "o")
    # sigma = z - sqrt(z^2 - 2 ln(15063 / 2133)) = 2.3263 - sqrt(5.4119 - 3.9092) = 2.3263 - 1.2258 = 1.1005;
    # mu = ln 2133 - sigma^2 / 2 = 7.6653 - 0.6056 = 7.0597
    assert d.b == pytest.approx(1.1005, abs=2e-4)
    assert d.a == pytest.approx(7.0597, abs=2e-4)
    x = d.sample(np.random.default_rng(0), 400_000, 10**7)
    # standard error of the mean: sigma_X / sqrt(n), sigma_X = mean x sqrt(e^(sigma^2) - 1) = 2133 x 1.52 = 3,240;
    # / sqrt(400,000) = 5.1 tokens: 1% (21 tokens) is four standard errors
    assert x.mean() == pytest.approx(2133, rel=0.01)
    assert np.percentile(x, 99) == pytest.approx(15063, rel=0.03)


def test_fixed_and_uniform_and_the_cap():
    rng = np.random.default_rng(1)
    assert (wl.parse_dist("fixed:30k", "o").sample(rng, 5, 100_000) == 30_000).all()
    u = wl.parse_dist("uniform:10,20", "o").sample(rng, 10_000, 100)
    assert u.min() == 10 and u.max() == 20     # both bounds drawn (inclusive)
    assert (wl.parse_dist("fixed:500", "o").sample(rng, 3, 64) == 64).all()


def test_the_same_seed_gives_the_same_requests_at_any_rate():
    w1 = wl.build(requests=50, seed=5, prompt=wl.parse_dist("uniform:1,999", "p"),
                  output=wl.parse_dist("lognormal:p50=1000,p99=9000", "o"), max_len=50_000, rate=1.0)
    w2 = wl.build(requests=50, seed=5, prompt=wl.parse_dist("uniform:1,999", "p"),
                  output=wl.parse_dist("lognormal:p50=1000,p99=9000", "o"), max_len=50_000, rate=2.0)
    assert (w1.prompts == w2.prompts).all() and (w1.outputs == w2.outputs).all()
    # exponential gaps at twice the rate: every arrival at half the time
    np.testing.assert_allclose(w2.arrivals, w1.arrivals / 2, rtol=1e-12)


def test_presets_carry_sources_and_their_figures():
    r1 = wl.load_workload("r1-production")
    assert all(src for src in r1.sources) and "ServeGen" in r1.sources[1]
    x = r1.output.sample(np.random.default_rng(0), 200_000, r1.output_max)
    assert x.max() == 32768
    # the ServeGen aggregate: p50 1,014, p99 15,063; the lognormal through mean and p99 has p50 e^7.0597 = 1,164
    assert 1000 <= np.median(x) <= 1300
    assert np.percentile(x, 99) == pytest.approx(15063, rel=0.05)
    bench = wl.load_workload("long-cot-bench")
    y = bench.output.sample(np.random.default_rng(0), 200_000, bench.output_max)
    assert y.max() == 65536 and y.mean() == pytest.approx(23000, rel=0.03)   # the cap trims ~1% of the tail


# --- the command ------------------------------------------------------------------------------------------------
def test_json_every_number_has_a_derivation(run_cli):
    r = run_cli("simulate", "--kv-dtype", "fp8", "--workload", "r1-production", "--rate", "2", "--requests", "200",
                "--policy", "swap-then-recompute", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    missing = sorted(set(numeric_paths(doc)) - set(doc["derivations"]))
    assert not missing, missing
    for path, d in doc["derivations"].items():
        assert d["formula"], path
        if d["kind"] == "computed":
            assert d["substituted"], path
    for key in ("requests_finished", "generated_tokens", "peak_kv_bytes_per_request_p50", "swap_out_count",
                "swap_in_count", "swapped_bytes", "swap_out_per_minute", "recomputed_tokens", "recompute_rate",
                "preempted_share", "tpot_seconds_p50", "tpot_seconds_p99", "ttft_seconds_p50", "ttft_seconds_p99",
                "throughput_tokens_per_second", "simulated_seconds"):
        assert key in doc, key
    assert doc["requests_finished"] == 200


def test_a_seed_repeats_a_run(run_cli):
    args = ("simulate", "--workload", "r1-production", "--rate", "3", "--requests", "100", "-f", "json")
    one, two = run_cli(*args, "--seed", "4").json(), run_cli(*args, "--seed", "4").json()
    other = run_cli(*args, "--seed", "5").json()
    assert one["tpot_seconds_p99"] == two["tpot_seconds_p99"]
    assert one["generated_tokens"] == two["generated_tokens"]
    assert one["generated_tokens"] != other["generated_tokens"]


def test_csv_is_the_per_request_table(run_cli):
    r = run_cli("simulate", "--users", "2", "--requests", "3", "--decode", "100", "-f", "csv")
    assert r.code == 0, r.err
    rows = [line for line in r.out.splitlines() if line and not line.startswith("#")]
    assert rows[0].startswith("request,") and len(rows) == 1 + 3


def test_a_trace_drives_the_run(run_cli, tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("prompt_tokens,output_tokens,arrival_s\n100,50,0\n200,60,0.5\n300,70,1.5\n")
    doc = run_cli("simulate", "--trace", str(f), "-f", "json").json()
    assert doc["requests_finished"] == 3 and doc["generated_tokens"] == 50 + 60 + 70
    j = tmp_path / "t.jsonl"
    j.write_text('{"prompt_tokens": 100, "output_tokens": 50}\n{"prompt_tokens": 10, "output_tokens": 5}\n')
    doc = run_cli("simulate", "--trace", str(j), "--rate", "1", "-f", "json").json()
    assert doc["generated_tokens"] == 55


@pytest.mark.parametrize("text, needle", [
    ("output_tokens,arrival_s\n5,0\n", "no prompt_tokens column"),
    ("prompt_tokens,output_tokens\n5,-3\n", "line 2"),
    ("prompt_tokens,output_tokens\n5,2.5\n", "not a whole number"),
    ("prompt_tokens,output_tokens,arrival_s\n5,5,2\n5,5,1\n", "sort the trace"),
    ("prompt_tokens,output_tokens,arrival_s\n5,5,-1\n", "arrival_s"),
    ("prompt_tokens,output_tokens\n", "no requests"),
])
def test_a_bad_trace_is_one_line_exit_2(run_cli, tmp_path, text, needle):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    r = run_cli("simulate", "--trace", str(f), "--rate", "1")
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


@pytest.mark.parametrize("args, needle", [
    (("--policy", "bogus"), "unknown preemption policy"),
    (("--victim", "oldest"), "unknown victim rule"),
    (("--rate", "1", "--users", "2"), "give one of them"),
    (("--output-dist", "normal:5"), "not a length distribution"),
    (("--output-dist", "lognormal:mean=10,p99=1000"), "no lognormal"),
    (("--output-dist", "uniform:9,3"), "lower bound"),
    (("--workload", "nope"), "unknown workload"),
    (("--rate", "-1"), "--rate"),
    (("--kv-pool", "1GiB", "--decode", "60k"), "more than the"),
    (("--max-len", "10M"), "above the engine's limit"),
    (("--rate", "0.5", "--think", "5"), "drop --think"),          # open-loop arrivals do not wait on users
    (("--max-len", "100"), "longer than --max-len 100"),          # 1,000 + 30,000 would be cut silently
    (("--decode", "0"), "at least one output token"),
    (("--duration", "0"), "(0, 1e9] s"),
])
def test_bad_input_is_one_line_exit_2(run_cli, args, needle):
    r = run_cli("simulate", "--requests", "3", *args)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


def test_the_default_is_the_documents_request_in_a_small_closed_loop(run_cli):
    doc = run_cli("simulate", "--requests", "8", "-f", "json").json()
    # 8 users x (1,000 + 30,000) tokens: every request generates 30,000
    assert doc["generated_tokens"] == 8 * 30_000
    assert doc["inputs"]["users"] == 8
    assert math.isclose(doc["peak_kv_bytes_per_request_max"], doc["peak_kv_bytes_per_request_p50"])


def test_the_last_step_that_fits_matches_counting_blocks_step_by_step():
    # brute force: after k steps request i holds ceil((x_i + k - 1) / block) blocks; the answer is the largest k
    # whose total is at most the blocks held after step 1 plus the slack
    import numpy as np

    from kvplan.calc.simulate import _last_step_that_fits

    rng = np.random.default_rng(7)
    for _ in range(300):
        block = int(rng.choice([1, 4, 16, 64]))
        x = rng.integers(1, 300, size=int(rng.integers(1, 9)))
        slack = int(rng.integers(0, 30))
        need = [int((-(-(x + k - 1) // block)).sum()) for k in range(1, 4000)]
        want = max(k for k in range(1, 4000) if need[k - 1] <= need[0] + slack)
        assert _last_step_that_fits(x, block, slack) == want, (block, x, slack)
    # by hand: block 4, contexts 4 and 6; crossings at steps 2 (4 -> 5 tokens) and 4 (6 -> 9), then 6 and 8;
    # slack 0 -> 1 step, slack 1 -> 3 steps, slack 2 -> 5 steps
    assert [_last_step_that_fits(np.array([4, 6]), 4, s) for s in (0, 1, 2)] == [1, 3, 5]


def test_a_workload_file_gets_the_presets_bounds(run_cli, tmp_path):
    # workload files are read by the same reader as presets and plans: nesting past MAX_DEPTH is refused by name
    from kvplan.inputs.presets import MAX_DEPTH

    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n")
    r = run_cli("simulate", "--workload", str(deep))
    assert r.code == 2 and f"more than {MAX_DEPTH} levels deep" in r.err and r.err.count("\n") == 1, r.err
