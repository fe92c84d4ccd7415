"""Σ_i g_i² from layer hooks equals the per-example gradients of torch.func, squared and summed; the
micro-batch sums are those of the micro-batch means computed one by one."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from growcert.experiments.pinn import AdvectionPINN
from growcert.models.llama import Llama, LlamaConfig
from growcert.models.resnet import ResNet, ResNetConfig
from growcert.optim import microbatch_square_sums, per_example_gradients, per_example_square_sums
from growcert.optim.square_sums import HOOKED


def last_token_loss(outputs, answers):
    return F.cross_entropy(outputs[:, -1], answers, reduction="none")


def sequence_loss(outputs, targets):
    return F.cross_entropy(outputs.transpose(1, 2), targets, reduction="none").mean(dim=1)


def squared_error(outputs, targets):
    return (outputs - targets).square().sum(dim=1)


class SharedAndMixed(nn.Module):
    """One Linear called twice (weight sharing across calls), an embedding with a padding row, LayerNorm with
    bias, a Linear with bias over a 4-d input, and a Conv1d for the torch.func fallback."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(7, 6, padding_idx=0)
        self.norm = nn.LayerNorm(6)
        self.shared = nn.Linear(6, 6)
        self.conv = nn.Conv1d(6, 6, 3, padding=1)
        self.head = nn.Linear(6, 3)

    def forward(self, tokens):
        x = self.norm(self.embed(tokens))  # (b, T, 6)
        x = torch.tanh(self.shared(torch.tanh(self.shared(x))))
        x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
        return self.head(x.reshape(x.shape[0], 2, -1, 6)).mean(dim=(1, 2))  # Linear over (b, 2, T/2, 6)


def models_and_batches():
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    grokking = Llama(LlamaConfig(width=32, depth=2, vocab_size=13, head_dim=16, context=4))
    tokens = torch.randint(0, 13, (9, 4), generator=generator)
    yield "llama, last-token loss (pair path)", grokking, last_token_loss, tokens, torch.randint(0, 13, (9,))
    long = Llama(LlamaConfig(width=32, depth=1, vocab_size=17, head_dim=16, context=12))
    text = torch.randint(0, 17, (6, 13), generator=generator)
    yield "llama, every-token loss, T=12 (per-example path)", long, sequence_loss, text[:, :-1], text[:, 1:]
    resnet = ResNet(ResNetConfig(width=1, depth=8, in_channels=1, num_classes=4))
    for module in resnet.modules():  # non-trivial BatchNorm statistics and gains, then eval mode
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5), module.running_var.uniform_(0.5, 2.0)
            module.weight.data.uniform_(0.5, 1.5), module.bias.data.uniform_(-0.2, 0.2)
    images = torch.randn(5, 1, 8, 8, generator=generator)
    yield "resnet, eval-mode BatchNorm", resnet.eval(), ResNet.per_example_loss, images, torch.tensor([0, 1, 2, 3, 0])
    pinn = AdvectionPINN(width=16, depth=3).net
    points = torch.rand(11, 2, generator=generator) * 2 - 1
    yield "PINN MLP", pinn, squared_error, points, torch.randn(11, 1, generator=generator)
    mixed = SharedAndMixed()
    words = torch.randint(0, 7, (8, 4), generator=generator)
    words[0, :2] = 0  # the padding row is used, and never gets a gradient
    yield "shared Linear, padded embedding, LayerNorm, Conv1d", mixed, squared_error, words, torch.randn(8, 3)


CASES = list(models_and_batches())


