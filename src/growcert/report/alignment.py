"""P1 figures, summary table and claim rows from the pooled alignment and misalignment tables.

Figures (results/figures/p1_*.png):
- d_align vs width per insertion point, per reduction (unbiased, determined cells only);
- plug-in vs unbiased d_align vs width: the plug-in's finite-n floor moves with width and can fake
  (or hide) the paper's trend (P1's pilots, docs/science.md, "P1: pilots");
- misalignment p̂ (Wilson interval) with B_exact and B_align vs width at a fixed (M, K);
- the same vs M = K at the widest model.
Claims are judged on this run's numbers and say how many cells were undetermined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from growcert.referee.bounds import judge_bound  # noqa: E402
from growcert.referee.claims import CLAIMS, p1_primary_cells  # noqa: E402
from growcert.referee.families import judge_family  # noqa: E402
from growcert.referee.looks import as_first_form, look_level, with_note  # noqa: E402
from growcert.referee.rows import check_row, claim_row  # noqa: E402
from growcert.referee.verdicts import Judgement, judge_slopes, not_tested  # noqa: E402
from growcert.report.figures import save_figure  # noqa: E402
from growcert.report.training import with_context  # noqa: E402
from growcert.stats.certificates import b_exact_interval  # noqa: E402
from growcert.stats.intervals import disjoint_draw_count, misalignment_interval  # noqa: E402
from growcert.stats.regime import width_trend  # noqa: E402

PANEL = ["family", "dataset"]


def panel_keys(table: pd.DataFrame) -> list[str]:
    """family, dataset, and context when a context sweep is in the table: a sweep's runs have their own
    budget and panels. Group with dropna=False: the fixed-context runs beside a sweep have no context."""
    return with_context(PANEL, table)


def last_step(table: pd.DataFrame) -> pd.DataFrame:
    """Rows of each run's last checkpoint (the reference models at the full budget)."""
    final = table.groupby(panel_keys(table), dropna=False)["step"].transform("max")
    return table[table["step"] == final]


def _panels(table: pd.DataFrame, columns: str = "reduction"):
    panels = list(table.groupby(panel_keys(table), dropna=False))
    values = sorted(table[columns].unique())
    figure, axes = plt.subplots(len(panels), len(values), figsize=(5.2 * len(values), 3.6 * len(panels)), squeeze=False)
    for row, (key, panel) in enumerate(panels):
        context = f", context {int(key[2])}" if len(key) > 2 and pd.notna(key[2]) else ""
        for column, value in enumerate(values):
            yield axes[row, column], f"{key[0]} on {key[1]}{context}, {value}", panel[panel[columns] == value]
    figure.tight_layout()


def plot_dalign_vs_width(alignment: pd.DataFrame, out: str | Path) -> None:
    held_out = last_step(alignment[alignment["pool"] == "test"])
    figure = None
    for axis, title, frame in _panels(held_out):
        figure = axis.figure
        determined = frame[frame["d_align"].notna()]
        for color, (point, series) in zip(
            sns.color_palette("viridis", frame["point"].nunique()), determined.groupby("point")
        ):
            series = series.sort_values("width")
            axis.errorbar(
                series["width"],
                series["d_align"],
                yerr=[
                    series["d_align"] - series["d_align_lo"].clip(lower=1e-12),
                    (series["d_align_hi"] - series["d_align"]).replace(np.inf, np.nan).fillna(0),
                ],
                marker="o",
                capsize=2,
                label=point,
                color=color,
            )
        undetermined = int(frame["d_align"].isna().sum())
        width_ticks(axis, frame["width"])
        if len(determined):
            # Intervals that reach 0 (or infinity) run off the axis instead of squashing the points.
            axis.set_ylim(determined["d_align"].min() / 20, determined["d_align"].max() * 20)
        axis.set(
            yscale="log",
            xlabel="width",
            ylabel="d_align (unbiased, held-out pool, 95 % interval)",
            title=f"{title}\n{undetermined} of {len(frame)} cells undetermined (not shown)",
        )
        if len(determined):
            axis.legend(fontsize=7, ncol=2)
        axis.grid(alpha=0.3)
    if figure is not None:
        save_figure(figure, out)


