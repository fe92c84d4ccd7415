"""`growcert summarize-regime`: the P1 regime map of a context sweep (growcert.stages.summaries)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log

NAME = "summarize-regime"
HELP = "P1 regime map of a context sweep: tables, figures, claims"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag in ("alignment", "training", "out-stats", "out-cells", "out-claims", "out-map", "figures"):
        parser.add_argument(f"--{flag}", required=True, help=f"(growcert.stages.summaries.summarize_regime: {flag})")


def run(args: argparse.Namespace) -> None:
    from growcert.stages.summaries import summarize_regime

    log(
        summarize_regime(
            args.alignment, args.training, args.out_stats, args.out_cells, args.out_claims, args.out_map, args.figures
        )
    )
