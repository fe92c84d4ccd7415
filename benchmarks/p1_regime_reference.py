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

`--rejudge` judges a committed map again from its alignment.csv and training.csv (and misalignment.csv, where it
has one), without retraining. The folder's name is the reference run's (p1-regime, p1-seeds): a claim judged there on
more seeds than at one of its registered looks (claims.CLAIMS[...].looks) is judged at the group-sequential level
of growcert.report.looks, so a scratch copy keeps the name (cp -r docs/reference-results/p1-seeds /tmp/x/).

    PYTHONPATH=src .venv/bin/python benchmarks/p1_regime_reference.py --run --cores 2 \\
        --results results-p1-regime --out docs/reference-results/p1-regime

`--join <committed map>` judges the sweep's new seeds with the committed map's at the same steps (configs/p1-seeds.yaml
and configs/p1-seeds-16-c512.yaml say how): the sweep retrains one of the map's runs, and the map's rows are reused
only if that run reproduces them, value for value or within REUSE_RTOL of each value (said which in the README). `--contexts 256,512` keeps the map's rows at those contexts (by
default only at the sweep's own), so seeds can be added one context at a time. `--misalignment` also asks Snakemake
for the empirical misalignment table of the last checkpoint of each new run (a context sweep's stores get none
otherwise: summarize-alignment reads misalignment for fixed-context runs only), kept as misalignment.csv and judged
into the "p̂ falls with width" rows (report.alignment.misalignment_width_rows), per context with Holm; a committed
map's misalignment.csv is carried over under the same reproduction check. The README gives, for every unresolved
primary row, the power its seeds have at the observed effect and spread and the seeds that 80 % power needs.
`--from-export <folder> --join <committed map>` joins an earlier sweep's export (judged alone, its results folder gone)
to the committed map under the same check.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import sys
from pathlib import Path

import pandas as pd

from growcert.report.claims import DESIGN_DTYPES, design_text

import sweeps
from sweeps import require_finished, run_sweep, store_tables, sweep_config, sweep_cost

CONFIG = "configs/p1-regime.yaml"
COPIED = {"table.csv": "tables/p1_regime_cells.csv", "claims.csv": "claims/p1_regime.csv",
          "budget.csv": "stats/p1_regime_budget.csv", "loss.csv": "stats/p1_regime_loss.csv",
          "matched.csv": "stats/p1_regime_matched.csv", "map.json": "stats/p1_regime_map.json",
          "training.csv": "stats/training.csv", "spread.csv": "stats/p1_regime_spread.csv"}


def claim_lines(claims: pd.DataFrame) -> list[str]:
    """One verdict line per claim row: comparison and scope, the verdict word, the estimate and why."""
    from growcert.report.verdicts import percent

    def slope(row) -> str:  # p̂'s slopes are hundredths (its SESOI −0.0279); d_align's are tenths
        digits = ".3f" if row.claim_id == "p1_misalignment_width" else ".2f"
        return (f"slope {row.estimate:+{digits}} [{row.low:+{digits}}, {row.high:+{digits}}]" if pd.notna(row.low)
                else f"slope {row.estimate:+{digits}}")

    return [f"- {row.claim}: **{row.verdict}**: {slope(row)} "
            f"({percent(row.level)}, {row.seeds} seeds) against the paper's {row.paper_effect} (SESOI {row.sesoi}); "
            f"{row.role}; " + (f"direction {row.direction}; " if isinstance(row.direction, str) else "") + row.why
            for row in claims.itertuples()]


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


