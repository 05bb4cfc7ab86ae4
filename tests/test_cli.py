"""The CLI end to end, through the real entry point: output, formats, presets, and bad input."""

import csv
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODEL_PRESETS = {"deepseek-r1", "deepseek-r1-seed-gqa", "deepseek-v3.2-exp", "llama-3.1-8b", "llama-3.1-70b",
                 "qwq-32b", "qwen3-32b", "qwen3-235b-a22b", "gpt-oss-120b"}
HARDWARE_PRESETS = {"h100-sxm", "h200", "b200", "a100-80gb", "h20", "mi300x", "l40s"}


def test_size_without_arguments_plans_the_document_scenario(run_cli):
    r = run_cli("size", "--kv-dtype", "fp8", "--units", "si")
    assert r.code == 0, r.err
    # The document's GQA arithmetic (FP8) beside the real MLA figure: 124,928 B/token x 30,000 = 3.75 GB;
    # x 10 requests = 37.48 GB.
    assert "124,928 B" in r.out and "35,136 B" in r.out
    assert "3.75 GB" in r.out and "37.48 GB" in r.out
    assert "Why they differ" in r.out


def test_writing_out_a_default_changes_nothing(run_cli):
    # One rule: --kv-dtype defaults to auto (the engines' default, bf16) with or without --model, and the first
    # line of every output names it.
    for command in ("size", "concurrency", "compare-preemption"):
        bare = run_cli(command, "-f", "json").json()
        explicit = run_cli(command, "-m", "deepseek-r1", "-g", "h200", "--kv-dtype", "auto", "-f", "json").json()
        assert bare["kv_dtype"] == explicit["kv_dtype"] == "bf16", command
        assert bare["headline"] == explicit["headline"] and "bf16 KV" in bare["headline"]
    conc = run_cli("concurrency", "-f", "json").json()
    named = run_cli("concurrency", "-m", "deepseek-r1", "-f", "json").json()
    assert conc["max_concurrency"] == named["max_concurrency"]


def test_size_json_contract(run_cli):
    r = run_cli("size", "--kv-dtype", "fp8", "--format", "json")
    assert r.code == 0, r.err
    data = r.json()
    for key in ("kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "state_bytes_per_request",
                "peak_kv_bytes_per_request", "peak_kv_bytes_per_request_per_gpu"):
        assert isinstance(data[key], int), key
    assert data["model"] == "deepseek-r1" and data["kv_dtype"] == "fp8"
    assert data["kv_bytes_per_token"] == 35_136
    # 1,000 prompt + 30,000 decode tokens x 35,136 B.
    assert data["peak_kv_bytes_per_request"] == 31_000 * 35_136
    assert data["comparison"]["kv_bytes_per_token"] == 124_928


def test_size_tp8_llama_json(run_cli):
    r = run_cli("size", "-m", "llama-3.1-8b", "--tp", "8", "--prompt", "0", "--decode", "1Ki", "-f", "json")
    data = r.json()
    assert data["kv_bytes_per_token"] == 131_072 and data["kv_bytes_per_token_per_gpu"] == 16_384
    assert data["peak_kv_bytes_per_request_per_gpu"] == 16_384 * 1024


def test_csv_and_markdown(run_cli):
    r = run_cli("size", "-m", "llama-3.1-8b", "-f", "csv", "--contexts", "1k,2k")
    first, *rest = r.out.splitlines()
    assert first.startswith("# llama-3.1-8b on 8 x h200")          # the deployment line, as a comment
    rows = list(csv.reader(io.StringIO("\n".join(rest))))
    # raw numbers with their units in the header: 1,000 x 131,072 B = 131,072,000 B (not "125.00 MiB")
    assert rows[0] == ["context tokens", "whole model (bytes)", "per GPU (bytes)", "note"]
    assert rows[1][:2] == ["1000", "131072000"]
    md = run_cli("size", "-m", "llama-3.1-8b", "-f", "markdown", "--explain")
    assert md.out.count("| context tokens |") == 1 and "How each figure was derived" in md.out


def test_explain_shows_formula_numbers_and_sources(run_cli):
    r = run_cli("size", "--kv-dtype", "fp8", "--explain")
    assert r.code == 0
    assert "61 x 576 = 35,136 B" in r.out
    assert "huggingface.co/deepseek-ai/DeepSeek-R1" in r.out
    assert "vllm-project/vllm" in r.out and ".md" not in r.out     # public sources, no development notes


