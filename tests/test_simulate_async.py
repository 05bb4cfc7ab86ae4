"""vLLM's async scheduling in ``kvplan simulate`` (kvplan/engines/vllm_scheduler.py, "Async scheduling"; the release
rule in kvplan/engines/vllm.py ``ASYNC_SINCE``; the reference's rule 7 in tests/sim_reference.py).

vLLM's engine core schedules step N+1 while the GPU runs step N (vllm/v1/engine/core.py step_with_batch_queue, a batch
queue of two), so a step is decided from what the engine knew when the step before it started: a request that arrives
during step N is first scheduled in step N+2, and a request whose last token comes out of step N still holds its
blocks and its max_num_seqs seat when step N+1 is decided (update_from_output(N) runs after schedule(N+1)). The hand
cases below price each step with the one cost model (``StepModel.mixed_step``), as tests/test_simulate_vllm.py does.
"""

from __future__ import annotations

import numpy as np
import pytest
import sim_reference as ref  # tests/ is on sys.path (rootdir-less test modules)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_reference import CASES, assert_same_v1, check_random_small_trace, small_work
from test_simulate_vllm import at_zero, decode, tiny

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.engines.vllm import VllmEngine, for_release
from kvplan.errors import KvplanError
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario

ON, OFF = sim.SimOptions(max_batch=8, async_scheduling=True), sim.SimOptions(max_batch=8, async_scheduling=False)


def reads(sm, c: int) -> tuple[float, float]:
    """One request's cache bytes and attention FLOPs at context c (the step's reads)."""
    b, f = sm.request_cache(float(c))
    return float(b), float(f)


# --- the release rule ----------------------------------------------------------------------------------------------
def test_on_by_default_from_v0_14_and_off_before():
    # v0.13.0 vllm/config/scheduler.py: async_scheduling: bool = False; v0.14.0: Field(default=None), which
    # VllmConfig.__post_init__ turns on (no speculative method other than EAGLE/MTP, the mp/uni executor)
    assert for_release((0, 13, 0)).async_scheduling(None)[0] is False
    assert for_release((0, 14, 0)).async_scheduling(None)[0] is True
    assert for_release((0, 15, 1)).async_scheduling(None)[0] is True
    assert VllmEngine().async_scheduling(None)[0] is True
    # v0.14.x turns it off with pipeline parallelism ("not yet supported with pipeline_parallel_size > 1");
    # v0.15.0 dropped that check
    assert for_release((0, 14, 0)).async_scheduling(None, pp=2)[0] is False
    assert for_release((0, 15, 0)).async_scheduling(None, pp=2)[0] is True
    # the flags, as vLLM's --async-scheduling / --no-async-scheduling
    assert for_release((0, 15, 1)).async_scheduling(False)[0] is False
    assert for_release((0, 12, 0)).async_scheduling(True)[0] is True
    # v0.11.0's async scheduler has no skip of a request whose in-flight token reaches max_tokens (v0.12.0's
    # scheduler.py has it): kvplan does not model that one
    with pytest.raises(KvplanError, match="from 0.12"):
        for_release((0, 11, 0)).async_scheduling(True)


def test_the_output_names_async_scheduling_and_its_source():
    on = sim.simulate(tiny(), at_zero([20], [2]), sim.SimOptions(max_batch=8))
    assert "async scheduling" in on.scheduler and "async scheduling on: the default from 0.14" in \
        on.scheduler_notes[0]
    off = sim.simulate(tiny(), at_zero([20], [2]), OFF)
    assert "async scheduling" not in off.scheduler and "async scheduling off: --no-async-scheduling" in \
        off.scheduler_notes[0]
    old = sim.simulate(tiny("vllm==0.13.0"), at_zero([20], [2]), sim.SimOptions(max_batch=8))
    assert "async scheduling off: the default before 0.14" in old.scheduler_notes[0]


def test_the_flags_from_the_command_line(run_cli):
    import json

    args = ("simulate", "--engine", "vllm", "--requests", "40", "--rate", "20", "--format", "json")
    on, off = run_cli(*args), run_cli(*args, "--no-async-scheduling")
    assert on.code == 0 and off.code == 0, (on.err, off.err)
    ttft_on = json.loads(on.out)["ttft_seconds_p50"]
    ttft_off = json.loads(off.out)["ttft_seconds_p50"]
    assert ttft_on > ttft_off          # an arrival waits one step more to be scheduled
    bad = run_cli("simulate", "--engine", "vllm==0.11.0", "--requests", "10", "--async-scheduling")
    assert bad.code == 2 and "from 0.12" in bad.err and "Traceback" not in bad.err
    assert len(bad.err.strip().splitlines()) <= 2
    for flag in ("--async-scheduling", "--no-async-scheduling"):     # another engine's: refused, not ignored
        other = run_cli("simulate", "--engine", "sglang", "--requests", "10", flag)
        assert other.code == 2 and f"{flag} is vLLM's" in other.err and "Traceback" not in other.err


