"""The P1 regime map's statistics: d_align compared across widths at matched budget
and at matched held-out loss, with a seed-level interval on the width slope.

Inputs are the pooled alignment tables the pipeline writes (one row per model x checkpoint x
point x reduction x pool; columns width, seed, step, d_align, d_align_lo/hi, d_par, d_2, ...), with
a held-out loss column (default ``test_loss``) joined from the training history for matched loss.
Pass the held-out pool only (``pool == "test"``): pool is a key, so nothing mixes, but the claim is
about held-out q.

Matched budget: every width at the same step (and tokens per step). Matched loss: every width at
the same held-out loss, so a wider model that is further along at a given step is compared at the
same training progress instead (P1's fifth pilot, docs/science.md, "P1: pilots").

    common_loss_grid(table, count)    held-out loss levels every curve of a panel passes through
    matched_loss(table, levels)       log-linear interpolation of d_align (and its interval) at them
    width_slopes(table, progress)     per seed: OLS slope of log d_align on log width, per cell (`log_value`
                                      False: of the value itself, e.g. a probability p̂)
    width_trend(table, progress)      per cell: seed-level t interval, trend, magnitude at the widest width
    regime_summary(trend)             counts of rising / falling / flat cells and where d_align >= 1

Keys that a table lacks (e.g. ``context`` before it is a grid axis) are left out of the grouping.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from growcert.stats.seeds import t_interval

LOSS = "test_loss"
# One training curve: the checkpoints of one model seen through one point, reduction and pool.
CURVE_KEYS = ["family", "dataset", "context", "depth", "width", "seed", "reduction", "point", "pool"]
# One cell of the map (with a progress column added): a curve's keys less width and seed, which
# the slope and its interval consume.
CELL_KEYS = ["family", "dataset", "context", "depth", "reduction", "point", "pool"]
# Held-out loss is a property of the model, not of a point or reduction: one loss grid per panel.
PANEL_KEYS = ["family", "dataset", "context", "depth"]
DIMENSION_COLUMNS = [
    "d_align",
    "d_align_lo",
    "d_align_hi",
    "d_par",
    "d_par_lo",
    "d_par_hi",
    "d_2",
    "d_2_lo",
    "d_2_hi",
    "d_align_plugin",
]
RISES, FALLS, FLAT, UNDETERMINED = "rises", "falls", "flat", "undetermined"


def present(keys: Sequence[str], table: pd.DataFrame) -> list[str]:
    """The keys that are columns of `table`, in order."""
    return [key for key in keys if key in table.columns]


def common_loss_grid(
    table: pd.DataFrame, count: int = 5, loss: str = LOSS, panel: Sequence[str] = PANEL_KEYS
) -> pd.DataFrame:
    """`count` evenly spaced held-out loss levels that every width and seed of a panel reaches.

    A curve's checkpoints bracket every level between its lowest and highest loss (the piecewise
    linear curve is continuous), so the common range is [max of the minima, min of the maxima].
    Returns panel keys + `loss`; a panel whose curves share no range gets no rows.
    """
    if count < 1:
        raise ValueError(f"a loss grid needs at least one level; got count={count}")
    panel = present(panel, table)
    models = table.dropna(subset=[loss]).groupby(panel + ["width", "seed"])[loss].agg(["min", "max"])
    frames = []
    for key, ranges in models.groupby(level=list(range(len(panel)))) if panel else [((), models)]:
        lowest, highest = ranges["min"].max(), ranges["max"].min()
        if lowest > highest:
            continue
        key = key if isinstance(key, tuple) else (key,)
        frames.append(pd.DataFrame({**dict(zip(panel, key)), loss: np.linspace(lowest, highest, count)}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=panel + [loss])


def first_crossing(losses: np.ndarray, level: float) -> tuple[int, float] | None:
    """(i, f): the earliest checkpoint pair (i, i + 1) whose losses bracket `level`, and the
    fraction f of the way from i to i + 1 at which the linear interpolant equals it; None if none does.

    Held-out loss need not fall monotonically (noise, a late rise): the earliest crossing is when
    training first reached that loss, which is what "as far along as" means. Later returns to the
    same loss are ignored. A level equal to a checkpoint's loss is taken at that checkpoint.
    """
    for i in range(len(losses) - 1):
        a, b = losses[i], losses[i + 1]
        if min(a, b) <= level <= max(a, b):
            return i, (0.0 if a == b or level == a else (level - a) / (b - a))
    if len(losses) and losses[-1] == level:  # only reachable for a single checkpoint
        return len(losses) - 1, 0.0
    return None


def _levels_for(levels: pd.DataFrame, on: list[str], loss: str) -> dict[tuple, np.ndarray]:
    return {
        (key if isinstance(key, tuple) else (key,)): frame[loss].to_numpy(float)
        for key, frame in (levels.groupby(on) if on else [((), levels)])
    }


def matched_loss(
    table: pd.DataFrame,
    levels: pd.DataFrame | Sequence[float],
    loss: str = LOSS,
    curve: Sequence[str] = CURVE_KEYS,
    values: Sequence[str] | None = None,
) -> pd.DataFrame:
    """d_align (and its interval, d_∥, d_2 where present) of each curve at given held-out losses.

    Between the two checkpoints that first bracket a level (first_crossing), log d is linear in
    loss: d = d_i^(1−f) d_{i+1}^f. Zero and infinite interval ends stay 0 and ∞; an undetermined
    (NaN) end gives NaN unless the level sits exactly on the other checkpoint. A level no pair
    brackets is *not reached*: NaN values and ``reached = False``, never an extrapolation.

    `levels` is a list applied to every curve, or a table (common_loss_grid) whose key columns
    choose each curve's levels. Returns the curve keys, `loss` (the level), ``reached``, ``step``
    (the interpolated step at which the level is reached), ``step_before``, ``step_after`` and the
    interpolated value columns. If both interval ends cover the truth at their checkpoints, the
    interpolated ends cover the interpolated truth (the map is monotone in each end), so coverage
    is at least 1 − 2α, ignoring the error of the log-linear interpolation itself.
    """
    curve = present(curve, table)
    values = present(DIMENSION_COLUMNS, table) if values is None else list(values)
    if not isinstance(levels, pd.DataFrame):
        levels = pd.DataFrame({loss: list(levels)})
    on = [key for key in levels.columns if key != loss]
    if not set(on) <= set(curve):
        raise ValueError(f"loss levels keyed by {on}, but the table's curves are keyed by {curve}")
    chosen = _levels_for(levels, on, loss)
    rows = []
    for key, frame in table.dropna(subset=[loss]).groupby(curve):
        key = key if isinstance(key, tuple) else (key,)
        identity = dict(zip(curve, key))
        frame = frame.sort_values("step")
        if frame["step"].duplicated().any():
            raise ValueError(f"curve {identity} has two rows at one step: a key column is missing from `curve`")
        steps, losses = frame["step"].to_numpy(float), frame[loss].to_numpy(float)
        measured = frame[values].to_numpy(float)
        for level in chosen.get(tuple(identity[k] for k in on), []):
            crossing = first_crossing(losses, level)
            row = {**identity, loss: level, "reached": crossing is not None}
            if crossing is None:
                row.update(
                    {
                        "step": math.nan,
                        "step_before": math.nan,
                        "step_after": math.nan,
                        **{name: math.nan for name in values},
                    }
                )
            else:
                i, f = crossing
                j = min(i + 1, len(steps) - 1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    interpolated = np.power(measured[i], 1.0 - f) * np.power(measured[j], f)
                row.update(
                    {
                        "step": (1.0 - f) * steps[i] + f * steps[j],
                        "step_before": steps[i],
                        "step_after": steps[j],
                        **dict(zip(values, interpolated)),
                    }
                )
            rows.append(row)
    return pd.DataFrame(rows, columns=curve + [loss, "reached", "step", "step_before", "step_after"] + values)


def width_slopes(
    table: pd.DataFrame,
    progress: str = "step",
    value: str = "d_align",
    cell: Sequence[str] = CELL_KEYS,
    log_value: bool = True,
) -> pd.DataFrame:
    """Per (cell, progress, seed): the OLS slope of log `value` on log width (of `value` itself with `log_value`
    False: a probability such as p̂, whose claim is a fall in p̂, and which may be 0).

    Only determined values (finite, and > 0 on the log scale) enter; a seed with one such width gets a NaN
    slope, one with none gets no row (width_trend counts only finite slopes either way).
    Returns the cell keys, `progress`, seed, ``widths`` (how many entered) and ``slope``.
    """
    keys = present(cell, table) + [progress]
    data = table[keys + ["seed", "width", value]]
    if data.duplicated(subset=keys + ["seed", "width"]).any():
        raise ValueError(
            "two rows share a cell, seed and width: filter the table (e.g. one pool) or name the missing key in `cell`"
        )
    data = data[np.isfinite(data[value]) & ((data[value] > 0) if log_value else True)]
    data = data.assign(x=np.log(data["width"].astype(float)), y=np.log(data[value]) if log_value else data[value])
    groups = data.groupby(keys + ["seed"])
    centred_x = data["x"] - groups["x"].transform("mean")
    centred_y = data["y"] - groups["y"].transform("mean")
    sums = data.assign(sxx=centred_x**2, sxy=centred_x * centred_y).groupby(keys + ["seed"])
    out = sums.agg(widths=("width", "nunique"), sxx=("sxx", "sum"), sxy=("sxy", "sum")).reset_index()
    out["slope"] = np.where(
        (out["widths"] >= 2) & (out["sxx"] > 0), out["sxy"] / out["sxx"].where(out["sxx"] > 0), np.nan
    )
    return out.drop(columns=["sxx", "sxy"])


def trend_direction(lo: float, hi: float) -> str:
    """ "rises" / "falls" when the slope's interval excludes 0 on that side, "flat" when it holds 0
    (no significant slope, not a proven zero), "undetermined" without an interval."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return UNDETERMINED
    return RISES if lo > 0 else FALLS if hi < 0 else FLAT


