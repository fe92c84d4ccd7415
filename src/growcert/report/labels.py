"""How the report shows each artifact of `pipeline.artifacts`: a figure's title in the HTML report, and what
`snakemake --report` files an artifact under (its label "<kind>: <label>", the category of its report section, its
subcategory, the stage) with its caption file, src/growcert/resources/report/<caption>.rst (default: the artifact's
own stem; the P2 task figures share one file with a branch per task, the gate figures another). The artifacts'
records say only what a file is called and which report section shows it; a title or a label changes here alone.

A P2 task that is not registered here (a test's toy task, or the rules' "{task}" wildcard) is shown under its task
name (`shown`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from growcert.pipeline.artifacts import (
    ADVICE_CALIBRATION,
    ALIGNMENT_CLAIMS,
    ALIGNMENT_SUMMARY,
    DALIGN_VS_WIDTH,
    DEPTH,
    DEPTH_CLAIMS,
    FIGURES,
    GATE_SUFFIX,
    GROKKING,
    GROKKING_GATE,
    GROWTH,
    GROWTH_TABLE,
    INTERVENTIONS,
    INTERVENTIONS_CLAIMS,
    INTERVENTIONS_SUMMARY,
    MISALIGNMENT_VS_MK,
    MISALIGNMENT_VS_WIDTH,
    PINN,
    PINN_GATE,
    PLUGIN_VS_UNBIASED,
    PREFERENCE,
    PREFERENCE_GATE,
    RECOMMENDED_DEPTH,
    REGIME_CELLS,
    REGIME_CLAIMS,
    REGIME_DALIGN_VS_CONTEXT,
    REGIME_DALIGN_VS_WIDTH,
    REGIME_DIMS_VS_WIDTH,
    REGIME_PLUGIN_VS_UNBIASED,
    REGIME_SPREAD,
    THEORY,
    TRAINING_GRID,
    Artifact,
    Checks,
    Claims,
    Figure,
    task_claims,
    task_stem,
    task_table,
)

# snakemake --report category and paper of each report section
CATEGORIES = {
    "training": "Training",
    "p1": "P1 width and alignment",
    "p2": "P2 population-risk training",
    "p3": "P3 depth sufficiency",
    "advice": "Is the advice right?",
}
PAPERS = {"training": None, "p1": "P1", "p2": "P2", "p3": "P3", "advice": None}
TASK_CAPTION = "p2_experiment_figure"  # the P2 task figures' caption, a branch per task
GATE_CAPTION = "p2_gate"  # every gate diagnostics figure's caption
TASK_TABLE_CAPTION, TASK_CLAIMS_CAPTION = "p2_experiment_table", "p2_experiment_claims"


@dataclass(frozen=True)
class Shown:
    """How one artifact is shown: its `snakemake --report` label and subcategory, its caption file's stem ("" for
    the artifact's own stem) and, for a figure, its title in results/report.html."""

    label: str
    subcategory: str
    caption: str = ""
    title: str = ""


