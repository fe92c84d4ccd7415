"""results/report.html: one self-contained page a researcher reads from the top.

Order: a header with the run's provenance and a table of contents; a one-screen summary with each paper
claim of the registry (`growcert.referee.claims`), this run's estimate with its interval over seeds, its verdict
(one of the four words of `growcert.referee.verdicts`, with the four counts on the first screen) and links to the
figures and tables that measure it; then the trained grid and one section per paper (P1, P2, P3), each figure under
a caption saying what is plotted, how to read it and what this run shows; the summary tables collapsed,
sortable and linked to their full CSVs. Claims no stage measured are listed as such rather than left
out; rows whose claim_id the registry does not know are shown last, flagged. Reads tidy tables and PNGs
under `results/` only.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
from pathlib import Path

import pandas as pd

from growcert.files import write_text
from growcert.pipeline.artifacts import (
    CHECKS_DIR,
    CLAIMS_DIR,
    FIGURES,
    FIGURES_DIR,
    REGIME_MAP,
    TABLES_DIR,
    TRAINING_TABLE,
    section_figures,
)
from growcert.provenance import code_hash, git_commit, versions
from growcert.referee.claims import CLAIMS
from growcert.referee.rows import CHECK_COLUMNS, ROW_COLUMNS, design_figure
from growcert.referee.verdicts import CONTRADICTED, NOT_TESTED, REPRODUCED, UNRESOLVED, WORDS, percent
from growcert.report import labels, page
from growcert.report.advice_check import ADVICE_SECTION, advice_section
from growcert.report.reference import reference_claim_rows, reference_claim_word, reference_verdicts, references_html
from growcert.report.training import final_rows

# (section id, heading, figures in reading order (the figure registry's), prefix of its tables under results/tables)
SECTIONS = [
    (key, heading, [figure.stem for figure in section_figures(key)], prefix)
    for key, heading, prefix in [
        ("training", "Trained grid", None),
        ("p1", "P1 — width scaling and the alignment certificate", "p1_"),
        ("p2", "P2 — population-risk training", "p2_"),
        ("p3", "P3 — depth sufficiency", "p3_"),
        (ADVICE_SECTION[0], ADVICE_SECTION[1], None),  # drawn from the advise-check reference run (advice_section)
    ]
]


def _verdict(word, why: str = "") -> str:
    """The verdict word, coloured by which of the four it is (title: the reason)."""
    text = str(word)
    kind = {
        REPRODUCED: "reproduced",
        CONTRADICTED: "contradicted",
        UNRESOLVED: "unresolved",
        NOT_TESTED: "not-tested",
    }.get(text, "other")
    title = f' title="{html.escape(str(why))}"' if why and str(why) != "nan" else ""
    return f'<span class="verdict {kind}"{title}>{html.escape(text)}</span>'


def _interval(row: pd.Series) -> str:
    """This run's estimate, interval, level and seeds, as the claim table shows them."""

    def number(value) -> str:
        return "–" if pd.isna(value) else f"{float(value):.3g}"

    seeds = seeds_text(row.get("seeds"))
    if pd.isna(row.get("estimate")):
        return seeds
    interval = (
        ""
        if pd.isna(row.get("low"))
        else f" [{number(row['low'])}, {number(row['high'])}] ({percent(float(row['level']))})"
    )
    return f"{number(row['estimate'])}{interval}, {seeds}"


def seeds_text(count) -> str:
    """A seed count as a whole number with its noun: "1 seed", "16 seeds" (never "16.0")."""
    count = int(float(count)) if pd.notna(count) and str(count) != "" else 0
    return f"{count:,} seed" + ("" if count == 1 else "s")


def _design_text(value) -> str:
    """A design figure as the claims table shows it (`rows.design_figure`), "–" where it has no meaning here."""
    return design_figure(value) or "–"


