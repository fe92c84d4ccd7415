"""One training loop for every model family.

AdamW with linear warm-up then a constant learning rate (so checkpoints taken along
training at fixed budgets stay comparable across widths), global-norm clipping,
seeded initialisation and batch order, deterministic CPU kernels. Checkpoints are
written at the configured steps; `metrics.json` (train and held-out loss/accuracy
curves, timing, provenance) is written last, atomically, so a folder with
`metrics.json` is a finished run.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from growcert.batches import Examples, TrainingBatches, fixed_examples
from growcert.checkpoint import save_checkpoint
from growcert.data import PreparedDataset
from growcert.models import build_model
from growcert.provenance import provenance

# Evaluation sets are drawn with seeds offset from the run's seed so that they do not
# depend on the training order.
EVAL_SEED_OFFSET = 10_007


@torch.no_grad()
def evaluate(model: nn.Module, examples: Examples, batch_size: int = 256) -> tuple[float, float]:
    """Mean per-example loss and accuracy of `model` (eval mode) on `examples`."""
    was_training = model.training
    model.eval()
    loss_sum, correct_sum = 0.0, 0.0
    for inputs, targets in examples.batches(batch_size):
        outputs = model(inputs)
        loss_sum += model.per_example_loss(outputs, targets).double().sum().item()
        correct_sum += model.per_example_correct(outputs, targets).double().sum().item()
    model.train(was_training)
    return loss_sum / len(examples), correct_sum / len(examples)


def make_optimizer(model: nn.Module, train: dict[str, Any]) -> torch.optim.AdamW:
    # Decay matrices and convolution kernels only; norms' gains stay undecayed (standard practice).
    decayed = [p for p in model.parameters() if p.ndim >= 2]
    undecayed = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decayed, "weight_decay": train["weight_decay"]},
              {"params": undecayed, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=train["lr"], betas=tuple(train["betas"]))


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Learning-rate multiplier at optimiser step `step` (1-based): linear warm-up, then 1."""
    return min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0


def train_model(settings: dict[str, Any], data: PreparedDataset, out_dir: str | Path, threads: int = 1,
                log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train one run described by `settings` (see `growcert.config.train_settings`) into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    train, seed = settings["train"], settings["seed"]
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    # Small or zero weight decay drives Adam moments into denormals on CPU, slowing steps ~2x
    # without changing results (PAPERS.md P2 calibration).
    torch.set_flush_denormal(True)
    torch.manual_seed(seed)

    context = settings["model"].get("context") if data.info["kind"] == "text" else None
    model = build_model(settings["family"], settings["width"], settings["depth"], data.info, settings["model"])
    optimizer = make_optimizer(model, train)
    batches = TrainingBatches(data, train["batch_size"], train["steps"], seed, context, train["single_pass"])
    eval_sets = {split: fixed_examples(data, split, train["eval_examples"], seed + EVAL_SEED_OFFSET, context)
                 for split in ("train", "test")}
    record = provenance(settings, seed)
    checkpoints = sorted(train["checkpoints"])
    log(f"training {settings['family']} on {settings['dataset']} width={settings['width']} "
        f"depth={settings['depth']} seed={seed}: {sum(p.numel() for p in model.parameters()):,} parameters, "
        f"{train['steps']} steps of batch {train['batch_size']}, checkpoints at {checkpoints}")

    history: list[dict[str, float]] = []

    def record_evaluation(step: int, elapsed: float) -> dict[str, float]:
        train_loss, train_acc = evaluate(model, eval_sets["train"])
        test_loss, test_acc = evaluate(model, eval_sets["test"])
        row = {"step": step, "train_loss": train_loss, "train_acc": train_acc, "test_loss": test_loss,
               "test_acc": test_acc, "lr": optimizer.param_groups[0]["lr"], "elapsed_s": round(elapsed, 3)}
        history.append(row)
        return row

    record_evaluation(0, 0.0)
    model.train()
    started = time.perf_counter()
    report_every = max(1, train["steps"] // 20)
    for step in range(1, train["steps"] + 1):
        for group in optimizer.param_groups:
            group["lr"] = train["lr"] * warmup_factor(step, train["warmup_steps"])
        inputs, targets = batches.next()
        loss = model.per_example_loss(model(inputs), targets).mean()
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"training loss became {loss.item()} at step {step}; lower train.lr")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if train["grad_clip"] is not None:
            nn.utils.clip_grad_norm_(model.parameters(), train["grad_clip"])
        optimizer.step()

        elapsed = time.perf_counter() - started
        if step % train["eval_every"] == 0 or step in checkpoints or step == train["steps"]:
            row = record_evaluation(step, elapsed)
            log(f"step {step:>6}/{train['steps']}  train loss {row['train_loss']:.4f} acc {row['train_acc']:.3f}  "
                f"test loss {row['test_loss']:.4f} acc {row['test_acc']:.3f}")
        elif step % report_every == 0:
            eta = elapsed / step * (train["steps"] - step)
            log(f"step {step:>6}/{train['steps']}  batch loss {loss.item():.4f}  {elapsed:.1f}s elapsed, ~{eta:.0f}s left")
        if step in checkpoints:
            save_checkpoint(out_dir / f"step{step}.pt", model, family=settings["family"], width=settings["width"],
                            depth=settings["depth"], data_info=data.info, model_options=settings["model"],
                            step=step, provenance=record)

    seconds = time.perf_counter() - started
    metrics = {
        "family": settings["family"], "dataset": settings["dataset"], "width": settings["width"],
        "depth": settings["depth"], "seed": seed,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "seconds": round(seconds, 3), "seconds_per_step": round(seconds / train["steps"], 5),
        "checkpoints": {str(step): f"step{step}.pt" for step in checkpoints},
        "history": history, "provenance": record,
    }
    temporary = out_dir / ".metrics.json.partial"
    temporary.write_text(json.dumps(metrics, indent=1))
    os.replace(temporary, out_dir / "metrics.json")
    log(f"done in {seconds:.1f}s ({metrics['seconds_per_step'] * 1000:.1f} ms/step)")
    return metrics
