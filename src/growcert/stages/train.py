"""`growcert train`: one run of a training grid, for every model family.

The loop, the step itself (AdamW, warm-up then constant lr, clipping, finite-loss check) and the evaluation
are `growcert.training`'s (`Trainer.fit`), shared with `growcert grow`. Initialisation and batch order are seeded,
kernels deterministic (`growcert.runtime`). Checkpoints are taken at the configured steps; `metrics.json`
(train and held-out loss/accuracy curves, timing, provenance) is written last, atomically, so a folder
with `metrics.json` is a finished run.

Preemption: every `train.resume_every` steps, and at once on SIGTERM, the whole state (weights, optimiser,
batch stream, torch's generator, the evaluation history) goes to the run's resume folder
(`growcert.resume`), where the checkpoints taken so far wait too; a rerun with the same settings continues
from it and ends with the same checkpoints, tensor for tensor, as an uninterrupted run. The checkpoints move
into the run folder when training is done, then metrics.json is written and the resume folder removed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from growcert.config import stage_settings
from growcert.data import PreparedDataset, load_prepared
from growcert.files import write_text
from growcert.models import build_model, check_run
from growcert.models.checkpoint import save_checkpoint
from growcert.pipeline.artifacts import CHECKPOINT, RUN_METRICS
from growcert.provenance import provenance
from growcert.resume import Interrupted, ResumeFolder, termination_requests
from growcert.runtime import device_record, torch_runtime
from growcert.training import Trainer, evaluate, evaluation_sets, text_context


def train_model(
    settings: dict[str, Any],
    data: PreparedDataset | str | Path,
    out_dir: str | Path,
    threads: int = 1,
    log: Callable[[str], None] = print,
    *,
    device: str,
) -> dict[str, Any]:
    """Train one run described by `settings` (stage `train` of `growcert.config.stage_settings`) on `data` (a
    prepared dataset, or its folder, read once the settings are checked) into `out_dir`, on `device` (a `device`
    setting: auto, cpu, cuda, cuda:N)."""
    settings = stage_settings("train", settings)
    check_run(settings)  # the family's rules on this run (width, depth, data kind, context)
    data = data if isinstance(data, PreparedDataset) else load_prepared(data)
    # flush denormals: small or zero weight decay drives Adam moments into denormals on CPU, which slows
    # steps without changing results (growcert.runtime)
    with torch_runtime(
        threads,
        seed=settings["seed"],
        flush_denormal=True,
        device=device,
        allow_tf32=settings["train"]["precision"] == "bf16",
    ) as runtime:
        return _train(settings, data, Path(out_dir), log, runtime.device)


def _train(
    settings: dict[str, Any], data: PreparedDataset, out_dir: Path, log: Callable[[str], None], device: torch.device
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    train, seed = settings["train"], settings["seed"]
    context = text_context(data, settings["model"])
    # built on the CPU under the run's seed, then moved: the same initial weights wherever it trains
    model = build_model(settings["family"], settings["width"], settings["depth"], data.info, settings["model"])
    model = model.to(device)
    run = f"{settings['family']}/{settings['dataset']} w{settings['width']} d{settings['depth']} s{seed}"
    trainer = Trainer(model, train, data, seed, context, label=f"train {run}")
    eval_sets = evaluation_sets(data, train, seed, context)
    record = provenance(settings, seed) | device_record(device)
    checkpoints = sorted(train["save_steps"])
    log(
        f"training {settings['family']} on {settings['dataset']} width={settings['width']} "
        f"depth={settings['depth']} seed={seed}: {sum(p.numel() for p in model.parameters()):,} parameters, "
        f"{train['steps']} steps of batch {train['batch_size']}, checkpoints at {checkpoints}"
    )

    history: list[dict[str, float]] = []
    resume = ResumeFolder(out_dir, settings, log)

    def record_evaluation(step: int, elapsed: float) -> dict[str, float]:
        history.append(_evaluation_row(model, eval_sets, trainer.optimizer.param_groups[0]["lr"], step, elapsed))
        return history[-1]

    state, first, before = resume.load(), 1, 0.0
    if state is None:
        record_evaluation(0, 0.0)
    else:
        trainer.load_state_dict(state["trainer"])
        history, first, before = state["history"], state["step"] + 1, state["elapsed"]
        log(f"resumed from {resume.state_file} at step {state['step']}")
    started = time.perf_counter() - before
    evaluate_at = {*range(train["eval_every"], train["steps"] + 1, train["eval_every"]), *checkpoints, train["steps"]}

    def evaluation(step: int) -> None:
        row = record_evaluation(step, time.perf_counter() - started)
        log(
            f"step {step:>6}/{train['steps']}  train loss {row['train_loss']:.4f} acc {row['train_acc']:.3f}  "
            f"test loss {row['test_loss']:.4f} acc {row['test_acc']:.3f}"
        )

    resume.path.mkdir(parents=True, exist_ok=True)
    with termination_requests() as stop:

        def after_step(step: int, loss: torch.Tensor) -> None:
            """A progress line between evaluations, the checkpoint due, the resume state (always on SIGTERM)."""
            if step not in evaluate_at and step % max(1, train["steps"] // 20) == 0:
                elapsed = time.perf_counter() - started
                log(
                    f"step {step:>6}/{train['steps']}  batch loss {loss.item():.4f}  {elapsed:.1f}s elapsed, "
                    f"~{elapsed / step * (train['steps'] - step):.0f}s left"
                )
            if step in checkpoints:
                _save_checkpoint(CHECKPOINT.path(resume.path, step=step), model, settings, data, step, record)
            if stop.requested or (step % train["resume_every"] == 0 and step < train["steps"]):
                elapsed = time.perf_counter() - started
                resume.save({"trainer": trainer.state_dict(), "history": history, "step": step, "elapsed": elapsed})
            if stop.requested:
                raise Interrupted(
                    f"train {run}: stopped by SIGTERM after step {step}; resume state saved to "
                    f"{resume.state_file}, a rerun continues from it"
                )

        trainer.fit(first, train["steps"], evaluate_at, evaluation, after_step)
    for step in checkpoints:
        os.replace(CHECKPOINT.path(resume.path, step=step), CHECKPOINT.path(out_dir, step=step))

    seconds = time.perf_counter() - started
    metrics = _run_metrics(settings, model, seconds, out_dir, history, record)
    write_text(RUN_METRICS.path(out_dir), json.dumps(metrics, indent=1))
    resume.clear()
    log(f"done in {seconds:.1f}s ({metrics['seconds_per_step'] * 1000:.1f} ms/step)")
    return metrics


def _evaluation_row(
    model: torch.nn.Module, eval_sets: dict[str, Any], lr: float, step: int, elapsed: float
) -> dict[str, float]:
    """A run's history row at `step`: loss and accuracy on the train and test evaluation sets, the lr, the time."""
    train_loss, train_acc = evaluate(model, eval_sets["train"])
    test_loss, test_acc = evaluate(model, eval_sets["test"])
    return {
        "step": step,
        "train_loss": train_loss,
        "train_acc": train_acc,
        "test_loss": test_loss,
        "test_acc": test_acc,
        "lr": lr,
        "elapsed_s": round(elapsed, 3),
    }


