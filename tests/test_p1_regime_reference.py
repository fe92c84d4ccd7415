"""The P1 regime reference map's export (benchmarks/p1_regime_reference.py): a finished sweep's tables,
figures, cost and provenance kept in one folder, which the report renders as a reference run."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from growcert.stages.summaries import summarize_regime
from helpers import reference_section
from test_regime_map import synthetic_tables

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "p1_regime_reference.py"
BENCHMARK_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def load_script():
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    return importlib.import_module(SCRIPT.stem)


def finished_sweep(results: Path) -> None:
    """A results folder laid out as the sweep leaves it: summarize-regime's outputs, benchmark files, disk log."""
    alignment, training = synthetic_tables()
    for folder in ("stats", "tables", "claims", "figures"):
        (results / folder).mkdir(parents=True)
    alignment.to_csv(results / "stats" / "alignment.csv", index=False)
    training.to_csv(results / "stats" / "training.csv", index=False)
    summarize_regime(results / "stats" / "alignment.csv", results / "stats" / "training.csv", results / "stats",
                     results / "tables" / "p1_regime_cells.csv", results / "claims" / "p1_regime.csv",
                     results / "stats" / "p1_regime_map.json", results / "figures")
    for rule, job, wall, cpu in [("train_model", "a", 100.0, 90.0), ("train_model", "b", 50.0, 45.0),
                                 ("dump_gradients", "a", 20.0, 18.0)]:
        tsv = results / "benchmarks" / rule / "llama" / f"{job}.tsv"
        tsv.parent.mkdir(parents=True, exist_ok=True)
        tsv.write_text(BENCHMARK_HEADER + f"{wall}\t0:01:40\t1\t1\t1\t1\t0\t0\t90\t{cpu}\n")
    # two parts of the sweep: sampled at 0-60 s, stopped, resumed an hour later at another commit
    (results / "disk_use.log").write_text("0 1000000000\n30 3400000000\n60 2000000000\n3600 500000000\n"
                                          "3630 2500000000\n")
    for run, commit in (("w32", "a" * 40), ("w64", "b" * 40), ("w128", "b" * 40)):
        (results / "models" / run).mkdir(parents=True)
        (results / "models" / run / "metrics.json").write_text(json.dumps(
            {"provenance": {"git_commit": commit, "code_hash": commit[:16]}}))
    (results / "sweep_parts.log").write_text("0 " + "a" * 40 + "\n3590 " + "b" * 40 + "\n")


def test_export_keeps_tables_figures_cost_and_provenance_and_the_report_renders_it(tmp_path, monkeypatch):
    monkeypatch.chdir(SCRIPT.parents[1])  # the config file is read relative to the repository
    results, references = tmp_path / "results-p1-regime", tmp_path / "reference-results"
    finished_sweep(results)
    out = references / "p1-regime"
    load_script().export(results, out, "python benchmarks/p1_regime_reference.py --run")
    assert pd.read_csv(out / "table.csv").equals(pd.read_csv(results / "tables" / "p1_regime_cells.csv"))
    assert len(pd.read_csv(out / "alignment.csv")) == len(pd.read_csv(results / "stats" / "alignment.csv"))
    assert sorted(p.name for p in out.glob("*.png")) == sorted(p.name for p in (results / "figures").glob("*.png"))
    record = json.loads((out / "provenance.json").read_text())
    cost = record["cost"]
    assert cost["jobs"] == 3 and cost["cpu_hours"] == round(153 / 3600, 2) and cost["peak_disk_gb"] == 3.4
    assert cost["disk_by_part"] == [
        {"from": "1970-01-01 00:00 UTC", "to": "1970-01-01 00:01 UTC", "peak_disk_gb": 3.4},
        {"from": "1970-01-01 01:00 UTC", "to": "1970-01-01 01:00 UTC", "peak_disk_gb": 2.5}]
    assert cost["trained_at"] == [{"commit": "b" * 40, "code_hash": "b" * 16, "runs": 2},
                                  {"commit": "a" * 40, "code_hash": "a" * 16, "runs": 1}]
    assert cost["parts"] == [{"started": "1970-01-01 00:00 UTC", "commit": "a" * 40},
                             {"started": "1970-01-01 00:59 UTC", "commit": "b" * 40}]
    assert {row["rule"]: row["cpu_s"] for row in cost["per_rule"]} == {"train_model": 135.0, "dump_gradients": 18.0}
    assert "tokens_per_step" in record["config"] and record["command"].endswith("--run")
    readme = (out / "README.md").read_text()
    assert ("started 1970-01-01 00:00 UTC at commit aaaaaaa; started 1970-01-01 00:59 UTC at commit bbbbbbb. Peak "
            "disk per part: 1970-01-01 00:00 UTC to 1970-01-01 00:01 UTC: 3.4 GB; 1970-01-01 01:00 UTC to "
            "1970-01-01 01:00 UTC: 2.5 GB.") in readme
    assert ("2 run(s) at commit bbbbbbb (code hash bbbbbbbbbbbbbbbb); 1 run(s) at commit aaaaaaa (code hash "
            "aaaaaaaaaaaaaaaa).") in readme
    claims = pd.read_csv(out / "claims.csv")
    # every claim row a verdict line, with its word, interval and reason
    for row in claims.itertuples():
        assert f"- {row.claim}: **{row.verdict}**: slope {row.estimate:+.2f} [{row.low:+.2f}, {row.high:+.2f}]" in readme
    # two contexts, then the claim: universal, so the falling context contradicts it
    assert list(claims["verdict"]) == ["reproduced", "contradicted", "contradicted"] * 2
    # the cell table names point and reduction, and the counts per word
    cells = pd.read_csv(out / "table.csv")
    assert "| point " in readme and "| reduction " in readme and "| verdict " in readme
    assert f"Cells: {int((cells['verdict'] == 'reproduced').sum())} reproduced" in readme
    assert "Between seeds against within a store" in readme and (out / "spread.csv").is_file()
    section = reference_section(tmp_path / "report", references)
    assert "Reference run: p1-regime" in section and "not this pipeline run" in section
    assert "Does d_align rise with width (P1), at matched budget and at matched loss, per context?" in section
    assert "width trend per (comparison, context, progress, point, reduction) cell" in section
    assert "**contradicted**" in section or "contradicted" in section


