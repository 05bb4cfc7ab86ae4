"""Shared test helpers: run the real CLI entry point in-process and capture what it prints.

The suite tests the working tree: the project root goes first on ``sys.path`` so that ``import kvplan``
finds the files being edited, not a stale installed copy. CI runs the suite a second time with
``KVPLAN_TEST_INSTALLED=1`` from outside the tree, against the built wheel (which checks that presets ship).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_INSTALLED = bool(os.environ.get("KVPLAN_TEST_INSTALLED"))
if not TEST_INSTALLED:
    sys.path.insert(0, str(ROOT))


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
