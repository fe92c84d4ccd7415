"""Reading a PINN run (growcert.experiments.pinn, P2): best learning rate per optimizer, the
steps-to-target table, the ℓ2 curves figure and the "2.4× faster than tuned AdamW" claim rows, one per
PopulationRiskAdam variant (`poprisk-<gate>-<variance>-wd<decay>`), each judged on its own.

Everything here reads the tidy tables a run writes (artifacts.SUMMARY, CURVES), never a network.
"Median steps to target" is over seeds, with a run that never reached the target counted as +inf,
so an lr whose median run does not reach it is "not reached" (with an even number of seeds, half
unreached already is). Each optimizer's best lr is chosen from its own grid by one rule: fewest
median steps, ties to the smaller median final ℓ2, then to the smaller lr, on the run's tuning seeds
(`pinn.tuning_seeds`, recorded in the provenance record, artifacts.PROVENANCE, beside the tables); the claim is
judged on the other seeds at those lrs, so the choice never sees the seeds it is tested on.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from growcert.config import stage_settings
from growcert.experiments.common import format_steps, median_steps, steps_to_target
from growcert.pipeline.artifacts import PROVENANCE
from growcert.referee.claims import CLAIMS
from growcert.referee.families import judge_family
from growcert.referee.looks import look_level, with_note
from growcert.referee.rows import claim_row
from growcert.referee.verdicts import LEVEL, Judgement, judge_steps

TABLE_COLUMNS = ["optimizer", "best_lr", "median_steps_to_target", "median_final_l2", "reached", "seeds"]


def _read(table: pd.DataFrame | str | Path) -> pd.DataFrame:
    return table if isinstance(table, pd.DataFrame) else pd.read_csv(table)


def optimizers(table: pd.DataFrame) -> list[str]:
    """AdamW first, then the PopulationRiskAdam variants in the order they ran."""
    names = list(dict.fromkeys(table["optimizer"]))
    return [name for name in names if name == "AdamW"] + [name for name in names if name != "AdamW"]


def best_lr(summary: pd.DataFrame, optimizer: str, seeds=None) -> tuple[float, float, float]:
    """(lr, median steps to target, median final ℓ2) of `optimizer`'s best grid lr (module docstring's rule), over
    `seeds` (the tuning seeds; None: every seed in the summary)."""
    runs = summary[summary["optimizer"] == optimizer]
    if seeds is not None:
        runs = runs[runs["seed"].isin(list(seeds))]
    if runs.empty:
        raise ValueError(
            f"no {optimizer} runs in the summary" + (f" on seeds {list(seeds)}" if seeds is not None else "")
        )
    steps, final, lr = min(
        (median_steps(frame["step_to_target"]), float(frame["final_l2"].median()), float(lr))
        for lr, frame in runs.groupby("lr")
    )
    return lr, steps, final


def run_seeds(summary_path: str | Path | None) -> tuple[list[int] | None, list[int] | None]:
    """(tuning seeds, judged seeds) of a run, from the provenance record (artifacts.PROVENANCE) beside its tables;
    (None, None) when unknown."""
    sidecar = PROVENANCE.path(Path(summary_path).parent) if summary_path is not None else None
    if sidecar is None or not sidecar.exists():
        return None, None
    settings = json.loads(sidecar.read_text())["settings"]
    return settings.get("tuning_seeds"), settings.get("seeds")


def pinn_table(
    summary: pd.DataFrame | str | Path, tuning: list[int] | None = None, judged: list[int] | None = None
) -> pd.DataFrame:
    """One row per optimizer at its best lr (chosen on the `tuning` seeds; default: the run's own, from its
    provenance record, artifacts.PROVENANCE): median steps to target over the `judged` seeds (NaN: not reached),
    median final ℓ2, how many judged seeds reached the target, of how many (the table results/tables/p2_pinn.csv)."""
    if tuning is None and not isinstance(summary, pd.DataFrame):
        tuning, judged = run_seeds(summary)
    summary = _read(summary)
    if judged is not None:
        judged_runs = summary[summary["seed"].isin(judged)]
    else:
        judged_runs = summary
    rows = []
    for optimizer in optimizers(summary):
        lr = best_lr(summary, optimizer, tuning)[0]
        _, steps, final = best_lr(judged_runs[judged_runs["lr"] == lr], optimizer)
        runs = judged_runs[(judged_runs["optimizer"] == optimizer) & (judged_runs["lr"] == lr)]
        rows.append(
            {
                "optimizer": optimizer,
                "best_lr": lr,
                "median_steps_to_target": steps if math.isfinite(steps) else math.nan,
                "median_final_l2": final,
                "reached": int(runs["step_to_target"].notna().sum()),
                "seeds": len(runs),
            }
        )
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _summary_from_curves(curves: pd.DataFrame, target_l2: float) -> pd.DataFrame:
    rows = [
        {
            "optimizer": optimizer,
            "lr": lr,
            "seed": seed,
            "final_l2": frame["test_l2"].iloc[-1],
            "step_to_target": steps_to_target(frame["step"], frame["test_l2"], target_l2),
        }
        for (optimizer, lr, seed), frame in curves.groupby(["optimizer", "lr", "seed"], sort=False)
    ]
    return pd.DataFrame(rows)


def plot_pinn(curves_csv: str | Path, out_png: str | Path, target_l2: float | None = None) -> None:
    """Test ℓ2 against step (log y), median over seeds. Each optimizer's best lr (the one the claim
    compares) is bold with the seeds' range as a band; the other lrs of the grids are thin. The target
    comes from `target_l2`, else from the provenance record (artifacts.PROVENANCE) beside the curves, else the
    default."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from growcert.report.figures import save_figure

    curves = pd.read_csv(curves_csv)
    if target_l2 is None:
        sidecar = PROVENANCE.path(Path(curves_csv).parent)
        known = json.loads(sidecar.read_text())["settings"] if sidecar.exists() else {}
        target_l2 = stage_settings("pinn", known)["target_l2"]
    summary = _summary_from_curves(curves, target_l2)
    tuning, _ = run_seeds(curves_csv)
    names = optimizers(summary)
    colours = dict(
        zip(
            names,
            [
                "tab:blue",
                "tab:red",
                "tab:orange",
                "tab:green",
                "tab:purple",
                "tab:brown",
                "tab:pink",
                "tab:olive",
                "tab:cyan",
                "tab:grey",
            ]
            * 2,
        )
    )

    figure, axis = plt.subplots(figsize=(8.5, 4.8))
    for optimizer in names:
        runs, colour = curves[curves["optimizer"] == optimizer], colours[optimizer]
        chosen = best_lr(summary, optimizer, tuning)[0]
        for lr in sorted(runs["lr"].unique()):
            band = runs[runs["lr"] == lr].groupby("step")["test_l2"].agg(["median", "min", "max"])
            if lr == chosen:
                axis.plot(
                    band.index,
                    band["median"],
                    color=colour,
                    linewidth=2.2,
                    zorder=3,
                    label=f"{optimizer} lr={lr:g} (best of grid)",
                )
                axis.fill_between(band.index, band["min"], band["max"], color=colour, alpha=0.12, linewidth=0)
            else:  # the other rates of the grid: thin, same colour
                axis.plot(band.index, band["median"], color=colour, linewidth=0.7, alpha=0.45)
    axis.axhline(target_l2, color="grey", linewidth=0.8, linestyle=":", label=f"target ℓ2 = {target_l2:g}")
    axis.set_yscale("log")
    axis.set_xlabel("step")
    axis.set_ylabel("relative test ℓ2")
    axis.set_title("PINN advection, noisy initial condition (median over seeds)")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    save_figure(figure, out_png)


