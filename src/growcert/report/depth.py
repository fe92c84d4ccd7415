"""P3 read back from tidy tables: the saturation decision, the depth and growth figures, the P3 claim rows.

`recommend_depth` turns the pooled `growcert estimate-depth` table into the decision of stats/depth.py's
plateau test, across the depth grid and within each model over its points; `depth_profile` gives each
depth's and point's value with its interval over seeds; `depth_claims` judges the three P3 claims (the
value falls, it settles, grown matches scratch) on those tables and on the pooled `growcert grow`
tables. Never reads a network or a store.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from growcert.referee.claims import CLAIMS, GROWTH_FRACTION
from growcert.referee.families import judge_family
from growcert.referee.looks import as_first_form, look_level, with_note
from growcert.referee.rows import claim_row
from growcert.referee.verdicts import Judgement, judge_growth, judge_samples, not_tested
from growcert.report.figures import save_figure
from growcert.stats import depth as stats
from growcert.stats.intervals import normal_quantile
from growcert.stats.seeds import t_interval, t_quantile

# The arms of a growth comparison, in the order they are shown (growcert.stages.grow writes them).
ARMS = ("shallow", "grown_value", "grown_uniform", "scratch", "deeper")


def _sequences(table: pd.DataFrame):
    """(view, keys, frame with columns rung, seeds and, per criterion, its mean over seeds and between-seed standard
    deviation) to decide on; every interval is between seeds, never a store's own.

    across_depth: per (family, dataset, width, step, pool), each model depth's value at its last point;
    within_model: per (family, dataset, width, step, pool, model depth), its points in stream order.
    """
    base = ["family", "dataset", "width", "step", "pool"]
    model = base + ["depth", "seed"]
    last = table[table["point_index"] == table.groupby(model)["point_index"].transform("max")]
    statistics = {"seeds": ("seed", "nunique")}
    for criterion in CRITERIA:
        statistics |= {criterion: (criterion, "mean"), f"{criterion}_sd": (criterion, lambda s: s.std(ddof=1))}
    for keys, frame in last.groupby(base, sort=True):
        per_depth = frame.groupby("depth").agg(**statistics)
        if len(per_depth) >= 2:
            yield "across_depth", dict(zip(base, keys)), per_depth.reset_index().rename(columns={"depth": "rung"})
    for keys, frame in table.groupby(base + ["depth"], sort=True):
        if frame["point_index"].nunique() >= 2:
            per_point = frame.groupby("point_index").agg(**statistics)
            yield (
                "within_model",
                dict(zip(base + ["depth"], keys)),
                per_point.reset_index().rename(columns={"point_index": "rung"}),
            )


CRITERIA = ("value", "scaled_value")


def recommend_depth(table: pd.DataFrame, level: float = 0.95, draws: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The saturation decision (stats/depth.py's plateau test) for the raw and the scale-invariant value, on
    between-seed intervals: each level's mean over seeds with its standard error sd/√n, widened by t_{n−1}/z so
    that the test's normal quantile gives a Student t interval. Fewer than 2 seeds at some level: no decision.

    One row per view × sequence × criterion. `recommended` is a model depth (across_depth) or a point index
    (within_model), with a percentile interval from parametric resampling; `falls` says whether the deepest value
    is significantly below the shallowest one, `fall_ratio` by how much.
    """
    z = normal_quantile(level)
    rows = []
    for view, keys, frame in _sequences(table):
        seeds = int(frame["seeds"].min())
        widen = t_quantile(level, seeds) / z if seeds >= 2 else math.nan
        for criterion in CRITERIA:
            values = frame[criterion].to_numpy(float)
            ses = frame[f"{criterion}_sd"].to_numpy(float) / np.sqrt(frame["seeds"].to_numpy(float)) * widen
            if seeds >= 2:
                decision = stats.saturation(frame["rung"].to_numpy(), values, ses, level, draws, seed)
                falls = bool(values[0] - values[-1] > z * np.hypot(ses[0], ses[-1]))
            else:
                decision = {
                    "recommended": math.nan,
                    "status": f"not decided: {seeds} seed (between-seed intervals need 2)",
                    "recommended_lo": math.nan,
                    "recommended_hi": math.nan,
                    "decided_fraction": math.nan,
                    "plateau_value": math.nan,
                }
                falls = False
            rows.append(
                {
                    "family": keys["family"],
                    "dataset": keys["dataset"],
                    "width": keys["width"],
                    "step": keys["step"],
                    "pool": keys["pool"],
                    "view": view,
                    "depth": keys.get("depth", np.nan),
                    "seeds": seeds,
                    "criterion": criterion,
                    "levels": ",".join(str(int(x)) for x in frame["rung"]),
                    **decision,
                    "first_value": values[0],
                    "last_value": values[-1],
                    "falls": falls,
                    "fall_ratio": values[0] / values[-1] if values[-1] else np.nan,
                    "level": level,
                }
            )
    return pd.DataFrame(rows)


