"""The prepared device check: CUDA-marked tests, then a short P1 width sweep through `growcert <stage>` commands.

Run by benchmarks/gpu_check.sh (which installs the carried wheels first). For each LLaMA width it trains a few
hundred steps (`growcert train --device`), dumps a store (`growcert dump`) and estimates d_align
(`growcert estimate-alignment`). It prints:
- the GPU's bf16 matmul rate, measured in this run (the best of a few square products);
- per width: ms/step and achieved TFLOP/s of training (6·N·T + 12·L·C·d·T per step, N the non-embedding
  parameters, T tokens per step, the usual transformer estimate), and their fraction of that rate;
- the d_align table: both reductions, with intervals and detectability, train and held-out pools.

`--smoke` shrinks everything so that the plumbing runs on a CPU in about a minute (tests/test_gpu_check.py).

    python benchmarks/gpu_check.py --out /tmp/gpu-check [--widths 512 1024 2048] [--steps 300] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
TABLE_COLUMNS = [
    "width",
    "point",
    "reduction",
    "pool",
    "n",
    "detectability",
    "status",
    "d_par",
    "d_2",
    "d_align",
    "d_align_lo",
    "d_align_hi",
    "d_align_plugin",
]


def growcert(*args: str) -> None:
    """`growcert <stage> ...` as a user runs it; its log goes to our stdout."""
    started = time.perf_counter()
    command = shutil.which("growcert") or str(Path(sys.executable).parent / "growcert")
    subprocess.run([command, *args], check=True)
    print(f"  ({args[0]}: {time.perf_counter() - started:.1f}s)", flush=True)


def matmul_tflops(device: torch.device, size: int, repeats: int = 20) -> float:
    """Best measured bf16 (CUDA) or fp32 (CPU) square-matmul rate, TFLOP/s."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    best = float("inf")
    for _ in range(3):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(repeats):
            a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - started) / repeats)
    return 2 * size**3 / best / 1e12


def training_flops_per_step(metrics: dict, width: int, depth: int, context: int, batch: int, vocab: int) -> float:
    tokens = batch * context
    non_embedding = metrics["num_parameters"] - 2 * vocab * width  # input embedding and output head
    return 6 * non_embedding * tokens + 12 * depth * context * width * tokens


