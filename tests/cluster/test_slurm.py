"""The pipeline on a real SLURM cluster, through profiles/slurm (snakemake-executor-plugin-slurm).

1. The ci DAG (configs/ci.yaml with slurm_grids.yaml's two grids) runs through SLURM: every target exists;
   every job that is not a localrule (prepare_dataset, train_model, dump_gradients, ...) was a SLURM job of this run
   (squeue lists it COMPLETED under the run's ID, SLURM wrote its log); localrules never went there.
2. A fresh results folder, asking for the resnet grid's gradient stores (prepared data reused):
   one *running* train_model job is scancel'ed. Snakemake stops with an error naming that job; a
   dry run then plans exactly the missing training runs and stores, nothing whose output exists;
   the rerun runs exactly that plan and leaves the finished training run untouched.
3. A job killed at its time limit resumes on its retry.
4. P2's units (slurm_grokking.yaml: 2 arms x 2 seeds, paired caps): each (arm, seed) is a SLURM job of its own;
   one unit cancelled mid-run resumes from the state it saved on SIGTERM when Snakemake runs again, and ends
   bit for bit as the same unit run uninterrupted on this machine.

The checks read rule names from Snakemake's own output rather than a fixed list, so rules added to
the DAG later are covered without editing this file.

Needs a SLURM cluster (see conftest.py: `sudo tests/cluster/slurm_up.sh` starts one in seconds).
Every snakemake call is bounded by GROWCERT_SLURM_TIMEOUT seconds (default 600); whatever this
test submitted is cancelled when it ends. Outputs go to temporary folders; snakemake runs in the
repository root with the repository's profile, as a user would.
"""

import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from growcert.store import open_group, open_store
from growcert.store.compare import VOLATILE_COLUMNS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = int(os.environ.get("GROWCERT_SLURM_TIMEOUT", "600"))
ENV = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
SLURM_RULES = {"prepare_dataset", "train_model", "dump_gradients"}  # at least these go to SLURM
LOCAL_RULES = {"summarize_training", "plot_training", "report"}  # at least these never do
JOB_HEADER = re.compile(r"^(local)?rule (\w+):$", re.MULTILINE)
SUBMITTED = re.compile(r"^Job \d+ has been submitted with SLURM jobid (\d+) \(log: (.+)\)\.$", re.MULTILINE)
FINAL_STATES = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE"}


GRIDS = Path(__file__).resolve().parent / "slurm_grids.yaml"  # merged over configs/ci.yaml: its grids win
GROKKING = Path(__file__).resolve().parent / "slurm_grokking.yaml"  # merged over both: the toy P2 task of test 4


def ci_config():
    """configs/ci.yaml with the SLURM tests' grids (slurm_grids.yaml), as Snakemake merges the two files."""
    with open(ROOT / "configs" / "ci.yaml") as handle, open(GRIDS) as grids:
        return {**yaml.safe_load(handle), **yaml.safe_load(grids)}


def snakemake_command(base, prepared, *extra, targets=()):
    # A 3 s first status check (profile: 10 s) keeps waves of seconds-long jobs quick; the logs
    # of successful jobs are kept (plugin default: deleted) as evidence that SLURM ran them.
    return [
        sys.executable,
        "-m",
        "snakemake",
        *map(str, targets),
        "--workflow-profile",
        "profiles/slurm",
        "--configfile",
        "configs/ci.yaml",
        str(GRIDS),
        "--config",
        f"results={base}/results",
        f"prepared_data={prepared}",
        "--slurm-logdir",
        str(base / "slurm_logs"),
        "--slurm-keep-successful-logs",
        "--slurm-init-seconds-before-status-checks",
        "3",
        *extra,
    ]


def run(command, timeout=TIMEOUT):
    try:
        result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:  # subprocess.run has killed snakemake
        output = (expired.stdout or b"").decode() + (expired.stderr or b"").decode()
        pytest.fail(f"snakemake ran longer than {timeout} s; last output:\n{output[-3000:]}")
    return result.returncode, result.stdout + result.stderr


