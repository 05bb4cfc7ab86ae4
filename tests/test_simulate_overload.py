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


def _one_server(rate: float, n: int = 400):
    """n requests arriving every 1 / rate s at one server that takes exactly 1 s each (capacity 1/s, closed form):
    request i arrives at i / rate and is admitted at max(its arrival, when the one before is done)."""
    i = np.arange(n)
    arrival = i / rate
    admitted = np.maximum(arrival, i) if rate > 1 else arrival   # above 1/s the server never idles: admitted at i
    return _run(arrival, admitted, admitted + 1.0)


def test_arrivals_1_1_times_the_capacity_grow_the_queue_through_the_run():
    # rate 1.1/s, 400 requests: the last arrives at 399 / 1.1 = 362.73 s; the looks at k x 362.73 / 8 s. Waiting at
    # t (t before the last arrival): arrived floor(1.1 t) + 1, admitted floor(t) + 1 -> floor(1.1 t) - floor(t):
    # t = 45.34: 49 - 45 = 4; 90.68: 99 - 90 = 9; 136.02: 149 - 136 = 13; 181.36: 199 - 181 = 18; 226.70: 249 - 226
    # = 23; 272.05: 299 - 272 = 27; 317.39: 349 - 317 = 32; at the last arrival all 400 arrived, 363 admitted: 37.
    # Longer at every look: the steady rise is 37 - 4 = 33 > max(5% of 400, 10) = 20: overloaded. The first rule
    # alone (growth from the middle, 18, to the end, 37: 19 <= max(10% of 400, 10) = 40) misses it: it needs 1.25 x.
    from kvplan.calc import simulate as sim

    v = sim.overload_verdict(_one_server(1.1))
    assert v.samples == (4, 9, 13, 18, 23, 27, 32, 37) and v.rise == 33 and v.overloaded
    assert (v.waiting_mid, v.waiting_end) == (18, 37) and not sim._grows(37, 18, 400)
    # capacity: finished (at i + 1) between the middle (181.36 s) and the last admission (399 s): i + 1 = 182 .. 399,
    # 218 of them in 217.64 s -> 1.0017/s, the one server's 1/s
    assert v.window_end == 399.0 and v.completions == 218
    assert v.capacity == pytest.approx(218 / (399 - 399 / 1.1 / 2), rel=1e-12)
    m = sim.overload_values(v)
    assert m["waiting_steady_rise"].value == 33 and "37 - 4 = 33" in m["waiting_steady_rise"].why.substituted


def test_arrivals_1_19_times_the_capacity_the_fidelity_sets_missed_overload():
    # as the Mixtral-8x7B reasoning run at 4/s (1.19 x what vLLM sustained): looks at k x (399 / 1.19) / 8 =
    # k x 41.91 s, waiting floor(1.19 t) - floor(t) = 49 - 41 = 8, 16, 24, ..., and 400 - 336 = 64 at the last
    # arrival (335.29 s): a steady rise of 56 > 20; the middle (167.65 s) has 199 - 167 = 32, so the first rule sees
    # 64 - 32 = 32 <= 40
    from kvplan.calc import simulate as sim

    v = sim.overload_verdict(_one_server(1.19))
    assert v.samples == (8, 16, 24, 32, 40, 48, 56, 64) and v.overloaded
    assert not sim._grows(v.waiting_end, v.waiting_mid, 400)


def test_arrivals_0_95_times_the_capacity_keep_up():
    # 1 / 0.95 = 1.053 s apart, 1 s each: every request is admitted on arrival and done before the next: no queue
    from kvplan.calc import simulate as sim

    v = sim.overload_verdict(_one_server(0.95))
    assert v.samples == (0,) * 8 and v.rise == 0 and not v.overloaded
    assert sim.overload_values(v)["sustained_requests_per_second"].value is None


def test_a_queue_that_rises_but_not_at_every_look_is_no_steady_rise():
    # 0, 0, 0, 0, 79, 172, 260, 352: it grew only over the second half (a rate raised mid-run), so the steady rise
    # is 0 and only the first rule (352 - 0 > 10% of the requests) can call it; one look that falls back breaks it
    from kvplan.calc import simulate as sim

    assert sim.steady_rise((0, 0, 0, 0, 79, 172, 260, 352)) == 0
    assert sim.steady_rise((70, 159, 248, 337, 426, 515, 604, 693)) == 623
    assert sim.steady_rise((1, 2, 3, 4, 5, 6, 5, 40)) == 0
    assert sim.steady_rise((30,) * 8) == 0


