"""Certificates, intervals and the status of a result row (P1; docs/science.md,
"Effective dimensions and certificates")."""

import itertools
import math

import numpy as np
import pytest

from growcert.stats import Moments, alignment_row, certificates, effective_dims, misalignment
from growcert.stats.certificates import STATUS_NO_SIGNAL, STATUS_OK, certificate_columns, detectability
from growcert.stats.intervals import fieller_interval, wilson_interval
from growcert.stats.moments import population_moments


def spiked_population(dim, mean_scale, spike, seed):
    rng = np.random.default_rng(seed)
    mean = rng.normal(0.0, mean_scale / np.sqrt(dim), dim)
    direction = rng.standard_normal(dim)
    direction /= np.linalg.norm(direction)
    covariance = np.eye(dim) + spike * np.outer(direction, direction)
    return mean, covariance


def draw(rng, mean, covariance, n, heavy=False):
    z = rng.standard_normal((n, len(mean))) @ np.linalg.cholesky(covariance).T
    if heavy:  # multivariate t with 5 dof, rescaled to the same covariance
        z *= np.sqrt(3 / 5) / np.sqrt(rng.chisquare(5, size=(n, 1)) / 5)
    return mean + z


def test_formulas_on_hand_computed_values():
    m = Moments(n=None, mu_sq=2.0, mu_4=4.0, mu_sigma_mu=2.0, tr_sigma2=8.0)
    assert effective_dims(m) == (2.0, 0.5, 0.5)
    b_exact, b_align, n_eff = certificates(m, 4, 5)
    assert n_eff == pytest.approx(2.0)
    variance = (1 / 4 + 1 / 5) * 2.0 + 8.0 / 20
    assert b_exact == pytest.approx(variance / (variance + 4.0))
    assert b_align == pytest.approx(1 / (1 + 2.0 * 0.5))


def test_exact_certificate_never_exceeds_theorem_one():
    rng = np.random.default_rng(0)
    for _ in range(500):
        dim = int(rng.integers(1, 30))
        mean = rng.normal(0, rng.uniform(0.01, 3), dim)
        a = rng.standard_normal((dim, dim)) * rng.uniform(0.01, 3)
        m = population_moments(mean, a @ a.T)
        M, K = (int(v) for v in rng.integers(1, 500, size=2))
        b_exact, b_align, _ = certificates(m, M, K)
        assert 0 <= b_exact <= b_align * (1 + 1e-12) <= 1


@pytest.mark.parametrize("heavy", [False, True], ids=["gaussian", "student_t5"])
@pytest.mark.parametrize("M,K", [(4, 4), (16, 16), (8, 32)])
@pytest.mark.parametrize("mean_scale,spike", [(1.0, 0.0), (0.8, 8.0), (2.0, 20.0)])
def test_iid_misalignment_is_certified(heavy, M, K, mean_scale, spike):
    """p̂ (its Wilson lower bound) ≤ B_exact ≤ B_align, with true and with estimated moments."""
    dim = 24
    mean, covariance = spiked_population(dim, mean_scale, spike, seed=M + K)
    rng = np.random.default_rng(M * K)
    pool = draw(rng, mean, covariance, n=3000, heavy=heavy)
    p_hat, lo, hi = misalignment(pool, None, M, K, replicates=4000, seed=1)
    b_exact, b_align, _ = certificates(population_moments(mean, covariance), M, K)
    assert lo <= b_exact <= b_align
    assert p_hat <= b_exact  # holds with a wide margin here: Cantelli is loose
    row = alignment_row(pool, M=M, K=K)
    if row["status"] == STATUS_OK:
        assert lo <= row["b_exact"] <= row["b_align"]


@pytest.mark.parametrize(
    "n, mu_sq, mu_sigma_mu, tr_sigma2, z, se",
    [
        (10, 3.0, 2.0, 9.0, 3.0, 1.0),  # 4·2/10 + 2·9/90 = 0.8 + 0.2 = 1
        (10, -0.5, 2.0, 9.0, -0.5, 1.0),  # the sign of the estimate is kept
        (10, 3.0, -1.0, 9.0, 3.0 / math.sqrt(0.2), math.sqrt(0.2)),  # negative μᵀΣμ: its positive part, 0
        (5, 1.0, 0.25, -4.0, 1.0 / math.sqrt(0.2), math.sqrt(0.2)),  # 4·0.25/5 + 0 (negative tr Σ²)
        (10, 3.0, -1.0, 0.0, math.nan, math.nan),  # no usable scale
    ],
)
def test_detectability_is_the_estimate_over_its_exact_standard_error(n, mu_sq, mu_sigma_mu, tr_sigma2, z, se):
    m = Moments(n=n, mu_sq=mu_sq, mu_4=mu_sq**2, mu_sigma_mu=mu_sigma_mu, tr_sigma2=tr_sigma2)
    assert detectability(m) == pytest.approx((z, se), rel=1e-12, nan_ok=True)


