"""The gradient store: one Zarr v3 store per model checkpoint (docs/design.md §5; docs/stores.md shows how to read it).

A package of rooms, one job each: `format` (the schema and its version), `writer` (`StoreWriter`), `reader`
(`open_store` and the checks every read passes), `encoding` (the dump options), `chunks` (chunk files byte for
byte), `inspect` (`growcert inspect`) and `compare` (`growcert compare-results`). This file only re-exports the
names a user imports from `growcert.store` (and `growcert.open_store`), so that nothing they import moved.
"""

from __future__ import annotations

# The package's export table, laid out by hand (ruff would put each name on a line of its own)
# isort: off
# fmt: off

from growcert.errors import GrowcertError, StoreError
from growcert.store.chunks import ArrayChunks, chunk_aligned
from growcert.store.encoding import StoreOptions, decode_block, decode_dataset, shard_samples
from growcert.store.format import (ARRAY_VARIABLES, FORMAT, FORMAT_NAME, FORMAT_VERSION, IDENTITY, MIN_CHUNK_BYTES,
                                   POSITION_NAMES, SAMPLE_VARIABLES, GroupSpec, position_attrs, sample_chunk,
                                   variable_attrs)
from growcert.store.reader import (damaged_chunk, iter_sample_chunks, open_group, open_store, reading, require_variable,
                                   split_of, store_attrs, store_identity, stored_variables)
from growcert.store.writer import StoreWriter

__all__ = ["ARRAY_VARIABLES", "FORMAT", "FORMAT_NAME", "FORMAT_VERSION", "IDENTITY", "MIN_CHUNK_BYTES",
           "POSITION_NAMES", "SAMPLE_VARIABLES", "ArrayChunks", "GroupSpec", "GrowcertError", "StoreError",
           "StoreOptions", "StoreWriter", "chunk_aligned", "damaged_chunk", "decode_block", "decode_dataset",
           "iter_sample_chunks", "open_group", "open_store", "position_attrs", "reading", "require_variable",
           "sample_chunk", "shard_samples", "split_of", "store_attrs", "store_identity", "stored_variables",
           "variable_attrs"]
# fmt: on
# isort: on