def test_a_steady_rise_exactly_at_the_limit_is_not_overload_one_more_is():
    # 400 requests: the limit is max(5% of 400, 10) = 20; 100 requests: max(5, 10) = 10
    from kvplan.calc import simulate as sim
    from kvplan.specs.values import Count, given

    def m(rise, n):
        return {"waiting_at_mid_arrival": Count(0, given("m")), "waiting_at_last_arrival": Count(0, given("e")),
                "requests_finished": Count(n, given("n")), "waiting_steady_rise": Count(rise, given("r"))}

    assert not sim.overloaded(m(20, 400)) and sim.overloaded(m(21, 400))
    assert not sim.overloaded(m(10, 100)) and sim.overloaded(m(11, 100))


def test_a_simulated_server_just_over_and_just_under_its_capacity():
    # --max-batch 1 on the neutral engine: each 500 + 50-token request takes the same service time S (its prefill
    # and 49 decode steps at the same contexts), so the capacity is 1 / S; S is the first request's time alone.
    # Evenly spaced arrivals at 1.1 / S: overloaded (the queue rises at every look); at 0.95 / S: not.
    from kvplan.calc import simulate as sim
    from kvplan.inputs import workload as wl
    from kvplan.options.scenarios import build_scenario

    s = build_scenario(model="llama-3.1-8b", hardware="h100-sxm", tp="1", dp="1", engine="neutral")

    def work(gaps):
        return wl.Workload(prompts=np.full(len(gaps), 500), outputs=np.full(len(gaps), 50), arrivals=np.asarray(gaps),
                           users=None, think_s=0.0, duration_s=None, describe="constant")

    one = sim.simulate(s, work([0.0]), sim.SimOptions(max_batch=1))
    service = float(one.finish[0])
    for ratio, over in ((1.1, True), (0.95, False)):
        run = sim.simulate(s, work(np.arange(300) * service / ratio), sim.SimOptions(max_batch=1))
        v = sim.overload_verdict(run)
        assert v.overloaded is over, (ratio, v.samples)
        if over:
            assert v.rise > 15 and not sim._grows(v.waiting_end, v.waiting_mid, 300)
            assert v.capacity == pytest.approx(1 / service, rel=0.02)


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


# --- the service witness (issue 21): completions against arrivals over the run's steady part -------------------------

def _greedy(rate: float, n: int = 1000):
    """n requests arriving every 1 / rate s, each admitted on arrival (the waiting queue stays empty, as when an
    engine admits greedily and preempts later), finishing in order at a server that completes one a second: request
    i finishes at max(its arrival + 1, the one before's finish + 1). Above 1/s that is i + 1 (the arrival i / rate + 1
    is earlier); below, its arrival + 1 (the server idles between requests)."""
    i = np.arange(n)
    arrival = i / rate
    finish = i + 1.0 if rate > 1 else arrival + 1.0
    return _run(arrival, arrival, finish)


def test_requests_admitted_at_once_but_finished_at_one_a_second_overload_at_1_25_a_second():
    # 1,000 arrivals at 1.25/s (0.8 s apart): the last at 999 x 0.8 = 799.2 s, the middle 399.6 s. The waiting queue
    # is empty throughout, so the queue rules see nothing. Time in system of request i: (i + 1) - 0.8 i = 1 + 0.2 i;
    # of those that arrived by the middle (i = 0..499) the p90 (numpy's linear: index 0.9 x 499 = 449.1) is
    # 1 + 0.2 x 449.1 = 90.82 s, so the steady part starts at max(399.6, 0 + 90.82) = 399.6 s. Arrivals in
    # (399.6, 799.2]: i = 500..999, 500; completions (at i + 1) in it: 400..799, 400. Shortfall 100 >
    # 3 x sqrt(2 x 500) = 94.87: overloaded. Capacity: finished in [399.6, 799.2] / 399.6 s = 400 / 399.6.
    from kvplan.calc import simulate as sim

    v = sim.overload_verdict(_greedy(1.25))
    assert v.samples == (0,) * 8 and v.rise == 0 and (v.waiting_mid, v.waiting_end) == (0, 0)
    assert v.ramp == pytest.approx(90.82, rel=1e-9) and v.steady_start == pytest.approx(399.6, rel=1e-12)
    assert (v.steady_arrivals, v.steady_completions) == (500, 400) and v.overloaded
    assert v.capacity == pytest.approx(400 / 399.6, rel=1e-12)
    m = sim.overload_values(v)
    assert (m["arrivals_steady_part"].value, m["completions_steady_part"].value) == (500, 400)
    assert "500 - 400 = 100 > 3 x sqrt(2 x 500) = 94.9" in m["completions_steady_part"].why.substituted
    assert sim.falls_behind(m) and m["sustained_requests_per_second"].value == pytest.approx(1.001, rel=1e-3)


