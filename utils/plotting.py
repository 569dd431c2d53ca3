"""Plotting helpers: training curves and bar charts that label the hardware they were measured on."""
from __future__ import annotations

from typing import Iterable, Sequence

import matplotlib

matplotlib.rcParams.update({"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3})
import matplotlib.pyplot as plt  # noqa: E402

from .training import History  # noqa: E402


def plot_history(history: History | Sequence[dict[str, float]], metrics: Iterable[str] = ("loss", "accuracy"),
                 title: str | None = None):
    """One panel per metric with its train and val curves over epochs. Returns the matplotlib Figure."""
    records = history.records if isinstance(history, History) else list(history)
    if not records:
        raise ValueError("history is empty: train for at least one epoch first")
    metrics = list(metrics)
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.5), squeeze=False)
    epochs = [r["epoch"] for r in records]
    for ax, metric in zip(axes[0], metrics):
        drawn = False
        for split, style in (("train", "-o"), ("val", "-s")):
            key = f"{split}_{metric}"
            if key in records[0]:
                ax.plot(epochs, [r[key] for r in records], style, label=split, markersize=4)
                drawn = True
        if not drawn and metric in records[0]:
            ax.plot(epochs, [r[metric] for r in records], "-o", markersize=4, label=metric)
            drawn = True
        if not drawn:
            raise KeyError(f"no '{metric}', 'train_{metric}' or 'val_{metric}' in the history")
        ax.set_xlabel("epoch")
        ax.set_ylabel(metric)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def bar_chart(labels: Sequence[str], values: Sequence[float], *, ylabel: str, title: str = "",
              hardware: str | None = None, annotate: str = "{:.3g}"):
    """A labelled bar chart; ``hardware`` is printed under the title so the numbers keep their context."""
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(labels)), 3.5))
    bars = ax.bar(list(labels), list(values), color="tab:blue")
    for b, v in zip(bars, values):
        ax.annotate(annotate.format(v), (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                    fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title + (f"\n{hardware}" if hardware else ""), fontsize=10)
    fig.tight_layout()
    return fig
