"""Training throughput against the machine: what fraction of float32 GEMM a growcert training step reaches.

Times `growcert.training.Trainer.step` (the step every training job runs: forward, loss, backward, gradient
clipping, AdamW) for the llama family at widths 64-256 and contexts 64-512 (the P1 regime map's grid, 2,048
tokens per step as there) and for resnet on digits, and counts each step's floating-point operations with
torch's FlopCounterMode (matmuls and convolutions, forward and backward). On the CPU it does not count the
products inside `scaled_dot_product_attention`, so for llama those are added by hand: QKᵀ and AV are
4·B·T²·d flops per layer forward and twice that backward, 12·L·B·T²·d in all (the full T×T square, which the
CPU kernel computes whatever the causal mask). Elementwise work is not counted: the rate is a lower bound. In the same
run it measures this machine's float32 GEMM at the same thread count, and prints each step's achieved GFLOP/s and its
ratio to that GEMM, side by side.

    PYTHONPATH=src .venv/bin/python benchmarks/train.py              # 1 thread, as the pipeline's jobs
    PYTHONPATH=src .venv/bin/python benchmarks/train.py --threads 2 --steps 3
    PYTHONPATH=src .venv/bin/python benchmarks/train.py --knobs    # the step's knobs, side by side

`--knobs` times the same llama step (width 64, the size where the share of GEMM is lowest) with each knob that
could remove waste, against the pipeline's step in the same run: AdamW's for-loop (the pipeline's, torch's
default on the CPU) against `foreach` and `fused`; SDPA's flash kernel (what the CPU picks) against its math
kernel; eager against `torch.compile` of the forward, with the compile time stated.
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
    return 2 * size**3 / best / 1e9


def _seconds(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def trainer_for(family: str, dataset: str, width: int, depth: int, batch: int, model: dict, data_dir: Path) -> Trainer:
    settings = stage_settings(
        "train",
        {
            "family": family,
            "dataset": dataset,
            "width": width,
            "depth": depth,
            "seed": 0,
            "model": model,
            "train": {"steps": 1000, "batch_size": batch, "save_steps": [1000], "single_pass": False},
        },
    )
    data = load_prepared(data_dir)
    torch.manual_seed(0)
    network = build_model(family, width, depth, data.info, settings["model"])
    return Trainer(network, settings["train"], data, 0, text_context(data, settings["model"]), "benchmark")


def attention_flops(depth: int, batch: int, context: int, width: int) -> float:
    """QKᵀ and AV of every layer, forward and backward (not seen by FlopCounterMode on the CPU)."""
    return 12.0 * depth * batch * context**2 * width


def measure(trainer: Trainer, steps: int) -> tuple[float, float]:
    """(flops of one step, best seconds per step over `steps` timed steps after two warm-up steps)."""
    trainer.step(1)
    with FlopCounterMode(display=False) as counter:
        trainer.step(2)
    best = min(_seconds(lambda step=step: trainer.step(step)) for step in range(3, 3 + steps))
    return float(counter.get_total_flops()), best


def step_seconds(trainer: Trainer, steps: int, first: int = 1) -> float:
    """Best seconds per step over `steps` timed steps, after two untimed ones."""
    trainer.step(first)
    trainer.step(first + 1)
    return min(_seconds(lambda step=step: trainer.step(step)) for step in range(first + 2, first + 2 + steps))


def knobs(data_dir: Path, steps: int) -> None:
    """Each knob's step time against the pipeline's step, llama w64 d2 at contexts 64 and 256."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    print(f"\n{'llama w64 d2':<16} {'knob':<34} {'s/step':>8} {'pipeline':>9} {'ratio':>6}")
    for context in (64, 256):

        def fresh() -> Trainer:
            return trainer_for(
                "llama",
                "shakespeare",
                64,
                2,
                TOKENS_PER_STEP // context,
                {"head_dim": 16, "context": context},
                data_dir,
            )

        baseline = step_seconds(fresh(), steps)
        rows = []
        for label, options in (("AdamW foreach=True", {"foreach": True}), ("AdamW fused=True", {"fused": True})):
            trainer = fresh()
            trainer.optimizer = torch.optim.AdamW(trainer.optimizer.param_groups, **options)
            rows.append((label, step_seconds(trainer, steps)))
        with sdpa_kernel(SDPBackend.MATH):
            rows.append(("SDPA math kernel", step_seconds(fresh(), steps)))
        trainer = fresh()
        trainer.model.forward = torch.compile(trainer.model.forward)
        compile_seconds = _seconds(lambda: trainer.step(1))
        rows.append((f"torch.compile (compile {compile_seconds:.0f} s)", step_seconds(trainer, steps, first=2)))
        for label, seconds in rows:
            print(
                f"{'context ' + str(context):<16} {label:<34} {seconds:>8.4f} {baseline:>9.4f} "
                f"{baseline / seconds:>5.2f}x",
                flush=True,
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the pipeline's jobs use 1)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per model (the best one counts)")
    parser.add_argument("--knobs", action="store_true", help="only the knobs against the pipeline's step")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    with tempfile.TemporaryDirectory() as folder:
        text, digits = Path(folder) / "shakespeare", Path(folder) / "digits"
        prepare_dataset("shakespeare", text, {})
        prepare_dataset("digits", digits, {})
        if args.knobs:
            knobs(text, args.steps)
            return
        rate = gemm_rate()
        print(f"float32 GEMM, {args.threads} thread(s): {rate:.1f} GFLOP/s (measured in this run)\n")
        print(f"{'model':<34} {'GFLOP/step':>10} {'s/step':>8} {'GFLOP/s':>8} {'of GEMM':>8}")
        cases = [
            (
                f"llama w{width} d2 context {context}",
                "llama",
                "shakespeare",
                width,
                2,
                TOKENS_PER_STEP // context,
                {"head_dim": 16, "context": context},
                text,
            )
            for width, context in LLAMA
        ]
        cases += [
            (f"resnet w{width} d{depth} digits batch 128", "resnet", "digits", width, depth, 128, {}, digits)
            for width, depth in RESNET
        ]
        for label, family, dataset, width, depth, batch, model, data_dir in cases:
            flops, seconds = measure(trainer_for(family, dataset, width, depth, batch, model, data_dir), args.steps)
            if family == "llama":
                flops += attention_flops(depth, batch, model["context"], width)
            achieved = flops / seconds / 1e9
            print(
                f"{label:<34} {flops / 1e9:>10.3f} {seconds:>8.4f} {achieved:>8.1f} {achieved / rate:>7.0%}", flush=True
            )


if __name__ == "__main__":
    main()
