"""The grokking-late reference run's plumbing (benchmarks/grokking_late_reference.py --smoke: every arm, the
nominal task, one job per arm, two at a time, resumable, its folder, its verdicts) and the report's section that shows
such a folder."""

import importlib
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from growcert.report.html import build_report
from helpers import reference_section

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "grokking_late_reference.py"


def load_script():
    """Imported by name from benchmarks/ (on sys.path, which spawned job processes inherit, so they can
    unpickle its job function)."""
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    return importlib.import_module(SCRIPT.stem)


def test_smoke_reference_run_writes_its_folder_and_resumes(tmp_path, capsys):
    reference = load_script()
    out, work = tmp_path / "grokking-late", tmp_path / "work"
    reference.main(["--smoke", "--parallel", "2", "--out", str(out), "--work", str(work)])
    for name in ("summary.csv", "table.csv", "claims.csv", "curves.csv", "provenance.json", "README.md"):
        assert (out / name).is_file(), name
    table = pd.read_csv(out / "table.csv")
    # nominal: AdamW wd=0.01 only; late: every arm of the plan
    assert set(table.loc[table["regime"] == "nominal", "optimizer"]) == {"AdamW wd=0.01"}
    arms = set(table.loc[table["regime"] == "late", "optimizer"])
    assert {"AdamW wd=0.01", "AdamW wd=1", "Grokfast-EMA wd=0.005 (L2)"} <= arms
    assert {f"poprisk-{g}-{v}-wd0.01" for g in ("update", "gradient") for v in ("exact", "streaming", "microbatch")} <= arms
    assert (table["seeds"] == 1).all() and (table["cap"] == 20).all()
    # 20 steps never reach 95 %: censored, shown as "> 20", and one seed is not an interval over seeds
    assert (table["reached"] == 0).all() and (table["steps_per_seed"] == "> 20").all()
    judged = table[table["verdict"].notna()]
    assert len(judged) == len(arms) - 1 and (judged["verdict"] == "not tested at this scale").all()
    assert judged["why"].str.contains("0 seed(s) where either run reached the target by the 20-step cap", regex=False).all()
    claims = pd.read_csv(out / "claims.csv")
    assert set(claims["verdict"]) == {"not tested at this scale"} and claims["claim"].str.contains("Holm").any()
    record = json.loads((out / "provenance.json").read_text())
    assert {"date", "commit", "command", "plan", "versions", "machine", "cost"} <= set(record)
    # the work folder's disk use was sampled while the jobs ran (a first sample at the start)
    samples = (work / "disk_use.log").read_text().split()
    assert record["cost"]["disk_samples"] == len(samples) // 2 >= 1
    assert record["cost"]["peak_disk_mb"] == round(max(map(int, samples[1::2])) / 1e6, 1)
    readme = (out / "README.md").read_text()
    assert f"peak disk {record['cost']['peak_disk_mb']} MB" in readme
    assert record["command"] in readme and "- poprisk-update-exact-wd0.01: **not tested at this scale**" in readme
    assert "paper 4.9×" in readme and "The paper's nominal task" in readme
    assert list(out.glob("gate_*.png")) and list(out.glob("accuracy_*.png"))
    # one job per arm, each in its own folder: 1 nominal + 9 late
    assert len(list(work.glob("runs/*/seed0/*/summary.csv"))) == 10
    capsys.readouterr()
    reference.main(["--smoke", "--parallel", "2", "--out", str(out), "--work", str(work)])  # nothing reruns
    assert "10 of 10 jobs already done; running 0" in capsys.readouterr().out
    assert "Jobs finished: 10 of 10." in (out / "README.md").read_text()
    # --aggregate-only writes the folder from what finished and runs nothing: here, the late baseline unfinished
    (work / "runs" / "late" / "seed0" / "AdamW_wd_0.01" / "summary.csv").unlink()
    reference.main(["--smoke", "--aggregate-only", "--out", str(out), "--work", str(work)])
    assert "jobs already done" not in capsys.readouterr().out
    assert "Jobs finished: 9 of 10 (in progress" in (out / "README.md").read_text()
    late = pd.read_csv(out / "table.csv").query("regime == 'late'")
    assert "AdamW wd=0.01" not in set(late["optimizer"]) and "verdict" not in late.columns  # no baseline: no verdict


