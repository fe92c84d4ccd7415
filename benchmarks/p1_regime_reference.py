"""The P1 regime reference map (P1's fifth pilot; docs/science.md, "P1 regime map: matched budget and matched loss"): run configs/p1-regime.yaml and
keep its results under docs/reference-results/p1-regime/, where the report shows them as a reference run.

`--run` runs the sweep (Snakemake target summarize_regime, resumable: a rerun keeps every finished job)
while sampling the disk use of the results folder every 30 s into <results>/disk_use.log, so that the
peak over every resumed part of the sweep is known; each --run also appends its start and commit to
<results>/sweep_parts.log. Without `--run` it only exports a sweep that has
finished. The export holds:

- table.csv: the width trend per (comparison, context, progress) cell (tables/p1_regime_cells.csv);
- claims.csv: the two claim rows judged on the map (matched budget, matched held-out loss);
- budget.csv, loss.csv, matched.csv: growcert summarize-regime's tables; alignment.csv: the sweep's
  d_align rows; training.csv: its held-out loss history;
- the regime figures (figures/p1_regime_*.png);
- provenance.json: date, commit, command, the config file, versions, machine, and the sweep's cost
  (CPU time and wall time per rule from the Snakemake benchmark files, peak disk from the log);
- README.md: how to reproduce it, its cost, the seed spread, the cells, and the claim rows with their verdicts.

`--rejudge` judges a committed map again from its alignment.csv and training.csv, without retraining.

    PYTHONPATH=src .venv/bin/python benchmarks/p1_regime_reference.py --run --cores 2 \\
        --results results-p1-regime --out docs/reference-results/p1-regime
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path

import pandas as pd

import sweeps
from sweeps import require_finished, run_sweep, sweep_cost

CONFIG = "configs/p1-regime.yaml"
COPIED = {"table.csv": "tables/p1_regime_cells.csv", "claims.csv": "claims/p1_regime.csv",
          "budget.csv": "stats/p1_regime_budget.csv", "loss.csv": "stats/p1_regime_loss.csv",
          "matched.csv": "stats/p1_regime_matched.csv", "map.json": "stats/p1_regime_map.json",
          "training.csv": "stats/training.csv", "spread.csv": "stats/p1_regime_spread.csv"}


def claim_lines(claims: pd.DataFrame) -> list[str]:
    """One verdict line per claim row: comparison and scope, the verdict word, the estimate and why."""
    from growcert.report.verdicts import percent

    return [f"- {row.claim}: **{row.verdict}**: slope {row.estimate:+.2f} [{row.low:+.2f}, {row.high:+.2f}] "
            f"({percent(row.level)}, {row.seeds} seeds) against the paper's {row.paper_effect} (SESOI {row.sesoi}); "
            f"{row.role}; direction {row.direction}; {row.why}" for row in claims.itertuples()]


def copy_outputs(results: Path, out: Path) -> None:
    """The summarize-regime outputs of `results` (tables, claims, figures, d_align rows) into `out`."""
    require_finished(results, COPIED.values())
    out.mkdir(parents=True, exist_ok=True)
    for target, source in COPIED.items():
        shutil.copyfile(results / source, out / target)
    alignment = pd.read_csv(results / "stats" / "alignment.csv")
    alignment[alignment["context"].notna()].to_csv(out / "alignment.csv", index=False)
    for figure in sorted((results / "figures").glob("p1_regime_*.png")):
        shutil.copyfile(figure, out / figure.name)


def export(results: Path, out: Path, command: str, config: str = CONFIG) -> None:
    """Copy a finished sweep's tables and figures to `out`, with provenance and a README."""
    from growcert.provenance import git_commit, machine_record, versions

    copy_outputs(results, out)
    cost, coverage = sweep_cost(results), json.loads((results / COPIED["map.json"]).read_text())["coverage"]
    record = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "command": command, "table": "width trend per (comparison, context, progress, point, reduction) cell",
              "why": f"The P1 regime map over context, training progress and width ({coverage})",
              "config_file": config, "config": Path(config).read_text(encoding="utf-8"), "cost": cost,
              "versions": versions(), "machine": machine_record()}
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


def rejudge(out: Path) -> None:
    """Judge a committed map again from its own alignment.csv and training.csv (no retraining): summarize-regime
    into a temporary results folder, its outputs copied over the committed ones; the provenance keeps the
    sweep's record and adds when, at which commit and with which command it was re-judged."""
    import tempfile

    from growcert.report.regime import summarize_regime

    record = json.loads((out / "provenance.json").read_text())
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder)
        (results / "stats").mkdir()
        shutil.copyfile(out / "alignment.csv", results / "stats" / "alignment.csv")
        shutil.copyfile(out / "training.csv", results / "stats" / "training.csv")
        print(summarize_regime(results / "stats" / "alignment.csv", results / "stats" / "training.csv",
                               results / "stats", results / COPIED["table.csv"], results / COPIED["claims.csv"],
                               results / COPIED["map.json"], results / "figures"))
        copy_outputs(results, out)
    record["rejudged"] = sweeps.rejudged_record(__file__, out)
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


