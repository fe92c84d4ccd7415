"""End to end through real Snakemake: the ci DAG builds, is idempotent, reruns only what is missing.

Every run writes into a temporary results folder (config keys `results`, `prepared_data`),
so the repository's own results/ is never touched.
"""

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import xarray as xr
import yaml
from helpers import advice_figures, browser_check, chromium

from growcert.pipeline import artifacts
from growcert.plan import Plan
from growcert.referee.rows import CHECK_COLUMNS, ROW_COLUMNS
from growcert.referee.verdicts import WORDS
from growcert.reference_runs.configs import merged_config
from growcert.report.reference import reference_folders
from growcert.store import open_group, open_store

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [str(Path(sys.executable).parent / "snakemake")]  # the environment's own entry point


def unactivated_environment() -> dict[str, str]:
    """This process's environment as a shell without the virtual environment activated sees it: its bin
    folder is not on PATH (and no VIRTUAL_ENV), so jobs must find `growcert` through Snakemake itself."""
    bin_folder = str(Path(sys.executable).parent)
    path = [entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry and entry != bin_folder]
    return {**{k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}, "PATH": os.pathsep.join(path)}


def snakemake(*args, results=None, config=(), prepared=None):
    """`.venv/bin/snakemake ...` (this interpreter's) from an unactivated shell, into `results`/results with the
    prepared data in `prepared` (default `results`/prepared); `config`: more KEY=VALUE."""
    command = [*SNAKEMAKE, "--cores", "2", *args]
    if results is not None:
        command += [
            "--config",
            f"results={results}/results",
            f"prepared_data={prepared or results / 'prepared'}",
            *config,
        ]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=unactivated_environment(), timeout=900)


def ci_config():
    with open(ROOT / "configs" / "ci.yaml") as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("ci")
    result = snakemake("--configfile", "configs/ci.yaml", results=base)
    assert result.returncode == 0, result.stderr[-4000:]
    return base


@pytest.mark.slow
def test_ci_dag_builds_every_target(ci_run):
    results = ci_run / "results"
    assert (results / "report.html").stat().st_size > 10_000  # embeds at least one figure
    assert (results / "stats" / "training.csv").is_file()
    assert (results / "figures" / "training_grid.png").is_file()
    examples = ci_config()["dump"]["train_examples"] + ci_config()["dump"]["test_examples"]
    for grid in ci_config()["grids"]:  # every run of every grid, a context sweep's runs in their tagged folders
        for width, depth, seed, context in itertools.product(
            grid["widths"], grid["depths"], grid["seeds"], grid.get("contexts") or [None]
        ):
            name = f"w{width}_d{depth}_s{seed}" + (f"_c{context}" if context else "")
            run = results / "models" / grid["family"] / grid["dataset"] / name
            assert (run / "metrics.json").is_file()
            for step in grid["train"]["save_steps"]:
                assert (run / f"step{step}.pt").is_file()
                store = results / "grads" / grid["family"] / grid["dataset"] / name / f"step{step}.zarr"
                assert open_store(store).attrs["step"] == step
                assert open_group(store, "block0").sizes["sample"] == examples
            log = results / "logs" / "train_model" / grid["family"] / grid["dataset"] / f"{name}.log"
            assert "step" in log.read_text()  # progress is visible in the rule log
    for figure in (
        "p1_dalign_vs_width",
        "p1_plugin_vs_unbiased",
        "p1_misalignment_vs_width",
        "p1_misalignment_vs_MK",
        "p1_interventions",
        "p2_grokking",
        "p2_pinn",
        "p2_preference",
        "p2_theory",
        "p3_depth",
        "p3_growth",
    ):
        assert (results / "figures" / f"{figure}.png").stat().st_size > 5_000, figure
    # the context sweep's regime map: its figures and both comparisons' claim rows
    for figure in (
        "p1_regime_dalign_vs_width",
        "p1_regime_dims_vs_width",
        "p1_regime_plugin_vs_unbiased",
        "p1_regime_dalign_vs_context",
    ):
        assert (results / "figures" / f"{figure}.png").stat().st_size > 5_000, figure
    regime = pd.read_csv(results / "claims" / "p1_regime.csv")
    # matched loss needs a held-out loss that every width and seed of a context passes through; 10 steps may give none
    matched_loss = len(pd.read_csv(results / "stats" / "p1_regime_loss.csv")) > 0
    contexts = len(next(grid for grid in ci_config()["grids"] if grid.get("contexts"))["contexts"])
    # per comparison: each context's primary cell (a part), then the claim with Holm across the contexts
    rows = contexts + (contexts > 1)
    assert list(regime["claim_id"]) == ["p1_regime_budget"] * rows + (["p1_regime_loss"] * rows if matched_loss else [])
    # every claim table carries the evidence columns and one of the four words; checks are apart
    for path in (results / "claims").glob("*.csv"):
        table = pd.read_csv(path)
        assert list(table.columns) == ROW_COLUMNS, path
        assert set(table["verdict"]) <= set(WORDS), (path, set(table["verdict"]))
    claims = pd.concat([pd.read_csv(path) for path in (results / "claims").glob("*.csv")])
    assert {
        "p1_dalign_width",
        "p1_certificate_iid",
        "p2_pinn",
        "p2_dpo_accuracy",
        "p2_drift_diffusion",
        "p2_grokking",
        "p3_grown_vs_scratch",
    } <= set(claims["claim_id"])
    checks = pd.concat([pd.read_csv(path) for path in (results / "checks").glob("*.csv")])
    assert list(checks.columns) == CHECK_COLUMNS and checks["passed"].dtype == bool, checks
    assert checks.loc[checks["check_id"] == "p1_certificate_order", "passed"].all()  # same moments: never fails
    assert {"p1_certificate_order", "p1_intervention_ratio", "p2_coupling_residual"} <= set(checks["check_id"])
    alignment = pd.read_csv(results / "stats" / "alignment.csv")
    assert set(alignment["reduction"]) == {"sum_positions", "flatten"} and set(alignment["pool"]) == {"train", "test"}
    html = (results / "report.html").read_text()
    assert "Paper claims at a glance" in html and "data:image/png;base64" in html
    assert '<p class="counts">' in html and "Implementation checks" in html


