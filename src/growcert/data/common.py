"""Shared pieces of the dataset layer: the error type, settings validation,
content hashing and seeded, stratified index selection.

Every dataset module declares its settings as a dict of `Setting`s; they are
validated here so that each wrong key, type or range gives the same kind of
one-line message naming the config key (`datasets.<name>.<key>`), as the rest
of the pipeline does for bad config (growcert.config).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from growcert.errors import DatasetError  # noqa: F401  (re-exported: raised throughout data/)


@dataclass(frozen=True)
class Setting:
    """One optional setting of a dataset: its default and what values are allowed.

    kind is one of: "fraction" (float in (0, 1)), "seed" (int >= 0),
    "positive_int", "optional_positive_int" (positive int or None), "bool",
    "path" (str or Path), "string" (a non-empty str), "choice" (one of `choices`).
    """

    default: Any
    kind: str
    help: str
    choices: tuple = ()


@dataclass
class BuiltDataset:
    """What a dataset module hands back to `prepare_dataset` before stats and writing.

    arrays: the six stored arrays (raw uint8 pixels or bytes; None for text labels).
    info: the dataset-specific part of info.json (kind, shape or vocab, source, sha256, split).
    files: arrays already written as .npy files (a streamed corpus): name -> temporary path in the output
        folder; `write_prepared` moves them into place as `<name>.npy`, memory-mapped on load.
    """

    arrays: dict[str, np.ndarray | None]
    info: dict[str, Any]
    files: dict[str, Path] = field(default_factory=dict)


def _is_int(value: Any) -> bool:
    # bool is an int subclass in Python; `seed: true` in YAML is a mistake, not a seed.
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check(kind: str, value: Any, choices: tuple) -> tuple[bool, str]:
    """Return (ok, description of what is expected)."""
    if kind == "fraction":
        ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
        return ok and 0.0 < float(value) < 1.0, "a number strictly between 0 and 1"
    if kind == "seed":
        return _is_int(value) and value >= 0, "an integer >= 0"
    if kind == "positive_int":
        return _is_int(value) and value >= 1, "an integer >= 1"
    if kind == "optional_positive_int":
        return value is None or (_is_int(value) and value >= 1), "null (all) or an integer >= 1"
    if kind == "bool":
        return isinstance(value, bool), "true or false"
    if kind == "path":
        return isinstance(value, (str, Path)) and str(value) != "", "a folder path (string)"
    if kind == "string":
        return isinstance(value, str) and value != "", "a non-empty string"
    if kind == "choice":
        return value in choices, "one of " + ", ".join(repr(c) for c in choices)
    raise ValueError(f"unknown setting kind {kind!r}")  # programming error, not user-facing


def resolve_settings(dataset: str, spec: Mapping[str, Setting], settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill defaults and validate; return a plain JSON-serialisable dict in spec order."""
    settings = {} if settings is None else settings
    if not isinstance(settings, Mapping):
        raise DatasetError(
            f"dataset '{dataset}': datasets.{dataset} must be a mapping of settings, got {type(settings).__name__}"
        )
    unknown = sorted(set(settings) - set(spec))
    if unknown:
        raise DatasetError(
            f"dataset '{dataset}': unknown setting datasets.{dataset}.{unknown[0]}; known settings: {', '.join(spec)}"
        )
    resolved: dict[str, Any] = {}
    for key, setting in spec.items():
        value = settings.get(key, setting.default)
        ok, expected = _check(setting.kind, value, setting.choices)
        if not ok:
            raise DatasetError(f"dataset '{dataset}': datasets.{dataset}.{key} must be {expected}, got {value!r}")
        # Normalise numpy scalars and Paths so the settings round-trip through info.json.
        if setting.kind == "path":
            value = str(value)
        elif _is_int(value):
            value = int(value)
        elif setting.kind == "fraction":
            value = float(value)
        resolved[key] = value
    return resolved


