"""How each reference run judges its claims from the tables it keeps (docs/reproducing.md, "Reference runs").

A judge takes a reference run's folder (docs/reference-results/<name>/, or a scratch copy that keeps the name: a
claim judged on more seeds than at one of its registered looks is judged at the group-sequential level of
growcert.referee.looks, which reads the folder's name) and its provenance record, reads the run's kept input tables
and rewrites the judged ones (the claim rows, artifacts.CLAIM_ROWS, and the tables built on the verdicts), by the
current referee's rule (growcert.referee.verdicts). Nothing is retrained. The grokking runs' judges live in
reference_runs.grokking.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.experiments import task
from growcert.pipeline.artifacts import (
    ADVISE_CHECK_ROWS,
    CHECK_ROWS,
    CLAIM_ROWS,
    FIGURES_DIR,
    KEPT_ALIGNMENT,
    KEPT_DEPTH,
    KEPT_GROWTH,
    KEPT_INTERVENTIONS,
    KEPT_MISALIGNMENT,
    KEPT_TRAINING,
    POOLED_ALIGNMENT,
    PROVENANCE,
    RECOMMENDED,
    REFERENCE_REGIME_MAP,
    REFERENCE_REGIME_STATS,
    REFERENCE_TABLE,
    REGIME_CELLS,
    REGIME_CLAIMS,
    REGIME_MAP,
    REGIME_STATS,
    SCORECARD,
    TRAINING_TABLE,
)
from growcert.plan.grids import training_runs
from growcert.referee.claims import CLAIMS
from growcert.referee.rows import CHECK_COLUMNS, DESIGN_DTYPES, ROW_COLUMNS, write_rows
from growcert.reference_runs.configs import merged_config
from growcert.report.advice_check import first_form_rows, write_scores
from growcert.report.alignment import certificate_rows, misalignment_width_rows
from growcert.report.depth import depth_claims, depth_profile, recommend_depth
from growcert.report.interventions import claim_cells, intervention_checks, intervention_claim
from growcert.stages.summaries import summarize_regime

# what summarize-regime writes (under a results folder) -> where the reference run keeps it
REGIME_OUTPUTS = [
    (REGIME_CELLS, REFERENCE_TABLE),
    (REGIME_CLAIMS, CLAIM_ROWS),
    (REGIME_MAP, REFERENCE_REGIME_MAP),
    *((REGIME_STATS[part], REFERENCE_REGIME_STATS[part]) for part in REGIME_STATS),
]
DEFAULT_REFERENCE_MK = (32, 32)  # alignment.reference_mk of config.yaml, for a map that recorded none
P2_TASKS = ("pinn", "preference", "theory")
P2_TABLE_COLUMNS = [
    "task",
    "claim_id",
    "claim",
    "role",
    "verdict",
    "estimate",
    "low",
    "high",
    "level",
    "seeds",
    "seeds_to_reproduce",
    "seeds_to_contradict",
    "direction",
]


def judge_regime(folder: Path, record: dict[str, Any]) -> None:
    """The P1 regime map (p1-regime, p1-seeds): `growcert summarize-regime` on the map's alignment.csv (its rows
    with a context) and training.csv, its tables and figures copied over the folder's, then the "p̂ falls with
    width" rows from misalignment.csv where the map has one (report.alignment.misalignment_width_rows)."""
    alignment = pd.read_csv(KEPT_ALIGNMENT.path(folder))
    alignment[alignment["context"].notna()].to_csv(KEPT_ALIGNMENT.path(folder), index=False)
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch)
        TRAINING_TABLE.path(results).parent.mkdir()
        for kept, pooled in ((KEPT_ALIGNMENT, POOLED_ALIGNMENT), (KEPT_TRAINING, TRAINING_TABLE)):
            shutil.copyfile(kept.path(folder), pooled.path(results))
        summarize_regime(
            POOLED_ALIGNMENT.path(results),
            TRAINING_TABLE.path(results),
            TRAINING_TABLE.path(results).parent,
            REGIME_CELLS.path(results),
            REGIME_CLAIMS.path(results),
            REGIME_MAP.path(results),
            FIGURES_DIR.path(results),
            reference=folder.name,
        )
        for source, target in REGIME_OUTPUTS:
            shutil.copyfile(source.path(results), target.path(folder))
        for figure in sorted(FIGURES_DIR.path(results).glob("p1_regime_*.png")):
            shutil.copyfile(figure, folder / figure.name)
    reference_mk = tuple((record.get("misalignment") or {}).get("reference_mk") or DEFAULT_REFERENCE_MK)
    add_misalignment_claims(folder, reference_mk)


