"""Generated fuzzing of the command line: every option of every command with hostile values, and hostile config
and preset files. The contract checked on every run:

* exit code 0 or 2, never 1 ("internal error") and never a traceback;
* on 2, stderr is exactly one line, starting with "error: " and holding a "(fix: ...)";
* on 0, stderr holds nothing but "warning: " lines;
* nothing blocks (each run is under a 10 s alarm: a FIFO that is opened for reading fails the test).

The options are read from the command line itself (``kvplan.cli``), so an option added later is fuzzed too.
Runs are in-process through the ``run_cli`` fixture; the whole file takes a few seconds.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.inputs import presets

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
ROOT = Path(__file__).resolve().parent.parent
WORK = Path(tempfile.mkdtemp(prefix="kvplan-fuzz-"))  # files the strategies point at (FIFOs, loops, folders)
atexit.register(shutil.rmtree, WORK, True)


class Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise Hang("a kvplan command blocked past its alarm")


def _commands() -> dict[tuple[str, ...], list]:
    """Every leaf command (as its argv prefix) and its click parameters."""
    from kvplan.cli import COMMANDS as NAMES
    from kvplan.cli import _build

    found: dict[tuple[str, ...], list] = {}

    def walk(cmd, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, path + (name,))
        else:
            found[path] = list(cmd.params)

    for name in NAMES:   # the top-level group builds each command on demand
        walk(_build(name), (name,))
    return found


COMMANDS = _commands()
OPTIONS = {path: [p for p in params if p.param_type_name == "option"] for path, params in COMMANDS.items()}


def check(r, args, warnings: bool = False) -> None:
    """The contract, for one run. With ``warnings`` (a presets folder holding files that are skipped), warning
    lines may come before the one error line."""
    shown = [a[:80] for a in args]
    assert r.code in (0, 2), (shown, r.code, r.err[-600:])
    assert "Traceback" not in r.err and "internal error" not in r.err, (shown, r.err[-600:])
    lines = r.err.splitlines()
    if warnings:
        assert all(line.startswith("warning: ") for line in lines[:-1]), (shown, r.err[-600:])
        lines = lines[-1:] if r.code == 2 else [line for line in lines if line.startswith("warning: ")]
    if r.code == 2:
        assert len(lines) == 1, (shown, r.err[-600:])
        assert lines[0].startswith("error: ") and "(fix: " in lines[0], (shown, lines[0])
    else:
        assert all(line.startswith("warning: ") for line in lines), (shown, r.err[-600:])


def run(run_cli, *args: str, seconds: int = 10):
    """``run_cli(*args)``, raising Hang if it blocks past ``seconds`` (tests/test_user_pass.py's FIFOs too)."""
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(seconds)
    try:
        r = run_cli(*args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return r


@pytest.fixture
def cli(run_cli, monkeypatch, tmp_path):
    """``run_cli`` in an empty working folder (a fuzzed --plot path lands there), checking the contract."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(presets.ENV_VAR, raising=False)

    def go(*args: str, warnings: bool = False):
        r = run(run_cli, *args)
        check(r, args, warnings or any(str(WORK / "presets") in a for a in args))
        return r

    return go


# --- files the fuzz points options at ---------------------------------------------------------------------------

def _special_files() -> list[str]:
    fifo = WORK / "fifo"
    os.mkfifo(fifo)
    os.mkfifo(WORK / "fifo.json")
    os.mkfifo(WORK / "fifo.toml")
    (WORK / "loop").symlink_to(WORK / "loop")
    (WORK / "loop.toml").symlink_to(WORK / "loop.toml")
    (WORK / "dangling.json").symlink_to(WORK / "nowhere.json")
    (WORK / "folder.toml").mkdir()
    (WORK / "empty").mkdir()
    (WORK / "empty.json").write_text("")
    (WORK / "empty.toml").write_text("")
    (WORK / "binary.json").write_bytes(b"\xff\xfe\x00\x01")
    # a presets folder holding one of everything that must be skipped, and one good preset
    folder = WORK / "presets"
    folder.mkdir()
    os.mkfifo(folder / "pipe.toml")
    (folder / "loop.toml").symlink_to(folder / "loop.toml")
    (folder / "outside.toml").symlink_to(ROOT / "presets" / "models" / "qwq-32b.toml")
    (folder / "deep.toml").write_text("x = " + "[" * 3000 + "]" * 3000 + "\n")
    (folder / "idlist.toml").write_text('type = "model"\nid = ["a"]\n')
    (folder / "bad.toml").write_text("type = \n")
    (folder / "tiny.toml").write_text(
        'type = "model"\nid = "tiny"\nname = "Tiny"\nsources = ["made up for a test"]\nnum_layers = 2\n'
        '[[groups]]\nname = "attn"\nlayers = "all"\n'
        'kind = { kind = "full_attention", kv_heads = 2, head_dim_k = 64, head_dim_v = 64 }\n')
    paths = [str(p) for p in (fifo, WORK / "fifo.json", WORK / "fifo.toml", WORK / "loop", WORK / "loop.toml",
                               WORK / "dangling.json", WORK / "folder.toml", WORK / "empty", WORK / "empty.json",
                               WORK / "empty.toml", WORK / "binary.json", folder, folder / "pipe.toml",
                               folder / "deep.toml")]
    devices = [d for d in ("/dev/null", "/dev/zero") if os.path.exists(d)]
    return paths + devices + ["~nosuchuser-kvplan", "~nosuchuser-kvplan/x.toml", "a" * 300, "a/" * 2100,
                              "Qwen/QwQ-32B", "QWQ-32B", "x\ny.json", str(WORK / "missing.toml")]


SPECIAL_PATHS = _special_files()

NUMBERS = ["-1", "0", "1", "2", "3", "8", "-0", "0.0", "nan", "NaN", "inf", "-inf", "1e308", "-1e308", "1e-308",
           "1e309", str(2**64), str(10**30), "9" * 70, "1.5", "0.5", "0.9", "1.0", "1.", ".5", "1e3", "1E3",
           "1,000", "1_000", "0x10", "1/2", "+1", "--1"]
SUFFIXES = ["", "k", "K", "M", "Ki", "Mi", "B", "kB", "KiB", "MiB", "GiB", "GB", "Gb", "TB", "TiB", "Tb", "GB/s",
            "Gb/s", "GiB/s", "ms", "s", "us", "x", " GiB", "%"]
WORDS = ["", " ", "-", "--", "abc", "auto", "bf16", "fp16", "fp8", "fp8_ds_mla", "nvfp4", "int4", "mxfp4", "fp4",
         "vllm", "sglang", "neutral", "table", "json", "csv", "markdown", "iec", "si", "h200", "H200", "b200", "l40s",
         "deepseek-r1", "llama-3.1-8b", "gpt-oss-120b", "deepseek-v3.2-exp", "qwen3-235b-a22b", "per-layer",
         "contiguous", "1k,8k", ",", "1k,,2k", "1k,-1", "0,0", "1Ki,128Ki", "\n", "\x1b[31m", "é", "😀" * 3]


def values() -> st.SearchStrategy[str]:
    numbers = st.one_of(st.sampled_from(NUMBERS),
                        st.integers(-10**20, 10**20).map(str),
                        st.floats(allow_nan=True, allow_infinity=True).map(repr))
    return st.one_of(
        st.tuples(numbers, st.sampled_from(SUFFIXES)).map("".join),
        st.sampled_from(WORDS),
        st.sampled_from(SPECIAL_PATHS),
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
    )


def _argv_for(path: tuple[str, ...], options, chosen, draw) -> list[str]:
    argv = list(path)
    for param in chosen:
        name = draw(st.sampled_from(param.opts))
        if getattr(param, "is_flag", False):
            argv.append(name)
            continue
        value = draw(values())
        argv += [f"{name}={value}"] if draw(st.booleans()) else [name, value]
    for param in COMMANDS[path]:
        if param.param_type_name == "argument":
            argv.append(draw(st.one_of(values(), st.sampled_from(["h200", "qwq-32b", "model", "hardware"]))))
    return argv


@st.composite
def command_lines(draw, path: tuple[str, ...]):
    options = OPTIONS[path]
    chosen = draw(st.lists(st.sampled_from(options), min_size=0, max_size=4, unique_by=lambda p: p.name)
                  ) if options else []
    return _argv_for(path, options, chosen, draw)


# --- the command line -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_help_of_every_command(cli, path):
    assert cli(*path, "--help").code == 0


def test_every_option_of_every_command_is_fuzzed():
    # the strategies draw from the command line's own parameters: a command with no options would be a sign
    # that the introspection broke, not that the fuzz passed
    assert {("size",), ("concurrency",), ("compare-preemption",), ("presets", "list")} <= set(COMMANDS)
    assert all(len(OPTIONS[p]) > 10 for p in (("size",), ("concurrency",), ("compare-preemption",)))


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
@settings(max_examples=20, **SETTINGS)
@given(data=st.data())
def test_fuzz_options(cli, path, data):
    cli(*data.draw(command_lines(path)))


@pytest.mark.parametrize("path", [p for p in sorted(COMMANDS) if OPTIONS[p]], ids=" ".join)
def test_each_option_alone_with_a_hostile_value(cli, path):
    """Not random: each option of the command once, the values taking turns, so that no option is left out."""
    hostile = ("-1", "nan", "x\n" * 2000, "", "1e308", "9" * 70)
    for i, param in enumerate(OPTIONS[path]):
        if getattr(param, "is_flag", False):
            cli(*path, param.opts[0], *_arguments(path))
        else:
            cli(*path, f"{param.opts[0]}={hostile[i % len(hostile)]}", *_arguments(path))


def _arguments(path: tuple[str, ...]) -> list[str]:
    return ["h200" if path[-1] == "show" else "model"] if any(
        p.param_type_name == "argument" for p in COMMANDS[path]) else []


@pytest.mark.parametrize("ref", SPECIAL_PATHS)
@pytest.mark.parametrize("flag", ["-m", "-g", "--compare", "--presets-dir"])
def test_special_paths_as_file_options(cli, flag, ref):
    cli("size", flag, ref)


def test_special_paths_in_concurrency_and_preemption(cli):
    for ref in SPECIAL_PATHS:
        cli("concurrency", "--draft-model", ref)
        cli("compare-preemption", "-m", ref)
        cli("presets", "show", ref)


def test_hostile_presets_folder_from_the_environment(cli, monkeypatch):
    monkeypatch.setenv(presets.ENV_VAR, str(WORK / "presets"))
    r = cli("size", "-m", "tiny", "--brief", warnings=True)
    assert r.code == 0 and "pipe.toml" in r.err and "outside.toml" in r.err


# --- config and preset files ------------------------------------------------------------------------------------

JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                        st.text(max_size=8), st.sampled_from(["all", "full_attention", "sliding_attention",
                                                              "linear_attention", "bfloat16", "fp8", "llama"]))
JSON_VALUES = st.recursive(JSON_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                st.dictionaries(st.text(max_size=6), inner,
                                                                                max_size=4)), max_leaves=12)

HF_KEYS = ["model_type", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
           "layer_types", "sliding_window", "use_sliding_window", "max_window_layers", "sliding_window_pattern",
           "full_attention_interval", "no_rope_layers", "no_rope_layer_interval", "attention_chunk_size",
           "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank", "index_head_dim",
           "index_n_heads", "index_topk", "indexer_types", "num_nextn_predict_layers", "mtp_num_hidden_layers",
           "quantization_config", "torch_dtype", "dtype", "mamba_ssm_dtype", "text_config", "architectures",
           "_name_or_path", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
           "linear_value_head_dim", "linear_conv_kernel_dim", "vocab_size", "max_position_embeddings",
           "intermediate_size", "moe_intermediate_size", "num_experts_per_tok", "n_shared_experts"]
MODEL_TYPES = ["llama", "gemma3_text", "gemma3", "gemma2", "gpt_oss", "mistral", "qwen2", "qwen3", "qwen3_moe",
               "qwen3_next", "qwen3_5", "qwen3_5_text", "llama4", "llama4_text", "deepseek_v3", "deepseek_v32",
               "mamba", "unknown"]
LLAMA = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1000, "torch_dtype": "bfloat16"}


@st.composite
def hf_configs(draw):
    config = dict(LLAMA)
    config["model_type"] = draw(st.sampled_from(MODEL_TYPES))
    for key in draw(st.lists(st.sampled_from(HF_KEYS), max_size=5, unique=True)):
        config[key] = draw(st.one_of(JSON_VALUES, st.integers(0, 70), st.sampled_from([[], {}, "", None])))
    if draw(st.booleans()) and draw(st.booleans()):
        config = {"model_type": draw(st.sampled_from(["gemma3", "llama4", "qwen3_5"])), "text_config": config}
    return config


def _deep(depth: int, kind: str):
    value: object = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


@settings(max_examples=60, **SETTINGS)
@given(config=hf_configs(), with_index=st.one_of(st.none(), JSON_VALUES))
def test_fuzz_hf_config(cli, config, with_index):
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "config.json").write_text(json.dumps(config))
        if with_index is not None:
            (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": with_index}}))
        cli("size", "-m", str(folder))


@settings(max_examples=20, **SETTINGS)
@given(depth=st.integers(1, 3000), kind=st.sampled_from(["list", "dict"]), where=st.sampled_from(HF_KEYS + ["x"]))
def test_fuzz_nested_json(cli, depth, kind, where):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        path.write_text(json.dumps({**LLAMA, where: _deep(min(depth, 500), kind)}) if depth <= 500 else
                        '{"x": ' + ("[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" +
                                    "}" * depth) + "}")
        cli("size", "-m", str(path))


def toml_value(value) -> str:
    """A value as TOML (everything inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(max(min(value, 2**63 - 1), -2**63))
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items() if v is not None) + " }"
    return '""'


def toml_document(table: dict) -> str:
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in table.items() if v is not None)


def _preset(kind: str, preset_id: str) -> dict:
    from importlib import import_module

    from conftest import TOML_MODULE

    folder = "models" if kind == "model" else "hardware"
    return import_module(TOML_MODULE).loads((ROOT / "presets" / folder / f"{preset_id}.toml").read_text())


MODEL_BASE = _preset("model", "qwq-32b")
HARDWARE_BASE = _preset("hardware", "h100-sxm")
TOML_LEAVES = st.one_of(st.booleans(), st.integers(-2**64, 2**64), st.floats(allow_nan=True), st.text(max_size=8),
                        st.sampled_from(["all", "model", "hardware", "full_attention", "bf16"]))
TOML_VALUES = st.recursive(TOML_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                st.dictionaries(st.text(max_size=6), inner,
                                                                                max_size=4)), max_leaves=10)
