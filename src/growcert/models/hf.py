"""Pretrained Hugging Face causal LMs as the model family `hf` (P1: Pythia; P2: Qwen; P3: GPT-2, Pythia).

P1 and P3 measure pretrained checkpoints (the Pythia suite, GPT-2-style models); this module lets every
stage that reads a model (dump, interventions) read one. `HFCausalLM` wraps a `transformers` causal LM
(GPT-NeoX/Pythia, GPT-2, Qwen2, and any decoder whose layers take the residual stream as their first
argument and return it) without touching its modules or weights:

    block0        the residual stream entering decoder layer 1 (embeddings, plus GPT-2's position
                  embeddings, after embedding dropout): a forward *pre*-hook on the first layer
    block{i}      the residual stream leaving decoder layer i (i = 1 ... L): a forward hook on layer i

Each hook routes the stream through the point's `InsertionPoint` and hands the result on, so capture's
hooks find z by name and a zero-output block appended to `points[p].inserted` adds its output to the
stream exactly where the layer's residual add left it (function unchanged while W_out = 0). The final
norm and the LM head read the stream after block{L}, as in the unwrapped model.

Loading (`load_causal_lm`) never touches the network unless asked: a local folder (what
`hf download REPO --local-dir DIR` writes), else the repository id looked up in the local Hugging Face
cache, else — only with `allow_download` — the Hub. Models load in float32 with eager attention, so
per-example gradients are exact and examples never interact (no padding, no batch statistics).

Tokens: a checkpoint folder that holds a tokenizer is read through it (`tokenizer: auto`): the byte
streams of the prepared text dataset are decoded as UTF-8 and tokenized chunk by chunk, once per prepared
data and tokenizer, into memory-mapped streams cached in the prepared folder (growcert.data.tokenized), and windows of
`context` tokens are cut from the token streams exactly as from byte streams (a store's `index` is then a token offset).
Without a tokenizer, or with `tokenizer: bytes`, byte values are the token ids (the model needs a vocabulary of at least
256: the tiny test models).

Byte-level text (`load_byte_level_lm`, for the DPO task of experiments/preference.py): the same loader, plus
the token id of each byte value in the checkpoint's tokenizer (`byte_token_ids`), so a byte-level
experiment can run on a pretrained model without re-tokenizing.

Public API: HFSettings, checkpoint_folder, load_causal_lm, load_tokenizer, decoder_layers, HFCausalLM,
load_pretrained; byte_level_symbols, byte_token_ids, ByteLevelLM, load_byte_level_lm.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

from growcert.config import settings_hash, stage_settings
from growcert.errors import CheckpointError, ConfigError, GrowcertError
from growcert.models import Family
from growcert.models.llama import FAMILY as LLAMA
from growcert.models.llama import Llama
from growcert.models.points import InsertionPoint, point_names
from growcert.pipeline.artifacts import HF_CONFIG

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass
class HFSettings:
    """How one pretrained checkpoint is read (stage `pretrained_model` of `config.stage_settings`: the keys of config
    `pretrained` every model shares, and one entry of `pretrained.models`; defaults in the schema)."""

    context: int  # tokens per sequence the dump cuts from the text
    tokenizer: str  # auto: the checkpoint's tokenizer if it has one, else bytes; bytes: byte ids
    allow_download: bool  # fetch from the Hub when neither the folder nor the cache holds it
    repo: str | None  # Hub repository id (looked up in the cache; named in the how-to-fetch line)
    name: str | None  # the model's name in the config (labels the store)
    path: str | None  # its folder in the config (the command line names it as --checkpoint)
    width: int | None  # expected hidden size (None: whatever the checkpoint has)
    depth: int | None  # expected number of decoder layers
    step: int  # training step of the checkpoint (labels the store; Pythia's final is 143000)
    seed: int  # training seed of the checkpoint (labels the store)

    @classmethod
    def from_dict(cls, settings: dict[str, Any] | None) -> HFSettings:
        return cls(**stage_settings("pretrained_model", settings))


def _quiet_transformers() -> None:
    """No progress bars or advisory warnings in the stage logs (errors still raise)."""
    try:
        from transformers.utils import logging
    except ImportError:
        raise GrowcertError("model family hf needs transformers: `make install`, or pip install -e '.[hf]'") from None

    logging.disable_progress_bar()
    logging.set_verbosity_error()


def checkpoint_folder(path: str | Path, repo: str | None = None, allow_download: bool = False) -> str:
    """The local folder (or, with `allow_download`, the repository id) that `from_pretrained` should read.

    Looks, in order, at `path` itself (a folder with a config.json), then at the repository id (`repo`,
    or `path` when it looks like `org/name` and `org` is no local folder) in the local Hugging Face cache. Raises
    CheckpointError in one line naming where it looked and how to provide the checkpoint.
    """
    folder = Path(path).expanduser()
    if HF_CONFIG.path(folder).is_file():
        return str(folder)
    # `org/name` is a repository id unless its `org` part is a local folder (then it is a missing checkpoint
    # folder such as checkpoints/pythia-70m, and the hint below must not tell the user to download it).
    looks_like_repo = REPO_ID.match(str(path)) and not folder.exists() and not folder.parent.exists()
    repo = repo or (str(path) if looks_like_repo else None)
    _quiet_transformers()  # a clear line if transformers (and with it huggingface_hub) is not installed
    from huggingface_hub import constants, snapshot_download

    if repo is not None:
        try:
            cached = snapshot_download(repo, local_files_only=True)
        except Exception:  # LocalEntryNotFoundError and friends: not in the cache
            cached = None
        if cached is not None and HF_CONFIG.path(Path(cached)).is_file():
            return cached
        if allow_download:
            return repo
    where = f"no {HF_CONFIG.name} in {folder.resolve()}"
    if repo is not None:
        where += f", and {repo} is not in the local Hugging Face cache ({constants.HF_HUB_CACHE})"
    fetch = f"hf download {repo or 'ORG/NAME'} --local-dir {folder.resolve()}"
    advice = f"on a machine with internet run `{fetch}` (or `huggingface-cli download ...`) and copy the folder here"
    if repo is not None:
        advice += ", or allow downloads (config pretrained.allow_download: true; CLI --hf '{\"allow_download\": true}')"
    raise CheckpointError(f"hf checkpoint {path}: {where}; {advice}")


def load_causal_lm(path: str | Path, allow_download: bool = False, repo: str | None = None):
    """A `transformers` causal LM from a local folder or the local cache (float32, eager attention, eval mode).

    Nothing is downloaded unless `allow_download`; a missing checkpoint raises CheckpointError naming
    where it looked and how to fetch it.
    """
    return _load_from(checkpoint_folder(path, repo, allow_download), path)


def _load_from(source: str, path: str | Path):
    """The causal LM at `source` (a folder from `checkpoint_folder`, or a Hub id it allowed to download)."""
    _quiet_transformers()
    from transformers import AutoModelForCausalLM

    local = Path(source).is_dir()
    try:
        # float32 and eager attention: fused kernels may reorder reductions across the batch, and the
        # per-example gradients must equal those of each example alone
        model = AutoModelForCausalLM.from_pretrained(
            source, local_files_only=local, dtype=torch.float32, attn_implementation="eager"
        )
    except Exception as error:  # a folder with a config but no weights, an unknown architecture, ...
        raise CheckpointError(f"hf checkpoint {path}: cannot load {source} ({type(error).__name__}: {error})") from None
    return model.eval()


def load_tokenizer(source: str, allow_download: bool = False):
    """The checkpoint's tokenizer, or None when its folder holds none."""
    if Path(source).is_dir() and not any((Path(source) / name).is_file() for name in TOKENIZER_FILES):
        return None
    _quiet_transformers()
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source, local_files_only=not allow_download or Path(source).is_dir())
    except Exception as error:
        raise CheckpointError(
            f"hf checkpoint {source}: cannot load its tokenizer ({type(error).__name__}: {error}); "
            f"use tokenizer: bytes to feed byte ids"
        ) from None


