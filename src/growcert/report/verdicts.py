"""The four verdict words and the one rule that assigns them (docs/science.md, "Verdicts").

Every claim declares in the claims registry the `Effect` it measures: its name, the paper's value of
it, the null (no effect), the scale it is judged on and how its interval is formed. A stage measures
the effect once per seed and calls one of the judges here; the `Judgement` it gets back (estimate,
interval, level, seeds, word, why) is what the claim row shows.

The words, for an interval [low, high] of the effect at the stated level:

- `reproduced`: the interval excludes the null on the paper's side, and its upper end reaches at least
  half the paper's effect (SIZE_FRACTION, measured from the null on the effect's scale: for a ratio,
  on the log scale, so half of 4.9× is 2.2×);
- `contradicted`: the interval lies wholly below half the paper's effect (which includes the null
  side): the paper's size is excluded;
- `unresolved`: neither: the interval holds both the null and half the paper's effect. The row says
  how many seeds would resolve it at the observed per-seed spread (`seeds_to_resolve`), or, for an
  order-statistic interval over fewer seeds than it needs to have any finite end
  (`median_interval_seeds`: 6 at 95 %), that count;
- `not tested at this scale`: no comparison can be made: fewer than two seeds, a baseline censored at
  the cap in most seeds, no detectable mean signal, a regime the run does not reach.

A claim with no paper size (a direction only, `Effect.paper` None) is reproduced when the interval
excludes the null on the paper's side and contradicted when it excludes it on the other side. A
claim of equivalence ("match or beat", `Effect.margin`) is reproduced when the interval's upper end is
at most the margin, contradicted when its lower end is above it. A two-sided equivalence ("within 10 %
of each other", `Effect.margin_low` and `Effect.margin`) is reproduced when the interval lies inside
[margin_low, margin], contradicted when it lies wholly outside it, unresolved when it straddles an end.

Never reproduced: a difference smaller than the measurement's resolution (one evaluation interval of
steps, `resolution`) is at most unresolved, whatever its interval.

Several variants of one claim (the P2 gate readings × variance sources): each variant's row is judged
at the claim's level, and the claim's own row (`family_judgement`) at the Bonferroni level
1 − (1 − level)/m over its m variants, so that one lucky variant of six cannot turn the claim green.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from growcert.stats.seeds import (median_interval, median_interval_seeds, paired_log_ratios, seeds_to_resolve,
                                  t_interval)

REPRODUCED, CONTRADICTED, UNRESOLVED, NOT_TESTED = "reproduced", "contradicted", "unresolved", "not tested at this scale"
WORDS = (REPRODUCED, CONTRADICTED, UNRESOLVED, NOT_TESTED)
SIZE_FRACTION = 0.5  # "consistent with the paper's size": reaches at least half of its effect
LEVEL = 0.95  # the confidence level of a verdict's interval, where the stage has no level setting of its own
# A misalignment bound of at least ½ says nothing: a coin's sign would meet it.
VACUOUS_BOUND = 0.5


@dataclass(frozen=True)
class Effect:
    """What a claim measures: `name`, the paper's value of it (`paper`; None for a direction only), the
    `null`, the `scale` it is judged on ("linear" or "log"), the paper's side of the null (`direction`,
    +1 or −1, used when `paper` is None), an equivalence `margin` (the claim is effect ≤ margin; with
    `margin_low` too, margin_low ≤ effect ≤ margin), and how the interval over seeds is formed
    (`interval`, shown in the row)."""

    name: str
    paper: float | None
    null: float = 0.0
    scale: str = "linear"
    direction: int = 1
    margin: float | None = None
    margin_low: float | None = None
    interval: str = "Student t over seeds"

    def transform(self, value: float) -> float:
        if self.scale == "log":
            return math.log(value) if value > 0 else (-math.inf if value == 0 else math.nan)
        return value

    def untransform(self, value: float) -> float:
        return math.exp(value) if self.scale == "log" else value

    def side(self) -> int:
        """+1 when the paper's effect lies above the null on the judged scale, −1 below."""
        if self.paper is None:
            return self.direction
        return 1 if self.transform(self.paper) >= self.transform(self.null) else -1


@dataclass(frozen=True)
class Judgement:
    """An effect's estimate and interval over seeds, its verdict word and the reason in one sentence."""

    estimate: float
    low: float
    high: float
    level: float
    seeds: int
    verdict: str
    why: str
    seeds_needed: int | None = None


