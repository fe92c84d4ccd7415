"""What the reference-run scripts share: a Snakemake sweep run in the background over hours and sessions,
with the disk use of its results folder sampled alongside, and its measured cost.

`run_sweep` appends `<unix time> <commit>` to <results>/sweep_parts.log and samples the folder's size
every SAMPLE_SECONDS into <results>/disk_use.log; `sweep_cost` reads the Snakemake benchmark files,
those two logs and the runs' own provenance into the cost record of a reference run's provenance.json.
`sweep_config` is the config a sweep's jobs get (config.yaml with the sweep's file merged over it) and
`store_tables` the per-store tables (stats/alignment, stats/misalignment) of its runs' last checkpoints, for a
sweep that asks Snakemake for them by path; `reproduction_check` compares the rows of a retrained run with a
committed reference run's (value for value, and within a relative tolerance where the caller gives one) before a
joined run reuses the committed seeds.
Used by benchmarks/p1_regime_reference.py, benchmarks/p3_depth_reference.py, benchmarks/p2_small_reference.py and
benchmarks/p1_interventions_reference.py; benchmarks/grokking_late_reference.py samples its work folder with
`disk_sampled` and reads it back with `disk_samples`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

DISK_LOG = "disk_use.log"
PARTS_LOG = "sweep_parts.log"  # `<unix time> <commit>` per --run: a sweep of hours spans sessions and commits
SAMPLE_SECONDS = 30
GAP_SECONDS = 600  # disk samples further apart than this belong to different parts of the sweep


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under `folder` (files vanishing while walked, e.g. removed stores, are skipped)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
    return total


def sample_disk(results: Path, stop: threading.Event) -> None:
    """Append `<unix time> <bytes>` of `results` to its disk log every SAMPLE_SECONDS until `stop` is set."""
    with open(results / DISK_LOG, "a", encoding="utf-8") as log:
        while True:
            log.write(f"{int(time.time())} {folder_bytes(results)}\n")
            log.flush()
            if stop.wait(SAMPLE_SECONDS):
                return


@contextlib.contextmanager
def disk_sampled(folder: Path):
    """While the block runs, `sample_disk` appends `folder`'s size to its disk log (a first sample at once)."""
    folder.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    sampler = threading.Thread(target=sample_disk, args=(folder, stop), daemon=True)
    sampler.start()
    try:
        yield
    finally:
        stop.set()
        sampler.join()


def run_sweep(results: Path, cores: int, config: str, targets: tuple[str, ...] | list[str]) -> int:
    """The sweep (Snakemake `targets`, rule names or paths, over `config`), with the disk sampled alongside; returns
    Snakemake's exit status. Each call appends its start and commit to <results>/sweep_parts.log."""
    from growcert.provenance import git_commit

    results.mkdir(parents=True, exist_ok=True)
    with open(results / PARTS_LOG, "a", encoding="utf-8") as parts:
        parts.write(f"{int(time.time())} {git_commit() or 'unknown'}\n")
    # mtime only: a sweep of hours runs over several sessions and commits, and a finished job is kept even when
    # a later commit changes a rule's parameters or code (each artifact records its own settings and code hash)
    command = [os.path.join(os.path.dirname(sys.executable), "snakemake"), *targets, "--cores", str(cores),
               "--rerun-incomplete", "--rerun-triggers", "mtime", "--configfile", config, "--config",
               f"results={results}"]
    with disk_sampled(results):
        return subprocess.call(command)


