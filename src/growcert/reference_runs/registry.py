"""The registry of reference runs (docs/reproducing.md, "Reference runs"): what differs between the committed runs
under docs/reference-results/<name>/, each fact once.

A run is the pipeline run of its configs/<name>.yaml (or of the short list of configs whose results it joins):
`growcert reference export <name>` copies the tables it keeps (`kept`: its name in the folder -> its path under
the results folder) from a finished results folder, judges them (`judge`, reference_runs.judges and
reference_runs.grokking) and writes provenance.json and README.md; `growcert reference rejudge <name>` runs the
judge again on the committed tables. `judged` names the files the judge rewrites (what must not change when the
referee's rule has not). A run registered before it ran (`planned`: p1-bound) has no folder yet; its targets and
export work as any run's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from growcert.errors import ConfigError
from growcert.pipeline.artifacts import (DEPTH, GROKKING, GROKKING_GATE, GROWTH, GROWTH_TABLE, GROWTH_TABLE_FILE,
                                         INTERVENTIONS, INTERVENTIONS_SUMMARY, POOLED_ALIGNMENT, POOLED_DEPTH,
                                         POOLED_INTERVENTIONS, TRAINING_TABLE, task_table)
from growcert.reference_runs import grokking, judges
from growcert.reference_runs.join import Join

FOLDER = Path("docs") / "reference-results"  # relative to the repository root


@dataclass(frozen=True)
class ReferenceRun:
    """One committed reference run: its configs, the tables it keeps and judges, and what its README says."""

    name: str
    configs: tuple[str, ...]
    title: str
    question: str  # the README's last heading, over the verdict lines (the report reads it as the run's question)
    table: str  # what table.csv holds
    why: str
    inputs: tuple[str, ...]  # the kept tables the judge reads
    judge: Callable[[Path, dict[str, Any]], None]
    judged: tuple[str, ...]
    targets: tuple[str, ...] = ()  # the Snakemake targets that make its results ({results}: the results folder)
    kept: dict[str, str] = field(default_factory=dict)
    figures: tuple[str, ...] = ()  # glob patterns under <results>/figures, copied when present
    store_alignment: bool = False  # alignment.csv pools each store's alignment table (configs.store_tables)
    units: str | None = None  # a unit-layout run: its units folder under <results>/<units>/ (grokking.collect_units)
    store_misalignment: bool = False  # `--misalignment` pools each store's misalignment table (misalignment.csv)
    regime: str = "calibrated"  # a unit-layout run's rows are labelled with it (summary.csv's `regime`)
    joins: dict[str, Join] = field(default_factory=dict)  # the tables `--join` joins (reference_runs.join)
    # a run registered before it ran (no folder committed yet): where its design is. The claims it decides fall back
    # to the default run's rows until its folder exists (report.html.deciding_row); its export commits the folder,
    # and the same commit drops this
    planned: str = ""

    def folder(self) -> Path:
        return FOLDER / self.name

    def judged_from(self) -> str:
        """The kept tables the judge reads, as the README names them."""
        return ", ".join(self.inputs)


REGIME = dict(
    title="P1 regime reference map (docs/science.md, P1)",
    question="Does d_align rise with width (P1), at matched budget and at matched loss, per context?",
    table="width trend per (comparison, context, progress, point, reduction) cell",
    inputs=("alignment.csv", "training.csv"),
    judge=judges.judge_regime,
    judged=("table.csv", "claims.csv", "budget.csv", "loss.csv", "matched.csv", "map.json", "spread.csv"),
    targets=("summarize_regime",), store_misalignment=True,
    kept={"alignment.csv": POOLED_ALIGNMENT, "training.csv": TRAINING_TABLE},
    # a retrained run reproduces the committed map's rows within --rtol (the README says which); the committed
    # rows are kept at the steps and contexts this run trained
    joins={"alignment.csv": Join(("family", "dataset", "width", "depth", "seed", "step", "context", "point",
                                  "reduction", "pool"), ("width", "seed", "context"), ("step", "context")),
           "training.csv": Join(("family", "dataset", "width", "depth", "seed", "context", "step"),
                                ("width", "seed", "context"), ("context",), ("step",), follows="alignment.csv"),
           "misalignment.csv": Join(("family", "dataset", "width", "depth", "seed", "step", "context"),
                                    ("width", "seed", "context"), ("context",), follows="alignment.csv")})

RUNS: dict[str, ReferenceRun] = {run.name: run for run in (
    ReferenceRun(name="p1-regime", configs=("configs/p1-regime.yaml",),
                 why="The P1 regime map over context, training progress and width", **REGIME),
    ReferenceRun(name="p1-seeds", configs=("configs/p1-seeds.yaml", "configs/p1-seeds-16-c256.yaml",
                                           "configs/p1-seeds-16-c512.yaml"),
                 why="P1's decisive cells with more seeds, joined to the regime map's", **REGIME),
    ReferenceRun(name="p1-bound", configs=("configs/p1-bound.yaml",),
                 title="P1's bound p̂ ≤ B_exact on pools sized for it (docs/science.md, P1)",
                 question="Is p ≤ B_exact shown beyond both errors in every non-vacuous cell (P1, iid and "
                          "train → test), or is p > B_exact shown in some cell?",
                 table="one line per claim row: its word, the fraction of non-vacuous cells where p ≤ B_exact is "
                       "shown, its level, seeds and cells",
                 why="P1's bound claims on p1-seeds' models at context 256 (widths 32-256, seeds 0-15, step 300), "
                     "each dumped with 1,344 training and 1,344 held-out examples and judged at R = 2,000",
                 inputs=("alignment.csv", "misalignment.csv"), judge=judges.judge_bound_claims,
                 judged=("claims.csv", "checks.csv", "table.csv"), store_alignment=True, store_misalignment=True,
                 planned="docs/reference-results/p1-seeds/bound-design.md"),
    ReferenceRun(name="p1-interventions", configs=("configs/p1-interventions.yaml",),
                 title="P1 interventions at a growth step's scale (docs/science.md, P1)",
                 question="Is the observed held-out change 96–99 % of the first-order prediction at a growth step's "
                          "scale (P1, ε = 0.1, over seeds), and up to which ε does it hold?",
                 table="per seed and ε: median observed / predicted held-out change of the shared variant at the last "
                       "point (the claim reads ε = 0.1)",
                 why="P1's interventions judged over seeds at ε = 0.1 on llama at context 256, where the mean "
                     "activation gradient is detectable",
                 inputs=("interventions.csv",), judge=judges.judge_interventions,
                 judged=("table.csv", "claims.csv", "checks.csv"), targets=("summarize_interventions",),
                 kept={"interventions.csv": POOLED_INTERVENTIONS, "summary.csv": INTERVENTIONS_SUMMARY.relative},
                 figures=(INTERVENTIONS.file,), store_alignment=True),
    ReferenceRun(name="p2-small", configs=("configs/p2-small.yaml",),
                 title="P2 at the default settings, 8 seeds (docs/science.md, P2)",
                 question="Is population-risk training 2.4× faster on the PINN, more accurate and 3.05× less drifting "
                          "in noisy DPO, and does SGD drift grow as T and fluctuate as √T (P2, 8 seeds)?",
                 table="every claim row of the three tasks: its word, estimate, interval and seeds",
                 why="P2's PINN, noisy DPO and drift–diffusion claims at 8 seeds, at the default run's settings",
                 inputs=tuple(f"{task}/{name}" for task in judges.P2_TASKS
                              for name in ("summary.csv", "provenance.json")),
                 judge=judges.judge_p2_small, judged=("claims.csv", "checks.csv", "table.csv"),
                 targets=tuple("{results}/claims/p2_" + task + ".csv" for task in judges.P2_TASKS),
                 kept={**{f"{task}/{name}": f"{task}/{name}" for task, names in (
                     ("pinn", ("summary.csv", "curves.csv", "provenance.json")),
                     ("preference", ("summary.csv", "curves.csv", "provenance.json")),
                     ("theory", ("summary.csv", "drift.csv", "provenance.json"))) for name in names},
                       **{f"{task}_table.csv": task_table(task).relative for task in judges.P2_TASKS}},
                 figures=("p2_*.png",)),
    ReferenceRun(name="p3-depth", configs=("configs/p3-depth.yaml", "configs/p3-depth-seeds.yaml",
                                           "configs/p3-depth-seeds-0-2.yaml"),
                 title="P3 depth reference run (docs/science.md, P3)",
                 question="Does the value of a new block fall with depth and settle on a plateau, and does growing "
                          "match scratch (P3)?",
                 table="value of an inserted block per model depth and point, mean over seeds with its t interval "
                       "(held-out pool, last checkpoint)",
                 why="P3's plateau over real depth: llama on Shakespeare, depths 1-8, and growth 2 → 3 and 4 → 6 "
                     "against scratch",
                 inputs=("depth.csv", GROWTH_TABLE_FILE), judge=judges.judge_depth,
                 judged=("table.csv", "recommended.csv", "claims.csv"), targets=("summarize_depth", "summarize_growth"),
                 joins={"depth.csv": Join(("family", "dataset", "width", "depth", "seed", "step", "point", "pool"),
                                          ("family", "dataset", "width", "depth", "seed")),
                        GROWTH_TABLE_FILE: Join(("family", "dataset", "width", "base_depth", "seed", "arm", "step"),
                                           ("family", "dataset", "width", "base_depth", "seed"))},
                 kept={"depth.csv": POOLED_DEPTH, GROWTH_TABLE_FILE: GROWTH_TABLE.relative},
                 figures=(DEPTH.file, GROWTH.file)),
    ReferenceRun(name="grokking-late", configs=("configs/grokking-late.yaml",), units="grokking", regime="late",
                 targets=("{results}/claims/p2_grokking.csv",),
                 title="Grokking where the baseline groks late (reference run, docs/science.md P2)",
                 question="Does the paper's 4.9× (5,950 vs 29,450 steps) reproduce where AdamW groks late?",
                 table="steps to 95 % held-out per regime and arm, and the speed-up verdicts",
                 why="P2 grokking where the AdamW baseline groks late (a/b mod 47, batch 128)",
                 inputs=("summary.csv",), judge=grokking.judge_grokking_late, judged=("table.csv", "claims.csv"),
                 # the config's 27 units joined to the committed rows no config makes (the retired driver's:
                 # `--keep regime=nominal,late`), reused when the retrained units reproduce the committed outcomes
                 # (wall time aside)
                 joins={"summary.csv": Join(("regime", "optimizer", "seed"), ("regime", "optimizer", "seed"),
                                            ("regime",), not_compared=("seconds", "cpu_seconds")),
                        "curves.csv": Join(("regime", "optimizer", "seed", "step"), ("regime", "optimizer", "seed"),
                                           ("regime",), follows="summary.csv")}),
    ReferenceRun(name="grokking-calibrated", configs=("configs/grokking-calibrated.yaml",
                                                      "configs/grokking-calibration.yaml",
                                                      "configs/grokking-calibrated-seeds-14-21.yaml"),
                 title="Grokking at a calibrated late regime (reference run, docs/science.md P2)",
                 question="Does the paper's 4.9× reproduce where AdamW groks late in every seed?",
                 table="steps and CPU time to 95 % held-out per arm and seed, and the speed-up verdicts of the gate "
                       "readings",
                 why="P2 grokking at a regime where AdamW groks late in every seed, calibrated first",
                 inputs=("summary.csv",), judge=grokking.judge_grokking_calibrated,
                 judged=("claims.csv", "table.csv"), units="grokking",
                 targets=("{results}/claims/p2_grokking.csv",), figures=(GROKKING.file, GROKKING_GATE.file)),
    ReferenceRun(name="advise-check", configs=("configs/advise-check.yaml",),
                 title='Is `growcert advise` right? (the advise-check reference run, docs/science.md, "advise-check (is the advice right?)")',
                 question="Do advise's grow-here points beat always growing at the largest first-order value?",
                 table="the scorecard: each score of each rule (advise, largest first-order value, random, last "
                       "point) per variant, with its t interval over training seeds",
                 why="is growcert advise right? every decision scored against actually growing",
                 inputs=("advise_check.csv",), judge=judges.judge_advise_check,
                 judged=("scorecard.csv", "reliability.csv", "claims.csv", "table.csv"),
                 targets=("summarize_advise_check",),
                 kept={"advise_check.csv": "advise-check/scores/advise_check.csv"},
                 figures=()),
)}


def reference_run(name: str) -> ReferenceRun:
    """The registered run `name`; ConfigError naming the registered ones otherwise."""
    if name not in RUNS:
        raise ConfigError(f"no reference run {name!r}: the registered runs are {', '.join(RUNS)}")
    return RUNS[name]
