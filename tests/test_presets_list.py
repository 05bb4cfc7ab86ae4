"""`kvplan presets list`: the --type and WORD filters, the GPU columns (HBM, bandwidth, price) with raw numbers
in JSON and CSV, and the optional [price] table of a hardware preset."""

from __future__ import annotations

import csv
import io

import pytest

from kvplan.errors import KvplanError
from kvplan.inputs.presets import build_hardware

BUILTIN_WORKLOADS = {"long-cot-bench", "r1-production"}


def _one_line_error(r, *needles):
    assert r.code == 2, (r.code, r.out, r.err)
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    for needle in needles:
        assert needle in lines[0], lines[0]


def _ids(r):
    return [p["id"] for p in r.json()["presets"]]


def test_type_filter_keeps_one_type(run_cli):
    every = run_cli("presets", "list", "-f", "json").json()["presets"]
    for kind in ("model", "hardware", "workload"):
        r = run_cli("presets", "list", "--type", kind, "-f", "json")
        assert r.code == 0, r.err
        got = r.json()["presets"]
        assert got and {p["type"] for p in got} == {kind}
        assert [p["id"] for p in got] == [p["id"] for p in every if p["type"] == kind]
        assert r.json()["filter"] == {"type": kind, "search": None}
    workloads = run_cli("presets", "list", "-t", "WORKLOAD", "-f", "json")   # any case
    assert set(_ids(workloads)) == BUILTIN_WORKLOADS


def test_unknown_type_is_exit_2_naming_the_choices(run_cli):
    _one_line_error(run_cli("presets", "list", "--type", "gpu"), "unknown preset type 'gpu'",
                    "model, hardware or workload")


def test_search_matches_id_or_name_in_any_case(run_cli):
    # "h20" is in the ids h20 and h200 and nowhere else (h100-sxm, h800 ... do not contain it).
    r = run_cli("presets", "list", "H20", "-f", "json")
    assert _ids(r) == ["h20", "h200"]
    assert r.json()["headline"].startswith("2 of ")
    # "Instinct" is only in the names (AMD Instinct MI300X 192GB, ...), not in any id.
    amd = _ids(run_cli("presets", "list", "instinct", "-f", "json"))
    assert amd and all(i.startswith("mi3") for i in amd) and "mi300x" in amd
    # the two filters together: "qwen3" names models only; with --type hardware nothing is left.
    assert all(t == "model" for t in (p["type"] for p in
                                      run_cli("presets", "list", "qwen3", "-f", "json").json()["presets"]))
    _one_line_error(run_cli("presets", "list", "qwen3", "--type", "hardware"), "no hardware preset has 'qwen3'")


def test_search_matching_nothing_is_one_line_with_a_suggestion(run_cli):
    _one_line_error(run_cli("presets", "list", "h2OO"), "no preset has 'h2OO' in its id or name", "did you mean")
    _one_line_error(run_cli("presets", "list", "zzzz"), "no preset has 'zzzz'", "kvplan presets list")
    _one_line_error(run_cli("presets", "list", "  "), "the search word is empty")


def test_gpu_columns_carry_raw_numbers(run_cli):
    r = run_cli("presets", "list", "h100", "-t", "hardware", "-f", "json")
    rows = {p["id"]: p for p in r.json()["presets"]}
    assert set(rows) == {"h100-pcie", "h100-sxm"}
    sxm = rows["h100-sxm"]
    # 79.65 GiB (nvidia-smi 81,559 MiB) x 2^30 = 85,523,536,281.6 B -> 85,523,536,281; 3.35 TB/s = 3.35e12 B/s;
    # Lambda's 8x H100 SXM $3.99 per GPU-hour (lambda.ai/instances, 2026-09-20).
    assert sxm["hbm_bytes"] == 85_523_536_281
    assert sxm["hbm_bandwidth_bytes_per_second"] == pytest.approx(3.35e12)
    assert sxm["price_usd_per_gpu_hour"] == 3.99 and sxm["price_as_of"] == "2026-09-20"
    assert rows["h100-pcie"]["price_usd_per_gpu_hour"] == 3.29          # Lambda 1x H100 PCIe
    assert rows["h100-pcie"]["hbm_bandwidth_bytes_per_second"] == pytest.approx(2.0e12)
    # every number explains itself, with the preset's own source
    why = r.json()["derivations"]["presets[].price_usd_per_gpu_hour"]
    assert "lambda.ai" in why["sources"][0]
    gpus = run_cli("presets", "list", "-t", "hardware", "-f", "json").json()["presets"]
    no_price = {p["id"] for p in gpus if p["price_usd_per_gpu_hour"] is None}
    assert {"h800", "mi325x", "h20"} <= no_price


def test_gpu_columns_in_csv_and_table(run_cli, monkeypatch):
    r = run_cli("presets", "list", "b200", "-f", "csv")
    rows = list(csv.reader(io.StringIO(r.out.split("\n", 1)[1])))
    head, b200 = rows[0], dict(zip(rows[0], rows[1], strict=True))
    assert head[3:6] == ["HBM (bytes)", "HBM bandwidth (bytes_per_second)", "price per GPU-hour (usd_per_hour)"]
    # 179.06 GiB x 2^30 = 179 x 1,073,741,824 + 0.06 x 1,073,741,824 = 192,199,786,496 + 64,424,509.4
    # = 192,264,211,005 B; 7.7 TB/s; Lambda 8x B200 $6.69 per GPU-hour
    assert b200["HBM (bytes)"] == "192264211005" and float(b200["HBM bandwidth (bytes_per_second)"]) == 7.7e12
    assert b200["price per GPU-hour (usd_per_hour)"] == "6.69"
    monkeypatch.setenv("COLUMNS", "160")
    table = run_cli("presets", "list", "b200").out
    assert "179.06 GiB" in table and "7.70 TB/s" in table and "$6.69/h" in table
    # models and workloads have no GPU columns
    models = run_cli("presets", "list", "-t", "model").out
    assert "HBM" not in models and "price" not in models


def _gpu(**extra):
    data = {"type": "hardware", "id": "x", "name": "x", "sources": ["test"],
            "hbm_capacity_gib": {"value": 80.0, "source": "test"},
            "host_link": {"name": "pcie", "theoretical_gb_s_per_direction": {"value": 64, "source": "test"}}}
    data.update(extra)
    return data


def _price(value=2.5, as_of="2026-09-20", offer="test offer"):
    return {"usd_per_gpu_hour": {"value": value, "source": "test page"}, "offer": offer, "as_of": as_of}


def test_price_is_validated_in_user_presets():
    assert build_hardware(_gpu(price=_price()), "x.toml").price.usd_per_gpu_hour.value == 2.5
    for bad, needle in ((_price(value=-1), "must be positive"), (_price(value=1200), "is not a price for one"),
                        (_price(as_of="20/09/2026"), "YYYY-MM-DD"), (_price(as_of="2026-13-01"), "YYYY-MM-DD")):
        with pytest.raises(KvplanError, match=needle):
            build_hardware(_gpu(price=bad), "x.toml")
    missing = _price()
    del missing["as_of"]
    with pytest.raises(KvplanError, match="as_of"):
        build_hardware(_gpu(price=missing), "x.toml")
    with pytest.raises(KvplanError, match="unit"):   # an unknown key is refused, not ignored
        build_hardware(_gpu(price={**_price(), "unit": "eur"}), "x.toml")
