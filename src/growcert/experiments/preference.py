"""Noisy-label preference alignment by DPO, AdamW and PopulationRiskAdam side by side (P2; docs/science.md,
"preference (P2, noisy-label DPO)").

Direct preference optimisation (Rafailov et al. 2023, "Direct Preference Optimization: Your Language
Model is Secretly a Reward Model"): for a prompt x with preferred continuation y_w and dispreferred y_l,
a trainable policy π and a frozen reference π_ref,

    loss = −log σ(β [(log π(y_w|x) − log π_ref(y_w|x)) − (log π(y_l|x) − log π_ref(y_l|x))]),

log π(y|x) the sum of the continuation's token log-probabilities. The paper ran it on
Qwen2.5-0.5B-Instruct with 30 % of the training labels swapped; those weights are not available
offline, so (a project decision) the reference here is the pipeline's own byte-level llama
pretrained on Shakespeare, with the same label swap; `hf_model` runs the same experiment on a local
Hugging Face checkpoint instead (`preference_reference`). Pairs, the known reward (vowel count of the
continuation) and the label swap: `preference_pairs`.

Optimizers: AdamW and every configured PopulationRiskAdam variant (gate reading × variance source,
`experiments.arms`, named `poprisk-<gate>-<variance>-wd<decay>`) with the same lr, betas and decoupled
weight decay, all starting from the reference weights and seeing the same swapped labels and the same
minibatches (per seed). A pair is one example: the batch is laid out (pairs, 2, tokens), which the
pipeline's llama reads as independent sequences, so the layer hooks of `per_example_square_sums` give
the exact Σ_i g_i² of the *pair* gradients (the two continuations' gradients summed before squaring);
a Hugging Face reference runs the pair flattened, which the hooks cannot split, so exact needs the
pipeline's llama. Microbatch: K micro-batches of pairs (`microbatch_square_sums`).

Metrics, on the clean held-out pairs, every `eval_every` steps:
- implicit reward r(x, y) = β (log π(y|x) − log π_ref(y|x)), in β-scaled nats;
- held-out reward accuracy: fraction of pairs with r(x, y_w) > r(x, y_l), a tie counting ½ (so the
  reference itself, where every r is 0, scores 0.5 = chance);
- drift: mean over all held-out continuations (both of each pair) of |r(x, y)|, how far the policy has
  moved from the reference on held-out text;
- train_loss: the DPO loss on all training pairs with their (noisy) training labels;
- gated_fraction: PopulationRiskAdam's fraction of blocked parameter updates, averaged over the steps
  since the previous record (NaN for AdamW); open_fraction and variance_ratio: `experiments.arms`.
Outputs: the curves, summary, sampled pairs and provenance record (artifacts.CURVES, SUMMARY, PAIRS, PROVENANCE);
`preference_report` (figure, claim rows) reads them.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from growcert.config import stage_settings
from growcert.errors import ConfigError
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
from growcert.experiments.common import Arm, write_tables
from growcert.experiments.preference_pairs import load_text, make_pairs, pair_tokens, reward_accuracy, swap_labels
from growcert.experiments.preference_reference import load_hf_reference, load_pipeline_reference, model_context
from growcert.models.llama import Llama
from growcert.pipeline.artifacts import PAIRS
from growcert.resume import UnitResume
from growcert.runtime import device_record, torch_runtime
from growcert.training import to_device

CURVE_COLUMNS = [
    "optimizer",
    "seed",
    "step",
    "heldout_reward_acc",
    "drift",
    "train_loss",
    "gated_fraction",
    *DIAGNOSTIC_COLUMNS,
]
SUMMARY_COLUMNS = ["optimizer", "seed", "final_reward_acc", "final_drift", "seconds", "cpu_seconds"]
EVAL_CHUNK = 256  # sequences per forward pass when evaluating


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    reference_chosen: torch.Tensor,
    reference_rejected: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """Per-pair DPO loss −log σ(β[(logπ(y_w) − logπ_ref(y_w)) − (logπ(y_l) − logπ_ref(y_l))])."""
    margin = (policy_chosen - reference_chosen) - (policy_rejected - reference_rejected)
    return -F.logsigmoid(beta * margin)


def continuation_logprobs(model: nn.Module, sequences: torch.Tensor, prompt_length: int) -> torch.Tensor:
    """log π(y|x) of each row: the sum of the log-probabilities of the tokens after `prompt_length`."""
    logits = model(sequences[:, :-1])[:, prompt_length - 1 :, :]
    targets = sequences[:, prompt_length:]
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1).sum(dim=1)


@torch.no_grad()
def all_logprobs(model: nn.Module, sequences: torch.Tensor, prompt_length: int) -> torch.Tensor:
    """`continuation_logprobs` of every row, without gradients, in chunks, as float64."""
    return torch.cat(
        [
            continuation_logprobs(model, sequences[start : start + EVAL_CHUNK], prompt_length).double()
            for start in range(0, len(sequences), EVAL_CHUNK)
        ]
    )


def optimizer_arms(settings: dict[str, Any]) -> list[Arm]:
    """AdamW, then every PopulationRiskAdam variant, all at the section's weight decay."""
    return [Arm("AdamW", "adamw", weight_decay=settings["weight_decay"])] + poprisk_arms(
        settings["poprisk"], [settings["weight_decay"]]
    )