LAYER_SPECS = st.one_of(TOML_VALUES, st.sampled_from(["all"]),
                        st.fixed_dictionaries({"start": st.integers(-5, 2**63 - 1),
                                               "stop": st.integers(-5, 2**63 - 1)}),
                        st.fixed_dictionaries({"every": st.integers(-2, 2**63 - 1),
                                               "offset": st.integers(-2, 2**63 - 1)}),
                        st.lists(st.integers(-2, 100), max_size=6))


def _mutate(base: dict, draw, paths: list[tuple]) -> dict:
    data = json.loads(json.dumps(base))
    for path in draw(st.lists(st.sampled_from(paths), max_size=4, unique=True)):
        target = data
        for key in path[:-1]:  # an earlier mutation may have replaced a table on the way: then skip this one
            target = target.get(key) if isinstance(target, dict) else target[0] if isinstance(target, list) \
                and target else None
            if not isinstance(target, (dict, list)) or not target:
                break
        else:
            if isinstance(target, list):
                target = target[0]
            if isinstance(target, dict):
                target[path[-1]] = draw(st.one_of(TOML_VALUES, st.none()))
    return data


def _paths(table: dict, prefix: tuple = ()) -> list[tuple]:
    found = []
    for key, value in table.items():
        found.append(prefix + (key,))
        if isinstance(value, dict):
            found += _paths(value, prefix + (key,))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            found += _paths(value[0], prefix + (key,))
    return found + [prefix + ("unknown_key",)]


