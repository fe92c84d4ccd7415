"""Model checkpoints: weights plus everything needed to rebuild the model and trace it.

A checkpoint is one `torch.save` file holding the state dict, the family, width, depth,
the prepared dataset's `info`, the family options, the training step and the
provenance block. `load_checkpoint` rebuilds the network through `build_model`, so
every later stage (dump, interventions, growth) gets the same model the trainer had.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from growcert.errors import CheckpointError
from growcert.models import build_model


def save_checkpoint(path: str | Path, model: nn.Module, *, family: str, width: int, depth: int,
                    data_info: dict[str, Any], model_options: dict[str, Any], step: int,
                    provenance: dict[str, Any]) -> None:
    """Write atomically (temp file + rename): a killed job never leaves a readable half file."""
    path = Path(path)
    payload = {
        "format": "growcert-checkpoint-1",
        "state_dict": model.state_dict(),
        "family": family, "width": width, "depth": depth,
        "data_info": data_info, "model_options": model_options,
        "step": step, "provenance": provenance,
    }
    temporary = path.with_name(f".{path.name}.partial")
    torch.save(payload, temporary)
    os.replace(temporary, path)


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
    model = build_model(payload["family"], payload["width"], payload["depth"], payload["data_info"],
                        payload["model_options"])
    model.load_state_dict(payload["state_dict"])
    model.eval()
    metadata = {key: value for key, value in payload.items() if key != "state_dict"}
    return model, metadata
