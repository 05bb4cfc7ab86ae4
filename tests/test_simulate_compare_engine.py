"""``simulate --compare engine=NAME``: a variant runs that engine's memory rules and scheduler on the same requests,
so its column is exactly what ``--engine NAME`` alone gives for the same arrivals and lengths (the README's
side-by-side example rests on this)."""

from __future__ import annotations

import pytest

BASE = ("simulate", "--workload", "r1-production", "--rate", "3", "--requests", "300", "--seed", "1", "-f", "json")
SAME = ("tpot_seconds_p50", "tpot_seconds_p99", "ttft_seconds_p99", "preemptions", "recomputed_tokens",
        "simulated_seconds", "requests_finished")


def _figures(doc: dict) -> dict:
    return {k: doc[k] for k in SAME}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_an_engine_variant_is_that_engines_own_run(run_cli, engine):
    both = run_cli(*BASE, "--kv-dtype", "fp8", "--compare", f"engine={engine}")
    alone = run_cli(*BASE, "--kv-dtype", "fp8", "--engine", engine)
    assert both.code == 0 and alone.code == 0, (both.err, alone.err)
    base, variant = both.json()["compare"]
    direct = alone.json()
    assert variant["changes"] == {"engine": engine}
    assert _figures(variant) == _figures(direct)
    assert variant["replica"]["kv_blocks"] == direct["replica"]["kv_blocks"]
    # and the variant is not the base: the engines' pools differ (vLLM's and SGLang's memory rules, the neutral
    # engine's flat reserve), so the block counts do
    assert variant["replica"]["kv_blocks"] != base["replica"]["kv_blocks"]


def test_engine_and_kv_dtype_in_one_variant_both_apply(run_cli):
    both = run_cli(*BASE, "--kv-dtype", "fp8", "--compare", "engine=vllm+kv-dtype=bf16")
    alone = run_cli(*BASE, "--kv-dtype", "bf16", "--engine", "vllm")
    assert both.code == 0 and alone.code == 0, (both.err, alone.err)
    variant = both.json()["compare"][1]
    assert variant["kv_dtype"] == "bf16"
    assert _figures(variant) == _figures(alone.json())
    assert variant["replica"]["kv_blocks"] == alone.json()["replica"]["kv_blocks"]


def test_an_unknown_engine_variant_is_one_line(run_cli):
    r = run_cli(*BASE, "--compare", "engine=trtllm")
    assert r.code == 2 and r.err.startswith("error: ") and r.err.count("\n") == 1, r.err
