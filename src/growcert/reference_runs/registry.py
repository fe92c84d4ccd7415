"""The registry of reference runs (docs/reproducing.md, "Reference runs"): what differs between the committed runs
under docs/reference-results/<name>/, each fact once.

A run is the pipeline run of its configs/<name>.yaml (or of the short list of configs whose results it joins):
`growcert reference export <name>` copies the tables it keeps (`kept`: its name in the folder -> its path under
the results folder) from a finished results folder, judges them (`judge`, reference_runs.judges and
reference_runs.grokking) and writes its provenance record (artifacts.PROVENANCE) and README.md; `growcert reference
rejudge <name>` runs the judge again on the committed tables. `judged` names the files the judge rewrites (what must
not change when the referee's rule has not). A run registered before it ran (`planned`, as p1-bound was) has no
folder yet; its targets and export work as any run's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from growcert.errors import ConfigError
from growcert.pipeline.artifacts import (
    ADVICE_ANSWER,
    ADVISE_CHECK_ROWS,
    ADVISE_CHECK_SCORES,
    CALIBRATION,
    CHECK_ROWS,
    CLAIM_ROWS,
    CURVES,
    DEPTH,
    DRIFT,
    GROWTH,
    GROWTH_TABLE,
    GROWTH_WON,
    INTERVENTIONS,
    INTERVENTIONS_SUMMARY,
    KEPT_ALIGNMENT,
    KEPT_DEPTH,
    KEPT_GROWTH,
    KEPT_INTERVENTIONS,
    KEPT_MISALIGNMENT,
    KEPT_TRAINING,
    MATCHED_SCORECARD,
    POOLED_ALIGNMENT,
    POOLED_DEPTH,
    POOLED_INTERVENTIONS,
    PROVENANCE,
    RECOMMENDED,
    REFERENCE_REGIME_MAP,
    REFERENCE_REGIME_STATS,
    REFERENCE_RUN,
    REFERENCE_TABLE,
    RELIABILITY,
    SCORECARD,
    SUMMARY,
    TASK,
    TRAINING_TABLE,
    Place,
    Table,
    task_claims,
    task_table,
)
from growcert.reference_runs import grokking, judges
from growcert.reference_runs.join import Join


@dataclass(frozen=True)
class ReferenceRun:
    """One committed reference run: its configs, the tables it keeps and judges, and what its README says."""

    name: str
    configs: tuple[str, ...]
    title: str
    question: str  # the README's last heading, over the verdict lines (the report reads it as the run's question)
    table: str  # what its REFERENCE_TABLE holds
    why: str
    inputs: tuple[str, ...]  # the kept tables the judge reads
    judge: Callable[[Path, dict[str, Any]], None]
    judged: tuple[str, ...]
    targets: tuple[str, ...] = ()  # the Snakemake targets that make its results ({results}: the results folder)
    kept: dict[str, Place | Table] = field(default_factory=dict)  # its name in the folder -> its place in the results
    figures: tuple[str, ...] = ()  # glob patterns under <results>/figures, copied when present
    store_alignment: bool = False  # alignment.csv pools each store's alignment table (configs.store_tables)
    # a unit-layout run: its units folder under <results>/<units>/ (grokking.collect_units); its task's figures are
    # drawn from the pooled units (export.draw_unit_figures), not copied
    units: str | None = None
    store_misalignment: bool = False  # `--misalignment` pools each store's misalignment table (misalignment.csv)
    regime: str = "calibrated"  # a unit-layout run's rows are labelled with it (SUMMARY's `regime`)
    joins: dict[str, Join] = field(default_factory=dict)  # the tables `--join` joins (reference_runs.join)
    # a run registered before it ran (no folder committed yet): where its design is. The claims it decides fall back
    # to the default run's rows until its folder exists (report.html.deciding_row); its export commits the folder,
    # and the same commit drops this
    planned: str = ""

    def folder(self) -> Path:
        return REFERENCE_RUN.path(Path(), run=self.name)

    def judged_from(self) -> str:
        """The kept tables the judge reads, as the README names them."""
        return ", ".join(self.inputs)


REGIME = dict(
    title="P1 regime reference map (docs/science.md, P1)",
    question="Does d_align rise with width (P1), at matched budget and at matched loss, per context?",
    table="width trend per (comparison, context, progress, point, reduction) cell",
    inputs=(KEPT_ALIGNMENT.name, KEPT_TRAINING.name),
    judge=judges.judge_regime,
    judged=(
        REFERENCE_TABLE.name,
        CLAIM_ROWS.name,
        *(stats.name for stats in REFERENCE_REGIME_STATS.values()),
        REFERENCE_REGIME_MAP.name,
    ),
    targets=("summarize_regime",),
    store_misalignment=True,
    kept={KEPT_ALIGNMENT.name: POOLED_ALIGNMENT, KEPT_TRAINING.name: TRAINING_TABLE},
    # a retrained run reproduces the committed map's rows within --rtol (the README says which); the committed
    # rows are kept at the steps and contexts this run trained
    joins={
        KEPT_ALIGNMENT.name: Join(
            ("family", "dataset", "width", "depth", "seed", "step", "context", "point", "reduction", "pool"),
            ("width", "seed", "context"),
            ("step", "context"),
        ),
        KEPT_TRAINING.name: Join(
            ("family", "dataset", "width", "depth", "seed", "context", "step"),
            ("width", "seed", "context"),
            ("context",),
            ("step",),
            follows=KEPT_ALIGNMENT.name,
        ),
        KEPT_MISALIGNMENT.name: Join(
            ("family", "dataset", "width", "depth", "seed", "step", "context"),
            ("width", "seed", "context"),
            ("context",),
            follows=KEPT_ALIGNMENT.name,
        ),
    },
)

RUNS: dict[str, ReferenceRun] = {
    run.name: run
    for run in (
        ReferenceRun(
            name="p1-regime",
            configs=("configs/p1-regime.yaml",),
            why="The P1 regime map over context, training progress and width",
            **REGIME,
        ),
        ReferenceRun(
            name="p1-seeds",
            configs=("configs/p1-seeds.yaml", "configs/p1-seeds-16-c256.yaml", "configs/p1-seeds-16-c512.yaml"),
            why="P1's decisive cells with more seeds, joined to the regime map's",
            **REGIME,
        ),
        ReferenceRun(
            name="p1-bound",
            configs=("configs/p1-bound.yaml",),
            title="P1's bound p̂ ≤ B_exact on pools sized for it (docs/science.md, P1)",
            question="Is p ≤ B_exact shown beyond both errors in every non-vacuous cell (P1, iid and "
            "train → test), or is p > B_exact shown in some cell?",
            table="one line per claim row: its word, the fraction of non-vacuous cells where p ≤ B_exact is "
            "shown, its level, seeds and cells",
            why="P1's bound claims on p1-seeds' models at context 256 (widths 32-256, seeds 8-15, step 300), "
            "each dumped with 1,344 training and 1,344 held-out examples and judged at R = 2,000",
            inputs=(KEPT_ALIGNMENT.name, KEPT_MISALIGNMENT.name),
            judge=judges.judge_bound_claims,
            judged=(CLAIM_ROWS.name, CHECK_ROWS.name, REFERENCE_TABLE.name),
            store_alignment=True,
            store_misalignment=True,
        ),
        ReferenceRun(
            name="p1-interventions",
            configs=("configs/p1-interventions.yaml",),
            title="P1 interventions at a growth step's scale (docs/science.md, P1)",
            question="Is the observed held-out change 96–99 % of the first-order prediction at a growth step's "
            "scale (P1, ε = 0.1, over seeds), and up to which ε does it hold?",
            table="per seed and ε: median observed / predicted held-out change of the shared variant at the last "
            "point (the claim reads ε = 0.1)",
            why="P1's interventions judged over seeds at ε = 0.1 on llama at context 256, where the mean "
            "activation gradient is detectable",
            inputs=(KEPT_INTERVENTIONS.name,),
            judge=judges.judge_interventions,
            judged=(REFERENCE_TABLE.name, CLAIM_ROWS.name, CHECK_ROWS.name),
            targets=("summarize_interventions",),
            kept={KEPT_INTERVENTIONS.name: POOLED_INTERVENTIONS, SUMMARY.name: INTERVENTIONS_SUMMARY},
            figures=(INTERVENTIONS.file,),
            store_alignment=True,
        ),
        ReferenceRun(
            name="p2-small",
            configs=("configs/p2-small.yaml",),
            title="P2 at the default settings, 8 seeds (docs/science.md, P2)",
            question="Is population-risk training 2.4× faster on the PINN, more accurate and 3.05× less drifting "
            "in noisy DPO, and does SGD drift grow as T and fluctuate as √T (P2, 8 seeds)?",
            table="every claim row of the three tasks: its word, estimate, interval and seeds",
            why="P2's PINN, noisy DPO and drift–diffusion claims at 8 seeds, at the default run's settings",
            inputs=tuple(file.path(task) for task in judges.P2_TASKS for file in (SUMMARY, PROVENANCE)),
            judge=judges.judge_p2_small,
            judged=(CLAIM_ROWS.name, CHECK_ROWS.name, REFERENCE_TABLE.name),
            targets=tuple(task_claims(task).path("{results}") for task in judges.P2_TASKS),
            kept={
                **{
                    file.path(task): file.under(TASK).at(task=task)
                    for task, files in (
                        ("pinn", (SUMMARY, CURVES, PROVENANCE)),
                        ("preference", (SUMMARY, CURVES, PROVENANCE)),
                        ("theory", (SUMMARY, DRIFT, PROVENANCE)),
                    )
                    for file in files
                },
                **{f"{task}_{REFERENCE_TABLE.name}": task_table(task) for task in judges.P2_TASKS},
            },
            figures=("p2_*.png",),
        ),
        ReferenceRun(
            name="p3-depth",
            configs=("configs/p3-depth.yaml", "configs/p3-depth-seeds.yaml", "configs/p3-depth-seeds-0-2.yaml"),
            title="P3 depth reference run (docs/science.md, P3)",
            question="Does the value of a new block fall with depth and settle on a plateau, and does growing "
            "match scratch (P3)?",
            table="value of an inserted block per model depth and point, mean over seeds with its t interval "
            "(held-out pool, last checkpoint)",
            why="P3's plateau over real depth: llama on Shakespeare, depths 1-8, and growth 2 → 3 and 4 → 6 "
            "against scratch",
            inputs=(KEPT_DEPTH.name, KEPT_GROWTH.name),
            judge=judges.judge_depth,
            judged=(REFERENCE_TABLE.name, RECOMMENDED.name, CLAIM_ROWS.name),
            targets=("summarize_depth", "summarize_growth"),
            joins={
                KEPT_DEPTH.name: Join(
                    ("family", "dataset", "width", "depth", "seed", "step", "point", "pool"),
                    ("family", "dataset", "width", "depth", "seed"),
                ),
                KEPT_GROWTH.name: Join(
                    ("family", "dataset", "width", "base_depth", "seed", "arm", "step"),
                    ("family", "dataset", "width", "base_depth", "seed"),
                ),
            },
            kept={KEPT_DEPTH.name: POOLED_DEPTH, KEPT_GROWTH.name: GROWTH_TABLE},
            figures=(DEPTH.file, GROWTH.file),
        ),
        ReferenceRun(
            name="grokking-late",
            configs=("configs/grokking-late.yaml",),
            units="grokking",
            regime="late",
            targets=(task_claims("grokking").path("{results}"),),
            title="Grokking where the baseline groks late (reference run, docs/science.md P2)",
            question="Does the paper's 4.9× (5,950 vs 29,450 steps) reproduce where AdamW groks late?",
            table="steps to 95 % held-out per regime and arm, and the speed-up verdicts",
            why="P2 grokking where the AdamW baseline groks late (a/b mod 47, batch 128)",
            inputs=(SUMMARY.name,),
            judge=grokking.judge_grokking_late,
            judged=(REFERENCE_TABLE.name, CLAIM_ROWS.name),
            # the config's 27 units joined to the committed rows no config makes (the retired driver's:
            # `--keep regime=nominal,late`), reused when the retrained units reproduce the committed outcomes
            # (wall time aside)
            joins={
                SUMMARY.name: Join(
                    ("regime", "optimizer", "seed"),
                    ("regime", "optimizer", "seed"),
                    ("regime",),
                    not_compared=("seconds", "cpu_seconds"),
                ),
                CURVES.name: Join(
                    ("regime", "optimizer", "seed", "step"),
                    ("regime", "optimizer", "seed"),
                    ("regime",),
                    follows=SUMMARY.name,
                ),
            },
        ),
        ReferenceRun(
            name="grokking-calibrated",
            configs=(
                "configs/grokking-calibrated.yaml",
                "configs/grokking-calibration.yaml",
                "configs/grokking-calibrated-seeds-14-21.yaml",
            ),
            title="Grokking at a calibrated late regime (reference run, docs/science.md P2)",
            question="Does the paper's 4.9× reproduce where AdamW groks late in every seed?",
            table="steps and CPU time to 95 % held-out per arm and seed, and the speed-up verdicts of the gate "
            "readings",
            why="P2 grokking at a regime where AdamW groks late in every seed, calibrated first",
            inputs=(SUMMARY.name,),
            judge=grokking.judge_grokking_calibrated,
            judged=(CLAIM_ROWS.name, REFERENCE_TABLE.name),
            units="grokking",
            targets=(task_claims("grokking").path("{results}"),),
        ),
        ReferenceRun(
            name="advise-check",
            configs=("configs/advise-check.yaml",),
            title=(
                "Is `growcert advise` right? (the advise-check reference run, "
                'docs/science.md, "advise-check (is the advice right?)")'
            ),
            question="At matched compute, per family, is advise's choice (train on, grow at k, no evidence) "
            "better than always training on, and do its grow-here points beat always growing at the largest "
            "first-order value?",
            table="the scorecard: each score of each rule (advise, always train on, largest first-order value, "
            "random, last point) per growth procedure, with its t interval over training seeds; "
            f"the matched-compute scorecard per family is {MATCHED_SCORECARD.name}",
            why="is growcert advise right? every decision scored against actually growing",
            inputs=(ADVISE_CHECK_ROWS.name,),
            judge=judges.judge_advise_check,
            judged=(
                SCORECARD.name,
                RELIABILITY.name,
                MATCHED_SCORECARD.name,
                CALIBRATION.name,
                GROWTH_WON.name,
                ADVICE_ANSWER.name,
                CLAIM_ROWS.name,
                REFERENCE_TABLE.name,
            ),
            targets=("summarize_advise_check",),
            kept={ADVISE_CHECK_ROWS.name: ADVISE_CHECK_ROWS.under(ADVISE_CHECK_SCORES)},
            figures=(),
        ),
    )
}


def reference_run(name: str) -> ReferenceRun:
    """The registered run `name`; ConfigError naming the registered ones otherwise."""
    if name not in RUNS:
        raise ConfigError(f"no reference run {name!r}: the registered runs are {', '.join(RUNS)}")
    return RUNS[name]
