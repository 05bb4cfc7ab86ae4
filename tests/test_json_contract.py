"""Every number in every command's JSON explains itself: each numeric key has a derivation (computed, or an
input / default with its source), collected from the typed values the calculators return."""

from pathlib import Path

import pytest

PLANS = Path(__file__).resolve().parent.parent / "examples" / "plans"
LOGS = Path(__file__).resolve().parent / "data" / "logs"
RUNS = [
    ("size",),
    ("size", "-m", "gpt-oss-120b", "--tp", "2", "--pp", "2", "--compare", "llama-3.1-8b"),
    ("size", "--kv-dtype", "fp8", "--mtp-layers", "1"),
    ("concurrency",),
    ("concurrency", "--engine", "vllm", "--kv-pool", "40GiB", "--shared-prefix", "512", "--spec-tokens", "2"),
    ("concurrency", "--engine", "sglang", "-m", "qwen3-32b", "--tp", "2"),
    ("concurrency", "-m", "llama-3.1-8b", "--tp", "1", "--token-budget", "4k", "--ssd", "8TB", "--dram", "1TB",
     "--draft-model", "llama-3.1-8b"),
    ("compare-preemption",),
    ("tpot",),
    ("pd", "--nodes", "2"),
    ("simulate", "--kv-dtype", "fp8", "--workload", "long-cot-bench", "--rate", "0.2", "--requests", "60",
     "--seed", "3"),
    ("simulate", "--policy", "recompute", "--requests", "40", "--users", "32", "--output-dist", "fixed:20000"),
    ("simulate", "--requests", "40", "--users", "32", "--kv-pool", "20GiB", "--compare", "swap,kv-dtype=fp8"),
    ("simulate", "--requests", "40", "--sweep-rate", "1:3:3", "--tpot-slo", "80ms", "--max-recompute-rate", "0.1",
     "--offload-threshold", "0.6", "--shared-prefix", "512"),
    ("pd", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--prompt", "8k", "--decode", "500",
     "--tpot-slo", "20ms", "--prefill-gpus", "3"),
    ("tpot", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--shape", "cohort", "--batch", "4"),
    ("tpot", "--kv-dtype", "fp8", "--mtp-layers", "1", "--spec-tokens", "1", "--accept", "1.8-0.00001/token"),
    ("compare-preemption", "-m", "llama-3.1-8b", "--layout", "per-layer", "--sync-swap", "--prefix-hit", "1k"),
    ("check", str(PLANS / "deepseek-r1-h200-fp8.toml")),
    ("recommend", "--emit", "vllm"),
    ("recommend", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--prompt", "4k", "--decode", "300",
     "--host-link-gbs", "0.5", "--emit", "sglang"),
    ("recommend", "-m", "llama-3.1-8b", "--prompt", "4k", "--decode", "300", "--target", "rate>=10rps,tpot<=40ms",
     "--candidates", "h100-sxm", "--ttft-slo", "500ms", "--emit", "vllm"),
    ("explain-log", str(LOGS / "vllm-v0.6.5-llama3-8b-1xh100.log"), "-m", "llama-3.1-8b", "-g", "h100-sxm"),
    ("explain-log", str(LOGS / "sglang-kt-deepseek-v3-bf16-tp2.log"), "-m", "deepseek-r1", "--decode", "5k"),
    ("explain-log", str(LOGS / "vllm-v0.6-llama3.1-8b-rtx3090.log"), "-m", "llama-3.1-8b", "--decode", "20k"),
    ("concurrency", "--from-log", str(LOGS / "sglang-qwen3-235b-a22b-fp8-4xh100.log"), "-m", "qwen3-235b-a22b",
     "--tp", "4", "--gpus", "4", "--engine", "sglang"),
]


def numeric_paths(obj, path=""):
    """JSON paths of every number (booleans excluded); list items share ``name[]``."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return
    if isinstance(obj, (int, float)):
        yield path
    elif isinstance(obj, dict):
        for key, value in obj.items():
            if path == "" and key == "derivations":
                continue
            yield from numeric_paths(value, f"{path}.{key}" if path else key)
    elif isinstance(obj, list):
        for item in obj:
            yield from numeric_paths(item, f"{path}[]")


@pytest.mark.parametrize("args", RUNS, ids=lambda a: " ".join(a))
def test_every_number_has_a_derivation(run_cli, args):
    r = run_cli(*args, "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    derivations = doc["derivations"]
    missing = sorted(set(numeric_paths(doc)) - set(derivations))
    assert not missing, f"numbers without a derivation: {missing}"
    for path, d in derivations.items():
        assert d["formula"], path
        assert d["kind"] in ("computed", "input"), path
        if d["kind"] == "computed":
            assert d["substituted"], f"{path}: a computed figure shows its numbers"


def test_a_number_without_a_derivation_is_caught(run_cli):
    # The walker itself must find numbers: a document with a bare number and no derivation fails the check.
    doc = {"a": 1, "b": {"c": [1.5, {"d": 2}]}, "e": True, "derivations": {}}
    assert sorted(numeric_paths(doc)) == ["a", "b.c[]", "b.c[].d"]


def test_explain_covers_every_derivation(run_cli):
    doc = run_cli("concurrency", "--engine", "vllm", "-f", "json").json()
    text = run_cli("concurrency", "--engine", "vllm", "--explain").out
    for path in doc["derivations"]:
        assert path in text, path
