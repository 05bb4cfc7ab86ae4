"""Issue 18, "Output a user reads" (--plot) and "A default the user never set must not refuse the plan"
(compare-preemption's --generated): each pinned by a test that failed before the fix."""

from __future__ import annotations

import pytest
from test_first_use_defaults import PHI4, model_dir


# --- compare-preemption's default --generated fits the model's limit ----------------------------------------
def test_compare_preemption_fits_its_default_generated_into_phi4s_limit(run_cli, tmp_path):
    r = run_cli("compare-preemption", "-m", model_dir(tmp_path, PHI4, "phi-4"), "-g", "h100-sxm", "-f", "json")
    assert r.code == 0, r.err
    data = r.json()
    # keep the 1,000-token prompt; the default 20,000 generated shortened to 16,384 - 1,000 = 15,384
    assert "20,000" in data["headline"] and "16,384" in data["headline"], data["headline"]
    assert "1,000 + 15,384 tokens" in data["headline"], data["headline"]
    assert "30,000" not in data["headline"], data["headline"]


def test_compare_preemption_says_so_on_its_first_line(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    r = run_cli("compare-preemption", "-m", model_dir(tmp_path, PHI4, "phi-4"), "-g", "h100-sxm")
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert first.endswith("1,000 + 15,384 tokens (the default generated of 20,000 shortened to fit phi-4's maximum "
                          "context of 16,384)"), first


def test_compare_preemption_default_generated_that_fits_is_kept(run_cli):
    # llama-3.1-8b serves 131,072 tokens: 1,000 + 20,000 fits, nothing is shortened
    r = run_cli("compare-preemption", "-m", "llama-3.1-8b", "-g", "h100-sxm", "-f", "json")
    assert r.code == 0, r.err
    assert r.json()["headline"].endswith("1,000 + 20,000 tokens"), r.json()["headline"]


@pytest.mark.parametrize("args", [("--generated", "30k"), ("--generated", "16k", "--prompt", "1k"),
                                  ("--decode", "17k"), ("--prompt", "16384")])
def test_compare_preemption_refuses_a_given_generated_naming_generated(run_cli, tmp_path, args):
    r = run_cli("compare-preemption", "-m", model_dir(tmp_path, PHI4, "phi-4"), "-g", "h100-sxm", *args)
    assert r.code == 2, (r.out, r.err)
    assert ("--generated" in r.err or "generated token" in r.err) and "--decode" not in r.err, r.err
    assert "16,384" in r.err and "Traceback" not in r.err, r.err


# --- --plot ----------------------------------------------------------------------------------------------
def _concurrency_figure(tmp_path, run_cli):
    pytest.importorskip("matplotlib")
    out = tmp_path / "c.png"
    # the default contexts (..., 32,768, ...) plus the request's own 1,000 + 32,000 = 33,000
    r = run_cli("concurrency", "-m", "llama-3.1-8b", "-g", "h100-sxm", "--prompt", "1k", "--decode", "32k",
                "--plot", str(out))
    return r, out


def test_plot_says_where_it_wrote_the_file(run_cli, tmp_path):
    r, out = _concurrency_figure(tmp_path, run_cli)
    assert r.code == 0, r.err
    assert out.stat().st_size > 1000
    assert f"wrote {out}" in r.err.splitlines(), r.err


def _figure(chart, about):
    pytest.importorskip("matplotlib")
    from kvplan.render.plot import chart_figure

    return chart_figure(chart, about)


def _concurrency_chart():
    from kvplan.calc.concurrency import plan_concurrency
    from kvplan.options.command import concurrency_options
    from kvplan.present.concurrency import present
    from kvplan.scenario import Scenario

    s = Scenario(model="llama-3.1-8b", hardware="h100-sxm", prompt="1k", decode="32k")
    result = present(plan_concurrency(s, concurrency_options()))
    return result, result.charts[0]


def test_no_two_x_tick_labels_overlap(tmp_path):
    pytest.importorskip("matplotlib")
    result, chart = _concurrency_chart()
    assert "32,768" in chart.x_values and "33,000" in chart.x_values   # the pair that overlapped
    fig, plt = _figure(chart, result.headline)
    try:
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
            assert len(boxes) >= 3
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    assert not a.overlaps(b), (a, b)
    finally:
        plt.close(fig)


def test_no_tick_at_or_below_zero_on_a_log_axis():
    pytest.importorskip("matplotlib")
    result, chart = _concurrency_chart()
    fig, plt = _figure(chart, result.headline)
    try:
        fig.canvas.draw()
        checked = 0
        for ax in fig.axes:
            for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
                if axis.get_scale() in ("log", "symlog"):
                    checked += 1
                    shown = [t for t in axis.get_majorticklocs() if min(low, high) <= t <= max(low, high)]
                    assert shown and min(shown) > 0, (axis.get_scale(), shown)
                    assert min(low, high) > 0
        assert checked >= 1
    finally:
        plt.close(fig)


def test_the_title_names_model_gpu_and_layout():
    pytest.importorskip("matplotlib")
    result, chart = _concurrency_chart()
    fig, plt = _figure(chart, result.headline)
    try:
        title = " ".join(ax.get_title() for ax in fig.axes) + (fig._suptitle.get_text() if fig._suptitle else "")
        # llama-3.1-8b on one 8-GPU H100 node by default (TP 8: one node)
        for part in ("llama-3.1-8b", "8 x h100-sxm", "TP=8", chart.title):
            assert part in title, title
    finally:
        plt.close(fig)
