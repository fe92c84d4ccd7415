"""Grokking on modular division, optimizers side by side (P2; docs/science.md, "grokking (P2)").

Task of Power et al. 2022, "Grokking: Generalization Beyond Overfitting on Small Algorithmic
Datasets": equations "a ∘ b =" → c with c = a·b⁻¹ mod p, b ≠ 0, a seeded fraction of the p(p−1)
equations for training. Model: the package's LLaMA-style decoder (2 layers, width 128, 4 heads by
default) over p + 2 tokens (numbers, ∘, =), context 4, trained on the answer position only.

Every optimizer starts from the same initial weights and sees the same split and the same batches
(per seed), so differences are the optimizer's alone:
- AdamW over a list of decoupled weight decays (the paper's baseline is the small-decay regime,
  ≈ 0.01 here; with decay 1.0 AdamW alone groks fast, so the sweep is reported whole);
- Grokfast-EMA (Lee et al. 2024, "Grokfast: Accelerated Grokking by Amplifying Slow Gradients")
  as published: after backward, ema ← α·ema + (1−α)·grad, grad ← grad + λ·ema, on Adam with
  L2-*coupled* weight decay (decoupling it breaks it: the grokking calibration);
- PopulationRiskAdam in every configured gate reading × variance source × decoupled weight decay
  (`experiments.arms`: `poprisk-<gate>-<variance>-wd<decay>`); exact s²/b from the layer hooks
  (`per_example_square_sums`), microbatch from K micro-batches of the same batch.
Model: `model.architecture` llama (above) or classic (LayerNorm, learned positions, GELU MLP, as in
Power et al.; `models.classic`).
Each (optimizer, seed) is a unit of its own (`experiments.units`: `run_grokking_unit`), which rebuilds the
seed's initial weights (`prepare_seed`) and batch order from the seed. Outputs, per unit and for the task
(its units' rows): the curves, artifacts.CURVES (with the gate diagnostics open_fraction and variance_ratio), the
summary (SUMMARY) and the provenance record (PROVENANCE); `grokking_report` (figures, claim rows) reads them.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.experiments import task
from growcert.experiments.arms import (
    DIAGNOSTIC_COLUMNS,
    ArmLoop,
    hook_square_sums,
    make_poprisk,
    poprisk_arms,
    run_arm,
    run_arms,
    variance_step,
)
from growcert.experiments.common import Arm, select_arms, step_columns, steps_to_target, write_tables
from growcert.experiments.units import run_all_units, unit_name, unit_resume_folder
from growcert.models.classic import ClassicConfig, ClassicTransformer
from growcert.models.llama import Llama, LlamaConfig
from growcert.pipeline.artifacts import SUMMARY
from growcert.resume import UnitResume
from growcert.runtime import device_record, torch_runtime
from growcert.training import to_device

CURVE_COLUMNS = [
    "optimizer",
    "seed",
    "step",
    "train_acc",
    "test_acc",
    "train_loss",
    "test_loss",
    "gated_fraction",
    *DIAGNOSTIC_COLUMNS,
]
SUMMARY_COLUMNS = [
    "optimizer",
    "weight_decay",
    "seed",
    "memorised_step",
    "step_95",
    "step_99",
    "final_test_acc",
    "seconds",
    "cpu_seconds",
    "numerics",
    "numerics_changed",
]
EVAL_CHUNK = 4096


def division_equations(p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every equation "a ∘ b =" (b ≠ 0) as tokens (p(p−1), 4) and its answer c = a·b⁻¹ mod p."""
    if p < 3 or any(p % d == 0 for d in range(2, math.isqrt(p) + 1)):
        raise ValueError(f"grokking p must be a prime >= 3 (division needs every b != 0 invertible), got p={p}")
    a, b = torch.meshgrid(torch.arange(p), torch.arange(1, p), indexing="ij")
    a, b = a.reshape(-1), b.reshape(-1)
    inverse = torch.tensor([pow(int(value), -1, p) for value in range(1, p)])
    answers = (a * inverse[b - 1]) % p
    operator, equals = torch.full_like(a, p), torch.full_like(a, p + 1)
    return torch.stack((a, operator, b, equals), dim=1), answers


def split_indices(count: int, train_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Disjoint seeded train/held-out index sets covering range(count)."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"grokking train_fraction must lie in (0, 1), got {train_fraction}")
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed))
    cut = round(train_fraction * count)
    return order[:cut].sort().values, order[cut:].sort().values


