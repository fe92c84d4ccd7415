"""The P1 regime map's statistics: matched-loss interpolation, the seed-level width
slope interval and its verdicts (growcert.stats.regime)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from growcert.stats import common_loss_grid, matched_loss, regime_summary, width_slopes, width_trend
from growcert.stats.regime import first_crossing


def curve(width, seed, losses, d_align, lo=None, hi=None, steps=(50, 100, 200, 400), context=256):
    """Rows of one synthetic alignment table curve (one point, one reduction, held-out pool)."""
    d_align = np.asarray(d_align, float)
    return pd.DataFrame(
        {
            "family": "llama",
            "dataset": "shakespeare",
            "context": context,
            "depth": 2,
            "width": width,
            "seed": seed,
            "reduction": "sum_positions",
            "point": "block2",
            "pool": "test",
            "step": list(steps),
            "test_loss": losses,
            "d_align": d_align,
            "d_align_lo": d_align / 2 if lo is None else lo,
            "d_align_hi": d_align * 2 if hi is None else hi,
        }
    )


# Width 32's held-out loss rises between steps 100 and 200 (non-monotone); width 64 starts lower.
NARROW = curve(32, 0, [3.0, 2.5, 2.6, 2.0], [4.0, 2.0, 1.0, 0.5], lo=[0.0, 1.0, 0.5, 0.25], hi=[8.0, np.inf, 2.0, 1.0])
WIDE = curve(64, 0, [2.9, 2.4, 2.1, 1.8], [8.0, 4.0, 2.0, 1.0])
TABLE = pd.concat([NARROW, WIDE], ignore_index=True)


def at(frame, width, level):
    return frame[(frame["width"] == width) & np.isclose(frame["test_loss"], level)].iloc[0]


def test_matched_loss_matches_a_hand_computation():
    out = matched_loss(TABLE, [3.0, 2.8, 2.55, 2.5, 2.2, 1.9])
    # 2.8 on width 32: f = (3.0 - 2.8) / (3.0 - 2.5) = 0.4 between steps 50 and 100; log-linear in loss.
    row = at(out, 32, 2.8)
    assert row["reached"] and row["step"] == pytest.approx(70.0)
    assert row["d_align"] == pytest.approx(4.0**0.6 * 2.0**0.4)
    assert row["d_align_lo"] == 0.0  # a zero interval end stays zero
    assert row["d_align_hi"] == pytest.approx(8.0**0.6 * np.inf**0.4)
    assert np.isinf(row["d_align_hi"])
    # 2.55 is crossed three times by width 32 (50→100, 100→200, 200→400); the first crossing counts.
    row = at(out, 32, 2.55)
    assert (row["step_before"], row["step_after"]) == (50, 100)
    assert row["d_align"] == pytest.approx(2.0 ** (2 * 0.1 + 1 * 0.9))
    # 2.2 on width 32: only the falling segment 200→400 brackets it, f = 0.4 / 0.6.
    row = at(out, 32, 2.2)
    assert row["step"] == pytest.approx(200 + 200 * 2 / 3)
    assert row["d_align"] == pytest.approx(0.5 ** (2 / 3))
    # A level on a checkpoint is taken there.
    assert at(out, 32, 2.5)["d_align"] == pytest.approx(2.0)
    assert at(out, 32, 3.0)["d_align"] == pytest.approx(4.0)
    # Width 64 at 2.2: f = (2.4 - 2.2) / (2.4 - 2.1) between steps 100 and 200.
    f = 0.2 / 0.3
    assert at(out, 64, 2.2)["d_align"] == pytest.approx(4.0 ** (1 - f) * 2.0**f)
    assert at(out, 64, 2.2)["d_align_lo"] == pytest.approx(2.0 ** (1 - f) * 1.0**f)


def test_a_level_a_curve_never_reaches_is_missing_not_extrapolated():
    out = matched_loss(TABLE, [3.0, 1.9])
    never = [at(out, 64, 3.0), at(out, 32, 1.9)]  # width 64 starts below 3.0; width 32 never gets to 1.9
    for row in never:
        assert not row["reached"]
        assert all(math.isnan(row[c]) for c in ("d_align", "d_align_lo", "d_align_hi", "step"))
    assert at(out, 32, 3.0)["reached"] and at(out, 64, 1.9)["reached"]


def test_first_crossing_on_a_non_monotone_curve():
    losses = np.array([3.0, 2.5, 2.6, 2.0])
    assert first_crossing(losses, 2.58) == (0, pytest.approx(0.84))
    assert first_crossing(losses, 2.59)[0] == 0  # also bracketed later by the rise and the fall
    assert first_crossing(losses, 3.1) is None
    assert first_crossing(np.array([2.0]), 2.0) == (0, 0.0)


def test_common_grid_is_reached_by_every_curve():
    grid = common_loss_grid(TABLE, count=4)
    # [max of minima, min of maxima] = [max(2.0, 1.8), min(3.0, 2.9)]
    assert grid["test_loss"].to_list() == pytest.approx([2.0, 2.3, 2.6, 2.9])
    assert set(grid["context"]) == {256}
    out = matched_loss(TABLE, grid)
    assert out["reached"].all() and out["d_align"].notna().all() and len(out) == 8
    disjoint = pd.concat([NARROW, curve(64, 0, [1.9, 1.7, 1.6, 1.5], [1, 1, 1, 1])])
    assert common_loss_grid(disjoint).empty


def test_each_context_gets_its_own_grid():
    other = TABLE.assign(context=64, test_loss=TABLE["test_loss"] + 1.0)
    grid = common_loss_grid(pd.concat([TABLE, other]), count=2)
    assert sorted(grid[grid["context"] == 64]["test_loss"]) == pytest.approx([3.0, 3.9])
    assert sorted(grid[grid["context"] == 256]["test_loss"]) == pytest.approx([2.0, 2.9])


def sweeps(rng, replicates, slope, widths=(32, 64, 128, 256), seeds=3, seed_sd=0.3, slope_sd=0.2, noise_sd=0.4):
    """Synthetic sweeps: log d = a + (slope + v_s) log w + u_s + e, seed effects v_s, u_s shared by
    a seed's widths (what makes points within a seed correlated)."""
    log_width = np.log(np.asarray(widths, float))
    shape = (replicates, seeds, len(widths))
    seed_offset = rng.normal(0, seed_sd, shape[:2])[..., None]
    seed_slope = rng.normal(0, slope_sd, shape[:2])[..., None]
    centred = log_width - log_width.mean()  # so a seed's slope deviation does not also shift its level
    log_d = -1.0 + slope * log_width + seed_slope * centred + seed_offset + rng.normal(0, noise_sd, shape)
    r, s, w = np.meshgrid(np.arange(replicates), np.arange(seeds), np.arange(len(widths)), indexing="ij")
    return pd.DataFrame(
        {
            "replicate": r.ravel(),
            "seed": s.ravel(),
            "width": np.asarray(widths)[w.ravel()],
            "step": 150,
            "d_align": np.exp(log_d.ravel()),
        }
    )


