"""`growcert advise`: with S more steps to spend, should this model train on, or grow, and where? Its inputs,
checked before anything is computed, the work folder it dumps into, and the three stages it runs on them.

`advise(model, data, settings, out, ...)` is the dump of a sample of the model's examples into the work folder,
then `estimate-alignment` and `estimate-depth` on that store (the per-point first-order reading), then the
options' predictions (`option_predictions`: train on, and grow at every point, each a predicted held-out gain over
advise.budget_steps AdamW steps, `stats.update_gain`), then the decision of `growcert.report.advice` (advice.csv,
advice.md, advice.png and its provenance record, artifacts.PROVENANCE, in `out`). It is the one stage made of
other stages: it imports dump, alignment and depth (tests/test_layout.py), and only the command line imports it.

`advice_inputs(model, data, settings, examples, growth_dims)` loads the model (the dump loads it again; a growcert
checkpoint `step*.pt`, or a pretrained Hugging Face causal-LM folder), checks the data against it (a prepared folder of
the kind the family reads, or, for a language model, a plain text file long enough for one context on each
side), checks the proposed growth against the stream's width, and resolves the settings of the three stages
`advise` wires together (dump, alignment, depth: their schema defaults, with the `advise` section's sample,
reduction and context).
Every problem is one line naming the input (`--model`, `--data`, `--growth-dims`) and nothing is written; so is
advise.max_gradient_mb, checked once the dump has drawn its examples (`option_predictions`).

`work_folder(out)` is where the dump's store (and a text file's prepared streams) live while the command runs:
a hidden folder inside `out`, removed when the command ends, succeeded or failed, with `out` itself when
the command created it and left it empty.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from threadpoolctl import threadpool_limits

from growcert.block_features import block_features
from growcert.config import stage_settings
from growcert.data import load_prepared, prepare_dataset
from growcert.data.batches import dump_examples, window_count
from growcert.errors import CheckpointError, ConfigError, DatasetError
from growcert.models import family_of
from growcert.models.blocks import make_block, stream_features
from growcert.models.capture import capture_batch
from growcert.models.checkpoint import load_checkpoint, load_model
from growcert.models.hf import load_pretrained
from growcert.optim.per_example import gradient_rows, model_drawn_targets
from growcert.pipeline.artifacts import ADVICE_PAGE, ADVISE_STORE, HF_CONFIG, INFO
from growcert.provenance import provenance
from growcert.report import advice
from growcert.runtime import torch_runtime
from growcert.stages.alignment import estimate_alignment
from growcert.stages.depth import estimate_depth, point_arrays
from growcert.stages.dump import dump_gradients
from growcert.stats.update_gain import GainParts, gain_parts, local_steps, predicted_gain
from growcert.store import open_group, split_of, store_attrs
from growcert.training import text_context, to_device

WORK = ".advise-work"


@dataclass
class AdviceInputs:
    """What the advise command runs on: the model, its data as the dump reads it, and the stages' settings."""

    model: Path
    data_path: Path
    text_file: bool  # data is a plain text file, prepared into the work folder before the dump
    family: str
    context: int | None  # tokens per example (None for images)
    width: int  # the narrowest stream of the model's insertion points (features)
    hf: (
        dict[str, Any] | None
    )  # settings of a Hugging Face model (stage pretrained_model), None for a growcert checkpoint
    advise: dict[str, Any]
    dump: dict[str, Any]
    alignment: dict[str, Any]
    depth: dict[str, Any]
    M: int
    K: int


def _load(model: Path, hf: dict[str, Any] | None):
    """(model, metadata) through the loader every stage uses; refusals name --model."""
    if hf is None:
        return load_checkpoint(model)
    return load_pretrained(model, hf)


