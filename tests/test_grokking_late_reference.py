"""The grokking reference run's plumbing (benchmarks/grokking_reference.py --smoke: calibration, regime choice,
every arm, two jobs at a time, resumable, its folder) and the report's section that shows such a folder."""

import importlib
import json
import math
import sys
from pathlib import Path

import pandas as pd

from growcert.report.html import build_report

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "grokking_reference.py"


def load_script():
    """Imported by name from benchmarks/ (on sys.path, which spawned job processes inherit, so they can
    unpickle its job function)."""
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    return importlib.import_module(SCRIPT.stem)


def test_smoke_reference_run_writes_its_folder_and_resumes(tmp_path, capsys):
    reference = load_script()
    out = tmp_path / "grokking-p97"
    reference.main(["--smoke", "--parallel", "2", "--out", str(out)])
    for name in ("summary.csv", "table.csv", "calibration.csv", "curves.csv", "provenance.json", "README.md"):
        assert (out / name).is_file(), name
    table, calibration = pd.read_csv(out / "table.csv"), pd.read_csv(out / "calibration.csv")
    # calibration: AdamW wd=0.01 on both architectures; reference: every arm of the plan, at the nominal task
    assert set(calibration["architecture"]) == {"llama", "classic"} and set(calibration["optimizer"]) == {"AdamW wd=0.01"}
    arms = set(table["optimizer"])
    assert {"AdamW wd=0.01", "AdamW wd=0.1", "AdamW wd=1", "Grokfast-EMA wd=0.005 (L2)"} <= arms
    assert {f"poprisk-{g}-{v}-wd{wd}" for g in ("update", "gradient") for v in ("exact", "streaming", "microbatch")
            for wd in ("0", "0.01")} <= arms
    assert (table["seeds"] == 1).all() and (table["cap"] == 20).all()
    # 20 steps never reach 95 %: counted as beyond the cap, never as a number
    assert (table["reached"] == 0).all() and table["median_step_95"].map(math.isinf).all()
    record = json.loads((out / "provenance.json").read_text())
    assert {"date", "commit", "command", "plan", "versions", "machine"} <= set(record)
    assert "--smoke" in record["command"] and "reached 95 % in no calibration regime" in record["why"]
    readme = (out / "README.md").read_text()
    assert record["command"] in readme and "poprisk-update-exact-wd0: does not reproduce: median not reached by the 20-step cap" in readme
    assert list(out.glob("gate_*.png")) and list(out.glob("accuracy_*.png"))
    capsys.readouterr()
    reference.main(["--smoke", "--parallel", "2", "--out", str(out)])  # everything done: nothing reruns
    assert "3 of 3 jobs already done; running 0" in capsys.readouterr().out  # 2 calibration + 1 nominal


def test_reference_median_counts_unreached_seeds_beyond_the_cap():
    reference = load_script()
    summary = pd.DataFrame({"regime": ["r"] * 6, "optimizer": ["AdamW wd=0.01"] * 3 + ["poprisk-update-exact-wd0"] * 3,
                            "step_95": [20000, None, 30000, 4000, 5000, None]})
    table = reference.arm_table(summary, cap=30000).set_index("optimizer")
    assert table.loc["AdamW wd=0.01", "median_step_95"] == 30000 and table.loc["AdamW wd=0.01", "reached"] == 2
    assert table.loc["poprisk-update-exact-wd0", "median_step_95"] == 5000
    assert table.loc["poprisk-update-exact-wd0", "speedup_vs_adamw_wd0.01"] == 6.0
    assert math.isinf(table.loc["poprisk-update-exact-wd0", "max_step_95"])
    assert reference.verdicts(table.reset_index()) == ["- r · poprisk-update-exact-wd0: reproduces (≥ 4.9×): 6.00×"]
    calibration = pd.DataFrame({"regime": ["a", "a", "b", "b", "c"], "step_95": [12000, 14000, 80000, 90000, 900]})
    assert reference.choose_regime(calibration)[0] == "a"  # 13,000 is nearer 29,450 than 85,000 on a log scale; c is below 10,000


def test_report_shows_a_reference_folder_in_its_own_labelled_section(tmp_path):
    references = tmp_path / "reference-results"
    folder = references / "grokking-p97"
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text(json.dumps({"date": "2026-11-30 08:00 UTC", "commit": "abc1234",
                                                        "command": "python benchmarks/grokking_reference.py"}))
    pd.DataFrame({"regime": ["p97"], "optimizer": ["poprisk-update-exact-wd0"], "median_step_95": [5950]}).to_csv(
        folder / "table.csv", index=False)
    (folder / "README.md").write_text("# x\n\n## Does it reproduce?\n\n- p97 · poprisk-update-exact-wd0: reproduces\n")
    (references / "not-a-run").mkdir()  # no provenance: not shown
    results = tmp_path / "results"
    results.mkdir()
    build_report(results, results / "report.html", references=references)
    text = (results / "report.html").read_text()
    section = text[text.index('<section id="reference">'):]
    assert "Reference run: grokking-p97" in section and "not this pipeline run" in section
    assert "2026-11-30 08:00 UTC" in section and "abc1234" in section and "poprisk-update-exact-wd0: reproduces" in section
    assert "not-a-run" not in section and '<a href="#reference">Reference runs</a>' in text
    build_report(results, results / "empty.html", references=tmp_path / "none")
    assert "No reference runs" in (results / "empty.html").read_text()
