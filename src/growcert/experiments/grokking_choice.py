"""The two comparisons a user choosing an optimizer for a grokking-like task asks for (docs/science.md, "grokking
(P2)": choosing an optimizer), judged on a grokking run's summary by the referee's rule:

- p2_poprisk_vs_grokfast: PopulationRiskAdam's best reading (chosen on seeds 6-13, before seeds 14-21 ran:
  `BEST_READING`) against Grokfast-EMA, its best peer in the same run;
- p2_no_reading_beats_decay1: every gate reading against AdamW at weight decay 1, the run's control (universal:
  each reading must stay below the margin).

Each is judged in steps to 95 % held-out, paired by seed, as interval-censored bounds (verdicts.judge_steps; a
reading stopped at its seed's AdamW step under paired caps is censored there), as primary on the registered seeds
(claims.Claim.primary_seeds) and as secondary rows on every seed of the run and in CPU seconds to 95 %. A unit stops
at 95 % held-out, so its CPU seconds (its summary's cpu_seconds, every session part's) are its CPU time to 95 %, or
a lower bound of it when it stopped short; the evaluation grid bounds the CPU time of the step that reached 95 % as
it bounds the step, at the larger arm's CPU seconds per step (a wider interval, never a narrower one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from growcert.config import stage_settings
from growcert.experiments.common import format_steps, median_steps
from growcert.referee.claims import CLAIMS
from growcert.referee.families import judge_family
from growcert.referee.rows import claim_row
from growcert.referee.verdicts import LEVEL, Judgement, judge_steps

BEST_READING = "poprisk-gradient-microbatch-wd0.15"  # claims.BEST_READING_PRIMARY: chosen on seeds 6-13
PEER = "Grokfast-EMA wd=0.005 (L2)"
CONTROL = "AdamW wd=1"
PEER_CLAIM, CONTROL_CLAIM = "p2_poprisk_vs_grokfast", "p2_no_reading_beats_decay1"


def stop_steps(table: pd.DataFrame, arm: str, seeds: list[int], settings: dict[str, Any]) -> np.ndarray:
    """The step each seed's unit of `arm` stopped at when it did not reach 95 %: the cap, or with paired caps a
    gate reading's seed's AdamW step at the reading's decay (growcert.experiments.grokking.paired_baseline)."""
    cap = settings["steps"]
    if settings["cap"] != "paired" or not arm.startswith("poprisk-"):
        return np.full(len(seeds), float(cap))
    decay = float(table.loc[table["optimizer"] == arm, "weight_decay"].iloc[0])
    adamw = table[(table["optimizer"] == f"AdamW wd={decay:g}")].set_index("seed")["step_95"].astype(float)
    return np.array(
        [adamw.get(seed, math.nan) if math.isfinite(adamw.get(seed, math.nan)) else cap for seed in seeds], float
    )


