"""A reference run's README.md: written by `growcert reference export` from the one template
growcert/resources/reference/README.md.tmpl (string.Template), and its verdict lines rewritten by `growcert reference
rejudge`.

The README's last heading is the question the run answers and the "- " lines under it its verdicts, one per claim
row (artifacts.CLAIM_ROWS, `verdict_lines`); the report shows them (growcert.report.reference). What a person wrote
about the run (its design, what the numbers show, what it gives up) lives in the folder's notes.md, which an export
keeps and puts in the README before the verdicts.
"""

from __future__ import annotations

import string
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from growcert.pipeline.artifacts import CLAIM_ROWS, README, REFERENCE_TABLE
from growcert.referee.rows import DESIGN_DTYPES
from growcert.referee.verdicts import percent

TEMPLATE = "reference/README.md.tmpl"  # under growcert/resources
NOTES_FILE = "notes.md"  # a person's text about the run, kept across exports
BENCHMARK_INTERVAL_S = 30  # how often Snakemake's `benchmark:` samples a job's CPU time (snakemake.benchmark)


def number(value: Any) -> str:
    """A claim row's estimate or bound as text: four significant digits, signed; "–" for none."""
    return f"{float(value):+.4g}" if pd.notna(value) and value != "" else "–"


def verdict_lines(claims: pd.DataFrame) -> list[str]:
    """One line per claim row: the claim and its role, the verdict word, the estimate with its interval, level and
    seeds, the paper's effect and SESOI, the direction where the row has one, and why (the design figures among
    it)."""
    lines = []
    for row in claims.itertuples():
        interval = f" [{number(row.low)}, {number(row.high)}]" if pd.notna(row.low) else ""
        seeds = f"{int(row.seeds)} seeds" if pd.notna(row.seeds) else "no seeds"
        direction = f"; direction {row.direction}" if isinstance(row.direction, str) and row.direction else ""
        lines.append(
            f"- {row.claim} [{row.role}]: **{row.verdict}**: {number(row.estimate)}{interval} "
            f"({percent(row.level)}, {seeds}) against the paper's {row.paper_effect} (SESOI {row.sesoi})"
            f"{direction}: {row.why}"
        )
    return lines or ["- no claim row judged yet"]


def read_claims(folder: Path) -> pd.DataFrame:
    """`folder`'s claim rows (artifacts.CLAIM_ROWS) with the design columns as text ("108", "> 10,000")."""
    return pd.read_csv(CLAIM_ROWS.path(folder), dtype=DESIGN_DTYPES)


def cost_text(record: dict[str, Any]) -> str:
    """The run's cost from its provenance: CPU-hours over jobs (Snakemake's benchmark files), per rule, and the peak
    disk where it was recorded."""
    cost = record.get("cost") or {}
    per_rule = "; ".join(
        f"{row['rule']} {row['jobs']} jobs, {row['cpu_s'] / 60:.1f} CPU-min" for row in cost.get("per_rule", [])
    )
    disk = f"peak disk {cost['peak_disk_gb']} GB" if cost.get("peak_disk_gb") is not None else "peak disk not recorded"
    return (
        f"{cost.get('cpu_hours')} CPU-hours over {cost.get('jobs')} jobs ({cost.get('job_wall_hours')} job "
        f"wall-hours; Snakemake's benchmark files, which sample a job's CPU time every {BENCHMARK_INTERVAL_S} s "
        f"and miss its last interval: a lower bound, and the wall-hours of one-thread jobs an upper one), {disk}."
        + (f" Per rule: {per_rule}." if per_rule else "")
    )


NOT_RECORDED = {"numerics": "native", "cpu_model": None, "cpu_capability": None}  # a unit made before they were kept


def numerics_text(record: dict[str, Any]) -> str:
    """Under which numerics and on which CPU the run's units were made (the export's `numerics` groups; a run
    exported before growcert recorded them: native, CPU not recorded), docs/science.md, "Reproducing on another
    machine"."""
    groups = record.get("numerics") or [{**NOT_RECORDED, "units": None}]
    parts = []
    for group in groups:
        count = f"{group['units']} units" if group.get("units") is not None else "every unit"
        if group.get("cpu_model") is None:
            parts.append(
                f"{count} under {group['numerics']} numerics, made before growcert recorded them (CPU model "
                "not recorded): their per-seed numbers are that machine's own, and a rerun on another CPU can "
                "differ in the last bits (and, through grokking, in steps)"
            )
        else:
            parts.append(
                f"{count} under {group['numerics']} numerics on {group['cpu_model']} (torch's "
                f"{group['cpu_capability']} kernels)"
            )
    return "Numerics: " + "; ".join(parts) + '. See docs/science.md, "Reproducing on another machine".'


def write_readme(folder: Path, run, record: dict[str, Any]) -> None:
    """README.md of an exported run from the template: title, provenance, the reproduce commands, cost, its
    reference table (artifacts.REFERENCE_TABLE) as a table, the folder's notes.md where it has one, and the
    verdicts."""
    template = string.Template(resources.files("growcert").joinpath("resources", TEMPLATE).read_text("utf-8"))
    table = pd.read_csv(REFERENCE_TABLE.path(folder))
    body = [
        f"## {run.table[0].upper()}{run.table[1:]} ({REFERENCE_TABLE.name})",
        "",
        table.to_markdown(index=False, floatfmt=".4g") if len(table) else "nothing finished yet",
    ]
    text = template.substitute(
        title=run.title,
        date=record["date"],
        commit=record["commit"],
        configs=", ".join(f"`{name}`" for name in record["config_files"]),
        reproduce="\n".join(f"    {command}" for command in record["commands"]),
        cpus=record["machine"].get("cpus"),
        cost=cost_text(record),
        numerics=numerics_text(record),
        body="\n".join(body),
        question=run.question,
        notes=notes.read_text(encoding="utf-8").strip() + "\n\n" if (notes := folder / NOTES_FILE).is_file() else "",
        verdicts="\n".join(verdict_lines(read_claims(folder))),
    )
    README.path(folder).write_text(text, encoding="utf-8")


def rewrite_verdicts(folder: Path, run, rejudged: dict[str, Any]) -> None:
    """Replace the verdict lines of `folder`'s README (the "- " lines under its last heading) with those of its
    claim rows (artifacts.CLAIM_ROWS), saying when, at which commit and by which command they were judged again; the
    rest is kept."""
    readme = README.path(folder)
    lines = readme.read_text(encoding="utf-8").splitlines() if readme.is_file() else [f"# {run.title}", ""]
    headings = [index for index, line in enumerate(lines) if line.startswith("#")]
    start = headings[-1] if headings else len(lines)
    rest = [line for line in lines[start + 1 :] if not line.startswith("- ") and not line.startswith("Judged again")]
    while rest and not rest[0].strip():
        rest.pop(0)
    note = (
        f"Judged again on {rejudged['date']} at commit `{rejudged['commit']}` from its own {run.judged_from()} (no "
        f"retraining), by the referee's rule of `growcert.referee.verdicts`: `{rejudged['command']}`."
    )
    kept = lines[:start] + [lines[start] if headings else f"## {run.question}", "", note, ""]
    text = "\n".join(kept + verdict_lines(read_claims(folder)) + ([""] + rest if rest else [])) + "\n"
    readme.write_text(text, encoding="utf-8")
