"""PNG charts with matplotlib (an optional extra: pip install 'kvplan[plot]')."""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.render.result import Chart


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise KvplanError("--plot needs matplotlib", "pip install 'kvplan[plot]', or drop --plot for the "
                          "terminal chart") from None
    return plt


def write_chart_png(chart: Chart, path: Path, about: str = "") -> None:
    """Write ``chart`` to the PNG ``path`` (titled with ``about``, the headline: model, GPUs and their split) and
    say so on stderr."""
    import sys

    if path.suffix.lower() != ".png":
        _pyplot()
        raise KvplanError(f"--plot {path} is not a .png file", "give a file name ending in .png")
    fig, plt = chart_figure(chart, about)
    _save(plt, fig, path)
    sys.stderr.write(f"wrote {path}\n")


def chart_figure(chart: Chart, about: str = ""):
    """The figure of ``chart`` (laid out, its x labels thinned so none overlap), and pyplot to close it with."""
    plt = _pyplot()
    if chart.timeline:
        fig = _timeline(plt, chart)
    else:
        fig = _lines(plt, chart)
    fig.axes[0].set_title(_title(chart.title, about), fontsize=9)
    fig.tight_layout()
    for ax in fig.axes:
        _thin_x_labels(fig, ax)
    return fig, plt


def _title(title: str, about: str) -> str:
    """The chart's title over the deployment: the headline's first part (model on N x GPU: TP x PP x DP), the
    rest (dtype, engine, request) on a second line."""
    if not about:
        return title
    head, _, rest = about.partition("; ")
    return f"{title}\n{head}" + (f"\n{rest}" if rest else "")


def _thin_x_labels(fig, ax) -> None:
    """Blank the x tick labels that would overlap one kept before them (left to right), so that none overlap."""
    renderer = fig.canvas.get_renderer()
    labels = sorted((t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()),
                    key=lambda t: t.get_window_extent(renderer).x0)
    kept = None
    for label in labels:
        box = label.get_window_extent(renderer).expanded(1.1, 1.0)
        if kept is not None and box.overlaps(kept):
            label.set_visible(False)
        else:
            kept = box


def _lines(plt, chart: Chart):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:  # numeric x labels (token counts) go on a log-2 axis at their true positions
        x = [int(v.replace(",", "")) for v in chart.x_values]
        ax.set_xscale("log", base=2)
    except ValueError:
        x = list(range(len(chart.x_values)))
    for name, values in chart.series:
        # a log axis has no 0: a point at 0 (or below) is left out, not drawn at the axis' floor
        ax.plot(x, [v if v > 0 or not chart.log_y else float("nan") for v in values], marker="o", label=name)
    ax.set_xticks(x, chart.x_values, rotation=30, ha="right")
    ax.minorticks_off()
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    if chart.log_y:
        positive = [v for _, values in chart.series for v in values if v > 0]
        ax.set_yscale("log")
        ax.set_ylim(bottom=min(positive, default=1) / 2)
    else:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(title=chart.legend or None)
    return fig


def _save(plt, fig, path: Path) -> None:
    from kvplan.inputs.files import check_writable

    try:
        check_writable(path, "--plot")
        fig.savefig(path, dpi=120)
    except OSError as err:
        raise KvplanError(f"cannot write {path}: {err.strerror}", "check the folder exists and is writable") from None
    finally:
        plt.close(fig)


def _timeline(plt, chart: Chart):
    """One panel per series over a shared linear time axis (x values are the slices' start times)."""
    x = [float(v.replace(",", "")) for v in chart.x_values]
    fig, grid = plt.subplots(len(chart.series), 1, figsize=(8, 1.8 * len(chart.series) + 0.8), sharex=True,
                             squeeze=False)
    axes = [row[0] for row in grid]
    for ax, (name, values) in zip(axes, chart.series, strict=True):
        ax.step(x, list(values), where="post")
        ax.set_ylabel(name, fontsize=8)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel(chart.x_label)
    return fig
