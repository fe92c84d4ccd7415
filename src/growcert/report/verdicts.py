"""The referee's rule: the four verdict words and how an interval over seeds earns one (docs/science.md,
"Verdicts").

Every claim declares in the claims registry the `Effect` it measures: its name, the paper's value, the null
(no effect), the scale it is judged on, how its interval over seeds is formed, and its smallest effect of
interest (SESOI): half the paper's effect on the judged scale (for a ratio, on the log scale, so half of 4.9×
is 2.21×) unless the registry states another with its reason (a direction-only claim must). A stage measures
the effect once per seed and calls one of the judges here; the `Judgement` it gets back (estimate, interval,
level, seeds, word, direction, seeds needed, why) is what the claim row shows.

The words, for an interval [low, high] at the stated level, oriented so that the paper's side is up:

- `reproduced`: the interval's near end is at or beyond the SESOI: with confidence, the effect is at least
  the size that matters;
- `contradicted`: the interval's far end falls short of the SESOI (which includes the null side): an effect
  of the size that matters is excluded;
- `unresolved`: the interval straddles the SESOI. The row says how many seeds would give 80 % power to
  resolve it if the effect and its spread are as observed (closed form for a t interval, simulation from
  the seeds for a median interval), "more than N" where even N seeds would not, or that it is unknown;
- `not tested at this scale`: the effect cannot be estimated: fewer than two seeds, no seed where a run
  reached its target, no detectable signal, a vacuous bound everywhere, a missing control.

A separate `direction` says whether the interval excludes the null on the paper's side, on the other side,
or neither: "contradicted" with the paper's direction is a smaller effect than claimed.

An equivalence claim ("within 10 %", "closes half the gap", `Effect.margin`) has its margin as its SESOI:
reproduced when the interval lies inside the claimed region, contradicted when it lies wholly outside it.

Steps to a target are interval-censored (`judge_steps`): a run that reached it at step s took between
s − eval_every and s steps; a censored run more than the cap. Each seed's ratio is then an interval, and
the interval over seeds takes its lower end from the seeds' lower bounds and its upper end from their upper
bounds, so a difference within one evaluation interval never reproduces, and a censored baseline bounds
the ratio from below.

Readings of an ambiguous claim (the P2 gate readings × variance sources), contexts and growth experiments are
judged together by `growcert.report.families.holm_family` (Holm's step-down, each part's word shown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from growcert.stats.seeds import (POWER, StepBounds, bounds_interval, median_interval_seeds,
                                  seeds_for_power, step_bounds, t_interval, t_power, t_quantile)

REPRODUCED, CONTRADICTED, UNRESOLVED, NOT_TESTED = "reproduced", "contradicted", "unresolved", "not tested at this scale"
WORDS = (REPRODUCED, CONTRADICTED, UNRESOLVED, NOT_TESTED)
DECIDED = (REPRODUCED, CONTRADICTED)
AS_PAPER, AGAINST_PAPER, NEITHER = "as the paper's", "against the paper's", "neither"
SIZE_FRACTION = 0.5  # the default SESOI: half the paper's effect on the judged scale
LEVEL = 0.95  # the confidence level of a verdict's interval, where the stage has no level setting of its own
# A misalignment bound of at least ½ says nothing: a coin's sign would meet it.
VACUOUS_BOUND = 0.5
SIMULATED_DRAWS = 1_000  # simulated replicates per seed count when the seeds needed come from a simulation
MAX_SIMULATED_SEEDS = 1_000  # simulations from a handful of seeds say nothing beyond this many


@dataclass(frozen=True)
class Effect:
    """What a claim measures: `name`, the paper's value of it (`paper`; None for a direction only), the `null`,
    the `scale` it is judged on ("linear" or "log"), the paper's side of the null (`direction`, +1 or −1, used
    when `paper` is None), the smallest effect of interest (`sesoi`, on the effect's own scale; None: half the
    paper's effect) with `sesoi_reason` when it is not the default, an equivalence `margin` (the claim is
    effect ≤ margin; with `margin_low` too, margin_low ≤ effect ≤ margin), and how the interval over seeds is
    formed (`interval`, shown in the row)."""

    name: str
    paper: float | None
    null: float = 0.0
    scale: str = "linear"
    direction: int = 1
    margin: float | None = None
    margin_low: float | None = None
    interval: str = "Student t over seeds"
    sesoi: float | None = None
    sesoi_reason: str = ""

    def transform(self, value: float) -> float:
        if self.scale == "log":
            return math.log(value) if value > 0 else (-math.inf if value == 0 else math.nan)
        return value

    def untransform(self, value: float) -> float:
        if self.scale != "log":
            return value
        with np.errstate(over="ignore"):
            return float(np.exp(value))

    def side(self) -> int:
        """+1 when the paper's effect lies above the null on the judged scale, −1 below."""
        if self.paper is None:
            return self.direction
        return 1 if self.transform(self.paper) >= self.transform(self.null) else -1

    def smallest(self) -> float | None:
        """The SESOI on the effect's own scale: the registry's, else half the paper's effect on the judged scale;
        None for an equivalence claim (its margin is its SESOI) or a direction without one."""
        if self.sesoi is not None:
            return self.sesoi
        if self.paper is None or self.margin is not None:
            return None
        null = self.transform(self.null)
        return self.untransform(null + SIZE_FRACTION * (self.transform(self.paper) - null))

    def sesoi_text(self) -> str:
        """The SESOI as a row shows it, with where it comes from."""
        if self.margin is not None:
            return "the margin " + (f"{self.margin:.3g}" if self.margin_low is None
                                    else f"[{self.margin_low:.3g}, {self.margin:.3g}]")
        smallest = self.smallest()
        if smallest is None:
            return "none"
        times = "×" if self.scale == "log" else ""
        return f"{smallest:.3g}{times}" + (f" ({self.sesoi_reason})" if self.sesoi is not None and self.sesoi_reason
                                           else " (half the paper's effect)")


