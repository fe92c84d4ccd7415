"""Looks at a claim (growcert.referee.looks): the registry's looks traced to the commits that hold them, the level a
claim is judged at on a later look (P1's regime claims, P3's claims at their reference runs), and the rows that keep
a changed primary analysis's first registered form."""

import csv
import io
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats
from test_alignment import synthetic
from test_grow import COLUMNS, CONTROL, SCRATCH, depth_rows, growth_rows
from test_regime_map import synthetic_tables

from growcert.referee.claims import CLAIMS
from growcert.referee.looks import SPENDING, look_level
from growcert.report import regime
from growcert.report.alignment import misalignment_width_rows
from growcert.report.depth import depth_claims

REPO = Path(__file__).resolve().parents[1]
LOOKED = [(key, look) for key, claim in CLAIMS.items() for look in claim.looks]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


def history_available() -> bool:
    return (
        shutil.which("git") is not None
        and (REPO / ".git").exists()
        and subprocess.run(["git", "cat-file", "-e", "60dd39a"], cwd=REPO, capture_output=True).returncode == 0
    )


@pytest.mark.skipif(not history_available(), reason="needs the repository's git history")
@pytest.mark.parametrize("key, look", LOOKED, ids=[f"{key}-{look.commit}" for key, look in LOOKED])
def test_every_registered_look_is_in_the_commit_it_names(key, look):
    """The look's commit is dated as registered and holds the run's claims.csv with rows of the claim at its seeds,
    whose words the look states: the claim's primary row's, or every row's before rows had roles (before the four
    words: holds True or False); for a look in a first form, its first-form row where the commit holds one (a
    secondary row), else the primary row of the day the first form was primary."""
    assert git("show", "-s", "--format=%ad", "--date=short", look.commit).strip() == look.date
    rows = [
        row
        for row in csv.DictReader(
            io.StringIO(git("show", f"{look.commit}:docs/reference-results/{look.run}/claims.csv"))
        )
        if row["claim_id"] == key
    ]
    first_form = [row for row in rows if look.form and f"first registered form ({look.form})" in row["claim"]]
    rows = first_form or [row for row in rows if row.get("role", "primary") in ("primary", "part", "")]
    assert rows, f"{look.run} at {look.commit} has no row of {key}"
    if "seeds" in rows[0]:
        assert look.seeds in {int(row["seeds"]) for row in rows}
        at = [row for row in rows if int(row["seeds"]) == look.seeds]
        decided = first_form or [row for row in at if row.get("role") == "primary"] or at  # the claim's own row
        words = {row["verdict"] for row in decided}
    else:  # the first format: seeds listed in the note, a holds column
        assert all(re.search(r"seeds ([\d, ]+);", row["note"]).group(1).count(",") + 1 == look.seeds for row in rows)
        words = {f"holds {row['holds']}" for row in rows}
    assert all(word in look.word for word in words), (words, look.word)


@pytest.mark.skipif(not history_available(), reason="needs the repository's git history")
@pytest.mark.parametrize("key", [key for key, claim in CLAIMS.items() if claim.first_form])
def test_every_first_form_names_the_commit_that_changed_it(key):
    form = CLAIMS[key].first_form
    assert git("show", "-s", "--format=%ad", "--date=short", form.commit).strip() == form.date


def final_level_two_looks(fraction: float, level: float, first_analyses: int = 1) -> float:
    """The O'Brien–Fleming-type design at two looks from scipy's bivariate normal, apart from stats.sequential: c_1
    from the first look's share α(t_1) = 2 − 2Φ(z_{α/2}/√t_1), split among `first_analyses` analyses of data of
    that size; c_2 from P(|Z_1| < c_1, |Z_2| ≥ c_2) = α − α(t_1)."""
    alpha = 1 - level
    early = 2 * stats.norm.sf(stats.norm.isf(alpha / 2) / np.sqrt(fraction))
    first = stats.norm.isf(early / first_analyses / 2)
    normal = stats.multivariate_normal(
        mean=[0, 0], cov=[[1, np.sqrt(fraction)], [np.sqrt(fraction), 1]], abseps=1e-8, releps=1e-8
    )
    inside_first = 1 - early / first_analyses
    second = optimize.brentq(
        lambda c: inside_first - normal.cdf([first, c], lower_limit=[-first, -c]) - (alpha - early), 1.5, 3.5
    )
    return 1 - 2 * stats.norm.sf(second)


