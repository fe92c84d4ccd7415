"""The p1-interventions reference run (benchmarks/p1_interventions_reference.py, configs/p1-interventions.yaml): a
finished sweep's intervention rows judged into the claim at ε = 0.1 over seeds, with the detectability of the mean,
the ratio per step size, cost and provenance, judged again from the kept folder, rendered by the report; and the
sweep's targets are ones Snakemake knows how to make."""

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import reference_section

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "p1_interventions_reference.py"
BENCHMARK_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
EPSILONS = (1e-4, 1e-3, 0.01, 0.1, 1.0)


def load_script():
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    return importlib.import_module(SCRIPT.stem)


def interventions(at_tenth: dict[int, float], widths=(32, 64, 128)) -> pd.DataFrame:
    """Rows as `growcert intervene` writes them for 2 points x 2 draws x the ε grid per (width, seed): the ratio is
    1 − 0.3·ε/0.1 everywhere but at the last point at ε = 0.1, where it is `at_tenth[seed]` ± 0.001 by draw."""
    rows = []
    for seed, tenth in at_tenth.items():
        for width in widths:
            for point in ("block0", "block2"):
                for draw in (0, 1):
                    for epsilon in EPSILONS:
                        ratio = tenth + 0.001 * (draw - 0.5) if point == "block2" and epsilon == 0.1 else \
                            1 - 3 * epsilon
                        rows.append({"family": "llama", "dataset": "shakespeare", "width": width, "depth": 2,
                                     "seed": seed, "step": 300, "point": point, "variant": "shared", "draw": draw,
                                     "M": 64, "K": 64, "epsilon": epsilon, "predicted": -0.01 * epsilon,
                                     "observed": -0.01 * epsilon * ratio, "ratio": ratio, "sign_agree": ratio > 0,
                                     "reduction": "sum_positions", "alignment": 0.5, "step_length": epsilon,
                                     "base_loss": 2.0})
    return pd.DataFrame(rows)


def medians_mean(at_tenth: dict[int, float]) -> float:
    return float(np.mean(list(at_tenth.values())))


def finished_sweep(results: Path, at_tenth: dict[int, float]) -> None:
    """A results folder as the sweep of configs/p1-interventions.yaml leaves it: summarize-interventions' outputs,
    each store's alignment table, benchmark files and the disk log."""
    from growcert.stages.summaries import summarize_intervention_tables

    script = load_script()
    from sweeps import sweep_config

    tables = results / "interventions" / "all.csv"
    tables.parent.mkdir(parents=True)
    interventions(at_tenth).to_csv(tables, index=False)
    summarize_intervention_tables([tables], results / "stats" / "interventions.csv",
                                  results / "tables" / "p1_interventions_summary.csv",
                                  results / "checks" / "p1_interventions.csv", results / "claims" / "p1_interventions.csv",
                                  results / "figures" / "p1_interventions.png")
    for path in script.store_tables(results, sweep_config(script.CONFIG), "alignment"):
        width, seed = (int(x) for x in re.search(r"w(\d+)_d2_s(\d+)", path).groups())
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame([{"family": "llama", "dataset": "shakespeare", "width": width, "depth": 2, "seed": seed,
                       "step": 300, "point": point, "reduction": reduction, "pool": pool, "detect_threshold": 2.0,
                       "detectability": 10.0 + seed + (point == "block2")} for point in ("block0", "block2")
                      for reduction in ("sum_positions", "flatten") for pool in ("test", "train")]).to_csv(path, index=False)
    tsv = results / "benchmarks" / "intervene" / "a.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_text(BENCHMARK_HEADER + "40.0\t0:00:40\t1\t1\t1\t1\t0\t0\t50\t20.0\n")
    (results / "disk_use.log").write_text("0 100000000\n30 300000000\n")
    (results / "sweep_parts.log").write_text("0 " + "a" * 40 + "\n")


