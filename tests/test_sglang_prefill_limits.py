"""SGLang's ``--chunked-prefill-size`` and ``--max-prefill-tokens`` in ``kvplan simulate --engine sglang``: the
scheduler hands both to every prefill round (``PrefillAdder``'s ``rem_chunk_tokens`` and ``rem_input_tokens``,
sgl-project/sglang @v0.5.23 ``managers/scheduler.py``, ``managers/schedule_policy.py``), the memory reserve takes a
given chunk (``arg_groups/memory_hook.py``), and the independent reference (``tests/sim_reference_sglang.py``)
follows the same options."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import sim_reference_sglang as ref  # tests/ is on sys.path
from conftest import load_source
from test_sim_sglang import LLAMA, R1_DP, assert_same, hand_work, work

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.errors import KvplanError
from kvplan.options.scenarios import build_scenario
from kvplan.scenario import Scenario


def scenario(base, pool, **limits):
    return build_scenario(**base, kv_pool=pool, **{k: str(v) for k, v in limits.items()})


# name: (scenario, pool, limits, workload). Prompts longer than the chunk (chunked), rounds cut by max_prefill_tokens
# below the chunk, and a given chunk divided over 8 attention-DP ranks.
CASES = {
    "small-chunk": (LLAMA, "6GiB", {"chunked_prefill_size": 2048},
                    lambda: work(30, "uniform:1000,9000", "uniform:300,1500", rate=30)),
    "large-chunk": (LLAMA, "6GiB", {"chunked_prefill_size": 32768, "max_prefill_tokens": 32768},
                    lambda: work(30, "uniform:5000,20000", "uniform:300,1500", rate=30)),
    "input-cap-below-chunk": (LLAMA, "6GiB", {"chunked_prefill_size": 16384, "max_prefill_tokens": 3000},
                              lambda: work(40, "uniform:200,2500", "uniform:300,1500", rate=60)),
    "retracting": (LLAMA, "1250MiB", {"chunked_prefill_size": 512, "max_prefill_tokens": 1500},
                   lambda: work(100, "uniform:100,900", "uniform:600,1500", rate=100)),
    "dp-attention": (R1_DP, "600MiB", {"chunked_prefill_size": 4096},
                     lambda: work(100, "uniform:200,3000", "uniform:600,1500", rate=30)),
}


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_given_prefill_limits_equal_the_token_by_token_reference(case, overlap):
    base, pool, limits, make = CASES[case]
    s = scenario(base, pool, **limits)
    w = make()
    fast = sim.simulate(s, w, sim.SimOptions(disable_overlap_schedule=None if overlap else True))
    assert_same(fast, ref.run(s, w, overlap=overlap))
    # the chunk as given (4,096 over 8 attention-DP ranks: 512 a rank, parallel_hook.py)
    assert fast.setup.chunk_tokens == (512 if case == "dp-attention" else limits["chunked_prefill_size"])
    # and the options change the run: against SGLang's defaults (8,192 on an 80 GB H100, 16,384 tokens a round)
    plain = sim.simulate(build_scenario(**base, kv_pool=pool), w,
                         sim.SimOptions(disable_overlap_schedule=None if overlap else True))
    assert not np.array_equal(fast.first_token, plain.first_token)


def test_a_40000_token_prompt_chunked_at_32768_against_the_default_8192():
    # Llama-3.1-8B on an H100 (80 GB: SGLang's default chunk is 8,192 tokens, max_prefill_tokens 16,384), an 8 GiB
    # pool (65,536 tokens of 128 KiB: every admission check passes). A, a 40,000-token prompt, and B, 100 tokens, both
    # at t = 0, five output tokens each; no overlap scheduler (the rounds as they come).
    # Default: A's first chunk is the round's whole budget, 8,192 (rem_chunk 0 ends the round), then whole chunks of
    # 8,192: 40,000 = 4 x 8,192 + 7,232; the round of the last chunk has 8,192 - 7,232 = 960 chunk tokens and
    # 16,384 - 7,232 = 9,152 input tokens left, so B (100) joins it: A's and B's first tokens come together at the end
    # of B's prefill, p(40,000 in chunks of 8,192) + p(100).
    # --chunked-prefill-size 32768: 40,000 = 32,768 + 7,232, the last chunk's round has 25,536 and 9,152 left: B joins,
    # at p(40,000 in chunks of 32,768) + p(100). Two chunks instead of five: the prefill's price differs.
    # --max-prefill-tokens 4096 as well: the last chunk's round has 4,096 - 7,232 < 0 input tokens left (budget_state
    # OTHER), so it ends with A; A's first token at p(40,000), B's own round after it, at p(40,000) + p(100).
    w = hand_work([40_000, 100], [5, 5], [0.0, 0.0])
    runs = {}
    for name, limits in (("default", {}), ("32k", {"chunked_prefill_size": 32768}),
                         ("32k-cap", {"chunked_prefill_size": 32768, "max_prefill_tokens": 4096})):
        s = scenario(LLAMA, "8GiB", **limits)
        runs[name] = (s, sim.simulate(s, w, sim.SimOptions(disable_overlap_schedule=True)))
    sm = costs.step_model(runs["default"][0])
    p8, p32 = sm.prefill_seconds(40_000, 0, 8192), sm.prefill_seconds(40_000, 0, 32768)
    small = sm.prefill_seconds(100, 0, 8192)          # (one chunk either way)
    assert small == sm.prefill_seconds(100, 0, 32768)
    assert p8 != p32
    d, big, cap = runs["default"][1], runs["32k"][1], runs["32k-cap"][1]
    assert d.setup.chunk_tokens == 8192 and big.setup.chunk_tokens == cap.setup.chunk_tokens == 32768
    assert d.admitted[1] == pytest.approx(p8, rel=1e-12)
    assert d.first_token[0] == d.first_token[1] == pytest.approx(p8 + small, rel=1e-12)
    assert big.admitted[1] == pytest.approx(p32, rel=1e-12)
    assert big.first_token[0] == big.first_token[1] == pytest.approx(p32 + small, rel=1e-12)
    assert cap.first_token[0] == pytest.approx(p32, rel=1e-12)
    assert cap.first_token[1] == pytest.approx(p32 + small, rel=1e-12)
    for _, r in runs.values():                        # (nothing retracted: the schedule is the rounds' alone)
        assert r.preemptions.sum() == 0


def test_a_given_chunk_enters_sglangs_memory_reserve():
    # memory_hook.py @v0.5.23: reserved = 512 + max(chunk, 2048) x 1.5 + TP x PP / 8 x 1024 + decode max_bs x 2 +
    # prefill CUDA graphs (8 MB per size up to the chunk), at least 10,240 MB above 60 GB. H100 SXM (79.65 GiB =
    # 81,562 MB), Llama-3.1-8B at TP 1, max_bs 256. Default chunk 8,192: 58 graph sizes (8 + 14 + 8 + 8 + 12 + 8, by
    # 4 to 32, 16 to 256, 32 to 512, 64 to 1,024, 256 to 4,096, 512 to 8,192): 512 + 12,288 + 128 + 512 + 464 =
    # 13,904 MB, round((81,562 - 13,904) / 81,562, 3) = 0.83. Given 32,768: 48 more sizes (by 512 to 32,768): 106 x 8
    # = 848; 512 + 49,152 + 128 + 512 + 848 = 51,152 MB, round(30,410 / 81,562, 3) = 0.373.
    def fraction(**limits):
        s = Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, engine="sglang", **limits)
        return s.engine_adapter.memory_fraction(s, s.parallelism)

    assert fraction().value == 0.83
    given = fraction(chunked_prefill_size=32768)
    assert given.value == 0.373
    assert "chunked prefill 32,768 as given" in given.why.substituted
    assert fraction(chunked_prefill_size=32768, mem_fraction_static=0.8).value == 0.8   # a given fraction wins


def test_the_options_are_sglangs_and_checked(run_cli):
    base = ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--rate", "1", "--requests", "5")
    for engine in ("vllm", "neutral"):
        r = run_cli(*base, "--engine", engine, "--chunked-prefill-size", "32768")
        assert r.code == 2 and "--chunked-prefill-size is not a setting of --engine" in r.err + r.out
        r = run_cli(*base, "--engine", engine, "--max-prefill-tokens", "32768")
        assert r.code == 2 and "--max-prefill-tokens is not a setting of --engine" in r.err + r.out
    r = run_cli(*base, "--engine", "sglang", "--chunked-prefill-size", "-1")
    assert r.code == 2 and "chunked prefill off (-1, or 0) is not modelled" in r.err + r.out
    r = run_cli(*base, "--engine", "sglang", "--max-prefill-tokens", "0")
    assert r.code == 2 and "--max-prefill-tokens" in r.err + r.out
    # SGLang asserts a chunk of whole pages (validation_hook.py): 64-token pages, a 1,000-token chunk
    r = run_cli(*base, "--engine", "sglang", "--block-size", "64", "--chunked-prefill-size", "1000")
    assert r.code == 2 and "not a whole number of SGLang's 64-token pages" in r.err + r.out
    assert len((r.err + r.out).strip().splitlines()) == 1 and "Traceback" not in r.err
    r = run_cli(*base, "--engine", "sglang", "--chunked-prefill-size", "32k", "--max-prefill-tokens", "32768")
    text = " ".join(r.out.split())
    # ("32k" reads as 32,000 tokens, as every token option does)
    assert r.code == 0 and "prefill rounds of 32,000 tokens (chunked_prefill_size, given) and at most 32,768" in text


def test_python_refuses_them_on_vllm_alike():
    with pytest.raises(KvplanError, match="--chunked-prefill-size is not a setting of --engine vllm"):
        Scenario(model="llama-3.1-8b", hardware="h100-sxm", engine="vllm", chunked_prefill_size=32768)
    with pytest.raises(KvplanError, match="--max-prefill-tokens"):
        build_scenario(**dict(LLAMA, engine="vllm"), max_prefill_tokens="4096")


# --- the serving-run data and the fidelity tool ---------------------------------------------------------------------
TOOL = Path(__file__).resolve().parent.parent / "tools" / "fidelity_report.py"


@pytest.fixture(scope="module")
def tool():
    if not TOOL.exists():   # the installed-wheel run: the tool lives in the source tree only
        pytest.skip("tools/fidelity_report.py is not beside this test")
    return load_source("fidelity_report", TOOL)


def test_each_sglang_run_carries_its_launchs_prefill_limits(tool):
    # the values against each run's cited launch command (its `release` text): every SGLang run launched with
    # --chunked-prefill-size / --max-prefill-tokens carries both (26: InferenceX's 32,768 on H200 and B200, 131,072 on
    # MI300X), and none that was launched without them has them
    runs = [r for r in tool.load()["runs"] if r["engine"] == "sglang"]
    launched = 0
    for run in runs:
        for flag, key in (("--chunked-prefill-size", "chunked_prefill_size"), ("--max-prefill-tokens",
                                                                              "max_prefill_tokens")):
            found = re.search(rf"{flag}[= ](\d+)", run["release"])
            assert run.get(key) == (int(found.group(1)) if found else None), (run["id"], key)
        launched += "chunked_prefill_size" in run
    assert launched == 26
    assert {r["chunked_prefill_size"] for r in runs if "chunked_prefill_size" in r} == {32768, 131072}


def test_the_tool_replays_a_runs_prefill_limits(tool, tmp_path):
    data = tool.load()
    run = next(r for r in data["runs"] if r["id"] == "inferencex-mi300x-dsr1-fp8-sglang-8k1k/conc4")
    s, _, _ = tool.build(run, data.get("models", {}), tmp_path)
    assert s.chunked_prefill_size == 131072 and s.max_prefill_tokens == 131072
    plain = next(r for r in data["runs"] if r["id"].startswith("datacrunch-h200-llama-3.3-70b"))
    s, _, _ = tool.build(plain, data.get("models", {}), tmp_path)
    assert s.chunked_prefill_size is None and s.max_prefill_tokens is None


def test_the_runs_chunk_says_it_was_given(run_cli):
    # DeepSeek-R1 over 8 attention-DP ranks (EP 8): a given 4,096 is 512 a rank (parallel_hook.py), and --explain's
    # derivation says so; not given, the engine's default
    base = ("simulate", "-m", "deepseek-r1", "-g", "h200", "--tp", "1", "--dp", "8", "--ep", "8", "--engine", "sglang",
            "--rate", "1", "--requests", "8", "--prompt", "200", "--decode", "20", "-f", "json")
    given = run_cli(*base, "--chunked-prefill-size", "4096")
    assert given.code == 0, given.err
    text = given.out
    assert "SGLang's --chunked-prefill-size as given // attention-DP ranks" in text and "4,096 // 8 = 512" in text
    plain = run_cli(*base)
    assert plain.code == 0 and "as given // attention-DP ranks" not in plain.out
