"""The `grokking-calibrated` reference run (docs/science.md, P2 grokking: 5,950 vs 29,450 steps, 4.9×): P2's
grokking headline at a regime where AdamW groks late *in every seed*, found by calibration first. Hours on CPU;
resumable job by job (and inside a job); spans sessions.

Three phases, each its own command (all resumable: a job with a summary.csv is done and skipped):

- `calibrate`: AdamW alone on a/b mod 47, 50 % split, batch 128, lr 1e-3, β = (0.9, 0.98), evaluated every 100
  steps, stopped at 95 % held-out, at each candidate weight decay and cap (`--candidates 0.3:15000,0.2:20000`),
  6 seeds each. Seeds 0-2 of every candidate run first; a candidate stops (its seeds 3-5 are not run) once 2 of
  its first 3 seeds are censored (no 95 % by the cap). A regime is **accepted** when AdamW reaches 95 % in ≥ 5 of
  6 seeds, its median is ≥ 3,000 steps and its slowest seed that reached 95 % is ≤ cap / 1.5; among accepted regimes the one with
  the latest median is chosen (`accepted`, `choose_regime`). The rule was fixed before the runs.
- `reference`: at the chosen regime's weight decay (or `--regime DECAY:CAP`, said in the README), every arm, 8 seeds: AdamW (the baseline),
  every PopulationRiskAdam gate reading × variance source at the same decay, Grokfast-EMA as published (Adam with
  its own L2-coupled decay 0.005) and AdamW at decay 1 as a control. Cap: 2 × the slowest calibration seed
  (rounded up to 1,000), at least the calibration cap. Every gate reading is compared with AdamW at its own decay.
- `nominal`: one AdamW seed (decay 0.01) at the paper's nominal task (p 97, batch 512) with PyTorch's default
  initialisation (`grokking.model.init: pytorch`, N(0, 1) embeddings as in Power et al. and Grokfast), cap 40,000:
  does the paper's delay appear there?

Each job (one regime, seed and arm) runs `run_grokking` in its own folder, the pipeline's unit layout
(<work>/units/<arm>/seed<s>, the calibration's <work>/units-calibration/<arm>/seed<s>: configs/grokking-calibrated.yaml
and configs/grokking-calibration.yaml run the same units through Snakemake; the nominal job <work>/runs-nominal/), and
records its process CPU time in cpu_seconds.log (one line per session part: the CPU-hours of provenance are CPU
time, not wall time). A part killed without warning (a session's end) leaves its CPU time so far in
cpu_seconds.part, refreshed every HEARTBEAT_S seconds, which the next part folds into the log. CPU seconds per step
come from each job's last part alone, the one that finished it (its CPU over the steps it ran from where it resumed):
an earlier part may have left no record, or have redone steps after its last resume point. `--aggregate-only` writes <out> (calibration.csv, summary.csv, table.csv, claims.csv,
curves, figures, provenance.json, README.md) from whatever has finished.

    nice -n 19 .venv/bin/python benchmarks/grokking_calibrated_reference.py calibrate --candidates 0.3:15000,0.2:20000 --parallel 2
    nice -n 19 .venv/bin/python benchmarks/grokking_calibrated_reference.py nominal
    nice -n 19 .venv/bin/python benchmarks/grokking_calibrated_reference.py reference --parallel 2
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import multiprocessing
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from growcert.report.claims import DESIGN_DTYPES, design_text

from grokking_late_reference import arm_folder, job_settings
from sweeps import disk_sampled

OUT = Path("docs/reference-results/grokking-calibrated")
COMMON = {"lr": 1e-3, "betas": [0.9, 0.98], "stop_at_test_acc": 0.95, "eval_every": 100, "diagnostics_every": 500,
          "resume_every": 1000}
LATE = {"p": 47, "train_fraction": 0.5, "batch_size": 128, "architecture": "llama"}
NOMINAL = {"p": 97, "train_fraction": 0.5, "batch_size": 512, "architecture": "llama"}
NOMINAL_DECAY, NOMINAL_CAP, NOMINAL_INIT = 0.01, 40_000, "pytorch"
CALIBRATION_SEEDS = [0, 1, 2, 3, 4, 5]
FIRST_SEEDS = 3  # a candidate stops once STOP_CENSORED of its first FIRST_SEEDS seeds are censored
STOP_CENSORED = 2
# The reference run judges seeds the calibration never saw: the regime was chosen for AdamW's late median on
# CALIBRATION_SEEDS, so those seeds' AdamW runs would be a baseline selected for being slow.
REFERENCE_SEEDS = list(range(len(CALIBRATION_SEEDS), len(CALIBRATION_SEEDS) + 8))
CONTROL_DECAY = 1.0
HEARTBEAT_S = 30  # how often a running job refreshes cpu_seconds.part
RESUMED = re.compile(r"resumed unit .* at step (\d+)")
# The acceptance rule of a calibrated regime (fixed before the runs; README):
MIN_REACHED = 5        # AdamW reaches 95 % in at least 5 of the 6 seeds
MIN_MEDIAN = 3_000     # late: the median is at least 3,000 steps (censored seeds as beyond the cap)
SLOWEST_MARGIN = 1.5   # the slowest seed that reached 95 % is at most cap / 1.5 (the cap does not shape them)
# --smoke: the same plumbing in seconds (tests/test_grokking_calibrated_reference.py)
SMOKE = {"common": {"eval_every": 10, "diagnostics_every": 5, "resume_every": 10,
                    "model": {"width": 16, "depth": 1, "heads": 2}},
         "late": {"p": 11, "train_fraction": 0.5, "batch_size": 16, "architecture": "llama"},
         "nominal": {"p": 13, "train_fraction": 0.5, "batch_size": 16, "architecture": "llama"},
         "calibration_seeds": [0, 1, 2, 3], "reference_seeds": [4, 5], "nominal_cap": 20}


def baseline_name(decay: float) -> str:
    """The AdamW arm's table name at a decay (experiments.grokking.optimizer_arms)."""
    return f"AdamW wd={decay:g}"


