"""vLLM V1's --long-prefill-token-threshold in ``kvplan simulate`` (kvplan/engines/vllm_scheduler.py, "Long
prefills"): each request's prefill chunk capped, several requests part-way through their prefill at once, each at
the place it was admitted; from v0.31.0 not while a request is alone; the flags V1 does not take, refused. Worked by
hand on tests/test_simulate_vllm.py's ``tiny`` pool (Llama-3.1-8B, 10 blocks of 16 tokens, budget 64 a step). The
rules as read in the vLLM wheels: v0.8.5 and v0.30.0 ``vllm/v1/core/sched/scheduler.py`` (``if 0 <
long_prefill_token_threshold < num_new_tokens: num_new_tokens = threshold`` in the running and the waiting loops),
v0.31.0 (``num_eligible_reqs > 1``), v0.26.0 ``vllm/engine/arg_utils.py`` (``_check_feature_supported``), v0.27.0
``vllm/config/scheduler.py`` (``verify_max_model_len``)."""

from __future__ import annotations

import numpy as np
import pytest
from test_simulate_vllm import LLAMA, at_zero, decode, tiny

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.errors import KvplanError
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario


def capped(engine: str, max_model_len: str) -> object:
    """``tiny`` with a context limit of its own."""
    return build_scenario(**{**LLAMA, "max_model_len": max_model_len, "prompt": "100", "decode": "2"}, engine=engine,
                          kv_pool="20MiB", max_num_batched_tokens="64" if engine.startswith("vllm") else None)


def test_three_prompts_under_a_cap_of_24_by_hand():
    """A (40 tokens, 3 out), B (40, 3), C (10, 2) at 0 s; cap 24; v0.33.0 (whole-input admission), async off.
    step 1 (three requests, so the cap holds): A takes min(40, 24, 64) = 24 tokens (its 40 need 3 blocks, 10 free:
            admitted; 24 tokens hold 2 blocks, 8 free), 40 of the budget left; B the same (6 free, 16 left); C (needs
            1 block) min(10, 24, 16) = 10 tokens (5 free): C's prompt is done, its first token at the step's end.
            Without the cap A would take all 40 and B 24, and C would wait.
    step 2: in the order admitted: A's last 16 tokens (a 3rd block, 4 free), B's last 16 (3 free), C decodes
            (reads 11; 11 tokens fit its block): A's and B's first tokens; C has its 2 tokens, done.
    steps 3, 4: A and B decode (read 41, then 42; 3 blocks hold 48 tokens): both done."""
    s = tiny()
    sm = costs.step_model(s)
    opts = sim.SimOptions(max_batch=8, async_scheduling=False, long_prefill_token_threshold=24)
    run = sim.simulate(s, at_zero([40, 40, 10], [3, 3, 2]), opts)
    t1 = sm.mixed_step(0, 0.0, 0.0, [(0, 24), (0, 24), (0, 10)])
    b11, f11 = (float(v) for v in sm.request_cache(11.0))
    t2 = sm.mixed_step(1, b11, f11, [(24, 40), (24, 40)])
    t3, t4 = decode(sm, [41, 41]), decode(sm, [42, 42])
    np.testing.assert_allclose(run.first_token, [t1 + t2, t1 + t2, t1], rtol=1e-12)
    np.testing.assert_allclose(run.finish, [t1 + t2 + t3 + t4] * 2 + [t1 + t2], rtol=1e-12)
    assert run.decode_steps == 4 and run.mixed_steps == 2
    assert run.mixed_prefill_tokens == (24 + 24 + 10) + (16 + 16)
    assert run.peak_running == 3 and run.peak_blocks_used == 7 and run.preemptions.sum() == 0
    # no cap: step 1 is A's 40 and B's first 24 (the budget spent), so C's first token comes later
    plain = sim.simulate(s, at_zero([40, 40, 10], [3, 3, 2]), sim.SimOptions(max_batch=8, async_scheduling=False))
    assert plain.first_token[0] == pytest.approx(sm.mixed_step(0, 0.0, 0.0, [(0, 40), (0, 24)]), rel=1e-12)
    assert plain.first_token[2] > run.first_token[2]


