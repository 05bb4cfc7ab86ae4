"""l40s22 (issue 20): the L40S preset's GEMM rates, measured, in place of kvplan's generic prefill MFU.

The never-seen run 54 (Qwen3-14B BF16 on one L40S, vLLM v0.15.1, 2.5 then 6 requests/s; tests/data/
serving_runs.toml) was simulated with a TPOT 29% above the measured 64.5 ms and called a false overload. By hand, its
decode step alone is not the wrong input: at the ~98 requests in flight (Little's law, 6/s x 16.3 s) the weights
(29.54 GB / (864 GB/s x 0.80) = 42.7 ms), the cache reads (98 x 671 x 160 KiB = 10.8 GB, 15.6 ms) and the overheads
(1.05 + 98 x 0.015 ms) make 60.8 ms. The wrong input was the prefill compute rate of the steps that carry prompt
chunks: with no [efficiency] table the L40S took the generic prefill_mfu 0.45 (0.45 x 362 = 163 TFLOP/s), which
priced every step with ~270 tokens compute-bound (2 x 14.0e9 x 273 / 163e12 = 47 ms of GEMMs, above the 42.7 ms
weight read), ~4 ms more per such step. The preset now carries the L40S's measured BF16 matmul rate (269.15 of
362.05 TFLOP/s, github.com/zzc0721/torch-performance-test-data @0785868 database.md) and the prefill MFU the A100
preset derives the same way (0.897 x that share = 0.67).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from kvplan.calc import costs
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.scenario import Scenario

ROOT = Path(__file__).resolve().parent.parent
tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")


def qwen3_14b_on_l40s(tmp_path: Path) -> Scenario:
    """The run's deployment: Qwen/Qwen3-14B (its config.json as tests/data/serving_runs.toml keeps it), one L40S."""
    data = tomllib.loads((ROOT / "tests" / "data" / "serving_runs.toml").read_text(encoding="utf-8"))
    folder = tmp_path / "qwen3-14b"
    folder.mkdir()
    (folder / "config.json").write_text(data["models"]["qwen3-14b"]["config_json"], encoding="utf-8")
    return Scenario(model=load_model(str(folder)), hardware=load_hardware("l40s"), tp=1, dp=1)


def test_l40s_preset_gemm_rates_are_the_measured_share():
    # BF16 torch.matmul on an L40S: 269.15 of 362.05 TFLOP/s dense = 0.7434 -> mfu 0.74; prefill_mfu by the A100
    # preset's rule, the H100's fitted 0.70 over its large-GEMM share 0.78 (= 0.8974) times it: 0.667 -> 0.67
    f = costs.step_factors(load_hardware("l40s"))
    assert f.value("mfu") == pytest.approx(round(269.15 / 362.05, 2))
    assert f.value("prefill_mfu") == pytest.approx(round(0.70 / 0.78 * 269.15 / 362.05, 2))
    # the memory bandwidth stays the generic 0.80 of 864 GB/s (no L40S copy measurement found; the hand step above
    # shows the decode step alone within 6% of the measured TPOT at it)
    assert f.value("hbm") == pytest.approx(0.80)
    assert "l40s preset efficiency.prefill_mfu" in f.prefill_mfu.why.formula


def test_a_mixed_step_of_the_run_by_hand(tmp_path):
    # 98 decode requests at context 671 (547 prompt + half of 248 output) and one 175-token prompt chunk, as run 54's
    # steps at 6/s carry them. By hand:
    #   weights: Qwen3-14B 14,768,307,200 params x 2 B = 29.5366 GB (embedding and LM head 151,936 x 5,120 each;
    #            40 layers of q/o 5,120^2, k/v 5,120 x 1,024, MLP 3 x 5,120 x 17,408; norms), / (864e9 x 0.80) =
    #            42.732 ms
    #   cache:   98 x 671 x (40 layers x 2 x 8 KV heads x 128 x 2 B = 163,840 B) = 10.774 GB / 691.2e9 = 15.588 ms
    #   GEMMs:   2 x 13,989,969,920 matmul params (no embedding) x (98 + 175) tokens = 7.638e12 FLOPs, + the chunk's
    #            attention 40 x 4 x 40 heads x 128 x 175^2 / 2 = 1.25e10: 7.651e12 / (362e12 x 0.67) = 31.55 ms,
    #            under the weight read: the step is weight-bound, the chunk adds no GEMM time
    #   overhead: 40 x 15 us + 450 us = 1.05 ms, + 98 x 15 us = 1.47 ms
    # mixed = 42.732 + 15.588 + 1.05 + 1.47 = 60.84 ms, the decode step alone the same
    s = qwen3_14b_on_l40s(tmp_path)
    cache = 98 * 671 * 163_840
    mixed, alone = costs.step_model(s).mixed_parts(98, cache, 0.0, chunks=((0, 175),))
    assert mixed == pytest.approx(60.84e-3, rel=1e-3)
    assert alone == pytest.approx(60.84e-3, rel=1e-3)
    # at the generic 0.45 the same step was compute-bound: 7.651e12 / (362e12 x 0.45) = 46.97 ms of GEMMs in place
    # of the 42.73 ms weight read, +4.24 ms: 65.08 ms
    generic = costs.step_model(s, costs.step_factors(s.hardware, prefill_mfu=0.45))
    assert generic.mixed_parts(98, cache, 0.0, chunks=((0, 175),))[0] == pytest.approx(65.08e-3, rel=1e-3)


def test_the_l40s_prefill_is_priced_at_its_measured_rate():
    # Llama-3.1-8B, one 2,048-token prompt in one chunk on one L40S: 2 x 7,504,658,432 matmul params (32 layers of
    # 4,096 x 10,240 attention and 3 x 4,096 x 14,336 MLP, the 128,256 x 4,096 LM head) x 2,048 = 3.0739e13 FLOPs +
    # attention 32 x 4 x 32 heads x 128 x 2,048^2 / 2 = 1.0995e12 = 3.1838e13 FLOPs / (362e12 x 0.67) = 131.27 ms
    # (compute-bound: the weights read in 16.06 GB / 691.2 GB/s = 23.2 ms), + 32 x 15 + 450 us = 0.93 ms: 132.20 ms
    s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("l40s"), tp=1, dp=1)
    assert costs.step_model(s).prefill_seconds(2048, 0, 2048) == pytest.approx(132.20e-3, rel=2e-3)
