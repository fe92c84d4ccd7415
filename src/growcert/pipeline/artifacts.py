"""Every artifact the pipeline writes, named once: figures, tables, claims and checks files, the per-run
and per-store files, the run folder, logs and benchmarks.

Figures. A `Figure` is a PNG under results/figures/<stem>.png with the title the HTML report gives it, the
label and the category/subcategory `snakemake --report` files it under, and its caption file,
src/growcert/resources/report/<caption>.rst (default: the stem's own; the P2 task figures share one file
with a branch per task, the gate figures another). The section (`training`, `p1`, `p2`, `p3`) is where
the HTML report shows it, and gives its paper and its `snakemake --report` category. Renaming a figure is
its one line here, and its caption file when that is the stem's own. A P2 task's figure is p2_<task> (and
p2_<task>_gate): the wildcard rules derive the path from the task name, so the registered ones follow that
pattern, and a task that is not registered (a test's toy task) gets a generic Figure from `task_figure` /
`gate_figure`.

Tables, claims and checks. A `Table` is results/tables/<stem>.csv (shown collapsed in its report section),
a `Claims` file results/claims/<stem>.csv (claim rows, `growcert.referee.claims`), a `Checks` file
results/checks/<stem>.csv (implementation checks). Tables and claims are also marked for `snakemake
--report`, with a caption file and a label like figures. A P2 task's are p2_<task> (`task_table`, ...).

Every other file and folder is a `Place`: a template relative to the folder it lies in (a results folder
unless its comment names another: a run's, a P2 task's or unit's, a reference run's), reached one way,
`X.path(folder, **wildcards)` (a Figure, Table, Claims or Checks file too: `X.path(results)`). Per run and per
store: a trained run's folder is `RUN_DIR` (models/family/dataset/`RUN_FOLDER` and the context tag), and every
file made from one of its checkpoints sits at the same place under its own kind's folder (grads/,
stats/alignment/, ...), step{step} in it. `LOG` and `BENCHMARK` give every rule's log and benchmark file.

Every consumer reads the constants or the lookups below: the stages that draw a figure (the file name),
the claims registry (a claim's figure and table evidence), the HTML report (its sections' figures in reading
order, the titles, the captions, the folders) and the rules (paths, `snakemake --report` entries).
Light on purpose: the Snakefile imports it, so it imports nothing beyond the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from pathlib import PurePosixPath as Path
from typing import ClassVar, TypeVar

Root = TypeVar("Root", str, PurePath)

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


class _Wildcards(dict):
    """Format values that leave a wildcard not given as it is ({name})."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def fill(template: str, **wildcards) -> str:
    """`template` with the wildcards given filled in and the others left as {name}."""
    return template.format_map(_Wildcards(wildcards))


def _join(root: Root, relative: str) -> Root:
    """`relative` inside folder `root`: a path for a path, a string (the rules' templates) for a string."""
    return root / relative if isinstance(root, PurePath) else f"{root}/{relative}"


@dataclass(frozen=True)
class Place:
    """A file or folder, `template` relative to the folder it lies in (a results folder unless its comment
    names another), with {wildcards}. `path(root, **wildcards)` is the one way to reach it."""

    template: str

    def path(self, root: Root, **wildcards) -> Root:
        """Where it lies in folder `root`, `wildcards` filled in (those not given stay: the rules' templates)."""
        return _join(root, fill(self.template, **wildcards))

    @property
    def name(self) -> str:
        """Its file or folder name (the template's last part)."""
        return self.template.rsplit("/", 1)[-1]

    def under(self, folder: Place) -> Place:
        """The same file inside `folder` (both relative to the same root)."""
        return Place(f"{folder.template}/{self.template}")

    def at(self, **wildcards) -> Place:
        """The same place with `wildcards` filled in."""
        return Place(fill(self.template, **wildcards))

    @property
    def pattern(self) -> str:
        """Its template with every wildcard as *: the glob pattern that finds each such file in its folder."""
        return re.sub(r"\{\w+\}", "*", self.template)


# The folders of a results folder that the report reads whole, and the report itself
FIGURES_DIR, TABLES_DIR, CLAIMS_DIR, CHECKS_DIR = Place("figures"), Place("tables"), Place("claims"), Place("checks")
STATS_FOLDER = "stats"  # the pooled tables' folder (the places below)
REPORT = Place("report.html")


