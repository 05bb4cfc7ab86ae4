"""Hostile input found by fuzzing the CLI: every case is one line on stderr, exit 2, never a traceback."""

import json

import pytest


def _one_line_exit_2(r, needle):
    assert r.code == 2, (r.code, r.out[-300:], r.err)
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1, r.err
    assert "Traceback" not in r.err and "internal error" not in r.err
    assert needle.lower() in lines[0].lower(), lines[0]


@pytest.mark.parametrize("args,needle", [
    (("concurrency", "--dtypes", ","), "lists nothing"),
    (("size", "--contexts", ""), "lists nothing"),
    (("compare-preemption", "--pcie-gbps", "50Gb/s"), "bits"),
    (("concurrency", "--dram", "8Tb"), "bits"),
    (("concurrency", "--kv-pool", "1e-300GB"), "less than one byte"),
    (("concurrency", "--kv-pool", "1000TB"), "more than"),
    (("size", "--prompt", "1e-7"), "whole number"),
    (("concurrency", "--mtp-layers", "1M"), "absurd"),
    (("concurrency", "--spec-tokens", "100M"), "absurd"),
    (("compare-preemption", "--mfu", "1e-300"), "mfu"),
    (("compare-preemption", "--pcie-gbps", "1e-300"), "host link"),
    (("concurrency", "--tpot", "1e-300s"), "out of range"),
    (("concurrency", "--ep", "3"), "does not divide"),
    (("size", "-m", ""), "empty"),
    (("size", "-m", "x" * 300), "not a usable path"),
    (("size", "--bogus"), "no such option"),
    (("bogus",), "no such command"),
    (("presets", "show"), "missing argument"),
    (("tpot", "--request-overhead-us", "-1"), "--request-overhead-us"),
    (("tpot", "--allreduce-latency-us", "1e9"), "--allreduce-latency-us"),
    (("tpot", "--allreduce-latency-us", "fast"), "--allreduce-latency-us"),
    # a given pool is not sized from the GPU's memory: the options that would size it are refused, not ignored
    (("concurrency", "--kv-pool", "50GiB", "--gpu-memory-utilization", "0.8"), "--gpu-memory-utilization sizes"),
    (("simulate", "--engine", "sglang", "--kv-pool", "50GiB", "--mem-fraction-static", "0.8", "--requests", "10"),
     "--mem-fraction-static sizes the kv pool, which --kv-pool gives"),
    (("concurrency", "--kv-pool", "50GiB", "--activation-reserve", "2GiB"), "--activation-reserve sizes"),
])
def test_hostile_flags(run_cli, args, needle):
    _one_line_exit_2(run_cli(*args), needle)


def test_hostile_preset_files(run_cli, tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "binary.toml").write_bytes(b"\xff\xfe\x00type = 1")
    # one malformed file does not break the commands that do not use it: it is skipped with a warning naming it
    listed = run_cli("presets", "list", "--presets-dir", str(folder))
    assert listed.code == 0 and "binary.toml" in listed.err and "not UTF-8" in listed.err
    (folder / "binary.toml").unlink()

    model = ('type = "model"\nid = "m1"\nname = "m"\nsources = ["test"]\nnum_layers = 4\n[[groups]]\nname = "a"\n'
             'layers = { every = 0 }\nkind = { kind = "full_attention", kv_heads = 2, head_dim_k = 64, '
             'head_dim_v = 64 }\n')
    (folder / "m1.toml").write_text(model)
    _one_line_exit_2(run_cli("size", "-m", "m1", "--presets-dir", str(folder)), "layers")
    (folder / "m1.toml").write_text(model.replace("{ every = 0 }", '{ start = "a" }'))
    _one_line_exit_2(run_cli("size", "-m", "m1", "--presets-dir", str(folder)), "layers")
    (folder / "m1.toml").unlink()

    hw = (tmp_path / "hw.toml")
    base = open_preset("h100-sxm")
    hw.write_text(base.replace("theoretical_gb_s_per_direction = { value = 64", "theoretical_gb_s_per_direction = { "
                                                                                "value = 0"))
    _one_line_exit_2(run_cli("concurrency", "-m", "llama-3.1-8b", "-g", str(hw)), "must be positive")
    hw.write_text(base.replace('hbm_capacity_gib = { value = 79.65', 'hbm_capacity_gib = { value = nan'))
    _one_line_exit_2(run_cli("concurrency", "-m", "llama-3.1-8b", "-g", str(hw)), "finite")
    _one_line_exit_2(run_cli("size", "-m", str(hw)), "not a model")


