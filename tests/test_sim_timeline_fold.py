"""The simulator's timeline stays bounded (kvplan.calc.sim.metrics.fold_marks): past MARKS_KEPT marks it is folded
into two marks per cell of time, which keep every peak and the state in force after each cell."""

from array import array

import numpy as np

from kvplan.calc.sim import metrics


def _marks(rows):
    return array("d", [float(v) for row in rows for v in row])


def test_fold_keeps_each_cells_peak_and_last_state(monkeypatch):
    monkeypatch.setattr(metrics, "MARK_CELLS", 2)
    # times 0 .. 4 s over two cells of 2 s: [0, 2) holds the marks at 0, 1, 1.5; [2, 4] those at 2, 3, 4
    rows = [(0, 5, 1, 0, 0), (1, 9, 2, 1, 7), (1.5, 3, 4, 0, 2), (2, 1, 1, 0, 0), (3, 8, 0, 3, 1), (4, 2, 2, 0, 0)]
    m = _marks(rows)
    metrics.fold_marks(m)
    got = np.frombuffer(m, dtype=float).reshape(-1, 5).tolist()
    # per cell: its first time with each series' most (9, 4, 1, 7 and 8, 2, 3, 1), then its last mark as it was
    assert got == [[0, 9, 4, 1, 7], [1.5, 3, 4, 0, 2], [2, 8, 2, 3, 1], [4, 2, 2, 0, 0]]
    metrics.fold_marks(m)                         # folding again changes nothing: two marks a cell already
    assert np.frombuffer(m, dtype=float).reshape(-1, 5).tolist() == got


def test_fold_bounds_the_marks_and_keeps_the_peak(monkeypatch):
    monkeypatch.setattr(metrics, "MARK_CELLS", 16)
    t = np.linspace(0.0, 100.0, 10_001)
    used = (t * 37) % 101                        # a saw-tooth whose most, 100, occurs inside the run
    rows = np.column_stack([t, used, used, used, used])
    m = array("d", rows.ravel().tobytes())
    metrics.fold_marks(m)
    folded = np.frombuffer(m, dtype=float).reshape(-1, 5)
    assert len(folded) <= 2 * 16
    assert folded[:, 1].max() == used.max()
    assert np.all(np.diff(folded[:, 0]) >= 0)     # still in time order


def test_a_long_run_folds_its_timeline_and_keeps_its_peaks(monkeypatch):
    from kvplan.calc import simulate as sim
    from kvplan.inputs import workload as wl
    from kvplan.inputs.presets import load_hardware, load_model
    from kvplan.scenario import Scenario

    s = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"), kv_dtype_request="fp8")
    w = wl.build(requests=2_000, seed=0, prompt=wl.parse_dist("fixed:1000", "p"),
                 output=wl.parse_dist("lognormal:mean=20000,p99=100000", "o"), max_len=163_840, rate=0.5)
    whole = sim.simulate(s, w)
    monkeypatch.setattr(sim, "MARKS_KEPT", 64)    # fold at every 4,096th event once past 64 marks
    monkeypatch.setattr(metrics, "MARK_CELLS", 32)
    folded = sim.simulate(s, w)
    assert whole.events > 3 * 4096 and len(whole.timeline[0]) > whole.events   # a mark as each run starts, ends
    # each fold leaves at most 64 marks; at most 4,096 events (two marks each, three with chunks) come after it
    assert len(folded.timeline[0]) <= 64 + 3 * 4096 < len(whole.timeline[0]) / 2
    # the peaks are kept: the pool's most blocks held (marked at each run's end) and the most requests running
    for k in range(1, 5):
        assert folded.timeline[k].max() == whole.timeline[k].max()
    assert folded.timeline[1].max() == whole.peak_blocks_used
    assert (folded.finish == whole.finish).all() and folded.simulated_seconds == whole.simulated_seconds
