"""Figures from tidy tables (seaborn); never reads networks or stores."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from growcert.files import atomic_path  # noqa: E402

from growcert.report.training import final_rows, with_context  # noqa: E402


def save_figure(figure: plt.Figure, out: str | Path) -> None:
    with atomic_path(out) as temporary:
        figure.savefig(temporary, dpi=110, bbox_inches="tight", format=Path(out).suffix.lstrip(".") or "png")
    plt.close(figure)


def training_grid(table: pd.DataFrame, out: str | Path) -> None:
    """Held-out loss and accuracy at the end of training vs width, one line per depth, per family/dataset."""
    final = final_rows(table)
    panels = list(final.groupby(with_context(["family", "dataset"], final), dropna=False))
    figure, axes = plt.subplots(len(panels), 2, figsize=(10, 3.4 * len(panels)), squeeze=False)
    for row, ((family, dataset, *context), frame) in enumerate(panels):
        at_context = f" at context {int(context[0])}" if context and pd.notna(context[0]) else ""
        for column, metric in enumerate(("test_loss", "test_acc")):
            axis = axes[row, column]
            sns.lineplot(frame, x="width", y=metric, hue="depth", style="depth", markers=True, dashes=False,
                         errorbar=("pi", 100), palette="viridis", ax=axis)
            axis.set_xscale("log", base=2)
            axis.set_xticks(sorted(frame["width"].unique()), [str(w) for w in sorted(frame["width"].unique())])
            axis.set_title(f"{family} on {dataset}{at_context}: held-out {metric.split('_')[1]} at step {int(frame['step'].max())}")
            axis.set_ylabel(f"held-out {'loss (nats)' if metric == 'test_loss' else 'accuracy'}")
            axis.grid(alpha=0.3)
    figure.tight_layout()
    save_figure(figure, out)
