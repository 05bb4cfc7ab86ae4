"""kvplan recommend: the configuration table's numbers by hand, the advice that changes with the workload, and the
engine flags for both engines (and a pinned older release that lacks some)."""

from __future__ import annotations

import pytest

from kvplan.calc.recommend import RecommendOptions, plan_recommend
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.render.output import note_text
from kvplan.scenario import Scenario

GIB = 2**30
# Llama-3.1-8B (huggingface.co/meta-llama/Llama-3.1-8B config.json): 32 layers, 8 KV heads, head_dim 128.
# bytes per token = 32 x 8 x 128 x 2 (K and V) x bytes per element: bf16 131,072; fp8 65,536.
# A 1,000 + 30,000 = 31,000-token request in 16-token blocks (the neutral engine's) holds ceil(31,000 / 16) = 1,938
# blocks = 31,008 tokens: bf16 31,008 x 131,072 = 4,064,280,576 B; fp8 2,032,140,288 B.
FP8_REQUEST = 31_008 * 65_536
BF16_REQUEST = 31_008 * 131_072


def llama(**kw) -> Scenario:
    base = dict(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), gpus=1, tp=1,
                kv_pool_bytes=64 * GIB, prompt_tokens=1000, decode_tokens=30_000)
    base.update(kw)
    return Scenario(**base)


def test_capacity_batch_and_dtype_by_hand():
    plan = plan_recommend(llama())
    # auto KV dtype: fp8 is recommended. 64 GiB = 68,719,476,736 B; // 2,032,140,288 = 33 (33.8); bf16: 16 (16.9).
    assert plan.kv_dtype.value == "fp8"
    assert plan.batch_capacity.value == 68_719_476_736 // FP8_REQUEST == 33
    counts = {d.dtype.value: d.requests_per_replica.value for d in plan.dtype_options}
    assert counts == {"bf16": 16, "fp8": 33}
    assert plan.batch.value <= 33
    assert plan.row("kv_dtype").agrees and "bf16 16, fp8 33" in note_text(plan.row("kv_dtype").reason)
    # every row's reason is a Note (its figures typed, formatted by the output layer), words alone included
    from kvplan.specs.values import Note

    assert all(isinstance(r.reason, Note) for r in plan.rows), [type(r.reason) for r in plan.rows]
    assert plan.row("kv_dtype").reason.figures()[0].value == 1000 + 30_000   # the request's tokens, typed


def test_given_dtype_is_kept_and_the_row_says_so():
    plan = plan_recommend(llama(kv_dtype_request="bf16"))
    assert plan.kv_dtype.value == "bf16" and plan.batch_capacity.value == 16
    row = plan.row("kv_dtype")
    assert not row.agrees and "--kv-dtype bf16 was given" in row.why_differs


def test_batch_is_the_largest_meeting_the_slo():
    from kvplan.calc import costs

    loose = plan_recommend(llama(), RecommendOptions(tpot_slo=1.0))
    tight = plan_recommend(llama(), RecommendOptions(tpot_slo=0.009))
    assert loose.batch.value == 33                      # capacity binds: 33 fit, and 33 decode within 1 s
    assert 1 <= tight.batch.value < 33                  # the SLO binds
    s = tight.scenario
    step = costs.step_model(s)
    mean_b, mean_f = step.steady_cache(s.prompt_tokens, s.decode_tokens)

    t_pf = step.prefill_seconds(1000, 0, int(s.engine_adapter.batch_limits_for(s)[0].value))

    def tpot(b):   # the decode step plus the other b - 1 requests' prefills spread over its 30,000 steps (its own
        return float(step.step(b, b * mean_b, b * mean_f)["total"]) + t_pf * (b - 1) / 30_000   # is its TTFT)

    b = tight.batch.value
    assert tpot(b) <= 0.009 < tpot(b + 1)               # the largest batch under the SLO, not one less or more


