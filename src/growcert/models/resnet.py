"""CIFAR ResNet-(6n+2) with a channel-width multiplier.

Implements the CIFAR-10 residual network of He et al. 2016, "Deep Residual
Learning for Image Recognition", §4.2: a 3×3 convolution stem, three stages of
n BasicBlocks (two 3×3 convolutions each) on 16, 32 and 64 channels with
stride 2 at the start of stages 2 and 3, global average pooling and a linear
classifier, 6n+2 weighted layers in all. The channel counts are multiplied by
`width` = k (16k, 32k, 64k), as in Wide ResNets (Zagoruyko & Komodakis 2016),
so one family covers the width × depth grid.

Differences from the paper, and why:
- the shortcut is a 1×1 convolution + BatchNorm where the shape changes
  (the paper's option B) rather than zero-padding (option A): it is a plain
  module with parameters, which the rest of the package treats like any other;
- the residual stream passes through a named `InsertionPoint` after the stem
  (`block0`) and after every block (`block1` ... `block{3n}`) so hooks and
  inserted zero-output blocks can find it by name (see `points.py`).

Works for any input of at least 1×1 pixels (8×8 sklearn digits with one
channel, 32×32 CIFAR with three): the average pool makes the head size-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import torch
import torch.nn.functional as F
from torch import nn

from growcert.models import Family
from growcert.models.points import InsertionPoint, point_names


def depth_problem(depth: int) -> str | None:
    """Why `depth` is not a ResNet-(6n+2) depth, or None."""
    if not isinstance(depth, Integral) or depth < 8 or (depth - 2) % 6 != 0:
        return f"resnet depth must be 6n+2 with n >= 1 (8, 14, 20, ...), got {depth!r}"
    return None


def point_count(depth: int) -> int:
    """block0 after the stem, then one point after each of the 3n residual blocks."""
    return 3 * (depth - 2) // 6 + 1


@dataclass
class ResNetConfig:
    width: int  # channel multiplier k: stages have 16k, 32k, 64k channels
    depth: int  # weighted layers, 6n+2 with n >= 1 blocks per stage (8, 14, 20, 32, 56, ...)
    in_channels: int = 3  # image channels (1 for digits/MNIST, 3 for CIFAR)
    num_classes: int = 10  # outputs of the linear classifier

    def __post_init__(self):
        if not isinstance(self.width, Integral) or self.width < 1:
            raise ValueError(f"resnet width must be an integer >= 1, got width={self.width!r}")
        if depth_problem(self.depth):
            raise ValueError(depth_problem(self.depth))
        if self.in_channels < 1 or self.num_classes < 1:
            raise ValueError(
                f"resnet needs in_channels >= 1 and num_classes >= 1, got "
                f"in_channels={self.in_channels!r}, num_classes={self.num_classes!r}"
            )

    @property
    def blocks_per_stage(self) -> int:
        return (self.depth - 2) // 6

    @property
    def num_blocks(self) -> int:
        return 3 * self.blocks_per_stage

    @property
    def stage_channels(self) -> tuple[int, int, int]:
        return (16 * self.width, 32 * self.width, 64 * self.width)


class BasicBlock(nn.Module):
    """relu(BN(conv(relu(BN(conv(x))))) + shortcut(x)), the two-layer block of He et al. (Fig. 2)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        # convolutions feed BatchNorm, whose shift makes a conv bias redundant
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        if stride != 1 or in_channels != out_channels:
            # projection shortcut (option B) only where the shape changes; identity elsewhere
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    family = "resnet"

    def __init__(self, config: ResNetConfig):
        super().__init__()
        self.config = config
        c1, c2, c3 = config.stage_channels
        n = config.blocks_per_stage

        self.stem = nn.Sequential(
            nn.Conv2d(config.in_channels, c1, 3, stride=1, padding=1, bias=False),
            nn.BatchNorm2d(c1),
            nn.ReLU(inplace=True),
        )
        # one flat list of 3n blocks, so block i (1-based) is followed by point `block{i}`
        blocks = []
        in_c = c1
        for stage, out_c in enumerate((c1, c2, c3)):
            for j in range(n):
                stride = 2 if (stage > 0 and j == 0) else 1
                blocks.append(BasicBlock(in_c, out_c, stride))
                in_c = out_c
        self.blocks = nn.ModuleList(blocks)
        self.points = nn.ModuleDict({name: InsertionPoint(name) for name in point_names(config.num_blocks)})
        self.fc = nn.Linear(c3, config.num_classes)

        self._init_weights()

    def _init_weights(self):
        # He et al. 2015 ("Delving deep into rectifiers") init for the ReLU convolutions,
        # BatchNorm starts as the identity; the classifier keeps PyTorch's default uniform init.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images (batch, channels, height, width) -> logits (batch, num_classes)."""
        x = self.points["block0"](self.stem(x))
        for i, block in enumerate(self.blocks, start=1):
            x = self.points[f"block{i}"](block(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)

    @staticmethod
    def per_example_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of each image, shape (batch,)."""
        return F.cross_entropy(outputs, targets, reduction="none")

    @staticmethod
    def per_example_correct(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """1.0 where the arg-max class is the label, else 0.0, shape (batch,)."""
        return (outputs.argmax(dim=-1) == targets).float()

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def stream_features(model: ResNet, point: str) -> int:
    """Channels of the stream at `point`: block0 after the stem; block i after residual block i, whose last
    BatchNorm sets them."""
    index = int(point.removeprefix("block"))
    return model.stem[1].num_features if index == 0 else model.blocks[index - 1].bn2.num_features


def build(width: int, depth: int, data_info: dict, options: dict) -> ResNet:
    return ResNet(
        ResNetConfig(
            width=width, depth=depth, in_channels=data_info["shape"][0], num_classes=data_info["num_classes"], **options
        )
    )


FAMILY = Family(
    name="resnet",
    data_kind="image",
    loss_name="cross_entropy",
    loss_description="the cross-entropy (nats) of the example's class logits, one term per "
    "example, so q carries no other factor",
    native_dims=("channel", "height", "width"),
    channel_dim=-3,
    block_norm="identity",
    point_count=point_count,
    stream_features=stream_features,
    depth_problem=depth_problem,
    build=build,
    loss_unit="nats per image",
)