def test_the_same_server_fed_0_9_a_second_keeps_up():
    # 1.111 s apart, 1 s each: every request finishes 1 s after it arrives, so the completions over any window are
    # its arrivals shifted by 1 s: 500 arrived in (555, 1110] s (i = 500..999) and 500 finished (i = 499..998)
    from kvplan.calc import simulate as sim

    v = sim.overload_verdict(_greedy(0.9))
    assert (v.steady_arrivals, v.steady_completions) == (500, 500) and not v.overloaded


def test_the_service_shortfall_exactly_at_the_limit_is_not_overload_one_more_is():
    # 500 arrivals: 3 x sqrt(1,000) = 94.87, so 94 short is within the noise and 95 is not; 20 arrivals:
    # 3 x sqrt(40) = 18.97: 18 short is not, 19 is; 17 arrivals: 3 x sqrt(34) = 17.49, more than all of them
    from kvplan.calc import simulate as sim
    from kvplan.specs.values import Count, given

    assert not sim._falls_behind(500, 406) and sim._falls_behind(500, 405)
    assert not sim._falls_behind(20, 2) and sim._falls_behind(20, 1)
    assert not sim._falls_behind(17, 0)

    def m(came, went):
        return {"waiting_at_mid_arrival": Count(0, given("m")), "waiting_at_last_arrival": Count(0, given("e")),
                "requests_finished": Count(1000, given("n")), "waiting_steady_rise": Count(0, given("r")),
                "arrivals_steady_part": Count(came, given("a")), "completions_steady_part": Count(went, given("c"))}

    assert not sim.overloaded(m(500, 406)) and sim.overloaded(m(500, 405))
    assert not sim.overloaded(m(None, None))   # no steady part: the witness abstains


def test_the_ramp_while_the_batch_fills_is_no_shortfall():
    # 200 arrivals at 1/s, each 150 s in the system and admitted at once (a deployment that keeps up, requests that
    # run long): nothing finishes before 150 s. From the middle (99.5 s) 100 arrive to 199 s and only 50 finish
    # (i + 150 <= 199: i = 0..49), short by 50 > 3 x sqrt(200) = 42.4: the fill, not overload. The steady part starts
    # at max(99.5, 0 + 150) = 150 s: 49 arrive in (150, 199] (i = 151..199) and 49 finish (i = 1..49).
    from kvplan.calc import simulate as sim

    i = np.arange(200.0)
    v = sim.overload_verdict(_run(i, i, i + 150))
    assert v.steady_start == 150.0 and (v.steady_arrivals, v.steady_completions) == (49, 49) and not v.overloaded


def test_requests_that_outlast_the_arrivals_leave_no_steady_part():
    # 100 arrivals at 1/s, 200 s each: the steady part would start at 200 s, past the last arrival (99 s): the
    # witness abstains (no figure), and the queue rules see an empty queue
    from kvplan.calc import simulate as sim

    i = np.arange(100.0)
    v = sim.overload_verdict(_run(i, i, i + 200))
    assert v.steady_start is None and v.steady_arrivals is None and not v.overloaded
    m = sim.overload_values(v)
    assert m["arrivals_steady_part"].value is None and "no steady part" in m["arrivals_steady_part"].why.substituted


def test_a_closed_loop_that_falls_behind_is_still_never_overloaded():
    from kvplan.calc import simulate as sim

    r = _greedy(1.25)
    r.workload = SimpleNamespace(arrivals=None)
    v = sim.overload_verdict(r)
    assert not v.overloaded and v.steady_arrivals is None
    assert not sim.overloaded({**sim.overload_values(v), "waiting_at_last_arrival": sim.Count(0),
                               "requests_finished": sim.Count(1000)})


