"""`growcert train`: one run of a training grid, for every model family.

The step itself (AdamW, warm-up then constant lr, clipping, finite-loss check) and the evaluation are
`growcert.training`'s, shared with `growcert grow`. Initialisation and batch order are seeded, kernels
deterministic (`growcert.runtime`). Checkpoints are written at the configured steps; `metrics.json`
(train and held-out loss/accuracy curves, timing, provenance) is written last, atomically, so a folder
with `metrics.json` is a finished run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from growcert.config import stage_settings
from growcert.data import PreparedDataset
from growcert.models import build_model
from growcert.provenance import provenance
from growcert.runtime import torch_runtime
from growcert.store.checkpoint import save_checkpoint
from growcert.training import Trainer, evaluate, evaluation_sets, text_context


def train_model(settings: dict[str, Any], data: PreparedDataset, out_dir: str | Path, threads: int = 1,
                log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train one run described by `settings` (stage `train` of `growcert.config.stage_settings`) into `out_dir`."""
    settings = stage_settings("train", settings)
    # flush denormals: small or zero weight decay drives Adam moments into denormals on CPU, slowing
    # steps ~2x without changing results (PAPERS.md P2 calibration)
    with torch_runtime(threads, seed=settings["seed"], flush_denormal=True):
        return _train(settings, data, Path(out_dir), log)


def _train(settings: dict[str, Any], data: PreparedDataset, out_dir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    train, seed = settings["train"], settings["seed"]
    context = text_context(data, settings["model"])
    model = build_model(settings["family"], settings["width"], settings["depth"], data.info, settings["model"])
    run = f"{settings['family']}/{settings['dataset']} w{settings['width']} d{settings['depth']} s{seed}"
    trainer = Trainer(model, train, data, seed, context, label=f"train {run}")
    eval_sets = evaluation_sets(data, train, seed, context)
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
               "test_acc": test_acc, "lr": trainer.optimizer.param_groups[0]["lr"], "elapsed_s": round(elapsed, 3)}
        history.append(row)
        return row

    record_evaluation(0, 0.0)
    model.train()
    started = time.perf_counter()
    report_every = max(1, train["steps"] // 20)
    for step in range(1, train["steps"] + 1):
        loss = trainer.step(step)
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