def test_a_seed_folder_of_an_all_arms_run_counts_and_extra_seeds_run_the_named_arms(tmp_path, capsys):
    """Earlier runs trained every arm of a seed in one call (its tables in the seed folder): those arms count as
    done. `--seeds 1 --arms A` adds seed 1 for A and the baseline only; an arm that is not in the plan is one
    line and exit 2."""
    reference = load_script()
    out, work = tmp_path / "grokking-late", tmp_path / "work"
    seed0 = work / "runs" / "late" / "seed0"
    reference.main(["--smoke", "--parallel", "2", "--out", str(out), "--work", str(work)])
    for name in ("summary.csv", "curves.csv"):  # the layout of an all-arms call
        pd.concat([pd.read_csv(path) for path in sorted(seed0.glob(f"*/{name}"))]).to_csv(seed0 / name, index=False)
    for path in seed0.glob("*/summary.csv"):
        path.unlink()
    capsys.readouterr()
    arm = "poprisk-gradient-streaming-wd0.01"
    reference.main(["--smoke", "--parallel", "2", "--seeds", "1", "--arms", arm, "--out", str(out), "--work", str(work)])
    assert "10 of 12 jobs already done; running 2" in capsys.readouterr().out
    assert sorted(path.parent.name for path in work.glob("runs/late/seed1/*/summary.csv")) == [
        "AdamW_wd_0.01", "poprisk-gradient-streaming-wd0.01"]
    table = pd.read_csv(out / "table.csv").query("regime == 'late'").set_index("optimizer")
    assert table.loc[arm, "seeds"] == 2 and table.loc["AdamW wd=0.01", "seeds"] == 2
    assert table.loc["AdamW wd=1", "seeds"] == 1
    # the README gives both commands: the first pass, then the added seeds (an arm's name quoted for the shell)
    readme = (out / "README.md").read_text()
    script = "nice -n 19 .venv/bin/python benchmarks/grokking_late_reference.py --smoke --parallel 2"
    assert f"    {script} --out {out} --work {work}\n    {script} --seeds 1 --arms {arm} --out" in readme
    reference.main(["--smoke", "--aggregate-only", "--seeds", "1", "--arms", "AdamW wd=1", "--out", str(out),
                    "--work", str(work)])
    assert "--arms 'AdamW wd=1'" in json.loads((out / "provenance.json").read_text())["command"]
    with pytest.raises(SystemExit) as exit_info:
        reference.main(["--smoke", "--seeds", "1", "--arms", "AdamW wd=3", "--out", str(out), "--work", str(work)])
    assert exit_info.value.code == 2 and "--arms: 'AdamW wd=3' is not an arm of the plan" in capsys.readouterr().err


def test_time_arms_measures_every_arm_side_by_side_and_runs_no_job(tmp_path):
    """--time-arms STEPS: every arm of the late regime timed in one process, its cost over AdamW wd=0.01's in
    step_cost.csv and in the README; no job folder is made and the README's command is the run's, not the timing's."""
    reference = load_script()
    out, work = tmp_path / "grokking-late", tmp_path / "work"
    reference.main(["--smoke", "--time-arms", "10", "--out", str(out), "--work", str(work)])
    cost = pd.read_csv(out / "step_cost.csv").set_index("optimizer")
    assert len(cost) == 9 and (cost["seconds_per_step"] > 0).all() and (cost["steps"] == 10).all()
    assert cost.loc["AdamW wd=0.01", "cost_over_adamw"] == 1.0
    assert cost.loc["poprisk-gradient-microbatch-wd0.01", "cost_over_adamw"] == (
        cost.loc["poprisk-gradient-microbatch-wd0.01", "seconds_per_step"] / cost.loc["AdamW wd=0.01", "seconds_per_step"])
    assert not (work / "runs").exists()
    readme = (out / "README.md").read_text()
    assert "## Cost per step, measured side by side" in readme and "--time-arms 10`: each arm trained 10 steps" in readme
    assert "--time-arms" not in json.loads((out / "provenance.json").read_text())["command"]