def _sglang_1k_1k(rate: float):
    from kvplan.calc import simulate as sim
    from kvplan.inputs import workload as wl
    from kvplan.options.scenarios import build_scenario

    s = build_scenario(model="llama-3.1-8b", hardware="h100-sxm", tp="1", dp="1", engine="sglang", prompt="1k",
                       decode="1k")
    work = wl.build(requests=1000, seed=0, prompt=wl.parse_dist("fixed:1000", "--prompt"),
                    output=wl.parse_dist("fixed:1000", "--decode"), max_len=wl.MAX_TOKENS, rate=rate)
    return sim.simulate(s, work, sim.SimOptions())


def test_llama_8b_1k_1k_on_one_h100_at_12_a_second_is_overloaded_at_4_it_keeps_up():
    # The capacity, independently (kvplan concurrency / kvplan tpot, SGLang, llama-3.1-8b, 1 x H100 SXM, TP=1): the
    # pool holds 409,640 tokens; running requests of a 1,000 + 1,000 stream sit at contexts 1,000..2,000, 1,500 on
    # average, so the pool holds at most 272 of them (`tpot --prompt 1499 --decode 2 --batch 272`: 273 does not fit)
    # and one decode step of that batch takes 29.26 ms: 272 requests x 1,000 tokens each take 29.26 s to decode,
    # 9.30 requests/s with no prefill at all. Each 1,000-token prompt costs about its 41 ms TTFT alone on top
    # (`tpot --batch 204`: TTFT 40.99 ms), so the deployment sustains about 1 / (29.26 / 272 + 0.041) = 6.7/s.
    # 12/s is 1.29 x the no-prefill ceiling: overloaded. 4/s is 0.6 x the estimate: it keeps up. With 1,000 requests
    # the waiting queue alone missed 12/s (SGLang admits, then retracts: the backlog runs and is retracted, not
    # waiting), so the service witness decides it.
    from kvplan.calc import simulate as sim

    over = sim.overload_verdict(_sglang_1k_1k(12.0))
    assert over.overloaded and over.steady_arrivals - over.steady_completions > 3 * (2 * over.steady_arrivals) ** 0.5
    # and the backlog, the shortfall beyond the running batch's growth, too: the batch is held near the 272 the pool
    # takes (it grows by a few requests) while the requests that are not running, waiting or retracted, pile up
    filled = over.steady_running[1] - over.steady_running[0]
    assert over.steady_running[1] <= 320 and filled < 30
    assert sim._falls_behind(over.steady_arrivals, over.steady_completions, filled)
    assert not sim._grows(over.waiting_end, over.waiting_mid, 1000) and not sim._rises(over.rise, 1000)
    assert 6.45 < over.capacity < 9.3   # between the estimates above (6.7 with one prompt's TTFT, 9.30 without)
    ok = sim.overload_verdict(_sglang_1k_1k(4.0))
    assert not ok.overloaded and ok.steady_arrivals is not None
    assert abs(ok.steady_arrivals - ok.steady_completions) <= 3 * (2 * ok.steady_arrivals) ** 0.5


def test_the_sweep_calls_12_a_second_overload(run_cli):
    # the command the issue showed: --sweep-rate on SGLang's 1K + 1K, 1,000 requests a rate; 12/s "met" before
    args = ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--engine", "sglang",
            "--prompt", "1k", "--decode", "1k", "--sweep-rate", "4:12:2", "--tpot-slo", "100ms")
    doc = run_cli(*args, "-f", "json").json()
    low, high = doc["sweep"]
    assert (low["rate_requests_per_second"], low["meets_targets"]) == (4.0, True)
    assert (high["rate_requests_per_second"], high["meets_targets"], high["decided_by"]) == (12.0, False, "overload")
    assert high["arrivals_steady_part"] - high["completions_steady_part"] > 3 * (2 * high["arrivals_steady_part"]) ** .5
    text = " ".join(run_cli(*args).out.split())
    assert ("fewer requests finish than arrive, beyond the running batch's growth (a batch still filling is no "
            "backlog), by more than 3 x sqrt(2 x those arrivals)") in text
    assert "Overloaded from 12 requests/s: the arrivals outpace the service there" in text