def _counts(words: list[str]) -> str:
    """The counts of the four words over the claims table (one deciding row per claim; "not measured" apart)."""
    counts = pd.Series(words, dtype=object).value_counts()
    shown = [f'<span class="count">{_verdict(word)} {int(counts.get(word, 0))}</span>' for word in WORDS]
    missing = sum(1 for word in words if word not in WORDS)
    return " · ".join(shown + ([f'<span class="count">not measured {missing}</span>'] if missing else []))


def _checks(results: Path) -> str:
    files = sorted(CHECKS_DIR.path(results).glob("*.csv")) if CHECKS_DIR.path(results).is_dir() else []
    checks = (
        pd.concat([pd.read_csv(path) for path in files], ignore_index=True)
        if files
        else pd.DataFrame(columns=CHECK_COLUMNS)
    )
    if checks.empty:
        return "<p>No implementation checks in this run.</p>"
    passed = checks["passed"].astype(str).str.lower() == "true"
    body = "".join(
        f"<tr><td>{html.escape(str(row['paper']))}</td><td>{html.escape(str(row['check']))}</td>"
        f"<td>{html.escape(str(row['expected']))}</td><td>{html.escape(str(row['this_run']))}</td>"
        f'<td><span class="verdict {"reproduced" if ok else "contradicted"}">{"passed" if ok else "FAILED"}'
        f"</span></td></tr>"
        for ok, (_, row) in zip(passed, checks.iterrows())
    )
    return (
        f'<details id="checks"><summary>Implementation checks (not claims: they hold by construction when the '
        f"code is right): {int(passed.sum())} of {len(checks)} passed</summary>"
        '<div class="scroll"><table><thead><tr><th>paper</th><th>check</th><th>expected</th><th>this run</th>'
        f"<th>result</th></tr></thead><tbody>{body}</tbody></table></div></details>"
    )


def _claim_rows(results: Path) -> pd.DataFrame:
    files = sorted(CLAIMS_DIR.path(results).glob("*.csv"))
    return (
        pd.concat([pd.read_csv(path) for path in files], ignore_index=True)
        if files
        else pd.DataFrame(columns=ROW_COLUMNS)
    )


def _reference_cell(claim, references: Path | None) -> str:
    """The reference runs that measure `claim`: a link to each kept run with the claim's word there (its primary
    row's: a claim has one word), then, labelled as rows, how many of the run's rows got each word; or "planned"."""
    parts = []
    for name in claim.references:
        counts = reference_verdicts(references, name, claim.key)
        if counts is None and references is None:
            parts.append(f"{html.escape(name)}: not in this report (no reference-results folder given)")
            continue
        if counts is None:
            parts.append(f"{html.escape(name)}: planned, not run yet")
            continue
        word = reference_claim_word(references, name, claim.key)
        rows = ", ".join(f"{_verdict(each)} {count}" for each, count in counts.items())
        parts.append(
            f'<a href="#reference-{html.escape(name)}">{html.escape(name)}</a>: '
            + (_verdict(word) if word else "no primary row")
            + (f" (its rows: {rows})" if rows else " (no rows yet)")
        )
    return "<br>".join(parts)


def deciding_row(claim, rows: pd.DataFrame, references: Path | None) -> tuple[str, pd.Series | None]:
    """(source, primary row) that decides `claim`: the primary row of the reference run named by `decided_by` when
    the report has it, else this run's primary row; (why not, None) when neither has one."""
    if claim.decided_by is not None:
        kept = reference_claim_rows(references, claim.decided_by)
        if kept is not None and "role" in kept.columns:
            primary = kept[(kept["claim_id"] == claim.key) & (kept["role"] == "primary")]
            if len(primary):
                return f"reference run {claim.decided_by}", primary.iloc[-1]
    if "role" in rows.columns:
        primary = rows[(rows["claim_id"] == claim.key) & (rows["role"] == "primary")]
        if len(primary):
            source = "this run" + (
                f" (reference run {claim.decided_by} not in this report or not run yet)" if claim.decided_by else ""
            )
            return source, primary.iloc[-1]
    return (
        "not measured: "
        + (f"reference run {claim.decided_by} not run yet, and " if claim.decided_by else "")
        + f"this run's {claim.stage} wrote no primary row"
    ), None


