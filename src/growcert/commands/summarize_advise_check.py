"""`growcert summarize-advise-check`: the advise-check tables of many checkpoints pooled into one folder's scores
(growcert.stages.summaries)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument
from growcert.pipeline.artifacts import ADVISE_CHECK_ROWS

NAME = "summarize-advise-check"
HELP = "pool advise-check tables: scores over seeds, claim"
SETTINGS = "advise_check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tables", nargs="+", help=f"{ADVISE_CHECK_ROWS.name} of each checkpoint")
    settings_argument(parser, "config key advise_check, as JSON or @file (beat_z, bins, level, seed)")
    parser.add_argument("--out", required=True, help=f"folder for the scores and the pooled {ADVISE_CHECK_ROWS.name}")


def run(args: argparse.Namespace) -> None:
    from growcert.stages.summaries import summarize_advise_check

    log(summarize_advise_check(args.tables, args.settings, args.out))