class Artifact:
    """A file of a results folder, <folder>/<stem><suffix>. One with a section is marked for `snakemake
    --report`: filed under that section's category and its `subcategory`, labelled "<kind>: <label>" and
    captioned by resources/report/<caption>.rst (default: the stem's own)."""

    folder: ClassVar[str]
    suffix: ClassVar[str] = ".csv"
    kind: ClassVar[str]
    stem: str
    section: str | None
    label: str
    subcategory: str
    caption: str

    def __post_init__(self) -> None:
        if not self.caption:
            object.__setattr__(self, "caption", self.stem)

    @property
    def file(self) -> str:
        return f"{self.stem}{self.suffix}"

    def path(self, results: Root) -> Root:
        """Where it lies in results folder `results`."""
        return _join(results, f"{self.folder}/{self.file}")

    @property
    def paper(self) -> str | None:
        return PAPERS[self.section] if self.section else None

    @property
    def category(self) -> str:
        return CATEGORIES[self.section]

    @property
    def report_label(self) -> str:
        """Its `snakemake --report` label."""
        return f"{self.kind}: {self.label}"


@dataclass(frozen=True)
class Figure(Artifact):
    """One figure: file stem, report section, HTML title, snakemake --report label and subcategory, caption."""

    folder: ClassVar[str] = FIGURES_DIR.template
    suffix: ClassVar[str] = ".png"
    kind: ClassVar[str] = "figure"
    stem: str
    section: str  # training, p1, p2, p3 (CATEGORIES)
    title: str  # its title in results/report.html
    label: str  # snakemake --report: "figure: <label>"
    subcategory: str  # snakemake --report subcategory (the stage)
    caption: str = ""  # the caption file's stem under resources/report; "" for the figure's own stem


@dataclass(frozen=True)
class Table(Artifact):
    """A report table, results/tables/<stem>.csv."""

    folder: ClassVar[str] = TABLES_DIR.template
    kind: ClassVar[str] = "table"
    stem: str
    section: str | None = None
    label: str = ""
    subcategory: str = ""
    caption: str = ""


@dataclass(frozen=True)
class Claims(Table):
    """A claim-rows file, results/claims/<stem>.csv (growcert.referee.rows.ROW_COLUMNS)."""

    folder: ClassVar[str] = CLAIMS_DIR.template
    kind: ClassVar[str] = "claims"


@dataclass(frozen=True)
class Checks(Table):
    """An implementation-checks file, results/checks/<stem>.csv (growcert.referee.rows.CHECK_COLUMNS)."""

    folder: ClassVar[str] = CHECKS_DIR.template
    kind: ClassVar[str] = "checks"


# Hand-laid records read as a table (ruff format would put each record's arguments one per line)
# fmt: off
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
# advise-check's (drawn into its scores folder, shown from the advise-check reference run)
ADVICE_CALIBRATION = Figure("advice_calibration", "advice",
                            "advise's predicted against observed gain per option, per family and growth procedure",
                            "advise calibration", "advise-check")

# Every figure, in the HTML report's reading order within each section.
FIGURES: dict[str, Figure] = {figure.stem: figure for figure in [
    TRAINING_GRID,
    DALIGN_VS_WIDTH, PLUGIN_VS_UNBIASED, MISALIGNMENT_VS_WIDTH, MISALIGNMENT_VS_MK, INTERVENTIONS,
    REGIME_DALIGN_VS_WIDTH, REGIME_DALIGN_VS_CONTEXT, REGIME_DIMS_VS_WIDTH, REGIME_PLUGIN_VS_UNBIASED, REGIME_SPREAD,
    GROKKING, GROKKING_GATE, PINN, PINN_GATE, PREFERENCE, PREFERENCE_GATE, THEORY,
    DEPTH, GROWTH,
    ADVICE_CALIBRATION,
]}

# summarize-alignment's figures: d_align ones always, misalignment ones when a fixed-context run gave tables
P1_DALIGN_FIGURES = (DALIGN_VS_WIDTH, PLUGIN_VS_UNBIASED)
P1_MISALIGNMENT_FIGURES = (MISALIGNMENT_VS_WIDTH, MISALIGNMENT_VS_MK)
# summarize-regime's figures by the axis of the map each needs more than one of (growcert.report.regime.drawable)
REGIME_FIGURES = {"widths": (REGIME_DALIGN_VS_WIDTH, REGIME_DIMS_VS_WIDTH, REGIME_PLUGIN_VS_UNBIASED),
                  "contexts": (REGIME_DALIGN_VS_CONTEXT,), "seeds": (REGIME_SPREAD,)}