def brute_force_u_statistics(x):
    """‖μ‖², μᵀΣμ, tr Σ² as averages of kernels over distinct index tuples of the Gram matrix:
    E[G_ij] = ‖μ‖², E[G_ij G_ik] = μᵀΣμ + ‖μ‖⁴, E[G_ij G_kl] = ‖μ‖⁴, E[G_ij²] = tr Σ² + 2 μᵀΣμ + ‖μ‖⁴."""
    gram = x @ x.T
    pairs = list(itertools.permutations(range(len(x)), 2))
    triples = list(itertools.permutations(range(len(x)), 3))
    quads = list(itertools.permutations(range(len(x)), 4))
    a1 = np.mean([gram[i, j] for i, j in pairs])
    a2 = np.mean([gram[i, j] ** 2 for i, j in pairs])
    a3 = np.mean([gram[i, j] * gram[i, k] for i, j, k in triples])
    a4 = np.mean([gram[i, j] * gram[k, l] for i, j, k, l in quads])
    return a1, a3 - a4, a2 - 2 * a3 + a4


@pytest.mark.parametrize("shift, seed", [(0.0, 0), (0.7, 7), (3.0, 7)])  # (0.0, 0): μᵀΣμ estimate < 0
def test_row_detectability_is_the_closed_form_of_brute_force_u_statistics(shift, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 3)) + shift
    n = len(x)
    mu_sq, mu_sigma_mu, tr_sigma2 = brute_force_u_statistics(x)
    row = alignment_row(x)
    assert (row["mu_sq"], row["mu_sigma_mu"], row["tr_sigma2"]) == pytest.approx(
        (mu_sq, mu_sigma_mu, tr_sigma2), rel=1e-9, abs=1e-12
    )
    if shift == 0.0:
        assert mu_sigma_mu < 0  # the case where detectability takes the positive part
    se = math.sqrt(4 * max(mu_sigma_mu, 0) / n + 2 * max(tr_sigma2, 0) / (n * (n - 1)))
    assert row["mu_sq_se"] == pytest.approx(se, rel=1e-9)
    assert row["detectability"] == pytest.approx(mu_sq / se, rel=1e-9)


def test_zero_mean_pool_is_undetermined_and_strong_mean_is_ok():
    rng = np.random.default_rng(2)
    mean, covariance = spiked_population(30, 0.0, 3.0, seed=1)
    noise = draw(rng, mean, covariance, n=400)
    row = alignment_row(noise, M=8, K=8)
    assert row["status"] == STATUS_NO_SIGNAL
    assert abs(row["detectability"]) < 2
    assert math.isnan(row["d_align"]) and math.isnan(row["b_exact"]) and math.isnan(row["b_align"])
    assert not math.isnan(row["d_align_raw"]) and not math.isnan(row["b_exact_raw"])

    strong = draw(rng, np.full(30, 0.5), covariance, n=400)
    row = alignment_row(strong, M=8, K=8)
    assert row["status"] == STATUS_OK and row["detectability"] > 10
    assert row["d_align"] == row["d_align_raw"] == min(row["d_par"], row["d_2"])
    assert row["d_align_lo"] <= row["d_align"] <= row["d_align_hi"] < math.inf
    assert row["b_exact"] == row["b_exact_raw"] <= row["b_align"]


def test_negative_estimate_is_reported_not_clipped():
    # Mean along e_0, noise only orthogonal to it: μᵀΣμ = 0, so its unbiased estimate is
    # negative about half the time while the mean itself is clearly detectable.
    for seed in range(40):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((60, 6))
        x[:, 0] = 1.0
        row = alignment_row(x, M=4, K=4)
        if row["mu_sigma_mu"] < 0:
            break
    else:
        pytest.fail("no negative estimate of mu_sigma_mu in 40 seeds")
    assert row["detectability"] > 2
    assert row["status"] == "undetermined: negative estimate of mu_sigma_mu"
    assert math.isnan(row["d_align"]) and math.isnan(row["d_par"])
    assert row["d_align_raw"] == row["d_par_raw"] < 0  # raw kept, sign intact
    assert row["d_par_hi"] == math.inf  # the denominator is not significantly nonzero


