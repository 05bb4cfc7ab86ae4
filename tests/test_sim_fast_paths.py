"""simulate's written-out fast paths against the code they write out (speed19s):

* ``_EventLoop.run_fast``, the one loop vLLM V1's and SGLang's schedulers run on (speed19v: it folds speed19s'
  ``decode_fast`` and sglspeed's ``run_sglang``), its O(1) run (price, blocks and overflow step inline) against the
  generic ``run`` with ``decode``, ``Prices.run`` and ``ReplicaState.crossings``: the same events, times, timeline
  and counts, under load (preemptions, runs cut by arrivals) and on a chat load;
* ``StepModel.mixed_parts``' batch terms memoized per batch against ``StepModel.step``'s total;
* ``ReplicaState.complete`` finding a request's place by its join order: ``running`` stays in join order.
The reference equality tests (test_sim_reference.py) hold both paths to the independent simulators as well."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.calc.sim import steps
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


def _generic_loop(self, progress):
    """``_EventLoop.run`` with ``decode`` (``Prices.run``, ``ReplicaState.crossings``), in place of ``run_fast``."""
    self.engine_fast = False
    return self.run(None, progress)


# speed19v: the engines' schedulers on the O(1) path run in one loop (``_EventLoop.run_fast``: run and decode in one
# function, the run's price, blocks, overflow step and next event written out); the same events, times, marks and
# counts as the generic loop: SGLang with the overlap scheduler on and off, the radix tree (victims' paths kept,
# finished caches), HiCache, a running cap, DP attention (chunked prompts); vLLM V1 under its release families
# (first-chunk admission before v0.19, whole-input v0.19+, hashless blocks first v0.24+, async scheduling v0.14+ and
# off), a what-if victim, a small token budget (prompts in many chunks) and a running cap
SG_CASES = [(c, {"disable_overlap_schedule": o}) for c in ("tight", "hicache", "max-batch", "dp-attention", "idle")
            for o in (None, True)]
V1_CASES = [("vllm", {}), ("vllm", {"async_scheduling": False}), ("vllm==0.11.0", {}), ("vllm==0.20.0", {}),
            ("vllm==0.23.0", {"victim": "fewest-tokens"}), ("vllm==0.15.1", {"max_batch": 12}),
            ("vllm-budget", {"max_batch": 64}), ("vllm-idle", {}),
            # v1chunk19: prefill chunks capped (--long-prefill-token-threshold), several prompts part-way at once
            ("vllm-budget", {"max_batch": 64, "long_prefill_token_threshold": 100}),
            ("vllm==0.30.0", {"long_prefill_token_threshold": 300})]


@pytest.mark.parametrize("case,opts", SG_CASES + V1_CASES)
def test_run_fast_is_the_generic_loop(case, opts, monkeypatch):
    from kvplan.engines.sglang_scheduler import HiCache

    opts = dict(opts)
    pool, work = "600MiB", wl.build(requests=300, seed=2, prompt=wl.parse_dist("uniform:20,1500", "p"),
                                    output=wl.parse_dist("uniform:300,2500", "o"), max_len=4000, rate=40.0)
    kw = dict(BASE, engine="sglang", model="llama-3.1-8b", hardware="h100-sxm", tp="1", dp="1")
    extra: dict = {}
    if case == "hicache":
        opts["hicache"] = HiCache()
    elif case == "max-batch":
        opts["max_batch"] = 12
    elif case == "dp-attention":      # DeepSeek-R1 over 8 attention-DP ranks: 1,024-token chunks
        kw = dict(BASE, engine="sglang", model="deepseek-r1", tp="1", dp="8", ep="8")
    elif case in ("idle", "vllm-idle"):   # arrivals far apart: the replica idles, runs are cut by arrivals
        work = _work(0.5, 60)
    if case.startswith("vllm"):
        kw = dict(kw, engine=case if case.startswith("vllm==") else "vllm")
        if case == "vllm-budget":     # prompts of up to 1,500 tokens in 256-token chunks
            extra["max_num_batched_tokens"] = "256"
    s = build_scenario(**kw, kv_pool=pool, **extra)
    fast = sim.simulate(s, work, sim.SimOptions(**opts))
    monkeypatch.setattr(sim._EventLoop, "run_fast", _generic_loop)
    slow = sim.simulate(s, work, sim.SimOptions(**opts))
    _same(fast, slow)
    assert fast.events > 0 and fast.scheduler.startswith("SGLang" if kw["engine"] == "sglang" else "vLLM V1")
    if "idle" not in case:
        assert fast.preemptions.sum() > 0
    else:
        assert fast.preemptions.sum() == 0 and fast.decode_steps > fast.events


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("rate", [40.0, 0.5])
@pytest.mark.parametrize("prefix", [None, "40"])
def test_run_fast_is_run_with_decode_deepseek(engine, rate, prefix, monkeypatch):
    # a 400 MiB pool of DeepSeek-R1 (the reference tests' deepseek-r1 case) preempts at 40 requests/s; at 0.5/s the
    # batch is small and runs are cut by arrivals
    s = build_scenario(**dict(BASE, engine=engine), kv_pool="400MiB", shared_prefix=prefix)
    work = _work(rate)
    fast = sim.simulate(s, work, sim.SimOptions())
    monkeypatch.setattr(sim._EventLoop, "run_fast", _generic_loop)
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


def test_complete_frees_as_leave_and_finished_do():
    # the same five requests as above: the inline path (nobody hears of a finish, open arrivals) leaves each
    # finished request's state as ReplicaState.leave and finished leave it. At step 1, 4 and 0 (prompt 10, one
    # token generated before they joined) finish with 2 tokens each
    def state(hear: bool):
        r = ReplicaState(prompts=[10] * 5, outputs=[2, 9, 12, 9, 2], block=4, blocks_at=list(range(100)),
                         total_blocks=90, prefix_blocks=0, prefix_hit=0, dram_cap=None,
                         contexts=np.zeros(5, np.int64), contexts_used=False, prefill=lambda t, c: 0.0,
                         swap_cost=lambda c: (0, 0.0), arrivals=[0.0] * 5, users=0, think_s=0.0, duration_s=None)
        for i in (3, 1, 4, 0, 2):
            r.g[i] = 1 if i in (0, 4) else 0
            r.held[i] = r.btl[10 + r.g[i] - 1]
            r.free -= r.held[i]
            r.join(i)
        if hear:
            r.on_finish = lambda i: None       # takes the written-out leave() and finished() path
        r.steps, r.now = 1, 2.5
        r.complete()
        return r
    inline, called = state(False), state(True)
    for r in (inline, called):
        assert r.running == [3, 1, 2] and r.done == 2
        assert [r.g[i] for i in (0, 4)] == [2, 2] and [r.held[i] for i in (0, 4)] == [0, 0]
        assert [r.tally.finish[i] for i in (0, 4)] == [2.5, 2.5]
        # the table here is one block a token (btl[t] = t): 90 blocks less the five held at join (10 each for 0 and
        # 4, btl[10]; 9 each for 1, 2, 3, btl[9]), plus 0's and 4's 11 each back (their cache of 11 tokens after
        # the step, btl[11])
        assert r.free == 90 - (10 + 10 + 9 + 9 + 9) + 22 == 65 and r.freed == 90 + 22   # (from the pool)
    assert (inline.sum_xo, inline.phase, list(inline.in_run)) == (called.sum_xo, called.phase, list(called.in_run))


def test_first_step_reaching_by_hand():
    # step0 = 1 s, the cache-read series u = t (from 0, rising 1 a step), the FLOP series v = 2.5 (flat): v wins on
    # steps 0, 1, 2 (2.5 > 0, 1, 2), u from step 3 on. elapsed(j) = j + sum_{t<j} max(t, 2.5): 3.5, 7, 10.5, 14.5,
    # 19.5, ... ; 10 steps: 10 + 7.5 + (3 + ... + 9 = 42) = 59.5. The first step whose elapsed reaches 12 is the 4th.
    assert steps._first_step_reaching(1.0, 0.0, 1.0, 2.5, 0.0, 10, 12.0, 59.5) == (4, 14.5)
    assert steps._first_step_reaching(1.0, 0.0, 1.0, 2.5, 0.0, 10, 10.5, 59.5) == (3, 10.5)
    assert steps._first_step_reaching(1.0, 0.0, 1.0, 2.5, 0.0, 10, 55.0, 59.5) == (10, 59.5)
    # parallel series (the same slope): the larger at step 0 wins throughout; 3 + 2 t: 3, 8, 15, 24 (+ j)
    assert steps._first_step_reaching(1.0, 2.0, 2.0, 3.0, 2.0, 6, 16.0, 6 + 3 * 6 + 30.0) == (3, 18.0)


def test_first_step_reaching_is_its_definition():
    # elapsed(j) = j step0 + _affine_max_sum(u0, u1, v0, v1, j), as its docstring defines it; the probes write that
    # sum out: the same j and the same float, over crossings, parallel series and both orders
    import random

    rnd = random.Random(7)
    for _ in range(20_000):
        step0 = rnd.uniform(1e-3, 5e-2)
        u0, v0 = rnd.uniform(0, 2e-2), rnd.uniform(0, 2e-2)
        u1, v1 = rnd.choice([0.0, rnd.uniform(0, 1e-5)]), rnd.choice([0.0, rnd.uniform(0, 1e-5)])
        if rnd.random() < 0.2:
            u1 = v1
        k = rnd.randint(2, 4000)
        end = k * step0 + steps._affine_max_sum(u0, u1, v0, v1, k)
        target = rnd.uniform(0, end)
        j, at = steps._first_step_reaching(step0, u0, u1, v0, v1, k, target, end)
        assert at == j * step0 + steps._affine_max_sum(u0, u1, v0, v1, j) and at >= target
        assert j == 1 or (j - 1) * step0 + steps._affine_max_sum(u0, u1, v0, v1, j - 1) < target


@pytest.mark.parametrize("engine", ["vllm", "vllm==0.20.0"])
def test_v1_whole_input_head_never_fits_after_a_preemption(engine, monkeypatch):
    # V1Scheduler.may_admit_soon answers no under whole-input admission (v0.19+) without looking the head up: the
    # head is the last victim, which frees its h blocks and takes its d off the step's N blocks that exceeded the
    # free F; it needs btl[its tokens] = h + d, and F + h - (N - d) - next >= h + d would need F >= N + next. Here the
    # lookup it skips is made at every such answer of a preempting run and is never a fit
    from kvplan.engines import vllm_scheduler as vs

    s = build_scenario(**dict(BASE, engine=engine), kv_pool="400MiB")
    asked: list[bool] = []
    answer = vs.V1Scheduler.may_admit_soon

    def checked(self, r, pops):
        b = len(r.running)
        if self.full_isl and r.waiting and b < self.max_seqs and b < self.budget:
            asked.append(self._head(r, self.budget - b, r.free - pops, pops) is not None)
        return answer(self, r, pops)

    monkeypatch.setattr(vs.V1Scheduler, "may_admit_soon", checked)
    run = sim.simulate(s, _work(40.0), sim.SimOptions())
    assert run.preemptions.sum() > 0 and len(asked) > 20 and not any(asked)


# speed19w: costs.StepModel.prefill_attention reads each layer kind's constants once (``_attention_terms``) when no
# layer caps its keys; a chunk of tokens 1,000..3,000 worked by hand (causal pairs 3000^2/2 - 1000^2/2 = 4,000,000 a
# layer of full attention, 128 x 2,000 = 256,000 under a 128-key window, per-token state FLOPs x 2,000):
#   llama-3.1-8b        32 x 16,384 x 4e6                                  = 2.097152e12
#   gpt-oss-20b         12 x 16,384 x 256,000 + 12 x 16,384 x 4e6          = 8.36763648e11 (windows: the kinds' path)
#   qwen3-next-80b-a3b  36 x 3,670,016 x 2,000 + 12 x 16,384 x 4e6         = 1.050673152e12 (GatedDeltaNet state)
#   deepseek-r1         61 x 81,920 x 4e6 x 890.55 / 445.05 (MLA at the BF16 rate: MLA_BF16_SOURCE)
# and each equal, bit for bit, to the sum of the kinds' own prefill_attention_flops it writes out
@pytest.mark.parametrize("model,expected,terms", [
    ("llama-3.1-8b", 2.097152e12, True), ("gpt-oss-20b", 8.36763648e11, False),
    ("qwen3-next-80b-a3b", 1.050673152e12, True), ("deepseek-r1", 61 * 81920 * 4e6 * 890.55 / 445.05, True)])
def test_prefill_attention_terms_are_the_kinds_sum(model, expected, terms):
    from kvplan.specs.layers import MLA

    sm = costs.step_model(build_scenario(**dict(BASE, model=model)))
    if model == "deepseek-r1":             # H200: FP8 matmuls at 890.55 TFLOP/s, MLA's BF16 core at 445.05
        assert (sm.prefill_flops_s, sm.prefill_mla_flops_s) == (890.55e12, 445.05e12)
    assert (sm._attention_terms is not None) is terms
    assert sm.prefill_attention(3000, 1000) == pytest.approx(expected, rel=1e-12)
    scale = sm.prefill_flops_s / (sm.prefill_mla_flops_s or sm.prefill_flops_s)
    for start, end in ((0, 1), (1000, 3000), (4095, 12287), (99_999, 163_840)):
        kinds = sum(g.count * g.kind.prefill_attention_flops(end, start) * (scale if isinstance(g.kind, MLA) else 1)
                    for g in sm.scenario.sized_model.groups)
        assert sm.prefill_attention(end, start) == kinds
