"""End to end through real Snakemake: the ci DAG builds, is idempotent, reruns only what is missing.

Every run writes into a temporary results folder (config keys `results`, `prepared_data`),
so the repository's own results/ is never touched.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import pandas as pd
import yaml

from growcert.store import open_group, open_store

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, results=None):
    command = [*SNAKEMAKE, "--cores", "2", *args]
    if results is not None:
        command += ["--config", f"results={results}/results", f"prepared_data={results}/prepared"]
    environment_path = str(Path(sys.executable).parent)
    import os

    env = {**os.environ, "PATH": environment_path + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)


def ci_config():
    with open(ROOT / "configs" / "ci.yaml") as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("ci")
    result = snakemake("--configfile", "configs/ci.yaml", results=base)
    assert result.returncode == 0, result.stderr[-4000:]
    return base


@pytest.mark.slow
def test_ci_dag_builds_every_target(ci_run):
    results = ci_run / "results"
    assert (results / "report.html").stat().st_size > 10_000  # embeds at least one figure
    assert (results / "stats" / "training.csv").is_file()
    assert (results / "figures" / "training_grid.png").is_file()
    for grid in ci_config()["grids"]:
        for width in grid["widths"]:
            for depth in grid["depths"]:
                run = results / "models" / grid["family"] / grid["dataset"] / f"w{width}_d{depth}_s0"
                assert (run / "metrics.json").is_file()
                for step in grid["train"]["checkpoints"]:
                    assert (run / f"step{step}.pt").is_file()
                    store = results / "grads" / grid["family"] / grid["dataset"] / f"w{width}_d{depth}_s0" / f"step{step}.zarr"
                    assert open_store(store).attrs["step"] == step
                    assert open_group(store, "block0").sizes["sample"] == ci_config()["dump"]["train_examples"] + ci_config()["dump"]["test_examples"]
                log = results / "logs" / "train_model" / grid["family"] / grid["dataset"] / f"w{width}_d{depth}_s0.log"
                assert "step" in log.read_text()  # progress is visible in the rule log
    for figure in ("p1_dalign_vs_width", "p1_plugin_vs_unbiased", "p1_misalignment_vs_width", "p1_misalignment_vs_MK",
                   "p1_interventions", "p2_grokking", "p2_pinn", "p2_preference", "p2_theory", "p3_depth", "p3_growth"):
        assert (results / "figures" / f"{figure}.png").stat().st_size > 5_000, figure
    claims = pd.concat([pd.read_csv(path) for path in (results / "claims").glob("*.csv")])
    assert {"d_align increases with width", "B_align ≥ B_exact ≥ p̂ (iid)",
            "observed/predicted held-out change at small ε", "PINN: steps to test ℓ2 ≤ 0.40 vs tuned AdamW",
            "noisy DPO: final reward accuracy", "SGD drift grows as T, fluctuation as √T"} <= set(claims["claim"])
    alignment = pd.read_csv(results / "stats" / "alignment.csv")
    assert set(alignment["reduction"]) == {"sum_positions", "flatten"} and set(alignment["pool"]) == {"train", "test"}
    html = (results / "report.html").read_text()
    assert "Paper claims vs this run" in html and "data:image/png;base64" in html


@pytest.mark.slow
def test_second_run_has_nothing_to_do(ci_run):
    result = snakemake("--configfile", "configs/ci.yaml", "--dry-run", results=ci_run)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Nothing to be done" in result.stdout + result.stderr


@pytest.mark.slow
def test_deleting_one_run_rebuilds_only_it_and_its_dependents(ci_run, planned_jobs):
    # Snakemake does not rebuild a deleted intermediate while everything downstream is up to date
    # (snakemake issue 1978): asking for it rebuilds just that run, and the next plain run then
    # updates only the tables, figures and report that read it.
    grid = ci_config()["grids"][0]
    victim = ci_run / "results" / "models" / grid["family"] / grid["dataset"] / f"w{grid['widths'][0]}_d{grid['depths'][0]}_s0"
    shutil.rmtree(victim)
    plan = snakemake("--configfile", "configs/ci.yaml", "--dry-run", str(victim), results=ci_run)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert planned_jobs(plan.stdout + plan.stderr) == {"train_model": 1}, plan.stdout[-3000:]
    rebuilt = snakemake(str(victim), "--configfile", "configs/ci.yaml", results=ci_run)
    assert rebuilt.returncode == 0 and (victim / "metrics.json").is_file(), rebuilt.stderr[-2000:]
    follow_up = snakemake("--configfile", "configs/ci.yaml", "--dry-run", results=ci_run)
    per_checkpoint = len(grid["train"]["checkpoints"])
    expected = {"dump_gradients": per_checkpoint, "estimate_alignment": per_checkpoint,
                "estimate_misalignment": per_checkpoint, "estimate_depth": per_checkpoint, "intervene": 1,
                "summarize_training": 1, "summarize_alignment": 1, "summarize_interventions": 1, "summarize_depth": 1,
                "summarize_growth": 1, "plot_training": 1, "report": 1, "all": 1}
    assert planned_jobs(follow_up.stdout + follow_up.stderr) == expected, follow_up.stdout[-3000:]


def test_paper_grid_plans_without_error(tmp_path, planned_jobs):
    result = snakemake("--configfile", "configs/paper.yaml", "--dry-run", results=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(ROOT / "configs" / "paper.yaml") as handle:
        grids = yaml.safe_load(handle)["grids"]
    expected = sum(len(g["widths"]) * len(g["depths"]) * len(g["seeds"]) for g in grids)
    assert planned_jobs(result.stdout + result.stderr)["train_model"] == expected


def test_bad_config_fails_with_one_line_naming_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"grids": [{"family": "resnet", "dataset": "digits", "widths": [2, -1]}]}))
    result = snakemake("--configfile", str(bad), "--dry-run", results=tmp_path)
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "config key" in line]
    assert lines == ["config key 'grids[0].widths[1]': -1 is less than the minimum of 1"], result.stderr[-2000:]


def test_snakemake_lint_is_clean():
    result = snakemake("--lint")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Congratulations" in result.stdout + result.stderr, result.stdout[-3000:]
