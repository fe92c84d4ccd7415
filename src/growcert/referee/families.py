"""One claim judged over its parts: the readings of an ambiguous paper (P2's gate readings × variance sources),
the contexts of the regime map, the primary series of P1, the growth experiments of P3 (docs/science.md,
"Verdicts": parts, universal and existential claims).

Each claim's registry entry says which kind it is (`Claim.quantifier`, with its reason beside it), and
`judge_family` judges it so:

- **existential** ("some reading of the gate is faster"): Holm's step-down over the m testable parts, ranked by
  the smallest α at which each is decided (`decision_p_value`), the r-th judged at 1 − (1 − level)/(m − r + 1)
  while every earlier one was decided there. Reproduced when some part is (parts that are contradicted are
  named); contradicted only when every part is tested and contradicted (a part not tested could still hold); not
  tested when none is testable; else unresolved.
- **universal** ("d_align rises with width at every context", "grown matches scratch at both growth steps"):
  reproduced only when every part is reproduced at the full level, an intersection-union test, which needs no
  multiplicity correction (the claim's null, "it fails somewhere", is rejected only when every part's is);
  contradicted when some part is contradicted at its Holm level (a union-intersection test of "it holds
  everywhere", so Holm's step-down over the parts' contradictions keeps the family-wise error); a part that is
  not tested leaves the claim unresolved at best (it cannot hold everywhere where it was not measured); not
  tested when no part is testable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from growcert.referee.claims import CLAIMS, EXISTENTIAL, UNIVERSAL
from growcert.referee.verdicts import CONTRADICTED, DECIDED, NOT_TESTED, REPRODUCED, UNRESOLVED, Judgement, percent


@dataclass(frozen=True)
class Family:
    """A claim judged over its parts: each part's Judgement (at its Holm level where one applies), the part that
    decided the claim's row, the claim's Judgement and the quantifier it was judged under."""

    readings: dict[str, Judgement]
    deciding: str
    claim: Judgement
    quantifier: str = EXISTENTIAL

    def scope(self, unit: str) -> str:
        """The claim row's scope: which parts, how they were combined, and the deciding part."""
        rule = "Holm" if self.quantifier == EXISTENTIAL else "every one must hold (intersection-union)"
        return f"every {_singular(unit)}, {rule}; deciding: {self.deciding}"


def decision_p_value(judge: Callable[[float], Judgement], steps: int = 40, words: tuple[str, ...] = DECIDED) -> float:
    """The smallest α at which `judge(1 − α)` reaches one of `words` (by default either decided word), by bisection on
    log α (the interval narrows as α grows, so the decision is monotone in α); 1.0 when not reached even at α = ½."""
    if judge(0.5).verdict not in words:
        return 1.0
    low, high = math.log(1e-12), math.log(0.5)
    if judge(1 - math.exp(low)).verdict in words:
        return math.exp(low)
    for _ in range(steps):
        middle = (low + high) / 2
        if judge(1 - math.exp(middle)).verdict in words:
            high = middle
        else:
            low = middle
    return math.exp(high)


def judge_family(key: str, judge: Callable[..., dict[str, Judgement]], level: float, unit: str) -> Family:
    """Judge registered claim `key` over its parts (`judge(level, plan=...)` returns each part's Judgement at a
    level) by the claim's quantifier in the registry: `holm_family` for an existential claim, `every_part` for a
    universal one."""
    quantifier = CLAIMS[key].quantifier
    if quantifier == EXISTENTIAL:
        return holm_family(judge, level, unit)
    if quantifier == UNIVERSAL:
        return every_part(judge, level, unit)
    raise ValueError(f"claim {key!r}: quantifier {quantifier!r}, one of {EXISTENTIAL}, {UNIVERSAL}")


def _none_testable(base: dict[str, Judgement], unit: str, quantifier: str) -> Family:
    names = list(base)
    why = f"no testable {_singular(unit)}: " + "; ".join(f"{name}: {base[name].why}" for name in names)
    return Family(dict(base), names[0], replace(base[names[0]], why=why), quantifier)


def _holm(
    judge: Callable[..., dict[str, Judgement]], level: float, testable: list[str], words: tuple[str, ...]
) -> dict[str, tuple[int, float, Judgement, bool]]:
    """Holm's step-down over `testable` for reaching one of `words`: per part (rank, α, its Judgement at 1 − α, whether
    the step-down still rejected at its rank)."""
    p_values = {
        name: decision_p_value(lambda at, name=name: judge(at, plan=False)[name], words=words) for name in testable
    }
    ranked = sorted(testable, key=lambda name: p_values[name])
    m, rejecting, out = len(ranked), True, {}
    for rank, name in enumerate(ranked):
        alpha = (1 - level) / (m - rank)
        rejecting = rejecting and p_values[name] <= alpha
        out[name] = (rank, alpha, judge(1 - alpha, plan=True)[name], rejecting)
    return out


