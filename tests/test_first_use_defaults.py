"""Issue 18, "A default the user never set must not refuse the plan" and "Messages and files": what a new user
trips over with kvplan's defaults, each pinned by a test that failed before the fix.

The model configs are minimal config.json files with the fields kvplan reads, copied from the Hugging Face repos
they mirror (no network): microsoft/phi-4 (max_position_embeddings 16,384) and Qwen/Qwen1.5-7B (the model of vLLM's
tests/v1/core/test_kv_cache_utils.py max-concurrency case).
"""

from __future__ import annotations

import json

import pytest

# microsoft/phi-4 config.json (huggingface.co/microsoft/phi-4/blob/main/config.json): Phi3ForCausalLM, 40 layers,
# 40 query heads, 10 KV heads of 5120 / 40 = 128, a 16,384-token context
PHI4 = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 5120, "intermediate_size": 17920,
        "num_attention_heads": 40, "num_key_value_heads": 10, "num_hidden_layers": 40,
        "max_position_embeddings": 16384, "vocab_size": 100352, "torch_dtype": "bfloat16"}
# Qwen/Qwen1.5-7B config.json (huggingface.co/Qwen/Qwen1.5-7B/blob/main/config.json): Qwen2ForCausalLM, 32 layers,
# 32 query and 32 KV heads of 4096 / 32 = 128, a 32,768-token context
QWEN15_7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 4096,
             "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 32,
             "max_position_embeddings": 32768, "vocab_size": 151936, "torch_dtype": "bfloat16",
             "tie_word_embeddings": False}


def model_dir(tmp_path, config: dict, name: str):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


# --- a default request fits the model's limit ------------------------------------------------------------------
def test_size_of_phi4_fits_the_default_request_and_says_so(run_cli, tmp_path):
    r = run_cli("size", "-m", model_dir(tmp_path, PHI4, "phi-4"), "-f", "json")
    assert r.code == 0, r.err
    data = r.json()
    # keep the 1,000-token prompt, shorten the 30,000-token decode to 16,384 - 1,000 = 15,384
    assert data["prompt_tokens"] == 1000
    assert data["decode_tokens"] == 15384
    assert "30,000" in data["headline"] and "16,384" in data["headline"]
    # phi-4's KV per token: 2 (K and V) x 40 layers x 10 heads x 128 x 2 bytes (bf16) = 204,800 B; x 16,384 tokens
    assert data["kv_bytes_per_token"] == 204800
    assert data["peak_kv_bytes_per_request"] == 204800 * 16384


def test_the_table_says_on_its_first_lines_that_the_decode_was_shortened(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")   # the whole first line on one line
    r = run_cli("size", "-m", model_dir(tmp_path, PHI4, "phi-4"))
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert first.endswith("1,000 + 15,384 tokens (the default decode of 30,000 shortened to fit phi-4's maximum "
                          "context of 16,384)"), first


def test_a_request_the_user_gave_is_still_refused(run_cli, tmp_path):
    phi4 = model_dir(tmp_path, PHI4, "phi-4")
    for args in (("--decode", "30k"), ("--prompt", "20k"), ("--prompt", "1k", "--decode", "16k")):
        r = run_cli("size", "-m", phi4, *args)
        assert r.code == 2, (args, r.out)
        assert "exceed" in r.err and "16,384" in r.err


def test_a_given_decode_keeps_and_a_default_prompt_shortens(run_cli, tmp_path):
    # --decode 16,000 given, the prompt not: the prompt shrinks to 16,384 - 16,000 = 384
    r = run_cli("size", "-m", model_dir(tmp_path, PHI4, "phi-4"), "--decode", "16000", "-f", "json")
    assert r.code == 0, r.err
    data = r.json()
    assert (data["prompt_tokens"], data["decode_tokens"]) == (384, 16000)


def test_concurrency_of_qwen15_7b_at_max_model_len_16384_as_vllms_test(run_cli, tmp_path):
    """vLLM's test_kv_cache_utils.py (test_get_max_concurrency_for_kv_cache_config): Qwen1.5-7B, max_model_len
    16,384. Its KV per token is 2 x 32 layers x 32 heads x 128 x 2 bytes = 524,288 B, so an 8 GiB pool holds
    8 x 2^30 / 524,288 = 16,384 tokens on the one GPU: one request of the fitted 1,000 + 15,384 tokens (vLLM's
    1.0)."""
    r = run_cli("concurrency", "--engine", "vllm", "--max-model-len", "16384", "--kv-pool", "8GiB", "--gpus", "1",
                "-m", model_dir(tmp_path, QWEN15_7B, "Qwen1.5-7B"), "-f", "json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["decode_tokens"] == 16384 - 1000
    assert data["max_concurrency"] == 1


def test_python_scenario_follows_the_same_rule(tmp_path):
    from kvplan import Scenario
    from kvplan.errors import ScenarioError

    phi4 = model_dir(tmp_path, PHI4, "phi-4")
    s = Scenario(model=phi4, hardware="h100-sxm", tp=1)
    assert (s.prompt_tokens, s.decode_tokens) == (1000, 15384)
    assert "15,384" in s.headline() and "30,000" in s.headline()
    with pytest.raises(ScenarioError, match="16,384"):
        Scenario(model=phi4, hardware="h100-sxm", tp=1, decode="30k")
    with pytest.raises(ScenarioError, match="16,384"):
        Scenario(model=phi4, hardware="h100-sxm", tp=1, decode_tokens=30000)
    # a copy keeps the default unset: a longer limit gives the whole default decode back
    longer = s.with_(max_model_len=20000)
    assert (longer.prompt_tokens, longer.decode_tokens) == (1000, 19000)
    # a model with room for the default request is planned at it, said nowhere
    r1 = Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1)
    assert (r1.prompt_tokens, r1.decode_tokens) == (1000, 30000) and "shortened" not in r1.headline()


def test_a_limit_below_the_default_prompt_shortens_both(tmp_path):
    from kvplan import Scenario

    s = Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, max_model_len=512)
    # the 1,000-token prompt leaves no decode: half the limit each
    assert (s.prompt_tokens, s.decode_tokens) == (256, 256)


