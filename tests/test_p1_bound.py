"""The p1-bound reference run (growcert.reference_runs.registry, judge reference_runs.judges.judge_bound_claims),
registered before it ran: its targets are every store's alignment and misalignment table, its export judges P1's
two bound claims as the default run's summarize-alignment does, and the commands its config header and design page
give are the ones the export writes.

Its results take ~1.5 CPU-hours (32 models trained and dumped), but p1-seeds' committed tables are tables of the
same runs (widths 32-256, seeds 8-15 among 0-15, context 256, step 300; p̂ for seeds 8-15) at smaller pools: cut
back into the stores a p1-bound results folder holds, they are exported as p1-bound and must give exactly the rows
report.alignment.certificate_judgement gives on them, which bound-design.md counted (17 and 2 of 493 non-vacuous
cells shown).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from growcert import cli
from growcert.plan.grids import run_steps, run_wildcards, training_runs
from growcert.reference_runs.configs import merged_config, store_tables
from growcert.reference_runs.export import commands
from growcert.reference_runs.registry import reference_run
from growcert.report.alignment import certificate_judgement, last_step
from growcert.report.html import build_report

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "docs" / "reference-results" / "p1-seeds"
CONFIG = "configs/p1-bound.yaml"
# bound-design.md's "shown at 512" column: the committed cells where p ≤ B_exact is shown, of 493 non-vacuous
SHOWN = {"p1_certificate_iid": 17, "p1_certificate_train_test": 2}
NON_VACUOUS = 493


def p1_bound_results(results: Path) -> None:
    """The store tables of configs/p1-bound.yaml (alignment and misalignment at step 300), cut out of p1-seeds'
    committed pools by the store's keys, where the pipeline writes them: every store's alignment table, and the
    misalignment table (p1-seeds estimated it for seeds 8-15, the seeds p1-bound runs)."""
    config = merged_config(CONFIG)
    pools = {kind: pd.read_csv(SEEDS / f"{kind}.csv") for kind in ("alignment", "misalignment")}
    for kind, pool in pools.items():
        for run, path in zip(training_runs(config), store_tables(results, config, kind), strict=True):
            keys = {key: value for key, value in run_wildcards(run).items() if key in pool.columns}
            rows = pool[
                (pool[list(keys)] == pd.Series(keys)).all(axis=1) & (pool["step"] == run_steps(config, run)[-1])
            ]
            assert len(rows), (kind, keys)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            rows.to_csv(path, index=False)


def test_targets_are_every_stores_alignment_and_misalignment_table(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert cli.main(["reference", "targets", "p1-bound", "--results", "results-p1-bound", "--misalignment"]) == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 64 and len(set(printed)) == 64  # 8 seeds x 4 widths, two tables each
    assert all(path.startswith("results-p1-bound/stats/alignment/") for path in printed[:32])
    assert all(path.startswith("results-p1-bound/stats/misalignment/") for path in printed[32:])
    assert all(path.endswith("_c256/step300.csv") for path in printed)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """p1-bound exported (with --misalignment, as its command says) from p1-seeds' tables cut into its stores."""
    tmp = tmp_path_factory.mktemp("p1-bound")
    results, out = tmp / "results", tmp / "out" / "p1-bound"  # the folder's name sets the claims' look
    p1_bound_results(results)
    (results / "benchmarks" / "train").mkdir(parents=True)
    (results / "benchmarks" / "train" / "job.tsv").write_text("s\th:m:s\tcpu_time\n7200.0\t2:00:00\t3600.0\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        assert (
            cli.main(
                [
                    "reference",
                    "export",
                    "p1-bound",
                    "--results",
                    str(results),
                    "--out",
                    str(out),
                    "--config",
                    CONFIG,
                    "--misalignment",
                ]
            )
            == 0
        )
    return results, out


