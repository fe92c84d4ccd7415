"""Intervals over training seeds: the statistics every verdict rests on (docs/science.md, "Verdicts").

A training run is the unit that varies between repetitions (initialisation, data order), so an effect
measured on trained models gets its interval from one value per seed, never from the examples inside
one run. Three forms, each stated per claim in the claims registry:

- `t_interval`: Student's t on the mean of per-seed values, seeds − 1 degrees of freedom;
- `median_interval`: the distribution-free order-statistic interval for the median of per-seed
  values (the sign-test inversion), which accepts ±inf: a run that never reached its target within
  the cap is *censored* (it took more than the cap) and enters as +inf steps, never as the cap;
- `paired_log_ratios`: per seed, log(baseline steps / variant steps) with censored runs as +inf steps,
  so a censored baseline gives +inf and a censored variant −inf (both censored: no information, NaN).

`seeds_to_resolve` says how many seeds an interval of the same spread would need to become narrower
than a given distance, the question an unresolved verdict leaves open. `median_interval_seeds` says how
many samples an order-statistic interval needs before it has any finite end at all: below that count
its coverage cannot reach the level, whatever the values, so it is (−inf, inf).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats as scipy_stats

MAX_SEEDS = 10_000  # beyond this, "more than 10,000 seeds": the spread will not resolve it


def t_quantile(level: float, seeds: int) -> float:
    """The two-sided Student t quantile of `level` with seeds − 1 degrees of freedom."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1); got {level}")
    return float(scipy_stats.t.ppf(0.5 + level / 2.0, seeds - 1))


def t_interval(samples: np.ndarray, level: float) -> tuple[float, float, float, float]:
    """(mean, standard error, low, high) of the finite samples: Student t with n − 1 degrees of freedom;
    NaN where undefined (no sample: everything; one sample: all but the mean)."""
    samples = np.asarray(samples, float)
    samples = samples[np.isfinite(samples)]
    if len(samples) == 0:
        return math.nan, math.nan, math.nan, math.nan
    mean = float(samples.mean())
    if len(samples) < 2:
        return mean, math.nan, math.nan, math.nan
    se = float(samples.std(ddof=1) / math.sqrt(len(samples)))
    half = t_quantile(level, len(samples)) * se
    return mean, se, mean - half, mean + half


def median_interval(samples: Sequence[float], level: float) -> tuple[float, float, float]:
    """(median, low, high) of samples that may hold ±inf (NaN samples are dropped).

    The interval is [x_(k), x_(n−k+1)] with the largest k whose coverage 1 − 2·P(Bin(n, ½) < k) is at
    least `level`; with too few samples for any such k it is (−inf, inf).
    """
    values = np.sort(np.asarray([value for value in samples if not math.isnan(value)], float))
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    with np.errstate(invalid="ignore"):
        median = float(np.median(values))  # inf where the middle is censored; NaN for −inf and inf
    k = 0
    while k + 1 <= n // 2 and 1.0 - 2.0 * scipy_stats.binom.cdf(k, n, 0.5) >= level:
        k += 1  # P(Bin < k+1) = cdf(k): coverage of [x_(k+1), x_(n−k)]
    if k == 0:
        return median, -math.inf, math.inf
    return median, float(values[k - 1]), float(values[n - k])


def median_interval_seeds(level: float) -> int:
    """The fewest samples whose order-statistic interval for the median at `level` is bounded: the
    smallest n with coverage 1 − 2·P(Bin(n, ½) < 1) = 1 − 2^(1−n) ≥ level (6 at 95 %, 8 at 99.17 %)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1); got {level}")
    return max(2, math.ceil(1.0 - math.log2(1.0 - level) - 1e-12))


def paired_log_ratios(baseline: Sequence[float], variant: Sequence[float]) -> np.ndarray:
    """Per seed log(baseline / variant) of steps to a target; NaN or inf steps mean censored (not reached
    by the cap: more than the cap), so the ratio is +inf, −inf, or NaN when both are censored."""
    b = np.asarray([math.inf if value is None or math.isnan(value) else value for value in baseline], float)
    v = np.asarray([math.inf if value is None or math.isnan(value) else value for value in variant], float)
    if b.shape != v.shape:
        raise ValueError(f"paired seeds: {len(b)} baseline runs against {len(v)} variant runs")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.log(b) - np.log(v)  # inf − inf is NaN: both censored
    return ratios


def seeds_to_resolve(spread: float, distance: float, level: float, seeds: int) -> int | None:
    """The fewest seeds (more than `seeds`) at which a t interval with this per-seed standard deviation
    has a half-width below `distance`; None when no count up to MAX_SEEDS does (or nothing is known)."""
    if not (math.isfinite(spread) and math.isfinite(distance)) or distance <= 0:
        return None
    if spread == 0:
        return max(seeds + 1, 2)
    for n in range(max(seeds + 1, 2), MAX_SEEDS + 1):
        if t_quantile(level, n) * spread / math.sqrt(n) < distance:
            return n
    return None
