"""Reading a theory run (growcert.experiments.theory; docs/science.md, "theory (P2's output-space dynamics)"): the
figure, the three check rows (reservoir invisibility, benign reservoir noise, the squared-loss coupling residual: exact
identities) and the p2_drift_diffusion claim row, from a run's summary, spectrum and drift (artifacts.SUMMARY,
SPECTRUM, DRIFT).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from growcert.config import stage_settings
from growcert.pipeline.artifacts import DRIFT, PROVENANCE, SPECTRUM, SUMMARY
from growcert.referee.claims import CLAIMS
from growcert.referee.looks import look_level, with_note
from growcert.referee.rows import check_row, claim_row
from growcert.referee.verdicts import LEVEL, judge_samples
from growcert.stats.kernels import root_mean_square

INVISIBLE_BELOW = 1e-2  # ratio ‖G_Q|ker‖/‖G_Q|range‖ under which the claim counts as holding
BENIGN_BELOW = 1e-2  # test response to reservoir noise / to same-norm channel noise, for "benign"


def _run_label(task: str, loss: str) -> str:
    return f"{task}/{loss.replace('cross_entropy', 'CE')}"


def plot_theory(out_dir: str | Path, out_png: str | Path) -> None:
    """Three panels from run_theory's CSVs (first seed): the W_S eigen-spectrum at each checkpoint
    (relative to the final λ_max, with the rank tolerance), where the regression label noise sits and
    what same-norm noise in the reservoir or the channel does to the test outputs, and the SGD drift
    and fluctuation RMS against T with the fitted slopes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from growcert.report.figures import save_figure

    out_dir = Path(out_dir)
    summary, spectrum = pd.read_csv(SUMMARY.path(out_dir)), pd.read_csv(SPECTRUM.path(out_dir))
    drift = pd.read_csv(DRIFT.path(out_dir))
    rank_tol = json.loads(PROVENANCE.path(out_dir).read_text()).get("settings", {}).get("rank_tol")
    seed = int(summary["seed"].min())
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    colours = dict(
        zip(
            summary[["task", "loss"]].drop_duplicates().itertuples(index=False, name=None), plt.get_cmap("tab10").colors
        )
    )

    _spectrum_panel(axes[0], spectrum[spectrum["seed"] == seed], colours, rank_tol)
    _noise_panel(axes[1], summary[(summary["task"] == "regression") & (summary["seed"] == seed)])
    _drift_panel(axes[2], drift[drift["seed"] == seed], summary[summary["seed"] == seed], colours)
    for axis in axes:
        axis.grid(alpha=0.3, which="both")
    figure.tight_layout()
    save_figure(figure, out_png)


def _spectrum_panel(axis, spectrum: pd.DataFrame, colours: dict, rank_tol: float | None) -> None:
    """The W_S eigen-spectrum of one seed's runs at each checkpoint, relative to the final λ_max."""
    for (task, loss), frame in spectrum.groupby(["task", "loss"], sort=False):
        steps = sorted(frame["step"].unique())
        top = frame.loc[frame["step"] == steps[-1], "eigenvalue"].max()
        for position, (step, at_step) in enumerate(frame.groupby("step")):
            values = np.clip(at_step.sort_values("index")["eigenvalue"].to_numpy() / top, 1e-18, None)
            axis.plot(
                np.arange(1, len(values) + 1),
                values,
                color=colours[(task, loss)],
                alpha=0.25 + 0.75 * (position + 1) / len(steps),
                linewidth=1.0,
                label=f"{_run_label(task, loss)} (steps {steps[0]}…{steps[-1]}, light → dark)"
                if step == steps[-1]
                else None,
            )
    if rank_tol:
        axis.axhline(rank_tol, color="grey", linestyle=":", linewidth=1, label=f"rank tolerance {rank_tol:g}")
    axis.set(
        yscale="log",
        xscale="log",
        xlabel="eigenvalue index",
        ylabel="eigenvalue of W_S(0→t) / final λ_max",
        title="dissipation Gramian spectrum over training",
    )
    axis.legend(fontsize=7)


