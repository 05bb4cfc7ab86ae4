"""Issue 18's "exit 1 internal error" and "silently wrong or absurd numbers" items: each reproduced as a user or
the fuzz campaign met it, and each now a one-line error (exit 2) or a right answer. In-process through ``run_cli``
unless the item is about the process itself (the output stream's encoding, a closed pipe, a full disk)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def one_line_error(run) -> str:
    """The run's stderr, asserted to be exit 2 with a single ``error: ... (fix: ...)`` line."""
    assert run.code == 2, (run.code, run.err)
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "(fix: " in lines[0], run.err
    return lines[0]


def kvplan(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvplan", *args], cwd=ROOT, env={**os.environ, **(env or {})},
                          **kw)


# --- exit 1 "internal error" ----------------------------------------------------------------------------------------
def test_dtypes_none_of_which_applies_is_refused(run_cli):
    # fp8_ds_mla is DeepSeek's MLA layout; llama-3.1-8b has no MLA layer, so the table would have no column at all
    line = one_line_error(run_cli("concurrency", "-m", "llama-3.1-8b", "--dtypes", "fp8_ds_mla"))
    assert "--dtypes fp8_ds_mla" in line and "MLA" in line
    # one dtype of the list that applies keeps the table (the other column says why it is empty)
    assert run_cli("concurrency", "-m", "llama-3.1-8b", "--dtypes", "fp8_ds_mla,bf16").code == 0
