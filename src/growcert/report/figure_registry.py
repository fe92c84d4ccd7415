"""The figure registry: every figure the pipeline draws, its file stem spelled here and nowhere else.

A `Figure` is a PNG under results/figures/<stem>.png with the title the HTML report gives it, the label
and the category/subcategory `snakemake --report` files it under, and its caption file,
src/growcert/resources/report/<caption>.rst (default: the stem's own; the P2 task figures share one file
with a branch per task, the gate figures another). The section (`training`, `p1`, `p2`, `p3`) is where
the HTML report shows it, and gives its paper and its `snakemake --report` category.

Every consumer reads the constants or the lookups below: the stages that draw a figure (the file name),
the claims registry (a claim's figure evidence), the HTML report (its sections' figures in reading order,
the titles, the captions) and the rules (`rules/common.smk`: each figure's output path and report entry).
Renaming a figure is its one line here, and its caption file when that is the stem's own. A P2 task's
figure is p2_<task> (and p2_<task>_gate): the wildcard rules derive the path from the task name, so the
registered ones follow that pattern, and a task that is not registered (a test's toy task) gets a generic
Figure from `task_figure` / `gate_figure`.

Light on purpose: the Snakefile imports it, so it imports nothing beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass

# snakemake --report category and paper of each report section
CATEGORIES = {"training": "Training", "p1": "P1 width and alignment", "p2": "P2 population-risk training",
              "p3": "P3 depth sufficiency"}
PAPERS = {"training": None, "p1": "P1", "p2": "P2", "p3": "P3"}
TASK_CAPTION = "p2_experiment_figure"  # the P2 task figures' caption, a branch per task
GATE_CAPTION = "p2_gate"  # every gate diagnostics figure's caption


@dataclass(frozen=True)
class Figure:
    """One figure: file stem, report section, HTML title, snakemake --report label and subcategory, caption."""

    stem: str
    section: str  # training, p1, p2, p3 (CATEGORIES)
    title: str  # its title in results/report.html
    label: str  # snakemake --report: "figure: <label>"
    subcategory: str  # snakemake --report subcategory (the stage)
    caption: str = ""  # the caption file's stem under resources/report; "" for the figure's own stem

    def __post_init__(self) -> None:
        if not self.caption:
            object.__setattr__(self, "caption", self.stem)

    @property
    def file(self) -> str:
        return f"{self.stem}.png"

    @property
    def paper(self) -> str | None:
        return PAPERS[self.section]

    @property
    def category(self) -> str:
        return CATEGORIES[self.section]


TRAINING_GRID = Figure("training_grid", "training",
                       "Held-out loss and accuracy at the end of training, against width",
                       "held-out loss and accuracy vs width", "training grid")
DALIGN_VS_WIDTH = Figure("p1_dalign_vs_width", "p1",
                         "d_align against width, per insertion point (unbiased, with intervals)",
                         "d_align vs width", "alignment")
PLUGIN_VS_UNBIASED = Figure("p1_plugin_vs_unbiased", "p1", "Plug-in against unbiased d_align",
                            "plug-in vs unbiased d_align", "alignment")
MISALIGNMENT_VS_WIDTH = Figure("p1_misalignment_vs_width", "p1",
                               "Empirical misalignment and both certificates against width",
                               "misalignment vs width", "alignment")
MISALIGNMENT_VS_MK = Figure("p1_misalignment_vs_MK", "p1", "Empirical misalignment against the sample sizes (M, K)",
                            "misalignment vs M = K", "alignment")
INTERVENTIONS = Figure("p1_interventions", "p1", "Residual interventions: observed against predicted held-out change",
                       "observed vs predicted loss change", "interventions")
REGIME_DALIGN_VS_WIDTH = Figure(
    "p1_regime_dalign_vs_width", "p1",
    "Regime map: d_align against width per context, at matched budget and matched loss",
    "d_align vs width per context, matched budget and matched loss", "regime map")
REGIME_DALIGN_VS_CONTEXT = Figure("p1_regime_dalign_vs_context", "p1",
                                  "Regime map: d_align against context at the widest width",
                                  "d_align vs context at the widest width", "regime map")
REGIME_DIMS_VS_WIDTH = Figure("p1_regime_dims_vs_width", "p1", "Regime map: d_∥ and d_2 against width per context",
                              "d_par and d_2 vs width per context", "regime map")
REGIME_PLUGIN_VS_UNBIASED = Figure("p1_regime_plugin_vs_unbiased", "p1",
                                   "Regime map: plug-in beside unbiased d_align",
                                   "plug-in vs unbiased d_align per context", "regime map")
REGIME_SPREAD = Figure("p1_regime_spread", "p1",
                       "Regime map: d_align's spread between training seeds against within one store",
                       "between-seed vs within-store spread of d_align", "regime map")
GROKKING = Figure("p2_grokking", "p2", "Grokking a/b mod p: accuracy along training per optimizer",
                  "grokking", "grokking", TASK_CAPTION)
GROKKING_GATE = Figure("p2_grokking_gate", "p2",
                       "Grokking: gate open fraction and variance ratio per PopulationRiskAdam variant",
                       "grokking gate diagnostics", "grokking", GATE_CAPTION)
PINN = Figure("p2_pinn", "p2", "Noisy-IC advection PINN: test ℓ2 along training per optimizer and learning rate",
              "pinn", "pinn", TASK_CAPTION)
PINN_GATE = Figure("p2_pinn_gate", "p2", "PINN: gate open fraction and variance ratio per PopulationRiskAdam variant",
                   "pinn gate diagnostics", "pinn", GATE_CAPTION)
PREFERENCE = Figure("p2_preference", "p2", "Noisy-label DPO: held-out reward accuracy and drift along training",
                    "noisy-label DPO curves", "preference")
PREFERENCE_GATE = Figure("p2_preference_gate", "p2",
                         "Noisy-label DPO: gate open fraction and variance ratio per PopulationRiskAdam variant",
                         "preference gate diagnostics", "preference", GATE_CAPTION)
THEORY = Figure("p2_theory", "p2", "Signal channel and reservoir, coupling and drift–diffusion",
                "theory", "theory", TASK_CAPTION)
DEPTH = Figure("p3_depth", "p3", "First-order value of an inserted block against depth",
               "value of a new block vs depth", "depth")
GROWTH = Figure("p3_growth", "p3", "Grown networks against networks trained from scratch", "grown vs scratch",
                "growth")

# Every figure, in the HTML report's reading order within each section.
FIGURES: dict[str, Figure] = {figure.stem: figure for figure in [
    TRAINING_GRID,
    DALIGN_VS_WIDTH, PLUGIN_VS_UNBIASED, MISALIGNMENT_VS_WIDTH, MISALIGNMENT_VS_MK, INTERVENTIONS,
    REGIME_DALIGN_VS_WIDTH, REGIME_DALIGN_VS_CONTEXT, REGIME_DIMS_VS_WIDTH, REGIME_PLUGIN_VS_UNBIASED, REGIME_SPREAD,
    GROKKING, GROKKING_GATE, PINN, PINN_GATE, PREFERENCE, PREFERENCE_GATE, THEORY,
    DEPTH, GROWTH,
]}

# summarize-alignment's figures: d_align ones always, misalignment ones when a fixed-context run gave tables
P1_DALIGN_FIGURES = (DALIGN_VS_WIDTH, PLUGIN_VS_UNBIASED)
P1_MISALIGNMENT_FIGURES = (MISALIGNMENT_VS_WIDTH, MISALIGNMENT_VS_MK)
# summarize-regime's figures by the axis of the map each needs more than one of (growcert.report.regime.drawable)
REGIME_FIGURES = {"widths": (REGIME_DALIGN_VS_WIDTH, REGIME_DIMS_VS_WIDTH, REGIME_PLUGIN_VS_UNBIASED),
                  "contexts": (REGIME_DALIGN_VS_CONTEXT,), "seeds": (REGIME_SPREAD,)}
TASK_FIGURES = {figure.subcategory: figure for figure in (GROKKING, PINN, PREFERENCE, THEORY)}
GATE_FIGURES = {figure.subcategory: figure for figure in (GROKKING_GATE, PINN_GATE, PREFERENCE_GATE)}


def section_figures(section: str) -> list[Figure]:
    """The figures of a report section, in reading order."""
    return [figure for figure in FIGURES.values() if figure.section == section]


def task_figure(task: str) -> Figure:
    """The figure of P2 task `task` (a name, or the rules' "{task}" wildcard): registered, or a generic one."""
    return TASK_FIGURES.get(task) or Figure(f"p2_{task}", "p2", f"P2 {task}", task, task, TASK_CAPTION)


def gate_figure(task: str) -> Figure:
    """The gate diagnostics figure of P2 task `task` (a name, or "{task}"): registered, or a generic one."""
    return GATE_FIGURES.get(task) or Figure(f"{task_figure(task).stem}_gate", "p2", f"P2 {task}: gate diagnostics",
                                            f"{task} gate diagnostics", task, GATE_CAPTION)
