"""The text -> Scenario boundary (kvplan.inputs.request): the command line and Python accept and refuse the same
values with the same one-line message, strings resolve through the same loaders and unit parsers as the flags, and
a wrong value raises InputError / ScenarioError (both KvplanError)."""

from __future__ import annotations

from typing import Any

import pytest

import kvplan
from kvplan.errors import InputError, KvplanError, ScenarioError
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.options.scenarios import build_scenario

NAN = float("nan")

# (command-line arguments, the same value from Python, the error class, a word the message must hold)
REFUSED: list[tuple[tuple[str, ...], dict[str, Any], type, str]] = [
    (("--tp", "-1"), {"tp": -1}, InputError, "--tp -1 is out of range"),
    (("--tp", "abc"), {"tp": "abc"}, InputError, "--tp 'abc' is not a whole number"),
    (("--tp", "2.5"), {"tp": 2.5}, InputError, "--tp '2.5' is not a whole number"),
    (("--tp", "3"), {"tp": 3}, ScenarioError, "tp=3 does not divide the 128 query heads"),   # DeepSeek-R1: 128
    (("--gpus", "0"), {"gpus": 0}, InputError, "--gpus 0 is out of range"),
    (("--gpus", "16"), {"gpus": 16}, ScenarioError, "more than 1 node(s) of h200 hold (8)"),
    (("--nodes", "nan"), {"nodes": NAN}, InputError, "--nodes 'nan' is not a whole number"),
    (("--pp", "5000"), {"pp": 5000}, InputError, "--pp 5000 is out of range"),   # MAX_DEGREE 4096
    (("--ep", "3"), {"ep": 3}, ScenarioError, "--ep 3 does not divide TP x DP = 8"),
    (("--prompt", "-5"), {"prompt_tokens": -5}, InputError, "--prompt '-5' must be non-negative"),
    (("--prompt", "-5"), {"prompt": -5}, InputError, "--prompt '-5' must be non-negative"),
    (("--decode", "nan"), {"decode": NAN}, InputError, "--decode 'nan' is not a finite number"),
    (("--decode", "3z"), {"decode": "3z"}, InputError, "--decode '3z' is not a number of tokens"),
    # 10^9 tokens: over units.MAX_TOKENS (10^8), refused from Python too (it was accepted before)
    (("--decode", "1000000000"), {"decode_tokens": 10**9}, InputError, "is absurdly large"),
    (("--decode", "1.5"), {"decode_tokens": 1.5}, InputError, "--decode '1.5' is not a whole number"),
    (("--prompt", "0", "--decode", "0"), {"prompt": 0, "decode": 0}, ScenarioError, "--prompt and --decode are both 0"),
    # 1,000 + 200,000 > DeepSeek-R1's max_position_embeddings of 163,840
    (("--decode", "200k"), {"decode": "200k"}, ScenarioError, "exceed deepseek-r1's maximum context"),
    (("-m", "no-such-model"), {"model": "no-such-model"}, InputError, "unknown model preset 'no-such-model'"),
    (("-g", "no-such-gpu"), {"hardware": "no-such-gpu"}, InputError, "no-such-gpu"),
    (("--engine", "bogus"), {"engine": "bogus"}, ScenarioError, "unknown engine 'bogus'"),
    (("--kv-dtype", "fp3"), {"kv_dtype_request": "fp3"}, ScenarioError, "fp3"),
    (("--weight-dtype", "fp3"), {"weight_dtype": "fp3"}, ScenarioError, "unknown weight dtype 'fp3'"),
    (("--weights", "642"), {"weights": "642"}, InputError, "--weights '642' has no unit"),
    (("--weights", "642Gb"), {"weights": "642Gb"}, InputError, "is in bits (Gb)"),
    (("--mtp-layers", "100"), {"mtp_layers": 100}, InputError, "--mtp-layers 100 is absurd"),   # MAX_MTP_LAYERS 64
    (("--mtp-layers", "-1"), {"mtp_layers": -1}, InputError, "--mtp-layers '-1' must be non-negative"),
    (("--max-model-len", "0"), {"max_model_len": 0}, InputError, "--max-model-len '0' must be positive"),
    (("--block-size", "0"), {"block_size": 0}, InputError, "--block-size 0 is out of range"),
    (("--host-link-gbs", "-3"), {"host_link_gbs": -3}, InputError, "must be a positive number of GB/s"),
    (("--host-link-gbs", "nan"), {"host_link_gbs": NAN}, InputError, "must be a positive number of GB/s"),
    (("--host-link-gbs", "0.001"), {"host_link_gbs": 0.001}, ScenarioError, "outside 0.01 .. 100,000 GB/s"),
    (("--host-link-gbs", "50Gb/s"), {"host_link_gbs": "50Gb/s"}, InputError, "is in bits"),
]
# memory options: a command that takes them (concurrency), with the engine that honours them
REFUSED_MEMORY: list[tuple[tuple[str, ...], dict[str, Any], type, str]] = [
    (("--kv-pool", "80Gb"), {"kv_pool": "80Gb"}, InputError, "--kv-pool '80Gb' is in bits"),
    (("--kv-pool", "80"), {"kv_pool": "80"}, InputError, "--kv-pool '80' has no unit"),
    (("--kv-pool", "-1GiB"), {"kv_pool": "-1GiB"}, InputError, "is not a size"),
    # the h200 preset's HBM: nvidia-smi's 143,771 MiB = 140.40 GiB
    (("--kv-pool", "200GiB"), {"kv_pool": "200GiB"}, ScenarioError, "more than the h200's 140.4 GiB of HBM"),
    (("--engine", "vllm", "--gpu-memory-utilization", "1.5"), {"engine": "vllm", "gpu_memory_utilization": 1.5},
     InputError, "--gpu-memory-utilization '1.5' is not in (0, 1]"),
    (("--engine", "vllm", "--gpu-memory-utilization", "nan"), {"engine": "vllm", "gpu_memory_utilization": NAN},
     InputError, "--gpu-memory-utilization 'nan' is not in (0, 1]"),
    (("--engine", "vllm", "--gpu-memory-utilization", "0"), {"engine": "vllm", "gpu_memory_utilization": 0},
     InputError, "--gpu-memory-utilization '0' is not in (0, 1]"),
    (("--engine", "vllm", "--mem-fraction-static", "0.9"), {"engine": "vllm", "mem_fraction_static": 0.9},
     ScenarioError, "--mem-fraction-static is not a setting of --engine vllm"),
    (("--engine", "vllm", "--max-num-seqs", "0"), {"engine": "vllm", "max_num_seqs": 0}, InputError,
     "--max-num-seqs '0' must be positive"),
    (("--runtime-reserve", "-2GiB"), {"runtime_reserve": "-2GiB"}, InputError, "is not a size"),
    (("--spec-tokens", "2000"), {"spec_tokens": 2000}, InputError, "--spec-tokens 2,000 is absurd"),
    (("--shared-prefix", "2k"), {"shared_prefix": "2k"}, ScenarioError, "--shared-prefix 2,000 is longer than"),
    (("--draft-model", "no-such-model"), {"draft_model": "no-such-model"}, InputError, "no-such-model"),
]


