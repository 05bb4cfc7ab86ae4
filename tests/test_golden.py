"""Golden output: every command in every format, tables at 80 and 160 columns, byte for byte.

The numbers inside are pinned by the other tests (hand arithmetic, engine logs); this file pins the
presentation: titles, column splits at 80 columns, units, the first line, CSV headers, JSON keys. When a change
to the output is intended, regenerate with ``KVPLAN_UPDATE_GOLDEN=1 pytest tests/test_golden.py`` and read the
diff. The README's examples are checked against these files too (test_readme_examples_are_real_output).
"""

import os
import re
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
ROOT = Path(__file__).parent.parent
COMMANDS = {
    "size": ("size",),
    "size-fp8": ("size", "--kv-dtype", "fp8", "--units", "si"),
    "concurrency": ("concurrency",),
    "concurrency-vllm": ("concurrency", "--engine", "vllm", "--kv-dtype", "fp8"),
    "concurrency-sglang": ("concurrency", "--engine", "sglang", "-m", "qwen3-32b", "-g", "h100-sxm", "--tp", "2"),
    "compare-preemption": ("compare-preemption", "--kv-dtype", "fp8"),
    "tpot": ("tpot", "--kv-dtype", "fp8"),
    "pd": ("pd", "--nodes", "2", "--kv-dtype", "fp8"),
    "simulate": ("simulate", "--kv-dtype", "fp8", "--workload", "long-cot-bench", "--rate", "0.1", "--requests",
                 "200", "--seed", "1"),
    "simulate-compare": ("simulate", "--kv-dtype", "fp8", "--workload", "r1-production", "--rate", "8", "--requests",
                         "2000", "--seed", "1", "--compare", "swap,kv-dtype=bf16,swap+kv-dtype=bf16,"
                         "longest-first-protected"),
    "simulate-sweep": ("simulate", "--kv-dtype", "fp8", "--workload", "r1-production", "--requests", "1000",
                       "--sweep-rate", "2:12:6", "--tpot-slo", "100ms", "--max-recompute-rate", "0.02", "--seed", "1"),
    # the issue 10 case: TP1 x DP8, the 2 requests/s routed round-robin over the eight replicas
    "simulate-dp": ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--rate", "2", "--requests",
                    "100"),
    "presets-list": ("presets", "list"),
    "presets-gpus": ("presets", "list", "--type", "hardware"),
    "check": ("check", "examples/plans/deepseek-r1-h200-fp8.toml"),   # run from the project's root
    "recommend": ("recommend", "--emit", "vllm"),
    "recommend-chat": ("recommend", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--prompt", "4k", "--decode",
                       "300"),
    # a Hugging Face id read from the hub cache in tests/data/hf-cache (offline)
    "concurrency-hub": ("concurrency", "-m", "Qwen/QwQ-32B", "-g", "h100-sxm", "--tp", "2"),
    "explain-log": ("explain-log", "tests/data/logs/vllm-v1-qwen3-235b-a22b-fp8-4xh100.log", "-g", "h100-sxm",
                    "--weight-dtype", "fp8"),
}
FORMATS = {"table-80": ("80", ()), "table-160": ("160", ()), "json": ("80", ("-f", "json")),
           "csv": ("80", ("-f", "csv")), "markdown": ("80", ("-f", "markdown")), "brief": ("80", ("--brief",))}
SKIP = {("presets-list", "brief"), ("presets-gpus", "brief"),
        ("simulate-compare", "csv")}   # csv is one run's per-request table
CASES = [(c, f) for c in COMMANDS for f in FORMATS if (c, f) not in SKIP]
# Bad input: the README's error examples, each pinned as what it prints to stderr (tests/golden/error.<name>.txt)
# and its exit code (2, the code of every KvplanError), so the README cannot show a message the code no longer says.
ERRORS = {
    "ep-missing": ("concurrency", "--tp", "1"),
    "weights-exceed-hbm": ("concurrency", "-g", "h100-sxm"),
    "bits-not-bytes": ("compare-preemption", "--pcie-gbps", "50Gb/s"),
    "tp-not-divisor": ("size", "-m", "llama-3.1-8b", "--tp", "3"),
    "over-max-context": ("concurrency", "-m", "qwen3-32b", "--decode", "60k"),
    "unknown-model": ("size", "-m", "deepseek-r2"),
}


@pytest.mark.parametrize("command, fmt", CASES, ids=[f"{c}.{f}" for c, f in CASES])
def test_golden_output(run_cli, monkeypatch, command, fmt):
    width, extra = FORMATS[fmt]
    if command.endswith("-hub"):
        constants = pytest.importorskip("huggingface_hub.constants")
        cache = "tests/data/hf-cache"   # relative to the root (the test runs there): no machine path in the golden
        monkeypatch.setenv("HF_HUB_CACHE", cache)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", cache)
    monkeypatch.setenv("COLUMNS", width)
    monkeypatch.chdir(ROOT)
    r = run_cli(*COMMANDS[command], *extra)
    assert r.code == 0, r.err
    path = GOLDEN / f"{command}.{fmt}.txt"
    if os.environ.get("KVPLAN_UPDATE_GOLDEN"):
        path.write_text(r.out)
    assert path.exists(), f"no golden file {path.name}: run KVPLAN_UPDATE_GOLDEN=1 pytest {__file__}"
    assert r.out == path.read_text(), f"{path.name} differs (regenerate only if the change is intended)"
    if fmt.startswith("table"):
        lines = r.out.splitlines()
        first = r"deepseek-r1 on|qwen3-32b on|qwen3-235b-a22b on|llama-3.1-8b on|qwq-32b on|\d+ (of \d+ )?presets"
        assert re.match(first, lines[0])   # the first line: the deployment (or the presets found)
        assert all(len(line) <= int(width) for line in lines[1:]), "a table line is wider than the terminal"