def adamw_arms(decay: float) -> dict:
    """Arms settings that train AdamW alone at `decay`."""
    return {"adamw": {"weight_decays": [decay]}, "grokfast": {"enabled": False},
            "poprisk": {"gates": []}}


def reference_arms(decay: float) -> dict:
    """Every arm of the reference run: AdamW at `decay` (the baseline) and at CONTROL_DECAY, Grokfast as published,
    every gate reading × variance source at `decay`."""
    return {"adamw": {"weight_decays": sorted({decay, CONTROL_DECAY})},
            "grokfast": {"enabled": True},
            "poprisk": {"gates": ["update", "gradient"], "variances": ["exact", "streaming", "microbatch"],
                        "weight_decays": [decay], "microbatches": 4}}


@dataclass(frozen=True)
class Job:
    """One regime × seed × arm: its stage settings, its folder and its columns in the tables."""

    settings: dict
    folder: Path
    arm: str
    facts: dict = field(default_factory=dict)

    @property
    def seed(self) -> int:
        return int(self.settings["seeds"][0])

    def finished(self) -> tuple[pd.DataFrame, pd.DataFrame] | None:
        """The job's summary and curve rows once it has finished, else None."""
        if not (self.folder / "summary.csv").is_file():
            return None
        summary, curves = (pd.read_csv(self.folder / name) for name in ("summary.csv", "curves.csv"))
        ran = pd.to_numeric(summary["step_95"], errors="coerce").fillna(self.settings["steps"])
        summary = summary.assign(cpu_seconds=cpu_seconds(self.folder),
                                 cpu_seconds_per_step=[last_part_rate(self.folder, steps) for steps in ran])
        return summary.assign(**self.facts), curves.assign(**self.facts)


def cpu_seconds(folder: Path) -> float:
    """The process CPU seconds a job spent, summed over the session parts that recorded it (cpu_seconds.log)."""
    log = folder / "cpu_seconds.log"
    return sum(float(line) for line in log.read_text().split()) if log.is_file() else math.nan


def last_part_rate(folder: Path, steps: float) -> float:
    """CPU seconds per step of the part that finished a job that ran `steps` steps: the last line of
    cpu_seconds.log over the steps since the last part's resume point (log.txt: each part starts with the stage's
    "grokking a/b mod" line, and a resumed one says "resumed unit ... at step N")."""
    log = folder / "cpu_seconds.log"
    if not log.is_file() or not log.read_text().split():
        return math.nan
    last = (folder / "log.txt").read_text().split("\ngrokking a/b mod")[-1]
    resumed = RESUMED.search(last)
    ran = steps - (int(resumed.group(1)) if resumed else 0)
    return float(log.read_text().split()[-1]) / ran if ran > 0 else math.nan


def unrecorded_parts(work: Path) -> int:
    """Session parts of the jobs under `work` that left no CPU record (killed before cpu_seconds.part existed): the
    parts log.txt shows ("grokking a/b mod" lines) beyond the lines of cpu_seconds.log."""
    missing = 0
    for log in [*work.glob("runs-*/**/log.txt"), *work.glob("units*/**/log.txt")]:
        record = log.parent / "cpu_seconds.log"
        recorded = len(record.read_text().split()) if record.is_file() else 0
        missing += max(0, log.read_text().count("grokking a/b mod") - recorded)
    return missing


