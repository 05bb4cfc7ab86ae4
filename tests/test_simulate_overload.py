"""Overload is said, not hidden (issue 19): the verdict from the run's timeline, its capacity estimate on the first
line, and ``--sweep-rate``'s TTFT target (``--ttft-slo``, p99 unless ``p50:`` / ``p90:`` leads it)."""

from types import SimpleNamespace

import numpy as np
import pytest

TINY = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--block-size", "16", "--kv-pool", "1000MiB")


def _run(arrival, admitted, finish, open_arrivals=True):
    arrival = np.asarray(arrival, dtype=float)
    return SimpleNamespace(arrival=arrival, admitted=np.asarray(admitted, dtype=float),
                           finish=np.asarray(finish, dtype=float),
                           workload=SimpleNamespace(arrivals=arrival if open_arrivals else None))


def test_arrivals_every_second_served_every_two_seconds_overload_at_half_a_request_per_second():
    # 100 requests arrive at t = 0, 1, ..., 99 s; one server takes 2 s each: request i is admitted at 2i, done at
    # 2i + 2. Middle of the arrivals: 49.5 s. Waiting there: 50 arrived (i <= 49), 25 admitted (2i <= 49.5: i <= 24)
    # -> 25. At the last arrival (99 s): 100 arrived, 50 admitted (2i <= 99: i <= 49) -> 50. Growth 25 > max(10% of
    # 100, 10) = 10: overloaded. Arrivals after the middle: i = 50..99, 50 in 99 - 49.5 = 49.5 s -> 1.0101/s.
    # Capacity window: 49.5 s .. the last admission 198 s; finishes 2i + 2 in it: i = 24..98, 75 of them ->
    # 75 / 148.5 = 0.50505/s, the 1 / 2 s service rate.
    from kvplan.calc import simulate as sim

    i = np.arange(100)
    v = sim.overload_verdict(_run(i, 2 * i, 2 * i + 2))
    assert v.overloaded
    assert (v.waiting_mid, v.waiting_end) == (25, 50)
    assert v.middle == 49.5 and v.window_end == 198.0 and v.completions == 75
    assert v.arrival_rate == pytest.approx(50 / 49.5, rel=1e-12)
    assert v.capacity == pytest.approx(75 / 148.5, rel=1e-12)
    m = sim.overload_values(v)
    assert m["sustained_requests_per_second"].value == pytest.approx(0.50505, rel=1e-4)
    assert m["waiting_at_mid_arrival"].value == 25


def test_the_same_arrivals_served_twice_as_fast_keep_up():
    # served 0.5 s each, admitted on arrival: the queue is empty at both instants: not overloaded, no capacity
    from kvplan.calc import simulate as sim

    i = np.arange(100)
    v = sim.overload_verdict(_run(i, i, i + 0.5))
    assert not v.overloaded and (v.waiting_mid, v.waiting_end) == (0, 0)
    assert sim.overload_values(v)["sustained_requests_per_second"].value is None


def test_a_queue_that_is_long_but_does_not_grow_is_not_overload():
    # 100 arrivals at 1/s, each admitted 30 s late (a steady queue of 30): 30 wait at the middle and 30 at the end:
    # growth 0. The previous rule (waiting at the last arrival > 10% of the requests) called this overloaded.
    from kvplan.calc import simulate as sim

    i = np.arange(100)
    v = sim.overload_verdict(_run(i, i + 30, i + 31))
    assert (v.waiting_mid, v.waiting_end) == (30, 30) and not v.overloaded


def test_growth_exactly_at_the_limit_is_not_overload_one_more_is():
    # 200 requests: the limit is max(10% of 200, 10) = 20 requests of growth
    from kvplan.calc import simulate as sim
    from kvplan.specs.values import Count, given

    def m(mid, end):
        return {"waiting_at_mid_arrival": Count(mid, given("m")), "waiting_at_last_arrival": Count(end, given("e")),
                "requests_finished": Count(200, given("n"))}

    assert not sim.overloaded(m(5, 25)) and sim.overloaded(m(5, 26))
    assert not sim.overloaded(m(None, 500))   # a closed loop (no middle queue): never overloaded


