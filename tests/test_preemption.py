"""`kvplan compare-preemption`: swap vs recompute, pinned by hand arithmetic and the workload document."""

import csv
import io

import pytest

from kvplan.calc.costs import CostSettings
from kvplan.calc.preemption import plan_preemption, swap_copies
from kvplan.errors import KvplanError
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.specs.dtypes import KVDtype
from kvplan.specs.hardware import NodeSpec
from kvplan.specs.model import Sourced

H200 = load_hardware("h200")


def without_overheads(hw):
    """The GPU with no fixed per-step overheads: the arithmetic of the workload document's table and of the
    crossover tests below, which price a recompute as F / (MFU x peak) alone."""
    from dataclasses import replace

    eff = replace(hw.efficiency, overhead_us_per_layer=Sourced(value=1e-9, source="test"),
                  overhead_us_per_step=Sourced(value=1e-9, source="test"),
                  overhead_us_per_moe_layer=Sourced(value=1e-9, source="test"))
    return replace(hw, efficiency=eff)


H200_BARE = without_overheads(H200)


GIB = 2**30
COSTS = {"mfu", "compute_dtype", "layout", "copy_overhead_us", "bidir_factor", "sync_swap"}
RENAMED = {"generated_tokens": "decode_tokens", "pcie_gb_s": "host_link_gbs", "block_tokens": "block_size"}


def run(model="deepseek-r1", kv_dtype=KVDtype.FP8, hardware=H200, tp=8, prefix_hit_tokens=0, sweep=None, **kw):
    """The compare-preemption JSON document (raw numbers), built as the CLI builds it."""
    import json

    from kvplan.calc.preemption import DEFAULT_SWEEP
    from kvplan.present.preemption import present
    from kvplan.render.output import to_json
    from kvplan.scenario import Scenario

    kw.setdefault("generated_tokens", 20_000)   # the command's default: preempted after 20k generated tokens
    settings = CostSettings(**{k: v for k, v in kw.items() if k in COSTS})
    scenario = Scenario(model=load_model(model), hardware=hardware, kv_dtype_request=kv_dtype, tp=tp, dp=1,
                        **{RENAMED.get(k, k): v for k, v in kw.items() if k not in COSTS})
    plan = plan_preemption(scenario, settings, prefix_hit_tokens, sweep or DEFAULT_SWEEP)
    return json.loads(to_json(present(plan)))


# --- swap bytes and copies ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_deepseek_r1_swap_bytes_are_the_whole_latent_at_any_tp(tp):
    # 61 layers x 576 B (fp8 latent, whole on every TP rank) x 21,000 tokens = 737,856,000 B per GPU.
    # A 40 GiB pool is given: R1's weights do not fit on 1 or 2 H200s, and only the swap bytes matter here.
    data = run(tp=tp, prompt_tokens=1000, generated_tokens=20_000, kv_pool_bytes=40 * GIB)
    assert data["context_tokens"] == 21_000
    assert data["swap_bytes_per_gpu"] == 61 * 576 * 21_000 == 737_856_000
    # the host tier holds the block-rounded request, as concurrency sizes it: ceil(21,000 / 64) = 329 blocks =
    # 21,056 tokens x 35,136 B = 739,823,616 B, one shard on each of the tp GPUs of the node
    assert data["host_bytes_per_node"] == tp * 739_823_616


def test_weights_that_do_not_fit_are_refused():
    # R1 fp8 on one H200: 671e9 B of weights > 0.9 x 140.4 GiB (135.7e9 B): as concurrency refuses it.
    with pytest.raises(KvplanError, match="does not fit"):
        run(tp=1)


def test_llama_8b_bf16_tp8_swap_bytes_are_one_head_per_rank():
    # 32 layers x 1 KV head per rank (8 heads / TP 8) x (128 + 128) x 2 B = 16,384 B/token; x 21,000.
    data = run("llama-3.1-8b", KVDtype.BF16, tp=8)
    assert data["swap_bytes_per_gpu"] == 16_384 * 21_000 == 344_064_000