def sha256_file(path: Path, block_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(block_size):
            digest.update(block)
    return digest.hexdigest()


def bytes_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def combined_sha256(file_digests: Mapping[str, str]) -> str:
    """One digest for a set of named files: sha256 over sorted 'name sha256' lines.

    Hashing names as well as contents means a renamed or swapped file changes the digest.
    """
    lines = "".join(f"{name} {file_digests[name]}\n" for name in sorted(file_digests))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def split_rng(seed: int, stream: int) -> np.random.Generator:
    """Independent generator per purpose (0: test split/train subset, 1: test subset).

    Separate streams keep, e.g., the test subsample unchanged when only limit_train changes.
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stream)]))


def _allocate(class_sizes: np.ndarray, total: int) -> np.ndarray:
    """Split `total` picks across classes proportionally (largest remainder, ties by class).

    Gives exactly `total` picks and never more than a class holds.
    """
    quota = class_sizes * (total / class_sizes.sum())
    counts = np.floor(quota).astype(np.int64)
    remainder = total - int(counts.sum())
    # Stable sort on the negated fractional part: largest first, lower class id wins ties.
    order = np.argsort(-(quota - counts), kind="stable")
    for cls in order:
        if remainder == 0:
            break
        if counts[cls] < class_sizes[cls]:
            counts[cls] += 1
            remainder -= 1
    return counts


def stratified_pick(labels: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """Pick `total` rows at random, per class in proportion to class size; sorted row numbers.

    Stratifying keeps class balance in small test splits and small subsamples, so a
    limit of 500 CIFAR images does not leave a class nearly empty by chance.
    """
    labels = np.asarray(labels)
    n = labels.shape[0]
    if not 0 <= total <= n:
        raise ValueError(f"cannot pick {total} of {n} rows")
    classes, inverse = np.unique(labels, return_inverse=True)
    class_sizes = np.bincount(inverse, minlength=classes.size)
    counts = _allocate(class_sizes, total)
    picked = []
    for cls in range(classes.size):
        members = np.flatnonzero(inverse == cls)
        picked.append(rng.permutation(members)[: counts[cls]])
    return np.sort(np.concatenate(picked)).astype(np.int64)


def held_out_count(n: int, test_fraction: float) -> int:
    """Number of test items for a fraction: rounded, but at least one on each side."""
    if n < 2:
        raise ValueError("need at least two items to split")
    return min(max(int(math.floor(n * test_fraction + 0.5)), 1), n - 1)


def subsample(labels: np.ndarray, limit: int | None, rng: np.random.Generator) -> np.ndarray:
    """Rows to keep for an optional `limit_*` setting: all rows, or a stratified seeded subset."""
    n = labels.shape[0]
    if limit is None or limit >= n:
        return np.arange(n, dtype=np.int64)
    return stratified_pick(labels, limit, rng)


def limited_splits(
    train_labels: np.ndarray, test_labels: np.ndarray, settings: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Rows kept of a dataset's own train and test splits (settings limit_train, limit_test, seed)."""
    return (
        subsample(train_labels, settings["limit_train"], split_rng(settings["seed"], 0)),
        subsample(test_labels, settings["limit_test"], split_rng(settings["seed"], 1)),
    )


def official_split_info(
    train_labels: np.ndarray, test_labels: np.ndarray, settings: dict[str, Any], index: str
) -> dict[str, Any]:
    """info["split"] of a dataset that keeps its official train/test split, subsampled by `limited_splits`."""
    return {
        "method": "official",
        "n_train_official": int(train_labels.size),
        "n_test_official": int(test_labels.size),
        "limit_train": settings["limit_train"],
        "limit_test": settings["limit_test"],
        "subsample": "class-stratified, seeded (train stream 0, test stream 1)",
        "seed": settings["seed"],
        "index": index,
    }


# The settings of a dataset that keeps its official train/test split, as `limited_splits` and `official_split_info`
# read them; each such module adds its own `root`.
OFFICIAL_SPLIT_SETTINGS = {
    "allow_download": Setting(False, "bool", "download with torchvision into root if files are missing"),
    "limit_train": Setting(None, "optional_positive_int", "keep this many train images (null: all)"),
    "limit_test": Setting(None, "optional_positive_int", "keep this many test images (null: all)"),
    "seed": Setting(0, "seed", "seed of the limit_* subsampling"),
}


def files_source(folder: Path, paths: list[Path], downloaded: bool) -> dict[str, Any]:
    """info["source"] and info["sha256"] of a dataset read from the files `paths` found in `folder` (`downloaded`
    by torchvision or not): each file's name and SHA-256, then their combined digest."""
    digests = {path.name: sha256_file(path) for path in paths}
    return {
        "source": {
            "path": str(folder),
            "downloaded": downloaded,
            "files": [{"name": path.name, "sha256": digests[path.name]} for path in paths],
        },
        "sha256": combined_sha256(digests),
    }


def image_arrays(
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    train_index: np.ndarray,
    test_index: np.ndarray,
) -> dict[str, np.ndarray]:
    """The arrays of a prepared image dataset: the chosen rows of (images, labels) of each split, and the rows."""
    return {
        "train_x": train[0][train_index],
        "train_y": train[1][train_index],
        "test_x": test[0][test_index],
        "test_y": test[1][test_index],
        "train_index": train_index,
        "test_index": test_index,
    }


def channel_stats(images: np.ndarray) -> tuple[list[float], list[float]]:
    """Exact per-channel mean and population std of uint8 images (n, C, H, W).

    Uses a 256-bin histogram per channel instead of float copies: exact, and memory stays
    O(1) even for CIFAR's 150 M train pixels. Population std (ddof=0) makes the normalised
    train split have std exactly 1.
    """
    if images.dtype != np.uint8:
        raise TypeError("channel_stats expects uint8 images")
    values = np.arange(256, dtype=np.float64)
    means, stds = [], []
    for channel in range(images.shape[1]):
        counts = np.bincount(images[:, channel].reshape(-1), minlength=256).astype(np.float64)
        total = counts.sum()
        mean = float((counts * values).sum() / total)
        var = float((counts * (values - mean) ** 2).sum() / total)
        means.append(mean)
        # A constant channel would divide by zero; leave it centred but unscaled.
        stds.append(math.sqrt(var) if var > 0 else 1.0)
    return means, stds


def download_with_torchvision(dataset: str, class_name: str, root: Path) -> None:
    """Fetch a dataset's official archive into `root` with torchvision (only when allowed).

    torchvision is used for the download (mirrors, md5 of the archive) and nothing else;
    reading is this package's own, so tests can use small hand-written files.
    """
    try:
        import torchvision.datasets as tv_datasets
    except ImportError as exc:
        raise DatasetError(
            f"dataset '{dataset}': allow_download needs torchvision, which is not installed; "
            f"install it or set datasets.{dataset}.root to a local copy"
        ) from exc
    try:
        root.mkdir(parents=True, exist_ok=True)
        # train=True fetches the one archive holding both splits (CIFAR) or the train files;
        # Fashion-MNIST's test files come with the same call's download of all resources.
        getattr(tv_datasets, class_name)(str(root), train=True, download=True)
    except Exception as exc:  # network, permissions, checksum: all end the same way for a user
        raise DatasetError(
            f"dataset '{dataset}': download into {root} failed ({type(exc).__name__}: {exc}); "
            f"check network access and that the folder is writable, or set datasets.{dataset}.root "
            f"to a local copy"
        ) from exc