REPRODUCTION_KEYS = ["family", "dataset", "width", "depth", "seed", "step", "context", "point", "reduction", "pool"]


def reproduction_check(new: pd.DataFrame, committed: pd.DataFrame) -> dict:
    """Whether the runs of `new` that the committed map also holds (the same model, step, point, reduction and
    pool) gave the same alignment rows, value for value (every numeric column, NaN equal to NaN)."""
    both = new.merge(committed, on=REPRODUCTION_KEYS, suffixes=("", "_map"))
    numeric = [c for c in new.columns if c not in REPRODUCTION_KEYS and pd.api.types.is_numeric_dtype(new[c])
               and f"{c}_map" in both.columns]
    differing = [c for c in numeric if not both[c].equals(both[f"{c}_map"])]
    runs = both[["width", "seed", "context"]].drop_duplicates().to_dict(orient="records")
    return {"runs": [{k: int(v) for k, v in run.items()} for run in runs], "rows": int(len(both)),
            "columns": len(numeric), "identical": bool(len(both)) and not differing, "differing_columns": differing}


def export_joined(results: Path, out: Path, command: str, config: str, committed: Path) -> None:
    """The sweep's new seeds joined to the committed map's seeds at the same contexts and steps, judged together.

    The sweep also retrains one of the map's runs (configs/p1-seeds.yaml); the map's rows are used only if that
    run reproduces them exactly. Without that, the new seeds are judged alone and the README says why."""
    import tempfile

    from growcert.provenance import git_commit, machine_record, versions
    from growcert.report.regime import summarize_regime

    require_finished(results, ("stats/alignment.csv", "stats/training.csv"))
    new_alignment = pd.read_csv(results / "stats" / "alignment.csv")
    new_alignment = new_alignment[new_alignment["context"].notna()]
    new_training = pd.read_csv(results / "stats" / "training.csv")
    map_alignment, map_training = pd.read_csv(committed / "alignment.csv"), pd.read_csv(committed / "training.csv")
    check = reproduction_check(new_alignment, map_alignment)
    contexts, steps = sorted(new_alignment["context"].unique()), sorted(new_alignment["step"].unique())
    def new_runs(table: pd.DataFrame) -> pd.DataFrame:  # the sweep's own runs, without the retrained map runs
        retrained = {(run["width"], run["seed"], run["context"]) for run in check["runs"]}
        return table[[run not in retrained for run in zip(table["width"], table["seed"], table["context"])]]

    alignment, training = new_runs(new_alignment), new_runs(new_training)
    if check["identical"]:
        alignment = pd.concat([map_alignment[map_alignment["context"].isin(contexts) & map_alignment["step"].isin(steps)],
                               alignment], ignore_index=True)
        training = pd.concat([map_training[map_training["context"].isin(contexts) & (map_training["step"] <= max(steps))],
                              training], ignore_index=True)
    with tempfile.TemporaryDirectory() as folder:
        joined = Path(folder)
        (joined / "stats").mkdir()
        alignment.to_csv(joined / "stats" / "alignment.csv", index=False)
        training.to_csv(joined / "stats" / "training.csv", index=False)
        print(summarize_regime(joined / "stats" / "alignment.csv", joined / "stats" / "training.csv", joined / "stats",
                               joined / COPIED["table.csv"], joined / COPIED["claims.csv"], joined / COPIED["map.json"],
                               joined / "figures"))
        copy_outputs(joined, out)
    record = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "command": command, "table": "width trend per (comparison, context, progress, point, reduction) cell",
              "why": f"P1's decisive cells with {alignment['seed'].nunique()} seeds per cell",
              "config_file": config, "config": Path(config).read_text(encoding="utf-8"), "cost": sweep_cost(results),
              "joined": {"committed": str(committed), "seeds": sorted(int(x) for x in alignment["seed"].unique()),
                         "reproduction": check},
              "versions": versions(), "machine": machine_record()}
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


def joined_lines(record: dict) -> list[str]:
    """What a joined run says about the committed seeds it reused (and the check that allowed it)."""
    joined = record.get("joined")
    if not joined:
        return []
    check = joined["reproduction"]
    runs = ", ".join(f"width {run['width']} seed {run['seed']} context {run['context']}" for run in check["runs"])
    if check["identical"]:
        said = (f"The retrained run ({runs}) reproduced the committed map's {check['rows']} alignment rows exactly "
                f"({check['columns']} numeric columns each), so the map's seeds at these contexts and steps are reused.")
    else:
        said = (f"The retrained run ({runs or 'none finished'}) did not reproduce the committed map's rows "
                f"(differing: {', '.join(check['differing_columns']) or 'no common rows'}), so only the new seeds "
                "are judged.")
    return ["## Seeds", "", f"Seeds {', '.join(map(str, joined['seeds']))} per cell, from this sweep and "
            f"`{joined['committed']}`. {said}", ""]


