"""The verdict rule (growcert.report.verdicts) on hand-built seed tables whose words are known, and the
seed-level statistics under it (growcert.stats.seeds) against brute force."""

import math
from itertools import product

import numpy as np
import pytest
from scipy import stats as scipy_stats

from growcert.report.verdicts import (CONTRADICTED, NOT_TESTED, REPRODUCED, UNRESOLVED, WORDS, Effect,
                                      bonferroni_level, family_judgement, judge_samples, judge_steps)
from growcert.stats.seeds import median_interval, median_interval_seeds, paired_log_ratios, seeds_to_resolve

SPEEDUP = Effect("steps ratio (baseline / variant)", paper=2.4, null=1.0, scale="log")
SLOPE = Effect("slope of log d_align on log width", paper=0.50, null=0.0)
GAIN = Effect("difference in final accuracy", paper=0.075, null=0.0)


def test_a_tight_2_4x_speed_up_is_reproduced():
    judgement = judge_steps(SPEEDUP, [2400, 2450, 2380], [1000, 1010, 990], level=0.95, cap=30_000, eval_every=10)
    assert judgement.verdict == REPRODUCED and judgement.seeds == 3
    assert judgement.low < 2.42 < judgement.high and judgement.low > 2.2


def test_a_speed_up_inside_one_evaluation_interval_is_never_reproduced():
    # 115 against 110 steps, evaluated every 10: the steps are only known to 10
    judgement = judge_steps(SPEEDUP, [115, 115, 115], [110, 110, 110], level=0.95, cap=1000, eval_every=10)
    assert judgement.verdict != REPRODUCED
    # even for a claim of exactly that size, whose interval would otherwise reproduce it
    small = Effect("steps ratio", paper=1.04, null=1.0, scale="log")
    judgement = judge_steps(small, [115, 116, 114], [110, 110.5, 109.5], level=0.95, cap=1000, eval_every=10)
    assert judgement.verdict == UNRESOLVED and "evaluation interval" in judgement.why
    assert judge_steps(small, [115, 116, 114], [110, 110.5, 109.5], 0.95, 1000, eval_every=1).verdict == REPRODUCED


def test_a_baseline_censored_in_most_seeds_is_not_tested_and_says_the_cap():
    judgement = judge_steps(SPEEDUP, [None, math.nan, 9000], [2000, 2100, 1900], level=0.95, cap=15_000,
                            eval_every=100, baseline_name="AdamW wd=0.01")
    assert judgement.verdict == NOT_TESTED and "1 of 3 seeds" in judgement.why and "15,000" in judgement.why


def test_censored_runs_enter_as_censored_never_as_the_cap():
    # one variant seed censored: the order-statistic interval for the median, with that seed at -inf
    ratios = paired_log_ratios([3000, 3100, 2900, 3000, 3050, 2950, 3000], [1000, None, 1000, 1010, 990, 1000, 1005])
    assert ratios[1] == -math.inf and np.isfinite(np.delete(ratios, 1)).all()
    judgement = judge_steps(SPEEDUP, [3000, 3100, 2900, 3000, 3050, 2950, 3000],
                            [1000, None, 1000, 1010, 990, 1000, 1005], level=0.95, cap=4000, eval_every=10)
    assert "1 censored at the 4,000-step cap" in judgement.why
    # at 7 seeds the 95 % median interval is [x_(1), x_(7)] (coverage 98.4 %): the censored seed makes it reach 0
    assert judgement.low == 0.0 and judgement.verdict == UNRESOLVED
    # both censored in one seed: that seed says nothing about the ratio
    assert math.isnan(paired_log_ratios([None], [None])[0])


@pytest.mark.parametrize("level", [0.5, 0.75, 0.9, 0.95, 0.99, 1 - 0.05 / 6])
def test_median_interval_seeds_is_the_fewest_samples_with_a_bounded_interval(level):
    bounded = [n for n in range(1, 14) if np.isfinite(median_interval(np.arange(n, dtype=float), level)[1:]).all()]
    assert bounded == list(range(median_interval_seeds(level), 14))


