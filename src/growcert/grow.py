"""`growcert grow`: grow a shallow network by inserting zero-output blocks and compare it with networks
trained from scratch on the same budget (PAPERS.md P3, second finding).

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
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from torch import nn

from growcert.batches import TrainingBatches, examples_at, fixed_examples, split_size
from growcert.capture import capture_batch
from growcert.data import PreparedDataset
from growcert.depth import PointArrays
from growcert.errors import ConfigError
from growcert.models import build_model
from growcert.models.blocks import insert_blocks, make_block, stream_features
from growcert.stats import depth as stats
from growcert.train import EVAL_SEED_OFFSET, evaluate, make_optimizer, warmup_factor

SELECT_SEED_OFFSET = 20_011  # selection examples: a seed stream of their own
TRAIN_DEFAULTS = {"steps": 300, "batch_size": 64, "lr": 0.003, "weight_decay": 0.0, "betas": [0.9, 0.95],
                  "warmup_steps": 20, "grad_clip": 1.0, "eval_every": 50, "eval_examples": 256, "single_pass": True}
DEFAULTS: dict[str, Any] = {
    "family": None, "dataset": None, "width": None, "base_depth": None,  # required
    "blocks": 1, "deeper_depth": None, "seeds": [0, 1], "grow_fraction": 0.5, "block_hidden": None,
    "select_by": "scaled_value", "select_split": "test", "select_examples": 128, "level": 0.95,
    "model": {}, "train": {},
}
ARMS = ("shallow", "grown_value", "grown_uniform", "scratch", "deeper")
COLUMNS = ["family", "dataset", "width", "seed", "arm", "base_depth", "depth", "blocks", "points", "grown_at",
           "num_parameters", "step", "examples_seen", "train_loss", "train_acc", "test_loss", "test_acc",
           "insert_max_abs_change"]


def resolve_settings(settings: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"grow: unknown setting(s) {unknown}; known: {sorted(DEFAULTS)}")
    resolved = {**DEFAULTS, **settings}
    missing = [key for key in ("family", "dataset", "width", "base_depth") if resolved[key] is None]
    if missing:
        raise ConfigError(f"grow: missing setting(s) {missing}")
    resolved["train"] = {**TRAIN_DEFAULTS, **resolved["train"]}
    if not 0 < resolved["grow_fraction"] < 1:
        raise ConfigError(f"grow.grow_fraction must be in (0, 1), got {resolved['grow_fraction']!r}")
    if resolved["select_by"] not in ("value", "scaled_value") or resolved["select_split"] not in ("train", "test"):
        raise ConfigError("grow.select_by must be value|scaled_value and grow.select_split train|test")
    if resolved["select_examples"] < 4 or resolved["blocks"] < 1 or not resolved["seeds"]:
        raise ConfigError("grow needs select_examples >= 4, blocks >= 1 and at least one seed")
    return resolved


def grow_settings(config: dict[str, Any], index: int) -> dict[str, Any]:
    """Settings of experiment `index` of a validated config's `grow` section (shared keys merged in)."""
    section = config["grow"]
    shared = {key: value for key, value in section.items() if key != "experiments"}
    experiment = dict(section["experiments"][index])
    return {**shared, **experiment, "model": dict(config["models"][experiment["family"]])}


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
        raise ConfigError(f"grow: {len(free)} held-out examples remain beside the evaluation set, fewer than "
                          f"select_examples={count}; lower train.eval_examples or select_examples")
    chosen = np.sort(np.random.default_rng(seed + SELECT_SEED_OFFSET).choice(free, count, replace=False))
    return examples_at(data, "test", chosen, context)


def first_order_scores(model: nn.Module, inputs, targets, hidden: int | None, seed: int,
                       level: float) -> pd.DataFrame:
    """Unbiased value and scaled value of the family's block at every point, from one batch."""
    model.eval()
    captured = capture_batch(model, inputs, targets)
    rows = []
    for point in model.points:
        features = stream_features(model, point)
        block = make_block(model.family, features, point, hidden=hidden, seed=seed, dtype=torch.float64)
        arrays = PointArrays(len(inputs), features, block.w_in.shape[0])
        arrays.add(0, block, captured.z[point].double(), captured.q[point].double(), np.full(len(inputs), "test"))
        value = stats.first_order_value(arrays.g, level)
        scaled = stats.scaled_value(value["value"], value["value_se"], arrays.z_sq, arrays.h_sq, level)
        rows.append({"point": point, **value, **scaled})
    model.train()
    return pd.DataFrame(rows)