def arm_values(table: pd.DataFrame, arm: str, seeds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(steps to 95 %, CPU seconds of the unit) of `arm` at `seeds`, NaN where the seed has no unit."""
    frame = table[table["optimizer"] == arm].set_index("seed")
    steps = pd.to_numeric(frame["step_95"], errors="coerce").reindex(seeds).to_numpy(float)
    return steps, pd.to_numeric(frame["cpu_seconds"], errors="coerce").reindex(seeds).to_numpy(float)


def judge_pair(
    key: str,
    table: pd.DataFrame,
    baseline: str,
    variant: str,
    seeds: list[int],
    settings: dict[str, Any],
    level: float,
    plan: bool,
    cpu: bool,
) -> Judgement:
    """Claim `key`'s effect of `variant` over `baseline` (baseline's steps / variant's) on `seeds`, in steps or, with
    `cpu`, in CPU seconds to 95 %."""
    cap, every = settings["steps"], settings["eval_every"]
    b_steps, b_cpu = arm_values(table, baseline, seeds)
    v_steps, v_cpu = arm_values(table, variant, seeds)
    v_stop = stop_steps(table, variant, seeds, settings)
    paired = v_stop if settings["cap"] == "paired" and variant.startswith("poprisk-") else None
    effect = CLAIMS[key].effect
    stopped_by = f"AdamW wd={table.loc[table['optimizer'] == variant, 'weight_decay'].iloc[0]:g}"
    if not cpu:
        return judge_steps(
            effect, b_steps, v_steps, level, cap, every, baseline, plan=plan, variant_cap=paired, paired_with=stopped_by
        )
    b_per_step = np.nanmedian(b_cpu / np.where(np.isfinite(b_steps), b_steps, cap))
    v_per_step = np.nanmedian(v_cpu / np.where(np.isfinite(v_steps), v_steps, v_stop))
    return judge_steps(
        effect,
        np.where(np.isfinite(b_steps), b_cpu, math.nan),
        np.where(np.isfinite(v_steps), v_cpu, math.nan),
        level,
        cap * b_per_step,
        every * max(b_per_step, v_per_step),
        f"{baseline} (CPU seconds)",
        plan=plan,
        variant_cap=None if paired is None else paired * v_per_step,
        paired_with=stopped_by,
    )


def choice_claims(table: pd.DataFrame, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Claim rows of both comparisons on grokking summary `table` (one row per unit: optimizer, weight_decay, seed,
    step_95, cpu_seconds) with the run's grokking `settings`: for each claim its primary row(s) on its registered
    seeds in steps, then secondary rows on every seed and in CPU seconds. Empty when the run lacks the arms or the
    registered seeds (the 8 seeds seen before the claims were registered judge neither)."""
    settings = stage_settings("grokking", settings)
    arms = set(table["optimizer"])
    if not {PEER, BEST_READING, CONTROL} <= arms or not set(CLAIMS[PEER_CLAIM].primary_seeds) & set(table["seed"]):
        return []  # the claims are judged from their registered look on: a run without those seeds judges neither
    all_seeds = sorted(int(seed) for seed in table["seed"].unique())
    readings = [arm for arm in dict.fromkeys(table["optimizer"]) if arm.startswith("poprisk-")]
    rows = []
    for key, baseline, variants in ((PEER_CLAIM, PEER, [BEST_READING]), (CONTROL_CLAIM, CONTROL, readings)):
        registered = [seed for seed in CLAIMS[key].primary_seeds if seed in all_seeds]
        for seeds, cpu, role in (
            (registered, False, "primary"),
            (all_seeds, False, "secondary"),
            (registered, True, "secondary"),
            (all_seeds, True, "secondary"),
        ):
            if not seeds:
                continue
            rows += family_rows(key, table, baseline, variants, seeds, settings, cpu, role)
    return rows


def family_rows(
    key: str,
    table: pd.DataFrame,
    baseline: str,
    variants: list[str],
    seeds: list[int],
    settings: dict[str, Any],
    cpu: bool,
    role: str,
) -> list[dict[str, Any]]:
    """One comparison's rows on `seeds`: with one variant its row; with several a part row per variant and the
    claim's row over them (families.judge_family: universal for the control claim). `role` primary makes the
    parts "part" rows and the claim's row primary; secondary rows are scoped by what differs."""
    unit = "CPU seconds to 95 %" if cpu else "steps to 95 %"
    scope = f"seeds {seeds[0]}-{seeds[-1]}, {unit}" + ("" if role == "primary" else ", secondary")

    def judge(level: float, plan: bool = True) -> dict[str, Judgement]:
        return {
            variant: judge_pair(key, table, baseline, variant, seeds, settings, level, plan, cpu)
            for variant in variants
        }

    medians = {
        arm: format_steps(median_steps(pd.Series(arm_values(table, arm, seeds)[0])), settings["steps"])
        for arm in [baseline, *variants]
    }
    note = f"{len(seeds)} seeds ({', '.join(map(str, seeds))}); median steps to 95 %: " + "; ".join(
        f"{arm}: {median}" for arm, median in medians.items()
    )
    this_run: Callable[[str], str] = lambda variant: f"{variant}: {medians[variant]} vs {baseline}: {medians[baseline]}"
    if len(variants) == 1:
        (variant,) = variants
        return [claim_row(key, judge(LEVEL)[variant], this_run(variant), note, scope=scope, role=role)]
    family = judge_family(key, judge, LEVEL, "readings")
    part_role = "part" if role == "primary" else "secondary"
    rows = [
        claim_row(key, judgement, this_run(name), note, scope=f"{name}, {scope}", role=part_role)
        for name, judgement in family.readings.items()
    ]
    rows.append(
        claim_row(
            key,
            family.claim,
            f"{len(variants)} readings against {baseline}",
            note,
            scope=f"{family.scope('readings')}, {scope}",
            role=role,
        )
    )
    return rows
