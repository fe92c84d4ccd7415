"""`growcert reference rejudge|export` (growcert.reference_runs): every committed reference run, judged again from its
committed tables by the command, reproduces its committed judged tables and claims.csv (every column: words and
integers exactly, floats to helpers.FLOAT_RTOL, since their last bits depend on the CPU), without retraining; and the
command's failure modes are one clear line, exit status 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers import NUMBER, assert_tables_match

from growcert import cli
from growcert.reference_runs.registry import RUNS, reference_run

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted(name for name, run in RUNS.items() if not run.planned)  # a planned run has no folder yet
WORK_FOLDERS = shutil.ignore_patterns("units*", "runs*", "benchmarks", "*.png")  # jobs' folders, not judged


def committed(name: str) -> Path:
    return ROOT / reference_run(name).folder()


def scratch_copy(name: str, tmp_path: Path) -> Path:
    """A copy of the committed run that keeps its name (the name sets the level of a claim at a later look)."""
    copy = tmp_path / name
    shutil.copytree(committed(name), copy, ignore=WORK_FOLDERS)
    return copy


def read_table(path: Path) -> pd.DataFrame | dict | str:
    """A judged file as the comparison reads it: a JSON record, a text's words (advise-check's answer) or a table."""
    if path.suffix == ".json":
        return json.loads(path.read_text())
    if path.suffix == ".txt":
        return path.read_text()
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def test_every_committed_run_is_registered_with_its_configs():
    """Every folder is a registered run and every registered run has its folder, but a run registered as planned,
    which has none yet and names its design (its export commits the folder and drops `planned`)."""
    folders = {path.name for path in (ROOT / "docs" / "reference-results").iterdir() if path.is_dir()}
    assert folders == set(COMMITTED)
    for run in RUNS.values():
        assert run.configs and all((ROOT / config).is_file() for config in run.configs), run.name
        assert not run.planned or (ROOT / run.planned).is_file(), run.name


def assert_judged_tables_are_committed(name: str, folder: Path) -> None:
    """Every table run `name` judges is in `folder` as committed, value for value."""
    for table in reference_run(name).judged:
        assert_tables_match(read_table(folder / table), read_table(committed(name) / table), f"{name}/{table}")


@pytest.mark.parametrize("name", COMMITTED)
def test_rejudge_reproduces_the_committed_tables_and_claims(name, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the runs' configs are read relative to the repository root
    copy = scratch_copy(name, tmp_path)
    original = json.loads((copy / "provenance.json").read_text())
    assert cli.main(["reference", "rejudge", name, "--out", str(copy)]) == 0
    assert_judged_tables_are_committed(name, copy)
    record = json.loads((copy / "provenance.json").read_text())
    assert {key: record[key] for key in original if key not in ("rejudged", "rejudged_earlier")} == {
        key: original[key] for key in original if key not in ("rejudged", "rejudged_earlier")
    }
    assert record["rejudged"]["command"].startswith(f"growcert reference rejudge {name}")
    claims = pd.read_csv(copy / "claims.csv")
    verdicts = [line for line in (copy / "README.md").read_text().splitlines() if line.startswith("- ")]
    assert (
        [line.split("**")[1] for line in verdicts[-len(claims) :]] == claims["verdict"].tolist()
        if len(claims)
        else verdicts == []
    )


def test_rejudge_notices_a_changed_judgement(tmp_path, monkeypatch):
    """The equality above is not vacuous: a committed table edited to another outcome is judged to other claims."""
    monkeypatch.chdir(ROOT)
    copy = scratch_copy("p3-depth", tmp_path)
    growth = pd.read_csv(copy / "growth.csv")
    growth.loc[growth["arm"].str.startswith("grown"), "test_loss"] *= 1.5  # grown far worse than scratch
    growth.to_csv(copy / "growth.csv", index=False)
    assert cli.main(["reference", "rejudge", "p3-depth", "--out", str(copy)]) == 0
    got, want = pd.read_csv(copy / "claims.csv"), pd.read_csv(committed("p3-depth") / "claims.csv")
    assert not got["verdict"].equals(want["verdict"])


def test_an_unknown_run_or_a_folder_without_its_tables_is_one_line_and_status_2(tmp_path, capsys):
    assert cli.main(["reference", "rejudge", "no-such-run"]) == 2
    assert "no reference run 'no-such-run'" in capsys.readouterr().err
    (tmp_path / "p3-depth").mkdir()
    (tmp_path / "p3-depth" / "provenance.json").write_text("{}")
    assert cli.main(["reference", "rejudge", "p3-depth", "--out", str(tmp_path / "p3-depth")]) == 2
    error = capsys.readouterr().err
    assert "depth.csv is missing" in error and len(error.strip().splitlines()) == 1


# Each run's results folder rebuilt from its committed tables: (its path under the results folder, the committed
# table); p1-interventions' per-store alignment tables are split back out of its pool (`store_alignment_tables`).
# grokking-late joins the committed rows no config makes (test_grokking_late_exports_...).
REBUILT = {
    "p1-interventions": {
        "stats/interventions.csv": "interventions.csv",
        "tables/p1_interventions_summary.csv": "summary.csv",
    },
    "p1-regime": {"stats/alignment.csv": "alignment.csv", "stats/training.csv": "training.csv"},
    "p1-seeds": {"stats/alignment.csv": "alignment.csv", "stats/training.csv": "training.csv"},
    "p3-depth": {"stats/depth.csv": "depth.csv", "tables/p3_growth.csv": "growth.csv"},
    "p2-small": {str(source.path(Path())): target for target, source in RUNS["p2-small"].kept.items()},
    "advise-check": {"advise-check/scores/advise_check.csv": "advise_check.csv"},
}


def rebuilt_results(name: str, tmp_path: Path) -> Path:
    results = tmp_path / "results"
    for source, target in REBUILT[name].items():
        (results / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(committed(name) / target, results / source)
    if reference_run(name).store_alignment:
        store_alignment_tables(name, results)
    return results


def store_alignment_tables(name: str, results: Path) -> None:
    """The alignment table of each store the run's config makes (its runs' last checkpoints), cut out of the
    committed pool by the run's keys, where the pipeline writes it."""
    from growcert.plan.grids import run_steps, run_wildcards, training_runs
    from growcert.reference_runs.configs import merged_config, store_tables

    config = merged_config(reference_run(name).configs[0])
    pool = pd.read_csv(committed(name) / "alignment.csv")
    runs = training_runs(config)
    for run, path in zip(runs, store_tables(results, config, "alignment"), strict=True):
        keys = {key: value for key, value in run_wildcards(run).items() if key in pool.columns}
        rows = pool[(pool[list(keys)] == pd.Series(keys)).all(axis=1) & (pool["step"] == run_steps(config, run)[-1])]
        assert len(rows), (name, keys)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        rows.to_csv(path, index=False)


