"""PopulationRiskAdam's named variants: gate readings × variance sources.

Open gate = torch's Adam/AdamW bit for bit in every variant; gate="gradient" = AdamW fed the masked
gradient; the micro-batch variance is unbiased (Monte Carlo) and immune to the drift that inflates
the streaming one; every variant closes on noise and opens on signal; state survives a save/load."""

import copy
import itertools

import pytest
import torch
from helpers import mse_per_example, regression_batch, small_net
from scipy import stats
from torch import nn

from growcert.optim import (
    GATE_READINGS,
    VARIANCE_SOURCES,
    PopulationRiskAdam,
    SquareSums,
    microbatch_square_sums,
    per_example_square_sums,
)

VARIANTS = list(itertools.product(GATE_READINGS, VARIANCE_SOURCES))
K = 4  # micro-batches


def backward_for(variance, model, x, y) -> SquareSums | None:
    """Set the model's .grad to the batch mean as each source's pipeline would; its square sums or None."""
    model.zero_grad(set_to_none=True)
    if variance == "exact":
        return per_example_square_sums(model, mse_per_example, x, y)[1]
    if variance == "microbatch":
        return microbatch_square_sums(model, mse_per_example, x, y, microbatches=K)[1]
    mse_per_example(model(x), y).mean().backward()
    return None


def build(params, gate, variance, **options):
    extra = {"microbatches": K} if variance == "microbatch" else {}
    return PopulationRiskAdam(params, gate=gate, variance=variance, **extra, **options)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
@pytest.mark.parametrize("gate, variance", VARIANTS)
def test_open_gate_is_torch_adam_bitwise_in_every_variant(gate, variance, weight_decay):
    # noise_multiplier=0 opens every element with a nonzero gradient (a tanh net has no exact zeros)
    reference_model, model = small_net(), small_net()
    torch_class = torch.optim.AdamW if weight_decay else torch.optim.Adam
    reference = torch_class(
        reference_model.parameters(), lr=1e-2, betas=(0.9, 0.98), weight_decay=weight_decay, foreach=True
    )
    optimizer = build(
        model.parameters(),
        gate,
        variance,
        lr=1e-2,
        betas=(0.9, 0.98),
        weight_decay=weight_decay,
        noise_multiplier=0.0,
        batch_size=16,
    )
    generator = torch.Generator().manual_seed(1)
    for _ in range(6):
        sums = backward_for(variance, model, *regression_batch(generator))
        for p, q in zip(reference_model.parameters(), model.parameters()):
            p.grad = q.grad.clone()  # the same gradient bits: the comparison is of the optimizers alone
        optimizer.step(square_sums=sums)
        reference.step()
        assert optimizer.last_gated_fraction == 0.0 and optimizer.last_open_fraction == 1.0
        for p, q in zip(reference_model.parameters(), model.parameters()):
            assert torch.equal(p, q)


def pool_batches(pool, b, steps, seed):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        yield pool[torch.randperm(len(pool), generator=generator)[:b]]


def rows_for(variance, batch):
    """The rows whose squares the source sums: the examples (exact) or the K micro-batch means."""
    return batch.reshape(K, -1, batch.shape[1]).mean(dim=1) if variance == "microbatch" else batch