def test_check_goodput_calls_12_a_second_overload_the_same_way(run_cli, tmp_path):
    # kvplan check's goodput_rps sweeps through the same rule: at 4 and 12 requests/s of SGLang's 1K + 1K (1,000
    # requests) the goodput is 4 (12/s overloads, as above), so a bound of at least 12 fails (exit 1)
    plan = tmp_path / "plan.toml"
    plan.write_text('[deployment]\nmodel = "llama-3.1-8b"\nhardware = "h100-sxm"\ntp = 1\ndp = 1\nengine = "sglang"\n'
                    'prompt = "1k"\ndecode = "1k"\n\n[workload]\nrequests = 1000\nrate = 4\n\n'
                    '[[assert]]\nname = "goodput"\nmetric = "goodput_rps"\nsweep_rate = "4:12:2"\ntpot_slo = "100ms"\n'
                    'at_least = 12\n', encoding="utf-8")
    r = run_cli("check", str(plan), "-f", "json")
    assert r.code == 1, r.err
    assert r.json()["plans"][0]["assertions"][0]["measured"] == 4


def _with_batch(r, running_at):
    """``r`` with a timeline whose running batch is ``running_at(t)`` at each arrival, admission and finish (the
    simulator's marks: times, blocks held, running, swapped, DRAM bytes)."""
    t = np.unique(np.concatenate([r.arrival, r.admitted, r.finish]))
    run = np.array([running_at(x) for x in t], dtype=np.int64)
    zero = np.zeros(len(t), dtype=np.int64)
    r.timeline = (t, zero, run, zero, zero)
    return r


def test_a_ramp_whose_batch_fills_is_not_overload():
    # 1,000 arrivals at 1/s (i = 0..999), each admitted at once (the batch under its limit). Request i's time in system
    # W_i: 40 s for i < 500, then rising as the batch fills and every step slows, 40 + (i - 500) / 2 for i = 500..799,
    # then held at 190 s (Little's law: a steady population of 1/s x 190 s = 190). Middle 499.5 s; the early p90 W is
    # 40 s, so the steady part is (499.5, 999]: 500 arrive (i = 500..999); finishing in it: i + 40 > 499.5 for
    # i = 460..499 (40), 1.5 i - 210 <= 999 for i = 500..799 (all 300), i + 190 <= 999 for i = 800..809 (10): 350.
    # Short by 150 > 3 x sqrt(1,000) = 94.9, which the count alone called overload; but the running batch grew from
    # 40 (i = 460..499 at 499.5 s) to 1,000 - 500 - 310 = 190 at 999 s, by 150: the batch filling, no backlog
    from kvplan.calc import simulate as sim

    i = np.arange(1000.0)
    w = np.where(i < 500, 40.0, np.where(i < 800, 40 + (i - 500) / 2, 190.0))
    r = _run(i, i, i + w)
    bare = sim.overload_verdict(r)
    assert (bare.steady_arrivals, bare.steady_completions) == (500, 350) and bare.overloaded   # no timeline: 0 taken
    v = sim.overload_verdict(_with_batch(r, lambda t: int(np.count_nonzero(i <= t) - np.count_nonzero(i + w <= t))))
    assert v.steady_running == (40, 190) and not v.overloaded
    m = sim.overload_values(v)
    assert m["running_growth_steady_part"].value == 150 and not sim.falls_behind(m)
    assert "500 - 350 = 150 - 150 (the running batch's growth) = 0 <= 3 x sqrt(2 x 500) = 94.9" in \
        m["completions_steady_part"].why.substituted
    assert not sim.overloaded({**m, "waiting_at_last_arrival": sim.Count(0), "requests_finished": sim.Count(1000)})


def test_a_backlog_that_is_not_running_is_still_overload():
    # the 1.25/s server above (_greedy: admitted at once, one finished a second), its batch held at 100 by the pool:
    # the requests past it are retracted, admitted once, so never waiting. Over (399.6, 799.2]: 500 arrived, 400
    # finished, the running batch 100 -> 100: the backlog grew by 100 > 94.9, overloaded. With the batch growing
    # by 6 as well the backlog is 94, within the noise
    from kvplan.calc import simulate as sim

    v = sim.overload_verdict(_with_batch(_greedy(1.25), lambda t: 100))
    assert v.steady_running == (100, 100) and (v.steady_arrivals, v.steady_completions) == (500, 400)
    assert v.overloaded and sim.falls_behind(sim.overload_values(v))
    w = sim.overload_verdict(_with_batch(_greedy(1.25), lambda t: 100 if t <= 399.6 else 106))
    assert w.steady_running == (100, 106) and not w.overloaded
    assert not sim._falls_behind(500, 400, 6) and sim._falls_behind(500, 400, 5)
