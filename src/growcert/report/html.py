"""The self-contained HTML report: every table and figure present under `results/`.

Sections follow the papers (PAPERS.md): the trained grid, P1 (width and alignment
certificates), P2 (population-risk training), P3 (depth sufficiency), and a table of
each paper claim against this run's number. The claims are those of the registry
(`report/claims.py`); stages contribute rows for them as CSV files under
`results/claims/`, and a claim no stage measured is listed as such rather than left out.
Figures are embedded as base64 PNG so the file can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
from pathlib import Path

import pandas as pd

from growcert.provenance import code_hash, git_commit, versions
from growcert.report.claims import CLAIMS, ROW_COLUMNS
from growcert.report.training import final_rows

SECTIONS = [
    ("p1", "P1 — width scaling and the alignment certificate"),
    ("p2", "P2 — population-risk training"),
    ("p3", "P3 — depth sufficiency"),
]

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; }
th { background: #f1f1f1; }
td.holds-yes { background: #e3f5e1; } td.holds-no { background: #fbe3e1; } td.pending { color: #888; }
figure { margin: 1.5em 0; } figcaption { color: #555; font-size: 0.9em; }
img { max-width: 100%; } code { background: #f4f4f4; padding: 0 0.2em; }
"""


def _figure(path: Path) -> str:
    encoded = base64.b64encode(path.read_bytes()).decode()
    caption_file = path.with_suffix(".caption.txt")
    caption = caption_file.read_text().strip() if caption_file.is_file() else path.stem.replace("_", " ")
    return (f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{encoded}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _claims_table(results: Path) -> str:
    """Every registered claim (report/claims.py) in registry order, with the rows the stages wrote for it."""
    measured = pd.DataFrame(columns=ROW_COLUMNS)
    claim_files = sorted((results / "claims").glob("*.csv"))
    if claim_files:
        measured = pd.concat([pd.read_csv(path) for path in claim_files], ignore_index=True)
    rows = []
    for claim in CLAIMS.values():
        match = measured[measured["claim_id"] == claim.key]
        if match.empty:
            rows.append(f"<tr><td>{claim.paper}</td><td>{html.escape(claim.text)}</td>"
                        f"<td>{html.escape(claim.paper_value)}</td>"
                        f'<td class="pending" colspan="3">not measured in this run ({html.escape(claim.stage)} '
                        f"did not write it)</td></tr>")
            continue
        for _, row in match.iterrows():
            holds = str(row["holds"]).lower()
            css = "holds-yes" if holds in ("true", "yes") else "holds-no" if holds in ("false", "no") else ""
            rows.append(f"<tr><td>{claim.paper}</td><td>{html.escape(row['claim'])}</td>"
                        f"<td>{html.escape(claim.paper_value)}</td>"
                        f"<td>{html.escape(str(row['this_run']))}</td><td class=\"{css}\">{html.escape(holds)}</td>"
                        f"<td>{html.escape(str(row['note']) if pd.notna(row['note']) else '')}</td></tr>")
    # Rows whose claim_id the registry does not know (a stale or hand-written file) are shown, marked, last.
    for _, row in measured[~measured["claim_id"].isin(list(CLAIMS))].iterrows():
        rows.append(f"<tr><td>{html.escape(str(row['paper']))}</td><td>{html.escape(str(row['claim']))} "
                    f"<em>(claim_id {html.escape(str(row['claim_id']))} is not in the registry)</em></td>"
                    f"<td>{html.escape(str(row['paper_value']))}</td><td>{html.escape(str(row['this_run']))}</td>"
                    f"<td>{html.escape(str(row['holds']).lower())}</td>"
                    f"<td>{html.escape(str(row['note']) if pd.notna(row['note']) else '')}</td></tr>")
    return ("<table><tr><th>paper</th><th>claim</th><th>paper's value</th><th>this run</th><th>holds</th>"
            "<th>note</th></tr>" + "".join(rows) + "</table>")


def _training_section(results: Path) -> str:
    parts = ["<h2>Trained grid</h2>"]
    table_path = results / "stats" / "training.csv"
    if not table_path.is_file():
        return parts[0] + "<p>No training table yet.</p>"
    final = final_rows(pd.read_csv(table_path))
    parts.append(f"<p>{len(final)} models; held-out metrics at the last step of each run "
                 f"(budget identical across widths within a grid).</p>")
    figure = results / "figures" / "training_grid.png"
    if figure.is_file():
        parts.append(_figure(figure))
    shown = final[["family", "dataset", "width", "depth", "seed", "num_parameters", "step", "train_loss",
                   "test_loss", "test_acc", "seconds_per_step"]]
    parts.append(shown.to_html(index=False, float_format=lambda value: f"{value:.4g}", border=0))
    return "".join(parts)


def _table(path: Path, max_rows: int = 60) -> str:
    """A small summary table (results/tables/*.csv) as HTML, with its file name as caption."""
    table = pd.read_csv(path)
    note = f" (first {max_rows} of {len(table)} rows)" if len(table) > max_rows else ""
    return (f"<h3>{html.escape(path.stem.replace('_', ' '))}{note}</h3>"
            + table.head(max_rows).to_html(index=False, float_format=lambda value: f"{value:.4g}", border=0, na_rep="—"))


def _paper_section(results: Path, prefix: str, title: str) -> str:
    figures = sorted((results / "figures").glob(f"{prefix}_*.png"))
    tables = sorted((results / "tables").glob(f"{prefix}_*.csv"))
    body = "".join(_figure(path) for path in figures) + "".join(_table(path) for path in tables)
    return f"<h2>{html.escape(title)}</h2>{body or '<p>No figures from this part yet.</p>'}"


def build_report(results: str | Path, out: str | Path) -> None:
    results, out = Path(results), Path(out)
    if not results.is_dir():
        raise FileNotFoundError(f"results folder {results}: no such folder")
    version_text = ", ".join(f"{name} {value}" for name, value in versions().items())
    header = (f"<h1>growcert report</h1><p>Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC "
              f"from <code>{html.escape(str(results))}</code>; code hash <code>{code_hash()}</code>, "
              f"git commit <code>{git_commit() or 'none'}</code>; {html.escape(version_text)}.</p>")
    body = [header, "<h2>Paper claims vs this run</h2>", _claims_table(results), _training_section(results)]
    body += [_paper_section(results, prefix, title) for prefix, title in SECTIONS]
    document = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>growcert report</title>"
                f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>")
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(f".{out.name}.partial")
    temporary.write_text(document, encoding="utf-8")
    temporary.replace(out)
