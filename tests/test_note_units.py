"""Notes carry typed values: the output layer formats them, so ``--units`` reaches the numbers inside notes.

Each command test runs the same command in iec (the default) and si and finds the same note with the byte figures
converted; the expected text is worked out by hand in the comments.
"""

import json
from pathlib import Path

import pytest

from kvplan.render.output import note_text, text
from kvplan.specs.values import Bytes, Count, Note, Number, Ratio, Seconds, Tokens, note

LOGS = Path(__file__).parent / "data" / "logs"   # the suite also runs from outside the tree


# --- the note type and its formatting -------------------------------------------------------------------------------
def test_note_formats_each_value_per_units():
    n = note("the pool holds {pool} for {n} requests", pool=Bytes(3 * 2**30), n=Count(1234))
    assert note_text(n) == "the pool holds 3.00 GiB for 1,234 requests"
    # 3 x 2^30 = 3,221,225,472 B = 3.22 GB
    assert note_text(n, "si") == "the pool holds 3.22 GB for 1,234 requests"
    assert n.figures() == (Bytes(3 * 2**30), Count(1234))


def test_note_specs():
    # 0.01234 s as milliseconds to 3 significant digits: 12.3
    assert note_text(note("{t:ms:.3g} ms", t=Seconds(0.01234))) == "12.3 ms"
    # a fixed byte unit: 2^31 B = 2.0 GiB; in si 2,147,483,648 / 1e9 = 2.1 GB
    assert note_text(note("{b:GiB:,.1f}", b=Bytes(2**31))) == "2.0 GiB"
    assert note_text(note("{b:GiB:,.1f}", b=Bytes(2**31)), "si") == "2.1 GB"
    # an automatic unit with one decimal: 1.5 x 2^20 B = 1.5 MiB; 1,572,864 / 1e6 = 1.6 MB
    assert note_text(note("{b:.1}", b=Bytes(3 * 2**19))) == "1.5 MiB"
    assert note_text(note("{b:.1}", b=Bytes(3 * 2**19)), "si") == "1.6 MB"
    # a plain Python spec on the number: 1234 without a thousands separator; 3.14159 to one decimal
    assert note_text(note("{n:d} / {r:,.1f}x / {{x}}", n=Count(1234), r=Ratio(3.14159))) == "1234 / 3.1x / {x}"
    # without a spec a value prints as its table cell does: Ratio 3.20x, Tokens 1,000
    assert note_text(note("{r} at {t}", r=Ratio(3.2), t=Tokens(1000))) == "3.20x at 1,000"
    assert note_text(note("{n} missing", n=Number(None))) == "- missing"


def test_notes_join_and_refuse_plain_numbers():
    a, b = note("{x}", x=Bytes(1024)), note("{y} tokens", y=Tokens(2000))
    joined = "now " + Note.join("; ", [a, "text", b]) + "."
    assert note_text(joined) == "now 1.00 KiB; text; 2,000 tokens."
    assert note_text(joined, "si") == "now 1.02 kB; text; 2,000 tokens."   # 1,024 B = 1.024 kB
    assert text(joined, "si") == note_text(joined, "si")   # a note as a table cell
    with pytest.raises(TypeError):
        note("{n} requests", n=5)   # a number must come typed
    # text values go in as they are: a brace in a user's model id is not a template field
    assert note_text(note("{model} holds {b}", model="my{b}model", b=Bytes(2048))) == "my{b}model holds 2.00 KiB"


