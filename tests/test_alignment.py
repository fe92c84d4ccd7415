"""P1 estimation from a store: known planted moments come back; certificates order; claims judge honestly."""

import numpy as np
import pandas as pd
import pytest

from growcert.stages.alignment import estimate_alignment, estimate_misalignment
from growcert.report.alignment import alignment_claims
from growcert.stats import certificates, effective_dims
from growcert.stats.moments import population_moments
from growcert.store import GroupSpec, StoreWriter

SETTINGS = {"reductions": ["sum_positions", "flatten"], "detect_threshold": 2.0, "level": 0.95,
            "MK": [[8, 8], [32, 32]], "reference_MK": [8, 8], "modes": ["iid", "train_test"],
            "replicates": 4000, "seed": 0}
CHANNELS, HEIGHT, WIDTH = 6, 2, 2


def planted_store(path, n_train=300, n_test=600, mean_scale=0.35, seed=0):
    """q = mean + noise with iid positions: the sum over the 4 positions has mean 4·mean and covariance 4·I."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    mean = mean_scale * np.linspace(1.0, 2.0, CHANNELS)
    q = (mean[None, :, None, None] + rng.standard_normal((n, CHANNELS, HEIGHT, WIDTH))).astype(np.float32)
    spec = GroupSpec("block0", ("channel", "height", "width"), (CHANNELS, HEIGHT, WIDTH))
    split = np.array(["train"] * n_train + ["test"] * n_test, dtype=object)
    attrs = {"family": "resnet", "dataset": "digits", "width": 1, "depth": 8, "seed": 0, "step": 1}
    writer = StoreWriter(path, [spec], split, np.arange(n), np.zeros(n), attrs)
    writer.write("block0", 0, {"q": q, "z": q, "loss": np.zeros(n, np.float32)})
    writer.finish()
    return 4 * mean, 4 * np.eye(CHANNELS)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    path = tmp_path_factory.mktemp("planted") / "s.zarr"
    mean, covariance = planted_store(path)
    alignment = estimate_alignment(path, SETTINGS, log=lambda _: None)
    misalignment = estimate_misalignment(path, alignment, SETTINGS, log=lambda _: None)
    return path, mean, covariance, alignment, misalignment


def test_planted_d_align_is_recovered_within_its_interval(tables):
    _, mean, covariance, alignment, _ = tables
    truth = effective_dims(population_moments(mean, covariance))
    row = alignment[(alignment["reduction"] == "sum_positions") & (alignment["pool"] == "test")].iloc[0]
    assert row["status"] == "ok" and row["n"] == 600 and row["dim"] == CHANNELS
    assert row["d_align_lo"] <= truth[2] <= row["d_align_hi"], (row["d_align_lo"], truth[2], row["d_align_hi"])
    flat = alignment[(alignment["reduction"] == "flatten") & (alignment["pool"] == "test")].iloc[0]
    assert flat["dim"] == CHANNELS * HEIGHT * WIDTH


def test_iid_misalignment_respects_the_certificates(tables):
    _, mean, covariance, _, misalignment = tables
    iid = misalignment[(misalignment["mode"] == "iid") & (misalignment["reduction"] == "sum_positions")]
    assert len(iid) == 2
    for _, row in iid.iterrows():
        b_exact, b_align, _ = certificates(population_moments(mean, covariance), row["M"], row["K"])
        assert row["p_lo"] <= b_exact <= b_align
        assert row["p_lo"] <= row["b_exact"] <= row["b_align"]
    # more examples per side -> fewer misaligned draws
    assert iid.sort_values("M")["p_hat"].is_monotonic_decreasing


def _claim(rows, name):
    return next(row for row in rows if row["claim"] == name)


def synthetic(widths, d_align, p_hat, status="ok"):
    alignment = pd.DataFrame({"family": "llama", "dataset": "shakespeare", "step": 10, "reduction": "sum_positions",
                              "point": "block1", "pool": "test", "width": widths, "d_align": d_align,
                              "d_align_plugin": np.array(d_align, dtype=float) * 2})
    misalignment = pd.DataFrame({"family": "llama", "dataset": "shakespeare", "step": 10, "reduction": "sum_positions",
                                 "point": "block1", "mode": "iid", "M": 8, "K": 8, "width": widths, "p_hat": p_hat,
                                 "p_lo": np.array(p_hat) - 0.01, "b_exact": 0.5, "b_align": 0.9, "status": status})
    return alignment, misalignment


def test_claims_judge_trends_and_count_undetermined_cells():
    rows = alignment_claims(*synthetic([32, 64, 128], [0.1, 0.2, 0.4], [0.4, 0.3, 0.2]), (8, 8))
    assert _claim(rows, "d_align increases with width")["holds"] is True
    assert _claim(rows, "p̂ falls with width at fixed (M, K)")["holds"] is True
    assert _claim(rows, "B_align ≥ B_exact ≥ p̂ (iid)")["holds"] is True
    rows = alignment_claims(*synthetic([32, 64, 128], [0.4, 0.2, np.nan], [0.2, 0.3, 0.4]), (8, 8))
    claim = _claim(rows, "d_align increases with width")
    assert claim["holds"] is False and "1 of 3 cells undetermined" in claim["this_run"]
    assert _claim(rows, "p̂ falls with width at fixed (M, K)")["holds"] is False
    rows = alignment_claims(*synthetic([32, 64], [np.nan, np.nan], [0.5, 0.5], status="undetermined: x"), (8, 8))
    assert _claim(rows, "d_align increases with width")["holds"] == "undetermined"
    assert _claim(rows, "B_align ≥ B_exact ≥ p̂ (iid)")["holds"] == "undetermined"


def test_claims_with_a_context_sweep_in_d_align_but_not_in_the_misalignment_tables():
    # a context sweep feeds d_align only (its stores get no certificates), so only the alignment table has `context`
    fixed, misalignment = synthetic([32, 64, 128], [0.1, 0.2, 0.4], [0.4, 0.3, 0.2])
    sweep = synthetic([16, 32], [0.3, 0.1], [0.5, 0.5])[0].assign(context=128)
    alignment = pd.concat([fixed.assign(context=np.nan), sweep], ignore_index=True)
    rows = alignment_claims(alignment, misalignment, (8, 8))
    claim = _claim(rows, "d_align increases with width")
    assert claim["holds"] is False and claim["this_run"].startswith("rises in 1 of 2 (point, reduction) series")
    assert _claim(rows, "p̂ falls with width at fixed (M, K)")["this_run"].startswith("falls in 1 of 1")


def test_a_config_whose_every_grid_sweeps_context_summarizes_d_align_without_misalignment_tables(tmp_path):
    """configs/p1-regime.yaml: no fixed-context run, so no misalignment table reaches summarize-alignment; it
    writes the d_align figures and the d_align claim row alone, and no certificate figure."""
    from growcert.cli import main

    alignment, _ = synthetic([16, 32], [0.3, 0.1], [0.5, 0.5])
    alignment.assign(context=128, depth=2, n=64, dim=16, detectability=3.0, d_align_lo=0.05, d_align_hi=0.5,
                     d_align_raw=alignment["d_align"], status="ok").to_csv(tmp_path / "a.csv", index=False)
    out = tmp_path / "out"
    assert main(["summarize-alignment", "--alignment", str(tmp_path / "a.csv"), "--misalignment",
                 "--out-alignment", str(out / "alignment.csv"), "--out-misalignment", str(out / "misalignment.csv"),
                 "--out-summary", str(out / "summary.csv"), "--out-claims", str(out / "claims.csv"),
                 "--figures", str(out)]) == 0
    claims = pd.read_csv(out / "claims.csv")
    assert list(claims["claim"]) == ["d_align increases with width"]
    assert sorted(path.name for path in out.glob("*.png")) == ["p1_dalign_vs_width.png", "p1_plugin_vs_unbiased.png"]
