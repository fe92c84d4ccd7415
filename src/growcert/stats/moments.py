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

import numpy as np

from growcert.stats.accumulate import DEFAULT_BLOCK_BYTES, PerExample, PowerSums, SampleBlocks, accumulate
from growcert.stats.u_statistics import (  # noqa: F401 (the public API)
    MIN_EXAMPLES,
    Moments,
    check_n,
    leave_one_out,
    plugin_from_sums,
    unbiased_moments,
)


def power_sums(
    x,
    *,
    method: str = "auto",
    per_example: bool = False,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    products: str = "auto",
) -> tuple[PowerSums, PerExample | None]:
    """One streaming pass over `x` (two with per_example=True): see accumulate.py."""
    blocks = SampleBlocks(x, block_bytes)
    check_n(blocks.n)
    return accumulate(blocks, method=method, per_example=per_example, products=products)


def moments(x, *, method: str = "auto", block_bytes: int = DEFAULT_BLOCK_BYTES, products: str = "auto") -> Moments:
    """Unbiased ‖μ‖², ‖μ‖⁴, μᵀΣμ, tr(Σ²) of the examples in `x`, in one streaming pass.

    x: (n, ...) array-like (numpy, torch tensor, zarr/dask array) or an
    xarray DataArray with a ``sample`` dim, numpy- or dask-backed (read block
    by block, never whole); trailing dims are flattened into R^N.
    method: "auto" (N×N covariance if N ≤ n, else n×n Gram), "covariance", "gram".
    products: "auto" (float32 block products when the check allows, accumulate.py), "float64", "float32".
    Raises ValueError when n < 4.
    """
    return unbiased_moments(power_sums(x, method=method, block_bytes=block_bytes, products=products)[0])


def plugin_moments(
    x, *, method: str = "auto", block_bytes: int = DEFAULT_BLOCK_BYTES, products: str = "auto"
) -> Moments:
    """Plug-in (biased) counterparts of `moments`, for the plug-in-vs-unbiased comparison."""
    return plugin_from_sums(power_sums(x, method=method, block_bytes=block_bytes, products=products)[0])


def population_moments(mean, covariance) -> Moments:
    """Exact ‖μ‖², ‖μ‖⁴, μᵀΣμ, tr(Σ²) of a known distribution (for tests and simulations)."""
    mean = np.asarray(mean, dtype=np.float64)
    covariance = np.asarray(covariance, dtype=np.float64)
    mu_sq = float(mean @ mean)
    return Moments(
        n=None,
        mu_sq=mu_sq,
        mu_4=mu_sq**2,
        mu_sigma_mu=float(mean @ covariance @ mean),
        tr_sigma2=float(np.vdot(covariance, covariance)),
        dim=mean.size,
        kind="population",
    )