def build_model(settings: dict[str, Any]) -> nn.Module:
    """The decoder of `model.architecture`: llama (RMSNorm, RoPE, SwiGLU) or classic (Power et al.)."""
    model = settings["model"]
    if model["width"] % model["heads"]:
        raise ValueError(f"grokking model width {model['width']} is not divisible by heads {model['heads']}")
    if model["architecture"] == "classic":
        return ClassicTransformer(
            ClassicConfig(
                width=model["width"],
                depth=model["depth"],
                vocab_size=settings["p"] + 2,
                heads=model["heads"],
                mlp_hidden=model["mlp_hidden"],
                context=4,
                init=model["init"],
            )
        )
    return Llama(
        LlamaConfig(
            width=model["width"],
            depth=model["depth"],
            vocab_size=settings["p"] + 2,
            head_dim=model["width"] // model["heads"],
            mlp_hidden=model["mlp_hidden"],
            context=4,
            init=model["init"],
        )
    )


def answer_loss(model: nn.Module, tokens: torch.Tensor, answers: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy of the answer, predicted at the "=" position (the last of the four)."""
    return F.cross_entropy(model(tokens)[:, -1, :], answers, reduction=reduction)


def answer_losses(logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """Per-example answer cross-entropy from the model's outputs (the form the hooks need)."""
    return F.cross_entropy(logits[:, -1, :], answers, reduction="none")


@torch.no_grad()
def evaluate(model: nn.Module, tokens: torch.Tensor, answers: torch.Tensor) -> tuple[float, float]:
    """Mean loss and accuracy over all of `tokens`, in chunks."""
    loss_sum, correct = 0.0, 0
    for start in range(0, len(tokens), EVAL_CHUNK):
        logits = model(tokens[start : start + EVAL_CHUNK])[:, -1, :]
        target = answers[start : start + EVAL_CHUNK]
        loss_sum += F.cross_entropy(logits, target, reduction="sum").item()
        correct += (logits.argmax(dim=-1) == target).sum().item()
    return loss_sum / len(tokens), correct / len(tokens)


class GrokfastEMA:
    """The published Grokfast-EMA gradient filter: amplify the slow (EMA) component of the gradient."""

    def __init__(self, alpha: float, lamb: float):
        self.alpha, self.lamb, self.ema = alpha, lamb, None

    @torch.no_grad()
    def __call__(self, model: nn.Module) -> None:
        params = [p for p in model.parameters() if p.grad is not None]
        if self.ema is None:  # the reference code starts the average at the first gradient
            self.ema = [p.grad.detach().clone() for p in params]
        for ema, p in zip(self.ema, params):
            ema.mul_(self.alpha).add_(p.grad, alpha=1 - self.alpha)
            p.grad.add_(ema, alpha=self.lamb)


def optimizer_arms(settings: dict[str, Any]) -> list[Arm]:
    """The optimizers compared, each an `Arm` with its weight decay, in a fixed order."""
    arms = [Arm(f"AdamW wd={wd:g}", "adamw", weight_decay=wd) for wd in settings["adamw"]["weight_decays"]]
    if settings["grokfast"]["enabled"]:
        wd = settings["grokfast"]["weight_decay"]
        arms.append(Arm(f"Grokfast-EMA wd={wd:g} (L2)", "grokfast", weight_decay=wd))
    return arms + poprisk_arms(settings["poprisk"], settings["poprisk"]["weight_decays"])


def make_optimizer(arm: Arm, model: nn.Module, settings: dict[str, Any], batch: int, train_size: int):
    lr, betas, wd = settings["lr"], tuple(settings["betas"]), arm.weight_decay
    # Every parameter is decayed, norms' gains included, as in Power et al. and the Grokfast code.
    if arm.kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=wd), None
    if arm.kind == "grokfast":
        grokfast = settings["grokfast"]
        return (
            torch.optim.Adam(model.parameters(), lr=lr, betas=betas, weight_decay=wd),
            GrokfastEMA(grokfast["alpha"], grokfast["lamb"]),
        )
    check_arm_batch(arm, settings, batch, train_size)
    return make_poprisk(arm, model.parameters(), lr, betas, batch, train_size), None