def export(results: Path, out: Path, command: str, config: str = CONFIG, misalignment: bool = False) -> None:
    """Copy a finished sweep's tables and figures to `out`, with provenance and a README (and, with `misalignment`,
    its runs' misalignment tables as misalignment.csv with the "p̂ falls with width" rows)."""
    from growcert.files import read_csvs
    from growcert.provenance import git_commit, machine_record, versions

    copy_outputs(results, out)
    reference_mk = tuple(sweep_config(config)["alignment"]["reference_mk"])
    if misalignment:
        paths = misalignment_targets(results, config, None)
        require_finished(results, [str(Path(path).relative_to(results)) for path in paths])
        read_csvs(paths).to_csv(out / "misalignment.csv", index=False)
        add_misalignment_claims(out, reference_mk)
    cost, coverage = sweep_cost(results), json.loads((results / COPIED["map.json"]).read_text())["coverage"]
    record = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "command": command, "table": "width trend per (comparison, context, progress, point, reduction) cell",
              "why": f"The P1 regime map over context, training progress and width ({coverage})",
              "config_file": config, "config": Path(config).read_text(encoding="utf-8"), "cost": cost,
              "misalignment": {"reference_mk": list(reference_mk)} if misalignment else {},
              "versions": versions(), "machine": machine_record()}
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


def rejudge(out: Path) -> None:
    """Judge a committed map again from its own alignment.csv and training.csv (no retraining): summarize-regime
    into a temporary results folder, its outputs copied over the committed ones, then the "p̂ falls with width" rows
    from its misalignment.csv where it has one; the provenance keeps the
    sweep's record and adds when, at which commit and with which command it was re-judged."""
    import tempfile

    from growcert.stages.summaries import summarize_regime

    record = json.loads((out / "provenance.json").read_text())
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder)
        (results / "stats").mkdir()
        shutil.copyfile(out / "alignment.csv", results / "stats" / "alignment.csv")
        shutil.copyfile(out / "training.csv", results / "stats" / "training.csv")
        print(summarize_regime(results / "stats" / "alignment.csv", results / "stats" / "training.csv",
                               results / "stats", results / COPIED["table.csv"], results / COPIED["claims.csv"],
                               results / COPIED["map.json"], results / "figures", reference=out.name))
        copy_outputs(results, out)
    add_misalignment_claims(out, tuple((record.get("misalignment") or {}).get("reference_mk") or (32, 32)))
    record["rejudged"] = sweeps.rejudged_record(__file__, out)
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


REPRODUCTION_KEYS = ["family", "dataset", "width", "depth", "seed", "step", "context", "point", "reduction", "pool"]
# A retrained run reproduces the committed map when every alignment value is within 1 % of the committed one. Bit
# for bit is reported beside it: a change of the training loop's code that reorders sums moves the retrained
# losses by ~1e-6 and the estimates built on them by ~1e-3 of their size, while the seeds' own spread of log
# d_align at a cell is tens of percent (spread.csv); 1 % keeps such a run, and refuses a change of what is computed.
REUSE_RTOL = 0.01


def reproduction_check(new: pd.DataFrame, committed: pd.DataFrame) -> dict:
    """Whether the runs of `new` that the committed map also holds (the same model, step, point, reduction and
    pool) gave the same alignment rows: value for value (`identical`), or every value within REUSE_RTOL of the
    committed one (`reusable`)."""
    return sweeps.reproduction_check(new, committed, REPRODUCTION_KEYS, ["width", "seed", "context"], REUSE_RTOL)


def committed_runs(committed: Path) -> set[tuple[int, int, int]]:
    """(width, seed, context) of every run the committed map holds (a sweep's retrained ones among them)."""
    runs = pd.read_csv(committed / "alignment.csv")[["width", "seed", "context"]].dropna().drop_duplicates()
    return {(int(w), int(s), int(c)) for w, s, c in runs.itertuples(index=False)}  # the file's order is another


def misalignment_targets(results: Path, config: str, committed: Path | None) -> list[str]:
    """The misalignment table of the last checkpoint of every run of the sweep that the committed map lacks."""
    skip = committed_runs(committed) if committed is not None else set()
    return store_tables(results, sweep_config(config), "misalignment", skip)