@pytest.mark.parametrize("at_tenth, verdict, reach", [
    ({seed: 0.97 + 0.01 * (seed % 2) for seed in range(6)}, "reproduced", 0.1),  # 96-99 % in every seed
    # overshoots (the default run's context-64 case): first order holds up to the ε below, 0.01 (1 − 3ε = 0.97)
    ({seed: -0.4 + 0.05 * seed for seed in range(6)}, "contradicted", 0.01),
])
def test_export_judges_the_claim_over_seeds_at_a_tenth_and_the_report_renders_it(tmp_path, monkeypatch, at_tenth,
                                                                                  verdict, reach):
    monkeypatch.chdir(ROOT)  # the config file is read relative to the repository
    results, references = tmp_path / "results-p1-interventions", tmp_path / "reference-results"
    finished_sweep(results, at_tenth)
    out = references / "p1-interventions"
    script = load_script()
    script.export(results, out, "python benchmarks/p1_interventions_reference.py --run")
    claim, secondary = pd.read_csv(out / "claims.csv").itertuples()
    # the paper's reading, a secondary row that never decides: the largest ε up to which first order holds
    assert secondary.role == "secondary" and f"where first order stops holding: ε = {reach:g}" in secondary.claim
    assert secondary.estimate == pytest.approx(1 - 3 * reach if reach != 0.1 else medians_mean(at_tenth))
    medians = np.array([at_tenth[seed] for seed in sorted(at_tenth)])  # per seed: the median over draws and widths
    assert claim.claim_id == "p1_intervention_scale" and claim.role == "primary" and claim.seeds == 6
    assert claim.verdict == verdict and claim.estimate == pytest.approx(medians.mean())
    table = pd.read_csv(out / "table.csv")
    assert len(table) == 6 * len(EPSILONS) and set(table["cells"]) == {2 * 3}  # draws x widths at the last point
    assert np.allclose(table[table["epsilon"] == 0.1].sort_values("seed")["median_ratio"], medians)
    assert list(pd.read_csv(out / "checks.csv")["passed"]) == [True, True]
    assert len(pd.read_csv(out / "alignment.csv")) == 18 * 8
    record = json.loads((out / "provenance.json").read_text())
    assert record["cost"]["cpu_hours"] == round(20 / 3600, 2) and record["cost"]["peak_disk_gb"] == 0.3
    assert "epsilons: [0.0001, 0.001, 0.003, 0.01, 0.03, 0.1, 1.0]" in record["config"]
    readme = (out / "README.md").read_text()
    assert f"- {claim.claim}: **{verdict}**" in readme and "|      32 |       6 |" in readme
    assert f"Where first order stops holding (the paper's \"small perturbation scales\", which gives no ε): first order " \
           f"holds up to ε = {reach:g}, " in readme
    assert "| 0.1    |       6 |" in readme
    section = reference_section(tmp_path / "report", references)
    assert "Reference run: p1-interventions" in section and "direct residual interventions" in section

    (out / "claims.csv").write_text("stale\n")
    script.main(["--rejudge", "--out", str(out)])
    assert pd.read_csv(out / "claims.csv")["verdict"].tolist() == [verdict, "reproduced"]
    assert "--rejudge" in json.loads((out / "provenance.json").read_text())["rejudged"]["command"]


def test_export_of_an_unfinished_sweep_names_the_missing_file_with_exit_2(tmp_path):
    results = tmp_path / "results-p1-interventions"
    (results / "stats").mkdir(parents=True)
    result = subprocess.run([sys.executable, str(SCRIPT), "--results", str(results), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"results folder {results}: the sweep has not finished (stats/interventions.csv is missing); run with --run "
        "to resume it"]


def test_the_sweep_targets_are_what_snakemake_plans(tmp_path, monkeypatch):
    """A dry run of the sweep's targets over the config plans every run of the grid once: train, dump, alignment
    table and interventions per store, one summary (so the path template in benchmarks/sweeps.py is the rules')."""
    monkeypatch.chdir(ROOT)
    script = load_script()
    targets = script.targets(tmp_path / "results", script.CONFIG)
    assert len(targets) == 1 + 18 and targets[1].endswith("stats/alignment/llama/shakespeare/w32_d2_s0/step300.csv")
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", *targets, "--configfile", script.CONFIG,
                             "--config", f"results={tmp_path / 'results'}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.M))
    assert {rule: int(counts.get(rule, 0)) for rule in ("train_model", "dump_gradients", "estimate_alignment",
                                                        "intervene", "summarize_interventions")} == \
        {"train_model": 18, "dump_gradients": 18, "estimate_alignment": 18, "intervene": 18,
         "summarize_interventions": 1}
    assert "estimate_misalignment" not in counts
