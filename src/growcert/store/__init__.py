"""The gradient store: one Zarr v3 store per model checkpoint (docs/design.md §5; docs/stores.md shows how to read it).

Layout (format `growcert-gradient-store-2`): one group per insertion point (`block0`, `block1`, ...), each an
xarray Dataset

    q      (sample, <native dims>)  float32   activation gradient of each example's own loss at z
    z      (sample, <native dims>)  float32   the activation itself
    coordinates of `sample`:
    split  (sample,)                string    "train" | "test"
    index  (sample,)                int64     row (images) or byte offset (text windows) in the prepared split
    label  (sample,)                int64     class (images) or -1 (language models: targets are the next tokens)
    loss   (sample,)                float32   per-example loss
    coordinates of the position dims (`Family.position_dims`): token, or height and width, 0, 1, ...

Native dims: (channel, height, width) for conv nets, (token, feature) for language models. Channels and
features get no coordinate: their index is all there is to say about them.

What makes it data for xarray, as its Zarr backend reads CF conventions: q and z name the per-sample
coordinates in their `coordinates` attribute (what `xr.Dataset.to_zarr` writes for non-index coordinates), so
`xr.open_datatree(store, engine="zarr", consolidated=False)` shows split, index, label and loss as coordinates
of `sample`; the position dims are 1-d arrays of their own name (index coordinates). q, z and every
coordinate carry `long_name`, `units` and `description`; q's and loss's description state the loss and its
reduction from the family's record (`Family.loss_description`: the language models' loss is the mean over
tokens, so q includes 1/T). The root's attrs hold what the store's groups share (model identity, loss,
provenance, dump options, `format`, `groups`); a group's attrs hold what differs per group
(`insertion_point`, `native_dims`) and its own `complete`.

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

Reading: `open_store` (also `growcert.open_store`) is the one way to open a store in Python: the checked
DataTree. The stages read one point at a time with `open_group` (dask-backed, coordinates in memory) and
`iter_sample_chunks` (one chunk at a time); `store_attrs` gives the root attrs alone. All refuse a store
without `complete`, of another format version (naming the command that dumps it again), or whose groups
disagree with their attrs, in one line naming the store.

Chunking: q and z along `sample` only; each group's chunk length is the smallest that puts at least 1 MB
in a q/z chunk (the whole array when it is smaller); coordinates are one chunk each, so a reader takes them
in one read and q's chunks stay the only ones along `sample`. Blosc zstd with byte shuffle, then a CRC32C of
every chunk, so a damaged chunk never reads as data: `reading()` names it (group, variable, samples).
With `dump.shards`, q's and z's chunks are grouped into Zarr v3 shards (one file per shard, each inner chunk
with its CRC32C, the shard index with its own). `dump.variables` and `dump.dtype` (q alone; bfloat16 bits)
are the other options of `store.encoding`; readers here decode bfloat16 to float32 and name a variable a
store lacks.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import xarray as xr
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, MemoryStore, StorePath

from growcert.errors import GrowcertError, StoreError
from growcert.store.chunks import ArrayChunks, chunk_aligned
from growcert.store.encoding import StoreOptions, decode_block, decode_dataset, shard_samples

FORMAT_NAME = "growcert-gradient-store"
FORMAT_VERSION = 2  # the layout above; a store of any other version is refused, naming the command that re-dumps it
FORMAT = f"{FORMAT_NAME}-{FORMAT_VERSION}"
MIN_CHUNK_BYTES = 1 << 20
# The per-sample coordinates, in the order q's and z's `coordinates` attribute names them.
SAMPLE_VARIABLES = ("split", "index", "label", "loss")
ARRAY_VARIABLES = ("q", "z")
# What a position coordinate's values are, by dim name (another dim's are "position along <dim>").
POSITION_NAMES = {"token": "position in the context window", "height": "row of the feature map",
                  "width": "column of the feature map"}


def variable_attrs(loss_description: str) -> dict[str, dict[str, str]]:
    """long_name, units and description of every per-sample variable: CF's attribute names, which xarray shows
    and plots by. `loss_description` is the family's (`Family.loss_description`): the loss's reduction and the
    factor it puts in q."""
    return {
        "q": {"long_name": "activation gradient", "units": "1",
              "description": "dℓ_i/dz: the gradient of example i's own loss ℓ_i (coordinate loss) with respect to "
                             f"its activation z at this insertion point; ℓ_i is {loss_description}"},
        "z": {"long_name": "activation", "units": "1",
              "description": "z: example i's residual stream at this insertion point (block0: after the stem or "
                             "embedding; blockk: after residual block k), the model in eval mode"},
        "loss": {"long_name": "per-example loss", "units": "1",
                 "description": f"ℓ_i, the example's own loss: {loss_description}"},
        "split": {"long_name": "split", "units": "1",
                  "description": "train: a row the model was fit on; test: a held-out row"},
        "index": {"long_name": "index in the prepared split", "units": "1",
                  "description": "the example's row in its prepared split (images) or the byte offset of its "
                                 "window (text)"},
        "label": {"long_name": "class label", "units": "1",
                  "description": "the example's class (images); -1 where the targets are the next tokens (text)"},
    }


def position_attrs(dim: str) -> dict[str, str]:
    """The attrs of a position dim's coordinate."""
    return {"long_name": POSITION_NAMES.get(dim, f"position along {dim}"), "units": "1"}


