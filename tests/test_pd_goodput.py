"""`kvplan pd`'s goodput: the prefill queue against queueing theory, the closed form of a constant-length batch, and
the per-role layout search on a case worked by hand."""

import pytest

from kvplan.calc.pd import PdOptions, _prefill_ttft, prefill_queue_waits
from kvplan.calc.slo import SloTargets, steady_batch


def pd_json(run_cli, *args):
    r = run_cli("pd", *args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.8])
def test_one_prefill_instance_waits_as_pollaczek_khinchine_says(rho):
    # M/D/1: Poisson arrivals at rate l, one server of fixed service T, rho = l T. The Pollaczek-Khinchine mean wait
    # is rho T / (2 (1 - rho)) (Kleinrock, Queueing Systems vol. 1, eq. 5.105 with a deterministic service's second
    # moment T^2): T = 0.1 s gives 21.4 ms at 0.3, 50 ms at 0.5, 200 ms at 0.8.
    t = 0.1
    waits = prefill_queue_waits(rho / t, 1, t, requests=200_000)
    assert waits.mean() == pytest.approx(rho * t / (2 * (1 - rho)), rel=0.05)


def test_more_prefill_instances_split_the_queue():
    # c servers: start_i = max(arrival_i, start_(i-c) + T). Arrivals 1 ms apart on average against T = 10 ms: one
    # server is overloaded (rho = 10), but 20 servers (rho = 0.5 each) leave almost nobody waiting; M/D/c at
    # rho 0.5 with c = 20 waits on average far below one service time.
    t = 0.01
    assert prefill_queue_waits(1000.0, 1, t, requests=2000).mean() > 1.0
    assert prefill_queue_waits(1000.0, 20, t, requests=20_000).mean() < 0.1 * t


def test_a_constant_length_batch_has_its_goodput_in_closed_form():
    # 10 equal requests of 101 output tokens, TTFT 0.5 s, TPOT 20 ms: each spends 0.5 + 100 x 0.02 = 2.5 s in the
    # system, so Little's law serves 10 / 2.5 = 4 requests/s = 404 output tokens/s, all meeting TTFT 1 s and
    # TPOT 25 ms; a 0.4 s TTFT target fails every request alike: attainment 0, goodput 0.
    ok = steady_batch(10, 0.5, 0.02, 101, SloTargets(ttft=1.0, tpot=0.025))
    assert ok.requests_per_second.value == pytest.approx(4.0)
    assert ok.tokens_per_second.value == pytest.approx(404.0)
    assert ok.attainment.value == 1.0 and ok.verdict.meets
    miss = steady_batch(10, 0.5, 0.02, 101, SloTargets(ttft=0.4, tpot=0.025))
    assert miss.attainment.value == 0.0 and miss.verdict.decided_by == "TTFT p99"
    assert miss.tokens_per_second.value == 0.0


def test_a_ttft_target_holds_the_disaggregated_rate_at_the_queue():
    # The goodput rate is the highest at which the simulated p99 TTFT meets the target: just above it (0.5% more,
    # past the 0.1% bisection) the same queue misses.
    t_pf, fixed, n_p = 0.1, 0.12, 1
    targets = PdOptions(targets=SloTargets(ttft=0.5, tpot=0.05)).targets
    lo = 0.1
    hi = 1 / t_pf
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _prefill_ttft(mid, n_p, t_pf, fixed, targets)[2] else (lo, mid)
    ttft, wait, ok = _prefill_ttft(lo, n_p, t_pf, fixed, targets)
    assert ok and ttft <= 0.5 and ttft == pytest.approx(wait + fixed)
    assert not _prefill_ttft(lo * 1.005, n_p, t_pf, fixed, targets)[2]


LLAMA_16K = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "3", "--tp", "1", "--kv-dtype", "fp8", "--prompt", "16k",
             "--decode", "300", "--ttft-slo", "400ms")


def test_only_tp2_prefill_and_tp1_decode_meet_the_ttft_target(run_cli):
    # Llama-3.1-8B, a 16,000-token prompt: 2 x 6.98e9 matmul params x 16,000 = 2.23e14 FLOPs plus causal attention
    # 4 x 32 layers x 4,096 x 16,000^2 / 2 = 6.7e13, 2.9e14 in all, at 0.70 x 989 TFLOP/s (H100 bf16 dense) = 0.42 s
    # on one GPU, ~0.23 s on two. With a 400 ms p99 TTFT on 3 GPUs: a TP1 prefill misses even unloaded; TP2 + TP2
    # needs 4 GPUs; so the one split that serves anything is 1 x TP2 prefill + 1 x TP1 decode.
    d = pd_json(run_cli, *LLAMA_16K)
    assert (d["prefill_tp"], d["prefill_instances"], d["decode_tp"], d["decode_instances"]) == (2, 1, 1, 1)
    assert 0.2 < d["ttft_seconds_disaggregated"] < 0.3          # unloaded: T_pf(TP2) + transfer + 2 ms handover
    assert d["disaggregated_requests_per_second"] > 0 and d["ttft_seconds_disaggregated_p99"] <= 0.4
    assert d["disaggregated_limited_by"] == "TTFT p99"
    # pinning the prefill to one GPU leaves only TP1 prefill: unloaded TTFT ~0.48 s, no rate meets 400 ms
    pinned = pd_json(run_cli, *LLAMA_16K, "--prefill-gpus", "1")
    assert pinned["prefill_tp"] == 1 and pinned["ttft_seconds_disaggregated"] > 0.4
    assert pinned["disaggregated_requests_per_second"] == 0 and pinned["disaggregated_meets_slo"] is False


