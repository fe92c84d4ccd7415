"""`growcert <stage>`: the command line every Snakemake rule shells out to.

Each subcommand takes explicit input and output paths, so any stage can be rerun by
hand with the same code the pipeline uses. User errors (bad settings, a missing
dataset or checkpoint) end in one line on stderr and exit status 2.
"""

# Imports of the package sit inside the functions below, so that `growcert --help` and a command that reads only
# tables never import torch (a few seconds per job). That is the one reason for a function-local import of the
# package, and these are its places (tests/test_layout.py keeps them): this module; what `--help` reads besides it,
# the experiments registry (growcert.experiments) and its task modules (growcert.experiments.tasks); an experiment's
# report module where it draws (matplotlib, which a claims-only call does not need); and the misalignment's compiled
# loops (stats.resample imports stats.subset_sums, numba, only in the jobs that resample).

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _resolve_settings(args: argparse.Namespace) -> None:
    """The command's settings, resolved once for the whole job (growcert.config.stage_settings), before any input
    is read, so a bad key fails first."""
    from growcert.config import parse_settings, stage_settings

    if args.settings_stage is not None:
        args.settings = stage_settings(args.settings_stage, parse_settings(args.settings))
    elif isinstance(getattr(args, "settings", None), str):
        args.settings = parse_settings(args.settings)
    if getattr(args, "pretrained_model", None) is not None:
        args.pretrained_model = stage_settings("pretrained_model", parse_settings(args.pretrained_model))


def _settings_argument(parser: argparse.ArgumentParser, stage: str | None, help: str) -> None:
    """--settings, resolved as the settings of `stage` of growcert.config.stage_settings (None: parsed only)."""
    parser.add_argument("--settings", default="{}", help=help)
    parser.set_defaults(settings_stage=stage)


def settings_stages() -> dict[str, str]:
    """{subcommand: the stage of growcert.config.stage_settings its --settings holds}."""
    commands = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001 (argparse keeps them here)
    return {name: command.get_default("settings_stage") for name, command in commands.items()
            if command.get_default("settings_stage") is not None}


def _log(message: str) -> None:
    print(message, flush=True)


def _write_csv(table, path: str) -> None:
    from growcert.files import write_csv

    write_csv(table, path)
    _log(f"{len(table)} rows -> {path}")


def cmd_prepare(args: argparse.Namespace) -> None:
    from growcert.data import prepare_dataset

    info = prepare_dataset(args.dataset, args.out, args.settings)
    _log(f"prepared {args.dataset}: {info['n_train']} train / {info['n_test']} test -> {args.out}")


def cmd_train(args: argparse.Namespace) -> None:
    from growcert.stages.train import train_model

    train_model(args.settings, args.data, args.out, threads=args.threads, log=_log, device=args.device)


def _torch_arguments(parser: argparse.ArgumentParser) -> None:
    """--threads and --device, which every stage that runs torch takes."""
    from growcert.schema import top_level_default

    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default=top_level_default("device"),
                        help="auto | cpu | cuda | cuda:N (config key device; auto: cuda when torch sees one)")


def _checkpoint_arguments(parser: argparse.ArgumentParser, stage: str, settings_help: str, out_help: str) -> None:
    """--checkpoint, --data, --settings, --out, --hf and the torch arguments of a stage that reads a checkpoint."""
    parser.add_argument("--checkpoint", required=True, help="step{N}.pt of a trained run (with --hf: a pretrained model)")
    parser.add_argument("--data", required=True, help="prepared dataset folder the model was trained on")
    _settings_argument(parser, stage, settings_help)
    parser.add_argument("--out", required=True, help=out_help)
    parser.add_argument("--hf", dest="pretrained_model", default=None, help=HF_HELP)
    _torch_arguments(parser)


HF_HELP = ("read --checkpoint as a pretrained Hugging Face causal LM (a folder, or ORG/NAME in the local cache) "
           "with these settings as JSON or @file, '{}' for the defaults (stage pretrained_model of "
           "growcert.config.stage_settings: growcert.models.hf.HFSettings)")


def cmd_dump(args: argparse.Namespace) -> None:
    from growcert.data import load_prepared
    from growcert.stages.dump import dump_gradients

    dump_gradients(args.checkpoint, load_prepared(args.data), args.out, args.settings,
                   threads=args.threads, log=_log, hf=args.pretrained_model, device=args.device)