def check_arm_batch(arm: Arm, settings: dict[str, Any], batch: int, train_size: int) -> None:
    """A PopulationRiskAdam arm's demands on the batch, as a ConfigError naming the config key (one line,
    exit status 2 in the CLI): the streaming variance needs sampled minibatches, the microbatch variance
    K equal micro-batches."""
    if arm.kind != "poprisk":
        return
    if arm.variance == "streaming" and batch >= train_size:
        given = "null (full batch)" if settings.get("batch_size") is None else settings["batch_size"]
        raise ConfigError(
            f"config key 'grokking.batch_size': {given} covers all {train_size} training equations, "
            "but PopulationRiskAdam's streaming variance (config key 'grokking.poprisk.variances') "
            f"needs sampled minibatches; set grokking.batch_size below {train_size} or drop "
            "streaming from grokking.poprisk.variances"
        )
    if arm.variance == "microbatch" and batch % arm.microbatches:
        raise ConfigError(
            f"config key 'grokking.poprisk.microbatches': {arm.microbatches} does not divide the "
            f"batch of {batch} (config key 'grokking.batch_size'; the microbatch variance splits each "
            "batch into equal parts)"
        )


def train_arm(
    arm: Arm, settings, seed, initial_state, model, data, log, resume=None, snapshot=None
) -> tuple[list[dict], dict]:
    """Train one optimizer from `initial_state` (`arms.run_arm`); returns its curve rows and its summary row.
    With `resume` (resume.UnitResume) and the `snapshot` a killed run left it continues that run and
    snapshots itself (Grokfast's average included)."""
    train_tokens, train_answers, test_tokens, test_answers = data
    model.load_state_dict(initial_state)
    model.train()
    train_size = len(train_tokens)
    batch = min(settings["batch_size"] or train_size, train_size)
    optimizer, grad_filter = make_optimizer(arm, model, settings, batch, train_size)
    # The batch order depends on the seed only, so every optimizer sees the same batches.
    batches = torch.Generator().manual_seed(seed + 1)

    def evaluate_step(step: int) -> dict[str, float]:
        model.eval()
        train_loss, train_acc = evaluate(model, train_tokens, train_answers)
        test_loss, test_acc = evaluate(model, test_tokens, test_answers)
        model.train()
        return {"train_acc": train_acc, "test_acc": test_acc, "train_loss": train_loss, "test_loss": test_loss}

    def step(step: int):
        if batch < train_size:
            chosen = torch.randperm(train_size, generator=batches)[:batch].to(train_tokens.device)  # fresh, per step
            tokens, answers = train_tokens[chosen], train_answers[chosen]
        else:
            tokens, answers = train_tokens, train_answers
        _, square_sums = variance_step(optimizer, model, answer_losses, tokens, answers)
        if grad_filter is not None:
            grad_filter(model)
        return (
            {} if square_sums is None else {"square_sums": square_sums},
            hook_square_sums(model, answer_losses, tokens, answers),
        )

    def after_record(row: dict[str, Any], seconds: float) -> bool:
        if row["step"] % (settings["eval_every"] * 20) == 0:
            log(
                f"  {arm.name} seed {seed} step {row['step']}: train acc {row['train_acc']:.3f}  "
                f"held-out acc {row['test_acc']:.3f}  ({seconds:.0f}s)"
            )
        return settings["stop_at_test_acc"] is not None and row["test_acc"] >= settings["stop_at_test_acc"]

    def restore(snapshot: dict[str, Any]) -> None:
        if grad_filter is not None:
            grad_filter.ema = snapshot["ema"]

    loop = ArmLoop(
        arm,
        seed,
        model,
        optimizer,
        batches,
        settings["steps"],
        settings["eval_every"],
        settings["diagnostics_every"],
        after_record=after_record,
        restore=restore,
        state=lambda: {"ema": grad_filter.ema if grad_filter is not None else None},
    )
    run = run_arm(loop, step, evaluate_step, resume=resume, snapshot=snapshot)
    history, seconds = run.history, run.seconds
    summary = _summary_row(arm, seed, run)
    log(
        f"{arm.name} seed {seed}: memorised {summary['memorised_step']}, 95 % held-out at {summary['step_95']}, "
        f"99 % at {summary['step_99']}, final {summary['final_test_acc']:.3f} after {run.last_step} steps "
        f"({seconds:.0f}s)"
    )
    return history, summary


