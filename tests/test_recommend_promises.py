"""kvplan recommend keeps its promises (issue 21): every number of the emitted launch command reproduces the plan,
and a deployment parsed back from that command meets each --target when kvplan's own public calculators
(``plan_tpot``, ``plan_concurrency``) are run on it; the advice follows the pinned engine's capabilities."""

from __future__ import annotations

import math
import shlex

import pytest

import kvplan
from kvplan.calc.recommend import RecommendOptions, plan_recommend
from kvplan.calc.sizing import parse_target
from kvplan.inputs.presets import load_hardware, load_model
from kvplan.render.output import note_text
from kvplan.scenario import Scenario
from kvplan.specs.values import Note

GIB = 2**30

# the engines' own names for kvplan's KV dtypes (vLLM --kv-cache-dtype fp8; SGLang fp8_e4m3), read back
# (nvfp4: vLLM's and SGLang's name alike; the --target search picks it on Blackwell where it holds the most requests)
KV_NAMES = {"fp8": "fp8", "fp8_e4m3": "fp8", "bfloat16": "bf16", "bf16": "bf16", "auto": "auto", "nvfp4": "nvfp4"}


def _flags(command: str) -> dict[str, str | None]:
    """``--flag value`` / ``--switch`` pairs of a pasted launch command (its continuation backslashes dropped)."""
    words = shlex.split(command.replace("\\\n", " "))
    out: dict[str, str | None] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            if nxt is not None and not nxt.startswith("--"):
                out[w], i = nxt, i + 2
                continue
            out[w] = None
        i += 1
    return out


def deployment_from_launch(data: dict) -> tuple[Scenario, int, int]:
    """(the Scenario the emitted command launches, running requests per replica, replicas): every memory and batch
    figure comes from the command's flags, only the GPU type and node count (which a launch command does not name)
    and the request lengths from the plan's JSON."""
    engine, f = data["launch"]["engine"], _flags(data["launch"]["command"])
    common = dict(model=load_model(data["model"]), hardware=load_hardware(data["hardware"]), nodes=data["nodes"],
                  prompt_tokens=data["prompt_tokens"], decode_tokens=data["decode_tokens"])
    if engine.startswith("vllm"):
        tp, pp, dp = (int(f.get(k) or 1) for k in ("--tensor-parallel-size", "--pipeline-parallel-size",
                                                    "--data-parallel-size"))
        ep = tp * dp if "--enable-expert-parallel" in f else None
        running = int(f["--max-num-seqs"])
        s = Scenario(**common, engine=engine if "==" in engine else "vllm",
                     gpus=tp * pp * dp, tp=tp, pp=pp, dp=dp, ep=ep,
                     kv_dtype_request=KV_NAMES[f.get("--kv-cache-dtype") or "auto"],
                     gpu_memory_utilization=float(f["--gpu-memory-utilization"]),
                     max_model_len=int(f["--max-model-len"]), max_num_seqs=running)
    else:
        dp = int(f.get("--dp-size") or 1)
        ranks, pp = int(f.get("--tp-size") or 1), int(f.get("--pp-size") or 1)
        dp_attention = "--enable-dp-attention" in f
        tp = ranks // dp if dp_attention else ranks
        # under DP attention SGLang gives each rank max_running_requests // dp_size (sglang.py DP_RUNNING_SOURCE)
        running = int(f["--max-running-requests"]) // (dp if dp_attention else 1)
        s = Scenario(**common, engine=engine if "==" in engine else "sglang", gpus=tp * pp * dp, tp=tp, pp=pp, dp=dp,
                     ep=int(f["--ep-size"]) if "--ep-size" in f else None,
                     kv_dtype_request=KV_NAMES[f.get("--kv-cache-dtype") or "auto"],
                     mem_fraction_static=float(f["--mem-fraction-static"]),
                     max_model_len=int(f["--context-length"]), max_num_seqs=running)
    return s, running, dp


def simulate_launch(data: dict, run_cli, args_only: bool = False):
    """``kvplan simulate`` on the emitted deployment (the flags read back, every replica): a closed loop of
    --max-num-seqs users per replica, three equal requests each, at most that batch running per replica: the run the
    batch row judged. Its JSON (``args_only``: the command line's arguments)."""
    s, running, dp = deployment_from_launch(data)
    par = s.parallelism
    fraction = (("--gpu-memory-utilization", s.gpu_memory_utilization) if s.gpu_memory_utilization is not None
                else ("--mem-fraction-static", s.mem_fraction_static))
    args = ["simulate", "-m", data["model"], "-g", data["hardware"], "--nodes", str(data["nodes"]),
            "--gpus", str(par.gpus), "--tp", str(par.tp), "--pp", str(par.pp), "--dp", str(dp),
            *(["--ep", str(par.ep)] if par.ep else []), "--engine", data["launch"]["engine"],
            "--kv-dtype", s.kv_dtype.value, fraction[0], str(fraction[1]), "--max-model-len", str(s.max_model_len),
            "--prompt", str(data["prompt_tokens"]), "--decode", str(data["decode_tokens"]),
            "--users", str(running * dp), "--requests", str(3 * running * dp), "--max-batch", str(running),
            "-f", "json"]
    if args_only:
        return args
    r = run_cli(*args)
    assert r.code == 0, (args, r.err)
    return r.json()


