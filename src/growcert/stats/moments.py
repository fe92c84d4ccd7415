"""Unbiased moment estimators of P1's certificates (formulas: docs/science.md, "Unbiased U-statistics").

For x_1..x_n iid in R^N with mean μ and covariance Σ, P1's certificates need
four population quantities: ‖μ‖², ‖μ‖⁴, μᵀΣμ and tr(Σ²).  With G = X Xᵀ,

    T1 = Σ_{i≠j} G_ij               = ‖s‖² − a2
    F  = Σ_{i≠j} G_ij²              = ‖C‖_F² − a4
    R  = Σ_i (Σ_{j≠i} G_ij)²        = sᵀCs − 2 wᵀs + a4
    T3 = Σ_{i,j,k distinct} G_ij G_ik = R − F
    T4 = Σ_{i,j,k,l distinct} G_ij G_kl = T1² − 4 T3 − 2 F

are sums of kernels over *distinct* indices, so (the examples being
independent) each normalised sum is an unbiased U-statistic:

    ‖μ‖²   = T1 / n(n−1)             (E[x_i·x_j] = ‖μ‖²)
    ‖μ‖⁴   = T4 / n(n−1)(n−2)(n−3)
    μᵀΣμ   = T3 / n(n−1)(n−2) − ‖μ‖⁴ (E[G_ij G_ik] = μᵀ(Σ + μμᵀ)μ)
    tr(Σ²) = [F + T1²/((n−1)(n−2)) − 2R/(n−2)] / n(n−3)   (unbiased HSIC, Song et al. 2012)

The block products behind ‖C‖_F² and sᵀCs are float64, or float32 accumulated
in float64 when a check on the data (the first rows multiplied in both
precisions, then again with the finished sums) predicts that they move each of
‖μ‖⁴, μᵀΣμ and tr Σ² by less than a millionth (accumulate.py, "float32
products"); ``Moments.products`` says which.

Plug-in estimates (mean m, covariance with n−1) come from the same sums and
are kept only for the report's plug-in-vs-unbiased comparison: they are
biased upward by about tr Σ / n and (tr Σ)² / n (P1; docs/science.md,
"Unbiased U-statistics").  Unbiased estimates of positive quantities can be negative at
small n; nothing here clips them (certificates.py decides what to present).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from growcert.stats.accumulate import (DEFAULT_BLOCK_BYTES, FLOAT64, PerExample, PowerSums, SampleBlocks,
                                       accumulate)

MIN_EXAMPLES = 4  # ‖μ‖⁴ is a U-statistic of order 4


@dataclass(frozen=True)
class Moments:
    """Estimates (or true values) of the four quantities of P1's certificates.

    kind: "unbiased" (U-statistics), "plugin" (sample mean and covariance) or
    "population" (exact values from a known mean and covariance; n is None).
    Fields are floats, or arrays when built from leave-one-out sums.
    """

    n: int | None
    mu_sq: float  # ‖μ‖²
    mu_4: float  # ‖μ‖⁴ (estimated on its own, not as the square of mu_sq)
    mu_sigma_mu: float  # μᵀ Σ μ
    tr_sigma2: float  # tr(Σ²) = ‖Σ‖_F²
    dim: int | None = None
    kind: str = "unbiased"
    products: str = FLOAT64  # precision of the block products behind them (accumulate.py)


def _check_n(n: int) -> None:
    if n < MIN_EXAMPLES:
        raise ValueError(
            f"the unbiased moment estimators need at least {MIN_EXAMPLES} examples "
            f"(‖μ‖⁴ is a U-statistic over 4 distinct examples); got n={n}"
        )


def _value(v):
    """A plain float for scalar results (readable repr, JSON-able); arrays stay arrays."""
    return float(v) if np.ndim(v) == 0 else v


def power_sums(x, *, method: str = "auto", per_example: bool = False,
               block_bytes: int = DEFAULT_BLOCK_BYTES, products: str = "auto") -> tuple[PowerSums, PerExample | None]:
    """One streaming pass over `x` (two with per_example=True): see accumulate.py."""
    blocks = SampleBlocks(x, block_bytes)
    _check_n(blocks.n)
    return accumulate(blocks, method=method, per_example=per_example, products=products)


def unbiased_moments(sums: PowerSums) -> Moments:
    """The U-statistics from the power sums (vectorised over leave-one-out arrays)."""
    n = np.asarray(sums.n, dtype=np.float64)
    t1 = sums.s_sq - sums.a2
    f = sums.c_frob_sq - sums.a4
    r = sums.s_c_s - 2.0 * sums.w_s + sums.a4
    t3 = r - f
    t4 = t1 * t1 - 4.0 * t3 - 2.0 * f
    n2 = n * (n - 1.0)
    n3 = n2 * (n - 2.0)
    n4 = n3 * (n - 3.0)
    mu_4 = t4 / n4
    tr_sigma2 = (f + t1 * t1 / ((n - 1.0) * (n - 2.0)) - 2.0 * r / (n - 2.0)) / (n * (n - 3.0))
    return Moments(n=sums.n, mu_sq=_value(t1 / n2), mu_4=_value(mu_4),
                   mu_sigma_mu=_value(t3 / n3 - mu_4), tr_sigma2=_value(tr_sigma2), dim=sums.dim,
                   kind="unbiased", products=sums.products)


def plugin_from_sums(sums: PowerSums) -> Moments:
    """Plug-in values: m = s/n, Σ̂ = (C − s sᵀ/n)/(n − 1), then ‖m‖², ‖m‖⁴, mᵀΣ̂m, ‖Σ̂‖_F²."""
    n = np.asarray(sums.n, dtype=np.float64)
    mean_sq = sums.s_sq / n**2
    mean_sigma_mean = (sums.s_c_s / n**2 - sums.s_sq**2 / n**3) / (n - 1.0)
    sigma_frob_sq = (sums.c_frob_sq - 2.0 * sums.s_c_s / n + sums.s_sq**2 / n**2) / (n - 1.0) ** 2
    return Moments(n=sums.n, mu_sq=_value(mean_sq), mu_4=_value(mean_sq**2),
                   mu_sigma_mu=_value(mean_sigma_mean), tr_sigma2=_value(sigma_frob_sq), dim=sums.dim,
                   kind="plugin", products=sums.products)


def leave_one_out(sums: PowerSums, per: PerExample) -> PowerSums:
    """The power sums with example i removed, for every i at once (arrays of length n).

    Removing x from s, C, w: s' = s − x, C' = C − x xᵀ, w' = w − ‖x‖² x, so
      ‖s'‖²  = ‖s‖² − 2 x·s + ‖x‖²
      ‖C'‖²  = ‖C‖² − 2 xᵀCx + ‖x‖⁴
      s'ᵀC's' = sᵀCs − 2 xᵀCs + xᵀCx − (x·s − ‖x‖²)²
      w'·s'  = w·s − x·w − ‖x‖² x·s + ‖x‖⁴
    which costs O(n) once the per-example terms are known.
    """
    d, d2 = per.norm_sq, per.norm_sq**2
    return PowerSums(
        n=np.full(d.shape, sums.n - 1),
        dim=sums.dim,
        s_sq=sums.s_sq - 2.0 * per.x_s + d,
        a2=sums.a2 - d,
        a4=sums.a4 - d2,
        c_frob_sq=sums.c_frob_sq - 2.0 * per.x_c_x + d2,
        s_c_s=sums.s_c_s - 2.0 * per.x_c_s + per.x_c_x - (per.x_s - d) ** 2,
        w_s=sums.w_s - per.x_w - d * per.x_s + d2,
        method=sums.method,
        products=sums.products,
    )


def moments(x, *, method: str = "auto", block_bytes: int = DEFAULT_BLOCK_BYTES,
            products: str = "auto") -> Moments:
    """Unbiased ‖μ‖², ‖μ‖⁴, μᵀΣμ, tr(Σ²) of the examples in `x`, in one streaming pass.

    x: (n, ...) array-like (numpy, torch tensor, zarr/dask array) or an
    xarray DataArray with a ``sample`` dim, numpy- or dask-backed (read block
    by block, never whole); trailing dims are flattened into R^N.
    method: "auto" (N×N covariance if N ≤ n, else n×n Gram), "covariance", "gram".
    products: "auto" (float32 block products when the check allows, accumulate.py), "float64", "float32".
    Raises ValueError when n < 4.
    """
    return unbiased_moments(power_sums(x, method=method, block_bytes=block_bytes, products=products)[0])


def plugin_moments(x, *, method: str = "auto", block_bytes: int = DEFAULT_BLOCK_BYTES,
                   products: str = "auto") -> Moments:
    """Plug-in (biased) counterparts of `moments`, for the plug-in-vs-unbiased comparison."""
    return plugin_from_sums(power_sums(x, method=method, block_bytes=block_bytes, products=products)[0])


def population_moments(mean, covariance) -> Moments:
    """Exact ‖μ‖², ‖μ‖⁴, μᵀΣμ, tr(Σ²) of a known distribution (for tests and simulations)."""
    mean = np.asarray(mean, dtype=np.float64)
    covariance = np.asarray(covariance, dtype=np.float64)
    mu_sq = float(mean @ mean)
    return Moments(n=None, mu_sq=mu_sq, mu_4=mu_sq**2, mu_sigma_mu=float(mean @ covariance @ mean),
                   tr_sigma2=float(np.vdot(covariance, covariance)), dim=mean.size,
                   kind="population")
