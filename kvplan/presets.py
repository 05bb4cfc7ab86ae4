"""Presets are data: TOML files, one per model or GPU, each figure with its source.

Built-in presets ship inside the wheel (``kvplan/presets``; in a source checkout, the top-level
``presets/`` folder). A user's own files override them by id: give a folder with ``--presets-dir`` or
the ``KVPLAN_PRESETS_DIR`` environment variable (several folders separated by ``:``). Each file says
what it is with ``type = "model"`` or ``type = "hardware"``.

Layers in a model preset's ``[[groups]]`` are written as ``layers = "all"``, a list of indices,
``{ start = 0, stop = 3 }`` (stop excluded), or ``{ every = 2, offset = 1 }``.

The spec classes are plain dataclasses. A user's preset (or any file given by path) is untrusted: it is
validated with pydantic (``TypeAdapter`` over those dataclasses, strict whole numbers, unknown keys refused),
imported only here. The built-in presets are trusted and built directly (``kvplan.layers.construct``), which
is much cheaper at start-up; the test suite checks that every built-in preset passes the pydantic path too and
gives an equal object.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_VAR = "KVPLAN_PRESETS_DIR"


def builtin_dir() -> Path:
    packaged = Path(__file__).parent / "presets"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "presets"


@dataclass(frozen=True)
class PresetFile:
    id: str
    type: str
    path: Path
    builtin: bool
    data: dict[str, Any]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise KvplanError(f"preset file {path} is not valid TOML: {err}", "fix the TOML syntax") from None
    except UnicodeDecodeError:
        raise KvplanError(f"preset file {path} is not UTF-8 text", "save it as UTF-8 TOML") from None
    except OSError as err:
        raise KvplanError(f"cannot read preset file {path}: {err.strerror}", "check the path") from None


def user_dirs(extra: list[Path] | None = None) -> list[Path]:
    dirs = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    dirs += list(extra or [])
    for d in dirs:
        if not d.is_dir():
            raise KvplanError(f"presets folder {d} does not exist",
                              f"create it, or fix --presets-dir / {ENV_VAR}")
    return dirs


def discover(extra_dirs: list[Path] | None = None) -> dict[str, dict[str, PresetFile]]:
    """All presets by type then id; user folders (later ones win) override the built-in files."""
    found: dict[str, dict[str, PresetFile]] = {"model": {}, "hardware": {}}
    roots = [(builtin_dir(), True)] + [(d, False) for d in user_dirs(extra_dirs)]
    for root, builtin in roots:
        # The folder itself and its models/ and hardware/ subfolders, not the whole tree below it.
        paths = [p for sub in ("", "models", "hardware") for p in sorted((root / sub).glob("*.toml"))]
        for path in paths:
            data = _read_toml(path)
            kind = data.get("type")
            if kind not in found:
                raise KvplanError(f"preset file {path} has type={kind!r}",
                                  'start it with type = "model" or type = "hardware"')
            preset_id = data.get("id") or path.stem
            found[kind][preset_id] = PresetFile(preset_id, kind, path, builtin, data)
    return found


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _expand_layers(spec: Any, num_layers: int, where: str) -> list[int]:
    if spec == "all":
        return list(range(num_layers))
    if isinstance(spec, list) and all(_is_index(i) for i in spec):
        return spec
    if isinstance(spec, dict) and all(_is_index(v) for v in spec.values()):
        if set(spec) <= {"start", "stop"}:
            return list(range(spec.get("start", 0), spec.get("stop", num_layers)))
        if set(spec) <= {"every", "offset"} and spec.get("every", 0) > 0:
            return list(range(spec.get("offset", 0), num_layers, spec["every"]))
    raise KvplanError(f"{where}: layers = {spec!r} is not understood",
                      'write "all", a list of indices, {start=, stop=} or {every=, offset=}')


# --- building specs: trusted (built-in) and validated (anything else) -------------------------------------


_ADAPTERS: dict[type, Any] = {}


def _error_text(err) -> str:
    """Every problem pydantic found, on one line, each as ``field.path: message``."""
    parts = []
    for e in err.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"])
        msg = " ".join(str(e["msg"]).split())
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def validate(cls: type, data: Any, where: str, hint: str = "fix that field in the preset") -> Any:
    """``data`` validated into a ``cls`` by pydantic: strict whole numbers, unknown keys refused, every field
    constraint and invariant checked. Problems are one KvplanError line naming each field."""
    from pydantic import TypeAdapter, ValidationError

    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    try:
        return adapter.validate_python(data)
    except ValidationError as err:
        raise KvplanError(f"{where}: {_error_text(err)}", hint) from None


def _make(cls: type, body: dict[str, Any], where: str, trusted: bool) -> Any:
    if not trusted:
        return validate(cls, body, where)
    from kvplan.layers import construct

    try:
        return construct(cls, body)
    except (TypeError, ValueError, KeyError) as err:
        raise KvplanError(f"{where}: built-in preset is malformed: {err}", "report this kvplan bug") from None


def build_model(data: dict[str, Any], where: str, trusted: bool = False):
    """A ModelSpec from a model preset's TOML table; ``trusted`` (built-in presets) skips pydantic."""
    from kvplan.model import ModelSpec

    if data.get("type", "model") != "model":
        raise KvplanError(f"{where} is a {data.get('type')} preset, not a model", "give a model preset or config")
    body = {k: v for k, v in data.items() if k != "type"}
    num_layers = body.get("num_layers")
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or not 0 < num_layers <= 10_000:
        raise KvplanError(f"{where}: num_layers is missing or not a whole number", "set num_layers")
    groups = []
    for g in body.get("groups", []):
        g = dict(g)
        g["layers"] = _expand_layers(g.get("layers", "all"), num_layers, where)
        groups.append(g)
    body["groups"] = groups
    return _make(ModelSpec, body, where, trusted)


