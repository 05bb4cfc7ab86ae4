"""kvplan simulate over every DP replica of the deployment (issue 10): requests routed round-robin in arrival order
(a closed loop's users and requests dealt alike), each replica its own pool and engine, the metrics merged.
Hand-worked cases on a tiny pool, the DP = 1 identity, and the llama-3.1-8b x 8 H100 case of the issue."""

from __future__ import annotations

import json

import numpy as np
import pytest

# Llama-3.1-8B, BF16 KV, TP 1, 16-token blocks: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B per
# token (the model's config.json: num_hidden_layers 32, num_key_value_heads 8, head_dim 4096 / 32 = 128), so one
# block is 2 MiB and a 1,000 MiB pool per GPU is 500 blocks (watermark int(0.01 x 500) = 5).
TINY = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--block-size", "16", "--kv-pool", "1000MiB")


def _scenario(dp: int):
    from kvplan.options.scenarios import build_scenario

    return build_scenario(model="llama-3.1-8b", hardware="h100-sxm", nodes="1", gpus=None, tp="1", pp="1",
                          dp=str(dp), ep=None, kv_dtype="auto", weight_dtype=None, engine="neutral", prompt="1k",
                          decode="1001", mtp_layers=None, max_model_len=None, block_size="16", host_link_gbs=None,
                          presets_dir=None, kv_pool="1000MiB")


def _open(prompts, outputs, arrivals):
    from kvplan.inputs.workload import Workload

    return Workload(np.array(prompts, dtype=np.int64), np.array(outputs, dtype=np.int64),
                    np.array(arrivals, dtype=float), None, 0.0, None, "test")


PER_REQUEST = ("prompts", "outputs", "arrival", "admitted", "first_token", "finish", "preemptions", "swap_outs",
               "swap_ins", "recomputed", "peak_bytes", "offloads", "prefix_hit_tokens")


def test_two_replicas_each_serve_their_round_robin_share_as_a_one_replica_run_would():
    from kvplan.calc.simulate import plan_simulate, simulate

    # four requests of distinct lengths arriving 0.1 s apart: round-robin in arrival order sends requests 0 and 2
    # to replica 0, 1 and 3 to replica 1
    P, L, A = [1000, 2000, 3000, 4000], [100, 200, 300, 400], [0.0, 0.1, 0.2, 0.3]
    plan = plan_simulate(_scenario(2), _open(P, L, A))
    r = plan.run
    assert list(r.replica_of) == [0, 1, 0, 1] and r.replicas == 2
    one = _scenario(1)
    r0 = simulate(one, _open([1000, 3000], [100, 300], [0.0, 0.2]))
    r1 = simulate(one, _open([2000, 4000], [200, 400], [0.1, 0.3]))
    for name in PER_REQUEST:                 # each request's figures are its own replica's, exactly
        merged = getattr(r, name)
        assert list(merged[[0, 2]]) == list(getattr(r0, name)), name
        assert list(merged[[1, 3]]) == list(getattr(r1, name)), name
    assert r.simulated_seconds == max(r0.simulated_seconds, r1.simulated_seconds)
    assert r.decode_steps == r0.decode_steps + r1.decode_steps and r.events == r0.events + r1.events
    assert r.prefill_seconds == r0.prefill_seconds + r1.prefill_seconds
    assert r.peak_running == max(r0.peak_running, r1.peak_running)
    m = plan.metrics
    tpot = [(f - t) / (n - 1) for f, t, n in zip(r.finish, r.first_token, L, strict=True)]
    assert m["tpot_seconds_p50"].value == pytest.approx(float(np.percentile(tpot, 50)), rel=1e-12)
    assert m["generated_tokens"].value == 100 + 200 + 300 + 400
    assert m["throughput_tokens_per_second"].value == pytest.approx(1000 / r.simulated_seconds, rel=1e-12)
    assert m["replicas"].value == 2 and m["replicas_serving"].value == 2