@pytest.mark.slow
def test_a_ci_store_opens_as_a_datatree_without_warnings(ci_run):
    """xr.open_datatree on a store the pipeline wrote: one node per point, docs/design.md §5's variables and dims, and
    no warning (Snakemake's .snakemake_timestamp stays outside the store: rules name its root zarr.json)."""
    import warnings

    grid = ci_config()["grids"][0]
    store = (
        ci_run
        / "results"
        / "grads"
        / grid["family"]
        / grid["dataset"]
        / f"w{grid['widths'][0]}_d{grid['depths'][0]}_s0"
        / f"step{grid['train']['save_steps'][-1]}.zarr"
    )
    assert sorted(path.name for path in store.iterdir() if not path.is_dir()) == ["zarr.json"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tree = xr.open_datatree(store, engine="zarr", consolidated=False)
    assert sorted(tree.children) == sorted(open_store(store).attrs["groups"])
    dims = {"resnet": ("sample", "channel", "height", "width"), "llama": ("sample", "token", "feature")}[grid["family"]]
    for name, node in tree.children.items():
        assert node["q"].dims == dims and node["z"].dims == dims and node["split"].dims == ("sample",), name
        assert {"split", "index", "label", "loss"} <= set(node["q"].coords) and "description" in node["q"].attrs, name


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="needs chromium (apt-get install chromium; .ci/run installs it)")
def test_the_pipeline_report_renders_in_a_real_browser(ci_run):
    results = ci_run / "results"
    check = browser_check(results / "report.html", width=1280)
    kept = ROOT / "docs" / "reference-results"
    references = sum(len(list(folder.glob("*.png"))) for folder in reference_folders(kept)) + advice_figures(kept)
    assert check["images"] == len(list((results / "figures").glob("*.png"))) + references, check
    assert check["undecoded"] == [], check
    assert check["scroll_width"] <= check["viewport"] and check["outside"] == [], check
    assert check["links"] > 0 and check["broken"] == [], check
    assert (results / "report-first-screen.png").stat().st_size > 10_000  # the reader's first look


