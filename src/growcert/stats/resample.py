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
larger n or N.  The selection is therefore applied sparsely, in whichever of
two equivalent forms is cheaper (`_choose_path`, a cost model):

- ``gram``: precompute G once in float64 (n_train·n_test·N, BLAS), then each
  replicate is the sum of an M×K sub-block of G: M·K gathered entries,
  independent of N, but each a random read that misses the cache once G
  outgrows it;
- ``features``: each replicate sums M rows and K rows of X, (M+K)·N values read
  in order, in **float32**, then one float64 dot product; X is cut into column
  panels of ≤ 1 MiB so that the rows a batch sums stay in a core's cache.

The gathers and sums of both paths, and the draws, are compiled loops
(`growcert.stats.subset_sums`): numpy would first materialise every gathered
index or a sparse selection matrix, which cost 3-10x the loops' time.  The
float32 sums are checked, not trusted.  With
  u = 2⁻²⁴, γ_k = k u/(1 − k u), A = Σ_{i∈M} ‖x_i‖ and B = Σ_{j∈K} ‖x_j‖, the
  float32 sum of the M rows is within e_M = ε_M A + M √N 2⁻¹⁵⁰ of the exact one
  in norm, where ε_M = u_in + γ_{M−1}(1 + u_in), u_in = u when float64 data are
  rounded to float32 (0 when they are stored as float32) and the last term
  covers a value that the rounding takes below float32's normal range.  The
  computed dot D̂ is then within

      bound = 2 [e_M (B + e_K) + A e_K + γ⁽⁶⁴⁾_N (A + e_M)(B + e_K)]

  of the exact one (Higham, Accuracy and Stability of Numerical Algorithms,
  §3.1 and §4.2; the factor 2 covers the rounding of the bound itself).  A
  replicate whose |D̂| ≤ bound is recomputed in float64 (rows summed as in
  float64 data), so every sign, and p̂, is the one float64 sums give.  For
  unit-scale data the bound is ~1e-5 A B, and ~1 % of replicates or fewer are
  recomputed.  float64 data beyond float32's range are summed in float64.