def test_the_export_judges_the_two_bound_claims_as_certificate_judgement_does(exported):
    """claims.csv holds the two bound rows, each what certificate_judgement gives on the committed tables of its own
    mode (a judge that swapped the modes, or judged another checkpoint or context, gives other rows); the counts
    are bound-design.md's; checks.csv holds B_exact ≤ B_align per mode, table.csv one line per claim row."""
    _, out = exported
    claims = pd.read_csv(out / "claims.csv")
    assert claims["claim_id"].tolist() == ["p1_certificate_iid", "p1_certificate_train_test"]
    assert (claims["role"] == "primary").all()
    alignment, final = pd.read_csv(SEEDS / "alignment.csv"), last_step(pd.read_csv(SEEDS / "misalignment.csv"))
    for mode, row in zip(("iid", "train_test"), claims.itertuples()):
        every = final[final["mode"] == mode]
        want = certificate_judgement(every[(every["status"] == "ok") & every["p_hat"].notna()], alignment, mode, 0.95)
        assert (row.verdict, row.estimate, row.level, row.seeds, row.why) == (
            want.verdict,
            pytest.approx(want.estimate, rel=1e-12),
            want.level,
            want.seeds,
            want.why,
        ), mode
        assert row.verdict == "unresolved" and row.seeds == 8
        assert row.estimate == pytest.approx(SHOWN[row.claim_id] / NON_VACUOUS)
        assert f"shown in {SHOWN[row.claim_id]} of {NON_VACUOUS} non-vacuous cells" in row.why
    checks = pd.read_csv(out / "checks.csv")
    assert checks["check_id"].tolist() == ["p1_certificate_order"] * 2 and checks["passed"].all()
    table = pd.read_csv(out / "table.csv")
    assert table["claim_id"].tolist() == claims["claim_id"].tolist()
    assert table["verdict"].tolist() == claims["verdict"].tolist()


def test_the_export_writes_the_readme_provenance_and_command_and_rejudges_to_itself(exported, tmp_path, monkeypatch):
    results, out = exported
    record = json.loads((out / "provenance.json").read_text())
    assert record["commands"] == [
        (
            f"nice -n 19 snakemake $(growcert reference targets p1-bound --results {results} --misalignment) --cores 2 "
            f"--configfile {CONFIG} --config results={results}"
        ),
        f"growcert reference export p1-bound --results {results} --out {out} --config {CONFIG} --misalignment",
    ]
    assert record["config"] == (ROOT / CONFIG).read_text() and record["misalignment"]["reference_mk"]
    readme = (out / "README.md").read_text()
    assert record["commands"][0] in readme and readme.rindex("## ") == readme.index(
        f"## {reference_run('p1-bound').question}"
    )
    assert [line.split("**")[1] for line in readme.splitlines() if line.startswith("- ")] == ["unresolved"] * 2
    monkeypatch.chdir(ROOT)
    copy = tmp_path / "p1-bound"
    shutil.copytree(out, copy)
    assert cli.main(["reference", "rejudge", "p1-bound", "--out", str(copy)]) == 0
    for table in reference_run("p1-bound").judged:
        assert (copy / table).read_text() == (out / table).read_text(), table


def test_without_misalignment_the_export_is_one_line_and_status_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    p1_bound_results(tmp_path / "results")
    assert (
        cli.main(
            [
                "reference",
                "export",
                "p1-bound",
                "--results",
                str(tmp_path / "results"),
                "--out",
                str(tmp_path / "p1-bound"),
            ]
        )
        == 2
    )
    error = capsys.readouterr().err.strip()
    assert "export the run with --misalignment" in error and len(error.splitlines()) == 1


def test_the_report_takes_the_bound_claims_from_p1_bound_once_its_folder_is_kept(exported, tmp_path):
    """decided_by="p1-bound": without its folder the first screen falls back to this run ("not measured" here,
    where this run wrote no row); with it, p1-bound's primary row decides."""
    _, out = exported
    results = tmp_path / "results"
    results.mkdir()

    def first_screen(references: Path) -> str:
        build_report(results, results / "report.html", references=references)
        text = (results / "report.html").read_text()
        row = text[text.index('data-claim="p1_certificate_iid"') :]
        return row[: row.index("</tr>")]

    assert "not measured: reference run p1-bound not run yet" in first_screen(tmp_path / "none")
    row = first_screen(out.parent)
    assert ">reference run p1-bound</a>" in row and "unresolved" in row


def test_the_config_header_and_the_design_page_give_the_commands_the_export_writes():
    """configs/p1-bound.yaml's header and bound-design.md ("What the run still needs") give the two commands the
    export records, for the results folder results-p1-bound."""
    run = reference_run("p1-bound")
    given = commands(run, CONFIG, Path("results-p1-bound"), f"--config {CONFIG} --misalignment")
    header = " ".join(
        re.sub(r"^#\s?", "", line) for line in (ROOT / CONFIG).read_text().splitlines() if line.startswith("#")
    )
    design = (SEEDS / "bound-design.md").read_text()
    for command in given:
        assert command in re.sub(r"\s+", " ", header), command
        assert command in re.sub(r"\s+", " ", design), command
