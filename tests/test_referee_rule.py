"""The referee's rule (docs/science.md, "Verdicts") on hand-built seed tables, each of which the rule before it
got wrong: the size rule against a smallest effect of interest (SESOI), steps to a target judged as
interval-censored bounds, the no-growth control of P3, seeds needed at 80 % power checked by simulation,
and Holm across the readings of one ambiguous claim."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from growcert.referee.effect import Effect
from growcert.referee.families import holm_family
from growcert.referee.verdicts import (
    AGAINST_PAPER,
    AS_PAPER,
    CONTRADICTED,
    NEITHER,
    NOT_TESTED,
    REPRODUCED,
    UNRESOLVED,
    judge_interval,
    judge_samples,
    judge_steps,
)

SLOPE = Effect("slope of log d_align on log width", paper=0.50)
# the registered estimands: grokking's median (censored by design), PINN's mean (growcert.referee.claims)
GROKKING = Effect("speed-up in steps to 95 %", paper=4.9, null=1.0, scale="log", estimand="median")
PINN = Effect("speed-up in steps to the target", paper=2.4, null=1.0, scale="log")
DPO = Effect("difference in final reward accuracy", paper=0.075)


def t_table(mean: float, half_width: float, seeds: int, level: float = 0.95) -> np.ndarray:
    """Per-seed values whose Student t interval at `level` is exactly mean ± half_width."""
    noise = np.linspace(-1, 1, seeds)
    noise = (noise - noise.mean()) / noise.std(ddof=1)
    sd = half_width * math.sqrt(seeds) / scipy_stats.t.ppf(0.5 + level / 2, seeds - 1)
    return mean + sd * noise


def test_the_sesoi_is_half_the_papers_effect_on_the_judged_scale():
    assert SLOPE.smallest() == pytest.approx(0.25)
    assert GROKKING.smallest() == pytest.approx(math.sqrt(4.9))  # 2.21×: half of log 4.9
    assert Effect("x", paper=None, sesoi=-0.03, direction=-1, sesoi_reason="documented").smallest() == -0.03


def test_an_interval_that_straddles_the_sesoi_is_unresolved_never_reproduced():
    # [0.01, 0.30] against a paper slope of 0.50: it excludes the null but not the SESOI 0.25
    judgement = judge_interval(SLOPE, 0.155, 0.01, 0.30, 0.95, seeds=8)
    assert judgement.verdict == UNRESOLVED and judgement.direction == AS_PAPER
    samples = t_table(0.155, 0.145, seeds=8)
    judged = judge_samples(SLOPE, samples, 0.95)
    assert (judged.low, judged.high) == pytest.approx((0.01, 0.30))
    assert judged.verdict == UNRESOLVED and "SESOI" in judged.why


def test_an_interval_wholly_below_the_sesoi_is_contradicted_with_the_papers_direction():
    judged = judge_samples(SLOPE, t_table(0.11, 0.09, seeds=8), 0.95)
    assert (judged.low, judged.high) == pytest.approx((0.02, 0.20))
    assert judged.verdict == CONTRADICTED and judged.direction == AS_PAPER
    # a DPO gain of [0.005, 0.040] against +0.075 (SESOI 0.0375) straddles it: unresolved, never reproduced
    assert judge_interval(DPO, 0.0225, 0.005, 0.040, 0.95, seeds=8).verdict == UNRESOLVED
    # the null side is contradicted too, with the direction against the paper's
    below = judge_interval(SLOPE, -0.3, -0.5, -0.1, 0.95, seeds=8)
    assert below.verdict == CONTRADICTED and below.direction == AGAINST_PAPER
    assert judge_interval(SLOPE, 0.1, -0.05, 0.2, 0.95, seeds=8).direction == NEITHER


def test_an_interval_whose_near_end_clears_the_sesoi_is_reproduced():
    judged = judge_samples(SLOPE, t_table(0.45, 0.15, seeds=8), 0.95)
    assert judged.verdict == REPRODUCED and judged.low == pytest.approx(0.30)


def test_a_speed_up_of_1_5_to_3_1_over_8_seeds_is_unresolved_against_4_9():
    # log ratios with a t interval of exactly [log 1.5, log 3.1]; steps known to the step (eval every 1)
    logs = t_table((math.log(1.5) + math.log(3.1)) / 2, (math.log(3.1) - math.log(1.5)) / 2, seeds=8)
    variant = np.full(8, 1000.0)
    baseline = np.round(variant * np.exp(logs))
    judged = judge_steps(replace(GROKKING, estimand="mean"), baseline, variant, 0.95, cap=100_000, eval_every=1)
    assert judged.low == pytest.approx(1.5, rel=0.01) and judged.high == pytest.approx(3.1, rel=0.01)
    assert judged.verdict == UNRESOLVED and judged.direction == AS_PAPER


def test_a_baseline_censored_in_5_of_8_seeds_is_a_bound_that_reproduces():
    # AdamW past the 15,000-step cap in 5 seeds; the variant at <= 2,600 steps in every seed: each of those
    # seeds bounds the speed-up below by 15,000 / 2,600 = 5.8×, and the other three are measured
    baseline = [None, None, 14_000, None, 12_500, None, None, 13_000]
    variant = [2_600, 2_400, 2_500, 2_200, 2_600, 2_300, 2_100, 2_500]
    judged = judge_steps(GROKKING, baseline, variant, 0.95, cap=15_000, eval_every=100)
    assert judged.verdict == REPRODUCED
    # the lower end is the smallest per-seed lower bound (8 seeds at 95 %: [x_(1), x_(8)])
    assert judged.low == pytest.approx((12_500 - 100) / 2_600)
    assert judged.high == math.inf and "5 of 8 AdamW" not in judged.why
    assert "censored: 5 of 8" in judged.why


def test_a_censored_baseline_never_turns_small_measured_ratios_into_a_reproduction():
    # half the baseline censored, the measured seeds only 1.08-1.10x: the lower bounds stay near 1
    baseline = [None, 1080, None, 1100, None, 1090, None, 1085]
    variant = [1000] * 8
    judged = judge_steps(GROKKING, baseline, variant, 0.95, cap=5_000, eval_every=10)
    assert judged.verdict != REPRODUCED and judged.low < 1.1


@pytest.mark.parametrize(
    "baseline, variant, every",
    [
        ([20, 30, 20], [10, 20, 10], 10),
        ([200] * 8, [100] * 8, 100),
        ([1_100, 1_200, 1_150, 1_100, 1_300, 1_250], [1_000, 1_100, 1_050, 1_000, 1_200, 1_150], 100),
    ],
)
def test_a_difference_of_one_evaluation_interval_is_never_reproduced(baseline, variant, every):
    # each seed's steps are known only to (s - every, s]: a difference of one interval may be no difference
    judged = judge_steps(PINN, baseline, variant, 0.95, cap=10_000, eval_every=every)
    assert judged.verdict != REPRODUCED
    assert judged.low <= 1.0 + 1e-12


def test_both_runs_censored_in_every_seed_is_not_tested():
    judged = judge_steps(PINN, [None] * 4, [None] * 4, 0.95, cap=300, eval_every=10)
    assert judged.verdict == NOT_TESTED


def power_by_simulation(effect, mean, sd, seeds, level, rng, target, draws=4000):
    """The share of simulated t intervals over `seeds` normal seeds (true `mean`, `sd`) that reach `target`."""
    hits = 0
    for _ in range(draws):
        sample = rng.normal(mean, sd, seeds)
        hits += judge_samples(effect, sample, level, plan=False).verdict == target
    return hits / draws


def upper_spread(samples) -> float:
    """The upper 80 % confidence limit of the samples' standard deviation, by its chi-square law."""
    n = len(samples)
    return float(np.std(samples, ddof=1) * math.sqrt((n - 1) / scipy_stats.chi2.ppf(0.2, n - 1)))


