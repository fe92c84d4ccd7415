"""P2 grokking as a protocol task: training in `experiments.grokking`, figure and claims in
`experiments.grokking_report`; the report table is summary.csv as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HELP = "P2 grokking: AdamW, Grokfast-EMA, PopulationRiskAdam on a/b mod p"
GATE_TITLE = "grokking: gate diagnostics"


def run(settings: dict[str, Any], out: Path, **runtime: Any) -> None:
    from growcert.experiments.grokking import run_grokking

    run_grokking(settings, out, **runtime)


def table(out: Path):
    import pandas as pd

    return pd.read_csv(out / "summary.csv")


def figures(out: Path, figure: Path) -> None:
    from growcert.experiments.grokking_report import plot_grokking

    plot_grokking(out / "curves.csv", figure)


def claims(out: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    from growcert.experiments.grokking_report import grokking_claims

    return grokking_claims(out / "summary.csv", settings)
