"""Effective dimensions, alignment certificates and the result row (P1; docs/science.md,
"Effective dimensions and certificates").

With μ̄ = E[q], Σ = Cov[q], M train-side and K test-side examples:

    E[μ_M·g_K]   = ‖μ̄‖²
    V = Var[μ_M·g_K] = (1/M + 1/K) μ̄ᵀΣμ̄ + tr(Σ²)/(MK)
    d_∥ = ‖μ̄‖⁴/μ̄ᵀΣμ̄,  d_2 = ‖μ̄‖⁴/tr(Σ²),  d_align = min(d_∥, d_2)
    n_eff = MK/(M + K + 1)
    B_exact = V/(V + ‖μ̄‖⁴)            (Cantelli with the exact moments)
    B_align = 1/(1 + n_eff d_align)   (Theorem 1; B_exact ≤ B_align)

`b_exact_interval` gives the population B_exact an interval from the moments' jackknife errors.

The functions here apply these formulas to whatever Moments they are given
(true values, unbiased or plug-in estimates) and never clip: with negative
estimates the raw numbers are not probabilities.  `alignment_row` is where a
table row decides what to present: it adds a **detectability** statistic for
the mean (‖μ‖² estimate over its standard error; the pilots found pools whose
mean gradient was indistinguishable from zero, docs/science.md, "P1: pilots") and a status,
showing d_align and the certificates only when both the signal is detectable
and every estimate entering them is non-negative; otherwise those columns are
NaN and the raw values stay in ``*_raw`` columns.

Detectability uses the exact variance of the U-statistic ‖μ‖²_U = T1/n(n−1):
    Var = 4 μᵀΣμ / n + 2 tr(Σ²) / (n(n−1))
(Hoeffding: ζ1 = μᵀΣμ, ζ2 = tr Σ² + 2 μᵀΣμ), estimated without bias by
plugging in the unbiased μᵀΣμ and tr(Σ²) (`detectability` takes their
positive parts so the SE always exists).  Unlike a jackknife
variance, which overestimates when μ = 0 (the degenerate case that matters
here), the formula is exact under the null as well.
"""

from __future__ import annotations

import math

import numpy as np

from growcert.stats.accumulate import DEFAULT_BLOCK_BYTES
from growcert.stats.intervals import dimension_intervals, normal_quantile, normal_quantiles
from growcert.stats.moments import Moments, plugin_from_sums, power_sums, unbiased_moments

DEFAULT_DETECTION_THRESHOLD = 2.0
STATUS_OK = "ok"
STATUS_NO_SIGNAL = "undetermined: no detectable mean signal"
STATUS_NEGATIVE = "undetermined: negative estimate of {}"
# The estimates d_align and the certificates depend on (checked in this order).
CHECKED_QUANTITIES = ("mu_4", "mu_sigma_mu", "tr_sigma2")


def _ratio(numerator: float, denominator: float) -> float:
    """numerator/denominator with the limits spelled out: x/0 is ±inf (nan for 0/0)."""
    if denominator == 0:
        return math.nan if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / denominator


def effective_dims(m: Moments) -> tuple[float, float, float]:
    """(d_par, d_2, d_align) = (‖μ‖⁴/μᵀΣμ, ‖μ‖⁴/tr Σ², min of the two), raw (no clipping)."""
    d_par = _ratio(float(m.mu_4), float(m.mu_sigma_mu))
    d_2 = _ratio(float(m.mu_4), float(m.tr_sigma2))
    return d_par, d_2, min(d_par, d_2) if not math.isnan(d_par + d_2) else math.nan


def n_eff(M: int, K: int) -> float:
    """P1's effective sample size MK/(M + K + 1)."""
    return M * K / (M + K + 1)


def variance_weights(M, K):
    """(a, b) with V = Var[μ_M·g_K] = a μᵀΣμ + b tr(Σ²): a = 1/M + 1/K, b = 1/(MK). Elementwise over arrays."""
    M, K = np.asarray(M, float), np.asarray(K, float)
    return 1.0 / M + 1.0 / K, 1.0 / (M * K)


def misalignment_variance(m: Moments, M: int, K: int) -> float:
    """V = Var[μ_M·g_K] = (1/M + 1/K) μᵀΣμ + tr(Σ²)/(MK) for independent samples."""
    if M < 1 or K < 1:
        raise ValueError(f"M and K must be positive sample sizes; got M={M}, K={K}")
    directional, energy = variance_weights(M, K)
    return float(directional) * float(m.mu_sigma_mu) + float(energy) * float(m.tr_sigma2)