def unjudged_loss_lines(out: Path, claims: pd.DataFrame) -> list[str]:
    """A line saying so when the kept checkpoints hold no held-out loss level that every width reaches (loss.csv
    empty): the matched-loss comparison is then not tested by this run."""
    if claims["claim"].str.contains("matched held-out loss").any() or len(pd.read_csv(out / "loss.csv")):
        return []
    return ["- d_align increases with width, at matched held-out loss: **not tested at this scale**: at the kept "
            "checkpoints no held-out loss level is reached by every width of a context (loss.csv has no rows); the "
            "map with more checkpoints (`docs/reference-results/p1-regime`) judges it."]


def write_readme(out: Path, record: dict) -> None:
    """README.md of a kept map, from its files: reproduction, cost, the spread, the cells and the verdicts."""
    cost, command = record["cost"], record["command"]
    facts = json.loads((out / "map.json").read_text())
    cells = pd.read_csv(out / "table.csv")
    claims = pd.read_csv(out / "claims.csv")
    shown = ["comparison", "context", "progress", "point", "reduction", "verdict", "slope", "slope_lo", "slope_hi",
             "seeds", "seeds_needed"]
    counts = cells["verdict"].value_counts()
    spread = facts.get("spread") or {}
    rejudged = record.get("rejudged")
    readme = ["# P1 regime reference map (docs/science.md, P1)", "",
              f"Reference run of {record['date']}, commit `{record['commit']}`, config `{record['config_file']}`. Reproduce "
              "(resumable; keeps every finished job):", "", f"    {command}", ""]
    if rejudged:
        readme += [f"Judged again on {rejudged['date']} at commit `{rejudged['commit']}` from its own alignment.csv "
                   f"and training.csv (no retraining), with the verdict rule of `growcert.report.verdicts`:", "",
                   f"    {rejudged['command']}", ""]
    readme += [f"Coverage: {facts['coverage']}. Cost on {record['machine'].get('cpus', os.cpu_count())} cores: "
               f"{cost['cpu_hours']} CPU-hours over {cost['jobs']} jobs, peak disk {cost['peak_disk_gb']} GB "
               f"({cost['disk_samples']} samples).", "",
               "Parts of the sweep (each resumed the finished jobs of the last; `parts` and `disk_by_part` in "
               "provenance.json): " + "; ".join(f"started {part['started']} at commit {part['commit'][:7]}"
                                                 for part in cost["parts"]) + ". Peak disk per part: "
               + "; ".join(f"{part['from']} to {part['to']}: {part['peak_disk_gb']} GB" for part in cost["disk_by_part"])
               + ".", "",
               "Code that trained the runs (each run's own provenance; `trained_at` in provenance.json): "
               + "; ".join(f"{row['runs']} run(s) at commit {str(row['commit'])[:7]} (code hash {row['code_hash']})"
                           for row in cost["trained_at"]) + ".", "",
               *joined_lines(record),
               "## Between seeds against within a store", "",
               f"In {spread.get('between_dominates')} of {spread.get('cells')} (context, width, step, point, "
               f"reduction) cells with both spreads, log d_align varies more between training seeds than a "
               f"store's jackknife standard error (median ratio {spread.get('median_ratio', float('nan')):.2f}; "
               "`p1_regime_spread.png`, stats in `spread.csv`). A store's own interval covers the sampling of "
               "examples, not the training run: a width trend needs an interval over seeds.", "",
               f"## Width trend per cell (seed-level slope interval of log d_align on log width; the paper's slope "
               f"is {claims['paper_effect'].iloc[0] if len(claims) else '0.497'})", "",
               "Cells: " + ", ".join(f"{int(counts.get(word, 0))} {word}" for word in
                                     ("reproduced", "contradicted", "unresolved", "not tested at this scale")) + ".", "",
               cells[[c for c in shown if c in cells.columns]].to_markdown(index=False), "",
               "## Does d_align rise with width (P1), at matched budget and at matched loss, per context?", "",
               *claim_lines(claims), *unjudged_loss_lines(out, claims), ""]
    (out / "README.md").write_text("\n".join(readme), encoding="utf-8")
    print(f"kept the regime map in {out}: {len(cells)} cells, {cost['cpu_hours']} CPU-hours")


def main(argv: list[str] | None = None) -> None:
    parser = sweeps.reference_arguments(__doc__, "p1-regime", CONFIG, "configs/p1-seeds.yaml: more seeds",
                                        join_help="a committed map whose seeds at the sweep's contexts and steps "
                                                  "are judged with the sweep's (configs/p1-seeds.yaml)")
    args = parser.parse_args(argv)
    if args.rejudge:
        rejudge(Path(args.out))
        return
    results = Path(args.results)
    command = sweeps.reference_command(__file__, args, CONFIG)
    if args.run and (status := run_sweep(results, args.cores, args.config, ("summarize_regime",))) != 0:
        sys.exit(status)
    if args.join:
        export_joined(results, Path(args.out), command, args.config, Path(args.join))
    else:
        export(results, Path(args.out), command, args.config)


if __name__ == "__main__":
    main()
