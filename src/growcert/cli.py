"""`growcert <stage>`: the command line every Snakemake rule shells out to.

Each subcommand takes explicit input and output paths, so any stage can be rerun by
hand with the same code the pipeline uses. User errors (bad settings, a missing
dataset or checkpoint) end in one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _settings(text: str) -> dict[str, Any]:
    """Settings as inline JSON, or `@path` to a JSON/YAML file."""
    if text.startswith("@"):
        import yaml

        return yaml.safe_load(Path(text[1:]).read_text())
    return json.loads(text)


def _log(message: str) -> None:
    print(message, flush=True)


def cmd_prepare(args: argparse.Namespace) -> None:
    from growcert.data import prepare_dataset

    info = prepare_dataset(args.dataset, args.out, _settings(args.settings))
    _log(f"prepared {args.dataset}: {info['n_train']} train / {info['n_test']} test -> {args.out}")


def cmd_train(args: argparse.Namespace) -> None:
    from growcert.data import load_prepared
    from growcert.train import train_model

    train_model(_settings(args.settings), load_prepared(args.data), args.out, threads=args.threads, log=_log)


def cmd_dump(args: argparse.Namespace) -> None:
    from growcert.data import load_prepared
    from growcert.dump import dump_gradients

    dump_gradients(args.checkpoint, load_prepared(args.data), args.out, _settings(args.settings),
                   threads=args.threads, log=_log)


def cmd_inspect(args: argparse.Namespace) -> None:
    from growcert.inspect_store import inspect_store

    print(inspect_store(args.store, summaries=not args.no_summaries))


def cmd_summarize_training(args: argparse.Namespace) -> None:
    from growcert.summaries import training_table

    table = training_table(args.runs)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    _log(f"{len(table)} rows from {len(args.runs)} runs -> {args.out}")


def cmd_plot_training(args: argparse.Namespace) -> None:
    import pandas as pd

    from growcert.plots import training_grid

    training_grid(pd.read_csv(args.table), args.out)
    _log(f"figure -> {args.out}")


def cmd_report(args: argparse.Namespace) -> None:
    from growcert.report import build_report

    build_report(args.results, args.out)
    _log(f"report -> {args.out}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="growcert", description=__doc__.splitlines()[0])
    stages = parser.add_subparsers(dest="stage", required=True, metavar="<stage>")

    prepare = stages.add_parser("prepare", help="prepare a dataset (arrays, split, provenance)")
    prepare.add_argument("--dataset", required=True)
    prepare.add_argument("--settings", default="{}", help="dataset settings as JSON, or @file")
    prepare.add_argument("--out", required=True, help="output folder (arrays.npz + info.json)")
    prepare.set_defaults(handler=cmd_prepare)

    train = stages.add_parser("train", help="train one model of a grid, saving checkpoints and metrics.json")
    train.add_argument("--data", required=True, help="prepared dataset folder")
    train.add_argument("--settings", required=True, help="run settings as JSON, or @file (growcert.config.train_settings)")
    train.add_argument("--out", required=True, help="run folder (step{N}.pt, metrics.json)")
    train.add_argument("--threads", type=int, default=1)
    train.set_defaults(handler=cmd_train)

    dump = stages.add_parser("dump", help="store per-example activations and activation gradients of a checkpoint")
    dump.add_argument("--checkpoint", required=True, help="step{N}.pt of a trained run")
    dump.add_argument("--data", required=True, help="prepared dataset folder the model was trained on")
    dump.add_argument("--settings", default='{"train_examples": 512, "test_examples": 512, "batch_size": 64, '
                      '"seed": 0, "points": null}', help="dump settings as JSON, or @file (config key dump)")
    dump.add_argument("--out", required=True, help="store path (PATH.zarr)")
    dump.add_argument("--threads", type=int, default=1)
    dump.set_defaults(handler=cmd_dump)

    inspect = stages.add_parser("inspect", help="describe a gradient store: groups, dims, chunks, compression, attrs, q summary")
    inspect.add_argument("store", help="PATH.zarr")
    inspect.add_argument("--no-summaries", action="store_true", help="skip the per-split q summary (no data read)")
    inspect.set_defaults(handler=cmd_inspect)

    summarize = stages.add_parser("summarize-training", help="tidy table of every run's evaluation history")
    summarize.add_argument("runs", nargs="+", help="run folders holding metrics.json")
    summarize.add_argument("--out", required=True)
    summarize.set_defaults(handler=cmd_summarize_training)

    plot = stages.add_parser("plot-training", help="held-out loss/accuracy vs width and depth")
    plot.add_argument("--table", required=True)
    plot.add_argument("--out", required=True)
    plot.set_defaults(handler=cmd_plot_training)

    report = stages.add_parser("report", help="self-contained HTML report from the tables and figures present")
    report.add_argument("--results", required=True, help="results folder")
    report.add_argument("--out", required=True)
    report.set_defaults(handler=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    from growcert.errors import USER_ERRORS

    args = build_parser().parse_args(argv)
    try:
        args.handler(args)
    except USER_ERRORS as error:
        print(f"growcert {args.stage}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
