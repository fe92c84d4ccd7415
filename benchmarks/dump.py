"""Dump cost vs plain forward-backward passes, side by side in one run on the same examples.

For each model: (1) plain forward + backward of the summed per-example loss to the parameters, batch by batch
(what a training step costs, without the optimizer); (2) the full `growcert dump` of the same examples
(capture at every insertion point + Zarr write + compression), as float32 and as bfloat16 with shards of 8
chunks. Prints both times and their ratio (goal <= 1.2, docs/design.md §5), the CPU seconds of both (the
dump's split into its capturing thread and every other thread: the store's writer and its workers, which
compress and write the chunks, and zarr's, which write the template) and their ratio, the MB/s of q+z (float32
bytes) through the whole dump and the compression ratio. Runs alternate and the best of each is kept, so drift
on a shared machine hits all alike. The CPU ratio is the work the dump does over the passes' work, whatever
else runs: with one core the wall-clock ratio is about the same, with an idle core for the writer's threads it
can fall below it (down to the capturing thread's share), and on a core shared with other jobs it can exceed
it.

`--threads` is torch's threads and the store's workers, 1 by default as in the pipeline (rule dump_gradients);
on a 2-core machine shared with other jobs, 2 torch threads make the plain passes themselves 3-30x slower and
erratic (OpenMP waits on a thread the other jobs hold the core of).

Then the write alone: the float32 store's own q and z written again by `StoreWriter` (its chunks,
compressors and CRC32C; --threads workers) against a plain `np.save` of the same bytes
in the same temporary folder (same disk), in MB/s, both without fsync.

The dump of a store whose groups fit in a few chunks cannot hide much of its writing: chunks are ≥ 1 MiB
(docs/design.md §5), a chunk is compressed once it is whole, and the last chunk of every group is whole only
after the last batch. By default the benchmark dumps what the pipeline dumps (the schema's dump.train_examples
+ dump.test_examples, 1,024 examples: 8 chunks per resnet group); `--examples 256` shows the small case, where
half of every group is written after the last batch.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/dump.py [--examples 1024] [--repeats 3] [--threads 1]
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

from growcert.config import stage_settings
from growcert.data import load_prepared, prepare_dataset
from growcert.data.batches import fixed_examples
from growcert.models import build_model
from growcert.models.checkpoint import save_checkpoint
from growcert.stages.dump import dump_gradients
from growcert.store import GroupSpec, StoreWriter, open_group, store_attrs
from growcert.store.encoding import StoreOptions
from growcert.store.inspect import _stored_bytes

VARIANTS = [("float32", {}), ("bf16+shards", {"dtype": "bfloat16", "shards": 8})]
GOAL = 1.2  # the dump over the plain passes

CASES = [("resnet", "digits", 2, 20, {}), ("llama", "shakespeare", 128, 2, {"head_dim": 16, "context": 64})]


def plain_passes(model, examples, batch_size):
    """Seconds and CPU seconds (every thread) of forward + backward passes over `examples`."""
    model.eval()
    started, cpu = time.perf_counter(), time.process_time()
    for inputs, targets in examples.batches(batch_size):
        model.zero_grad(set_to_none=True)
        model.per_example_loss(model(inputs), targets).sum().backward()
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = stage_settings("dump", {})
    parser.add_argument(
        "--examples",
        type=int,
        default=defaults["train_examples"] + defaults["test_examples"],
        help="examples per dump, half train, half test (default: the pipeline's, dump.train_examples "
        "+ dump.test_examples)",
    )
    parser.add_argument("--batch-size", type=int, default=defaults["batch_size"])
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats; the best of each is kept")
    parser.add_argument("--threads", type=int, default=1, help="the job's cores: torch threads and the store's workers")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="growcert-bench-dump-"))
    settings = {
        "train_examples": args.examples // 2,
        "test_examples": args.examples // 2,
        "batch_size": args.batch_size,
        "seed": 0,
        "points": None,
    }
    print(
        f"{args.examples} examples, batches of {args.batch_size}, {args.threads} thread(s), best of {args.repeats}. "
        f"s: wall seconds; cpu: CPU seconds of the plain passes and of the dump (its capturing thread + its "
        f"other threads: the store's writer, zarr, compression) and their ratio"
    )
    print(
        f"{'model':<28}{'store':<13}{'points':>6}{'plain s':>9}{'dump s':>9}{'ratio':>7}{'<=' + str(GOAL):>6}"
        f"{'cpu':>7}{'cpu':>11}{'ratio':>7}{'MB/s':>8}{'compr.':>8}"
    )
    writes = []
    try:
        for family, dataset, width, depth, options in CASES:
            prepare_dataset(dataset, work / dataset, {})
            data = load_prepared(work / dataset)
            torch.manual_seed(0)
            model = build_model(family, width, depth, data.info, options)
            checkpoint = work / f"{family}.pt"
            save_checkpoint(
                checkpoint,
                model,
                family=family,
                width=width,
                depth=depth,
                data_info=data.info,
                model_options=options,
                step=0,
                provenance={"seed": 0, "config_hash": "bench"},
            )
            context = options.get("context")
            examples = [fixed_examples(data, split, args.examples // 2, 0, context) for split in ("train", "test")]
            plain, dumped = [], {name: [] for name, _ in VARIANTS}
            for _ in range(args.repeats):  # alternate, so drift on a noisy machine hits all alike
                plain.append(tuple(map(sum, zip(*(plain_passes(model, part, args.batch_size) for part in examples)))))
                for name, extra in VARIANTS:
                    store = work / f"{family}-{name}.zarr"
                    shutil.rmtree(store, ignore_errors=True)
                    started, main_cpu, all_cpu = time.perf_counter(), time.thread_time(), time.process_time()
                    dump_gradients(
                        checkpoint,
                        data,
                        store,
                        stage_settings("dump", {**settings, **extra}),
                        threads=args.threads,
                        log=lambda _: None,
                        device="cpu",
                    )
                    main_cpu = time.thread_time() - main_cpu
                    dumped[name].append(
                        (time.perf_counter() - started, main_cpu, time.process_time() - all_cpu - main_cpu)
                    )
            for name, _ in VARIANTS:
                store = work / f"{family}-{name}.zarr"
                groups = [g for g in store.iterdir() if g.is_dir()]
                logical = sum(
                    4 * 2 * args.examples * np.prod(zarr.open_array(g / "q", mode="r").shape[1:]) for g in groups
                )
                on_disk = sum(_stored_bytes(g / v) for g in groups for v in ("q", "z"))
                (best_plain, plain_cpu), (best_dump, main_cpu, other_cpu) = min(plain), min(dumped[name])
                ratio = best_dump / best_plain
                print(
                    f"{family} w{width} d{depth} on {dataset:<12}{name:<13}{len(groups):>6}{best_plain:>9.3f}"
                    f"{best_dump:>9.3f}{ratio:>7.2f}{'yes' if ratio <= GOAL else 'no':>6}{plain_cpu:>7.2f}"
                    f"{f'{main_cpu:.2f}+{other_cpu:.2f}':>11}{(main_cpu + other_cpu) / plain_cpu:>7.2f}"
                    f"{logical / 1e6 / best_dump:>8.1f}{logical / on_disk:>8.2f}"
                )
            writes.append((family, write_alone(work, work / f"{family}-float32.zarr", args.threads, args.repeats)))
        print(f"\nwrite alone (q+z of the float32 store, {args.threads} store workers):")
        for family, (store_rate, save_rate) in writes:
            print(
                f"  {family:<8} StoreWriter {store_rate:8.1f} MB/s   np.save {save_rate:8.1f} MB/s   "
                f"ratio {store_rate / save_rate:.2f}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_alone(work: Path, store: Path, threads: int, repeats: int) -> tuple[float, float]:
    """MB/s of StoreWriter rewriting a store's q and z (one call per group) and of np.save of the same arrays."""
    groups = store_attrs(store)["groups"]
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
            writer = StoreWriter(
                copy, specs, split.astype(object), index, label, {}, options=StoreOptions(), workers=threads
            )
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
