"""Preemption inside a PINN unit (one arm at one seed), inside a DPO arm, and between two theory cases: SIGTERM's stop
request at a chosen step of a chosen arm saves a resume state and raises `Interrupted`; the rerun takes the finished
arms from that state, continues the interrupted arm from its snapshot, and writes the same tables as an uninterrupted
run (timing aside).

The stop request is raised in process, through `UnitResume.tick` exactly where SIGTERM's handler would have set
it (tests/faults/test_resume.py kills real subprocesses of `growcert train`, `grow` and `grokking`; this file
covers the two experiments whose arms snapshot themselves the same way, and theory, resumed case by case)."""

from __future__ import annotations

import pandas as pd
import pytest

from growcert.experiments.pinn import run_pinn
from growcert.experiments.preference import run_preference
from growcert.experiments.theory import run_theory
from growcert.resume import Interrupted, UnitResume, resume_folder
from growcert.store.compare import VOLATILE_COLUMNS

PINN = {
    "ic_points": 32,
    "collocation_points": 64,
    "boundary_points": 16,
    "batch_size": 24,
    "width": 8,
    "depth": 2,
    "steps": 60,
    "eval_every": 10,
    "seeds": [0],
    "adamw_lrs": [1e-2],
    "resume_every": 7,
    # a microbatch arm measures its variance ratio every 3 steps: pending diagnostics cross the snapshots
    "poprisk": {"lrs": [1e-2], "gates": ["update"], "variances": ["microbatch"]},
    "diagnostics_every": 3,
}
THEORY = {
    "snapshots": 2,
    "seeds": [0, 1],
    "digits": {"train_size": 8, "test_size": 12, "input_dim": 3, "width": 2, "steps": 20, "lr": 0.05},
    "regression": {"train_size": 12, "test_size": 20, "width": 2, "steps": 30},
    "sgd": {"batch_size": 3, "steps": 16, "replicates": 2, "fit_from": 2},
}
PREFERENCE = {
    "pairs_train": 24,
    "pairs_test": 12,
    "prompt_bytes": 8,
    "continuation_bytes": 8,
    "steps": 12,
    "batch_size": 8,
    "eval_every": 4,
    "seeds": [0],
    "lr": 3e-3,
    "resume_every": 5,
    "poprisk": {"gates": ["update"], "variances": ["microbatch"]},
    "diagnostics_every": 3,
}


@pytest.fixture
def stop_at(monkeypatch):
    """stop_at(unit, step): the run's stop request is set when that unit reaches that step, as SIGTERM would."""
    ticks = []

    def arm(unit: int | str, step: int) -> list[tuple]:
        """`unit`: the arm's index in a run of several (its resume key), or a P2 unit's folder name (its own job)."""
        real_tick = UnitResume.tick

        def tick(self, current, snapshot):
            ticks.append((self.key, current))
            here = unit in self.folder.path.parts if isinstance(unit, str) else self.key[1] == unit
            if here and current == step and self.stop is not None:
                self.stop.requested = True
            return real_tick(self, current, snapshot)

        monkeypatch.setattr(UnitResume, "tick", tick)
        return ticks

    return arm


def assert_same_tables(out, reference):
    for name in ("curves", "summary"):
        ours, theirs = pd.read_csv(out / f"{name}.csv"), pd.read_csv(reference / f"{name}.csv")
        pd.testing.assert_frame_equal(
            ours.drop(columns=list(VOLATILE_COLUMNS), errors="ignore"),
            theirs.drop(columns=list(VOLATILE_COLUMNS), errors="ignore"),
            check_exact=True,
        )
    assert not resume_folder(out).exists()


def interrupt_then_resume(run, out, stop_at, monkeypatch, unit, step, logs):
    stop_at(unit, step)
    with pytest.raises(Interrupted, match=rf"unit \(0, {unit}\) after step {step}"):
        run(out)
    assert (resume_folder(out) / "state.pt").is_file() and not (out / "summary.csv").exists()
    monkeypatch.undo()  # the rerun: no stop request
    run(out)
    assert f"resumed unit (0, {unit}) at step {step}" in "\n".join(logs)


def test_sigterm_inside_a_pinn_unit_then_rerun_gives_the_same_tables(tmp_path, stop_at, monkeypatch):
    """The whole task in one process (`run_pinn`, every unit in turn): stopped inside its second unit, the rerun
    keeps the finished first unit and continues the second from the snapshot in its own folder."""
    run_pinn(PINN, tmp_path / "reference", log=lambda _: None, threads=1, device="cpu")
    logs = []
    out = tmp_path / "killed"
    second = "poprisk-update-microbatch-wd0-lr0.01"
    state = out / "units" / second / "seed0" / ".resume" / "state.pt"
    stop_at(second, 23)  # between two snapshots and two evaluations
    with pytest.raises(Interrupted, match=r"unit \(0, 0\) after step 23"):
        run_pinn(PINN, out, log=logs.append, threads=1, device="cpu")
    assert state.is_file() and (out / "units" / "AdamW-lr0.01" / "seed0" / "summary.csv").is_file()
    assert not (out / "summary.csv").exists()
    monkeypatch.undo()  # the rerun: no stop request
    run_pinn(PINN, out, log=logs.append, threads=1, device="cpu")
    log = "\n".join(logs)
    assert "unit AdamW-lr0.01 seed 0: finished" in log and "resumed unit (0, 0) at step 23" in log
    assert_same_tables(out, tmp_path / "reference")
    assert (pd.read_csv(out / "summary.csv")["cpu_seconds"] > 0).all()  # each unit's own CPU time, every part's
    assert not state.parent.exists()