def _noise_panel(axis, regression: pd.DataFrame) -> None:
    """Where one seed's regression label noise sits, and what same-norm noise in the reservoir or the channel does."""
    noise = regression.set_index("measure")["value"]
    groups = {
        "label-noise energy fraction": ("noise_reservoir_fraction", "noise_channel_fraction"),
        "test response (RMS) to\nsame-norm injected noise": (
            "response_reservoir_noise_retrained",
            "response_channel_noise_retrained",
        ),
        "Δ test MSE from\nsame-norm injected noise": ("delta_test_mse_reservoir_noise", "delta_test_mse_channel_noise"),
    }
    for offset, (part, colour) in enumerate((("reservoir", "tab:blue"), ("channel", "tab:orange"))):
        values = [abs(noise.get(names[offset], np.nan)) for names in groups.values()]
        bars = axis.bar(np.arange(len(groups)) + (offset - 0.5) * 0.38, values, 0.38, color=colour, label=part)
        axis.bar_label(bars, labels=[f"{v:.1e}" for v in values], fontsize=7)
    axis.set_xticks(np.arange(len(groups)), list(groups), fontsize=8)
    axis.set(yscale="log", ylabel="value (log scale)", title="regression label noise: reservoir vs channel")
    axis.legend(fontsize=8)


def _drift_panel(axis, drift: pd.DataFrame, summary: pd.DataFrame, colours: dict) -> None:
    """One seed's SGD drift and fluctuation RMS against T, with the fitted slopes (`summary`: that seed's rows)."""
    for (task, loss), frame in drift.groupby(["task", "loss"], sort=False):
        by_t = frame.groupby("T")
        horizons = np.array(sorted(by_t.groups))
        exponents = summary[(summary["task"] == task) & (summary["loss"] == loss)]
        slope = exponents.set_index("measure")["value"]
        for column, style, name in (("drift_norm", "-", "drift"), ("fluctuation_norm", "--", "fluctuation")):
            rms = by_t[column].apply(lambda v: float(root_mean_square(v.to_numpy()))).loc[horizons]
            measure = "drift_exponent" if name == "drift" else "fluctuation_exponent"
            axis.plot(
                horizons,
                rms,
                style,
                color=colours[(task, loss)],
                label=f"{_run_label(task, loss)} {name}: slope {slope.get(measure, np.nan):.2f}",
            )
    axis.set(
        xscale="log",
        yscale="log",
        xlabel="SGD steps T",
        ylabel="RMS over batch streams (channel coords)",
        title="SGD drift (∝T) and fluctuation (∝√T)",
    )
    axis.legend(fontsize=7)


def _medians(summary: pd.DataFrame) -> pd.DataFrame:
    """Median over seeds: rows (task, loss), columns measures."""
    return summary.pivot_table(index=["task", "loss"], columns="measure", values="value", aggfunc="median")


def theory_claims(
    out_dir: str | Path, settings: dict[str, Any] | None = None, reference: str | None = None
) -> list[dict[str, Any]]:
    """Three check rows (rows.CHECK_COLUMNS, medians over seeds) and the p2_drift_diffusion claim row
    (rows.ROW_COLUMNS, judged over seeds, at the level of its look in reference run `reference`:
    `growcert.referee.looks.look_level`) from the summary (artifacts.SUMMARY)."""
    settings = stage_settings("theory", settings)
    summary = pd.read_csv(SUMMARY.path(Path(out_dir)))
    table = _medians(summary)
    runs = [(task, loss, row) for (task, loss), row in table.iterrows()]
    seeds = f"{len(settings['seeds'])} seed(s), medians; rank_tol {settings['rank_tol']:g}"
    rows = [_invisibility_row(runs, seeds), _benign_noise_row(table, settings, seeds), _coupling_row(runs, seeds)]
    return rows + [_drift_diffusion_row(summary, runs, settings, seeds, reference)]


def _invisibility_row(runs: list, seeds: str) -> dict[str, Any]:
    """Check p2_reservoir_invisible over the runs (task, loss, medians): the test set does not see the reservoir."""
    with_reservoir = [(t, l, r) for t, l, r in runs if r["reservoir_dim"] > 0 and np.isfinite(r["invisibility_ratio"])]
    worst = max((r["invisibility_ratio"] for _, _, r in with_reservoir), default=math.nan)
    return check_row(
        "p2_reservoir_invisible",
        this_run="; ".join(
            f"{_run_label(t, l)}: ‖G_Q|ker‖/‖G_Q|range‖ = {r['invisibility_ratio']:.1e} "
            f"(reservoir {r['reservoir_dim']:.0f}/{r['outputs']:.0f})"
            if np.isfinite(r["invisibility_ratio"])
            else f"{_run_label(t, l)}: reservoir empty"
            for t, l, r in runs
        ),
        passed=bool(with_reservoir and worst < INVISIBLE_BELOW),
        note=(
            f"holds if every run with a non-empty reservoir has ratio < {INVISIBLE_BELOW:g}; reservoir = "
            f"eigenvalues of W_S ≤ rank_tol·λ_max, so the ratio is capped by the Cauchy–Schwarz bound "
            f"√(E_Q·rank_tol·λ_max)/‖G_Q|range‖, not exactly 0. {seeds}."
        ),
    )


