"""Shared test helpers: run the real CLI entry point in-process and capture what it prints."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import pytest


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