def add_misalignment_claims(out: Path, reference_mk: tuple[int, int] = (32, 32), level: float = 0.95) -> int:
    """Append the "p̂ falls with width" rows judged on `out`'s misalignment.csv to its claims.csv; how many."""
    from growcert.report.alignment import misalignment_width_rows
    from growcert.report.claims import ROW_COLUMNS

    if not (out / "misalignment.csv").is_file():
        return 0
    rows = misalignment_width_rows(pd.read_csv(out / "misalignment.csv"), tuple(reference_mk), level)
    claims = pd.read_csv(out / "claims.csv", dtype=DESIGN_DTYPES)
    pd.concat([claims, pd.DataFrame(rows, columns=ROW_COLUMNS)], ignore_index=True).to_csv(out / "claims.csv",
                                                                                        index=False)
    return len(rows)


def export_joined(results: Path, out: Path, command: str, config: str, committed: Path,
                  contexts: list[int] | None = None, misalignment: bool = False) -> None:
    """The sweep's new seeds joined to the committed map's seeds at `contexts` (default: the sweep's own) and the
    sweep's steps, judged together (`write_joined`). With `misalignment`, the new runs' misalignment tables
    (`misalignment_targets`) join too."""
    from growcert.files import read_csvs

    require_finished(results, ("stats/alignment.csv", "stats/training.csv"))
    alignment = pd.read_csv(results / "stats" / "alignment.csv")
    misaligned = None
    if misalignment:
        paths = misalignment_targets(results, config, committed)
        require_finished(results, [str(Path(path).relative_to(results)) for path in paths])
        misaligned = read_csvs(paths)
    write_joined(alignment[alignment["context"].notna()], pd.read_csv(results / "stats" / "training.csv"), misaligned,
                 out, {"command": command, "config": config, "cost": sweep_cost(results)}, committed, contexts)


def export_joined_from_export(earlier: Path, out: Path, committed: Path, contexts: list[int] | None = None) -> None:
    """An earlier sweep's own export (`earlier`: its alignment.csv, training.csv, misalignment.csv where it has one,
    and provenance.json), joined to the committed map as `export_joined` joins a sweep's results: for a sweep whose
    results folder is gone but whose export, judged without the committed seeds, was kept. Its command, config
    and cost stand as the sweep's; the provenance also records the export it was read from."""
    record = json.loads((earlier / "provenance.json").read_text())
    misaligned = pd.read_csv(earlier / "misalignment.csv") if (earlier / "misalignment.csv").is_file() else None
    sweep = {"command": record["command"], "config": record["config_file"], "cost": record["cost"],
             "config_text": record["config"],
             "from_export": {key: record.get(key) for key in ("date", "commit", "command", "joined", "misalignment")}}
    write_joined(pd.read_csv(earlier / "alignment.csv"), pd.read_csv(earlier / "training.csv"), misaligned, out, sweep,
                 committed, contexts)