TASK_FIGURES = {figure.subcategory: figure for figure in (GROKKING, PINN, PREFERENCE, THEORY)}
GATE_FIGURES = {figure.subcategory: figure for figure in (GROKKING_GATE, PINN_GATE, PREFERENCE_GATE)}

# The report tables, claims and checks files of the summarising stages (the P2 tasks': task_table, ...).
ALIGNMENT_SUMMARY = Table("p1_alignment_summary", "p1", "d_align per cell", "alignment")
INTERVENTIONS_SUMMARY = Table("p1_interventions_summary", "p1", "first-order accuracy per cell", "interventions")
REGIME_CELLS = Table("p1_regime_cells", "p1", "width trend per (context, progress) cell", "regime map")
RECOMMENDED_DEPTH = Table("p3_recommended_depth", "p3", "saturation decision", "depth")
GROWTH_TABLE = Table("p3_growth", "p3", "held-out loss per arm and step", "growth", "p3_growth_table")
TABLES = (INTERVENTIONS_SUMMARY, ALIGNMENT_SUMMARY, REGIME_CELLS, RECOMMENDED_DEPTH, GROWTH_TABLE)
ALIGNMENT_CLAIMS = Claims("p1_alignment", "p1", "width trends and certificates", "alignment", "p1_alignment_claims")
INTERVENTIONS_CLAIMS = Claims("p1_interventions", "p1", "observed / predicted at the paper's step scale",
                              "interventions", "p1_interventions_claims")
REGIME_CLAIMS = Claims("p1_regime", "p1", "width trend on the regime map", "regime map", "p1_regime_claims")
DEPTH_CLAIMS = Claims("p3_depth", "p3", "depth plateau and grown vs scratch", "growth", "p3_depth_claims")
CLAIMS_FILES = (ALIGNMENT_CLAIMS, INTERVENTIONS_CLAIMS, REGIME_CLAIMS, DEPTH_CLAIMS)
INTERVENTIONS_CHECKS = Checks("p1_interventions")
ALIGNMENT_CHECKS = Checks("p1_alignment")
CHECKS_FILES = (INTERVENTIONS_CHECKS, ALIGNMENT_CHECKS)
# fmt: on
# The pooled tables under results/stats/ of the summarising stages (what the report, the regime map and the
# growth summary read besides results/tables/)
TRAINING_TABLE = Place(f"{STATS_FOLDER}/training.csv")
POOLED_ALIGNMENT = Place(f"{STATS_FOLDER}/alignment.csv")
POOLED_MISALIGNMENT = Place(f"{STATS_FOLDER}/misalignment.csv")
POOLED_INTERVENTIONS = Place(f"{STATS_FOLDER}/interventions.csv")
POOLED_DEPTH = Place(f"{STATS_FOLDER}/depth.csv")
REGIME_MAP = Place(f"{STATS_FOLDER}/p1_regime_map.json")
# the regime map's own tables beside it (growcert.stages.summaries.summarize_regime writes them into the folder)
REGIME_PARTS = ("budget", "loss", "matched", "spread")
REGIME_STATS = {part: Place(f"{STATS_FOLDER}/p1_regime_{part}.csv") for part in REGIME_PARTS}


def section_figures(section: str) -> list[Figure]:
    """The figures of a report section, in reading order."""
    return [figure for figure in FIGURES.values() if figure.section == section]


def task_stem(task: str) -> str:
    """The stem of P2 task `task`'s figure, table, claims and checks files: p2_<task>."""
    return f"p2_{task}"


def task_figure(task: str) -> Figure:
    """The figure of P2 task `task` (a name, or the rules' "{task}" wildcard): registered, or a generic one."""
    return TASK_FIGURES.get(task) or Figure(task_stem(task), "p2", f"P2 {task}", task, task, TASK_CAPTION)


def gate_figure(task: str) -> Figure:
    """The gate diagnostics figure of P2 task `task` (a name, or "{task}"): registered, or a generic one."""
    return GATE_FIGURES.get(task) or Figure(
        f"{task_figure(task).stem}_gate",
        "p2",
        f"P2 {task}: gate diagnostics",
        f"{task} gate diagnostics",
        task,
        GATE_CAPTION,
    )


# A task whose table and claims have captions of their own (the others share one file with a branch per task)
TASK_TABLES = {
    "preference": Table(task_stem("preference"), "p2", "medians per optimizer", "preference", "p2_preference_table")
}
TASK_CLAIMS = {
    "preference": Claims(
        task_stem("preference"), "p2", "reward accuracy and drift", "preference", "p2_preference_claims"
    )
}