def plot_plugin_vs_unbiased(alignment: pd.DataFrame, out: str | Path) -> None:
    held_out = last_step(alignment[alignment["pool"] == "test"])
    long = pd.concat(
        [
            held_out.assign(estimator="unbiased", value=held_out["d_align_raw"]),
            held_out.assign(estimator="plug-in", value=held_out["d_align_plugin"]),
        ]
    )
    long = long[long["value"] > 0]  # log axis: a negative unbiased estimate is undetermined, counted in the title
    figure = None
    for axis, title, frame in _panels(long):
        figure = axis.figure
        sns.lineplot(
            frame, x="width", y="value", hue="point", style="estimator", markers=True, palette="viridis", ax=axis
        )
        width_ticks(axis, frame["width"])
        axis.set(yscale="log", xlabel="width", ylabel="d_align", title=title)
        axis.legend(fontsize=6, ncol=2)
        axis.grid(alpha=0.3)
    if figure is not None:
        save_figure(figure, out)


def deepest_point(table: pd.DataFrame) -> pd.DataFrame:
    """Rows at each model's last insertion point (the stream the head reads)."""
    number = table["point"].str.removeprefix("block").astype(int)
    keys = with_context(["family", "dataset", "width", "depth"], table)
    return table[number == number.groupby([table[c] for c in keys], dropna=False).transform("max")]


def width_ticks(axis, values) -> None:
    """Log axis with the grid's own values as plain tick labels."""
    values = sorted(set(int(v) for v in values))
    axis.set_xscale("log")
    axis.set_xticks(values, [str(v) for v in values])
    axis.minorticks_off()


def _certificate_lines(axis, frame: pd.DataFrame, x: str) -> int:
    """p̂ per mode with Wilson bars; B_exact, B_align where determined. Returns the undetermined count."""
    for mode, series in frame.groupby("mode"):
        series = series.groupby(x, as_index=False).median(numeric_only=True).sort_values(x)
        below = (series["p_hat"] - series["p_lo"]).clip(lower=0)
        above = (series["p_hi"] - series["p_hat"]).clip(lower=0)
        axis.errorbar(series[x], series["p_hat"], yerr=[below, above], marker="o", capsize=2, label=f"p̂ ({mode})")
    iid = frame[frame["mode"] == "iid"].groupby(x, as_index=False).median(numeric_only=True).sort_values(x)
    # Certificates only where the held-out moments are determined (NaN otherwise): a raw bound from a
    # negative estimate is not a probability.
    axis.plot(iid[x], iid["b_exact"], "s--", label="B_exact")
    axis.plot(iid[x], iid["b_align"], "^:", label="B_align")
    width_ticks(axis, frame[x])
    axis.set(ylim=(-0.02, 1.02), ylabel="P(μ_M·g_K ≤ 0)")
    axis.legend(fontsize=7)
    axis.grid(alpha=0.3)
    return int(iid["b_exact"].isna().sum())


def plot_misalignment(
    misalignment: pd.DataFrame, reference_mk: tuple[int, int], out_width: str | Path, out_mk: str | Path
) -> None:
    final = deepest_point(last_step(misalignment))
    # One depth per family (the deepest trained), so each line is one model per width.
    final = final[final["depth"] == final.groupby(panel_keys(final), dropna=False)["depth"].transform("max")]
    at_reference = final[(final["M"] == reference_mk[0]) & (final["K"] == reference_mk[1])]
    _certificate_figure(
        at_reference,
        "width",
        out_width,
        lambda frame: f"M = {reference_mk[0]}, K = {reference_mk[1]}, depth {frame['depth'].max()}",
    )
    widest = final[final["width"] == final.groupby(panel_keys(final), dropna=False)["width"].transform("max")]
    _certificate_figure(widest[widest["M"] == widest["K"]], "M", out_mk, lambda frame: "widest model")


def _certificate_figure(table: pd.DataFrame, x: str, out: str | Path, describe) -> None:
    """One panel per family/dataset x reduction: p̂ and the certificates against `x` (width or M = K)."""
    figure = None
    for axis, title, frame in _panels(table):
        figure = axis.figure
        missing = _certificate_lines(axis, frame, x)
        label = "width" if x == "width" else "M = K"
        axis.set(
            xlabel=label,
            title=f"{title}, {describe(frame)}, last point\n"
            f"certificates undetermined at {missing} of {frame[x].nunique()} values of {label}",
        )
    if figure is not None:
        save_figure(figure, out)


def alignment_summary(alignment: pd.DataFrame) -> pd.DataFrame:
    held_out = last_step(alignment[alignment["pool"] == "test"])
    columns = with_context(
        [
            "family",
            "dataset",
            "step",
            "reduction",
            "point",
            "width",
            "depth",
            "n",
            "dim",
            "detectability",
            "d_align",
            "d_align_lo",
            "d_align_hi",
            "d_align_raw",
            "d_align_plugin",
            "status",
        ],
        held_out,
    )
    return held_out[columns].sort_values(["family", "reduction", "point", "width"])