@pytest.mark.parametrize("name, model, loss_fn, inputs, targets", CASES, ids=[case[0] for case in CASES])
def test_hook_square_sums_equal_torch_func_per_example_gradients(name, model, loss_fn, inputs, targets):
    # float64 so that the comparison tests the formula, not float32 rounding
    model = model.double()
    inputs = inputs.double() if inputs.is_floating_point() else inputs
    targets = targets.double() if targets.is_floating_point() else targets
    losses, square_sums = per_example_square_sums(model, loss_fn, inputs, targets)
    batch_grads = {p: p.grad.clone() for p in model.parameters()}
    reference_losses, per_example = per_example_gradients(model, loss_fn, inputs, targets)
    assert square_sums.rows == len(inputs)
    assert torch.allclose(losses, reference_losses, rtol=1e-12)
    for parameter_name, p in model.named_parameters():
        expected = per_example[p].square().sum(dim=0)
        assert square_sums.sums[p].shape == p.shape
        error = (square_sums.sums[p] - expected).norm() / expected.norm().clamp_min(1e-300)
        assert error < 1e-6, (parameter_name, error.item())
        assert torch.allclose(batch_grads[p], p.grad, rtol=1e-10, atol=1e-14), parameter_name  # .grad = batch mean
    kinds = {type(m) for m in model.modules() if any(True for _ in m.parameters(recurse=False))}
    assert kinds & set(HOOKED), "the case exercises the hooks, not only the fallback"


def test_inplace_modified_hooked_output_is_refused():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Linear(4, 1))
    with pytest.raises(RuntimeError, match="in place"):
        per_example_square_sums(
            model, lambda out, y: (out - y).square().sum(dim=1), torch.randn(5, 3), torch.randn(5, 1)
        )


def test_microbatch_square_sums_are_those_of_the_micro_batch_means():
    torch.manual_seed(1)
    model = AdvectionPINN(width=8, depth=2).net
    x, y = torch.randn(12, 2), torch.randn(12, 1)
    losses, sums = microbatch_square_sums(model, squared_error, x, y, microbatches=3)
    assert sums.rows == 3 and losses.shape == (12,)
    means = []
    for part in range(3):
        model.zero_grad()
        squared_error(model(x[4 * part : 4 * part + 4]), y[4 * part : 4 * part + 4]).mean().backward()
        means.append({p: p.grad.clone() for p in model.parameters()})
    model.zero_grad()
    squared_error(model(x), y).mean().backward()
    for p in model.parameters():
        rows = torch.stack([mean[p] for mean in means])
        assert torch.allclose(sums.sums[p], rows.square().sum(dim=0), rtol=1e-5, atol=1e-7)
        assert torch.allclose(rows.mean(dim=0), p.grad, rtol=1e-5, atol=1e-7)  # the batch-mean gradient
    with pytest.raises(ValueError, match="divide"):
        microbatch_square_sums(model, squared_error, x, y, microbatches=5)


def test_float32_hook_variance_decides_the_gate_as_the_float64_formula():
    # Σ g² − b·μ² cancels where the signal dominates; in float32 on a grokking-shaped model that must not
    # move s²/b enough to flip a gate decision. Measured: 0 of 103,872 flipped, max relative error 1e-6.
    torch.manual_seed(0)
    model = Llama(LlamaConfig(width=64, depth=2, vocab_size=49, head_dim=16, context=4))
    tokens, answers = torch.randint(0, 47, (128, 4)), torch.randint(0, 47, (128,))
    _, square_sums = per_example_square_sums(model, last_token_loss, tokens, answers)
    decisions = {p: p.grad**2 > square_sums.variance_of_mean(p) for p in model.parameters()}
    _, per_example = per_example_gradients(model, last_token_loss, tokens, answers)
    for p in model.parameters():
        rows = per_example[p].double()
        mean, variance_of_mean = rows.mean(dim=0), rows.var(dim=0, correction=1) / len(rows)
        margin = mean**2 - variance_of_mean
        # rows of tokens the batch never uses have μ = s² = 0 exactly: closed under both (strict >)
        clear = (margin.abs() > 1e-4 * (mean**2 + variance_of_mean)) | (rows == 0).all(dim=0)
        assert torch.equal(decisions[p][clear], (margin > 0)[clear])
        assert clear.float().mean() > 0.999
