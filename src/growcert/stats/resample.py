"""Empirical misalignment P(μ_M · g_K ≤ 0) by resampling (P1; docs/science.md, "estimate-misalignment (P1)").

Each replicate draws M examples from the train pool and K from the test pool
(disjoint draws from one pool in the ``iid`` mode, the certificate's
assumption) and records whether μ_M · g_K ≤ 0.  The frequency over R
replicates estimates the misalignment probability, with a Wilson interval.

All replicates of a batch are one selection product.  With selection
matrices S_M (R×n_train) and S_K (R×n_test) of 1/M and 1/K weights,

    μ_M · g_K = rows of (S_M X_train) ⊙ (S_K X_test)  =  diag(S_M G S_Kᵀ),  G = X_train X_testᵀ.

Applying S as a *dense* matrix costs R·n·N multiply-adds, n/M times more than
the M rows it selects; in benchmarks/estimators.py it is about as slow as a
plain Python loop over replicates at n = 512, N = 1,024 and 2-8x slower at
larger n or N.  The selection is therefore applied sparsely, as gathers, in
whichever of two equivalent forms is cheaper:

- ``gram``: precompute G once (n_train·n_test·N, BLAS), then each replicate
  is the sum of an M×K sub-block of G: M·K gathered entries, independent of N;
- ``features``: each replicate sums M rows and K rows of X (M+K)·N values.

Only the sign matters, so the 1/(MK) scale is dropped.  Subsets are drawn by a
partial Fisher–Yates shuffle vectorised over the replicates of a batch (a
uniformly random ordered prefix of each row's permutation), so memory is
bounded by the batch, not by R.
"""

from __future__ import annotations

import numpy as np

from growcert.stats.accumulate import DEFAULT_BLOCK_BYTES, SampleBlocks, gram_matrix
from growcert.stats.intervals import wilson_interval

DEFAULT_BATCH_BYTES = 64 * 2**20
# Beyond ~1000 replicates per batch the gathers and the shuffle state fall out of cache
# (measured: 35 ms per 10,000 replicates at 500 rows, 78 ms at 2,000).
MAX_BATCH_REPLICATES = 1024
DEFAULT_MAX_BYTES = 4 * 2**30  # the Gram matrix or the in-memory pools, whichever path
GRAM, FEATURES = "gram", "features"
# Rough costs in ns on a 2-core AVX2 machine, only used to pick the cheaper path:
# a BLAS multiply-add, a random gather from G, a gathered element of a contiguous row.
_NS_PER_MAC, _NS_PER_RANDOM_GATHER, _NS_PER_ROW_ELEMENT = 0.07, 5.0, 1.0


def draw_subsets(rng: np.random.Generator, rows: int, n: int, m: int) -> np.ndarray:
    """(rows, m) indices: each row the first m entries of an independent uniform permutation of n."""
    if m > n:
        raise ValueError(f"cannot draw {m} distinct examples from a pool of {n}")
    # The smallest index type keeps the (rows, n) state in cache: int16 is ~1.4x faster than int32.
    dtype = np.int16 if n < 2**15 else np.int32 if n < 2**31 else np.int64
    perm = np.empty((rows, n), dtype=dtype)
    perm[:] = np.arange(n, dtype=perm.dtype)
    row = np.arange(rows)
    for t in range(m):  # step t of Fisher–Yates for every row at once
        j = t + rng.integers(0, n - t, size=rows)
        picked = perm[row, j]
        perm[row, j] = perm[:, t]
        perm[:, t] = picked
    return perm[:, :m].astype(np.intp)


def _choose_path(n_train: int, n_test: int, dim: int, M: int, K: int, replicates: int,
                 max_bytes: int, method: str) -> str:
    gram_bytes, feature_bytes = 8 * n_train * n_test, 8 * (n_train + n_test) * dim
    if method == "auto":
        gram_ns = n_train * n_test * dim * _NS_PER_MAC + replicates * M * K * _NS_PER_RANDOM_GATHER
        feature_ns = replicates * (M + K) * dim * _NS_PER_ROW_ELEMENT
        ranked = [GRAM, FEATURES] if gram_ns <= feature_ns else [FEATURES, GRAM]
    elif method in (GRAM, FEATURES):
        ranked = [method]
    else:
        raise ValueError(f"unknown method {method!r}; expected auto, {GRAM} or {FEATURES}")
    for path in ranked:
        if (gram_bytes if path == GRAM else feature_bytes) <= max_bytes:
            return path
    raise ValueError(
        f"misalignment needs {gram_bytes / 2**30:.1f} GiB (Gram) or {feature_bytes / 2**30:.1f} GiB "
        f"(pools in memory), above max_bytes={max_bytes / 2**30:.1f} GiB; subsample the pools"
    )