def _slope_rows(
    key: str,
    table: pd.DataFrame,
    value: str,
    level: float,
    what: str,
    log_value: bool = True,
    no_room: Callable[[pd.DataFrame], str | None] | None = None,
    reference: str | None = None,
) -> list[dict[str, Any]]:
    """The claim rows of a width trend over (point, reduction) series, each series' seed-level slope interval
    (width_trend, of log `value` on log width, or of `value` itself with `log_value` False): the primary series
    (claims.p1_primary_cells) decide, with Holm across them when several depths, datasets or contexts have one
    (each a part); every other series is listed in the row as secondary. A series for which `no_room` gives a
    reason (its values leave no room for an effect of the SESOI's size) is not tested, with that reason. In reference
    run `reference`, the rows are judged at the level of the claim's look there (`growcert.referee.looks.look_level`,
    on the primary series' seeds) and say which look it is."""
    effect = CLAIMS[key].effect
    series = ["family", "dataset", "context", "depth", "reduction", "point"]

    if "context" in table.columns:  # fixed-context runs beside a sweep have none: 0 labels them apart
        table = table.assign(context=table["context"].fillna(0))
    primary = table[p1_primary_cells(table)]
    at = look_level(key, int(primary["seed"].nunique()) if "seed" in primary else 0, reference, level)
    level = at.level

    def judge(at: float, plan: bool = True, rows: pd.DataFrame = primary) -> dict[str, Judgement]:
        trend = width_trend(rows, "step", value, level=at, cell=series, log_value=log_value)
        labels = [_series_label(row) for _, row in trend.iterrows()]
        judged = dict(zip(labels, judge_slopes(effect, trend, at, plan)))
        for _, one in (
            rows.groupby([c for c in series if c in rows.columns], dropna=False)
            if no_room is not None and len(rows)
            else []
        ):
            label = _series_label(one.iloc[0])
            if label in judged and (reason := no_room(one)):
                judged[label] = not_tested(reason, judged[label].seeds, at, judged[label].estimate)
        return judged

    others = judge(level, plan=False, rows=table[~p1_primary_cells(table)])
    listed = "; ".join(
        f"{label} {j.estimate:+.2f} [{j.low:+.2f}, {j.high:+.2f}] {j.verdict}" for label, j in others.items()
    )
    plugin = ""
    if value == "d_align":
        plugin_trend = width_trend(table, "step", "d_align_plugin", level=level, cell=series)
        plugin = (
            " Plug-in d_align slopes (its finite-n floor moves with width): "
            + ", ".join(f"{row.slope:+.2f}" for row in plugin_trend.itertuples())
            + "."
        )
    secondary = f" Secondary series (never decide the claim): {listed or 'none'}.{plugin}"
    each = judge(level, plan=False)
    if not each:
        missing = not_tested(
            f"no primary series in this run: {CLAIMS[key].primary.split(';')[0]} with at least two widths", level=level
        )
        return [
            with_note(claim_row(key, missing, this_run=what, note="held-out pool, last checkpoint." + secondary), at)
        ]
    family = judge_family(key, judge, level, unit="primary series")
    rows = []
    if len(each) > 1:
        rows += [
            claim_row(key, judgement, scope=label, role="part", this_run=what, note="primary series, a part.")
            for label, judgement in family.readings.items()
        ]
    rows.append(
        claim_row(
            key,
            family.claim,
            scope=None if len(each) == 1 else family.scope("primary series"),
            this_run=f"{what}; primary: {family.deciding}",
            note="held-out pool, last checkpoint." + secondary,
        )
    )
    return [with_note(row, at) for row in rows]


def _series_label(row: pd.Series) -> str:
    context = f" ctx {int(row['context'])}" if "context" in row and row["context"] else ""
    return f"{row['family']}/{row['dataset']}{context} d{row['depth']} {row['point']} {row['reduction']}"


