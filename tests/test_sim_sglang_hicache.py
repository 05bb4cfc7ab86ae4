"""``kvplan simulate --engine sglang --enable-hierarchical-cache``: SGLang v0.5.23's HiCache host tier
(``kvplan/engines/sglang_scheduler.py``, ``_HiTree``) against the independent token-by-token reference
(``tests/sim_reference_sglang.py``, rule 7) over workloads that retract and that hit host-resident prefixes, and
hand-worked cases (the host pool's size, a load-back's price and what it saves)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sim_reference_sglang as ref  # tests/ is on sys.path (rootdir-less test modules)
from test_sim_sglang import CASES, LLAMA, R1, SMALL, assert_same, hash_work, scenario

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.engines.sglang_scheduler import HiCache
from kvplan.errors import KvplanError
from kvplan.inputs import workload as wl
from kvplan.inputs.traces import PrefixBlocks


def both(s, w, hc: HiCache, ref_hc: dict, **opts):
    """The engine's run and the reference's, checked equal (with the HiCache figures)."""
    fast = sim.simulate(s, w, sim.SimOptions(**opts, hicache=hc))
    slow = ref.run(s, w, max_batch=opts.get("max_batch"), victim=opts.get("victim"), hicache=ref_hc)
    assert_same(fast, slow)
    st = fast.hicache
    np.testing.assert_array_equal(st["host_hit_tokens"], slow.column("host_hit_tokens"))
    assert (st["host_blocks"], st["written_blocks"], st["peak_host_blocks"]) == (
        slow.host_blocks, slow.written_blocks, slow.peak_host_blocks)
    return fast, slow


# retracting workloads (tests/test_sim_sglang.py's cases) with a large and a small host pool
@pytest.mark.parametrize("case", ["llama", "shared-prefix", "radix-closed-loop", "radix-open"])
@pytest.mark.parametrize("ratio", [2.0, 0.3])
def test_hicache_on_retracting_workloads_equals_the_reference(case, ratio):
    base, pool, prefix, opts, make, _ = CASES[case]
    s = scenario(base, pool, prefix)
    w = make()
    fast, _ = both(s, w, HiCache(ratio=ratio), {"ratio": ratio}, **opts)
    # (radix-open's 2,000-3,000-token prompts are each more than a 0.3 x pool of 1,920 blocks: no write fits)
    assert fast.preemptions.sum() > 0 and (fast.hicache["written_blocks"] > 0) == (ratio == 2.0 or case != "radix-open")
    off = sim.simulate(s, w, sim.SimOptions(**opts))
    hits = int(sum(fast.hicache["host_hit_tokens"]))
    if case in ("llama", "shared-prefix", "radix-closed-loop") and ratio == 2.0:
        # victims' paths demoted to host memory come back as loads: fewer recomputed tokens than without HiCache
        assert hits > 0 and fast.recomputed.sum() < off.recomputed.sum()
    if hits == 0:     # nothing came back from host memory: the same run as without HiCache
        np.testing.assert_array_equal(fast.recomputed, off.recomputed)
        np.testing.assert_allclose(fast.finish, off.finish, rtol=1e-12)


@pytest.mark.parametrize("seed, kw", [(0, {"rate": 20}), (0, {"users": 8}), (2, {"rate": 20}), (2, {"users": 8})])
@pytest.mark.parametrize("hc, ref_hc", [(HiCache(), {}), (HiCache(ratio=0.5), {"ratio": 0.5}),
                                        (HiCache(size_gb=0.3), {"size_gb": 0.3})])
def test_hicache_with_shared_hash_chains_equals_the_reference(seed, kw, hc, ref_hc):
    s = scenario(LLAMA, "1250MiB")
    fast, _ = both(s, hash_work(50, seed, **kw), hc, ref_hc)
    assert fast.prefix_hit_tokens.sum() > 0 and fast.preemptions.sum() > 0


def test_prompts_hit_host_resident_prefixes_in_the_hash_chains():
    # a 2x host pool keeps the chains the device evicted: prompts load them back, fewer tokens are computed
    s = scenario(LLAMA, "1250MiB")
    w = hash_work(50, 0, rate=20)
    fast, _ = both(s, w, HiCache(), {})
    off = sim.simulate(s, w)
    assert sum(fast.hicache["host_hit_tokens"]) > 1000 and fast.hicache["load_seconds"] > 0
    assert fast.prefix_hit_tokens.sum() > off.prefix_hit_tokens.sum()
    assert fast.recomputed.sum() + (fast.prompts - fast.prefix_hit_tokens).sum() < \
        off.recomputed.sum() + (off.prompts - off.prefix_hit_tokens).sum()


def test_hicache_on_64_token_pages_equals_the_reference():
    s = scenario(dict(R1, hardware="b200"), "600MiB", "150")
    fast, _ = both(s, hash_work(40, 10, users=6), HiCache(), {})
    assert fast.setup.block_tokens == 64 and fast.preemptions.sum() > 0


def test_the_mooncake_sample_with_hicache_equals_the_reference():
    # the first 100 rows of tests/data/traces/mooncake_300.jsonl at 3x their rate on a 3 GiB pool (~24.6K
    # tokens): the device evicts shared chains, the 2x host pool keeps them for later prompts
    trace = wl.read_trace(Path(__file__).parent / "data" / "traces" / "mooncake_300.jsonl")
    one = wl.parse_dist("fixed:1", "x")
    w = wl.build(requests=100, seed=0, prompt=one, output=one, max_len=10**6, trace=trace, trace_speed=3)
    fast, _ = both(scenario(LLAMA, "3GiB"), w, HiCache(), {})
    assert fast.prefix_hit_tokens.sum() > 0 and sum(fast.hicache["host_hit_tokens"]) > 0


def test_write_through_selective_writes_nothing_in_kvplans_tree():
    # threshold 2 (init_hicache): a node is written at its second insert, and kvplan's tree inserts each node once
    base, pool, prefix, opts, make, _ = CASES["radix-closed-loop"]
    s = scenario(base, pool, prefix)
    w = make()
    fast, _ = both(s, w, HiCache(write_policy="write_through_selective"), {"policy": "write_through_selective"})
    off = sim.simulate(s, w)
    assert fast.hicache["written_blocks"] == 0 and sum(fast.hicache["host_hit_tokens"]) == 0
    np.testing.assert_array_equal(fast.recomputed, off.recomputed)


# --- hand-worked ----------------------------------------------------------------------------------------------
def test_the_host_pool_is_a_ratio_of_the_device_pool_or_a_size_in_gb():
    # Llama-3.1-8B BF16 on H100: 128 KiB per token, 1-token pages; a 1250 MiB pool holds 1250 x 8 = 10,000 blocks.
    # --hicache-ratio 2 (the default): 20,000 tokens of host pool; 0.3: 3,000; --hicache-size 1 (GB):
    # 1e9 // 131,072 = 7,629 tokens (pool_host/base.py: host_size x 1e9 // size_per_token); from v0.5.6 SGLang
    # allocates size // page_size + 1 pages (pool_host/base.py @v0.5.23 HostKVCache.__init__): one page more each.
    s = scenario(LLAMA, "1250MiB")
    w = hand_work([100], [10], [0.0])
    for hc, blocks in ((HiCache(), 20_001), (HiCache(ratio=0.3), 3_001), (HiCache(size_gb=1), 7_630),
                       (HiCache(ratio=3, size_gb=1), 7_630)):
        assert sim.simulate(s, w, sim.SimOptions(hicache=hc)).hicache["host_blocks"] == blocks


def test_the_host_pool_rounds_to_pages_and_adds_one_from_v0_5_6():
    # The same pool in 64-token pages (--block-size 64): 1250 MiB / (64 x 128 KiB) = 156.25 -> 156 pages = 9,984
    # tokens. Ratio 2: int(9,984 x 2) = 19,968 tokens = 312 pages exactly, + 1 padding page = 313 (v0.5.23);
    # ratio 1.5: 14,976 = 234 pages, 235. --hicache-size 1: 1e9 // 131,072 = 7,629 tokens -> 7,629 // 64 = 119
    # pages (7,616 tokens) + 1 = 120 from v0.5.6; v0.5.5 rounds down only (memory_pool_host.py @v0.5.5:
    # size - size % page_size): 119, and 312 for ratio 2.
    s = scenario(dict(LLAMA, block_size="64"), "1250MiB")
    w = hand_work([100], [10], [0.0])
    for hc, blocks in ((HiCache(), 313), (HiCache(ratio=1.5), 235), (HiCache(size_gb=1), 120)):
        assert sim.simulate(s, w, sim.SimOptions(hicache=hc)).hicache["host_blocks"] == blocks
    for release, pad in (("0.5.5", 0), ("0.5.6", 1)):
        pinned = scenario(dict(LLAMA, block_size="64", engine=f"sglang=={release}"), "1250MiB")
        for hc, blocks in ((HiCache(), 312), (HiCache(size_gb=1), 119)):
            assert sim.simulate(pinned, w, sim.SimOptions(hicache=hc)).hicache["host_blocks"] == blocks + pad


def hand_work(prompts, outputs, arrivals, blocks=None):
    return wl.Workload(np.array(prompts, dtype=np.int64), np.array(outputs, dtype=np.int64),
                       np.array(arrivals, dtype=float), None, 0.0, None, "hand-written", blocks=blocks)


def test_a_prefix_demoted_to_host_memory_is_loaded_back():
    # A 10,000-token pool. A: blocks [1, 2], 1,000 tokens + 50 out, at t = 0; it finishes and the tree holds its
    # 1,049 tokens (chain nodes 0..512 and 512..1,000, its own segment 1,000..1,049), each written through to host
    # memory at its insert. B: blocks [7 .. 25], 9,500 tokens + 10 out, at 5 s: 9,500 + 10 + 1 < 10,000 admits it;
    # its allocation leaves 10,000 - 9,500 = 500 blocks for A's 1,049, so eviction takes A's leaves, least recently
    # used first: its own segment (49), node 2 (488), node 1 (512): demoted (backed), not deleted. C: blocks [1, 2],
    # 1,000 tokens + 50, at 10 s (B done): its match is A's chain on host, 1,000 tokens, capped at 999 (the last
    # token is computed): 999 >= 10 tokens, loaded back: its 1,000 blocks over the host link, costs.swap_seconds
    # (1,000 x 128 KiB, a copy per block), the prefill of its last token overlapping it (the longer of the two).
    # Without HiCache the device eviction deletes A's nodes and C computes all 1,000 tokens.
    ids = [1, 2] + list(range(7, 26)) + [1, 2]
    blocks = PrefixBlocks(np.array(ids), np.array([0, 2, 21, 23]))
    w = hand_work([1000, 9500, 1000], [50, 10, 50], [0.0, 5.0, 10.0], blocks)
    s = scenario(LLAMA, "1250MiB")
    on = sim.simulate(s, w, sim.SimOptions(hicache=HiCache()))
    off = sim.simulate(s, w)
    assert on.finish[1] < 10.0 and on.preemptions.sum() == 0
    assert list(on.prefix_hit_tokens) == [0, 0, 999] and list(off.prefix_hit_tokens) == [0, 0, 0]
    assert on.hicache["host_hit_tokens"] == [0, 0, 999] and on.hicache["loaded_blocks"] == 1000
    settings = costs.CostSettings()
    link = float(costs.host_link_rate(s.hardware).value)
    load = 1000 * settings.copy_overhead_us * 1e-6 + 1000 * 131072 / (link * settings.bidir_factor)
    sm = costs.step_model(s)
    assert on.hicache["load_seconds"] == pytest.approx(load, rel=1e-12)
    assert on.first_token[2] - on.admitted[2] == pytest.approx(max(load, sm.prefill_seconds(1000, 999, 8192)),
                                                                rel=1e-12)
    assert off.first_token[2] - off.admitted[2] == pytest.approx(sm.prefill_seconds(1000, 0, 8192), rel=1e-12)
    # written through: A's 1,049 blocks, B's 9,509, C's own segment 1,000..1,049 after its finish (49)
    assert on.hicache["written_blocks"] == 1049 + 9509 + 49
    both(s, w, HiCache(), {})


@pytest.mark.parametrize("prompt_a, hit, loaded", [(520, 512, 0), (522, 522, 10)])
def test_a_host_hit_under_10_tokens_is_recomputed(prompt_a, hit, loaded):
    # A: blocks [1, 2], 520 tokens + 50: the tree holds node 1 (0..512), node 2 (512..520) and its own segment
    # (520..569), all written through. B: 19 blocks of its own, 9,485 tokens + 1 (done at its prefill): its
    # allocation leaves 10,000 - 9,485 = 515 blocks for A's 569, a shortfall of 54: A's own segment (49) then
    # node 2 (8) are demoted to host memory, node 1 stays on the device. C: blocks [1, 2], 600 tokens: node 1 on
    # the device (512 tokens), node 2 on host: a host hit of 8 tokens, under load_back_threshold's 10, so it is
    # computed again (into node 2): C's hit is 512 tokens, nothing loaded, as without HiCache. With A at 522
    # tokens (its cache 571, the shortfall 56 takes its segment's 49 and node 2's 10), the host hit is 10 tokens:
    # loaded back, a hit of 522.
    ids = [1, 2] + list(range(7, 26)) + [1, 2]
    blocks = PrefixBlocks(np.array(ids), np.array([0, 2, 21, 23]))
    w = hand_work([prompt_a, 9485, 600], [50, 1, 5], [0.0, 5.0, 10.0], blocks)
    s = scenario(LLAMA, "1250MiB")
    on = sim.simulate(s, w, sim.SimOptions(hicache=HiCache()))
    off = sim.simulate(s, w)
    assert list(on.prefix_hit_tokens) == [0, 0, hit] and list(off.prefix_hit_tokens) == [0, 0, 512]
    assert on.hicache["loaded_blocks"] == loaded and on.hicache["host_hit_tokens"] == [0, 0, hit - 512]
    both(s, w, HiCache(), {})


# --- what the run says, and what it refuses -------------------------------------------------------------------
def test_the_run_names_hicache_and_its_figures(run_cli):
    data = run_cli(*SMALL, "--enable-hierarchical-cache", "-f", "json").json()
    assert any(n.startswith("HiCache (write_through): a host pool of 2 x the device pool") for n in data["notes"])
    assert data["hicache_host_pool_bytes"] == (2 * 10_000 + 1) * 131072   # + the padding page (v0.5.6+)
    assert data["hicache_written_bytes"] > 0
    # SGLang's default write policy is write_through from v0.5.2, write_through_selective before (server_args.py)
    for release, policy in (("0.5.1", "write_through_selective"), ("0.5.2", "write_through")):
        args = [a if a != "sglang" else f"sglang=={release}" for a in SMALL]
        notes = run_cli(*args, "--enable-hicache", "-f", "json").json()["notes"]
        assert any(n.startswith(f"HiCache ({policy})") for n in notes)
    off = run_cli(*SMALL, "-f", "json").json()
    assert "hicache_written_bytes" not in off


def test_compare_hicache_on_and_off(run_cli):
    res = run_cli(*SMALL, "--compare", "hicache=on,hicache=off", "-f", "json")
    assert res.code == 0, res.err


def test_a_compare_hicache_variant_keeps_the_given_host_pool(run_cli):
    # the base run's --hicache-ratio 4 holds for its variants: a variant changes the policy, not the host pool
    # (4 x the 10,000-block device pool of 131,072 B blocks, as the run above has 2 x, + the padding page)
    data = run_cli(*SMALL, "--enable-hicache", "--hicache-ratio", "4", "--compare",
                   "hicache=on,hicache=write_through_selective", "-f", "json").json()
    assert [r["hicache_host_pool_bytes"] for r in data["compare"]] == [(4 * 10_000 + 1) * 131072] * 3
    sized = run_cli(*SMALL, "--enable-hicache", "--hicache-size", "2", "--compare", "hicache=on", "-f", "json").json()
    assert [r["hicache_host_pool_bytes"] for r in sized["compare"]] == [(2e9 // 131072 + 1) * 131072] * 2


@pytest.mark.parametrize("args, words", [
    (("--hicache-ratio", "3"), "add --enable-hierarchical-cache"),
    (("--enable-hicache", "--hicache-write-policy", "write_back"), "write_back"),
    (("--enable-hicache", "--hicache-write-policy", "lru"), "not SGLang's"),
    (("--enable-hicache", "--hicache-ratio", "0"), "(0, 1000]"),
    (("--enable-hicache", "--hicache-size", "-1"), "--hicache-size"),
    # a --compare value that is neither on, off nor a policy names the variant and its choices
    (("--compare", "hicache=maybe"), "--compare hicache value 'maybe' is not on, off or an SGLang write policy"),
])
def test_bad_hicache_options_are_refused_in_one_line(run_cli, args, words):
    res = run_cli(*SMALL, *args)
    assert res.code == 2 and not res.out and "Traceback" not in res.err
    lines = [ln for ln in res.err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0]


def test_a_host_pool_larger_than_the_host_dram_is_refused(run_cli):
    # SGLang allocates the host pool whole at start-up and does not start without the host memory for it: 2 x the
    # 10,000-block pool of 131,072 B blocks is 2.44 GiB per GPU; --dram 8GB on 8 GPUs a node leaves 0.93 GiB each
    res = run_cli(*SMALL, "--enable-hicache", "--dram", "8GB")
    assert res.code == 2 and not res.out and "Traceback" not in res.err
    line = res.err.strip()
    assert len(line.splitlines()) == 1 and "host pool of 2.44 GiB per GPU is more than the 0.93 GiB" in line, line
    # the same pool within 24 GB a node (2.79 GiB per GPU) runs
    assert run_cli(*SMALL, "--enable-hicache", "--dram", "24GB").code == 0


@pytest.mark.parametrize("ratio, said", [("1", False), ("0.9999", True), ("0.5", True), ("1.01", False),
                                         ("2", False)])
def test_a_host_pool_no_larger_than_the_device_pool_is_noted(run_cli, ratio, said):
    # SGLang v0.5.23 warns when the host pool (ratio x the 10,000-block device pool, + its padding page) is not
    # larger than the device pool; earlier releases assert it: the run says so instead of modelling it silently.
    # Ratio 1: 10,000 + 1 = 10,001 pages, larger; 0.9999: int(9,999.0) + 1 = 10,000, not larger
    notes = run_cli(*SMALL, "--enable-hicache", "--hicache-ratio", ratio, "-f", "json").json()["notes"]
    assert any(n.startswith("HiCache's host pool (") and "is not larger than the device pool (10,000)" in n
               for n in notes) == said


def test_hicache_is_sglangs_and_needs_the_radix_tree(run_cli):
    args = [a if a != "sglang" else "vllm" for a in SMALL]
    res = run_cli(*args, "--enable-hicache")
    assert res.code == 2 and "SGLang's host tier" in res.err
    with pytest.raises(KvplanError, match="sliding windows or state layers"):
        sim.simulate(scenario(CASES["gpt-oss-120b"][0], "60MiB"), CASES["gpt-oss-120b"][4](),
                     sim.SimOptions(hicache=HiCache()))


def test_a_load_back_longer_than_its_pass_prices_the_pass_and_ends_with_it():
    # The demotion case above with 4,000-token prompts A and C (blocks 1..8, 512 tokens each; B, 9,500 tokens on
    # blocks 100..118, evicts A's whole chain to host memory), and D, a 100-token prompt of its own, at 10.2 s.
    # C's host hit is 3,999 tokens (the last is computed): 4,000 blocks loaded back over the host link,
    # 4,000 x copy overhead + 4,000 x 128 KiB / (link x its two-direction factor) = 20.5 ms on the H100 preset,
    # longer than the pass it overlaps (one token over 3,999 cached, 6.44 ms): C's pass costs the load, 20.5 ms.
    # D's round comes after C's, with nothing to load: its pass is its own prefill alone, the load gone with C's pass.
    ids = list(range(1, 9)) + list(range(100, 119)) + list(range(1, 9)) + [200]
    blocks = PrefixBlocks(np.array(ids), np.array([0, 8, 27, 35, 36]))
    w = hand_work([4000, 9500, 4000, 100], [50, 10, 50, 5], [0.0, 5.0, 10.0, 10.2], blocks)
    s = scenario(LLAMA, "1250MiB")
    on = sim.simulate(s, w, sim.SimOptions(hicache=HiCache()))
    settings = costs.CostSettings()
    link = float(costs.host_link_rate(s.hardware).value)
    load = 4000 * settings.copy_overhead_us * 1e-6 + 4000 * 131072 / (link * settings.bidir_factor)
    sm = costs.step_model(s)
    assert list(on.prefix_hit_tokens) == [0, 0, 3999, 0] and on.hicache["loaded_blocks"] == 4000
    assert load == pytest.approx(0.0205, abs=5e-4) and sm.prefill_seconds(4000, 3999, 8192) < load / 3
    assert on.first_token[2] - on.admitted[2] == pytest.approx(load, rel=1e-12)
    assert on.first_token[3] - on.admitted[3] == pytest.approx(sm.prefill_seconds(100, 0, 8192), rel=1e-12)
    both(s, w, HiCache(), {})
