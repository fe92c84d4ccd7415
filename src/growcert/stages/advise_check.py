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
       frozen       the checkpoint as it is: new_block's no-growth counterpart (nothing of the base trains there);
       control      the ungrown model, every parameter trained: "train on", the counterpart of whole and whole_gated;
   and at each point the zero-output block advise scored (`models.blocks.insert_block`, the depth settings'
   block_hidden and seed, W_in trainable) inserted and trained by one of the growth procedures (PROCEDURES):
       new_block    only the block trains (AdamW), the base in eval mode;
       whole        the whole grown model trains (AdamW);
       whole_gated  the whole grown model trains, the base by AdamW and the new block's parameters by P2's gated
                    Adam (`optim.PopulationRiskAdam`, gate "update", streaming variance): a new-block coordinate steps
                    only where its batch signal exceeds its noise (docs/science.md, "advise-check: growth procedures");
5. per point and procedure, the outcome: held-out loss of the grown model minus its counterpart, paired per example,
   with its standard error over the outcome examples (`stats.growth_outcomes.paired_outcome`); beside it the
   grown model against training on (`vs_train_on`: grown minus control, whatever the counterpart), every arm's
   observed gain over the checkpoint (frozen minus arm), advise's prediction of that gain (`decide`'s options
   table, at these steps, lr and batch size), advise's decision between the options, and the FLOPs of one
   training step of the grown model beyond the ungrown one's (`step_flops`: matched steps are not matched FLOPs).
Every arm trains at the constant `lr`, no weight decay, no clipping: what is compared is growing, not a
schedule. The scores over checkpoints are `growcert.report.advice_check`'s and, between the options at matched
compute, `growcert.report.advice_matched`'s.

Writes into `out`: advise_check.csv (one row per point × variant), the scores of this checkpoint
(report.advice_check.write_scores), advise's own advice.* in `out`/advice, and its provenance record
(artifacts.PROVENANCE).
A Hugging Face folder is refused (one line naming --model): growing one is not implemented here.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from growcert.config import stage_settings
from growcert.data import PreparedDataset
from growcert.data.batches import Examples, examples_at, fixed_examples, split_size
from growcert.errors import CheckpointError, DatasetError
from growcert.files import write_text
from growcert.models import family_of
from growcert.models.blocks import insert_block
from growcert.models.checkpoint import load_checkpoint
from growcert.optim import PopulationRiskAdam
from growcert.pipeline.artifacts import PROVENANCE
from growcert.provenance import provenance
from growcert.report import advice, advice_matched
from growcert.report import advice_check as scores
from growcert.runtime import torch_runtime
from growcert.stages.advise import AdviceInputs, advice_inputs, decide, describe, prepared_data, work_folder
from growcert.stats.growth_outcomes import paired_outcome
from growcert.training import to_device

OUTCOME_SEED_OFFSET = 30_011  # the outcome rows and the batch order: seed streams of their own
BATCH_SEED_OFFSET = 40_009
FROZEN, CONTROL = "frozen", "control"


@dataclass(frozen=True)
class Procedure:
    """A growth procedure: whether the checkpoint's own parameters train (and the base runs in training mode),
    whether the new block's parameters step through P2's gate, the no-growth counterpart its outcome is read
    against, and whether the new block trains at all (a test's arm leaves it out)."""

    base: bool
    gate: bool
    counterpart: str
    block: bool = True


# The growth procedures (advise_check.variants; advise.growth_procedure names the one advise's grow options mean)
PROCEDURES: dict[str, Procedure] = {
    "new_block": Procedure(base=False, gate=False, counterpart=FROZEN),
    "whole": Procedure(base=True, gate=False, counterpart=CONTROL),
    "whole_gated": Procedure(base=True, gate=True, counterpart=CONTROL),
}
ADVICE_COLUMNS = [
    "point",
    "point_index",
    "decision",
    "value",
    "value_se",
    "value_lo",
    "scaled_value",
    "detectability",
    "b_exact",
]


def outcome_examples(data: PreparedDataset, inputs: AdviceInputs, settings: dict[str, Any]) -> Examples:
    """Held-out examples advise's sample left out: a seeded draw of `outcome_examples` of them (all when fewer)."""
    context = inputs.context
    seen = fixed_examples(data, "test", inputs.dump["test_examples"], inputs.dump["seed"], context).index
    seen = seen // context if context else seen
    free = np.setdiff1d(np.arange(split_size(data, "test", context)), seen)
    if len(free) < 4:  # a standard error needs pairs; 4 is the fewest the estimators take anywhere
        raise DatasetError(
            f"--data {inputs.data_path}: {len(free)} held-out examples remain beside advise's "
            f"{len(seen)}, fewer than 4 to measure the outcome on; lower advise.test_examples"
        )
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