def submitted_jobs(output):
    """[(SLURM job id, rule, log path)] in submission order, from the plugin's messages."""
    jobs = []
    for job_id, log in SUBMITTED.findall(output):
        rule = re.search(r"/rule_(\w+?)/", log)
        jobs.append((job_id, rule.group(1) if rule else "?", Path(log)))
    return jobs


def squeue(*args):
    """{job id: (state, comment)} for all states (finished jobs stay listed for MinJobAge)."""
    result = subprocess.run(
        ["squeue", "-h", "-t", "all", "-o", "%i|%T|%k", *args], capture_output=True, text=True, timeout=30
    )
    rows = (line.split("|", 2) for line in result.stdout.splitlines() if line.count("|") >= 2)
    return {job_id: (state, comment) for job_id, state, comment in rows}


def job_headers(output):
    """(remote, local): Counter of rule names of the job headers snakemake printed (`rule x:` vs `localrule x:`)."""
    remote, local = Counter(), Counter()
    for is_local, rule in JOB_HEADER.findall(output):
        (local if is_local else remote)[rule] += 1
    return remote, local


def planned_outputs(output):
    """[(rule, [output paths])] of the job blocks of a dry run."""
    jobs = []
    for block in re.split(r"^\[[^\]\n]+\]$", output, flags=re.MULTILINE):
        header = JOB_HEADER.search(block)
        outputs = re.search(r"^    output: (.+)$", block, re.MULTILINE)
        if header:
            jobs.append((header.group(2), outputs.group(1).split(", ") if outputs else []))
    return jobs


def job_state(job_id):
    return squeue("-j", job_id).get(job_id, ("GONE", ""))[0]


def cancel_unfinished(job_ids):
    """Leave nothing of ours queued or running, whatever happened in the test."""
    unfinished = [job_id for job_id in job_ids if job_state(job_id) not in FINAL_STATES | {"GONE"}]
    if unfinished:
        subprocess.run(["scancel", *unfinished], capture_output=True, timeout=30)


def run_dir(results, family, dataset, width, depth, seed=0):
    return results / "models" / family / dataset / f"w{width}_d{depth}_s{seed}"


def store_path(results, family, dataset, width, depth, step, seed=0):
    return results / "grads" / family / dataset / f"w{width}_d{depth}_s{seed}" / f"step{step}.zarr"


def expected_runs(grids):
    for grid in grids:
        for width in grid["widths"]:
            for depth in grid["depths"]:
                for seed in grid.get("seeds", [0]):
                    yield grid, (grid["family"], grid["dataset"], width, depth, seed)


def assert_every_target(results, grids):
    assert (results / "report.html").stat().st_size > 10_000  # embeds at least one figure
    assert (results / "stats" / "training.csv").is_file()
    assert (results / "figures" / "training_grid.png").is_file()
    assert_runs_and_stores(results, grids)


def assert_runs_and_stores(results, grids):
    dump = ci_config()["dump"]
    for grid, (family, dataset, width, depth, seed) in expected_runs(grids):
        run = run_dir(results, family, dataset, width, depth, seed)
        assert (run / "metrics.json").is_file(), run
        for step in grid["train"]["save_steps"]:
            assert (run / f"step{step}.pt").is_file()
            store = store_path(results, family, dataset, width, depth, step, seed)
            assert open_store(store).attrs["step"] == step
            assert open_group(store, "block0").sizes["sample"] == dump["train_examples"] + dump["test_examples"]


@pytest.fixture(scope="module")
def full_run(slurm_cluster, tmp_path_factory):
    base = tmp_path_factory.mktemp("slurm-full")
    returncode, output = 1, ""
    try:
        returncode, output = run(snakemake_command(base, base / "prepared"))
    finally:
        cancel_unfinished([job_id for job_id, _, _ in submitted_jobs(output)])
    (base / "snakemake.log").write_text(output)
    assert returncode == 0, output[-4000:]
    return SimpleNamespace(base=base, results=base / "results", output=output, cluster=slurm_cluster)


