"""Empirical misalignment by resampling (P1; docs/science.md, "estimate-misalignment (P1)")."""

import itertools

import numpy as np
import pytest

from growcert.stats import misalignment, resample, subset_sums
from growcert.stats.accumulate import SampleBlocks
from growcert.stats.resample import draw_subsets


def exact_iid_probability(x, M, K):
    """P(μ_M·g_K ≤ 0) over all ordered disjoint (I, J) with |I| = M, |J| = K from the pool."""
    n = len(x)
    hits = total = 0
    for idx in itertools.combinations(range(n), M):
        rest = [i for i in range(n) if i not in idx]
        for jdx in itertools.combinations(rest, K):
            total += 1
            hits += x[list(idx)].mean(0) @ x[list(jdx)].mean(0) <= 0
    return hits / total


@pytest.mark.parametrize("M,K", [(1, 1), (2, 1), (2, 3)])
@pytest.mark.parametrize("method", ["gram", "features"])
def test_iid_frequency_matches_exhaustive_enumeration(M, K, method):
    rng = np.random.default_rng(M * 10 + K)
    x = rng.standard_normal((8, 3)) + 0.3
    p = exact_iid_probability(x, M, K)
    replicates = 20_000
    p_hat, lo, hi = misalignment(x, None, M, K, replicates, seed=4, method=method, batch_bytes=2**14)
    # within 4 binomial SEs; subsets that were not disjoint would shift p (G_ii > 0 always)
    assert abs(p_hat - p) <= 4 * np.sqrt(p * (1 - p) / replicates)
    assert lo <= p_hat <= hi


def test_gram_and_feature_paths_give_identical_counts():
    rng = np.random.default_rng(1)
    train = rng.standard_normal((120, 30)) + 0.1
    test = rng.standard_normal((90, 30)) + 0.1
    for args in [(train, None), (train, test)]:
        # one batch each, so both paths see the very same draws
        a = misalignment(*args, 5, 7, 3000, seed=2, method="gram", batch_bytes=2**30)
        b = misalignment(*args, 5, 7, 3000, seed=2, method="features", batch_bytes=2**30)
        assert a == b


def test_train_test_mode_draws_each_side_from_its_own_pool():
    rng = np.random.default_rng(2)
    train = rng.standard_normal((200, 10)) * 0.1 + 1.0
    opposite = -train
    assert misalignment(train, opposite, 4, 4, 500, seed=0)[0] == 1.0
    assert misalignment(train, train.copy(), 4, 4, 500, seed=0)[0] == 0.0
    assert misalignment(train, train, 4, 4, 500, seed=0)[0] == 0.0  # iid: same object


def test_draws_are_disjoint_and_uniform():
    rng = np.random.default_rng(3)
    picks = draw_subsets(rng, 20_000, 10, 4)
    assert all(len(set(row)) == 4 for row in picks[:2000])
    counts = np.bincount(picks.ravel(), minlength=10)  # each index: 20000 · 4/10 expected
    expected = 20_000 * 0.4
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected * 0.6))
    first = np.bincount(picks[:, 0], minlength=10)  # the order within a row is uniform too
    assert np.all(np.abs(first - 2000) < 4 * np.sqrt(2000 * 0.9))


def test_sizes_are_checked():
    x = np.ones((10, 3))
    with pytest.raises(ValueError, match="M \\+ K = 11"):
        misalignment(x, None, 5, 6, 10, 0)
    with pytest.raises(ValueError, match="iid=True"):
        misalignment(x, x.copy(), 2, 2, 10, 0, iid=True)
    with pytest.raises(ValueError, match="max_bytes"):
        misalignment(x, None, 2, 2, 10, 0, max_bytes=10)


def brute_force_dots(train, test, pick_m, pick_k):
    """Σ_{i∈M} x_i · Σ_{j∈K} x_j per replicate, one replicate at a time in float64."""
    return np.array(
        [train[m].astype(np.float64).sum(0) @ test[k].astype(np.float64).sum(0) for m, k in zip(pick_m, pick_k)]
    )


