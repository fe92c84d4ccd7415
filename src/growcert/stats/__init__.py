"""Offline estimators on stored activation gradients (P1; docs/science.md, "estimate-alignment (P1)").

Pure numerics (numpy, dask, xarray, zarr; numba for the resampling loops): nothing here imports torch or the
package's model and training code; torch tensors are accepted by duck typing.

    reduce_examples(x, how)            one vector per example (reduce.py)
    moments(x) -> Moments              unbiased ‖μ‖², ‖μ‖⁴, μᵀΣμ, tr Σ², streaming (moments.py)
    plugin_moments(x) -> Moments       the biased plug-in counterparts, for comparison
    effective_dims(m)                  (d_par, d_2, d_align)               (certificates.py)
    certificates(m, M, K)              (b_exact, b_align, n_eff)
    alignment_row(x, M=, K=)           one table row: moments, ratios, intervals, status
    misalignment(train, test, M, K, replicates, seed) -> (p_hat, lo, hi)  (resample.py)
    common_loss_grid, matched_loss     d_align at matched held-out loss (regime.py: the P1 regime map)
    width_slopes, width_trend          per-seed width slopes, seed-level interval and verdict per cell
    regime_summary(trend)              rising / falling / flat counts and where d_align >= 1
"""

from growcert.stats.certificates import alignment_row, certificates, effective_dims
from growcert.stats.moments import Moments, moments, plugin_moments
from growcert.stats.reduce import reduce_examples
from growcert.stats.regime import common_loss_grid, matched_loss, regime_summary, width_slopes, width_trend
from growcert.stats.resample import misalignment

__all__ = [
    "Moments",
    "alignment_row",
    "certificates",
    "common_loss_grid",
    "effective_dims",
    "matched_loss",
    "misalignment",
    "moments",
    "plugin_moments",
    "reduce_examples",
    "regime_summary",
    "width_slopes",
    "width_trend",
]
