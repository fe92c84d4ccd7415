"""`growcert prepare`: a dataset's arrays, split and provenance (growcert.data.prepare_dataset)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument
from growcert.pipeline.artifacts import ARRAYS, INFO

NAME = "prepare"
HELP = "prepare a dataset (arrays, split, provenance)"
SETTINGS = None  # a dataset's settings: parsed only, the dataset's module checks them


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True)
    settings_argument(parser, "dataset settings as JSON, or @file")
    parser.add_argument("--out", required=True, help=f"output folder ({ARRAYS.name} + {INFO.name})")


def run(args: argparse.Namespace) -> None:
    from growcert.data import prepare_dataset

    info = prepare_dataset(args.dataset, args.out, args.settings)
    log(f"prepared {args.dataset}: {info['n_train']} train / {info['n_test']} test -> {args.out}")