def test_rejudge_judges_a_committed_map_again_without_its_results_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(SCRIPT.parents[1])
    results, out = tmp_path / "results-p1-regime", tmp_path / "p1-regime"
    finished_sweep(results)
    script = load_script()
    script.export(results, out, "python benchmarks/p1_regime_reference.py --run")
    before = json.loads((out / "provenance.json").read_text())
    (out / "claims.csv").write_text("stale\n")  # what an older rule wrote
    for name in ("table.csv", "budget.csv"):
        (out / name).unlink()
    script.main(["--rejudge", "--out", str(out)])
    record = json.loads((out / "provenance.json").read_text())
    assert record["cost"] == before["cost"] and record["commit"] == before["commit"]  # the sweep's own record kept
    assert "--rejudge" in record["rejudged"]["command"]
    assert list(pd.read_csv(out / "claims.csv")["verdict"]) == ["reproduced", "contradicted", "contradicted"] * 2
    assert (out / "table.csv").is_file() and (out / "budget.csv").is_file()
    assert "Judged again on" in (out / "README.md").read_text()


def test_export_of_an_unfinished_sweep_names_the_missing_file_with_exit_2(tmp_path):
    results = tmp_path / "results-p1-regime"
    (results / "stats").mkdir(parents=True)
    result = subprocess.run([sys.executable, str(SCRIPT), "--results", str(results), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=SCRIPT.parents[1])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"results folder {results}: the sweep has not finished (tables/p1_regime_cells.csv is missing); "
        "run with --run to resume it"]
    assert not (tmp_path / "out").exists()


def joined_sweep(results: Path, committed: Path, change: float = 0.0) -> None:
    """A committed map of seeds 0-2 (contexts 64, 128; steps 10, 20, 40) and a sweep of seeds 3-5 at context
    64 and steps 10, 20 that also retrains seed 0 at width 16, whose rows are the map's (times 1 + `change`)."""
    alignment, training = synthetic_tables()
    committed.mkdir(parents=True)
    alignment.to_csv(committed / "alignment.csv", index=False)
    training.to_csv(committed / "training.csv", index=False)
    new_alignment, new_training = synthetic_tables(slopes={64: 1.0}, seeds=(3, 4, 5), steps=(10, 20))
    again = (alignment["seed"] == 0) & (alignment["width"] == 16) & (alignment["context"] == 64) & \
        alignment["step"].isin([10, 20])
    retrained = alignment[again].copy()
    retrained["d_align"] *= 1 + change
    again_training = (training["seed"] == 0) & (training["width"] == 16) & (training["context"] == 64) & \
        (training["step"] <= 20)
    (results / "stats").mkdir(parents=True)
    pd.concat([new_alignment, retrained]).to_csv(results / "stats" / "alignment.csv", index=False)
    pd.concat([new_training, training[again_training]]).to_csv(results / "stats" / "training.csv", index=False)


