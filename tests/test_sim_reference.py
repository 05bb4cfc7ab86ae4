"""``kvplan simulate``'s event-driven engine against the independent token-by-token reference
(``tests/sim_reference.py``), and conservation of requests, tokens, blocks and bytes at every event.

The reference shares no code with the engine (``kvplan/calc/simulate.py`` and the modules it drives): it walks one
decode step at a time over ``Req`` objects and prices each step with ``StepModel.step`` for the batch it holds, so
an error in the engine's closed-form sums, its bisections, its block table or its run boundaries shows up as a
difference here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sim_reference as ref  # tests/ is on sys.path (rootdir-less test modules)
from conftest import write_hardware
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.calc import capacity
from kvplan.calc import simulate as sim
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario

BASE = dict(model=None, hardware="h200", nodes="1", gpus=None, tp=None, pp="1", dp=None, ep=None, kv_dtype="auto",
            weight_dtype=None, engine="neutral", prompt="1k", decode="30k", mtp_layers=None, max_model_len=None,
            block_size=None, host_link_gbs=None, presets_dir=None)
# Llama-3.1-8B, BF16 KV, TP 1: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B per token; a 16-token
# block of every layer is 16 x 131,072 B = 2 MiB (config.json: huggingface.co/meta-llama/Llama-3.1-8B).
LLAMA = dict(BASE, model="llama-3.1-8b", hardware="h100-sxm", tp="1", dp="1", block_size="16")
MIB = 2**20
BLOCK_MIB = 2

# (scenario, pool, DRAM per node for swap-then-recompute): each preempts under every policy, and the DRAM tier is
# small enough that swap-then-recompute both swaps and recomputes. deepseek-r1 (MLA, one latent per token) is the
# default model; gpt-oss-120b has 128-token sliding windows on half its layers, so a block boundary does not always
# add a block (the engine's bisection path rather than its closed-form overflow step).
CASES = {
    "llama-3.1-8b": (LLAMA, "200MiB", 320 * MIB),
    "deepseek-r1": (BASE, "400MiB", 320 * MIB),
    "gpt-oss-120b": (dict(BASE, model="gpt-oss-120b"), "30MiB", 24 * MIB),
}
REQUEST_ARRAYS = ("preemptions", "swap_outs", "swap_ins", "recomputed", "peak_bytes", "offloads", "prefix_hit_tokens")
TIME_ARRAYS = ("arrival", "admitted", "first_token", "finish")
TOTALS = ("decode_steps", "swapped_out_bytes", "swapped_in_bytes", "peak_blocks_used", "peak_dram_bytes",
          "peak_running")
TIME_TOTALS = ("simulated_seconds", "prefill_seconds", "swap_stall_seconds")


def tpot(first_token, finish, outputs):
    first_token, finish, outputs = (np.asarray(x, dtype=float) for x in (first_token, finish, outputs))
    multi = outputs > 1
    return (finish[multi] - first_token[multi]) / (outputs[multi] - 1)


def assert_same(fast, r: ref.RefRun) -> None:
    """Integers identical, times equal to 1e-9 relative."""
    assert fast.setup.total_blocks == r.total_blocks and fast.setup.watermark_blocks == r.watermark_blocks
    assert fast.setup.block_bytes == r.block_bytes
    for name in REQUEST_ARRAYS:
        np.testing.assert_array_equal(getattr(fast, name), r.column(name), err_msg=name)
    for name in TOTALS:
        assert getattr(fast, name) == getattr(r, name), name
    for name in TIME_ARRAYS:
        np.testing.assert_allclose(getattr(fast, name), r.column(name), rtol=1e-9, atol=0, err_msg=name)
    for name in TIME_TOTALS:
        assert getattr(fast, name) == pytest.approx(getattr(r, name), rel=1e-9, abs=0), name
    np.testing.assert_allclose(tpot(fast.first_token, fast.finish, fast.outputs),
                               tpot(r.column("first_token"), r.column("finish"), r.column("output")),
                               rtol=1e-9, atol=0, err_msg="TPOT")


def small_work(seed=3, requests=30, rate=20.0):
    return wl.build(requests=requests, seed=seed, prompt=wl.parse_dist("uniform:50,400", "p"),
                    output=wl.parse_dist("lognormal:mean=300,p99=1200", "o"), max_len=1500, rate=rate)


# --- equality: every policy x victim rule, three kinds of model ------------------------------------------------
@pytest.mark.parametrize("policy", sim.POLICIES)
@pytest.mark.parametrize("victim", sim.VICTIMS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_event_engine_equals_the_token_by_token_reference(case, policy, victim):
    base, pool, dram = CASES[case]
    s = build_scenario(**base, kv_pool=pool)
    work = small_work(rate=40.0 if case == "gpt-oss-120b" else 20.0)
    fast = sim.simulate(s, work, sim.SimOptions(policy=policy, victim=victim, dram_bytes_per_node=dram))
    r = ref.run(s, work, policy, victim, dram_bytes_per_node=dram)
    assert_same(fast, r)
    # the case is a real test of preemption: it preempts, and each policy does what it says
    assert fast.preemptions.sum() > 0
    if policy == "swap":
        assert fast.swap_outs.sum() == fast.preemptions.sum() and fast.recomputed.sum() == 0
    elif policy == "recompute":
        assert fast.swap_outs.sum() == 0 and fast.recomputed.sum() > 0
    else:
        assert 0 < fast.swap_outs.sum() < fast.preemptions.sum() and fast.recomputed.sum() > 0


# --- the rules added after the reference was first written: proactive offload and a shared prefix ---------------
@pytest.mark.parametrize("threshold", [0.3, 0.6])
@pytest.mark.parametrize("policy", sim.POLICIES)
@pytest.mark.parametrize("victim", sim.VICTIMS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_offload_threshold_equals_the_reference(case, victim, policy, threshold):
    base, pool, dram = CASES[case]
    s = build_scenario(**base, kv_pool=pool)
    work = small_work(rate=40.0 if case == "gpt-oss-120b" else 20.0)
    opts = dict(policy=policy, victim=victim, dram_bytes_per_node=dram, offload_threshold=threshold)
    fast = sim.simulate(s, work, sim.SimOptions(**opts))
    assert_same(fast, ref.run(s, work, **opts))
    assert fast.offloads.sum() > 0                       # the threshold moved requests out
    assert (fast.swap_outs >= fast.offloads).all()       # an offload is a swap-out, not a preemption


@pytest.mark.parametrize("threshold", [None, 0.5])
@pytest.mark.parametrize("policy", sim.POLICIES)
@pytest.mark.parametrize("victim", sim.VICTIMS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_shared_prefix_equals_the_reference(case, victim, policy, threshold):
    base, pool, dram = CASES[case]
    # a 150-token system prompt in every prompt (100 .. 400 tokens): H = 144 tokens (9 blocks of 16) for llama and
    # gpt-oss, 128 (2 blocks of 64) for deepseek-r1 (MLA's 64-token blocks), a miss for the first prompt only
    s = build_scenario(**base, kv_pool=pool, shared_prefix="150")
    block = int(capacity.block_tokens(s).value)
    work = wl.build(requests=30, seed=3, prompt=wl.parse_dist("uniform:150,400", "p"),
                    output=wl.parse_dist("lognormal:mean=300,p99=1200", "o"), max_len=1500,
                    rate=40.0 if case == "gpt-oss-120b" else 20.0)
    opts = dict(policy=policy, victim=victim, dram_bytes_per_node=dram, offload_threshold=threshold)
    fast = sim.simulate(s, work, sim.SimOptions(**opts))
    assert_same(fast, ref.run(s, work, **opts))
    hit = 150 // block * block
    assert hit in (128, 144)
    assert list(fast.prefix_hit_tokens) == [0] + [hit] * 29
    assert fast.preemptions.sum() > 0 or fast.offloads.sum() > 0


def test_a_slow_host_link_queues_the_swaps_and_a_closed_loop_with_a_batch_cap(tmp_path):
    # a hand-written GPU whose host link is 2 GB/s x 0.5 = 1 GB/s per direction: a 2 MiB block takes ~2.5 ms
    # each way (x 1 / 0.83 for the shared link), longer than a decode step, so swap-outs and swap-ins queue
    gpu = write_hardware(tmp_path, 80, "slow-link", host_dram_gb=1, link_gb_s=2, efficiency=0.5)
    s = build_scenario(**dict(LLAMA, hardware=gpu), kv_pool="120MiB")
    work = wl.build(requests=24, seed=5, prompt=wl.parse_dist("uniform:20,300", "p"),
                    output=wl.parse_dist("uniform:1,700", "o"), max_len=900, users=9, think_s=0.05)
    for policy in sim.POLICIES:
        for victim in sim.VICTIMS:
            opts = dict(policy=policy, victim=victim, max_batch=6, watermark=0.05)
            fast = sim.simulate(s, work, sim.SimOptions(**opts))
            assert_same(fast, ref.run(s, work, **opts))
            assert fast.preemptions.sum() > 0
            if policy != "recompute":
                assert fast.swap_stall_seconds > 0 and fast.swap_ins.sum() > 0


# --- a case by hand: the batch a preemption trims never ran --------------------------------------------------
def hand_workload(prompts, outputs, arrivals):
    return wl.Workload(prompts=np.asarray(prompts, dtype=np.int64), outputs=np.asarray(outputs, dtype=np.int64),
                       arrivals=np.asarray(arrivals, dtype=float), users=None, think_s=0.0, duration_s=None,
                       describe="by hand")


@pytest.mark.parametrize("victim", sim.VICTIMS)
@pytest.mark.parametrize("engine", ["event", "reference"])
def test_peak_running_counts_a_batch_that_decoded(engine, victim):
    # A pool of 16 MiB / 2 MiB = 8 blocks, no watermark. Four 32-token prompts (2 blocks each) arrive at 0 s: all
    # four are admitted (8 of 8 blocks). Their first decode step writes token 33, a third block each: 12 > 8, so the
    # newest (request 4) is preempted (6 blocks held, 3 needed, 2 free), then request 3 (4 held, 2 needed, 4 free):
    # step 1 runs with requests 1 and 2 (3 blocks each, 2 free). After it request 3 (front of the queue) is
    # admitted again, 2 blocks (0 free), re-prefilling 32 tokens; step 2 needs a third block for it and none is
    # free: request 3 goes again (newest), step 2 runs 1 and 2, which are done (outputs of 3: one token from the
    # prefill, two from steps). Then 3 and 4 are re-prefilled (32 + 32 tokens) and decode 2 steps together.
    # Preemptions 0, 0, 2, 1; recomputed 3 x 32 = 96 tokens; 4 decode steps; peak blocks 8 (4 x 2 at admission);
    # no step ever ran more than 2 requests (the engine reported 4, the batch admission built before a preemption).
    # Every victim rule picks the same: the caches are equal (fewest-tokens takes the newest of equals,
    # longest-first-protected protects the older half of equals) and a re-admitted request 3 has the smallest cache
    # (32 against 33) and is the newest.
    s = build_scenario(**LLAMA, kv_pool="16MiB")
    work = hand_workload([32] * 4, [3] * 4, [0.0] * 4)
    if engine == "event":
        run = sim.simulate(s, work, sim.SimOptions(policy="recompute", victim=victim, watermark=0.0))
        got = (run.setup.total_blocks, run.peak_running, list(run.preemptions), int(run.recomputed.sum()),
               run.decode_steps, run.peak_blocks_used)
    else:
        r = ref.run(s, work, "recompute", victim, watermark=0.0)
        got = (r.total_blocks, r.peak_running, r.column("preemptions"), sum(r.column("recomputed")), r.decode_steps,
               r.peak_blocks_used)
    assert got == (8, 2, [0, 0, 2, 1], 96, 4, 8)


@pytest.mark.parametrize("engine", ["event", "reference"])
def test_two_swap_outs_queue_on_the_host_link(tmp_path, engine):
    # The same four requests under swap, on a hand-written GPU whose host link is 10 GB/s per direction (efficiency
    # 1). The first step preempts requests 4 then 3, as above; each copies its 32-token cache, 32 x 131,072 =
    # 4,194,304 B in ceil(32 / 16) = 2 block copies, costs.swap_seconds: 2 x 2.3 us + 4,194,304 / (10e9 x 0.83, the
    # shared link's bidirectional factor) = 4.6e-6 + 5.0533783e-4 = 5.0993783e-4 s. One direction is a FIFO queue,
    # so the second copy starts when the first lands and the step waits for both: 1.01987566e-3 s.
    gpu = write_hardware(tmp_path, 80, "link-10", link_gb_s=10, efficiency=1.0)
    s = build_scenario(**dict(LLAMA, hardware=gpu), kv_pool="16MiB")
    work = hand_workload([32] * 4, [3] * 4, [0.0] * 4)
    if engine == "event":
        run = sim.simulate(s, work, sim.SimOptions(policy="swap", watermark=0.0))
        got = (list(run.preemptions), list(run.swap_outs), list(run.swap_ins), int(run.recomputed.sum()),
               run.swapped_out_bytes, run.swapped_in_bytes)
        stall = run.swap_stall_seconds
    else:
        r = ref.run(s, work, "swap", watermark=0.0)
        got = (r.column("preemptions"), r.column("swap_outs"), r.column("swap_ins"), sum(r.column("recomputed")),
               r.swapped_out_bytes, r.swapped_in_bytes)
        stall = r.swap_stall_seconds
    assert got == ([0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1], 0, 2 * 4_194_304, 2 * 4_194_304)
    assert stall == pytest.approx(2 * (2 * 2.3e-6 + 4_194_304 / (10e9 * 0.83)), rel=1e-12)
    assert stall == pytest.approx(1.01987566e-3, rel=1e-8)


def test_a_closed_loop_duration_runs_only_the_requests_it_submitted():
    # One user, no think time: request k + 1 is submitted when request k finishes. With the duration halfway between
    # the first two finishes, requests 1 and 2 are submitted (at 0 s and at finish 1, before the end) and request 3
    # would be at finish 2, after it: the run is 2 requests and 2 x 50 tokens, not 5 and 250 (the engine counted
    # the three never submitted as finished, their tokens as generated, and their NaN times in the percentiles).
    s = build_scenario(**LLAMA, kv_pool="200MiB")

    def work(duration):
        return wl.build(requests=5, seed=0, prompt=wl.parse_dist("fixed:100", "p"),
                        output=wl.parse_dist("fixed:50", "o"), max_len=1000, users=1, duration_s=duration)

    whole = sim.simulate(s, work(None))
    assert np.isfinite(whole.finish).all() and len(whole.finish) == 5
    cut = work(float(whole.finish[0] + whole.finish[1]) / 2)
    run = sim.simulate(s, cut)
    assert_same(run, ref.run(s, cut))
    np.testing.assert_allclose(run.finish, whole.finish[:2], rtol=1e-12)
    m = sim.plan_simulate(s, cut).metrics
    assert m["requests_finished"].value == 2 and m["generated_tokens"].value == 2 * 50
    assert m["ttft_seconds_p99"].value is not None and np.isfinite(m["ttft_seconds_p99"].value)
    check_conservation(s, cut)


# --- conservation at every event -------------------------------------------------------------------------------
class Ledger:
    """Checks the engine's state at every event: each request in exactly one place, blocks and bytes balanced."""

    def __init__(self, s, work):
        self.s, self.P, self.L, self.n = s, np.asarray(work.prompts), np.asarray(work.outputs), len(work.prompts)
        block = int(capacity.block_tokens(s).value)
        alone = dataclasses.replace(s, shared_prefix_tokens=0)    # a block of every layer, no shared prefix off
        self.block_bytes = capacity.request_bytes(alone, block) - capacity.request_bytes(alone, 0)
        self.events = 0
        self.last = None
        self.last_dram = 0

    def nbytes(self, i, g):
        return capacity.request_bytes(self.s, int(self.P[i] + max(g - 1, 0)))

    def __call__(self, st_):
        self.events += 1
        g, held, in_dram = st_["generated"], st_["held_blocks"], st_["in_dram"]
        finished = tuple(int(i) for i in np.flatnonzero(np.isfinite(st_["finish"])))
        places = [st_["running"], st_["waiting"], st_["swapped"], st_["landing"], st_["leaving"], st_["not_arrived"],
                  finished]
        seen = [i for place in places for i in place]
        assert len(seen) == len(set(seen)), "a request in two places at once"
        unsubmitted = set(range(self.n)) - set(seen)         # a closed loop's requests not yet submitted
        assert all(g[i] == 0 for i in unsubmitted)
        # HBM: the free blocks and the blocks held add up to the pool, and only running, landing or leaving (an
        # offload still copying out) requests hold any, each exactly its cache rounded up to whole blocks
        assert st_["free_blocks"] + int(held.sum()) == st_["total_blocks"]
        assert st_["free_blocks"] >= 0
        in_hbm = set(st_["running"]) | set(st_["landing"]) | set(st_["leaving"])
        for i in range(self.n):
            if i in in_hbm:
                assert held[i] == -(-self.nbytes(i, int(g[i])) // self.block_bytes), i
            else:
                assert held[i] == 0, i
        # DRAM: a swapped request's bytes are there from its copy out's start until its swap-in lands (an offload
        # leaving is in HBM and DRAM at once); nothing else is
        parked = set(st_["swapped"]) | set(st_["landing"]) | set(st_["leaving"])
        for i in range(self.n):
            assert in_dram[i] == (self.nbytes(i, int(g[i])) if i in parked else 0), i
        assert st_["dram_used"] == int(in_dram.sum())
        # bytes copied out = bytes parked in DRAM now + bytes whose copy back has landed
        landed = st_["swapped_out_bytes"] - st_["dram_used"]
        assert 0 <= landed <= st_["swapped_in_bytes"]
        assert st_["swapped_in_bytes"] - landed == sum(int(in_dram[i]) for i in st_["landing"])
        # tokens: nobody generates more than its output; the finished generated exactly it; the waiting that were
        # preempted keep their tokens (their cache is dropped, not their output)
        assert (g <= self.L).all()
        assert all(g[i] == self.L[i] for i in finished)
        assert all(g[i] >= 1 for i in st_["running"] + st_["swapped"] + st_["landing"] + st_["leaving"])
        assert all(g[i] == 0 for i in st_["not_arrived"])
        self.last = st_


def check_conservation(s, work, **opts):
    ledger = Ledger(s, work)
    run = sim.simulate(s, work, sim.SimOptions(**opts, on_event=ledger))
    end = ledger.last
    assert ledger.events >= run.events                     # every loop turn, and the end
    # every request finishes; generated tokens = the sum of the outputs; nothing left in HBM or DRAM
    assert np.isfinite(run.finish).all() and (run.finish >= run.first_token).all()
    assert int(end["generated"].sum()) == int(run.outputs.sum())
    assert end["free_blocks"] == end["total_blocks"] and end["dram_used"] == 0
    assert not (end["running"] or end["waiting"] or end["swapped"] or end["landing"] or end["leaving"]
                or end["not_arrived"])
    # every swap-out came back once, with the same bytes
    np.testing.assert_array_equal(run.swap_outs, run.swap_ins)
    assert run.swapped_out_bytes == run.swapped_in_bytes
    return run


@pytest.mark.parametrize("policy", sim.POLICIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_conservation_at_every_event(case, policy):
    base, pool, dram = CASES[case]
    s = build_scenario(**base, kv_pool=pool)
    run = check_conservation(s, small_work(rate=40.0), policy=policy, victim="longest-first-protected",
                             dram_bytes_per_node=dram)
    assert run.preemptions.sum() > 0


@pytest.mark.parametrize("policy", sim.POLICIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_conservation_with_offloads_and_a_shared_prefix(case, policy):
    base, pool, dram = CASES[case]
    s = build_scenario(**base, kv_pool=pool, shared_prefix="150")
    work = wl.build(requests=30, seed=3, prompt=wl.parse_dist("uniform:150,400", "p"),
                    output=wl.parse_dist("lognormal:mean=300,p99=1200", "o"), max_len=1500, rate=40.0)
    run = check_conservation(s, work, policy=policy, victim="fewest-tokens", dram_bytes_per_node=dram,
                             offload_threshold=0.4)
    assert run.offloads.sum() > 0
    # the shared prefix's copy sits outside the blocks requests draw from: free + held = the pool less the copy
    assert run.setup.total_blocks + run.setup.prefix_blocks == int(capacity.kv_pool(s).kv_pool_bytes) // \
        run.setup.block_bytes


def test_every_decode_step_adds_one_token_per_running_request():
    # the reference's own ledger: each request gets its first token from its prefill and one per decode step it
    # is in, so the batches of all steps add up to sum(output - 1), however often requests were preempted
    base, pool, dram = CASES["llama-3.1-8b"]
    s = build_scenario(**base, kv_pool=pool)
    work = small_work()
    for policy in sim.POLICIES:
        r = ref.run(s, work, policy, "fewest-tokens", dram_bytes_per_node=dram)
        assert sum(b for b, _ in r.steps) == int((work.outputs - 1).sum())
        assert sum(r.column("preemptions")) > 0
        assert sum(dt for _, dt in r.steps) + r.prefill_seconds + r.swap_stall_seconds <= r.simulated_seconds * (
            1 + 1e-12)


# --- random small traces ---------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(CASES)), policy=st.sampled_from(sim.POLICIES),
       victim=st.sampled_from(sim.VICTIMS), seed=st.integers(0, 10_000), requests=st.integers(1, 20),
       rate=st.sampled_from([2.0, 20.0, 200.0]), max_batch=st.sampled_from([None, 2, 5]),
       watermark=st.sampled_from([0.0, 0.01, 0.1]), pool_factor=st.sampled_from([1.05, 1.5, 3.0]),
       prompt=st.sampled_from(["uniform:1,200", "fixed:64"]),
       users=st.sampled_from([None, (3, 0.0, None), (6, 0.05, 0.5)]), threshold=st.sampled_from([None, 0.4, 0.7]))
def test_random_small_traces(case, policy, victim, seed, requests, rate, max_batch, watermark, pool_factor, prompt,
                             users, threshold):
    base, _, _ = CASES[case]
    max_len = 600
    # open arrivals, or a closed loop of users (think time, duration); a pool of 1.05 to 3 of the longest
    # request's bytes (+ slack for rounding): tight enough to preempt
    longest = capacity.request_bytes(build_scenario(**base, kv_pool="1GiB"), max_len + 32)
    s = build_scenario(**base, kv_pool=f"{int(pool_factor * longest)}B")
    work = wl.build(requests=requests, seed=seed, prompt=wl.parse_dist(prompt, "p"),
                    output=wl.parse_dist("lognormal:mean=150,p99=500", "o"), max_len=max_len,
                    **(dict(rate=rate) if users is None else dict(users=users[0], think_s=users[1],
                                                                  duration_s=users[2])))
    opts = dict(policy=policy, victim=victim, max_batch=max_batch, watermark=watermark,
                dram_bytes_per_node=int(longest * 8 * 1.5), offload_threshold=threshold)
    fast = check_conservation(s, work, **opts)
    assert_same(fast, ref.run(s, work, **opts))


# --- vLLM V1 (--engine vllm): its own scheduler against the reference's run_vllm --------------------------------
def assert_same_v1(fast, r: ref.RefRun) -> None:
    assert_same(fast, r)
    np.testing.assert_array_equal(fast.recompute_hit_tokens, r.column("recompute_hit_tokens"))
    assert (fast.mixed_steps, fast.mixed_prefill_tokens) == (r.mixed_steps, r.mixed_prefill_tokens)


# the V1 releases whose scheduler rules differ (kvplan/engines/vllm.py FULL_ISL_SINCE, HASHLESS_FRONT_SINCE):
# v0.11.0 (the first chunk's blocks admit; every freed block to the queue's tail), v0.20.0 (all the input's blocks
# admit), v0.33.0 (the default: also blocks without a hash to the queue's front)
V1_RELEASES = ["vllm==0.11.0", "vllm==0.20.0", "vllm"]


def v1_case(case: str, prefix: str | None, budget: str | None, engine: str):
    """A case's scenario under a V1 release with a shared prefix and a token budget (max_num_batched_tokens), its
    small trace (rate 40/s for gpt-oss-120b's larger pool, else 20/s) and max_num_seqs: 64 under a budget (vLLM needs
    it within the budget), else the default. Returns (scenario, work, max_batch)."""
    base, pool, _ = CASES[case]
    s = build_scenario(**dict(base, engine=engine), kv_pool=pool, shared_prefix=prefix, max_num_batched_tokens=budget)
    return s, small_work(rate=40.0 if case == "gpt-oss-120b" else 20.0), 64 if budget else None


@pytest.mark.parametrize("engine", V1_RELEASES)
@pytest.mark.parametrize("budget", [None, "128"])
@pytest.mark.parametrize("prefix", [None, "40"])
@pytest.mark.parametrize("victim", sim.VICTIMS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_vllm_v1_equals_the_reference(case, victim, prefix, budget, engine):
    # budget 128 (max_num_batched_tokens) with prompts of 50 .. 400 tokens: most prompts and every long recompute
    # run in several chunks, each mixed into a decode step
    s, work, max_batch = v1_case(case, prefix, budget, engine)
    fast = sim.simulate(s, work, sim.SimOptions(victim=victim, max_batch=max_batch))
    r = ref.run_vllm(s, work, victim, max_batch=max_batch)
    assert_same_v1(fast, r)
    assert fast.mixed_prefill and fast.preemptions.sum() > 0 and fast.recomputed.sum() > 0
    if budget:                     # prompts cut into chunks: more chunked steps than prompts and recomputes
        assert fast.mixed_steps > len(work.prompts) + fast.preemptions.sum() // 2
    if case != "gpt-oss-120b":     # full attention / MLA: a victim's surviving blocks are hits on resume
        assert fast.recompute_hit_tokens.sum() > 0
    else:                          # sliding windows: not reused
        assert fast.recompute_hit_tokens.sum() == 0
    if prefix:
        block = int(capacity.block_tokens(s).value)
        assert sorted(set(fast.prefix_hit_tokens)) == ([0, 40 // block * block] if 40 // block else [0])


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(CASES)), victim=st.sampled_from(sim.VICTIMS), seed=st.integers(0, 10_000),
       requests=st.integers(1, 20), rate=st.sampled_from([2.0, 20.0, 200.0]), budget=st.sampled_from([None, 32, 100]),
       max_batch=st.sampled_from([2, 5, 16]), pool_factor=st.sampled_from([1.05, 1.5, 3.0]),
       prompt=st.sampled_from(["uniform:33,200", "fixed:64"]), prefix=st.sampled_from([None, 1, 33]),
       users=st.sampled_from([None, (3, 0.0, None), (6, 0.05, 0.5)]), engine=st.sampled_from(V1_RELEASES))
def test_vllm_v1_random_small_traces(case, victim, seed, requests, rate, budget, max_batch, pool_factor, prompt,
                                     prefix, users, engine):
    check_random_small_trace(case, victim, seed, requests, rate, budget, max_batch, pool_factor, prompt, prefix, users,
                             engine)


def assert_same_offload(fast, r: ref.RefRun) -> None:
    """``assert_same_v1`` and the CPU offloading connector's counts (loads, tokens, bytes, pool use)."""
    assert_same_v1(fast, r)
    assert fast.offload.keys() == r.offload.keys()
    for k, v in r.offload.items():
        assert fast.offload[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k


def check_random_small_trace(case, victim, seed, requests, rate, budget, max_batch, pool_factor, prompt, prefix, users,
                             engine, async_scheduling: bool | None = None, kv_offloading_bytes: int | None = None,
                             long_prefill_token_threshold: int = 0):
    """One hypothesis case of a small V1 trace (shared with test_simulate_async and test_sim_vllm_offload): the event
    engine and the reference's ``run_vllm`` agree. ``async_scheduling`` None is the release's default, as in both;
    ``kv_offloading_bytes``: vLLM's CPU offloading connector's pool, its counts compared too;
    ``long_prefill_token_threshold``: the chunk cap (the reference's rule 10; 0: none)."""
    base, _, _ = CASES[case]
    max_len = 600
    longest = capacity.request_bytes(build_scenario(**base, kv_pool="1GiB"), max_len + 32)
    s = build_scenario(**dict(base, engine=engine), kv_pool=f"{int(pool_factor * longest)}B",
                       shared_prefix=str(prefix) if prefix else None,
                       max_num_batched_tokens=str(budget) if budget else None)
    work = wl.build(requests=requests, seed=seed, prompt=wl.parse_dist(prompt, "p"),
                    output=wl.parse_dist("lognormal:mean=150,p99=500", "o"), max_len=max_len,
                    **(dict(rate=rate) if users is None else dict(users=users[0], think_s=users[1],
                                                                  duration_s=users[2])))
    fast = sim.simulate(s, work, sim.SimOptions(victim=victim, max_batch=max_batch, async_scheduling=async_scheduling,
                                                kv_offloading_bytes=kv_offloading_bytes,
                                                long_prefill_token_threshold=long_prefill_token_threshold or None))
    r = ref.run_vllm(s, work, victim, max_batch=max_batch, async_scheduling=async_scheduling,
                     kv_offloading_bytes=kv_offloading_bytes, long_prefill_token_threshold=long_prefill_token_threshold)
    (assert_same_v1 if kv_offloading_bytes is None else assert_same_offload)(fast, r)


# --long-prefill-token-threshold (the reference's rule 10): v0.20.0 (first-chunk admission) and v0.30.0 cap every
# chunk; v0.33.0 (the default) not while a request is alone (from v0.31.0); kvplan/engines/vllm.py LONG_PREFILL_*
CAP_RELEASES = ["vllm==0.20.0", "vllm==0.30.0", "vllm"]


@pytest.mark.parametrize("engine", CAP_RELEASES)
@pytest.mark.parametrize(("budget", "cap"), [("128", 40), (None, 100)])
@pytest.mark.parametrize("prefix", [None, "40"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_vllm_v1_capped_chunks_equal_the_reference(case, prefix, budget, cap, engine):
    # prompts of 50 .. 400 tokens in chunks of at most 40 (budget 128) or 100 (the default budget): several prompts
    # part-way through their prefill at once, with preemptions among them
    s, work, max_batch = v1_case(case, prefix, budget, engine)
    fast = sim.simulate(s, work, sim.SimOptions(max_batch=max_batch, long_prefill_token_threshold=cap))
    assert_same_v1(fast, ref.run_vllm(s, work, "newest", max_batch=max_batch, long_prefill_token_threshold=cap))
    plain = sim.simulate(s, work, sim.SimOptions(max_batch=max_batch))
    assert fast.preemptions.sum() > 0 and fast.mixed_steps != plain.mixed_steps
    assert fast.mixed_prefill_tokens >= sum(work.prompts)


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(sorted(CASES)), seed=st.integers(0, 10_000), requests=st.integers(1, 20),
       rate=st.sampled_from([2.0, 20.0, 200.0]), budget=st.sampled_from([None, 32, 100]),
       max_batch=st.sampled_from([2, 5, 16]), pool_factor=st.sampled_from([1.05, 1.5, 3.0]),
       prompt=st.sampled_from(["uniform:33,200", "fixed:64"]), prefix=st.sampled_from([None, 1, 33]),
       users=st.sampled_from([None, (3, 0.0, None), (6, 0.05, 0.5)]),
       engine=st.sampled_from([*CAP_RELEASES, "vllm==0.11.0"]), cap=st.sampled_from([1, 16, 40, 150]),
       async_scheduling=st.sampled_from([None, False]))
def test_vllm_v1_capped_random_small_traces(case, seed, requests, rate, budget, max_batch, pool_factor, prompt, prefix,
                                            users, engine, cap, async_scheduling):
    check_random_small_trace(case, "newest", seed, requests, rate, budget, max_batch, pool_factor, prompt, prefix,
                             users, engine, async_scheduling=async_scheduling, long_prefill_token_threshold=cap)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_rule_books_own_loop_counts_the_events_an_observer_sees(case):
    """The rule book's own loop (``run_book``, taken when nothing observes the run) writes its preemptions and the
    one-step run after them out; the observed loop (``run``) calls the observer once per event and once at the end.
    Both see the same events, the same timeline and the same times."""
    base, pool, _ = CASES[case]
    s = build_scenario(**base, kv_pool=pool)
    work = small_work(rate=40.0)
    calls: list[int] = []
    seen = sim.simulate(s, work, sim.SimOptions(on_event=lambda st: calls.append(1)))
    own = sim.simulate(s, work, sim.SimOptions())
    assert own.preemptions.sum() > 0
    assert len(calls) == seen.events + 1 == own.events + 1
    for a, b in zip(seen.timeline, own.timeline, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(seen.finish, own.finish)


@pytest.mark.parametrize("engine", V1_RELEASES)
@pytest.mark.parametrize(("prompts", "outputs"), [([15] * 12, [20] * 12), ([14, 15, 16, 17] * 3, [18, 3, 33, 2] * 3),
                                                  ([1] * 20, [31] * 20)])
def test_vllm_v1_one_block_victims_at_a_block_boundary(prompts, outputs, engine):
    """Victims that hold one or two blocks when the batch crosses a block boundary together: Llama-3.1-8B on 10
    blocks of 16 tokens (tests/test_simulate_vllm.py's ``tiny``), every request at 0 s. Twelve 15-token prompts take
    one block each, so at most 10 run; their 16th token needs a second block each, ten at once, against 0 free: the
    preemption loop pops one-block victims, and how many it pops depends on whether a victim's own next-step block is
    taken off the shortfall (a victim's many blocks hide that in the larger cases above)."""
    from test_simulate_vllm import at_zero, tiny
    s = tiny(engine)
    work = at_zero(prompts, outputs)
    fast = sim.simulate(s, work, sim.SimOptions(victim="newest", max_batch=16))
    assert_same_v1(fast, ref.run_vllm(s, work, "newest", max_batch=16))
    assert fast.preemptions.sum() > 0
