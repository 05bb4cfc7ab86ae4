"""kvplan simulate's notes carry the plans' typed values (issue 17): the output layer formats them, so ``--units``
reaches the bytes inside a simulate note; the routing note's and the sweep's figures come from the simulator's
plans (``kvplan.calc.simulate``), the presenter only places them. Expected text is worked out by hand."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from kvplan.render.output import note_text
from kvplan.specs.values import Count, Note, Seconds, given

# deepseek-r1 on 8 x h200 (TP 8, one replica), fp8 KV: MLA caches (kv_lora_rank 512 + rope 64) x 1 B x 61 layers
# = 35,136 B per token, whole on every TP rank; a 64-token block is 64 x 35,136 = 2,248,704 B per GPU.
# --dram 8GB per node over the node's 8 GPUs: 8e9 / 8 = 1,000,000,000 B per GPU = 0.931 GiB (/ 2^30) = 1.0 GB.
# --policy swap ignores the host tier, so with a 8 GB pool at 8 requests/s the swapped-out KV goes past it.
SWAP_PAST_TIER = ("simulate", "--kv-dtype", "fp8", "--workload", "r1-production", "--rate", "8", "--requests", "200",
                  "--policy", "swap", "--seed", "1", "--kv-pool", "8GB", "--dram", "8GB")
BLOCK_BYTES = 64 * (512 + 64) * 61


def _peak_note(doc: dict) -> str:
    found = [n for n in doc["notes"] if n.startswith("The swapped-out KV peaked")]
    assert len(found) == 1, doc["notes"]
    return found[0]


def test_units_si_changes_the_bytes_in_the_swap_past_the_tier_note(run_cli):
    iec = run_cli(*SWAP_PAST_TIER, "-f", "json").json()
    si = run_cli(*SWAP_PAST_TIER, "-f", "json", "--units", "si").json()
    assert iec["replica"]["block_bytes"] == BLOCK_BYTES == 2_248_704
    assert iec["replica"]["dram_bytes_per_gpu"] == 1_000_000_000
    peak = iec["peak_dram_bytes_per_gpu"]
    assert peak > 1_000_000_000 and peak % BLOCK_BYTES == 0     # whole blocks, past the tier
    # this run's peak: 707 blocks x 2,248,704 B = 1,589,833,728 B = 1.48 GiB (/ 2^30 = 1.4806) = 1.59 GB (/ 1e9)
    # (681 blocks before prefill20c priced each prefill's communication: slower prefills, more requests swapped;
    # 722 before pack21 packed the prompts waiting together into one prefill pass: fewer weight reads)
    assert peak == 707 * BLOCK_BYTES
    assert _peak_note(iec) == ("The swapped-out KV peaked at 1.5 GiB per GPU, past the host tier's 0.9 GiB: --policy "
                               "swap-then-recompute respects the tier.")
    assert _peak_note(si) == ("The swapped-out KV peaked at 1.6 GB per GPU, past the host tier's 1.0 GB: --policy "
                              "swap-then-recompute respects the tier.")
    # the table and Markdown print the same note per --units
    table = run_cli(*SWAP_PAST_TIER, "--units", "si").out
    assert "peaked at 1.6 GB per GPU, past the host tier's 1.0 GB" in " ".join(table.split())
    md = run_cli(*SWAP_PAST_TIER, "-f", "markdown").out
    assert "- The swapped-out KV peaked at 1.5 GiB per GPU, past the host tier's 0.9 GiB" in md


def test_the_swap_note_carries_the_plans_own_values():
    from kvplan.calc.simulate import SimOptions, plan_simulate
    from kvplan.options.scenarios import build_scenario
    from kvplan.options.simulate import simulate_request

    s = build_scenario(model=None, hardware="h200", nodes="1", gpus=None, tp=None, pp="1", dp=None, ep=None,
                       kv_dtype="fp8", weight_dtype=None, engine="neutral", prompt="1k", decode="30k",
                       mtp_layers=None, max_model_len=None, block_size=None, host_link_gbs=None, presets_dir=None,
                       kv_pool="8GB")
    run = simulate_request(s, workload="r1-production", rate=8, requests=200, policy="swap", seed=1, dram="8GB")
    plan = plan_simulate(run.scenario, run.workload, run.options)
    (peaked,) = plan.notes
    assert isinstance(peaked, Note)
    assert peaked.figures() == (plan.metrics["peak_dram_bytes_per_gpu"], plan.setup["dram_bytes_per_gpu"])
    assert plan.setup["dram_bytes_per_gpu"].value == 1_000_000_000     # 8e9 B per node / 8 GPUs
    assert plan.deployment is None                                     # one replica: no routing note
    # the same run under recompute: the pool's preemptions recompute, nothing goes to DRAM, no note
    assert plan_simulate(run.scenario, run.workload, SimOptions(policy="recompute")).notes == ()


def test_the_routing_note_counts_the_idle_replicas():
    from kvplan.calc.simulate import ROUTING, routing_note

    # 8 DP replicas, 5 requests dealt round-robin: replicas 0..4 get one each, 8 - 5 = 3 get none
    n = routing_note(Count(8), Count(5), Count(5))
    text = note_text(n)
    assert text.startswith("8 DP replicas, each its own KV pool and engine (3 got no request); requests routed "
                           + ROUTING + ". Per-request percentiles are over all 5 requests, ")
    idle = n.figures()[1]
    assert idle.value == 3 and idle.why.substituted == "8 - 5 = 3"
    assert all(isinstance(f, Count) for f in n.figures())
    # every replica served (2,000 requests over 8): no idle clause, the request count with its thousands separator
    busy = note_text(routing_note(Count(8), Count(8), Count(2000)))
    assert "got no request" not in busy and "over all 2,000 requests" in busy


def test_the_dp_notes_in_a_run(run_cli):
    # llama-3.1-8b on 8 x h100-sxm at TP 1 is 8 DP replicas; 5 requests leave 8 - 5 = 3 idle
    doc = run_cli("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--rate", "2", "--requests", "5",
                  "-f", "json").json()
    assert any(n.startswith("8 DP replicas, each its own KV pool and engine (3 got no request); ")
               for n in doc["notes"])
    assert doc["assumptions"][0].startswith("8 DP replicas (TP x PP groups), each its own KV pool and engine")
    assert doc["headline"].endswith("; 8 replicas, round-robin; recompute, victim newest")


def _point(p99: float, tpot_mean: float, generated: int) -> dict:
    from kvplan.specs.values import Fraction, Tokens

    return {"tpot_seconds_p99": Seconds(p99, given("t")), "recompute_rate": Fraction(0.0, given("t")),
            "tpot_seconds_mean": Seconds(tpot_mean, given("t")), "generated_tokens": Tokens(generated, given("t"))}


def _sweep(monkeypatch, points: dict, requests: int = 100):
    from kvplan.calc import simulate as sim

    monkeypatch.setattr(sim, "_sweep_point", lambda job: points[job[1]])
    works = [(rate, rate) for rate in points]
    plan = sim.plan_sweep(None, works, sim.SimOptions(), 0.050, None, workers=1)
    # the sweep's requests and deployment come from its scenario and first workload (every rate: the same requests)
    return dataclasses.replace(plan, scenario=SimpleNamespace(parallelism=SimpleNamespace(dp=1)),
                                   workload=SimpleNamespace(prompts=range(requests)))


def test_the_sweep_plan_types_its_rates_capacity_and_burst(monkeypatch):
    # TPOT p99 <= 50 ms: rates 1, 2, 4 with p99 40, 50, 60 ms pass, pass, fail: the capacity is 2
    # a mean request decodes 0.05 s x 300,000 tokens / 100 requests = 150 s; at 1 request/s the 100 requests arrive
    # within 100 / 1 = 100 s < 150 s: a burst (the first passing rate that is one)
    plan = _sweep(monkeypatch, {1.0: _point(0.040, 0.05, 300_000), 2.0: _point(0.050, 0.05, 300_000),
                                4.0: _point(0.060, 0.05, 300_000)})
    assert [r.value for r in plan.rate_values] == [1.0, 2.0, 4.0]
    assert plan.capacity_value.value == 2.0
    assert plan.capacity_value.why.formula.endswith("meet TPOT p99 <= 50 ms")
    assert plan.capacity_value.why.substituted == "meeting: 1, 2 of 3 rates; capacity = 2 requests/s"
    assert plan.targets["tpot_seconds_p99_at_most"] == Seconds(0.05, given("--tpot-slo"))
    assert plan.targets["slo_attainment_at_least"].value == 0.9      # the SLO model's default attainment
    assert plan.requests.value == 100 and plan.serving.value == 1 and plan.deployment is None
    b = plan.burst
    assert b is not None and b.rate.value == 1.0
    assert b.arrivals.value == pytest.approx(100.0) and b.decode.value == pytest.approx(150.0)


def test_a_sweep_whose_requests_outlast_the_decode_is_no_burst(monkeypatch):
    # a mean request decodes 0.05 x 100,000 / 100 = 50 s; the arrivals take 100 / 1 = 100 s and 100 / 2 = 50 s:
    # neither is shorter (50 s is not less than 50 s), and 4 requests/s fails the target: no burst
    plan = _sweep(monkeypatch, {1.0: _point(0.040, 0.05, 100_000), 2.0: _point(0.050, 0.05, 100_000),
                                4.0: _point(0.060, 0.05, 100_000)})
    assert plan.burst is None
    # nothing meets: the capacity is below the lowest rate
    none = _sweep(monkeypatch, {1.0: _point(0.060, 0.05, 100_000), 2.0: _point(0.070, 0.05, 100_000)})
    assert none.capacity_value.value is None
    assert none.capacity_value.why.substituted == "meeting: none of 2 rates; capacity = below the lowest rate"


def test_sweep_verdicts_and_warning_as_text(run_cli):
    # TPOT p99 <= 1 ms is out of reach of every rate (a decode step alone is ~9 ms): the goodput is below 2
    doc = run_cli("simulate", "--kv-dtype", "fp8", "--workload", "r1-production", "--requests", "200",
                  "--sweep-rate", "2:6:3", "--tpot-slo", "1ms", "-f", "json").json()
    assert doc["notes"][0] == ("No swept rate meets TPOT p99 <= 1 ms with at least 90% of requests meeting the "
                               "latency targets: the goodput is below 2 requests/s.")
    assert doc["notes"][1].startswith("Workload at each rate: the same 200 requests (seed 0); Poisson gaps scale as "
                                      "1 / rate. A rate also fails when it overloads the deployment: the waiting "
                                      "queue grows, between the middle of the arrivals and the last one, by more "
                                      "than 10% of the requests (and more than 10), or it is longer at each of 8 "
                                      "looks through the arrivals than at the one before and grows by more than 5% "
                                      "of them, or over the run's steady part (from the middle of the arrivals, or "
                                      "once the first half's requests had their p90 time in system, to the last "
                                      "arrival) fewer requests finish than arrive, beyond the running batch's "
                                      "growth (a batch still filling is no backlog), by more than 3 x sqrt(2 x "
                                      "those arrivals), the Poisson noise of a deployment that keeps up (more "
                                      "requests resolve a rate nearer the capacity).")
    assert doc["headline"].endswith("; rate sweep 2 .. 6 requests/s")
