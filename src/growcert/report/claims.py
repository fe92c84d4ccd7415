"""The claims and checks registries: every paper claim the pipeline judges, every implementation check
it runs, in one place, and their row types.

A `Claim` is what a paper says (its text and its number, docs/science.md), the `Effect` that measures
it (name, the paper's value of it, the null, the scale, how the interval over seeds is formed) and how
this project judges it. The stage that measures a claim writes rows with `claim_row(key, judgement,
...)` into results/claims/*.csv; the verdict word comes from `growcert.report.verdicts`, one of
reproduced, contradicted, unresolved, not tested at this scale. The report lists every registered
claim in registry order, each with the rows written for it (matched on `claim_id`), and says "not
measured" for a claim no stage wrote. A row may carry a `scope` (e.g. "llama/shakespeare width 32" or a
P2 variant): the same claim judged on one part of the grid.

A `Check` is a statement that holds by construction or by an exact identity when the code is right (the
coupling residual under squared loss, B_exact ≤ B_align from the same moments, the intervention ratio
at a vanishing step): it can only fail through a bug, so it is no evidence about the paper and is kept
apart, in results/checks/*.csv, with `passed` True or False.

Claim row columns (ROW_COLUMNS): claim_id, paper, claim (the registered text, plus its scope),
paper_value, effect, paper_effect, estimate, low, high, level, seeds, verdict, why, this_run, note.
Check row columns (CHECK_COLUMNS): check_id, paper, check, expected, passed, this_run, note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from growcert.files import write_csv
from growcert.report.figure_registry import (DALIGN_VS_WIDTH, DEPTH, GROKKING, GROKKING_GATE, GROWTH, INTERVENTIONS,
                                             MISALIGNMENT_VS_MK, MISALIGNMENT_VS_WIDTH, PINN, PINN_GATE,
                                             PLUGIN_VS_UNBIASED, PREFERENCE, PREFERENCE_GATE, REGIME_DALIGN_VS_CONTEXT,
                                             REGIME_DALIGN_VS_WIDTH, REGIME_DIMS_VS_WIDTH, REGIME_PLUGIN_VS_UNBIASED,
                                             REGIME_SPREAD, THEORY)
from growcert.report.verdicts import Effect, Judgement, equivalence_region

ROW_COLUMNS = ["claim_id", "paper", "claim", "paper_value", "effect", "paper_effect", "estimate", "low", "high",
               "level", "seeds", "verdict", "why", "this_run", "note"]
CHECK_COLUMNS = ["check_id", "paper", "check", "expected", "passed", "this_run", "note"]
# The paper's width trend as a slope of log d_align on log width: ≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072
PAPER_WIDTH_SLOPE = math.log(9.5 / 3.9) / math.log(3072 / 512)
# "Settled on a plateau": the two deepest levels within 10 % of each other, symmetric on the log scale
PLATEAU_MARGIN = 1 / 0.9


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
    evidence: tuple[str, ...] = ()  # figures (the figure registry's stems) and tables (stems under results/tables)
    references: tuple[str, ...] = ()  # the reference runs (docs/reference-results/<name>) sized to decide it


@dataclass(frozen=True)
class Check:
    """An implementation check: what must hold when the code is right, and which command checks it."""

    key: str
    paper: str
    text: str
    expected: str
    stage: str
    evidence: tuple[str, ...] = ()


DALIGN_SLOPE = Effect("slope of log d_align on log width", PAPER_WIDTH_SLOPE,
                      interval="Student t over the per-seed OLS slopes")
GROKKING_SPEEDUP = Effect("speed-up in steps to 95 % held-out (AdamW at the baseline decay / variant)",
                          29_450 / 5_950, null=1.0, scale="log",
                          interval="Student t over per-seed log ratios (paired by seed); with a censored seed, "
                                   "the order-statistic interval for their median")
CLAIMS: dict[str, Claim] = {claim.key: claim for claim in [
    Claim("p1_dalign_width", "P1", "d_align increases with width", "≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072",
          "per (point, reduction) series, the slope of log d_align on log width with a seed-level t interval, "
          "held-out pool, last checkpoint; the claim over the series with Bonferroni", "summarize-alignment",
          DALIGN_SLOPE, (DALIGN_VS_WIDTH.stem, PLUGIN_VS_UNBIASED.stem, "p1_alignment_summary"), references=('p1-regime', 'p1-seeds')),
    Claim("p1_regime_budget", "P1", "d_align increases with width, on the regime map at matched budget",
          "≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072",
          "per context (the row's scope), every (step, point, reduction) cell's seed-level t interval on the slope "
          "of log d_align on log width, with Bonferroni over the context's cells", "summarize-regime",
          DALIGN_SLOPE, (REGIME_DALIGN_VS_WIDTH.stem, REGIME_DALIGN_VS_CONTEXT.stem, REGIME_DIMS_VS_WIDTH.stem,
                         REGIME_PLUGIN_VS_UNBIASED.stem, REGIME_SPREAD.stem, "p1_regime_cells"), references=('p1-regime', 'p1-seeds')),
    Claim("p1_regime_loss", "P1", "d_align increases with width, on the regime map at matched held-out loss",
          "≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072",
          "as at matched budget, with d_align interpolated (log-linear, first crossing) at held-out loss levels "
          "every width and seed of a context reaches, so widths are compared at the same training progress",
          "summarize-regime", DALIGN_SLOPE, (REGIME_DALIGN_VS_WIDTH.stem, "p1_regime_cells"), references=('p1-regime', 'p1-seeds')),
    Claim("p1_misalignment_width", "P1", "p̂ falls with width at fixed (M, K)", "falls with width",
          "per (point, reduction) series at the reference (M, K), iid mode, the slope of p̂ on log width with a "
          "seed-level t interval; the claim over the series with Bonferroni", "summarize-alignment",
          Effect("slope of p̂ on log width", None, direction=-1, interval="Student t over the per-seed OLS slopes"),
          (MISALIGNMENT_VS_WIDTH.stem, MISALIGNMENT_VS_MK.stem)),
    Claim("p1_certificate_iid", "P1", "p̂ ≤ B_exact (iid)", "holds (Cantelli)",
          "every determined cell: p̂ ≤ B_exact at the point estimate (reproduced if every cell, with at least one "
          "non-vacuous B_exact < 0.5; contradicted if some cell's Wilson interval lies wholly above B_exact; not "
          "tested if every B_exact is vacuous)", "summarize-alignment",
          Effect("fraction of cells with p̂ ≤ B_exact", 1.0, interval="a count over cells at the point estimate, "
                 "Wilson intervals per cell"), (MISALIGNMENT_VS_WIDTH.stem, MISALIGNMENT_VS_MK.stem)),
    Claim("p1_certificate_train_test", "P1", "p̂ ≤ B_exact (train → test)", "not covered by the theorem",
          "as the iid row, with M from the training rows", "summarize-alignment",
          Effect("fraction of cells with p̂ ≤ B_exact", 1.0, interval="a count over cells at the point estimate, "
                 "Wilson intervals per cell"), (MISALIGNMENT_VS_WIDTH.stem, MISALIGNMENT_VS_MK.stem)),
    Claim("p2_grokking", "P2", "grokking: steps to 95 % held-out, PopulationRiskAdam vs AdamW",
          "5,950 vs 29,450 (4.9×)", "per variant (gate reading × variance source × decay, the row's scope), the "
          "speed-up over AdamW at the paper's small decay, paired by seed, censored runs censored; the claim over "
          "every variant with Bonferroni", "grokking", GROKKING_SPEEDUP, (GROKKING.stem, GROKKING_GATE.stem), references=('grokking-late',)),
    Claim("p2_pinn", "P2", "PINN: steps to test ℓ2 ≤ 0.40 vs tuned AdamW", "2.4× faster",
          "per variant (its scope), the speed-up of its best lr over the best AdamW lr, paired by seed, censored runs "
          "censored, never below one evaluation interval; the claim over every variant with Bonferroni", "pinn",
          Effect("speed-up in steps to the target ℓ2 (best AdamW lr / variant's best lr)", 2.4, null=1.0,
                 scale="log", interval=GROKKING_SPEEDUP.interval), (PINN.stem, PINN_GATE.stem)),
    Claim("p2_dpo_accuracy", "P2", "noisy DPO: final reward accuracy", "0.566 → 0.641",
          "per variant (its scope), the paired difference in final held-out reward accuracy (variant − AdamW); the "
          "claim over every variant with Bonferroni", "preference",
          Effect("difference in final held-out reward accuracy (variant − AdamW)", 0.641 - 0.566,
                 interval="Student t over per-seed paired differences"), (PREFERENCE.stem, PREFERENCE_GATE.stem)),
    Claim("p2_dpo_drift", "P2", "noisy DPO: mean absolute reward drift", "3.05× smaller",
          "per variant (its scope), the paired ratio of final drift (AdamW / variant); the claim over every variant "
          "with Bonferroni", "preference",
          Effect("ratio of final reward drift (AdamW / variant)", 3.05, null=1.0, scale="log",
                 interval="Student t over per-seed log ratios (paired by seed)"), (PREFERENCE.stem, PREFERENCE_GATE.stem)),
    Claim("p2_drift_diffusion", "P2", "SGD drift grows as T, fluctuation as √T", "T¹ and T^½",
          "per seed, the larger deviation of the fitted drift and fluctuation exponents from 1 and ½ over every "
          "run; equivalence: reproduced when the interval's upper end is within ±0.1", "theory",
          Effect("largest deviation of the fitted exponents from 1 and ½", 0.0, margin=0.1,
                 interval="Student t over seeds"), (THEORY.stem,)),
    Claim("p3_depth_plateau", "P3", "first-order value of an inserted block falls with depth", "falls, then plateaus",
          "per family/dataset, the per-seed log ratio of the scale-invariant first-order value at the deepest to the "
          "shallowest level, with a seed-level t interval (the plateau itself: the p3-depth reference run)",
          "summarize-growth",
          Effect("log ratio of the scale-invariant first-order value, deepest / shallowest", None, direction=-1,
                 interval="Student t over seeds"), (DEPTH.stem, "p3_recommended_depth"), references=('p3-depth',)),
    Claim("p3_depth_settles", "P3", "first-order value of an inserted block settles on a plateau",
          "settles on a low plateau",
          "per family/dataset, the per-seed ratio of the scale-invariant first-order value at the deepest to the "
          "next-deepest level (the mean over widths of its log), with a seed-level t interval; equivalence: "
          "reproduced when the interval lies within ±10 % on the log scale, [0.9, 1/0.9]", "summarize-growth",
          Effect("ratio of the scale-invariant first-order value, deepest / next-deepest level", None, null=1.0,
                 scale="log", margin=PLATEAU_MARGIN, margin_low=1 / PLATEAU_MARGIN,
                 interval="Student t over per-seed log ratios"), (DEPTH.stem, "p3_recommended_depth"),
          references=('p3-depth',)),
    Claim("p3_grown_vs_scratch", "P3", "grown networks match networks trained from scratch", "match or beat",
          "per family/dataset/width, the paired relative excess of grown over scratch final held-out loss; "
          "equivalence: reproduced when the interval's upper end is at most +1 %", "summarize-growth",
          Effect("relative excess held-out loss, (grown − scratch) / scratch", 0.0, margin=0.01,
                 interval="Student t over per-seed paired differences"), (GROWTH.stem,), references=('p3-depth',)),
]}

CHECKS: dict[str, Check] = {check.key: check for check in [
    Check("p1_certificate_order", "P1", "B_exact ≤ B_align", "holds in every determined cell (same moments)",
          "summarize-alignment", (MISALIGNMENT_VS_WIDTH.stem,)),
    Check("p1_intervention_ratio", "P1", "observed/predicted held-out change at the smallest ε",
          "within 5 % of 1 (first order, by construction as ε → 0)", "summarize-interventions",
          (INTERVENTIONS.stem, "p1_interventions_summary")),
    Check("p1_intervention_sign", "P1", "the predicted sign of the held-out change at the smallest ε",
          "≥ 95 % agreement (first order)", "summarize-interventions", (INTERVENTIONS.stem, "p1_interventions_summary")),
    Check("p2_reservoir_invisible", "P2", "reservoir is invisible to the test set (G_Q on ker W_S)",
          "0 (Prop. 3.2), below 1e-2 of the channel", "theory", (THEORY.stem,)),
    Check("p2_benign_noise", "P2", "label noise in the reservoir is benign",
          "test response to reservoir noise < 1e-2 × channel noise of the same norm", "theory", (THEORY.stem,)),
    Check("p2_coupling_residual", "P2", "train–test coupling residual R_⊥ = 0 under squared loss",
          "below its numerical-zero cap in every squared-loss run", "theory", (THEORY.stem,)),
]}


def _number(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def claim_row(key: str, judgement: Judgement, this_run: str, note: str, scope: str | None = None) -> dict[str, Any]:
    """A row of results/claims/*.csv for registered claim `key` (KeyError for an unregistered one)."""
    claim = CLAIMS[key]
    effect = claim.effect
    paper_effect = (equivalence_region(effect) if effect.margin is not None else
                    f"{effect.paper:.3g}" if effect.paper is not None else
                    ("> " if effect.direction > 0 else "< ") + f"{effect.null:g}")
    return {"claim_id": key, "paper": claim.paper, "claim": claim.text + (f" ({scope})" if scope else ""),
            "paper_value": claim.paper_value, "effect": effect.name, "paper_effect": paper_effect,
            "estimate": _number(judgement.estimate), "low": _number(judgement.low), "high": _number(judgement.high),
            "level": judgement.level, "seeds": judgement.seeds, "verdict": judgement.verdict, "why": judgement.why,
            "this_run": this_run, "note": note}


def check_row(key: str, passed: bool, this_run: str, note: str, scope: str | None = None) -> dict[str, Any]:
    """A row of results/checks/*.csv for registered check `key`."""
    check = CHECKS[key]
    return {"check_id": key, "paper": check.paper, "check": check.text + (f" ({scope})" if scope else ""),
            "expected": check.expected, "passed": bool(passed), "this_run": this_run, "note": note}


def write_rows(rows: list[dict[str, Any]], claims: str | Path | None = None, checks: str | Path | None = None) -> None:
    """Claim rows to `claims`, check rows (those with a check_id) to `checks`; a file given is always written,
    with its header even when no row is of its kind."""
    for path, key, columns in ((claims, "claim_id", ROW_COLUMNS), (checks, "check_id", CHECK_COLUMNS)):
        kind = [row for row in rows if key in row]
        if kind and path is None:
            raise ValueError(f"{len(kind)} rows with a {key} but no file to write them to")
        if path is not None:
            write_csv(pd.DataFrame(kind, columns=columns), path)
