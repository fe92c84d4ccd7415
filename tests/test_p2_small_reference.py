"""The p2-small reference run (benchmarks/p2_small_reference.py, configs/p2-small.yaml): a finished sweep's task
folders, claim rows, tables and figures kept in one folder with its cost, judged again from that folder alone,
rendered by the report; and the config is the default run's but for the seeds."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from growcert.experiments import run_experiment, task
from growcert.report.claims import write_rows
from helpers import reference_section

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "p2_small_reference.py"
BENCHMARK_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
PINN = {"ic_points": 32, "collocation_points": 64, "boundary_points": 16, "batch_size": 24, "width": 8, "depth": 2,
        "steps": 20, "eval_every": 10, "test_grid": [16, 8], "seeds": [0, 1], "tuning_seeds": [2],
        "adamw_lrs": [1e-3, 1e-2], "poprisk": {"lrs": [1e-2], "gates": ["update"], "variances": ["exact"]}}
THEORY = {"seeds": [0, 1], "snapshots": 2,
          "digits": {"train_size": 8, "test_size": 12, "input_dim": 3, "width": 2, "steps": 20, "lr": 0.05},
          "regression": {"train_size": 12, "test_size": 20, "width": 2, "steps": 30},
          "sgd": {"batch_size": 3, "steps": 16, "replicates": 2, "fit_from": 2}}
GATED = ("poprisk-update-exact-wd0", "poprisk-gradient-exact-wd0")


def load_script():
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    return importlib.import_module(SCRIPT.stem)


def preference_folder(results: Path, seeds=range(8)) -> None:
    """A DPO task folder as run_preference leaves it (summary, curves, provenance with its settings) and what the
    preference rule writes from it: the update reading gains 0.08 accuracy and drifts 3× less in every seed."""
    folder, rng = results / "preference", np.random.default_rng(0)
    folder.mkdir(parents=True)
    summary, curves = [], []
    for seed in seeds:
        base = 0.55 + 0.05 * rng.standard_normal()
        for optimizer, gain, drift in (("AdamW", 0.0, 6.0), (GATED[0], 0.08, 2.0), (GATED[1], 0.0, 6.0)):
            accuracy, final_drift = base + gain + 0.002 * rng.standard_normal(), drift * (1 + 0.02 * rng.standard_normal())
            summary.append({"optimizer": optimizer, "seed": seed, "final_reward_acc": accuracy,
                            "final_drift": final_drift, "seconds": 1.0})
            curves += [{"optimizer": optimizer, "seed": seed, "step": step, "heldout_reward_acc": accuracy,
                        "drift": final_drift * step / 20, "train_loss": 0.7} for step in (0, 20)]
    pd.DataFrame(summary).to_csv(folder / "summary.csv", index=False)
    pd.DataFrame(curves).to_csv(folder / "curves.csv", index=False)
    settings = {"seeds": list(seeds), "steps": 20}
    (folder / "provenance.json").write_text(json.dumps({"settings": settings}))
    module = task("preference")
    write_rows(module.claims(folder, settings), claims=results / "claims" / "p2_preference.csv")
    module.table(folder).to_csv(results / "tables" / "p2_preference.csv", index=False)
    module.figures(folder, results / "figures" / "p2_preference.png")


def finished_sweep(results: Path) -> None:
    """A results folder as the p2-small sweep leaves it: pinn and theory run for real at a tiny scale through the
    same function the rules call, the DPO folder synthetic (it needs a trained reference), benchmark files, logs."""
    for folder in ("claims", "tables", "figures", "checks"):
        (results / folder).mkdir(parents=True)
    for name, settings, extra in (("pinn", PINN, {"gate_figure": results / "figures" / "p2_pinn_gate.png"}),
                                  ("theory", THEORY, {"checks": results / "checks" / "p2_theory.csv"})):
        run_experiment(name, settings, results / name, results / "figures" / f"p2_{name}.png",
                       results / "claims" / f"p2_{name}.csv", results / "tables" / f"p2_{name}.csv",
                       log=lambda _: None, device="cpu", **extra)
    preference_folder(results)
    for rule, cpu in (("pinn", 300.0), ("preference", 200.0), ("theory", 100.0)):
        (results / "benchmarks").mkdir(exist_ok=True)
        (results / "benchmarks" / f"{rule}.tsv").write_text(BENCHMARK_HEADER + f"{cpu * 2}\t0:01:40\t1\t1\t1\t1\t0\t0\t50\t{cpu}\n")
    (results / "disk_use.log").write_text("0 10000000\n30 20000000\n")
    (results / "sweep_parts.log").write_text("0 " + "a" * 40 + "\n")


def test_export_keeps_each_task_its_claims_and_cost_and_rejudging_gives_the_same_rows(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the config file is read relative to the repository
    results, references = tmp_path / "results-p2-small", tmp_path / "reference-results"
    finished_sweep(results)
    out = references / "p2-small"
    script = load_script()
    script.export(results, out, "python benchmarks/p2_small_reference.py --run")
    claims = pd.read_csv(out / "claims.csv")
    written = pd.concat([pd.read_csv(results / "claims" / f"p2_{name}.csv") for name in script.TASKS], ignore_index=True)
    assert claims.astype(str).equals(written.astype(str)) and "role" in claims.columns
    # PINN: one part (one reading), the claim's primary row; DPO: two readings per claim, Holm, then the primary row;
    # drift–diffusion: one primary row
    assert list(claims["claim_id"]) == ["p2_pinn"] * 2 + ["p2_dpo_accuracy"] * 3 + ["p2_dpo_drift"] * 3 + \
        ["p2_drift_diffusion"]
    assert list(claims["role"]) == ["part", "primary"] + ["part", "part", "primary"] * 2 + ["primary"]
    dpo = claims[claims["claim_id"].str.startswith("p2_dpo") & (claims["role"] == "primary")]
    assert list(dpo["verdict"]) == ["reproduced", "reproduced"] and (dpo["seeds"] == 8).all()
    assert "on the tuning seed(s) [2], never on the judged seeds [0, 1]" in claims.loc[0, "note"]
    table = pd.read_csv(out / "table.csv")
    assert list(table["task"]) == ["pinn"] * 2 + ["preference"] * 6 + ["theory"] and len(table) == len(claims)
    assert set(pd.read_csv(out / "checks.csv")["check_id"]) == {"p2_reservoir_invisible", "p2_benign_noise",
                                                                "p2_coupling_residual"}
    assert sorted(path.name for path in out.glob("*.png")) == ["p2_pinn.png", "p2_pinn_gate.png", "p2_preference.png",
                                                               "p2_theory.png"]
    record = json.loads((out / "provenance.json").read_text())
    assert record["cost"]["cpu_hours"] == round(600 / 3600, 2) and record["cost"]["peak_disk_gb"] == 0.02
    assert "tuning_seeds: [8]" in record["config"]
    readme = (out / "README.md").read_text()
    for row in claims.itertuples():
        assert f"- {row.claim}: **{row.verdict}**" in readme
    assert "tuning seed(s) [2], which are trained and never judged" in readme and "| poprisk-update-exact-wd0 |" in readme
    section = reference_section(tmp_path / "report", references)
    assert "Reference run: p2-small" in section and "noisy DPO: final reward accuracy" in section

    (out / "claims.csv").write_text("stale\n")
    script.main(["--rejudge", "--out", str(out)])
    assert pd.read_csv(out / "claims.csv").equals(claims)  # the kept folders judge to the same rows
    assert "--rejudge" in json.loads((out / "provenance.json").read_text())["rejudged"]["command"]
    assert "Judged again on" in (out / "README.md").read_text()


def test_export_of_an_unfinished_sweep_names_the_missing_file_with_exit_2(tmp_path):
    results = tmp_path / "results-p2-small"
    (results / "pinn").mkdir(parents=True)
    result = subprocess.run([sys.executable, str(SCRIPT), "--results", str(results), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"results folder {results}: the sweep has not finished (pinn/summary.csv is missing); run with --run to "
        "resume it"]


def test_the_config_is_the_default_run_but_for_the_seeds(monkeypatch):
    """configs/p2-small.yaml over config.yaml: DPO starts from the default run's reference llama, trained with the
    same settings; PINN, DPO and theory have 8 judged seeds, PINN's lr tuning seeds disjoint from them; every other
    setting of the three sections is the default's."""
    from growcert.plan.grids import train_settings
    from growcert.plan.preference import preference_reference_run

    monkeypatch.chdir(ROOT)
    script = load_script()
    from sweeps import sweep_config

    default, small = sweep_config("config.yaml"), sweep_config("configs/p2-small.yaml")
    reference = preference_reference_run(small)
    assert reference == preference_reference_run(default)
    assert train_settings(small, reference) == train_settings(default, reference)
    assert len(script.targets(Path("r"))) == 3
    for section in ("pinn", "preference", "theory"):
        assert small[section]["seeds"] == list(range(8))
        assert {k: v for k, v in small[section].items() if k not in ("seeds", "tuning_seeds")} == \
            {k: v for k, v in default[section].items() if k not in ("seeds", "tuning_seeds")}
    assert not set(small["pinn"]["tuning_seeds"]) & set(small["pinn"]["seeds"])
