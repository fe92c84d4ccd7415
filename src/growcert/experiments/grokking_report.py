"""Reading a grokking run (growcert.experiments.grokking, P2): the accuracy figure, the gate
diagnostics figure and one claim row per PopulationRiskAdam variant.

Everything here reads the tidy tables a run writes (artifacts.SUMMARY, CURVES), never a network. Each
variant (`poprisk-<gate>-<variance>-wd<decay>`) is judged against AdamW at its own decay (the config check
refuses a variant decay without that AdamW), paired by seed, steps as interval-censored bounds
(`verdicts.judge_steps`), each at its Holm level, then the claim over every variant (`families.judge_family`);
the other AdamW decays stay in the note. Each reading also gets a named secondary row, never deciding: the ratio of
median steps from the interval-censored log-normal AFT fit on the same runs (`stats.lognormal_aft`; docs/science.md,
"Verdicts": why the order-statistic interval stays primary). "Median steps" counts a seed that never reached 95 %
as beyond the cap (`experiments.common.median_steps`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from growcert.config import stage_settings
from growcert.experiments.common import format_steps, median_steps
from growcert.referee.claims import CLAIMS
from growcert.referee.families import judge_family
from growcert.referee.looks import look_level, with_note
from growcert.referee.rows import claim_row
from growcert.referee.verdicts import LEVEL, Judgement, judge_interval, judge_steps, not_tested
from growcert.stats.lognormal_aft import fit_lognormal_aft, step_intervals

AFT_READING = "interval-censored log-normal AFT, a secondary reading: never decides"


def plot_grokking(curves_csv: str | Path, out_png: str | Path) -> None:
    """Train and held-out accuracy against log step, one line per optimizer (band: range over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    from growcert.report.figures import save_figure

    curves = pd.read_csv(curves_csv)
    curves = curves[curves["step"] > 0]  # a log axis has no step 0
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for axis, (column, title) in zip(axes, (("train_acc", "train"), ("test_acc", "held-out"))):
        sns.lineplot(
            curves, x="step", y=column, hue="optimizer", errorbar=("pi", 100), ax=axis, legend=column == "test_acc"
        )
        axis.set_xscale("log")
        axis.set_title(f"{title} accuracy")
        axis.set_ylabel("accuracy")
        axis.axhline(0.95, color="grey", linewidth=0.7, linestyle=":")
        axis.grid(alpha=0.3)
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: curves fill the panel
    figure.tight_layout()
    save_figure(figure, out_png)


def grokking_claims(
    summary: pd.DataFrame | str | Path, settings: dict[str, Any], reference: str | None = None
) -> list[dict[str, Any]]:
    """Claim rows (rows.ROW_COLUMNS): one per PopulationRiskAdam variant (gate reading × variance source ×
    decay, the row's scope, a part), its speed-up over AdamW at the variant's own decay paired by seed, steps as
    interval-censored bounds (verdicts.judge_steps) at its Holm level; then the claim's primary row over every
    variant (families.judge_family). In reference run `reference` (docs/reference-results/<name>), a judgement on
    more seeds than a registered look at that run is a later look: the family's level is the group-sequential one
    of `growcert.referee.looks.look_level`, and every row says so."""
    settings = stage_settings("grokking", settings)
    table = pd.read_csv(summary) if not isinstance(summary, pd.DataFrame) else summary
    cap, every = settings["steps"], settings["eval_every"]
    poprisk = table[table["optimizer"].str.startswith("poprisk-")]
    variants = {name: frame for name, frame in poprisk.groupby("optimizer", sort=False)}
    baselines = _own_decay_baselines(table[table["optimizer"].str.startswith("AdamW")], variants)
    effect = CLAIMS["p2_grokking"].effect

    def paired(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """AdamW's and the reading's steps on their common seeds, and where each reading run was stopped: with paired
        caps, at its seed's AdamW step (the cap where AdamW is censored); None with one cap for all."""
        baseline_steps, steps = baselines[name][1], variants[name].set_index("seed")["step_95"]
        seeds = baseline_steps.index.intersection(steps.index)
        baseline = baseline_steps[seeds].to_numpy(float)
        stopped = np.where(np.isfinite(baseline), baseline, cap) if settings["cap"] == "paired" else None
        return baseline, steps[seeds].to_numpy(float), stopped

    def judge(level: float, plan: bool = True) -> dict[str, Judgement]:
        judged = {}
        for name in variants:
            baseline, steps, stopped = paired(name)
            against = baselines[name][0]
            judged[name] = judge_steps(
                effect, baseline, steps, level, cap, every, against, plan=plan, variant_cap=stopped
            )
        return judged

    setting = _setting_note(settings, table)
    if not variants:
        return []
    at = look_level("p2_grokking", int(table["seed"].nunique()), reference, LEVEL)
    family = judge_family("p2_grokking", judge, at.level, "readings")
    rows = [
        claim_row(
            "p2_grokking",
            judgement,
            scope=name,
            role="part",
            this_run=f"{name}: {format_steps(median_steps(variants[name]['step_95']), cap)} vs "
            f"{baselines[name][0]}: {format_steps(median_steps(baselines[name][1]), cap)} "
            "(median steps)",
            note=setting,
        )
        for name, judgement in family.readings.items()
    ]
    rows.append(
        claim_row(
            "p2_grokking",
            family.claim,
            scope=family.scope("readings"),
            this_run=f"{len(variants)} readings, each against AdamW at its own decay",
            note=setting,
        )
    )
    rows += [
        claim_row(
            "p2_grokking",
            aft_judgement(*paired(name), cap, settings["eval_every"], at.level),
            scope=f"{name}, {AFT_READING}",
            role="secondary",
            effect=AFT_EFFECT,
            this_run=f"{name} against {baselines[name][0]}, every seed's runs as censored intervals",
            note=setting,
        )
        for name in variants
    ]
    return [with_note(row, at) for row in rows]


def _own_decay_baselines(adamw: pd.DataFrame, variants: dict[str, pd.DataFrame]) -> dict[str, tuple[str, pd.Series]]:
    """Each variant's baseline: AdamW at the variant's own weight decay (its name, its steps to 95 % by seed)."""
    baselines = {}
    for name, frame in variants.items():
        decay = float(frame["weight_decay"].iloc[0])
        own = adamw[adamw["weight_decay"] == decay]
        if own.empty:
            raise ValueError(
                f"no AdamW run at weight decay {decay:g}, the decay of {name}: every variant is compared "
                "with AdamW at its own decay (add it to grokking.adamw.weight_decays)"
            )
        baselines[name] = (f"AdamW wd={decay:g}", own.set_index("seed")["step_95"])
    return baselines


def _setting_note(settings: dict[str, Any], table: pd.DataFrame) -> str:
    """The rows' note: the task's setting and every optimizer's median step to 95 %."""
    cap = settings["steps"]
    sweep = "; ".join(
        f"{name}: {format_steps(median_steps(frame['step_95']), cap)}"
        for name, frame in table.groupby("optimizer", sort=False)
    )
    return (
        f"a/b mod {settings['p']}, train fraction {settings['train_fraction']}, batch "
        f"{settings['batch_size'] or 'full'}, cap {cap:,} steps, evaluated every {settings['eval_every']}, "
        f"{table['seed'].nunique()} seed(s). Median step to 95 % (whole sweep): {sweep}."
    )


AFT_EFFECT = replace(
    CLAIMS["p2_grokking"].effect,
    name="ratio of median steps to 95 % held-out (AdamW / variant), log-normal AFT",
    interval="interval-censored log-normal AFT by maximum likelihood (one σ for both arms), "
    "profile-likelihood interval (stats.lognormal_aft)",
)


def aft_judgement(
    baseline: np.ndarray, variant: np.ndarray, stopped: np.ndarray | None, cap: int, eval_every: int, level: float
) -> Judgement:
    """The AFT reading of one gate reading against its AdamW (docs/science.md, "Verdicts"): the same runs, each an
    interval of steps (reached at s: (s − eval_every, s]; stopped at its cap or paired cap without reaching: beyond
    it), the ratio of median steps AdamW / variant from the log-normal AFT fit with its profile-likelihood interval
    at `level`, judged by the registered effect's SESOI; no design figures (a model-based secondary)."""
    seeds = len(baseline)
    try:
        fit = fit_lognormal_aft(
            step_intervals(baseline, eval_every, cap),
            step_intervals(variant, eval_every, cap if stopped is None else stopped),
            level,
        )
    except ValueError as error:
        return not_tested(f"the AFT fit is not identified: {error}", seeds, level)
    judged = judge_interval(AFT_EFFECT, *fit.ratio, level, seeds)
    why = judged.why.removesuffix("; the spread over seeds is unknown, so is the design")  # a secondary: no design
    return replace(
        judged,
        why=f"{why}; σ of log steps {fit.scale:.3g}, a model-based reading that assumes "
        "log-normal times with one σ for both arms",
    )
