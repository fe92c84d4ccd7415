"""A small LLaMA-style decoder-only language model (bytes in, next-byte logits out).

Implements the architecture of Touvron et al. 2023, "LLaMA: Open and Efficient
Foundation Language Models", §2.2, at toy scale:
- pre-normalization with RMSNorm (Zhang & Sennrich 2019) before attention and MLP;
- causal multi-head self-attention with rotary position embeddings
  (RoPE, Su et al. 2021, "RoFormer"), applied to queries and keys;
- SwiGLU feed-forward (Shazeer 2020, "GLU Variants Improve Transformer") with
  hidden size ~8/3·d_model, so its parameter count matches a 4·d_model GELU MLP;
- no biases anywhere, a final RMSNorm and an untied linear LM head.
Initialisation follows GPT-2 (Radford et al. 2019): normal(0, 0.02) everywhere,
with the output projections of attention and MLP scaled by 1/sqrt(2·depth),
since each block adds two such outputs to the residual stream.

The residual stream passes through a named `InsertionPoint` after the embedding
(`block0`) and after every decoder block (`block1` ... `block{depth}`), so hooks
and inserted zero-output blocks can find it by name (see `points.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

import torch
import torch.nn.functional as F
from torch import nn

from growcert.models import Family
from growcert.models.points import InsertionPoint, point_names

INITS = ("gpt2", "pytorch")  # the initialisations a config may name (`init`): the package's, or torch's defaults


@dataclass
class LlamaConfig:
    width: int  # d_model, the width of the residual stream
    depth: int  # number of decoder blocks
    vocab_size: int = 256  # byte-level vocabulary
    head_dim: int = 16  # features per attention head; n_heads = width // head_dim
    mlp_hidden: int | None = None  # SwiGLU hidden size; None -> multiple of 8 nearest to 8/3·width
    context: int = 64  # longest sequence the model accepts (RoPE tables are this long)
    rope_base: float = 10000.0  # RoPE frequency base θ (Su et al. 2021)
    norm_eps: float = 1e-6  # RMSNorm epsilon
    init: str = "gpt2"  # gpt2: N(0, 0.02²), output projections scaled; pytorch: the modules' own defaults

    def __post_init__(self):
        for key in ("width", "depth", "vocab_size", "head_dim", "context"):
            value = getattr(self, key)
            if not isinstance(value, Integral) or value < 1:
                raise ValueError(f"llama {key} must be an integer >= 1, got {key}={value!r}")
        if self.head_dim % 2:
            # RoPE rotates features in pairs
            raise ValueError(f"llama head_dim must be even (RoPE rotates pairs), got head_dim={self.head_dim}")
        if self.width % self.head_dim:
            raise ValueError(
                f"llama width must be divisible by head_dim, got width={self.width}, head_dim={self.head_dim}"
            )
        if self.mlp_hidden is not None and (not isinstance(self.mlp_hidden, Integral) or self.mlp_hidden < 1):
            raise ValueError(f"llama mlp_hidden must be None or an integer >= 1, got mlp_hidden={self.mlp_hidden!r}")
        if self.init not in INITS:
            raise ValueError(f"llama init must be one of {', '.join(INITS)}, got init={self.init!r}")

    @property
    def n_heads(self) -> int:
        return self.width // self.head_dim

    @property
    def hidden(self) -> int:
        """SwiGLU hidden size actually used."""
        if self.mlp_hidden is not None:
            return self.mlp_hidden
        # 8/3·width rounded to a multiple of 8: width/3 is never a half-integer, so round() is unambiguous
        return 8 * max(1, round(self.width / 3))

    @property
    def num_blocks(self) -> int:
        return self.depth


# ---------------------------------------------------------------------------
# rotary position embeddings


def rope_cos_sin(positions: torch.Tensor, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables, each (len(positions), head_dim), for `apply_rope`.

    Pair j of features (j, j + head_dim/2) rotates by angle position · base^(-2j/head_dim).
    """
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = positions.to(torch.float32)[:, None] * inv_freq[None, :]  # (T, head_dim/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, head_dim)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (..., T, head_dim) by the angles of its positions.

    Uses the "rotate half" pairing (feature j with j + head_dim/2), which is a
    fixed permutation of the interleaved pairing of the paper: both give
    <apply_rope(q, m), apply_rope(k, n)> depending on positions only through m - n.
    """
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


# ---------------------------------------------------------------------------
# the blocks


class Attention(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.head_dim = config.head_dim
        self.qkv = nn.Linear(config.width, 3 * config.width, bias=False)  # q, k, v in one matmul
        self.proj = nn.Linear(config.width, config.width, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        *lead, T, C = x.shape  # any leading dims (e.g. DPO's (pairs, 2)): each (T, C) row attends within itself
        q, k, v = self.qkv(x).split(C, dim=-1)
        # (..., T, C) -> (B, heads, T, head_dim), B the leading dims flattened
        q, k, v = (t.reshape(-1, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(*lead, T, C))


class SwiGLU(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.gate = nn.Linear(config.width, config.hidden, bias=False)
        self.up = nn.Linear(config.width, config.hidden, bias=False)
        self.down = nn.Linear(config.hidden, config.width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """Pre-norm decoder block: x + attn(norm(x)), then + mlp(norm(.))."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.attn_norm = nn.RMSNorm(config.width, eps=config.norm_eps)
        self.attn = Attention(config)
        self.mlp_norm = nn.RMSNorm(config.width, eps=config.norm_eps)
        self.mlp = SwiGLU(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    family = "llama"

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.width)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.depth))
        self.points = nn.ModuleDict({name: InsertionPoint(name) for name in point_names(config.num_blocks)})
        self.norm = nn.RMSNorm(config.width, eps=config.norm_eps)
        self.head = nn.Linear(config.width, config.vocab_size, bias=False)  # untied from the embedding

        # RoPE tables are a function of the config, not state: kept out of the state dict
        cos, sin = rope_cos_sin(torch.arange(config.context), config.head_dim, config.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

        if config.init == "gpt2":  # "pytorch" keeps what each module drew when it was built
            self._init_weights()

    def _init_weights(self):
        out_std = 0.02 / math.sqrt(2 * self.config.depth)
        for name, p in self.named_parameters():
            if p.dim() < 2:
                continue  # RMSNorm gains stay at 1
            is_output_proj = name.endswith("attn.proj.weight") or name.endswith("mlp.down.weight")
            nn.init.normal_(p, mean=0.0, std=out_std if is_output_proj else 0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens (batch, T) int64 -> next-token logits (batch, T, vocab_size); extra leading dims are kept
        (rows of shape (..., T) are independent sequences), so per-example hooks can treat a group of
        sequences (a DPO pair) as one example."""
        T = tokens.shape[-1]
        if T > self.config.context:
            raise ValueError(f"sequence of {T} tokens exceeds the model's context={self.config.context}")
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        x = self.points["block0"](self.embed(tokens))
        for i, block in enumerate(self.blocks, start=1):
            x = self.points[f"block{i}"](block(x, cos, sin))
        return self.head(self.norm(x))

    @staticmethod
    def per_example_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy of each sequence, shape (batch,).

        `targets` (batch, T) holds the token that follows each input position
        (the inputs shifted left by one), as the data module prepares them.
        """
        losses = F.cross_entropy(outputs.transpose(1, 2), targets, reduction="none")  # (batch, T)
        return losses.mean(dim=1)

    @staticmethod
    def per_example_correct(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Fraction of positions whose arg-max token is the target, shape (batch,)."""
        return (outputs.argmax(dim=-1) == targets).float().mean(dim=1)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def width_problem(width: int, options: dict) -> str | None:
    """Why `width` cannot be split into heads of the options' `head_dim` features, or None."""
    head_dim = options.get("head_dim", 1)
    return f"llama width {width} is not a multiple of models.llama.head_dim={head_dim}" if width % head_dim else None


def build(width: int, depth: int, data_info: dict, options: dict) -> Llama:
    return Llama(LlamaConfig(width=width, depth=depth, vocab_size=data_info["vocab_size"], **options))


FAMILY = Family(
    name="llama",
    data_kind="text",
    loss_name="next_token_cross_entropy_mean_over_tokens",
    loss_description="the next-token cross-entropy (nats) averaged over the window's T tokens, so q "
    "includes the factor 1/T",
    native_dims=("token", "feature"),
    channel_dim=-1,
    block_norm="rms",
    point_count=lambda depth: depth + 1,
    stream_features=lambda model, point: model.config.width,
    depth_problem=lambda depth: None,
    width_problem=width_problem,
    build=build,
    context=True,
    loss_unit="nats per token",
)