@dataclass(frozen=True)
class Judgement:
    """An effect's estimate and interval over seeds, its word, its direction against the null, the seeds that
    would resolve it (`seeds_needed`; "more than" it when `seeds_needed_more`) and the reason in one sentence."""

    estimate: float
    low: float
    high: float
    level: float
    seeds: int
    verdict: str
    why: str
    seeds_needed: int | None = None
    seeds_needed_more: bool = False
    direction: str = NEITHER

    @property
    def seeds_needed_text(self) -> str:
        """"12", "> 10,000", or "" (resolved, or unknown)."""
        if self.seeds_needed is None:
            return ""
        return f"> {self.seeds_needed:,}" if self.seeds_needed_more else f"{self.seeds_needed:,}"


# A planner returns (seeds, more) for an unresolved verdict, or None when the spread is unknown.
Planner = Callable[[], "tuple[int, bool] | None"]


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
    """Whether [low, high] (on the effect's own scale) excludes the null on the paper's side, the other, or neither."""
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
        raise ValueError(f"effect {effect.name!r} has neither a paper value nor a SESOI: a direction-only claim "
                         "states its SESOI in the claims registry")
    side, null = effect.side(), effect.transform(effect.null)
    threshold = side * (effect.transform(smallest) - null)
    near, far = sorted((side * (lo - null), side * (hi - null)))
    return REPRODUCED if near >= threshold else CONTRADICTED if far < threshold else UNRESOLVED


def boundaries(effect: Effect) -> list[float]:
    """The values on the judged scale that an interval must clear to be decided: the SESOI, or the margins."""
    if effect.margin is not None:
        return [effect.transform(v) for v in (effect.margin_low, effect.margin) if v is not None]
    return [effect.transform(effect.smallest())]