def add_misalignment_claims(folder: Path, reference_mk: tuple[int, int], level: float = 0.95) -> int:
    """Append the "p̂ falls with width" rows judged on `folder`'s misalignment.csv to its claim rows
    (artifacts.CLAIM_ROWS); how many."""
    if not KEPT_MISALIGNMENT.path(folder).is_file():
        return 0
    rows = misalignment_width_rows(pd.read_csv(KEPT_MISALIGNMENT.path(folder)), tuple(reference_mk), level, folder.name)
    claims = pd.read_csv(CLAIM_ROWS.path(folder), dtype=DESIGN_DTYPES)
    pd.concat([claims, pd.DataFrame(rows, columns=ROW_COLUMNS)], ignore_index=True).to_csv(
        CLAIM_ROWS.path(folder), index=False
    )
    return len(rows)


BOUND_TABLE_COLUMNS = ["claim_id", "claim", "role", "verdict", "estimate", "level", "seeds", "this_run", "why"]


def judge_bound_claims(folder: Path, record: dict[str, Any], level: float = 0.95) -> None:
    """p1-bound: P1's bound claims p̂ ≤ B_exact (iid, train → test) alone, as the default run's summarize-alignment
    judges them (report.alignment.certificate_rows: referee.bounds.judge_bound per cell over the last checkpoint's
    determined cells) on alignment.csv and misalignment.csv at the contexts the run's config trains: the claim rows,
    artifacts.CLAIM_ROWS (two), checks.csv (B_exact ≤ B_align in each mode) and the reference table,
    artifacts.REFERENCE_TABLE (one line per claim row)."""
    if not KEPT_MISALIGNMENT.path(folder).is_file():
        raise ConfigError(
            f"{folder}: no {KEPT_MISALIGNMENT.name}, which p1-bound's claims are judged from: export the run "
            "with --misalignment"
        )
    contexts = sorted({run.context for run in training_runs(merged_config(record["config_file"]))})
    alignment, misalignment = (pd.read_csv(kept.path(folder)) for kept in (KEPT_ALIGNMENT, KEPT_MISALIGNMENT))

    def trained(table: pd.DataFrame) -> pd.DataFrame:
        return table[table["context"].isin(contexts)] if "context" in table else table

    rows = certificate_rows(trained(alignment), trained(misalignment), level, reference=folder.name)
    write_rows(rows, claims=CLAIM_ROWS.path(folder), checks=CHECK_ROWS.path(folder))
    claims = pd.DataFrame([row for row in rows if "claim_id" in row], columns=ROW_COLUMNS)
    claims[BOUND_TABLE_COLUMNS].to_csv(REFERENCE_TABLE.path(folder), index=False)


