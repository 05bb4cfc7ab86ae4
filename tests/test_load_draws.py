"""recommend under a rate target, judged robustly and run once (issue 21, debt21): the launch fed the rate is judged
on up to three Poisson draws (seeds 0, 1, 2; each must meet; the draws stop at the first miss), the verdict's
deciding figure is read in one place (``SimulatedLoad.deciding`` / ``slo.deciding``), and the ``--target`` search's
run of the winning launch is carried into the plan instead of being simulated again."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from kvplan.calc.recommend import LOAD_SEEDS, RecommendOptions, launched, load_run, plan_recommend, slo_batch
from kvplan.calc.simulate import simulated_load
from kvplan.calc.sizing import parse_target, search
from kvplan.calc.slo import SloTargets, Verdict, deciding
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.scenario import Scenario
from kvplan.specs.values import Count, Fraction, Seconds

SLO = SloTargets(ttft=2.0, tpot=0.05)


def _figures(ttft: float, tpot: float, att: float, waiting: int = 0) -> dict:
    return {"ttft_seconds_p99": Seconds(ttft), "tpot_seconds_p99": Seconds(tpot), "slo_attainment": Fraction(att),
            "waiting_at_last_arrival": Count(waiting)}


def test_the_deciding_figure_by_hand():
    # a miss: the figure the verdict names, with its number and target: 2.0055 s of a 2 s target uses 1.00275 of it
    d = deciding(_figures(2.0055, 0.009, 0.95), SLO, Verdict(False, "TTFT p99"))
    assert (d.label, d.key, d.figure.value, d.target.value) == ("TTFT p99", "ttft_seconds_p99", 2.0055, 2.0)
    assert d.share == pytest.approx(2.0055 / 2.0)
    # a run that meets: the figure nearest its target. TTFT 1.7 / 2 = 0.85, TPOT 45 / 50 ms = 0.9, attainment 97%
    # against 90%: 3% of requests miss where 10% may, 0.3 -> TPOT decides
    d = deciding(_figures(1.7, 0.045, 0.97), SLO, Verdict(True, ""))
    assert d.label == "TPOT p99" and d.share == pytest.approx(0.9)
    # TTFT 1.0 / 2 = 0.5, TPOT 20 / 50 = 0.4, attainment 92%: 8% miss of the 10% allowed, 0.8 -> the attainment
    d = deciding(_figures(1.0, 0.02, 0.92), SLO, Verdict(True, ""))
    assert d.label == "attainment" and d.share == pytest.approx(0.8)
    # 85% meet against 90%: 15% miss where 10% may, 1.5 (a miss)
    d = deciding(_figures(1.0, 0.02, 0.85), SLO, Verdict(False, "attainment"))
    assert d.label == "attainment" and d.share == pytest.approx(1.5)
    # overload: the queue's waiting requests, no target, no finite share
    d = deciding(_figures(9.0, 0.02, 0.3, waiting=37), SLO, Verdict(False, "overload"))
    assert (d.label, d.figure.value, d.target) == ("overload", 37, None) and d.share == math.inf


def _rag(gpus: int, tp: int, dp: int) -> Scenario:
    return launched(Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h200"), gpus=gpus, tp=tp,
                             dp=dp, prompt_tokens=32_000, decode_tokens=500, engine="vllm", kv_dtype_request="fp8"))


def test_one_draw_no_longer_decides_the_boundary_case():
    # RAG 32,000 + 500 on 4 x H200, TP4, at 1 request/s with TTFT p99 <= 2.05 s: the seed-0 draw alone meets (its
    # TTFT p99 is ~2.006 s), the seed-1 draw misses; judged on the draws in seed order the launch misses, shown by
    # the seed-1 draw, and no third draw is run (a miss ends them)
    s, slo = _rag(4, 4, 1), SloTargets(ttft=2.05, tpot=0.05)
    batch = slo_batch(s, slo).batch
    alone = [simulated_load(s, 1.0, slo, batch, seed=k) for k in LOAD_SEEDS[:2]]
    assert alone[0].verdict.meets and 2.0 < alone[0].figures["ttft_seconds_p99"].value <= 2.05
    assert not alone[1].verdict.meets and alone[1].verdict.decided_by == "TTFT p99"
    got = load_run(s, 1.0, slo, batch)
    assert not got.verdict.meets and got.seed == 1 and [r.seed for r in got.draws] == [0, 1]
    assert got.figures["ttft_seconds_p99"].value == alone[1].figures["ttft_seconds_p99"].value
    d = got.deciding(slo)
    assert d.label == "TTFT p99" and d.figure.value > 2.05


def test_when_every_draw_meets_the_one_nearest_its_target_is_shown():
    # RAG on 8 x H200, TP1 x DP8, TTFT p99 <= 2 s at 1 request/s: all three draws meet; the one shown is the draw
    # whose deciding figure uses the most of its target, found here by running each seed on its own
    s = _rag(8, 1, 8)
    batch = slo_batch(s, SLO).batch
    alone = [simulated_load(s, 1.0, SLO, batch, seed=k) for k in LOAD_SEEDS]
    assert all(r.verdict.meets for r in alone)
    shares = [max(r.figures["ttft_seconds_p99"].value / 2.0, r.figures["tpot_seconds_p99"].value / 0.05,
                  (1 - r.figures["slo_attainment"].value) / 0.1) for r in alone]
    got = load_run(s, 1.0, SLO, batch)
    assert got.verdict.meets and [r.seed for r in got.draws] == list(LOAD_SEEDS)
    assert got.seed == LOAD_SEEDS[shares.index(max(shares))]
    assert got.deciding(SLO).share == pytest.approx(max(shares))


def _options() -> RecommendOptions:
    targets = (parse_target("rate>=1rps"), parse_target("tpot<=50ms"))
    return RecommendOptions(tpot_slo=0.05, slo_origin="--target tpot<=50ms", targets=targets,
                            slo=SloTargets(ttft=2.0, tpot=0.05))


def test_the_search_s_load_run_is_carried_into_the_plan():
    # the --target search judged the winning launch under the rate; recommend plans the same launch at the same
    # batch and rate, so it takes that run as it is (the same object) and its figures are those a fresh run gives
    o = _options()
    base = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h200"), prompt_tokens=32_000,
                    decode_tokens=500, engine="vllm")
    plan = search(base, o.targets, (load_hardware("h200"),), slo=o.slo)
    b = plan.best
    assert b is not None and b.load is not None and b.load.max_batch.value == b.batch
    s = base.with_(nodes=b.nodes, gpus=b.gpus, tp=b.tp, pp=b.pp, dp=None, ep=b.ep, kv_dtype_request=b.kv_dtype)
    carried = plan_recommend(s, o, load=b.load)
    assert carried.load is b.load
    fresh = load_run(carried.scenario, 1.0, o.slo, carried.batch.number(), origin="--target rate>=1rps")
    assert {k: fresh.figures[k].value for k in ("ttft_seconds_p99", "tpot_seconds_p99", "slo_attainment")} == \
        {k: b.load.figures[k].value for k in ("ttft_seconds_p99", "tpot_seconds_p99", "slo_attainment")}
    assert [r.seed for r in fresh.draws] == [r.seed for r in b.load.draws]
    # a run at another batch is not this launch's: the plan simulates its own
    other = plan_recommend(s, o, load=replace(b.load, max_batch=Count(b.batch + 1)))
    assert other.load is not b.load and other.load.max_batch.value == b.batch


def test_recommend_target_simulates_each_load_draw_once(run_cli, monkeypatch):
    # the RAG --target case end to end: no launch is fed the rate twice with the same seed (before: the winner's
    # draw ran in the search and again in the plan)
    import kvplan.calc.simulate as sim

    seen: list[tuple] = []
    real = sim.simulated_load

    def counting(s, rate, targets, max_batch, requests=None, seed=0, origin="--rate"):
        par = s.parallelism
        seen.append((s.hardware.id, par.tp, par.pp, par.dp, s.kv_dtype.value, rate, max_batch, seed))
        return real(s, rate, targets, max_batch, requests, seed, origin)

    monkeypatch.setattr(sim, "simulated_load", counting)
    r = run_cli("recommend", "-m", "llama-3.1-8b", "--prompt", "32000", "--decode", "500", "--target",
                "rate>=1rps,tpot<=50ms", "--candidates", "h200", "--ttft-slo", "2s", "-f", "json")
    assert r.code == 0, r.err
    assert seen and len(seen) == len(set(seen)), seen
    load = r.json()["load"]
    assert load["meets"] and [d["seed"] for d in load["draws"]] == list(LOAD_SEEDS)
    assert "3 Poisson draws" in load["basis"]
