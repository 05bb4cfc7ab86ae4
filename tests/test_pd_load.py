"""`kvplan pd` verdicts that hold under load: the colocated rate is one the replica sustains (the pool-capped batch's
closed form), the prefill role packs prompts up to its token budget and its queue serves them in batches, and the
break-even names the two ratios it lies between."""

import pytest

from kvplan.calc.pd import PdOptions, RatioRow, _batch_service_waits, _breakeven, _Model, prefill_queue_waits
from kvplan.scenario import Scenario

# Llama-3.1-8B on one H100, bf16 KV: 2 (K, V) x 8 KV heads x 128 x 32 layers x 2 B = 131,072 B a token; a request of
# 16,000 + 300 tokens holds ceil(16,300 / 16) = 1,019 blocks of 16 = 16,304 tokens = 2,136,997,888 B. A 22 GB pool
# holds floor(22e9 / 2,136,997,888) = 10 of them (10.29): the batch can grow no further than 10.
POOL_CAPPED = dict(model="llama-3.1-8b", hardware="h100-sxm", tp=1, dp=1, prompt_tokens=16000, decode_tokens=300,
                   kv_pool="22GB")


def test_the_colocated_rate_is_capped_where_the_pool_caps_the_batch():
    s = Scenario(**POOL_CAPPED)
    m = _Model(s, PdOptions())
    assert m.batch_limit(16000, 300) == 10
    # each request costs the replica its prefill (neutral engine: a step of its own, T_pf, two chunks of 8,192) and
    # its share of 300 steps of the batch of 10: rate = 10 / (300 x TPOT(10) + 10 x T_pf). With TPOT(10) = 13.85 ms
    # and T_pf = 445.7 ms: 10 / (4.156 + 4.457) = 1.161 requests/s. The mean TPOT there, 13.85 + 445.7 x 9 / 300 =
    # 27.2 ms, is well under 50 ms: the pool, not the TPOT target, holds the rate.
    t_pf = m.step.prefill_seconds(16000, 0, 8192)
    tpot = float(m.tpot_by_batch(16000, 300)[9])
    rate, b, pf, plain = m.sustained(16000, 300)
    assert (b, pf, plain) == (10, pytest.approx(t_pf), pytest.approx(tpot))
    assert rate == pytest.approx(10 / (300 * tpot + 10 * t_pf), rel=1e-12)
    assert 1.15 < rate < 1.17 and 0.0138 < tpot < 0.0139 and 0.445 < t_pf < 0.446
    # the simulator agrees: 2,000 requests at 1.5 x that rate finish 1.162 a second while the queue never empties
    from kvplan.calc.simulate import simulated_rate

    long = simulated_rate(s, rate * 1.5, PdOptions().targets, 2000)
    assert long.figures["sustained_requests_per_second"].value == pytest.approx(rate, rel=0.01)
    # and pd's goodput is that rate, not the 1.397 requests/s (1.20x) a run of 200 requests let pass before
    side = m.colocated(16000, 300)[0]
    good, point, miss = m.colocated_goodput(s, float(side.requests_per_second), side.batch)
    assert good == pytest.approx(rate, rel=1e-12) and miss is None and point.verdict.meets


def test_the_sustained_rate_is_the_pools_batch_not_the_targets():
    # 4,000 + 300 in a 60 GB pool: ceil(4,300 / 16) x 16 = 4,304 tokens x 131,072 B = 564,133,888 B a request, so
    # floor(60e9 / 564,133,888) = 106 (106.4) fit; the TPOT target holds the closed form's batch lower (mean TPOT =
    # TPOT(B) + T_pf x (B - 1) / 300 passes 50 ms below 106), but what the replica sustains, whatever its TPOT, is
    # the batch the pool holds: 106 / (300 x TPOT(106) + 106 x T_pf).
    s = Scenario(**{**POOL_CAPPED, "prompt_tokens": 4000, "kv_pool": "60GB"})
    m = _Model(s, PdOptions())
    rate, b, t_pf, plain = m.sustained(4000, 300)
    assert b == 106 > m.colocated(4000, 300)[0].batch
    assert plain == pytest.approx(float(m.tpot_by_batch(4000, 300)[105]), rel=1e-12)
    assert t_pf == pytest.approx(m.step.prefill_seconds(4000, 0, 8192), rel=1e-12)
    assert rate == pytest.approx(106 / (300 * plain + 106 * t_pf), rel=1e-12)


