"""``kvplan simulate --engine vllm``: vLLM V1's scheduler (kvplan/engines/vllm_scheduler.py), worked by hand on a
tiny pool, and the step price that mixes prefill chunks into a decode step (``StepModel.mixed_step``)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.errors import KvplanError
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario

# Llama-3.1-8B, BF16 KV, TP 1: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B per token, so a
# 16-token block is 2 MiB and a 20 MiB pool holds 10 blocks (config.json: huggingface.co/meta-llama/Llama-3.1-8B).
LLAMA = dict(model="llama-3.1-8b", hardware="h100-sxm", nodes="1", gpus=None, tp="1", pp="1", dp="1", ep=None,
             kv_dtype="auto", weight_dtype=None, prompt="1k", decode="1k", mtp_layers=None, max_model_len=None,
             block_size="16", host_link_gbs=None, presets_dir=None)


def tiny(engine: str = "vllm", **extra):
    """10 blocks of 16 tokens, a token budget of 64 per step (max_num_batched_tokens)."""
    return build_scenario(**LLAMA, engine=engine, kv_pool="20MiB", max_num_batched_tokens="64", **extra)


def at_zero(prompts, outputs):
    return wl.Workload(prompts=np.array(prompts), outputs=np.array(outputs), arrivals=np.zeros(len(prompts)),
                       users=None, think_s=0.0, duration_s=None, describe="hand-worked")


def decode(sm, contexts) -> float:
    """One decode step of requests reading these contexts (what the scheduler prices a plain step at)."""
    b = sum(float(sm.request_cache(float(c))[0]) for c in contexts)
    f = sum(float(sm.request_cache(float(c))[1]) for c in contexts)
    return sm.mixed_step(len(contexts), b, f)


def test_three_prompts_chunked_by_the_budget_by_hand():
    """A (100 tokens, 3 out), B (40, 2), C (20, 2) at 0 s; 10 blocks of 16; budget 64.
    step 1: A's first chunk, min(100, 64) = 64 tokens, 4 blocks (6 free); the budget is spent: B waits.
    step 2: A's last 36 (blocks for 100 tokens: 7, 3 more; 3 free): A's first token at its end; 28 of the budget
            left: B's first chunk of 28 tokens, 2 blocks (1 free).
    step 3: A decodes (reads 101; 101 tokens fit its 7 blocks); B's last 12 (blocks for 40: 3, 1 more; 0 free): B's
            first token. 51 of the budget left, but C's 20 tokens need 2 blocks: C waits.
    step 4: A (reads 102) and B (reads 41) decode: A has its 3 tokens and B its 2: both done, 10 blocks free.
    step 5: C's prompt, 20 tokens, 2 blocks: its first token.  step 6: C decodes (reads 21): done."""
    s = tiny()
    sm = costs.step_model(s)
    run = sim.simulate(s, at_zero([100, 40, 20], [3, 2, 2]), sim.SimOptions(max_batch=8))
    t1 = sm.mixed_step(0, 0.0, 0.0, [(0, 64)])
    t2 = sm.mixed_step(0, 0.0, 0.0, [(64, 100), (0, 28)])
    b101, f101 = (float(v) for v in sm.request_cache(101.0))
    t3 = sm.mixed_step(1, b101, f101, [(28, 40)])
    t4 = decode(sm, [102, 41])
    t5 = sm.mixed_step(0, 0.0, 0.0, [(0, 20)])
    t6 = decode(sm, [21])
    np.testing.assert_allclose(run.first_token, [t1 + t2, t1 + t2 + t3, t1 + t2 + t3 + t4 + t5], rtol=1e-12)
    np.testing.assert_allclose(run.finish, [t1 + t2 + t3 + t4] * 2 + [t1 + t2 + t3 + t4 + t5 + t6], rtol=1e-12)
    np.testing.assert_allclose(run.admitted, [0, t1, t1 + t2 + t3 + t4], rtol=1e-12)
    assert run.decode_steps == 6 and run.mixed_steps == 4
    assert run.mixed_prefill_tokens == 64 + (36 + 28) + 12 + 20
    assert run.preemptions.sum() == 0 and run.peak_blocks_used == 10 and run.setup.watermark_blocks == 0
    # the chunks' time over the same steps' decode alone: steps 1, 2, 5 have no decode token; step 3 has A's
    assert run.prefill_seconds == pytest.approx(t1 + t2 + t5 + t3 - decode(sm, [101]), rel=1e-12)


