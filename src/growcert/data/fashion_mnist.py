"""Fashion-MNIST (Xiao, Rasul & Vollgraf 2017): 70 000 grey 28x28 images of 10 clothing classes.

Read from the four IDX files of the official release with this module's own
IDX reader (gzip or plain; big-endian header: two zero bytes, a type code, the
number of dimensions, then one uint32 size per dimension). Where the files
come from, in order:
- `root` (default: the folder of Debian's `dataset-fashion-mnist` package,
  /usr/share/datasets/fashion-mnist), files directly in it or in the
  `FashionMNIST/raw/` folder torchvision downloads into;
- only with `allow_download: true`: torchvision.datasets.FashionMNIST downloads
  them into `root`.
The official 60 000 / 10 000 train/test split is kept; `limit_train` and
`limit_test` take seeded, class-stratified subsets for small runs.
"""

from __future__ import annotations

import gzip
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

DEBIAN_ROOT = "/usr/share/datasets/fashion-mnist"
SETTINGS = {
    "root": Setting(DEBIAN_ROOT, "path", "folder holding the four IDX files (.gz or plain)"),
    **OFFICIAL_SPLIT_SETTINGS,
}
FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]

# IDX type codes -> big-endian numpy dtypes (the format's own table).
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_GZIP_MAGIC = b"\x1f\x8b"


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (gzip-compressed or not, detected by content) into a native-order array."""
    try:
        raw = path.read_bytes()
        if raw[:2] == _GZIP_MAGIC:
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise DatasetError(f"dataset 'fashion_mnist': cannot read IDX file {path} ({exc})") from exc
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DatasetError(f"dataset 'fashion_mnist': {path} is not an IDX file (bad magic number)")
    ndim = raw[3]
    header_end = 4 + 4 * ndim
    if len(raw) < header_end:
        raise DatasetError(f"dataset 'fashion_mnist': {path} is truncated inside its header")
    dims = tuple(int(size) for size in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header_end != expected:
        raise DatasetError(
            f"dataset 'fashion_mnist': {path} holds {len(raw) - header_end} data bytes, its header "
            f"{list(dims)} needs {expected}; the file is truncated or corrupt, replace it"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header_end).reshape(dims)
    return data.astype(dtype.newbyteorder("="))


def find_files(root: Path) -> dict[str, Path] | None:
    """The four files in root or root/FashionMNIST/raw (torchvision's layout); .gz preferred."""
    for folder in (root, root / "FashionMNIST" / "raw"):
        found = {}
        for role, stem in FILES.items():
            candidates = [folder / f"{stem}.gz", folder / stem]
            found[role] = next((path for path in candidates if path.is_file()), None)
        if all(found.values()):
            return found  # type: ignore[return-value]
    return None


def _locate(settings: dict[str, Any]) -> tuple[dict[str, Path], bool]:
    root = Path(settings["root"]).expanduser().resolve()
    files = find_files(root)
    if files is not None:
        return files, False
    if not settings["allow_download"]:
        raise DatasetError(
            f"dataset 'fashion_mnist': no Fashion-MNIST files under {root} (looked for "
            f"{FILES['train_images']}.gz and FashionMNIST/raw/); set datasets.fashion_mnist.root "
            f"to a folder holding the four IDX files (Debian: apt-get install dataset-fashion-mnist "
            f"puts them in {DEBIAN_ROOT}), or datasets.fashion_mnist.allow_download: true"
        )
    download_with_torchvision("fashion_mnist", "FashionMNIST", root)
    files = find_files(root)
    if files is None:
        raise DatasetError(f"dataset 'fashion_mnist': download into {root} left no IDX files; inspect {root}")
    return files, True


def _split(files: dict[str, Path], prefix: str) -> tuple[np.ndarray, np.ndarray]:
    images = read_idx(files[f"{prefix}_images"])
    labels = read_idx(files[f"{prefix}_labels"])
    if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise DatasetError(
            f"dataset 'fashion_mnist': {files[f'{prefix}_images']} holds {images.dtype} images of "
            f"shape {images.shape}, expected uint8 (n, 28, 28)"
        )
    if labels.shape != (images.shape[0],) or labels.size == 0 or labels.min() < 0 or labels.max() > 9:
        raise DatasetError(
            f"dataset 'fashion_mnist': {files[f'{prefix}_labels']} does not hold one label 0..9 "
            f"per image of {files[f'{prefix}_images']}"
        )
    return images[:, None, :, :], labels.astype(np.int64)


def build(settings: dict[str, Any]) -> BuiltDataset:
    files, downloaded = _locate(settings)
    train_images, train_labels = _split(files, "train")
    test_images, test_labels = _split(files, "test")
    train_index, test_index = limited_splits(train_labels, test_labels, settings)

    arrays = image_arrays((train_images, train_labels), (test_images, test_labels), train_index, test_index)
    info = {
        "kind": "image",
        "shape": [1, 28, 28],
        "num_classes": 10,
        "class_names": CLASS_NAMES,
        "pixel_range": [0, 255],
        **files_source(files["train_images"].parent, list(files.values()), downloaded),
        "split": official_split_info(
            train_labels, test_labels, settings, "row in the official train (train-*) or test (t10k-*) file"
        ),
    }
    return BuiltDataset(arrays=arrays, info=info)
