"""Exactness of the streaming U-statistics (docs/science.md, "Unbiased U-statistics"): brute force, both paths, Zarr
streaming."""

import itertools

import numpy as np
import pytest
import xarray as xr

from growcert.stats import moments, plugin_moments, reduce_examples
from growcert.stats.accumulate import SampleBlocks, accumulate
from growcert.stats.moments import leave_one_out, power_sums, unbiased_moments

FIELDS = ("mu_sq", "mu_4", "mu_sigma_mu", "tr_sigma2")


def brute_force(x):
    """The four U-statistics as averages of their kernels over all distinct index tuples."""
    n = len(x)
    g = x @ x.T
    pairs = list(itertools.permutations(range(n), 2))
    triples = list(itertools.permutations(range(n), 3))
    quads = list(itertools.permutations(range(n), 4))
    mu_sq = np.mean([g[i, j] for i, j in pairs])
    mu_4 = np.mean([g[i, j] * g[k, l] for i, j, k, l in quads])
    mu_sigma_mu = np.mean([g[i, j] * g[i, k] for i, j, k in triples]) - mu_4
    # tr Σ² = E over distinct (i,j,k,l) of h with E[(x_i - x_k)·(x_j - x_l)]² style kernel:
    # ‖Σ‖² = E[(x_i·x_j)²] − 2E[x_i·x_j x_i·x_k] + E[x_i·x_j x_k·x_l] for distinct indices.
    e_sq = np.mean([g[i, j] ** 2 for i, j in pairs])
    e_3 = np.mean([g[i, j] * g[i, k] for i, j, k in triples])
    tr_sigma2 = e_sq - 2 * e_3 + mu_4
    return dict(mu_sq=mu_sq, mu_4=mu_4, mu_sigma_mu=mu_sigma_mu, tr_sigma2=tr_sigma2)


def assert_moments_close(a, b, rtol):
    for name in FIELDS:
        va, vb = (
            float(getattr(a, name) if not isinstance(a, dict) else a[name]),
            float(getattr(b, name) if not isinstance(b, dict) else b[name]),
        )
        assert va == pytest.approx(vb, rel=rtol, abs=rtol * 1e-3), name


@pytest.mark.parametrize("n,dim", [(6, 3), (7, 5), (9, 4), (8, 8)])
@pytest.mark.parametrize("method", ["covariance", "gram"])
def test_fast_estimators_equal_brute_force_u_statistics(n, dim, method):
    rng = np.random.default_rng(n * 10 + dim)
    x = rng.standard_normal((n, dim)) + rng.standard_normal(dim)
    fast = moments(x, method=method, block_bytes=8 * dim * 2)  # blocks of 2 rows
    assert_moments_close(fast, brute_force(x), 1e-9)


def test_leave_one_out_sums_equal_recomputation_without_that_example():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((9, 4)) + 0.7
    for method in ("covariance", "gram"):
        sums, per = power_sums(x, method=method, per_example=True, block_bytes=8 * 4 * 3)
        loo = unbiased_moments(leave_one_out(sums, per))
        for i in range(len(x)):
            direct = moments(np.delete(x, i, axis=0))
            for name in FIELDS:
                assert float(getattr(loo, name)[i]) == pytest.approx(float(getattr(direct, name)), rel=1e-9, abs=1e-12)


def test_covariance_and_gram_paths_agree_on_the_same_data():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((60, 40)) + 0.3).astype(np.float32)
    a = moments(x, method="covariance", block_bytes=8 * 40 * 7)
    b = moments(x, method="gram", block_bytes=8 * 40 * 11)
    assert_moments_close(a, b, 1e-10)
    assert a.n == b.n == 60 and a.dim == b.dim == 40


def test_auto_path_follows_the_smaller_of_n_and_dim():
    rng = np.random.default_rng(0)
    assert accumulate(SampleBlocks(rng.standard_normal((10, 30))))[0].method == "gram"
    assert accumulate(SampleBlocks(rng.standard_normal((30, 10))))[0].method == "covariance"


def test_fewer_than_four_examples_is_a_clear_error():
    with pytest.raises(ValueError, match=r"at least 4 examples.*n=3"):
        moments(np.ones((3, 5)))


