"""The referee's rule: the four verdict words and how an interval over seeds earns one (docs/science.md,
"Verdicts").

Every claim declares in the claims registry the `Effect` it measures (`growcert.referee.effect`): its name, the
paper's value, the null (no effect), the scale it is judged on, how its interval over seeds is formed, and its
smallest effect of interest (SESOI): half the paper's effect on the judged scale (for a ratio, on the log scale,
so half of 4.9× is 2.21×) unless the registry states another with its reason (a direction-only claim must). A
stage measures the effect once per seed and calls one of the judges here; the `Judgement` it gets back
(estimate, interval, level, seeds, word, direction, seeds needed, why) is what the claim row shows.

The words, for an interval [low, high] at the stated level, oriented so that the paper's side is up:

- `reproduced`: the interval's near end is at or beyond the SESOI: with confidence, the effect is at least
  the size that matters;
- `contradicted`: the interval's far end falls short of the SESOI (which includes the null side): an effect
  of the size that matters is excluded;
- `unresolved`: the interval straddles the SESOI;
- `not tested at this scale`: the effect cannot be estimated: fewer than two seeds, no seed where a run
  reached its target, no detectable signal, a vacuous bound everywhere, a missing control.

Every row carries two design figures (`Design`), whatever its word: the seeds that would **reproduce** the
claim with 80 % power if the true effect is the paper's, and the seeds that would **contradict** it with 80 %
power if the true effect is nil, both at the upper 80 % confidence limit of the observed between-seed spread
(so neither is optimistic), by the closed form of the claim's interval (noncentral t for a mean, a binomial
count for an order-statistic median). They never use the observed effect, which swings with noise. A figure is
empty where it has no meaning (no paper value, a null inside an equivalence region) or the spread is unknown.

A separate `direction` says whether the interval excludes the null on the paper's side, on the other side,
or neither: "contradicted" with the paper's direction is a smaller effect than claimed. It is empty where the
null has no paper's side: an equivalence claim whose null lies inside its claimed region (an exponent's
deviation of 0, a ratio of 1 on a plateau).

Each claim registers its `estimand`, the mean or the median over seeds, and keeps it whatever the data.

An equivalence claim ("within 10 %", "closes half the gap", `Effect.margin`) has its margin as its SESOI:
reproduced when the interval lies inside the claimed region, contradicted when it lies wholly outside it.

Steps to a target are interval-censored (`judge_steps`): a run that reached it at step s took between
s − eval_every and s steps; a censored run more than the cap. Each seed's ratio is then an interval, and
the interval over seeds takes its lower end from the seeds' lower bounds and its upper end from their upper
bounds, so a difference within one evaluation interval never reproduces, and a censored baseline bounds
the ratio from below. A seed where both runs are censored bounds its ratio by (0, ∞): it stays in and widens
the interval; no seed is ever left out because of its outcome.

A claim's parts (the P2 gate readings × variance sources, the contexts of the regime map, P3's growth
experiments) are judged together by `growcert.referee.families.judge_parts`: existentially (some reading) with
Holm's step-down, universally (every context, every growth step) as an intersection-union test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from growcert.referee.effect import Effect, boundaries, equivalence_region
from growcert.stats.seeds import (
    POWER,
    SPREAD_CONFIDENCE,
    bounds_interval,
    median_interval_seeds,
    order_power,
    seeds_for_power,
    spread_upper,
    step_bounds,
    t_interval,
    t_power,
    t_quantile,
)

REPRODUCED, CONTRADICTED, UNRESOLVED, NOT_TESTED = (
    "reproduced",
    "contradicted",
    "unresolved",
    "not tested at this scale",
)
WORDS = (REPRODUCED, CONTRADICTED, UNRESOLVED, NOT_TESTED)
DECIDED = (REPRODUCED, CONTRADICTED)
AS_PAPER, AGAINST_PAPER, NEITHER = "as the paper's", "against the paper's", "neither"
LEVEL = 0.95  # the confidence level of a verdict's interval, where the stage has no level setting of its own
# A misalignment bound of at least ½ says nothing: a coin's sign would meet it.
VACUOUS_BOUND = 0.5
SIMULATED_DRAWS = 2_000  # simulated replicates per seed count for an equivalence region's design figure
MAX_SCANNED_SEEDS = 1_000  # figures found by simulation or by a scan stop here ("more than 1,000")


@dataclass(frozen=True)
class Design:
    """The seeds that would decide a claim with 80 % power (`POWER`), at the between-seed `spread` (on the judged
    scale, already at its upper 80 % limit): `reproduce` if the true effect is the paper's, `contradict` if it is
    nil, each (seeds, more) or None where the figure has no meaning or no spread is known; `caveat` says what
    makes them a lower bound, if anything (censored runs left out of the spread)."""

    reproduce: tuple[int, bool] | None
    contradict: tuple[int, bool] | None
    spread: float
    caveat: str = ""

    @staticmethod
    def text(figure: tuple[int, bool] | None) -> str:
        """ "12", "> 10,000", or "" (no meaning, or no spread)."""
        if figure is None:
            return ""
        count, more = figure
        return f"> {count:,}" if more else f"{count:,}"

    def sentence(self) -> str:
        """The two figures in words, for a row's why."""
        parts = []
        for figure, what in (
            (self.reproduce, "reproduce it if the effect is the paper's"),
            (self.contradict, "contradict it if the effect is nil"),
        ):
            if figure is not None:
                count, more = figure
                parts.append(f"{'more than ' if more else ''}{count:,} seeds would {what}")
        if not parts:
            return ""
        return (
            f"design ({percent(POWER)} power at the between-seed spread's upper {percent(SPREAD_CONFIDENCE)} "
            f"limit, {self.spread:.3g}): " + ", ".join(parts) + (f" ({self.caveat})" if self.caveat else "")
        )