def test_copy_counts_by_layout():
    r1, llama = load_model("deepseek-r1"), load_model("llama-3.1-8b")
    # contiguous: one copy per block across all layers: ceil(21,000 / 64) = 329.
    assert swap_copies(r1, 21_000, 64, "contiguous") == 329
    # per-layer: ceil(21,000 / 16) = 1,313 blocks x 61 layers x 1 tensor (the MLA latent) = 80,093.
    assert swap_copies(r1, 21_000, 16, "per-layer") == 80_093
    # GQA per-layer: 1,313 blocks x 32 layers x 2 tensors (K and V apart) = 84,032.
    assert swap_copies(llama, 21_000, 16, "per-layer") == 84_032
    # Sliding-window layers hold only their window: gpt-oss 18 full x ceil(1000/16)=63 x 2
    # + 18 sliding x ceil(128/16)=8 x 2 = 2,268 + 288 = 2,556.
    assert swap_copies(load_model("gpt-oss-120b"), 1000, 16, "per-layer") == 2_556


def test_default_block_is_64_for_mla_16_otherwise():
    assert run()["block_tokens"] == 64                      # FlashMLA pages of 64
    assert run("llama-3.1-8b", KVDtype.BF16)["block_tokens"] == 16   # vLLM DEFAULT_BLOCK_SIZE


# --- the seed case, by hand ----------------------------------------------------------------------------------


def test_seed_case_numbers():
    data = run()   # deepseek-r1, fp8 KV, 1k prompt + 20k generated, H200, TP=8
    # Link: 64 GB/s x 0.87 = 55.68 GB/s; x 0.83 with both directions busy = 46.2144 GB/s.
    # Swap each way: 329 copies x 2.3 us + 737,856,000 B / 46.2144e9 B/s = 0.0007567 + 0.0159660 = 0.0167227 s.
    assert data["host_link_bytes_per_second"] == pytest.approx(55.68e9)
    assert data["swap_in_seconds"] == pytest.approx(0.0167227, rel=1e-4)
    assert data["swap_out_seconds"] == data["swap_in_seconds"]
    assert data["swap_exposed_seconds"] == data["swap_in_seconds"]          # swap-out is asynchronous
    assert data["swap_batch_stall_gpu_seconds"] == 0
    # Idle link: 0.0007567 + 737,856,000 / 55.68e9 = 0.0007567 + 0.0132517 = 0.0140084 s.
    assert data["swap_in_seconds_idle_link"] == pytest.approx(0.0140084, rel=1e-4)
    # Recompute: 2 x 36,624,596,992 x 21,000 + 4,997,120 x 21,000^2 / 2
    #   = 1.538233e15 + 1.101865e15 = 2.640098e15 FLOP; the matmuls at fp8 (R1 ships fp8 weights; H200 fp8 1,979
    #   TFLOP/s): 1.538233e15 / (0.45 x 1,979e12 x 8 = 7.1244e15) = 0.215910 s; MLA's attention core at bf16
    #   (costs.MLA_BF16_SOURCE): 1.101865e15 / (0.45 x 989e12 x 8 = 3.56040e15) = 0.309478 s (every chunk is
    #   compute-bound), in ceil(21,000 / 8,192) = 3 chunks, each with the step's fixed overhead: 61 layers x 15 us +
    #   58 MoE layers x 21 us + 450 us = 2.583 ms -> 0.007749 s; plus the chunks' TP8 all-reduces (not overlapped):
    #   2 per layer of 2 x 7/8 x 7,168 x 2 B = 25,088 B per token at 450 GB/s x 0.82 (large messages), latency
    #   9.3 us each: 61 x (3 x 18.6 us + 21,000 x 0.135978 us) = 0.177592 s -> 0.710729 s (the one prefill price)
    assert data["compute_dtype"] == "fp8"
    assert data["recompute_flops"] == pytest.approx(2.640098e15, rel=1e-6)
    assert data["recompute_seconds"] == pytest.approx(0.710729, rel=1e-5)
    assert data["batch_stall_gpu_seconds"] == pytest.approx(8 * 0.710729, rel=1e-5)
    # 0.710729 / 0.0167227 = 42.501
    assert data["recompute_over_swap"] == pytest.approx(42.501, rel=1e-3)
    assert data["cheaper"] == "swap" and data["crossover_context_tokens"] is None
    # Break-even: 737,856,000 / (0.83 x (0.710729 - 329 x 2.3e-6)) = 737,856,000 / 0.589277 = 1.2521 GB/s.
    assert data["breakeven_host_link_bytes_per_second"] == pytest.approx(1.2521e9, rel=1e-3)
    # Host DRAM: 2,000 GB / (739,823,616 B block-rounded x 8 GPUs) = 337.9 -> 337 requests (concurrency's count).
    assert data["host_dram_requests_fit"] == 337 and data["host_dram_fits"] is True
    assert data["recommendation"].startswith("Swap first, recompute last")