@pytest.mark.slow
def test_second_run_has_nothing_to_do(ci_run):
    result = snakemake("--configfile", "configs/ci.yaml", "--dry-run", results=ci_run)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Nothing to be done" in result.stdout + result.stderr


def report_script(page: str, name: str):
    """The JSON a Snakemake report page embeds as `<script id="name"> var ... = {...};`."""
    match = re.search(rf'<script id="{name}">\s*var \w+ = (.*?);\s*</script>', page, re.S)
    assert match, f"no <script id={name}> in the report page"
    return json.loads(match.group(1))


@pytest.mark.slow
def test_snakemake_report_groups_outputs_by_paper(ci_run):
    # Reuses the fixture's finished run: --report reads its outputs and metadata, it builds nothing.
    archive = ci_run / "snakemake-report.zip"
    result = snakemake("--report", str(archive), "--configfile", "configs/ci.yaml", results=ci_run)
    assert result.returncode == 0, result.stderr[-3000:]
    with zipfile.ZipFile(archive) as handle:
        names = handle.namelist()
        page = handle.read("snakemake-report/report.html").decode()
    categories = report_script(page, "categories")  # {category: {subcategory: [paths]}}
    assert set(categories) == {
        "P1 width and alignment",
        "P2 population-risk training",
        "P3 depth sufficiency",
        "Training",
    }
    assert set(categories["P1 width and alignment"]) == {"alignment", "interventions", "regime map"}
    assert set(categories["P2 population-risk training"]) == {"grokking", "pinn", "theory", "preference"}
    assert set(categories["P3 depth sufficiency"]) == {"depth", "growth"}
    # {"figures/p2_pinn.png": entry}: tables/ and claims/ share file names, so keep the folder
    results = {"/".join(Path(path).parts[-2:]): entry for path, entry in report_script(page, "results").items()}
    marked = {
        f"{folder}/{path.name}"
        for folder, pattern in (("figures", "*.png"), ("tables", "*.csv"), ("claims", "*.csv"))
        for path in (ci_run / "results" / folder).glob(pattern)
    }
    assert set(results) == marked
    # every marked file travels in the archive beside the page
    assert len([name for name in names if name.startswith("snakemake-report/data/raw/")]) == len(results)
    # captions are rendered per file (the P2 rule's caption branches on its task wildcard), without rst errors
    assert "effective dimension" in results["figures/p1_dalign_vs_width.png"]["caption"]
    assert "modular division" in results["figures/p2_grokking.png"]["caption"]
    assert "dissipation Gramian" in results["figures/p2_theory.png"]["caption"]
    assert all(entry["caption"].strip() and "system-message" not in entry["caption"] for entry in results.values())
    assert results["figures/p1_dalign_vs_width.png"]["labels"] == {"result": "figure: d_align vs width", "paper": "P1"}
    assert "finite-sample alignment certificate" in report_script(page, "workflow-desc")


@pytest.mark.slow
def test_deleting_one_run_rebuilds_only_it_and_its_dependents(ci_run, planned_jobs):
    # Snakemake does not rebuild a deleted intermediate while everything downstream is up to date
    # (https://github.com/snakemake/snakemake/issues/1978): asking for it rebuilds just that run, and the next plain run
    # then updates only the tables, figures and report that read it.
    grid = ci_config()["grids"][0]
    victim = (
        ci_run
        / "results"
        / "models"
        / grid["family"]
        / grid["dataset"]
        / f"w{grid['widths'][0]}_d{grid['depths'][0]}_s0"
    )
    shutil.rmtree(victim)
    plan = snakemake("--configfile", "configs/ci.yaml", "--dry-run", str(victim), results=ci_run)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert planned_jobs(plan.stdout + plan.stderr) == {"train_model": 1}, plan.stdout[-3000:]
    rebuilt = snakemake(str(victim), "--configfile", "configs/ci.yaml", results=ci_run)
    assert rebuilt.returncode == 0 and (victim / "metrics.json").is_file(), rebuilt.stderr[-2000:]
    follow_up = snakemake("--configfile", "configs/ci.yaml", "--dry-run", results=ci_run)
    per_checkpoint = len(grid["train"]["save_steps"])
    expected = {
        "dump_gradients": per_checkpoint,
        "estimate_alignment": per_checkpoint,
        "estimate_misalignment": 1,
        "estimate_depth": 1,
        "intervene": 1,  # last checkpoint only
        "summarize_training": 1,
        "summarize_alignment": 1,
        "summarize_interventions": 1,
        "summarize_depth": 1,
        "summarize_growth": 1,
        "summarize_regime": 1,
        "plot_training": 1,
        "report": 1,
        "all": 1,
    }
    assert planned_jobs(follow_up.stdout + follow_up.stderr) == expected, follow_up.stdout[-3000:]