def judge_interval(effect: Effect, estimate: float, low: float, high: float, level: float, seeds: int,
                   planner: Planner | None = None, method: str = "") -> Judgement:
    """The Judgement for an interval given on the effect's own scale; an unresolved one asks `planner` for the
    seeds that give 80 % power (`method` says how it counted them)."""
    if seeds < 2:
        return not_tested(f"{seeds} seed(s): an interval over seeds needs at least 2", seeds, level, estimate)
    if math.isnan(low) or math.isnan(high):
        return not_tested("no interval could be formed (an undetermined estimate in some seed)", seeds, level,
                          estimate)
    word = word_of(effect, low, high)
    needed = planner() if word == UNRESOLVED and planner is not None else None
    count, more = needed if needed is not None else (None, False)
    judgement = Judgement(estimate, low, high, level, seeds, word, "", count, more, direction_of(effect, low, high))
    return replace(judgement, why=explain(effect, judgement, method))


def explain(effect: Effect, judgement: Judgement, method: str = "") -> str:
    """The reason for a decided or unresolved word, in one sentence."""
    interval = (f"{percent(judgement.level)} interval ({effect.interval}, {judgement.seeds} seeds) "
                f"[{_shown(effect, judgement.low)}, {_shown(effect, judgement.high)}]")
    sesoi = effect.sesoi_text()
    if judgement.verdict == REPRODUCED:
        if effect.margin is not None:
            return (f"the {interval} stays within the margin {effect.margin:.3g}" if effect.margin_low is None
                    else f"the {interval} lies {equivalence_region(effect)}")
        return f"the {interval} has its near end at or beyond the SESOI {sesoi}: the effect is at least the size that matters"
    if judgement.verdict == CONTRADICTED:
        if effect.margin is not None:
            return (f"the {interval} lies wholly above the margin {effect.margin:.3g}" if effect.margin_low is None
                    else f"the {interval} lies wholly outside {equivalence_region(effect)}")
        return (f"the {interval} falls short of the SESOI {sesoi}: an effect of the size that matters is excluded"
                + ("; it excludes the null on the paper's side, so the effect is smaller than claimed"
                   if judgement.direction == AS_PAPER else ""))
    if judgement.seeds_needed is None:
        more = "the spread over seeds is unknown, so the seeds that would resolve it are too"
    elif judgement.seeds_needed_more:
        more = (f"more than {judgement.seeds_needed:,} seeds would be needed for {percent(POWER)} power at the observed "
                f"effect and spread" + (f" ({method})" if method else ""))
    else:
        more = (f"{judgement.seeds_needed:,} seeds would give {percent(POWER)} power to resolve it if the effect and spread "
                f"are as observed" + (f" ({method})" if method else ""))
    straddles = "an end of " + sesoi if effect.margin is not None else "the SESOI " + sesoi
    return f"the {interval} straddles {straddles}; {more}"


def _shown(effect: Effect, value: float) -> str:
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:.3g}" + ("×" if effect.scale == "log" else "")


def t_planner(effect: Effect, mean: float, spread: float, level: float, seeds: int) -> Planner:
    """Seeds for 80 % power of a t interval on the judged scale, at the observed mean and per-seed spread: the
    noncentral t against the one boundary (SESOI or margin) the estimate must clear, or a simulation of
    (mean, sd) pairs for a two-sided equivalence region."""
    def plan() -> tuple[int, bool] | None:
        if not (math.isfinite(spread) and math.isfinite(mean)):
            return None
        edges = boundaries(effect)
        if len(edges) == 1:
            return seeds_for_power(lambda n: t_power(mean, spread, edges[0], n, level), seeds + 1)
        return seeds_for_power(lambda n: _region_power(effect, mean, spread, n, level), seeds + 1, MAX_SIMULATED_SEEDS)
    return plan


def _region_power(effect: Effect, mean: float, spread: float, seeds: int, level: float) -> float:
    """Simulated share of t intervals over `seeds` normal seeds that reach the word the estimate points to,
    for a two-sided equivalence region (the sample mean and sd drawn from their exact laws)."""
    rng = np.random.default_rng(seeds)
    means = rng.normal(mean, spread / math.sqrt(seeds), SIMULATED_DRAWS)
    sds = spread * np.sqrt(rng.chisquare(seeds - 1, SIMULATED_DRAWS) / (seeds - 1))
    half = t_quantile(level, seeds) * sds / math.sqrt(seeds)
    floor, top = boundaries(effect)
    if floor <= mean <= top:
        return float(np.mean((means - half >= floor) & (means + half <= top)))
    return float(np.mean((means - half > top) | (means + half < floor)))


