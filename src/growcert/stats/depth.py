"""The first-order value of an inserted zero-output block, and the saturation decision (P3; docs/science.md,
"estimate-depth (P3)").

Pure numerics on numpy arrays that `growcert.stages.depth` computes from stored (z, q) with the block's own
code. For a block r(z) = W_out φ(W_in u(z)) with W_out = 0, example i contributes

    G_i = Σ_t q_it h_itᵀ   (D × H; t runs over spatial or token positions, h = φ(W_in u(z)))

and ∂L/∂W_out = E[G]. The functions here take G_i flattened, one row per example.

Value. ‖E[G]‖_F² is estimated without bias by the U-statistic Σ_{i≠j}⟨G_i, G_j⟩ / n(n−1), which is
`stats.moments(G).mu_sq` (with ⟨G_i, G_j⟩ = Σ_{t,s}(q_it·q_js)(h_it·h_js), the Gram identity); its
standard error is P1's exact U-statistic variance (`certificates.detectability`) and the interval is
value ± z·SE. The plug-in ‖mean G‖² is kept for comparison: it is biased upward by tr Cov(G)/n, so
under E[q | z] = 0 it sits above zero by many standard errors while the unbiased value does not.

Scale-invariant value. The P3 pilot found the raw value falling 40× over depth mostly because the
stream grows (‖z‖ from 0.7 to 23) and q shrinks as 1/‖z‖ behind the final norm. The value is the
squared first-order loss decrease per unit Frobenius step of W_out; measured instead per unit step of
the block's output *relative to the stream it joins* (W_out = ε·(rms z / rms h)·E[G]/‖E[G]‖, the
interventions' ε), the squared decrease is

    scaled_value = value × mean_t‖z_t‖² / mean_t‖h_t‖²

(per-position means over the pool). It is invariant to rescaling the stream behind a normalisation
(q → q/c, z → cz, h fixed for u = RMSNorm) and to rescaling W_in; for LLaMA blocks mean‖h‖² hardly
moves, so it is the pilot's value × ‖z‖² up to a constant. Its SE adds the delta-method variance of the
ratio of means to the value's (treating the two as independent: the ratio's relative error is O(1/√n)
and small next to the value's).

Explained fraction. The block's first-order output changes are δr_t = A h_t for any A (D × H). The best
such direction is the least-squares regression of q_t on h_t, A = C S⁻¹ with C = Σ q hᵀ (= Σ_i G_i)
and S = Σ h hᵀ over positions and examples. Fitted on one split and evaluated on the other,

    explained_fraction = 1 − Σ_eval ‖q_t − A h_t‖² / Σ_eval ‖q_t‖² = (2⟨A, C_eval⟩ − ⟨A S_eval, A⟩) / Q_eval

needs only C, S and Q = Σ‖q_t‖² of each split (no second pass). It estimates ‖P_span E[q|z]‖² / E‖q‖²,
a lower bound on the fraction of ‖E[q|z]‖² in the block's span (E‖q‖² also holds the label noise
q − E[q|z], which no function of z can explain and which cannot be separated from one label per z).
Held out, it is ≤ 0 in expectation when E[q|z] = 0 (fitting noise only hurts), where an in-sample R²
would be ≈ H/(positions × n) > 0. A ridge of `ridge × mean eigenvalue of S` keeps S invertible.

Saturation (plateau test). Values v_1..v_K at increasing depths with standard errors s_k, z the
two-sided normal quantile of `level`. Level k is saturated when either
    zero:     every v_j, j ≥ k, is within its noise of zero (|v_j| ≤ z s_j), or
    plateau:  k < K and every deeper v_j differs from v_k by at most z·√(s_j² + s_k²) (no significant
              fall or rise from k on; each comparison at `level`, so more deeper levels make a plateau
              harder to claim: conservative about declaring depth useless).
The decision is the smallest saturated level; the last level alone is never a plateau (nothing deeper
confirms it). Its uncertainty: the decision recomputed on `draws` parametric resamples
v*_k ~ N(v_k, s_k²), independent across levels (points of one model share examples, so within a model
this understates the spread), reported as a percentile interval of the chosen level among the
resamples that reach a decision, and the fraction that do (`decided_fraction`).
"""

from __future__ import annotations

import math

import numpy as np

from growcert.stats.certificates import detectability
from growcert.stats.intervals import normal_quantile
from growcert.stats.moments import plugin_from_sums, power_sums, unbiased_moments

STATUS_OK = "ok"
STATUS_NULL = "within noise of zero"
SATURATED_PLATEAU = "saturated (plateau)"
SATURATED_ZERO = "saturated (within noise of zero)"
NOT_SATURATED = "not saturated within the grid"


def first_order_value(features, level: float = 0.95, detect_threshold: float = 2.0) -> dict:
    """Unbiased ‖E[G]‖² with SE and interval, and the plug-in ‖mean G‖², from rows G_i (n, D·H)."""
    z = normal_quantile(level)
    sums, _ = power_sums(features)
    m = unbiased_moments(sums)
    detect, se = detectability(m)
    value = float(m.mu_sq)
    return {
        "n": int(sums.n),
        "value": value,
        "value_se": se,
        "value_lo": value - z * se,
        "value_hi": value + z * se,
        "value_plugin": float(plugin_from_sums(sums).mu_sq),
        "value_detectability": detect,
        "status": STATUS_OK if detect >= detect_threshold else STATUS_NULL,
    }


