"""kvplan simulate's features: --compare, --sweep-rate, --offload-threshold, prefix caching, the timeline; each with
hand-worked numbers on tiny cases and bad input (one line, exit 2)."""

from __future__ import annotations

import pytest
from test_json_contract import numeric_paths  # tests/ is on sys.path (rootdir-less test modules)

# Llama-3.1-8B, BF16 KV, TP 1, 16-token blocks: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B per
# token (the model's config.json: num_hidden_layers 32, num_key_value_heads 8, head_dim 4096 / 32 = 128), so one
# block is 16 x 131,072 B = 2 MiB and a 1,000 MiB pool is 500 blocks (watermark int(0.01 x 500) = 5).
# Five users of 1,000 + 1,001 tokens: all five are admitted (5 x ceil(1,000 / 16) = 5 x 63 = 315 blocks); growing
# in lockstep, the step that reads x tokens needs 5 x ceil(x / 16) blocks, more than 500 first at x = 1,601: the
# newest (the fifth) is preempted with a cache of 1,600 tokens. It is not readmitted while the four run (they hold
# 400 blocks and grow; it needs 100 with 5 kept free), so exactly one preemption.
TINY = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--block-size", "16", "--kv-pool", "1000MiB",
        "--users", "5", "--requests", "5", "--prompt", "1000", "--decode", "1001")
TOKEN_BYTES = 2 * 32 * 8 * 128 * 2