@pytest.mark.parametrize("name", sorted(REBUILT))
def test_export_from_a_results_folder_rebuilt_from_the_committed_tables_reproduces_them(name, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    results, out = rebuilt_results(name, tmp_path), tmp_path / "out" / name
    (results / "benchmarks" / "train").mkdir(parents=True)
    (results / "benchmarks" / "train" / "job.tsv").write_text("s\th:m:s\tcpu_time\n7200.0\t2:00:00\t3600.0\n")
    if name == "p1-seeds":  # its misalignment rows are judged from the folder it is exported to
        out.mkdir(parents=True)
        shutil.copyfile(committed(name) / "misalignment.csv", out / "misalignment.csv")
    if name == "advise-check":  # its claim's first form (the run at the untuned S and lr) is kept in the folder
        shutil.copytree(committed(name) / "first-form", out / "first-form")
    assert cli.main(["reference", "export", name, "--results", str(results), "--out", str(out)]) == 0
    assert_judged_tables_are_committed(name, out)
    record = json.loads((out / "provenance.json").read_text())
    assert record["cost"]["cpu_hours"] == 1.0 and record["cost"]["jobs"] == 1  # the benchmark file's cpu_time
    assert record["commands"][-1].startswith(f"growcert reference export {name} --results {results}")
    assert record["config"] == (ROOT / reference_run(name).configs[0]).read_text()
    readme = (out / "README.md").read_text()
    assert record["commands"][0] in readme and f"## {reference_run(name).question}" in readme


def test_an_export_keeps_the_folders_notes_in_its_readme_before_the_verdicts(tmp_path, monkeypatch):
    """notes.md (what a person wrote about the run) survives an export into its folder: the README carries it
    between the table and the question, so the question stays the last heading and rejudge keeps it too."""
    monkeypatch.chdir(ROOT)
    results, out = rebuilt_results("p3-depth", tmp_path), tmp_path / "out" / "p3-depth"
    out.mkdir(parents=True)
    (out / "notes.md").write_text("## What the run shows\n\nDepth 4 settles where the certificate says.\n")
    assert cli.main(["reference", "export", "p3-depth", "--results", str(results), "--out", str(out)]) == 0
    readme = (out / "README.md").read_text()
    question = f"## {reference_run('p3-depth').question}"
    assert readme.index("Depth 4 settles where") < readme.index(question) == readme.rindex("## ")
    assert cli.main(["reference", "rejudge", "p3-depth", "--out", str(out)]) == 0
    assert "Depth 4 settles where" in (out / "README.md").read_text()


def test_export_of_a_unit_run_judges_the_units_that_finished(tmp_path, monkeypatch):
    """grokking-calibrated from a results folder holding the committed units (each with the log of the job that
    finished it) and their Snakemake benchmark files: the units' summary, claims and table come back as committed;
    a unit without summary.csv (unfinished) is left out."""
    monkeypatch.chdir(ROOT)
    folder, results = committed("grokking-calibrated"), tmp_path / "results"
    shutil.copytree(folder / "units", results / "grokking" / "units")
    shutil.copytree(folder / "benchmarks", results / "benchmarks")
    (results / "grokking" / "units" / "AdamW_wd_0.15" / "seed22").mkdir()  # unfinished: no summary.csv
    out = tmp_path / "out" / "grokking-calibrated"
    assert cli.main(["reference", "export", "grokking-calibrated", "--results", str(results), "--out", str(out)]) == 0
    for table in ("summary.csv", "claims.csv", "table.csv"):
        assert_tables_match(read_table(out / table), read_table(folder / table), table)
    assert not (out / "units" / "AdamW_wd_0.15" / "seed22").exists()


def test_export_of_an_unfinished_run_is_one_line_and_status_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    (tmp_path / "results" / "stats").mkdir(parents=True)
    assert (
        cli.main(
            ["reference", "export", "p3-depth", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "out")]
        )
        == 2
    )
    error = capsys.readouterr().err.strip()
    assert "stats/depth.csv is missing" in error and len(error.splitlines()) == 1


