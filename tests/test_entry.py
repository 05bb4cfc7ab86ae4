"""The process entry point (kvplan.__main__): it raises the collector's first threshold before typer is
imported, defers the stdlib modules no run uses and freezes its objects before the interpreter's last
collection, and only there; ``python -m kvplan`` and the installed script both go through it. (The subprocess
probes report from ``atexit`` handlers: code after ``main()`` would not run when a command exits.)"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import TOML_MODULE

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
            "import atexit\n"
            "atexit.register(lambda: print(seen == [(False, (100000, *gc.get_threshold()[1:]))],"
            " gc.get_threshold()[0]))\n"
            "import kvplan.__main__ as m\n"
            "m.main()\n")
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


_HEAVY = ("rich", "numpy", "pydantic", TOML_MODULE, "json", "csv", "huggingface_hub")


def _loaded(args: list[str], cache: Path) -> set[str]:
    """Which heavy modules a command-line run imported (the second of two runs, so the start-up cache is warm)."""
    code = ("import sys\n"
            f"sys.argv = ['kvplan', *{args!r}]\n"
            "import atexit\n"
            f"atexit.register(lambda: print(' '.join(m for m in {_HEAVY!r} if m in sys.modules), file=sys.stderr))\n"
            "from kvplan.__main__ import main\n"
            "main()\n")
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
    assert TOML_MODULE in _loaded(["size", "-f", "json"], Path("off"))


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
    # imported by typer, never executed ("absent": a typer or Python release that does not import it at all)
    assert set(states.values()) <= {"unloaded", "absent"} and "unloaded" in states.values(), states

    out, states = _lazy_states(["--help"])
    assert out.returncode == 0 and "Commands" in out.stdout and "concurrency" in out.stdout
    assert states["textwrap"] == "loaded"                   # help wraps its text: loaded on first use
    assert states["shellingham"] == states["signal"] == "unloaded"

    out, states = _lazy_states(["size", "--no-such-option"])
    assert out.returncode == 2 and "No such option: --no-such-option" in out.stderr
    assert {states["bz2"], states["lzma"], states["ipaddress"]} <= {"unloaded", "absent"}


def test_lazy_imports_have_an_off_switch():
    out, states = _lazy_states(["size", "-f", "json"], {"KVPLAN_LAZY_IMPORTS": "off"})
    assert out.returncode == 0 and json.loads(out.stdout)["command"] == "size"
    assert "unloaded" not in states.values()


def test_lazy_imports_are_the_entry_points_only():
    code = ("import sys; import kvplan.cli, kvplan.__main__, textwrap, signal\n"
            "print(type(textwrap).__name__, type(signal).__name__, kvplan.__main__._LazyFinder in sys.meta_path)")
    assert _run(code) == "module module False"


def _cli(args: list[str], freeze: bool, tmp_path: Path) -> tuple[int, bytes, str]:
    """A command-line run, its stdout written to a file (so nothing but the process can flush it)."""
    out_file = tmp_path / f"out-{freeze}.txt"
    env = {**os.environ, "COLUMNS": "80", "KVPLAN_FREEZE_AT_EXIT": "on" if freeze else "off"}
    with open(out_file, "wb") as out:
        proc = subprocess.run([sys.executable, "-m", "kvplan", *args], stdout=out, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, env=env)
    return proc.returncode, out_file.read_bytes(), proc.stderr


def test_freezing_at_exit_keeps_output_and_exit_codes(tmp_path):
    for args in (["size", "-f", "json"], ["concurrency"], ["--version"], ["--help"], ["size", "--tp", "3"],
                 ["size", "--no-such-option"], ["tpot", "-f", "csv"]):
        assert _cli(args, True, tmp_path) == _cli(args, False, tmp_path), args
    code, out, err = _cli(["size", "--tp", "3"], True, tmp_path)
    assert code == 2 and err.startswith("error: ")


def _exit_probe(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A run of the entry point with a teardown witness (an object whose finalizer prints "teardown" when the
    interpreter's shutdown frees it) and an ``atexit`` handler that prints how many objects are frozen."""
    code = ("import gc, sys\n"
            "class Witness:\n"
            "    def __del__(self):\n"
            "        print('teardown', flush=True)\n"
            "witness = Witness()\n"
            "import atexit\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 10_000, flush=True))\n"
            "from kvplan.__main__ import main\n"
            f"sys.argv = ['kvplan', *{args!r}]\n"
            "main()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def test_the_entry_point_freezes_its_objects_then_exits_as_python_does():
    proc = _exit_probe(["--version"])
    assert proc.returncode == 0 and proc.stdout.startswith("kvplan ")
    # atexit handlers ran (after the freeze); the frozen objects, the witness among them, are not finalized: as
    # after os._exit, an object still held by a module at exit is not torn down (kvplan closes what it writes)
    assert proc.stdout.splitlines()[1:] == ["frozen True"]
    proc = _exit_probe(["size", "--tp", "3"])                            # an error: frozen all the same, exit 2
    assert (proc.returncode, proc.stdout) == (2, "frozen True\n")
    proc = _exit_probe(["--version"], {"KVPLAN_FREEZE_AT_EXIT": "off"})
    assert proc.stdout.splitlines()[1:] == ["frozen False", "teardown"]


def test_files_a_command_writes_are_whole_when_the_process_ends(tmp_path):
    junit = tmp_path / "report.xml"
    proc = subprocess.run([sys.executable, "-m", "kvplan", "check", "examples/plans/deepseek-r1-h200-fp8.toml",
                           "--junit", str(junit)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    import xml.etree.ElementTree as ET

    suites = ET.parse(junit).getroot()   # a truncated file would not parse
    assert int(suites.get("tests", next(iter(suites)).get("tests"))) > 0
