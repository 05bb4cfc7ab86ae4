"""Hostile files and paths (found by fuzzing the CLI): each is a one-line error naming what is wrong and a fix,
exit 2, or a warning and exit 0 when the bad file is not the one asked for. Never a traceback, an "internal
error", or a hang (every test here runs under an alarm, so a FIFO that blocks fails the test instead)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvplan.inputs import presets

TINY = ('type = "model"\nid = "{id}"\nname = "Tiny"\nsources = ["made up for a test"]\nnum_layers = 2\n'
        '[[groups]]\nname = "attn"\nlayers = "all"\n'
        'kind = {{ kind = "full_attention", kv_heads = 2, head_dim_k = 64, head_dim_v = 64 }}\n')
LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1000, "torch_dtype": "bfloat16"}


class Hang(Exception):
    pass


@pytest.fixture(autouse=True)
def guard():
    """Fail (not hang) when a command blocks."""
    def on_alarm(signum, frame):
        raise Hang("the command blocked for 10 s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def error_line(r, *needles: str) -> str:
    """The run failed as bad input: exit 2, one "error:" line (after any warnings), naming each needle."""
    assert r.code == 2, (r.code, r.out[-300:], r.err)
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    lines = r.err.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], r.err
    assert all(line.startswith("warning: ") for line in lines[:-1]), r.err
    assert "(fix: " in errors[0], errors[0]
    for needle in needles:
        assert needle.lower() in errors[0].lower(), (needle, errors[0])
    return errors[0]


def ok(r, *warned: str):
    """The run succeeded; stderr holds only warnings, one naming each of ``warned``."""
    assert r.code == 0, (r.code, r.err)
    lines = r.err.splitlines()
    assert all(line.startswith("warning: ") for line in lines), r.err
    for needle in warned:
        assert any(needle in line for line in lines), (needle, r.err)
    return r


def nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


# --- nesting ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [40, 100_000])
def test_deeply_nested_config_json(run_cli, tmp_path, depth):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "x": ' + nested(depth) + "}")
    error_line(run_cli("size", "-m", str(cfg)), "nests", str(cfg))


def test_deeply_nested_safetensors_index(run_cli, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    (tmp_path / "model.safetensors.index.json").write_text(nested(100_000))
    error_line(run_cli("size", "-m", str(tmp_path)), "safetensors index", "nests")


def test_deeply_nested_toml_preset_file(run_cli, tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text('type = "model"\nx = ' + nested(5000) + "\n")
    error_line(run_cli("size", "-m", str(deep)), "nests")
    deep.write_text('type = "model"\nx = ' + nested(5000, "{a=", "}") + "\n")
    error_line(run_cli("size", "-m", str(deep)), "deep.toml")


def test_nested_toml_in_presets_folder_breaks_only_itself(run_cli, tmp_path):
    (tmp_path / "deep.toml").write_text("x = " + nested(5000) + "\n")
    (tmp_path / "tiny.toml").write_text(TINY.format(id="tiny"))
    ok(run_cli("size", "-m", "tiny", "--presets-dir", str(tmp_path), "--brief"), "deep.toml")
    ok(run_cli("presets", "list", "--presets-dir", str(tmp_path)), "deep.toml")
    error_line(run_cli("size", "-m", "deep", "--presets-dir", str(tmp_path)), "deep.toml", "nests")


# --- malformed presets -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad_id,shown", [('["a", "b"]', "['a', 'b']"), ("5", "5"), ("{ x = 1 }", "{'x': 1}")])
def test_preset_id_not_text(run_cli, tmp_path, bad_id, shown):
    (tmp_path / "odd.toml").write_text(TINY.format(id="x").replace('id = "x"', f"id = {bad_id}"))
    (tmp_path / "tiny.toml").write_text(TINY.format(id="tiny"))
    r = ok(run_cli("presets", "list", "--presets-dir", str(tmp_path), "-f", "json"), "odd.toml")
    assert "tiny" in {p["id"] for p in r.json()["presets"]}
    assert shown in r.err
    error_line(run_cli("size", "-m", "odd", "--presets-dir", str(tmp_path)), "odd.toml", "id")


@pytest.mark.parametrize("groups", ["groups = [1, 2]", 'groups = "x"', "groups = 3", "groups = [[1]]"])
def test_groups_not_a_list_of_tables(run_cli, tmp_path, groups):
    path = tmp_path / "g.toml"
    path.write_text('type = "model"\nid = "g"\nname = "g"\nsources = ["abc"]\nnum_layers = 4\n' + groups + "\n")
    error_line(run_cli("size", "-m", str(path)), "groups", "[[groups]] tables")


@pytest.mark.parametrize("layers", ["{ start = 0, stop = 1000000000000 }", "{ stop = 9223372036854775807 }",
                                    "{ start = 3, stop = 2 }"])
def test_layer_range_checked_before_it_is_built(run_cli, tmp_path, layers):
    path = tmp_path / "r.toml"
    path.write_text(TINY.format(id="r").replace('layers = "all"', f"layers = {layers}"))
    start = time.monotonic()
    error_line(run_cli("size", "-m", str(path)), "groups.0.layers", "not a range within 0..2")
    assert time.monotonic() - start < 5


def test_every_problem_of_a_model_preset_at_once(run_cli, tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('type = "model"\nid = "m"\nname = 3\nnum_layers = -4\nweight_dtype = "fp7"\n'
                    'params_total = { value = -1, source = "abc" }\n[[groups]]\nname = "a"\n'
                    'layers = { start = "x" }\nkind = { kind = "full_attention", kv_heads = -1, head_dim_k = 64, '
                    'head_dim_v = 64 }\n')
    line = error_line(run_cli("size", "-m", str(path)))
    for problem in ("num_layers = -4", "weight_dtype = 'fp7'", "params_total: must be positive", "name:",
                    "sources: Field required", "groups.0.layers = {'start': 'x'} is not understood", "kv_heads"):
        assert problem in line, (problem, line)


def test_every_problem_of_a_hardware_preset_at_once(run_cli, tmp_path):
    base = (presets.builtin_dir() / "hardware" / "h100-sxm.toml").read_text()
    bad = (base.replace("hbm_capacity_gib = { value = 79.65", "hbm_capacity_gib = { value = -1")
           .replace("gpus_per_node = 8", 'gpus_per_node = "x"').replace("\nbf16 = ", "\nfp9 = ")
           .replace("large_copy_efficiency = { value = 0.87", "large_copy_efficiency = { value = 1.5"))
    path = tmp_path / "hw.toml"
    path.write_text(bad)
    line = error_line(run_cli("size", "-g", str(path)))
    for problem in ("hbm_capacity_gib: must be positive", "fp9", "node.gpus_per_node", "large_copy_efficiency"):
        assert problem in line, (problem, line)
    # the same file in a presets folder: named in a warning-free list, its errors when asked for by id
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "hw.toml").write_text(bad.replace('id = "h100-sxm"', 'id = "my-gpu"'))
    r = ok(run_cli("presets", "list", "--presets-dir", str(folder), "-f", "json"))
    assert "my-gpu" in {p["id"] for p in r.json()["presets"]}
    error_line(run_cli("presets", "show", "my-gpu", "--presets-dir", str(folder)), "hbm_capacity_gib", "fp9")


def test_malformed_file_in_env_folder_does_not_break_other_commands(run_cli, tmp_path, monkeypatch):
    (tmp_path / "broken.toml").write_text('type = "model"\nid = "broken"\nnum_layers = [\n')
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe\x00type = 1")
    (tmp_path / "notype.toml").write_text('id = "x"\n')
    monkeypatch.setenv(presets.ENV_VAR, str(tmp_path))
    ok(run_cli("size", "--brief"), "broken.toml", "bin.toml", "notype.toml")
    error_line(run_cli("size", "-m", "broken"), "broken.toml", "not valid TOML")
    error_line(run_cli("size", "-m", "bin"), "bin.toml", "UTF-8")


def test_broken_user_file_shadows_the_builtin_of_its_name(run_cli, tmp_path):
    (tmp_path / "h200.toml").write_text('type = "hardware"\nid = [\n')
    error_line(run_cli("size", "-g", "h200", "--presets-dir", str(tmp_path)), "h200.toml")


# --- special files and paths -----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_device_as_model_or_hardware(run_cli, device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    error_line(run_cli("size", "-m", device), "character device", "not a file")
    error_line(run_cli("size", "-g", device), "character device")


@pytest.mark.parametrize("name", ["fifo.json", "fifo.toml", "fifo"])
def test_fifo_as_model_is_never_opened(run_cli, tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    error_line(run_cli("size", "-m", str(fifo)), "FIFO", "not a file")


def test_fifo_config_json_in_model_folder(run_cli, tmp_path):
    os.mkfifo(tmp_path / "config.json")
    error_line(run_cli("size", "-m", str(tmp_path)), "FIFO")
    (tmp_path / "config.json").unlink()
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    os.mkfifo(tmp_path / "model.safetensors.index.json")
    error_line(run_cli("size", "-m", str(tmp_path)), "safetensors index", "FIFO")


def test_symlink_loop_as_model(run_cli, tmp_path):
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    error_line(run_cli("size", "-m", str(loop)), "symlink loop")
    error_line(run_cli("size", "-m", str(tmp_path / "loop.json" / "x")), "loop.json")


def test_dangling_symlink_as_model(run_cli, tmp_path):
    link = tmp_path / "gone.json"
    link.symlink_to(tmp_path / "nowhere.json")
    error_line(run_cli("size", "-m", str(link)), "symlink", "does not exist")


@pytest.mark.parametrize("via_env", [False, True])
def test_fifo_in_presets_folder_is_skipped(run_cli, tmp_path, monkeypatch, via_env):
    os.mkfifo(tmp_path / "pipe.toml")
    (tmp_path / "tiny.toml").write_text(TINY.format(id="tiny"))
    args = ("size", "-m", "tiny", "--brief")
    if via_env:
        monkeypatch.setenv(presets.ENV_VAR, str(tmp_path))
    else:
        args += ("--presets-dir", str(tmp_path))
    ok(run_cli(*args), "pipe.toml", "FIFO")
    ok(run_cli("presets", "list", *args[4:]), "pipe.toml")
    error_line(run_cli("size", "-m", "pipe", *args[4:]), "pipe.toml", "FIFO")


def test_symlink_out_of_presets_folder_is_refused(run_cli, tmp_path):
    folder, outside = tmp_path / "p", tmp_path / "elsewhere"
    folder.mkdir()
    outside.mkdir()
    (outside / "secret.toml").write_text(TINY.format(id="secret"))
    (folder / "secret.toml").symlink_to(outside / "secret.toml")
    (folder / "models").symlink_to(outside, target_is_directory=True)
    (folder / "real.toml").write_text(TINY.format(id="real"))
    (folder / "alias.toml").symlink_to(folder / "real.toml")  # inside the folder: fine
    r = ok(run_cli("presets", "list", "--presets-dir", str(folder), "-f", "json"), "outside the presets folder")
    ids = {p["id"] for p in r.json()["presets"]}
    assert "real" in ids and "secret" not in ids
    error_line(run_cli("size", "-m", "secret", "--presets-dir", str(folder)), "outside the presets folder")


def test_subfolder_named_toml_is_skipped(run_cli, tmp_path):
    (tmp_path / "dir.toml").mkdir()
    ok(run_cli("presets", "list", "--presets-dir", str(tmp_path)), "dir.toml")


@pytest.mark.parametrize("make", ["long", "file", "fifo", "loop"])
def test_bad_presets_folder(run_cli, tmp_path, make):
    target = tmp_path / "p"
    if make == "long":
        target = tmp_path / ("x" * 5000)
    elif make == "file":
        target.write_text("")
    elif make == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(target)
    needle = {"long": "too long", "file": "not a folder", "fifo": "FIFO", "loop": "symlink loop"}[make]
    error_line(run_cli("presets", "list", "--presets-dir", str(target)), "presets folder", needle)


def test_unknown_home_directory(run_cli):
    error_line(run_cli("size", "-m", "~nosuchuser-kvplan"), "~nosuchuser-kvplan", "full path")
    error_line(run_cli("size", "-g", "~nosuchuser-kvplan/x.toml"), "cannot expand")


@pytest.mark.parametrize("ref", ["a" * 300, "a/" * 3000, "x" * 250])
def test_names_too_long_for_the_file_system(run_cli, ref):
    r = run_cli("size", "-m", ref)
    line = error_line(r)
    assert len(line) < 600, len(line)


# --- what an error line may quote -------------------------------------------------------------------------------

def test_newline_in_path_stays_on_one_line(run_cli, tmp_path):
    odd = tmp_path / "new\nline\rand\x1bescape"
    odd.mkdir()
    line = error_line(run_cli("size", "-m", str(odd / "config.json")), "does not exist")
    assert "new\\nline\\rand\\x1bescape" in line


def test_huge_config_value_is_not_echoed_whole(run_cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**LLAMA, "num_hidden_layers": "7" * 5_000_000 + "\n"}))
    line = error_line(run_cli("size", "-m", str(cfg)), "num_hidden_layers", "chars")
    assert len(line) < 600, len(line)


def test_huge_file_is_refused_unread(run_cli, tmp_path):
    cfg = tmp_path / "config.json"
    with cfg.open("wb") as fh:
        fh.truncate(presets.MAX_FILE_BYTES + 1)  # sparse: no disk used
    error_line(run_cli("size", "-m", str(cfg)), "too big")


def test_huge_number_text_is_fast(run_cli):
    start = time.monotonic()
    error_line(run_cli("size", "--prompt", "9" * 50_000 + "x"), "too long to be a number")
    error_line(run_cli("concurrency", "--kv-pool", "1" * 50_000 + "GiB"), "too long")
    error_line(run_cli("size", "--decode", "1e308k"), "absurdly large")
    assert time.monotonic() - start < 5


def test_sanitize_and_shorten():
    from kvplan.errors import KvplanError, sanitize, shorten

    assert sanitize("a\nb\tc\x00\u2028") == "a\\nb\\tc\\x00\\u2028"
    assert len(sanitize("y" * 10_000_000)) < 1300
    assert len(sanitize(" ".join(["word"] * 100_000))) < 1300
    assert shorten("z" * 1000).endswith("(1,000 chars)") and len(shorten("z" * 1000)) < 110
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert len(shorten(deep)) < 50
    assert "\n" not in KvplanError("bad\nmessage", "a\nhint").one_line()


# --- preset ids ------------------------------------------------------------------------------------------------

def test_preset_ids_ignore_case(run_cli, tmp_path):
    upper = ok(run_cli("size", "-m", "QwQ-32B", "-g", "H200", "-f", "json")).json()
    assert upper == ok(run_cli("size", "-m", "qwq-32b", "-g", "h200", "-f", "json")).json()
    (tmp_path / "tiny.toml").write_text(TINY.format(id="Tiny-One"))
    ok(run_cli("size", "-m", "tiny-one", "--presets-dir", str(tmp_path), "--brief"))
    ok(run_cli("presets", "show", "LLAMA-3.1-8B"))


@pytest.mark.parametrize("ref,preset", [("Qwen/QwQ-32B", "qwq-32b"), ("deepseek-ai/DeepSeek-R1", "deepseek-r1"),
                                        ("meta-llama/Llama-3.1-8B-Instruct", None)])
def test_hf_style_id_suggests_the_preset(run_cli, ref, preset):
    line = error_line(run_cli("size", "-m", ref), ref)
    if preset:
        assert f"-m {preset}" in line, line


def test_unknown_id_suggestion_ignores_case(run_cli):
    error_line(run_cli("size", "-m", "QWQ-33B"), "unknown model preset", "qwq-32b")


# --- a closed pipe ---------------------------------------------------------------------------------------------

def test_closed_pipe_exits_0():
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before kvplan writes a byte, as `| head` gone early
    try:
        proc = subprocess.run([sys.executable, "-m", "kvplan", "size"], stdout=write_end, stderr=subprocess.PIPE,
                              env=env, timeout=20)
    finally:
        os.close(write_end)
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, (proc.returncode, err)


def test_the_new_efficiency_fractions_are_checked_in_a_user_preset(run_cli, tmp_path):
    # allreduce_link and upcast_hbm are fractions of a peak, as hbm is: 1.5 is refused with the field named
    base = (presets.builtin_dir() / "hardware" / "mi300x.toml").read_text()
    for field, value in (("allreduce_link", "0.24"), ("upcast_hbm", "0.37")):
        path = tmp_path / f"{field}.toml"
        text = f"{field} = {{ value = {value}"
        assert text in base
        path.write_text(base.replace(text, f"{field} = {{ value = 1.5"))
        error_line(run_cli("tpot", "-m", "gpt-oss-120b", "-g", str(path)), field)


def test_a_negative_gemm_floor_in_a_user_preset_is_refused(run_cli, tmp_path):
    # efficiency.gemm_floor_us (and every other microsecond factor) is a time: -5 is refused with the field named
    base = (presets.builtin_dir() / "hardware" / "mi300x.toml").read_text()
    path = tmp_path / "floor.toml"
    path.write_text(base.replace("[efficiency]\n", "[efficiency]\ngemm_floor_us = { value = -5, source = \"test\" }\n"))
    assert "gemm_floor_us" in path.read_text()
    error_line(run_cli("tpot", "-m", "gpt-oss-120b", "-g", str(path)), "gemm_floor_us")
    ok = tmp_path / "ok.toml"
    ok.write_text(base.replace("[efficiency]\n", "[efficiency]\ngemm_floor_us = { value = 20, source = \"test\" }\n"))
    r = run_cli("tpot", "-m", "gpt-oss-120b", "-g", str(ok), "--tp", "8", "-f", "json")
    # and a valid one is used: gpt-oss-120b's 109 GEMMs at TP8 x 20 us = 2.18 ms (the default 10.3 us: 1.12 ms)
    assert r.code == 0 and r.json()["step_breakdown"]["start"]["weights_seconds"] == pytest.approx(109 * 20e-6)
