"""`growcert grow`: grow a shallow network by inserting zero-output blocks and compare it with networks
trained from scratch on the same budget (P3's second finding; docs/science.md, "grow (P3, growth vs scratch)").

What a grown model is. The base is the family's own model at `base_depth` (ResNet-(6n+2), or a LLaMA
with `base_depth` decoder layers). Growing appends `blocks` zero-output residual blocks
(`models/blocks.py`, W_in trainable) at distinct insertion points: on a ResNet a 1×1-convolution MLP
inside the stage whose stream the point carries (block0: after the stem; block i: after residual
block i), on a LLaMA a residual MLP on RMSNorm(z) between decoder layers, i.e. an extra layer without
attention. Each block adds 2·features·hidden parameters; the grown network's "depth" is the base depth
plus `blocks` such layers.

Arms, per seed, all on one budget of `train.steps` optimiser steps of `train.batch_size` examples, the
same batches in the same order (one seed), evaluated on one held-out set:
    shallow        the base alone for the whole budget (does extra depth help at all?)
    grown_value    the base for grow_fraction × steps, then blocks at the points with the highest
                   first-order value (`select_by`: the scale-invariant value by default), then the rest
    grown_uniform  the same, blocks at evenly spaced points (the control for the selection rule)
    scratch        the grown_value architecture (base + the same blocks at the same points) trained
                   from step 0: zero-initialised W_out, as residual branches commonly are from scratch
    deeper         the family's own model at `deeper_depth` from scratch (if given): the familiar deeper net
The three arms that share the first phase share it exactly (one run, forked). The value is estimated on
`select_examples` held-out examples disjoint from the evaluation set (or training examples), with the
very block that is then inserted, so choosing points never looks at the rows the comparison is scored on.
Right after insertion the outputs on those examples are compared: `insert_max_abs_change` is 0.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from growcert.block_features import PointArrays
from growcert.config import stage_settings
from growcert.data import PreparedDataset, load_prepared
from growcert.data.batches import examples_at, fixed_examples, split_size
from growcert.errors import ConfigError
from growcert.files import write_csv
from growcert.models import build_model, check_growth
from growcert.models.blocks import insert_blocks, make_block, stream_features
from growcert.models.capture import capture_batch
from growcert.pipeline.artifacts import GROWTH_RUN_TABLE, GROWTH_SELECTION
from growcert.resume import UnitResume, termination_requests
from growcert.runtime import torch_runtime
from growcert.stats import depth as stats
from growcert.training import EVAL_SEED_OFFSET, Trainer, evaluate, evaluation_sets, text_context, to_device

SELECT_SEED_OFFSET = 20_011  # selection examples: a seed stream of their own
COLUMNS = [
    "family",
    "dataset",
    "width",
    "seed",
    "arm",
    "base_depth",
    "depth",
    "blocks",
    "points",
    "grown_at",
    "num_parameters",
    "step",
    "examples_seen",
    "train_loss",
    "train_acc",
    "test_loss",
    "test_acc",
    "insert_max_abs_change",
]


def evenly_spaced(points: list[str], count: int) -> list[str]:
    """`count` of `points` at the midpoints of `count` equal segments: ⌊(j + ½)·P/count⌋."""
    return [points[int((j + 0.5) * len(points) / count)] for j in range(count)]


def selection_examples(data: PreparedDataset, settings: dict[str, Any], seed: int, context: int | None):
    """Examples for the quick first-order estimate: held-out rows not in the evaluation set, or train rows."""
    count = settings["select_examples"]
    if settings["select_split"] == "train":
        return fixed_examples(data, "train", count, seed + SELECT_SEED_OFFSET, context)
    evaluation = fixed_examples(data, "test", settings["train"]["eval_examples"], seed + EVAL_SEED_OFFSET, context)
    used = evaluation.index // context if context else evaluation.index
    free = np.setdiff1d(np.arange(split_size(data, "test", context)), used)
    if len(free) < count:
        raise ConfigError(
            f"grow: {len(free)} held-out examples remain beside the evaluation set, fewer than "
            f"select_examples={count}; lower train.eval_examples or select_examples"
        )
    chosen = np.sort(np.random.default_rng(seed + SELECT_SEED_OFFSET).choice(free, count, replace=False))
    return examples_at(data, "test", chosen, context)


def first_order_scores(model: nn.Module, inputs, targets, hidden: int | None, seed: int, level: float) -> pd.DataFrame:
    """Unbiased value and scaled value of the family's block at every point, from one batch."""
    model.eval()
    device = next(model.parameters()).device
    captured = capture_batch(model, to_device(inputs, device), to_device(targets, device))
    rows = []
    for point in model.points:
        features = stream_features(model, point)
        block = make_block(model.family, features, point, hidden=hidden, seed=seed, dtype=torch.float64).to(device)
        arrays = PointArrays(len(inputs), features, block.w_in.shape[0])
        arrays.add(0, block, captured.z[point].double(), captured.q[point].double(), np.full(len(inputs), "test"))
        value = stats.first_order_value(arrays.g, level)
        scaled = stats.scaled_value(value["value"], value["value_se"], arrays.z_sq, arrays.h_sq, level)
        rows.append({"point": point, **value, **scaled})
    model.train()
    return pd.DataFrame(rows)


