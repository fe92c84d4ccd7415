"""P1 figures, summary table and claim rows from the pooled alignment and misalignment tables.

Figures (results/figures/p1_*.png):
- d_align vs width per insertion point, per reduction (unbiased, determined cells only);
- plug-in vs unbiased d_align vs width: the plug-in's finite-n floor moves with width and can fake
  (or hide) the paper's trend (PAPERS.md P1 pilots);
- misalignment p̂ (Wilson interval) with B_exact and B_align vs width at a fixed (M, K);
- the same vs M = K at the widest model.
Claims are judged on this run's numbers and say how many cells were undetermined.
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

from growcert.report.figures import save_figure  # noqa: E402
from growcert.report.claims import claim_row  # noqa: E402
from growcert.report.training import with_context  # noqa: E402

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
        for color, (point, series) in zip(sns.color_palette("viridis", frame["point"].nunique()), determined.groupby("point")):
            series = series.sort_values("width")
            axis.errorbar(series["width"], series["d_align"],
                          yerr=[series["d_align"] - series["d_align_lo"].clip(lower=1e-12),
                                (series["d_align_hi"] - series["d_align"]).replace(np.inf, np.nan).fillna(0)],
                          marker="o", capsize=2, label=point, color=color)
        undetermined = int(frame["d_align"].isna().sum())
        width_ticks(axis, frame["width"])
        if len(determined):
            # Intervals that reach 0 (or infinity) run off the axis instead of squashing the points.
            axis.set_ylim(determined["d_align"].min() / 20, determined["d_align"].max() * 20)
        axis.set(yscale="log", xlabel="width", ylabel="d_align (unbiased, held-out pool, 95 % interval)",
                 title=f"{title}\n{undetermined} of {len(frame)} cells undetermined (not shown)")
        if len(determined):
            axis.legend(fontsize=7, ncol=2)
        axis.grid(alpha=0.3)
    if figure is not None:
        save_figure(figure, out)


def plot_plugin_vs_unbiased(alignment: pd.DataFrame, out: str | Path) -> None:
    held_out = last_step(alignment[alignment["pool"] == "test"])
    long = pd.concat([held_out.assign(estimator="unbiased", value=held_out["d_align_raw"]),
                      held_out.assign(estimator="plug-in", value=held_out["d_align_plugin"])])
    long = long[long["value"] > 0]  # log axis: a negative unbiased estimate is undetermined, counted in the title
    figure = None
    for axis, title, frame in _panels(long):
        figure = axis.figure
        sns.lineplot(frame, x="width", y="value", hue="point", style="estimator", markers=True, palette="viridis", ax=axis)
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
        axis.errorbar(series[x], series["p_hat"], yerr=[below, above],
                      marker="o", capsize=2, label=f"p̂ ({mode})")
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


def plot_misalignment(misalignment: pd.DataFrame, reference_mk: tuple[int, int], out_width: str | Path,
                      out_mk: str | Path) -> None:
    final = deepest_point(last_step(misalignment))
    # One depth per family (the deepest trained), so each line is one model per width.
    final = final[final["depth"] == final.groupby(panel_keys(final), dropna=False)["depth"].transform("max")]
    at_reference = final[(final["M"] == reference_mk[0]) & (final["K"] == reference_mk[1])]
    _certificate_figure(at_reference, "width", out_width,
                        lambda frame: f"M = {reference_mk[0]}, K = {reference_mk[1]}, depth {frame['depth'].max()}")
    widest = final[final["width"] == final.groupby(panel_keys(final), dropna=False)["width"].transform("max")]
    _certificate_figure(widest[widest["M"] == widest["K"]], "M", out_mk, lambda frame: "widest model")


def _certificate_figure(table: pd.DataFrame, x: str, out: str | Path, describe) -> None:
    """One panel per family/dataset x reduction: p̂ and the certificates against `x` (width or M = K)."""
    figure = None
    for axis, title, frame in _panels(table):
        figure = axis.figure
        missing = _certificate_lines(axis, frame, x)
        label = "width" if x == "width" else "M = K"
        axis.set(xlabel=label, title=f"{title}, {describe(frame)}, last point\n"
                                     f"certificates undetermined at {missing} of {frame[x].nunique()} values of {label}")
    if figure is not None:
        save_figure(figure, out)


def alignment_summary(alignment: pd.DataFrame) -> pd.DataFrame:
    held_out = last_step(alignment[alignment["pool"] == "test"])
    columns = with_context(["family", "dataset", "step", "reduction", "point", "width", "depth", "n", "dim", "detectability",
               "d_align", "d_align_lo", "d_align_hi", "d_align_raw", "d_align_plugin", "status"], held_out)
    return held_out[columns].sort_values(["family", "reduction", "point", "width"])


def _rising(series: pd.DataFrame, column: str) -> bool | None:
    """True if the column rises with width (Spearman > 0), None with fewer than 2 determined widths."""
    determined = series[series[column].notna()]
    if determined["width"].nunique() < 2:
        return None
    return bool(determined[["width", column]].corr(method="spearman").iloc[0, 1] > 0)


def alignment_claims(alignment: pd.DataFrame, misalignment: pd.DataFrame, reference_mk: tuple[int, int]) -> list[dict[str, Any]]:
    held_out = last_step(alignment[alignment["pool"] == "test"])
    series_keys = ["family", "dataset", "reduction", "point"]
    keys = with_context(series_keys, held_out)
    verdicts = [_rising(series, "d_align") for _, series in held_out.groupby(keys, dropna=False)]
    rising, judged = sum(v is True for v in verdicts), sum(v is not None for v in verdicts)
    undetermined = int(held_out["d_align"].isna().sum())
    plugin = [_rising(series, "d_align_plugin") for _, series in held_out.groupby(keys, dropna=False)]
    d_align_claim = claim_row(
        "p1_dalign_width",
        this_run=f"rises in {rising} of {judged} (point, reduction) series with ≥ 2 determined widths; "
                    f"{undetermined} of {len(held_out)} cells undetermined; d_align range "
                 f"{held_out['d_align'].min():.3g}–{held_out['d_align'].max():.3g}",
        holds=("undetermined" if judged == 0 else bool(rising == judged)),
        note=f"plug-in d_align rises in {sum(v is True for v in plugin)} of {sum(v is not None for v in plugin)} "
             f"series (its finite-n floor moves with width); unbiased, held-out pool, last checkpoint")
    if misalignment.empty:  # every grid sweeps context: no certificates were estimated
        return [d_align_claim]
    final = last_step(misalignment)
    reference = final[(final["M"] == reference_mk[0]) & (final["K"] == reference_mk[1]) & (final["mode"] == "iid")]
    falling = [_rising(series, "p_hat") for _, series in reference.groupby(with_context(series_keys, reference), dropna=False)]
    falls, judged_p = sum(v is False for v in falling), sum(v is not None for v in falling)
    p_claim = claim_row(
        "p1_misalignment_width",
        this_run=f"falls in {falls} of {judged_p} (point, reduction) series at M = {reference_mk[0]}, K = {reference_mk[1]} (iid)",
        holds=("undetermined" if judged_p == 0 else bool(falls == judged_p)), note="Spearman sign of p̂ vs width")
    rows = [d_align_claim, p_claim]
    for mode in ("iid", "train_test"):
        cells = final[(final["mode"] == mode) & (final["status"] == "ok") & final["p_hat"].notna()]
        ordered = (cells["p_lo"] <= cells["b_exact"]) & (cells["b_exact"] <= cells["b_align"])
        rows.append(claim_row(
            "p1_certificate_iid" if mode == "iid" else "p1_certificate_train_test",
            this_run=f"held in {int(ordered.sum())} of {len(cells)} determined cells (p̂'s Wilson lower bound ≤ B_exact)",
            holds=("undetermined" if len(cells) == 0 else bool(ordered.all())),
            note=f"{int((final['mode'] == mode).sum()) - len(cells)} cells undetermined (no detectable mean or a "
                 f"negative estimate); certificates from held-out moments"
                 + ("; M from the training rows, where independence can fail" if mode == "train_test" else "")))
    return rows