def fold_killed_part(folder: Path) -> None:
    """A part killed without warning left its CPU time so far in cpu_seconds.part: append it to the log."""
    pending = folder / "cpu_seconds.part"
    if pending.is_file():
        with open(folder / "cpu_seconds.log", "a") as record:
            record.write(pending.read_text().strip() + "\n")
        pending.unlink()


def run_job(settings: dict, out: str) -> str:
    """One job, in a fresh process (resumes inside its arm when its resume state is there); appends the process's
    CPU time to <out>/cpu_seconds.log, whether it finished or was stopped, and keeps it in cpu_seconds.part while it
    runs, for a kill that skips the `finally` (fold_killed_part)."""
    import threading

    from growcert.experiments.grokking import run_grokking

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    fold_killed_part(folder)
    started, done = time.process_time(), threading.Event()

    def heartbeat() -> None:
        while not done.wait(HEARTBEAT_S):
            (folder / "cpu_seconds.part").write_text(f"{time.process_time() - started:.2f}\n")

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        with open(folder / "log.txt", "a") as log:
            run_grokking(settings, folder, log=lambda line: print(line, file=log, flush=True), threads=1, device="cpu")
    finally:
        done.set()
        with open(folder / "cpu_seconds.log", "a") as record:
            record.write(f"{time.process_time() - started:.2f}\n")
        (folder / "cpu_seconds.part").unlink(missing_ok=True)
    return out


def censored(job: Job) -> bool | None:
    """Whether a finished job never reached 95 % by its cap (None while it has not finished)."""
    rows = job.finished()
    if rows is None:
        return None
    return bool(pd.isna(pd.to_numeric(rows[0]["step_95"], errors="coerce")).all())


def stopped(group: list[Job]) -> bool:
    """A calibration candidate stops once STOP_CENSORED of its first FIRST_SEEDS seeds are censored."""
    first = sorted(group, key=lambda job: job.seed)[:FIRST_SEEDS]
    return sum(censored(job) is True for job in first) >= STOP_CENSORED


def undecided(group: list[Job]) -> bool:
    """Whether the stopping rule of a candidate may still fire: some of its first seeds have not finished and
    enough of the others could still be censored."""
    first = sorted(group, key=lambda job: job.seed)[:FIRST_SEEDS]
    outcomes = [censored(job) for job in first]
    return not stopped(group) and sum(o is not False for o in outcomes) >= STOP_CENSORED and None in outcomes


def run_jobs(groups: dict[str, list[Job]], parallel: int, work: Path, stop_rule: bool) -> None:
    """Run the unfinished jobs `parallel` at a time, interleaving the groups seed by seed. With `stop_rule`, a
    group's later seeds wait while its first seeds may still stop it, and are skipped once they do."""
    order = [job for rank in range(max(map(len, groups.values()), default=0))
             for group in groups.values() for job in sorted(group, key=lambda j: j.seed)[rank:rank + 1]]
    owner = {job.folder: name for name, group in groups.items() for job in group}
    pending = [job for job in order if job.finished() is None]
    print(f"{len(order) - len(pending)} of {len(order)} jobs already done; {len(pending)} to run, {parallel} at a time",
          flush=True)
    if not pending:
        return
    context = multiprocessing.get_context("spawn")  # a clean torch per job
    with disk_sampled(work), concurrent.futures.ProcessPoolExecutor(max_workers=parallel, mp_context=context) as pool:
        running: dict[concurrent.futures.Future, Job] = {}
        while pending or running:
            for job in list(pending):
                if len(running) >= parallel:
                    break
                group = groups[owner[job.folder]]
                later = sorted(group, key=lambda j: j.seed).index(job) >= FIRST_SEEDS
                if stop_rule and later and stopped(group):
                    print(f"skipped (stopping rule: {STOP_CENSORED} of its first {FIRST_SEEDS} seeds censored): "
                          f"{job.folder}", flush=True)
                    pending.remove(job)
                elif not (stop_rule and later and undecided(group)):
                    running[pool.submit(run_job, job.settings, str(job.folder))] = job
                    pending.remove(job)
            if not running:
                break  # every pending job waits on a decision no running job can bring
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                future.result()
                print(f"done: {running.pop(future).folder}", flush=True)


def unit_folder(units: Path, arm: str, seed: int) -> Path:
    """<units>/<the arm's unit name>/seed<seed>: the pipeline's unit folder (growcert.experiments.units)."""
    from growcert.experiments.units import unit_name

    return units / unit_name(arm) / f"seed{seed}"


def calibration_jobs(candidates: list[tuple[float, int]], seeds: list[int], common: dict, late: dict,
                     work: Path) -> dict[str, list[Job]]:
    """AdamW alone at each candidate (decay, cap), one job per seed."""
    groups = {}
    for decay, cap in candidates:
        name = f"wd{decay:g}_cap{cap}"
        groups[name] = [Job(job_settings(late, adamw_arms(decay), seed, {**common, "steps": cap}, baseline_name(decay)),
                            unit_folder(work / "units-calibration", baseline_name(decay), seed),
                            baseline_name(decay), {"candidate": name, "weight_decay_candidate": decay, "cap": cap})
                        for seed in seeds]
    return groups