@dataclass(frozen=True)
class Judgement:
    """An effect's estimate and interval over seeds, its word, its direction against the null, the claim's design
    figures (`design`, None where no spread is known) and the reason in one sentence."""

    estimate: float
    low: float
    high: float
    level: float
    seeds: int
    verdict: str
    why: str
    design: Design | None = None
    direction: str = NEITHER

    @property
    def seeds_to_reproduce(self) -> str:
        return Design.text(self.design.reproduce) if self.design else ""

    @property
    def seeds_to_contradict(self) -> str:
        return Design.text(self.design.contradict) if self.design else ""


def not_tested(why: str, seeds: int = 0, level: float = LEVEL, estimate: float = math.nan) -> Judgement:
    """A comparison that cannot be made here (`why` says which input is missing)."""
    return Judgement(estimate, math.nan, math.nan, level, seeds, NOT_TESTED, why, direction="")


def percent(level: float) -> str:
    """A confidence level as a percentage with the digits it needs: 95 %, 99.79 %, 99.998 % (never "100 %" for a
    level below 1)."""
    for digits in range(4, 12):
        text = f"{level * 100:.{digits}g}"
        if float(text) < 100 or level >= 1:
            return f"{text} %"
    return f"{level * 100!r} %"


def direction_of(effect: Effect, low: float, high: float) -> str:
    """Whether [low, high] (on the effect's own scale) excludes the null on the paper's side, the other, or neither;
    empty for an equivalence claim whose null lies inside its region (no paper's side: a deviation from 0 in any
    direction is away from the paper)."""
    if effect.null_in_region():
        return ""
    side, null = effect.side(), effect.transform(effect.null)
    near, far = sorted((side * (effect.transform(low) - null), side * (effect.transform(high) - null)))
    return AS_PAPER if near > 0 else AGAINST_PAPER if far < 0 else NEITHER


