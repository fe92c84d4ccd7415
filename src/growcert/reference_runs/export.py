"""`growcert reference export <name> --results DIR`: a finished pipeline results folder of a reference run's config
written as docs/reference-results/<name>/ (docs/reproducing.md, "Reference runs").

The run's kept tables (registry: `kept`, the pooled store alignment tables, a unit-layout run's finished units and
their benchmark files) and figures are copied; with `--join <committed folder>` its tables are joined to the
committed run's (reference_runs.join); then its provenance record, artifacts.PROVENANCE, is written (date, commit,
the reproduce commands, the configs' text, cost from Snakemake's benchmark files and the disk log, versions,
machine), the run's judge writes its judged tables and claim rows (artifacts.CLAIM_ROWS), and README.md is filled
from the one template (reference_runs.readme).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from growcert import numerics
from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.experiments import task
from growcert.experiments.grokking import optimizer_arms
from growcert.files import read_csvs
from growcert.pipeline.artifacts import (
    CURVES,
    FIGURES_DIR,
    KEPT_ALIGNMENT,
    KEPT_MISALIGNMENT,
    PROVENANCE,
    SUMMARY,
    TASK,
    UNIT_BENCHMARK,
    UNIT_CPU_SECONDS,
    UNIT_FOLDER,
    UNIT_JOB_LOG,
    UNIT_LOG_FILE,
    UNITS,
    gate_figure,
    task_figure,
)
from growcert.provenance import git_commit, machine_record, versions
from growcert.reference_runs.configs import merged_config, store_tables
from growcert.reference_runs.cost import run_cost
from growcert.reference_runs.grokking import baseline_name, collect_units
from growcert.reference_runs.join import join_folder
from growcert.reference_runs.readme import NOT_RECORDED, write_readme
from growcert.reference_runs.registry import ReferenceRun

# what a kept unit holds: its tables and provenance, and where a session part recorded them, its CPU seconds and log
UNIT_FILES = (SUMMARY, CURVES, PROVENANCE, UNIT_CPU_SECONDS, UNIT_LOG_FILE)


def require(results: Path, sources: list[Path]) -> None:
    """ConfigError naming the first of `sources` (paths in `results`) that the run has not written."""
    missing = [source.relative_to(results) for source in sources if not source.is_file()]
    if missing:
        raise ConfigError(
            f"results folder {results}: the run has not finished ({missing[0]} is missing); resume it "
            "with the same snakemake command"
        )


def copy_kept(run: ReferenceRun, results: Path, out: Path, config: dict[str, Any], misalignment: bool = False) -> None:
    """The run's kept tables and figures from `results` into `out` (a figure the run did not draw is left out); with
    `misalignment`, the misalignment table of every run's last checkpoint that has one, pooled."""
    require(results, [source.path(results) for source in run.kept.values()])
    for target, source in run.kept.items():
        (out / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.path(results), out / target)
    for pattern in run.figures:
        for figure in sorted(FIGURES_DIR.path(results).glob(pattern)):
            shutil.copyfile(figure, out / figure.name)
    if misalignment:
        paths = [path for path in store_tables(results, config, "misalignment") if Path(path).is_file()]
        if not paths:
            raise ConfigError(f"results folder {results}: --misalignment, but no run has a misalignment table")
        read_csvs(paths).to_csv(KEPT_MISALIGNMENT.path(out), index=False)
    if run.store_alignment:
        paths = store_tables(results, config, "alignment")
        require(results, [Path(path) for path in paths])
        read_csvs(paths).to_csv(KEPT_ALIGNMENT.path(out), index=False)