@dataclass(frozen=True)
class GroupSpec:
    """Shape of one insertion point's arrays: native dim names and sizes (without `sample`), and which of the
    dims are positions (`Family.position_dims`: they get coordinates 0, 1, ...)."""

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    positions: tuple[str, ...] = ()

    @property
    def bytes_per_sample(self) -> int:
        return 4 * math.prod(self.shape)


def sample_chunk(spec: GroupSpec, n_samples: int, min_bytes: int = MIN_CHUNK_BYTES, itemsize: int = 4) -> int:
    """Samples per chunk of a group: the smallest count whose q/z chunk holds >= min_bytes (capped at n)."""
    return max(1, min(n_samples, math.ceil(min_bytes / (itemsize * math.prod(spec.shape)))))


def _compressors() -> list:
    # zstd level 1 with byte shuffle: on float32 gradients it compresses about as well as level 3, in a fraction
    # of the time (docs/science.md, "Cost"), which keeps the dump close to the cost of the passes themselves.
    # A CRC32C of every chunk after it: a few flipped bytes would otherwise decompress into silent garbage
    # (blosc checks no data); with it, any damaged chunk fails to read and is reported by name.
    return [BloscCodec(cname="zstd", clevel=1, shuffle="shuffle"), Crc32cCodec()]