def test_level_at_a_first_and_a_later_look():
    """The audit's example: p1-interventions judged on 12 seeds after its look at 6 uses 95.2219 %, not 95 %."""
    assert SPENDING == "obrien_fleming"
    first = look_level("p1_intervention_scale", 6, "p1-interventions", 0.95)
    assert first.level == 0.95 and first.look == 1 and first.note == ""
    assert look_level("p1_intervention_scale", 12, None, 0.95).level == 0.95  # not a reference run: a first look
    second = look_level("p1_intervention_scale", 12, "p1-interventions", 0.95)  # a look at 6 seeds, now 12
    assert second.look == 2 and second.fractions == (0.5, 1.0) and second.analyses == (1, 1)
    assert second.level == pytest.approx(final_level_two_looks(0.5, 0.95), abs=2e-5)
    assert second.level == pytest.approx(0.952219, abs=1e-6)  # O'Brien–Fleming spends 0.0056 at half the seeds
    assert "Second look: O'Brien–Fleming boundary" in second.note and "nominal level 95.22 %" in second.note
    third = look_level("p1_regime_budget", 16, "p1-seeds", 0.95)  # 3 seeds in p1-regime, 8, now 16
    assert third.look == 3 and third.fractions == (3 / 16, 0.5, 1.0) and third.level > second.level - 1e-6


def test_looks_on_disjoint_seed_sets_each_count_at_their_own_fraction():
    """p3-depth looked at seeds 0-2, then at seeds 3-5 alone, then at 0-5: the two looks at 3 seeds are two analyses
    of data at fraction 3/6 (not one, as before 2026-12-07): they split that fraction's share, so the final level is
    stricter than after one look at half the seeds."""
    at = look_level("p3_depth_plateau", 6, "p3-depth", 0.95)
    assert at.look == 3 and at.fractions == (0.5, 1.0) and at.analyses == (2, 1)
    assert at.level == pytest.approx(final_level_two_looks(0.5, 0.95, first_analyses=2), abs=2e-5)
    assert at.level > final_level_two_looks(0.5, 0.95) + 1e-3
    assert "Third look" in at.note and "2 analyses at 0.5" in at.note


@pytest.mark.parametrize(
    "key, run, analyses", [("advise_beats_first_order", "advise-check", 3), ("p1_misalignment_width", "p1-seeds", 2)]
)
def test_a_changed_analysis_of_the_same_seeds_is_a_look(key, run, analyses):
    """p̂'s floor rule judged the same 8 seeds as its first form did: two analyses of one seed set, each at half the
    level (Bonferroni), whatever their dependence; the registered look in today's form on those seeds is this
    judgement itself. advise-check's claim had three: the untuned first form, the tuned S and lr on 112 checkpoints,
    and the same seeds with the plateau checkpoints and a third growth procedure, each at a third of the level."""
    at = look_level(key, 8, run, 0.95)
    assert at.look == analyses and at.fractions == (1.0,) and at.analyses == (analyses,)
    assert at.level == pytest.approx(1 - 0.05 / analyses, abs=1e-9)
    assert "(first form: " in at.note


