"""The seed-level statistics under the verdict rule (growcert.stats.seeds, growcert.referee.verdicts) against brute
force and closed forms; the rule itself on hand-built seed tables is tests/test_referee_rule.py."""

import math
from itertools import product

import numpy as np
import pytest
from scipy import stats as scipy_stats

from growcert.referee.effect import Effect
from growcert.referee.verdicts import (
    CONTRADICTED,
    NOT_TESTED,
    REPRODUCED,
    UNRESOLVED,
    judge_samples,
    judge_steps,
    percent,
    step_bounds,
)
from growcert.stats.seeds import median_interval, median_interval_seeds, paired_log_ratios, seeds_for_power, t_power

SPEEDUP = Effect("steps ratio (baseline / variant)", paper=2.4, null=1.0, scale="log")
SLOPE = Effect("slope of log d_align on log width", paper=0.50, null=0.0)


def test_a_tight_2_4x_speed_up_is_reproduced():
    judgement = judge_steps(SPEEDUP, [2400, 2450, 2380], [1000, 1010, 990], level=0.95, cap=30_000, eval_every=10)
    assert judgement.verdict == REPRODUCED and judgement.seeds == 3
    assert judgement.low < 2.42 < judgement.high and judgement.low > 2.2


def test_step_bounds_are_the_evaluation_interval_and_the_cap():
    bounds = step_bounds([300, None], [100, 200], cap=1000, eval_every=100)
    # reached at 300: in (200, 300]; censored: (1000, inf); variant 100 in (1, 100] (at least one step), 200 in (100,
    # 200]
    assert np.exp(bounds.lower).tolist() == pytest.approx([200 / 100, 1000 / 200])
    assert np.exp(bounds.upper).tolist() == pytest.approx([300 / 1, math.inf])
    assert np.exp(bounds.point).tolist() == pytest.approx([3.0, math.inf])


def test_censored_runs_enter_as_bounds_never_as_the_cap():
    ratios = paired_log_ratios([3000, 3100, 2900, 3000, 3050, 2950, 3000], [1000, None, 1000, 1010, 990, 1000, 1005])
    assert ratios[1] == -math.inf and np.isfinite(np.delete(ratios, 1)).all()
    judgement = judge_steps(
        SPEEDUP,
        [3000, 3100, 2900, 3000, 3050, 2950, 3000],
        [1000, None, 1000, 1010, 990, 1000, 1005],
        level=0.95,
        cap=4000,
        eval_every=10,
    )
    assert "1 of 7 variant runs at the 4,000-step cap" in judgement.why
    # at 7 seeds the 95 % median interval is [x_(1), x_(7)] of the bounds: the censored seed's lower bound is 0
    assert judgement.low == 0.0 and judgement.verdict == UNRESOLVED
    # both censored in one seed: that seed says nothing about the ratio
    assert math.isnan(paired_log_ratios([None], [None])[0])


@pytest.mark.parametrize("level", [0.5, 0.75, 0.9, 0.95, 0.99, 1 - 0.05 / 6])
def test_median_interval_seeds_is_the_fewest_samples_with_a_bounded_interval(level):
    bounded = [n for n in range(1, 14) if np.isfinite(median_interval(np.arange(n, dtype=float), level)[1:]).all()]
    assert bounded == list(range(median_interval_seeds(level), 14))


def test_a_slope_interval_wholly_below_0_is_contradicted():
    judgement = judge_samples(SLOPE, [-0.5, -0.6, -0.55], level=0.95)
    assert judgement.verdict == CONTRADICTED and judgement.high < 0


def test_one_seed_is_not_tested():
    assert judge_samples(SLOPE, [0.6], level=0.95).verdict == NOT_TESTED


def test_equivalence_margin():
    grown_minus_scratch = Effect("relative excess loss", paper=0.0, margin=0.01)
    assert judge_samples(grown_minus_scratch, [0.001, -0.002, 0.0, 0.001], 0.95).verdict == REPRODUCED
    assert judge_samples(grown_minus_scratch, [0.05, 0.06, 0.055], 0.95).verdict == CONTRADICTED
    assert judge_samples(grown_minus_scratch, [0.03, -0.02, 0.0], 0.95).verdict == UNRESOLVED