class StoreWriter:
    """Write one store: the template on construction, then `write` chunk-aligned sample ranges, `finish`."""

    def __init__(self, path: str | Path, specs: list[GroupSpec], split: np.ndarray, index: np.ndarray,
                 label: np.ndarray, attrs: dict[str, Any], group_attrs: dict[str, dict[str, Any]] | None = None,
                 min_chunk_bytes: int = MIN_CHUNK_BYTES, options: StoreOptions | None = None, workers: int = 1,
                 loss_description: str = "the loss of the example alone (root attr loss_function)"):
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
        self.arrays = {name: {variable: ArrayChunks(array.metadata, self.partial / name / variable)
                              for variable, array in group.items()}
                       for name, group in arrays.items()}

    async def _template(self, split: np.ndarray, index: np.ndarray, label: np.ndarray,
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
            group = await root.create_group(name, attributes={**self.group_attrs.get(name, {}),
                                                              "insertion_point": name, "complete": False})
            self.groups[name] = group.metadata
            # Zarr v3 `dimension_names` are what xarray reads as dims; `coordinates` (CF) names the per-sample
            # coordinates; NaN fill marks unwritten samples.
            arrays[name] = {variable: await group.create_array(
                variable, shape=(n, *spec.shape), chunks=(chunk, *spec.shape), shards=shard,
                dtype=options.zarr_dtype, fill_value=options.fill_value, compressors=_compressors(),
                dimension_names=("sample", *spec.dims),
                attributes={**described[variable], "coordinates": " ".join(SAMPLE_VARIABLES), **options.array_attrs})
                for variable in options.variables}
            arrays[name]["loss"] = await group.create_array(
                "loss", shape=(n,), chunks=(n,), dtype="float32", fill_value=np.nan, compressors=_compressors(),
                dimension_names=("sample",), attributes=described["loss"])
            coordinates = (("split", split, str), ("index", index, "int64"), ("label", label, "int64"))
            for variable, values, dtype in coordinates:
                small = await group.create_array(variable, shape=(n,), chunks=(n,), dtype=dtype,
                                                 compressors=_compressors(), dimension_names=("sample",),
                                                 attributes=described[variable])
                await small.setitem(slice(None), values.astype(object) if dtype is str else values)
            for dim in spec.positions:
                size = spec.shape[spec.dims.index(dim)]
                position = await group.create_array(dim, shape=(size,), chunks=(size,), dtype="int64",
                                                    compressors=_compressors(), dimension_names=(dim,),
                                                    attributes=position_attrs(dim))
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
                raise ValueError(f"store {self.path}: write [{start}, {stop}) of {group} is not aligned to chunks "
                                 f"of {chunk}")
            ranges.append((group, start, stop, values))
        writes = [(self.arrays[group][variable], start, values[variable], True) for group, start, stop, values in ranges
                  for variable in values if variable in self.arrays[group] and variable != "loss"]
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
        unwritten = [f"{name}/{variable}" for name, group in self.arrays.items()
                     for variable, chunks in group.items() if chunks.pending]
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
            {"complete": True})
    await asyncio.gather(*(mark(name) for name in groups if name))
    await mark("")


def _open_root(path: str | Path) -> zarr.Group:
    """A finished store's root group of this format version, or one line naming the store and the problem."""
    path = Path(path)
    if not path.exists():
        partial = path.with_name(path.name + ".partial")
        hint = " (a partial write exists: its writer did not finish)" if partial.exists() else ""
        raise StoreError(f"store {path}: does not exist{hint}")
    try:
        root = zarr.open_group(path, mode="r", zarr_format=3)
    except Exception as error:  # zarr raises several types for a non-store folder
        raise StoreError(f"store {path}: not a Zarr v3 group ({type(error).__name__})") from None
    attrs = dict(root.attrs)
    written = str(attrs.get("format"))
    if written != FORMAT:
        version = written.removeprefix(f"{FORMAT_NAME}-")
        if version == written:
            raise StoreError(f"store {path}: format {attrs.get('format')!r}, not a growcert gradient store ({FORMAT})")
        raise StoreError(f"store {path} is of store version {version} ({written}); this growcert reads version "
                         f"{FORMAT_VERSION} only: dump it again with `growcert dump --checkpoint "
                         f"{attrs.get('checkpoint', 'CHECKPOINT')} --data DATA --out {path}` (DATA: the prepared "
                         f"{attrs.get('dataset', 'dataset')} folder), or delete it and rerun the pipeline")
    if attrs.get("complete") is not True:
        raise StoreError(f"store {path}: incomplete (no complete=true; its writer was interrupted), delete it and dump again")
    return root


def store_attrs(path: str | Path) -> dict[str, Any]:
    """The root attrs of a finished store (model identity, loss, provenance, dump options, groups), after the
    checks of `open_store` that need no group opened."""
    return dict(_open_root(path).attrs)


