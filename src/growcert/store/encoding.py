"""How the gradient store holds q and z on disk: which variables, in what precision, in what files.

Three dump options (config key `dump`, defaults in the schema), each recorded in the store's root attrs
(`dump_variables`, `dump_dtype`, `dump_shards`) so that a reader knows what it holds:

    variables  [q, z] or [q]: q alone halves a store, for stores no depth or intervention stage reads
    dtype      float32, or bfloat16: half the bytes, 8 significant bits
    shards     null, or chunks per Zarr v3 shard: one file holds that many chunks (a parallel filesystem
               copes badly with tens of thousands of small files); every inner chunk keeps its CRC32C

bfloat16 is stored as its 16-bit pattern (zarr and numpy have no bfloat16 dtype): a uint16 array whose
attr `growcert_encoding = "bfloat16"` says what the bits mean. The upper half of a float32 *is* its
bfloat16, so decoding is a shift (exact) and encoding rounds to nearest, ties to even (what torch's
`.to(torch.bfloat16)` does). float16 was the other choice and is worse here: its smallest normal number is
6.1e-5, and per-example activation gradients of a trained model routinely sit at 1e-6..1e-9 (a
1/n-scaled loss, a deep stream), where float16 flushes them to zero or to a few bits of precision;
bfloat16 keeps float32's exponent range and loses only mantissa bits (relative error <= 2^-9 per value).

Readers never see the bits: `decode_dataset` turns such variables back into float32 lazily (dask), and
`decode_block` does the same for a block read straight from zarr.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

ENCODING_ATTR = "growcert_encoding"
BFLOAT16 = "bfloat16"
DTYPES = ("float32", BFLOAT16)
ALL_VARIABLES = ("q", "z")
# The quiet NaN of bfloat16 (float32 0x7FC00000's upper half): the fill value of unwritten samples.
BFLOAT16_NAN = 0x7FC0


@dataclass(frozen=True)
class StoreOptions:
    """The dump options that shape a store (see the module docstring)."""

    variables: tuple[str, ...] = ALL_VARIABLES
    dtype: str = "float32"
    shards: int | None = None  # chunks per shard; None: one file per chunk

    def __post_init__(self) -> None:
        if "q" not in self.variables or set(self.variables) - set(ALL_VARIABLES):
            raise ValueError(f"store variables must be q, or q and z; got {list(self.variables)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"store dtype must be one of {DTYPES}; got {self.dtype!r}")
        if self.shards is not None and self.shards < 1:
            raise ValueError(f"store shards must be None or >= 1; got {self.shards}")

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> StoreOptions:
        """From resolved dump settings (keys variables, dtype, shards)."""
        variables = tuple(v for v in ALL_VARIABLES if v in settings["variables"])  # q before z, duplicates dropped
        return cls(variables, settings["dtype"], settings["shards"])

    @property
    def attrs(self) -> dict[str, Any]:
        return {"dump_variables": list(self.variables), "dump_dtype": self.dtype, "dump_shards": self.shards}

    @property
    def itemsize(self) -> int:
        return 2 if self.dtype == BFLOAT16 else 4

    @property
    def zarr_dtype(self) -> str:
        return "uint16" if self.dtype == BFLOAT16 else "float32"

    @property
    def fill_value(self) -> Any:
        return BFLOAT16_NAN if self.dtype == BFLOAT16 else np.nan

    @property
    def array_attrs(self) -> dict[str, Any]:
        return {ENCODING_ATTR: BFLOAT16} if self.dtype == BFLOAT16 else {}

    def encode(self, values: np.ndarray) -> np.ndarray:
        return float32_to_bfloat16_bits(values) if self.dtype == BFLOAT16 else values


def float32_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """The bfloat16 nearest each float32 (ties to even), as uint16 bit patterns. Finite inputs only (the
    dump refuses non-finite values before they reach the store)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    # Adding 0x7FFF plus the lowest kept bit rounds the dropped 16 bits to nearest, ties to the even pattern.
    rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return ((bits + rounding) >> np.uint32(16)).astype(np.uint16)


def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """Exact float32 values of uint16 bfloat16 patterns."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def decode_block(block: np.ndarray, attrs: Any) -> np.ndarray:
    """A block read from a zarr array, as float32 when the array holds bfloat16 bits (else unchanged)."""
    return bfloat16_bits_to_float32(block) if dict(attrs).get(ENCODING_ATTR) == BFLOAT16 else block


def decode_dataset(dataset: xr.Dataset) -> xr.Dataset:
    """`dataset` with every bfloat16-encoded variable as lazy float32 (its attrs minus the encoding marker)."""
    for name, variable in list(dataset.data_vars.items()):
        if variable.attrs.get(ENCODING_ATTR) != BFLOAT16:
            continue
        data = variable.data
        decoded = (
            data.map_blocks(bfloat16_bits_to_float32, dtype=np.float32)
            if hasattr(data, "map_blocks")
            else bfloat16_bits_to_float32(np.asarray(data))
        )
        attrs = {key: value for key, value in variable.attrs.items() if key != ENCODING_ATTR}
        dataset[name] = xr.Variable(variable.dims, decoded, attrs)
    return dataset


def shard_samples(chunk: int, n_samples: int, options: StoreOptions) -> int | None:
    """Samples per shard, None when not sharded. A shard is a whole number of chunks (Zarr requires it):
    `shards` chunks, or as few as cover every sample when there are fewer, the last one reaching past the end."""
    if not options.shards:
        return None
    return chunk * min(options.shards, -(-n_samples // chunk))
