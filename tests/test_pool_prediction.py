"""kvplan's vLLM pool prediction against published memory-profile logs (tests/data/memory_profiles/).

Each log is planned with only what the user told vLLM (release, model, GPU, TP/PP, gpu_memory_utilization,
max_model_len, weight dtype) and every budget row is compared with the figure the log prints: the memory the CUDA
driver reports, the weights, the profile run's activation peak, the non-torch memory, the CUDA-graph memory, and
the pool. The logged figures are the engine's, not kvplan's: the index repeats them and the first test checks it
against the quoted lines themselves.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from kvplan.engines.vllm import for_release
from kvplan.scenario import Scenario
from kvplan.specs.parallel import Parallelism

DATA = Path(__file__).parent / "data" / "memory_profiles"
GIB = 2**30


spec = importlib.util.spec_from_file_location(
    "pool_fidelity", Path(__file__).resolve().parent.parent / "benchmarks" / "pool_fidelity.py")
fidelity = importlib.util.module_from_spec(spec)
sys.modules["pool_fidelity"] = fidelity
spec.loader.exec_module(fidelity)


LOGS = fidelity.load_index(DATA)
IDS = [e["id"] for e in LOGS]

# Figures the quoted lines print, by the wording of each format: v0.19's DEBUG/INFO lines, the V0 profiler's table,
# llm-d-planner's v0.11 table row and its version-sweep JSON.
_NUM = r"(-?[\d.]+)"
PATTERNS = {
    "total_gib": [r"total_memory=" + _NUM + "GiB", r"total_gpu_memory\s+" + _NUM + "GiB",
                  r"H100 GPU \(" + _NUM + " GiB\\)"],
    "weights_gib": [r"Model loading took " + _NUM + " GiB", r"model weights take\s+" + _NUM + "GiB",
                    r'"weight_memory_gib": ' + _NUM],
    "activation_gib": [r"torch peak memory increase: " + _NUM + "GiB", r"activation peak memory\s+" + _NUM + "GiB",
                       r'"activation_memory_gib": ' + _NUM],
    "non_torch_gib": [r"non-torch forward increase memory: " + _NUM + "GiB", r"non_torch_memory\s+" + _NUM + "GiB",
                      r'"non_torch_forward_memory_gib": ' + _NUM],
    "cuda_graph_gib": [r"CUDA graph pool memory: " + _NUM + r" GiB \(actual\)", r'"cuda_graph_memory_gib": ' + _NUM],
    "cuda_graph_estimate_gib": [r"GiB \(actual\), " + _NUM + r" GiB \(estimated\)"],
    "pool_gib": [r"Available KV cache memory: " + _NUM + " GiB", r"available_kv_cache_memory\s+" + _NUM + "GiB",
                 r'"kv_cache_memory_gib": ' + _NUM],
}
TABLE_COLUMNS = {"weights_gib": 1, "activation_gib": 2, "non_torch_gib": 3, "cuda_graph_gib": 4, "pool_gib": 5}


def _quoted(entry: dict) -> dict[str, float]:
    text = (DATA / entry["file"]).read_text()
    lines = [line for line in text.splitlines() if not line.startswith("##")]
    body = "\n".join(lines)
    found: dict[str, float] = {}
    for name, patterns in PATTERNS.items():
        for pattern in patterns:
            m = re.search(pattern, body)
            if m:
                found[name] = float(m.group(1))
                break
    rows = [line for line in lines if line.startswith("| ") and "Model" not in line]
    if rows:   # llm-d-planner's table: | Model | Weights | Activation | Non-torch | CUDA Graph | KV Cache | ...
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        found.update({name: float(cells[i]) for name, i in TABLE_COLUMNS.items()})
    return found


def _scenario(entry: dict) -> Scenario:
    return fidelity.scenario(entry, DATA)


def _budget(entry: dict):
    s = _scenario(entry)
    return s.engine_adapter.budget(s, s.sized_model, s.parallelism)


def test_the_index_repeats_the_quoted_figures():
    for entry in LOGS:
        quoted = _quoted(entry)
        for name, value in entry["logged"].items():
            if entry["id"] == "v0.6.5-llama3-8b-tp2" and name == "pool_gib":
                # the excerpt stops at the pool's label: the V0 profiler's own sum of the quoted terms
                assert value == pytest.approx(71.29 - 7.48 - 3.58 - 1.26, abs=1e-9)
            elif entry["id"] == "v0.19-llama-3.1-8b-pp2" and name in ("pool_gib", "activation_gib", "non_torch_gib"):
                # the last stage (the sampler's) binds; its profiling line is the file's last
                last = re.findall(r"Total non KV cache memory: ([\d.]+)GiB; torch peak memory increase: ([\d.]+)"
                                  r"GiB; non-torch forward increase memory: ([\d.]+)GiB",
                                  (DATA / entry["file"]).read_text())[-1]
                expected = {"pool_gib": round(79.19 * 0.95, 2) - float(last[0]), "activation_gib": float(last[1]),
                            "non_torch_gib": float(last[2])}[name]
                assert value == pytest.approx(expected, abs=0.006), (entry["id"], name)
            else:
                assert name in quoted, (entry["id"], name)
                assert value == pytest.approx(quoted[name], abs=1e-9), (entry["id"], name)


def test_the_split_alternates_in_the_order_found():
    # fixed before any prediction was compared: the constants of the vLLM memory rules come from the 'fit' half
    assert [e["split"] for e in LOGS] == ["fit" if i % 2 == 0 else "held-out" for i in range(len(LOGS))]
    assert len(LOGS) >= 15
    assert {e["kind"] for e in LOGS} >= {"dense", "moe"}
    assert {e["tp"] for e in LOGS} >= {1, 2, 4}


def test_the_quoted_settings_are_the_planned_ones():
    for entry in LOGS:
        text = (DATA / entry["file"]).read_text()
        m = re.search(r"Desired GPU memory utilization is \(([\d.]+)", text)
        if m:
            assert entry.get("gpu_memory_utilization", 0.9) == float(m.group(1)), entry["id"]
        m = re.search(r"'max_model_len': (\d+)", text)
        if m:
            assert entry["max_model_len"] == int(m.group(1)), entry["id"]
        m = re.search(r"'tensor_parallel_size': (\d+)", text)
        if m:
            assert entry["tp"] == int(m.group(1)), entry["id"]


@pytest.mark.parametrize("entry", LOGS, ids=IDS)
def test_each_component_and_the_pool(entry):
    logged = entry["logged"]
    b = _budget(entry)
    assert b.visible is not None and b.non_torch is not None and b.cuda_graphs is not None
    if "total_gib" in logged:
        # vLLM's total_gpu_memory: the logs print it to 0.01 GiB; 79.18-79.22 on H100 over releases
        assert b.visible.number() / GIB == pytest.approx(logged["total_gib"], abs=0.04)
    if "weights_gib" in logged:
        # the logged weights are the first (or only) stage's; pipeline stages are taken as equal
        assert b.weights.number() / GIB == pytest.approx(logged["weights_gib"], rel=0.025, abs=0.02)
    if "activation_gib" in logged:
        # the profile peak: within 12% (the MoE workspace and the dense forward transients are the loosest parts)
        assert b.activation.number() / GIB == pytest.approx(logged["activation_gib"], rel=0.12, abs=0.03)
    if "non_torch_gib" in logged:
        assert b.non_torch.number() / GIB == pytest.approx(logged["non_torch_gib"], abs=0.21)
        # never below the logged figure by more than the 0.01 GiB it is printed to, except the pipeline stage
        # that has no all-reduce (0.07 at PP2 against the TP1 figure kvplan keeps)
        assert b.non_torch.number() / GIB >= logged["non_torch_gib"] - 0.011
    # before v0.20 the graphs are captured after the pool is sized: nothing of them is in the budget
    assert b.cuda_graphs.number() == 0
    pool = logged["pool_gib"]
    error = (b.kv_pool_bytes / GIB - pool) / pool
    assert abs(error) <= 0.05, f"{entry['id']}: kvplan {b.kv_pool_bytes / GIB:.2f} GiB against {pool} GiB"


def test_the_cuda_graph_estimate_of_v0_20_covers_the_logged_estimates():
    # v0.19 prints the estimate it would subtract ("CUDA graph pool memory: A (actual), E (estimated)"); v0.20
    # subtracts it. kvplan's v0.20 row is an envelope read from the fit logs: it covers each of them, and no
    # held-out estimate exceeds it by more than 0.8 GiB (Llama-3.1-8B at TP2 prints 1.69 GiB for 0.76 captured).
    engine = for_release((0, 20, 0))
    for entry in LOGS:
        est = entry["logged"].get("cuda_graph_estimate_gib")
        if est is None:
            continue
        s = _scenario(entry)
        mine = engine.cuda_graph_memory(s.sized_model, Parallelism(tp=entry["tp"], pp=entry["pp"], dp=1)).number()
        if entry["split"] == "fit":
            assert mine / GIB >= est, entry["id"]
        else:
            assert mine / GIB >= est - 0.8, entry["id"]


def test_the_releases_differ_where_the_logs_do():
    # Qwen3-14B on one H100: activation 5.64 GiB at v0.15/v0.16 and 2.23 GiB at v0.17/v0.18 (the version sweep);
    # non-torch 0.13 GiB through v0.17, 0.25 from v0.18
    entry = next(e for e in LOGS if e["id"] == "v0.15-qwen3-14b-tp1")
    by_release = {}
    for release in ("0.16.0", "0.17.0", "0.18.0"):
        b = _budget({**entry, "release": release})
        by_release[release] = (b.activation.number() / GIB, b.non_torch.number() / GIB)
    assert by_release["0.16.0"][0] == pytest.approx(5.64, rel=0.03)
    assert by_release["0.17.0"][0] == pytest.approx(2.23, rel=0.03)
    assert by_release["0.17.0"][1] == pytest.approx(0.13, abs=0.01)
    assert by_release["0.18.0"][1] == pytest.approx(0.25, abs=0.03)


def test_a_quantized_dtype_keeps_the_embedding_and_lm_head_in_bf16():
    # RedHatAI Llama-3.3-70B FP8-dynamic at TP2 loads 33.88 GiB per GPU (v0.19 and v0.11 logs): params x 1 B would
    # be 70.55e9 / 2 / 2^30 = 32.85 GiB; the 2 x 128,256 x 8,192 embedding + LM head kept at 2 B add 0.98 GiB.
    entry = next(e for e in LOGS if e["id"] == "v0.19-llama-3.3-70b-fp8-tp2")
    assert _budget(entry).weights.number() / GIB == pytest.approx(32.85 + 0.98, abs=0.02)


def test_from_v0_20_the_graphs_are_in_the_budget():
    entry = next(e for e in LOGS if e["id"] == "v0.19-llama-3.1-8b-tp1")
    b19, b20 = _budget(entry), _budget({**entry, "release": "0.20.0"})
    assert b19.cuda_graphs.number() == 0
    # 0.30 + 0.02 x 32 layers = 0.94 GiB, against the 0.84 GiB v0.19 prints as its estimate for this deployment
    assert b20.cuda_graphs.number() / GIB == pytest.approx(0.94, abs=0.005)
    assert b19.kv_pool_bytes - b20.kv_pool_bytes == b20.cuda_graphs.number()


# --- never-seen logs ([[unseen_log]]): found after the rules were set, written down before kvplan was run on them ----
UNSEEN = fidelity.load_unseen_index(DATA)
UNSEEN_PATTERNS = {
    "total_gib": r"(?:total_gpu_memory=|Free memory on device \([\d.]+/)" + _NUM + " ?GiB",
    # V0 prints GiB (bytes / 2^30) labelled "GB"
    "weights_gib": r"(?:Loading model weights took " + _NUM + " GB|Model loading took " + _NUM
                   + ' GiB|"weight_memory_gib": ' + _NUM + ")",
    "consumed_gib": r"Actual usage is " + _NUM + r" GiB for consumed memory \(weights \+ non-torch\)",
    "activation_gib": _NUM + " GiB for peak activation",
    "cuda_graph_gib": _NUM + " GiB for CUDAGraph memory",
    "peak_torch_gib": r"peak_torch_memory=" + _NUM + "GiB",
    "non_torch_gib": r"non_torch_memory=" + _NUM + "GiB",
    # llm-d-planner's parser stores v0.19's estimate ("... GiB (estimated)") as cuda_graph_memory_gib
    "cuda_graph_estimate_gib": r'(?:Estimated CUDA graph memory: |"cuda_graph_memory_gib": )' + _NUM,
    "pool_gib": r'(?:kv_cache_size=|Available KV cache memory: |"kv_cache_memory_gib": )' + _NUM,
    "pool_tokens": r'(?:GPU KV cache size: |"kv_cache_tokens": )([\d,]+)',
}
# kvplan's error on each, measured before any change (benchmarks/pool_fidelity.py prints it): the misses of the
# issue-20 target (within 5%), each on the safe side, with the term that makes it.
UNSEEN_MISSES = {
    "v0.6.4-llama-3.1-8b-rtx3090-20k": "a release kvplan does not model (v0.6.4, before the v0.6.5 profiler): "
                                       "non-torch 0.35 GiB logged against the v0.6.5 profiler's 1.79",
    "v0.6.4-llama-3.1-8b-rtx3090-29k": "as the 20k run",
    "v0.21-qwen3-8b-rtx-a5000": "the CUDA-graph row: 0.30 + 0.02 x 36 = 1.02 GiB against the 0.52 GiB v0.21 "
                                "estimated with 51 + 35 capture sizes (256 sequences)",
}


def test_the_unseen_index_repeats_the_quoted_figures():
    assert len(UNSEEN) >= 3 and all(e["split"] == "never-seen" for e in UNSEEN)
    for entry in UNSEEN:
        body = (DATA / entry["file"]).read_text()
        for name, value in entry["logged"].items():
            m = re.search(UNSEEN_PATTERNS[name], body)
            assert m, (entry["id"], name)
            got = next(g for g in m.groups() if g is not None)
            assert value == pytest.approx(float(got.replace(",", "")), abs=1e-9), (entry["id"], name)
        m = (re.search(r"--gpu-memory-utilization=([\d.]+) is equivalent", body)
             or re.search(r"gpu_memory_utilization=([\d.]+)", body)
             or re.search(r'"gpu_memory_utilization": ([\d.]+)', body)
             or re.search(r"Desired GPU memory utilization is \(([\d.]+)", body))
        # a log run with vLLM's default utilization is planned without one: kvplan's default must be the logged one
        planned = entry.get("gpu_memory_utilization") or _budget(entry).fraction.value
        assert m and planned == float(m.group(1)), entry["id"]
        m = re.search(r"Maximum concurrency for ([\d,]+) tokens", body) or re.search(r'"max_model_len": (\d+)', body)
        assert m and entry["max_model_len"] == int(m.group(1).replace(",", "")), entry["id"]
        m = re.search(r'"tensor_parallel_size": (\d+)', body)
        assert m is None or entry["tp"] == int(m.group(1)), entry["id"]


@pytest.mark.parametrize("entry", [
    pytest.param(e, marks=pytest.mark.xfail(strict=True, reason=UNSEEN_MISSES[e["id"]])) if e["id"] in UNSEEN_MISSES
    else e for e in UNSEEN], ids=[e["id"] for e in UNSEEN])
def test_each_unseen_pool_within_the_target(entry):
    b = _budget(entry)
    assert abs(b.kv_pool_bytes / GIB - entry["logged"]["pool_gib"]) / entry["logged"]["pool_gib"] <= 0.05


@pytest.mark.parametrize("entry", UNSEEN, ids=[e["id"] for e in UNSEEN])
def test_each_unseen_pool_is_never_optimistic_by_more_than_five_percent(entry):
    b = _budget(entry)
    assert (b.kv_pool_bytes / GIB - entry["logged"]["pool_gib"]) / entry["logged"]["pool_gib"] <= 0.05


def test_the_unseen_v0_logs_by_component():
    # vllm-project/vllm#10517, Llama-3.1-8B on an RTX 3090 (V0, late 2024), kv = total x 0.9 - peak torch - non-torch:
    # 23.58 x 0.9 - 17.06 - 0.35 = 3.81 GiB and 23.58 x 0.9 - 17.98 - 0.35 = 2.89 GiB (the lines' own sums).
    rows = {e["id"]: (e, _budget(e)) for e in UNSEEN if e["id"].startswith("v0.6.4-")}
    for entry, b in rows.values():
        lg = entry["logged"]
        assert round(lg["total_gib"] * 0.9 - lg["peak_torch_gib"] - lg["non_torch_gib"], 2) == lg["pool_gib"]
        # the weights: 14.9888 GiB logged (8.03e9 bf16 parameters)
        assert b.weights.number() / GIB == pytest.approx(lg["weights_gib"], rel=0.01)
        # the profile run's peak above the weights, which V0 without chunked prefill grows with max_model_len:
        # 17.06 - 14.99 = 2.07 GiB at 20,000 tokens, 17.98 - 14.99 = 2.99 at 29,000; kvplan within 12%
        assert b.activation.number() / GIB == pytest.approx(lg["peak_torch_gib"] - lg["weights_gib"], rel=0.12)
        # the unknown GPU's driver reserve (0.70 GiB) hides more than this card did (24.00 - 23.58 = 0.42): safe side
        assert lg["total_gib"] - 0.3 < b.visible.number() / GIB < lg["total_gib"]
        # the v0.6.5 profiler's non-torch (1.79 GiB on H100, vllm#10511) against the older profiler's 0.35
        assert b.non_torch.number() / GIB > lg["non_torch_gib"] + 1.4
    (e20, b20), (e29, b29) = rows["v0.6.4-llama-3.1-8b-rtx3090-20k"], rows["v0.6.4-llama-3.1-8b-rtx3090-29k"]
    # 9,000 more profiled tokens: +0.92 GiB logged (17.98 - 17.06); kvplan's V0 rule within 12% of it
    growth = (b29.activation.number() - b20.activation.number()) / GIB
    assert growth == pytest.approx(e29["logged"]["peak_torch_gib"] - e20["logged"]["peak_torch_gib"], rel=0.12)


def test_the_unseen_v0_21_log_by_component():
    # LMCache/LMCache#3430, Qwen3-8B on an RTX A5000, vLLM 0.21.0: the estimate v0.21 subtracts is 0.52 GiB
    # (51 PIECEWISE + 35 FULL capture sizes at 256 sequences); kvplan's row, 0.30 + 0.02 x 36 layers = 1.02 GiB, is
    # above it by 0.50 GiB: most of the -13.6% (0.86 GiB) of this pool. The rest is the unknown GPU's driver
    # reserve: the log's own line, 0.52 GiB = (0.9764 - 0.9543) x total, puts total at 23.5 +- 0.3 GiB, against
    # kvplan's 23.99 - 0.70 = 23.29.
    entry = next(e for e in UNSEEN if e["id"] == "v0.21-qwen3-8b-rtx-a5000")
    b = _budget(entry)
    assert b.cuda_graphs.number() / GIB == pytest.approx(0.30 + 0.02 * 36, abs=0.005)
    assert b.cuda_graphs.number() / GIB - entry["logged"]["cuda_graph_estimate_gib"] == pytest.approx(0.50, abs=0.01)
    assert b.visible.number() / GIB == pytest.approx(23.99 - 0.70, abs=0.005)
    # the log's rounding: 0.515-0.525 GiB over 0.02205-0.02215 of the total = 23.25-23.81 GiB; kvplan's is inside
    assert 0.515 / 0.02215 < b.visible.number() / GIB < 0.525 / 0.02205
    # weights: Qwen3-8B's 8.19e9 bf16 parameters = 15.26 GiB (v0.19 on H100 logged 15.27 for the same checkpoint)
    assert b.weights.number() / GIB == pytest.approx(15.27, abs=0.02)
    # the profile run at the LLM class's 8,192 batched tokens (not the API server's 2,048): the dense MLP's forward,
    # 8192 x (3 x 12,288 + 2 x 4,096) x 2 B = 0.6875 GiB, above the sampler's 256 x 151,936 x 14.9 B + 2.5 B x 8192 x
    # 4096 = 0.62 GiB (kvplan's v0.17+ rule); at 2,048 tokens it would be the sampler's 0.56
    assert b.activation.number() / GIB == pytest.approx(8192 * (3 * 12288 + 2 * 4096) * 2 / GIB, abs=0.002)


def test_the_unseen_moe_tp4_runs_by_component():
    # llm-d-planner's first sweep (@cb666596), vLLM v0.19.0 on 4 x H100, 0.95, max_model_len 8192: three MoE models
    # at TP4, a layout none of the fit logs has for them. The logged token counts are 16-token blocks of one page:
    # Qwen3-30B-A3B (48 layers, 4 KV heads of 128: one a GPU) 2 x 128 x 2 B x 48 = 24,576 B a token, and
    # 2,454,064 = 153,379 blocks x 16; Mixtral-8x7B (32 layers, 8 KV heads of 128: two a GPU) 2 x 2 x 128 x 2 B x 32
    # = 32,768 B, 1,652,432 = 103,277 x 16; gpt-oss-20b (24 layers, 8 KV heads of 64: two a GPU; 12 sliding + 12 full
    # layers, two KV cache groups of 12) num_blocks = pool // (2 x 2 x 64 x 2 B x 16 x 12 = 98,304 B), then
    # num_blocks // 2 x 16: 5,817,056 = 363,566 x 16.
    page = {"v0.19-qwen3-30b-a3b-tp4": 24_576 * 16, "v0.19-mixtral-8x7b-tp4": 32_768 * 16,
            "v0.19-gpt-oss-20b-tp4": 98_304}
    blocks = {"v0.19-qwen3-30b-a3b-tp4": 153_379, "v0.19-mixtral-8x7b-tp4": 103_277, "v0.19-gpt-oss-20b-tp4": 727_132}
    # kvplan's pool, measured once, before any change: +0.23%, -0.28%, -0.40% (docs/pool-prediction.md). Qwen3-30B-A3B's
    # is the optimistic one (0.13 GiB, of which 0.05 are weights: 14.20 against 14.25 GiB loaded). Held here to 0.5%,
    # the largest of the three rounded up (tighter than the 5%: a drift past it is a change to explain)
    for entry in (e for e in UNSEEN if e["id"] in page):
        lg, s = entry["logged"], _scenario(entry)
        # the pool the log prints is rounded to 0.01 GiB: the logged blocks lie within it, on the page worked out above
        assert (lg["pool_gib"] - 0.005) * GIB / page[entry["id"]] <= blocks[entry["id"]]
        assert blocks[entry["id"]] <= (lg["pool_gib"] + 0.005) * GIB / page[entry["id"]]
        b = s.engine_adapter.budget(s, s.sized_model, s.parallelism)
        error = (b.kv_pool_bytes / GIB - lg["pool_gib"]) / lg["pool_gib"]
        assert abs(error) <= 0.005, entry["id"]
        # kvplan's token line from the pool it predicts: the pool's error again (one page, no rounding beyond a block)
        tokens = s.engine_adapter.report(s, s.sized_model, s.parallelism, b.kv_pool_bytes, None).data
        assert tokens["vllm_kv_cache_tokens"].number() == pytest.approx(lg["pool_tokens"] * (1 + error), rel=1e-4)
        # and from the logged pool: the logged tokens, within the 0.005 GiB the pool is rounded to
        exact = s.engine_adapter.report(s, s.sized_model, s.parallelism, int(lg["pool_gib"] * GIB), None).data
        slack = 0.005 / lg["pool_gib"]
        assert exact["vllm_kv_cache_tokens"].number() == pytest.approx(lg["pool_tokens"], rel=slack), entry["id"]
        if entry["id"] == "v0.19-gpt-oss-20b-tp4":
            # the MXFP4 experts' padded layout is priced at 768 x 0.8 MiB = 0.60 GiB a GPU whatever the TP: 3.20 +
            # 0.60 = 3.80 GiB against 3.63 loaded (the padding is 0.43 GiB at TP4): safe side, 0.17 GiB of the -0.40%
            assert b.weights.number() / GIB == pytest.approx(3_440_316_192 / GIB + 0.60, abs=0.005)
            assert b.weights.number() / GIB - lg["weights_gib"] == pytest.approx(0.17, abs=0.01)
        else:
            assert b.weights.number() / GIB == pytest.approx(lg["weights_gib"], rel=0.005), entry["id"]


def test_a_given_runtime_reserve_replaces_both_rows():
    entry = next(e for e in LOGS if e["id"] == "v0.19-llama-3.1-8b-tp1")
    s = _scenario(entry).with_(runtime_reserve_bytes=3 * GIB)
    b = s.engine_adapter.budget(s, s.sized_model, s.parallelism)
    assert b.runtime.number() == 3 * GIB and b.non_torch is None and b.cuda_graphs is None


@pytest.mark.parametrize("bits, kind, dtype", [(8, "float", "fp8"), (8, "int", "int8"), (4, "int", "int4")])
def test_a_compressed_tensors_checkpoint_is_priced_in_its_weight_dtype(tmp_path, bits, kind, dtype):
    # RedHatAI's FP8-dynamic, W8A8 and W4A16 checkpoints (the v0.19 logs' Qwen2.5-7B and Llama-3.1-8B variants) say
    # their weight width in quantization_config.config_groups.*.weights (llm-compressor's compressed-tensors)
    import json

    from kvplan.inputs.hf_import import load_hf_model

    config = json.loads((DATA / "models" / "Qwen--Qwen2.5-7B-Instruct" / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "compressed-tensors", "format": "float-quantized",
                                     "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                                         "num_bits": bits, "type": kind, "strategy": "channel"}}}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert load_hf_model(tmp_path).weight_dtype == dtype


# --- SGLang ----------------------------------------------------------------------------------------------------
# The [[sglang_log]] entries of the same index: published SGLang start-up logs, planned with what the user told SGLang
# (release, model, GPU, TP, a --mem-fraction-static only where the command line gives one).

SG_LOGS = fidelity.load_sglang_index(DATA)
SG_IDS = [e["id"] for e in SG_LOGS]
_SG_PATTERNS = {
    "pre_load_gib": r"Load weight begin\. avail mem=([\d.]+) GB",
    "fraction": r"(?:mem_fraction_static[= ]|found the value to be )([\d.]+)",
}


def _sg_quoted(entry: dict) -> dict[str, float]:
    body = "\n".join(line for line in (DATA / entry["file"]).read_text().splitlines() if not line.startswith("##"))
    found = {k: float(m.group(1)) for k, p in _SG_PATTERNS.items() if (m := re.search(p, body))}
    m = re.search(r"Load weight end\..*avail mem=([\d.]+) GB, mem usage=([\d.]+) GB", body)
    if m:   # the free memory before the weights = after + what they took
        found["pre_load_gib"] = round(float(m.group(1)) + float(m.group(2)), 2)
        found["weights_gib"] = float(m.group(2))
    elif "pre_load_gib" in found and (m := re.search(r"Load weight end\..*avail mem=([\d.]+) GB\s*$", body, re.M)):
        # older releases print no mem usage: what the weights took = free before - free after
        found["weights_gib"] = round(found["pre_load_gib"] - float(m.group(1)), 2)
    m = re.search(r"K size: ([\d.]+) GB, V size: ([\d.]+) GB", body)
    if m:
        found["pool_gib"] = round(float(m.group(1)) + float(m.group(2)), 2)
    m = re.search(r"KV Cache is allocated\. #tokens: \d+, KV size: ([\d.]+) GB", body)
    if m:   # the MLA pools print one size
        found["pool_gib"] = float(m.group(1))
    m = re.search(r"initial available_bytes \d+ / ([\d.]+) GB", body)
    if m:
        found["pool_gib"] = float(m.group(1))
    m = re.search(r"max_total_num_tokens=(\d+)", body)
    if m and "pool_gib" not in found and "cell_bytes" in entry:
        # releases that print no pool size: the token count x SGLang's cell (the index's cell_bytes, by hand)
        found["pool_gib"] = round(int(m.group(1)) * entry["cell_bytes"] / GIB, 2)
    return found


def test_the_sglang_index_repeats_the_quoted_figures():
    for entry in SG_LOGS:
        quoted = _sg_quoted(entry)
        for name, value in entry["logged"].items():
            assert value == pytest.approx(quoted[name], abs=1e-9), (entry["id"], name)


def test_the_sglang_split_alternates_in_the_order_found():
    assert [e["split"] for e in SG_LOGS] == ["fit" if i % 2 == 0 else "held-out" for i in range(len(SG_LOGS))]


@pytest.mark.parametrize("entry", SG_LOGS, ids=SG_IDS)
def test_each_sglang_component_and_the_pool(entry):
    logged, b = entry["logged"], fidelity.sglang_budget(entry)
    if "pre_load_gib" in logged:
        # the pre-load free memory: HBM - driver reserve - 0.79 GiB (TP1) or 2.65 GiB (TP >= 2; 0.79 + 0.13 above two
        # PCIe-only GPUs, without SGLang's custom all-reduce), never more than 0.4
        # GiB above the log (the held-out DeepSeek-R1 NVFP4 on 4 x B200, a v0.4.10-line build: 175.71 predicted,
        # 175.34 logged, +0.37; Qwen3-32B on 4 x B200 under v0.5.10 logs 176.28, 0.57 above the same prediction);
        # below it by up to 1.3 GiB where the card is inferred (the 48 GB one: the unknown GPU's
        # 0.70 GiB driver estimate) or the ranks are DP-attention ranks (4 x H200: 138.29 logged, 137.05 predicted)
        error = b.visible.number() / GIB - logged["pre_load_gib"]
        assert -1.3 <= error <= 0.4, (entry["id"], error)
    if "weights_gib" in logged:
        # gpt-oss-20b on B200: SGLang's MXFP4 MoE layout takes 14.53 GiB; the checkpoint is 12.82 and FlashInfer's
        # padding of its experts to 3,072 x 3,072 adds 1.30 (test_sglang_pads_mxfp4_experts_on_blackwell): 14.12, the
        # 0.41 GiB left unexplained; QwQ-32B at TP4
        # loads 15.54 GiB per rank against kvplan's quarter of the checkpoint, 15.13 (2.7% more, unexplained); the
        # rest within 1.5% (Llama-3.1-8B: 15.02 and 15.11 GiB logged for its 14.96 GiB checkpoint, SGLang's buffers)
        # Qwen3-30B-A3B under DP attention over 4: SGLang's load takes 16.39 GiB where the checkpoint, its LM head
        # split over the 4 ranks as models/qwen3_moe.py does, is 15.88 (0.51 GiB more, unexplained; before the split
        # was modelled kvplan counted 16.31 by replicating the LM head); DeepSeek-R1 NVFP4 at TP4 on B200: 94.50
        # logged, 94.27 with the bf16 attention, router, embedding and LM head (test_sglang_nvfp4_mla_keeps_bf16_parts;
        # 87.88, -7.0%, when every parameter was priced at 4.5 bits)
        # Since the sglpool20c session the weights carry what the load adds beyond the parameters (0.11 GiB at one
        # rank, 0.26 above, LOAD_OVERHEAD_GIB): QwQ-32B from its config.json, 32,763,876,352 x 2 / 4 B = 15.26 GiB +
        # 0.26 = 15.52 against 15.54; Qwen3-0.6B on an RTX 5080 (tied embedding, 596,049,920 x 2 B = 1.11 GiB + 0.11
        # = 1.22 against 1.25, 2.4% on a small figure)
        rel = {"sglang-gpt-oss-20b-b200-tp1": 0.03, "sglang-qwen3-0.6b-rtx5080-tp1": 0.03,
               "sglang-qwen3-30b-a3b-h200-dp4": 0.035}.get(entry["id"], 0.015)
        assert b.weights.number() / GIB == pytest.approx(logged["weights_gib"], rel=rel)
    if "fraction" in logged:
        # by release; Qwen3-32B on H100 (a June 2026 build, v0.5.13's rules: 13,440 MB + 58 prefill graphs x 8 MB =
        # 13,904 reserved, round((81,559 - 13,904) / 81,559, 3) = 0.830) prints 0.828: 0.002 apart (was 0.007
        # before the prefill graphs were counted)
        assert b.fraction.value == pytest.approx(logged["fraction"], abs=0.0025)
    if "pool_gib" in logged:
        error = (b.kv_pool_bytes / GIB - logged["pool_gib"]) / logged["pool_gib"]
        # within 5% on every log, never more than 5% optimistic. QwQ-32B on 4 x L4 was -8.3% (a pool of 2.84 GiB,
        # 13% of the card: the pre-load memory 0.76 GiB below the log weighed 0.65 GiB, the weights' 0.41 GiB above
        # kvplan's gave back 0.41) until the sglpool20c session read the driver reserve and context of an unmeasured
        # GPU on a PCIe-only host and the load's own memory from the 'fit' logs: (22.49 - 0.86) x 0.85 - 15.52 =
        # 2.87 GiB, +1.0%. DeepSeek-V3.2 under DP attention was -8.6% until the LM head, dense MLPs and shared
        # experts were split over the whole TP group as SGLang does
        # Mistral-7B on an unnamed 24 GB card (held-out) was -10.1% on the unknown host's safe side (0.70 + 0.79 GiB
        # hidden) until the preset could say its host ([node] os, test_sglang_pre_load_memory_by_host): -0.4% on Linux
        assert -0.05 <= error <= 0.05, (entry["id"], error)


def test_sglang_v0_5_23_default_fraction_by_hand():
    # MI355X (287.97 GiB = 294,881 MB), TP1: 512 + 16,384 x 1.5 + 1/8 x 1,024 + 512 x 2 = 26,240 MB reserved;
    # round((294,881 - 26,240) / 294,881, 3) = 0.911, the value PR #18263 prints
    from kvplan.engines.sglang import reserved_mb

    assert reserved_mb(294_881, 1, 1) == 26_240
    # H100 (81,559 MB), TP1: 512 + 8,192 x 1.5 + 128 + 256 x 2 = 13,440; TP8: 512 + 12,288 + 1,024 + 512 x 2 = 14,848
    assert reserved_mb(81_559, 1, 1) == 13_440
    assert reserved_mb(81_559, 8, 1) == 14_848
    # a 24 GB GPU: 512 + 4,096 x 1.5 + 128 + 48 x 2 = 6,880 (no 10 GB floor below 60 GB)
    assert reserved_mb(24 * 1024, 1, 1) == 6_880
    # B200 (183,357 MB), --tp 8 --dp 8 with DP attention: 512 + 16,384 x 1.5 + 1,024 + 512 x 2 + 512 x 8 x 3
    # + 512 x 8 x 1.5 = 45,568 (max_bs 512 > 300)
    assert reserved_mb(183_357, 8, 1, 8) == 45_568


def test_sglang_pool_is_pre_load_times_fraction_minus_weights():
    # Qwen3-235B-A22B-FP8 TP4 on H100 at 0.93: (79.65 - 0.46 - 2.65) x 0.93 - weights; the old rule (HBM x 0.93 -
    # weights - 1 GiB) gave 18.36 GiB against the logged 16.46 (+11.5%)
    entry = next(e for e in SG_LOGS if e["id"] == "sglang-qwen3-235b-a22b-fp8-tp4")
    b = fidelity.sglang_budget(entry)
    assert b.runtime.number() == 0
    assert b.kv_pool_bytes == int(b.visible.number() * 0.93) - b.weights.number()
    assert b.visible.number() / GIB == pytest.approx(79.65 - 0.46 - 2.65, abs=1e-6)


def test_sglang_pre_load_memory_without_custom_all_reduce_on_pcie():
    # QwQ-32B on 4 x L4 (PCIe only, 22.49 GiB): SGLang turns its custom all-reduce off above two PCIe-only GPUs, so
    # the set-up is the NCCL communicator alone, 0.13 GiB, on top of the unmeasured L4's driver reserve and context,
    # 0.73 GiB together on such a host (PCIE_HIDDEN_GIB): 22.49 - 0.73 - 0.13 = 21.63 GiB, the log's figure (0.70 +
    # 0.79 + 0.13 gave 20.87 before). At TP 2 on the same card the custom all-reduce runs: 22.49 - 0.70 - 2.65 =
    # 19.14; on 4 x H100 SXM (NVLink) 79.65 - 0.46 - 2.65 = 76.54
    entry = next(e for e in SG_LOGS if e["id"] == "sglang-qwq-32b-4xl4-tp4")
    assert fidelity.sglang_budget(entry).visible.number() / GIB == pytest.approx(21.63, abs=0.005)
    # the held-out 4 x RTX 4090 (23.99 GiB) under the same rule: 23.99 - 0.86 = 23.13 against the logged 23.08
    rtx = next(e for e in SG_LOGS if e["id"] == "sglang-qwen3-14b-4x4090-tp4")
    assert fidelity.sglang_budget(rtx).visible.number() / GIB == pytest.approx(23.13, abs=0.005)
    # one GPU of an unmeasured kind on a host the preset does not name keeps the larger reserve (the 24 GB log under
    # Docker Desktop on Windows hides 1.60 GiB): 47.99 - 0.70 - 0.79 = 46.50 on the 48 GB card
    one = next(e for e in SG_LOGS if e["id"] == "sglang-qwen3-14b-48gb-tp1")
    visible = fidelity.sglang_budget(one).visible
    assert visible.number() / GIB == pytest.approx(46.50, abs=0.005)
    # and the row says it is the safe side: 0.70 + 0.79 - 0.73 = 0.76 GiB more pre-load memory on a Linux host
    assert visible.why is not None and "up to 0.76 GiB more pre-load memory" in visible.why.formula
    assert "unmeasured GPU alone" not in (fidelity.sglang_budget(rtx).visible.why.formula or "")
    assert fidelity.sglang_budget(dict(entry, tp=2)).visible.number() / GIB == pytest.approx(19.14, abs=0.005)
    nvlink = dict(entry, gpu="h100-sxm", mem_fraction_static=0.9)
    assert fidelity.sglang_budget(nvlink).visible.number() / GIB == pytest.approx(76.54, abs=0.005)
    # 4 x H100 PCIe (no scale-up link in kvplan's preset; a measured driver reserve, 0.46): the measured reserve and
    # the context stay, 79.65 - 0.46 - 0.79 - 0.13 = 78.27; 4 x L40S (unmeasured, PCIe only): 44.99 - 0.86 = 44.13
    pcie = dict(entry, gpu="h100-pcie", mem_fraction_static=0.9)
    assert fidelity.sglang_budget(pcie).visible.number() / GIB == pytest.approx(78.27, abs=0.005)
    l40s = dict(entry, gpu="l40s", mem_fraction_static=0.9)
    assert fidelity.sglang_budget(l40s).visible.number() / GIB == pytest.approx(44.13, abs=0.005)


def test_sglang_pre_load_memory_by_host():
    # One GPU without a measured driver reserve, on a host its preset names ([node] os): driver reserve and CUDA
    # context together at that host's figure. Windows (Docker Desktop / WSL2): 1.60 GiB, the 'fit' 24 GB log's own
    # (23.99 - 22.39); Linux: 0.73, read on the PCIe-only Linux host of the 'fit' QwQ-32B log (22.49 - 21.63 - 0.13 of
    # NCCL, which one rank does not set up: SGLang builds PyNccl only for a group of two or more)
    windows = next(e for e in SG_LOGS if e["id"] == "sglang-llama-3.1-8b-24gb-tp1")
    b = fidelity.sglang_budget(windows)
    assert b.visible.number() / GIB == pytest.approx(23.99 - 1.60, abs=0.005)
    assert "Windows host" in b.visible.why.formula and "safe side" not in b.visible.why.formula
    # the held-out RTX 3090 under WSL2 logs 22.76 GiB free before its load: 0.37 above the Windows figure, so its pool,
    # (23.99 - 1.60) x 0.88 - (14.19 + 0.11) = 5.41 GiB, is 4.1% short of the logged 2.82 + 2.82 = 5.64 (the safe side)
    wsl = next(e for e in SG_LOGS if e["id"] == "sglang-r1-distill-qwen-7b-3090-tp1")
    assert fidelity.sglang_budget(wsl).kv_pool_bytes / GIB == pytest.approx(5.41, abs=0.005)
    # Mistral-7B (SGLang v0.4.0, issue #2468) on Linux: 23.99 - 0.73 = 23.26 GiB free before the load; the weights,
    # 7,241,732,096 params x 2 B = 13.49 GiB + 0.11 of what the load adds; pool 23.26 x 0.88 - 13.60 = 6.87 GiB
    # against the log's 56,524 tokens x 131,072 B = 6.90 GiB (-0.4%; -10.1% at the unknown host's 1.49 hidden)
    linux = next(e for e in SG_LOGS if e["id"] == "sglang-mistral-7b-24gb-tp1")
    b = fidelity.sglang_budget(linux)
    assert b.visible.number() / GIB == pytest.approx(23.26, abs=0.005)
    assert b.kv_pool_bytes / GIB == pytest.approx(6.87, abs=0.005)
    unknown = fidelity.sglang_budget(dict(linux, gpu="gpu-48gib"))   # no os in that preset: the safe side
    assert unknown.visible.number() / GIB == pytest.approx(47.99 - 1.49, abs=0.005)
    # a GPU with a measured driver reserve keeps it whatever the host (H100 SXM: 79.65 - 0.46 - 0.79 = 78.40)
    from dataclasses import replace

    from kvplan.inputs.presets import load_hardware

    h100 = load_hardware("h100-sxm")
    s = Scenario(model="llama-3.1-8b", hardware=replace(h100, node=replace(h100.node, os="windows")), tp=1,
                 engine="sglang==0.4.6", prompt=1000, decode=1000)
    visible = s.engine_adapter.budget(s, s.sized_model, s.parallelism).visible
    assert visible.number() / GIB == pytest.approx(78.40, abs=0.005)
    assert "([node] os = windows) is not used" in visible.why.formula   # said, not silently ignored
    # vLLM sizes its pool from the total memory x gpu_memory_utilization, whatever the host: 79.65 - 0.46 = 79.19
    v = Scenario(model="llama-3.1-8b", hardware=s.hardware, tp=1, engine="vllm==0.19.0", prompt=1000, decode=1000)
    vb = v.engine_adapter.budget(v, v.sized_model, v.parallelism).visible
    assert vb.number() / GIB == pytest.approx(79.19, abs=0.005) and "does not move it" in vb.why.substituted


def test_a_host_kvplan_does_not_know_is_refused():
    from dataclasses import replace

    from kvplan.inputs.presets import load_hardware

    h100 = load_hardware("h100-sxm")
    with pytest.raises(ValueError, match="node.os = 'macos' is not a host kvplan knows; write one of linux, windows"):
        replace(h100.node, os="macos")


def test_sglang_pads_mxfp4_experts_on_blackwell():
    # gpt-oss-20b (hidden 2,880, expert intermediate 2,880, 32 experts, 24 layers). One expert-layer as the
    # checkpoint holds it: w13 2 x 2,880 x 1,440 = 8,294,400 + scales 2 x 2,880 x 90 = 518,400 + bias 11,520; w2
    # 2,880 x 1,440 = 4,147,200 + scales 259,200 + bias 5,760: 13,236,480 B. Padded to 3,072 x 3,072 (FlashInfer on
    # SM100): 9,437,184 + 589,824 + 12,288 + 4,718,592 + 294,912 + 6,144 = 15,058,944 B: 1,822,464 more, x 32 x 24
    # = 1,399,652,352 B on one B200; none on H100 (triton_kernels pads to 32, which 2,880 is)
    from kvplan.engines.sglang import mxfp4_blackwell_padding, mxfp4_expert_bytes
    from kvplan.inputs.presets import load_model

    assert mxfp4_expert_bytes(2880, 2880) == 13_236_480
    assert mxfp4_expert_bytes(3072, 3072) == 15_058_944
    oss = load_model("gpt-oss-20b")
    assert mxfp4_blackwell_padding(oss, Parallelism(tp=1, pp=1, dp=1))[0] == 1_399_652_352
    # TP 2 without EP: each rank holds every expert's 1,440-wide half, padded to 1,536, hidden to 3,072:
    # (1,536 x 3,072 + 2 x 1,536 x 96 + 2 x 1,536 x 2 + 3,072 x 768 + 3,072 x 48 + 6,144 = 7,532,544) -
    # (1,440 x 2,880 + 2 x 1,440 x 90 + 2 x 1,440 x 2 + 2,880 x 720 + 2,880 x 45 + 5,760 = 6,621,120)
    # = 911,424 B x 32 x 24 = 699,973,632
    assert mxfp4_blackwell_padding(oss, Parallelism(tp=2, pp=1, dp=1))[0] == 699_973_632
    entry = next(e for e in SG_LOGS if e["id"] == "sglang-gpt-oss-20b-b200-tp1")
    load = int(0.11 * 2**30)   # what SGLang's load adds at one rank (test_sglang_weight_load_overhead)
    assert fidelity.sglang_budget(entry).weights.number() == 13_761_264_768 + 1_399_652_352 + load
    hopper = fidelity.sglang_budget(dict(entry, gpu="h200")).weights.number()
    assert hopper == 13_761_264_768 + load
    assert mxfp4_blackwell_padding(load_model("qwen3-30b-a3b"), Parallelism(tp=1, pp=1, dp=1))[0] == 0


def test_sglang_nvfp4_mla_keeps_bf16_parts():
    # DeepSeek-R1 (hidden 7,168, 128 heads, q_lora_rank 1,536, kv_lora_rank 512, rope 64, nope 128, v 128, vocab
    # 129,280, 61 layers, 58 MoE layers of 256 experts) as an NVFP4 ModelOpt checkpoint at TP4, 4.5 / 8 = 0.5625 B a
    # parameter in kvplan's base price. Per layer q_b 1,536 x 128 x 192 = 37,748,736 + kv_b 512 x 128 x 256 =
    # 16,777,216 + o_proj 128 x 128 x 7,168 = 117,440,512 -> 171,966,464 x 61 x (2 - 0.5625) / 4 = 3,769,827,328;
    # fused q/kv A 7,168 x 2,112 = 15,138,816 x 61 x (2 - 0.5625/4) = 1,717,072,896; routers 58 x 256 x 7,168 =
    # 106,430,464 x 1.859375 = 197,894,144; embedding + LM head 2 x 129,280 x 7,168 x 1.4375 / 4 = 666,050,560;
    # w_kc + w_vc 16,777,216 x 61 x 2 / 4 = 511,705,088: 6,862,550,016 B (6.39 GiB) above 671e9 x 0.5625 / 4
    from kvplan.engines.sglang import nvfp4_mla_bf16_bytes
    from kvplan.inputs.presets import load_model

    r1 = load_model("deepseek-r1")
    assert nvfp4_mla_bf16_bytes(r1, Parallelism(tp=4, pp=1, dp=1))[0] == 6_862_550_016
    # TP8: 171,966,464 x 61 x 1.4375 / 8 = 1,884,913,664 + 15,138,816 x 61 x (2 - 0.5625/8 = 1.9296875)
    # = 1,782,004,224 + 106,430,464 x 1.9296875 = 205,377,536 + 1,853,358,080 x 1.4375 / 8 = 333,025,280
    # + 16,777,216 x 61 x 2 / 8 = 255,852,544: 4,461,173,248
    assert nvfp4_mla_bf16_bytes(r1, Parallelism(tp=8, pp=1, dp=1))[0] == 4_461_173_248
    # DP attention over 8 (attention TP 1): everything whole but the LM head, split over the 8 ranks:
    # (10,489,954,304 + 923,467,776 + 106,430,464 + 926,679,040) x 1.4375 + 926,679,040 x 1.4375 / 8
    # + 16,777,216 x 61 x 2 = 17,891,889,152 + 166,512,640 + 2,046,820,352 = 20,105,222,144
    assert nvfp4_mla_bf16_bytes(r1, Parallelism(tp=1, pp=1, dp=8, ep=8))[0] == 20_105_222_144
    # a GQA model has no MLA projections to keep: nothing added
    assert nvfp4_mla_bf16_bytes(load_model("qwen3-30b-a3b"), Parallelism(tp=1, pp=1, dp=1))[0] == 0
    entry = next(e for e in SG_LOGS if e["id"] == "sglang-deepseek-r1-fp4-b200-tp4")
    b = fidelity.sglang_budget(entry)
    load = int(0.26 * 2**30)   # what SGLang's load adds above one rank (test_sglang_weight_load_overhead)
    assert b.weights.number() == int(671e9 * 0.5625 / 4) + 6_862_550_016 + load
    # only NVFP4: the same deployment as an FP8 checkpoint is priced at params x 1 B / TP alone
    assert fidelity.sglang_budget(dict(entry, weight_dtype="fp8")).weights.number() == int(671e9 / 4) + load


def test_sglang_v0_5_3_forces_0_8_for_deepseek_nsa():
    # server_args.py @v0.5.3: is_deepseek_nsa -> mem_fraction_static = 0.8, over a given value too; v0.5.4 has no
    # such line, so the reserve rule gives B200 (183,357 MB) --tp 8 --dp 8 with DP attention 45,568 MB reserved
    # (test_sglang_v0_5_23_default_fraction_by_hand): round(137,789 / 183,357, 3) = 0.751. DeepSeek-V3.1 (MLA
    # without DSA) keeps the reserve rule on v0.5.3
    entry = next(e for e in SG_LOGS if e["id"] == "sglang-deepseek-v3.2-exp-b200-dp8")
    assert fidelity.sglang_budget(dict(entry, release="0.5.3")).fraction.value == 0.8
    assert fidelity.sglang_budget(dict(entry, release="0.5.3", mem_fraction_static=0.7)).fraction.value == 0.8
    assert fidelity.sglang_budget(dict(entry, release="0.5.4")).fraction.value == 0.751
    assert fidelity.sglang_budget(dict(entry, release="0.5.3", model="deepseek-v3.1")).fraction.value == 0.751


def test_dp_attention_splits_the_lm_head_dense_mlps_and_shared_experts():
    # DeepSeek-V3.2-Exp: LM head 129,280 x 7,168 = 926,679,040; MoE layers 653.9e9 / (256 x 3 x 7,168 x 2,048) = 58,
    # so 61 - 58 = 3 dense MLPs of 3 x 7,168 x 18,432 = 1,189,085,184 in all; shared experts 58 x 3 x 7,168 x 2,048
    # = 2,554,331,136; total 4,670,095,360 (DeepEP keeps the shared experts whole: 2,115,764,224)
    from kvplan.engines.sglang import dp_attention_split_params
    from kvplan.inputs.presets import load_model

    v32 = load_model("deepseek-v3.2-exp")
    assert dp_attention_split_params(v32)[0] == 4_670_095_360
    assert dp_attention_split_params(v32, deepep=True)[0] == 2_115_764_224
    # kvplan's weights per GPU at --dp 8 --ep 8 (attention TP 1): 653.9e9 x 1 B / 8 + 17.1e9 x 1 B =
    # 98,837,500,000 B, less 4,670,095,360 x 1 B x (1 - 1/8) = 4,086,333,440: 94,751,166,560 B
    entry = next(e for e in SG_LOGS if e["id"] == "sglang-deepseek-v3.2-exp-b200-dp8")
    load = int(0.26 * 2**30)   # what SGLang's load adds above one rank (test_sglang_weight_load_overhead)
    assert fidelity.sglang_budget(entry).weights.number() == 94_751_166_560 + load
    # without DP attention (TP 8, EP 8) nothing changes: kvplan already splits every non-expert weight by TP 8
    tp8 = fidelity.sglang_budget(dict(entry, tp=8, dp=1)).weights.number()
    assert tp8 == round(653.9e9 / 8 + 17.1e9 / 8) + load


def test_deepep_low_latency_buffer_by_hand():
    # DeepEP v1.2.1 LowLatencyLayout, DeepSeek-V3 (hidden 7,168, 256 routed experts), 128 tokens per rank:
    # 56 scales; dispatch msg 16 + max(14,336, 7,168 + 224) = 14,352 B; combine msg 224 + 14,336 = 14,560 B;
    # send max(128 x 14,352, 256 x 128 x 14,560 = 477,102,080); receive 256 x 128 x 14,560 = 477,102,080;
    # signalling 256 x 4 = 1,024 B; 2 x (477,102,080 + 477,102,080 + 1,024) = 1,908,410,368, + 128 then floored
    # to 128 B: 1,908,410,496 B = 1.78 GiB, below SGLang's 2 GiB reserve for it
    from kvplan.engines.sglang import deepep_low_latency_bytes

    assert deepep_low_latency_bytes(7168, 256) == 1_908_410_496
    # Kimi-K2's 384 experts: 2 x (2 x 384 x 128 x 14,560 + 1,536) = 2,862,615,552, + 128: 2.67 GiB, above 2 GiB
    assert deepep_low_latency_bytes(7168, 384) == 2_862_615_680
    # a small model where the dispatch send buffer is not the larger: hidden 2,048, 1 expert, 128 tokens:
    # dispatch 16 + 4,096 = 4,112; combine 64 + 4,096 = 4,160; send max(526,336, 532,480) = 532,480;
    # receive 1 x 128 x 4,160 = 532,480; signalling 4 -> 128; 2 x 1,065,088 = 2,130,176, + 128 -> 2,130,304
    assert deepep_low_latency_bytes(2048, 1) == 2_130_304
    # hidden 256 (2 scales): dispatch 16 + max(512, 256 + 8) = 528 wins the send buffer at 1 expert over combine
    # 8 + 512 = 520: send 128 x 528 = 67,584; receive 128 x 528 = 67,584; 2 x (135,168 + 128) + 128 = 270,720
    assert deepep_low_latency_bytes(256, 1) == 270_720


def test_deepep_row_against_sglang_reserve_by_release():
    from kvplan.engines.sglang import deepep_buffer
    from kvplan.inputs.presets import load_model

    v3 = load_model("deepseek-v3.1")
    row = deepep_buffer(v3, (0, 5, 23))
    assert row is not None and row.number() == 1_908_410_496
    assert "covered by SGLang's 2 GiB reserve" in row.why.substituted
    assert "more than SGLang's 0 GiB" in deepep_buffer(v3, (0, 5, 14)).why.substituted
    assert "more than SGLang's 2 GiB" in deepep_buffer(load_model("kimi-k2"), (0, 5, 23)).why.substituted
    assert deepep_buffer(load_model("llama-3.1-8b")) is None


def test_sglang_report_shows_the_deepep_row_under_expert_parallelism():
    # DeepSeek-V3.2-Exp (hidden 7,168, 256 experts) with --ep 8 on SGLang v0.5.3: 1,908,410,496 B (hand arithmetic in
    # test_deepep_low_latency_buffer_by_hand), and v0.5.3 reserves nothing for it (2 GiB from v0.5.15): a note
    entry = next(e for e in SG_LOGS if e["id"] == "sglang-deepseek-v3.2-exp-b200-dp8")
    s = fidelity.sglang_scenario(entry)
    b = s.engine_adapter.budget(s, s.sized_model, s.parallelism)
    rep = s.engine_adapter.report(s, s.sized_model, s.parallelism, b.kv_pool_bytes, None)
    assert rep.data["sglang_deepep_buffer_bytes"].number() == 1_908_410_496
    assert any("DeepEP's buffer exceeds" in n for n in rep.notes)
    # TP only (no EP): no row
    tp_only = next(e for e in SG_LOGS if e["id"] == "sglang-qwen3-235b-a22b-fp8-tp4")
    s2 = fidelity.sglang_scenario(tp_only)
    b2 = s2.engine_adapter.budget(s2, s2.sized_model, s2.parallelism)
    rep2 = s2.engine_adapter.report(s2, s2.sized_model, s2.parallelism, b2.kv_pool_bytes, None)
    assert "sglang_deepep_buffer_bytes" not in rep2.data


def test_sglang_small_gpu_bucket_by_release():
    # a 24 GB GPU (24,576 MB), TP1, read in the wheels (SMALL_GPU_BUCKETS): v0.5.3-v0.5.4 512 + 2,048 x 1.5 + 128
    # + 16 x 2 = 3,744 MB; v0.5.5-v0.5.19 max_bs 24: 3,760; v0.5.20+ 4,096 x 1.5 and 48: 6,880. TP4 on v0.5.10:
    # 512 + 3,072 + 512 + 80 x 2 = 4,256 MB
    from kvplan.engines.sglang import chunked_prefill_mb, reserved_mb

    assert reserved_mb(24 * 1024, 1, 1, version=(0, 5, 3)) == 3_744
    assert reserved_mb(24 * 1024, 1, 1, version=(0, 5, 4)) == 3_744
    assert reserved_mb(24 * 1024, 1, 1, version=(0, 5, 5)) == 3_760
    assert reserved_mb(24 * 1024, 1, 1, version=(0, 5, 19)) == 3_760
    assert reserved_mb(24 * 1024, 1, 1, version=(0, 5, 20)) == 6_880
    assert reserved_mb(24 * 1024, 4, 1, version=(0, 5, 10)) == 4_256
    assert chunked_prefill_mb(24 * 1024, (0, 5, 19)) == 2048
    assert chunked_prefill_mb(24 * 1024, (0, 5, 20)) == 4096
    # the other buckets do not move: H100 TP1 on v0.5.3 as on v0.5.23 (13,440 MB)
    assert reserved_mb(81_559, 1, 1, version=(0, 5, 3)) == 13_440


def test_sglang_default_fraction_on_a_24_gib_card_by_release(tmp_path):
    # Llama-3.1-8B, TP1, on a 24 GiB card (24,576 MB): v0.5.8 (no prefill graphs, 20-35 GB bucket 2,048 / 24):
    # 512 + 3,072 + 128 + 48 = 3,760 MB -> round(20,816 / 24,576, 3) = 0.847. v0.5.19 adds breakable prefill graphs
    # over its 2,048-token chunk: 4..32 by 4 (8) + 48..256 by 16 (14) + 288..512 by 32 (8) + 576..1,024 by 64 (8)
    # + 1,280..2,048 by 256 (4) = 42 sizes x 8 MB = 336 -> 4,096 MB -> 0.833. v0.5.20's 4,096 chunk adds 1,280..4,096
    # (12 instead of 4: 50 sizes, 400 MB) and max_bs 48: 512 + 6,144 + 128 + 96 + 400 = 7,280 -> 0.704
    from kvplan.scenario import Scenario

    src = (DATA / "presets" / "gpu-48gib.toml").read_text()
    (tmp_path / "gpu-24gib.toml").write_text(src.replace('id = "gpu-48gib"', 'id = "gpu-24gib"').replace(
        "value = 47.99,", "value = 24.0,"))

    def frac(release):
        s = Scenario(model="llama-3.1-8b", hardware="gpu-24gib", tp=1, pp=1, dp=1, nodes=1,
                     engine=f"sglang=={release}", prompt=1000, decode=1000, presets_dir=tmp_path)
        return s.engine_adapter.memory_fraction(s, s.parallelism).value

    assert frac("0.5.8") == 0.847
    assert frac("0.5.19") == 0.833
    assert frac("0.5.20") == 0.704


def test_sglang_weight_load_overhead():
    # SGLang's "Load weight end ... mem usage" less the checkpoint's bytes per rank, on the 'fit' logs: one rank
    # Llama-3.1-8B 15.02 - 14.96 = 0.06 (24 GB), 15.09 - 14.96 = 0.13 (H100 docs run), Qwen3-0.6B 1.25 - 1.11 = 0.14
    # (RTX 5080): mean 0.11 GiB; four ranks QwQ-32B 15.54 - 15.26 = 0.29 (L4), Qwen3-32B 15.50 - 15.27 = 0.23 (B200):
    # mean 0.26 GiB. Llama-3.1-8B's preset 8.03e9 parameters x 2 B = 16,060,000,000 B, + int(0.11 x 2^30) =
    # 118,111,600: 16,178,111,600
    from kvplan.engines.sglang import LOAD_OVERHEAD_GIB

    assert LOAD_OVERHEAD_GIB == (0.11, 0.26)
    entry = next(e for e in SG_LOGS if e["id"] == "sglang-llama-3.1-8b-h100-docs-tp1")
    b = fidelity.sglang_budget(entry)
    assert b.weights.number() == 16_060_000_000 + 118_111_600
    # the pool takes it off: (79.65 - 0.46 - 0.79) x 0.88 - 15.068 GiB = 53.92 GiB against the logged 54.26 (-0.6%)
    assert b.kv_pool_bytes / GIB == pytest.approx(53.92, abs=0.005)
    # above one rank: QwQ-32B's 32,763,876,352 x 2 B / 4 + int(0.26 x 2^30)
    four = next(e for e in SG_LOGS if e["id"] == "sglang-qwq-32b-4xl4-tp4")
    assert fidelity.sglang_budget(four).weights.number() == 32_763_876_352 * 2 // 4 + int(0.26 * 2**30)


def test_vllm_gdn_hybrid_graph_estimate_is_flagged_from_v0_26():
    # vllm-project/vllm#50780: from v0.26.0 a Gated DeltaNet hybrid's CUDA-graph estimate also charges a profiling
    # transient that grows with max_num_batched_tokens (4.2 GiB against 0.56 in v0.23 for the same graphs); kvplan's
    # 0.30 + 0.02 GiB a layer leaves it out, so the report warns that the pool may be optimistic. Qwen3-Next is a GDN
    # hybrid, Qwen3-32B is not; v0.25 predates the change; a given pool or runtime reserve needs no warning.
    def warned(model: str, engine: str, **extra) -> bool:
        s = Scenario(model=model, hardware="h100-sxm", tp=4, engine=engine, prompt=1000, decode=1000, **extra)
        b = s.engine_adapter.budget(s, s.sized_model, s.parallelism)
        rep = s.engine_adapter.report(s, s.sized_model, s.parallelism, b.kv_pool_bytes, None)
        return any("vllm-project/vllm/issues/50780" in w for w in rep.warnings)

    assert warned("qwen3-next-80b-a3b", "vllm==0.26.0")
    assert warned("qwen3-next-80b-a3b", "vllm==0.33.0")
    assert not warned("qwen3-next-80b-a3b", "vllm==0.25.0")
    assert not warned("qwen3-32b", "vllm==0.26.0")
    assert not warned("qwen3-next-80b-a3b", "vllm==0.26.0", kv_pool="40GiB")
    assert not warned("qwen3-next-80b-a3b", "vllm==0.26.0", runtime_reserve="2GiB")