def test_seed_level_interval_covers_the_true_slope_at_the_nominal_rate():
    rng = np.random.default_rng(21)
    replicates, true_slope, level = 2000, 0.5, 0.9
    trend = width_trend(sweeps(rng, replicates, true_slope), level=level, cell=["replicate"])
    assert len(trend) == replicates and (trend["seeds"] == 3).all()
    covered = ((trend["slope_lo"] <= true_slope) & (true_slope <= trend["slope_hi"])).mean()
    se = math.sqrt(level * (1 - level) / replicates)
    assert abs(covered - level) <= 4 * se


def test_pooling_points_instead_of_seeds_under_covers():
    # Why the interval is across seeds: an OLS interval over all (width, seed) points of a cell
    # treats a seed's correlated widths as independent and covers far below its nominal rate.
    rng = np.random.default_rng(5)
    replicates, true_slope, level = 1000, 0.5, 0.9
    table = sweeps(rng, replicates, true_slope, seed_sd=0.1, slope_sd=0.4)
    covered = 0
    for _, frame in table.groupby("replicate"):
        fit = scipy_stats.linregress(np.log(frame["width"]), np.log(frame["d_align"]))
        half = scipy_stats.t.ppf(0.5 + level / 2, len(frame) - 2) * fit.stderr
        covered += abs(fit.slope - true_slope) <= half
    assert covered / replicates < level - 4 * math.sqrt(level * (1 - level) / replicates)


def test_per_seed_slope_is_the_ols_slope_on_log_scales():
    table = pd.DataFrame({"seed": 0, "step": 150, "width": [32, 64, 128], "d_align": [1.0, 3.0, 4.0]})
    x, y = np.log([32, 64, 128]), np.log([1.0, 3.0, 4.0])
    expected = np.polyfit(x, y, 1)[0]
    assert width_slopes(table, cell=[])["slope"].iloc[0] == pytest.approx(expected)
    undetermined = table.assign(d_align=[1.0, np.nan, -2.0])  # one usable width: no slope
    out = width_slopes(undetermined, cell=[])
    assert out["widths"].iloc[0] == 1 and out["slope"].isna().all()
    with pytest.raises(ValueError, match="share a cell"):
        width_slopes(pd.concat([table, table]), cell=[])


def constructed(slopes, level_at_32=0.5, step=150):
    """One cell whose per-seed slopes of log d on log width are exactly `slopes`."""
    widths = np.array([32, 64, 128])
    rows = [
        {"step": step, "seed": s, "width": w, "d_align": level_at_32 * (w / 32) ** b}
        for s, b in enumerate(slopes)
        for w in widths
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "slopes, expected",
    [
        ([0.9, 1.0, 1.1], "rises"),
        ([-1.1, -1.0, -0.9], "falls"),
        ([-0.1, 0.0, 0.1], "flat"),
        ([0.5, 2.0, -0.4], "flat"),
        ([1.0], "undetermined"),
    ],
)
def test_verdict_on_constructed_cells(slopes, expected):
    row = width_trend(constructed(slopes), cell=[]).iloc[0]
    assert row["trend"] == expected
    assert row["slope"] == pytest.approx(np.mean(slopes))
    if len(slopes) > 1:
        half = scipy_stats.t.ppf(0.975, len(slopes) - 1) * np.std(slopes, ddof=1) / math.sqrt(len(slopes))
        assert row["slope_hi"] - row["slope"] == pytest.approx(half)


