"""The `p3-depth` reference run (docs/science.md, P3): the first-order value of an inserted zero-output
block over real depth, whether it settles on a plateau, and grown against scratch. Run configs/p3-depth.yaml
and keep its results under docs/reference-results/p3-depth/, where the report shows them as a reference run.

`--run` runs the sweep (Snakemake targets summarize_depth and summarize_growth; resumable, finished jobs
are kept; the disk is sampled alongside, benchmarks/sweeps.py). Without `--run` it only exports a sweep
that has finished. The export holds:

- depth.csv: every store's `growcert estimate-depth` rows (both pools); growth.csv: the growth runs'
  held-out loss per arm, seed and step; recommended.csv: the saturation decision (growcert.report.depth);
- table.csv: per model depth and point, the raw and scale-invariant value on the held-out pool at the
  last checkpoint, the mean over seeds with its Student t interval (`depth_profile`);
- claims.csv: the three P3 claim rows (the value falls with depth; it settles, the two deepest depths
  within 10 % of each other as an equivalence test; grown matches scratch at +1 %), judged with
  `growcert.report.verdicts` from depth.csv and growth.csv by `growcert.report.depth.depth_claims`;
- the figures p3_depth.png and p3_growth.png; provenance.json (date, commit, command, config, versions,
  machine, cost: CPU time per rule and peak disk); README.md with the verdicts.

`--rejudge` judges a committed folder again from its own depth.csv and growth.csv, without retraining. The folder's
name is the reference run's (p3-depth): a claim judged on more seeds than at one of its registered looks is judged at
the group-sequential level of growcert.report.looks, so a scratch copy keeps the name.

    PYTHONPATH=src nice -n 19 .venv/bin/python benchmarks/p3_depth_reference.py --run --cores 2 \\
        --results results-p3-depth --out docs/reference-results/p3-depth

`--join <committed folder>` (with `--config configs/p3-depth-seeds.yaml`) judges the sweep's new seeds together with
the committed run's: the sweep also retrains one committed seed-0 run of the depth grid and seed 0 of every growth
experiment; a table's committed seeds are reused only when its retrained rows equal the committed ones value for
value (`sweeps.reproduction_check`), else that table is judged on the new seeds alone, and the README says which.
The figures are drawn again from the joined tables. Six seeds with the no-growth control:

    PYTHONPATH=src nice -n 19 .venv/bin/python benchmarks/p3_depth_reference.py --run --cores 2 \\
        --config configs/p3-depth-seeds.yaml --join docs/reference-results/p3-depth \\
        --results results-p3-depth-seeds --out docs/reference-results/p3-depth
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
from sweeps import reproduction_check, require_finished, run_sweep, sweep_cost

CONFIG = "configs/p3-depth.yaml"
TARGETS = ("summarize_depth", "summarize_growth")
COPIED = {"depth.csv": "stats/depth.csv", "growth.csv": "tables/p3_growth.csv",
          "p3_depth.png": "figures/p3_depth.png", "p3_growth.png": "figures/p3_growth.png"}
QUESTION = "Does the value of a new block fall with depth and settle on a plateau, and does growing match scratch (P3)?"


def judged_tables(out: Path, level: float = 0.95) -> None:
    """table.csv, recommended.csv and claims.csv of `out`, from its depth.csv and growth.csv; the folder's name is
    the reference run's, whose registered looks set the level of a claim judged at a later look
    (growcert.report.looks)."""
    from growcert.report.claims import ROW_COLUMNS
    from growcert.report.depth import depth_claims, depth_profile, recommend_depth

    depth, growth = pd.read_csv(out / "depth.csv"), pd.read_csv(out / "growth.csv")
    held_out = depth[(depth["pool"] == "test") & (depth["step"] == depth["step"].max())]
    depth_profile(held_out, level).to_csv(out / "table.csv", index=False)
    recommend_depth(held_out, level=level).to_csv(out / "recommended.csv", index=False)
    pd.DataFrame(depth_claims(depth, growth, level, reference=out.name), columns=ROW_COLUMNS).to_csv(out / "claims.csv",
                                                                                                 index=False)


def export(results: Path, out: Path, command: str, config: str = CONFIG) -> None:
    """Copy a finished sweep's tables and figures to `out`, judge them, and write provenance and a README."""
    from growcert.provenance import git_commit, machine_record, versions

    require_finished(results, COPIED.values())
    out.mkdir(parents=True, exist_ok=True)
    for target, source in COPIED.items():
        shutil.copyfile(results / source, out / target)
    judged_tables(out)
    record = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "command": command, "table": "value of an inserted block per model depth and point, mean over seeds "
                                           "with its t interval (held-out pool, last checkpoint)",
              "why": "P3's plateau over real depth: llama on Shakespeare, depths 1-8, 3 seeds, and growth 2 → 3 and "
                     "4 → 6 against scratch",
              "config_file": config, "config": Path(config).read_text(encoding="utf-8"), "cost": sweep_cost(results),
              "versions": versions(), "machine": machine_record()}
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


