"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009): 32x32 colour images, read from the "python version".

Both datasets ship as pickled dicts written by Python 2 (cifar-10-batches-py/
data_batch_1..5, test_batch, batches.meta; cifar-100-python/train, test,
meta). Each batch holds `data`, a uint8 array with one 3072-byte row per
image (1024 red, then 1024 green, then 1024 blue values, each a row-major
32x32 plane, so a plain reshape to (3, 32, 32) is CHW), and the labels
(`labels`, or `fine_labels` for CIFAR-100's 100 classes).

This module reads those files itself: with encoding="latin1" (the way to load
Python 2 numpy pickles) and keys accepted as str or bytes, through an
unpickler that only resolves the few numpy globals an array needs, so a
foreign pickle under `root` cannot run code. torchvision is used only to
download the archive when `allow_download: true`; its md5 checks play no part
in reading, so tests run on small hand-written files in the same format.
The official train/test split is kept; `limit_train`/`limit_test` take
seeded, class-stratified subsets.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from growcert.data.common import (
    OFFICIAL_SPLIT_SETTINGS,
    BuiltDataset,
    DatasetError,
    Setting,
    download_with_torchvision,
    files_source,
    image_arrays,
    limited_splits,
    official_split_info,
)

SETTINGS = {
    "root": Setting(
        "data/raw", "path", "folder holding the extracted python version (cifar-10-batches-py/ or cifar-100-python/)"
    ),
    **OFFICIAL_SPLIT_SETTINGS,
}


@dataclass(frozen=True)
class CifarLayout:
    """Where one CIFAR variant keeps its files and labels."""

    title: str
    folder: str
    train_files: tuple[str, ...]
    test_file: str
    meta_file: str
    label_key: str
    names_key: str
    num_classes: int
    torchvision_class: str


LAYOUTS = {
    "cifar10": CifarLayout(
        "CIFAR-10",
        "cifar-10-batches-py",
        tuple(f"data_batch_{i}" for i in range(1, 6)),
        "test_batch",
        "batches.meta",
        "labels",
        "label_names",
        10,
        "CIFAR10",
    ),
    "cifar100": CifarLayout(
        "CIFAR-100", "cifar-100-python", ("train",), "test", "meta", "fine_labels", "fine_label_names", 100, "CIFAR100"
    ),
}

PIXELS_PER_IMAGE = 3 * 32 * 32


class _ArrayOnlyUnpickler(pickle.Unpickler):
    """Resolves only what a pickled numpy array (or Python 3 bytes) needs; anything else is refused."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # how protocol-2 pickles written by Python 3 store bytes
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")
        return super().find_class(module, name)


def _unpickle(dataset: str, path: Path) -> dict[str, Any]:
    """One CIFAR pickle as a dict with str keys (real files give str keys, re-pickled ones bytes)."""
    try:
        with open(path, "rb") as handle:
            entry = _ArrayOnlyUnpickler(handle, encoding="latin1").load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError) as exc:
        raise DatasetError(
            f"dataset '{dataset}': cannot read CIFAR pickle {path} ({type(exc).__name__}: {exc}); "
            f"replace it with the file from the official python version"
        ) from exc
    if not isinstance(entry, dict):
        raise DatasetError(f"dataset '{dataset}': {path} holds a {type(entry).__name__}, not a CIFAR dict")
    return {(key.decode("latin1") if isinstance(key, bytes) else key): value for key, value in entry.items()}


def _require(dataset: str, path: Path, entry: dict[str, Any], key: str) -> Any:
    if key not in entry:
        raise DatasetError(
            f"dataset '{dataset}': {path} has no '{key}' entry (keys: {', '.join(sorted(map(str, entry)))}); "
            f"is it a file of the other CIFAR variant?"
        )
    return entry[key]


def read_batch(dataset: str, path: Path, layout: CifarLayout) -> tuple[np.ndarray, np.ndarray]:
    """Images (n, 3, 32, 32) uint8 and labels (n,) int64 from one batch file."""
    entry = _unpickle(dataset, path)
    data = np.asarray(_require(dataset, path, entry, "data"))
    try:
        labels = np.asarray(_require(dataset, path, entry, layout.label_key), dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"dataset '{dataset}': {path} '{layout.label_key}' is not a list of integers") from exc
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != PIXELS_PER_IMAGE:
        raise DatasetError(f"dataset '{dataset}': {path} 'data' is {data.dtype} {data.shape}, expected uint8 (n, 3072)")
    in_range = labels.min(initial=0) >= 0 and labels.max(initial=0) < layout.num_classes
    if labels.shape != (data.shape[0],) or not in_range:
        raise DatasetError(
            f"dataset '{dataset}': {path} '{layout.label_key}' is not one label 0..{layout.num_classes - 1} per image"
        )
    # Rows are R-plane, G-plane, B-plane, each 32x32 row-major: exactly C, H, W order.
    return data.reshape(-1, 3, 32, 32), labels


def _class_names(dataset: str, path: Path, layout: CifarLayout) -> list[str]:
    names = _require(dataset, path, _unpickle(dataset, path), layout.names_key)
    names = [name.decode("latin1") if isinstance(name, bytes) else str(name) for name in names]
    if len(names) != layout.num_classes:
        raise DatasetError(
            f"dataset '{dataset}': {path} lists {len(names)} class names, {layout.title} has {layout.num_classes}"
        )
    return names


def find_folder(root: Path, layout: CifarLayout) -> Path | None:
    """root/<folder> (the extracted archive), or root itself if it already is that folder."""
    for folder in (root / layout.folder, root):
        if (folder / layout.train_files[0]).is_file():
            return folder
    return None


def _locate(dataset: str, layout: CifarLayout, settings: dict[str, Any]) -> tuple[Path, bool]:
    root = Path(settings["root"]).expanduser().resolve()
    folder = find_folder(root, layout)
    if folder is not None:
        return folder, False
    if not settings["allow_download"]:
        raise DatasetError(
            f"dataset '{dataset}': no {layout.title} files under {root} (looked for "
            f"{layout.folder}/{layout.train_files[0]}); set datasets.{dataset}.root to a folder holding "
            f"the extracted python version, or datasets.{dataset}.allow_download: true"
        )
    download_with_torchvision(dataset, layout.torchvision_class, root)
    folder = find_folder(root, layout)
    if folder is None:
        raise DatasetError(f"dataset '{dataset}': download into {root} left no {layout.folder}/; inspect {root}")
    return folder, True


def build(dataset: str, settings: dict[str, Any]) -> BuiltDataset:
    layout = LAYOUTS[dataset]
    folder, downloaded = _locate(dataset, layout, settings)
    paths = [folder / name for name in (*layout.train_files, layout.test_file, layout.meta_file)]
    missing = [path for path in paths if not path.is_file()]
    if missing:
        raise DatasetError(
            f"dataset '{dataset}': {missing[0]} is missing; {folder} must hold the complete python version"
        )

    batches = [read_batch(dataset, folder / name, layout) for name in layout.train_files]
    # Train rows are numbered across batches in file order: batch k, row r -> (k-1)*len + r.
    train_images = np.concatenate([images for images, _ in batches])
    train_labels = np.concatenate([labels for _, labels in batches])
    test_images, test_labels = read_batch(dataset, folder / layout.test_file, layout)
    class_names = _class_names(dataset, folder / layout.meta_file, layout)

    train_index, test_index = limited_splits(train_labels, test_labels, settings)
    arrays = image_arrays((train_images, train_labels), (test_images, test_labels), train_index, test_index)
    info = {
        "kind": "image",
        "shape": [3, 32, 32],
        "num_classes": layout.num_classes,
        "class_names": class_names,
        "label_key": layout.label_key,
        "pixel_range": [0, 255],
        **files_source(folder, paths, downloaded),
        "split": official_split_info(
            train_labels,
            test_labels,
            settings,
            f"row in the official train set ({', '.join(layout.train_files)} in order) or in {layout.test_file}",
        ),
    }
    return BuiltDataset(arrays=arrays, info=info)