def test_a_preempted_request_finds_its_surviving_blocks_by_hand():
    """A (64 tokens, 40 out) and B (60, 40) at 0 s; 10 blocks of 16; budget 64.
    step 1: A's 64 tokens (4 blocks, 6 free; the budget is spent): A's first token.
    step 2: A decodes (blocks for 65: a 5th, 5 free); B's 60 tokens in the 63 left (4 blocks, 1 free): B's token.
    steps 3-17: both decode; at step 7 B reaches 64 computed and takes the last free block (it holds 5, to 80).
    step 18: A has 80 computed and needs a 6th block: none free, so the newest, B (75 computed, 16 generated),
            is preempted: its 5 blocks go to the free queue tail first (its partial 5th block first), its 4 full
            ones still cached; A takes the queue's front, B's partial block. No admission in this step.
    step 19: B would resume with a hit of 4 blocks (64 of its 76 tokens): 12 tokens, but blocks for 76 tokens are 5
            and 4 are free: it waits. At step 34 A (96 computed) takes the front again: B's 4th block is evicted.
    step 40: A has its 40 tokens: done, its 7 blocks freed.
    step 41: B's 3 surviving blocks hit (48 tokens): it computes 48..76, 28 tokens (27 of them it had computed:
            75 - 48), blocks for 76 = 5 of the 10 free; its 17th token at the step's end.
    steps 42-64: B decodes its 23 last tokens."""
    s = tiny()
    sm = costs.step_model(s)
    run = sim.simulate(s, at_zero([64, 60], [40, 40]), sim.SimOptions(max_batch=8))
    assert list(run.preemptions) == [0, 1]
    assert list(run.recomputed) == [0, 27] and list(run.recompute_hit_tokens) == [0, 48]
    assert run.decode_steps == 64 and run.mixed_steps == 3 and run.mixed_prefill_tokens == 64 + 60 + 28
    assert run.peak_running == 2
    t1 = sm.mixed_step(0, 0.0, 0.0, [(0, 64)])
    b65, f65 = (float(v) for v in sm.request_cache(65.0))
    t2 = sm.mixed_step(1, b65, f65, [(0, 60)])
    # before step k, A has generated k - 1 tokens (reads 64 + k - 1) and B k - 2 (reads 60 + k - 2)
    both = sum(decode(sm, [64 + k - 1, 60 + k - 2]) for k in range(3, 18))
    a_alone = sum(decode(sm, [64 + k - 1]) for k in range(18, 41))
    t41 = sm.mixed_step(0, 0.0, 0.0, [(48, 76)])
    b_alone = sum(decode(sm, [60 + 17 + j]) for j in range(23))     # B reads 77 .. 99
    np.testing.assert_allclose(run.first_token, [t1, t1 + t2], rtol=1e-12)
    assert run.finish[0] == pytest.approx(t1 + t2 + both + a_alone, rel=1e-12)
    assert run.finish[1] == pytest.approx(t1 + t2 + both + a_alone + t41 + b_alone, rel=1e-12)


def test_a_prompt_that_is_all_cached_computes_its_last_block():
    """A 32-token shared prefix (2 whole blocks of 16) and prompts of exactly 32 tokens: the first computes all 32;
    the second finds both blocks cached, but vLLM computes at least the last token (get_computed_blocks caps the
    hit at num_tokens - 1 = 31 tokens, in whole blocks: 16), so it computes 16 tokens."""
    s = tiny(shared_prefix="32")
    run = sim.simulate(s, at_zero([32, 32], [2, 2]), sim.SimOptions(max_batch=8))
    assert list(run.prefix_hit_tokens) == [0, 16]
    # step 1: the first prompt (32 tokens) and the second (16) share the 64-token budget
    assert run.mixed_steps == 1 and run.mixed_prefill_tokens == 32 + 16


