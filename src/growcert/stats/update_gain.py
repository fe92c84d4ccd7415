"""The held-out gain that S more Adam steps would give, predicted from per-example gradients (`growcert advise`'s
options; docs/science.md, "advise: options with predictions").

Pure numerics on numpy arrays. Rows g_j (n training examples) and h_i (m held-out examples) are per-example
gradients of the loss with respect to the parameters that will train, flattened. Adam with batch size b at a
constant learning rate lr, in its steady state, steps each coordinate k by lr·m_k/√v_k with m_k ≈ μ_k (the
training gradient's mean) and v_k ≈ μ_k² + σ_k²/b (the second moment of a batch mean). Its expected step is
lr·r_k with

    r_k = μ_k / √(μ_k² + σ_k²/b)  = sign(μ_k) √(snr_k / (1 + snr_k)),   snr_k = b μ_k² / σ_k²,

P2's signal-to-noise view of one update step: a coordinate whose batch signal μ_k² is well above its noise
σ_k²/b moves lr per step along its signal; one dominated by noise drifts by only lr √snr_k, but still moves
about lr per step at random, with variance lr²(1 − r_k²) per step (`adam_direction`). v is estimated without
bias, v̂ = μ̂² − s²/n + s²/b (μ̂² − s²/n is P2's unbiased squared population gradient).

Each of the S steps is read as one step from the checkpoint (P2's rate of population-risk decrease, not a
trajectory): the held-out loss changes by −lr h̄ᵀr to first order, plus a second-order cost from the step's
size, ½ lr² (rᵀF r + tr(F D Σ D)/b), D = diag(1/√v), Σ the training covariance, F the held-out curvature. F is
the Gauss-Newton matrix of the log-loss (its Fisher), estimated without bias by mean_i f_i f_iᵀ with f_i the
gradient of example i's loss at a label drawn from the model's own prediction (`curvature rows`). Not the
empirical Fisher mean_i h_i h_iᵀ (true labels): on a confidently wrong held-out example h_i is large while the
loss's curvature there is nearly 0, which on a model at 100 % training accuracy overstates the cost by orders
of magnitude. The noise part adds up over steps like a random walk, so S steps cost S times one step's; the
predicted gain is

    gain(S) = S [ lr·mean_i h_iᵀr − ½ lr² ( mean_i (f_iᵀr)² + mean_i Var_j(f_iᵀ D g_j) / b ) ]
            = first_order − cost.

The parts are additive over parameter groups (`GainParts`): a grown model's rows are its base's rows beside
the new block's, and r and D act coordinate by coordinate, so `parts(base) + parts(block)` are the grown
model's parts without forming its rows again.

Local range. The reading is a second-order model around the checkpoint, so it holds while the S steps stay
local: their typical first-order change of a held-out example's log-likelihood,

    reach(S) = lr √( S² mean_i (f_iᵀr)² + S mean_i Var_j(f_iᵀ D g_j) / b )

(the drift adds up coherently, the noise as a random walk; f at model-drawn labels, so this is the output change
the Fisher measures) must stay small. On a tiny classifier with a brute-force run beside it
(tests/test_advise_options.py) the prediction held within its interval up to a reach of about 0.2 nats and
overshot beyond about 0.3 (the first-order gain does not keep growing linearly as the signal is used up).
`local_steps` is the largest S whose reach stays within a given bound.

Interval: a delete-a-group jackknife (`groups` groups of each sample, interleaved; `intervals.jackknife_covariance`)
over the training examples (the direction r; D is held at its full-sample value, its own sampling error is left
out) plus over the held-out examples, the two variances added (independent samples), estimate ± z·SE. It covers
the sampling of examples for this checkpoint, not how far the one-step reading is from S real steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from growcert.stats.intervals import jackknife_covariance, normal_quantile

ADAM_EPS = 1e-8  # Adam's ε: a coordinate with no gradient at all does not move
ROW_CHUNK = 32  # rows per float64 cast and per product: bounded temporaries


def unbiased_second_moment(sums: np.ndarray, squares: np.ndarray, n: int, batch_size: int) -> np.ndarray:
    """v̂ = μ̂² − s²/n + s²/b from Σg and Σg² of n rows: unbiased for μ² + σ²/b (floored at 0)."""
    mean = sums / n
    variance = np.maximum(squares - n * mean**2, 0.0) / (n - 1)
    return np.maximum(mean**2 - variance / n + variance / batch_size, 0.0)


def adam_direction(sums: np.ndarray, squares: np.ndarray, n: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(r, 1/√v): Adam's expected step per unit lr and its per-coordinate scale, from Σg, Σg² of n rows."""
    root = np.sqrt(unbiased_second_moment(sums, squares, n, batch_size)) + ADAM_EPS
    return sums / n / root, 1.0 / root


