"""The prepared-dataset format: `arrays.npz` + `info.json` in one directory.

arrays.npz holds the raw data compactly (uint8 pixels or UTF-8 bytes), int64
labels and int64 source indices; info.json holds shape, class count or
vocabulary, split description, provenance (source, sha256 of the raw files),
the settings used and, for images, the per-channel train mean/std that
`load_prepared` normalises with.

Two properties the pipeline relies on:
- determinism: the same settings give a byte-identical arrays.npz. `np.savez`
  stamps each zip member with the current time, so the archive is written here
  member by member with a fixed timestamp (still a plain .npz for `np.load`);
- completeness: both files are written under temporary names and renamed,
  arrays first and info.json last, so info.json doubles as the "complete"
  marker and a killed job never leaves a directory that looks finished.

A streamed corpus (dataset `text`) keeps its two byte streams out of the archive, as plain
`train_x.npy` / `test_x.npy` listed in info.json's `array_files` (size and sha256): `load_prepared`
memory-maps them, so a multi-GB corpus is paged in window by window, never read whole. Their sha256 is
recorded at preparation; loading checks their sizes only (hashing GBs at every job start would cost more
than the job's reads).
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from growcert.data.common import DatasetError, sha256_file
from growcert.pipeline.artifacts import ARRAYS, INFO

FORMAT_VERSION = 1
ARRAY_NAMES = ("train_x", "train_y", "test_x", "test_y", "train_index", "test_index")
# 1980-01-01 is the earliest time a zip member can carry; any constant would do.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass
class PreparedDataset:
    """A prepared dataset as the training and dump stages see it.

    Images: *_x float32 (n, C, H, W) normalised with train mean/std, *_y int64 labels.
    Text: *_x 1-D uint8 byte streams, *_y None (targets are the next bytes).
    *_index int64: source row of each image, or the chunk ids making up each text stream.
    folder: the prepared folder it was read from (None when built in memory); caches derived from it
    (token streams, `data/tokenized.py`) live there.
    chunk_starts: text whose streams are no longer bytes (token streams): {split: offset of each chunk}.
    """

    name: str
    info: dict
    train_x: np.ndarray
    train_y: np.ndarray | None
    test_x: np.ndarray
    test_y: np.ndarray | None
    train_index: np.ndarray
    test_index: np.ndarray
    folder: Path | None = None
    chunk_starts: dict[str, np.ndarray] | None = None

    @property
    def kind(self) -> str:
        return self.info["kind"]

    def segment_starts(self, split: str) -> np.ndarray:
        """Text only: offset in the `split` stream where each chunk begins.

        Chunks that were not neighbours in the corpus meet at these offsets; a sampler
        can use them to keep context windows inside one chunk.
        """
        if self.kind != "text":
            raise DatasetError(f"dataset '{self.name}': segment_starts applies to text datasets only")
        if self.chunk_starts is not None:
            return self.chunk_starts[split]
        chunk_ids = self.train_index if split == "train" else self.test_index
        chunk_bytes = self.info["settings"]["chunk_bytes"]
        corpus_bytes = self.info["corpus_bytes"]
        lengths = np.minimum(chunk_bytes, corpus_bytes - chunk_ids * chunk_bytes)
        return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez equivalent with fixed member timestamps and order (byte-reproducible)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        for name in ARRAY_NAMES:
            if arrays.get(name) is None:
                continue  # text datasets have no labels; absence reads back as None
            member = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_EPOCH)
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = 0o644 << 16
            with archive.open(member, "w", force_zip64=True) as handle:
                np.lib.format.write_array(handle, np.ascontiguousarray(arrays[name]), allow_pickle=False)


def _fsync_replace(tmp: Path, final: Path) -> None:
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, final)


def write_prepared(
    out_dir: str | Path, arrays: dict[str, np.ndarray | None], info: dict, files: dict[str, Path] | None = None
) -> dict:
    """Write arrays.npz and info.json atomically; return info with `arrays_sha256` added.

    files: arrays already written as temporary .npy files in out_dir (name -> path); they are moved to
    `<name>.npy`, left out of arrays.npz and listed in info["array_files"].
    """
    files = files or {}
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(f"cannot create output directory {out_dir}: {exc.strerror or exc}") from exc
    final_arrays, final_info = ARRAYS.path(out_dir), INFO.path(out_dir)
    tmp_arrays = out_dir / f".{ARRAYS.name}.{os.getpid()}.tmp"
    tmp_info = out_dir / f".{INFO.name}.{os.getpid()}.tmp"
    try:
        # Drop the old completeness marker first: a stale info.json must never describe
        # new arrays if this job dies between the two renames.
        final_info.unlink(missing_ok=True)
        _write_npz(tmp_arrays, {name: None if name in files else array for name, array in arrays.items()})
        info = {**info, "arrays_sha256": sha256_file(tmp_arrays)}
        if files:
            info["array_files"] = {
                name: {"file": f"{name}.npy", "bytes": path.stat().st_size, "sha256": sha256_file(path)}
                for name, path in files.items()
            }
            for name, path in files.items():
                _fsync_replace(path, out_dir / f"{name}.npy")
        text = json.dumps(info, indent=2, allow_nan=False) + "\n"
        tmp_info.write_text(text, encoding="utf-8")
        _fsync_replace(tmp_arrays, final_arrays)
        _fsync_replace(tmp_info, final_info)
    except OSError as exc:
        raise DatasetError(f"cannot write prepared dataset to {out_dir}: {exc.strerror or exc}") from exc
    finally:
        tmp_arrays.unlink(missing_ok=True)
        tmp_info.unlink(missing_ok=True)
    return info


def _rebuild_hint(path: Path) -> str:
    return f"delete {path} and run the prepare_dataset stage again"


def _read_info(path: Path) -> dict:
    info_path = INFO.path(path)
    if not path.is_dir():
        raise DatasetError(f"no prepared dataset at {path} (directory missing); run the prepare_dataset stage for it")
    if not info_path.is_file():
        raise DatasetError(f"prepared dataset at {path} is incomplete (no {INFO.name}); {_rebuild_hint(path)}")
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read {info_path} ({exc}); {_rebuild_hint(path)}") from exc
    required = ("name", "kind", "n_train", "n_test", "settings", "arrays_sha256", "format_version")
    missing = [key for key in required if not isinstance(info, dict) or key not in info]
    if missing:
        raise DatasetError(f"{info_path} lacks key '{missing[0]}'; {_rebuild_hint(path)}")
    if info["format_version"] != FORMAT_VERSION:
        raise DatasetError(
            f"{info_path} has format_version {info['format_version']}, this growcert reads "
            f"{FORMAT_VERSION}; {_rebuild_hint(path)}"
        )
    return info


def _check_arrays(path: Path, info: dict, arrays: dict[str, np.ndarray | None]) -> None:
    """Cheap consistency checks between info.json and the arrays actually stored."""
    image = info["kind"] == "image"
    expected = {
        "train_x": (info["n_train"], *info["shape"]) if image else (info["n_train"],),
        "test_x": (info["n_test"], *info["shape"]) if image else (info["n_test"],),
    }
    if image:
        expected["train_y"] = (info["n_train"],)
        expected["test_y"] = (info["n_test"],)
        expected["train_index"] = (info["n_train"],)
        expected["test_index"] = (info["n_test"],)
    for name, shape in expected.items():
        actual = None if arrays[name] is None else tuple(arrays[name].shape)
        if actual != tuple(shape):
            raise DatasetError(
                f"{ARRAYS.path(path)}: {name} has shape {actual}, {INFO.name} says {tuple(shape)}; "
                f"{_rebuild_hint(path)}"
            )


def load_prepared(path: str | Path, *, normalize: bool = True, verify: bool = True) -> PreparedDataset:
    """Read a prepared dataset directory.

    normalize: images become float32 (x - train_mean) / train_std per channel; with False
    the stored uint8 pixels are returned. verify: check arrays.npz against the sha256
    recorded in info.json (catches truncation and a mismatched pair of files).
    """
    path = Path(path)
    info = _read_info(path)
    arrays_path = ARRAYS.path(path)
    if not arrays_path.is_file():
        raise DatasetError(f"prepared dataset at {path} has no {ARRAYS.name}; {_rebuild_hint(path)}")
    if verify and sha256_file(arrays_path) != info["arrays_sha256"]:
        raise DatasetError(
            f"{arrays_path} does not match the sha256 in {INFO.name} (corrupt or from another run); "
            f"{_rebuild_hint(path)}"
        )
    try:
        with np.load(arrays_path, allow_pickle=False) as archive:
            arrays = {name: (archive[name] if name in archive.files else None) for name in ARRAY_NAMES}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DatasetError(f"cannot read {arrays_path} ({exc}); {_rebuild_hint(path)}") from exc
    for name, record in info.get("array_files", {}).items():
        arrays[name] = _mapped(path, record)
    _check_arrays(path, info, arrays)
    if normalize and info["kind"] == "image":
        for name in ("train_x", "test_x"):
            arrays[name] = normalize_images(arrays[name], info["mean"], info["std"])
    return PreparedDataset(name=info["name"], info=info, **arrays, folder=path)


def _mapped(path: Path, record: dict) -> np.ndarray:
    """A streamed array of a prepared folder, memory-mapped read-only after a size check."""
    file = path / record["file"]
    if not file.is_file() or file.stat().st_size != record["bytes"]:
        found = f"{file.stat().st_size} bytes" if file.is_file() else "missing"
        raise DatasetError(f"{file}: {found}, {INFO.name} says {record['bytes']} bytes; {_rebuild_hint(path)}")
    try:
        return np.load(file, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read {file} ({exc}); {_rebuild_hint(path)}") from exc


def normalize_images(raw: np.ndarray, mean: Any, std: Any) -> np.ndarray:
    """(raw - mean) / std per channel as float32, computed in place on one float copy."""
    shape = (1, -1) + (1,) * (raw.ndim - 2)
    images = raw.astype(np.float32)
    images -= np.asarray(mean, dtype=np.float32).reshape(shape)
    images /= np.asarray(std, dtype=np.float32).reshape(shape)
    return images
