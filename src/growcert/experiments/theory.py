"""Signal channel, reservoir and drift–diffusion diagnostics on small networks (P2; docs/science.md,
"theory (P2's output-space dynamics)").

Output-space dynamics along the actual training trajectory of a small residual MLP (tanh, float64)
on (a) a subset of scikit-learn digits, with squared loss on one-hot targets and with cross-entropy,
and (b) a 1-d regression task with label noise. The operators (propagator P, dissipation Gramian W_S,
transfer operators G_S, G_Q) and their definitions live in `growcert.experiments.theory_dynamics`; numerics on
the recorded matrices in `growcert.stats.kernels`. This module runs the experiments (`theory_report` draws
the figure and writes the check and claim rows):

- Per gradient-descent run: channel/reservoir split of W_S, reservoir invisibility (Prop. 3.2) and
  the train–test coupling residual R_⊥ (defined in `growcert.experiments.theory_dynamics`).
- Drift–diffusion of minibatch SGD (defined and recorded in `growcert.experiments.theory_dynamics`).
- Benign label noise (regression, squared loss): noise ε on the training labels shifts g_0 by −ε,
  so to first order it moves the test outputs by G_Q ε; split ε = Π_ker ε + Π_range ε and measure
  both parts' test responses, then retrain from the same initialisation with extra noise of the same
  norm placed entirely in the reservoir or in the channel of that trajectory.

Outputs of `run_theory` (growcert.pipeline.artifacts): SUMMARY (tidy: task, loss, seed, measure, value), SPECTRUM
(eigenvalues of W_S(0→t) at each checkpoint), DRIFT and the provenance record, PROVENANCE; `theory_report` reads
them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from growcert.config import stage_settings
from growcert.experiments.arms import run_arms
from growcert.experiments.common import write_tables
from growcert.experiments.theory_dynamics import (
    FlatModel,
    ResidualMLP,
    Task,
    Trajectory,
    checkpoint_steps,
    digits_task,
    drift_exponents,
    fit_metrics,
    regression_task,
    sgd_drift,
    spectrum_rows,
    test_prediction_rms,
    train_gd,
    trajectory_measures,
)
from growcert.resume import UnitResume
from growcert.runtime import device_record, torch_runtime
from growcert.stats.kernels import split_channel

# Defaults of the `theory:` config section; sized for about a minute on one CPU core. Digits: width 2
# on 8 principal components is 54 parameters for n·C = 300 outputs, so even with the kernel moving
# a reservoir of ~100 directions survives rank_tol (width 3 on 16 inputs fills all 300). lr keeps
# c = η λ_max(K)/n below 1 for both losses. SGD: lr 5e-4 keeps η·T·λ_max(K)/n ≲ 1 over the horizon,
# the regime of the drift–diffusion statement (a roughly constant population gradient); at lr 0.02
# the channel relaxes within the horizon and the drift saturates (fitted exponent ≈ 0.45).
# configs/paper.yaml holds a larger run (minutes to an hour on CPU; the operators cost O(m³) per step, m = n·C).
SUMMARY_COLUMNS = ["task", "loss", "seed", "measure", "value"]
SPECTRUM_COLUMNS = ["task", "loss", "seed", "step", "index", "eigenvalue"]
DRIFT_COLUMNS = ["task", "loss", "seed", "replicate", "T", "drift_norm", "fluctuation_norm"]


# ---------------------------------------------------------------------------------------------- experiments


def unit(vector: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(vector)
    return vector / norm if norm > 0 else vector


def noise_measures(
    net: FlatModel,
    task: Task,
    settings: dict[str, Any],
    seed: int,
    noisy: Trajectory,
    noise: torch.Tensor,
    checkpoints: list[int],
) -> dict[str, float]:
    """Where the label noise of `noisy` sits (reservoir vs channel of its own W_S), the first-order test
    response of each part, and retrained twins from the same initialisation: clean labels, and extra
    noise of the same norm placed entirely in the reservoir, or in the channel."""
    config = settings["regression"]
    final = noisy.snapshots[-1]
    split = split_channel(final.gramian, settings["rank_tol"])
    epsilon = noise.reshape(-1).cpu().numpy()
    in_reservoir, in_channel = split.project(epsilon)
    norm, rms = np.linalg.norm(epsilon), lambda v: float(np.sqrt(np.mean(v**2)))  # noqa: E731
    labels = task.y_train + noise
    rows = {
        "noise_reservoir_fraction": float(np.sum(in_reservoir**2) / norm**2),
        "noise_channel_fraction": float(np.sum(in_channel**2) / norm**2),
        # g_0 = u_S(0) − y − ε: the noise moves final test outputs by +G_Q ε to first order
        "response_iid_reservoir_part": rms(final.test_transfer @ in_reservoir),
        "response_iid_channel_part": rms(final.test_transfer @ in_channel),
    }

    def train(targets: torch.Tensor) -> Trajectory:  # same initialisation and steps, training only
        return train_gd(net, task, "squared", config["lr"], config["steps"], checkpoints, targets, operators=False)

    clean = train(task.y_train)
    mse = lambda t: float(np.mean((t.snapshots[-1].test_outputs - task.y_test.reshape(-1).cpu().numpy()) ** 2))  # noqa: E731
    rows |= {
        "test_mse_clean": mse(clean),
        "test_mse_noisy": mse(noisy),
        "delta_test_mse_iid": mse(noisy) - mse(clean),
        "response_iid_retrained": test_prediction_rms(noisy, clean),
    }
    # fresh directions for the injected noise: independent of ε, seeded
    draws = np.random.default_rng(10_000 + seed).standard_normal((2, len(epsilon)))
    for part, basis, draw in (("reservoir", split.reservoir, draws[0]), ("channel", split.channel, draws[1])):
        if basis.shape[1] == 0:
            rows[f"response_{part}_noise_retrained"] = rows[f"delta_test_mse_{part}_noise"] = math.nan
            continue
        extra = norm * unit(basis @ (basis.T @ draw))
        twin = train(labels + torch.from_numpy(extra).reshape(labels.shape).to(labels.device))
        rows[f"response_{part}_noise_retrained"] = test_prediction_rms(twin, noisy)
        rows[f"delta_test_mse_{part}_noise"] = mse(twin) - mse(noisy)
    return rows


def build_net(task: Task, config: dict[str, Any], seed: int) -> FlatModel:
    """Drawn on the CPU under `seed`, then moved to the task's device: the same weights anywhere."""
    torch.manual_seed(seed)
    module = ResidualMLP(task.x_train.shape[1], config["width"], config["depth"], task.y_train.shape[1])
    return FlatModel(module.to(task.x_train.device))