def _python_error(kwargs: dict[str, Any]) -> KvplanError:
    with pytest.raises(KvplanError) as info:
        kvplan.Scenario(**kwargs)
    return info.value


SIZE_REFUSES = ("--host-link-gbs", "--block-size", "--weights", "--weight-dtype")


@pytest.mark.parametrize("args,kwargs,kind,words", REFUSED + [(("concurrency",) + a, k, c, w)
                                                              for a, k, c, w in REFUSED_MEMORY])
def test_python_and_the_command_line_refuse_alike(run_cli, args, kwargs, kind, words):
    # size refuses --host-link-gbs, --block-size, --weights and --weight-dtype whatever their value (they change
    # nothing there): concurrency reads them
    command = () if args[0] == "concurrency" else ("concurrency",) if args[0] in SIZE_REFUSES else ("size",)
    r = run_cli(*command, *args)
    err = _python_error(kwargs)
    assert type(err) is kind
    assert words in err.message, err.message
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == err.one_line()   # the same line, fix hint included


def test_a_plan_file_refuses_what_the_flag_refuses(tmp_path, run_cli):
    """A plan's deployment goes through the same parsers: the flag's message, in the plan's key and line."""
    plan = tmp_path / "p.toml"
    plan.write_text('[deployment]\nmodel = "deepseek-r1"\ndecode = "3z"\n\n[[assert]]\nmetric = "weights_fit"\n')
    r = run_cli("check", str(plan))
    assert r.code == 2
    assert r.err.strip() == f"error: {plan}:3: deployment.decode '3z' is not a number of tokens (fix: write it like " \
                            "30000, 30k or 128Ki)"