def test_design_figures_have_80_percent_power_by_simulation():
    samples = np.array([0.62, 0.18, 0.55, 0.41, 0.30])
    judged = judge_samples(SLOPE, samples, 0.95)
    design = judged.design
    assert design is not None and design.spread == pytest.approx(upper_spread(samples))
    se = math.sqrt(0.8 * 0.2 / 4000)
    rng = np.random.default_rng(1)
    for (count, more), truth, target in ((design.reproduce, 0.50, REPRODUCED), (design.contradict, 0.0, CONTRADICTED)):
        assert not more
        assert power_by_simulation(SLOPE, truth, design.spread, count, 0.95, rng, target) >= 0.8 - 3 * se
        assert power_by_simulation(SLOPE, truth, design.spread, count - 1, 0.95, rng, target) < 0.8 + 3 * se
    assert judged.seeds_to_reproduce == f"{design.reproduce[0]:,}"


def test_design_figures_do_not_move_with_the_observed_effect():
    # the audit's case: moving the observed mean by a standard error moved the old figure from 62 to 4,249 or 20
    base = t_table(0.30, 0.15, seeds=8)
    shifted = [judge_samples(SLOPE, base + shift, 0.95) for shift in (-0.05, 0.0, 0.05)]
    assert len({(j.seeds_to_reproduce, j.seeds_to_contradict) for j in shifted}) == 1
    assert len({j.verdict for j in shifted}) >= 1 and shifted[1].seeds_to_reproduce != ""


