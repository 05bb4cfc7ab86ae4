"""The process entry point (kvplan.__main__): it raises the collector's first threshold before typer is
imported and defers the stdlib modules no run uses, and only there; ``python -m kvplan`` and the installed
script both go through it."""

from __future__ import annotations

import gc
import json
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


def test_table_paths_import_only_rich(tmp_path):
    assert _loaded(["size"], tmp_path) == {"rich"}
    assert _loaded(["concurrency"], tmp_path) == {"rich"}      # no numpy for the small grids it prints


def test_a_cold_run_parses_with_tomllib(tmp_path):
    assert "tomllib" in _loaded(["size", "-f", "json"], Path("off"))


def _lazy_states(args: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """A command-line run through the entry point, and how it left each of ``LAZY_MODULES``: "unloaded" (imported
    lazily, its code never run), "loaded" or "absent"."""
    code = ("import atexit, sys\n"
            "from kvplan.__main__ import LAZY_MODULES, main\n"
            "def report():\n"
            "    def state(m):\n"
            "        if m not in sys.modules:\n"
            "            return 'absent'\n"
            "        return 'unloaded' if type(sys.modules[m]).__name__ == '_LazyModule' else 'loaded'\n"
            "    print({m: state(m) for m in sorted(LAZY_MODULES)}, file=sys.stderr)\n"
            "atexit.register(report)\n"
            f"sys.argv = ['kvplan', *{args!r}]\n"
            "main()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "COLUMNS": "80", **(env or {})})
    import ast

    return out, ast.literal_eval(out.stderr.strip().splitlines()[-1])


def test_unused_modules_stay_unloaded_and_the_cli_works():
    out, states = _lazy_states(["size", "-f", "json"])
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["command"] == "size"
    assert set(states.values()) == {"unloaded"}, states   # imported by typer, never executed

    out, states = _lazy_states(["--help"])
    assert out.returncode == 0 and "Commands" in out.stdout and "concurrency" in out.stdout
    assert states["textwrap"] == "loaded"                   # help wraps its text: loaded on first use
    assert states["shellingham"] == states["signal"] == "unloaded"

    out, states = _lazy_states(["size", "--no-such-option"])
    assert out.returncode == 2 and "No such option: --no-such-option" in out.stderr
    assert states["bz2"] == states["lzma"] == states["ipaddress"] == "unloaded"


def test_lazy_imports_have_an_off_switch():
    out, states = _lazy_states(["size", "-f", "json"], {"KVPLAN_LAZY_IMPORTS": "off"})
    assert out.returncode == 0 and json.loads(out.stdout)["command"] == "size"
    assert "unloaded" not in states.values()


def test_lazy_imports_are_the_entry_points_only():
    code = ("import sys; import kvplan.cli, kvplan.__main__, textwrap, signal\n"
            "print(type(textwrap).__name__, type(signal).__name__, kvplan.__main__._LazyFinder in sys.meta_path)")
    assert _run(code) == "module module False"