class Run:
    """One arm being trained: model, optimiser, its own copy of the batch stream, and its history."""

    def __init__(self, arm: str, model: nn.Module, settings: dict[str, Any], data: PreparedDataset, seed: int,
                 context: int | None, optimizer=None, skip: int = 0):
        self.arm, self.model, self.settings, self.train = arm, model, settings, settings["train"]
        self.optimizer = optimizer or make_optimizer(model, self.train)
        self.batches = TrainingBatches(data, self.train["batch_size"], self.train["steps"], seed, context,
                                       self.train["single_pass"])
        for _ in range(skip):  # same stream as a run that already took `skip` steps
            self.batches.next()
        self.points: list[str] = []
        self.grown_at, self.change = math.nan, math.nan

    def grow(self, points: list[str], seed: int, step: int, probe: torch.Tensor) -> None:
        """Insert trainable zero-output blocks; record how much the outputs on `probe` moved (0)."""
        self.model.eval()
        with torch.no_grad():
            before = self.model(probe)
        blocks = insert_blocks(self.model, points, hidden=self.settings["block_hidden"], seed=seed, trainable=True)
        with torch.no_grad():
            self.change = float((self.model(probe) - before).abs().max())
        self.model.train()
        self.optimizer.add_param_group({"params": [p for b in blocks for p in b.parameters()],
                                        "weight_decay": self.train["weight_decay"]})
        self.points, self.grown_at = list(points), step

    def fit(self, first: int, last: int, evaluate_at: set[int], record: Callable[["Run", int], None]) -> None:
        self.model.train()
        for step in range(first, last + 1):
            for group in self.optimizer.param_groups:
                group["lr"] = self.train["lr"] * warmup_factor(step, self.train["warmup_steps"])
            inputs, targets = self.batches.next()
            loss = self.model.per_example_loss(self.model(inputs), targets).mean()
            if not math.isfinite(loss.item()):
                raise FloatingPointError(f"grow {self.arm}: training loss became {loss.item()} at step {step}")
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if self.train["grad_clip"] is not None:
                nn.utils.clip_grad_norm_(self.model.parameters(), self.train["grad_clip"])
            self.optimizer.step()
            if step in evaluate_at:
                record(self, step)

    def fork(self, arm: str, data: PreparedDataset, seed: int, context: int | None, done: int) -> "Run":
        """A copy that continues from here: same weights, optimiser state and position in the batch stream."""
        model = copy.deepcopy(self.model)
        optimizer = make_optimizer(model, self.train)
        optimizer.load_state_dict(self.optimizer.state_dict())
        return Run(arm, model, self.settings, data, seed, context, optimizer, skip=done)


