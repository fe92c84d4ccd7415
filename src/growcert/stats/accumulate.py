"""Streaming passes over sample blocks: the sums behind the U-statistics
(docs/science.md, "Unbiased U-statistics").

Every estimator of P1 is a function of seven numbers built from the
reduced gradients x_1..x_n in R^N (s = Σ x_i, C = Σ x_i x_iᵀ, G = X Xᵀ):

    ‖s‖², a2 = Σ‖x_i‖², a4 = Σ‖x_i‖⁴, ‖C‖_F² = ‖G‖_F², sᵀCs = ‖G 1‖², wᵀs = Σ‖x_i‖² (x_i·s)

Two ways to get them, chosen by the smaller of n and N (cost O(n N min(n, N))):

- covariance path (N ≤ n): one pass accumulating the N×N matrix C with a
  BLAS syrk per block (``X.T @ X`` on the same buffer), plus s, w, a2, a4;
- Gram path (n < N): the n×n Gram matrix is never stored; pairs of sample
  blocks (a ≤ b) give G_ab = X_a X_bᵀ, from which ‖G‖_F², the row sums G 1 and
  G d (d = diag G) accumulate.  At most two blocks are in memory; block b is
  re-read once per a ≤ b.

Blocks are whole store chunks grouped up to ``block_bytes``, read one at a
time; every product is computed in float64 (the covariance path casts the
block, the Gram path casts column panels): the formulas subtract large terms
(‖C‖_F² − a4, T1² − 4T3 − 2F), and float64 makes results agree across block
sizes and paths to ~1e-14 (benchmarks/estimators.py measures what float32
products would save and lose).

Optionally a second, per-example pass gives the five numbers per example
(‖x_i‖², x_i·s, x_i·w, x_iᵀC x_i, x_iᵀC s) from which moments.leave_one_out
rebuilds the sums with any single example removed (the jackknife).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from growcert.stats.reduce import SAMPLE_DIM, as_array

DEFAULT_BLOCK_BYTES = 128 * 2**20  # one block as read; the Gram path holds two
COVARIANCE = "covariance"
GRAM = "gram"
METHODS = ("auto", COVARIANCE, GRAM)


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


@dataclass(frozen=True)
class PerExample:
    """Per-example terms for leave-one-out updates, each of length n."""

    norm_sq: np.ndarray  # ‖x_i‖²
    x_s: np.ndarray  # x_i·s
    x_w: np.ndarray  # x_i·w
    x_c_x: np.ndarray  # x_iᵀ C x_i = Σ_j G_ij²
    x_c_s: np.ndarray  # x_iᵀ C s


class SampleBlocks:
    """Row blocks of an (n, N) view of x, read on demand (never the whole store).

    x: numpy array / torch tensor / zarr or dask array with samples on axis 0,
    or an xarray DataArray with a ``sample`` dim; trailing dims are flattened.
    Blocks come back as float64, or as stored when ``stored_precision`` and the
    store holds float32 (the Gram path then casts column panels to float64 on
    the fly, so a block costs half the memory and twice the rows fit).
    """

    def __init__(self, x, block_bytes: int = DEFAULT_BLOCK_BYTES, stored_precision: bool = False):
        self.source, self.block_bytes = x, block_bytes
        x = as_array(x)
        if isinstance(x, xr.DataArray):
            if SAMPLE_DIM not in x.dims:
                raise ValueError(f"expected a {SAMPLE_DIM!r} dim; got dims {x.dims}")
            # Keep the DataArray and slice it positionally: `.data` would load a lazily
            # indexed (non-dask) backend array whole; `x[a:b].values` reads only rows a..b.
            on_disk = x.encoding.get("chunks")  # in the stored dim order
            native = on_disk[x.dims.index(SAMPLE_DIM)] if on_disk else None
            x = x.transpose(SAMPLE_DIM, ...)
            if x.chunks:  # dask-backed: slice the dask array itself (threaded reads, no xarray overhead)
                x, native = x.data, x.chunks[0]
        elif hasattr(x, "shape") and hasattr(x, "__getitem__"):
            native = x.chunks[0] if getattr(x, "chunks", None) else None
        else:
            x = np.asarray(x)
            native = None
        if len(x.shape) < 1:
            raise ValueError("expected an array of examples (samples on axis 0)")
        self.data = x
        self.n = int(x.shape[0])
        self.dim = int(np.prod(x.shape[1:], dtype=np.int64))
        keep = stored_precision and np.dtype(getattr(x, "dtype", np.float64)) == np.float32
        self.dtype = np.dtype(np.float32 if keep else np.float64)
        rows = max(1, int(block_bytes) // max(1, self.dtype.itemsize * self.dim))
        self.bounds = _group_chunks(_chunk_sizes(native, self.n), self.n, rows)

    def stored(self) -> "SampleBlocks":
        """The same data, in blocks that keep float32 as stored (see the class docstring)."""
        return SampleBlocks(self.source, self.block_bytes, stored_precision=True)

    def __len__(self) -> int:
        return len(self.bounds)

    def read(self, k: int) -> np.ndarray:
        start, stop = self.bounds[k]
        block = self.data[start:stop]
        if isinstance(block, xr.DataArray):
            block = block.values  # reads just these rows (dask: just these chunks)
        elif hasattr(block, "compute"):  # a bare dask array
            block = block.compute()
        return np.asarray(block, dtype=self.dtype).reshape(stop - start, self.dim)

    def __iter__(self):
        for k in range(len(self.bounds)):
            yield self.read(k)


def _chunk_sizes(native, n: int) -> list[int] | None:
    """Stored chunk sizes along axis 0 from a dask tuple or a zarr chunk length; None if unchunked."""
    if isinstance(native, tuple):
        return list(native)
    if isinstance(native, (int, np.integer)) and native > 0:
        return [min(int(native), n - start) for start in range(0, n, int(native))]
    return None


def _group_chunks(chunk_sizes: list[int] | None, n: int, rows: int) -> list[tuple[int, int]]:
    """Consecutive whole chunks grouped up to `rows` rows (at least one chunk per block).

    Whole chunks only: splitting a compressed chunk would decompress it again
    for every piece.  Unchunked (in-memory) input is cut into blocks of `rows`.
    """
    if chunk_sizes is None:
        return [(start, min(start + rows, n)) for start in range(0, n, rows)]
    bounds, start, stop = [], 0, 0
    for size in chunk_sizes:
        if stop > start and stop - start + size > rows:
            bounds.append((start, stop))
            start = stop
        stop += size
    if stop > start:
        bounds.append((start, stop))
    return bounds


PANEL_BYTES = 16 * 2**20  # float64 column panel of a float32 block, cast just before its product


def _panels(rows: int, dim: int, dtype) -> list[slice]:
    """Column slices small enough to cast to float64 one at a time (all columns if float64 already)."""
    width = dim if dtype == np.float64 else max(64, PANEL_BYTES // (8 * max(1, rows)))
    return [slice(start, start + width) for start in range(0, dim, width)]


def row_norms_sq(block: np.ndarray) -> np.ndarray:
    """‖x_i‖² per row, accumulated in float64 whatever the block's dtype."""
    out = np.zeros(block.shape[0])
    for cols in _panels(*block.shape, block.dtype):
        part = block[:, cols].astype(np.float64, copy=False)
        out += np.einsum("ij,ij->i", part, part)
    return out