def replica_percentile(data: dict, run_cli, q: int) -> float:
    """The TPOT percentile over one replica's requests (replica 0 of ``simulate_launch``'s run, its per-request
    table): the DP replicas run the same closed loop, so the deployment's percentile over all of them is that of DP
    copies of one replica's requests (its p99 is the replica's slowest request), while the batch row judges one
    replica's own (``simulate.simulated_batch``)."""
    import csv
    import io

    import numpy as np

    r = run_cli(*simulate_launch(data, run_cli, args_only=True)[:-2], "-f", "csv")
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO("\n".join(x for x in r.out.splitlines() if not x.startswith("#")))))
    tpot = [float(x["TPOT (seconds)"]) for x in rows if x["replica"] == "0" and x["TPOT (seconds)"]]
    return float(np.percentile(tpot, q))


def sweep_point_on_launch(d: dict, run_cli, rate: float, requests: int, seed: int = 0) -> dict:
    """``kvplan simulate --sweep-rate R:R:1`` (one point, judged by the SLO model with the plan's TTFT and TPOT
    targets at their percentile and the attainment) on the deployment the emitted flags launch, at most
    --max-num-seqs running per replica: the point's JSON."""
    s, running, _ = deployment_from_launch(d)
    args = simulate_launch(d, run_cli, args_only=True)
    args = args[:args.index("--users")]
    tpot_key = next(k for k in d if k.startswith("tpot_seconds_p") and k.endswith("_at_most"))
    slo = ["--tpot-slo", f"{d[tpot_key] * 1e3:g}ms", "--slo-percentile", tpot_key.split("_p")[1].split("_")[0]]
    ttft_key = next((k for k in d if k.startswith("ttft_seconds_p") and k.endswith("_at_most")), None)
    if ttft_key is not None:
        slo += ["--ttft-slo", f"{d[ttft_key] * 1e3:g}ms"]
    r = run_cli(*args, "--sweep-rate", f"{rate:g}:{rate:g}:1", "--requests", str(requests), "--seed", str(seed),
                "--max-batch", str(running), *slo, "-f", "json")
    assert r.code == 0, (args, r.err)
    (point,) = r.json()["sweep"]
    return point


def check_targets(data: dict, target: str, run_cli=None) -> list[str]:
    """The targets the emitted deployment misses, each re-computed by kvplan tpot / concurrency on it, and (given
    ``run_cli``) the TPOT target by kvplan simulate on it at the SLO's percentile (p99 unless the plan says)."""
    s, running, dp = deployment_from_launch(data)
    sim = simulate_launch(data, run_cli) if run_cli is not None else None
    tp_plan = kvplan.plan_tpot(s, kvplan.TpotOptions(batch=running))
    tpot = tp_plan.tpot_mean.number()
    missed = []
    for t in (parse_target(x) for x in target.split(",")):
        if t.metric == "tpot" and not tpot <= t.bound:
            missed.append(f"{t.text}: kvplan tpot --batch {running} = {tpot * 1e3:.2f} ms")
        if t.metric == "tpot" and sim is not None:
            key = next(k for k in data if k.startswith("tpot_seconds_p") and k.endswith("_at_most"))
            q = key.removesuffix("_at_most")
            got = sim[q] if dp == 1 else replica_percentile(data, run_cli, int(q.removeprefix("tpot_seconds_p")))
            if not got <= t.bound:
                missed.append(f"{t.text}: kvplan simulate's TPOT {q} = {got * 1e3:.2f} ms")
        elif t.metric == "concurrency":
            ctx = t.context or s.context_tokens
            at = s.with_(decode_tokens=ctx - s.prompt_tokens)
            held = kvplan.plan_concurrency(at).max_concurrency_per_replica.number()
            if min(held, running) * dp < t.bound:
                missed.append(f"{t.text}: min({held}, {running}) x {dp}")
        elif t.metric == "rate":
            # a request's time: its prefill, then decode x TPOT; DP replicas of `running` requests each
            rate = dp * running / (tp_plan.ttft.number() + s.decode_tokens * tpot)
            if rate < t.bound:
                missed.append(f"{t.text}: {rate:.3g} rps")
            if run_cli is not None:
                # kvplan simulate on the launch fed the rate (as many requests as the plan's load run): the SLO
                # model's --sweep-rate point meets the TPOT (and TTFT) targets at their percentile, the attainment,
                # and keeps up
                point = sweep_point_on_launch(data, run_cli, t.bound, data["load"]["requests"])
                if not point["meets_targets"]:
                    missed.append(f"{t.text}: kvplan simulate at {t.bound:g} rps misses ({point['decided_by']})")
    return missed