def cmd_inspect(args: argparse.Namespace) -> None:
    from growcert.store.inspect import describe_store, inspect_store

    summaries = not args.no_summaries
    print(json.dumps(describe_store(args.store, summaries=summaries), indent=1, default=str) if args.json
          else inspect_store(args.store, summaries=summaries))


def cmd_compare_results(args: argparse.Namespace) -> int:
    from growcert.store.compare import compare_results, comparison_lines

    comparison = compare_results(*args.folders)
    print("\n".join(comparison_lines(comparison, *args.folders)))
    return 0 if comparison.same else 1


def cmd_intervene(args: argparse.Namespace) -> None:
    from growcert.data import load_prepared
    from growcert.stages.interventions import run_interventions

    table = run_interventions(args.checkpoint, args.store, load_prepared(args.data), args.settings,
                              log=_log, hf=args.pretrained_model, threads=args.threads, device=args.device)
    _write_csv(table, args.out)


def cmd_summarize_interventions(args: argparse.Namespace) -> None:
    from growcert.report.interventions import summarize_intervention_tables

    _log(summarize_intervention_tables(args.tables, args.out_table, args.out_summary, args.out_checks, args.out_claims,
                                       args.figure))


def cmd_estimate_alignment(args: argparse.Namespace) -> None:
    from growcert.stages.alignment import estimate_alignment

    _write_csv(estimate_alignment(args.store, args.settings, log=_log), args.out)


def cmd_estimate_misalignment(args: argparse.Namespace) -> None:
    import pandas as pd

    from growcert.stages.alignment import estimate_misalignment

    table = estimate_misalignment(args.store, pd.read_csv(args.alignment), args.settings, log=_log)
    _write_csv(table, args.out)


def cmd_summarize_alignment(args: argparse.Namespace) -> None:
    from growcert.report.alignment import summarize_alignment

    _log(summarize_alignment(args.alignment, args.misalignment, args.settings, args.out_alignment,
                             args.out_misalignment, args.out_summary, args.out_claims, args.out_checks, args.figures))


def cmd_summarize_regime(args: argparse.Namespace) -> None:
    from growcert.report.regime import summarize_regime

    _log(summarize_regime(args.alignment, args.training, args.out_stats, args.out_cells, args.out_claims,
                          args.out_map, args.figures))


def cmd_experiment(args: argparse.Namespace) -> None:
    from growcert.experiments import run_experiment, task
    from growcert.experiments.units import run_unit_command

    module = task(args.stage)
    if run_unit_command(module, args, log=_log):  # one unit: --out is its folder, nothing else is written
        return
    inputs = {name: getattr(args, name) for name in getattr(module, "INPUTS", ())}
    run_experiment(args.stage, args.settings, args.out, args.figure, args.claims, args.table, checks=args.checks,
                   threads=args.threads, log=_log, gate_figure=args.gate_figure, device=args.device,
                   aggregate=getattr(args, "aggregate", False), **inputs)


def cmd_estimate_depth(args: argparse.Namespace) -> None:
    from growcert.stages.depth import estimate_depth

    _write_csv(estimate_depth(args.store, args.settings, log=_log, threads=args.threads, device=args.device), args.out)


def cmd_summarize_depth(args: argparse.Namespace) -> None:
    from growcert.report.depth import summarize_depth

    _log(summarize_depth(args.tables, args.settings, args.out_table, args.out_decision, args.figure))


def cmd_grow(args: argparse.Namespace) -> None:
    from growcert.stages.grow import grow_and_compare

    grow_and_compare(args.settings, args.data, args.out, log=_log, threads=args.threads, device=args.device)


def cmd_summarize_growth(args: argparse.Namespace) -> None:
    from growcert.report.depth import summarize_growth

    _log(summarize_growth(args.runs, args.depth, args.out_table, args.out_claims, args.figure))


def cmd_summarize_training(args: argparse.Namespace) -> None:
    from growcert.report.training import training_table

    _write_csv(training_table(args.runs), args.out)


def cmd_plot_training(args: argparse.Namespace) -> None:
    import pandas as pd

    from growcert.report.figures import plot_training_grid

    plot_training_grid(pd.read_csv(args.table), args.out)
    _log(f"figure -> {args.out}")


def cmd_report(args: argparse.Namespace) -> None:
    from growcert.report.html import build_report

    from growcert.report.reference import default_references

    build_report(args.results, args.out, args.references if args.references is not None else default_references())
    _log(f"report -> {args.out}")
    if args.screenshot:
        from growcert.report.page import first_screen

        _log(first_screen(args.out, args.screenshot))