def grow_and_compare(settings: dict[str, Any], data: PreparedDataset, out_dir: str | Path,
                     log: Callable[[str], None] = print, threads: int = 1) -> pd.DataFrame:
    """Run every arm for every seed; write growth.csv and selection.csv to out_dir; return the growth table."""
    settings = resolve_settings(settings)
    train, family = settings["train"], settings["family"]
    # one thread by default, as train.py: small models on a shared machine lose ~5x to thread contention
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.set_flush_denormal(True)  # as in train.py: denormal Adam moments slow CPU steps ~2x
    context = settings["model"].get("context") if data.info["kind"] == "text" else None
    steps = train["steps"]
    grown_at = max(1, min(steps - 1, round(settings["grow_fraction"] * steps)))
    evaluate_at = {s for s in range(train["eval_every"], steps + 1, train["eval_every"])} | {grown_at, steps}
    rows, selections = [], []
    for seed in settings["seeds"]:
        evaluation = {split: fixed_examples(data, split, train["eval_examples"], seed + EVAL_SEED_OFFSET, context)
                      for split in ("train", "test")}

        def record(run: Run, step: int, arms: tuple[str, ...] | None = None) -> None:
            train_loss, train_acc = evaluate(run.model, evaluation["train"])
            test_loss, test_acc = evaluate(run.model, evaluation["test"])
            for arm in arms or (run.arm,):
                rows.append({"family": family, "dataset": settings["dataset"], "width": settings["width"],
                             "seed": seed, "arm": arm, "base_depth": settings["base_depth"],
                             "depth": run.model.config.depth, "blocks": len(run.points),
                             "points": ";".join(run.points), "grown_at": run.grown_at,
                             "num_parameters": sum(p.numel() for p in run.model.parameters()), "step": step,
                             "examples_seen": step * train["batch_size"], "train_loss": train_loss,
                             "train_acc": train_acc, "test_loss": test_loss, "test_acc": test_acc,
                             "insert_max_abs_change": run.change})

        def model(depth: int) -> nn.Module:
            torch.manual_seed(seed)  # every arm's base weights are the same draw
            return build_model(family, settings["width"], depth, data.info, settings["model"])

        shared_arms = ("shallow", "grown_value", "grown_uniform")
        base = Run("shallow", model(settings["base_depth"]), settings, data, seed, context)
        record(base, 0, shared_arms)
        base.fit(1, grown_at, evaluate_at, lambda run, step: record(run, step, shared_arms))

        probe = selection_examples(data, settings, seed, context)
        scores = first_order_scores(base.model, probe.inputs, probe.targets, settings["block_hidden"], seed,
                                    settings["level"])
        points = list(base.model.points)
        if settings["blocks"] > len(points):
            raise ConfigError(f"grow.blocks={settings['blocks']} exceeds the {len(points)} insertion points of the base")
        ranked = scores.sort_values(settings["select_by"], ascending=False)["point"].tolist()
        chosen = {"grown_value": ranked[:settings["blocks"]], "grown_uniform": evenly_spaced(points, settings["blocks"])}
        selections.append(scores.assign(seed=seed, rank=[ranked.index(p) for p in scores["point"]],
                                        grown_value=scores["point"].isin(chosen["grown_value"]),
                                        grown_uniform=scores["point"].isin(chosen["grown_uniform"])))
        log(f"seed {seed}: {settings['select_by']} by point "
            + ", ".join(f"{p} {v:.3g}" for p, v in zip(scores["point"], scores[settings["select_by"]]))
            + f"; grow at {chosen['grown_value']} (uniform control {chosen['grown_uniform']})")

        runs = [base]
        for arm in ("grown_value", "grown_uniform"):
            run = base.fork(arm, data, seed, context, grown_at)
            run.grow(chosen[arm], seed, grown_at, probe.inputs)
            runs.append(run)
        for run in runs:
            run.fit(grown_at + 1, steps, evaluate_at, record)
        architecture = model(settings["base_depth"])  # the grown_value network, blocks in place from step 0
        insert_blocks(architecture, chosen["grown_value"], hidden=settings["block_hidden"], seed=seed, trainable=True)
        scratch = Run("scratch", architecture, settings, data, seed, context)
        scratch.points, scratch.grown_at = chosen["grown_value"], 0
        runs.append(scratch)
        if settings["deeper_depth"] is not None:
            runs.append(Run("deeper", model(settings["deeper_depth"]), settings, data, seed, context))
        for run in runs[3:]:
            record(run, 0)
            run.fit(1, steps, evaluate_at, record)
        final = {r["arm"]: r["test_loss"] for r in rows if r["seed"] == seed and r["step"] == steps}
        log(f"seed {seed}: final held-out loss " + ", ".join(f"{arm} {loss:.4f}" for arm, loss in final.items()))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.to_csv(out_dir / "growth.csv", index=False)
    pd.concat(selections, ignore_index=True).to_csv(out_dir / "selection.csv", index=False)
    return table