def test_breakeven_rate_makes_the_two_equal():
    data = run()
    at_breakeven = run(pcie_gb_s=data["breakeven_host_link_bytes_per_second"] / 1e9)
    assert at_breakeven["recompute_over_swap"] == pytest.approx(1.0, rel=1e-9)


def test_sync_swap_exposes_and_stalls_both_directions():
    data = run(sync_swap=True)
    assert data["swap_exposed_seconds"] == pytest.approx(2 * data["swap_in_seconds"])
    assert data["swap_batch_stall_gpu_seconds"] == pytest.approx(2 * data["swap_in_seconds"] * 8)


def test_prefix_hit_reduces_recompute():
    # Llama-3.1-8B, S = 21,000, h = 1,000, bf16 at 989 TFLOP/s, MFU 0.45, TP 8:
    # 2 x 7,504,658,432 x 20,000 + 524,288 x (21,000^2 - 1,000^2) / 2 = 3.0018634e14 + 1.1534336e14 = 4.155297e14
    # in ceil(20,000 / 8,192) = 3 chunks, each with 32 x 15 us + 450 us = 0.93 ms of fixed overhead, plus the chunks'
    # TP8 all-reduces: 2 per layer of 2 x 7/8 x 4,096 x 2 B = 14,336 B per token at 450 GB/s x 0.82 (large
    # messages), latency 9.3 us each: 32 x (3 x 18.6 us + 20,000 x 0.077702 us) = 0.051515 s
    data = run("llama-3.1-8b", KVDtype.BF16, prefix_hit_tokens=1000)
    assert data["recompute_flops"] == pytest.approx(4.155297e14, rel=1e-6)
    comm = 32 * (3 * 18.6e-6 + 20_000 * 2 * 2 * 7 / 8 * 4096 * 2 / (450e9 * 0.82))
    assert data["recompute_seconds"] == pytest.approx(4.155297e14 / (0.45 * 989e12 * 8) + 3 * 0.93e-3 + comm,
                                                      rel=1e-6)


def test_compute_dtype_auto_falls_back_to_bf16():
    assert run("llama-3.1-8b", KVDtype.BF16)["compute_dtype"] == "bf16"        # bf16 weights
    # no fp8 peak on A100 (a given pool: R1's weights do not fit on 8 A100s)
    assert run(hardware=load_hardware("a100-80gb"), kv_pool_bytes=40 * GIB)["compute_dtype"] == "bf16"
    assert run(compute_dtype="bf16")["peak_flops_per_second_per_gpu"] == 989e12


# --- the workload document's table as an oracle --------------------------------------------------------------

