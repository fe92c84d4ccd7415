# Shared helpers: validate the config (defaults filled in, one-line errors naming the key),
# expand the training grids into target paths, and constrain wildcards.
import json
import re
import os
import shlex
import sys

from snakemake.exceptions import WorkflowError

from growcert.config import ConfigError, Run, load_schema, run_steps, train_settings, training_runs, validate_config
from growcert.config import context_of_tag, run_wildcards
from growcert.config import pretrained_checkpoint, pretrained_model, pretrained_settings, pretrained_stores
from growcert.config import grow_experiment_settings, preference_reference_run, preference_runs
from growcert.experiments import EXPERIMENTS, task as p2_task
from growcert.config import advise_inputs
from growcert.report import figure_registry as figures
from growcert.runtime import resolve_device, wants_gpu

try:
    validate_config(config, load_schema(workflow.source_path("../src/growcert/resources/config.schema.yaml")))
except ConfigError as error:
    raise WorkflowError(str(error)) from None

DEVICE = config["device"]


onstart:
    # A local run checks `device` before its first job (dry runs plan only); on a cluster each job checks
    # it where it runs, in one line in its log.
    if workflow.local_exec and not workflow.remote_exec:
        try:
            resolve_device(DEVICE)
        except ConfigError as error:
            raise WorkflowError(str(error)) from None

# Device-aware rules (every torch stage: train_model, dump_gradients, dump_pretrained, intervene,
# intervene_pretrained, estimate_depth, grow_model, p2_experiment, preference; not p2_ungated's theory, whose
# small float64 algebra stays on the CPU) ask for one GPU only when the device resolves to cuda here.
GPUS = 1 if wants_gpu(DEVICE) else 0

# Jobs run the `growcert` of the Python that runs Snakemake, activated or not: `.venv/bin/snakemake` puts
# `.venv/bin` first on PATH in every shell command (on a SLURM node too, where the job re-reads this file).
# The prefix keeps Snakemake's own bash strict mode.
shell.prefix(f"set -euo pipefail; export PATH={shlex.quote(os.path.dirname(sys.executable))}:\"$PATH\"; ")

RESULTS = config["results"]
PREPARED = config["prepared_data"]
CAPTIONS = "../src/growcert/resources/report"  # the captions, relative to rules/ (Snakemake resolves them there)


def report_output(path, caption, section, subcategory, result):
    """`path` marked for `snakemake --report`: caption resources/report/<caption>.rst, filed under the category of
    report section `section` (growcert.report.figure_registry.CATEGORIES) and `subcategory`, labelled `result`
    and its paper."""
    paper = figures.PAPERS[section]
    return report(path, caption=f"{CAPTIONS}/{caption}.rst", category=figures.CATEGORIES[section],
                  subcategory=subcategory, labels={"result": result} | ({"paper": paper} if paper else {}))


def figure_path(figure):
    """results/figures/<stem>.png of a figure of the registry (growcert.report.figure_registry)."""
    return f"{RESULTS}/figures/{figure.file}"


def figure_output(figure):
    """A figure's output, marked for `snakemake --report` with its caption, subcategory and label."""
    return report_output(figure_path(figure), figure.caption, figure.section, figure.subcategory,
                         f"figure: {figure.label}")


RUN_DIR = f"{RESULTS}/models/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}"


wildcard_constraints:
    family="resnet|llama|hf",
    experiment=r"[a-z]+_[a-z0-9_]+_w\d+_d\d+",
    dataset="[a-z0-9_]+",
    width=r"\d+",
    depth=r"\d+",
    seed=r"\d+",
    # "" for a grid without contexts (its folders keep their names), "_c<context>" in a context sweep.
    context_tag=r"(_c\d+)?",
    step=r"\d+",


def prepared_dataset(dataset):
    return f"{PREPARED}/{dataset}/info.json"


def dataset_settings(wildcards):
    return json.dumps(config["datasets"][wildcards.dataset], sort_keys=True)


def run_of(wildcards):
    return Run(wildcards.family, wildcards.dataset, int(wildcards.width), int(wildcards.depth), int(wildcards.seed),
               context_of_tag(wildcards.context_tag))


def run_settings(wildcards):
    return json.dumps(train_settings(config, run_of(wildcards)), sort_keys=True)


def all_run_dirs():
    return [RUN_DIR.format(**run_wildcards(run)) for run in training_runs(config)]


STORE = f"{RESULTS}/grads/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.zarr"
# Rules name a store by its root metadata file, written last when the store moves into place: Snakemake
# then keeps its .snakemake_timestamp (which directory() outputs get) out of the store, where zarr would
# warn on every open of the hierarchy (xr.open_datatree).
STORE_ROOT = f"{STORE}/zarr.json"
# config temporary_stores: the dump's output is then the store folder itself, marked temp(), so Snakemake
# removes a store once every job that reads it is done (a context sweep's stores reach GBs). Its
# .snakemake_timestamp then sits inside the store; zarr warns about it and reads on.
TEMPORARY_STORES = config["temporary_stores"]
STORE_INPUT = STORE if TEMPORARY_STORES else STORE_ROOT
STORE_OUTPUT = temp(directory(STORE)) if TEMPORARY_STORES else STORE_ROOT