def test_ci_dag_runs_through_slurm(full_run):
    assert_every_target(full_run.results, ci_config()["grids"])

    output = full_run.output
    run_id = re.search(r"^SLURM run ID: (\S+)$", output, re.MULTILINE).group(1)
    jobs = submitted_jobs(output)
    submitted = Counter(rule for _, rule, _ in jobs)
    remote, local = job_headers(output)
    # Each job snakemake started as remote was submitted to SLURM exactly once; localrules never.
    assert submitted == remote, (submitted, remote)
    assert not set(submitted) & set(local), (submitted, local)
    grids = ci_config()["grids"]
    assert submitted["prepare_dataset"] == len({grid["dataset"] for grid in grids})
    assert submitted["train_model"] == sum(1 for _ in expected_runs(grids))
    assert submitted["dump_gradients"] == sum(len(grid["train"]["save_steps"]) for grid, _ in expected_runs(grids))
    assert SLURM_RULES <= set(submitted) and LOCAL_RULES <= set(local), (submitted, local)
    # SLURM itself ran each of them for this run (job name = the run ID), to completion.
    listed = squeue("--name", run_id)
    for job_id, rule, log in jobs:
        if job_id not in listed and full_run.cluster != "growcertci":
            continue  # a real cluster may already have purged it (MinJobAge)
        assert job_id in listed, f"SLURM job {job_id} ({rule}) is not listed under run {run_id}: {listed}"
        state, comment = listed[job_id]
        assert state == "COMPLETED", (job_id, rule, state)
        assert comment.startswith(f"rule_{rule}"), (job_id, rule, comment)
        assert f"rule {rule}:" in log.read_text(), log  # SLURM's --output file of that job


def cancel_a_running_job(process, log, rule, deadline):
    """scancel the first job of `rule` seen RUNNING; returns its SLURM job id."""
    tried = set()
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"snakemake exited (code {process.returncode}) before a {rule} job could be "
                f"cancelled:\n{log.read_text()[-3000:]}"
            )
        for job_id, job_rule, _ in submitted_jobs(log.read_text()):
            if job_rule != rule or job_id in tried:
                continue
            state = job_state(job_id)
            if state in FINAL_STATES | {"GONE"}:
                tried.add(job_id)  # finished before we got to it; try the next one
            elif state == "RUNNING":
                tried.add(job_id)
                subprocess.run(["scancel", job_id], capture_output=True, timeout=30)
                for _ in range(60):
                    if job_state(job_id) == "CANCELLED":
                        return job_id
                    time.sleep(0.5)
        time.sleep(0.5)
    pytest.fail(f"no {rule} job could be cancelled while running; snakemake output:\n{log.read_text()[-3000:]}")