def write_joined(new_alignment: pd.DataFrame, new_training: pd.DataFrame, new_misaligned: pd.DataFrame | None,
                 out: Path, sweep: dict, committed: Path, contexts: list[int] | None = None) -> None:
    """New seeds' rows joined to the committed map's seeds at `contexts` (default: the new rows' own) and the new
    rows' steps, judged together: tables, claims, figures, provenance and README in `out`.

    The new rows hold one of the map's runs, retrained; the map's rows are used only if that run reproduces them
    (`reproduction_check`). Without that, the new seeds are judged alone and the README says why. The new runs'
    misalignment rows (`new_misaligned`, the retrained runs' left out) join the map's misalignment.csv (under the
    same check) into misalignment.csv and the "p̂ falls with width" rows. `sweep` holds the sweep's command, config
    file and cost. `out` may be `committed` itself: every committed file is read before anything is written."""
    import tempfile

    from growcert.provenance import git_commit, machine_record, versions
    from growcert.stages.summaries import summarize_regime

    map_alignment, map_training = pd.read_csv(committed / "alignment.csv"), pd.read_csv(committed / "training.csv")
    check = reproduction_check(new_alignment, map_alignment)
    steps = sorted(new_alignment["step"].unique())
    contexts = sorted(new_alignment["context"].unique()) if contexts is None else sorted(set(contexts))
    retrained = {(run["width"], run["seed"], run["context"]) for run in check["runs"]}

    def new_runs(table: pd.DataFrame) -> pd.DataFrame:  # the sweep's own runs, without the retrained map runs
        return table[[run not in retrained for run in zip(table["width"], table["seed"], table["context"])]]

    alignment, training = new_runs(new_alignment), new_runs(new_training)
    if check["reusable"]:
        alignment = pd.concat([map_alignment[map_alignment["context"].isin(contexts) & map_alignment["step"].isin(steps)],
                               alignment], ignore_index=True)
        training = pd.concat([map_training[map_training["context"].isin(contexts) & (map_training["step"] <= max(steps))],
                              training], ignore_index=True)
    misaligned = []
    if check["reusable"] and (committed / "misalignment.csv").is_file():
        kept = pd.read_csv(committed / "misalignment.csv")
        misaligned.append(kept[kept["context"].isin(contexts)])
    if new_misaligned is not None:
        misaligned.append(new_runs(new_misaligned))
    earlier = json.loads((committed / "provenance.json").read_text()) if (committed / "provenance.json").is_file() else {}
    with tempfile.TemporaryDirectory() as folder:
        joined = Path(folder)
        (joined / "stats").mkdir()
        alignment.to_csv(joined / "stats" / "alignment.csv", index=False)
        training.to_csv(joined / "stats" / "training.csv", index=False)
        print(summarize_regime(joined / "stats" / "alignment.csv", joined / "stats" / "training.csv", joined / "stats",
                               joined / COPIED["table.csv"], joined / COPIED["claims.csv"], joined / COPIED["map.json"],
                               joined / "figures", reference=out.name))
        copy_outputs(joined, out)
    config = sweep["config"]
    reference_mk = tuple(sweep_config(config)["alignment"]["reference_mk"])
    if misaligned:
        pd.concat(misaligned, ignore_index=True).to_csv(out / "misalignment.csv", index=False)
        add_misalignment_claims(out, reference_mk)
    elif (out / "misalignment.csv").is_file():  # a committed table the check did not allow to reuse
        (out / "misalignment.csv").unlink()
    by_context = {str(int(context)): sorted(int(x) for x in frame["seed"].unique())
                  for context, frame in alignment.groupby("context")}
    record = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "command": sweep["command"],
              "table": "width trend per (comparison, context, progress, point, reduction) cell",
              "why": "P1's decisive cells with " + ", ".join(f"{len(seeds)} seeds at context {context}"
                                                             for context, seeds in by_context.items()),
              "config_file": config, "config": sweep.get("config_text") or Path(config).read_text(encoding="utf-8"),
              "cost": sweep["cost"],
              "joined": {"committed": str(committed), "seeds": sorted(int(x) for x in alignment["seed"].unique()),
                         "seeds_by_context": by_context, "reproduction": check,
                         "committed_record": {key: earlier.get(key) for key in ("date", "commit", "command", "cost",
                                                                                "joined", "rejudged")}},
              "misalignment": {"reference_mk": list(reference_mk),
                               "seeds_by_context": {str(int(c)): sorted(int(x) for x in f["seed"].unique())
                                                    for c, f in pd.concat(misaligned).groupby("context")}
                               if misaligned else {}},
              "versions": versions(), "machine": machine_record()}
    if sweep.get("from_export"):
        record["joined"]["from_export"] = sweep["from_export"]
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
    elif check.get("reusable"):
        largest = check["largest_relative_difference"]
        worst = max(largest, key=largest.get)
        said = (f"The retrained run ({runs}) reproduced the committed map's {check['rows']} alignment rows within "
                f"{check['rtol']:.0%} of each value, not bit for bit: {len(largest)} of {check['columns']} numeric "
                f"columns differ, the most {largest[worst]:.2g} of the value ({worst}; d_align "
                f"{largest.get('d_align', 0.0):.2g}), so the map's seeds at these contexts and steps are reused "
                "(the tolerance and why: REUSE_RTOL in benchmarks/p1_regime_reference.py).")
    else:
        said = (f"The retrained run ({runs or 'none finished'}) did not reproduce the committed map's rows "
                f"(differing: {', '.join(check['differing_columns']) or 'no common rows'}), so only the new seeds "
                "are judged.")
    if joined.get("from_export"):
        source = joined["from_export"]
        said += (f" This sweep's rows were read from its own export of {source.get('date')} (commit "
                 f"{str(source.get('commit'))[:7]}, judged then without the committed seeds), not from its results "
                 "folder.")
    by_context = joined.get("seeds_by_context") or {}
    if len({tuple(seeds) for seeds in by_context.values()}) > 1:
        seeds = "Seeds per cell: " + "; ".join(f"context {context}: {seed_text(seeds)}"
                                              for context, seeds in by_context.items())
    else:
        seeds = f"Seeds {', '.join(map(str, joined['seeds']))} per cell"
    lines = ["## Seeds", "", f"{seeds}, from this sweep and `{joined['committed']}`. {said}", ""]
    earlier = (joined.get("committed_record") or {})
    if earlier.get("cost"):
        lines += [f"The committed map's own sweep ({earlier.get('date')}, commit {str(earlier.get('commit'))[:7]}, "
                  f"`{earlier.get('command')}`): {earlier['cost'].get('cpu_hours')} CPU-hours, peak disk "
                  f"{earlier['cost'].get('peak_disk_gb')} GB; the cost above is this sweep's alone.", ""]
    return lines + misalignment_lines(record)


