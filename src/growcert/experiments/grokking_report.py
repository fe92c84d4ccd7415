"""Reading a grokking run (growcert.experiments.grokking, PAPERS.md P2): the accuracy figure, the gate
diagnostics figure and one claim row per PopulationRiskAdam variant.

Everything here reads the tidy tables a run writes (summary.csv, curves.csv), never a network. Each
variant (`poprisk-<gate>-<variance>-wd<decay>`) is judged on its own against AdamW at the paper's small
decay and at the variant's own decay; "median steps" counts a seed that never reached 95 % as beyond
the cap (`experiments.common.median_steps`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from growcert.config import stage_settings
from growcert.experiments.common import format_steps, median_steps
from growcert.report.claims import claim_row


def plot_grokking(curves_csv: str | Path, out_png: str | Path) -> None:
    """Train and held-out accuracy against log step, one line per optimizer (band: range over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from growcert.report.figures import save_figure
    import seaborn as sns

    curves = pd.read_csv(curves_csv)
    curves = curves[curves["step"] > 0]  # a log axis has no step 0
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for axis, (column, title) in zip(axes, (("train_acc", "train"), ("test_acc", "held-out"))):
        sns.lineplot(curves, x="step", y=column, hue="optimizer", errorbar=("pi", 100), ax=axis,
                     legend=column == "test_acc")
        axis.set_xscale("log")
        axis.set_title(f"{title} accuracy")
        axis.set_ylabel("accuracy")
        axis.axhline(0.95, color="grey", linewidth=0.7, linestyle=":")
        axis.grid(alpha=0.3)
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: curves fill the panel
    figure.tight_layout()
    save_figure(figure, out_png)


def grokking_claims(summary: pd.DataFrame | str | Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Claim rows (paper, claim, paper_value, this_run, holds, note), one per PopulationRiskAdam variant
    (gate reading × variance source × decay, the row's scope),
    medians over seeds. The arm is compared with AdamW in the paper's regime (small weight decay) and,
    when the sweep has it, with AdamW at the arm's own weight decay; it holds only if it beats both,
    so a large decay that speeds up AdamW as much cannot pass as the gate's doing."""
    settings = stage_settings("grokking", settings)
    table = pd.read_csv(summary) if not isinstance(summary, pd.DataFrame) else summary
    baseline_wd, cap = settings["adamw"]["baseline_weight_decay"], settings["steps"]
    adamw = table[table["optimizer"].str.startswith("AdamW")]
    adamw_steps = {wd: median_steps(frame["step_95"]) for wd, frame in adamw.groupby("weight_decay")}
    if baseline_wd not in adamw_steps:
        raise ValueError(f"no AdamW run with the baseline weight decay {baseline_wd}: add it to adamw.weight_decays")
    sweep = "; ".join(f"{name}: {format_steps(median_steps(frame['step_95']), cap)}"
                      for name, frame in table.groupby("optimizer", sort=False))
    rows = []
    poprisk = table[table["optimizer"].str.startswith("poprisk-")]
    for (name, wd), frame in poprisk.groupby(["optimizer", "weight_decay"], sort=False):
        steps = median_steps(frame["step_95"])
        rivals = {baseline_wd: adamw_steps[baseline_wd]}
        if wd in adamw_steps:
            rivals[wd] = adamw_steps[wd]
        parts = []
        for rival_wd, rival in rivals.items():
            ratio = ("" if not math.isfinite(steps) else f" ({rival / steps:.1f}×)" if math.isfinite(rival)
                     else f" (> {cap / steps:.1f}×, AdamW capped)")
            parts.append(f"vs AdamW wd={rival_wd:g}: {format_steps(rival, cap)}{ratio}")
        holds = "not reached" if not math.isfinite(steps) else all(steps < rival for rival in rivals.values())
        rows.append(claim_row(
            "p2_grokking", scope=name,
            this_run=f"{name}: {format_steps(steps, cap)} " + "; ".join(parts),
            holds=holds,
            note=(f"a/b mod {settings['p']}, train fraction {settings['train_fraction']}, batch "
                     f"{settings['batch_size'] or 'full'}, cap {cap:,} steps, {len(frame)} seed(s). The paper's "
                     f"baseline is AdamW with small weight decay (wd={baseline_wd:g} here); holds = fewer steps "
                     f"than it and than AdamW at the same decay. Whole sweep (median step to 95 %): {sweep}.")))
    return rows

