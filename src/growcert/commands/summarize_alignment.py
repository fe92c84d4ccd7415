"""`growcert summarize-alignment`: the pooled alignment tables, figures and claims (growcert.stages.summaries)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument

NAME = "summarize-alignment"
HELP = "pool alignment tables: figures, summary, claims"
SETTINGS = "alignment"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--alignment", nargs="+", required=True)
    parser.add_argument("--misalignment", nargs="*", default=[], help="none when every grid sweeps context")
    settings_argument(parser, "config key alignment, as JSON or @file")
    parser.add_argument("--out-alignment", required=True)
    parser.add_argument("--out-misalignment", required=True)
    parser.add_argument("--out-summary", required=True)
    parser.add_argument("--out-claims", required=True)
    parser.add_argument("--out-checks", required=True, help="implementation checks (not claims)")
    parser.add_argument("--figures", required=True, help="folder for the p1_*.png figures")


def run(args: argparse.Namespace) -> None:
    from growcert.stages.summaries import summarize_alignment

    log(
        summarize_alignment(
            args.alignment,
            args.misalignment,
            args.settings,
            args.out_alignment,
            args.out_misalignment,
            args.out_summary,
            args.out_claims,
            args.out_checks,
            args.figures,
        )
    )
