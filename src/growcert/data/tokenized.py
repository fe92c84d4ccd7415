"""A prepared byte-level text dataset re-read through a tokenizer (for pretrained language models).

The prepared Shakespeare streams hold UTF-8 bytes. A pretrained model reads its own tokens, so each
split's stream is cut back into the contiguous chunks the split was made of (`segment_starts`), each
chunk is decoded (an invalid byte sequence, e.g. a character cut by a chunk boundary, becomes U+FFFD)
and tokenized without special tokens, and the chunks' token ids are concatenated in the same order.
Tokenizing chunk by chunk keeps every token inside one chunk, so, as with bytes, no token of a window
comes from text the split put on the other side.

The result is a `PreparedDataset` whose `train_x`/`test_x` are int64 token streams: windows, batches and
the store's `index` (now a token offset) work on it unchanged. Its name and `sha256` stay the source
dataset's (a store still pairs with the prepared data it came from); `info` records the tokenizer.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from growcert.data.common import DatasetError
from growcert.data.prepared import PreparedDataset


def _chunks(data: PreparedDataset, split: str) -> list[str]:
    stream = data.train_x if split == "train" else data.test_x
    bounds = np.append(data.segment_starts(split), len(stream))
    return [stream[start:stop].tobytes().decode("utf-8", errors="replace") for start, stop in zip(bounds[:-1], bounds[1:])]


def tokenized(data: PreparedDataset, encode: Callable[[Sequence[str]], Sequence[Sequence[int]]], tokenizer: str,
              vocab_size: int) -> PreparedDataset:
    """`data` with its byte streams replaced by token streams; `encode` maps a list of texts to token id lists."""
    if data.kind != "text":
        raise DatasetError(f"dataset '{data.name}': only text datasets can be tokenized")
    streams = {}
    for split in ("train", "test"):
        ids = [np.asarray(chunk, dtype=np.int64) for chunk in encode(_chunks(data, split))]
        streams[split] = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
        if len(streams[split]) and (streams[split].min() < 0 or streams[split].max() >= vocab_size):
            raise DatasetError(f"dataset '{data.name}': tokenizer {tokenizer} produced ids outside [0, {vocab_size})")
    info = {**data.info, "vocab_size": int(vocab_size), "encoding": f"tokens of {tokenizer} (chunk by chunk)",
            "tokenization": {"tokenizer": tokenizer, "source_encoding": data.info.get("encoding"),
                             "n_train_tokens": int(len(streams["train"])), "n_test_tokens": int(len(streams["test"])),
                             "index": "token offset in the split's token stream"}}
    return dataclasses.replace(data, info=info, train_x=streams["train"], test_x=streams["test"])