@pytest.mark.parametrize("kind, preset, old, new, words", [
    # the limits kvplan.inputs.presets states: 1e14 parameters (about 100 x the largest model preset, 1.03e12),
    # 1e15 weight bytes, 1e6 for any hardware figure (about 76 x B300's 13,125 dense fp4 TFLOPS)
    ("models", "llama-3.1-8b", "params_total = { value = 8.03e9", "params_total = { value = 1e30",
     "params_total = 1e+30 is past the plausible limit of 1e+14"),
    ("models", "llama-3.1-8b", "params_total = { value = 8.03e9", "params_total = { value = 1.0001e14",
     "params_total = 1.0001e+14 is past the plausible limit of 1e+14"),
    ("models", "gpt-oss-20b", "weight_bytes = { value = ", "weight_bytes = { value = 2e15, was = ",
     "weight_bytes = 2e+15 is past the plausible limit of 1e+15"),
    ("hardware", "h100-sxm", "bf16 = { value = 989", "bf16 = { value = 1e9",
     "dense_tflops.bf16 = 1e+09 is past the plausible limit of 1e+06"),
    ("hardware", "h100-sxm", "host_dram_gb = { value = 2000", "host_dram_gb = { value = 2e6",
     "node.host_dram_gb = 2e+06 is past the plausible limit of 1e+06"),
])
def test_absurd_preset_figures_are_refused(run_cli, tmp_path, kind, preset, old, new, words):
    from kvplan.inputs.presets import builtin_dir

    text = (builtin_dir() / kind / f"{preset}.toml").read_text()
    assert old in text
    path = tmp_path / f"{preset}.toml"
    path.write_text(text.replace(old, new, 1))
    flag = "-m" if kind == "models" else "-g"
    _one_line_exit_2(run_cli("size", flag, str(path)), words)


def test_preset_figures_at_the_limit_are_read(run_cli, tmp_path):
    from kvplan.inputs.presets import builtin_dir

    text = (builtin_dir() / "hardware" / "h100-sxm.toml").read_text()
    path = tmp_path / "hw.toml"
    path.write_text(text.replace("host_dram_gb = { value = 2000", "host_dram_gb = { value = 1e6"))
    assert run_cli("size", "-g", str(path)).code == 0


def open_preset(preset_id):
    from kvplan.inputs.presets import builtin_dir

    return (builtin_dir() / "hardware" / f"{preset_id}.toml").read_text()


def test_hf_index_with_nan_total_size(run_cli, tmp_path):
    d = tmp_path / "llama"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "torch_dtype": "bfloat16"}))
    (d / "model.safetensors.index.json").write_text('{"metadata": {"total_size": NaN}, "weight_map": {}}')
    _one_line_exit_2(run_cli("size", "-m", str(d)), "total_size")


def test_fix_hint_respects_the_reserves_given(run_cli):
    # Llama-3.1-70B bf16 on H100 with a 40 GiB activation reserve: TP=2 cannot fit (70.6 GB of weights
    # per GPU + 42.9 GB), so the hint must name TP=8 (17.6 + 42.9 + 1.1 GB < 77.0 GB), not TP=2.
    r = run_cli("concurrency", "-m", "llama-3.1-70b", "-g", "h100-sxm", "--tp", "4", "--activation-reserve", "40GiB")
    _one_line_exit_2(r, "does not fit")
    assert "--tp 8 --pp 1" in r.err


def test_json_has_no_infinity(run_cli):
    r = run_cli("compare-preemption", "--bidir-factor", "0.01", "--pcie-gbps", "0.01", "-f", "json")
    assert r.code == 0, r.err
    json.loads(r.out, parse_constant=lambda c: pytest.fail(f"JSON contains {c}"))


