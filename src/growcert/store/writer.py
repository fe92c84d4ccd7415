"""The gradient store's writer: `StoreWriter` builds one store in the format of `store.format`.

How a store is written, so that nothing half-written is ever read as data:
1. the whole store is built in a sibling `<name>.partial` folder and renamed into place at the end;
2. the full-size template comes first: every array with its Zarr v3 `dimension_names` (what
   xarray reads as dims) and the coordinates known before any forward pass;
   q and z are then written straight into the Zarr arrays' folders in sample ranges that
   are whole chunks (the last one may be short), each file byte for byte what zarr writes
   (`store.chunks`): xarray's region writes without their pitfalls
   (https://github.com/pydata/xarray/issues/8371, .../8882, .../9767) or their per-call overhead;
   the losses are kept (4 bytes a sample) and written once, at the end;
3. `complete = true` goes into each group's attrs and, last of all, the root attrs.
The template (every node's metadata and the small per-sample arrays) is built in a zarr MemoryStore, in one
call to zarr's event loop, and then written to the folder with one concurrent `Store.set` per key: the same
files byte for byte as creating it node by node on disk, without the round trip through zarr's thread pool
that each node's existence checks and parent-group writes take there (docs/science.md, "Cost").
"""

from __future__ import annotations

import asyncio
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, MemoryStore, StorePath

from growcert.errors import StoreError
from growcert.store.chunks import ArrayChunks, chunk_aligned
from growcert.store.encoding import StoreOptions, shard_samples
from growcert.store.format import (
    FORMAT,
    MIN_CHUNK_BYTES,
    SAMPLE_VARIABLES,
    GroupSpec,
    compressors,
    position_attrs,
    sample_chunk,
    variable_attrs,
)