# Rules that read a store run before any other ready job: a finished dump is estimated before the next
# one starts, so a sweep with temporary_stores holds about one store per core instead of a backlog
# (the P1 regime sweep held 7.7 GB of stores waiting for their estimates without it).
STORE_READER_PRIORITY = 1


def store_folder(path):
    """The store folder of a rule's store input or output (the folder, or its zarr.json)."""
    return os.path.dirname(path) if os.path.basename(path) == "zarr.json" else path


def dump_settings(wildcards):
    return json.dumps(config["dump"], sort_keys=True)


INTERVENTIONS = f"{RESULTS}/interventions/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.csv"


def intervention_targets():
    """Per run of a fixed-context grid: the last checkpoint, or every checkpoint (config intervene.analyse);
    pretrained models when config pretrained.intervene is true. A context sweep feeds the regime map only."""
    targets = [INTERVENTIONS.format(**run_wildcards(run), step=step)
               for run in fixed_context_runs() for step in analysed_steps(run, config["intervene"]["analyse"])]
    if config["pretrained"]["intervene"]:
        targets += [INTERVENTIONS.format(**run_wildcards(run), step=step) for run, step in pretrained_stores(config)]
    return targets


def intervene_settings(wildcards):
    settings = {key: value for key, value in config["intervene"].items() if key != "analyse"}
    return json.dumps(settings, sort_keys=True)


ALIGNMENT = f"{RESULTS}/stats/alignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.csv"
MISALIGNMENT = f"{RESULTS}/stats/misalignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.csv"


def fixed_context_runs():
    """The runs of grids without `contexts`: interventions and depth analyse these; a context sweep (one
    run per context) is for the d_align tables and the regime map, and would multiply their jobs (the
    certificates of estimate-misalignment too)."""
    return [run for run in training_runs(config) if run.context is None]


def p1_figures():
    """The P1 alignment figures this config draws: the misalignment ones need a run of a fixed-context grid."""
    return list(figures.P1_DALIGN_FIGURES) + (list(figures.P1_MISALIGNMENT_FIGURES) if fixed_context_runs() else [])


def analysed_steps(run, analyse):
    """The checkpoint steps of `run` a stage analyses: its last one, or all (config key `<stage>.analyse`)."""
    steps = run_steps(config, run)
    return steps if analyse == "all" else steps[-1:]


def per_store(template, runs=None, analyse="all"):
    """`template` for every gradient store: the checkpoints (all, or the last) of each trained run (of `runs`,
    default all), then each pretrained model."""
    runs = training_runs(config) if runs is None else runs
    stores = [(run, step) for run in runs for step in analysed_steps(run, analyse)]
    return [template.format(**run_wildcards(run), step=step) for run, step in stores + pretrained_stores(config)]


def alignment_settings(wildcards=None):
    return json.dumps(config["alignment"], sort_keys=True)


DEPTH = f"{RESULTS}/stats/depth/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}{{context_tag}}/step{{step}}.csv"
GROW = f"{RESULTS}/grow/{{experiment}}"


def grow_experiments():
    """Folder names of the growth experiments: family_dataset_w{width}_d{base}."""
    return [f"{e['family']}_{e['dataset']}_w{e['width']}_d{e['base_depth']}" for e in config["grow"]["experiments"]]


def grow_settings_json(wildcards):
    return json.dumps(grow_experiment_settings(config, grow_experiments().index(wildcards.experiment)), sort_keys=True)


def grow_dataset(wildcards):
    experiment = config["grow"]["experiments"][grow_experiments().index(wildcards.experiment)]
    return prepared_dataset(experiment["dataset"])


# Pretrained Hugging Face models (family hf, config key pretrained): their stores and interventions come
# from the rules dump_pretrained / intervene_pretrained, which read a checkpoint folder instead of a run.
PRETRAINED_STORE = f"{RESULTS}/grads/hf/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.zarr"
PRETRAINED_STORE_ROOT = f"{PRETRAINED_STORE}/zarr.json"
PRETRAINED_STORE_INPUT = PRETRAINED_STORE if TEMPORARY_STORES else PRETRAINED_STORE_ROOT
PRETRAINED_STORE_OUTPUT = temp(directory(PRETRAINED_STORE)) if TEMPORARY_STORES else PRETRAINED_STORE_ROOT
PRETRAINED_INTERVENTIONS = f"{RESULTS}/interventions/hf/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.csv"


def pretrained_of(wildcards):
    run = Run("hf", wildcards.dataset, int(wildcards.width), int(wildcards.depth), int(wildcards.seed))
    return pretrained_model(config, run, int(wildcards.step))


def pretrained_folder(wildcards):
    return pretrained_checkpoint(config, pretrained_of(wildcards))


def pretrained_input(wildcards):
    """The checkpoint's config.json when its folder exists (a replaced checkpoint reruns the dump); nothing
    otherwise, so that `growcert dump` looks in the Hugging Face cache and names the fix when it is missing."""
    config_json = os.path.join(pretrained_folder(wildcards), "config.json")
    return [config_json] if os.path.isfile(config_json) else []


