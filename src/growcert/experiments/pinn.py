"""Population-risk training on a physics-informed network with a noisy initial condition (P2; docs/science.md,
"pinn (P2)").

Problem: 1-D advection  u_t + β u_x = 0  on x ∈ [0, 2π), t ∈ [0, 1], periodic in x, with
u(x, 0) = sin x known only through noisy observations y_i = sin x_i + ε_i, ε_i ~ N(0, noise_std²).
Exact solution u(x, t) = sin(x − βt), used for the test error only.

Model: a tanh MLP (x, t) → u, `depth` hidden layers of `width` (Raissi et al. 2019's PINN; Xavier-normal
weights, zero biases), inputs rescaled to [−1, 1]. The loss is the standard soft-constrained PINN loss

    L = mean_r (u_t + β u_x)²  +  mean_i (u(x_i, 0) − y_i)²  +  mean_j (u(0, t_j) − u(2π, t_j))²
        residual, collocation     initial condition, noisy    periodic boundary

with equal weights. Periodicity is a loss term, not hard-encoded with (sin x, cos x) input features:
that is how the advection PINN benchmarks (Krishnapriyan et al. 2021) pose it, and a periodic
embedding would make sin x itself a feature of the input, so the network would need to learn
almost nothing about the initial condition's shape — the comparison would measure little.

Data per seed (a generator seeded by the seed): `ic_points` noisy observations at uniform x_i,
`collocation_points` uniform (x, t), `boundary_points` uniform t_j. Minibatches are *stratified*:
each step draws, without replacement and independently of earlier steps, the same fraction
f ≈ batch_size / N of each pool (N = the three pools together), and the step's loss is the sum of
the three term means over those draws. That is the average of b = batch_size per-example losses,
each weighted by N/N_k (k its pool), an unbiased estimate of L; PopulationRiskAdam gets that b and
N, and because every stratum is sampled at the same fraction, its finite-population correction
N/(N − b) is the right one for every term. With `resample_collocation`, each step's collocation
points are fresh uniform draws instead (an infinite pool, no correction for that term); the gate is
then built without train_size, so the correction of the finite IC and boundary pools is dropped and
its streaming variance is slightly low there (the gate opens a little more). The pools still serve
for `train_loss`.

Every optimizer starts, per seed, from the same initial weights and sees the same batches:
AdamW over a learning-rate grid (the best of the grid is the paper's baseline) and every configured
PopulationRiskAdam variant (gate reading × variance source, `experiments.arms`, named
`poprisk-<gate>-<variance>-wd<decay>`) over its own grid (best against best, so a gain cannot be a
mere smaller effective step), all with the same decoupled weight decay and betas. The residual
differentiates through input derivatives, which the layer hooks cannot follow, so the exact variance
comes from stratified per-example rows (`stratified_example_gradients`, torch.func) and the microbatch
variance from K stratified micro-batches (each stratum split into K equal parts, so every micro-batch
is a stratified batch of the same fractions; the stratum sizes are then multiples of K).
Metric: relative test ℓ2 = ‖u_θ − u‖ / ‖u‖ on a fixed grid (`test_grid` points in x by t), the first
evaluated step at which it is ≤ `target_l2`, and its final value.
Outputs: artifacts.CURVES (with the gate diagnostics open_fraction and variance_ratio), SUMMARY and PROVENANCE;
growcert.experiments.pinn_report (best lr, table, plot, claim row) reads them.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.experiments import task
from growcert.experiments.arms import (
    DIAGNOSTIC_COLUMNS,
    ArmLoop,
    make_poprisk,
    poprisk_arms,
    run_arm,
    run_arms,
    square_sums_from_rows,
    uses_microbatches,
)
from growcert.experiments.common import Arm, step_columns, steps_to_target, write_tables
from growcert.experiments.units import run_all_units, unit_name, unit_resume_folder
from growcert.optim import SquareSums
from growcert.resume import UnitResume
from growcert.runtime import device_record, torch_runtime
from growcert.training import to_device

TWO_PI = 2 * math.pi

CURVE_COLUMNS = ["optimizer", "lr", "seed", "step", "test_l2", "train_loss", "gated_fraction", *DIAGNOSTIC_COLUMNS]
SUMMARY_COLUMNS = [
    "optimizer",
    "lr",
    "seed",
    "step_to_target",
    "final_l2",
    "seconds",
    "cpu_seconds",
    "numerics",
    "numerics_changed",
]


def exact_solution(x: Tensor, t: Tensor, beta: float) -> Tensor:
    """u(x, t) = u0(x − βt) with u0 = sin (2π-periodic, so no wrapping is needed)."""
    return torch.sin(x - beta * t)


class AdvectionPINN(nn.Module):
    """tanh MLP u(x, t), inputs rescaled from [0, 2π] × [0, 1] to [−1, 1]²; Xavier-normal init."""

    def __init__(self, width: int = 50, depth: int = 4):
        super().__init__()
        sizes = [2] + [width] * depth
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(fan_in, fan_out), nn.Tanh()]
        layers.append(nn.Linear(sizes[-1], 1))
        self.net = nn.Sequential(*layers)
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                nn.init.xavier_normal_(layer.weight)
                nn.init.zeros_(layer.bias)

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        inputs = torch.stack((x / math.pi - 1.0, 2.0 * t - 1.0), dim=-1)
        return self.net(inputs).squeeze(-1)


def advection_residual(
    u: Callable[[Tensor, Tensor], Tensor], x: Tensor, t: Tensor, beta: float, create_graph: bool = True
) -> Tensor:
    """u_t + β u_x at each point, by autograd through `u` (any pointwise callable: a network or a formula).
    With `create_graph` the residual can itself be differentiated (training); without, it is a value."""
    x = x.detach().requires_grad_(True)
    t = t.detach().requires_grad_(True)
    values = u(x, t)
    # u is pointwise, so the gradient of the sum holds each point's own derivatives
    u_x, u_t = torch.autograd.grad(values.sum(), (x, t), create_graph=create_graph)
    return u_t + beta * u_x


def initial_error(u: Callable[[Tensor, Tensor], Tensor], x: Tensor, y: Tensor) -> Tensor:
    """u(x, 0) − y: misfit to the noisy observations of the initial condition."""
    return u(x, torch.zeros_like(x)) - y


def boundary_error(u: Callable[[Tensor, Tensor], Tensor], t: Tensor) -> Tensor:
    """u(0, t) − u(2π, t): the periodic boundary condition's violation."""
    return u(torch.zeros_like(t), t) - u(torch.full_like(t, TWO_PI), t)