SHOWN: dict[Artifact, Shown] = {
    TRAINING_GRID: Shown(
        "held-out loss and accuracy vs width",
        "training grid",
        title="Held-out loss and accuracy at the end of training, against width",
    ),
    DALIGN_VS_WIDTH: Shown(
        "d_align vs width", "alignment", title="d_align against width, per insertion point (unbiased, with intervals)"
    ),
    PLUGIN_VS_UNBIASED: Shown("plug-in vs unbiased d_align", "alignment", title="Plug-in against unbiased d_align"),
    MISALIGNMENT_VS_WIDTH: Shown(
        "misalignment vs width", "alignment", title="Empirical misalignment and both certificates against width"
    ),
    MISALIGNMENT_VS_MK: Shown(
        "misalignment vs M = K", "alignment", title="Empirical misalignment against the sample sizes (M, K)"
    ),
    INTERVENTIONS: Shown(
        "observed vs predicted loss change",
        "interventions",
        title="Residual interventions: observed against predicted held-out change",
    ),
    REGIME_DALIGN_VS_WIDTH: Shown(
        "d_align vs width per context, matched budget and matched loss",
        "regime map",
        title="Regime map: d_align against width per context, at matched budget and matched loss",
    ),
    REGIME_DALIGN_VS_CONTEXT: Shown(
        "d_align vs context at the widest width",
        "regime map",
        title="Regime map: d_align against context at the widest width",
    ),
    REGIME_DIMS_VS_WIDTH: Shown(
        "d_par and d_2 vs width per context", "regime map", title="Regime map: d_∥ and d_2 against width per context"
    ),
    REGIME_PLUGIN_VS_UNBIASED: Shown(
        "plug-in vs unbiased d_align per context", "regime map", title="Regime map: plug-in beside unbiased d_align"
    ),
    REGIME_SPREAD: Shown(
        "between-seed vs within-store spread of d_align",
        "regime map",
        title="Regime map: d_align's spread between training seeds against within one store",
    ),
    GROKKING: Shown(
        "grokking", "grokking", caption=TASK_CAPTION, title="Grokking a/b mod p: accuracy along training per optimizer"
    ),
    GROKKING_GATE: Shown(
        "grokking gate diagnostics",
        "grokking",
        caption=GATE_CAPTION,
        title="Grokking: gate open fraction and variance ratio per PopulationRiskAdam variant",
    ),
    PINN: Shown(
        "pinn",
        "pinn",
        caption=TASK_CAPTION,
        title="Noisy-IC advection PINN: test ℓ2 along training per optimizer and learning rate",
    ),
    PINN_GATE: Shown(
        "pinn gate diagnostics",
        "pinn",
        caption=GATE_CAPTION,
        title="PINN: gate open fraction and variance ratio per PopulationRiskAdam variant",
    ),
    PREFERENCE: Shown(
        "noisy-label DPO curves",
        "preference",
        title="Noisy-label DPO: held-out reward accuracy and drift along training",
    ),
    PREFERENCE_GATE: Shown(
        "preference gate diagnostics",
        "preference",
        caption=GATE_CAPTION,
        title="Noisy-label DPO: gate open fraction and variance ratio per PopulationRiskAdam variant",
    ),
    THEORY: Shown(
        "theory", "theory", caption=TASK_CAPTION, title="Signal channel and reservoir, coupling and drift–diffusion"
    ),
    DEPTH: Shown(
        "value of a new block vs depth", "depth", title="First-order value of an inserted block against depth"
    ),
    GROWTH: Shown("grown vs scratch", "growth", title="Grown networks against networks trained from scratch"),
    ADVICE_CALIBRATION: Shown(
        "advise calibration",
        "advise-check",
        title="advise's predicted against observed gain per option, per family and growth procedure",
    ),
    ALIGNMENT_SUMMARY: Shown("d_align per cell", "alignment"),
    INTERVENTIONS_SUMMARY: Shown("first-order accuracy per cell", "interventions"),
    REGIME_CELLS: Shown("width trend per (context, progress) cell", "regime map"),
    RECOMMENDED_DEPTH: Shown("saturation decision", "depth"),
    GROWTH_TABLE: Shown("held-out loss per arm and step", "growth", caption="p3_growth_table"),
    ALIGNMENT_CLAIMS: Shown("width trends and certificates", "alignment", caption="p1_alignment_claims"),
    INTERVENTIONS_CLAIMS: Shown(
        "observed / predicted at the paper's step scale", "interventions", caption="p1_interventions_claims"
    ),
    REGIME_CLAIMS: Shown("width trend on the regime map", "regime map", caption="p1_regime_claims"),
    DEPTH_CLAIMS: Shown("depth plateau and grown vs scratch", "growth", caption="p3_depth_claims"),
    task_table("preference"): Shown("medians per optimizer", "preference", caption="p2_preference_table"),
    task_claims("preference"): Shown("reward accuracy and drift", "preference", caption="p2_preference_claims"),
}


def shown(artifact: Artifact) -> Shown:
    """How `artifact` is shown: its registered entry, else a P2 task's by its task name (the stem after p2_, a
    gate figure's before _gate), else a checks file's (no label, its own caption)."""
    if artifact in SHOWN:
        return SHOWN[artifact]
    task = artifact.stem.removeprefix(task_stem("")).removesuffix(GATE_SUFFIX)
    if isinstance(artifact, Checks):
        return Shown("", "")
    if isinstance(artifact, Figure) and artifact.stem.endswith(GATE_SUFFIX):
        return Shown(f"{task} gate diagnostics", task, GATE_CAPTION, title=f"P2 {task}: gate diagnostics")
    if isinstance(artifact, Figure):
        return Shown(task, task, TASK_CAPTION, title=f"P2 {task}")
    return Shown(task, task, TASK_CLAIMS_CAPTION if isinstance(artifact, Claims) else TASK_TABLE_CAPTION)


def caption_stem(artifact: Artifact) -> str:
    """The stem of `artifact`'s caption file under resources/report."""
    return shown(artifact).caption or artifact.stem


def report_label(artifact: Artifact) -> str:
    """Its `snakemake --report` label: "<kind>: <label>"."""
    return f"{artifact.kind}: {shown(artifact).label}"


def title(stem: str) -> str:
    """The HTML report's title of registered figure `stem` (else the stem in words)."""
    return shown(FIGURES[stem]).title if stem in FIGURES else stem.replace("_", " ")


def report_marks(results: str, captions: str) -> Callable[[Artifact], Any]:
    """The rules' `report_output(artifact)`: an artifact's path in `results`, marked for `snakemake --report
    results/snakemake-report.zip` with its caption file, the category of its report section, its subcategory and its
    labels (what it is, and its paper). For results folder `results`, with the caption files in `captions`
    (as the rules see it: Snakemake resolves a rule's caption against the folder of the file that defines it)."""

    from snakemake.io import report  # only the rules call this: the report layer needs no Snakemake otherwise

    def report_output(artifact: Artifact):
        paper = PAPERS[artifact.section]
        return report(
            artifact.path(results),
            caption=f"{captions}/{caption_stem(artifact)}.rst",
            category=CATEGORIES[artifact.section],
            subcategory=shown(artifact).subcategory,
            labels={"result": report_label(artifact)} | ({"paper": paper} if paper else {}),
        )

    return report_output