def test_regime_claims_at_a_later_look_use_the_boundary_level():
    """p1-seeds judged on 16 seeds (registered looks at 3 and 8): the context's part is judged at the boundary's
    nominal level, not at 95 %, and the row says which look it is; the same table outside a reference run is a
    first look."""
    alignment, training = synthetic_tables(slopes={256: 0.4}, seeds=range(16))
    table = regime.regime_table(alignment, training)
    tables = regime.regime_tables(table)
    expected = look_level("p1_regime_budget", 16, "p1-seeds", 0.95)
    rows = [
        row
        for row in regime.regime_claims(table, tables, 0.95, reference="p1-seeds")
        if row["claim_id"] == "p1_regime_budget"
    ]
    assert [row["role"] for row in rows] == ["primary"] and rows[0]["seeds"] == 16
    assert rows[0]["level"] == pytest.approx(expected.level) and expected.level > 0.952
    assert "Third look: O'Brien–Fleming boundary" in rows[0]["note"]
    plain = [row for row in regime.regime_claims(table, tables, 0.95) if row["claim_id"] == "p1_regime_budget"]
    assert plain[0]["level"] == 0.95 and "look" not in plain[0]["note"]


def test_depth_claims_at_a_later_look_use_the_boundary_level():
    """p3-depth judged on 6 seeds after two looks at 3 (seeds 0-2, then 3-5): every P3 claim row (falls, settles,
    grown vs scratch) is judged at the boundary's nominal level."""
    seeds = tuple(range(6))
    depth = depth_rows([9000.0, 4000.0, 3100.0, 3000.0], seeds=seeds, jitter=(1.0, 1.03, 0.97, 1.01, 0.99, 1.02))
    growth = growth_rows(SCRATCH, [1.90, 2.853, 3.796, 2.376], control=CONTROL)
    more = growth[growth["seed"].isin([5, 6])].assign(seed=lambda frame: frame["seed"] + 10)  # 6 seeds in all
    growth = pd.concat([growth, more], ignore_index=True)[COLUMNS]
    expected = look_level("p3_depth_plateau", 6, "p3-depth", 0.95).level
    rows = depth_claims(depth, growth, 0.95, reference="p3-depth")
    decided = [row for row in rows if row["role"] == "primary"]
    assert {row["claim_id"] for row in decided} == {"p3_depth_plateau", "p3_depth_settles", "p3_grown_vs_scratch"}
    for row in rows:
        assert row["level"] == pytest.approx(expected), row["claim"]
        assert "Third look: O'Brien–Fleming boundary" in row["note"]
    assert all(row["level"] == 0.95 for row in depth_claims(depth, growth, 0.95))


def test_p3_fall_keeps_its_first_form_the_scale_invariant_value():
    """P3's fall, first judged on the scale-invariant value: a secondary row in that form, dated with its reason,
    beside the raw value's primary row (it never decides the claim)."""
    rows = depth_claims(depth_rows([9000.0, 4000.0, 3100.0, 3000.0]), pd.DataFrame(columns=COLUMNS))
    (first,) = [row for row in rows if row["claim_id"] == "p3_depth_plateau" and row["role"] == "secondary"]
    assert "first registered form (scale-invariant value), changed 2026-12-03: the raw value" in first["claim"]
    assert "commit dece266" in first["note"]


def test_p1_p_hat_fall_keeps_its_first_form_without_the_floor_rule():
    """P1's p̂ fall, first judged without the floor rule: a secondary row in that form (which reads p̂ at its floor
    as contradicted) beside the primary row (not tested)."""
    _, misalignment = synthetic([32, 64, 128], slope=1.0, p_slope=0.0, noise=0.0)
    floor = misalignment.assign(p_hat=0.001 + 0.0001 * misalignment["seed"])
    primary, first = misalignment_width_rows(floor, (8, 8))
    assert primary["role"] == "primary" and primary["verdict"] == "not tested at this scale"
    assert first["role"] == "secondary" and first["verdict"] == "contradicted"  # what the first form said
    assert "first registered form (no p̂ floor rule), changed 2026-12-04: " in first["claim"]