def test_presets_list_and_show(run_cli):
    r = run_cli("presets", "list", "-f", "json")
    ids = {p["id"]: p["type"] for p in r.json()["presets"]}
    assert MODEL_PRESETS <= {i for i, t in ids.items() if t == "model"}
    assert HARDWARE_PRESETS <= {i for i, t in ids.items() if t == "hardware"}
    show = run_cli("presets", "show", "h100-sxm", "-f", "json")
    assert show.json()["preset"]["hbm_capacity_gib"]["value"] == 79.65


def _assert_one_line_error(r, *needles):
    assert r.code == 2, (r.code, r.out, r.err)
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1, r.err
    assert "Traceback" not in r.err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("args,needles", [
    (("size", "-m", "deepseek-r2"), ("unknown model preset", "deepseek-r1")),
    (("size", "--tp", "0"), ("--tp",)),
    (("size", "--tp", "abc"), ("--tp",)),
    (("size", "-m", "llama-3.1-8b", "--tp", "3"), ("neither divides",)),
    (("size", "--decode", "-5"), ("--decode",)),
    (("size", "--decode", "nan"), ("--decode",)),
    (("size", "--decode", "5e9"), ("absurdly large",)),
    (("size", "--kv-dtype", "fp6"), ("unknown kv dtype",)),
    (("size", "-f", "xml"), ("unknown format",)),
    (("size", "-m", "/nonexistent/config.json"), ("config",)),
    (("size", "-m", "llama-3.1-8b", "--kv-dtype", "fp8_ds_mla"), ("only to MLA",)),
    (("size", "--pp", "99"), ("pipeline stages",)),
    (("presets", "show", "h100"), ("unknown",)),
])
def test_bad_input_is_one_line_exit_2(run_cli, args, needles):
    _assert_one_line_error(run_cli(*args), *needles)


def test_user_presets_override_and_malformed(run_cli, tmp_path, monkeypatch):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "tiny.toml").write_text(
        'type = "model"\nid = "tiny"\nname = "Tiny"\nsources = ["made up for a test"]\nnum_layers = 2\n'
        '[[groups]]\nname = "attn"\nlayers = "all"\n'
        'kind = { kind = "full_attention", kv_heads = 2, head_dim_k = 64, head_dim_v = 64 }\n')
    r = run_cli("size", "-m", "tiny", "--presets-dir", str(user), "-f", "json")
    # 2 layers x 2 heads x (64 + 64) x 2 B = 1,024 B/token.
    assert r.json()["kv_bytes_per_token"] == 1024
    monkeypatch.setenv("KVPLAN_PRESETS_DIR", str(user))
    assert run_cli("size", "-m", "tiny", "-f", "json").json()["kv_bytes_per_token"] == 1024

    (user / "broken.toml").write_text('type = "model"\nid = "broken"\nnum_layers = [\n')
    # a malformed neighbour is skipped with a warning naming it; asking for it by id is the error
    ok = run_cli("size", "-m", "tiny", "-f", "json")
    assert ok.code == 0 and "broken.toml" in ok.err and "not valid TOML" in ok.err
    asked = run_cli("size", "-m", "broken")
    lines = asked.err.strip().splitlines()
    assert asked.code == 2 and lines[-1].startswith("error:") and "not valid TOML" in lines[-1]
    assert all(line.startswith("warning: skipped preset file") for line in lines[:-1])
    (user / "broken.toml").write_text('type = "model"\nid = "broken"\nname = "b"\nsources = ["x"]\n'
                                      'num_layers = 2\n[[groups]]\nname = "a"\nlayers = "all"\n'
                                      'kind = { kind = "full_attention", kv_heads = -1, head_dim_k = 64, '
                                      'head_dim_v = 64 }\n')
    _assert_one_line_error(run_cli("size", "-m", "broken"), "kv_heads")
    _assert_one_line_error(run_cli("size", "--presets-dir", str(tmp_path / "nope")), "does not exist")


