"""The gradient store's reader: `open_store` and the checks every read of a store passes through.

Reading: `open_store` (also `growcert.open_store`) is the one way to open a store in Python: the checked
DataTree. The stages read one point at a time with `open_group` (dask-backed, coordinates in memory) and
`iter_sample_chunks` (one chunk at a time); `store_attrs` gives the root attrs alone. All refuse a store
without `complete`, of another format version (naming the command that dumps it again), or whose groups
disagree with their attrs, in one line naming the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr
from zarr.core.sync import sync
from zarr.storage import LocalStore

from growcert.errors import GrowcertError, StoreError
from growcert.store.encoding import decode_block, decode_dataset
from growcert.store.format import ARRAY_VARIABLES, FORMAT, FORMAT_NAME, FORMAT_VERSION, IDENTITY, SAMPLE_VARIABLES


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
        raise StoreError(
            f"store {path} is of store version {version} ({written}); this growcert reads version "
            f"{FORMAT_VERSION} only: dump it again with `growcert dump --checkpoint "
            f"{attrs.get('checkpoint', 'CHECKPOINT')} --data DATA --out {path}` (DATA: the prepared "
            f"{attrs.get('dataset', 'dataset')} folder), or delete it and rerun the pipeline"
        )
    if attrs.get("complete") is not True:
        raise StoreError(
            f"store {path}: incomplete (no complete=true; its writer was interrupted), delete it and dump again"
        )
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
    return dataset.assign_coords(
        {name: ("sample", values, dataset.variables[name].attrs) for name, values in zip(SAMPLE_VARIABLES, loaded)}
    )


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
        raise StoreError(
            f"store {path}: holds no {variable} (dumped with dump.variables {list(kept)}), which "
            f"{needed_by} needs; dump it again with dump.variables [q, z]"
        )


def split_of(dataset: xr.Dataset) -> np.ndarray:
    """The `split` coordinate as a plain object array of "train"/"test" (zarr returns numpy StringDType)."""
    return np.asarray(dataset["split"].values).astype(object)


def iter_sample_chunks(
    path: str | Path,
    group: str,
    variable: str,
    samples: np.ndarray | None = None,
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
            raise StoreError(
                f"store {path}: {group}/{variable} samples [{start}, {stop}) unreadable "
                f"({type(error).__name__}); the store is damaged, dump it again"
            ) from None
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


def store_identity(path: str | Path) -> dict[str, Any]:
    """The store's model: family, dataset, width, depth, seed and step, from its root attrs, and the
    context of a context sweep's run (absent otherwise, so other tables keep their columns)."""
    attrs = store_attrs(path)
    return {key: attrs[key] for key in IDENTITY + [key for key in ("context",) if key in attrs]}
