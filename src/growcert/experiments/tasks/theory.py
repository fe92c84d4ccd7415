"""P2 theory as a protocol task: the runs in `experiments.theory`, figure, check and claim rows in
`experiments.theory_report`; the report table is the medians per measure. No optimizer arms, so no gate
figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from growcert.pipeline.artifacts import SUMMARY

HELP = "P2 theory: signal channel, reservoir, train-test coupling and SGD drift-diffusion"


def run(settings: dict[str, Any], out: Path, **runtime: Any) -> None:
    from growcert.experiments.theory import run_theory

    run_theory(settings, out, **runtime)


def table(out: Path):
    from growcert.experiments.common import median_table

    return median_table(SUMMARY.path(out), ["task", "loss", "measure"])


def figures(out: Path, figure: Path) -> None:
    from growcert.experiments.theory_report import plot_theory

    plot_theory(out, figure)


def claims(out: Path, settings: dict[str, Any], reference: str | None = None) -> list[dict[str, Any]]:
    from growcert.experiments.theory_report import theory_claims

    return theory_claims(out, settings, reference=reference)
