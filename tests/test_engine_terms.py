"""The engine's own terms of the cost model explain themselves: ``kvplan tpot --explain`` (and its JSON and table)
shows each term an engine adapter puts into the step or the request, with its number, formula and source, and the
number shown is the one the step was priced with (``costs.EngineTerm``: a factor the term replaces IS its value).

The figures, worked out from their sources, not from kvplan's output:
- vLLM's in-graph decode all-reduce: 6.45 us + 7.94 us per MiB over vllm-project/vllm#24532's ca_1stage column (the
  least-squares line kvplan.engines.vllm.DECODE_ALLREDUCE cites), i.e. a 0.44 share of NVLink 4 at TP 4; kvplan's
  generic pair it replaces is 9.3 us and 0.114.
- vLLM on ROCm gfx942 decoding MLA on Triton kernels: 448 us per MLA layer (ROCM_TRITON_MLA_US, fitted on the one
  published step, sgl-project/sglang PR #3237); DeepSeek-R1's 61 layers are all MLA, so 15 + 448 x 61 / 61 = 463 us.
- SGLang's shared expert inside the fused MoE kernel on Hopper: DeepSeek-R1 has 61 layers, the first 3 dense
  (first_k_dense_replace = 3 in its config.json), so 58 MoE layers lose their shared expert's gate_up and down
  GEMMs: 2 x 58 = 116 GEMMs.
- The frontend latency per request: vLLM 1 ms, SGLang 18 ms (the engines' FRONTEND_LATENCY_S, cited there).
"""

from __future__ import annotations

import pytest

from kvplan.calc import costs
from kvplan.scenario import Scenario


def tpot_json(run_cli, *args: str) -> dict:
    r = run_cli("tpot", *args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


def test_vllm_decode_allreduce_is_the_factor_the_step_used(run_cli):
    d = tpot_json(run_cli, "-m", "qwen3-32b", "-g", "h200", "--engine", "vllm")
    terms = d["engine_terms"]
    assert terms["decode_allreduce_latency_us"] == pytest.approx(6.45)
    assert terms["decode_allreduce_link"] == pytest.approx(0.44)
    # the factors shown are the ones priced: before, the table said the generic 9.3 us and 0.114
    assert d["factors"]["allreduce_latency_us"] == pytest.approx(6.45)
    assert d["factors"]["allreduce_link"] == pytest.approx(0.44)
    why = d["derivations"]["engine_terms.decode_allreduce_latency_us"]
    assert "in-graph decode all-reduce" in why["formula"] and why["substituted"] == "6.45 (generic 9.3)"
    assert any("vllm-project/vllm#24532" in src for src in why["sources"])
    assert terms["frontend_latency_seconds"] == pytest.approx(0.001)


def test_the_step_is_priced_with_the_terms_value():
    # the same object: a decode step's two TP all-reduces per layer pay 2 x 6.45 us of latency on vLLM
    s = Scenario(model="qwen3-32b", hardware="h200", engine="vllm", tp=8)
    step = costs.step_model(s)
    term = next(t for t in step.engine_terms if t.key == "decode_allreduce_latency_us")
    assert step.factors.allreduce_latency_us is term.value and term.factor == "allreduce_latency_us"
    assert step.comm_per_layer[0] == pytest.approx(2 * 6.45e-6)
    # applying the engine's terms again changes nothing (pd and --speculative pass factors back in)
    assert costs.engine_factors(step.factors, s) is step.factors


def test_rocm_vllm_triton_mla_term(run_cli):
    d = tpot_json(run_cli, "-m", "deepseek-r1", "-g", "mi300x", "--engine", "vllm==0.11")
    assert d["engine_terms"]["decode_kernel_us_per_mla_layer"] == pytest.approx(448)
    assert d["factors"]["overhead_us_per_layer"] == pytest.approx(15 + 448)   # every one of the 61 layers is MLA
    why = d["derivations"]["engine_terms.decode_kernel_us_per_mla_layer"]
    assert why["substituted"] == "448 us x 61 MLA layers of 61"
    assert any("PR #12662" in src for src in why["sources"])
    # mi300x's preset gives its own all-reduce figures, so vLLM's benchmark does not replace them
    assert "decode_allreduce_latency_us" not in d["engine_terms"]


def test_sglang_fused_shared_expert_term(run_cli):
    d = tpot_json(run_cli, "-m", "deepseek-r1", "-g", "h200", "--engine", "sglang")
    assert d["engine_terms"]["fused_shared_expert_gemms_saved"] == 2 * 58
    assert d["engine_terms"]["frontend_latency_seconds"] == pytest.approx(0.018)
    why = d["derivations"]["engine_terms.fused_shared_expert_gemms_saved"]
    assert any("deepseek_v2.py" in src for src in why["sources"])
    # a dense model on SGLang has the frontend latency alone
    dense = tpot_json(run_cli, "-m", "qwen3-32b", "-g", "h200", "--engine", "sglang")
    assert set(dense["engine_terms"]) == {"frontend_latency_seconds"}


def test_the_table_and_explain_show_each_term_with_its_number(run_cli):
    r = run_cli("tpot", "-m", "qwen3-32b", "-g", "h200", "--engine", "vllm", "--explain")
    assert r.code == 0, r.err
    table = r.out[r.out.index("The engine's terms (vllm)"):]
    assert "decode all-reduce latency, us" in table and "6.45" in table and "1.00 ms" in table
    assert "allreduce_latency_us (vllm)" in r.out   # the factor row the term replaced says whose it is
    explain = r.out[r.out.index("How each figure was derived"):]
    assert "engine_terms.decode_allreduce_latency_us = 6.45" in explain
    assert "numbers: 6.45 (generic 9.3)" in explain
    rocm = run_cli("tpot", "-m", "deepseek-r1", "-g", "mi300x", "--engine", "vllm==0.11", "--explain")
    assert "decode kernels, us per MLA" in rocm.out   # the label wraps at 80 columns
    assert "engine_terms.decode_kernel_us_per_mla_layer = 448" in rocm.out
    sglang = run_cli("tpot", "-m", "deepseek-r1", "-g", "h200", "--engine", "sglang", "--explain")
    assert "The engine's terms (sglang)" in sglang.out and "shared-expert GEMMs fused away" in sglang.out
    assert "engine_terms.fused_shared_expert_gemms_saved = 116" in sglang.out
    assert "engine_terms.frontend_latency_seconds = 18.00 ms" in sglang.out


def test_neutral_has_no_engine_terms(run_cli):
    r = run_cli("tpot", "-m", "qwen3-32b", "-g", "h200", "--engine", "neutral")
    assert r.code == 0, r.err
    assert "The engine's terms" not in r.out
    assert tpot_json(run_cli, "-m", "qwen3-32b", "-g", "h200", "--engine", "neutral")["engine_terms"] == {}
