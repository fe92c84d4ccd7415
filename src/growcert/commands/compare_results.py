"""`growcert compare-results`: two results folders, bit for bit (growcert.store.compare)."""

from __future__ import annotations

import argparse

NAME = "compare-results"
HELP = "two results folders, bit for bit: tables, store arrays, checkpoint weights (exit 1 when they differ)"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folders", nargs=2, metavar="RESULTS")


def run(args: argparse.Namespace) -> int:
    from growcert.store.compare import compare_results, comparison_lines

    comparison = compare_results(*args.folders)
    print("\n".join(comparison_lines(comparison, *args.folders)))
    return 0 if comparison.same else 1