# preemption-pd-workload.md §2.5: BW 50 GB/s per direction, MFU 0.5, H100/H200 peaks, T_rc = full re-prefill,
# T_sw = one direction of the whole model's KV (per-GPU equivalent: TP=1), no per-copy overhead.
# (model, KV dtype, S, recompute seconds as printed, swap seconds as printed, ratio as printed)
TABLE_2_5 = [
    ("deepseek-r1", KVDtype.BF16, 2_048, 0.162, 0.0029, 56),
    ("deepseek-r1", KVDtype.BF16, 9_216, 0.897, 0.013, 69),
    ("deepseek-r1", KVDtype.BF16, 31_744, 4.9, 0.045, 110),
    ("deepseek-r1", KVDtype.BF16, 65_536, 15.7, 0.092, 170),
    ("llama-3.1-8b", KVDtype.BF16, 2_048, 0.064, 0.0054, 12),
    ("llama-3.1-8b", KVDtype.BF16, 9_216, 0.325, 0.024, 13),
    ("llama-3.1-8b", KVDtype.BF16, 31_744, 1.5, 0.083, 18),
    ("llama-3.1-8b", KVDtype.BF16, 65_536, 4.3, 0.172, 25),
    ("qwen3-32b", KVDtype.BF16, 2_048, 0.274, 0.011, 26),
    ("qwen3-32b", KVDtype.BF16, 65_536, 17.6, 0.344, 51),
    ("llama-3.1-70b", KVDtype.BF16, 2_048, 0.587, 0.013, 44),
    ("llama-3.1-70b", KVDtype.BF16, 65_536, 29.8, 0.430, 69),
]


def _printed_tolerance(value: float) -> float:
    """Half a unit of the last digit the document printed (2-3 significant figures), or 0.5%."""
    digits = 3 if value >= 100 or (0.1 <= value < 1) else 2
    text = f"{value:.{digits}g}"
    decimals = len(text.split(".")[1]) if "." in text else 0
    return max(0.5 * 10 ** -decimals, 0.005 * value)


@pytest.mark.parametrize("model_id, dtype, s, t_rc, t_sw, ratio", TABLE_2_5)
def test_reproduces_the_workload_document_table(model_id, dtype, s, t_rc, t_sw, ratio):
    # The document's per-GPU-equivalent arithmetic at TP=1; a given pool stands in for the weights, which do not
    # fit on one H100 for the large models. Its T_rc is compute alone, F / (MFU x peak): kvplan's
    # recompute adds the weight reads of each chunk (a 671B model on one GPU would be memory-bound), so the oracle
    # checks kvplan's FLOP count through that formula, and the swap time directly.
    data = run(model_id, dtype, hardware=without_overheads(load_hardware("h100-sxm")), tp=1, prompt_tokens=0,
               generated_tokens=s, pcie_gb_s=50, mfu=0.5, copy_overhead_us=0, bidir_factor=1, sweep=(s,),
               kv_pool_bytes=40 * GIB,
               max_model_len=65_536)   # the document prices Qwen3-32B at 64K, past its 40,960-token limit
    compute = data["recompute_flops"] / (0.5 * data["peak_flops_per_second_per_gpu"])   # fp8 for R1, else bf16
    assert abs(compute - t_rc) <= _printed_tolerance(t_rc)
    assert data["recompute_seconds"] >= compute * (1 - 1e-9)       # never faster than its compute
    assert abs(data["swap_in_seconds"] - t_sw) <= _printed_tolerance(t_sw)
    # Ratios are printed as whole numbers and were taken from the rounded times: half a unit, or 3%.
    assert abs(compute / data["swap_in_seconds"] - ratio) <= max(0.5, 0.03 * ratio)


# --- the crossover moves the right way ------------------------------------------------------------------------

# Llama-3.1-8B bf16 at TP=8 with the old per-layer, 16-token layout: 4 small copies per token (32 layers x K, V
# per 16 tokens -> 4 x 2.3 us = 9.2 us/token) make swap slower than recompute at short contexts; the S^2 term
# of recompute overtakes around 72K tokens: recompute/token = (2 N + A S / 2) / (0.45 x 989e12 x 8) = 9.55 us
# at S ~ 72.5K.
SMALL_BLOCKS = dict(model="llama-3.1-8b", kv_dtype=KVDtype.BF16, tp=8, layout="per-layer", block_tokens=16,
                    hardware=H200_BARE)


