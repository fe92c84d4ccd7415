"""`growcert <stage>`: the command line every Snakemake rule shells out to.

Each subcommand takes explicit input and output paths, so any stage can be rerun by
hand with the same code the pipeline uses. User errors (bad settings, a missing
dataset or checkpoint) end in one line on stderr and exit status 2.
"""

# The commands are growcert.commands' registry, one module each (its arguments, settings section and run function).
# Imports of the package sit inside the command modules' `run`, so that `growcert --help` and a command that reads
# only tables never import torch. That is the one reason for a function-local import of the package, and these are
# its places (tests/test_layout.py keeps them): this module and the command modules; what `--help` reads besides
# them, the experiments registry (growcert.experiments) and its task modules (growcert.experiments.tasks); an
# experiment's report module where it draws (matplotlib, which a claims-only call does not need); and the
# misalignment's compiled loops (stats.resample imports stats.subset_sums, numba, only in the jobs that resample).

from __future__ import annotations

import argparse
import sys


def _resolve_settings(args: argparse.Namespace) -> None:
    """The command's settings, resolved once for the whole job (growcert.config.stage_settings), before any input
    is read, so a bad key fails first; the command passes them down as they are."""
    from growcert.config import parse_settings, stage_settings

    if args.settings_stage is not None:
        args.settings = stage_settings(args.settings_stage, parse_settings(args.settings))
    elif isinstance(getattr(args, "settings", None), str):
        args.settings = parse_settings(args.settings)
    if getattr(args, "pretrained_model", None) is not None:
        args.pretrained_model = stage_settings("pretrained_model", parse_settings(args.pretrained_model))


def settings_stages() -> dict[str, str]:
    """{subcommand: the stage of growcert.config.stage_settings its --settings holds}."""
    from growcert.commands import command, names

    return {name: command(name).SETTINGS for name in names() if command(name).SETTINGS is not None}


def build_parser() -> argparse.ArgumentParser:
    """`growcert`'s parser: one subcommand per command of the registry (growcert.commands)."""
    from growcert.commands import command, names

    parser = argparse.ArgumentParser(prog="growcert", description=__doc__.splitlines()[0])
    parser.set_defaults(settings_stage=None)
    stages = parser.add_subparsers(dest="stage", required=True, metavar="<stage>")
    for name in names():
        module = command(name)
        subcommand = stages.add_parser(name, help=module.HELP)
        module.add_arguments(subcommand)
        subcommand.set_defaults(settings_stage=module.SETTINGS, run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from growcert import numerics
    from growcert.errors import USER_ERRORS

    try:  # before any command imports torch: the kernel pins are read when the libraries start
        numerics.apply()
    except USER_ERRORS as error:
        print(f"growcert: error: {error}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    try:
        _resolve_settings(args)
        return args.run(args) or 0  # a command returns a status only when it has one besides 0 and 2
    except USER_ERRORS as error:
        print(f"growcert {args.stage}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
