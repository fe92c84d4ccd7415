"""Preemption faults on `growcert train` (a real subprocess): SIGKILL at a random step after a resume state,
and SIGTERM at a random moment, then a rerun; the checkpoints equal an uninterrupted run's, tensor for tensor."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from growcert.data import load_prepared, prepare_dataset
from growcert.resume import resume_folder
from growcert.stages.train import train_model
from growcert.store.compare import VOLATILE_COLUMNS

SETTINGS = {
    "family": "llama",
    "dataset": "shakespeare",
    "width": 16,
    "depth": 1,
    "seed": 3,
    "model": {"head_dim": 8, "context": 16},
    "train": {
        "steps": 400,
        "batch_size": 8,
        "lr": 0.003,
        "warmup_steps": 5,
        "save_steps": [60, 400],
        "eval_every": 50,
        "eval_examples": 16,
        "resume_every": 20,
    },
}


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults-text")
    prepare_dataset("shakespeare", folder, {})
    return folder


@pytest.fixture(scope="module")
def uninterrupted(text, tmp_path_factory):
    out = tmp_path_factory.mktemp("faults-reference") / "run"
    train_model(SETTINGS, load_prepared(text), out, log=lambda _: None, device="cpu")
    return out


def start(text, out):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "growcert.cli",
            "train",
            "--data",
            str(text),
            "--settings",
            json.dumps(SETTINGS),
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def snapshot_step(out) -> int:
    state = resume_folder(out) / "state.pt"
    try:
        return int(torch.load(state, weights_only=False)["step"]) if state.is_file() else 0
    except Exception:  # being replaced at this instant
        return 0


def unit_progress(state) -> tuple[int, int]:
    """(unit index, step) of the last snapshot inside a unit of a UnitResume state; (-1, 0) before any."""
    try:
        current = torch.load(state, weights_only=False)["current"] if state.is_file() else None
    except Exception:  # being replaced at this instant
        return (-1, 0)
    return (current["key"][1], current["step"]) if current else (-1, 0)


def assert_same_checkpoints(out, reference):
    for step in SETTINGS["train"]["save_steps"]:
        ours = torch.load(out / f"step{step}.pt", weights_only=False)["state_dict"]
        theirs = torch.load(reference / f"step{step}.pt", weights_only=False)["state_dict"]
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[key], theirs[key]) for key in ours), step
    history = json.loads((out / "metrics.json").read_text())["history"]
    expected = json.loads((reference / "metrics.json").read_text())["history"]
    strip = lambda rows: [{k: v for k, v in row.items() if k != "elapsed_s"} for row in rows]  # noqa: E731
    assert strip(history) == strip(expected)
    assert not resume_folder(out).exists()  # removed once the run is complete


@pytest.mark.parametrize("seed", [0, 1])
def test_sigkill_after_a_resume_state_then_rerun_is_bit_identical(text, uninterrupted, tmp_path, seed):
    out = tmp_path / "run"
    target = int(np.random.default_rng(seed).integers(20, 300))  # kill once a snapshot at or past this exists
    process = start(text, out)
    deadline = time.time() + 120
    while snapshot_step(out) < target and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert process.poll() is None, "the run finished before it could be killed; lengthen it"
    process.kill()
    process.wait()
    killed_at = snapshot_step(out)
    assert killed_at >= target and not (out / "metrics.json").exists()
    rerun = start(text, out)
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr
    assert f"resumed from {resume_folder(out) / 'state.pt'} at step {killed_at}" in stdout
    assert_same_checkpoints(out, uninterrupted)


def test_sigterm_saves_a_resume_state_exits_in_one_line_and_resumes(text, uninterrupted, tmp_path):
    out = tmp_path / "run"
    process = start(text, out)
    while snapshot_step(out) < 20 and process.poll() is None:
        time.sleep(0.01)
    time.sleep(float(np.random.default_rng(7).uniform(0.0, 0.5)))  # a random moment between steps
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "stopped by SIGTERM after step" in lines[0] and "resume state saved" in lines[0], lines
    stopped_at = snapshot_step(out)
    assert stopped_at > 0 and not (out / "metrics.json").exists()
    rerun = start(text, out)
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0 and f"at step {stopped_at}" in stdout, stderr
    assert_same_checkpoints(out, uninterrupted)


def test_a_resume_state_from_other_settings_is_discarded(text, tmp_path):
    out = tmp_path / "run"
    folder = resume_folder(out)
    folder.mkdir(parents=True)
    from growcert.resume import ResumeFolder

    ResumeFolder(out, {"other": "settings"}).save({"step": 5})
    lines = []
    train_model(
        {**SETTINGS, "train": {**SETTINGS["train"], "steps": 30, "save_steps": [30]}},
        load_prepared(text),
        out,
        log=lines.append,
        device="cpu",
    )
    assert any("made with other settings" in line and "discarded" in line for line in lines)
    assert (out / "step30.pt").is_file() and not folder.exists()


def test_a_damaged_resume_state_stops_in_one_line(text, tmp_path):
    out = tmp_path / "run"
    folder = resume_folder(out)
    folder.mkdir(parents=True)
    (folder / "state.pt").write_bytes(b"not a torch file")
    process = start(text, out)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2 and len(stderr.strip().splitlines()) == 1 and "resume state" in stderr, stderr
    assert not (out / "metrics.json").exists()


GROKKING = {
    "p": 11,
    "steps": 500,
    "batch_size": 16,
    "eval_every": 50,
    "stop_at_test_acc": None,
    "resume_every": 25,
    "model": {"width": 16, "depth": 1, "heads": 2},
    "seeds": [0],
    "adamw": {"weight_decays": [0.01]},
    "diagnostics_every": 10,
    # the streaming arm carries its gate diagnostics (open fractions, variance ratios) in its snapshots
    "poprisk": {"weight_decays": [0.01], "gates": ["update"], "variances": ["streaming"]},
}


STREAMING = "poprisk-update-streaming-wd0.01"  # the unit killed: its snapshots carry the gate diagnostics


def grokking_unit(out, settings, arm):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "growcert.cli",
            "grokking",
            "--settings",
            json.dumps(settings),
            "--arm",
            arm,
            "--seed",
            "0",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_inside_a_grokking_unit_then_rerun_is_bit_identical(tmp_path):
    """One unit (an arm at a seed) is its own process, as its own Snakemake job: killed inside it, the rerun
    continues from the snapshot in the unit's folder and writes the rows that unit has in a run of the whole
    task (three arms: AdamW, Grokfast, PopulationRiskAdam, in one process)."""
    import pandas as pd

    from growcert.experiments.grokking import run_grokking

    reference = tmp_path / "reference" / "grokking"
    run_grokking(GROKKING, reference, log=lambda _: None, threads=1, device="cpu")
    out = tmp_path / "killed" / STREAMING
    state = out / ".resume" / "state.pt"
    target = (0, int(np.random.default_rng(5).integers(1, 19)) * 25)  # (unit key, step) to pass before the kill

    process = grokking_unit(out, GROKKING, STREAMING)
    while unit_progress(state) < target and process.poll() is None:
        time.sleep(0.01)
    assert process.poll() is None, "the run finished before it could be killed; lengthen it"
    process.kill()
    process.wait()
    killed_at = unit_progress(state)
    rerun = grokking_unit(out, GROKKING, STREAMING)
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr
    assert f"resumed unit (0, 0) at step {killed_at[1]}" in stdout
    for name in ("curves", "summary"):
        ours = pd.read_csv(out / f"{name}.csv")
        theirs = pd.read_csv(reference / "units" / STREAMING / "seed0" / f"{name}.csv")
        pd.testing.assert_frame_equal(
            ours.drop(columns=list(VOLATILE_COLUMNS), errors="ignore"),
            theirs.drop(columns=list(VOLATILE_COLUMNS), errors="ignore"),
            check_exact=True,
        )
    assert not state.parent.exists()


GROW = {
    "family": "llama",
    "dataset": "shakespeare",
    "width": 16,
    "base_depth": 1,
    "blocks": 1,
    "deeper_depth": 2,
    "seeds": [0],
    "select_examples": 16,
    "model": {"head_dim": 8, "context": 16},
    "train": {
        "steps": 120,
        "batch_size": 8,
        "lr": 0.003,
        "warmup_steps": 5,
        "eval_every": 20,
        "eval_examples": 16,
        "resume_every": 10,
    },
}


def test_sigkill_inside_a_growth_comparison_then_rerun_is_bit_identical(text, tmp_path):
    """Six units per seed (base phase, three continuations from the fork, scratch, deeper); killed inside one
    of the later units, the rerun keeps the finished ones and continues the interrupted one."""
    import pandas as pd

    from growcert.stages.grow import grow_and_compare

    reference = tmp_path / "reference"
    grow_and_compare(GROW, load_prepared(text), reference, log=lambda _: None, device="cpu")
    out = tmp_path / "grow"
    state = resume_folder(out) / "state.pt"
    target = (int(np.random.default_rng(11).integers(2, 6)), 30)  # (unit index, step) to pass before the kill

    command = [
        sys.executable,
        "-m",
        "growcert.cli",
        "grow",
        "--data",
        str(text),
        "--settings",
        json.dumps(GROW),
        "--out",
        str(out),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while unit_progress(state) < target and process.poll() is None:
        time.sleep(0.01)
    assert process.poll() is None, "the comparison finished before it could be killed; lengthen it"
    process.kill()
    process.wait()
    killed_at = unit_progress(state)
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resumed unit (0, {killed_at[0]}) at step {killed_at[1]}" in rerun.stdout
    for name in ("growth", "selection"):
        pd.testing.assert_frame_equal(
            pd.read_csv(out / f"{name}.csv"), pd.read_csv(reference / f"{name}.csv"), check_exact=True
        )
    assert not resume_folder(out).exists()


def test_sigkill_during_a_dump_then_rerun_writes_the_same_store(text, uninterrupted, tmp_path):
    """A dump is short and deterministic: killed, it leaves only `<store>.partial`, which no reader takes for a
    store; the rerun starts over and writes every array exactly as an uninterrupted dump does."""
    import xarray as xr

    from growcert.store import open_store

    settings = {"train_examples": 256, "test_examples": 256, "batch_size": 8}

    def dump_command(out) -> list[str]:
        return [
            sys.executable,
            "-m",
            "growcert.cli",
            "dump",
            "--checkpoint",
            str(uninterrupted / "step400.pt"),
            "--data",
            str(text),
            "--settings",
            json.dumps(settings),
            "--out",
            str(out),
        ]

    reference = tmp_path / "reference.zarr"
    subprocess.run(dump_command(reference), check=True, capture_output=True)
    store = tmp_path / "killed.zarr"
    command = dump_command(store)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    partial = store.with_name(store.name + ".partial")
    while not (partial / "block0").exists() and process.poll() is None:
        time.sleep(0.005)
    time.sleep(float(np.random.default_rng(3).uniform(0.0, 0.3)))
    assert process.poll() is None, "the dump finished before it could be killed; dump more examples"
    process.kill()
    process.wait()
    assert not store.exists() and partial.exists()  # killed before the rename: no store, only the partial
    assert subprocess.run(command, capture_output=True).returncode == 0 and not partial.exists()
    for group in open_store(reference).attrs["groups"]:
        ours = xr.open_zarr(store, group=group, consolidated=False)
        theirs = xr.open_zarr(reference, group=group, consolidated=False)
        for variable in ("q", "z", "loss", "label", "index"):
            assert np.array_equal(ours[variable].values, theirs[variable].values, equal_nan=False), (group, variable)
        assert (ours["split"].values == theirs["split"].values).all()
