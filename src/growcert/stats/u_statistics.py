"""The U-statistics from the power sums: the formulas of P1's unbiased moments (docs/science.md, "Unbiased
U-statistics"), their plug-in counterparts and the leave-one-out sums.

`accumulate.py` builds the sums (`PowerSums`, `PerExample`) in streaming passes and `moments.py` ties the two
together; this module is what both need, so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOAT32, FLOAT64 = "float32", "float64"  # the precisions of the block products (accumulate.py)


@dataclass(frozen=True)
class PowerSums:
    """The sums behind the U-statistics (scalars, or arrays of leave-one-out values)."""

    n: int | np.ndarray
    dim: int
    s_sq: float | np.ndarray  # ‖s‖²
    a2: float | np.ndarray  # Σ ‖x_i‖²
    a4: float | np.ndarray  # Σ ‖x_i‖⁴
    c_frob_sq: float | np.ndarray  # ‖C‖_F² = ‖G‖_F²
    s_c_s: float | np.ndarray  # sᵀ C s
    w_s: float | np.ndarray  # wᵀ s, w = Σ ‖x_i‖² x_i
    method: str = ""
    products: str = FLOAT64  # the precision of the block products behind ‖C‖_F² and sᵀCs


@dataclass(frozen=True)
class PerExample:
    """Per-example terms for leave-one-out updates, each of length n."""

    norm_sq: np.ndarray  # ‖x_i‖²
    x_s: np.ndarray  # x_i·s
    x_w: np.ndarray  # x_i·w
    x_c_x: np.ndarray  # x_iᵀ C x_i = Σ_j G_ij²
    x_c_s: np.ndarray  # x_iᵀ C s


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


def check_n(n: int) -> None:
    if n < MIN_EXAMPLES:
        raise ValueError(
            f"the unbiased moment estimators need at least {MIN_EXAMPLES} examples "
            f"(‖μ‖⁴ is a U-statistic over 4 distinct examples); got n={n}"
        )


def _value(v):
    """A plain float for scalar results (readable repr, JSON-able); arrays stay arrays."""
    return float(v) if np.ndim(v) == 0 else v


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
    return Moments(
        n=sums.n,
        mu_sq=_value(t1 / n2),
        mu_4=_value(mu_4),
        mu_sigma_mu=_value(t3 / n3 - mu_4),
        tr_sigma2=_value(tr_sigma2),
        dim=sums.dim,
        kind="unbiased",
        products=sums.products,
    )


def plugin_from_sums(sums: PowerSums) -> Moments:
    """Plug-in values: m = s/n, Σ̂ = (C − s sᵀ/n)/(n − 1), then ‖m‖², ‖m‖⁴, mᵀΣ̂m, ‖Σ̂‖_F²."""
    n = np.asarray(sums.n, dtype=np.float64)
    mean_sq = sums.s_sq / n**2
    mean_sigma_mean = (sums.s_c_s / n**2 - sums.s_sq**2 / n**3) / (n - 1.0)
    sigma_frob_sq = (sums.c_frob_sq - 2.0 * sums.s_c_s / n + sums.s_sq**2 / n**2) / (n - 1.0) ** 2
    return Moments(
        n=sums.n,
        mu_sq=_value(mean_sq),
        mu_4=_value(mean_sq**2),
        mu_sigma_mu=_value(mean_sigma_mean),
        tr_sigma2=_value(sigma_frob_sq),
        dim=sums.dim,
        kind="plugin",
        products=sums.products,
    )


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
