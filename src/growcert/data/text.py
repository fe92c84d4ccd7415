"""A local text corpus as one byte-level stream: a glob of UTF-8 `.txt` files, or a folder written by the
`datasets` library's `save_to_disk` (its Arrow files, one document per row of `text_column`).

For language models at paper scale, where Shakespeare (5 MB, ~18k single-pass windows of 256 bytes) is too
small. Tokens are the 256 byte values of the UTF-8 text, as for Shakespeare; a pretrained model reads the
prepared streams through its own tokenizer (`data/tokenized.py`: built chunk batch by chunk batch into
memory-mapped token streams cached in the prepared folder, so that path never holds the corpus either).

Documents (files in sorted path order, or rows in order) are joined by a blank line. The split is
Shakespeare's (`shakespeare.chunk_split`): contiguous chunks of `chunk_bytes`, a seeded permutation sends
`test_fraction` of them to test, each side keeps its chunks in corpus order, so no window of one split
holds a byte of the other's text.

Memory: nothing holds the corpus. One pass measures it (file sizes; Arrow string lengths), a second
streams it in blocks of `_BLOCK` bytes into the two prepared streams, written as plain `.npy` files
that `load_prepared` memory-maps (`PreparedDataset.array_files`). The UTF-8 check and the sha256 digests
run on the same blocks.

Budget: `single_pass_tokens` is the train tokens the config's text grids need without repeating one
(steps x batch_size x context; `config.py` checks the grids against it before any job). Preparing stops
in one line saying by how much when the corpus's train split holds fewer.

`datasets` folders are read with pyarrow; without pyarrow installed they are refused in one line (export
the column to .txt files instead). The `datasets` library itself is never needed.
"""

from __future__ import annotations

import codecs
import glob
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from growcert.data.common import BuiltDataset, DatasetError, Setting, combined_sha256
from growcert.data.shakespeare import SEPARATOR, byte_text_info, chunk_split  # documents joined as the plays are

SETTINGS = {
    "path": Setting(
        "data/raw/text/*.txt", "path", "glob of UTF-8 .txt files, or a folder written by datasets' save_to_disk"
    ),
    "text_column": Setting("text", "string", "column of a datasets folder that holds the text"),
    "test_fraction": Setting(0.01, "fraction", "share of chunks held out for test"),
    "seed": Setting(0, "seed", "seed of the chunk permutation"),
    "chunk_bytes": Setting(65536, "positive_int", "bytes per contiguous chunk of the split"),
    "single_pass_tokens": Setting(
        None, "optional_positive_int", "train tokens the corpus must hold without repeating one (null: no check)"
    ),
}
_BLOCK = 1 << 24  # bytes streamed at a time: 16 MB of text, plus a 16 MB routing mask


def _fail(message: str) -> DatasetError:
    return DatasetError(f"dataset 'text': {message}")


class _TextFiles:
    """Sorted .txt files of a glob: sizes from the filesystem, contents streamed block by block."""

    def __init__(self, pattern: str):
        self.files = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
        if not self.files:
            raise _fail(
                f"datasets.text.path {pattern!r} matches no file; point it at the corpus "
                "(a glob such as data/raw/text/*.txt, or a datasets save_to_disk folder)"
            )
        self.names = [str(path) for path in self.files]

    def sizes(self) -> list[int]:
        return [path.stat().st_size for path in self.files]

    def documents(self) -> Iterator[tuple[str, Iterator[bytes]]]:
        for path in self.files:
            yield str(path), self._blocks(path)

    @staticmethod
    def _blocks(path: Path) -> Iterator[bytes]:
        try:
            with open(path, "rb") as handle:
                while block := handle.read(_BLOCK):
                    yield block
        except OSError as exc:
            raise _fail(f"cannot read {path}: {exc.strerror}") from exc