def test_row_has_the_documented_columns_and_plugin_side_by_side():
    rng = np.random.default_rng(3)
    row = alignment_row(rng.standard_normal((50, 5)) + 1.0)
    for name in ("mu_sq", "mu_4", "mu_sigma_mu", "tr_sigma2", "d_par", "d_2", "d_align"):
        assert f"{name}_plugin" in row
    for name in ("d_par", "d_2", "d_align"):
        assert {f"{name}_lo", f"{name}_hi", f"{name}_raw"} <= set(row)
    assert {"n", "dim", "method", "products", "status", "detectability", "mu_sq_se"} <= set(row)
    assert row["products"] == "float64"  # float64 data: float32 products never apply
    assert "b_exact" not in row  # certificates only when M and K are given
    with pytest.raises(ValueError, match="both M and K"):
        alignment_row(rng.standard_normal((50, 5)), M=4)


def test_jackknife_fieller_intervals_cover_at_about_the_nominal_level():
    dim, n, reps = 8, 200, 200
    mean, covariance = spiked_population(dim, 2.0, 4.0, seed=9)
    d_par, d_2, d_align = effective_dims(population_moments(mean, covariance))
    rng = np.random.default_rng(10)
    hits = np.zeros(3)
    for _ in range(reps):
        row = alignment_row(draw(rng, mean, covariance, n))
        hits += [
            row["d_par_lo"] <= d_par <= row["d_par_hi"],
            row["d_2_lo"] <= d_2 <= row["d_2_hi"],
            row["d_align_lo"] <= d_align <= row["d_align_hi"],
        ]
    coverage = hits / reps
    # nominal 0.95 (d_align: ≥ 0.95 by Bonferroni); 4 binomial SEs below it still fails a broken interval
    assert np.all(coverage >= 0.95 - 4 * np.sqrt(0.95 * 0.05 / reps)), coverage


def test_fieller_interval_is_unbounded_when_the_denominator_is_not_significant():
    assert fieller_interval(1.0, 2.0, 0.01, 0.01, 0.0)[1] < math.inf
    lo, hi = fieller_interval(1.0, 0.1, 0.01, 0.04, 0.0)
    assert hi == math.inf and lo > 0
    assert fieller_interval(1.0, 0.1, 1.0, 0.04, 0.0) == (0.0, math.inf)


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(0, 100)
    z2 = 1.959963984540054**2
    assert lo == 0.0 and hi == pytest.approx(z2 / (100 + z2))
    lo, hi = wilson_interval(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)


def closed_form_certificates(mu_sq, mu_sigma_mu, tr_sigma2, M, K):
    """(B_exact, B_align, n_eff) from P1's formulas (docs/science.md), written out here (‖μ‖⁴ = mu_sq²)."""
    mu_4 = mu_sq**2
    n_eff = M * K / (M + K + 1)
    d_align = min(mu_4 / mu_sigma_mu, mu_4 / tr_sigma2)
    variance = (1 / M + 1 / K) * mu_sigma_mu + tr_sigma2 / (M * K)
    return variance / (variance + mu_4), 1 / (1 + n_eff * d_align), n_eff


# (mean, covariance) pairs picked by hand: isotropic, a spike along μ, a spike orthogonal to μ,
# a large mean in a low dimension and a weak mean in a higher one
HAND_PICKED = [
    ([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]]),
    ([1.0, 1.0, 0.0], [[5.0, 4.0, 0.0], [4.0, 5.0, 0.0], [0.0, 0.0, 1.0]]),
    ([2.0, 0.0, 0.0], [[0.5, 0.0, 0.0], [0.0, 9.0, 0.0], [0.0, 0.0, 9.0]]),
    ([3.0], [[0.25]]),
    ([0.1, -0.2, 0.1, 0.0], [[2.0, 0.5, 0.0, 0.0], [0.5, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.3], [0.0, 0.0, 0.3, 4.0]]),
]