def test_the_baseline_alone_at_a_longer_cap_goes_to_its_own_folder_table_and_readme_section(tmp_path, capsys):
    reference = load_script()
    out, work = tmp_path / "grokking-late", tmp_path / "work"
    reference.main(["--smoke", "--parallel", "2", "--baseline-cap", "30", "--out", str(out), "--work", str(work)])
    assert "0 of 11 jobs already done; running 11" in capsys.readouterr().out  # 10 of the plan + the baseline
    summary = pd.read_csv(work / "runs-baseline-cap30" / "late" / "seed0" / "AdamW_wd_0.01" / "summary.csv")
    assert len(summary) == 1 and summary["optimizer"].iloc[0] == "AdamW wd=0.01"
    curves = pd.read_csv(work / "runs-baseline-cap30" / "late" / "seed0" / "AdamW_wd_0.01" / "curves.csv")
    assert curves["step"].max() == 30  # trained to the longer cap (never reaching 95 % in the smoke plan)
    calibration = pd.read_csv(out / "calibration.csv")
    assert list(calibration.columns) == ["seed", "step_95_cap_20", "step_95_cap_30", "final_test_acc", "seconds"]
    assert calibration["seed"].tolist() == [0] and calibration["step_95_cap_30"].isna().all()
    readme = (out / "README.md").read_text()
    section = readme.index("## AdamW wd=0.01 alone at a 30-step cap")
    assert "reached in 0 of 1 seeds, at > 30" in readme and section < readme.index("## Does the paper's 4.9×")
    assert "the baseline stays censored in most seeds even at this cap" in readme
    # the main tables hold the plan's cap only
    assert (pd.read_csv(out / "table.csv")["cap"] == 20).all() and len(pd.read_csv(out / "summary.csv")) == 10
    # an added seed not trained yet at the longer cap: the section says how many finished
    reference.main(["--smoke", "--aggregate-only", "--seeds", "1", "--arms", "AdamW wd=0.01", "--baseline-cap", "30",
                    "--out", str(out), "--work", str(work)])
    readme = (out / "README.md").read_text()
    assert "1 of 2 seeds finished so far" in readme and "even at this cap" not in readme  # no conclusion yet


def test_cpu_time_is_each_late_runs_steps_times_its_arms_side_by_side_step_cost(tmp_path):
    reference = load_script()
    summary = pd.DataFrame({"regime": ["late", "late", "late", "nominal"], "seed": [0, 1, 0, 0],
                            "optimizer": ["AdamW wd=0.01", "AdamW wd=0.01", "AdamW wd=1", "AdamW wd=0.01"],
                            "step_95": [8800, None, 600, 1000], "seconds": [900.0, 5000, 80, 120]})
    assert reference.estimated_cpu_hours(summary, tmp_path / "step_cost.csv", cap=15_000) is None
    pd.DataFrame({"optimizer": ["AdamW wd=0.01", "AdamW wd=1"], "seconds_per_step": [0.04, 0.05]}).to_csv(
        tmp_path / "step_cost.csv", index=False)
    # the censored seed trained to the cap; the nominal run counts its wall time
    expected = (8800 * 0.04 + 15_000 * 0.04 + 600 * 0.05 + 120) / 3600
    assert reference.estimated_cpu_hours(summary, tmp_path / "step_cost.csv", cap=15_000) == round(expected, 2)


def test_a_baseline_censored_in_most_seeds_gets_the_note_on_what_would_decide_it(tmp_path):
    reference = load_script()
    table = pd.DataFrame({"regime": "late", "optimizer": ["AdamW wd=0.01"], "seeds": [3], "reached": [1]})
    pd.DataFrame({"optimizer": ["AdamW wd=0.01", "AdamW wd=1"], "seconds_per_step": [0.03, 0.06]}).to_csv(
        tmp_path / "step_cost.csv", index=False)
    note = " ".join(reference.baseline_note(table, 15_000, tmp_path / "step_cost.csv"))
    assert "reached 95 % by the 15,000-step cap in 1 of 3 seeds" in note and "costs 20-40 CPU-minutes" in note
    # reached in half its seeds or more: the arms are judged, no note
    assert reference.baseline_note(table.assign(seeds=2), 15_000, tmp_path / "step_cost.csv") == []


