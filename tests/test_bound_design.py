"""The bound design's cost model and budget search (growcert.report.bound_design) on the committed p1-seeds run's
measured costs (docs/reference-results/p1-seeds/bound-design.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from growcert.report.bound_design import (
    BUDGET_CPU_HOURS,
    CommittedCost,
    largest_affordable_pool,
    retraining_cpu_hours,
    run_cost,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def committed() -> CommittedCost:
    return CommittedCost.of(
        ROOT / "docs" / "reference-results" / "p1-seeds", train_pool=128, test_pool=512, replicates=300
    )


def test_the_cost_model_gives_back_the_committed_dump_cost_at_the_committed_examples(committed):
    # 320 examples per pool is the committed 640 per store: the dumps cost what they did (66 jobs then, 64 here)
    hours = run_cost(committed, 320, 300, stores=committed.jobs["dump_gradients"])
    assert hours["dump"] == pytest.approx(committed.cpu_seconds["dump_gradients"] / 3600)


def test_cost_grows_with_the_pool_and_the_replicates(committed):
    totals = [run_cost(committed, pool, 2_000, 64)["total"] for pool in (512, 1_024, 2_048)]
    assert totals == sorted(totals) and totals[0] < totals[-1]
    assert run_cost(committed, 512, 10_000, 64)["misalignment"] > run_cost(committed, 512, 300, 64)["misalignment"]


def test_the_largest_affordable_pool_fits_the_budget_and_the_next_step_does_not(committed):
    pool = largest_affordable_pool(committed, 64, 2_000, ceiling=10_000)
    assert (
        run_cost(committed, pool, 2_000, 64)["total"]
        <= BUDGET_CPU_HOURS
        < run_cost(committed, pool + 16, 2_000, 64)["total"]
    )
    assert largest_affordable_pool(committed, 64, 2_000, ceiling=pool - 16) == pool - 16
    assert retraining_cpu_hours(committed, 33) == pytest.approx(committed.cpu_seconds["train_model"] / 3600)
