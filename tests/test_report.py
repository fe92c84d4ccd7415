"""The report: self-contained, claims matched to the registry, pending claims listed, figures embedded."""

import base64
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from helpers import advice_figures, browser_check, chromium  # noqa: E402

from growcert.referee.claims import CLAIMS  # noqa: E402
from growcert.referee.effect import Effect  # noqa: E402
from growcert.referee.rows import ROW_COLUMNS, check_row, claim_row  # noqa: E402
from growcert.referee.verdicts import judge_samples  # noqa: E402
from growcert.report.advice_check import ADVICE_SECTION  # noqa: E402
from growcert.report.html import SECTIONS, build_report  # noqa: E402
from growcert.report.reference import reference_folders  # noqa: E402

REFERENCES = Path(__file__).resolve().parents[1] / "docs" / "reference-results"  # the repository's reference runs


def test_report_embeds_figures_and_matches_claims(tmp_path):
    results = tmp_path / "results"
    (results / "figures").mkdir(parents=True)
    (results / "claims").mkdir()
    (results / "tables").mkdir()
    figure, axis = plt.subplots()
    axis.plot([1, 2], [3, 4])
    figure.savefig(results / "figures" / "p3_depth.png")
    plt.close(figure)
    pd.DataFrame(
        [
            claim_row(
                "p3_depth_plateau",
                judge_samples(CLAIMS["p3_depth_plateau"].effect, [-1.0, -1.1, -0.9], 0.95),
                "RUN-VALUE-1",
                "NOTE-1",
                scope="llama/shakespeare",
            ),
            {
                "claim_id": "p9_stale",
                "paper": "P1",
                "claim": "a claim no registry row names",
                "paper_value": "x",
                "this_run": "RUN-VALUE-2",
                "estimate": 2.0,
                "seeds": 3,
                "verdict": "unresolved",
                "why": "WHY-2",
                "note": None,
            },
        ],
        columns=ROW_COLUMNS,
    ).to_csv(results / "claims" / "p3.csv", index=False)
    (results / "checks").mkdir()
    pd.DataFrame(
        [
            check_row("p2_coupling_residual", True, "CHECK-RUN", "n"),
            check_row("p1_intervention_sign", False, "CHECK-RUN-2", "n"),
        ]
    ).to_csv(results / "checks" / "c.csv", index=False)
    pd.DataFrame({"width": [1, 2], "recommended": [2, 3]}).to_csv(
        results / "tables" / "p3_recommended_depth.csv", index=False
    )
    out = results / "report.html"
    build_report(results, out)
    text = out.read_text()
    encoded = base64.b64encode((results / "figures" / "p3_depth.png").read_bytes()).decode()
    assert encoded in text  # embedded, not linked
    assert "RUN-VALUE-1" in text and "(llama/shakespeare)" in text and "NOTE-1" in text
    # the row shows the interval over seeds and its word, coloured by the word
    assert "-1 [-1.25, -0.752] (95 %), 3 seeds" in text and '<span class="verdict reproduced">reproduced' in text
    # the first screen counts the claims table below it (one row per registered claim), never this run's rows: one
    # reproduced, the others not measured; the unregistered row is not a claim of the table
    counts = text[text.index('<p class="counts">') :]
    counts = counts[: counts.index("</p>")]
    assert f"{len(CLAIMS)} claims" in counts and ">reproduced</span> 1" in counts and ">unresolved</span> 0" in counts
    assert ">contradicted</span> 0" in counts and f"not measured {len(CLAIMS) - 1}" in counts
    glance = text[text.index('id="claims-at-a-glance"') :]
    glance = glance[: glance.index("</table>")]
    assert glance.count('class="claim-row"') == len(CLAIMS) and "seeds to reproduce / to contradict" in glance
    plateau = glance[glance.index('data-claim="p3_depth_plateau"') :]
    plateau = plateau[: plateau.index("</tr>")]
    # a direction-only claim has no paper's value to reproduce at; contradicting it "if nil" has a figure
    design = plateau[
        plateau.index('class="design">') + len('class="design">') : plateau.index(
            "</td>", plateau.index('class="design">')
        )
    ]
    assert design.startswith("– / ") and design.split(" / ")[1].replace(",", "").isdigit()
    # implementation checks are apart from the claims
    assert "1 of 2 passed" in text and "CHECK-RUN-2" in text and "FAILED" in text
    assert "RUN-VALUE-2" in text and "p9_stale is not in the registry" in text  # shown, and marked
    pending = len(CLAIMS) - 1
    assert text.count("not measured in this run") == pending
    assert "p3 recommended depth" in text and "<td>3</td>" in text
    assert 'src="http' not in text and "<link" not in text  # nothing fetched from elsewhere


