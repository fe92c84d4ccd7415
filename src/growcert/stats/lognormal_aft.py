"""The interval-censored log-normal accelerated failure time (AFT) model of two arms' times to a target, by maximum
likelihood (docs/science.md, "Verdicts": grokking's secondary reading).

Each arm's time T (steps to 95 % held-out) has log T = μ_arm + σ ε, ε standard normal, one σ for both arms (the
arms differ by a time scale: an accelerated failure time). A run is observed as an interval: reached at evaluation
step s, T lies in (s − eval_every, s]; stopped at step c without reaching it, T > c (right-censored); an exact time
has equal ends. The likelihood of an interval (a, b] is Φ((ln b − μ)/σ) − Φ((ln a − μ)/σ), of a right-censored run
1 − Φ((ln c − μ)/σ) (Lindsey and Ryan 1998; Klein and Moeschberger 2003, §3.5).

The ratio of the arms' median times is exp(μ_first − μ_second) (for a log-normal every quantile has that ratio). Its
interval is the profile-likelihood interval on the log scale: the log ratios δ whose profile log likelihood lies
within χ²₁(level)/2 of the maximum, the other two parameters maximized at each δ; an end where the profile never
falls that far (an arm censored in every run) is infinite. Without censoring the MLE is the normal one on the logs
(each μ the arm's mean log time, σ² the pooled sum of squares over all runs), and the interval has the closed form
δ̂ ± sqrt((1/n₁ + 1/n₂) · RSS · (exp(χ²/N) − 1)), which tests/test_lognormal_aft.py checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

# How far the profile search reaches on the log scale: a ratio beyond e^±30 reads as unbounded.
SEARCH_LIMIT = 30.0
LOG_ROOT_2PI = 0.5 * math.log(2 * math.pi)
STATIONARY = 1e-5  # a gradient this small (in log-likelihood units per unit of a parameter) is at the optimum


@dataclass(frozen=True)
class AFTFit:
    """The maximum-likelihood fit: each arm's location μ (log time), the common scale σ, the log ratio
    μ_first − μ_second with its profile-likelihood interval at `level` (±inf where unbounded), the maximized log
    likelihood and the runs per arm."""

    locations: tuple[float, float]
    scale: float
    log_ratio: float
    low: float
    high: float
    level: float
    log_likelihood: float
    runs: tuple[int, int]

    @property
    def ratio(self) -> tuple[float, float, float]:
        """exp of the log ratio and its interval's ends: the ratio of the arms' median times."""
        with np.errstate(over="ignore"):
            return tuple(float(np.exp(value)) for value in (self.log_ratio, self.low, self.high))


def step_intervals(
    steps: Sequence[float], eval_every: int, stopped: Sequence[float] | float
) -> tuple[np.ndarray, np.ndarray]:
    """Each run's (lower, upper] bounds on its time from steps to a target evaluated every `eval_every` steps: a
    reached step s gives (max(s − eval_every, 0), s]; a run that did not reach it (NaN, None or inf) gives
    (stopped, inf), `stopped` being the step it stopped at (per run, or one cap for all)."""
    steps = np.array([math.nan if value is None else float(value) for value in steps], float)
    stopped = np.broadcast_to(np.asarray(stopped, float), steps.shape)
    reached = np.isfinite(steps)
    lower = np.where(reached, np.maximum(steps - eval_every, 0.0), stopped)
    upper = np.where(reached, steps, np.inf)
    return lower, upper


def _log_probability(
    lower: np.ndarray, upper: np.ndarray, location: float, scale: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log P(lower < T ≤ upper) for log T ~ N(location, scale²), an exact time (lower == upper) as its log density
    on the log scale, with its derivatives in the location and in log scale; stable in both tails (Φ(b) − Φ(a) is
    formed on the side where both are small)."""
    with np.errstate(divide="ignore"):
        z_low = (np.log(lower) - location) / scale
        z_high = (np.log(upper) - location) / scale
    exact = lower == upper
    upper_side = z_low > 0  # both ends above the median: Φ(−a) − Φ(−b) loses nothing
    big = np.where(upper_side, special.log_ndtr(-z_low), special.log_ndtr(z_high))
    small = np.where(upper_side, special.log_ndtr(-z_high), special.log_ndtr(z_low))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        interval = big + np.log1p(-np.exp(small - big))
        # φ(z)/P and z φ(z)/P at each end, 0 at an infinite end
        density_high = np.where(np.isfinite(z_high), np.exp(-(z_high**2) / 2 - LOG_ROOT_2PI - interval), 0.0)
        density_low = np.where(np.isfinite(z_low), np.exp(-(z_low**2) / 2 - LOG_ROOT_2PI - interval), 0.0)
        moment_high = np.where(np.isfinite(z_high), z_high * density_high, 0.0)
        moment_low = np.where(np.isfinite(z_low), z_low * density_low, 0.0)
        # an exact time's branch leaves the interval's terms undefined (P = 0): np.where keeps the density's
        log_probability = np.where(exact, -(z_high**2) / 2 - LOG_ROOT_2PI - math.log(scale), interval)
        by_location = np.where(exact, z_high / scale, -(density_high - density_low) / scale)
        by_log_scale = np.where(exact, z_high**2 - 1, -(moment_high - moment_low))
    return log_probability, by_location, by_log_scale