def scaled_value(value: float, value_se: float, z_sq, h_sq, level: float = 0.95) -> dict:
    """value × mean‖z‖²/mean‖h‖² with a delta-method SE; z_sq, h_sq: per-example position means."""
    z = normal_quantile(level)
    z_sq, h_sq = np.asarray(z_sq, np.float64), np.asarray(h_sq, np.float64)
    n = len(z_sq)
    ratio = z_sq.mean() / h_sq.mean()
    # Var of a ratio of means: Var(z_i − r h_i) / (n · mean(h)²)
    ratio_se = math.sqrt(np.var(z_sq - ratio * h_sq, ddof=1) / n) / h_sq.mean() if n > 1 else math.nan
    scaled = value * ratio
    se = math.sqrt((ratio * value_se) ** 2 + (value * ratio_se) ** 2)
    return {
        "mean_z_sq": float(z_sq.mean()),
        "mean_h_sq": float(h_sq.mean()),
        "scaled_value": scaled,
        "scaled_value_se": se,
        "scaled_value_lo": scaled - z * se,
        "scaled_value_hi": scaled + z * se,
    }


def gradient_norm(position_sums) -> dict:
    """Unbiased ‖E[Σ_t q_t]‖² (P1's sum_positions mean) with its SE, from rows Σ_t q_it (n, D)."""
    m = unbiased_moments(power_sums(position_sums)[0])
    return {"grad_norm_sq": float(m.mu_sq), "grad_norm_sq_se": detectability(m)[1]}


def held_out_explained(cross_fit, gram_fit, cross_eval, gram_eval, target_sq_eval: float, ridge: float = 1e-3) -> float:
    """Held-out R² of q on the block's features h (see the module docstring).

    cross_*: C = Σ q hᵀ (D × H); gram_*: S = Σ h hᵀ (H × H); target_sq_eval: Σ ‖q_t‖² on the eval split.
    """
    cross_fit, gram_fit = np.asarray(cross_fit, np.float64), np.asarray(gram_fit, np.float64)
    hidden = gram_fit.shape[0]
    if not target_sq_eval > 0:
        return math.nan
    penalty = ridge * np.trace(gram_fit) / hidden
    # A = C S⁻¹, computed as (S⁻¹ Cᵀ)ᵀ since S is symmetric
    a = np.linalg.solve(gram_fit + penalty * np.eye(hidden), cross_fit.T).T
    gain = 2.0 * np.vdot(a, cross_eval) - np.vdot(a @ np.asarray(gram_eval, np.float64), a)
    return float(gain / target_sq_eval)


def saturated_levels(values, ses, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """(zero, plateau) boolean arrays over levels k (see the module docstring's plateau test)."""
    v, s = np.asarray(values, np.float64), np.asarray(ses, np.float64)
    z = normal_quantile(level)
    K = len(v)
    near_zero = np.abs(v) <= z * s
    # zero from k on: all of near_zero[k:], a reversed cumulative AND
    zero = np.flip(np.logical_and.accumulate(np.flip(near_zero)))
    plateau = np.zeros(K, dtype=bool)
    for k in range(K - 1):
        plateau[k] = bool(np.all(np.abs(v[k + 1 :] - v[k]) <= z * np.sqrt(s[k + 1 :] ** 2 + s[k] ** 2)))
    return zero, plateau


def plateau_index(values, ses, level: float = 0.95) -> tuple[int | None, str]:
    """(index of the smallest saturated level or None, status)."""
    zero, plateau = saturated_levels(values, ses, level)
    for k in range(len(zero)):
        if zero[k]:
            return k, SATURATED_ZERO
        if plateau[k]:
            return k, SATURATED_PLATEAU
    return None, NOT_SATURATED


def saturation(levels, values, ses, level: float = 0.95, draws: int = 2000, seed: int = 0) -> dict:
    """The saturation decision over `levels` (sorted depths or point indices) with its uncertainty."""
    levels = np.asarray(levels)
    v, s = np.asarray(values, np.float64), np.asarray(ses, np.float64)
    if len(levels) != len(v) or len(v) != len(s):
        raise ValueError("saturation needs levels, values and ses of one length")
    if np.any(np.diff(levels) <= 0):
        raise ValueError(f"saturation needs strictly increasing levels, got {list(levels)}")
    index, status = plateau_index(v, s, level)
    rng = np.random.default_rng(seed)
    chosen = []
    for _ in range(draws):
        k, _ = plateau_index(v + rng.standard_normal(len(v)) * np.nan_to_num(s), s, level)
        if k is not None:
            chosen.append(levels[k])
    tail = (1.0 - level) / 2.0
    decided = len(chosen) / draws if draws else math.nan
    # inverted_cdf: the bounds are levels of the grid, not interpolations between depths
    lo, hi = np.quantile(chosen, [tail, 1.0 - tail], method="inverted_cdf") if chosen else (math.nan, math.nan)
    return {
        "recommended": float(levels[index]) if index is not None else math.nan,
        "status": status,
        "recommended_lo": float(lo),
        "recommended_hi": float(hi),
        "decided_fraction": decided,
        "plateau_value": float(v[index]) if index is not None else math.nan,
    }