def test_joined_export_reuses_the_committed_seeds_only_when_a_retrained_run_reproduces_them(tmp_path, monkeypatch):
    monkeypatch.chdir(SCRIPT.parents[1])
    script = load_script()
    results, committed = tmp_path / "results-p1-seeds", tmp_path / "p1-regime"
    joined_sweep(results, committed)
    out = tmp_path / "p1-seeds"
    script.export_joined(results, out, "python benchmarks/p1_regime_reference.py --run --join", "configs/p1-seeds.yaml",
                         committed)
    record = json.loads((out / "provenance.json").read_text())
    check = record["joined"]["reproduction"]
    assert check["identical"] and check["runs"] == [{"width": 16, "seed": 0, "context": 64}]
    assert check["rows"] == 2 * 2  # two steps x two pools
    assert record["joined"]["seeds"] == [0, 1, 2, 3, 4, 5]
    kept = pd.read_csv(out / "alignment.csv")
    # the map's rows at the sweep's context and steps only, each run once (the retrained one is not doubled)
    assert set(kept["context"]) == {64} and set(kept["step"]) == {10, 20}
    assert len(kept) == 3 * 6 * 2 * 2 and not kept.duplicated(["width", "seed", "step", "pool"]).any()
    assert set(pd.read_csv(out / "table.csv")["seeds"]) == {6}
    assert "reproduced the committed map's 4 alignment rows exactly" in (out / "README.md").read_text()

    close = tmp_path / "close"  # a retrained run whose values moved by 0.1 %: reused, and the README says so
    joined_sweep(close / "results", close / "map", change=1e-3)
    script.export_joined(close / "results", close / "out", "cmd", "configs/p1-seeds.yaml", close / "map")
    record = json.loads((close / "out" / "provenance.json").read_text())
    check = record["joined"]["reproduction"]
    assert not check["identical"] and check["reusable"] and check["differing_columns"] == ["d_align"]
    assert abs(check["largest_relative_difference"]["d_align"] - 1e-3) < 1e-9
    assert record["joined"]["seeds"] == [0, 1, 2, 3, 4, 5]
    assert "within 1% of each value, not bit for bit: 1 of" in (close / "out" / "README.md").read_text()

    other = tmp_path / "differs"
    joined_sweep(other / "results", other / "map", change=0.02)  # beyond REUSE_RTOL: refused
    script.export_joined(other / "results", other / "out", "cmd", "configs/p1-seeds.yaml", other / "map")
    record = json.loads((other / "out" / "provenance.json").read_text())
    assert not record["joined"]["reproduction"]["identical"] and not record["joined"]["reproduction"]["reusable"]
    assert record["joined"]["reproduction"]["differing_columns"] == ["d_align"]
    assert record["joined"]["seeds"] == [3, 4, 5] and set(pd.read_csv(other / "out" / "table.csv")["seeds"]) == {3}
    assert "did not reproduce the committed map's rows (differing: d_align)" in (other / "out" / "README.md").read_text()


def test_relative_difference_is_zero_only_for_equal_values_and_nan_pairs():
    load_script()
    import sweeps

    a = pd.Series([1.0, 0.0, float("nan"), 2.0])
    assert sweeps._largest_relative_difference(a, a.copy()) == 0.0
    assert sweeps._largest_relative_difference(a, pd.Series([1.0, 0.0, float("nan"), 2.02])) == pytest.approx(0.02 / 2.02)
    assert sweeps._largest_relative_difference(a, pd.Series([1.0, 0.0, 1.0, 2.0])) == float("inf")
    assert sweeps._largest_relative_difference(a, pd.Series([1.0, 1e-30, float("nan"), 2.0])) == 1.0  # 1e-30 -> 0: all of it
    assert sweeps._largest_relative_difference(pd.Series([1e-30]), pd.Series([0.0])) == float("inf")


