# Validate the config (defaults filled in, one-line errors naming the key), plan the jobs and constrain the
# wildcards. Every fact comes from the package, where the tests reach it: paths and names from
# `growcert.pipeline.artifacts`, the grids, settings and resources from `growcert.plan`, the families from
# `growcert.models`.
import os
import shlex
import sys

from snakemake.exceptions import WorkflowError

from growcert import numerics
from growcert.errors import ConfigError
from growcert.models import FAMILIES, trained_families
from growcert.pipeline import artifacts
from growcert.pipeline.rules import (input_checkpoint, input_folder, input_store, output_folder, output_store,
                                     results_subfolder)
from growcert.report.labels import report_marks
from growcert.plan import PREFERENCE_DATASET, Plan, family_pattern, per_attempt, validate_config
from growcert.runtime import resolve_device, wants_gpu
from growcert.schema import load_schema

try:
    validate_config(config, load_schema(workflow.source_path("../src/growcert/resources/config.schema.yaml")))
except ConfigError as error:
    raise WorkflowError(str(error)) from None

PLAN = Plan(config)
RESULTS = config["results"]
PREPARED = config["prepared_data"]
# The device of every torch job, passed as its `--device`: outputs are device-free but not bit-identical
# across devices. Device-aware rules (every torch stage but p2_ungated's theory, whose small float64 algebra
# stays on the CPU) ask for one GPU only when the device resolves to cuda here.
DEVICE = config["device"]
GPUS = 1 if wants_gpu(DEVICE) else 0
# Every rule's environment for `--sdm conda` (same pins as requirements.txt), relative to rules/
CONDA_ENV = "../envs/growcert.yaml"
# Outputs marked for `snakemake --report results/snakemake-report.zip`: report_output(artifact), captioned by
# the package's caption files (relative to rules/)
report_output = report_marks(RESULTS, "../src/growcert/resources/report")


onstart:
    # A local run checks `device` before its first job (dry runs plan only); on a cluster each job checks
    # it where it runs, in one line in its log.
    if workflow.local_exec and not workflow.remote_exec:
        try:
            resolve_device(DEVICE)
        except ConfigError as error:
            raise WorkflowError(str(error)) from None


# Jobs run the `growcert` of the Python that runs Snakemake, activated or not: `.venv/bin/snakemake` puts
# `.venv/bin` first on PATH in every shell command (on a SLURM node too, where the job re-reads this file).
# The prefix keeps Snakemake's own bash strict mode, and exports the job's numerics (config `numerics`: under portable
# the CPU kernel pins, which the libraries read when they start, so they must be in the job's environment).
shell.prefix(f"set -euo pipefail; export PATH={shlex.quote(os.path.dirname(sys.executable))}:\"$PATH\"; "
             + numerics.shell_exports(config["numerics"]))

RUN_DIR = artifacts.RUN_DIR.path(RESULTS)
INFO = artifacts.INFO.under(artifacts.DATASET).path(PREPARED)  # a prepared dataset, by its info file (written last)
# Rules name a store by its root metadata file, written last when the store moves into place: Snakemake
# then keeps its .snakemake_timestamp (which directory() outputs get) out of the store, where zarr would
# warn on every open of the hierarchy (xr.open_datatree). With config temporary_stores the dump's output is
# the store folder itself, marked temp(), so Snakemake removes a store once every job that reads it is done
# (a context sweep's stores reach GBs); its .snakemake_timestamp then sits inside the store, and zarr warns.
TEMPORARY_STORES = config["temporary_stores"]
STORE = artifacts.STORE.path(RESULTS)
STORE_FILE = STORE if TEMPORARY_STORES else artifacts.STORE_ROOT.path(STORE)
STORE_OUTPUT = temp(directory(STORE)) if TEMPORARY_STORES else STORE_FILE
# Pretrained models (config key pretrained): their stores and interventions come from dump_pretrained and
# intervene_pretrained, which read a checkpoint folder instead of a run (paths: no family or context wildcard).
PRETRAINED = {"family": PLAN.pretrained, "context_tag": ""}
PRETRAINED_STORE = artifacts.STORE.path(RESULTS, **PRETRAINED)
PRETRAINED_STORE_FILE = PRETRAINED_STORE if TEMPORARY_STORES else artifacts.STORE_ROOT.path(PRETRAINED_STORE)
PRETRAINED_STORE_OUTPUT = temp(directory(PRETRAINED_STORE)) if TEMPORARY_STORES else PRETRAINED_STORE_FILE
# Rules that read a store run before any other ready job: a finished dump is estimated before the next
# one starts, so a sweep with temporary_stores holds about one store per core instead of a backlog of
# stores waiting for their estimates.
STORE_READER_PRIORITY = 1


wildcard_constraints:
    family=family_pattern(list(FAMILIES)),
    experiment=artifacts.GROW_EXPERIMENT_PATTERN,
    dataset="[a-z0-9_]+",
    width=r"\d+",
    depth=r"\d+",
    seed=r"\d+",
    # "" for a grid without contexts (its folders keep their names), "_c<context>" in a context sweep.
    context_tag=r"(_c\d+)?",
    step=r"\d+",