@pytest.mark.parametrize("n", [3, 5, 6, 7, 10, 13])
def test_median_interval_is_the_shortest_order_statistic_interval_with_its_coverage(n):
    values = np.arange(n, dtype=float)
    _, low, high = median_interval(values, 0.95)

    def coverage(k):  # P(x_(k) <= median <= x_(n-k+1)) by enumerating the signs of n samples
        hits = sum(k <= sum(signs) <= n - k for signs in product((0, 1), repeat=n))
        return hits / 2**n

    ks = [k for k in range(1, n // 2 + 1) if coverage(k) >= 0.95]
    if not ks:
        assert (low, high) == (-math.inf, math.inf)
    else:
        assert (low, high) == (values[max(ks) - 1], values[n - max(ks)])


@pytest.mark.parametrize(
    "mean, spread, boundary, seeds", [(0.4, 0.2, 0.25, 8), (0.1, 0.3, 0.25, 12), (1.0, 1.0, 0.0, 5)]
)
def test_t_power_is_the_share_of_simulated_t_intervals_clear_of_the_boundary(mean, spread, boundary, seeds):
    rng = np.random.default_rng(7)
    draws = 20_000
    samples = rng.normal(mean, spread, (draws, seeds))
    centre, se = samples.mean(axis=1), samples.std(axis=1, ddof=1) / math.sqrt(seeds)
    half = scipy_stats.t.ppf(0.975, seeds - 1) * se
    clear = (centre - half > boundary) if mean > boundary else (centre + half < boundary)
    simulated = clear.mean()
    assert abs(t_power(mean, spread, boundary, seeds, 0.95) - simulated) < 4 * math.sqrt(
        simulated * (1 - simulated) / draws
    )


def test_seeds_for_power_is_the_first_count_that_reaches_the_target_or_more_than_the_limit():
    power = lambda n: 1 - 1 / n  # noqa: E731 (reaches 0.8 at n = 5)
    assert seeds_for_power(power, 2) == (5, False) and seeds_for_power(power, 7) == (7, False)
    assert seeds_for_power(lambda n: 0.1, 2, limit=64) == (64, True)
    brute = next(n for n in range(3, 10_000) if t_power(0.4, 0.3, 0.25, n, 0.95) >= 0.8)
    assert seeds_for_power(lambda n: t_power(0.4, 0.3, 0.25, n, 0.95), 3) == (brute, False)


def test_levels_are_printed_with_the_digits_they_need():
    assert percent(0.95) == "95 %" and percent(1 - 0.05 / 6) == "99.17 %"
    assert percent(0.9979) == "99.79 %" and percent(0.99999) == "99.999 %"


def normal_cells(p_hat, p_se, bound, bound_se):
    """judge_bound's inputs for cells whose p and B estimates are normal with the given standard errors."""
    p_hat, p_se, bound, bound_se = (np.asarray(v, float) for v in (p_hat, p_se, bound, bound_se))

    def around(value, se):
        return lambda levels: (
            value - scipy_stats.norm.ppf(0.5 + levels / 2) * se,
            value + scipy_stats.norm.ppf(0.5 + levels / 2) * se,
        )

    return p_hat, bound, around(p_hat, p_se), around(bound, bound_se)


def test_a_bound_is_judged_with_both_errors_in_every_cell():
    """p̂ ≤ B_exact at the point estimate in every cell is not enough when B_exact's own interval
    is wide (the old rule said reproduced); clearly below in every cell reproduces, clearly above contradicts."""
    from growcert.referee.bounds import judge_bound

    cells = 3
    wide = judge_bound(*normal_cells([0.05] * cells, [0.005] * cells, [0.2] * cells, [0.2] * cells), 0.95, seeds=3)
    assert wide.verdict == UNRESOLVED and wide.estimate == 0.0
    below = judge_bound(*normal_cells([0.05] * cells, [0.005] * cells, [0.2] * cells, [0.01] * cells), 0.95, seeds=3)
    assert below.verdict == REPRODUCED and below.estimate == 1.0 and "all 3 non-vacuous cells" in below.why
    above = judge_bound(
        *normal_cells([0.4, 0.05, 0.05], [0.01] * cells, [0.1, 0.2, 0.2], [0.01] * cells), 0.95, seeds=3
    )
    assert above.verdict == CONTRADICTED and "in 1 of 3 non-vacuous cells" in above.why
    # B_exact ≥ ½ says nothing: not tested when every cell is vacuous, left out of the family otherwise
    vacuous = judge_bound(*normal_cells([0.05] * 2, [0.005] * 2, [0.6, 0.9], [0.01] * 2), 0.95, seeds=3)
    assert vacuous.verdict == NOT_TESTED and "vacuous" in vacuous.why
    mixed = judge_bound(*normal_cells([0.05, 0.05], [0.005] * 2, [0.2, 0.6], [0.01, 0.5]), 0.95, seeds=3)
    assert mixed.verdict == REPRODUCED and "1 of 2 cells have a vacuous B_exact" in mixed.why


@pytest.mark.parametrize("cells, word", [(4, CONTRADICTED), (20, UNRESOLVED)])
def test_a_cell_above_its_bound_contradicts_at_its_holm_level(cells, word):
    """With normal errors, a cell's p-value for p > B is 2(1 − Φ((p̂ − B)/(se_p + se_B))) (its two intervals at
    1 − a just separate). A cell at p-value 0.01 among m non-vacuous cells contradicts the universal claim exactly
    when 0.01 ≤ 0.05/m (Holm's first step): with 4 cells (0.0125) it does, with 20 (0.0025) it does not, and then
    the claim is unresolved (the other cells' p ≤ B is shown)."""
    from growcert.referee.bounds import judge_bound

    gap = scipy_stats.norm.ppf(1 - 0.01 / 2) * (0.01 + 0.02)  # p̂ − B for a p-value of 0.01
    p_hat, bound = [0.2 + gap] + [0.01] * (cells - 1), [0.2] * cells
    judgement = judge_bound(*normal_cells(p_hat, [0.01] * cells, bound, [0.02] * cells), 0.95, seeds=3)
    assert judgement.verdict == word
    # the same cell alone: at 0.01 ≤ 0.05 it contradicts
    alone = judge_bound(*normal_cells(p_hat[:1], [0.01], bound[:1], [0.02]), 0.95, seeds=3)
    assert alone.verdict == CONTRADICTED