def parse_candidates(text: str) -> list[tuple[float, int]]:
    """"0.3:15000,0.2:20000" -> [(0.3, 15000), (0.2, 20000)]."""
    candidates = []
    for item in filter(None, text.split(",")):
        decay, _, cap = item.partition(":")
        candidates.append((float(decay), int(cap)))
    return candidates


def accepted(steps: list[float], cap: int, seeds: int = len(CALIBRATION_SEEDS)) -> tuple[bool, str]:
    """The acceptance rule of a calibrated regime over its `seeds` seeds' steps to 95 % (NaN: censored at `cap`;
    seeds not run because the candidate stopped count as censored), and the reason in one line."""
    values = [float(step) for step in steps]
    reached = [step for step in values if math.isfinite(step)]
    missing = seeds - len(values)
    censored_count = len(values) - len(reached) + missing
    if len(values) < seeds and censored_count <= seeds - MIN_REACHED:
        return False, f"{len(values)} of {seeds} seeds finished so far"
    ordered = sorted([*reached, *[math.inf] * censored_count])
    median = (ordered[(seeds - 1) // 2] + ordered[seeds // 2]) / 2
    slowest = max(reached, default=math.inf)  # of the seeds that reached 95 % (one of 6 may be censored)
    problems = []
    if len(reached) < MIN_REACHED:
        problems.append(f"95 % in {len(reached)} of {seeds} seeds (< {MIN_REACHED})")
    if median < MIN_MEDIAN:
        problems.append(f"median {median:,.0f} steps (< {MIN_MEDIAN:,})")
    if slowest > cap / SLOWEST_MARGIN:
        problems.append(f"slowest seed {'> cap' if math.isinf(slowest) else f'{slowest:,.0f} steps'} "
                        f"(> cap / {SLOWEST_MARGIN:g} = {cap / SLOWEST_MARGIN:,.0f})")
    if problems:
        return False, "; ".join(problems)
    return True, (f"95 % in {len(reached)} of {seeds} seeds, median {median:,.0f} ≥ {MIN_MEDIAN:,}, slowest "
                  f"{slowest:,.0f} ≤ cap / {SLOWEST_MARGIN:g}")


def choose_regime(candidates: pd.DataFrame) -> pd.Series | None:
    """Among the accepted candidates (`candidate_table`), the one with the latest median; None when none is, or
    while any candidate still has seeds to run (a regime is chosen once, over every candidate named)."""
    if not candidates["decided"].all():
        return None
    passed = candidates[candidates["accepted"]]
    return None if passed.empty else passed.sort_values("median_step_95").iloc[-1]


def calibration_rows(groups: dict[str, list[Job]]) -> pd.DataFrame:
    """Every seed of every candidate: steps to 95 % (NaN: censored at the cap), or not run (the stopping rule)."""
    rows = []
    for name, group in groups.items():
        for job in sorted(group, key=lambda j: j.seed):
            finished = job.finished()
            record = {"candidate": name, "weight_decay": job.facts["weight_decay_candidate"], "cap": job.facts["cap"],
                      "seed": job.seed}
            if finished is None:
                rows.append({**record, "status": "not run (stopping rule)" if stopped(group) else "not finished"})
                continue
            summary = finished[0].iloc[0]
            reached = pd.notna(summary["step_95"])
            rows.append({**record, "status": "reached" if reached else "censored",
                         "step_95": summary["step_95"] if reached else math.nan,
                         "memorised_step": summary["memorised_step"], "final_test_acc": summary["final_test_acc"],
                         "seconds": summary["seconds"], "cpu_seconds": summary["cpu_seconds"]})
    return pd.DataFrame(rows)


def candidate_table(rows: pd.DataFrame, seeds: int = len(CALIBRATION_SEEDS)) -> pd.DataFrame:
    """Per candidate: seeds run, reached, median and slowest (censored and unrun seeds as beyond the cap), and the
    acceptance rule's word and reason (`accepted`)."""
    out = []
    for name, frame in rows.groupby("candidate", sort=False):
        cap = int(frame["cap"].iloc[0])
        done = frame[frame["status"].isin(["reached", "censored"])]
        steps = done["step_95"].astype(float).tolist()
        stopped_early = (frame["status"] == "not run (stopping rule)").any()
        if stopped_early:
            steps_for_rule, total = steps, seeds  # the unrun seeds count as censored
        else:
            steps_for_rule, total = steps, max(seeds, len(frame))
        ok, why = accepted(steps_for_rule, cap, total)
        decided = bool(stopped_early or len(done) >= seeds)
        if not decided:
            ok, why = False, f"{len(done)} of {seeds} seeds finished so far"
        finite = sorted(v for v in steps if math.isfinite(v))
        padded = sorted(finite + [math.inf] * (total - len(finite)))
        out.append({"candidate": name, "weight_decay": float(frame["weight_decay"].iloc[0]), "cap": cap,
                    "seeds_run": len(done), "reached": len(finite),
                    "median_step_95": (padded[(total - 1) // 2] + padded[total // 2]) / 2,
                    "slowest_step_95": max(padded) if padded else math.nan, "accepted": ok, "why": why,
                    "decided": decided})
    return pd.DataFrame(out)


def reference_cap(candidate: pd.Series, rows: pd.DataFrame) -> int:
    """At least twice the slowest calibration seed of the chosen regime, in thousands, and at least its cap."""
    slowest = rows.loc[rows["candidate"] == candidate["candidate"], "step_95"].max()
    return int(max(candidate["cap"], 1000 * math.ceil(2 * slowest / 1000)))


def reference_jobs(decay: float, cap: int, seeds: list[int], common: dict, late: dict,
                   work: Path) -> dict[str, list[Job]]:
    """Every arm of the reference run at `decay` (one group per arm), one job per seed."""
    arms = reference_arms(decay)
    names = arm_names(job_settings(late, arms, 0, {**common, "steps": cap}))
    return {name: [Job(job_settings(late, arms, seed, {**common, "steps": cap}, name),
                       unit_folder(work / "units", name, seed), name, {"regime": "calibrated"})
                   for seed in seeds] for name in names}


def nominal_job(common: dict, nominal: dict, cap: int, work: Path) -> Job:
    """One AdamW seed at the paper's nominal task with PyTorch's default initialisation."""
    settings = job_settings(nominal, adamw_arms(NOMINAL_DECAY), 0,
                            {**common, "steps": cap, "model": {**common.get("model", {}), "init": NOMINAL_INIT}},
                            baseline_name(NOMINAL_DECAY))
    return Job(settings, arm_folder(work / "runs-nominal" / "seed0", baseline_name(NOMINAL_DECAY)),
               baseline_name(NOMINAL_DECAY), {"regime": "nominal"})


def arm_names(settings: dict) -> list[str]:
    """The names of the arms `settings` configures, in the stage's order."""
    from growcert.config import stage_settings
    from growcert.experiments.grokking import optimizer_arms

    return [arm.name for arm in optimizer_arms(stage_settings("grokking", settings))]


def collect(groups: dict[str, list[Job]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The summary and curve rows of every finished job of `groups`."""
    finished = [rows for group in groups.values() for rows in (job.finished() for job in group) if rows is not None]
    if not finished:
        return pd.DataFrame(), pd.DataFrame()
    return (pd.concat([summary for summary, _ in finished], ignore_index=True),
            pd.concat([curves for _, curves in finished], ignore_index=True))


def steps_text(steps: pd.Series, cap: int) -> str:
    """Steps to 95 % per seed, a censored seed (not reached by the cap) as "> cap"."""
    return ", ".join(f"{int(step):,}" if pd.notna(step) else f"> {cap:,}" for step in steps)


def arm_table(summary: pd.DataFrame, claims: pd.DataFrame, cap: int, decay: float) -> pd.DataFrame:
    """Per arm: steps per seed, reached, the median (censored as beyond the cap), CPU seconds per step, CPU time to
    95 % per seed (censored: beyond the cap's time), and for the gate readings their word (claims.csv, Holm)."""
    from growcert.experiments.common import format_steps, median_steps

    rows = []
    for arm, frame in summary.groupby("optimizer", sort=False):
        frame = frame.sort_values("seed")
        steps = pd.to_numeric(frame["step_95"], errors="coerce").astype(float)
        ran = steps.fillna(cap)
        per_step = frame["cpu_seconds_per_step"].astype(float)
        time_to = [f"{t:,.0f}" if pd.notna(s) else f"> {t:,.0f}" for s, t in zip(steps, per_step * ran)]
        row = {"optimizer": arm, "seeds": len(frame), "reached": int(steps.notna().sum()),
               "steps_per_seed": steps_text(steps, cap), "median_step_95": format_steps(median_steps(steps), cap),
               "cpu_seconds_per_step": float((per_step * ran).sum() / ran.sum()),
               "cpu_seconds_to_95_per_seed": ", ".join(time_to), "cap": cap}
        part = claims[claims["claim"].str.endswith(f"({arm})")] if len(claims) else claims
        if len(part):
            judged = part.iloc[0]
            row.update({"speedup": judged["estimate"], "speedup_low": judged["low"], "speedup_high": judged["high"],
                        "level": judged["level"], "verdict": judged["verdict"], "direction": judged["direction"],
                        "seeds_to_reproduce": judged["seeds_to_reproduce"],
                        "seeds_to_contradict": judged["seeds_to_contradict"], "why": judged["why"]})
        rows.append(row)
    table = pd.DataFrame(rows)
    baseline = table.loc[table["optimizer"] == baseline_name(decay), "cpu_seconds_per_step"]
    if len(baseline):
        table["cost_over_adamw"] = table["cpu_seconds_per_step"] / float(baseline.iloc[0])
    return table


def write_outputs(out: Path, work: Path, plan: dict, calibration: pd.DataFrame, candidates: pd.DataFrame,
                  chosen: pd.Series | None, reference: tuple[pd.DataFrame, pd.DataFrame],
                  nominal: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """calibration.csv, candidates.csv, summary.csv, curves.csv, table.csv, claims.csv, figures, provenance.json and
    README.md of whatever has finished."""
    import datetime as dt
    import json

    from growcert.experiments.grokking_report import grokking_claims, plot_grokking
    from growcert.provenance import git_commit, machine_record, versions
    from growcert.report.claims import ROW_COLUMNS
    from sweeps import disk_samples

    out.mkdir(parents=True, exist_ok=True)
    calibration.to_csv(out / "calibration.csv", index=False)
    candidates.to_csv(out / "candidates.csv", index=False)
    summary, curves = reference
    claims = pd.DataFrame(columns=ROW_COLUMNS)
    table = pd.DataFrame()
    if chosen is not None and len(summary):
        decay, cap = plan["reference"]["weight_decay"], plan["reference"]["cap"]
        settings = {**plan["reference"]["settings"], "seeds": sorted(summary["seed"].unique().tolist())}
        if (summary["optimizer"] == baseline_name(decay)).any():
            claims = pd.DataFrame(grokking_claims(summary, settings), columns=ROW_COLUMNS)
        table = arm_table(summary, claims, cap, decay)
        summary.to_csv(out / "summary.csv", index=False)
        curves.to_csv(out / "curves.csv", index=False)
        plot_grokking(out / "curves.csv", out / "accuracy.png")
    claims.to_csv(out / "claims.csv", index=False)
    # before the reference arms land, the run's main table is the calibration's verdict per candidate
    (table if len(table) else candidates).to_csv(out / "table.csv", index=False)
    cpu = sum(float(frame["cpu_seconds"].sum()) for frame in (calibration, reference[0], nominal[0])
              if len(frame) and "cpu_seconds" in frame)
    disk = disk_samples(work)
    record = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "commands": plan["commands"], "table": "steps and CPU time to 95 % held-out per arm and seed, and the "
                                                    "speed-up verdicts of the gate readings" if len(table) else
              "the calibration's verdict per candidate regime (the reference arms have not landed yet)",
              "why": "P2 grokking at a regime where AdamW groks late in every seed, calibrated first",
              "plan": {key: value for key, value in plan.items() if key != "commands"},
              "cost": {"cpu_hours": round(cpu / 3600, 2), "peak_disk_mb": round(max(b for _, b in disk) / 1e6, 1)
                       if disk else None, "disk_samples": len(disk), "unrecorded_parts": unrecorded_parts(work)},
              "versions": versions(), "machine": machine_record()}
    (out / "provenance.json").write_text(json.dumps(record, indent=1, default=str))
    (out / "README.md").write_text("\n".join(readme_lines(record, calibration, candidates, chosen, table, claims,
                                                            nominal[0])), encoding="utf-8")


def readme_lines(record: dict, calibration: pd.DataFrame, candidates: pd.DataFrame, chosen, table: pd.DataFrame,
                 claims: pd.DataFrame, nominal: pd.DataFrame) -> list[str]:
    """The README: reproduction, the calibration rule and its table, the nominal seed, the arms, the verdicts."""
    from growcert.report.verdicts import percent

    def number(value) -> str:
        return "–" if pd.isna(value) else "∞" if value == math.inf else f"{value:.2f}×"

    lines = ["# Grokking at a calibrated late regime (reference run, docs/science.md P2)", "",
             f"Reference run of {record['date']}, commit `{record['commit']}`. Reproduce (each command resumable; a "
             "finished job is kept):", "", *[f"    {command}" for command in record["commands"]], "",
             f"Cost: {record['cost']['cpu_hours']} CPU-hours measured as process CPU time over every finished job "
             "(each job one torch thread"
             + (f"; a lower bound: {record['cost']['unrecorded_parts']} session part(s) killed before the jobs kept "
                "their CPU time while running left no record" if record["cost"].get("unrecorded_parts") else "")
             + "), peak disk "
             + (f"{record['cost']['peak_disk_mb']} MB ({record['cost']['disk_samples']} samples of the work folder, "
                "resume states included)" if record['cost']['peak_disk_mb'] else "not sampled") + ".", "",
             "## Calibration: AdamW alone, 6 seeds per candidate", "",
             f"a/b mod {LATE['p']}, 50 % split, batch {LATE['batch_size']}, lr 1e-3, β = (0.9, 0.98), the llama "
             "decoder with the package's init, evaluated every 100 steps, stopped at 95 % held-out. The rule, fixed "
             f"before the runs: a regime is accepted when AdamW reaches 95 % in ≥ {MIN_REACHED} of 6 seeds, its median "
             f"is ≥ {MIN_MEDIAN:,} steps and its slowest seed that reached 95 % is ≤ cap / {SLOWEST_MARGIN:g}; among "
             "accepted regimes "
             f"the one with the latest median is chosen. A candidate stops once {STOP_CENSORED} of its first "
             f"{FIRST_SEEDS} seeds are censored (its other seeds count as censored).", "",
             candidates.drop(columns=["why"]).to_markdown(index=False) if len(candidates) else "nothing finished", "",
             *[f"- {row.candidate}: {'accepted' if row.accepted else 'not accepted'}: {row.why}"
               for row in candidates.itertuples()], "",
             (f"**Chosen: {chosen['candidate']}** (weight decay {chosen['weight_decay']:g})"
              + (": given by hand, not by the rule." if str(chosen["candidate"]).startswith("given") else
                 ": the latest median of the accepted regimes.") if chosen is not None else
              "**No regime chosen yet**: the reference run waits until every candidate named is decided "
              "and one is accepted."), "",
             "The candidates were tried in the order planned before any ran: decay 0.3 (cap 15,000) and 0.2 (cap "
             "20,000) side by side; 0.5 (cap 10,000) only if 0.3 were unreliable; 0.15 (cap 25,000) only if 0.2 "
             "passed with its slowest seed ≤ 12,000 steps.", "",
             *([f"The reference run: every arm at weight decay {plan['weight_decay']:g}, cap {plan['cap']:,} steps "
                "(at least twice the chosen regime's slowest calibration seed, and at least its cap), "
                f"seeds {record['plan']['reference_seeds'][0]}–{record['plan']['reference_seeds'][-1]} (none of them a "
                "calibration seed: the regime was chosen for AdamW's late median on those), evaluated every 100 steps, "
                "stopped at 95 % held-out.",
                ""] if (plan := record["plan"].get("reference")) else []),
             "Every seed: `calibration.csv`.", ""]
    lines += ["## The paper's nominal task with PyTorch's default initialisation", ""]
    if len(nominal):
        row, cap = nominal.iloc[0], record["plan"]["nominal_cap"]
        reached = pd.notna(row["step_95"])
        lines.append(f"a/b mod {NOMINAL['p']}, batch {NOMINAL['batch_size']}, AdamW weight decay {NOMINAL_DECAY:g}, "
                     f"`grokking.model.init: {NOMINAL_INIT}` (N(0, 1) embeddings, Kaiming-uniform Linear layers, as in "
                     f"Power et al. and Grokfast), seed 0, cap {cap:,}: "
                     + (f"95 % held-out at step {int(row['step_95']):,} (memorised at {row['memorised_step']})"
                        if reached else f"not 95 % by {cap:,} steps (final held-out accuracy "
                                        f"{row['final_test_acc']:.3f})")
                     + ". With the package's init (std 0.02) the same task reached 95 % at 600–1,200 steps "
                       "(grokking-late, 3 seeds). One seed proves nothing; the full nominal plan is "
                       "`benchmarks/gpu_check.sh`'s for a GPU.")
    else:
        lines.append("not finished yet (a resumable job: its resume state is kept beside its log)")
    lines += [""]
    if len(table):
        lines += ["## Every arm at the chosen regime", "",
                  "Arms at the regime's weight decay: AdamW (the baseline), every gate reading × variance source, "
                  "Grokfast-EMA as published (Adam with its own L2-coupled decay 0.005, the published recipe; its "
                  "decay is not the regime's) and AdamW at decay 1 as a control. Each gate reading is compared with "
                  "AdamW at its own decay, paired by seed, steps as interval-censored bounds; Holm across the six "
                  "readings. CPU seconds per step are the jobs' own process CPU time over the steps they ran: a "
                  "reading that saves steps but costs more per step says so in `cost_over_adamw` and in CPU time to "
                  "95 %.", "",
                  table[[c for c in ("optimizer", "seeds", "reached", "steps_per_seed", "median_step_95",
                                     "cpu_seconds_per_step", "cost_over_adamw", "cpu_seconds_to_95_per_seed", "speedup",
                                     "speedup_low", "speedup_high", "verdict") if c in table.columns]]
                  .to_markdown(index=False, floatfmt=".3g"), ""]
    lines += ["## Does PopulationRiskAdam reach 95 % held-out 4.9× sooner than AdamW where AdamW groks late?", ""]
    if len(claims):
        for row in claims.itertuples():
            direction = f" ({row.direction})" if isinstance(row.direction, str) and row.direction else ""
            lines.append(f"- {row.claim} [{row.role}]: **{row.verdict}**{direction}: speed-up "
                         f"{number(row.estimate)} [{number(row.low)}, {number(row.high)}] at {percent(row.level)}, "
                         f"{row.seeds} paired seeds; paper 4.9× (SESOI {row.sesoi})"
                         + design_text(row) + f": {row.why}")
    else:
        lines.append("- not judged yet: the reference run has not finished its AdamW baseline")
    return lines + [""]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("phase", choices=["calibrate", "reference", "nominal", "aggregate"])
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--work", default=str(OUT), help="the jobs' folders go under <work>/units, <work>/units-calibration, <work>/runs-nominal")
    parser.add_argument("--parallel", type=int, default=1, help="jobs at a time (each one torch thread)")
    parser.add_argument("--candidates", default="0.3:15000,0.2:20000",
                        help="every calibration candidate as decay:cap,... (the calibrate phase runs them; every phase "
                             "reads them to choose the regime)")
    parser.add_argument("--regime", default="", metavar="DECAY:CAP",
                        help="the reference run's weight decay and cap, overriding the calibrated choice (say why)")
    parser.add_argument("--smoke", action="store_true", help="tiny plan, seconds: proves the plumbing")
    args = parser.parse_args(argv)
    out, work = Path(args.out), Path(args.work)
    common = {**COMMON, **SMOKE["common"]} if args.smoke else COMMON
    late, nominal = (SMOKE["late"], SMOKE["nominal"]) if args.smoke else (LATE, NOMINAL)
    seeds = SMOKE["calibration_seeds"] if args.smoke else CALIBRATION_SEEDS
    reference_seeds = SMOKE["reference_seeds"] if args.smoke else REFERENCE_SEEDS
    nominal_cap = SMOKE["nominal_cap"] if args.smoke else NOMINAL_CAP
    script = "nice -n 19 .venv/bin/python benchmarks/grokking_calibrated_reference.py"
    flags = (f" --candidates {args.candidates}" + (f" --regime {args.regime}" if args.regime else "")
             + (" --smoke" if args.smoke else ""))
    commands = [f"{script} calibrate{flags} --parallel 2", f"{script} nominal{flags}",
                f"{script} reference{flags} --parallel 2"]
    groups = calibration_jobs(parse_candidates(args.candidates), seeds, common, late, work)
    if args.phase == "calibrate":
        run_jobs(groups, args.parallel, work, stop_rule=True)
    calibration = calibration_rows(groups)
    candidates = candidate_table(calibration, len(seeds))
    chosen = choose_regime(candidates) if len(candidates) else None
    if args.regime:  # given by hand: the README says so
        decay, cap = parse_candidates(args.regime)[0]
        chosen = pd.Series({"candidate": f"given --regime {args.regime}", "weight_decay": decay, "cap": cap})
    plan = {"common": common, "late": late, "nominal": nominal, "candidates": args.candidates,
            "calibration_seeds": seeds, "reference_seeds": reference_seeds, "nominal_cap": nominal_cap,
            "commands": commands}
    reference_groups: dict[str, list[Job]] = {}
    if chosen is not None:
        decay = float(chosen["weight_decay"])
        cap = int(chosen["cap"]) if args.regime else reference_cap(chosen, calibration)
        reference_groups = reference_jobs(decay, cap, reference_seeds, common, late, work)
        plan["reference"] = {"weight_decay": decay, "cap": cap, "candidate": chosen["candidate"],
                             "settings": job_settings(late, reference_arms(decay), 0, {**common, "steps": cap})}
    elif args.phase == "reference":
        parser.exit(2, f"no calibrated regime yet in {args.candidates}: run the calibrate phase first (see "
                       f"{out / 'candidates.csv'})\n")
    nominal_group = {"nominal": [nominal_job(common, nominal, nominal_cap, work)]}
    if args.phase == "reference":
        run_jobs(reference_groups, args.parallel, work, stop_rule=False)
    if args.phase == "nominal":
        run_jobs(nominal_group, 1, work, stop_rule=False)
    write_outputs(out, work, plan, calibration, candidates, chosen, collect(reference_groups), collect(nominal_group))
    print(f"{args.phase}: done -> {out}", flush=True)


if __name__ == "__main__":
    main()
