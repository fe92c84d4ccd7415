"""Benchmark of the offline estimators (growcert.stats), measured side by side in one run.

    .venv/bin/python benchmarks/estimators.py            # full sizes (a few minutes on 2 cores)
    .venv/bin/python benchmarks/estimators.py --quick    # smaller sizes (well under a minute)

(a) moments on n x N float32 in memory vs a naive numpy plug-in (np.cov, then
    ‖mean‖², mᵀΣ̂m, ‖Σ̂‖_F²) and vs float64 products forced; which products the
    rule chose (accumulate.py, "float32 products"), GFLOP/s of the quadratic term
    as a share of this machine's gemm in that dtype, measured in the same run,
    and the float32 products' change of the estimates beside the rule's
    prediction; on a strong mean, what the rule chose and what float32 would cost.
(b) moments streamed from a Zarr store with n << N (the Gram path): time and
    peak memory, next to the arithmetic of what the naive N×N covariance needs.
(c) empirical misalignment with R replicates vs a Python loop over replicates,
    vs a dense (selection weights) @ X product, and vs its other path (gram or
    features) on the same draws; and what its compiled loops (numba) cost a
    job once: compiling them on a machine's first use, loading them after.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import psutil
import xarray as xr

from growcert.stats import accumulate, misalignment, moments, resample
from growcert.stats.accumulate import SampleBlocks


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


class RecordedVerdicts:
    """The float32-products rule's verdicts (accumulate.choose_products) made inside a block of code."""

    def __enter__(self):
        self.verdicts, self.original = [], accumulate.choose_products

        def recording(*args):
            self.verdicts.append(self.original(*args))
            return self.verdicts[-1]

        accumulate.choose_products = recording
        return self

    def __exit__(self, *exc):
        accumulate.choose_products = self.original

    def largest_predicted(self) -> float:
        """The largest predicted relative change over the quantities and verdicts."""
        return max(
            (p / abs(v) if v else float("inf"))
            for verdict in self.verdicts
            for p, v in zip(verdict.predicted, verdict.values)
        )


def relative_changes(approx, exact) -> str:
    return ", ".join(
        f"{abs(getattr(approx, name) / getattr(exact, name) - 1):.1e} in {label}"
        for name, label in (("tr_sigma2", "tr Σ²"), ("mu_sigma_mu", "μᵀΣμ"), ("mu_4", "‖μ‖⁴"))
    )


