"""SGLang's scheduler prices a prefill round's requests as one pass (issue 19): SGLang v0.5.23's
``Scheduler._get_new_batch_prefill_raw`` makes one ``ScheduleBatch.init_new`` of the PrefillAdder's ``can_run_list``
and one ``prepare_for_extend`` (one extend batch, one forward), so kvplan's SGLang scheduler and its token-by-token
reference (tests/sim_reference_sglang.py) price the round once by ``StepModel.prefill_pass_seconds``, the first tokens
at its end.

Figures by hand from the H100 SXM preset and Llama-3.1-8B's config (huggingface.co/meta-llama/Llama-3.1-8B: 32
layers, hidden 4,096), as tests/test_prefill_packing.py works them: weights 16.06 GB read at 3.35 TB/s x hbm 0.87 =
5.510 ms; 7.50e9 matmul parameters, 2 FLOPs each a token, at 989 TFLOP/s x prefill_mfu 0.70 = 692.3 TFLOP/s; the
step overhead 32 x 15 us + 450 us = 0.93 ms; attention 4 x 32 x 4,096 FLOPs a (query, key) pair, P^2 / 2 pairs a
causal prompt. SGLang's chunk on an 80 GB GPU is 8,192 tokens (memory_hook.py @v0.5.23)."""

from __future__ import annotations

import numpy as np
import pytest
import sim_reference_sglang as ref  # tests/ is on sys.path (rootdir-less test modules)

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario

LLAMA = dict(model="llama-3.1-8b", hardware="h100-sxm", nodes="1", gpus=None, tp="1", pp="1", dp="1", ep=None,
             kv_dtype="auto", weight_dtype=None, engine="sglang", prompt="1k", decode="1k", mtp_layers=None,
             max_model_len=None, block_size=None, host_link_gbs=None, presets_dir=None)
WEIGHTS = 16.06e9 / (3.35e12 * 0.87)          # 5.510 ms
OVERHEAD = 32 * 15e-6 + 450e-6                # 0.93 ms
FLOPS = 989e12 * 0.70                         # 692.3 TFLOP/s


def attention(p: int) -> float:
    return 4 * 32 * 4096 * p * p / 2


def hand_work(prompts, outputs, arrivals):
    return wl.Workload(np.array(prompts, dtype=np.int64), np.array(outputs, dtype=np.int64),
                       np.array(arrivals, dtype=float), None, 0.0, None, "hand-written")


@pytest.fixture(scope="module")
def s():
    return build_scenario(**LLAMA, kv_pool="4GiB")      # 32,768 tokens of 128 KiB: every admission check passes


def test_three_prompts_of_1000_tokens_are_one_pass(s):
    # One pass of 3 x 1,000 tokens: linear 2 x 7.50e9 x 3,000 = 4.50e13 FLOPs + attention 3 x 4 x 32 x 4,096 x
    # 1,000^2 / 2 = 7.86e11 = 4.579e13 FLOPs / 692.3 TFLOP/s = 66.14 ms (over the 5.51 ms weight read) + 0.93 ms =
    # 67.07 ms. Three passes, one a prompt: 3 x ((1.50e13 + 2.62e11) / 692.3e12 + 0.93 ms) = 3 x 22.98 = 68.93 ms (the
    # overhead paid three times). The round takes all three at t = 0 (3,000 <= 8,192 tokens), so their first tokens
    # come at 67.07 ms, together.
    one = (2 * 7.50e9 * 3000 + 3 * attention(1000)) / FLOPS + OVERHEAD
    three = 3 * ((2 * 7.50e9 * 1000 + attention(1000)) / FLOPS + OVERHEAD)
    assert one == pytest.approx(67.07e-3, abs=0.01e-3) and three == pytest.approx(68.93e-3, abs=0.01e-3)
    w = hand_work([1000] * 3, [5] * 3, [0.0] * 3)
    r = sim.simulate(s, w)
    assert r.setup.chunk_tokens == 8192 and (r.admitted == 0.0).all()
    assert (r.first_token == r.first_token[0]).all()
    assert r.first_token[0] == pytest.approx(one, rel=5e-3)
    assert r.first_token[0] == pytest.approx(costs.step_model(s).prefill_pass_seconds([(0, 1000)] * 3, 8192),
                                             rel=1e-12)
    assert r.first_token[0] < three * (1 - 2e-2)          # not three passes (68.93 ms)
    got = ref.run(s, w)
    assert [q.first_token for q in got.reqs] == pytest.approx(list(r.first_token), rel=1e-12)
    assert got.prefill_seconds == pytest.approx(r.first_token[0], rel=1e-12)


def test_short_prompts_of_a_round_read_the_weights_once(s):
    # 3 x 100 tokens: 2 x 7.50e9 x 300 = 4.5e12 FLOPs / 692.3 TFLOP/s = 6.50 ms, over the 5.51 ms weight read, so
    # the pass is 6.50 + attention (3 x 4 x 32 x 4,096 x 100^2 / 2 = 7.9e9 FLOPs: 0.011 ms) + 0.93 = 7.44 ms; three
    # passes would be 3 x (5.51 + 0.93) = 19.3 ms (each of 100 tokens, 2.17 ms of FLOPs, is weight-bound).
    w = hand_work([100] * 3, [5] * 3, [0.0] * 3)
    r = sim.simulate(s, w)
    by_hand = max(WEIGHTS, (2 * 7.50e9 * 300 + 3 * attention(100)) / FLOPS) + OVERHEAD
    assert by_hand == pytest.approx(7.44e-3, abs=0.01e-3)
    assert r.first_token == pytest.approx([by_hand] * 3, rel=5e-3)
    assert r.first_token[0] < 0.5 * 3 * (WEIGHTS + OVERHEAD)


def test_a_pass_holds_a_retracted_requests_re_prefill(s):
    # A tiny pool makes SGLang retract and re-prefill; each round's requests, new and re-prefilled, are one pass: the
    # scheduler and the reference agree request by request (times to 1e-9), and the prefill time is the passes'.
    # 1,250 MiB / 128 KiB = 10,000 tokens against 100 requests of 20-100 + 600-1,500 tokens at 30/s (test_sim_sglang's
    # "llama" case): the batch over-fills and retract_decode runs.
    w = wl.build(requests=100, seed=3, prompt=wl.parse_dist("uniform:20,100", "p"),
                 output=wl.parse_dist("uniform:600,1500", "o"), max_len=30_000, rate=30.0, users=None, think_s=0.0)
    pool = build_scenario(**LLAMA, kv_pool="1250MiB")
    r = sim.simulate(pool, w)
    got = ref.run(pool, w)
    assert r.preemptions.sum() > 0
    for name in ("admitted", "first_token", "finish"):
        assert getattr(r, name) == pytest.approx(got.column(name), rel=1e-9), name
    assert list(r.recomputed) == got.column("recomputed")
