"""kvplan's predicted vLLM KV pool against published memory-profile logs. Run: `python benchmarks/pool_fidelity.py`
(prints the Markdown table docs/pool-prediction.md shows; the last two lines are the held-out summary).

Each deployment of tests/data/memory_profiles/index.toml (its quoted log lines and source are beside it) is planned
with only what the user told vLLM: the release (``--engine vllm==X.Y.Z``), model, GPU preset, TP/PP,
gpu_memory_utilization, max_model_len and weight dtype; never the logged pool. The error is
(predicted - logged) / logged: positive is optimistic (kvplan promises more KV than vLLM found). The index's
``split`` (fit / held-out, alternating in the order the logs were found, fixed before any error was looked at)
says which logs the constants of kvplan.engines.vllm's memory rules were read from; the summary is over the
held-out half. The ``[[unseen_log]]`` entries (split ``never-seen``) were found after the rules were set and written
down before kvplan was run on them; their table and summary line follow the held-out one.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # this tree's kvplan, not an installed copy

DATA = ROOT / "tests" / "data" / "memory_profiles"
GIB = 2**30


def load_index(data: Path = DATA) -> list[dict]:
    try:
        import tomllib
    except ModuleNotFoundError:   # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((data / "index.toml").read_text())["log"]


@dataclass(frozen=True)
class Row:
    id: str
    split: str
    kind: str
    tp: int
    pp: int
    release: str
    logged: float          # GiB
    predicted: float       # GiB
    weights: float
    activation: float
    runtime: float

    @property
    def error(self) -> float:
        return (self.predicted - self.logged) / self.logged


def scenario(entry: dict, data: Path = DATA):
    """The deployment as the user told vLLM, for kvplan (no pool, no reserve given)."""
    from kvplan.scenario import Scenario

    model = entry["model"]
    if "/" in model:
        model = str(data / model)
    return Scenario(model=model, hardware=entry["gpu"], tp=entry["tp"], pp=entry["pp"], dp=1, nodes=1,
                    engine=f"vllm=={entry['release']}", weight_dtype=entry.get("weight_dtype"),
                    gpu_memory_utilization=entry.get("gpu_memory_utilization"),
                    max_model_len=entry.get("max_model_len"),
                    max_num_batched_tokens=entry.get("max_num_batched_tokens"),
                    max_num_seqs=entry.get("max_num_seqs"),
                    prompt=1000, decode=1000, presets_dir=data / "presets")


def predict(entry: dict, data: Path = DATA) -> Row:
    s = scenario(entry, data)
    b = s.engine_adapter.budget(s, s.sized_model, s.parallelism)
    return Row(entry["id"], entry["split"], entry["kind"], entry["tp"], entry["pp"], entry["release"],
               entry["logged"]["pool_gib"], b.kv_pool_bytes / GIB, b.weights.number() / GIB,
               b.activation.number() / GIB, b.runtime.number() / GIB)


def rows(data: Path = DATA) -> list[Row]:
    return [predict(e, data) for e in load_index(data)]


def summary(rs: list[Row], split: str | None = None) -> tuple[float, float, int]:
    """(median |error|, worst optimistic error (0 when none is optimistic), count) over ``split`` (all when None)."""
    chosen = [r for r in rs if split is None or r.split == split]
    errors = [r.error for r in chosen]
    return statistics.median(abs(e) for e in errors), max([0.0, *errors]), len(chosen)


def table(rs: list[Row]) -> str:
    lines = ["| log | split | kind | TP x PP | vLLM | logged pool | kvplan pool | error |",
             "|---|---|---|---|---|---:|---:|---:|"]
    for r in rs:
        lines.append(f"| {r.id} | {r.split} | {r.kind} | {r.tp} x {r.pp} | v{r.release} | {r.logged:.2f} GiB | "
                     f"{r.predicted:.2f} GiB | {r.error:+.1%} |")
    return "\n".join(lines)


def load_unseen_index(data: Path = DATA) -> list[dict]:
    """The [[unseen_log]] entries: vLLM logs found after the memory rules were set, written down before kvplan was
    run on them (neither 'fit' nor 'held-out'; no rule is read from them)."""
    try:
        import tomllib
    except ModuleNotFoundError:   # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((data / "index.toml").read_text()).get("unseen_log", [])


def unseen_rows(data: Path = DATA) -> list[Row]:
    return [predict(e, data) for e in load_unseen_index(data)]


def load_sglang_index(data: Path = DATA) -> list[dict]:
    """The [[sglang_log]] entries of the same index (SGLang start-up logs)."""
    try:
        import tomllib
    except ModuleNotFoundError:   # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((data / "index.toml").read_text())["sglang_log"]


def sglang_scenario(entry: dict, data: Path = DATA):
    """The deployment as the user told SGLang (no pool, no reserve given; the fraction only when the log's command
    line gives it). A model with a '/' is a config folder under ``data``; a GPU the built-in presets lack is a
    preset file in ``data``/presets."""
    from kvplan.scenario import Scenario

    model = entry["model"]
    if "/" in model:
        model = str(data / model)
    return Scenario(model=model, hardware=entry["gpu"], tp=entry["tp"], pp=1, dp=entry.get("dp", 1),
                    ep=entry.get("ep"), nodes=1,
                    engine=f"sglang=={entry['release']}", weight_dtype=entry.get("weight_dtype"),
                    mem_fraction_static=entry.get("mem_fraction_static"), prompt=1000, decode=1000,
                    presets_dir=data / "presets")


def sglang_budget(entry: dict):
    s = sglang_scenario(entry)
    return s.engine_adapter.budget(s, s.sized_model, s.parallelism)


def sglang_errors(entry: dict) -> dict[str, float]:
    """(predicted - logged) / logged for each figure the log prints (pre-load memory, weights, fraction, pool)."""
    b = sglang_budget(entry)
    mine = {"pre_load_gib": b.visible.number() / GIB if b.visible else 0.0, "weights_gib": b.weights.number() / GIB,
            "fraction": b.fraction.value, "pool_gib": b.kv_pool_bytes / GIB}
    return {k: (mine[k] - v) / v for k, v in entry["logged"].items()}


def sglang_table(entries: list[dict]) -> str:
    lines = ["| SGLang log | split | kind | TP | fraction (kvplan / logged) | logged pool | kvplan pool | error |",
             "|---|---|---|---|---|---:|---:|---:|"]
    for e in entries:
        b = sglang_budget(e)
        logged = e["logged"]
        frac = f"{b.fraction.value:g} / {logged.get('fraction', e.get('mem_fraction_static', '?'))}"
        pool = logged.get("pool_gib")
        err = "" if pool is None else f"{(b.kv_pool_bytes / GIB - pool) / pool:+.1%}"
        logged_pool = "-" if pool is None else f"{pool:.2f} GiB"
        lines.append(f"| {e['id']} | {e['split']} | {e['kind']} | {e['tp']} | {frac} | {logged_pool} | "
                     f"{b.kv_pool_bytes / GIB:.2f} GiB | {err} |")
    return "\n".join(lines)


def main() -> None:
    rs = rows()
    print(table(rs))
    print()
    for split in ("fit", "held-out", None):
        med, worst, n = summary(rs, split)
        print(f"{split or 'all'}: {n} logs, median |error| {med:.1%}, worst optimistic {worst:+.1%}")
    us = unseen_rows()
    print()
    print(table(us))
    print()
    med, worst, n = summary(us)
    print(f"never-seen: {n} logs, median |error| {med:.1%}, worst optimistic {worst:+.1%}, worst |error| "
          f"{max(abs(r.error) for r in us):.1%}")
    sg = load_sglang_index()
    print()
    print(sglang_table(sg))
    print()
    for split in ("fit", "held-out"):
        errs = [sglang_errors(e).get("pool_gib") for e in sg if e["split"] == split]
        pools = [x for x in errs if x is not None]
        print(f"sglang {split}: {len(pools)} pools, worst |error| {max(abs(x) for x in pools):.1%}, worst "
              f"optimistic {max([0.0, *pools]):+.1%}")
    med, worst, _ = summary(rs, "held-out")
    print(f"held_out_median_error: {med * 100:.1f}%")
    print(f"held_out_worst_optimistic: {worst * 100:.1f}%")


if __name__ == "__main__":
    main()