def not_tested(why: str, seeds: int = 0, level: float = 0.95, estimate: float = math.nan) -> Judgement:
    """A comparison that cannot be made here (`why` says which input is missing)."""
    return Judgement(estimate, math.nan, math.nan, level, seeds, NOT_TESTED, why)


def judge_interval(effect: Effect, estimate: float, low: float, high: float, level: float, seeds: int,
                   spread: float = math.nan, below_resolution: str = "", bounded_from: int | None = None) -> Judgement:
    """The word for an interval given on the effect's own scale; `spread` is the per-seed standard
    deviation on the judged scale (for the seeds an unresolved verdict needs), `below_resolution` a
    reason why the difference is too small to resolve (never reproduced then), `bounded_from` the seed
    count below which the interval's form cannot be bounded at `level` (an unresolved verdict then
    needs at least that many, whatever the spread)."""
    if seeds < 2:
        return not_tested(f"{seeds} seed(s): an interval over seeds needs at least 2", seeds, level, estimate)
    if math.isnan(low) or math.isnan(high):
        return not_tested("no interval could be formed (an undetermined estimate in some seed)", seeds, level,
                          estimate)
    lo, hi, mid = (effect.transform(value) for value in (low, high, estimate))
    if effect.margin is not None:
        return _equivalence(effect, estimate, low, high, level, seeds, spread, lo, hi, mid)
    side, null = effect.side(), effect.transform(effect.null)
    if effect.paper is None:  # a direction only
        near, far = sorted((side * (lo - null), side * (hi - null)))
        word = REPRODUCED if near > 0 else CONTRADICTED if far < 0 else UNRESOLVED
        distance = abs(mid - null)
        size = "the null"
    else:
        unit = abs(effect.transform(effect.paper) - null)
        near, far = sorted((side * (lo - null) / unit, side * (hi - null) / unit))
        scaled = side * (mid - null) / unit
        word = CONTRADICTED if far < SIZE_FRACTION else REPRODUCED if near > 0 else UNRESOLVED
        # to resolve: exclude the null (estimate at or above half the paper's size) or half the size (below it)
        distance = (scaled if scaled >= SIZE_FRACTION else SIZE_FRACTION - scaled) * unit
        size = f"the null and half the paper's effect ({effect.untransform(null + side * SIZE_FRACTION * unit):.3g})"
    if word == REPRODUCED and below_resolution:
        word = UNRESOLVED
    needed, more = None, ""
    if word == UNRESOLVED and bounded_from is not None and seeds < bounded_from:
        needed = bounded_from
        more = (f"this interval has no finite end at {percent(level)} below {bounded_from} seeds, whatever their "
                f"values: at least {bounded_from} are needed")
    elif word == UNRESOLVED:
        needed = seeds_to_resolve(spread, distance, level, seeds)
    return Judgement(estimate, low, high, level, seeds, word,
                     _why(word, effect, level, seeds, needed, size, below_resolution, more), needed)


def _equivalence(effect, estimate, low, high, level, seeds, spread, lo, hi, mid) -> Judgement:
    margin = effect.transform(effect.margin)
    if effect.margin_low is None:
        word = REPRODUCED if hi <= margin else CONTRADICTED if lo > margin else UNRESOLVED
        distance, size = abs(margin - mid), f"the margin {effect.margin:.3g}"
    else:
        floor = effect.transform(effect.margin_low)
        inside = floor <= lo and hi <= margin
        word = REPRODUCED if inside else CONTRADICTED if lo > margin or hi < floor else UNRESOLVED
        # to resolve: a half-width below the estimate's distance to the nearer end of the region
        distance = min(abs(margin - mid), abs(mid - floor))
        size = f"an end of the region [{effect.margin_low:.3g}, {effect.margin:.3g}]"
    needed = seeds_to_resolve(spread, distance, level, seeds) if word == UNRESOLVED else None
    return Judgement(estimate, low, high, level, seeds, word, _why(word, effect, level, seeds, needed, size, ""),
                     needed)


def equivalence_region(effect: Effect) -> str:
    """The claimed region of an equivalence effect, as shown in a row: "≤ 0.01" or "within [0.9, 1.11]"."""
    if effect.margin_low is None:
        return f"≤ {effect.margin:g}"
    return f"within [{effect.margin_low:.3g}, {effect.margin:.3g}]"