def choose_points(
    base: GrowthArm,
    data: PreparedDataset,
    settings: dict[str, Any],
    seed: int,
    context: int | None,
    log: Callable[[str], None],
) -> tuple[dict[str, list[str]], pd.DataFrame]:
    """Where grown_value and grown_uniform insert their blocks, and the selection table behind the choice."""
    probe = selection_examples(data, settings, seed, context)
    scores = first_order_scores(
        base.model, probe.inputs, probe.targets, settings["block_hidden"], seed, settings["level"]
    )
    points = list(base.model.points)
    if settings["blocks"] > len(points):
        raise ConfigError(f"grow.blocks={settings['blocks']} exceeds the {len(points)} insertion points of the base")
    ranked = scores.sort_values(settings["select_by"], ascending=False)["point"].tolist()
    chosen = {"grown_value": ranked[: settings["blocks"]], "grown_uniform": evenly_spaced(points, settings["blocks"])}
    selection = scores.assign(
        seed=seed,
        rank=[ranked.index(p) for p in scores["point"]],
        grown_value=scores["point"].isin(chosen["grown_value"]),
        grown_uniform=scores["point"].isin(chosen["grown_uniform"]),
    )
    log(
        f"seed {seed}: {settings['select_by']} by point "
        + ", ".join(f"{p} {v:.3g}" for p, v in zip(scores["point"], scores[settings["select_by"]]))
        + f"; grow at {chosen['grown_value']} (uniform control {chosen['grown_uniform']})"
    )
    return chosen, selection


class GrowthArm:
    """One arm being trained: a `Trainer` (model, optimiser, its own copy of the batch stream) and its blocks."""

    def __init__(
        self,
        arm: str,
        model: nn.Module,
        settings: dict[str, Any],
        data: PreparedDataset,
        seed: int,
        context: int | None,
    ):
        self.arm, self.model, self.settings, self.train = arm, model, settings, settings["train"]
        self.trainer = Trainer(model, self.train, data, seed, context, label=f"grow {arm}")
        self.points: list[str] = []
        self.grown_at, self.change = math.nan, math.nan

    def grow(self, points: list[str], seed: int, step: int, probe: torch.Tensor) -> None:
        """Insert trainable zero-output blocks; record how much the outputs on `probe` moved (0)."""
        self.model.eval()
        probe = to_device(probe, self.trainer.device)
        with torch.no_grad():
            before = self.model(probe)
        blocks = insert_blocks(self.model, points, hidden=self.settings["block_hidden"], seed=seed, trainable=True)
        with torch.no_grad():
            self.change = float((self.model(probe) - before).abs().max())
        self.model.train()
        self.trainer.optimizer.add_param_group(
            {"params": [p for b in blocks for p in b.parameters()], "weight_decay": self.train["weight_decay"]}
        )
        self.points, self.grown_at = list(points), step

    def fit(
        self,
        first: int,
        last: int,
        evaluate_at: set[int],
        record: Callable[[GrowthArm, int], None],
        tick: Callable[[int], None] = lambda step: None,
    ) -> None:
        """Steps first..last through the training loop `growcert train` uses (`Trainer.fit`), recording at the
        evaluation steps and ticking the unit's resume state after every step."""
        self.trainer.fit(first, last, evaluate_at, lambda step: record(self, step), lambda step, loss: tick(step))


