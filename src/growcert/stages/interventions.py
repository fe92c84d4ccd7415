"""Direct residual interventions: predicted vs observed held-out loss change (P1; docs/science.md,
"intervene (P1, direct residual interventions)").

Implements P1's "direct residual interventions": insert a zero-initialised residual module at an
insertion point of a trained checkpoint (function unchanged), step its weight along the *train*
direction, and compare the real change of the mean held-out loss, measured by forward passes,
with the first-order prediction from the gradient store. Variants (`models/residual.py`):

    shared        a vector added at every position, like a bias      gradient Σ_pos q  (sum_positions)
    per_position  a tensor of z's shape                               gradient q        (flatten)
    block         r(z) = W_out φ(W_in u(z)), W_out = 0, W_in fixed    gradient Σ_pos q hᵀ (P3)

With D_M and D_K the mean weight gradients over M training and K held-out stored examples, the
step is W = −ε·u·D_M/‖D_M‖ and the prediction ΔL_K ≈ −ε·u·⟨D_M, D_K⟩/‖D_M‖. ε is *relative*:
u = (RMS stream norm at the point) / (RMS norm of the feature the weight multiplies), where the
stream norm is per position (shared, block) or of the whole tensor (per_position) and the feature
is 1 for the parameter variants and h = φ(W_in u(z)) for the block. So ε bounds the size of the
added output relative to the stream it joins, which keeps ε comparable across points whose
‖z‖ differs by 30× (P3 pilot). Everything predicted comes from the store (q, z); only the
observed change needs the network, run in float64 so that changes of 1e-7 nats are resolved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import xarray as xr
from torch import nn

from growcert.config import stage_settings
from growcert.data import PreparedDataset
from growcert.data.batches import Examples, dump_examples, examples_at
from growcert.errors import ConfigError, StoreError
from growcert.models import family_of
from growcert.models.blocks import make_block
from growcert.models.checkpoint import load_model
from growcert.models.residual import ResidualParameter
from growcert.runtime import capped_batch_size, device_record, torch_runtime
from growcert.stats import reduce_examples
from growcert.store import open_group, reading, require_variable, split_of, store_attrs
from growcert.training import to_device

VARIANTS = ("shared", "per_position", "block")
REDUCTION = {"shared": "sum_positions", "per_position": "flatten", "block": "block_features"}
COLUMNS = [
    "family",
    "dataset",
    "width",
    "depth",
    "seed",
    "step",
    "point",
    "variant",
    "draw",
    "M",
    "K",
    "epsilon",
    "predicted",
    "observed",
    "ratio",
    "sign_agree",
    "reduction",
    "alignment",
    "step_length",
    "base_loss",
]


def spaced_points(groups: list[str], count: int) -> list[str]:
    """`count` insertion points evenly spaced from the first group to the last (config intervene.max_points)."""
    positions = np.unique(np.round(np.linspace(0, len(groups) - 1, min(count, len(groups)))).astype(int))
    return [groups[i] for i in positions]


def disjoint_draws(split: np.ndarray, M: int, K: int, draws: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`draws` pairs (train rows, test rows) of store samples, pairwise disjoint across draws, sorted."""
    train, test = np.flatnonzero(split == "train"), np.flatnonzero(split == "test")
    for name, size, rows in (("M", M, train), ("K", K, test)):
        if draws * size > len(rows):
            raise ConfigError(
                f"config key 'intervene.draws': draws × {name} = {draws} × {size} exceeds the {len(rows)} "
                f"{'train' if name == 'M' else 'test'} rows of the store; lower them or dump more examples"
            )
    rng = np.random.default_rng(seed)
    train, test = rng.permutation(train), rng.permutation(test)
    return [(np.sort(train[d * M : (d + 1) * M]), np.sort(test[d * K : (d + 1) * K])) for d in range(draws)]


@dataclass
class Intervention:
    """An inserted module and the stored gradients of its weight that predict its effect."""

    point: str
    variant: str
    module: nn.Module
    train_gradient: torch.Tensor  # D_M: mean ∂ℓ/∂weight over the M training examples (float64)
    test_gradient: torch.Tensor  # D_K: the same over the K held-out examples
    unit: float  # ‖step‖ per unit ε (see the module docstring)

    @property
    def alignment(self) -> float:
        return float((self.train_gradient * self.test_gradient).sum())

    def step(self, epsilon: float) -> torch.Tensor:
        return -epsilon * self.unit * self.train_gradient / self.train_gradient.norm()

    def predicted(self, epsilon: float) -> float:
        return -epsilon * self.unit * self.alignment / float(self.train_gradient.norm())


def _stored(group: xr.Dataset, variable: str, rows: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(group[variable].isel(sample=rows).values, dtype=np.float64))