def _load(blocks: SampleBlocks) -> np.ndarray:
    return np.concatenate(list(blocks)) if len(blocks) else np.zeros((0, blocks.dim))


def misalignment(train, test, M: int, K: int, replicates: int,
                 seed: int = 0, *, iid: bool | None = None, level: float = 0.95,
                 method: str = "auto", batch_bytes: int = DEFAULT_BATCH_BYTES,
                 max_bytes: int = DEFAULT_MAX_BYTES,
                 block_bytes: int = DEFAULT_BLOCK_BYTES) -> tuple[float, float, float]:
    """(p_hat, lo, hi): frequency of μ_M·g_K ≤ 0 over `replicates` draws, Wilson interval at `level`.

    train, test: reduced gradients (anything moments() accepts).  iid mode
    (default when `test` is None or `test is train`, or iid=True): M and K
    are disjoint draws from `train`.  Otherwise M from `train`, K from `test`.
    method: "auto" (cheaper of the two, see the module docstring), "gram", "features".
    replicates has no default here: its one default is the config schema's (alignment.replicates), which
    the stage's settings carry (`growcert.config.stage_settings`); this module stays free of config code.
    """
    if iid is None:
        iid = test is None or test is train
    if iid and test is not None and test is not train:
        raise ValueError("iid=True draws both subsets from `train`; pass test=None or test=train")
    if M < 1 or K < 1 or replicates < 1:
        raise ValueError(f"M, K and replicates must be positive; got M={M}, K={K}, R={replicates}")
    first = SampleBlocks(train, block_bytes)
    second = first if iid else SampleBlocks(test, block_bytes)
    if iid and M + K > first.n:
        raise ValueError(f"iid mode draws M + K = {M + K} distinct examples from a pool of {first.n}")
    if not iid and (M > first.n or K > second.n):
        raise ValueError(f"cannot draw M={M} of {first.n} train and K={K} of {second.n} test examples")
    path = _choose_path(first.n, second.n, first.dim, M, K, replicates, max_bytes, method)
    rng = np.random.default_rng(seed)

    if path == GRAM:
        gram = gram_matrix(first, None if iid else second).ravel()
        per_replicate = 8 * (2 * M * K + first.n + (0 if iid else second.n))
    else:
        x_train = _load(first)
        x_test = x_train if iid else _load(second)
        per_replicate = 8 * (max(M, K) * first.dim + first.n + (0 if iid else second.n))
    batch = int(max(1, min(replicates, MAX_BATCH_REPLICATES, batch_bytes // per_replicate)))

    misaligned = 0
    for start in range(0, replicates, batch):
        rows = min(batch, replicates - start)
        if iid:
            both = draw_subsets(rng, rows, first.n, M + K)
            pick_m, pick_k = both[:, :M], both[:, M:]
        else:
            pick_m, pick_k = draw_subsets(rng, rows, first.n, M), draw_subsets(rng, rows, second.n, K)
        if path == GRAM:
            # Flat indices into G: one 1-D take is ~10x faster than 2-D fancy indexing.
            flat = pick_m[:, :, None] * second.n + pick_k[:, None, :]
            dots = gram.take(flat).sum(axis=(1, 2))
        else:
            mean_m = x_train[pick_m.ravel()].reshape(rows, M, -1).sum(axis=1)
            mean_k = x_test[pick_k.ravel()].reshape(rows, K, -1).sum(axis=1)
            dots = np.einsum("ij,ij->i", mean_m, mean_k)
        misaligned += int(np.count_nonzero(dots <= 0))
    lo, hi = wilson_interval(misaligned, replicates, level)
    return misaligned / replicates, lo, hi
