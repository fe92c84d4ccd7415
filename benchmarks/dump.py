"""Dump cost vs plain forward-backward passes, side by side in one run on the same examples.

For each model: (1) plain forward + backward of the summed per-example loss to the parameters,
batch by batch (what a training step costs, without the optimizer); (2) the full `growcert dump`
of the same examples (capture at every insertion point + Zarr write + compression). Prints both
times, their ratio (goal <= 1.5), the MB/s of q+z written and the compression ratio.

    .venv/bin/python benchmarks/dump.py [--examples 1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

from growcert.data.batches import fixed_examples
from growcert.store.checkpoint import save_checkpoint
from growcert.data import load_prepared, prepare_dataset
from growcert.stages.dump import dump_gradients
from growcert.store.inspect import _stored_bytes
from growcert.models import build_model

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
    parser.add_argument("--examples", type=int, default=1024, help="examples per dump (half train, half test)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats; the best of each is kept")
    args = parser.parse_args()
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="growcert-bench-dump-"))
    settings = {"train_examples": args.examples // 2, "test_examples": args.examples // 2,
                "batch_size": args.batch_size, "seed": 0, "points": None}
    print(f"{'model':<28}{'points':>7}{'plain s':>10}{'dump s':>10}{'ratio':>8}{'MB/s':>9}{'compr.':>8}")
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
            plain, dumped = [], []
            for _ in range(args.repeats):  # alternate, so drift on a noisy machine hits both alike
                plain.append(sum(plain_passes(model, part, args.batch_size) for part in examples))
                store = work / f"{family}.zarr"
                shutil.rmtree(store, ignore_errors=True)
                started = time.perf_counter()
                dump_gradients(checkpoint, data, store, settings, log=lambda _: None)
                dumped.append(time.perf_counter() - started)
            groups = [g for g in store.iterdir() if g.is_dir()]
            logical = sum(4 * 2 * args.examples * torch.tensor(
                __import__("zarr").open_array(g / "q", mode="r").shape[1:]).prod().item() for g in groups)
            on_disk = sum(_stored_bytes(g / v) for g in groups for v in ("q", "z"))
            best_plain, best_dump = min(plain), min(dumped)
            print(f"{family} w{width} d{depth} on {dataset:<12}{len(groups):>5}{best_plain:>10.3f}{best_dump:>10.3f}"
                  f"{best_dump / best_plain:>8.2f}{logical / 1e6 / best_dump:>9.1f}{logical / on_disk:>8.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