def task_table(task: str) -> Table:
    """The report table of P2 task `task` (a name, or "{task}")."""
    return TASK_TABLES.get(task) or Table(task_stem(task), "p2", task, task, "p2_experiment_table")


def task_claims(task: str) -> Claims:
    """The claim rows of P2 task `task` (a name, or "{task}")."""
    return TASK_CLAIMS.get(task) or Claims(task_stem(task), "p2", task, task, "p2_experiment_claims")


def task_checks(task: str) -> Checks:
    """The check rows of P2 task `task` (a name, or "{task}"): written by the tasks without optimizer arms."""
    return Checks(task_stem(task))


# P2 tasks (growcert.experiments). A task's folder, relative to a results folder, holds its tables (the
# files below, relative to the folder they are in) and provenance; a task with units has one folder per unit
# (one arm at one seed), holding its own curves, summary (written last: the unit is done when it is there),
# provenance and hidden resume state.
TASK = Place("{task}")
UNITS = Place("units")  # a task's units (in its folder; a unit-layout reference run's too), one folder each
UNIT_FOLDER = Place("{arm}/seed{seed}")  # a unit's folder in a units folder
TASK_UNIT = UNIT_FOLDER.under(UNITS)  # a unit's folder in its task's folder
UNIT = TASK_UNIT.under(TASK)
RESUME = Place(".resume")  # a unit's resume state, in its folder (not an output: a failed job keeps it)
SUMMARY = Place("summary.csv")  # a task's or unit's summary (written last)
CURVES = Place("curves.csv")  # a task's or unit's curves along training
PROVENANCE = Place("provenance.json")  # the record beside a folder's results (growcert.provenance)
SPECTRUM = Place("spectrum.csv")  # theory's eigenvalues of W_S(0->t) per checkpoint
DRIFT = Place("drift.csv")  # theory's drift and diffusion
PAIRS = Place("pairs.npz")  # preference's sampled pairs
TASK_DATA = {Path(table.name).stem: table for table in (CURVES, SUMMARY, SPECTRUM, DRIFT)}  # by their names
TASK_SUMMARY, UNIT_SUMMARY = SUMMARY.under(TASK), SUMMARY.under(UNIT)
UNIT_CURVES = CURVES.under(UNIT)
UNIT_LOG_FILE = Place("log.txt")  # a kept unit's job log, in a reference run's unit folder
UNIT_CPU_SECONDS = Place("cpu_seconds.log")  # where a session part recorded a unit's CPU seconds

# A trained run's folder under models/ (and the place of everything made from its checkpoints under the
# other folders): family/dataset/w<width>_d<depth>_s<seed><context_tag>. context_tag is "" for a grid without
# contexts, "_c<context>" in a context sweep (growcert.plan.grids.context_tag). RUN and STORE_NAME name a run
# and one of its checkpoints (in logs too); the places below use them.
RUN_FOLDER = "w{width}_d{depth}_s{seed}"
RUN = "{family}/{dataset}/" + RUN_FOLDER + "{context_tag}"
STORE_NAME = RUN + "/step{step}"  # one checkpoint of a run: what a store and its tables are named by
MODELS = Place("models")  # every trained run's folder
RUN_DIR = Place(RUN).under(MODELS)
CHECKPOINT = Place("step{step}.pt")  # a checkpoint, in its run folder
CHECKPOINT_NAME = re.compile(re.escape(CHECKPOINT.template).replace(re.escape("{step}"), r"(\d+)"))  # group 1: step
RUN_METRICS = Place("metrics.json")  # a run's metrics, in its folder, written last: the run is finished

# Every file (or store) made from one checkpoint of a run: <folder>/<STORE_NAME><suffix>.
STORE = Place(f"grads/{STORE_NAME}.zarr")  # the gradient store (a folder; rules name its root file)
STORE_ROOT = Place("zarr.json")  # a store's root metadata, in it, written last when the store moves into place
ALIGNMENT = Place(f"{STATS_FOLDER}/alignment/{STORE_NAME}.csv")
MISALIGNMENT = Place(f"{STATS_FOLDER}/misalignment/{STORE_NAME}.csv")
DEPTH_VALUES = Place(f"{STATS_FOLDER}/depth/{STORE_NAME}.csv")
INTERVENTION_TABLE = Place(f"interventions/{STORE_NAME}.csv")