def _negative_log_likelihood(
    arms: list[tuple[np.ndarray, np.ndarray]], delta: float, second_location: float, log_scale: float
) -> tuple[float, np.ndarray]:
    """−log L at (δ, μ_second, log σ), μ_first = μ_second + δ, and its gradient in those three."""
    scale = math.exp(log_scale)
    total, gradient = 0.0, np.zeros(3)
    for index, ((lower, upper), location) in enumerate(zip(arms, (second_location + delta, second_location))):
        log_probability, by_location, by_log_scale = _log_probability(lower, upper, location, scale)
        total += float(log_probability.sum())
        gradient += [
            float(by_location.sum()) if index == 0 else 0.0,
            float(by_location.sum()),
            float(by_log_scale.sum()),
        ]
    if not math.isfinite(total) or not np.isfinite(gradient).all():
        return 1e300, np.zeros(3)
    return -total, -gradient


def _start(arms: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[float], float]:
    """Starting values: each arm's mean log of a point in its runs' intervals (the middle; a censored run half again
    beyond its bound), and the spread of those points (at least a small positive scale)."""
    points = [np.log(np.where(np.isfinite(upper), (lower + upper) / 2, lower * 1.5)) for lower, upper in arms]
    centred = np.concatenate([p - p.mean() for p in points])
    spread = float(np.sqrt(np.mean(centred**2))) if len(centred) > 2 else 0.0
    return [float(p.mean()) for p in points], math.log(max(spread, 0.1))


def _maximize(objective, start: np.ndarray) -> optimize.OptimizeResult:
    """Minimize a negative log likelihood that returns (value, gradient) by BFGS (the surface is smooth); where BFGS
    stops short of a stationary point (a flat surface where an arm is censored), Nelder–Mead from its stop, keeping
    the better."""
    fine = optimize.minimize(objective, start, jac=True, method="BFGS", options={"gtol": 1e-8})
    if fine.success or np.max(np.abs(fine.jac)) < STATIONARY:  # BFGS's "precision loss" at a stationary point
        return fine
    coarse = optimize.minimize(
        lambda x: objective(x)[0],
        fine.x,
        method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-11, "maxiter": 20_000, "maxfev": 40_000},
    )
    return coarse if coarse.fun < fine.fun else fine


def fit_lognormal_aft(
    first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray], level: float = 0.95
) -> AFTFit:
    """Fit the two-arm interval-censored log-normal AFT model (module docstring) to `first` and `second`, each a
    (lower, upper) pair of arrays of its runs' bounds (`step_intervals`), and the profile-likelihood interval at
    `level` for the log ratio of their median times, μ_first − μ_second. ValueError when an arm has no run or
    neither arm has a run with a finite upper bound (nothing is then known of any time)."""
    arms = [(np.asarray(lower, float), np.asarray(upper, float)) for lower, upper in (first, second)]
    if any(len(lower) == 0 for lower, _ in arms):
        raise ValueError("each arm needs at least one run")
    if not any(np.isfinite(upper).any() for _, upper in arms):
        raise ValueError("every run of both arms is right-censored: the times are not identified")
    locations, log_scale = _start(arms)

    def negative(parameters: np.ndarray) -> tuple[float, np.ndarray]:  # (δ, μ_second, log σ)
        return _negative_log_likelihood(arms, *parameters)

    best = _maximize(negative, np.array([locations[0] - locations[1], locations[1], log_scale]))
    delta, second_location, log_sigma = best.x
    maximum = -best.fun
    cut = stats.chi2.ppf(level, 1) / 2

    def profile_drop(at: float) -> float:
        """How far the profile log likelihood at δ = `at` lies below the maximum, less the cut (a root at an end)."""

        def nuisance_only(nuisance: np.ndarray) -> tuple[float, np.ndarray]:
            value, gradient = negative(np.array([at, *nuisance]))
            return value, gradient[1:]

        inner = _maximize(nuisance_only, np.array([second_location, log_sigma]))
        return maximum + inner.fun - cut

    def end(direction: int) -> float:
        step, previous = max(1.0, abs(delta)) * 0.25, delta
        while True:
            candidate = delta + direction * step
            if abs(candidate - delta) > SEARCH_LIMIT:
                return direction * math.inf
            if profile_drop(candidate) > 0:
                return optimize.brentq(profile_drop, min(previous, candidate), max(previous, candidate), xtol=1e-8)
            previous, step = candidate, step * 2

    return AFTFit(
        (float(second_location + delta), float(second_location)),
        float(math.exp(log_sigma)),
        float(delta),
        float(end(-1)),
        float(end(+1)),
        level,
        float(maximum),
        (len(arms[0][0]), len(arms[1][0])),
    )
