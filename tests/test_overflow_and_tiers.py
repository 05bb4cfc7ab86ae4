"""Overflow timing, admission on prompt cost, shared-prefix rounding and the host tiers, pinned with numbers
worked out by hand (arithmetic in the comments), through ``kvplan concurrency`` / ``compare-preemption``
``--format json``.

The model is llama-3.1-8b at bf16, TP 1: 32 layers x 8 KV heads x (128 + 128) x 2 B = 131,072 B (128 KiB) per
token, held in 16-token blocks, so a block is 2 MiB. The hardware is a preset written here, so that its link
(64 GB/s x 0.87 large-copy efficiency = 55.68e9 B/s device-to-host) and node (8 GPUs, host DRAM as given) are
the test's own figures.
"""

from __future__ import annotations

import pytest
from conftest import write_hardware  # the one hand-written GPU preset of the tests

GIB = 2**30
MIB = 2**20
TOKEN = 131_072
D2H = 64e9 * 0.87




def concurrency(run_cli, tmp_path, *args: str, hw: str | None = None) -> dict:
    r = run_cli("concurrency", "-m", "llama-3.1-8b", "-g", hw or write_hardware(tmp_path), "--tp", "1",
                *args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


# --- overflow timing ----------------------------------------------------------------------------------------
def test_overflow_step_threshold_and_growth(run_cli, tmp_path):
    # Pool 1 GiB, 8 requests from a 1,000-token prompt. Step s holds 8 x cdiv(1000 + s, 16) x 2 MiB, more than
    # 1,024 MiB once cdiv(1000 + s, 16) > 64, i.e. from s = 25 (1,025 tokens -> 65 blocks).
    d = concurrency(run_cli, tmp_path, "--kv-pool", "1GiB", "--batch", "8", "--prompt", "1000", "--decode", "30000",
                    "--tpot", "5us")
    run = d["overflow"][0]
    assert run["batch"] == 8
    assert run["decode_steps_until_full"] == 25
    assert run["seconds_until_full"] == pytest.approx(25 * 5e-6)
    # growth per step = batch x marginal bytes per token per GPU = 8 x 131,072 = 1,048,576 B.
    assert run["growth_bytes_per_step"] == 8 * TOKEN
    # evicting the victim (65 blocks = 1,040 tokens x 131,072 = 136,314,880 B) at 55.68e9 B/s: 2.44818e-3 s.
    evict = 1040 * TOKEN / D2H
    assert run["evict_one_request_seconds"] == pytest.approx(evict, rel=1e-9)
    # threshold = 1 - growth x (evict / tpot) / pool = 1 - 1,048,576 x (2.44818e-3 / 5e-6) / 2^30
    #           = 1 - 0.478161 = 0.521839 (JSON carries the raw fraction).
    # (Without / tpot: 1.0; one step more: 0.5209; growth not x batch: 0.9402; link at 100 %: 0.5840.)
    assert run["offload_threshold_fraction"] == pytest.approx(1 - 8 * TOKEN * (evict / 5e-6) / GIB, rel=1e-9)
    assert run["offload_threshold_fraction"] == pytest.approx(0.521839, abs=1e-6)
    # 8 requests of 1,008 prompt tokens (126 MiB each) are all an engine admits into 1 GiB: no second run.
    assert len(d["overflow"]) == 1
    assert d["tiers"]["offload_threshold_fraction"] == run["offload_threshold_fraction"]


# --- what an engine admits on prompt cost ------------------------------------------------------------------
# admitted = min(max_num_seqs, usable pool // bytes of one request at step 0). A 16-token prompt is one block,
# 2 MiB: 1 GiB // 2 MiB = 512 (after one decode step it would be two blocks: 256).
@pytest.mark.parametrize("hw_id, extra, admitted", [
    ("test-gpu", (), 512),                          # >= 70 GiB, not A100: max_num_seqs 1024 does not bind
    ("a100-test", (), 256),                         # an A100: max_num_seqs 256 binds
    ("test-gpu", ("--max-num-seqs", "100"), 100),   # given max_num_seqs binds
])
def test_admitted_on_prompt_cost(run_cli, tmp_path, hw_id, extra, admitted):
    d = concurrency(run_cli, tmp_path, "--kv-pool", "1GiB", "--batch", "8", "--prompt", "16", "--decode", "1000",
                    *extra, hw=write_hardware(tmp_path, hw_id=hw_id))
    runs = d["overflow"]
    assert [r["batch"] for r in runs] == [8, admitted]
    # 8 requests: 8 x cdiv(16 + s, 16) x 2 MiB > 1 GiB needs 65 blocks each, i.e. 16 + s > 1,024: s = 1,009 >
    # 1,000 decode steps, so the batch of 8 never fills the pool.
    assert runs[0]["decode_steps_until_full"] is None
    # The admitted batch fills the pool as soon as any request needs a second block, at step 1 - unless
    # max_num_seqs held it to 256 or 100, which fill at 1 GiB / (256 x 2 MiB) = 2 blocks -> 3 (16 + s > 32: s = 17) and
    # 1 GiB / (100 x 2 MiB) = 5.12 blocks -> 6 blocks (16 + s > 80: s = 65).
    assert runs[1]["decode_steps_until_full"] == {512: 1, 256: 17, 100: 65}[admitted]
    assert runs[1]["growth_bytes_per_step"] == admitted * TOKEN


# --- shared prefix ------------------------------------------------------------------------------------------
# A 520-token shared prefix is floor(520 / 16) = 32 whole blocks = 512 tokens: one 64 MiB copy in the pool, and
# each request stops holding those 512 tokens. Usable pool: 1,024 - 64 = 960 MiB.
def test_shared_prefix_is_taken_off_each_request_in_whole_blocks(run_cli, tmp_path):
    # Request at 1,000 tokens: 1,000 - 512 = 488 -> 31 blocks = 62 MiB; 960 // 62 = 15 requests.
    # (Taking off all 520 tokens: 480 -> 30 blocks = 60 MiB and 16 requests.)
    d = concurrency(run_cli, tmp_path, "--kv-pool", "1GiB", "--prompt", "1000", "--decode", "0",
                    "--shared-prefix", "520")
    assert d["kv_bytes_per_request_per_gpu"] == 62 * MIB
    assert d["max_concurrency_per_replica"] == 15


def test_shared_prefix_copy_is_charged_in_whole_blocks(run_cli, tmp_path):
    # Request at 528 tokens: 528 - 512 = 16 -> one block, 2 MiB; 960 // 2 = 480 requests, and 480 admitted.
    # (A 520-token copy would be 33 blocks, 66 MiB: 958 // 2 = 479; admission on the whole pool: 512.)
    d = concurrency(run_cli, tmp_path, "--kv-pool", "1GiB", "--prompt", "528", "--decode", "0",
                    "--shared-prefix", "520")
    assert d["kv_bytes_per_request_per_gpu"] == 2 * MIB
    assert d["max_concurrency_per_replica"] == 480
    assert [r["batch"] for r in d["overflow"]] == [8, 480]


# --- host tiers ---------------------------------------------------------------------------------------------
# One request at 1,000 + 30,000 tokens: cdiv(31,000, 16) = 1,938 blocks = 31,008 tokens x 131,072
# = 4,064,280,576 B per GPU.
REQUEST = 31_008 * TOKEN


def test_l2_host_dram_is_the_node_share_of_each_gpu(run_cli, tmp_path):
    # One rule in every command: the node's host DRAM; a TP=1 request parks one shard on the node.
    # 400 GB / 8 GPUs = 50e9 B per GPU; 400e9 // 4,064,280,576 = 98 requests per node.
    d = concurrency(run_cli, tmp_path, "--kv-pool", "40GiB", hw=write_hardware(tmp_path, host_dram_gb=400))
    assert d["kv_bytes_per_request_per_gpu"] == REQUEST
    assert d["tiers"]["l2_dram_bytes_per_node"] == 400_000_000_000
    assert d["tiers"]["l2_dram_bytes_per_gpu"] == 50_000_000_000
    assert d["tiers"]["l2_requests"] == 98


def test_l2_does_not_depend_on_the_hbm_pool(run_cli, tmp_path):
    # 2,000 GB // 4,064,280,576 = 492 requests per node, whatever the HBM pool (the old 2 x pool cap is gone:
    # compare-preemption and concurrency size the tier the same way).
    hw = write_hardware(tmp_path, host_dram_gb=2000)
    big = concurrency(run_cli, tmp_path, "--kv-pool", "40GiB", hw=hw)
    small = concurrency(run_cli, tmp_path, "--kv-pool", "20GiB", hw=hw)
    assert big["tiers"]["l2_requests"] == small["tiers"]["l2_requests"] == 492


def test_given_dram_and_ssd_are_per_node_split_over_its_gpus(run_cli, tmp_path):
    # --dram 1TB per node: 1e12 / 8 = 125e9 B per GPU; 1e12 // 4,064,280,576 = 246 requests per node;
    # --ssd 8TB: 8e12 / 8 = 1e12 B per GPU; per node, as the DRAM tier: 8e12 // 4,064,280,576 = 1,968 requests
    # (1,968 x 4,064,280,576 = 7,998,504,173,568 <= 8e12).
    d = concurrency(run_cli, tmp_path, "--kv-pool", "40GiB", "--dram", "1TB", "--ssd", "8TB")
    tiers = d["tiers"]
    assert tiers["l2_dram_bytes_per_gpu"] == 125_000_000_000
    assert tiers["l2_requests"] == 246
    assert tiers["l3_ssd_bytes_per_gpu"] == 1_000_000_000_000
    assert tiers["l3_requests"] == 1968


# --- compare-preemption: host DRAM per node -----------------------------------------------------------------
# A request at TP t parks t shards; min(t, 8) of them sit on one node's host DRAM (2,000 GB here).
# The request: 1,000 prompt + 20,000 generated = 21,000 tokens; the swap bytes are not block-rounded, the host tier
# holds the block-rounded request as concurrency sizes it: ceil(21,000 / 16) = 1,313 blocks = 21,008 tokens.
@pytest.mark.parametrize("tp, shard, per_node, fit", [
    # TP 16: 8 // 16 -> 1 KV head per rank (replicated): 32 x 1 x 512 = 16,384 B/token; 21,000 x 16,384 =
    # 344,064,000 B swapped per GPU; 8 of its 16 shards per node: 8 x 16,384 x 21,008 = 2,753,560,576 B;
    # 2e12 // that = 726 (all 16: 363).
    (16, 344_064_000, 2_753_560_576, 726),
    # TP 2: 4 heads per rank: 32 x 4 x 512 = 65,536 B/token; 1,376,256,000 B per GPU; 2 shards per node:
    # 2 x 65,536 x 21,008 = 2,753,560,576 B; 726 (counting 8 shards: 181).
    (2, 1_376_256_000, 2_753_560_576, 726),
])
def test_preemption_host_dram_counts_the_shards_on_one_node(run_cli, tmp_path, tp, shard, per_node, fit):
    nodes = str(-(-tp // 8))   # TP 16 spans two nodes of 8
    r = run_cli("compare-preemption", "-m", "llama-3.1-8b", "--gpu", write_hardware(tmp_path), "--tp", str(tp),
                "--nodes", nodes, "--prompt", "1000", "--generated", "20000", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["swap_bytes_per_gpu"] == shard
    assert d["host_bytes_per_node"] == per_node
    assert d["host_dram_requests_fit"] == fit


# --- capacity.first_full_step: the first decode step that overfills the pool --------------------------------
def test_a_batch_that_overfills_on_its_prompt_is_full_at_step_0(run_cli, tmp_path):
    # 9 requests of a 1,000-token prompt: cdiv(1000, 16) = 63 blocks = 126 MiB each, 9 x 126 = 1,134 MiB > 1 GiB
    # before any decode step: step 0, 0 s (a search starting at step 1 would say 1).
    d = concurrency(run_cli, tmp_path, "--kv-pool", "1GiB", "--batch", "9", "--prompt", "1000", "--decode", "100")
    run = d["overflow"][0]
    assert run["decode_steps_until_full"] == 0
    assert run["seconds_until_full"] == 0


def test_a_batch_that_overfills_on_its_last_decode_step(run_cli, tmp_path):
    # The batch of test_overflow_step_threshold_and_growth fills 1 GiB at step 25; with exactly 25 decode steps
    # it still does (step 25 is the request's last token), so the step is 25, not "never".
    d = concurrency(run_cli, tmp_path, "--kv-pool", "1GiB", "--batch", "8", "--prompt", "1000", "--decode", "25")
    assert d["overflow"][0]["decode_steps_until_full"] == 25
    d = concurrency(run_cli, tmp_path, "--kv-pool", "1GiB", "--batch", "8", "--prompt", "1000", "--decode", "24")
    assert d["overflow"][0]["decode_steps_until_full"] is None


def test_the_first_full_step_counts_the_shared_prefix_copy(run_cli, tmp_path):
    # Shared prefix 520 -> 512 tokens in 32 whole blocks: one 64 MiB copy; each request holds 1,000 + s - 512
    # tokens. 8 x cdiv(488 + s, 16) x 2 MiB + 64 MiB > 1,024 MiB once cdiv(488 + s, 16) > 60, i.e. 488 + s > 960:
    # s = 473. (Without the copy: cdiv > 64, s = 537; counting a pool filled exactly to 1 GiB as full:
    # cdiv >= 60, 488 + s > 944, s = 457.)
    d = concurrency(run_cli, tmp_path, "--kv-pool", "1GiB", "--batch", "8", "--prompt", "1000", "--decode", "1000",
                    "--shared-prefix", "520")
    assert d["shared_prefix_copy_bytes"] == 64 * MIB
    assert d["overflow"][0]["decode_steps_until_full"] == 473


# --- capacity.fit: floor((pool - shared copy) / per request), never below 0 ----------------------------------
def test_fit_is_floored_and_never_negative():
    from kvplan.calc.capacity import fit

    assert fit(10 * MIB, 3 * MIB, 2 * MIB) == 2     # (10 - 2) // 3 = 2 (8 / 3 = 2.67 is not 3)
    assert fit(10 * MIB, 3 * MIB) == 3              # 10 // 3
    assert fit(16 * MIB, 2 * MIB, 124 * MIB) == 0   # the copy alone overfills the pool: 0, not (16 - 124) // 2


def test_a_shared_copy_larger_than_the_pool_leaves_no_request(run_cli, tmp_path):
    # Shared prefix = the whole 1,000-token prompt: floor(1000 / 16) = 62 blocks = 124 MiB in one copy, more
    # than the 16 MiB pool; each request keeps its last 8 tokens (one 2 MiB block). max(16 - 124, 0) // 2 = 0.
    d = concurrency(run_cli, tmp_path, "--kv-pool", "16MiB", "--prompt", "1000", "--decode", "0",
                    "--shared-prefix", "1000")
    assert d["shared_prefix_copy_bytes"] == 124 * MIB
    assert d["kv_bytes_per_request_per_gpu"] == 2 * MIB
    assert d["max_concurrency_per_replica"] == 0
    assert d["max_concurrency"] == 0


# --- capacity.host_tier: a request spans min(TP x PP, GPUs per node) GPUs of a node ---------------------------
def test_host_tier_counts_every_pipeline_stage_of_a_request(run_cli, tmp_path):
    # TP 1 x PP 2: the most loaded stage holds 16 of the 32 layers: 31,008 tokens (1,938 blocks) x 16 x 8 x 512 B
    # = 2,032,140,288 B per GPU, and both stages park their shard on the node: 4,064,280,576 B per request;
    # 2,000 GB // that = 492 (counting TP alone: 2e12 // 2,032,140,288 = 984).
    d = concurrency(run_cli, tmp_path, "--pp", "2", "--kv-pool", "40GiB")
    assert d["kv_bytes_per_request_per_gpu"] == 2_032_140_288
    assert d["tiers"]["l2_requests"] == 492


def test_preemption_host_dram_counts_the_pipeline_stages(run_cli, tmp_path):
    # compare-preemption at TP 1 x PP 2, 21,000 tokens: 16 x 8 x 512 x 21,000 = 1,376,256,000 B swapped per GPU;
    # the host tier, block-rounded (21,008 tokens): 2 shards x 16 x 8 x 512 x 21,008 = 2,753,560,576 B; 2e12 // that
    # = 726 (one shard: 1,452).
    r = run_cli("compare-preemption", "-m", "llama-3.1-8b", "--gpu", write_hardware(tmp_path), "--tp", "1",
                "--pp", "2", "--prompt", "1000", "--generated", "20000", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["swap_bytes_per_gpu"] == 1_376_256_000
    assert d["host_bytes_per_node"] == 2_753_560_576
    assert d["host_dram_requests_fit"] == 726
