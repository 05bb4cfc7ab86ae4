"""A round's waiting prompts packed into one prefill pass up to the token budget (issue 21 / 19): the cost model's
price of such a pass, the rule book's admission that forms it, and pd's colocated side that counts on it.

Figures by hand from the H100 SXM preset and Llama-3.1-8B's config (huggingface.co/meta-llama/Llama-3.1-8B:
32 layers, hidden 4,096, 8 KV heads of 128): weights 16.06 GB read at 3.35 TB/s x hbm 0.87 = 5.510 ms; 7.50e9
matmul parameters, 2 FLOPs each a token, at 989 TFLOP/s (BF16 dense) x prefill_mfu 0.70; the step overhead 32 layers
x 15 us + 450 us = 0.93 ms; attention 4 x 32 x 4,096 FLOPs a (query, key) pair, P^2 / 2 pairs a causal prompt. The
neutral engine's token budget on an 80 GB GPU is vLLM's max_num_batched_tokens 8,192."""

from __future__ import annotations

import pytest

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario

LLAMA = dict(model="llama-3.1-8b", hardware="h100-sxm", tp="1", kv_dtype="fp8", prompt="150", decode="300")
WEIGHTS = 16.06e9 / (3.35e12 * 0.87)          # 5.510 ms
OVERHEAD = 32 * 15e-6 + 450e-6                # 0.93 ms
FLOPS = 989e12 * 0.70


def attention(p: int) -> float:
    """A prompt's attention FLOPs on its own cache: 4 x layers x hidden x P^2 / 2."""
    return 4 * 32 * 4096 * p * p / 2


def pass_by_hand(prompts: list[int]) -> float:
    """One pass: the larger of the weight read and the FLOPs of the summed tokens (each prompt's own attention), plus
    the overhead once."""
    flops = 2 * 7.50e9 * sum(prompts) + sum(attention(p) for p in prompts)
    return max(WEIGHTS, flops / FLOPS) + OVERHEAD


@pytest.fixture(scope="module")
def sm():
    return costs.step_model(build_scenario(**LLAMA))


def test_one_pass_of_several_prompts_reads_the_weights_once(sm):
    # 100 + 50 tokens: 2 x 7.50e9 x 150 / 692 TFLOP/s = 3.25 ms of FLOPs under the 5.51 ms weight read, so the pass
    # costs what one prompt alone does, 5.51 + 0.93 = 6.44 ms (two passes would be 12.9 ms)
    both = sm.prefill_pass_seconds([(0, 100), (0, 50)], 8192)
    assert both == pytest.approx(WEIGHTS + OVERHEAD, rel=2e-3)
    assert both == pytest.approx(6.44e-3, abs=0.01e-3)
    # 54 prompts of 150 (8,100 tokens): compute-bound, 2 x 7.50e9 x 8,100 / 692.3 TFLOP/s = 175.5 ms + attention
    # 54 x 4 x 32 x 4,096 x 150^2 / 2 = 0.32 TFLOP (0.46 ms) + 0.93 ms = 176.9 ms
    packed = sm.prefill_pass_seconds([(0, 150)] * 54, 8192)
    assert packed == pytest.approx(pass_by_hand([150] * 54), rel=5e-3)
    assert packed == pytest.approx(176.9e-3, rel=5e-3)
    # alike prompts: the same price as prefill_seconds' packed pass (the prefill role's)
    assert packed == pytest.approx(sm.prefill_seconds(150, 0, 8192, prompts=54), rel=1e-12)
    # a prefix hit's tokens are not computed: 150 - 128 cached = 22 tokens, attention over pairs 128..150 only
    assert sm.prefill_pass_seconds([(128, 150), (0, 8000)], 8192) == pytest.approx(
        max(WEIGHTS, (2 * 7.50e9 * 8022 + attention(8000) + (attention(150) - attention(128))) / FLOPS) + OVERHEAD,
        rel=5e-3)


def test_one_range_is_the_prefill_alone_and_a_pass_over_the_budget_is_refused(sm):
    assert sm.prefill_pass_seconds([(0, 20000)], 8192) == sm.prefill_seconds(20000, 0, 8192)   # chunked, alone
    with pytest.raises(ValueError, match="over the budget"):
        sm.prefill_pass_seconds([(0, 8000), (0, 500)], 8192)


