"""Shared fixtures: datasets prepared once per test session, in a temporary folder."""

import pytest

from growcert.data import load_prepared, prepare_dataset


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    """prepared(name) -> PreparedDataset, prepared once per session with default settings."""
    cache = {}

    def get(name):
        if name not in cache:
            folder = tmp_path_factory.mktemp(f"prepared-{name}")
            prepare_dataset(name, folder, {})
            cache[name] = load_prepared(folder)
        return cache[name]

    return get


# The longest test files, longest first. make test runs the files on two pytest-xdist workers (--dist loadfile), which
# hand files out in collection order; collected alphabetically, test_workflow.py (two Snakemake runs of the ci DAG)
# started last and ran alone at the end. Longest first keeps both workers busy until the end.
LONGEST_FIRST = (
    "test_workflow.py",
    "test_resume.py",
    "test_lognormal_aft.py",
    "test_gpu_check.py",
    "test_reference_runs.py",
    "test_numerics.py",
    "test_hf.py",
)


def pytest_collection_modifyitems(config, items):
    """Collection order, the files of LONGEST_FIRST first (a stable sort: each file's tests keep their order)."""
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


LLAMA_TINY = {"head_dim": 8, "context": 16, "mlp_hidden": None, "rope_base": 10000.0}


def _train_tiny(data, folder, family, dataset, width, depth, model=None, steps=8):
    """Train a tiny model for a few steps into `folder`; returns its last checkpoint."""
    from growcert.stages.train import train_model

    if model is None:
        model = dict(LLAMA_TINY) if family == "llama" else {}
    settings = {
        "family": family,
        "dataset": dataset,
        "width": width,
        "depth": depth,
        "seed": 0,
        "model": model,
        "train": {
            "steps": steps,
            "batch_size": 16,
            "lr": 0.003,
            "weight_decay": 0.0,
            "betas": [0.9, 0.95],
            "warmup_steps": 1,
            "grad_clip": 1.0,
            "save_steps": [steps],
            "eval_every": steps,
            "eval_examples": 16,
            "single_pass": True,
        },
    }
    train_model(settings, data, folder, log=lambda _: None, device="cpu")
    return folder / f"step{steps}.pt"


@pytest.fixture(scope="session")
def train_tiny():
    """train_tiny(data, folder, family, dataset, width, depth, model=None, steps=8) -> checkpoint path."""
    return _train_tiny


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory, prepared):
    """(checkpoint, prepared folder) of a tiny llama (width 16, depth 2: points block0..block2) trained here, once
    for every test that advises a model or checks the advice."""
    data = prepared("shakespeare")
    folder = tmp_path_factory.mktemp("tiny-llama")
    return _train_tiny(data, folder / "run", "llama", "shakespeare", 16, 2), data.folder


def _planned_jobs(output: str) -> dict[str, int]:
    """{rule: count} from the job-stats table Snakemake prints for a (dry) run."""
    lines = output.splitlines()
    counts = {}
    for line in lines[lines.index("Job stats:") + 3 :] if "Job stats:" in lines else []:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


@pytest.fixture(scope="session")
def planned_jobs():
    """planned_jobs(snakemake_output_text) -> {rule: count} (the workflow and the SLURM tests share it)."""
    return _planned_jobs