def _one_row_per_claim(rows: pd.DataFrame, references: Path | None) -> tuple[str, list[str]]:
    """The first screen: one row per registered claim, the verdict of the run that decides it, its interval,
    direction and its two design figures (seeds to reproduce it if the effect is the paper's, to contradict it if
    nil); with the table's words, which the counts above it count."""
    body, words = [], []
    for claim in CLAIMS.values():
        source, row = deciding_row(claim, rows, references)
        link = (
            f'<a href="#reference-{html.escape(claim.decided_by)}">{html.escape(source)}</a>'
            if row is not None and source.startswith("reference")
            else html.escape(source)
        )
        if row is None:
            words.append("not measured")
            cells = f'<td class="pending" colspan="5">{link}</td>'
        else:
            words.append(str(row["verdict"]))
            cells = (
                f"<td>{link}</td><td>{html.escape(_interval(row))}</td>"
                f"<td>{_verdict(row['verdict'], row['why'])}</td>"
                f"<td>{html.escape(str(row.get('direction')) if pd.notna(row.get('direction')) else '')}</td>"
                f'<td class="design">{html.escape(_design_text(row.get("seeds_to_reproduce")))} / '
                f"{html.escape(_design_text(row.get('seeds_to_contradict')))}</td>"
            )
        body.append(
            f'<tr class="claim-row" data-claim="{html.escape(claim.key)}"><td>{claim.paper}</td>'
            f"<td>{html.escape(claim.text)}<details><summary>primary analysis</summary>"
            f"{html.escape(claim.primary)}</details></td><td>{html.escape(claim.paper_value)}</td>"
            f"<td>{html.escape(claim.effect.sesoi_text())}</td>{cells}</tr>"
        )
    return (
        '<div class="scroll"><table id="claims-at-a-glance"><thead><tr><th>paper</th><th>claim</th>'
        "<th>paper's value</th><th>smallest effect that matters (SESOI)</th><th>decided by</th>"
        "<th>estimate [interval] (level), seeds</th><th>verdict</th><th>direction</th>"
        "<th>seeds to reproduce / to contradict (80 % power)</th></tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table></div>",
        words,
    )


def _summary(rows: pd.DataFrame, present: set[str], references: Path | None = None) -> str:
    """Every registered claim with this run's rows, a verdict, the reference runs that decide it and links to
    the evidence in this page."""
    body = []
    for claim in CLAIMS.values():
        reference = _reference_cell(claim, references)
        links = " · ".join(
            f'<a href="#{page.anchor(kind, stem)}" title="{html.escape(labels.title(stem))}">'
            f"{'figure' if kind == 'fig' else 'table'} {html.escape(stem.split('_', 1)[-1].replace('_', ' '))}</a>"
            for stem in claim.evidence
            for kind in ("fig", "table")
            if (kind, stem) in present
        )
        match = rows[rows["claim_id"] == claim.key]
        if match.empty:
            body.append(
                f"<tr><td>{claim.paper}</td><td>{html.escape(claim.text)}</td><td>{html.escape(claim.paper_value)}"
                f'</td><td class="pending" colspan="2">not measured in this run ({html.escape(claim.stage)} '
                f"did not write it)</td><td>{reference}</td><td>{links}</td></tr>"
            )
            continue
        for _, row in match.iterrows():
            note = html.escape(str(row["note"])) if pd.notna(row["note"]) else ""
            role = str(row.get("role", "primary"))
            body.append(
                f'<tr class="role-{html.escape(role)}"><td>{claim.paper}</td><td>{html.escape(str(row["claim"]))}'
                + (f" <small>[{html.escape(role)}]</small>" if role != "primary" else "")
                + f"<details><summary>how it is judged</summary>{html.escape(claim.judged)}. Effect: "
                f"{html.escape(claim.effect.name)}; interval: {html.escape(claim.effect.interval)}. "
                f"{html.escape(str(row['this_run']))}. {note}</details></td>"
                f"<td>{html.escape(claim.paper_value)} <small>(effect {html.escape(str(row['paper_effect']))})"
                f"</small></td><td>{html.escape(_interval(row))}</td>"
                f"<td>{_verdict(row['verdict'])}<details><summary>why</summary>{html.escape(str(row['why']))}"
                f"</details></td><td>{reference}</td><td>{links}</td></tr>"
            )
    for _, row in rows[~rows["claim_id"].isin(list(CLAIMS))].iterrows():
        body.append(
            f"<tr><td>{html.escape(str(row['paper']))}</td><td>{html.escape(str(row['claim']))} <em>(claim_id "
            f"{html.escape(str(row['claim_id']))} is not in the registry)</em> {html.escape(str(row['this_run']))}</td>"
            f"<td>{html.escape(str(row['paper_value']))}</td><td>{html.escape(_interval(row))}</td>"
            f"<td>{_verdict(row['verdict'], row['why'])}</td><td></td><td></td></tr>"
        )
    return (
        '<div class="scroll"><table><thead><tr><th>paper</th><th>claim</th><th>paper\'s value</th>'
        "<th>this run (interval, seeds)</th><th>verdict</th><th>reference runs</th><th>evidence</th></tr></thead>"
        "<tbody>" + "".join(body) + "</tbody></table></div>"
    )