def certificates(m: Moments, M: int, K: int) -> tuple[float, float, float]:
    """(b_exact, b_align, n_eff): Cantelli with the exact moments, and Theorem 1's bound.

    Raw formulas: with negative estimates in `m` the values are not
    probabilities (see alignment_row for what a table presents).
    """
    variance = misalignment_variance(m, M, K)
    effective = n_eff(M, K)
    b_exact = _ratio(variance, variance + float(m.mu_4))
    b_align = _ratio(1.0, 1.0 + effective * effective_dims(m)[2])
    return b_exact, b_align, effective


def moment_box_quantile(level):
    """The normal quantile of each moment's interval in `b_exact_interval`'s box: two-sided at 1 − (1 − level)/3
    (Bonferroni over the three moments). Elementwise over arrays of levels."""
    return normal_quantiles(1.0 - (1.0 - np.asarray(level, float)) / 3.0)


def b_exact_interval(row, M, K, level=0.95) -> tuple[np.ndarray, np.ndarray]:
    """An interval for the population B_exact from a row's (or table's: elementwise) unbiased moments mu_4,
    mu_sigma_mu, tr_sigma2 and their jackknife standard errors <name>_se_jack, the columns alignment_row writes.

    B_exact = V/(V + ‖μ‖⁴) with V = (1/M + 1/K) μᵀΣμ + tr(Σ²)/(MK) rises with μᵀΣμ and tr Σ² and falls with
    ‖μ‖⁴, so over a box of the three moments it is lowest at (μᵀΣμ low, tr Σ² low, ‖μ‖⁴ high) and highest at the
    opposite corner. The box is the three normal intervals estimate ± z·se at level 1 − (1 − level)/3 each, every
    end clipped at 0 (the population values are non-negative): by Bonferroni it holds all three at ≥ `level`, so
    the corners' interval covers B_exact at ≥ `level`, with no need for the moments' covariances (the table keeps
    their standard errors only). An upper ‖μ‖⁴ end of 0 gives B_exact's upper end 1 (no detectable mean bounds
    nothing)."""
    z = moment_box_quantile(level)

    def ends(name):
        value, se = np.asarray(row[name], float), np.asarray(row[f"{name}_se_jack"], float)
        return np.maximum(value - z * se, 0.0), np.maximum(value + z * se, 0.0)

    (mu_4_low, mu_4_high), (msm_low, msm_high), (tr_low, tr_high) = (
        ends(name) for name in ("mu_4", "mu_sigma_mu", "tr_sigma2")
    )
    directional, energy = variance_weights(M, K)
    v_low = directional * msm_low + energy * tr_low
    v_high = directional * msm_high + energy * tr_high
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(v_low + mu_4_high > 0, v_low / (v_low + mu_4_high), 0.0)
        high = np.where(mu_4_low > 0, v_high / (v_high + mu_4_low), 1.0)
    return low, high


def detectability(m: Moments) -> tuple[float, float]:
    """(z, se): the ‖μ‖² estimate over its standard error (see the module docstring).

    The SE uses the positive parts of the unbiased μᵀΣμ and tr(Σ²): both
    population terms are ≥ 0, and a negative estimate of one (common when the
    mean is small, or when Σ has little variance along μ) would otherwise make
    the variance negative.  This errs on the large side, i.e. towards
    "not detectable".  Both are NaN when even that is zero (no usable scale).
    """
    n = m.n
    variance = 4.0 * max(float(m.mu_sigma_mu), 0.0) / n + 2.0 * max(float(m.tr_sigma2), 0.0) / (n * (n - 1))
    if not variance > 0:
        return math.nan, math.nan
    se = math.sqrt(variance)
    return float(m.mu_sq) / se, se


def samples_to_detect(estimate: float, se: float, n: int, detect_threshold: float) -> int | None:
    """The examples at which a U-statistic estimate of this size would reach `detect_threshold` standard errors,
    at the spread observed with `n` examples; None when no count would (the estimate is not positive).

    The exact variance 4 μᵀΣμ/n + 2 tr(Σ²)/(n(n−1)) falls at least as fast as 1/n, so scaling the observed
    SE by √(n/n') never understates the SE at n' examples: the count n·(detect_threshold·SE/estimate)² is enough
    (an upper bound when the tr(Σ²) term matters). Never below n + 1 for an estimate not yet detected.
    """
    if not (math.isfinite(estimate) and math.isfinite(se)) or estimate <= 0:
        return None
    if se == 0 or estimate >= detect_threshold * se:
        return int(n)
    return max(int(n) + 1, math.ceil(n * (detect_threshold * se / estimate) ** 2))


