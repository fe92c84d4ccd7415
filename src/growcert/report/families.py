"""One claim judged over its parts: the readings of an ambiguous paper (P2's gate readings × variance sources),
the contexts of the regime map, the growth experiments of P3 (docs/science.md, "Verdicts": parts, Holm and
disagreement).

`holm_family` ranks the testable parts by the smallest α at which each is decided (`decision_p_value`), judges
the r-th of m at 1 − (1 − level)/(m − r + 1) while every earlier one was decided (Holm's step-down), shows each
part's word, and states the claim's word by one rule: any part reproduced → reproduced, naming the parts that
are contradicted under a stated rule (`disagree`); every testable part contradicted → contradicted; none
testable → not tested; else unresolved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from growcert.report.verdicts import CONTRADICTED, DECIDED, NOT_TESTED, REPRODUCED, UNRESOLVED, Judgement, percent


@dataclass(frozen=True)
class Family:
    """A claim judged over readings (or contexts): each reading's Judgement at its Holm level, the reading that
    decided the claim's row, and the claim's Judgement."""

    readings: dict[str, Judgement]
    deciding: str
    claim: Judgement


def decision_p_value(judge: Callable[[float], Judgement], steps: int = 40) -> float:
    """The smallest α at which `judge(1 − α)` is decided (reproduced or contradicted), by bisection on log α (the
    interval narrows as α grows, so the decision is monotone in α); 1.0 when not decided even at α = ½."""
    if judge(0.5).verdict not in DECIDED:
        return 1.0
    low, high = math.log(1e-12), math.log(0.5)
    if judge(1 - math.exp(low)).verdict in DECIDED:
        return math.exp(low)
    for _ in range(steps):
        middle = (low + high) / 2
        if judge(1 - math.exp(middle)).verdict in DECIDED:
            high = middle
        else:
            low = middle
    return math.exp(high)


DISAGREE_READINGS = "the paper leaves its reading open, so the claim holds for the readings that reproduce it"
DISAGREE_SCOPES = "the claim holds where it is reproduced and fails where it is contradicted"


def holm_family(judge: Callable[..., dict[str, Judgement]], level: float, unit: str = "readings",
                disagree: str = DISAGREE_READINGS) -> Family:
    """Judge every reading (`judge(level, plan=...)` returns each reading's Judgement at a level) with Holm's
    step-down over the m testable ones: ranked by the smallest α at which each is decided, the r-th is judged at
    1 − (1 − level)/(m − r + 1) while every earlier one was decided there; once one is not, it and every later one
    stay unresolved. The claim: reproduced when some reading is (readings that disagree are named: the paper
    leaves its reading open, so the claim holds for the readings that reproduce it); contradicted when every
    testable reading is; not tested when none is testable; else unresolved. `disagree` states the rule when some
    are reproduced and others contradicted (for readings of one algorithm, or for contexts or experiments)."""
    base = judge(level, plan=False)
    names = list(base)
    testable = [name for name in names if base[name].verdict != NOT_TESTED]
    readings = dict(base)  # the untestable ones keep their reason
    if not testable:
        first = names[0]
        why = f"no testable {unit[:-1] if unit.endswith('s') and not unit.endswith('series') else unit}: " + "; ".join(
            f"{name}: {base[name].why}" for name in names)
        return Family({name: base[name] for name in names}, first, replace(base[first], why=why))
    p_values = {name: decision_p_value(lambda at, name=name: judge(at, plan=False)[name]) for name in testable}
    ranked = sorted(testable, key=lambda name: p_values[name])
    m, rejecting = len(ranked), True
    for rank, name in enumerate(ranked):
        alpha = (1 - level) / (m - rank)
        rejecting = rejecting and p_values[name] <= alpha
        judged = judge(1 - alpha, plan=True)[name]
        if not rejecting and judged.verdict in DECIDED:  # decided at its level, but Holm stopped at an earlier rank
            judged = replace(judged, verdict=UNRESOLVED,
                             why=judged.why + f"; Holm's step-down stopped before rank {rank + 1} of {m}, so it stays "
                                              "unresolved")
        readings[name] = replace(judged, why=f"Holm rank {rank + 1} of {m}, at {percent(1 - alpha)}: {judged.why}")
    words = {name: readings[name].verdict for name in testable}
    reproduced = [name for name in ranked if words[name] == REPRODUCED]
    contradicted = [name for name in ranked if words[name] == CONTRADICTED]
    header = f"Holm over {m} testable {unit} of {len(names)} at {percent(level)}"
    if reproduced:
        deciding, word = reproduced[0], REPRODUCED
        why = (f"{header}: reproduced by {', '.join(reproduced)}"
               + (f"; {unit} disagree: contradicted by {', '.join(contradicted)} (rule: {disagree})"
                  if contradicted else "") + f". {deciding}: {readings[deciding].why}")
    elif len(contradicted) == m:
        deciding = max(testable, key=lambda name: _oriented(readings[name]))
        word, why = CONTRADICTED, f"{header}: every testable one is contradicted; closest, {deciding}: {readings[deciding].why}"
    else:
        open_ = [name for name in ranked if words[name] == UNRESOLVED]
        deciding, word = open_[0], UNRESOLVED
        why = f"{header}: none reproduced, {len(open_)} unresolved; first, {deciding}: {readings[deciding].why}"
    return Family(readings, deciding, replace(readings[deciding], verdict=word, why=why))


def _oriented(judgement: Judgement) -> float:
    return judgement.estimate if math.isfinite(judgement.estimate) else -math.inf