def grow_and_compare(
    settings: dict[str, Any],
    data: PreparedDataset | str | Path,
    out_dir: str | Path,
    log: Callable[[str], None] = print,
    threads: int = 1,
    *,
    device: str,
) -> pd.DataFrame:
    """Run every arm for every seed on `device` (a `device` setting) on `data` (a prepared dataset, or its folder,
    read once the settings are checked); write growth.csv and selection.csv to out_dir; return the growth table."""
    settings = stage_settings("grow", settings)
    check_growth(settings)  # the family's rules on this experiment (depths, width, data kind, blocks)
    data = data if isinstance(data, PreparedDataset) else load_prepared(data)
    # flush denormals as in `growcert train`: denormal Adam moments slow CPU steps (growcert.runtime)
    with torch_runtime(threads, flush_denormal=True, device=device) as runtime:
        log(f"growing on {runtime.device}")
        return _grow_and_compare(settings, data, Path(out_dir), log, runtime.device)


def _grow_and_compare(
    settings: dict[str, Any], data: PreparedDataset, out_dir: Path, log: Callable[[str], None], device: torch.device
) -> pd.DataFrame:
    """Per seed, six units in a fixed order, each resumable: the shared base phase (then the selection), the
    shallow, grown_value and grown_uniform continuations from the fork at grown_at, scratch, deeper."""
    train = settings["train"]
    steps = train["steps"]
    grown_at = max(1, min(steps - 1, round(settings["grow_fraction"] * steps)))
    resume = UnitResume(out_dir, settings, train["resume_every"], log)
    rows, selections = [], []
    with termination_requests() as stop:
        for seed_index, seed in enumerate(settings["seeds"]):
            seed_run = SeedGrowth(settings, data, seed, seed_index, grown_at, resume, stop, device)
            seed_rows, selection = seed_run.run(log)
            rows += seed_rows
            selections.append(selection)
            final = {r["arm"]: r["test_loss"] for r in seed_rows if r["step"] == steps}
            log(f"seed {seed}: final held-out loss " + ", ".join(f"{arm} {loss:.4f}" for arm, loss in final.items()))
    out_dir.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows, columns=COLUMNS)
    write_csv(pd.concat(selections, ignore_index=True), GROWTH_SELECTION.path(out_dir))
    write_csv(table, GROWTH_RUN_TABLE.path(out_dir))  # last: the file the summary reads
    resume.folder.clear()
    return table