def run_theory_case(
    task: Task,
    loss: str,
    config: dict[str, Any],
    settings: dict[str, Any],
    seed: int,
    log: Callable[[str], None],
    labels: torch.Tensor | None = None,
):
    """One gradient-descent run with operators + its SGD drift; returns (trajectory, net, rows...)."""
    started = time.perf_counter()
    net = build_net(task, config, seed)
    checkpoints = checkpoint_steps(config["steps"], settings["snapshots"])
    trajectory = train_gd(net, task, loss, config["lr"], config["steps"], checkpoints, labels)
    key = {"task": task.name, "loss": loss, "seed": seed}
    measures = trajectory_measures(trajectory, settings["rank_tol"])
    scored = task if labels is None else Task(task.name, task.x_train, task.x_test, labels, task.y_test)
    measures |= fit_metrics(scored, loss, trajectory.snapshots[-1])
    measures["parameters"] = float(len(net.theta0))
    split = split_channel(trajectory.snapshots[-1].gramian, settings["rank_tol"])
    drift = sgd_drift(net, scored, loss, split.channel, settings, seed)
    measures["drift_exponent"], measures["fluctuation_exponent"] = drift_exponents(
        pd.DataFrame(drift), settings["sgd"]["fit_from"]
    )
    log(
        f"{task.name}/{loss} seed {seed}: {int(measures['parameters'])} parameters, {int(measures['outputs'])} "
        f"outputs -> channel {int(measures['channel_dim'])} / reservoir {int(measures['reservoir_dim'])}; "
        f"invisibility {measures['invisibility_ratio']:.2e}, coupling R_perp {measures['coupling_residual']:.2e}, "
        f"exponents {measures['drift_exponent']:.2f}/{measures['fluctuation_exponent']:.2f} "
        f"({time.perf_counter() - started:.0f}s)"
    )
    if measures["step_sharpness"] > 1.0:
        log(
            f"  warning: eta*lambda_max(K)/n reached {measures['step_sharpness']:.2f} > 1: steps are not small, "
            f"the first-order operators and the coupling bound are unreliable; lower the lr"
        )
    return trajectory, net, measures, spectrum_rows(trajectory, key), drift