@pytest.mark.parametrize("name", ERRORS)
def test_golden_error(run_cli, monkeypatch, name):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(ROOT)
    r = run_cli(*ERRORS[name])
    assert r.code == 2, (r.code, r.err)   # bad input, not an internal error (1)
    assert r.out == ""
    assert r.err.startswith("error: ") and r.err.count("\n") == 1, r.err   # one line
    path = GOLDEN / f"error.{name}.txt"
    if os.environ.get("KVPLAN_UPDATE_GOLDEN"):
        path.write_text(r.err)
    assert path.exists(), f"no golden file {path.name}: run KVPLAN_UPDATE_GOLDEN=1 pytest {__file__}"
    assert r.err == path.read_text(), f"{path.name} differs (regenerate only if the change is intended)"


def test_readme_error_examples_are_real_output():
    """Each ``$ kvplan ...`` line of a README ``console`` block is an ERRORS case, followed by its golden stderr."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```console\n(.*?)```", readme, flags=re.S)
    shown = [m for block in blocks for m in re.findall(r"^\$ (kvplan[^\n]*)\n((?:[^$][^\n]*\n)*)", block, flags=re.M)]
    assert len(shown) >= len(ERRORS), "the README shows fewer error examples than ERRORS pins"
    by_args = {" ".join(("kvplan",) + args): name for name, args in ERRORS.items()}
    for command_line, output in shown:
        assert command_line in by_args, f"README error example {command_line!r} has no golden twin in ERRORS"
        golden = (GOLDEN / f"error.{by_args[command_line]}.txt").read_text()
        assert output == golden, f"README error output of {command_line!r} is stale: run tools/build_readme.py"


def test_readme_examples_are_real_output():
    """Each README block that starts with ``$ kvplan ...`` (and says COLUMNS or not) must equal a golden file."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```\n\$ (kvplan[^\n]*)\n(.*?)```", readme, flags=re.S)
    assert blocks, "the README shows no real output"
    by_args = {" ".join(("kvplan",) + args + FORMATS[f][1]): (c, f) for c, args in COMMANDS.items() for f in FORMATS
               if (c, f) not in SKIP and f != "table-160"}
    for command_line, shown in blocks:
        assert command_line in by_args, f"README example {command_line!r} has no golden twin"
        c, f = by_args[command_line]
        golden = (GOLDEN / f"{c}.{f}.txt").read_text()
        assert shown == golden, f"README output of {command_line!r} is stale"


def test_readme_is_built_from_the_current_goldens():
    """Every <<name>> of docs/README.in.md (markdown output shown as rendered tables, too) is in README.md as the
    golden file holds it now: rebuild with tools/build_readme.py after regenerating goldens."""
    template = (ROOT / "docs" / "README.in.md").read_text()
    readme = (ROOT / "README.md").read_text()
    names = [n for n in re.findall(r"<<([a-z0-9.-]+)>>", template) if n != "fidelity"]
    assert names
    for name in names:
        assert (GOLDEN / f"{name}.txt").read_text() in readme, f"README's {name} is stale: run tools/build_readme.py"


def test_readme_links_to_files_that_exist():
    """Every relative link of the README (docs/workload.md, the workload document, among them) names a file of the
    repository."""
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    targets = {t.split("#")[0] for t in links if "://" not in t and not t.startswith("#")}
    assert "docs/workload.md" in targets
    missing = sorted(t for t in targets if not (ROOT / t).exists())
    assert not missing, f"README links to files that are not in the repository: {missing}"


def test_readme_setup_is_what_ci_runs():
    """The set-up makes a virtual environment first, as .ci/run does before the same test command (a fresh machine
    has no kvplan dependencies; pip into the system's Python may be refused)."""
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", setup, flags=re.S)
    assert commands[:3] == ["python3 -m venv .venv && . .venv/bin/activate", "pip install . && kvplan size",
                            'pip install ".[test]" && pytest'], commands
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    steps = [ci.index("python3 -m venv .venv"), ci.index(". .venv/bin/activate"), ci.index(commands[2])]
    assert steps == sorted(steps), "the README's order is not .ci/run's"


def test_readme_python_example_runs_and_says_what_it_prints(capsys):
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, flags=re.S).group(1)
    namespace: dict = {}
    exec(block, namespace)
    capsys.readouterr()
    # the commented values: 61 layers x 576 B (fp8 latent) = 35,136 B/token; 45 requests (hand arithmetic in
    # tests/test_concurrency.py's MLA case at this pool); the recompute/swap ratio of tests/test_preemption.py
    assert namespace["plan"].max_concurrency.value == 45
    assert "# 45" in block and "# 35136" in block and "22.54" in block
    # the recompute/swap ratio of the seed case (tests/test_preemption.py: 0.376928 / 0.0167227)
    ratio = namespace["kvplan"].plan_preemption(namespace["s"].with_(decode_tokens=20_000)).this
    assert ratio.recompute_over_swap.value == pytest.approx(22.54, rel=1e-3)