def _progress(label: str):
    """A one-line progress bar on a terminal's stderr (nothing in a log file)."""
    def show(done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(f"\r{label} [{'#' * (30 * done // total):<30}] {done}/{total}", end="\n" if done == total else "",
                  file=sys.stderr, flush=True)
    return show


def cmd_advise(args: argparse.Namespace) -> None:
    """advise, advise-check and summarize-advise-check: one handler, the command is args.stage."""
    if args.stage == "summarize-advise-check":
        from growcert.report.advice_check import summarize

        return _log(summarize(args.tables, args.settings, args.out))
    common = {"examples": args.examples, "threads": args.threads, "device": args.device,
              "progress": _progress(f"dumping {args.model}")}
    if args.stage == "advise":
        from growcert.stages.advise import advise

        return _log(advise(args.model, args.data, args.settings, args.out, growth_dims=args.growth_dims, **common))
    from growcert.stages.advise_check import advise_check

    _log(advise_check(args.model, args.data, args.settings, args.out, grow_progress=_progress(f"growing {args.model}"),
                      **common))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="growcert", description=__doc__.splitlines()[0])
    parser.set_defaults(settings_stage=None)
    stages = parser.add_subparsers(dest="stage", required=True, metavar="<stage>")
    for add_commands in (_training_commands, _store_commands, _alignment_commands, _intervention_commands,
                         _experiment_commands, _depth_commands, _advise_command, _report_commands):
        add_commands(stages)
    from growcert.reference_runs import command as reference  # a command module (NAME, HELP, SETTINGS, ...)

    for module in (reference,):
        command = stages.add_parser(module.NAME, help=module.HELP)
        module.add_arguments(command)
        command.set_defaults(handler=module.run, settings_stage=module.SETTINGS)
    return parser


def _training_commands(stages) -> None:
    """prepare, train."""
    prepare = stages.add_parser("prepare", help="prepare a dataset (arrays, split, provenance)")
    prepare.add_argument("--dataset", required=True)
    _settings_argument(prepare, None, "dataset settings as JSON, or @file")
    prepare.add_argument("--out", required=True, help="output folder (arrays.npz + info.json)")
    prepare.set_defaults(handler=cmd_prepare)

    train = stages.add_parser("train", help="train one model of a grid, saving checkpoints and metrics.json")
    train.add_argument("--data", required=True, help="prepared dataset folder")
    _settings_argument(train, "train", "one run of a grid as JSON, or @file: family, dataset, width, depth, seed, model, "
                       "train (stage train of growcert.config.stage_settings)")
    train.add_argument("--out", required=True, help="run folder (step{N}.pt, metrics.json)")
    _torch_arguments(train)
    train.set_defaults(handler=cmd_train)


def _store_commands(stages) -> None:
    """dump, inspect, compare-results."""
    dump = stages.add_parser("dump", help="store per-example activations and activation gradients of a checkpoint")
    _checkpoint_arguments(dump, "dump", "config key dump as JSON, or @file (schema defaults fill the rest)",
                          "store path (PATH.zarr)")
    dump.set_defaults(handler=cmd_dump)

    inspect = stages.add_parser("inspect", help="describe a gradient store: groups, dims, chunks, compression, attrs, q summary")
    inspect.add_argument("store", help="PATH.zarr")
    inspect.add_argument("--no-summaries", action="store_true", help="skip the per-split q summary (no data read)")
    inspect.add_argument("--json", action="store_true", help="machine-readable output (one JSON object) for scripts")
    inspect.set_defaults(handler=cmd_inspect)

    compare = stages.add_parser("compare-results", help="two results folders, bit for bit: tables, store arrays, "
                                "checkpoint weights (exit 1 when they differ)")
    compare.add_argument("folders", nargs=2, metavar="RESULTS")
    compare.set_defaults(handler=cmd_compare_results)


