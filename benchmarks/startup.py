"""Start-up benchmark: `kvplan size` wall time as a ratio to importing typer, pydantic and rich.

Start-up is most of a planner's latency. Target: ratio <= 1.3. Run: `python benchmarks/startup.py`.
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
    # Warm the file cache once for each.
    for cmd in (baseline_cmd, kvplan_cmd + ["size"]):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    baseline = wall_time(baseline_cmd, args.runs)
    rows = [("kvplan --help", kvplan_cmd + ["--help"]), ("kvplan size", kvplan_cmd + ["size"]),
            ("kvplan size -f json", kvplan_cmd + ["size", "-f", "json"])]
    print(f"baseline  python -c 'import typer, pydantic, rich': {baseline * 1000:7.1f} ms (median of {args.runs})")
    worst = 0.0
    for label, cmd in rows:
        t = wall_time(cmd, args.runs)
        ratio = t / baseline
        worst = max(worst, ratio)
        print(f"{label:<22} {t * 1000:7.1f} ms   ratio {ratio:4.2f}x   (target <= {TARGET_RATIO}x)")
    print("PASS" if worst <= TARGET_RATIO else "OVER TARGET")
    return 0


if __name__ == "__main__":
    sys.exit(main())
