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

A claim's design figures say how many seeds would decide it (docs/science.md, "Verdicts": design power).
`t_power` is the closed form for a t interval (the noncentral t: the probability that the interval lies
wholly on one side of a boundary when the true mean and spread are as given), `order_power` the closed form
for the order-statistic interval of normal per-seed values (a binomial count of seeds on each side of the
boundary), `spread_upper` the upper confidence limit of a between-seed standard deviation (chi-square), so
that a figure computed at it is not optimistic, and `seeds_for_power` the fewest seeds at which a power
function reaches 80 % (`POWER`), or "more than" its limit. `median_interval_seeds` says how many samples an
order-statistic interval needs before it has any finite end at all: below that count its coverage cannot
reach the level, whatever the values, so it is (−inf, inf).

Steps to a target are interval-censored (`step_bounds`): a run that reached it at evaluation step s took between
s − eval_every and s steps, a censored run more than the cap, so each seed's ratio baseline/variant is an
interval; `bounds_interval` turns the seeds' bounds into an interval over seeds (docs/science.md, "Verdicts").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

MAX_SEEDS = 10_000  # beyond this, "more than 10,000 seeds": the spread will not resolve it
POWER = 0.8  # the power a design figure is sized for
SPREAD_CONFIDENCE = 0.8  # design figures take the between-seed spread at its upper limit at this confidence


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
    k = _order_rank(n, level)
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


def order_power(mean: float, spread: float, boundary: float, seeds: int, level: float) -> float:
    """The probability that the order-statistic interval for the median at `level` over `seeds` normal per-seed values
    (mean `mean`, standard deviation `spread`) lies wholly on `mean`'s side of `boundary`: with k its rank
    (`_order_rank`), x_(k) above the boundary when the mean is, i.e. at most k − 1 seeds below it, a binomial count."""
    k = _order_rank(seeds, level)
    if k == 0 or mean == boundary:
        return 0.0
    if spread == 0:
        return 1.0
    below = float(scipy_stats.norm.cdf((boundary - mean) / spread))
    wrong_side = below if mean > boundary else 1.0 - below
    return float(scipy_stats.binom.cdf(k - 1, seeds, wrong_side))


def spread_upper(spread: float, seeds: int, confidence: float = SPREAD_CONFIDENCE) -> float:
    """The upper `confidence` limit of a normal standard deviation estimated as `spread` from `seeds` values:
    spread · √((n − 1) / χ²_{1−confidence}(n − 1)); NaN below 2 seeds."""
    if seeds < 2 or not math.isfinite(spread):
        return math.nan
    return spread * math.sqrt((seeds - 1) / float(scipy_stats.chi2.ppf(1.0 - confidence, seeds - 1)))


def seeds_for_power(
    power: Callable[[int], float], start: int, limit: int = MAX_SEEDS, target: float = POWER, monotone: bool = True
) -> tuple[int, bool]:
    """(n, more): the fewest seeds n ≥ `start` with power(n) ≥ `target`, found by doubling then bisection when power is
    nondecreasing in n (`monotone`), else by a scan (an order-statistic interval's rank moves in steps, so its power
    saw-tooths); (limit, True) when even `limit` seeds fall short ("more than limit")."""
    if not monotone:
        for n in range(max(start, 2), limit + 1):
            if power(n) >= target:
                return n, False
        return limit, True
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


def step_bounds(
    baseline: Sequence[float],
    variant: Sequence[float],
    cap: float,
    eval_every: float,
    variant_cap: Sequence[float] | None = None,
) -> StepBounds:
    """The seeds' `StepBounds` (NaN, None or inf steps are censored at `cap`; a variant's at its seed's entry of
    `variant_cap` when given: paired caps, each variant run stopped at its own seed's step)."""

    def parse(values, censored_at):
        steps = np.asarray([math.inf if v is None or not math.isfinite(float(v)) else float(v) for v in values], float)
        censored = np.isinf(steps)
        # the first step at the target lies in (s − eval_every, s], and is at least 1 when s is
        low = np.where(censored, np.asarray(censored_at, float), np.minimum(np.maximum(steps - eval_every, 1.0), steps))
        return steps, low, np.where(censored, math.inf, steps)

    (b, b_low, b_high) = parse(baseline, cap)
    (v, v_low, v_high) = parse(variant, cap if variant_cap is None else variant_cap)
    if b.shape != v.shape:
        raise ValueError(f"paired seeds: {len(b)} baseline runs against {len(v)} variant runs")
    with np.errstate(divide="ignore", invalid="ignore"):
        return StepBounds(np.log(b) - np.log(v), np.log(b_low) - np.log(v_high), np.log(b_high) - np.log(v_low))


def bounds_interval(
    lower: np.ndarray, upper: np.ndarray, point: np.ndarray, level: float, estimand: str = "median"
) -> tuple[float, float, float]:
    """(estimate, low, high) on the log scale for seeds' interval-valued ratios, for the claim's registered `estimand`
    (never switched by the data):

    - "mean" (of the per-seed log ratios): Student t with its lower end from the lower bounds and its upper end from
      the upper bounds (each covers the mean of the true ratios from its side, so together at least `level`); an end
      is infinite when some seed's bound on that side is (a censored run bounds its ratio from one side only);
    - "median": the order-statistic interval, x_(k) of the lower bounds to x_(n−k+1) of the upper bounds (each seed's
      lower bound is below its true ratio, so the order statistics are too); (−inf, inf) below
      `median_interval_seeds(level)` seeds.

    A seed where both runs are censored has the bounds (−inf, inf) and stays in: it widens the interval. The estimate
    is the mean or median of the seeds' point values where those determine it, else NaN (a censored seed's point
    value is only a bound, and a seed with both runs censored has none)."""
    lower, upper, point = (np.asarray(values, float) for values in (lower, upper, point))
    seeds = len(lower)
    if estimand == "mean":
        quantile = t_quantile(level, seeds)
        ends = []
        for bounds, sign in ((lower, -1.0), (upper, 1.0)):
            ends.append(
                float(bounds.mean() + sign * quantile * bounds.std(ddof=1) / math.sqrt(seeds))
                if np.isfinite(bounds).all()
                else sign * math.inf
            )
        estimate = float(point.mean()) if np.isfinite(point).all() else math.nan
        return estimate, ends[0], ends[1]
    if estimand != "median":
        raise ValueError(f"estimand {estimand!r}: one of mean, median")
    with np.errstate(invalid="ignore"):
        low_point, high_point = (
            float(np.median(np.where(np.isnan(point), fill, point))) for fill in (-math.inf, math.inf)
        )
    # a censored seed's point value is only a bound (±inf): a median that lands on one, or that a seed with both runs
    # censored could move, is undetermined
    estimate = low_point if low_point == high_point and math.isfinite(low_point) else math.nan
    k = _order_rank(seeds, level)
    if k == 0:
        return estimate, -math.inf, math.inf
    return estimate, float(np.sort(lower)[k - 1]), float(np.sort(upper)[seeds - k])


def _order_rank(seeds: int, level: float) -> int:
    """The largest k with coverage 1 − 2·P(Bin(n, ½) ≤ k − 1) of [x_(k), x_(n−k+1)] for the median at least `level`
    (0: none), k ≤ n // 2."""
    tail = (1.0 - level) / 2.0
    j = int(scipy_stats.binom.ppf(tail, seeds, 0.5))  # the smallest j with P(Bin ≤ j) ≥ tail
    while j >= 0 and scipy_stats.binom.cdf(j, seeds, 0.5) > tail * (1 + 1e-12):
        j -= 1
    return max(0, min(j + 1, seeds // 2))
