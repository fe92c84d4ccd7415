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


def plot_training_grid(table: pd.DataFrame, out: str | Path) -> None:
    """Held-out loss and accuracy at the end of training vs width, one line per depth, per family/dataset."""
    final = final_rows(table)
    panels = list(final.groupby(with_context(["family", "dataset"], final), dropna=False))
    figure, axes = plt.subplots(len(panels), 2, figsize=(10, 3.4 * len(panels)), squeeze=False)
    for row, ((family, dataset, *context), frame) in enumerate(panels):
        at_context = f" at context {int(context[0])}" if context and pd.notna(context[0]) else ""
        for column, metric in enumerate(("test_loss", "test_acc")):
            axis = axes[row, column]
            sns.lineplot(
                frame,
                x="width",
                y=metric,
                hue="depth",
                style="depth",
                markers=True,
                dashes=False,
                errorbar=("pi", 100),
                palette="viridis",
                ax=axis,
            )
            axis.set_xscale("log", base=2)
            axis.set_xticks(sorted(frame["width"].unique()), [str(w) for w in sorted(frame["width"].unique())])
            axis.set_title(
                f"{family} on {dataset}{at_context}: held-out {metric.split('_')[1]} at step {int(frame['step'].max())}"
            )
            axis.set_ylabel(f"held-out {'loss (nats)' if metric == 'test_loss' else 'accuracy'}")
            axis.grid(alpha=0.3)
    figure.tight_layout()
    save_figure(figure, out)


def gate_diagnostics(curves_csv: str | Path, out_png: str | Path, title: str) -> None:
    """Why a variant is slow: the gate's open fraction along training (left) and, for the streaming and
    microbatch sources, the median ratio of their variance to the exact s²/b of the same batch (right,
    log axis; 1 = exact), one line per PopulationRiskAdam variant (band: range over seeds). Any task's
    curves table (artifacts.CURVES) with columns optimizer, seed, step, open_fraction, variance_ratio."""
    curves = pd.read_csv(curves_csv)
    gated = curves[curves["optimizer"].str.startswith("poprisk-") & (curves["step"] > 0)]
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    if not gated.empty:
        sns.lineplot(
            gated, x="step", y="open_fraction", hue="optimizer", errorbar=("pi", 100), ax=axes[0], legend=False
        )
        ratios = gated.dropna(subset=["variance_ratio"])
        sns.lineplot(
            ratios if not ratios.empty else gated,
            x="step",
            y="variance_ratio",
            hue="optimizer",
            hue_order=sorted(gated["optimizer"].unique()),
            errorbar=("pi", 100),
            ax=axes[1],
        )
        axes[1].set_yscale("log")
        axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[0].set_title("gate open fraction (mean since last evaluation)")
    axes[0].set_ylabel("open fraction")
    axes[0].set_ylim(0, 1)
    axes[1].set_title("gate variance / exact s²/b, same batch (median over elements)")
    axes[1].set_ylabel("ratio")
    axes[1].axhline(1.0, color="grey", linewidth=0.7, linestyle=":")
    for axis in axes:
        axis.grid(alpha=0.3)
    figure.suptitle(title)
    figure.tight_layout()
    save_figure(figure, out_png)