def plot_depth(table: pd.DataFrame, out_png: str | Path) -> None:
    """Raw and scale-invariant value vs model depth (last point), and over the points of the deepest model."""
    shown = table[
        (table["pool"] == "test") & (table["step"] == table.groupby(["family", "dataset"])["step"].transform("max"))
    ]
    panels = list(shown.groupby(["family", "dataset"]))
    figure, axes = plt.subplots(max(1, len(panels)), 4, figsize=(17, 3.6 * max(1, len(panels))), squeeze=False)
    for row, ((family, dataset), frame) in enumerate(panels):
        last = frame[frame["point_index"] == frame.groupby(["depth", "seed", "width"])["point_index"].transform("max")]
        deepest = frame[frame["depth"] == frame["depth"].max()]
        specs = [
            (last, "depth", "value", "model depth (value at its last point)"),
            (last, "depth", "scaled_value", "model depth (value at its last point)"),
            (deepest, "point_index", "value", f"point index in the depth-{frame['depth'].max()} model"),
            (deepest, "point_index", "scaled_value", f"point index in the depth-{frame['depth'].max()} model"),
        ]
        for column, (data, x, y, xlabel) in enumerate(specs):
            axis = axes[row, column]
            for width, part in data.groupby("width"):
                part = part.groupby(x).agg(v=(y, "mean"), se=(f"{y}_se", lambda s: np.sqrt((s**2).sum()) / len(s)))
                axis.errorbar(
                    part.index,
                    part["v"],
                    yerr=normal_quantile(0.95) * part["se"],
                    marker="o",
                    capsize=3,
                    label=f"width {width}",
                )
            positive = data[y][data[y] > 0]
            # symlog: unbiased estimates can be ≤ 0 (within noise of zero) and must stay visible
            axis.set_yscale("symlog", linthresh=float(positive.min()) if len(positive) else 1e-12)
            axis.axhline(0.0, color="black", lw=0.8)
            kind = "raw ‖E[q hᵀ]‖²" if y == "value" else "value × ‖z‖²/‖h‖² (scale-invariant)"
            axis.set(xlabel=xlabel, ylabel=kind, title=f"{family}/{dataset}: {kind}")
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
    figure.tight_layout()
    save_figure(figure, out_png)


