"""P2 noisy PINN as a protocol task: training in `experiments.pinn`; figure, claims and the report table
(best lr per optimizer) in `experiments.pinn_report`. Its units are the (arm at one lr, seed) pairs
(`experiments.units`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from growcert.pipeline.artifacts import CURVES, SUMMARY

HELP = "P2 noisy PINN (1-d advection): steps to test l2 <= target, tuned AdamW vs PopulationRiskAdam"
GATE_TITLE = "PINN: gate diagnostics (every lr)"


def units(settings: dict[str, Any]) -> list[tuple[str, int]]:
    from growcert.experiments.pinn import pinn_units

    return pinn_units(settings)


def unit_settings(settings: dict[str, Any], arm: str, seed: int) -> dict[str, Any]:
    from growcert.experiments.pinn import pinn_unit_settings

    return pinn_unit_settings(settings, arm, seed)


def run_unit(settings: dict[str, Any], out: Path, arm: str, seed: int, **runtime: Any) -> None:
    from growcert.experiments.pinn import run_pinn_unit

    run_pinn_unit(settings, out, arm, seed, **runtime)


def table(out: Path):
    from growcert.experiments.pinn_report import pinn_table

    return pinn_table(SUMMARY.path(out))


def figures(out: Path, figure: Path) -> None:
    from growcert.experiments.pinn_report import plot_pinn

    plot_pinn(CURVES.path(out), figure)


def claims(out: Path, settings: dict[str, Any], reference: str | None = None) -> list[dict[str, Any]]:
    from growcert.experiments.pinn_report import pinn_claims

    return pinn_claims(SUMMARY.path(out), settings, reference=reference)
