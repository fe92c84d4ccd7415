"""`growcert advise` read back from tidy tables: with S more steps to spend, train on or grow at k (and where), each
option's predicted held-out gain beside the decision; per insertion point, the first-order reading (grow here, no
evidence, saturated) with its reason; the page, figure and table a person reads.

Inputs are the held-out (`test`) rows of the tables `estimate_alignment` and `estimate_depth` write for one
store, and the options' predicted gains (`stages.advise.option_predictions`: columns gain*, added*); nothing here
reads a network or a store.

The decision (docs/science.md, "advise: options with predictions"), over S = advise.budget_steps steps, among
the options within the local range (reach ≤ advise.local_reach: `stats.update_gain`):

    grow at k     the growth whose added gain beyond training on is largest among those whose added gain's
                  interval lies above 0 and whose own gain's interval lies above 0;
    train on      otherwise, when training on's predicted gain has its interval above 0 ("train on" is an answer:
                  no growth is predicted to add to it beyond noise);
    no evidence   otherwise: no option is predicted to lower held-out loss beyond noise at this sample, or training
                  on itself is beyond the local range (the line gives the steps that would stay within it).

The first-order reading per point (docs/science.md, "advise (should this model grow, and where?)"), in stream
order, shown beside the predictions (column `first_order`; `first_order_rows` gives the rows advise-check scores):

    no evidence   the mean activation gradient is not detectable (‖μ‖²/SE below the alignment detection threshold), or
                  the first-order value's interval holds 0: the row gives the held-out examples that would
                  detect it at the observed spread (`stats.certificates.samples_to_detect`);
    saturated     otherwise, when the scale-invariant value is within the plateau margin z·√(s_k² + s_j²) of
                  every deeper point's, down to the deepest (`stats.depth.saturated_levels`): a block here is
                  worth no more than one deeper;
    grow here     otherwise, when B_exact at (M, K) is non-vacuous (below `verdicts.VACUOUS_BOUND`);
    no evidence   otherwise (the certificate is vacuous or undetermined).

`first_order_recommendation` is that reading's model-level line: the `grow here` point with the largest
scale-invariant value, never a point without a detectable mean, and whether its lead over the runner-up exceeds
the same margin.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from growcert.files import write_csv, write_text
from growcert.pipeline.artifacts import ADVICE_FIGURE, ADVICE_PAGE, ADVICE_TABLE, PROVENANCE
from growcert.referee.verdicts import VACUOUS_BOUND, percent
from growcert.report.figures import save_figure
from growcert.stats.certificates import STATUS_NO_SIGNAL, certificate_columns, samples_to_detect
from growcert.stats.depth import saturated_levels
from growcert.stats.intervals import normal_quantile

# the per-point first-order reading's words (column first_order; advise-check scores them as `decision`)
GROW, NO_EVIDENCE, SATURATED = "grow here", "no evidence", "saturated"
DECISIONS = (GROW, NO_EVIDENCE, SATURATED)
# the decision's words: train on, grow at <point>, or NO_EVIDENCE
TRAIN_ON, GROW_AT = "train on", "grow at"
ALIGNMENT_COLUMNS = [
    "n",
    "detectability",
    "status",
    "mu_sq",
    "mu_sq_se",
    "d_align",
    "d_align_raw",
    "d_align_lo",
    "d_align_hi",
]
DEPTH_COLUMNS = [
    "value",
    "value_se",
    "value_lo",
    "value_hi",
    "value_detectability",
    "scaled_value",
    "scaled_value_se",
    "scaled_value_lo",
    "scaled_value_hi",
]
CERTIFICATE_COLUMNS = ["M", "K", "b_exact", "b_align", "b_exact_raw", "b_align_raw"]


def _needed(*counts: int | None) -> float:
    """The largest of the counts that exist (NaN when no count would detect the signal)."""
    known = [count for count in counts if count is not None]
    return float(max(known)) if known and len(known) == len(counts) else math.nan


def advice_table(
    alignment: pd.DataFrame, depth: pd.DataFrame, M: int, K: int, level: float, detect_threshold: float
) -> pd.DataFrame:
    """One row per point (stream order): the held-out figures, the certificates at (M, K), the decision and why.
    `level`: the depth intervals' coverage (the margin's z); `detect_threshold`: the alignment detection threshold."""
    held_out = alignment[alignment["pool"] == "test"].set_index("point")
    values = depth[depth["pool"] == "test"].sort_values("point_index").set_index("point")
    rows = []
    for point, value in values.iterrows():
        signal = held_out.loc[point]
        certificate = certificate_columns(signal.to_dict(), M, K)
        rows.append(
            {
                "point": point,
                "point_index": int(value["point_index"]),
                **{name: signal[name] for name in ALIGNMENT_COLUMNS},
                **{name: value[name] for name in DEPTH_COLUMNS},
                **{name: certificate[name] for name in CERTIFICATE_COLUMNS},
            }
        )
    table = pd.DataFrame(rows).rename(columns={"status": "alignment_status"})
    _, plateau = saturated_levels(table["scaled_value"], table["scaled_value_se"], level)
    z = normal_quantile(level)
    decided = [
        _decide(row, bool(plateau[i]), table.iloc[-1], z, level, detect_threshold) for i, row in table.iterrows()
    ]
    table["samples_to_detect"] = [needed for _, _, needed in decided]
    table["decision"] = [decision for decision, _, _ in decided]
    table["why"] = [why for _, why, _ in decided]
    return table


def _decide(
    row: pd.Series, plateau: bool, deepest: pd.Series, z: float, level: float, detect_threshold: float
) -> tuple[str, str, float]:
    """(decision, one sentence why, held-out examples that would detect what is missing: NaN if nothing is)."""
    n = int(row["n"])
    detectable = row["alignment_status"] != STATUS_NO_SIGNAL
    clear = row["value_lo"] > 0
    if not (detectable and clear):
        needed = _needed(
            *([] if detectable else [samples_to_detect(row["mu_sq"], row["mu_sq_se"], n, detect_threshold)]),
            *([] if clear else [samples_to_detect(row["value"], row["value_se"], n, z)]),
        )
        missing = (
            []
            if detectable
            else [
                f"the mean activation gradient is not detectable (‖μ‖²/SE = "
                f"{row['detectability']:.2f} < {detect_threshold:g})"
            ]
        )
        missing += (
            []
            if clear
            else [
                f"the first-order value's {percent(level)} interval "
                f"[{row['value_lo']:.3g}, {row['value_hi']:.3g}] holds 0"
            ]
        )
        more = (
            f"about {int(needed):,} held-out examples would detect it at the observed spread"
            if needed == needed
            else "no sample size would: the estimate is not positive"
        )
        return NO_EVIDENCE, f"At n = {n:,}, {' and '.join(missing)}; {more}.", needed
    if plateau:
        return (
            SATURATED,
            (
                f"Its scale-invariant value {row['scaled_value']:.3g} is within the plateau margin "
                f"z·√(s² + s_j²) of every deeper point's (the deepest, {deepest['point']}: "
                f"{deepest['scaled_value']:.3g}): a block here is worth no more than one deeper."
            ),
            math.nan,
        )
    if not row["b_exact"] < VACUOUS_BOUND:
        state = (
            f"B_exact = {row['b_exact']:.3g} ≥ {VACUOUS_BOUND:g} is vacuous"
            if row["b_exact"] == row["b_exact"]
            else f"the certificate is undetermined ({row['alignment_status']})"
        )
        return (
            NO_EVIDENCE,
            (
                f"The value is clear ({row['value_detectability']:.1f} SE from 0), but at (M, K) = "
                f"({row['M']}, {row['K']}) {state}."
            ),
            math.nan,
        )
    return (
        GROW,
        (
            f"The first-order value {row['value']:.3g} (interval [{row['value_lo']:.3g}, {row['value_hi']:.3g}]) "
            f"excludes 0 and B_exact = {row['b_exact']:.3g} at (M, K) = ({row['M']}, {row['K']}): the mean gradient of "
            f"{row['M']} examples agrees in sign with that of {row['K']} unseen ones with probability at least "
            f"{1 - row['b_exact']:.0%} (P1's bound, for examples drawn like the held-out ones)."
        ),
        math.nan,
    )


def grow_candidates(table: pd.DataFrame) -> pd.DataFrame:
    """The `grow here` rows, best first (largest scale-invariant value): the first is the point advise recommends."""
    return table[table["decision"] == GROW].sort_values("scaled_value", ascending=False, kind="stable")


def first_order_recommendation(table: pd.DataFrame, level: float) -> str:
    """The first-order reading's model-level line: the best `grow here` point and how sure it is, or "do not grow"
    and why (`table`: `advice_table`'s, or `first_order_rows` of an options table)."""
    candidates = grow_candidates(table)
    n = int(table["n"].max())
    if candidates.empty:
        counts = {
            word: int((table["decision"] == word).sum()) for word in DECISIONS if (table["decision"] == word).any()
        }
        summary = ", ".join(f"{count} {word}" for word, count in counts.items())
        closest = table.dropna(subset=["samples_to_detect"]).sort_values("samples_to_detect")
        hint = (
            f"; the closest, {closest.iloc[0]['point']}, would need about "
            f"{int(closest.iloc[0]['samples_to_detect']):,} held-out examples"
            if len(closest)
            else ""
        )
        return (
            f"Do not grow: no point has a clear first-order value and a non-vacuous certificate at n = {n:,} "
            f"held-out examples ({summary}){hint}."
        )
    best = candidates.iloc[0]
    line = (
        f"Grow at {best['point']}: scale-invariant value {best['scaled_value']:.3g} ({percent(level)} interval "
        f"[{best['scaled_value_lo']:.3g}, {best['scaled_value_hi']:.3g}], "
        f"{best['scaled_value'] / best['scaled_value_se']:.1f} SE from 0), "
        f"B_exact = {best['b_exact']:.3g} at (M, K) = ({best['M']}, {best['K']})"
    )
    if len(candidates) == 1:
        return line + "; it is the only point with evidence."
    second = candidates.iloc[1]
    margin = normal_quantile(level) * math.hypot(best["scaled_value_se"], second["scaled_value_se"])
    ahead = best["scaled_value"] - second["scaled_value"] > margin
    return line + (
        f"; ahead of {second['point']} ({second['scaled_value']:.3g}) beyond noise."
        if ahead
        else f"; its lead over {second['point']} ({second['scaled_value']:.3g}) is within noise: either will do."
    )


def grow_at(point: str) -> str:
    """The option (and decision) word of growing at `point`."""
    return f"{GROW_AT} {point}"


def options_table(points: pd.DataFrame, predictions: pd.DataFrame, local_reach: float) -> pd.DataFrame:
    """advice.csv: one row per option (`predictions`' order: train on, then grow at each point), its predicted gain,
    added gain, reach and whether that is within `local_reach` (`local`), the point's first-order reading (`points`,
    from `advice_table`: columns decision and why become first_order and first_order_why), and on every row the
    decision, its reason and whether the row is the option chosen (`chosen`)."""
    first_order = points.rename(columns={"decision": "first_order", "why": "first_order_why"})
    table = predictions.merge(first_order, on="point", how="left", validate="many_to_one")
    table["point_index"] = table["point_index"].fillna(-1).astype(int)  # train on: no point
    table["local"] = table["reach"] <= local_reach
    word, why = _decide_option(table, local_reach)
    return table.assign(decision=word, why=why, chosen=table["option"] == word)


def _interval(row: pd.Series, prefix: str) -> str:
    return f"{row[prefix]:+.3g} [{row[f'{prefix}_lo']:+.3g}, {row[f'{prefix}_hi']:+.3g}]"


def _decide_option(table: pd.DataFrame, local_reach: float) -> tuple[str, str]:
    """(decision, one sentence why) from the options' predicted gains (the rule in the module docstring)."""
    train_on = table[table["option"] == TRAIN_ON].iloc[0]
    if not train_on["local"]:
        steps = train_on["local_steps"]
        within = (
            f"they hold for about {int(steps):,} step{'s' if steps >= 2 else ''} at this lr (--budget-steps)"
            if steps >= 1
            else "they hold for less than one step at this lr (a smaller advise.budget_lr holds longer)"
        )
        return NO_EVIDENCE, (
            f"Training on for these S steps reaches {train_on['reach']:.3g} nats of held-out "
            f"log-likelihood, beyond the local range the predictions hold in (advise.local_reach = "
            f"{local_reach:g}): {within}."
        )
    growths = table[(table["option"] != TRAIN_ON) & table["local"]]
    helping = growths[(growths["added_lo"] > 0) & (growths["gain_lo"] > 0)]
    best_added = growths.sort_values("added", ascending=False, kind="stable").iloc[0] if len(growths) else None
    if len(helping):
        best = helping.sort_values("added", ascending=False, kind="stable").iloc[0]
        return best["option"], (
            f"predicted held-out gain {_interval(best, 'gain')} over the S steps, "
            f"{_interval(best, 'added')} beyond training on ({_interval(train_on, 'gain')}): "
            "the new block's signal outweighs the cost of its noise."
        )
    beyond = (
        "; no growth within the local range"
        if best_added is None
        else f"; no growth adds to it beyond noise (the most, at {best_added['point']}: "
        f"{_interval(best_added, 'added')})"
    )
    if train_on["gain_lo"] > 0:
        return TRAIN_ON, f"predicted held-out gain {_interval(train_on, 'gain')} over the S steps{beyond}."
    direction = "raise" if train_on["gain_hi"] < 0 else "change"
    return NO_EVIDENCE, (
        f"No option is predicted to lower held-out loss beyond noise: training on is predicted to "
        f"{direction} it ({_interval(train_on, 'gain')}){beyond}."
    )


def recommendation(table: pd.DataFrame) -> str:
    """The model-level line: the decision and why (the same on every row of an options table)."""
    first = table.iloc[0]
    return f"{first['decision'][0].upper()}{first['decision'][1:]}: {first['why']}"


def first_order_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The grow rows of an options table as `advice_table` gave them (first_order, first_order_why as decision and
    why): the per-point first-order reading advise-check scores."""
    rows = table[table["option"] != TRAIN_ON].drop(columns=["decision", "why"])
    return rows.rename(columns={"first_order": "decision", "first_order_why": "why"}).reset_index(drop=True)


def terminal_table(table: pd.DataFrame) -> str:
    """The options table as the terminal shows it: each option's prediction beside the decision."""
    shown = pd.DataFrame(
        {
            "option": [f"{o} *" if chosen else o for o, chosen in zip(table["option"], table["chosen"])],
            "predicted gain [interval]": [_interval(r, "gain") for _, r in table.iterrows()],
            "beyond train on": ["" if r["option"] == TRAIN_ON else _interval(r, "added") for _, r in table.iterrows()],
            "reach": [f"{r:.2g}" + ("" if local else " (beyond)") for r, local in zip(table["reach"], table["local"])],
            "first order": table["first_order"].fillna(""),
            "scaled value": table["scaled_value"].map(lambda v: "" if v != v else f"{v:.3g}"),
            "‖μ‖²/SE": table["detectability"].map(lambda v: "" if v != v else f"{v:.2f}"),
            "B_exact": table["b_exact"].map(lambda v: "" if v != v else f"{v:.3g}"),
        }
    )
    return shown.to_string(index=False)


def advice_markdown(table: pd.DataFrame, line: str, about: dict[str, Any], figure_name: str) -> str:
    """advice.md: the decision, every option's prediction, the first-order reading per point, why, the figure and
    what was measured."""
    options = [
        f"| {r['option']} | {'**' + r['decision'] + '**' if r['chosen'] else ''} | {_interval(r, 'gain')} | "
        f"{r['gain_first_order']:.3g} | {r['gain_cost']:.3g} | "
        f"{'' if r['option'] == TRAIN_ON else _interval(r, 'added')} | {r['reach']:.3g}"
        f"{'' if r['local'] else ' (beyond)'} | {r['local_steps']:,.0f} |"
        for _, r in table.iterrows()
    ]
    points = first_order_rows(table)
    header = (
        "| point | first-order reading | value [interval] | scale-invariant value [interval] | d_align [interval] "
        "| ‖μ‖²/SE | B_exact | B_align |"
    )
    rows = [
        f"| {r['point']} | {r['decision']} | {r['value']:.3g} [{r['value_lo']:.3g}, {r['value_hi']:.3g}] | "
        f"{r['scaled_value']:.3g} [{r['scaled_value_lo']:.3g}, {r['scaled_value_hi']:.3g}] | "
        f"{r['d_align_raw']:.3g} [{r['d_align_lo']:.3g}, {r['d_align_hi']:.3g}] | {r['detectability']:.2f} | "
        f"{r['b_exact']:.3g} | {r['b_align']:.3g} |"
        for _, r in points.iterrows()
    ]
    reasons = [f"- **{r['point']}, {r['decision']}.** {r['why']}" for _, r in points.iterrows()]
    return "\n".join(
        [
            f"# Should I train on or grow {about['model']}?",
            "",
            f"**{line}**",
            "",
            f"## Every option over S = {about['budget_steps']} steps",
            "",
            "| option | decision | predicted held-out gain [interval] | first order | cost "
            "| beyond train on [interval] | reach (nats) | steps within the local range |",
            "|" + "---|" * 8,
            *options,
            "",
            f"Gains are predicted decreases of the mean held-out loss over S AdamW steps at lr {about['budget_lr']:g}, "
            f'batch {about["budget_batch_size"]} (docs/science.md, "advise: options with predictions"): first order '
            "minus the second-order cost of the steps, the noise of every coordinate included. An option whose reach "
            "(the typical change of a held-out example's log-likelihood over the S steps) is above "
            f"{about['local_reach']:g} "
            "is beyond the local range its prediction holds in, and never decides. A `grow at k` option is growth "
            f"procedure {about.get('growth_procedure', 'whole')} (advise.growth_procedure; advise-check measures every "
            "procedure).",
            "",
            "## The first-order reading per point",
            "",
            header,
            "|" + "---|" * 8,
            *rows,
            "",
            "## Why",
            "",
            *reasons,
            "",
            f"![first-order value and d_align per point, and every option's predicted gain]({figure_name})",
            "",
            "## What was measured",
            "",
            f"{about['n_train']:,} training and {about['n_test']:,} held-out examples of {about['data']} (seed "
            f"{about['seed']}), q reduced by {about['reduction']}; certificates at (M, K) = "
            f"({about['M']}, {about['K']}); "
            f"intervals at {percent(about['level'])}. The value is the unbiased ‖E[Σ_t q_t h_tᵀ]‖² of a zero-output "
            "block (raw and × ‖z‖²/‖h‖²); d_align (the raw estimate, shown where undetermined too), B_exact and "
            "B_align are P1's, from the held-out moments. "
            'The decision rule is growcert\'s docs/science.md, section "advise"; every figure is in '
            + ADVICE_TABLE.name
            + ".",
            "",
        ]
    )


def plot_advice(table: pd.DataFrame, out_png: str | Path) -> None:
    """Scale-invariant value and d_align per point with the first-order reading on each, and every option's
    predicted gain with its interval, the chosen one marked."""
    points = first_order_rows(table)
    figure, axes = plt.subplots(1, 3, figsize=(16, 3.8))
    x = np.arange(len(points))
    colours = {GROW: "tab:green", NO_EVIDENCE: "tab:gray", SATURATED: "tab:orange"}
    for axis, (column, label) in zip(
        axes, [("scaled_value", "value × ‖z‖²/‖h‖² (scale-invariant)"), ("d_align_raw", "d_align")]
    ):
        centre = points[column].to_numpy(float)
        low, high = (points[f"{column.removesuffix('_raw')}_{end}"].to_numpy(float) for end in ("lo", "hi"))
        high = np.where(np.isfinite(high), high, np.nan)  # an unbounded Fieller interval is drawn open-ended
        axis.errorbar(
            x,
            centre,
            yerr=[np.clip(centre - low, 0, None), np.clip(high - centre, 0, None)],
            fmt="none",
            ecolor="black",
            capsize=3,
            lw=0.8,
        )
        axis.scatter(x, centre, c=[colours[word] for word in points["decision"]], zorder=3)
        positive = centre[centre > 0]
        axis.set_yscale("symlog", linthresh=float(positive.min()) if len(positive) else 1e-12)
        axis.axhline(0.0, color="black", lw=0.8)
        axis.set_xticks(x, [f"{p}\n{d}" for p, d in zip(points["point"], points["decision"])], fontsize=8)
        axis.set(ylabel=label, title=label)
        axis.grid(alpha=0.3)
    axis = axes[2]
    x = np.arange(len(table))
    gain = table["gain"].to_numpy(float)
    axis.errorbar(
        x,
        gain,
        yerr=[gain - table["gain_lo"].to_numpy(float), table["gain_hi"].to_numpy(float) - gain],
        fmt="o",
        color="black",
        capsize=3,
        lw=0.8,
    )
    axis.scatter(
        x[table["chosen"].to_numpy(bool)],
        gain[table["chosen"].to_numpy(bool)],
        s=120,
        facecolors="none",
        edgecolors="tab:green",
        zorder=3,
        label="decision",
    )
    axis.axhline(0.0, color="black", lw=0.8)
    axis.set_xticks(x, table["option"], fontsize=8)
    axis.set(ylabel="predicted held-out gain over S steps", title="every option's predicted gain")
    axis.grid(alpha=0.3)
    figure.tight_layout()
    save_figure(figure, out_png)


def write_advice(
    out: str | Path, table: pd.DataFrame, line: str, about: dict[str, Any], provenance: dict[str, Any]
) -> dict[str, Path]:
    """The figure and the provenance record (artifacts.PROVENANCE) first, advice.csv and advice.md last (each written
    atomically), so a run killed on the way never leaves the table and the page that make a folder look complete."""
    import json

    out = Path(out)
    paths = {
        "figure": ADVICE_FIGURE.path(out),
        "provenance": PROVENANCE.path(out),
        "table": ADVICE_TABLE.path(out),
        "page": ADVICE_PAGE.path(out),
    }
    plot_advice(table, paths["figure"])
    write_text(paths["provenance"], json.dumps({**provenance, "advice": about}, indent=1, default=str))
    write_csv(table, paths["table"])
    write_text(paths["page"], advice_markdown(table, line, about, paths["figure"].name))
    return paths