def cross_gram(xa: np.ndarray, xb: np.ndarray | None = None) -> np.ndarray:
    """X_a X_bᵀ in float64 (X_a X_aᵀ, a BLAS syrk, when xb is None), summed over column panels."""
    rows = len(xa) if xb is None else max(len(xa), len(xb))
    out = np.zeros((len(xa), len(xa) if xb is None else len(xb)))
    for cols in _panels(rows, xa.shape[1], xa.dtype):
        pa = xa[:, cols].astype(np.float64, copy=False)
        pb = pa if xb is None else xb[:, cols].astype(np.float64, copy=False)
        out += pa @ pb.T  # the same buffer transposed goes to syrk
    return out


def choose_method(n: int, dim: int, method: str = "auto") -> str:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method != "auto":
        return method
    return COVARIANCE if dim <= n else GRAM


def accumulate(blocks: SampleBlocks, method: str = "auto", per_example: bool = False
               ) -> tuple[PowerSums, PerExample | None]:
    """The power sums (and optionally the per-example terms) of all examples in `blocks`."""
    method = choose_method(blocks.n, blocks.dim, method)
    if method == COVARIANCE:
        return _covariance_path(blocks, per_example)
    return _gram_path(blocks, per_example)


def _covariance_path(blocks: SampleBlocks, per_example: bool):
    dim = blocks.dim
    c = np.zeros((dim, dim))
    product = np.empty((dim, dim))  # reused: one N×N temporary, not one per block
    s, w = np.zeros(dim), np.zeros(dim)
    a2 = a4 = 0.0
    for x in blocks:
        # X.T @ X on one buffer is dispatched to BLAS syrk (half the flops of gemm).
        np.matmul(x.T, x, out=product)
        c += product
        norms = row_norms_sq(x)
        s += x.sum(axis=0)
        w += norms @ x
        a2 += norms.sum()
        a4 += norms @ norms
    del product
    c_s = c @ s
    sums = PowerSums(n=blocks.n, dim=dim, s_sq=float(s @ s), a2=float(a2), a4=float(a4),
                     c_frob_sq=float(np.vdot(c, c)), s_c_s=float(s @ c_s),
                     w_s=float(w @ s), method=COVARIANCE)
    if not per_example:
        return sums, None
    parts = []
    for x in blocks:  # second pass: x_iᵀ C x_i needs the finished C
        parts.append((row_norms_sq(x), x @ s, x @ w, np.einsum("ij,ij->i", x @ c, x), x @ c_s))
    return sums, PerExample(*(np.concatenate(p) for p in zip(*parts)))


