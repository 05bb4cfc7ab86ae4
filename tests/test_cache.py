"""kvplan.cache (presets): a cached built-in preset is the same document as a fresh parse, a change to the file
re-parses it, and every kind of bad entry falls back to parsing."""

from __future__ import annotations

import dataclasses
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TOML_MODULE

from kvplan import cache as preset_cache
from kvplan.presets import builtin_dir, load_model, read_toml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(preset_cache.ENV_VAR, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _counting():
    calls = []

    def parse(path):
        calls.append(path)
        return read_toml(path)
    return parse, calls


def _copy(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "models"
    folder.mkdir(exist_ok=True)
    path = folder / "m.toml"
    path.write_text(text)
    return path


def test_second_read_comes_from_the_cache(cache):
    parse, calls = _counting()
    path = builtin_dir() / "models" / "qwen3-32b.toml"
    first = preset_cache.load_preset(path, parse)
    second = preset_cache.load_preset(path, parse)
    assert calls == [path]                       # parsed once
    assert first == second == read_toml(path)
    assert len(list(cache.rglob("*.marshal"))) == 1


def test_a_changed_file_is_parsed_again(cache, tmp_path):
    path = _copy(tmp_path, 'type = "model"\nid = "m"\nnum_layers = 4\n')
    parse, calls = _counting()
    assert preset_cache.load_preset(path, parse)["num_layers"] == 4
    path.write_text('type = "model"\nid = "m"\nnum_layers = 64\n')     # one byte longer: the size changes
    os.utime(path, ns=(1, 1))
    assert preset_cache.load_preset(path, parse)["num_layers"] == 64
    path.write_text('type = "model"\nid = "m"\nnum_layers = 65\n')     # same size, other mtime
    os.utime(path, ns=(2, 2))
    assert preset_cache.load_preset(path, parse)["num_layers"] == 65
    assert len(calls) == 3


@pytest.mark.parametrize("entry", [b"", b"not marshal at all \xff", marshal.dumps([1, 2]),
                                   marshal.dumps((("other", "stamp"), {"num_layers": 1})),
                                   marshal.dumps("x" * 10)])
def test_bad_entries_fall_back_to_parsing(cache, tmp_path, entry):
    path = _copy(tmp_path, 'type = "model"\nnum_layers = 4\n')
    entry_file = cache / f"presets-{__import__('kvplan').__version__}" / "models-m.marshal"
    entry_file.parent.mkdir(parents=True)
    entry_file.write_bytes(entry)
    parse, calls = _counting()
    assert preset_cache.load_preset(path, parse) == {"type": "model", "num_layers": 4}
    assert len(calls) == 1
    assert preset_cache.load_preset(path, parse) == {"type": "model", "num_layers": 4}   # the entry was rewritten
    assert len(calls) == 1


def test_a_fifo_entry_does_not_hang(cache, tmp_path):
    path = _copy(tmp_path, 'type = "model"\n')
    entry_file = cache / f"presets-{__import__('kvplan').__version__}" / "models-m.marshal"
    entry_file.parent.mkdir(parents=True)
    os.mkfifo(entry_file)
    assert preset_cache.load_preset(path, read_toml) == {"type": "model"}


def test_unwritable_cache_and_dates(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(preset_cache.ENV_VAR, str(blocker / "sub"))      # a folder under a file cannot be made
    path = _copy(tmp_path, 'type = "model"\nas_of = 2026-01-02\n')       # a TOML date: marshal cannot hold it
    parse, calls = _counting()
    assert str(preset_cache.load_preset(path, parse)["as_of"]) == "2026-01-02"
    assert str(preset_cache.load_preset(path, parse)["as_of"]) == "2026-01-02"
    assert len(calls) == 2
    assert capsys.readouterr().err == ""          # a date is not the folder's fault: no warning
    plain = _copy(tmp_path, 'type = "model"\n')
    for _ in range(2):
        assert preset_cache.load_preset(plain, read_toml) == {"type": "model"}
    # the folder the user chose cannot be made: one warning a run, naming it and the fix
    err = capsys.readouterr().err.splitlines()
    assert err == [f"warning: cannot write kvplan's start-up cache in {blocker / 'sub'}: Not a directory (runs work, "
                   "only slower) (fix: give KVPLAN_CACHE_DIR a folder you can write, or KVPLAN_CACHE_DIR=off)"]


def test_default_folder_unwritable_is_silent(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.delenv(preset_cache.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))      # the default location, not the user's choice
    path = _copy(tmp_path, 'type = "model"\n')
    assert preset_cache.load_preset(path, read_toml) == {"type": "model"}
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", ["off", "", " OFF "])
def test_off(value, monkeypatch):
    monkeypatch.setenv(preset_cache.ENV_VAR, value)
    assert preset_cache.cache_dir() is None


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv(preset_cache.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert preset_cache.cache_dir() == tmp_path / "kvplan"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")        # ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert preset_cache.cache_dir() == tmp_path / "home" / ".cache" / "kvplan"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr("os.path.expanduser", lambda p: p)         # no home folder: "~" stays "~"
    assert preset_cache.cache_dir() is None


def test_cached_model_equals_fresh(cache, monkeypatch):
    fresh = load_model("deepseek-r1")            # parses and writes the entry
    assert list(cache.rglob("models-deepseek-r1.marshal"))
    assert load_model("deepseek-r1") == fresh    # from the entry


def test_a_cached_run_does_not_import_tomllib(cache):
    env = {**os.environ, preset_cache.ENV_VAR: str(cache)}
    code = ("import sys; from kvplan.presets import load_model, load_hardware; load_model('qwen3-32b'); "
            f"load_hardware('h100-sxm'); print({TOML_MODULE!r} in sys.modules)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                           check=True).stdout.strip() for _ in range(2)]
    assert runs == ["True", "False"]


# --- built specs ---------------------------------------------------------------------------------------------

def _builtin_ids(kind: str) -> list[str]:
    folder = builtin_dir() / ("models" if kind == "model" else "hardware")
    return sorted(p.stem for p in folder.glob("*.toml"))


def _spec_entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("specs-*/*.marshal"))


@pytest.mark.parametrize("kind", ["model", "hardware"])
def test_every_cached_spec_equals_a_fresh_build(cache, kind):
    from dataclasses import fields, replace

    from kvplan.presets import build_hardware, build_model, load_hardware

    load, build = (load_model, build_model) if kind == "model" else (load_hardware, build_hardware)
    ids = _builtin_ids(kind)
    first = [load(i) for i in ids]                   # built, and stored
    assert len(_spec_entries(cache)) == len(ids)
    for preset_id, built in zip(ids, first, strict=True):
        path = builtin_dir() / ("models" if kind == "model" else "hardware") / f"{preset_id}.toml"
        assert preset_cache.read_spec(path) is not None
        cached = load(preset_id)                     # from the entry
        fresh = build(read_toml(path), str(path), trusted=True)
        assert cached is not built and type(cached) is type(fresh)
        assert cached == fresh == built and repr(cached) == repr(fresh)
        assert [f.name for f in fields(cached)] == [f.name for f in fields(fresh)]
        assert vars(cached) == vars(fresh)
        assert replace(cached, name="other") == replace(fresh, name="other")
        try:
            expected = hash(fresh)
        except TypeError:                            # a spec holding a dict (a GPU's dense_tflops)
            with pytest.raises(TypeError):
                hash(cached)
        else:
            assert hash(cached) == expected
        with pytest.raises(dataclasses.FrozenInstanceError):
            cached.id = "x"


def test_a_cached_spec_works_before_its_classes_are_made(cache):
    # a fresh process: the spec comes from the entry, its classes not made until something needs them
    env = {**os.environ, preset_cache.ENV_VAR: str(cache)}
    code = ("from kvplan.frozen import _PENDING\n"
            "from kvplan.model import ModelSpec\n"
            "from kvplan.presets import load_model\n"
            "m = load_model('deepseek-r1')\n"
            "pending = _PENDING in ModelSpec.__dict__\n"
            "from dataclasses import fields, replace\n"
            "ok = (m.groups[0].kind.kind, len(fields(m)) > 10, replace(m) == m,\n"
            "      m.with_mtp_layers(1).num_layers == m.num_layers + 1, type(m.groups[0].layers) is tuple)\n"
            "print(pending, ok)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                           check=True).stdout.strip() for _ in range(2)]
    # first run: built (so made); second: read from the entry, made only by fields()/replace()
    assert runs == ["False (\'mla\', True, True, True, True)", "True (\'mla\', True, True, True, True)"]


def _rewrite(entry_file: Path, change) -> None:
    stamp, value = marshal.loads(entry_file.read_bytes())
    entry_file.write_bytes(marshal.dumps((stamp, change(value))))


def test_a_changed_source_or_preset_builds_again(cache, monkeypatch):
    path = builtin_dir() / "models" / "qwen3-32b.toml"
    load_model("qwen3-32b")
    entry_file, = _spec_entries(cache)
    assert preset_cache.read_spec(path) is not None
    # one of the sources the entry names (the classes' modules, the builders) had another mtime when it was written
    sources = marshal.loads(entry_file.read_bytes())[1][0]
    assert {Path(s[0]).name for s in sources} >= {"model.py", "layers.py", "presets.py"}
    _rewrite(entry_file, lambda v: (tuple((s[0], s[1] - 1, s[2]) for s in v[0]), *v[1:]))
    assert preset_cache.read_spec(path) is None
    load_model("qwen3-32b")                      # built again, and the entry rewritten
    assert preset_cache.read_spec(path) is not None
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: os.stat_result((*real_stat(p)[:8], 1, 1))
                        if str(p) == str(path) else real_stat(p, *a, **k))   # the preset file changed
    assert preset_cache.read_spec(path) is None


@pytest.mark.parametrize("payload", [("o", "kvplan.presets", "Presets", {}), ("o", "os", "stat_result", {}),
                                     ("o", "kvplan.model", "NoSuchClass", {}), ("x",), ("t", 5)])
def test_bad_spec_entries_fall_back_to_building(cache, payload):
    fresh = load_model("qwen3-32b")
    entry_file, = _spec_entries(cache)
    _rewrite(entry_file, lambda v: (v[0], v[1], payload))
    assert preset_cache.read_spec(builtin_dir() / "models" / "qwen3-32b.toml") is None
    assert load_model("qwen3-32b") == fresh


def test_specs_not_cached_with_user_folders_or_cache_off(cache, tmp_path, monkeypatch):
    load_model("qwen3-32b")
    assert len(_spec_entries(cache)) == 1
    user = tmp_path / "mine"
    user.mkdir()
    text = (builtin_dir() / "models" / "qwen3-32b.toml").read_text().replace('name = "', 'name = "Mine: ', 1)
    (user / "qwen3-32b.toml").write_text(text)
    monkeypatch.setenv("KVPLAN_PRESETS_DIR", str(user))
    assert load_model("qwen3-32b").name.startswith("Mine: ")     # the user's file wins over the cached built-in
    load_model("deepseek-r1")
    assert len(_spec_entries(cache)) == 1                        # nothing stored while user folders are in play
    monkeypatch.delenv("KVPLAN_PRESETS_DIR")
    assert not load_model("qwen3-32b").name.startswith("Mine: ")
    monkeypatch.setenv(preset_cache.ENV_VAR, "off")
    load_model("deepseek-r1")
    assert len(_spec_entries(cache)) == 1


def test_a_spec_holding_other_values_is_not_stored(cache):
    from kvplan.dtypes import KVDtype

    path = builtin_dir() / "models" / "qwen3-32b.toml"
    preset_cache.write_spec(path, ("model", "qwen3-32b"), {"dtype": KVDtype.BF16})   # an enum: not plain data
    assert _spec_entries(cache) == []


def test_nothing_is_stored_from_files_changed_since_the_process_imported_kvplan(cache, monkeypatch):
    import kvplan

    # A long-lived process (a notebook, a test run) imported kvplan, then a source or the preset was edited: the
    # spec it builds now comes from the old code, so it must not be stored under the files' new stamps. Moving the
    # import time to before every file's mtime is the same as editing them all after the import.
    monkeypatch.setattr(kvplan, "_IMPORTED_NS", 0)
    load_model("qwen3-32b")
    assert _spec_entries(cache) == []
    monkeypatch.setattr(kvplan, "_IMPORTED_NS", os.stat(builtin_dir() / "models" / "qwen3-32b.toml").st_mtime_ns)
    load_model("qwen3-32b")                    # the preset's mtime is not before the import: still nothing
    assert _spec_entries(cache) == []
    monkeypatch.undo()
    monkeypatch.setenv(preset_cache.ENV_VAR, str(cache))
    load_model("qwen3-32b")                    # this process's own import time: every file is older, stored
    assert len(_spec_entries(cache)) == 1
