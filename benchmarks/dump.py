"""Dump cost vs plain forward-backward passes, side by side in one run on the same examples.

For each model: (1) plain forward + backward of the summed per-example loss to the parameters,
batch by batch (what a training step costs, without the optimizer); (2) the full `growcert dump`
of the same examples (capture at every insertion point + Zarr write + compression), as float32 and as
bfloat16 with shards of 8 chunks. Prints both times, their ratio (goal <= 1.5), the MB/s of q+z
(float32 bytes) through the whole dump and the compression ratio.

Then the write alone: the float32 store's own q and z written again by `StoreWriter` (its chunks,
compressors and CRC32C; zarr's thread pool at --threads workers) against a plain `np.save` of the same bytes
in the same temporary folder (same disk), in MB/s, both without fsync.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/dump.py [--examples 256] [--repeats 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import zarr

from growcert.data.batches import fixed_examples
from growcert.store.checkpoint import save_checkpoint
from growcert.data import load_prepared, prepare_dataset
from growcert.stages.dump import dump_gradients
from growcert.store.inspect import _stored_bytes
from growcert.models import build_model
from growcert.store import GroupSpec, StoreWriter, open_group, open_store
from growcert.store.encoding import StoreOptions

VARIANTS = [("float32", {}), ("bf16+shards", {"dtype": "bfloat16", "shards": 8})]

CASES = [("resnet", "digits", 2, 20, {}), ("llama", "shakespeare", 128, 2, {"head_dim": 16, "context": 64})]


def plain_passes(model, examples, batch_size):
    model.eval()
    started = time.perf_counter()
    for inputs, targets in examples.batches(batch_size):
        model.zero_grad(set_to_none=True)
        model.per_example_loss(model(inputs), targets).sum().backward()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=256, help="examples per dump (half train, half test)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="alternating repeats; the best of each is kept")
    parser.add_argument("--threads", type=int, default=2, help="the job's cores: torch threads and zarr workers")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="growcert-bench-dump-"))
    settings = {"train_examples": args.examples // 2, "test_examples": args.examples // 2,
                "batch_size": args.batch_size, "seed": 0, "points": None}
    print(f"{'model':<28}{'store':<13}{'points':>6}{'plain s':>9}{'dump s':>9}{'ratio':>7}{'MB/s':>8}{'compr.':>8}")
    writes = []
    try:
        for family, dataset, width, depth, options in CASES:
            prepare_dataset(dataset, work / dataset, {})
            data = load_prepared(work / dataset)
            torch.manual_seed(0)
            model = build_model(family, width, depth, data.info, options)
            checkpoint = work / f"{family}.pt"
            save_checkpoint(checkpoint, model, family=family, width=width, depth=depth, data_info=data.info,
                            model_options=options, step=0, provenance={"seed": 0, "config_hash": "bench"})
            context = options.get("context")
            examples = [fixed_examples(data, split, args.examples // 2, 0, context) for split in ("train", "test")]
            plain, dumped = [], {name: [] for name, _ in VARIANTS}
            for _ in range(args.repeats):  # alternate, so drift on a noisy machine hits all alike
                plain.append(sum(plain_passes(model, part, args.batch_size) for part in examples))
                for name, extra in VARIANTS:
                    store = work / f"{family}-{name}.zarr"
                    shutil.rmtree(store, ignore_errors=True)
                    started = time.perf_counter()
                    dump_gradients(checkpoint, data, store, {**settings, **extra}, threads=args.threads,
                                   log=lambda _: None)
                    dumped[name].append(time.perf_counter() - started)
            for name, _ in VARIANTS:
                store = work / f"{family}-{name}.zarr"
                groups = [g for g in store.iterdir() if g.is_dir()]
                logical = sum(4 * 2 * args.examples * np.prod(zarr.open_array(g / "q", mode="r").shape[1:])
                              for g in groups)
                on_disk = sum(_stored_bytes(g / v) for g in groups for v in ("q", "z"))
                best_plain, best_dump = min(plain), min(dumped[name])
                print(f"{family} w{width} d{depth} on {dataset:<12}{name:<13}{len(groups):>6}{best_plain:>9.3f}"
                      f"{best_dump:>9.3f}{best_dump / best_plain:>7.2f}{logical / 1e6 / best_dump:>8.1f}"
                      f"{logical / on_disk:>8.2f}")
            writes.append((family, write_alone(work, work / f"{family}-float32.zarr", args.threads, args.repeats)))
        print(f"\nwrite alone (q+z of the float32 store, {args.threads} zarr workers):")
        for family, (store_rate, save_rate) in writes:
            print(f"  {family:<8} StoreWriter {store_rate:8.1f} MB/s   np.save {save_rate:8.1f} MB/s   "
                  f"ratio {store_rate / save_rate:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_alone(work: Path, store: Path, threads: int, repeats: int) -> tuple[float, float]:
    """MB/s of StoreWriter rewriting a store's q and z (one call per group) and of np.save of the same arrays."""
    groups = open_store(store).attrs["groups"]
    opened = {g: open_group(store, g) for g in groups}
    values = {g: {v: np.asarray(opened[g][v].values) for v in ("q", "z", "loss")} for g in groups}
    specs = [GroupSpec(g, opened[g]["q"].dims[1:], values[g]["q"].shape[1:]) for g in groups]
    first = opened[groups[0]]
    split, index, label = (np.asarray(first[v].values) for v in ("split", "index", "label"))
    nbytes = sum(values[g][v].nbytes for g in groups for v in ("q", "z"))
    store_times, save_times = [], []
    for _ in range(repeats):
        copy = work / "rewrite.zarr"
        shutil.rmtree(copy, ignore_errors=True)
        with zarr.config.set({"threading.max_workers": threads}):
            writer = StoreWriter(copy, specs, split.astype(object), index, label, {}, options=StoreOptions())
            started = time.perf_counter()
            for group in groups:
                writer.write(group, 0, values[group])
            store_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        for group in groups:
            for variable in ("q", "z"):
                np.save(work / f"plain-{group}-{variable}.npy", values[group][variable])
        save_times.append(time.perf_counter() - started)
    return nbytes / 1e6 / min(store_times), nbytes / 1e6 / min(save_times)


if __name__ == "__main__":
    main()