def word_of(effect: Effect, low: float, high: float) -> str:
    """The word for an interval given on the effect's own scale (no seed count or planning: `judge_interval`)."""
    lo, hi = effect.transform(low), effect.transform(high)
    if effect.margin is not None:
        top = effect.transform(effect.margin)
        if effect.margin_low is None:
            return REPRODUCED if hi <= top else CONTRADICTED if lo > top else UNRESOLVED
        floor = effect.transform(effect.margin_low)
        return REPRODUCED if floor <= lo and hi <= top else CONTRADICTED if lo > top or hi < floor else UNRESOLVED
    smallest = effect.smallest()
    if smallest is None:
        raise ValueError(
            f"effect {effect.name!r} has neither a paper value nor a SESOI: a direction-only claim "
            "states its SESOI in the claims registry"
        )
    side, null = effect.side(), effect.transform(effect.null)
    threshold = side * (effect.transform(smallest) - null)
    near, far = sorted((side * (lo - null), side * (hi - null)))
    return REPRODUCED if near >= threshold else CONTRADICTED if far < threshold else UNRESOLVED


def judge_interval(
    effect: Effect, estimate: float, low: float, high: float, level: float, seeds: int, design: Design | None = None
) -> Judgement:
    """The Judgement for an interval given on the effect's own scale, with the claim's design figures."""
    if seeds < 2:
        return not_tested(f"{seeds} seed(s): an interval over seeds needs at least 2", seeds, level, estimate)
    if math.isnan(low) or math.isnan(high):
        return not_tested("no interval could be formed (an undetermined estimate in some seed)", seeds, level, estimate)
    word = word_of(effect, low, high)
    judgement = Judgement(estimate, low, high, level, seeds, word, "", design, direction_of(effect, low, high))
    return replace(judgement, why=explain(effect, judgement))


def explain(effect: Effect, judgement: Judgement) -> str:
    """The reason for a decided or unresolved word, in one sentence."""
    interval = (
        f"{percent(judgement.level)} interval ({effect.interval}, {judgement.seeds} seeds) "
        f"[{_shown(effect, judgement.low)}, {_shown(effect, judgement.high)}]"
    )
    sesoi = effect.sesoi_text()
    if judgement.verdict == REPRODUCED:
        if effect.margin is not None:
            return (
                f"the {interval} stays within the margin {effect.margin:.3g}"
                if effect.margin_low is None
                else f"the {interval} lies {equivalence_region(effect)}"
            )
        return (
            f"the {interval} has its near end at or beyond the SESOI {sesoi}: the effect is at least the size "
            "that matters"
        )
    if judgement.verdict == CONTRADICTED:
        if effect.margin is not None:
            return (
                f"the {interval} lies wholly above the margin {effect.margin:.3g}"
                if effect.margin_low is None
                else f"the {interval} lies wholly outside {equivalence_region(effect)}"
            )
        return f"the {interval} falls short of the SESOI {sesoi}: an effect of the size that matters is excluded" + (
            "; it excludes the null on the paper's side, so the effect is smaller than claimed"
            if judgement.direction == AS_PAPER
            else ""
        )
    straddles = "an end of " + sesoi if effect.margin is not None else "the SESOI " + sesoi
    design = judgement.design.sentence() if judgement.design else ""
    return f"the {interval} straddles {straddles}" + (
        f"; {design}" if design else "; the spread over seeds is unknown, so is the design"
    )


def _shown(effect: Effect, value: float) -> str:
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:.3g}" + ("×" if effect.scale == "log" else "")


