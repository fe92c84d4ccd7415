"""The report's "Reference runs" section: long runs kept in the repository, shown beside the default run.

A reference run (configs/<name>.yaml through `growcert reference export <name>` -> docs/reference-results/<name>/,
growcert.reference_runs) is a folder holding its provenance record, artifacts.PROVENANCE (date, commit, command,
optionally `table`: what its reference table holds, and `why`), its reference table, artifacts.REFERENCE_TABLE (its
main results), optionally calibration.csv, README.md (its last heading is the question the run answers, the "- "
lines under it the verdicts) and PNG figures. Each folder becomes one subsection labelled as a reference run with its
date and commit, so that nobody mistakes it for the numbers of the run the report was built from.

The folder is an argument (`growcert report --references`; the workflow passes the repository's
docs/reference-results): the package does not ship the runs, and without a folder the report says so.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

from growcert.pipeline.artifacts import CALIBRATION, CLAIM_ROWS, PROVENANCE, README, REFERENCE_RUNS, REFERENCE_TABLE
from growcert.report import page


def default_references(cwd: Path | None = None) -> Path | None:
    """docs/reference-results under the working directory (the repository root, where the workflow runs), or None."""
    folder = REFERENCE_RUNS.path(cwd or Path.cwd())
    return folder if folder.is_dir() else None


def reference_folders(root: Path | None) -> list[Path]:
    """Sub-folders of `root` that hold a reference run (artifacts.PROVENANCE and REFERENCE_TABLE); none when root
    is None."""
    if root is None or not root.is_dir():
        return []
    return sorted(
        folder
        for folder in root.iterdir()
        if PROVENANCE.path(folder).is_file() and REFERENCE_TABLE.path(folder).is_file()
    )


def _verdicts(readme: Path) -> tuple[str, list[str]]:
    """The README's last heading (the question the run answers) and the bullet lines under it (its verdicts)."""
    if not readme.is_file():
        return "", []
    lines = readme.read_text(encoding="utf-8").splitlines()
    last = max((index for index, line in enumerate(lines) if line.startswith("#")), default=-1)
    heading = lines[last].lstrip("#").strip() if last >= 0 else ""
    return heading, [line[2:] for line in lines[last + 1 :] if line.startswith("- ")]


def reference_section(folder: Path, report_dir: Path) -> str:
    """One reference run as HTML: label, date, commit, command, verdicts, tables and figures."""
    record = json.loads(PROVENANCE.path(folder).read_text(encoding="utf-8"))
    date, commit = record.get("date", "undated"), record.get("commit") or "no commit recorded"
    question, lines = _verdicts(README.path(folder))
    verdicts = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    parts = [
        f'<h3 id="reference-{html.escape(folder.name)}">Reference run: {html.escape(folder.name)}</h3>',
        f'<p class="reference"><b>A reference run, not this pipeline run</b>: run on {html.escape(date)} at '
        f"git commit <code>{html.escape(commit)}</code>, kept in <code>{html.escape(str(folder.name))}/"
        f"</code> of {REFERENCE_RUNS.template}. Command: <code>{html.escape(record.get('command', '?'))}</code>.",
        f" {html.escape(record['why'])}." if record.get("why") else "",
        "</p>",
    ]
    if verdicts:
        parts.append(f"<p>{html.escape(question)}</p><ul>{verdicts}</ul>")
    parts.append(
        page.collapsed_table(
            REFERENCE_TABLE.path(folder), f"{folder.name}: {record.get('table', 'results')}", report_dir, open_=True
        )
    )
    if CALIBRATION.path(folder).is_file():
        parts.append(page.collapsed_table(CALIBRATION.path(folder), f"{folder.name}: calibration", report_dir))
    for image in sorted(folder.glob("*.png")):
        parts.append(page.figure(image, f"{folder.name}: {image.stem.replace('_', ' ')} (reference run, {date})"))
    return "".join(parts)


def reference_verdicts(root: Path | None, name: str, claim_id: str) -> dict[str, int] | None:
    """How many of reference run `name`'s claim rows (artifacts.CLAIM_ROWS) got each verdict, for `claim_id` (or for
    every row when the run judges the claim under its own ids, e.g. the regime map's per-context rows);
    None when the run is not kept under `root`, {} when it has no claim rows yet."""
    if root is None or (folder := root / name) not in reference_folders(root):
        return None
    path = CLAIM_ROWS.path(folder)
    if not path.is_file():
        return {}
    rows = pd.read_csv(path)
    if "verdict" not in rows.columns or rows.empty:
        return {}
    own = rows[rows["claim_id"] == claim_id]
    return (own if len(own) else rows)["verdict"].value_counts().to_dict()


def reference_claim_word(root: Path | None, name: str, claim_id: str) -> str | None:
    """The word reference run `name` gives claim `claim_id`: the verdict of its primary row of that claim (the last
    one, as `html.deciding_row` reads it); None when the run is not kept, has no claim rows, or has no primary row of
    the claim (a run whose rows of it are all secondary, or that judges it under its own ids)."""
    rows = reference_claim_rows(root, name)
    if rows is None or "role" not in rows.columns:
        return None
    primary = rows[(rows["claim_id"] == claim_id) & (rows["role"] == "primary")]
    return str(primary["verdict"].iloc[-1]) if len(primary) else None


def reference_claim_rows(root: Path | None, name: str) -> pd.DataFrame | None:
    """Reference run `name`'s claim rows (artifacts.CLAIM_ROWS); None when the run is not kept under `root` or has
    none."""
    if root is None or (folder := root / name) not in reference_folders(root) or not CLAIM_ROWS.path(folder).is_file():
        return None
    return pd.read_csv(CLAIM_ROWS.path(folder))


def references_html(root: Path | None, report_dir: Path) -> str:
    """Every reference run under `root`, or a line saying there is none."""
    folders = reference_folders(root)
    if root is None:
        return (
            "<p>No reference runs: this report was built without a reference-results folder "
            f"(<code>growcert report --references</code>; the repository keeps them in "
            f"{REFERENCE_RUNS.template}).</p>"
        )
    if not folders:
        return f"<p>No reference runs under <code>{html.escape(str(root))}</code>.</p>"
    return "".join(reference_section(folder, report_dir) for folder in folders)