def test_the_arm_table_judges_speed_ups_paired_by_seed_with_censoring():
    reference = load_script()
    seeds = [0, 1, 2, 3, 4, 5]
    summary = pd.DataFrame({"regime": "late", "seed": seeds * 3,
                            "optimizer": ["AdamW wd=0.01"] * 6 + ["poprisk-update-exact-wd0.01"] * 6 + ["AdamW wd=1"] * 6,
                            "step_95": [9000, 9500, 10000, 9200, 9800, 9600, 1900, 2000, 2100, 1950, 2050, 2000,
                                        None, None, 500, 600, 700, 800],
                            "seconds": [90.0, 95, 100, 92, 98, 96, 38, 40, 42, 39, 41, 40, 150, 150, 5, 6, 7, 8]})
    table = reference.arm_table(summary, cap=15_000, eval_every=100, level=0.95).set_index("optimizer")
    gate = table.loc["poprisk-update-exact-wd0.01"]
    # the registered estimand is the median: 6 seeds give the 95 % order-statistic interval [x_(1), x_(6)]
    assert gate["verdict"] == "reproduced" and 4.5 < gate["speedup"] < 5.0 and gate["speedup_low"] > 3.8
    assert gate["steps_per_seed"] == "1,900, 2,000, 2,100, 1,950, 2,050, 2,000"
    assert gate["seconds_per_step"] == pytest.approx(240 / 12_000)
    # censored in 2 seeds: "> 15,000", and its speed-up comes from the order-statistic interval, never the cap
    slow = table.loc["AdamW wd=1"]
    assert slow["steps_per_seed"].startswith("> 15,000, > 15,000, 500") and slow["verdict"] == "unresolved"
    # a censored variant's ratio lies in (0, b/cap]: the order statistics run from 0 to the largest upper bound,
    # 10,000 / (500 − 100)
    assert "censored: 0 of 6 AdamW wd=0.01 runs and 2 of 6" in slow["why"] and slow["speedup_low"] == 0.0
    assert slow["speedup_high"] == pytest.approx(10_000 / 400)
    # design figures: at the spread of the 4 measured seeds, a lower bound (the 2 censored ones left out)
    assert int(slow["seeds_to_contradict"].replace(",", "")) >= 6 and "at least these" in slow["why"]
    assert pd.isna(table.loc["AdamW wd=0.01", "verdict"])


def test_report_shows_a_reference_folder_in_its_own_labelled_section(tmp_path):
    references = tmp_path / "reference-results"
    folder = references / "grokking-late"
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text(json.dumps({"date": "2026-11-30 08:00 UTC", "commit": "abc1234",
                                                        "command": "python benchmarks/grokking_late_reference.py"}))
    pd.DataFrame({"regime": ["p97"], "optimizer": ["poprisk-update-exact-wd0"], "median_step_95": [5950]}).to_csv(
        folder / "table.csv", index=False)
    (folder / "README.md").write_text("# x\n\n## Does it reproduce?\n\n- p97 · poprisk-update-exact-wd0: reproduces\n")
    (references / "not-a-run").mkdir()  # no provenance: not shown
    results = tmp_path / "results"
    section = reference_section(results, references)
    text = (results / "report.html").read_text()
    assert "Reference run: grokking-late" in section and "not this pipeline run" in section
    assert "2026-11-30 08:00 UTC" in section and "abc1234" in section and "poprisk-update-exact-wd0: reproduces" in section
    assert "not-a-run" not in section and '<a href="#reference">Reference runs</a>' in text
    build_report(results, results / "empty.html", references=tmp_path / "none")
    assert "No reference runs" in (results / "empty.html").read_text()