def example_groups(n: int, groups: int) -> np.ndarray:
    """The jackknife group of each of n examples: interleaved, min(groups, n) groups."""
    return np.arange(n) % min(groups, n)


@dataclass
class GainParts:
    """What the gain needs from one parameter group, additive over groups (r from every training row, r₋g with
    training group g left out):
    drift             (m,)    h_iᵀ r
    drift_minus       (G, m)  h_iᵀ r₋g
    curvature         (m,)    f_iᵀ r
    curvature_minus   (G, m)  f_iᵀ r₋g
    noise             (m, n)  f_iᵀ D g_j (raw g_j; centred when the gain is formed)"""

    drift: np.ndarray
    drift_minus: np.ndarray
    curvature: np.ndarray
    curvature_minus: np.ndarray
    noise: np.ndarray

    def __add__(self, other: GainParts) -> GainParts:
        return GainParts(
            *(
                getattr(self, name) + getattr(other, name)
                for name in ("drift", "drift_minus", "curvature", "curvature_minus", "noise")
            )
        )


def _column_sums(rows: np.ndarray, chunk: int = ROW_CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_i row_i, Σ_i row_i²) in float64, a chunk of rows at a time (no float64 copy of the whole matrix)."""
    sums, squares = np.zeros(rows.shape[1]), np.zeros(rows.shape[1])
    for start in range(0, len(rows), chunk):
        block = rows[start : start + chunk].astype(np.float64)
        sums += block.sum(axis=0)
        squares += np.einsum("ij,ij->j", block, block)
    return sums, squares


def gain_parts(
    train_rows: np.ndarray, held_out_rows: np.ndarray, curvature_rows: np.ndarray, batch_size: int, groups: int
) -> GainParts:
    """The parts of one parameter group from its per-example gradient rows: training g_j (n, P), held-out h_i
    (m, P) and held-out f_i (m, P) at labels drawn from the model (the curvature rows, same examples as h_i)."""
    train, held_out, curvature = np.asarray(train_rows), np.asarray(held_out_rows), np.asarray(curvature_rows)
    n = len(train)
    if n < 4 or len(held_out) < 4:
        raise ValueError(
            f"a predicted gain needs at least 4 training and 4 held-out examples; got {n} and {len(held_out)}"
        )
    if curvature.shape != held_out.shape:
        raise ValueError(f"curvature rows {curvature.shape} must match the held-out rows {held_out.shape}")
    count = min(groups, n)  # example_groups' interleaved groups: group g is rows g, g + count, ... (a view)
    group_sums = [_column_sums(train[group::count]) for group in range(count)]
    sums, squares = (np.sum([part[k] for part in group_sums], axis=0) for k in (0, 1))
    direction, scale = adam_direction(sums, squares, n, batch_size)
    directions = [direction] + [
        adam_direction(sums - part_sums, squares - part_squares, n - len(range(group, n, count)), batch_size)[0]
        for group, (part_sums, part_squares) in enumerate(group_sums)
    ]
    # float32 products like the rows (the sums above are float64, where cancellation would bite)
    directions = np.stack(directions, axis=1).astype(np.float32)  # (P, 1 + groups)
    scale = scale.astype(np.float32)
    drifts, curvatures = np.empty((len(held_out), directions.shape[1])), np.empty((len(held_out), directions.shape[1]))
    noise = np.empty((len(held_out), n))
    for start in range(0, len(held_out), ROW_CHUNK):
        rows = slice(start, start + ROW_CHUNK)
        drifts[rows] = held_out[rows] @ directions
        curvatures[rows] = curvature[rows] @ directions
        # one (m, P) × (P, n) product: the cost of the whole prediction; train.T is a view BLAS reads as it is
        noise[rows] = (curvature[rows] * scale) @ train.T
    return GainParts(
        drifts[:, 0],
        np.ascontiguousarray(drifts[:, 1:].T),
        curvatures[:, 0],
        np.ascontiguousarray(curvatures[:, 1:].T),
        noise,
    )


@dataclass
class Gain:
    """A predicted held-out gain (loss decrease, in the loss's units) over `steps` steps, with its interval."""

    estimate: float
    se: float
    low: float
    high: float
    first_order: float
    cost: float
    reach: float  # the S steps' typical change of a held-out log-likelihood (nats): the local range's measure
    curvature_drift: float  # mean_i (f_iᵀr)², per unit lr² and step²: with `curvature_noise`, `local_steps`' input
    curvature_noise: float  # mean_i Var_j(f_iᵀ D g_j) / b, per unit lr² and step


def local_steps(gain: Gain, lr: float, bound: float) -> float:
    """The largest S (real-valued) whose reach lr √(S² a + S c) stays within `bound` (inf when nothing moves)."""
    a, c = gain.curvature_drift, gain.curvature_noise
    target = (bound / lr) ** 2
    if a <= 0:
        return target / c if c > 0 else float("inf")
    return (-c + np.sqrt(c * c + 4 * a * target)) / (2 * a)


def _gain(
    drift: np.ndarray, curvature: np.ndarray, noise: np.ndarray, lr: float, steps: int, batch_size: int
) -> tuple[float, float]:
    """(first_order, cost) of the gain from the parts' drift and curvature (m,) and noise (m, n) of the examples
    kept."""
    first_order = steps * lr * drift.mean()
    spread = noise.var(axis=1, ddof=1).mean() / batch_size
    return float(first_order), float(0.5 * steps * lr**2 * (np.mean(curvature**2) + spread))


def predicted_gain(
    parts: GainParts,
    lr: float,
    steps: int,
    batch_size: int,
    groups: int,
    level: float,
    baseline: GainParts | None = None,
) -> Gain:
    """The gain of `steps` Adam steps at `lr` with batch `batch_size`, from summed parts (see the module docstring);
    with `baseline`, the gain minus the baseline's, jackknifed as one paired statistic (same examples); the reach
    is always that of `parts` (the steps taken)."""

    def components(keep_train: np.ndarray, keep_held: np.ndarray, left_out: int | None) -> tuple[float, float]:
        """(first_order, cost), minus the baseline's, on the examples kept (left_out: the training group out)."""
        total = np.zeros(2)
        for sign, source in ((1.0, parts), (-1.0, baseline)):
            if source is None:
                continue
            drift = source.drift if left_out is None else source.drift_minus[left_out]
            curvature = source.curvature if left_out is None else source.curvature_minus[left_out]
            total += sign * np.array(
                _gain(
                    drift[keep_held],
                    curvature[keep_held],
                    source.noise[np.ix_(keep_held, keep_train)],
                    lr,
                    steps,
                    batch_size,
                )
            )
        return float(total[0]), float(total[1])

    m, n = parts.noise.shape
    every_train, every_held = np.ones(n, bool), np.ones(m, bool)
    first, cost = components(every_train, every_held, None)
    curvature_drift = float(np.mean(parts.curvature**2))
    curvature_noise = float(parts.noise.var(axis=1, ddof=1).mean() / batch_size)
    reach = float(lr * np.sqrt(steps**2 * curvature_drift + steps * curvature_noise))
    train_member, held_member = example_groups(n, groups), example_groups(m, groups)
    replicates = [
        [np.subtract(*components(train_member != g, every_held, g)) for g in range(train_member.max() + 1)],
        [np.subtract(*components(every_train, held_member != g, None)) for g in range(held_member.max() + 1)],
    ]
    variance = sum(float(jackknife_covariance(np.asarray(values)[:, None])[0, 0]) for values in replicates)
    se = float(np.sqrt(variance))
    z = normal_quantile(level)
    estimate = first - cost
    return Gain(
        estimate, se, estimate - z * se, estimate + z * se, first, cost, reach, curvature_drift, curvature_noise
    )