def _shows(stem: str, rows: pd.DataFrame) -> str:
    """What this run shows in a figure: the claim rows it is evidence for."""
    keys = [claim.key for claim in CLAIMS.values() if stem in claim.evidence]
    found = rows[rows["claim_id"].isin(keys)]
    return "; ".join(
        f"{html.escape(str(row['claim']))}: {html.escape(_interval(row))} {_verdict(row['verdict'], row['why'])}"
        for _, row in found.iterrows()
    )


def _training(results: Path, report_dir: Path) -> str:
    table_path = TRAINING_TABLE.path(results)
    if not table_path.is_file():
        return "<p>No training table in this run.</p>"
    final = final_rows(pd.read_csv(table_path))
    shown = final[
        [
            "family",
            "dataset",
            "width",
            "depth",
            "seed",
            "num_parameters",
            "step",
            "train_loss",
            "test_loss",
            "test_acc",
            "seconds_per_step",
        ]
    ]
    return (
        f"<p>{len(final)} models; held-out metrics at the last step of each run (the budget is identical "
        f"across widths within a grid).</p>"
        f'<details id="{page.anchor("table", "training")}"><summary>final evaluation of every run '
        f'({len(final)} rows) · <a href="{html.escape(os.path.relpath(table_path, report_dir))}">full '
        f"history CSV</a></summary>{page.table_html(shown)}</details>"
    )


def _regime_map(results: Path) -> str:
    """What the P1 regime map covers in this run (whole map or slice) and which figures it could not draw."""
    path = REGIME_MAP.path(results)
    if not path.is_file():
        return ""
    facts = json.loads(path.read_text())
    missing = "".join(
        f"<li><code>{html.escape(stem)}</code> not drawn: {html.escape(reason)}</li>"
        for stem, reason in facts["figures"].items()
        if reason
    )
    return (
        f'<p id="regime-map"><b>Regime map</b> (context × width × training progress): '
        f"{html.escape(facts['coverage'])}.</p>" + (f"<ul>{missing}</ul>" if missing else "")
    )


def _present(results: Path) -> set[tuple[str, str]]:
    figures = {("fig", path.stem) for path in FIGURES_DIR.path(results).glob("*.png")}
    return figures | {("table", path.stem) for path in TABLES_DIR.path(results).glob("*.csv")}


