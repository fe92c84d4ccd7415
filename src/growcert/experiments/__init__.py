"""The self-contained P2 experiments behind `growcert grokking|pinn|preference|theory`.

Each experiment trains its own small models from its config section and writes, into one output
folder, tidy CSVs plus provenance.json; the CLI then draws its figure, writes its claim rows
(results/claims/) and its report table (results/tables/). This registry is the one place that says
which module implements each step, so the command line stays a thin loop over it:

    experiment   module                       inputs                       report table
    grokking     growcert.experiments.grokking, _report -                          summary.csv as written
    pinn         growcert.experiments.pinn, _report -                            best lr per optimizer
    preference   growcert.experiments.preference    reference run, text data     medians per optimizer
    theory       growcert.experiments.theory              -                            medians per measure

Grokking, PINN and preference also draw the gate diagnostics figure (`report.figures.gate_diagnostics`,
open fraction and variance ratio per PopulationRiskAdam variant) when given its path.
Modules are imported when an experiment runs: torch-heavy imports stay off `growcert --help`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from growcert.config import stage_settings
from growcert.files import write_csv
from growcert.report.claims import write_rows


@dataclass(frozen=True)
class Experiment:
    """Where one experiment's steps live (`module` attribute names) and what its command says."""

    name: str
    module: str
    help: str
    run: str               # (settings, out_dir, log=, threads=, device=, **inputs) -> anything; writes CSVs
    plot: Callable[[Any, Path, str], None]            # (report module, out_dir, figure path)
    claims: Callable[[Any, Path, dict[str, Any]], list[dict[str, Any]]]
    table: Callable[[Any, Path], pd.DataFrame]
    inputs: tuple[str, ...] = ()  # extra keyword arguments of `run`, given on the command line
    report_module: str | None = None  # where plot, claims and table live, when not in `module`
    gate_title: str | None = None  # title of the gate diagnostics figure; None: the task has no gate


def _median_by(columns: list[str]) -> Callable[[Any, Path], pd.DataFrame]:
    """Report table: the numeric columns of summary.csv, median over seeds, per `columns`."""
    def table(module, out_dir: Path) -> pd.DataFrame:
        summary = pd.read_csv(out_dir / "summary.csv")
        numeric = [c for c in summary.select_dtypes("number").columns if c not in columns + ["seed"]]
        return summary.groupby(columns, sort=False)[numeric].median().reset_index()
    return table


EXPERIMENTS: dict[str, Experiment] = {experiment.name: experiment for experiment in [
    Experiment(
        "grokking", "growcert.experiments.grokking",
        "P2 grokking: AdamW, Grokfast-EMA, PopulationRiskAdam on a/b mod p",
        "run_grokking",
        plot=lambda module, out, figure: module.plot_grokking(out / "curves.csv", figure),
        claims=lambda module, out, settings: module.grokking_claims(out / "summary.csv", settings),
        table=lambda module, out: pd.read_csv(out / "summary.csv"),
        report_module="growcert.experiments.grokking_report", gate_title="grokking: gate diagnostics"),
    Experiment(
        "pinn", "growcert.experiments.pinn",
        "P2 noisy PINN (1-d advection): steps to test l2 <= target, tuned AdamW vs PopulationRiskAdam",
        "run_pinn",
        plot=lambda module, out, figure: module.plot_pinn(out / "curves.csv", figure),
        claims=lambda module, out, settings: module.pinn_claims(out / "summary.csv", settings),
        table=lambda module, out: module.pinn_table(out / "summary.csv"),
        report_module="growcert.experiments.pinn_report", gate_title="PINN: gate diagnostics (every lr)"),
    Experiment(
        "preference", "growcert.experiments.preference",
        "P2 noisy-label DPO on a pretrained llama: held-out reward accuracy and reward drift",
        "run_preference",
        plot=lambda module, out, figure: module.plot_preference(out / "curves.csv", figure),
        claims=lambda module, out, settings: module.preference_claims(out / "summary.csv", settings),
        table=_median_by(["optimizer"]),
        inputs=("reference_checkpoint", "data"), gate_title="noisy DPO: gate diagnostics"),
    Experiment(
        "theory", "growcert.experiments.theory",
        "P2 theory: signal channel, reservoir, train-test coupling and SGD drift-diffusion",
        "run_theory",
        plot=lambda module, out, figure: module.plot_theory(out, figure),
        claims=lambda module, out, settings: module.theory_claims(out, settings),
        table=_median_by(["task", "loss", "measure"])),
]}


def run_experiment(name: str, overrides: dict[str, Any], out_dir: str | Path, figure: str | Path,
                   claims: str | Path, table: str | Path, threads: int = 1,
                   log: Callable[[str], None] = print, gate_figure: str | Path | None = None, device: str = "cpu",
                   checks: str | Path | None = None, **inputs: Any) -> None:
    """Run experiment `name` on `device` (a `device` setting), then write its figure (and `gate_figure`, when
    given), claim rows, check rows (to `checks`, for a task that has them) and table."""
    experiment = EXPERIMENTS[name]
    module = importlib.import_module(experiment.module)
    report = importlib.import_module(experiment.report_module or experiment.module)
    settings = stage_settings(name, overrides)
    out_dir = Path(out_dir)
    getattr(module, experiment.run)(settings, out_dir, log=log, threads=threads, device=device, **inputs)
    Path(figure).parent.mkdir(parents=True, exist_ok=True)
    experiment.plot(report, out_dir, str(figure))
    if gate_figure is not None and experiment.gate_title:
        from growcert.report.figures import gate_diagnostics

        gate_diagnostics(out_dir / "curves.csv", gate_figure, experiment.gate_title)
    rows = experiment.claims(report, out_dir, settings)
    write_rows(rows, claims, checks)
    log(f"{len(rows)} claim and check rows -> {claims}" + (f", {checks}" if checks else ""))
    rows = experiment.table(report, out_dir)
    write_csv(rows, table)
    log(f"{len(rows)} rows -> {table}")
