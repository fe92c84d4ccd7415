# Shared helpers: validate the config (defaults filled in, one-line errors naming the key),
# expand the training grids into target paths, and constrain wildcards.
import json

from snakemake.exceptions import WorkflowError

from growcert.config import ConfigError, Run, load_schema, run_steps, train_settings, training_runs, validate_config

try:
    validate_config(config, load_schema(workflow.source_path("schemas/config.schema.yaml")))
except ConfigError as error:
    raise WorkflowError(str(error)) from None

RESULTS = config["results"]
PREPARED = config["prepared_data"]
RUN_DIR = f"{RESULTS}/models/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}"


wildcard_constraints:
    family="resnet|llama",
    experiment=r"[a-z]+_[a-z0-9_]+_w\d+_d\d+",
    dataset="[a-z0-9_]+",
    width=r"\d+",
    depth=r"\d+",
    seed=r"\d+",
    step=r"\d+",


def prepared_dataset(dataset):
    return f"{PREPARED}/{dataset}/info.json"


def dataset_settings(wildcards):
    return json.dumps(config["datasets"][wildcards.dataset], sort_keys=True)


def run_of(wildcards):
    return Run(wildcards.family, wildcards.dataset, int(wildcards.width), int(wildcards.depth), int(wildcards.seed))


def run_settings(wildcards):
    return json.dumps(train_settings(config, run_of(wildcards)), sort_keys=True)


def all_run_dirs():
    return [RUN_DIR.format(**vars(run)) for run in training_runs(config)]


STORE = f"{RESULTS}/grads/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.zarr"


def dump_settings(wildcards):
    return json.dumps(config["dump"], sort_keys=True)


INTERVENTIONS = f"{RESULTS}/interventions/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.csv"


def intervention_targets():
    """Per run: the last checkpoint, or every checkpoint (config intervene.checkpoints)."""
    targets = []
    for run in training_runs(config):
        steps = run_steps(config, run)
        for step in steps if config["intervene"]["checkpoints"] == "all" else steps[-1:]:
            targets.append(INTERVENTIONS.format(**vars(run), step=step))
    return targets


def intervene_settings(wildcards):
    settings = {key: value for key, value in config["intervene"].items() if key != "checkpoints"}
    return json.dumps(settings, sort_keys=True)


ALIGNMENT = f"{RESULTS}/stats/alignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.csv"
MISALIGNMENT = f"{RESULTS}/stats/misalignment/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.csv"
P1_FIGURES = ["p1_dalign_vs_width", "p1_plugin_vs_unbiased", "p1_misalignment_vs_width", "p1_misalignment_vs_MK"]


def per_store(template):
    return [template.format(**vars(run), step=step) for run in training_runs(config) for step in run_steps(config, run)]


def alignment_settings(wildcards=None):
    return json.dumps(config["alignment"], sort_keys=True)


DEPTH = f"{RESULTS}/stats/depth/{{family}}/{{dataset}}/w{{width}}_d{{depth}}_s{{seed}}/step{{step}}.csv"
GROW = f"{RESULTS}/grow/{{experiment}}"


def grow_experiments():
    """Folder names of the growth experiments: family_dataset_w{width}_d{base}."""
    return [f"{e['family']}_{e['dataset']}_w{e['width']}_d{e['base_depth']}" for e in config["grow"]["experiments"]]


def grow_settings_json(wildcards):
    from growcert.grow import grow_settings

    return json.dumps(grow_settings(config, grow_experiments().index(wildcards.experiment)), sort_keys=True)


def grow_dataset(wildcards):
    experiment = config["grow"]["experiments"][grow_experiments().index(wildcards.experiment)]
    return prepared_dataset(experiment["dataset"])
