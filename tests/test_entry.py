"""The process entry point (kvplan.__main__): it raises the collector's first threshold before typer is
imported, and only there; ``python -m kvplan`` and the installed script both go through it."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          check=True).stdout.strip()


def test_threshold_set_before_typer_is_imported():
    # the threshold main() leaves, and whether typer was already imported when it was set (it must not be)
    code = ("import gc, sys\n"
            "seen = []\n"
            "real = gc.set_threshold\n"
            "gc.set_threshold = lambda *a: (seen.append(('typer' in sys.modules, a)), real(*a))\n"
            "sys.argv = ['kvplan', '--version']\n"
            "import kvplan.__main__ as m\n"
            "try:\n    m.main()\nexcept SystemExit:\n    pass\n"
            "print(seen == [(False, (100000, *gc.get_threshold()[1:]))], gc.get_threshold()[0])")
    version, last = _run(code).splitlines()
    assert version.startswith("kvplan ")
    seen, first = last.rsplit(" ", 1)
    assert seen == "True"      # set once, before typer, the older generations' thresholds left as they were
    assert int(first) == 100_000


def test_importing_kvplan_changes_no_threshold():
    assert _run("import gc; import kvplan.cli, kvplan.__main__; print(gc.get_threshold()[0])") == \
        str(gc.get_threshold()[0])


def test_python_dash_m_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "kvplan", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.startswith("kvplan ")


def test_script_entry_is_the_tuned_one():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'kvplan = "kvplan.__main__:main"' in text


_HEAVY = ("rich", "numpy", "pydantic", "tomllib", "json", "csv", "huggingface_hub")


def _loaded(args: list[str], cache: Path) -> set[str]:
    """Which heavy modules a command-line run imported (the second of two runs, so the start-up cache is warm)."""
    code = ("import sys\n"
            f"sys.argv = ['kvplan', *{args!r}]\n"
            "from kvplan.__main__ import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print(' '.join(m for m in {_HEAVY!r} if m in sys.modules), file=sys.stderr)")
    env = {**os.environ, "KVPLAN_CACHE_DIR": str(cache), "COLUMNS": "80"}
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    return set(out.stderr.split())


def test_json_path_imports_only_json(tmp_path):
    assert _loaded(["size", "-f", "json"], tmp_path) == {"json"}


def test_piped_table_paths_import_nothing_heavy(tmp_path):
    # not a terminal: kvplan.textlayout writes rich's layout without rich; no numpy for the small grids
    assert _loaded(["size"], tmp_path) == set()
    assert _loaded(["concurrency"], tmp_path) == set()
    assert _loaded(["size", "--explain"], tmp_path) == set()


def test_a_cold_run_parses_with_tomllib(tmp_path):
    assert "tomllib" in _loaded(["size", "-f", "json"], Path("off"))
