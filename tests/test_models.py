"""Model families: shapes, insertion points, per-example exactness, causality, RoPE, config errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from growcert.models import build_model
from growcert.models.llama import Llama, LlamaConfig, apply_rope, rope_cos_sin
from growcert.models.resnet import ResNet, ResNetConfig


def make_resnet(width=1, depth=8, shape=(1, 8, 8), seed=0):
    torch.manual_seed(seed)
    return ResNet(ResNetConfig(width=width, depth=depth, in_channels=shape[0], num_classes=10))


def make_llama(width=32, depth=2, seed=0, **kw):
    torch.manual_seed(seed)
    return Llama(LlamaConfig(width=width, depth=depth, context=16, **kw))


def resnet_batch(shape=(1, 8, 8), batch=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, *shape, generator=g), torch.randint(0, 10, (batch,), generator=g)


def llama_batch(batch=3, tokens=12, vocab=256, seed=1):
    g = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, vocab, (batch, tokens + 1), generator=g)
    return seq[:, :-1], seq[:, 1:]


def family_cases():
    """(model, inputs, targets, expected stream shape at block0 and at the last point)."""
    res = make_resnet(width=2, depth=14)
    x, y = resnet_batch()
    llm = make_llama(width=32, depth=3)
    t, u = llama_batch()
    return [
        (res, x, y, (4, 32, 8, 8), (4, 128, 2, 2)),
        (llm, t, u, (3, 12, 32), (3, 12, 32)),
    ]


# ---------------------------------------------------------------------------
# shapes and gradients


@pytest.mark.parametrize("shape", [(1, 8, 8), (3, 32, 32)])
@pytest.mark.parametrize("depth", [8, 14, 20])
@pytest.mark.parametrize("width", [1, 2])
def test_resnet_forward_backward(width, depth, shape):
    model = make_resnet(width, depth, shape)
    x, y = resnet_batch(shape)
    out = model(x)
    assert out.shape == (4, 10)
    loss = model.per_example_loss(out, y)
    assert loss.shape == (4,) and torch.isfinite(loss).all()
    loss.mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert len(model.blocks) == 3 * ((depth - 2) // 6)
    # 6n+2 weighted layers: stem conv, 2 per block, fc (projection shortcuts are not counted)
    convs = [m for n, m in model.named_modules() if isinstance(m, nn.Conv2d) and "shortcut" not in n]
    assert len(convs) + 1 == depth


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("width", [16, 32, 64])
def test_llama_forward_backward(width, depth):
    model = make_llama(width, depth)
    t, u = llama_batch()
    out = model(t)
    assert out.shape == (3, 12, 256)
    loss = model.per_example_loss(out, u)
    assert loss.shape == (3,) and torch.isfinite(loss).all()
    # random init predicts ~uniformly: loss near log(vocab)
    assert abs(loss.mean().item() - torch.log(torch.tensor(256.0)).item()) < 0.5
    loss.mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert all(p.grad.abs().sum() > 0 for p in model.parameters())


def test_llama_has_no_biases_and_gpt2_init():
    model = make_llama(width=64, depth=4)
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    assert model.head.weight.data_ptr() != model.embed.weight.data_ptr()
    assert model.config.hidden == 168 and model.blocks[0].mlp.up.out_features == 168
    assert model.config.n_heads == 4
    std_out = model.blocks[0].attn.proj.weight.std().item()
    std_in = model.blocks[0].attn.qkv.weight.std().item()
    assert abs(std_in - 0.02) < 0.002
    assert abs(std_out - 0.02 / (2 * 4) ** 0.5) < 0.001


def test_llama_rejects_too_long_sequence():
    model = make_llama()
    with pytest.raises(ValueError, match="context"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_per_example_correct():
    res = make_resnet()
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0]])
    assert res.per_example_correct(logits, torch.tensor([1, 2])).tolist() == [1.0, 0.0]
    llm = make_llama()
    logits = torch.zeros(2, 4, 3)
    logits[0, :, 0] = 1.0  # sequence 0 always predicts token 0
    logits[1, :, 2] = 1.0  # sequence 1 always predicts token 2
    targets = torch.tensor([[0, 0, 1, 0], [2, 1, 1, 1]])
    correct = llm.per_example_correct(logits, targets)
    assert correct.dtype == torch.float32 and correct.tolist() == [0.75, 0.25]


# ---------------------------------------------------------------------------
# insertion points


@pytest.mark.parametrize("case", [0, 1], ids=["resnet", "llama"])
def test_points_names_and_shapes(case):
    model, x, _, first_shape, last_shape = family_cases()[case]
    num_blocks = len(model.blocks)
    assert num_blocks == (6 if case == 0 else 3)
    assert list(model.points.keys()) == [f"block{i}" for i in range(num_blocks + 1)]
    seen = {}

    def record(name):
        def hook(module, inputs, output):
            seen[name] = output.shape  # returns None: observe only

        return hook

    handles = [p.register_forward_hook(record(n)) for n, p in model.points.items()]
    model(x)
    for h in handles:
        h.remove()
    assert list(seen) == list(model.points.keys())  # every point visited, in stream order
    assert seen["block0"] == first_shape
    assert seen[f"block{num_blocks}"] == last_shape


@pytest.mark.parametrize("case", [0, 1], ids=["resnet", "llama"])
def test_stream_flows_through_points(case):
    model, x, _, _, _ = family_cases()[case]
    model.eval()
    with torch.no_grad():
        base = model(x)
        for name, point in model.points.items():
            # replacing a point's output changes the logits: the stream goes through it
            h = point.register_forward_hook(lambda m, i, o: o + 0.5 * torch.randn_like(o))
            changed = model(x)
            h.remove()
            assert not torch.allclose(changed, base, atol=1e-4), name
            # an appended zero-output residual block leaves the function bit-identical
            point.inserted.append(ZeroBlock())
            assert torch.equal(model(x), base), name
            # ... and a non-zero one is applied
            point.inserted[-1] = ConstantBlock(0.3)
            assert not torch.allclose(model(x), base, atol=1e-4), name
            del point.inserted[-1]
        assert torch.equal(model(x), base)


class ZeroBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Parameter(torch.randn(()))

    def forward(self, x):
        return torch.zeros_like(x) * self.lin


class ConstantBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, x):
        return torch.full_like(x, self.c)


# ---------------------------------------------------------------------------
# per-example exactness of activation gradients


def point_grad(model, point, x, y):
    """d(sum of per-example losses)/d(stream at `point`), shape (batch, ...)."""
    captured = {}

    def hook(module, inputs, output):
        output.retain_grad()
        captured["z"] = output

    h = model.points[point].register_forward_hook(hook)
    model.zero_grad()
    model.per_example_loss(model(x), y).sum().backward()
    h.remove()
    return captured["z"].grad.detach().clone()


def warm_batchnorm(model, x):
    """A few train-mode passes so the running statistics are not the trivial (0, 1)."""
    model.train()
    with torch.no_grad():
        for k in range(3):
            model(x * (1 + k) + k)


def rel_err(a, b):
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize("case", [0, 1], ids=["resnet", "llama"])
def test_point_gradients_are_per_example(case):
    model, x, y, _, _ = family_cases()[case]
    if case == 0:
        warm_batchnorm(model, x)
    model.eval()
    for point in ("block0", "block2", f"block{len(model.blocks)}"):
        batch_grad = point_grad(model, point, x, y)
        for i in range(x.shape[0]):
            alone = point_grad(model, point, x[i : i + 1], y[i : i + 1])[0]
            assert alone.norm() > 0
            assert rel_err(batch_grad[i], alone) < 1e-5, (point, i)


def test_per_example_check_detects_batchnorm_coupling():
    # the same check fails in train mode, where BatchNorm couples examples: the test above can fail
    model, x, y, _, _ = family_cases()[0]
    model.train()
    batch_grad = point_grad(model, "block1", x, y)
    alone = point_grad(model, "block1", x[:2], y[:2])[0]
    assert rel_err(batch_grad[0], alone) > 1e-3


# ---------------------------------------------------------------------------
# causality and rotary embeddings


def test_llama_is_causal():
    model = make_llama(width=32, depth=2).eval()
    t, _ = llama_batch(batch=2, tokens=12)
    with torch.no_grad():
        base = model(t)
        for pos in (0, 5, 11):
            t2 = t.clone()
            t2[:, pos] = (t2[:, pos] + 7) % 256
            out = model(t2)
            torch.testing.assert_close(out[:, :pos], base[:, :pos], rtol=0, atol=1e-6)
            assert (out[:, pos:] - base[:, pos:]).abs().amax(dim=-1).min() > 1e-5  # later positions see it


def test_rope_depends_on_relative_position_only():
    head_dim = 16
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(head_dim, generator=g), torch.randn(head_dim, generator=g)

    def score(m, n):
        cos, sin = rope_cos_sin(torch.tensor([m, n]), head_dim)
        qm = apply_rope(q[None], cos[:1], sin[:1])[0]
        kn = apply_rope(k[None], cos[1:], sin[1:])[0]
        return (qm @ kn).item()

    # rotation preserves norms
    cos, sin = rope_cos_sin(torch.tensor([37]), head_dim)
    assert torch.allclose(apply_rope(q[None], cos, sin).norm(), q.norm(), atol=1e-5)
    # same offset, same score, anywhere in the sequence
    for offset in (0, 1, 5, -3):
        ref = score(10 + offset, 10)
        for n in (0, 3, 40):
            assert score(n + offset, n) == pytest.approx(ref, abs=1e-4), (offset, n)
    # different offsets give different scores: the position does enter
    assert abs(score(3, 1) - score(3, 2)) > 1e-3
    # position 0 is the identity
    cos, sin = rope_cos_sin(torch.tensor([0]), head_dim)
    assert torch.equal(apply_rope(q[None], cos, sin)[0], q)


# ---------------------------------------------------------------------------
# configuration errors, determinism, build_model


@pytest.mark.parametrize(
    "kwargs, key",
    [
        (dict(width=1, depth=10), "depth"),
        (dict(width=1, depth=2), "depth"),
        (dict(width=1, depth=0), "depth"),
        (dict(width=0, depth=8), "width"),
        (dict(width=-2, depth=20), "width"),
    ],
)
def test_resnet_bad_config(kwargs, key):
    with pytest.raises(ValueError, match=key) as err:
        ResNetConfig(**kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "kwargs, key",
    [
        (dict(width=40, depth=2), "head_dim"),
        (dict(width=40, depth=2), "width"),
        (dict(width=32, depth=2, head_dim=7), "head_dim"),
        (dict(width=0, depth=2), "width"),
        (dict(width=32, depth=0), "depth"),
        (dict(width=32, depth=2, mlp_hidden=0), "mlp_hidden"),
    ],
)
def test_llama_bad_config(kwargs, key):
    with pytest.raises(ValueError, match=key) as err:
        LlamaConfig(**kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("make", [make_resnet, make_llama], ids=["resnet", "llama"])
def test_determinism(make):
    a, b, c = make(seed=3), make(seed=3), make(seed=4)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_build_model():
    res = build_model("resnet", 2, 14, {"kind": "image", "shape": [1, 8, 8], "num_classes": 10})
    assert isinstance(res, ResNet) and res.family == "resnet"
    assert res.config.in_channels == 1 and res.config.width == 2 and len(res.points) == 7
    assert res(torch.randn(2, 1, 8, 8)).shape == (2, 10)

    llm = build_model("llama", 32, 2, {"kind": "text", "vocab_size": 100}, {"context": 8, "head_dim": 8})
    assert isinstance(llm, Llama) and llm.family == "llama"
    assert llm.config.vocab_size == 100 and llm.config.n_heads == 4 and len(llm.points) == 3
    assert llm(torch.zeros(2, 8, dtype=torch.long)).shape == (2, 8, 100)
    # D = 32, H = 88 (multiple of 8 nearest 8/3·32), V = 100, 2 blocks; see the arithmetic below
    assert llm.num_parameters() == 2 * 100 * 32 + 2 * (4 * 32**2 + 3 * 32 * 88 + 2 * 32) + 32 == 31_648

    with pytest.raises(ValueError, match="image"):
        build_model("resnet", 1, 8, {"kind": "text", "vocab_size": 256})
    with pytest.raises(ValueError, match="text"):
        build_model("llama", 32, 2, {"kind": "image", "shape": [1, 8, 8], "num_classes": 10})
    with pytest.raises(ValueError, match="family"):
        build_model("mlp", 1, 8, {"kind": "image", "shape": [1, 8, 8], "num_classes": 10})


# ---------------------------------------------------------------------------
# parameter counts, from the architectures' definitions (not from the modules)


def llama_count(vocab, width, depth, hidden):
    """Embedding V·D; per block attention q, k, v, o (4·D², no biases), SwiGLU gate, up, down (3·D·H)
    and two RMSNorm gains (2·D); the final RMSNorm gain D; an untied head V·D."""
    return vocab * width + depth * (4 * width**2 + 3 * width * hidden + 2 * width) + width + vocab * width


@pytest.mark.parametrize(
    "width, depth, vocab, head_dim, mlp_hidden, hidden",
    [
        (32, 2, 100, 8, None, 88),  # 8/3·32 = 85.3 -> 88
        (48, 1, 256, 16, None, 128),  # 8/3·48 = 128 exactly
        (64, 3, 13, 16, None, 168),  # 170.7 -> 168
        (16, 2, 7, 4, 24, 24),  # an explicit hidden size
    ],
)
def test_llama_parameter_count_follows_the_architecture(width, depth, vocab, head_dim, mlp_hidden, hidden):
    model = Llama(
        LlamaConfig(width=width, depth=depth, vocab_size=vocab, head_dim=head_dim, mlp_hidden=mlp_hidden, context=8)
    )
    expected = llama_count(vocab, width, depth, hidden)
    assert model.num_parameters() == expected
    assert sum(p.numel() for p in model.parameters()) == expected  # nothing shared or hidden from the count


def resnet_count(width, depth, in_channels, classes):
    """3×3 stem conv (no bias) + BN (γ, β); per BasicBlock two 3×3 convs (no bias) and two BNs, plus a
    1×1 conv + BN shortcut where the channels change (the first block of stages 2 and 3); a linear
    classifier with bias on 64k features. BN running statistics are buffers, not parameters."""
    n = (depth - 2) // 6
    c1, c2, c3 = 16 * width, 32 * width, 64 * width
    total = 9 * in_channels * c1 + 2 * c1
    for c_in, c_out in ((c1, c1), (c1, c2), (c2, c3)):
        first = 9 * c_in * c_out + 9 * c_out * c_out + 4 * c_out + (c_in * c_out + 2 * c_out if c_in != c_out else 0)
        total += first + (n - 1) * (18 * c_out * c_out + 4 * c_out)
    return total + c3 * classes + classes


@pytest.mark.parametrize("width, depth, in_channels, classes", [(1, 8, 1, 10), (2, 14, 1, 10), (1, 20, 3, 100)])
def test_resnet_parameter_count_follows_the_architecture(width, depth, in_channels, classes):
    model = ResNet(ResNetConfig(width=width, depth=depth, in_channels=in_channels, num_classes=classes))
    assert model.num_parameters() == resnet_count(width, depth, in_channels, classes)


def test_resnet_parameter_count_by_hand():
    # ResNet-14, k = 2, one input channel, 10 classes: channels 32, 64, 128, two blocks per stage
    stem = 9 * 1 * 32 + 2 * 32  # 352
    stage1 = 2 * (9 * 32 * 32 * 2 + 4 * 32)  # 37,120 (identity shortcuts)
    stage2 = (9 * 32 * 64 + 9 * 64 * 64 + 4 * 64 + 32 * 64 + 2 * 64) + (9 * 64 * 64 * 2 + 4 * 64)
    stage3 = (9 * 64 * 128 + 9 * 128 * 128 + 4 * 128 + 64 * 128 + 2 * 128) + (9 * 128 * 128 * 2 + 4 * 128)
    fc = 128 * 10 + 10
    assert stem + stage1 + stage2 + stage3 + fc == 696_042
    assert make_resnet(width=2, depth=14).num_parameters() == 696_042