def _summary_row(arm: Arm, seed: int, run) -> dict[str, Any]:
    """An arm's summary row from its finished run (`arms.run_arm`'s): the steps at which it memorised and
    generalised, its final held-out accuracy, its time and numerics."""
    history = run.history
    steps = [row["step"] for row in history]

    def reached(key: str, level: float) -> int | None:
        return steps_to_target(steps, [row[key] for row in history], level, above=True)

    return {
        "optimizer": arm.name,
        "weight_decay": arm.weight_decay,
        "seed": seed,
        "memorised_step": reached("train_acc", 0.99),
        "step_95": reached("test_acc", 0.95),
        "step_99": reached("test_acc", 0.99),
        "final_test_acc": history[-1]["test_acc"],
        "seconds": round(run.seconds, 2),
        "cpu_seconds": round(run.cpu_seconds, 2),
        **run.numerics,
    }


def grokking_units(settings: dict[str, Any]) -> list[tuple[str, int]]:
    """Every unit (arm's unit name, seed) of these settings, seeds outer and arms inner; an arm the batch does
    not suit is refused here, before any arm trains or anything is written."""
    settings = stage_settings("grokking", settings)
    arms = select_arms(optimizer_arms(settings), settings["only_arms"], "grokking.only_arms")
    train_size = len(
        split_indices(settings["p"] * (settings["p"] - 1), settings["train_fraction"], settings["split_seed"])[0]
    )
    for arm in arms:
        check_arm_batch(arm, settings, min(settings["batch_size"] or train_size, train_size), train_size)
    return [(unit_name(arm.name), seed) for seed in settings["seeds"] for arm in arms]


def paired_baseline(settings: dict[str, Any], arm: Arm) -> Arm | None:
    """With `cap: paired`, the AdamW arm whose step to 95 % caps gate reading `arm` (AdamW at the reading's decay,
    which the config's checks require); None for fixed caps and for every other arm."""
    if settings["cap"] != "paired" or arm.kind != "poprisk":
        return None
    return next(
        candidate
        for candidate in optimizer_arms(settings)
        if candidate.kind == "adamw" and candidate.weight_decay == arm.weight_decay
    )


def grokking_unit_inputs(settings: dict[str, Any], arm: str, seed: int) -> list[tuple[str, int]]:
    """The units unit (`arm`, `seed`) reads: with paired caps a gate reading reads its seed's AdamW unit."""
    settings = grokking_unit_settings(settings, arm, seed)
    (chosen,) = select_arms(optimizer_arms(settings), settings["only_arms"], "grokking.only_arms")
    baseline = paired_baseline(settings, chosen)
    return [] if baseline is None else [(unit_name(baseline.name), seed)]


def paired_cap(settings: dict[str, Any], arm: Arm, inputs: list[Path] | None) -> int:
    """The step arm `arm` runs to: grokking.steps, or with paired caps (a gate reading) its seed's AdamW step to
    95 % from that AdamW unit's summary (artifacts.UNIT_SUMMARY, `inputs`), grokking.steps when AdamW is censored
    there."""
    if paired_baseline(settings, arm) is None:
        return settings["steps"]
    if not inputs or not Path(inputs[0]).is_file():
        raise ConfigError(
            f"config key 'grokking.cap': paired needs the {SUMMARY.name} of {arm.name}'s AdamW unit at "
            "its "
            f"seed (--unit-inputs), got {inputs[0] if inputs else 'none'}"
        )
    baseline = pd.read_csv(inputs[0])["step_95"]
    return int(baseline.iloc[0]) if baseline.notna().iloc[0] else settings["steps"]