def plot_growth(table: pd.DataFrame, out_png: str | Path) -> None:
    """Held-out loss along training per arm (mean over seeds), and the final held-out loss per arm and seed."""
    panels = list(table.groupby(["family", "dataset", "width", "base_depth"], dropna=False))
    figure, axes = plt.subplots(max(1, len(panels)), 2, figsize=(12, 3.8 * max(1, len(panels))), squeeze=False)
    order = [arm for arm in ARMS if arm in set(table["arm"])]
    for row, ((family, dataset, width, _), frame) in enumerate(panels):
        left, right = axes[row]
        # from the first evaluation after step 0: the untrained loss would flatten every difference
        sns.lineplot(
            frame[frame["step"] > 0],
            x="examples_seen",
            y="test_loss",
            hue="arm",
            hue_order=order,
            errorbar=("pi", 100),
            marker="o",
            ax=left,
        )
        grown = frame.loc[frame["arm"] == "grown_value", "grown_at"].dropna()
        if len(grown):
            left.axvline(
                grown.iloc[0] * frame["examples_seen"].max() / frame["step"].max(),
                color="grey",
                ls="--",
                lw=1,
                label="blocks inserted",
            )
        left.set(
            xlabel="training examples seen",
            ylabel="held-out loss",
            title=f"{family}/{dataset} width {width}: base depth {frame['base_depth'].iloc[0]}",
        )
        left.legend(fontsize=7)
        last = frame[frame["step"] == frame["step"].max()]
        sns.pointplot(
            last,
            x="arm",
            y="test_loss",
            order=order,
            errorbar=None,
            color="black",
            markers="_",
            linestyles="none",
            ax=right,
        )
        sns.stripplot(last, x="arm", y="test_loss", order=order, hue="seed", dodge=False, ax=right)
        right.set(xlabel="", ylabel="final held-out loss", title="same budget: mean (bar) and seeds (dots)")
        right.tick_params(axis="x", labelrotation=20)
        left.grid(alpha=0.3)
        right.grid(alpha=0.3)
    figure.tight_layout()
    save_figure(figure, out_png)


def _seed_level_logs(held_out: pd.DataFrame, view: str, criterion: str) -> pd.DataFrame:
    """log of `criterion` (value or scaled_value) per (seed, width) row and level column: model depths at each
    model's last point (across_depth), or the points of the deepest model (within_model). NaN where the unbiased
    estimate is ≤ 0 (undetermined: never dropped, never clipped)."""
    if view == "across_depth":
        model = ["width", "depth", "seed"]
        rows, level = (
            held_out[held_out["point_index"] == held_out.groupby(model)["point_index"].transform("max")],
            "depth",
        )
    else:
        rows, level = held_out[held_out["depth"] == held_out["depth"].max()], "point_index"
    values = rows.pivot_table(index=["seed", "width"], columns=level, values=criterion, dropna=False)
    return np.log(values.where(values > 0))


def _per_seed_change(logs: pd.DataFrame, lower: Any, upper: Any) -> pd.Series:
    """Per seed, the mean over widths of log(value at level `upper` / value at level `lower`); NaN if
    undetermined in any width of that seed."""
    return (logs[upper] - logs[lower]).groupby(level="seed").mean(skipna=False)