def misalignment_width_rows(
    misalignment: pd.DataFrame, reference_mk: tuple[int, int], level: float = 0.95, reference: str | None = None
) -> list[dict[str, Any]]:
    """The "p̂ falls with width at fixed (M, K)" rows: at each run's last checkpoint, iid mode, (M, K) =
    `reference_mk`, the slope of p̂ itself on log width (the registry's effect, whose SESOI is a fall of p̂ by 0.05
    over a 6× width range: a slope of log p̂ would be on another scale, and would drop every p̂ = 0), per series,
    with a seed-level t interval; the primary series decide (Holm across them: depths, datasets, contexts).
    Context sweeps count as series of their own (their `context` column), so the runs of a regime map can be
    judged as well as a fixed-context grid. The claim's first registered form (no floor rule: every series judged
    on its interval) is kept as a secondary row after them (growcert.referee.looks.as_first_form), judged as it was
    at its own first look; in reference run `reference` the primary rows are judged at the level of their look
    there (the floor rule's judgement of seeds its first form had judged is a later look)."""
    final = last_step(misalignment)
    cells = final[(final["M"] == reference_mk[0]) & (final["K"] == reference_mk[1]) & (final["mode"] == "iid")]
    what = f"M = {reference_mk[0]}, K = {reference_mk[1]} (iid)"
    rows = _slope_rows(
        "p1_misalignment_width", cells, "p_hat", level, what, log_value=False, no_room=p_hat_floor, reference=reference
    )
    first = _slope_rows("p1_misalignment_width", cells, "p_hat", level, what, log_value=False)[-1]
    return rows + [as_first_form(first, "p1_misalignment_width")]


def p_hat_floor(series: pd.DataFrame) -> str | None:
    """Why a p̂ series cannot show a fall of the SESOI's size, or None: p̂ ≥ 0, so over widths w_min..w_max it
    can fall by at most its value at w_min, and the SESOI asks for |slope| × ln(w_max / w_min). When the mean
    over seeds at w_min is below that (p̂ at its floor of 0 already), no slope of the size that matters can
    appear, and an interval excluding one says nothing about the paper's claim."""
    widths = series["width"]
    if widths.nunique() < 2:
        return None
    needed = -CLAIMS["p1_misalignment_width"].effect.sesoi * math.log(widths.max() / widths.min())
    start = float(series.loc[widths == widths.min(), "p_hat"].mean())
    if start >= needed:
        return None
    return (
        f"p̂ at its floor: at width {int(widths.min())} it is {start:.3g} (mean over seeds), below the fall of "
        f"{needed:.3g} the SESOI asks over widths {int(widths.min())}–{int(widths.max())}; p̂ ≥ 0 leaves no "
        "room to show it"
    )


# What the certificate rows need of a cell's pools: their sizes, and B_exact's moments with their jackknife errors.
BOUND_COLUMNS = ("n", "mu_4", "mu_sigma_mu", "tr_sigma2", "mu_4_se_jack", "mu_sigma_mu_se_jack", "tr_sigma2_se_jack")


def bound_cells(cells: pd.DataFrame, alignment: pd.DataFrame, mode: str) -> tuple[pd.DataFrame, np.ndarray] | str:
    """The misalignment `cells` of one mode joined to their pools' alignment rows (matched on the store's identity,
    point and reduction): B_exact's held-out moments with their jackknife errors (BOUND_COLUMNS), the held-out n and
    the train n (`n_train`), with the disjoint draws of M and K the pools hold (held-out n in the iid mode; train n
    for M and held-out n for K train → test; stats.intervals.disjoint_draw_count). A sentence saying what is
    missing when the tables lack those columns."""
    keys = [
        c
        for c in ("family", "dataset", "width", "depth", "seed", "step", "context", "point", "reduction")
        if c in cells.columns and c in alignment.columns
    ]
    missing = [c for c in BOUND_COLUMNS if c not in alignment.columns] + [
        c for c in ("replicates",) if c not in cells.columns
    ]
    if missing and len(cells):
        return (
            "the tables lack what B_exact's and p̂'s errors need (" + ", ".join(missing) + "): judge them again "
            "from stores estimated with this code"
        )
    if "context" in alignment.columns and "context" not in cells.columns:
        # fixed-context misalignment tables beside a context sweep's alignment rows: only the fixed-context rows match
        alignment = alignment[alignment["context"].isna()]
    held_out = alignment[alignment["pool"] == "test"][keys + list(BOUND_COLUMNS)]
    train = alignment[alignment["pool"] == "train"][keys + ["n"]].rename(columns={"n": "n_train"})
    joined = (
        cells.drop(columns=[c for c in (*BOUND_COLUMNS, "n_train") if c in cells.columns])
        .merge(held_out, on=keys, how="left", validate="many_to_one")
        .merge(train, on=keys, how="left", validate="many_to_one")
    )
    draws = (
        disjoint_draw_count(joined["M"], joined["K"], joined["n"])
        if mode == "iid"
        else disjoint_draw_count(joined["M"], joined["K"], joined["n_train"], joined["n"])
    )
    return joined, np.asarray(draws)