def judge_samples(effect: Effect, samples: Sequence[float], level: float, plan: bool = True) -> Judgement:
    """One value of the effect per seed (a width slope, a paired difference, a log ratio's exponent): the t
    interval on the judged scale; `plan` False skips the seeds an unresolved verdict needs."""
    values = np.asarray([effect.transform(float(value)) for value in samples], float)
    finite = values[np.isfinite(values)]
    if len(finite) < len(values):
        return not_tested(f"{len(values) - len(finite)} of {len(values)} seeds have no determined value",
                          len(values), level)
    mean, se, lo, hi = t_interval(finite, level)
    spread = se * math.sqrt(len(finite)) if math.isfinite(se) else math.nan
    planner = t_planner(effect, mean, spread, level, len(finite)) if plan else None
    return judge_interval(effect, *(effect.untransform(v) for v in (mean, lo, hi)), level, len(finite), planner,
                          "noncentral t")


def judge_slopes(effect: Effect, trend, level: float, plan: bool = True) -> list[Judgement]:
    """One Judgement per row of a `growcert.stats.regime.width_trend` table (its slope, slope_lo/hi at `level`,
    slope_se and seeds)."""
    judged = []
    for row in trend.itertuples():
        spread = row.slope_se * math.sqrt(row.seeds) if row.seeds >= 2 else math.nan
        planner = t_planner(effect, row.slope, spread, level, int(row.seeds)) if plan else None
        judged.append(judge_interval(effect, row.slope, row.slope_lo, row.slope_hi, level, int(row.seeds), planner,
                                     "noncentral t"))
    return judged


def judge_steps(effect: Effect, baseline: Sequence[float], variant: Sequence[float], level: float, cap: int,
                eval_every: int, baseline_name: str = "the baseline", plan: bool = True) -> Judgement:
    """Steps to a target, paired by seed, the effect being baseline steps / variant steps (a speed-up), judged as
    interval-censored bounds (`step_bounds`, `bounds_interval`). NaN, None or inf steps are censored: the run
    did not reach the target by `cap`. A seed where neither run reached the target says nothing about the ratio
    and is left out (the row counts it). An unresolved verdict's seeds come from a simulation: seeds drawn with
    replacement from the observed ones, judged by the same rule."""
    bounds = step_bounds(baseline, variant, cap, eval_every)
    seeds = len(bounds.point)
    informative = ~np.isnan(bounds.point)  # NaN: both runs censored
    neither = seeds - int(informative.sum())
    kept = StepBounds(*(values[informative] for values in (bounds.point, bounds.lower, bounds.upper)))
    if len(kept.point) < 2:
        return not_tested(f"{len(kept.point)} seed(s) where either run reached the target by the {cap:,}-step cap: "
                          "an interval needs 2", len(kept.point), level)
    estimate, low, high, form = bounds_interval(kept.lower, kept.upper, kept.point, level)
    b_censored = sum(v is None or not math.isfinite(float(v)) for v in baseline)
    v_censored = sum(v is None or not math.isfinite(float(v)) for v in variant)
    form_text = ("Student t over per-seed log ratios, the lower end from each seed's lower bound and the upper end "
                 "from its upper bound" if form == "t" else
                 "order-statistic interval for the median of per-seed ratio bounds")
    stated = replace(effect, interval=f"{form_text}; steps known to {eval_every:,}; censored: {b_censored} of {seeds} "
                                      f"{baseline_name} runs and {v_censored} of {seeds} variant runs at the {cap:,}-step "
                                      "cap" + (f"; {neither} seed(s) where neither reached it left out" if neither else ""))
    planner = _steps_planner(effect, kept, level, len(kept.point)) if plan else None
    with np.errstate(over="ignore"):
        values = [float(np.exp(float(value))) for value in (estimate, low, high)]
    judgement = judge_interval(stated, *values, level, len(kept.point), planner,
                               "simulated from the observed seeds' bounds")
    if form == "median" and judgement.verdict == UNRESOLVED and len(kept.point) < median_interval_seeds(level):
        judgement = replace(judgement, why=judgement.why + f"; this interval has no finite end at {percent(level)} "
                                                           f"below {median_interval_seeds(level)} seeds, whatever their values")
    return judgement


