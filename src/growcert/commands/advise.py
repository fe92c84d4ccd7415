"""`growcert advise`: with S more steps, should a user's own model train on or grow, and where?
(growcert.stages.advise)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, progress, user_model_arguments
from growcert.pipeline.artifacts import ADVICE_FIGURE, ADVICE_PAGE, ADVICE_TABLE, PROVENANCE

NAME = "advise"
HELP = (
    "with S more steps, train on or grow (where)? dump a sample, predict every option's held-out gain, decide "
    f"({ADVICE_TABLE.name}, {ADVICE_PAGE.name}, figure)"
)
SETTINGS = "advise"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    user_model_arguments(
        parser,
        SETTINGS,
        "a growcert checkpoint step*.pt or a Hugging Face causal-LM folder",
        f"folder for {ADVICE_TABLE.name}, {ADVICE_PAGE.name}, {ADVICE_FIGURE.name}, {PROVENANCE.name}",
    )
    parser.add_argument(
        "--growth-dims",
        type=int,
        default=None,
        help="M new directions of the certificates (advise.growth_dims; default: alignment.reference_mk)",
    )
    parser.add_argument(
        "--budget-steps",
        type=int,
        default=None,
        help="S: the steps left to spend; every option's gain is predicted over S steps (advise.budget_steps)",
    )


def run(args: argparse.Namespace) -> None:
    from growcert.stages.advise import advise

    log(
        advise(
            args.model,
            args.data,
            args.settings,
            args.out,
            growth_dims=args.growth_dims,
            examples=args.examples,
            budget_steps=args.budget_steps,
            threads=args.threads,
            device=args.device,
            progress=progress(f"dumping {args.model}"),
        )
    )