def design_of(effect: Effect, spread: float, seeds: int, level: float, caveat: str = "") -> Design | None:
    """The claim's two design figures (`Design`) from the observed between-seed standard deviation `spread` of
    `seeds` per-seed values on the judged scale: at its upper 80 % limit, the fewest seeds whose interval at `level`
    (the effect's estimand: noncentral t for a mean, binomial order statistics for a median) reaches "reproduced"
    with 80 % power when the true effect is the paper's (`Effect.expected`), and "contradicted" when it is the null;
    None when the spread is unknown."""
    sd = spread_upper(spread, seeds)
    if not math.isfinite(sd):
        return None
    median = effect.estimand == "median"
    power_at = order_power if median else t_power
    scan = dict(limit=MAX_SCANNED_SEEDS, monotone=False) if median else {}
    edges = boundaries(effect) if (effect.margin is not None or effect.smallest() is not None) else []

    def seeds_beyond(mean: float, boundary: float) -> tuple[int, bool]:
        return seeds_for_power(lambda n: power_at(mean, sd, boundary, n, level), 2, **scan)

    expected, null = effect.expected(), effect.transform(effect.null)
    reproduce = contradict = None
    if effect.margin is not None and len(edges) == 2:
        if expected is not None:
            reproduce = (
                seeds_for_power(lambda n: _region_power(edges, expected, sd, n, level), 2, MAX_SCANNED_SEEDS)
                if not median
                else None
            )
        if not effect.null_in_region():
            contradict = seeds_beyond(null, min(edges, key=lambda edge: abs(edge - null)))
    elif effect.margin is not None:
        if expected is not None:
            reproduce = seeds_beyond(expected, edges[0])
        if not effect.null_in_region():
            contradict = seeds_beyond(null, edges[0])
    elif edges:
        if expected is not None:
            reproduce = seeds_beyond(expected, edges[0])
        contradict = seeds_beyond(null, edges[0])
    return Design(reproduce, contradict, sd, caveat)


def _region_power(edges: list[float], mean: float, spread: float, seeds: int, level: float) -> float:
    """Simulated share of t intervals over `seeds` normal seeds (true `mean`, `spread`) that lie inside the region
    [edges[0], edges[1]] (the sample mean and sd drawn from their exact laws)."""
    rng = np.random.default_rng(seeds)
    means = rng.normal(mean, spread / math.sqrt(seeds), SIMULATED_DRAWS)
    sds = spread * np.sqrt(rng.chisquare(seeds - 1, SIMULATED_DRAWS) / (seeds - 1))
    half = t_quantile(level, seeds) * sds / math.sqrt(seeds)
    floor, top = edges
    return float(np.mean((means - half >= floor) & (means + half <= top)))


def judge_samples(effect: Effect, samples: Sequence[float], level: float, plan: bool = True) -> Judgement:
    """One value of the effect per seed (a width slope, a paired difference, a log ratio's exponent): the t
    interval on the judged scale; `plan` False skips the design figures."""
    if effect.estimand != "mean":
        raise ValueError(
            f"effect {effect.name!r}: judge_samples forms a t interval for a mean, not a {effect.estimand}"
        )
    values = np.asarray([effect.transform(float(value)) for value in samples], float)
    finite = values[np.isfinite(values)]
    if len(finite) < len(values):
        return not_tested(
            f"{len(values) - len(finite)} of {len(values)} seeds have no determined value", len(values), level
        )
    mean, se, lo, hi = t_interval(finite, level)
    spread = se * math.sqrt(len(finite)) if math.isfinite(se) else math.nan
    design = design_of(effect, spread, len(finite), level) if plan else None
    return judge_interval(effect, *(effect.untransform(v) for v in (mean, lo, hi)), level, len(finite), design)


def judge_slopes(effect: Effect, trend, level: float, plan: bool = True) -> list[Judgement]:
    """One Judgement per row of a `growcert.stats.regime.width_trend` table (its slope, slope_lo/hi at `level`,
    slope_se and seeds)."""
    judged = []
    for row in trend.itertuples():
        spread = row.slope_se * math.sqrt(row.seeds) if row.seeds >= 2 else math.nan
        design = design_of(effect, spread, int(row.seeds), level) if plan else None
        judged.append(judge_interval(effect, row.slope, row.slope_lo, row.slope_hi, level, int(row.seeds), design))
    return judged