def test_an_engine_log_below_31k_plans_without_a_request(run_cli):
    """vLLM 0.6 on an RTX 3090 with max_model_len 29,000 (tests/data/logs, its line 7): the default request fitted
    into it, 1,000 + 28,000 tokens; a --decode the user gives is still checked against the log's limit."""
    from pathlib import Path

    log = str(Path(__file__).parent / "data" / "logs" / "vllm-v0.6-llama3.1-8b-rtx3090.log")
    r = run_cli("explain-log", log, "-m", "llama-3.1-8b", "-f", "json")
    assert r.code == 0, r.err
    assert (r.json()["prompt_tokens"], r.json()["decode_tokens"]) == (1000, 29000 - 1000)
    given = run_cli("explain-log", log, "-m", "llama-3.1-8b", "--decode", "30k")
    assert given.code == 2 and "29,000" in given.err


# --- the first line wraps at the output width ------------------------------------------------------------------
@pytest.mark.parametrize("width", [80, 100])
def test_the_first_line_wraps_at_the_width(run_cli, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    for args in (("size",), ("concurrency", "--engine", "vllm", "--kv-dtype", "fp8"), ("size", "--brief")):
        r = run_cli(*args)
        assert r.code == 0, r.err
        lines = r.out.splitlines()
        assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
        # the headline's words are all there, in order, over its first lines
        assert " ".join(lines[:3]).startswith("deepseek-r1 on 8 x h200: TP=8")


# --- messages and files ------------------------------------------------------------------------------------------
def test_a_workload_that_is_a_device_is_refused_as_a_file(run_cli):
    r = run_cli("simulate", "--workload", "/dev/zero", "--requests", "10")
    assert r.code == 2
    assert "unknown workload" not in r.err and "/dev/zero" in r.err and "character device" in r.err


def _fix_flags(err: str) -> list[str]:
    """The flags and values of an error's fix hint, up to its first ", or" (what a user pastes)."""
    import re

    hint = err.split("(fix: ", 1)[1].split(", or", 1)[0]
    return [part for flag, value in re.findall(r"(--[a-z-]+) ([0-9]+)", hint) for part in (flag, value)]


@pytest.mark.parametrize("args", [
    ("-m", "qwq-32b", "-g", "h100-sxm", "--gpus", "2"),             # the case: TP 2 on 2 GPUs, one instance
    ("-m", "qwq-32b", "-g", "h100-sxm", "--tp", "8"),               # one node, one TP-8 instance
    ("-m", "qwq-32b", "-g", "h100-sxm", "--tp", "4", "--dp", "1"),  # a DP the user pinned at 1
])
def test_every_pd_fix_hint_changes_the_outcome_when_pasted(run_cli, args):
    r = run_cli("pd", *args)
    assert r.code == 2 and "disaggregation needs two" in r.err
    flags = _fix_flags(r.err)
    assert flags, r.err
    pasted = run_cli("pd", *args, *flags)
    assert pasted.code == 0, (flags, pasted.err)


def test_a_check_plan_with_two_gpus_names_the_key_that_fixes_it(run_cli, tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text('[deployment]\nmodel = "qwq-32b"\nhardware = "h100-sxm"\ngpus = 2\n[[assert]]\n'
                    'metric = "pd_disaggregation_pays"\n')
    r = run_cli("check", str(plan))
    assert r.code == 2 and "deployment.nodes 1" not in r.err
    assert "deployment.tp 2 deployment.gpus 4" in r.err, r.err   # two TP-2 instances
    plan.write_text(plan.read_text().replace("gpus = 2", "gpus = 4\ntp = 2"))
    assert run_cli("check", str(plan)).code in (0, 1)   # evaluated: the verdict, pass or fail


def test_a_batch_that_no_longer_fits_is_a_failed_assertion(run_cli, tmp_path):
    """A TPOT assertion at batch 1,000 on DeepSeek-R1 / 8 x H200 at FP8: the pool holds far fewer 31K-token
    requests (tests/test_check.py's case), so the plan fails its assertion (exit 1), it is not an invalid plan."""
    plan = tmp_path / "plan.toml"
    plan.write_text('[deployment]\nmodel = "deepseek-r1"\nhardware = "h200"\nkv_dtype = "fp8"\nengine = "vllm"\n'
                    '[[assert]]\nmetric = "tpot_seconds"\nat_most = "40ms"\nbatch = 1000\n')
    r = run_cli("check", str(plan), "-f", "json")
    assert r.code == 1, r.err
    result = r.json()["plans"][0]["assertions"][0]
    assert result["passed"] is False and result["measured"] is None
    # the pool holds 42 such requests (the same deployment's max_concurrency in tests/test_check.py's failing plan)
    assert "assert[1].batch 1000 does not fit: one replica's KV pool holds 42 requests" in result["detail"]


BASELINE_PLAN = ('[deployment]\nmodel = "llama-3.1-8b"\nhardware = "h100-sxm"\ntp = 1\ngpus = 1\n'
                 '[[assert]]\nname = "concurrency"\nmetric = "max_concurrency"\nwithin_baseline = "5%"\n')


def test_a_baseline_that_is_a_symlink_loop_is_reported_as_one(run_cli, tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(BASELINE_PLAN)
    (tmp_path / "plan.baseline.json").symlink_to(tmp_path / "other.json")
    (tmp_path / "other.json").symlink_to(tmp_path / "plan.baseline.json")
    r = run_cli("check", str(plan))
    assert r.code == 2
    assert "no baseline" not in r.err and "symlink loop" in r.err, r.err
    assert "remove the link" in r.err   # --update-baseline alone would be refused (the next test)


def test_update_baseline_does_not_write_through_a_symlink(run_cli, tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(BASELINE_PLAN)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "plan.baseline.json").symlink_to(victim)
    r = run_cli("check", str(plan), "--update-baseline")
    assert r.code == 2 and "symbolic link" in r.err, r.err
    assert victim.read_text() == "keep me\n"


def test_an_unreachable_hub_fails_fast_and_says_how_to_go_offline(run_cli, monkeypatch):
    """--model org/name, not cached, HF_HUB_OFFLINE unset, the Hub unreachable (simulated: the library's HTTP
    session cannot connect; nothing touches the network): one quick connection attempt, then a one-line error that
    names HF_HUB_OFFLINE. The library's own download (which retries for ~24 s) is never called."""
    import time

    hub = pytest.importorskip("huggingface_hub")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", False)
    attempts = []

    class Unreachable:
        def head(self, url, timeout=None, **kwargs):
            attempts.append(timeout)
            raise OSError("[Errno 101] Network is unreachable")

    def no_download(*args, **kwargs):
        raise AssertionError("the library's download (and its retries) ran against an unreachable Hub")

    monkeypatch.setattr(hub, "get_session", lambda: Unreachable())
    monkeypatch.setattr(hub, "hf_hub_download", no_download)
    monkeypatch.setattr(hub, "get_safetensors_metadata", no_download)
    start = time.monotonic()
    r = run_cli("size", "-m", "some-org/some-model")
    assert time.monotonic() - start < 5
    assert r.code == 2 and "cannot be reached" in r.err and "HF_HUB_OFFLINE=1" in r.err, r.err
    assert len(attempts) == 1 and attempts[0] is not None and attempts[0] <= 5   # one short attempt


@pytest.mark.parametrize("command", [("explain-log",), ("concurrency", "--from-log")])
def test_an_absurd_sglang_log_is_blamed_not_kv_pool(run_cli, tmp_path, command):
    """tests/data/logs' SGLang Qwen3-235B log with its K and V sizes made 8,230 GB each: 16,460 GiB per GPU, over
    an H200's 140.4 GiB. The user gave no --kv-pool: the message names the log's figure."""
    from pathlib import Path

    text = (Path(__file__).parent / "data" / "logs" / "sglang-qwen3-235b-a22b-fp8-4xh100.log").read_text()
    assert "K size: 8.23 GB, V size: 8.23 GB" in text
    log = tmp_path / "absurd.log"
    log.write_text(text.replace("K size: 8.23 GB, V size: 8.23 GB", "K size: 8230 GB, V size: 8230 GB"))
    r = run_cli(*command, str(log))
    assert r.code == 2
    assert "--kv-pool" not in r.err and "16,460.00 GiB" in r.err and "the start-up log" in r.err, r.err
