"""Reading a grokking run (growcert.experiments.grokking, P2): the accuracy figure, the gate
diagnostics figure and one claim row per PopulationRiskAdam variant.

Everything here reads the tidy tables a run writes (summary.csv, curves.csv), never a network. Each
variant (`poprisk-<gate>-<variance>-wd<decay>`) is judged on its own against AdamW at the paper's small
decay, paired by seed (`verdicts.judge_steps`), then the claim over every variant with Bonferroni; the
other AdamW decays stay in the note. "Median steps" counts a seed that never reached 95 % as beyond
the cap (`experiments.common.median_steps`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from growcert.config import stage_settings
from growcert.experiments.common import format_steps, median_steps
from growcert.report.claims import CLAIMS, claim_row
from growcert.report.verdicts import LEVEL, Judgement, family_judgement, judge_steps


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
    """Claim rows (claims.ROW_COLUMNS): one per PopulationRiskAdam variant (gate reading × variance source ×
    decay, the row's scope), its speed-up over AdamW at the paper's small decay paired by seed, censored runs
    censored (verdicts.judge_steps); then the claim over every variant with Bonferroni."""
    settings = stage_settings("grokking", settings)
    table = pd.read_csv(summary) if not isinstance(summary, pd.DataFrame) else summary
    baseline_wd, cap = settings["adamw"]["baseline_weight_decay"], settings["steps"]
    baseline_name = f"AdamW wd={baseline_wd:g}"
    baseline = table[table["optimizer"].str.startswith("AdamW") & (table["weight_decay"] == baseline_wd)]
    if baseline.empty:
        raise ValueError(f"no AdamW run with the baseline weight decay {baseline_wd}: add it to adamw.weight_decays")
    baseline_steps = baseline.set_index("seed")["step_95"]
    sweep = "; ".join(f"{name}: {format_steps(median_steps(frame['step_95']), cap)}"
                      for name, frame in table.groupby("optimizer", sort=False))
    poprisk = table[table["optimizer"].str.startswith("poprisk-")]
    variants = {name: frame.set_index("seed")["step_95"] for name, frame in poprisk.groupby("optimizer", sort=False)}
    effect = CLAIMS["p2_grokking"].effect

    def judge(level: float) -> dict[str, Judgement]:
        judged = {}
        for name, steps in variants.items():
            seeds = baseline_steps.index.intersection(steps.index)
            judged[name] = judge_steps(effect, baseline_steps[seeds].to_numpy(float), steps[seeds].to_numpy(float),
                                       level, cap, settings["eval_every"], baseline_name)
        return judged

    setting = (f"a/b mod {settings['p']}, train fraction {settings['train_fraction']}, batch "
               f"{settings['batch_size'] or 'full'}, cap {cap:,} steps, evaluated every {settings['eval_every']}, "
               f"{table['seed'].nunique()} seed(s). Median step to 95 % (whole sweep): {sweep}.")
    rows = [claim_row("p2_grokking", judgement, scope=name,
                      this_run=f"{name}: {format_steps(median_steps(variants[name]), cap)} vs {baseline_name}: "
                               f"{format_steps(median_steps(baseline_steps), cap)} (median steps)",
                      note=setting) for name, judgement in judge(LEVEL).items()]
    if variants:
        name, judgement = family_judgement(judge, LEVEL, len(variants))
        rows.append(claim_row("p2_grokking", judgement, scope=f"every variant, Bonferroni; deciding: {name}",
                              this_run=f"{len(variants)} variants against {baseline_name}", note=setting))
    return rows
