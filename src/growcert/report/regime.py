"""The P1 regime map: tables, figures and claim rows of a context sweep.

Reads the pooled alignment table (results/stats/alignment.csv) and the training history
(results/stats/training.csv). The map is the runs of grids that sweep context (a `context` column,
grids[].contexts); their held-out pool, joined to the held-out loss at the same step, goes through
`growcert.stats.regime`:

- matched budget: width_trend at each checkpoint step (same step, same tokens per step);
- matched loss: matched_loss at common_loss_grid levels, then width_trend at each level.

Figures (one line per progress: a step, or a held-out loss level; reduction `sum_positions`, the
deepest point, geometric mean over seeds): d_align vs width per context at matched budget and at
matched loss; d_align vs context at the widest width; d_∥ and d_2 vs width; plug-in beside unbiased
d_align. A figure needs more than one width (the context figure more than one context); `drawable`
says which a table allows, and the report says why one is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from growcert.pipeline.artifacts import (  # noqa: E402
    REGIME_DALIGN_VS_CONTEXT,
    REGIME_DALIGN_VS_WIDTH,
    REGIME_DIMS_VS_WIDTH,
    REGIME_FIGURES,
    REGIME_PLUGIN_VS_UNBIASED,
    REGIME_SPREAD,
)
from growcert.referee.claims import CLAIMS, p1_primary_cells  # noqa: E402
from growcert.referee.families import judge_family  # noqa: E402
from growcert.referee.looks import look_level, with_note  # noqa: E402
from growcert.referee.rows import claim_row  # noqa: E402
from growcert.referee.verdicts import Judgement, judge_slopes, not_tested  # noqa: E402
from growcert.report.alignment import width_ticks  # noqa: E402
from growcert.report.figures import save_figure  # noqa: E402
from growcert.stats.regime import LOSS, common_loss_grid, matched_loss, regime_summary, seed_spread, width_trend  # noqa: E402

MODEL_KEYS = ["family", "dataset", "context", "depth", "width", "seed", "step"]
LOSS_LEVELS = 4  # held-out loss levels per panel at matched loss
# what a growth step shared across positions sees (docs/science.md, "Reducing q to one vector per example")
FIGURE_REDUCTION = "sum_positions"
# The figures' stems by the axis each needs more than one of (the figure registry's REGIME_FIGURES)
WIDTH_FIGURES, CONTEXT_FIGURES, SEED_FIGURES = (
    [figure.stem for figure in REGIME_FIGURES[axis]] for axis in ("widths", "contexts", "seeds")
)
# The whole regime map (configs/p1-regime.yaml): fewer of any axis is a slice of it.
FULL_MAP = {"contexts": 4, "widths": 4, "seeds": 3, "checkpoints": 4}


def regime_table(alignment: pd.DataFrame, training: pd.DataFrame) -> pd.DataFrame:
    """Held-out rows of the context sweep's stores, with the held-out loss of their model at that step."""
    if "context" not in alignment.columns or "context" not in training.columns:
        return pd.DataFrame(columns=list(alignment.columns) + [LOSS])
    held_out = alignment[(alignment["pool"] == "test") & alignment["context"].notna()]
    losses = training.loc[training["context"].notna(), MODEL_KEYS + [LOSS]]
    table = held_out.merge(losses.drop_duplicates(MODEL_KEYS), on=MODEL_KEYS, how="left", validate="many_to_one")
    return table.astype({"context": int})


def axes_of(table: pd.DataFrame) -> dict[str, list[int]]:
    return {
        "contexts": sorted(table["context"].unique()),
        "widths": sorted(table["width"].unique()),
        "seeds": sorted(table["seed"].unique()),
        "checkpoints": sorted(table["step"].unique()),
    }


def coverage(table: pd.DataFrame) -> str:
    """The map's axes, and whether they are the whole map or a slice of it."""
    if table.empty:
        return "no grid sweeps context (grids[].contexts), so there is no regime map in this run"
    axes = axes_of(table)
    whole = all(len(axes[name]) >= size for name, size in FULL_MAP.items())
    listed = "; ".join(f"{name} {', '.join(str(int(v)) for v in values)}" for name, values in axes.items())
    return (
        "the whole map" if whole else "a slice of the map (configs/p1-regime.yaml holds the whole map)"
    ) + f": {listed}"


def drawable(table: pd.DataFrame) -> dict[str, str]:
    """Figure stem -> "" when it can be drawn from `table`, else why not."""
    widths = table["width"].nunique() if len(table) else 0
    contexts = table["context"].nunique() if len(table) else 0
    no_widths = "" if widths > 1 else f"needs more than one width; the map has {widths}"
    no_contexts = "" if contexts > 1 else f"needs more than one context; the map has {contexts}"
    seeds = table["seed"].nunique() if len(table) else 0
    no_seeds = "" if seeds > 1 else f"needs more than one seed; the map has {seeds}"
    return {
        **{stem: no_widths for stem in WIDTH_FIGURES},
        **{stem: no_contexts for stem in CONTEXT_FIGURES},
        **{stem: no_seeds for stem in SEED_FIGURES},
    }


