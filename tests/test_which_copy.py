"""The suite tests the copy it means to: the working tree by default, the installed wheel in CI's second run."""

import os
from pathlib import Path

import kvplan

ROOT = Path(__file__).resolve().parent.parent


def test_imports_the_intended_copy():
    here = Path(kvplan.__file__).resolve().parent
    if os.environ.get("KVPLAN_TEST_INSTALLED"):
        assert here != ROOT / "kvplan", f"KVPLAN_TEST_INSTALLED=1 but kvplan came from the tree: {here}"
        # the wheel carries the presets inside the package
        assert (here / "presets" / "models" / "deepseek-r1.toml").is_file()
    else:
        assert here == ROOT / "kvplan", f"the tests imported {here}, not the working tree"
