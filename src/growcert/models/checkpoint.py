"""Model checkpoints: weights plus everything needed to rebuild the model and trace it (the store knows
arrays, not networks: loading a network is the models layer's).

A checkpoint is one `torch.save` file holding the state dict, the family, width, depth,
the prepared dataset's `info`, the family options, the training step and the
provenance block. `load_checkpoint` rebuilds the network through `build_model`, so
every later stage (dump, interventions, growth) gets the same model the trainer had.
`load_model` is what the stages that run a model call: such a checkpoint, or a pretrained
Hugging Face causal LM (family `hf`, `models/hf.py`) with the text re-read through its tokenizer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from growcert.data.tokenized import encoder, tokenized, tokenizer_identity
from growcert.errors import CheckpointError, ConfigError
from growcert.files import atomic_path
from growcert.models import build_model
from growcert.models.hf import load_pretrained


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    *,
    family: str,
    width: int,
    depth: int,
    data_info: dict[str, Any],
    model_options: dict[str, Any],
    step: int,
    provenance: dict[str, Any],
) -> None:
    """Write atomically (temp file + rename): a killed job never leaves a readable half file."""
    path = Path(path)
    payload = {
        "format": "growcert-checkpoint-1",
        "state_dict": {key: value.detach().cpu() for key, value in model.state_dict().items()},  # device-free
        "family": family,
        "width": width,
        "depth": depth,
        "data_info": data_info,
        "model_options": model_options,
        "step": step,
        "provenance": provenance,
    }
    with atomic_path(path) as temporary:
        torch.save(payload, temporary)


def load_checkpoint(path: str | Path, map_location: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """Rebuild the model of a checkpoint (eval mode) and return it with the checkpoint's metadata."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path}: no such file (train it with `growcert train` or `snakemake`)")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as error:  # torch raises several types for truncated or foreign files
        raise CheckpointError(f"checkpoint {path}: unreadable ({type(error).__name__}: {error})") from None
    if not isinstance(payload, dict) or payload.get("format") != "growcert-checkpoint-1":
        raise CheckpointError(f"checkpoint {path}: not a growcert checkpoint")
    missing = [
        key
        for key in ("state_dict", "family", "width", "depth", "data_info", "model_options", "step", "provenance")
        if key not in payload
    ]
    if missing:
        raise CheckpointError(f"checkpoint {path}: lacks {', '.join(missing)}")
    try:
        model = build_model(
            payload["family"], payload["width"], payload["depth"], payload["data_info"], payload["model_options"]
        )
        model.load_state_dict(payload["state_dict"])
    except Exception as error:  # a wrong family or shape, missing or extra weights
        first = " ".join(str(error).split())[:200]
        raise CheckpointError(
            f"checkpoint {path}: its weights do not fit a {payload['family']} of width "
            f"{payload['width']}, depth {payload['depth']} ({type(error).__name__}: {first})"
        ) from None
    model.eval()
    metadata = {key: value for key, value in payload.items() if key != "state_dict"}
    return model, metadata


def load_model(
    checkpoint: str | Path, data: Any, hf: dict[str, Any] | None = None
) -> tuple[nn.Module, dict[str, Any], Any]:
    """(model in eval mode, metadata, `data` as the model reads it), for every stage that runs a model.

    Without `hf`: a growcert checkpoint (`stepN.pt`) and the prepared dataset unchanged. With `hf` (the
    settings of `growcert.models.hf.HFSettings`, `{}` for the defaults): `checkpoint` is a pretrained
    Hugging Face causal LM (a folder, or a repository id in the local cache) of the family `hf`, and a
    text dataset is re-read through the checkpoint's tokenizer when it has one (`data/tokenized.py`: memory-mapped
    token streams, cached in the prepared folder and built on first use).
    """
    if hf is None:
        model, metadata = load_checkpoint(checkpoint)
        return model, metadata, data
    if data.kind != "text":
        raise ConfigError(f"family 'hf' reads text; dataset {data.name!r} is {data.kind}")
    model, metadata = load_pretrained(checkpoint, hf)
    if model.tokenizer is not None:
        data = tokenized(
            data,
            encoder(model.tokenizer),
            metadata["store_attrs"]["tokenizer"],
            model.vocab_size,
            tokenizer_identity(model.tokenizer),
        )
    return model, metadata, data
