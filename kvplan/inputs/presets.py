"""Presets are data: TOML files, one per model or GPU, each figure with its source.

Built-in presets ship inside the wheel (``kvplan/presets``; in a source checkout, the top-level
``presets/`` folder). A user's own files override them by id: give a folder with ``--presets-dir`` or
the ``KVPLAN_PRESETS_DIR`` environment variable (several folders separated by ``:``). Each file says
what it is with ``type = "model"`` or ``type = "hardware"``.

Layers in a model preset's ``[[groups]]`` are written as ``layers = "all"``, a list of indices,
``{ start = 0, stop = 3 }`` (stop excluded), or ``{ every = 2, offset = 1 }``.

The spec classes are plain dataclasses. A user's preset (or any file given by path) is untrusted: it is
validated with pydantic (``kvplan.inputs.validation``: ``TypeAdapter`` over those dataclasses, strict whole numbers,
unknown keys refused). Files are read through ``kvplan.inputs.files`` (regular files only, bounded size and
nesting), whose readers are re-exported here for the modules that import them from presets. The built-in presets
are trusted and built directly (``kvplan.specs.layers.construct``), which is much cheaper at start-up; the test
suite checks that every built-in preset passes the pydantic path too and gives an equal object.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError, sanitize, shorten
from kvplan.inputs.files import (  # noqa: F401 - re-exported: plan files, start-up logs and workloads read through them
    MAX_DEPTH,
    MAX_FILE_BYTES,
    open_regular,
    parse_toml,
    probe,
    read_json,
    read_text,
    read_toml,
    too_deep,
)
from kvplan.inputs.validation import FIELD_HINT, joined, problems, validate

ENV_VAR = "KVPLAN_PRESETS_DIR"
_OBJECT_HINT = "give a preset id, a preset .toml, a Hugging Face config.json or a model folder"


def builtin_dir() -> Path:
    packaged = Path(__file__).parent.parent / "presets"   # the wheel ships them as kvplan/presets
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent.parent / "presets"


@dataclass(frozen=True)
class PresetFile:
    """A preset file found on disk: its id, type (model or hardware), path, whether built in, and its TOML data."""

    id: str
    type: str
    path: Path
    builtin: bool
    data: dict[str, Any]


# --- finding presets -----------------------------------------------------------------------------------------

_warned: set[str] = set()
_warned_for: list[str] | None = None


def warn(message: str, hint: str | None = None) -> None:
    """One warning line on stderr, each distinct warning once per run. A run is one ``sys.argv`` (a process, or
    an in-process call that sets a new argv); the list is held, so its identity cannot be reused."""
    global _warned_for
    if sys.argv is not _warned_for:
        _warned.clear()
        _warned_for = sys.argv
    line = f"warning: {sanitize(message)}" + (f" (fix: {sanitize(hint)})" if hint else "")
    if line not in _warned:
        _warned.add(line)
        print(line, file=sys.stderr)


class Presets(dict):
    """Presets of one type by id. Lookup (``in``, ``[]``, ``get``) ignores case. A user file that was skipped
    (malformed, a FIFO, a link out of its folder) is kept in ``broken`` under its file name, so that asking for
    it by id gives its error rather than "unknown preset"."""

    def __init__(self) -> None:
        super().__init__()
        self.broken: dict[str, KvplanError] = {}

    def _key(self, preset_id: Any) -> str | None:
        if not isinstance(preset_id, str):
            return None
        if dict.__contains__(self, preset_id):
            return preset_id
        folded = preset_id.casefold()
        return next((k for k in self if k.casefold() == folded), None)

    def __contains__(self, preset_id: object) -> bool:
        return self._key(preset_id) is not None or (isinstance(preset_id, str)
                                                    and preset_id.casefold() in self.broken)

    def __getitem__(self, preset_id: str) -> PresetFile:
        key = self._key(preset_id)
        if key is None:
            if isinstance(preset_id, str) and preset_id.casefold() in self.broken:
                raise self.broken[preset_id.casefold()]
            raise KeyError(preset_id)
        return dict.__getitem__(self, key)

    def get(self, preset_id: str, default: Any = None) -> Any:
        try:
            return self[preset_id]
        except KeyError:
            return default

    def add(self, preset: PresetFile) -> None:
        old = self._key(preset.id)
        if old is not None:
            del self[old]
        self.broken.pop(preset.id.casefold(), None)
        dict.__setitem__(self, preset.id, preset)


def user_dirs(extra: list[Path] | None = None) -> list[Path]:
    dirs = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    dirs += [Path(d) for d in extra or []]
    for d in dirs:
        kind, why = probe(d)
        if kind == "missing":
            raise KvplanError(f"presets folder {d} does not exist", f"create it, or fix --presets-dir / {ENV_VAR}")
        if kind != "dir":
            why = "is a file, not a folder" if kind == "file" else why.replace("not a file", "not a folder")
            raise KvplanError(f"presets folder {d} {why}", f"give a folder, or fix --presets-dir / {ENV_VAR}")
    return dirs


def _candidates(root: Path, builtin: bool):
    """(path, problem) for each ``*.toml`` in the folder and its models/ and hardware/ subfolders (not the
    whole tree). In a user folder, a FIFO, a device, a subfolder or a symlink that leaves the folder comes with
    the problem that skips it; nothing is opened here."""
    try:
        real_root = root.resolve()
    except (OSError, RuntimeError):
        real_root = root
    for sub in ("", "models", "hardware"):
        folder = root / sub
        if sub and probe(folder)[0] != "dir":
            continue
        try:
            paths = sorted(folder.glob("*.toml"))
        except OSError as err:
            if builtin:
                raise
            warn(f"cannot list presets folder {folder}: {err.strerror or err}", "check its permissions")
            continue
        for path in paths:
            if builtin:
                yield path, None
                continue
            try:
                real = path.resolve()
            except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
                yield path, "is a symlink loop"
                continue
            if real != real_root and real_root not in real.parents:
                yield path, f"is a symlink to {real}, outside the presets folder {root}"
                continue
            kind, why = probe(path)
            yield path, (None if kind == "file" else ("is a folder, not a file" if kind == "dir" else why))


def _identify(data: dict[str, Any], path: Path) -> tuple[str, str]:
    kind = data.get("type")
    if kind not in ("model", "hardware"):
        raise KvplanError(f"preset file {path} has type={shorten(kind)}",
                          'start it with type = "model" or type = "hardware"')
    preset_id = data.get("id") or path.stem
    if not isinstance(preset_id, str) or not preset_id.strip():
        raise KvplanError(f"preset file {path}: id = {shorten(preset_id)} is not a text id",
                          f'write id = "{path.stem}" (or leave id out to use the file name)')
    return kind, preset_id


def discover(extra_dirs: list[Path] | None = None) -> dict[str, Presets]:
    """All presets by type then id; user folders (later ones win) override the built-in files. A file in a user
    folder that cannot be read as a preset is skipped with a warning on stderr (and remembered by file name:
    asking for it by id gives its error); a broken built-in file is a kvplan bug and an error."""
    found: dict[str, Presets] = {"model": Presets(), "hardware": Presets()}
    roots = [(builtin_dir(), True)] + [(d, False) for d in user_dirs(extra_dirs)]
    for root, builtin in roots:
        for path, problem in _candidates(root, builtin):
            try:
                if problem:
                    raise KvplanError(f"preset file {path} {problem}",
                                      "remove it from the presets folder or make it a regular TOML file there")
                data = read_toml(path)
                kind, preset_id = _identify(data, path)
            except KvplanError as err:
                if builtin:
                    raise
                warn(f"skipped {err.message}", err.hint)
                stem = path.stem.casefold()
                for table in found.values():
                    for key in [k for k in table if k.casefold() == stem]:
                        del table[key]
                    table.broken[stem] = err
                continue
            found[kind].add(PresetFile(preset_id, kind, path, builtin, data))
    return found


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _expand_layers(spec: Any, num_layers: int | None) -> list[int]:
    """The layer indices a group's ``layers`` names. Ranges are checked against ``num_layers`` before any list
    is built (``{start = 0, stop = 10**12}`` is an error, not a trillion-item list). Without a valid
    ``num_layers`` only the form is checked (and ``[0]`` returned). Raises ValueError."""
    if spec == "all":
        return [0] if num_layers is None else list(range(num_layers))
    if isinstance(spec, list) and all(_is_index(i) for i in spec):
        return spec
    if isinstance(spec, dict) and spec and all(_is_index(v) for v in spec.values()):
        if set(spec) <= {"start", "stop"}:
            if num_layers is None:
                return [0]
            start, stop = spec.get("start", 0), spec.get("stop", num_layers)
            if stop > num_layers or start >= stop:
                raise ValueError(f"= {{start = {start}, stop = {stop}}} is not a range within 0..{num_layers} "
                                 f"(num_layers = {num_layers}; stop is excluded)")
            return list(range(start, stop))
        if set(spec) <= {"every", "offset"} and spec.get("every", 0) > 0:
            return [0] if num_layers is None else list(range(spec.get("offset", 0), num_layers, spec["every"]))
    raise ValueError(f"= {shorten(spec)} is not understood")


# --- building specs: trusted (built-in) and validated (anything else) -------------------------------------

_LAYERS_HINT = 'write layers as "all", a list of indices, {start=, stop=} or {every=, offset=}'


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# The plausible limits of a preset's figures: past them a figure is a typo or a unit slip (1e30 parameters), refused
# before any arithmetic. Parameters: 1e14, about 100 x the largest model preset (Kimi K2, 1.03e12 in total); weight
# bytes: 1e15 (1e14 parameters at fp64's 8 bytes would be 8e14); any hardware figure (TFLOPS, GB/s, GB, us, USD):
# 1e6, about 76 x the largest preset figure (B300's dense fp4, 13,125 TFLOPS); hbm_capacity_gib has its own 100,000.
MAX_PARAMS = 1e14
MAX_WEIGHT_BYTES = 1e15
MAX_HARDWARE_FIGURE = 1e6


def _model_limit(name: str) -> float:
    return MAX_WEIGHT_BYTES if name.endswith("weight_bytes") else MAX_PARAMS


def _figure_problems(body: dict[str, Any], positive: Any, prefix: tuple = (),
                     limit: Any = None) -> list[tuple[tuple, str]]:
    """The checks a spec's ``__post_init__`` makes on its sourced figures (``{value, source}`` tables), made on
    the plain data so that they are reported along with pydantic's type errors instead of after them.
    ``positive(path)`` says whether the figure at that dotted path must be positive; ``limit(path)`` its plausible
    upper limit (None: no limit)."""
    found = []
    for key, value in body.items():
        loc = prefix + (key,)
        if not isinstance(value, dict):
            continue
        if "value" in value and "source" in value:
            number, name = value["value"], ".".join(map(str, loc))
            top = limit(name) if limit is not None else None
            if _is_number(number) and positive(name) and number <= 0:
                found.append((loc, f"must be positive, got {number}"))
            elif _is_number(number) and name.endswith("efficiency") and number > 1:
                found.append((loc, f"is a fraction of the line rate, got {number}"))
            elif _is_number(number) and top is not None and not number <= top:
                found.append((loc, f"= {number:g} is past the plausible limit of {top:g} (a typo or a unit slip?)"))
        else:
            found += _figure_problems(value, positive, loc, limit)
    return found


def _report(cls: type, body: dict[str, Any], own: list[tuple[tuple, str]], where: str, trusted: bool) -> Any:
    """The spec, or one KvplanError listing every problem: ``own`` (found on the plain data) and pydantic's.
    Pydantic's messages about a field already reported, and its whole-object checks (``__post_init__``, which
    would repeat ``own`` or judge placeholder values) are left out when ``own`` has anything."""
    if trusted and not own:
        from kvplan.specs.layers import construct

        try:
            return construct(cls, body)
        except (TypeError, ValueError, KeyError) as err:
            raise KvplanError(f"{where}: built-in preset is malformed: {err}", "report this kvplan bug") from None
    if trusted:
        raise KvplanError(f"{where}: built-in preset is malformed: {joined(own)}", "report this kvplan bug")
    if not own:
        return validate(cls, body, where)
    flagged = {loc for loc, _ in own}
    theirs = [(loc, msg) for loc, msg in problems(cls, body)
              if loc and not any(loc[:len(f)] == f for f in flagged)]
    raise KvplanError(f"{where}: {joined(own + theirs)}", FIELD_HINT)


def build_model(data: dict[str, Any], where: str, trusted: bool = False):
    """A ModelSpec from a model preset's TOML table; ``trusted`` (built-in presets) skips pydantic. Every problem
    in an untrusted table is reported at once, on one line."""
    from kvplan.specs.dtypes import WEIGHT_BYTES_PER_PARAM
    from kvplan.specs.model import ModelSpec

    if data.get("type", "model") != "model":
        raise KvplanError(f"{where} is a {shorten(data.get('type'))} preset, not a model",
                          "give a model preset or config")
    body = {k: v for k, v in data.items() if k != "type"}
    own: list[tuple[tuple, str]] = []
    num_layers = body.get("num_layers")
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or not 0 < num_layers <= 10_000:
        own.append((("num_layers",), "is missing" if num_layers is None else
                    f"= {shorten(num_layers)} is not a whole number from 1 to 10,000"))
        num_layers = None
    raw_groups = body.get("groups", [])
    if not isinstance(raw_groups, list) or not all(isinstance(g, dict) for g in raw_groups):
        own.append((("groups",), f"= {shorten(raw_groups)} is not a list of [[groups]] tables"))
        body["groups"] = []
    else:
        groups = []
        for i, g in enumerate(raw_groups):
            g = dict(g)
            try:
                g["layers"] = _expand_layers(g.get("layers", "all"), num_layers)
            except ValueError as err:
                own.append((("groups", i, "layers"), f"{err} ({_LAYERS_HINT})"))
                g["layers"] = list(range(num_layers or 1))  # a placeholder, so that the other fields are checked
            groups.append(g)
        body["groups"] = groups
    dtype = body.get("weight_dtype")
    if isinstance(dtype, str) and dtype not in WEIGHT_BYTES_PER_PARAM:
        own.append((("weight_dtype",), f"= {shorten(dtype)} is not one of {', '.join(WEIGHT_BYTES_PER_PARAM)}"))
    figures = ("params_total", "params_active", "weight_bytes", "params_expert", "params_active_matmul")
    own += _figure_problems({k: v for k, v in body.items() if k in figures}, lambda name: True, limit=_model_limit)
    own += _figure_problems({k: v for k, v in body.items() if k == "expert_weight_bytes"}, lambda name: False,
                            limit=_model_limit)
    return _report(ModelSpec, body, own, where, trusted)


def build_hardware(data: dict[str, Any], where: str, trusted: bool = False):
    """A HardwareSpec from a hardware preset's TOML table; ``trusted`` (built-in presets) skips pydantic. Every
    problem in an untrusted table is reported at once, on one line."""
    from kvplan.specs.hardware import COMPUTE_DTYPES, HardwareSpec

    if data.get("type", "hardware") != "hardware":
        raise KvplanError(f"{where} is a {shorten(data.get('type'))} preset, not hardware",
                          "give a hardware preset")
    body = {k: v for k, v in data.items() if k != "type"}
    own = _figure_problems(body, lambda name: True,
                           limit=lambda name: None if name == "hbm_capacity_gib" else MAX_HARDWARE_FIGURE)
    tflops = body.get("dense_tflops")
    if isinstance(tflops, dict):
        unknown = sorted(str(k) for k in set(tflops) - set(COMPUTE_DTYPES))
        if unknown:
            own.append((("dense_tflops",), f"unknown compute dtype(s) {shorten(unknown)}; use "
                        f"{', '.join(COMPUTE_DTYPES)}"))
    hbm = body.get("hbm_capacity_gib")
    if isinstance(hbm, dict) and _is_number(hbm.get("value")) and hbm["value"] > 100_000:
        own.append((("hbm_capacity_gib",), f"{hbm['value']} is absurd for one GPU"))
    return _report(HardwareSpec, body, own, where, trusted)


def _unknown(kind: str, name: str, known: list[str]) -> KvplanError:
    import difflib

    folded = {k.casefold(): k for k in known}
    typed = name.casefold()
    # an id the name typed extends or abbreviates (h200-sxm: h200; qwen3-235b: qwen3-235b-a22b) first, the closest
    # first; then difflib's other matches (its ratio alone ranks a shared suffix, "-sxm", as high as the GPU itself)
    ratio = {k: difflib.SequenceMatcher(None, typed, k).ratio() for k in folded}
    stems = sorted((k for k in folded if typed.startswith(k) or k.startswith(typed)), key=lambda k: (-ratio[k], k))
    close = list(dict.fromkeys(stems + difflib.get_close_matches(typed, list(folded), n=3, cutoff=0.4)))[:3]
    hint = ("did you mean " + " or ".join(folded[c] for c in close) + "?") if close else "run `kvplan presets list`"
    return KvplanError(f"unknown {kind} preset {shorten(name)}", hint)


def _path(ref: str, what: str) -> Path:
    if not ref.strip():
        raise KvplanError(f"the {what} is an empty string", f"give a {what} preset id or a file")
    try:
        path = Path(ref).expanduser()
    except RuntimeError:  # ~user with no such user, or no home directory
        user = ref[1:].split("/", 1)[0]
        raise KvplanError(f"{what} {shorten(ref)}: cannot expand ~{user} (no such user or home directory)",
                          f"give the full path, or a {what} preset id") from None
    kind, why = probe(path)
    if "not a usable path" in why:
        raise KvplanError(f"{what} {ref} {why}", f"give a {what} preset id or a shorter path")
    return path


def _preset_for_hf_id(ref: str, presets: Presets) -> str | None:
    """The preset an HF-style id (``Qwen/QwQ-32B``) or a file name names: by id or name, or a source URL."""
    base = ref.rstrip("/").rsplit("/", 1)[-1].casefold()
    for suffix in (".json", ".toml"):
        base = base.removesuffix(suffix)
    url = f"huggingface.co/{ref.strip('/')}".casefold()
    for pid, preset in presets.items():
        name = preset.data.get("name")
        if pid.casefold() == base or (isinstance(name, str) and name.casefold() == base):
            return pid
    for pid, preset in presets.items():
        sources = preset.data.get("sources")
        if isinstance(sources, list) and any(isinstance(s, str) and url in s.casefold() for s in sources):
            return pid
    return None


def load_model(ref: str, extra_dirs: list[Path] | None = None):
    """A model from a preset id, a preset TOML path, an HF ``config.json`` path, a model directory, or a Hugging
    Face Hub id ``org/name[@revision]`` (``inputs.hub``). An existing path wins, then a preset id, then a Hub id."""
    path = _path(ref, "model")
    kind, why = probe(path)
    if kind == "dir":
        from kvplan.inputs.hf_import import load_hf_model

        return load_hf_model(path)
    if kind == "bad":
        raise KvplanError(f"model {ref} {why}", _OBJECT_HINT)
    if kind == "file" and path.suffix.lower() == ".toml":
        return build_model(read_toml(path, "model preset"), str(path))
    if kind == "file" and path.suffix.lower() == ".json":
        from kvplan.inputs.hf_import import load_hf_model

        return load_hf_model(path)
    preset = _find("model", ref, extra_dirs)
    if preset is None:
        if kind == "file":
            raise KvplanError(f"model file {ref} is neither a preset .toml nor a config .json, nor a preset id",
                              _OBJECT_HINT)
        models = discover(extra_dirs)["model"]
        from kvplan.inputs.hub import parse_hub_id

        if kind == "missing" and parse_hub_id(ref) is not None:  # a path or a preset id wins over a Hub id
            from kvplan.inputs.hub import load_hub_model

            return load_hub_model(ref, _preset_for_hf_id(ref.split("@", 1)[0], models) or "")
        if os.sep in ref or ref.endswith((".json", ".toml")):
            match = _preset_for_hf_id(ref, models)
            hint = (f"for the preset, give -m {match}; for a checkpoint, give the path of its config.json"
                    if match else "check the path")
            raise KvplanError(f"model file {ref} {why}", hint)
        raise _unknown("model", ref, sorted(models))
    return build_model(preset.data, str(preset.path), trusted=preset.builtin)


def _builtin_file(kind: str, preset_id: str, extra_dirs: list[Path] | None) -> Path | None:
    """The built-in file named after the id, when no user folder is in play (start-up matters): ``_find`` reads it
    alone. None when user folders must be scanned."""
    if not extra_dirs and not os.environ.get(ENV_VAR) and "/" not in preset_id and os.sep not in preset_id:
        return builtin_dir() / {"model": "models", "hardware": "hardware"}[kind] / f"{preset_id.lower()}.toml"
    return None


def _find(kind: str, preset_id: str, extra_dirs: list[Path] | None) -> PresetFile | None:
    """One preset by id (any case). Without user folders, the built-in file named after the id is read alone
    (start-up matters); otherwise every folder is scanned so that user presets override built-in ones."""
    path = _builtin_file(kind, preset_id, extra_dirs)
    if path is not None:
        if probe(path)[0] == "file":
            data = read_toml(path)
            if data.get("type") == kind and str(data.get("id", path.stem)).casefold() == preset_id.casefold():
                return PresetFile(data.get("id", path.stem), kind, path, True, data)
    return discover(extra_dirs)[kind].get(preset_id)


def load_hardware(ref: str, extra_dirs: list[Path] | None = None):
    """A GPU from a preset id (user folders ``extra_dirs`` and ``KVPLAN_PRESETS_DIR`` first) or a hardware preset
    .toml path."""
    path = _path(ref, "hardware")
    kind, why = probe(path)
    if kind == "bad":
        raise KvplanError(f"hardware {ref} {why}", "give a hardware preset id or a hardware preset .toml")
    if kind == "file" and path.suffix.lower() == ".toml":
        return build_hardware(read_toml(path, "hardware preset"), str(path))
    if kind == "dir":
        raise KvplanError(f"hardware {ref} is a folder", "give a hardware preset id or a hardware preset .toml")
    preset = _find("hardware", ref, extra_dirs)
    if preset is None:
        if kind == "missing" and (os.sep in ref or ref.endswith(".toml")):
            raise KvplanError(f"hardware file {ref} {why}", "check the path, or give a hardware preset id")
        raise _unknown("hardware", ref, sorted(discover(extra_dirs)["hardware"]))
    return build_hardware(preset.data, str(preset.path), trusted=preset.builtin)