def test_sigterm_inside_a_dpo_arm_then_rerun_gives_the_same_tables(
    tmp_path, prepared, train_tiny, stop_at, monkeypatch
):
    text = prepared("shakespeare")
    train_tiny(text, tmp_path / "ref", "llama", "shakespeare", 16, 1)
    logs = []

    def run(out, log=logs.append):
        run_preference(
            PREFERENCE, out, log=log, threads=1, reference_checkpoint=tmp_path / "ref", data=text, device="cpu"
        )

    run(tmp_path / "reference", log=lambda _: None)
    # inside the second arm, after the gate has taken readings since the last evaluation (step 8)
    interrupt_then_resume(run, tmp_path / "killed", stop_at, monkeypatch, unit=1, step=10, logs=logs)
    assert_same_tables(tmp_path / "killed", tmp_path / "reference")


def test_sigterm_between_theory_cases_then_rerun_gives_the_same_tables(tmp_path, monkeypatch):
    run_theory(THEORY, tmp_path / "reference", log=lambda _: None, threads=1, device="cpu")
    real_finished, finished = UnitResume.finished, []

    def finished_then_stop(self, result):  # SIGTERM arrives during the second seed's first case
        finished.append(self.key)
        if self.key == (1, 0):
            self.stop.requested = True
        return real_finished(self, result)

    monkeypatch.setattr(UnitResume, "finished", finished_then_stop)
    out = tmp_path / "killed"
    with pytest.raises(Interrupted, match=r"after unit \(1, 0\)"):
        run_theory(THEORY, out, log=lambda _: None, threads=1, device="cpu")
    monkeypatch.undo()
    cases = len(finished)
    assert cases == 4 and not (out / "summary.csv").exists()
    rerun = []
    monkeypatch.setattr(
        UnitResume, "finished", lambda self, result: rerun.append(self.key) or real_finished(self, result)
    )
    run_theory(THEORY, out, log=lambda _: None, threads=1, device="cpu")
    assert rerun == [(1, 1), (1, 2)]  # only the cases the killed run had not finished
    for name in ("summary", "spectrum", "drift"):
        pd.testing.assert_frame_equal(
            pd.read_csv(out / f"{name}.csv"), pd.read_csv(tmp_path / "reference" / f"{name}.csv"), check_exact=True
        )
    assert not resume_folder(out).exists()


def test_a_resumed_grokking_unit_counts_the_cpu_time_of_its_killed_part(tmp_path, stop_at, monkeypatch):
    """The unit's own CPU time (summary `cpu_seconds`) is every session part's: the resume state carries the CPU
    seconds spent before the stop, here set to 1,000 as a long killed part would have left them, and the rerun adds
    its own to them (Snakemake's benchmark file sees the rerun's job alone)."""
    import json

    import torch

    from growcert import cli

    settings = {
        "p": 11,
        "train_fraction": 0.6,
        "seeds": [0],
        "steps": 40,
        "batch_size": 16,
        "eval_every": 10,
        "stop_at_test_acc": None,
        "model": {"width": 16, "depth": 1, "heads": 2},
        "resume_every": 5,
        "adamw": {"weight_decays": [0.1]},
        "grokfast": {"enabled": False},
        "poprisk": {"weight_decays": []},
    }
    out = tmp_path / "units" / "AdamW_wd_0.1" / "seed0"
    arguments = [
        "grokking",
        "--settings",
        json.dumps(settings),
        "--arm",
        "AdamW_wd_0.1",
        "--seed",
        "0",
        "--out",
        str(out),
    ]
    stop_at("AdamW_wd_0.1", 23)
    assert cli.main(arguments) != 0  # stopped, its state saved
    state = out / ".resume" / "state.pt"  # a unit's own folder holds its state
    saved = torch.load(state, weights_only=False)
    arm = saved["current"]["snapshot"]  # the interrupted arm's snapshot (growcert.experiments.arms.arm_snapshot)
    assert 0 < arm["cpu_elapsed"] < 60
    arm["cpu_elapsed"] += 1000.0
    torch.save(saved, state)
    monkeypatch.undo()
    assert cli.main(arguments) == 0
    cpu = float(pd.read_csv(out / "summary.csv")["cpu_seconds"].iloc[0])
    assert 1000 < cpu < 1060