MODEL_PATHS = _paths(MODEL_BASE)
HARDWARE_PATHS = _paths(HARDWARE_BASE)


@st.composite
def model_presets(draw):
    data = _mutate(MODEL_BASE, draw, MODEL_PATHS)
    if draw(st.booleans()) and isinstance(data.get("groups"), list) and data["groups"] \
            and isinstance(data["groups"][0], dict):
        data["groups"][0]["layers"] = draw(LAYER_SPECS)
    if draw(st.integers(0, 5)) == 0:
        data["groups"] = draw(TOML_VALUES)
    return data


@settings(max_examples=40, **SETTINGS)
@given(data=model_presets(), by=st.sampled_from(["file", "folder"]))
def test_fuzz_model_preset(cli, data, by):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzzed.toml"
        path.write_text(toml_document(data))
        if by == "file":
            cli("size", "-m", str(path))
        else:  # in a presets folder: by its id, and `presets list` keeps working whatever the file holds
            assert cli("presets", "list", "--presets-dir", d, warnings=True).code == 0
            preset_id = data.get("id")
            cli("size", "-m", preset_id if isinstance(preset_id, str) and preset_id.strip() else "fuzzed",
                "--presets-dir", d, warnings=True)


@st.composite
def hardware_presets(draw):
    return _mutate(HARDWARE_BASE, draw, HARDWARE_PATHS)


@settings(max_examples=30, **SETTINGS)
@given(data=hardware_presets(), command=st.sampled_from(["size", "concurrency", "compare-preemption"]))
def test_fuzz_hardware_preset(cli, data, command):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "gpu.toml"
        path.write_text(toml_document(data))
        cli(command, "-m", "llama-3.1-8b", "-g", str(path))
        assert cli("presets", "list", "--presets-dir", d, warnings=True).code == 0


@settings(max_examples=15, **SETTINGS)
@given(depth=st.integers(30, 4000), kind=st.sampled_from(["array", "table"]))
def test_fuzz_nested_toml(cli, depth, kind):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "deep.toml"
        inner = "[" * depth + "]" * depth if kind == "array" else "{a=" * depth + "1" + "}" * depth
        path.write_text(f'type = "model"\nid = "deep"\nx = {inner}\n')
        cli("size", "-m", str(path))
        assert cli("size", "-m", "llama-3.1-8b", "--presets-dir", d, "--brief", warnings=True).code == 0