def prepare_intervention(
    group: xr.Dataset,
    family: str,
    point: str,
    variant: str,
    train_rows: np.ndarray,
    test_rows: np.ndarray,
    settings: dict[str, Any],
    dtype: torch.dtype = torch.float64,
) -> Intervention:
    """Build the zero-weight module of `variant` for `point` and its D_M, D_K, unit from the store."""
    channel_dim = family_of(family).channel_dim
    z_train = _stored(group, "z", train_rows)
    features = z_train.shape[channel_dim]
    positions = z_train[0].numel() // features
    # RMS norm of the stream per position over the M training examples (the scale a step joins).
    stream_rms = float((z_train.square().sum() / (len(train_rows) * positions)).sqrt())
    if variant in ("shared", "per_position"):
        how = REDUCTION[variant]
        mean = {
            name: np.asarray(reduce_examples(group["q"].isel(sample=rows), how).values, np.float64).mean(axis=0)
            for name, rows in (("train", train_rows), ("test", test_rows))
        }
        shape = (
            tuple(z_train.shape[1:])
            if variant == "per_position"
            else ((features, 1, 1) if channel_dim == -3 else (features,))
        )
        module = ResidualParameter(shape, dtype=dtype)
        unit = stream_rms * (np.sqrt(positions) if variant == "per_position" else 1.0)
        train_gradient, test_gradient = (torch.from_numpy(mean[name]).reshape(shape) for name in ("train", "test"))
    else:
        # The P3 block itself (models/blocks.py), built in float64 so the store side (D_M, D_K, u) is
        # computed at full precision, then cast.
        module = make_block(
            family, features, point, hidden=settings["block_hidden"], seed=settings["seed"], dtype=torch.float64
        )
        train_gradient = module.weight_gradient(z_train, _stored(group, "q", train_rows))
        test_gradient = module.weight_gradient(_stored(group, "z", test_rows), _stored(group, "q", test_rows))
        feature_rms = float((module.hidden(z_train).square().sum() / (len(train_rows) * positions)).sqrt())
        module = module.to(dtype)
        unit = stream_rms / feature_rms
    return Intervention(point, variant, module, train_gradient.detach(), test_gradient.detach(), unit)


@contextmanager
def inserted(model: nn.Module, point: str, module: nn.Module) -> Iterator[nn.Module]:
    """Append `module` to the point's residual list for the duration of the block, then remove it."""
    slot = model.points[point].inserted
    slot.append(module)
    try:
        yield module
    finally:
        del slot[len(slot) - 1]


@torch.no_grad()
def example_losses(model: nn.Module, examples: Examples, batch_size: int = 256) -> torch.Tensor:
    """Per-example losses (float64, on the CPU) in the model's dtype, computed on the model's device; the
    model must be in eval mode."""
    reference = next(model.parameters())
    parts = []
    for inputs, targets in examples.batches(batch_size):
        inputs = inputs.to(reference.dtype) if inputs.is_floating_point() else inputs
        inputs, targets = to_device(inputs, reference.device), to_device(targets, reference.device)
        parts.append(model.per_example_loss(model(inputs), targets).double())
    return torch.cat(parts).cpu()


def stored_examples(data: PreparedDataset, meta: dict[str, Any], group: xr.Dataset, rows: np.ndarray) -> Examples:
    """Inputs and targets of store samples `rows`, rebuilt from the prepared dataset by their `index`.

    `index` is the image row, or the byte offset of a text window (window number × context), in
    the sample's split, exactly as `dump_examples` recorded it.
    """
    context = meta["model_options"].get("context") if data.info["kind"] == "text" else None
    split, index = split_of(group)[rows], np.asarray(group["index"].values)[rows]
    if len(set(split)) != 1:
        raise ValueError("stored_examples: rows must come from one split")  # a programming error, not the user's
    positions = index // context if context else index
    examples = examples_at(data, split[0], positions, context)
    examples.index = index
    return examples


def check_pairing(
    checkpoint: str | Path, store: str | Path, meta: dict[str, Any], attrs: dict[str, Any], data: PreparedDataset
) -> None:
    """Refuse a store that was not dumped from this checkpoint and this prepared dataset."""
    for key in ("family", "width", "depth", "step"):
        if attrs.get(key) != meta[key]:
            raise StoreError(
                f"store {store} has {key}={attrs.get(key)!r} but checkpoint {checkpoint} has {meta[key]!r}"
            )
    if attrs.get("dataset") != data.name or attrs.get("data_sha256") != data.info.get("sha256"):
        raise StoreError(
            f"store {store} was dumped from dataset {attrs.get('dataset')!r} "
            f"(sha256 {attrs.get('data_sha256')}), not from the given {data.name!r}"
        )
    dump_settings = (attrs.get("provenance") or {}).get("settings") or {}
    if {"train_examples", "test_examples", "seed"} <= set(dump_settings):
        # Re-derive the dump's examples: the stored index must be exactly what dump chose.
        context = meta["model_options"].get("context") if data.info["kind"] == "text" else None
        expected, _ = dump_examples(data, dump_settings, context)
        stored = np.asarray(open_group(store, attrs["groups"][0])["index"].values)
        if not np.array_equal(expected.index, stored):
            raise StoreError(f"store {store}: its sample index is not what its dump settings select from {data.name}")


