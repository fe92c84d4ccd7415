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

An unresolved verdict leaves open how many seeds would resolve it. `t_power` is the closed form for a t
interval (the noncentral t: the probability that the interval lies wholly on one side of a boundary when
the true mean and spread are as given), `seeds_for_power` the fewest seeds at which a power function
reaches 80 % (`POWER`), or "more than" its limit. `median_interval_seeds` says how many samples an
order-statistic interval needs before it has any finite end at all: below that count its coverage cannot
reach the level, whatever the values, so it is (−inf, inf).

Steps to a target are interval-censored (`step_bounds`): a run that reached it at evaluation step s took between
s − eval_every and s steps, a censored run more than the cap, so each seed's ratio baseline/variant is an
interval; `bounds_interval` turns the seeds' bounds into an interval over seeds (docs/science.md, "Verdicts").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import stats as scipy_stats

MAX_SEEDS = 10_000  # beyond this, "more than 10,000 seeds": the spread will not resolve it
POWER = 0.8  # the power an unresolved verdict's seed count is sized for


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


def t_power(mean: float, spread: float, boundary: float, seeds: int, level: float) -> float:
    """The probability that a Student t interval at `level` over `seeds` seeds (true mean `mean`, per-seed standard
    deviation `spread`) lies wholly on `mean`'s side of `boundary`: the noncentral t with seeds − 1 degrees of
    freedom and noncentrality (mean − boundary)·√seeds / spread."""
    if seeds < 2:
        return 0.0
    quantile = t_quantile(level, seeds)
    if spread == 0:
        return 1.0 if mean != boundary else 0.0
    noncentrality = abs(mean - boundary) * math.sqrt(seeds) / spread
    return float(scipy_stats.nct.sf(quantile, seeds - 1, noncentrality))


def seeds_for_power(power: Callable[[int], float], start: int, limit: int = MAX_SEEDS,
                    target: float = POWER) -> tuple[int, bool]:
    """(n, more): the fewest seeds n ≥ `start` with power(n) ≥ `target`, found by doubling then bisection (power is
    taken as nondecreasing in n); (limit, True) when even `limit` seeds fall short ("more than limit")."""
    low, high = max(start, 2), max(start, 2)
    while power(high) < target:
        if high >= limit:
            return limit, True
        low, high = high + 1, min(2 * high, limit)
    while low < high:  # power(high) reaches the target; find the first n that does
        middle = (low + high) // 2
        if power(middle) >= target:
            high = middle
        else:
            low = middle + 1
    return high, False


@dataclass(frozen=True)
class StepBounds:
    """Per seed, the log ratio baseline steps / variant steps: its point value (censored runs as +inf steps) and
    its lower and upper bounds (a reached step s lies in (s − eval_every, s]; a censored run beyond the cap)."""

    point: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def step_bounds(baseline: Sequence[float], variant: Sequence[float], cap: float, eval_every: float) -> StepBounds:
    """The seeds' `StepBounds` (NaN, None or inf steps are censored at `cap`)."""
    def parse(values):
        steps = np.asarray([math.inf if v is None or not math.isfinite(float(v)) else float(v) for v in values], float)
        censored = np.isinf(steps)
        # the first step at the target lies in (s − eval_every, s], and is at least 1 when s is
        low = np.where(censored, float(cap), np.minimum(np.maximum(steps - eval_every, 1.0), steps))
        return steps, low, np.where(censored, math.inf, steps)

    (b, b_low, b_high), (v, v_low, v_high) = parse(baseline), parse(variant)
    if b.shape != v.shape:
        raise ValueError(f"paired seeds: {len(b)} baseline runs against {len(v)} variant runs")
    with np.errstate(divide="ignore", invalid="ignore"):
        return StepBounds(np.log(b) - np.log(v), np.log(b_low) - np.log(v_high), np.log(b_high) - np.log(v_low))


def bounds_interval(lower: np.ndarray, upper: np.ndarray, point: np.ndarray,
                    level: float) -> tuple[float, float, float, str]:
    """(estimate, low, high, form) on the log scale for seeds' interval-valued ratios, over the last axis (one row
    per replicate when 2-D): with every bound finite, Student t with its lower end from the lower bounds and its
    upper end from the upper bounds (each covers the mean of the true ratios from its side, so together at
    least `level`); else the order-statistic interval for the median, x_(k) of the lower bounds to x_(n−k+1)
    of the upper bounds (each seed's lower bound is below its true ratio, so the order statistics are too)."""
    seeds = lower.shape[-1]
    if np.isfinite(lower).all() and np.isfinite(upper).all():
        quantile = t_quantile(level, seeds)
        low = lower.mean(axis=-1) - quantile * lower.std(axis=-1, ddof=1) / math.sqrt(seeds)
        high = upper.mean(axis=-1) + quantile * upper.std(axis=-1, ddof=1) / math.sqrt(seeds)
        return point.mean(axis=-1), low, high, "t"
    k = _order_rank(seeds, level)
    with np.errstate(invalid="ignore"):
        estimate = np.median(point, axis=-1)
    if k == 0:
        shape = lower.shape[:-1]
        return estimate, np.full(shape, -math.inf)[()], np.full(shape, math.inf)[()], "median"
    return estimate, np.sort(lower, axis=-1)[..., k - 1], np.sort(upper, axis=-1)[..., seeds - k], "median"


def _order_rank(seeds: int, level: float) -> int:
    """The largest k with coverage of [x_(k), x_(n−k+1)] for the median at least `level` (0: none)."""
    k = 0
    while k + 1 <= seeds // 2 and 1.0 - 2.0 * scipy_stats.binom.cdf(k, seeds, 0.5) >= level:
        k += 1
    return k