def split_depth_run(tmp_path: Path, retrained_shift: float = 0.0) -> tuple[Path, Path]:
    """The committed p3-depth run cut in two: a 'committed' folder with seeds 0-2, and a results folder with seeds
    3-5 and seed 0 retrained (its rows as committed, moved by `retrained_shift` relative)."""
    depth, growth = (pd.read_csv(committed("p3-depth") / name) for name in ("depth.csv", "growth.csv"))
    earlier = tmp_path / "earlier" / "p3-depth"
    earlier.mkdir(parents=True)
    depth[depth["seed"] <= 2].to_csv(earlier / "depth.csv", index=False)
    growth[growth["seed"] <= 2].to_csv(earlier / "growth.csv", index=False)
    results = tmp_path / "results"
    (results / "stats").mkdir(parents=True)
    (results / "tables").mkdir()
    new_depth = depth[depth["seed"].isin([0, 3, 4, 5])].copy()
    new_depth.loc[new_depth["seed"] == 0, "value"] *= 1 + retrained_shift
    new_depth.to_csv(results / "stats" / "depth.csv", index=False)
    growth[growth["seed"].isin([0, 3, 4, 5])].to_csv(results / "tables" / "p3_growth.csv", index=False)
    return earlier, results


def test_join_reuses_the_committed_seeds_only_when_the_retrained_run_reproduces_them(tmp_path, monkeypatch):
    """--join: seeds 3-5 joined to a committed seeds 0-2 run whose seed 0 they retrained: equal rows give back the
    six-seed run's claims; rows 2 % off are refused value for value, kept under --rtol 0.05, and without the
    committed rows the run is judged on its new seeds alone."""
    monkeypatch.chdir(ROOT)
    earlier, results = split_depth_run(tmp_path)
    out = tmp_path / "out" / "p3-depth"
    assert (
        cli.main(
            ["reference", "export", "p3-depth", "--results", str(results), "--out", str(out), "--join", str(earlier)]
        )
        == 0
    )
    joined = json.loads((out / "provenance.json").read_text())["joined"]["tables"]
    assert joined["depth.csv"]["reproduction"]["identical"] and joined["depth.csv"]["seeds"] == [0, 1, 2, 3, 4, 5]
    assert_tables_match(read_table(out / "claims.csv"), read_table(committed("p3-depth") / "claims.csv"), "claims.csv")

    earlier, results = split_depth_run(tmp_path / "off", retrained_shift=0.02)
    for rtol, seeds in ((0.0, [3, 4, 5]), (0.05, [0, 1, 2, 3, 4, 5])):
        out = tmp_path / f"rtol{rtol}" / "p3-depth"
        assert (
            cli.main(
                [
                    "reference",
                    "export",
                    "p3-depth",
                    "--results",
                    str(results),
                    "--out",
                    str(out),
                    "--join",
                    str(earlier),
                    "--rtol",
                    str(rtol),
                ]
            )
            == 0
        )
        check = json.loads((out / "provenance.json").read_text())["joined"]["tables"]["depth.csv"]
        assert check["seeds"] == seeds and check["reproduction"]["differing_columns"] == ["value"]
        assert check["reproduction"]["largest_relative_difference"]["value"] == pytest.approx(0.02)
        assert sorted(pd.read_csv(out / "depth.csv")["seed"].unique()) == seeds


