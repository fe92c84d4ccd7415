"""`growcert advise`: should a user's own model grow, and where? (growcert.stages.advise)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, progress, user_model_arguments

NAME = "advise"
HELP = "should this model grow, and where? dump a sample, estimate every point, decide (advice.csv, advice.md, figure)"
SETTINGS = "advise"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    user_model_arguments(parser, SETTINGS, "a growcert checkpoint step*.pt or a Hugging Face causal-LM folder",
                         "folder for advice.csv, advice.md, advice.png, provenance.json")
    parser.add_argument("--growth-dims", type=int, default=None, help="M new directions of the certificates "
                        "(advise.growth_dims; default: alignment.reference_mk)")


def run(args: argparse.Namespace) -> None:
    from growcert.stages.advise import advise

    log(advise(args.model, args.data, args.settings, args.out, growth_dims=args.growth_dims, examples=args.examples,
               threads=args.threads, device=args.device, progress=progress(f"dumping {args.model}")))