def pretrained_hf_settings(wildcards):
    return json.dumps(pretrained_settings(config, pretrained_of(wildcards)), sort_keys=True)


def pretrained_dump_settings(wildcards):
    return json.dumps({**config["dump"], **config["pretrained"]["dump"]}, sort_keys=True)


def pretrained_parameters(wildcards):
    """~12·width²·depth: the parameters of a decoder of that width and depth (embeddings aside)."""
    return 12 * int(wildcards.width) ** 2 * int(wildcards.depth)


def pretrained_mem_mb(bytes_per_parameter):
    """mem_mb of a pretrained model's job: its parameters at `bytes_per_parameter`, as much again for
    activations, plus 4 GB; doubled on a retry."""
    return lambda wildcards, attempt: attempt * (4000 + 2 * bytes_per_parameter * pretrained_parameters(wildcards) // 2**20)


def pretrained_runtime(wildcards, attempt):
    """An hour plus a forward-backward pass over every dumped token (6 flops per parameter and token) at a
    conservative 20 GFLOP/s per thread: pythia-6.9b's 512 x 128 tokens on 8 threads take ~4.5 h.
    Doubled on a retry."""
    dump = json.loads(pretrained_dump_settings(wildcards))
    tokens = (dump["train_examples"] + dump["test_examples"]) * config["pretrained"]["context"]
    seconds = 6 * pretrained_parameters(wildcards) * tokens / (2e10 * config["pretrained"]["threads"])
    return attempt * (60 + int(seconds) // 60)


def depth_settings(wildcards):
    """config depth, with config pretrained.depth overriding it for the pretrained models' stores."""
    overrides = config["pretrained"]["depth"] if wildcards.family == "hf" else {}
    return json.dumps({**config["depth"], **overrides}, sort_keys=True)


def depth_mem_mb(wildcards, attempt):
    """2 GB plus the largest per-point array of block gradients the stage may hold (depth.max_feature_mb,
    raised for large pretrained models); doubled on a retry."""
    return attempt * (2000 + json.loads(depth_settings(wildcards))["max_feature_mb"])


def store_runtime(wildcards, attempt):
    """Minutes of a job that reads a whole gradient store: 20; a pretrained model's store (up to tens of GB)
    gets its dump's time. Doubled on a retry."""
    return pretrained_runtime(wildcards, attempt) if wildcards.family == "hf" else 20 * attempt


def preference_reference(wildcards):
    """The trained llama run DPO starts from (config preference.reference); none with preference.hf_model."""
    run = preference_reference_run(config)
    return [] if run is None else RUN_DIR.format(**run_wildcards(run))


# The self-contained P2 experiments: the tasks of the growcert.experiments registry, each trains its own small
# models from its config section (none: {}) and writes its folder, figure, claim rows and report table.
# A task with INPUTS (preference) has a rule of its own; the others run in p2_experiment when they draw a
# gate figure (GATE_TITLE), else in p2_ungated (which writes a checks file).
P2_EXPERIMENTS = [name for name in EXPERIMENTS if name != "preference" or preference_runs(config)]


def p2_tasks(gated):
    """The registry's tasks without INPUTS that draw a gate figure (gated) or not, as a wildcard pattern."""
    names = [name for name in P2_EXPERIMENTS if not getattr(p2_task(name), "INPUTS", ())
             and bool(getattr(p2_task(name), "GATE_TITLE", None)) == gated]
    return "|".join(names) or "(?!)"


def p2_settings(wildcards):
    return json.dumps(config.get(wildcards.task, {}), sort_keys=True)


def p2_threads(wildcards):
    return config["threads"].get(wildcards.task, 1)


def experiment_outputs(name):
    return {"summary": f"{RESULTS}/{name}/summary.csv", "figure": figure_path(figures.task_figure(name)),
            "claims": f"{RESULTS}/claims/p2_{name}.csv", "table": f"{RESULTS}/tables/p2_{name}.csv",
            "checks": f"{RESULTS}/checks/p2_{name}.csv"}


def task_report_output(kind):
    """The P2 wildcard rules' `kind` output ("claims" or "table") of task "{task}", marked for `snakemake --report`
    (caption p2_experiment_<kind>.rst, a branch per task)."""
    return report_output(experiment_outputs("{task}")[kind], f"p2_experiment_{kind}", "p2", "{task}",
                         f"{kind}: {{task}}")


def regime_figures():
    """The P1 regime figures the config's context sweeps allow (growcert.report.regime.drawable): the width
    figures with more than one width, the context figure with more than one context, the seed-spread figure
    with more than one seed; none without a sweep."""
    sweeps = [grid for grid in config["grids"] if grid["contexts"] is not None]
    axes = {axis: {value for grid in sweeps for value in grid[axis]} for axis in figures.REGIME_FIGURES}
    return [figure for axis, drawn in figures.REGIME_FIGURES.items() if len(axes[axis]) > 1 for figure in drawn]
