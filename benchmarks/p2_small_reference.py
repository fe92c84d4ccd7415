"""The `p2-small` reference run (docs/science.md, "Verdicts"; docs/reproducing.md, P2): P2's PINN, noisy DPO and
drift–diffusion claims at 8 seeds, at the default run's settings (configs/p2-small.yaml says why nothing else
changes). Run configs/p2-small.yaml and keep its results under docs/reference-results/p2-small/, where the report
shows them as a reference run and its primary rows decide p2_pinn, p2_dpo_accuracy, p2_dpo_drift and
p2_drift_diffusion (claims registry, `decided_by`).

`--run` runs the sweep: the Snakemake targets results/claims/p2_pinn.csv, p2_preference.csv and p2_theory.csv
(rules p2_experiment, preference and p2_ungated, which also write each task's table, figures and folder; the
preference rule first trains the llama DPO starts from). Resumable: finished jobs are kept, and each task resumes
inside its own folder; the disk is sampled alongside (benchmarks/sweeps.py). Without `--run` it only exports a
sweep that has finished. The export holds:

- pinn/, preference/, theory/: each task's summary.csv (and curves.csv, or drift.csv) and provenance.json (its
  settings), from which `--rejudge` judges the claims again;
- claims.csv: the claim rows of the three tasks (claims.ROW_COLUMNS, with `role`: per PopulationRiskAdam reading a
  `part` at its Holm level, each claim's `primary` row over every reading); checks.csv: theory's check rows;
- table.csv: one line per claim row (task, claim, role, word, estimate and interval, seeds, seeds needed);
  pinn_table.csv, preference_table.csv, theory_table.csv: each task's report table;
- the task figures (p2_pinn.png, p2_pinn_gate.png, p2_preference.png, p2_preference_gate.png, p2_theory.png);
  provenance.json (date, commit, command, config, versions, machine, cost: CPU time per rule from the Snakemake
  benchmark files and peak disk); README.md with the verdicts from the claim rows.

`--rejudge` judges a committed folder again from its own task tables (each task's `claims` function with the
settings in its provenance.json), without retraining.

    PYTHONPATH=src nice -n 19 .venv/bin/python benchmarks/p2_small_reference.py --run --cores 2 \\
        --results results-p2-small --out docs/reference-results/p2-small
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path

import pandas as pd

from growcert.report.claims import DESIGN_DTYPES

import sweeps
from sweeps import require_finished, run_sweep, sweep_cost

CONFIG = "configs/p2-small.yaml"
TASKS = ("pinn", "preference", "theory")
KEPT = {"pinn": ("summary.csv", "curves.csv", "provenance.json"),
        "preference": ("summary.csv", "curves.csv", "provenance.json"),
        "theory": ("summary.csv", "drift.csv", "provenance.json")}  # theory's spectrum.csv (~200 kB a seed) stays
FIGURES = ("p2_pinn.png", "p2_pinn_gate.png", "p2_preference.png", "p2_preference_gate.png", "p2_theory.png")
QUESTION = ("Is population-risk training 2.4× faster on the PINN, more accurate and 3.05× less drifting in noisy "
            "DPO, and does SGD drift grow as T and fluctuate as √T (P2, 8 seeds)?")
TABLE_COLUMNS = ["task", "claim_id", "claim", "role", "verdict", "estimate", "low", "high", "level", "seeds",
                 "seeds_to_reproduce", "seeds_to_contradict", "direction"]


def targets(results: Path) -> list[str]:
    """The sweep's Snakemake targets: each task's claim rows (its job writes its folder, table and figures too)."""
    return [str(results / "claims" / f"p2_{task}.csv") for task in TASKS]


def sources() -> dict[str, str]:
    """What the export copies: its name in the kept folder → its path under the results folder."""
    copied = {f"{task}/{name}": f"{task}/{name}" for task in TASKS for name in KEPT[task]}
    copied |= {f"{task}_table.csv": f"tables/p2_{task}.csv" for task in TASKS}
    copied |= {name: f"figures/{name}" for name in FIGURES}
    return copied | {"checks.csv": "checks/p2_theory.csv"}


def judged_rows(out: Path) -> tuple[list[dict], list[dict]]:
    """(claim rows, check rows) of the three tasks, judged from `out`'s task folders with the settings each task's
    provenance.json records (the same `claims` function the pipeline's rules call)."""
    from growcert.experiments import task

    claims, checks = [], []
    for name in TASKS:
        settings = json.loads((out / name / "provenance.json").read_text())["settings"]
        for row in task(name).claims(out / name, settings):
            (claims if "claim_id" in row else checks).append(row)
    return claims, checks


def write_judged(out: Path, claims: list[dict], checks: list[dict] | None = None) -> None:
    """claims.csv, table.csv (and checks.csv when given) of `out`."""
    from growcert.report.claims import CHECK_COLUMNS, CLAIMS, ROW_COLUMNS

    frame = pd.DataFrame(claims, columns=ROW_COLUMNS)
    frame.to_csv(out / "claims.csv", index=False)
    if checks is not None:
        pd.DataFrame(checks, columns=CHECK_COLUMNS).to_csv(out / "checks.csv", index=False)
    stage = {key: claim.stage for key, claim in CLAIMS.items()}
    frame.assign(task=frame["claim_id"].map(stage))[TABLE_COLUMNS].to_csv(out / "table.csv", index=False)


def export(results: Path, out: Path, command: str, config: str = CONFIG) -> None:
    """Copy a finished sweep's task tables and figures to `out`, with its claim rows, provenance and a README."""
    from growcert.provenance import git_commit, machine_record, versions

    copied = sources()
    require_finished(results, [copied[name] for name in copied if not name.endswith(".png")])
    for target, source in copied.items():
        (out / target).parent.mkdir(parents=True, exist_ok=True)
        if (results / source).is_file():  # a figure the task did not draw is left out
            shutil.copyfile(results / source, out / target)
    claims = pd.concat([pd.read_csv(results / "claims" / f"p2_{name}.csv", dtype=DESIGN_DTYPES)  # "12", "> 1,000"
                        for name in TASKS], ignore_index=True)
    write_judged(out, claims.to_dict(orient="records"))
    record = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
              "command": command, "table": "every claim row of the three tasks: its word, estimate, interval and seeds",
              "why": "P2's PINN, noisy DPO and drift–diffusion claims at 8 seeds, at the default run's settings",
              "config_file": config, "config": Path(config).read_text(encoding="utf-8"), "cost": sweep_cost(results),
              "versions": versions(), "machine": machine_record()}
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