def test_no_goodput_on_either_side_is_said_not_priced_as_an_infinite_ratio(run_cli):
    # a 1 us TTFT target: a 16,000-token prefill takes ~0.2-0.5 s (above), so neither side serves any rate; 0 / 0
    # is no ratio, and a split against no colocated goodput is no multiple of it
    r = run_cli("pd", *LLAMA_16K[:-1], "1us")
    assert r.code == 0, r.err
    assert "infx" not in r.out and "inf x" not in r.out
    assert "neither meets the targets, the bar is 1.05x" in r.out.replace("\n", " ")


def test_the_margin_wobble_is_the_integer_split(run_cli):
    # Llama-3.1-8B / H100 / TP1 / fp8 / 300 out on 8 GPUs: the goodput ratio over 2K, 4K, 8K, 16K prompts moved
    # 0.99, 0.95, 1.01, 1.06 because 8 one-GPU instances split only in whole instances (5 + 3 at 4K leaves 12% of
    # the fractional split's rate unserved). With no TTFT target the margin is exactly (integer / fractional split)
    # x (fractional split / colocated), both in the output; the fractional margins spread less than the integer
    # ones, and the verdict does not flip back and forth.
    margins, fluid, verdicts = [], [], []
    for prompt in ("2k", "4k", "8k", "16k"):
        d = pd_json(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-dtype", "fp8", "--prompt",
                    prompt, "--decode", "300")
        assert d["split_efficiency"] <= 1.0
        assert d["disaggregated_capacity_requests_per_second"] == pytest.approx(
            d["split_efficiency"] * d["fluid_requests_per_second"])
        assert d["disaggregated_over_colocated"] == pytest.approx(d["split_efficiency"] * d["fluid_over_colocated"])
        assert "fractional split" in d["decided_by"][1]
        margins.append(d["disaggregated_over_colocated"])
        fluid.append(d["fluid_over_colocated"])
        verdicts.append(d["recommend_disaggregation"])
    assert max(fluid) - min(fluid) < max(margins) - min(margins)
    assert verdicts in (sorted(verdicts), sorted(verdicts, reverse=True))


def test_a_role_layout_leaves_the_other_role_an_instance(run_cli):
    # Llama-3.1-8B on 8 H100s: TP 1, 2, 4 and 8 divide its 8 KV heads, but TP8 takes all 8 GPUs and leaves the other
    # role none, so the search has 3 layouts; every split fits in the 8 GPUs.
    d = pd_json(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-dtype", "fp8", "--prompt", "4k",
                "--decode", "300")
    assert d["role_layouts"] == 3
    assert d["prefill_instances"] * d["prefill_tp"] + d["decode_instances"] * d["decode_tp"] <= 8


def test_pd_and_a_sweep_agree_on_the_colocated_goodput(run_cli):
    # One SLO model: pd's colocated goodput per instance is a --sweep-rate point. The same requests (fixed 4K + 300,
    # Poisson, seed 0, the count pd simulated) swept at that rate and at the first rate pd found missing give the
    # same TPOT and TTFT p99, meet at the goodput and miss above it, so the sweep's goodput is pd's rate.
    args = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-dtype", "fp8", "--prompt", "4k", "--decode",
            "300")
    d = pd_json(run_cli, *args)
    rate = d["colocated_requests_per_second"] / d["instances"]
    above = float(d["decided_by"][0].split("; ")[-1].split(" requests/s misses")[0])
    one = [*args[:4], "--tp", str(d["colocated_tp"]), *args[6:]]      # one instance of the colocated layout found
    r = run_cli("simulate", *one, "--dp", "1", "--requests", str(d["colocated_requests_per_rate"]), "--seed", "0",
                "--sweep-rate", f"{rate!r}:{above * 1.001!r}:2", "--tpot-slo", "50ms", "-f", "json")
    assert r.code == 0, r.err
    s = r.json()
    assert s["goodput_requests_per_second"] == pytest.approx(rate, rel=1e-12)
    at = s["sweep"][0]
    assert at["tpot_seconds_p99"] == pytest.approx(d["tpot_seconds_colocated_p99"], rel=1e-9)
    assert at["ttft_seconds_p99"] == pytest.approx(d["ttft_seconds_colocated_p99"], rel=1e-9)
    assert s["sweep"][1]["decided_by"] is not None


