"""Compiled loops of the empirical misalignment (docs/science.md, "estimate-misalignment (P1)").

`growcert.stats.resample` holds the estimator, its two paths and their error
analysis; this module holds only the loops whose per-replicate work is a
few thousand scattered reads, which numpy can only do by first materialising
every index (measured in benchmarks/estimators.py, part (c)):

- `partial_shuffles`: the first m entries of a Fisher–Yates shuffle of 0..n−1
  per replicate, from integers drawn beforehand;
- `gram_block_sums`: Σ_{i∈M, j∈K} G_ij per replicate (the ``gram`` path);
- `panel_dots`: Σ_{i∈M} x_i · Σ_{j∈K} x_j per replicate, the row sums in the
  panels' precision and the dot product in float64 (the ``features`` path);
- `float64_dots`: the same with float64 row sums, for the replicates whose
  float32 sign the features path cannot vouch for.

They are compiled by numba on first use and cached on disk beside this file
(or in NUMBA_CACHE_DIR), so only the first job on a machine pays the compile.
Reassociation is allowed (``fastmath={"reassoc", "contract"}``), so the
compiler may vectorise the sums: resample's bounds hold for any order of a
sum's terms, and a fused multiply-add only rounds less.  No other fast-math
assumption is made (NaN and infinity keep their meaning).
"""

from __future__ import annotations

import numba
import numpy as np

_COMPILE = dict(cache=True, nogil=True, fastmath={"reassoc", "contract"})
ROWS_PER_PASS = 8  # rows added per pass over a panel's accumulator: fewer loads and stores of it


def cache_aligned_zeros(shape: tuple[int, ...], dtype, align: int = 64) -> np.ndarray:
    """Zeros whose first byte starts a cache line: a panel row of 128 float32s then spans 8 lines,
    not 9 (numpy aligns to 16 bytes), which made `panel_dots` ~20 % faster in the benchmark."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.zeros(size + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start : start + size].view(dtype).reshape(shape)


@numba.njit(**_COMPILE)
def partial_shuffles(n, offsets):
    """(rows, m) draws: row r is the first m entries of the shuffle of 0..n−1 that swaps position t
    with t + offsets[t, r] at step t (offsets[t, r] uniform on 0..n−t−1 makes each row a uniformly
    random ordered m-subset)."""
    m, rows = offsets.shape
    perm = np.arange(n)
    out = np.empty((rows, m), np.intp)
    for r in range(rows):
        for t in range(m):
            j = t + offsets[t, r]
            picked = perm[j]
            perm[j] = perm[t]
            perm[t] = picked
            out[r, t] = picked
        for t in range(m - 1, -1, -1):  # undo the swaps: the next row starts from 0..n−1 again
            j = t + offsets[t, r]
            back = perm[t]
            perm[t] = perm[j]
            perm[j] = back
    return out


@numba.njit(**_COMPILE)
def gram_block_sums(gram, pick_m, pick_k):
    """Σ_{a, b} gram[pick_m[r, a], pick_k[r, b]] for each replicate r, in float64."""
    rows, M = pick_m.shape
    K = pick_k.shape[1]
    out = np.empty(rows)
    for r in range(rows):
        total = 0.0
        for a in range(M):
            line = gram[pick_m[r, a]]
            for b in range(K):
                total += line[pick_k[r, b]]
        out[r] = total
    return out


@numba.njit(inline="always")
def _sum_rows(panel, picks, into):
    """into = Σ_a panel[picks[a]], in the panel's precision."""
    into[:] = 0
    m, a = len(picks), 0
    while a + ROWS_PER_PASS <= m:
        r0, r1, r2, r3 = panel[picks[a]], panel[picks[a + 1]], panel[picks[a + 2]], panel[picks[a + 3]]
        r4, r5, r6, r7 = panel[picks[a + 4]], panel[picks[a + 5]], panel[picks[a + 6]], panel[picks[a + 7]]
        for c in range(len(into)):
            into[c] += ((r0[c] + r1[c]) + (r2[c] + r3[c])) + ((r4[c] + r5[c]) + (r6[c] + r7[c]))
        a += ROWS_PER_PASS
    while a < m:
        line = panel[picks[a]]
        for c in range(len(into)):
            into[c] += line[c]
        a += 1


@numba.njit(**_COMPILE)
def panel_dots(panels_m, panels_k, pick_m, pick_k):
    """Σ_a x_{pick_m[r, a]} · Σ_b y_{pick_k[r, b]} for each replicate r.

    panels_*: (panels, n, width) column panels of X and Y (zero-padded to whole panels); each row sum
    is in the panels' precision, and their products (exact in float64 for float32 panels) are summed
    in float64 over each panel's columns and then over the panels."""
    rows = pick_m.shape[0]
    width = panels_m.shape[2]
    out = np.zeros(rows)
    sum_m = np.empty(width, panels_m.dtype)
    sum_k = np.empty(width, panels_k.dtype)
    for p in range(panels_m.shape[0]):  # one panel at a time stays in a core's cache for every replicate
        panel_m, panel_k = panels_m[p], panels_k[p]
        for r in range(rows):
            _sum_rows(panel_m, pick_m[r], sum_m)
            _sum_rows(panel_k, pick_k[r], sum_k)
            total = 0.0
            for c in range(width):
                total += np.float64(sum_m[c]) * np.float64(sum_k[c])
            out[r] += total
    return out


@numba.njit(**_COMPILE)
def float64_dots(x, y, pick_m, pick_k):
    """Σ_a x_{pick_m[r, a]} · Σ_b y_{pick_k[r, b]} for each replicate r, rows summed in float64 (as
    float64 data would give them, whatever x's and y's dtype) and the dot in float64."""
    rows = pick_m.shape[0]
    out = np.empty(rows)
    sum_m = np.empty(x.shape[1])
    sum_k = np.empty(y.shape[1])
    for r in range(rows):
        for data, picks, into in ((x, pick_m[r], sum_m), (y, pick_k[r], sum_k)):
            into[:] = 0.0
            for a in range(len(picks)):  # one row at a time: each value becomes float64 before it is added
                line = data[picks[a]]
                for c in range(len(into)):
                    into[c] += np.float64(line[c])
        total = 0.0
        for c in range(len(sum_m)):
            total += sum_m[c] * sum_k[c]
        out[r] = total
    return out