def _depth_claim(depth_table: pd.DataFrame, level: float, reference: str | None = None) -> list[dict[str, Any]]:
    """The "falls" rows (the raw value deciding; the scale-invariant value, its first registered form, beside it) and
    the "settles" row per family/dataset, each at the level of its look in reference run `reference`."""
    claims = []
    if depth_table.empty:
        return claims
    held_out = depth_table[depth_table["pool"] == "test"]
    held_out = held_out[held_out["step"] == held_out.groupby(["family", "dataset"])["step"].transform("max")]
    decisions = recommend_depth(held_out, level=level)
    for (family, dataset), frame in decisions.groupby(["family", "dataset"]):
        # across the depth grid when it has two depths or more; otherwise over the points of the deepest model
        view = "across_depth" if (frame["view"] == "across_depth").any() else "within_model"
        frame = frame[frame["view"] == view]
        if view == "within_model":
            frame = frame[frame["depth"] == frame["depth"].max()]
        summary = {criterion: _decisions_text(part) for criterion, part in frame.groupby("criterion")}
        part = held_out[(held_out["family"] == family) & (held_out["dataset"] == dataset)]
        unit = "model depth" if view == "across_depth" else "point index"
        where = f"{view} over {unit} (held-out pool, last checkpoint; between-seed intervals)"
        effect = CLAIMS["p3_depth_plateau"].effect
        seeds = int(part["seed"].nunique())
        for criterion, role, name in (
            ("value", "primary", "raw ‖E[q hᵀ]‖², the paper's statistic"),
            ("scaled_value", "secondary", "scale-invariant value"),
        ):
            logs = _seed_level_logs(part, view, criterion)
            levels = sorted(logs.columns)
            at = look_level("p3_depth_plateau", seeds, reference, level)
            # one value per seed: the mean log ratio over the widths of that seed (NaN if undetermined in any width)
            falls = judge_samples(effect, _per_seed_change(logs, levels[0], levels[-1]), at.level)
            adds = (
                ""
                if role == "primary"
                else " It adds whether the block's output, measured against the stream it joins, still falls: the raw "
                "value also falls because ‖z‖ grows with depth and the final norm shrinks q as 1/‖z‖."
            )
            row = with_note(
                claim_row(
                    "p3_depth_plateau",
                    falls,
                    scope=f"{family}/{dataset}, {name}",
                    role=role,
                    this_run=f"{name}: {summary.get(criterion, '')}",
                    note=f"{where}; the effect is the per-seed log ratio deepest / shallowest of the {name}.{adds}",
                ),
                at,
            )
            # a secondary row keeps the form it was registered in (the registry records the change of primary)
            claims.append(row if role == "primary" else as_first_form(row, "p3_depth_plateau", f"{family}/{dataset}"))
        logs = _seed_level_logs(part, view, "scaled_value")
        levels = sorted(logs.columns)
        at = look_level("p3_depth_settles", seeds, reference, level)
        settles = (
            judge_samples(
                CLAIMS["p3_depth_settles"].effect, np.exp(_per_seed_change(logs, levels[-2], levels[-1])), at.level
            )
            if len(levels) >= 3
            else not_tested(f"{len(levels)} levels ({unit}): a plateau after a fall needs at least 3", level=at.level)
        )
        claims.append(
            with_note(
                claim_row(
                    "p3_depth_settles",
                    settles,
                    scope=f"{family}/{dataset}",
                    this_run=f"{unit} {levels[-2]:g} → {levels[-1]:g}: ratio {settles.estimate:.3g}",
                    note=f"{where}; levels {', '.join(f'{x:g}' for x in levels)}.",
                ),
                at,
            )
        )
    return claims


def _decisions_text(part: pd.DataFrame) -> str:
    """One criterion's saturation decisions (recommend_depth's rows), per width, as a row's this_run shows them."""
    return "; ".join(
        f"w{r.width}: {r.status}"
        + (
            f" from {r.recommended:g} [{r.recommended_lo:g}–{r.recommended_hi:g}]"
            if r.status.startswith("saturated")
            else ""
        )
        + f", {'falls' if r.falls else 'no significant fall'} ({r.first_value:.3g} → {r.last_value:.3g})"
        for r in part.itertuples()
    )