def synthetic_results(folder):
    """A results folder with every figure the report knows, wide and long tables, and a claim row per claim."""
    for name in ("figures", "claims", "tables", "stats"):
        (folder / name).mkdir(parents=True)
    for _, _, figures, _ in SECTIONS:
        for stem in figures:
            figure, axis = plt.subplots(figsize=(16, 4))  # wider than the page at 110 dpi: must be scaled
            axis.plot([1, 2], [3, 4])
            figure.savefig(folder / "figures" / f"{stem}.png", dpi=110)
            plt.close(figure)
    wide = pd.DataFrame({f"column_with_a_long_name_{index}": [1.234567e-5 * index, "x" * 80] for index in range(30)})
    for stem in (
        "p1_alignment_summary",
        "p1_interventions_summary",
        "p1_regime_cells",
        "p2_grokking",
        "p3_growth",
        "p3_recommended_depth",
    ):
        wide.to_csv(folder / "tables" / f"{stem}.csv", index=False)
    pd.DataFrame({"value": range(2000)}).to_csv(folder / "tables" / "p2_theory.csv", index=False)
    words = [
        judge_samples(Effect("e", 1.0), values, 0.95)
        for values in ([1.0, 1.1, 0.9], [-1.0, -1.1, -0.9], [3.0, -2.0, 0.5], [1.0])
    ]  # one of each of the four words
    pd.DataFrame(
        [claim_row(key, words[index % 4], "VALUE-" + "y" * 120, "note " * 40) for index, key in enumerate(CLAIMS)]
    ).to_csv(folder / "claims" / "all.csv", index=False)
    return folder


def test_every_claim_links_its_evidence_and_long_tables_are_collapsed(tmp_path):
    results = synthetic_results(tmp_path / "results")
    build_report(results, results / "report.html")
    text = (results / "report.html").read_text()
    assert "not measured in this run" not in text
    for claim in CLAIMS.values():
        for stem in claim.evidence:
            kind = "fig" if (results / "figures" / f"{stem}.png").is_file() else "table"
            assert f'href="#{kind}-{stem}"' in text and f'id="{kind}-{stem}"' in text, stem
    sections = text[: text.index('<section id="reference">')]  # the reference runs' own tables come after
    assert sections.count('<details id="table-') == 7 and '<details id="table-p2_theory" open' not in text  # collapsed
    assert 'href="tables/p2_theory.csv"' in text and "2000 rows, first 500 shown" in text


@pytest.mark.skipif(chromium() is None, reason="needs chromium (apt-get install chromium; .ci/run installs it)")
def test_the_report_renders_in_a_real_browser(tmp_path):
    results = synthetic_results(tmp_path / "results")
    build_report(results, results / "report.html", references=REFERENCES)
    check = browser_check(results / "report.html", width=1280)
    # every section's figures, and those of the reference runs kept in the repository (docs/reference-results)
    references = sum(len(list(folder.glob("*.png"))) for folder in reference_folders(REFERENCES))
    # the advice section's figures are the advise-check reference run's (advice_figures), not this run's
    shown = sum(len(figures) for key, _, figures, _ in SECTIONS if key != ADVICE_SECTION[0])
    assert check["images"] == shown + references + advice_figures(REFERENCES)
    assert check["undecoded"] == [], check
    assert check["scroll_width"] <= check["viewport"] and check["outside"] == [], check
    assert check["links"] > len(CLAIMS) and check["broken"] == [], check
    # the first screen shows the table of one row per registered claim, before this run's per-scope rows
    claims = check["claims"]
    assert claims["rows"] == len(CLAIMS) and claims["first_screen"] and claims["before_scopes"], claims
    # the four counts too: of the claims table itself (each claim's deciding row, a reference run's where it has
    # one), never of this run's rows
    from growcert.report.html import _claim_rows, deciding_row

    counts = check["counts"]
    assert counts is not None and counts["visible"], check
    words = pd.Series(
        [deciding_row(claim, _claim_rows(results), REFERENCES)[1]["verdict"] for claim in CLAIMS.values()]
    )
    assert f"{len(CLAIMS)} claims:" in counts["text"], counts
    for word in ("reproduced", "contradicted", "unresolved", "not tested at this scale"):
        assert f"{word} {int((words == word).sum())}" in counts["text"], counts


def test_every_figure_has_the_workflow_caption():
    """The report's captions are the workflow's src/growcert/resources/report/*.rst (one source with
    `snakemake --report`)."""
    from growcert.report.page import caption, task_branch

    for _, _, figures, _ in SECTIONS:
        for stem in figures:
            assert len(caption(stem)) > 200 and "{%" not in caption(stem), stem
    template = (
        '{% if snakemake.wildcards.task == "a" %}\nfirst\n'
        '{% elif snakemake.wildcards.task == "b" %}\nsecond\n{% endif %}'
    )
    assert task_branch(template, "a").strip() == "first" and task_branch(template, "b").strip() == "second"
    assert task_branch(template, "c") == ""