def judge_steps(
    effect: Effect,
    baseline: Sequence[float],
    variant: Sequence[float],
    level: float,
    cap: int,
    eval_every: int,
    baseline_name: str = "the baseline",
    plan: bool = True,
    variant_cap: Sequence[float] | None = None,
    paired_with: str | None = None,
) -> Judgement:
    """Steps to a target, paired by seed, the effect being baseline steps / variant steps (a speed-up), judged as
    interval-censored bounds (`step_bounds`) for the effect's registered estimand (`bounds_interval`: the mean or the
    median of the per-seed log ratios). NaN, None or inf steps are censored: the run did not reach the target by
    `cap`. Every seed stays in: one where both runs are censored bounds its ratio by (0, ∞) and widens the
    interval. Not tested when no seed has a run that reached the target. The design figures take the spread of the
    per-seed log ratios of the seeds where both runs reached it (censored seeds left out: a lower bound).
    `variant_cap`: with paired caps, the step each seed's variant run was stopped at (its censoring point), the step
    of its seed's `paired_with` run (default the baseline)."""
    bounds = step_bounds(baseline, variant, cap, eval_every, variant_cap)
    seeds = len(bounds.point)
    neither = int(np.isnan(bounds.point).sum())  # both runs censored: the ratio lies in (0, ∞)
    if seeds < 2 or neither == seeds:
        return not_tested(
            f"{seeds - neither} seed(s) where either run reached the target by the {cap:,}-step cap, "
            f"of {seeds}: an interval needs 2 seeds and one such seed",
            seeds,
            level,
        )
    estimate, low, high = bounds_interval(bounds.lower, bounds.upper, bounds.point, level, effect.estimand)
    b_censored = sum(v is None or not math.isfinite(float(v)) for v in baseline)
    v_censored = sum(v is None or not math.isfinite(float(v)) for v in variant)
    form_text = (
        "Student t over per-seed log ratios, the lower end from each seed's lower bound and the upper end "
        "from its upper bound (infinite where a seed's bound is)"
        if effect.estimand == "mean"
        else "order-statistic interval for the median of per-seed ratio bounds"
    )
    stated = replace(
        effect,
        interval=f"{form_text}; steps known to {eval_every:,}; censored: {b_censored} of {seeds} "
        f"{baseline_name} runs and {v_censored} of {seeds} variant runs at the {cap:,}-step "
        "cap"
        + (
            f" (variant runs at their seed's {paired_with or baseline_name} step: paired caps)"
            if variant_cap is not None
            else ""
        )
        + (f"; {neither} seed(s) where both were censored kept, as (0, ∞)" if neither else ""),
    )
    design = None
    if plan:
        measured = bounds.point[np.isfinite(bounds.point)]
        spread = float(measured.std(ddof=1)) if len(measured) >= 2 else math.nan
        left_out = seeds - len(measured)
        design = design_of(
            effect,
            spread,
            len(measured),
            level,
            f"the spread from the {len(measured)} seeds where both runs reached the target, so at least these"
            if left_out
            else "",
        )
    with np.errstate(over="ignore"):
        values = [float(np.exp(float(value))) for value in (estimate, low, high)]
    judgement = judge_interval(stated, *values, level, seeds, design)
    if effect.estimand == "median" and judgement.verdict == UNRESOLVED and seeds < median_interval_seeds(level):
        judgement = replace(
            judgement,
            why=judgement.why + f"; this interval has no finite end at {percent(level)} "
            f"below {median_interval_seeds(level)} seeds, whatever their values",
        )
    return judgement


