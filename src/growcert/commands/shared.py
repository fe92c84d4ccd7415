"""What several commands share: their argument blocks (--settings, the torch arguments, a checkpoint's, a user's
model's), the log line and the terminal's progress bar."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from growcert.schema import top_level_default

HF_HELP = (
    "read --checkpoint as a pretrained Hugging Face causal LM (a folder, or ORG/NAME in the local cache) "
    "with these settings as JSON or @file, '{}' for the defaults (stage pretrained_model of "
    "growcert.config.stage_settings: growcert.models.hf.HFSettings)"
)


def settings_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """--settings: JSON or @file, resolved by the command line before the command runs (its module's SETTINGS)."""
    parser.add_argument("--settings", default="{}", help=help)


def torch_arguments(parser: argparse.ArgumentParser) -> None:
    """--threads and --device, which every stage that runs torch takes."""
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--device",
        default=top_level_default("device"),
        help="auto | cpu | cuda | cuda:N (config key device; auto: cuda when torch sees one)",
    )


def checkpoint_arguments(parser: argparse.ArgumentParser, settings_help: str, out_help: str) -> None:
    """--checkpoint, --data, --settings, --out, --hf and the torch arguments of a stage that reads a checkpoint."""
    parser.add_argument(
        "--checkpoint", required=True, help="step{N}.pt of a trained run (with --hf: a pretrained model)"
    )
    parser.add_argument("--data", required=True, help="prepared dataset folder the model was trained on")
    settings_argument(parser, settings_help)
    parser.add_argument("--out", required=True, help=out_help)
    parser.add_argument("--hf", dest="pretrained_model", default=None, help=HF_HELP)
    torch_arguments(parser)


def user_model_arguments(parser: argparse.ArgumentParser, section: str, model_help: str, out_help: str) -> None:
    """--model, --data, --out, --settings, --examples and the torch arguments of a command on a user's own model."""
    parser.add_argument("--model", required=True, help=model_help)
    parser.add_argument("--data", required=True, help="a prepared dataset folder, or a text file for a language model")
    parser.add_argument("--out", required=True, help=out_help)
    settings_argument(parser, f"config key {section}, as JSON or @file")
    parser.add_argument("--examples", type=int, default=None, help="advise.train_examples and test_examples, both")
    torch_arguments(parser)


def log(message: str) -> None:
    print(message, flush=True)


def write_table(table, path: str) -> None:
    """Write `table` as CSV and log its row count."""
    from growcert.files import write_csv

    write_csv(table, path)
    log(f"{len(table)} rows -> {path}")


def progress(label: str) -> Callable[[int, int], None]:
    """A one-line progress bar on a terminal's stderr (nothing in a log file)."""

    def show(done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(
                f"\r{label} [{'#' * (30 * done // total):<30}] {done}/{total}",
                end="\n" if done == total else "",
                file=sys.stderr,
                flush=True,
            )

    return show