def _save_checkpoint(
    path: Path,
    model: torch.nn.Module,
    settings: dict[str, Any],
    data: PreparedDataset,
    step: int,
    record: dict[str, Any],
) -> None:
    """The run's checkpoint at `step`, with what a later stage rebuilds the model from."""
    save_checkpoint(
        path,
        model,
        family=settings["family"],
        width=settings["width"],
        depth=settings["depth"],
        data_info=data.info,
        model_options=settings["model"],
        step=step,
        provenance=record,
    )


def _run_metrics(
    settings: dict[str, Any],
    model: torch.nn.Module,
    seconds: float,
    out_dir: Path,
    history: list[dict[str, float]],
    record: dict[str, Any],
) -> dict[str, Any]:
    """A finished run's metrics.json: its grid cell, size, time, checkpoints, history and provenance."""
    checkpoints = sorted(settings["train"]["save_steps"])
    return {
        "family": settings["family"],
        "dataset": settings["dataset"],
        "width": settings["width"],
        "depth": settings["depth"],
        "seed": settings["seed"],
        **({"context": settings["context"]} if "context" in settings else {}),  # a context sweep's axis
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "seconds": round(seconds, 3),
        "seconds_per_step": round(seconds / settings["train"]["steps"], 5),
        "checkpoints": {str(step): CHECKPOINT.path(out_dir, step=step).name for step in checkpoints},
        "history": history,
        "provenance": record,
    }