def test_paper_grid_plans_without_error(tmp_path, planned_jobs):
    result = snakemake("--configfile", "configs/paper.yaml", "--dry-run", results=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(ROOT / "configs" / "paper.yaml") as handle:
        grids = yaml.safe_load(handle)["grids"]
    expected = sum(len(g["widths"]) * len(g["depths"]) * len(g["seeds"]) for g in grids)
    assert planned_jobs(result.stdout + result.stderr)["train_model"] == expected


# the stages that move their model to the device: every torch stage
GPU_RULES = {
    "train_model",
    "dump_gradients",
    "dump_pretrained",
    "intervene",
    "intervene_pretrained",
    "estimate_depth",
    "grow_model",
    "p2_unit",
    "p2_ungated",
    "preference",
}  # p2_experiment gathers units: no training


def gpu_requests(output):
    """{rule: set of `gpu` values} of the job blocks of a dry run (resources line; absent = 0)."""
    found = {}
    for block in re.split(r"^\[[^\]\n]+\]$", output, flags=re.MULTILINE):
        rule = re.search(r"^(?:local)?rule (\w+):$", block, re.MULTILINE)
        if rule:
            gpu = re.search(r"^    resources: .*\bgpu=(\d+)", block, re.MULTILINE)
            found.setdefault(rule.group(1), set()).add(int(gpu.group(1)) if gpu else 0)
    return found


@pytest.mark.parametrize("device, gpus", [("cuda", 1), ("cuda:1", 1), ("cpu", 0), ("auto", 0)])
def test_slurm_dry_run_requests_gpus_exactly_on_the_device_stages(tmp_path, device, gpus):
    # auto resolves on the planning machine: this one has no CUDA, so auto plans CPU jobs
    result = snakemake(
        "--workflow-profile",
        "profiles/slurm",
        "--configfile",
        "configs/paper.yaml",
        "--dry-run",
        "--config",
        f"device={device}",
        f"results={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    requests = gpu_requests(result.stdout + result.stderr)
    # paper.yaml leaves pretrained.intervene off: every other device stage is planned
    assert GPU_RULES - {"intervene_pretrained"} <= set(requests), sorted(requests)
    assert all(requests[rule] == {gpus} for rule in GPU_RULES & set(requests)), requests
    assert all(values == {0} for rule, values in requests.items() if rule not in GPU_RULES), requests


def test_device_cuda_without_cuda_stops_before_any_job(tmp_path):
    result = snakemake(
        "--configfile",
        "configs/ci.yaml",
        "--config",
        "device=cuda",
        f"results={tmp_path}/results",
        f"prepared_data={tmp_path}/prepared",
    )
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "config key" in line]
    assert lines == [
        "config key 'device': 'cuda', but torch sees no CUDA device on this machine "
        "(torch.cuda.is_available() is False); use device: auto or cpu"
    ], result.stderr[-2000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "prepared").exists()


def test_bad_config_fails_with_one_line_naming_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"grids": [{"family": "resnet", "dataset": "digits", "widths": [2, -1]}]}))
    result = snakemake("--configfile", str(bad), "--dry-run", results=tmp_path)
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "config key" in line]
    assert lines == ["config key 'grids[0].widths[1]': -1 is less than the minimum of 1"], result.stderr[-2000:]


def test_snakemake_lint_is_clean():
    result = snakemake("--lint")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Congratulations" in result.stdout + result.stderr, result.stdout[-3000:]


