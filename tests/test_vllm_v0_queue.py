"""vLLM V0's batch limits for an MLA model, and the queue they make (issue 19, never_seen_3's dstack runs of vLLM
0.7.3 / 0.7.4.dev on DeepSeek-R1).

V0 (vLLM before v0.8.0) runs without chunked prefill for an MLA model: v0.7.3's vllm/config.py forces it off ("MLA is
enabled; forcing chunked prefill and prefix caching to be disabled", vllm-project/vllm PR #12642) and v0.8.x's
arg_utils.py _set_default_args_v0 still leaves it off ("Chunked prefill not supported for Multimodal or MLA in V0").
SchedulerConfig then takes max_num_batched_tokens = max(max_model_len, 2048) and max_num_seqs 256. So a DeepSeek-R1
server launched with its own 163,840-token context (dstackai/benchmarks@7f37e669 Deepseek-R1/README.md: `vllm serve
deepseek-ai/DeepSeek-R1 --trust-remote-code --tensor-parallel-size 8`) profiles a 163,840-token forward pass, which
takes ~23 GiB of its KV pool, and prefills every waiting prompt that fits in one pass of its own.

Figures by hand from DeepSeek-R1's config.json (hidden 7,168, vocab 129,280, moe_intermediate 2,048, 8 experts per
token, 61 layers of one 576-element latent) and kvplan's V0 profile constants (41.2 B a sampler logit entry, 2.5 B x
hidden a batched token, engines/vllm.py V0_SAMPLER_BYTES / HIDDEN_BYTES)."""

from __future__ import annotations

import pytest

from kvplan.calc import costs
from kvplan.calc import simulate as sim
from kvplan.inputs import workload as wl
from kvplan.options.scenarios import build_scenario

R1 = dict(model="deepseek-r1", hardware="h200", tp="8", engine="vllm==0.7.3", max_model_len="163840", prompt="3200",
          decode="800")
LATENT_BLOCK = 576 * 2 * 61 * 64          # one 64-token FlashMLA block of bf16 latents over 61 layers: 4,497,408 B


def limits(**kw):
    s = build_scenario(**kw)
    mnbt, mns = s.engine_adapter.batch_limits_for(s)
    return mnbt.number(), mns.number()


def test_v0_limits_mla_and_short_context_run_without_chunked_prefill():
    # MLA in V0: no chunked prefill at any context, so max(163,840, 2,048) tokens a pass and 256 sequences
    assert limits(**R1) == (163840, 256)
    assert limits(**{**R1, "engine": "vllm==0.7.4"}) == (163840, 256)   # 0.7.4.dev runs 0.7.3's rules
    # MI300X's launch (--max-model-len 32768): 32,768 tokens a pass
    assert limits(**{**R1, "hardware": "mi300x", "max_model_len": "32768"}) == (32768, 256)
    # a GQA model: off up to 32K of context (max(16,384, 2,048); max(1,000, 2,048) = 2,048) ...
    gqa = dict(model="llama-3.1-8b", hardware="h100-sxm", tp="1", engine="vllm==0.7.3", prompt="500", decode="200")
    assert limits(**gqa, max_model_len="16384") == (16384, 256)
    assert limits(**gqa, max_model_len="1000") == (2048, 256)
    assert limits(**gqa, max_model_len="32768") == (32768, 256)   # 32K itself is not past 32K
    # ... past it V0 chunks (kvplan's 8,192-token estimate of a pass), still 256 sequences
    assert limits(**gqa, max_model_len="65536") == (8192, 256)
    # flags win
    assert limits(**R1, max_num_seqs="64", max_num_batched_tokens="4096") == (4096, 64)
    # V1 (v0.8.0+) keeps the API server's defaults on a >= 70 GiB GPU: 8,192 tokens, 1,024 sequences
    assert limits(**{**R1, "engine": "vllm==0.8.5"}) == (8192, 1024)


def test_v0_profile_run_of_a_whole_context_shrinks_the_pool():
    s = build_scenario(**R1)
    act = s.engine_adapter.activation_reserve(s, s.sized_model, s.parallelism).number()
    # sampler: 256 x 129,280 x 41.2 = 1,363,542,016 B + 2.5 x 163,840 x 7,168 = 2,936,012,800 B -> 4,299,554,816 B;
    # fused-MoE workspace: the kernel runs the pass in chunks of VLLM_FUSED_MOE_CHUNK_SIZE = 32,768 tokens, so
    # 32,768 x 8 x (3 x 2,048 / 8 + 7,168) x 2 = 32,768 x 8 x 7,936 x 2 = 4,160,749,568 B (the whole 163,840-token
    # pass would be 20,803,747,840 B); total 8,460,304,384 B (7.88 GiB). With the 8,192-token pass kvplan assumed
    # before: 2,550,530,048 B.
    assert act == pytest.approx(8_460_304_384, rel=1e-6)


def test_one_v0_pass_takes_the_whole_wave_of_mla_prompts():
    # 4 users of 3,200-token prompts at 0 s: 4 x 3,200 = 12,800 tokens <= 163,840, one pass, every first token at its
    # end (an 8,192-token pass would have taken 2 prompts, then 2 more: two instants)
    s = build_scenario(**R1)
    work = wl.build(requests=4, seed=0, prompt=wl.parse_dist("fixed:3200", "p"), output=wl.parse_dist("fixed:2", "o"),
                    max_len=163840, users=4, think_s=0.0)
    r = sim.simulate(s, work, sim.SimOptions())
    one_pass = costs.step_model(s).prefill_pass_seconds([(0, 3200)] * 4, 163840)
    assert len(set(r.first_token.tolist())) == 1
    assert r.first_token[0] == pytest.approx(one_pass, rel=5e-3)


def test_v0_waiting_queue_when_the_pool_is_short():
    # A pool of exactly 1,000 blocks: V0's watermark keeps 1% (10 blocks) free at admission
    # (BlockSpaceManager.can_allocate: free - required >= watermark), a 3,200-token prompt needs 3,200 / 64 = 50
    # blocks, so the first pass admits k prompts while 1,000 - 50 k >= 10: k = 19 of 32 waiting (60,800 tokens, under
    # the 163,840 budget); the other 13 wait for blocks, their TTFT a queue
    s = build_scenario(**{**R1, "kv_pool": f"{1000 * LATENT_BLOCK}B"})
    work = wl.build(requests=32, seed=0, prompt=wl.parse_dist("fixed:3200", "p"),
                    output=wl.parse_dist("fixed:800", "o"), max_len=163840, users=32, think_s=0.0)
    r = sim.simulate(s, work, sim.SimOptions())
    first = sorted(r.first_token.tolist())
    assert first[:19] == pytest.approx([first[0]] * 19, rel=1e-9)
    assert first[19] > first[0]
    one_pass = costs.step_model(s).prefill_pass_seconds([(0, 3200)] * 19, 163840)
    assert first[0] == pytest.approx(one_pass, rel=5e-3)