@pytest.mark.parametrize("variance", ["exact", "microbatch"])
def test_gradient_reading_is_adamw_fed_the_masked_gradient(variance):
    # Per-example gradients are the rows of a pool (loss θ·x): they do not depend on θ, so every element
    # evolves on its own and one whose gate is decided clearly at every step must match bit for bit.
    pool = torch.randn(800, 3000, generator=torch.Generator().manual_seed(0)) * torch.linspace(0.5, 2, 3000) + 0.3
    theta, reference_theta = nn.Parameter(torch.zeros(3000)), nn.Parameter(torch.zeros(3000))
    optimizer = build([theta], "gradient", variance, lr=1e-2, betas=(0.9, 0.98), weight_decay=0.1)
    reference = torch.optim.AdamW([reference_theta], lr=1e-2, betas=(0.9, 0.98), weight_decay=0.1, foreach=True)
    beta_v, smoothed = 0.98, torch.zeros(3000, dtype=torch.float64)
    trusted = torch.ones(3000, dtype=torch.bool)
    for step, batch in enumerate(pool_batches(pool, 32, 40, seed=1), start=1):
        rows = rows_for(variance, batch)
        mean = rows.mean(dim=0)
        # the gate computed here in float64, from the formulas: s²/b of the rows, EMA'd for micro-batches
        variance_of_mean = rows.double().var(dim=0, correction=1) / len(rows)
        if variance == "microbatch":
            smoothed = beta_v * smoothed + (1 - beta_v) * variance_of_mean
            variance_of_mean = smoothed / (1 - beta_v**step)
        margin = mean.double() ** 2 - variance_of_mean
        trusted &= margin.abs() > 1e-4 * (mean.double() ** 2 + variance_of_mean)
        theta.grad, reference_theta.grad = mean.clone(), mean * (margin > 0)
        optimizer.step(square_sums=SquareSums({theta: rows.square().sum(dim=0)}, len(rows)))
        reference.step()
        assert torch.equal(optimizer.last_open[theta][trusted], (margin > 0)[trusted])
    assert trusted.float().mean() > 0.98
    assert 0.2 < optimizer.last_gated_fraction < 0.8  # a real mix of open and closed elements
    assert torch.equal(theta.detach()[trusted], reference_theta.detach()[trusted])


def test_streaming_gradient_reading_keeps_the_raw_variance():
    # Under gate="gradient" Adam's moments see the masked gradient, but the streaming variance must still be
    # that of the raw stream: its gates equal those of gate="update" on the same stream, and its steps are
    # AdamW's fed g ⊙ gate.
    pool = torch.randn(800, 2000, generator=torch.Generator().manual_seed(3)) + 0.2
    thetas = {name: nn.Parameter(torch.zeros(2000)) for name in ("update", "gradient", "adamw")}
    update = PopulationRiskAdam([thetas["update"]], lr=1e-2, betas=(0.9, 0.98), gate="update")
    gradient = PopulationRiskAdam([thetas["gradient"]], lr=1e-2, betas=(0.9, 0.98), gate="gradient")
    adamw = torch.optim.AdamW([thetas["adamw"]], lr=1e-2, betas=(0.9, 0.98), weight_decay=0.0, foreach=True)
    for batch in pool_batches(pool, 32, 40, seed=4):
        mean = batch.mean(dim=0)
        for theta in thetas.values():
            theta.grad = mean.clone()
        update.step()
        gradient.step()
        assert torch.equal(gradient.last_open[thetas["gradient"]], update.last_open[thetas["update"]])
        thetas["adamw"].grad = mean * update.last_open[thetas["update"]]
        adamw.step()
        assert torch.equal(thetas["gradient"], thetas["adamw"])
    assert {"raw_exp_avg", "raw_exp_avg_sq", "noise_ratio"} <= set(gradient.state[thetas["gradient"]])
    assert not torch.equal(thetas["gradient"], thetas["update"])  # the readings do differ


class DriftingQuadratic(nn.Module):
    """Per-example loss θ·x_i + (a/2)‖θ‖²: per-example gradient x_i + aθ, exactly known; its mean drifts
    as fast as θ moves."""

    def __init__(self, elements, a, start):
        super().__init__()
        self.a, self.theta = a, nn.Parameter(torch.full((elements,), start))

    def forward(self, x):
        return x @ self.theta + 0.5 * self.a * self.theta.square().sum()


def test_microbatch_variance_is_unbiased_for_the_batch_mean_variance():
    # rows x_i ~ N(0, σ_k²) independently, so Var[batch mean] = σ_k²/b exactly; the micro-batch estimate of one
    # step (at step 1 the EMA is that step's estimate) averaged over draws and elements must match it
    elements, b, draws = 400, 32, 150
    sigma = torch.linspace(0.5, 2.0, elements)
    generator = torch.Generator().manual_seed(8)
    ratios = []
    for _ in range(draws):
        model = DriftingQuadratic(elements, a=0.0, start=0.0)
        optimizer = PopulationRiskAdam(model.parameters(), variance="microbatch", microbatches=K)
        x = torch.randn(b, elements, generator=generator) * sigma
        _, sums = microbatch_square_sums(model, lambda losses: losses, x, microbatches=K)
        optimizer.step(square_sums=sums)
        ratios.append(optimizer.gate_variance()[model.theta] / (sigma**2 / b))
    ratios = torch.stack(ratios)
    standard_error = ratios.std() / ratios.numel() ** 0.5
    assert abs(ratios.mean().item() - 1.0) < 4 * standard_error.item(), (ratios.mean(), standard_error)
    # the estimate has K − 1 = 3 degrees of freedom: its relative spread is √(2/3) ≈ 0.82 per step
    assert abs(ratios.std().item() - (2 / (K - 1)) ** 0.5) < 0.05