def seed_text(seeds: list[int]) -> str:
    """0–7, or 0, 2, 5: a run of consecutive seeds as a range."""
    seeds = sorted(seeds)
    return f"{seeds[0]}–{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2 \
        else ", ".join(map(str, seeds))


def misalignment_lines(record: dict) -> list[str]:
    """Which seeds the "p̂ falls with width" rows are judged on, and why not the others."""
    by_context = (record.get("misalignment") or {}).get("seeds_by_context") or {}
    if not by_context:
        return []
    mk = record["misalignment"]["reference_mk"]
    return [f"Empirical misalignment p̂ (iid, M = {mk[0]}, K = {mk[1]}, each run's last checkpoint) is judged on "
            + "; ".join(f"context {context}: seeds {seed_text(seeds)}" for context, seeds in by_context.items())
            + ": the runs whose stores a sweep kept until `estimate-misalignment` ran (this sweep asked for it with "
              "`--misalignment`). The earlier seeds' stores were removed once their d_align was estimated "
              "(temporary_stores) and their checkpoints are not kept, so their p̂ needs those models trained again.",
            ""]


def power_lines(claims: pd.DataFrame) -> list[str]:
    """For every unresolved primary or part row: its design figures (seeds to reproduce it if the effect is the
    paper's, to contradict it if nil: growcert.report.verdicts.design_of) and, labelled as an illustration only, the
    power its own seeds have at the observed effect and per-seed spread (noncentral t), which swings with noise."""
    from growcert.report.claims import CLAIMS
    from growcert.report.verdicts import boundaries, percent
    from growcert.stats.seeds import t_power, t_quantile

    lines = []
    for row in claims[(claims["verdict"] == "unresolved") & claims["role"].isin(["primary", "part"])].itertuples():
        effect, seeds = CLAIMS[row.claim_id].effect, int(row.seeds)
        edges = boundaries(effect)
        if seeds < 2 or len(edges) != 1 or effect.scale != "linear":
            continue
        spread = (row.high - row.low) / (2 * t_quantile(row.level, seeds)) * math.sqrt(seeds)
        power = t_power(row.estimate, spread, edges[0], seeds, row.level)
        design = design_text(row)
        lines.append(f"- {row.claim}: {design.removeprefix('; ') or 'design figures unknown'}; illustration only: "
                     f"with its {seeds} seeds, power {percent(power)} at the observed {row.estimate:+.3g} and per-seed "
                     f"spread {spread:.3g} (the chance that a {percent(row.level)} t interval lies wholly on the "
                     f"estimate's side of the SESOI {edges[0]:+.3g}).")
    if not lines:
        return []
    return ["## Design of the unresolved rows", "",
            "The seeds that would decide each unresolved row with 80 % power, at the upper 80 % limit of the observed "
            "between-seed spread (`seeds_to_reproduce` if the slope is the paper's, `seeds_to_contradict` if it is "
            "nil; `growcert.report.verdicts.design_of`):", "", *lines, ""]


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
    claims = pd.read_csv(out / "claims.csv", dtype=DESIGN_DTYPES)  # "108", "> 10,000"
    shown = ["comparison", "context", "progress", "point", "reduction", "verdict", "slope", "slope_lo", "slope_hi",
             "seeds", "seeds_to_reproduce", "seeds_to_contradict"]
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
               *power_lines(claims),
               ("## Does d_align rise with width (P1), at matched budget and at matched loss, per context, and does p̂ "
                "fall with width?" if (claims["claim_id"] == "p1_misalignment_width").any() else
                "## Does d_align rise with width (P1), at matched budget and at matched loss, per context?"), "",
               *claim_lines(claims), *unjudged_loss_lines(out, claims), ""]
    (out / "README.md").write_text("\n".join(readme), encoding="utf-8")
    print(f"kept the regime map in {out}: {len(cells)} cells, {cost['cpu_hours']} CPU-hours")