def sweep_cost(results: Path) -> dict:
    """CPU and wall seconds per rule (Snakemake benchmark files) and the peak disk use (the disk log)."""
    rows = []
    for tsv in (results / "benchmarks").rglob("*.tsv"):
        frame = pd.read_csv(tsv, sep="\t")
        rows.append({"rule": tsv.relative_to(results / "benchmarks").parts[0].removesuffix(".tsv"),
                     "wall_s": float(frame["s"].iloc[-1]), "cpu_s": float(frame["cpu_time"].iloc[-1])})
    jobs = pd.DataFrame(rows, columns=["rule", "wall_s", "cpu_s"])
    per_rule = jobs.groupby("rule").agg(jobs=("wall_s", "size"), wall_s=("wall_s", "sum"), cpu_s=("cpu_s", "sum"))
    parts_log = results / PARTS_LOG
    samples = disk_samples(results)
    parts = [line.split() for line in parts_log.read_text().splitlines() if line.strip()] if parts_log.is_file() else []
    return {"jobs": int(len(jobs)), "cpu_hours": round(jobs["cpu_s"].sum() / 3600, 2),
            "job_wall_hours": round(jobs["wall_s"].sum() / 3600, 2),
            "peak_disk_gb": round(max(size for _, size in samples) / 1e9, 2) if samples else None,
            "disk_samples": len(samples), "disk_by_part": disk_by_part(samples),
            "parts": [{"started": utc(int(started)), "commit": commit} for started, commit in parts],
            "trained_at": trained_at(results),
            "per_rule": per_rule.round(1).reset_index().to_dict(orient="records")}


def trained_at(results: Path) -> list[dict]:
    """How many of the sweep's runs each (commit, code hash) trained, from the runs' own provenance."""
    records = [json.loads(path.read_text())["provenance"] for path in (results / "models").rglob("metrics.json")]
    counts = pd.DataFrame([{"commit": r.get("git_commit"), "code_hash": r.get("code_hash")} for r in records],
                          columns=["commit", "code_hash"]).value_counts(dropna=False)
    return [{"commit": commit, "code_hash": code, "runs": int(n)} for (commit, code), n in counts.items()]


