"""SGLang's ``--moe-a2a-backend`` (kvplan/engines/sglang.py, MOE_A2A_*): the default mem_fraction_static by release
with DeepEP's reserve and the prefill CUDA graphs an all-to-all backend turns off, the refusals, the launch flag.

The figures are hand arithmetic from the release wheels' reserve (arg_groups/memory_hook.py @v0.5.23,
server_args.py @v0.5.14-v0.5.18): H100's CUDA-visible 79.65 GiB is 81,561.6 MB; Qwen3-30B-A3B (MoE, GQA, not MLA)
at --tp 4 --ep 4: chunked prefill 8,192 and decode max_bs 512 (TP >= 4) in the 60-90 GB bucket, so
reserved = 512 + 8,192 x 1.5 + 4 / 8 x 1,024 + 512 x 2 = 14,336 MB before any prefill CUDA graph, and the 58
prefill graph sizes up to 8,192 tokens add 58 x 8 = 464 MB (14,800). The 10,240 MB floor does not bind.
"""

from __future__ import annotations

import pytest

from kvplan.scenario import Scenario

H100_MB = 79.65 * 1024


def fraction(release: str, backend: str | None, model: str = "qwen3-30b-a3b") -> float:
    s = Scenario(model=model, hardware="h100-sxm", tp=4, pp=1, dp=1, ep=4, nodes=1, engine=f"sglang=={release}",
                 moe_a2a_backend=backend, prompt=1000, decode=1000)
    return s.engine_adapter.memory_fraction(s, s.parallelism).value


def by_hand(reserved_mb: float) -> float:
    return round((H100_MB - reserved_mb) / H100_MB, 3)


@pytest.mark.parametrize("release, backend, reserved", [
    # v0.5.23 without a backend: 14,336 + 464 = 14,800 -> 0.819
    ("0.5.23", None, 14_800), ("0.5.23", "none", 14_800),
    # deepep: breakable prefill graphs stay on (v0.5.17+), + 1,024 for DeepEP under them (before the floor), and
    # + 2,048 after the floor (reserve_for_deepep_a2a_mb): 14,800 + 1,024 + 2,048 = 17,872 -> 0.781
    ("0.5.23", "deepep", 17_872), ("0.5.17", "deepep", 17_872),
    # mooncake is off the v0.5.17+ breakable-graph list (none, deepep, megamoe, flashinfer): no prefill graphs,
    # nothing reserved for it: 14,336 -> 0.824; flashinfer keeps the graphs and reserves nothing: 14,800
    ("0.5.23", "mooncake", 14_336), ("0.5.23", "flashinfer", 14_800),
    # v0.5.15-v0.5.16 turn breakable graphs off for any backend; the 2 GiB after the floor is there from v0.5.15:
    # 14,336 + 2,048 = 16,384 -> 0.799
    ("0.5.16", "deepep", 16_384), ("0.5.15", "deepep", 16_384), ("0.5.16", None, 14_800),
    # v0.5.14: piecewise graphs (on without a backend) off with one, and no DeepEP reserve yet: 14,336 -> 0.824
    ("0.5.14", "deepep", 14_336), ("0.5.14", None, 14_800),
])
def test_the_default_fraction_with_an_all_to_all_backend_by_release(release, backend, reserved):
    assert fraction(release, backend) == by_hand(reserved)


def test_the_hand_figures_are_the_printed_fractions():
    # the by-hand values above, as SGLang would print them
    assert (by_hand(14_800), by_hand(17_872), by_hand(16_384), by_hand(14_336)) == (0.819, 0.781, 0.799, 0.824)


def test_a_given_fraction_is_kept_with_deepep():
    s = Scenario(model="qwen3-30b-a3b", hardware="h100-sxm", tp=4, dp=1, ep=4, nodes=1, engine="sglang",
                 moe_a2a_backend="deepep", mem_fraction_static=0.8, prompt=1000, decode=1000)
    assert s.engine_adapter.memory_fraction(s, s.parallelism).value == 0.8