def test_an_earlier_export_judged_alone_joins_the_committed_map(tmp_path, monkeypatch):
    """A sweep exported against a map that lacked its retrained run (so judged alone, the retrained run kept as a new
    one) joins the full map with --from-export: the check finds the retrained run, the map's seeds are reused, the
    retrained run's p̂ is left out, and the provenance names the export."""
    monkeypatch.chdir(SCRIPT.parents[1])
    script = load_script()
    results, committed = tmp_path / "results", tmp_path / "map"
    joined_sweep(results, committed)
    elsewhere = tmp_path / "map-128"  # the map's context-128 rows only: no row in common with the sweep
    elsewhere.mkdir()
    for name in ("alignment.csv", "training.csv"):
        table = pd.read_csv(committed / name)
        table[table["context"] == 128].to_csv(elsewhere / name, index=False)
    config = str(sweep_config_file(tmp_path / "sweep.yaml"))
    targets = script.misalignment_targets(results, config, elsewhere)
    assert len(targets) == 10  # the retrained map run's too: the map it was judged against lacks it
    write_misalignment_tables(targets, p_slope=-1.0, mk=script.sweep_config(config)["alignment"]["reference_mk"])
    alone = tmp_path / "alone"
    script.export_joined(results, alone, "the sweep's command", config, elsewhere, misalignment=True)
    assert not json.loads((alone / "provenance.json").read_text())["joined"]["reproduction"]["runs"]

    out = tmp_path / "out"
    script.main(["--from-export", str(alone), "--join", str(committed), "--out", str(out), "--contexts", "64,128"])
    record = json.loads((out / "provenance.json").read_text())
    assert record["joined"]["reproduction"]["identical"]
    assert record["joined"]["seeds_by_context"] == {"64": [0, 1, 2, 3, 4, 5], "128": [0, 1, 2]}
    assert record["misalignment"]["seeds_by_context"] == {"64": [3, 4, 5]}
    assert record["command"] == "the sweep's command" and record["config_file"] == config
    assert record["joined"]["from_export"]["command"] == "the sweep's command"
    kept = pd.read_csv(out / "alignment.csv")
    assert not kept.duplicated(["width", "seed", "context", "step", "point", "reduction", "pool"]).any()
    assert "were read from its own export of" in (out / "README.md").read_text()


def test_from_export_without_a_map_to_join_is_one_line_with_exit_2(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--from-export", str(tmp_path)], capture_output=True,
                            text=True, cwd=SCRIPT.parents[1])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"--from-export {tmp_path}: needs --join <committed map> to join it to"]


def test_the_readme_says_matched_loss_is_not_tested_when_no_loss_level_is_shared(tmp_path):
    """A sweep whose checkpoints hold no held-out loss level that every width reaches (loss.csv without rows, no
    matched-loss claim): one line with the verdict word, naming the map that judges it; none when there are rows."""
    reference = load_script()
    budget = pd.DataFrame({"claim": ["d_align increases with width, on the regime map at matched budget (context 512)"]})
    columns = "family,dataset,context,depth,reduction,point,pool,test_loss,seeds,slope\n"
    (tmp_path / "loss.csv").write_text(columns)
    [line] = reference.unjudged_loss_lines(tmp_path, budget)
    assert "at matched held-out loss: **not tested at this scale**" in line and "p1-regime" in line
    (tmp_path / "loss.csv").write_text(columns + "llama,shakespeare,512,2,flatten,block0,test,3.1,8,0.4\n")
    assert reference.unjudged_loss_lines(tmp_path, budget) == []
    (tmp_path / "loss.csv").write_text(columns)
    judged = pd.DataFrame({"claim": ["d_align increases with width, on the regime map at matched held-out loss (context 64)"]})
    assert reference.unjudged_loss_lines(tmp_path, judged) == []


def sweep_config_file(path: Path) -> Path:
    """The config of joined_sweep's sweep: seeds 3-5 at widths 16-64, depth 1, context 64, steps 10 and 20, and the
    retrained map run (width 16, seed 0)."""
    train = {"steps": 20, "lr": 0.003, "weight_decay": 0.0, "warmup_steps": 2, "save_steps": [10, 20],
             "eval_every": 10, "eval_examples": 16, "single_pass": True}
    grid = {"family": "llama", "dataset": "shakespeare", "depths": [1], "contexts": [64], "tokens_per_step": 256,
            "train": train}
    path.write_text(json.dumps({"grids": [{**grid, "widths": [16, 32, 64], "seeds": [3, 4, 5]},
                                          {**grid, "widths": [16], "seeds": [0]}]}))
    return path


def write_misalignment_tables(paths: list[str], p_slope: float, mk: list[int]) -> None:
    """A misalignment table (the columns of `synthetic` in test_alignment.py) at each path the runner asks Snakemake for,
    its run read back from the path (w<width>_d<depth>_s<seed>_c<context>/step<step>.csv): p̂ = 0.4 (w/32)^p_slope
    at (M, K) = `mk`."""
    import re

    from test_alignment import synthetic

    for path in paths:
        width, depth, seed, context, step = map(int, re.search(r"w(\d+)_d(\d+)_s(\d+)_c(\d+)/step(\d+)", path).groups())
        _, table = synthetic([width], slope=1.0, p_slope=p_slope, seeds=(seed,), noise=0.0)
        table = table.assign(p_hat=table["p_hat"] + 0.001 * seed, depth=depth, context=context, step=step, M=mk[0], K=mk[1])
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(path, index=False)


