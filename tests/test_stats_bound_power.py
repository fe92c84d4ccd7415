"""The pool size a P1 bound cell needs (growcert.stats.bound_power), against a Monte Carlo of the claim's own test
(referee.bounds.judge_bound with the judge's intervals) on simulated cells, with tolerances from the Monte Carlo
standard error; and the scalings it rests on."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from growcert.referee.bounds import judge_bound
from growcert.stats import alignment_row
from growcert.stats.bound_power import BoundCell, effective_trials, pool_size_for_power, shown_probability
from growcert.stats.certificates import b_exact_interval
from growcert.stats.intervals import disjoint_draw_count, misalignment_interval

LEVEL = 0.95
SIMULATED_CELLS = 6_000
# A cell like p1-seeds' (M = K = 8 and 32): moments of order 1e-1, errors a tenth of them at 512 examples, far from 0
# at the sizes tested, so the judge's clipping at 0 (which the closed form leaves out) does not act.
MODERATE = dict(
    mu_4=0.19, mu_sigma_mu=0.078, tr_sigma2=0.13, mu_4_se=0.022, mu_sigma_mu_se=0.0097, tr_sigma2_se=0.016, pool=512
)


def simulated_fraction_shown(cell: BoundCell, n: int, replicates: float, correlation: str, seed: int = 0):
    """(fraction shown, its standard error) over simulated runs of the cell at pool size n, each judged by
    judge_bound: p̂ the frequency over ⌈T⌉ trials of misalignment probability p, the moments normal about the cell's
    values with errors scaled by √(pool/n) (independent, or driven by one normal in the harmful direction)."""
    rng = np.random.default_rng(seed)
    trials = effective_trials(n, cell.M, cell.K, replicates, cell.mode)
    whole = math.ceil(trials)
    p_hat = rng.binomial(whole, cell.p, SIMULATED_CELLS) / whole
    scale = math.sqrt(cell.pool / n)
    errors = {
        "mu_4": cell.mu_4_se * scale,
        "mu_sigma_mu": cell.mu_sigma_mu_se * scale,
        "tr_sigma2": cell.tr_sigma2_se * scale,
    }
    if correlation == "independent":
        draws = {name: rng.standard_normal(SIMULATED_CELLS) for name in errors}
    else:  # ‖μ‖⁴ up while μᵀΣμ and tr Σ² go down: every move lowers B's lower end
        common = rng.standard_normal(SIMULATED_CELLS)
        draws = {"mu_4": common, "mu_sigma_mu": -common, "tr_sigma2": -common}
    table = pd.DataFrame(
        {name: getattr(cell, name) + errors[name] * draws[name] for name in errors}
        | {f"{name}_se_jack": errors[name] for name in errors}
    )
    b_hat = b_exact_interval(table, cell.M, cell.K, 0.0)[0]  # the corners at level 0: the point estimate
    pool_draws = (
        disjoint_draw_count(cell.M, cell.K, n) if cell.mode == "iid" else disjoint_draw_count(cell.M, cell.K, n, n)
    )
    assert (b_hat < 0.5).all(), "every simulated cell must be non-vacuous for the fraction shown to be the power"
    judgement = judge_bound(
        p_hat,
        b_hat,
        lambda at: misalignment_interval(p_hat, np.full(len(at), replicates), pool_draws, at),
        lambda at: b_exact_interval(table, cell.M, cell.K, at),
        LEVEL,
        seeds=1,
    )
    fraction = judgement.estimate
    return fraction, math.sqrt(max(fraction * (1 - fraction), 1.0 / SIMULATED_CELLS) / SIMULATED_CELLS)


@pytest.mark.parametrize(
    "p, M, n, mode, correlation",
    [
        (0.0, 8, 1_024, "iid", "independent"),
        (0.0, 8, 1_024, "iid", "worst"),
        (0.05, 8, 3_072, "iid", "independent"),
        (0.05, 8, 3_072, "train_test", "worst"),
        (0.0, 32, 10_560, "iid", "independent"),
    ],
)
def test_shown_probability_matches_a_simulation_of_the_judge(p, M, n, mode, correlation):
    cell = BoundCell(p=p, M=M, K=M, mode=mode, **MODERATE)
    expected = shown_probability(cell, n, 20_000, LEVEL, correlation)
    observed, error = simulated_fraction_shown(cell, n, 20_000, correlation)
    assert 0.05 < expected < 0.995, "a case on the slope of the power curve tests the formula"
    assert abs(observed - expected) <= 4 * error, (observed, expected, error)


def test_pool_size_for_power_reaches_the_target_and_no_smaller_step_does():
    cell = BoundCell(p=0.02, M=8, K=8, **MODERATE)
    n, more = pool_size_for_power(cell, 20_000, LEVEL, correlation="independent")
    assert not more
    assert shown_probability(cell, n, 20_000, LEVEL, "independent") >= 0.8
    assert shown_probability(cell, n - 16, 20_000, LEVEL, "independent") < 0.8
    observed, error = simulated_fraction_shown(cell, n, 20_000, "independent", seed=1)
    assert observed >= 0.8 - 4 * error


def test_the_worst_correlation_never_asks_for_a_smaller_pool():
    cell = BoundCell(p=0.0, M=32, K=32, **MODERATE)
    assert (
        pool_size_for_power(cell, 20_000, LEVEL, correlation="worst")[0]
        >= pool_size_for_power(cell, 20_000, LEVEL, correlation="independent")[0]
    )


def test_a_pool_too_small_for_one_draw_has_no_power_and_an_unreachable_target_says_more():
    cell = BoundCell(p=0.3, M=128, K=128, **MODERATE)
    assert shown_probability(cell, 200, 1_000, LEVEL) == 0.0
    assert pool_size_for_power(cell, 1_000, LEVEL, limit=10_000) == (9_984, True)


def test_effective_trials_count_the_disjoint_draws_and_the_replicates():
    assert effective_trials(512, 32, 32, math.inf) == 8  # ⌊512/64⌋
    assert effective_trials(512, 32, 32, 300) == pytest.approx(1 / (1 / 300 + 1 / 8))
    assert effective_trials(512, 32, 32, math.inf, "train_test") == 16  # min(⌊512/32⌋, ⌊512/32⌋)
    assert effective_trials(512, 32, 32, math.inf, "train_test", train_pool=128) == 4
    # the replicates cap T: a design sets R ≫ k so that T grows with the pool
    assert effective_trials(100_000, 8, 8, 300) < 300


def test_the_moments_jackknife_errors_fall_as_one_over_root_n():
    """The scaling shown_probability assumes: quadrupling the pool halves each moment's jackknife standard error
    (Gaussian rows with a strong mean, where the 1/n term of the U-statistics' variance dominates). Averaged over
    repetitions; the tolerance is 4 standard errors of the mean ratio."""
    rng = np.random.default_rng(3)
    mean = np.full(6, 0.5)

    def errors(n):
        row = alignment_row(rng.standard_normal((n, 6)) + mean)
        return np.array([row[f"{name}_se_jack"] for name in ("mu_4", "mu_sigma_mu", "tr_sigma2")])

    ratios = np.array([errors(400) / errors(1_600) for _ in range(12)])
    centre, spread = ratios.mean(axis=0), ratios.std(axis=0, ddof=1) / math.sqrt(len(ratios))
    assert (np.abs(centre - 2.0) <= 4 * spread + 0.05).all(), (centre, spread)
