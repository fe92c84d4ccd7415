"""`growcert tune-advise-check`: advise-check's S and lr chosen on the tuning checkpoint's rows of a grid of
advise-check tables (growcert.stages.summaries, growcert.report.advice_tuning)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument
from growcert.pipeline.artifacts import ADVISE_CHECK_ROWS, TUNING, TUNING_CHOICE

NAME = "tune-advise-check"
HELP = "choose advise-check's S and lr on the tuning checkpoint"
SETTINGS = "advise_check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "tables", nargs="+", help=f"{ADVISE_CHECK_ROWS.name} of the tuning checkpoint at each grid point"
    )
    settings_argument(parser, "config key advise_check, as JSON or @file (tuning_checkpoint)")
    parser.add_argument("--out", required=True, help=f"folder for {TUNING.name} and {TUNING_CHOICE.name}")


def run(args: argparse.Namespace) -> None:
    from growcert.stages.summaries import tune_advise_check

    log(tune_advise_check(args.tables, args.settings, args.out))
