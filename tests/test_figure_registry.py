"""The figure registry (growcert.pipeline.artifacts) is the one place a figure's stem is spelled.

Every registered stem appears exactly once in src/ and rules/ (and the Snakefile): in the registry. An
occurrence is the stem as a whole token (no letter, digit or _ on either side) not followed by `.csv`: a
table, claims or checks file may share a figure's name (results/claims/p3_depth.csv,
results/checks/p1_interventions.csv) and is another artifact, registered as such (`Table("…"`,
`Claims("…"`, `Checks("…"` are not counted). So is a claim whose id equals a figure's stem
(the claims p2_grokking and p2_pinn, written into results/claims/*.csv as claim_id): its uses
`Claim("…"`, `CLAIMS["…"]` and `claim_row("…"` are not counted. Every consumer (the stages that draw, the
claims, the HTML report, the rules) then reads the registry, and renaming a figure is one line there (and
its caption file's name), which the last test shows end to end.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import ci_dry_run

from growcert.experiments import EXPERIMENTS
from growcert.pipeline import artifacts as figure_registry
from growcert.pipeline.artifacts import CLAIMS_FILES, FIGURES, TABLES, gate_figure, task_claims, task_figure, task_table
from growcert.referee.claims import CHECKS, CLAIMS
from growcert.report.html import SECTIONS
from growcert.report.labels import SHOWN, caption_stem, shown

ROOT = Path(__file__).resolve().parents[1]
CAPTIONS = ROOT / "src" / "growcert" / "resources" / "report"


def occurrences(stem: str, text: str) -> int:
    """How often `text` spells figure `stem`: as a whole token, not as a .csv name nor as a claim id."""
    text = re.sub(
        rf'(?:Claim\(\s*|claim_row\(\s*|judge_family\(\s*|look_level\(\s*|CLAIMS\[|Table\(\s*|Claims\(\s*|Checks\(\s*)"{re.escape(stem)}"',
        "",
        text,
    )
    return len(re.findall(rf"(?<!\w){re.escape(stem)}(?!\w)(?!\.csv)", text))


def sources() -> dict[Path, str]:
    files = [path for folder in ("src", "rules") for path in (ROOT / folder).rglob("*") if path.is_file()]
    texts = {}
    for path in files + [ROOT / "Snakefile"]:
        try:
            texts[path] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a binary file spells no stem
            continue
    return texts


def test_the_counter_counts_what_it_should():
    assert occurrences("p1_dalign_vs_width", 'a = "p1_dalign_vs_width"; b = f"{x}/p1_dalign_vs_width.png"') == 2
    assert occurrences("p3_depth", 'f"{RESULTS}/claims/p3_depth.csv"; "p3_depth_claims"; DEPTH.stem') == 0
    assert occurrences("p2_pinn", 'Claim("p2_pinn", ...); CLAIMS["p2_pinn"]; claim_row(\n   "p2_pinn", j)') == 0
    assert occurrences("p2_pinn", '("p2_pinn", "p2_pinn_gate")') == 1
    assert occurrences("p2_pinn", 'look_level("p2_pinn", 8, run, 0.95)') == 0
    assert occurrences("p3_growth", 'Table("p3_growth", "p3"); Claims( "p3_growth"); Checks("p3_growth")') == 0


def test_every_figure_stem_is_spelled_once_in_src_and_rules_in_the_registry():
    texts = sources()
    registry = Path(figure_registry.__file__).resolve()
    for stem in FIGURES:
        found = {path.relative_to(ROOT): count for path, text in texts.items() if (count := occurrences(stem, text))}
        assert found == {registry.relative_to(ROOT): 1}, (stem, found)


def test_every_figure_has_its_caption_file_and_every_figure_caption_is_registered():
    # tables and claims are marked through their records too (report_output(artifact, ...))
    marked = [
        *TABLES,
        *CLAIMS_FILES,
        task_table("{task}"),
        task_claims("{task}"),
        *[task_table(name) for name in EXPERIMENTS],
        *[task_claims(name) for name in EXPERIMENTS],
    ]
    tables = {caption_stem(artifact) for artifact in marked}
    figures = {caption_stem(figure) for figure in FIGURES.values()} | {
        caption_stem(task_figure("{task}")),
        caption_stem(gate_figure("{task}")),
    }
    assert all((CAPTIONS / f"{caption}.rst").is_file() for caption in figures | tables)
    assert not figures & tables
    assert {path.stem for path in CAPTIONS.glob("*.rst")} - {"workflow"} == figures | tables


def test_the_rules_mark_outputs_for_the_report_through_the_registry_only():
    """No rule calls Snakemake's report() itself: every mark is growcert.pipeline.rules.report_output(artifact)."""
    for path in [*(ROOT / "rules").glob("*.smk"), ROOT / "Snakefile"]:
        assert re.findall(r"(?<![\w.])report\(", path.read_text()) == [], path
    rules = "\n".join(path.read_text() for path in (ROOT / "rules").glob("*.smk"))
    assert "report_output(" in rules


