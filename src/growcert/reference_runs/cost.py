"""What a reference run cost, from its results folder: CPU and wall seconds per rule from Snakemake's `benchmark:`
files (<results>/benchmarks/<rule>/...tsv, columns `s` and `cpu_time`), the peak disk where a disk log recorded
it (<results>/disk_use.log, `<unix time> <bytes>` a line), and which commit and code hash trained its runs (each
run's own metrics.json provenance).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pandas as pd

from growcert.pipeline.artifacts import MODELS, RUN_METRICS

DISK_LOG = "disk_use.log"


def utc(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def benchmark_jobs(benchmarks: Path) -> pd.DataFrame:
    """One row per benchmark file under `benchmarks`: its rule (the first folder), wall and CPU seconds (the file's
    last line: the attempt that finished the job)."""
    rows = []
    for tsv in sorted(benchmarks.rglob("*.tsv")):
        frame = pd.read_csv(tsv, sep="\t")
        rows.append(
            {
                "rule": tsv.relative_to(benchmarks).parts[0].removesuffix(".tsv"),
                "wall_s": float(frame["s"].iloc[-1]),
                "cpu_s": float(frame["cpu_time"].iloc[-1]),
            }
        )
    return pd.DataFrame(rows, columns=["rule", "wall_s", "cpu_s"])


def disk_samples(folder: Path) -> list[tuple[int, int]]:
    """The (unix time, bytes) samples of `folder`'s disk log; none when it has no log."""
    log = folder / DISK_LOG
    return (
        [tuple(map(int, line.split())) for line in log.read_text().splitlines() if line.strip()]
        if log.is_file()
        else []
    )


def trained_at(results: Path) -> list[dict[str, Any]]:
    """How many of the run's models each (commit, code hash) trained, from the models' own provenance."""
    records = [
        json.loads(path.read_text()).get("provenance", {}) for path in MODELS.path(results).rglob(RUN_METRICS.name)
    ]
    counts = pd.DataFrame(
        [{"commit": r.get("git_commit"), "code_hash": r.get("code_hash")} for r in records],
        columns=["commit", "code_hash"],
    ).value_counts(dropna=False)
    return [{"commit": commit, "code_hash": code, "runs": int(n)} for (commit, code), n in counts.items()]


def run_cost(results: Path, benchmarks: Path | None = None) -> dict[str, Any]:
    """CPU-hours and job wall-hours over every job (and per rule) from the benchmark files under `benchmarks`
    (default <results>/benchmarks), the peak disk of the disk log (None where none was recorded) and `trained_at`."""
    jobs = benchmark_jobs(benchmarks if benchmarks is not None else results / "benchmarks")
    per_rule = jobs.groupby("rule").agg(jobs=("wall_s", "size"), wall_s=("wall_s", "sum"), cpu_s=("cpu_s", "sum"))
    samples = disk_samples(results)
    return {
        "jobs": int(len(jobs)),
        "cpu_hours": round(float(jobs["cpu_s"].sum()) / 3600, 2),
        "job_wall_hours": round(float(jobs["wall_s"].sum()) / 3600, 2),
        "peak_disk_gb": round(max(size for _, size in samples) / 1e9, 2) if samples else None,
        "disk_samples": len(samples),
        "disk_from": utc(samples[0][0]) if samples else None,
        "disk_to": utc(samples[-1][0]) if samples else None,
        "trained_at": trained_at(results),
        "per_rule": per_rule.round(1).reset_index().to_dict(orient="records"),
    }
