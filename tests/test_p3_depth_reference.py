"""The p3-depth reference run's export (benchmarks/p3_depth_reference.py): a finished sweep's depth and growth
tables judged into the three P3 claim rows, with a per-depth table, cost and provenance, rendered by the report."""

import dataclasses
import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats as scipy_stats  # noqa: E402

from growcert.report.verdicts import CONTRADICTED, REPRODUCED  # noqa: E402
from helpers import reference_section  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "p3_depth_reference.py"
BENCHMARK_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
SCALED = {1: 9000.0, 2: 4000.0, 4: 3100.0, 6: 3050.0, 8: 3000.0}  # falls, then settles within 2 %
JITTER = {0: 1.0, 1: 1.01, 2: 0.99}


def load_script():
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    return importlib.import_module(SCRIPT.stem)


def depth_table() -> pd.DataFrame:
    """Held-out and train rows of every point of every model (depth d has points block0..block d)."""
    rows = []
    for depth, scaled in SCALED.items():
        for seed, factor in JITTER.items():
            for index in range(depth + 1):
                value = scaled * (factor if depth == 8 else 1.0) if index == depth else 10 * scaled
                for pool in ("test", "train"):
                    rows.append({"family": "llama", "dataset": "shakespeare", "width": 64, "step": 600, "pool": pool,
                                 "depth": depth, "seed": seed, "point": f"block{index}", "point_index": index,
                                 "value": value / 100, "value_se": value / 1000, "scaled_value": value,
                                 "scaled_value_se": value / 10})
    return pd.DataFrame(rows)


def growth_table() -> pd.DataFrame:
    """2 → 3 blocks: grown 5 % better than scratch in every seed, the no-growth control 4 % worse; 4 → 6: grown 2 %
    worse, no better than its control (also 2 % worse)."""
    rows = []
    for base, blocks, factor, control in ((2, 1, 0.95, 1.04), (4, 2, 1.02, 1.02)):
        for seed, scratch in zip((0, 1, 2), (2.0, 2.5, 3.0)):
            for arm, loss in (("shallow", scratch * control), ("scratch", scratch), ("grown_value", scratch * factor)):
                for step in (300, 600):
                    rows.append({"family": "llama", "dataset": "shakespeare", "width": 64, "seed": seed, "arm": arm,
                                 "base_depth": base, "depth": base, "blocks": blocks, "grown_at": 300, "step": step,
                                 "examples_seen": step * 8, "test_loss": loss if step == 600 else 50.0})
    return pd.DataFrame(rows)


def finished_sweep(results: Path) -> None:
    for folder in ("stats", "tables", "figures"):
        (results / folder).mkdir(parents=True)
    depth_table().to_csv(results / "stats" / "depth.csv", index=False)
    growth_table().to_csv(results / "tables" / "p3_growth.csv", index=False)
    for name in ("p3_depth", "p3_growth"):
        figure, axis = plt.subplots(figsize=(1, 1))
        axis.plot([0, 1])
        figure.savefig(results / "figures" / f"{name}.png")
        plt.close(figure)
    tsv = results / "benchmarks" / "train_model" / "llama" / "a.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_text(BENCHMARK_HEADER + "100.0\t0:01:40\t1\t1\t1\t1\t0\t0\t90\t90.0\n")
    (results / "disk_use.log").write_text("0 1000000000\n30 2000000000\n")
    (results / "sweep_parts.log").write_text("0 " + "a" * 40 + "\n")