def grokking_unit_settings(settings: dict[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """The settings of unit (`arm`, `seed`) alone: one seed, one arm (`only_arms`, by its table name)."""
    settings = stage_settings("grokking", settings)
    names = {unit_name(candidate.name): candidate.name for candidate in optimizer_arms(settings)}
    if arm not in names:
        raise ConfigError(f"--arm {arm!r} is not an arm of config key 'grokking' (its arms: {', '.join(names)})")
    return {**settings, "seeds": [seed], "only_arms": [names[arm]]}


def run_grokking(
    settings: dict[str, Any],
    out_dir: str | Path,
    log: Callable[[str], None] = print,
    threads: int | None = None,
    *,
    device: str,
) -> dict[str, Any]:
    """Every unit (arm × seed) in this process on `device` (a `device` setting), then the task's curves, summary and
    provenance record (artifacts.CURVES, SUMMARY, PROVENANCE) from them (`experiments.units`)."""
    return run_all_units(
        task("grokking"), stage_settings("grokking", settings), out_dir, log=log, threads=threads, device=device
    )


def run_grokking_unit(
    settings: dict[str, Any],
    out_dir: str | Path,
    arm: str,
    seed: int,
    log: Callable[[str], None] = print,
    threads: int | None = None,
    *,
    device: str,
    inputs: list[Path] | None = None,
) -> dict[str, Any]:
    """Train arm `arm` (its unit name) at `seed` on `device` into `out_dir`: curves, summary and provenance record
    (artifacts.CURVES, SUMMARY, PROVENANCE: with the device and the step it ran to); resumable from the folder's
    resume state. `inputs`: the summaries of the units it reads (`grokking_unit_inputs`: with paired caps, a gate
    reading's AdamW unit)."""
    # flush denormals: small or no weight decay drives gradients and Adam moments into denormals on CPU, which
    # slows the steps after a few thousand of them without changing the trajectory (growcert.runtime)
    with torch_runtime(threads, flush_denormal=True, device=device) as runtime:
        return _run_unit(grokking_unit_settings(settings, arm, seed), Path(out_dir), seed, log, runtime.device, inputs)


def _run_unit(
    settings: dict[str, Any],
    out_dir: Path,
    seed: int,
    log: Callable[[str], None],
    device: torch.device,
    inputs: list[Path] | None,
) -> dict[str, Any]:
    (arm,) = select_arms(optimizer_arms(settings), settings["only_arms"], "grokking.only_arms")
    cap = paired_cap(settings, arm, inputs)
    tokens, answers = division_equations(settings["p"])
    train_index, test_index = split_indices(len(tokens), settings["train_fraction"], settings["split_seed"])
    check_arm_batch(arm, settings, min(settings["batch_size"] or len(train_index), len(train_index)), len(train_index))
    out_dir.mkdir(parents=True, exist_ok=True)

    # every equation fits on the device at once; batches are index draws on the CPU generator
    data = tuple(
        to_device(part, device)
        for part in (tokens[train_index], answers[train_index], tokens[test_index], answers[test_index])
    )
    log(
        f"grokking a/b mod {settings['p']}: {len(train_index)} train / {len(test_index)} held-out equations, "
        f"{arm.name} at seed {seed}, up to {cap} steps"
        + (" (its seed's AdamW step: paired caps)" if cap != settings["steps"] else "")
    )
    sizes = {}
    # the step it runs to is part of what a snapshot was made under (paired caps: read from AdamW's unit)
    resume = UnitResume(
        out_dir, {**settings, "steps": cap}, settings["resume_every"], log, path=unit_resume_folder(out_dir)
    )

    def train(
        arm: Arm, seed: int, prepared: tuple[nn.Module, dict], resume=None, snapshot=None
    ) -> tuple[list[dict], dict]:
        model, initial_state = prepared
        return train_arm(
            arm, {**settings, "steps": cap}, seed, initial_state, model, data, log, resume=resume, snapshot=snapshot
        )

    def prepare(seed: int) -> tuple[nn.Module, dict]:
        model, initial_state = prepare_seed(settings, seed, device)
        sizes["num_parameters"] = sum(p.numel() for p in model.parameters())
        log(f"{settings['model']['architecture']} decoder: {sizes['num_parameters']:,} parameters")
        return model, initial_state

    curves, summaries = run_arms([seed], [arm], prepare, train, resume=resume)
    summary = step_columns(pd.DataFrame(summaries, columns=SUMMARY_COLUMNS), ("memorised_step", "step_95", "step_99"))
    written = write_tables(
        out_dir,
        settings,
        {"curves": pd.DataFrame(curves, columns=CURVE_COLUMNS), "summary": summary},
        **sizes,
        **device_record(device),
        **({"paired_cap": cap} if cap != settings["steps"] else {}),
    )
    resume.folder.clear()
    return written


def prepare_seed(settings: dict[str, Any], seed: int, device: torch.device) -> tuple[nn.Module, dict]:
    """What every arm of a seed starts from, rebuilt from the seed alone: the model (drawn on the CPU under
    torch.manual_seed(seed), then moved: the same weights anywhere) and a copy of its initial weights. Each
    unit calls it, so the arms of a seed start from the same weights without sharing a process."""
    torch.manual_seed(seed)
    model = build_model(settings).to(device)
    return model, copy.deepcopy(model.state_dict())