def test_the_last_p1_seeds_export_joined_again_gives_its_committed_claims(tmp_path, monkeypatch):
    """p1-seeds' last step (configs/p1-seeds-16-c256.yaml: seeds 8-15 at context 256, seed 5 width 32 retrained,
    p̂ of the new runs) from a results folder rebuilt from the committed rows, joined to the committed run without
    them: --keep context=256,512 keeps the committed context 512, --rtol 0.01 and --misalignment as its command
    says; the claims (p̂ rows among them) come back as committed."""
    from growcert.plan.grids import training_runs
    from growcert.reference_runs.configs import merged_config, store_tables

    monkeypatch.chdir(ROOT)
    config = "configs/p1-seeds-16-c256.yaml"
    alignment, training, misaligned = (
        pd.read_csv(committed("p1-seeds") / name) for name in ("alignment.csv", "training.csv", "misalignment.csv")
    )
    new = lambda table: (
        (table["context"] == 256) & ((table["seed"] >= 8) | ((table["seed"] == 5) & (table["width"] == 32)))
    )
    earlier = tmp_path / "earlier" / "p1-seeds"
    earlier.mkdir(parents=True)
    alignment[~new(alignment) | (alignment["seed"] == 5)].to_csv(earlier / "alignment.csv", index=False)
    training[~new(training) | (training["seed"] == 5)].to_csv(earlier / "training.csv", index=False)
    results = tmp_path / "results"
    (results / "stats").mkdir(parents=True)
    alignment[new(alignment)].to_csv(results / "stats" / "alignment.csv", index=False)
    training[new(training)].to_csv(results / "stats" / "training.csv", index=False)
    runs = training_runs(merged_config(config))
    for run, path in zip(runs, store_tables(results, merged_config(config), "misalignment")):
        rows = misaligned[
            (misaligned["width"] == run.width)
            & (misaligned["seed"] == run.seed)
            & (misaligned["context"] == run.context)
        ]
        if len(rows):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            rows.to_csv(path, index=False)
    out = tmp_path / "out" / "p1-seeds"
    assert (
        cli.main(
            [
                "reference",
                "export",
                "p1-seeds",
                "--results",
                str(results),
                "--out",
                str(out),
                "--config",
                config,
                "--join",
                str(earlier),
                "--rtol",
                "0.01",
                "--keep",
                "context=256,512",
                "--misalignment",
            ]
        )
        == 0
    )
    record = json.loads((out / "provenance.json").read_text())
    assert record["joined"]["tables"]["alignment.csv"]["reproduction"]["identical"]
    assert record["joined"]["keep"] == {"context": [256, 512]} and record["config_file"] == config
    for table in ("claims.csv", "table.csv"):
        assert_tables_match(read_table(out / table), read_table(committed("p1-seeds") / table), table)