def p1_regime_reference(tmp_path, rows) -> Path:
    """A reference-results folder holding a p1-regime run whose claims.csv is `rows`; returns the folder."""
    references = tmp_path / "reference-results"
    folder = references / "p1-regime"
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text('{"date": "2026-12-01", "commit": "abc", "command": "x"}')
    pd.DataFrame({"cell": [1]}).to_csv(folder / "table.csv", index=False)
    pd.DataFrame(rows).to_csv(folder / "claims.csv", index=False)
    return references


def test_each_claim_shows_the_verdicts_of_the_reference_runs_that_decide_it(tmp_path):
    effect = CLAIMS["p1_regime_budget"].effect
    references = p1_regime_reference(
        tmp_path,
        [
            claim_row("p1_regime_budget", judge_samples(effect, values, 0.95), "r", "n", scope=f"context {c}")
            for c, values in ((256, [3.0, -2.0, 0.5]), (512, [3.0, -2.0, 0.4]), (64, [-1.0, -1.1, -0.9]))
        ],
    )
    results = tmp_path / "results"
    results.mkdir()
    build_report(results, results / "report.html", references=references)
    text = (results / "report.html").read_text()
    # the first screen's row: p1-seeds decides this claim and is not kept here, and this run wrote no row
    first = text[text.index('data-claim="p1_regime_budget"') :]
    assert "not measured: reference run p1-seeds not run yet" in first[: first.index("</tr>")]
    # this run's rows (the second table): the reference runs that measure the claim, with their words
    rows = text[text.index("<h3>This run's rows</h3>") :]
    row = rows[rows.index("d_align increases with width, on the regime map at matched budget") :]
    row = row[: row.index("</tr>")]
    assert '<a href="#reference-p1-regime">p1-regime</a>' in row and 'id="reference-p1-regime"' in text
    assert ">unresolved</span> 2" in row and ">contradicted</span> 1" in row
    assert "p1-seeds: planned, not run yet" in row


def test_the_reference_cell_shows_the_claims_word_and_only_labels_the_row_counts(tmp_path):
    """A run with one primary row (unresolved) and six parts (four unresolved, two contradicted) gives the claim one
    word: the cell shows it, then the run's row counts, labelled as rows (before 2026-12-07 it showed only the counts,
    "unresolved 5, contradicted 2", beside a claim that has one word)."""
    effect = CLAIMS["p1_regime_budget"].effect
    straddles, short = [3.0, -2.0, 0.5], [-1.0, -1.1, -0.9]
    parts = [
        claim_row("p1_regime_budget", judge_samples(effect, values, 0.95), "r", "n", scope=f"context {c}", role="part")
        for c, values in enumerate([straddles] * 4 + [short] * 2)
    ]
    primary = claim_row("p1_regime_budget", judge_samples(effect, straddles, 0.95), "r", "n")
    references = p1_regime_reference(tmp_path, parts + [primary])
    results = tmp_path / "results"
    results.mkdir()
    build_report(results, results / "report.html", references=references)
    text = (results / "report.html").read_text()
    rows = text[text.index("<h3>This run's rows</h3>") :]
    row = rows[rows.index("d_align increases with width, on the regime map at matched budget") :]
    row = row[: row.index("</tr>")]
    assert (
        '<a href="#reference-p1-regime">p1-regime</a>: <span class="verdict unresolved">unresolved</span> '
        '(its rows: <span class="verdict unresolved">unresolved</span> 5, '
        '<span class="verdict contradicted">contradicted</span> 2)'
    ) in row
    grokking = rows[rows.index("grokking: steps to 95 % held-out") :]
    assert "grokking-late: planned, not run yet" in grokking[: grokking.index("</tr>")]