# The rows a retrained run must reproduce: the same model, step, point and pool (depth.csv); the same growth
# experiment, seed, arm and step (growth.csv).
DEPTH_KEYS = ["family", "dataset", "width", "depth", "seed", "step", "point", "pool"]
GROWTH_KEYS = ["family", "dataset", "width", "base_depth", "seed", "arm", "step"]


def joined_table(new: pd.DataFrame, committed: pd.DataFrame, keys: list[str], run_keys: list[str]) -> tuple[pd.DataFrame, dict]:
    """(the rows to judge, the check): the sweep's rows without its retrained committed runs, plus the committed
    rows when the retrained ones reproduce them exactly; the new rows alone otherwise."""
    check = reproduction_check(new, committed, keys, run_keys)
    retrained = {tuple(run[key] for key in run_keys) for run in check["runs"]}
    own = new[[run not in retrained for run in zip(*(new[key] for key in run_keys))]]
    rows = pd.concat([committed, own], ignore_index=True) if check["identical"] else own.reset_index(drop=True)
    return rows, check


def export_joined(results: Path, out: Path, command: str, config: str, committed: Path) -> None:
    """The sweep's new seeds joined to the committed run's, judged together (module docstring): depth.csv and
    growth.csv each joined after its own reproduction check, then the tables, claims, figures, provenance (with the
    committed run's own record) and README of `out`. `out` may be `committed` itself (read before written)."""
    from growcert.provenance import git_commit, machine_record, versions
    from growcert.report.depth import plot_depth, plot_growth

    require_finished(results, COPIED.values())
    depth, depth_check = joined_table(pd.read_csv(results / COPIED["depth.csv"]), pd.read_csv(committed / "depth.csv"),
                                      DEPTH_KEYS, ["width", "depth", "seed"])
    growth, growth_check = joined_table(pd.read_csv(results / COPIED["growth.csv"]),
                                        pd.read_csv(committed / "growth.csv"), GROWTH_KEYS, ["base_depth", "seed"])
    earlier = json.loads((committed / "provenance.json").read_text()) if (committed / "provenance.json").is_file() else {}
    out.mkdir(parents=True, exist_ok=True)
    depth.to_csv(out / "depth.csv", index=False)
    growth.to_csv(out / "growth.csv", index=False)
    plot_depth(depth, out / "p3_depth.png")
    plot_growth(growth, out / "p3_growth.png")
    judged_tables(out)
    record = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "command": command, "table": "value of an inserted block per model depth and point, mean over seeds "
                                           "with its t interval (held-out pool, last checkpoint)",
              "why": f"P3 at {depth['seed'].nunique()} seeds (depth grid) and {growth['seed'].nunique()} seeds (growth "
                     "with its no-growth control): llama on Shakespeare, depths 1-8, growth 2 → 3 and 4 → 6",
              "config_file": config, "config": Path(config).read_text(encoding="utf-8"), "cost": sweep_cost(results),
              "joined": {"committed": str(committed),
                         "depth": {"seeds": sorted(int(x) for x in depth["seed"].unique()), "reproduction": depth_check},
                         "growth": {"seeds": sorted(int(x) for x in growth["seed"].unique()),
                                    "reproduction": growth_check},
                         "committed_record": {key: earlier.get(key) for key in ("date", "commit", "command", "cost",
                                                                                "joined", "rejudged")}},
              "versions": versions(), "machine": machine_record()}
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


