"""The one training loop, step and evaluation that `growcert train` and `growcert grow` share.

AdamW with matrices decayed and gains not, linear warm-up then a constant learning rate (so checkpoints
taken along training at fixed budgets stay comparable across widths), a finite-loss check, global-norm
clipping. The evaluation sets are seeded draws offset from the run's seed, so they do not depend on the
training order; every arm of a growth comparison and every run of a grid is scored the same way.

`Trainer.fit` is the loop: the steps in order, each followed by the evaluation due at it and by what the caller
does after a step (train: progress lines, checkpoints, resume snapshots; grow: its unit's resume ticks), so
a grown network and a trained one take their steps the same way.

On a GPU: batches are pinned and copied without blocking, and the finite-loss check reads the device only
every `SYNC_EVERY` steps (the first bad step is kept on the device, so the error still names it); on the
CPU it reads every step, where a read costs nothing. `train.precision: bf16` autocasts the forward and
backward passes to bfloat16; weights, gradients and optimizer state stay fp32.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Container
from typing import Any

import torch
from torch import nn

from growcert.data import PreparedDataset
from growcert.data.batches import Examples, TrainingBatches, fixed_examples
from growcert.errors import NumericalError

# Evaluation sets are drawn with seeds offset from the run's seed so that they do not depend on the
# training order.
EVAL_SEED_OFFSET = 10_007
# Steps between reads of the loss check on an accelerator: each read waits for the queued work to finish.
SYNC_EVERY = 50


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A batch on `device`: pinned and copied without blocking on CUDA, untouched on the CPU."""
    if device.type == "cpu":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)


def autocast(device: torch.device, precision: str):
    """The autocast context of a training precision (disabled for fp32)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


@torch.no_grad()
def evaluate(model: nn.Module, examples: Examples, batch_size: int = 256) -> tuple[float, float]:
    """Mean per-example loss and accuracy of `model` (eval mode) on `examples`."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct_sum = torch.zeros((), dtype=torch.float64, device=device)
    for inputs, targets in examples.batches(batch_size):
        inputs, targets = to_device(inputs, device), to_device(targets, device)
        outputs = model(inputs)
        loss_sum += model.per_example_loss(outputs, targets).double().sum()
        correct_sum += model.per_example_correct(outputs, targets).double().sum()
    model.train(was_training)
    return loss_sum.item() / len(examples), correct_sum.item() / len(examples)


def evaluation_sets(
    data: PreparedDataset, train: dict[str, Any], seed: int, context: int | None
) -> dict[str, Examples]:
    """The fixed train and held-out evaluation examples of a run with this seed."""
    return {
        split: fixed_examples(data, split, train["eval_examples"], seed + EVAL_SEED_OFFSET, context)
        for split in ("train", "test")
    }


def make_optimizer(model: nn.Module, train: dict[str, Any]) -> torch.optim.AdamW:
    # Decay matrices and convolution kernels only; norms' gains stay undecayed (standard practice).
    decayed = [p for p in model.parameters() if p.ndim >= 2]
    undecayed = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decayed, "weight_decay": train["weight_decay"]}, {"params": undecayed, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=train["lr"], betas=tuple(train["betas"]))


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Learning-rate multiplier at optimiser step `step` (1-based): linear warm-up, then 1."""
    return min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0


def text_context(data: PreparedDataset, model_options: dict[str, Any]) -> int | None:
    """Tokens per example for a text dataset (the family's `context` option); None for images."""
    return model_options.get("context") if data.info["kind"] == "text" else None


class Trainer:
    """A model, its optimiser and its own seeded batch stream, advanced one step at a time."""

    def __init__(
        self,
        model: nn.Module,
        train: dict[str, Any],
        data: PreparedDataset,
        seed: int,
        context: int | None,
        label: str,
        optimizer: torch.optim.Optimizer | None = None,
    ):
        self.model, self.train, self.label = model, train, label
        self.device = next(model.parameters()).device
        self.sync_every = 1 if self.device.type == "cpu" else SYNC_EVERY
        self.first_bad_step = torch.zeros((), dtype=torch.long, device=self.device)  # 0: every loss finite
        self.optimizer = optimizer or make_optimizer(model, train)
        self.batches = TrainingBatches(data, train["batch_size"], train["steps"], seed, context, train["single_pass"])

    def state_dict(self) -> dict[str, Any]:
        """Everything the next steps depend on: weights, optimiser state, batch stream, torch's generator."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "batches": self.batches.state_dict(),
            "torch_rng": torch.random.get_rng_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        # a copy: Optimizer.load_state_dict keeps the given state tensors, which their owner may go on updating
        self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
        self.batches.load_state_dict(state["batches"])
        torch.random.set_rng_state(state["torch_rng"])

    def step(self, step: int) -> torch.Tensor:
        """Optimiser step number `step` (1-based) on the next batch; returns the batch loss (detached)."""
        for group in self.optimizer.param_groups:
            group["lr"] = self.train["lr"] * warmup_factor(step, self.train["warmup_steps"])
        inputs, targets = (to_device(tensor, self.device) for tensor in self.batches.next())
        with autocast(self.device, self.train["precision"]):
            loss = self.model.per_example_loss(self.model(inputs), targets).float().mean()
        bad = ~torch.isfinite(loss.detach())
        self.first_bad_step = torch.where(bad & (self.first_bad_step == 0), step, self.first_bad_step)
        if step % self.sync_every == 0 or step == self.train["steps"]:
            self.check_finite()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.train["grad_clip"] is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.train["grad_clip"])
        self.optimizer.step()
        return loss.detach()

    def fit(
        self,
        first: int,
        last: int,
        evaluate_at: Container[int],
        evaluate: Callable[[int], Any],
        after_step: Callable[[int, torch.Tensor], None] = lambda step, loss: None,
    ) -> None:
        """Optimiser steps `first`..`last` (1-based), the model in training mode: each step, then `evaluate(step)`
        when the step is in `evaluate_at`, then `after_step(step, batch loss)`."""
        self.model.train()
        for step in range(first, last + 1):
            loss = self.step(step)
            if step in evaluate_at:
                evaluate(step)
            after_step(step, loss)

    def check_finite(self) -> None:
        """NumericalError naming the first step whose training loss was not finite, if any (reads the device)."""
        bad_step = int(self.first_bad_step.item())
        if bad_step:
            raise NumericalError(f"{self.label}: training loss became non-finite at step {bad_step}; lower train.lr")