def killed_run_targets(results: Path) -> list[str]:
    """The killed run's targets: the ci DAG's P1 and P3 stages on its runs of fixed context (each run's certificates,
    so its alignment too; depth, interventions and growth with their claims) and one P2 task (grokking, its units).
    Left out: the context sweep (more of the same jobs), the P2 tasks run in the same unit rule, and the report."""
    config = merged_config(ROOT / "configs" / "ci.yaml")
    plan = Plan({**config, "results": str(results), "prepared_data": str(results / "prepared")})
    misalignment = plan.per_store(
        artifacts.MISALIGNMENT, plan.fixed_context_runs(), config["alignment"]["analyse_misalignment"]
    )
    grokking = artifacts.TASK_SUMMARY.path(str(results), task="grokking")
    return ["summarize_depth", "summarize_growth", "summarize_interventions", grokking, *misalignment]


@pytest.mark.slow
def test_a_killed_pipeline_on_device_cpu_unlocks_and_reruns_to_the_auto_run_bit_for_bit(ci_run, tmp_path):
    """Kill Snakemake's whole process group mid-run (SIGKILL: no cleanup at all), then do what docs/reproducing.md says:
    the rerun refuses with the stale lock, --unlock, rerun. This run says `device: cpu` where ci_run left the
    default `auto`, so one comparison checks two promises: every table, store array and checkpoint equals the
    uninterrupted run's, and `cpu` and `auto` give the same artifacts on a machine without CUDA. It reads the datasets
    ci_run prepared (prepared data is not a result: nothing compared depends on where it was prepared), so the kill
    lands among the training and dump jobs. It builds killed_run_targets, not the whole ci DAG (what it leaves out
    only repeats the kinds of job it keeps)."""
    import signal
    import time

    from growcert.store.compare import compare_results

    log = tmp_path / "killed.log"
    device, prepared = ["device=cpu"], ci_run / "prepared"
    targets = killed_run_targets(tmp_path / "results")
    command = [
        *SNAKEMAKE,
        "--cores",
        "2",
        "--printshellcmds",
        *targets,
        "--configfile",
        "configs/ci.yaml",
        "--config",
        f"results={tmp_path}/results",
        f"prepared_data={prepared}",
        *device,
    ]
    with open(log, "w") as sink:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=unactivated_environment(),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 600
    while log.read_text().count("Finished jobid") < 8 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert process.poll() is None, f"the pipeline ended before it could be killed:\n{log.read_text()[-3000:]}"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    locked = snakemake(*targets, "--configfile", "configs/ci.yaml", results=tmp_path, config=device, prepared=prepared)
    assert locked.returncode != 0 and "LockException" in locked.stdout + locked.stderr, locked.stderr[-2000:]
    assert (
        snakemake(
            "--unlock", "--configfile", "configs/ci.yaml", results=tmp_path, config=device, prepared=prepared
        ).returncode
        == 0
    )
    rerun = snakemake(*targets, "--configfile", "configs/ci.yaml", results=tmp_path, config=device, prepared=prepared)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    ours = tmp_path / "results"
    assert "--device cpu" in log.read_text() and "--device auto" not in log.read_text()
    comparison = compare_results(ci_run / "results", ours)
    # ci_run built more than these targets need: what only it has is expected, nothing may be ours alone
    assert not comparison.differ and not [name for name in comparison.only_in_one if (ours / name).exists()], (
        comparison.differ,
        comparison.only_in_one,
    )
    kinds = {name.split("/")[0] for name in comparison.identical}
    assert {"stats", "tables", "claims", "grads", "models", "grow", "grokking"} <= kinds, kinds
    ran = log.read_text() + rerun.stdout + rerun.stderr  # the killed run's jobs, then the rerun's
    rules = set(re.findall(r"^(?:local)?rule (\w+):", ran, flags=re.M))
    assert {
        "train_model",
        "dump_gradients",
        "estimate_alignment",
        "estimate_misalignment",
        "estimate_depth",
        "intervene",
        "grow_model",
        "p2_unit",
        "p2_experiment",
    } <= rules, rules
    assert not [path for path in ours.rglob("*") if "partial" in path.name or path.name.endswith(".resume")]