@pytest.mark.parametrize("a", [0.0, 5.0])
def test_microbatch_variance_ignores_the_drift_that_inflates_the_streaming_one(a):
    # Both run gate="off" (plain Adam, the same trajectory) on the same batches; with a = 5 the mean gradient
    # aθ moves by a·lr = 0.1 per step, several standard errors of the batch mean (σ/√b ≈ 0.18) per
    # centre window: the streaming estimate counts that motion as noise, the micro-batch one cannot see it.
    # Measured: a = 0: streaming median ratio 1.00, micro-batch mean 0.995 (SE 0.004); a = 5: 17.1 and 0.995.
    elements, b, steps = 500, 32, 150
    models = {source: DriftingQuadratic(elements, a, start=5.0) for source in ("streaming", "microbatch")}
    optimizers = {
        "streaming": PopulationRiskAdam(
            models["streaming"].parameters(), lr=0.02, gate="off", batch_size=b, betas=(0.9, 0.98)
        ),
        "microbatch": PopulationRiskAdam(
            models["microbatch"].parameters(),
            lr=0.02,
            gate="off",
            variance="microbatch",
            microbatches=K,
            betas=(0.9, 0.98),
        ),
    }
    generator = torch.Generator().manual_seed(9)
    for _ in range(steps):
        x = torch.randn(b, elements, generator=generator)
        for source, model in models.items():
            model.zero_grad(set_to_none=True)
            if source == "streaming":
                model(x).mean().backward()
                optimizers[source].step()
            else:
                optimizers[source].step(
                    square_sums=microbatch_square_sums(model, lambda losses: losses, x, microbatches=K)[1]
                )
    true_variance = 1.0 / b
    streaming = optimizers["streaming"].gate_variance()[models["streaming"].theta] / true_variance
    micro = optimizers["microbatch"].gate_variance()[models["microbatch"].theta] / true_variance
    standard_error = micro.std().item() / elements**0.5
    assert abs(micro.mean().item() - 1.0) < 4 * standard_error, micro.mean()
    if a == 0:
        assert 0.8 < streaming.median().item() < 1.25, streaming.median()
    else:
        assert models["streaming"].theta.mean() < 5.0 - 2.0  # θ did travel: the drift is real
        assert streaming.median().item() > 3.0, streaming.median()


@pytest.mark.parametrize("gate, variance", VARIANTS)
def test_every_variant_closes_on_noise_and_opens_on_signal(gate, variance):
    b, elements = 16, 2000
    noise = torch.randn(2000, elements, generator=torch.Generator().manual_seed(5))
    noise -= noise.mean(dim=0)  # exactly zero-mean per-example gradients over the pool
    fractions = {}
    for name, pool in (("noise", noise), ("signal", noise + 10.0 / b**0.5)):  # mean 10 standard errors
        theta = nn.Parameter(torch.zeros(elements))
        optimizer = build([theta], gate, variance, lr=1e-3, batch_size=b, train_size=len(pool))
        gated = []
        for step, batch in enumerate(pool_batches(pool, b, 150, seed=2), start=1):
            rows = rows_for(variance, batch)
            theta.grad = batch.mean(dim=0)
            sums = None if variance == "streaming" else SquareSums({theta: rows.square().sum(dim=0)}, len(rows))
            optimizer.step(square_sums=sums)
            if step > 50:
                gated.append(optimizer.last_gated_fraction)
        fractions[name] = sum(gated) / len(gated)
    # Pure noise: μ² > s²/b stays open where |t| > 1: the exact gate blocks P(|t_{b−1}| ≤ 1); a smoothed
    # estimate (streaming, micro-batch EMA) is nearly the true variance, so ≈ P(|Z| ≤ 1) = 0.683.
    expected = stats.t.cdf(1, b - 1) - stats.t.cdf(-1, b - 1) if variance == "exact" else 0.6827
    assert abs(fractions["noise"] - expected) < 0.025, fractions
    assert fractions["signal"] < 0.005, fractions