def test_compare_runs_the_same_requests_under_each_setting(run_cli):
    r = run_cli("simulate", *TINY, "--compare", "policy=swap,swap-then-recompute+dram=2TB,kv-dtype=fp8", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    missing = sorted(set(numeric_paths(doc)) - set(doc["derivations"]))
    assert not missing, missing
    base, swap, stc, fp8 = doc["compare"]
    assert [c["label"] for c in doc["compare"]] == ["base", "swap", "swap-then-recompute+2TB", "fp8"]
    assert swap["changes"] == {"policy": "swap"} and stc["changes"] == {"policy": "swap-then-recompute",
                                                                        "dram": "2TB"}
    # recompute (the base): one preemption, its 1,600-token cache re-prefilled; rate 1,600 / (5 x 1,001) generated
    assert base["preemptions"] == 1 and base["recomputed_tokens"] == 1600 and base["swap_out_count"] == 0
    assert base["recompute_rate"] == pytest.approx(1600 / 5005, rel=1e-12)
    # swap: the same victim goes to DRAM instead: 1,600 x 131,072 B = 209,715,200 B out and back, nothing recomputed
    for run in (swap, stc):
        assert run["policy"] != "recompute"
        assert run["swap_out_count"] == run["swap_in_count"] == 1 and run["recomputed_tokens"] == 0
        assert run["swapped_bytes"] == 1600 * TOKEN_BYTES == 209_715_200
    # FP8 KV halves the bytes per token: 1,000 blocks of 1 MiB, five requests of 125 blocks fit with no preemption
    assert fp8["kv_dtype"] == "fp8" and fp8["replica"]["kv_blocks"] == 1000 and fp8["preemptions"] == 0
    assert all(c["generated_tokens"] == 5 * 1001 for c in doc["compare"])


def test_compare_columns_equal_the_single_runs(run_cli):
    args = ("simulate", "--workload", "r1-production", "--rate", "4", "--requests", "120", "--kv-pool", "3GiB")
    doc = run_cli(*args, "--compare", "victim=fewest-tokens", "-f", "json").json()
    alone = run_cli(*args, "--victim", "fewest-tokens", "-f", "json").json()
    col = doc["compare"][1]
    for key in ("preemptions", "recomputed_tokens", "tpot_seconds_p99", "simulated_seconds"):
        assert col[key] == alone[key], key
    assert doc["compare"][0]["victim"] == "newest"


def test_compare_table_has_a_column_per_setting(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")   # the first line on one line
    r = run_cli("simulate", *TINY, "--compare", "swap")
    assert r.code == 0, r.err
    header = next(line for line in r.out.splitlines() if "figure" in line)
    assert header.split() == ["figure", "base", "swap"]
    assert "2 settings compared" in r.out.splitlines()[0]


@pytest.mark.parametrize("value, needle", [
    ("", "--compare is empty"),
    ("policy=swap,,victim=newest", "empty variant"),
    ("seed=3", "not one a variant can change"),
    ("bogus", "is not key=value"),
    ("policy=", "no value"),
    ("policy=swap+policy=recompute", "sets policy twice"),
    ("policy=nope", "unknown preemption policy"),
    ("kv-dtype=int3", "unknown kv dtype"),
    ("max-batch=0", "max-batch"),
    (",".join(["swap"] * 13), "at most 12"),
])
def test_compare_bad_input_is_one_line_exit_2(run_cli, value, needle):
    r = run_cli("simulate", "--requests", "3", "--compare", value)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


def test_compare_refuses_csv(run_cli):
    r = run_cli("simulate", "--requests", "3", "--compare", "swap", "-f", "csv")
    assert r.code == 2 and "per-request table of one run" in r.err and r.err.count("\n") == 1, r.err


# --- --sweep-rate ------------------------------------------------------------------------------------------------
# The same five requests (1,000 + 1,001 tokens, 500-block pool) as Poisson arrivals. At 0.001 requests/s the mean gap
# is 1,000 s and one request decodes in ~1,000 steps of a few ms: the pool never holds more than four, nothing is
# preempted (recompute rate 0). At 1e6 requests/s all five arrive within microseconds, during the first prefill, so
# they run in lockstep exactly as the closed loop above: one preemption, 1,600 / 5,005 = 0.3197 recomputed.
SWEEP_TINY = TINY[:12] + ("--requests", "5", "--prompt", "1000", "--decode", "1001")


@pytest.mark.parametrize("cap, capacity, meets", [("0.3", 0.001, [True, False]), ("0.32", 1e6, [True, True])])
def test_sweep_finds_the_highest_rate_within_the_recompute_cap(run_cli, cap, capacity, meets):
    r = run_cli("simulate", *SWEEP_TINY, "--sweep-rate", "0.001:1000000:2", "--max-recompute-rate", cap, "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    missing = sorted(set(numeric_paths(doc)) - set(doc["derivations"]))
    assert not missing, missing
    low, high = doc["sweep"]
    assert low["rate_requests_per_second"] == 0.001 and high["rate_requests_per_second"] == 1e6
    assert low["recompute_rate"] == 0 and low["preemptions"] == 0
    assert high["preemptions"] == 1 and high["recompute_rate"] == pytest.approx(1600 / 5005, rel=1e-12)
    assert [p["meets_targets"] for p in doc["sweep"]] == meets
    assert doc["capacity_requests_per_second"] == capacity
    assert doc["targets"] == {"recompute_rate_at_most": float(cap)}


def test_sweep_capacity_stops_at_the_first_rate_that_fails(monkeypatch):
    # targets TPOT p99 <= 50 ms: rates 1, 2, 3, 4 with p99 40, 50, 60, 45 ms pass, pass, fail, pass; the capacity is
    # 2 (the highest rate with every lower one passing), not 4
    from kvplan.calc import simulate as sim
    from kvplan.specs.values import Fraction, Seconds, given

    p99 = {1.0: 0.040, 2.0: 0.050, 3.0: 0.060, 4.0: 0.045}
    monkeypatch.setattr(sim, "_sweep_point", lambda job: {"tpot_seconds_p99": Seconds(p99[job[1]], given("t")),
                                                          "recompute_rate": Fraction(0.0, given("t"))})
    plan = sim.plan_sweep(None, [(r, r) for r in p99], sim.SimOptions(), 0.050, None, workers=1)
    assert plan.meets == (True, True, False, True) and plan.capacity == 2.0
    assert sim.meets_targets({"tpot_seconds_p99": Seconds(0.03, given("t")),
                              "recompute_rate": Fraction(0.051, given("t"))}, 0.05, 0.05) is False


def test_sweep_rates_are_evenly_spaced_and_processes_change_nothing():
    from kvplan.calc import simulate as sim
    from kvplan.inputs import workload as wl
    from kvplan.options.scenarios import build_scenario

    assert sim.parse_sweep("0.5:8:4") == (0.5, 3.0, 5.5, 8.0)     # 0.5 + 7.5 x i / 3
    assert sim.parse_sweep("2:2:1") == (2.0,)
    s = build_scenario(model=None, hardware="h200", nodes="1", gpus=None, tp=None, pp="1", dp=None, ep=None,
                       kv_dtype="fp8", weight_dtype=None, engine="neutral", prompt="1k", decode="30k",
                       mtp_layers=None, max_model_len=None, block_size=None, host_link_gbs=None, presets_dir=None,
                       kv_pool="4GiB")
    works = [(r, wl.build(requests=80, seed=2, prompt=wl.parse_dist("fixed:1000", "p"),
                          output=wl.parse_dist("lognormal:mean=3000,p99=12000", "o"), max_len=100_000, rate=r))
             for r in (1.0, 6.0)]
    serial = sim.plan_sweep(s, works, sim.SimOptions(), 0.05, None, workers=1)
    parallel = sim.plan_sweep(s, works, sim.SimOptions(), 0.05, None, workers=2)
    for a, b in zip(serial.points, parallel.points, strict=True):
        assert {k: v.value for k, v in a.items()} == {k: v.value for k, v in b.items()}
    assert parallel.workers == 2 and serial.workers == 1


@pytest.mark.parametrize("args, needle", [
    (("--sweep-rate", "1:4"), "is not FROM:TO:POINTS"),
    (("--sweep-rate", "1:x:4", "--tpot-slo", "50ms"), "POINTS a whole number"),
    (("--sweep-rate", "4:1:4", "--tpot-slo", "50ms"), "0 < FROM <= TO"),
    (("--sweep-rate", "0:1:4", "--tpot-slo", "50ms"), "0 < FROM <= TO"),
    (("--sweep-rate", "1:4:1", "--tpot-slo", "50ms"), "POINTS must be 2 .. 200"),
    (("--sweep-rate", "1:4:500", "--tpot-slo", "50ms"), "POINTS must be 2 .. 200"),
    (("--sweep-rate", "1:4:4"), "give --tpot-slo, --ttft-slo and/or --max-recompute-rate"),
    (("--tpot-slo", "50ms"), "targets of a --sweep-rate"),
    (("--max-recompute-rate", "0.1"), "targets of a --sweep-rate"),
    (("--sweep-rate", "1:4:4", "--tpot-slo", "50"), "needs a unit"),
    (("--sweep-rate", "1:4:4", "--max-recompute-rate", "-1"), "not in [0, 100]"),
    (("--sweep-rate", "1:4:4", "--tpot-slo", "50ms", "--rate", "2"), "--rate does not combine"),
    (("--sweep-rate", "1:4:4", "--tpot-slo", "50ms", "--users", "2"), "--users does not combine"),
    (("--sweep-rate", "1:4:4", "--tpot-slo", "50ms", "--compare", "swap"), "--compare does not combine"),
    (("--sweep-rate", "1:4:4", "--tpot-slo", "50ms", "--think", "3"), "drop --think"),
])
def test_sweep_bad_input_is_one_line_exit_2(run_cli, args, needle):
    r = run_cli("simulate", "--requests", "3", *args)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


# --- --offload-threshold -----------------------------------------------------------------------------------------
# Three users of 1,000 + 1,001 tokens in the 500-block pool, threshold 0.5: int(0.5 x 500) = 250 blocks. All three
# are admitted (3 x 63 = 189 <= 250). In lockstep at a cache of 1,328 tokens each holds 1,328 / 16 = 83 blocks
# (249 in all); the next step reads 1,329 tokens, 84 blocks each, 252 > 250: the newest (the third) is offloaded
# with its 1,328-token cache (1,328 x 131,072 B = 174,063,616 B) after 1,328 - 1,000 + 1 = 329 tokens. The other
# two then grow to 2 x 125 = 250 blocks, never past the threshold; the third cannot come back while they run
# (2 x 84 + 83 = 251 > 250), so it swaps in when they finish and decodes its last 1,001 - 329 = 672 tokens alone.
# Without a threshold the three fit (3 x 125 = 375 <= 500): no preemption, no swap.
def _tiny(users, **options):
    from kvplan.calc import simulate as sim
    from kvplan.inputs import workload as wl
    from kvplan.options.scenarios import build_scenario

    s = build_scenario(model="llama-3.1-8b", hardware="h100-sxm", nodes="1", gpus=None, tp="1", pp="1", dp="1",
                       ep=None, kv_dtype="auto", weight_dtype=None, engine="neutral", prompt="1k", decode="1001",
                       mtp_layers=None, max_model_len=None, block_size="16", host_link_gbs=None, presets_dir=None,
                       kv_pool="1000MiB")
    work = wl.build(requests=users, seed=0, prompt=wl.parse_dist("fixed:1000", "p"),
                    output=wl.parse_dist("fixed:1001", "o"), max_len=200_000, users=users)
    return s, sim.simulate(s, work, sim.SimOptions(**options))


def test_offload_moves_the_newest_above_the_threshold_without_stalling():
    from kvplan.calc import costs

    s, run = _tiny(3, offload_threshold=0.5)
    assert run.offload_threshold_blocks == 250
    assert list(run.offloads) == [0, 0, 1] and list(run.swap_outs) == [0, 0, 1] and list(run.swap_ins) == [0, 0, 1]
    assert run.preemptions.sum() == 0 and run.recomputed.sum() == 0
    assert run.swapped_out_bytes == run.swapped_in_bytes == 1328 * TOKEN_BYTES == 174_063_616
    assert run.swap_stall_seconds == 0                       # the batch never waits for an offload's copy
    # the step after the offload: the two at 84 blocks each plus the third's 83, held until its copy lands (freed at
    # the end of the step it lands in): 168 + 83 = 251; later the two reach 2 x 125 = 250 alone
    assert run.peak_blocks_used == 2 * 84 + 83
    assert run.finish[0] == run.finish[1]
    # the third: its copy back over the host link once the two are done, then 672 steps alone reading 1,329 .. 2,000
    sm = costs.step_model(s)
    link = float(costs.host_link_rate(s.hardware, s.host_link_gbs).value)
    settings = costs.CostSettings()
    t_in = costs.swap_seconds(174_063_616, costs.swap_copies(s.sized_model, 1328, 16, settings.layout), link,
                              settings, shared_link=True)
    alone = sum(float(sm.step(1, *map(float, sm.request_cache(float(x))))["total"]) for x in range(1329, 2001))
    assert run.finish[2] - run.finish[0] == pytest.approx(t_in + alone, rel=1e-9)
    _, none = _tiny(3)
    assert none.swap_outs.sum() == 0 and none.preemptions.sum() == 0 and none.offloads.sum() == 0


def test_offload_threshold_in_the_json_and_compare(run_cli):
    args = TINY[:12] + ("--users", "3", "--requests", "3", "--prompt", "1000", "--decode", "1001")
    doc = run_cli("simulate", *args, "--offload-threshold", "0.5", "--compare", "offload-threshold=off", "-f",
                  "json").json()
    with_t, without = doc["compare"]
    assert with_t["offload_count"] == 1 and with_t["swap_out_count"] == 1 and with_t["replica"][
        "offload_threshold_blocks"] == 250
    assert without["offload_count"] == 0 and without["swap_out_count"] == 0
    assert without["replica"]["offload_threshold_blocks"] is None


@pytest.mark.parametrize("value, needle", [("1.5", "not in (0, 1)"), ("0", "not in (0, 1)"), ("x", "not a number")])
def test_offload_threshold_bad_input(run_cli, value, needle):
    r = run_cli("simulate", "--requests", "3", "--offload-threshold", value)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


@pytest.mark.parametrize("threshold", [0.3, 0.6])
@pytest.mark.parametrize("victim", ["newest", "longest-first-protected", "fewest-tokens"])
@pytest.mark.parametrize("policy", ["swap", "recompute", "swap-then-recompute"])
def test_offload_event_driven_equals_one_step_at_a_time(policy, victim, threshold):
    import numpy as np

    from kvplan.calc import simulate as sim
    from kvplan.inputs import workload as wl
    from kvplan.options.scenarios import build_scenario

    s = build_scenario(model=None, hardware="h200", nodes="1", gpus=None, tp=None, pp="1", dp=None, ep=None,
                       kv_dtype="fp8", weight_dtype=None, engine="neutral", prompt="1k", decode="30k",
                       mtp_layers=None, max_model_len=None, block_size=None, host_link_gbs=None, presets_dir=None,
                       kv_pool="2GiB")
    work = wl.build(requests=30, seed=7, prompt=wl.parse_dist("uniform:200,2000", "p"),
                    output=wl.parse_dist("lognormal:mean=2000,p99=8000", "o"), max_len=40_000, rate=4.0)
    opts = dict(policy=policy, victim=victim, offload_threshold=threshold, dram_bytes_per_node=3 * 10**9)
    fast = sim.simulate(s, work, sim.SimOptions(**opts))
    ref = sim.simulate(s, work, sim.SimOptions(**opts, reference=True))
    assert fast.offloads.sum() > 0
    for name in ("preemptions", "swap_outs", "swap_ins", "recomputed", "offloads"):
        assert (getattr(fast, name) == getattr(ref, name)).all(), name
    assert fast.decode_steps == ref.decode_steps and fast.events < ref.events
    np.testing.assert_allclose(fast.finish, ref.finish, rtol=1e-9)


# --- a shared system prompt with prefix caching ----------------------------------------------------------------
# The five users again, every prompt starting with a 512-token system prompt: its 512 / 16 = 32 whole blocks are one
# copy, so requests draw from 500 - 32 = 468 blocks (watermark int(0.01 x 468) = 4) and each holds its cache's
# blocks less 32: at most ceil(2,000 / 16) - 32 = 93 blocks = 93 x 2 MiB = 195,035,136 B. Five of them need
# 5 x 93 = 465 <= 468: the preemption the pool forced without the prefix cache (above) is gone. The first prompt
# computes all 1,000 tokens; the other four hit the 512 cached ones and prefill tokens 512 .. 1,000 only.
def test_a_shared_prefix_is_pooled_once_and_its_prefill_skipped(run_cli):
    from kvplan.calc import costs

    s, run = _tiny_prefix(512)
    assert run.setup.total_blocks == 468 and run.setup.prefix_blocks == 32 and run.setup.watermark_blocks == 4
    assert run.preemptions.sum() == 0
    assert (run.peak_bytes == 93 * 2 * 1024 * 1024).all() and run.peak_bytes[0] == 195_035_136
    assert list(run.prefix_hit_tokens) == [0, 512, 512, 512, 512]
    sm = costs.step_model(s)
    chunk = int(s.engine_adapter.batch_limits_for(s)[0].value)
    full, hit = sm.prefill_seconds(1000, 0, chunk), sm.prefill_seconds(1000, 512, chunk)
    assert hit < full
    # the five prompts wait together at 0 s and their 1,000 + 4 x 488 = 2,952 tokens fit the token budget, so they
    # share one prefill pass before the first decode step (one weight read; the first computes the prefix, the other
    # four tokens 512 .. 1,000): every first token at its end, sooner than five passes one after another
    one = sm.prefill_pass_seconds([(0, 1000)] + [(512, 1000)] * 4, chunk)
    assert 2952 <= chunk and one < full + 4 * hit
    for k in range(5):
        assert run.first_token[k] == pytest.approx(one, rel=1e-12)
    doc = run_cli("simulate", *TINY, "--shared-prefix", "512", "-f", "json").json()
    assert doc["prefix_hit_tokens"] == 4 * 512 and doc["replica"]["shared_prefix_blocks"] == 32
    assert doc["preemptions"] == 0 and doc["replica"]["kv_blocks"] == 468


def test_a_recompute_skips_the_cached_prefix():
    # 5 users, a 16-token prefix (one block): 499 blocks; at most 125 - 1 = 124 each, 5 x 124 = 620 > 499: the newest
    # is preempted in lockstep when 5 x (ceil(x / 16) - 1) first passes 499, ceil(x / 16) = 101, x = 1,601 (cache
    # 1,600): it re-prefills tokens 16 .. 1,600, so 1,600 - 16 = 1,584 recomputed tokens
    _, run = _tiny_prefix(16)
    assert run.setup.total_blocks == 499
    assert run.preemptions.sum() == 1 and run.recomputed.sum() == 1584


def _tiny_prefix(prefix: int):
    from kvplan.calc import simulate as sim
    from kvplan.inputs import workload as wl
    from kvplan.options.scenarios import build_scenario

    s = build_scenario(model="llama-3.1-8b", hardware="h100-sxm", nodes="1", gpus=None, tp="1", pp="1", dp="1",
                       ep=None, kv_dtype="auto", weight_dtype=None, engine="neutral", prompt="1k", decode="1001",
                       mtp_layers=None, max_model_len=None, block_size="16", host_link_gbs=None, presets_dir=None,
                       kv_pool="1000MiB", shared_prefix=str(prefix))
    work = wl.build(requests=5, seed=0, prompt=wl.parse_dist("fixed:1000", "p"),
                    output=wl.parse_dist("fixed:1001", "o"), max_len=200_000, users=5)
    return s, sim.simulate(s, work, sim.SimOptions())


@pytest.mark.parametrize("args, needle", [
    (("--shared-prefix", "2000"), "longer than the"),
    (("--shared-prefix", "500", "--prompt-dist", "uniform:100,900"), "shorter than the --shared-prefix"),
    (("--shared-prefix", "-3"), "--shared-prefix"),
])
def test_shared_prefix_bad_input(run_cli, args, needle):
    r = run_cli("simulate", "--requests", "3", *args)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


@pytest.mark.parametrize("policy", ["swap", "recompute", "swap-then-recompute"])
def test_prefix_event_driven_equals_one_step_at_a_time(policy):
    import numpy as np

    from kvplan.calc import simulate as sim
    from kvplan.inputs import workload as wl
    from kvplan.options.scenarios import build_scenario

    s = build_scenario(model=None, hardware="h200", nodes="1", gpus=None, tp=None, pp="1", dp=None, ep=None,
                       kv_dtype="fp8", weight_dtype=None, engine="neutral", prompt="1k", decode="30k",
                       mtp_layers=None, max_model_len=None, block_size=None, host_link_gbs=None, presets_dir=None,
                       kv_pool="1GiB", shared_prefix="700")
    work = wl.build(requests=30, seed=7, prompt=wl.parse_dist("uniform:800,2000", "p"),
                    output=wl.parse_dist("lognormal:mean=2000,p99=8000", "o"), max_len=40_000, rate=8.0)
    opts = dict(policy=policy, dram_bytes_per_node=3 * 10**9)
    fast = sim.simulate(s, work, sim.SimOptions(**opts))
    ref = sim.simulate(s, work, sim.SimOptions(**opts, reference=True))
    assert fast.preemptions.sum() > 0 and fast.prefix_hit_tokens.sum() > 0
    for name in ("preemptions", "swap_outs", "swap_ins", "recomputed", "prefix_hit_tokens"):
        assert (getattr(fast, name) == getattr(ref, name)).all(), name
    np.testing.assert_allclose(fast.finish, ref.finish, rtol=1e-9)


# --- the timeline, --plot, the progress bar ------------------------------------------------------------------------
def test_the_timeline_follows_the_tiny_runs():
    from kvplan.calc import simulate as sim

    _, rec = _tiny(5)                                   # the closed loop of five: one recompute preemption
    _, swp = _tiny(5, policy="swap")
    _, off = _tiny(3, offload_threshold=0.5)            # one offload of 174,063,616 B, the third alone at the end
    for run in (rec, swp):
        _, s = sim.timeline_buckets(run)
        assert max(s["running_requests"]) == 5          # all five decode together until the pool fills
        assert max(s["pool_occupancy"]) == 1.0          # 4 x 125 = 500 of 500 blocks at the end of the four
    assert max(sim.timeline_buckets(rec)[1]["swapped_requests"]) == 0
    assert max(sim.timeline_buckets(swp)[1]["swapped_requests"]) == 1
    starts, s = sim.timeline_buckets(off)
    assert len(starts) == sim.TIMELINE_BUCKETS and starts[0] == 0
    assert starts[1] == pytest.approx(off.simulated_seconds / sim.TIMELINE_BUCKETS, rel=1e-12)
    assert max(s["dram_bytes_per_gpu"]) == 174_063_616 and max(s["swapped_requests"]) == 1
    assert s["running_requests"][-1] == 1               # the offloaded one finishes alone
    assert max(s["pool_occupancy"]) == pytest.approx(251 / 500)   # 2 x 84 + the 83 still copying out


def test_sparklines_scale_each_series_to_its_peak():
    from kvplan.render.output import sparklines
    from kvplan.render.result import Chart

    chart = Chart("t", "s", ("0", "10", "20"), (("a", (0.0, 4.0, 8.0)), ("bb", (0.0, 0.0, 0.0))), timeline=True)
    lines = sparklines(chart).splitlines()
    # 0 / 8 -> level 0 (▁), 4 / 8 x 8 = level 4 (▅), 8 / 8 -> the top level (█); an all-zero series stays at ▁
    assert lines[1] == "  a  ▁▅█ peak 8" and lines[2] == "  bb ▁▁▁ peak 0"


def test_the_table_has_the_sparkline_and_json_the_timeline(run_cli):
    r = run_cli("simulate", *TINY)
    assert r.code == 0 and "Timeline over" in r.out and "running requests" in r.out
    doc = run_cli("simulate", *TINY, "-f", "json").json()
    assert len(doc["timeline"]) == 40 and max(row["running_requests"] for row in doc["timeline"]) == 5


def test_plot_writes_a_png(run_cli, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "t.png"
    r = run_cli("simulate", *TINY, "--plot", str(out))
    assert r.code == 0, r.err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, needle", [
    (("--plot", "t.txt"), "not a .png file"),
    (("--plot", "t.png", "--compare", "swap"), "one run's timeline"),
    (("--plot", "t.png", "--sweep-rate", "1:2:2", "--tpot-slo", "50ms"), "one run's timeline"),
])
def test_plot_bad_input(run_cli, args, needle):
    r = run_cli("simulate", "--requests", "3", *args)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


def test_the_progress_bar_only_on_a_terminal_after_the_delay():
    import io

    from kvplan.render.progress import LazyProgress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    pipe = io.StringIO()
    bar = LazyProgress("x", stream=pipe, delay=0)
    bar(1, 2)
    bar.close()
    assert pipe.getvalue() == ""                         # not a terminal: nothing
    tty = Tty()
    late = LazyProgress("x", stream=tty, delay=3600)
    late(1, 2)
    assert late.bar is None                              # under the delay: nothing yet
    now = LazyProgress("x", stream=tty, delay=0)
    now(1, 2)
    assert now.bar is not None
    now.close()
    assert now.bar is None


# --- the headline names the workload's lengths, not --prompt/--decode it did not use ------------------------------
TINY_OPEN = TINY[:12] + ("--requests", "4", "--rate", "50", "--prompt", "1000", "--decode", "1001")


@pytest.mark.parametrize("args, lengths", [
    ((), "1,000 + 1,001 tokens"),                                        # --prompt / --decode: the fixed request
    (("--output-dist", "uniform:10,90"), "prompts 1,000 tokens, outputs uniform:10,90"),
    (("--prompt-dist", "lognormal:mean=300,p99=900", "--output-dist", "fixed:64"),
     "prompts lognormal:mean=300,p99=900, outputs 64 tokens"),
    # presets/workloads/r1-production.toml: prompts lognormal p50 180, p99 26,836, outputs mean 2,133, p99 15,063,
    # each capped at 32,768
    (("--workload", "r1-production"), "r1-production workload: prompts lognormal:p50=180,p99=26836 up to 32,768, "
                                      "outputs lognormal:mean=2133,p99=15063 up to 32,768"),
])
def test_the_headline_says_what_the_workload_is(run_cli, args, lengths):
    for extra, tail in (((), "; recompute, victim newest"), (("--compare", "policy=swap"), "; 2 settings compared")):
        doc = run_cli("simulate", *TINY_OPEN, *args, *extra, "-f", "json").json()
        assert doc["headline"].endswith("neutral engine; " + lengths + tail), doc["headline"]
        assert "1,000 + 30,000" not in doc["headline"]


def test_the_headline_of_a_trace_and_of_a_sweep(run_cli, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("prompt_tokens,output_tokens\n100,20\n300,40\n")
    # a trace: no --prompt, and no --requests past its 2 rows (refused since user29)
    doc = run_cli("simulate", *TINY[:12], "--rate", "50", "--trace", str(trace), "-f", "json").json()
    assert doc["headline"].endswith(f"neutral engine; lengths from {trace}; recompute, victim newest")
    doc = run_cli("simulate", *TINY[:12], "--requests", "4", "--output-dist", "fixed:300", "--sweep-rate", "1:2:2",
                  "--tpot-slo", "1s", "-f", "json").json()
    assert doc["headline"].endswith("neutral engine; 1,000 + 300 tokens; rate sweep 1 .. 2 requests/s")


def test_a_rate_the_deployment_cannot_keep_up_with_fails_the_sweep():
    """A point fails when more than 10% of its requests (and more than 10) still wait to start at the last arrival:
    the queue grows without bound there, whatever the TPOT of the requests that run."""
    from kvplan.calc import simulate as sim
    from kvplan.specs.values import Count, Fraction, Seconds, given

    def point(waiting, n=1000):
        return {"tpot_seconds_p99": Seconds(0.01, given("t")), "recompute_rate": Fraction(0.0, given("r")),
                "waiting_at_last_arrival": Count(waiting, given("w")), "requests_finished": Count(n, given("n"))}

    assert sim.meets_targets(point(100), 0.05, None)          # 100 of 1,000 = 10%: not more than the share
    assert not sim.meets_targets(point(101), 0.05, None)      # 101 > 100
    assert sim.meets_targets(point(10, n=20), 0.05, None)     # 50% but only 10: a burst, not a growing queue
    assert not sim.meets_targets(point(11, n=20), 0.05, None)


def test_the_sweep_measures_the_queue_at_the_last_arrival(run_cli):
    # at 1e6 requests/s all five arrive within microseconds, during the first request's prefill (the comment above
    # SWEEP_TINY): the first is admitted, the other four wait when the last arrives; at 0.001/s none waits
    doc = run_cli("simulate", *SWEEP_TINY, "--rate", "1000000", "-f", "json").json()
    assert doc["waiting_at_last_arrival"] == 4
    slow = run_cli("simulate", *SWEEP_TINY, "--rate", "0.001", "-f", "json").json()
    assert slow["waiting_at_last_arrival"] == 0