def test_trailing_dims_are_flattened_and_torch_like_input_accepted():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((12, 2, 3))

    class FakeTensor:  # duck-typed like torch.Tensor: .detach().cpu()
        def detach(self):
            return self

        def cpu(self):
            return self

        def __array__(self, dtype=None, copy=None):
            return x

    assert_moments_close(moments(FakeTensor()), moments(x.reshape(12, 6)), 1e-12)


def write_store(path, q, chunk, dims):
    ds = xr.Dataset({"q": (dims, q.astype(np.float32)), "z": (dims, q.astype(np.float32))})
    ds = ds.assign_coords(split=("sample", np.where(np.arange(len(q)) % 2, "train", "test")))
    ds.chunk({"sample": chunk}).to_zarr(path, group="block0", consolidated=False, mode="w")
    return xr.open_zarr(path, group="block0", consolidated=False)


@pytest.mark.parametrize("how", ["sum_positions", "flatten"])
def test_streaming_from_chunked_zarr_equals_in_memory(tmp_path, how):
    rng = np.random.default_rng(5)
    q = rng.standard_normal((53, 4, 6)).astype(np.float32) + 0.2
    ds = write_store(tmp_path / "s.zarr", q, chunk=5, dims=("sample", "token", "feature"))
    lazy = reduce_examples(ds.q, how)
    assert lazy.chunks is not None  # still a dask array, nothing loaded yet
    in_memory = reduce_examples(q, how, position_axes=(1,))
    dim = in_memory.shape[1]
    for method in ("covariance", "gram"):
        # blocks of 3 store chunks (15 rows) plus a short tail block
        streamed = moments(lazy, method=method, block_bytes=8 * dim * 16)
        reference = moments(in_memory, method=method)
        assert_moments_close(streamed, reference, 1e-10)
        streamed_plugin = plugin_moments(lazy, method=method, block_bytes=8 * dim * 16)
        assert_moments_close(streamed_plugin, plugin_moments(in_memory), 1e-10)
    # Opened without dask (lazily indexed backend array): still read block by block.
    plain = xr.open_dataset(tmp_path / "s.zarr", engine="zarr", group="block0", consolidated=False, chunks=None)
    if how == "flatten":
        blocks = SampleBlocks(plain.q, block_bytes=8 * dim * 16)
        assert blocks.bounds[:2] == [(0, 15), (15, 30)]  # whole on-disk chunks of 5
        assert_moments_close(moments(plain.q, block_bytes=8 * dim * 16), moments(in_memory), 1e-10)


def test_blocks_are_whole_store_chunks_within_the_budget(tmp_path):
    q = np.zeros((23, 3, 2), dtype=np.float32)
    ds = write_store(tmp_path / "c.zarr", q, chunk=4, dims=("sample", "token", "feature"))
    blocks = SampleBlocks(reduce_examples(ds.q, "flatten"), block_bytes=8 * 6 * 9)
    assert blocks.bounds == [(0, 8), (8, 16), (16, 23)]
    assert sum(len(b) for b in blocks) == 23


def test_plugin_is_the_sample_mean_and_covariance():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((30, 5)) + 1.0
    mean, cov = x.mean(axis=0), np.cov(x, rowvar=False)
    p = plugin_moments(x)
    assert float(p.mu_sq) == pytest.approx(mean @ mean, rel=1e-12)
    assert float(p.mu_sigma_mu) == pytest.approx(mean @ cov @ mean, rel=1e-12)
    assert float(p.tr_sigma2) == pytest.approx(np.sum(cov * cov), rel=1e-12)


def test_gram_path_on_float32_blocks_sums_float64_panels_exactly(monkeypatch):
    import growcert.stats.accumulate as accumulate_module

    rng = np.random.default_rng(6)
    x = (rng.standard_normal((20, 300)) + 0.1).astype(np.float32)
    reference = moments(x.astype(np.float64), method="gram")
    monkeypatch.setattr(accumulate_module, "PANEL_BYTES", 8 * 20 * 64)  # 64-column panels
    blocks = SampleBlocks(x, block_bytes=4 * 300 * 8).stored()
    assert blocks.read(0).dtype == np.float32 and len(blocks) == 3
    panelled = moments(x, method="gram", block_bytes=4 * 300 * 8)
    assert_moments_close(panelled, reference, 1e-10)
    assert_moments_close(moments(x, method="covariance"), reference, 1e-10)


# float32 block products (accumulate.py, "float32 products"): small data, with the size threshold lifted
QUANTITIES = ("mu_4", "mu_sigma_mu", "tr_sigma2")


