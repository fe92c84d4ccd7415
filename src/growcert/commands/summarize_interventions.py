"""`growcert summarize-interventions`: the pooled intervention tables, figure, checks and claim
(growcert.stages.summaries)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log

NAME = "summarize-interventions"
HELP = "pool intervention tables: summary, figure, checks"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tables", nargs="+")
    parser.add_argument("--out-table", required=True)
    parser.add_argument("--out-summary", required=True)
    parser.add_argument("--out-checks", required=True, help="implementation checks (not claims)")
    parser.add_argument("--out-claims", required=True, help="the claim row at the paper's step scale")
    parser.add_argument("--figure", required=True)


def run(args: argparse.Namespace) -> None:
    from growcert.stages.summaries import summarize_intervention_tables

    log(
        summarize_intervention_tables(
            args.tables, args.out_table, args.out_summary, args.out_checks, args.out_claims, args.figure
        )
    )
