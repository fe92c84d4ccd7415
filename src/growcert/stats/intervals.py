"""Uncertainty for the effective dimensions and the empirical misalignment (docs/science.md,
"Intervals: delete-one jackknife + Fieller").

Ratios d_∥ = ‖μ‖⁴/μᵀΣμ and d_2 = ‖μ‖⁴/tr(Σ²) (P1) get
**delete-one jackknife + Fieller** intervals:

- Jackknife, not bootstrap.  Every estimate is a function of seven power sums,
  and removing one example changes them by closed-form per-example terms
  (moments.leave_one_out), so all n leave-one-out estimates cost one extra
  pass over the store and O(n) memory, deterministically (no seed).  A
  bootstrap reweights examples, which needs Σ_ij w_i w_j G_ij² for every
  replicate: either the n×n Gram matrix (not available on the N×N path, where
  n ≥ N can be huge) or one pass over the store per replicate.  The delete-one
  jackknife variance is consistent for U-statistics (Arvesen 1969) and, unlike
  a delete-a-block jackknife with ~20 blocks, its variance estimate is not a
  19-degree-of-freedom quantity.
- Fieller, not "estimate ± z·se" on the ratio.  Given jackknife (co)variances
  of numerator A and denominator B, the set {r : (A − rB)² ≤ z² Var(A − rB)}
  is bounded exactly when B is significantly nonzero; otherwise it reaches
  infinity: "its interval reaches infinity" when a
  denominator estimate is not clearly positive.  The population ratios are
  non-negative, so the reported interval is the hull of that set within [0, ∞].
- d_align = min(d_∥, d_2) is monotone in both, so [min(lo_∥, lo_2), min(hi_∥, hi_2)]
  built from intervals at level 1 − α/2 each (Bonferroni) covers it at ≥ 1 − α.

Misalignment frequencies get Wilson score intervals: `wilson_interval` for the resampling error alone (p̂ as an
estimate of the pool's own misalignment frequency), `misalignment_interval` for p̂ as an estimate of the
population's misalignment probability, which adds the error of the pool's finite size.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from growcert.stats.accumulate import PerExample, PowerSums
from growcert.stats.moments import leave_one_out, unbiased_moments


def normal_quantile(level: float) -> float:
    """Two-sided standard-normal quantile: 1.96 for level 0.95."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1); got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def normal_quantiles(levels) -> np.ndarray:
    """`normal_quantile` elementwise over an array of levels."""
    return np.vectorize(normal_quantile, otypes=[float])(np.asarray(levels, float))


def wilson_interval(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (good near 0 and 1, unlike Wald)."""
    if trials <= 0:
        raise ValueError("a Wilson interval needs at least one trial")
    low, high = score_interval(successes / trials, trials, level)
    return float(low), float(high)


def score_interval(proportion, trials, level=0.95) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval, elementwise over arrays: the p with |proportion − p| ≤ z·√(p(1 − p)/trials), z the
    two-sided normal quantile of `level`. `trials` may be an effective count (a float): the number of independent
    Bernoulli trials whose mean has the variance the estimate has at most."""
    p, n = np.asarray(proportion, float), np.asarray(trials, float)
    z = normal_quantiles(level)
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)