def _modules_loaded(argv: list[str], watched: tuple[str, ...]) -> list[str]:
    """Which of ``watched`` a run of ``kvplan ARGV`` (JSON out) has imported when it is done."""
    import subprocess
    import sys

    code = ("import sys, io, contextlib\n"
            f"sys.argv = ['kvplan', *{argv!r}, '-f', 'json']\n"
            "from kvplan.cli import main\n"
            "buf = io.StringIO()\n"
            "try:\n"
            "    with contextlib.redirect_stdout(buf):\n"
            "        main()\n"
            "except SystemExit:\n"
            "    pass\n"
            f"print(','.join(m for m in {watched!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_size_imports_no_numpy_or_plotting():
    # Start-up matters: `kvplan size` must not pull numpy, matplotlib or the simulation/sweep calculators, nor the
    # vLLM adapter (the neutral engine reads vLLM's tables only when it needs a block size, batch limit or fraction)
    # or the memory waterfall (size sizes no pool)
    assert _modules_loaded(["size"], ("numpy", "matplotlib", "kvplan.calc.concurrency", "kvplan.calc.preemption",
                                      "kvplan.engines.vllm", "kvplan.engines.budget")) == []


def test_concurrency_imports_neither_size_nor_the_calibration_reader():
    # concurrency needs KV per request (calc.kv), not `size`'s plan module, and pricing a step checks a calibrated
    # factor's source without loading the calibration file reader (no --calibration given)
    assert _modules_loaded(["concurrency"], ("kvplan.calc.size", "kvplan.inputs.calibration_file", "matplotlib")) == []


@pytest.mark.parametrize("kind, use", [("hardware", ("size", "-g")), ("model", ("size", "-m"))])
def test_presets_template_is_a_working_preset(run_cli, tmp_path, kind, use):
    r = run_cli("presets", "template", kind)
    assert r.code == 0 and r.out.startswith("# A ")
    (tmp_path / f"{kind}.toml").write_text(r.out)
    ran = run_cli(*use, str(tmp_path / f"{kind}.toml"), "-f", "json")
    assert ran.code == 0, ran.err
    if kind == "model":   # 32 layers x 8 heads x (128 + 128) x 2 B = 131,072 B/token
        assert ran.json()["kv_bytes_per_token"] == 131_072
    else:                 # 80 GiB as reported
        assert ran.json()["hardware"] == "my-gpu"
    bad = run_cli("presets", "template", "gpu")
    assert bad.code == 2 and "give hardware or model" in bad.err


@pytest.mark.parametrize("args", [("size",), ("concurrency", "-f", "csv"), ("compare-preemption", "--explain"),
                                  ("presets", "show", "h200")])
def test_a_closed_pipe_is_not_an_error(args):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "kvplan", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                                 "PYTHONPYCACHEPREFIX": sys.pycache_prefix or ""})
    proc.stdout.readline()        # like `| head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and err == "", err


def test_a_full_disk_is_a_one_line_error(tmp_path):
    import subprocess
    import sys

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "kvplan", "size", "-f", "json"], stdout=full, stderr=subprocess.PIPE,
                           env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                                "PYTHONPYCACHEPREFIX": sys.pycache_prefix or ""}, timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.startswith("error: cannot write the output") and err.count("\n") == 1, err


def test_shell_completion_is_offered_and_completes(run_cli, monkeypatch):
    """typer's --install-completion / --show-completion are on the top-level app, and the completion protocol
    (click's bash completion, driven by _KVPLAN_COMPLETE) completes command names and a command's options."""
    assert "--install-completion" in run_cli("--help").out
    monkeypatch.setenv("_KVPLAN_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "kvplan con")
    monkeypatch.setenv("COMP_CWORD", "1")
    assert run_cli().out.split() == ["concurrency"]
    monkeypatch.setenv("COMP_WORDS", "kvplan concurrency --kv-d")
    monkeypatch.setenv("COMP_CWORD", "2")
    assert run_cli().out.split() == ["--kv-dtype"]


def test_help_shows_each_options_metavar_and_arguments_without_python_types(run_cli):
    for args in (("size",), ("recommend",), ("check",), ("presets", "show"), ("simulate",)):
        out = run_cli(*args, "--help").out
        assert " None " not in out and "<str>" not in out and "<list[Path]>" not in out, args
    assert "-g, --hardware, --gpu ID|FILE" in run_cli("size", "--help").out
    assert "[default: h200]" not in run_cli("size", "--help").out   # the help text says its default once


def test_options_keep_their_declared_names_whatever_the_python():
    # Before Python 3.11, typing.get_type_hints wrapped an option whose default is None in Optional[...], hiding its
    # Annotated typer.Option: recommend's --emit became --emit-engine (named after the parameter) and every such
    # option lost its help and metavar. The shared-option splice reads the annotations as written.
    from kvplan.cli import _build

    recommend = _build("recommend")
    emit = next(p for p in recommend.params if p.name == "emit_engine")
    assert emit.opts == ["--emit"] and emit.metavar == "ENGINE"
    size = _build("size")
    compare = next(p for p in size.params if p.name == "compare")
    assert compare.metavar == "ID|FILE" and "side by side" in compare.help
