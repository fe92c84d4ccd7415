"""`growcert advise-check`: is `growcert advise` right on this model? Every insertion point grown for real and
scored on held-out examples advise never saw (docs/science.md, "advise-check (is the advice right?)").

`advise_check(model, data, settings, out, ...)`:
1. advise's own decision (`stages.advise.decide`: the dump of its sample, estimate-alignment, estimate-depth, the
   options' predictions at this run's steps, lr and batch size, the rule of `report.advice`) on its sample of
   training and held-out examples; what is scored per point is advise's first-order reading (grow here, no
   evidence, saturated: `advice.first_order_rows`), not yet its decision between training on and growing;
2. the outcome examples: `outcome_examples` held-out rows outside advise's held-out sample (`outcome_examples`);
3. one batch order of `steps` × `batch_size` training positions drawn once from the seed (`batch_order`);
4. the arms (`grow_every_point`), each trained on exactly that order by `train_on`, which records the positions it
   fed (their digest is in the table, so a reader can check that every arm saw the same batches):
       frozen     the checkpoint as it is: new_block's no-growth counterpart (nothing of the base trains there);
       control    the ungrown model, every parameter trained: whole's no-growth counterpart;
       new_block  at each point, the zero-output block advise scored (`models.blocks.insert_block`, the depth
                  settings' block_hidden and seed, W_in trainable) inserted, and only the block trained;
       whole      the same block inserted, and the whole grown model trained;
5. per point and variant, the outcome: held-out loss of the grown model minus its counterpart, paired per example,
   with its standard error over the outcome examples (`stats.growth_outcomes.paired_outcome`).
Every arm uses AdamW at the constant `lr`, no weight decay, no clipping: what is compared is growing, not a
schedule. The scores over checkpoints are `growcert.report.advice_check`'s.

Writes into `out`: advise_check.csv (one row per point × variant), the scores of this checkpoint
(report.advice_check.write_scores), advise's own advice.* in `out`/advice, and provenance.json.
A Hugging Face folder is refused (one line naming --model): growing one is not implemented here.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from torch import nn

from growcert.config import stage_settings
from growcert.data import PreparedDataset
from growcert.data.batches import Examples, examples_at, fixed_examples, split_size
from growcert.errors import CheckpointError, DatasetError
from growcert.files import write_text
from growcert.models.blocks import insert_block
from growcert.models.checkpoint import load_checkpoint
from growcert.pipeline.artifacts import PROVENANCE
from growcert.provenance import provenance
from growcert.report import advice, advice_check as scores
from growcert.runtime import torch_runtime
from growcert.stages.advise import AdviceInputs, advice_inputs, decide, describe, prepared_data, work_folder
from growcert.stats.growth_outcomes import paired_outcome
from growcert.training import to_device

OUTCOME_SEED_OFFSET = 30_011  # the outcome rows and the batch order: seed streams of their own
BATCH_SEED_OFFSET = 40_009
FROZEN, CONTROL = "frozen", "control"
# variant: (what trains, given the grown model and its new block; whether the base runs in training mode; its control)
VARIANTS: dict[str, tuple[Callable[[nn.Module, nn.Module], list[nn.Parameter]], bool, str]] = {
    "new_block": (lambda model, block: list(block.parameters()), False, FROZEN),
    "whole": (lambda model, block: list(model.parameters()), True, CONTROL),
}
ADVICE_COLUMNS = ["point", "point_index", "decision", "value", "value_se", "value_lo", "scaled_value", "detectability",
                  "b_exact"]


def outcome_examples(data: PreparedDataset, inputs: AdviceInputs, settings: dict[str, Any]) -> Examples:
    """Held-out examples advise's sample left out: a seeded draw of `outcome_examples` of them (all when fewer)."""
    context = inputs.context
    seen = fixed_examples(data, "test", inputs.dump["test_examples"], inputs.dump["seed"], context).index
    seen = seen // context if context else seen
    free = np.setdiff1d(np.arange(split_size(data, "test", context)), seen)
    if len(free) < 4:  # a standard error needs pairs; 4 is the fewest the estimators take anywhere
        raise DatasetError(f"--data {inputs.data_path}: {len(free)} held-out examples remain beside advise's "
                           f"{len(seen)}, fewer than 4 to measure the outcome on; lower advise.test_examples")
    rng = np.random.default_rng(settings["seed"] + OUTCOME_SEED_OFFSET)
    chosen = np.sort(rng.choice(free, min(settings["outcome_examples"], len(free)), replace=False))
    return examples_at(data, "test", chosen, context)


