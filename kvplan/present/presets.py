"""`kvplan presets list`: the catalogue as a Result; GPUs carry their HBM, HBM bandwidth and price figures."""

from __future__ import annotations

from kvplan.inputs.catalogue import CatalogueEntry, Figure
from kvplan.render.result import Result, Table
from kvplan.specs.values import Bandwidth, Bytes, Derivation, UsdPerHour

COLUMNS = ("id", "type", "name", "HBM", "HBM bandwidth", "price per GPU-hour", "origin")
GPU_COLUMNS = (3, 4, 5)  # shown only when the list holds a GPU
_TITLES = {"model": "Models", "hardware": "GPUs", "workload": "Workloads"}
_SHORT = {"HBM bandwidth": "bandwidth", "price per GPU-hour": "$/GPU-hour"}
_NOUNS = {"model": ("model", "models"), "hardware": ("GPU", "GPUs"), "workload": ("workload", "workloads")}


def _typed(cls, figure: Figure | None, scale: float, formula: str, preset_id: str, extra: str = ""):
    """The preset file's figure as a typed value in base units, its source carried; None (printed "-") without."""
    if figure is None:
        return cls(None)
    why = Derivation(f"{formula} (hardware preset {preset_id}{extra})", sources=(figure.source,), kind="input")
    return cls(round(figure.value * scale, 3), why)   # 2.039 TB/s is 2,039,000,000,000 B/s, not ...000.0002


def _row(e: CatalogueEntry) -> tuple:
    hbm = _typed(Bytes, e.hbm_gib, 2**30, "hbm_capacity_gib x 2^30 B", e.id)
    bandwidth = _typed(Bandwidth, e.hbm_tb_s, 1e12, "hbm_bandwidth_tb_s x 10^12 B/s", e.id)
    price = _typed(UsdPerHour, e.price_usd_per_gpu_hour, 1, "price.usd_per_gpu_hour", e.id,
                   f": {e.price_offer}, as of {e.price_as_of}")
    return e.id, e.type, e.name, hbm, bandwidth, price, e.origin


def _item(e: CatalogueEntry, row: tuple) -> dict:
    item: dict[str, object] = {"id": e.id, "type": e.type, "name": e.name, "origin": e.origin}
    if e.type == "hardware":
        item.update(hbm_bytes=row[3], hbm_bandwidth_bytes_per_second=row[4], price_usd_per_gpu_hour=row[5],
                    price_offer=e.price_offer or None, price_as_of=e.price_as_of or None)
    return item


def _repeats_id(row: tuple) -> bool:
    """Whether the preset's name is its id in other capitals (``DeepSeek-R1-Distill-Llama-70B``): the terminal
    leaves such a name out, so that the id's longest word is not set twice side by side in 80 columns."""
    return row[2].lower() == row[0].lower()


def _terminal_table(rows: list[tuple]) -> Table:
    """The terminal's one table of ``_row``'s rows: type (left out when one type is listed: the headline says
    it), id, name (unless it repeats the id) and, where GPUs are listed, HBM, bandwidth and price: optional
    columns a narrow terminal leaves out (price first) rather than split the table in parts. No origin column:
    the title says "built-in" when every preset is, the others' files are listed in their own table
    (``_files_table``)."""
    types = [t for t in ("model", "hardware", "workload") if any(r[1] == t for r in rows)]
    cols = [i for i in range(len(COLUMNS) - 1) if (i != 1 or len(types) > 1) and ("hardware" in types
                                                                                   or i not in GPU_COLUMNS)]
    cols.sort(key=lambda i: i != 1)   # the type first, then the id
    title = (_TITLES[types[0]] if len(types) == 1 else "Presets") + (
        " (built-in)" if all(r[-1] == "built-in" for r in rows) else "")
    cells = tuple(tuple("" if i in GPU_COLUMNS and r[1] != "hardware" or i == 2 and _repeats_id(r) else r[i]
                        for i in cols) for r in rows)
    return Table(title, tuple(_SHORT.get(COLUMNS[i], COLUMNS[i]) for i in cols), cells, formats=("table",),
                 optional=tuple(n for n, i in enumerate(cols) if i in GPU_COLUMNS))


def _files_table(rows: tuple[tuple, ...]) -> tuple[Table, ...]:
    """The presets read from the user's folders, with their files (the terminal's tables leave the origin out)."""
    own = tuple((r[0], r[-1]) for r in rows if r[-1] != "built-in")
    return (Table("Read from your files", ("id", "file"), own, formats=("table",)),
            ) if own else ()


def present_list(entries: list[CatalogueEntry], total: int, kind: str | None, word: str | None) -> Result:
    rows = tuple(_row(e) for e in entries)
    counts = ", ".join(f"{n} {_NOUNS[t][n != 1]}" for t in ("model", "hardware", "workload")
                       if (n := sum(e.type == t for e in entries)))
    gpus = any(e.type == "hardware" for e in entries)
    keep = [i for i in range(len(COLUMNS)) if gpus or i not in GPU_COLUMNS]
    table = Table("Presets", tuple(COLUMNS[i] for i in keep), tuple(tuple(r[i] for i in keep) for r in rows),
                  primary=True, formats=("csv", "markdown"))
    # the terminal: one table (not ids in one part and names in another), its GPU columns left out where they do
    # not fit
    terminal = _terminal_table(list(rows)) if rows else None
    if kind is None and word is None:
        headline = f"{len(entries)} presets: {counts}"
    else:
        asked = " and ".join(part for part in (f"type {kind}" if kind else "", f"{word.strip()!r} in id or name"
                                               if word is not None else "") if part)
        headline = f"{len(entries)} of {total} presets match {asked}: {counts}"
    data = {"filter": {"type": kind, "search": word.strip() if word is not None else None},
            "presets": [_item(e, row) for e, row in zip(entries, rows, strict=True)]}
    notes: tuple[str, ...] = ()
    if gpus:
        notes = ("HBM is the total the device reports (GiB); bandwidth the datasheet peak; the price a public "
                 "on-demand offer per GPU-hour where one was found (see `kvplan presets show ID` for the offer, "
                 "date and source).",)
    tables = (table, *((terminal,) if terminal else ()), *_files_table(rows))
    return Result("presets list", headline, data, tables, notes)