def test_attention_dp_layouts_hold_the_model_or_are_left_out():
    # DeepSeek-R1 on 16 H200 (141 GB each), fp8: 58 MoE layers x 256 routed experts x 3 x 7,168 x 2,048 = 653.9e9
    # expert parameters of its ~671e9, the rest (~17e9: attention, dense layers, embeddings) on every rank. Attention
    # DP spreads the experts over EP = TP x DP GPUs: EP8 holds 653.9 / 8 = 81.7 GB + the rest (/ TP) < 141 GB; EP4
    # needs 163.5 GB of experts alone, more than the GPU: TP1 DP4 EP4 and TP2 DP2 EP4 are left out, TP1 DP8 EP8 and
    # TP2 DP4 EP8 and TP4 DP2 EP8 kept; TP1 with no EP (671 GB on one GPU) never. A role leaves the other role an
    # instance: no layout of 16 GPUs.
    from kvplan.calc.pd import PdOptions, RoleLayout, role_layouts
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=4000,
                 decode_tokens=300)
    lays = {lay for lay, _ in role_layouts(s, PdOptions())}
    assert {RoleLayout(1, 1, 8, 8), RoleLayout(2, 1, 8, 4), RoleLayout(4, 1, 8, 2)} <= lays
    assert not {RoleLayout(1, 1, 4, 4), RoleLayout(2, 1, 4, 2), RoleLayout(1), RoleLayout(1, 1, 16, 16)} & lays
    assert RoleLayout(1, 1, 8, 8).gpus == 8 and RoleLayout(1, 1, 8, 8).label == "TP1 DP8 EP8"
    assert all(lay.gpus <= 15 for lay in lays)


def test_an_attention_dp_instance_serves_every_rank(run_cli):
    # The 4K + 300 chat case on 16 H200 (DeepSeek-R1, fp8 KV, TTFT p99 2 s): an attention-DP instance's ranks each
    # prefill their own prompts (k = 8,192 // 4,000 = 2 a pass when saturated) and decode their own batch, so a
    # split's capacity is min(n_p x R_p x k / max(T(k), k x transfer), n_d x R_d x B / (D x TPOT)), R the ranks; its
    # prefill queue has n_p x R_p servers. Colocated on an
    # attention-DP layout serves (16 / 8 instances) x 8 ranks x the rate of one rank.
    d = pd_json(run_cli, "--nodes", "2", "--kv-dtype", "fp8", "--prompt", "4k", "--decode", "300",
                "--ttft-slo", "2s")
    r_p, r_d = d["prefill_attention_dp"], d["decode_attention_dp"]
    assert r_p > 1 or r_d > 1                 # attention DP is what the search found for MLA + MoE here
    assert d["prefill_ep"] == d["prefill_tp"] * r_p and d["decode_ep"] == d["decode_tp"] * r_d
    used = d["prefill_instances"] * d["prefill_tp"] * r_p + d["decode_instances"] * d["decode_tp"] * r_d
    assert used <= 16
    assert d["prefill_prompts_per_pass"] == 2
    service = d["prefill_seconds_per_prompt_packed"]
    cap = min(d["prefill_instances"] * r_p / service,
              d["decode_instances"] * r_d * d["decode_batch"] / (300 * d["tpot_seconds_decode"]))
    assert d["disaggregated_capacity_requests_per_second"] == pytest.approx(cap)
    # colocated: attention-DP ranks step together, so each rank's decode stalls for every rank's 4K prefill (8 x
    # 215 ms per request on TP1 DP8 EP8, costs.LOCKSTEP_SOURCE); the TP8 instances (2 of 8 GPUs) serve more, each at
    # the rate the verdict names per instance
    assert (d["instances"], d["gpus_per_instance"], d["colocated_tp"]) == (2, 8, 8)
    per = float(d["decided_by"][0].split("goodput ")[1].split(" requests/s per instance")[0])
    assert d["colocated_requests_per_second"] == pytest.approx(2 * per, rel=1e-2)


def test_an_attention_dp_prefill_role_queues_over_every_rank(run_cli):
    # The split's TTFT p99 is the simulated queue over n_p x R_p servers (each attention-DP rank prefills its own
    # prompts, up to k = 2 waiting ones a pass) at the goodput rate, a pass of one prompt holding its rank for
    # max(T_pf, transfer) and of two for 2 x the packed time per prompt, + the unloaded TTFT: recomputed here from
    # the output's own figures.
    import numpy as np

    d = pd_json(run_cli, "--nodes", "2", "--kv-dtype", "fp8", "--prompt", "4k", "--decode", "300", "--ttft-slo", "2s")
    servers = d["prefill_instances"] * d["prefill_attention_dp"]
    assert servers > d["prefill_instances"]
    assert d["prefill_prompts_per_pass"] == 2
    held = (max(d["prefill_seconds_disaggregated"], d["kv_transfer_seconds"]),
            2 * d["prefill_seconds_per_prompt_packed"])
    waits = prefill_queue_waits(d["disaggregated_requests_per_second"], servers, held)
    assert d["prefill_wait_seconds_p99"] == pytest.approx(float(np.percentile(waits, 99)), rel=1e-9)
    assert d["ttft_seconds_disaggregated_p99"] == pytest.approx(d["prefill_wait_seconds_p99"]
                                                                + d["ttft_seconds_disaggregated"], rel=1e-9)


