"""Moved to ``kvplan.inputs.workload`` (the request stream is an input: ``inputs/plan_file.py`` parses its
distributions and presets, and inputs may not import calc). These names stay importable from here until the
modules that still do (``calc/simulate.py``, ``commands/simulate.py``, tests and benchmarks) import the new home."""

from kvplan.inputs.workload import (  # noqa: F401 - re-exported for the importers above
    DISTS,
    MAX_REQUESTS,
    MAX_TOKENS,
    MAX_TRACE_ROWS,
    Z99,
    LengthDist,
    Trace,
    Workload,
    WorkloadPreset,
    build,
    load_workload,
    parse_dist,
    read_trace,
    workload_ids,
    workloads_dir,
)