@pytest.mark.parametrize(("engine", "chunks"), [
    # v0.30.0: the cap holds even alone: 100 tokens in chunks of 24, 24, 24, 24, 4
    ("vllm==0.30.0", [(0, 24), (24, 48), (48, 72), (72, 96), (96, 100)]),
    # v0.31.0 and later: alone, num_eligible_reqs = 1, so no cap: the budget's 64, then 36
    ("vllm==0.31.0", [(0, 64), (64, 100)]),
    ("vllm", [(0, 64), (64, 100)]),
])
def test_a_request_alone_is_capped_only_before_v0_31(engine, chunks):
    s = tiny(engine)
    sm = costs.step_model(s)
    opts = sim.SimOptions(max_batch=8, async_scheduling=False, long_prefill_token_threshold=24)
    run = sim.simulate(s, at_zero([100], [2]), opts)
    first = sum(sm.mixed_step(0, 0.0, 0.0, [c]) for c in chunks)
    assert run.first_token[0] == pytest.approx(first, rel=1e-12)
    assert run.mixed_steps == len(chunks) and run.mixed_prefill_tokens == 100
    assert run.finish[0] == pytest.approx(first + decode(sm, [101]), rel=1e-12)


def test_every_request_and_block_is_accounted_for_with_several_prefills_part_way():
    """At every event of a capped V1 run that preempts: each request in one place (running, part-way through its
    prefill, waiting, not arrived, finished); free + held blocks = the pool; a request part-way holds the blocks of
    its computed tokens, a running one those of its cache; and several requests are part-way at once."""
    from kvplan.calc import capacity

    s = build_scenario(**LLAMA, engine="vllm", kv_pool="200MiB", max_num_batched_tokens="256")
    work = wl.build(requests=40, seed=2, prompt=wl.parse_dist("uniform:50,400", "p"),
                    output=wl.parse_dist("lognormal:mean=300,p99=1200", "o"), max_len=1600, rate=20.0)
    P, L, n = np.asarray(work.prompts), np.asarray(work.outputs), len(work.prompts)
    block_bytes = 16 * 131_072
    most = [0]

    def blocks(tokens: int) -> int:
        return -(-capacity.request_bytes(s, tokens) // block_bytes)

    def check(st):
        g, held = st["generated"], st["held_blocks"]
        finished = tuple(int(i) for i in np.flatnonzero(np.isfinite(st["finish"])))
        places = [st["running"], st["prefilling"], st["waiting"], st["not_arrived"], finished]
        assert sorted(i for place in places for i in place) == list(range(n))
        assert st["free_blocks"] + int(held.sum()) == st["total_blocks"] and st["free_blocks"] >= 0
        for i in st["running"]:
            assert held[i] == blocks(int(P[i] + g[i] - 1)), i
        for i, done in zip(st["prefilling"], st["prefilled_tokens"], strict=True):
            assert 0 < done < P[i] + g[i] and held[i] == blocks(done)
        most[0] = max(most[0], len(st["prefilling"]))
        assert (g <= L).all() and all(g[i] == L[i] for i in finished)

    run = sim.simulate(s, work, sim.SimOptions(max_batch=32, on_event=check, long_prefill_token_threshold=48))
    assert run.preemptions.sum() > 0 and np.isfinite(run.finish).all()
    assert most[0] >= 3        # 256 tokens a step in chunks of at most 48: up to five prompts part-way at once


def test_the_run_names_the_cap_in_its_rules():
    s = tiny()
    run = sim.simulate(s, at_zero([40], [2]), sim.SimOptions(max_batch=8, long_prefill_token_threshold=24))
    assert "prefill chunks capped at 24 tokens" in run.scheduler
    assert any("long_prefill_token_threshold" in note for note in run.scheduler_notes)


@pytest.mark.parametrize(("engine", "opts", "says"), [
    ("sglang", dict(long_prefill_token_threshold=24), "--long-prefill-token-threshold is vLLM's"),
    ("neutral", dict(max_num_partial_prefills=1), "--max-num-partial-prefills is vLLM's"),
    # v0.8.0's V1 has no cap (arg_utils.py falls back to V0 when it is set); v0.7.3 is V0
    ("vllm==0.8.0", dict(long_prefill_token_threshold=24), "from 0.8.5"),
    ("vllm==0.7.3", dict(long_prefill_token_threshold=24), "from 0.8.5"),
    # max_model_len is 160 tokens here: refused from v0.27.0 (verify_max_model_len)
    ("vllm", dict(long_prefill_token_threshold=161), "more than max_model_len 160"),
    ("vllm==0.27.0", dict(long_prefill_token_threshold=161), "more than max_model_len 160"),
    ("vllm==0.26.0", dict(max_num_partial_prefills=2), "no concurrent partial prefills"),
    ("vllm==0.26.0", dict(max_long_partial_prefills=2), "no concurrent partial prefills"),
    ("vllm==0.27.0", dict(max_num_partial_prefills=1), "the flag is gone from 0.27"),
    ("vllm", dict(long_prefill_token_threshold=24, victim="fewest-tokens"), "own victim only"),
    ("vllm", dict(long_prefill_token_threshold=24, kv_offloading_bytes=2**30), "offloading connector"),
])
def test_what_the_release_does_not_take_is_refused(engine, opts, says):
    s = capped(engine, "160")
    with pytest.raises(KvplanError, match=says):
        sim.simulate(s, at_zero([40], [2]), sim.SimOptions(max_batch=8, **opts))


@pytest.mark.parametrize("engine", ["vllm==0.26.0", "vllm==0.8.5"])
def test_what_the_release_takes_runs(engine):
    # before v0.27.0 a threshold over max_model_len starts (its check ran only with max_num_partial_prefills > 1)
    # and caps nothing: the same run as without it; max_num_partial_prefills 1 is the default
    s = capped(engine, "160")
    work = at_zero([100, 30], [2, 2])
    plain = sim.simulate(s, work, sim.SimOptions(max_batch=8))
    wide = sim.simulate(s, work, sim.SimOptions(max_batch=8, long_prefill_token_threshold=161,
                                                max_num_partial_prefills=1, max_long_partial_prefills=1))
    np.testing.assert_array_equal(wide.finish, plain.finish)


def test_the_command_line_refuses_in_one_line(run_cli):
    base = ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--engine", "vllm", "--requests", "5")
    out = run_cli(*base, "--long-prefill-token-threshold", "-5")
    assert out.code == 2 and "--long-prefill-token-threshold" in out.err and len(out.err.strip().splitlines()) <= 2
    out = run_cli(*base, "--max-num-partial-prefills", "2")
    assert out.code == 2 and "--max-num-partial-prefills" in out.err
    out = run_cli(*base, "--long-prefill-token-threshold", "512", "--format", "json")
    assert out.code == 0 and "prefill chunks capped at 512 tokens" in out.out


def test_capped_chunks_with_speculative_slots_equal_the_reference():
    """The cap with --speculative mtp:3 (each running request's 2K slots, the reference's rule 9): DeepSeek-R1's
    chunks of at most 40 tokens in a 128-token budget, preempting; the reference's rule 10 walks the batch."""
    import sim_reference as ref  # tests/ is on sys.path (rootdir-less test modules)
    from test_sim_reference import assert_same_v1, small_work
    from test_simulate_speculative import R1, SPECS

    s = build_scenario(**dict(R1, engine="vllm"), kv_pool="400MiB", max_num_batched_tokens="128")
    work = small_work()
    fast = sim.simulate(s, work, sim.SimOptions(max_batch=64, speculative=SPECS["flat mtp:3"],
                                                long_prefill_token_threshold=40))
    assert_same_v1(fast, ref.run_vllm(s, work, "newest", max_batch=64, speculative=SPECS["flat mtp:3"],
                                      long_prefill_token_threshold=40))
    assert fast.preemptions.sum() > 0 and fast.mixed_prefill_tokens >= sum(work.prompts)
    with pytest.raises(KvplanError, match="caps a decoding request's 1 \\+ 3 tokens too"):
        sim.simulate(s, work, sim.SimOptions(max_batch=64, speculative=SPECS["flat mtp:3"],
                                             long_prefill_token_threshold=3))
