"""How the grokking reference runs judge P2's grokking claim from their kept tables, and how grokking-calibrated's
pipeline units (rule p2_unit: summary and curves, artifacts.SUMMARY and CURVES, in <units>/<arm>/seed<s>/, CPU
time in Snakemake's benchmark file <results>/benchmarks/p2_unit/grokking/<arm>/seed<s>.tsv) become its summary and
curves.

The claim rows are growcert.experiments.grokking_report.grokking_claims on the summary (artifacts.SUMMARY) with the
settings the run's provenance records (plan); the reference table (artifacts.REFERENCE_TABLE) is one row per arm:
steps to 95 % per seed (a censored seed, not reached by the cap, as "> cap"), the median (censored seeds beyond the
cap) and the speed-up verdict.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from growcert.experiments.common import format_steps, median_steps
from growcert.experiments.grokking_choice import choice_claims
from growcert.experiments.grokking_report import grokking_claims
from growcert.pipeline.artifacts import (
    CLAIM_ROWS,
    CURVES,
    REFERENCE_TABLE,
    SUMMARY,
    UNIT_CPU_SECONDS,
    UNIT_FOLDER,
    UNIT_LOG_FILE,
)
from growcert.referee.claims import GROKKING_SPEEDUP
from growcert.referee.rows import ROW_COLUMNS
from growcert.referee.verdicts import LEVEL, judge_steps

LATE_BASELINE = "AdamW wd=0.01"  # grokking-late's baseline arm: every speed-up is measured against it
UNCALIBRATED = " [uncalibrated first attempt]"  # grokking-late's rows: they never decide P2's grokking claim


RESUMED_UNDER_OTHER_NUMERICS = " †"  # marks a seed whose unit a resume continued under other CPU kernels


def steps_text(steps: pd.Series, stopped: pd.Series | int, changed: pd.Series | None = None) -> str:
    """Steps to 95 % per seed, a censored seed as "> the step it stopped at" (`stopped`: per seed, or the cap); a
    seed whose unit was resumed under other numerics (`changed`) marked " †"."""
    stopped = stopped if isinstance(stopped, pd.Series) else pd.Series(stopped, index=steps.index)
    changed = changed if changed is not None else pd.Series(False, index=steps.index)
    return ", ".join(
        (f"{int(step):,}" if pd.notna(step) else f"> {int(stop):,}") + (RESUMED_UNDER_OTHER_NUMERICS if mark else "")
        for step, stop, mark in zip(steps, stopped, changed)
    )


def numerics_changed(frame: pd.DataFrame) -> pd.Series:
    """Per row, whether its unit was resumed under other numerics (False for a unit made before they were kept)."""
    if "numerics_changed" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["numerics_changed"].astype(str).str.lower().eq("true")


def baseline_name(decay: float) -> str:
    """The AdamW arm's table name at a decay (experiments.grokking.optimizer_arms)."""
    return f"AdamW wd={decay:g}"


