"""The reference policy of the noisy-label DPO task (P2) and how text bytes become its tokens.

Two sources, one interface (a module mapping token ids (b, T) to logits (b, T, vocab), plus `byte_to_id`,
the token id of each of the 256 byte values, because prompts, continuations and the reward are bytes):

- the pipeline's own byte-level llama pretrained on Shakespeare (`growcert.models.checkpoint.load_checkpoint`):
  a run folder (its highest `step{N}.pt`) or one checkpoint file; byte b is token b;
- a local Hugging Face causal-LM checkpoint (the paper's Qwen2.5-0.5B-Instruct, for users who have its
  weights), read by the shared loader `growcert.models.hf.load_byte_level_lm` (nothing is downloaded),
  which also maps each byte to its tokenizer's single-byte token (byte_token_ids there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from growcert.errors import CheckpointError
from growcert.models.checkpoint import load_checkpoint
from growcert.models.hf import load_byte_level_lm
from growcert.pipeline.artifacts import CHECKPOINT_NAME

IDENTITY = "identity (token id = byte value)"


def checkpoint_file(path: str | Path) -> Path:
    """`path` itself, or for a training run folder its checkpoint of the highest step."""
    path = Path(path)
    if not path.is_dir():
        return path
    steps = {int(match.group(1)): file for file in path.iterdir() if (match := CHECKPOINT_NAME.fullmatch(file.name))}
    if not steps:
        raise CheckpointError(
            f"reference run {path}: no step{{N}}.pt checkpoint in it (train it with `growcert train` or `snakemake`)"
        )
    return steps[max(steps)]


def load_hf_reference(path: str | Path) -> tuple[nn.Module, torch.Tensor, dict[str, Any]]:
    """(model, byte_to_id, description) of a local Hugging Face causal-LM checkpoint (needs transformers)."""
    reference = load_byte_level_lm(path)
    model = reference.model
    description = {
        "kind": "huggingface",
        "path": str(path),
        "architecture": type(model.lm).__name__,
        "width": model.width,
        "depth": model.depth,
        "vocab_size": model.vocab_size,
        "mapping": reference.mapping,
    }
    return model, reference.byte_to_id, description


def load_pipeline_reference(path: str | Path) -> tuple[nn.Module, torch.Tensor, dict[str, Any], dict[str, Any]]:
    """(model, byte_to_id, description, dataset settings) of a byte-level llama the pipeline trained
    (a run folder or a `stepN.pt`)."""
    file = checkpoint_file(path)
    model, metadata = load_checkpoint(file)
    info = metadata["data_info"]
    if info.get("kind") != "text" or info.get("vocab_size", 0) < 256:
        raise CheckpointError(
            f"checkpoint {file}: not a byte-level language model (dataset {info.get('name')!r}); "
            "preference needs one trained on shakespeare"
        )
    description = {
        "kind": "growcert",
        "path": str(file),
        "family": metadata["family"],
        "width": metadata["width"],
        "depth": metadata["depth"],
        "step": metadata["step"],
        "dataset": info.get("name"),
        "mapping": IDENTITY,
    }
    return model, torch.arange(256), description, info.get("settings", {})


def model_context(model: nn.Module) -> int | None:
    """The longest token sequence the model accepts (None: no limit known)."""
    config = getattr(model, "config", None)
    return getattr(config, "context", None) or getattr(model, "max_positions", None)
