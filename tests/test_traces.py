"""Public traces in their own formats (kvplan.inputs.traces, docs/traces.md): the Azure LLM inference traces,
BurstGPT, Mooncake's FAST'25 JSON lines and kvplan's own CSV, read from tests/data/traces/ (written by
tools/make_trace_samples.py, made-up rows in each format). Every expected figure below is read off the files' text
by hand (the first rows are quoted in the comments) or counted independently of kvplan."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.errors import KvplanError
from kvplan.inputs import workload as wl

DATA = Path(__file__).parent / "data" / "traces"
AZURE, BURST, MOON, OWN = (DATA / n for n in ("azure_code_300.csv", "burstgpt_300.csv", "mooncake_300.jsonl",
                                              "kvplan_300.csv"))
SIM = ("simulate", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "1", "--dp", "1")


def refused(run, *args) -> str:
    r = run(*args)
    assert r.code == 2 and r.err.count("\n") == 1 and "Traceback" not in r.err, (r.code, r.err)
    return r.err


def text(n) -> str:
    from kvplan.render.output import note_text

    return note_text(n)


def workload(trace, requests=None, **kw):
    fixed = wl.parse_dist("fixed:1", "x")
    n = requests or len(trace.prompts)
    return wl.build(requests=n, seed=0, prompt=fixed, output=fixed, max_len=10**6, trace=trace, **kw)


# --- each format loads, and its first rows are the file's -------------------------------------------------------
def test_an_azure_trace_gives_its_rows_relative_to_the_first():
    # TIMESTAMP,ContextTokens,GeneratedTokens
    # 2023-11-16 18:00:00.0180903,792,56
    # 2023-11-16 18:00:00.8238472,685,4      0.8238472 - 0.0180903 = 0.8057569 s
    # 2023-11-16 18:00:01.2475204,1974,66    1.2475204 - 0.0180903 = 1.2294301 s
    t = wl.read_trace(AZURE)
    assert t.format == "azure" and len(t.prompts) == 300
    assert t.prompts[:3] == (792, 685, 1974) and t.outputs[:3] == (56, 4, 66)
    assert t.arrivals is not None and t.arrivals[0] == 0.0
    assert t.arrivals[1] == pytest.approx(0.8057569, abs=1e-12) and t.arrivals[2] == pytest.approx(1.2294301,
                                                                                                    abs=1e-12)
    assert t.lines[:3] == (2, 3, 4) and t.blocks is None and t.start == "2023-11-16 18:00:00.0180903"


def test_azure_stamps_are_read_to_the_100_ns_tick(tmp_path):
    # 100 ns apart at an epoch of 1.7e9 s, where a float64 of seconds since 1970 resolves only ~240 ns
    f = tmp_path / "a.csv"
    f.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 23:59:59.9999999,10,5\n"
                 "2023-11-17 00:00:00.0000000,10,5\n2023-11-17 00:00:02,10,5\n")
    t = wl.read_trace(f)
    assert t.arrivals == (0.0, pytest.approx(1e-7, abs=1e-15), pytest.approx(2.0000001, abs=1e-12))
    # with UTC offsets: 01:00:05+01:00 is 00:00:05 UTC, 5 s after 00:00:00Z; 23:59:59-00:30 is 00:29:59 UTC
    f.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00Z,10,5\n2024-05-10 01:00:05+01:00,10,5\n"
                 "2024-05-09 23:59:59.5-00:30,10,5\n")
    assert wl.read_trace(f).arrivals == (0.0, 5.0, 29 * 60 + 59.5)


def test_a_burstgpt_trace_skips_its_failed_rows_and_says_so(run_cli):
    # Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
    # 7,GPT-4,1253,147,1400,API log          -> 0 s
    # 9,ChatGPT,589,251,840,Conversation log -> 2 s
    # 9,GPT-4,4910,41,4951,API log           -> 2 s
    t = wl.read_trace(BURST)
    assert t.format == "burstgpt"
    assert t.prompts[:3] == (1253, 589, 4910) and t.outputs[:3] == (147, 251, 41)
    assert t.arrivals is not None and t.arrivals[:3] == (0.0, 2.0, 2.0) and t.start == "7 s"
    # counted with the csv module, not kvplan: the rows of 0 response tokens, and the models of the others
    rows = list(csv.DictReader(BURST.open()))
    failed = [r for r in rows if r["Response tokens"] == "0"]
    served = [r for r in rows if r["Response tokens"] != "0"]
    gpt4 = sum(r["Model"] == "GPT-4" for r in served)
    assert len(failed) == 7 and len(t.prompts) == 300 - 7
    assert t.lines[:3] == (2, 3, 4) and 83 not in t.lines      # line 83: 195,GPT-4,121,0,121,... is skipped
    doc = run_cli(*SIM, "--trace", str(BURST), "-f", "json").json()
    assert doc["requests_finished"] == 293
    notes = " ".join(doc["notes"])
    assert "7 rows of the trace have 0 Response tokens (BurstGPT's failed requests) and are skipped" in notes
    assert f"mixes 2 models' requests (ChatGPT {293 - gpt4}, GPT-4 {gpt4})" in notes


def test_a_mooncake_trace_gives_ms_as_seconds_and_its_blocks():
    # {"timestamp": 8, "input_length": 3286, "output_length": 231, "hash_ids": [0, 1, 2, 3, 4, 5, 6]}
    # {"timestamp": 892, "input_length": 3340, "output_length": 374, "hash_ids": [0, 7, ..., 12]}   (892 - 8) ms
    # {"timestamp": 1309, "input_length": 6701, "output_length": 306, ...}                           (1309 - 8) ms
    t = wl.read_trace(MOON)
    assert t.format == "mooncake" and len(t.prompts) == 300
    assert t.prompts[:3] == (3286, 3340, 6701) and t.outputs[:3] == (231, 374, 306)
    assert t.arrivals is not None and t.arrivals[:3] == (0.0, pytest.approx(0.884), pytest.approx(1.301))
    b = t.blocks
    assert b is not None and b.block_tokens == 512 and b.requests == 300
    assert list(b.ids[b.offsets[0]:b.offsets[1]]) == [0, 1, 2, 3, 4, 5, 6]
    assert list(b.ids[b.offsets[1]:b.offsets[2]]) == [0, 7, 8, 9, 10, 11, 12]
    # every request has ceil(input_length / 512) ids: 3286 / 512 = 6.4 -> 7, 3340 -> 7, 6701 -> 14
    assert list(b.offsets[:4]) == [0, 7, 14, 28]


def test_kvplan_own_trace_still_reads_as_it_did():
    # prompt_tokens,output_tokens,arrival_s / 583,1434,0.588 / 1581,1598,1.783: kvplan's arrivals are as written
    t = wl.read_trace(OWN)
    assert t.format == "kvplan" and t.prompts[:2] == (583, 1581) and t.arrivals is not None
    assert t.arrivals[:2] == (0.588, 1.783)


# --- detection and --trace-format -------------------------------------------------------------------------------
@pytest.mark.parametrize("path, fmt", [(AZURE, "azure"), (BURST, "burstgpt"), (MOON, "mooncake"), (OWN, "kvplan")])
def test_the_format_is_detected_and_can_be_named(run_cli, path, fmt):
    assert wl.read_trace(path).format == fmt and wl.read_trace(path, fmt).format == fmt
    doc = run_cli(*SIM, "--trace", str(path), "--trace-format", fmt, "--requests", "20", "-f", "json").json()
    assert doc["requests_finished"] == 20
    assert run_cli(*SIM, "--trace", str(path), "--trace-format", "auto", "--requests", "20").code == 0


@pytest.mark.parametrize("path, named, looks", [(AZURE, "burstgpt", "azure"), (BURST, "azure", "burstgpt"),
                                                (MOON, "azure", "mooncake"), (OWN, "mooncake", "kvplan")])
def test_a_wrong_trace_format_is_refused(run_cli, path, named, looks):
    err = refused(run_cli, *SIM, "--trace", str(path), "--trace-format", named)
    assert f"--trace-format {named}: trace {path}" in err and f"it looks like {looks}" in err


def test_an_unknown_trace_format_and_one_without_a_trace_are_refused(run_cli):
    assert "--trace-format 'csv' is not a trace format" in refused(run_cli, *SIM, "--trace", str(AZURE),
                                                                   "--trace-format", "csv")
    assert "--trace-format names the format of a --trace" in refused(run_cli, *SIM, "--trace-format", "azure")


@pytest.mark.parametrize("name, text", [
    ("x.csv", "time,in,out\n0,1,2\n"),
    ("x.jsonl", '{"t": 0, "in": 1}\n'),
    ("x.csv", "Timestamp,Model\n1,GPT-4\n"),                # Timestamp alone marks no format
])
def test_a_file_of_no_format_says_what_was_tried(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(KvplanError) as err:
        wl.read_trace(f)
    message = err.value.message
    assert "matches no trace format" in message
    for header in ("prompt_tokens,output_tokens[,arrival_s]", "TIMESTAMP,ContextTokens,GeneratedTokens",
                   "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
                   "timestamp, input_length, output_length, hash_ids"):
        assert header in message


# --- malformed rows: one line naming the row and the column -------------------------------------------------------
AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,10\n"
BG = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n0,ChatGPT,100,10,110,API log\n"
MC = '{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [0, 1]}\n'


@pytest.mark.parametrize("name, text, needle", [
    ("a.csv", AZ + "2023-11-16 18:15:61.0,100,10\n", "line 3: TIMESTAMP = '2023-11-16 18:15:61.0' is not a date"),
    ("a.csv", AZ + "2023-02-30 00:00:00,100,10\n", "line 3: TIMESTAMP = '2023-02-30 00:00:00' is not a date"),
    ("a.csv", AZ + "2023-11-16 18:15:47,abc,10\n", "line 3: ContextTokens = 'abc' is not a whole number"),
    ("a.csv", AZ + "2023-11-16 18:15:47,0,10\n", "line 3: ContextTokens = 0, a request with no prompt"),
    ("a.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:47,10\n", "no GeneratedTokens column"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens,NumImages\n2023-11-16 18:15:47,10,5,1\n",
     "column 'numimages' is not one of the Azure LLM inference trace's"),
    ("b.csv", BG + "3,ChatGPT,100,-4,96,API log\n", "line 3: Response tokens = -4 is not a token count in 1"),
    ("b.csv", BG + "x,ChatGPT,100,4,104,API log\n", "line 3: Timestamp = 'x' is not a time"),
    ("b.csv", BG + "1e12,ChatGPT,100,4,104,API log\n", "line 3: Timestamp = '1e12' is not a time in 0 .. 1e+09 s"),
    ("b.csv", BG.replace("Log Type", "Log Type,Cost").replace("API log", "API log,3"), "column 'cost' is not one"),
    ("m.jsonl", MC + '{"timestamp": 5, "input_length": 600, "output_length": 10, "hash_ids": [0]}\n',
     "line 2: hash_ids has 1 ids, but a prompt of 600 tokens has 2 blocks of 512 tokens"),
    ("m.jsonl", MC + '{"timestamp": 5, "input_length": 600, "output_length": 10, "hash_ids": [0, "a"]}\n',
     "line 2: hash_ids is not a list of block ids"),
    ("m.jsonl", MC + '{"timestamp": 5, "input_length": 600, "output_length": 10}\n',
     "line 2: hash_ids is given on some lines only"),
    ("m.jsonl", MC + '{"timestamp": 5, "input_length": 600, "output_length": 10, "hash_ids": [0, 1], "x": 1}\n',
     "line 2: key 'x' is not one of the Mooncake trace's"),
    ("m.jsonl", MC + '{"timestamp": -5, "input_length": 600, "output_length": 10, "hash_ids": [0, 1]}\n',
     "line 2: timestamp = '-5' is not a time in 0 .. 1e+12 ms"),
    ("m.jsonl", MC + '{"timestamp": 5, "output_length": 10, "hash_ids": [0, 1]}\n', "line 2: no input_length key"),
])
def test_a_malformed_row_is_refused_naming_its_line(run_cli, tmp_path, name, text, needle):
    f = tmp_path / name
    f.write_text(text)
    err = refused(run_cli, *SIM, "--trace", str(f))
    assert f"trace {f}" in err and needle in err


def test_a_public_trace_out_of_time_order_is_sorted_and_said(run_cli, tmp_path):
    # timestamps 1000, 0, 1000, 500 ms: in time order lines 2 (0), 4 (500), 1 (1000), 3 (1000, after line 1: one
    # time keeps the file's order); all four rows moved
    f = tmp_path / "m.jsonl"
    f.write_text("".join(json.dumps({"timestamp": ts, "input_length": p, "output_length": 5, "hash_ids": [i]}) + "\n"
                         for i, (ts, p) in enumerate(((1000, 10), (0, 20), (1000, 30), (500, 40)))))
    t = wl.read_trace(f)
    assert t.prompts == (20, 40, 10, 30) and t.arrivals == (0.0, 0.5, 1.0, 1.0) and t.lines == (2, 4, 1, 3)
    assert t.blocks is not None and list(t.blocks.ids) == [1, 3, 0, 2]
    doc = run_cli(*SIM, "--trace", str(f), "-f", "json").json()
    assert any("not in time order: sorted by timestamp (4 rows moved" in n for n in doc["notes"])


# --- time scaling ---------------------------------------------------------------------------------------------------
def test_trace_speed_divides_the_arrivals():
    t = wl.read_trace(MOON)
    assert t.arrivals is not None
    base = workload(t).arrivals
    fast = workload(t, trace_speed=2.0)
    slow = workload(t, trace_speed=0.5)
    # 0.884 s / 2 = 0.442 s, 1.301 s / 2 = 0.6505 s; at half speed 1.768 s and 2.602 s
    assert list(fast.arrivals[:3]) == [0.0, pytest.approx(0.442), pytest.approx(0.6505)]
    assert list(slow.arrivals[:3]) == [0.0, pytest.approx(1.768), pytest.approx(2.602)]
    assert all(f == b / 2.0 for f, b in zip(fast.arrivals, base, strict=True))
    assert "scaled in time (notes)" in fast.describe and "scaled" not in workload(t).describe
    assert "--trace-speed 2: the trace's arrival times are divided by 2 (2 times its rate)." in map(text, fast.notes)


def test_trace_rate_rescales_to_a_mean_rate(tmp_path):
    # arrivals 0, 1, 2, 4 s: 3 gaps over 4 s, a mean 0.75 requests/s; --trace-rate 1.5 is 2x speed: 0, 0.5, 1, 2
    f = tmp_path / "t.csv"
    f.write_text("prompt_tokens,output_tokens,arrival_s\n10,5,0\n10,5,1\n10,5,2\n10,5,4\n")
    w = workload(wl.read_trace(f), trace_rate=1.5)
    assert list(w.arrivals) == [0.0, 0.5, 1.0, 2.0]
    assert text(w.notes[-1]) == ("--trace-rate 1.5: the trace's arrival times are divided by 2, its mean rate of "
                                 "0.75 requests/s (the gaps over their span) made 1.5.")


@pytest.mark.parametrize("args, needle", [
    (("--trace-speed", "0"), "--trace-speed 0.0 is not in [1e-06, 1,000,000]"),
    (("--trace-speed", "-2"), "--trace-speed -2.0 is not in"),
    (("--trace-speed", "inf"), "--trace-speed"),
    (("--trace-speed", "nan"), "--trace-speed"),
    (("--trace-speed", "2e6"), "--trace-speed 2000000.0 is not in"),
    (("--trace-rate", "0"), "--trace-rate 0.0 is not in"),
    (("--trace-speed", "2", "--trace-rate", "1"), "two ways to scale the trace's time"),
    (("--trace-speed", "2", "--rate", "1"), "--rate / --users replace them"),
])
def test_bad_trace_speeds_are_refused(run_cli, args, needle):
    assert needle in refused(run_cli, *SIM, "--trace", str(MOON), *args)


def test_a_slowed_trace_stays_on_the_clock(run_cli, tmp_path):
    # the last arrival at 2,000 s: at 1e-6x speed it would be at 2e9 s, past the simulator's 1e9 s clock; at 0.5e-5x
    # (4e8 s) it runs
    f = tmp_path / "t.csv"
    f.write_text("prompt_tokens,output_tokens,arrival_s\n10,5,0\n10,5,2000\n")
    err = refused(run_cli, *SIM, "--trace", str(f), "--trace-speed", "1e-6")
    assert "the trace's last request arrives at 2e+09 s, past the 1e+09 s the simulator's clock" in err
    assert "give a speed of 2e-06 or more" in err
    assert list(workload(wl.read_trace(f), trace_speed=5e-6).arrivals) == [0.0, pytest.approx(4e8)]


def test_trace_speed_without_a_timed_trace_is_refused(run_cli, tmp_path):
    assert "there is no --trace" in refused(run_cli, *SIM, "--trace-speed", "2")
    f = tmp_path / "t.csv"
    f.write_text("prompt_tokens,output_tokens\n10,5\n")
    assert "scales a timed trace's arrivals" in refused(run_cli, *SIM, "--trace", str(f), "--trace-speed", "2",
                                                        "--rate", "1")


def test_trace_rate_needs_arrivals_that_span_time(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("prompt_tokens,output_tokens,arrival_s\n10,5,3\n10,5,3\n")
    with pytest.raises(KvplanError, match="arrivals span some time"):
        workload(wl.read_trace(f), trace_rate=1.0)


# --- Mooncake's hash_ids: carried, and said simulated by SGLang's scheduler only -------------------------------------
def test_the_prefix_hit_share_of_a_tiny_trace(run_cli, tmp_path):
    # A 1000 tokens [1, 2]     nothing before it                                   0
    # B 1000 tokens [1, 2]     both blocks seen: 2 x 512 = 1024, capped at its 1000  1000
    # C 1500 tokens [1, 3, 4]  1 seen, 3 not                                         512
    # D  600 tokens [5, 2]     5 not seen: no prefix hit (2 was seen, but not first)  0
    # 1512 of 1000 + 1000 + 1500 + 600 = 4100 prompt tokens: 36.9%; ids 1..5, of which 1 (A, B, C) and 2 (A, B, D)
    # are in more than one request
    f = tmp_path / "m.jsonl"
    rows = ((1000, [1, 2]), (1000, [1, 2]), (1500, [1, 3, 4]), (600, [5, 2]))
    f.write_text("".join(json.dumps({"timestamp": 10 * i, "input_length": p, "output_length": 5, "hash_ids": ids})
                         + "\n" for i, (p, ids) in enumerate(rows)))
    t = wl.read_trace(f)
    assert t.blocks is not None and t.blocks.hit_tokens(t.prompts) == 1512 and t.blocks.shared_blocks() == 2
    w = workload(t)
    assert w.blocks is not None and list(w.blocks.offsets) == [0, 2, 4, 7, 9]
    # [1, 2] then [3, 2]: id 2 is in both (sorted, id 2's run starts in the request id 1's run ends in); B's first
    # block, 3, is new, so no hit though its second block was seen
    import numpy as np

    from kvplan.inputs.traces import PrefixBlocks

    two = PrefixBlocks(np.array([1, 2, 3, 2]), np.array([0, 2, 4]))
    assert two.shared_blocks() == 1 and two.distinct_blocks() == 3 and two.hit_tokens([1024, 1024]) == 0
    # one DP replica's requests, C and A (indexes 2, 0): [1, 3, 4] then [1, 2]
    part = t.blocks.take([2, 0])
    assert list(part.ids) == [1, 3, 4, 1, 2] and list(part.offsets) == [0, 3, 5]
    doc = run_cli(*SIM, "--trace", str(f), "-f", "json").json()
    said = [n for n in doc["notes"] if "hash_ids" in n]
    assert len(said) == 1
    assert "(5 distinct 512-token blocks, 2 of them in more than one request)" in said[0]
    assert "only --engine sglang simulates prefix reuse across requests" in said[0] and "--shared-prefix" in said[0]
    assert "would serve 36.9% of the prompt tokens (1,512 of 4,100)" in said[0]
    # the first three requests only (--requests 3): 1512 of 3500, 43.2%
    doc = run_cli(*SIM, "--trace", str(f), "--requests", "3", "-f", "json").json()
    assert any("43.2% of the prompt tokens (1,512 of 3,500)" in n for n in doc["notes"])


def test_the_hit_share_of_the_sample_matches_a_plain_count():
    # an independent count over the file: walk each prompt's ids until one no earlier request had
    seen: set[int] = set()
    requests_of: dict[int, set[int]] = {}
    hit = total = 0
    for r, line in enumerate(MOON.read_text().splitlines()):
        row = json.loads(line)
        for i in row["hash_ids"]:
            requests_of.setdefault(i, set()).add(r)
        lead = 0
        for i in row["hash_ids"]:
            if i not in seen:
                break
            lead += 1
        hit += min(lead * 512, row["input_length"])
        total += row["input_length"]
        seen.update(row["hash_ids"])
    t = wl.read_trace(MOON)
    assert t.blocks is not None and t.blocks.hit_tokens(t.prompts) == hit and total == sum(t.prompts)
    assert t.blocks.distinct_blocks() == len(requests_of)
    assert t.blocks.shared_blocks() == sum(len(rs) > 1 for rs in requests_of.values())
    # and a head of the blocks is the head of the requests: the first 4 requests by hand (the file's first lines)
    # [0..6] 0; [0, 7..12] 0 seen: 512; [0, 7..11, 13..] 0, 7..11 seen: 6 x 512 = 3072; [0, 21..] 512 -> 4096
    assert t.blocks.head(4).hit_tokens(t.prompts[:4]) == 4096


# --- bounds -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("header, row", [
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "2023-11-16 18:15:46.6805900,100,10\n"),
    ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n", "0,ChatGPT,100,10,110,API log\n"),
    ("", '{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [0]}\n'),
    ("prompt_tokens,output_tokens,arrival_s\n", "100,10,0\n"),
])
def test_every_format_keeps_the_row_limit_counted_before_parsing(monkeypatch, tmp_path, header, row):
    monkeypatch.setattr(wl, "MAX_TRACE_ROWS", 3)
    f = tmp_path / ("t.jsonl" if not header else "t.csv")
    f.write_text(header + row * 3)
    assert len(wl.read_trace(f).prompts) == 3
    f.write_text(header + row * 3 + "garbage that no format parses\n")     # counted, not parsed: the count refuses
    lines = 5 if header else 4
    with pytest.raises(KvplanError, match=f"has {lines} lines, more than the 3 requests one run simulates"):
        wl.read_trace(f)


def test_the_real_row_limit_holds_for_a_public_format(run_cli, tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [0]}\n' * 50_001)
    assert "50,001 lines, more than the 50,000 requests" in refused(run_cli, *SIM, "--trace", str(f))


# --- the bug: a trace is checked by its rows, not by the default --prompt / --decode ---------------------
def test_a_trace_runs_under_a_max_len_the_default_request_exceeds(run_cli, tmp_path):
    # before: "the request (1,000 + 30,000 tokens) is longer than --max-len 2,000": the default request, which the
    # trace replaces, was checked instead of the trace's rows (100 + 50 and 300 + 70 tokens)
    f = tmp_path / "t.csv"
    f.write_text("prompt_tokens,output_tokens,arrival_s\n100,50,0\n300,70,1.5\n")
    doc = run_cli(*SIM, "--trace", str(f), "--max-len", "2000", "-f", "json").json()
    assert doc["requests_finished"] == 2 and doc["generated_tokens"] == 120
    doc = run_cli(*SIM, "--trace", str(f), "--max-model-len", "4096", "--max-len", "2000", "-f", "json").json()
    assert doc["requests_finished"] == 2
    # and the first line does not say the default decode was shortened to fit: no default request runs
    doc = run_cli(*SIM, "--trace", str(f), "--max-model-len", "4096", "-f", "json").json()
    assert "shortened" not in doc["headline"] and doc["headline"].endswith(f"lengths from {f}; recompute, victim "
                                                                           "newest")


def test_a_trace_row_over_the_limit_is_refused_naming_its_line(run_cli, tmp_path):
    # line 3 is 3,000 + 2,000 = 5,000 tokens > 4,096: the engine refuses the whole request, as kvplan does
    f = tmp_path / "t.csv"
    f.write_text("prompt_tokens,output_tokens,arrival_s\n100,50,0\n3000,2000,1.5\n")
    err = refused(run_cli, *SIM, "--trace", str(f), "--max-model-len", "4096")
    assert f"trace {f} line 3 (request 2) has 3,000 + 2,000 tokens, more than the 4,096 the engine serves" in err
    # sorted public rows name the file's line: the 8,000-token row is line 2, the second request in time order
    m = tmp_path / "m.jsonl"
    m.write_text('{"timestamp": 9, "input_length": 8000, "output_length": 5, "hash_ids": ' + str(list(range(16)))
                 + '}\n{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [99]}\n')
    assert f"trace {m} line 1 (request 2) has 8,000 + 5 tokens" in refused(run_cli, *SIM, "--trace", str(m),
                                                                          "--max-model-len", "4096")


@pytest.mark.parametrize("args", [("--prompt", "500"), ("--decode", "8k"), ("--workload", "r1-production"),
                                  ("--output-dist", "fixed:10"), ("--prompt-dist", "fixed:10")])
def test_what_a_trace_replaces_is_refused_not_ignored(run_cli, args):
    err = refused(run_cli, *SIM, "--trace", str(OWN), "--max-model-len", "4096", *args)
    assert f"--trace gives each request's prompt and output lengths, so {args[0]} does not combine" in err


def _notes(run_cli, *args) -> list[str]:
    r = run_cli(*SIM, "--requests", "20", *args, "-f", "json")
    assert r.code == 0, r.err
    return [str(n) for n in r.json()["notes"]]


def test_run_options_that_replace_or_draw_nothing_are_said(run_cli):
    # a timed trace (kvplan_300.csv: its arrival_s column) run with --users: its times are dropped, said in a note
    notes = _notes(run_cli, "--trace", str(OWN), "--users", "4")
    assert any("arrival times of the trace" in n and "closed loop of 4 users (--users)" in n for n in notes), notes
    notes = _notes(run_cli, "--trace", str(OWN), "--rate", "2")
    assert any("arrival times of the trace" in n and "Poisson arrivals at 2/s (--rate)" in n for n in notes), notes
    assert not any("arrival times" in n for n in _notes(run_cli, "--trace", str(OWN)))
    # --seed with the trace's lengths and its own times, or fixed lengths in a closed loop: nothing is drawn, so the
    # run is the seed-0 run's (compared below), and a note says so
    for args in (("--trace", str(OWN)), ("--prompt", "500", "--decode", "100", "--users", "4")):
        notes = _notes(run_cli, *args, "--seed", "3")
        assert any("--seed 3 changes nothing here" in n for n in notes), notes
        a = run_cli(*SIM, "--requests", "20", *args, "--seed", "3", "-f", "json").json()
        b = run_cli(*SIM, "--requests", "20", *args, "-f", "json").json()
        for key in ("simulated_seconds", "generated_tokens", "tpot_seconds_p50", "peak_kv_bytes_per_request_p99"):
            assert a[key] == b[key], key
    # where the seed draws (Poisson arrivals; lengths from a distribution), no such note
    for args in (("--rate", "2"), ("--prompt-dist", "uniform:100,900", "--users", "4")):
        assert not any("--seed" in n for n in _notes(run_cli, *args, "--seed", "3"))


# --- the samples are what the script writes -------------------------------------------------------------------------
def test_the_sample_traces_are_reproducible():
    script = Path(__file__).resolve().parent.parent / "tools" / "make_trace_samples.py"
    if not script.is_file():
        pytest.skip("tools/ is not beside this copy of the tests")
    r = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert math.isclose(len(wl.read_trace(AZURE).prompts), 300)


@pytest.mark.parametrize("path, extra", [(MOON, ()), (BURST, ()), (AZURE, ("--trace-speed", "4"))])
def test_the_docs_show_what_the_samples_print(run_cli, path, extra):
    # docs/traces.md quotes each sample's notes as a terminal prints them (wrapped); unwrapped, they are the run's
    doc_path = Path(__file__).resolve().parent.parent / "docs" / "traces.md"
    if not doc_path.is_file():
        pytest.skip("docs/ is not beside this copy of the tests")
    docs = " ".join(doc_path.read_text().split())
    doc = run_cli(*SIM, "--trace", str(path), *extra, "-f", "json").json()
    for note in doc["notes"]:   # the docs name the file as the command line in the repository's root does
        note = note.replace(str(path), f"tests/data/traces/{path.name}")
        assert " ".join(("• " + note).split()) in docs, note


def test_python_callers_get_the_same_trace_options():
    import kvplan
    from kvplan.options.simulate import simulate_request

    # numbers from Python as the command line's text: 2x speed halves the sample's 0.884 s second arrival
    scenario = kvplan.Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, dp=1, gpus=1, max_model_len=8192)
    run = simulate_request(scenario, trace=MOON, trace_format="mooncake", trace_speed=2, requests=3)
    assert list(run.workload.arrivals) == [0.0, pytest.approx(0.442), pytest.approx(0.6505)]
    assert run.workload.blocks is not None and run.workload.blocks.requests == 3
    # the default request was fitted into 8,192 tokens; the run's first line does not say so, the caller's still does
    assert run.scenario.request_fitted is None and scenario.request_fitted
    assert "shortened" in scenario.headline() and "shortened" not in run.scenario.headline("x")
    given = kvplan.Scenario(model="llama-3.1-8b", hardware="h100-sxm", tp=1, dp=1, gpus=1, decode="1k")
    with pytest.raises(KvplanError, match="so --decode does not combine with it"):
        simulate_request(given, trace=MOON)
