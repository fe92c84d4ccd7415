"""The pieces of results/report.html: style, the table-sorting script, figures with captions, collapsed tables.

Everything is inline (CSS, a few lines of JavaScript, figures as base64 PNG), so the report opens offline
and can be mailed alone. Layout rules that keep every element inside a 1280 px viewport: images scale to
the column, every table sits in its own horizontally scrolling box, long cell text wraps.

Figure captions are the workflow's own caption files, src/growcert/resources/report/<caption>.rst of the figure
registry, read as package data (the same text `snakemake --report` shows; the P2 task figures' one file has a
branch per task), read as plain paragraphs with ``code``, *emphasis* and **bold**.
"""

from __future__ import annotations

import base64
import html
import os
import re
from importlib import resources
from pathlib import Path

import pandas as pd

from growcert.pipeline.artifacts import FIGURES
from growcert.report.labels import TASK_CAPTION, caption_stem, shown

CAPTIONS = Path(str(resources.files("growcert") / "resources" / "report"))  # the workflow's captions, package data
MAX_TABLE_ROWS = 500  # rows shown inline per table; the full CSV is linked

STYLE = """
* { box-sizing: border-box; }
body { font-family: system-ui, sans-serif; max-width: 1180px; margin: 0 auto; padding: 1em 1.5em; color: #222;
       line-height: 1.45; }
header { border-bottom: 2px solid #ddd; margin-bottom: 1em; }
header h1 { margin: 0.3em 0 0; }
header p { color: #555; font-size: 0.8em; overflow-wrap: anywhere; margin: 0.3em 0 0.6em; }
nav.toc { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 0.5em 1em; font-size: 0.9em; }
nav.toc ol { display: flex; flex-wrap: wrap; gap: 0 1.6em; margin: 0.2em 0; padding: 0; list-style-position: inside; }
h2 { border-bottom: 1px solid #eee; padding-bottom: 0.2em; margin-top: 1.6em; }
#summary h2 { margin-top: 0.8em; }
.scroll { overflow-x: auto; max-width: 100%; border: 1px solid #e3e3e3; }
table { border-collapse: collapse; font-size: 0.85em; }
#summary table { font-size: 0.8em; } #summary td { max-width: 26em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
td { overflow-wrap: anywhere; max-width: 34em; }
th { background: #f1f1f1; position: sticky; top: 0; }
table.sortable th { cursor: pointer; } table.sortable th::after { content: " ⇅"; color: #aaa; }
.verdict { font-weight: 600; white-space: nowrap; padding: 0.05em 0.4em; border-radius: 3px; }
.verdict.reproduced { background: #dff3dc; color: #1d5e17; }
.verdict.contradicted { background: #fbe0dd; color: #8a1c12; }
.verdict.unresolved { background: #fdf0c8; color: #6b4e00; } .verdict.not-tested { background: #eee; color: #555; }
.verdict.other { background: #eee; color: #555; } td.pending { color: #888; }
p.counts { font-size: 1.05em; } p.counts .count { margin-right: 0.8em; white-space: nowrap; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; height: auto; display: block; }
figcaption { color: #333; font-size: 0.9em; max-width: 62em; }
figcaption .shows { margin-top: 0.4em; padding-left: 0.6em; border-left: 3px solid #c9d9ef; }
details { margin: 0.8em 0; } summary { cursor: pointer; font-weight: 600; }
td details { margin: 0.1em 0 0; } td summary { font-weight: normal; color: #666; font-size: 0.9em; }
code { background: #f4f4f4; padding: 0 0.2em; overflow-wrap: anywhere; }
"""

# Click a header to sort its table (numbers numerically, the rest as text); click again to reverse.
SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0], column = th.cellIndex;
    var ascending = th.dataset.order !== "asc"; th.dataset.order = ascending ? "asc" : "desc";
    var rows = Array.from(body.rows), key = function (row) {
      var text = row.cells[column].textContent.trim(), number = parseFloat(text);
      return isNaN(number) ? text : number; };
    rows.sort(function (a, b) { var x = key(a), y = key(b);
      var order = (typeof x === typeof y) ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === "number" ? -1 : 1);
      return ascending ? order : -order; });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


def anchor(kind: str, stem: str) -> str:
    """The element id of a figure ('fig') or table ('table') in the report."""
    return f"{kind}-{re.sub(r'[^A-Za-z0-9_-]', '-', stem)}"


