"""The summarize stages (`growcert summarize-*`): each pools the per-job tables of one analysis into its pooled
tables, claim and check rows and figures, and returns a log line. The tables, rows and figures themselves are
report/'s (alignment, regime, interventions, depth, advice_check); these functions only read and write files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from growcert.errors import ConfigError
from growcert.files import read_csvs, write_csv, write_text
from growcert.pipeline.artifacts import (
    DALIGN_VS_WIDTH,
    GROWTH_RUN_TABLE,
    MISALIGNMENT_VS_MK,
    MISALIGNMENT_VS_WIDTH,
    PLUGIN_VS_UNBIASED,
    REGIME_STATS,
    TUNING,
    TUNING_CHOICE,
)
from growcert.referee.claims import CLAIMS
from growcert.referee.rows import ROW_COLUMNS, write_rows
from growcert.report import advice_check, advice_tuning, interventions, regime
from growcert.report import alignment as p1
from growcert.report import depth as p3
from growcert.stats.regime import seed_spread


def summarize_intervention_tables(
    tables: list[str | Path],
    out_table: str | Path,
    out_summary: str | Path,
    out_checks: str | Path,
    out_claims: str | Path,
    figure: str | Path,
) -> str:
    """`growcert summarize-interventions`: the pooled table, its summary, the check rows, the claim row and the
    figure."""
    table = read_csvs(tables)
    write_csv(table, out_table)
    write_csv(interventions.summarize_interventions(table), out_summary)
    write_rows(
        interventions.intervention_checks(table) + interventions.intervention_claim(table),
        claims=out_claims,
        checks=out_checks,
    )
    interventions.plot_interventions(table, figure)
    return f"{len(table)} intervention rows -> {out_table}, {out_summary}, {out_checks}, {out_claims}"


def summarize_alignment(
    alignment_tables: list[str | Path],
    misalignment_tables: list[str | Path],
    settings: dict[str, Any],
    out_alignment: str | Path,
    out_misalignment: str | Path,
    out_summary: str | Path,
    out_claims: str | Path,
    out_checks: str | Path,
    figures: str | Path,
) -> str:
    """`growcert summarize-alignment`: the pooled tables, the summary, the claim and check rows and the P1
    figures (the misalignment ones only when a fixed-context run gave misalignment tables); a log line."""
    reference_mk = tuple(settings["reference_mk"])
    alignment, misalignment = read_csvs(alignment_tables), read_csvs(misalignment_tables)
    write_csv(alignment, out_alignment)
    write_csv(misalignment, out_misalignment)
    write_csv(p1.alignment_summary(alignment), out_summary)
    write_rows(p1.alignment_claims(alignment, misalignment, reference_mk, settings["level"]), out_claims, out_checks)
    figures = Path(figures)
    p1.plot_dalign_vs_width(alignment, figures / DALIGN_VS_WIDTH.file)
    p1.plot_plugin_vs_unbiased(alignment, figures / PLUGIN_VS_UNBIASED.file)
    if len(misalignment):
        p1.plot_misalignment(
            misalignment, reference_mk, figures / MISALIGNMENT_VS_WIDTH.file, figures / MISALIGNMENT_VS_MK.file
        )
    return f"{len(alignment)} alignment rows, {len(misalignment)} misalignment rows -> {out_alignment}, {out_claims}"


def summarize_regime(
    alignment: str | Path,
    training: str | Path,
    out_stats: str | Path,
    out_cells: str | Path,
    out_claims: str | Path,
    out_map: str | Path,
    figures: str | Path,
    level: float = 0.95,
    reference: str | None = None,
) -> str:
    """`growcert summarize-regime`: every table, figure and claim row of the map; returns a log line. `reference`
    names the reference run being judged (docs/reference-results/<name>), whose registered looks set the level of
    a claim judged at a later look (`report.regime.regime_claims`)."""
    table = regime.regime_table(pd.read_csv(alignment), pd.read_csv(training))
    tables = regime.regime_tables(table)
    for name in ("budget", "loss", "matched"):
        write_csv(tables[name], Path(out_stats) / REGIME_STATS[name].name)
    spread = seed_spread(table, level=level)
    write_csv(spread, Path(out_stats) / REGIME_STATS["spread"].name)
    write_csv(regime.cells_table(tables, level), out_cells)
    write_rows(regime.regime_claims(table, tables, level, reference), out_claims)
    reasons = regime.draw_figures(table, tables["matched"], figures, spread)
    write_text(
        out_map,
        json.dumps(
            {"coverage": regime.coverage(table), "figures": reasons, "spread": regime.spread_summary(spread)}, indent=1
        ),
    )
    missing = [stem for stem, reason in reasons.items() if reason]
    return f"regime map: {regime.coverage(table)}; {len(table)} held-out rows; figures not drawn: {missing or 'none'}"


def summarize_depth(
    tables: list[str | Path],
    settings: dict[str, Any],
    out_table: str | Path,
    out_decision: str | Path,
    figure: str | Path,
) -> str:
    """`growcert summarize-depth`: the pooled depth table, the saturation decision and the depth figure."""
    table = read_csvs(tables)
    write_csv(table, out_table)
    decision = p3.recommend_depth(
        table, level=settings["level"], draws=settings["saturation_draws"], seed=settings["seed"]
    )
    write_csv(decision, out_decision)
    p3.plot_depth(table, figure)
    return f"{len(table)} depth rows, {len(decision)} decisions -> {out_table}, {out_decision}"


def summarize_growth(
    runs: list[str | Path], depth_table: str | Path, out_table: str | Path, out_claims: str | Path, figure: str | Path
) -> str:
    """`growcert summarize-growth`: the pooled growth table, the P3 claim rows (with the pooled depth table)
    and the growth figure."""
    growth = read_csvs([GROWTH_RUN_TABLE.path(Path(folder)) for folder in runs])
    write_csv(growth, out_table)
    claims = p3.depth_claims(pd.read_csv(depth_table), growth)
    write_csv(pd.DataFrame(claims, columns=ROW_COLUMNS), out_claims)
    p3.plot_growth(growth, figure)
    return f"{len(growth)} growth rows, {len(claims)} claim rows -> {out_table}, {out_claims}"


def summarize_advise_check(tables: list[str | Path], settings: dict[str, Any], out: str | Path) -> str:
    """The advise-check tables of many checkpoints pooled into one folder's scores (`report.advice_check.write_scores`);
    returns the score lines. A table without the stage's columns is refused, naming it."""
    for path in tables:
        missing = [column for column in advice_check.COLUMNS if column not in pd.read_csv(path, nrows=0).columns]
        if missing:
            raise ConfigError(f"{path}: not an advise-check table (no column {missing[0]!r})")
    table, left_out = advice_check.scored_table(read_csvs(tables), settings)
    if table.empty:
        raise ConfigError(f"no rows left to score in {len(tables)} tables: {'; '.join(left_out)}")
    paths = advice_check.write_scores(out, table, settings)
    checkpoints = table["model"].nunique()
    return "\n".join(
        [
            *left_out,
            f"{checkpoints} checkpoints, {table['train_seed'].nunique()} seeds, {len(table)} rows",
            *advice_check.score_lines(table, settings),
            *advice_check.comparison_lines(paths),
            f"-> {paths['scorecard']}",
        ]
    )


