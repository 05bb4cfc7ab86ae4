"""The figures of a ``kvplan simulate`` run, from what its events recorded (``kvplan.engines.replica.Tally``):
the per-request arrays and the timeline of the run (``SimRun``), and the run's metrics as typed values (counts,
shares, rates, percentiles, peaks, stalls), each with its derivation; the timeline in equal slices for the charts.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.calc.costs import frontend_seconds
from kvplan.specs.values import Count, Seconds

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.calc.sim.records import SimOptions, SimRun
    from kvplan.engines.replica import Tally

REQUEST_SERIES = ("arrival", "admitted", "first_token", "finish", "preemptions", "swap_outs", "swap_ins", "recomputed",
                  "offloads", "prefix_hits", "recompute_hits")


def request_arrays(tally: Tally, submitted: int) -> dict[str, Any]:
    """The tally's per-request lists as numpy arrays (times as floats, counts as int64), the first ``submitted``
    of each (a closed loop's --duration may end before every request was submitted: the run is the rest)."""
    import numpy as np

    out = {}
    for name in REQUEST_SERIES:
        dtype = float if name in ("arrival", "admitted", "first_token", "finish") else np.int64
        a = np.array(getattr(tally, name), dtype=dtype)
        out[name] = a[:submitted] if submitted < len(a) else a
    return out


# The timeline's bound: past MARKS_KEPT marks (five float64s each: 20 MiB) the event loop folds them into at most
# 2 x MARK_CELLS marks over equal cells of the time so far (``fold_marks``), so a run of millions of events keeps a
# few MiB of timeline; every run of fewer marks (each golden, the 10K benchmark's 250K) keeps them all, exactly.
MARKS_KEPT = 2**19
MARK_CELLS = 2**14


def fold_marks(marks) -> None:
    """Fold the flat marks (an ``array('d')``, five numbers a mark, in time order) in place into two marks per
    cell of 1 / MARK_CELLS of the time so far: at the cell's first time the most each series reached in it, then
    its last mark (the state in force after it). A slice of the timeline (``timeline_buckets``) then sees every
    peak, placed at most one cell (1/16,384 of the run) early; folding folded marks again keeps the peaks."""
    import numpy as np

    if not marks or marks[-5] <= 0:
        return
    m = np.frombuffer(marks, dtype=float).reshape(-1, 5)
    t = m[:, 0]
    end = float(t[-1])
    cell = np.minimum((t * (MARK_CELLS / end)).astype(np.int64), MARK_CELLS - 1)
    starts = np.flatnonzero(np.diff(cell, prepend=-1))
    ends = np.append(starts[1:], len(t)) - 1
    out = np.empty((2 * len(starts), 5))
    out[0::2, 0] = t[starts]
    out[0::2, 1:] = np.maximum.reduceat(m[:, 1:], starts, axis=0)
    out[1::2] = m[ends]
    del m, t                                     # the buffer's views: the array may be resized again
    marks[:] = array("d", out.ravel().tobytes())


def timeline_arrays(marks: Sequence[float]) -> tuple:
    """(times, blocks held, running, swapped, DRAM bytes) as numpy arrays from the engine's marks: a flat list,
    five numbers per mark (the engine extends it by each mark's tuple: one flat float conversion here, about a
    third of the time of converting a list of tuples)."""
    import numpy as np

    if not marks:
        return (np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
                np.zeros(1, dtype=np.int64))
    m = np.array(marks, dtype=float).reshape(-1, 5)   # the counts and bytes are exact in a float64: < 2^53
    return (m[:, 0].copy(), *(m[:, j].astype(np.int64) for j in range(1, 5)))


TIMELINE_BUCKETS = 40


def timeline_buckets(run: SimRun, buckets: int = TIMELINE_BUCKETS):
    """The run's timeline in ``buckets`` equal slices of the simulated time: for each slice its start and, per
    series, the most it reached (the state in force at the slice's start, and every mark inside it; the engine
    marks the state as each run of steps starts, after admissions, and as it ends, before completions free
    their blocks, so a run's peak occupancy is seen). Series:
    pool occupancy (blocks held / the blocks requests draw from), running requests, requests swapped out (in DRAM
    or on their way), DRAM bytes per GPU."""
    import numpy as np

    t, used, running, swapped, dram = run.timeline
    end = max(run.simulated_seconds, 1e-12)
    edges = np.linspace(0.0, end, buckets + 1)
    first = np.maximum(np.searchsorted(t, edges[:-1], side="right") - 1, 0)
    last = np.maximum(np.searchsorted(t, edges[1:], side="left"), first + 1)
    # DP replicas: blocks held over every replica's pool, running and swapped summed, DRAM the mean per GPU
    series = {"pool_occupancy": used / max(run.setup.total_blocks * run.replicas, 1), "running_requests": running,
              "swapped_requests": swapped, "dram_bytes_per_gpu": dram / run.replicas if run.replicas > 1 else dram}
    out = {name: [float(v[a:b].max()) for a, b in zip(first, last, strict=True)] for name, v in series.items()}
    return [float(x) for x in edges[:-1]], out


@dataclass(frozen=True)
class Timeline:
    """The run's timeline in equal slices (``timeline_buckets``): typed rows for the JSON document, and the chart's
    series as plain numbers (a chart takes numbers), each series the most it reached in each slice."""

    span: Seconds                           # the simulated time the slices cover
    slices: Count
    starts: tuple[float, ...]               # each slice's start, seconds (the chart's x)
    rows: tuple[dict, ...]                  # per slice: its start and the four series as typed values
    occupancy_percent: tuple[float, ...]    # pool occupancy, percent
    running: tuple[float, ...]              # requests running
    swapped: tuple[float, ...]              # requests swapped out
    dram_gib_per_gpu: tuple[float, ...]     # DRAM per GPU, GiB (2^30 bytes)


def timeline_values(run: SimRun, buckets: int = TIMELINE_BUCKETS) -> Timeline:
    """``timeline_buckets`` as a ``Timeline``: each slice's figures typed, with the slices' derivation."""
    from kvplan.specs.values import Bytes, Fraction, Number, derived

    starts, series = timeline_buckets(run, buckets)
    width = run.simulated_seconds / len(starts)
    why = derived(f"the most in each of {len(starts)} equal slices of the simulated time (the state at the slice's "
                  "start and at every event inside it)", f"slices of {width:.6g} s")
    rows = tuple({"start_seconds": Seconds(t0, why), "pool_occupancy": Fraction(series["pool_occupancy"][k], why),
                  "running_requests": Number(series["running_requests"][k], why),
                  "swapped_requests": Number(series["swapped_requests"][k], why),
                  "dram_bytes_per_gpu": Bytes(int(series["dram_bytes_per_gpu"][k]), why)}
                 for k, t0 in enumerate(starts))
    return Timeline(Seconds(run.simulated_seconds, derived("the simulated time", f"{run.simulated_seconds:.6g} s")),
                    Count(len(starts), derived("equal slices of the simulated time", f"{len(starts)}")),
                    tuple(starts), rows, tuple(100 * v for v in series["pool_occupancy"]),
                    tuple(series["running_requests"]), tuple(series["swapped_requests"]),
                    tuple(v / 2**30 for v in series["dram_bytes_per_gpu"]))


def percentile(values, q: float) -> float | None:
    import numpy as np

    return float(np.percentile(values, q)) if len(values) else None


def waiting_at_last_arrival(r: SimRun):
    """Requests that had arrived but not yet started when the last one arrived: bounded when the deployment keeps
    up with the arrivals, a growing share of the run when it does not (the queue grows without bound)."""
    import numpy as np

    from kvplan.specs.values import Count, derived

    if not len(r.arrival):
        return Count(0, derived("no requests"))
    last = float(r.arrival.max())
    waiting = int(np.count_nonzero((r.arrival <= last) & (r.admitted > last)))
    return Count(waiting, derived("requests arrived by the last arrival and not yet admitted then",
                                  f"{waiting:,} of {len(r.arrival):,} at t = {last:.6g} s"))


def client_ttft(r: SimRun):
    """Each request's TTFT as its client sees it: first token - arrival + the engine's frontend latency
    (``costs.frontend_seconds``: the API server's way in and the first token's way out, outside the steps)."""
    return r.first_token - r.arrival + frontend_seconds(r.scenario).number()


class _Figures:
    """The run's totals and per-request series the metrics read, and the words their derivations share."""

    def __init__(self, r: SimRun, dp: int) -> None:
        self.r, self.dp = r, dp
        self.n = len(r.prompts)
        self.gen = int(r.outputs.sum())
        self.T = r.simulated_seconds
        self.frontend = frontend_seconds(r.scenario)
        self.ttft = client_ttft(r)
        self.queue = r.admitted - r.arrival
        multi = r.outputs > 1
        self.tpot = (r.finish[multi] - r.first_token[multi]) / (r.outputs[multi] - 1)
        self.recomputed = int(r.recomputed.sum())
        self.preempted = int((r.preemptions > 0).sum())
        self.so, self.si = int(r.swap_outs.sum()), int(r.swap_ins.sum())
        self.off = int(r.offloads.sum()) if r.offloads is not None else 0
        self.hits_n = int((r.prefix_hit_tokens > 0).sum()) if r.prefix_hit_tokens is not None else 0
        self.hits_tok = int(r.prefix_hit_tokens.sum()) if r.prefix_hit_tokens is not None else 0

    def many(self, text: str) -> str:
        """A derivation's words for a deployment of several DP replicas (none for one: its text is unchanged)."""
        return text if self.dp > 1 else ""

    def pct(self, name: str, values, q: float, cls, what: str):
        from kvplan.specs.values import derived

        v = percentile(values, q)
        return cls(v, derived(f"p{q:g} of {what} over {len(values):,} requests (numpy linear interpolation)",
                              f"{name} = {v:.6g}" if v is not None else "no requests"))

    def ratio(self, cls, num, den, formula: str, names: str):
        from kvplan.specs.values import derived

        v = num / den if den else None
        return cls(v, derived(formula, f"{names}: {num:,.6g} / {den:,.6g}" + (f" = {v:.6g}" if v is not None else "")))


def run_metrics(r: SimRun, dp: int, o: SimOptions) -> dict:
    """The run's metrics, name -> typed value (JSON keys with their units), in the order the outputs show them."""
    f = _Figures(r, dp)
    out = {**_sizes(f), **_preemption(f, o), **_latency(f), **_peaks(f)}
    if r.mixed_prefill or r.preemption_cause == "retract":    # vLLM V1, SGLang: recompute reuses cached prefixes
        out.update(_recompute_hits(f))
    if r.mixed_prefill:
        out.update(_mixed(f))
    if r.hicache is not None:
        out.update(_hicache(f))
    if r.offload is not None:
        out.update(_offload(f))
    return out


def _offload(f: _Figures) -> dict:
    """vLLM's CPU offloading connector (``SimRun.offload``, ``kvplan.engines.vllm_scheduler.CpuPool``): resumes that
    loaded their blocks back and the tokens loaded, against the tokens still recomputed; the bytes each way per GPU
    and their time on the host link; the CPU pool, its peak, its evictions and the stores it refused."""
    from kvplan.specs.values import Bytes, Count, Seconds, Tokens, derived

    h, bb, many = f.r.offload, f.r.setup.block_bytes, f.many
    rec = int(f.r.recomputed.sum())
    return {
        "offload_loads": Count(h["loads"], derived(
            "resumed victims that loaded their blocks back from the CPU pool instead of recomputing them"
            + many(", summed over the replicas"), f"{h['loads']:,} loads")),
        "offload_loaded_tokens": Tokens(h["loaded_tokens"], derived(
            "tokens loaded back (whole blocks after the GPU prefix-cache hit), not recomputed; recomputed tokens: "
            f"{rec:,}" + many(", summed over the replicas"), f"{h['loaded_blocks']:,} blocks = "
            f"{h['loaded_tokens']:,} tokens")),
        "offload_loaded_bytes": Bytes(h["loaded_blocks"] * bb, derived(
            "blocks loaded x one block's bytes per GPU", f"{h['loaded_blocks']:,} x {bb:,} B")),
        "offload_load_seconds": Seconds(h["load_seconds"], derived(
            "the loads over the host link's host-to-device direction (costs.swap_seconds), each request waiting for "
            "its own" + many(", summed over the replicas"), f"{h['load_seconds']:.6g} s")),
        "offload_stored_bytes": Bytes(h["stored_blocks"] * bb, derived(
            "blocks written through to the CPU pool x one block's bytes per GPU (async, after their step)",
            f"{h['stored_blocks']:,} x {bb:,} B")),
        "offload_store_seconds": Seconds(h["store_seconds"], derived(
            "the stores over the device-to-host direction (costs.swap_seconds), off the critical path but for a "
            "victim's flush", f"{h['store_seconds']:.6g} s")),
        "offload_flush_stall_seconds": Seconds(h["flush_stall_seconds"], derived(
            "steps held until a victim's pending stores landed (handle_preemptions waits for them)",
            f"{h['flush_stall_seconds']:.6g} s")),
        "offload_cpu_pool_bytes": Bytes(h["cpu_blocks"] * bb, derived(
            "the CPU pool per GPU: --kv-offloading-size // (block bytes x TP x PP) blocks, less the shared prefix's, "
            "x one block's bytes", f"{h['cpu_blocks']:,} x {bb:,} B")),
        "offload_peak_cpu_bytes": Bytes(h["peak_cpu_blocks"] * bb, derived(
            "most of the CPU pool held per GPU", f"{h['peak_cpu_blocks']:,} x {bb:,} B")),
        "offload_evicted_blocks": Count(h["evicted_blocks"], derived(
            "blocks the LRU evicted from the CPU pool for room", f"{h['evicted_blocks']:,} blocks")),
        "offload_refused_stores": Count(h["failed_stores"], derived(
            "store attempts refused (too few evictable blocks: the running requests' stores are not evictable until "
            "they finish or are preempted); retried at the request's next step", f"{h['failed_stores']:,}")),
    }


def _hicache(f: _Figures) -> dict:
    """SGLang's HiCache (``SimRun.hicache``): the tokens loaded back from host memory, the bytes moved each way
    and the load time, the host pool and its peak per GPU."""
    from kvplan.specs.values import Bytes, Seconds, Tokens, derived

    h, bb, many = f.r.hicache, f.r.setup.block_bytes, f.many
    hits = int(sum(h["host_hit_tokens"]))
    return {
        "hicache_loaded_tokens": Tokens(hits, derived(
            "prefix-hit tokens prefills loaded back from HiCache's host memory instead of computing (their prompts' "
            "and resumed requests' own)" + many(", summed over the replicas"), f"{hits:,} tokens")),
        "hicache_loaded_bytes": Bytes(h["loaded_blocks"] * bb, derived(
            "blocks loaded back x one block's bytes per GPU", f"{h['loaded_blocks']:,} x {bb:,} B")),
        "hicache_load_seconds": Seconds(h["load_seconds"], derived(
            "the loads over the host link (costs.swap_seconds), each overlapped with its prefill"
            + many(", summed over the replicas"), f"{h['load_seconds']:.6g} s")),
        "hicache_written_bytes": Bytes(h["written_blocks"] * bb, derived(
            "blocks written through to host memory x one block's bytes per GPU (on the write stream, not the "
            "critical path)", f"{h['written_blocks']:,} x {bb:,} B")),
        "hicache_write_seconds": Seconds(h["write_seconds"], derived(
            "the write-through copies over the host link (costs.swap_seconds)", f"{h['write_seconds']:.6g} s")),
        "hicache_host_pool_bytes": Bytes(h["host_blocks"] * bb, derived(
            "HiCache's host pool per GPU: --hicache-size, else --hicache-ratio x the device pool, in blocks x "
            "their bytes", f"{h['host_blocks']:,} x {bb:,} B")),
        "hicache_peak_host_bytes": Bytes(h["peak_host_blocks"] * bb, derived(
            "most host memory the backups held per GPU", f"{h['peak_host_blocks']:,} x {bb:,} B")),
    }


def _recompute_hits(f: _Figures) -> dict:
    """A scheduler whose resumed requests find their own cached tokens (vLLM V1's free queue, SGLang's radix tree):
    recomputed tokens with and without those prefix-cache hits."""
    from kvplan.specs.values import Tokens, derived

    r, recomputed = f.r, f.recomputed
    hits = int(r.recompute_hit_tokens.sum())
    where = ("not yet evicted from the free queue" if r.mixed_prefill else
             "its radix-tree path not yet evicted (LRU)")
    return {
        "recomputed_tokens": Tokens(recomputed, derived(
            "tokens a preempted request computed again on resume, past what the prefix cache still held of its own "
            "blocks", f"{recomputed:,} tokens")),
        "recompute_prefix_hit_tokens": Tokens(hits, derived(
            f"tokens a resumed request found in the prefix cache: its own blocks {where}", f"{hits:,} tokens")),
        "recomputed_tokens_without_prefix_hits": Tokens(recomputed + hits, derived(
            "recomputed tokens + the prefix-cache hits of the resumes: what recompute would cost without them",
            f"{recomputed:,} + {hits:,} = {recomputed + hits:,} tokens")),
    }


def _mixed(f: _Figures) -> dict:
    """A scheduler that runs prefill chunks inside steps (vLLM V1): its mixed steps, and the figure whose meaning
    it changes (the prefill stall)."""
    from kvplan.specs.values import Count, Number, Seconds, derived

    r, many = f.r, f.many
    steps, tokens = r.mixed_steps, r.mixed_prefill_tokens
    return {
        "mixed_steps": Count(steps, derived("steps that ran prefill chunks with the decode batch"
                                            + many(", summed over the replicas"), f"{steps:,}")),
        "prefill_tokens_per_mixed_step": Number(tokens / steps if steps else None, derived(
            "prefill tokens those steps ran / mixed steps", f"{tokens:,} / {steps:,}"
            + (f" = {tokens / steps:.6g}" if steps else ""))),
        "prefill_stall_seconds": Seconds(r.prefill_seconds, derived(
            "time the prefill chunks added to their steps over the same steps' decode alone"
            + many(", summed over the replicas"), f"{r.prefill_seconds:.6g} s")),
    }


def _sizes(f: _Figures) -> dict:
    from kvplan.specs.values import Bytes, Count, Seconds, Tokens, derived

    r, n, gen, T, pct, many = f.r, f.n, f.gen, f.T, f.pct, f.many
    return {
        "requests_finished": Count(n, derived("requests that finished (every request runs to the end)", f"{n:,}")),
        "generated_tokens": Tokens(gen, derived("sum of the output lengths", f"{gen:,} tokens")),
        "simulated_seconds": Seconds(T, derived("time of the last completion (the first arrival at 0 s or later)"
                                                + many(", the longest replica's"), f"{T:.6g} s")),
        "peak_kv_bytes_per_request_p50": pct("p50", r.peak_bytes, 50, Bytes, "request_bytes at each request's "
                                             "longest cache (prompt + output - 1 tokens, block-rounded, per GPU)"),
        "peak_kv_bytes_per_request_p99": pct("p99", r.peak_bytes, 99, Bytes, "the same"),
        "peak_kv_bytes_per_request_max": Bytes(int(r.peak_bytes.max()), derived(
            "largest request_bytes at a request's longest cache", f"{int(r.peak_bytes.max()):,} B")),
    }


def _preemption(f: _Figures, o: SimOptions) -> dict:
    from kvplan.specs.values import Bytes, Count, Fraction, Number, Tokens, derived

    r, n, gen, T, ratio, many, u = f.r, f.n, f.gen, f.T, f.ratio, f.many, f.r.setup
    preempted, so, si, off, recomputed, hits_n, hits_tok = (f.preempted, f.so, f.si, f.off, f.recomputed, f.hits_n,
                                                             f.hits_tok)
    return {
        "preemptions": Count(int(r.preemptions.sum()), derived("sum of preemptions", f"{int(r.preemptions.sum()):,}")),
        "preempted_share": ratio(Fraction, preempted, n, "requests preempted at least once / requests",
                                 "preempted / requests"),
        "swap_out_count": Count(so, derived("sum of swap-outs (preemptions by swap and proactive offloads)",
                                            f"{so:,} ({off:,} offloads)")),
        "offload_count": Count(off, derived("proactive offloads: requests moved to DRAM above the threshold",
                                            f"{off:,}" if o.offload_threshold is not None else "0 (no threshold)")),
        "swap_in_count": Count(si, derived("sum of swap-ins", f"{si:,}")),
        "swapped_bytes": Bytes(r.swapped_out_bytes, derived("bytes per GPU copied out to host DRAM"
                                                            + many(", summed over the replicas"),
                                                            f"{r.swapped_out_bytes:,} B")),
        "swap_out_per_request": ratio(Number, so, n, "swap-outs / requests", "swap-outs / requests"),
        "swap_in_per_request": ratio(Number, si, n, "swap-ins / requests", "swap-ins / requests"),
        "swap_out_per_second": ratio(Number, so, T, "swap-outs / simulated seconds", "swap-outs / s"),
        "swap_in_per_second": ratio(Number, si, T, "swap-ins / simulated seconds", "swap-ins / s"),
        "swap_out_per_minute": ratio(Number, 60 * so, T, "60 x swap-outs / simulated seconds", "60 x swap-outs / s"),
        "prefix_hit_tokens": Tokens(hits_tok, derived("prompt tokens the prefix cache served (whole blocks of the "
                                                      "shared prefix, every prompt after the first)",
                                                      f"{hits_n:,} hits x {u.prefix_hit_tokens_each:,} tokens = "
                                                      f"{hits_tok:,}")),
        "recomputed_tokens": Tokens(recomputed, derived("sum over recomputes of the cache re-prefilled "
                                                        "(prompt + generated - 1 tokens)", f"{recomputed:,} tokens")),
        "recompute_rate": ratio(Fraction, recomputed, gen, "recomputed tokens / generated tokens",
                                "recomputed / generated"),
    }


def _latency(f: _Figures) -> dict:
    from kvplan.specs.values import Number, Seconds, derived

    r, n, gen, T, pct, ratio, tpot, ttft, queue = f.r, f.n, f.gen, f.T, f.pct, f.ratio, f.tpot, f.ttft, f.queue
    return {
        "tpot_seconds_p50": pct("p50", tpot, 50, Seconds, "TPOT = (finish - first token) / (output - 1)"),
        "tpot_seconds_p99": pct("p99", tpot, 99, Seconds, "TPOT"),
        "tpot_seconds_mean": Seconds(float(tpot.mean()) if len(tpot) else None, derived(
            "mean of the per-request TPOT", f"{float(tpot.mean()):.6g} s" if len(tpot) else "no requests")),
        "ttft_seconds_p50": pct("p50", ttft, 50, Seconds, "TTFT = first token - arrival + frontend latency "
                                "(queueing + prefill + the API server's way in and out)" if f.frontend.number() else
                                "TTFT = first token - arrival (queueing + prefill)"),
        "ttft_seconds_p99": pct("p99", ttft, 99, Seconds, "TTFT"),
        "queue_seconds_p50": pct("p50", queue, 50, Seconds, "queueing delay = first admission - arrival"),
        "queue_seconds_p99": pct("p99", queue, 99, Seconds, "queueing delay"),
        "waiting_at_last_arrival": waiting_at_last_arrival(r),
        "throughput_tokens_per_second": ratio(Number, gen, T, "generated tokens / simulated seconds",
                                              "tokens / s"),
        "throughput_requests_per_second": ratio(Number, n, T, "requests / simulated seconds", "requests / s"),
        **({"frontend_seconds": f.frontend} if f.frontend.number() else {}),   # the engine's API server, if any
    }


def _peaks(f: _Figures) -> dict:
    from kvplan.specs.values import Bytes, Count, Seconds, derived

    r, many, u = f.r, f.many, f.r.setup
    return {
        "peak_running_requests": Count(r.peak_running, derived("most requests decoding in one step"
                                                               + many(" (the busiest replica's)"),
                                                               f"{r.peak_running:,}")),
        "peak_kv_blocks_used": Count(r.peak_blocks_used, derived("most blocks held at once (running, landing)"
                                                                 + many(" in one replica's pool (the busiest)"),
                                                                 f"{r.peak_blocks_used:,} of {u.total_blocks:,}")),
        "peak_dram_bytes_per_gpu": Bytes(r.peak_dram_bytes, derived("most bytes per GPU parked in host DRAM at once"
                                                                    + many(" (the busiest replica's)"),
                                                              f"{r.peak_dram_bytes:,} B")),
        "prefill_stall_seconds": Seconds(r.prefill_seconds, derived(
            "time the batch stood still for prefills and re-prefills" + many(", summed over the replicas"),
            f"{r.prefill_seconds:.6g} s")),
        "swap_stall_seconds": Seconds(r.swap_stall_seconds, derived(
            "time the batch waited for swap-out copies" + many(", summed over the replicas"),
            f"{r.swap_stall_seconds:.6g} s")),
        "decode_steps": Count(r.decode_steps, derived("decode steps simulated", f"{r.decode_steps:,}")),
        "events": Count(r.events, derived("scheduler events (runs of steps between them are summed in closed form)",
                                          f"{r.events:,}")),
    }