def _checked_group(path: str | Path, attrs: dict[str, Any], group: str, dataset: xr.Dataset) -> xr.Dataset:
    """One point's Dataset after checking it against the root attrs: complete, every variable present, one
    sample count; bfloat16 decoded to float32."""
    per_sample = (*stored_variables(attrs), *SAMPLE_VARIABLES)
    missing = [v for v in per_sample if v not in dataset.variables]
    if missing:
        raise StoreError(f"store {path}: group {group!r} lacks {', '.join(missing)}")
    if dataset.attrs.get("complete") is not True:
        raise StoreError(f"store {path}: group {group!r} incomplete")
    if any(dataset.variables[v].shape[0] != dataset.sizes["sample"] for v in per_sample):
        raise StoreError(f"store {path}: group {group!r} has variables of different sample counts")
    return decode_dataset(dataset)


def _known_group(path: str | Path, attrs: dict[str, Any], group: str) -> None:
    if group not in attrs["groups"]:
        raise StoreError(f"store {path}: no group {group!r} (groups: {', '.join(attrs['groups'])})")


def open_store(path: str | Path, chunks: dict[str, int] | None = None) -> xr.DataTree:
    """The store as an xarray DataTree, one node per insertion point (lazy: no chunk of q or z is read), after
    checking its format version and that it and every group are complete; otherwise one line naming the store
    and the problem. Without `chunks`, what `xr.open_datatree(path, engine="zarr", consolidated=False)` gives;
    with `chunks={}`, q and z are dask arrays in the store's chunks (a store bigger than memory, read chunk by
    chunk) and the per-sample coordinates are in memory. bfloat16 is decoded to float32. A damaged chunk is
    named when the tree's data are read inside `reading(path)`."""
    attrs = store_attrs(path)
    with reading(path):
        tree = xr.open_datatree(path, engine="zarr", consolidated=False, chunks=chunks)
    for group in attrs["groups"]:
        if group not in tree.children:
            raise StoreError(f"store {path}: group {group!r} missing")
        dataset = _checked_group(path, attrs, group, tree[group].to_dataset(inherit=False))
        tree[group].dataset = dataset if chunks is None else _coordinates_in_memory(path, group, dataset)
    return tree


def open_group(path: str | Path, group: str) -> xr.Dataset:
    """The xarray Dataset of one insertion point, as `open_store(path, chunks={})` gives it (checked; q and z lazy
    and dask-backed in the store's chunks, the per-sample coordinates in memory), without opening the others."""
    attrs = store_attrs(path)
    _known_group(path, attrs, group)
    try:
        dataset = xr.open_zarr(path, group=group, consolidated=False)
    except Exception as error:
        raise StoreError(f"store {path}: group {group!r} unreadable ({type(error).__name__}: {error})") from None
    return _coordinates_in_memory(path, group, _checked_group(path, attrs, group, dataset))


def _coordinates_in_memory(path: str | Path, group: str, dataset: xr.Dataset) -> xr.Dataset:
    """`dataset` with its per-sample coordinates read (one chunk each, in one trip to zarr), so that a mask of them
    selects samples of a dask-backed q."""
    loaded = sync(_read_whole(Path(path) / group, SAMPLE_VARIABLES))
    return dataset.assign_coords({name: ("sample", values, dataset.variables[name].attrs)
                                  for name, values in zip(SAMPLE_VARIABLES, loaded)})


async def _read_whole(group: Path, names: tuple[str, ...]) -> list[np.ndarray]:
    """Arrays `names` of the zarr group at `group`, whole and concurrently."""
    opened = await zarr.api.asynchronous.open_group(store=LocalStore(group, read_only=True), mode="r", zarr_format=3)
    arrays = await asyncio.gather(*(opened.getitem(name) for name in names))
    return list(await asyncio.gather(*(array.getitem(slice(None)) for array in arrays)))


def stored_variables(attrs: dict[str, Any]) -> tuple[str, ...]:
    """The per-sample arrays a store holds (from its root attrs): q and z, or what its dump.variables kept."""
    return tuple(attrs["dump_variables"])


def require_variable(path: str | Path, variable: str, needed_by: str) -> None:
    """Fail in one line when a stage needs a variable the store was dumped without (dump.variables)."""
    kept = stored_variables(store_attrs(path))
    if variable not in kept:
        raise StoreError(f"store {path}: holds no {variable} (dumped with dump.variables {list(kept)}), which "
                         f"{needed_by} needs; dump it again with dump.variables [q, z]")