def build_hardware(data: dict[str, Any], where: str, trusted: bool = False):
    """A HardwareSpec from a hardware preset's TOML table; ``trusted`` (built-in presets) skips pydantic."""
    from kvplan.hardware import HardwareSpec

    if data.get("type", "hardware") != "hardware":
        raise KvplanError(f"{where} is a {data.get('type')} preset, not hardware", "give a hardware preset")
    body = {k: v for k, v in data.items() if k != "type"}
    return _make(HardwareSpec, body, where, trusted)


def _unknown(kind: str, name: str, known: list[str]) -> KvplanError:
    import difflib

    close = difflib.get_close_matches(name, known, n=3, cutoff=0.4)
    hint = ("did you mean " + " or ".join(close) + "?") if close else "run `kvplan presets list`"
    return KvplanError(f"unknown {kind} preset {name!r}", hint)


def _path(ref: str, what: str) -> Path:
    if not ref.strip():
        raise KvplanError(f"the {what} is an empty string", f"give a {what} preset id or a file")
    path = Path(ref).expanduser()
    try:
        path.exists()
    except OSError as err:  # e.g. a name longer than the file system allows
        raise KvplanError(f"{what} {ref[:60]!r}... is not a usable path: {err.strerror}",
                          f"give a {what} preset id or a file") from None
    return path


def load_model(ref: str, extra_dirs: list[Path] | None = None):
    """A model from a preset id, a preset TOML path, an HF ``config.json`` path, or a model directory."""
    path = _path(ref, "model")
    if path.suffix == ".toml" and path.is_file():
        data = _read_toml(path)
        return build_model(data, str(path))
    if path.suffix == ".json" or path.is_dir():
        from kvplan.hf_import import load_hf_model

        return load_hf_model(path)
    preset = _find("model", ref, extra_dirs)
    if preset is None:
        if os.sep in ref or ref.endswith((".json", ".toml")):
            raise KvplanError(f"model file {ref} does not exist", "check the path")
        raise _unknown("model", ref, sorted(discover(extra_dirs)["model"]))
    return build_model(preset.data, str(preset.path), trusted=preset.builtin)


def _find(kind: str, preset_id: str, extra_dirs: list[Path] | None) -> PresetFile | None:
    """One preset by id. Without user folders, the built-in file named after the id is read alone (start-up
    matters); otherwise every folder is scanned so that user presets override built-in ones."""
    folder = {"model": "models", "hardware": "hardware"}[kind]
    if not extra_dirs and not os.environ.get(ENV_VAR):
        path = builtin_dir() / folder / f"{preset_id}.toml"
        if path.is_file():
            data = _read_toml(path)
            if data.get("type") == kind and data.get("id", preset_id) == preset_id:
                return PresetFile(preset_id, kind, path, True, data)
    return discover(extra_dirs)[kind].get(preset_id)


def load_hardware(ref: str, extra_dirs: list[Path] | None = None):
    path = _path(ref, "hardware")
    if path.suffix == ".toml" and path.is_file():
        return build_hardware(_read_toml(path), str(path))
    preset = _find("hardware", ref, extra_dirs)
    if preset is None:
        raise _unknown("hardware", ref, sorted(discover(extra_dirs)["hardware"]))
    return build_hardware(preset.data, str(preset.path), trusted=preset.builtin)
