"""Training throughput against the machine: what fraction of float32 GEMM a growcert training step reaches.

Times `growcert.training.Trainer.step` (the step every training job runs: forward, loss, backward, gradient
clipping, AdamW) for the llama family at widths 64-256 and contexts 64-512 (the P1 regime map's grid, 2,048
tokens per step as there) and for resnet on digits, and counts each step's floating-point operations with
torch's FlopCounterMode (matmuls and convolutions, forward and backward). On the CPU it does not count the
products inside `scaled_dot_product_attention`, so for llama those are added by hand: QKᵀ and AV are
4·B·T²·d flops per layer forward and twice that backward, 12·L·B·T²·d in all (the full T×T square, which the
CPU kernel computes whatever the causal mask). Elementwise work is not counted: the rate is a lower bound. In the same run it measures this machine's float32 GEMM at the
same thread count, and prints each step's achieved GFLOP/s and its ratio to that GEMM, side by side.

    PYTHONPATH=src .venv/bin/python benchmarks/train.py              # 1 thread, as the pipeline's jobs
    PYTHONPATH=src .venv/bin/python benchmarks/train.py --threads 2 --steps 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from growcert.config import stage_settings
from growcert.data import load_prepared, prepare_dataset
from growcert.models import build_model
from growcert.training import Trainer, text_context

LLAMA = [(width, context) for width in (64, 128, 256) for context in (64, 256, 512)]
TOKENS_PER_STEP = 2048
RESNET = [(1, 8), (2, 14), (4, 20)]  # (width multiplier, depth) on digits, batch 128


def gemm_rate(size: int = 2048, repeat: int = 3) -> float:
    """GFLOP/s of a float32 square matmul (2 size³ flops), best of `repeat`."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm-up
    best = min(_seconds(lambda: a @ b) for _ in range(repeat))
    return 2 * size ** 3 / best / 1e9


def _seconds(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def trainer_for(family: str, dataset: str, width: int, depth: int, batch: int, model: dict, data_dir: Path) -> Trainer:
    settings = stage_settings("train", {"family": family, "dataset": dataset, "width": width, "depth": depth, "seed": 0,
                                        "model": model, "train": {"steps": 1000, "batch_size": batch,
                                                                  "save_steps": [1000], "single_pass": False}})
    data = load_prepared(data_dir)
    torch.manual_seed(0)
    network = build_model(family, width, depth, data.info, settings["model"])
    return Trainer(network, settings["train"], data, 0, text_context(data, settings["model"]), "benchmark")


def attention_flops(depth: int, batch: int, context: int, width: int) -> float:
    """QKᵀ and AV of every layer, forward and backward (not seen by FlopCounterMode on the CPU)."""
    return 12.0 * depth * batch * context ** 2 * width


def measure(trainer: Trainer, steps: int) -> tuple[float, float]:
    """(flops of one step, best seconds per step over `steps` timed steps after two warm-up steps)."""
    trainer.step(1)
    with FlopCounterMode(display=False) as counter:
        trainer.step(2)
    best = min(_seconds(lambda step=step: trainer.step(step)) for step in range(3, 3 + steps))
    return float(counter.get_total_flops()), best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the pipeline's jobs use 1)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per model (the best one counts)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    with tempfile.TemporaryDirectory() as folder:
        text, digits = Path(folder) / "shakespeare", Path(folder) / "digits"
        prepare_dataset("shakespeare", text, {})
        prepare_dataset("digits", digits, {})
        rate = gemm_rate()
        print(f"float32 GEMM, {args.threads} thread(s): {rate:.1f} GFLOP/s (measured in this run)\n")
        print(f"{'model':<34} {'GFLOP/step':>10} {'s/step':>8} {'GFLOP/s':>8} {'of GEMM':>8}")
        cases = [(f"llama w{width} d2 context {context}", "llama", "shakespeare", width, 2,
                  TOKENS_PER_STEP // context, {"head_dim": 16, "context": context}, text) for width, context in LLAMA]
        cases += [(f"resnet w{width} d{depth} digits batch 128", "resnet", "digits", width, depth, 128, {}, digits)
                  for width, depth in RESNET]
        for label, family, dataset, width, depth, batch, model, data_dir in cases:
            flops, seconds = measure(trainer_for(family, dataset, width, depth, batch, model, data_dir), args.steps)
            if family == "llama":
                flops += attention_flops(depth, batch, model["context"], width)
            achieved = flops / seconds / 1e9
            print(f"{label:<34} {flops / 1e9:>10.3f} {seconds:>8.4f} {achieved:>8.1f} {achieved / rate:>7.0%}",
                  flush=True)


if __name__ == "__main__":
    main()