@pytest.mark.parametrize("M,K", [(1, 1), (4, 5), (16, 3), (64, 64)])
@pytest.mark.parametrize("case", range(len(HAND_PICKED)))
def test_certificates_match_the_closed_forms_on_hand_picked_moments(case, M, K):
    mean, covariance = (np.array(v, dtype=float) for v in HAND_PICKED[case])
    mu_sq = float(sum(v * v for v in mean))
    mu_sigma_mu = float(sum(mean[i] * covariance[i, j] * mean[j] for i in range(len(mean)) for j in range(len(mean))))
    tr_sigma2 = float(sum(covariance[i, j] ** 2 for i in range(len(mean)) for j in range(len(mean))))
    m = Moments(n=None, mu_sq=mu_sq, mu_4=mu_sq**2, mu_sigma_mu=mu_sigma_mu, tr_sigma2=tr_sigma2)
    expected = closed_form_certificates(mu_sq, mu_sigma_mu, tr_sigma2, M, K)
    assert certificates(m, M, K) == pytest.approx(expected, rel=1e-12)
    b_exact, b_align, _ = expected
    assert 0 < b_exact <= b_align < 1

    # certificate_columns reads the same quantities from a row: shown when "ok", NaN otherwise
    row = {
        "n": 50,
        "dim": len(mean),
        "mu_sq": mu_sq,
        "mu_4": mu_sq**2,
        "mu_sigma_mu": mu_sigma_mu,
        "tr_sigma2": tr_sigma2,
        "status": STATUS_OK,
    }
    columns = certificate_columns(row, M, K)
    assert (columns["M"], columns["K"]) == (M, K)
    assert (columns["b_exact"], columns["b_align"], columns["n_eff"]) == pytest.approx(expected, rel=1e-12)
    assert (columns["b_exact_raw"], columns["b_align_raw"]) == pytest.approx(expected[:2], rel=1e-12)
    hidden = certificate_columns(dict(row, status=STATUS_NO_SIGNAL), M, K)
    assert math.isnan(hidden["b_exact"]) and math.isnan(hidden["b_align"])
    assert (hidden["b_exact_raw"], hidden["b_align_raw"]) == pytest.approx(expected[:2], rel=1e-12)


def test_certificate_columns_of_a_pool_are_the_closed_forms_of_its_estimates():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((80, 6)) + 0.8
    row = alignment_row(x, M=4, K=8)
    assert row["status"] == STATUS_OK
    # closed forms on the row's own estimates (‖μ‖⁴ estimated separately, so not mu_sq²)
    mu_4, musm, tr2 = row["mu_4"], row["mu_sigma_mu"], row["tr_sigma2"]
    for M, K in ((4, 8), (64, 64)):
        variance = (1 / M + 1 / K) * musm + tr2 / (M * K)
        n_eff = M * K / (M + K + 1)
        expected = {
            "b_exact": variance / (variance + mu_4),
            "b_align": 1 / (1 + n_eff * min(mu_4 / musm, mu_4 / tr2)),
            "n_eff": n_eff,
        }
        columns = row if (M, K) == (4, 8) else certificate_columns(row, M, K)
        assert {k: columns[k] for k in expected} == pytest.approx(expected, rel=1e-12)
        assert columns["b_exact"] <= columns["b_align"]
    # more examples on both sides certify less misalignment
    assert certificate_columns(row, 64, 64)["b_align"] < row["b_align"]


def test_b_exact_interval_is_the_extremes_of_b_exact_over_its_moment_box():
    """Brute force: B_exact from P1's formula on a grid over the box of the three moments' normal intervals (each at
    1 − 0.05/3, clipped at 0) has the same lowest and highest values as b_exact_interval's corners."""
    from scipy import stats as scipy_stats

    from growcert.stats.certificates import b_exact_interval

    z = scipy_stats.norm.ppf(1 - 0.05 / 6)
    for row, M, K in [
        (
            {
                "mu_4": 4.0,
                "mu_sigma_mu": 2.0,
                "tr_sigma2": 8.0,
                "mu_4_se_jack": 0.5,
                "mu_sigma_mu_se_jack": 0.3,
                "tr_sigma2_se_jack": 1.0,
            },
            4,
            5,
        ),
        (
            {
                "mu_4": 0.3,
                "mu_sigma_mu": 0.05,
                "tr_sigma2": 0.2,
                "mu_4_se_jack": 0.1,
                "mu_sigma_mu_se_jack": 0.04,
                "tr_sigma2_se_jack": 0.15,
            },
            32,
            32,
        ),
    ]:
        axes = [
            np.linspace(max(row[name] - z * row[f"{name}_se_jack"], 0), row[name] + z * row[f"{name}_se_jack"], 9)
            for name in ("mu_4", "mu_sigma_mu", "tr_sigma2")
        ]
        values = [
            certificates(Moments(n=None, mu_sq=math.sqrt(mu_4), mu_4=mu_4, mu_sigma_mu=msm, tr_sigma2=tr), M, K)[0]
            for mu_4, msm, tr in itertools.product(*axes)
        ]
        low, high = b_exact_interval(row, M, K, 0.95)
        assert (low, high) == pytest.approx((min(values), max(values)), rel=1e-12)
    # an upper ‖μ‖⁴ end of 0 (no detectable mean) bounds nothing
    assert (
        b_exact_interval(
            {
                "mu_4": 0.1,
                "mu_sigma_mu": 1.0,
                "tr_sigma2": 1.0,
                "mu_4_se_jack": 1.0,
                "mu_sigma_mu_se_jack": 0.1,
                "tr_sigma2_se_jack": 0.1,
            },
            8,
            8,
            0.95,
        )[1]
        == 1.0
    )


