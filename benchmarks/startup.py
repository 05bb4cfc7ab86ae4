"""Start-up benchmark: `kvplan size` wall time as a ratio to importing typer, pydantic and rich.

Start-up is most of a planner's latency. Target: ratio <= 1.3. Run: `python benchmarks/startup.py`.

A second baseline also loads pydantic's BaseModel machinery: `import pydantic` alone is lazy and does not
load it, while any pydantic spec (and typer >= 0.29, which coerces CLI values through pydantic) does.

Measured on the 2-core development machine, idle, 21 runs (2026-11-29, typer 0.29.2, pydantic 2.13):
baseline 120 ms, baseline2 148 ms; `kvplan --help` 93 ms (0.77x); `kvplan size -f json` 230 ms (1.92x);
`kvplan size` with rich tables 274 ms (2.28x). The 1.3x target is NOT met. Where the time goes beyond
baseline2: typer 0.29 building a pydantic TypeAdapter per option at parse time (~40 ms), kvplan's pydantic
spec classes and the result/calculator modules (~45 ms), loading and validating two presets (~15 ms), and
rich's table rendering (~35 ms). With typer 0.28 (no adapters) the baseline itself drops to 85 ms, so the
ratio does not improve. Meeting 1.3x would need specs that skip pydantic on the trusted built-in path.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

TARGET_RATIO = 1.3


def wall_time(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    kvplan = shutil.which("kvplan")
    kvplan_cmd = [kvplan] if kvplan else [sys.executable, "-m", "kvplan"]
    baseline_cmd = [sys.executable, "-c", "import typer, pydantic, rich"]
    full_baseline_cmd = [sys.executable, "-c", "import typer, rich; from pydantic import BaseModel"]
    # Warm the file cache once for each.
    for cmd in (baseline_cmd, kvplan_cmd + ["size"]):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    baseline = wall_time(baseline_cmd, args.runs)
    rows = [("kvplan --help", kvplan_cmd + ["--help"]), ("kvplan size", kvplan_cmd + ["size"]),
            ("kvplan size -f json", kvplan_cmd + ["size", "-f", "json"])]
    full = wall_time(full_baseline_cmd, args.runs)
    print(f"baseline  python -c 'import typer, pydantic, rich': {baseline * 1000:7.1f} ms (median of {args.runs})")
    print(f"baseline2 ... 'from pydantic import BaseModel':     {full * 1000:7.1f} ms "
          f"(ratio {full / baseline:4.2f}x of the first)")
    worst = 0.0
    for label, cmd in rows:
        t = wall_time(cmd, args.runs)
        ratio = t / baseline
        worst = max(worst, ratio)
        print(f"{label:<22} {t * 1000:7.1f} ms   ratio {ratio:4.2f}x   (target <= {TARGET_RATIO}x)"
              f"   vs baseline2 {t / full:4.2f}x")
    print("PASS" if worst <= TARGET_RATIO else "OVER TARGET")
    return 0


if __name__ == "__main__":
    sys.exit(main())