def _why(word: str, effect: Effect, level: float, seeds: int, needed: int | None, size: str, resolution: str,
         more: str = "") -> str:
    interval = f"{percent(level)} interval ({effect.interval}, {seeds} seeds)"
    if word == REPRODUCED and effect.margin is not None:  # equivalence: the null is inside the claim, not against it
        return (f"the {interval} stays within the margin {effect.margin:.3g}" if effect.margin_low is None
                else f"the {interval} lies {equivalence_region(effect)}")
    if word == REPRODUCED:
        return f"the {interval} excludes the null on the paper's side" + (
            " and reaches at least half the paper's effect" if effect.paper is not None else "")
    if word == CONTRADICTED:
        return (f"the {interval} lies wholly outside {equivalence_region(effect)}" if effect.margin_low is not None
                else f"the {interval} lies wholly above the margin {effect.margin:.3g}" if effect.margin is not None
                else f"the {interval} excludes the paper's effect (wholly below half of it)"
                if effect.paper is not None else f"the {interval} excludes the null on the other side")
    reason = resolution or f"the {interval} holds {size}"
    more = more or (f"about {needed} seeds would resolve it at the observed spread" if needed is not None
                    else "the observed spread does not say how many seeds would resolve it")
    return f"{reason}; {more}"


def judge_samples(effect: Effect, samples: Sequence[float], level: float) -> Judgement:
    """One value of the effect per seed (e.g. a width slope, a paired difference): the t interval on
    the judged scale."""
    values = np.asarray([effect.transform(float(value)) for value in samples], float)
    finite = values[np.isfinite(values)]
    if len(finite) < len(values):
        return not_tested(f"{len(values) - len(finite)} of {len(values)} seeds have no determined value",
                          len(values), level)
    mean, se, lo, hi = t_interval(finite, level)
    spread = se * math.sqrt(len(finite)) if math.isfinite(se) else math.nan
    return judge_interval(effect, *(effect.untransform(v) for v in (mean, lo, hi)), level, len(finite), spread)


def judge_steps(effect: Effect, baseline: Sequence[float], variant: Sequence[float], level: float, cap: int,
                eval_every: int, baseline_name: str = "the baseline") -> Judgement:
    """Steps to a target, paired by seed, the effect being baseline steps / variant steps (a speed-up).

    NaN (or None, inf) steps are censored: the run did not reach the target by `cap`. A baseline
    censored in more than half its seeds leaves nothing to compare against: not tested at this scale.
    With every seed uncensored the interval is t on the per-seed log ratios; with any censored seed, the
    order-statistic interval for their median (censored seeds enter as ±inf, never as the cap), which has
    no finite end below `median_interval_seeds(level)` seeds (6 at 95 %): an unresolved verdict then says
    so and asks for at least that many. A
    difference of median steps smaller than `eval_every` (the steps are only known to that resolution)
    is never reproduced.
    """
    baseline = [math.nan if value is None else float(value) for value in baseline]
    variant = [math.nan if value is None else float(value) for value in variant]
    seeds = len(baseline)
    censored = sum(not math.isfinite(value) for value in baseline)
    if censored * 2 > seeds:
        return not_tested(f"{baseline_name} reached the target in {seeds - censored} of {seeds} seeds by the "
                          f"{cap:,}-step cap", seeds, level)
    ratios = paired_log_ratios(baseline, variant)
    known = ratios[~np.isnan(ratios)]
    if len(known) < 2:
        return not_tested(f"{len(known)} seed(s) where either run reached the target: an interval needs 2",
                          len(known), level)
    finite = known[np.isfinite(known)]
    spread = float(finite.std(ddof=1)) if len(finite) >= 2 else math.nan
    bounded_from = None
    if len(finite) == len(known):
        mid, _, lo, hi = t_interval(finite, level)
        stated = effect
    else:
        mid, lo, hi = median_interval(known, level)
        bounded_from = median_interval_seeds(level)
        stated = replace(effect, interval=f"order-statistic interval for the median over seeds, "
                                          f"{len(known) - len(finite)} censored at the {cap:,}-step cap")
    b_median, v_median = (float(np.median(np.where(np.isfinite(x), x, math.inf))) for x in
                          (np.asarray(baseline), np.asarray(variant)))
    below = ""
    if math.isfinite(b_median) and math.isfinite(v_median) and abs(b_median - v_median) < eval_every:
        below = (f"the median steps differ by {abs(b_median - v_median):,.0f}, less than one evaluation interval "
                 f"({eval_every:,} steps)")
    with np.errstate(over="ignore"):
        values = [math.exp(value) for value in (mid, lo, hi)]
    return judge_interval(stated, *values, level, len(known), spread, below, bounded_from)