def pinn_loss_terms(
    u: Callable[[Tensor, Tensor], Tensor], batch: dict[str, Tensor], beta: float, create_graph: bool = True
) -> dict[str, Tensor]:
    """The three mean-squared terms and their sum ("total") on one batch
    {x_r, t_r: collocation; x_ic, y_ic: noisy initial observations; t_bc: boundary times}."""
    residual = advection_residual(u, batch["x_r"], batch["t_r"], beta, create_graph)
    initial = initial_error(u, batch["x_ic"], batch["y_ic"])
    boundary = boundary_error(u, batch["t_bc"])
    terms = {
        "residual": residual.square().mean(),
        "initial": initial.square().mean(),
        "boundary": boundary.square().mean(),
    }
    terms["total"] = terms["residual"] + terms["initial"] + terms["boundary"]
    return terms


def make_problem(settings: dict[str, Any], seed: int) -> dict[str, Tensor]:
    """The seed's pools: noisy IC observations, collocation points, boundary times (float32)."""
    generator = torch.Generator().manual_seed(seed)
    uniform = lambda n: torch.rand(n, generator=generator)  # noqa: E731
    x_ic = TWO_PI * uniform(settings["ic_points"])
    noise = settings["noise_std"] * torch.randn(settings["ic_points"], generator=generator)
    return {
        "x_ic": x_ic,
        "y_ic": torch.sin(x_ic) + noise,
        "x_r": TWO_PI * uniform(settings["collocation_points"]),
        "t_r": uniform(settings["collocation_points"]),
        "t_bc": uniform(settings["boundary_points"]),
    }


