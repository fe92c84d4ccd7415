"""Whole chunks and shards of a gradient store, encoded and written as zarr writes them, without zarr's per-chunk
machinery (docs/design.md §5, "The dump's writer").

The dump writes every q, z and loss chunk once, whole, into a folder nobody reads until it is finished. zarr's
`setitem` does that through its general path: an indexer, a codec pipeline scheduled on its event loop and
thread pool, a read-modify-write check per chunk. On a 1 MiB float32 chunk that costs ~2 ms of CPU beyond the
compression itself (benchmarks/dump.py), more than the compression, and for a small resnet it made the
store's writer cost more CPU than capturing the gradients. `ArrayChunks` does only what the array's metadata
asks for, with the same libraries zarr uses:

- a chunk: its values in C order and little-endian (zarr's BytesCodec), padded with the fill value past the
  array's end, then Blosc with the array's settings (numcodecs), then the CRC32C of those bytes appended as
  4 little-endian bytes (zarr's Crc32cCodec);
- a shard: its inner chunks so encoded, one after another (the order zarr's sharding codec uses along the
  sample axis, the only axis cut into chunks here), then the index, (offset, length) per inner chunk as
  little-endian uint64, with its own CRC32C; every inner chunk that holds a sample of the array is written,
  since the arrays are created with `write_empty_chunks`;
- the file at the array's chunk key, written directly.

Writes come in whole chunks, sharded or not: a shard's inner chunks are encoded as they arrive and kept
(compressed) until the shard is whole, and only then is its file written. So a sharded store is compressed
while the dump captures, like an unsharded one, instead of all at the end.

Any other codec layout is refused (the store module creates every array it writes). tests/test_store.py checks
that the files are byte for byte those zarr's own `setitem` writes, sharded or not, in float32 and bfloat16
bits, with a last chunk or shard that reaches past the end.
"""

from __future__ import annotations

from pathlib import Path

import google_crc32c
import numpy as np
from numcodecs import Blosc
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, ShardingCodec
from zarr.codecs.sharding import ShardingCodecIndexLocation
from zarr.core.metadata import ArrayV3Metadata

_SHUFFLE = {"noshuffle": Blosc.NOSHUFFLE, "shuffle": Blosc.SHUFFLE, "bitshuffle": Blosc.BITSHUFFLE}


def _with_crc32c(payload: bytes) -> bytes:
    return payload + np.uint32(google_crc32c.value(payload)).astype("<u4").tobytes()


def chunk_aligned(start: int, stop: int, chunk: int, n: int) -> bool:
    """Whether samples [start, stop) of an n-sample array are whole chunks (the last one may end at n)."""
    return start % chunk == 0 and (stop % chunk == 0 or stop == n) and stop <= n


class ArrayChunks:
    """Writes whole chunks of one zarr v3 array straight into its folder: a chunk's file at once, a shard's file
    once all its chunks have come (they wait in `pending`, compressed)."""

    def __init__(self, metadata: ArrayV3Metadata, folder: str | Path):
        """metadata: the array's (zarr v3); folder: the array's folder on disk."""
        self.folder, self.key = Path(folder), metadata.chunk_key_encoding.encode_chunk_key
        self.shape, self.dtype = tuple(metadata.shape), metadata.data_type.to_native_dtype().newbyteorder("<")
        self.fill_value = np.array(metadata.fill_value, dtype=self.dtype)
        self.file_samples = metadata.chunk_grid.chunk_shape[0]  # a file: a chunk, or a shard
        self.chunk, self.sharded = self.file_samples, False
        self.pending: dict[int, dict[int, bytes]] = {}  # encoded inner chunks of unfinished shards
        self.folders: set[Path] = set()
        codecs = tuple(metadata.codecs)
        if len(codecs) == 1 and isinstance(codecs[0], ShardingCodec):
            sharding = codecs[0]
            if (
                sharding.index_location != ShardingCodecIndexLocation.end
                or [type(c) for c in sharding.index_codecs] != [BytesCodec, Crc32cCodec]
                or tuple(sharding.chunk_shape[1:]) != self.shape[1:]
            ):
                raise ValueError(f"{folder}: unsupported shard layout {sharding}")
            self.chunk, self.sharded, codecs = sharding.chunk_shape[0], True, tuple(sharding.codecs)
        if [type(c) for c in codecs] != [BytesCodec, BloscCodec, Crc32cCodec]:
            raise ValueError(f"{folder}: unsupported codecs {codecs}")
        blosc = codecs[1]
        self.blosc = Blosc(
            cname=blosc.cname.value,
            clevel=blosc.clevel,
            shuffle=_SHUFFLE[blosc.shuffle.value],
            blocksize=blosc.blocksize,
            typesize=blosc.typesize,
        )

    def write(self, start: int, values: np.ndarray) -> None:
        """Samples [start, start + len(values)): whole chunks, the last one may end at the array's end."""
        n, size = self.shape[0], self.chunk
        if not chunk_aligned(start, start + len(values), size, n):
            raise ValueError(f"write of [{start}, {start + len(values)}) is not aligned to chunks of {size}")
        for offset in range(0, len(values), size):
            first = start + offset
            encoded = self._chunk(values[offset : offset + size])
            if not self.sharded:
                self._write_file(first // size, encoded)
                continue
            shard, position = divmod(first, self.file_samples)
            inner = self.pending.setdefault(shard, {})
            inner[position // size] = encoded
            # the shard's inner chunks that hold samples of the array (one wholly past its end is left out)
            if len(inner) == -(-min(self.file_samples, n - shard * self.file_samples) // size):
                self._write_file(shard, self._shard(self.pending.pop(shard)))

    def _chunk(self, values: np.ndarray) -> bytes:
        values = np.ascontiguousarray(values, dtype=self.dtype)
        if len(values) < self.chunk:  # past the array's end: the fill value, as zarr pads
            padded = np.empty((self.chunk, *self.shape[1:]), self.dtype)
            padded[: len(values)], padded[len(values) :] = values, self.fill_value
            values = padded
        return _with_crc32c(self.blosc.encode(values.reshape(-1).view(np.uint8)))

    def _shard(self, inner: dict[int, bytes]) -> bytes:
        """A shard file from its encoded inner chunks by position; a missing position's index entry is
        (2⁶⁴ − 1, 2⁶⁴ − 1), as zarr writes it."""
        index = np.full((self.file_samples // self.chunk, 2), np.iinfo(np.uint64).max, dtype="<u8")
        chunks = [inner[position] for position in sorted(inner)]
        lengths = np.array([len(chunk) for chunk in chunks], dtype="<u8")
        index[sorted(inner), 0], index[sorted(inner), 1] = np.cumsum(lengths) - lengths, lengths
        return b"".join(chunks) + _with_crc32c(index.tobytes())

    def _write_file(self, number: int, data: bytes) -> None:
        path = self.folder / self.key((number, *(0,) * (len(self.shape) - 1)))
        if path.parent not in self.folders:  # one mkdir per folder, not per file
            path.parent.mkdir(parents=True, exist_ok=True)
            self.folders.add(path.parent)
        path.write_bytes(data)