def bonferroni_level(level: float, count: int) -> float:
    """The per-variant level at which m = `count` intervals hold together with probability `level`."""
    return 1.0 - (1.0 - level) / max(count, 1)


def percent(level: float) -> str:
    """A confidence level as a percentage with the digits it needs (95 %, 99.79 %)."""
    return f"{level * 100:.4g} %"


def family_judgement(judge: Callable[[float], dict[str, Judgement]], level: float, variants: int,
                     unit: str = "variants") -> tuple[str, Judgement]:
    """(variant, Judgement) for a claim over `variants` variants, `judge(level)` judging every one of them at
    a level: the claim is judged at the Bonferroni level over them. Reproduced when some variant is, then;
    contradicted when every testable variant is; not tested when none can be; else unresolved. The row
    reports the variant that decided it (a reproduced one, else the one with the largest estimate)."""
    corrected = judge(bonferroni_level(level, variants))
    words = [judgement.verdict for judgement in corrected.values()]
    testable = {name: judgement for name, judgement in corrected.items() if judgement.verdict != NOT_TESTED}
    if not testable:
        name = next(iter(corrected))
        return name, corrected[name]
    if REPRODUCED in words:
        name = next(name for name, judgement in corrected.items() if judgement.verdict == REPRODUCED)
        word = REPRODUCED
    else:
        name = max(testable, key=lambda key: testable[key].estimate if math.isfinite(testable[key].estimate)
                   else -math.inf)
        word = CONTRADICTED if all(j.verdict == CONTRADICTED for j in testable.values()) else UNRESOLVED
    chosen = corrected[name]
    why = (f"Bonferroni over {len(corrected)} {unit} ({len(testable)} testable), each at "
           f"{percent(chosen.level)}: " + (f"every testable one is contradicted" if word == CONTRADICTED else
                                           f"{name}: {chosen.why}"))
    return name, replace(chosen, verdict=word, why=why)


def judge_slopes(effect: Effect, trend, level: float) -> list[Judgement]:
    """One Judgement per row of a `growcert.stats.regime.width_trend` table (its slope, slope_lo/hi at
    `level`, slope_se and seeds)."""
    return [judge_interval(effect, row.slope, row.slope_lo, row.slope_hi, level, int(row.seeds),
                           row.slope_se * math.sqrt(row.seeds) if row.seeds >= 2 else math.nan)
            for row in trend.itertuples()]


def judge_bound(p_hat, p_low, bound, level: float, seeds: int, vacuous: float = VACUOUS_BOUND) -> Judgement:
    """A claimed upper bound (p ≤ B, e.g. p̂ ≤ B_exact) over cells: reproduced when p̂ ≤ B at the point
    estimate in every cell and at least one B is non-vacuous (< `vacuous`); contradicted when some cell's
    interval for p (its lower end `p_low`) lies wholly above its B; not tested when every B is vacuous (a
    bound near 1 cannot fail) or there is no cell; unresolved otherwise. The estimate is the fraction
    of cells with p̂ ≤ B."""
    p_hat, p_low, bound = (np.asarray(values, float) for values in (p_hat, p_low, bound))
    cells = len(p_hat)
    if cells == 0:
        return not_tested("no determined cell (no detectable mean signal)", seeds, level)
    below = float(np.mean(p_hat <= bound))
    informative = int(np.sum(bound < vacuous))
    if informative == 0:
        return not_tested(f"B_exact ≥ {vacuous} (vacuous) in all {cells} cells: the bound cannot fail here", seeds,
                          level, below)
    above = int(np.sum(p_low > bound))
    if above:
        word, why = CONTRADICTED, f"in {above} of {cells} cells p̂'s {percent(level)} Wilson interval lies wholly above B_exact"
    elif below == 1.0:
        word, why = REPRODUCED, f"p̂ ≤ B_exact in all {cells} cells, {informative} of them non-vacuous (B_exact < {vacuous})"
    else:
        word, why = UNRESOLVED, (f"p̂ > B_exact at the point estimate in {int(round((1 - below) * cells))} of {cells} "
                                 f"cells, each within its Wilson interval; more draws per cell would resolve it")
    return Judgement(below, math.nan, math.nan, level, seeds, word, why)