def cancelling_pool(n=40, dim=1000, seed=0):
    """Examples ±1e4·v plus noise at float32's resolution of them: with M even, half the draws cancel the common part,
    and their dot products are small differences of large float32 sums."""
    rng = np.random.default_rng(seed)
    direction = np.ones(dim) / np.sqrt(dim)
    signs = np.resize([1.0, -1.0], n)
    return signs[:, None] * 1e4 * direction + 1e-4 * rng.standard_normal((n, dim))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_feature_path_signs_are_those_of_float64_sums_where_float32_alone_errs(dtype):
    x = cancelling_pool().astype(dtype)
    pool = resample._Pool(SampleBlocks(x), panel_width=300)
    both = draw_subsets(np.random.default_rng(1), 2000, len(x), 8)
    pick_m, pick_k = both[:, :4], both[:, 4:]
    exact = brute_force_dots(x, x, pick_m, pick_k)
    checked = resample._feature_dots(pool, pool, pick_m, pick_k)
    assert np.array_equal(checked <= 0, exact <= 0)
    # the check is what makes them agree: float32 sums alone get some signs wrong here
    single = x.astype(np.float32)
    unchecked = np.einsum("ij,ij->i", single[pick_m].sum(1), single[pick_k].sum(1), dtype=np.float64)
    assert np.count_nonzero((unchecked <= 0) != (exact <= 0)) > 10


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_both_paths_count_the_brute_force_signs_of_the_same_draws(dtype):
    rng = np.random.default_rng(5)
    train = (rng.standard_normal((300, 700)) + 0.04).astype(dtype)
    test = (rng.standard_normal((250, 700)) + 0.04).astype(dtype)
    replicates, M, K = 2500, 16, 8
    for first, second in [(train, None), (train, test)]:
        draws = np.random.default_rng(9)  # the draws misalignment makes: one shuffle per batch of 1024
        hits = 0
        for start in range(0, replicates, resample.MAX_BATCH_REPLICATES):
            rows = min(resample.MAX_BATCH_REPLICATES, replicates - start)
            if second is None:
                both = draw_subsets(draws, rows, len(first), M + K)
                pick_m, pick_k, other = both[:, :M], both[:, M:], first
            else:
                pick_m, pick_k, other = (
                    draw_subsets(draws, rows, len(first), M),
                    draw_subsets(draws, rows, len(second), K),
                    second,
                )
            hits += int(np.count_nonzero(brute_force_dots(first, other, pick_m, pick_k) <= 0))
        for method in ("gram", "features"):
            assert misalignment(first, second, M, K, replicates, seed=9, method=method)[0] == hits / replicates


def test_float64_data_beyond_float32_range_are_summed_in_float64():
    x = cancelling_pool(n=20, dim=50) * 1e36  # ±1e40: inf in float32
    both = draw_subsets(np.random.default_rng(2), 500, len(x), 8)
    pool = resample._Pool(SampleBlocks(x), panel_width=64)
    dots = resample._feature_dots(pool, pool, both[:, :4], both[:, 4:])
    assert np.all(np.isfinite(dots))
    assert np.array_equal(dots <= 0, brute_force_dots(x, x, both[:, :4], both[:, 4:]) <= 0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float64_recheck_sums_float32_rows_in_float64(dtype):
    # rows of 1 + small parts: float32 partial sums of them would round the small parts away
    rng = np.random.default_rng(3)
    x = (1.0 + rng.standard_normal((64, 40)) * 2.0**-20).astype(dtype)
    both = draw_subsets(np.random.default_rng(4), 300, len(x), 32)
    exact = brute_force_dots(x, x, both[:, :16], both[:, 16:])
    dots = subset_sums.float64_dots(x, x, both[:, :16], both[:, 16:])
    assert np.allclose(dots, exact, rtol=1e-13, atol=0)
    in_float32 = np.einsum(
        "ij,ij->i",
        x.astype(np.float32)[both[:, :16]].sum(1, dtype=np.float32),
        x.astype(np.float32)[both[:, 16:]].sum(1, dtype=np.float32),
        dtype=np.float64,
    )
    assert not np.allclose(in_float32, exact, rtol=1e-13, atol=0)  # the data can tell the two apart
