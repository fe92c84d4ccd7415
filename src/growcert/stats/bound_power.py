"""The held-out pool size at which a P1 bound cell shows p ≤ B_exact with a given power (docs/science.md,
"Verdicts", bounds: the pool a cell needs).

`referee.bounds.judge_bound` shows p ≤ B_exact in a cell when the upper end of p's interval
(`stats.intervals.misalignment_interval`) is at or below the lower end of B_exact's
(`stats.certificates.b_exact_interval`), each two-sided at the claim's per-cell level. How each end moves with the
pool size n:

- p's interval is the score interval at T = 1/(1/R + 1/k) effective trials, k the disjoint (M, K) draws the pool
  holds (`disjoint_draw_count`: ⌊n/(M + K)⌋ iid; min(⌊n_train/M⌋, ⌊n/K⌋) train → test, here with n_train = n).
  The replicates R are a setting, not tied to n, so T grows with n only while k ≪ R: a run sized for the bound
  sets R ≫ k, and then T ≈ k ∝ n. At p̂ = 0 the upper end is z²/(T + z²) ∝ 1/n; at p̂ > 0 its distance from p̂
  falls as 1/√n.
- B_exact's interval runs between corners of the box estimate ± z·se of its three moments (‖μ‖⁴, μᵀΣμ, tr Σ²),
  each an unbiased U-statistic of degree ≤ 4 whose variance is c₁/n + O(1/n²) (Hoeffding), so se ∝ 1/√n to first
  order and falls faster where the 1/n term vanishes (μ ≈ 0). Scaling a committed se by √(n_ref/n) therefore never
  understates it at n > n_ref.

`shown_probability` takes a cell's point estimates as the truth and gives the probability that the cell shows
p ≤ B at pool size n. With X the misalignments among ⌈T⌉ trials, X ~ Binomial(⌈T⌉, p) (p̂ = X/⌈T⌉ has the variance
p(1 − p)/T that the judge's interval assumes, up to the rounding of T), and c(x) p's upper end at p̂ = x/⌈T⌉:

    P(shown) = Σ_x P(X = x) · P(b_low ≥ c(x)).

With a = 1/M + 1/K, b = 1/(MK) and box quantile z_B, b_low ≥ c is, for the unclipped ends,

    L = (1 − c)·[a(μᵀΣμ̂ − z_B se_msm) + b(trΣ²̂ − z_B se_tr)] − c·(‖μ‖⁴̂ + z_B se_4) ≥ 0,

linear in the three normal estimates, so P(L ≥ 0) = Φ(E[L]/sd(L)). The judge clips each moment's end at 0, which
can only raise b_low, so this is a lower bound on the power. The moments' covariances are not kept in the tables:
`correlation="worst"` takes sd(L) as the sum of the terms' sds (perfect correlation in the harmful direction, never
optimistic where E[L] > 0), "independent" their root sum of squares. The moment estimates and p̂ are taken as
independent; the judge's own test is valid whatever their dependence.

`pool_size_for_power` is the smallest n at which that probability reaches the target (80 %, `seeds.POWER`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from growcert.stats.certificates import moment_box_quantile, variance_weights
from growcert.stats.intervals import disjoint_draw_count, score_interval
from growcert.stats.seeds import POWER, seeds_for_power

IID, TRAIN_TEST = "iid", "train_test"
CORRELATIONS = ("worst", "independent")
MAX_POOL = 10**8  # beyond this, "more than": no pool would do


@dataclass(frozen=True)
class BoundCell:
    """One cell's point estimates (taken as the truth) and its moments' standard errors at pool size `pool`:
    p the misalignment probability; mu_4, mu_sigma_mu, tr_sigma2 the held-out moments with their jackknife
    standard errors; M and K the sizes of the two draws; mode iid or train_test."""

    p: float
    mu_4: float
    mu_sigma_mu: float
    tr_sigma2: float
    mu_4_se: float
    mu_sigma_mu_se: float
    tr_sigma2_se: float
    pool: int
    M: int
    K: int
    mode: str = IID
    train_pool: int | None = None  # train → test: a fixed training pool; None: as large as the held-out one

    def __post_init__(self):
        if self.mode not in (IID, TRAIN_TEST):
            raise ValueError(f"mode {self.mode!r}: one of {IID}, {TRAIN_TEST}")


def effective_trials(
    n: int, M: int, K: int, replicates: float, mode: str = IID, train_pool: int | None = None
) -> float:
    """T = 1/(1/R + 1/k): the trials p's interval counts at held-out pool size n (train → test: a training pool of
    `train_pool`, or of n when None); 0 when the pools hold no disjoint draw. `replicates` may be math.inf (T = k)."""
    draws = int(
        disjoint_draw_count(M, K, n)
        if mode == IID
        else disjoint_draw_count(M, K, n if train_pool is None else train_pool, n)
    )
    if draws < 1:
        return 0.0
    return 1.0 / (1.0 / replicates + 1.0 / draws)


def bound_lower_probability(cell: BoundCell, n: int, thresholds, level: float, correlation: str = "worst"):
    """P(b_low ≥ c) at pool size n for each threshold c (elementwise), the moments' estimates normal about the
    cell's values with standard errors scaled by √(pool/n); unclipped ends, so a lower bound (module docstring)."""
    if correlation not in CORRELATIONS:
        raise ValueError(f"correlation {correlation!r}: one of {', '.join(CORRELATIONS)}")
    c = np.asarray(thresholds, float)
    scale = math.sqrt(cell.pool / n)
    se_4, se_msm, se_tr = (cell.mu_4_se * scale, cell.mu_sigma_mu_se * scale, cell.tr_sigma2_se * scale)
    directional, energy = (float(w) for w in variance_weights(cell.M, cell.K))
    z = float(moment_box_quantile(level))
    mean = (1 - c) * (directional * (cell.mu_sigma_mu - z * se_msm) + energy * (cell.tr_sigma2 - z * se_tr)) - c * (
        cell.mu_4 + z * se_4
    )
    terms = ((1 - c) * directional * se_msm, (1 - c) * energy * se_tr, c * se_4)
    spread = sum(terms) if correlation == "worst" else np.sqrt(sum(t * t for t in terms))
    with np.errstate(divide="ignore", invalid="ignore"):
        probability = scipy_stats.norm.cdf(mean / spread)
    # no spread: the event is certain or impossible; c ≥ 1 can never be met by b_low < 1
    probability = np.where(spread > 0, probability, (mean >= 0).astype(float))
    return np.where(c < 1, probability, 0.0)