def test_joined_export_keeps_the_contexts_asked_for_and_judges_p_hat_on_the_new_runs(tmp_path, monkeypatch):
    """--contexts 64,128 keeps the map's context-128 rows (3 seeds) beside context 64's joined seeds (6); with
    --misalignment the new runs' p̂ tables (not the retrained map run's) become misalignment.csv and the "p̂ falls
    with width" rows, and a re-judge keeps them."""
    monkeypatch.chdir(SCRIPT.parents[1])
    script = load_script()
    results, committed, out = tmp_path / "results", tmp_path / "map", tmp_path / "out"
    joined_sweep(results, committed)
    config = str(sweep_config_file(tmp_path / "sweep.yaml"))
    targets = script.misalignment_targets(results, config, committed)
    assert len(targets) == 9 and not any("w16_d1_s0_" in path for path in targets)  # the map's own run is skipped
    write_misalignment_tables(targets, p_slope=-1.0, mk=script.sweep_config(config)["alignment"]["reference_mk"])
    script.export_joined(results, out, "cmd", config, committed, contexts=[64, 128], misalignment=True)
    table = pd.read_csv(out / "table.csv")
    assert dict(table.groupby("context")["seeds"].max()) == {64: 6, 128: 3}
    record = json.loads((out / "provenance.json").read_text())
    assert record["joined"]["seeds_by_context"] == {"64": [0, 1, 2, 3, 4, 5], "128": [0, 1, 2]}
    assert record["misalignment"]["seeds_by_context"] == {"64": [3, 4, 5]}
    p_hat = pd.read_csv(out / "claims.csv")
    p_hat = p_hat[(p_hat["claim_id"] == "p1_misalignment_width") & (p_hat["role"] == "primary")]
    assert len(p_hat) == 1 and p_hat["seeds"].item() == 3 and p_hat["verdict"].item() == "reproduced"
    readme = (out / "README.md").read_text()
    assert "Seeds per cell: context 64: 0–5; context 128: 0–2" in readme
    assert "and does p̂ fall with width?" in readme and "context 64: seeds 3–5" in readme
    script.main(["--rejudge", "--out", str(out)])
    rejudged = pd.read_csv(out / "claims.csv")  # the primary row and its first registered form, once each
    assert list(rejudged.loc[rejudged["claim_id"] == "p1_misalignment_width", "role"]) == ["primary", "secondary"]


def test_power_lines_give_the_design_and_label_the_observed_power_an_illustration(tmp_path):
    """An unresolved primary row (slope +0.40 [−0.10, +0.90], 8 seeds, SESOI 0.248): its line gives the design
    figures, and its illustrative power is the share of simulated 8-seed samples (mean 0.40, the spread the interval
    implies) whose 95 % t interval lies wholly above 0.248, within four standard errors of 4,000 draws; decided rows
    get no line."""
    import re

    import numpy as np
    from scipy import stats

    script = load_script()
    rows = pd.DataFrame([{"claim_id": "p1_regime_budget", "claim": "rises (context 512)", "role": "primary",
                          "verdict": verdict, "estimate": 0.40, "low": -0.10, "high": 0.90, "level": 0.95, "seeds": 8,
                          "seeds_to_reproduce": "40", "seeds_to_contradict": "12"}
                         for verdict in ("unresolved", "reproduced")])
    (line,) = script.power_lines(rows)[-2:-1]
    power = float(re.search(r"power ([\d.]+) %", line).group(1)) / 100
    q = stats.t.ppf(0.975, 7)
    spread = 0.5 / q * np.sqrt(8)
    draws = np.random.default_rng(0).normal(0.40, spread, size=(4000, 8))
    low = draws.mean(1) - q * draws.std(1, ddof=1) / np.sqrt(8)
    simulated = float((low > 0.2485).mean())
    assert abs(power - simulated) < 4 * np.sqrt(simulated * (1 - simulated) / 4000) + 0.01
    assert "design: 40 seeds to reproduce it if the effect is the paper's, 12 to contradict it if nil" in line
    assert "illustration only" in line and len(script.power_lines(rows.iloc[1:])) == 0
