"""`growcert reference export|rejudge <name>`: the command line of the reference runs (docs/reproducing.md,
"Reference runs"; the runs: growcert.reference_runs.registry).

    growcert reference export <name> --results DIR [--out docs/reference-results/<name>]
    growcert reference rejudge <name> [--out docs/reference-results/<name>]

Importing this module imports neither pandas nor torch: the registry and its judges load inside `run`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "reference"
HELP = "export a finished reference run's results to docs/reference-results/<name>, or judge a committed one again"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="<action>")
    export = actions.add_parser("export", help="write docs/reference-results/<name>/ from a finished results folder: "
                                               "tables, claims, figures, provenance.json, README.md")
    export.add_argument("name", help="the reference run (growcert.reference_runs.registry.RUNS)")
    export.add_argument("--results", type=Path, required=True, help="the pipeline's results folder of the run")
    export.add_argument("--out", type=Path, default=None, help="default: docs/reference-results/<name>")
    export.add_argument("--join", type=Path, default=None,
                        help="a committed run whose rows are judged together with this run's, reused only when the "
                             "runs this run retrained reproduce them (within --rtol of each value)")
    export.add_argument("--rtol", type=float, default=0.0,
                        help="with --join: the relative tolerance of the reproduction check (default 0: value for "
                             "value)")
    rejudge = actions.add_parser("rejudge", help="judge a committed reference run again from its own tables, by the "
                                                 "current referee's rule (no retraining)")
    rejudge.add_argument("name", help="the reference run (growcert.reference_runs.registry.RUNS)")
    rejudge.add_argument("--out", type=Path, default=None,
                         help="the run's folder (default: docs/reference-results/<name>; a copy must keep the name)")


def run(args: argparse.Namespace) -> int | None:
    from growcert.reference_runs.registry import reference_run

    reference = reference_run(args.name)
    if args.action == "rejudge":
        from growcert.reference_runs.rejudge import rejudge

        folder = rejudge(reference, args.out)
        print(f"judged {reference.name} again in {folder}")
        return None
    from growcert.reference_runs.export import export

    folder = export(reference, args.results, args.out, join=args.join, rtol=args.rtol)
    print(f"exported {reference.name} to {folder}")
    return None
