"""Golden output: every command in every format, tables at 80 and 160 columns, byte for byte.

The numbers inside are pinned by the other tests (hand arithmetic, engine logs); this file pins the
presentation: titles, column splits at 80 columns, units, the first line, CSV headers, JSON keys. When a change
to the output is intended, regenerate with ``KVPLAN_UPDATE_GOLDEN=1 pytest tests/test_golden.py`` and read the
diff. The examples of the README and of the docs pages are checked against these files too
(test_examples_are_real_output), and each page is built from its source and these files
(test_page_is_built_from_its_source_and_the_current_goldens).
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
    # the README's chat case (issue 21): 4K + 300 under a 2 s TTFT p99 and the 50 ms TPOT p99
    "pd-chat": ("pd", "--nodes", "2", "--kv-dtype", "fp8", "--prompt", "4k", "--decode", "300", "--ttft-slo", "2s"),
    "simulate": ("simulate", "--kv-dtype", "fp8", "--workload", "long-cot-bench", "--rate", "0.1", "--requests",
                 "200", "--seed", "1"),
    "simulate-compare": ("simulate", "--kv-dtype", "fp8", "--workload", "r1-production", "--rate", "8", "--requests",
                         "2000", "--seed", "1", "--compare", "swap,kv-dtype=bf16,swap+kv-dtype=bf16,"
                         "longest-first-protected"),
    "simulate-sweep": ("simulate", "--kv-dtype", "fp8", "--workload", "r1-production", "--requests", "1000",
                       "--sweep-rate", "2:12:6", "--tpot-slo", "100ms", "--max-recompute-rate", "0.02", "--seed", "1"),
    # the README's: the same requests under each engine's memory rules and scheduler
    "simulate-engines": ("simulate", "--kv-dtype", "fp8", "--workload", "r1-production", "--rate", "3", "--requests",
                         "2000", "--seed", "1", "--compare", "engine=vllm,engine=sglang"),
    # docs/commands/simulate.md: the README's vLLM run with vLLM's async scheduling off (on by default from v0.14)
    "simulate-no-async": ("simulate", "--engine", "vllm", "--kv-dtype", "fp8", "--workload", "r1-production", "--rate",
                          "3", "--requests", "2000", "--seed", "1", "--no-async-scheduling"),
    # docs/commands/simulate.md: the same vLLM run with each prefill chunk capped at 512 tokens
    "simulate-long-prefill": ("simulate", "--engine", "vllm", "--kv-dtype", "fp8", "--workload", "r1-production",
                              "--rate", "3", "--requests", "2000", "--seed", "1", "--long-prefill-token-threshold",
                              "512"),
    # docs/commands/concurrency.md: SGLang with DeepEP's all-to-all (its reserve below mem_fraction_static)
    "concurrency-deepep": ("concurrency", "--engine", "sglang", "--tp", "8", "--ep", "8", "--kv-dtype", "fp8",
                           "--moe-a2a-backend", "deepep"),
    # the issue 10 case: TP1 x DP8, the 2 requests/s routed round-robin over the eight replicas
    "simulate-dp": ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--rate", "2", "--requests",
                    "100"),
    "presets-list": ("presets", "list"),
    "presets-gpus": ("presets", "list", "--type", "hardware"),
    "check": ("check", "examples/plans/deepseek-r1-h200-fp8.toml"),   # run from the project's root
    "recommend": ("recommend", "--emit", "vllm"),
    "recommend-chat": ("recommend", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--prompt", "4k", "--decode",
                       "300"),
    # docs/commands/recommend.md: RAG (32,000 + 500) searched under a rate target and a TTFT target, the launch judged
    # at that rate (the table "The launch under its target rate"; tests/test_recommend_load.py's "rag" case)
    "recommend-load": ("recommend", "-m", "llama-3.1-8b", "--prompt", "32000", "--decode", "500", "--target",
                       "rate>=1rps,tpot<=50ms", "--candidates", "h200", "--ttft-slo", "2s", "--emit", "vllm"),
    # a Hugging Face id read from the hub cache in tests/data/hf-cache (offline)
    "concurrency-hub": ("concurrency", "-m", "Qwen/QwQ-32B", "-g", "h100-sxm", "--tp", "2"),
    # docs/traces.md: the sample traces in tests/data/traces/ (run from the project's root)
    "simulate-trace-mooncake": ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--trace",
                                "tests/data/traces/mooncake_300.jsonl"),
    "simulate-trace-burstgpt": ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--trace",
                                "tests/data/traces/burstgpt_300.csv"),
    "simulate-trace-azure": ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--trace",
                             "tests/data/traces/azure_code_300.csv", "--trace-speed", "4"),
    "calibrate": ("calibrate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "1", "--engine", "vllm",
                  "tests/data/calibration/vllm-bench-serve-c16.json"),
    "explain-log": ("explain-log", "tests/data/logs/vllm-v1-qwen3-235b-a22b-fp8-4xh100.log", "-g", "h100-sxm",
                    "--weight-dtype", "fp8"),
}
FORMATS = {"table-80": ("80", ()), "table-160": ("160", ()), "json": ("80", ("-f", "json")),
           "csv": ("80", ("-f", "csv")), "markdown": ("80", ("-f", "markdown")), "brief": ("80", ("--brief",))}
SKIP = {("presets-list", "brief"), ("presets-gpus", "brief"),
        ("simulate-compare", "csv")}   # csv is one run's per-request table
# docs/traces.md shows the three sample traces at 80 columns only
SKIP |= {("simulate-engines", f) for f in FORMATS if f not in ("table-80", "json")}
SKIP |= {(c, f) for c in ("simulate-no-async", "concurrency-deepep", "simulate-long-prefill") for f in FORMATS
         if f != "table-80"}
SKIP |= {("pd-chat", f) for f in FORMATS if f not in ("brief", "json")}
SKIP |= {("recommend-load", f) for f in ("csv", "table-160")}
SKIP |= {(c, f) for c in COMMANDS if c.startswith("simulate-trace-") for f in FORMATS if f != "table-80"}
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
    "trace-no-format": ("simulate", "--trace", "tests/data/traces/unknown_format.csv"),
    "trace-wrong-format": ("simulate", "--trace", "tests/data/traces/azure_code_300.csv", "--trace-format", "burstgpt"),
}
DOCS_ONLY_ERRORS = {"trace-no-format", "trace-wrong-format"}   # docs/traces.md's, not the README's


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
        # the first line: the deployment (or the presets found), after an overloaded run's warning
        assert re.match(rf"(OVERLOADED: [^;]+; )?({first})", lines[0])
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


def _builder():
    """tools/build_readme.py, loaded from the tree (the tests may run against the installed wheel, from outside)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_readme", ROOT / "tools" / "build_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shown_pages() -> list[Path]:
    """README.md and every page of the documentation site (the ``.in.md`` sources are not pages)."""
    docs = ROOT / "docs"
    return [ROOT / "README.md", *(p for p in sorted(docs.rglob("*.md")) if not p.name.endswith(".in.md"))]


