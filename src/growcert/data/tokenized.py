"""A prepared byte-level text dataset re-read through a tokenizer (for pretrained language models), as
memory-mapped token streams cached next to the prepared data.

The rule: each split's byte stream is cut back into the contiguous chunks the split was made of
(`segment_starts`), each chunk is decoded (an invalid byte sequence, e.g. a character cut by a chunk
boundary, becomes U+FFFD) and tokenized without special tokens, and the chunks' token ids are concatenated
in the same order. Tokenizing chunk by chunk keeps every token inside one chunk, so, as with bytes, no
token of a window comes from text the split put on the other side.

Memory: chunks go to the tokenizer in batches of about `_BATCH_BYTES` of text (at least one chunk), and
each batch's ids are appended to a raw little-endian file (int32 when the vocabulary fits, else int64)
before the next batch is read; the byte streams are themselves memory-mapped for the `text` dataset. Peak
RAM is one batch's text and ids, whatever the corpus size. The result is read back with `np.memmap`.

Cache: `<prepared folder>/tokens/<data key>-<tokenizer key>/` holds `train.bin`, `test.bin`, the token
offset of every chunk (`{split}_starts.npy`, so `segment_starts` stays right on token streams) and
`info.json`. The data key hashes the sha256 digests the prepared folder records for its arrays (a
re-prepared corpus gets a new entry, and entries of earlier data are deleted); the tokenizer key hashes
`tokenizer_identity` (the tokenizer's content, not its path: the Pythia sizes share one entry) with the
vocabulary size and this format. An entry is built in a hidden temporary folder and renamed into place
whole, so a killed job leaves only a `.*.partial` folder that nothing reads (safe to delete), and a
later job rebuilds; when two jobs build the same entry, the first rename wins and the other uses it.

The returned `PreparedDataset` has int token streams as `train_x`/`test_x`: windows, batches and the
store's `index` (now a token offset) work on it unchanged. Its name and `sha256` stay the source
dataset's (a store still pairs with the prepared data it came from); `info` records the tokenizer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from growcert.data.common import DatasetError
from growcert.data.prepared import PreparedDataset
from growcert.pipeline.artifacts import INFO

FORMAT = "growcert-tokens-1"
CACHE_FOLDER = "tokens"
SPLITS = ("train", "test")
# Text per tokenizer call: 4 MB. It bounds the ids and the tokenizer's encodings resident at once, whatever the
# corpus size (benchmarks/token_cache.py measures it; docs/science.md, "Cost").
_BATCH_BYTES = 1 << 22
Encode = Callable[[Sequence[str]], Sequence[Sequence[int]]]


def encoder(tokenizer: Any) -> Encode:
    """The `encode` of a Hugging Face tokenizer: a list of texts -> their ids, without special tokens."""

    def encode(texts: Sequence[str]) -> Sequence[Sequence[int]]:
        return tokenizer(list(texts), add_special_tokens=False)["input_ids"]

    return encode


def tokenizer_identity(tokenizer: Any) -> str:
    """sha256 of what decides the ids a Hugging Face tokenizer gives a text.

    A fast tokenizer: its class, the `tokenizers` version and the backend's full serialization (vocabulary,
    merges, normalizer, pre-tokenizer, added tokens). Any other: its class and the files `save_pretrained`
    writes. Never its path, so a folder whose tokenizer was replaced gets a new cache entry.
    """
    digest = hashlib.sha256(f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}\n".encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        import tokenizers

        digest.update(f"tokenizers {tokenizers.__version__}\n".encode())
        digest.update(backend.to_str().encode("utf-8"))
        return digest.hexdigest()
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        for file in sorted(path for path in Path(folder).rglob("*") if path.is_file()):
            digest.update(f"{file.relative_to(folder)}\n".encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def _sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def prepared_key(info: dict) -> str:
    """sha256 of the digests a prepared folder records for its arrays (arrays.npz and the streamed files)."""
    files = {name: record["sha256"] for name, record in info.get("array_files", {}).items()}
    return _sha256_json({"arrays_sha256": info["arrays_sha256"], "array_files": files})


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<i4") if vocab_size <= np.iinfo(np.int32).max + 1 else np.dtype("<i8")


def tokenized(data: PreparedDataset, encode: Encode, tokenizer: str, vocab_size: int, identity: str) -> PreparedDataset:
    """`data` with its byte streams replaced by memory-mapped token streams (built once, then read from the cache).

    encode: a list of texts -> their token id lists (`encoder`); tokenizer: its name, for the records;
    identity: a string that changes whenever encode's ids may change (`tokenizer_identity`).
    """
    if data.kind != "text":
        raise DatasetError(f"dataset '{data.name}': only text datasets can be tokenized")
    if data.folder is None:
        raise DatasetError(
            f"dataset '{data.name}': tokenizing caches next to the prepared data; "
            "read the dataset with load_prepared(folder)"
        )
    data_key = prepared_key(data.info)
    keys = {"format": FORMAT, "prepared_key": data_key, "tokenizer_identity": identity, "vocab_size": int(vocab_size)}
    entry = Path(data.folder) / CACHE_FOLDER / f"{data_key[:16]}-{_sha256_json(keys)[:16]}"
    record = _read_entry(entry, keys)
    if record is None:
        _build(data, encode, tokenizer, keys, entry)
        record = _read_entry(entry, keys)
        if record is None:
            raise DatasetError(
                f"dataset '{data.name}': the token cache {entry} reads back incomplete after it was "
                "built; delete it and run again"
            )
    streams = {split: _mapped(entry, record, split) for split in SPLITS}
    starts = {split: np.load(entry / record["splits"][split]["starts_file"]) for split in SPLITS}
    info = {
        **data.info,
        "vocab_size": int(vocab_size),
        "encoding": f"tokens of {tokenizer} (chunk by chunk)",
        "tokenization": {
            "tokenizer": tokenizer,
            "tokenizer_identity": identity,
            "source_encoding": data.info.get("encoding"),
            "n_train_tokens": int(len(streams["train"])),
            "n_test_tokens": int(len(streams["test"])),
            "dtype": record["dtype"],
            "cache": f"{CACHE_FOLDER}/{entry.name}",
            "index": "token offset in the split's token stream",
        },
    }
    return dataclasses.replace(data, info=info, train_x=streams["train"], test_x=streams["test"], chunk_starts=starts)


def _read_entry(entry: Path, keys: dict) -> dict | None:
    """The record of a complete entry made for `keys`; None (after deleting what is there) otherwise."""
    if not entry.exists():
        return None
    try:
        record = json.loads(INFO.path(entry).read_text(encoding="utf-8"))
        itemsize = np.dtype(record["dtype"]).itemsize
        complete = all(record.get(key) == value for key, value in keys.items()) and all(
            (entry / split["file"]).stat().st_size == split["tokens"] * itemsize
            and (entry / split["starts_file"]).is_file()
            for split in record["splits"].values()
        )
    except (OSError, ValueError, KeyError, TypeError):
        complete = False
    if complete:
        return record
    shutil.rmtree(entry, ignore_errors=True)  # not something this code writes: rebuild it
    return None


def _mapped(entry: Path, record: dict, split: str) -> np.ndarray:
    dtype, count = np.dtype(record["dtype"]), record["splits"][split]["tokens"]
    if count == 0:  # a zero-length file cannot be mapped
        return np.zeros(0, dtype=dtype)
    return np.memmap(entry / record["splits"][split]["file"], dtype=dtype, mode="r", shape=(count,))


def _build(data: PreparedDataset, encode: Encode, tokenizer: str, keys: dict, entry: Path) -> None:
    """Tokenize both splits into a temporary folder beside `entry` and rename it into place whole."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        for stale in entry.parent.iterdir():  # entries of data this folder no longer holds
            if not stale.name.startswith((".", keys["prepared_key"][:16])):
                shutil.rmtree(stale, ignore_errors=True)
        temporary = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".partial", dir=entry.parent))
    except OSError as error:
        raise DatasetError(
            f"dataset '{data.name}': cannot write the token cache in {entry.parent} "
            f"({error.strerror or error}); the prepared folder must be writable"
        ) from None
    try:
        dtype = token_dtype(keys["vocab_size"])
        splits = {
            split: _write_split(data, split, encode, temporary, dtype, keys["vocab_size"], tokenizer)
            for split in SPLITS
        }
        record = {**keys, "tokenizer": tokenizer, "dtype": dtype.str, "batch_bytes": _BATCH_BYTES, "splits": splits}
        with open(INFO.path(temporary), "w", encoding="utf-8") as handle:
            handle.write(json.dumps(record, indent=2) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.rename(temporary, entry)
        except OSError:
            if not INFO.path(entry).is_file():  # not another job's finished entry: a real failure
                raise
    except OSError as error:
        raise DatasetError(
            f"dataset '{data.name}': cannot write the token cache {entry} ({error.strerror or error})"
        ) from None
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def chunk_batches(bounds: np.ndarray, batch_bytes: int) -> list[tuple[int, int]]:
    """[first, last) chunk ranges of consecutive chunks holding at most `batch_bytes` (at least one chunk)."""
    ranges, first = [], 0
    for last in range(1, len(bounds)):
        if last > first + 1 and bounds[last] - bounds[first] > batch_bytes:
            ranges.append((first, last - 1))
            first = last - 1
    if len(bounds) > 1:
        ranges.append((first, len(bounds) - 1))
    return ranges


def _write_split(
    data: PreparedDataset, split: str, encode: Encode, folder: Path, dtype: np.dtype, vocab_size: int, tokenizer: str
) -> dict:
    """Append the split's token ids to `{split}.bin` batch by batch; return its record."""
    stream = data.train_x if split == "train" else data.test_x
    bounds = np.append(data.segment_starts(split), len(stream))
    starts, total = np.zeros(len(bounds) - 1, dtype=np.int64), 0
    with open(folder / f"{split}.bin", "wb") as handle:
        for first, last in chunk_batches(bounds, _BATCH_BYTES):
            texts = [
                stream[bounds[i] : bounds[i + 1]].tobytes().decode("utf-8", errors="replace")
                for i in range(first, last)
            ]
            ids = encode(texts)
            if len(ids) != len(texts):
                raise DatasetError(
                    f"dataset '{data.name}': tokenizer {tokenizer} returned {len(ids)} id lists for {len(texts)} texts"
                )
            counts = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(counts.sum()))
            if flat.size and (flat.min() < 0 or flat.max() >= vocab_size):
                raise DatasetError(
                    f"dataset '{data.name}': tokenizer {tokenizer} produced ids outside [0, {vocab_size})"
                )
            starts[first:last] = total + np.cumsum(counts) - counts
            total += int(flat.size)
            handle.write(flat.astype(dtype).tobytes())
        handle.flush()
        os.fsync(handle.fileno())
    np.save(folder / f"{split}_starts.npy", starts)
    return {"file": f"{split}.bin", "tokens": total, "chunks": len(starts), "starts_file": f"{split}_starts.npy"}
