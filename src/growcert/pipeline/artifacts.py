"""Every artifact the pipeline writes, named once: figures, tables, claims and checks files, the per-run
and per-store files, the run folder, logs and benchmarks.

Figures. A `Figure` is a PNG under results/figures/<stem>.png and the report section (`training`, `p1`, `p2`,
`p3`, `advice`) that shows it; how it is shown (its title, its `snakemake --report` label and caption file) is
growcert.report.labels'. Renaming a figure is its one line here, and its caption file when that is the stem's
own. A P2 task's figure is p2_<task> (and p2_<task>_gate): the wildcard rules derive the path from the task
name (`task_figure`, `gate_figure`), so the registered ones follow that pattern.

Tables, claims and checks. A `Table` is results/tables/<stem>.csv (shown collapsed in its report section),
a `Claims` file results/claims/<stem>.csv (claim rows, `growcert.referee.claims`), a `Checks` file
results/checks/<stem>.csv (implementation checks). Tables and claims are also marked for `snakemake
--report`, shown as growcert.report.labels says. A P2 task's are p2_<task> (`task_table`, ...).

Every other file and folder is a `Place`: a template relative to the folder it lies in (a results folder
unless its comment names another: a run's, a P2 task's or unit's, a reference run's), reached one way,
`X.path(folder, **wildcards)` (a Figure, Table, Claims or Checks file too: `X.path(results)`). Per run and per
store: a trained run's folder is `RUN_DIR` (models/family/dataset/`RUN_FOLDER` and the context tag), and every
file made from one of its checkpoints sits at the same place under its own kind's folder (grads/,
stats/alignment/, ...), step{step} in it. `LOG` and `BENCHMARK` give every rule's log and benchmark file.

Every consumer reads the constants or the lookups below: the stages that draw a figure (the file name),
the claims registry (a claim's figure and table evidence), the HTML report (its sections' figures in reading
order, the folders) and the rules (paths, and through growcert.report.labels their `snakemake --report` entries).
Light on purpose: the Snakefile imports it, so it imports nothing beyond the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from pathlib import PurePosixPath as Path
from typing import ClassVar, TypeVar

Root = TypeVar("Root", str, PurePath)

GATE_SUFFIX = "_gate"  # a P2 task's gate diagnostics figure: p2_<task>_gate


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
    """A file of a results folder, <folder>/<stem><suffix>, shown in report section `section` (none: not shown;
    how it is shown, its title, label and caption, is growcert.report.labels')."""

    folder: ClassVar[str]
    suffix: ClassVar[str] = ".csv"
    kind: ClassVar[str]
    stem: str
    section: str | None

    @property
    def file(self) -> str:
        return f"{self.stem}{self.suffix}"

    def path(self, results: Root) -> Root:
        """Where it lies in results folder `results`."""
        return _join(results, f"{self.folder}/{self.file}")


@dataclass(frozen=True)
class Figure(Artifact):
    """One figure, results/figures/<stem>.png, and the report section that shows it."""

    folder: ClassVar[str] = FIGURES_DIR.template
    suffix: ClassVar[str] = ".png"
    kind: ClassVar[str] = "figure"
    stem: str
    section: str  # training, p1, p2, p3, advice (growcert.report.labels.CATEGORIES)


@dataclass(frozen=True)
class Table(Artifact):
    """A report table, results/tables/<stem>.csv."""

    folder: ClassVar[str] = TABLES_DIR.template
    kind: ClassVar[str] = "table"
    stem: str
    section: str | None = None


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


TRAINING_GRID = Figure("training_grid", "training")
DALIGN_VS_WIDTH = Figure("p1_dalign_vs_width", "p1")
PLUGIN_VS_UNBIASED = Figure("p1_plugin_vs_unbiased", "p1")
MISALIGNMENT_VS_WIDTH = Figure("p1_misalignment_vs_width", "p1")
MISALIGNMENT_VS_MK = Figure("p1_misalignment_vs_MK", "p1")
INTERVENTIONS = Figure("p1_interventions", "p1")
REGIME_DALIGN_VS_WIDTH = Figure("p1_regime_dalign_vs_width", "p1")
REGIME_DALIGN_VS_CONTEXT = Figure("p1_regime_dalign_vs_context", "p1")
REGIME_DIMS_VS_WIDTH = Figure("p1_regime_dims_vs_width", "p1")
REGIME_PLUGIN_VS_UNBIASED = Figure("p1_regime_plugin_vs_unbiased", "p1")
REGIME_SPREAD = Figure("p1_regime_spread", "p1")
GROKKING = Figure("p2_grokking", "p2")
GROKKING_GATE = Figure("p2_grokking_gate", "p2")
PINN = Figure("p2_pinn", "p2")
PINN_GATE = Figure("p2_pinn_gate", "p2")
PREFERENCE = Figure("p2_preference", "p2")
PREFERENCE_GATE = Figure("p2_preference_gate", "p2")
THEORY = Figure("p2_theory", "p2")
DEPTH = Figure("p3_depth", "p3")
GROWTH = Figure("p3_growth", "p3")
# advise-check's (drawn into its scores folder, shown from the advise-check reference run)
ADVICE_CALIBRATION = Figure("advice_calibration", "advice")

# Every figure, in the HTML report's reading order within each section.
FIGURES: dict[str, Figure] = {
    figure.stem: figure
    for figure in [
        TRAINING_GRID,
        DALIGN_VS_WIDTH,
        PLUGIN_VS_UNBIASED,
        MISALIGNMENT_VS_WIDTH,
        MISALIGNMENT_VS_MK,
        INTERVENTIONS,
        REGIME_DALIGN_VS_WIDTH,
        REGIME_DALIGN_VS_CONTEXT,
        REGIME_DIMS_VS_WIDTH,
        REGIME_PLUGIN_VS_UNBIASED,
        REGIME_SPREAD,
        GROKKING,
        GROKKING_GATE,
        PINN,
        PINN_GATE,
        PREFERENCE,
        PREFERENCE_GATE,
        THEORY,
        DEPTH,
        GROWTH,
        ADVICE_CALIBRATION,
    ]
}

# summarize-alignment's figures: d_align ones always, misalignment ones when a fixed-context run gave tables
P1_DALIGN_FIGURES = (DALIGN_VS_WIDTH, PLUGIN_VS_UNBIASED)
P1_MISALIGNMENT_FIGURES = (MISALIGNMENT_VS_WIDTH, MISALIGNMENT_VS_MK)
# summarize-regime's figures by the axis of the map each needs more than one of (growcert.report.regime.drawable)
REGIME_FIGURES = {
    "widths": (REGIME_DALIGN_VS_WIDTH, REGIME_DIMS_VS_WIDTH, REGIME_PLUGIN_VS_UNBIASED),
    "contexts": (REGIME_DALIGN_VS_CONTEXT,),
    "seeds": (REGIME_SPREAD,),
}

# The report tables, claims and checks files of the summarising stages (the P2 tasks': task_table, ...).
ALIGNMENT_SUMMARY = Table("p1_alignment_summary", "p1")
INTERVENTIONS_SUMMARY = Table("p1_interventions_summary", "p1")
REGIME_CELLS = Table("p1_regime_cells", "p1")
RECOMMENDED_DEPTH = Table("p3_recommended_depth", "p3")
GROWTH_TABLE = Table("p3_growth", "p3")
TABLES = (INTERVENTIONS_SUMMARY, ALIGNMENT_SUMMARY, REGIME_CELLS, RECOMMENDED_DEPTH, GROWTH_TABLE)
ALIGNMENT_CLAIMS = Claims("p1_alignment", "p1")
INTERVENTIONS_CLAIMS = Claims("p1_interventions", "p1")
REGIME_CLAIMS = Claims("p1_regime", "p1")
DEPTH_CLAIMS = Claims("p3_depth", "p3")
CLAIMS_FILES = (ALIGNMENT_CLAIMS, INTERVENTIONS_CLAIMS, REGIME_CLAIMS, DEPTH_CLAIMS)
INTERVENTIONS_CHECKS = Checks("p1_interventions")
ALIGNMENT_CHECKS = Checks("p1_alignment")
CHECKS_FILES = (INTERVENTIONS_CHECKS, ALIGNMENT_CHECKS)
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
    """The figure of P2 task `task` (a name, or the rules' "{task}" wildcard)."""
    return Figure(task_stem(task), "p2")


def gate_figure(task: str) -> Figure:
    """The gate diagnostics figure of P2 task `task` (a name, or "{task}")."""
    return Figure(f"{task_stem(task)}{GATE_SUFFIX}", "p2")


def task_table(task: str) -> Table:
    """The report table of P2 task `task` (a name, or "{task}")."""
    return Table(task_stem(task), "p2")


def task_claims(task: str) -> Claims:
    """The claim rows of P2 task `task` (a name, or "{task}")."""
    return Claims(task_stem(task), "p2")


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
ADVICE_ANSWER = Place("answer.txt")  # advise-check's measured answer in words, one paragraph per family
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