def regime_tables(table: pd.DataFrame, levels: int = LOSS_LEVELS) -> dict[str, pd.DataFrame]:
    """budget: width_trend per (cell, step); matched: d at common held-out loss levels; loss: width_trend
    per (cell, loss level)."""
    # An empty table (no context sweep) gives empty tables that still carry their columns.
    matched = matched_loss(table, common_loss_grid(table, levels) if len(table) else [])
    reached = matched[matched["reached"].astype(bool)]
    return {"budget": width_trend(table, "step"), "matched": matched, "loss": width_trend(reached, LOSS)}


def primary_progress(trend: pd.DataFrame, progress: str) -> pd.Series:
    """The pre-registered progress of each context (claims.CLAIMS p1_regime_*: primary): its last checkpoint at
    matched budget, its lowest common held-out loss level (the furthest progress every width and seed reaches)
    at matched loss."""
    pick = "max" if progress == "step" else "min"
    return trend[progress] == trend.groupby("context")[progress].transform(pick)


def cells_table(tables: dict[str, pd.DataFrame], level: float = 0.95) -> pd.DataFrame:
    """Both comparisons' cells in one table for the report, keyed by `comparison` and `progress`, each with
    its verdict word at `level` (verdicts.judge_slopes against the paper's slope), its direction, the seeds that
    would resolve it, whether it is the claim's primary cell of its context (the others never decide) and the
    reason."""
    frames = []
    for name, column in (("matched budget (step)", "step"), ("matched loss (held-out nats)", LOSS)):
        trend = tables["budget" if column == "step" else "loss"]
        if len(trend):
            primary = p1_primary_cells(trend) & primary_progress(trend, column)
            frames.append(
                trend.assign(primary=primary.to_numpy()).rename(columns={column: "progress"}).assign(comparison=name)
            )
    if not frames:
        return pd.DataFrame(columns=["comparison", "context", "progress", "reduction", "point", "primary", "verdict"])
    cells = pd.concat(frames, ignore_index=True)
    judged = judge_slopes(CLAIMS["p1_regime_budget"].effect, cells, level)
    cells = cells.assign(
        verdict=[j.verdict for j in judged],
        direction=[j.direction for j in judged],
        seeds_to_reproduce=[j.seeds_to_reproduce for j in judged],
        seeds_to_contradict=[j.seeds_to_contradict for j in judged],
        why=[j.why for j in judged],
    )
    first = [
        "comparison",
        "context",
        "progress",
        "reduction",
        "point",
        "primary",
        "verdict",
        "direction",
        "slope",
        "slope_lo",
        "slope_hi",
        "seeds",
        "seeds_to_reproduce",
        "seeds_to_contradict",
        "trend",
    ]
    return cells[first + [c for c in cells.columns if c not in first]]


def regime_claims(
    table: pd.DataFrame, tables: dict[str, pd.DataFrame], level: float = 0.95, reference: str | None = None
) -> list[dict[str, Any]]:
    """Per comparison: one part per context (its primary cell: the last checkpoint or the lowest common loss
    level, the last point, sum_positions) and the claim's primary row with Holm across the contexts. Every other
    cell is judged in `cells_table` and never decides the claim. In reference run `reference`, a claim judged at a
    later look (more seeds than a registered look of its data) is judged at the group-sequential level of
    `growcert.referee.looks.look_level`, against the seeds of its largest context, and its rows say so."""
    rows = []
    scope = coverage(table)
    for key, name, progress in (("p1_regime_budget", "budget", "step"), ("p1_regime_loss", "loss", LOSS)):
        trend = tables[name]
        if trend.empty:
            continue
        primary = trend[(p1_primary_cells(trend) & primary_progress(trend, progress)).to_numpy()]
        comparison = (
            "matched budget: widths at the same step and tokens per step"
            if name == "budget"
            else f"matched held-out loss: d_align interpolated at {LOSS_LEVELS} loss levels every width and "
            "seed of a context reaches, log-linear between the bracketing checkpoints"
        )
        source = table if name == "budget" else tables["matched"][tables["matched"]["reached"].astype(bool)]
        cells = {f"context {int(row.context)}": row for row in primary.itertuples()}
        if not cells:
            continue

        def judge(at: float, plan: bool = True, progress=progress, cells=cells) -> dict[str, Judgement]:
            judged = {}
            for label, row in cells.items():
                value = getattr(row, progress)
                at_progress = source[progress] == value if progress == "step" else np.isclose(source[progress], value)
                part = source[
                    (source["context"] == row.context)
                    & (source["point"] == row.point)
                    & (source["reduction"] == row.reduction)
                    & at_progress
                ]
                trend = width_trend(part, progress, level=at)
                judged[label] = (
                    judge_slopes(CLAIMS[key].effect, trend, at, plan)[0]
                    if len(trend)
                    else not_tested("no width trend at the primary cell", level=at)
                )
            return judged

        seeds = max(int(source.loc[source["context"] == row.context, "seed"].nunique()) for row in cells.values())
        at = look_level(key, seeds, reference, level)
        family = judge_family(key, judge, at.level, unit="contexts")
        summary = regime_summary(trend, progress)
        for label, judgement in family.readings.items():
            row = cells[label]
            rows.append(
                with_note(
                    claim_row(
                        key,
                        judgement,
                        scope=f"{label}, primary cell",
                        role="part" if len(cells) > 1 else "primary",
                        this_run=f"{progress} {getattr(row, progress):.4g}, {row.point}, "
                        f"{row.reduction}; {summary['this_run']}",
                        note=f"{comparison}; held-out pool; every other cell: the regime cells table; {scope}",
                    ),
                    at,
                )
            )
        if len(cells) > 1:
            rows.append(
                with_note(
                    claim_row(
                        key,
                        family.claim,
                        scope=family.scope("contexts"),
                        this_run=f"{len(cells)} contexts' primary cells; {summary['this_run']}",
                        note=f"{comparison}; {scope}",
                    ),
                    at,
                )
            )
    return rows


