"""The package's store readers on the previous store format against this one, side by side in one run.

Each side writes its own store with its own code (`StoreWriter`, the same random q, z and losses, three
ResNet-like points of 32 x 16 x 16 floats, `--examples` samples, chunks as the dump makes them) and then
times the readers every stage goes through:

    open       `open_group` of every point, `split_of` and `store_identity` (each stage's setup)
    chunks     `iter_sample_chunks` over q and z of every point (estimate-depth, `growcert inspect`)
    alignment  `estimate_alignment` with the schema's settings (q through dask, both reductions, both pools)
    inspect    `describe_store` with the per-split q summaries (`growcert inspect`)

"before" is the code of git revision `--before` (default ec00dca, the last with format version 1: the
per-sample variables as data variables chunked like q), exported with `git archive` and imported in a child process;
"after" is this checkout's src/ (version 2: coordinates of `sample`, one chunk each). The sides alternate for `--rounds`
rounds, each reader's best time per side is kept (drift on a shared machine hits both alike), and the table
shows both and after/before.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/store_read.py [--before ec00dca] [--examples 1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPE = (32, 16, 16)
POINTS = ("block0", "block1", "block2")


def child(store: Path, examples: int, repeats: int) -> dict[str, float]:
    """Write a store with the imported package's writer and time its readers (run with that package on
    PYTHONPATH); best of `repeats` per reader, in seconds."""
    import numpy as np

    from growcert.stages.alignment import estimate_alignment
    from growcert.store import GroupSpec, StoreWriter, iter_sample_chunks, open_group, split_of, store_identity
    from growcert.store.inspect import describe_store

    dims = ("channel", "height", "width")
    # a GroupSpec of version 2 names its position dims; version 1's has no such field
    positions = (("height", "width"),) if "positions" in inspect.signature(GroupSpec).parameters else ()
    specs = [GroupSpec(name, dims, SHAPE, *positions) for name in POINTS]
    rng = np.random.default_rng(0)
    split = np.array(["train"] * (examples // 2) + ["test"] * (examples - examples // 2), dtype=object)
    attrs = {"family": "resnet", "dataset": "digits", "width": 2, "depth": 8, "seed": 0, "step": 20}
    writer = StoreWriter(store, specs, split, np.arange(examples), np.arange(examples) % 10, attrs)
    for spec in specs:
        chunk = writer.chunks[spec.name]
        for start in range(0, examples, chunk):
            rows = min(chunk, examples - start)
            writer.write(
                spec.name,
                start,
                {
                    "q": rng.standard_normal((rows, *SHAPE), dtype=np.float32) + 0.1,
                    "z": rng.standard_normal((rows, *SHAPE), dtype=np.float32),
                    "loss": rng.random(rows, dtype=np.float32),
                },
            )
    writer.finish()

    def opening():
        store_identity(store)
        for point in POINTS:
            split_of(open_group(store, point))

    def chunks():
        for point in POINTS:
            for variable in ("q", "z"):
                for _ in iter_sample_chunks(store, point, variable):
                    pass

    readers = {
        "open": opening,
        "chunks": chunks,
        "alignment": lambda: estimate_alignment(store, None, log=lambda _: None),
        "inspect": lambda: describe_store(store),
    }
    best = {}
    for name, reader in readers.items():
        reader()  # numba's compile and the page cache: both sides time warm reads
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            reader()
            times.append(time.perf_counter() - started)
        best[name] = min(times)
    return best


def run_side(source: Path, examples: int, repeats: int, folder: Path) -> dict[str, float]:
    store = folder / f"{source.parent.name}-{time.monotonic_ns()}.zarr"
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(store), "--examples", str(examples), "--repeats", str(repeats)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"store_read: the reader of {source} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="ec00dca", help="git revision of the previous format's code")
    parser.add_argument("--examples", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3, help="before/after alternations")
    parser.add_argument("--repeats", type=int, default=3, help="timed reads per reader and round")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.examples, args.repeats)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.before, "src"], capture_output=True, check=True
        )
        tarfile.open(fileobj=BytesIO(archive.stdout)).extractall(folder / "before", filter="data")
        sources = {"before": folder / "before" / "src", "after": ROOT / "src"}
        best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
        for _ in range(args.rounds):
            for side, source in sources.items():
                for reader, seconds in run_side(source, args.examples, args.repeats, folder).items():
                    best[side][reader] = min(seconds, best[side].get(reader, float("inf")))
    print(
        f"store readers, {args.examples} examples x {len(POINTS)} points of {SHAPE} (q and z), best of "
        f"{args.rounds} x {args.repeats}; before: {args.before} (store version 1), after: this checkout"
    )
    print(f"{'reader':<10} {'before s':>10} {'after s':>10} {'after/before':>13}")
    for reader in best["before"]:
        before, after = best["before"][reader], best["after"][reader]
        print(f"{reader:<10} {before:>10.4f} {after:>10.4f} {after / before:>13.3f}")


if __name__ == "__main__":
    main()