def part_a(n, dim, block_bytes):
    print(
        f"\n(a) moments, n = {n:,}, N = {dim:,}, float32 in memory (covariance path, "
        f"{-(-n // (block_bytes // (8 * dim)))} blocks)"
    )
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((n, dim), dtype=np.float32) + 0.05).astype(np.float32)
    # best of 2, interleaved with the reference gemm: the machine may be shared, and the
    # first call pays page faults
    t_ours = t_f64 = t_naive = float("inf")
    rate64 = rate32 = 0.0
    for _ in range(2):
        with RecordedVerdicts() as record:
            t, ours = timed(lambda: moments(x, block_bytes=block_bytes))
        t_ours = min(t_ours, t)
        t, exact = timed(lambda: moments(x, block_bytes=block_bytes, products="float64"))
        t_f64 = min(t_f64, t)
        t, naive = timed(lambda: naive_plugin(x))
        t_naive = min(t_naive, t)
        rate64, rate32 = max(rate64, matmul_rate(np.float64)), max(rate32, matmul_rate(np.float32))
    useful = n * dim * dim  # C = XᵀX is symmetric: n·N(N+1)/2 multiply-adds ≈ n N² flops
    rate_ours, rate_f64 = useful / t_ours / 1e9, useful / t_f64 / 1e9
    gemm = {"float32": rate32, "float64": rate64}
    print(f"  ours (products by the rule: {ours.products})  {t_ours:8.2f} s")
    print(f"  ours, float64 products forced       {t_f64:8.2f} s")
    print(
        f"  baseline: naive np.cov plug-in      {t_naive:8.2f} s   (one float64 syrk, after copying X to float64 whole)"
    )
    print(f"  -> time ratios: naive / ours = {t_naive / t_ours:.2f}, float64 products / ours = {t_f64 / t_ours:.2f}")
    print(
        f"  quadratic term (n N² flops over the whole moments() call) vs this machine's gemm, measured in this run "
        f"({rate64:.1f} GFLOP/s float64, {rate32:.1f} GFLOP/s float32):"
    )
    print(
        f"    ours ({ours.products} products): {rate_ours:6.1f} GFLOP/s = "
        f"{100 * rate_ours / gemm[ours.products]:.0f}% of {ours.products} gemm"
    )
    print(f"    float64 products:          {rate_f64:6.1f} GFLOP/s = {100 * rate_f64 / rate64:.0f}% of float64 gemm")
    print(
        f"  ours vs float64 products: relative change {relative_changes(ours, exact)} "
        f"(weak mean, d_2 = {exact.mu_4 / exact.tr_sigma2:.2g}); the rule predicted at most "
        f"{record.largest_predicted():.1e} (tolerance {accumulate.FLOAT32_TOLERANCE:.0e}, "
        f"with a factor {accumulate.FLOAT32_SAFETY:g} to spare); verdicts {[v.products for v in record.verdicts]}"
    )
    strong = x[:, : min(dim, 2048)] + np.float32(1.0)  # d_2 = N: terms cancel ~N-fold
    strong_blocks = 8 * strong.shape[1] * 4096  # blocks of 4,096 rows, so that the rule has blocks to check
    with RecordedVerdicts() as record:
        chosen = moments(strong, block_bytes=strong_blocks)
    exact = moments(strong, block_bytes=strong_blocks, products="float64")
    forced = moments(strong, block_bytes=strong_blocks, products="float32")
    print(
        f"    strong mean (d_2 = {exact.mu_4 / exact.tr_sigma2:.0f}, {strong.shape[0]} x {strong.shape[1]}): "
        f"the rule chose {chosen.products} products (predicted up to {record.largest_predicted():.1e}); "
        f"float32 products would change {relative_changes(forced, exact)}"
    )
    print(
        f"  plug-in vs unbiased here: ‖μ‖² {naive[0]:.4g} vs {ours.mu_sq:.4g}, "
        f"tr Σ² {naive[2]:.4g} vs {ours.tr_sigma2:.4g}"
    )


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
        template.chunk({"sample": chunk}).to_zarr(path, group="block0", consolidated=False, mode="w", compute=False)
        for start in range(0, n, chunk):  # region writes: the store is never whole in memory
            q = rng.standard_normal((min(chunk, n - start), dim), dtype=np.float32) + 0.01
            xr.Dataset({"q": (("sample", "feature"), q)}).to_zarr(
                path, group="block0", consolidated=False, region={"sample": slice(start, start + len(q))}
            )
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
    print(
        f"  ours: {t_ours:.1f} s, {len(blocks)} float32 blocks of ≤{blocks.bounds[0][1]} rows, "
        f"{reads} block reads, {n * n * dim / t_ours / 1e9:.1f} GFLOP/s (n² N)"
    )
    print(
        f"  peak memory: {rss.delta / 2**20:,.0f} MiB RSS above start, {traced_peak / 2**20:,.0f} MiB "
        f"traced allocations (goal < 1024 MiB); data as float32 is {n * dim * 4 / 2**20:,.0f} MiB"
    )
    need = dim * dim * 8
    print(
        f"  naive: the N×N float64 covariance alone is {dim:,}² × 8 B = {need / 1e9:.1f} GB "
        f"({need / 2**30:.1f} GiB), plus the {n * dim * 8 / 1e9:.1f} GB float64 centred copy; not run "
        f"(machine RAM {psutil.virtual_memory().total / 2**30:.0f} GiB)"
    )
    print(f"  result: ‖μ‖² = {ours.mu_sq:.4g} (true {dim * 0.01**2:.4g}), tr Σ² = {ours.tr_sigma2:.4g} (true {dim})")


def loop_misalignment(x, M, K, replicates, seed):
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(replicates):
        order = rng.permutation(len(x))
        hits += x[order[:M]].mean(axis=0) @ x[order[M : M + K]].mean(axis=0) <= 0
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
        np.put_along_axis(w_k, order[:, M : M + K], 1.0 / K, axis=1)
        hits += int(np.count_nonzero(np.einsum("ij,ij->i", w_m @ x, w_k @ x) <= 0))
    return hits / replicates