def test_scenario_from_strings_equals_scenario_from_specs():
    text = kvplan.Scenario(model="qwq-32b", hardware="h100-sxm", gpus=2, decode="32k")
    typed = kvplan.Scenario(model=load_model("qwq-32b"), hardware=load_hardware("h100-sxm"), gpus=2,
                            decode_tokens=32000)
    assert text == typed
    assert text == build_scenario(model="qwq-32b", hardware="h100-sxm", gpus="2", decode="32k")
    assert text.decode_tokens == 32_000 and text.parallelism.tp == 2   # TP default: the 2 GPUs planned
    # positional specs, as before
    assert kvplan.Scenario(load_model("qwq-32b"), load_hardware("h100-sxm"), gpus=2, decode_tokens=32000) == typed


def test_no_arguments_is_the_command_lines_default_scenario():
    s = kvplan.Scenario()
    # the workload document's: DeepSeek-R1 on one 8-GPU H200 node, 1,000 + 30,000 tokens
    assert (s.model.id, s.hardware.id, s.planned_gpus, s.prompt_tokens, s.decode_tokens) == (
        "deepseek-r1", "h200", 8, 1000, 30000)
    assert s == build_scenario()


@pytest.mark.parametrize("kwargs,field,expected", [
    ({"kv_pool": "40GiB"}, "kv_pool_bytes", 40 * 2**30),             # 42,949,672,960
    ({"kv_pool_bytes": "52.36GiB"}, "kv_pool_bytes", round(52.36 * 2**30)),
    ({"prompt": "128Ki"}, "prompt_tokens", 131_072),                 # 128 x 1,024
    ({"decode": "1.5k"}, "decode_tokens", 1_500),
    ({"decode_tokens": "30000"}, "decode_tokens", 30_000),
    ({"weights": "642GB"}, "weights_bytes", 642 * 10**9),
    # a whole number of bytes from Python (at least DeepSeek-R1's 671e9 params x 4 bits = 335.5e9 B: user29)
    ({"weights_bytes": 400 * 10**9}, "weights_bytes", 400 * 10**9),
    ({"activation_reserve": "2GiB"}, "activation_reserve_bytes", 2 * 2**30),
    ({"runtime_reserve_bytes": 0}, "runtime_reserve_bytes", 0),
    ({"host_link_gbs": "50GB/s"}, "host_link_gbs", 50.0),
    ({"host_link_gbs": "25"}, "host_link_gbs", 25.0),
    ({"tp": "4", "dp": "2"}, "tp", 4),
    ({"mtp_layers": "1"}, "mtp_layers", 1),
])
def test_unit_strings_in_python(kwargs, field, expected):
    assert getattr(kvplan.Scenario(**kwargs), field) == expected


def test_an_option_name_and_its_field_both_given_is_refused():
    with pytest.raises(InputError, match="prompt and prompt_tokens both given"):
        kvplan.Scenario(prompt="2k", prompt_tokens=3000)


def test_a_model_that_is_no_spec_or_name_is_refused():
    with pytest.raises(InputError, match="--model 5 is not a preset id, a file or a ModelSpec"):
        kvplan.Scenario(model=5)