def grokking_late_units(results: Path) -> None:
    """configs/grokking-late.yaml's 27 units (every arm, late regime, seeds 0-2) in the unit layout
    (<results>/grokking/units/<arm>/seed<s>/), their summary.csv and curves.csv cut out of the committed tables."""
    from growcert.experiments.grokking import CURVE_COLUMNS, SUMMARY_COLUMNS
    from growcert.experiments.units import unit_name

    summary, curves = (pd.read_csv(committed("grokking-late") / name) for name in ("summary.csv", "curves.csv"))
    made = summary[(summary["regime"] == "late") & (summary["seed"] <= 2)]
    assert len(made) == 27
    for arm, seed in zip(made["optimizer"], made["seed"]):
        unit = results / "grokking" / "units" / unit_name(arm) / f"seed{seed}"
        unit.mkdir(parents=True)
        mine = lambda table: (table["regime"] == "late") & (table["optimizer"] == arm) & (table["seed"] == seed)
        kept = [column for column in SUMMARY_COLUMNS if column in summary]  # its units predate their own CPU time
        summary.loc[mine(summary), kept].to_csv(unit / "summary.csv", index=False)
        curves.loc[mine(curves), CURVE_COLUMNS].to_csv(unit / "curves.csv", index=False)


def test_grokking_late_exports_its_units_joined_to_the_committed_rows_no_config_makes(tmp_path, monkeypatch, capsys):
    """grokking-late from a results folder of its config's 27 units, joined to the committed run's rows that no
    config makes (the nominal task, AdamW wd=0.01 on seeds 3-5) as docs/reproducing.md says: its summary, curves,
    table and claims come back as committed, whatever the units' wall time; a unit with another outcome is refused
    in one line; a committed outcome changed changes the claims."""
    monkeypatch.chdir(ROOT)
    results = tmp_path / "results"
    grokking_late_units(results)
    unit = results / "grokking" / "units" / "AdamW_wd_0.01" / "seed1" / "summary.csv"
    pd.read_csv(unit).assign(seconds=lambda frame: frame["seconds"] * 2).to_csv(unit, index=False)
    join = ["--join", "docs/reference-results/grokking-late", "--keep", "regime=nominal,late"]
    out = tmp_path / "out" / "grokking-late"  # the folder's name sets the claims' look
    assert cli.main(["reference", "export", "grokking-late", "--results", str(results), "--out", str(out), *join]) == 0
    for table in ("summary.csv", "curves.csv", "table.csv", "claims.csv"):
        assert_tables_match(read_table(out / table), read_table(committed("grokking-late") / table), table)
    # the figures are drawn from the pooled units, whatever the results folder drew (here: nothing)
    assert not (results / "figures").exists()
    assert all((out / figure).stat().st_size > 10_000 for figure in ("p2_grokking.png", "p2_grokking_gate.png"))
    record = json.loads((out / "provenance.json").read_text())
    check = record["joined"]["tables"]["summary.csv"]["reproduction"]
    assert check["identical"] and check["rows"] == 27 and check["not_compared"] == ["seconds", "cpu_seconds"]
    assert record["commands"][-1] == (
        f"growcert reference export grokking-late --results {results} --out {out} " + " ".join(join)
    )

    retrained = pd.read_csv(unit)
    retrained.assign(final_test_acc=0.4).to_csv(unit, index=False)
    assert (
        cli.main(
            [
                "reference",
                "export",
                "grokking-late",
                "--results",
                str(results),
                "--out",
                str(tmp_path / "refused" / "grokking-late"),
                *join,
            ]
        )
        == 2
    )
    error = capsys.readouterr().err
    assert "do not reproduce the committed summary.csv (differing: final_test_acc)" in error
    assert len(error.splitlines()) == 1
    retrained.to_csv(unit, index=False)

    # the committed AdamW wd=0.01 seeds 3-5 reaching 95 % at 9,000 steps: a baseline that groks in most seeds
    changed = tmp_path / "changed" / "grokking-late"
    shutil.copytree(committed("grokking-late"), changed, ignore=WORK_FOLDERS)
    summary = pd.read_csv(changed / "summary.csv")
    summary.loc[summary["seed"] >= 3, "step_95"] = 9000.0
    summary.to_csv(changed / "summary.csv", index=False)
    join[1] = str(changed)
    assert cli.main(["reference", "export", "grokking-late", "--results", str(results), "--out", str(out), *join]) == 0
    claims, want = pd.read_csv(out / "claims.csv"), pd.read_csv(committed("grokking-late") / "claims.csv")
    assert "AdamW wd=0.01: 9,000" in claims["note"].iloc[0] and not claims["note"].equals(want["note"])
    assert pd.read_csv(out / "table.csv")["reached"].tolist()[1] == 4


