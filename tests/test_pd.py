"""`kvplan pd`: the KV transfer bytes exactly, the interference terms by hand, and the verdicts."""

import pytest


def pd_json(run_cli, *args):
    r = run_cli("pd", *args, "-f", "json")
    assert r.code == 0, r.err
    return r.json()


def test_transfer_bytes_are_the_prompt_kv_on_each_receiving_gpu(run_cli):
    # DeepSeek-R1 bf16 KV on 2 nodes of 8 H200 at TP8: a 1,000-token prompt's latent, block-rounded to 64-token
    # blocks (1,024 tokens), whole on every TP rank: 61 x 1,152 B x 1,024 = 71,958,528 B per receiving GPU, over the
    # DGX NIC 50 GB/s per GPU at link efficiency 0.82 (H200 preset): 71,958,528 / 41e9 = 1.7551 ms.
    d = pd_json(run_cli, "--nodes", "2")
    assert d["kv_transfer_bytes_per_gpu"] == 61 * 1152 * 1024
    assert d["kv_transfer_seconds"] == pytest.approx(61 * 1152 * 1024 / (50e9 * 0.82))
    # overlapped with the prefill layer by layer: only the last layer's share shows, transfer / 61
    assert d["kv_transfer_exposed_seconds"] == pytest.approx(d["kv_transfer_seconds"] / 61)


def test_gqa_transfer_is_sharded_over_tp(run_cli):
    # Llama-3.1-8B at TP2: 4 of 8 KV heads per rank: 32 layers x 4 x 256 x 2 B = 65,536 B/token x 8,000 tokens
    # (16-token blocks: 8,000 exactly) = 524,288,000 B per receiving GPU.
    d = pd_json(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "2", "--prompt", "8000", "--decode", "500")
    assert d["kv_transfer_bytes_per_gpu"] == 65_536 * 8000


def test_colocated_interference_by_hand(run_cli):
    d = pd_json(run_cli, "--nodes", "2")
    b, t_pf, plain, dec = (d["colocated_batch"], d["prefill_seconds"], d["tpot_seconds_plain"], d["decode_tokens"])
    # mean TPOT with prefills = TPOT(B) + T_pf x B / D; prefill share = T_pf / (T_pf + D x TPOT / B)
    assert d["tpot_seconds_colocated_mean"] == pytest.approx(plain + t_pf * b / dec)
    mean = d["tpot_seconds_colocated_mean"]
    assert d["prefill_share"] == pytest.approx(t_pf / (t_pf + dec * mean / b))
    assert d["interference_gpu_seconds_per_request"] == pytest.approx(t_pf * 8)   # 8 GPUs per instance


def test_the_workload_documents_case_is_not_worth_disaggregating(run_cli):
    # 1K prefill, 30K decode: the prefill is a sliver of the GPU time, and a 1 + 1 split halves the decode pool.
    d = pd_json(run_cli, "--nodes", "2")
    assert d["recommend_disaggregation"] is False
    assert d["prefill_share"] < 0.01
    assert d["disaggregated_tokens_per_second"] < d["colocated_tokens_per_second"]
    assert any("prefill is" in r for r in d["reasons"])


def test_prefill_heavy_work_disaggregates(run_cli):
    # 8K prompts, 500 output tokens, a tight 20 ms SLO on 8 H100s: prefill is ~30% of a colocated replica's time.
    d = pd_json(run_cli, "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--prompt", "8k", "--decode", "500",
                "--tpot-slo", "20ms")
    assert d["recommend_disaggregation"] is True
    assert d["prefill_share"] > 0.2
    assert d["breakeven_prompt_over_output"] is not None and d["breakeven_prompt_over_output"] <= 16


def test_one_instance_cannot_be_split(run_cli):
    r = run_cli("pd")
    assert r.code == 2 and "needs two" in r.err and "--nodes 2" in r.err


@pytest.mark.parametrize("args, needle", [
    (("--nodes", "2", "--prompt", "0"), "both a prompt and an output"),
    (("--nodes", "2", "--decode", "0"), "both a prompt and an output"),
    # one request alone takes ~8.8 ms per token with its prefill on this node: a 5 ms SLO is out of reach
    (("--nodes", "2", "--tpot-slo", "5ms"), "no colocated batch meets the 5 ms TPOT SLO"),
    (("--nodes", "2", "--handover-ms", "-1000000"), "--handover-ms '-1000000' is not a time"),   # TTFT went negative
    (("--nodes", "2", "--nic-gbps", "0"), "--nic-gbps '0' must be a positive"),   # named --host-link-gbs before
])
def test_pd_refuses_what_it_cannot_answer(run_cli, args, needle):
    r = run_cli("pd", *args)
    assert r.code == 2 and needle in r.err and r.err.count("\n") == 1, r.err
