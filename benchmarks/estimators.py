"""Benchmark of the offline estimators (growcert.stats), measured side by side in one run.

    .venv/bin/python benchmarks/estimators.py            # full sizes (a few minutes on 2 cores)
    .venv/bin/python benchmarks/estimators.py --quick    # smaller sizes (well under a minute)

(a) moments on n x N float32 in memory vs a naive numpy plug-in (np.cov, then
    ‖mean‖², mᵀΣ̂m, ‖Σ̂‖_F²); GFLOP/s of the quadratic term vs this machine's
    measured matmul rate, and what float32 products would cost in accuracy.
(b) moments streamed from a Zarr store with n << N (the Gram path): time and
    peak memory, next to the arithmetic of what the naive N×N covariance needs.
(c) empirical misalignment with R replicates vs a Python loop over replicates,
    and vs a dense (selection weights) @ X product.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import psutil
import xarray as xr

from growcert.stats import misalignment, moments
from growcert.stats.accumulate import PowerSums, SampleBlocks
from growcert.stats.moments import unbiased_moments


def timed(fn, repeat=1):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def matmul_rate(dtype, size=2048) -> float:
    """Measured GFLOP/s of a square gemm (2 size³ flops) in `dtype`, best of 3."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size)).astype(dtype) for _ in range(2))
    a @ b  # warm up threads
    seconds, _ = timed(lambda: a @ b, repeat=3)
    return 2 * size**3 / seconds / 1e9


def naive_plugin(x):
    cov = np.cov(x, rowvar=False)
    mean = x.mean(axis=0, dtype=np.float64)
    return mean @ mean, mean @ cov @ mean, np.sum(cov * cov)


def float32_products(x, rows=4096):
    """The same sums with float32 BLAS products (accumulated across blocks in float64)."""
    n, dim = x.shape
    c = np.zeros((dim, dim))
    s, w = np.zeros(dim), np.zeros(dim)
    a2 = a4 = 0.0
    for start in range(0, n, rows):
        xb = x[start:start + rows]
        c += xb.T @ xb
        norms = np.einsum("ij,ij->i", xb, xb, dtype=np.float64)
        s += xb.sum(axis=0, dtype=np.float64)
        w += norms @ xb
        a2 += norms.sum()
        a4 += norms @ norms
    return unbiased_moments(PowerSums(n, dim, s @ s, a2, a4, np.vdot(c, c), s @ c @ s, w @ s))


def part_a(n, dim):
    print(f"\n(a) moments, n = {n:,}, N = {dim:,}, float32 in memory (covariance path)")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((n, dim), dtype=np.float32) + 0.05).astype(np.float32)
    # best of 2, interleaved with the reference gemm: the machine may be shared, and the
    # first call pays page faults
    t_ours = t_naive = t_f32 = float("inf")
    rate64 = rate32 = 0.0
    for _ in range(2):
        t, ours = timed(lambda: moments(x))
        t_ours = min(t_ours, t)
        t, naive = timed(lambda: naive_plugin(x))
        t_naive = min(t_naive, t)
        t, f32 = timed(lambda: float32_products(x))
        t_f32 = min(t_f32, t)
        rate64, rate32 = max(rate64, matmul_rate(np.float64)), max(rate32, matmul_rate(np.float32))
    useful = n * dim * dim  # C = XᵀX is symmetric: n·N(N+1)/2 multiply-adds ≈ n N² flops
    rate_ours = useful / t_ours / 1e9
    print(f"  ours (unbiased, float64 syrk)  {t_ours:8.2f} s")
    print(f"  naive np.cov plug-in           {t_naive:8.2f} s   -> time ratio naive/ours = {t_naive / t_ours:.2f}"
          " (both are one syrk; the plug-in also copies X to float64 whole)")
    print(f"  quadratic term: {rate_ours:6.1f} GFLOP/s (n N² flops over the whole moments() call)")
    print(f"  machine gemm:   {rate64:6.1f} GFLOP/s float64, {rate32:6.1f} GFLOP/s float32")
    print(f"  -> {100 * rate_ours / rate64:.0f}% of float64 gemm (the dtype we compute in), "
          f"{100 * rate_ours / rate32:.0f}% of float32 gemm")
    rel = abs(f32.tr_sigma2 - ours.tr_sigma2) / abs(ours.tr_sigma2)
    print(f"  float32 products instead: {t_f32:.2f} s ({t_ours / t_f32:.2f}x faster); relative error "
          f"{rel:.1e} in tr Σ² here (weak mean, d_2 = {ours.mu_4 / ours.tr_sigma2:.2g})")
    strong = x[: min(n, 5000), : min(dim, 1024)] + np.float32(1.0)  # d_2 = N: terms cancel ~N-fold
    exact, approx = moments(strong), float32_products(strong)
    print(f"    with a strong mean (d_2 = {exact.mu_4 / exact.tr_sigma2:.0f}, {strong.shape[0]} x "
          f"{strong.shape[1]}): relative error {abs(approx.tr_sigma2 / exact.tr_sigma2 - 1):.1e} in tr Σ², "
          f"{abs(approx.mu_sigma_mu / exact.mu_sigma_mu - 1):.1e} in μᵀΣμ -> float64 products kept")
    print(f"  plug-in vs unbiased here: ‖μ‖² {naive[0]:.4g} vs {ours.mu_sq:.4g}, "
          f"tr Σ² {naive[2]:.4g} vs {ours.tr_sigma2:.4g}")


class PeakRss:
    """Peak resident memory above the starting point, sampled every 5 ms in a thread."""

    def __enter__(self):
        self.process = psutil.Process()
        self.base = self.peak = self.process.memory_info().rss
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()
        self.delta = self.peak - self.base


