"""A new user's pass over the command line (reasoning workloads): each defect found, as a test that failed before its
fix. The rule they hold: nothing the user gave is silently ignored, and a refusal is one line naming the problem and
a fix (exit 2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_fuzz_cli import run as run_with_alarm  # tests/ is on sys.path

LLAMA = ("-m", "llama-3.1-8b", "-g", "h100-sxm")


def one_line_refusal(r, *needles: str) -> None:
    assert r.code == 2, (r.code, r.out[:300], r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "(fix: " in lines[0], r.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# --- --gpus N with an explicit layout on fewer GPUs ------------------------------------------------------------------
@pytest.mark.parametrize("args, planned, fix", [
    (("--gpus", "4", "--tp", "1", "--dp", "2"), "TP x PP x DP = 2", "--dp 4"),   # 1 x 1 x 2 = 2 of the 4 asked
    (("--gpus", "2", "--tp", "1", "--dp", "1"), "TP x PP x DP = 1", "--dp 2"),
    (("--gpus", "8", "--tp", "2", "--pp", "2", "--dp", "1"), "TP x PP x DP = 4", "--dp 2"),   # 8 / (2 x 2) = 2
    (("--gpus", "6", "--tp", "4", "--dp", "1"), "TP x PP x DP = 4", "(fix: give --gpus 4)"),  # 6 / 4: no whole DP
])
def test_gpus_that_the_layout_leaves_unused_are_refused(run_cli, args, planned, fix):
    """Before: ``--gpus 4 --tp 1 --dp 2`` planned 2 GPUs ("2 x h100-sxm") and dropped the --gpus given."""
    r = run_cli("concurrency", *LLAMA, *args)
    one_line_refusal(r, "--gpus " + args[1], planned, fix)


def test_gpus_and_a_layout_that_fills_them_still_plan(run_cli):
    r = run_cli("size", *LLAMA, "--gpus", "4", "--tp", "2", "--dp", "2", "-f", "json")
    assert r.code == 0, r.err
    assert r.json()["parallelism"]["dp"] == 2
    # the fix hint names the DP that uses every GPU: 4 GPUs / (TP 1 x PP 1) = 4
    assert "--dp 4" in run_cli("size", *LLAMA, "--gpus", "4", "--tp", "1", "--dp", "2").err


# --- simulate: a batch cap above the engine's own --------------------------------------------------------------------
def test_simulate_max_batch_above_max_num_seqs_is_refused(run_cli):
    """Before: ``--max-batch 16 --max-num-seqs 8`` ran 16 requests at once on an engine told to run at most 8."""
    r = run_cli("simulate", *LLAMA, "--gpus", "1", "--engine", "vllm", "--decode", "2k", "--users", "24",
                "--requests", "40", "--max-batch", "16", "--max-num-seqs", "8")
    one_line_refusal(r, "--max-batch 16", "--max-num-seqs 8")


def test_simulate_compare_max_batch_above_max_num_seqs_is_refused(run_cli):
    """Before: ``--max-num-seqs 8 --compare max-batch=16`` ran the variant at 16."""
    r = run_cli("simulate", *LLAMA, "--gpus", "1", "--engine", "vllm", "--decode", "2k", "--users", "24",
                "--requests", "40", "--max-num-seqs", "8", "--compare", "max-batch=16")
    one_line_refusal(r, "--compare max-batch=16", "--max-num-seqs 8")


def test_simulate_max_batch_below_max_num_seqs_still_runs(run_cli):
    r = run_cli("simulate", *LLAMA, "--gpus", "1", "--engine", "vllm", "--decode", "2k", "--users", "8",
                "--requests", "16", "--max-batch", "4", "--max-num-seqs", "8", "-f", "json")
    assert r.code == 0, r.err
    assert r.json()["peak_running_requests"] == 4


# --- SGLang's memory fraction where vLLM's is taken -----------------------------------------------------------------
@pytest.mark.parametrize("command", ["tpot", "pd"])
def test_sglang_memory_fraction_is_an_option_wherever_vllms_is(run_cli, command):
    """Before: ``kvplan tpot --engine sglang --mem-fraction-static 0.8`` failed "No such option" while tpot takes
    vLLM's --gpu-memory-utilization; the fraction sizes the pool that caps tpot's and pd's batch."""
    base = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--engine", "sglang", "--decode", "8k", "-f", "json")
    if command == "pd":
        base += ("--gpus", "2")
    low = run_cli(command, *base, "--mem-fraction-static", "0.6")
    high = run_cli(command, *base, "--mem-fraction-static", "0.85")
    assert low.code == 0 and high.code == 0, (low.err, high.err)
    assert low.json() != high.json()    # the fraction reached the plan


# --- recommend --target: the deployment options the search would replace ---------------------------------------------
TARGET = ("recommend", "-m", "qwq-32b", "--engine", "vllm", "--prompt", "1k", "--decode", "8k",
          "--target", "concurrency>=32@9k,tpot<=30ms")