def test_the_issue_repro_emits_the_batch_that_met_the_target(run_cli):
    # the issue: the search found a batch meeting 40 ms, then --max-num-seqs 69 "decodes at 49.9 ms (SLO 50 ms)"
    r = run_cli("recommend", "--target", "concurrency>=64@31k,tpot<=40ms", "--emit", "vllm", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    flags = _flags(d["launch"]["command"])
    best = d["sizing"]["candidates"][0]
    # --max-num-seqs is the batch the search judged, and the plan's batch row (one number, three places)
    assert int(flags["--max-num-seqs"]) == best["batch"] == d["batch"]
    assert d["tpot_slo_seconds"] == 0.040 and d["tpot_seconds_at_batch"] <= 0.040
    # kvplan tpot on the launched deployment at that batch: a steady mean within 40 ms
    assert check_targets(d, "concurrency>=64@31k,tpot<=40ms", run_cli) == []
    assert all(v["met"] for v in d["targets"])
    # the SLO's basis is said: the SLO model's simulation at p99
    assert d["tpot_slo_basis"].startswith("simulated") and "p99" in d["tpot_slo_basis"]
    batch_row = next(x for x in d["recommendations"] if x["key"] == "batch")
    assert "TPOT p99" in batch_row["reason"] and "(simulated)" in batch_row["reason"]
    assert "--target tpot<=40ms" in batch_row["reason"]


WORKLOADS = {"chat": ("4096", "300"), "reasoning": ("1000", "30000")}
GRID = [(w, m, g, e) for w in WORKLOADS for m in ("llama-3.1-8b", "deepseek-r1") for g in ("h100-sxm", "h200")
        for e in ("vllm", "sglang")]


@pytest.mark.parametrize(("workload", "model", "gpu", "engine"), GRID)
@pytest.mark.parametrize("target", ["tpot<=40ms", "concurrency>=64,tpot<=50ms", "concurrency>=32,rate>=0.05rps"])
def test_every_emitted_deployment_meets_its_targets(run_cli, workload, model, gpu, engine, target):
    prompt, decode = WORKLOADS[workload]
    r = run_cli("recommend", "-m", model, "--prompt", prompt, "--decode", decode, "--target", target,
                "--candidates", gpu, "--emit", engine, "-f", "json")
    if r.code == 2 and "no layout" in r.err:   # nothing on this GPU meets it: said, and nothing emitted
        pytest.skip(r.err.strip().splitlines()[-1])
    assert r.code == 0, r.err
    d = r.json()
    assert check_targets(d, target, run_cli) == []
    assert all(v["met"] for v in d["targets"])
    # the other emitted numbers are the planned deployment's
    s, running, dp = deployment_from_launch(d)
    assert (s.parallelism.tp, s.parallelism.pp, dp) == (d["parallelism"]["tp"], d["parallelism"]["pp"],
                                                        d["parallelism"]["dp"])
    assert s.kv_dtype.value == d["kv_dtype_recommended"] and running == d["batch"]
    assert d["sizing"]["candidates"][0]["batch"] == d["batch"]     # the search's batch is the emitted one
    assert s.max_model_len == d["context_tokens"]


def test_a_search_without_a_tpot_target_holds_the_slo_the_batch_is_planned_on():
    from kvplan.options.recommend import recommend_request

    r = recommend_request({"model": "llama-3.1-8b"}, target="concurrency>=32", candidates="h100-sxm")
    assert [t.text for t in r.targets] == ["concurrency>=32", "tpot<=50ms"]
    r = recommend_request({"model": "llama-3.1-8b"}, tpot_slo="30ms", target="rate>=1rps", candidates="h100-sxm")
    assert [(t.metric, t.bound) for t in r.targets] == [("rate", 1.0), ("tpot", 0.030)]


def test_the_slo_is_the_targets_and_the_tighter_of_two():
    from kvplan.options.recommend import recommend_request

    base = {"model": "llama-3.1-8b", "hardware": "h100-sxm"}
    assert recommend_request(base).options.tpot_slo == 0.05                      # the default
    r = recommend_request(base, target="tpot<=40ms", candidates="h100-sxm")
    assert (r.options.tpot_slo, r.options.slo_origin) == (0.040, "--target tpot<=40ms")
    r = recommend_request(base, tpot_slo="30ms", target="tpot<=40ms", candidates="h100-sxm")
    assert r.options.tpot_slo == 0.030 and r.options.slo_origin.startswith("--tpot-slo")
    r = recommend_request(base, tpot_slo="60ms", target="tpot<=40ms", candidates="h100-sxm")
    assert r.options.tpot_slo == 0.040


def test_a_target_verdict_judges_the_plan_at_its_batch():
    # Llama-3.1-8B fp8 on a 64 GiB pool: 33 requests of 31,000 tokens fit (test_recommend's hand count); at a loose
    # SLO the batch is 33, so 33 x 1 replica = 33 run: concurrency>=33 is met, >=34 is not
    s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), gpus=1, tp=1,
                 kv_pool_bytes=64 * GIB, prompt_tokens=1000, decode_tokens=30_000)
    ok = plan_recommend(s, RecommendOptions(tpot_slo=1.0, targets=(parse_target("concurrency>=33"),)))
    short = plan_recommend(s, RecommendOptions(tpot_slo=1.0, targets=(parse_target("concurrency>=34"),)))
    assert ok.batch.value == 33 and ok.targets[0].met
    assert not short.targets[0].met
    assert "33 running per replica x 1 replica(s) = 33" in note_text(short.targets[0].figure)


