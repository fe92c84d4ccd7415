"""A damaged gradient store, prepared dataset or checkpoint: every stage that reads it stops in one line that
names the file (for a store: group, variable and sample range), exit status 2, and writes nothing."""

from __future__ import annotations

import json
import shutil
import warnings

import pytest

from growcert.cli import main
from growcert.config import stage_settings
from growcert.data import load_prepared, prepare_dataset
from growcert.stages.alignment import estimate_alignment
from growcert.stages.dump import dump_gradients
from growcert.store import open_store

# Which stages read which variable of a store (`inspect` checks them all).
READERS = {
    "q": ["estimate-alignment", "estimate-misalignment", "estimate-depth", "intervene", "inspect"],
    "z": ["estimate-depth", "intervene", "inspect"],
    "loss": ["intervene", "inspect"],
    "label": ["inspect"],
    "split": ["estimate-alignment", "estimate-depth", "intervene", "inspect"],
    "index": ["intervene", "inspect"],
}
FAMILIES = {"resnet": ("digits", 1, 8), "llama": ("shakespeare", 16, 1)}  # a conv group and a token group


@pytest.fixture(scope="module")
def stores(tmp_path_factory, train_tiny):
    """Per family: prepared data folder, checkpoint, an intact store and its alignment table."""
    made = {}
    for family, (dataset, width, depth) in FAMILIES.items():
        folder = tmp_path_factory.mktemp(f"faults-{family}")
        prepare_dataset(dataset, folder / "data", {})
        checkpoint = train_tiny(load_prepared(folder / "data"), folder / "run", family, dataset, width, depth)
        store = folder / "store.zarr"
        dump_gradients(
            checkpoint,
            load_prepared(folder / "data"),
            store,
            stage_settings("dump", {"train_examples": 16, "test_examples": 16, "batch_size": 8}),
            log=lambda _: None,
            device="cpu",
        )
        estimate_alignment(
            store, {"MK": [[4, 4]], "reference_mk": [4, 4], "replicates": 10}, log=lambda _: None
        ).to_csv(folder / "alignment.csv", index=False)
        made[family] = {"D": folder / "data", "C": checkpoint, "S": store, "A": folder / "alignment.csv"}
    return made


def corrupt(store, group, variable):
    """Overwrite four bytes in the middle of the variable's first chunk file (what a bad disk does)."""
    chunk = sorted(path for path in (store / group / variable / "c").rglob("*") if path.is_file())[0]
    data = bytearray(chunk.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4] = bytes(255 - byte for byte in data[middle : middle + 4])
    chunk.write_bytes(bytes(data))


def command(stage, paths, store, out):
    return {
        "estimate-alignment": ["--store", str(store), "--out", str(out)],
        "estimate-misalignment": [
            "--store",
            str(store),
            "--alignment",
            str(paths["A"]),
            "--out",
            str(out),
            "--settings",
            json.dumps({"MK": [[4, 4]], "reference_mk": [4, 4], "replicates": 10}),
        ],
        "estimate-depth": ["--store", str(store), "--out", str(out)],
        "intervene": [
            "--checkpoint",
            str(paths["C"]),
            "--store",
            str(store),
            "--data",
            str(paths["D"]),
            "--out",
            str(out),
            "--settings",
            json.dumps({"M": 4, "K": 4, "draws": 1, "epsilons": [1e-3]}),
        ],
        "inspect": [str(store)],
    }[stage]


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("variable", list(READERS))
def test_a_corrupt_chunk_is_named_by_every_stage_that_reads_it(stores, family, variable, tmp_path, capsys):
    paths = stores[family]
    store = tmp_path / "store.zarr"
    shutil.copytree(paths["S"], store)
    corrupt(store, "block0", variable)  # block0: the group every reader reads first
    for stage in READERS[variable]:
        out = tmp_path / f"{stage}.csv"
        code = main([stage, *command(stage, paths, store, out)])
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(lines) == 1, (stage, lines)
        assert f"store {store}: block0/{variable} samples [0, " in lines[0] and "damaged" in lines[0], (stage, lines)
        assert not out.exists(), stage


def test_the_package_opener_names_a_damaged_chunk_and_the_raw_tree_is_warning_free(stores, tmp_path):
    from growcert.errors import StoreError
    from growcert.store import reading

    store = tmp_path / "store.zarr"
    shutil.copytree(stores["resnet"]["S"], store)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            sorted(open_store(store).children)
            == ["block0", "block1", "block2", "block3", "block4"][: len(open_store(store).children)]
        )
    corrupt(store, "block1", "q")
    tree = open_store(store)  # lazy: opening reads no chunk
    with pytest.raises(StoreError, match=r"block1/q samples \[0, \d+\) unreadable"), reading(store):
        _ = tree["block1"]["q"].values  # reading the chunk is what raises


def test_a_prepared_dataset_with_a_wrong_checksum_stops_training_in_one_line(stores, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(stores["resnet"]["D"], data)
    info = json.loads((data / "info.json").read_text())
    (data / "info.json").write_text(json.dumps({**info, "arrays_sha256": "0" * 64}))
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--data",
            str(data),
            "--out",
            str(out),
            "--settings",
            json.dumps({"family": "resnet", "dataset": "digits", "width": 1, "depth": 8}),
        ]
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "does not match the sha256" in lines[0] and not out.exists(), lines


@pytest.mark.parametrize("damage", ["truncated", "missing key", "wrong family"])
def test_a_damaged_checkpoint_stops_the_dump_in_one_line_naming_it(stores, tmp_path, capsys, damage):
    import torch

    checkpoint = tmp_path / "step8.pt"
    if damage == "truncated":
        data = stores["resnet"]["C"].read_bytes()
        checkpoint.write_bytes(data[: len(data) // 2])
    else:
        payload = torch.load(stores["resnet"]["C"], weights_only=False)
        if damage == "missing key":
            payload["state_dict"].pop(next(iter(payload["state_dict"])))
        else:
            payload["family"] = "llama"
        torch.save(payload, checkpoint)
    out = tmp_path / "x.zarr"
    code = main(["dump", "--checkpoint", str(checkpoint), "--data", str(stores["resnet"]["D"]), "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and str(checkpoint) in lines[0], lines
    assert not out.exists() and not out.with_name(out.name + ".partial").exists()