Only the sign matters, so the 1/(MK) scale is dropped.  Subsets are drawn by a
partial Fisher–Yates shuffle of each replicate (a uniformly random ordered
prefix of its permutation), from integers drawn for a whole batch in one call,
so memory is bounded by the batch, not by R; both paths see the same draws.
"""

from __future__ import annotations

import numpy as np

from growcert.stats.accumulate import DEFAULT_BLOCK_BYTES, SampleBlocks, gram_matrix, row_norms_sq
from growcert.stats.intervals import wilson_interval

DEFAULT_BATCH_BYTES = 64 * 2**20
# The batch sets the draws (one call to the generator per batch), so this number is part of what a
# seed means: changing it changes every draw. 1024 keeps a batch's draws (≤ 1024·(M+K) indices) in cache.
MAX_BATCH_REPLICATES = 1024
DEFAULT_MAX_BYTES = 4 * 2**30  # the Gram matrix or the in-memory pools, whichever path
GRAM, FEATURES = "gram", "features"
# Rough costs in ns of each path's inner operation (for R = 10,000, M = K = 32, n = 512-2,000, N = 1,024-4,096),
# only used to pick the cheaper path, so only their ratios matter: a float64 multiply-add of the Gram product
# (a syrk in the iid mode, half the products of a gemm); a random read of G by the compiled loop,
# 1.0 ns while G fits in a core's cache (2 MiB) and 3.6 ns at 32 MiB, which 1.0 ns times
# (size / 2 MiB)^0.46 follows; a float32 row element summed by the compiled loop.
_NS_PER_MAC, _NS_PER_CACHED_GATHER, _NS_PER_ROW_ELEMENT = 0.04, 1.0, 0.065
_CACHED_GRAM_BYTES = 2 * 2**20
PANEL_BYTES = 2**20  # one float32 column panel of a pool, features path: half a core's L2 cache (best of 0.25-4 MiB)
UNIT_ROUNDOFF = 2.0**-24  # float32
UNIT_ROUNDOFF_64 = 2.0**-53
FLOAT32_UNDERFLOW = 2.0**-150  # the largest error of rounding a float64 into float32's subnormal range


def _loops():
    """`growcert.stats.subset_sums`, imported on first use: numba's import (~0.3 s) is paid only by the jobs that
    resample, not by every user of growcert.stats."""
    from growcert.stats import subset_sums

    return subset_sums


def draw_subsets(rng: np.random.Generator, rows: int, n: int, m: int) -> np.ndarray:
    """(rows, m) indices: each row the first m entries of an independent uniform permutation of n."""
    if m > n:
        raise ValueError(f"cannot draw {m} distinct examples from a pool of {n}")
    steps = np.arange(m)[:, None]
    # Step t swaps position t with t + U{0..n−t−1}; one call draws every step's integers of the batch.
    return _loops().partial_shuffles(n, rng.integers(0, n - steps, size=(m, rows)))


def _gamma(k: int, unit_roundoff: float) -> float:
    """γ_k = k u / (1 − k u): the relative error bound of a sum or dot product of k + 1 terms."""
    return k * unit_roundoff / (1.0 - k * unit_roundoff)


def _choose_path(
    n_train: int,
    n_test: int,
    dim: int,
    M: int,
    K: int,
    replicates: int,
    max_bytes: int,
    method: str,
    symmetric: bool = False,
) -> str:
    gram_bytes, feature_bytes = 8 * n_train * n_test, 12 * (n_train + n_test) * dim
    if method == "auto":
        gather = _NS_PER_CACHED_GATHER * max(1.0, (gram_bytes / _CACHED_GRAM_BYTES) ** 0.46)
        macs = n_train * n_test * dim / (2 if symmetric else 1)
        gram_ns = macs * _NS_PER_MAC + replicates * M * K * gather
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
    parts = list(blocks)
    if len(parts) == 1:  # the whole pool already (a view, when the data are in memory)
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros((0, blocks.dim), blocks.dtype)


class _Pool:
    """One pool in memory for the features path: the data as stored (float32 or float64), float32
    column panels for the sums, the row norms, and what rounding to the panels' precision costs."""

    def __init__(self, blocks: SampleBlocks, panel_width: int):
        self.exact = _load(blocks.stored())
        in_range = (
            self.exact.dtype == np.float32
            or not self.exact.size
            or (max(-self.exact.min(), self.exact.max()) < np.finfo(np.float32).max)
        )
        dtype = np.float32 if in_range else np.float64
        # (panels, n, width), the last panel zero-padded: zeros add nothing to a sum or a dot
        count = -(-blocks.dim // panel_width)
        self.panels = _loops().cache_aligned_zeros((count, len(self.exact), panel_width), dtype)
        for p in range(count):
            part = self.exact[:, p * panel_width : (p + 1) * panel_width]
            self.panels[p, :, : part.shape[1]] = part
        self.norms = np.sqrt(row_norms_sq(self.exact))
        self.unit_roundoff = UNIT_ROUNDOFF if in_range else UNIT_ROUNDOFF_64
        rounded = self.exact.dtype != dtype
        self.input_roundoff = self.unit_roundoff if rounded else 0.0
        self.row_underflow = FLOAT32_UNDERFLOW * np.sqrt(blocks.dim) if rounded else 0.0

    def sum_error(self, picks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(A, e) per replicate: A = Σ‖x_i‖ over its picks, e the bound on ‖computed sum − exact sum‖."""
        m = picks.shape[1]
        relative = self.input_roundoff + _gamma(m - 1, self.unit_roundoff) * (1.0 + self.input_roundoff)
        norms = self.norms[picks].sum(axis=1)
        return norms, relative * norms + m * self.row_underflow


def _feature_dots(first: _Pool, second: _Pool, pick_m: np.ndarray, pick_k: np.ndarray) -> np.ndarray:
    """Σ_{i∈M} x_i · Σ_{j∈K} x_j per replicate, with the sign of float64 sums (module docstring)."""
    loops = _loops()
    dots = loops.panel_dots(first.panels, second.panels, pick_m, pick_k)
    (a, e_m), (b, e_k) = first.sum_error(pick_m), second.sum_error(pick_k)
    dot_error = _gamma(first.exact.shape[1], UNIT_ROUNDOFF_64)
    bound = 2.0 * (e_m * (b + e_k) + a * e_k + dot_error * (a + e_m) * (b + e_k))
    unsure = np.flatnonzero(np.abs(dots) <= bound)
    if len(unsure):
        dots[unsure] = loops.float64_dots(first.exact, second.exact, pick_m[unsure], pick_k[unsure])
    return dots


def misalignment(
    train,
    test,
    M: int,
    K: int,
    replicates: int,
    seed: int = 0,
    *,
    iid: bool | None = None,
    level: float = 0.95,
    method: str = "auto",
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> tuple[float, float, float]:
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
    path = _choose_path(first.n, second.n, first.dim, M, K, replicates, max_bytes, method, symmetric=iid)
    rng = np.random.default_rng(seed)

    if path == GRAM:
        gram = gram_matrix(first, None if iid else second)
        per_replicate = 8 * (2 * M * K + first.n + (0 if iid else second.n))
    else:
        # a multiple of 16 float32s (one AVX-512 register), no wider than the data needs
        panel_width = min(max(16, PANEL_BYTES // (4 * max(first.n, second.n)) // 16 * 16), -(-first.dim // 16) * 16)
        train_pool = _Pool(first, panel_width)
        test_pool = train_pool if iid else _Pool(second, panel_width)
        # two float32 sums of N, the selection's indices, the shuffle state
        per_replicate = 8 * (first.dim + M + K + first.n + (0 if iid else second.n))
    # The batch sets the draws (one shuffle per batch), so a seed gives the same p̂ on both paths
    # wherever both batches reach MAX_BATCH_REPLICATES (or R).
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
            dots = _loops().gram_block_sums(gram, pick_m, pick_k)
        else:
            dots = _feature_dots(train_pool, test_pool, pick_m, pick_k)
        misaligned += int(np.count_nonzero(dots <= 0))
    lo, hi = wilson_interval(misaligned, replicates, level)
    return misaligned / replicates, lo, hi