def test_a_closed_loop_is_never_overloaded():
    from kvplan.calc import simulate as sim

    i = np.arange(100)
    assert not sim.overload_verdict(_run(i, 2 * i, 2 * i + 2, open_arrivals=False)).overloaded


def test_the_first_line_says_overload_with_the_capacity(run_cli, tmp_path):
    # 60 requests of 1,000 + 100 tokens arrive 1 ms apart and --max-batch 1 serves them one at a time: each takes the
    # same service time T (its prefill and 99 decode steps, ~0.6 s), so the queue grows by ~30 between the middle
    # and the last arrival (limit 10), and the capacity is one request per T
    trace = tmp_path / "t.csv"
    trace.write_text("prompt_tokens,output_tokens,arrival_s\n" + "".join(f"1000,100,{k / 1000}\n" for k in range(60)))
    args = ("simulate", *TINY, "--trace", str(trace), "--max-batch", "1")
    r = run_cli(*args)
    assert r.code == 0, r.err
    # the first line says so; the first thing under the headline gives the arrival rate and the capacity
    assert r.out.startswith("OVERLOADED: arrivals outpace the service, capacity below; llama-3.1-8b on 1 x ")
    under = r.out.split("\n• ", 1)[1].split("\n\n")[0].replace("\n", " ")
    assert under.startswith("Overloaded: requests arrive at ") and "the deployment sustains " in under
    assert r.out.index("• Overloaded") < r.out.index("The workload document's key metrics")
    doc = run_cli(*args, "-f", "json").json()
    assert doc["overloaded"] is True and doc["headline"].startswith("OVERLOADED: ")
    rows = [line.split(",") for line in run_cli(*args, "-f", "csv").out.splitlines() if not line.startswith("#")]
    first = dict(zip(rows[0], rows[1], strict=True))
    # request 1 starts at once (queue 0): its finish is its service time
    service = float(first["finish (seconds)"]) - float(first["arrival (seconds)"]) - float(first["queue (seconds)"])
    assert doc["sustained_requests_per_second"] == pytest.approx(1 / service, rel=0.05)
    assert doc["waiting_at_last_arrival"] - doc["waiting_at_mid_arrival"] > 10
    assert doc["derivations"]["sustained_requests_per_second"]["substituted"].endswith("/s")
    assert f"deployment sustains {doc['sustained_requests_per_second']:.3g} requests/s" in under
    brief = run_cli(*args, "--brief").out
    assert "sustained requests/s (overloaded): " in brief


def test_a_run_that_keeps_up_has_no_overload_line(run_cli):
    r = run_cli("simulate", *TINY, "--requests", "4", "--rate", "0.01", "--prompt", "1000", "--decode", "100")
    assert r.code == 0, r.err
    assert not r.out.startswith("OVERLOADED") and "Overloaded" not in r.out
    doc = run_cli("simulate", *TINY, "--requests", "4", "--rate", "0.01", "--prompt", "1000", "--decode", "100",
                  "-f", "json").json()
    assert doc["overloaded"] is False and doc["sustained_requests_per_second"] is None


# --- --ttft-slo --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, parsed", [("2s", (2.0, 99)), ("p50:500ms", (0.5, 50)), ("P90: 2s", (2.0, 90)),
                                          ("p99:162s", (162.0, 99))])
def test_ttft_slo_is_p99_unless_a_percentile_leads_it(text, parsed):
    from kvplan.calc.simulate import parse_ttft_slo

    assert parse_ttft_slo(text) == parsed