def test_targets_prints_the_rules_and_the_per_store_tables_an_export_pools(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert cli.main(["reference", "targets", "p1-interventions", "--results", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed[0] == "summarize_interventions" and len(printed) == 1 + 18
    assert all(path.startswith(f"{tmp_path}/stats/alignment/") for path in printed[1:])
    assert cli.main(["reference", "targets", "p2-small", "--results", "r"]) == 0
    assert capsys.readouterr().out.split() == [
        "r/claims/p2_pinn.csv",
        "r/claims/p2_preference.csv",
        "r/claims/p2_theory.csv",
    ]
    assert cli.main(["reference", "targets", "p2-small", "--results", "r", "--config", "configs/ci.yaml"]) == 2
    assert "not a config of p2-small" in capsys.readouterr().err


def nudged(text: str, ulps: int) -> str:
    """`text` with every float in it moved by `ulps` units in the last place (np.nextafter), integers untouched."""
    import numpy as np

    def nudge(match):
        token = match.group(0)
        if not any(mark in token for mark in ".eE"):
            return token
        value = np.float64(token)
        for _ in range(ulps):
            value = np.nextafter(value, np.inf)
        return repr(float(value))

    return NUMBER.sub(nudge, text)


@pytest.mark.parametrize("name", ["p1-seeds", "p2-small", "grokking-calibrated"])
def test_a_committed_table_with_every_float_a_few_ulps_off_still_matches_and_a_changed_word_does_not(name):
    """What another CPU's kernels do to a recomputed table (its floats' last bits) passes the comparison; what
    would change a reading (a word, an integer, a float in its 7th digit) fails it. The old comparison, exact
    string equality of every cell, failed on the first."""
    want = read_table(committed(name) / "claims.csv")
    got = want.map(lambda cell: nudged(cell, 3))
    changed = [column for column in want.columns if not got[column].equals(want[column])]
    assert changed, "the table has floats to move"
    assert_tables_match(got, want, "nudged")
    with pytest.raises(AssertionError):  # the exact comparison this replaces
        pd.testing.assert_frame_equal(got, want)
    word = want.copy()
    word.loc[0, "verdict"] = "reproduced" if want.loc[0, "verdict"] != "reproduced" else "contradicted"
    with pytest.raises(AssertionError, match="verdict"):
        assert_tables_match(word, want)
    digit = want.copy()
    digit.loc[0, "estimate"] = repr(float(want.loc[0, "estimate"]) * (1 + 1e-7))
    with pytest.raises(AssertionError, match="estimate"):
        assert_tables_match(digit, want)


@pytest.mark.parametrize("name", COMMITTED)
def test_every_committed_readme_says_under_which_numerics_and_on_which_cpu_its_units_were_made(name):
    from growcert.reference_runs.readme import numerics_text

    record = json.loads((committed(name) / "provenance.json").read_text())
    assert numerics_text(record) in (committed(name) / "README.md").read_text().splitlines()
