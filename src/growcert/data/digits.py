"""scikit-learn's handwritten digits (UCI optdigits test set): 1797 images, 8x8, one channel.

The embedded image dataset of the default pipeline: it ships inside
scikit-learn, so it needs no download. Pixel values are counts 0..16 (each 8x8
pixel sums a 4x4 block of the 32x32 bitmap) and are stored as uint8 unchanged.
There is no official train/test split, so one is drawn here: a seeded
permutation, stratified by class by default so every digit keeps its share in
both splits (with ~54 test images per class the unstratified draw would
wander by several images per class between seeds).
"""

from __future__ import annotations

import importlib.resources
from typing import Any

import numpy as np

from growcert.data.common import (
    BuiltDataset,
    DatasetError,
    Setting,
    bytes_sha256,
    held_out_count,
    image_arrays,
    sha256_file,
    split_rng,
    stratified_pick,
)

SETTINGS = {
    "test_fraction": Setting(0.3, "fraction", "share of the 1797 images held out for test"),
    "seed": Setting(0, "seed", "seed of the train/test permutation"),
    "stratify": Setting(True, "bool", "draw the test split per class in proportion to class size"),
}

# sklearn reads the data from this file; hashing it records exactly what was loaded.
_DATA_PACKAGE, _DATA_FILE = "sklearn.datasets.data", "digits.csv.gz"


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray, dict[str, Any], str]:
    """Images (n, 1, 8, 8) uint8, labels int64, source record and sha256 of the raw data."""
    try:
        import sklearn
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise DatasetError(
            "dataset 'digits': scikit-learn is not installed; install the pinned requirements "
            "(pip install -r requirements.txt)"
        ) from exc
    bunch = load_digits()
    pixels = np.asarray(bunch.images)
    # The values are integral counts; anything else means a changed loader and would be
    # silently truncated by the uint8 cast.
    if pixels.min() < 0 or pixels.max() > 16 or not np.array_equal(pixels, np.round(pixels)):
        raise DatasetError(
            f"dataset 'digits': scikit-learn {sklearn.__version__} returned pixels outside the "
            "integers 0..16; pin scikit-learn as in requirements.txt"
        )
    images = pixels.astype(np.uint8)[:, None, :, :]
    labels = np.asarray(bunch.target, dtype=np.int64)

    source: dict[str, Any] = {
        "package": "scikit-learn",
        "version": sklearn.__version__,
        "loader": "sklearn.datasets.load_digits",
    }
    data_file = importlib.resources.files(_DATA_PACKAGE).joinpath(_DATA_FILE)
    try:
        source["path"] = str(data_file)
        digest = sha256_file(data_file)  # type: ignore[arg-type]
    except (OSError, TypeError):
        # A zipped or relocated install: fall back to hashing what the loader returned.
        source.pop("path")
        digest = bytes_sha256(images.tobytes() + labels.tobytes())
    return images, labels, source, digest


def build(settings: dict[str, Any]) -> BuiltDataset:
    images, labels, source, digest = load_digits_arrays()
    n = labels.shape[0]
    n_test = held_out_count(n, settings["test_fraction"])
    rng = split_rng(settings["seed"], 0)
    if settings["stratify"]:
        test_index = stratified_pick(labels, n_test, rng)
    else:
        test_index = np.sort(rng.permutation(n)[:n_test]).astype(np.int64)
    in_test = np.zeros(n, dtype=bool)
    in_test[test_index] = True
    train_index = np.flatnonzero(~in_test).astype(np.int64)

    arrays = image_arrays((images, labels), (images, labels), train_index, test_index)
    info = {
        "kind": "image",
        "shape": [1, 8, 8],
        "num_classes": 10,
        "class_names": [str(digit) for digit in range(10)],
        "pixel_range": [0, 16],
        "source": source,
        "sha256": digest,
        "split": {
            "method": "stratified_permutation" if settings["stratify"] else "permutation",
            "test_fraction": settings["test_fraction"],
            "seed": settings["seed"],
            "index": "row in sklearn.datasets.load_digits(); train and test partition 0..n-1",
        },
    }
    return BuiltDataset(arrays=arrays, info=info)