def _point(tpot_p99, ttft_p50, ttft_p90, ttft_p99):
    from kvplan.specs.values import Fraction, Seconds, given

    return {"tpot_seconds_p99": Seconds(tpot_p99, given("t")), "recompute_rate": Fraction(0.0, given("r")),
            "ttft_seconds_p50": Seconds(ttft_p50, given("t")), "ttft_seconds_p90": Seconds(ttft_p90, given("t")),
            "ttft_seconds_p99": Seconds(ttft_p99, given("t"))}


def test_a_rate_meeting_tpot_with_ttft_p99_at_162_s_does_not_pass(monkeypatch):
    # rates 1, 2, 3: TPOT p99 30 ms each (inside 50 ms); TTFT p99 0.4 s, 1.5 s, 162 s. With --ttft-slo 2s (p99)
    # 1 and 2 pass, 3 fails: capacity 2. Without a TTFT target all three pass. With p50:1s (p50 0.1, 0.3, 0.9 s)
    # all three pass; with p90:1s (p90 0.3, 0.8, 40 s) 3 fails.
    from kvplan.calc import simulate as sim

    points = {1.0: _point(0.03, 0.1, 0.3, 0.4), 2.0: _point(0.03, 0.3, 0.8, 1.5), 3.0: _point(0.03, 0.9, 40.0, 162.0)}
    monkeypatch.setattr(sim, "_sweep_point", lambda job: points[job[1]])
    works = [(r, r) for r in points]
    p99 = sim.plan_sweep(None, works, sim.SimOptions(), 0.050, None, workers=1, ttft_slo=2.0)
    assert p99.meets == (True, True, False) and p99.capacity == 2.0
    assert p99.capacity_value.why.formula.endswith("meet TPOT p99 <= 50 ms and TTFT p99 <= 2000 ms")
    none = sim.plan_sweep(None, works, sim.SimOptions(), 0.050, None, workers=1)
    assert none.meets == (True, True, True)
    p50 = sim.plan_sweep(None, works, sim.SimOptions(), 0.050, None, workers=1, ttft_slo=1.0, ttft_percentile=50)
    assert p50.meets == (True, True, True)
    p90 = sim.plan_sweep(None, works, sim.SimOptions(), None, None, workers=1, ttft_slo=1.0, ttft_percentile=90)
    assert p90.meets == (True, True, False) and p90.capacity == 2.0
    # the SLO model adds its attainment target (default 90% of requests meeting both)
    assert set(p90.targets) == {"ttft_seconds_p90_at_most", "slo_attainment_at_least"}


def test_the_sweep_reports_ttft_target_and_overload(run_cli):
    # five 1,000 + 1,001-token requests; at 1e6/s they arrive together; the TTFT p90 column joins the table
    r = run_cli("simulate", *TINY, "--requests", "5", "--prompt", "1000", "--decode", "1001", "--sweep-rate",
                "0.001:1000000:2", "--ttft-slo", "p90:50s", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["targets"] == {"ttft_seconds_p90_at_most": 50.0, "slo_attainment_at_least": 0.9}
    assert [p["meets_targets"] for p in doc["sweep"]] == [True, True]
    assert all("ttft_seconds_p90" in p and "overloaded" in p for p in doc["sweep"])
    table = run_cli("simulate", *TINY, "--requests", "5", "--prompt", "1000", "--decode", "1001", "--sweep-rate",
                    "0.001:1000000:2", "--ttft-slo", "p90:50s").out
    assert "TTFT p90" in table and "TTFT p90 <= 50000 ms" in table.replace("\n", " ")


@pytest.mark.parametrize("args, needle", [
    (("--ttft-slo", "2s"), "are the targets of a --sweep-rate"),
    (("--sweep-rate", "1:2:2", "--ttft-slo", "p95:2s"), "is not one of p50, p90, p99"),
    (("--sweep-rate", "1:2:2", "--ttft-slo", "p50:soon"), "ttft-slo"),
])
def test_bad_ttft_slo_is_one_line_exit_2(run_cli, args, needle):
    r = run_cli("simulate", *TINY, "--requests", "3", *args)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err