def alignment_status(m: Moments, z: float, detect_threshold: float = DEFAULT_DETECTION_THRESHOLD) -> str:
    """ "ok", or why d_align is undetermined: no detectable mean first, then negative estimates."""
    if not z >= detect_threshold:  # also catches NaN
        return STATUS_NO_SIGNAL
    negative = [name for name in CHECKED_QUANTITIES if float(getattr(m, name)) < 0]
    if negative:
        return STATUS_NEGATIVE.format(", ".join(negative))
    return STATUS_OK


def alignment_row(
    x,
    *,
    M: int | None = None,
    K: int | None = None,
    detect_threshold: float = DEFAULT_DETECTION_THRESHOLD,
    level: float = 0.95,
    method: str = "auto",
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> dict:
    """One result row (a flat dict) for a pool of reduced activation gradients `x`.

    Two passes over `x` (sums, then per-example terms for the jackknife).
    Columns:
      n, dim, method, products, level, detect_threshold, status
                                                   (products: float64 or float32, the precision of
                                                   the moment pass's block products, accumulate.py)
      mu_sq, mu_4, mu_sigma_mu, tr_sigma2          unbiased estimates, raw
      <each>_se_jack                               jackknife standard errors
      mu_sq_se, detectability                      exact-variance SE and z = mu_sq / mu_sq_se
      d_par_raw, d_2_raw, d_align_raw              ratios of the raw estimates
      d_par, d_2, d_align                          the same, NaN unless status == "ok"
      d_par_lo/hi, d_2_lo/hi, d_align_lo/hi        jackknife-Fieller intervals (intervals.py)
      <moment>_plugin, d_par/d_2/d_align_plugin    plug-in counterparts, for comparison
      with M and K: M, K, n_eff, b_exact_raw, b_align_raw, b_exact, b_align (NaN unless "ok");
      for more (M, K) pairs, certificate_columns(row, M, K) adds them without another pass.
    """
    normal_quantile(level)  # validate arguments before the (possibly long) passes
    if (M is None) != (K is None):
        raise ValueError("give both M and K (or neither) for the certificate columns")
    sums, per = power_sums(x, method=method, per_example=True, block_bytes=block_bytes)
    m = unbiased_moments(sums)
    plug = plugin_from_sums(sums)
    z, se = detectability(m)
    status = alignment_status(m, z, detect_threshold)
    present = status == STATUS_OK
    row: dict = {
        "n": int(sums.n),
        "dim": int(sums.dim),
        "method": sums.method,
        "products": sums.products,
        "level": level,
        "detect_threshold": detect_threshold,
        "status": status,
    }
    for name in ("mu_sq", "mu_4", "mu_sigma_mu", "tr_sigma2"):
        row[name] = float(getattr(m, name))
    row["mu_sq_se"], row["detectability"] = se, z
    dims = dict(zip(("d_par", "d_2", "d_align"), effective_dims(m)))
    for name, value in dims.items():
        row[f"{name}_raw"] = value
        row[name] = value if present else math.nan
    row.update(dimension_intervals(sums, per, level))
    for name in ("mu_sq", "mu_4", "mu_sigma_mu", "tr_sigma2"):
        row[f"{name}_plugin"] = float(getattr(plug, name))
    for name, value in zip(("d_par", "d_2", "d_align"), effective_dims(plug)):
        row[f"{name}_plugin"] = value
    if M is not None:
        row.update(certificate_columns(row, M, K))
    return row


def certificate_columns(row: dict, M: int, K: int) -> dict:
    """M, K, n_eff, b_exact(_raw), b_align(_raw) for a row from alignment_row, without re-reading data.

    For tables with several (M, K) per pool: the row's estimates and status decide,
    as in alignment_row (presented certificates are NaN unless status is "ok").
    """
    m = Moments(
        n=row["n"],
        mu_sq=row["mu_sq"],
        mu_4=row["mu_4"],
        mu_sigma_mu=row["mu_sigma_mu"],
        tr_sigma2=row["tr_sigma2"],
        dim=row["dim"],
    )
    b_exact, b_align, effective = certificates(m, M, K)
    present = row["status"] == STATUS_OK
    return {
        "M": int(M),
        "K": int(K),
        "n_eff": effective,
        "b_exact_raw": b_exact,
        "b_align_raw": b_align,
        "b_exact": b_exact if present else math.nan,
        "b_align": b_align if present else math.nan,
    }