def joined_lines(record: dict) -> list[str]:
    """What a joined run says about the committed seeds it reused, table by table, and the checks that allowed it."""
    joined = record.get("joined")
    if not joined:
        return []
    lines = ["## Seeds", ""]
    for table, name in (("depth", "depth.csv"), ("growth", "growth.csv")):
        part, check = joined[table], joined[table]["reproduction"]
        runs = "; ".join(", ".join(f"{key} {value}" for key, value in run.items()) for run in check["runs"])
        seeds = ", ".join(map(str, part["seeds"]))
        if check["identical"]:
            said = (f"the retrained run(s) ({runs}) reproduced the committed {check['rows']} rows of {name} exactly "
                    f"({check['columns']} numeric columns each), so its committed seeds are reused")
        else:
            said = (f"the retrained run(s) ({runs or 'none finished'}) did not reproduce the committed {name} "
                    f"(differing: {', '.join(check['differing_columns']) or 'no common rows'}), so only the new seeds "
                    "are judged")
        lines.append(f"- {name}: seeds {seeds}, from this sweep and `{joined['committed']}`; {said}.")
    earlier = joined.get("committed_record") or {}
    cost = earlier.get("cost") or {}
    if cost:
        lines.append(f"- The committed run's own sweep ({earlier.get('date')}, commit {str(earlier.get('commit'))[:7]}): "
                     f"{cost.get('cpu_hours')} CPU-hours, peak disk {cost.get('peak_disk_gb')} GB; the cost stated above is "
                     "this sweep's alone.")
    return lines + [""]


def rejudge(out: Path) -> None:
    """Judge a committed folder again from its depth.csv and growth.csv; the provenance keeps the sweep's record
    and adds when, at which commit and with which command it was judged again."""
    judged_tables(out)
    record = json.loads((out / "provenance.json").read_text())
    record["rejudged"] = sweeps.rejudged_record(__file__, out)
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


def interval_text(row) -> str:
    return f"{row['mean']:.4g} [{row['low']:.4g}, {row['high']:.4g}]"


def depth_lines(profile: pd.DataFrame) -> list[str]:
    """Per model depth: the value at its last point (raw and scale-invariant) with the interval over seeds."""
    last = profile[profile["point_index"] == profile.groupby("depth")["point_index"].transform("max")]
    rows = []
    for depth, frame in last.groupby("depth"):
        by = frame.set_index("criterion")
        rows.append({"model depth": int(depth), "point": by.loc["value", "point"], "seeds": int(by.loc["value", "seeds"]),
                     "raw ‖E[q hᵀ]‖² [95 % t interval]": interval_text(by.loc["value"]),
                     "scale-invariant [95 % t interval]": interval_text(by.loc["scaled_value"])})
    return [pd.DataFrame(rows).to_markdown(index=False)] if rows else ["nothing finished"]


def recommended_lines(recommended: pd.DataFrame) -> list[str]:
    across = recommended[recommended["view"] == "across_depth"]
    return [f"- {row.criterion} ({row.seeds} seeds): {row.status}" + (f", from depth {row.recommended:g} [{row.recommended_lo:g}–"
                                                 f"{row.recommended_hi:g}]" if str(row.status).startswith("saturated")
                                                 else "") for row in across.itertuples()] or ["no depth grid"]


def growth_lines(growth: pd.DataFrame) -> list[str]:
    final = growth[growth["step"] == growth.groupby("base_depth")["step"].transform("max")]
    table = final.pivot_table(index=["base_depth", "arm"], values="test_loss", aggfunc=["mean", "std", "count"])
    table.columns = ["mean held-out loss", "SD over seeds", "seeds"]
    return [table.reset_index().to_markdown(index=False, floatfmt=".4f")]


def claim_lines(claims: pd.DataFrame) -> list[str]:
    from growcert.report.verdicts import percent

    return [f"- {row.claim}: **{row.verdict}**: {row.estimate:.4g} [{row.low:.4g}, {row.high:.4g}] "
            f"({percent(row.level)}, {row.seeds} seeds) against the paper's {row.paper_effect} ({row.paper_value}; "
            f"SESOI {row.sesoi}); {row.role}; direction {row.direction}; {row.why}" for row in claims.itertuples()]