def main(argv: list[str] | None = None) -> None:
    parser = sweeps.reference_arguments(__doc__, "p1-regime", CONFIG, "configs/p1-seeds.yaml: more seeds",
                                        join_help="a committed map whose seeds at the sweep's contexts and steps "
                                                  "are judged with the sweep's (configs/p1-seeds.yaml)")
    parser.add_argument("--contexts", default=None, help="with --join: the contexts whose committed rows are kept, e.g. "
                                                         "256,512 (default: the sweep's own)")
    parser.add_argument("--from-export", default=None,
                        help="with --join: judge an earlier sweep's export folder (its results folder gone) with the "
                             "committed map, instead of --results")
    parser.add_argument("--misalignment", action="store_true",
                        help="also estimate p̂ at the last checkpoint of each new run and judge 'p̂ falls with width'")
    args = parser.parse_args(argv)
    if args.rejudge:
        rejudge(Path(args.out))
        return
    results = Path(args.results)
    contexts = [int(context) for context in args.contexts.split(",")] if args.contexts else None
    command = (sweeps.reference_command(__file__, args, CONFIG) + (f" --contexts {args.contexts}" if args.contexts else "")
               + (" --misalignment" if args.misalignment else ""))
    committed = Path(args.join) if args.join else None
    if args.from_export:
        if committed is None:
            print(f"--from-export {args.from_export}: needs --join <committed map> to join it to", file=sys.stderr)
            sys.exit(2)
        export_joined_from_export(Path(args.from_export), Path(args.out), committed, contexts)
        return
    targets = ["summarize_regime"] + (misalignment_targets(results, args.config, committed) if args.misalignment else [])
    if args.run and (status := run_sweep(results, args.cores, args.config, targets)) != 0:
        sys.exit(status)
    if args.join:
        export_joined(results, Path(args.out), command, args.config, committed, contexts, args.misalignment)
    else:
        export(results, Path(args.out), command, args.config, args.misalignment)


if __name__ == "__main__":
    main()
