"""Reading a noisy-label DPO run (growcert.experiments.preference; docs/science.md, "preference (P2, noisy-label DPO)"):
the curves figure and the claim rows, two per PopulationRiskAdam variant (held-out reward accuracy and drift against
AdamW, paired by seed) and each claim over every variant with Holm (`families.judge_family`).

Everything here reads the tidy tables a run writes (artifacts.SUMMARY, CURVES), never a network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from growcert.config import stage_settings
from growcert.referee.claims import CLAIMS
from growcert.referee.families import judge_family
from growcert.referee.looks import look_level, with_note
from growcert.referee.rows import claim_row
from growcert.referee.verdicts import LEVEL, Judgement, judge_samples


def plot_preference(curves_csv: str | Path, out_png: str | Path) -> None:
    """Held-out reward accuracy, drift and training loss against step, one line per optimizer
    (band: range over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    from growcert.report.figures import save_figure

    curves = pd.read_csv(curves_csv)
    panels = (
        ("heldout_reward_acc", "held-out reward accuracy (clean pairs)"),
        ("drift", "drift: mean |β log π/π_ref| (held-out)"),
        ("train_loss", "DPO loss on noisy training labels"),
    )
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for axis, (column, title) in zip(axes, panels):
        sns.lineplot(
            curves,
            x="step",
            y=column,
            hue="optimizer",
            errorbar=("pi", 100),
            ax=axis,
            legend=column == "heldout_reward_acc",
        )
        axis.set_title(title)
        axis.set_ylabel(column.replace("_", " "))
        axis.grid(alpha=0.3)
    axes[0].axhline(0.5, color="grey", linewidth=0.7, linestyle=":")
    figure.tight_layout()
    save_figure(figure, out_png)


def preference_claims(
    summary: pd.DataFrame | str | Path, settings: dict[str, Any], reference: str | None = None
) -> list[dict[str, Any]]:
    """Claim rows (rows.ROW_COLUMNS), two per PopulationRiskAdam variant (its scope), paired by seed against
    AdamW: the difference in final held-out reward accuracy and the ratio of final drift (AdamW / variant);
    each variant a part judged at its Holm level, then each claim's primary row over every variant, at the level of
    the claim's look in reference run `reference` (`growcert.referee.looks.look_level`; the rows say which look)."""
    settings = stage_settings("preference", settings)
    table = pd.read_csv(summary) if not isinstance(summary, pd.DataFrame) else summary
    by_seed = table.pivot_table(index="seed", columns="optimizer", values=["final_reward_acc", "final_drift"])
    if "AdamW" not in table["optimizer"].values:
        raise ValueError("preference summary lacks the AdamW baseline")
    medians = table.groupby("optimizer", sort=False)[["final_reward_acc", "final_drift"]].median()
    adamw, seeds = medians.loc["AdamW"], table["seed"].nunique()
    model = f"Hugging Face model {settings['hf_model']}" if settings["hf_model"] else "the pipeline's byte llama"
    note = (
        f"DPO (β={settings['dpo_beta']}) on {model}, {settings['pairs_train']} train pairs with "
        f"{settings['swap_rate']:.0%} labels swapped, {settings['pairs_test']} clean held-out pairs, "
        f"vowel-count reward, {settings['steps']} steps of batch {settings['batch_size']}, "
        f"lr {settings['lr']:g}, weight decay {settings['weight_decay']:g}; {seeds} seed(s), paired."
    )
    variants = [name for name in medians.index if name != "AdamW"]
    measures = {
        "p2_dpo_accuracy": lambda v: by_seed["final_reward_acc"][v] - by_seed["final_reward_acc"]["AdamW"],
        "p2_dpo_drift": lambda v: by_seed["final_drift"]["AdamW"] / by_seed["final_drift"][v],
    }
    rows = []
    for key, measure in measures.items():

        def judge(level: float, plan: bool = True, key=key, measure=measure) -> dict[str, Judgement]:
            return {v: judge_samples(CLAIMS[key].effect, measure(v).to_numpy(float), level, plan) for v in variants}

        if not variants:
            continue
        at = look_level(key, int(seeds), reference, LEVEL)
        family = judge_family(key, judge, at.level, "readings")
        first = len(rows)
        for variant, judgement in family.readings.items():
            gated = medians.loc[variant]
            this_run = (
                f"accuracy {adamw['final_reward_acc']:.3f} → {gated['final_reward_acc']:.3f}"
                if key == "p2_dpo_accuracy"
                else f"drift {adamw['final_drift']:.3f} → {gated['final_drift']:.3f}"
            ) + " (medians)"
            rows.append(
                claim_row(
                    key, judgement, scope=variant, this_run=f"AdamW → {variant}: {this_run}", note=note, role="part"
                )
            )
        rows.append(
            claim_row(
                key,
                family.claim,
                scope=family.scope("readings"),
                this_run=f"{len(variants)} readings against AdamW",
                note=note,
            )
        )
        rows[first:] = [with_note(row, at) for row in rows[first:]]
    return rows