def run_theory(
    settings: dict[str, Any],
    out_dir: str | Path,
    log: Callable[[str], None] = print,
    threads: int | None = None,
    *,
    device: str,
) -> dict[str, Any]:
    """Every experiment for every seed; writes artifacts.SUMMARY, SPECTRUM, DRIFT and PROVENANCE.

    Data, initial weights and label noise are drawn on the CPU, then moved to `device`; the float64
    operators come back to numpy at every checkpoint. The provenance record records the device used.
    """
    with torch_runtime(threads, device=device) as runtime:
        return _run_theory(stage_settings("theory", settings), Path(out_dir), log, runtime.device)


def _run_theory(
    settings: dict[str, Any], out_dir: Path, log: Callable[[str], None], device: torch.device
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    digits, regression = digits_task(settings).to(device), regression_task(settings).to(device)
    cases = [("digits", loss) for loss in settings["digits"]["losses"]] + [("regression", "squared")]

    def run_case(case: tuple[str, str], seed: int, _prepared: None, **_resume: Any) -> tuple[list, dict]:
        """One case of one seed -> ([], {"measures", "spectrum", "drift"}); its steps are not snapshotted."""
        task_name, loss = case
        if task_name == "digits":
            _, _, measures, spectrum, drift = run_theory_case(digits, loss, settings["digits"], settings, seed, log)
            return [], {"measures": measures, "spectrum": spectrum, "drift": drift}
        config = settings["regression"]
        noise = config["noise_std"] * torch.randn(
            regression.y_train.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed + 7)
        ).to(device)
        trajectory, net, measures, spectrum, drift = run_theory_case(
            regression, "squared", config, settings, seed, log, regression.y_train + noise
        )
        checkpoints = checkpoint_steps(config["steps"], settings["snapshots"])
        measures |= noise_measures(net, regression, settings, seed, trajectory, noise, checkpoints)
        log(
            f"  label noise: {measures['noise_reservoir_fraction']:.0%} of its energy in the reservoir; test "
            f"response to same-norm noise: reservoir {measures['response_reservoir_noise_retrained']:.2e}, "
            f"channel {measures['response_channel_noise_retrained']:.2e}"
        )
        return [], {"measures": measures, "spectrum": spectrum, "drift": drift}

    # A case is short: a killed run keeps the cases it finished and reruns the one it was in.
    resume = UnitResume(out_dir, settings, None, log)
    _, results = run_arms(settings["seeds"], cases, lambda seed: None, run_case, resume=resume)
    summary, spectra, drifts = [], [], []
    for ((task_name, loss), seed), result in zip(
        [(case, seed) for seed in settings["seeds"] for case in cases], results
    ):
        summary.extend(
            {"task": task_name, "loss": loss, "seed": seed, "measure": name, "value": value}
            for name, value in result["measures"].items()
        )
        spectra += result["spectrum"]
        drifts += result["drift"]
    tables = {
        "summary": pd.DataFrame(summary, columns=SUMMARY_COLUMNS),
        "spectrum": pd.DataFrame(spectra, columns=SPECTRUM_COLUMNS),
        "drift": pd.DataFrame(drifts, columns=DRIFT_COLUMNS),
    }
    written = write_tables(out_dir, settings, tables, **device_record(device))
    resume.folder.clear()
    return written