def test_the_rule_book_packs_a_rounds_prompts_up_to_the_budget():
    # 55 users of 150-token prompts arrive at 0 s on the neutral engine (kvplan's rule book): 8,192 // 150 = 54 fit
    # the budget, so one pass of 54 (176.9 ms by hand), then the 55th alone (6.44 ms) before any decode step (vLLM
    # V0 schedules no decode in a step with prefills); every prompt of a pass has its first token at its end
    s = build_scenario(**LLAMA)
    work = wl.build(requests=55, seed=0, prompt=wl.parse_dist("fixed:150", "p"), output=wl.parse_dist("fixed:2", "o"),
                    max_len=1000, users=55, think_s=0.0)
    r = sim.simulate(s, work, sim.SimOptions())
    first = pass_by_hand([150] * 54)
    assert r.first_token[:54] == pytest.approx([first] * 54, rel=5e-3)
    assert len(set(r.first_token[:54].tolist())) == 1
    assert r.admitted[:54].tolist() == [0.0] * 54 and r.admitted[54] == pytest.approx(r.first_token[0])
    assert r.first_token[54] - r.first_token[0] == pytest.approx(WEIGHTS + OVERHEAD, rel=2e-3)
    assert r.prefill_seconds == pytest.approx(first + WEIGHTS + OVERHEAD, rel=5e-3)   # not 55 x 6.44 ms = 354 ms


def test_pd_short_prompts_colocate_when_the_waiting_prompts_share_a_pass(run_cli):
    # issue 21's case (Llama-3.1-8B / H100 / TP1 / fp8, 300 output tokens): colocated prompts are passes of their
    # own on the neutral engine and on SGLang; the B / D prompts waiting at each step share one, so the table no
    # longer disaggregates at the shortest prompts: colocate from 3 up to 6,000 tokens, disaggregate at 15,000
    for engine in ("neutral", "sglang"):
        r = run_cli("pd", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-dtype", "fp8", "--prompt",
                    "4000", "--decode", "300", "--engine", engine, "-f", "json")
        assert r.code == 0, r.err
        d = r.json()
        rows = sorted((x for x in d["by_ratio"] if x["fits"]), key=lambda x: x["prompt_tokens"])
        # 150 .. 6,000 tokens colocate and 15,000 disaggregates; the shortest rows are
        # test_the_shortest_prompts_colocate_too's
        wins = {x["prompt_tokens"]: x["disaggregation_wins"] for x in rows}
        assert wins[15000] and not any(w for p, w in wins.items() if 150 <= p <= 6000), engine
        # at 150 tokens the colocated replica is held by its pool-capped batch's sustained rate: B = 1,024
        # (max_num_seqs), D = 300, so B / D = 3.41 prompts share a pass: passes of 3 (450 tokens: 2 x 7.50e9 x 450 /
        # 692.3 TFLOP/s = 9.75 ms + attention 0.03 ms + 0.93 ms = 10.71 ms) and 4 (13.97 ms) in shares 0.59 : 0.41,
        # 12.03 ms a pass on average, 3.53 ms a prompt; TPOT(1,024) without prefills from the step model (45.40 ms
        # at contexts 150 .. 450): 1,024 / (300 x 45.40 ms + 1,024 x 3.53 ms) = 59.4 requests/s an H100, against the
        # split's 135,335 tokens/s / 300 / 8 = 56.4: 0.95x, colocate (alone each prompt cost 6.44 ms: 50.7 / s)
        row = next(x for x in rows if x["prompt_tokens"] == 150)
        k = 1024 / 300
        mean = (1 - (k - 3)) * pass_by_hand([150] * 3) + (k - 3) * pass_by_hand([150] * 4)
        import numpy as np

        tpot = float(costs.step_model(build_scenario(**LLAMA, engine=engine)).steady_tpot(
            150, 300, np.array([1024.0]))[0])
        assert tpot == pytest.approx(45.40e-3, abs=0.01e-3)
        rate = 1024 / (300 * tpot + 1024 * mean / k)
        assert rate == pytest.approx(59.4, abs=0.1)
        # on both engines: SGLang's simulated run at the cap was judged overloaded by the service witness on its
        # ramp (56.0 / s) until the witness took the running batch's growth off the shortfall
        assert row["colocated_tokens_per_second"] / 300 / 8 == pytest.approx(rate, rel=5e-3)
        assert row["disaggregated_tokens_per_second"] / row["colocated_tokens_per_second"] == pytest.approx(
            0.95, abs=0.01)