def test_the_neutral_engine_keeps_its_rule_book_on_the_same_requests():
    """The same two requests under --engine neutral: A's prompt is prefilled alone (4 blocks), then B's (4 more:
    the watermark int(0.01 x 10) = 0 keeps none back); both have a token and decode together from there, step j
    taking A's cache to 64 + j and B's to 60 + j. Step 1 gives A a 5th block, step 5 B its 5th (the last free);
    step 17 takes A to 81 tokens, a 6th block: B (cache 76, 17 tokens) is preempted, and resumes only when A is
    done (blocks for its 76 tokens are 5; 4, then 3, are free): its whole cache, 76 tokens, is prefilled again
    alone: no prefix-cache hit, no mixed step."""
    s = tiny("neutral")
    run = sim.simulate(s, at_zero([64, 60], [40, 40]), sim.SimOptions(max_batch=8))
    assert run.mixed_steps == 0 and not run.mixed_prefill
    assert list(run.preemptions) == [0, 1]
    assert list(run.recomputed) == [0, 76] and run.recompute_hit_tokens.sum() == 0


def test_mixed_step_is_step_without_chunks_and_prefill_seconds_without_decode():
    s = tiny()
    sm = costs.step_model(s)
    b, f = (float(v) for v in sm.request_cache(500.0))
    assert sm.mixed_step(3, 3 * b, 3 * f) == float(sm.step(3, 3 * b, 3 * f)["total"])
    # a prompt of 100 tokens in chunks of 64 is two steps of one chunk each (prefill_seconds' own loop)
    assert sm.mixed_step(0, 0.0, 0.0, [(0, 64)]) + sm.mixed_step(0, 0.0, 0.0, [(64, 100)]) == pytest.approx(
        sm.prefill_seconds(100, 0, 64), rel=1e-12)
    # decode tokens add their attention term, per-token communication and per-request overhead to a chunk's pass
    d = sm.step(3, 3 * b, 3 * f)
    with_chunk = sm.mixed_step(3, 3 * b, 3 * f, [(0, 64)])
    assert with_chunk > sm.mixed_step(0, 0.0, 0.0, [(0, 64)])
    assert with_chunk < sm.mixed_step(0, 0.0, 0.0, [(0, 64)]) + float(d["total"])   # the weights are read once


def test_v1_refuses_swap_and_offload_and_a_batch_past_the_budget():
    s = tiny()
    work = at_zero([64, 60], [4, 4])
    with pytest.raises(KvplanError, match="no swap space") as err:
        sim.simulate(s, work, sim.SimOptions(policy="swap"))
    assert "vllm==0.7.3" in err.value.hint and "neutral" in err.value.hint
    with pytest.raises(KvplanError, match="no swap space"):
        sim.simulate(s, work, sim.SimOptions(policy="swap-then-recompute"))
    with pytest.raises(KvplanError, match="offloading connector"):
        sim.simulate(s, work, sim.SimOptions(offload_threshold=0.5))
    with pytest.raises(KvplanError, match="max_num_seqs 1,024 is more than max_num_batched_tokens 64"):
        sim.simulate(s, work)                          # vLLM's default 1,024 sequences over a 64-token budget


def test_a_pinned_v0_release_runs_the_rule_book_and_can_swap():
    s = tiny("vllm==0.7.3")
    run = sim.simulate(s, at_zero([64, 60], [40, 40]), sim.SimOptions(policy="swap", max_batch=8))
    assert not run.mixed_prefill and run.swap_outs.sum() >= 1
    assert run.scheduler == ""     # the rule book's own output, and a note that says why it ran
    assert any("predate vLLM V1" in n for n in run.scheduler_notes), run.scheduler_notes


def test_the_output_names_the_scheduler_and_notes_a_victim_what_if():
    s = tiny()
    plan = sim.plan_simulate(s, at_zero([64, 60], [40, 40]), sim.SimOptions(max_batch=8,
                                                                            victim="fewest-tokens"))
    texts = [n.text if hasattr(n, "text") else str(n) for n in plan.notes]
    assert any("vLLM V1 scheduler" in t for t in texts)
    assert any("is a what-if" in t for t in texts)
    m = plan.metrics
    assert m["recomputed_tokens_without_prefix_hits"].value == m["recomputed_tokens"].value + \
        m["recompute_prefix_hit_tokens"].value
    assert m["mixed_steps"].value == plan.run.mixed_steps


