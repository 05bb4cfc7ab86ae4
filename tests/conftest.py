"""Shared test helpers: run the real CLI entry point in-process and capture what it prints.

The suite tests the working tree: the project root goes first on ``sys.path`` so that ``import kvplan``
finds the files being edited, not a stale installed copy. CI runs the suite a second time with
``KVPLAN_TEST_INSTALLED=1`` from outside the tree, against the built wheel (which checks that presets ship).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_INSTALLED = bool(os.environ.get("KVPLAN_TEST_INSTALLED"))
if not TEST_INSTALLED:
    sys.path.insert(0, str(ROOT))

# --- the suite writes nothing into the tree -----------------------------------------------------------------------
# Bytecode of every module imported from here on (kvplan, the test modules) and of the CLI subprocesses goes to one
# temporary folder, not to __pycache__ folders in the tree (pytest's assertion rewriting follows sys.pycache_prefix);
# hypothesis keeps no example database and puts its other files there too; pytest's own cache is off
# (pyproject.toml: -p no:cacheprovider). This file's own rewritten bytecode is written before it runs: it is removed
# at the end of the session. The session then fails if the tree holds a file it did not hold at the start.
SCRATCH = Path(tempfile.mkdtemp(prefix="kvplan-tests-"))
atexit.register(shutil.rmtree, SCRATCH, True)
sys.pycache_prefix = str(SCRATCH / "pycache")
os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix
_SESSION_START = time.time()
_NOT_WALKED = {".git", ".venv", ".venv310", "venv", "build", "dist"}   # created before the suite runs, if at all


def _tree() -> tuple[set[str], set[str]]:
    """(every file and folder under the repository root, relative, except the folders of _NOT_WALKED; the files in
    __pycache__ folders written since the session started)."""
    found, recent = set(), set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in _NOT_WALKED and not d.endswith(".egg-info")]
        rel = Path(folder).relative_to(ROOT)
        found.update(str(rel / name) for name in dirs + files)
        if rel.name == "__pycache__":
            recent.update(str(rel / f) for f in files if _mtime(os.path.join(folder, f)) >= _SESSION_START)
    return found, recent


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:   # removed since the folder was listed
        return 0.0


_TREE_AT_START = _tree()[0]

try:
    from hypothesis import settings as _hypothesis_settings
    from hypothesis.configuration import set_hypothesis_home_dir
except ImportError:   # hypothesis is a test extra; the tests that use it import it themselves
    pass
else:
    set_hypothesis_home_dir(SCRATCH / "hypothesis")
    _hypothesis_settings.register_profile("kvplan", database=None)
    _hypothesis_settings.load_profile("kvplan")


def written_into_the_tree() -> list[str]:
    """Files and folders the session added under the root, and bytecode it wrote into a __pycache__ folder that was
    already there."""
    now, recent = _tree()
    return sorted((now - _TREE_AT_START) | recent)


def pytest_sessionfinish(session, exitstatus):
    own = Path(__file__).parent / "__pycache__"
    for pyc in own.glob(f"{Path(__file__).stem}.*-pytest-*.pyc"):   # this file's, written before it could say
        pyc.unlink(missing_ok=True)
    if own.is_dir() and not any(own.iterdir()):
        own.rmdir()
    left = written_into_the_tree()
    if left:
        shown = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
        _WROTE.append(f"the test session wrote into the tree {ROOT}: {shown}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_WROTE: list[str] = []


def pytest_terminal_summary(terminalreporter):
    """Said after pytest_sessionfinish (the terminal reporter's summary comes after it)."""
    for message in _WROTE:
        terminalreporter.write_sep("=", f"FAILED: {message}", red=True, bold=True)


@dataclass
class CliRun:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def run_cli(capsys, monkeypatch):
    from kvplan.cli import main

    def run(*args: str) -> CliRun:
        monkeypatch.setattr(sys, "argv", ["kvplan", *args])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return CliRun(code, captured.out, captured.err)

    return run


def write_hardware(tmp_path, hbm_gib: float = 80.0, hw_id: str = "test-gpu", host_dram_gb: float = 2000,
                   gpus_per_node: int = 8, link_gb_s: float = 64, efficiency: float = 0.87):
    """A hardware preset with the figures a test needs and nothing taken from the shipped presets."""
    path = tmp_path / f"{hw_id}.toml"
    path.write_text(f'''type = "hardware"
id = "{hw_id}"
name = "test GPU {hbm_gib} GiB"
sources = ["hand-written test preset"]
hbm_capacity_gib = {{ value = {hbm_gib}, source = "test figure" }}
hbm_bandwidth_tb_s = {{ value = 3.0, source = "test figure" }}

[dense_tflops]
bf16 = {{ value = 1000, source = "test figure" }}

[host_link]
name = "test link"
theoretical_gb_s_per_direction = {{ value = {link_gb_s}, source = "test figure" }}
large_copy_efficiency = {{ value = {efficiency}, source = "test figure" }}

[node]
gpus_per_node = {gpus_per_node}
host_dram_gb = {{ value = {host_dram_gb}, source = "test figure" }}
''')
    return str(path)


@pytest.fixture(autouse=True)
def _no_hugging_face_network(tmp_path_factory, monkeypatch):
    """No test reaches the Hugging Face Hub: offline, with an empty cache of its own (huggingface_hub reads its
    settings once, at import, so its constants are set too when it is importable)."""
    cache = tmp_path_factory.mktemp("hf-empty-cache")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    try:
        from huggingface_hub import constants
    except ImportError:
        return
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))


# The TOML parser kvplan uses: the standard library's from Python 3.11, tomli before (pyproject.toml's dependency).
TOML_MODULE = "tomllib" if sys.version_info >= (3, 11) else "tomli"


def load_source(name: str, path: Path):
    """A module of the source tree that is not a package (a benchmark or a tool), loaded once by its path and kept
    in sys.modules under ``name`` (its dataclasses look their module up there)."""
    import importlib.util

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