def test_grokking_claims_at_a_later_look_use_the_boundary_level():
    """grokking-calibrated judged on 8 seeds after its registered look at 1: the readings' family is judged at the
    boundary's nominal level and every row says which look it is; outside a reference run it is a first look."""
    from growcert.experiments.grokking_report import grokking_claims

    seeds = range(6, 14)
    adamw = [
        {"optimizer": "AdamW wd=0.15", "weight_decay": 0.15, "seed": seed, "step_95": 12000.0 + 500 * seed}
        for seed in seeds
    ]
    reading = [
        {"optimizer": "poprisk-update-exact-wd0.15", "weight_decay": 0.15, "seed": seed, "step_95": 3000.0 + 100 * seed}
        for seed in seeds
    ]
    summary = pd.DataFrame(adamw + reading)
    settings = {
        "steps": 32000,
        "cap": "paired",
        "eval_every": 100,
        "adamw": {"weight_decays": [0.15]},
        "poprisk": {"weight_decays": [0.15]},
    }
    expected = look_level("p2_grokking", 8, "grokking-calibrated", 0.95)
    assert expected.look == 2 and expected.level > 0.95
    rows = grokking_claims(summary, settings, reference="grokking-calibrated")
    primary = [row for row in rows if row["role"] == "primary"]
    assert len(primary) == 1 and primary[0]["level"] == pytest.approx(expected.level)
    assert all("Second look: O'Brien–Fleming boundary" in row["note"] for row in rows)
    plain = grokking_claims(summary, settings)
    assert [row for row in plain if row["role"] == "primary"][0]["level"] == 0.95
    assert not any("look:" in row["note"] for row in plain)


def judged_at(rows: list[dict], key: str) -> tuple[float, list[str]]:
    """The family's level of claim `key`'s rows (the smallest: Holm's last rank is judged at it) and their notes."""
    mine = [row for row in rows if row.get("claim_id") == key and row["role"] in ("primary", "part")]
    assert mine, f"no row of {key}"
    return min(row["level"] for row in mine), [row["note"] for row in mine]


def assert_later_look(rows: list[dict], plain: list[dict], key: str, seeds: int, run: str) -> None:
    """Rows judged in reference run `run` on `seeds` seeds use `look_level`'s boundary level and say which look it
    is; the same table outside a reference run is a first look at the stage's 95 %."""
    expected = look_level(key, seeds, run, 0.95)
    assert expected.look >= 2 and expected.level > 0.95
    level, notes = judged_at(rows, key)
    assert level == pytest.approx(expected.level, abs=1e-9)
    assert all(f"{expected.note.split(':')[0]}:" in note for note in notes), notes
    level, notes = judged_at(plain, key)
    assert level == pytest.approx(0.95) and not any("look:" in note for note in notes)


def test_interventions_at_a_later_look_use_the_boundary_level():
    """The audit's example: p1-interventions on 12 seeds after its look at 6 (0.952219, not 0.95)."""
    from growcert.report.interventions import intervention_claim

    rows = []
    for seed in range(12):
        for point in ("block0", "block1"):
            for epsilon in (1e-4, 0.1):
                rows.append(
                    {
                        "family": "llama",
                        "dataset": "shakespeare",
                        "width": 32,
                        "depth": 2,
                        "seed": seed,
                        "step": 300,
                        "point": point,
                        "variant": "shared",
                        "draw": 0,
                        "epsilon": epsilon,
                        "ratio": 0.97 + 0.002 * (seed % 3),
                    }
                )
    table = pd.DataFrame(rows)
    assert_later_look(
        intervention_claim(table, reference="p1-interventions"),
        intervention_claim(table),
        "p1_intervention_scale",
        12,
        "p1-interventions",
    )


