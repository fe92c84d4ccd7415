"""The p3-depth reference run's export (benchmarks/p3_depth_reference.py): a finished sweep's depth and growth
tables judged into the three P3 claim rows, with a per-depth table, cost and provenance, rendered by the report."""

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
    # 2 → 3 beats its control and scratch; 4 → 6 does not beat its control; Holm across the two, the readings named
    assert list(growth["verdict"]) == [REPRODUCED, CONTRADICTED, REPRODUCED]
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