def test_replicas_decode_apart_so_the_steps_add_up():
    from kvplan.calc.simulate import simulate_deployment

    # four requests of 1,000 + 100 tokens, all at 0 s: one replica prefills all four (each prefill gives the first
    # token) and decodes them together for 100 - 1 = 99 steps; two replicas take two each and run 99 steps apiece
    work = _open([1000] * 4, [100] * 4, [0.0] * 4)
    assert simulate_deployment(_scenario(1), work).decode_steps == 99
    assert simulate_deployment(_scenario(2), work).decode_steps == 2 * 99
    assert simulate_deployment(_scenario(4), work).decode_steps == 4 * 99
    # a replica that gets no request is not run: 4 requests over 8 replicas serve 4
    eight = simulate_deployment(_scenario(8), work)
    assert eight.replicas == 4 and list(eight.replica_of) == [0, 1, 2, 3]


def test_six_requests_preempt_in_one_pool_and_fit_in_two():
    from kvplan.calc.simulate import simulate_deployment

    # six requests of 1,000 + 1,001 tokens at 0 s. One 500-block pool: all six are admitted (6 x ceil(1,000 / 16)
    # = 6 x 63 = 378 blocks, within 500 - 5), and the step reading x tokens needs 6 x ceil(x / 16) blocks, past 500
    # first at ceil(x / 16) = 84: a preemption. Two replicas of three: at most 3 x ceil(2,000 / 16) = 3 x 125 = 375
    # blocks each, so no preemption anywhere.
    work = _open([1000] * 6, [1001] * 6, [0.0] * 6)
    assert simulate_deployment(_scenario(1), work).preemptions.sum() > 0
    two = simulate_deployment(_scenario(2), work)
    assert two.preemptions.sum() == 0 and two.recomputed.sum() == 0
    assert two.peak_blocks_used == 375            # the busiest replica's own pool, not the sum of both
    # the summed timeline: both replicas at their 375-block peak at once -> 750 of the deployment's 2 x 500
    assert int(two.timeline[1].max()) == 2 * 375


def test_a_closed_loop_deals_users_and_requests_to_replicas(run_cli):
    # five users of 1,000 + 1,001 tokens on one 500-block pool: one preemption with a 1,600-token cache re-prefilled
    # (tests/test_simulate_features.py works it by hand). Two replicas: users 0, 2, 4 on replica 0 and 1, 3 on
    # replica 1, requests likewise; three at once need at most 3 x 125 = 375 blocks: nothing is preempted.
    base = TINY + ("--users", "5", "--requests", "5", "--prompt", "1000", "--decode", "1001", "-f", "json")
    one = json.loads(run_cli("simulate", *base, "--dp", "1").out)
    assert one["preemptions"] == 1 and one["recomputed_tokens"] == 1600 and "replicas" not in one
    r = run_cli("simulate", *base, "--dp", "2")
    assert r.code == 0, r.err
    two = json.loads(r.out)
    assert two["preemptions"] == 0 and two["recomputed_tokens"] == 0 and two["generated_tokens"] == 5 * 1001
    assert two["replicas"] == 2 and two["replicas_serving"] == 2
    assert "2 replicas, round-robin" in two["headline"]
    assert any("round-robin in arrival order" in n for n in two["notes"])
    csv = run_cli("simulate", *base[:-2], "--dp", "2", "-f", "csv").out.splitlines()
    assert csv[1].endswith(",replica") and [line.split(",")[-1] for line in csv[2:]] == ["0", "1", "0", "1", "0"]
    # one user: one replica serves, the other idles
    lone = json.loads(run_cli("simulate", *TINY, "--users", "1", "--requests", "3", "--prompt", "1000", "--decode",
                              "10", "--dp", "2", "-f", "json").out)
    assert lone["replicas"] == 2 and lone["replicas_serving"] == 1
    assert any("1 got no request" in n for n in lone["notes"])


def test_compare_and_sweep_route_alike(run_cli):
    # six requests at 50/s on two replicas of 500 blocks: as in the six-request case, no preemption
    args = TINY + ("--dp", "2", "--requests", "6", "--prompt", "1000", "--decode", "1001", "-f", "json")
    doc = json.loads(run_cli("simulate", *args, "--rate", "50", "--compare", "policy=swap").out)
    assert all(c["replicas"] == 2 and c["preemptions"] == 0 for c in doc["compare"])
    assert "2 replicas, round-robin" in doc["headline"]
    doc = json.loads(run_cli("simulate", *args, "--sweep-rate", "50:100:2", "--max-recompute-rate", "0").out)
    assert [p["replicas_serving"] for p in doc["sweep"]] == [2, 2] and doc["capacity_requests_per_second"] == 100


