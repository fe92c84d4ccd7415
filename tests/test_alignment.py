"""P1 estimation from a store: known planted moments come back; certificates order; claims judge honestly."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from growcert.referee.claims import PAPER_WIDTH_SLOPE
from growcert.referee.rows import CHECK_COLUMNS, ROW_COLUMNS
from growcert.report.alignment import alignment_claims
from growcert.stages.alignment import estimate_alignment, estimate_misalignment
from growcert.stats import certificates, effective_dims
from growcert.stats.moments import population_moments
from growcert.store import GroupSpec, StoreWriter

SETTINGS = {
    "reductions": ["sum_positions", "flatten"],
    "detect_threshold": 2.0,
    "level": 0.95,
    "MK": [[8, 8], [32, 32]],
    "reference_mk": [8, 8],
    "modes": ["iid", "train_test"],
    "replicates": 4000,
    "seed": 0,
}
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
    return next(row for row in rows if row.get("claim") == name)


def synthetic(
    widths,
    slope,
    p_slope,
    seeds=(0, 1, 2),
    status="ok",
    b_exact=0.45,
    noise=0.02,
    pool=10**9,
    replicates=10**7,
    relative_se=1e-4,
):
    """d_align = 0.1 (w/32)^slope and p̂ = 0.4 (w/32)^p_slope, times a small seeded noise per (seed, width);
    p_lo 0.01 below p̂, B_exact fixed, from held-out moments ‖μ‖⁴ = 1, tr Σ² = 0 and μᵀΣμ = 4·b/(1 − b) (so
    V/(V + ‖μ‖⁴) = b at M = K = 8), each with a jackknife SE of `relative_se` times its own size (tr Σ²'s: of
    μᵀΣμ's), a held-out pool of `pool` examples and `replicates` resampled draws per cell."""
    rng = np.random.default_rng(1)
    rows = [
        {"seed": seed, "width": width, "wobble": float(np.exp(rng.normal(0, noise)))}
        for seed in seeds
        for width in widths
    ]
    frame = pd.DataFrame(rows).assign(family="llama", dataset="shakespeare", depth=2, step=10, point="block1")
    ratio = frame["width"] / 32
    if isinstance(slope, dict):  # a slope per seed
        slope = frame["seed"].map(slope)
    d_align = 0.1 * ratio**slope * frame["wobble"] if slope is not None else np.nan
    mu_sigma_mu = 4 * b_exact / (1 - b_exact)
    alignment = frame.assign(
        reduction="sum_positions",
        pool="test",
        d_align=d_align,
        d_align_plugin=np.asarray(d_align, dtype=float) * 2,
        n=pool,
        mu_4=1.0,
        mu_sigma_mu=mu_sigma_mu,
        tr_sigma2=0.0,
        mu_4_se_jack=relative_se,
        mu_sigma_mu_se_jack=relative_se * mu_sigma_mu,
        tr_sigma2_se_jack=relative_se * mu_sigma_mu,
    )
    p_hat = (0.4 * ratio**p_slope * frame["wobble"]).clip(upper=1.0)
    misalignment = frame.assign(
        reduction="sum_positions",
        mode="iid",
        M=8,
        K=8,
        p_hat=p_hat,
        p_lo=p_hat - 0.01,
        b_exact=b_exact,
        b_align=0.9,
        status=status,
        replicates=replicates,
    )
    return alignment.drop(columns="wobble"), misalignment.drop(columns="wobble")


def test_a_clear_rise_over_seeds_reproduces_the_width_claims_and_the_certificate():
    rows = alignment_claims(*synthetic([32, 64, 128], slope=1.0, p_slope=-0.5), (8, 8))
    claim = _claim(rows, "d_align increases with width")
    # the slope is planted at 1.0 (the paper's ≈ 0.50): reproduced, with the estimate near the planted slope
    assert claim["verdict"] == "reproduced" and claim["seeds"] == 3 and claim["low"] < 1.0 < claim["high"]
    assert list(claim) == ROW_COLUMNS and claim["paper_effect"] == "0.497"
    assert _claim(rows, "p̂ falls with width at fixed (M, K)")["verdict"] == "reproduced"
    certificate = _claim(rows, "p̂ ≤ B_exact (iid)")
    assert certificate["verdict"] == "reproduced" and certificate["estimate"] == 1.0
    order = [row for row in rows if row.get("check_id") == "p1_certificate_order"]
    assert [row["passed"] for row in order] == [True, True] and list(order[0]) == CHECK_COLUMNS


def test_a_clear_fall_contradicts_and_one_seed_is_not_tested():
    rows = alignment_claims(*synthetic([32, 64, 128], slope=-1.0, p_slope=0.5), (8, 8))
    assert _claim(rows, "d_align increases with width")["verdict"] == "contradicted"
    assert _claim(rows, "p̂ falls with width at fixed (M, K)")["verdict"] == "contradicted"
    rows = alignment_claims(*synthetic([32, 64, 128], slope=1.0, p_slope=-0.5, seeds=(0,)), (8, 8))
    claim = _claim(rows, "d_align increases with width")
    assert claim["verdict"] == "not tested at this scale" and "1 seed" in claim["why"]


def test_a_noisy_trend_is_unresolved_and_gives_the_seeds_that_would_decide_it():
    rows = alignment_claims(*synthetic([32, 64, 128], slope={0: 1.2, 1: -0.6, 2: 0.9}, p_slope=-0.5, noise=0.0), (8, 8))
    claim = _claim(rows, "d_align increases with width")
    assert np.isclose(claim["estimate"], 0.5) and claim["verdict"] == "unresolved"
    assert claim["low"] < 0 and claim["high"] > 0.25
    # the design figures: at the upper 80 % limit of the per-seed spread (sd of 1.2, -0.6, 0.9), the seeds whose t
    # interval clears the SESOI with 80 % power if the slope is the paper's (and, by symmetry, falls short if nil)
    sd = np.std([1.2, -0.6, 0.9], ddof=1) * np.sqrt(2 / scipy_stats.chi2.ppf(0.2, 2))
    distance = PAPER_WIDTH_SLOPE / 2  # the paper's slope's distance to the SESOI, and the null's
    n = next(
        n
        for n in range(2, 5000)
        if scipy_stats.nct.sf(scipy_stats.t.ppf(0.975, n - 1), n - 1, distance * np.sqrt(n) / sd) >= 0.8
    )
    assert claim["seeds_to_reproduce"] == claim["seeds_to_contradict"] == f"{n:,}"
    assert f"{n:,} seeds would reproduce it if the effect is the paper's" in claim["why"]


def test_certificate_rows_need_a_non_vacuous_bound_and_undetermined_cells_are_not_tested():
    alignment, misalignment = synthetic([32, 64, 128], slope=1.0, p_slope=-0.5, b_exact=0.9)
    claim = _claim(alignment_claims(alignment, misalignment, (8, 8)), "p̂ ≤ B_exact (iid)")
    assert claim["verdict"] == "not tested at this scale" and "vacuous" in claim["why"]
    alignment, misalignment = synthetic([32, 64], slope=None, p_slope=0.0, status="undetermined: x")
    rows = alignment_claims(alignment, misalignment, (8, 8))
    assert _claim(rows, "d_align increases with width")["verdict"] == "not tested at this scale"
    assert _claim(rows, "p̂ ≤ B_exact (iid)")["verdict"] == "not tested at this scale"


def test_the_certificate_is_judged_with_b_exacts_error_and_the_pools_size():
    """p̂ ≤ B_exact at the point estimate in every cell (p̂ ≈ 0.1–0.4 against B_exact 0.45) is
    reproduced only when both errors are small; the old rule said reproduced from the point estimates alone."""
    widths = [32, 64, 128]
    # B_exact's moments with a jackknife SE of 30 % of their size: its interval reaches far below p̂
    claim = _claim(
        alignment_claims(*synthetic(widths, slope=1.0, p_slope=-0.5, relative_se=0.3), (8, 8)), "p̂ ≤ B_exact (iid)"
    )
    assert claim["verdict"] == "unresolved" and claim["estimate"] < 1.0
    assert "p > B_exact in none" in claim["why"]
    # tight moments but a pool of 48 held-out examples: 3 disjoint draws of M + K = 16, however many replicates
    claim = _claim(alignment_claims(*synthetic(widths, slope=1.0, p_slope=-0.5, pool=48), (8, 8)), "p̂ ≤ B_exact (iid)")
    assert claim["verdict"] == "unresolved"
    # both tight: reproduced
    claim = _claim(alignment_claims(*synthetic(widths, slope=1.0, p_slope=-0.5), (8, 8)), "p̂ ≤ B_exact (iid)")
    assert claim["verdict"] == "reproduced" and claim["estimate"] == 1.0
    # a cell clearly above its bound (p̂ 0.44 against B_exact 0.3, both tight) contradicts at its Holm level
    alignment, misalignment = synthetic(widths, slope=1.0, p_slope=-0.5)
    misalignment.loc[0, "p_hat"] = 0.44
    alignment.loc[0, ["mu_sigma_mu", "mu_sigma_mu_se_jack"]] = [4 * 0.3 / 0.7, 1e-4 * 4 * 0.3 / 0.7]
    misalignment.loc[0, "b_exact"] = 0.3
    claim = _claim(alignment_claims(alignment, misalignment, (8, 8)), "p̂ ≤ B_exact (iid)")
    assert claim["verdict"] == "contradicted" and "in 1 of 9 non-vacuous cells" in claim["why"]


def test_claims_with_a_context_sweep_in_d_align_but_not_in_the_misalignment_tables():
    # a context sweep feeds d_align only (its stores get no certificates), so only the alignment table has `context`
    fixed, misalignment = synthetic([32, 64, 128], slope=1.0, p_slope=-0.5)
    sweep = synthetic([16, 32], slope=-1.0, p_slope=0.0)[0].assign(context=128)
    alignment = pd.concat([fixed.assign(context=np.nan), sweep], ignore_index=True)
    rows = alignment_claims(alignment, misalignment, (8, 8))
    (claim,) = [row for row in rows if row.get("claim_id") == "p1_dalign_width" and row["role"] == "primary"]
    # two primary series (the last point, sum_positions), the fixed-context one rising, the context-128 one
    # falling: each a part, the claim universal over both, so the falling one contradicts it
    assert "universal claim over 2 primary series" in claim["why"] and claim["verdict"] == "contradicted"
    assert "contradicted by llama/shakespeare ctx 128" in claim["why"]
    parts = [row for row in rows if row.get("claim_id") == "p1_dalign_width" and row["role"] == "part"]
    assert sorted(row["verdict"] for row in parts) == ["contradicted", "reproduced"]
    assert _claim(rows, "p̂ falls with width at fixed (M, K)")["verdict"] == "reproduced"


def test_p_hat_falls_on_its_own_scale_and_context_sweeps_are_series_of_their_own():
    """The registry's effect is the slope of p̂ itself on log width (its SESOI: p̂ falls by 0.05 over a 6× width
    range), not of log p̂: p̂ = 0.2, 0.1, 0.0 at widths 32, 64, 128 in every seed is a slope of −0.1/ln 2 with
    the p̂ = 0 cell kept (a log would drop it). Misalignment rows of a context sweep (a `context` column, as
    `estimate-misalignment` writes for a sweep's store) are judged per context, with Holm across them."""
    from growcert.report.alignment import misalignment_width_rows

    _, misalignment = synthetic([32, 64, 128], slope=1.0, p_slope=0.0, noise=0.0)
    steps = {32: 0.2, 64: 0.1, 128: 0.0}
    falling = misalignment.assign(p_hat=misalignment["width"].map(steps) + 0.001 * misalignment["seed"])
    row, first_form = misalignment_width_rows(falling, (8, 8))
    assert first_form["role"] == "secondary"
    assert row["estimate"] == pytest.approx(-0.1 / np.log(2)) and row["seeds"] == 3
    assert row["verdict"] == "reproduced" and row["effect"] == "slope of p̂ on log width"
    # a fall of 0.015 per doubling is 0.039 over a 6× range: short of the SESOI's 0.05, the paper's direction
    small = falling.assign(p_hat=0.2 - 0.015 * np.log2(falling["width"] / 32) + 0.0001 * falling["seed"])
    row, _ = misalignment_width_rows(small, (8, 8))
    assert row["verdict"] == "contradicted" and row["direction"] == "as the paper's"
    sweep = pd.concat([falling.assign(context=256), falling.assign(context=512, p_hat=0.3)], ignore_index=True)
    rows = misalignment_width_rows(sweep, (8, 8))
    assert [row["role"] for row in rows] == ["part", "part", "primary", "secondary"]
    assert sorted(row["verdict"] for row in rows[:2]) == ["contradicted", "reproduced"]
    assert "ctx 512" in rows[2]["why"] and rows[2]["verdict"] == "contradicted"  # universal: every context


def test_p_hat_at_its_floor_is_not_tested_rather_than_contradicted():
    """p̂ ≥ 0: a series whose p̂ at the smallest width is already below the fall the SESOI asks over its widths
    (0.0279 × ln 4 = 0.039 for widths 32-128) cannot show the claim's effect, so a flat p̂ ≈ 0.001 is not tested
    (a tight interval around 0 would otherwise read as contradicted); a series with room is judged as before, and
    in a sweep the floored context leaves the universal claim unresolved (it cannot be shown to hold there)."""
    from growcert.report.alignment import misalignment_width_rows

    _, misalignment = synthetic([32, 64, 128], slope=1.0, p_slope=0.0, noise=0.0)
    floor = misalignment.assign(p_hat=0.001 + 0.0001 * misalignment["seed"])
    row, first_form = misalignment_width_rows(floor, (8, 8))
    assert row["verdict"] == "not tested at this scale" and row["seeds"] == 3
    assert "p̂ at its floor: at width 32 it is 0.0011 (mean over seeds), below the fall of 0.0387" in row["why"]
    room = floor.assign(p_hat=0.04 + 0.0001 * floor["seed"])  # flat, but with room to fall: contradicted
    row, _ = misalignment_width_rows(room, (8, 8))
    assert row["verdict"] == "contradicted"
    falling = misalignment.assign(
        p_hat=misalignment["width"].map({32: 0.2, 64: 0.1, 128: 0.0}) + 0.001 * misalignment["seed"]
    )
    rows = misalignment_width_rows(
        pd.concat([falling.assign(context=256), floor.assign(context=512)], ignore_index=True), (8, 8)
    )
    assert [row["verdict"] for row in rows[:3]] == ["reproduced", "not tested at this scale", "unresolved"]
    assert "universal claim over 2 primary series (1 testable)" in rows[2]["why"]


def test_a_config_whose_every_grid_sweeps_context_summarizes_d_align_without_misalignment_tables(tmp_path):
    """configs/p1-regime.yaml: no fixed-context run, so no misalignment table reaches summarize-alignment; it
    writes the d_align figures and the d_align claim row alone, and no certificate figure."""
    from growcert.cli import main

    alignment, _ = synthetic([16, 32], slope=-1.0, p_slope=0.0)
    alignment.assign(
        context=128,
        n=64,
        dim=16,
        detectability=3.0,
        d_align_lo=0.05,
        d_align_hi=0.5,
        d_align_raw=alignment["d_align"],
        status="ok",
    ).to_csv(tmp_path / "a.csv", index=False)
    out = tmp_path / "out"
    assert (
        main(
            [
                "summarize-alignment",
                "--alignment",
                str(tmp_path / "a.csv"),
                "--misalignment",
                "--out-alignment",
                str(out / "alignment.csv"),
                "--out-misalignment",
                str(out / "misalignment.csv"),
                "--out-summary",
                str(out / "summary.csv"),
                "--out-claims",
                str(out / "claims.csv"),
                "--out-checks",
                str(out / "checks.csv"),
                "--figures",
                str(out),
            ]
        )
        == 0
    )
    claims = pd.read_csv(out / "claims.csv")
    assert list(claims["claim"]) == ["d_align increases with width"]
    assert sorted(path.name for path in out.glob("*.png")) == ["p1_dalign_vs_width.png", "p1_plugin_vs_unbiased.png"]


SMALL = {
    "reductions": ["sum_positions"],
    "MK": [[8, 8]],
    "reference_mk": [8, 8],
    "modes": ["iid", "train_test"],
    "replicates": 400,
    "seed": 0,
}


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "s.zarr"
    planted_store(path, n_train=60, n_test=120)
    return path, estimate_alignment(path, SMALL, log=lambda _: None)


def test_misalignment_interval_is_at_the_configured_level(small_store):
    """alignment.level reaches the Wilson interval of p̂ (it was always 95 %)."""
    from growcert.stats.intervals import wilson_interval

    path, alignment = small_store
    wide, narrow = (
        estimate_misalignment(path, alignment, {**SMALL, "level": level}, log=lambda _: None) for level in (0.95, 0.5)
    )
    assert (wide["p_hat"] == narrow["p_hat"]).all()  # the same draws; only the interval's coverage differs
    for (_, w), (_, n) in zip(wide.iterrows(), narrow.iterrows()):
        assert w["p_lo"] <= n["p_lo"] <= n["p_hi"] <= w["p_hi"] and n["p_hi"] - n["p_lo"] < w["p_hi"] - w["p_lo"]
        misaligned = round(n["p_hat"] * n["replicates"])
        assert (n["p_lo"], n["p_hi"]) == pytest.approx(wilson_interval(misaligned, n["replicates"], 0.5))
        assert (w["p_lo"], w["p_hi"]) == pytest.approx(wilson_interval(misaligned, w["replicates"], 0.95))


def test_replicates_default_is_the_schema_default_alone(small_store):
    """The number of replicates has one default, the schema's alignment.replicates: stats.misalignment has
    none of its own (it had 10,000), and the stage draws the schema's number when the settings omit it."""
    import inspect

    from growcert.schema import load_schema
    from growcert.stats import misalignment

    default = load_schema()["properties"]["alignment"]["properties"]["replicates"]["default"]
    assert inspect.signature(misalignment).parameters["replicates"].default is inspect.Parameter.empty
    path, alignment = small_store
    settings = {key: value for key, value in SMALL.items() if key != "replicates"}
    table = estimate_misalignment(path, alignment, {**settings, "modes": ["iid"]}, log=lambda _: None)
    assert table["replicates"].tolist() == [default]
