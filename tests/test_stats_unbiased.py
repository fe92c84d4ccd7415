"""Monte Carlo validation against closed forms: unbiasedness and P1's exact moments.

Tolerances are derived from the simulation's own standard error (4 SE), never
fixed numbers; the plug-in estimator must fail the very same check.
"""

import numpy as np
import pytest

from growcert.stats import moments, plugin_moments
from growcert.stats.certificates import detectability, misalignment_variance
from growcert.stats.moments import population_moments

FIELDS = ("mu_sq", "mu_4", "mu_sigma_mu", "tr_sigma2")
SE_TOLERANCE = 4.0


def population(dim=4, seed=0):
    rng = np.random.default_rng(seed)
    mean = rng.normal(0.0, 0.6, dim)
    a = rng.standard_normal((dim, dim))
    covariance = a @ a.T / dim + 0.2 * np.eye(dim)  # a full, anisotropic Σ
    return mean, covariance


def gaussian(rng, mean, covariance, size):
    return rng.multivariate_normal(mean, covariance, size=size)


def student_t(rng, mean, covariance, size, dof=5):
    """Multivariate t with `dof` degrees of freedom, scaled so that Cov = covariance exactly."""
    scale = np.linalg.cholesky(covariance * (dof - 2) / dof)
    z = rng.standard_normal(size + (len(mean),)) @ scale.T
    w = rng.chisquare(dof, size=size + (1,)) / dof
    return mean + z / np.sqrt(w)


def skewed(rng, mean, covariance, size):
    """Centred exponentials mixed by a Cholesky factor: mean and Σ exact, strongly skewed."""
    scale = np.linalg.cholesky(covariance)
    e = rng.exponential(1.0, size=size + (len(mean),)) - 1.0
    return mean + e @ scale.T


def simulate(estimator, sampler, n, draws, seed):
    mean, covariance = population()
    rng = np.random.default_rng(seed)
    data = sampler(rng, mean, covariance, (draws, n))
    values = np.array([[float(getattr(estimator(x), f)) for f in FIELDS] for x in data])
    return values, population_moments(mean, covariance)


def z_scores(values, truth):
    se = values.std(axis=0, ddof=1) / np.sqrt(len(values))
    target = np.array([getattr(truth, f) for f in FIELDS])
    return (values.mean(axis=0) - target) / se


@pytest.mark.parametrize("sampler", [gaussian, student_t], ids=["gaussian", "student_t5"])
def test_u_statistics_are_unbiased_and_plugin_is_not(sampler):
    # n = 10 keeps the finite-sample bias of the plug-in large and the U-statistics' n-dependent
    # normalisations (n−1)(n−2)(n−3) sharply tested.
    values, truth = simulate(moments, sampler, n=10, draws=4000, seed=11)
    z = z_scores(values, truth)
    assert np.all(np.abs(z) < SE_TOLERANCE), dict(zip(FIELDS, z))

    plug, _ = simulate(plugin_moments, sampler, n=10, draws=4000, seed=11)
    z_plug = z_scores(plug, truth)
    # The same check fails for the plug-in: ‖m‖² is high by tr Σ / n, ‖Σ̂‖_F² by ~(tr Σ)²/n.
    assert np.all(np.abs(z_plug) > SE_TOLERANCE), dict(zip(FIELDS, z_plug))


@pytest.mark.parametrize("mean_scale", [1.0, 5.0])
def test_detectability_standard_error_is_the_exact_variance_of_the_mean_estimate(mean_scale):
    """Var[‖μ‖²_U] = 4 μᵀΣμ/n + 2 tr Σ²/(n(n−1)) (Hoeffding), and detectability's SE² estimates it:
    without bias where the μᵀΣμ estimates are non-negative, on the large side where its positive
    part acts (mean_scale 1: about half the μᵀΣμ estimates at n = 12 are negative; 5: 0.3 %)."""
    mean, covariance = population()
    mean = mean_scale * mean
    rng = np.random.default_rng(5)
    n, draws = 12, 6000
    data = gaussian(rng, mean, covariance, (draws, n))
    estimates = [moments(x) for x in data]
    mu_sq = np.array([float(m.mu_sq) for m in estimates])
    se_sq = np.array([detectability(m)[1] ** 2 for m in estimates])
    musm = float(mean @ covariance @ mean)
    exact = 4 * musm / n + 2 * float(np.sum(covariance**2)) / (n * (n - 1))
    # the simulated variance of the estimator matches the closed form ...
    var_se = np.sqrt((np.mean((mu_sq - mu_sq.mean()) ** 4) - mu_sq.var() ** 2) / draws)
    assert abs(mu_sq.var(ddof=1) - exact) < SE_TOLERANCE * var_se
    # ... and the SE² that detectability divides by never underestimates it on average
    est_se = se_sq.std(ddof=1) / np.sqrt(draws)
    assert se_sq.mean() > exact - SE_TOLERANCE * est_se
    if mean_scale == 5.0:  # where the positive part (almost) never acts: unbiased
        assert se_sq.mean() < exact + SE_TOLERANCE * est_se


@pytest.mark.parametrize("sampler", [gaussian, skewed], ids=["gaussian", "skewed"])
@pytest.mark.parametrize("M,K", [(3, 5), (8, 8)])
def test_exact_mean_and_variance_of_the_alignment_statistic(sampler, M, K):
    """E[μ_M·g_K] = ‖μ‖² and Var = (1/M + 1/K) μᵀΣμ + tr Σ²/(MK) (docs/science.md,
    "The statistic and its exact moments")."""
    mean, covariance = population()
    rng = np.random.default_rng(M * 100 + K)
    reps = 40_000
    mu_m = sampler(rng, mean, covariance, (reps, M)).mean(axis=1)
    g_k = sampler(rng, mean, covariance, (reps, K)).mean(axis=1)
    y = np.einsum("ij,ij->i", mu_m, g_k)
    truth = population_moments(mean, covariance)
    assert abs(y.mean() - truth.mu_sq) < SE_TOLERANCE * y.std(ddof=1) / np.sqrt(reps)
    centred = y - y.mean()
    var_se = np.sqrt((np.mean(centred**4) - np.mean(centred**2) ** 2) / reps)
    assert abs(y.var(ddof=1) - misalignment_variance(truth, M, K)) < SE_TOLERANCE * var_se
    # The test has power: dropping the tr Σ²/(MK) term is detected.
    wrong = (1 / M + 1 / K) * truth.mu_sigma_mu
    assert abs(y.var(ddof=1) - wrong) > SE_TOLERANCE * var_se
