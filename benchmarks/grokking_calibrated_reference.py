"""The `grokking-calibrated` reference run (docs/science.md, P2 grokking: 5,950 vs 29,450 steps, 4.9×): P2's
grokking headline at a regime where AdamW groks late *in every seed*, found by calibration first. Hours on CPU;
resumable job by job (and inside a job); spans sessions.

Three phases, each its own command (all resumable: a job with a summary.csv is done and skipped):

- `calibrate`: AdamW alone on a/b mod 47, 50 % split, batch 128, lr 1e-3, β = (0.9, 0.98), evaluated every 100
  steps, stopped at 95 % held-out, at each candidate weight decay and cap (`--candidates 0.3:15000,0.2:20000`),
  6 seeds each. Seeds 0-2 of every candidate run first; a candidate stops (its seeds 3-5 are not run) once 2 of
  its first 3 seeds are censored (no 95 % by the cap). A regime is **accepted** when AdamW reaches 95 % in ≥ 5 of
  6 seeds, its median is ≥ 3,000 steps and its slowest seed is ≤ cap / 1.5; among accepted regimes the one with
  the latest median is chosen (`accepted`, `choose_regime`). The rule was fixed before the runs.
- `reference`: at the chosen regime's weight decay (or `--decay`), every arm, 8 seeds: AdamW (the baseline),
  every PopulationRiskAdam gate reading × variance source at the same decay, Grokfast-EMA as published (Adam with
  its own L2-coupled decay 0.005) and AdamW at decay 1 as a control. Cap: 2 × the slowest calibration seed
  (rounded up to 1,000), at least the calibration cap. Every gate reading is compared with AdamW at its own decay.
- `nominal`: one AdamW seed (decay 0.01) at the paper's nominal task (p 97, batch 512) with PyTorch's default
  initialisation (`grokking.model.init: pytorch`, N(0, 1) embeddings as in Power et al. and Grokfast), cap 40,000:
  does the paper's delay appear there?

Each job (one regime, seed and arm) runs `run_grokking` in its own folder under <work>/runs-<phase>/..., and
records its process CPU time in cpu_seconds.log (one line per session part: the CPU-hours of provenance are CPU
time, not wall time). `--aggregate-only` writes <out> (calibration.csv, summary.csv, table.csv, claims.csv,
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
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

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
REFERENCE_SEEDS = list(range(8))
CONTROL_DECAY = 1.0
# The acceptance rule of a calibrated regime (fixed before the runs; README):
MIN_REACHED = 5        # AdamW reaches 95 % in at least 5 of the 6 seeds
MIN_MEDIAN = 3_000     # late: the median is at least 3,000 steps
SLOWEST_MARGIN = 1.5   # the slowest seed is at most cap / 1.5 (the cap is not what shapes the distribution)
# --smoke: the same plumbing in seconds (tests/test_grokking_calibrated_reference.py)
SMOKE = {"common": {"eval_every": 10, "diagnostics_every": 5, "resume_every": 10,
                    "model": {"width": 16, "depth": 1, "heads": 2}},
         "late": {"p": 11, "train_fraction": 0.5, "batch_size": 16, "architecture": "llama"},
         "nominal": {"p": 13, "train_fraction": 0.5, "batch_size": 16, "architecture": "llama"},
         "calibration_seeds": [0, 1, 2, 3], "reference_seeds": [0, 1], "nominal_cap": 20}


def baseline_name(decay: float) -> str:
    """The AdamW arm's table name at a decay (experiments.grokking.optimizer_arms)."""
    return f"AdamW wd={decay:g}"


def adamw_arms(decay: float) -> dict:
    """Arms settings that train AdamW alone at `decay`."""
    return {"adamw": {"weight_decays": [decay], "baseline_weight_decay": decay}, "grokfast": {"enabled": False},
            "poprisk": {"gates": []}}


def reference_arms(decay: float) -> dict:
    """Every arm of the reference run: AdamW at `decay` (the baseline) and at CONTROL_DECAY, Grokfast as published,
    every gate reading × variance source at `decay`."""
    return {"adamw": {"weight_decays": sorted({decay, CONTROL_DECAY}), "baseline_weight_decay": decay},
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
        summary = summary.assign(cpu_seconds=cpu_seconds(self.folder))
        return summary.assign(**self.facts), curves.assign(**self.facts)


def cpu_seconds(folder: Path) -> float:
    """The process CPU seconds a job spent, summed over the session parts that ran it (cpu_seconds.log)."""
    log = folder / "cpu_seconds.log"
    return sum(float(line) for line in log.read_text().split()) if log.is_file() else math.nan


def run_job(settings: dict, out: str) -> str:
    """One job, in a fresh process (resumes inside its arm when its resume state is there); appends the process's
    CPU time to <out>/cpu_seconds.log, whether it finished or was stopped."""
    from growcert.experiments.grokking import run_grokking

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.process_time()
    try:
        with open(folder / "log.txt", "a") as log:
            run_grokking(settings, folder, log=lambda line: print(line, file=log, flush=True), threads=1)
    finally:
        with open(folder / "cpu_seconds.log", "a") as record:
            record.write(f"{time.process_time() - started:.2f}\n")
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


def calibration_jobs(candidates: list[tuple[float, int]], seeds: list[int], common: dict, late: dict,
                     work: Path) -> dict[str, list[Job]]:
    """AdamW alone at each candidate (decay, cap), one job per seed."""
    groups = {}
    for decay, cap in candidates:
        name = f"wd{decay:g}_cap{cap}"
        groups[name] = [Job(job_settings(late, adamw_arms(decay), seed, {**common, "steps": cap}, baseline_name(decay)),
                            arm_folder(work / "runs-calibration" / name / f"seed{seed}", baseline_name(decay)),
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
    slowest = max(ordered)
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("phase", choices=["calibrate", "reference", "nominal"])
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--work", default=str(OUT), help="the jobs' folders go under <work>/runs-<phase>")
    parser.add_argument("--parallel", type=int, default=1, help="jobs at a time (each one torch thread)")
    parser.add_argument("--candidates", default="0.3:15000,0.2:20000", help="calibrate: decay:cap,...")
    parser.add_argument("--smoke", action="store_true", help="tiny plan, seconds: proves the plumbing")
    parser.add_argument("--aggregate-only", action="store_true", help="write <out> from the finished jobs, run none")
    args = parser.parse_args(argv)
    out, work = Path(args.out), Path(args.work)
    common = {**COMMON, **SMOKE["common"]} if args.smoke else COMMON
    late = SMOKE["late"] if args.smoke else LATE
    seeds = SMOKE["calibration_seeds"] if args.smoke else CALIBRATION_SEEDS
    if args.phase == "calibrate":
        groups = calibration_jobs(parse_candidates(args.candidates), seeds, common, late, work)
        if not args.aggregate_only:
            run_jobs(groups, args.parallel, work, stop_rule=True)
    print(f"{args.phase}: done", flush=True)


if __name__ == "__main__":
    main()
