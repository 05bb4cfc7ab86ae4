"""`kvplan pd` as a new user meets it (issue 21's audit): a verdict that changes more than once over the prompt says
why on the first screen, with the price that decides it worked by hand."""

import re

import pytest

CASE = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-dtype", "fp8", "--prompt", "4000", "--decode", "300")


def _pd(run_cli, *args):
    r = run_cli("pd", *CASE, *args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


def _flips(d):
    rows = sorted((x for x in d["by_ratio"] if x["fits"]), key=lambda x: x["prompt_tokens"])
    wins = [x["disaggregation_wins"] for x in rows]
    return [rows[i + 1]["prompt_tokens"] for i in range(len(rows) - 1) if wins[i] != wins[i + 1]], rows


def test_neutral_short_prompts_colocate_and_no_flip_note(run_cli):
    # issue 21's case (Llama-3.1-8B / H100 / TP1 / fp8, 300 output tokens) on the neutral engine: the prompts waiting
    # at a step share a prefill pass (tests/test_prefill_packing.py works the 150-token row's 0.95x by hand), so the
    # table colocates from 3 up to 6,000 tokens and disaggregates at 15,000: one change, no note. The rows under 60
    # tokens colocate too since the service witness takes the running batch's growth off its shortfall (the ramp of
    # pd's 1,500-request runs, tests/test_simulate_overload.py::test_a_ramp_whose_batch_fills_is_not_overload)
    d = _pd(run_cli)
    at, rows = _flips(d)
    assert at == [15000]
    assert not any(x["disaggregation_wins"] for x in rows if x["prompt_tokens"] <= 6000)
    assert any("the prompts waiting at a step share one pass up to the token budget" in x for x in d["assumptions"])
    assert not any(x.startswith("The verdict changes") for x in d["first_screen_notes"] + d["reasons"])


def test_the_flip_note_prices_a_prompts_own_pass_against_the_prefill_roles_packed_one():
    # where a table's shortest prompts disaggregate on an engine whose colocated prompts are passes of their own (no
    # case of this file does any more; the rows are given), the note under the verdict names where it changes and
    # why in numbers, the colocated prefill as pd prices it: tests/test_prefill_packing.py works the 150-token row by
    # hand, B = 1,024 (max_num_seqs), D = 300, so B / D = 3.41 prompts share a pass: passes of 3 (10.71 ms) and 4
    # (13.97 ms) in shares 0.59 : 0.41, 12.03 ms a pass, 3.53 ms a prompt (a prompt alone, the 6.44 ms weight read
    # and overhead, is no longer what the colocated side pays)
    from kvplan.calc import pd
    from kvplan.options.command import pd_options
    from kvplan.options.scenarios import build_scenario
    from kvplan.render.output import note_text

    s = build_scenario(model="llama-3.1-8b", hardware="h100-sxm", tp="1", kv_dtype="fp8", prompt="4000",
                       decode="300")
    wins = {3: 1.4, 15: 1.3, 60: 1.2, 150: 1.1, 300: 0.95, 600: 0.9, 1500: 0.93, 6000: 1.04, 15000: 1.3}
    rows = [pd.RatioRow(p, p / 300, 100.0, 100.0 * m, 1, m > 1.05, True, "2 TP1 : 6 TP1", "8 TP1", m)
            for p, m in wins.items()]
    text = note_text(pd._flips(rows, pd._Model(s, pd_options())))
    assert text.startswith("The verdict changes 2 times as the prompt grows (at 300 (8 TP1 colocated, 2 TP1 : 6 TP1 "
                           "split), 15,000 (8 TP1 colocated, 2 TP1 : 6 TP1 split))")
    assert "at 150 tokens and under the split wins" in text
    shared = float(re.search(r"the ([0-9.]+) prompts waiting at a step", text).group(1))
    assert shared == pytest.approx(1024 / 300, abs=0.01)
    colocated = float(re.search(r"sharing one, ([0-9.]+) ms a prompt on TP1", text).group(1))
    assert colocated == pytest.approx(3.53, abs=0.01)
    assert "6.44" not in text and "of its own" not in text.split("split wins")[1]
    # the prefill role packs max_num_batched_tokens // P = 8,192 // 150 = 54 prompts into a pass (8,100 tokens):
    # compute-bound, 2 x 7.50e9 x 8,100 / (989e12 x 0.70) = 175.5 ms + 0.93 ms overhead (attention: 4 x 32 x 4,096
    # x 150^2 / 2 x 54 = 0.32 TFLOP, 0.46 ms), 176.9 ms / 54 = 3.28 ms a prompt
    k = int(re.search(r"packs (\d+) into one pass", text).group(1))
    assert k == 8192 // 150
    packed = float(re.search(r"pass at ([0-9.]+) ms each", text).group(1))
    assert packed == pytest.approx((2 * 7.50e9 * 8100 / (989e12 * 0.70) + 0.93e-3 + 0.46e-3) / 54 * 1e3, rel=0.02)
    assert "--engine vllm mixes prefill chunks" in text
    # the margins' largest distance from the 1.05x bar among the flipping rows (300 at 0.95, 15,000 at 1.3):
    # |1.3 / 1.05 - 1| = 23.8% over |0.95 / 1.05 - 1| = 9.5%
    assert "within 24% of the 1.05x bar" in text


def test_vllm_mixes_its_chunks_and_its_verdict_changes_once(run_cli):
    # the same case on vLLM (V1: a prompt's chunk rides in a decode step, costing what its tokens add): colocated
    # from the shortest prompts up to 6,000, disaggregated from 15,000 (one change), so no note, and no engine cause
    d = _pd(run_cli, "--engine", "vllm")
    at, rows = _flips(d)
    assert at == [15000]
    assert not any("The verdict changes" in x for x in d["first_screen_notes"] + d["reasons"])
    # and prefill is ~65% of a colocated replica's time there, far over 4.76%: no decode-dominant note
    assert d["prefill_share"] > 0.5
    assert not any(x.startswith("Decode-dominant") for x in d["first_screen_notes"])
    assert any("Colocated prefills run in chunks of max_num_batched_tokens inside decode steps" in x
               for x in d["assumptions"])


def test_a_decode_dominant_verdict_gives_the_workload_documents_reasoning_in_numbers(run_cli):
    # the workload document's reasoning case (1K prompt, 30K decode) on Llama-3.1-8B / H100: do not disaggregate, and
    # the first screen says why: prefill is T_pf / (T_pf + D x TPOT(B) / B) of a colocated replica's time (the
    # plan's own figures put in the documented formula), under 1 - 1 / 1.05 = 4.76%, the most a split could free
    r = run_cli("pd", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-dtype", "fp8", "--prompt", "1000",
                "--decode", "30000", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["recommend_disaggregation"] is False
    t_pf, plain, b = d["prefill_seconds"], d["tpot_seconds_plain"], d["colocated_batch"]
    share = t_pf / (t_pf + 30000 * plain / b)
    assert d["prefill_share"] == pytest.approx(share) and share < 1 - 1 / 1.05
    text = next(x for x in d["first_screen_notes"] if x.startswith("Decode-dominant"))
    assert f"decode {30000 * plain / b / t_pf:,.1f}x a request's prefill GPU time" in text
    assert f"prefill {share:.1%} of a replica's (a split must free 4.8%)" in text
    assert f"split prefill idle {d['idle_share']:.1%}" in text