def _alignment_commands(stages) -> None:
    """estimate-alignment, estimate-misalignment, summarize-alignment, summarize-regime."""
    estimate = stages.add_parser("estimate-alignment", help="d_align, intervals, detectability per point x reduction x pool")
    estimate.add_argument("--store", required=True)
    _settings_argument(estimate, "alignment", "config key alignment, as JSON or @file")
    estimate.add_argument("--out", required=True)
    estimate.set_defaults(handler=cmd_estimate_alignment)

    misaligned = stages.add_parser("estimate-misalignment", help="empirical misalignment and certificates over an (M, K) grid")
    misaligned.add_argument("--store", required=True)
    misaligned.add_argument("--alignment", required=True, help="the store's estimate-alignment table")
    _settings_argument(misaligned, "alignment", "config key alignment, as JSON or @file")
    misaligned.add_argument("--out", required=True)
    misaligned.set_defaults(handler=cmd_estimate_misalignment)

    pooled = stages.add_parser("summarize-alignment", help="pool alignment tables: figures, summary, claims")
    pooled.add_argument("--alignment", nargs="+", required=True)
    pooled.add_argument("--misalignment", nargs="*", default=[], help="none when every grid sweeps context")
    _settings_argument(pooled, "alignment", "config key alignment, as JSON or @file")
    pooled.add_argument("--out-alignment", required=True)
    pooled.add_argument("--out-misalignment", required=True)
    pooled.add_argument("--out-summary", required=True)
    pooled.add_argument("--out-claims", required=True)
    pooled.add_argument("--out-checks", required=True, help="implementation checks (not claims)")
    pooled.add_argument("--figures", required=True, help="folder for the p1_*.png figures")
    pooled.set_defaults(handler=cmd_summarize_alignment)

    regime_map = stages.add_parser("summarize-regime", help="P1 regime map of a context sweep: tables, figures, claims")
    for flag in ("alignment", "training", "out-stats", "out-cells", "out-claims", "out-map", "figures"):
        regime_map.add_argument(f"--{flag}", required=True, help=f"(growcert.report.regime.summarize_regime: {flag})")
    regime_map.set_defaults(handler=cmd_summarize_regime)


def _intervention_commands(stages) -> None:
    """intervene, summarize-interventions."""
    intervene = stages.add_parser("intervene", help="residual interventions: predicted vs observed held-out loss change")
    intervene.add_argument("--store", required=True, help="the checkpoint's gradient store")
    _checkpoint_arguments(intervene, "intervene", "config key intervene, as JSON or @file",
                          "tidy CSV, one row per point x variant x draw x epsilon")
    intervene.set_defaults(handler=cmd_intervene)

    interventions = stages.add_parser("summarize-interventions", help="pool intervention tables: summary, figure, checks")
    interventions.add_argument("tables", nargs="+")
    interventions.add_argument("--out-table", required=True)
    interventions.add_argument("--out-summary", required=True)
    interventions.add_argument("--out-checks", required=True, help="implementation checks (not claims)")
    interventions.add_argument("--out-claims", required=True, help="the claim row at the paper's step scale")
    interventions.add_argument("--figure", required=True)
    interventions.set_defaults(handler=cmd_summarize_interventions)


def _experiment_commands(stages) -> None:
    """One command per P2 experiment of the registry (growcert.experiments), all of one shape."""
    from growcert.experiments import EXPERIMENTS, has_units, task
    from growcert.experiments.units import add_unit_arguments
    from growcert.schema import load_schema

    sections = load_schema()["properties"]  # a task without a section of its own gets {} (parsed only)

    for name in EXPERIMENTS:  # grokking, pinn, preference, theory: one shape of command
        experiment = task(name)
        inputs = getattr(experiment, "INPUTS", ())
        command = stages.add_parser(name, help=experiment.HELP)
        _settings_argument(command, name if name in sections else None, f"config key {name}, as JSON or @file")
        command.add_argument("--out", required=True, help="folder for the experiment's CSVs and provenance.json "
                             "(with --arm and --seed: the unit's folder)")
        command.add_argument("--figure", help="the task's figure (needed unless --arm and --seed run one unit)")
        command.add_argument("--claims", help="the task's claim rows (needed unless one unit)")
        command.add_argument("--checks", help="implementation checks (not claims), for a task that has them")
        command.add_argument("--table", help="the experiment's table for the report (needed unless one unit)")
        if has_units(experiment):
            add_unit_arguments(command)
        command.add_argument("--gate-figure", help="gate diagnostics figure per PopulationRiskAdam variant, if any")
        _torch_arguments(command)
        if "reference_checkpoint" in inputs:
            command.add_argument("--reference", dest="reference_checkpoint", default=None,
                                 help="trained llama run folder (its last step{N}.pt) or checkpoint file; "
                                      "not needed when the settings name hf_model")
        if "data" in inputs:
            command.add_argument("--data", default=None, help="prepared Shakespeare folder (default: prepared "
                                 "afresh with the reference run's dataset settings)")
        command.set_defaults(handler=cmd_experiment)


