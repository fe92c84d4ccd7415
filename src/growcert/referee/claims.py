"""The claims and checks registries: every paper claim the pipeline judges, every implementation check
it runs, in one place (the rows a stage writes for them: `growcert.referee.rows`).

A `Claim` is what a paper says (its text and its number, docs/science.md), the `Effect` that measures
it (name, the paper's value of it, the null, the scale, how the interval over seeds is formed, its
smallest effect of interest), its pre-registered `primary` analysis (the checkpoint, point, reduction and
variant that decide it: other cells are secondary rows and never decide it), the reference run that
decides it (`decided_by`; the default run when none) and how this project judges it. The stage that
measures a claim writes rows with `growcert.referee.rows.claim_row(key, judgement, ...)` into
results/claims/*.csv; the verdict word comes from `growcert.referee.verdicts`, one of
reproduced, contradicted, unresolved, not tested at this scale. The report lists every registered
claim in registry order, each with the rows written for it (matched on `claim_id`), and says "not
measured" for a claim no stage wrote. A row may carry a `scope` (e.g. "llama/shakespeare width 32" or a
P2 variant): the same claim judged on one part of the grid.

A `Check` is a statement that holds by construction or by an exact identity when the code is right (the
coupling residual under squared loss, B_exact ≤ B_align from the same moments, the intervention ratio
at a vanishing step): it can only fail through a bug, so it is no evidence about the paper and is kept
apart, in results/checks/*.csv, with `passed` True or False.

A claim judged over parts (readings, contexts, series, growth experiments) states its `quantifier` with the
reason beside it: existential (some part: Holm) or universal (every part: intersection-union), judged by
`growcert.referee.families.judge_family`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from growcert.pipeline.artifacts import (
    ALIGNMENT_SUMMARY,
    DALIGN_VS_WIDTH,
    DEPTH,
    GROKKING,
    GROKKING_GATE,
    GROWTH,
    INTERVENTIONS,
    INTERVENTIONS_SUMMARY,
    MISALIGNMENT_VS_MK,
    MISALIGNMENT_VS_WIDTH,
    PINN,
    PINN_GATE,
    PLUGIN_VS_UNBIASED,
    PREFERENCE,
    PREFERENCE_GATE,
    RECOMMENDED_DEPTH,
    REGIME_CELLS,
    REGIME_DALIGN_VS_CONTEXT,
    REGIME_DALIGN_VS_WIDTH,
    REGIME_DIMS_VS_WIDTH,
    REGIME_PLUGIN_VS_UNBIASED,
    REGIME_SPREAD,
    THEORY,
)
from growcert.referee.advise_effects import (
    FIRST_ORDER_GAIN,
    FORMS,
    REGRET_FORM,
    REGRET_FORM_REASON,
    REGRET_JUDGED,
    REGRET_PRIMARY,
    regret_effect,
)
from growcert.referee.bounds import certificate_effect
from growcert.referee.effect import Effect
from growcert.referee.grokking_effects import (
    BEST_READING_PRIMARY,
    DECAY1_PRIMARY,
    DECAY1_SPEEDUP,
    GROKKING_SPEEDUP,
    GROKKING_THIRD_LOOK,
    NO_READING,
    PEER_SPEEDUP,
    THIRD_LOOK_SEEDS,
    PlannedLook,
)

EXISTENTIAL, UNIVERSAL = "existential", "universal"
# The paper's width trend as a slope of log d_align on log width: ≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072
PAPER_WIDTH_SLOPE = math.log(9.5 / 3.9) / math.log(3072 / 512)
# "Settled on a plateau": the two deepest levels within 10 % of each other, symmetric on the log scale
PLATEAU_MARGIN = 1 / 0.9
# "Grown matches scratch": the grown model closes at least this fraction of the gap between the no-growth
# control (the shallow model trained for the same total steps) and scratch, and beats the control
GROWTH_FRACTION = 0.5
# P1's intervention claim is judged at this relative step ε (docs/science.md, "Verdicts")
INTERVENTION_EPSILON = 0.1


@dataclass(frozen=True)
class Look:
    """One look at a claim: the day a committed reference run (`run`) first judged it on `seeds` seeds, the word it
    got then, and the commit that holds those claim rows (artifacts.CLAIM_ROWS in docs/reference-results/<run>/:
    `git show <commit>:<that path>`).
    `scope` names the part the seed count is of, when the claim's parts (contexts) had different seeds; `form` names
    the claim's first registered form (`FirstForm.name`) when that look judged in it ("": the primary analysis of
    today), so that a changed analysis of seen seeds counts as a look (growcert.referee.looks)."""

    date: str
    seeds: int
    word: str
    run: str
    commit: str
    scope: str = ""
    form: str = ""


@dataclass(frozen=True)
class FirstForm:
    """A primary analysis as first registered, when it changed after a result (docs/science.md, "Verdicts"):
    `name` (a few words), `text`, the `date` and `commit` of the change, and its `reason`. Its row is kept beside
    the new one as a secondary row that never decides the claim."""

    name: str
    text: str
    date: str
    commit: str
    reason: str


@dataclass(frozen=True)
class Claim:
    """One claim of a paper: its text and number, the effect that measures it and how it is judged here."""

    key: str
    paper: str
    text: str
    paper_value: str
    judged: str
    stage: str  # the command whose output holds the rows
    effect: Effect
    primary: str  # the pre-registered primary analysis: what decides the claim (docs/science.md, "Verdicts")
    evidence: tuple[str, ...] = ()  # figures (the figure registry's stems) and tables (stems under results/tables)
    references: tuple[str, ...] = ()  # the reference runs (docs/reference-results/<name>) that measure it
    decided_by: str | None = None  # the reference run whose primary row decides it (None: the default run)
    quantifier: str | None = None  # over its parts: EXISTENTIAL (some part) or UNIVERSAL (every part); None: no parts
    quantifier_reason: str = ""
    first_form: FirstForm | None = None  # the primary analysis as first registered, when it changed after a result
    looks: tuple[Look, ...] = ()  # every look at the claim in a committed reference run (growcert.referee.looks)
    planned: tuple[PlannedLook, ...] = ()  # looks registered before their seeds ran
    primary_seeds: tuple[int, ...] = ()  # the seeds the primary row is judged on (empty: every seed of the run)
    form: str = ""  # a comparison's registered form (advise_effects.FORMS), which orients its effect; "" for none
    form_reason: str = ""

    def __post_init__(self):
        if self.form and self.form not in FORMS:
            raise ValueError(f"claim {self.key}: form {self.form!r}, one of {', '.join(FORMS)}")


@dataclass(frozen=True)
class Check:
    """An implementation check: what must hold when the code is right, and which command checks it."""

    key: str
    paper: str
    text: str
    expected: str
    stage: str
    evidence: tuple[str, ...] = ()


DALIGN_SLOPE = Effect(
    "slope of log d_align on log width", PAPER_WIDTH_SLOPE, interval="Student t over the per-seed OLS slopes"
)


# The primary P1 cell (fixed before the p1-seeds seeds 8+ existed; docs/science.md, "Verdicts"): the paper's
# q(x, y) = ∇_z ℓ at the stream a block appended at the top would join, summed over positions as a growth step
# shared across positions sees it, at the end of training.
P1_PRIMARY = (
    "the last checkpoint, held-out pool, the last insertion point (the residual stream entering the final "
    "norm: where one more block at the top acts, the one point defined alike at every width and depth), "
    "reduction sum_positions (what a growth step shared across positions sees: Σ_t q_t), the llama family "
    "(the paper's headline numbers are LLaMA-style); other families, points, reductions and checkpoints are "
    "secondary rows"
)
P1_PRIMARY_FAMILY, P1_PRIMARY_REDUCTION = "llama", "sum_positions"


def p1_primary_cells(table: pd.DataFrame) -> pd.Series:
    """Which rows of a P1 table (alignment, misalignment or regime cells: columns point, reduction, and family and
    depth where present) are the primary analysis's: reduction sum_positions at the last insertion point of their
    model (the largest block index of each family/dataset/context/depth), the llama family where a family column
    says so. The checkpoint is chosen by the caller (the last one)."""
    number = table["point"].astype(str).str.removeprefix("block").astype(int)
    model = [column for column in ("family", "dataset", "context", "depth") if column in table.columns]
    last = number == (number.groupby([table[c].fillna(-1) for c in model]).transform("max") if model else number.max())
    chosen = (table["reduction"] == P1_PRIMARY_REDUCTION) & last
    if "family" in table.columns:
        chosen &= table["family"] == P1_PRIMARY_FAMILY
    return chosen


# Why each claim with parts is existential or universal (docs/science.md, "Verdicts"):
SOME_READING = (
    "existential: the paper leaves the gate's reading open (which gradient Adam's moments see, how the "
    "variance is formed), so the claim is that the algorithm, read some way, does it; Holm keeps the chance "
    "that some reading reproduces it by luck at the family's level"
)
EVERY_CONTEXT = (
    "universal: the paper states the width trend as a law of its models (every family, context and width "
    "range it shows), so a rise at one context and a fall at another is not 'd_align increases with "
    "width'"
)
EVERY_GROWTH = (
    "universal: the paper says grown networks match networks trained from scratch, not that some growth "
    "step does; each growth experiment (a different base depth) must"
)
READINGS = (
    "each PopulationRiskAdam reading (gate reading × variance source) is a part, compared with AdamW at its "
    "own weight decay; Holm across the readings, and the claim is reproduced for the readings that reproduce "
    "it (the paper leaves its reading open; readings that disagree are named)"
)
# Hand-laid records read as a table (ruff format would put each record's arguments one per line)
# fmt: off
CLAIMS: dict[str, Claim] = {claim.key: claim for claim in [
    Claim("p1_dalign_width", "P1", "d_align increases with width", "≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072",
          "the slope of log d_align on log width with a seed-level t interval in the primary series; universal "
          "across primary series when several depths or contexts have one (every one reproduced; contradicted when one "
          "is, at its Holm level)", "summarize-alignment",
          DALIGN_SLOPE, P1_PRIMARY, (DALIGN_VS_WIDTH.stem, PLUGIN_VS_UNBIASED.stem, ALIGNMENT_SUMMARY.stem),
          references=('p1-regime', 'p1-seeds'),
          quantifier=UNIVERSAL, quantifier_reason=EVERY_CONTEXT),
    Claim("p1_regime_budget", "P1", "d_align increases with width, on the regime map at matched budget",
          "≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072",
          "per context (a part), the primary cell's seed-level t interval on the slope of log d_align on log width; "
          "universal across contexts (every one reproduced; contradicted when one is, at its Holm level)",
          "summarize-regime", DALIGN_SLOPE,
          "per context: " + P1_PRIMARY.replace("the llama family (the paper's headline numbers are LLaMA-style); ", ""),
          (REGIME_DALIGN_VS_WIDTH.stem, REGIME_DALIGN_VS_CONTEXT.stem, REGIME_DIMS_VS_WIDTH.stem,
           REGIME_PLUGIN_VS_UNBIASED.stem, REGIME_SPREAD.stem, REGIME_CELLS.stem), references=('p1-regime', 'p1-seeds'),
          decided_by="p1-seeds",
          quantifier=UNIVERSAL, quantifier_reason=EVERY_CONTEXT,
          looks=(Look("2026-12-01", 3, "holds False in every context (before the four words)", "p1-regime", "60dd39a"),
                 Look("2026-12-02", 8, "unresolved at context 256, reproduced at context 512 (Bonferroni over cells)",
                      "p1-seeds", "0f51252"),
                 Look("2026-12-04", 16, "unresolved", "p1-seeds", "6826f0c",
                      scope="context 256 (context 512 stays at its 8 seeds)"))),
    Claim("p1_regime_loss", "P1", "d_align increases with width, on the regime map at matched held-out loss",
          "≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072",
          "as at matched budget, with d_align interpolated (log-linear, first crossing) at held-out loss levels "
          "every width and seed of a context reaches, so widths are compared at the same training progress",
          "summarize-regime", DALIGN_SLOPE,
          "per context: the lowest held-out loss level every width and seed reaches (the furthest common progress), "
          "held-out pool, the last insertion point, reduction sum_positions; other levels, points and reductions are "
          "secondary", (REGIME_DALIGN_VS_WIDTH.stem, REGIME_CELLS.stem), references=('p1-regime', 'p1-seeds'),
          decided_by="p1-regime",  # p1-seeds keeps two checkpoints, which reach no common held-out loss level
          quantifier=UNIVERSAL, quantifier_reason=EVERY_CONTEXT,
          looks=(Look("2026-12-01", 3, "holds False in every context (before the four words)", "p1-regime",
                      "60dd39a"),)),
    Claim("p1_misalignment_width", "P1", "p̂ falls with width at fixed (M, K)", "falls with width",
          "the slope of p̂ on log width with a seed-level t interval in the primary series, iid mode, at the "
          "reference (M, K)", "summarize-alignment",
          Effect("slope of p̂ on log width", None, direction=-1, interval="Student t over the per-seed OLS slopes",
                 sesoi=-0.05 / math.log(6),
                 sesoi_reason="a documented choice, the paper gives no number: p̂ falls by 0.05 over the paper's 6× "
                              "width range (512 → 3,072), the smallest fall of a probability in [0, ½] its figure "
                              "would show"),
          P1_PRIMARY + "; iid mode at the reference (M, K)", (MISALIGNMENT_VS_WIDTH.stem, MISALIGNMENT_VS_MK.stem),
          references=('p1-seeds',), decided_by="p1-seeds",
          quantifier=UNIVERSAL, quantifier_reason=EVERY_CONTEXT,
          first_form=FirstForm("no p̂ floor rule", "every primary series judged on its slope interval, whatever p̂ at "
                               "its smallest width", "2026-12-04", "4acb97c",
                               "p̂ ≥ 0 leaves a series at its floor no room to fall by the SESOI; at the primary cell "
                               "p̂ is 0.0004 at width 32 and 0 above, and this form read that as contradicted "
                               "(report.alignment.p_hat_floor)"),
          looks=(Look("2026-12-04", 8, "not tested at this scale", "p1-seeds", "6826f0c"),
                 Look("2026-12-06", 8, "contradicted (the first form, without the floor rule)", "p1-seeds", "9eebfdb",
                      form="no p̂ floor rule"))),
    Claim("p1_certificate_iid", "P1", "p̂ ≤ B_exact (iid)", "holds (Cantelli)",
          "universal (a bound must hold in every cell), with both sides' errors (bounds.judge_bound): per "
          "non-vacuous determined cell (B_exact < 0.5), p ≤ B_exact is shown when p's upper end (p̂ with the pool's "
          "finite size and the resampling, stats.intervals.misalignment_interval) is at or below B_exact's lower "
          "end (its moments' jackknife errors, stats.certificates.b_exact_interval), each one-sided at 1 − α/2 "
          "(97.5 % at the 95 % level); "
          "reproduced when it is shown in every such cell (an intersection-union test, no correction); contradicted "
          "when p > B_exact beyond both errors in some cell at its Holm level over the cells; unresolved otherwise; "
          "not tested when every B_exact is vacuous", "summarize-alignment",
          certificate_effect("the pool (its disjoint draws and the replicates)"),
          "every determined cell (a bound must hold in each), last checkpoint", (MISALIGNMENT_VS_WIDTH.stem,
                                                                                MISALIGNMENT_VS_MK.stem),
          references=("p1-bound",), decided_by="p1-bound"),
    Claim("p1_certificate_train_test", "P1", "p̂ ≤ B_exact (train → test)", "not covered by the theorem",
          "as the iid row (universal, both errors, Holm for a contradiction), with M from the training rows: p's "
          "interval counts the disjoint draws of M training and K held-out examples the two pools hold",
          "summarize-alignment",
          certificate_effect("the pools (their disjoint draws and the replicates)"),
          "every determined cell, last checkpoint, M from the training rows", (MISALIGNMENT_VS_WIDTH.stem,
                                                                              MISALIGNMENT_VS_MK.stem),
          references=("p1-bound",), decided_by="p1-bound"),
    Claim("p1_intervention_scale", "P1", "direct residual interventions: observed / predicted held-out change at "
          "small step scales", "96–99 %",
          "per seed, the median over draws and widths of observed / predicted held-out change at ε = "
          f"{INTERVENTION_EPSILON:g}; t interval over seeds; two-sided equivalence with [0.9, 1.1]. Secondary, never "
          "deciding (the paper's reading, which gives no ε): where first order stops holding, the largest ε of the "
          "grid up to which every ε's interval (the same per-seed statistic) lies in [0.9, 1.1], tested smallest "
          "first (a fixed-sequence test; report.interventions.first_order_reach); agreement as ε → 0 follows from "
          "differentiability, so that ε is the informative number",
          "summarize-interventions",
          Effect("observed / predicted held-out loss change at ε = " + f"{INTERVENTION_EPSILON:g}", None, null=0.0,
                 margin=1.1, margin_low=0.9, interval="Student t over per-seed medians",
                 sesoi_reason="the prediction right to within 10 %: the paper's worst case is 4 % off"),
          f"variant shared (a bias-like vector: it sees Σ_t q_t, P1's primary reduction), the last insertion point, "
          f"last checkpoint, relative step ε = {INTERVENTION_EPSILON:g} (an added output one-tenth of the stream's "
          "norm: a real growth step, where second-order terms of a few percent can show; at ε → 0 the ratio is 1 by "
          "construction, the check)", (INTERVENTIONS.stem, INTERVENTIONS_SUMMARY.stem),
          references=('p1-interventions',),
          decided_by="p1-interventions",
          looks=(Look("2026-12-03", 6, "contradicted", "p1-interventions", "b26115b"),)),
    Claim("p2_grokking", "P2", "grokking: steps to 95 % held-out, PopulationRiskAdam vs AdamW",
          "5,950 vs 29,450 (4.9×)", "per reading (the row's scope), the speed-up over AdamW at the reading's own "
          "decay, paired by seed, steps as interval-censored bounds; Holm across readings", "grokking",
          GROKKING_SPEEDUP, READINGS + "; steps to 95 % held-out, evaluated every eval_every steps",
          (GROKKING.stem, GROKKING_GATE.stem), references=('grokking-late', 'grokking-calibrated'),
          decided_by="grokking-calibrated",
          quantifier=EXISTENTIAL, quantifier_reason=SOME_READING,
          looks=(Look("2026-12-02", 1, "not tested at this scale", "grokking-late", "d10147b"),
                 Look("2026-12-02", 2, "unresolved (update-exact; the other readings not tested)", "grokking-late",
                      "8dcd0dc"),
                 Look("2026-12-02", 3, "not tested at this scale", "grokking-late", "88ddbac"),
                 Look("2026-12-03", 1, "not tested at this scale", "grokking-calibrated", "773e4d2"),
                 Look("2026-12-06", 8, "unresolved (both streaming readings contradicted)", "grokking-calibrated",
                      "a0db5cd")),
          planned=(GROKKING_THIRD_LOOK,)),
    Claim("p2_poprisk_vs_grokfast", "P2", "grokking: PopulationRiskAdam's best reading reaches 95 % held-out sooner "
          "than Grokfast-EMA", "not in the paper (its best peer in the same run)",
          "the speed-up of the best reading (chosen on seeds 6-13) over Grokfast-EMA, paired by seed, steps as "
          "interval-censored bounds, on seeds 14-21 only; all 16 seeds and CPU time to 95 % are secondary rows",
          "grokking", PEER_SPEEDUP, BEST_READING_PRIMARY, (GROKKING.stem,), references=("grokking-calibrated",),
          decided_by="grokking-calibrated", planned=(GROKKING_THIRD_LOOK,), primary_seeds=THIRD_LOOK_SEEDS),
    Claim("p2_no_reading_beats_decay1", "P2", "grokking: no gate reading beats AdamW at weight decay 1",
          "not in the paper (AdamW at decay 1 is the run's control: a median 1,200 steps at seeds 6-13)",
          "per reading (the row's scope), the speed-up over AdamW wd=1 paired by seed, steps as interval-censored "
          "bounds, on seeds 14-21 only, against the equivalence margin; every reading must stay below it; all 16 "
          "seeds and CPU time to 95 % are secondary rows",
          "grokking", DECAY1_SPEEDUP, DECAY1_PRIMARY, (GROKKING.stem,), references=("grokking-calibrated",),
          decided_by="grokking-calibrated", quantifier=UNIVERSAL, quantifier_reason=NO_READING,
          planned=(GROKKING_THIRD_LOOK,), primary_seeds=THIRD_LOOK_SEEDS),
    Claim("p2_pinn", "P2", "PINN: steps to test ℓ2 ≤ 0.40 vs tuned AdamW", "2.4× faster",
          "per reading (its scope), the speed-up of its best lr over the best AdamW lr, each lr chosen on the tuning "
          "seeds and judged on the others, paired by seed, steps as interval-censored bounds; Holm across readings",
          "pinn",
          # The mean of per-seed log ratios (the geometric-mean speed-up): the form its judged run used (every run
          # reached the target within the cap), the efficient one; a censored run leaves that end unbounded.
          Effect("geometric-mean speed-up in steps to the target ℓ2 (best AdamW lr / variant's best lr)", 2.4,
                 null=1.0, scale="log", estimand="mean", interval=GROKKING_SPEEDUP.interval),
          READINGS + "; each optimizer's lr chosen on pinn.tuning_seeds, never on the judged seeds",
          (PINN.stem, PINN_GATE.stem), references=('p2-small',), decided_by="p2-small",
          quantifier=EXISTENTIAL, quantifier_reason=SOME_READING,
          looks=(Look("2026-12-03", 8, "unresolved", "p2-small", "6052c43"),)),
    Claim("p2_dpo_accuracy", "P2", "noisy DPO: final reward accuracy", "0.566 → 0.641",
          "per reading (its scope), the paired difference in final held-out reward accuracy (variant − AdamW); Holm "
          "across readings", "preference",
          Effect("difference in final held-out reward accuracy (variant − AdamW)", 0.641 - 0.566,
                 interval="Student t over per-seed paired differences"),
          READINGS + "; the final step, held-out (clean) pairs", (PREFERENCE.stem, PREFERENCE_GATE.stem),
          references=('p2-small',), decided_by="p2-small",
          quantifier=EXISTENTIAL, quantifier_reason=SOME_READING,
          looks=(Look("2026-12-03", 8, "unresolved (the gradient readings contradicted)", "p2-small", "6052c43"),)),
    Claim("p2_dpo_drift", "P2", "noisy DPO: mean absolute reward drift", "3.05× smaller",
          "per reading (its scope), the paired ratio of final drift (AdamW / variant); Holm across readings",
          "preference",
          Effect("ratio of final reward drift (AdamW / variant)", 3.05, null=1.0, scale="log",
                 interval="Student t over per-seed log ratios (paired by seed)"),
          READINGS + "; the final step, held-out pairs", (PREFERENCE.stem, PREFERENCE_GATE.stem),
          references=('p2-small',), decided_by="p2-small",
          quantifier=EXISTENTIAL, quantifier_reason=SOME_READING,
          looks=(Look("2026-12-03", 8, "unresolved (the gradient readings contradicted)", "p2-small", "6052c43"),)),
    Claim("p2_drift_diffusion", "P2", "SGD drift grows as T, fluctuation as √T", "T¹ and T^½",
          "per seed, the larger deviation of the fitted drift and fluctuation exponents from 1 and ½ over every "
          "run; equivalence: reproduced when the interval's upper end is within 0.1", "theory",
          Effect("largest deviation of the fitted exponents from 1 and ½", 0.0, margin=0.1,
                 interval="Student t over seeds", sesoi_reason="an exponent within 0.1 of the paper's reads as T¹ "
                                                               "or T^½ on its log-log figure"),
          "every run of the seed, the larger of the two exponents' deviations", (THEORY.stem,),
          references=('p2-small',), decided_by="p2-small",
          looks=(Look("2026-12-03", 8, "reproduced", "p2-small", "6052c43"),)),
    Claim("p3_depth_plateau", "P3", "first-order value of an inserted block falls with depth", "falls, then plateaus",
          "per family/dataset, the per-seed log ratio of the raw first-order value (the paper's statistic: the "
          "activation-gradient signal ‖E[q hᵀ]‖²) at the deepest to the shallowest model depth, with a seed-level t "
          "interval; the scale-invariant value is a secondary row", "summarize-growth",
          Effect("log ratio of the raw first-order value, deepest / shallowest model", None, direction=-1,
                 interval="Student t over seeds", sesoi=-math.log(2),
                 sesoi_reason="a documented choice, the paper gives no number: the deepest value at most half the "
                              "shallowest, the smallest fall that reads as 'falls steadily'"),
          "the raw unbiased ‖E[q hᵀ]‖² at each model's last point, held-out pool, last checkpoint, across the depth "
          "grid (mean over widths of the per-seed log ratio)", (DEPTH.stem, RECOMMENDED_DEPTH.stem),
          references=('p3-depth',), decided_by="p3-depth",
          first_form=FirstForm("scale-invariant value", "the per-seed log ratio of the scale-invariant first-order "
                               "value, deepest / shallowest depth, with a seed-level t interval", "2026-12-03",
                               "dece266", "the raw value ‖E[q hᵀ]‖² is the paper's own statistic (diminishing gradient "
                               "norms), as an audit of the verdicts found"),
          looks=(Look("2026-12-02", 3, "unresolved (its first form, the scale-invariant value)", "p3-depth", "35bbfb4",
                      form="scale-invariant value"),
                 Look("2026-12-04", 3, "reproduced (seeds 3-5 alone)", "p3-depth", "1a09b24"),
                 Look("2026-12-04", 6, "reproduced", "p3-depth", "5327c18"))),
    Claim("p3_depth_settles", "P3", "first-order value of an inserted block settles on a plateau",
          "settles on a low plateau",
          "per family/dataset, the per-seed ratio of the scale-invariant first-order value at the deepest to the "
          "next-deepest level (the mean over widths of its log), with a seed-level t interval; equivalence: "
          "reproduced when the interval lies within ±10 % on the log scale, [0.9, 1/0.9]", "summarize-growth",
          Effect("ratio of the scale-invariant first-order value, deepest / next-deepest level", None, null=1.0,
                 scale="log", margin=PLATEAU_MARGIN, margin_low=1 / PLATEAU_MARGIN,
                 interval="Student t over per-seed log ratios",
                 sesoi_reason="two levels within 10 % of each other read as one plateau"),
          "the scale-invariant value (the block's output relative to the stream it joins: saturation is judged on "
          "it, docs/science.md P3) at each model's last point, held-out pool, last checkpoint, the two deepest model "
          "depths", (DEPTH.stem, RECOMMENDED_DEPTH.stem), references=('p3-depth',), decided_by="p3-depth",
          looks=(Look("2026-12-02", 3, "unresolved", "p3-depth", "35bbfb4"),
                 Look("2026-12-04", 3, "unresolved (seeds 3-5 alone)", "p3-depth", "1a09b24"),
                 Look("2026-12-04", 6, "unresolved", "p3-depth", "5327c18"))),
    Claim("p3_grown_vs_scratch", "P3", "grown networks match networks trained from scratch", "match or beat",
          "per growth experiment (a part), paired by seed: the grown model beats the no-growth control (the shallow "
          f"model trained for the same total steps) beyond noise and closes at least {1 - GROWTH_FRACTION:.0%} of the "
          "control-to-scratch gap (verdicts.judge_growth); universal across experiments (every one reproduced; "
          "contradicted when one is, at its Holm level)", "summarize-growth",
          Effect("grown's excess held-out loss over scratch beyond half the no-growth control's, relative to scratch",
                 0.0, margin=0.0, interval="Student t over per-seed paired differences",
                 sesoi_reason=f"the margin is {GROWTH_FRACTION:.0%} of the control-to-scratch gap, so it shrinks "
                              "with the depth effect and an ungrown model cannot meet it"),
          "final held-out loss of the grown_value arm, the shallow arm (control) and the scratch arm, paired by seed",
          (GROWTH.stem,), references=('p3-depth',), decided_by="p3-depth",
          quantifier=UNIVERSAL, quantifier_reason=EVERY_GROWTH,
          looks=(Look("2026-12-02", 3, "reproduced for 2 → 3, unresolved for 4 → 6 (judged against scratch alone, no "
                      "control yet)", "p3-depth", "35bbfb4"),
                 Look("2026-12-04", 3, "unresolved (seeds 3-5 alone)", "p3-depth", "1a09b24"),
                 Look("2026-12-04", 6, "unresolved", "p3-depth", "5327c18"))),
    Claim("advise_beats_first_order", "P1+P3", "advise's grow-here points beat always-growing at the largest "
          "first-order value on held-out loss", "(growcert's own rule; no paper states it)",
          "per checkpoint, the held-out gain (control minus grown loss, on held-out examples advise never saw) at "
          "advise's recommended point (none: no growth, gain 0) minus the gain at the point of largest first-order "
          "value (the TINY/GradMax rule, no certificate); per seed, the mean over its checkpoints; Student t over "
          "seeds (verdicts.judge_samples)", "advise-check",
          FIRST_ORDER_GAIN,
          "variant new_block (only the inserted block trains, so the outcome is the growth P3's value measures), every "
          "checkpoint of the reference run, grown for the S steps at the lr chosen on the tuning checkpoint; variant "
          "whole is a secondary row",
          references=("advise-check",), decided_by="advise-check",
          first_form=FirstForm("S = 50, lr = 0.001, untuned", "the same effect on the run that grew every point for "
                               "S = 50 steps at lr 0.001, the schema's defaults, not tuned",
                               "2026-12-06", "0b42fa2",
                               "the design fixes S and lr on a tuning checkpoint that is never scored, before the "
                               "scored run; the first run used the schema's defaults instead, and the tuning (a rule "
                               "fixed before its grid was run) chose S = 100, lr = 0.003, at which the run was made "
                               "again on the same checkpoints"),
          looks=(Look("2026-12-06", 8, "unresolved (S = 50, lr = 0.001, untuned: the first form)", "advise-check",
                      "d48986e", form="S = 50, lr = 0.001, untuned"),
                 Look("2026-12-07", 8, "reproduced (S = 100, lr = 0.003, tuned on the tuning checkpoint)",
                      "advise-check", "244fda1",
                      # the same seeds, judged again since on more checkpoints of them (the plateau ones) and with a
                      # third growth procedure: a changed analysis of seen seeds, so that judgement was a look too
                      form="112 checkpoints, before the plateau checkpoints"))),
    Claim("advise_regret_below_train_on", "P1+P2+P3", "at matched compute, advise's regret is lower than always "
          "training on's", "(growcert's own rule; no paper states it)", REGRET_JUDGED, "advise-check",
          regret_effect(REGRET_FORM), REGRET_PRIMARY, references=("advise-check",), decided_by="advise-check",
          quantifier=UNIVERSAL, quantifier_reason="scores are never pooled across families (their units differ), so "
          "advise is shown better than training on only where it is in every family it advises",
          form=REGRET_FORM, form_reason=REGRET_FORM_REASON),
]}

CHECKS: dict[str, Check] = {check.key: check for check in [
    Check("p1_certificate_order", "P1", "B_exact ≤ B_align", "holds in every determined cell (same moments)",
          "summarize-alignment", (MISALIGNMENT_VS_WIDTH.stem,)),
    Check("p1_intervention_ratio", "P1", "observed/predicted held-out change at the smallest ε",
          "within 5 % of 1 (first order, by construction as ε → 0)", "summarize-interventions",
          (INTERVENTIONS.stem, INTERVENTIONS_SUMMARY.stem)),
    Check("p1_intervention_sign", "P1", "the predicted sign of the held-out change at the smallest ε",
          "≥ 95 % agreement (first order)", "summarize-interventions",
          (INTERVENTIONS.stem, INTERVENTIONS_SUMMARY.stem)),
    Check("p2_reservoir_invisible", "P2", "reservoir is invisible to the test set (G_Q on ker W_S)",
          "0 (Prop. 3.2), below 1e-2 of the channel", "theory", (THEORY.stem,)),
    Check("p2_benign_noise", "P2", "label noise in the reservoir is benign",
          "test response to reservoir noise < 1e-2 × channel noise of the same norm", "theory", (THEORY.stem,)),
    Check("p2_coupling_residual", "P2", "train–test coupling residual R_⊥ = 0 under squared loss",
          "below its numerical-zero cap in every squared-loss run", "theory", (THEORY.stem,)),
]}
# fmt: on
