"""`growcert summarize-depth`: the pooled depth tables, the saturation decision and the figure
(growcert.stages.summaries)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument

NAME = "summarize-depth"
HELP = "pool depth tables: saturation decision and figure"
SETTINGS = "depth"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tables", nargs="+")
    settings_argument(parser, "config key depth, as JSON or @file")
    parser.add_argument("--out-table", required=True)
    parser.add_argument("--out-decision", required=True)
    parser.add_argument("--figure", required=True)


def run(args: argparse.Namespace) -> None:
    from growcert.stages.summaries import summarize_depth

    log(summarize_depth(args.tables, args.settings, args.out_table, args.out_decision, args.figure))