def advice_inputs(
    model: str | Path,
    data: str | Path,
    settings: dict[str, Any],
    examples: int | None = None,
    growth_dims: int | None = None,
    budget_steps: int | None = None,
) -> AdviceInputs:
    """The checked inputs (see the module docstring); `examples`, `growth_dims` and `budget_steps` override the
    settings."""
    advise = stage_settings(
        "advise",
        {
            **settings,
            "model": str(model),
            "data": str(data),
            **({"train_examples": examples, "test_examples": examples} if examples is not None else {}),
            **({"growth_dims": growth_dims} if growth_dims is not None else {}),
            **({"budget_steps": budget_steps} if budget_steps is not None else {}),
        },
    )
    model, data = Path(model), Path(data)
    if not model.exists():
        raise CheckpointError(
            f"--model {model}: no such file or folder (a growcert checkpoint step*.pt, or a "
            f"Hugging Face causal-LM folder with its {HF_CONFIG.name})"
        )
    hf = None
    if model.is_dir():
        hf = stage_settings("pretrained_model", {} if advise["context"] is None else {"context": advise["context"]})
    network, metadata = _load(model, hf)
    family = metadata["family"]
    width = min(stream_features(network, point) for point in network.points)
    del network
    kind = family_of(family).data_kind
    if not data.exists():
        raise DatasetError(
            f"--data {data}: no such file or folder (a prepared dataset folder, or a text file for a language model)"
        )
    text_file = data.is_file()
    if text_file and kind != "text":
        raise DatasetError(
            f"--data {data}: a text file, but the model {model} ({family}) reads {kind}s; give the "
            "prepared dataset folder it was trained on"
        )
    if not text_file:
        info = _prepared_kind(data)
        if info != kind:
            raise DatasetError(
                f"--data {data}: a prepared {info} dataset, but the model {model} ({family}) reads {kind}"
            )
    context = (hf or metadata["model_options"]).get("context") if kind == "text" else None
    if text_file:
        _check_text_length(data, context)
    alignment = stage_settings("alignment", {"reductions": [advise["reduction"]]})
    M, K = alignment["reference_mk"]
    M = advise["growth_dims"] or M
    # The reference (M, K) is the paper's sample sizes and fits any model; a proposed growth must fit the stream.
    if advise["growth_dims"] is not None and M > width:
        raise ConfigError(
            f"--growth-dims {M}: more new directions than the stream's width of {width} features "
            f"in {model} (advise.growth_dims must be at most {width})"
        )
    dump = stage_settings(
        "dump", {key: advise[key] for key in ("train_examples", "test_examples", "batch_size", "max_batch_mb", "seed")}
    )
    depth = stage_settings("depth", {"pools": ["test"]})
    return AdviceInputs(model, data, text_file, family, context, width, hf, advise, dump, alignment, depth, M, K)


def _check_gradient_memory(
    model: Path, parameters: int, train_count: int, held_count: int, advise: dict[str, Any]
) -> None:
    """The predictions hold every parameter's per-example gradient for every dumped example, the held-out ones twice
    (`option_predictions`), in float32: refused above advise.max_gradient_mb. Checked once the dump has drawn its
    examples (a split smaller than the settings' count gives fewer), before any gradient is computed."""
    rows = train_count + 2 * held_count
    megabytes = rows * parameters * 4 / 2**20
    if megabytes > advise["max_gradient_mb"]:
        raise ConfigError(
            f"advise.max_gradient_mb: the predictions need {megabytes:,.0f} MiB of per-example gradients "
            f"({train_count} training and {held_count} held-out examples, the held-out twice, x "
            f"{parameters:,} parameters of {model}), above its {advise['max_gradient_mb']:g}; lower "
            "advise.train_examples and test_examples"
        )


def _prepared_kind(folder: Path) -> str:
    """The kind (image or text) of a prepared dataset folder, from its info.json; one line naming --data otherwise."""
    try:
        return json.loads(INFO.path(folder).read_text())["kind"]
    except (OSError, ValueError, KeyError, TypeError):
        raise DatasetError(
            f"--data {folder}: not a prepared dataset folder (no readable {INFO.name}; prepare it "
            "with `growcert prepare`, or give a text file for a language model)"
        ) from None