def test_export_judges_the_plateau_and_growth_and_the_report_renders_it(tmp_path, monkeypatch):
    monkeypatch.chdir(SCRIPT.parents[1])  # the config file is read relative to the repository
    results, references = tmp_path / "results-p3-depth", tmp_path / "reference-results"
    finished_sweep(results)
    out = references / "p3-depth"
    load_script().export(results, out, "python benchmarks/p3_depth_reference.py --run")
    claims = pd.read_csv(out / "claims.csv").query("role == 'primary'").set_index("claim_id")
    assert claims.loc["p3_depth_plateau", "verdict"] == REPRODUCED  # the raw value falls 90 → 30 in every seed
    settles = claims.loc["p3_depth_settles"]
    logs = np.log(3000.0 * np.array(list(JITTER.values())) / 3050.0)  # depth 8 / depth 6 per seed
    half = scipy_stats.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert settles["verdict"] == REPRODUCED and np.allclose(
        [settles["estimate"], settles["low"], settles["high"]], np.exp([logs.mean(), logs.mean() - half,
                                                                         logs.mean() + half]))
    growth = pd.read_csv(out / "claims.csv").query("claim_id == 'p3_grown_vs_scratch'")
    # 2 → 3 beats its control and scratch; 4 → 6 does not beat its control; the claim is universal across the two
    # growth experiments (grown networks match scratch, not some growth step), so 4 → 6 contradicts it
    assert list(growth["verdict"]) == [REPRODUCED, CONTRADICTED, CONTRADICTED]
    assert list(growth["role"]) == ["part", "part", "primary"]
    profile = pd.read_csv(out / "table.csv")
    assert set(profile["pool"]) == {"test"} and len(profile) == 2 * sum(depth + 1 for depth in SCALED)
    deepest = profile.query("depth == 8 and point_index == 8 and criterion == 'scaled_value'").iloc[0]
    assert deepest["seeds"] == 3 and math.isclose(deepest["mean"], 3000.0)
    record = json.loads((out / "provenance.json").read_text())
    assert record["cost"]["jobs"] == 1 and record["cost"]["peak_disk_gb"] == 2.0 and "depths" in record["config"]
    readme = (out / "README.md").read_text()
    for row in pd.read_csv(out / "claims.csv").itertuples():
        assert f"- {row.claim}: **{row.verdict}**" in readme
    assert "|   model depth |" in readme and "within [0.9, 1.11]" in readme
    section = reference_section(tmp_path / "report", references)
    assert "Reference run: p3-depth" in section and "settles on a plateau" in section
    assert section.count("<img") == 2


def test_rejudge_rewrites_claims_from_the_committed_tables(tmp_path, monkeypatch):
    monkeypatch.chdir(SCRIPT.parents[1])
    results, out = tmp_path / "results-p3-depth", tmp_path / "p3-depth"
    finished_sweep(results)
    script = load_script()
    script.export(results, out, "python benchmarks/p3_depth_reference.py --run")
    (out / "claims.csv").write_text("stale\n")
    script.main(["--rejudge", "--out", str(out)])
    assert len(pd.read_csv(out / "claims.csv")) == 6  # fall (raw, scale-invariant), plateau, growth 2 parts + claim
    assert "--rejudge" in json.loads((out / "provenance.json").read_text())["rejudged"]["command"]


def test_export_of_an_unfinished_sweep_names_the_missing_file_with_exit_2(tmp_path):
    results = tmp_path / "results-p3-depth"
    (results / "stats").mkdir(parents=True)
    result = subprocess.run([sys.executable, str(SCRIPT), "--results", str(results), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=SCRIPT.parents[1])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"results folder {results}: the sweep has not finished (stats/depth.csv is missing); run with --run to resume it"]


def with_seeds(table: pd.DataFrame, seeds: dict[int, int], factor: float = 1.0) -> pd.DataFrame:
    """`table`'s rows of seed k relabelled as seed seeds[k] (the others dropped), numeric values times `factor`."""
    rows = table[table["seed"].isin(list(seeds))].copy()
    rows["seed"] = rows["seed"].map(seeds)
    for column in ("value", "scaled_value", "test_loss"):
        if column in rows.columns:
            rows[column] *= factor
    return rows


def joined_sweep(results: Path, committed: Path, change: float = 0.0) -> None:
    """A committed p3-depth folder with seeds 0-2 (export of `finished_sweep`), and a sweep of seeds 3-5 (the same
    values as 0-2, so the joined table has each value twice) that also retrains seed 0 at depth 1 and seed 0 of both
    growth experiments, whose rows equal the committed ones (times 1 + `change`)."""
    finished_sweep(committed.parent / "first")
    load_script().export(committed.parent / "first", committed, "python benchmarks/p3_depth_reference.py --run")
    depth, growth = depth_table(), growth_table()
    again = depth[(depth["seed"] == 0) & (depth["depth"] == 1)].copy()
    for column in ("value", "scaled_value"):
        again[column] *= 1 + change
    grown_again = with_seeds(growth, {0: 0}, 1 + change)
    for folder in ("stats", "tables", "figures", "benchmarks"):
        (results / folder).mkdir(parents=True)
    pd.concat([with_seeds(depth, {0: 3, 1: 4, 2: 5}), again]).to_csv(results / "stats" / "depth.csv", index=False)
    pd.concat([grown_again, with_seeds(growth, {0: 3, 1: 4, 2: 5})]).to_csv(results / "tables" / "p3_growth.csv",
                                                                             index=False)
    for name in ("p3_depth", "p3_growth"):
        (results / "figures" / f"{name}.png").write_bytes(b"not drawn again")
    (results / "benchmarks" / "grow_model.tsv").write_text(BENCHMARK_HEADER + "50.0\t0:00:50\t1\t1\t1\t1\t0\t0\t90\t45.0\n")