def split_of(dataset: xr.Dataset) -> np.ndarray:
    """The `split` coordinate as a plain object array of "train"/"test" (zarr returns numpy StringDType)."""
    return np.asarray(dataset["split"].values).astype(object)


def iter_sample_chunks(path: str | Path, group: str, variable: str, samples: np.ndarray | None = None,
                       ) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (start, block) over the sample chunks of one variable, one chunk in memory at a time.

    With `samples` (sorted positions), only those rows are yielded, chunk by chunk. A corrupted
    chunk raises StoreError naming the store, group, variable and sample range.
    """
    attrs = store_attrs(path)
    _known_group(path, attrs, group)
    if variable in ARRAY_VARIABLES:
        require_variable(path, variable, f"reading {group}/{variable}")
    try:
        array = zarr.open_array(Path(path) / group / variable, mode="r")
    except Exception as error:
        raise StoreError(f"store {path}: group {group!r} lacks {variable} ({type(error).__name__})") from None
    if zarr.open_group(Path(path) / group, mode="r").attrs.get("complete") is not True:
        raise StoreError(f"store {path}: group {group!r} incomplete")
    chunk = array.chunks[0]
    for start in range(0, array.shape[0], chunk):
        stop = min(start + chunk, array.shape[0])
        if samples is not None:
            wanted = samples[(samples >= start) & (samples < stop)]
            if not len(wanted):
                continue
        try:
            block = array[start:stop]
        except Exception as error:
            raise StoreError(f"store {path}: {group}/{variable} samples [{start}, {stop}) unreadable "
                             f"({type(error).__name__}); the store is damaged, dump it again") from None
        block = decode_block(block, array.attrs)
        if samples is not None:
            block = block[wanted - start]
        yield start, block


def damaged_chunk(path: str | Path, variables: tuple[str, ...] = (*ARRAY_VARIABLES, *SAMPLE_VARIABLES)) -> str | None:
    """Where a finished store is damaged: 'group/variable samples [a, b)' of its first chunk that does not
    read back (checksum, decompression or a missing file), or None when every chunk of `variables` reads."""
    attrs = store_attrs(path)
    for group in attrs["groups"]:
        for variable in (v for v in variables if v in SAMPLE_VARIABLES or v in stored_variables(attrs)):
            try:
                array = zarr.open_array(Path(path) / group / variable, mode="r")
            except Exception as error:
                return f"{group}/{variable} metadata unreadable ({type(error).__name__})"
            chunk = array.chunks[0]
            for start in range(0, array.shape[0], chunk):
                stop = min(start + chunk, array.shape[0])
                try:
                    array[start:stop]
                except Exception as error:
                    return f"{group}/{variable} samples [{start}, {stop}) unreadable ({type(error).__name__})"
    return None


@contextmanager
def reading(path: str | Path) -> Iterator[None]:
    """Every read of store `path` inside this block (xarray, dask, zarr) fails as one StoreError naming the
    store and the damaged chunk (group, variable, sample range) instead of a traceback from deep inside."""
    try:
        yield
    except GrowcertError:
        raise
    except Exception:
        where = damaged_chunk(path) if Path(path).is_dir() else None
        if where is None:
            raise
        raise StoreError(f"store {path}: {where}; the store is damaged, dump it again") from None


# The attrs that name the model a store was dumped from: the identity columns of every per-store table.
IDENTITY = ["family", "dataset", "width", "depth", "seed", "step"]


def store_identity(path: str | Path) -> dict[str, Any]:
    """The store's model: family, dataset, width, depth, seed and step, from its root attrs, and the
    context of a context sweep's run (absent otherwise, so other tables keep their columns)."""
    attrs = store_attrs(path)
    return {key: attrs[key] for key in IDENTITY + [key for key in ("context",) if key in attrs]}