def test_target_search_keeps_the_kv_dtype_given(run_cli):
    """Before: ``--kv-dtype bf16 --target ...`` planned fp8 ("chosen by the --target search")."""
    r = run_cli(*TARGET, "--kv-dtype", "bf16", "--candidates", "h100-sxm", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["kv_dtype"] == "bf16"
    assert {c["kv_dtype"] for c in d["sizing"]["candidates"]} == {"bf16"}
    row = {r["key"]: r for r in d["recommendations"]}["kv_dtype"]
    assert row["reason"].startswith("--kv-dtype bf16 as given;"), row["reason"]


def test_target_search_tries_the_gpu_given(run_cli):
    """Before: ``-g h100-sxm --target ...`` searched every GPU preset and recommended a B200."""
    r = run_cli(*TARGET, "-g", "h100-sxm", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["hardware"] == "h100-sxm"
    assert {c["hardware"] for c in d["sizing"]["candidates"]} == {"h100-sxm"}


@pytest.mark.parametrize("flag, value", [("--tp", "2"), ("--dp", "2"), ("--pp", "2"), ("--gpus", "4"),
                                         ("--nodes", "2")])
def test_target_search_refuses_a_layout_it_would_replace(run_cli, flag, value):
    """Before: ``--tp 2 --target ...`` planned TP1 without a word."""
    r = run_cli(*TARGET, "--candidates", "h100-sxm", flag, value)
    one_line_refusal(r, flag, "--target")


def test_target_search_refuses_a_gpu_and_candidates_together(run_cli):
    r = run_cli(*TARGET, "-g", "h100-sxm", "--candidates", "h200,b200")
    one_line_refusal(r, "-g h100-sxm", "--candidates")
    r = run_cli(*TARGET, "-g", "h100-sxm", "--candidates", "h200,h100-sxm", "-f", "json")   # among them: searched
    assert r.code == 0, r.err
    assert {c["hardware"] for c in r.json()["sizing"]["candidates"]} <= {"h200", "h100-sxm"}


# --- recommend --gpus N on a full node -------------------------------------------------------------------------------
def test_recommend_with_gpus_of_a_full_node_prices_the_pd_row(run_cli):
    """Before: ``recommend -m deepseek-r1 --gpus 8`` (the default deployment, 8 x H200 = one node, said outright)
    failed "--gpus 16 is more than 1 node(s) of h200 hold": the PD row's second instance doubled --gpus without the
    node it needs. The same deployment without --gpus prices it on two nodes; both must give the same row."""
    given = run_cli("recommend", "-m", "deepseek-r1", "--gpus", "8", "-f", "json")
    assert given.code == 0, given.err
    default = run_cli("recommend", "-m", "deepseek-r1", "-f", "json")
    rows = [{r["key"]: r for r in d.json()["recommendations"]}["pd"] for d in (given, default)]
    assert rows[0]["value"] == rows[1]["value"] and rows[0]["reason"] == rows[1]["reason"]
    assert "at two instances (16 GPUs)" in rows[0]["reason"]


# --- TP x PP beyond the GPUs: the fix names the GPUs it needs ---------------------------------------------------------
@pytest.mark.parametrize("args, fix", [
    (("--tp", "16"), "add --nodes 2"),                           # 16 GPUs at 8 per H200 node
    (("--tp", "8", "--pp", "61"), "add --nodes 61"),             # 488 GPUs / 8 = 61 nodes
    (("--gpus", "4", "--tp", "8"), "raise --gpus to 8"),
])
def test_tp_x_pp_beyond_the_gpus_asks_for_more_gpus(run_cli, args, fix):
    """Before: "8 GPUs do not split into TP=16 x PP=1 replicas (fix: give --dp (or --gpus), ...)": no --dp helps a
    replica larger than the GPUs; the fix is more of them."""
    r = run_cli("concurrency", "--kv-dtype", "fp8", *args)
    one_line_refusal(r, fix)
    assert "give --dp" not in r.err


# --- files kvplan writes: a FIFO (or a device) at the path is refused, not opened -----------------------------------
PLAN = '''[deployment]
model = "llama-3.1-8b"
hardware = "h100-sxm"
gpus = 1
decode = "2k"

[[assert]]
metric = "max_concurrency"
{bound}
'''


def _fifo_cases(tmp_path):
    root = Path(__file__).resolve().parent.parent
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(bound="at_least = 1"))
    base = tmp_path / "b.toml"
    base.write_text(PLAN.format(bound="within_baseline = 0.1"))
    measured = tmp_path / "m.csv"
    measured.write_text("batch,context,tpot_ms\n1,1000,7.0\n8,4000,8.0\n")
    bench = str(root / "tests" / "data" / "calibration" / "vllm-bench-serve-c16.json")
    llama = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "1")
    return {
        "check --junit": (("check", str(plan), "--junit", "{fifo}.xml"), "--junit"),
        "check --update-baseline": (("check", str(base), "--update-baseline"), "the baseline"),
        "calibrate --save": (("calibrate", *llama, "--engine", "vllm", bench, "--save", "{fifo}.toml"), "--save"),
        "tpot --save-calibration": (("tpot", *llama, "--measured", str(measured), "--save-calibration",
                                     "{fifo}.toml"), "--save-calibration"),
    }


@pytest.mark.parametrize("case", ["check --junit", "check --update-baseline", "calibrate --save",
                                  "tpot --save-calibration"])
