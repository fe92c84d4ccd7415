"""A full disk at each write site, and non-finite numbers: one line, exit status 2, and no file a later stage
would read as complete (no store, checkpoint, metrics.json, table or report; no temporary left behind)."""

from __future__ import annotations

import errno
import json

import pandas as pd
import pytest
import torch

from growcert.cli import main
from growcert.data import prepare_dataset

TINY = {
    "family": "resnet",
    "dataset": "digits",
    "width": 1,
    "depth": 8,
    "train": {"steps": 6, "batch_size": 16, "save_steps": [3, 6], "eval_every": 3, "eval_examples": 16},
}


def disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    folder = tmp_path_factory.mktemp("write-faults") / "digits"
    prepare_dataset("digits", folder, {})
    return folder


@pytest.fixture(scope="module")
def trained(digits, tmp_path_factory):
    run = tmp_path_factory.mktemp("write-faults-run") / "run"
    assert main(["train", "--data", str(digits), "--out", str(run), "--settings", json.dumps(TINY)]) == 0
    return run


def one_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def leftovers(folder):
    return sorted(path.name for path in folder.rglob("*") if "partial" in path.name) if folder.exists() else []


def test_disk_full_during_a_checkpoint_save(digits, tmp_path, capsys, monkeypatch):
    real_save = torch.save

    def half_then_full(payload, path, *args, **kwargs):  # a few bytes reach the disk, then it is full
        real_save({"format": "growcert-checkpoint-1"}, path)
        disk_full()

    monkeypatch.setattr(torch, "save", half_then_full)
    run = tmp_path / "run"
    assert main(["train", "--data", str(digits), "--out", str(run), "--settings", json.dumps(TINY)]) == 2
    assert "No space left on device" in one_line(capsys)
    assert not (run / "metrics.json").exists() and not list(run.glob("step*.pt")) and leftovers(tmp_path) == []


def test_disk_full_during_a_dump_leaves_no_store(digits, trained, tmp_path, capsys, monkeypatch):
    from growcert.store import StoreWriter

    monkeypatch.setattr(StoreWriter, "write_many", disk_full)  # the dump's writer thread writes every batch so
    store = tmp_path / "x.zarr"
    assert main(["dump", "--checkpoint", str(trained / "step6.pt"), "--data", str(digits), "--out", str(store)]) == 2
    assert "No space left on device" in one_line(capsys)
    assert not store.exists()  # only the .partial folder, which no reader opens as a store
    assert main(["inspect", str(store)]) == 2 and "partial write exists" in one_line(capsys)


def test_disk_full_during_a_table_and_the_report(digits, trained, tmp_path, capsys, monkeypatch):
    store = tmp_path / "x.zarr"
    assert (
        main(
            [
                "dump",
                "--checkpoint",
                str(trained / "step6.pt"),
                "--data",
                str(digits),
                "--out",
                str(store),
                "--settings",
                json.dumps({"train_examples": 16, "test_examples": 16}),
            ]
        )
        == 0
    )
    capsys.readouterr()
    real_to_csv = pd.DataFrame.to_csv

    def partial_table(self, path, *args, **kwargs):
        real_to_csv(self.head(1), path, *args, **kwargs)
        disk_full()

    monkeypatch.setattr(pd.DataFrame, "to_csv", partial_table)
    table = tmp_path / "alignment.csv"
    assert main(["estimate-alignment", "--store", str(store), "--out", str(table)]) == 2
    assert "No space left on device" in one_line(capsys) and not table.exists() and leftovers(tmp_path) == []
    monkeypatch.undo()

    monkeypatch.setattr("pathlib.Path.write_text", disk_full)
    (tmp_path / "results").mkdir()
    report = tmp_path / "results" / "report.html"
    assert main(["report", "--results", str(tmp_path / "results"), "--out", str(report)]) == 2
    assert "No space left on device" in one_line(capsys) and not report.exists() and leftovers(tmp_path) == []


def test_a_non_finite_training_loss_names_the_run_and_the_step(digits, tmp_path, capsys):
    diverging = {**TINY, "train": {**TINY["train"], "lr": 1e9, "grad_clip": None, "warmup_steps": 0}}
    run = tmp_path / "run"
    assert main(["train", "--data", str(digits), "--out", str(run), "--settings", json.dumps(diverging)]) == 2
    line = one_line(capsys)
    assert "train resnet/digits w1 d8 s0: training loss became" in line and "at step" in line, line
    assert not (run / "metrics.json").exists()


def test_a_non_finite_activation_gradient_is_never_stored(digits, trained, tmp_path, capsys):
    payload = torch.load(trained / "step6.pt", weights_only=False)
    name = next(key for key in payload["state_dict"] if key.endswith("fc.weight") or key.endswith("head.weight"))
    payload["state_dict"][name][0, 0] = float("nan")
    broken = tmp_path / "step6.pt"
    torch.save(payload, broken)
    store = tmp_path / "x.zarr"
    assert main(["dump", "--checkpoint", str(broken), "--data", str(digits), "--out", str(store)]) == 2
    line = one_line(capsys)
    assert f"store {store}: non-finite" in line and "nothing stored" in line, line
    assert not store.exists()
