"""`growcert advise` read back from tidy tables: per insertion point, a decision (grow here, no evidence,
saturated) with the reason, the model-level recommendation, and the page, figure and table a person reads.

Inputs are the held-out (`test`) rows of the tables `estimate_alignment` and `estimate_depth` write for one
store; nothing here reads a network or a store. The rule (docs/science.md, "advise (should this model grow, and where?)"), per point in stream order:

    no evidence   the mean activation gradient is not detectable (‖μ‖²/SE below the alignment detection threshold), or
                  the first-order value's interval holds 0: the row gives the held-out examples that would
                  detect it at the observed spread (`stats.certificates.samples_to_detect`);
    saturated     otherwise, when the scale-invariant value is within the plateau margin z·√(s_k² + s_j²) of
                  every deeper point's, down to the deepest (`stats.depth.saturated_levels`): a block here is
                  worth no more than one deeper;
    grow here     otherwise, when B_exact at (M, K) is non-vacuous (below `verdicts.VACUOUS_BOUND`);
    no evidence   otherwise (the certificate is vacuous or undetermined).

The model-level line recommends the `grow here` point with the largest scale-invariant value, never a point
without a detectable mean, and says whether its lead over the runner-up exceeds the same margin.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from growcert.files import write_csv, write_text
from growcert.report.figures import save_figure
from growcert.report.verdicts import VACUOUS_BOUND, percent
from growcert.stats.certificates import STATUS_NO_SIGNAL, certificate_columns, samples_to_detect
from growcert.stats.depth import saturated_levels
from growcert.stats.intervals import normal_quantile

GROW, NO_EVIDENCE, SATURATED = "grow here", "no evidence", "saturated"
DECISIONS = (GROW, NO_EVIDENCE, SATURATED)
ALIGNMENT_COLUMNS = ["n", "detectability", "status", "mu_sq", "mu_sq_se", "d_align", "d_align_raw", "d_align_lo",
                     "d_align_hi"]
DEPTH_COLUMNS = ["value", "value_se", "value_lo", "value_hi", "value_detectability", "scaled_value",
                 "scaled_value_se", "scaled_value_lo", "scaled_value_hi"]
CERTIFICATE_COLUMNS = ["M", "K", "b_exact", "b_align", "b_exact_raw", "b_align_raw"]


def _needed(*counts: int | None) -> float:
    """The largest of the counts that exist (NaN when no count would detect the signal)."""
    known = [count for count in counts if count is not None]
    return float(max(known)) if known and len(known) == len(counts) else math.nan


def advice_table(alignment: pd.DataFrame, depth: pd.DataFrame, M: int, K: int, level: float,
                 detect_threshold: float) -> pd.DataFrame:
    """One row per point (stream order): the held-out figures, the certificates at (M, K), the decision and why.
    `level`: the depth intervals' coverage (the margin's z); `detect_threshold`: the alignment detection threshold."""
    held_out = alignment[alignment["pool"] == "test"].set_index("point")
    values = depth[depth["pool"] == "test"].sort_values("point_index").set_index("point")
    rows = []
    for point, value in values.iterrows():
        signal = held_out.loc[point]
        certificate = certificate_columns(signal.to_dict(), M, K)
        rows.append({"point": point, "point_index": int(value["point_index"]),
                     **{name: signal[name] for name in ALIGNMENT_COLUMNS},
                     **{name: value[name] for name in DEPTH_COLUMNS},
                     **{name: certificate[name] for name in CERTIFICATE_COLUMNS}})
    table = pd.DataFrame(rows).rename(columns={"status": "alignment_status"})
    _, plateau = saturated_levels(table["scaled_value"], table["scaled_value_se"], level)
    z = normal_quantile(level)
    decided = [_decide(row, bool(plateau[i]), table.iloc[-1], z, level, detect_threshold) for i, row in table.iterrows()]
    table["samples_to_detect"] = [needed for _, _, needed in decided]
    table["decision"] = [decision for decision, _, _ in decided]
    table["why"] = [why for _, why, _ in decided]
    return table


def _decide(row: pd.Series, plateau: bool, deepest: pd.Series, z: float, level: float,
            detect_threshold: float) -> tuple[str, str, float]:
    """(decision, one sentence why, held-out examples that would detect what is missing: NaN if nothing is)."""
    n = int(row["n"])
    detectable = row["alignment_status"] != STATUS_NO_SIGNAL
    clear = row["value_lo"] > 0
    if not (detectable and clear):
        needed = _needed(*([] if detectable else [samples_to_detect(row["mu_sq"], row["mu_sq_se"], n, detect_threshold)]),
                         *([] if clear else [samples_to_detect(row["value"], row["value_se"], n, z)]))
        missing = [] if detectable else [f"the mean activation gradient is not detectable (‖μ‖²/SE = "
                                         f"{row['detectability']:.2f} < {detect_threshold:g})"]
        missing += [] if clear else [f"the first-order value's {percent(level)} interval "
                                     f"[{row['value_lo']:.3g}, {row['value_hi']:.3g}] holds 0"]
        more = (f"about {int(needed):,} held-out examples would detect it at the observed spread" if needed == needed
                else "no sample size would: the estimate is not positive")
        return NO_EVIDENCE, f"At n = {n:,}, {' and '.join(missing)}; {more}.", needed
    if plateau:
        return SATURATED, (f"Its scale-invariant value {row['scaled_value']:.3g} is within the plateau margin "
                           f"z·√(s² + s_j²) of every deeper point's (the deepest, {deepest['point']}: "
                           f"{deepest['scaled_value']:.3g}): a block here is worth no more than one deeper."), math.nan
    if not row["b_exact"] < VACUOUS_BOUND:
        state = (f"B_exact = {row['b_exact']:.3g} ≥ {VACUOUS_BOUND:g} is vacuous" if row["b_exact"] == row["b_exact"]
                 else f"the certificate is undetermined ({row['alignment_status']})")
        return NO_EVIDENCE, (f"The value is clear ({row['value_detectability']:.1f} SE from 0), but at (M, K) = "
                             f"({row['M']}, {row['K']}) {state}."), math.nan
    return GROW, (f"The first-order value {row['value']:.3g} (interval [{row['value_lo']:.3g}, {row['value_hi']:.3g}]) "
                  f"excludes 0 and B_exact = {row['b_exact']:.3g} at (M, K) = ({row['M']}, {row['K']}): the mean gradient of "
                  f"{row['M']} examples agrees in sign with that of {row['K']} unseen ones with probability at least "
                  f"{1 - row['b_exact']:.0%} (P1's bound, for examples drawn like the held-out ones)."), math.nan


def grow_candidates(table: pd.DataFrame) -> pd.DataFrame:
    """The `grow here` rows, best first (largest scale-invariant value): the first is the point advise recommends."""
    return table[table["decision"] == GROW].sort_values("scaled_value", ascending=False, kind="stable")


def recommendation(table: pd.DataFrame, level: float) -> str:
    """The model-level line: the best `grow here` point and how sure it is, or "do not grow" and why."""
    candidates = grow_candidates(table)
    n = int(table["n"].max())
    if candidates.empty:
        counts = {word: int((table["decision"] == word).sum()) for word in DECISIONS if (table["decision"] == word).any()}
        summary = ", ".join(f"{count} {word}" for word, count in counts.items())
        closest = table.dropna(subset=["samples_to_detect"]).sort_values("samples_to_detect")
        hint = (f"; the closest, {closest.iloc[0]['point']}, would need about {int(closest.iloc[0]['samples_to_detect']):,} "
                "held-out examples" if len(closest) else "")
        return f"Do not grow: no point has a clear first-order value and a non-vacuous certificate at n = {n:,} " \
               f"held-out examples ({summary}){hint}."
    best = candidates.iloc[0]
    line = (f"Grow at {best['point']}: scale-invariant value {best['scaled_value']:.3g} ({percent(level)} interval "
            f"[{best['scaled_value_lo']:.3g}, {best['scaled_value_hi']:.3g}], "
            f"{best['scaled_value'] / best['scaled_value_se']:.1f} SE from 0), "
            f"B_exact = {best['b_exact']:.3g} at (M, K) = ({best['M']}, {best['K']})")
    if len(candidates) == 1:
        return line + "; it is the only point with evidence."
    second = candidates.iloc[1]
    margin = normal_quantile(level) * math.hypot(best["scaled_value_se"], second["scaled_value_se"])
    ahead = best["scaled_value"] - second["scaled_value"] > margin
    return line + (f"; ahead of {second['point']} ({second['scaled_value']:.3g}) beyond noise." if ahead else
                   f"; its lead over {second['point']} ({second['scaled_value']:.3g}) is within noise: either will do.")


def terminal_table(table: pd.DataFrame) -> str:
    """The decision table as the terminal shows it."""
    shown = pd.DataFrame({"point": table["point"], "decision": table["decision"],
                          "scaled value": table["scaled_value"].map("{:.3g}".format),
                          "interval": [f"[{lo:.3g}, {hi:.3g}]" for lo, hi in
                                       zip(table["scaled_value_lo"], table["scaled_value_hi"])],
                          "‖μ‖²/SE": table["detectability"].map("{:.2f}".format),
                          "d_align": table["d_align_raw"].map("{:.3g}".format),
                          "B_exact": table["b_exact"].map("{:.3g}".format),
                          "n to detect": table["samples_to_detect"].map(lambda n: "" if n != n else f"{int(n):,}")})
    return shown.to_string(index=False)


def advice_markdown(table: pd.DataFrame, line: str, about: dict[str, Any], figure_name: str) -> str:
    """advice.md: the recommendation, the table, one sentence per decision, the figure and what was measured."""
    header = "| point | decision | value [interval] | scale-invariant value [interval] | d_align [interval] | ‖μ‖²/SE | B_exact | B_align |"
    rows = [f"| {r['point']} | **{r['decision']}** | {r['value']:.3g} [{r['value_lo']:.3g}, {r['value_hi']:.3g}] | "
            f"{r['scaled_value']:.3g} [{r['scaled_value_lo']:.3g}, {r['scaled_value_hi']:.3g}] | "
            f"{r['d_align_raw']:.3g} [{r['d_align_lo']:.3g}, {r['d_align_hi']:.3g}] | {r['detectability']:.2f} | "
            f"{r['b_exact']:.3g} | {r['b_align']:.3g} |" for _, r in table.iterrows()]
    reasons = [f"- **{r['point']}, {r['decision']}.** {r['why']}" for _, r in table.iterrows()]
    return "\n".join([
        f"# Should I grow {about['model']}?", "", f"**{line}**", "", header,
        "|" + "---|" * 8, *rows, "", "## Why", "", *reasons, "",
        f"![first-order value and d_align per point]({figure_name})", "",
        "## What was measured", "",
        f"{about['n_train']:,} training and {about['n_test']:,} held-out examples of {about['data']} (seed "
        f"{about['seed']}), q reduced by {about['reduction']}; certificates at (M, K) = ({about['M']}, {about['K']}); "
        f"intervals at {percent(about['level'])}. The value is the unbiased ‖E[Σ_t q_t h_tᵀ]‖² of a zero-output "
        "block (raw and × ‖z‖²/‖h‖²); d_align (the raw estimate, shown where undetermined too), B_exact and "
        "B_align are P1's, from the held-out moments. "
        "The decision rule is growcert's docs/science.md, section \"advise\"; every figure is in advice.csv.", ""])


def plot_advice(table: pd.DataFrame, out_png: str | Path) -> None:
    """Scale-invariant value and d_align per point, with their intervals, the decision written on each point."""
    figure, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    x = np.arange(len(table))
    colours = {GROW: "tab:green", NO_EVIDENCE: "tab:gray", SATURATED: "tab:orange"}
    for axis, (column, label) in zip(axes, [("scaled_value", "value × ‖z‖²/‖h‖² (scale-invariant)"),
                                            ("d_align_raw", "d_align")]):
        centre = table[column].to_numpy(float)
        low, high = (table[f"{column.removesuffix('_raw')}_{end}"].to_numpy(float) for end in ("lo", "hi"))
        high = np.where(np.isfinite(high), high, np.nan)  # an unbounded Fieller interval is drawn open-ended
        axis.errorbar(x, centre, yerr=[np.clip(centre - low, 0, None), np.clip(high - centre, 0, None)], fmt="none",
                      ecolor="black", capsize=3, lw=0.8)
        axis.scatter(x, centre, c=[colours[word] for word in table["decision"]], zorder=3)
        positive = centre[centre > 0]
        axis.set_yscale("symlog", linthresh=float(positive.min()) if len(positive) else 1e-12)
        axis.axhline(0.0, color="black", lw=0.8)
        axis.set_xticks(x, [f"{p}\n{d}" for p, d in zip(table["point"], table["decision"])], fontsize=8)
        axis.set(ylabel=label, title=label)
        axis.grid(alpha=0.3)
    figure.tight_layout()
    save_figure(figure, out_png)


def write_advice(out: str | Path, table: pd.DataFrame, line: str, about: dict[str, Any],
                 provenance: dict[str, Any]) -> dict[str, Path]:
    """The figure and provenance.json first, advice.csv and advice.md last (each written atomically), so a run
    killed on the way never leaves the table and the page that make a folder look complete."""
    import json

    out = Path(out)
    paths = {"figure": out / "advice.png", "provenance": out / "provenance.json", "table": out / "advice.csv",
             "page": out / "advice.md"}
    plot_advice(table, paths["figure"])
    write_text(paths["provenance"], json.dumps({**provenance, "advice": about}, indent=1, default=str))
    write_csv(table, paths["table"])
    write_text(paths["page"], advice_markdown(table, line, about, paths["figure"].name))
    return paths
