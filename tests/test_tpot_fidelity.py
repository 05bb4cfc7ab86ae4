"""kvplan's TPOT against published decode measurements (benchmarks/tpot_fidelity.py holds the points and their
sources). B1a and B3a set the H100 and B200 presets' fixed overheads and B7a the generic MoE-layer overhead, so
those three are in-sample; the others are not."""

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "tpot_fidelity", Path(__file__).resolve().parent.parent / "benchmarks" / "tpot_fidelity.py")
fidelity = importlib.util.module_from_spec(spec)
sys.modules["tpot_fidelity"] = fidelity
spec.loader.exec_module(fidelity)
BY_ID = {p.id: p for p in fidelity.POINTS}


@pytest.mark.parametrize("point_id, tolerance", [
    ("B1b", 0.05), ("B1c", 0.05),       # Llama-3.1-8B batch 1 at 32K and 125K on H100: the KV slope
    ("B2", 0.05),                       # the same with FP8 KV
    ("B3b", 0.10),                      # B200 at 125K
    ("B4a", 0.10),                      # batch 8 at 20K
    ("B7b", 0.10),                      # DeepSeek-R1 TP8 on H200, batch 16
])
def test_clean_points_within_tolerance(point_id, tolerance):
    p = BY_ID[point_id]
    assert fidelity.predict(p) == pytest.approx(p.tpot_ms, rel=tolerance), p.source


def test_median_error_over_every_point_is_within_15_percent():
    errors = [abs(fidelity.predict(p) - p.tpot_ms) / p.tpot_ms for p in fidelity.POINTS]
    assert statistics.median(errors) <= 0.15