def test_the_report_names_the_deepep_buffer_when_it_is_given():
    # Qwen3-30B-A3B (hidden 2,048, 128 experts): DeepEP's low-latency buffer (test_pool_prediction's layout
    # arithmetic): dispatch 16 + 4,096 = 4,112 B, combine 64 + 4,096 = 4,160 B; send max(128 x 4,112,
    # 128 x 128 x 4,160 = 68,157,440); receive 68,157,440; signalling 512; 2 x 136,315,392 = 272,630,784, + 128
    # -> 272,630,912 B, within the 2 GiB v0.5.23 reserves
    s = Scenario(model="qwen3-30b-a3b", hardware="h100-sxm", tp=4, dp=1, ep=4, nodes=1, engine="sglang",
                 moe_a2a_backend="deepep", prompt=1000, decode=1000)
    b = s.engine_adapter.budget(s, s.sized_model, s.parallelism)
    rep = s.engine_adapter.report(s, s.sized_model, s.parallelism, b.kv_pool_bytes, None)
    assert rep.data["sglang_deepep_buffer_bytes"].number() == 272_630_912
    assert ("DeepEP buffer (--moe-a2a-backend deepep; outside the pool)", rep.data["sglang_deepep_buffer_bytes"]) \
        in rep.rows
    assert not any("DeepEP's buffer exceeds" in n for n in rep.notes)


BASE = ("concurrency", "-m", "qwen3-30b-a3b", "-g", "h100-sxm", "--tp", "4", "--dp", "1")


@pytest.mark.parametrize("args, words", [
    (("--ep", "4", "--engine", "vllm", "--moe-a2a-backend", "deepep"),
     "--moe-a2a-backend is not a setting of --engine vllm"),
    (("--ep", "4", "--engine", "neutral", "--moe-a2a-backend", "deepep"),
     "--moe-a2a-backend is not a setting of --engine neutral"),
    (("--ep", "4", "--engine", "sglang", "--moe-a2a-backend", "deepepp"), "'deepepp' is not SGLang's"),
    (("--engine", "sglang", "--moe-a2a-backend", "deepep"), "give --ep 4"),
    (("--ep", "4", "--engine", "sglang==0.4.8", "--moe-a2a-backend", "mooncake"),
     "sglang==0.4.8 has no --moe-a2a-backend mooncake"),
])
def test_bad_all_to_all_settings_are_refused_in_one_line(run_cli, args, words):
    res = run_cli(*BASE, *args)
    assert res.code == 2 and not res.out and "Traceback" not in res.err
    assert len(res.err.strip().splitlines()) == 1 and words in res.err, res.err


def test_a_dense_model_is_refused(run_cli):
    res = run_cli("concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "4", "--dp", "1", "--engine",
                  "sglang", "--moe-a2a-backend", "deepep")
    assert res.code == 2 and "llama-3.1-8b is dense" in res.err and len(res.err.strip().splitlines()) == 1
    # none is SGLang's default and fits any model
    assert run_cli("concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "4", "--dp", "1", "--engine",
                   "sglang", "--moe-a2a-backend", "none", "-f", "json").code == 0


def test_deepep_on_a_release_before_the_flag_is_its_old_switch():
    # v0.4.6-v0.4.10 spell DeepEP --enable-deepep-moe (server_args.py @v0.4.10; --moe-a2a-backend from v0.5.0rc0)
    s = Scenario(model="qwen3-30b-a3b", hardware="h100-sxm", tp=4, dp=1, ep=4, nodes=1, engine="sglang==0.4.8",
                 moe_a2a_backend="deepep", prompt=1000, decode=1000)
    # no reserve for it before v0.5.15: v0.4.8's bucket, round((79.65 - 9.5 - 4 / 2) / 79.65, 3) = 0.856
    assert s.engine_adapter.memory_fraction(s, s.parallelism).value == 0.856


@pytest.mark.parametrize("release, flag", [("0.5.23", "--moe-a2a-backend deepep"), ("0.4.8", "--enable-deepep-moe")])
def test_the_launch_command_carries_the_backend(run_cli, release, flag):
    res = run_cli(*BASE, "--ep", "4", "--engine", f"sglang=={release}", "--moe-a2a-backend", "deepep")
    assert res.code == 0, res.err
    rec = run_cli("recommend", "-m", "qwen3-30b-a3b", "-g", "h100-sxm", "--tp", "4", "--dp", "1", "--ep", "4",
                  "--engine", f"sglang=={release}", "--moe-a2a-backend", "deepep", "--emit", "sglang", "-f", "json")
    assert rec.code == 0, rec.err
    assert flag in rec.out