def test_offload_tier_is_the_batch_capped_by_host_dram():
    # --dram 2 TB per 8-GPU node = 250e9 B per GPU; the tier = min(batch x request bytes, 250e9).
    plan = plan_recommend(llama(), RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    assert plan.offload
    assert plan.offload_bytes_per_gpu.value == min(33 * FP8_REQUEST, 250_000_000_000) == 67_060_629_504
    small = plan_recommend(llama(), RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=80_000_000_000))
    assert small.offload_bytes_per_gpu.value == 10_000_000_000   # 80 GB / 8 GPUs caps it


def test_a_slow_host_link_turns_swap_into_recompute_and_the_tier_off():
    # 0.1 GB/s: swapping 2.03 GB out and back takes ~40 s, far above recomputing a 31K-token request.
    plan = plan_recommend(llama(host_link_gbs=0.1))
    assert plan.preemption_mode == "recompute" and not plan.offload
    assert not plan.row("preemption").agrees and not plan.row("kv_offload").agrees
    assert plan.offload_bytes_per_gpu.value == 0


def test_victim_rule_prices_a_young_request_against_the_whole_chain():
    plan = plan_recommend(llama())
    assert plan.recompute_young_seconds.value < plan.recompute_seconds.value
    assert "youngest" in plan.victim


def test_short_output_chat_changes_the_advice():
    """A chat workload (4K prompt, 300 output tokens) against the reasoning one (1K + 30K): the prefill is a large
    share of a request, so a prefix cache is worth more than the document's 'limited gain', and many more requests
    fit than the document's 2-8."""
    reasoning = plan_recommend(llama())
    chat = plan_recommend(llama(prompt_tokens=4000, decode_tokens=300))
    assert reasoning.row("prefix_cache").agrees and not chat.row("prefix_cache").agrees
    assert chat.prefill_share.value > 0.05 > reasoning.prefill_share.value
    # 4,300 tokens -> ceil(4,300 / 16) = 269 blocks = 4,304 tokens x 65,536 = 282,066,944 B; 64 GiB holds 243
    assert chat.batch_capacity.value == 68_719_476_736 // (4_304 * 65_536) == 243
    assert chat.batch.value > 8 and not chat.row("batch").agrees


def test_one_instance_prices_pd_at_two():
    plan = plan_recommend(llama())
    assert "at two instances (2 GPUs)" in note_text(plan.row("pd").reason)   # the reason is a Note of figures


# --- engine flags ------------------------------------------------------------------------------------------------
def _flags(lc) -> dict:
    return {f.flag: f.value for f in lc.flags}