def late_settings(plan: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """grokking-late's grokking settings of its late regime (plan: common, late, arms), at one seed."""
    common, regime = plan["common"], plan["late"]
    model = {**common.get("model", {}), "architecture": regime["architecture"]}
    return {
        **{k: v for k, v in common.items() if k != "model"},
        **plan["arms"],
        "p": regime["p"],
        "seeds": [seed],
        "train_fraction": regime["train_fraction"],
        "batch_size": regime["batch_size"],
        "model": model,
        "only_arms": None,
    }


def late_arm_table(summary: pd.DataFrame, cap: int, eval_every: int, level: float) -> pd.DataFrame:
    """grokking-late's table: per regime and arm, steps per seed, the median, wall time per step, and the speed-up
    over AdamW wd=0.01 of the same regime, paired by seed (growcert.referee.verdicts.judge_steps)."""
    rows = []
    for (regime, arm), frame in summary.groupby(["regime", "optimizer"], sort=False):
        frame = frame.sort_values("seed")
        steps = pd.to_numeric(frame["step_95"], errors="coerce").astype(float)
        row = {
            "regime": regime,
            "optimizer": arm,
            "seeds": len(frame),
            "reached": int(steps.notna().sum()),
            "steps_per_seed": steps_text(steps, cap),
            "median_step_95": format_steps(median_steps(steps), cap),
            "seconds_per_step": float(frame["seconds"].sum() / steps.fillna(cap).sum()),
            "cap": cap,
        }
        baseline = summary[(summary["regime"] == regime) & (summary["optimizer"] == LATE_BASELINE)]
        if arm != LATE_BASELINE and len(baseline):
            paired = baseline.set_index("seed")["step_95"].astype(float)
            mine = frame.set_index("seed")["step_95"].astype(float)
            seeds = paired.index.intersection(mine.index)
            judged = judge_steps(
                GROKKING_SPEEDUP,
                paired[seeds].to_numpy(),
                mine[seeds].to_numpy(),
                level,
                cap,
                eval_every,
                LATE_BASELINE,
            )
            row.update(
                {
                    "speedup": judged.estimate,
                    "speedup_low": judged.low,
                    "speedup_high": judged.high,
                    "level": judged.level,
                    "paired_seeds": judged.seeds,
                    "verdict": judged.verdict,
                    "seeds_to_reproduce": judged.seeds_to_reproduce,
                    "seeds_to_contradict": judged.seeds_to_contradict,
                    "why": judged.why,
                }
            )
        rows.append(row)
    return pd.DataFrame(rows)


def judge_grokking_late(folder: Path, record: dict[str, Any]) -> None:
    """grokking-late (the uncalibrated first attempt): the reference table and claim rows (artifacts.REFERENCE_TABLE,
    CLAIM_ROWS) from the summary (SUMMARY); its claim rows are secondary and labelled so (grokking-calibrated decides
    P2's grokking claim)."""
    plan = record["plan"]  # the retired driver's plan, or an export's (`reference`: the config's settings)
    summary = pd.read_csv(SUMMARY.path(folder))
    settings = plan["reference"]["settings"] if "reference" in plan else late_settings(plan)
    cap, eval_every = settings["steps"], settings["eval_every"]
    late_arm_table(summary, cap, eval_every, LEVEL).to_csv(REFERENCE_TABLE.path(folder), index=False)
    late = summary[summary["regime"] == "late"]
    settings = {**settings, "seeds": sorted(late["seed"].unique().tolist()) or [0]}
    claims = (
        grokking_claims(late, settings, reference=folder.name) if (late["optimizer"] == LATE_BASELINE).any() else []
    )
    claims = [{**row, "role": "secondary", "claim": row["claim"] + UNCALIBRATED} for row in claims]
    pd.DataFrame(claims, columns=ROW_COLUMNS).to_csv(CLAIM_ROWS.path(folder), index=False)


def calibrated_arm_table(summary: pd.DataFrame, claims: pd.DataFrame, cap: int, decay: float) -> pd.DataFrame:
    """grokking-calibrated's table: per arm, steps per seed, the median, CPU seconds per step and to 95 % per seed
    (censored: beyond the step the unit stopped at, `steps_run`: the cap, or its seed's AdamW step under paired
    caps, and beyond that step's CPU time; "≈": a unit whose own cost per step is unknown, at its arm's), each gate
    reading's word from `claims`, and the cost over AdamW in CPU seconds per step (a lower bound where the units'
    CPU time is, `unit_rows`); wall seconds of training per step beside it bound one thread's CPU time above."""
    rows = []
    for arm, frame in summary.groupby("optimizer", sort=False):
        frame = frame.sort_values("seed")
        steps = pd.to_numeric(frame["step_95"], errors="coerce").astype(float)
        stopped = frame["steps_run"].astype(float)
        ran = steps.fillna(stopped)
        per_step = frame["cpu_seconds_per_step"].astype(float)
        arm_per_step = float((per_step * ran).sum() / ran[per_step.notna()].sum())
        time_to = [
            ("" if pd.notna(s) else "> ") + ("" if pd.notna(unit) else "≈ ") + f"{t:,.0f}"
            for s, unit, t in zip(steps, per_step, per_step.fillna(arm_per_step) * ran)
        ]
        median = median_steps(steps)
        median_text = (
            format_steps(median, cap)
            if math.isfinite(median) or (stopped >= cap).all()
            else "not reached in half the seeds (stopped at their seed's AdamW step)"
        )
        row = {
            "optimizer": arm,
            "seeds": len(frame),
            "reached": int(steps.notna().sum()),
            "steps_per_seed": steps_text(steps, stopped, numerics_changed(frame)),
            "median_step_95": median_text,
            "cpu_seconds_per_step": arm_per_step,
            "wall_seconds_per_step": float(frame["seconds"].sum() / stopped.sum()),
            "cpu_seconds_to_95_per_seed": ", ".join(time_to),
            "cap": cap,
        }
        part = claims[claims["claim"].str.endswith(f"({arm})")] if len(claims) else claims
        if len(part):
            judged = part.iloc[0]
            row.update(
                {
                    "speedup": judged["estimate"],
                    "speedup_low": judged["low"],
                    "speedup_high": judged["high"],
                    "level": judged["level"],
                    "verdict": judged["verdict"],
                    "direction": judged["direction"],
                    "seeds_to_reproduce": judged["seeds_to_reproduce"],
                    "seeds_to_contradict": judged["seeds_to_contradict"],
                    "why": judged["why"],
                }
            )
        rows.append(row)
    table = pd.DataFrame(rows)
    baseline = table.loc[table["optimizer"] == baseline_name(decay), "cpu_seconds_per_step"]
    if len(baseline):
        table["cost_over_adamw"] = table["cpu_seconds_per_step"] / float(baseline.iloc[0])
    return table


def judge_grokking_calibrated(folder: Path, record: dict[str, Any]) -> None:
    """grokking-calibrated: the claim rows, artifacts.CLAIM_ROWS (grokking_claims at the reference regime's settings,
    every seed the summary holds), and the reference table (REFERENCE_TABLE) from the summary (SUMMARY); judges
    whatever units have finished."""
    reference = record["plan"]["reference"]
    summary = pd.read_csv(SUMMARY.path(folder))
    settings = {**reference["settings"], "seeds": sorted(summary["seed"].unique().tolist())}
    claims = pd.DataFrame(columns=ROW_COLUMNS)
    if (summary["optimizer"] == baseline_name(reference["weight_decay"])).any():
        claims = pd.DataFrame(
            grokking_claims(summary, settings, reference=folder.name) + choice_claims(summary, settings),
            columns=ROW_COLUMNS,
        )
    claims.to_csv(CLAIM_ROWS.path(folder), index=False)
    calibrated_arm_table(summary, claims, reference["cap"], reference["weight_decay"]).to_csv(
        REFERENCE_TABLE.path(folder), index=False
    )


def unit_rows(unit: Path, benchmark: Path, regime: str = "calibrated") -> tuple[pd.DataFrame, pd.DataFrame]:
    """One finished unit's summary and curve rows, labelled `regime`, with the step it stopped at (`steps_run`), its
    CPU seconds, CPU seconds per step and whether its CPU time covers every step (`cpu_complete`).

    The CPU time is the unit's own where its summary has it (`cpu_seconds`: the process CPU time of every session
    part, kept in its resume state). A unit that predates it: its cpu_seconds.log where it kept one (each line a
    session part; its log.txt names each session part that ran), else Snakemake's benchmark file (`cpu_time` of the job
    that finished it; that job's log, log.txt, says from which step it resumed the unit). The cost per step is the last
    part's over the steps it ran; the CPU seconds are complete when every session part left its record, and a lower
    bound otherwise (a part killed before it wrote one; a unit whose finishing job resumed it, with only a benchmark
    file; and always for a benchmark file, whose `cpu_time` is sampled every 30 s and misses the job's last
    interval)."""
    summary, curves = (pd.read_csv(table.path(unit)) for table in (SUMMARY, CURVES))
    steps_run = int(curves["step"].max())
    if "cpu_seconds" in summary and summary["cpu_seconds"].notna().all():  # the unit's own, every session part's
        return (
            summary.assign(
                cpu_seconds_per_step=summary["cpu_seconds"] / steps_run,
                cpu_complete=True,
                steps_run=steps_run,
                regime=regime,
            ),
            curves.assign(regime=regime),
        )
    log = UNIT_CPU_SECONDS.path(unit)
    parts = [float(value) for value in log.read_text().split()] if log.is_file() else []
    sessions = session_logs(unit)
    resumed = resumed_step(sessions[-1])
    complete = bool(parts) and len(parts) >= len(sessions)
    if not parts and benchmark.is_file():
        parts, complete = [float(pd.read_csv(benchmark, sep="\t")["cpu_time"].iloc[-1])], resumed == 0
    # a part lost before the last one, which says nothing of its start: the last part's steps are not known
    known = bool(parts) and steps_run > resumed and (complete or resumed > 0 or not log.is_file())
    per_step = parts[-1] / (steps_run - resumed) if known else math.nan
    summary = summary.assign(
        cpu_seconds=sum(parts) if parts else math.nan,
        cpu_seconds_per_step=per_step,
        cpu_complete=complete,
        steps_run=steps_run,
        regime=regime,
    )
    return summary, curves.assign(regime=regime)


SESSION_HEADER = "grokking a/b mod"  # the first line each session part of a unit writes to its log


def session_logs(unit: Path) -> list[str]:
    """The unit's log.txt cut into its session parts, each from its header on (the whole log, or "", when it has
    no header)."""
    log = UNIT_LOG_FILE.path(unit)
    text = log.read_text() if log.is_file() else ""
    return text.split(SESSION_HEADER)[1:] or [text]


def resumed_step(session: str) -> int:
    """The step a session part's log says it resumed its unit from ("resumed unit ... at step N"), 0 if none."""
    found = re.search(r"resumed unit .* at step (\d+)", session)
    return int(found.group(1)) if found else 0


def collect_units(
    units: Path, benchmarks: Path, arms: list[str], regime: str = "calibrated"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The summary and curves of every finished unit under `units` (<arm>/seed<s>, a unit with a summary,
    artifacts.SUMMARY, has finished), in the order of `arms` (the stage's arm names) then seed; `benchmarks` holds
    their Snakemake benchmark files (<arm>/seed<s>.tsv)."""
    rows = [
        unit_rows(summary.parent, benchmarks / summary.parent.parent.name / f"{summary.parent.name}.tsv", regime)
        for summary in units.glob(SUMMARY.under(UNIT_FOLDER).pattern)
    ]
    if not rows:
        return pd.DataFrame(), pd.DataFrame()
    order = {arm: index for index, arm in enumerate(arms)}
    rows.sort(key=lambda pair: (order.get(pair[0]["optimizer"].iloc[0], len(order)), int(pair[0]["seed"].iloc[0])))
    return (
        pd.concat([summary for summary, _ in rows], ignore_index=True),
        pd.concat([curves for _, curves in rows], ignore_index=True),
    )
