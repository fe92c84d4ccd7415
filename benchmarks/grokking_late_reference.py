"""The `grokking-late` reference run (docs/science.md, P2 grokking: 5,950 vs 29,450 steps, 4.9×): P2's
grokking comparison where the AdamW baseline groks late. Hours on CPU; resumable; spans sessions.

The regime is known from calibration (docs/science.md): the pipeline's llama grokking decoder (408k
parameters) with AdamW at weight decay 0.01 on a/b mod 47, 50 % split, batch 128, lr 1e-3,
β = (0.9, 0.98) reached 95 % held-out at step 8,800 on one seed and not by 40,000 on another. The runs:
- `late` (p 47, batch 128, llama): AdamW at weight decay 0.01 (the baseline) and 1; Grokfast-EMA as
  published (the schema's grokfast defaults); every gate reading (update, gradient) × variance source
  (exact, streaming, microbatch) at weight decay 0.01. Cap 15,000 steps, stop at 95 % held-out, evaluate
  every 100 steps, seeds 0-2 (`--seeds` adds more; `--arms` restricts the added seeds to some arms).
- `nominal` (the paper's task: p 97, batch 512, llama): AdamW at weight decay 0.01 only, 3 seeds, to
  record that the baseline groks early there, so there is no delay to shorten.

Each job is one `run_grokking` call (one regime, one seed, its arms inside) in its own folder under
<work>/runs/; a job with a summary.csv is done and skipped, an unfinished one resumes inside its arm
(experiments.common). Whatever has finished is aggregated into <out>: summary.csv (every arm × seed),
table.csv (per regime and arm: steps to 95 % per seed, censored at the cap, the ratio to AdamW wd=0.01
with its interval and the verdict of `growcert.report.verdicts`), curves.csv, figures, provenance.json
and README.md.

    nice -n 19 .venv/bin/python benchmarks/grokking_late_reference.py --parallel 1
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import math
import multiprocessing
import sys
from pathlib import Path

import pandas as pd

PAPER_BASELINE, PAPER_GATE = 29_450, 5_950
SEEDS = [0, 1, 2]
COMMON = {"lr": 1e-3, "betas": [0.9, 0.98], "steps": 15_000, "stop_at_test_acc": 0.95, "eval_every": 100,
          "diagnostics_every": 500, "resume_every": 1000}
LATE = {"p": 47, "train_fraction": 0.5, "batch_size": 128, "architecture": "llama"}
NOMINAL = {"p": 97, "train_fraction": 0.5, "batch_size": 512, "architecture": "llama"}
ARMS = {"adamw": {"weight_decays": [0.01, 1.0], "baseline_weight_decay": 0.01}, "grokfast": {"enabled": True},
        "poprisk": {"gates": ["update", "gradient"], "variances": ["exact", "streaming", "microbatch"],
                    "weight_decays": [0.01], "microbatches": 4}}
NOMINAL_ARMS = {"adamw": {"weight_decays": [0.01], "baseline_weight_decay": 0.01}, "grokfast": {"enabled": False},
                "poprisk": {"gates": []}}
# --smoke: the same plumbing in seconds (tests/test_grokking_late_reference.py)
SMOKE = {"common": {"steps": 20, "eval_every": 10, "diagnostics_every": 5, "resume_every": 10, "stop_at_test_acc": 0.95,
                    "model": {"width": 16, "depth": 1, "heads": 2}},
         "late": {"p": 11, "train_fraction": 0.5, "batch_size": 16, "architecture": "llama"},
         "nominal": {"p": 13, "train_fraction": 0.5, "batch_size": 16, "architecture": "llama"}, "seeds": [0]}


def regime_id(regime: dict) -> str:
    return f"p{regime['p']}_f{regime['train_fraction']:g}_b{regime['batch_size']}_{regime['architecture']}"


def job_settings(regime: dict, arms: dict, seed: int, common: dict) -> dict:
    model = {**common.get("model", {}), "architecture": regime["architecture"]}
    return {**{k: v for k, v in common.items() if k != "model"}, **arms, "p": regime["p"], "seeds": [seed],
            "train_fraction": regime["train_fraction"], "batch_size": regime["batch_size"], "model": model}


def run_job(settings: dict, out: str) -> str:
    """One regime × seed, in a fresh process (resumes inside an arm when its resume state is there)."""
    from growcert.experiments.grokking import run_grokking

    log_path = Path(out) / "log.txt"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        run_grokking(settings, out, log=lambda line: print(line, file=log, flush=True), threads=1)
    return out


def run_jobs(jobs: list[tuple[dict, Path]], parallel: int) -> None:
    pending = [(settings, out) for settings, out in jobs if not (out / "summary.csv").exists()]
    print(f"{len(jobs) - len(pending)} of {len(jobs)} jobs already done; running {len(pending)}, {parallel} at a time",
          flush=True)
    context = multiprocessing.get_context("spawn")  # a clean torch per job
    with concurrent.futures.ProcessPoolExecutor(max_workers=parallel, mp_context=context) as pool:
        futures = {pool.submit(run_job, settings, str(out)): out for settings, out in pending}
        for future in concurrent.futures.as_completed(futures):
            future.result()
            print(f"done: {futures[future]}", flush=True)


def collect(folders: list[Path], extra: dict[Path, dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    summaries, curves = [], []
    for folder in folders:
        if (folder / "summary.csv").exists():
            summaries.append(pd.read_csv(folder / "summary.csv").assign(**extra[folder]))
            curves.append(pd.read_csv(folder / "curves.csv").assign(**extra[folder]))
    if not summaries:
        return pd.DataFrame(), pd.DataFrame()
    return pd.concat(summaries, ignore_index=True), pd.concat(curves, ignore_index=True)


def median_with_cap(steps: pd.Series) -> float:
    return float(pd.to_numeric(steps, errors="coerce").astype(float).fillna(math.inf).median())


def arm_table(summary: pd.DataFrame, cap: int) -> pd.DataFrame:
    """Per regime and arm: seeds, reached, median (inf = not reached: beyond the cap), min, max, ratio."""
    rows = []
    for (regime, arm), frame in summary.groupby(["regime", "optimizer"], sort=False):
        steps = pd.to_numeric(frame["step_95"], errors="coerce").astype(float)
        reached = steps.dropna()
        rows.append({"regime": regime, "optimizer": arm, "seeds": len(frame), "reached": len(reached),
                     "median_step_95": median_with_cap(frame["step_95"]),
                     "min_step_95": reached.min() if len(reached) else math.inf,
                     "max_step_95": steps.fillna(math.inf).max(), "cap": cap})
    table = pd.DataFrame(rows)
    baseline = table[table["optimizer"] == "AdamW wd=0.01"].set_index("regime")["median_step_95"]
    table["speedup_vs_adamw_wd0.01"] = [baseline.get(regime, math.nan) / steps if 0 < steps < math.inf else math.nan
                                        for regime, steps in zip(table["regime"], table["median_step_95"])]
    return table


def verdicts(table: pd.DataFrame) -> list[str]:
    lines = []
    for _, row in table[table["optimizer"].str.startswith("poprisk-")].iterrows():
        ratio = row["speedup_vs_adamw_wd0.01"]
        verdict = (f"does not reproduce: median not reached by the {row['cap']:,}-step cap"
                   if not math.isfinite(row["median_step_95"]) else
                   "not measurable (AdamW's median not reached)" if not math.isfinite(ratio) else
                   f"reproduces (≥ 4.9×): {ratio:.2f}×" if ratio >= PAPER_BASELINE / PAPER_GATE else
                   f"faster, but not 4.9×: {ratio:.2f}×" if ratio > 1 else f"does not reproduce: {ratio:.2f}×")
        lines.append(f"- {row['regime']} · {row['optimizer']}: {verdict}")
    return lines


def write_outputs(out: Path, command: str, plan: dict, summary: pd.DataFrame, curves: pd.DataFrame, cap: int,
                  eval_every: int) -> None:
    raise NotImplementedError("aggregation: written with the verdicts module")


def arm_subset(names: list[str]) -> dict:
    """The arm settings that run only the named arms of ARMS (AdamW wd=0.01 always runs: the baseline)."""
    wds = [wd for wd in ARMS["adamw"]["weight_decays"] if wd == 0.01 or f"AdamW wd={wd:g}" in names]
    poprisk = [name.split("-") for name in names if name.startswith("poprisk-")]
    return {"adamw": {"weight_decays": wds, "baseline_weight_decay": 0.01},
            "grokfast": {"enabled": any(name.startswith("Grokfast") for name in names)},
            "poprisk": {**ARMS["poprisk"], "gates": sorted({part[1] for part in poprisk}),
                        "variances": sorted({part[2] for part in poprisk}) or ["exact"]}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="docs/reference-results/grokking-late")
    parser.add_argument("--work", default="results-grokking-late", help="the jobs' folders (git-ignored)")
    parser.add_argument("--parallel", type=int, default=1, help="jobs at a time (each one torch thread)")
    parser.add_argument("--seeds", default="", help="extra seeds of the late regime, e.g. 3,4")
    parser.add_argument("--arms", default="", help="with --seeds: the arms those seeds run (comma-separated names)")
    parser.add_argument("--smoke", action="store_true", help="tiny plan, seconds: proves the plumbing")
    args = parser.parse_args(argv)
    out, work = Path(args.out), Path(args.work)
    common = {**COMMON, **SMOKE["common"]} if args.smoke else COMMON
    late, nominal = (SMOKE["late"], SMOKE["nominal"]) if args.smoke else (LATE, NOMINAL)
    seeds = SMOKE["seeds"] if args.smoke else SEEDS
    command = ".venv/bin/python benchmarks/grokking_late_reference.py " + " ".join(argv or sys.argv[1:])
    extra_seeds = [int(seed) for seed in args.seeds.split(",") if seed]
    extra_arms = arm_subset([name for name in args.arms.split(",") if name]) if args.arms else ARMS
    plan = {"common": common, "late": late, "nominal": nominal, "arms": ARMS, "seeds": seeds,
            "extra_seeds": extra_seeds, "extra_arms": extra_arms}

    jobs, extra = [], {}
    for name, regime, arms, regime_seeds in (("nominal", nominal, NOMINAL_ARMS, seeds), ("late", late, ARMS, seeds),
                                              ("late", late, extra_arms, extra_seeds)):
        for seed in regime_seeds:
            folder = work / "runs" / name / f"seed{seed}"
            jobs.append((job_settings(regime, arms, seed, common), folder))
            extra[folder] = {"regime": name, **regime}
    run_jobs(jobs, args.parallel)
    summary, curves = collect([folder for _, folder in jobs], extra)
    write_outputs(out, command, plan, summary, curves, common["steps"], common["eval_every"])
    print(f"reference results -> {out}", flush=True)


if __name__ == "__main__":
    main()
