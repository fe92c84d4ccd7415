"""`growcert compare-results`: two results folders compared table by table, store array by array and
checkpoint by checkpoint, exactly; a single changed bit anywhere is named, timing columns are not."""

import shutil

import numpy as np
import pandas as pd
import pytest
import torch
import zarr

from growcert.cli import main


def results_folder(root):
    """A results folder with one of each: a table, a two-level zarr store, a growcert-style checkpoint,
    and what the comparison must skip (benchmarks, logs, hidden markers)."""
    (root / "stats").mkdir(parents=True)
    pd.DataFrame({"width": [16, 32], "d_align": [0.25, np.nan], "seconds": [1.5, 2.5]}).to_csv(
        root / "stats" / "alignment.csv", index=False
    )
    store = zarr.open_group(root / "grads" / "w16" / "step20.zarr", mode="w")
    store.create_group("block0").create_array("q", data=np.linspace(0, 1, 24, dtype=np.float32).reshape(4, 6))
    store.attrs["provenance"] = {"device": "cpu"}
    (root / "models" / "w16").mkdir(parents=True)
    torch.save(
        {
            "format": "growcert-checkpoint-1",
            "state_dict": {"weight": torch.arange(6.0).reshape(2, 3)},
            "provenance": {"device": "cpu"},
        },
        root / "models" / "w16" / "step20.pt",
    )
    for skipped in ("benchmarks", "logs"):
        (root / skipped).mkdir()
        (root / skipped / "train.csv").write_text(f"s\n{np.random.rand()}\n")
    (root / "models" / "w16" / ".snakemake_timestamp").write_text("x")
    return root


@pytest.fixture
def pair(tmp_path):
    first = results_folder(tmp_path / "a")
    second = tmp_path / "b"
    shutil.copytree(first, second)
    return first, second


def compare(first, second, capsys):
    status = main(["compare-results", str(first), str(second)])
    return status, capsys.readouterr().out


def test_a_copy_is_identical_and_timing_columns_provenance_and_logs_are_not_compared(pair, capsys):
    first, second = pair
    table = pd.read_csv(second / "stats" / "alignment.csv")
    table["seconds"] = [9.0, 9.0]
    table.to_csv(second / "stats" / "alignment.csv", index=False)
    zarr.open_group(second / "grads" / "w16" / "step20.zarr", mode="r+").attrs["provenance"] = {"device": "cuda"}
    checkpoint = torch.load(second / "models" / "w16" / "step20.pt", weights_only=False)
    torch.save({**checkpoint, "provenance": {"device": "cuda"}}, second / "models" / "w16" / "step20.pt")
    status, out = compare(first, second, capsys)
    assert status == 0, out
    assert out.splitlines() == [f"{first} vs {second}: 3 identical, 0 differ, 0 in one folder only"]


def test_one_ulp_anywhere_is_named(pair, capsys):
    first, second = pair
    table = pd.read_csv(second / "stats" / "alignment.csv")
    table.loc[0, "d_align"] = np.nextafter(0.25, 1.0)
    table.to_csv(second / "stats" / "alignment.csv", index=False)
    q = zarr.open_group(second / "grads" / "w16" / "step20.zarr", mode="r+")["block0/q"]
    q[3, 5] = np.nextafter(np.float32(1.0), np.float32(2.0))
    checkpoint = torch.load(second / "models" / "w16" / "step20.pt", weights_only=False)
    checkpoint["state_dict"]["weight"][1, 2] = torch.nextafter(torch.tensor(5.0), torch.tensor(6.0))
    torch.save(checkpoint, second / "models" / "w16" / "step20.pt")
    status, out = compare(first, second, capsys)
    assert status == 1
    lines = out.splitlines()
    assert lines[0].endswith("0 identical, 3 differ, 0 in one folder only")
    assert "differs: stats/alignment.csv: values differ in column(s) d_align" in lines
    assert "differs: grads/w16/step20.zarr: values differ in block0/q" in lines
    assert "differs: models/w16/step20.pt: 1 tensor(s) differ, first weight" in lines


def test_shape_rows_and_files_in_one_folder_only_are_reported(pair, capsys):
    first, second = pair
    pd.read_csv(second / "stats" / "alignment.csv").iloc[:1].to_csv(second / "stats" / "alignment.csv", index=False)
    (second / "stats" / "extra.csv").write_text("a\n1\n")
    status, out = compare(first, second, capsys)
    assert status == 1
    assert "differs: stats/alignment.csv: 2 rows against 1" in out and "only in one: stats/extra.csv" in out


def test_a_missing_folder_is_one_line_and_exit_2(tmp_path, capsys):
    results_folder(tmp_path / "a")
    status = main(["compare-results", str(tmp_path / "a"), str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and f"results folder {tmp_path / 'nowhere'}: no such folder" in err