# --- advice follows the pinned engine's capabilities ---------------------------------------------------------------
def _llama(engine: str) -> Scenario:
    return Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), gpus=1, tp=1,
                    kv_pool_bytes=64 * GIB, prompt_tokens=1000, decode_tokens=30_000, engine=engine)


@pytest.mark.parametrize("engine", ["vllm==0.11", "vllm==0.13"])
def test_a_vllm_release_without_offloading_gets_neither_offload_nor_swap(engine):
    # vLLM's native offloading starts in v0.14.0 (engines/vllm.py OFFLOAD_SINCE: v0.11.0 has no
    # --kv-offloading-size, v0.11.1-v0.13.0 pass num_cpu_blocks 0, which CPUOffloadingSpec refuses) and V1 preempts
    # by recompute only; with 2 TB of DRAM the newest release would offload and swap (test_recommend's flags test)
    s = _llama(engine)
    plan = plan_recommend(s, RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    assert not plan.offload and plan.preemption_mode == "recompute"
    offload, pre = plan.row("kv_offload"), plan.row("preemption")
    assert str(offload.value).startswith("off")
    assert "pin vllm>=0.14 for native KV offloading" in note_text(offload.reason)
    # a reason of words alone is a Note too (Row makes it one): the output layer formats every reason
    assert all(isinstance(r.reason, Note) for r in plan.rows), [type(r.reason) for r in plan.rows]
    assert "swap" not in str(pre.value) and "recompute" in str(pre.value)
    assert "pin vllm>=0.14" in pre.why_differs
    lc = s.engine_adapter.launch_command(plan)
    assert not any(f.flag.startswith("--kv-offloading") for f in lc.flags)
    assert not any(f.startswith("--kv-offloading") for f, _ in lc.omitted)   # not even planned


def test_the_release_with_offloading_keeps_it():
    plan = plan_recommend(_llama("vllm==0.14"), RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    assert plan.offload and plan.preemption_mode == "swap"


def test_vllm_v0_swaps_to_its_swap_space_and_says_so():
    # vLLM 0.7.3 (V0: VLLM_USE_V1 defaults to 1 only from v0.8.0) has no offloading tier, but its scheduler swaps a
    # preempted request when started with --preemption-mode swap, to --swap-space GiB per GPU (vllm@v0.7.3
    # vllm/core/scheduler.py _preempt, vllm/engine/arg_utils.py); kvplan's own simulate says "pin vllm==0.7.3 (V0,
    # which swaps)". A 31K-token swap is 33x cheaper than its recompute here, so V0 should swap, and the release
    # must not be told "recompute is the only mode".
    # Llama-3.1-8B fp8: 32 layers x 8 KV heads x 128 x 2 (K, V) x 1 B = 65,536 B per token; 31,000 tokens in
    # 16-token blocks = 31,008 tokens = 2,032,140,288 B; a 64 GiB pool holds floor(68,719,476,736 / 2,032,140,288)
    # = 33, the batch at a loose SLO; a swap space parking all 33: 33 x 2,032,140,288 = 67,060,629,504 B = 62.45 GiB
    # (< 2 TB / 8 GPUs of DRAM), printed as whole GiB: 62
    plan = plan_recommend(_llama("vllm==0.7.3"),
                          RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    assert plan.batch.value == 33
    assert not plan.offload and plan.preemption_mode == "swap"
    assert plan.offload_bytes_per_gpu.value == 33 * 2_032_140_288
    pre, offload = plan.row("preemption"), plan.row("kv_offload")
    assert "--preemption-mode swap" in str(pre.value) and "only mode" not in str(pre.value)
    assert str(offload.value).startswith("off") and "--preemption-mode swap" in note_text(offload.reason)
    flags = {f.flag: f.value for f in _llama("vllm==0.7.3").engine_adapter.launch_command(plan).flags}
    assert flags["--preemption-mode"] == "swap" and flags["--swap-space"] == "62"
    assert "--enable-prefix-caching" in flags          # V0's prefix cache is off by default; the row says on
    assert not any(f.startswith("--kv-offloading") for f in flags)
    # V1 before 0.14 (0.8.0: the first V1 default) can do neither: no swap flags
    v1 = plan_recommend(_llama("vllm==0.8.0"), RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    assert v1.preemption_mode == "recompute" and "only mode" in str(v1.row("preemption").value)
    v1_flags = {f.flag for f in _llama("vllm==0.8.0").engine_adapter.launch_command(v1).flags}
    assert not v1_flags & {"--preemption-mode", "--swap-space", "--enable-prefix-caching"}


def test_the_plan_is_priced_with_the_context_limit_its_launch_command_prints(run_cli):
    # --emit prints --max-model-len 31000 (prompt + decode); vLLM V0 (0.7.3) then keeps chunked prefill off (it turns
    # it on only past 32K of context) and profiles one step of 31,000 tokens: the dense MLP's transients
    # 31,000 x (3 x 14,336 + 2 x 4,096) x 2 B = 3,174,400,000 B, where at the model's 131,072-token limit the
    # profile was 8,192 tokens and the sampler's 256 x 128,256 x 41.2 + 2.5 x 8,192 x 4,096 = 1,436,627,763 B led.
    # The plan priced at 131,072 held 28 requests; the launched engine holds 27 (the issue's flags-break-the-plan).
    d = run_cli("recommend", "-m", "llama-3.1-8b", "--prompt", "1000", "--decode", "30000", "--target",
                "concurrency>=16,tpot<=50ms", "--candidates", "h100-sxm", "--engine", "vllm==0.7.3", "--emit", "vllm",
                "-f", "json").json()
    s, running, _ = deployment_from_launch(d)
    assert s.max_model_len == 31_000 and d["context_limit_tokens"] == 31_000
    launched_pool = int(kvplan.plan_concurrency(s).budget.kv_pool.number())
    assert d["kv_pool_bytes_per_gpu"] == launched_pool
    unpinned = s.with_(max_model_len=None, max_num_seqs=None)
    assert int(kvplan.plan_concurrency(unpinned).budget.kv_pool.number()) - launched_pool == (
        3_174_400_000 - 1_436_627_763)
    assert running <= kvplan.plan_concurrency(s).max_concurrency_per_replica.number()
    assert d["sizing"]["candidates"][0]["batch"] == d["batch"] == running    # the search priced it launched too
    assert "launch command prints" in d["derivations"]["context_limit_tokens"]["formula"]


def test_the_emitted_offloading_size_is_what_simulate_models():
    """The --kv-offloading-size recommend emits for a vLLM >= 0.14 release is the option kvplan simulate takes for
    vLLM's CPU offloading connector (kvplan.engines.vllm_scheduler.CpuPool): on the same deployment, with a pool small
    enough to preempt, the victims load their blocks back instead of recomputing them."""
    import numpy as np

    from kvplan.calc import simulate as sim
    from kvplan.inputs import workload as wl

    s = _llama("vllm==0.14")
    plan = plan_recommend(s, RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    flags = {f.flag: f.value for f in s.engine_adapter.launch_command(plan).flags}
    gib = float(flags["--kv-offloading-size"])
    assert flags["--kv-offloading-backend"] == "native" and gib > 0
    tight = s.with_(kv_pool_bytes=200 * 2**20)          # 100 blocks of 2 MiB: every trace below preempts
    work = wl.build(requests=30, seed=3, prompt=wl.parse_dist("uniform:50,400", "p"),
                    output=wl.parse_dist("lognormal:mean=300,p99=1200", "o"), max_len=1500, rate=20.0)
    off = sim.simulate(tight, work, sim.SimOptions())
    on = sim.simulate(tight, work, sim.SimOptions(kv_offloading_bytes=int(gib * 2**30)))
    assert off.preemptions.sum() > 0 and on.offload["loads"] > 0
    assert int(np.sum(on.recomputed)) < int(np.sum(off.recomputed)) / 4


def test_sglang_hicache_is_in_every_modelled_release():
    # --enable-hierarchical-cache: sgl-project/sglang @v0.4.6 python/sglang/srt/server_args.py, the oldest release
    # kvplan models, and every release to v0.5.23 (engines/sglang.py HICACHE_SOURCE)
    s = _llama("sglang==0.4.6").with_(mem_fraction_static=0.85)   # v0.4.6's default fraction is not modelled
    plan = plan_recommend(s, RecommendOptions(tpot_slo=1.0, dram_bytes_per_node=2_000_000_000_000))
    assert plan.offload
    assert "--enable-hierarchical-cache" in {f.flag for f in s.engine_adapter.launch_command(plan).flags}


def test_rate_target_meets_by_hand():
    # Little's law: rate = DP x B / (prefill + (decode - 1) x the mean TPOT); the verdict's own figure spells the
    # arithmetic out (to its 3 significant digits)
    s = _llama("neutral")
    plan = plan_recommend(s, RecommendOptions(tpot_slo=0.05, targets=(parse_target("rate>=0.001rps"),)))
    v = plan.targets[0]
    b, tpot, pf = plan.batch.value, plan.tpot_mean_at_batch.value, plan.prefill_seconds.value
    assert v.met == (b / (pf + 29_999 * tpot) >= 0.001)
    text = note_text(v.figure)
    assert text.startswith("closed form (Little's law)")
    assert math.isclose(float(text.split(" requests/s")[0].split("= ")[-1]), b / (pf + 29_999 * tpot), rel_tol=5e-3)
    assert plan.rate_closed_form.value == pytest.approx(b / (pf + 29_999 * tpot))


# --- the batch row is the SLO model's --------------------------------------------------------------------------------
def test_the_emitted_batch_is_the_largest_the_simulator_passes(run_cli):
    # the chat case binds on the SLO (batch < the pool's and the engine's limits): kvplan simulate on the emitted
    # deployment meets 40 ms at p99 with --max-num-seqs B and misses it with B + 1 (the batch is the largest, not a
    # safe lower one)
    r = run_cli("recommend", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--prompt", "4096", "--decode",
                "300", "--kv-dtype", "fp8", "--tpot-slo", "40ms", "--emit", "vllm", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    b = d["batch"]
    assert b == d["batch_tpot_slo"] < min(d["batch_capacity"], d["batch_engine_limit"])
    assert simulate_launch(d, run_cli)["tpot_seconds_p99"] <= 0.040
    over = {**d, "launch": {**d["launch"], "command": d["launch"]["command"].replace(f"--max-num-seqs {b}",
                                                                                  f"--max-num-seqs {b + 1}")}}
    assert simulate_launch(over, run_cli)["tpot_seconds_p99"] > 0.040
    # the plan's figure is that run's (to 1e-3: the command line's deployment is read back from the flags)
    assert d["tpot_seconds_at_batch"] == pytest.approx(simulate_launch(d, run_cli)["tpot_seconds_p99"], rel=1e-3)


def test_the_batch_search_equals_a_brute_force_over_every_batch():
    # a pool of 12 requests of 31K tokens and a 9 ms SLO (batch 1's simulated p99 is 6.8 ms, batch 12's 10.9 ms):
    # every batch
    # 1..12 simulated, the largest that meets is the row's batch (the gallop from the closed form's batch and the
    # bisection may skip none)
    from kvplan.calc.simulate import simulated_batch
    from kvplan.calc.slo import SloTargets

    s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), gpus=1, tp=1,
                 kv_pool_bytes=24 * GIB, prompt_tokens=1000, decode_tokens=30_000, kv_dtype_request="fp8")
    plan = plan_recommend(s, RecommendOptions(tpot_slo=0.009))
    cap = plan.batch_capacity.value
    assert cap == 12
    meets = [b for b in range(1, cap + 1) if simulated_batch(plan.scenario, b, SloTargets(tpot=0.009)).verdict.meets]
    assert meets and meets[-1] < cap and plan.batch_slo.value == plan.batch.value == meets[-1]
    # the planned TPOT is that run's p99, and the closed form's mean sits beside it
    run = simulated_batch(plan.scenario, plan.batch.value, SloTargets(tpot=0.009))
    assert plan.tpot_at_batch.value == run.figures["tpot_seconds_p99"].value
    assert plan.tpot_at_batch.why.formula.startswith("simulated")


def test_the_percentile_and_attainment_reach_the_batch_row(run_cli):
    # p50 is never above p99 for the same runs, so the batch at p50 is at least the batch at p99
    base = ("recommend", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--prompt", "4096", "--decode", "300",
            "--kv-dtype", "fp8", "--tpot-slo", "40ms", "-f", "json")
    p99, p50 = (run_cli(*base, *extra).json() for extra in ((), ("--slo-percentile", "50")))
    assert p50["tpot_seconds_p50_at_most"] == 0.040 and "tpot_seconds_p99_at_most" not in p50
    assert p50["batch"] >= p99["batch"]
    assert "TPOT p50" in next(x for x in p50["recommendations"] if x["key"] == "batch")["reason"]
    r = run_cli(*base, "--slo-percentile", "75")
    assert r.code == 2 and "--slo-percentile" in r.err and r.err.count("\n") == 1


def test_largest_meeting_by_hand():
    # meets(b) = b <= 37 within 1..100: 37 is the largest, 38 the first miss, from any start
    from kvplan.calc.slo import largest_meeting

    for start in (1, 2, 36, 37, 38, 40, 64, 100, 500):
        assert largest_meeting(lambda b: b <= 37, start, 100) == (37, 38)
    assert largest_meeting(lambda b: b <= 100, 5, 100) == (100, None)     # the ceiling meets
    assert largest_meeting(lambda b: False, 50, 100) == (0, 1)             # batch 1 misses


def test_the_search_rejudges_a_layout_at_the_batch_the_concurrency_target_needs():
    # the 24 GiB pool above, a 9 ms SLO: batches 1..6 meet when simulated (6.8 .. 8.7 ms at p99), 7 misses (9.07 ms)
    from dataclasses import replace

    from kvplan.calc import costs
    from kvplan.calc.sizing import Candidate, _rejudge
    from kvplan.calc.slo import SloTargets

    s = Scenario(model=load_model("llama-3.1-8b"), hardware=load_hardware("h100-sxm"), gpus=1, tp=1,
                 kv_pool_bytes=24 * GIB, prompt_tokens=1000, decode_tokens=30_000, kv_dtype_request="fp8")
    c = Candidate("h100-sxm", 1, 1, 1, 1, 1, None, "fp8", 12, 12, 0.008, 1.0, None, ())
    slo = SloTargets(tpot=0.009)
    ok = _rejudge(c, s, (parse_target("concurrency>=6"), parse_target("tpot<=9ms")), slo)
    short = _rejudge(c, s, (parse_target("concurrency>=7"), parse_target("tpot<=9ms")), slo)
    assert (ok.batch, ok.meets, ok.basis) == (6, True, "simulated")
    assert short.batch == 0 and not short.meets and "6 < 7 needed" in short.failed[0]
    # the rate at the simulated batch 6 (not the closed form's 12), Little's law: 6 / (T_pf + (D - 1) x TPOT), TPOT
    # the mean with the other five's prefills in between, TPOT(6) + T_pf x 5 / D
    step = costs.step_model(s)
    t_pf = step.prefill_seconds(1000, 0, int(s.engine_adapter.batch_limits_for(s)[0].value))
    mean = float(step.steady_tpot(1000, 30_000, 6)) + t_pf * 5 / 30_000
    assert ok.requests_per_second == pytest.approx(6 / (t_pf + 29_999 * mean))
    assert replace(ok, basis="closed form").figures()["batch"].why.formula.startswith("closed form")


# --- a TTFT target: judged on the launched deployment, and held by the --target search ---------------------------
# Llama-3.1-8B, a 32,000-token prompt on one H200 GPU: the matmuls alone are 2 x 6.98e9 (non-embedding) parameters x
# 32,000 tokens = 4.47e14 FLOPs, causal attention 4 x 32 layers x 4,096 x 32,000^2 / 2 = 2.68e14, 7.15e14 in all; at
# the H200's full dense bf16 peak (989 TFLOP/s, NVIDIA's datasheet) that is 0.72 s, so no TP1 instance gives a first
# token within 500 ms, whatever the batch or the rate. At TP2 the same bound is 0.36 s, at TP4 0.18 s.
RAG_32K = ("-m", "llama-3.1-8b", "--prompt", "32000", "--decode", "500", "--engine", "vllm", "--emit", "vllm")
PREFILL_BOUND_TP1 = (2 * 6.98e9 * 32_000 + 4 * 32 * 4096 * 32_000**2 / 2) / 989e12


def test_a_ttft_target_no_batch_can_meet_is_said_missed_not_ignored(run_cli):
    # --ttft-slo used to reach the PD row only: the launch command (TP1, its batch) could never give a first token
    # within 500 ms and recommend said nothing of it
    assert PREFILL_BOUND_TP1 > 0.5
    r = run_cli("recommend", *RAG_32K, "-g", "h200", "--tp", "1", "--ttft-slo", "500ms", "-f", "json")
    assert r.code == 0, r.err
    d = r.json()
    t = d["ttft_target"]
    assert not t["met"] and t["target"] == "TTFT p99 <= 500 ms (--ttft-slo)"
    assert d["ttft_seconds_unloaded"] >= PREFILL_BOUND_TP1
    # the figure is kvplan tpot's TTFT on the deployment the launch command starts, and kvplan simulate on that
    # launch, requests far apart (each alone), gives no first token within 500 ms either
    s, running, dp = deployment_from_launch(d)
    assert d["ttft_seconds_unloaded"] == pytest.approx(kvplan.plan_tpot(s, kvplan.TpotOptions(batch=1)).ttft.number())
    args = simulate_launch(d, run_cli, args_only=True)
    i = args.index("--users")
    sim = run_cli(*args[:i], "--rate", "0.01", "--requests", "5", "--max-batch", str(running), "-f", "json")
    assert sim.code == 0, sim.err
    assert sim.json()["ttft_seconds_p50"] > 0.5
    # said on the first screen, and the PD row's split against no colocated goodput is no "infx" multiple
    brief = run_cli("recommend", *RAG_32K, "-g", "h200", "--tp", "1", "--ttft-slo", "500ms", "--brief").out
    assert "TTFT target: TTFT p99 <= 500 ms (--ttft-slo): NOT met" in brief.replace("\n", " ")
    full = run_cli("recommend", *RAG_32K, "-g", "h200", "--tp", "1", "--ttft-slo", "500ms").out
    assert "infx" not in full and "inf x" not in full
    # a target a request alone meets is met (and said to be a request alone's, under load the PD row's)
    loose = run_cli("recommend", *RAG_32K, "-g", "h200", "--tp", "1", "--ttft-slo", "5s", "-f", "json").json()
    assert loose["ttft_target"]["met"] and "under load" in loose["ttft_target"]["figure"]
    assert "ttft_target" not in run_cli("recommend", *RAG_32K, "-g", "h200", "--tp", "1", "-f", "json").json()


def test_the_search_holds_a_ttft_target_for_a_request_alone(run_cli):
    # without a TTFT target the fewest GPUs meeting tpot<=50ms is one H200 at TP1; with --ttft-slo 500ms TP1 cannot
    # (its prefill alone is over 0.72 s, above), so the search goes to a wider TP and says why the one-GPU layout
    # missed; the launch it emits, re-run on kvplan tpot and simulate, gives its first token within 500 ms
    target = ("--target", "tpot<=50ms", "--candidates", "h200", "-f", "json")
    plain = run_cli("recommend", *RAG_32K, *target).json()
    assert (plain["sizing"]["candidates"][0]["tp"], plain["sizing"]["candidates"][0]["gpus"]) == (1, 1)
    r = run_cli("recommend", *RAG_32K, *target, "--ttft-slo", "500ms")
    assert r.code == 0, r.err
    d = r.json()
    best = d["sizing"]["candidates"][0]
    assert best["tp"] >= 2 and d["ttft_target"]["met"]
    assert any(c["tp"] == 1 and any("--ttft-slo: TTFT p99" in f and "for a request alone" in f for f in c["failed"])
               for c in d["sizing"]["near_misses"])
    assert check_targets(d, "tpot<=50ms", run_cli) == []
    s, running, dp = deployment_from_launch(d)
    assert kvplan.plan_tpot(s, kvplan.TpotOptions(batch=1)).ttft.number() <= 0.5
    args = simulate_launch(d, run_cli, args_only=True)
    i = args.index("--users")
    sim = run_cli(*args[:i], "--rate", "0.01", "--requests", "5", "--max-batch", str(running), "-f", "json")
    assert sim.code == 0, sim.err
    assert sim.json()["ttft_seconds_p99"] <= 0.5
    # a TTFT no layout gives (1 ms: below the 4-node TP8 x PP4 prefill too) is refused in one line that names it
    none = run_cli("recommend", *RAG_32K, *target[:-2], "--ttft-slo", "1ms")
    assert none.code == 2 and "--ttft-slo" in none.err and none.err.count("\n") == 1, none.err
