"""The self-contained P2 experiments behind `growcert grokking|pinn|preference|theory`: the experiment
protocol and its registry.

Each experiment trains its own small models from its config section and writes, into one output folder,
tidy CSVs plus its provenance record (artifacts.PROVENANCE); then its figure, its claim (and check) rows and its
report table are made from that folder. Every experiment is a *task module* with the same four functions and a help
line:

    HELP                                   one line: the help of `growcert <task>`
    run(settings, out, *, log, threads, device, **inputs)   train; write out/*.csv and PROVENANCE
                                           (a task with units has `run_unit` instead, below)
    table(out) -> DataFrame                the report table (results/tables/p2_<task>.csv)
    figures(out, figure)                   the task's figure (results/figures/p2_<task>.png)
    claims(out, settings) -> rows          claim rows (rows.ROW_COLUMNS) and check rows (CHECK_COLUMNS)

and, where it has them, GATE_TITLE (the task compares optimizer arms: `run_experiment` also draws the gate
diagnostics figure, `report.figures.gate_diagnostics`, from out's curves (artifacts.CURVES), and the Snakemake rule
p2_experiment runs it; without one, rule p2_ungated, which also writes its checks file) and INPUTS (extra
keyword arguments of `run` given on the command line; such a task needs its own rule, as preference has).
The arm loop the gated tasks share is `experiments.arms` (`run_arm`; the `Arm` itself is `experiments.common`'s).

A task may also have *units* (one arm at one seed, each its own job: `units`, `unit_settings`, `run_unit`,
said in `experiments.units`); then `run_unit` trains one (`growcert <task> --arm A --seed S`), `run_experiment`
with `aggregate` makes the task's folder from its finished units (rules p2_unit, then p2_experiment), and
without it runs every unit in this process.

The registry maps a task's name to its module's *name*, resolved by `task(name)`. Names, not imported
modules: importing the registry (the Snakefile, `growcert --help`) then imports no task, and a task added
from outside the package (a test's toy task) is one line naming its module. The task modules themselves
are light: torch and the report code are imported inside their functions, so `growcert --help`, which reads
every task's HELP, stays torch-free.

Adding a task: write its module, add one line here; `rules/common.smk` reads this registry, so its rule,
its outputs and the report's inputs follow (a config section of its own, if any, goes into the schema and
`config.stage_settings`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from growcert.errors import ConfigError
from growcert.pipeline.artifacts import CURVES

EXPERIMENTS: dict[str, str] = {
    "grokking": "growcert.experiments.tasks.grokking",
    "pinn": "growcert.experiments.tasks.pinn",
    "preference": "growcert.experiments.tasks.preference",
    "theory": "growcert.experiments.tasks.theory",
}


def task(name: str) -> ModuleType:
    """The module of registered task `name`."""
    return importlib.import_module(EXPERIMENTS[name])


def has_units(module: ModuleType) -> bool:
    """Whether a task module runs as units (it defines `units`: `experiments.units`)."""
    return hasattr(module, "units")


def run_experiment(
    name: str,
    settings: dict[str, Any],
    out_dir: str | Path,
    figure: str | Path,
    claims: str | Path,
    table: str | Path,
    threads: int = 1,
    log: Callable[[str], None] = print,
    gate_figure: str | Path | None = None,
    *,
    device: str,
    checks: str | Path | None = None,
    aggregate: bool = False,
    **inputs: Any,
) -> None:
    """Run task `name` on `device` (a `device` setting; with `aggregate`, gather its finished units instead),
    then write its figure (and `gate_figure`, when given and the task has one), claim rows, check rows (to
    `checks`, when given) and table."""
    from growcert.experiments.units import aggregate_units, run_all_units
    from growcert.files import write_csv
    from growcert.referee.rows import write_rows

    missing = [f"--{key}" for key, path in (("figure", figure), ("claims", claims), ("table", table)) if path is None]
    if missing:
        raise ConfigError(f"growcert {name} needs {', '.join(missing)} (or --arm and --seed for one unit)")
    module = task(name)
    out_dir = Path(out_dir)
    if aggregate:
        aggregate_units(module, settings, out_dir)
    elif has_units(module):
        run_all_units(module, settings, out_dir, log=log, threads=threads, device=device)
    else:
        module.run(settings, out_dir, log=log, threads=threads, device=device, **inputs)
    Path(figure).parent.mkdir(parents=True, exist_ok=True)
    module.figures(out_dir, Path(figure))
    if gate_figure is not None and getattr(module, "GATE_TITLE", None):
        from growcert.report.figures import gate_diagnostics

        gate_diagnostics(CURVES.path(out_dir), gate_figure, module.GATE_TITLE)
    rows = module.claims(out_dir, settings)
    write_rows(rows, claims, checks)
    log(f"{len(rows)} claim and check rows -> {claims}" + (f", {checks}" if checks else ""))
    rows = module.table(out_dir)
    write_csv(rows, table)
    log(f"{len(rows)} rows -> {table}")