def test_check_simulates_the_whole_deployment(run_cli, tmp_path):
    # the six-request case through `kvplan check`'s sim_ assertion: no recompute on two replicas (on gpus = 1 the
    # same assertion fails: one pool preempts)
    plan = tmp_path / "plan.toml"
    plan.write_text('[deployment]\nmodel = "llama-3.1-8b"\nhardware = "h100-sxm"\ngpus = 2\ntp = 1\n'
                    'block_size = 16\nkv_pool = "1000MiB"\nprompt = "1000"\ndecode = "1001"\n\n'
                    '[[assert]]\nname = "calm"\nmetric = "sim_recompute_rate"\nusers = 6\nrequests = 6\n'
                    'at_most = "0%"\n')
    r = run_cli("check", str(plan), "-f", "json")
    assert r.code == 0, r.err + r.out


def test_one_replica_is_the_engine_run_itself():
    from kvplan.calc.simulate import merge_runs, route, simulate, simulate_deployment

    s = _scenario(1)
    work = _open([1000, 2000, 1500], [300, 100, 200], [0.0, 0.05, 0.1])
    direct = simulate(s, work)
    again = simulate_deployment(s, work)
    assert again.replicas == 1 and again.replica_of is None and again.events == direct.events
    assert all(list(getattr(again, name)) == list(getattr(direct, name)) for name in PER_REQUEST)
    # and merging a single replica's run gives back the same figures and timeline
    merged = merge_runs(s, direct.options, work, route(work, 1), [direct])
    for name in PER_REQUEST:
        assert list(getattr(merged, name)) == list(getattr(direct, name)), name
    for a, b in zip(merged.timeline, direct.timeline, strict=True):
        assert list(a) == list(b)


def test_the_issue_case_matches_one_replica_at_an_eighth_of_the_rate(run_cli):
    # llama-3.1-8b on 8 x H100 as TP1 x DP8 at 2 requests/s, 100 requests of 1,000 + 30,000 tokens: each replica
    # gets 12 or 13 requests, each needing ceil((1,000 + 30,000 - 1) / 16) = 1,938 blocks; 13 x 1,938 = 25,194
    # fit the 27,818-block pool less its 278-block watermark at once, so nothing is preempted (one pool taking all
    # 100 must preempt: 100 x 1,938 is far past 27,818). Its TPOT is a replica's with 12 or 13 requests at 0.25/s.
    base = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "-f", "json")
    dp8 = json.loads(run_cli("simulate", *base, "--rate", "2", "--requests", "100").out)
    assert dp8["parallelism"]["dp"] == 8 and dp8["replica"]["kv_blocks"] == 27_818
    assert dp8["recompute_rate"] == 0 and dp8["preemptions"] == 0 and dp8["peak_running_requests"] == 13
    one = (*base, "--dp", "1", "--gpus", "1")
    alone = json.loads(run_cli("simulate", *one, "--rate", "2", "--requests", "100").out)
    assert alone["recompute_rate"] > 0.5
    eighth = json.loads(run_cli("simulate", *one, "--rate", "0.25", "--requests", "13").out)
    assert eighth["recompute_rate"] == 0
    assert dp8["tpot_seconds_p50"] == pytest.approx(eighth["tpot_seconds_p50"], rel=0.06)
    assert dp8["tpot_seconds_p50"] < 0.5 * alone["tpot_seconds_p50"]


def test_the_summed_timeline_adds_the_other_replicas_state_at_each_mark():
    from kvplan.calc.simulate import _sum_timelines

    def tl(marks):
        m = np.array(marks, dtype=float)
        return (m[:, 0], *(m[:, j].astype(np.int64) for j in range(1, 5)))

    # replica A: a run from 0 s (10 blocks, 1 running) to 10 s (110 blocks); replica B: a run from 5 s (20 blocks,
    # 2 running, 1 swapped, 7 B of DRAM) to 15 s (40 blocks)
    a = tl([(0, 10, 1, 0, 0), (10, 110, 1, 0, 0)])
    b = tl([(5, 20, 2, 1, 7), (15, 40, 2, 1, 7)])
    t, used, running, swapped, dram = _sum_timelines([a, b])
    assert list(t) == [0, 5, 10, 15]
    # at 0 s B has not started; at 5 s A is halfway through its run: 10 + (110 - 10) x 5 / 10 = 60 blocks, plus
    # B's 20; at 10 s B is halfway: 20 + (40 - 20) x 5 / 10 = 30, plus A's 110; at 15 s A is done: B's 40
    assert list(used) == [10, 60 + 20, 110 + 30, 40]
    assert list(running) == [1, 1 + 2, 1 + 2, 2]     # a run's batch is its start's; a replica done adds nothing
    assert list(swapped) == [0, 1, 1, 1] and list(dram) == [0, 7, 7, 7]


