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


def all_stores():
    return [STORE.format(**vars(run), step=step) for run in training_runs(config) for step in run_steps(config, run)]


def dump_settings(wildcards):
    return json.dumps(config["dump"], sort_keys=True)
