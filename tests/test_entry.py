"""The process entry point (kvplan.__main__): it raises the collector's first threshold before typer is
imported and freezes its objects before the interpreter's last
collection, and only there; ``python -m kvplan`` and the installed script both go through it. (The subprocess
probes report from ``atexit`` handlers: code after ``main()`` would not run when a command exits.)"""

from __future__ import annotations

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
    # against a fresh interpreter's own threshold (this process's may have been changed by an in-process tool, e.g.
    # mypy's API in tests/test_public_api.py)
    assert _run("import gc; import kvplan.cli, kvplan.__main__; print(gc.get_threshold()[0])") == \
        _run("import gc; print(gc.get_threshold()[0])")


def test_python_dash_m_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "kvplan", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.startswith("kvplan ")


def test_script_entry_is_the_tuned_one():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'kvplan = "kvplan.__main__:main"' in text


_HEAVY = ("rich", "numpy", "pydantic", TOML_MODULE, "json", "csv", "huggingface_hub")


def _loaded(args: list[str], home: Path) -> set[str]:
    """Which heavy modules a command-line run imported (the second of two runs: nothing a first run could leave
    behind makes the second one lighter)."""
    code = ("import sys\n"
            f"sys.argv = ['kvplan', *{args!r}]\n"
            "import atexit\n"
            f"atexit.register(lambda: print(' '.join(m for m in {_HEAVY!r} if m in sys.modules), file=sys.stderr))\n"
            "from kvplan.__main__ import main\n"
            "main()\n")
    env = {**os.environ, "HOME": str(home), "COLUMNS": "80"}
    env.pop("XDG_CACHE_HOME", None)
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    return set(out.stderr.split())


def test_json_path_imports_json_and_the_toml_parser(tmp_path):
    # the built-in preset files are parsed on every run (no cache of parsed presets)
    assert _loaded(["size", "-f", "json"], tmp_path) == {"json", TOML_MODULE}


def test_piped_table_paths_import_nothing_heavy(tmp_path):
    # not a terminal: kvplan.render.textlayout writes rich's layout without rich; no numpy for the small grids
    assert _loaded(["size"], tmp_path) == {TOML_MODULE}
    assert _loaded(["concurrency"], tmp_path) == {TOML_MODULE}
    assert _loaded(["size", "--explain"], tmp_path) == {TOML_MODULE}


def test_a_run_writes_nothing(tmp_path):
    # a command asked for a table writes nowhere but stdout and stderr: not under $HOME, not in the working folder
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {**os.environ, "HOME": str(home), "COLUMNS": "80", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("XDG_CACHE_HOME", None)
    for args in (["size"], ["size", "-f", "json"], ["concurrency"], ["tpot"], ["--help"], ["presets", "list"],
                 ["simulate", "--requests", "20"]):
        out = subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, cwd=work,
                             env={**env, "PYTHONPATH": str(ROOT)})
        assert out.returncode == 0, (args, out.stderr)
    assert list(home.iterdir()) == [] and list(work.iterdir()) == []
    # a missing $HOME stays missing
    gone = tmp_path / "no-such-home"
    out = subprocess.run([sys.executable, "-m", "kvplan", "size"], capture_output=True, text=True, cwd=work,
                         env={**env, "HOME": str(gone), "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and not gone.exists()


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
