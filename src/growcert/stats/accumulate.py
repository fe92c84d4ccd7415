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
time.  Products are computed in float64 by default (the covariance path casts
the block, the Gram path casts column panels): the formulas subtract large
terms (‖C‖_F² − a4, T1² − 4T3 − 2F), and float64 makes results agree across
block sizes and paths to ~1e-14.

**float32 products** (covariance path, ``products="auto"``).  On float32 data
the block products XᵀX can be taken in float32 (a float32 syrk, twice the
float64 rate) and accumulated across blocks in float64; s, w, a2 and a4 stay
float64.  Only ‖C‖_F² and sᵀCs change, by δF and δR, and the estimates move
by (moments.py's formulas, worst-case signs)

    |Δ tr Σ²| ≤ (δF + 2δR/(n−2)) / n(n−3),   |Δ‖μ‖⁴| ≤ (4δR + 2δF) / n(n−1)(n−2)(n−3),
    |Δ μᵀΣμ| ≤ (δR + δF) / n(n−1)(n−2) + |Δ‖μ‖⁴|,

large when a strong mean makes these differences of large terms (d_2 =
‖μ‖⁴/tr Σ² ≫ 1).  A worst-case rounding bound (γ_r |X|ᵀ|X|) overstates the
error of a float32 block product ~10⁶-fold, so the rule checks the data at
hand instead (`choose_products`): the first r rows (an eighth of the first
block, at least 256) are multiplied in both precisions, E = P₃₂ − P₆₄.  Scaled
to all n examples (Ĉ = (n/r) P₆₄, ŝ = (n/r) s_r), that product moves ‖C‖_F²
and sᵀCs by

    δF₁ = max(|2⟨Ĉ, E⟩|, 2 ‖Ĉ ⊙ E‖_F),   δR₁ = max(|ŝᵀEŝ|, ‖(ŝŝᵀ) ⊙ E‖_F)

(the signed value, or its typical size if the entries' errors had independent
signs, whichever is larger), and the n examples, n/r such products with
errors adding up without cancelling, by δF = (n/r) δF₁ + (n/r)² ‖E‖_F², δR =
(n/r) δR₁.  Counting a block of r_b rows as r_b/r products takes a product's
error as growing linearly with its length (rounding errors grow as its square
root in practice).  float32 products are used for the blocks when, with a
factor 4 to spare, each of ‖μ‖⁴, μᵀΣμ and tr Σ² would move by at most
FLOAT32_TOLERANCE = 1e-6 of its value (the checked rows' float64 estimate).
At the end of the pass the same test runs again with the finished C and s,
the full-sample estimates, and each block counted as max(r_b/r, a2_b/a2_r,
a4_b/a4_r) products (a block's error grows with its entries, its share of
‖C‖_F² with their fourth powers: heavy-tailed rows beyond the checked ones
count there); if it fails, C is recomputed with float64 products (a second
pass).  float64 data, small products (n N² < 2³⁴, ~0.5 s, where the check
costs more than it saves), a single block and a first block under 256 rows
keep float64 products; with float64 products the results are bit for bit
those of a float64-only pass.  The sums record which ran
(``PowerSums.products``).

This is an estimate checked on the data, not a proof: on 315 synthetic cases
(isotropic, anisotropic, low-rank, Student-t with 1.5-4 degrees of freedom,
outlying blocks, means from 0 to d_2 ≈ 10³) every float32 result was within
1.7e-7 of float64, and a null or very strong mean kept float64.  The standard
error of tr Σ², the most precise of the three, is at least √(8/N)/n of it (N
≤ n on this path; 2e-6 at n = 20,000, N = 4,096), so the tolerance keeps
float32's share below the statistical error.  benchmarks/estimators.py (part
a) shows the measured errors beside the rule's choice.

Optionally a second, per-example pass gives the five numbers per example
(‖x_i‖², x_i·s, x_i·w, x_iᵀC x_i, x_iᵀC s) from which moments.leave_one_out
rebuilds the sums with any single example removed (the jackknife).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from growcert.stats.reduce import SAMPLE_DIM, as_array
from growcert.stats.u_statistics import FLOAT32, FLOAT64, PerExample, PowerSums, unbiased_moments  # noqa: F401

DEFAULT_BLOCK_BYTES = 128 * 2**20  # one block as read; the Gram path holds two
COVARIANCE = "covariance"
GRAM = "gram"
METHODS = ("auto", COVARIANCE, GRAM)
PRODUCTS = ("auto", FLOAT32, FLOAT64)
FLOAT32_TOLERANCE = 1e-6  # the largest relative change float32 products may make to an estimate
FLOAT32_SAFETY = 4.0  # the factor the predicted change must clear the tolerance by
FLOAT32_MIN_PRODUCTS = 2**34  # n N² multiply-adds below which float32 products do not pay for the check
CHECK_BYTES = 16 * 2**20  # rows of C and E at a time in the check's sums (few BLAS calls, small temporaries)
CHECK_FRACTION, MIN_CHECK_ROWS = 8, 256  # the check's product: the first block's first eighth (≥ 256 rows)


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

    def stored(self) -> SampleBlocks:
        """The same data, in blocks that keep float32 as stored (see the class docstring)."""
        return SampleBlocks(self.source, self.block_bytes, stored_precision=True)

    def __len__(self) -> int:
        return len(self.bounds)

    @property
    def stored_dtype(self) -> np.dtype:
        return np.dtype(getattr(self.data, "dtype", np.float64))

    def read(self, k: int, dtype=None, out: np.ndarray | None = None) -> np.ndarray:
        """Block k as self.dtype (or as `dtype`); a cast goes into `out` (rows × N) when given, so that
        a pass reuses one buffer instead of faulting in a new block each time."""
        start, stop = self.bounds[k]
        block = self.data[start:stop]
        if isinstance(block, xr.DataArray):
            block = block.values  # reads just these rows (dask: just these chunks)
        elif hasattr(block, "compute"):  # a bare dask array
            block = block.compute()
        block = np.asarray(block).reshape(stop - start, self.dim)
        dtype = np.dtype(dtype or self.dtype)
        if block.dtype == dtype:
            return block
        if out is None:
            return block.astype(dtype)
        np.copyto(out[: stop - start], block)
        return out[: stop - start]

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


def accumulate(
    blocks: SampleBlocks, method: str = "auto", per_example: bool = False, products: str = "auto"
) -> tuple[PowerSums, PerExample | None]:
    """The power sums (and optionally the per-example terms) of all examples in `blocks`.

    products: "auto" (the rule in the module docstring), "float64", or "float32" (covariance path
    on float32 data only; for tests and benchmarks).  The Gram path's products are float64.
    """
    if products not in PRODUCTS:
        raise ValueError(f"unknown products {products!r}; expected one of {', '.join(PRODUCTS)}")
    method = choose_method(blocks.n, blocks.dim, method)
    if method == COVARIANCE:
        return _covariance_path(blocks, per_example, products)
    if products == FLOAT32:
        raise ValueError("float32 products exist on the covariance path only (N ≤ n)")
    return _gram_path(blocks, per_example)


def _float32_candidate(blocks: SampleBlocks, products: str) -> bool:
    if products == FLOAT64 or blocks.stored_dtype != np.float32:
        if products == FLOAT32:
            raise ValueError(f"float32 products need float32 data; got {blocks.stored_dtype}")
        return False
    first_rows = blocks.bounds[0][1] - blocks.bounds[0][0] if len(blocks) else 0
    return products == FLOAT32 or (
        len(blocks) > 1 and first_rows >= MIN_CHECK_ROWS and blocks.n * blocks.dim**2 >= FLOAT32_MIN_PRODUCTS
    )


@dataclass(frozen=True)
class Float32Check:
    """A verdict on float32 products: the predicted changes of (‖μ‖⁴, μᵀΣμ, tr Σ²), the estimates
    they are compared with, and the choice."""

    predicted: tuple[float, float, float]
    values: tuple[float, float, float]
    products: str


def choose_products(n: int, c: np.ndarray, s: np.ndarray, error: np.ndarray, units: float, estimates) -> Float32Check:
    """float32 or float64 products (module docstring, "float32 products").

    c, s: C and s of all n examples (or their extrapolation from the checked rows); error: the checked
    rows' float32 product minus their float64 one; units: how many such products the n examples
    make, their errors adding up; estimates: Moments whose ‖μ‖⁴, μᵀΣμ, tr Σ² the predicted changes
    are compared with.
    """
    # Σ c⊙E, Σ (c⊙E)², Σ E², sᵀEs, (s²)ᵀ(E⊙E)(s²), a few rows at a time (no N×N temporary)
    sums, s_sq = np.zeros(5), s * s
    chunk = max(1, CHECK_BYTES // (8 * len(c)))
    for start in range(0, len(c), chunk):
        rows = slice(start, start + chunk)
        part = error[rows].astype(np.float64)
        weighted, part_sq = c[rows] * part, part * part
        sums += (
            weighted.sum(),
            np.vdot(weighted, weighted),
            part_sq.sum(),
            (part @ s) @ s[rows],
            (part_sq @ s_sq) @ s_sq[rows],
        )
    delta_f = units * max(abs(2.0 * sums[0]), 2.0 * np.sqrt(sums[1])) + units**2 * sums[2]
    delta_r = units * max(abs(sums[3]), np.sqrt(sums[4]))
    n2 = n * (n - 1.0)
    n3, n4 = n2 * (n - 2.0), n2 * (n - 2.0) * (n - 3.0)
    mu_4 = (4.0 * delta_r + 2.0 * delta_f) / n4
    predicted = (mu_4, (delta_r + delta_f) / n3 + mu_4, (delta_f + 2.0 * delta_r / (n - 2.0)) / (n * (n - 3.0)))
    values = (float(estimates.mu_4), float(estimates.mu_sigma_mu), float(estimates.tr_sigma2))
    holds = all(FLOAT32_SAFETY * change <= FLOAT32_TOLERANCE * abs(value) for change, value in zip(predicted, values))
    return Float32Check(tuple(float(v) for v in predicted), values, FLOAT32 if holds else FLOAT64)


@dataclass
class _CovariancePass:
    c: np.ndarray
    s: np.ndarray
    w: np.ndarray
    a2: float
    a4: float
    products: str
    checks: list  # the Float32Check verdicts that were made (first block, then end of pass)

    def power_sums(self, n: int, **attrs) -> PowerSums:
        """The sums of the finished pass over `n` examples (`attrs`: the method and products, where stated)."""
        c, s, w = self.c, self.s, self.w
        return PowerSums(
            n=n,
            dim=len(s),
            s_sq=float(s @ s),
            a2=self.a2,
            a4=self.a4,
            c_frob_sq=float(np.vdot(c, c)),
            s_c_s=float(s @ (c @ s)),
            w_s=float(w @ s),
            **attrs,
        )


def _check_sample(x: np.ndarray, product: np.ndarray) -> tuple[np.ndarray, PowerSums, np.ndarray]:
    """(E, power sums, s) of the check's rows x (float64 copy of float32 data): E = P32 − P64, with P64
    left in `product`."""
    dim = x.shape[1]
    np.matmul(x.T, x, out=product)
    single = x.astype(np.float32)
    error = np.matmul(single.T, single)
    np.subtract(error, product, out=error, casting="same_kind")
    norms = row_norms_sq(x)
    sample_sum = x.sum(axis=0)
    sums = PowerSums(
        n=len(x),
        dim=dim,
        s_sq=float(sample_sum @ sample_sum),
        a2=float(norms.sum()),
        a4=float(norms @ norms),
        c_frob_sq=float(np.vdot(product, product)),
        s_c_s=float(sample_sum @ product @ sample_sum),
        w_s=float((norms @ x) @ sample_sum),
    )
    return error, sums, sample_sum


def _covariance_pass(blocks: SampleBlocks, float32: bool, check: bool) -> _CovariancePass:
    """C, s, w, a2, a4 in one pass; block products in float32 when asked (and, with check, allowed)."""
    dim = blocks.dim
    c = np.zeros((dim, dim))
    product = np.empty((dim, dim))  # reused: one N×N temporary, not one per block
    # the float32 product buffer; allocated after the check (when there is one) so that the N×N
    # arrays held at once stay C, one product and E
    single = np.empty((dim, dim), np.float32) if float32 and not check else None
    rows = max(stop - start for start, stop in blocks.bounds) if len(blocks) else 0
    cast = np.empty((rows, dim)) if blocks.stored_dtype != np.float64 else None  # float64 blocks, reused
    s, w = np.zeros(dim), np.zeros(dim)
    a2 = a4 = 0.0
    error, sample, block_powers, checks = None, None, [], []
    for k in range(len(blocks)):
        if float32:  # float32 as stored, and its float64 copy
            stored = blocks.read(k, np.float32)
            x = cast[: len(stored)]
            np.copyto(x, stored)
        else:
            stored, x = None, blocks.read(k, out=cast)
        if check and k == 0:  # the first rows' product in both precisions (module docstring)
            error, sample, sample_sum = _check_sample(x[: max(MIN_CHECK_ROWS, len(x) // CHECK_FRACTION)], product)
            units = blocks.n / sample.n  # the check's rows, scaled to all n examples
            checks.append(
                choose_products(blocks.n, units * product, units * sample_sum, error, units, unbiased_moments(sample))
            )
            if checks[-1].products == FLOAT64:
                error = None
            else:
                product = None  # the float64 buffer is not needed again
                single = np.empty((dim, dim), np.float32)
        # X.T @ X on one buffer is dispatched to BLAS syrk (half the flops of gemm); with float32
        # products the syrk is float32 and s, w, a2, a4 still come from the float64 block.
        if single is not None:
            np.matmul(stored.T, stored, out=single)
            c += single  # accumulated in float64
        else:
            np.matmul(x.T, x, out=product)
            c += product
        norms = row_norms_sq(x)
        s += x.sum(axis=0)
        w += norms @ x
        a2 += norms.sum()
        a4 += norms @ norms
        block_powers.append((len(x), float(norms.sum()), float(norms @ norms)))
    chosen = FLOAT32 if single is not None else FLOAT64
    result = _CovariancePass(c, s, w, float(a2), float(a4), chosen, checks)
    if check and chosen == FLOAT32:
        # Again with the finished C and s, the full-sample estimates, and each block counted as many
        # check samples as its rows, Σ‖x_i‖² and Σ‖x_i‖⁴ say (a block's product error grows with its
        # length and entries, its share of ‖C‖_F² with their fourth powers): heavy-tailed rows count.
        estimates = unbiased_moments(result.power_sums(blocks.n))
        units = sum(
            max(rows_b / sample.n, a2_b / sample.a2, a4_b / sample.a4) if sample.a4 > 0 else rows_b / sample.n
            for rows_b, a2_b, a4_b in block_powers
        )
        checks.append(choose_products(blocks.n, c, s, error, units, estimates))
        result.products = checks[-1].products
    return result


def _covariance_path(blocks: SampleBlocks, per_example: bool, products: str = "auto"):
    float32 = _float32_candidate(blocks, products)
    result = _covariance_pass(blocks, float32, check=float32 and products == "auto")
    if result.products != FLOAT32 and float32 and len(result.checks) == 2:
        # the end-of-pass check overruled the first block's: every product again in float64
        result = _covariance_pass(blocks, False, False)
        result.checks = []
    sums = result.power_sums(blocks.n, method=COVARIANCE, products=result.products)
    if not per_example:
        return sums, None
    c, s, w = result.c, result.s, result.w
    c_s = c @ s
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
    sums = PowerSums(
        n=n,
        dim=blocks.dim,
        s_sq=float(row_sum.sum()),
        a2=float(d.sum()),
        a4=float(d @ d),
        c_frob_sq=float(g_sq.sum()),
        s_c_s=float(row_sum @ row_sum),
        w_s=float(d @ row_sum),
        method=GRAM,
    )
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