def test_a_censored_comparison_below_the_bounded_count_asks_for_that_many_seeds():
    # AdamW censored in one of 3 seeds: the 95 % order-statistic interval is (0, inf) whatever the other ratios
    few = judge_steps(SPEEDUP, [8800, None, 9000], [1000, 1200, 900], level=0.95, cap=15_000, eval_every=100)
    assert few.verdict == UNRESOLVED and (few.low, few.high) == (0.0, math.inf)
    assert few.seeds_needed == 6 and "at least 6" in few.why
    # at 6 paired seeds the same kind of data resolves: every ratio is above half the paper's 4.9x
    six = judge_steps(SPEEDUP, [8800, None, 9000, 9500, 8000, 10_000], [1000, 1200, 900, 1100, 1000, 800],
                      level=0.95, cap=15_000, eval_every=100)
    assert six.verdict == REPRODUCED and six.low == pytest.approx(8000 / 1000) and six.seeds_needed is None


def test_a_slope_interval_holding_0_and_the_papers_slope_is_unresolved_with_the_seeds_that_resolve_it():
    slopes = [0.9, -0.3, 0.6]
    judgement = judge_samples(SLOPE, slopes, level=0.95)
    assert judgement.verdict == UNRESOLVED and judgement.low < 0 < 0.5 < judgement.high
    # brute force: the estimate (0.4) is above half the paper's 0.5, so resolving it means excluding 0
    sd, mean = np.std(slopes, ddof=1), np.mean(slopes)
    half = [scipy_stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) for n in range(2, 200)]
    expected = next(n for n, width in zip(range(2, 200), half) if width < mean)
    assert judgement.seeds_needed == expected and f"about {expected} seeds" in judgement.why


def test_a_slope_interval_wholly_below_0_is_contradicted():
    judgement = judge_samples(SLOPE, [-0.5, -0.6, -0.55], level=0.95)
    assert judgement.verdict == CONTRADICTED and judgement.high < 0


def test_one_seed_is_not_tested():
    assert judge_samples(SLOPE, [0.6], level=0.95).verdict == NOT_TESTED


def test_one_variant_of_six_passing_by_chance_does_not_reproduce_the_claim():
    rng = np.random.default_rng(0)
    seeds = 5
    t95, t_corrected = (scipy_stats.t.ppf(0.5 + level / 2, seeds - 1) for level in (0.95, bonferroni_level(0.95, 6)))
    noise = rng.standard_normal(seeds)
    noise = (noise - noise.mean()) / noise.std(ddof=1)  # exactly mean 0, sd 1
    ratio = (t95 + t_corrected) / 2  # mean / se between the two quantiles
    lucky = 0.1 + 0.1 * math.sqrt(seeds) / ratio * noise  # mean 0.1 (above the paper's 0.075), se 0.1 / ratio
    variants = {"lucky": lucky, **{f"null{i}": 0.05 * rng.standard_normal(seeds) for i in range(5)}}

    def judge(level):
        return {name: judge_samples(GAIN, values, level) for name, values in variants.items()}

    assert judge(0.95)["lucky"].verdict == REPRODUCED  # uncorrected, it passes
    name, claim = family_judgement(judge, 0.95, len(variants))
    assert claim.verdict != REPRODUCED and claim.verdict in WORDS and "Bonferroni over 6" in claim.why
    # a variant that is clear after the correction does reproduce the claim
    variants["clear"] = 0.1 + 0.005 * noise
    name, claim = family_judgement(judge, 0.95, len(variants))
    assert (name, claim.verdict) == ("clear", REPRODUCED)


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
        return hits / 2 ** n

    ks = [k for k in range(1, n // 2 + 1) if coverage(k) >= 0.95]
    if not ks:
        assert (low, high) == (-math.inf, math.inf)
    else:
        assert (low, high) == (values[max(ks) - 1], values[n - max(ks)])


def test_seeds_to_resolve_matches_brute_force():
    for spread, distance in ((1.0, 0.5), (0.3, 0.1), (2.0, 3.0)):
        n = seeds_to_resolve(spread, distance, 0.95, seeds=3)
        assert scipy_stats.t.ppf(0.975, n - 1) * spread / math.sqrt(n) < distance
        assert n == 4 or scipy_stats.t.ppf(0.975, n - 2) * spread / math.sqrt(n - 1) >= distance
    assert seeds_to_resolve(1.0, 0.0, 0.95, seeds=3) is None