def test_a_fifo_where_kvplan_writes_is_refused_not_opened(run_cli, tmp_path, case):
    """Before: ``kvplan check plan.toml --junit out.xml`` with out.xml a FIFO (and calibrate --save, tpot
    --save-calibration, the baseline) blocked for ever opening it to write."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    args, what = _fifo_cases(tmp_path)[case]
    fifo = tmp_path / "out"
    if case == "check --update-baseline":
        os.mkfifo(tmp_path / "b.baseline.json")
    else:
        os.mkfifo(str(fifo) + ("." + args[-1].rsplit(".", 1)[1]))
    args = tuple(a.replace("{fifo}", str(fifo)) for a in args)
    r = run_with_alarm(run_cli, *args, seconds=20)
    one_line_refusal(r, what, "is a FIFO (named pipe), not a file")


def test_a_plot_to_a_fifo_names_it(run_cli, tmp_path):
    """Before: "cannot write f.png: None" (matplotlib's error has no strerror)."""
    pytest.importorskip("matplotlib")
    fifo = tmp_path / "f.png"
    os.mkfifo(fifo)
    r = run_cli("concurrency", *LLAMA, "--gpus", "1", "--plot", str(fifo))
    one_line_refusal(r, "--plot", "is a FIFO (named pipe), not a file")


# --- calibrate: a benchmark run of one engine fitted as another -------------------------------------------------------
CAL = Path(__file__).resolve().parent / "data" / "calibration"


@pytest.mark.parametrize("engine, result, backend", [
    ("sglang", "vllm-bench-serve-c16.json", "vllm"),          # its "backend": "vllm"
    ("vllm", "sglang-bench-serving.jsonl", "sglang"),         # each line's "backend": "sglang"
])
def test_calibrate_refuses_a_run_of_another_engine(run_cli, engine, result, backend):
    """Before: ``calibrate --engine sglang vllm-bench-serve-c16.json`` fitted SGLang's step factors to vLLM's measured
    TPOT without a word (and ``--save`` labelled the file sglang), though the run names the server it measured."""
    r = run_cli("calibrate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "1", "--engine", engine,
                str(CAL / result))
    one_line_refusal(r, f"--engine {engine}", f"backend {backend}")


def test_calibrate_takes_a_run_of_its_own_engine(run_cli):
    r = run_cli("calibrate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "1", "--engine", "vllm==0.11",
                str(CAL / "vllm-bench-serve-c16.json"), "-f", "json")
    assert r.code == 0, r.err


def test_calibrate_warns_when_the_runs_measured_another_engine_than_the_logs(run_cli):
    """The engine read from a vLLM start-up log, the runs SGLang's: planned, with a warning naming both."""
    log = Path(__file__).resolve().parent / "data" / "logs" / "vllm-v0.6.5-llama3-8b-1xh100.log"
    r = run_cli("calibrate", "-m", "llama-3.1-8b", "-g", "h100-sxm", str(log), str(CAL / "sglang-bench-serving.jsonl"),
                "--brief")
    assert r.code == 0, r.err
    assert "measured backend sglang, not the log's vllm" in r.out + r.err


# --- recommend --emit: every engine setting the plan was priced with is in the launch command ------------------------
def test_emitted_vllm_command_sets_the_token_budget_the_plan_used(run_cli):
    """Before: ``recommend --engine vllm --max-num-batched-tokens 2048 --emit vllm`` planned 2,048-token prefill
    chunks (the pool's activation reserve, the mixed steps) but printed no --max-num-batched-tokens, so vLLM would run
    its default 8,192 (the H100's: kvplan's own help)."""
    r = run_cli("recommend", "-m", "qwq-32b", "-g", "h100-sxm", "--tp", "2", "--gpus", "2", "--engine", "vllm",
                "--kv-dtype", "fp8", "--decode", "8k", "--max-num-batched-tokens", "2048", "--emit", "vllm",
                "-f", "json")
    assert r.code == 0, r.err
    flags = {f["flag"]: f["value"] for f in r.json()["launch"]["flags"]}
    assert flags["--max-num-batched-tokens"] == "2048"
    plain = run_cli("recommend", "-m", "qwq-32b", "-g", "h100-sxm", "--tp", "2", "--gpus", "2", "--engine", "vllm",
                    "--kv-dtype", "fp8", "--decode", "8k", "--emit", "vllm", "-f", "json")
    assert "--max-num-batched-tokens" not in {f["flag"] for f in plain.json()["launch"]["flags"]}   # the default


# --- output options that do nothing together -------------------------------------------------------------------------
def test_explain_with_csv_is_refused(run_cli):
    """Before: ``-f csv --explain`` printed the CSV alone, the same bytes as without --explain (CSV is one table of raw
    numbers: it has no place for the derivations, which JSON, Markdown and the table carry)."""
    r = run_cli("concurrency", *LLAMA, "--gpus", "1", "-f", "csv", "--explain")
    one_line_refusal(r, "--explain", "csv")
    assert run_cli("concurrency", *LLAMA, "--gpus", "1", "-f", "markdown", "--explain").code == 0


@pytest.mark.parametrize("flag", ["--prompt", "--decode"])
def test_calibrate_refuses_request_lengths_it_does_not_use(run_cli, flag):
    """Before: ``calibrate --prompt 5k`` changed the first line ("5,000 + 30,000 tokens") and nothing else: each run
    carries its own lengths, which are what kvplan calibrates against."""
    r = run_cli("calibrate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "1", "--engine", "vllm", flag, "5k",
                str(CAL / "vllm-bench-serve-c16.json"))
    one_line_refusal(r, flag)


def test_include_mtp_on_a_model_without_mtp_layers_is_refused(run_cli):
    """Before: ``size -m qwen3-32b --include-mtp`` printed the same figures as without (Qwen3-32B ships no MTP
    layer), while on DeepSeek-R1 it adds its one: 61 + 1 layers x 1,152 B = 71,424 B per token (bf16 MLA)."""
    r = run_cli("size", "-m", "qwen3-32b", "--include-mtp")
    one_line_refusal(r, "--include-mtp", "qwen3-32b")
    d = run_cli("size", "--include-mtp", "-f", "json")
    assert d.code == 0 and d.json()["kv_bytes_per_token"] == 62 * 1152


def test_emitted_fraction_does_not_claim_to_size_a_given_pool(run_cli):
    """Before: with --kv-pool 20GiB the launch command's --gpu-memory-utilization 0.92 said "the fraction kvplan's
    pool was sized with", though the plan used the 20 GiB given and no fraction sized it."""
    base = ("recommend", "-m", "qwq-32b", "-g", "h100-sxm", "--tp", "2", "--gpus", "2", "--engine", "vllm==0.9.2",
            "--kv-dtype", "fp8", "--decode", "8k", "--emit", "vllm", "-f", "json")
    flags = {f["flag"]: f for f in run_cli(*base, "--kv-pool", "20GiB").json()["launch"]["flags"]}
    why = flags["--gpu-memory-utilization"]["reason"]
    assert "sized with" not in why and "--kv-pool" in why, why
    plain = {f["flag"]: f for f in run_cli(*base).json()["launch"]["flags"]}
    assert plain["--gpu-memory-utilization"]["reason"] == "the fraction kvplan's pool was sized with"


# --- --kv-pool reaches the launch command ----------------------------------------------------------------------------
QWQ_EMIT = ("recommend", "-m", "qwq-32b", "-g", "h100-sxm", "--tp", "2", "--gpus", "2", "--kv-dtype", "fp8",
            "--decode", "8k", "-f", "json")


def _launch(run_cli, *args):
    r = run_cli(*QWQ_EMIT, *args)
    assert r.code == 0, r.err
    return {f["flag"]: f for f in r.json()["launch"]["flags"]}


def test_kv_pool_is_emitted_as_vllm_kv_cache_memory_bytes(run_cli):
    """Before: ``recommend --kv-pool 20GiB --emit vllm`` printed no flag that gives vLLM a 20 GiB pool (only its
    default --gpu-memory-utilization). vLLM from v0.10.2 takes the KV cache per GPU in bytes and then ignores the
    fraction (CacheConfig.kv_cache_memory_bytes): 20 x 2^30 = 21,474,836,480 B."""
    flags = _launch(run_cli, "--engine", "vllm", "--emit", "vllm", "--kv-pool", "20GiB")
    assert flags["--kv-cache-memory-bytes"]["value"] == "21474836480"
    assert "--gpu-memory-utilization" not in flags
    assert _launch(run_cli, "--engine", "vllm==0.10.2", "--emit", "vllm", "--kv-pool", "20GiB")[
        "--kv-cache-memory-bytes"]["value"] == "21474836480"


def test_kv_pool_before_vllm_0_10_2_is_the_fraction_that_leaves_it(run_cli):
    """v0.10.1 has no --kv-cache-memory-bytes: the fraction whose budget leaves the pool. Its waterfall (the plan
    without --kv-pool at the default 0.9) is pool = visible x 0.9 - rest, so a fraction f leaves 20 GiB when
    f = (20 GiB + rest) / visible; planning at the printed f (rounded up to 0.001) holds at least 20 GiB, and at
    f - 0.001 less."""
    flags = _launch(run_cli, "--engine", "vllm==0.10.1", "--emit", "vllm", "--kv-pool", "20GiB")
    assert "--kv-cache-memory-bytes" not in flags
    f = float(flags["--gpu-memory-utilization"]["value"])
    pool = [run_cli("concurrency", "-m", "qwq-32b", "-g", "h100-sxm", "--tp", "2", "--gpus", "2", "--engine",
                    "vllm==0.10.1", "--kv-dtype", "fp8", "--decode", "8k", "--gpu-memory-utilization", f"{x:.3f}",
                    "-f", "json").json()["kv_pool_bytes_per_gpu"] for x in (f, f - 0.001)]
    assert pool[0] >= 20 * 2**30 > pool[1], (f, pool)


def test_kv_pool_is_emitted_as_sglang_max_total_tokens(run_cli):
    """SGLang's token pool is min(what --mem-fraction-static leaves, --max-total-tokens) (model_runner.py). QwQ-32B
    at TP 2, fp8 KV: 64 layers x 8 KV heads / 2 x 128 x 2 (K and V) x 1 B = 65,536 B per token per GPU, so 20 GiB
    is 21,474,836,480 // 65,536 = 327,680 tokens (page 1)."""
    flags = _launch(run_cli, "--engine", "sglang", "--emit", "sglang", "--kv-pool", "20GiB")
    assert flags["--max-total-tokens"]["value"] == "327680"
    assert "leaves the --kv-pool" in flags["--mem-fraction-static"]["reason"]
    assert "--max-total-tokens" not in _launch(run_cli, "--engine", "sglang", "--emit", "sglang")


def test_kv_pool_no_fraction_can_leave_is_said(run_cli):
    """A pool larger than the GPU leaves after the weights (70 GiB of an 80 GB H100 holding 32.5 GB of weights):
    no fraction up to 1 leaves it, so the default is printed and says so."""
    flags = _launch(run_cli, "--engine", "vllm==0.10.1", "--emit", "vllm", "--kv-pool", "70GiB")
    assert "no flag here realises the --kv-pool" in flags["--gpu-memory-utilization"]["reason"]


# --- every shared option of every command changes what it prints, or is refused --------------------------------------
# The shared scenario, memory and calibration options are spliced into each command (kvplan/commands/common.py); one a
# command takes but never reads would be a silent ignore. Each command runs on a small deployment (one H100, vLLM,
# Llama-3.1-8B) with each shared option it accepts set to a value unlike its default: the JSON must differ from the
# run without it, or the run is refused in one line (the run without it printed a plan, so the option was read).
DATA = Path(__file__).resolve().parent / "data"
WALK_LOG = str(DATA / "logs" / "vllm-v0.6.5-llama3-8b-1xh100.log")   # vLLM on one H100, Llama-3-8B
ONE_GPU = (*LLAMA, "--tp", "1", "--gpus", "1", "--engine", "vllm")
WALK_BASE = {
    "size": ONE_GPU, "concurrency": ONE_GPU, "compare-preemption": ONE_GPU, "tpot": ONE_GPU, "recommend": ONE_GPU,
    "pd": (*LLAMA, "--tp", "1", "--gpus", "2", "--engine", "vllm", "--prompt", "4k", "--decode", "300"),
    "simulate": (*ONE_GPU, "--requests", "20", "--rate", "2", "--decode", "300"),
    "explain-log": ("-m", "llama-3.1-8b", WALK_LOG),
    "calibrate": (*ONE_GPU, WALK_LOG, str(CAL / "vllm-bench-serve-c16.json")),
}
WALK_VALUES = {
    "--model": "gpt-oss-20b", "--hardware": "b200", "--nodes": "2", "--gpus": "2", "--tp": "2", "--pp": "2",
    "--dp": "2", "--ep": "2", "--kv-dtype": "fp8", "--weight-dtype": "fp8", "--weights": "40GB", "--engine": "sglang",
    "--prompt": "2k", "--decode": "700", "--generated": "5k", "--mtp-layers": "1", "--max-model-len": "2500",
    "--block-size": "2048", "--host-link-gbs": "3", "--gpu-memory-utilization": "0.5", "--mem-fraction-static": "0.5",
    "--kv-pool": "20GiB", "--max-num-batched-tokens": "512", "--max-num-seqs": "4", "--activation-reserve": "9GiB",
    "--runtime-reserve": "7GiB", "--moe-a2a-backend": "deepep", "--dram": "1GB", "--chunked-prefill-size": "4096",
    "--max-prefill-tokens": "4096",
}
# compare-preemption prices one request's swap and recompute: the memory settings only decide whether the deployment
# holds the weights and that request (kvplan.calc.preemption: capacity.kv_pool), so each is given a value that leaves
# no room, and the run must be refused
GATES = {"compare-preemption": {"--gpu-memory-utilization": "0.2", "--activation-reserve": "70GiB",
                                "--runtime-reserve": "70GiB"}}


def _shared_flags(command: str) -> list[str]:
    from kvplan.cli import _build
    from kvplan.commands.common import MEMORY_OPTIONS, SCENARIO_OPTIONS

    shared = {name for name, _, _ in SCENARIO_OPTIONS} | set(MEMORY_OPTIONS) | {"calibration", "generated"}
    return [p.opts[0] for p in _build(command).params if p.name in shared]


@pytest.mark.parametrize("command", list(WALK_BASE))
def test_every_shared_option_counts_or_is_refused(run_cli, tmp_path, command):
    """Before: ``explain-log`` and ``calibrate --host-link-gbs 3``, ``calibrate --block-size 256``, ``size`` with
    --block-size, --weights, --weight-dtype or --calibration, and ``compare-preemption --kv-pool 20GiB`` printed the
    same bytes as without the option."""
    from kvplan.cli import COMMANDS

    assert set(COMMANDS) - set(WALK_BASE) == {"check", "presets"}   # the two without the shared options
    cal = tmp_path / "cal.toml"   # factors unlike the preset's, for the deployment of ONE_GPU
    cal.write_text('type = "calibration"\nversion = 1\nmodel = "llama-3.1-8b"\nhardware = "h100-sxm"\n'
                   'engine = "vllm"\ntp = 1\n[step]\nhbm = 0.5\n[memory]\nruntime_reserve_bytes = 5000000000\n')
    gates = GATES.get(command, {})
    values = {**WALK_VALUES, "--calibration": str(cal), **gates}
    base = WALK_BASE[command]
    before = run_cli(command, *base, "-f", "json")
    assert before.code == 0, before.err
    ignored = []
    for flag in _shared_flags(command):
        if flag in base:
            continue
        r = run_cli(command, *base, flag, values[flag], "-f", "json")
        if flag in gates:
            one_line_refusal(r, "does not fit")
        elif r.code == 2:   # the same run without the option printed a plan: the option was read
            one_line_refusal(r)
        else:
            assert r.code == 0, (flag, r.err)
            if r.out == before.out:
                ignored.append(flag)
    assert not ignored, f"kvplan {command} takes {ignored} and prints the same"


def test_tpot_stops_at_max_num_seqs(run_cli):
    """Before: ``tpot --batch 8 --max-num-seqs 4`` priced a batch of 8 and said the replica runs 14 requests of this
    length, on an engine told to run 4. Llama-3.1-8B on one H100: a 31,008-token request (whole 16-token blocks)
    holds 32 layers x 2 x 8 KV heads x 128 x 2 B = 131,072 B per token, 4.06 GB; the ~57 GB pool holds over 10."""
    args = ("tpot", *ONE_GPU, "-f", "json")
    assert run_cli(*args).json()["max_batch_per_replica"] > 10
    capped = run_cli(*args, "--max-num-seqs", "10", "--batch", "4").json()
    assert capped["max_batch_per_replica"] == 10
    assert "--max-num-seqs" in capped["derivations"]["max_batch_per_replica"]["formula"]
    one_line_refusal(run_cli(*args, "--max-num-seqs", "10", "--batch", "11"), "--batch 11", "--max-num-seqs 10")


@pytest.mark.parametrize("text", [
    '[{"prompt_tokens": 1000, "output_tokens": 300}, {"prompt_tokens": 1000, "output_tokens": 300}]\n',
    '[\n{"prompt_tokens": 1000, "output_tokens": 300},\n{"prompt_tokens": 1000, "output_tokens": 300}\n]\n',
])
def test_a_json_array_trace_is_named_as_such(run_cli, tmp_path, text):
    """Before: a trace written as one JSON array (json.dump of a list) was read as a CSV whose header is the
    array: "has a header and no requests" or "line 2: 3 fields, the header has 1"."""
    trace = tmp_path / "trace.json"
    trace.write_text(text)
    one_line_refusal(run_cli("simulate", "-m", "qwq-32b", "--trace", str(trace)), "JSON array",
                     "one JSON object per line")


# --- --hardware h200 typed out is given ------------------------------------------------------------------------------
def test_hardware_h200_typed_out_is_taken_for_a_log(run_cli):
    """Before: ``explain-log LOG -g h200`` on a log that names no GPU planned on h100-sxm (the preset nearest its
    79.22 GiB) and warned "give --hardware with the GPU it ran on": h200 is the default, so typed out it read as not
    given."""
    r = run_cli("explain-log", "-m", "llama-3.1-8b", WALK_LOG, "-g", "h200", "-f", "json")
    assert r.code == 0, r.err
    assert r.json()["headline"].startswith("llama-3.1-8b on 1 x h200"), r.json()["headline"]
    assert "give --hardware with the GPU it ran on" not in r.out   # the warning for a GPU not given
    plain = run_cli("explain-log", "-m", "llama-3.1-8b", WALK_LOG, "-f", "json").json()
    assert plain["headline"].startswith("llama-3.1-8b on 1 x h100-sxm")


def test_hardware_h200_typed_out_is_the_one_gpu_a_target_search_tries(run_cli):
    """Before: ``recommend --target ... -g h200`` searched every GPU preset, as without -g."""
    r = run_cli("recommend", "-m", "qwq-32b", "--target", "concurrency>=16", "-g", "h200", "-f", "json")
    assert r.code == 0, r.err
    assert " x h200" in r.json()["headline"], r.json()["headline"]


def test_tpot_says_which_table_rows_it_leaves_out(run_cli):
    """Before: ``tpot --batches 1,2,1000000 --contexts 4k,99999999`` printed rows for batches 1, 2, 8 (the batch)
    and the most the pool holds, and the contexts 4,096 and 31,000, with no word of the 1,000,000 requests (more than
    the pool holds) or the 99,999,999-token context (over the model's limit) it was asked for."""
    r = run_cli("tpot", *ONE_GPU, "--batches", "1,2,1000000", "--contexts", "4k,99999999", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert 1_000_000 not in [row["batch"] for row in doc["table"]]
    said = " ".join(doc["notes"] + doc["warnings"])
    assert "--batches 1,000,000" in said and "--contexts 99,999,999" in said, said


def test_a_user_preset_named_h200_overrides_the_default_gpu(run_cli, tmp_path):
    """The default GPU (no -g) is looked up with --presets-dir like a named one: a user h200.toml of 100 GiB
    replaces the built-in 140.4 GiB, with and without -g h200 (100 x 2^30 = 107,374,182,400 B)."""
    from conftest import write_hardware

    folder = tmp_path / "mine"
    folder.mkdir()
    write_hardware(folder, hbm_gib=100.0, hw_id="h200")
    for args in ((), ("-g", "h200")):
        doc = run_cli("concurrency", "-m", "qwq-32b", "--presets-dir", str(folder), *args, "-f", "json").json()
        assert doc["budget"]["hbm_bytes"] == 107_374_182_400, args


# --- user28b: pd's fix hint names the degree that can shrink -------------------------------------------------------
@pytest.mark.parametrize("args, smaller", [
    (("--tp", "1", "--gpus", "2", "--pp", "2"), "or a smaller --pp)"),       # TP is 1 already: only PP can shrink
    (("--tp", "2", "--gpus", "2"), "or a smaller --tp)"),
    (("--tp", "2", "--gpus", "4", "--pp", "2"), "or a smaller --tp or --pp)"),
])
def test_pd_one_instance_hint_names_the_degree_that_can_shrink(run_cli, args, smaller):
    """Before: ``pd --tp 1 --gpus 2 --pp 2`` said "or a smaller --tp" (there is none below 1; --pp 2 is the cause)."""
    r = run_cli("pd", *LLAMA, *args)
    one_line_refusal(r, "disaggregation needs two", smaller)
    if args[1] == "1":
        assert "smaller --tp" not in r.err


# --- user28b: size --compare with the model sized ------------------------------------------------------------------
def test_size_compare_with_the_model_itself_is_refused(run_cli):
    """Before: ``size -m qwq-32b --compare qwq-32b`` printed the one model's table beside itself."""
    one_line_refusal(run_cli("size", "-m", "qwq-32b", "--compare", "qwq-32b"), "--compare qwq-32b",
                     "compared with itself")
    assert run_cli("size", "-m", "qwq-32b", "--compare", "qwen3-32b").code == 0    # another model still compares


# --- user28b: presets list names every built-in model ----------------------------------------------------------------
def test_presets_list_shows_a_name_for_every_built_in_model(run_cli):
    """Before: gpt-oss, Qwen3, QwQ and the R1 distills had names that were their ids in other capitals
    ("QwQ-32B"), which the terminal leaves out (present/presets.py), so the name column was blank for them."""
    r = run_cli("presets", "list", "-t", "model", "-f", "json")
    assert r.code == 0, r.err
    data = r.json()
    models = [e for e in (data["presets"] if isinstance(data, dict) else data) if e["type"] == "model"]
    assert len(models) >= 19
    blank = [e["id"] for e in models if not e["name"].strip() or e["name"].casefold() == e["id"].casefold()]
    assert blank == [], blank
    table = run_cli("presets", "list", "-t", "model").out
    row = next(line for line in table.splitlines() if line.strip().startswith("qwq-32b"))
    assert "QwQ-32B (32.5B dense" in row, row     # the model card's 32.5B parameters


# --- user28b: pd's TTFT in units that read, and a long TTFT with no target named -------------------------------------
QWQ_8 = ("-m", "qwq-32b", "-g", "h100-sxm", "--tp", "2", "--gpus", "8")


def first_screen(out: str) -> str:
    """The headline and the notes under it: the text before the first table."""
    return out.split("\nColocated:")[0]


def test_time_text_picks_the_unit():
    from kvplan.render.output import time_text

    # by hand: 537.7648 s stays s below 10 min; 14.5621 s = 14.6 s; 4.3336 s = 4,333.6 ms (below 10 s); 9,000 s = 2.5 h
    assert [time_text(x) for x in (0.0, 0.0005, 0.0382, 4.3336, 14.5621, 537.7648, 660.0, 9000.0)] == [
        "0.0 ms", "500.0 us", "38.2 ms", "4,333.6 ms", "14.6 s", "537.8 s", "11.0 min", "2.5 h"]


def test_pd_long_ttft_reads_in_seconds_and_is_named_without_a_target(run_cli):
    """Before: ``pd`` printed "TTFT p99 345,706.8 ms" at the colocated goodput rate of a 30K-prompt workload, and with
    no --ttft-slo counted it as goodput without a word."""
    import re

    r = run_cli("pd", *QWQ_8, "--prompt", "30k", "--decode", "1k")
    assert r.code == 0, r.err
    head = " ".join(first_screen(r.out).split())
    assert not re.search(r"\d{2},\d{3}\.\d ms", head), head       # no five-digit milliseconds
    assert "No TTFT target was given: at the goodput rate TTFT p99 is colocated's" in head, head
    assert "give --ttft-slo" in head
    # the note's figure is the one the colocated line prints at its goodput rate (one value, one text)
    ttft = re.search(r"\(Poisson\): TPOT p99 [\d.,]+ ms, TTFT p99 ([\d.,]+ (?:s|min))", head)
    assert ttft and f"colocated's {ttft.group(1)}" in head, head
    # a TTFT target given: goodput already counts only the requests meeting it; no note
    r = run_cli("pd", *QWQ_8, "--prompt", "30k", "--decode", "1k", "--ttft-slo", "20s")
    assert r.code == 0, r.err
    assert "No TTFT target" not in r.out


def test_pd_short_ttft_without_a_target_is_not_flagged(run_cli):
    r = run_cli("pd", *LLAMA, "--tp", "1", "--gpus", "2", "--prompt", "4k", "--decode", "300")
    assert r.code == 0, r.err
    assert "No TTFT target" not in r.out


# --- user28b: pd says it searched the layouts, and which it chose against the --tp given ------------------------------
def test_pd_names_the_layouts_it_chose_over_the_tp_given(run_cli):
    """Before: the headline said TP=2 x DP=4 while colocated was priced as 1 instance of TP8 and the split as TP1
    prefill + TP4 decode, without a word (pd searches each role's layout: issue 21)."""
    import re

    r = run_cli("pd", *QWQ_8)
    assert r.code == 0, r.err
    head = " ".join(first_screen(r.out).split())
    assert "TP=2 x PP=1 x DP=4" in head
    m = re.search(r"Layouts searched: .* not only the headline's 4 x TP2 \(--tp 2 given\): colocated (\d+) x TP(\d+), "
                  r"disaggregated (\d+) x TP(\d+) prefill \+ (\d+) x TP(\d+) decode\.", head)
    assert m, head
    # the note names the layouts the tables price: the colocated table's instances x GPUs, the split's TPs
    n, tp = int(m.group(1)), int(m.group(2))
    assert f"Colocated: {n} instance(s) of {tp} GPU(s)" in " ".join(r.out.split())
    data = run_cli("pd", *QWQ_8, "-f", "json").json()
    assert (data["prefill_tp"], data["decode_tp"]) == (int(m.group(4)), int(m.group(6)))
    assert (data["prefill_instances"], data["decode_instances"]) == (int(m.group(3)), int(m.group(5)))
    assert tp != 2 or int(m.group(4)) != 2 or int(m.group(6)) != 2     # a layout other than the one given
    # colocated keeps the headline's 4 x TP2 at 30K + 1K, the split does not (4 x TP1 + 1 x TP4): still said
    head = " ".join(first_screen(run_cli("pd", *QWQ_8, "--prompt", "30k", "--decode", "1k").out).split())
    assert "(--tp 2 given): colocated 4 x TP2, disaggregated 4 x TP1 prefill + 1 x TP4 decode." in head, head


def test_pd_says_nothing_of_layouts_when_it_kept_the_one_given(run_cli):
    # llama-3.1-8b, --tp 1 on 2 GPUs, 4K + 300: colocated 2 x TP1 and the split 1 x TP1 + 1 x TP1, the headline's own
    r = run_cli("pd", *LLAMA, "--tp", "1", "--gpus", "2", "--prompt", "4k", "--decode", "300", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    assert (d["colocated_tp"], d["prefill_tp"], d["decode_tp"], d["instances"]) == (1, 1, 1, 2)
    assert d["first_screen_notes"] == []


def test_pd_layouts_against_a_default_tp_are_the_first_note(run_cli):
    # no --tp: the headline's TP8 is kvplan's default (one node), so the layouts chosen lead the notes, not the verdict
    r = run_cli("pd", "--nodes", "2", "--kv-dtype", "fp8", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    # (the first screen carries the decode-dominant line of this reasoning case, not the layouts)
    assert not any(x.startswith("Layouts searched") for x in d["first_screen_notes"])
    assert d["reasons"][0].startswith("Layouts searched: ") and "(TP8 by default)" in d["reasons"][0]


# --- user29: a reasoning-workload user's pass (DeepSeek-R1 / QwQ / Qwen3 / gpt-oss on H100/H200/B200) -------------
DATA = Path(__file__).parent / "data"
TRACE_300 = DATA / "traces" / "kvplan_300.csv"   # 300 requests (one header line + 300 rows)


def test_requests_beyond_the_trace_are_refused(run_cli):
    """Before: ``simulate --trace kvplan_300.csv --requests 5000`` simulated the trace's 300 rows and said nothing of
    the 5,000 asked (an option given and silently not honoured)."""
    r = run_cli("simulate", "--trace", str(TRACE_300), "--requests", "5000")
    one_line_refusal(r, "--requests 5,000", "300")


def test_requests_within_the_trace_still_take_its_first_rows(run_cli):
    r = run_cli("simulate", "--trace", str(TRACE_300), "--requests", "300", "--brief")
    assert r.code == 0, r.err


@pytest.mark.parametrize("value", ["100000000000000000000", "99999999999", "9" * 5000])
def test_a_huge_token_count_in_a_trace_is_named_out_of_range(run_cli, tmp_path, value):
    """Before: a 20-digit prompt length read "is not a whole number of tokens" (it is one): the refusal names the
    range, as it does for 0 (the most: 10,000,000 tokens, kvplan.inputs.workload.MAX_TOKENS). 5,000 digits are
    refused unparsed (Python's int() refuses more than 4,300 digits)."""
    trace = tmp_path / "huge.csv"
    trace.write_text(f"prompt_tokens,output_tokens\n{value},10\n")
    r = run_cli("simulate", "--trace", str(trace))
    one_line_refusal(r, "line 2", "prompt_tokens", "1 .. 10,000,000")
    assert "not a whole number" not in r.err


def test_a_negative_token_count_in_a_trace_is_named_out_of_range(run_cli, tmp_path):
    trace = tmp_path / "neg.csv"
    trace.write_text("prompt_tokens,output_tokens\n-5,10\n")
    one_line_refusal(run_cli("simulate", "--trace", str(trace)), "line 2", "-5", "1 .. 10,000,000")


def test_a_plan_key_of_the_deployment_at_the_top_level_says_where_it_goes(run_cli, tmp_path):
    """The README says "a plan's ``calibration = "FILE.toml"``"; written at the top of the plan (not in
    [deployment]) it was refused as an unknown key, with a hint that never named [deployment]."""
    plan = tmp_path / "plan.toml"
    plan.write_text('calibration = "cal.toml"\n[deployment]\nmodel = "deepseek-r1"\n[[assert]]\n'
                    'metric = "weights_fit"\n')
    one_line_refusal(run_cli("check", str(plan)), "calibration", "a key of [deployment]")


def test_a_model_that_contradicts_the_log_is_refused(run_cli):
    """Before: ``explain-log`` of a log that names Qwen3-235B-A22B-FP8 (its launch line's --model) with
    ``-m qwq-32b`` planned QwQ on the log's pool (K size 11.21 GiB against the log's 8.23 GB), as --tp does not."""
    log = DATA / "logs" / "sglang-qwen3-235b-a22b-fp8-4xh100.log"
    one_line_refusal(run_cli("explain-log", str(log), "-m", "qwq-32b"), "--model qwq-32b", "qwen3-235b-a22b")
    # the preset the log names, given: planned as before
    assert run_cli("explain-log", str(log), "-m", "qwen3-235b-a22b", "--brief").code == 0


def test_a_model_that_contradicts_the_bench_result_is_refused(run_cli):
    """Before: calibrating qwq-32b to a ``vllm bench serve`` result whose model_id is meta-llama/Llama-3.1-8B-Instruct
    fitted hbm to its bound (rms error 190.8%) instead of naming the mismatch, as --engine does."""
    run = DATA / "calibration" / "vllm-bench-serve-c16.json"
    r = run_cli("calibrate", "-m", "qwq-32b", "-g", "h100-sxm", "--gpus", "1", "--engine", "vllm", str(run))
    one_line_refusal(r, "qwq-32b", "Llama-3.1-8B-Instruct", "llama-3.1-8b")
    # the preset the run names, given: fitted as before
    same = run_cli("calibrate", *LLAMA, "--gpus", "1", "--engine", "vllm", str(run), "--brief")
    assert same.code == 0, same.err


@pytest.mark.parametrize("weights", ["1B", "300GB"])
def test_weights_below_four_bits_a_parameter_are_refused(run_cli, weights):
    """Before: ``--weights 1B`` (one byte; the user meant 1 billion parameters, or a typo) planned DeepSeek-R1 with no
    weights (KV pool 124.32 GiB per GPU). DeepSeek-R1 has 671B parameters (its preset's params_total,
    huggingface.co/deepseek-ai/DeepSeek-R1); the narrowest weight kvplan models is 4 bits (int4 / nvfp4 / mxfp4
    without scales), so 671e9 x 0.5 B = 335.5 GB is the least its weights take: 300 GB and 1 B are refused."""
    one_line_refusal(run_cli("concurrency", "--weights", weights), "--weights", "deepseek-r1")


def test_weights_at_four_bits_a_parameter_are_read(run_cli):
    assert run_cli("concurrency", "--weights", "340GB", "--brief").code == 0   # 340e9 > 671e9 x 0.5 = 335.5e9


@pytest.mark.parametrize("typed, first", [("h200-sxm", "h200"), ("h100", "h100-sxm")])
def test_a_near_miss_gpu_names_the_preset_it_extends_first(run_cli, typed, first):
    """Before: ``-g h200-sxm`` suggested "h100-sxm or h200 or h20" (difflib's ratio ranks the shared "-sxm" above the
    GPU); a preset whose id is a prefix of the name typed (or that the name typed is a prefix of) comes first."""
    r = run_cli("size", "-g", typed)
    one_line_refusal(r, f"did you mean {first}")


@pytest.mark.parametrize("engine", ["neutral", "vllm", "sglang"])
def test_dram_that_the_run_never_uses_is_refused(run_cli, engine):
    """Before: ``simulate --dram 1TB`` under --policy recompute (every engine's default) with no --offload-threshold
    or HiCache printed "host DRAM per GPU 116.42 GiB" (1e12 / 8 / 2^30) and used none of it: recompute copies
    nothing out (kvplan.engines.scheduling.RuleBook._swap_out returns None), so the option was given and ignored."""
    r = run_cli("simulate", "--engine", engine, "--dram", "1TB", "--requests", "10")
    one_line_refusal(r, "--dram", "recompute")


@pytest.mark.parametrize("extra", [("--policy", "swap"), ("--offload-threshold", "0.7"),
                                   ("--compare", "policy=swap")])
def test_dram_where_the_run_uses_it_is_read(run_cli, extra):
    assert run_cli("simulate", "--dram", "1TB", "--requests", "10", *extra, "--brief").code == 0


def test_dram_with_hicache_is_read(run_cli):
    r = run_cli("simulate", "--engine", "sglang", "--enable-hicache", "--dram", "4TB", "--requests", "10", "--brief")
    assert r.code == 0, r.err


def test_pd_colocated_percentiles_name_the_rate_they_were_simulated_at(run_cli):
    """Before: pd's colocated table printed "batch under the SLO 65", "TPOT with prefills, mean (closed form) 21.01 ms"
    and "TPOT with prefills, p99 (simulated) 19.53 ms": a p99 below the mean, because the p99 is the Poisson run at
    the goodput rate (the verdict's "goodput 0.103 requests/s per instance (Poisson): TPOT p99 19.5 ms"), not at batch
    65; the disaggregated table already said "at the goodput rate". The rows now say it too."""
    r = run_cli("pd", "-m", "qwq-32b", "-g", "h100-sxm", "--nodes", "2", "-f", "markdown")
    assert r.code == 0, r.err
    colocated = r.out.split("### Colocated", 1)[1].split("### Disaggregated", 1)[0]
    assert "| TPOT at the goodput rate, p99 (simulated) |" in colocated, colocated
    assert "| TTFT at the goodput rate, p99 (simulated) |" in colocated, colocated


def test_recommend_counts_requests_with_thousands_separators(run_cli):
    """Before: the KV dtype row read "requests of 31,000 tokens per replica: bf16 1134, fp8 2268, nvfp4 4032 ...;
    nvfp4 would hold 4032" beside "batch 1,024" in the next row: every count of 1,000 or more has its separator.
    The reason is a Note of typed counts now, formatted by the output layer (the JSON's text as the table prints
    it, the counts themselves raw in requests_by_kv_dtype)."""
    import re

    r = run_cli("recommend", "-m", "gpt-oss-120b", "-g", "b200", "-f", "json")
    assert r.code == 0, r.err
    data = r.json()
    reason = next(row["reason"] for row in data["recommendations"] if row["key"] == "kv_dtype")
    assert re.search(r"(?<![\d,.])\d{4,}(?![\d,])", reason) is None, reason
    # the count in the text is the JSON's raw count (an int) printed with its separator
    fp8 = data["requests_by_kv_dtype"]["fp8"]
    assert isinstance(fp8, int) and fp8 >= 1000 and f"fp8 {fp8:,}" in reason, (fp8, reason)
    md = run_cli("recommend", "-m", "gpt-oss-120b", "-g", "b200", "-f", "markdown")   # the wide table, one line a row
    assert md.code == 0, md.err
    row = next(line for line in md.out.splitlines() if line.startswith("| KV dtype |"))
    assert f"fp8 {fp8:,}" in row and re.search(r"(?<![\d,.])\d{4,}(?![\d,])", row) is None, row
    # the launch flag quotes the row's first clause (its counts typed too), not the whole reason
    emit = run_cli("recommend", "-m", "gpt-oss-120b", "-g", "b200", "--emit", "vllm", "-f", "json")
    assert emit.code == 0, emit.err
    launch = emit.json()
    flag = next(f for f in launch["launch"]["flags"] if f["flag"] == "--kv-cache-dtype")
    vllm_fp8 = launch["requests_by_kv_dtype"]["fp8"]
    assert flag["reason"].startswith("requests of 31,000 tokens per replica: ") and ";" not in flag["reason"], flag
    assert f"fp8 {vllm_fp8:,}" in flag["reason"], flag