# --- hand-worked ---------------------------------------------------------------------------------------------------
def test_an_arrival_during_a_step_is_first_scheduled_a_step_later():
    """A (16 tokens, 10 out) at 0 s; B (8, 2) arrives in the middle of step 3 (A's second decode).
    step 1: A's prompt alone, T1 = mixed_step(0, [(0, 16)]); step 2: A decodes reading 17, T2 = T1 + decode(17);
    step 3: reading 18, T3 = T2 + decode(18); B arrives at (T2 + T3) / 2.
    Off: B is seen at T3 and step 4 carries A's decode (19) and B's 8 tokens: B's first token at T3 +
    mixed_step(1 decoder at 19, [(0, 8)]).
    On: step 4 was decided at T2, before B arrived: A alone, T4 = T3 + decode(19); B's prompt rides in step 5 with
    A reading 20: its first token at T4 + mixed_step(1 decoder at 20, [(0, 8)])."""
    s = tiny()
    sm = costs.step_model(s)
    t1 = sm.mixed_step(0, 0.0, 0.0, [(0, 16)])
    t2 = t1 + decode(sm, [17])
    t3 = t2 + decode(sm, [18])
    work = wl.Workload(prompts=np.array([16, 8]), outputs=np.array([10, 2]), arrivals=np.array([0.0, (t2 + t3) / 2]),
                       users=None, think_s=0.0, duration_s=None, describe="hand-worked")
    off, on = sim.simulate(s, work, OFF), sim.simulate(s, work, ON)
    np.testing.assert_allclose(off.admitted, [0.0, t3], rtol=1e-12)
    np.testing.assert_allclose(off.first_token[1], t3 + sm.mixed_step(1, *reads(sm, 19), [(0, 8)]), rtol=1e-12)
    t4 = t3 + decode(sm, [19])
    np.testing.assert_allclose(on.admitted, [0.0, t4], rtol=1e-12)
    np.testing.assert_allclose(on.first_token[1], t4 + sm.mixed_step(1, *reads(sm, 20), [(0, 8)]), rtol=1e-12)
    assert on.decode_steps == off.decode_steps == 10      # A's 10 tokens: its prefill and 9 decodes
    for run, opts in ((off, False), (on, True)):
        assert_same_v1(run, ref.run_vllm(s, work, max_batch=8, async_scheduling=opts))


def test_a_finished_requests_seat_is_freed_a_step_later():
    """max_num_seqs 2: A (16, 3 out), C (8, 10) and B (8, 2), all at 0 s. Step 1: A's and C's prompts (24 of the 64
    tokens), S1 = mixed_step(0, [(0, 16), (0, 8)]); steps 2 and 3 decode both (reading 17, 9 then 18, 10); A's third
    token ends step 3: A is done at S3.
    Off: B takes A's seat in step 4, with C reading 11: B's first token at S3 + mixed_step(1 at 11, [(0, 8)]).
    On: step 4 was decided at S2, when A still held its seat (vLLM skips A in step 4: its in-flight token reaches
    max_tokens, but A stays in self.running until update_from_output(3)): C decodes alone, S4 = S3 + decode(11),
    and B rides in step 5 with C reading 12."""
    s = tiny()
    sm = costs.step_model(s)
    work = at_zero([16, 8, 8], [3, 10, 2])
    opts = {True: sim.SimOptions(max_batch=2, async_scheduling=True),
            False: sim.SimOptions(max_batch=2, async_scheduling=False)}
    off, on = sim.simulate(s, work, opts[False]), sim.simulate(s, work, opts[True])
    s3 = sm.mixed_step(0, 0.0, 0.0, [(0, 16), (0, 8)]) + decode(sm, [17, 9]) + decode(sm, [18, 10])
    np.testing.assert_allclose(off.finish[0], s3, rtol=1e-12)
    np.testing.assert_allclose(on.finish[0], s3, rtol=1e-12)         # A's own times do not change
    np.testing.assert_allclose(off.admitted[2], s3, rtol=1e-12)
    np.testing.assert_allclose(off.first_token[2], s3 + sm.mixed_step(1, *reads(sm, 11), [(0, 8)]), rtol=1e-12)
    s4 = s3 + decode(sm, [11])
    np.testing.assert_allclose(on.admitted[2], s4, rtol=1e-12)
    np.testing.assert_allclose(on.first_token[2], s4 + sm.mixed_step(1, *reads(sm, 12), [(0, 8)]), rtol=1e-12)
    for a in (False, True):
        assert_same_v1(sim.simulate(s, work, opts[a]), ref.run_vllm(s, work, max_batch=2, async_scheduling=a))


