"""Issue 18, "Output a user reads": what a new user reads (or pastes) from kvplan's output, each item pinned by a
test that failed before the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

LOG = str(Path(__file__).parent / "data" / "logs" / "vllm-v1-qwen3-235b-a22b-fp8-4xh100.log")  # no GPU, no memory


# --- explain-log without -g: the assumed GPU is said first ------------------------------------------------------
def test_explain_log_says_the_assumed_gpu_before_any_table(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    for fmt in ("table", "markdown"):
        r = run_cli("explain-log", LOG, "--weight-dtype", "fp8", "-f", fmt)
        assert r.code == 0, r.err
        lines = [line for line in r.out.splitlines() if line.strip()]
        # line 1 the headline, line 2 the warning (the log states no GPU: h200, kvplan's default, was assumed)
        assert "does not state its GPU: planned on h200" in lines[1], fmt
        assert r.out.count("does not state its GPU") == 1, fmt


def test_explain_log_brief_says_the_assumed_gpu_before_the_figures(run_cli):
    r = run_cli("explain-log", LOG, "--weight-dtype", "fp8", "--brief")
    assert r.code == 0, r.err
    first = next(i for i, line in enumerate(r.out.splitlines()) if line.startswith("warning:"))
    figure = next(i for i, line in enumerate(r.out.splitlines()) if line.startswith("KV pool per GPU"))
    assert first < figure


# --- size: the per-GPU column of the layer-kind table is per layer ----------------------------------------------
def test_size_labels_the_per_gpu_column_per_layer(run_cli):
    r = run_cli("size", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "2", "-f", "markdown")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    head = next(i for i, line in enumerate(lines) if "KV per token by layer kind" in line) + 2
    columns = [c.strip() for c in lines[head].strip("|").split("|")]
    cells = [c.strip() for c in lines[head + 2].strip("|").split("|")]
    # Llama 3.1 8B: 8 KV heads x 128 dims x (K + V) x 2 B (bf16) = 4,096 B per token per layer; TP=2 splits the 8 KV
    # heads over 2 GPUs, 2,048 B per token per layer per GPU (the model's 32 layers hold 32 x 4,096 = 131,072 B)
    assert cells[columns.index("B/token/layer")] == "4,096 B"
    assert cells[columns.index("B/token (model)")] == "131,072 B"
    per_gpu = next(c for c in columns if "per GPU" in c)
    assert cells[columns.index(per_gpu)] == "2,048 B"
    assert "/layer" in per_gpu and "TP=2" in per_gpu, per_gpu


# --- presets template hardware: example figures are commented out -----------------------------------------------
def _listed(run_cli, folder, preset_id: str) -> dict:
    r = run_cli("presets", "list", "--type", "hardware", "--presets-dir", str(folder), "-f", "json")
    assert r.code == 0, r.err
    return next(p for p in r.json()["presets"] if p["id"] == preset_id)


def test_an_unedited_hardware_template_shows_no_example_figure(run_cli, tmp_path):
    r = run_cli("presets", "template", "hardware")
    assert r.code == 0, r.err
    (tmp_path / "unedited").mkdir()
    (tmp_path / "unedited" / "my-gpu.toml").write_text(r.out)
    unedited = _listed(run_cli, tmp_path / "unedited", "my-gpu")
    # the template's price ($3.99 per GPU-hour) and bandwidth (3.35 TB/s) are examples, not the user's GPU's
    assert unedited["price_usd_per_gpu_hour"] is None and unedited["price_offer"] is None
    assert unedited["hbm_bandwidth_bytes_per_second"] is None
    # the HBM (80 GiB = 80 x 2^30 = 85,899,345,920 B) is required, so it stays as the placeholder to replace
    assert unedited["hbm_bytes"] == 80 * 2**30
    shown = run_cli("presets", "show", "my-gpu", "--presets-dir", str(tmp_path / "unedited"), "-f", "json")
    assert shown.code == 0, shown.err
    assert "host_dram_gb" not in shown.json()["preset"]["node"]   # the 2,000 GB of host DRAM is an example too
    # the examples are still valid lines: with the "#: " marks removed they load, $3.99/h and 3.35 x 10^12 B/s
    (tmp_path / "edited").mkdir()
    (tmp_path / "edited" / "my-gpu.toml").write_text(r.out.replace("#: ", ""))
    edited = _listed(run_cli, tmp_path / "edited", "my-gpu")
    assert edited["price_usd_per_gpu_hour"] == 3.99 and edited["hbm_bandwidth_bytes_per_second"] == 3.35e12


# --- CSV headers: plain text with the unit ----------------------------------------------------------------------
def test_csv_headers_are_plain_numbers_with_their_unit(run_cli):
    import csv

    r = run_cli("tpot", "--kv-dtype", "fp8", "-f", "csv")
    assert r.code == 0, r.err
    header = next(csv.reader(r.out.splitlines()[1:2]))
    # the grid's contexts: 1,024 and 8,192, the request's 1,000 + 30,000 = 31,000, then 32,768, 65,536 and 131,072;
    # each column holds TPOT in seconds
    assert header == ["batch"] + [f"{c} tokens (seconds)" for c in (1024, 8192, 31000, 32768, 65536, 131072)]
    assert '"' not in r.out.splitlines()[1]   # no thousands separator, so no quoted header


def test_csv_header_formats_a_bytes_figure_raw():
    from kvplan.render.output import csv_header
    from kvplan.specs.values import Bytes, note

    # 2 GiB = 2 x 2^30 = 2,147,483,648 B: the raw number, never "2.00 GiB" or "2,147,483,648"
    assert csv_header(note("pool {p}", p=Bytes(2 * 2**30))) == "pool 2147483648 bytes"
    assert csv_header("context tokens") == "context tokens"


# --- --brief -f json: the brief figures as JSON -----------------------------------------------------------------
def test_brief_json_gives_raw_figures_with_their_units(run_cli):
    r = run_cli("size", "--brief", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["command"] == "size" and doc["headline"].startswith("deepseek-r1 on 8 x h200")
    figures = {f["figure"]: (f["value"], f["unit"]) for f in doc["brief"]}
    # DeepSeek-R1's MLA caches 512 + 64 = 576 values per token per layer, 2 B each (bf16), over 61 layers:
    # 576 x 2 x 61 = 70,272 B per token; the 1,000 + 30,000 = 31,000-token request holds 31,000 x 70,272 =
    # 2,178,432,000 B; MLA's latent is not split by TP, so each GPU holds the same
    assert figures["KV bytes per token"] == (70_272, "bytes")
    assert figures["KV bytes per token per GPU"] == (70_272, "bytes")
    assert figures["peak KV per request at 31,000 tokens"] == (2_178_432_000, "bytes")
    assert doc["warnings"] == []


def test_brief_json_keeps_text_figures_and_the_warning(run_cli):
    r = run_cli("compare-preemption", "--dram", "1MiB", "--brief", "-f", "json")
    assert r.code == 0, r.err
    doc = r.json()
    figures = {f["figure"]: (f["value"], f["unit"]) for f in doc["brief"]}
    assert figures["cheaper"] == ("recompute", None)
    assert figures["recompute"][1] == "seconds" and figures["swap bytes per GPU"][1] == "bytes"
    # 1 MiB of host DRAM cannot hold a request's KV: the verdict rests on that, so the warning comes along
    assert len(doc["warnings"]) == 1 and "swapping is impossible" in doc["warnings"][0]


def test_brief_is_still_refused_in_csv_and_markdown(run_cli):
    for fmt in ("csv", "markdown"):
        r = run_cli("size", "--brief", "-f", fmt)
        assert r.code == 2 and "table or JSON" in r.err and "Traceback" not in r.err


# --- recommend --emit: the launch command as a block to paste ---------------------------------------------------
def _block(out: str, title: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title)) + 1
    while not lines[start].strip() or lines[start].startswith("```"):
        start += 1
    end = start
    while end < len(lines) and lines[end].strip() and not lines[end].startswith("```"):
        end += 1
    return lines[start:end]


def _pasted(block: list[str]) -> list[str]:
    """What a shell runs from the pasted block: continuation lines joined, split into words."""
    assert all(line.endswith(" \\") for line in block[:-1]) and not block[-1].endswith("\\")
    assert all(line.startswith("  --") for line in block[1:]), block
    return " ".join(line.removesuffix(" \\") for line in block).split()


def test_recommend_emit_prints_the_launch_command_unwrapped(run_cli, monkeypatch):
    # narrower than the block's first line, "vllm serve deepseek-ai/DeepSeek-R1 \" (36 characters)
    monkeypatch.setenv("COLUMNS", "32")
    for fmt in ("table", "markdown"):
        r = run_cli("recommend", "--emit", "vllm", "-f", fmt)
        assert r.code == 0, r.err
        words = _pasted(_block(r.out, "Launch command (vllm), to paste" if fmt == "table"
                                 else "### Launch command (vllm), to paste"))
        # vllm serve MODEL, then the flags the launch table lists (TP 8 = the node's 8 H200s; the fp8 KV asked for)
        assert words[:3] == ["vllm", "serve", "deepseek-ai/DeepSeek-R1"]
        flags = dict(zip(words[3::2], words[4::2], strict=True))
        assert flags["--tensor-parallel-size"] == "8" and flags["--kv-cache-dtype"] == "fp8"
        # the 1,000 + 30,000-token request: --max-model-len 31000
        assert flags["--max-model-len"] == "31000"
        assert not any(line.startswith("--") for line in r.out.splitlines()), "a flag wrapped onto its own line"
    doc = run_cli("recommend", "--emit", "vllm", "-f", "json").json()
    assert _pasted(doc["launch"]["command"].split("\n")) == words


def test_a_verbatim_block_is_never_wrapped_by_either_writer():
    import io

    from kvplan.render.output import _blocks, write_plain, write_rich
    from kvplan.render.result import Result, Verbatim

    command = "prog \\\n  --a-very-long-flag-name-that-is-wider-than-the-output 1"
    result = Result("x", "headline", {}, (), verbatim=(Verbatim("To paste", command),))
    for write in (write_plain, write_rich):
        out = io.StringIO()
        write(_blocks(result, False, "iec", 30), out, 30)
        assert command in out.getvalue(), write.__name__


# --- presets list: one table at any width, its GPU figures where they fit ---------------------------------------
def _one_table(out: str, width: int) -> list[str]:
    """The lines of the (one) table of a ``presets list`` output, checked to be one table no line of which is
    wider than ``width``: one header rule, no part continued."""
    lines = out.splitlines()
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    assert "... continued" not in out and sum(line.startswith(" ───") for line in lines) == 1, out
    return lines


@pytest.mark.parametrize("width", [80, 120])
def test_presets_list_is_one_table_whose_lines_fit(run_cli, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    r = run_cli("presets", "list")
    assert r.code == 0, r.err
    lines = _one_table(r.out, width)
    header = lines[lines.index(next(line for line in lines if line.startswith(" ───"))) - 1].split()
    assert header[:3] == ["type", "id", "name"], header
    # one row per preset, its type beside its id: 19 models, 13 GPUs, 2 workloads (the headline's counts)
    rows = [line.split() for line in lines if line.startswith(("  model ", "  hardware ", "  workload "))]
    assert [t for t, *_ in rows].count("model") == 19 and [t for t, *_ in rows].count("hardware") == 13
    assert ["workload", "r1-production"] == rows[-1][:2] and ["model", "deepseek-r1"] == rows[0][:2]
    h200 = next(line for line in lines if line.startswith("  hardware   h200 "))
    if width == 80:   # the GPU figures do not fit beside the ids and names: left out, not a second part
        assert header == ["type", "id", "name"] and "GiB" not in r.out.split("•")[0]
    else:   # H200's HBM 140.40 GiB (nvidia-smi's 143,771 MiB / 1,024), 4.80 TB/s, no public price ("-")
        assert header == ["type", "id", "name", "HBM", "bandwidth", "$/GPU-hour"]
        assert h200.split()[-5:] == ["140.40", "GiB", "4.80", "TB/s", "-"], h200


def test_presets_list_keeps_whole_ids_and_a_name_that_is_not_the_id(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    lines = _one_table(run_cli("presets", "list").out, 80)
    # the 29-character id is never folded; its name says more than the id in capitals (user28b: a blank name
    # column read as missing data), in words the column can fold
    row = next(line for line in lines if "deepseek-r1-distill-llama-70b" in line)
    assert row.split()[:2] == ["model", "deepseek-r1-distill-llama-70b"]
    assert row.split()[2:4] == ["DeepSeek-R1", "distilled"], row
    assert any(line.split()[:3] == ["model", "glm-4.5", "GLM-4.5"] for line in lines)


def test_presets_list_of_one_type_or_with_user_files(run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "80")
    template = run_cli("presets", "template", "hardware").out
    (tmp_path / "my-gpu.toml").write_text(template)
    for extra in (("--type", "hardware"), ("--presets-dir", str(tmp_path))):
        r = run_cli("presets", "list", *extra)
        assert r.code == 0, r.err
        lines = r.out.splitlines()
        assert "... continued" not in r.out and all(len(line) <= 80 for line in lines), extra
        # one row per preset: an id is on exactly one line (the id column is never repeated in a second part)
        for preset_id in ("h200", "mi355x"):
            assert sum(f" {preset_id} " in line for line in lines) == 1, (extra, preset_id)
    # one type: no type column (the headline names it), room for the GPU figures on the row at 80 columns
    lines = run_cli("presets", "list", "--type", "hardware").out.splitlines()
    h200 = next(line for line in lines if line.startswith("  h200 "))
    assert "140.40 GiB" in h200 and "4.80 TB/s" in h200, h200
    # a preset from the user's folder: its row in the list, its file named once in the files table (a wide
    # terminal: the test's folder path is longer than 80 columns)
    monkeypatch.setenv("COLUMNS", "300")
    r = run_cli("presets", "list", "--presets-dir", str(tmp_path))
    assert sum(" my-gpu " in line for line in r.out.splitlines()) == 2   # the list, the files table
    assert str(tmp_path / "my-gpu.toml") in r.out


def test_optional_columns_give_way_last_first_where_a_text_column_would_be_squeezed():
    from kvplan.render.output import table_parts
    from kvplan.render.result import Table

    # a: 10 characters (+2 = 12); b: 49 characters of 4-letter words, counted at TEXT_ROOM 24 (+2 = 26); n1, n2:
    # "1,000" (+2 = 7 each); the box adds one more than the columns. All four: 12 + 26 + 7 + 7 + 5 = 57; without
    # n2: 12 + 26 + 7 + 4 = 49; without both: 41.
    table = Table("T", ("a", "b", "n1", "n2"), (("x" * 10, " ".join(["word"] * 10), 1000, 1000),),
                  optional=(2, 3))

    def headers(width: int) -> list[list[str]]:
        return [[c.header for c in columns] for _, columns, _ in table_parts(table, "iec", width)]

    assert headers(57) == [["a", "b", "n1", "n2"]]
    assert headers(56) == headers(49) == [["a", "b", "n1"]]
    assert headers(48) == headers(41) == [["a", "b"]]
    # without optional columns the same table keeps all four, in parts where they do not fit
    plain = Table("T", table.columns, table.rows)
    assert [c.header for _, columns, _ in table_parts(plain, "iec", 48) for c in columns][:2] == ["a", "b"]
    assert {c.header for _, columns, _ in table_parts(plain, "iec", 48) for c in columns} == {"a", "b", "n1", "n2"}