def write_readme(out: Path, record: dict) -> None:
    """README.md of a kept run, from its files: reproduction, cost, the depth table, the decision and verdicts."""
    from growcert.report.claims import PLATEAU_MARGIN

    cost, rejudged = record["cost"], record.get("rejudged")
    profile, claims = pd.read_csv(out / "table.csv"), pd.read_csv(out / "claims.csv")
    readme = ["# P3 depth sufficiency over real depth (docs/science.md, P3)", "",
              f"Reference run of {record['date']}, commit `{record['commit']}`, config `{record['config_file']}`. "
              "Reproduce (resumable; keeps every finished job):", "", f"    {record['command']}", ""]
    if rejudged:
        readme += [f"Judged again on {rejudged['date']} at commit `{rejudged['commit']}` from its own depth.csv and "
                   f"growth.csv (no retraining):", "", f"    {rejudged['command']}", ""]
    readme += [f"Cost on {record['machine'].get('cpus', os.cpu_count())} cores: {cost['cpu_hours']} CPU-hours over "
               f"{cost['jobs']} jobs ({cost['job_wall_hours']} job wall-hours), peak disk {cost['peak_disk_gb']} GB "
               f"({cost['disk_samples']} samples). Per rule: "
               + "; ".join(f"{row['rule']} {row['jobs']} jobs, {row['cpu_s'] / 60:.1f} CPU-min"
                           for row in cost["per_rule"]) + ".", "",
               "Parts of the sweep (each resumed the finished jobs of the last): "
               + "; ".join(f"started {part['started']} at commit {part['commit'][:7]}" for part in cost["parts"])
               + ". Code that trained the runs (each run's own provenance): "
               + "; ".join(f"{row['runs']} run(s) at commit {str(row['commit'])[:7]} (code hash {row['code_hash']})"
                           for row in cost["trained_at"]) + ".", "",
               *joined_lines(record),
               "## The value of an inserted zero-output block per model depth (its last point, held-out pool)", "",
               "Raw: the unbiased ‖E[q hᵀ]‖²; scale-invariant: value × mean‖z‖²/mean‖h‖², the form saturation is "
               "judged on. Each seed is one trained model; the interval is Student t over seeds. Every point of "
               "every depth: `table.csv`.", "", *depth_lines(profile), "",
               "## Recommended depth (the plateau test of stats/depth.py on between-seed intervals)", "",
               "Each depth's mean over seeds with its standard error sd/√n, widened by t/z so the test's normal "
               "quantile gives a Student t interval; a store's own standard error never enters.", "",
               *recommended_lines(pd.read_csv(out / "recommended.csv")), "",
               "## Grown against scratch (final held-out loss, same budget)", "", *growth_lines(pd.read_csv(out / "growth.csv")),
               "",
               f"The plateau margin: the two deepest depths settle when the ratio of their scale-invariant values lies "
               f"within [{1 / PLATEAU_MARGIN:.3g}, {PLATEAU_MARGIN:.3g}] (10 % on the log scale), an equivalence "
               "test: the whole interval over seeds must lie inside; no significant change is not a plateau.", "",
               f"## {QUESTION}", "", *claim_lines(claims), ""]
    (out / "README.md").write_text("\n".join(readme), encoding="utf-8")
    print(f"kept the p3-depth run in {out}: {len(claims)} claim rows, {cost['cpu_hours']} CPU-hours")


def main(argv: list[str] | None = None) -> None:
    parser = sweeps.reference_arguments(__doc__, "p3-depth", CONFIG, "configs/p3-depth-seeds.yaml: seeds 3-5",
                                        join_help="a committed run whose seeds are judged with the sweep's, "
                                                  "after the retrained seed-0 rows reproduce it (configs/p3-depth-seeds.yaml)")
    args = parser.parse_args(argv)
    if args.rejudge:
        rejudge(Path(args.out))
        return
    results = Path(args.results)
    command = sweeps.reference_command(__file__, args, CONFIG)
    if args.run and (status := run_sweep(results, args.cores, args.config, TARGETS)) != 0:
        sys.exit(status)
    if args.join:
        export_joined(results, Path(args.out), command, args.config, Path(args.join))
    else:
        export(results, Path(args.out), command, args.config)


if __name__ == "__main__":
    main()
