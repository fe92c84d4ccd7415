"""`growcert report`: the self-contained HTML report (growcert.report.html)."""

from __future__ import annotations

import argparse
from pathlib import Path

from growcert.commands.shared import log
from growcert.pipeline.artifacts import REFERENCE_RUNS

NAME = "report"
HELP = "self-contained HTML report from the tables and figures present"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", required=True, help="results folder")
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--references",
        type=Path,
        default=None,
        help=f"folder of reference runs to show (default: {REFERENCE_RUNS.template} under the working "
        "directory when it exists, else none)",
    )
    parser.add_argument("--screenshot", default=None, help="also save its first screen (1280x900) here with chromium")


def run(args: argparse.Namespace) -> None:
    from growcert.report.html import build_report
    from growcert.report.reference import default_references

    build_report(args.results, args.out, args.references if args.references is not None else default_references())
    log(f"report -> {args.out}")
    if args.screenshot:
        from growcert.report.page import first_screen

        log(first_screen(args.out, args.screenshot))