def test_the_report_and_the_claims_read_the_registry():
    assert [stem for _, _, stems, _ in SECTIONS for stem in stems] == list(FIGURES)
    evidence = {stem for entry in [*CLAIMS.values(), *CHECKS.values()] for stem in entry.evidence}
    # the rest are the registered tables (results/tables/<stem>.csv)
    assert (
        evidence - set(FIGURES)
        == {table.stem for table in TABLES} - set(FIGURES)
        == {"p1_alignment_summary", "p1_interventions_summary", "p1_regime_cells", "p3_recommended_depth"}
    )


def test_a_p2_task_figure_is_p2_task_as_the_wildcard_rules_derive_it():
    for name in EXPERIMENTS:  # every registered task's figure is a registered figure, shown under its own name
        figure = task_figure(name)
        assert figure.stem == task_figure("{task}").stem.replace("{task}", name) and figure in FIGURES.values(), name
        assert figure in SHOWN and shown(figure).subcategory == name, name
    for figure in FIGURES.values():  # and so is every gate figure
        if figure.stem.endswith(figure_registry.GATE_SUFFIX):
            name = figure.stem.removeprefix("p2_").removesuffix(figure_registry.GATE_SUFFIX)
            assert figure == gate_figure(name) and shown(figure).subcategory == name, figure
    toy = task_figure("toy")  # a task that is not registered is shown under its name, with the task captions
    assert (toy.stem, caption_stem(toy), gate_figure("toy").stem) == ("p2_toy", "p2_experiment_figure", "p2_toy_gate")
    assert (shown(toy).title, caption_stem(gate_figure("toy"))) == ("P2 toy", "p2_gate")


def test_renaming_a_figure_is_one_line_in_the_registry(tmp_path):
    """Rename p1_dalign_vs_width in a copy of the package, by its one line: the report's sections, the claims'
    evidence and the rules' outputs (a dry run of the ci DAG) all follow."""
    package = tmp_path / "src" / "growcert"
    shutil.copytree(ROOT / "src" / "growcert", package, ignore=shutil.ignore_patterns("__pycache__"))
    registry = package / "pipeline" / "artifacts.py"
    text = registry.read_text()
    assert text.count('"p1_dalign_vs_width"') == 1
    registry.write_text(text.replace('"p1_dalign_vs_width"', '"p1_renamed"'))
    environment = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    code = (
        "from growcert.report.html import SECTIONS; from growcert.referee.claims import CLAIMS\n"
        "stems = [stem for _, _, figures, _ in SECTIONS for stem in figures]\n"
        "assert 'p1_renamed' in stems and 'p1_dalign_vs_width' not in stems, stems\n"
        "assert 'p1_renamed' in CLAIMS['p1_dalign_width'].evidence\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    result = ci_dry_run(tmp_path, environment)
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert f"{tmp_path}/results/figures/p1_renamed.png" in output and "p1_dalign_vs_width.png" not in output


def test_the_records_name_files_and_the_report_says_how_each_is_shown():
    """An artifact's record is its file and report section; its title, label and caption are report.labels' (a
    registered figure without a title there, or a title back in a record, fails)."""
    import dataclasses

    for kind in (figure_registry.Figure, figure_registry.Table, figure_registry.Claims, figure_registry.Checks):
        assert [field.name for field in dataclasses.fields(kind)] == ["stem", "section"], kind
    assert all(shown(figure).title and shown(figure).label for figure in FIGURES.values())
    assert all(shown(artifact).label for artifact in [*TABLES, *CLAIMS_FILES])