def shown_probability(cell: BoundCell, n: int, replicates: float, level: float, correlation: str = "worst") -> float:
    """The probability that the cell shows p ≤ B_exact at pool size n (module docstring), R = `replicates`."""
    trials = effective_trials(n, cell.M, cell.K, replicates, cell.mode, cell.train_pool)
    if trials <= 0:
        return 0.0
    whole = max(1, math.ceil(trials))
    binomial = scipy_stats.binom(whole, min(max(cell.p, 0.0), 1.0))
    low, high = (int(binomial.ppf(q)) for q in (1e-12, 1 - 1e-12))  # the mass outside is below 2e-12
    counts = np.arange(max(low - 1, 0), min(high + 1, whole) + 1)
    _, p_high = score_interval(counts / whole, trials, level)
    return float(np.sum(binomial.pmf(counts) * bound_lower_probability(cell, n, p_high, level, correlation)))


def pool_size_for_power(
    cell: BoundCell,
    replicates: float,
    level: float,
    target: float = POWER,
    correlation: str = "worst",
    limit: int = MAX_POOL,
) -> tuple[int, bool]:
    """(n, more): the smallest pool size n (in steps of M + K, where the draws k change in the iid mode) at which
    `shown_probability` reaches `target`; (limit, True) when even `limit` falls short. Power rises with n up to
    the floor in k, so the doubling-then-bisection search of `seeds_for_power` applies to the steps."""
    step = cell.M + cell.K if cell.mode == IID else max(cell.M, cell.K)
    steps, more = seeds_for_power(
        lambda s: shown_probability(cell, s * step, replicates, level, correlation),
        start=1,
        limit=max(1, limit // step),
        target=target,
    )
    return steps * step, more