FIRST_USE = """
import time
start = time.perf_counter()
import numpy as np
from growcert.stats import misalignment
x = np.random.default_rng(0).standard_normal((40, 8))
for method in ("gram", "features"):
    misalignment(x, None, 4, 4, 100, method=method)
print(time.perf_counter() - start)
"""


def first_use_seconds():
    """(compile, load): a fresh process's first gram and features estimate, with an empty numba cache
    and then with the cache that run left (every pipeline job is a fresh process)."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        runs = [
            float(
                subprocess.run(
                    [sys.executable, "-c", FIRST_USE], env=env, check=True, text=True, capture_output=True
                ).stdout
            )
            for _ in range(2)
        ]
    return runs[0], runs[1]


def part_c(settings, replicates):
    print(f"\n(c) empirical misalignment, R = {replicates:,} replicates, iid mode (goal: ours >= 10x the loop)")
    compile_s, load_s = first_use_seconds()
    print(
        f"  compiled loops (growcert.stats.subset_sums): a fresh job's import and first estimate take "
        f"{compile_s:.1f} s when they are compiled (once per machine, then cached on disk), "
        f"{load_s:.1f} s when loaded from the cache"
    )
    for n, dim, M, K in settings:
        rng = np.random.default_rng(2)
        x = rng.standard_normal((n, dim)) + 0.6 / np.sqrt(dim)
        path = resample._choose_path(n, n, dim, M, K, replicates, resample.DEFAULT_MAX_BYTES, "auto", symmetric=True)
        other = resample.GRAM if path == resample.FEATURES else resample.FEATURES
        t_ours, t_loop = float("inf"), float("inf")
        for _ in range(2):  # interleaved best of 2: the machine may be shared
            t, (p_ours, lo, hi) = timed(lambda: misalignment(x, None, M, K, replicates, seed=0))
            t_ours = min(t, t_ours)
            t, p_loop = timed(lambda: loop_misalignment(x, M, K, replicates, seed=0))
            t_loop = min(t, t_loop)
        t_other, (p_other, _, _) = timed(lambda: misalignment(x, None, M, K, replicates, seed=0, method=other))
        t_dense, p_dense = timed(lambda: dense_selection_misalignment(x, M, K, replicates, seed=0))
        print(
            f"  n = {n:,}, N = {dim:,}, M = K = {M}: ours ({path} path) {t_ours:.3f} s "
            f"(p̂ {p_ours:.4f} [{lo:.3f}, {hi:.3f}]); baselines: Python loop {t_loop:.3f} s (p̂ {p_loop:.3f}), "
            f"dense selection @ X {t_dense:.3f} s (p̂ {p_dense:.3f}); the {other} path {t_other:.3f} s "
            f"(p̂ {p_other:.4f}, same draws)"
        )
        print(
            f"      -> ours is {t_loop / t_ours:.1f}x the loop, {t_dense / t_ours:.1f}x the dense product, "
            f"{t_other / t_ours:.1f}x the {other} path"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a fast check")
    args = parser.parse_args()
    print(
        f"growcert.stats benchmark ({'quick' if args.quick else 'full'}), "
        f"{psutil.cpu_count()} CPUs, numpy {np.__version__}, load average at start "
        f"{os.getloadavg()[0]:.1f} (times are best-of-2 where affordable; a shared machine adds noise)"
    )
    if args.quick:
        part_a(8_000, 1_536, block_bytes=8 * 1_536 * 2_048)  # blocks of 2,048 rows
        part_b(500, 16_384, chunk=32)
        part_c([(512, 1_024, 32, 32)], 2_000)
    else:
        part_a(20_000, 4_096, block_bytes=accumulate.DEFAULT_BLOCK_BYTES)
        part_b(2_000, 65_536, chunk=32)
        part_c([(512, 1_024, 32, 32), (512, 4_096, 32, 32), (2_000, 1_024, 32, 32)], 10_000)


if __name__ == "__main__":
    main()
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")