def _depth_commands(stages) -> None:
    """estimate-depth, summarize-depth, grow, summarize-growth."""
    depth = stages.add_parser("estimate-depth", help="first-order value of a zero-output block at every point of a store")
    depth.add_argument("--store", required=True)
    _settings_argument(depth, "depth", "config key depth, as JSON or @file")
    depth.add_argument("--out", required=True)
    _torch_arguments(depth)
    depth.set_defaults(handler=cmd_estimate_depth)

    depth_summary = stages.add_parser("summarize-depth", help="pool depth tables: saturation decision and figure")
    depth_summary.add_argument("tables", nargs="+")
    _settings_argument(depth_summary, "depth", "config key depth, as JSON or @file")
    depth_summary.add_argument("--out-table", required=True)
    depth_summary.add_argument("--out-decision", required=True)
    depth_summary.add_argument("--figure", required=True)
    depth_summary.set_defaults(handler=cmd_summarize_depth)

    grow = stages.add_parser("grow", help="grow a shallow net with zero-output blocks vs training from scratch")
    grow.add_argument("--data", required=True)
    _settings_argument(grow, "grow", "one growth experiment as JSON or @file: an entry of config grow.experiments with "
                       "the section's shared keys (stage grow of growcert.config.stage_settings)")
    grow.add_argument("--out", required=True, help="folder for growth.csv and selection.csv")
    _torch_arguments(grow)
    grow.set_defaults(handler=cmd_grow)

    growth_summary = stages.add_parser("summarize-growth", help="pool growth tables: figure and P3 claims")
    growth_summary.add_argument("runs", nargs="+", help="grow output folders")
    growth_summary.add_argument("--depth", required=True, help="pooled depth table")
    growth_summary.add_argument("--out-table", required=True)
    growth_summary.add_argument("--out-claims", required=True)
    growth_summary.add_argument("--figure", required=True)
    growth_summary.set_defaults(handler=cmd_summarize_growth)


def _user_model_arguments(parser: argparse.ArgumentParser, stage: str, model_help: str, out_help: str) -> None:
    """--model, --data, --out, --settings, --examples and the torch arguments of a command on a user's own model."""
    parser.add_argument("--model", required=True, help=model_help)
    parser.add_argument("--data", required=True, help="a prepared dataset folder, or a text file for a language model")
    parser.add_argument("--out", required=True, help=out_help)
    _settings_argument(parser, stage, f"config key {stage}, as JSON or @file")
    parser.add_argument("--examples", type=int, default=None, help="advise.train_examples and test_examples, both")
    _torch_arguments(parser)
    parser.set_defaults(handler=cmd_advise)


def _advise_command(stages) -> None:
    """advise, advise-check, summarize-advise-check: the growth decision for a user's own model, and its check."""
    advise = stages.add_parser("advise", help="should this model grow, and where? dump a sample, estimate every "
                               "point, decide (advice.csv, advice.md, figure)")
    _user_model_arguments(advise, "advise", "a growcert checkpoint step*.pt or a Hugging Face causal-LM folder",
                          "folder for advice.csv, advice.md, advice.png, provenance.json")
    advise.add_argument("--growth-dims", type=int, default=None, help="M new directions of the certificates "
                        "(advise.growth_dims; default: alignment.reference_mk)")

    check = stages.add_parser("advise-check", help="is advise right here? grow at every point for real, score it")
    _user_model_arguments(check, "advise_check", "a growcert checkpoint step*.pt", "folder for its tables and figure")

    pooled = stages.add_parser("summarize-advise-check", help="pool advise-check tables: scores over seeds, claim")
    pooled.add_argument("tables", nargs="+", help="advise_check.csv of each checkpoint")
    _settings_argument(pooled, "advise_check", "config key advise_check, as JSON or @file (beat_z, bins, level, seed)")
    pooled.add_argument("--out", required=True, help="folder for the scores and the pooled advise_check.csv")
    pooled.set_defaults(handler=cmd_advise)


def _report_commands(stages) -> None:
    """summarize-training, plot-training, report."""
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
    report.add_argument("--references", type=Path, default=None,
                        help="folder of reference runs to show (default: docs/reference-results under the working "
                             "directory when it exists, else none)")
    report.add_argument("--screenshot", default=None, help="also save its first screen (1280x900) here with chromium")
    report.set_defaults(handler=cmd_report)


def main(argv: list[str] | None = None) -> int:
    from growcert.errors import USER_ERRORS

    args = build_parser().parse_args(argv)
    try:
        _resolve_settings(args)
        return args.handler(args) or 0  # a handler returns a status only when it has one besides 0 and 2
    except USER_ERRORS as error:
        print(f"growcert {args.stage}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
