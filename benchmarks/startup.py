"""Start-up benchmark: `kvplan size` wall time as a ratio to importing typer, pydantic and rich.

Start-up is most of a planner's latency. Target: ratio <= 1.3. Run: `python benchmarks/startup.py`.

A second baseline also loads pydantic's BaseModel machinery: `import pydantic` alone is lazy and does not
load it, while any pydantic spec (and typer >= 0.29, which coerces CLI values through pydantic) does.
Measured on the 2-core development machine (2026-11-29): baseline ~130-175 ms, `kvplan --help` ~0.6-0.7x,
`kvplan size -f json` ~1.4-1.5x, `kvplan size` (rich tables) ~1.8-1.9x of the first baseline; against the
second baseline `kvplan size -f json` is ~1.1x. The gap is pydantic.main, typer's per-option TypeAdapters and
rich's table rendering; kvplan's own modules add ~30 ms.
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
