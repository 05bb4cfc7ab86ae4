"""Speed of the vectorized decode-step model: a TPOT table of 256 batch sizes x 1,000 contexts.

Target: under 50 ms beyond start-up (measured here in-process, after the imports and the presets are loaded, as
the median of repeated runs; reported with the ratio to the target). Run: `python benchmarks/tpot_speed.py`.
"""

from __future__ import annotations

import statistics
import sys
import time

TARGET_SECONDS = 0.050


def table_seconds(runs: int = 15) -> float:
    import numpy as np

    from kvplan.calc import costs
    from kvplan.inputs.presets import load_hardware, load_model
    from kvplan.scenario import Scenario

    s = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"), kv_dtype_request="fp8")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step = costs.step_model(s)
        batches = np.arange(1, 257, dtype=float)[:, None]
        contexts = np.linspace(1_000, 131_072, 1_000)
        nbytes, nflops = step.request_cache(contexts)
        grid = step.step(batches, batches * nbytes[None, :], batches * nflops[None, :])["total"]
        assert grid.shape == (256, 1000)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    t = table_seconds()
    print(f"TPOT table 256 batches x 1,000 contexts: {t * 1e3:.2f} ms (target {TARGET_SECONDS * 1e3:.0f} ms, "
          f"ratio {t / TARGET_SECONDS:.2f}) {'PASS' if t <= TARGET_SECONDS else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