def utc(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def disk_samples(folder: Path) -> list[tuple[int, int]]:
    """The (unix time, bytes) samples of `folder`'s disk log; none when it has no log."""
    log = folder / DISK_LOG
    return [tuple(map(int, line.split())) for line in log.read_text().splitlines() if line.strip()] \
        if log.is_file() else []


def disk_by_part(samples: list[tuple[int, int]]) -> list[dict]:
    """The disk log cut where the sampling paused (a stopped part of the sweep): each part's span and peak."""
    parts: list[list[tuple[int, int]]] = []
    for sample in samples:
        if not parts or sample[0] - parts[-1][-1][0] > GAP_SECONDS:
            parts.append([])
        parts[-1].append(sample)
    return [{"from": utc(part[0][0]), "to": utc(part[-1][0]), "peak_disk_gb": round(max(s for _, s in part) / 1e9, 2)}
            for part in parts]


def require_finished(results: Path, sources) -> None:
    """Exit 2 with one line naming the first of `sources` (paths under `results`) that the sweep has not written."""
    missing = [source for source in sources if not (results / source).is_file()]
    if missing:
        print(f"results folder {results}: the sweep has not finished ({missing[0]} is missing); run with --run to "
              "resume it", file=sys.stderr)
        sys.exit(2)


def sweep_config(config_file: str | Path, base: str | Path = "config.yaml") -> dict:
    """The config a sweep's jobs get: `base` (the Snakefile's configfile) with `config_file` merged over it as
    `snakemake --configfile` merges them (mappings merged, lists such as grids replaced), the schema's defaults
    filled in and validated as the pipeline validates it (growcert.plan.validate_config). Paths are
    relative to the repository root."""
    import yaml

    from growcert.plan import validate_config

    def update(into: dict, other: dict) -> dict:
        for key, value in other.items():
            into[key] = update(into.get(key, {}), value) if isinstance(value, dict) and isinstance(into.get(key), dict) \
                else value
        return into

    config: dict = {}
    for name in (base, config_file):
        update(config, yaml.safe_load(Path(name).read_text(encoding="utf-8")) or {})
    return validate_config(config)


def store_tables(results: Path, config: dict, kind: str, skip=frozenset()) -> list[str]:
    """The `kind` table (alignment or misalignment: growcert.pipeline.artifacts.ALIGNMENT, MISALIGNMENT) of the last
    checkpoint of every run `config` trains, as paths under `results` that Snakemake can be asked for; runs whose
    (width, seed, context) is in `skip` are left out. tests/test_p1_interventions_reference.py checks with a dry run
    that Snakemake plans them."""
    from growcert.pipeline import artifacts
    from growcert.plan.grids import run_steps, run_wildcards, training_runs

    table = {"alignment": artifacts.ALIGNMENT, "misalignment": artifacts.MISALIGNMENT}[kind]
    return [table.path(str(results), step=run_steps(config, run)[-1], **run_wildcards(run))
            for run in training_runs(config) if (run.width, run.seed, run.context) not in skip]


def reproduction_check(new: pd.DataFrame, committed: pd.DataFrame, keys: list[str], run_keys: list[str],
                       rtol: float = 0.0) -> dict:
    """Whether the rows of `new` that `committed` also holds (the same `keys`) are the same: `runs` (the retrained
    runs, by `run_keys`), `rows` and `columns` compared (every numeric column both have, of the same dtype),
    `identical` (value for value, NaN equal to NaN; False when no row is shared), `differing_columns`, the largest
    relative difference of each (`largest_relative_difference`), and `reusable`: identical, or, with `rtol` > 0,
    every value within `rtol` of the committed one relative to its size (NaN where both are NaN)."""
    both = new.merge(committed, on=keys, suffixes=("", "_committed"))
    numeric = [c for c in new.columns if c not in keys and pd.api.types.is_numeric_dtype(new[c])
               and f"{c}_committed" in both.columns]
    differing = [c for c in numeric if not both[c].equals(both[f"{c}_committed"])]
    largest = {c: _largest_relative_difference(both[c], both[f"{c}_committed"]) for c in differing}
    runs = both[run_keys].drop_duplicates().to_dict(orient="records")
    identical = bool(len(both)) and not differing
    close = bool(len(both)) and all(value <= rtol for value in largest.values())
    return {"runs": [{k: _plain(v) for k, v in run.items()} for run in runs], "rows": int(len(both)),
            "columns": len(numeric), "identical": identical, "differing_columns": differing,
            "largest_relative_difference": largest, "rtol": rtol, "reusable": identical or (rtol > 0 and close)}


def _largest_relative_difference(values: pd.Series, committed: pd.Series) -> float:
    """max |a - b| / |b| over the rows (0 where both are equal, zeros and NaN pairs among them; inf where one
    side alone is NaN or b is 0 and a is not)."""
    a, b = values.astype(float).to_numpy(), committed.astype(float).to_numpy()
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(same, 0.0, np.abs(a - b) / np.abs(b))
    relative = np.where(np.isnan(relative), np.inf, relative)
    return float(relative.max()) if len(relative) else 0.0


def _plain(value):
    """A run key as JSON keeps it: whole numbers as int, the rest as they are."""
    try:
        return int(value) if float(value).is_integer() else value
    except (TypeError, ValueError):
        return value


def reference_arguments(doc: str, name: str, config: str, config_help: str, join_help: str | None = None
                        ) -> argparse.ArgumentParser:
    """The command line every sweep-backed reference runner shares (--results, --out, --cores, --config, --run,
    --rejudge, and --join where the runner can judge new seeds with a committed run's)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--results", default=f"results-{name}", help="the sweep's results folder")
    parser.add_argument("--out", default=f"docs/reference-results/{name}")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--config", default=config, help=f"the sweep's config file ({config_help})")
    parser.add_argument("--run", action="store_true", help="run (or resume) the sweep before exporting it")
    parser.add_argument("--rejudge", action="store_true", help="judge the committed run in --out again, no retraining")
    if join_help:
        parser.add_argument("--join", default=None, help=join_help)
    return parser


def reference_command(script: str, args: argparse.Namespace, config: str) -> str:
    """The command that reproduces a reference runner's sweep, for its README and provenance."""
    runner = Path("benchmarks") / Path(script).name  # the command runs from the repository's root
    return (f"PYTHONPATH=src nice -n 19 .venv/bin/python {runner} --run --cores {args.cores} "
            + (f"--config {args.config} " if args.config != config else "")
            + (f"--join {args.join} " if getattr(args, "join", None) else "")
            + f"--results {args.results} --out {args.out}")


def rejudged_record(script: str, out: Path) -> dict:
    """When, at which commit and by which command a kept run in `out` was judged again from its own tables."""
    from growcert.provenance import git_commit

    runner = Path("benchmarks") / Path(script).name
    return {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
            "command": f"PYTHONPATH=src .venv/bin/python {runner} --rejudge --out {out}"}