def test_cancelled_job_fails_the_run_and_rerun_makes_only_what_is_missing(full_run, tmp_path, planned_jobs):
    # Only the resnet grid's stores (its training runs and dumps): the whole DAG ran above, and
    # this keeps the test to a few minutes.
    resnet = [grid for grid in ci_config()["grids"] if grid["family"] == "resnet"]
    prepared = full_run.base / "prepared"  # ready: no prepare_dataset job this time
    results = tmp_path / "results"
    # a store's target is its root zarr.json (the rules name stores so: nothing foreign lands inside them)
    stores = [
        store_path(results, *key[:4], step, key[4]) / "zarr.json"
        for grid, key in expected_runs(resnet)
        for step in grid["train"]["save_steps"]
    ]
    log = tmp_path / "cancelled_run.log"

    # --retries 0: the profile's retry would resubmit the cancelled job and hide the failure.
    command = snakemake_command(tmp_path, prepared, "--retries", "0", targets=stores)
    with open(log, "w") as sink:
        process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=sink, stderr=subprocess.STDOUT)
    try:
        victim = cancel_a_running_job(process, log, "train_model", time.monotonic() + TIMEOUT / 2)
        try:
            returncode = process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"snakemake ran longer than {TIMEOUT} s after the cancel:\n{log.read_text()[-3000:]}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        cancel_unfinished([job_id for job_id, _, _ in submitted_jobs(log.read_text())])
    output = log.read_text()

    # Snakemake reports the failure: non-zero exit, the SLURM job, its state and its rule.
    assert returncode != 0, output[-3000:]
    assert f"SLURM-job '{victim}' failed, SLURM status is: 'CANCELLED'" in output, output[-3000:]
    error = re.search(
        rf"^Error in rule train_model:\n(?:    .*\n)*?    external_jobid: {victim}\n", output, re.MULTILINE
    )
    assert error, output[-3000:]
    cancelled_run = Path(re.search(r"^    output: (.+)$", error.group(0), re.MULTILINE).group(1))
    assert not cancelled_run.exists()  # snakemake removed the failed job's partial output

    # The dry run plans exactly the missing training runs and stores, nothing whose output exists.
    missing_runs = [key for _, key in expected_runs(resnet) if not run_dir(results, *key).is_dir()]
    missing_stores = [store for store in stores if not store.is_file()]
    finished_runs = [run_dir(results, *key) for _, key in expected_runs(resnet) if key not in missing_runs]
    assert cancelled_run in [run_dir(results, *key) for key in missing_runs]
    assert finished_runs, "the other training job should have finished before snakemake stopped"
    returncode, plan_output = run(snakemake_command(tmp_path, prepared, "--dry-run", targets=stores))
    assert returncode == 0, plan_output[-3000:]
    plan = planned_jobs(plan_output)
    assert plan == {"train_model": len(missing_runs), "dump_gradients": len(missing_stores)}, plan_output[-3000:]
    planned = planned_outputs(plan_output)
    assert Counter(rule for rule, _ in planned) == plan
    existing = [(rule, path) for rule, paths in planned for path in paths if Path(path).exists()]
    assert not existing, f"the dry run plans jobs whose outputs exist: {existing}"
    assert {str(store) for store in missing_stores} <= {path for _, paths in planned for path in paths}

    # The rerun runs exactly that plan, submitting its non-local jobs, and leaves finished runs alone.
    untouched = {path: path.stat().st_mtime_ns for run in finished_runs for path in run.iterdir()}
    returncode, rerun = "?", ""
    try:
        returncode, rerun = run(snakemake_command(tmp_path, prepared, targets=stores))
    finally:
        cancel_unfinished([job_id for job_id, _, _ in submitted_jobs(rerun)])
    assert returncode == 0, rerun[-4000:]
    assert planned_jobs(rerun) == plan, rerun[-3000:]
    remote, _ = job_headers(rerun)
    resubmitted = Counter(rule for _, rule, _ in submitted_jobs(rerun))
    assert resubmitted == remote == plan, (resubmitted, remote, plan)
    assert {path: path.stat().st_mtime_ns for path in untouched} == untouched
    assert_runs_and_stores(results, resnet)


