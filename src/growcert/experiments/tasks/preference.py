"""P2 noisy-label DPO as a protocol task: training in `experiments.preference` (it needs the reference
llama and the text, INPUTS), figure and claims in `experiments.preference_report`; the report table is
the medians per optimizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from growcert.pipeline.artifacts import CURVES, SUMMARY

HELP = "P2 noisy-label DPO on a pretrained llama: held-out reward accuracy and reward drift"
GATE_TITLE = "noisy DPO: gate diagnostics"
INPUTS = ("reference_checkpoint", "data")


def run(settings: dict[str, Any], out: Path, **runtime: Any) -> None:
    from growcert.experiments.preference import run_preference

    run_preference(settings, out, **runtime)


def table(out: Path):
    from growcert.experiments.common import median_table

    return median_table(SUMMARY.path(out), ["optimizer"])


def figures(out: Path, figure: Path) -> None:
    from growcert.experiments.preference_report import plot_preference

    plot_preference(CURVES.path(out), figure)


def claims(out: Path, settings: dict[str, Any], reference: str | None = None) -> list[dict[str, Any]]:
    from growcert.experiments.preference_report import preference_claims

    return preference_claims(SUMMARY.path(out), settings, reference=reference)