def _seed_mean(table: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    """Geometric mean over seeds of the determined (finite, > 0) `value`."""
    determined = table[np.isfinite(table[value]) & (table[value] > 0)]
    return (
        determined.assign(log=np.log(determined[value]))
        .groupby(keys, as_index=False)["log"]
        .mean()
        .assign(**{value: lambda frame: np.exp(frame["log"])})
    )


def figure_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows the figures show: reduction sum_positions (else the first), the deepest point."""
    reduction = FIGURE_REDUCTION if (table["reduction"] == FIGURE_REDUCTION).any() else sorted(table["reduction"])[0]
    rows = table[table["reduction"] == reduction]
    number = rows["point"].str.removeprefix("block").astype(int)
    return rows[number == number.max()]


def _lines(axis, frame: pd.DataFrame, x: str, line: str, value: str, label) -> None:
    series = _seed_mean(frame, [line, x], value)
    for color, (key, curve) in zip(sns.color_palette("viridis", max(series[line].nunique(), 1)), series.groupby(line)):
        curve = curve.sort_values(x)
        axis.plot(curve[x], curve[value], marker="o", color=color, label=label(key))
    axis.set_yscale("log")
    axis.grid(alpha=0.3)
    if len(series):
        axis.legend(fontsize=6)


def plot_dalign_vs_width(table: pd.DataFrame, matched: pd.DataFrame, out: str | Path) -> None:
    """Rows: contexts; left matched budget (a line per step), right matched loss (a line per level)."""
    shown, levels = figure_rows(table), figure_rows(matched[matched["reached"]]) if len(matched) else matched
    contexts = sorted(shown["context"].unique())
    figure, axes = plt.subplots(len(contexts), 2, figsize=(10.4, 3.4 * len(contexts)), squeeze=False)
    for row, context in enumerate(contexts):
        budget, loss = (
            shown[shown["context"] == context],
            levels[levels["context"] == context] if len(levels) else levels,
        )
        _lines(axes[row, 0], budget, "width", "step", "d_align", lambda step: f"step {int(step)}")
        axes[row, 0].set(title=f"context {context}: matched budget", ylabel="d_align (unbiased)")
        if len(loss):
            _lines(axes[row, 1], loss, "width", LOSS, "d_align", lambda level: f"loss {level:.3f}")
        axes[row, 1].set(
            title=f"context {context}: matched held-out loss" + ("" if len(loss) else " (no common range)")
        )
        for axis in axes[row]:
            width_ticks(axis, shown["width"])
            axis.set_xlabel("width")
    figure.tight_layout()
    save_figure(figure, out)


def plot_dalign_vs_context(table: pd.DataFrame, out: str | Path) -> None:
    """d_align vs context at the widest width, a line per step (matched budget)."""
    shown = figure_rows(table)
    widest = shown[shown["width"] == shown["width"].max()]
    figure, axis = plt.subplots(figsize=(5.6, 3.8))
    _lines(axis, widest, "context", "step", "d_align", lambda step: f"step {int(step)}")
    width_ticks(axis, widest["context"])
    axis.set(
        xlabel="context (tokens)",
        ylabel="d_align (unbiased)",
        title=f"width {int(widest['width'].max())}: matched budget",
    )
    save_figure(figure, out)


def plot_dims_vs_width(table: pd.DataFrame, out: str | Path) -> None:
    """d_∥ and d_2 vs width, one row per context, a line per step: which one sets the minimum."""
    shown = figure_rows(table)
    contexts = sorted(shown["context"].unique())
    figure, axes = plt.subplots(len(contexts), 2, figsize=(10.4, 3.4 * len(contexts)), squeeze=False)
    for row, context in enumerate(contexts):
        frame = shown[shown["context"] == context]
        for column, (value, name) in enumerate((("d_par", "d_∥"), ("d_2", "d_2"))):
            _lines(axes[row, column], frame, "width", "step", value, lambda step: f"step {int(step)}")
            width_ticks(axes[row, column], frame["width"])
            axes[row, column].set(title=f"context {context}: {name}, matched budget", xlabel="width", ylabel=name)
    figure.tight_layout()
    save_figure(figure, out)


def plot_plugin_vs_unbiased(table: pd.DataFrame, out: str | Path) -> None:
    """Plug-in (dashed) beside unbiased (solid) d_align vs width at the last step, a colour per context."""
    shown = figure_rows(table)
    final = shown[shown["step"] == shown["step"].max()]
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    for color, (context, frame) in zip(
        sns.color_palette("viridis", final["context"].nunique()), final.groupby("context")
    ):
        for value, style, name in (("d_align", "-", "unbiased"), ("d_align_plugin", "--", "plug-in")):
            curve = _seed_mean(frame, ["width"], value).sort_values("width")
            axis.plot(curve["width"], curve[value], style, marker="o", color=color, label=f"context {context}, {name}")
    width_ticks(axis, final["width"])
    axis.set(
        yscale="log", xlabel="width", ylabel="d_align", title=f"step {int(final['step'].max())}: plug-in vs unbiased"
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize=6)
    save_figure(figure, out)


def plot_seed_spread(spread: pd.DataFrame, out: str | Path) -> None:
    """Between-seed against within-store spread of log d_align, one point per (cell, width, step), a colour
    per context; above the diagonal the training run, not the sampling of examples, dominates."""
    shown = spread[np.isfinite(spread["between_sd"]) & np.isfinite(spread["within_sd"])]
    figure, axis = plt.subplots(figsize=(6.0, 4.6))
    for color, (context, frame) in zip(
        sns.color_palette("viridis", max(shown["context"].nunique(), 1)), shown.groupby("context")
    ):
        axis.scatter(frame["within_sd"], frame["between_sd"], s=12, alpha=0.7, color=color, label=f"context {context}")
    if len(shown):
        ends = [
            min(shown["within_sd"].min(), shown["between_sd"].min()),
            max(shown["within_sd"].max(), shown["between_sd"].max()),
        ]
        axis.plot(ends, ends, color="grey", linewidth=0.8, linestyle="--", label="equal spread")
        axis.set(xscale="log", yscale="log")
        axis.legend(fontsize=7)
    above = int((shown["ratio"] > 1).sum())
    axis.set(
        xlabel="within-store SE of log d_align (jackknife)",
        ylabel="between-seed SD of log d_align",
        title=f"between seeds vs within a store: {above} of {len(shown)} cells above the diagonal",
    )
    axis.grid(alpha=0.3)
    save_figure(figure, out)


def spread_summary(spread: pd.DataFrame) -> dict[str, Any]:
    """Counts for the docs and the map's json: cells with both spreads, how many have between > within,
    and the median ratio."""
    both = spread[np.isfinite(spread["ratio"].astype(float))]
    return {
        "cells": int(len(both)),
        "between_dominates": int((both["ratio"] > 1).sum()),
        "median_ratio": float(both["ratio"].median()) if len(both) else None,
    }


def draw_figures(
    table: pd.DataFrame, matched: pd.DataFrame, folder: str | Path, spread: pd.DataFrame | None = None
) -> dict[str, str]:
    """Draw every figure `table` allows into `folder`; returns `drawable` (stem -> why not, or "")."""
    folder = Path(folder)
    reasons = drawable(table)
    spread = seed_spread(table) if spread is None else spread
    painters = {
        REGIME_DALIGN_VS_WIDTH.stem: lambda out: plot_dalign_vs_width(table, matched, out),
        REGIME_DIMS_VS_WIDTH.stem: lambda out: plot_dims_vs_width(table, out),
        REGIME_PLUGIN_VS_UNBIASED.stem: lambda out: plot_plugin_vs_unbiased(table, out),
        REGIME_DALIGN_VS_CONTEXT.stem: lambda out: plot_dalign_vs_context(table, out),
        REGIME_SPREAD.stem: lambda out: plot_seed_spread(spread, out),
    }
    for stem, reason in reasons.items():
        if not reason:
            painters[stem](folder / f"{stem}.png")
    return reasons