def test_job_killed_at_its_time_limit_resumes_on_retry(full_run, tmp_path):
    # One training run long enough to outlive a 1-minute limit (SLURM kills at 60 s plus up to its
    # ~30 s enforcement tick, then KillWait). Its first attempt gets `--time=1`, its retry 11 minutes.
    # resume_every exceeds the steps, so the only resume state the retry can find is the one written
    # when SLURM's SIGTERM arrived: the retry resuming proves the time-limit path end to end.
    steps = int(os.environ.get("GROWCERT_SLURM_TIMELIMIT_STEPS", "12000"))
    train = {
        "steps": steps,
        "batch_size": 32,
        "lr": 0.002,
        "warmup_steps": 2,
        "save_steps": [steps],
        "eval_every": steps,
        "eval_examples": 64,
        "resume_every": 10 * steps,
    }
    config = tmp_path / "long_run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "grids": [
                    {
                        "family": "resnet",
                        "dataset": "digits",
                        "widths": [2],
                        "depths": [8],
                        "seeds": [0],
                        "train": train,
                    }
                ]
            }
        )
    )
    results = tmp_path / "results"
    run_folder = run_dir(results, "resnet", "digits", 2, 8)
    command = snakemake_command(
        tmp_path,
        full_run.base / "prepared",
        "--configfile",
        "configs/ci.yaml",
        str(GRIDS),
        str(config),
        "--set-resources",
        "train_model:runtime=10*attempt-9",
        "--retries",
        "1",
        targets=[run_folder],
    )
    returncode, output = "?", ""
    try:
        returncode, output = run(command, timeout=TIMEOUT + 300)
    finally:
        cancel_unfinished([job_id for job_id, _, _ in submitted_jobs(output)])
    (tmp_path / "snakemake.log").write_text(output)
    assert returncode == 0, output[-4000:]

    jobs = [(job_id, log) for job_id, rule, log in submitted_jobs(output) if rule == "train_model"]
    assert len(jobs) == 2, output[-3000:]  # the attempt SLURM killed, and its retry
    (killed, killed_log), (retry, _) = jobs
    assert f"SLURM-job '{killed}' failed, SLURM status is: 'TIMEOUT'" in output, output[-3000:]
    assert "DUE TO TIME LIMIT" in killed_log.read_text(), killed_log  # slurmstepd's own line
    assert job_state(retry) == "COMPLETED"

    # The retry continued from the state saved on SIGTERM (the rule log is the retry's own).
    rule_log = (results / "logs" / "train_model" / "resnet" / "digits" / "w2_d8_s0.log").read_text()
    resumed = re.search(r"^resumed from \S+ at step (\d+)$", rule_log, re.MULTILINE)
    assert resumed, rule_log[-2000:]
    assert 0 < int(resumed.group(1)) < steps, resumed.group(0)
    assert (run_folder / f"step{steps}.pt").is_file() and (run_folder / "metrics.json").is_file()
    assert not any(path.name.endswith(".resume") for path in run_folder.parent.iterdir())  # cleared when done


def grokking_config():
    with open(ROOT / "configs" / "ci.yaml") as handle, open(GROKKING) as toy:
        return {**yaml.safe_load(handle)["grokking"], **yaml.safe_load(toy)["grokking"]}


def unit_of_job(log):
    """(arm, seed) of a p2_unit job, from the job header Snakemake prints into its SLURM log; None before that."""
    found = (
        re.search(r"wildcards: task=grokking, arm=([^,\s]+), seed=(\d+)", log.read_text()) if log.is_file() else None
    )
    return (found.group(1), int(found.group(2))) if found else None


def cancel_unit_with_resume_state(process, log, results, unit, deadline):
    """scancel unit (arm, seed)'s job once it runs and has saved resume state; returns the SLURM job id."""
    folder = results / "grokking" / "units" / unit[0] / f"seed{unit[1]}"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"snakemake exited (code {process.returncode}) before unit {unit} could be cancelled:\n"
                f"{log.read_text()[-3000:]}"
            )
        jobs = [
            job_id
            for job_id, rule, job_log in submitted_jobs(log.read_text())
            if rule == "p2_unit" and unit_of_job(job_log) == unit
        ]
        if jobs and job_state(jobs[0]) == "RUNNING" and any((folder / ".resume").glob("*")):
            subprocess.run(["scancel", jobs[0]], capture_output=True, timeout=30)
            for _ in range(60):
                if job_state(jobs[0]) == "CANCELLED":
                    return jobs[0]
                time.sleep(0.5)
        time.sleep(0.5)
    pytest.fail(f"unit {unit} could not be cancelled while running; snakemake output:\n{log.read_text()[-3000:]}")