def test_with_keeps_reading_user_values():
    s = kvplan.Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, dp=1, gpus=1)
    assert s.with_(kv_pool_bytes="10GiB").kv_pool_bytes == 10 * 2**30
    with pytest.raises(InputError, match="--kv-pool '10' has no unit"):
        s.with_(kv_pool_bytes="10")
    # option names too: the field the option sets changes, whatever it held (1,000 + 30,000 -> 1,000 + 32,000)
    assert s.with_(decode="32k").decode_tokens == 32_000
    assert s.with_(kv_dtype="fp8").kv_dtype.value == "fp8"


# --- simulate: the same checks from Python (kvplan.options.simulate) and the command line ---------------
LLAMA = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1", "--gpus", "1", "--decode", "1k")
SIM_REFUSED: list[tuple[tuple[str, ...], dict[str, Any], str]] = [
    (("--rate", "0.5", "--users", "4"), {"rate": 0.5, "users": 4}, "--rate and --users are two ways"),
    (("--rate", "0.5", "--think", "5"), {"rate": "0.5", "think": 5}, "--think is the closed loop's pause"),
    (("--rate", "nan"), {"rate": NAN}, "--rate 'nan' is not a finite number"),
    (("--users", "-2"), {"users": -2}, "--users '-2' must be positive"),
    (("--duration", "-1"), {"duration": -1}, "--duration '-1' is not a time in (0, 1e9] s"),
    (("--max-len", "200k"), {"max_len": "200k"}, "--max-len 200,000 is above the engine's limit of 131,072"),
    (("--max-recompute-rate", "0.1"), {"max_recompute_rate": 0.1}, "are the targets of a --sweep-rate"),
    (("--sweep-rate", "1:2:3", "--rate", "1"), {"sweep_rate": "1:2:3", "rate": 1}, "--rate does not combine"),
    (("--policy", "bogus"), {"policy": "bogus"}, "unknown preemption policy 'bogus'"),
    (("--max-batch", "0"), {"max_batch": 0}, "--max-batch '0' must be positive"),
    (("--offload-threshold", "1.5"), {"offload_threshold": 1.5}, "--offload-threshold 1.5 is not in (0, 1)"),
    (("--plot", "x.svg"), {"plot": "x.svg"}, "--plot x.svg is not a .png file"),
    (("--workload", "r1-production", "--prompt-dist", "fixed:1k"),
     {"workload": "r1-production", "prompt_dist": "fixed:1k"}, "--workload sets the length distributions"),
]


@pytest.mark.parametrize("args,kwargs,words", SIM_REFUSED)
def test_simulate_refuses_alike_from_python_and_the_command_line(run_cli, args, kwargs, words):
    from kvplan.options.simulate import simulate_request

    r = run_cli("simulate", *LLAMA, "--requests", "4", *args)
    scenario = kvplan.Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, dp=1, gpus=1, decode="1k")
    with pytest.raises(KvplanError) as info:
        simulate_request(scenario, requests=4, **kwargs)
    assert words in info.value.message, info.value.message
    assert r.code == 2 and r.err.strip() == info.value.one_line()


def test_simulate_request_from_python_values():
    """Numbers and text alike: 4 requests of fixed 1,000 + 1,000 tokens, Poisson at 0.5/s, seed 7."""
    from kvplan.options.simulate import simulate_request

    scenario = kvplan.Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, dp=1, gpus=1, decode="1k")
    run = simulate_request(scenario, rate=0.5, requests="4", seed=7, dram="1TB", policy="swap")
    assert list(run.workload.prompts) == [1000] * 4 and list(run.workload.outputs) == [1000] * 4
    assert run.workload.users is None and run.rate == 0.5 and run.seed == 7
    assert run.options.dram_bytes_per_node == 10**12 and run.options.policy == "swap"
    assert run.given == {"requests": True, "seed": True, "users": False, "think": False}
    # a closed loop of the default 8 users when no arrivals are given
    assert simulate_request(scenario, requests=4).workload.users == 8
