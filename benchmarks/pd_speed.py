"""Speed of `kvplan pd`: CPU seconds and simulator calls of ``plan_pd`` on the README's two DeepSeek-R1 cases and
two Llama-3.1-8B ones, with a digest of each plan's JSON so two trees can be compared for identical answers.

Nearly all of pd's time is the simulator: ``simulate.simulated_rate`` (the colocated goodput's bisection, ~7 runs
per layout searched, at this request and at each of the ratio table's 12 rows) and, much less, the disaggregated
side's simulated prefill queue (``pd.prefill_queue_waits``).

pd21, 2026-12-06 (CPU seconds, min of 3, this 2-CPU machine shared; the tree before (main + pd21's first two
commits) and this one run alternately, the same 12 pd command lines' JSON compared byte for byte: identical):
the scenario's own layout is no longer searched a second time as a role layout (Llama TP1 on 8 GPUs: every row
simulated twice), a colocated layout's bisection stops as soon as its answer cannot end above the best layout's
(at most top x 1.25^4, and below any rate that missed), a split's TTFT bisection likewise once its upper end falls
to the best split's rate, and the ratio table's row at the request's own prompt reuses the request's search.
Measured twice each, alternating: 3.31 / 3.49 s -> 2.26 / 2.24 s CPU in all (1.5x), simulated_rate calls 542 ->
360 (r1-reasoning 58 -> 58, r1-chat 120 -> 102, llama-chat 176 -> 92, llama-16k 188 -> 108), every digest equal.
main before pd21 (the (B - 1) prefill count and attention DP, which change the answers): 3.92 s, 637 calls.

pd21s, 2026-12-06 (answers change: attention-DP ranks priced in lockstep, colocated's whole-GPU layouts, two
colocated layouts simulated besides the scenario's own instead of one): main 3.64 s CPU, 361 simulated_rate calls
-> 6.42 s, 668 calls (1.76x CPU; r1-reasoning 59 -> 119, r1-chat 102 -> 282, llama-chat 92 -> 127, llama-16k
108 -> 140), one run each, the same machine shared. The second colocated layout is most of it; it is what finds
two TP1 DP8 EP8 instances on the reasoning case, which the closed form ranks below one TP1 DP16 EP16 instance.

pd21u, 2026-12-07 (answers the same: every digest equal before and after): the scenario's own instance, its TP
defaulted, was simulated again as the role layout of that TP (the same replica, TP unset in one); pinned, it is
recognised as searched. And a colocated layout that must beat another's rate runs that rate first wherever it lies in
the range still open (above a top that meets, below one that misses): a miss there ends its search. On the tree
after pd21u's answer-changing commits, alternating in one run, 2 CPUs shared: simulated_rate calls 628 -> 550
(r1-reasoning 88 -> 84, r1-chat 281 -> 214, llama-chat 123 -> 118, llama-16k 136 -> 134), CPU 6.09 -> 5.71 s
(noisy: another helper's suite ran alongside). main before pd21u: 6.26 s, 663 calls (it answers differently).

Run: ``python benchmarks/pd_speed.py`` times the tree this file is in; ``--tree DIR`` times the kvplan in DIR
instead (another worktree: the tree before a change), with the same cases and digests.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

CASES = {
    "r1-reasoning": dict(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8", prompt_tokens=1000,
                         decode_tokens=30_000),
    "r1-chat-ttft2s": dict(model="deepseek-r1", hardware="h200", nodes=2, kv_dtype_request="fp8",
                           prompt_tokens=4000, decode_tokens=300),
    "llama-chat": dict(model="llama-3.1-8b", hardware="h100-sxm", tp=1, kv_dtype_request="fp8", prompt_tokens=4000,
                       decode_tokens=300),
    "llama-16k-ttft400ms": dict(model="llama-3.1-8b", hardware="h100-sxm", tp=1, kv_dtype_request="fp8",
                                prompt_tokens=16_000, decode_tokens=300),
}
TTFT = {"r1-chat-ttft2s": 2.0, "llama-16k-ttft400ms": 0.4}
RUNS = 3


def main() -> None:
    args = sys.argv[1:]
    tree = Path(args[args.index("--tree") + 1]) if "--tree" in args else Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(tree))
    import kvplan.calc.simulate as sim
    from kvplan.calc.pd import PdOptions, plan_pd
    from kvplan.calc.slo import SloTargets
    from kvplan.present.pd import present
    from kvplan.render.output import to_json
    from kvplan.scenario import Scenario

    print(f"tree: {Path(sim.__file__).resolve().parent.parent.parent}")
    calls = [0]
    real = sim.simulated_rate

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    sim.simulated_rate = counted
    total = 0.0
    for name, kw in CASES.items():
        s = Scenario(**kw)
        o = PdOptions(targets=SloTargets(ttft=TTFT.get(name), tpot=0.05))
        cpus = []
        for _ in range(RUNS):
            calls[0] = 0
            start = time.process_time()
            plan = plan_pd(s, o)
            cpus.append(time.process_time() - start)
        digest = hashlib.sha256(to_json(present(plan)).encode()).hexdigest()[:12]
        total += min(cpus)
        print(f"{name}: cpu_s={min(cpus):.3f} rate_calls={calls[0]} digest={digest}", flush=True)
    print(f"total_cpu_s: {total:.3f}")


if __name__ == "__main__":
    main()