def run_interventions(
    checkpoint: str | Path,
    store: str | Path,
    data: PreparedDataset,
    settings: dict[str, Any] | None = None,
    log: Callable[[str], None] = print,
    hf: dict[str, Any] | None = None,
    threads: int = 1,
    *,
    device: str,
) -> pd.DataFrame:
    """Predicted vs observed held-out loss change for every point × variant × draw × ε (tidy table).

    With `hf` settings, `checkpoint` is a pretrained Hugging Face causal LM (`models.checkpoint.load_model`).
    Points: `max_points` of the store's groups, evenly spaced from block0 to the last. The forward passes
    run on `device` (a `device` setting) in float64 there too; the predictions come from the store on the CPU.
    """
    settings = stage_settings("intervene", settings)
    with torch_runtime(threads, device=device) as runtime, reading(store):
        return _run_interventions(checkpoint, store, data, settings, log, hf, runtime.device)


def forward_batch_size(store, settings: dict[str, Any]) -> int:
    """intervene.batch_size, lowered by intervene.max_batch_mb to the float64 stream one batch holds at the
    store's insertion points (`runtime.capped_batch_size`)."""
    groups = store_attrs(store)["groups"]
    stream = sum(int(np.prod(open_group(store, name)["z"].shape[1:])) for name in groups)
    return capped_batch_size(settings["batch_size"], 8 * stream, settings["max_batch_mb"])


def _run_interventions(checkpoint, store, data, settings, log, hf, device: torch.device) -> pd.DataFrame:
    model, meta, data = load_model(checkpoint, data, hf)
    attrs = store_attrs(store)
    require_variable(store, "z", "intervene (the inserted block's weight gradient reads the activations)")
    check_pairing(checkpoint, store, meta, attrs, data)
    dtype = torch.float64  # observed changes of 1e-7 nats must be resolved
    model = model.to(device=device, dtype=dtype).eval()
    points = spaced_points(list(attrs["groups"]), settings["max_points"])
    first = open_group(store, points[0])
    draws = disjoint_draws(split_of(first), settings["M"], settings["K"], settings["draws"], settings["seed"])
    batch_size = forward_batch_size(store, settings)
    log(
        f"intervening at {points} of {checkpoint} on {device_record(device)['device']}: forward batches of "
        f"{batch_size} (intervene.batch_size {settings['batch_size']}, max_batch_mb {settings['max_batch_mb']})"
    )

    held_out, base = [], []
    for _, test_rows in draws:
        examples = stored_examples(data, meta, first, test_rows)
        losses = example_losses(model, examples, batch_size)
        stored = np.asarray(first["loss"].isel(sample=test_rows).values, np.float64)
        # The stored losses came from the float32 dump of this checkpoint: a mismatch means the
        # store, the checkpoint or the rebuilt examples do not belong together.
        if not np.allclose(losses.numpy(), stored, rtol=1e-3, atol=1e-5):
            raise StoreError(
                f"store {store}: recomputed held-out losses differ from the stored ones by up to "
                f"{np.abs(losses.numpy() - stored).max():.3g}; it was not dumped from {checkpoint}"
            )
        held_out.append(examples)
        base.append(float(losses.mean()))

    identity = {key: attrs[key] for key in ("family", "dataset", "width", "depth", "seed", "step")}
    rows = []
    for point in points:
        group = open_group(store, point)
        for variant in settings["variants"]:
            for draw, (train_rows, test_rows) in enumerate(draws):
                intervention = prepare_intervention(
                    group, attrs["family"], point, variant, train_rows, test_rows, settings, dtype=dtype
                )
                with inserted(model, point, intervention.module.to(device)) as module:
                    for epsilon in map(float, settings["epsilons"]):
                        with torch.no_grad():
                            module.weight.copy_(intervention.step(epsilon))
                        observed = float(example_losses(model, held_out[draw], batch_size).mean()) - base[draw]
                        predicted = intervention.predicted(epsilon)
                        rows.append(
                            {
                                **identity,
                                "point": point,
                                "variant": variant,
                                "draw": draw,
                                "M": len(train_rows),
                                "K": len(test_rows),
                                "epsilon": epsilon,
                                "predicted": predicted,
                                "observed": observed,
                                "ratio": observed / predicted if predicted else np.nan,
                                "sign_agree": bool(np.sign(observed) == np.sign(predicted) != 0),
                                "reduction": REDUCTION[variant],
                                "alignment": intervention.alignment,
                                "step_length": epsilon * intervention.unit,
                                "base_loss": base[draw],
                            }
                        )
        done = pd.DataFrame(rows[-len(settings["variants"]) * len(draws) * len(settings["epsilons"]) :])
        smallest = done[done.epsilon == done.epsilon.min()]
        log(
            f"{point}: median observed/predicted at ε={smallest.epsilon.iloc[0]:g}: "
            + ", ".join(f"{v} {g.ratio.median():.4f}" for v, g in smallest.groupby("variant", sort=False))
        )
    return pd.DataFrame(rows, columns=COLUMNS)