def test_an_empty_decision_is_made_again_at_once():
    """A (16, 3 out) alone; B (8, 2) arrives during step 3, A's last. On: step 4 was decided at T2, with A skipped
    (its last token in flight) and B not yet seen: nothing to run, so the GPU idles and the next decision is made
    when step 3 ends, with everything known (an empty batch-queue entry in step_with_batch_queue): B's prompt runs
    alone from T3, as with async scheduling off."""
    s = tiny()
    sm = costs.step_model(s)
    t2 = sm.mixed_step(0, 0.0, 0.0, [(0, 16)]) + decode(sm, [17])
    t3 = t2 + decode(sm, [18])
    work = wl.Workload(prompts=np.array([16, 8]), outputs=np.array([3, 2]), arrivals=np.array([0.0, (t2 + t3) / 2]),
                       users=None, think_s=0.0, duration_s=None, describe="hand-worked")
    for opts in (OFF, ON):
        run = sim.simulate(s, work, opts)
        np.testing.assert_allclose(run.admitted, [0.0, t3], rtol=1e-12)
        np.testing.assert_allclose(run.first_token[1], t3 + sm.mixed_step(0, 0.0, 0.0, [(0, 8)]), rtol=1e-12)


def test_a_finished_requests_blocks_are_freed_after_the_next_decision():
    """tests/test_simulate_vllm.py's hashless case (A (48, 30 out), B (20, 40), C (8, 30) at 0 s; 10 blocks of 16):
    C is preempted at step 27 with its 2 full blocks hashed at the queue's tail; A is done at the end of step 30.
    Off, from v0.24.0 A's partial block goes to the queue's front and B's new block at step 31 is that one: C keeps
    both blocks (a hit of 32 tokens). On (every release here): step 31 is decided before A's blocks are freed, so B
    takes the front of the queue, C's 2nd block; C (whose 33 tokens need 3 blocks, v0.19+ whole-input admission)
    does not fit then (1 free), and at step 32, A's 5 blocks freed, it resumes with its 1st block: 16 tokens hit, 16
    recomputed, as v0.23.0 gives with async scheduling off."""
    work = at_zero([48, 20, 8], [30, 40, 30])
    for engine in ("vllm==0.24.0", "vllm"):
        on = sim.simulate(tiny(engine), work, ON)
        assert list(on.preemptions) == [0, 0, 1]
        assert list(on.recompute_hit_tokens) == [0, 0, 16] and list(on.recomputed) == [0, 0, 16]
        off = sim.simulate(tiny(engine), work, OFF)
        assert list(off.recompute_hit_tokens) == [0, 0, 32]
        assert_same_v1(on, ref.run_vllm(tiny(engine), work, max_batch=8, async_scheduling=True))


# --- the independent reference, on and off -------------------------------------------------------------------------
ASYNC_RELEASES = ["vllm==0.12.0", "vllm==0.15.1", "vllm"]


@pytest.mark.parametrize("engine", ASYNC_RELEASES)
@pytest.mark.parametrize("budget", [None, "128"])
@pytest.mark.parametrize("prefix", [None, "40"])
@pytest.mark.parametrize("victim", sim.VICTIMS)
@pytest.mark.parametrize("on", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_async_scheduling_equals_the_reference(case, on, victim, prefix, budget, engine):
    base, pool, _ = CASES[case]
    s = build_scenario(**dict(base, engine=engine), kv_pool=pool, shared_prefix=prefix, max_num_batched_tokens=budget)
    work = small_work(rate=40.0 if case == "gpt-oss-120b" else 20.0)
    max_batch = 64 if budget else None
    fast = sim.simulate(s, work, sim.SimOptions(victim=victim, max_batch=max_batch, async_scheduling=on))
    assert_same_v1(fast, ref.run_vllm(s, work, victim, max_batch=max_batch, async_scheduling=on))
    assert fast.preemptions.sum() > 0


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(CASES)), victim=st.sampled_from(sim.VICTIMS), seed=st.integers(0, 10_000),
       requests=st.integers(1, 20), rate=st.sampled_from([2.0, 20.0, 200.0]), budget=st.sampled_from([None, 32, 100]),
       max_batch=st.sampled_from([1, 2, 5, 16]), pool_factor=st.sampled_from([1.05, 1.5, 3.0]),
       prompt=st.sampled_from(["uniform:33,200", "fixed:64"]), prefix=st.sampled_from([None, 1, 33]),
       users=st.sampled_from([None, (3, 0.0, None), (6, 0.05, 0.5)]), engine=st.sampled_from(ASYNC_RELEASES),
       on=st.booleans())
def test_async_scheduling_random_small_traces(case, victim, seed, requests, rate, budget, max_batch, pool_factor,
                                              prompt, prefix, users, engine, on):
    check_random_small_trace(case, victim, seed, requests, rate, budget, max_batch, pool_factor, prompt, prefix, users,
                             engine, async_scheduling=on)