def largest_relative_change(a, b):
    return max(abs(float(getattr(a, name)) / float(getattr(b, name)) - 1.0) for name in QUANTITIES)


@pytest.fixture
def verdicts(monkeypatch):
    """The rule's verdicts, in order (first block, then end of pass), with the size threshold lifted."""
    import growcert.stats.accumulate as accumulate_module

    seen = []
    choose = accumulate_module.choose_products
    monkeypatch.setattr(accumulate_module, "FLOAT32_MIN_PRODUCTS", 0)
    monkeypatch.setattr(accumulate_module, "choose_products", lambda *args: seen.append(choose(*args)) or seen[-1])
    return seen


def shifted(shift, seed=0, n=2000, dim=128):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, dim)) + shift).astype(np.float32)


BLOCK_BYTES = 8 * 128 * 500  # four blocks of 500 rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float32_products_agree_with_float64_within_the_tolerance_on_random_data(seed, verdicts):
    from growcert.stats.accumulate import FLOAT32_TOLERANCE

    x = shifted(0.05, seed)
    exact = moments(x, products="float64", block_bytes=BLOCK_BYTES)
    single = moments(x, products="float32", block_bytes=BLOCK_BYTES)
    assert single.products == "float32" and exact.products == "float64"
    assert largest_relative_change(single, exact) <= FLOAT32_TOLERANCE
    chosen = moments(x, block_bytes=BLOCK_BYTES)
    assert chosen.products == "float32" and [v.products for v in verdicts] == ["float32", "float32"]
    assert largest_relative_change(chosen, exact) <= FLOAT32_TOLERANCE
    assert float(chosen.mu_sq) == float(exact.mu_sq)  # s and a2 are float64 either way


def test_float32_products_match_brute_force_u_statistics():
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((9, 5)) + 0.4).astype(np.float32)
    assert_moments_close(
        moments(x, method="covariance", products="float32", block_bytes=8 * 5 * 3),
        brute_force(x.astype(np.float64)),
        1e-5,
    )


def test_a_strong_mean_keeps_float64_products_where_float32_would_miss_the_tolerance(verdicts):
    from growcert.stats.accumulate import FLOAT32_TOLERANCE

    x = shifted(4.0)  # d_2 ≈ 10³: the estimates are small differences of large terms
    exact = moments(x, products="float64", block_bytes=BLOCK_BYTES)
    assert largest_relative_change(moments(x, products="float32", block_bytes=BLOCK_BYTES), exact) > FLOAT32_TOLERANCE
    chosen = moments(x, block_bytes=BLOCK_BYTES)
    assert chosen.products == "float64" and [v.products for v in verdicts] == ["float64"]
    for name in FIELDS:  # the first block's float32 product is only looked at
        assert float(getattr(chosen, name)) == float(getattr(exact, name))


def test_the_end_of_pass_check_sees_outlying_rows_the_first_block_lacks(verdicts):
    from growcert.stats.accumulate import FLOAT32_SAFETY, FLOAT32_TOLERANCE

    x = shifted(0.3)
    x[[700, 1300, 1900]] *= 100  # three heavy rows, none in the first block
    exact = moments(x, products="float64", block_bytes=BLOCK_BYTES)
    # float32 would stay within the tolerance, but not with the margin the rule asks for
    assert (
        largest_relative_change(moments(x, products="float32", block_bytes=BLOCK_BYTES), exact)
        > FLOAT32_TOLERANCE / FLOAT32_SAFETY
    )
    chosen = moments(x, block_bytes=BLOCK_BYTES)
    assert [v.products for v in verdicts] == ["float32", "float64"] and chosen.products == "float64"
    for name in FIELDS:  # recomputed with float64 products: the float64 result itself
        assert float(getattr(chosen, name)) == float(getattr(exact, name))


def test_float32_products_need_float32_data_a_covariance_path_and_size():
    rng = np.random.default_rng(0)
    small = rng.standard_normal((400, 30)).astype(np.float32) + 0.05
    assert moments(small, block_bytes=8 * 30 * 50).products == "float64"  # n N² far below 2³²
    with pytest.raises(ValueError, match="float32 data"):
        moments(small.astype(np.float64), products="float32")
    with pytest.raises(ValueError, match="covariance path"):
        moments(small[:20], products="float32")
    with pytest.raises(ValueError, match="unknown products"):
        moments(small, products="float16")
