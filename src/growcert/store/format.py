"""The gradient store's format: its schema and version (docs/design.md §5; docs/stores.md shows how to read it).

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

Chunking: q and z along `sample` only; each group's chunk length is the smallest that puts at least 1 MB
in a q/z chunk (the whole array when it is smaller); coordinates are one chunk each, so a reader takes them
in one read and q's chunks stay the only ones along `sample`. Blosc zstd with byte shuffle, then a CRC32C of
every chunk, so a damaged chunk never reads as data: `reading()` names it (group, variable, samples).
With `dump.shards`, q's and z's chunks are grouped into Zarr v3 shards (one file per shard, each inner chunk
with its CRC32C, the shard index with its own). `dump.variables` and `dump.dtype` (q alone; bfloat16 bits)
are the other options of `store.encoding`; readers here decode bfloat16 to float32 and name a variable a
store lacks.

The writer (`store.writer`) and the reader (`store.reader`) both follow what this module says; a store of
another version is refused by the reader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zarr.codecs import BloscCodec, Crc32cCodec

FORMAT_NAME = "growcert-gradient-store"
FORMAT_VERSION = 2  # the layout above; a store of any other version is refused, naming the command that re-dumps it
FORMAT = f"{FORMAT_NAME}-{FORMAT_VERSION}"
MIN_CHUNK_BYTES = 1 << 20
# The per-sample coordinates, in the order q's and z's `coordinates` attribute names them.
SAMPLE_VARIABLES = ("split", "index", "label", "loss")
ARRAY_VARIABLES = ("q", "z")
# What a position coordinate's values are, by dim name (another dim's are "position along <dim>").
POSITION_NAMES = {
    "token": "position in the context window",
    "height": "row of the feature map",
    "width": "column of the feature map",
}


def variable_attrs(loss_description: str) -> dict[str, dict[str, str]]:
    """long_name, units and description of every per-sample variable: CF's attribute names, which xarray shows
    and plots by. `loss_description` is the family's (`Family.loss_description`): the loss's reduction and the
    factor it puts in q."""
    return {
        "q": {
            "long_name": "activation gradient",
            "units": "1",
            "description": "dℓ_i/dz: the gradient of example i's own loss ℓ_i (coordinate loss) with respect to "
            f"its activation z at this insertion point; ℓ_i is {loss_description}",
        },
        "z": {
            "long_name": "activation",
            "units": "1",
            "description": "z: example i's residual stream at this insertion point (block0: after the stem or "
            "embedding; blockk: after residual block k), the model in eval mode",
        },
        "loss": {
            "long_name": "per-example loss",
            "units": "1",
            "description": f"ℓ_i, the example's own loss: {loss_description}",
        },
        "split": {
            "long_name": "split",
            "units": "1",
            "description": "train: a row the model was fit on; test: a held-out row",
        },
        "index": {
            "long_name": "index in the prepared split",
            "units": "1",
            "description": "the example's row in its prepared split (images) or the byte offset of its window (text)",
        },
        "label": {
            "long_name": "class label",
            "units": "1",
            "description": "the example's class (images); -1 where the targets are the next tokens (text)",
        },
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


def compressors() -> list:
    # zstd level 1 with byte shuffle: on float32 gradients it compresses about as well as level 3, in a fraction
    # of the time (docs/science.md, "Cost"), which keeps the dump close to the cost of the passes themselves.
    # A CRC32C of every chunk after it: a few flipped bytes would otherwise decompress into silent garbage
    # (blosc checks no data); with it, any damaged chunk fails to read and is reported by name.
    return [BloscCodec(cname="zstd", clevel=1, shuffle="shuffle"), Crc32cCodec()]


# The attrs that name the model a store was dumped from: the identity columns of every per-store table.
IDENTITY = ["family", "dataset", "width", "depth", "seed", "step"]
