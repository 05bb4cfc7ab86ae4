"""Rebuild README.md from docs/README.in.md: each <<name>> is replaced by tests/golden/<name>.txt (real output)
and <<fidelity>> by `benchmarks/tpot_fidelity.py`'s table. Run after regenerating the golden files
(`KVPLAN_UPDATE_GOLDEN=1 pytest tests/test_golden.py -k "not readme"`); tests/test_golden.py checks the result."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    text = (ROOT / "docs" / "README.in.md").read_text()

    def fill(m: re.Match) -> str:
        name = m.group(1)
        if name == "fidelity":
            return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tpot_fidelity.py")], check=True,
                                  capture_output=True, text=True, cwd=ROOT).stdout.rstrip("\n")
        return (ROOT / "tests" / "golden" / f"{name}.txt").read_text()

    (ROOT / "README.md").write_text(re.sub(r"<<([a-z0-9.-]+)>>", fill, text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