def copy_units(run: ReferenceRun, results: Path, out: Path) -> int:
    """A unit-layout run's finished units (their summary, artifacts.UNIT_SUMMARY, written last: a unit without one
    is left out), the log of the job that finished each (log.txt, where the unit kept none) and their benchmark files
    into out/units and out/benchmarks; then the pooled summary and curves (artifacts.SUMMARY, CURVES, in `out`) of
    every unit `out` holds (reference_runs.grokking.collect_units). Returns how many units `out` holds."""
    units = UNITS.under(TASK).path(results, task=run.units)
    for summary in sorted(units.glob(SUMMARY.under(UNIT_FOLDER).pattern)):
        unit = {"task": run.units, "arm": summary.parent.parent.name, "seed": summary.parent.name.removeprefix("seed")}
        kept = UNIT_FOLDER.path(UNITS.path(out), **unit)
        kept.mkdir(parents=True, exist_ok=True)
        for file in UNIT_FILES:
            if file.path(summary.parent).is_file():
                shutil.copyfile(file.path(summary.parent), file.path(kept))
        job_log = UNIT_JOB_LOG.path(results, **unit)
        if job_log.is_file() and not UNIT_LOG_FILE.path(summary.parent).is_file():  # says whether it resumed the unit
            shutil.copyfile(job_log, UNIT_LOG_FILE.path(kept))
        if (tsv := UNIT_BENCHMARK.path(results, **unit)).is_file():
            UNIT_BENCHMARK.path(out, **unit).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tsv, UNIT_BENCHMARK.path(out, **unit))
    arms = [arm.name for arm in optimizer_arms(stage_settings(run.units, merged_config(run.configs[0])[run.units]))]
    benchmarks = UNIT_BENCHMARK.path(out, task=run.units).parent.parent  # its units' benchmark files, <arm>/seed<s>
    summary, curves = collect_units(UNITS.path(out), benchmarks, arms, run.regime)
    if summary.empty:
        raise ConfigError(f"results folder {results}: no finished unit under {units}")
    summary.to_csv(SUMMARY.path(out), index=False)
    curves.to_csv(CURVES.path(out), index=False)
    draw_unit_figures(run, out)
    return len(summary)


def draw_unit_figures(run: ReferenceRun, out: Path) -> None:
    """The task's figure and gate diagnostics drawn again from `out`'s pooled curves (artifacts.CURVES), so that
    they show every unit `out` holds (the results folder's were drawn from its own aggregate, which pools only units
    written in one summary format)."""
    from growcert.report.figures import gate_diagnostics

    module = task(run.units)
    module.figures(out, out / task_figure(run.units).file)
    if getattr(module, "GATE_TITLE", None):
        gate_diagnostics(CURVES.path(out), out / gate_figure(run.units).file, module.GATE_TITLE)


def unit_plan(config: dict[str, Any]) -> dict[str, Any]:
    """The grokking plan a unit-layout run is judged with: the config's grokking settings, its baseline's decay (the
    first of adamw.weight_decays) and cap (steps)."""
    settings = dict(stage_settings("grokking", config["grokking"]))
    decay = float(settings["adamw"]["weight_decays"][0])
    return {
        "reference": {
            "weight_decay": decay,
            "cap": int(settings["steps"]),
            "settings": settings,
            "baseline": baseline_name(decay),
        }
    }


def snakemake_targets(
    run: ReferenceRun, results: Path, config_file: str | None = None, misalignment: bool = False
) -> list[str]:
    """What Snakemake is asked for to make the run's results: its rules, the per-store alignment tables its export
    pools, and with `misalignment` every run's misalignment table (paths under `results`)."""
    config_file = config_file or run.configs[0]
    if config_file not in run.configs:
        raise ConfigError(f"--config {config_file}: not a config of {run.name} ({', '.join(run.configs)})")
    config = merged_config(config_file)
    stores = [
        *(store_tables(results, config, "alignment") if run.store_alignment else []),
        *(store_tables(results, config, "misalignment") if misalignment else []),
    ]
    return [*(target.format(results=results) for target in run.targets), *stores]


def commands(run: ReferenceRun, config_file: str, results: Path, options: str = "") -> list[str]:
    """The commands that reproduce one export of the run: Snakemake over `config_file` (its targets printed by
    `growcert reference targets` where they include per-store tables), then the export with its `options`."""
    misalignment = "--misalignment" in options.split()
    if run.store_alignment or misalignment:
        targets = (
            " ".join(
                filter(
                    None,
                    [
                        f"$(growcert reference targets {run.name} --results {results}",
                        "" if config_file == run.configs[0] else f"--config {config_file}",
                        "--misalignment" if misalignment else "",
                    ],
                )
            )
            + ")"
        )
    else:
        targets = " ".join(target.format(results=results) for target in run.targets)
    # the targets first: --configfile and --config take every word after them (argparse nargs)
    return [
        f"nice -n 19 snakemake {targets} --cores 2 --configfile {config_file} --config results={results}",
        " ".join(filter(None, [f"growcert reference export {run.name} --results {results}", options])),
    ]


