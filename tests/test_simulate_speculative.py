"""``kvplan simulate --speculative mtp[:K]``: every decode step priced by the one speculative price
(``costs.StepModel.speculative_step``, tpot's) over the batch's mean acceptance length, against the token-by-token
references (``tests/sim_reference.py``'s rule 8), by hand for one step, and against published speed-ups."""

from __future__ import annotations

import numpy as np
import pytest
import sim_reference as ref  # tests/ is on sys.path (rootdir-less test modules)
from test_sim_reference import BASE, assert_same, assert_same_v1, small_work

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.options.scenarios import build_scenario

R1 = dict(BASE, mtp_layers="1")     # DeepSeek-R1 with its one MTP layer counted (what --speculative sets)
SPECS = {"flat mtp:3": (3, 2.18, 0.0), "falling": (3, 2.6, 0.002), "mtp:1": (1, 1.85, 0.0)}


@pytest.mark.parametrize("policy", ["recompute", "swap"])
@pytest.mark.parametrize("spec", sorted(SPECS))
def test_neutral_engine_equals_the_reference(policy, spec):
    s = build_scenario(**R1, kv_pool="400MiB")
    work = small_work()
    o = sim.SimOptions(policy=policy, speculative=SPECS[spec])
    fast = sim.simulate(s, work, o)
    r = ref.run(s, work, policy, "newest", speculative=SPECS[spec])
    assert_same(fast, r)
    assert fast.preemptions.sum() > 0


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_vllm_v1_equals_the_reference(spec):
    s = build_scenario(**dict(R1, engine="vllm"), kv_pool="400MiB", max_num_batched_tokens="128")
    work = small_work()
    fast = sim.simulate(s, work, sim.SimOptions(max_batch=64, speculative=SPECS[spec]))
    r = ref.run_vllm(s, work, "newest", max_batch=64, speculative=SPECS[spec])
    assert_same_v1(fast, r)
    assert fast.mixed_steps > 0 and fast.preemptions.sum() > 0