def build_report(results: str | Path, out: str | Path, references: str | Path | None = None) -> None:
    """Write the report of `results` to `out`, with the reference runs under `references` (a folder such as the
    repository's docs/reference-results; None: none) in their own section."""
    results, out = Path(results), Path(out)
    references = None if references is None else Path(references)
    if not results.is_dir():
        raise FileNotFoundError(f"results folder {results}: no such folder")
    rows, present = _claim_rows(results), _present(results)
    report_dir = out.parent.resolve()
    version_text = ", ".join(f"{name} {value}" for name, value in versions().items())
    toc = "".join(
        f'<li><a href="#{key}">{html.escape(title)}</a></li>'
        for key, title, _, _ in [("summary", "Paper claims at a glance", None, None)]
        + SECTIONS
        + [("reference", "Reference runs", None, None)]
    )
    header = (
        f"<header><h1>growcert report</h1><p>Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC "
        f"from <code>{html.escape(str(results))}</code> · git commit <code>{git_commit() or 'none'}</code> · "
        f"code hash <code>{code_hash()}</code> · {html.escape(version_text)}</p></header>"
        f'<nav class="toc"><b>Contents</b><ol>{toc}</ol></nav>'
    )
    measured = sum(1 for claim in CLAIMS.values() if (rows["claim_id"] == claim.key).any())
    glance, words = _one_row_per_claim(rows, references)
    body = [
        header,
        '<section id="summary"><h2>Paper claims at a glance</h2>'
        f'<p class="counts">{len(CLAIMS)} claims: {_counts(words)}</p>'
        f"<p>One row per registered claim: the verdict of the run that decides it (a reference run sized for it, "
        f"else this run), from its pre-registered primary analysis. Verdicts come from an interval over training "
        f"seeds against the smallest effect that matters (SESOI, half the paper's effect unless the registry "
        f"says otherwise): reproduced (the interval's near end is at or beyond the SESOI), contradicted (its far "
        f"end falls short of it), unresolved (it straddles it), not tested at this scale. The direction says "
        f"whether the interval excludes the null on the paper's side. The design figures are the seeds that would "
        f"reproduce the claim with 80 % power if the true effect is the paper's, and contradict it if the effect "
        f"is nil, at the upper 80 % limit of the observed between-seed spread (– where a figure has no meaning: "
        f"no paper value, a null inside an equivalence region, or no spread yet). A claim over several parts "
        f"says whether it must hold in every part (universal: reproduced only when every part is) or in some "
        f"(existential: Holm across the parts).</p>"
        + glance
        + f"<h3>This run's rows</h3><p>{measured} of {len(CLAIMS)} registered claims measured by this run. A "
        f"claim judged over readings, contexts or experiments has a row per part at its Holm level and a primary "
        f"row; secondary rows never decide a claim. Each row links to the figures and tables that measure it; "
        f"“how it is judged” opens the rule and this run's details.</p>"
        + _summary(rows, present, references)
        + _checks(results)
        + "</section>",
    ]
    for key, title, figures, prefix in SECTIONS:
        if key == ADVICE_SECTION[0]:
            body.append(advice_section(references))
            continue
        parts = [
            page.figure(FIGURES[stem].path(results), labels.title(stem), _shows(stem, rows))
            for stem in figures
            if ("fig", stem) in present
        ]
        if key == "training":
            parts.append(_training(results, report_dir))
        if key == "p1":
            parts.append(_regime_map(results))
        if prefix:
            parts += [
                page.collapsed_table(path, path.stem.replace("_", " "), report_dir)
                for path in sorted(TABLES_DIR.path(results).glob(f"{prefix}*.csv"))
            ]
        body.append(
            f'<section id="{key}"><h2>{html.escape(title)}</h2>'
            f"{''.join(parts) or '<p>Nothing from this part in this run.</p>'}</section>"
        )
    body.append(
        '<section id="reference"><h2>Reference runs</h2>' + references_html(references, report_dir) + "</section>"
    )
    document = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>growcert report</title>'
        f"<style>{page.STYLE}</style></head><body>{''.join(body)}<script>{page.SCRIPT}</script></body></html>"
    )
    write_text(out, document)
