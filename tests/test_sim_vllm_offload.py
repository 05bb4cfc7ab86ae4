"""vLLM's native CPU offloading connector in ``kvplan simulate --engine vllm --kv-offloading-size GiB``
(``kvplan.engines.vllm_scheduler.CpuPool``, rules read in vLLM v0.19.0's ``offloading/scheduler.py``, ``worker.py``
and ``kv_offload/cpu``): the event engine against the independent reference (``sim_reference.run_vllm`` rule 8, a
per-block LRU dict), a hand-worked preemption whose load is cheaper than its recompute, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sim_reference as ref  # tests/ is on sys.path (rootdir-less test modules)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_reference import (
    CASES,
    LLAMA,
    MIB,
    assert_same_offload,
    assert_same_v1,
    check_random_small_trace,
    small_work,
)

from kvplan.calc import capacity, costs
from kvplan.calc import simulate as sim
from kvplan.errors import KvplanError
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario
from kvplan.options.simulate import simulate_request

GIB = 2**30
# the releases on both sides of the admission rule that changes under offloading: v0.15.0 (the blocks of the hit and
# the loaded tokens admit a load), the default (all the request's tokens: scheduler_reserve_full_isl, v0.19+)
RELEASES = ["vllm==0.15.0", "vllm"]
# CPU pools: roomy (every victim's blocks stay), tight (stores refused while the running requests' blocks fill it,
# victims' blocks evicted); full attention (Llama) and MLA (DeepSeek-R1 at TP 8: 8 ranks share the size)
# (DeepSeek-R1's CPU blocks are 8 ranks' blocks: 1 GiB holds 119 of them, Llama's 48 MiB 24)
SIZES = {"roomy": {"llama-3.1-8b": 8 * GIB, "deepseek-r1": 64 * GIB},
         "tight": {"llama-3.1-8b": 48 * MIB, "deepseek-r1": GIB}}
MODELS = ["llama-3.1-8b", "deepseek-r1"]


@pytest.mark.parametrize("engine", RELEASES)
@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("budget", [None, "128"])
@pytest.mark.parametrize("prefix", [None, "40"])
@pytest.mark.parametrize("case", MODELS)
def test_offloading_equals_the_reference(case, prefix, budget, size, engine):
    """Offloading x prefix caching (a shared prefix) x chunked prefill (a 128-token budget) x a tight GPU pool (every
    case preempts) x a roomy or tight CPU pool, on both admission rules."""
    base, pool, _ = CASES[case]
    s = build_scenario(**dict(base, engine=engine), kv_pool=pool, shared_prefix=prefix, max_num_batched_tokens=budget)
    work = small_work(rate=20.0)
    max_batch = 64 if budget else None
    fast = sim.simulate(s, work, sim.SimOptions(max_batch=max_batch, kv_offloading_bytes=SIZES[size][case]))
    r = ref.run_vllm(s, work, max_batch=max_batch, kv_offloading_bytes=SIZES[size][case])
    assert_same_offload(fast, r)
    assert fast.preemptions.sum() > 0 and fast.offload["stored_blocks"] > 0
    if size == "roomy":            # every victim loads what its GPU hit left, nothing is refused
        assert fast.offload["loads"] > 0 and fast.offload["failed_stores"] == 0
    else:                          # the pool fills with running requests' blocks: stores refused, victims evicted
        assert fast.offload["failed_stores"] > 0 and fast.offload["evicted_blocks"] > 0


@pytest.mark.parametrize("case", MODELS)
def test_offloading_off_and_on_differ_only_where_victims_load(case):
    """The same trace without offloading recomputes what the offloading run loads: the loaded tokens plus the tokens
    still recomputed with offloading are at least those recomputed without it (a load waits; the run's other
    decisions may then differ), and the reference agrees on both runs."""
    base, pool, _ = CASES[case]
    s = build_scenario(**dict(base, engine="vllm"), kv_pool=pool)
    work = small_work(rate=20.0)
    off = sim.simulate(s, work, sim.SimOptions())
    on = sim.simulate(s, work, sim.SimOptions(kv_offloading_bytes=SIZES["roomy"][case]))
    assert off.offload is None
    assert_same_v1(off, ref.run_vllm(s, work))
    assert_same_offload(on, ref.run_vllm(s, work, kv_offloading_bytes=SIZES["roomy"][case]))
    assert on.recomputed.sum() < off.recomputed.sum() / 4
    assert on.offload["loaded_tokens"] + on.recomputed.sum() >= off.recomputed.sum() / 2


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(MODELS), seed=st.integers(0, 10_000), requests=st.integers(1, 16),
       rate=st.sampled_from([2.0, 20.0, 200.0]), budget=st.sampled_from([None, 32, 100]),
       max_batch=st.sampled_from([2, 5, 16]), pool_factor=st.sampled_from([1.05, 1.5, 3.0]),
       prefix=st.sampled_from([None, 33]), cpu_mib=st.sampled_from([4, 24, 96, 4096]),
       asyn=st.sampled_from([None, False]), victim=st.sampled_from(["newest", "fewest-tokens"]),
       engine=st.sampled_from(RELEASES))
def test_offloading_random_small_traces(case, seed, requests, rate, budget, max_batch, pool_factor, prefix, cpu_mib,
                                        asyn, victim, engine):
    check_random_small_trace(case, victim, seed, requests, rate, budget, max_batch, pool_factor, "uniform:33,200",
                             prefix, None, engine, async_scheduling=asyn, kv_offloading_bytes=cpu_mib * MIB)


# (seed, CPU MiB, GPU pool over the longest request, budget, rate, max_batch)
TOUCH_TRACES = [(0, 32, 1.05, 32, 20.0, 5), (0, 48, 1.05, None, 20.0, 5), (1, 16, 1.5, None, 20.0, 5),
                (0, 16, 1.5, None, 200.0, 5), (0, 48, 1.05, None, 20.0, 16)]


@pytest.mark.parametrize(("seed", "cpu_mib", "pool_factor", "budget", "rate", "max_batch"), TOUCH_TRACES)
def test_a_tight_cpu_pool_on_traces_where_touches_decide_what_is_evicted(seed, cpu_mib, pool_factor, budget, rate,
                                                                        max_batch):
    """A waiting victim looked at (and not admitted), and a request that stores, become the most recently used
    group: on these traces that decides which group a later store evicts (found by running without either touch)."""
    base, _, _ = CASES["llama-3.1-8b"]
    longest = capacity.request_bytes(build_scenario(**base, kv_pool="1GiB"), 632)
    s = build_scenario(**dict(base, engine="vllm"), kv_pool=f"{int(pool_factor * longest)}B",
                       max_num_batched_tokens=str(budget) if budget else None)
    work = wl.build(requests=16, seed=seed, prompt=wl.parse_dist("uniform:33,200", "p"),
                    output=wl.parse_dist("lognormal:mean=150,p99=500", "o"), max_len=600, rate=rate)
    fast = sim.simulate(s, work, sim.SimOptions(max_batch=max_batch, kv_offloading_bytes=cpu_mib * MIB))
    assert_same_offload(fast, ref.run_vllm(s, work, max_batch=max_batch, kv_offloading_bytes=cpu_mib * MIB))
    assert fast.offload["evicted_blocks"] > 0


def test_a_preemption_whose_load_is_cheaper_than_its_recompute():
    """Worked by hand. Llama-3.1-8B BF16 on one H100: a 16-token block of every layer is 2 MiB = 2,097,152 B (the
    file's LLAMA). A pool of 130 blocks; A (1,024 + 1,000 tokens) and B (1,024 + 64) arrive at 0; sync scheduling.
    Both are admitted (64 + 64 blocks); at their 17th token both need a 66th block: 2 x 65 + 2 = 132 > 130, so B
    (the newest) is preempted with 1,024 + 17 = 1,041 tokens, 1,040 computed = 65 full blocks. A then grows to
    ceil(2,023 / 16) = 127 blocks, taking B's freed blocks tail first: 130 - 127 = 3 of B's leading blocks survive
    on the GPU (a 48-token prefix-cache hit on resume). B waits until A finishes (it needs all 66 blocks free).

    Without offloading B re-prefills 1,041 - 48 = 993 tokens, 992 of them computed before (recomputed).
    With --kv-offloading-size 1 GiB (512 CPU blocks: 2^30 / (2 MiB x 1 rank)) every full block was stored as it
    filled, so B's places 3 .. 64 are on the host: 62 blocks = 992 tokens load and none is recomputed; the last
    token (1,040) is computed as a 1-token chunk once the load lands.
    Host link: --host-link-gbs 50, so one block each way costs 2.3 us (costs.DEFAULT_COPY_OVERHEAD_US) +
    2,097,152 B / (50e9 B/s x 0.83 (costs.DEFAULT_BIDIR_FACTOR)) = 2.3e-6 + 5.05337831e-5 = 5.28337831e-5 s.
      load: 62 x 5.28337831e-5 = 3.27569455e-3 s;
      flush: B's preemption step waits for the two blocks A and B stored at the step before (both filled their 65th
      block in it): 2 x 5.28337831e-5 = 1.05667566e-4 s, which also delays A's finish by as much.
    So B's finish moves by flush + load + step(1-token chunk) - step(993-token chunk) (the decode steps after are
    the same), the two steps priced by the cost model alone (StepModel.mixed_step with no decoder)."""
    s = build_scenario(**dict(LLAMA, engine="vllm", host_link_gbs="50"), kv_pool=f"{130 * 2}MiB")
    w = wl.Workload(np.array([1024, 1024], dtype=np.int64), np.array([1000, 64], dtype=np.int64),
                    np.array([0.0, 0.0]), None, 0.0, None, "hand case")
    opts = {"async_scheduling": False}
    off = sim.simulate(s, w, sim.SimOptions(**opts))
    on = sim.simulate(s, w, sim.SimOptions(**opts, kv_offloading_bytes=GIB))
    per_block = 2.3e-6 + 2_097_152 / (50e9 * 0.83)
    assert list(off.preemptions) == list(on.preemptions) == [0, 1]
    assert list(off.recompute_hit_tokens) == list(on.recompute_hit_tokens) == [0, 48]
    assert list(off.recomputed) == [0, 992] and list(on.recomputed) == [0, 0]
    h = on.offload
    assert (h["cpu_blocks"], h["loads"], h["loaded_blocks"], h["loaded_tokens"]) == (512, 1, 62, 992)
    assert h["load_seconds"] == pytest.approx(62 * per_block, rel=1e-12)
    assert h["load_seconds"] == pytest.approx(3.27569455e-3, rel=1e-8)
    assert h["flush_stall_seconds"] == pytest.approx(2 * per_block, rel=1e-9)
    assert on.finish[0] - off.finish[0] == pytest.approx(2 * per_block, rel=1e-6)
    sm = costs.step_model(s)
    recompute = sm.mixed_step(0, 0.0, 0.0, [(48, 1041)])
    one = sm.mixed_step(0, 0.0, 0.0, [(1040, 1041)])
    saved = recompute - one - 62 * per_block - 2 * per_block
    assert saved > 0.010                      # the load is cheaper than the recompute by over 10 ms
    assert off.finish[1] - on.finish[1] == pytest.approx(saved, rel=1e-6)
    assert_same_offload(on, ref.run_vllm(s, w, async_scheduling=False, kv_offloading_bytes=GIB))


# --- the command line ------------------------------------------------------------------------------------------
SMALL = dict(model="llama-3.1-8b", hardware="h100-sxm", tp="1", kv_pool="200MiB")
TINY = dict(prompt_dist="fixed:64", output_dist="fixed:8", max_len="100")


def test_the_option_reaches_the_output():
    run = simulate_request(dict(SMALL, engine="vllm"), rate="20", requests="30", seed="3", prompt_dist="uniform:50,400",
                           output_dist="lognormal:mean=300,p99=1200", max_len="1500", kv_offloading_size="1")
    assert run.options.kv_offloading_bytes == GIB
    r = sim.simulate(run.scenario, run.workload, run.options)
    assert r.offload["loads"] > 0 and "CPU offloading" in r.scheduler


@pytest.mark.parametrize(("args", "message"), [
    (dict(engine="vllm==0.13.0"), "native KV offloading works from 0.14 "),
    (dict(engine="vllm==0.7.3"), "native KV offloading works from 0.14 "),
    (dict(engine="sglang"), "not sglang"),
    (dict(engine="neutral"), "not "),
])
def test_refusals(args, message):
    run = simulate_request(dict(SMALL, **args), rate="2", requests="3", kv_offloading_size="1", **TINY)
    with pytest.raises(KvplanError, match=message):
        sim.simulate(run.scenario, run.workload, run.options)


def test_bad_sizes_and_the_threshold_are_refused():
    from kvplan.errors import InputError

    with pytest.raises(InputError, match="not a positive size"):
        simulate_request(dict(SMALL, engine="vllm"), rate="2", requests="3", kv_offloading_size="0", **TINY)
    run = simulate_request(dict(SMALL, engine="vllm"), rate="2", requests="3", offload_threshold="0.7", **TINY)
    with pytest.raises(KvplanError, match="no proactive offload") as err:
        sim.simulate(run.scenario, run.workload, run.options)
    assert "--kv-offloading-size GiB for vLLM's connector" in err.value.hint
    run = simulate_request(dict(SMALL, model="gpt-oss-120b", engine="vllm", kv_pool="2GiB"), rate="2", requests="3",
                           kv_offloading_size="1", prompt_dist="fixed:400", output_dist="fixed:8", max_len="500")
    with pytest.raises(KvplanError, match="sliding-window or state layers"):
        sim.simulate(run.scenario, run.workload, run.options)


def test_the_command_prints_loads_and_recomputes(run_cli):
    res = run_cli("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-pool", "200MiB", "--engine",
              "vllm", "--rate", "20", "--requests", "30", "--prompt-dist", "uniform:50,400", "--output-dist",
              "lognormal:mean=300,p99=1200", "--max-len", "1500", "--kv-offloading-size", "1", "-f", "json")
    assert res.code == 0, res.err
    text = json.dumps(json.loads(res.out))
    for key in ("offload_loads", "offload_loaded_tokens", "offload_loaded_bytes", "recomputed_tokens"):
        assert key in text


def test_compare_puts_offloading_off_and_on_side_by_side():
    run = simulate_request(dict(SMALL, engine="vllm"), rate="20", requests="30", seed="3", prompt_dist="uniform:50,400",
                           output_dist="lognormal:mean=300,p99=1200", max_len="1500",
                           compare="kv-offloading-size=off,kv-offloading-size=1")
    (_, _, _, off), (_, _, _, on) = run.variants
    assert off.kv_offloading_bytes is None and on.kv_offloading_bytes == GIB