def optimizers(
    model: nn.Module, block: nn.Module | None, procedure: Procedure, lr: float
) -> list[torch.optim.Optimizer]:
    """The optimizers of one arm, constant lr, no decay: AdamW on what trains, but the new block's parameters through
    PopulationRiskAdam (gate "update", streaming variance: the package's defaults) when the procedure gates them.
    `block` None: the ungrown control (every parameter, AdamW)."""
    if block is None:
        return [torch.optim.AdamW(list(model.parameters()), lr=lr, weight_decay=0.0)]
    new = {id(parameter) for parameter in block.parameters()}
    base = [parameter for parameter in model.parameters() if id(parameter) not in new] if procedure.base else []
    chosen = [torch.optim.AdamW(base, lr=lr, weight_decay=0.0)] if base else []
    if procedure.block:
        chosen.append(
            PopulationRiskAdam(list(block.parameters()), lr=lr, weight_decay=0.0)
            if procedure.gate
            else torch.optim.AdamW(list(block.parameters()), lr=lr, weight_decay=0.0)
        )
    return chosen


def train_on(
    model: nn.Module,
    optimizers: list[torch.optim.Optimizer],
    order: np.ndarray,
    data: PreparedDataset,
    context: int | None,
    training_mode: bool,
) -> np.ndarray:
    """One step of every optimizer per row of `order` (only their parameters train); returns the positions fed."""
    trained = {
        id(parameter) for optimizer in optimizers for group in optimizer.param_groups for parameter in group["params"]
    }
    for parameter in model.parameters():
        parameter.requires_grad_(id(parameter) in trained)
    device = next(model.parameters()).device
    model.train(training_mode)
    fed = []
    for positions in order:
        batch = examples_at(data, "train", positions, context)
        loss = model.per_example_loss(model(to_device(batch.inputs, device)), to_device(batch.targets, device)).mean()
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        for optimizer in optimizers:
            optimizer.step()
        fed.append(positions)
    model.eval()
    return np.stack(fed) if fed else np.zeros((0, order.shape[1]), np.int64)


@torch.no_grad()
def per_example_losses(model: nn.Module, examples: Examples, batch_size: int = 256) -> np.ndarray:
    """Each example's held-out loss (float64), the model in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    return np.concatenate(
        [
            model.per_example_loss(model(to_device(inputs, device)), to_device(targets, device)).double().cpu().numpy()
            for inputs, targets in examples.batches(batch_size)
        ]
    )


def step_flops(model: nn.Module, data: PreparedDataset, positions: np.ndarray, context: int | None) -> int:
    """FLOPs of one training step's forward and backward on the batch at `positions` (torch's FlopCounterMode:
    matrix products and convolutions; the optimizer's element-wise work is not counted)."""
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    device = next(model.parameters()).device
    batch = examples_at(data, "train", positions, context)
    with FlopCounterMode(display=False) as counter:
        model.per_example_loss(
            model(to_device(batch.inputs, device)), to_device(batch.targets, device)
        ).mean().backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def grow_every_point(
    base: nn.Module,
    points: list[str],
    data: PreparedDataset,
    context: int | None,
    outcome: Examples,
    settings: dict[str, Any],
    block: dict[str, Any],
    variants: list[str],
    progress=lambda done, total: None,
) -> pd.DataFrame:
    """One row per point × procedure (`variants`): the grown model's and its control's held-out loss, the paired
    outcome and its SE, the grown model against training on (vs_train_on), the observed gains over the checkpoint
    of the arm and of training on (frozen minus arm, paired), the FLOPs per step beyond the ungrown model's, and
    the digests of the batches the arm and its control were fed. `block`: insert_block's hidden and seed."""
    order = batch_order(data, settings, context)
    total, done = 1 + len(points) * len(variants), 0
    base_flops = step_flops(copy.deepcopy(base), data, order[0], context)
    control = copy.deepcopy(base)
    fed = {
        FROZEN: "",
        CONTROL: digest(
            train_on(
                control, optimizers(control, None, PROCEDURES["whole"], settings["lr"]), order, data, context, True
            )
        ),
    }
    progress(done := done + 1, total)
    losses = {FROZEN: per_example_losses(base, outcome), CONTROL: per_example_losses(control, outcome)}
    del control
    trained_on, trained_on_se = paired_outcome(losses[FROZEN], losses[CONTROL])  # frozen minus control: its gain
    rows = []
    for point in points:
        for variant in variants:
            procedure = PROCEDURES[variant]
            grown = copy.deepcopy(base)
            new_block = insert_block(grown, point, hidden=block["hidden"], seed=block["seed"], trainable=True)
            flops = step_flops(copy.deepcopy(grown), data, order[0], context)
            seen = train_on(
                grown, optimizers(grown, new_block, procedure, settings["lr"]), order, data, context, procedure.base
            )
            grown_losses = per_example_losses(grown, outcome)
            counterpart = procedure.counterpart
            mean, se = paired_outcome(grown_losses, losses[counterpart])
            against, against_se = paired_outcome(grown_losses, losses[CONTROL])
            gained, gained_se = paired_outcome(losses[FROZEN], grown_losses)
            rows.append(
                {
                    "point": point,
                    "variant": variant,
                    "control": counterpart,
                    "outcome": mean,
                    "outcome_se": se,
                    "n_outcome": len(outcome),
                    "grown_loss": float(grown_losses.mean()),
                    "control_loss": float(losses[counterpart].mean()),
                    "batches": digest(seen),
                    "control_batches": fed[counterpart],
                    "vs_train_on": against,
                    "vs_train_on_se": against_se,
                    "observed_gain": gained,
                    "observed_gain_se": gained_se,
                    "train_on_observed": trained_on,
                    "train_on_observed_se": trained_on_se,
                    "flops_per_step": base_flops,
                    "extra_flops_per_step": flops - base_flops,
                }
            )
            progress(done := done + 1, total)
    return pd.DataFrame(rows)


