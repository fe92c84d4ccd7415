"""`growcert inspect`: a gradient store described (growcert.store.inspect)."""

from __future__ import annotations

import argparse
import json

NAME = "inspect"
HELP = "describe a gradient store: groups, dims, chunks, compression, attrs, q summary"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", help="PATH.zarr")
    parser.add_argument("--no-summaries", action="store_true", help="skip the per-split q summary (no data read)")
    parser.add_argument("--json", action="store_true", help="machine-readable output (one JSON object) for scripts")


def run(args: argparse.Namespace) -> None:
    from growcert.store.inspect import describe_store, inspect_store

    summaries = not args.no_summaries
    print(
        json.dumps(describe_store(args.store, summaries=summaries), indent=1, default=str)
        if args.json
        else inspect_store(args.store, summaries=summaries)
    )
