"""`growcert inspect`: what a gradient store holds, how it is stored, and a first look at q.

`describe_store` returns it as plain data (`growcert inspect --json`), `inspect_store` as text.
Per group: dims, shapes, dtypes, chunking, compression ratio (logical bytes / bytes on disk),
attrs, and per split the mean per-example norm ‖q_i‖ and the norm of the mean ‖mean_i q_i‖
(q flattened per example), computed chunk by chunk so a large store is never loaded whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from growcert.errors import StoreError
from growcert.pipeline.artifacts import STORE_ROOT
from growcert.store.format import ARRAY_VARIABLES, SAMPLE_VARIABLES
from growcert.store.reader import damaged_chunk, iter_sample_chunks, open_store, split_of, stored_variables


def _stored_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and path.name != STORE_ROOT.name)


def q_summary(path: str | Path, group: str, split: np.ndarray) -> dict[str, dict[str, float]]:
    """Per split: number of examples, mean ‖q_i‖ and ‖mean q‖, streaming over chunks."""
    sums: dict[str, dict] = {}
    for start, block in iter_sample_chunks(path, group, "q"):
        flat = block.reshape(len(block), -1).astype(np.float64)
        labels = split[start : start + len(block)]
        for name in np.unique(labels):
            rows = flat[labels == name]
            entry = sums.setdefault(str(name), {"n": 0, "norm_sum": 0.0, "vector_sum": np.zeros(flat.shape[1])})
            entry["n"] += len(rows)
            entry["norm_sum"] += float(np.linalg.norm(rows, axis=1).sum())
            entry["vector_sum"] += rows.sum(axis=0)
    return {
        name: {
            "n": e["n"],
            "mean_norm_q": e["norm_sum"] / e["n"],
            "norm_mean_q": float(np.linalg.norm(e["vector_sum"] / e["n"])),
        }
        for name, e in sums.items()
    }


def describe_store(path: str | Path, summaries: bool = True) -> dict[str, Any]:
    """What a store holds, as plain data (`growcert inspect --json`): attrs, provenance, and per group its
    sizes, compression and variables (dims, shape, dtype, chunks, long_name) and, with `summaries`, q per split."""
    path = Path(path)
    tree = open_store(path)
    attrs, kept = dict(tree.attrs), stored_variables(tree.attrs)
    if summaries:  # q is read chunk by chunk below; every other variable is checked here, once
        where = damaged_chunk(path, tuple(v for v in (*ARRAY_VARIABLES, *SAMPLE_VARIABLES) if v != "q"))
        if where:
            raise StoreError(f"store {path}: {where}; the store is damaged, dump it again")
    description = {
        "store": str(path),
        "format": attrs["format"],
        "complete": attrs["complete"],
        "attrs": {
            key: value for key, value in attrs.items() if key not in ("provenance", "groups", "format", "complete")
        },
        "provenance": attrs.get("provenance", {}),
        "groups": {},
    }
    for group in attrs["groups"]:
        dataset = tree[group].to_dataset(inherit=False)
        # Logical bytes as stored (2 per value for bfloat16), so the ratio is the compressor's alone.
        logical = sum(zarr.open_array(path / group / v, mode="r").nbytes for v in kept)
        on_disk = sum(_stored_bytes(path / group / v) for v in kept)
        variables = {}
        for variable in (*kept, *SAMPLE_VARIABLES):
            array = zarr.open_array(path / group / variable, mode="r")
            variables[variable] = {
                "dims": list(dataset[variable].dims),
                "shape": list(array.shape),
                "dtype": str(dataset[variable].dtype),
                "stored_dtype": str(array.dtype),
                "chunks": list(array.chunks),
                "shards": list(array.shards or []) or None,
                "coordinate": variable in dataset.coords,
                "long_name": dataset[variable].attrs.get("long_name"),
            }
        description["groups"][group] = {
            "samples": int(dataset.sizes["sample"]),
            "attrs": dict(dataset.attrs),
            "native_dims": {d: int(s) for d, s in dataset.sizes.items() if d != "sample"},
            "compression": logical / max(on_disk, 1),
            "bytes_on_disk": int(on_disk),
            "variables": variables,
            "q_summary": q_summary(path, group, split_of(dataset)) if summaries else None,
        }
    return description


def inspect_store(path: str | Path, summaries: bool = True) -> str:
    """`describe_store` as the lines `growcert inspect` prints."""
    described = describe_store(path, summaries)
    prov = described["provenance"]
    lines = [
        f"store {described['store']}",
        f"  format {described['format']}, complete={described['complete']}",
        "  attrs: " + json.dumps(described["attrs"], default=str),
        f"  provenance: code {prov.get('code_hash')}, git {prov.get('git_commit')}, "
        f"config {prov.get('config_hash')}, versions {prov.get('versions')}",
        f"  dump options: variables {described['attrs']['dump_variables']}, dtype "
        f"{described['attrs']['dump_dtype']}, shards {described['attrs']['dump_shards']}",
    ]
    for group, info in described["groups"].items():
        lines.append(
            f"  group {group}: {info['samples']} samples, native dims {info['native_dims']}, "
            f"q+z compression {info['compression']:.2f}x ({info['bytes_on_disk'] / 2**20:.1f} MiB on disk)"
        )
        for variable, meta in info["variables"].items():
            stored = f" (stored {meta['stored_dtype']})" if meta["stored_dtype"] != meta["dtype"] else ""
            sharded = f", shards {tuple(meta['shards'])}" if meta["shards"] else ""
            kind = "coord" if meta["coordinate"] else "data"
            lines.append(
                f"    {variable:<6} {kind:<5} {str(tuple(meta['dims'])):<40} {str(tuple(meta['shape'])):<22} "
                f"{meta['dtype']:<13} chunks {tuple(meta['chunks'])}{sharded}{stored}  {meta['long_name']}"
            )
        for name, numbers in sorted((info["q_summary"] or {}).items(), key=lambda item: item[0] != "train"):
            lines.append(
                f"    q[{name}]: n={numbers['n']}  mean ||q_i|| = {numbers['mean_norm_q']:.4g}  "
                f"||mean q|| = {numbers['norm_mean_q']:.4g}"
            )
    return "\n".join(lines)
