"""Group-sequential boundaries: the critical z of each look when a hypothesis is tested at K looks at increasing
information, so that the chance of ever rejecting a true null stays α (docs/science.md, "Verdicts": looks).

The standardized statistics Z_1..Z_K at information fractions t_1 < … < t_K = 1 are jointly normal under the null
with corr(Z_i, Z_j) = sqrt(t_i / t_j) (independent increments: the score S_k = Z_k sqrt(t_k) is a Brownian motion
at time t_k). A boundary c_1..c_K rejects at the first look where |Z_k| ≥ c_k (two-sided; Z_k ≥ c_k one-sided).

- Lan and DeMets (1983) alpha spending: a spending function α(t) (α(0) = 0, α(1) = α) fixes how much of the
  type I error each look may spend, α(t_k) − α(t_{k−1}); c_k is the root of P(no earlier crossing, crossing at k)
  = that amount. `SPENDING` names the two of Lan and DeMets: O'Brien–Fleming-type α(t) = 2 − 2Φ(z_{1−α/2}/√t)
  and Pocock-type α(t) = α ln(1 + (e − 1)t).
- The exact constant designs for equally spaced looks: Pocock (1977), c_k = C; O'Brien and Fleming (1979),
  c_k = C sqrt(K/k); C is the root of P(some crossing) = α.

The crossing probabilities come from the recursive numerical integration of Armitage, McPherson and Rowe (1969)
(Jennison and Turnbull 2000, ch. 19): the sub-density of S_k on the continuation region is carried from look to
look by convolution with the increment's normal density, on a Simpson grid. A look's nominal level is the level a
single test at that look would have with the same critical value: 2(1 − Φ(c_k)) two-sided, 1 − Φ(c_k) one-sided.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

GRID = 801  # Simpson points per continuation interval (odd): crossing probabilities to ~1e-10
TAIL = 10.0  # a one-sided continuation region is cut this many standard deviations below the mean


def obrien_fleming_spending(t: np.ndarray, alpha: float) -> np.ndarray:
    """Lan–DeMets O'Brien–Fleming-type spending 2 − 2Φ(z_{1−α/2}/√t), α the design's whole level (one- or
    two-sided, as gsDesign's sfLDOF and rpact's asOF): next to nothing at early looks, so the last look keeps
    nearly the whole level."""
    z = stats.norm.isf(alpha / 2)
    with np.errstate(divide="ignore"):
        return 2 * stats.norm.sf(z / np.sqrt(np.asarray(t, float)))


def pocock_spending(t: np.ndarray, alpha: float) -> np.ndarray:
    """Lan–DeMets Pocock-type spending α ln(1 + (e − 1)t): nearly even over the looks."""
    return alpha * np.log1p((math.e - 1) * np.asarray(t, float))


SPENDING: dict[str, Callable[..., np.ndarray]] = {"obrien_fleming": obrien_fleming_spending, "pocock": pocock_spending}
NAMES = {"obrien_fleming": "O'Brien–Fleming", "pocock": "Pocock"}


@dataclass(frozen=True)
class Boundary:
    """Each look's information fraction, critical z, nominal level (the level of a single test with that critical
    value) and the cumulative type I error spent by it, for a design of overall level `alpha`."""

    fractions: tuple[float, ...]
    critical: tuple[float, ...]
    nominal: tuple[float, ...]
    spent: tuple[float, ...]
    alpha: float
    sides: int
    design: str


def _simpson_weights(points: int, width: float) -> np.ndarray:
    weights = np.ones(points)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return weights * width / (3 * (points - 1))


class _Recursion:
    """The sub-density of the score S_k = Z_k √t_k on the continuation region of every look so far (its grid and
    Simpson weights), and the probability of crossing at the next look for a candidate critical value."""

    def __init__(self, sides: int):
        self.sides = sides
        self.grid: np.ndarray | None = None  # None before the first look: S_0 = 0 with probability one
        self.density: np.ndarray | None = None
        self.time = 0.0

    def crossing(self, t: float, critical: float) -> float:
        """P(no crossing before, crossing at information t with critical z `critical`)."""
        spread = math.sqrt(t - self.time)
        edge = critical * math.sqrt(t)
        if self.grid is None:
            upper = stats.norm.sf(edge / spread)
            return float(upper * (2 if self.sides == 2 else 1))
        upper = stats.norm.sf((edge - self.grid) / spread)
        lower = stats.norm.cdf((-edge - self.grid) / spread) if self.sides == 2 else 0.0
        return float(np.sum(self.density * (upper + lower)))

    def advance(self, t: float, critical: float) -> None:
        """Carry the sub-density to information t, kept on the continuation region of critical z `critical`."""
        spread = math.sqrt(t - self.time)
        edge = critical * math.sqrt(t)
        low = -edge if self.sides == 2 else -TAIL * math.sqrt(t)
        grid = np.linspace(low, edge, GRID)
        if self.grid is None:
            density = stats.norm.pdf(grid / spread) / spread
        else:
            kernel = stats.norm.pdf((grid[:, None] - self.grid[None, :]) / spread) / spread
            density = kernel @ self.density
        self.grid, self.density, self.time = grid, density * _simpson_weights(GRID, edge - low), t


def _fractions(fractions: Sequence[float]) -> tuple[float, ...]:
    values = tuple(float(t) for t in fractions)
    if not values or any(b <= a for a, b in zip(values, values[1:])) or values[0] <= 0 or abs(values[-1] - 1) > 1e-12:
        raise ValueError(f"information fractions {values}: need 0 < t_1 < … < t_K = 1")
    return values


def _check(alpha: float, sides: int) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha}: need 0 < alpha < 1")
    if sides not in (1, 2):
        raise ValueError(f"sides {sides}: 1 or 2")


def _boundary(
    fractions: tuple[float, ...],
    critical: list[float],
    alpha: float,
    sides: int,
    design: str,
    analyses: tuple[int, ...] | None = None,
) -> Boundary:
    recursion, spent, total = _Recursion(sides), [], 0.0
    for t, c, count in zip(fractions, critical, analyses or (1,) * len(fractions)):
        total += count * recursion.crossing(t, c) if math.isfinite(c) else 0.0  # a union bound over the analyses
        spent.append(total)
        recursion.advance(t, c if math.isfinite(c) else TAIL * 2)
    nominal = tuple(float(sides * stats.norm.sf(c)) for c in critical)
    return Boundary(fractions, tuple(critical), nominal, tuple(spent), alpha, sides, design)


def spending_boundary(
    fractions: Sequence[float],
    alpha: float = 0.05,
    spending: str = "obrien_fleming",
    sides: int = 2,
    analyses: Sequence[int] | None = None,
) -> Boundary:
    """Lan–DeMets boundary of `spending` (a key of SPENDING) at looks `fractions` (0 < t_1 < … < t_K = 1): each
    look's critical z solves P(no earlier crossing, crossing now) = α(t_k) − α(t_{k−1}). A look whose share is
    nothing (two looks at one fraction cannot occur: fractions strictly increase) gets an infinite value.

    `analyses` (default one per look): how many analyses judged each fraction's data (disjoint seed sets of one
    size, or a changed analysis of the same seeds). They split the fraction's share evenly, so each one's critical z
    spends share / analyses (Bonferroni within a fraction, valid whatever their dependence); the continuation region
    carried on is that of one analysis."""
    _check(alpha, sides)
    fractions = _fractions(fractions)
    if spending not in SPENDING:
        raise ValueError(f"spending {spending!r}: one of {', '.join(SPENDING)}")
    analyses = tuple(analyses) if analyses is not None else (1,) * len(fractions)
    if len(analyses) != len(fractions) or any(count < 1 for count in analyses):
        raise ValueError(f"analyses {analyses}: one count of at least 1 per look of {fractions}")
    cumulative = SPENDING[spending](np.array(fractions), alpha)
    recursion, critical, previous = _Recursion(sides), [], 0.0
    for t, total, count in zip(fractions, cumulative, analyses):
        share = float(total - previous) / count
        previous = float(total)
        if share <= 0:
            c = math.inf
        else:
            # crossing(c) falls from (at most 1) towards 0 as c grows; bracket the root
            high = 1.0
            while recursion.crossing(t, high) > share:
                high *= 2
            c = optimize.brentq(lambda c: recursion.crossing(t, c) - share, 0.0, high, xtol=1e-10)
        critical.append(c)
        recursion.advance(t, c if math.isfinite(c) else TAIL * 2)
    return _boundary(fractions, critical, alpha, sides, f"{NAMES[spending]}-type spending (Lan–DeMets)", analyses)


def constant_boundary(looks: int, alpha: float = 0.05, design: str = "pocock", sides: int = 2) -> Boundary:
    """The exact design for `looks` equally spaced looks: Pocock (1977), c_k = C, or O'Brien and Fleming (1979),
    c_k = C sqrt(K/k), with C the root of P(some crossing) = α."""
    _check(alpha, sides)
    if looks < 1:
        raise ValueError(f"looks {looks}: need at least 1")
    if design not in NAMES:
        raise ValueError(f"design {design!r}: one of {', '.join(NAMES)}")
    fractions = tuple(k / looks for k in range(1, looks + 1))
    shape = [1.0 if design == "pocock" else math.sqrt(looks / k) for k in range(1, looks + 1)]

    def excess(constant: float) -> float:
        return _boundary(fractions, [constant * s for s in shape], alpha, sides, design).spent[-1] - alpha

    constant = optimize.brentq(excess, stats.norm.isf(alpha / sides) * 0.5, 10.0, xtol=1e-10)
    return _boundary(fractions, [constant * s for s in shape], alpha, sides, f"{NAMES[design]} (exact constant)")


def crossing_probability(boundary: Boundary) -> float:
    """P(some |Z_k| ≥ c_k) under the null for the boundary's looks: α when the boundary is right."""
    return boundary.spent[-1]
