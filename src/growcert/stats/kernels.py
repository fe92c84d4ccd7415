"""Signal channel, reservoir, train–test coupling and drift–diffusion numerics (P2; docs/science.md,
"theory (P2's output-space dynamics)").

Pure numpy on the operators that `growcert.experiments.theory` records along a training trajectory (the
definitions are derived in that module's docstring); nothing here knows networks or torch.

- `split_channel(W_S, rank_tol)`: eigendecomposition of the cumulative dissipation Gramian and its
  split into the signal channel range(W_S) and the reservoir ker(W_S). The numerical kernel is
  {eigenvalue ≤ rank_tol · λ_max}. Why a *relative* tolerance and why 1e-6 by default: under squared
  loss the eigenvalues of W_S lie in [0, ½] and 2λ is the fraction of the squared residual that
  training removed along that eigenvector (PᵀP = I − 2 W_S in gradient flow), so λ ≤ 1e-6 λ_max
  means training removed at most ~1e-6 of what it removed along the best-trained direction; the
  Cauchy–Schwarz bound below then caps the test response on the reservoir at ~√1e-6 = 1e-3 of
  the scale set by the test Jacobians — small enough to call invisible, far above float64 noise
  (eigenvalues of a Gramian of size m carry errors ~ m·ε·λ_max ≈ 1e-13 λ_max here).
- `restricted_norm`, `invisibility_bound`: ‖G_Q Π‖ on either part, and the bound
  ‖G_Q v‖² ≤ E_Q · vᵀW_S v (E_Q = η/n Σ_k ‖J_Q,k‖², Cauchy–Schwarz over the steps) which makes
  ‖G_Q Π_ker‖ ≤ √(E_Q · threshold) for any loss.
- `coupling_residual`: least-squares A° and the residual R_⊥ of the train–test coupling, with the
  squared-loss bound ‖R_⊥‖ ≤ √(2 E_Q · rank_tol · σ_max(ΔG_S) / (2 − c)).
- `fit_exponent`, `root_mean_square`: log–log slopes of drift and fluctuation against T.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RANK_TOL = 1e-6  # relative numerical-rank tolerance; see the module docstring for the choice


@dataclass(frozen=True)
class ChannelSplit:
    """W_S = channel · diag(channel eigenvalues) · channelᵀ + (reservoir part below `threshold`)."""

    eigenvalues: np.ndarray  # all eigenvalues of W_S, descending
    channel: np.ndarray  # (m, r) orthonormal basis of the numerical range(W_S)
    reservoir: np.ndarray  # (m, m − r) orthonormal basis of the numerical ker(W_S)
    threshold: float  # rank_tol · λ_max: eigenvalues at or below it count as zero

    @property
    def dims(self) -> tuple[int, int]:
        return self.channel.shape[1], self.reservoir.shape[1]

    def project(self, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(reservoir part, channel part) of an output-space vector; they sum to it."""
        return self.reservoir @ (self.reservoir.T @ vector), self.channel @ (self.channel.T @ vector)


def split_channel(gramian: np.ndarray, rank_tol: float = RANK_TOL) -> ChannelSplit:
    """Channel = eigenvectors of the symmetric PSD `gramian` with eigenvalue > rank_tol · λ_max."""
    if not 0.0 < rank_tol < 1.0:
        raise ValueError(f"rank_tol must lie in (0, 1), got {rank_tol}")
    gramian = np.asarray(gramian, dtype=np.float64)
    # Symmetrise: the recorded sum is symmetric only up to rounding, and eigh reads one triangle.
    eigenvalues, vectors = np.linalg.eigh((gramian + gramian.T) / 2)
    eigenvalues, vectors = eigenvalues[::-1], vectors[:, ::-1]
    threshold = rank_tol * max(float(eigenvalues[0]), 0.0) if len(eigenvalues) else 0.0
    in_channel = eigenvalues > threshold
    return ChannelSplit(eigenvalues, vectors[:, in_channel], vectors[:, ~in_channel], threshold)


def restricted_norm(operator: np.ndarray, basis: np.ndarray) -> float:
    """Spectral norm of `operator` restricted to span(basis) (orthonormal columns); 0 on {0}."""
    if basis.shape[1] == 0:
        return 0.0
    return float(np.linalg.norm(operator @ basis, 2))


