"""Empirical misalignment by resampling (P1; docs/science.md, "estimate-misalignment (P1)")."""

import itertools

import numpy as np
import pytest

from growcert.stats import misalignment
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