def test_joined_export_reuses_the_committed_seeds_only_where_the_retrained_rows_reproduce_them(tmp_path, monkeypatch):
    monkeypatch.chdir(SCRIPT.parents[1])
    script = load_script()
    results, committed = tmp_path / "results-p3-depth-seeds", tmp_path / "p3-depth"
    joined_sweep(results, committed)
    before = json.loads((committed / "provenance.json").read_text())
    # the kept folder is extended in place, as the documented command does (--join and --out the same folder)
    script.main(["--config", "configs/p3-depth-seeds.yaml", "--join", str(committed), "--results", str(results),
                 "--out", str(committed)])
    record = json.loads((committed / "provenance.json").read_text())
    depth_check, growth_check = (record["joined"][t]["reproduction"] for t in ("depth", "growth"))
    assert depth_check["identical"] and depth_check["runs"] == [{"width": 64, "depth": 1, "seed": 0}]
    assert depth_check["rows"] == 2 * 2  # block0 and block1, two pools
    assert growth_check["identical"] and growth_check["runs"] == [{"base_depth": 2, "seed": 0}, {"base_depth": 4, "seed": 0}]
    assert record["joined"]["depth"]["seeds"] == record["joined"]["growth"]["seeds"] == [0, 1, 2, 3, 4, 5]
    assert record["joined"]["committed_record"]["cost"] == before["cost"] and "--join" in record["command"]
    depth = pd.read_csv(committed / "depth.csv")
    assert not depth.duplicated(["depth", "seed", "point", "pool"]).any() and depth["seed"].nunique() == 6
    profile = pd.read_csv(committed / "table.csv")
    assert set(profile["seeds"]) == {6}
    claims = pd.read_csv(committed / "claims.csv")
    growth = claims[claims["claim_id"] == "p3_grown_vs_scratch"]
    assert list(growth["role"]) == ["part", "part", "primary"] and set(growth["seeds"]) == {6}
    assert claims.query("role == 'primary' and claim_id == 'p3_depth_plateau'")["seeds"].iloc[0] == 6
    readme = (committed / "README.md").read_text()
    assert "- depth.csv: seeds 0, 1, 2, 3, 4, 5" in readme and "reproduced the committed 4 rows of depth.csv exactly" in readme
    assert "raw ‖E[q hᵀ]‖² [95 % t interval]" in readme and "## Recommended depth" in readme
    assert (committed / "p3_depth.png").read_bytes() != b"not drawn again"  # drawn again from the joined tables

    other = tmp_path / "differs"
    joined_sweep(other / "results", other / "p3-depth", change=1e-12)  # one last-digit change is enough to refuse
    script.export_joined(other / "results", other / "out", "cmd", "configs/p3-depth-seeds.yaml", other / "p3-depth")
    record = json.loads((other / "out" / "provenance.json").read_text())
    assert record["joined"]["depth"]["reproduction"]["differing_columns"] == ["value", "scaled_value"]
    assert record["joined"]["depth"]["seeds"] == record["joined"]["growth"]["seeds"] == [3, 4, 5]
    assert set(pd.read_csv(other / "out" / "table.csv")["seeds"]) == {3}
    assert "did not reproduce the committed depth.csv (differing: value, scaled_value)" in \
        (other / "out" / "README.md").read_text()


def test_the_seeds_config_is_p3_depth_but_for_its_seeds(monkeypatch):
    """configs/p3-depth-seeds.yaml trains the runs of configs/p3-depth.yaml with the same settings, seeds 3-5 and the
    committed seed-0 depth-1 run, and grows seeds 0, 3, 4, 5 with the same experiments."""
    monkeypatch.chdir(SCRIPT.parents[1])
    load_script()
    from growcert.plan.grids import train_settings, training_runs
    from growcert.plan.settings import grow_experiment_settings
    from sweeps import sweep_config

    first, seeds = sweep_config("configs/p3-depth.yaml"), sweep_config("configs/p3-depth-seeds.yaml")
    runs = training_runs(seeds)
    assert sorted({run.seed for run in runs}) == [0, 3, 4, 5] and [run for run in runs if run.seed == 0] == \
        [run for run in training_runs(first) if run.seed == 0 and run.depth == 1]
    for run in training_runs(first):
        moved = dataclasses.replace(run, seed=run.seed + 3)
        assert train_settings(seeds, moved) == {**train_settings(first, run), "seed": moved.seed}
        if run.seed == 0 and run.depth == 1:  # the retrained run: the committed one's settings exactly
            assert train_settings(seeds, run) == train_settings(first, run)
    assert seeds["grow"]["seeds"] == [0, 3, 4, 5] and seeds["dump"] == first["dump"]
    for index in range(2):
        assert {**grow_experiment_settings(seeds, index), "seeds": None} == {**grow_experiment_settings(first, index),
                                                                           "seeds": None}
