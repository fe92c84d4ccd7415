"""Preference pairs of the noisy-label DPO task (P2): the known reward, prompts, continuations
sampled from the reference policy, clean pairs, and the seeded label swap.

- prompt (`prompt_windows`): a window of `prompt_bytes` bytes of the Shakespeare train split (held-out
  pairs: of the test split) inside one contiguous chunk of the split, so that it is real text;
- continuations (`sample_continuations`): two samples of `continuation_bytes` bytes from the reference
  policy itself at temperature 1 (as in DPO practice, the pairs are on-policy for the reference); with a
  Hugging Face model, sampling is restricted to the tokens of the 256 byte values;
- the known reward (`vowel_reward`): the number of vowel letters a e i o u (either case) in the
  continuation. It is learnable (raising the probability of vowel bytes in context raises it) and not
  trivial (vowels compete with the spaces, punctuation, capitals and consonants the text needs, and the
  implicit reward must rank continuations sampled for *unseen* prompts). The preferred continuation is
  the one with the larger reward; pairs with tied rewards are dropped and replaced, so every pair has a
  strict preference and the reward ranks its own clean pairs with accuracy 1;
- label noise (`swap_labels`): exactly round(rate · count) training pairs (Python's round), the first
  ones of a permutation seeded by the run's seed, have chosen and rejected exchanged. Held-out pairs are
  always clean.
"""

from __future__ import annotations

import math
import tempfile
from typing import Any

import numpy as np
import torch
from torch import nn

from growcert.data import PreparedDataset, load_prepared, prepare_dataset
from growcert.errors import ConfigError

VOWELS = np.frombuffer(b"aeiouAEIOU", dtype=np.uint8)
MAX_DRAWS = 50  # rounds of sampling before a reward that ties on nearly every pair is reported


def vowel_reward(continuations: np.ndarray) -> np.ndarray:
    """Number of vowel letters (a e i o u, either case) in each continuation: (n, L) bytes -> (n,)."""
    return np.isin(continuations, VOWELS).sum(axis=-1).astype(np.int64)


def reward_accuracy(chosen: torch.Tensor | np.ndarray, rejected: torch.Tensor | np.ndarray) -> float:
    """Fraction of pairs whose chosen reward exceeds the rejected one, a tie counting ½."""
    chosen, rejected = torch.as_tensor(chosen, dtype=torch.float64), torch.as_tensor(rejected, dtype=torch.float64)
    return ((chosen > rejected).double() + 0.5 * (chosen == rejected).double()).mean().item()


def swap_labels(count: int, rate: float, seed: int) -> torch.Tensor:
    """Boolean mask of the pairs whose labels are swapped: exactly round(rate·count) of them (Python's
    round), the first ones of a permutation seeded by `seed`."""
    mask = torch.zeros(count, dtype=torch.bool)
    mask[torch.randperm(count, generator=torch.Generator().manual_seed(seed))[: round(rate * count)]] = True
    return mask


def load_text(data: Any, data_settings: dict[str, Any]):
    """The Shakespeare splits as a PreparedDataset: `data` itself, a prepared folder, or (None) prepared
    afresh, in a temporary folder, with the reference's dataset settings."""
    if isinstance(data, PreparedDataset):
        prepared = data
    elif data is not None:
        prepared = load_prepared(data)
    else:
        with tempfile.TemporaryDirectory() as folder:
            prepare_dataset("shakespeare", folder, data_settings)
            prepared = load_prepared(folder)
    if prepared.kind != "text":
        raise ConfigError(f"preference needs a text dataset, got {prepared.name!r} ({prepared.kind})")
    return prepared