def make_optimizer(arm: Arm, model: nn.Module, settings: dict[str, Any]) -> torch.optim.Optimizer:
    """AdamW or the arm's PopulationRiskAdam with the settings' lr, betas and weight decay."""
    lr, betas, decay = settings["lr"], tuple(settings["betas"]), settings["weight_decay"]
    if arm.kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=decay)
    return make_poprisk(arm, model.parameters(), lr, betas, settings["batch_size"], settings["pairs_train"])


class PairedPolicy(nn.Module):
    """Pairs (n, 2, T) -> logits (n, 2, T, vocab): the llama natively (so hooks see one row per pair),
    any other model on the flattened (2n, T) batch."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy = policy

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        if isinstance(self.policy, Llama):
            return self.policy(pairs)
        n, two, T = pairs.shape
        return self.policy(pairs.reshape(n * two, T)).reshape(n, two, T, -1)


def pair_losses(prompt_length: int, beta: float) -> Callable[..., torch.Tensor]:
    """loss_fn(logits (n, 2, T, V), continuations (n, 2, L), reference (n, 2)) -> per-pair DPO loss (n,),
    row 0 of each pair the (training-label) chosen continuation."""

    def losses(logits, continuations, reference):
        logps = torch.log_softmax(logits[:, :, prompt_length - 1 :, :].float(), dim=-1)
        logps = logps.gather(-1, continuations.unsqueeze(-1)).squeeze(-1).sum(dim=-1)
        return dpo_loss(logps[:, 0], logps[:, 1], reference[:, 0], reference[:, 1], beta)

    return losses


def train_arm(
    arm: Arm,
    reference: nn.Module,
    train: dict[str, torch.Tensor],
    test: dict[str, torch.Tensor],
    settings: dict[str, Any],
    seed: int,
    log: Callable[[str], None] = print,
    resume=None,
    snapshot=None,
) -> tuple[nn.Module, list[dict], dict]:
    """DPO from the reference weights with optimizer `arm` (`arms.run_arm`); returns the policy, curve rows,
    summary row. With `resume` (resume.UnitResume) and the `snapshot` a killed run left it continues that run.

    `train` and `test` hold token ids "chosen" and "rejected" (n, P + L), the reference's log-probs
    "reference_chosen" / "reference_rejected" (n,), and for `train` the bool mask "swapped"; a swapped
    pair is trained with its continuations exchanged. The reference is never modified.
    """
    beta, prompt_length = settings["dpo_beta"], settings["prompt_bytes"]
    policy = copy.deepcopy(reference)
    policy.requires_grad_(True)
    policy.eval()  # no dropout in DPO's log-probs (the pipeline's models have none anyway)
    optimizer = make_optimizer(arm, policy, settings)
    paired, loss_fn = PairedPolicy(policy), pair_losses(prompt_length, beta)
    labelled = swapped_labels(train)  # the training labels as the learner sees them, a share swap_rate wrong
    pairs = torch.stack((labelled["chosen"], labelled["rejected"]), dim=1)  # (n, 2, P + L)
    pair_reference = torch.stack((labelled["reference_chosen"], labelled["reference_rejected"]), dim=1)
    # The batch order depends on the seed only, so every optimizer sees the same batches.
    batches = torch.Generator().manual_seed(seed + 1)
    pairs_train, batch = len(train["chosen"]), settings["batch_size"]

    def evaluate(step: int) -> dict[str, float]:
        return _evaluate_policy(policy, test, labelled, prompt_length, beta)

    def step(step: int):
        drawn = torch.randperm(pairs_train, generator=batches)[:batch].to(pairs.device)  # fresh, per step
        batch_data = (pairs[drawn][..., :-1], pairs[drawn][..., prompt_length:], pair_reference[drawn])
        loss, square_sums = variance_step(optimizer, paired, loss_fn, *batch_data)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"DPO loss became {loss.item()} at step {step} ({arm.name}); lower preference.lr")
        return (
            {} if square_sums is None else {"square_sums": square_sums},
            hook_square_sums(paired, loss_fn, *batch_data),
        )

    def after_record(row: dict[str, Any], seconds: float) -> bool:
        if row["step"] % (settings["eval_every"] * 10) == 0:
            log(
                f"  {arm.name} seed {seed} step {row['step']}: held-out reward acc {row['heldout_reward_acc']:.3f}  "
                f"drift {row['drift']:.3f}  ({seconds:.0f}s)"
            )
        return False

    loop = ArmLoop(
        arm,
        seed,
        policy,
        optimizer,
        batches,
        settings["steps"],
        settings["eval_every"],
        settings["diagnostics_every"],
        after_record=after_record,
    )
    run = run_arm(loop, step, evaluate, resume=resume, snapshot=snapshot)
    history, seconds = run.history, run.seconds
    summary = _summary_row(arm, seed, run)
    log(
        f"{arm.name} seed {seed}: final held-out reward accuracy {summary['final_reward_acc']:.3f}, drift "
        f"{summary['final_drift']:.3f} after {settings['steps']} steps ({seconds:.0f}s)"
    )
    return policy, history, summary


def _evaluate_policy(
    policy: nn.Module, test: dict[str, torch.Tensor], labelled: dict[str, torch.Tensor], prompt_length: int, beta: float
) -> dict[str, float]:
    """A curve row's measures: held-out reward accuracy and drift, and the DPO loss on the labels as learnt."""
    chosen = beta * (all_logprobs(policy, test["chosen"], prompt_length) - test["reference_chosen"])
    rejected = beta * (all_logprobs(policy, test["rejected"], prompt_length) - test["reference_rejected"])
    train_loss = (
        dpo_loss(
            all_logprobs(policy, labelled["chosen"], prompt_length),
            all_logprobs(policy, labelled["rejected"], prompt_length),
            labelled["reference_chosen"],
            labelled["reference_rejected"],
            beta,
        )
        .mean()
        .item()
    )
    return {
        "heldout_reward_acc": reward_accuracy(chosen, rejected),
        "drift": torch.cat((chosen, rejected)).abs().mean().item(),
        "train_loss": train_loss,
    }


