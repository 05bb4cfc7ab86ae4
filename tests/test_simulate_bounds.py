"""`kvplan simulate`'s bounded work (issue 18): above the documented limits the run is refused in one line,
exit 2, before any work; at the limits a run finishes. The limits were set where the slowest shapes still finish
in ~10-20 s on a 2-CPU machine (measured 2026-12-01 with /usr/bin/time -v, llama-3.1-8b on 8 x H100 as DP8,
1,000 + 30,000 tokens per request): 10,000 / 50,000 / 100,000 requests at --rate 1 took 2.1 / 7.1 / 18.3 s
(104 / 344 / 641 MB); --users 1000: 10,000 in 3.8 s, 20,000 in 6.9 s, 40,000 in 10.4 s, 50,000 in 11.3 s (20-24 s
at load 3.7); a trace all at t=0: 10,000 in 4.3 s, 20,000 in 5.7 s, 50,000 in 12-17 s; a 1,000,000-line trace took
21 s to read alone, and 1,000,000 requests at --rate 1 had taken 158 s and 4.7 GiB.
"""

import time
from pathlib import Path

import pytest

from kvplan.errors import KvplanError
from kvplan.inputs import workload as wl

ROOT = Path(__file__).resolve().parents[1]
LLAMA = ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1")


def _refused_fast(run_cli, *args):
    run_cli("simulate", "--help")          # the imports, so the timing below is the refusal's own
    start = time.perf_counter()
    r = run_cli(*args)
    took = time.perf_counter() - start
    assert r.code == 2 and r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
    assert took < 1.0, took
    return r.err


def test_more_requests_than_a_run_simulates_are_refused_in_one_line_before_any_work(run_cli):
    err = _refused_fast(run_cli, *LLAMA, "--requests", "50001", "--rate", "1")
    assert "--requests 50,001 is not in 1 .. 50,000" in err and "--requests 50000" in err
    # the case: a million requests (158 s and 4.7 GiB before the limit)
    assert "1,000,000" in _refused_fast(run_cli, *LLAMA, "--requests", "1000000", "--users", "1000")


def test_the_requests_limit_is_checked_before_the_trace_is_read(run_cli, tmp_path):
    # the trace does not exist: a refusal naming --requests, not the file, shows the trace was never opened
    err = _refused_fast(run_cli, *LLAMA, "--trace", str(tmp_path / "absent.csv"), "--requests", "60000")
    assert "--requests 60,000" in err and "absent.csv" not in err


def test_the_limit_itself_is_accepted():
    wl.check_requests(50_000)                       # MAX_REQUESTS
    with pytest.raises(KvplanError, match="50,001"):
        wl.check_requests(50_001)


def test_a_trace_longer_than_a_run_is_refused_on_its_line_count(run_cli, tmp_path):
    # a header and 50,001 requests: 50,002 lines, one more than the header + MAX_TRACE_ROWS a run reads
    path = tmp_path / "long.csv"
    path.write_text("prompt_tokens,output_tokens,arrival_s\n" + "1000,30000,0\n" * 50_001)
    err = _refused_fast(run_cli, *LLAMA, "--trace", str(path))
    assert "50,002 lines, more than the 50,000 requests" in err and "split" in err


def test_the_trace_bound_counts_the_header_line(monkeypatch, tmp_path):
    monkeypatch.setattr(wl, "MAX_TRACE_ROWS", 3)
    path = tmp_path / "t.csv"
    path.write_text("prompt_tokens,output_tokens\n" + "10,5\n" * 3)       # header + 3 requests: read
    assert len(wl.read_trace(path).prompts) == 3
    path.write_text("prompt_tokens,output_tokens\n" + "10,5\n" * 4)       # header + 4: refused
    with pytest.raises(KvplanError, match="5 lines, more than the 3 requests"):
        wl.read_trace(path)
    jsonl = tmp_path / "t.jsonl"                                            # JSON lines have no header
    jsonl.write_text('{"prompt_tokens": 10, "output_tokens": 5}\n' * 3)
    assert len(wl.read_trace(jsonl).prompts) == 3
    jsonl.write_text('{"prompt_tokens": 10, "output_tokens": 5}\n' * 4)
    with pytest.raises(KvplanError, match="4 lines, more than the 3 requests"):
        wl.read_trace(jsonl)


def test_a_sweep_or_compare_is_bounded_by_its_total_requests(run_cli):
    # 200 rates x 1,001 requests = 200,200 > MAX_TOTAL_REQUESTS 200,000; 200 x 1,000 is exactly it
    err = _refused_fast(run_cli, *LLAMA, "--sweep-rate", "1:2:200", "--requests", "1001")
    assert "200 rates x --requests 1,001 simulate 200,200 requests, more than 200,000" in err
    assert "--requests 1000" in err                    # 200,000 // 200
    wl.check_requests(1_000, 200)
    # --compare with 3 variants is 4 runs: 4 x 50,000 = 200,000 passes, 4 x 50,001 is over the per-run limit anyway;
    # 5 runs (4 variants) x 40,001 = 200,005 is over, and the hint is 200,000 // 5 = 40,000
    wl.check_requests(50_000, 4)
    err = _refused_fast(run_cli, *LLAMA, "--rate", "1", "--requests", "40001",
                        "--compare", "swap,recompute,kv-dtype=fp8,max-batch=8")
    assert "5 runs" in err and "200,005" in err and "--requests 40000" in err


def test_a_check_plan_with_too_many_requests_is_invalid_in_one_line(run_cli, tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text('[deployment]\nmodel = "llama-3.1-8b"\nhardware = "h100-sxm"\n\n'
                    '[[assert]]\nmetric = "sim_recompute_rate"\nrate = 1\nrequests = 50001\nat_most = "2%"\n')
    r = run_cli("check", str(plan))
    assert r.code == 2 and r.err.count("\n") == 1 and "1 .. 50,000" in r.err, r.err


def test_a_moderate_run_completes(run_cli):
    # 2,000 requests, 250 per replica: well inside the limit, and quick (~1 s)
    r = run_cli(*LLAMA, "--requests", "2000", "--rate", "1", "-f", "json")
    assert r.code == 0, r.err
    import json

    out = json.loads(r.out)
    assert out["requests_finished"] == 2000 and out["generated_tokens"] == 2000 * 30_000   # every decode ran out


def test_the_readme_states_the_limits_the_code_enforces():
    for path in (ROOT / "docs" / "README.in.md", ROOT / "README.md"):
        text = path.read_text()
        assert (f"at most {wl.MAX_REQUESTS:,} requests" in text
                and f"{wl.MAX_TOTAL_REQUESTS:,} over" in text), path