def advise_check(
    model: str | Path,
    data: str | Path,
    settings: dict[str, Any],
    out: str | Path,
    *,
    examples: int | None = None,
    threads: int = 1,
    device: str,
    progress=lambda done, total: None,
    grow_progress=lambda done, total: None,
) -> str:
    """advise on `model`, then every point grown for real (see the module docstring); returns the terminal summary."""
    settings = stage_settings("advise_check", settings)
    if Path(model).is_dir():
        raise CheckpointError(
            f"--model {model}: a folder (a Hugging Face model?); advise-check grows growcert "
            "checkpoints (step*.pt) only (`growcert advise` reads both)"
        )
    # advise predicts its options over the very steps, lr and batch size the arms train with (matched compute)
    budget = {
        "budget_steps": settings["steps"],
        "budget_lr": settings["lr"],
        "budget_batch_size": settings["batch_size"],
    }
    inputs = advice_inputs(model, data, {**settings["advise"], **budget}, examples)
    out = Path(out)
    with work_folder(out) as work:
        prepared = prepared_data(inputs, work)
        outcome = outcome_examples(prepared, inputs, settings)
        table, store = decide(inputs, prepared, work, threads=threads, device=device, progress=progress)
        points = advice_matched.option_columns(table)
        about = describe(inputs, store)
        base, metadata = load_checkpoint(inputs.model)
        with torch_runtime(threads, flush_denormal=True, device=device) as runtime:
            grown = grow_every_point(
                base.to(runtime.device),
                list(points["point"]),
                prepared,
                inputs.context,
                outcome,
                settings,
                {"hidden": inputs.depth["block_hidden"], "seed": inputs.depth["seed"]},
                settings["variants"],
                grow_progress,
            )
    about = {
        **about,
        "train_seed": metadata["provenance"]["seed"],
        "step": metadata["step"],
        "width": metadata["width"],
        "depth": metadata["depth"],
    }
    checked = checked_table(points, grown, about, settings)
    line = advice.recommendation(table)
    advice.write_advice(out / "advice", table, line, about, provenance(inputs.advise, inputs.dump["seed"]))
    write_text(
        PROVENANCE.path(out),
        json.dumps({**provenance(settings, settings["seed"]), "advise_check": about}, indent=1, default=str),
    )
    paths = scores.write_scores(out, checked, settings)  # advise_check.csv last: the file a rule waits for
    return f"{scores.terminal_summary(checked, settings)}\n\nadvise: {line}\n-> {paths['table']}"


def checked_table(
    table: pd.DataFrame, grown: pd.DataFrame, about: dict[str, Any], settings: dict[str, Any]
) -> pd.DataFrame:
    """advise's first-order reading and its options' predictions per point (`table`:
    `advice_matched.option_columns`) beside each procedure's outcome, with the checkpoint's identity on every row."""
    merged = grown.merge(
        table[ADVICE_COLUMNS + advice_matched.OPTION_COLUMNS], on="point", how="left", validate="many_to_one"
    )
    identity = {
        "model": about["model"],
        "family": about["family"],
        "width": about["width"],
        "depth": about["depth"],
        "train_seed": about["train_seed"],
        "step": about["step"],
        "steps": settings["steps"],
        "lr": settings["lr"],
        "loss_unit": family_of(about["family"]).loss_unit,
    }
    return merged.assign(**identity)[scores.COLUMNS + advice_matched.MATCHED_COLUMNS]