def plot_growth(table: pd.DataFrame, out_png: str | Path) -> None:
    """Held-out loss along training per arm (mean over seeds), and the final held-out loss per arm and seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from growcert.plots import save_figure
    import seaborn as sns

    panels = list(table.groupby(["family", "dataset", "width"]))
    figure, axes = plt.subplots(max(1, len(panels)), 2, figsize=(12, 3.8 * max(1, len(panels))), squeeze=False)
    order = [arm for arm in ARMS if arm in set(table["arm"])]
    for row, ((family, dataset, width), frame) in enumerate(panels):
        left, right = axes[row]
        # from the first evaluation after step 0: the untrained loss would flatten every difference
        sns.lineplot(frame[frame["step"] > 0], x="examples_seen", y="test_loss", hue="arm", hue_order=order,
                     errorbar=("pi", 100), marker="o", ax=left)
        grown = frame.loc[frame["arm"] == "grown_value", "grown_at"].dropna()
        if len(grown):
            left.axvline(grown.iloc[0] * frame["examples_seen"].max() / frame["step"].max(), color="grey", ls="--",
                         lw=1, label="blocks inserted")
        left.set(xlabel="training examples seen", ylabel="held-out loss",
                 title=f"{family}/{dataset} width {width}: base depth {frame['base_depth'].iloc[0]}")
        left.legend(fontsize=7)
        last = frame[frame["step"] == frame["step"].max()]
        sns.pointplot(last, x="arm", y="test_loss", order=order, errorbar=None, color="black", markers="_",
                      linestyles="none", ax=right)
        sns.stripplot(last, x="arm", y="test_loss", order=order, hue="seed", dodge=False, ax=right)
        right.set(xlabel="", ylabel="final held-out loss", title="same budget: mean (bar) and seeds (dots)")
        right.tick_params(axis="x", labelrotation=20)
        left.grid(alpha=0.3)
        right.grid(alpha=0.3)
    figure.tight_layout()
    save_figure(figure, out_png)


def _depth_claim(depth_table: pd.DataFrame, level: float) -> list[dict[str, Any]]:
    from growcert.depth import recommend_depth

    claims = []
    if depth_table.empty:
        return claims
    held_out = depth_table[depth_table["pool"] == "test"]
    held_out = held_out[held_out["step"] == held_out.groupby(["family", "dataset"])["step"].transform("max")]
    decisions = recommend_depth(held_out, level=level)
    for (family, dataset), frame in decisions.groupby(["family", "dataset"]):
        # across the depth grid when it has two depths or more; otherwise over the points of the deepest model
        view = "across_depth" if (frame["view"] == "across_depth").any() else "within_model"
        frame = frame[frame["view"] == view]
        if view == "within_model":
            frame = frame[frame["depth"] == frame["depth"].max()]
        summary, holds = {}, {}
        for criterion, part in frame.groupby("criterion"):
            held = part["falls"] & part["status"].str.startswith("saturated")
            holds[criterion] = bool(held.all())
            summary[criterion] = "; ".join(
                f"w{r.width}: {r.status}" + (f" from {r.recommended:g} [{r.recommended_lo:g}–{r.recommended_hi:g}]"
                                              if r.status.startswith("saturated") else "")
                + f", {'falls' if r.falls else 'no significant fall'} ({r.first_value:.3g} → {r.last_value:.3g})"
                for r in part.itertuples())
        unit = "model depth" if view == "across_depth" else "point index"
        claims.append({"paper": "P3", "claim": f"first-order value of an inserted block falls with depth and plateaus "
                                                f"({family}/{dataset})",
                       "paper_value": "plateau", "this_run": f"scale-invariant: {summary.get('scaled_value', '')}",
                       "holds": holds.get("scaled_value", False),
                       "note": f"{view} over {unit} (held-out pool, last checkpoint); holds = significant fall from the "
                               f"shallowest to the deepest level AND a plateau or zero within the grid, judged on the "
                               f"scale-invariant value (P3 pilot). Raw value: {summary.get('value', '')} "
                               f"(holds on raw: {holds.get('value', False)})."})
    return claims


def _growth_claim(growth_table: pd.DataFrame, level: float) -> list[dict[str, Any]]:
    from growcert.stats.intervals import normal_quantile

    claims = []
    final = growth_table[growth_table["step"] == growth_table.groupby(["family", "dataset", "width"])["step"].transform("max")]
    for (family, dataset, width), frame in final.groupby(["family", "dataset", "width"]):
        loss = frame.pivot_table(index="seed", columns="arm", values="test_loss")
        if not {"grown_value", "scratch"} <= set(loss.columns):
            continue
        difference = loss["grown_value"] - loss["scratch"]  # paired by seed: same batches, same evaluation rows
        se = difference.std(ddof=1) / math.sqrt(len(difference)) if len(difference) > 1 else math.nan
        tolerance = max(normal_quantile(level) * np.nan_to_num(se), 0.01 * loss["scratch"].mean())
        means = ", ".join(f"{arm} {loss[arm].mean():.4f}" for arm in ARMS if arm in loss.columns)
        claims.append({"paper": "P3", "claim": f"grown networks match networks trained from scratch ({family}/{dataset} "
                                               f"width {width})",
                       "paper_value": "match or beat",
                       "this_run": f"grown − scratch held-out loss {difference.mean():+.4f} (SE {se:.3g}, "
                                   f"{len(difference)} seeds)",
                       "holds": bool(difference.mean() <= tolerance),
                       "note": f"mean final held-out loss: {means}. Same final architecture and budget; holds = grown "
                               f"exceeds scratch by at most max(z·SE over seeds, 1 % of scratch's loss) = {tolerance:.3g}."})
    return claims


def depth_claims(depth_table: pd.DataFrame, growth_table: pd.DataFrame, level: float = 0.95) -> list[dict[str, Any]]:
    """The two P3 claims checked against this run (keys paper, claim, paper_value, this_run, holds, note)."""
    return _depth_claim(depth_table, level) + _growth_claim(growth_table, level)