def test_p2_units_are_slurm_jobs_and_a_cancelled_unit_resumes_bit_for_bit(slurm_cluster, tmp_path):
    settings = grokking_config()
    arms = ["AdamW_wd_1", "poprisk-update-exact-wd1"]  # the config's arms, in the task's order
    units = [(arm, seed) for seed in settings["seeds"] for arm in arms]
    victim = ("AdamW_wd_1", settings["seeds"][0])  # an AdamW unit: its seed's gate reading waits on it (paired cap)
    results = tmp_path / "results"
    claims = results / "claims" / "p2_grokking.csv"
    files = ("--configfile", "configs/ci.yaml", str(GROKKING))
    log = tmp_path / "cancelled_run.log"
    with open(log, "w") as sink:  # --retries 0: the profile's retry would resubmit the cancelled job at once
        process = subprocess.Popen(
            snakemake_command(tmp_path, tmp_path / "prepared", *files, "--retries", "0", targets=[claims]),
            cwd=ROOT,
            env=ENV,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        cancelled = cancel_unit_with_resume_state(process, log, results, victim, time.monotonic() + TIMEOUT / 2)
        process.wait(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        cancel_unfinished([job_id for job_id, _, _ in submitted_jobs(log.read_text())])
    first = log.read_text()
    assert process.returncode != 0 and f"SLURM-job '{cancelled}' failed" in first, first[-3000:]
    unit_folder = results / "grokking" / "units" / victim[0] / f"seed{victim[1]}"
    assert not (unit_folder / "summary.csv").exists() and any((unit_folder / ".resume").glob("*")), first[-3000:]

    returncode, second = "?", ""
    try:
        returncode, second = run(snakemake_command(tmp_path, tmp_path / "prepared", *files, targets=[claims]))
    finally:
        cancel_unfinished([job_id for job_id, _, _ in submitted_jobs(second)])
    assert returncode == 0, second[-4000:]

    # Every unit was a SLURM job of its own: one job per (arm, seed), the cancelled one submitted again.
    jobs = [
        (job_id, unit_of_job(job_log))
        for output in (first, second)
        for job_id, rule, job_log in submitted_jobs(output)
        if rule == "p2_unit"
    ]
    assert Counter(unit for _, unit in jobs) == Counter(units + [victim]), jobs
    states = {job_id: job_state(job_id) for job_id, _ in jobs}
    assert states.pop(cancelled) == "CANCELLED"
    assert set(states.values()) <= {"COMPLETED", "GONE"} and "COMPLETED" in states.values(), states

    # The resubmitted unit continued from the state its cancelled job saved, not from step 0.
    unit_log = (results / "logs" / "p2_unit" / "grokking" / victim[0] / f"seed{victim[1]}.log").read_text()
    resumed = re.search(r"resumed unit \S+ \S+ at step (\d+)", unit_log)
    assert resumed and 0 < int(resumed.group(1)) < settings["steps"], unit_log[-2000:]

    # ... and ends bit for bit as the same unit run uninterrupted here, without SLURM.
    local = tmp_path / "local"
    reference = local / "grokking" / "units" / victim[0] / f"seed{victim[1]}" / "summary.csv"
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", str(reference), "--cores", "1", *files, "--config", f"results={local}"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    for table in ("curves.csv", "summary.csv"):
        resumed_table, uninterrupted = (pd.read_csv(folder / table) for folder in (unit_folder, reference.parent))
        timing = [column for column in VOLATILE_COLUMNS if column in resumed_table]
        pd.testing.assert_frame_equal(
            resumed_table.drop(columns=timing), uninterrupted.drop(columns=timing), check_exact=True
        )
    assert (pd.read_csv(claims)["claim_id"] == "p2_grokking").any()  # the aggregate judged the units
