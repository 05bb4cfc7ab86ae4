"""PNG charts with matplotlib (an optional extra: pip install 'kvplan[plot]')."""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.result import Chart


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
    try:
        fig.savefig(path, dpi=120)
    except OSError as err:
        raise KvplanError(f"cannot write {path}: {err.strerror}", "check the folder exists and is writable") from None
    finally:
        plt.close(fig)