def intervention_seed_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per seed and ε: the median observed / predicted over the (draw, width) cells the claim reads
    (report.interventions.claim_cells), how many cells, and the share whose sign agrees."""
    rows = claim_cells(table).groupby(["seed", "epsilon"])
    return rows.agg(
        median_ratio=("ratio", "median"), cells=("ratio", "size"), sign_agreement=("sign_agree", "mean")
    ).reset_index()


def judge_interventions(folder: Path, record: dict[str, Any]) -> None:
    """p1-interventions: the reference table, artifacts.REFERENCE_TABLE (per seed and ε), the claim rows,
    artifacts.CLAIM_ROWS (report.interventions.intervention_claim) and checks.csv (intervention_checks) from
    interventions.csv."""
    table = pd.read_csv(KEPT_INTERVENTIONS.path(folder))
    intervention_seed_table(table).to_csv(REFERENCE_TABLE.path(folder), index=False)
    write_rows(
        intervention_claim(table, reference=folder.name) + intervention_checks(table),
        claims=CLAIM_ROWS.path(folder),
        checks=CHECK_ROWS.path(folder),
    )


def judge_p2_small(folder: Path, record: dict[str, Any]) -> None:
    """p2-small: each task's `claims` function (the one the pipeline's rules call) on its kept folder, with the
    settings its provenance record (artifacts.PROVENANCE) holds and the run's name (its looks): the claim rows
    (artifacts.CLAIM_ROWS), checks.csv and the reference table (artifacts.REFERENCE_TABLE, one line per claim
    row)."""
    claims, checks = [], []
    for name in P2_TASKS:
        settings = json.loads(PROVENANCE.path(folder / name).read_text())["settings"]
        for row in task(name).claims(folder / name, settings, reference=folder.name):
            (claims if "claim_id" in row else checks).append(row)
    frame = pd.DataFrame(claims, columns=ROW_COLUMNS)
    frame.to_csv(CLAIM_ROWS.path(folder), index=False)
    pd.DataFrame(checks, columns=CHECK_COLUMNS).to_csv(CHECK_ROWS.path(folder), index=False)
    stage = {key: claim.stage for key, claim in CLAIMS.items()}
    frame.assign(task=frame["claim_id"].map(stage))[P2_TABLE_COLUMNS].to_csv(REFERENCE_TABLE.path(folder), index=False)


def judge_depth(folder: Path, record: dict[str, Any], level: float = 0.95) -> None:
    """p3-depth: the reference table, artifacts.REFERENCE_TABLE (report.depth.depth_profile of the held-out pool at
    the last checkpoint), recommended.csv (recommend_depth) and the claim rows, artifacts.CLAIM_ROWS (depth_claims),
    from depth.csv and growth.csv."""
    depth, growth = pd.read_csv(KEPT_DEPTH.path(folder)), pd.read_csv(KEPT_GROWTH.path(folder))
    held_out = depth[(depth["pool"] == "test") & (depth["step"] == depth["step"].max())]
    depth_profile(held_out, level).to_csv(REFERENCE_TABLE.path(folder), index=False)
    recommend_depth(held_out, level=level).to_csv(RECOMMENDED.path(folder), index=False)
    pd.DataFrame(depth_claims(depth, growth, level, reference=folder.name), columns=ROW_COLUMNS).to_csv(
        CLAIM_ROWS.path(folder), index=False
    )


ADVISE_FIRST_FORM = "first-form"  # advise-check's run at the untuned S and lr (the claim's first form), kept whole


def judge_advise_check(folder: Path, record: dict[str, Any]) -> None:
    """advise-check: `growcert summarize-advise-check`'s scores (report.advice_check.write_scores: scorecard,
    reliability, claims) from the pooled advise_check.csv, with the advise_check settings of the run's config;
    then, where the folder keeps the claim's first form (first-form/advise_check.csv, the run at the untuned S and
    lr, which no config makes any more), its primary row judged the same way as a secondary row
    (report.advice_check.first_form_rows). The reference table (artifacts.REFERENCE_TABLE) is the scorecard."""
    settings = stage_settings("advise_check", merged_config(record["config_file"]).get("advise_check", {}))
    write_scores(folder, pd.read_csv(ADVISE_CHECK_ROWS.path(folder)), settings, reference=folder.name)
    first = ADVISE_CHECK_ROWS.path(folder / ADVISE_FIRST_FORM)
    if first.is_file():
        claims = pd.read_csv(CLAIM_ROWS.path(folder), dtype=DESIGN_DTYPES)
        rows = pd.DataFrame(first_form_rows(pd.read_csv(first), settings, folder.name), columns=ROW_COLUMNS)
        pd.concat([claims, rows], ignore_index=True).to_csv(CLAIM_ROWS.path(folder), index=False)
    shutil.copyfile(SCORECARD.path(folder), REFERENCE_TABLE.path(folder))