def pinn_claims(
    summary: pd.DataFrame | str | Path, settings: dict[str, Any], reference: str | None = None
) -> list[dict[str, Any]]:
    """Claim rows (rows.ROW_COLUMNS), one part per PopulationRiskAdam variant (its scope): the speed-up of the
    variant's best lr over the best AdamW lr, both chosen on `pinn.tuning_seeds` and judged on `pinn.seeds`, paired
    by seed, steps as interval-censored bounds (verdicts.judge_steps) at its Holm level; then the claim's primary
    row over every variant (families.judge_family), at the level of its look in reference run `reference`
    (`growcert.referee.looks.look_level`; every row says which look it is)."""
    settings = stage_settings("pinn", settings)
    full = _read(summary)
    tuning, judged_seeds = settings["tuning_seeds"], settings["seeds"]
    table = full[full["seed"].isin(judged_seeds)]
    cap = settings["steps"]

    def fmt(step: float) -> str:
        return format_steps(step, cap)

    def grid(optimizer: str, chosen: float) -> tuple[str, str | None]:
        return _grid_note(full[(full["optimizer"] == optimizer) & full["seed"].isin(tuning)], optimizer, chosen, cap)

    def chosen(optimizer: str) -> tuple[float, float, float]:
        """(lr chosen on the tuning seeds, median steps and final ℓ2 at it over the judged seeds)."""
        lr = best_lr(full, optimizer, tuning)[0]
        _, steps, final = best_lr(table[table["lr"] == lr], optimizer)
        return lr, steps, final

    adamw_lr, adamw_steps, adamw_final = chosen("AdamW")
    adamw_grid, adamw_edge = grid("AdamW", adamw_lr)
    setting = _setting_note(settings, int(table["seed"].nunique()))
    effect = CLAIMS["p2_pinn"].effect
    variants = [name for name in optimizers(full) if name != "AdamW"]
    lrs = {variant: chosen(variant)[0] for variant in variants}

    def per_seed(optimizer: str, lr: float) -> pd.Series:
        return table[(table["optimizer"] == optimizer) & (table["lr"] == lr)].set_index("seed")["step_to_target"]

    baseline, against = per_seed("AdamW", adamw_lr).astype(float), f"AdamW (lr {adamw_lr:g})"

    def judge(level: float, plan: bool = True) -> dict[str, Judgement]:
        judged = {}
        for variant in variants:
            steps = per_seed(variant, lrs[variant]).astype(float)
            seeds = baseline.index.intersection(steps.index)
            paired = baseline[seeds].to_numpy(), steps[seeds].to_numpy()
            judged[variant] = judge_steps(effect, *paired, level, cap, settings["eval_every"], against, plan=plan)
        return judged

    if not variants:
        return []
    at = look_level("p2_pinn", int(table["seed"].nunique()), reference, LEVEL)
    family = judge_family("p2_pinn", judge, at.level, "readings")
    rows = []
    for variant, judgement in family.readings.items():
        gate_lr, gate_steps, gate_final = chosen(variant)
        variant_grid, variant_edge = grid(variant, gate_lr)
        edges = [edge for edge in (adamw_edge, variant_edge) if edge]
        rows.append(
            claim_row(
                "p2_pinn",
                judgement,
                scope=variant,
                role="part",
                this_run=(
                    f"{variant} (lr {gate_lr:g}) {fmt(gate_steps)} vs best AdamW (lr {adamw_lr:g}) "
                    f"{fmt(adamw_steps)} median steps; final ℓ2 {gate_final:.3f} vs {adamw_final:.3f}"
                ),
                note=setting + f"{adamw_grid}; {variant_grid}" + (". " + "; ".join(edges) if edges else "") + ".",
            )
        )
    rows.append(
        claim_row(
            "p2_pinn",
            family.claim,
            scope=family.scope("readings"),
            this_run=f"{len(variants)} readings against the best AdamW lr ({adamw_lr:g})",
            note=setting + adamw_grid + ".",
        )
    )
    return [with_note(row, at) for row in rows]


