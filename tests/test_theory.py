"""P2 theory diagnostics (growcert.experiments.theory, growcert.experiments.theory_dynamics, growcert.stats.kernels):
closed forms on a linear model, the squared-loss coupling identity on a small network, drift/diffusion exponents on
synthetic streams, reservoir invisibility on a trained network, and one tiny end-to-end run."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as scipy_stats
from torch import nn

from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.experiments import theory, theory_report
from growcert.experiments.theory_dynamics import (
    FlatModel,
    Task,
    checkpoint_steps,
    digits_task,
    drift_exponents,
    log_horizons,
    regression_task,
    train_gd,
    trajectory_measures,
)
from growcert.referee.rows import CHECK_COLUMNS, ROW_COLUMNS
from growcert.referee.verdicts import NOT_TESTED
from growcert.stats.kernels import coupling_residual, restricted_norm, split_channel

torch.set_num_threads(1)
NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def linear_task(n=12, d=4, outputs=2, n_test=7, seed=0) -> Task:
    rng = np.random.default_rng(seed)
    x, x_test = rng.standard_normal((n, d)), rng.standard_normal((n_test, d))
    y, y_test = rng.standard_normal((n, outputs)), rng.standard_normal((n_test, outputs))
    t = lambda a: torch.from_numpy(a)  # noqa: E731
    return Task("linear", t(x), t(x_test), t(y), t(y_test))


def test_linear_model_operators_match_closed_forms():
    """f(x) = Wx, squared loss: K = XXᵀ ⊗ I_C (example-major) is constant, P_k = (I − sK)^k with
    s = η/n, W_S = s Σ_{k<N} P_kᵀ K P_k, G_S = s Σ K P_k = I − P_N, G_Q = s Σ K_QS P_k."""
    task, lr, steps = linear_task(), 0.3, 40
    n, outputs = task.y_train.shape
    torch.manual_seed(0)
    net = FlatModel(nn.Linear(task.x_train.shape[1], outputs, bias=False, dtype=torch.float64))
    trajectory = train_gd(net, task, "squared", lr, steps, [0, 17, steps])
    x, x_test = task.x_train.numpy(), task.x_test.numpy()
    kernel = np.kron(x @ x.T, np.eye(outputs))
    kernel_test = np.kron(x_test @ x.T, np.eye(outputs))
    scale, identity = lr / n, np.eye(n * outputs)
    assert scale * np.linalg.eigvalsh(kernel).max() < 1  # contracting steps
    for snapshot in trajectory.snapshots:
        powers = [np.linalg.matrix_power(identity - scale * kernel, k) for k in range(snapshot.step + 1)]
        gramian = scale * sum(p.T @ kernel @ p for p in powers[:-1]) if snapshot.step else 0 * identity
        np.testing.assert_allclose(snapshot.kernel_train, kernel, atol=1e-12)
        np.testing.assert_allclose(snapshot.kernel_test_train, kernel_test, atol=1e-12)
        np.testing.assert_allclose(snapshot.propagator, powers[-1], atol=1e-12)
        np.testing.assert_allclose(snapshot.gramian, gramian, atol=1e-12)
        np.testing.assert_allclose(snapshot.train_transfer, identity - powers[-1], atol=1e-12)
        test_transfer = scale * sum((kernel_test @ p for p in powers[:-1]), np.zeros_like(kernel_test))
        np.testing.assert_allclose(snapshot.test_transfer, test_transfer, atol=1e-12)
    # eigen-form of the same sum: λ_W = sλ (1 − (1 − sλ)^{2N}) / (1 − (1 − sλ)²), zero where λ = 0
    lam = np.clip(np.linalg.eigvalsh(kernel), 0, None)
    ratio = 1 - scale * lam
    safe = np.where(lam > 1e-9, 1 - ratio**2, 1.0)
    expected = np.where(lam > 1e-9, scale * lam * (1 - ratio ** (2 * steps)) / safe, 0.0)
    np.testing.assert_allclose(
        np.sort(np.linalg.eigvalsh(trajectory.snapshots[-1].gramian)), np.sort(expected), atol=1e-12
    )
    # a linear model is exactly linearised; its reservoir is ker(Xᵀ) ⊗ R^C; G_Q vanishes there; A° is exact
    measures = trajectory_measures(trajectory, rank_tol=1e-9)
    d = x.shape[1]
    assert (measures["channel_dim"], measures["reservoir_dim"]) == (d * outputs, (n - d) * outputs)
    assert measures["linearisation_error"] < 1e-10
    assert measures["invisibility_ratio"] < 1e-10
    assert measures["coupling_residual"] < 1e-10
    # the predicted train displacement is −G_S g_0 = −(I − P_N) g_0: the closed-form residual after N steps
    g0 = trajectory.initial_gradient
    np.testing.assert_allclose(
        trajectory.snapshots[-1].train_outputs - task.y_train.numpy().reshape(-1), powers[-1] @ g0, atol=1e-10
    )


def small_digits(loss: str, steps: int = 60):
    settings = stage_settings(
        "theory",
        {"digits": {"train_size": 10, "test_size": 20, "input_dim": 4, "width": 2, "steps": steps, "lr": 0.05}},
    )
    task, config = digits_task(settings), settings["digits"]
    net = theory.build_net(task, config, seed=0)
    return train_gd(net, task, loss, config["lr"], steps, checkpoint_steps(steps, 3))


def test_squared_loss_coupling_residual_is_numerical_zero_on_a_small_network():
    """Squared loss: ΔG_S = P_s − P_T exactly (telescoping, however the kernel moves), and the fitted
    coupling leaves R_⊥ below the proven cap for the truncated pseudo-inverse; cross-entropy breaks the
    telescoping identity (H ≠ I), so the identity check is not vacuous."""
    squared, entropy = small_digits("squared"), small_digits("cross_entropy")
    for trajectory, telescopes in ((squared, True), (entropy, False)):
        start, final = trajectory.snapshots[1], trajectory.snapshots[-1]
        gap = np.abs((final.train_transfer - start.train_transfer) - (start.propagator - final.propagator)).max()
        assert (gap < 1e-12) == telescopes, (trajectory.loss, gap)
    measures = trajectory_measures(squared, rank_tol=1e-6)
    assert measures["kernel_change"] > 0.05  # the kernel really moves (feature learning, not a linear model)
    assert measures["linearisation_error"] < 0.05  # small steps: the first-order operators describe the run
    assert measures["coupling_residual"] <= measures["coupling_bound"] < 1e-2
    assert measures["coupling_residual"] < 1e-4
    # tightening the tolerance drives the squared-loss residual further towards zero
    final, first = squared.snapshots[-1], squared.snapshots[0]
    tight = coupling_residual(
        final.test_transfer - first.test_transfer,
        final.train_transfer - first.train_transfer,
        squared.initial_gradient,
        rank_tol=1e-10,
    )
    assert tight["relative"] < 1e-6


def synthetic_drift(replicates: int, steps: int, dims: int, persistent: bool, seed: int = 0) -> pd.DataFrame:
    """Stream x_k = μ + σ_k ξ_k: drift D(T) = Tμ; fluctuation F(T) = Σ σ_k ξ_k, a martingale whose scale
    σ_k ∈ {1, 2} depends on the previous increment (not iid). persistent=True replaces ξ_k by one ξ per
    stream (not a martingale: F grows as T)."""
    rng = np.random.default_rng(seed)
    horizons = log_horizons(steps)
    rows = []
    for replicate in range(replicates):
        mean = rng.standard_normal(dims)
        noise = rng.standard_normal((steps, dims))
        if persistent:
            noise[:] = noise[0]
        scales = np.ones(steps)
        scales[1:] = np.where(noise[:-1, 0] > 0, 1.0, 2.0)
        fluctuation = np.cumsum(scales[:, None] * noise, axis=0)
        for horizon in horizons:
            rows.append(
                {
                    "replicate": replicate,
                    "T": horizon,
                    "drift_norm": horizon * np.linalg.norm(mean),
                    "fluctuation_norm": np.linalg.norm(fluctuation[horizon - 1]),
                }
            )
    return pd.DataFrame(rows)


def test_drift_and_fluctuation_exponents_on_a_synthetic_stream():
    replicates, steps, dims, fit_from = 256, 1024, 4, 4
    drift, fluctuation = drift_exponents(synthetic_drift(replicates, steps, dims, persistent=False), fit_from)
    # RMS² over R replicates of ‖F(T)‖² (≈ χ²_d-like) has relative sd ≈ √(2/(dR)), so log RMS has sd
    # ≈ 1/√(2dR); a least-squares slope moves by at most sd(ε)/sd(log T): allow 5 of those.
    horizons = np.array([t for t in log_horizons(steps) if t >= fit_from], dtype=float)
    tolerance = 5 / math.sqrt(2 * dims * replicates) / np.log(horizons).std()
    assert tolerance < 0.1
    assert drift == pytest.approx(1.0, abs=1e-9)
    assert fluctuation == pytest.approx(0.5, abs=tolerance)
    _, persistent = drift_exponents(synthetic_drift(replicates, steps, dims, persistent=True), fit_from)
    assert persistent == pytest.approx(1.0, abs=tolerance)  # a non-martingale is told apart


def test_reservoir_is_invisible_to_the_test_set_on_a_trained_network():
    settings = stage_settings(
        "theory", {"regression": {"train_size": 24, "test_size": 40, "width": 3, "steps": 150, "lr": 0.1}}
    )
    task, config = regression_task(settings), settings["regression"]
    net = theory.build_net(task, config, seed=0)
    trajectory = train_gd(net, task, "squared", config["lr"], config["steps"], checkpoint_steps(150, 2))
    measures = trajectory_measures(trajectory, settings["rank_tol"])
    assert measures["reservoir_dim"] > 0 and measures["channel_dim"] > 0
    assert measures["invisibility_ratio"] <= measures["invisibility_bound_ratio"] < 1.0
    assert measures["invisibility_ratio"] < theory_report.INVISIBLE_BELOW
    # contrast: G_Q on a random subspace of the same dimension is far from invisible
    final = trajectory.snapshots[-1]
    split = split_channel(final.gramian, settings["rank_tol"])
    random_basis, _ = np.linalg.qr(np.random.default_rng(0).standard_normal(split.reservoir.shape))
    on_random = restricted_norm(final.test_transfer, random_basis) / restricted_norm(final.test_transfer, split.channel)
    assert on_random > 100 * measures["invisibility_ratio"]


TINY = {
    "snapshots": 2,
    "digits": {"train_size": 8, "test_size": 12, "input_dim": 3, "width": 2, "steps": 20, "lr": 0.05},
    "regression": {"train_size": 12, "test_size": 20, "width": 2, "steps": 30},
    "sgd": {"batch_size": 3, "steps": 16, "replicates": 2, "fit_from": 2},
}


def test_run_theory_end_to_end_writes_tables_figure_and_claims(tmp_path):
    result = theory.run_theory(TINY, tmp_path, log=lambda _: None, threads=1, device="cpu")
    for name, columns in (
        ("summary", theory.SUMMARY_COLUMNS),
        ("spectrum", theory.SPECTRUM_COLUMNS),
        ("drift", theory.DRIFT_COLUMNS),
    ):
        table = pd.read_csv(tmp_path / f"{name}.csv")
        assert list(table.columns) == columns and len(table) > 0
    assert (tmp_path / "provenance.json").exists()
    summary = result["summary"]
    assert {("digits", "squared"), ("digits", "cross_entropy"), ("regression", "squared")} == set(
        summary[["task", "loss"]].drop_duplicates().itertuples(index=False, name=None)
    )
    theory_report.plot_theory(tmp_path, tmp_path / "theory.png")
    assert (tmp_path / "theory.png").stat().st_size > 10_000
    rows = theory_report.theory_claims(tmp_path, TINY)
    checks, (claim,) = rows[:3], rows[3:]
    assert [row["check_id"] for row in checks] == ["p2_reservoir_invisible", "p2_benign_noise", "p2_coupling_residual"]
    for row in checks:
        assert list(row) == CHECK_COLUMNS
        assert row["paper"] == "P2" and isinstance(row["passed"], bool) and row["this_run"]
    assert list(claim) == ROW_COLUMNS and claim["claim_id"] == "p2_drift_diffusion" and claim["this_run"]
    # the default is one seed: an interval over seeds cannot be formed
    assert claim["verdict"] == NOT_TESTED and claim["seeds"] == 1 and "1 seed(s)" in claim["why"]


RUNS = [("digits", "squared"), ("digits", "cross_entropy"), ("regression", "squared")]


def write_summary(folder, exponents, seeds, **measures):
    """A summary.csv as run_theory writes it, by hand: every run of every seed with the given measures
    (defaults: a reservoir invisible at 1e-4, benign noise at 1e-4 of the channel's response, the coupling
    residual below its cap) and the drift / fluctuation exponents `exponents(seed, run index)`."""
    rows = []
    for seed in seeds:
        for index, (task, loss) in enumerate(RUNS):
            drift, fluctuation = exponents(seed, index)
            values = {
                "reservoir_dim": 10.0,
                "outputs": 30.0,
                "invisibility_ratio": 1e-4,
                "coupling_residual": 1e-9,
                "coupling_bound": 1e-6 if loss == "squared" else math.nan,
                "drift_exponent": drift,
                "fluctuation_exponent": fluctuation,
            }
            if task == "regression":
                values |= {
                    "noise_reservoir_fraction": 0.4,
                    "response_reservoir_noise_retrained": 1e-5,
                    "response_channel_noise_retrained": 1e-1,
                    "delta_test_mse_reservoir_noise": 1e-8,
                    "delta_test_mse_channel_noise": 1e-2,
                    "delta_test_mse_iid": 1e-2,
                }
            for name, value in measures.items():
                values[name] = value(seed, task, loss) if callable(value) else value
            rows += [
                {"task": task, "loss": loss, "seed": seed, "measure": name, "value": value}
                for name, value in values.items()
            ]
    pd.DataFrame(rows, columns=theory.SUMMARY_COLUMNS).to_csv(folder / "summary.csv", index=False)
    return theory_report.theory_claims(folder, {"seeds": list(seeds)})


# per seed (rows) and run (columns): drift / fluctuation exponents; the deviation of a seed is the largest
# |drift − 1| or |fluctuation − ½| over its runs
CLOSE = [
    [(1.02, 0.51), (0.99, 0.52), (1.01, 0.49)],  # 0.02
    [(1.03, 0.50), (1.00, 0.47), (0.98, 0.50)],  # 0.03
    [(1.00, 0.525), (1.01, 0.50), (1.02, 0.50)],  # 0.025
    [(0.98, 0.50), (1.00, 0.50), (1.01, 0.51)],
]  # 0.02
FAR = [
    [(1.30, 0.50), (1.0, 0.5), (1.0, 0.5)],
    [(1.0, 0.8), (1.0, 0.5), (1.0, 0.5)],
    [(1.0, 0.5), (0.68, 0.5), (1.0, 0.5)],
    [(1.0, 0.5), (1.0, 0.5), (1.0, 0.21)],
]  # 0.30, 0.30, 0.32, 0.29
WIDE = [
    [(1.01, 0.5), (1.0, 0.5), (1.0, 0.5)],
    [(1.0, 0.5), (1.0, 0.5), (1.25, 0.5)],
    [(1.0, 0.5), (1.0, 0.52), (1.0, 0.5)],
]  # 0.01, 0.25, 0.02: the interval holds the margin 0.1


@pytest.mark.parametrize(
    "exponents, deviations, verdict",
    [
        (CLOSE, [0.02, 0.03, 0.025, 0.02], "reproduced"),
        (FAR, [0.30, 0.30, 0.32, 0.29], "contradicted"),
        (WIDE, [0.01, 0.25, 0.02], "unresolved"),
    ],
    ids=["within_margin", "beyond_margin", "wide"],
)
def test_drift_diffusion_is_judged_on_the_per_seed_largest_deviation(tmp_path, exponents, deviations, verdict):
    rows = write_summary(tmp_path, lambda seed, run: exponents[seed][run], range(len(exponents)))
    claim = rows[-1]
    assert claim["claim_id"] == "p2_drift_diffusion" and claim["verdict"] == verdict, claim["why"]
    samples = np.asarray(deviations)
    half = scipy_stats.t.ppf(0.975, len(samples) - 1) * samples.std(ddof=1) / math.sqrt(len(samples))
    assert (claim["estimate"], claim["low"], claim["high"]) == pytest.approx(
        (samples.mean(), samples.mean() - half, samples.mean() + half)
    )
    assert claim["seeds"] == len(deviations) and claim["paper_effect"] == "≤ 0.1"
    if verdict == "reproduced":
        assert claim["high"] <= 0.1 and "stays within the margin 0.1" in claim["why"]
    if verdict == "contradicted":
        assert claim["low"] > 0.1 and "wholly above the margin 0.1" in claim["why"]


@pytest.mark.parametrize("seeds, undetermined", [((0, 1, 2), (1, 2)), ((0, 1, 2), (1, 0)), ((0,), (0, 2))])
def test_an_undetermined_exponent_leaves_its_seed_undetermined_wherever_it_is(tmp_path, seeds, undetermined):
    """A NaN fluctuation exponent in one run of one seed (a fit that failed): that seed has no deviation, so the
    claim is not tested, whichever run it is in, and even when it is the only seed's."""
    rows = write_summary(tmp_path, lambda seed, run: (1.01, math.nan if (seed, run) == undetermined else 0.5), seeds)
    claim = rows[-1]
    assert claim["verdict"] == NOT_TESTED and claim["seeds"] == len(seeds)
    assert f"1 of {len(seeds)} seeds have no determined value" in claim["why"], claim["why"]


