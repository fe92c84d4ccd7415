"""P2 grokking as a protocol task: training in `experiments.grokking`, figure and claims in
`experiments.grokking_report`; the report table is the summary (artifacts.SUMMARY) as written. Its units are the
(arm, seed) pairs (`experiments.units`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from growcert.pipeline.artifacts import CURVES, SUMMARY

HELP = "P2 grokking: AdamW, Grokfast-EMA, PopulationRiskAdam on a/b mod p"
GATE_TITLE = "grokking: gate diagnostics"


def units(settings: dict[str, Any]) -> list[tuple[str, int]]:
    from growcert.experiments.grokking import grokking_units

    return grokking_units(settings)


def unit_settings(settings: dict[str, Any], arm: str, seed: int) -> dict[str, Any]:
    from growcert.experiments.grokking import grokking_unit_settings

    return grokking_unit_settings(settings, arm, seed)


def unit_inputs(settings: dict[str, Any], arm: str, seed: int) -> list[tuple[str, int]]:
    from growcert.experiments.grokking import grokking_unit_inputs

    return grokking_unit_inputs(settings, arm, seed)


def run_unit(settings: dict[str, Any], out: Path, arm: str, seed: int, **runtime: Any) -> None:
    from growcert.experiments.grokking import run_grokking_unit

    run_grokking_unit(settings, out, arm, seed, **runtime)


def table(out: Path):
    import pandas as pd

    return pd.read_csv(SUMMARY.path(out))


def figures(out: Path, figure: Path) -> None:
    from growcert.experiments.grokking_report import plot_grokking

    plot_grokking(CURVES.path(out), figure)


def claims(out: Path, settings: dict[str, Any], reference: str | None = None) -> list[dict[str, Any]]:
    from growcert.experiments.grokking_report import grokking_claims

    return grokking_claims(SUMMARY.path(out), settings, reference=reference)
