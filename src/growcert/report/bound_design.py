"""The held-out pool a run deciding P1's bound claims (p̂ ≤ B_exact, iid and train → test) needs, from a committed
run's tables (docs/reference-results/p1-seeds/bound-design.md; docs/science.md, "Verdicts", bounds).

Per non-vacuous determined cell of the last checkpoint (what `report.alignment.certificate_judgement` judges):

- its **separation**: the gap of the point estimates B̂ − p̂ over the two facing half-widths of the judge's
  intervals, (p_high − p̂) + (B̂ − b_low), at the committed pool. A cell shows p ≤ B exactly when it is ≥ 1, and it
  grows as the intervals narrow with the pool;
- the pool size at which it shows p ≤ B with 80 % power (`stats.bound_power.pool_size_for_power`, the point
  estimates taken as the truth, both pools of that size, R = `replicates`).

The design is the pool size of the median cell by separation, per mode. Where that exceeds what the dataset's
held-out split holds or what the budget buys (`run_cost`), the largest size that fits, and the power it has.

    python -m growcert.report.bound_design docs/reference-results/p1-seeds

prints the figures of bound-design.md.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from growcert.pipeline.artifacts import KEPT_ALIGNMENT, KEPT_MISALIGNMENT, PROVENANCE
from growcert.referee.verdicts import VACUOUS_BOUND
from growcert.report.alignment import bound_cells, last_step
from growcert.stats.bound_power import BoundCell, pool_size_for_power, shown_probability
from growcert.stats.certificates import b_exact_interval
from growcert.stats.intervals import misalignment_interval
from growcert.stats.seeds import POWER

MODES = ("iid", "train_test")
LEVEL = 0.95  # the claims' level (their first look: no sequential boundary)
DESIGN_REPLICATES = 2_000  # R ≫ k: at 1,983 examples k ≤ 123 (M = K = 8), so T ≥ 0.94 k
HELD_OUT_WINDOWS = 1_983  # Shakespeare's held-out split at context 256 (test_fraction 0.1): non-overlapping windows
BUDGET_CPU_HOURS = 2.0
IMPORT_SECONDS = {"dump_gradients": 1.7, "estimate_alignment": 1.1, "estimate_misalignment": 1.1}  # science.md, Cost


@dataclass(frozen=True)
class CommittedCost:
    """A committed run's measured CPU seconds per rule (its provenance record's cost.per_rule, artifacts.PROVENANCE),
    its jobs, and the pool sizes and replicates its stores had."""

    cpu_seconds: dict[str, float]
    jobs: dict[str, int]
    train_pool: int
    test_pool: int
    replicates: int

    @classmethod
    def of(cls, folder: Path, train_pool: int, test_pool: int, replicates: int) -> CommittedCost:
        per_rule = json.loads(PROVENANCE.path(folder).read_text())["cost"]["per_rule"]
        return cls(
            {r["rule"]: r["cpu_s"] for r in per_rule},
            {r["rule"]: r["jobs"] for r in per_rule},
            train_pool,
            test_pool,
            replicates,
        )

    def per_job(self, rule: str) -> tuple[float, float]:
        """(the job's imports, the rest) in CPU seconds, per job of `rule`."""
        whole = self.cpu_seconds[rule] / self.jobs[rule]
        return IMPORT_SECONDS[rule], whole - IMPORT_SECONDS[rule]


# How the estimators' CPU grows, measured here on 2026-12-07 (growcert.stats.alignment_row and misalignment, iid, the
# three (M, K), on random float32 rows of N = 16,384, width 64 flattened; a shared 2-core machine): alignment 0.50,
# 0.81 and 2.51 CPU-s at n = 512, 1,024 and 2,048, fitted by a·n + b·n²; misalignment 0.47 s at R = 300 and 1.13 s
# at R = 2,000 (n = 512), 0.97-1.06 s at n = 1,024-2,048: set by R, not by n.
ALIGNMENT_LINEAR, ALIGNMENT_QUADRATIC = 8.94e-4, 1.62e-7  # CPU-s per example, per example²
MISALIGNMENT_FIXED, MISALIGNMENT_PER_REPLICATE = 0.35, 3.9e-4  # CPU-s, CPU-s per replicate


def run_cost(committed: CommittedCost, pool: int, replicates: int, stores: int) -> dict[str, float]:
    """CPU hours of dumping `stores` checkpoints with `pool` training and `pool` held-out examples each, estimating
    their alignment and misalignment: each rule's measured cost per job in the committed run, its imports kept and
    the rest scaled. Dumps by the examples; the estimators by the larger of the examples (reading the store) and
    the measured growth above (alignment's a·n + b·n² summed over the two pools; misalignment's fixed part plus the
    replicates). Training is not counted (`retraining_cpu_hours`)."""
    examples = 2 * pool / (committed.train_pool + committed.test_pool)

    def alignment_work(n):
        return ALIGNMENT_LINEAR * n + ALIGNMENT_QUADRATIC * n**2

    alignment_growth = (
        2 * alignment_work(pool) / (alignment_work(committed.train_pool) + alignment_work(committed.test_pool))
    )
    misalignment_growth = (MISALIGNMENT_FIXED + MISALIGNMENT_PER_REPLICATE * replicates) / (
        MISALIGNMENT_FIXED + MISALIGNMENT_PER_REPLICATE * committed.replicates
    )
    seconds = {}
    for rule, name, growth in (
        ("dump_gradients", "dump", examples),
        ("estimate_alignment", "alignment", max(examples, alignment_growth)),
        ("estimate_misalignment", "misalignment", max(examples, misalignment_growth)),
    ):
        fixed, rest = committed.per_job(rule)
        seconds[name] = (fixed + rest * growth) * stores
    hours = {name: value / 3600 for name, value in seconds.items()}
    return hours | {"total": sum(hours.values())}


def retraining_cpu_hours(committed: CommittedCost, runs: int) -> float:
    """CPU hours of training `runs` models again at the committed run's measured cost per run."""
    return committed.cpu_seconds["train_model"] / committed.jobs["train_model"] * runs / 3600


def cell_of(row, mode: str, train_pool: int | None = None) -> BoundCell:
    """A joined cell row (`report.alignment.bound_cells`) as a `BoundCell` at its committed held-out pool."""
    return BoundCell(
        float(row.p_hat),
        float(row.mu_4),
        float(row.mu_sigma_mu),
        float(row.tr_sigma2),
        float(row.mu_4_se_jack),
        float(row.mu_sigma_mu_se_jack),
        float(row.tr_sigma2_se_jack),
        int(row.n),
        int(row.M),
        int(row.K),
        mode,
        train_pool,
    )


def design_cells(folder: Path, replicates: int = DESIGN_REPLICATES, level: float = LEVEL) -> pd.DataFrame:
    """Every non-vacuous determined cell of both modes at the last checkpoint, with its separation at the committed
    pool (`separation`, whether it is shown there: `shown`) and the pool size for 80 % power (`pool_for_power`)."""
    alignment = pd.read_csv(KEPT_ALIGNMENT.path(folder))
    final = last_step(pd.read_csv(KEPT_MISALIGNMENT.path(folder)))
    parts = []
    for mode in MODES:
        every = final[final["mode"] == mode]
        cells = every[(every["status"] == "ok") & every["p_hat"].notna() & (every["b_exact"] < VACUOUS_BOUND)]
        joined, draws = bound_cells(cells, alignment, mode)
        _, p_high = misalignment_interval(joined["p_hat"], joined["replicates"], draws, level)
        b_low, _ = b_exact_interval(joined, joined["M"], joined["K"], level)
        joined = joined.assign(
            mode=mode,
            p_high=p_high,
            b_low=b_low,
            shown=p_high <= b_low,
            separation=(joined["b_exact"] - joined["p_hat"])
            / ((p_high - joined["p_hat"]) + (joined["b_exact"] - b_low)),
        )
        joined["pool_for_power"] = [
            pool_size_for_power(cell_of(row, mode), replicates, level)[0] for row in joined.itertuples()
        ]
        parts.append(joined)
    return pd.concat(parts, ignore_index=True)


def power_at(
    cells: pd.DataFrame,
    pool: int,
    replicates: int = DESIGN_REPLICATES,
    level: float = LEVEL,
    committed_train_pool: bool = False,
) -> np.ndarray:
    """Each cell's probability of showing p ≤ B at `pool` held-out examples, with as many training examples (or,
    `committed_train_pool`, the committed run's own)."""
    return np.array(
        [
            shown_probability(
                cell_of(row, row.mode, int(row.n_train) if committed_train_pool else None), pool, replicates, level
            )
            for row in cells.itertuples()
        ]
    )


def largest_affordable_pool(
    committed: CommittedCost, stores: int, replicates: int, ceiling: int, budget: float = BUDGET_CPU_HOURS
) -> int:
    """The largest pool size ≤ `ceiling` (a multiple of 16) whose `run_cost` fits `budget` CPU hours; 0 if none."""
    fits = [n for n in range(16, ceiling + 1, 16) if run_cost(committed, n, replicates, stores)["total"] <= budget]
    return fits[-1] if fits else 0


def report(folder: Path, stores: int = 64, replicates: int = DESIGN_REPLICATES) -> str:
    """The figures of bound-design.md, as markdown."""
    cells = design_cells(folder, replicates)
    committed = CommittedCost.of(folder, train_pool=128, test_pool=512, replicates=300)
    lines = [
        f"Non-vacuous determined cells (last checkpoint, B_exact < {VACUOUS_BOUND}), judged at {LEVEL:.0%} per "
        f"cell; design replicates R = {replicates:,}; both pools of the design size.",
        "",
        "| mode | cells | shown at 512 | median separation | median cell (M, width, point, reduction, seed) "
        "| its p̂, B_exact | pool for 80 % power there | median over cells of the pool for 80 % power |",
        "|---|---|---|---|---|---|---|---|",
    ]
    designs = {}
    for mode in MODES:
        part = cells[cells["mode"] == mode]
        middle = part["separation"].median()
        median_cell = part.loc[(part["separation"] - middle).abs().idxmin()]
        designs[mode] = int(median_cell["pool_for_power"])
        lines.append(
            f"| {mode} | {len(part)} | {int(part['shown'].sum())} | {middle:.3g} | {int(median_cell['M'])}, "
            f"{int(median_cell['width'])}, {median_cell['point']}, {median_cell['reduction']}, "
            f"{int(median_cell['seed'])} | {median_cell['p_hat']:.3g}, {median_cell['b_exact']:.3g} | "
            f"{designs[mode]:,} | {int(part['pool_for_power'].median()):,} |"
        )
    chosen = max(designs.values())
    check = {
        mode: (
            power_at(cells[cells["mode"] == mode], 512, 300, committed_train_pool=True).sum(),
            int(cells[cells["mode"] == mode]["shown"].sum()),
        )
        for mode in MODES
    }
    lines += [
        "",
        "The power model at the committed run's own settings (R = 300, 512 held-out and 128 training "
        "examples), against what its tables show: cells expected shown "
        + ", ".join(f"{mode} {expected:.1f} (shown: {shown})" for mode, (expected, shown) in check.items())
        + ".",
    ]
    affordable = largest_affordable_pool(committed, stores, replicates, HELD_OUT_WINDOWS)
    lines += [
        "",
        f"Pool size for 80 % power at the median cell of both modes: **{chosen:,}** examples per pool "
        f"(each of the {stores} stores: {chosen:,} held-out and {chosen:,} training examples).",
        "",
        "| pool | CPU hours: dump | alignment | misalignment | total |",
        "|---|---|---|---|---|",
    ]
    for pool in sorted({512, affordable, HELD_OUT_WINDOWS, chosen}):
        cost = run_cost(committed, pool, replicates, stores)
        lines.append(
            f"| {pool:,} | {cost['dump']:.2f} | {cost['alignment']:.2f} | {cost['misalignment']:.2f} | "
            f"{cost['total']:.2f} |"
        )
    lines += [
        "",
        f"Retraining the {stores} models (their checkpoints are not kept): "
        f"{retraining_cpu_hours(committed, stores):.2f} CPU hours more.",
        "",
        "| pool | mode | median cell's power | cells with ≥ 80 % power | cells expected shown | P(every cell shown) |",
        "|---|---|---|---|---|---|",
    ]
    for pool in sorted({affordable, HELD_OUT_WINDOWS}):
        for mode in MODES:
            part = cells[cells["mode"] == mode]
            power = power_at(part, pool, replicates)
            middle = part["separation"].median()
            median_power = power[int(np.argmin(np.abs(part["separation"].to_numpy() - middle)))]
            lines.append(
                f"| {pool:,} | {mode} | {median_power:.3g} | {int((power >= POWER).sum())} of {len(part)} | "
                f"{power.sum():.1f} | {math.prod(power):.3g} |"
            )
    by_mk = cells.groupby(["mode", "M"])["pool_for_power"].median().astype(int).rename("median pool for 80 %")
    return "\n".join(lines + ["", by_mk.reset_index().to_markdown(index=False)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folder", type=Path, help=f"a committed run's folder ({KEPT_MISALIGNMENT.name}, {KEPT_ALIGNMENT.name})"
    )
    parser.add_argument("--replicates", type=int, default=DESIGN_REPLICATES)
    arguments = parser.parse_args(argv)
    print(report(arguments.folder, replicates=arguments.replicates))


if __name__ == "__main__":
    main()