def decoder_layers(lm: nn.Module, depth: int) -> nn.ModuleList:
    """The list of decoder layers of a causal LM (`layers` in GPT-NeoX/Qwen2/LLaMA, `h` in GPT-2)."""
    base = getattr(lm, "base_model", lm)
    for name in ("layers", "h", "blocks"):
        candidate = getattr(base, name, None)
        if isinstance(candidate, nn.ModuleList) and len(candidate) == depth:
            return candidate
    for _, module in base.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == depth:
            return module
    raise CheckpointError(f"hf model {type(lm).__name__}: no list of {depth} decoder layers found")


class HFCausalLM(nn.Module):
    """A pretrained causal LM with named insertion points on its residual stream (see the module docstring)."""

    family = "hf"

    def __init__(self, lm: nn.Module, tokenizer: Any = None):
        super().__init__()
        text = lm.config.get_text_config()
        self.lm = lm
        self.tokenizer = tokenizer
        self.width = int(text.hidden_size)
        self.depth = int(text.num_hidden_layers)
        self.vocab_size = int(lm.get_output_embeddings().weight.shape[0])
        self.max_positions = getattr(text, "max_position_embeddings", None)
        self.points = nn.ModuleDict({name: InsertionPoint(name) for name in point_names(self.depth)})
        layers = decoder_layers(lm, self.depth)
        self._hooks = [layers[0].register_forward_pre_hook(self._enter, with_kwargs=True)]
        self._hooks += [
            layer.register_forward_hook(partial(self._leave, f"block{index}"))
            for index, layer in enumerate(layers, start=1)
        ]
        self.eval()

    def _enter(self, layer: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Route the stream entering the first layer through block0 (positional or keyword hidden_states)."""
        if args:
            return (self.points["block0"](args[0]), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": self.points["block0"](kwargs["hidden_states"])}

    def _leave(self, name: str, layer: nn.Module, args: tuple, output: Any) -> Any:
        """Route a layer's output stream through its point (layers return a tensor, or a tuple led by it)."""
        if isinstance(output, tuple):
            return (self.points[name](output[0]), *output[1:])
        return self.points[name](output)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens (batch, T) int64 -> next-token logits (batch, T, vocab)."""
        if self.max_positions is not None and tokens.shape[1] > self.max_positions:
            raise ValueError(f"sequence of {tokens.shape[1]} tokens exceeds the model's {self.max_positions} positions")
        return self.lm(input_ids=tokens, use_cache=False).logits

    per_example_loss = staticmethod(Llama.per_example_loss)  # mean next-token loss of each sequence
    per_example_correct = staticmethod(Llama.per_example_correct)  # fraction of positions predicted

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.lm.parameters())


def load_pretrained(path: str | Path, settings: dict[str, Any] | None = None) -> tuple[HFCausalLM, dict[str, Any]]:
    """The `hf` model of a checkpoint and its metadata (what `checkpoint.load_checkpoint` returns for `.pt` files)."""
    resolved = HFSettings.from_dict(settings)
    source = checkpoint_folder(path, resolved.repo, resolved.allow_download)
    lm = _load_from(source, path)
    tokenizer = None if resolved.tokenizer == "bytes" else load_tokenizer(source, resolved.allow_download)
    model = HFCausalLM(lm, tokenizer)
    label = resolved.name or str(path)
    for key, expected, actual in (("width", resolved.width, model.width), ("depth", resolved.depth, model.depth)):
        if expected is not None and expected != actual:
            raise CheckpointError(
                f"hf checkpoint {path}: has {key} {actual} ({'hidden size' if key == 'width' else 'layers'}) "
                f"but {label} is declared with {key} {expected}; fix the config's pretrained.models entry"
            )
    if tokenizer is None and model.vocab_size < 256:
        raise CheckpointError(
            f"hf checkpoint {path}: no tokenizer and a vocabulary of {model.vocab_size} < 256 byte "
            f"values; put the model's tokenizer files in {source}"
        )
    if model.max_positions is not None and resolved.context > model.max_positions:
        raise ConfigError(f"hf context {resolved.context} exceeds the {model.max_positions} positions of {label}")
    model_config = json.loads(lm.config.to_json_string(use_diff=False))
    tokenizer_name = "bytes" if tokenizer is None else (getattr(tokenizer, "name_or_path", "") or source)
    metadata = {
        "family": "hf",
        "width": model.width,
        "depth": model.depth,
        "step": resolved.step,
        "model_options": {"context": resolved.context},
        "provenance": {
            "seed": resolved.seed,
            "config_hash": settings_hash({"settings": asdict(resolved), "model_config": model_config}),
        },
        "store_attrs": {
            "model_name": label,
            "source": str(source),
            "architecture": type(lm).__name__,
            "tokenizer": tokenizer_name,
            "vocab_size": model.vocab_size,
            "num_parameters": model.num_parameters(),
            "hf_settings": asdict(resolved),
        },
    }
    return model, metadata


# ---------------------------------------------------------------------------
# Byte-level text on a pretrained model (the DPO task, experiments/preference.py, reads bytes, not tokens)


def byte_level_symbols() -> list[str]:
    """The character byte-level BPE (GPT-2, GPT-NeoX/Pythia, Qwen2) writes for each byte value 0..255.

    GPT-2's `bytes_to_unicode`: printable Latin-1 bytes stand for themselves and the 68 others (control
    characters, space, soft hyphen, ...) for chr(256), chr(257), ... in byte order, so that every byte has
    a visible, whitespace-free symbol in the vocabulary.
    """
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    symbols, shifted = [], 0
    for byte in range(256):
        symbols.append(chr(byte) if byte in printable else chr(256 + shifted))
        shifted += byte not in printable
    return symbols


def byte_token_ids(tokenizer: Any, vocab_size: int) -> tuple[torch.Tensor, str]:
    """(token id of each byte value, LongTensor (256,); how it was found) for a checkpoint's tokenizer.

    Tried in order: the byte-level BPE alphabet (GPT-2, Pythia, Qwen2), SentencePiece byte-fallback
    tokens `<0x00>`...`<0xFF>` (LLaMA-style); with no tokenizer, or one that has neither, byte b is token
    b (the tiny test models; a real tokenizer's ids 0..255 are then arbitrary tokens, as the description says).
    """
    alphabets = (
        ("byte-level BPE alphabet of the tokenizer", byte_level_symbols()),
        ("byte-fallback tokens <0xNN> of the tokenizer", [f"<0x{byte:02X}>" for byte in range(256)]),
    )
    vocabulary = tokenizer.get_vocab() if tokenizer is not None else {}
    for description, symbols in alphabets:
        ids = [vocabulary.get(symbol) for symbol in symbols]
        if all(i is not None and 0 <= i < vocab_size for i in ids) and len(set(ids)) == 256:
            return torch.tensor(ids, dtype=torch.long), description
    if vocab_size < 256:
        raise CheckpointError(f"hf model: a vocabulary of {vocab_size} < 256 tokens cannot hold byte-level text")
    return torch.arange(256), "identity (token id = byte value)"


@dataclass
class ByteLevelLM:
    """A pretrained causal LM read on byte-level text (what `load_byte_level_lm` returns).

    `model(tokens)`: token ids (b, T) int64 -> logits (b, T, vocab), an `HFCausalLM` in eval mode (call
    `.train()` to fine-tune it; its parameters are the checkpoint's). Byte b is token `byte_to_id[b]`.
    """

    model: HFCausalLM
    byte_to_id: torch.Tensor  # (256,) int64
    mapping: str  # how byte_to_id was found (byte_token_ids)
    vocab_size: int
    source: str  # the folder the model was read from

    def byte_logits(self, byte_ids: torch.Tensor) -> torch.Tensor:
        """Bytes (b, T) int64 -> logits over the 256 byte tokens (b, T, 256): the model as a byte-level LM
        (its other tokens are left out of the softmax, so sampled or scored text stays bytes)."""
        ids = self.byte_to_id.to(byte_ids.device)
        return self.model(ids[byte_ids])[..., ids]


def load_byte_level_lm(path: str | Path, allow_download: bool = False, repo: str | None = None) -> ByteLevelLM:
    """A local causal LM (folder, or `repo` in the local cache; no download unless `allow_download`) for
    byte-level text: the model, tokens -> logits, and the byte -> token id map of its tokenizer."""
    source = checkpoint_folder(path, repo, allow_download)
    model = HFCausalLM(_load_from(source, path), load_tokenizer(source, allow_download))
    byte_to_id, mapping = byte_token_ids(model.tokenizer, model.vocab_size)
    return ByteLevelLM(model, byte_to_id, mapping, model.vocab_size, str(source))


# A pretrained decoder: loaded (load_pretrained), never built; its points are block0..block{layers}.
# Its loss is the byte LM's (`per_example_loss` above), so are the words for it.
FAMILY = Family(
    name="hf",
    data_kind="text",
    loss_name=LLAMA.loss_name,
    loss_description=LLAMA.loss_description,
    native_dims=("token", "feature"),
    channel_dim=-1,
    block_norm="rms",
    point_count=lambda depth: depth + 1,
    stream_features=lambda model, point: model.width,
    depth_problem=lambda depth: None,
    context=True,
    loss_unit=LLAMA.loss_unit,
)