def test_the_first_screen_shows_one_row_per_claim_from_the_run_that_decides_it(tmp_path):
    """A claim decided by a reference run shows that run's primary row; one without shows this run's primary row
    (never a part or a secondary row); one measured nowhere says so."""
    references = tmp_path / "reference-results"
    folder = references / "p3-depth"
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text('{"date": "2026-12-01", "commit": "abc", "command": "x"}')
    pd.DataFrame({"cell": [1]}).to_csv(folder / "table.csv", index=False)
    effect = CLAIMS["p3_depth_plateau"].effect
    pd.DataFrame(
        [
            claim_row("p3_depth_plateau", judge_samples(effect, [-3.7, -3.6, -3.8], 0.95), "r", "n"),
            claim_row("p3_depth_plateau", judge_samples(effect, [0.1, -0.1, 0.0], 0.95), "r", "n", role="secondary"),
        ]
    ).to_csv(folder / "claims.csv", index=False)
    results = tmp_path / "results"
    (results / "claims").mkdir(parents=True)
    slope = CLAIMS["p1_dalign_width"].effect
    pd.DataFrame(
        [
            claim_row("p1_dalign_width", judge_samples(slope, [0.2, 0.3], 0.95), "r", "n", scope="a", role="part"),
            claim_row("p1_dalign_width", judge_samples(slope, [0.45, 0.55, 0.5], 0.95), "r", "n"),
        ]
    ).to_csv(results / "claims" / "p1_alignment.csv", index=False)
    build_report(results, results / "report.html", references=references)
    text = (results / "report.html").read_text()
    first = text[text.index('<table id="claims-at-a-glance">') :]
    first = first[: first.index("</table>")]
    assert first.count('class="claim-row"') == len(CLAIMS)
    depth = first[first.index('data-claim="p3_depth_plateau"') :]
    depth = depth[: depth.index("</tr>")]
    assert "reference run p3-depth" in depth and ">reproduced</span>" in depth and "as the paper" in depth
    width = first[first.index('data-claim="p1_dalign_width"') :]
    width = width[: width.index("</tr>")]
    assert "this run" in width and "0.5 [" in width and "3 seeds" in width  # the primary row, not the part
    assert "SESOI" in text and "0.248 (half the paper" in first


def test_a_report_without_reference_runs_says_so(tmp_path):
    """No reference folder (a wheel install outside the repository): the report says so instead of failing."""
    (tmp_path / "results").mkdir()
    build_report(tmp_path / "results", tmp_path / "results" / "report.html")
    text = (tmp_path / "results" / "report.html").read_text(encoding="utf-8")
    assert "No reference runs: this report was built without a reference-results folder" in text
    assert "p1-regime: not in this report (no reference-results folder given)" in text


def test_a_reference_run_whose_first_rows_have_not_landed_still_renders(tmp_path):
    """A resumable reference run writes its folder before its tables have rows: an empty table.csv and a claims.csv
    with only its header. The report shows the run as having no rows yet instead of failing."""
    import json

    from helpers import reference_section

    folder = tmp_path / "references" / "in-progress"
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text(json.dumps({"date": "2026-12-03", "commit": "abc", "command": "run"}))
    (folder / "table.csv").write_text("\n")
    (folder / "claims.csv").write_text("claim_id,verdict\n")
    section = reference_section(tmp_path / "report", tmp_path / "references")
    assert "Reference run: in-progress" in section and "(0 rows)" in section


def test_seed_counts_are_whole_numbers_with_their_noun():
    from growcert.report.html import _design_text, seeds_text

    assert seeds_text(1) == "1 seed" and seeds_text(16.0) == "16 seeds" and seeds_text("242.0") == "242 seeds"
    # a CSV reader that took a design figure for a float shows it whole
    assert _design_text(242.0) == "242" and _design_text("> 10,000") == "> 10,000" and _design_text(None) == "–"


def test_the_report_asks_whether_the_advice_is_right(tmp_path):
    """The section "Is the advice right?" shows the advise-check reference run's verdict, scorecard and reliability
    figure when the references folder holds it, and the command that makes it when it does not."""
    results = synthetic_results(tmp_path / "results")
    build_report(results, results / "report.html", references=tmp_path / "none")
    text = (results / "report.html").read_text()
    assert '<section id="advice"><h2>Is the advice right?</h2>' in text and "summarize_advise_check" in text
    folder = tmp_path / "references" / "advise-check"
    folder.mkdir(parents=True)
    pd.DataFrame(
        {
            "variant": ["new_block"],
            "score": ["precision"],
            "rule": ["advise"],
            "estimate": [0.6],
            "low": [0.4],
            "high": [0.8],
        }
    ).to_csv(folder / "scorecard.csv", index=False)
    pd.DataFrame(
        [
            claim_row(
                "advise_beats_first_order",
                judge_samples(CLAIMS["advise_beats_first_order"].effect, [0.01, 0.02, 0.015], 0.95),
                "RUN",
                "NOTE",
            )
        ],
        columns=ROW_COLUMNS,
    ).to_csv(folder / "claims.csv", index=False)
    build_report(results, results / "report.html", references=tmp_path / "references")
    text = (results / "report.html").read_text()
    section = text[text.index('<section id="advice">') :]
    section = section[: section.index("</section>")]
    assert "precision" in section and "<b>reproduced</b>" in section and "3 seeds" in section
    assert 'href="#advice"' in text