def tune_advise_check(tables: list[str | Path], settings: dict[str, Any], out: str | Path) -> str:
    """`growcert tune-advise-check`: S and lr chosen on the tuning checkpoint's rows of the grid's advise-check tables
    (`report.advice_tuning.choose_budget`); writes tuning.csv (the grid) and choice.csv, returns the choice's line."""
    for path in tables:
        missing = [column for column in advice_check.COLUMNS if column not in pd.read_csv(path, nrows=0).columns]
        if missing:
            raise ConfigError(f"{path}: not an advise-check table (no column {missing[0]!r})")
    sesoi = CLAIMS[advice_check.CLAIM].effect.sesoi
    budget, grid = advice_tuning.choose_budget(read_csvs(tables), settings["tuning_checkpoint"], sesoi)
    out = Path(out)
    write_csv(grid, TUNING.path(out))
    write_csv(
        pd.DataFrame(
            [
                {
                    "tuning_checkpoint": settings["tuning_checkpoint"],
                    "steps": budget.steps,
                    "lr": budget.lr,
                    "sesoi": sesoi,
                    "reason": budget.reason,
                }
            ]
        ),
        TUNING_CHOICE.path(out),
    )
    return f"{grid.to_string(index=False)}\n\nchosen: {budget.reason}\n-> {TUNING_CHOICE.path(out)}"