def test_a_pass_takes_prompts_while_their_tokens_are_at_most_the_budget():
    # 128-token prompts: 64 x 128 = 8,192 tokens, exactly the budget, so 64 share the first pass (vLLM V0's
    # budget.can_schedule: num_batched_tokens + new <= token_budget) and the 65th and 66th the next, before any
    # decode step: two distinct first-token times, 64 then 2
    s = build_scenario(**dict(LLAMA, prompt="128"))
    work = wl.build(requests=66, seed=0, prompt=wl.parse_dist("fixed:128", "p"), output=wl.parse_dist("fixed:2", "o"),
                    max_len=1000, users=66, think_s=0.0)
    r = sim.simulate(s, work, sim.SimOptions())
    firsts = r.first_token.tolist()
    assert len(set(firsts[:64])) == 1 and len(set(firsts[64:])) == 1 and firsts[64] > firsts[0]
    # 2 x 7.50e9 x 8,192 / 692.3 TFLOP/s = 177.5 ms + attention 64 x 4 x 32 x 4,096 x 128^2 / 2 (0.40 ms) + 0.93 ms
    assert firsts[0] == pytest.approx(pass_by_hand([128] * 64), rel=5e-3)
    # the two left: 256 tokens, 2 x 7.50e9 x 256 / 692.3 TFLOP/s = 5.55 ms, just over the 5.51 ms weight read,
    # + attention 2 x 4 x 32 x 4,096 x 128^2 / 2 (0.01 ms) + 0.93 ms = 6.49 ms
    assert firsts[64] - firsts[0] == pytest.approx(pass_by_hand([128] * 2), rel=2e-3)
    assert firsts[64] - firsts[0] == pytest.approx(6.49e-3, abs=0.01e-3)


def test_the_shortest_prompts_colocate_too(run_cli):
    # packed, a 3 .. 60-token prompt costs the colocated replica less than a 150-token one, so the table colocates
    # there as it does at 150 (0.95x, worked above). It disaggregated (~6%) while the service witness fired on the
    # ramp of pd's 1,500-request colocated runs (30 + 300 tokens at 67.65/s: 738 arrived, 611 finished over the steady
    # part, 115 allowed, the batch still filling: 441 -> 562 running); the witness now takes the running batch's
    # growth off the shortfall (tests/test_simulate_overload.py::test_a_ramp_whose_batch_fills_is_not_overload)
    for engine in ("neutral", "sglang"):
        r = run_cli("pd", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-dtype", "fp8", "--prompt",
                    "4000", "--decode", "300", "--engine", engine, "-f", "json")
        rows = [x for x in r.json()["by_ratio"] if x["fits"]]
        assert [x["prompt_tokens"] for x in rows if x["disaggregation_wins"]] == [15000], engine


def test_prompts_done_at_their_pass_free_the_batch_for_the_next_pass():
    # 8 users of 100-token prompts with one output token each (done at their prefill) and a batch of 4: the first
    # pass takes 4 (the batch limit), all 4 are done at its end and hold nothing, so the next 4 form the second pass
    # at once: first tokens at one pass and two passes, where a pass of 4 x 100 = 400 tokens is compute-bound by hand
    # (2 x 7.50e9 x 400 / 692.3 TFLOP/s = 8.67 ms + attention 4 x 4 x 32 x 4,096 x 100^2 / 2 = 0.01 TFLOP, 0.015 ms;
    # over the 5.51 ms weight read; + 0.93 ms = 9.61 ms)
    s = build_scenario(**dict(LLAMA, prompt="100"))
    work = wl.build(requests=8, seed=0, prompt=wl.parse_dist("fixed:100", "p"), output=wl.parse_dist("fixed:1", "o"),
                    max_len=1000, users=8, think_s=0.0)
    r = sim.simulate(s, work, sim.SimOptions(max_batch=4))
    one = pass_by_hand([100] * 4)
    assert one == pytest.approx(9.61e-3, abs=0.01e-3)
    assert r.first_token.tolist() == pytest.approx([one] * 4 + [2 * one] * 4, rel=5e-3)


def test_a_pass_under_attention_dp_holds_every_rank_as_a_prompt_alone_does():
    # DeepSeek-R1 TP1 x DP8 x EP8 (attention DP: R = 8 ranks step together, tests/test_pd_goodput.py): a pass of two
    # alike prompts on one rank holds the other 7 ranks' MoE layers as N alike prompts priced by prefill_seconds
    # (prompts=2) do, T + 7 x (T - s1), so it costs more than the same pass on a rank's own clock
    from kvplan.scenario import Scenario

    rank = costs.step_model(Scenario(model="deepseek-r1", nodes=2, kv_dtype_request="fp8", prompt=4000, decode=300)
                            .with_(tp=1, dp=8, ep=8))
    held = rank.prefill_pass_seconds([(0, 150), (0, 150)], 8192, lockstep=True)
    assert held == pytest.approx(rank.prefill_seconds(150, 0, 8192, lockstep=True, prompts=2), rel=1e-9)
    assert held > rank.prefill_pass_seconds([(0, 150), (0, 150)], 8192)