def judge_growth(
    control: Sequence[float],
    grown: Sequence[float],
    scratch: Sequence[float],
    level: float,
    effect: Effect,
    fraction: float,
    plan: bool = True,
) -> Judgement:
    """P3's grown-vs-scratch claim with its no-growth control (final held-out losses paired by seed): reproduced
    only when the grown model beats the control (the shallow model trained for the same total steps) beyond
    noise, gain = (control − grown)/scratch with its interval above 0, and is within a margin of scratch that is
    `fraction` of the control-to-scratch gap, excess = (grown − scratch − fraction·(control − scratch))/scratch
    with its interval at or below 0. Contradicted when either is excluded; unresolved otherwise. The row's
    estimate and interval are the excess's (the `effect`, margin 0).

    Design figures, from the paper's effect and the null, never from the grown model's observed losses: the paper's
    claim is grown = scratch (gain g, excess −fraction·g), the null grown = control (gain 0, excess
    (1 − fraction)·g), g the control-to-scratch gap relative to scratch, the size of the depth effect that both
    hypotheses are stated in. g is a nuisance measured on the control and scratch models, so it is taken at its lower
    80 % confidence limit (a Student t bound over seeds) as the spreads are at their upper 80 % limits: a smaller gap
    needs more seeds, so neither figure is optimistic. To reproduce if grown matches scratch both conditions must
    hold, so the power is the product of the two (each favoured by a low grown loss, so the product is a lower
    bound); to contradict if growth is nil, the excess's interval above 0. None when that limit of the gap is not
    positive (depth may then have nothing to close)."""
    control, grown, scratch = (np.asarray(values, float) for values in (control, grown, scratch))
    seeds = len(scratch)
    if seeds < 2:
        return not_tested(
            f"{seeds} seed(s) with the control, the grown and the scratch model: an interval needs 2", seeds, level
        )
    gain = (control - grown) / scratch
    excess = (grown - scratch - fraction * (control - scratch)) / scratch
    gain_mean, gain_se, gain_low, gain_high = t_interval(gain, level)
    mean, se, low, high = t_interval(excess, level)
    if not all(math.isfinite(v) for v in (gain_low, gain_high, low, high)):
        return not_tested("no interval could be formed (an undetermined loss in some seed)", seeds, level, mean)
    beats, within = gain_low > 0, high <= 0
    word = REPRODUCED if beats and within else CONTRADICTED if gain_high <= 0 or low > 0 else UNRESOLVED
    design = None
    gap = gap_lower_limit((control - scratch) / scratch)
    if plan and gap > 0:
        gain_sd, excess_sd = (spread_upper(value_se * math.sqrt(seeds), seeds) for value_se in (gain_se, se))
        reproduce = seeds_for_power(
            lambda n: t_power(gap, gain_sd, 0.0, n, level) * t_power(-fraction * gap, excess_sd, 0.0, n, level), 2
        )
        contradict = seeds_for_power(lambda n: t_power((1 - fraction) * gap, excess_sd, 0.0, n, level), 2)
        design = Design(
            reproduce,
            contradict,
            excess_sd,
            f"at the control-to-scratch gap's lower {percent(SPREAD_CONFIDENCE)} limit {gap:+.2%}",
        )
    judgement = Judgement(mean, low, high, level, seeds, word, "", design, direction_of(effect, low, high))
    gain_text = (
        f"the grown model {'beats' if beats else 'does not beat' if gain_high <= 0 else 'is not shown to beat'} "
        f"the no-growth control (gain {gain_mean:+.2%} [{gain_low:+.2%}, {gain_high:+.2%}] of scratch's loss)"
    )
    within_text = (
        f"it {'closes' if within else 'misses' if low > 0 else 'is not shown to close'} at least "
        f"{1 - fraction:.0%} of the control-to-scratch gap (excess {mean:+.2%} [{low:+.2%}, {high:+.2%}])"
    )
    tail = design.sentence() if word == UNRESOLVED and design else ""
    return replace(
        judgement,
        why=f"{percent(level)} Student t intervals over {seeds} seeds: {gain_text}; {within_text}"
        + (f"; {tail}" if tail else ""),
    )


def gap_lower_limit(gaps: np.ndarray, confidence: float = SPREAD_CONFIDENCE) -> float:
    """The one-sided lower `confidence` limit of the mean of per-seed gaps (Student t over seeds): the depth effect at
    which `judge_growth` states its design figures; NaN below 2 seeds."""
    _, _, low, _ = t_interval(gaps, 2 * confidence - 1)  # a two-sided interval at 2c − 1 has each end one-sided at c
    return float(low)