def test_every_page_that_shows_output_is_built_from_a_source():
    """The README and each docs page built from a NAME.in.md source, and only those, show real output: a page
    with a ``$ kvplan`` example and no source would be typed by hand, so it could drift."""
    built = {page for _, page in _builder().pages(ROOT)}
    assert ROOT / "README.md" in built and len(built) >= 10, sorted(built)
    for page in _shown_pages():
        if re.search(r"^\$ kvplan ", page.read_text(), flags=re.M):
            assert page in built, f"{page.relative_to(ROOT)} shows kvplan output but is built from no .in.md source"


@pytest.mark.parametrize("source", [s for s, _ in _builder().pages(ROOT)], ids=lambda s: s.name)
def test_page_is_built_from_its_source_and_the_current_goldens(source):
    """Each built page is exactly what tools/build_readme.py makes of its source with the goldens of now (and
    benchmarks/tpot_fidelity.py's table): a golden regenerated, or a source edited, without a rebuild fails."""
    builder = _builder()
    page = dict(builder.pages(ROOT))[source]
    names = builder.MARKER.findall(source.read_text())
    assert names, f"{source.name} shows no real output: make it a plain page"
    missing = [n for n in names if n != "fidelity" and not (GOLDEN / f"{n}.txt").exists()]
    assert not missing, f"{source.name} names goldens that do not exist: {missing}"
    assert page.read_text() == builder.build(source, ROOT), \
        f"{page.relative_to(ROOT)} is stale against {source.relative_to(ROOT)}: run tools/build_readme.py"