def _gram_path(blocks: SampleBlocks, per_example: bool):
    blocks = blocks.stored()
    n = blocks.n
    row_sum = np.zeros(n)  # (G 1)_i = x_i·s
    g_d = np.zeros(n)  # (G d)_i = x_i·w
    g_sq = np.zeros(n)  # Σ_j G_ij² = x_iᵀ C x_i
    d = np.zeros(n)  # G_ii = ‖x_i‖²
    for a, (a0, a1) in enumerate(blocks.bounds):
        xa = blocks.read(a)
        d_a = d[a0:a1] = row_norms_sq(xa)
        for b in range(a, len(blocks)):
            b0, b1 = blocks.bounds[b]
            xb = xa if b == a else blocks.read(b)
            d_b = d_a if b == a else row_norms_sq(xb)
            g_ab = cross_gram(xa, None if b == a else xb)
            sq = g_ab * g_ab
            row_sum[a0:a1] += g_ab.sum(axis=1)
            g_d[a0:a1] += g_ab @ d_b
            g_sq[a0:a1] += sq.sum(axis=1)
            if b != a:  # the mirrored block G_ba = G_abᵀ
                row_sum[b0:b1] += g_ab.sum(axis=0)
                g_d[b0:b1] += d_a @ g_ab
                g_sq[b0:b1] += sq.sum(axis=0)
            del xb, g_ab, sq
    sums = PowerSums(n=n, dim=blocks.dim, s_sq=float(row_sum.sum()), a2=float(d.sum()),
                     a4=float(d @ d), c_frob_sq=float(g_sq.sum()), s_c_s=float(row_sum @ row_sum),
                     w_s=float(d @ row_sum), method=GRAM)
    if not per_example:
        return sums, None
    # x_iᵀ C s = (G G 1)_i needs the finished row sums: C s = Σ_j (G1)_j x_j, then x_i·(C s).
    c_s = np.zeros(blocks.dim)
    for (start, stop), x in zip(blocks.bounds, blocks):
        c_s += row_sum[start:stop] @ x
    x_c_s = np.concatenate([x @ c_s for x in blocks])
    return sums, PerExample(norm_sq=d, x_s=row_sum, x_w=g_d, x_c_x=g_sq, x_c_s=x_c_s)


def gram_matrix(first: SampleBlocks, second: SampleBlocks | None = None) -> np.ndarray:
    """The full Gram matrix X₁ X₂ᵀ (or X Xᵀ), built from pairs of blocks.

    Used by the empirical misalignment, which needs the entries themselves;
    memory is the n₁×n₂ result plus two blocks.
    """
    symmetric = second is None
    first = first.stored()
    second = first if symmetric else second.stored()
    if first.dim != second.dim:
        raise ValueError(f"the two pools have different dimensions: {first.dim} vs {second.dim}")
    gram = np.empty((first.n, second.n))
    for a, (a0, a1) in enumerate(first.bounds):
        xa = first.read(a)
        for b in range(a if symmetric else 0, len(second)):
            b0, b1 = second.bounds[b]
            same = symmetric and b == a
            gram[a0:a1, b0:b1] = cross_gram(xa, None if same else second.read(b))
            if symmetric and b != a:
                gram[b0:b1, a0:a1] = gram[a0:a1, b0:b1].T
    return gram