def _check_text_length(path: Path, context: int) -> None:
    """A text file must give each side (training, held-out) at least one window of context + 1 tokens; in bytes,
    the most tokens it can hold (a tokenizer's tokens cover at least a byte each), so shorter is refused here."""
    size = path.stat().st_size
    if size < 2 * (context + 1):
        raise DatasetError(
            f"--data {path}: {size} bytes of text, shorter than one context of {context} tokens "
            f"(+1 target) on each of the training and held-out sides ({2 * (context + 1)} bytes at least)"
        )


def prepared_data(inputs: AdviceInputs, work: Path):
    """The data as the dump reads it: the prepared folder, or the text file split into `work`/text (chunks of
    advise.text_chunk_bytes, a quarter of the file when that is smaller, so a short file still splits)."""
    if not inputs.text_file:
        return load_prepared(inputs.data_path)
    size = inputs.data_path.stat().st_size
    settings = {
        "path": str(inputs.data_path),
        "test_fraction": inputs.advise["text_test_fraction"],
        "chunk_bytes": max(1, min(inputs.advise["text_chunk_bytes"], size // 4)),
    }
    try:
        prepare_dataset("text", work / "text", settings)
    except DatasetError as error:
        raise DatasetError(f"--data {inputs.data_path}: {error}") from None
    data = load_prepared(work / "text")
    # The estimators need 4 examples of a pool (stats.moments); tokens can only be fewer than bytes.
    short = [
        split
        for split, stream in (("training", data.train_x), ("held-out", data.test_x))
        if window_count(stream, inputs.context) < 4
    ]
    if short:
        raise DatasetError(
            f"--data {inputs.data_path}: its {short[0]} side holds fewer than 4 contexts of "
            f"{inputs.context} tokens (+1 target), the fewest the estimators take; give more text"
        )
    return data


@contextmanager
def work_folder(out: str | Path) -> Iterator[Path]:
    """A hidden folder inside `out` for the store and prepared text, removed on the way out (see the docstring)."""
    out = Path(out)
    created = not out.exists()
    work = out / WORK
    if work.exists():
        shutil.rmtree(work)  # a killed earlier run's
    work.mkdir(parents=True)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()


def describe(inputs: AdviceInputs, store: Path) -> dict[str, Any]:
    """What advice.md and the provenance record (artifacts.PROVENANCE) say was measured: model, data, sample,
    reduction, (M, K), level."""
    attrs = store_attrs(store)
    return {
        "model": str(inputs.model),
        "data": str(inputs.data_path),
        "family": inputs.family,
        "n_train": int(attrs["n_train"]),
        "n_test": int(attrs["n_test"]),
        "seed": inputs.dump["seed"],
        "reduction": inputs.advise["reduction"],
        "M": inputs.M,
        "K": inputs.K,
        "level": inputs.depth["level"],
        "context": inputs.context,
        "stream_width": inputs.width,
        **{
            key: inputs.advise[key]
            for key in ("budget_steps", "budget_lr", "budget_batch_size", "local_reach", "growth_procedure")
        },
    }


def advise(
    model: str | Path,
    data: str | Path,
    settings: dict[str, Any],
    out: str | Path,
    *,
    examples: int | None = None,
    growth_dims: int | None = None,
    budget_steps: int | None = None,
    threads: int = 1,
    device: str,
    progress=lambda done, total: None,
) -> str:
    """Dump a sample of `model` on `data`, estimate every point, predict every option and decide: writes advice.csv,
    advice.md, advice.png and its provenance record (artifacts.PROVENANCE) into `out`; returns the terminal summary
    (the table and the decision)."""
    inputs = advice_inputs(model, data, settings, examples, growth_dims, budget_steps)
    with work_folder(out) as work:
        table, store = decide(
            inputs, prepared_data(inputs, work), work, threads=threads, device=device, progress=progress
        )
        line = advice.recommendation(table)
        advice.write_advice(out, table, line, describe(inputs, store), provenance(inputs.advise, inputs.dump["seed"]))
    return f"{advice.terminal_table(table)}\n\n{line}\n-> {ADVICE_PAGE.path(out)}"


def decide(inputs: AdviceInputs, data, work: Path, *, threads: int = 1, device: str, progress=lambda done, total: None):
    """(advise's options table, the store it was read from): the dump of `data` (as `prepared_data` gives it) into
    `work`, estimate-alignment and estimate-depth on that store (the per-point first-order reading), every option's
    predicted gain (`option_predictions`), and the rule of `growcert.report.advice`."""
    quiet = lambda _: None  # noqa: E731 (the stages' log, unused here)
    store = dump_gradients(
        inputs.model,
        data,
        ADVISE_STORE.path(work),
        inputs.dump,
        threads=threads,
        log=quiet,
        hf=inputs.hf,
        device=device,
        progress=progress,
    )
    # numpy's BLAS takes every core unless told: the job's threads, as torch's (on this busy 2-core machine the
    # (m, P) × (P, n) product of `gain_parts` took 10-50 s with two BLAS threads and 5 s with one)
    with threadpool_limits(threads):
        points = advice.advice_table(
            estimate_alignment(store, inputs.alignment, log=quiet),
            estimate_depth(store, inputs.depth, log=quiet, threads=threads, device=device),
            inputs.M,
            inputs.K,
            inputs.depth["level"],
            inputs.alignment["detect_threshold"],
        )
        predictions = option_predictions(inputs, data, store, list(points["point"]), threads=threads, device=device)
    return advice.options_table(points, predictions, inputs.advise["local_reach"]), store


def option_predictions(
    inputs: AdviceInputs, data, store: Path, points: list[str], *, threads: int = 1, device: str
) -> pd.DataFrame:
    """One row per option, train on first, then grow at each of `points`: the predicted held-out gain of
    advise.budget_steps AdamW steps (budget_lr, budget_batch_size) with its interval (`stats.update_gain`), and for
    a growth the gain it adds beyond training on (a paired interval: the same examples).

    Train on reads the per-example gradient of every parameter of the model on the very examples the dump stored
    (`dump_examples`, same settings), the model in eval mode as the dump reads it, and the held-out curvature rows:
    the same gradients at labels drawn from the model (`model_drawn_targets`, seeded by the dump's seed). Growing at
    k adds the zero-output block's W_out, whose per-example gradient Σ_t q_t h_tᵀ is the depth stage's, from the
    store (`stages.depth.point_arrays`), and at the drawn labels from q captured at them (`capture_batch`): at
    insertion W_out = 0, so the base parameters' gradients are unchanged and W_in has none (docs/science.md,
    "advise: options with predictions")."""
    budget = inputs.advise
    options = {
        "lr": budget["budget_lr"],
        "steps": budget["budget_steps"],
        "batch_size": budget["budget_batch_size"],
        "groups": budget["jackknife_groups"],
        "level": inputs.depth["level"],
    }
    with torch_runtime(threads, device=device) as runtime, threadpool_limits(threads):  # BLAS: see `decide`
        model, metadata, data = load_model(inputs.model, data, inputs.hf)
        model = model.to(runtime.device).eval()
        examples, split = dump_examples(data, inputs.dump, text_context(data, metadata["model_options"]))
        train = slice(0, int((split == "train").sum()))  # dump_examples puts the training rows first: views
        held_out = slice(train.stop, len(split))
        _check_gradient_memory(
            inputs.model,
            sum(parameter.numel() for parameter in model.parameters()),
            train.stop,
            held_out.stop - held_out.start,
            budget,
        )
        for parameter in model.parameters():
            parameter.requires_grad_(True)  # every parameter trains in the S steps (a pretrained model's too)
        features, targets = (to_device(tensor, runtime.device) for tensor in (examples.inputs, examples.targets))
        held_features = features[held_out]
        drawn = model_drawn_targets(model, held_features, inputs.dump["seed"])
        rows = gradient_rows(model, features, targets)
        base = gain_parts(
            rows[train],
            rows[held_out],
            gradient_rows(model, held_features, drawn),
            options["batch_size"],
            options["groups"],
        )
        del rows
        curvature = _block_curvature_rows(model, held_features, drawn, points, inputs, runtime.device)
        blocks = {}
        for point in points:
            arrays, _ = point_arrays(store, point, inputs.family, inputs.depth, runtime.device)
            stored = split_of(open_group(store, point))
            blocks[point] = gain_parts(
                arrays.g[stored == "train"],
                arrays.g[stored == "test"],
                curvature[point],
                options["batch_size"],
                options["groups"],
            )
    return predictions_table(base, blocks, options, budget["local_reach"])


def predictions_table(
    base: GainParts, blocks: dict[str, GainParts], options: dict[str, Any], local_reach: float
) -> pd.DataFrame:
    """The options' rows from the base model's gain parts and each point's new-block parts (`stats.update_gain`):
    train on, then grow at each point of `blocks` in order, with gain, reach, local_steps and (growths) the gain
    added beyond training on. `options`: predicted_gain's lr, steps, batch_size, groups and level."""
    trained_on = predicted_gain(base, **options)
    table = [
        {
            "option": advice.TRAIN_ON,
            "point": "",
            **_gain_columns(trained_on),
            **_reach_columns(trained_on, options["lr"], local_reach),
        }
    ]
    for point, block in blocks.items():
        grown = base + block
        grown_gain = predicted_gain(grown, **options)
        table.append(
            {
                "option": advice.grow_at(point),
                "point": point,
                **_gain_columns(grown_gain),
                **_reach_columns(grown_gain, options["lr"], local_reach),
                **_gain_columns(predicted_gain(grown, **options, baseline=base), "added"),
            }
        )
    return pd.DataFrame(table)


def _block_curvature_rows(
    model, features, drawn, points: list[str], inputs: AdviceInputs, device
) -> dict[str, np.ndarray]:
    """Per point, the zero-output block's per-example W_out gradients Σ_t q_t h_tᵀ at the drawn labels (m, D·H),
    float32: q captured at those labels, h from the block the depth stage scores (depth's block_hidden and seed)."""
    rows = {point: [] for point in points}
    blocks = {}
    for start in range(0, len(features), inputs.dump["batch_size"]):
        captured = capture_batch(
            model,
            features[start : start + inputs.dump["batch_size"]],
            drawn[start : start + inputs.dump["batch_size"]],
            tuple(points),
        )
        for point in points:
            z = captured.z[point].double()
            if point not in blocks:
                blocks[point] = make_block(
                    inputs.family,
                    z.shape[family_of(inputs.family).channel_dim],
                    point,
                    hidden=inputs.depth["block_hidden"],
                    seed=inputs.depth["seed"],
                    dtype=torch.float64,
                ).to(device)
            gradients, _, _ = block_features(blocks[point], z, captured.q[point].double())
            rows[point].append(gradients.reshape(len(z), -1).float().cpu().numpy())
    return {point: np.concatenate(parts) for point, parts in rows.items()}


def _gain_columns(gain, prefix: str = "gain") -> dict[str, float]:
    """A `stats.update_gain.Gain` as table columns: <prefix>, _se, _lo, _hi, _first_order, _cost."""
    return {
        prefix: gain.estimate,
        f"{prefix}_se": gain.se,
        f"{prefix}_lo": gain.low,
        f"{prefix}_hi": gain.high,
        f"{prefix}_first_order": gain.first_order,
        f"{prefix}_cost": gain.cost,
    }


def _reach_columns(gain, lr: float, bound: float) -> dict[str, float]:
    """The option's reach over the S steps and the most steps whose reach stays within `bound` (local_steps)."""
    return {"reach": gain.reach, "local_steps": local_steps(gain, lr, bound)}