def pool_sizes(settings: dict[str, Any]) -> dict[str, int]:
    return {
        "residual": settings["collocation_points"],
        "initial": settings["ic_points"],
        "boundary": settings["boundary_points"],
    }


def stratum_batch_sizes(settings: dict[str, Any]) -> dict[str, int]:
    """Per-pool draws per step: the same fraction batch_size / N of each pool (at least 2 of each,
    so every term has a sampling variance), never the whole pool; multiples of K when a microbatch
    variant runs (every arm sees the same batches, so all arms then draw these sizes)."""
    pools = pool_sizes(settings)
    total = sum(pools.values())
    if not 0 < settings["batch_size"] < total:
        raise ValueError(
            f"pinn batch_size must lie in (0, {total}) (the pools together): the gate needs "
            f"sampled minibatches, got {settings['batch_size']}"
        )
    unit = settings["poprisk"]["microbatches"] if uses_microbatches(settings["poprisk"]) else 1
    sizes = {
        term: min(max(2, unit, unit * round(settings["batch_size"] * n / total / unit)), unit * ((n - 1) // unit))
        for term, n in pools.items()
    }
    if min(pools.values()) < 3 or min(sizes.values()) < max(2, unit):
        raise ValueError(
            f"pinn pools need at least 3 points each (and more than poprisk.microbatches = {unit}), got {pools}"
        )
    return sizes


def sample_batch(
    problem: dict[str, Tensor], sizes: dict[str, int], resample: bool, generator: torch.Generator
) -> dict[str, Tensor]:
    """One stratified minibatch; draws depend on the generator only, so every arm sees the same batches."""
    pick = lambda n, k: torch.randperm(n, generator=generator)[:k]  # noqa: E731
    ic = pick(len(problem["x_ic"]), sizes["initial"])
    bc = pick(len(problem["t_bc"]), sizes["boundary"])
    if resample:
        x_r = TWO_PI * torch.rand(sizes["residual"], generator=generator)
        t_r = torch.rand(sizes["residual"], generator=generator)
    else:
        r = pick(len(problem["x_r"]), sizes["residual"])
        x_r, t_r = problem["x_r"][r], problem["t_r"][r]
    return {
        "x_r": x_r,
        "t_r": t_r,
        "x_ic": problem["x_ic"][ic],
        "y_ic": problem["y_ic"][ic],
        "t_bc": problem["t_bc"][bc],
    }


def evaluation_grid(settings: dict[str, Any]) -> tuple[Tensor, Tensor, Tensor]:
    """Flattened test points (x on [0, 2π) without the duplicate 2π, t on [0, 1]) and the exact u there."""
    nx, nt = settings["test_grid"]
    x, t = torch.meshgrid(torch.arange(nx) * (TWO_PI / nx), torch.linspace(0.0, 1.0, nt), indexing="ij")
    x, t = x.reshape(-1), t.reshape(-1)
    return x, t, exact_solution(x, t, settings["beta"])


def relative_l2(u: Callable[[Tensor, Tensor], Tensor], grid: tuple[Tensor, Tensor, Tensor]) -> float:
    """‖u − u_exact‖ / ‖u_exact‖ over the test grid."""
    x, t, exact = grid
    with torch.no_grad():
        return float(torch.linalg.vector_norm(u(x, t) - exact) / torch.linalg.vector_norm(exact))


def optimizer_arms(settings: dict[str, Any]) -> list[Arm]:
    """The optimizers compared, each an `Arm` with its lr, in a fixed order: the AdamW grid, then every
    PopulationRiskAdam variant over poprisk.lrs, all at the section's weight decay."""
    variants = poprisk_arms(settings["poprisk"], [settings["weight_decay"]])
    return [
        Arm("AdamW", "adamw", weight_decay=settings["weight_decay"], lr=float(lr)) for lr in settings["adamw_lrs"]
    ] + [dataclasses.replace(variant, lr=float(lr)) for variant in variants for lr in settings["poprisk"]["lrs"]]


def make_optimizer(arm: Arm, model: nn.Module, settings: dict[str, Any]) -> torch.optim.Optimizer:
    betas, wd = tuple(settings["betas"]), settings["weight_decay"]
    if arm.kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=arm.lr, betas=betas, weight_decay=wd)
    fixed_pools = not settings["resample_collocation"]  # finite-population correction only for finite pools
    return make_poprisk(
        arm,
        model.parameters(),
        arm.lr,
        betas,
        sum(stratum_batch_sizes(settings).values()),
        sum(pool_sizes(settings).values()) if fixed_pools else None,
    )


def stratified_microbatch_square_sums(
    model: nn.Module, batch: dict[str, Tensor], beta: float, microbatches: int
) -> SquareSums:
    """Σ_j m_j² over K stratified micro-batches (each stratum split into K equal consecutive parts of its
    random draw) for `PopulationRiskAdam(variance="microbatch")`; sets .grad to the mean of the m_j, the
    batch gradient of the total loss (equal parts: the mean of the part means is the stratum mean)."""
    params = [p for p in model.parameters() if p.requires_grad]
    totals = [torch.zeros_like(p) for p in params]
    squares = [torch.zeros_like(p) for p in params]
    for j in range(microbatches):
        part = {key: values.tensor_split(microbatches)[j] for key, values in batch.items()}
        grads = torch.autograd.grad(pinn_loss_terms(model, part, beta)["total"], params)
        torch._foreach_add_(totals, grads)
        torch._foreach_addcmul_(squares, grads, grads)
    torch._foreach_div_(totals, microbatches)
    for p, mean in zip(params, totals):
        p.grad = mean
    return SquareSums(dict(zip(params, squares)), microbatches)


def stratified_example_gradients(model: nn.Module, batch: dict[str, Tensor], beta: float) -> dict[Tensor, Tensor]:
    """Rows for `PopulationRiskAdam(variance="exact").step(per_example_grads=...)` under stratified sampling;
    sets each parameter's .grad to the batch gradient of the total loss.

    The step's gradient is a sum of three independent stratum means, so its variance is Σ_k s_k²/b_k,
    not the pooled s²/b (which would count the differences between the terms' mean gradients as noise).
    The optimizer computes Σ_i (z_i − z̄)² / (b(b − 1)) over the b rows it gets; the rows
    z = c_k (g − ḡ_k), c_k² = b(b − 1) / (b_k(b_k − 1)), centred within their stratum, make that
    exactly Σ_k s_k²/b_k."""
    names = [name for name, _ in model.named_parameters()]
    params = {name: p.detach() for name, p in model.named_parameters()}

    def u(params, x, t):  # one point
        return functional_call(model, params, (x.reshape(1), t.reshape(1))).squeeze(0)

    def residual_loss(params, x, t):
        u_x, u_t = grad(u, argnums=(1, 2))(params, x, t)
        return (u_t + beta * u_x).square()

    def initial_loss(params, x, y):
        return initial_error(functools.partial(u, params), x, y).square()

    def boundary_loss(params, t):
        return boundary_error(functools.partial(u, params), t).square()

    strata = [
        vmap(grad(residual_loss), in_dims=(None, 0, 0))(params, batch["x_r"], batch["t_r"]),
        vmap(grad(initial_loss), in_dims=(None, 0, 0))(params, batch["x_ic"], batch["y_ic"]),
        vmap(grad(boundary_loss), in_dims=(None, 0))(params, batch["t_bc"]),
    ]
    b = sum(len(stratum[names[0]]) for stratum in strata)
    rows: dict[Tensor, Tensor] = {}
    for name, p in model.named_parameters():
        p.grad = sum(stratum[name].mean(dim=0) for stratum in strata)
        parts = []
        for stratum in strata:
            examples = stratum[name]
            b_k = len(examples)
            parts.append((examples - examples.mean(dim=0)) * math.sqrt(b * (b - 1) / (b_k * (b_k - 1))))
        rows[p] = torch.cat(parts)
    return rows


def exact_square_sums(model: nn.Module, batch: dict[str, Tensor], beta: float) -> SquareSums:
    """The exact gate's s²/b of this batch (stratified rows) as SquareSums, against the batch gradient
    already in .grad (which the rows' own pass overwrites; GateDiagnostics puts it back)."""
    batch_grads = {p: p.grad.clone() for p in model.parameters()}
    rows = stratified_example_gradients(model, batch, beta)
    for p, batch_grad in batch_grads.items():
        p.grad = batch_grad
    return square_sums_from_rows(rows)


def train_arm(
    arm: Arm, settings, seed, initial_state, model, problem, grid, log, resume=None, snapshot=None
) -> tuple[list[dict], dict]:
    """Train one optimizer from `initial_state` (`arms.run_arm`); returns its curve rows and its summary row.
    With `resume` (resume.UnitResume) and the `snapshot` a killed run left it continues that run and
    snapshots itself."""
    model.load_state_dict(initial_state)
    optimizer = make_optimizer(arm, model, settings)
    sizes = stratum_batch_sizes(settings)
    device = next(model.parameters()).device
    pools = {key: to_device(values, device) for key, values in problem.items()}  # batches are drawn on the CPU
    batches = torch.Generator().manual_seed(seed + 1)  # the same batch sequence for every arm of a seed
    beta = settings["beta"]

    def evaluate(step: int) -> dict[str, float]:
        train_loss = pinn_loss_terms(model, pools, beta, create_graph=False)["total"].item()  # whole pools
        return {"lr": arm.lr, "test_l2": relative_l2(model, grid), "train_loss": train_loss}

    def step(step: int):
        batch = sample_batch(problem, sizes, settings["resample_collocation"], batches)
        batch = {key: to_device(values, device) for key, values in batch.items()}
        optimizer.zero_grad(set_to_none=True)
        exact = lambda: exact_square_sums(model, batch, beta)  # noqa: E731
        if arm.variance == "exact":
            return {"per_example_grads": stratified_example_gradients(model, batch, beta)}, None
        if arm.variance == "microbatch":
            return {"square_sums": stratified_microbatch_square_sums(model, batch, beta, arm.microbatches)}, exact
        pinn_loss_terms(model, batch, beta)["total"].backward()
        return {}, exact

    loop = ArmLoop(
        arm, seed, model, optimizer, batches, settings["steps"], settings["eval_every"], settings["diagnostics_every"]
    )
    run = run_arm(loop, step, evaluate, resume=resume, snapshot=snapshot)
    history, seconds = run.history, run.seconds
    reached = steps_to_target(
        [row["step"] for row in history], [row["test_l2"] for row in history], settings["target_l2"]
    )
    summary = {
        "optimizer": arm.name,
        "lr": arm.lr,
        "seed": seed,
        "step_to_target": reached,
        "final_l2": history[-1]["test_l2"],
        "seconds": round(seconds, 2),
        "cpu_seconds": round(run.cpu_seconds, 2),
        **run.numerics,
    }
    log(
        f"{arm.name} lr={arm.lr:g} seed {seed}: ℓ2 ≤ {settings['target_l2']:g} at step {reached}, "
        f"final ℓ2 {summary['final_l2']:.3f} ({seconds:.1f}s)"
    )
    return history, summary


def pinn_units(settings: dict[str, Any]) -> list[tuple[str, int]]:
    """Every unit (arm's unit name, seed) of these settings: the judged and the tuning seeds in order, each with
    every arm at every lr of its grid (`pinn_unit_name`)."""
    settings = stage_settings("pinn", settings)
    return [(pinn_unit_name(arm), seed) for seed in pinn_seeds(settings) for arm in optimizer_arms(settings)]


def pinn_seeds(settings: dict[str, Any]) -> list[int]:
    """The seeds every arm runs on: the judged and the tuning seeds, in order."""
    return sorted(set(settings["seeds"]) | set(settings["tuning_seeds"]))


def pinn_unit_name(arm: Arm) -> str:
    """An arm at one lr as a unit name: its name and its lr ('AdamW-lr0.01')."""
    return unit_name(f"{arm.name}-lr{arm.lr:g}")


def pinn_unit_settings(settings: dict[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """The settings a unit runs with: the whole section (a unit is one of its arms, lrs and seeds)."""
    return stage_settings("pinn", settings)


def run_pinn(
    settings: dict[str, Any],
    out_dir: str | Path,
    log: Callable[[str], None] = print,
    threads: int | None = None,
    *,
    device: str,
) -> dict[str, Any]:
    """Every unit (arm × lr × seed) in this process on `device` (a `device` setting), then the task's
    curves, summary and provenance record (artifacts.CURVES, SUMMARY, PROVENANCE) from them (`experiments.units`)."""
    return run_all_units(
        task("pinn"), stage_settings("pinn", settings), out_dir, log=log, threads=threads, device=device
    )


def run_pinn_unit(
    settings: dict[str, Any],
    out_dir: str | Path,
    arm: str,
    seed: int,
    log: Callable[[str], None] = print,
    threads: int | None = None,
    *,
    device: str,
) -> dict[str, Any]:
    """Train arm `arm` (its unit name: an optimizer at one lr) at `seed` on `device` into `out_dir`:
    artifacts.CURVES, SUMMARY and PROVENANCE (with the device); resumable from the folder's resume state."""
    with torch_runtime(threads, device=device) as runtime:
        return _run_unit(pinn_unit_settings(settings, arm, seed), Path(out_dir), arm, seed, log, runtime.device)


def _run_unit(
    settings: dict[str, Any], out_dir: Path, unit: str, seed: int, log: Callable[[str], None], device: torch.device
) -> dict[str, Any]:
    arms = {pinn_unit_name(arm): arm for arm in optimizer_arms(settings)}
    if unit not in arms:
        raise ConfigError(f"--arm {unit!r} is not an arm of config key 'pinn' (its arms: {', '.join(arms)})")
    arm = arms[unit]
    out_dir.mkdir(parents=True, exist_ok=True)
    grid = tuple(to_device(values, device) for values in evaluation_grid(settings))
    log(
        f"PINN advection β={settings['beta']:g}, IC noise std {settings['noise_std']:g}: {arm.name} lr={arm.lr:g} "
        f"at seed {seed}, {settings['steps']} steps, batch {settings['batch_size']} ({stratum_batch_sizes(settings)})"
    )
    sizes = {}

    def prepare(seed: int):
        problem, model, initial_state = prepare_seed(settings, seed, device)
        sizes["num_parameters"] = sum(p.numel() for p in model.parameters())
        return problem, model, initial_state

    def train(arm: Arm, seed: int, prepared, resume=None, snapshot=None) -> tuple[list[dict], dict]:
        problem, model, initial_state = prepared
        return train_arm(
            arm, settings, seed, initial_state, model, problem, grid, log, resume=resume, snapshot=snapshot
        )

    resume = UnitResume(out_dir, settings, settings["resume_every"], log, path=unit_resume_folder(out_dir))
    curves, summaries = run_arms([seed], [arm], prepare, train, resume=resume)
    summary = step_columns(pd.DataFrame(summaries, columns=SUMMARY_COLUMNS), ("step_to_target",))
    written = write_tables(
        out_dir,
        settings,
        {"curves": pd.DataFrame(curves, columns=CURVE_COLUMNS), "summary": summary},
        **sizes,
        **device_record(device),
    )
    resume.folder.clear()
    return written


def prepare_seed(settings: dict[str, Any], seed: int, device: torch.device):
    """What every arm of a seed starts from, rebuilt from the seed alone: its problem (noisy observations and
    point pools), the model and a copy of its initial weights (drawn under the seed without reseeding the
    caller's generator). Each unit calls it, so the arms of a seed share them without sharing a process."""
    problem = make_problem(settings, seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AdvectionPINN(settings["width"], settings["depth"]).to(device)
    return problem, model, copy.deepcopy(model.state_dict())