def test_a_timed_trace_is_routed_in_arrival_order(run_cli, tmp_path):
    from test_json_contract import numeric_paths  # tests/ is on sys.path

    trace = tmp_path / "trace.csv"
    trace.write_text("prompt_tokens,output_tokens,arrival_s\n1000,50,0\n1000,60,0.5\n1000,70,1\n1000,80,1.5\n"
                     "1000,90,2\n")
    csv = run_cli("simulate", *TINY, "--dp", "2", "--trace", str(trace), "-f", "csv").out.splitlines()
    assert [line.split(",")[-1] for line in csv[2:]] == ["0", "1", "0", "1", "0"]
    doc = json.loads(run_cli("simulate", *TINY, "--dp", "3", "--trace", str(trace), "-f", "json").out)
    assert doc["generated_tokens"] == 50 + 60 + 70 + 80 + 90 and doc["replicas_serving"] == 3
    missing = sorted(set(numeric_paths(doc)) - set(doc["derivations"]))
    assert not missing, missing


def test_attention_dp_ranks_say_their_coupling_is_not_modelled(run_cli):
    args = ("-m", "deepseek-r1", "-g", "h200", "--nodes", "2", "--tp", "8", "--kv-dtype", "fp8", "--engine",
            "sglang", "--rate", "1", "--requests", "4", "--prompt", "1000", "--decode", "10", "-f", "json")
    coupled = json.loads(run_cli("simulate", *args, "--dp", "2", "--ep", "16").out)
    assert any("EP=16 spans the 2 DP ranks" in n for n in coupled["notes"])
    apart = json.loads(run_cli("simulate", *args, "--dp", "2").out)      # EP inside each TP group: no coupling
    assert apart["replicas"] == 2 and not any("spans the" in n for n in apart["notes"])


def test_swaps_and_their_bytes_add_up_over_the_replicas():
    from kvplan.calc.simulate import SimOptions, plan_simulate, simulate

    # twelve requests of 1,000 + 1,001 tokens at 0 s on two replicas: each gets six, which overfill its 500-block
    # pool (the six-request case above), so each swaps; the deployment's swaps and bytes are the two replicas' sums
    o = SimOptions(policy="swap")
    plan = plan_simulate(_scenario(2), _open([1000] * 12, [1001] * 12, [0.0] * 12), o)
    six = simulate(_scenario(1), _open([1000] * 6, [1001] * 6, [0.0] * 6), o)
    assert six.swap_outs.sum() > 0
    m = plan.metrics
    assert m["swap_out_count"].value == 2 * int(six.swap_outs.sum())
    assert m["swapped_bytes"].value == 2 * six.swapped_out_bytes
    assert m["peak_dram_bytes_per_gpu"].value == six.peak_dram_bytes        # per GPU: one replica's
    assert m["swap_out_per_second"].value == pytest.approx(2 * int(six.swap_outs.sum()) / six.simulated_seconds)


# --- attention DP: one forward for every rank (pd21v, costs.LOCKSTEP_SOURCE / PASS_SHARING_SOURCE) -----------------
# Qwen3-30B-A3B on two H100s, TP1 DP2 EP2, fp8 weights, 2,000-token prompts. The routed experts' FLOPs per token on one
# GPU: 48 layers x 8 experts x 3 matrices x 2,048 x 768 = 1,811,939,328 weights, x 2 FLOPs / 2 GPUs (EP2) =
# 1.811939328 GFLOP, at the prefill rate 692.3 TFLOP/s (the fp8 peak x prefill_mfu).
QWEN_DP2 = ("-m", "qwen3-30b-a3b", "-g", "h100-sxm", "--tp", "1", "--dp", "2", "--ep", "2", "--prompt", "2000")


def _qwen_rank():
    from kvplan.calc import costs
    from kvplan.scenario import Scenario

    s = Scenario(model="qwen3-30b-a3b", hardware="h100-sxm", tp=1, dp=2, ep=2, prompt_tokens=2000, decode_tokens=1)
    return costs.step_model(s)


