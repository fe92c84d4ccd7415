"""`growcert summarize-growth`: the pooled growth tables, the P3 claims and the figure (growcert.stages.summaries)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log

NAME = "summarize-growth"
HELP = "pool growth tables: figure and P3 claims"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", help="grow output folders")
    parser.add_argument("--depth", required=True, help="pooled depth table")
    parser.add_argument("--out-table", required=True)
    parser.add_argument("--out-claims", required=True)
    parser.add_argument("--figure", required=True)


def run(args: argparse.Namespace) -> None:
    from growcert.stages.summaries import summarize_growth

    log(summarize_growth(args.runs, args.depth, args.out_table, args.out_claims, args.figure))
