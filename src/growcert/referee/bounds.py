"""A claimed bound judged in every cell (P1's p̂ ≤ B_exact; docs/science.md, "Verdicts"): each cell with the errors
of both sides, the claim universal over the non-vacuous cells (an intersection-union test for "holds", Holm's
step-down for "fails somewhere"), and that claim's effect. The verdict words and `Judgement` are
growcert.referee.verdicts'."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from growcert.referee.effect import Effect
from growcert.referee.verdicts import (
    CONTRADICTED,
    NEITHER,
    REPRODUCED,
    UNRESOLVED,
    VACUOUS_BOUND,
    Judgement,
    not_tested,
    percent,
)

# The range of α searched for a cell's p-value, and the bisection steps on log α that find it.
SMALLEST_ALPHA, LARGEST_ALPHA, BISECTION_STEPS = 1e-12, 1 - 1e-9, 60
Interval = Callable[[np.ndarray], "tuple[np.ndarray, np.ndarray]"]


def certificate_effect(pools: str) -> Effect:
    """The effect of a certificate claim (p̂ ≤ B_exact, iid or train → test): `pools` says where p's interval comes
    from."""
    return Effect(
        "fraction of non-vacuous cells where p ≤ B_exact is shown beyond both errors",
        1.0,
        interval=f"per cell, p's interval from {pools} against B_exact's jackknife interval; no interval over cells",
        sesoi=1.0,
        sesoi_reason="a bound holds in every determined cell",
    )


def rejection_p_values(rejects: Callable[[np.ndarray], np.ndarray], cells: int) -> np.ndarray:
    """Per cell, the smallest α at which `rejects(levels)` holds at level 1 − α, by bisection on log α (a test
    whose intervals narrow as α grows rejects on [p, 1)); 1 where it does not even at LARGEST_ALPHA."""
    low, high = np.full(cells, math.log(SMALLEST_ALPHA)), np.full(cells, math.log(LARGEST_ALPHA))
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        hit = rejects(1.0 - np.exp(middle))
        high, low = np.where(hit, middle, high), np.where(hit, low, middle)
    p_values = np.exp(high)
    p_values[~rejects(np.full(cells, 1.0 - LARGEST_ALPHA))] = 1.0
    p_values[rejects(np.full(cells, 1.0 - SMALLEST_ALPHA))] = SMALLEST_ALPHA
    return p_values


def judge_bound(
    p_hat,
    bound,
    p_interval: Interval,
    bound_interval: Interval,
    level: float,
    seeds: int,
    vacuous: float = VACUOUS_BOUND,
) -> Judgement:
    """A claimed upper bound p ≤ B (P1: the misalignment probability p against Cantelli's B_exact) in every cell,
    judged with the errors of both sides. `p_hat` and `bound` are the cells' point estimates; `p_interval(levels)`
    and `bound_interval(levels)` give every cell's two-sided interval for the population p and B at per-cell levels
    (arrays as long as the cells).

    Cells: a cell whose B is vacuous (≥ `vacuous` at its estimate: a bound of ½ or more says nothing, and a coin's
    sign would meet it) is not tested; the m others are. No cell, or no non-vacuous one: not tested.

    Per tested cell, at α = 1 − `level`: p ≤ B is shown when the upper end of p's interval at level 1 − α is at
    or below the lower end of B's at level 1 − α (each end one-sided at 1 − α/2, so by Bonferroni a cell with
    p > B passes with probability ≤ α, whatever the dependence of the two estimates); p > B is shown at level
    1 − a when the lower end of p's interval at 1 − a lies above the upper end of B's at 1 − a. A cell's p-value
    for p > B is the smallest such a.

    The claim is universal (the bound holds in every cell), so:
    - reproduced when p ≤ B is shown in every tested cell, each at α: an intersection-union test (Berger 1982)
      has size ≤ α with no multiplicity correction, since it rejects "some cell has p > B" only when every
      cell's own test does;
    - contradicted when p > B is shown in some cell with Holm's step-down at family-wise α over the m tested
      cells (the r-th smallest p-value against α/(m − r + 1); some cell is contradicted exactly when the
      smallest p-value is at most α/m), so that "the bound fails somewhere" is wrong with probability ≤ α;
    - unresolved otherwise (some cell's intervals overlap).
    The estimate is the fraction of tested cells where p ≤ B is shown; the row has no interval."""
    p_hat, bound = np.asarray(p_hat, float), np.asarray(bound, float)
    cells = len(p_hat)
    if cells == 0:
        return not_tested("no determined cell (no detectable mean signal)", seeds, level)
    tested = bound < vacuous
    m = int(tested.sum())
    if m == 0:
        return not_tested(
            f"B_exact ≥ {vacuous} (vacuous) in all {cells} cells: the bound cannot fail here", seeds, level
        )
    alpha = 1.0 - level
    at_level = np.full(cells, level)
    (p_low, p_high), (b_low, b_high) = p_interval(at_level), bound_interval(at_level)
    below = tested & (p_high <= b_low)

    def above(levels: np.ndarray) -> np.ndarray:
        (low, _), (_, high) = p_interval(levels), bound_interval(levels)
        return low > high

    ranked = np.sort(rejection_p_values(above, cells)[tested])
    passed = ranked <= alpha / (m - np.arange(m))  # Holm: the r-th smallest against α/(m − r + 1)
    contradicted = m if passed.all() else int(np.argmin(passed))
    shown = int(below.sum())
    vacuous_cells = cells - m
    worst = int(np.flatnonzero(tested)[np.argmax((p_high - b_low)[tested])])
    closest = (
        f"closest cell: p̂ {p_hat[worst]:.3g} [{p_low[worst]:.3g}, {p_high[worst]:.3g}] against B_exact "
        f"{bound[worst]:.3g} [{b_low[worst]:.3g}, {b_high[worst]:.3g}]"
    )
    skipped = (
        f"; {vacuous_cells} of {cells} cells have a vacuous B_exact ≥ {vacuous} and are not tested"
        if vacuous_cells
        else ""
    )
    word, why = _bound_word(contradicted, shown, m, level)
    return Judgement(shown / m, math.nan, math.nan, level, seeds, word, f"{why}; {closest}{skipped}", direction=NEITHER)


def _bound_word(contradicted: int, shown: int, m: int, level: float) -> tuple[str, str]:
    """`judge_bound`'s word and reason from the count of the m tested cells where p > B is shown at its Holm level
    (`contradicted`) and where p ≤ B is shown (`shown`)."""
    alpha = 1.0 - level
    errors = (
        f"per cell p̂'s interval for the population p (the pool's finite size and the resampling, "
        f"stats.intervals.misalignment_interval) against B_exact's jackknife interval, each end one-sided at "
        f"{percent(1 - alpha / 2)}"
    )
    if contradicted:
        word = CONTRADICTED
        why = (
            f"p > B_exact beyond both errors in {contradicted} of {m} non-vacuous cells (Holm over {m} cells at "
            f"{percent(level)} family-wise; {errors})"
        )
    elif shown == m:
        word = REPRODUCED
        why = (
            f"p ≤ B_exact shown in all {m} non-vacuous cells, each at {percent(level)} (an intersection-union "
            f"test: no multiplicity correction; {errors})"
        )
    else:
        word = UNRESOLVED
        why = (
            f"p ≤ B_exact shown in {shown} of {m} non-vacuous cells and p > B_exact in none at its Holm level "
            f"({errors}): the others' intervals overlap; larger pools (for p̂) or more examples (for B_exact's "
            "moments) would resolve them"
        )
    return word, why
