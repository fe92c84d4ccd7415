"""Output-space operators recorded along a training trajectory (P2; docs/science.md,
"theory (P2's output-space dynamics)"): the data, the small residual MLP, the losses and their output Hessians,
full-batch gradient descent that accumulates the propagator P, the dissipation Gramian W_S and the transfer operators
G_S, G_Q, the per-run measures computed from them, and the channel-projected drift and fluctuation of minibatch SGD. The
experiments around them live in `growcert.experiments.theory`; pure numerics on the recorded matrices in
`growcert.stats.kernels`.

Definitions (discrete time; what the code computes is exactly these sums over the steps taken)
-----------------------------------------------------------------------------------------------
Training set S: n examples, C outputs each; u_S = f(X_S; θ) ∈ R^m, m = n·C, flattened example-major
(index i·C + c); test set Q likewise, u_Q ∈ R^{m_Q}. Loss L(θ) = (1/n) Σ_i ℓ(u_i, y_i) with
ℓ = ½‖u − y‖² (squared) or −log softmax(u)_y (cross-entropy). Output gradient g = ∂ℓ/∂u_S ∈ R^m
(per example, no 1/n); output Hessian H = ∂²ℓ/∂u² (block diagonal: I, or diag(q) − qqᵀ with q the
softmax). Jacobians J_k = ∂u_S/∂θ and J_Q,k at θ_k; tangent kernels K_k = J_k J_kᵀ (K_SS) and
K_QS,k = J_Q,k J_kᵀ. Small-step gradient descent θ_{k+1} = θ_k − (η/n) J_kᵀ g_k, time t = kη; in
the flow limit u̇_S = −K_SS g/n and u̇_Q = −K_QS g/n.

- Output-gradient propagator: P_0 = I, P_{k+1} = (I − (η/n) H_k K_k) P_k. Since
  g_{k+1} = g_k + H_k(u_{k+1} − u_k) + O(η²) and u_{k+1} − u_k = −(η/n) K_k g_k + O(η²),
  g_k = P_k g_0 up to O(η) at fixed time. Exact for squared loss on a linear model, where
  P_k = (I − ηK/n)^k → exp(−Kt/n). P_{k,s} = P_k P_s⁻¹ propagates from step s.
- Cumulative dissipation Gramian: W_S = (η/n) Σ_{k<N} P_kᵀ K_k P_k. Why: one step lowers the loss
  by (η/n²) g_kᵀ K_k g_k + O(η²), so L(0) − L(T) = g_0ᵀ W_S g_0 / n + O(η): W_S is the loss that
  training dissipated, as a quadratic form in the initial output gradient.
  Signal channel = range(W_S); reservoir = ker(W_S) = {v : J_kᵀ P_k v = 0 for every step k}
  (W_S is a sum of the PSD terms ‖J_kᵀ P_k v‖²). Numerical kernel: eigenvalues ≤ rank_tol · λ_max,
  rank_tol = 1e-6 by default (why: growcert.stats.kernels). Spectra are recorded at checkpoints.
- Transfer operators: G_S = (η/n) Σ_k K_k P_k and G_Q = (η/n) Σ_k K_QS,k P_k, so that
  u_S(T) − u_S(0) = −G_S g_0 and u_Q(T) − u_Q(0) = −G_Q g_0 (+ O(η)). From checkpoint s:
  ΔG = G(T) − G(s), and U(T) − U(s) = −ΔG g_0.
- Reservoir invisibility (Prop. 3.2): v ∈ ker W_S ⇒ J_kᵀ P_k v = 0 ∀k ⇒ G_Q v = 0, for any loss.
  Reported: ‖G_Q Π_ker‖ / ‖G_Q Π_range‖ (spectral norms), with the Cauchy–Schwarz cap
  ‖G_Q Π_ker‖ ≤ √(E_Q · rank_tol · λ_max), E_Q = (η/n) Σ_k ‖J_Q,k‖².
- Train–test coupling: U_Q(T) − U_Q(s) = A°(U_S(T) − U_S(s)) + R_⊥ with A° = ΔG_Q ΔG_S⁺, the least-
  squares predictor over *every direction* of the output gradient (fitting one A° to the realised
  displacement vectors of a few checkpoints would be vacuous: fewer checkpoints than m outputs fit
  exactly under any loss). So R_⊥ = ΔG_Q Π_{ker ΔG_S}; reported on the realised g_0 as
  ‖R_⊥ g_0‖ / ‖ΔG_Q g_0‖, the maximum over the recorded start checkpoints s.
  Squared loss ⇒ R_⊥ = 0: H = I makes ΔG_S = P_s − P_T = (I − P_{T,s}) P_s (telescoping). If
  ΔG_S v = 0, w = P_s v is fixed by P_{T,s}, a product of symmetric contractions M_k = I − (η/n)K_k
  (when c = max_k η λ_max(K_k)/n < 2), and ‖M_k x‖ = ‖x‖ only if K_k x = 0; so J_kᵀ P_{k,s} w = 0
  for k ≥ s and ΔG_Q v = 0, however much the kernel moves. With the truncated pseudo-inverse:
  ‖M_k x‖² ≤ ‖x‖² − (2 − c)(η/n) xᵀK_k x gives wᵀW_S(s→T)w ≤ 2‖ΔG_S v‖/(2 − c) and, by
  Cauchy–Schwarz, ‖R_⊥‖ ≤ √(2 ΔE_Q · rank_tol · σ_max(ΔG_S)/(2 − c)).
  Cross-entropy: ΔG_S = (η/n) Σ K P is not I − P_T (H ≠ I), no such argument: R_⊥ is measured.
- Drift–diffusion of minibatch SGD θ_{k+1} = θ_k − η ∇L_{B_k}(θ_k) (B_k a fresh uniform b-subset, so
  E[∇L_B | θ_k] = ∇L(θ_k)): in channel coordinates V_chᵀ u_S (V_ch: orthonormal channel basis of
  the matching gradient-descent run) the first-order increment V_chᵀ J_k (θ_{k+1} − θ_k) splits
  into drift d_k = −η V_chᵀ J_k ∇L(θ_k) and fluctuation f_k = −η V_chᵀ J_k (∇L_B − ∇L)(θ_k), a
  martingale difference. D(T) = Σ d_k grows ∝ T while the full-batch gradient is roughly constant;
  E‖F(T)‖² = Σ E‖f_k‖² (orthogonal increments), so RMS ‖F(T)‖ ∝ √T. Exponents are least-squares
  log–log slopes of the root mean square over replicate batch streams.
  (The label-noise experiment is defined in `growcert.experiments.theory`.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.func import functional_call, grad, jacrev, jvp, vmap

from growcert.data.digits import load_digits_arrays  # the project's checked loader of the digits
from growcert.stats.kernels import (
    coupling_bound,
    coupling_residual,
    fit_exponent,
    invisibility,
    invisibility_bound,
    root_mean_square,
    split_channel,
)

# ---------------------------------------------------------------------------------------------- data, model


@dataclass
class Task:
    name: str
    x_train: torch.Tensor
    x_test: torch.Tensor
    y_train: torch.Tensor  # (n, C): one-hot for classification, values for regression
    y_test: torch.Tensor
    labels_train: torch.Tensor | None = None  # class indices (cross-entropy), None for regression
    labels_test: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> Task:
        """The same task with every tensor on `device` (tasks are drawn on the CPU, then moved)."""
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Task(
            self.name,
            *(
                move(t)
                for t in (self.x_train, self.x_test, self.y_train, self.y_test, self.labels_train, self.labels_test)
            ),
        )


def digits_task(settings: dict[str, Any]) -> Task:
    """A seeded subset of sklearn digits, pixels/16 projected on the training subset's top principal
    directions (fewer inputs, fewer parameters: the point is a model smaller than n·C)."""
    config = settings["digits"]
    images, labels, _, _ = load_digits_arrays()
    pixels = torch.tensor(images.reshape(len(images), -1), dtype=torch.float64) / 16.0
    labels = torch.from_numpy(labels)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(config["split_seed"]))
    train, test = (
        order[: config["train_size"]],
        order[config["train_size"] : config["train_size"] + config["test_size"]],
    )
    mean = pixels[train].mean(0)
    _, _, directions = torch.linalg.svd(pixels[train] - mean, full_matrices=False)
    project = directions[: config["input_dim"]].T
    scale = ((pixels[train] - mean) @ project).std()
    x = (pixels - mean) @ project / scale
    one_hot = nn.functional.one_hot(labels, 10).to(torch.float64)
    return Task("digits", x[train], x[test], one_hot[train], one_hot[test], labels[train], labels[test])


def regression_target(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(torch.pi * x)


def regression_task(settings: dict[str, Any]) -> Task:
    """x uniform on [−1, 1] (seeded), clean targets sin(πx); the test set is a grid with clean targets.
    Label noise is added by the experiment, not here."""
    config = settings["regression"]
    generator = torch.Generator().manual_seed(config["data_seed"])
    x_train = torch.rand(config["train_size"], 1, generator=generator, dtype=torch.float64) * 2 - 1
    x_test = torch.linspace(-1, 1, config["test_size"], dtype=torch.float64)[:, None]
    return Task("regression", x_train, x_test, regression_target(x_train), regression_target(x_test))


class ResidualMLP(nn.Module):
    """stem → `depth` blocks h + tanh(W h + b) → linear head; tanh keeps kernels and Hessians smooth."""

    def __init__(self, inputs: int, width: int, depth: int, outputs: int):
        super().__init__()
        self.stem = nn.Linear(inputs, width, dtype=torch.float64)
        self.blocks = nn.ModuleList(nn.Linear(width, width, dtype=torch.float64) for _ in range(depth))
        self.head = nn.Linear(width, outputs, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(self.stem(x))
        for block in self.blocks:
            hidden = hidden + torch.tanh(block(hidden))
        return self.head(hidden)


class FlatModel:
    """A module as a function of one flat parameter vector θ (what Jacobians and operators act on)."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.shapes = {name: p.shape for name, p in module.named_parameters()}
        self.theta0 = torch.cat([p.detach().reshape(-1) for p in module.parameters()])

    def outputs(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        params, start = {}, 0
        for name, shape in self.shapes.items():
            size = math.prod(shape)
            params[name] = theta[start : start + size].reshape(shape)
            start += size
        return functional_call(self.module, params, (x,))

    def jacobian(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """∂u/∂θ, (n·C, p), rows example-major; per-example jacrev under vmap (linear in n)."""
        per_example = lambda th, xi: self.outputs(th, xi[None])[0]  # noqa: E731
        return vmap(jacrev(per_example), in_dims=(None, 0))(theta, x).reshape(-1, len(theta))


# ---------------------------------------------------------------------------------------------- losses

LOSSES = ("squared", "cross_entropy")


def example_losses(loss: str, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """ℓ(u_i, y_i) per example; targets (n, C), one-hot for cross-entropy."""
    if loss == "squared":
        return 0.5 * ((outputs - targets) ** 2).sum(-1)
    return -(torch.log_softmax(outputs, -1) * targets).sum(-1)


def output_gradient(loss: str, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """g = ∂ℓ/∂u per example, (n, C)."""
    return outputs - targets if loss == "squared" else torch.softmax(outputs, -1) - targets


def apply_output_hessian(loss: str, outputs: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """H M for the block-diagonal output Hessian, M (n·C, k), without forming H."""
    if loss == "squared":
        return matrix
    q = torch.softmax(outputs, -1)[:, :, None]  # (n, C, 1)
    blocks = matrix.reshape(q.shape[0], q.shape[1], -1)
    return (q * blocks - q * (q * blocks).sum(1, keepdim=True)).reshape(matrix.shape)


def mean_loss(net: FlatModel, loss: str, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return example_losses(loss, net.outputs(theta, x), y).mean()


# ---------------------------------------------------------------------------------------------- trajectory


@dataclass
class Snapshot:
    """Operators accumulated over steps 0..step−1 and the state at θ_step."""

    step: int  # the operator fields are None in a training-only run
    gramian: np.ndarray  # W_S(0→t)
    train_transfer: np.ndarray  # G_S(0→t)
    test_transfer: np.ndarray  # G_Q(0→t)
    propagator: np.ndarray  # P(t, 0)
    test_energy: float  # E_Q(0→t) = (η/n) Σ ‖J_Q,k‖²
    kernel_train: np.ndarray  # K_SS(θ_t)
    kernel_test_train: np.ndarray  # K_QS(θ_t)
    train_outputs: np.ndarray
    test_outputs: np.ndarray


@dataclass
class Trajectory:
    loss: str
    snapshots: list[Snapshot]
    initial_gradient: np.ndarray  # g_0, flattened
    step_sharpness: float  # c = max_k η λ_max(K_k)/n: < 2 for contracting steps, ≪ 1 for gradient flow
    final_theta: torch.Tensor


def checkpoint_steps(steps: int, count: int) -> list[int]:
    """0 and `count` evenly spaced steps ending at `steps`."""
    return sorted({0, *(round(steps * (i + 1) / count) for i in range(count))})


def host(tensor: torch.Tensor) -> np.ndarray:
    """A numpy copy of `tensor`, wherever it lives (copied: the accumulators keep changing in place)."""
    return tensor.cpu().numpy().copy()


def train_gd(
    net: FlatModel,
    task: Task,
    loss: str,
    lr: float,
    steps: int,
    checkpoints: list[int],
    y_train: torch.Tensor | None = None,
    operators: bool = True,
) -> Trajectory:
    """Full-batch gradient descent from net.theta0, accumulating P, W_S, G_S, G_Q at every step and
    snapshotting them at `checkpoints`. `operators=False` trains only (same updates, bit for bit)."""
    y_train = task.y_train if y_train is None else y_train
    n, m = len(task.x_train), task.y_train.numel()
    scale = lr / n
    theta = net.theta0.clone()
    on = {"dtype": torch.float64, "device": theta.device}
    propagator, gramian = torch.eye(m, **on), torch.zeros(m, m, **on)
    train_transfer = torch.zeros(m, m, **on)
    test_transfer = torch.zeros(task.y_test.numel(), m, **on)
    test_energy, sharpness, snapshots, initial_gradient = 0.0, 0.0, [], None
    for step in range(steps + 1):
        with torch.no_grad():
            outputs, test_outputs = net.outputs(theta, task.x_train), net.outputs(theta, task.x_test)
        jacobian = net.jacobian(theta, task.x_train)
        gradient = output_gradient(loss, outputs, y_train).reshape(-1)
        if initial_gradient is None:
            initial_gradient = host(gradient)
        test_jacobian = net.jacobian(theta, task.x_test) if operators else None
        if operators and step in checkpoints:
            snapshots.append(
                Snapshot(
                    step,
                    host(gramian),
                    host(train_transfer),
                    host(test_transfer),
                    host(propagator),
                    test_energy,
                    host(jacobian @ jacobian.T),
                    host(test_jacobian @ jacobian.T),
                    host(outputs.reshape(-1)),
                    host(test_outputs.reshape(-1)),
                )
            )
        elif not operators and step == steps:  # training only: keep the final outputs
            snapshots.append(Snapshot(step, *(None,) * 7, host(outputs.reshape(-1)), host(test_outputs.reshape(-1))))
        if step == steps:
            break
        if operators:
            carried = jacobian.T @ propagator  # J_kᵀ P_k, (p, m)
            moved = jacobian @ carried  # K_k P_k
            gramian += scale * carried.T @ carried
            train_transfer += scale * moved
            test_transfer += scale * test_jacobian @ carried
            propagator -= scale * apply_output_hessian(loss, outputs, moved)
            test_energy += scale * float(torch.linalg.matrix_norm(test_jacobian, 2)) ** 2
            sharpness = max(sharpness, scale * float(torch.linalg.matrix_norm(jacobian, 2)) ** 2)
        theta = theta - scale * (jacobian.T @ gradient)
    return Trajectory(loss, snapshots, initial_gradient, sharpness, theta)


# ---------------------------------------------------------------------------------------------- measures


def trajectory_measures(trajectory: Trajectory, rank_tol: float) -> dict[str, float]:
    """Channel/reservoir split, invisibility, coupling residual and first-order checks of one run."""
    first, final = trajectory.snapshots[0], trajectory.snapshots[-1]
    split = split_channel(final.gramian, rank_tol)
    visible = invisibility(final.test_transfer, split)
    g0 = trajectory.initial_gradient
    worst, worst_bound = 0.0, 0.0
    for start in trajectory.snapshots[:-1]:  # coupling from every recorded start checkpoint s
        delta_test = final.test_transfer - start.test_transfer
        delta_train = final.train_transfer - start.train_transfer
        fit = coupling_residual(delta_test, delta_train, g0, rank_tol)
        if fit["relative"] >= worst:
            worst = fit["relative"]
            bound = coupling_bound(
                final.test_energy - start.test_energy, fit["train_sigma_max"], trajectory.step_sharpness, rank_tol
            )
            displacement = float(np.linalg.norm(delta_test @ g0))
            worst_bound = bound / displacement if displacement > 0 else math.inf
    train_move = final.train_outputs - first.train_outputs
    kernel_change = np.linalg.norm(final.kernel_train - first.kernel_train) / np.linalg.norm(first.kernel_train)
    return {
        "outputs": float(len(g0)),
        "channel_dim": float(split.dims[0]),
        "reservoir_dim": float(split.dims[1]),
        "lambda_max": float(split.eigenvalues[0]),
        "rank_threshold": split.threshold,
        "invisibility_ratio": visible["ratio"],
        "invisibility_bound_ratio": (
            invisibility_bound(final.test_energy, split) / visible["on_channel"]
            if split.dims[1] and visible["on_channel"] > 0
            else math.nan
        ),
        "coupling_residual": worst,
        "coupling_bound": worst_bound if trajectory.loss == "squared" else math.nan,
        "linearisation_error": float(
            np.linalg.norm(train_move + final.train_transfer @ g0) / np.linalg.norm(train_move)
        ),
        "kernel_change": float(kernel_change),
        "step_sharpness": trajectory.step_sharpness,
    }


def fit_metrics(task: Task, loss: str, snapshot: Snapshot) -> dict[str, float]:
    """Train/test loss at a snapshot, accuracy for classification, test MSE for regression."""
    shape_train, shape_test = task.y_train.shape, task.y_test.shape
    train = torch.from_numpy(snapshot.train_outputs).reshape(shape_train).to(task.y_train.device)
    test = torch.from_numpy(snapshot.test_outputs).reshape(shape_test).to(task.y_test.device)
    metrics = {
        "train_loss": float(example_losses(loss, train, task.y_train).mean()),
        "test_loss": float(example_losses(loss, test, task.y_test).mean()),
    }
    if task.labels_test is not None:
        metrics["train_accuracy"] = float((train.argmax(-1) == task.labels_train).double().mean())
        metrics["test_accuracy"] = float((test.argmax(-1) == task.labels_test).double().mean())
    else:
        metrics["test_mse"] = float(((test - task.y_test) ** 2).mean())
    return metrics


def spectrum_rows(trajectory: Trajectory, key: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for snapshot in trajectory.snapshots[1:]:  # W_S(0→0) = 0
        eigenvalues = np.linalg.eigvalsh((snapshot.gramian + snapshot.gramian.T) / 2)[::-1]
        rows += [
            {**key, "step": snapshot.step, "index": i, "eigenvalue": float(value)}
            for i, value in enumerate(eigenvalues)
        ]
    return rows


def test_prediction_rms(a: Trajectory | np.ndarray, b: Trajectory | np.ndarray) -> float:
    """RMS difference of final test predictions (trajectories or output vectors)."""
    a = a.snapshots[-1].test_outputs if isinstance(a, Trajectory) else a
    b = b.snapshots[-1].test_outputs if isinstance(b, Trajectory) else b
    return float(np.sqrt(np.mean((a - b) ** 2)))


# ---------------------------------------------------------------------------------------------- SGD drift


def log_horizons(steps: int, count: int = 24) -> list[int]:
    return sorted({int(round(v)) for v in np.geomspace(1, steps, count)})


def sgd_drift(
    net: FlatModel, task: Task, loss: str, channel: np.ndarray, settings: dict[str, Any], seed: int
) -> list[dict[str, Any]]:
    """Channel-projected drift D(T) and fluctuation F(T) of minibatch SGD, per replicate batch stream."""
    config = settings["sgd"]
    n, batch, lr = len(task.x_train), config["batch_size"], config["lr"]
    if not 0 < batch < n:
        raise ValueError(f"theory sgd batch_size must lie in [1, {n - 1}] (below the training set), got {batch}")
    device = net.theta0.device
    basis = torch.from_numpy(channel).to(device)
    horizons = set(log_horizons(config["steps"]))
    gradient = grad(lambda th, x, y: mean_loss(net, loss, th, x, y))

    # first-order output increment in channel coordinates: V_chᵀ J(θ) v, by forward mode
    def in_channel(th: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return basis.T @ jvp(lambda t: net.outputs(t, task.x_train).reshape(-1), (th,), (v,))[1]

    rows = []
    for replicate in range(config["replicates"]):
        batches = torch.Generator().manual_seed(1_000_003 * seed + replicate + 1)
        theta = net.theta0.clone()
        drift = torch.zeros(basis.shape[1], dtype=torch.float64, device=device)
        fluctuation = torch.zeros_like(drift)
        for step in range(1, config["steps"] + 1):
            chosen = torch.randperm(n, generator=batches)[:batch].to(device)  # a CPU stream: the same batches anywhere
            full = gradient(theta, task.x_train, task.y_train)
            minibatch = gradient(theta, task.x_train[chosen], task.y_train[chosen])
            drift += in_channel(theta, -lr * full)
            fluctuation += in_channel(theta, -lr * (minibatch - full))
            theta = theta - lr * minibatch
            if step in horizons:
                rows.append(
                    {
                        "task": task.name,
                        "loss": loss,
                        "seed": seed,
                        "replicate": replicate,
                        "T": step,
                        "drift_norm": float(drift.norm()),
                        "fluctuation_norm": float(fluctuation.norm()),
                    }
                )
    return rows


def drift_exponents(drift: pd.DataFrame, fit_from: int) -> tuple[float, float]:
    """Log–log slopes of RMS-over-replicates ‖D(T)‖ and ‖F(T)‖ for T ≥ fit_from."""
    table = drift[drift["T"] >= fit_from].groupby("T")
    horizons = np.array(sorted(table.groups))
    drift_rms = table["drift_norm"].apply(lambda v: root_mean_square(v.to_numpy())).loc[horizons]
    fluctuation_rms = table["fluctuation_norm"].apply(lambda v: root_mean_square(v.to_numpy())).loc[horizons]
    return fit_exponent(horizons, drift_rms.to_numpy()), fit_exponent(horizons, fluctuation_rms.to_numpy())