def test_the_figure_says_the_closed_form_decided(run_cli):
    r = run_cli("pd", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "2", "--tp", "1", "--prompt", "16k",
                "--decode", "300", "--kv-pool", "22GB", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    # on two GPUs colocated serving takes one TP2 instance (44 GB of pool: a batch of 20) over two TP1 ones
    assert (d["instances"], d["colocated_tp"]) == (1, 2)
    assert "decided in closed form: the KV pool's batch of 20 sustains at most" in d["decided_by"][0]


def test_a_saturated_prefill_rank_packs_prompts_to_its_token_budget():
    # Llama-3.1-8B on one H100, a 128-token prompt. Alone: the weights, 16.06 GB / (3.35 TB/s x 0.87) = 5.510 ms,
    # against 2 x 7.5047e9 matmul params x 128 + 4 x 32 x 4,096 x 128^2 / 2 attention = 1.9255e12 FLOPs at
    # 989 TFLOP/s x 0.70 = 2.781 ms: 5.510 + the step's 32 x 15 us + 450 us = 6.440 ms. Packed: the token budget
    # 8,192 holds 8,192 // 128 = 64 prompts (max_num_seqs 1,024 allows them), one weight read for 64 x 2.781 =
    # 178.0 ms of FLOPs: (178.0 + 0.93) / 64 = 2.796 ms a prompt, 2.3x the rate of one prompt a pass.
    s = Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, dp=1, prompt_tokens=128, decode_tokens=300)
    m = _Model(s, PdOptions())
    assert m.prefill_batch(128) == 64
    passes = m.prefill_passes(128)
    assert len(passes) == 64
    assert passes[0] == pytest.approx(5.5104e-3 + 0.93e-3, rel=1e-4) == m.prefill(128)
    assert passes[-1] / 64 == pytest.approx((64 * 1.92552e12 / 692.3e12 + 0.93e-3) / 64, rel=1e-4)
    assert passes[-1] / 64 == pytest.approx(2.796e-3, rel=1e-3)
    # a prompt longer than the budget runs alone (in chunks): k = 1
    assert m.prefill_batch(16000) == 1 and len(m.prefill_passes(16000)) == 1


def test_the_prefill_queue_serves_the_prompts_waiting_in_one_pass():
    # one rank, k = 2, a pass of one prompt 1.0 s, of two 1.5 s; arrivals at 0, 0.1, 0.2, 0.3, 5.0:
    # t = 0: only the first waits, alone -> ends 1.0; t = 1.0: 0.1 and 0.2 (k = 2) -> end 2.5; t = 2.5: 0.3 alone ->
    # 3.5; 5.0 finds the rank idle -> 6.0. Wait = end - arrival - 1.0 (a prompt alone): 0, 1.4, 1.3, 2.2, 0.
    import numpy as np

    waits = _batch_service_waits(np.array([0.0, 0.1, 0.2, 0.3, 5.0]), 1, (1.0, 1.5))
    assert waits.tolist() == pytest.approx([0.0, 1.4, 1.3, 2.2, 0.0])
    # two ranks: 0 and 0.1 start alone on each (ends 1.0 and 1.1); 0.2 and 0.3 wait for the first free (1.0) -> 2.5;
    # 5.0 alone: 0, 0, 1.3, 1.2, 0
    waits = _batch_service_waits(np.array([0.0, 0.1, 0.2, 0.3, 5.0]), 2, (1.0, 1.5))
    assert waits.tolist() == pytest.approx([0.0, 0.0, 1.3, 1.2, 0.0])
    # with k = 1 the batch queue is the M/D/c one
    assert prefill_queue_waits(7.0, 3, (0.4,), requests=3000) == pytest.approx(
        prefill_queue_waits(7.0, 3, 0.4, requests=3000))