def inline_rst(text: str) -> str:
    """A caption file's text as HTML paragraphs: ``code``, **bold** and *emphasis*, nothing else."""
    paragraphs = [" ".join(part.split()) for part in re.split(r"\n\s*\n", text.strip()) if part.strip()]
    rendered = []
    for paragraph in paragraphs:
        escaped = html.escape(paragraph)
        escaped = re.sub(r"``(.+?)``", r"<code>\1</code>", escaped)
        escaped = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escaped)
        escaped = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<i>\1</i>", escaped)
        rendered.append(f"<p>{escaped}</p>")
    return "".join(rendered)


def task_branch(text: str, task: str) -> str:
    """The branch of a caption template written for one value of the `task` wildcard (the P2 experiment rule's
    captions: `{% if snakemake.wildcards.task == "grokking" %} ... {% elif ... %} ... {% endif %}`)."""
    parts = re.split(r'{%\s*(?:el)?if\s+snakemake\.wildcards\.task\s*==\s*"(\w+)"\s*%}|{%\s*endif\s*%}', text)
    branches = dict(zip(parts[1::2], parts[2::2]))
    return branches.get(task, "")


def caption(stem: str) -> str:
    """The caption of registered figure `stem` (its caption file; of a template, the branch for its task), or ""."""
    figure = FIGURES.get(stem)
    path = None if figure is None else CAPTIONS / f"{caption_stem(figure)}.rst"
    if path is None or not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8")
    entry = shown(figure)
    return inline_rst(task_branch(text, entry.subcategory) if entry.caption == TASK_CAPTION else text)


def figure(path: Path, title: str, shows: str = "") -> str:
    """An embedded figure with its caption (what is plotted, how to read it) and what this run shows."""
    encoded = base64.b64encode(path.read_bytes()).decode()
    shown = f'<div class="shows"><b>This run:</b> {shows}</div>' if shows else ""
    return (
        f'<figure id="{anchor("fig", path.stem)}"><img alt="{html.escape(title)}" '
        f'src="data:image/png;base64,{encoded}"><figcaption><b>{html.escape(title)}.</b> {caption(path.stem)}'
        f"{shown}</figcaption></figure>"
    )


def _cell(value) -> str:
    if isinstance(value, float):
        return "—" if pd.isna(value) else f"{value:.4g}"
    return "—" if value is None or (not isinstance(value, str) and pd.isna(value)) else html.escape(str(value))


def table_html(table: pd.DataFrame, sortable: bool = True) -> str:
    """`table` as an HTML table inside its own scrolling box."""
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in table.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{_cell(value)}</td>" for value in row) + "</tr>" for row in table.itertuples(index=False)
    )
    css = ' class="sortable"' if sortable else ""
    return f'<div class="scroll"><table{css}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'


def collapsed_table(path: Path, title: str, report_dir: Path, open_: bool = False) -> str:
    """A CSV under results/ as a collapsed, sortable table, with a link to the full file beside the report."""
    try:
        table = pd.read_csv(path)
    except pd.errors.EmptyDataError:  # a reference run whose first rows have not landed yet
        table = pd.DataFrame()
    shown = table.head(MAX_TABLE_ROWS)
    more = f", first {MAX_TABLE_ROWS} shown" if len(table) > MAX_TABLE_ROWS else ""
    link = os.path.relpath(path, report_dir)
    return (
        f'<details id="{anchor("table", path.stem)}"{" open" if open_ else ""}><summary>{html.escape(title)} '
        f'({len(table)} rows{more}) · <a href="{html.escape(link)}">full CSV</a></summary>'
        f"{table_html(shown)}</details>"
    )


def first_screen(report: str | Path, out: str | Path, width: int = 1280, height: int = 900) -> str:
    """Save the report's first screen as a PNG for a reader who wants the look before opening it: best effort,
    through Debian's headless Chromium when it is installed (the report itself never needs it). Returns a
    line for the log."""
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        return "no chromium on PATH: first-screen screenshot skipped (apt-get install chromium)"
    temporary = Path(out).with_name(f".{Path(out).name}.partial.png")
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--screenshot={temporary.resolve()}",
            Path(report).resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0 or not temporary.is_file():
        return f"chromium could not take the screenshot (exit {result.returncode}); skipped"
    temporary.replace(out)
    return f"first screen ({width}x{height}) -> {out}"
