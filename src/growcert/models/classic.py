"""A classic decoder-only transformer, as in Power et al. 2022's grokking experiments (P2; docs/science.md,
"grokking (P2)").

"Grokking: Generalization Beyond Overfitting on Small Algorithmic Datasets" trained a standard
decoder-only transformer (2 layers, width 128, 4 heads) with causal attention masking. This module is
that family, beside the package's LLaMA one (`llama.py`), so the grokking baseline can be calibrated on
both architectures:
- token embedding plus a *learned* absolute position embedding (no RoPE);
- pre-norm blocks with LayerNorm (weight and bias) before attention and MLP (GPT-2, Radford et al. 2019);
- causal multi-head self-attention with biases;
- a GELU MLP of hidden size 4·width (`mlp_hidden`), with biases;
- a final LayerNorm and an untied linear head.
Initialisation (`init`) follows GPT-2 by default: normal(0, 0.02) for matrices and embeddings, output
projections scaled by 1/sqrt(2·depth), zero biases, LayerNorm gains one; `pytorch` keeps torch's module
defaults instead (N(0, 1) embeddings, Kaiming-uniform Linear layers), as Power et al.'s code does.

The position embedding is an `nn.Embedding` looked up with the positions expanded over the batch, so
the per-example hooks of `growcert.optim.square_sums` see one row per example for it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from growcert.models.llama import INITS


@dataclass
class ClassicConfig:
    width: int  # d_model
    depth: int  # decoder blocks
    vocab_size: int  # tokens
    heads: int = 4  # attention heads (width / heads features each)
    mlp_hidden: int | None = None  # GELU MLP hidden size; None -> 4·width
    context: int = 4  # positions the learned embedding covers
    norm_eps: float = 1e-5  # LayerNorm epsilon
    init: str = "gpt2"  # gpt2: N(0, 0.02²), output projections scaled, biases 0; pytorch: module defaults

    def __post_init__(self):
        for key in ("width", "depth", "vocab_size", "heads", "context"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"classic transformer {key} must be an integer >= 1, got {key}={value!r}")
        if self.width % self.heads:
            raise ValueError(f"classic transformer width {self.width} is not divisible by heads {self.heads}")
        if self.init not in INITS:
            raise ValueError(f"classic transformer init must be one of {', '.join(INITS)}, got init={self.init!r}")

    @property
    def hidden(self) -> int:
        return self.mlp_hidden or 4 * self.width


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ClassicConfig):
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.proj = nn.Linear(config.width, config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in self.qkv(x).split(C, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class ClassicBlock(nn.Module):
    """x + attn(LN(x)), then + mlp(LN(.)), the MLP Linear → GELU → Linear."""

    def __init__(self, config: ClassicConfig):
        super().__init__()
        self.attn_norm = nn.LayerNorm(config.width, eps=config.norm_eps)
        self.attn = CausalSelfAttention(config)
        self.mlp_norm = nn.LayerNorm(config.width, eps=config.norm_eps)
        self.up = nn.Linear(config.width, config.hidden)
        self.down = nn.Linear(config.hidden, config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.down(F.gelu(self.up(self.mlp_norm(x))))


class ClassicTransformer(nn.Module):
    """Tokens (batch, T) int64 -> logits (batch, T, vocab_size)."""

    def __init__(self, config: ClassicConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.width)
        self.positions = nn.Embedding(config.context, config.width)
        self.blocks = nn.ModuleList(ClassicBlock(config) for _ in range(config.depth))
        self.norm = nn.LayerNorm(config.width, eps=config.norm_eps)
        self.head = nn.Linear(config.width, config.vocab_size, bias=False)
        if config.init == "gpt2":  # "pytorch" keeps what each module drew when it was built
            self._init_weights()

    def _init_weights(self):
        out_std = 0.02 / math.sqrt(2 * self.config.depth)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                nn.init.normal_(
                    p, mean=0.0, std=out_std if name.endswith(("attn.proj.weight", "down.weight")) else 0.02
                )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        B, T = tokens.shape
        if T > self.config.context:
            raise ValueError(f"sequence of {T} tokens exceeds the model's context={self.config.context}")
        positions = torch.arange(T, device=tokens.device).expand(B, T)
        x = self.embed(tokens) + self.positions(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))