def _steps_planner(effect: Effect, bounds: StepBounds, level: float, seeds: int) -> Planner:
    """Seeds for 80 % power of `judge_steps`' interval: replicates of n seeds drawn with replacement from the
    observed seeds' bounds, the share whose interval reaches the word the estimate points to."""
    def plan() -> tuple[int, bool] | None:
        estimate, _, _, _ = bounds_interval(bounds.lower, bounds.upper, bounds.point, level)
        edges = boundaries(effect)
        toward = _toward(effect, float(estimate))

        def power(n: int) -> float:
            rng = np.random.default_rng(n)
            rows = rng.integers(0, seeds, size=(SIMULATED_DRAWS, n))
            _, low, high, _ = bounds_interval(bounds.lower[rows], bounds.upper[rows], bounds.point[rows], level)
            words = [word_of(effect, math.exp(lo) if np.isfinite(lo) else (0.0 if lo < 0 else math.inf),
                             math.exp(hi) if np.isfinite(hi) else (0.0 if hi < 0 else math.inf))
                     if effect.scale == "log" else word_of(effect, lo, hi) for lo, hi in zip(low, high)]
            return float(np.mean([word == toward for word in words]))

        return seeds_for_power(power, seeds + 1, MAX_SIMULATED_SEEDS) if edges else None
    return plan


def _toward(effect: Effect, estimate: float) -> str:
    """The decided word an estimate (on the judged scale) points to."""
    if effect.margin is not None:
        edges = boundaries(effect)
        inside = estimate <= edges[-1] and (len(edges) == 1 or estimate >= edges[0])
        return REPRODUCED if inside else CONTRADICTED
    side, null = effect.side(), effect.transform(effect.null)
    return REPRODUCED if side * (estimate - null) >= side * (boundaries(effect)[0] - null) else CONTRADICTED


def judge_growth(control: Sequence[float], grown: Sequence[float], scratch: Sequence[float], level: float,
                 effect: Effect, fraction: float, plan: bool = True) -> Judgement:
    """P3's grown-vs-scratch claim with its no-growth control (final held-out losses paired by seed): reproduced
    only when the grown model beats the control (the shallow model trained for the same total steps) beyond
    noise, gain = (control − grown)/scratch with its interval above 0, and is within a margin of scratch that is
    `fraction` of the control-to-scratch gap, excess = (grown − scratch − fraction·(control − scratch))/scratch
    with its interval at or below 0. Contradicted when either is excluded; unresolved otherwise. The row's
    estimate and interval are the excess's (the `effect`, margin 0)."""
    control, grown, scratch = (np.asarray(values, float) for values in (control, grown, scratch))
    seeds = len(scratch)
    if seeds < 2:
        return not_tested(f"{seeds} seed(s) with the control, the grown and the scratch model: an interval needs 2",
                          seeds, level)
    gain = (control - grown) / scratch
    excess = (grown - scratch - fraction * (control - scratch)) / scratch
    gain_mean, gain_se, gain_low, gain_high = t_interval(gain, level)
    mean, se, low, high = t_interval(excess, level)
    if not all(math.isfinite(v) for v in (gain_low, gain_high, low, high)):
        return not_tested("no interval could be formed (an undetermined loss in some seed)", seeds, level, mean)
    beats, within = gain_low > 0, high <= 0
    word = (REPRODUCED if beats and within else CONTRADICTED if gain_high <= 0 or low > 0 else UNRESOLVED)
    needed = None
    if word == UNRESOLVED and plan:
        counts = []
        for value_mean, value_se, done in ((gain_mean, gain_se, beats), (mean, se, within)):
            if not done:
                spread = value_se * math.sqrt(seeds)
                counts.append(seeds_for_power(lambda n, m=value_mean, s=spread: t_power(m, s, 0.0, n, level),
                                              seeds + 1))
        needed = max(counts) if counts else None
    count, more = needed if needed is not None else (None, False)
    judgement = Judgement(mean, low, high, level, seeds, word, "", count, more, direction_of(effect, low, high))
    gain_text = (f"the grown model {'beats' if beats else 'does not beat' if gain_high <= 0 else 'is not shown to beat'} "
                 f"the no-growth control (gain {gain_mean:+.2%} [{gain_low:+.2%}, {gain_high:+.2%}] of scratch's loss)")
    within_text = (f"it {'closes' if within else 'misses' if low > 0 else 'is not shown to close'} at least "
                   f"{1 - fraction:.0%} of the control-to-scratch gap (excess {mean:+.2%} [{low:+.2%}, {high:+.2%}])")
    if word == UNRESOLVED:
        tail = explain(effect, judgement, "noncentral t, the larger of the two conditions' counts").split("; ", 1)[1]
    else:
        tail = ""
    return replace(judgement, why=f"{percent(level)} Student t intervals over {seeds} seeds: {gain_text}; {within_text}"
                                  + (f"; {tail}" if tail else ""))