@pytest.mark.parametrize("variance", ["streaming", "microbatch"])
def test_variance_ratio_compares_the_gate_variance_with_the_exact_one(variance):
    # Stationary stream, long EMA: V̂ ≈ V, while the exact s²/b of one batch is V·χ²_{b−1}/(b − 1); the
    # median of V̂/(s²/b) is then (b − 1)/median(χ²_{b−1}) (1.011 at b = 64), up to V̂'s own small spread.
    b, elements = 64, 4000
    pool = torch.randn(20000, elements, generator=torch.Generator().manual_seed(6)) * 0.1 + 0.05
    theta = nn.Parameter(torch.zeros(elements))
    optimizer = build([theta], "update", variance, batch_size=b, train_size=len(pool), variance_beta=0.995)
    for batch in pool_batches(pool, b, 400, seed=7):
        theta.grad = batch.mean(dim=0)
        rows = rows_for(variance, batch)
        optimizer.step(
            square_sums=None if variance == "streaming" else SquareSums({theta: rows.square().sum(0)}, len(rows))
        )
    exact = SquareSums({theta: batch.square().sum(dim=0)}, b)  # the last batch, whose mean is still .grad
    expected = (b - 1) / stats.chi2.median(b - 1)
    assert abs(optimizer.variance_ratio(exact) - expected) < 0.04, (optimizer.variance_ratio(exact), expected)


@pytest.mark.parametrize("gate, variance", VARIANTS)
def test_state_dict_round_trip_resumes_identically_in_every_variant(gate, variance):
    generator = torch.Generator().manual_seed(7)
    batches = [regression_batch(generator) for _ in range(10)]

    def train(model, optimizer, steps):
        for x, y in steps:
            optimizer.step(square_sums=backward_for(variance, model, x, y))

    options = dict(lr=1e-2, weight_decay=0.05, batch_size=16)
    straight = small_net()
    straight_optimizer = build(straight.parameters(), gate, variance, **options)
    train(straight, straight_optimizer, batches)
    first = small_net()
    first_optimizer = build(first.parameters(), gate, variance, **options)
    train(first, first_optimizer, batches[:5])
    saved_model, saved_optimizer = copy.deepcopy(first.state_dict()), copy.deepcopy(first_optimizer.state_dict())
    resumed = small_net(seed=99)
    resumed.load_state_dict(saved_model)
    resumed_optimizer = build(resumed.parameters(), gate, variance, lr=1.0)  # options come back from the state
    resumed_optimizer.load_state_dict(saved_optimizer)
    train(resumed, resumed_optimizer, batches[5:])
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)
    assert resumed_optimizer.last_gated_fraction == straight_optimizer.last_gated_fraction
    assert 0.0 < straight_optimizer.last_gated_fraction < 1.0  # the gate did decide something
    for p, q in zip(straight.parameters(), resumed.parameters()):
        for key, value in straight_optimizer.state[p].items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(resumed_optimizer.state[q][key])), key


def test_misuse_of_the_variants_fails_with_a_clear_message():
    theta = nn.Parameter(torch.zeros(3))
    theta.grad = torch.ones(3)
    with pytest.raises(ValueError, match="gate must be one of"):
        PopulationRiskAdam([theta], gate="mask")
    with pytest.raises(ValueError, match="microbatches"):
        PopulationRiskAdam([theta], variance="microbatch")
    with pytest.raises(ValueError, match="microbatches"):
        PopulationRiskAdam([theta], variance="exact", microbatches=4)
    with pytest.raises(ValueError, match="microbatch_square_sums"):
        PopulationRiskAdam([theta], variance="microbatch", microbatches=4).step()
    with pytest.raises(ValueError, match="rows"):
        PopulationRiskAdam([theta], variance="microbatch", microbatches=4).step(
            square_sums=SquareSums({theta: torch.ones(3)}, 8)
        )
    with pytest.raises(ValueError, match="square_sums given"):
        PopulationRiskAdam([theta]).step(square_sums=SquareSums({theta: torch.ones(3)}, 8))
    assert PopulationRiskAdam([theta], gate=False).param_groups[0]["gate"] == "off"  # the old boolean
