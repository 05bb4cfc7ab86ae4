"""`kvplan check PLAN...`: plan files, assertions measured by the other calculators, exit codes, JUnit XML."""

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

PLANS = Path(__file__).resolve().parent.parent / "examples" / "plans"
PASSING = PLANS / "deepseek-r1-h200-fp8.toml"
FAILING = PLANS / "deepseek-r1-h200-fails.toml"

DEPLOYMENT = '''[deployment]
model = "deepseek-r1"
hardware = "h200"
gpus = 8
tp = 8
kv_dtype = "fp8"
engine = "vllm"
prompt = "1k"
decode = "30k"
'''


def write(tmp_path, text: str, name: str = "plan.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def by_name(doc) -> dict:
    return {a["name"]: a for plan in doc["plans"] for a in plan["assertions"]}


# --- the example plans ------------------------------------------------------------------------------------------
def test_passing_plan_exits_0(run_cli):
    r = run_cli("check", str(PASSING))
    assert r.code == 0, r.err
    assert r.out.startswith("deepseek-r1 on 8 x h200")
    assert "FAIL" not in r.out
    doc = run_cli("check", str(PASSING), "-f", "json").json()
    assert doc["command"] == "check" and doc["passed"] is True
    assert doc["assertions_total"] == 7 and doc["assertions_failed"] == 0
    assert {a["metric"] for a in by_name(doc).values()} == {
        "weights_fit", "max_concurrency", "kv_bytes_per_request", "tpot_seconds", "swap_beats_recompute",
        "sim_recompute_rate", "sim_tpot_seconds_p99"}


def test_failing_plan_exits_1(run_cli):
    r = run_cli("check", str(FAILING), "-f", "json")
    assert r.code == 1, r.err
    doc = r.json()
    assert doc["passed"] is False and doc["assertions_failed"] == 2
    items = by_name(doc)
    conc = items["128 concurrent 31K-token requests"]
    assert not conc["passed"] and conc["op"] == ">=" and conc["bound"] == 128
    assert conc["margin"] == conc["measured"] - 128 < 0
    tpot = items["TPOT at the end of the decode, batch 32"]
    assert not tpot["passed"] and tpot["margin"] == pytest.approx(0.005 - tpot["measured"])
    assert items["weights_fit"]["passed"]


def test_any_failing_plan_fails_the_run(run_cli):
    r = run_cli("check", str(PASSING), str(FAILING))
    assert r.code == 1
    assert "2 plans" in r.out.splitlines()[0]


def test_csv_and_markdown_render(run_cli):
    csv = run_cli("check", str(PASSING), "-f", "csv")
    assert csv.code == 0
    # one plan: its name is in the headline, not a column; the unit column names what the raw numbers are in
    assert csv.out.splitlines()[1] == "assertion,measured,op,bound,result,margin,unit"
    assert len(csv.out.splitlines()) == 2 + 7
    row = csv.out.splitlines()[4]
    assert row.startswith("peak KV per request,1089216000,<=,") and row.endswith(",bytes")
    both = run_cli("check", str(PASSING), str(FAILING), "-f", "csv")
    assert both.code == 1 and both.out.splitlines()[1] == "plan,assertion,measured,op,bound,result,margin,unit"
    md = run_cli("check", str(FAILING), "-f", "markdown")
    assert md.code == 1 and "| FAIL |" in md.out


# --- hand-worked figures ----------------------------------------------------------------------------------------
def test_kv_bytes_per_request_is_hand_arithmetic(run_cli, tmp_path):
    # DeepSeek-R1 (config.json): 61 layers of MLA, each caching one latent of kv_lora_rank 512 + qk_rope_head_dim
    # 64 = 576 elements per token; FP8 KV = 1 byte each -> 61 x 576 = 35,136 B per token, whole model.
    # At the plan's context 1,000 + 30,000 = 31,000 tokens: 35,136 x 31,000 = 1,089,216,000 B (1.0144 GiB).
    # The latent is whole on every TP rank, so the per-GPU figure is the same bytes.
    plan = write(tmp_path, DEPLOYMENT + '''
[[assert]]
name = "whole model"
metric = "kv_bytes_per_request"
at_most = "1GiB"

[[assert]]
name = "per GPU"
metric = "kv_bytes_per_request_per_gpu"
at_most = "1089216000B"
''')
    r = run_cli("check", plan, "-f", "json")
    items = by_name(r.json())
    assert items["whole model"]["measured"] == 1_089_216_000
    assert items["per GPU"]["measured"] == 1_089_216_000
    # 1 GiB = 1,073,741,824 B < 1,089,216,000: fails by 15,474,176 B; the exact bound passes with margin 0
    assert not items["whole model"]["passed"]
    assert items["whole model"]["margin"] == 1_073_741_824 - 1_089_216_000 == -15_474_176
    assert items["per GPU"]["passed"] and items["per GPU"]["margin"] == 0
    assert r.code == 1


def test_weights_that_do_not_fit_fail_with_exit_1(run_cli, tmp_path):
    # One H200 at TP=1 holds all of DeepSeek-R1's ~671B fp8 parameters: far more than 0.9 x 140 GiB.
    plan = write(tmp_path, DEPLOYMENT.replace("gpus = 8", "gpus = 1").replace("tp = 8", "tp = 1") + '''
[[assert]]
metric = "weights_fit"
''')
    r = run_cli("check", plan, "-f", "json")
    assert r.code == 1, r.err
    (item,) = by_name(r.json()).values()
    assert not item["passed"] and item["measured"] > item["bound"] and item["margin"] < 0
    assert item["measured"] > 600e9
    # and expect = false turns the same fact into a pass
    plan = write(tmp_path, DEPLOYMENT.replace("gpus = 8", "gpus = 1").replace("tp = 8", "tp = 1") + '''
[[assert]]
metric = "weights_fit"
expect = false
''')
    assert run_cli("check", plan).code == 0


def test_library_plan_is_frozen_and_typed(tmp_path):
    from kvplan.calc.check import plan_check
    from kvplan.inputs.plan_file import load
    from kvplan.options.scenarios import deployment_scenario as _scenario
    from kvplan.specs.values import Count, Seconds

    spec = load(PASSING)
    plan = plan_check(_scenario(spec, None), spec.assertions, str(PASSING))
    assert plan.passed and plan.failed == 0
    conc = next(a for a in plan.assertions if a.metric == "max_concurrency")
    assert isinstance(conc.measured, Count) and conc.measured.why is not None
    assert conc.margin.value == conc.measured.value - 32
    tpot = next(a for a in plan.assertions if a.metric == "tpot_seconds")
    assert isinstance(tpot.measured, Seconds) and tpot.bound.value == pytest.approx(0.040)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.assertions[0].passed = False


# --- JUnit ------------------------------------------------------------------------------------------------------
def test_junit_parses_back(run_cli, tmp_path):
    out = tmp_path / "report.xml"
    r = run_cli("check", str(PASSING), str(FAILING), "--junit", str(out))
    assert r.code == 1
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "10" and root.get("failures") == "2"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [str(PASSING), str(FAILING)]
    assert [len(s.findall("testcase")) for s in suites] == [7, 3]
    assert not suites[0].findall("testcase/failure")
    failures = {c.get("name"): c.find("failure") for c in suites[1].findall("testcase")
                if c.find("failure") is not None}
    assert set(failures) == {"128 concurrent 31K-token requests", "TPOT at the end of the decode, batch 32"}
    message = failures["128 concurrent 31K-token requests"].get("message")
    measured = by_name(run_cli("check", str(FAILING), "-f", "json").json())[
        "128 concurrent 31K-token requests"]["measured"]
    assert f"measured {measured}" in message and "bound >= 128" in message
    assert "bound <= 5.00 ms" in failures["TPOT at the end of the decode, batch 32"].get("message")


def test_junit_needs_an_xml_name(run_cli, tmp_path):
    r = run_cli("check", str(PASSING), "--junit", str(tmp_path / "report.txt"))
    assert r.code == 2 and "--junit" in r.err


# --- invalid plans: exit 2, one line naming the file, the line and the key --------------------------------------
INVALID = [
    ("unknown deployment key", DEPLOYMENT.replace("tp = 8", "tpp = 8") + '[[assert]]\nmetric = "weights_fit"\n',
     ":5: unknown key deployment.'tpp'"),
    ("wrong type", DEPLOYMENT.replace("tp = 8", 'tp = "eight"') + '[[assert]]\nmetric = "weights_fit"\n',
     ":5: deployment.tp = 'eight' has the wrong type"),
    ("negative tp", DEPLOYMENT.replace("tp = 8", "tp = -8") + '[[assert]]\nmetric = "weights_fit"\n',
     ":5: deployment.tp -8 is out of range"),
    ("negative prompt", DEPLOYMENT.replace('prompt = "1k"', "prompt = -5") + '[[assert]]\nmetric = "weights_fit"\n',
     ":8: deployment.prompt '-5' must be non-negative"),
    ("negative bound", DEPLOYMENT + '[[assert]]\nmetric = "max_concurrency"\nat_least = -3\n',
     ":12: assert[1].at_least = -3 is negative"),
    ("unknown assert key", DEPLOYMENT + '[[assert]]\nmetric = "max_concurrency"\nat_least = 3\ncolour = 1\n',
     ":13: unknown key assert[1].'colour'"),
    ("unknown metric", DEPLOYMENT + '[[assert]]\nmetric = "ttft"\n', ":11: assert[1].metric = 'ttft' is not a known"),
    ("duration without unit", DEPLOYMENT + '[[assert]]\nmetric = "tpot_seconds"\nat_most = "40"\n',
     "assert[1].at_most = '40' is not a duration"),
    ("seconds without a unit", DEPLOYMENT + '[[assert]]\nmetric = "tpot_seconds"\nat_most = 40\n',
     ':12: assert[1].at_most = 40 has no unit (fix: write it as a duration with its unit, e.g. "40ms" or "40s")'),
    ("bytes without a unit", DEPLOYMENT + '[[assert]]\nmetric = "kv_bytes_per_request"\nat_most = 2\n',
     ':12: assert[1].at_most = 2 has no unit'),
    ("both bounds", DEPLOYMENT + '[[assert]]\nmetric = "max_concurrency"\nat_least = 3\nat_most = 9\n',
     "needs exactly one of at_least, at_most or within_baseline"),
    ("setting the engine lacks", DEPLOYMENT + 'mem_fraction_static = 0.8\n[[assert]]\nmetric = "weights_fit"\n',
     ":10: deployment.mem_fraction_static is not a setting of deployment.engine vllm"),
    ("unknown kv dtype", DEPLOYMENT.replace('"fp8"', '"fp9"') + '[[assert]]\nmetric = "weights_fit"\n',
     ":6: [deployment] kv_dtype: unknown kv dtype 'fp9'"),
    ("no assertions", DEPLOYMENT, "a plan needs at least one [[assert]] entry"),
    ("top-level key", "include = 'base.toml'\n" + DEPLOYMENT + '[[assert]]\nmetric = "weights_fit"\n',
     ":1: unknown top-level key 'include'"),
    ("not TOML", "[deployment\n", "not valid TOML"),
    ("nested too deep", "x = " + "[" * 200 + "]" * 200 + "\n", "nests tables or arrays"),
    ("request longer than the model", DEPLOYMENT.replace('decode = "30k"', 'decode = "200k"') + '[[assert]]\n'
     'metric = "weights_fit"\n', ":9: [deployment] decode: the request's 201,000 tokens"),   # decode, not prompt
    ("the fix names plan keys", DEPLOYMENT.replace("gpus = 8\ntp = 8\n", "gpus = 1\n") + '[[assert]]\n'
     'metric = "max_concurrency"\nat_least = 1\n', "(deployment.tp 8 deployment.pp 1 deployment.dp 1)"),
    ("unknown workload key", DEPLOYMENT + '[workload]\nshape = "steady"\n[[assert]]\nmetric = "weights_fit"\n',
     ":11: unknown key workload.'shape'"),
    ("bad distribution", DEPLOYMENT + '[workload]\noutput_dist = "lognormal:mean=20k"\n[[assert]]\n'
     'metric = "weights_fit"\n', ":11: "),
    ("unknown workload preset", DEPLOYMENT + '[workload]\npreset = "chatty"\n[[assert]]\nmetric = "weights_fit"\n',
     ":11: "),
    ("preset and distribution", DEPLOYMENT + '[workload]\npreset = "long-cot-bench"\nprompt_dist = "fixed:1k"\n'
     '[[assert]]\nmetric = "weights_fit"\n', ":12: workload.preset sets the length distributions"),
    ("rate and users", DEPLOYMENT + '[workload]\nrate = 0.5\nusers = 4\n[[assert]]\nmetric = "weights_fit"\n',
     ":12: workload.rate and users are two ways"),
    ("workload requests zero", DEPLOYMENT + '[workload]\nrequests = 0\n[[assert]]\nmetric = "weights_fit"\n',
     ":11: workload.requests = 0 is not a whole number"),
    # a batch that does not fit is a failed assertion, exit 1 (tests/test_first_use_defaults.py)
]


@pytest.mark.parametrize("text, expected", [(t, e) for _, t, e in INVALID], ids=[n for n, _, _ in INVALID])
def test_invalid_plan_exits_2_with_one_line(run_cli, tmp_path, text, expected):
    plan = write(tmp_path, text)
    r = run_cli("check", plan)
    assert r.code == 2, (r.out, r.err)
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith((f"error: {plan}", f"error: plan {plan}")), r.err
    assert expected in lines[0], lines[0]
    assert "Traceback" not in r.err


def test_missing_plan_file(run_cli, tmp_path):
    r = run_cli("check", str(tmp_path / "nope.toml"))
    assert r.code == 2 and "does not exist" in r.err


def test_an_invalid_plan_stops_the_run_before_any_output(run_cli, tmp_path):
    bad = write(tmp_path, DEPLOYMENT.replace("tp = 8", "tp = 0") + '[[assert]]\nmetric = "weights_fit"\n')
    r = run_cli("check", str(PASSING), bad, "-f", "json")
    assert r.code == 2 and r.out == "" and "deployment.tp 0 is out of range" in r.err


def test_expect_false_flips_the_margin(run_cli, tmp_path):
    # swap beats recompute on the workload document's deployment (the passing plan); asserting the opposite fails,
    # and the margin is then negative: 1 - recompute / swap
    plan = write(tmp_path, DEPLOYMENT + '''
[[assert]]
metric = "swap_beats_recompute"
generated = "20k"
expect = false
''')
    r = run_cli("check", plan, "-f", "json")
    assert r.code == 1
    (item,) = by_name(r.json()).values()
    assert item["measured"] > 1 and item["margin"] == pytest.approx(1 - item["measured"])


def test_weights_fit_with_a_given_pool(run_cli, tmp_path):
    plan = write(tmp_path, DEPLOYMENT + 'kv_pool = "40GiB"\n[[assert]]\nmetric = "weights_fit"\n')
    r = run_cli("check", plan, "-f", "json")
    assert r.code == 0, r.err
    (item,) = by_name(r.json()).values()
    assert item["measured"] == 40 * 2**30 and item["op"] == ">="


# --- extends ------------------------------------------------------------------------------------------------------
def test_extends_shares_a_deployment_and_the_plan_overrides_it(run_cli, tmp_path):
    # the base holds the deployment and one assertion; the plan extends it, overrides kv_dtype to bf16 and adds one.
    # R1's MLA latent is 61 x 576 elements per token: 35,136 B at fp8, 70,272 B at bf16; at 31,000 tokens bf16 is
    # 70,272 x 31,000 = 2,178,432,000 B, so the override must be what the inherited assertion measures
    write(tmp_path, DEPLOYMENT + '[[assert]]\nname = "inherited"\nmetric = "kv_bytes_per_request"\n'
          'at_most = "3GiB"\n', "base.toml")
    plan = write(tmp_path, 'extends = "base.toml"\n[deployment]\nkv_dtype = "bf16"\n\n[[assert]]\n'
                 'name = "own"\nmetric = "weights_fit"\n')
    r = run_cli("check", plan, "-f", "json")
    assert r.code == 0, r.err
    got = by_name(json.loads(r.out))
    assert list(got) == ["inherited", "own"]                     # the base's assertions first
    assert got["inherited"]["measured"] == 70_272 * 31_000
    base_only = run_cli("check", str(tmp_path / "base.toml"), "-f", "json")
    assert by_name(json.loads(base_only.out))["inherited"]["measured"] == 35_136 * 31_000


def test_extends_errors_name_the_file_that_holds_the_problem(run_cli, tmp_path):
    write(tmp_path, DEPLOYMENT.replace('kv_dtype = "fp8"', 'kv_dtype = "fp3"'), "base.toml")
    plan = write(tmp_path, 'extends = "base.toml"\n\n[[assert]]\nmetric = "weights_fit"\n')
    r = run_cli("check", plan)
    assert r.code == 2 and r.err.startswith(f"error: {tmp_path / 'base.toml'}:6:"), r.err   # kv_dtype's line
    # a cycle, a missing base and a base that is not text are one-line errors too
    write(tmp_path, 'extends = "b.toml"\n', "a.toml")
    write(tmp_path, 'extends = "a.toml"\n', "b.toml")
    cyc = run_cli("check", str(tmp_path / "a.toml"))
    assert cyc.code == 2 and "comes back to a plan already in the chain" in cyc.err, cyc.err
    missing = run_cli("check", write(tmp_path, 'extends = "nope.toml"\n', "m.toml"))
    assert missing.code == 2 and "nope.toml" in missing.err and missing.err.count("\n") == 1, missing.err
    wrong = run_cli("check", write(tmp_path, 'extends = 3\n', "w.toml"))
    assert wrong.code == 2 and "extends = 3 is not the path of a plan" in wrong.err, wrong.err
    # a plan that extends nothing and has no assertion is still refused
    bare = run_cli("check", write(tmp_path, 'extends = "base2.toml"\n', "bare.toml"))
    assert bare.code == 2


def test_extends_refuses_itself_and_chains_past_the_limit(run_cli, tmp_path):
    from kvplan.inputs.plan_file import MAX_EXTENDS

    me = run_cli("check", write(tmp_path, 'extends = "self.toml"\n', "self.toml"))
    assert me.code == 2 and "comes back to a plan already in the chain" in me.err, me.err
    # p0 extends p1 ... extends p{n}: MAX_EXTENDS plans in all is allowed, one more is refused
    def chain(n: int, folder):
        folder.mkdir()
        for i in range(n):
            write(folder, f'extends = "p{i + 1}.toml"\n' + ('[[assert]]\nmetric = "weights_fit"\n' if i == 0 else ""),
                  f"p{i}.toml")
        write(folder, DEPLOYMENT, f"p{n}.toml")
        return str(folder / "p0.toml")

    assert run_cli("check", chain(MAX_EXTENDS - 1, tmp_path / "ok")).code == 0
    over = run_cli("check", chain(MAX_EXTENDS, tmp_path / "over"))
    assert over.code == 2 and f"more than {MAX_EXTENDS} plans" in over.err, over.err


# --- baselines ----------------------------------------------------------------------------------------------------
BASELINE_PLAN = DEPLOYMENT + '''
[[assert]]
name = "tpot"
metric = "tpot_seconds"
batch = 8
within_baseline = "5%"

[[assert]]
name = "concurrency"
metric = "max_concurrency"
within_baseline = 0.1
'''


def test_within_baseline_needs_a_baseline_then_compares_against_it(run_cli, tmp_path):
    plan = write(tmp_path, BASELINE_PLAN)
    missing = run_cli("check", plan)
    assert missing.code == 2 and "--update-baseline" in missing.err and missing.err.count("\n") == 1, missing.err
    wrote = run_cli("check", plan, "--update-baseline", "-f", "json")
    assert wrote.code == 0, wrote.err
    values = json.loads((tmp_path / "plan.baseline.json").read_text())["values"]
    # the example plan's 42 requests at 31,000 tokens: kvplan's vLLM pool for R1 on 8 x H200 at FP8,
    # 46,601,527,847 B (docs/pool-prediction.md), over cdiv(31,000, 64) = 485 blocks x 64 x 35,136 B (see above)
    # = 1,090,621,440 B per request -> 42
    assert values["concurrency"] == 42
    # a later run against a better baseline: 60 requests allowed to fall 10% -> at least ceil(54.0) = 54, so 42
    # fails by 12; a TPOT baseline 10% lower, allowed 5% worse -> bound 0.9 x 1.05 = 0.945 of today's TPOT: fails
    values["concurrency"], values["tpot"] = 60, values["tpot"] * 0.9
    (tmp_path / "plan.baseline.json").write_text(json.dumps({"values": values}))
    r = run_cli("check", plan, "-f", "json")
    assert r.code == 1, r.err
    got = by_name(json.loads(r.out))
    assert got["concurrency"]["bound"] == 54 and got["concurrency"]["margin"] == -12
    assert got["tpot"]["bound"] == pytest.approx(got["tpot"]["measured"] * 0.945, rel=1e-12)
    # 42 against a baseline of 44 allowed 5% down: ceil(41.8) = 42 passes with no room; 45 -> ceil(42.75) = 43 fails
    for base, code in ((44, 0), (45, 1)):
        (tmp_path / "plan.baseline.json").write_text(json.dumps({"values": {**values, "concurrency": base,
                                                                           "tpot": 1.0}}))
        text = BASELINE_PLAN.replace("within_baseline = 0.1", 'within_baseline = "5%"')
        assert run_cli("check", write(tmp_path, text), "-f", "json").code == code, base


@pytest.mark.parametrize("text, needle", [
    (BASELINE_PLAN.replace('within_baseline = "5%"', 'within_baseline = "150%"'), "not a fraction in 0 .. 1"),
    (BASELINE_PLAN.replace('within_baseline = "5%"', 'within_baseline = "5%"\nat_most = "40ms"'),
     "exactly one of at_least, at_most or within_baseline"),
    (DEPLOYMENT + '[[assert]]\nmetric = "weights_fit"\nwithin_baseline = "5%"\n', "true or false"),
    (BASELINE_PLAN.replace('name = "concurrency"', 'name = "tpot"'), "is used twice"),
])
def test_bad_baseline_assertions_are_one_line_exit_2(run_cli, tmp_path, text, needle):
    r = run_cli("check", write(tmp_path, text), "--update-baseline")
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


def test_a_broken_baseline_file_is_one_line_exit_2(run_cli, tmp_path):
    plan = write(tmp_path, BASELINE_PLAN)
    for body in ("{not json", '{"values": {"tpot": "fast"}}', "[]"):
        (tmp_path / "plan.baseline.json").write_text(body)
        r = run_cli("check", plan)
        assert r.code == 2 and "baseline" in r.err and r.err.count("\n") == 1, (body, r.err)


def test_ttft_assertion_is_the_chunked_prefill(run_cli, tmp_path):
    # the hand-worked case of tests/test_tpot.py: Llama-3.1-8B on one H100, a 16,384-token prompt in two chunks of
    # 8,192, each compute-bound at the H100 preset's prefill_mfu 0.70 of 989 TFLOP/s (no
    # frontend latency: the neutral engine), plus 32 x 15 us + 450 us = 0.93 ms per chunk
    from kvplan.calc import flops
    from kvplan.inputs.presets import load_model

    plan = write(tmp_path, '[deployment]\nmodel = "llama-3.1-8b"\nhardware = "h100-sxm"\ntp = 1\ndp = 1\n'
                 'prompt = 16384\ndecode = 100\nmax_num_batched_tokens = 8192\n\n[[assert]]\nname = "ttft"\n'
                 'metric = "ttft_seconds"\nat_most = "1s"\n')
    r = run_cli("check", plan, "-f", "json")
    model = load_model("llama-3.1-8b")
    chunks = [flops.prefill_flops(model, 8192, 0), flops.prefill_flops(model, 16384, 8192)]
    expected = sum(f / (989e12 * 0.70) + 0.93e-3 for f in chunks)
    got = by_name(json.loads(r.out))["ttft"]
    assert got["measured"] == pytest.approx(expected, rel=1e-9)
    assert r.code == 0 and got["passed"]                       # ~0.49 s against 1 s
    assert got["margin"] == pytest.approx(1.0 - expected, rel=1e-9)


# --- simulated assertions -----------------------------------------------------------------------------------------
def test_simulated_assertions_run_kvplan_simulate_with_the_assertions_options(run_cli, tmp_path):
    # 4 closed-loop users on a pool that holds 42 such requests (the example plan's concurrency): nothing is ever
    # preempted, so the recompute rate and the swap-outs per second are exactly 0
    plan = write(tmp_path, DEPLOYMENT + '[[assert]]\nname = "calm"\nmetric = "sim_recompute_rate"\nusers = 4\n'
                 'requests = 8\nat_most = "0%"\n\n[[assert]]\nname = "no swaps"\nmetric = "sim_swap_outs_per_second"\n'
                 'users = 4\nrequests = 8\nat_most = 0\n\n'
                 '[[assert]]\nname = "busy"\nmetric = "sim_recompute_rate"\nrate = 0.5\nrequests = 200\nseed = 3\n'
                 'at_most = "2%"\n')
    r = run_cli("check", plan, "-f", "json")
    got = by_name(json.loads(r.out))
    assert got["calm"]["measured"] == 0 and got["calm"]["passed"]
    assert got["no swaps"]["measured"] == 0 and got["no swaps"]["passed"]
    # the busy one is what `kvplan simulate` reports for the same options (rate, requests, seed reach it)
    sim = run_cli("simulate", "-m", "deepseek-r1", "-g", "h200", "--gpus", "8", "--tp", "8", "--kv-dtype", "fp8",
                  "--engine", "vllm", "--rate", "0.5", "--requests", "200", "--seed", "3", "-f", "json")
    expected = json.loads(sim.out)["recompute_rate"]
    assert expected > 0.02 and got["busy"]["measured"] == expected and not got["busy"]["passed"]
    assert r.code == 1


@pytest.mark.parametrize("extra, needle", [
    ("rate = 0\n", "not a rate in (0, 1e6]"),
    ("rate = 1\nusers = 2\n", "two ways to make arrivals"),
    ("requests = 0\n", "not a whole number in 1 .. 50,000"),   # kvplan.inputs.workload.MAX_REQUESTS
    ('policy = "bogus"\n', "unknown preemption policy"),
    ('policy = "swap"\n', "has no swap space"),       # the plan's engine is vLLM V1, which preempts by recompute
    ("batch = 8\n", "batch does not apply to sim_recompute_rate"),
])
def test_bad_simulation_options_are_one_line_exit_2(run_cli, tmp_path, extra, needle):
    plan = write(tmp_path, DEPLOYMENT + '[[assert]]\nmetric = "sim_recompute_rate"\nat_most = "2%"\n' + extra)
    r = run_cli("check", plan)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


def test_pd_assertion_is_kvplan_pds_verdict(run_cli, tmp_path):
    # the workload document's case on 2 x 8 H200 (README, kvplan pd): do not disaggregate; the measured ratio is
    # pd's disaggregated over colocated tokens/s
    text = DEPLOYMENT.replace("gpus = 8\n", "nodes = 2\n")
    plan = write(tmp_path, text + '[[assert]]\nname = "no PD"\nmetric = "pd_disaggregation_pays"\nexpect = false\n'
                 '\n[[assert]]\nname = "PD"\nmetric = "pd_disaggregation_pays"\n')
    r = run_cli("check", plan, "-f", "json")
    got = by_name(json.loads(r.out))
    pd = json.loads(run_cli("pd", "--nodes", "2", "--tp", "8", "--kv-dtype", "fp8", "--engine", "vllm",
                            "-f", "json").out)
    assert pd["recommend_disaggregation"] is False
    ratio = pd["disaggregated_tokens_per_second"] / pd["colocated_tokens_per_second"]
    assert got["no PD"]["measured"] == pytest.approx(ratio, rel=1e-12) and got["no PD"]["passed"]
    assert got["no PD"]["margin"] == pytest.approx(1 - ratio, rel=1e-12)
    assert not got["PD"]["passed"] and r.code == 1
    one_node = run_cli("check", write(tmp_path, DEPLOYMENT + '[[assert]]\nmetric = "pd_disaggregation_pays"\n',
                                      "one.toml"))
    assert one_node.code == 2 and "needs two" in one_node.err and one_node.err.count("\n") == 1, one_node.err


def test_pd_assertion_takes_pd_s_slo_keys(run_cli, tmp_path):
    # pd_disaggregation_pays judged kvplan pd at its defaults only (TPOT 50 ms), so a gate could not hold the verdict
    # `kvplan pd --ttft-slo 400ms` gave on the same deployment. Llama-3.1-8B on 3 H100s, 16K + 300: a TP1 prefill of
    # 16,000 tokens alone is 2 x 6.98e9 x 16,000 + 4 x 32 x 4,096 x 16,000^2 / 2 = 2.9e14 FLOPs, 0.29 s at the
    # H100's full 989 TFLOP/s, so a 400 ms TTFT p99 leaves either side little room and moves pd's verdict; the gate
    # must give pd's verdict and ratio under the keys it is given, and the default without them.
    text = ('[deployment]\nmodel = "llama-3.1-8b"\nhardware = "h100-sxm"\ngpus = 3\ntp = 1\nkv_dtype = "fp8"\n'
            'prompt = "16k"\ndecode = "300"\n\n[[assert]]\nname = "default"\nmetric = "pd_disaggregation_pays"\n'
            '\n[[assert]]\nname = "ttft"\nmetric = "pd_disaggregation_pays"\nttft_slo = "400ms"\n'
            'tpot_slo = "50ms"\nslo_percentile = 99\n')
    got = by_name(json.loads(run_cli("check", write(tmp_path, text), "-f", "json").out))
    base = ("pd", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "3", "--tp", "1", "--kv-dtype", "fp8",
            "--prompt", "16k", "--decode", "300", "-f", "json")
    for name, extra in (("default", ()), ("ttft", ("--ttft-slo", "400ms"))):
        pd = json.loads(run_cli(*base, *extra).out)
        assert got[name]["passed"] == pd["recommend_disaggregation"], name
        colo = pd["colocated_tokens_per_second"]
        assert got[name]["measured"] == (pytest.approx(pd["disaggregated_tokens_per_second"] / colo, rel=1e-12)
                                         if colo else None), name
    # a key pd does not take is refused in one line, as before
    bad = run_cli("check", write(tmp_path, text.replace('slo_percentile = 99', 'sweep_rate = "1:2:2"'), "bad.toml"))
    assert bad.code == 2 and "does not apply to pd_disaggregation_pays" in bad.err and bad.err.count("\n") == 1


# --- from a CI user's review --------------------------------------------------------------------------------------
def test_names_with_control_characters_and_repeated_names_are_refused(run_cli, tmp_path):
    esc = run_cli("check", write(tmp_path, DEPLOYMENT + '[[assert]]\nname = "a\\u001bb"\nmetric = "weights_fit"\n'))
    assert esc.code == 2 and "control characters" in esc.err and "\x1b" not in esc.err, esc.err
    twice = run_cli("check", write(tmp_path, DEPLOYMENT + '[[assert]]\nname = "x"\nmetric = "weights_fit"\n'
                                   '[[assert]]\nname = "x"\nmetric = "max_concurrency"\nat_least = 1\n', "t.toml"))
    assert twice.code == 2 and "'x' is used twice" in twice.err, twice.err


def test_an_invalid_plan_still_writes_a_junit_report(run_cli, tmp_path):
    report = tmp_path / "r.xml"
    assert run_cli("check", str(PASSING), "--junit", str(report)).code == 0
    assert len(ET.parse(report).getroot().findall(".//testcase")) == 7
    bad = write(tmp_path, DEPLOYMENT + '[[assert]]\nmetric = "max_concurrency"\nat_least = -1\n')
    r = run_cli("check", str(PASSING), bad, "--junit", str(report))
    assert r.code == 2
    root = ET.parse(report).getroot()                       # replaced, not the stale passing report
    cases = root.findall(".//testcase")
    assert len(cases) == 1 and cases[0].find("error") is not None and "negative" in cases[0].find("error").text


@pytest.mark.parametrize("value, needle", [
    ("1" + "0" * 400, "not a finite number"),     # a 401-digit integer: was an internal OverflowError, exit 1
    ("-1", "not a finite number of 0 or more"),
])
def test_baseline_values_must_be_finite_and_not_negative(run_cli, tmp_path, value, needle):
    plan = write(tmp_path, BASELINE_PLAN)
    (tmp_path / "plan.baseline.json").write_text('{"values": {"tpot": ' + value + ', "concurrency": 48}}')
    r = run_cli("check", plan)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err


def test_a_baseline_for_another_plan_is_refused(run_cli, tmp_path):
    plan = write(tmp_path, BASELINE_PLAN)
    (tmp_path / "plan.baseline.json").write_text('{"values": {"tpot": 0.01, "concurrency": 48, "extra": 5}}')
    r = run_cli("check", plan)
    assert r.code == 2 and "'extra', which is no assertion" in r.err, r.err
    (tmp_path / "plan.baseline.json").write_text('{"plan": "other.toml", "values": {"tpot": 0.01}}')
    r = run_cli("check", plan)
    assert r.code == 2 and "written for 'other.toml'" in r.err, r.err


# --- [workload]: what sim_* assertions simulate ---------------------------------------------------------------------
SIM_DEPLOYMENT = DEPLOYMENT.replace('engine = "vllm"\n', "")


def test_workload_preset_means_what_simulate_flags_mean(run_cli, tmp_path):
    """A plan's [workload] (preset, requests, rate) simulates the same requests as kvplan simulate's flags: the
    measured recompute rate and TPOT p99 are the simulate command's own figures for those flags."""
    plan = write(tmp_path, SIM_DEPLOYMENT + '[workload]\npreset = "long-cot-bench"\nrequests = 60\nrate = 0.2\n'
                 '[[assert]]\nname = "p99"\nmetric = "sim_tpot_seconds_p99"\nat_most = "1s"\n'
                 '[[assert]]\nname = "rc"\nmetric = "sim_recompute_rate"\nat_most = "100%"\n')
    r = run_cli("check", plan, "-f", "json")
    assert r.code == 0, r.err
    got = by_name(r.json())
    sim = run_cli("simulate", "-m", "deepseek-r1", "-g", "h200", "--gpus", "8", "--tp", "8", "--kv-dtype", "fp8",
                  "--workload", "long-cot-bench", "--requests", "60", "--rate", "0.2", "-f", "json").json()
    assert got["p99"]["measured"] == sim["tpot_seconds_p99"]
    assert got["rc"]["measured"] == sim["recompute_rate"]
    assert got["p99"]["detail"].startswith("tpot_seconds_p99 simulated over 60 requests")


def test_assertion_arrivals_override_the_workload_and_extends_merges(run_cli, tmp_path):
    write(tmp_path, SIM_DEPLOYMENT + '[workload]\noutput_dist = "fixed:5k"\nrequests = 30\nrate = 0.5\n'
          '[[assert]]\nname = "base"\nmetric = "sim_recompute_rate"\nat_most = "100%"\n', "base.toml")
    child = write(tmp_path, 'extends = "base.toml"\n[workload]\nrequests = 12\n'
                  '[[assert]]\nname = "users"\nmetric = "sim_recompute_rate"\nat_most = "100%"\nusers = 3\n',
                  "child.toml")
    doc = by_name(run_cli("check", child, "-f", "json").json())
    # the child's requests (12) replace the base's 30; the base's output_dist and rate stay
    assert doc["base"]["detail"].startswith("recompute_rate simulated over 12 requests, prompts fixed:1000, outputs "
                                            "fixed:5k, Poisson")
    assert "closed loop of 3 users" in doc["users"]["detail"] and "Poisson" not in doc["users"]["detail"]


def test_workload_trace_is_read_relative_to_the_plan(run_cli, tmp_path):
    (tmp_path / "t.csv").write_text("prompt_tokens,output_tokens,arrival_s\n1000,2000,0\n1000,3000,1\n"
                                    "2000,2500,2\n")
    plan = write(tmp_path, SIM_DEPLOYMENT + '[workload]\ntrace = "t.csv"\n[[assert]]\nname = "rc"\n'
                 'metric = "sim_recompute_rate"\nat_most = "1%"\n')
    r = run_cli("check", plan, "-f", "json")
    assert r.code == 0, r.err
    assert "3 requests from" in by_name(r.json())["rc"]["detail"]
    (tmp_path / "t.csv").write_text("prompt_tokens,output_tokens\n1000,-5\n")
    bad = run_cli("check", plan)
    assert bad.code == 2 and "t.csv" in bad.err and "Traceback" not in bad.err


def test_brief_lists_only_the_failures(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")   # the first line on one line
    r = run_cli("check", str(FAILING), "--brief")
    assert r.code == 1
    lines = r.out.splitlines()
    # the failing plan: 3 assertions, 2 fail (42 < 128 requests; the TPOT bound 5 ms)
    assert lines[1:3] == ["assertions: 3", "failed: 2"]
    assert lines[3] == "FAIL 128 concurrent 31K-token requests: measured: 42" and lines[4] == "  bound (>=): 128"
    assert len(lines) == 7 and "weights_fit" not in r.out
    assert run_cli("check", str(PASSING), "--brief", "-f", "csv").code == 2   # --brief is the table's or JSON's


def test_tpot_assertion_takes_the_batch_shape(run_cli, tmp_path):
    """shape = "cohort" asserts the TPOT of batch 8 with every request at prompt + decode at the end (kvplan tpot
    --shape cohort's end), not the steady batch's; both equal kvplan tpot's own figures."""
    plan = write(tmp_path, DEPLOYMENT + '[[assert]]\nname = "steady"\nmetric = "tpot_seconds"\nbatch = 8\n'
                 'at_most = "1s"\n[[assert]]\nname = "cohort"\nmetric = "tpot_seconds"\nbatch = 8\nshape = "cohort"\n'
                 'at_most = "1s"\n')
    got = by_name(run_cli("check", plan, "-f", "json").json())
    base = ("tpot", "-m", "deepseek-r1", "-g", "h200", "--gpus", "8", "--tp", "8", "--kv-dtype", "fp8", "--engine",
            "vllm", "--batch", "8", "-f", "json")
    assert got["steady"]["measured"] == run_cli(*base).json()["tpot_seconds_end"]
    assert got["cohort"]["measured"] == run_cli(*base, "--shape", "cohort").json()["tpot_seconds_end"]
    assert got["cohort"]["measured"] > got["steady"]["measured"]   # every request at 31K reads more KV
    bad = run_cli("check", write(tmp_path, DEPLOYMENT + '[[assert]]\nmetric = "tpot_seconds"\nshape = "square"\n'
                                 'at_most = "1s"\n', "bad.toml"))
    assert bad.code == 2 and "assert[1].shape = 'square' is not a batch shape" in bad.err


def test_library_within_baseline_without_its_baseline_is_one_error(tmp_path):
    # load() leaves AssertSpec.baseline unset (kvplan check fills it from PLAN.baseline.json); the library used to
    # multiply None by the fraction (a TypeError traceback) instead of saying what is missing
    from kvplan.calc.check import plan_check
    from kvplan.errors import KvplanError
    from kvplan.inputs.plan_file import load
    from kvplan.options.scenarios import deployment_scenario

    spec = load(Path(write(tmp_path, BASELINE_PLAN)))
    with pytest.raises(KvplanError) as err:
        plan_check(deployment_scenario(spec), spec.assertions)
    assert "assert[1] (tpot) gives within_baseline but its baseline value is not filled in" in err.value.message
    assert "--update-baseline" in err.value.hint and err.value.assert_index == 1


def test_a_missing_measurement_margin_derivation_is_text():
    # a measured value that is not there (None) with a note for its detail: the margin's derivation used to carry
    # the Note object itself as its numbers, which JSON cannot write and text prints as a repr
    from kvplan.calc.check import _compare
    from kvplan.inputs.plan_file import AssertSpec
    from kvplan.specs.values import Count, Tokens, note

    a = AssertSpec(1, "c", "max_concurrency", ">=", 4)
    r = _compare(a, Count(None), Count(4), note("requests of {ctx} tokens", ctx=Tokens(1000)))
    assert r.margin.value is None and r.passed is False
    assert r.margin.why.substituted == "-"
    json.dumps(r.margin.why.to_dict())