class StoreWriter:
    """Write one store: the template on construction, then `write` chunk-aligned sample ranges, `finish`."""

    def __init__(
        self,
        path: str | Path,
        specs: list[GroupSpec],
        split: np.ndarray,
        index: np.ndarray,
        label: np.ndarray,
        attrs: dict[str, Any],
        group_attrs: dict[str, dict[str, Any]] | None = None,
        min_chunk_bytes: int = MIN_CHUNK_BYTES,
        options: StoreOptions | None = None,
        workers: int = 1,
        loss_description: str = "the loss of the example alone (root attr loss_function)",
    ):
        """workers: threads that encode and write the chunks of one `write_many` (the job's cores);
        loss_description: the family's (`Family.loss_description`), for the variables' descriptions."""
        self.path, self.workers = Path(path), workers
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.specs = {spec.name: spec for spec in specs}
        self.n = len(split)
        self.options = options or StoreOptions()
        self.chunks = {spec.name: sample_chunk(spec, self.n, min_chunk_bytes, self.options.itemsize) for spec in specs}
        self.shards = {name: shard_samples(chunk, self.n, self.options) for name, chunk in self.chunks.items()}
        self.attrs = {**attrs, **self.options.attrs}
        self.group_attrs = group_attrs or {}
        self.variable_attrs = variable_attrs(loss_description)
        # the losses arrive chunk by chunk with q and z; their coordinate is one chunk, written by `finish`
        self.losses = {name: np.full(self.n, np.nan, np.float32) for name in self.specs}
        self._create(np.asarray(split), np.asarray(index, dtype=np.int64), np.asarray(label, dtype=np.int64))
        self.written = {name: 0 for name in self.specs}

    def _create(self, split: np.ndarray, index: np.ndarray, label: np.ndarray) -> None:
        if self.partial.exists():
            shutil.rmtree(self.partial)  # a previous writer was killed: start over
        self.store = LocalStore(self.partial)
        arrays = sync(self._template(split, index, label))
        # q, z and loss are written chunk by chunk (or shard by shard) into their folders, as zarr would write
        # them but without its per-chunk machinery (store.chunks).
        self.arrays = {
            name: {
                variable: ArrayChunks(array.metadata, self.partial / name / variable)
                for variable, array in group.items()
            }
            for name, group in arrays.items()
        }

    async def _template(
        self,
        split: np.ndarray,
        index: np.ndarray,
        label: np.ndarray,
    ) -> dict[str, dict[str, zarr.AsyncArray]]:
        """Build the template in memory, in one call to zarr's event loop, and write it into the folder;
        returns each group's q/z/loss arrays (bound to the MemoryStore)."""
        template = MemoryStore()
        root = await zarr.api.asynchronous.open_group(store=template, mode="w", zarr_format=3)
        await root.update_attributes({**self.attrs, "format": FORMAT, "groups": list(self.specs), "complete": False})
        self.groups: dict[str, Any] = {"": root.metadata}  # root ("") and group metadata, for `finish`
        arrays: dict[str, dict[str, zarr.AsyncArray]] = {}
        described, n = self.variable_attrs, self.n
        for name, spec in self.specs.items():
            chunk, options = self.chunks[name], self.options
            # A shard is `options.shards` chunks along sample (the whole group when that is more).
            shard = (self.shards[name], *spec.shape) if options.shards else None
            group = await root.create_group(
                name, attributes={**self.group_attrs.get(name, {}), "insertion_point": name, "complete": False}
            )
            self.groups[name] = group.metadata
            # Zarr v3 `dimension_names` are what xarray reads as dims; `coordinates` (CF) names the per-sample
            # coordinates; NaN fill marks unwritten samples.
            arrays[name] = {
                variable: await group.create_array(
                    variable,
                    shape=(n, *spec.shape),
                    chunks=(chunk, *spec.shape),
                    shards=shard,
                    dtype=options.zarr_dtype,
                    fill_value=options.fill_value,
                    compressors=compressors(),
                    dimension_names=("sample", *spec.dims),
                    attributes={
                        **described[variable],
                        "coordinates": " ".join(SAMPLE_VARIABLES),
                        **options.array_attrs,
                    },
                )
                for variable in options.variables
            }
            arrays[name]["loss"] = await group.create_array(
                "loss",
                shape=(n,),
                chunks=(n,),
                dtype="float32",
                fill_value=np.nan,
                compressors=compressors(),
                dimension_names=("sample",),
                attributes=described["loss"],
            )
            coordinates = (("split", split, str), ("index", index, "int64"), ("label", label, "int64"))
            for variable, values, dtype in coordinates:
                small = await group.create_array(
                    variable,
                    shape=(n,),
                    chunks=(n,),
                    dtype=dtype,
                    compressors=compressors(),
                    dimension_names=("sample",),
                    attributes=described[variable],
                )
                await small.setitem(slice(None), values.astype(object) if dtype is str else values)
            for dim in spec.positions:
                size = spec.shape[spec.dims.index(dim)]
                position = await group.create_array(
                    dim,
                    shape=(size,),
                    chunks=(size,),
                    dtype="int64",
                    compressors=compressors(),
                    dimension_names=(dim,),
                    attributes=position_attrs(dim),
                )
                await position.setitem(slice(None), np.arange(size, dtype=np.int64))
        await _copy_keys(template, self.store)
        return arrays

    def write(self, group: str, start: int, values: dict[str, np.ndarray]) -> None:
        """Write samples [start, start + len) of one group: values = {"q": ..., "z": ..., "loss": ...}.

        `start` must be a chunk boundary of the group and the range whole chunks unless it ends the store (in a
        sharded store, a shard's file is written once all its chunks are). Variables the store does not keep
        (z of a q-only store) are dropped.
        """
        self.write_many([(group, start, values)])

    def write_many(self, items: list[tuple[str, int, dict[str, np.ndarray]]], workers: int | None = None) -> None:
        """Several `write`s (group, start, values) as one batch, on `workers` threads (default: the writer's;
        Blosc and the file writes release the GIL). Every range is checked before anything is written; when a
        chunk fails, the first error is raised (the store stays unfinished)."""
        ranges = []
        for group, start, values in items:
            chunk = self.chunks[group]
            stop = start + len(next(iter(values.values())))
            if not chunk_aligned(start, stop, chunk, self.n):
                raise ValueError(
                    f"store {self.path}: write [{start}, {stop}) of {group} is not aligned to chunks of {chunk}"
                )
            ranges.append((group, start, stop, values))
        writes = [
            (self.arrays[group][variable], start, values[variable], True)
            for group, start, stop, values in ranges
            for variable in values
            if variable in self.arrays[group] and variable != "loss"
        ]
        for group, start, stop, values in ranges:
            if "loss" in values:
                self.losses[group][start:stop] = values["loss"]

        def write(chunks: ArrayChunks, start: int, array: np.ndarray, encoded: bool) -> None:
            chunks.write(start, self.options.encode(array) if encoded else array)

        workers = workers or self.workers
        if workers > 1:
            with ThreadPoolExecutor(workers, thread_name_prefix="growcert-store") as pool:
                for done in [pool.submit(write, *arguments) for arguments in writes]:
                    done.result()
        else:
            for arguments in writes:
                write(*arguments)
        for group, start, stop, _ in ranges:
            self.written[group] += stop - start

    def finish(self) -> Path:
        """Mark complete (groups first, root last) and move the store into place."""
        short = {name: count for name, count in self.written.items() if count != self.n}
        if short:
            name, count = next(iter(short.items()))
            raise StoreError(f"store {self.path}: only {count} of {self.n} samples written to {name}")
        unwritten = [
            f"{name}/{variable}"
            for name, group in self.arrays.items()
            for variable, chunks in group.items()
            if chunks.pending
        ]
        if unwritten:  # cannot happen once every sample is written; a bug here must not pass as a store
            raise StoreError(f"store {self.path}: shards of {', '.join(unwritten)} not written")
        for name, losses in self.losses.items():
            self.arrays[name]["loss"].write(0, losses)
        sync(_mark_complete(self.store, self.groups))
        if self.path.exists():
            shutil.rmtree(self.path)
        os.replace(self.partial, self.path)
        return self.path


async def _copy_keys(source: MemoryStore, target: LocalStore) -> None:
    """Every key of `source` written to `target`, concurrently."""
    keys = [key async for key in source.list()]
    values = await asyncio.gather(*(source.get(key, default_buffer_prototype()) for key in keys))
    await asyncio.gather(*(target.set(key, value) for key, value in zip(keys, values)))


async def _mark_complete(store: LocalStore, groups: dict[str, Any]) -> None:
    """`complete = true` in every group's attrs, then (only once they are all written) in the root's."""

    def mark(path: str):
        return zarr.AsyncGroup(metadata=groups[path], store_path=StorePath(store, path)).update_attributes(
            {"complete": True}
        )

    await asyncio.gather(*(mark(name) for name in groups if name))
    await mark("")