# `growcert advise-check`: one checkpoint's folder, and the pooled scores of every checkpoint's. Both hold
# ADVISE_CHECK_ROWS; the scores folder the scorecard, reliability table and figure, and CLAIM_ROWS.
ADVISE_CHECK = Place(f"advise-check/{STORE_NAME}")
ADVISE_CHECK_SCORES = Place("advise-check/scores")
ADVISE_CHECK_ROWS = Place("advise_check.csv")
ADVISE_CHECK_TABLE = ADVISE_CHECK_ROWS.under(ADVISE_CHECK)
SCORECARD = Place("scorecard.csv")
RELIABILITY = Place("reliability.csv")
RELIABILITY_FIGURE = Place("reliability.png")
COMPARISON = Place("comparison.csv")  # the scores beside the tuned budget's
# at matched compute (report.advice_matched): the per-family scorecard and where growth beat training on, beside
# CALIBRATION (predicted against observed gain per option)
MATCHED_SCORECARD, GROWTH_WON = Place("matched_scorecard.csv"), Place("growth_won.csv")
TUNING, TUNING_CHOICE = Place("tuning.csv"), Place("choice.csv")  # tune-advise-check's grid and its choice

# `growcert advise` into a folder (the rule's: results/advise): its table, page and figure, with PROVENANCE
ADVISE = Place("advise")
ADVICE_TABLE = Place("advice.csv")
ADVICE_PAGE = Place("advice.md")
ADVICE_FIGURE = Place("advice.png")
ADVISE_STORE = Place("store.zarr")  # the gradient store in advise's work folder

HF_CONFIG = Place("config.json")  # a Hugging Face checkpoint folder's config (a pretrained model's dump reads it)

# A prepared dataset's folder (under the config's prepared_data) holds its arrays and INFO, written last
DATASET = Place("{dataset}")
INFO = Place("info.json")
ARRAYS = Place("arrays.npz")

# A growth experiment's folder under grow/, the wildcard pattern its name matches, and its table
GROW_EXPERIMENT = "{family}_{dataset}_w{width}_d{base_depth}"
GROW_EXPERIMENT_PATTERN = r"[a-z]+_[a-z0-9_]+_w\d+_d\d+"
GROW = Place("grow/{experiment}")
GROWTH_RUN_TABLE = Place("growth.csv")  # in its folder, written last: the file the summary reads
GROWTH_SELECTION = Place("selection.csv")

# A job's log and benchmark: {job} is the rule and the job's wildcards as path parts ("train_model/" + RUN)
LOGS, BENCHMARKS = Place("logs"), Place("benchmarks")
LOG, BENCHMARK = Place("{job}.log").under(LOGS), Place("{job}.tsv").under(BENCHMARKS)
UNIT_JOB = "p2_unit/{task}/" + UNIT_FOLDER.template  # a P2 unit's job
UNIT_JOB_LOG, UNIT_BENCHMARK = LOG.at(job=UNIT_JOB), BENCHMARK.at(job=UNIT_JOB)

# A committed reference run's folder (relative to the repository root) and the files its judge writes there
# besides the tables it keeps (named as the pooled tables: POOLED_ALIGNMENT.name, ...)
REFERENCE_RUNS = Place("docs/reference-results")
REFERENCE_RUN = Place("{run}").under(REFERENCE_RUNS)
README = Place("README.md")
CLAIM_ROWS = Place("claims.csv")  # a folder's claim rows (growcert.referee.rows.ROW_COLUMNS)
CHECK_ROWS = Place("checks.csv")
REFERENCE_TABLE = Place("table.csv")  # a reference run's main results (its README says what it holds)
CALIBRATION = Place("calibration.csv")
RECOMMENDED = Place("recommended.csv")  # p3-depth's saturation decision
# the tables a reference run keeps, named as the pooled ones (its `kept`: <name> -> the pooled table)
KEPT_TRAINING, KEPT_ALIGNMENT, KEPT_MISALIGNMENT, KEPT_INTERVENTIONS, KEPT_DEPTH, KEPT_GROWTH = (
    Place(table.name)
    for table in (
        TRAINING_TABLE,
        POOLED_ALIGNMENT,
        POOLED_MISALIGNMENT,
        POOLED_INTERVENTIONS,
        POOLED_DEPTH,
        GROWTH_RUN_TABLE,
    )
)
REFERENCE_REGIME_MAP = Place("map.json")  # the regime map and its tables, as a reference run keeps them
REFERENCE_REGIME_STATS = {part: Place(f"{part}.csv") for part in REGIME_PARTS}