def test_a_median_design_figure_has_80_percent_power_by_simulation():
    from growcert.referee.verdicts import design_of

    design = design_of(GROKKING, spread=0.4, seeds=8, level=0.95)
    count, more = design.reproduce
    assert not more
    rng = np.random.default_rng(2)

    def power(n: int) -> float:
        logs = rng.normal(math.log(4.9), design.spread, (4000, n))
        lows = np.sort(logs, axis=1)[:, _rank(n) - 1]
        return float(np.mean(lows >= math.log(GROKKING.smallest())))

    se = math.sqrt(0.8 * 0.2 / 4000)
    assert power(count) >= 0.8 - 3 * se and power(count - 1) < 0.8 + 3 * se


def _rank(n: int, level: float = 0.95) -> int:
    """Brute force: the largest k whose [x_(k), x_(n−k+1)] covers the median with probability ≥ level."""
    best = 0
    for k in range(1, n // 2 + 1):
        if 1 - 2 * scipy_stats.binom.cdf(k - 1, n, 0.5) >= level:
            best = k
    return best


def test_a_figure_beyond_reach_says_more_than_and_an_unknown_spread_gives_none():
    # the paper's value sits on the margin: no number of seeds shows the interval inside it
    on_edge = Effect("excess", paper=0.0, margin=0.0, sesoi_reason="a margin")
    judged = judge_samples(on_edge, t_table(0.0, 0.01, seeds=6), 0.95)
    assert judged.design.reproduce[1] and judged.seeds_to_reproduce.startswith("> ")
    # the null lies inside the claimed region: contradicting "if the effect is nil" has no meaning
    assert judged.design.contradict is None and judged.seeds_to_contradict == ""
    # one seed with a value: the spread is unknown
    unknown = judge_steps(GROKKING, [None, 9000, None], [None, 1000, None], 0.95, cap=15_000, eval_every=100)
    assert unknown.design is None and unknown.seeds_to_reproduce == ""


def test_a_seed_where_neither_run_reached_the_target_stays_in_and_widens_the_interval():
    # the audit's case: 7 seeds where neither run reaches 95 % by the cap, 7 where AdamW is censored and the reading
    # reaches it at 2,600 of 15,000 steps; leaving the first 7 out read "reproduced [5.8x, inf] on 7 seeds"
    baseline = [None] * 14
    variant = [None] * 7 + [2_600] * 7
    judged = judge_steps(GROKKING, baseline, variant, 0.95, cap=15_000, eval_every=100)
    assert judged.verdict == UNRESOLVED and judged.seeds == 14
    assert judged.low == 0.0 and judged.high == math.inf
    assert "7 seed(s) where both were censored kept" in judged.why


def test_the_registered_estimand_is_used_whatever_the_data():
    from growcert.referee.claims import CLAIMS

    assert (CLAIMS["p2_grokking"].effect.estimand, CLAIMS["p2_pinn"].effect.estimand) == ("median", "mean")
    # no censored run: the median estimand keeps its order-statistic interval (the old rule switched to a t)
    baseline, variant = [2_400, 2_450, 2_380], [1_000, 1_010, 990]
    median = judge_steps(GROKKING, baseline, variant, 0.95, cap=30_000, eval_every=10)
    assert (median.low, median.high) == (0.0, math.inf) and median.verdict == UNRESOLVED
    # a censored run: the mean estimand keeps its t interval, its upper end unbounded (the old rule switched to a
    # median)
    mean = PINN
    censored = judge_steps(
        mean, [2_400, None, 2_380, 2_500], [1_000, 1_010, 990, 1_000], 0.95, cap=30_000, eval_every=10
    )
    assert censored.high == math.inf and 0 < censored.low < math.inf and "Student t" in censored.why


def test_an_equivalence_claim_whose_null_is_inside_its_region_has_no_direction():
    from growcert.referee.claims import CLAIMS

    drift = CLAIMS["p2_drift_diffusion"].effect  # paper 0, null 0, within 0.1: a deviation above 0 is not the paper's
    judged = judge_samples(drift, t_table(0.067, 0.019, seeds=8), 0.95)
    assert judged.verdict == REPRODUCED and judged.direction == ""
    interventions = CLAIMS["p1_intervention_scale"].effect  # null 0 outside [0.9, 1.1]: the direction applies
    assert judge_samples(interventions, t_table(-0.35, 0.17, seeds=6), 0.95).direction == AGAINST_PAPER


def test_a_direction_only_claim_with_a_sesoi_contradicts_a_true_null():
    falls = Effect("slope of p̂ on log width", paper=None, direction=-1, sesoi=-0.03, sesoi_reason="a choice")
    judged = judge_samples(falls, t_table(0.0, 0.01, seeds=8), 0.95)
    assert judged.verdict == CONTRADICTED and judged.direction == NEITHER
    assert judge_samples(falls, t_table(-0.08, 0.02, seeds=8), 0.95).verdict == REPRODUCED


def test_holm_across_readings_corrects_and_shows_each_readings_word():
    # two clear of the SESOI 0.0375 by far and by a hair, four undecided near it
    readings = {
        "clear": t_table(0.12, 0.02, 8),
        "borderline": t_table(0.06, 0.021, 8),
        **{f"near{i}": t_table(0.03 + 0.002 * i, 0.03, 8) for i in range(4)},
    }

    def judge(level, plan=True):
        return {name: judge_samples(DPO, values, level, plan=plan) for name, values in readings.items()}

    # uncorrected, the borderline reading clears its SESOI 0.0375: 0.06 - 0.021 = 0.039
    assert judge(0.95)["borderline"].verdict == REPRODUCED
    family = holm_family(judge, 0.95, unit="readings")
    assert family.readings["clear"].verdict == REPRODUCED and family.readings["borderline"].verdict == UNRESOLVED
    assert family.claim.verdict == REPRODUCED and family.deciding == "clear" and "Holm" in family.claim.why
    # the first rank is judged at Bonferroni's level, 1 - 0.05 / 6, the last at the family's own
    levels = sorted(j.level for j in family.readings.values())
    assert levels[-1] == pytest.approx(1 - 0.05 / 6) and levels[0] == pytest.approx(0.95)


def test_readings_that_disagree_say_so_under_a_stated_rule():
    readings = {"a": t_table(0.12, 0.01, 8), "b": t_table(-0.05, 0.01, 8)}

    def judge(level, plan=True):
        return {name: judge_samples(DPO, values, level, plan=plan) for name, values in readings.items()}

    family = holm_family(judge, 0.95, unit="readings")
    assert family.readings["a"].verdict == REPRODUCED and family.readings["b"].verdict == CONTRADICTED
    assert family.claim.verdict == REPRODUCED and "readings disagree: contradicted by b" in family.claim.why


def test_an_existential_claim_with_untested_readings_is_never_contradicted():
    """One reading contradicted and five not tested (a single seed each): an untested reading could still hold, so
    "some reading does it" is unresolved (the rule before 2026-12-07 said contradicted); with every reading tested
    and contradicted it is contradicted."""
    readings = {"tested": t_table(-0.05, 0.01, 8), **{f"untested{i}": [0.1] for i in range(5)}}

    def judge(level, plan=True):
        return {name: judge_samples(DPO, values, level, plan=plan) for name, values in readings.items()}

    family = holm_family(judge, 0.95, unit="readings")
    assert family.readings["tested"].verdict == CONTRADICTED
    assert family.claim.verdict == UNRESOLVED, family.claim.why
    assert "5 not tested" in family.claim.why and "could still hold" in family.claim.why
    readings.update({name: t_table(-0.05, 0.01, 8) for name in readings})
    assert holm_family(judge, 0.95, unit="readings").claim.verdict == CONTRADICTED


def growth_table(shallow: list[float], grown: list[float], scratch: list[float]) -> pd.DataFrame:
    rows = []
    for arm, losses in (("shallow", shallow), ("grown_value", grown), ("scratch", scratch)):
        for seed, loss in enumerate(losses):
            rows.append(
                {
                    "family": "llama",
                    "dataset": "shakespeare",
                    "width": 64,
                    "base_depth": 2,
                    "seed": seed,
                    "arm": arm,
                    "step": 600,
                    "test_loss": loss,
                    "blocks": 1,
                }
            )
    return pd.DataFrame(rows)


def test_the_ungrown_model_does_not_match_scratch_under_the_no_growth_control():
    from growcert.report.depth import depth_claims

    scratch = [1.8935, 1.8901, 1.8950, 1.8920, 1.8940, 1.8915]
    shallow = [s * 1.0043 + d for s, d in zip(scratch, (0.0004, -0.0008, 0.0010, -0.0003, 0.0005, -0.0006))]
    rows = depth_claims(pd.DataFrame(), growth_table(shallow, shallow, scratch))
    assert len(rows) == 1 and rows[0]["verdict"] != REPRODUCED
    # a grown model that beats the control clearly and closes most of the gap is reproduced
    grown = [s * 1.0005 + d / 4 for s, d in zip(scratch, (0.0004, -0.0008, 0.0010, -0.0003, 0.0005, -0.0006))]
    rows = depth_claims(pd.DataFrame(), growth_table(shallow, grown, scratch))
    assert rows[0]["verdict"] == REPRODUCED
    # without the control the claim cannot be judged
    no_control = growth_table(shallow, grown, scratch)
    rows = depth_claims(pd.DataFrame(), no_control[no_control["arm"] != "shallow"])
    assert rows[0]["verdict"] == NOT_TESTED and "control" in rows[0]["why"]


def test_the_growth_design_is_stated_at_the_papers_effect_and_the_null_at_the_gaps_lower_limit():
    """judge_growth's design figures: grown = scratch (the paper) and grown = control (the null), both stated in the
    control-to-scratch gap g, a nuisance measured on the control and scratch models and taken at its lower 80 % limit
    (as the spreads at their upper 80 % limits), never at its observed mean; and never moved by the grown model's
    losses."""
    from growcert.referee.claims import CLAIMS, GROWTH_FRACTION
    from growcert.referee.verdicts import judge_growth
    from growcert.stats.seeds import seeds_for_power, spread_upper, t_power

    scratch = np.array([1.8935, 1.8901, 1.8950, 1.8920, 1.8940, 1.8915])
    control = scratch * np.array([1.0060, 1.0020, 1.0075, 1.0010, 1.0050, 1.0035])
    grown = scratch * np.array([1.0030, 1.0005, 1.0040, 1.0010, 1.0020, 1.0015])
    effect, f = CLAIMS["p3_grown_vs_scratch"].effect, GROWTH_FRACTION
    judged = judge_growth(control, grown, scratch, 0.95, effect, f)
    gaps = (control - scratch) / scratch
    lower = gaps.mean() - scipy_stats.t.ppf(0.8, 5) * gaps.std(ddof=1) / math.sqrt(6)
    assert 0 < lower < gaps.mean() - 0.0004  # the lower limit is well below the observed gap here
    gain, excess = (control - grown) / scratch, (grown - scratch - f * (control - scratch)) / scratch
    gain_sd, excess_sd = (spread_upper(values.std(ddof=1), 6) for values in (gain, excess))
    reproduce = seeds_for_power(
        lambda n: t_power(lower, gain_sd, 0.0, n, 0.95) * t_power(-f * lower, excess_sd, 0.0, n, 0.95), 2
    )
    contradict = seeds_for_power(lambda n: t_power((1 - f) * lower, excess_sd, 0.0, n, 0.95), 2)
    assert (judged.design.reproduce, judged.design.contradict) == (reproduce, contradict)
    assert "lower 80 % limit" in judged.design.caveat
    shifted = judge_growth(control, grown - 0.001, scratch, 0.95, effect, f)  # grown better by a constant
    assert (shifted.design.reproduce, shifted.design.contradict) == (reproduce, contradict)


def test_a_universal_claim_holds_only_where_every_part_does():
    from growcert.referee.families import every_part, judge_family

    parts = {"context 64": t_table(0.6, 0.05, 8), **{f"context {c}": t_table(0.0, 0.05, 8) for c in (128, 256, 512)}}

    def judge(level, plan=True):
        return {name: judge_samples(SLOPE, values, level, plan=plan) for name, values in parts.items()}

    # one context reproduced and three contradicted: "d_align increases with width" fails (the old rule said reproduced)
    family = every_part(judge, 0.95, "contexts")
    assert family.readings["context 64"].verdict == REPRODUCED and family.claim.verdict == CONTRADICTED
    assert "intersection-union" in family.claim.why and family.scope("contexts").startswith("every context, every one")
    # every part reproduced, each at the full level (no correction): reproduced
    parts = {name: t_table(0.6, 0.05, 8) for name in parts}
    assert every_part(judge, 0.95, "contexts").claim.verdict == REPRODUCED
    # a part not tested: it cannot hold everywhere, so at best unresolved
    parts["context 64"] = [0.6]
    assert every_part(judge, 0.95, "contexts").claim.verdict == UNRESOLVED
    # the registry says which claims are universal, and why
    assert judge_family("p1_regime_budget", judge, 0.95, "contexts").quantifier == "universal"
    assert judge_family("p2_grokking", judge, 0.95, "readings").quantifier == "existential"


def test_a_contradiction_of_a_universal_claim_is_corrected_for_its_parts():
    from growcert.referee.families import every_part

    # four parts reproduced, one barely short of the SESOI at 95 % but not at Holm's 1 - 0.05/5
    parts = {**{f"p{i}": t_table(0.6, 0.05, 8) for i in range(4)}, "edge": t_table(0.18, 0.065, 8)}

    def judge(level, plan=True):
        return {name: judge_samples(SLOPE, values, level, plan=plan) for name, values in parts.items()}

    assert judge(0.95)["edge"].verdict == CONTRADICTED
    family = every_part(judge, 0.95, "contexts")
    assert family.readings["edge"].verdict == UNRESOLVED and family.claim.verdict == UNRESOLVED
