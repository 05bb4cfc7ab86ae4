"""kvplan simulate's features: --compare, --sweep-rate, --offload-threshold, prefix caching, the timeline; each with
hand-worked numbers on tiny cases and bad input (one line, exit 2)."""

from __future__ import annotations

import pytest
from test_json_contract import numeric_paths  # tests/ is on sys.path (rootdir-less test modules)

# Llama-3.1-8B, BF16 KV, TP 1, 16-token blocks: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B per
# token (the model's config.json: num_hidden_layers 32, num_key_value_heads 8, head_dim 4096 / 32 = 128), so one
# block is 16 x 131,072 B = 2 MiB and a 1,000 MiB pool is 500 blocks (watermark int(0.01 x 500) = 5).
# Five users of 1,000 + 1,001 tokens: all five are admitted (5 x ceil(1,000 / 16) = 5 x 63 = 315 blocks); growing
# in lockstep, the step that reads x tokens needs 5 x ceil(x / 16) blocks, more than 500 first at x = 1,601: the
# newest (the fifth) is preempted with a cache of 1,600 tokens. It is not readmitted while the four run (they hold
# 400 blocks and grow; it needs 100 with 5 kept free), so exactly one preemption.
TINY = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--block-size", "16", "--kv-pool", "1000MiB",
        "--users", "5", "--requests", "5", "--prompt", "1000", "--decode", "1001")
TOKEN_BYTES = 2 * 32 * 8 * 128 * 2


def test_compare_runs_the_same_requests_under_each_setting(run_cli):
    r = run_cli("simulate", *TINY, "--compare", "policy=swap,swap-then-recompute+dram=2TB,kv-dtype=fp8", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    missing = sorted(set(numeric_paths(doc)) - set(doc["derivations"]))
    assert not missing, missing
    base, swap, stc, fp8 = doc["compare"]
    assert [c["label"] for c in doc["compare"]] == ["base", "swap", "swap-then-recompute+2TB", "fp8"]
    assert swap["changes"] == {"policy": "swap"} and stc["changes"] == {"policy": "swap-then-recompute",
                                                                        "dram": "2TB"}
    # recompute (the base): one preemption, its 1,600-token cache re-prefilled; rate 1,600 / (5 x 1,001) generated
    assert base["preemptions"] == 1 and base["recomputed_tokens"] == 1600 and base["swap_out_count"] == 0
    assert base["recompute_rate"] == pytest.approx(1600 / 5005, rel=1e-12)
    # swap: the same victim goes to DRAM instead: 1,600 x 131,072 B = 209,715,200 B out and back, nothing recomputed
    for run in (swap, stc):
        assert run["policy"] != "recompute"
        assert run["swap_out_count"] == run["swap_in_count"] == 1 and run["recomputed_tokens"] == 0
        assert run["swapped_bytes"] == 1600 * TOKEN_BYTES == 209_715_200
    # FP8 KV halves the bytes per token: 1,000 blocks of 1 MiB, five requests of 125 blocks fit with no preemption
    assert fp8["kv_dtype"] == "fp8" and fp8["replica"]["kv_blocks"] == 1000 and fp8["preemptions"] == 0
    assert all(c["generated_tokens"] == 5 * 1001 for c in doc["compare"])


def test_compare_columns_equal_the_single_runs(run_cli):
    args = ("simulate", "--workload", "r1-production", "--rate", "4", "--requests", "120", "--kv-pool", "3GiB")
    doc = run_cli(*args, "--compare", "victim=fewest-tokens", "-f", "json").json()
    alone = run_cli(*args, "--victim", "fewest-tokens", "-f", "json").json()
    col = doc["compare"][1]
    for key in ("preemptions", "recomputed_tokens", "tpot_seconds_p99", "simulated_seconds"):
        assert col[key] == alone[key], key
    assert doc["compare"][0]["victim"] == "newest"


def test_compare_table_has_a_column_per_setting(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    r = run_cli("simulate", *TINY, "--compare", "swap")
    assert r.code == 0, r.err
    header = next(line for line in r.out.splitlines() if "figure" in line)
    assert header.split() == ["figure", "base", "swap"]
    assert "2 settings compared" in r.out.splitlines()[0]


@pytest.mark.parametrize("value, needle", [
    ("", "--compare is empty"),
    ("policy=swap,,victim=newest", "empty variant"),
    ("seed=3", "not one a variant can change"),
    ("bogus", "is not key=value"),
    ("policy=", "no value"),
    ("policy=swap+policy=recompute", "sets policy twice"),
    ("policy=nope", "unknown preemption policy"),
    ("kv-dtype=int3", "unknown kv dtype"),
    ("max-batch=0", "max-batch"),
    (",".join(["swap"] * 13), "at most 12"),
])
def test_compare_bad_input_is_one_line_exit_2(run_cli, value, needle):
    r = run_cli("simulate", "--requests", "3", "--compare", value)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


def test_compare_refuses_csv(run_cli):
    r = run_cli("simulate", "--requests", "3", "--compare", "swap", "-f", "csv")
    assert r.code == 2 and "per-request table of one run" in r.err and r.err.count("\n") == 1, r.err