def test_two_ranks_prefilling_in_one_pass_share_it_by_hand():
    # Both ranks' prompts wait at the same iteration: SGLang's scheduler picks a prefill on each rank and all-gathers
    # the two batches into one forward (scheduler_dp_attn_mixin.py prepare_mlp_sync_batch_raw), attention on each
    # rank, the experts over both ranks' 4,000 tokens. One pass, on each rank's clock: the prompt alone (T1 = 23.659
    # ms, the cost model's prefill price) + the other prompt's routed FLOPs on this GPU, 2,000 x 1.811939328 GFLOP /
    # 692.3 TFLOP/s = 5.234549 ms: 28.893561 ms, the prefill role's price (experts over EP / R = 1 GPU a prompt).
    from dataclasses import replace

    sm = _qwen_rank()
    assert sm.lockstep_ranks == 2 and sm.prefill_flops_s == pytest.approx(692.3e12, rel=1e-6)
    t1 = sm.prefill_seconds(2000)
    assert t1 == pytest.approx(0.023659012, rel=1e-7)
    both = replace(sm, pass_ranks=2.0)
    assert both.prefill_seconds(2000, lockstep=True) == pytest.approx(t1 + 2000 * 1.811939328e9 / 692.3e12, rel=1e-6)
    assert both.prefill_seconds(2000, lockstep=True) == pytest.approx(0.028893561, rel=1e-7)
    assert both.prefill_seconds(2000, lockstep=True) == pytest.approx(sm.prefill_seconds(2000, 0, None, 1), rel=1e-12)


def test_two_ranks_prefilling_apart_by_hand(run_cli):
    # Two requests, one per rank (round-robin), each a 2,000-token prompt and one output token, at different
    # iterations. Rank 0's own pass T1 = 23.659012 ms stalls its decode and gives its first token (TTFT = T1; the
    # neutral engine has no frontend latency); rank 1's pass, in which rank 0 runs its decode step (SGLang keeps a
    # decoding rank's batch in the forward: dp_attn.py maybe_convert_decode_to_extend, v0.5.23), lengthens that step
    # from the least step s1 = 7.391260 ms (batch 1, no rate to size a batch) to T1: 16.267752 ms more. Each rank's
    # clock: 23.659012 + 16.267752 = 39.926764 ms; the two ranks' prefill stall 79.853527 ms (each rank's one
    # request: no arrival rate, N = 1 prompt a pass). Before pd21v: 2 x 2 x T1 = 94.636 ms.
    sm = _qwen_rank()
    assert float(sm.step(1, 0.0, 0.0)["total"]) == pytest.approx(0.007391260, rel=1e-6)
    d = json.loads(run_cli("simulate", *QWEN_DP2, "--decode", "1", "--requests", "2", "--rate", "1", "-f",
                           "json").out)
    assert d["ttft_seconds_p99"] == pytest.approx(0.023659012, rel=1e-7)
    assert d["prefill_stall_seconds"] == pytest.approx(2 * (0.023659012 + (0.023659012 - 0.007391260)), rel=1e-6)
    assert d["prefill_stall_seconds"] == pytest.approx(0.079853527, rel=1e-6)


def test_prompts_that_arrive_during_a_pass_share_the_next():
    # costs.PASS_SHARING_SOURCE: N = Lambda T + e^(-Lambda T), 1 .. R, Lambda = R x the rate a rank, T one prompt's
    # pass alone. At Lambda T = 1 (rate = 1 / (2 x 23.659 ms) = 21.134 a second a rank): N = 1 + 1/e = 1.367879; at
    # rate 0: 1; far above: R = 2. Each prompt then costs a rank's clock its own pass with the experts of N prompts,
    # T1 + (N - 1) x 5.234549 ms, plus R / N - 1 other passes less its decode step (least: 7.391260 ms).
    import math

    sm = _qwen_rank()
    t1 = sm.prefill_seconds(2000)
    rate = 1 / (2 * t1)
    assert sm.shared_pass_ranks(rate, 2000) == pytest.approx(1 + 1 / math.e, rel=1e-12)
    assert sm.shared_pass_ranks(0.0, 2000) == 1.0 and sm.shared_pass_ranks(100 * rate, 2000) == 2.0
    n = 1 + 1 / math.e
    shared = sm.with_pass_sharing(rate, 2000)
    assert shared.pass_ranks == pytest.approx(n, rel=1e-12)
    own = t1 + (n - 1) * 2000 * 1.811939328e9 / 692.3e12
    assert shared.prefill_seconds(2000, lockstep=True) == pytest.approx(own + (2 / n - 1) * (own - 0.007391260),
                                                                        rel=1e-6)