def test_b_exact_interval_covers_the_population_b_exact():
    """Monte Carlo: from pools of a known Gaussian, the interval from alignment_row's moments and jackknife errors
    covers the population B_exact at least at its level (Bonferroni over three moments: conservative)."""
    from growcert.stats.certificates import b_exact_interval

    dim, n, reps, M, K = 8, 200, 200, 8, 8
    mean, covariance = spiked_population(dim, 1.5, 4.0, seed=3)
    truth = certificates(population_moments(mean, covariance), M, K)[0]
    rng = np.random.default_rng(4)
    hits = 0
    for _ in range(reps):
        low, high = b_exact_interval(alignment_row(draw(rng, mean, covariance, n)), M, K, 0.95)
        hits += bool(low <= truth <= high)
    assert 0.05 < truth < 0.5  # a non-vacuous bound, the case the claim tests
    assert hits / reps >= 0.95 - 4 * np.sqrt(0.95 * 0.05 / reps), hits / reps


def test_misalignment_interval_covers_the_population_probability_where_wilson_alone_does_not():
    """Monte Carlo of the iid mode: p̂ from R = 2,000 resampled draws of M + K = 16 examples from one pool of 48
    (3 disjoint draws) estimates the pool's frequency, not the population's p. The Wilson interval over R alone
    covers p far less often than its level; misalignment_interval (effective trials 1/(1/R + 1/3)) covers it at
    least at its level."""
    from growcert.stats.intervals import disjoint_draw_count, misalignment_interval

    dim, M, K, n, replicates, reps = 4, 8, 8, 48, 2000, 300
    mean = np.full(dim, 0.28)
    rng = np.random.default_rng(5)
    fresh = 400_000  # the population p from independent draws of μ_M and g_K
    truth = np.mean(
        np.sum(
            (mean + rng.standard_normal((fresh, dim)) / np.sqrt(M))
            * (mean + rng.standard_normal((fresh, dim)) / np.sqrt(K)),
            axis=1,
        )
        <= 0
    )
    draws = disjoint_draw_count(M, K, n)
    assert draws == 3
    wilson_hits = pool_hits = 0
    for _ in range(reps):
        pool = mean + rng.standard_normal((n, dim))
        picks = np.argsort(rng.random((replicates, n)), axis=1)[:, : M + K]
        dots = np.sum(pool[picks[:, :M]].mean(axis=1) * pool[picks[:, M:]].mean(axis=1), axis=1)
        misaligned = int(np.sum(dots <= 0))
        low, high = wilson_interval(misaligned, replicates)
        wilson_hits += low <= truth <= high
        low, high = misalignment_interval(misaligned / replicates, replicates, draws)
        pool_hits += low <= truth <= high
    floor = 0.95 - 4 * np.sqrt(0.95 * 0.05 / reps)
    assert 0.1 < truth < 0.4 and pool_hits / reps >= floor, (truth, pool_hits / reps)
    assert wilson_hits / reps < 0.6, wilson_hits / reps
    # a pool with as many disjoint draws as replicates halves the trials; an endless pool is Wilson's
    assert misalignment_interval(0.2, 100, 10**12) == pytest.approx(wilson_interval(20, 100))
    assert misalignment_interval(0.2, 100, 100) == pytest.approx(wilson_interval(10, 50))
    assert disjoint_draw_count(32, 8, 100, 50) == 3  # min(100 // 32, 50 // 8)