class SeedGrowth:
    """One seed of a growth experiment: its units (the base phase, then each arm), each resumable inside."""

    SHARED_ARMS = ("shallow", "grown_value", "grown_uniform")  # the base phase is recorded for each of these

    def __init__(
        self,
        settings: dict[str, Any],
        data: PreparedDataset,
        seed: int,
        seed_index: int,
        grown_at: int,
        resume: UnitResume,
        stop,
        device: torch.device,
    ):
        self.settings, self.data, self.seed, self.seed_index = settings, data, seed, seed_index
        self.grown_at, self.resume, self.stop, self.device = grown_at, resume, stop, device
        train = settings["train"]
        self.steps = train["steps"]
        self.context = text_context(data, settings["model"])
        self.evaluate_at = {s for s in range(train["eval_every"], self.steps + 1, train["eval_every"])} | {
            grown_at,
            self.steps,
        }
        self.evaluation = evaluation_sets(data, train, seed, self.context)

    def record(self, run: GrowthArm, step: int, into: list[dict], arms: tuple[str, ...] | None = None) -> None:
        settings = self.settings
        train_loss, train_acc = evaluate(run.model, self.evaluation["train"])
        test_loss, test_acc = evaluate(run.model, self.evaluation["test"])
        for arm in arms or (run.arm,):
            into.append(
                {
                    "family": settings["family"],
                    "dataset": settings["dataset"],
                    "width": settings["width"],
                    "seed": self.seed,
                    "arm": arm,
                    "base_depth": settings["base_depth"],
                    "depth": run.model.config.depth,
                    "blocks": len(run.points),
                    "points": ";".join(run.points),
                    "grown_at": run.grown_at,
                    "num_parameters": sum(p.numel() for p in run.model.parameters()),
                    "step": step,
                    "examples_seen": step * settings["train"]["batch_size"],
                    "train_loss": train_loss,
                    "train_acc": train_acc,
                    "test_loss": test_loss,
                    "test_acc": test_acc,
                    "insert_max_abs_change": run.change,
                }
            )

    def model(self, depth: int) -> nn.Module:
        torch.manual_seed(self.seed)  # every arm's base weights are the same draw, on the CPU, then moved
        settings = self.settings
        return build_model(settings["family"], settings["width"], depth, self.data.info, settings["model"]).to(
            self.device
        )

    def arm(self, name: str, depth: int) -> GrowthArm:
        return GrowthArm(name, self.model(depth), self.settings, self.data, self.seed, self.context)

    def unit(self, index: int, run: GrowthArm, first: int, labels: tuple[str, ...] | None = None) -> list[dict]:
        """Fit `run` from step `first` to its unit's end, recording; resumable inside (resume.tick)."""
        snapshot = self.resume.start((self.seed_index, index), self.stop)
        unit_rows: list[dict] = []
        if snapshot is None:
            if first == 1:
                self.record(run, 0, unit_rows, labels)
        else:
            run.trainer.load_state_dict(snapshot["trainer"])
            unit_rows, first = snapshot["rows"], snapshot["step"] + 1
        last = self.grown_at if index == 0 else self.steps
        run.fit(
            first,
            last,
            self.evaluate_at,
            lambda arm, step: self.record(arm, step, unit_rows, labels),
            lambda step: self.resume.tick(
                step, lambda: {"trainer": run.trainer.state_dict(), "rows": unit_rows, "step": step}
            ),
        )
        return unit_rows

    def run(self, log: Callable[[str], None]) -> tuple[list[dict], pd.DataFrame]:
        """Every unit of this seed in order (finished ones read back): its rows and its point selection."""
        settings, resume, seed = self.settings, self.resume, self.seed
        if resume.done((self.seed_index, 0)):
            fork, chosen, selection, rows = resume.result((self.seed_index, 0))
        else:
            base = self.arm("shallow", settings["base_depth"])
            rows = self.unit(0, base, 1, self.SHARED_ARMS)
            chosen, selection = choose_points(base, self.data, settings, seed, self.context, log)
            fork = copy.deepcopy(base.trainer.state_dict())  # the base at grown_at, for every continuation
            resume.finished((fork, chosen, selection, rows))
        rows = list(rows)  # this seed's rows grow below; the base phase's record stays as it was
        probe = selection_examples(self.data, settings, seed, self.context)
        arms = [
            ("shallow", None),
            ("grown_value", chosen["grown_value"]),
            ("grown_uniform", chosen["grown_uniform"]),
            ("scratch", chosen["grown_value"]),
        ] + ([("deeper", None)] if settings["deeper_depth"] else [])
        for index, (arm, points) in enumerate(arms, start=1):
            if resume.done((self.seed_index, index)):
                rows += resume.result((self.seed_index, index))
                continue
            if arm == "scratch":  # the grown_value network, blocks in place from step 0
                architecture = self.model(settings["base_depth"])
                insert_blocks(architecture, points, hidden=settings["block_hidden"], seed=seed, trainable=True)
                run = GrowthArm(arm, architecture, settings, self.data, seed, self.context)
                run.points, run.grown_at, first = points, 0, 1
            elif arm == "deeper":
                run, first = self.arm(arm, settings["deeper_depth"]), 1
            else:  # a continuation of the shared base from the fork at grown_at
                run = self.arm(arm, settings["base_depth"])
                run.trainer.load_state_dict(fork)
                if points is not None:
                    run.grow(points, seed, self.grown_at, probe.inputs)
                first = self.grown_at + 1
            unit_rows = self.unit(index, run, first)
            resume.finished(unit_rows)
            rows += unit_rows
        return rows, selection