def merged(base: dict, over: dict) -> dict:
    """`over` merged into `base` key by key, nested sections too: how Snakemake merges a --configfile."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def nominal_grokking_unit(out: Path, steps: int, device: str, smoke: bool) -> dict:
    """One unit of P2's nominal grokking task (configs/grokking-nominal.yaml over config.yaml: AdamW at decay 0.01,
    seed 0), `steps` steps by its `growcert grokking --arm --seed` command, never stopped early; its seconds per
    step, and the whole config's worst case (every unit to its cap) at that rate, in GPU-hours."""
    import yaml

    from growcert.config import stage_settings
    from growcert.experiments import task as experiment

    with open(ROOT / "config.yaml") as base, open(ROOT / "configs" / "grokking-nominal.yaml") as nominal:
        task = merged(yaml.safe_load(base)["grokking"], yaml.safe_load(nominal)["grokking"])
    cap, units = task["steps"], len(experiment("grokking").units(stage_settings("grokking", task)))
    settings = {
        **task,
        "steps": steps,
        "stop_at_test_acc": None,
        "cap": "fixed",
        "eval_every": steps,
        "resume_every": 10 * steps,
    }
    if smoke:
        settings.update(p=11, batch_size=16, model={**task.get("model", {}), "width": 16, "depth": 1, "heads": 2})
    folder = out / "grokking-nominal-unit"
    growcert(
        "grokking",
        "--settings",
        json.dumps(settings),
        "--arm",
        "AdamW_wd_0.01",
        "--seed",
        "0",
        "--out",
        str(folder),
        "--device",
        device,
        "--threads",
        "4",
    )
    seconds = float(pd.read_csv(folder / "summary.csv")["seconds"].iloc[0])
    return {
        "steps": steps,
        "ms_per_step": 1000 * seconds / steps,
        "units": units,
        "cap": cap,
        "worst_case_hours": units * cap * seconds / steps / 3600,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "prepared" / "shakespeare")
    parser.add_argument("--widths", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--examples", type=int, default=48, help="train and held-out examples per store")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--grokking-steps", type=int, default=2000, help="steps of the nominal grokking unit")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on any device: checks the plumbing only")
    args = parser.parse_args()
    if args.smoke:
        args.widths, args.depth, args.context, args.steps, args.batch, args.examples = [16, 32], 1, 32, 20, 8, 8
        args.grokking_steps = 20
        args.device = "auto"
    args.out.mkdir(parents=True, exist_ok=True)

    from growcert.runtime import resolve_device

    device = resolve_device(args.device)
    print(
        f"torch {torch.__version__}, device {device}"
        + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
        flush=True,
    )
    peak = matmul_tflops(device, 256 if args.smoke else 8192)
    print(f"measured {'bf16' if device.type == 'cuda' else 'fp32'} matmul rate: {peak:.3g} TFLOP/s", flush=True)

    if not (args.data / "info.json").is_file():
        growcert("prepare", "--dataset", "shakespeare", "--out", str(args.data))
    vocab = json.loads((args.data / "info.json").read_text()).get("vocab_size", 256)
    head_dim = 8 if args.smoke else 64
    rows, tables = [], []
    for width in args.widths:
        run = args.out / f"w{width}_d{args.depth}"
        settings = {
            "family": "llama",
            "dataset": "shakespeare",
            "width": width,
            "depth": args.depth,
            "seed": 0,
            "model": {"head_dim": head_dim, "context": args.context},
            "train": {
                "steps": args.steps,
                "batch_size": args.batch,
                "lr": 3e-4,
                "warmup_steps": 20,
                "save_steps": [args.steps],
                "eval_every": args.steps,
                "eval_examples": 64,
                "precision": args.precision,
                "resume_every": 10 * args.steps,
            },
        }
        growcert(
            "train",
            "--data",
            str(args.data),
            "--settings",
            json.dumps(settings),
            "--out",
            str(run),
            "--device",
            args.device,
            "--threads",
            "4",
        )
        metrics = json.loads((run / "metrics.json").read_text())
        flops = training_flops_per_step(metrics, width, args.depth, args.context, args.batch, vocab)
        achieved = flops / metrics["seconds_per_step"] / 1e12
        rows.append(
            {
                "width": width,
                "parameters": metrics["num_parameters"],
                "ms_per_step": 1000 * metrics["seconds_per_step"],
                "TFLOP/s": achieved,
                "of_matmul_rate": achieved / peak,
                "test_loss": metrics["history"][-1]["test_loss"],
            }
        )
        store = args.out / f"w{width}_d{args.depth}_step{args.steps}.zarr"
        dump = {"train_examples": args.examples, "test_examples": args.examples, "batch_size": 8}
        growcert(
            "dump",
            "--checkpoint",
            str(run / f"step{args.steps}.pt"),
            "--data",
            str(args.data),
            "--settings",
            json.dumps(dump),
            "--out",
            str(store),
            "--device",
            args.device,
            "--threads",
            "4",
        )
        table = args.out / f"alignment_w{width}.csv"
        growcert("estimate-alignment", "--store", str(store), "--out", str(table))
        tables.append(pd.read_csv(table).assign(width=width))

    pd.set_option("display.width", 200)
    print("\ntraining (ms/step includes the one final evaluation):")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    alignment = pd.concat(tables, ignore_index=True)
    shown = [column for column in TABLE_COLUMNS if column in alignment.columns]
    print("\nd_align (P1), by width:")
    print(alignment[shown].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    pd.DataFrame(rows).to_csv(args.out / "training.csv", index=False)
    alignment.to_csv(args.out / "alignment.csv", index=False)

    print("\nP2 grokking at the nominal task (configs/grokking-nominal.yaml), one unit (AdamW wd 0.01, seed 0):")
    unit = pd.DataFrame([nominal_grokking_unit(args.out, args.grokking_steps, args.device, args.smoke)])
    print(unit.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    unit.to_csv(args.out / "grokking_nominal.csv", index=False)


if __name__ == "__main__":
    sys.exit(main())