def holm_family(judge: Callable[..., dict[str, Judgement]], level: float, unit: str = "readings") -> Family:
    """An existential claim: Holm's step-down over the m testable parts (module docstring). The claim is reproduced
    when some part is (parts that disagree are named: the paper leaves its reading open, so the claim holds for the
    readings that reproduce it); contradicted when every part is tested and contradicted (an untested part could
    still hold); not tested when none is; else unresolved."""
    base = judge(level, plan=False)
    names = list(base)
    testable = [name for name in names if base[name].verdict != NOT_TESTED]
    if not testable:
        return _none_testable(base, unit, EXISTENTIAL)
    readings = dict(base)  # the untestable ones keep their reason
    ranks = _holm(judge, level, testable, DECIDED)
    m = len(testable)
    for name, (rank, alpha, judged, rejecting) in ranks.items():
        if not rejecting and judged.verdict in DECIDED:  # decided at its level, but Holm stopped at an earlier rank
            judged = replace(
                judged,
                verdict=UNRESOLVED,
                why=judged.why + f"; Holm's step-down stopped before rank {rank + 1} of {m}, so it stays unresolved",
            )
        readings[name] = replace(judged, why=f"Holm rank {rank + 1} of {m}, at {percent(1 - alpha)}: {judged.why}")
    ranked = sorted(testable, key=lambda name: ranks[name][0])
    words = {name: readings[name].verdict for name in testable}
    reproduced = [name for name in ranked if words[name] == REPRODUCED]
    contradicted = [name for name in ranked if words[name] == CONTRADICTED]
    header = f"existential claim, Holm over {m} testable {unit} of {len(names)} at {percent(level)}"
    if reproduced:
        deciding, word = reproduced[0], REPRODUCED
        why = (
            f"{header}: reproduced by {', '.join(reproduced)}"
            + (
                f"; {unit} disagree: contradicted by {', '.join(contradicted)} (the paper leaves its reading open, "
                "so the claim holds for the readings that reproduce it)"
                if contradicted
                else ""
            )
            + f". {deciding}: {readings[deciding].why}"
        )
    elif len(contradicted) == len(names):
        deciding = max(testable, key=lambda name: _oriented(readings[name]))
        word, why = CONTRADICTED, f"{header}: every one is contradicted; closest, {deciding}: {readings[deciding].why}"
    else:
        open_ = [name for name in ranked if words[name] == UNRESOLVED]
        untested = [name for name in names if name not in testable]
        deciding = open_[0] if open_ else max(testable, key=lambda name: _oriented(readings[name]))
        word = UNRESOLVED
        # an untested part could still hold, so a claim about some part is not contradicted while one is untested
        why = (
            f"{header}: none reproduced, {len(open_)} unresolved"
            + (
                f", {len(untested)} not tested ({', '.join(untested)}: any of them could still hold)"
                if untested
                else ""
            )
            + f"; {'first' if open_ else 'closest'}, {deciding}: {readings[deciding].why}"
        )
    return Family(readings, deciding, replace(readings[deciding], verdict=word, why=why), EXISTENTIAL)


def every_part(judge: Callable[..., dict[str, Judgement]], level: float, unit: str) -> Family:
    """A universal claim (module docstring): reproduced only when every part is reproduced at `level` (an
    intersection-union test); contradicted when some part is contradicted at its Holm level; unresolved otherwise;
    not tested when no part is testable."""
    base = judge(level, plan=True)
    names = list(base)
    testable = [name for name in names if base[name].verdict != NOT_TESTED]
    if not testable:
        return _none_testable(base, unit, UNIVERSAL)
    readings = dict(base)
    ranks = _holm(judge, level, testable, (CONTRADICTED,))
    m = len(testable)
    for name in testable:
        if base[name].verdict == REPRODUCED:
            readings[name] = replace(
                base[name], why=f"at {percent(level)} (intersection-union: no correction): {base[name].why}"
            )
            continue
        rank, alpha, judged, rejecting = ranks[name]
        if judged.verdict == CONTRADICTED and rejecting:
            readings[name] = replace(
                judged, why=f"Holm rank {rank + 1} of {m} for a contradiction, at {percent(1 - alpha)}: {judged.why}"
            )
        else:
            readings[name] = replace(
                base[name],
                verdict=UNRESOLVED if base[name].verdict in DECIDED else base[name].verdict,
                why=base[name].why
                + (
                    f"; contradicted at {percent(level)} but not at its Holm "
                    f"level {percent(1 - alpha)} (rank {rank + 1} of {m}), so it "
                    "stays unresolved"
                    if base[name].verdict == CONTRADICTED
                    else ""
                ),
            )
    words = {name: readings[name].verdict for name in names}
    header = (
        f"universal claim over {len(names)} {unit} ({m} testable) at {percent(level)}: reproduced only where "
        "every one is (intersection-union), contradicted where any one is at its Holm level"
    )
    contradicted = sorted((name for name in testable if words[name] == CONTRADICTED), key=lambda name: ranks[name][0])
    if contradicted:
        deciding, word = contradicted[0], CONTRADICTED
        why = f"{header}: contradicted by {', '.join(contradicted)}. {deciding}: {readings[deciding].why}"
    elif all(words[name] == REPRODUCED for name in names):
        deciding = names[0]
        word, why = REPRODUCED, f"{header}: every one is reproduced. {deciding}: {readings[deciding].why}"
    else:
        short = [name for name in names if words[name] != REPRODUCED]
        deciding = next((name for name in short if words[name] == UNRESOLVED), short[0])
        word = UNRESOLVED
        why = (
            f"{header}: {len(short)} of {len(names)} not reproduced ({', '.join(f'{n}: {words[n]}' for n in short)}); "
            f"first, {deciding}: {readings[deciding].why}"
        )
    return Family(readings, deciding, replace(readings[deciding], verdict=word, why=why), UNIVERSAL)


def _singular(unit: str) -> str:
    if unit.endswith("ies") and not unit.endswith("series"):
        return unit[:-3] + "y"  # families: every family
    return unit[:-1] if unit.endswith("s") and not unit.endswith("series") else unit


def _oriented(judgement: Judgement) -> float:
    return judgement.estimate if math.isfinite(judgement.estimate) else -math.inf