def rejudge(out: Path) -> None:
    """Judge a committed folder again from its task tables; the provenance keeps the sweep's record and adds when,
    at which commit and with which command it was judged again."""
    write_judged(out, *judged_rows(out))
    record = json.loads((out / "provenance.json").read_text())
    record["rejudged"] = sweeps.rejudged_record(__file__, out)
    (out / "provenance.json").write_text(json.dumps(record, indent=1))
    write_readme(out, record)


def claim_lines(claims: pd.DataFrame) -> list[str]:
    """One verdict line per claim row: its word, estimate and interval, level, seeds, role and reason."""
    from growcert.report.verdicts import percent

    def number(value) -> str:
        return "–" if pd.isna(value) else f"{value:.4g}"

    return [f"- {row.claim}: **{row.verdict}**: {number(row.estimate)} [{number(row.low)}, {number(row.high)}] "
            f"({percent(row.level)}, {row.seeds} seeds) against the paper's {row.paper_effect} ({row.paper_value}; "
            f"SESOI {row.sesoi}); {row.role}; direction {row.direction if pd.notna(row.direction) else '–'}; {row.why}"
            for row in claims.itertuples()]


def seeds_of(out: Path, name: str) -> dict:
    return json.loads((out / name / "provenance.json").read_text())["settings"]


