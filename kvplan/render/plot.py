"""PNG charts with matplotlib (an optional extra: pip install 'kvplan[plot]')."""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.render.result import Chart


def write_chart_png(chart: Chart, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise KvplanError("--plot needs matplotlib", "pip install 'kvplan[plot]', or drop --plot for the "
                          "terminal chart") from None
    if path.suffix.lower() != ".png":
        raise KvplanError(f"--plot {path} is not a .png file", "give a file name ending in .png")
    if chart.timeline:
        _timeline(plt, chart, path)
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:  # numeric x labels (token counts) go on a log-2 axis at their true positions
        x = [int(v.replace(",", "")) for v in chart.x_values]
        ax.set_xscale("log", base=2)
    except ValueError:
        x = list(range(len(chart.x_values)))
    for name, values in chart.series:
        ax.plot(x, list(values), marker="o", label=name)
    ax.set_xticks(x, chart.x_values, rotation=30)
    ax.minorticks_off()
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    if chart.log_y:
        ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(bottom=0)
    ax.set_title(chart.title)
    ax.grid(True, alpha=0.3)
    ax.legend(title=chart.legend or None)
    fig.tight_layout()
    _save(plt, fig, path)


def _save(plt, fig, path: Path) -> None:
    try:
        fig.savefig(path, dpi=120)
    except OSError as err:
        raise KvplanError(f"cannot write {path}: {err.strerror}", "check the folder exists and is writable") from None
    finally:
        plt.close(fig)


def _timeline(plt, chart: Chart, path: Path) -> None:
    """One panel per series over a shared linear time axis (x values are the slices' start times)."""
    x = [float(v.replace(",", "")) for v in chart.x_values]
    fig, axes = plt.subplots(len(chart.series), 1, figsize=(8, 1.8 * len(chart.series) + 0.8), sharex=True)
    for ax, (name, values) in zip(axes, chart.series, strict=True):
        ax.step(x, list(values), where="post")
        ax.set_ylabel(name, fontsize=8)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel(chart.x_label)
    axes[0].set_title(chart.title)
    fig.tight_layout()
    _save(plt, fig, path)