def test_a_saturated_attention_dp_prefill_shares_the_experts():
    # DeepSeek-R1 routes each token to 8 of its 256 experts (3 x 7,168 x 2,048 parameters each) in 58 MoE layers:
    # 2 x 8 x 3 x 7,168 x 2,048 x 58 = 40.9e9 routed FLOPs a token. Prefilled alone, a rank of TP1 DP8 EP8 spreads
    # them over the 8 GPUs that hold the experts; with all 8 ranks prefilling at once (pd's saturated prefill role)
    # each GPU also runs the other ranks' tokens, so a rank's prompt has EP / DP = 1 GPU's worth: the compute-bound
    # 4,000-token prompt (one chunk) takes 40.9e9 x 4,000 x (1 - 1/8) FLOPs more, at the step's prefill rate.
    from kvplan.calc.pd import PdOptions, _Model
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=4000,
                 decode_tokens=300)
    m = _Model(s.with_(tp=1, dp=8, ep=8), PdOptions(chunked=False))
    routed = 2 * 8 * 3 * 7168 * 2048 * 58
    assert m.step.moe_flops_per_token == pytest.approx(routed, rel=1e-3)
    alone = m.step.prefill_seconds(4000)
    assert m.step.prefill_seconds(4000, expert_gpus=8) == alone            # the EP group is the default
    assert m.prefill(4000) - alone == pytest.approx(routed * 4000 * (1 - 1 / 8) / m.step.prefill_flops_s, rel=1e-3)
    # a plain TP8 instance (no attention DP) keeps its EP group's spread
    plain = _Model(s.with_(tp=8, dp=1, ep=8), PdOptions(chunked=False))
    assert plain.prefill(4000) == plain.step.prefill_seconds(4000)


def test_a_layout_that_cannot_beat_the_best_stops_early_with_the_same_answers():
    # colocated_goodput(beat=...) returns None only where its answer could not end above ``beat``, and the same
    # answer as without it otherwise. Llama-3.1-8B TP1, 600 + 300: the rate meets at the closed form's top and the
    # search gallops up, so the answer lies above top, here at the rate the pool-capped batch sustains (976
    # requests, the pool at their full 900 tokens); at 4,000 + 300 top misses and the search comes down.
    from kvplan.calc.pd import PdOptions, _Model
    from kvplan.scenario import Scenario

    s = Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, gpus=1, kv_dtype_request="fp8", prompt_tokens=600,
                 decode_tokens=300)
    m = _Model(s, PdOptions())
    side, _, _ = m.colocated(600, 300)
    top = side.requests_per_second
    rate, point, miss = m.colocated_goodput(s, top, side.batch)
    cap = m.sustained(600, 300)[0]
    assert rate > top and rate == pytest.approx(cap, rel=1e-12) and miss is None
    again = m.colocated_goodput(s, top, side.batch, beat=rate * 0.999)
    assert again is not None and again[0] == rate
    assert m.colocated_goodput(s, top, side.batch, beat=cap) is None      # no colocated rate above it
    s = s.with_(prompt_tokens=4000)
    side, _, _ = m.colocated(4000, 300)
    rate, point, miss = m.colocated_goodput(s, side.requests_per_second, side.batch)
    assert rate < side.requests_per_second and miss is not None
    again = m.colocated_goodput(s, side.requests_per_second, side.batch, beat=rate * 0.999)
    assert again is not None and again[0] == rate
    assert m.colocated_goodput(s, side.requests_per_second, side.batch, beat=miss.rate) is None


def test_no_colocated_rate_is_simulated_twice(monkeypatch):
    # Llama-3.1-8B TP1 on 8 GPUs: the scenario's own layout is also the TP1 role layout; each (replica, rate) is
    # simulated once per prompt length (it was twice, every row of the table).
    import kvplan.calc.simulate as sim
    from kvplan.calc.pd import plan_pd
    from kvplan.scenario import Scenario

    seen = []
    real = sim.simulated_rate

    def counted(scenario, rate, *a, **k):
        seen.append((scenario, rate))
        return real(scenario, rate, *a, **k)

    monkeypatch.setattr(sim, "simulated_rate", counted)
    plan_pd(Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, kv_dtype_request="fp8", prompt_tokens=4000,
                     decode_tokens=300))
    assert seen and all(seen[i] != seen[j] for i in range(len(seen)) for j in range(i))


def test_attention_dp_ranks_in_lockstep_stall_for_every_ranks_prefill():
    # SGLang runs every attention-DP rank's batch in one forward (a rank's decode batch keeps decoding in a pass where
    # another rank prefills) and vLLM runs dummy passes on idle ranks (costs.LOCKSTEP_SOURCE): a prefill on one rank
    # holds all R ranks' MoE layers. Alone (N = 1 prompt a pass: no rate given) each of the R ranks' alike prefills
    # is a pass of its own on a rank's clock: its own pass T stalls its decode, each of the R - 1 others lengthens one
    # of its decode steps from that step (here the least, batch 1, s1) to T: T + (R - 1) x (T - s1). A step mixing a
    # chunk into the decode batch (vLLM V1): its own pass M plus R - 1 steps lengthened from the decode step alone A
    # to M: M + (R - 1) x (M - A). Without attention DP (TP8 EP8, EP inside the TP group) R = 1.
    from dataclasses import replace

    from kvplan.calc import costs
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", nodes=2, kv_dtype_request="fp8", prompt=4000, decode=300)
    rank = costs.step_model(s.with_(tp=1, dp=8, ep=8))
    assert rank.lockstep_ranks == 8 and rank.pass_ranks == 1.0
    assert costs.step_model(s.with_(tp=8, dp=2, ep=8)).lockstep_ranks == 1
    assert costs.step_model(s.with_(tp=2, dp=4, ep=8)).lockstep_ranks == 4
    # --dp 16 --ep 8 at TP1: two EP groups of 8 ranks each, each in lockstep on its own
    assert costs.step_model(s.with_(tp=1, dp=16, ep=8)).lockstep_ranks == 8
    alone = rank.prefill_seconds(4000, 0, 8192)
    s1 = float(rank.step(1, 0.0, 0.0)["total"])
    assert rank.prefill_seconds(4000, 0, 8192, lockstep=True) == pytest.approx(alone + 7 * (alone - s1), rel=1e-12)
    one = replace(rank, lockstep_ranks=1)
    assert one.prefill_seconds(4000, 0, 8192, lockstep=True) == pytest.approx(alone, rel=1e-12)
    cache, att = rank.steady_cache(4000, 300)
    m1, a1 = one.mixed_parts(22, 22 * cache, 22 * att, ((0, 4000),))
    m8, a8 = replace(rank, lockstep_ranks=8).mixed_parts(22, 22 * cache, 22 * att, ((0, 4000),))
    assert a8 == pytest.approx(a1) and m1 > a1
    assert m8 == pytest.approx(m1 + 7 * (m1 - a1), rel=1e-12)
    # a pass of a chunk with no decode batch: all R chunks' passes
    c1, _ = one.mixed_parts(0, 0.0, 0.0, ((0, 4000),))
    assert replace(rank, lockstep_ranks=8).mixed_parts(0, 0.0, 0.0, ((0, 4000),))[0] == pytest.approx(8 * c1)
    # the colocated closed form prices the same lockstep prefill (rate 0: N = 1, the least step credited), and at its
    # own rate no more than that and no less than one pass of every rank's prompt
    from kvplan.calc.pd import PdOptions, _Model

    m = _Model(s.with_(tp=1, dp=8, ep=8), PdOptions())
    assert m.colocated_prefill(4000) == pytest.approx(alone + 7 * (alone - s1))
    assert rank.prefill_seconds(4000, 0, 8192, 1) <= m.colocated(4000, 300)[2] < alone + 7 * (alone - s1)