def _by(frame: pd.DataFrame, keys: list[str]):
    """(key tuple, group) pairs, with the key a tuple however many keys there are."""
    for key, group in frame.groupby(keys):
        yield (key if isinstance(key, tuple) else (key,)), group


def width_trend(
    table: pd.DataFrame,
    progress: str = "step",
    value: str = "d_align",
    level: float = 0.95,
    magnitude: float = 1.0,
    cell: Sequence[str] = CELL_KEYS,
    log_value: bool = True,
) -> pd.DataFrame:
    """Per (cell, progress): the width slope of log `value` (of `value` itself with `log_value` False) with a
    seed-level interval and its direction, and `value` at the cell's widest width against the paper's magnitude.

    Works on a matched-budget table (progress = "step") and on matched_loss output (progress =
    the loss column). The interval is Student's t across the per-seed slopes (width_slopes), with
    seeds − 1 degrees of freedom: seeds are the independent replicates (initialisation, data
    order); widths of one seed share them, so a regression over all (width, seed) points treats
    correlated points as independent and its interval is too narrow; and each d_align's own
    jackknife interval covers only the sampling of examples, not of training.

    Magnitude: the geometric mean over seeds of the determined `value` at the widest width
    measured in the cell (the paper's claim is about growing width), with a seed-level t interval
    on its log; ``magnitude_reached`` when that geometric mean is ≥ `magnitude`,
    ``magnitude_clear`` when the interval's lower end is too.
    Columns: cell keys, `progress`, seeds, slope, slope_se, slope_lo, slope_hi, trend, widest,
    seeds_at_widest, <value>_widest, <value>_widest_lo, <value>_widest_hi, magnitude_reached,
    magnitude_clear.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1); got {level}")
    keys = present(cell, table) + [progress]
    columns = keys + [
        "seeds",
        "slope",
        "slope_se",
        "slope_lo",
        "slope_hi",
        "trend",
        "widest",
        "seeds_at_widest",
        f"{value}_widest",
        f"{value}_widest_lo",
        f"{value}_widest_hi",
        "magnitude_reached",
        "magnitude_clear",
    ]
    if table.empty:  # no sweep: the table still says what it would hold
        return pd.DataFrame(columns=columns)
    slopes = {
        key: group["slope"].to_numpy(float)
        for key, group in _by(width_slopes(table, progress, value, cell, log_value), keys)
    }
    rows = []
    for key, frame in _by(table, keys):
        mean, se, lo, hi = t_interval(slopes.get(key, np.array([])), level)
        widest = int(frame["width"].max())
        at_widest = frame.loc[frame["width"] == widest, value].to_numpy(float)
        at_widest = at_widest[np.isfinite(at_widest) & (at_widest > 0)]
        log_mean, _, log_lo, log_hi = t_interval(np.log(at_widest), level)
        with np.errstate(over="ignore"):  # a high level on two seeds can reach beyond float range: inf
            geometric_mean, geometric_lo, geometric_hi = (float(np.exp(v)) for v in (log_mean, log_lo, log_hi))
        rows.append(
            {
                **dict(zip(keys, key)),
                "seeds": int(np.isfinite(slopes.get(key, [])).sum()),
                "slope": mean,
                "slope_se": se,
                "slope_lo": lo,
                "slope_hi": hi,
                "trend": trend_direction(lo, hi),
                "widest": widest,
                "seeds_at_widest": len(at_widest),
                f"{value}_widest": geometric_mean,
                f"{value}_widest_lo": geometric_lo,
                f"{value}_widest_hi": geometric_hi,
                "magnitude_reached": bool(geometric_mean >= magnitude),  # False when NaN
                "magnitude_clear": bool(geometric_lo >= magnitude),
            }
        )
    return pd.DataFrame(rows, columns=columns)


def regime_summary(trend: pd.DataFrame, progress: str = "step") -> dict:
    """Counts for a claim row from width_trend output.

    Keys: cells, rises, falls, flat, undetermined; magnitude (cells whose widest-width geometric
    mean reaches the magnitude), magnitude_clear (those whose seed-level lower end does too),
    magnitude_cells (labels of the former, naming the cell keys that vary across `trend`, e.g.
    "context=256, step=150"); this_run (one line for the claim row).
    """
    counts = trend["trend"].value_counts()
    varying = [c for c in present(CELL_KEYS, trend) + [progress] if trend[c].nunique() > 1]
    reached = trend[trend["magnitude_reached"]]
    labels = [
        ", ".join(f"{c}={row[c]:.4g}" if isinstance(row[c], float) else f"{c}={row[c]}" for c in varying)
        for _, row in reached.iterrows()
    ]
    summary = {
        "cells": len(trend),
        **{name: int(counts.get(name, 0)) for name in (RISES, FALLS, FLAT, UNDETERMINED)},
        "magnitude": len(reached),
        "magnitude_clear": int(trend["magnitude_clear"].sum()),
        "magnitude_cells": labels,
    }
    judged = summary["cells"] - summary[UNDETERMINED]
    summary["this_run"] = (
        f"rises with width in {summary[RISES]} of {judged} judged cells, falls in {summary[FALLS]}, "
        f"flat in {summary[FLAT]} ({summary[UNDETERMINED]} undetermined; seed-level t interval "
        f"on the slope of log d vs log width); ≥ 1 at the widest width in {summary['magnitude']} "
        f"cells ({summary['magnitude_clear']} with the interval above)" + (f": {'; '.join(labels)}" if labels else "")
    )
    return summary


def seed_spread(
    table: pd.DataFrame, value: str = "d_align", level: float = 0.95, cell: Sequence[str] = CELL_KEYS
) -> pd.DataFrame:
    """Per (cell, width, step): how much log `value` varies between training seeds against how much it
    varies within one store.

    between_sd: the standard deviation over seeds of log `value` (determined values only; NaN below two
    seeds). within_sd: the root mean square over seeds of each store's own standard error of log
    `value`, read off its jackknife interval as (log hi − log lo) / (2 z) with z the normal quantile of
    `level` (the interval's level); intervals reaching 0 or infinity give no such error and are left out.
    ratio = between_sd / within_sd: above 1, the training run, not the sampling of examples, sets the
    uncertainty, so an interval over seeds is needed.
    """
    keys = present(cell, table) + ["width", "step"]
    columns = keys + ["seeds", "determined", "between_sd", "within_sd", "ratio"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    z = float(scipy_stats.norm.ppf(0.5 + level / 2.0))
    rows = []
    for key, frame in _by(table, keys):
        values = frame[value].to_numpy(float)
        determined = values[np.isfinite(values) & (values > 0)]
        low, high = frame[f"{value}_lo"].to_numpy(float), frame[f"{value}_hi"].to_numpy(float)
        usable = np.isfinite(low) & np.isfinite(high) & (low > 0) & (high > 0)
        within = (np.log(high[usable]) - np.log(low[usable])) / (2.0 * z)
        between = float(np.std(np.log(determined), ddof=1)) if len(determined) >= 2 else math.nan
        within_sd = float(np.sqrt(np.mean(within**2))) if len(within) else math.nan
        rows.append(
            {
                **dict(zip(keys, key)),
                "seeds": len(frame),
                "determined": len(determined),
                "between_sd": between,
                "within_sd": within_sd,
                "ratio": between / within_sd if within_sd and math.isfinite(within_sd) else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=columns)
