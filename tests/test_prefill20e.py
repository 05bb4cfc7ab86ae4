"""prefill20e: compare-preemption's default prefill MFU is the GPU preset's (compute-only) prefill_mfu, and the
prefill fidelity harness's per-GPU prefill_mfu fit follows its written procedure (benchmarks/prefill_fidelity.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from conftest import load_source
from test_preemption import run

from kvplan.inputs.presets import load_hardware
from kvplan.specs.dtypes import KVDtype

ROOT = Path(__file__).resolve().parent.parent
tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")


def preset_prefill_mfu(gpu: str) -> float | None:
    """The figure as the preset file writes it, read apart from kvplan's loaders."""
    eff = tomllib.loads((ROOT / "presets" / "hardware" / f"{gpu}.toml").read_text()).get("efficiency", {})
    return eff["prefill_mfu"]["value"] if "prefill_mfu" in eff else None


def a100(**kw):
    return run(model="llama-3.1-8b", kv_dtype=KVDtype.BF16, hardware=load_hardware("a100-80gb"), tp=1,
               prompt_tokens=4000, generated_tokens=4000, sweep=(4000,), **kw)


def test_default_mfu_is_the_presets_prefill_mfu():
    pm = preset_prefill_mfu("a100-80gb")
    assert pm == 0.74                                    # presets/hardware/a100-80gb.toml (derived from H100's fit)
    default, given = a100(), a100(mfu=pm)
    assert default["mfu"] == pytest.approx(0.74)
    assert default["recompute_seconds"] == pytest.approx(given["recompute_seconds"], rel=1e-12)


def test_default_mfu_prices_the_compute_at_that_fraction():
    # T(m) = R + K / m (R: overhead, no communication at TP1): T(0.37) - T(0.74) = K / 0.74, the compute at the
    # preset's 0.74 = recompute FLOPs / (0.74 x 312e12, the A100's dense bf16 peak); every 2,048-token chunk of
    # Llama-3.1-8B (2 x ~7.5e9 x 2,048 = 3.1e13 FLOPs, ~0.13 s at 0.74 x 312e12) is far above its weight read
    # (16 GB / 2.039 TB/s = 8 ms), so no chunk is bound by it
    default, half = a100(), a100(mfu=0.37)
    assert half["recompute_seconds"] - default["recompute_seconds"] == pytest.approx(
        default["recompute_flops"] / (0.74 * 312e12), rel=1e-3)


def test_gpu_without_a_prefill_mfu_gets_the_generic_figure():
    assert preset_prefill_mfu("h100-pcie") is None      # (l40s until l40s22 gave it its measured GEMM share)
    data = run(model="llama-3.1-8b", kv_dtype=KVDtype.BF16, hardware=load_hardware("h100-pcie"), tp=1,
               prompt_tokens=4000, generated_tokens=4000, sweep=(4000,))
    assert data["mfu"] == pytest.approx(0.45)            # costs.GENERIC_FACTORS: 0.45 (zeroentropy.dev/concepts/mfu)


def test_explain_names_the_presets_figure(tmp_path):
    from typer.testing import CliRunner

    from kvplan.cli import app
    out = CliRunner().invoke(app, ["compare-preemption", "-m", "llama-3.1-8b", "-g", "a100-80gb", "--tp", "1",
                                   "--prompt", "4000", "--generated", "4000", "--explain"]).output
    assert "mfu = 0.74: default: a100-80gb preset efficiency.prefill_mfu" in out
    given = CliRunner().invoke(app, ["compare-preemption", "-m", "llama-3.1-8b", "-g", "a100-80gb", "--tp", "1",
                                     "--prompt", "4000", "--generated", "4000", "--mfu", "0.5", "--explain"]).output
    assert "mfu = 0.5: given with --mfu" in given


# --- the per-GPU prefill_mfu fit (benchmarks/prefill_fidelity.py, procedure in its docstring) -------------------


pf = load_source("prefill_fidelity", ROOT / "benchmarks" / "prefill_fidelity.py")
BY_ID = {p.id: p for p in pf.load_points()}


def test_compute_ratio_by_hand():
    # P5 (tests/test_prefill_fidelity.py's hand price): kvplan 67.835 ms = compute 61.105 ms (at the preset's 0.74)
    # + 5.73 ms step overhead + 1.0 ms vLLM frontend; measured 81.0 ms:
    # ratio = (81.0 - 6.73) / 61.105 = 1.2155 (the A100 ran the compute 21.6% slower than priced)
    assert pf.compute_ratio(BY_ID["P5"]) == pytest.approx((81.0 - 6.73) / 61.105, rel=3e-3)


def test_fit_uses_only_possible_fit_points():
    fits = pf.fit_prefill_mfu()
    m, fitted, used = fits["a100-80gb"]
    # fit-split A100 points: P5, P7, P13, P15; P7 (1.08 x peak) and P13 (1.79 x peak) are impossible rows
    assert used == ["P5", "P15"] and m == 0.74
    r5, r15 = pf.compute_ratio(BY_ID["P5"]), pf.compute_ratio(BY_ID["P15"])
    assert fitted == round(0.74 / ((r5 + r15) / 2), 2)          # the median of two: their mean
    assert fits["h100-sxm"][2] == ["P1", "P3", "P9"]
    assert "gb200" not in fits                                  # its one point (P10) is held out


def test_fit_never_reads_held_out_points():
    from dataclasses import replace
    points = pf.load_points()
    moved = [replace(p, measured=p.measured * 3) if p.split == "held_out" else p for p in points]
    assert pf.fit_prefill_mfu(moved) == pf.fit_prefill_mfu(points)