@pytest.mark.parametrize("engine", ["neutral", "vllm", "sglang"])
def test_a_lockstep_prefill_stalls_the_ranks_after_its_own_first_token(run_cli, engine):
    # One 4K request on TP1 DP8 EP8 (DeepSeek-R1, fp8 KV, H200): its prompt's own pass is T_pf (the cost model's
    # prefill alone on the EP group), where its first token comes (TTFT = T_pf + the engine's frontend latency); the
    # rank's clock also pays the 7 other ranks' alike prefills after it (symmetric ranks in lockstep, one request: no
    # rate, so N = 1 prompt a pass), each lengthening one of its decode steps from the least step s1 (batch 1) to
    # T_pf: the prefill stall is T_pf + 7 x (T_pf - s1).
    from kvplan.calc import costs
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", kv_dtype_request="fp8", tp=1, dp=8, ep=8, engine=engine, prompt=4000,
                 decode=300)
    chunk = int(s.engine_adapter.batch_limits_for(s)[0].number())
    own = costs.step_model(s).prefill_seconds(4000, 0, chunk)
    front = costs.frontend_seconds(s).number()
    r = run_cli("simulate", "--tp", "1", "--dp", "8", "--ep", "8", "--kv-dtype", "fp8", "--prompt", "4000",
                "--decode", "300", "--requests", "1", "--rate", "1", "--engine", engine, "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    if engine == "sglang":      # SGLang prefills in its own chunks (its scheduler's): the pass ends at the first token
        own = d["ttft_seconds_p99"] - front
        assert own == pytest.approx(costs.step_model(s).prefill_seconds(4000, 0, 2048), rel=0.05)
    if engine == "vllm":
        # vLLM's step runs the chunk on its one all-to-all backend, allgather_reducescatter (costs.
        # MIXED_STEP_A2A_SOURCE): each of the 58 MoE layers moves the 4,000 tokens at 2 x 7,168 x 2 B / (450 GB/s x
        # 0.82) = 0.078 us, not DeepEP's normal-kernel rate prefill_seconds prices: 58 x 4,000 x (0.319 - 0.078) us =
        # 56 ms less a pass
        sm = costs.step_model(s)
        assert sm.mixed_ep_per_token == pytest.approx(2 * 7168 * 2 / (450e9 * 0.82), rel=1e-9)
        own -= 58 * 4000 * (sm.prefill_ep_per_moe_layer[1] - sm.mixed_ep_per_token)
        assert 0.050 < costs.step_model(s).prefill_seconds(4000, 0, chunk) - own < 0.060
    s1 = float(costs.step_model(s).step(1, 0.0, 0.0)["total"])
    if engine == "vllm":      # the mixed step's lockstep: its pass M and 7 steps lengthened from the empty step
        assert d["prefill_stall_seconds"] == pytest.approx(8 * own, rel=1e-9)
    else:
        assert d["prefill_stall_seconds"] == pytest.approx(own + 7 * (own - s1), rel=1e-9)
    assert d["ttft_seconds_p99"] == pytest.approx(own + front, rel=1e-9)


def test_colocated_serving_may_take_an_instance_of_every_gpu():
    # A role must leave the other role a GPU, so on 16 GPUs its layouts take at most 8 (powers of two); colocated
    # serving needs no other role: it may also take all 16 as one attention-DP instance, EP16 over TP x DP = 16 ranks
    # (DeepSeek-R1's 653.9e9 fp8 expert bytes / 16 = 40.9 GB a GPU, with the rest / TP, fits a 141 GB H200).
    from kvplan.calc.pd import PdOptions, role_layouts
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=4000,
                 decode_tokens=300)
    roles = [lay.label for lay, _ in role_layouts(s, PdOptions())]
    whole = [lay.label for lay, _ in role_layouts(s, PdOptions(), colocated=True)]
    assert max(lay.gpus for lay, _ in role_layouts(s, PdOptions())) == 8
    assert whole == ["TP1 DP16 EP16", "TP2 DP8 EP16", "TP4 DP4 EP16", "TP8 DP2 EP16"]
    assert not set(roles) & set(whole)


