"""Every population-risk task runs every configured gate variant (experiments/arms.py): arms from the config,
one claim row per variant, and gate diagnostics that explain a variant without changing its trajectory."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.experiments.arms import GateDiagnostics, arm_name, square_sums_from_rows
from growcert.experiments.grokking import optimizer_arms as grokking_arms
from growcert.experiments.grokking import run_grokking
from growcert.experiments.grokking_report import grokking_claims
from growcert.experiments.pinn import optimizer_arms as pinn_arms
from growcert.experiments.pinn import run_pinn
from growcert.experiments.preference import optimizer_arms as preference_arms
from growcert.optim import PopulationRiskAdam, microbatch_square_sums, per_example_gradients, per_example_square_sums
from growcert.referee.rows import ROW_COLUMNS
from growcert.referee.verdicts import CONTRADICTED, REPRODUCED, UNRESOLVED

VARIANTS = [
    f"poprisk-{gate}-{variance}-wd0"
    for gate in ("update", "gradient")
    for variance in ("exact", "streaming", "microbatch")
]
GROKKING_VARIANTS = [name.replace("-wd0", "-wd0.01") for name in VARIANTS]  # at AdamW's decay 0.01


def test_default_arms_cover_every_reading_and_source():
    grokking = [arm.name for arm in grokking_arms(stage_settings("grokking", {}))]
    assert grokking == ["AdamW wd=0.01", "AdamW wd=1", "Grokfast-EMA wd=0.005 (L2)"] + GROKKING_VARIANTS  # 6 + 3
    pinn = pinn_arms(stage_settings("pinn", {}))
    gated = [arm for arm in pinn if arm.name != "AdamW"]
    lrs = stage_settings("pinn", {})["poprisk"]["lrs"]
    assert sorted({arm.name for arm in gated}) == sorted(
        name for name in VARIANTS if "streaming" not in name
    )  # exact and microbatch, both readings
    assert len(gated) == 4 * len(lrs) and {arm.lr for arm in gated} == set(lrs)
    dpo = [arm.name for arm in preference_arms(stage_settings("preference", {}))]
    assert dpo == ["AdamW"] + [name for name in VARIANTS if "streaming" not in name]


def test_arms_follow_the_config_and_say_their_variant():
    settings = stage_settings(
        "grokking",
        {
            "adamw": {"weight_decays": [0.0, 0.01]},
            "poprisk": {
                "gates": ["off", "gradient"],
                "variances": ["microbatch"],
                "weight_decays": [0.0, 0.01],
                "microbatches": 8,
            },
        },
    )
    arms = [arm for arm in grokking_arms(settings) if arm.kind == "poprisk"]
    assert [arm.name for arm in arms] == [
        "poprisk-off-microbatch-wd0",
        "poprisk-off-microbatch-wd0.01",
        "poprisk-gradient-microbatch-wd0",
        "poprisk-gradient-microbatch-wd0.01",
    ]
    assert {arm.microbatches for arm in arms} == {8} and arm_name("update", "exact", 1.0) == "poprisk-update-exact-wd1"
    assert [
        arm for arm in grokking_arms(stage_settings("grokking", {"poprisk": {"gates": []}})) if arm.kind == "poprisk"
    ] == []


@pytest.mark.parametrize("section, settings", [("grokking", {"batch_size": 30}), ("preference", {"batch_size": 30})])
def test_microbatches_that_do_not_divide_the_batch_are_refused_naming_the_key(section, settings):
    with pytest.raises(ConfigError, match=rf"'{section}.poprisk.microbatches': 4 does not divide the batch of 30"):
        stage_settings(section, settings)


def test_each_variant_gets_its_own_claim_row():
    # 8 seeds: the registered estimand is the median, whose interval has finite ends at Holm's 98.3 % from 7 seeds
    rows = [
        ("AdamW wd=0.01", 0.01, [3000, 3100, 2900, 3050] * 2),
        ("poprisk-update-exact-wd0.01", 0.01, [1000, 1020, 990, 1010] * 2),
        ("poprisk-update-streaming-wd0.01", 0.01, [None, 1000, None, 1000] * 2),
        ("poprisk-gradient-microbatch-wd0.01", 0.01, [5000, 5200, 4900, 5100] * 2),
    ]
    summary = pd.DataFrame(
        [
            {"optimizer": name, "weight_decay": wd, "seed": seed, "step_95": step}
            for name, wd, steps in rows
            for seed, step in enumerate(steps)
        ]
    ).astype({"step_95": "Int64"})
    claims = [
        row
        for row in grokking_claims(summary, {"steps": 8000, "adamw": {"weight_decays": [0.01]}})
        if row["role"] != "secondary"
    ]  # the AFT rows: a secondary reading (tests/test_grokking.py)
    text = "grokking: steps to 95 % held-out, PopulationRiskAdam vs AdamW"
    assert [row["claim"] for row in claims] == [f"{text} ({name})" for name, _, _ in rows[1:]] + [
        f"{text} (every reading, Holm; deciding: poprisk-update-exact-wd0.01)"
    ]
    assert all(list(row) == ROW_COLUMNS and row["claim_id"] == "p2_grokking" for row in claims)
    # about 3x faster in every seed (lower bounds 2.8-2.9x, above the SESOI 2.22x): reproduced at Holm's first
    # level; 0.6x in every seed: contradicted at its second; 3x in half the seeds and never reached in the other half:
    # the median's interval runs from 0 (a censored seed) to 3.5x, so unresolved (not "not reached" as a verdict).
    # The readings disagree.
    assert [row["verdict"] for row in claims] == [REPRODUCED, UNRESOLVED, CONTRADICTED, REPRODUCED]
    # Holm's levels by rank (the fast reading is decided at the smallest α, so it ranks first)
    assert [row["level"] for row in claims[:3]] == pytest.approx([1 - 0.05 / 3, 0.95, 0.975])
    assert claims[3]["level"] == claims[0]["level"]
    assert "disagree: contradicted by poprisk-gradient-microbatch-wd0.01" in claims[3]["why"]
    logs = np.log(np.array([3000, 3100, 2900, 3050] * 2) / np.array([1000, 1020, 990, 1010] * 2))
    assert claims[0]["estimate"] == pytest.approx(math.exp(np.median(logs))) and claims[0]["seeds"] == 8
    # half the streaming seeds censored: the median's point value could be either side, so it is undetermined
    assert "4 of 8 variant runs at the 8,000-step cap" in claims[1]["why"] and claims[1]["estimate"] is None
    assert claims[1]["low"] == 0.0 and claims[2]["high"] < 1.0 and claims[3]["seeds"] == 8
    assert claims[0]["this_run"] == "poprisk-update-exact-wd0.01: 1,005 vs AdamW wd=0.01: 3,025 (median steps)"
    assert "8 seed(s)" in claims[0]["note"]


GROKKING = {
    "p": 11,
    "train_fraction": 0.6,
    "seeds": [0],
    "steps": 12,
    "batch_size": 16,
    "eval_every": 4,
    "stop_at_test_acc": None,
    "model": {"width": 16, "depth": 1, "heads": 2},
    "adamw": {"weight_decays": [0.01]},
    "grokfast": {"enabled": False},
    "poprisk": {"weight_decays": [0.01]},
}


def test_grokking_diagnostics_leave_every_trajectory_unchanged(tmp_path):
    measured = run_grokking({**GROKKING, "diagnostics_every": 1}, tmp_path / "a", log=lambda _: None, device="cpu")[
        "curves"
    ]
    unmeasured = run_grokking(
        {**GROKKING, "diagnostics_every": 10**6}, tmp_path / "b", log=lambda _: None, device="cpu"
    )["curves"]
    columns = [
        "optimizer",
        "step",
        "train_loss",
        "test_loss",
        "train_acc",
        "test_acc",
        "gated_fraction",
        "open_fraction",
    ]
    pd.testing.assert_frame_equal(measured[columns], unmeasured[columns], check_exact=True)
    later = measured[measured["step"] > 0].set_index(["optimizer", "step"])
    for name in GROKKING_VARIANTS:  # the ratio is measured for the estimated sources only, and is a positive number
        ratios = later.loc[name, "variance_ratio"]
        assert ratios.isna().all() if "exact" in name else (ratios > 0).all(), (name, ratios)
        assert later.loc[name, "open_fraction"].between(0, 1).all()
    assert unmeasured["variance_ratio"].isna().all()


def test_pinn_diagnostics_leave_the_trajectory_unchanged(tmp_path):
    settings = {
        "ic_points": 32,
        "collocation_points": 64,
        "boundary_points": 16,
        "batch_size": 24,
        "width": 8,
        "depth": 2,
        "steps": 9,
        "eval_every": 3,
        "test_grid": [16, 8],
        "seeds": [0],
        "adamw_lrs": [1e-2],
        "poprisk": {"lrs": [1e-2], "gates": ["update", "gradient"], "variances": ["microbatch"]},
    }
    measured = run_pinn({**settings, "diagnostics_every": 1}, tmp_path / "a", log=lambda _: None, device="cpu")[
        "curves"
    ]
    unmeasured = run_pinn({**settings, "diagnostics_every": 1000}, tmp_path / "b", log=lambda _: None, device="cpu")[
        "curves"
    ]
    pd.testing.assert_frame_equal(
        measured.drop(columns="variance_ratio"), unmeasured.drop(columns="variance_ratio"), check_exact=True
    )
    gated = measured[measured["optimizer"].str.startswith("poprisk") & (measured["step"] > 0)]
    assert (gated["variance_ratio"] > 0).all() and unmeasured["variance_ratio"].isna().all()


def regression_batch(generator, b=16, d=5):
    x = torch.randn(b, d, generator=generator)
    return x, x @ torch.arange(1.0, d + 1) + torch.randn(b, generator=generator)


def squared_error(outputs, targets):
    return 0.5 * (outputs.squeeze(-1) - targets).square()


def test_variance_ratio_is_one_where_the_microbatch_estimate_is_the_exact_one():
    """Closed form: with one example per micro-batch (K = b) and no smoothing (variance_beta = 0), the
    microbatch variance (Σ m_j² − K μ²)/(K(K − 1)) is s²/b of the batch itself, so the ratio is 1."""
    generator = torch.Generator().manual_seed(0)
    model = nn.Linear(5, 1)
    optimizer = PopulationRiskAdam(
        model.parameters(), lr=1e-2, variance="microbatch", microbatches=16, variance_beta=0.0
    )
    diagnostics = GateDiagnostics(optimizer, every=1)
    for step in range(1, 6):
        x, y = regression_batch(generator)
        _, sums = microbatch_square_sums(model, squared_error, x, y, microbatches=16)
        diagnostics.before_step(step, lambda: per_example_square_sums(model, squared_error, x, y, set_grad=False)[1])
        optimizer.step(square_sums=sums)
        diagnostics.after_step()
    row = diagnostics.row()
    assert row["variance_ratio"] == pytest.approx(1.0, rel=1e-4) and 0 < row["open_fraction"] <= 1
    assert diagnostics.row() == {
        "open_fraction": pytest.approx(math.nan, nan_ok=True),
        "variance_ratio": pytest.approx(math.nan, nan_ok=True),
    }  # cleared


def test_streaming_variance_matches_the_exact_one_with_the_parameters_frozen():
    """lr = 0: the gradients are i.i.d. draws of one fixed distribution, so the streaming estimate is unbiased
    for the variance of the batch mean (module docstring of optim/adam.py) and its median ratio to the exact
    s²/b of the same batch sits near 1 (measured 0.98 on grokking)."""
    generator = torch.Generator().manual_seed(1)
    model = nn.Linear(5, 1)
    optimizer = PopulationRiskAdam(model.parameters(), lr=0.0, variance="streaming", variance_beta=0.99)
    diagnostics = GateDiagnostics(optimizer, every=10)
    for step in range(1, 1001):
        x, y = regression_batch(generator)
        optimizer.zero_grad()
        squared_error(model(x), y).mean().backward()
        diagnostics.before_step(step, lambda: per_example_square_sums(model, squared_error, x, y, set_grad=False)[1])
        optimizer.step()
        diagnostics.after_step()
    ratios = torch.tensor(diagnostics.ratios[20:])  # after the EMA's warm-up
    # one ratio is estimate / (s²/b of 16 examples): its median over elements and steps is near, not at, 1
    assert 0.75 < ratios.median().item() < 1.3, ratios.median()


def test_the_pinn_rows_as_square_sums_give_the_exact_gates_variance():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    x, y = torch.randn(10, 3), torch.randn(10, 2)
    loss = lambda outputs, targets: (outputs - targets).square().sum(-1)  # noqa: E731
    _, rows = per_example_gradients(model, loss, x, y)
    shifted = {p: z - z.mean(dim=0) for p, z in rows.items()}  # rows centred away from .grad, as in the PINN
    sums = square_sums_from_rows(shifted)
    for p, z in rows.items():
        expected = z.var(dim=0, unbiased=True) / 10
        assert torch.allclose(sums.variance_of_mean(p), expected, rtol=1e-5, atol=1e-9)