def part_b(n, dim, chunk):
    print(f"\n(b) moments from a Zarr store on disk, n = {n:,}, N = {dim:,} float32 (Gram path)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "q.zarr"
        rng = np.random.default_rng(1)
        template = xr.Dataset({"q": (("sample", "feature"), np.zeros((n, dim), np.float32))})
        t_write = time.perf_counter()
        template.chunk({"sample": chunk}).to_zarr(path, group="block0", consolidated=False,
                                                  mode="w", compute=False)
        for start in range(0, n, chunk):  # region writes: the store is never whole in memory
            q = rng.standard_normal((min(chunk, n - start), dim), dtype=np.float32) + 0.01
            xr.Dataset({"q": (("sample", "feature"), q)}).to_zarr(
                path, group="block0", consolidated=False, region={"sample": slice(start, start + len(q))})
        t_write = time.perf_counter() - t_write
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        q = xr.open_zarr(path, group="block0", consolidated=False).q
        blocks = SampleBlocks(q).stored()  # the Gram path keeps float32 blocks as stored
        reads = len(blocks) + len(blocks) * (len(blocks) - 1) // 2
        with PeakRss() as rss:
            t_ours, ours = timed(lambda: moments(q))
        tracemalloc.start()  # a second run: tracing slows allocation, so it is not timed
        moments(q)
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(f"  store: {size / 2**20:,.0f} MiB on disk, chunks of {chunk} samples, written in {t_write:.1f} s")
    print(f"  ours: {t_ours:.1f} s, {len(blocks)} float32 blocks of ≤{blocks.bounds[0][1]} rows, "
          f"{reads} block reads, {n * n * dim / t_ours / 1e9:.1f} GFLOP/s (n² N)")
    print(f"  peak memory: {rss.delta / 2**20:,.0f} MiB RSS above start, {traced_peak / 2**20:,.0f} MiB "
          f"traced allocations (goal < 1024 MiB); data as float32 is {n * dim * 4 / 2**20:,.0f} MiB")
    need = dim * dim * 8
    print(f"  naive: the N×N float64 covariance alone is {dim:,}² × 8 B = {need / 1e9:.1f} GB "
          f"({need / 2**30:.1f} GiB), plus the {n * dim * 8 / 1e9:.1f} GB float64 centred copy; not run "
          f"(machine RAM {psutil.virtual_memory().total / 2**30:.0f} GiB)")
    print(f"  result: ‖μ‖² = {ours.mu_sq:.4g} (true {dim * 0.01**2:.4g}), tr Σ² = {ours.tr_sigma2:.4g} "
          f"(true {dim})")


def loop_misalignment(x, M, K, replicates, seed):
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(replicates):
        order = rng.permutation(len(x))
        hits += x[order[:M]].mean(axis=0) @ x[order[M:M + K]].mean(axis=0) <= 0
    return hits / replicates


def dense_selection_misalignment(x, M, K, replicates, seed, batch=500):
    """The literal form: dense (replicates × n) selection weights @ X, one product per batch."""
    rng = np.random.default_rng(seed)
    n, hits = len(x), 0
    for start in range(0, replicates, batch):
        rows = min(batch, replicates - start)
        order = np.argsort(rng.random((rows, n)), axis=1)
        w_m, w_k = np.zeros((rows, n)), np.zeros((rows, n))
        np.put_along_axis(w_m, order[:, :M], 1.0 / M, axis=1)
        np.put_along_axis(w_k, order[:, M:M + K], 1.0 / K, axis=1)
        hits += int(np.count_nonzero(np.einsum("ij,ij->i", w_m @ x, w_k @ x) <= 0))
    return hits / replicates


def part_c(settings, replicates):
    print(f"\n(c) empirical misalignment, R = {replicates:,} replicates, iid mode")
    for n, dim, M, K in settings:
        rng = np.random.default_rng(2)
        x = rng.standard_normal((n, dim)) + 0.6 / np.sqrt(dim)
        t_ours, t_loop = float("inf"), float("inf")
        for _ in range(2):  # interleaved best of 2: the machine may be shared
            t, (p_ours, lo, hi) = timed(lambda: misalignment(x, None, M, K, replicates, seed=0))
            t_ours = min(t, t_ours)
            t, p_loop = timed(lambda: loop_misalignment(x, M, K, replicates, seed=0))
            t_loop = min(t, t_loop)
        t_dense, p_dense = timed(lambda: dense_selection_misalignment(x, M, K, replicates, seed=0))
        print(f"  n = {n:,}, N = {dim:,}, M = K = {M}: ours {t_ours:.3f} s "
              f"(p̂ {p_ours:.3f} [{lo:.3f}, {hi:.3f}]), Python loop {t_loop:.3f} s (p̂ {p_loop:.3f}), dense selection @ X {t_dense:.3f} s "
              f"(p̂ {p_dense:.3f})")
        print(f"      -> ours is {t_loop / t_ours:.1f}x the loop, {t_dense / t_ours:.1f}x the dense product")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a fast check")
    args = parser.parse_args()
    print(f"growcert.stats benchmark ({'quick' if args.quick else 'full'}), "
          f"{psutil.cpu_count()} CPUs, numpy {np.__version__}, load average at start "
          f"{os.getloadavg()[0]:.1f} (times are best-of-2 where affordable; a shared machine adds noise)")
    if args.quick:
        part_a(5_000, 1_024)
        part_b(500, 16_384, chunk=32)
        part_c([(512, 1_024, 32, 32)], 2_000)
    else:
        part_a(20_000, 4_096)
        part_b(2_000, 65_536, chunk=32)
        part_c([(512, 1_024, 32, 32), (512, 4_096, 32, 32), (2_000, 1_024, 32, 32)], 10_000)


if __name__ == "__main__":
    main()
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")