def test_both_sides_hold_their_batch_at_the_full_context():
    # pd21u (1): DeepSeek-R1 1K + 30K on a TP1 DP8 EP8 rank. A request's MLA latent in fp8 is 61 layers x (512 + 64)
    # bytes = 35,136 B a token, so at its full context of 31,000 tokens it holds 1,089,216,000 B, and at the mean
    # context 16,000 only 562,176,000 B: a pool holding 31 of the first holds 60 of the second. The decode role used
    # the mean (41 requests, TPOT-limited) while colocated's closed loop used the full context (31): one rule now,
    # the full context, so the decode batch is the pool's 31 as colocated's ceiling is.
    from kvplan.calc import capacity
    from kvplan.calc.pd import PdOptions, _Model
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=1000,
                 decode_tokens=30_000)
    m = _Model(s.with_(tp=1, dp=8, ep=8), PdOptions())
    assert capacity.request_bytes(m.s, 31_000) == pytest.approx(31_000 * 61 * 576, rel=2e-3)   # block rounding
    full = m.pool // capacity.request_bytes(m.s, 31_000)
    assert full == 31 and m.pool // capacity.request_bytes(m.s, 16_000) == 60
    assert m.decode_only(1000, 30_000).batch == full == m.ceiling(1000, 30_000)
    assert m.colocated(1000, 30_000)[0].batch <= full


def test_the_colocated_climb_goes_on_until_a_rate_misses():
    # pd21u (3): DeepSeek-R1 300 + 300 on vLLM, a TP1 DP8 EP8 rank. The closed form's rate (top) is far under what the
    # simulated rank serves with vLLM's prefill chunks mixed into decode steps; the climb had stopped at top x 1.25^4
    # and reported a rate whose TPOT p99 was 34 ms against 50. It climbs to the first rate that misses, or to pure
    # decode's rate, which bounds it (since pd21v, where the other ranks' 300-token passes lengthen this rank's
    # decode steps by a few ms, the rank reaches that bound): bracketed within the 2% bisection tolerance by a rate
    # that misses, or at the bound itself with its TPOT p99 under the target.
    from kvplan.calc.pd import COLOCATED_TOLERANCE, PdOptions, _Model
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=300,
                 decode_tokens=300, engine="vllm").with_(tp=1, dp=8, ep=8)
    m = _Model(s, PdOptions())
    side, _, _ = m.colocated(300, 300)
    top = side.requests_per_second
    rate, point, miss = m.colocated_goodput(s.with_(dp=8), top, side.batch)
    assert rate > top * 1.25
    upper = m.decode_only(300, 300).requests_per_second
    assert rate <= upper
    assert point.figures["tpot_seconds_p99"].value <= 0.05
    if miss is None:
        assert rate == pytest.approx(upper, rel=1e-12)
    else:
        assert miss.rate - rate <= COLOCATED_TOLERANCE * miss.rate
        assert miss.figures["tpot_seconds_p99"].value > 0.05


def test_a_short_prompts_margin_is_not_the_lockstep_price(run_cli):
    # pd21u (3) found DeepSeek-R1 300 + 300 on 16 H200s (neutral engine) split at 9.8x: colocated TP1 DP8 EP8 ranks
    # paid every rank's 300-token prompt as a stall of their own (8 x 36 ms). pd21v read the engines' DP loops
    # (costs.LOCKSTEP_SOURCE): one forward for all ranks, a decoding rank keeping its decode batch in a pass where
    # another prefills, so another rank's 36 ms pass costs this rank only what it adds to the decode step it runs
    # inside it (about 35 ms at the rank's batch). Colocated TP1 DP8 EP8 now serves 93 requests/s and the split 155:
    # the neutral engine's own prefill still stalls its rank's decode (1.66x); no lockstep note (its price is under
    # 1.5 x the pass). On vLLM, whose steps mix prefill chunks into the decode batch, colocated serves 191 and wins.
    d = pd_json(run_cli, "--nodes", "2", "--kv-dtype", "fp8", "--prompt", "300", "--decode", "300")
    assert d["recommend_disaggregation"]
    assert d["colocated_tp"] == 1 and d["colocated_attention_dp"] == 8
    ratio = d["disaggregated_requests_per_second"] / d["colocated_requests_per_second"]
    assert 1.3 < ratio < 2.2
    assert not [r for r in d["reasons"] + d["first_screen_notes"] if "passes of other ranks" in str(r)]
    v = pd_json(run_cli, "--nodes", "2", "--kv-dtype", "fp8", "--prompt", "300", "--decode", "300", "--engine", "vllm")
    assert not v["recommend_disaggregation"]
    assert v["colocated_tp"] == 1 and v["colocated_attention_dp"] == 8
    assert v["disaggregated_requests_per_second"] / v["colocated_requests_per_second"] < 1.0