def unit_numerics(units: Path) -> list[dict[str, Any]]:
    """The numerics the units under `units` were made under, grouped: mode, CPU model and torch's CPU capability
    from each unit's provenance record (artifacts.PROVENANCE; a unit made before they were recorded: native, CPU not
    recorded), with how many units each group holds."""
    groups: dict[tuple, int] = {}
    for record in sorted(units.glob(PROVENANCE.under(UNIT_FOLDER).pattern)):
        made = json.loads(record.read_text()).get("numerics") or NOT_RECORDED
        key = (made["numerics"], made["cpu_model"], made["cpu_capability"])
        groups[key] = groups.get(key, 0) + 1
    return [
        {"numerics": mode, "cpu_model": cpu, "cpu_capability": capability, "units": count}
        for (mode, cpu, capability), count in groups.items()
    ]


def run_record(run: ReferenceRun, results: Path, config_file: str, options: str) -> dict[str, Any]:
    """The provenance record (artifacts.PROVENANCE) of an export: when, at which commit, the commands, the config
    and its text, the cost, versions and machine, what its reference table (artifacts.REFERENCE_TABLE) holds and why
    the run exists."""
    reproduce = commands(run, config_file, results, options)
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "command": reproduce[-1],
        "commands": reproduce,
        "table": run.table,
        "why": run.why,
        "config_file": config_file,
        "config_files": [config_file],
        "config": Path(config_file).read_text(encoding="utf-8"),
        "results": str(results),
        "cost": run_cost(results),
        "versions": versions(),
        "machine": machine_record(),
    }


def export(
    run: ReferenceRun,
    results: Path,
    out: Path | None = None,
    join: Path | None = None,
    rtol: float = 0.0,
    keep: dict[str, list] | None = None,
    misalignment: bool = False,
    config_file: str | None = None,
    options: str = "",
) -> Path:
    """Write `out` (default docs/reference-results/<name>) from the finished results folder `results` of
    `config_file` (default the run's first config); returns it. `options`: the export's options as the reproduce
    command gives them."""
    results, out = Path(results), Path(out) if out is not None else run.folder()
    config_file = config_file or run.configs[0]
    if config_file not in run.configs:
        raise ConfigError(f"--config {config_file}: not a config of {run.name} ({', '.join(run.configs)})")
    if not results.is_dir():
        raise ConfigError(f"results folder {results}: not a folder")
    if join is not None and not run.joins:
        raise ConfigError(f"--join: {run.name} has no table that joins a committed run's")
    if misalignment and not run.store_misalignment:
        raise ConfigError(f"--misalignment: {run.name} keeps no misalignment table")
    config = merged_config(config_file)
    with tempfile.TemporaryDirectory() as scratch:
        if join is not None:  # `out` may be the committed folder: keep its tables before they are overwritten
            shutil.copytree(join, Path(scratch) / "committed", ignore=shutil.ignore_patterns(f"{UNITS.name}*", "runs*"))
            for name in run.joins:  # what this run does not make is the committed run's, not this one's
                (out / name).unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        copy_kept(run, results, out, config, misalignment)
        record = run_record(run, results, config_file, options)
        if misalignment:
            record["misalignment"] = {"reference_mk": list(config["alignment"]["reference_mk"])}
        record["numerics"] = [
            {
                "numerics": config["numerics"],
                "cpu_model": numerics.cpu_model(),
                "cpu_capability": "as each artifact's provenance records",
                "units": None,
            }
        ]
        if run.units:
            copy_units(run, results, out)
            record["plan"] = unit_plan(config)
            record["numerics"] = unit_numerics(UNITS.path(out))
        if join is not None:
            record["joined"] = join_folder(out, Path(scratch) / "committed", run.joins, rtol, keep)
            record["joined"]["committed"] = str(join)
    run.judge(out, record)
    PROVENANCE.path(out).write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
    write_readme(out, run, record)
    return out