def disjoint_draw_count(M, K, n_first, n_second=None):
    """How many disjoint draws of M and K examples a pool holds: ⌊n/(M + K)⌋ from one pool of n (the iid mode), or
    min(⌊n_first/M⌋, ⌊n_second/K⌋) from two (train → test). Elementwise over arrays."""
    M, K, n_first = (np.asarray(v) for v in (M, K, n_first))
    if n_second is None:
        return n_first // (M + K)
    return np.minimum(n_first // M, np.asarray(n_second) // K)


def misalignment_interval(p_hat, replicates, draws, level=0.95) -> tuple[np.ndarray, np.ndarray]:
    """An interval for the population misalignment probability p = P(μ_M·g_K ≤ 0) from p̂, the frequency over
    `replicates` random draws of M and K examples from a fixed pool that holds `draws` disjoint ones
    (`disjoint_draw_count`): the score interval (`score_interval`) at the effective trials 1/(1/replicates + 1/draws).

    Why: the replicates re-use one pool, so p̂ estimates U, the pool's own frequency over every possible draw (a
    U-statistic of the pool with the kernel h = 1[μ_M·g_K ≤ 0]), and U estimates p. Then
    Var(p̂ − p) = Var(U) + E[U(1 − U)]/R. Hoeffding (1963, §5) writes U as an average, over orderings of the pool,
    of means of k = `draws` independent kernel values, so Var(U) ≤ Var(h)/k = p(1 − p)/k; and
    E[U(1 − U)] = p − E[U²] ≤ p(1 − p). So Var(p̂ − p) ≤ p(1 − p)(1/k + 1/R): at most the variance of a frequency
    over 1/(1/k + 1/R) independent trials, which the score interval inverts (normal approximation). The
    Wilson interval over R alone (`wilson_interval`) covers U only: with R ≫ k it claims the precision of R
    fresh pools from one. NaN where there are no draws."""
    replicates, draws = np.asarray(replicates, float), np.asarray(draws, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        trials = np.where((replicates > 0) & (draws > 0), 1.0 / (1.0 / replicates + 1.0 / draws), np.nan)
    return score_interval(p_hat, trials, level)


def jackknife_covariance(loo: np.ndarray) -> np.ndarray:
    """Jackknife covariance of estimators from their leave-one-out values, shape (n, k) -> (k, k).

    (n − 1)/n Σ_i (θ_(i) − θ̄)(θ_(i) − θ̄)ᵀ.
    """
    n = loo.shape[0]
    centred = loo - loo.mean(axis=0)
    return (n - 1) / n * (centred.T @ centred)


def fieller_interval(
    a: float, b: float, var_a: float, var_b: float, cov_ab: float, level: float = 0.95
) -> tuple[float, float]:
    """Fieller confidence set for a/b, as its hull within [0, ∞] (hi = inf when unbounded).

    Solves q(r) = (b² − z²v_b) r² − 2(ab − z²c) r + (a² − z²v_a) ≤ 0.  Returns
    (nan, nan) when the set holds no non-negative ratio (the estimates
    contradict a non-negative population ratio).
    """
    z2 = normal_quantile(level) ** 2
    qa = b * b - z2 * var_b
    qb = a * b - z2 * cov_ab
    qc = a * a - z2 * var_a
    disc = qb * qb - qa * qc
    if qa > 0:  # denominator significantly nonzero: a bounded interval
        root = math.sqrt(max(disc, 0.0))
        lo, hi = (qb - root) / qa, (qb + root) / qa
        if hi < 0:
            return math.nan, math.nan
        return max(lo, 0.0), hi
    if disc <= 0:  # q(r) ≤ 0 for every r: nothing is excluded
        return 0.0, math.inf
    if qa == 0:  # linear: -2 qb r + qc ≤ 0
        if qb == 0:
            return (0.0, math.inf) if qc <= 0 else (math.nan, math.nan)
        edge = qc / (2 * qb)
        return (max(edge, 0.0), math.inf) if qb > 0 else ((0.0, edge) if edge >= 0 else (math.nan, math.nan))
    # qa < 0: the set is (−∞, r_small] ∪ [r_big, ∞); its hull within [0, ∞]:
    root = math.sqrt(disc)
    r_small, r_big = (qb + root) / qa, (qb - root) / qa
    return (max(r_big, 0.0), math.inf) if r_small < 0 else (0.0, math.inf)


def _floats(pair):
    return float(pair[0]), float(pair[1])


def dimension_intervals(sums: PowerSums, per: PerExample, level: float = 0.95) -> dict[str, float]:
    """Jackknife–Fieller intervals for d_par, d_2 and d_align (keys <name>_lo / <name>_hi).

    Also returns the jackknife standard errors of the four moments (<name>_se_jack).
    Needs n ≥ 5 (each leave-one-out sample must itself have ≥ 4 examples).
    """
    names = ("mu_sq", "mu_4", "mu_sigma_mu", "tr_sigma2")
    if sums.n < 5:
        return {f"{k}_{e}": math.nan for k in ("d_par", "d_2", "d_align") for e in ("lo", "hi")} | {
            f"{k}_se_jack": math.nan for k in names
        }
    full = unbiased_moments(sums)
    loo_moments = unbiased_moments(leave_one_out(sums, per))
    loo = np.column_stack([getattr(loo_moments, k) for k in names])
    cov = jackknife_covariance(loo)
    i_mu4, i_msm, i_tr = 1, 2, 3

    def ratio(den: int, lvl: float) -> tuple[float, float]:
        return _floats(
            fieller_interval(
                float(full.mu_4),
                float(getattr(full, names[den])),
                cov[i_mu4, i_mu4],
                cov[den, den],
                cov[i_mu4, den],
                lvl,
            )
        )

    out: dict[str, float] = {}
    out["d_par_lo"], out["d_par_hi"] = ratio(i_msm, level)
    out["d_2_lo"], out["d_2_hi"] = ratio(i_tr, level)
    bonferroni = 1.0 - (1.0 - level) / 2.0
    (par_lo, par_hi), (two_lo, two_hi) = ratio(i_msm, bonferroni), ratio(i_tr, bonferroni)
    # A NaN side (estimates contradicting a non-negative ratio) leaves the min undetermined.
    out["d_align_lo"] = math.nan if math.isnan(par_lo + two_lo) else min(par_lo, two_lo)
    out["d_align_hi"] = math.nan if math.isnan(par_hi + two_hi) else min(par_hi, two_hi)
    for k, name in enumerate(names):
        out[f"{name}_se_jack"] = float(math.sqrt(max(cov[k, k], 0.0)))
    return out