def pinn_lines(out: Path) -> list[str]:
    settings = seeds_of(out, "pinn")
    table = pd.read_csv(out / "pinn_table.csv")
    return [f"Each optimizer's learning rate is the best of its own grid on tuning seed(s) "
            f"{settings.get('tuning_seeds')}, which are trained and never judged; the claim is judged on seeds "
            f"{settings['seeds']} at those rates (steps to test ℓ2 ≤ {settings.get('target_l2', 0.4):g}, evaluated "
            f"every {settings.get('eval_every')} steps, cap {settings.get('steps')}):", "",
            table.to_markdown(index=False, floatfmt=".4g"), ""]


def preference_lines(out: Path) -> list[str]:
    summary = pd.read_csv(out / "preference" / "summary.csv")
    table = summary.groupby("optimizer", sort=False).agg(
        seeds=("seed", "nunique"), accuracy=("final_reward_acc", "median"), drift=("final_drift", "median"))
    table.columns = ["seeds", "median final held-out reward accuracy", "median final drift"]
    return ["Each PopulationRiskAdam reading (gate reading × variance source) is paired by seed with AdamW; the "
            "accuracy gain and the drift ratio are judged per reading at its Holm level, each claim's primary row "
            "over every reading:", "", table.reset_index().to_markdown(index=False, floatfmt=".4g"), ""]


def write_readme(out: Path, record: dict) -> None:
    """README.md of a kept run, from its files: reproduction, cost, each task's table and the verdict lines."""
    cost, rejudged = record["cost"], record.get("rejudged")
    claims = pd.read_csv(out / "claims.csv")
    readme = ["# P2 at 8 seeds: PINN, noisy DPO and drift–diffusion (docs/science.md, \"Verdicts\")", "",
              f"Reference run of {record['date']}, commit `{record['commit']}`, config `{record['config_file']}` "
              "(the default run's settings, 8 judged seeds). Reproduce (resumable; keeps every finished job):", "",
              f"    {record['command']}", ""]
    if rejudged:
        readme += [f"Judged again on {rejudged['date']} at commit `{rejudged['commit']}` from its own task tables "
                   "(no retraining):", "", f"    {rejudged['command']}", ""]
    readme += [f"Cost on {record['machine'].get('cpus', os.cpu_count())} cores: {cost['cpu_hours']} CPU-hours over "
               f"{cost['jobs']} jobs ({cost['job_wall_hours']} job wall-hours), peak disk {cost['peak_disk_gb']} GB "
               f"({cost['disk_samples']} samples). Per rule: "
               + "; ".join(f"{row['rule']} {row['jobs']} jobs, {row['cpu_s'] / 60:.1f} CPU-min"
                           for row in cost["per_rule"]) + ".", "",
               "Parts of the sweep (each resumed the finished jobs of the last): "
               + "; ".join(f"started {part['started']} at commit {part['commit'][:7]}" for part in cost["parts"])
               + ".", "",
               "## PINN: steps to test ℓ2 ≤ 0.40 against the best-tuned AdamW", "", *pinn_lines(out),
               "## Noisy DPO: final held-out reward accuracy and drift", "", *preference_lines(out),
               "## Drift–diffusion", "",
               "Per seed, the larger deviation of the fitted drift and fluctuation exponents from 1 and ½ over every "
               "theory run; judged as an equivalence: reproduced when the whole interval over seeds lies within the "
               f"margin 0.1 (theory seeds {seeds_of(out, 'theory')['seeds']}). Theory's implementation checks "
               "(exact identities, not claims) are in `checks.csv`.", "",
               f"## {QUESTION}", "", *claim_lines(claims), ""]
    (out / "README.md").write_text("\n".join(readme), encoding="utf-8")
    print(f"kept the p2-small run in {out}: {len(claims)} claim rows, {cost['cpu_hours']} CPU-hours")


def main(argv: list[str] | None = None) -> None:
    parser = sweeps.reference_arguments(__doc__, "p2-small", CONFIG, "a smaller one for a smoke run")
    args = parser.parse_args(argv)
    if args.rejudge:
        rejudge(Path(args.out))
        return
    results = Path(args.results)
    command = sweeps.reference_command(__file__, args, CONFIG)
    if args.run and (status := run_sweep(results, args.cores, args.config, targets(results))) != 0:
        sys.exit(status)
    export(results, Path(args.out), command, args.config)


if __name__ == "__main__":
    main()