def test_check_rows_pass_and_fail_on_their_thresholds(tmp_path):
    good = write_summary(tmp_path, lambda seed, run: (1.0, 0.5), (0, 1))
    assert [row["passed"] for row in good[:3]] == [True, True, True]
    assert all(list(row) == CHECK_COLUMNS for row in good[:3]) and list(good[3]) == ROW_COLUMNS
    # one run's reservoir is visible (ratio 0.05 ≥ 1e-2, median over seeds), the reservoir noise moves the test
    # outputs half as much as channel noise, one squared-loss run's residual exceeds its cap
    bad = write_summary(
        tmp_path,
        lambda seed, run: (1.0, 0.5),
        (0, 1),
        invisibility_ratio=lambda seed, task, loss: 0.05 if loss == "cross_entropy" else 1e-4,
        response_reservoir_noise_retrained=0.05,
        coupling_residual=lambda seed, task, loss: 1e-3 if task == "regression" else 1e-9,
    )
    assert [row["passed"] for row in bad[:3]] == [False, False, False]
    # cross-entropy has no cap: its residual is reported, never failed on
    ce = write_summary(
        tmp_path,
        lambda seed, run: (1.0, 0.5),
        (0, 1),
        coupling_residual=lambda seed, task, loss: 0.5 if loss == "cross_entropy" else 1e-9,
    )
    assert ce[2]["passed"] is True and "digits/CE: R_⊥ 5.0e-01" in ce[2]["this_run"]
    # runs with an empty reservoir (ratio NaN) are reported as such; the check is on the runs that have one
    empty = write_summary(
        tmp_path,
        lambda seed, run: (1.0, 0.5),
        (0, 1),
        reservoir_dim=lambda seed, task, loss: 10.0 if task == "regression" else 0.0,
        invisibility_ratio=lambda seed, task, loss: 1e-4 if task == "regression" else math.nan,
    )
    assert empty[0]["passed"] is True and "digits/squared: reservoir empty" in empty[0]["this_run"]


