"""simulate's written-out fast paths against the code they write out (speed19s):

* ``_EventLoop.decode_fast``, the O(1) run (its price, blocks and overflow step inline) that vLLM V1's and SGLang's
  schedulers run on, against the generic ``decode`` with ``Prices.run`` and ``ReplicaState.crossings``: the same
  events, times, timeline and counts, under load (preemptions, runs cut by arrivals) and on a chat load;
* ``StepModel.mixed_parts``' batch terms memoized per batch against ``StepModel.step``'s total;
* ``ReplicaState.complete`` finding a request's place by its join order: ``running`` stays in join order.
The reference equality tests (test_sim_reference.py) hold both paths to the independent simulators as well."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.engines.replica import ReplicaState
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario

BASE = dict(model=None, hardware="h200", nodes="1", gpus=None, tp=None, pp="1", dp=None, ep=None, kv_dtype="auto",
            weight_dtype=None, engine="neutral", prompt="1k", decode="30k", mtp_layers=None, max_model_len=None,
            block_size=None, host_link_gbs=None, presets_dir=None)


def _work(rate: float, requests: int = 120):
    return wl.build(requests=requests, seed=5, prompt=wl.parse_dist("uniform:50,400", "p"),
                    output=wl.parse_dist("lognormal:mean=300,p99=1200", "o"), max_len=1500, rate=rate)


def _same(a, b) -> None:
    for f in dataclasses.fields(a):
        if f.name in ("scenario", "options", "workload", "setup"):
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "timeline":
            for u, v in zip(x, y, strict=True):
                np.testing.assert_array_equal(u, v)
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("rate", [40.0, 0.5])
@pytest.mark.parametrize("prefix", [None, "40"])
def test_decode_fast_is_decode(engine, rate, prefix, monkeypatch):
    # a 400 MiB pool of DeepSeek-R1 (the reference tests' deepseek-r1 case) preempts at 40 requests/s; at 0.5/s the
    # batch is small and runs are cut by arrivals
    s = build_scenario(**dict(BASE, engine=engine), kv_pool="400MiB", shared_prefix=prefix)
    work = _work(rate)
    fast = sim.simulate(s, work, sim.SimOptions())
    monkeypatch.setattr(sim._EventLoop, "decode_fast", sim._EventLoop.decode)
    slow = sim.simulate(s, work, sim.SimOptions())
    _same(fast, slow)
    if rate > 1:
        assert fast.preemptions.sum() > 0
    else:
        assert fast.preemptions.sum() == 0 and fast.decode_steps > fast.events


def test_mixed_parts_batch_terms_are_steps_total():
    # the step without chunks is StepModel.step's total, bit for bit, at every batch (memoized or not), and adding
    # a chunk never prices the pass below it
    s = build_scenario(**BASE)
    sm = costs.step_model(s)
    for batch, cache, flops in ((1, 0.0, 0.0), (7, 3.5e8, 2.0e10), (64, 9.1e9, 4.4e12), (7, 1.0e6, 9.9e13)):
        for _ in range(2):                     # the second call reads the memoized terms
            mixed, alone = sm.mixed_parts(batch, cache, flops, [(0, 300)])
            assert alone == float(sm.step(batch, cache, flops)["total"])
            assert sm.mixed_parts(batch, cache, flops)[0] == alone
            assert mixed >= alone


def test_complete_keeps_join_order():
    # five requests of 10-token prompts join in the order 3, 1, 4, 0, 2 at step 0; a request is done when its
    # context offset (prompt + generated - steps at its join) reaches prompt + output: 0 and 4 (2 outputs, 1 token
    # generated) after 12 - 11 = 1 step, 1 and 3 (9 outputs) after 19 - 10 = 9 steps, 2 (12 outputs) after 12
    r = ReplicaState(prompts=[10] * 5, outputs=[2, 9, 12, 9, 2], block=4, blocks_at=list(range(100)),
                     total_blocks=90, prefix_blocks=0, prefix_hit=0, dram_cap=None, contexts=np.zeros(5, np.int64),
                     contexts_used=False, prefill=lambda t, c: 0.0, swap_cost=lambda c: (0, 0.0),
                     arrivals=[0.0] * 5, users=0, think_s=0.0, duration_s=None)
    for i in (3, 1, 4, 0, 2):
        r.g[i] = 1 if i in (0, 4) else 0
        r.join(i)
    assert [r.done_at[i] for i in range(5)] == [1, 9, 12, 9, 1]
    r.steps = 1
    r.complete()                               # 4 and 0 leave from the middle of the batch
    assert r.running == [3, 1, 2] and r.done == 2
    r.running.pop(1)                           # 1 preempted from the middle, then rejoins last: 1 token generated,
    r.leave(1)                                 # its offset 10 + 1 - 1 = 10 again, so still done at step 9
    assert r.g[1] == 1
    r.join(1)
    assert r.running == [3, 2, 1] and r.done_at[1] == 9
    r.steps = 9
    r.complete()                               # 3 (first in the batch) and 1 (last) leave; 2 stays
    assert r.running == [2] and r.done == 4
    assert r.g[3] == r.g[1] == 9