def _benign_noise_row(table: pd.DataFrame, settings: dict[str, Any], seeds: str) -> dict[str, Any]:
    """Check p2_benign_noise on the squared-loss regression run: label noise in the reservoir is benign."""
    noise = table.loc[("regression", "squared")]
    reservoir, channel = noise["response_reservoir_noise_retrained"], noise["response_channel_noise_retrained"]
    return check_row(
        "p2_benign_noise",
        this_run=(
            f"{noise['noise_reservoir_fraction']:.0%} of the label-noise energy in the reservoir; test "
            f"response to same-norm noise: reservoir {reservoir:.1e} vs channel {channel:.1e} RMS, "
            f"Δ test MSE {noise['delta_test_mse_reservoir_noise']:.1e} vs "
            f"{noise['delta_test_mse_channel_noise']:.1e}; the iid noise cost "
            f"{noise['delta_test_mse_iid']:.1e} test MSE"
        ),
        passed=bool(np.isfinite(reservoir) and np.isfinite(channel) and reservoir < BENIGN_BELOW * channel),
        note=(
            f"regression sin(πx), label noise std {settings['regression']['noise_std']}; noise of the same "
            f"norm as the iid noise placed entirely in the reservoir or the channel of the noisy run's W_S, "
            f"retrained from the same initialisation; holds if the reservoir response is < "
            f"{BENIGN_BELOW:g} × the channel response. {seeds}."
        ),
    )


def _coupling_row(runs: list, seeds: str) -> dict[str, Any]:
    """Check p2_coupling_residual over the runs: R_⊥ is below its numerical-zero cap under squared loss."""
    squared = [(t, l, r) for t, l, r in runs if l == "squared"]
    other = [(t, l, r) for t, l, r in runs if l != "squared"]
    return check_row(
        "p2_coupling_residual",
        this_run="; ".join(
            f"{_run_label(t, l)}: R_⊥ {r['coupling_residual']:.1e}"
            + (f" (cap {r['coupling_bound']:.1e})" if l == "squared" else "")
            for t, l, r in squared + other
        ),
        passed=bool(squared and all(r["coupling_residual"] <= r["coupling_bound"] for _, _, r in squared)),
        note=(
            "R_⊥ = ‖ΔG_Q Π_ker ΔG_S · g_0‖/‖ΔG_Q g_0‖, worst start checkpoint; with the truncated "
            "pseudo-inverse the squared-loss residual is provably below the cap "
            "√(2ΔE_Q·rank_tol·σ_max/(2−c)), "
            "which is its numerical zero; holds if every squared-loss run is below its cap. Cross-entropy "
            "has no such guarantee and is reported as measured. " + seeds + "."
        ),
    )


def _drift_diffusion_row(
    summary: pd.DataFrame, runs: list, settings: dict[str, Any], seeds: str, reference: str | None
) -> dict[str, Any]:
    """Claim p2_drift_diffusion judged over seeds: each seed's largest deviation of the drift and fluctuation
    exponents from 1 and 0.5 over every run, at the level of its look in reference run `reference`."""
    fits = [(t, l, r["drift_exponent"], r["fluctuation_exponent"]) for t, l, r in runs]
    # dropna=False: an exponent undetermined in every seed stays a NaN column; np.max propagates a NaN
    # (Python's max drops it depending on order), so such a seed has no determined deviation
    per_seed = summary.pivot_table(index="seed", columns=["task", "loss", "measure"], values="value", dropna=False)
    deviations = (
        [
            float(
                np.max(
                    [
                        [
                            abs(per_seed[(t, l, "drift_exponent")][seed] - 1),
                            abs(per_seed[(t, l, "fluctuation_exponent")][seed] - 0.5),
                        ]
                        for t, l, _, _ in fits
                    ]
                )
            )
            for seed in per_seed.index
        ]
        if fits
        else []
    )
    at = look_level("p2_drift_diffusion", len(deviations), reference, LEVEL)
    return with_note(
        claim_row(
            "p2_drift_diffusion",
            judge_samples(CLAIMS["p2_drift_diffusion"].effect, deviations, at.level),
            this_run="median drift / fluctuation exponents: "
            + "; ".join(f"{_run_label(t, l)}: {d:.2f} / {f:.2f}" for t, l, d, f in fits),
            note=(
                f"log–log slopes of RMS over {settings['sgd']['replicates']} batch streams, T from "
                f"{settings['sgd']['fit_from']} to {settings['sgd']['steps']}, batch {settings['sgd']['batch_size']}, "
                f"lr {settings['sgd']['lr']:g}, in the channel of the matching GD run; per seed the largest deviation "
                f"from 1 and 0.5 over every run. {seeds}."
            ),
        ),
        at,
    )