def equivalence_region(effect: Effect) -> str:
    """The claimed region of an equivalence effect, as shown in a row: "≤ 0.01" or "within [0.9, 1.11]"."""
    if effect.margin_low is None:
        return f"≤ {effect.margin:g}"
    return f"within [{effect.margin_low:.3g}, {effect.margin:.3g}]"


# The range of α searched for a cell's p-value, and the bisection steps on log α that find it.
SMALLEST_ALPHA, LARGEST_ALPHA, BISECTION_STEPS = 1e-12, 1 - 1e-9, 60
Interval = Callable[[np.ndarray], "tuple[np.ndarray, np.ndarray]"]


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


def judge_bound(p_hat, bound, p_interval: Interval, bound_interval: Interval, level: float, seeds: int,
                vacuous: float = VACUOUS_BOUND) -> Judgement:
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
        return not_tested(f"B_exact ≥ {vacuous} (vacuous) in all {cells} cells: the bound cannot fail here", seeds,
                          level)
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
    errors = (f"per cell p̂'s interval for the population p (the pool's finite size and the resampling, "
              f"stats.intervals.misalignment_interval) against B_exact's jackknife interval, each end one-sided at "
              f"{percent(1 - alpha / 2)}")
    worst = int(np.flatnonzero(tested)[np.argmax((p_high - b_low)[tested])])
    closest = (f"closest cell: p̂ {p_hat[worst]:.3g} [{p_low[worst]:.3g}, {p_high[worst]:.3g}] against B_exact "
               f"{bound[worst]:.3g} [{b_low[worst]:.3g}, {b_high[worst]:.3g}]")
    skipped = (f"; {vacuous_cells} of {cells} cells have a vacuous B_exact ≥ {vacuous} and are not tested"
               if vacuous_cells else "")
    if contradicted:
        word = CONTRADICTED
        why = (f"p > B_exact beyond both errors in {contradicted} of {m} non-vacuous cells (Holm over {m} cells at "
               f"{percent(level)} family-wise; {errors})")
    elif shown == m:
        word = REPRODUCED
        why = (f"p ≤ B_exact shown in all {m} non-vacuous cells, each at {percent(level)} (an intersection-union "
               f"test: no multiplicity correction; {errors})")
    else:
        word = UNRESOLVED
        why = (f"p ≤ B_exact shown in {shown} of {m} non-vacuous cells and p > B_exact in none at its Holm level "
               f"({errors}): the others' intervals overlap; larger pools (for p̂) or more examples (for B_exact's "
               "moments) would resolve them")
    return Judgement(shown / m, math.nan, math.nan, level, seeds, word, f"{why}; {closest}{skipped}",
                     direction=NEITHER)