@NEEDS_CUDA
@pytest.mark.cuda
def test_a_tiny_run_on_cuda_gives_the_cpu_tables_and_records_its_device(tmp_path):
    """Same data, weights, noise and batch streams (all drawn on the CPU), so only float64 rounding of the
    device's kernels differs: every table matches the CPU's far below any measure's meaning."""
    on_cpu = theory.run_theory(TINY, tmp_path / "cpu", log=lambda _: None, threads=1, device="cpu")
    on_cuda = theory.run_theory(TINY, tmp_path / "cuda", log=lambda _: None, threads=1, device="cuda")
    for name, value, rtol, atol in (
        ("summary", "value", 1e-6, 1e-9),
        ("spectrum", "eigenvalue", 1e-6, 1e-12),
        ("drift", "fluctuation_norm", 1e-6, 1e-12),
        ("drift", "drift_norm", 1e-6, 1e-12),
    ):
        cpu, cuda = on_cpu[name], on_cuda[name]
        keys = [
            column for column in cpu.columns if column not in ("value", "eigenvalue", "drift_norm", "fluctuation_norm")
        ]
        pd.testing.assert_frame_equal(cuda[keys], cpu[keys])
        np.testing.assert_allclose(
            cuda[value].to_numpy(), cpu[value].to_numpy(), rtol=rtol, atol=atol, err_msg=f"{name}.{value}"
        )
    assert json.loads((tmp_path / "cpu" / "provenance.json").read_text())["device"] == "cpu"
    assert json.loads((tmp_path / "cuda" / "provenance.json").read_text())["device"].startswith("cuda")


def test_settings_reject_unknown_keys():
    with pytest.raises(ConfigError, match=r"'theory.stepz': unknown key"):
        stage_settings("theory", {"stepz": 3})
    with pytest.raises(ConfigError, match=r"'theory.sgd.batch': unknown key"):
        stage_settings("theory", {"sgd": {"batch": 3}})
    with pytest.raises(ConfigError, match=r"'theory.digits.losses\[0\]': 'hinge' is not one of"):
        stage_settings("theory", {"digits": {"losses": ["hinge"]}})