def certificate_judgement(cells: pd.DataFrame, alignment: pd.DataFrame, mode: str, level: float) -> Judgement:
    """p̂ ≤ B_exact over the determined misalignment `cells` of one mode (bounds.judge_bound), each cell's
    intervals from its pools' alignment rows (`bound_cells`): p's from p̂, the replicates and the disjoint draws the
    pools hold (stats.intervals.misalignment_interval), B_exact's from the held-out moments' jackknife errors
    (stats.certificates.b_exact_interval). Not tested when the tables lack those columns."""
    seeds = int(cells["seed"].nunique()) if "seed" in cells else 0
    joined = bound_cells(cells, alignment, mode)
    if isinstance(joined, str):
        return not_tested(joined, seeds, level)
    joined, draws = joined
    return judge_bound(
        joined["p_hat"],
        joined["b_exact"],
        lambda at: misalignment_interval(joined["p_hat"], joined["replicates"], draws, at),
        lambda at: b_exact_interval(joined, joined["M"], joined["K"], at),
        level,
        seeds,
    )


def alignment_claims(
    alignment: pd.DataFrame,
    misalignment: pd.DataFrame,
    reference_mk: tuple[int, int],
    level: float = 0.95,
    reference: str | None = None,
) -> list[dict[str, Any]]:
    """The P1 claim rows (d_align and p̂ against width, p̂ ≤ B_exact) and the certificate-order check rows; each
    claim at the level of its look in reference run `reference` (`growcert.referee.looks.look_level`)."""
    held_out = last_step(alignment[alignment["pool"] == "test"])
    undetermined = int(held_out["d_align"].isna().sum())
    rows = _slope_rows(
        "p1_dalign_width",
        held_out,
        "d_align",
        level,
        f"d_align {held_out['d_align'].min():.3g}–{held_out['d_align'].max():.3g}; {undetermined} of "
        f"{len(held_out)} cells undetermined",
        reference=reference,
    )
    if misalignment.empty:  # every grid sweeps context: no certificates were estimated
        return rows
    return (
        rows
        + misalignment_width_rows(misalignment, reference_mk, level, reference)
        + certificate_rows(alignment, misalignment, level, reference)
    )


def certificate_rows(
    alignment: pd.DataFrame, misalignment: pd.DataFrame, level: float = 0.95, reference: str | None = None
) -> list[dict[str, Any]]:
    """The p̂ ≤ B_exact claim rows of both modes (iid, train → test: `certificate_judgement` over the determined
    cells of each run's last checkpoint) and their B_exact ≤ B_align check rows, each claim at the level of its
    look in reference run `reference`: what `alignment_claims` writes for the bound, and all the p1-bound run
    judges (reference_runs.judges.judge_bound_claims)."""
    rows = []
    final = last_step(misalignment)
    for mode in ("iid", "train_test"):
        every = final[final["mode"] == mode]
        cells = every[(every["status"] == "ok") & every["p_hat"].notna()]
        key = "p1_certificate_iid" if mode == "iid" else "p1_certificate_train_test"
        at = look_level(key, int(cells["seed"].nunique()) if "seed" in cells else 0, reference, level)
        judgement = certificate_judgement(cells, alignment, mode, at.level)
        scope = "; M from the training rows, where independence can fail" if mode == "train_test" else ""
        rows.append(
            with_note(
                claim_row(
                    key,
                    judgement,
                    this_run=f"p̂ ≤ B_exact in {int((cells['p_hat'] <= cells['b_exact']).sum())} of "
                    f"{len(cells)} determined cells; B_exact < 0.5 in "
                    f"{int((cells['b_exact'] < 0.5).sum())}",
                    note=f"{len(every) - len(cells)} cells undetermined (no detectable mean or a negative "
                    f"estimate); certificates from held-out moments{scope}",
                ),
                at,
            )
        )
        ordered = cells["b_exact"] <= cells["b_align"]
        rows.append(
            check_row(
                "p1_certificate_order",
                bool(ordered.all()),
                scope=mode,
                this_run=f"B_exact ≤ B_align in {int(ordered.sum())} of {len(cells)} determined cells",
                note="both bounds follow from the same estimated moments, so this can only fail through a bug",
            )
        )
    return rows
