"""pd's fractional-split ratio (``fluid_over_colocated``) says what it divides: a capacity (the split in fractions of
an instance, no prefill queue) by colocated goodput. Held by a TTFT target, the split serves far less than that
capacity, so the bare "(19.76x colocated)" it used to print beside a split that serves 0.21x colocated misled."""

from __future__ import annotations

import pytest


def pd_json(run_cli, *args):
    r = run_cli("pd", *args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


def test_a_ttft_held_split_names_the_fractional_ratio_a_capacitys(run_cli):
    # RAG on DeepSeek-R1, 16 x H200 (2 nodes), 32,000 + 500 tokens, TTFT p99 <= 2 s. The split is 1 x TP8 prefill +
    # 1 x TP1 DP8 EP8 decode; its one prefill instance takes a 32,000-token prompt at a time (k = 1).
    d = pd_json(run_cli, "--model", "deepseek-r1", "--hardware", "h200", "--nodes", "2", "--prompt", "32000",
                "--decode", "500", "--ttft-slo", "2s")
    assert d["disaggregated_limited_by"] == "TTFT p99" and d["prefill_instances"] == 1
    assert d["prefill_prompts_per_pass"] == 1 and d["decode_attention_dp"] == 8
    t_pf, tpot, b = d["prefill_seconds_per_prompt_packed"], d["tpot_seconds_decode"], d["decode_batch"]
    # by hand from the split's own step figures (T_pf 1.328 s, TPOT 42.65 ms at B = 14): capacity
    # min(1 / 1.328, 8 x 14 / (500 x 0.04265)) = min(0.753, 5.25) = 0.753 requests/s (the prefill instance);
    # fractional split 16 / (8 x 1.328 + 1 x 500 x 0.04265 / 14) = 16 / (10.62 + 1.52) = 1.317 requests/s
    assert d["disaggregated_capacity_requests_per_second"] == pytest.approx(min(1 / t_pf, 8 * b / (500 * tpot)))
    assert d["fluid_requests_per_second"] == pytest.approx(16 / (8 * t_pf + 500 * tpot / b))
    assert d["disaggregated_capacity_requests_per_second"] == pytest.approx(0.753, rel=0.02)
    # the TTFT target: p99 <= 2 s leaves the queue 2 - 1.33 = 0.67 s of p99 wait, which one instance busy 1.33 s a
    # prompt holds to a small share of its 0.753 requests/s
    assert d["ttft_seconds_disaggregated"] + d["prefill_wait_seconds_p99"] <= 2.0 + 1e-9
    assert d["disaggregated_requests_per_second"] < 0.1 * d["disaggregated_capacity_requests_per_second"]
    col = d["colocated_requests_per_second"]
    fluid_x, goodput_x = d["fluid_over_colocated"], d["disaggregated_over_colocated"]
    assert fluid_x == pytest.approx(d["fluid_requests_per_second"] / col)
    assert goodput_x == pytest.approx(d["disaggregated_requests_per_second"] / col)
    assert fluid_x > 1.05 > goodput_x   # the capacity beats colocated, the goodput does not: not comparable
    line = d["decided_by"][1]
    assert f"({fluid_x:.2f}x colocated)" not in line    # the old wording: a capacity read as a goodput margin
    assert f"(a capacity, no TTFT queue: {fluid_x:.2f}x colocated goodput; {goodput_x:.2f}x under TTFT p99)" in line
    # whole instances do not decide it: the integer split's capacity alone is 0.753 / colocated, far above the 1.05x
    # bar; the TTFT target does
    assert d["disaggregated_capacity_requests_per_second"] / col > 1.05
    assert not any(r.startswith("Whole instances") for r in d["reasons"])