class _ArrowFolder:
    """A `datasets` save_to_disk folder: state.json lists the Arrow stream files; one document per row."""

    def __init__(self, folder: Path, column: str):
        if (folder / "dataset_dict.json").is_file():
            splits = json.loads((folder / "dataset_dict.json").read_text()).get("splits", [])
            raise _fail(
                f"{folder} holds a DatasetDict (splits {', '.join(splits)}); point datasets.text.path "
                f"at one split's folder, e.g. {folder / (splits[0] if splits else 'train')}"
            )
        try:
            state = json.loads((folder / "state.json").read_text())
            self.files = [folder / entry["filename"] for entry in state["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise _fail(f"{folder} is not a folder written by datasets' save_to_disk (state.json: {exc})") from exc
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise _fail(
                f"{folder} is a datasets folder, whose Arrow files need pyarrow (not installed); "
                "pip install pyarrow, or export the text column to .txt files and glob them"
            ) from None
        self.column = column
        self.names = [str(path) for path in self.files]

    def _rows(self, path: Path) -> Iterator[Any]:
        import pyarrow as pa

        try:
            with pa.memory_map(str(path)) as source:
                for batch in pa.ipc.open_stream(source):
                    if self.column not in batch.schema.names:
                        raise _fail(
                            f"{path} has no column {self.column!r} (columns: {', '.join(batch.schema.names)}); "
                            "set datasets.text.text_column"
                        )
                    yield batch.column(self.column)
        except (OSError, pa.ArrowInvalid) as exc:
            raise _fail(f"cannot read {path} as an Arrow stream ({exc})") from exc

    def sizes(self) -> list[int]:
        """UTF-8 bytes of every row joined by SEPARATOR, per file (without reading the text into Python)."""
        import pyarrow.compute as pc

        sizes = []
        for path in self.files:
            lengths = [pc.sum(pc.binary_length(column)).as_py() or 0 for column in self._rows(path)]
            rows = sum(len(column) for column in self._rows(path))
            sizes.append(int(sum(lengths)) + len(SEPARATOR) * max(rows - 1, 0))
        return sizes

    def documents(self) -> Iterator[tuple[str, Iterator[bytes]]]:
        for path in self.files:
            yield str(path), self._blocks(path)

    def _blocks(self, path: Path) -> Iterator[bytes]:
        first = True
        for column in self._rows(path):
            for value in column.to_pylist():  # one record batch at a time (datasets writes ~1000 rows a batch)
                yield (b"" if first else SEPARATOR) + (value or "").encode("utf-8")
                first = False


def _source(path_setting: str, column: str):
    folder = Path(path_setting)
    if folder.is_dir() and ((folder / "state.json").is_file() or (folder / "dataset_dict.json").is_file()):
        return _ArrowFolder(folder, column)
    return _TextFiles(path_setting)


class _Router:
    """Appends corpus blocks to the train and test streams by the chunk each byte falls in."""

    def __init__(self, chunk_is_test: np.ndarray, chunk_bytes: int, train: np.ndarray, test: np.ndarray):
        self.chunk_is_test, self.chunk_bytes = chunk_is_test, chunk_bytes
        self.streams, self.cursors = {False: train, True: test}, {False: 0, True: 0}
        self.offset = 0

    def add(self, block: bytes) -> None:
        for start in range(0, len(block), _BLOCK):
            piece = np.frombuffer(block, dtype=np.uint8, offset=start, count=min(_BLOCK, len(block) - start))
            first = self.offset // self.chunk_bytes
            last = (self.offset + len(piece) - 1) // self.chunk_bytes
            skip = self.offset - first * self.chunk_bytes
            is_test = np.repeat(self.chunk_is_test[first : last + 1], self.chunk_bytes)[skip : skip + len(piece)]
            for side in (False, True):
                values = piece[is_test == side]
                self.streams[side][self.cursors[side] : self.cursors[side] + len(values)] = values
                self.cursors[side] += len(values)
            self.offset += len(piece)


def _check_budget(settings: dict[str, Any], train_bytes: int, where: str) -> None:
    need = settings["single_pass_tokens"]
    have = max(train_bytes - 1, 0)  # the last byte is only ever a target
    if need is not None and have < need:
        raise _fail(
            f"the train split of {where} holds {have:,} single-pass tokens, {need - have:,} "
            f"({(need - have) / need:.1%}) short of datasets.text.single_pass_tokens={need:,}; "
            "add text, lower test_fraction, or lower the budget"
        )


def build(settings: dict[str, Any], out_dir: Path) -> BuiltDataset:
    source = _source(settings["path"], settings["text_column"])
    sizes = source.sizes()
    total = sum(sizes) + len(SEPARATOR) * (len(sizes) - 1)
    chunk_bytes = settings["chunk_bytes"]
    if total < 2 * chunk_bytes:
        raise _fail(
            f"{settings['path']} holds {total:,} bytes, less than two chunks of "
            f"datasets.text.chunk_bytes={chunk_bytes}; use more text or a smaller chunk_bytes"
        )
    train_chunks, test_chunks, _ = chunk_split(
        total, chunk_bytes, settings["test_fraction"], settings["seed"], byte_mask=False
    )
    chunk_is_test = np.zeros(train_chunks.size + test_chunks.size, dtype=bool)
    chunk_is_test[test_chunks] = True
    lengths = np.minimum(chunk_bytes, total - np.arange(chunk_is_test.size, dtype=np.int64) * chunk_bytes)
    n_test = int(lengths[chunk_is_test].sum())
    _check_budget(settings, total - n_test, settings["path"])

    out_dir.mkdir(parents=True, exist_ok=True)
    files = {name: out_dir / f".{name}.npy.tmp" for name in ("train_x", "test_x")}
    try:
        streams = {
            "train_x": np.lib.format.open_memmap(files["train_x"], "w+", np.uint8, (total - n_test,)),
            "test_x": np.lib.format.open_memmap(files["test_x"], "w+", np.uint8, (n_test,)),
        }
        records, digests, corpus_sha256 = _stream(
            source, _Router(chunk_is_test, chunk_bytes, *streams.values()), total, settings["path"]
        )
        for stream in streams.values():
            stream.flush()
        del streams
    except BaseException:
        for file in files.values():  # nothing half-written stays behind
            file.unlink(missing_ok=True)
        raise
    arrays = {
        "train_x": np.load(files["train_x"], mmap_mode="r"),
        "train_y": None,
        "test_x": np.load(files["test_x"], mmap_mode="r"),
        "test_y": None,
        "train_index": train_chunks,
        "test_index": test_chunks,
    }
    info = byte_text_info(
        corpus_bytes=int(total),
        corpus_sha256=corpus_sha256,
        source={"path": settings["path"], "format": type(source).__name__.strip("_"), "files": records},
        sha256=combined_sha256(digests),
        chunk_bytes=chunk_bytes,
        n_chunks=int(chunk_is_test.size),
        train_chunks=train_chunks,
        test_chunks=test_chunks,
        settings=settings,
    )
    return BuiltDataset(arrays=arrays, info=info, files=files)


def _stream(source, router: _Router, total: int, where: str) -> tuple[list[dict], dict[str, str], str]:
    """Second pass: every document's blocks into the router, UTF-8 checked; (file records, digests, corpus sha256)."""
    corpus_digest, digests, records = hashlib.sha256(), {}, []
    for number, (name, blocks) in enumerate(source.documents()):
        digest, decoder, size = hashlib.sha256(), codecs.getincrementaldecoder("utf-8")(), 0
        if number:
            router.add(SEPARATOR)
            corpus_digest.update(SEPARATOR)
        for block in blocks:
            try:
                decoder.decode(block, final=False)
            except UnicodeDecodeError as exc:
                raise _fail(f"{name} is not UTF-8 (byte {size + exc.start:,}: {exc.reason})") from None
            router.add(block)
            digest.update(block)
            corpus_digest.update(block)
            size += len(block)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise _fail(f"{name} is not UTF-8 (it ends inside a character)") from None
        digests[name] = digest.hexdigest()
        records.append({"name": name, "bytes": size, "sha256": digests[name]})
    if router.offset != total:  # a file changed between the two passes
        raise _fail(f"{where} changed while it was read ({router.offset:,} bytes, {total:,} measured)")
    return records, digests, corpus_digest.hexdigest()


def grid_budget_problem(train: dict[str, Any], context: int, settings: dict[str, Any]) -> str | None:
    """Why a llama grid's budget does not fit datasets.text.single_pass_tokens (None when it does)."""
    need = train["steps"] * train["batch_size"] * context
    budget = settings.get("single_pass_tokens")
    if budget is None or need <= budget:
        return None
    return (
        f"steps {train['steps']} x batch_size {train['batch_size']} x context {context} = {need:,} tokens, "
        f"{need - budget:,} more than datasets.text.single_pass_tokens={budget:,}"
    )