def test_crossover_exists_and_is_the_flip_point():
    data = run(**SMALL_BLOCKS)
    x = data["crossover_context_tokens"]
    assert 35_000 < x < 40_000      # 37,703 since prefill20c priced the re-prefill's TP8 all-reduces
    rows = {r["context_tokens"]: r["cheaper"] for r in run(**SMALL_BLOCKS, sweep=(x - 1 - 1000, x - 1000))["sweep"]}
    assert (rows[x - 1], rows[x]) == ("recompute", "swap")
    assert data["cheaper"] == "recompute"           # at 21,000 tokens


def test_slower_link_moves_the_crossover_up():
    xs = [run(**SMALL_BLOCKS, pcie_gb_s=bw)["crossover_context_tokens"] for bw in (40, 20, 10)]
    assert xs[0] < xs[1] < xs[2]


def test_higher_mfu_moves_the_crossover_up():
    xs = [run(**SMALL_BLOCKS, mfu=m)["crossover_context_tokens"] for m in (0.3, 0.45)]
    assert xs[0] < xs[1]
    assert xs[1] < run(**SMALL_BLOCKS, mfu=0.6)["crossover_context_tokens"]
    assert run(**SMALL_BLOCKS, mfu=0.8)["crossover_context_tokens"] is None   # recompute wins across the table


def test_more_attention_per_token_moves_the_crossover_down():
    # Same KV bytes per token (64 layers x 8 KV heads x 128) and ~the same N_mm (31.98 B), but Qwen3-32B has 64
    # query heads (A = 4 x 64 x 64 x 128) against QwQ-32B's 40: its S^2 term grows faster.
    kw = {k: v for k, v in SMALL_BLOCKS.items() if k != "model"}
    # at MFU 0.8: at 0.45 the re-prefill's TP8 all-reduces (prefill20c) keep swap cheaper at every context for both
    qwen3 = run("qwen3-32b", **kw, mfu=0.8)["crossover_context_tokens"]
    qwq = run("qwq-32b", **kw, mfu=0.8)["crossover_context_tokens"]
    assert qwen3 < qwq


def test_ratio_grows_with_context_and_shrinks_with_tp_for_mla():
    rows = run(hardware=H200_BARE)["sweep"]
    ratios = [r["recompute_over_swap"] for r in rows]
    assert ratios == sorted(ratios)
    # with the fixed per-chunk overhead (2.583 ms per chunk on R1 at H200) a short recompute is relatively dearer, so
    # the ratio is flat from 2K to 3K (15.40 -> 15.31: one chunk each, the overhead's share falls) before the S^2 term
    # makes it grow (16.09 at 6K, 22.62 at 21K)
    real = [r["recompute_over_swap"] for r in run()["sweep"]]
    assert real[1:] == sorted(real[1:]) and abs(real[1] / real[0] - 1) < 0.01 < real[2] / real[1]
    # MLA: swap bytes per GPU are the same at any TP, recompute divides by TP.
    assert run(tp=1, kv_pool_bytes=40 * GIB)["recompute_over_swap"] > run(tp=8)["recompute_over_swap"]


def test_slow_link_or_no_host_memory_flips_to_recompute():
    assert run(pcie_gb_s=0.5)["cheaper"] == "recompute"      # below the seed case's 1.25 GB/s break-even
    from dataclasses import replace

    tiny = replace(H200, node=NodeSpec(gpus_per_node=8,
                                       host_dram_gb=Sourced(value=4, source="test: 4 GB host")))
    data = run(hardware=tiny)
    assert data["host_dram_fits"] is False and data["cheaper"] == "recompute"
    assert data["recommendation"].startswith("Recompute: swapping is impossible")


def test_host_dram_unknown_is_reported_as_null():
    data = run(hardware=load_hardware("h20"))
    assert data["host_dram_bytes_per_node"] is None and data["host_dram_requests_fit"] is None


@pytest.mark.parametrize("kw, match", [
    (dict(mfu=0), "MFU"), (dict(mfu=1.2), "MFU"), (dict(prefix_hit_tokens=21_000), "prefix hit"),
    (dict(layout="diagonal"), "layout"), (dict(bidir_factor=0), "bidirectional"),
    (dict(compute_dtype="fp4"), "no dense fp4"), (dict(prompt_tokens=0, generated_tokens=0), "both 0"),
])
def test_bad_requests_are_user_errors(kw, match):
    with pytest.raises(KvplanError, match=match):
        run(**kw)


