"""The statistics of `growcert advise-check` (docs/science.md, "advise-check (is the advice right?)"): a growth's
outcome against its control, paired per held-out example, and the scores of a rule that picks where to grow.

- `paired_outcome(grown, control)`: the mean over held-out examples of (grown − control) per-example loss, and its
  standard error sd/√n (paired: the two models are read on the same examples, so the example-to-example spread
  they share cancels). Negative: growing lowered held-out loss.
- `beat(outcome, se, z)` and `lost(outcome, se, z)`: the outcome is beyond its own noise, below −z·se (growing
  helped) or above +z·se (growing hurt).
- `regret(gains, chosen)`: how much held-out gain (−outcome) a choice leaves on the table against the best option
  of that model, where not growing (gain 0) is always an option; `chosen` None is the choice not to grow.
- `option_regret(gains, chosen)`: at matched compute every option spends the same S steps (train on is option 0, a
  growth each of the others), so there is no free "do nothing": the best option's observed gain minus the chosen one's.
- `calibration_slope(predicted, observed)`: the least-squares slope of observed on predicted gain (1: the predictions'
  sizes are right; NaN below 2 distinct predictions); `covered(observed, low, high)`: whether each observed gain lies
  inside its prediction interval.
- `per_seed_interval(values, level)`: the score's interval clustered by training seed: one value per seed (the
  score computed on that seed's models alone), Student t over seeds (`stats.seeds.t_interval`), so examples
  and points of one training run never count as independent replicates.
- `reliability(b_exact, worse, bins)`: per equal-width bin of B_exact on [0, 1], the count and the observed share of
  growths that made held-out loss worse (outcome > 0), beside the bin's mean B_exact: a calibrated certificate
  has the share at or below B_exact in every bin.
- `seed_half(train_seeds)`: the fixed split of the checkpoints into an exploration half (even training seeds: a
  candidate rule is chosen there) and a confirmation half (odd seeds: it is judged there alone), fixed before any
  outcome was read. By seed, not by point or checkpoint: one training run's checkpoints share their seed and their
  outcomes cluster by it, so a split by seed keeps the halves independent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from growcert.stats.seeds import t_interval

EXPLORATION, CONFIRMATION = "exploration", "confirmation"
EVERY_HALF = "all"  # both halves: every training seed
HALVES = (EXPLORATION, CONFIRMATION)
SPLIT_RULE = "even training seeds explore, odd training seeds confirm"


def paired_outcome(grown: Sequence[float], control: Sequence[float]) -> tuple[float, float]:
    """(mean of grown − control, its standard error) over paired per-example losses; the SE is NaN below 2 pairs."""
    grown, control = np.asarray(grown, float), np.asarray(control, float)
    if grown.shape != control.shape or grown.ndim != 1:
        raise ValueError(f"paired losses need two vectors of one length, got shapes {grown.shape} and {control.shape}")
    difference = grown - control
    if len(difference) == 0:
        return math.nan, math.nan
    se = float(difference.std(ddof=1) / math.sqrt(len(difference))) if len(difference) > 1 else math.nan
    return float(difference.mean()), se


def beat(outcome, se, z: float) -> np.ndarray:
    """Growing lowered held-out loss by more than z standard errors of its own outcome."""
    return np.asarray(outcome, float) < -z * np.asarray(se, float)


def lost(outcome, se, z: float) -> np.ndarray:
    """Growing raised held-out loss by more than z standard errors of its own outcome."""
    return np.asarray(outcome, float) > z * np.asarray(se, float)


def regret(gains: Sequence[float], chosen: int | None) -> float:
    """max(0, best gain) − the chosen option's gain (0 for not growing): never negative."""
    gains = np.asarray(gains, float)
    best = max(0.0, float(np.max(gains))) if len(gains) else 0.0
    return best - (0.0 if chosen is None else float(gains[chosen]))


def option_regret(gains: Sequence[float], chosen: int) -> float:
    """max(gains) − gains[chosen]: how much observed gain the chosen option leaves against the best one (≥ 0)."""
    gains = np.asarray(gains, float)
    return float(np.max(gains) - gains[chosen])


def calibration_slope(predicted: Sequence[float], observed: Sequence[float]) -> float:
    """Least-squares slope of observed on predicted (with an intercept) over the finite pairs; NaN when fewer than
    2 pairs or every prediction is the same."""
    predicted, observed = np.asarray(predicted, float), np.asarray(observed, float)
    finite = np.isfinite(predicted) & np.isfinite(observed)
    x, y = predicted[finite], observed[finite]
    if len(x) < 2 or np.ptp(x) == 0:
        return math.nan
    x = x - x.mean()
    return float(x @ (y - y.mean()) / (x @ x))


def covered(observed: Sequence[float], low: Sequence[float], high: Sequence[float]) -> np.ndarray:
    """Per pair, whether the observed value lies in [low, high] (False where any of the three is NaN)."""
    observed, low, high = (np.asarray(values, float) for values in (observed, low, high))
    return (low <= observed) & (observed <= high)


def per_seed_interval(values: Sequence[float], level: float) -> tuple[float, float, float, int]:
    """(mean over seeds, low, high, seeds with a value) of one score per training seed (NaN: the seed had no point
    the score is defined on, left out); the interval is NaN with fewer than 2 such seeds."""
    values = np.asarray(values, float)
    finite = values[np.isfinite(values)]
    mean, _, low, high = t_interval(finite, level)
    return mean, low, high, len(finite)


def reliability(b_exact: Sequence[float], worse: Sequence[bool], bins: int) -> list[dict[str, float]]:
    """Per bin [k/bins, (k+1)/bins) of B_exact (the last closed at 1; NaN B_exact left out): its edges, the
    growths in it, their mean B_exact and the observed share that made held-out loss worse (NaN when empty)."""
    b_exact, worse = np.asarray(b_exact, float), np.asarray(worse, bool)
    known = np.isfinite(b_exact)
    index = np.minimum((np.clip(b_exact[known], 0.0, 1.0) * bins).astype(int), bins - 1)
    rows = []
    for k in range(bins):
        inside = index == k
        count = int(inside.sum())
        rows.append(
            {
                "b_low": k / bins,
                "b_high": (k + 1) / bins,
                "growths": count,
                "mean_b_exact": float(b_exact[known][inside].mean()) if count else math.nan,
                "share_worse": float(worse[known][inside].mean()) if count else math.nan,
            }
        )
    return rows


def seed_half(train_seeds: Sequence[int]) -> np.ndarray:
    """Per training seed, its half: EXPLORATION for an even seed, CONFIRMATION for an odd one."""
    seeds = np.asarray(train_seeds)
    if seeds.size and not np.all(np.equal(np.mod(seeds, 1), 0)):
        raise ValueError(f"training seeds are whole numbers, got {seeds[np.mod(seeds, 1) != 0][0]!r}")
    return np.where(seeds.astype(np.int64) % 2 == 0, EXPLORATION, CONFIRMATION)
