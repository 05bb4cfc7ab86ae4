"""The catalogue ``kvplan presets list`` shows: every preset by type then id, filtered by a word in its id or name,
GPUs with the HBM, bandwidth and price figures of their files (read without building the specs). A module of its
own, so that a run that plans reads none of it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError, shorten
from kvplan.inputs.files import read_toml
from kvplan.inputs.presets import PresetFile, _is_number, builtin_dir, discover

PRESET_TYPES = ("model", "hardware", "workload")


@dataclass(frozen=True)
class Figure:
    """One sourced figure as a preset file gives it (``{ value, source, kind }``), read without building the spec."""

    value: float
    source: str


@dataclass(frozen=True)
class CatalogueEntry:
    """One preset as `presets list` shows it; for GPUs, the HBM, bandwidth and price figures of the file."""

    id: str
    type: str
    name: str
    origin: str
    hbm_gib: Figure | None = None
    hbm_tb_s: Figure | None = None
    price_usd_per_gpu_hour: Figure | None = None
    price_offer: str = ""
    price_as_of: str = ""


def _file_figure(table: Any, key: str) -> Figure | None:
    item = table.get(key) if isinstance(table, dict) else None
    if isinstance(item, dict) and _is_number(item.get("value")) and isinstance(item.get("source"), str):
        return Figure(float(item["value"]), item["source"])
    return None


def _entry(preset: PresetFile) -> CatalogueEntry:
    data = preset.data
    name = data.get("name")
    origin = "built-in" if preset.builtin else str(preset.path)
    if preset.type != "hardware":
        return CatalogueEntry(preset.id, preset.type, name if isinstance(name, str) else "", origin)
    price = data.get("price")
    if not isinstance(price, dict):
        price = {}
    return CatalogueEntry(preset.id, preset.type, name if isinstance(name, str) else "", origin,
                          _file_figure(data, "hbm_capacity_gib"), _file_figure(data, "hbm_bandwidth_tb_s"),
                          _file_figure(price, "usd_per_gpu_hour"), str(price.get("offer", "")),
                          str(price.get("as_of", "")))


def _workload_presets() -> list[PresetFile]:
    """The built-in workload presets (``presets/workloads``; ``--workload`` takes their ids or a file)."""
    folder = builtin_dir() / "workloads"
    found = []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
        data = read_toml(path, "workload file")
        found.append(PresetFile(str(data.get("id", path.stem)), "workload", path, True, data))
    return found


def catalogue(extra_dirs: list[Path] | None = None, kind: str | None = None,
              word: str | None = None) -> tuple[list[CatalogueEntry], int]:
    """The presets `kvplan presets list` shows, by type then id: only ``kind`` (model, hardware or workload) if
    given, and only those whose id or name contains ``word`` (any case) if given; with the number of presets
    before filtering. A filter that matches nothing is an error naming the closest ids."""
    if kind is not None and kind.strip().lower() not in PRESET_TYPES:
        raise KvplanError(f"unknown preset type {shorten(kind)}", "give --type " + ", ".join(PRESET_TYPES[:-1])
                          + f" or {PRESET_TYPES[-1]}")
    kind = kind.strip().lower() if kind is not None else None
    if word is not None and not word.strip():
        raise KvplanError("the search word is empty", "give part of a preset's id or name, or leave it out")
    found = discover(extra_dirs)
    every = [_entry(p) for t in ("model", "hardware") for _, p in sorted(found[t].items())]
    every += [_entry(p) for p in _workload_presets()]
    chosen = [e for e in every if kind is None or e.type == kind]
    if word is not None:
        folded = word.strip().casefold()
        matched = [e for e in chosen if folded in e.id.casefold() or folded in e.name.casefold()]
        if not matched:
            import difflib

            what = f"{kind} preset" if kind else "preset"
            ids = {e.id.casefold(): e.id for e in chosen}
            close = difflib.get_close_matches(folded, list(ids), n=3, cutoff=0.4)
            hint = ("did you mean " + " or ".join(ids[c] for c in close) + "?") if close else \
                f"run `kvplan presets list{' --type ' + kind if kind else ''}` to see them all"
            raise KvplanError(f"no {what} has {shorten(word.strip())} in its id or name", hint)
        chosen = matched
    return chosen, len(every)
