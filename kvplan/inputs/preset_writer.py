"""Writing a spec back out as a preset TOML file (``kvplan tpot --save-calibration``)."""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass

from kvplan.specs.model import Sourced


def _value(v) -> str:
    if isinstance(v, Sourced):
        parts = [f"value = {v.value!r}", f"source = {json.dumps(v.source)}"]
        if v.kind:
            parts.append(f"kind = {json.dumps(v.kind)}")
        return "{ " + ", ".join(parts) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _table(obj, name: str, out: list[str]) -> None:
    scalars, tables = [], []
    items = obj.items() if isinstance(obj, dict) else ((f.name, getattr(obj, f.name)) for f in fields(obj))
    for key, v in items:
        if v is None or (isinstance(v, (tuple, dict)) and not v):
            continue
        if (is_dataclass(v) and not isinstance(v, Sourced)) or isinstance(v, dict):
            tables.append((key, v))
        else:
            scalars.append(f"{key} = {_value(v)}")
    if name:
        out.append(f"\n[{name}]")
    out.extend(scalars)
    for key, v in tables:
        _table(v, f"{name}.{key}" if name else key, out)


def hardware_toml(hw, efficiency: dict[str, float], source: str) -> str:
    """The hardware preset with ``efficiency`` values replacing its [efficiency] table, id suffixed -calibrated."""
    from dataclasses import replace

    from kvplan.specs.hardware import Efficiency

    eff = replace(hw.efficiency, **{k: Sourced(value=v, source=source, kind="M") for k, v in efficiency.items()})
    spec = replace(hw, id=f"{hw.id}-calibrated", name=f"{hw.name} (calibrated)", efficiency=Efficiency(
        **{f.name: getattr(eff, f.name) for f in fields(eff)}))
    out = ['type = "hardware"']
    _table(spec, "", out)
    return "\n".join(out) + "\n"