def _grid_note(runs: pd.DataFrame, optimizer: str, chosen: float, cap: int) -> tuple[str, str | None]:
    """An optimizer's median steps (final ℓ2) per lr on the tuning seeds (`runs`), and a warning when the lr
    `chosen` is at an edge of its grid."""
    text = f"{optimizer} " + ", ".join(
        f"lr={lr:g}: {format_steps(median_steps(frame['step_to_target']), cap)} ({frame['final_l2'].median():.3f})"
        for lr, frame in runs.groupby("lr")
    )
    lrs = sorted(runs["lr"].unique())
    edge = (
        f"the best {optimizer} lr is at the edge of its grid, a better one may lie outside it"
        if len(lrs) > 1 and chosen in (lrs[0], lrs[-1])
        else None
    )
    return text, edge


def _setting_note(settings: dict[str, Any], judged: int) -> str:
    """The note's account of the PINN setting, over `judged` seeds, up to the tuning grids that follow it."""
    nx, nt = settings["test_grid"]
    tuning, judged_seeds, cap = settings["tuning_seeds"], settings["seeds"], settings["steps"]
    return (
        f"steps to relative test ℓ2 ≤ {settings['target_l2']:g} on a {nx}×{nt} grid, median over "
        f"{judged} judged seed(s), evaluated every {settings['eval_every']} steps, cap "
        f"{cap:,}. Advection β={settings['beta']:g}, IC noise std {settings['noise_std']:g}, "
        f"{settings['depth']}×{settings['width']} tanh MLP, stratified batch {settings['batch_size']} of "
        f"{settings['ic_points']} IC + {settings['collocation_points']} collocation"
        f"{' (resampled)' if settings['resample_collocation'] else ''} + {settings['boundary_points']} "
        f"boundary points, weight decay {settings['weight_decay']:g}. Each optimizer's lr is the best of its "
        f"own grid on the tuning seed(s) {tuning}, never on the judged seeds {judged_seeds}. Median steps "
        "(final ℓ2) per lr on the tuning seeds: "
    )
