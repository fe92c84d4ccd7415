"""`growcert reference export|rejudge <name>`: the command line of the reference runs (docs/reproducing.md,
"Reference runs"; the runs: growcert.reference_runs.registry).

    growcert reference export <name> --results DIR [--out docs/reference-results/<name>]
    growcert reference rejudge <name> [--out docs/reference-results/<name>]
    growcert reference targets <name> --results DIR   (the Snakemake targets: snakemake ... $(growcert reference ...))

Importing this module imports neither pandas nor torch: the registry and its judges load inside `run`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from growcert.pipeline.artifacts import KEPT_MISALIGNMENT, PROVENANCE, README, REFERENCE_RUN

NAME = "reference"
HELP = f"export a finished reference run's results to {REFERENCE_RUN.template}, or judge a committed one again"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="<action>")
    export = actions.add_parser(
        "export",
        help=f"write {REFERENCE_RUN.template}/ from a finished results folder: "
        f"tables, claims, figures, {PROVENANCE.name}, {README.name}",
    )
    export.add_argument("name", help="the reference run (growcert.reference_runs.registry.RUNS)")
    export.add_argument("--results", type=Path, required=True, help="the pipeline's results folder of the run")
    export.add_argument("--out", type=Path, default=None, help=f"default: {REFERENCE_RUN.template}")
    export.add_argument(
        "--join",
        type=Path,
        default=None,
        help="a committed run whose rows are judged together with this run's, reused only when the "
        "runs this run retrained reproduce them (within --rtol of each value)",
    )
    export.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        help="with --join: the relative tolerance of the reproduction check (default 0: value for value)",
    )
    export.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="COLUMN=V,V",
        help="with --join: keep the committed rows at these values of COLUMN (e.g. context=256,512) "
        "instead of at this run's own",
    )
    export.add_argument(
        "--misalignment",
        action="store_true",
        help="also pool the misalignment table of every run's last checkpoint that has one into "
        f"{KEPT_MISALIGNMENT.name}, judged into the 'p̂ falls with width' rows",
    )
    export.add_argument("--config", default=None, help="which of the run's configs made --results (default: its first)")
    targets = actions.add_parser(
        "targets",
        help="print the Snakemake targets that make a reference run's results "
        "(its rules, and the per-store tables its export pools)",
    )
    targets.add_argument("name", help="the reference run (growcert.reference_runs.registry.RUNS)")
    targets.add_argument("--results", type=Path, required=True, help="the results folder Snakemake writes")
    targets.add_argument("--config", default=None, help="which of the run's configs (default: its first)")
    targets.add_argument(
        "--misalignment", action="store_true", help="also the misalignment table of every run's last checkpoint"
    )
    rejudge = actions.add_parser(
        "rejudge",
        help="judge a committed reference run again from its own tables, by the current referee's rule (no retraining)",
    )
    rejudge.add_argument("name", help="the reference run (growcert.reference_runs.registry.RUNS)")
    rejudge.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"the run's folder (default: {REFERENCE_RUN.template}; a copy must keep the name)",
    )


def run(args: argparse.Namespace) -> int | None:
    from growcert.reference_runs.registry import reference_run

    reference = reference_run(args.name)
    if args.action == "rejudge":
        from growcert.reference_runs.rejudge import rejudge

        folder = rejudge(reference, args.out)
        print(f"judged {reference.name} again in {folder}")
        return None
    if args.action == "targets":
        from growcert.reference_runs.export import snakemake_targets

        print("\n".join(snakemake_targets(reference, args.results, args.config, args.misalignment)))
        return None
    from growcert.reference_runs.export import export

    folder = export(
        reference,
        args.results,
        args.out,
        join=args.join,
        rtol=args.rtol,
        keep=keep_values(args.keep),
        misalignment=args.misalignment,
        config_file=args.config,
        options=export_options(args),
    )
    print(f"exported {reference.name} to {folder}")
    return None


def keep_values(given: list[str]) -> dict[str, list]:
    """--keep COLUMN=V,V as {column: values}, whole numbers as int; ConfigError on another form."""
    from growcert.errors import ConfigError

    kept = {}
    for text in given:
        column, _, values = text.partition("=")
        if not column or not values:
            raise ConfigError(f"--keep {text}: expected COLUMN=V,V (e.g. context=256,512)")
        kept[column] = [int(value) if value.lstrip("-").isdigit() else value for value in values.split(",")]
    return kept


def export_options(args: argparse.Namespace) -> str:
    """The options an export was given, as its reproduce command repeats them (--results aside)."""
    options = [
        f"--out {args.out}" if args.out else "",
        f"--config {args.config}" if args.config else "",
        f"--join {args.join}" if args.join else "",
        f"--rtol {args.rtol:g}" if args.rtol else "",
        *(f"--keep {text}" for text in args.keep),
        "--misalignment" if args.misalignment else "",
    ]
    return " ".join(option for option in options if option)