def test_plain_kvplan_prints_help(run_cli):
    r = run_cli()
    assert r.code == 0 and "compare-preemption" in r.out


def test_long_decode_is_fast_and_bounded(run_cli):
    # Overflow timing bisects the decode steps instead of materialising 100M of them.
    r = run_cli("concurrency", "--decode", "99M", "--max-model-len", "100M", "-f", "json")
    assert r.code == 0, r.err
    assert r.json()["overflow"][0]["decode_steps_until_full"] is not None


@pytest.mark.parametrize("args,needle", [
    (("concurrency", "--mem-fraction-static", "0.5"), "not a setting of --engine neutral"),
    (("concurrency", "--engine", "sglang", "--activation-reserve", "2GiB"), "not a setting of --engine sglang"),
    (("concurrency", "--engine", "sglang", "--block-size", "16", "--gpus", "9"), "--gpus 9"),
    (("concurrency", "--engine", "sglang", "--gpu-memory-utilization", "0.5"), "mem-fraction-static"),
    # tpot and size never move KV over the host link: the rate would change nothing (their output was the same)
    (("tpot", "--host-link-gbs", "3"), "changes nothing in kvplan tpot: only concurrency"),
    (("size", "--pcie-gbps", "3"), "changes nothing in kvplan size"),
])
def test_options_that_would_be_ignored_are_refused(run_cli, args, needle):
    _one_line_exit_2(run_cli(*args), needle)


def test_host_link_still_counts_where_it_is_used(run_cli):
    # concurrency's --dram offload crosses the link: a 3 GB/s link moves the same KV slower than the preset's
    args = ("concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--dram", "100GiB", "-f", "json")
    assert run_cli(*args).out != run_cli(*args, "--host-link-gbs", "3").out
    assert "--host-link-gbs" in run_cli("concurrency", "--help").out
    assert "--host-link-gbs" not in run_cli("tpot", "--help").out


def test_fix_hint_counts_the_request_at_each_parallelism(run_cli):
    # Llama-3.1-70B bf16, one H100, a 127k-token request: TP=1 cannot hold the weights. At TP=4 a request
    # takes 80 x 2 heads x 256 x 2 B x 127,008 tokens = 10.4 GB per GPU, and the 4-GPU pool (~37 GB) holds it,
    # so the hint is 4 GPUs, not 8.
    r = run_cli("concurrency", "-m", "llama-3.1-70b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--decode", "126k")
    _one_line_exit_2(r, "does not fit")
    assert "--tp 4 --pp 1" in r.err


def test_brief_keeps_the_warning_that_overturns_its_answer(run_cli):
    # Llama-3.1-8B, 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B/token; a 4,000,000-token request
    # needs 4e6 x 131,072 B = 488.28 GiB, more than one H200 holds: vLLM refuses to start, so the capacity the
    # brief prints must come with that warning
    r = run_cli("concurrency", "--engine", "vllm", "-m", "llama-3.1-8b", "--tp", "1", "--max-model-len", "4M",
                "--decode", "10k", "--brief")
    assert r.code == 0 and "warning: vLLM would refuse to start" in r.out and "488.28 GiB" in r.out, r.out
    # no host DRAM to swap into: the verdict "recompute" rests on that, so --brief says it
    r = run_cli("compare-preemption", "--dram", "1MiB", "--brief")
    # 1 MiB = 1,048,576 B, in IEC units
    assert r.code == 0 and "warning: Recompute: swapping is impossible" in r.out and "1.00 MiB of host DRAM" in r.out
    assert "warning:" not in run_cli("compare-preemption", "--brief").out


def test_version_and_short_help(run_cli):
    # the version is pyproject.toml's (the wheel's metadata); -h is --help at every level
    from importlib import import_module
    from pathlib import Path

    from conftest import TOML_MODULE

    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    version = import_module(TOML_MODULE).loads(pyproject)["project"]["version"]
    r = run_cli("--version")
    assert r.code == 0 and r.out == f"kvplan {version}\n"
    for args in ((), ("size",), ("check",), ("presets", "list")):
        short, long = run_cli(*args, "-h"), run_cli(*args, "--help")
        assert short.code == long.code == 0 and short.out == long.out and "Usage: kvplan" in short.out