def test_a_lone_prompts_ttft_is_one_prompts_pass(run_cli):
    # at a low rate every prompt finds a rank idle: the queue waits 0 and TTFT unloaded = T_pf of one prompt alone
    # (6.440 ms above), not the packed 2.796 ms; the capacity counts the packed passes
    r = run_cli("pd", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "2", "--tp", "1", "--prompt", "128",
                "--decode", "300", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["prefill_seconds_disaggregated"] == pytest.approx(6.440e-3, rel=1e-3)
    assert d["prefill_prompts_per_pass"] == 64
    assert d["prefill_seconds_per_prompt_packed"] == pytest.approx(2.796e-3, rel=1e-3)
    assert d["ttft_seconds_disaggregated"] >= d["prefill_seconds_disaggregated"]
    waits = prefill_queue_waits(0.01, 1, tuple([6.44e-3] * 64), requests=200)
    assert float(waits.max()) == 0.0
    # over a 1 GB/s NIC the 128 tokens' KV (128 x 131,072 B = 16.8 MB) takes longer than a packed prompt's 2.8 ms:
    # the rank's NIC sends one request's KV at a time, 64 of them a pass, so a prompt costs its transfer
    slow = run_cli("pd", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "2", "--tp", "1", "--prompt", "128",
                   "--decode", "300", "--nic-gbps", "1", "-f", "json").json()
    assert slow["kv_transfer_seconds"] > 5e-3
    assert slow["prefill_seconds_per_prompt_packed"] == pytest.approx(slow["kv_transfer_seconds"], rel=1e-9)


def _row(ratio, wins):
    return RatioRow(int(ratio * 300), ratio, 1.0, 2.0 if wins else 1.0, 1, wins, True)


def test_the_break_even_is_the_bracket_found():
    # colocate at 1:1 .. 5:1, disaggregate from 10:1: the break-even lies between 5:1 and 10:1
    rows = [_row(r, r >= 10) for r in (50, 20, 10, 5, 2, 1)]
    assert _breakeven(rows, 3000, 300, True)[:2] == (10, 5)
    # a win at 2:1 below a loss at 5:1 is not the break-even: the run of wins at the top starts at 10:1
    rows = [_row(r, r >= 10 or r == 2) for r in (50, 20, 10, 5, 2, 1)]
    assert _breakeven(rows, 3000, 300, True)[:2] == (10, 5)
    # this request (26.7:1, disaggregate) between 20:1 (colocate) and 50:1 narrows it
    rows = [_row(r, r >= 50) for r in (50, 20, 10)]
    assert _breakeven(rows, 8000, 300, True)[:2] == (pytest.approx(8000 / 300), 20)
    # disaggregation wins up to 20:1 and loses at 50:1 (a long prompt's TTFT): between 20:1 and 50:1, colocated above
    rows = [_row(r, r <= 20) for r in (50, 20, 10, 5)]
    assert _breakeven(rows, 1500, 300, True)[:2] == (20, 50)
    # wins everywhere: no ratio on the other side; wins nowhere: none
    assert _breakeven([_row(r, True) for r in (50, 1)], 300, 300, True)[:2] == (1, None)
    assert _breakeven([_row(r, False) for r in (50, 1)], 300, 300, False)[:2] == (None, None)


def test_vllm_pays_a_colocated_prefill_as_chunks_mixed_into_decode_steps():
    # The same pool-capped replica on vLLM V1: each 8,192-token budget carries the 9 other requests' decode tokens
    # and an 8,183-token chunk in one pass, so the prefill costs the batch its mixed steps less the decode steps they
    # replace (the weights read once for both): 433.2 ms, not the 445.7 ms of passes of its own. The sustained rate
    # 10 / (300 x 13.85 ms + 10 x 433.2 ms) = 1.178 requests/s, as the simulator's long run (1.179); priced as
    # passes of their own it would read 1.161, 1.5% low.
    s = Scenario(**POOL_CAPPED, engine="vllm")
    m = _Model(s, PdOptions())
    rate, b, t_pf, plain = m.sustained(16000, 300)
    step = m.step
    mean_b, mean_f = step.steady_cache(16000, 300)
    mixed = sum(step.mixed_parts(9, 9 * mean_b, 9 * mean_f, [(a, min(a + 8192 - 9, 16000))])[0]
                - step.step(9, 9 * mean_b, 9 * mean_f)["total"] for a in range(0, 16000, 8192 - 9))
    assert b == 10 and t_pf == pytest.approx(mixed, rel=1e-12) and 0.432 < t_pf < 0.434
    assert rate == pytest.approx(10 / (300 * plain + 10 * t_pf), rel=1e-12)
    from kvplan.calc.simulate import simulated_rate

    long = simulated_rate(s, rate * 1.5, PdOptions().targets, 2000)
    assert long.figures["sustained_requests_per_second"].value == pytest.approx(rate, rel=0.005)
    assert m.colocated_prefill(16000) > 0.445      # the separate price, which the long run does not follow
    # the chunks are the budget less the decode tokens: 16,380 tokens take 8,183 + 8,183 + 14 (three mixed steps), not
    # 8,192 + 8,188 (two)
    s = Scenario(**{**POOL_CAPPED, "prompt_tokens": 16380}, engine="vllm")
    m = _Model(s, PdOptions())
    step = m.step
    mean_b, mean_f = step.steady_cache(16380, 300)
    alone = step.step(9, 9 * mean_b, 9 * mean_f)["total"]
    three = sum(step.mixed_parts(9, 9 * mean_b, 9 * mean_f, [r])[0] - alone
                for r in ((0, 8183), (8183, 16366), (16366, 16380)))
    assert m.batch_limit(16380, 300) == 10 and m.steps_prefill(16380, 300, 10) == pytest.approx(three, rel=1e-12)