def test_every_request_and_block_is_accounted_for_at_every_event():
    """At every event of a V1 run that chunks, preempts and reuses blocks: each request in one place (running,
    part-way through its prefill, waiting, not arrived, finished); the free blocks and the blocks held add up to
    the pool; a running request holds its cache's blocks (prompt + generated - 1 tokens), the one part-way its
    computed tokens', nobody else any; no request past its output."""
    from kvplan.calc import capacity

    s = build_scenario(**LLAMA, engine="vllm", kv_pool="200MiB", max_num_batched_tokens="128")
    work = wl.build(requests=40, seed=2, prompt=wl.parse_dist("uniform:50,400", "p"),
                    output=wl.parse_dist("lognormal:mean=300,p99=1200", "o"), max_len=1600, rate=20.0)
    P, L, n = np.asarray(work.prompts), np.asarray(work.outputs), len(work.prompts)
    block_bytes = 16 * 131_072

    def blocks(tokens: int) -> int:
        return -(-capacity.request_bytes(s, tokens) // block_bytes)

    seen_partial = []

    def check(st):
        g, held = st["generated"], st["held_blocks"]
        finished = tuple(int(i) for i in np.flatnonzero(np.isfinite(st["finish"])))
        places = [st["running"], st["prefilling"], st["waiting"], st["not_arrived"], finished]
        everyone = [i for place in places for i in place]
        assert sorted(everyone) == list(range(n))
        assert st["free_blocks"] + int(held.sum()) == st["total_blocks"] and st["free_blocks"] >= 0
        for i in st["running"]:
            assert held[i] == blocks(int(P[i] + g[i] - 1)), i
        for i, done in zip(st["prefilling"], st["prefilled_tokens"], strict=True):
            seen_partial.append(i)
            assert 0 < done < P[i] + g[i] and held[i] == blocks(done)
        for i in (*st["waiting"], *st["not_arrived"], *finished):
            assert held[i] == 0, i
        assert (g <= L).all() and all(g[i] == L[i] for i in finished)

    run = sim.simulate(s, work, sim.SimOptions(max_batch=32, on_event=check))
    assert run.preemptions.sum() > 0 and run.recompute_hit_tokens.sum() > 0 and seen_partial
    assert np.isfinite(run.finish).all()


# Mixtral-8x7B's published config.json (huggingface.co/mistralai/Mixtral-8x7B-v0.1): MixtralConfig names each
# expert's width intermediate_size and has no moe_intermediate_size (nor any dense MLP)
MIXTRAL_CONFIG = ('{"architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, '
                  '"intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral", '
                  '"num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32, '
                  '"num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05, '
                  '"rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false, '
                  '"torch_dtype": "bfloat16", "vocab_size": 32000}')


def mixtral_tp2(tmp_path):
    path = tmp_path / "mixtral" / "config.json"
    path.parent.mkdir()
    path.write_text(MIXTRAL_CONFIG, encoding="utf-8")
    return build_scenario(**{**LLAMA, "model": str(path), "gpus": "2", "tp": "2", "block_size": None,
                             "max_model_len": "4096"}, engine="vllm")


def test_mixtral_experts_are_intermediate_size_wide(tmp_path):
    # an expert's gate, up and down: 3 x 4,096 x 14,336 = 176,160,768 parameters; 2 routed per token in each of 32
    # layers: 11,274,289,152 parameters a token; 2 FLOPs each, over TP 2: 11,274,289,152 FLOPs per GPU. Every layer
    # is a MoE layer. (Before, the width was read from moe_intermediate_size alone: 0 routed FLOPs, 0 MoE layers.)
    sm = costs.step_model(mixtral_tp2(tmp_path))
    assert sm.moe_flops_per_token == 11_274_289_152
    assert sm.moe_layers == 32 and sm.num_experts == 8 and sm.top_k == 2


def test_a_chunk_never_makes_the_decode_step_shorter(tmp_path):
    # Mixtral-8x7B at TP 2, 128 decoders at 700 tokens (64 KiB of KV per token per GPU: 2 x 32 layers x 8 heads x 128
    # x 2 B / 2) and a 200-token chunk after a 100-token prefix: the chunk's pass reads every weight once
    # (weight_read_seconds) against (200 + 128) tokens x ~12.7 GFLOP at the prefill rate, under the weights, plus
    # the chunk's TP2 all-reduces (0.70 ms; a 447-token chunk's, 1.05 ms, lifts the pass above the decode step); the
    # decode step alone pays its GEMM floor and the experts it touches on top, so the formula alone prices the pass
    # with the chunk below the pass without it. The pass with the chunk is at least the decode step
    sm = costs.step_model(mixtral_tp2(tmp_path))
    b, cache = 128, 128 * 700 * 65536.0
    alone = float(sm.step(b, cache, 0.0)["total"])
    mixed, without = sm.mixed_parts(b, cache, 0.0, [(100, 300)])
    assert without == alone and mixed == alone
    # a chunk whose compute outweighs the weights still adds its time: 2,048 tokens x ~12.7 GFLOP / (989.4 TFLOP/s x
    # 0.70) = 37 ms, more than the decode step's ~25 ms
    big, _ = sm.mixed_parts(b, cache, 0.0, [(0, 2048)])
    assert big > alone + 0.01


# --- the rules that changed after the commit the scheduler was read at (kvplan/engines/vllm.py FULL_ISL_SINCE,
# HASHLESS_FRONT_SINCE): each worked by hand on both sides of its release

def test_reserving_the_whole_input_refuses_an_admission_the_first_chunk_took():
    """A (40 tokens, 30 out) and B (120, 2) at 0 s; 10 blocks of 16; budget 64.
    v0.11.0 (the first chunk's blocks): step 1 A's 40 (3 blocks) and B's first 24 (the budget left; 2 blocks, 5
    free). Step 2: A decodes (41 tokens fit its 3 blocks), B's next 63 (87 tokens: 6 blocks, 4 more, 1 free).
    Step 3: B's last 33 need blocks for 120 = 8, 2 more, 1 free: the newest, B itself, is preempted with 87
    computed; its 5 full blocks (80 tokens) survive (A's 4th and 5th blocks, at 49 and 65 tokens, take the pool's
    unused block, then B's partial one, the first it freed), and it resumes when A is done: 40 tokens, 7 of them
    (80 .. 87) recomputed.
    v0.19.0 (scheduler_reserve_full_isl): B needs blocks for all its 120 tokens, 8 > the 7 free after A's 3, and
    never more than 7 while A (at most 40 + 29 = 69 tokens, 5 blocks) holds its blocks: B waits until A is done
    at the end of step 30 (1 prefill step + 29 decode steps), then runs 64 + 56 tokens and 1 decode step."""
    work = at_zero([40, 120], [30, 2])
    for release in ("0.11.0", "0.18.0"):        # the last release without the option, and an older one
        old = sim.simulate(tiny(f"vllm=={release}"), work, sim.SimOptions(max_batch=8))
        assert list(old.preemptions) == [0, 1] and list(old.admitted) == [0, 0]
        assert list(old.recompute_hit_tokens) == [0, 80] and list(old.recomputed) == [0, 7]
    s = tiny("vllm==0.19.0")                    # the first with it
    sm = costs.step_model(s)
    new = sim.simulate(s, work, sim.SimOptions(max_batch=8))
    assert list(new.preemptions) == [0, 0] and list(new.recomputed) == [0, 0]
    t1 = sm.mixed_step(0, 0.0, 0.0, [(0, 40)])
    a_done = t1 + sum(decode(sm, [40 + k - 1]) for k in range(2, 31))     # step k: A reads 40 + k - 1
    t31, t32 = sm.mixed_step(0, 0.0, 0.0, [(0, 64)]), sm.mixed_step(0, 0.0, 0.0, [(64, 120)])
    np.testing.assert_allclose(new.admitted, [0, a_done], rtol=1e-12)
    np.testing.assert_allclose(new.finish, [a_done, a_done + t31 + t32 + decode(sm, [121])], rtol=1e-12)
    assert new.decode_steps == 33 and new.mixed_steps == 3 and new.mixed_prefill_tokens == 40 + 64 + 56


def test_blocks_without_a_hash_are_reused_first_so_a_victim_keeps_more():
    """A (48 tokens, 30 out), B (20, 40), C (8, 30) at 0 s; 10 blocks of 16; budget 64 (both releases reserve the
    whole input, each admission here fits it).
    step 1: A's 48 (3 blocks) and B's first 16 (1 block): 6 free. step 2: A decodes (its 4th block, at 49 tokens),
    B's last 4 (its 2nd), C's 8 (1 block): 3 free. Then all decode; before step s A has computed 49 + s - 3, B
    20 + s - 3, C 8 + s - 3: C takes a block at s = 11, B at 15, A at 18: 0 free. At s = 27 C (32 computed, both
    its blocks full) needs a 3rd: C, the newest, is preempted; its 2 hashed blocks go to the queue's tail.
    A is done at the end of step 30 with 77 computed: 4 full blocks and a partial 5th.
    v0.23.0: all 5 go to the tail, behind C's; at step 31 B (49 tokens) takes the front, C's 2nd block: C resumes
    in the same step with a hit of 1 block (16 tokens) and recomputes 16 .. 32.
    v0.24.0 and later (block_pool.free_blocks: no hash -> the front): A's partial block goes to the front and B
    takes it; C keeps both blocks: a hit of 32 tokens (its 33 less one, in whole blocks: 2) and nothing recomputed.
    With async scheduling off (--no-async-scheduling): on by default in all three releases, it has step 31 decided
    before A's blocks are freed, so B takes C's block whatever the release (tests/test_simulate_async.py)."""
    work = at_zero([48, 20, 8], [30, 40, 30])
    sync = sim.SimOptions(max_batch=8, async_scheduling=False)
    old = sim.simulate(tiny("vllm==0.23.0"), work, sync)     # the last that appends all
    new = sim.simulate(tiny("vllm==0.24.0"), work, sync)     # the first that prepends
    newest = sim.simulate(tiny("vllm==0.33.0"), work, sync)
    assert list(newest.recompute_hit_tokens) == [0, 0, 32]
    for run in (old, new):
        assert list(run.preemptions) == [0, 0, 1] and run.decode_steps == 41    # B's 40th token at step 41
    assert list(old.recompute_hit_tokens) == [0, 0, 16] and list(old.recomputed) == [0, 0, 16]
    assert list(new.recompute_hit_tokens) == [0, 0, 32] and list(new.recomputed) == [0, 0, 0]
    sm = costs.step_model(tiny())
    # step 31: B decodes (reads 20 + 29 = 49); C's chunk: 16 .. 33 before, 32 .. 33 now
    b49, f49 = (float(v) for v in sm.request_cache(49.0))
    assert old.mixed_prefill_tokens - new.mixed_prefill_tokens == 17 - 1
    assert old.prefill_seconds - new.prefill_seconds == pytest.approx(
        sm.mixed_step(1, b49, f49, [(16, 33)]) - sm.mixed_step(1, b49, f49, [(32, 33)]), rel=1e-9)


def test_the_output_names_the_release_rules():
    old = sim.simulate(tiny("vllm==0.11.0"), at_zero([20], [2]), sim.SimOptions(max_batch=8))
    notes = old.scheduler_notes[0]
    assert "admission needs the first chunk's blocks" in notes and "free queue's tail" in notes
    # v0.11.0 alone: v0.11.1 brings fp8_ds_mla and fp8 MLA on any GPU (vllm.KV_DTYPE_SINCE, MLA_FP8_ANY_GPU_AFTER)
    assert old.scheduler.startswith("vLLM V1 scheduler, 0.11 rules (")
    assert "first-chunk admission" in old.scheduler and "hashless" not in old.scheduler
    new = sim.simulate(tiny(), at_zero([20], [2]), sim.SimOptions(max_batch=8))
    notes = new.scheduler_notes[0]
    assert "scheduler_reserve_full_isl, v0.19+" in notes and "without a hash go to the free queue's front" in notes
    assert new.scheduler.startswith("vLLM V1 scheduler, 0.31+ rules (")
    assert "whole-input admission, hashless blocks first" in new.scheduler


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_run_says_its_scheduler_once(run_cli, engine):
    """The scheduler's own note (its rules, with sources) stands for the plan's short one: one 'Scheduler:' note."""
    import json

    out = run_cli("simulate", "--engine", engine, "--requests", "50", "--format", "json")
    assert out.code == 0, out.err
    notes = json.loads(out.out)["notes"]
    assert sum(n.startswith("Scheduler:") for n in notes) == 1, notes


def test_speculative_slots_move_the_preemption_earlier_by_hand():
    """vLLM V1 with --speculative mtp:1: a running request's step schedules its next token and its K = 1 draft
    (num_tokens_with_spec) and allocate_slots reserves num_lookahead_tokens = K more (MTP is use_eagle() from
    v0.9.0): blocks for its context + 2 slots; v0.8.5 reserves the draft alone (+ 1). A (64 tokens, 16 out) and
    B (60, 18) at 0 s; 10 blocks of 16; budget 64.
    Without speculation: A peaks at 64 + 16 - 1 = 79 tokens (5 blocks), B at 60 + 18 - 1 = 77 (5): 10 fit.
    v0.8.5 (+ 1): A's last step reads 79, slots to 80 (5 blocks); B's reads 77, to 78 (5): 10 fit, no preemption.
    v0.9.0 (+ 2): step 1: A's 64 tokens, blocks for 66: 5 (5 free). Step 2: A decodes (reads 65, to 67: 5), B's 60,
    blocks for 62: 4 (1 free). At step s A reads 64 + s - 1 (to 64 + s + 1) and B 60 + s - 2 (to 60 + s): B takes
    the last free block at s = 5 (65 slots); A needs a 6th at 64 + s + 1 > 80, s = 16: none free, so the newest,
    B, is preempted with 60 + 14 - 1 = 73 tokens computed (its first token at step 2, then one a step to 15); A's
    16th token ends it at that step. Step 17: B finds its 4 full blocks (64 tokens) and computes 64 .. 74: 10
    tokens, 73 - 64 = 9 of them again."""
    import sim_reference as ref  # tests/ is on sys.path (rootdir-less test modules)

    work = at_zero([64, 60], [16, 18])
    spec = (1, 1.8, 0.0)        # K = 1; the acceptance prices the steps only
    for release, spec_on, preempted in (("0.9.0", None, 0), ("0.8.5", spec, 0), ("0.9.0", spec, 1)):
        s = tiny(f"vllm=={release}")
        run = sim.simulate(s, work, sim.SimOptions(max_batch=8, speculative=spec_on))
        assert list(run.preemptions) == [0, preempted], (release, spec_on)
        assert run.peak_blocks_used == 10
        r = ref.run_vllm(s, work, "newest", max_batch=8, speculative=spec_on)
        assert [q.preemptions for q in r.reqs] == [0, preempted]
        np.testing.assert_allclose(run.finish, [q.finish for q in r.reqs], rtol=1e-9)
    assert list(run.recomputed) == [0, 9] and list(run.recompute_hit_tokens) == [0, 64]
    assert "speculative slots: 2 a request" in run.scheduler
    # the newest release and v0.19.0 (whole-input admission, async scheduling) preempt B alike
    for release in ("0.19.0", None):
        s = tiny("vllm" if release is None else f"vllm=={release}")
        run = sim.simulate(s, work, sim.SimOptions(max_batch=8, speculative=spec))
        assert list(run.preemptions) == [0, 1] and list(run.recomputed) == [0, 9]


def test_speculative_slots_by_release():
    # VllmEngine.speculative_slots: 2K from v0.9.0 (drafts + lookahead), K in v0.8.x, none before V1 (v0.8.0)
    from kvplan.engines import vllm

    assert vllm.for_release((0, 9, 0)).speculative_slots(3)[0] == 6
    assert vllm.ENGINE.speculative_slots(4)[0] == 8
    assert vllm.for_release((0, 8, 5)).speculative_slots(3)[0] == 3
    assert vllm.for_release((0, 7, 3)).speculative_slots(3)[0] == 0


def test_a_request_whose_speculative_slots_pass_the_pool_is_refused():
    # 64 + 97 tokens peak at a 160-token cache: 10 blocks of 16, the whole pool; with mtp:1 on vLLM V1 it holds
    # 2 slots more, 162 tokens: 11 blocks, which no pool of 10 can give
    work = at_zero([64], [97])
    s = tiny()
    assert sim.simulate(s, work, sim.SimOptions(max_batch=8)).peak_blocks_used == 10
    with pytest.raises(KvplanError, match=r"\(64 \+ 97 tokens \+ 2 speculative slots\) needs 11 KV blocks"):
        sim.simulate(s, work, sim.SimOptions(max_batch=8, speculative=(1, 1.8, 0.0)))
