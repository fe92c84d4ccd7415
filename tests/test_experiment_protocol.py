"""The P2 experiment protocol (growcert.experiments): a task is one module and one registry line.

The test writes a toy task module, adds its line to the registry (in this process by monkeypatching the
registry dict; in Snakemake's process through a sitecustomize that adds the same line) and shows that the
task gets a command, its claim rows, a report table, a place in the report and a job in the ci DAG, with
nothing else touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import ci_dry_run, toy_site

import growcert.experiments as experiments
from growcert import cli
from growcert.report.html import build_report

ROOT = Path(__file__).resolve().parents[1]

TOY_TASK = '''"""Toy P2 task: the mean of a few seeded normal draws, judged against 0."""

from pathlib import Path

HELP = "toy: the mean of seeded normal draws"


def run(settings, out, **runtime):
    import numpy as np
    import pandas as pd

    from growcert.experiments.common import write_tables

    rows = [{"seed": seed, "mean": float(np.random.default_rng(seed).normal(size=8).mean())}
            for seed in settings.get("seeds", [0, 1, 2])]
    write_tables(Path(out), settings, {"summary": pd.DataFrame(rows)})


def table(out):
    import pandas as pd

    return pd.read_csv(out / "summary.csv")


def figures(out, figure):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from growcert.report.figures import save_figure

    axis = plt.subplots()[1]
    axis.plot(pd.read_csv(out / "summary.csv")["mean"], "o")
    save_figure(axis.figure, figure)


def claims(out, settings):
    import pandas as pd

    from growcert.referee.rows import ROW_COLUMNS

    means = pd.read_csv(out / "summary.csv")["mean"]
    return [dict.fromkeys(ROW_COLUMNS) | {
        "claim_id": "p2_toy_mean", "paper": "P2", "claim": "toy: the draws' mean is near 0", "paper_value": "0",
        "effect": "mean", "estimate": float(means.mean()), "seeds": len(means), "verdict": "unresolved",
        "why": "a toy", "this_run": f"toy mean {means.mean():.3f}", "note": "the protocol test's toy task"}]
'''
REGISTRY_LINE = 'experiments.EXPERIMENTS["toy"] = "toy_task"'


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy task's module on sys.path and its one registry line (this process and any Python it starts)."""
    folder = toy_site(
        tmp_path / "site",
        monkeypatch,
        "toy_task",
        TOY_TASK,
        "import growcert.experiments as experiments",
        REGISTRY_LINE,
    )
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", "toy_task")
    return folder


def test_a_toy_task_gets_a_command_claims_a_table_and_a_place_in_the_report(toy, tmp_path, capsys):
    results = tmp_path / "results"
    paths = {
        kind: results / kind / f"p2_toy.{'png' if kind == 'figures' else 'csv'}"
        for kind in ("figures", "claims", "checks", "tables")
    }
    status = cli.main(
        [
            "toy",
            "--settings",
            '{"seeds": [0, 1, 2]}',
            "--out",
            str(results / "toy"),
            "--figure",
            str(paths["figures"]),
            "--claims",
            str(paths["claims"]),
            "--checks",
            str(paths["checks"]),
            "--table",
            str(paths["tables"]),
        ]
    )
    assert status == 0 and all(path.is_file() for path in paths.values())
    assert list(pd.read_csv(paths["claims"])["claim_id"]) == ["p2_toy_mean"]
    assert len(pd.read_csv(paths["tables"])) == 3 and pd.read_csv(paths["checks"]).empty
    build_report(results, results / "report.html", references=tmp_path / "no-references")
    page = (results / "report.html").read_text()
    assert "toy: the draws&#x27; mean is near 0" in page and "p2_toy_mean" in page and "p2_toy" in page
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "toy: the mean of seeded normal draws" in capsys.readouterr().out


def test_a_toy_task_is_a_job_of_the_ci_dag_and_an_input_of_the_report(toy, tmp_path, planned_jobs):
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(toy), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    result = ci_dry_run(tmp_path, environment)
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert planned_jobs(output)["p2_ungated"] == 2  # theory and the toy
    for kind, name in (
        ("claims", "p2_toy.csv"),
        ("tables", "p2_toy.csv"),
        ("figures", "p2_toy.png"),
        ("checks", "p2_toy.csv"),
    ):
        assert f"{tmp_path}/results/{kind}/{name}" in output
    assert f"log: {tmp_path}/results/logs/toy.log" in output


def test_the_registry_resolves_every_task_to_the_protocol_without_torch():
    code = (
        "import sys; from growcert import cli; from growcert.experiments import EXPERIMENTS, task\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "for name in EXPERIMENTS:\n"
        "    module = task(name)\n"
        "    trains = ('units', 'unit_settings', 'run_unit') if hasattr(module, 'units') else ('run',)\n"
        "    assert module.HELP and all(callable(getattr(module, f))\n"
        "                               for f in (*trains, 'table', 'figures', 'claims'))\n"
        "assert 'torch' not in sys.modules, 'growcert --help and the task modules import torch lazily'\n"
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