def test_the_chat_cases_first_screen_names_the_lockstep_price(run_cli):
    # DeepSeek-R1 4K + 300 on 16 H200s, TTFT p99 2 s, neutral engine: the split (TP1 DP8 EP8 decode ranks) wins; the
    # first screen says what colocated attention-DP ranks would pay, at the closed form's rate on that layout, r a
    # rank: x = R x r x T1 (T1 one prompt's pass alone), N = x + e^-x prompts a pass (costs.PASS_SHARING_SOURCE), the
    # pass T with the experts' FLOPs of N prompts, s the rank's decode step at its Little's-law batch: T + (R / N - 1)
    # x (T - s), recomputed here from the cost model's pieces.
    import math

    from kvplan.calc.pd import PdOptions, _Model
    from kvplan.calc.slo import SloTargets
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=4000,
                 decode_tokens=300)
    d = pd_json(run_cli, "--nodes", "2", "--kv-dtype", "fp8", "--prompt", "4k", "--decode", "300", "--ttft-slo", "2s")
    assert d["recommend_disaggregation"] and d["decode_attention_dp"] == 8
    text = [str(n) for n in d["first_screen_notes"] if "passes of other ranks" in str(n)]
    assert len(text) == 1
    m = _Model(s.with_(tp=1, dp=8, ep=8), PdOptions(targets=SloTargets(ttft=2.0, tpot=0.05)))
    rate = m.colocated(4000, 300)[0].requests_per_second
    x = 8 * rate * m.step.prefill_seconds(4000, 0, m.chunk)
    n = min(8.0, max(1.0, x + math.exp(-x)))
    own = m.step.prefill_seconds(4000, 0, m.chunk, 8 / n)
    b = 1.0
    for _ in range(8):
        b = min(m.batch_limit(4000, 300), max(1.0, rate * 300 * float(m.step.steady_tpot(4000, 300, b))))
    step = float(m.step.steady_tpot(4000, 300, b))
    lock = own + (8 / n - 1) * (own - step)
    assert f"{8 / n - 1:,.2f} unaligned passes" in text[0]
    assert f"would pay {lock * 1e3:,.1f} ms a prompt" in text[0]
    assert lock > 4 * own          # at the rate the TPOT target allows, few prompts share a pass


def test_an_attention_dp_prefill_role_runs_its_ranks_prompts_in_one_pass(run_cli):
    # pd21u (2): SGLang's prefill role runs every attention-DP rank's prefill batch in one synchronised forward
    # (PREFILL_ROLE_SOURCE), so an instance of R ranks prefills R prompts per pass: the role's T_pf is one pass with
    # each rank's prompt on EP / R = TP of the expert GPUs, never the colocated side's lockstep R x the pass, and its
    # capacity is n_p x R / max(T_pf, transfer). DeepSeek-R1 4K + 300 chat on 16 H200s: the split's prefill layout
    # is TP2 DP4 EP8.
    from kvplan.calc.pd import _Model
    from kvplan.scenario import Scenario

    d = pd_json(run_cli, "--nodes", "2", "--kv-dtype", "fp8", "--prompt", "4k", "--decode", "300", "--ttft-slo", "2s",
                "--explain")
    tp, r = d["prefill_tp"], d["prefill_attention_dp"]
    assert r > 1
    s = Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=4000,
                 decode_tokens=300).with_(tp=tp, dp=r, ep=tp * r)
    m = _Model(s, PdOptions())
    one_pass = m.step.prefill_seconds(4000, 0, m.chunk, tp)
    assert d["prefill_seconds_disaggregated"] == pytest.approx(one_pass, rel=1e-9)
    assert d["prefill_seconds_disaggregated"] < m.colocated_prefill(4000) / 2     # not R x the pass
    # saturated, each rank packs 8,192 // 4,000 = 2 prompts into a pass of the same spread
    service = max(m.step.prefill_seconds(4000, 0, m.chunk, tp, prompts=2), 2 * d["kv_transfer_seconds"]) / 2
    assert d["prefill_seconds_per_prompt_packed"] == pytest.approx(service, rel=1e-9)
    cap_p = d["prefill_instances"] * r / service
    cap_d = (d["decode_instances"] * d["decode_attention_dp"] * d["decode_batch"]
             / (300 * d["tpot_seconds_decode"]))
    assert d["disaggregated_capacity_requests_per_second"] == pytest.approx(min(cap_p, cap_d), rel=1e-9)


def test_the_scenarios_own_tp_is_the_role_layouts_replica(monkeypatch):
    # pd21u (5): DeepSeek-R1 4K + 300 on 16 H200s, TP defaulted to 8. The scenario's own instance and the TP8 role
    # layout are one replica (the same GPUs, TP and pool); it was simulated twice at the same rates, its TP unset in
    # one and 8 in the other. Pinned, each (replica, rate) runs once; the answers are the same (benchmarks/pd_speed).
    import kvplan.calc.simulate as sim
    from kvplan.calc.pd import plan_pd
    from kvplan.scenario import Scenario

    seen = []
    real = sim.simulated_rate

    def counted(scenario, rate, *a, **k):
        seen.append((scenario.with_(tp=scenario.parallelism.tp), rate))
        return real(scenario, rate, *a, **k)

    monkeypatch.setattr(sim, "simulated_rate", counted)
    plan_pd(Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=4000,
                     decode_tokens=300), PdOptions(table=False))
    assert seen and all(seen[i] != seen[j] for i in range(len(seen)) for j in range(i))