def batch_order(data: PreparedDataset, settings: dict[str, Any], context: int | None) -> np.ndarray:
    """(steps, batch_size) training positions, drawn once: seeded permutations of the training split, end to end."""
    available = split_size(data, "train", context)
    rng = np.random.default_rng(settings["seed"] + BATCH_SEED_OFFSET)
    needed = settings["steps"] * settings["batch_size"]
    order = np.concatenate([rng.permutation(available) for _ in range(-(-needed // available))])[:needed]
    return order.reshape(settings["steps"], settings["batch_size"])


def digest(positions: np.ndarray) -> str:
    """A short fingerprint of a sequence of batches (equal fingerprints: the same batches in the same order)."""
    return hashlib.sha256(np.ascontiguousarray(positions, dtype=np.int64).tobytes()).hexdigest()[:16]


def train_on(model: nn.Module, parameters: list[nn.Parameter], order: np.ndarray, data: PreparedDataset,
             context: int | None, lr: float, training_mode: bool) -> np.ndarray:
    """AdamW (constant lr, no decay) on `parameters` only, one step per row of `order`; returns the positions fed."""
    trained = {id(parameter) for parameter in parameters}
    for parameter in model.parameters():
        parameter.requires_grad_(id(parameter) in trained)
    optimizer = torch.optim.AdamW(parameters, lr=lr, weight_decay=0.0)
    device = next(model.parameters()).device
    model.train(training_mode)
    fed = []
    for positions in order:
        batch = examples_at(data, "train", positions, context)
        loss = model.per_example_loss(model(to_device(batch.inputs, device)), to_device(batch.targets, device)).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        fed.append(positions)
    model.eval()
    return np.stack(fed) if fed else np.zeros((0, order.shape[1]), np.int64)


@torch.no_grad()
def per_example_losses(model: nn.Module, examples: Examples, batch_size: int = 256) -> np.ndarray:
    """Each example's held-out loss (float64), the model in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    return np.concatenate([model.per_example_loss(model(to_device(inputs, device)), to_device(targets, device))
                           .double().cpu().numpy() for inputs, targets in examples.batches(batch_size)])


def grow_every_point(base: nn.Module, points: list[str], data: PreparedDataset, context: int | None,
                     outcome: Examples, settings: dict[str, Any], block: dict[str, Any], variants: list[str],
                     progress=lambda done, total: None) -> pd.DataFrame:
    """One row per point × variant: the grown model's and its control's held-out loss, the paired outcome and its
    SE, and the digests of the batches the arm and its control were fed. `block`: insert_block's hidden and seed."""
    order = batch_order(data, settings, context)
    total, done = 1 + len(points) * len(variants), 0
    control = copy.deepcopy(base)
    fed = {FROZEN: "", CONTROL: digest(train_on(control, list(control.parameters()), order, data, context,
                                                settings["lr"], True))}
    progress(done := done + 1, total)
    losses = {FROZEN: per_example_losses(base, outcome), CONTROL: per_example_losses(control, outcome)}
    del control
    rows = []
    for point in points:
        for variant in variants:
            trains, training_mode, counterpart = VARIANTS[variant]
            grown = copy.deepcopy(base)
            new_block = insert_block(grown, point, hidden=block["hidden"], seed=block["seed"], trainable=True)
            seen = train_on(grown, trains(grown, new_block), order, data, context, settings["lr"], training_mode)
            grown_losses = per_example_losses(grown, outcome)
            mean, se = paired_outcome(grown_losses, losses[counterpart])
            rows.append({"point": point, "variant": variant, "control": counterpart, "outcome": mean,
                         "outcome_se": se, "n_outcome": len(outcome), "grown_loss": float(grown_losses.mean()),
                         "control_loss": float(losses[counterpart].mean()), "batches": digest(seen),
                         "control_batches": fed[counterpart]})
            progress(done := done + 1, total)
    return pd.DataFrame(rows)


def advise_check(model: str | Path, data: str | Path, settings: dict[str, Any], out: str | Path, *,
                 examples: int | None = None, threads: int = 1, device: str,
                 progress=lambda done, total: None, grow_progress=lambda done, total: None) -> str:
    """advise on `model`, then every point grown for real (see the module docstring); returns the terminal summary."""
    settings = stage_settings("advise_check", settings)
    if Path(model).is_dir():
        raise CheckpointError(f"--model {model}: a folder (a Hugging Face model?); advise-check grows growcert "
                              "checkpoints (step*.pt) only (`growcert advise` reads both)")
    # advise predicts its options over the very steps, lr and batch size the arms train with (matched compute)
    budget = {"budget_steps": settings["steps"], "budget_lr": settings["lr"],
              "budget_batch_size": settings["batch_size"]}
    inputs = advice_inputs(model, data, {**settings["advise"], **budget}, examples)
    out = Path(out)
    with work_folder(out) as work:
        prepared = prepared_data(inputs, work)
        outcome = outcome_examples(prepared, inputs, settings)
        table, store = decide(inputs, prepared, work, threads=threads, device=device, progress=progress)
        points = advice.first_order_rows(table)
        about = describe(inputs, store)
        base, metadata = load_checkpoint(inputs.model)
        with torch_runtime(threads, flush_denormal=True, device=device) as runtime:
            grown = grow_every_point(base.to(runtime.device), list(points["point"]), prepared, inputs.context, outcome,
                                     settings, {"hidden": inputs.depth["block_hidden"], "seed": inputs.depth["seed"]},
                                     settings["variants"], grow_progress)
    about = {**about, "train_seed": metadata["provenance"]["seed"], "step": metadata["step"],
             "width": metadata["width"], "depth": metadata["depth"]}
    checked = checked_table(points, grown, about, settings)
    line = advice.recommendation(table)
    advice.write_advice(out / "advice", table, line, about, provenance(inputs.advise, inputs.dump["seed"]))
    write_text(PROVENANCE.path(out), json.dumps({**provenance(settings, settings["seed"]), "advise_check": about},
                                                   indent=1, default=str))
    paths = scores.write_scores(out, checked, settings)  # advise_check.csv last: the file a rule waits for
    return f"{scores.terminal_summary(checked, settings)}\n\nadvise: {line}\n-> {paths['table']}"


def checked_table(table: pd.DataFrame, grown: pd.DataFrame, about: dict[str, Any],
                  settings: dict[str, Any]) -> pd.DataFrame:
    """advise's first-order reading per point (`table`: `advice.first_order_rows`) beside each variant's outcome,
    with the checkpoint's identity on every row."""
    merged = grown.merge(table[ADVICE_COLUMNS], on="point", how="left", validate="many_to_one")
    identity = {"model": about["model"], "family": about["family"], "width": about["width"], "depth": about["depth"],
                "train_seed": about["train_seed"], "step": about["step"], "steps": settings["steps"],
                "lr": settings["lr"]}
    return merged.assign(**identity)[scores.COLUMNS]