def test_error_examples_are_real_output():
    """Each ``$ kvplan ...`` line of a ``console`` block, in the README or a docs page, is an ERRORS case followed by
    its golden stderr; the README shows every one of them."""
    by_args = {" ".join(("kvplan",) + args): name for name, args in ERRORS.items()}
    for page in _shown_pages():
        blocks = re.findall(r"```console\n(.*?)```", page.read_text(), flags=re.S)
        shown = [m for block in blocks for m in re.findall(r"^\$ (kvplan[^\n]*)\n((?:[^$][^\n]*\n)*)", block,
                                                             flags=re.M)]
        if page.name == "README.md":
            readme_errors = {c for c, name in by_args.items() if name not in DOCS_ONLY_ERRORS}
            assert {c for c, _ in shown} == readme_errors, "the README does not show every error ERRORS pins"
        for command_line, output in shown:
            assert command_line in by_args, f"{page.name}: error example {command_line!r} has no golden in ERRORS"
            golden = (GOLDEN / f"error.{by_args[command_line]}.txt").read_text()
            assert output == golden, f"{page.name}: error output of {command_line!r} is stale"


def test_examples_are_real_output():
    """Each block of the README or a docs page that starts with ``$ kvplan ...`` equals the golden file of that
    command line (at 80 columns)."""
    by_args = {" ".join(("kvplan",) + args + FORMATS[f][1]): (c, f) for c, args in COMMANDS.items() for f in FORMATS
               if (c, f) not in SKIP and f != "table-160"}
    count = 0
    for page in _shown_pages():
        for command_line, shown in re.findall(r"```\n\$ (kvplan[^\n]*)\n(.*?)```", page.read_text(), flags=re.S):
            assert command_line in by_args, f"{page.name}: example {command_line!r} has no golden twin"
            c, f = by_args[command_line]
            assert shown == (GOLDEN / f"{c}.{f}.txt").read_text(), f"{page.name}: output of {command_line!r} is stale"
            count += 1
    # the README's ten (one per command) and the docs pages' fourteen, at least
    assert count >= 24, count


def test_the_readme_has_one_short_example_per_command():
    """The README is what a newcomer needs: one example per command, the long sections on the site."""
    readme = (ROOT / "README.md").read_text()
    examples = re.findall(r"```\n\$ kvplan ([a-z-]+)", readme)
    # pd and recommend show two workloads each (issue 21): reasoning, which does not disaggregate, and chat
    assert examples == ["size", "concurrency", "compare-preemption", "tpot", "pd", "pd", "simulate", "check",
                        "recommend", "recommend", "explain-log", "calibrate", "presets"], examples
    assert len(readme.splitlines()) <= 400


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


def test_python_example_runs_and_says_what_it_prints(capsys):
    page = (ROOT / "docs" / "python.md").read_text()
    block = re.search(r"```python\n(.*?)```", page, flags=re.S).group(1)
    namespace: dict = {}
    exec(block, namespace)
    capsys.readouterr()
    # the commented values: 61 layers x 576 B (fp8 latent) = 35,136 B/token; 45 requests (hand arithmetic in
    # tests/test_concurrency.py's MLA case at this pool); the recompute/swap ratio of tests/test_preemption.py
    assert namespace["plan"].max_concurrency.value == 45
    assert "# 45" in block and "# 35136" in block and "42.50" in block
    # the recompute/swap ratio of the seed case (tests/test_preemption.py: 0.710729 / 0.0167227)
    ratio = namespace["kvplan"].plan_preemption(namespace["s"].with_(decode_tokens=20_000)).this
    assert ratio.recompute_over_swap.value == pytest.approx(42.501, rel=1e-3)
