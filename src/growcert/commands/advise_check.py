"""`growcert advise-check`: is advise right on this model? Grow at every point for real and score it
(growcert.stages.advise_check)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, progress, user_model_arguments

NAME = "advise-check"
HELP = "is advise right here? grow at every point for real, score it"
SETTINGS = "advise_check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    user_model_arguments(parser, SETTINGS, "a growcert checkpoint step*.pt", "folder for its tables and figure")


def run(args: argparse.Namespace) -> None:
    from growcert.stages.advise_check import advise_check

    log(
        advise_check(
            args.model,
            args.data,
            args.settings,
            args.out,
            examples=args.examples,
            threads=args.threads,
            device=args.device,
            progress=progress(f"dumping {args.model}"),
            grow_progress=progress(f"growing {args.model}"),
        )
    )