def test_preference_pinn_and_theory_at_a_later_look_use_the_boundary_level(tmp_path):
    """p2-small's three tasks judged on 16 seeds after their registered look at 8."""
    from growcert.experiments import theory
    from growcert.experiments.pinn_report import pinn_claims
    from growcert.experiments.preference_report import preference_claims
    from growcert.experiments.theory_report import theory_claims

    seeds = range(16)
    gated = "poprisk-update-exact-wd0"
    preference = pd.DataFrame(
        [
            {
                "optimizer": arm,
                "seed": seed,
                "final_reward_acc": 0.6 + 0.01 * (seed % 4) + lift,
                "final_drift": 3.0 / factor + 0.1 * (seed % 3),
                "seconds": 1.0,
            }
            for arm, lift, factor in (("AdamW", 0.0, 1.0), (gated, 0.07, 3.0))
            for seed in seeds
        ]
    )
    for key in ("p2_dpo_accuracy", "p2_dpo_drift"):
        assert_later_look(
            preference_claims(preference, {}, reference="p2-small"),
            preference_claims(preference, {}),
            key,
            16,
            "p2-small",
        )

    pinn = pd.DataFrame(
        [
            {
                "optimizer": arm,
                "lr": 1e-3,
                "seed": seed,
                "step_to_target": steps + 10 * (seed % 3),
                "final_l2": 0.3,
                "seconds": 1.0,
            }
            for arm, steps in (("AdamW", 600), (gated, 250))
            for seed in (*seeds, 99)
        ]
    )
    settings = {"steps": 800, "seeds": list(seeds), "tuning_seeds": [99]}
    assert_later_look(
        pinn_claims(pinn, settings, reference="p2-small"), pinn_claims(pinn, settings), "p2_pinn", 16, "p2-small"
    )

    runs = [("digits", "squared"), ("digits", "cross_entropy"), ("regression", "squared")]
    measures = {
        "reservoir_dim": 10.0,
        "outputs": 30.0,
        "invisibility_ratio": 1e-4,
        "coupling_residual": 1e-9,
        "coupling_bound": 1e-6,
        "noise_reservoir_fraction": 0.4,
        "response_reservoir_noise_retrained": 1e-5,
        "response_channel_noise_retrained": 1e-1,
        "delta_test_mse_reservoir_noise": 1e-8,
        "delta_test_mse_channel_noise": 1e-2,
        "delta_test_mse_iid": 1e-2,
    }
    summary = [
        {"task": task, "loss": loss, "seed": seed, "measure": name, "value": value}
        for seed in seeds
        for task, loss in runs
        for name, value in {
            **measures,
            "drift_exponent": 1.0 + 0.01 * (seed % 3),
            "fluctuation_exponent": 0.5 - 0.01 * (seed % 2),
        }.items()
    ]
    pd.DataFrame(summary, columns=theory.SUMMARY_COLUMNS).to_csv(tmp_path / "summary.csv", index=False)
    settings = {"seeds": list(seeds)}
    assert_later_look(
        theory_claims(tmp_path, settings, reference="p2-small"),
        theory_claims(tmp_path, settings),
        "p2_drift_diffusion",
        16,
        "p2-small",
    )


def test_alignment_and_advise_check_at_a_later_look_use_the_boundary_level():
    """p1-seeds' p̂ fall on 16 seeds (looks at 8 in two forms) and advise-check on its 8 seeds after its first form's
    look at them (a changed analysis of the same seeds)."""
    from growcert.config import stage_settings
    from growcert.report import advice_check

    _, misalignment = synthetic([32, 64, 128], slope=1.0, p_slope=-0.5, seeds=range(16))
    assert_later_look(
        misalignment_width_rows(misalignment, (8, 8), reference="p1-seeds"),
        misalignment_width_rows(misalignment, (8, 8)),
        "p1_misalignment_width",
        16,
        "p1-seeds",
    )

    rows = [
        {
            "model": f"m{seed}",
            "train_seed": seed,
            "point": f"block{index}",
            "point_index": index,
            "variant": "new_block",
            "decision": "grow here" if index == 1 else "no evidence",
            "value": value,
            "scaled_value": 3.0 - index,
            "outcome": outcome + 0.001 * seed,
            "outcome_se": 0.1,
            "b_exact": 0.1,
        }
        for seed in range(8)
        for index, (value, outcome) in enumerate(((5.0, -1.0), (1.0, 1.0), (2.0, -2.0)))
    ]
    table, settings = pd.DataFrame(rows), stage_settings("advise_check")
    assert_later_look(
        advice_check.claim_judgement_rows(table, settings, "test", reference="advise-check"),
        advice_check.claim_judgement_rows(table, settings, "test"),
        "advise_beats_first_order",
        8,
        "advise-check",
    )