def test_a_ranks_rate_is_its_arrivals_or_its_closed_loops_cycle():
    # simulate sizes N from the rank's own requests: open arrivals (n - 1) / their span; a closed loop of U users
    # U / (think + D x the steady step of U + one prompt's pass alone). And its decode step a pass runs inside: a
    # closed loop's step at U; an open one's by Little's law, B = rate x D x step(B).
    from kvplan.calc.simulate import _rate_per_rank
    from kvplan.inputs.workload import Workload

    sm = _qwen_rank()
    P, L = np.array([2000] * 5), np.array([100] * 5)
    w = _open(P, L, [0.0, 0.5, 1.0, 1.5, 2.0])
    assert _rate_per_rank(sm, w, P, L) == pytest.approx(4 / 2.0)
    loop = Workload(P, L, None, 4, 0.5, None, "test")
    cycle = 0.5 + 100 * float(sm.steady_tpot(2000, 100, 4)) + sm.prefill_seconds(2000)
    assert _rate_per_rank(sm, loop, P, L) == pytest.approx(4 / cycle, rel=1e-12)
    closed = sm.with_pass_sharing(4 / cycle, 2000, None, 100, 4)
    assert closed.pass_credit == pytest.approx(float(sm.steady_tpot(2000, 100, 4)), rel=1e-12)
    b = 1.0
    for _ in range(8):
        b = max(1.0, 2.0 * 100 * float(sm.steady_tpot(2000, 100, b)))
    assert sm.with_pass_sharing(2.0, 2000, None, 100).pass_credit == pytest.approx(
        float(sm.steady_tpot(2000, 100, b)), rel=1e-12)


def test_a_mixed_step_shared_by_two_ranks_adds_the_other_chunks_experts():
    # vLLM's mixed step under attention DP: both ranks' alike 2,000-token chunks in one pass (N = R = 2) add the other
    # chunk's routed FLOPs on this GPU, 2,000 x 1.811939328 GFLOP / 692.3 TFLOP/s = 5.234549 ms, and no other pass
    # (R / N - 1 = 0); one rank's chunk alone (N = 1) is its pass plus the other rank's pass, both alike.
    from dataclasses import replace

    sm = _qwen_rank()
    alone = replace(sm, lockstep_ranks=1).mixed_parts(0, 0.0, 0.0, ((0, 2000),))[0]
    both = replace(sm, pass_ranks=2.0).mixed_parts(0, 0.0, 0.0, ((0, 2000),))[0]
    assert both == pytest.approx(alone + 2000 * 1.811939328e9 / 692.3e12, rel=1e-9)
    assert sm.mixed_parts(0, 0.0, 0.0, ((0, 2000),))[0] == pytest.approx(2 * alone, rel=1e-12)


def test_two_prompts_close_together_on_a_rank_share_their_passes():
    # One rank of the TP1 DP2 EP2 pair receives two 2,000-token prompts (one output token each) T1 / 2 apart (T1 =
    # 23.659012 ms): its rate, 1 / (T1 / 2), puts x = 2 x rate x T1 = 4 and N = min(2, 4 + e^-4) = 2, so each
    # prompt is one pass of both ranks' prompts, T2 = 28.893561 ms, and no other pass (R / N - 1 = 0). The first
    # prompt's first token at T2; the second waits for it: 2 x T2 - T1 / 2 = 45.957761 ms after its arrival.
    from kvplan.calc.simulate import simulate
    from kvplan.scenario import Scenario

    t1, t2 = 0.023659012, 0.028893561
    s = Scenario(model="qwen3-30b-a3b", hardware="h100-sxm", tp=1, dp=2, ep=2, prompt_tokens=2000, decode_tokens=1)
    run = simulate(s, _open([2000, 2000], [1, 1], [0.0, t1 / 2]))
    ttft = np.asarray(run.first_token) - np.asarray(run.arrival)
    assert ttft == pytest.approx([t2, 2 * t2 - t1 / 2], rel=1e-6)