def test_each_role_may_run_on_a_gpu_of_its_own(run_cli):
    # pd21u (4): Llama-3.1-8B fp8, 4,000 + 300 on 8 H100s, decode on H200s (--decode-gpu h200). A request's KV is 32
    # layers x 8 KV heads x 128 x 2 (K and V) x 1 byte = 65,536 B a token, 281,804,800 B at its full 4,300 tokens;
    # the decode role's pool is an H200's (141 GB against 80), so its batch is the H200 TP1 replica's, the prefill
    # role's T_pf the H100's, and the KV crosses the slower NIC of the two (50 GB/s each here).
    from kvplan.calc import capacity
    from kvplan.calc.pd import _Model
    from kvplan.scenario import Scenario

    d = pd_json(run_cli, "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1", "--kv-dtype", "fp8",
                "--prompt", "4000", "--decode", "300", "--decode-gpu", "h200")
    base = dict(model="llama-3.1-8b", kv_dtype_request="fp8", prompt_tokens=4000, decode_tokens=300, tp=1)
    h100 = _Model(Scenario(hardware="h100-sxm", gpus=8, **base), PdOptions())
    h200 = _Model(Scenario(hardware="h200", gpus=8, **base), PdOptions())
    assert capacity.request_bytes(h200.s, 4300) == pytest.approx(4300 * 65_536, rel=1e-2)
    assert d["decode_batch"] == h200.decode_only(4000, 300).batch > h100.decode_only(4000, 300).batch
    assert d["prefill_seconds_disaggregated"] == pytest.approx(h100.prefill(4000), rel=1e-9)
    assert d["nic_bytes_per_second"] == pytest.approx(50e9)
    assert any("on h200 decode" in str(r) for r in d["reasons"])
    # DeepSeek-R1 on 16 GPUs: a prefill role of H100s would take at most 15 of them, and no layout of those holds it
    r = run_cli("pd", "--nodes", "2", "--kv-dtype", "fp8", "--prefill-gpu", "h100-sxm")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "--prefill-gpu h100-sxm: no layout of at most 15 of its GPUs holds deepseek-r1" in r.err
    r = run_cli("pd", "--nodes", "2", "--kv-dtype", "fp8", "--decode-gpu", "nosuch")
    assert r.code == 2 and "--decode-gpu nosuch" in r.err


def test_no_colocated_rate_is_priced_above_pure_decode():
    # pd21u (1, 3): DeepSeek-R1 1K + 30K on a TP1 DP8 EP8 rank. Pure decode at the one batch limit (31 requests, the
    # pool at their full 31K context) serves 31 / (30,000 x TPOT(31)) requests/s; a colocated rank only adds prefills
    # to its steps, so its rate is capped below it even where the simulated Poisson run, its contexts spread, would
    # still meet above it: at what the batch of 31 sustains with its prefills, 31 / (30,000 x TPOT(31) + 31 x T_pf)
    # (pd21g; T_pf the lockstep price at that rate), and the climb ends there with no rate that misses.
    from kvplan.calc.pd import _Model
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=1000,
                 decode_tokens=30_000).with_(tp=1, dp=8, ep=8)
    m = _Model(s, PdOptions())
    dec = m.decode_only(1000, 30_000)
    assert dec.batch == 31
    upper = 31 / (30_000 * float(m.tpot_by_batch(1000, 30_000)[30]))
    assert dec.requests_per_second == pytest.approx(upper, rel=1e-12)
    side, _, _ = m.colocated(1000, 30_000)
    rate, _, miss = m.colocated_goodput(s, side.requests_per_second, 31)
    sustained, b, t_pf, plain = m.sustained(1000, 30_000)
    assert b == 31 and plain == pytest.approx(float(m.tpot_by_batch(1000, 30_000)[30]), rel=1e-12)
    assert sustained == pytest.approx(31 / (30_000 * plain + 31 * t_pf), rel=1e-12) and sustained < upper
    assert rate == pytest.approx(sustained, rel=1e-12) and miss is None


def test_the_attention_dp_closed_form_comes_down_from_pure_decodes_rate():
    # Under attention DP the colocated prefill's price falls as the rate rises (more prompts share a pass, the rank's
    # decode step a pass runs inside grows with its batch), so rate -> price -> rate has more than one fixed point;
    # the closed form iterates from pure decode's rate (the highest any colocated rate can be) down to the highest,
    # not up from 0 to the lowest. DeepSeek-R1 300 + 300 on a TP1 DP8 EP8 rank: its rate is near a fixed point
    # (one more round moves it under 5%) and above where three rounds from 0 get.
    from kvplan.calc.pd import COLOCATED_SHARING_ROUNDS, _Model
    from kvplan.scenario import Scenario

    s = Scenario(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=300,
                 decode_tokens=300).with_(tp=1, dp=8, ep=8)
    m = _Model(s, PdOptions())
    r = m.colocated(300, 300)[0].requests_per_second
    assert m._colocated_at(300, 300, r)[0].requests_per_second == pytest.approx(r, rel=0.05)
    up = 0.0
    for _ in range(COLOCATED_SHARING_ROUNDS):
        up = m._colocated_at(300, 300, up)[0].requests_per_second
    assert r > up * 1.05
    assert r <= m.decode_only(300, 300).requests_per_second