def _summary_row(arm: Arm, seed: int, run) -> dict[str, Any]:
    """An arm's summary row from its finished run (`arms.run_arm`'s): the final held-out measures and its time."""
    history = run.history
    return {
        "optimizer": arm.name,
        "seed": seed,
        "final_reward_acc": history[-1]["heldout_reward_acc"],
        "final_drift": history[-1]["drift"],
        "seconds": round(run.seconds, 2),
        "cpu_seconds": round(run.cpu_seconds, 2),
    }


def swapped_labels(train: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The training pairs with the continuations (and their reference log-probs) of the "swapped" pairs
    exchanged: the labels the learner sees."""
    swapped = train["swapped"].unsqueeze(1)
    return {
        "chosen": torch.where(swapped, train["rejected"], train["chosen"]),
        "rejected": torch.where(swapped, train["chosen"], train["rejected"]),
        "reference_chosen": torch.where(train["swapped"], train["reference_rejected"], train["reference_chosen"]),
        "reference_rejected": torch.where(train["swapped"], train["reference_chosen"], train["reference_rejected"]),
    }


# ---------------------------------------------------------------------------
# the run


def run_preference(
    settings: dict[str, Any],
    out_dir: str | Path,
    log: Callable[[str], None] = print,
    threads: int | None = None,
    *,
    reference_checkpoint: str | Path | None = None,
    data: Any = None,
    device: str,
) -> dict[str, Any]:
    """Build the pairs, run DPO with both optimizers for every seed; write the curves, summary, pairs and
    provenance record (artifacts.CURVES, SUMMARY, PAIRS, PROVENANCE) into `out_dir`; return the two tables and the
    provenance record.

    `reference_checkpoint`: the reference llama's training run folder (its highest `step{N}.pt` is
    used) or one checkpoint file; not needed (and ignored) when settings 'hf_model' is set. `data`: the
    prepared Shakespeare dataset (PreparedDataset or folder); None prepares it afresh with the
    reference's dataset settings. The reference and the policies run on `device` (a `device` setting; the
    pairs are sampled there with the CPU's generator), which the provenance record records.
    """
    settings = stage_settings("preference", settings)
    # flush denormals: denormal Adam moments slow CPU steps without changing them (growcert.runtime)
    with torch_runtime(threads, flush_denormal=True, device=device) as runtime:
        return _run_preference(settings, reference_checkpoint, Path(out_dir), log, data, runtime.device)


def load_reference(settings: dict[str, Any], reference_checkpoint: str | Path | None):
    """(frozen reference, byte_to_id, description, dataset settings) from settings 'hf_model' when set,
    else from the pipeline run `reference_checkpoint`."""
    if settings["hf_model"]:
        if settings["poprisk"]["gates"] and "exact" in settings["poprisk"]["variances"]:
            raise ConfigError(
                "config key 'preference.poprisk.variances': exact needs the pipeline's llama (its "
                "layer hooks see one row per pair); with preference.hf_model use streaming or microbatch"
            )
        model, byte_to_id, description = load_hf_reference(settings["hf_model"])
        data_settings: dict[str, Any] = {}
    elif reference_checkpoint is None:
        raise ConfigError(
            "preference needs a reference policy: the llama run folder or stepN.pt "
            "(`growcert preference --reference ...`) or preference.hf_model"
        )
    else:
        model, byte_to_id, description, data_settings = load_pipeline_reference(reference_checkpoint)
    model.requires_grad_(False)
    model.eval()
    length = settings["prompt_bytes"] + settings["continuation_bytes"]
    context = model_context(model)
    if context is not None and length - 1 > context:
        raise ConfigError(
            f"preference prompt_bytes + continuation_bytes = {length} exceeds the reference's "
            f"context {context} + 1; shorten them"
        )
    return model, byte_to_id, description, data_settings


def _run_preference(settings, reference_checkpoint, out_dir: Path, log, data, device: torch.device) -> dict[str, Any]:
    reference, byte_to_id, description, data_settings = load_reference(settings, reference_checkpoint)
    reference = reference.to(device)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = load_text(data, data_settings)

    started = time.perf_counter()
    pairs, tensors = _pairs(reference, byte_to_id, text, settings, device)
    pair_seconds = time.perf_counter() - started
    gap = {split: float(np.mean(p["chosen_reward"] - p["rejected_reward"])) for split, p in pairs.items()}
    log(
        f"preference: {settings['pairs_train']} train / {settings['pairs_test']} held-out pairs (vowel reward, "
        f"mean gap {gap['train']:.2f}; {pair_seconds:.0f}s), {settings['swap_rate']:.0%} train labels swapped, "
        f"{len(optimizer_arms(settings))} optimizers x {len(settings['seeds'])} seeds, {settings['steps']} steps"
    )

    swaps = {}

    def prepare_seed(seed: int) -> torch.Tensor:
        swaps[f"swapped_seed{seed}"] = swap_labels(settings["pairs_train"], settings["swap_rate"], seed)
        return swaps[f"swapped_seed{seed}"]

    def train(arm: Arm, seed: int, swapped: torch.Tensor, resume=None, snapshot=None) -> tuple[list[dict], dict]:
        torch.manual_seed(seed)
        _, history, summary = train_arm(
            arm,
            reference,
            {**tensors["train"], "swapped": swapped.to(device)},
            tensors["test"],
            settings,
            seed,
            log,
            resume=resume,
            snapshot=snapshot,
        )
        return history, summary

    resume = UnitResume(out_dir, settings, settings["resume_every"], log)
    curves, summaries = run_arms(settings["seeds"], optimizer_arms(settings), prepare_seed, train, resume=resume)
    swaps = {key: value.numpy() for key, value in swaps.items()}
    np.savez_compressed(
        PAIRS.path(out_dir),
        **{f"{split}_{key}": value for split, split_pairs in pairs.items() for key, value in split_pairs.items()},
        **swaps,
    )
    tables = {
        "curves": pd.DataFrame(curves, columns=CURVE_COLUMNS),
        "summary": pd.DataFrame(summaries, columns=SUMMARY_COLUMNS),
    }
    written = write_tables(
        out_dir,
        settings,
        tables,
        reference=description,
        num_parameters=sum(p.numel() for p in reference.parameters()),
        pairs={
            split: {"count": len(p["prompt"]), "mean_reward_gap": gap[split], "tie_rate": float(p["tie_rate"])}
            for split, p in pairs.items()
        },
        pair_seconds=round(pair_seconds, 2),
        **device_record(device),
    )
    resume.folder.clear()
    return written


def _pairs(
    reference: nn.Module, byte_to_id, text, settings: dict[str, Any], device: torch.device
) -> tuple[dict[str, dict], dict[str, dict[str, torch.Tensor]]]:
    """The train and held-out pairs sampled from the reference (`make_pairs`), and per split their token ids on
    `device` with the reference's log-probs of each continuation."""
    generator = torch.Generator().manual_seed(settings["pair_seed"])
    pairs = {
        split: make_pairs(
            reference,
            byte_to_id,
            stream,
            text.segment_starts(split),
            count,
            settings["prompt_bytes"],
            settings["continuation_bytes"],
            generator,
        )
        for split, stream, count in (
            ("train", text.train_x, settings["pairs_train"]),
            ("test", text.test_x, settings["pairs_test"]),
        )
    }
    tensors = {}
    for split, split_pairs in pairs.items():
        chosen, rejected = (to_device(ids, device) for ids in pair_tokens(split_pairs, byte_to_id))
        tensors[split] = {
            "chosen": chosen,
            "rejected": rejected,
            "reference_chosen": all_logprobs(reference, chosen, settings["prompt_bytes"]),
            "reference_rejected": all_logprobs(reference, rejected, settings["prompt_bytes"]),
        }
    return pairs, tensors