def test_magnitude_at_the_widest_width():
    # d = 0.5 (w / 32)^b at the widest width 128 is 0.5 * 4^b per seed; geometric mean 0.5 * 4^mean(b).
    row = width_trend(constructed([0.9, 1.0, 1.1]), cell=[]).iloc[0]
    assert row["widest"] == 128 and row["seeds_at_widest"] == 3
    assert row["d_align_widest"] == pytest.approx(2.0)
    assert row["magnitude_reached"] and row["magnitude_clear"]
    low = width_trend(constructed([-1.0, -1.0, -1.0]), cell=[]).iloc[0]
    assert low["d_align_widest"] == pytest.approx(0.125) and not low["magnitude_reached"]


def test_the_verdict_works_on_the_matched_loss_table():
    # Three seeds, two widths; along training the loss falls and so does d_align, log-linearly in
    # loss, so interpolation is exact. The wide model reaches each loss earlier and has
    # 2 (1 + 0.1 seed) times the narrow one's d_align there: per-seed slope log(2 (1 + 0.1 s)) / log 2.
    rows = []
    for seed in range(3):
        for width, factor in ((32, 1.0), (64, 2.0 * (1 + 0.1 * seed))):
            losses = np.array([3.0, 2.6, 2.2, 2.0]) - (0.1 if width == 64 else 0.0) + 0.01 * seed
            rows.append(curve(width, seed, losses, factor * np.exp(-3.0 * (3.0 - losses))))
    table = pd.concat(rows, ignore_index=True)
    matched = matched_loss(table, common_loss_grid(table, count=3))
    assert matched["reached"].all()
    expected = np.log(2.0 * (1 + 0.1 * np.arange(3))) / np.log(2.0)
    slopes = width_slopes(matched, progress="test_loss")
    for _, per_level in slopes.groupby("test_loss"):
        assert per_level.sort_values("seed")["slope"].to_numpy() == pytest.approx(expected)
    trend = width_trend(matched, progress="test_loss")
    assert len(trend) == 3 and set(trend["trend"]) == {"rises"}
    assert trend["slope"].to_numpy() == pytest.approx(expected.mean())


def test_summary_counts_cells():
    cells = pd.concat(
        [
            constructed([0.9, 1.0, 1.1], step=50),
            constructed([-1.1, -1.0, -0.9], step=150),
            constructed([-0.1, 0.0, 0.1], step=600),
            constructed([1.0], step=900),
        ]
    )
    trend = width_trend(cells, cell=[])
    summary = regime_summary(trend)
    assert (summary["cells"], summary["rises"], summary["falls"], summary["flat"], summary["undetermined"]) == (
        4,
        1,
        1,
        1,
        1,
    )
    # Widest-width geometric means: 2.0 (step 50), 0.125, 0.5, 2.0 (step 900, one seed: no interval).
    assert summary["magnitude"] == 2 and summary["magnitude_clear"] == 1
    assert summary["magnitude_cells"] == ["step=50", "step=900"]
    assert "rises with width in 1 of 3 judged cells" in summary["this_run"]


def test_bad_arguments_are_refused_with_a_message():
    with pytest.raises(ValueError, match="confidence level"):
        width_trend(constructed([1.0, 1.1]), level=95, cell=[])
    with pytest.raises(ValueError, match="keyed by"):
        matched_loss(TABLE, pd.DataFrame({"optimizer": ["adam"], "test_loss": [2.5]}))
    with pytest.raises(ValueError, match="two rows at one step"):
        matched_loss(pd.concat([TABLE, TABLE.assign(point="block0")]), [2.5], curve=["width", "seed"])


def test_a_bonferroni_level_on_two_far_apart_seeds_gives_an_infinite_end_not_an_error():
    """At 1 − 0.05/m with 2 seeds (t quantile in the thousands) the widest-width interval's log end passes
    float range (the default run's first cut raised OverflowError): it is +inf."""
    rows = [
        {
            "family": "llama",
            "dataset": "shakespeare",
            "depth": 1,
            "reduction": "sum_positions",
            "point": "block1",
            "pool": "test",
            "step": 10,
            "seed": seed,
            "width": width,
            "d_align": value,
        }
        for seed, values in ((0, (1e-3, 2e-3)), (1, (1e2, 5e2)))
        for width, value in zip((16, 32), values)
    ]
    trend = width_trend(pd.DataFrame(rows), "step", level=1 - 0.05 / 40)
    assert trend["d_align_widest_hi"].iloc[0] == np.inf and trend["d_align_widest_lo"].iloc[0] >= 0
