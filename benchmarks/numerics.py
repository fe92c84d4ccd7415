"""What portable numerics cost: steps per second under `numerics: portable` against `native`, side by side in one run.

Portable numerics (growcert.numerics) pin torch's, MKL's and oneDNN's CPU kernels to AVX2, where native lets each
choose by the CPU (AVX-512 on a CPU that has it). The pins are read when the libraries start, so each measurement
is a fresh process with its mode's environment (GROWCERT_NUMERICS, and growcert.numerics.apply sets the pins
before torch is imported); the modes alternate, repeat after repeat, and the best time of each is kept, so drift on
a shared machine hits both alike. Four workloads, one torch thread as the pipeline's jobs:

    grokking   a P2 grokking training step (llama, p = 47, batch 128, AdamW), as the grokking-calibrated units run
    resnet     a ResNet training step (width 2, depth 14, digits, batch 128): convolutions, oneDNN's kernels
    dump       `growcert dump`'s capture of q and z at every insertion point of a llama (width 64, depth 2,
               context 64), examples per second, without the store write
    moments    the unbiased moments pass (growcert.stats.moments) over 4,096 examples of dimension 256: numpy,
               which the pins do not touch (its ratio shows the noise floor of the comparison)

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/numerics.py [--repeats 3] [--steps 40]

Prints, per workload, the rate under each mode and portable's rate over native's (below 1: portable is slower).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOADS = ("grokking", "resnet", "dump", "moments")


def grokking_rate(steps: int) -> float:
    import torch

    from growcert.config import stage_settings
    from growcert.experiments.grokking import answer_loss, build_model, division_equations

    settings = stage_settings("grokking", {"p": 47})
    tokens, answers = division_equations(47)
    torch.manual_seed(0)
    model = build_model(settings)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.15)
    generator = torch.Generator().manual_seed(0)

    def step():
        chosen = torch.randperm(len(tokens), generator=generator)[:128]
        optimizer.zero_grad(set_to_none=True)
        answer_loss(model, tokens[chosen], answers[chosen]).backward()
        optimizer.step()

    return rate(step, steps)


def resnet_rate(steps: int, data: Path) -> float:
    from train import trainer_for  # benchmarks/train.py: the pipeline's training step, as that benchmark times it

    trainer = trainer_for("resnet", "digits", 2, 14, 128, {}, data / "digits")
    counter = iter(range(1, 10**9))
    return rate(lambda: trainer.step(next(counter)), steps)


def dump_rate(steps: int, data: Path) -> float:
    import torch
    from train import trainer_for

    from growcert.models.capture import capture_batch

    model = trainer_for("llama", "shakespeare", 64, 2, 32, {"head_dim": 16, "context": 64}, data / "shakespeare").model
    model.eval()
    inputs = torch.randint(0, 256, (32, 64), generator=torch.Generator().manual_seed(0))
    targets = torch.randint(0, 256, (32, 64), generator=torch.Generator().manual_seed(1))
    return 32 * rate(lambda: capture_batch(model, inputs, targets), steps)


def moments_rate(steps: int) -> float:
    import numpy as np

    from growcert.stats import moments

    x = np.random.default_rng(0).standard_normal((4096, 256)).astype(np.float32)
    return rate(lambda: moments(x), max(2, steps // 10))


def rate(fn, steps: int) -> float:
    fn()  # the first call allocates and, under oneDNN, compiles its kernels
    started = time.perf_counter()
    for _ in range(steps):
        fn()
    return steps / (time.perf_counter() - started)


def child(workload: str, steps: int, data: Path) -> None:
    from growcert import numerics

    numerics.apply()  # before torch is imported, as `growcert`'s entry point does
    import torch

    torch.set_num_threads(1)
    measured = {
        "grokking": lambda: grokking_rate(steps),
        "resnet": lambda: resnet_rate(steps, data),
        "dump": lambda: dump_rate(steps, data),
        "moments": lambda: moments_rate(steps),
    }[workload]()
    print(json.dumps({"rate": measured, "capability": torch.backends.cpu.get_cpu_capability()}))


def measure(workload: str, mode: str, steps: int, data: Path) -> dict:
    from growcert import numerics

    env = {key: value for key, value in os.environ.items() if key not in numerics.KERNEL_VARIABLES}
    env.update({numerics.MODE_VARIABLE: mode, "OMP_NUM_THREADS": "1"})
    result = subprocess.run(
        [sys.executable, __file__, "--child", workload, "--steps", str(steps), "--data", str(data)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--only", nargs="*", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.data)
        return
    from growcert import numerics

    with tempfile.TemporaryDirectory() as scratch:
        from growcert.data import prepare_dataset

        for dataset in ("digits", "shakespeare"):
            prepare_dataset(dataset, Path(scratch) / dataset)
        print(f"CPU: {numerics.cpu_model()}; one torch thread; best of {args.repeats} alternating runs")
        print(f"{'workload':10} {'unit':12} {'native':>10} {'portable':>10} {'portable/native':>16}  kernels")
        for workload in args.only:
            best = {"native": 0.0, "portable": 0.0}
            kernels = {}
            for _ in range(args.repeats):
                for mode in best:
                    result = measure(workload, mode, args.steps, Path(scratch))
                    best[mode] = max(best[mode], result["rate"])
                    kernels[mode] = result["capability"]
            unit = "examples/s" if workload == "dump" else "passes/s" if workload == "moments" else "steps/s"
            print(
                f"{workload:10} {unit:12} {best['native']:10.2f} {best['portable']:10.2f} "
                f"{best['portable'] / best['native']:16.3f}  {kernels['native']} / {kernels['portable']}"
            )


if __name__ == "__main__":
    main()