def prompt_windows(
    stream: np.ndarray, segment_starts: np.ndarray, count: int, length: int, generator: torch.Generator
) -> np.ndarray:
    """`count` seeded windows (count, length) of the byte stream, none crossing a segment start."""
    if len(stream) < 2 * length:
        raise ConfigError(f"preference prompts of {length} bytes need a longer text split ({len(stream)} bytes)")
    found: list[np.ndarray] = []
    while sum(len(starts) for starts in found) < count:
        starts = torch.randint(0, len(stream) - length + 1, (2 * count,), generator=generator).numpy()
        segment = np.searchsorted(segment_starts, starts, side="right")
        inside = np.searchsorted(segment_starts, starts + length - 1, side="right") == segment
        found.append(starts[inside])
    starts = np.concatenate(found)[:count]
    return stream[starts[:, None] + np.arange(length)[None, :]]


@torch.no_grad()
def sample_continuations(
    model: nn.Module, byte_to_id: torch.Tensor, prompts: np.ndarray, length: int, generator: torch.Generator
) -> np.ndarray:
    """One continuation of `length` bytes per prompt row, sampled from `model` at temperature 1 over the
    256 byte tokens (`byte_to_id[b]` is the token id of byte b). The model runs on its device; the draws
    are made on the CPU, with `generator`."""
    device = next(model.parameters()).device
    tokens = byte_to_id[torch.from_numpy(prompts.astype(np.int64))]
    sampled = []
    for _ in range(length):
        # (n, 256): byte b's logit in column b
        logits = model(tokens.to(device))[:, -1, :].cpu().double()[:, byte_to_id]
        byte = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
        sampled.append(byte)
        tokens = torch.cat((tokens, byte_to_id[byte]), dim=1)
    return torch.cat(sampled, dim=1).numpy().astype(np.uint8)


def make_pairs(
    model: nn.Module,
    byte_to_id: torch.Tensor,
    stream: np.ndarray,
    segment_starts: np.ndarray,
    count: int,
    prompt_bytes: int,
    continuation_bytes: int,
    generator: torch.Generator,
) -> dict[str, np.ndarray]:
    """`count` clean pairs: "prompt" (n, P), "chosen" and "rejected" (n, L) bytes, their rewards, and
    "tie_rate", the share of sampled pairs dropped for a tie."""
    parts: dict[str, list[np.ndarray]] = {"prompt": [], "chosen": [], "rejected": []}
    found, drawn, tied, draws = 0, 0, 0, 0
    while found < count:
        if draws == MAX_DRAWS:
            raise ConfigError(
                "preference: the vowel reward ties on nearly every sampled pair; use longer "
                "continuations (preference.continuation_bytes)"
            )
        draws += 1
        batch = max(8, math.ceil(1.3 * (count - found)))  # a little more than needed: some pairs tie
        prompts = prompt_windows(stream, segment_starts, batch, prompt_bytes, generator)
        samples = sample_continuations(
            model, byte_to_id, np.concatenate((prompts, prompts)), continuation_bytes, generator
        )
        first, second = samples[:batch], samples[batch:]
        first_reward, second_reward = vowel_reward(first), vowel_reward(second)
        keep = np.flatnonzero(first_reward != second_reward)[: count - found]
        first_wins = (first_reward > second_reward)[keep, None]
        parts["prompt"].append(prompts[keep])
        parts["chosen"].append(np.where(first_wins, first[keep], second[keep]))
        parts["rejected"].append(np.where(first_wins, second[keep], first[keep]))
        found, drawn, tied = found + len(keep), drawn + batch, tied + int((first_reward == second_reward).sum())
    pairs = {key: np.concatenate(value) for key, value in parts.items()}
    pairs["chosen_reward"], pairs["rejected_reward"] = vowel_reward(pairs["chosen"]), vowel_reward(pairs["rejected"])
    pairs["tie_rate"] = np.float64(tied / drawn)
    return pairs


def pair_tokens(pairs: dict[str, np.ndarray], byte_to_id: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (n, P + L) of prompt + chosen and of prompt + rejected."""

    def ids(continuations: np.ndarray) -> torch.Tensor:
        sequences = np.concatenate((pairs["prompt"], continuations), axis=1).astype(np.int64)
        return byte_to_id[torch.from_numpy(sequences)]

    return ids(pairs["chosen"]), ids(pairs["rejected"])