def depth_profile(depth_table: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per (family, dataset, width, step, pool, model depth, point, criterion): the mean over seeds of the raw
    and scale-invariant first-order value with its Student t interval over seeds (each seed one trained model)."""
    keys = ["family", "dataset", "width", "step", "pool", "depth", "point_index", "point"]
    rows = []
    for key, frame in depth_table.groupby(keys, sort=True):
        for criterion in ("value", "scaled_value"):
            mean, se, low, high = t_interval(frame[criterion].to_numpy(float), level)
            rows.append(
                {
                    **dict(zip(keys, key)),
                    "criterion": criterion,
                    "seeds": int(frame["seed"].nunique()),
                    "mean": mean,
                    "se": se,
                    "low": low,
                    "high": high,
                    "level": level,
                }
            )
    return pd.DataFrame(rows)


def _growth_claim(growth_table: pd.DataFrame, level: float, reference: str | None = None) -> list[dict[str, Any]]:
    """One part per growth experiment (verdicts.judge_growth: beats the no-growth control, closes part of its gap
    to scratch), then the claim's primary row with Holm across the experiments, at the level of its look in
    reference run `reference` (the seeds of its largest experiment)."""
    if growth_table.empty:
        return []
    experiment = ["family", "dataset", "width", "base_depth"]  # two growth experiments may share a width
    final = growth_table[
        growth_table["step"] == growth_table.groupby(experiment, dropna=False)["step"].transform("max")
    ]
    effect = CLAIMS["p3_grown_vs_scratch"].effect
    experiments, texts = {}, {}
    for (family, dataset, width, base_depth), frame in final.groupby(experiment, dropna=False):
        loss = frame.pivot_table(index="seed", columns="arm", values="test_loss")
        if not {"grown_value", "scratch"} <= set(loss.columns):
            continue
        blocks = frame.loc[frame["arm"] == "grown_value", "blocks"].dropna()
        depths = (
            f", base depth {base_depth:g} + {blocks.iloc[0]:g} block(s)" if pd.notna(base_depth) and len(blocks) else ""
        )
        scope = f"{family}/{dataset} width {width}{depths}"
        experiments[scope] = loss
        texts[scope] = _growth_texts(loss)
    if not experiments:
        return []

    def judge(at: float, plan: bool = True) -> dict[str, Judgement]:
        judged = {}
        for scope, loss in experiments.items():
            if "shallow" not in loss.columns:
                judged[scope] = not_tested(
                    "no no-growth control (the shallow arm) in this growth experiment: without "
                    "it, matching scratch cannot fail",
                    len(loss),
                    at,
                )
                continue
            paired = loss[["shallow", "grown_value", "scratch"]].dropna()
            judged[scope] = judge_growth(
                paired["shallow"], paired["grown_value"], paired["scratch"], at, effect, GROWTH_FRACTION, plan
            )
        return judged

    at = look_level("p3_grown_vs_scratch", max(len(loss) for loss in experiments.values()), reference, level)
    family = judge_family("p3_grown_vs_scratch", judge, at.level, unit="growth experiments")
    rows = [
        with_note(
            claim_row(
                "p3_grown_vs_scratch",
                judgement,
                scope=scope,
                role="part" if len(experiments) > 1 else "primary",
                this_run=texts[scope][0],
                note=texts[scope][1],
            ),
            at,
        )
        for scope, judgement in family.readings.items()
    ]
    if len(experiments) > 1:
        rows.append(
            with_note(
                claim_row(
                    "p3_grown_vs_scratch",
                    family.claim,
                    scope=family.scope("growth experiments"),
                    this_run=f"{len(experiments)} growth experiments",
                    note=texts[family.deciding][1],
                ),
                at,
            )
        )
    return rows


def _growth_texts(loss: pd.DataFrame) -> tuple[str, str]:
    """A growth experiment's this_run and note from its final held-out losses (a column per arm, a row per seed)."""
    grown = ((loss["grown_value"] - loss["scratch"]) / loss["scratch"]).mean()
    control = (
        f", (control − scratch) / scratch {((loss['shallow'] - loss['scratch']) / loss['scratch']).mean():+.2%}"
        if "shallow" in loss.columns
        else ""
    )
    means = ", ".join(f"{arm} {loss[arm].mean():.4f}" for arm in ARMS if arm in loss.columns)
    return (
        f"(grown − scratch) / scratch held-out loss {grown:+.2%}{control} over {len(loss)} seed(s)",
        f"mean final held-out loss: {means}. Same final architecture and budget; the control is the "
        "shallow model trained for the same total steps.",
    )


def depth_claims(
    depth_table: pd.DataFrame, growth_table: pd.DataFrame, level: float = 0.95, reference: str | None = None
) -> list[dict[str, Any]]:
    """The three P3 claim rows judged on this run (rows.ROW_COLUMNS); in reference run `reference`
    (docs/reference-results/<name>), a claim judged on more seeds than at a registered look of it is judged at the
    group-sequential level of growcert.referee.looks.look_level."""
    return _depth_claim(depth_table, level, reference) + _growth_claim(growth_table, level, reference)