# --- commands: --units changes the numbers inside their notes ------------------------------------------------------
def _notes(run_cli, *args):
    r = run_cli(*args, "-f", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    return doc["notes"], doc


def test_compare_preemption_notes_follow_units(run_cli):
    # deepseek-r1 (MLA: kv_lora_rank 512 + rope 64 per layer, 61 layers) in bf16: (512 + 64) x 2 B x 61 = 70,272 B per
    # token, whole on every TP rank. At S = 1,000 + 20,000 = 21,000 tokens: 70,272 x 21,000 = 1,475,712,000 B per GPU
    # = 1.37 GiB (/ 2^30 = 1.3744) = 1.48 GB (/ 1e9 = 1.4757). vLLM V0's 4 GiB swap space: 4,294,967,296 //
    # 1,475,712,000 = 2 requests.
    iec, _ = _notes(run_cli, "compare-preemption")
    si, _ = _notes(run_cli, "compare-preemption", "--units", "si")
    v0 = "vLLM V0's default --swap-space of 4 GiB per GPU holds 2 such request(s) ({} per GPU each)."
    assert v0.format("1.37 GiB") in iec
    assert v0.format("1.48 GB") in si
    assert any("each of the 8 GPUs swaps all 1.48 GB over its own link" in n for n in si)


def test_compare_preemption_host_row_follows_units(run_cli):
    # the host row: 8 GPUs park one block-rounded shard each: 21,000 tokens -> 329 blocks of 64 = 21,056 tokens;
    # 8 x 70,272 x 21,056 = 11,837,177,856 B = 11.02 GiB = 11.84 GB, of the h200 node's 2 TB = 2e12 B = 1.82 TiB;
    # 2e12 // (70,272 x 21,056 x 8) = 168 requests
    r = run_cli("compare-preemption", "-f", "markdown", "--units", "si")
    assert ("| host DRAM for the swapped request (this node) | 11.84 GB of 2.00 TB: room for 168 such requests |"
            in r.out)
    r = run_cli("compare-preemption", "-f", "markdown")
    assert "| 11.02 GiB of 1.82 TiB: room for 168 such requests |" in r.out


def test_pd_transfer_reason_follows_units(run_cli):
    # deepseek-r1 bf16 KV: 70,272 B per token (above); the 1,000-token prompt in 64-token blocks is 16 blocks =
    # 1,024 tokens: 70,272 x 1,024 = 71,958,528 B per receiving GPU = 68.6 MiB (/ 2^20 = 68.625) = 72.0 MB (/ 1e6 =
    # 71.96); the h200 NIC is 50 GB/s per GPU per direction
    iec, doc = _notes(run_cli, "pd", "--nodes", "2")
    si, _ = _notes(run_cli, "pd", "--nodes", "2", "--units", "si")
    assert doc["kv_transfer_bytes_per_gpu"] == 71_958_528
    assert any(n.startswith("KV transfer 68.6 MiB per GPU over 50 GB/s: ") for n in iec)
    assert any(n.startswith("KV transfer 72.0 MB per GPU over 50 GB/s: ") for n in si)
    assert any("MiB" in r for r in doc["reasons"])   # JSON carries the note's text, in the units asked for
    assert not any("MiB" in n for n in si)


def test_recommend_offload_reason_follows_units(run_cli):
    # deepseek-r1 fp8 KV: (512 + 64) x 1 B x 61 layers = 35,136 B per token, whole on every TP rank. One request of
    # 31,000 tokens in 64-token blocks: 485 blocks = 31,040 tokens: 35,136 x 31,040 = 1,090,621,440 B per GPU =
    # 1,040.1 MiB (/ 2^20 = 1,040.09) = 1,090.6 MB. The h200 node's 2 TB over 8 GPUs: 250e9 B = 232.8 GiB = 250.0 GB.
    # 1,024 admitted requests grow 1,024 x 35,136 = 35,979,264 B per step = 34.3 MiB = 36.0 MB.
    def offload(*extra):
        r = run_cli("recommend", "-f", "json", *extra)
        assert r.code == 0, r.err
        doc = json.loads(r.out)
        return next(row for row in doc["recommendations"] if row["key"] == "kv_offload"), doc["notes"]

    iec, iec_notes = offload()
    si, si_notes = offload("--units", "si")
    assert "(1,040.1 MiB per GPU each) of 232.8 GiB host DRAM per GPU" in iec["reason"]
    assert "(1,090.6 MB per GPU each) of 250.0 GB host DRAM per GPU" in si["reason"]
    assert "while the pool grows 34.3 MiB per step" in iec["reason"]
    assert any("while the pool grows 36.0 MB per step, so offloading can wait" in n for n in si_notes)
    assert any("while the pool grows 34.3 MiB per step, so offloading can wait" in n for n in iec_notes)


def test_explain_log_reason_follows_units(run_cli):
    # qwen3-235b-a22b at TP=4 with bf16 KV: 4 KV heads / 4 ranks = 1 head of 128 dims, K and V, 2 B each, 94 layers:
    # 2 x 128 x 2 x 94 = 48,128 B per token per GPU. The gap to the log is 2,048 tokens = 128 blocks of 16 tokens:
    # 2,048 x 48,128 = 98,566,144 B = 0.092 GiB (/ 2^30 = 0.0918) = 0.099 GB (/ 1e9 = 0.0986)
    log = str(LOGS / "vllm-v1-qwen3-235b-a22b-fp8-4xh100.log")

    def reason(*extra):
        notes, _ = _notes(run_cli, "explain-log", log, "-g", "h100-sxm", "--weight-dtype", "fp8", *extra)
        return next(n for n in notes if n.startswith("GPU KV cache size (tokens): differs by 2,048"))

    assert "(128 blocks = 0.092 GiB) beyond the rounding band 180,816-181,040" in reason()
    assert "(128 blocks = 0.099 GB) beyond the rounding band 180,816-181,040" in reason("--units", "si")


def test_explain_log_does_not_fit_warning_follows_units(run_cli):
    # the h200 preset's 140.40 GiB: 140.4 x 2^30 = 150,753,352,089 B = 150.75 GB; the default prints it as 140.40 GiB
    # (SGLang v0.5.23 with DP attention over 8 ranks: 512 + 12,288 + 1,024 + 1,024 + 512 x 8 x 4.5 = 33,280 MB, + the
    # 1,536 MB of prefill CUDA graphs v0.5.23 captures for an MLA model on Hopper = 34,816 MB of 143,770:
    # mem_fraction_static round(0.75783, 3) = 0.758)
    log = str(LOGS / "sglang-deepseek-v3.2-exp-8xb200-dp8.log")

    def warning(*extra):
        r = run_cli("explain-log", log, "--weight-dtype", "bf16", "-f", "json", *extra)
        assert r.code == 0, r.err
        return next(w for w in json.loads(r.out)["warnings"] if "leaves no KV pool" in w)

    assert "left of h200's 140.40 GiB x mem_fraction_static 0.758" in warning()
    si = warning("--units", "si")
    assert "left of h200's 150.75 GB x mem_fraction_static 0.758" in si and "GiB" not in si