def test_vllm_flags_realise_the_plan():
    s = llama(engine="vllm")
    plan = plan_recommend(s, RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    lc = s.engine_adapter.launch_command(plan)
    flags = _flags(lc)
    assert lc.program == "vllm serve meta-llama/Llama-3.1-8B-Instruct"  # the preset's config.json source
    assert flags["--kv-cache-dtype"] == "fp8"
    assert flags["--max-num-seqs"] == "33"
    assert flags["--max-model-len"] == "31000"
    assert "--tensor-parallel-size" not in flags          # TP 1 is vLLM's default
    # the tier per replica in whole GiB: 67,060,629,504 B x 1 GPU // 2^30 = 62
    assert flags["--kv-offloading-size"] == "62" and flags["--kv-offloading-backend"] == "native"
    assert "\\\n  --max-num-seqs 33" in lc.text()


def test_an_older_vllm_release_drops_the_flags_it_lacks():
    # v0.13.0's native offloading cannot start (vllm/config/vllm.py passes num_cpu_blocks 0, which
    # vllm/v1/kv_offload/cpu.py CPUOffloadingSpec refuses); v0.14.0's works (docs/engine-rules-by-release.md §11)
    s = llama(engine="vllm==0.13")
    plan = plan_recommend(s, RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    lc = s.engine_adapter.launch_command(plan)
    assert "--kv-offloading-size" not in _flags(lc)
    # not planned at all (issue 21): the offload row says what v0.13 does instead and names the release that has it
    assert not plan.offload and "0.14" in note_text(plan.row("kv_offload").reason)
    assert "--max-num-seqs" in _flags(lc)


def test_sglang_flags_and_the_hicache_ratio():
    s = llama(engine="sglang")
    plan = plan_recommend(s, RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    flags = _flags(s.engine_adapter.launch_command(plan))
    assert flags["--model-path"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert flags["--kv-cache-dtype"] == "fp8_e4m3" and flags["--max-running-requests"] == str(plan.batch.value)
    # 250e9 B of DRAM per GPU over the 64 GiB pool = 3.64 > 2: the documented ratio 2 fits
    assert "--enable-hierarchical-cache" in flags and flags["--hicache-ratio"] == "2"
    small = plan_recommend(s, RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=800_000_000_000))
    # 100e9 / 68,719,476,736 = 1.455..., floored to 1.45
    assert _flags(s.engine_adapter.launch_command(small))["--hicache-ratio"] == "1.45"


def test_sglang_ep_before_0_5_also_needs_enable_ep_moe():
    s = Scenario(model=load_model("qwen3-235b-a22b"), hardware=load_hardware("h200"), tp=8, ep=8,
                 engine="sglang==0.4.9")
    flags = _flags(s.engine_adapter.launch_command(plan_recommend(s)))
    assert flags["--ep-size"] == "8" and "--enable-ep-moe" in flags
    s5 = s.with_(engine="sglang==0.5.3")
    assert "--enable-ep-moe" not in _flags(s5.engine_adapter.launch_command(plan_recommend(s5)))


@pytest.mark.parametrize("args, message", [
    (("--emit", "trtllm"), "--emit 'trtllm' is not an engine"),
    (("--emit", "sglang", "--engine", "vllm"), "--emit sglang with --engine vllm"),
    (("--tpot-slo", "0"), "--tpot-slo"),
])
def test_bad_recommend_options_exit_2(run_cli, args, message):
    r = run_cli("recommend", *args)
    assert r.code == 2 and message in r.err and "Traceback" not in r.err


def test_cli_emits_the_command_and_the_table(run_cli):
    r = run_cli("recommend", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--gpus", "1", "--kv-pool", "64GiB",
                "--tpot-slo", "1s", "--dram", "2TB", "--emit", "vllm", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["batch"] == 33 and doc["kv_dtype_recommended"] == "fp8"
    assert "--kv-offloading-size 62" in doc["launch"]["command"]
    assert [x["key"] for x in doc["recommendations"]] == ["kv_dtype", "batch", "kv_offload", "preemption", "pd",
                                                          "prefix_cache"]


# --- the sizing search (--target) ---------------------------------------------------------------------------------
def test_parse_target_forms_and_refusals():
    from kvplan.calc.sizing import parse_target
    from kvplan.errors import KvplanError

    t = parse_target("concurrency>=64@31k")
    assert (t.metric, t.op, t.bound, t.context) == ("concurrency", ">=", 64, 31_000)
    assert parse_target("tpot<=40ms").bound == pytest.approx(0.040)
    assert parse_target("rate>=2rps").bound == 2
    for bad in ("tpot>=40ms", "concurrency<=3", "tpot<=40", "rate>=2rps@3k", "latency<=1s", "concurrency>=-1"):
        with pytest.raises(KvplanError):
            parse_target(bad)


def test_search_finds_the_fewest_gpus_by_hand():
    """Llama-3.1-8B, fp8 KV, a fixed 16 GiB pool per GPU on H100s: a 31,000-token request holds 2,032,140,288 B,
    split over TP (8 KV heads). Per replica floor(16 GiB x TP / 2,032,140,288) = floor(8.454 x TP); x DP:
    1 GPU 8; 2 GPUs 16 (TP1 x DP2) or 16 (TP2); 4 GPUs 32 (TP1 x DP4), 32 (TP2 x DP2) or 33 (TP4); so 33 requests
    first fit on 4 GPUs, and only with TP4."""
    from kvplan.calc.sizing import parse_target, search
    from kvplan.specs.dtypes import KVDtype

    base = llama(kv_pool_bytes=16 * GIB)
    plan = search(base, (parse_target("concurrency>=33@31k"),), (load_hardware("h100-sxm"),), (KVDtype.FP8,))
    assert (plan.best.gpus, plan.best.tp, plan.best.dp, plan.best.concurrency) == (4, 4, 1, 33)
    assert all(c.gpus >= 4 for c in plan.ranked)
    # near misses: layouts on fewer GPUs than the best (4), closest first: 2 GPUs hold 16 (TP1 x DP2 or TP2)
    assert plan.near_misses and all(c.gpus < 4 for c in plan.near_misses)
    assert plan.near_misses[0].gpus == 2 and plan.near_misses[0].concurrency == 16
    one_less = search(base, (parse_target("concurrency>=32@31k"),), (load_hardware("h100-sxm"),), (KVDtype.FP8,))
    assert one_less.best.gpus == 4      # and 32 fit with TP1 x DP4 and TP2 x DP2 too
    assert {c.tp for c in one_less.ranked if c.gpus == 4} == {1, 2, 4}


def test_each_gpu_type_that_meets_the_targets_is_shown():
    """B200 has more passing layouts than the table shows, but H200's best (TP1 x DP8, 8 GPUs) meets the targets
    too and must be listed, not hidden below B200's variants."""
    from kvplan.calc.sizing import parse_target, search

    base = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"))
    plan = search(base, (parse_target("concurrency>=64@31k"), parse_target("tpot<=40ms")),
                  (load_hardware("h200"), load_hardware("b200")))
    shown = [c.hardware for c in plan.ranked]
    assert set(shown[:2]) == {"h200", "b200"} and shown[0] == plan.best.hardware
    assert all(not (c.hardware == "h200" and c.gpus == 8) for c in plan.near_misses)


def test_search_rate_is_replicas_times_batch_over_request_time():
    from kvplan.calc import costs
    from kvplan.calc.sizing import parse_target, search
    from kvplan.specs.dtypes import KVDtype

    base = llama(kv_pool_bytes=16 * GIB)
    plan = search(base, (parse_target("rate>=0.01rps"), parse_target("tpot<=30ms")), (load_hardware("h100-sxm"),),
                  (KVDtype.FP8,))
    c = plan.best
    s = base.with_(gpus=c.gpus, tp=c.tp, pp=c.pp, dp=None, kv_dtype_request="fp8")
    step = costs.step_model(s)
    t_pf = step.prefill_seconds(1000, 0, int(s.engine_adapter.batch_limits_for(s)[0].value))
    assert c.tpot_seconds <= 0.030 and c.basis == "simulated"     # the best is judged by the SLO model
    # the rate in closed form: the mean TPOT with the other requests' prefills in between, TPOT(B) + T_pf x (B - 1) /
    # D, and Little's law for B requests each in the system its prefill (its first token) + (D - 1) x TPOT (the SLO
    # model's steady batch: a request's TPOT spans its output's D - 1 later tokens)
    mean = float(step.steady_tpot(1000, 30_000, c.batch)) + t_pf * (c.batch - 1) / 30_000
    assert c.requests_per_second == pytest.approx(c.dp * c.batch / (t_pf + 29_999 * mean))


def test_recommend_target_cli(run_cli):
    r = run_cli("recommend", "-m", "llama-3.1-8b", "--kv-pool", "16GiB", "--kv-dtype", "fp8", "--target",
                "concurrency>=33@31k", "--candidates", "h100-sxm", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["sizing"]["candidates"][0]["gpus"] == 4 and doc["parallelism"]["tp"] == 4
    none = run_cli("recommend", "-m", "llama-3.1-8b", "--target", "tpot<=10us", "--candidates", "h100-sxm")
    assert none.code == 2 and "no layout" in none.err
    assert run_cli("recommend", "--candidates", "h100-sxm").code == 2


def test_the_workload_documents_scenario():
    """DeepSeek-R1 on 8 x H200, 1K prompt + 30K decode. FP8 MLA: 61 layers x 576 B = 35,136 B per token on every
    TP rank (the latent is replicated); 31,000 tokens in 64-token blocks = 485 blocks = 31,040 tokens x 35,136 =
    1,090,621,440 B per GPU; the batch is the pool // that (45 at kvplan's budget for this deployment)."""
    from kvplan.calc import capacity

    s = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"))
    plan = plan_recommend(s)
    pool = int(capacity.kv_pool(plan.scenario).kv_pool_bytes)
    assert plan.kv_dtype.value == "fp8"
    assert plan.batch_capacity.value == pool // 1_090_621_440 == 45
    assert plan.batch.value == 45 and not plan.row("batch").agrees        # 45, not the document's 2-8
    assert plan.preemption_mode == "swap" and plan.row("preemption").agrees
    assert not plan.disaggregate and plan.row("pd").agrees
    assert plan.row("prefix_cache").agrees and plan.offload


def test_a_flag_is_printed_from_its_first_release_on():
    # --kv-offloading-size is printed from v0.14.0, the first wheel whose native backend starts (v0.14.0
    # vllm/config/vllm.py passes cpu_bytes_to_use; v0.13.0 passes num_cpu_blocks 0, refused by kv_offload/cpu.py)
    for release, present in (("vllm==0.14", True), ("vllm==0.13", False)):
        s = llama(engine=release)
        plan = plan_recommend(s, RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
        assert ("--kv-offloading-size" in _flags(s.engine_adapter.launch_command(plan))) is present


def test_the_slo_batch_counts_the_prefills_of_a_chat_batch():
    """4K prompts and 300-token outputs: each request's 4K prefill lands in the batch's time once per 300 steps, so
    the mean TPOT at batch b is step(b) + prefill x (b - 1) / 300 (the other requests' prefills; its own is its
    TTFT) and the SLO binds well below the 243 that fit."""
    from kvplan.calc import costs

    chat = plan_recommend(llama(prompt_tokens=4000, decode_tokens=300))
    s = chat.scenario
    step = costs.step_model(s)
    mean_b, mean_f = step.steady_cache(4000, 300)
    t_pf = step.prefill_seconds(4000, 0, int(s.engine_adapter.batch_limits_for(s)[0].value))

    def tpot(b):
        return float(step.step(b, b * mean_b, b * mean_f)["total"]) + t_pf * (b - 1) / 300

    # the closed form (where the SLO model's simulated search starts, and the mean shown beside it)
    b = chat.batch_closed_form.value
    assert b < chat.batch_capacity.value == 243
    assert tpot(b) <= 0.05 < tpot(b + 1)
    assert chat.tpot_mean_at_batch.value == pytest.approx(tpot(chat.batch.value))
    # the prefill's share of the replica time a request costs: its prefill against its share of the batch's plain
    # decode steps (the mean TPOT's prefills are the other requests', which would count prefill twice)
    n = chat.batch.value
    plain = float(step.step(n, n * mean_b, n * mean_f)["total"])
    assert chat.prefill_share.value == pytest.approx(t_pf / (t_pf + 300 * plain / n))


def test_search_tpot_is_judged_at_the_batch_the_concurrency_target_needs():
    """With concurrency>=33 on 4 GPUs only TP4 (one replica) holds 33, so its TPOT is judged at batch 33: a
    ceiling between its batch-1 and batch-33 TPOT must fail it, although batch 1 alone would pass."""
    from kvplan.calc import costs
    from kvplan.calc.sizing import _evaluate, parse_target, search
    from kvplan.specs.dtypes import KVDtype

    base = llama(kv_pool_bytes=16 * GIB)
    s = base.with_(gpus=4, tp=4, dp=None, kv_dtype_request="fp8")
    step = costs.step_model(s)
    mean_b, mean_f = step.steady_cache(1000, 30_000)
    t1, t33 = (float(step.step(b, b * mean_b, b * mean_f)["total"]) for b in (1, 33))
    ceiling = (t1 + t33) / 2
    targets = (parse_target("concurrency>=33@31k"), parse_target(f"tpot<={ceiling * 1e3:.4f}ms"))
    plan = search(base, targets, (load_hardware("h100-sxm"),), (KVDtype.FP8,))
    assert all(c.gpus > 4 for c in plan.ranked)
    tp4 = _evaluate(s, targets)      # the search's own verdict on TP4 (the near-miss list shows 8-GPU ones first)
    assert any(f.startswith("tpot<=") and "at batch 33" in f for f in tp4.failed)


def test_search_rate_counts_every_replica():
    from kvplan.calc import costs
    from kvplan.calc.sizing import parse_target, search
    from kvplan.specs.dtypes import KVDtype

    base = llama(kv_pool_bytes=16 * GIB)
    plan = search(base, (parse_target("concurrency>=16@31k"),), (load_hardware("h100-sxm"),), (KVDtype.FP8,))
    replicated = [c for c in plan.ranked if c.dp > 1]
    assert replicated
    for c in replicated:
        s = base.with_(gpus=c.gpus, tp=c.tp, pp=c.pp, dp=None, kv_dtype_request="fp8")
        t_pf = costs.step_model(s).prefill_seconds(1000, 0, int(s.engine_adapter.batch_limits_for(s)[0].value))
        # Little's law over DP replicas: DP x B / (prefill + (D - 1) x TPOT)
        assert c.requests_per_second == pytest.approx(c.dp * c.batch / (t_pf + 29_999 * c.tpot_seconds))


def test_search_ties_go_to_the_layout_with_more_room():
    """DeepSeek-R1 on 4 x B300, TP1 x DP4: at the batch the 42 ms target allows (31 per replica) the absorbed-MLA step
    is not bound by the KV read, so bf16 and fp8 KV give the same batch and rate; the tie goes to fp8, which holds
    about twice the requests. (At 40 ms the simulated p99 sits within 0.01 ms of the target at batch 25, so the two
    dtypes' batches split 24 / 25 on rounding; 42 ms keeps the premise, a tie, away from that edge.)"""
    from kvplan.calc.sizing import parse_target, search

    base = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"))
    plan = search(base, (parse_target("concurrency>=64@31k"), parse_target("tpot<=42ms")), (load_hardware("b300"),))
    first, second = plan.ranked[:2]
    assert (first.gpus, first.tp, first.dp) == (second.gpus, second.tp, second.dp) == (4, 1, 4)
    assert first.requests_per_second == second.requests_per_second
    assert (first.kv_dtype, second.kv_dtype) == ("fp8", "bf16") and first.concurrency > second.concurrency
    # and the recommendation after a search says the search chose the dtype, not a flag
    from kvplan.calc.recommend import RecommendOptions

    row = plan_recommend(llama(kv_dtype_request="bf16"), RecommendOptions(dtype_origin="chosen by the --target search")
                         ).row("kv_dtype")
    assert note_text(row.reason).startswith("bf16, chosen by the --target search;")
    assert "--kv-dtype" not in row.why_differs


def test_a_gpu_without_a_nic_figure_still_gets_a_table(run_cli):
    """The mi355x preset has no NIC figure: the PD row says it is not priced and how to price it, the rest stands;
    --nic-gbps prices it."""
    r = run_cli("recommend", "-g", "mi355x", "-f", "json")
    assert r.code == 0, r.err
    pd = next(x for x in r.json()["recommendations"] if x["key"] == "pd")
    assert pd["value"] == "not priced" and "--nic-gbps" in pd["reason"] and not pd["agrees_with_document"]
    priced = run_cli("recommend", "-g", "mi355x", "--nic-gbps", "50", "-f", "json").json()
    assert next(x for x in priced["recommendations"] if x["key"] == "pd")["value"].startswith("colocate")


def test_a_ttft_target_the_unpriced_pd_row_cannot_judge_is_said_unjudged(run_cli):
    # --ttft-slo under load reaches only the PD row (the batch's closed loop does not judge TTFT; the TTFT target
    # line judges a request alone); on the mi355x, with no NIC figure, that row is not priced, so the target was
    # judged under load nowhere: the row says so, and the JSON's pd_reasons
    # is that row's reason (not the prefix-cache row's, which came last)
    d = run_cli("recommend", "-g", "mi355x", "--ttft-slo", "2s", "-f", "json").json()
    pd = next(x for x in d["recommendations"] if x["key"] == "pd")
    assert pd["value"] == "not priced" and "--ttft-slo target is judged on this row only under load" in pd["reason"]
    assert d["pd_reasons"] == [pd["reason"]]
    plain = run_cli("recommend", "-g", "mi355x", "-f", "json").json()
    assert "--ttft-slo" not in next(x for x in plain["recommendations"] if x["key"] == "pd")["reason"]


def test_emit_says_it_plans_with_the_engines_accounting(run_cli):
    # without --engine, --emit vllm switches the plan to vLLM's accounting (0.92 of HBM from v0.20): a note says so
    plain = run_cli("recommend", "-f", "json").json()
    emitted = run_cli("recommend", "--emit", "vllm", "-f", "json").json()
    assert plain["engine"] == "neutral" and emitted["engine"] == "vllm"
    assert any("--emit vllm plans with vllm's own accounting" in n for n in emitted["notes"])
    assert not any("own accounting" in n for n in plain["notes"])


def test_the_terminal_gets_two_narrow_tables_and_markdown_one_wide(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    table = run_cli("recommend").out
    markdown = run_cli("recommend", "-f", "markdown").out
    csv = run_cli("recommend", "-f", "csv").out
    assert "Why, in kvplan's numbers" in table and "why (kvplan's numbers)" not in table
    assert "| setting | recommended | why (kvplan's numbers) | the workload document | agrees |" in markdown
    assert "Why, in kvplan's numbers" not in markdown
    assert csv.splitlines()[1] == "setting,recommended,why (kvplan's numbers),the workload document,agrees"


def test_emit_names_every_kv_dtype_the_plan_was_sized_for():
    """A plan sized for a scaled or DeepSeek-layout KV dtype must launch the engine with that dtype (else it starts
    in bf16 and holds half the requests); a dtype the engine has no name for is refused, not dropped."""
    from kvplan.errors import KvplanError

    s = llama(engine="vllm", kv_dtype_request="fp8_per_token_head")
    flags = _flags(s.engine_adapter.launch_command(plan_recommend(s)))
    assert flags["--kv-cache-dtype"] == "fp8_per_token_head"
    v32 = Scenario(model=load_model("deepseek-v3.2-exp"), hardware=load_hardware("b200"), engine="sglang",
                   kv_dtype_request="fp8_ds_mla")   # SGLang's NSA pool: the fp8_ds_mla cell, flag fp8_e4m3
    assert _flags(v32.engine_adapter.launch_command(plan_recommend(v32)))["--kv-cache-dtype"] == "fp8_e4m3"
    with pytest.raises(KvplanError, match="SGLang has no int8_per_token_head KV cache"):   # refused when planned
        llama(engine="sglang", kv_dtype_request="int8_per_token_head")


def test_sglang_dp_attention_launches_every_rank():
    """TP1 x DP8 with EP8 on DeepSeek-R1 is SGLang's DP attention: --tp-size 8 (every rank) --dp-size 8
    --enable-dp-attention --ep-size 8, not eight TP1 copies of the whole model."""
    s = Scenario(model=load_model("deepseek-r1"), hardware=load_hardware("h200"), tp=1, dp=8, ep=8, engine="sglang")
    flags = _flags(s.engine_adapter.launch_command(plan_recommend(s)))
    assert (flags["--tp-size"], flags["--dp-size"], flags["--ep-size"]) == ("8", "8", "8")
    assert "--enable-dp-attention" in flags
    plain = llama(engine="sglang", gpus=2, dp=2, kv_pool_bytes=16 * GIB)   # dense, no EP: two replicas
    pflags = _flags(plain.engine_adapter.launch_command(plan_recommend(plain)))
    assert pflags["--dp-size"] == "2" and "--enable-dp-attention" not in pflags and "--tp-size" not in pflags


def test_no_dram_tier_means_recompute_whatever_a_swap_would_cost():
    """The l40s preset has no host DRAM figure: swapping would be cheaper, but there is nowhere to swap to, so the
    mode is recompute and the row says why."""
    s = Scenario(model=load_model("qwen3-32b"), hardware=load_hardware("l40s"), tp=2, dp=4, kv_dtype_request="fp8")
    plan = plan_recommend(s)
    assert plan.preemption_mode == "recompute" and not plan.offload
    assert plan.row("preemption").value.startswith("recompute (no DRAM tier to swap to)")
    assert "no DRAM tier" in plan.row("preemption").why_differs


def test_the_kv_dtype_row_says_why_a_dtype_is_not_planned(run_cli):
    # vLLM 0.10.1 runs no fp8 MLA cache (every MLA backend raises) and no release runs nvfp4 for MLA: the row must not
    # say "nvfp4 would hold None" nor blame the model or GPU, and the notes carry each refusal with its source
    r = run_cli("recommend", "-m", "deepseek-r1", "-g", "b200", "--engine", "vllm==0.10.1", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    row = next(x for x in doc["recommendations"] if x["key"] == "kv_dtype")
    assert row["value"] == "bf16" and "None" not in row["reason"]
    assert row["why_differs"].startswith("fp8 cannot be planned here (vllm==0.10.1 has no fp8 KV cache for MLA")
    refused = [n for n in doc["notes"] if " is not planned: " in n]
    assert [n.split(" ")[0] for n in refused] == ["fp8", "nvfp4"] and all("github.com/vllm-project" in n
                                                                        for n in refused)


def test_the_brief_pd_line_names_its_margin_and_the_slo_that_decides_it(run_cli):
    # recommend's PD row is pd's verdict on the same deployment (8 one-GPU instances here): its brief line carries
    # pd's goodput ratio against the 1.05x bar and the targets it was judged under (TPOT p99 <= 50 ms by default; a
    # --ttft-slo joins it)
    args = ("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--kv-dtype", "fp8", "--prompt", "4k", "--decode",
            "300")
    pd = run_cli("pd", *args, "-f", "json")
    assert pd.code == 0, pd.err
    ratio = pd.json()["disaggregated_over_colocated"]
    r = run_cli("recommend", *args, "--brief")
    assert r.code == 0, r.err
    line = next(x for x in r.out.splitlines() if x.startswith("PD: "))
    verdict = "disaggregate" if ratio > 1.05 else "colocate (do not disaggregate)"
    assert line == f"PD: {verdict}: {ratio:.2f}x colocated goodput (the bar 1.05x) under TPOT p99 <= 50 ms"


def test_the_pd_row_prices_one_attention_dp_instance(run_cli):
    # recommend --target can land on one attention-DP instance: TP1 x DP32 with EP32 over 4 nodes of 8 H200s. pd
    # needed two instances of the scenario's own layout; it now splits the 32 GPUs by its role search, so the row is
    # priced (a verdict with its margin), not "not priced"
    r = run_cli("recommend", "--nodes", "4", "--tp", "1", "--dp", "32", "--ep", "32", "--kv-dtype", "fp8", "--prompt",
                "4k", "--decode", "300", "-f", "json")
    assert r.code == 0, r.err
    row = next(x for x in r.json()["recommendations"] if x["key"] == "pd")
    assert row["value"] in ("disaggregate", "colocate (do not disaggregate)"), row
    assert "cannot price" not in row["reason"]
