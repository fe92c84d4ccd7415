"""Reduce stored activation gradients to one vector per example (docs/science.md,
"Reducing q to one vector per example").

The store keeps q in its native layout, ``(sample, channel, height, width)``
for conv nets or ``(sample, token, feature)`` for language models.  The
estimators (docs/science.md, "estimate-alignment (P1)") need one vector x_i in R^N per example, and which
vector is a modelling choice that changes d_align by orders of magnitude
(P1's second and third pilots, docs/science.md, "P1: pilots"), so it is always explicit:

- ``sum_positions``: sum over spatial / token positions, keep channels or
  features.  This is the gradient that a growth step *shared across
  positions* (a bias-like vector, a weight-shared block) sees: position noise
  averages out.  Default for weight-shared families.
- ``flatten``: every (position, feature) entry is its own coordinate, as for a
  per-position insertion.

Both work lazily on dask-backed DataArrays opened from Zarr (the result stays
chunked along ``sample`` only, nothing is loaded), and on numpy arrays (or
torch tensors, duck-typed) where the position axes must be named explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

SUM_POSITIONS = "sum_positions"
FLATTEN = "flatten"
REDUCTIONS = (SUM_POSITIONS, FLATTEN)

SAMPLE_DIM = "sample"
# Dims that index a position (summed by sum_positions) or a feature (kept).
POSITION_DIMS = ("height", "width", "token")
FEATURE_DIMS = ("channel", "feature")
# Name of the single trailing dim after `flatten`.
COMPONENT_DIM = "component"


def as_array(x):
    """numpy view of ``x``; torch tensors are accepted by duck typing (no torch import here)."""
    if hasattr(x, "detach"):
        return np.asarray(x.detach().cpu())
    return x


def _check_how(how: str) -> None:
    if how not in REDUCTIONS:
        raise ValueError(f"unknown reduction {how!r}; expected one of {', '.join(REDUCTIONS)}")


def reduce_examples(x, how: str = SUM_POSITIONS, *, position_axes: Sequence[int] | None = None):
    """One vector per example from stored activation gradients.

    x:   an xarray DataArray with a ``sample`` dim (numpy- or dask-backed; the
         result is lazy and chunked like the input), or an array-like whose
         axis 0 is the sample axis (numpy array, torch tensor).
    how: ``"sum_positions"`` or ``"flatten"`` (see the module docstring).
    position_axes: for array input with ``sum_positions``, the axes to sum
         (positive or negative, never axis 0).  Not used by ``flatten``.

    Returns a DataArray ``(sample, <feature dim>)`` / ``(sample, component)``
    for DataArray input, a numpy array ``(n, N)`` otherwise.  Sums accumulate
    in float64 (a sum over many positions in float32 loses digits the
    estimators later need); ``flatten`` keeps the stored dtype (no arithmetic).
    """
    _check_how(how)
    if isinstance(x, xr.DataArray):
        return _reduce_dataarray(x, how)
    arr = np.asarray(as_array(x))
    if arr.ndim < 1:
        raise ValueError("reduce_examples needs an array with a sample axis (ndim >= 1)")
    n = arr.shape[0]
    if how == FLATTEN:
        return arr.reshape(n, -1)
    if position_axes is None:
        raise ValueError(
            "reduce_examples(how='sum_positions') on a plain array needs position_axes "
            "(which axes are token/spatial positions); pass a DataArray to use dim names"
        )
    axes = tuple(sorted({int(a) % arr.ndim for a in position_axes}))
    if 0 in axes:
        raise ValueError("position_axes may not include axis 0, the sample axis")
    return np.sum(arr, axis=axes, dtype=np.float64).reshape(n, -1)


def _reduce_dataarray(x: xr.DataArray, how: str) -> xr.DataArray:
    if SAMPLE_DIM not in x.dims:
        raise ValueError(f"reduce_examples needs a {SAMPLE_DIM!r} dim; got dims {x.dims}")
    x = x.transpose(SAMPLE_DIM, ...)
    others = [d for d in x.dims if d != SAMPLE_DIM]
    # Keep only coordinates that live on the sample axis (loss, label, split, ...);
    # coordinates on reduced dims no longer mean anything.
    sample_coords = {k: v for k, v in x.coords.items() if v.dims == (SAMPLE_DIM,)}
    if how == FLATTEN:
        # Reshape the underlying array: with chunks along `sample` only, dask
        # reshapes chunk by chunk, so the result stays lazy and sample-chunked.
        data = x.data.reshape(x.shape[0], -1)
        return xr.DataArray(
            data,
            dims=(SAMPLE_DIM, COMPONENT_DIM),
            coords=sample_coords,
            name=x.name,
            attrs={**x.attrs, "reduction": how},
        )
    unknown = [d for d in others if d not in POSITION_DIMS + FEATURE_DIMS]
    if unknown:
        raise ValueError(
            f"reduce_examples(how='sum_positions') does not know whether dims {unknown} are "
            f"positions {POSITION_DIMS} or features {FEATURE_DIMS}; rename them or use 'flatten'"
        )
    positions = [d for d in others if d in POSITION_DIMS]
    # skipna=False: a NaN gradient must surface, not be silently summed as zero.
    reduced = x.sum(dim=positions, skipna=False, dtype=np.float64) if positions else x
    kept = [d for d in reduced.dims if d != SAMPLE_DIM]
    name = kept[0] if len(kept) == 1 else COMPONENT_DIM  # several feature dims: one vector
    data = reduced.data.reshape(x.shape[0], -1)
    return xr.DataArray(
        data, dims=(SAMPLE_DIM, name), coords=sample_coords, name=x.name, attrs={**x.attrs, "reduction": how}
    )