# --- the CLI ----------------------------------------------------------------------------------------------


def test_no_arguments_prints_the_seed_table(run_cli):
    r = run_cli("compare-preemption", "--kv-dtype", "fp8", "--units", "si")
    assert r.code == 0, r.err
    assert "21,000" in r.out and "737.86 MB" in r.out and "Swap first" in r.out
    assert "What flips the choice" in r.out


def test_json_contract(run_cli):
    r = run_cli("compare-preemption", "--format", "json")
    assert r.code == 0, r.err
    data = r.json()
    for key in ("context_tokens", "swap_bytes_per_gpu", "swap_out_seconds", "swap_in_seconds", "recompute_flops",
                "recompute_seconds", "batch_stall_gpu_seconds", "recompute_over_swap", "crossover_context_tokens",
                "sweep", "derivations"):
        assert key in data, key
    assert data["crossover_context_tokens"] is None
    # No arguments: deepseek-r1 with the engines' default KV dtype (auto = bf16, the same as -m deepseek-r1):
    # 61 layers x 1,152 B x 21,000 tokens.
    assert data["kv_dtype"] == "bf16" and data["kv_dtype_auto"] is True
    assert data["swap_bytes_per_gpu"] == 61 * 1152 * 21_000 == 1_475_712_000
    # Rows: G = 1k, 2k, 5k, 10k, 20k, 50k, 100k after a 1k prompt.
    assert [row["context_tokens"] for row in data["sweep"]] == [2000, 3000, 6000, 11000, 21000, 51000, 101000]


def test_pins_and_csv(run_cli):
    r = run_cli("compare-preemption", "-m", "llama-3.1-8b", "--pcie-gbps", "25GB/s", "--mfu", "0.5",
                "--block-tokens", "16", "--layout", "per-layer", "--prefix-hit", "1k", "-f", "json")
    data = r.json()
    assert data["host_link_bytes_per_second"] == 25e9 and data["mfu"] == 0.5 and data["layout"] == "per-layer"
    assert data["kv_dtype"] == "bf16" and data["prefix_hit_tokens"] == 1000
    c = run_cli("compare-preemption", "-f", "csv")
    lines = c.out.splitlines()
    assert lines[0].startswith("# deepseek-r1 on 8 x h200")        # the deployment line, as a CSV comment
    rows = list(csv.reader(io.StringIO("\n".join(lines[1:]))))
    # raw numbers, units in the header: 1,000 generated tokens after a 1,000-token prompt, 2,000 tokens of KV
    assert rows[0][:3] == ["generated G (tokens)", "context S (tokens)", "KV/GPU (bytes)"] and len(rows) == 8
    assert rows[1][:3] == ["1000", "2000", str(61 * 1152 * 2000)]   # bf16 latent: 61 x 1,152 B x 2,000 tokens


def test_explain_shows_the_arithmetic(run_cli):
    r = run_cli("compare-preemption", "--kv-dtype", "fp8", "--explain")
    assert r.code == 0
    assert "2 x 128 x (128 + 64 + 128) = 81,920" in r.out
    assert "61 x 576 x 21,000 = 737,856,000 B" in r.out
    assert "github.com/taco-project/FlexKV/pull/193" in r.out     # the per-copy overhead's public source


@pytest.mark.parametrize("args, needle", [
    (("--mfu", "0"), "--mfu"),
    (("--mfu", "1.5"), "--mfu"),
    (("--mfu", "fast"), "--mfu"),
    (("--generated", "-5"), "--generated"),
    (("--hardware", "h300"), "unknown hardware preset"),
    (("--prefix-hit", "21k"), "prefix hit"),
    (("--pcie-gbps", "-3"), "--host-link-gbs"),     # the old name is an alias of --host-link-gbs
])
def test_bad_input_is_one_line_exit_2(run_cli, args, needle):
    r = run_cli("compare-preemption", *args)
    assert r.code == 2
    assert r.err.startswith("error:") and needle in r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