def invisibility(test_transfer: np.ndarray, split: ChannelSplit) -> dict[str, float]:
    """‖G_Q Π_ker‖, ‖G_Q Π_range‖ and their ratio; the ratio is NaN when either part is empty or G_Q
    vanishes on the channel (an empty reservoir is not evidence of invisibility)."""
    on_reservoir = restricted_norm(test_transfer, split.reservoir)
    on_channel = restricted_norm(test_transfer, split.channel)
    ratio = on_reservoir / on_channel if on_channel > 0 and split.dims[1] > 0 else float("nan")
    return {"on_reservoir": on_reservoir, "on_channel": on_channel, "ratio": ratio}


def invisibility_bound(test_energy: float, split: ChannelSplit) -> float:
    """Upper bound on ‖G_Q Π_ker‖: for unit v in the numerical kernel, vᵀW_S v ≤ threshold, and
    ‖G_Q v‖ = ‖η/n Σ_k J_Q,k (J_kᵀ P_k v)‖ ≤ √(η/n Σ_k ‖J_Q,k‖²) · √(η/n Σ_k ‖J_kᵀ P_k v‖²)."""
    return float(np.sqrt(test_energy * split.threshold))


def truncated_lstsq(targets: np.ndarray, regressors: np.ndarray, rank_tol: float = RANK_TOL) -> np.ndarray:
    """A minimising ‖targets − A·regressors‖_F, minimum norm, singular values of `regressors` at or
    below rank_tol · σ_max treated as zero (the same relative tolerance as the channel split)."""
    return targets @ np.linalg.pinv(regressors, rtol=rank_tol)


def coupling_residual(
    test_transfer: np.ndarray, train_transfer: np.ndarray, output_gradient: np.ndarray, rank_tol: float = RANK_TOL
) -> dict[str, float]:
    """Fit A° = ΔG_Q ΔG_S⁺ (least squares over every direction of the output gradient) and measure
    R_⊥ = ΔG_Q − A° ΔG_S: as an operator (relative to ‖ΔG_Q‖) and on the realised output gradient
    g (relative to the realised test displacement ‖ΔG_Q g‖)."""
    coupling = truncated_lstsq(test_transfer, train_transfer, rank_tol)
    residual = test_transfer - coupling @ train_transfer
    displacement = float(np.linalg.norm(test_transfer @ output_gradient))
    operator_norm = float(np.linalg.norm(test_transfer, 2))
    sigma_max = float(np.linalg.norm(train_transfer, 2))
    return {
        "relative": float(np.linalg.norm(residual @ output_gradient)) / displacement if displacement else 0.0,
        "operator_relative": float(np.linalg.norm(residual, 2)) / operator_norm if operator_norm else 0.0,
        "operator_norm": operator_norm,
        "train_sigma_max": sigma_max,
    }


def coupling_bound(
    test_energy: float, train_sigma_max: float, step_sharpness: float, rank_tol: float = RANK_TOL
) -> float:
    """Squared loss only: ‖R_⊥‖ ≤ √(2 E_Q · rank_tol · σ_max(ΔG_S) / (2 − c)), c = max_k η λ_max(K_k)/n
    (derivation in growcert.experiments.theory_dynamics); infinite when c ≥ 2, where the steps stop contracting."""
    if step_sharpness >= 2.0:
        return float("inf")
    return float(np.sqrt(2.0 * test_energy * rank_tol * train_sigma_max / (2.0 - step_sharpness)))


def root_mean_square(norms: np.ndarray, axis: int = 0) -> np.ndarray:
    """√(mean ‖x‖²) over replicates: for a martingale E‖F(T)‖² = Σ_k E‖f_k‖², linear in T."""
    return np.sqrt(np.mean(np.square(norms), axis=axis))


def fit_exponent(horizons: np.ndarray, values: np.ndarray) -> float:
    """Least-squares slope of log(value) on log(T)."""
    horizons, values = np.asarray(horizons, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if len(horizons) < 2 or np.any(horizons <= 0) or np.any(values <= 0):
        raise ValueError("fit_exponent needs at least two horizons and positive values")
    slope, _ = np.polyfit(np.log(horizons), np.log(values), 1)
    return float(slope)
