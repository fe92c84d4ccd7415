"""Per-example reductions of stored activation gradients (docs/science.md, "Reducing q to one vector per example")."""

import numpy as np
import pytest
import xarray as xr

from growcert.stats import reduce_examples


def lazy_array(values, dims, chunk=4):
    return xr.DataArray(values, dims=dims).chunk({"sample": chunk})


@pytest.mark.parametrize(
    "dims,axes", [(("sample", "channel", "height", "width"), (2, 3)), (("sample", "token", "feature"), (1,))]
)
def test_dask_reductions_equal_numpy_and_stay_lazy(dims, axes):
    rng = np.random.default_rng(0)
    values = rng.standard_normal((10,) + (3, 4, 5)[: len(dims) - 1]).astype(np.float32)
    lazy = lazy_array(values, dims)
    summed = reduce_examples(lazy, "sum_positions")
    assert summed.chunks[0] == (4, 4, 2) and len(summed.chunks[1]) == 1  # chunked along sample only
    kept = "channel" if "channel" in dims else "feature"
    assert summed.dims == ("sample", kept)
    np.testing.assert_allclose(summed.values, reduce_examples(values, "sum_positions", position_axes=axes), rtol=1e-12)
    np.testing.assert_allclose(summed.values, values.sum(axis=axes, dtype=np.float64), rtol=1e-12)
    flat = reduce_examples(lazy, "flatten")
    assert flat.chunks[0] == (4, 4, 2) and flat.shape == (10, values[0].size)
    np.testing.assert_array_equal(flat.values, reduce_examples(values, "flatten"))
    assert flat.dtype == np.float32  # flatten does no arithmetic


def test_sample_coordinates_survive_and_order_of_dims_does_not_matter():
    values = np.arange(2 * 3 * 4, dtype=np.float32).reshape(3, 4, 2)  # (token, sample, feature)
    da = xr.DataArray(
        values, dims=("token", "sample", "feature"), coords={"split": ("sample", ["train", "test", "train", "test"])}
    )
    out = reduce_examples(da, "sum_positions")
    assert list(out.split.values) == ["train", "test", "train", "test"]
    np.testing.assert_array_equal(out.values, values.sum(axis=0))


def test_unknown_reduction_and_unknown_dims_are_named():
    da = xr.DataArray(np.zeros((2, 3)), dims=("sample", "feature"))
    with pytest.raises(ValueError, match="'mean'"):
        reduce_examples(da, "mean")
    with pytest.raises(ValueError, match="'mean'"):
        reduce_examples(np.zeros((2, 3)), "mean")
    odd = xr.DataArray(np.zeros((2, 3, 4)), dims=("sample", "head", "feature"))
    with pytest.raises(ValueError, match="head"):
        reduce_examples(odd, "sum_positions")
    assert reduce_examples(odd, "flatten").shape == (2, 12)


def test_numpy_sum_positions_needs_explicit_axes():
    with pytest.raises(ValueError, match="position_axes"):
        reduce_examples(np.zeros((2, 3, 4)), "sum_positions")
    with pytest.raises(ValueError, match="axis 0"):
        reduce_examples(np.zeros((2, 3, 4)), "sum_positions", position_axes=(0,))


def test_nan_gradients_surface_instead_of_being_skipped():
    values = np.ones((4, 3, 2))
    values[1, 0, 0] = np.nan
    out = reduce_examples(lazy_array(values, ("sample", "token", "feature")), "sum_positions")
    assert np.isnan(out.values[1, 0]) and not np.isnan(out.values[0]).any()


def test_stats_package_imports_no_torch_and_no_model_code():
    import subprocess
    import sys

    code = (
        "import sys, growcert.stats; "
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'growcert.models', "
        "'growcert.stages.train', 'growcert.models.capture'))]; print(bad); assert not bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
