"""The gradient store: round trip, determinism, chunking, and refusal of incomplete or corrupt stores."""

import errno
import json
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
import xarray as xr
import zarr
from helpers import relative_error

from growcert.config import stage_settings
from growcert.models import family_of
from growcert.stages.dump import dump_gradients
from growcert.stages.train import train_model
from growcert.store import (
    FORMAT,
    MIN_CHUNK_BYTES,
    GroupSpec,
    StoreError,
    StoreWriter,
    iter_sample_chunks,
    open_group,
    open_store,
    position_attrs,
    sample_chunk,
    store_attrs,
    variable_attrs,
)
from growcert.store.encoding import StoreOptions, shard_samples
from growcert.store.format import compressors

SPECS = [
    GroupSpec("block0", ("channel", "height", "width"), (4, 8, 8), ("height", "width")),
    GroupSpec("block1", ("channel", "height", "width"), (8, 4, 4), ("height", "width")),
]


def small_writer(path, n=40, min_chunk_bytes=4096):
    split = np.array(["train"] * (n // 2) + ["test"] * (n - n // 2), dtype=object)
    return StoreWriter(
        path, SPECS, split, np.arange(n), np.arange(n) % 10, {"family": "resnet"}, min_chunk_bytes=min_chunk_bytes
    )


def fill(writer, seed=0):
    rng = np.random.default_rng(seed)
    values = {
        spec.name: {
            "q": rng.standard_normal((writer.n, *spec.shape), dtype=np.float32),
            "z": rng.standard_normal((writer.n, *spec.shape), dtype=np.float32),
            "loss": rng.random(writer.n, dtype=np.float32),
        }
        for spec in SPECS
    }
    for group, variables in values.items():
        chunk = writer.chunks[group]
        for start in range(0, writer.n, chunk * 2):  # two chunks per write, the last one short
            stop = min(start + chunk * 2, writer.n)
            writer.write(group, start, {v: a[start:stop] for v, a in variables.items()})
    return values


def test_round_trip_through_xarray(tmp_path):
    writer = small_writer(tmp_path / "s.zarr")
    assert writer.chunks == {"block0": 4, "block1": 8}  # 4096 bytes / (1024 and 512 bytes per example)
    values = fill(writer)
    writer.finish()
    for spec in SPECS:
        opened = xr.open_zarr(tmp_path / "s.zarr", group=spec.name, consolidated=False)  # the user's way
        for variable in ("q", "z", "loss"):
            np.testing.assert_array_equal(opened[variable].values, values[spec.name][variable])
        assert opened["q"].dims == ("sample", *spec.dims)
        assert opened["q"].encoding["chunks"] == (writer.chunks[spec.name], *spec.shape)
        assert list(np.asarray(opened["split"].values).astype(object)[[0, 39]]) == ["train", "test"]
        assert opened.attrs["complete"] is True and opened.attrs["insertion_point"] == spec.name


def node_by_node(path, n, split, index, label, attrs, options, values, min_chunk_bytes=4096):
    """The store as zarr's one-call-per-node API writes it straight to disk (how StoreWriter built it before its
    template moved to memory): every array created, filled and marked complete one call at a time."""
    described = variable_attrs("the loss of the example alone (root attr loss_function)")
    root = zarr.open_group(path, mode="w", zarr_format=3)
    root.attrs.update(
        {**attrs, **options.attrs, "format": FORMAT, "groups": [spec.name for spec in SPECS], "complete": False}
    )
    for spec in SPECS:
        chunk = sample_chunk(spec, n, min_chunk_bytes, options.itemsize)
        shard = (shard_samples(chunk, n, options), *spec.shape) if options.shards else None
        group = root.create_group(spec.name, attributes={"insertion_point": spec.name, "complete": False})
        for variable in options.variables:
            group.create_array(
                variable,
                shape=(n, *spec.shape),
                chunks=(chunk, *spec.shape),
                shards=shard,
                dtype=options.zarr_dtype,
                fill_value=options.fill_value,
                compressors=compressors(),
                dimension_names=("sample", *spec.dims),
                attributes={**described[variable], "coordinates": "split index label loss", **options.array_attrs},
            )
            group[variable][:] = options.encode(values[spec.name][variable])
        for variable, small, dtype in (
            ("loss", values[spec.name]["loss"], "float32"),
            ("split", split, str),
            ("index", index, "int64"),
            ("label", label, "int64"),
        ):
            group.create_array(
                variable,
                shape=(n,),
                chunks=(n,),
                dtype=dtype,
                compressors=compressors(),
                dimension_names=("sample",),
                attributes=described[variable],
                **({"fill_value": np.nan} if variable == "loss" else {}),
            )
            group[variable][:] = small
        for dim in spec.positions:
            size = spec.shape[spec.dims.index(dim)]
            group.create_array(
                dim,
                shape=(size,),
                chunks=(size,),
                dtype="int64",
                compressors=compressors(),
                dimension_names=(dim,),
                attributes=position_attrs(dim),
            )
            group[dim][:] = np.arange(size)
    for spec in SPECS:
        zarr.open_group(path / spec.name, mode="r+").attrs["complete"] = True
    root.attrs["complete"] = True


@pytest.mark.parametrize("n", [80, 83])
@pytest.mark.parametrize(
    "options",
    [StoreOptions(), StoreOptions(("q",), "bfloat16", 2), StoreOptions(shards=8)],
    ids=["float32", "bf16-q-shards", "float32-shards"],
)
def test_writer_files_equal_a_node_by_node_zarr_store_byte_for_byte(tmp_path, options, n):
    """StoreWriter builds its template in memory, writes it in one batch, and writes the chunks and shards
    itself (store.chunks), a shard once all its chunks have come: none of it may change a byte of the store,
    a last chunk or shard past the end included (83 samples; 8 chunks per shard leave inner chunks wholly past
    the end, which zarr does not write)."""
    split = np.array(["train"] * 50 + ["test"] * (n - 50), dtype=object)
    index, label = np.arange(n) * 3, np.arange(n) % 10
    rng = np.random.default_rng(1)
    values = {
        spec.name: {
            "q": rng.standard_normal((n, *spec.shape), dtype=np.float32),
            "z": rng.standard_normal((n, *spec.shape), dtype=np.float32),
            "loss": rng.random(n, dtype=np.float32),
        }
        for spec in SPECS
    }
    writer = StoreWriter(
        tmp_path / "ours.zarr", SPECS, split, index, label, {"family": "resnet"}, min_chunk_bytes=4096, options=options
    )
    chunk = writer.chunks
    # chunks in reverse order: a shard's file is written once all its chunks have come, in any order
    writer.write_many(
        [
            (group, start, {v: a[start : start + chunk[group]] for v, a in variables.items()})
            for group, variables in values.items()
            for start in reversed(range(0, n, chunk[group]))
        ]
    )
    writer.finish()
    node_by_node(tmp_path / "theirs.zarr", n, split, index, label, {"family": "resnet"}, options, values)
    ours, theirs = (
        {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        for root in (tmp_path / "ours.zarr", tmp_path / "theirs.zarr")
    )
    assert sorted(ours) == sorted(theirs) and len(ours) > 20
    assert [name for name in ours if ours[name] != theirs[name]] == []


def test_misaligned_write_is_refused(tmp_path):
    writer = small_writer(tmp_path / "s.zarr")
    with pytest.raises(ValueError, match="block1 is not aligned to chunks of 8"):
        writer.write("block1", 3, {"q": np.zeros((5, 8, 4, 4), np.float32)})
    with pytest.raises(ValueError, match="not aligned"):
        writer.write("block1", 0, {"q": np.zeros((5, 8, 4, 4), np.float32)})  # ends inside a chunk


def test_chunks_hold_at_least_a_megabyte():
    big = [GroupSpec("block0", ("token", "feature"), (64, 128))]  # 32 KiB per example
    assert sample_chunk(big[0], 10_000) * 64 * 128 * 4 >= MIN_CHUNK_BYTES
    assert (sample_chunk(big[0], 10_000) - 1) * 64 * 128 * 4 < MIN_CHUNK_BYTES
    assert sample_chunk(big[0], 10) == 10  # a store smaller than a megabyte is one chunk


def test_interrupted_writer_leaves_nothing_readable(tmp_path):
    path = tmp_path / "s.zarr"
    writer = small_writer(path)
    fill(writer)  # ... and the process dies before finish()
    with pytest.raises(StoreError, match="does not exist.*partial write exists") as caught:
        open_store(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    # Someone copies the partial folder into place by hand: still refused, it never got complete=true.
    (tmp_path / "s.zarr.partial").rename(path)
    with pytest.raises(StoreError, match="incomplete"):
        open_group(path, "block0")


def test_finish_requires_every_sample(tmp_path):
    writer = small_writer(tmp_path / "s.zarr")
    for group in SPECS:
        writer.write(group.name, 0, {v: np.zeros((16, *group.shape), np.float32) for v in ("q", "z")})
    with pytest.raises(StoreError, match="only 16 of 40 samples written to block0"):
        writer.finish()


def test_corrupted_chunk_names_the_store(tmp_path):
    path = tmp_path / "s.zarr"
    writer = small_writer(path)
    fill(writer)
    writer.finish()
    chunk_files = sorted((path / "block1" / "q" / "c").rglob("*"))
    victim = next(p for p in chunk_files if p.is_file())
    victim.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(StoreError) as caught:
        list(iter_sample_chunks(path, "block1", "q"))
    message = str(caught.value)
    assert str(path) in message and "block1/q" in message and "unreadable" in message and "\n" not in message


def test_wrong_folder_and_missing_group(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(StoreError, match="not a Zarr v3 group|format"):
        open_store(tmp_path / "plain")
    writer = small_writer(tmp_path / "s.zarr")
    fill(writer)
    writer.finish()
    with pytest.raises(StoreError, match="no group 'block9'"):
        open_group(tmp_path / "s.zarr", "block9")


@pytest.fixture(scope="module")
def checkpoint(prepared, tmp_path_factory):
    settings = {
        "family": "resnet",
        "dataset": "digits",
        "width": 1,
        "depth": 8,
        "seed": 0,
        "model": {},
        "train": {
            "steps": 5,
            "batch_size": 16,
            "lr": 0.003,
            "weight_decay": 0.0,
            "betas": [0.9, 0.95],
            "warmup_steps": 1,
            "grad_clip": 1.0,
            "save_steps": [5],
            "eval_every": 5,
            "eval_examples": 16,
            "single_pass": True,
        },
    }
    folder = tmp_path_factory.mktemp("run")
    train_model(settings, prepared("digits"), folder, log=lambda _: None, device="cpu")
    return folder / "step5.pt"


def test_two_dumps_are_identical(prepared, checkpoint, tmp_path):
    settings = {"train_examples": 100, "test_examples": 60, "batch_size": 32, "seed": 0, "points": None}
    for name in ("a.zarr", "b.zarr"):
        dump_gradients(
            checkpoint,
            prepared("digits"),
            tmp_path / name,
            stage_settings("dump", settings),
            log=lambda _: None,
            device="cpu",
        )
    groups = zarr.open_group(tmp_path / "a.zarr", mode="r").attrs["groups"]
    assert len(groups) == 4
    for group in groups:
        a, b = open_group(tmp_path / "a.zarr", group), open_group(tmp_path / "b.zarr", group)
        for variable in ("q", "z", "loss", "label", "index"):
            np.testing.assert_array_equal(a[variable].values, b[variable].values)
        assert np.array_equal(
            np.asarray(a["split"].values).astype(object), np.asarray(b["split"].values).astype(object)
        )


def test_a_memory_cap_only_lowers_the_batch_and_the_store_is_that_batch_size_s(prepared, checkpoint, tmp_path):
    settings = {"train_examples": 40, "test_examples": 24, "batch_size": 32, "seed": 0, "points": None}
    dump_gradients(
        checkpoint,
        prepared("digits"),
        tmp_path / "whole.zarr",
        stage_settings("dump", settings),
        log=lambda _: None,
        device="cpu",
    )
    groups = zarr.open_group(tmp_path / "whole.zarr", mode="r").attrs["groups"]
    # q and z in float32 at every point: the bytes one example captures; a cap of 3.5 of them allows 3
    per_example = sum(8 * int(np.prod(open_group(tmp_path / "whole.zarr", g)["q"].shape[1:])) for g in groups)
    lines = []
    dump_gradients(
        checkpoint,
        prepared("digits"),
        tmp_path / "capped.zarr",
        stage_settings("dump", {**settings, "max_batch_mb": 3.5 * per_example / 2**20}),
        log=lines.append,
        device="cpu",
    )
    assert any("in batches of 3 (dump.batch_size 32" in line for line in lines), lines
    # the cap does nothing but choose the batch: bit for bit the store of batch_size 3
    dump_gradients(
        checkpoint,
        prepared("digits"),
        tmp_path / "three.zarr",
        stage_settings("dump", {**settings, "batch_size": 3}),
        log=lambda _: None,
        device="cpu",
    )
    for group in groups:
        whole, capped, three = (open_group(tmp_path / f"{name}.zarr", group) for name in ("whole", "capped", "three"))
        for variable in ("q", "z", "loss", "label", "index"):
            np.testing.assert_array_equal(capped[variable].values, three[variable].values)
        for variable in ("label", "index"):
            np.testing.assert_array_equal(capped[variable].values, whole[variable].values)
        # against batches of 32, only the CPU's batched convolution kernels round differently (float32)
        for variable in ("q", "z", "loss"):
            assert relative_error(capped[variable].values, whole[variable].values) < 1e-5, (group, variable)


def test_cli_dump_and_inspect(prepared, checkpoint, tmp_path):
    from growcert.data import prepare_dataset

    prepare_dataset("digits", tmp_path / "digits", {})
    store = tmp_path / "x.zarr"
    command = [sys.executable, "-m", "growcert.cli"]
    settings = (
        '{"train_examples": 40, "test_examples": 30, "batch_size": 16, "seed": 0, "points": ["block0", "block3"]}'
    )
    done = subprocess.run(
        [
            *command,
            "dump",
            "--checkpoint",
            str(checkpoint),
            "--data",
            str(tmp_path / "digits"),
            "--settings",
            settings,
            "--out",
            str(store),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    shown = subprocess.run([*command, "inspect", str(store)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    for expected in (
        "group block0",
        "group block3",
        "compression",
        "chunks",
        "q[train]: n=40",
        "q[test]: n=30",
        "mean ||q_i||",
        "||mean q||",
        "provenance: code",
    ):
        assert expected in shown.stdout, expected
    assert "group block1" not in shown.stdout
    missing = subprocess.run([*command, "inspect", str(tmp_path / "nope.zarr")], capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "nope.zarr" in missing.stderr
    described = subprocess.run([*command, "inspect", "--json", str(store)], capture_output=True, text=True)
    assert described.returncode == 0, described.stderr
    parsed = json.loads(described.stdout)
    assert list(parsed["groups"]) == ["block0", "block3"] and parsed["complete"] is True
    q = xr.open_zarr(store, group="block3", consolidated=False)["q"]  # the truth the JSON must describe
    assert parsed["groups"]["block3"]["variables"]["q"]["shape"] == list(q.shape)
    assert parsed["groups"]["block3"]["variables"]["q"]["dims"] == list(q.dims)
    train = np.asarray(q.values)[:40].reshape(40, -1).astype(np.float64)
    summary = parsed["groups"]["block3"]["q_summary"]["train"]
    assert summary["n"] == 40 and np.isclose(summary["mean_norm_q"], np.linalg.norm(train, axis=1).mean(), rtol=1e-9)
    assert np.isclose(summary["norm_mean_q"], np.linalg.norm(train.mean(axis=0)), rtol=1e-9)


def test_open_datatree_gives_one_node_per_point_without_warnings(prepared, checkpoint, tmp_path):
    """xarray users open a whole store as a DataTree: one node per insertion point, docs/design.md §5's variables and
    dims, and no warning (a foreign file inside the store would make zarr warn on every open). split, index, label
    and loss are coordinates of `sample` (so q carries them), height and width have positions, and q, z and loss
    say what they are: the selections an xarray user writes work on the plain tree."""
    import warnings

    store = tmp_path / "tree.zarr"
    dump_gradients(
        checkpoint,
        prepared("digits"),
        store,
        stage_settings("dump", {"train_examples": 8, "test_examples": 6, "batch_size": 8}),
        log=lambda _: None,
        device="cpu",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tree = xr.open_datatree(store, engine="zarr", consolidated=False)
    assert sorted(tree.children) == sorted(open_store(store).attrs["groups"])
    for name, node in tree.children.items():
        dataset = node.to_dataset()
        assert set(dataset.data_vars) == {"q", "z"}
        assert set(dataset["q"].coords) == {"split", "index", "label", "loss", "height", "width"}
        assert all(dataset[c].dims == ("sample",) for c in ("split", "index", "label", "loss"))
        assert dataset["q"].dims == ("sample", "channel", "height", "width") == dataset["z"].dims
        assert list(dataset["width"].values) == list(range(dataset.sizes["width"])) and "channel" not in dataset.coords
        assert dataset["loss"].dims == ("sample",) and dataset.sizes["sample"] == 14
        assert np.array_equal(dataset["q"].values, open_group(store, name)["q"].values)
        for variable in ("q", "z", "loss"):
            assert {"long_name", "units", "description"} <= set(dataset[variable].attrs), variable
        # the reduction and factor in q, from the family's record (resnet: one cross-entropy term per example)
        assert family_of("resnet").loss_description in dataset["q"].attrs["description"]
        # the group holds what differs per group; the root the rest, once
        assert set(node.attrs) == {"insertion_point", "native_dims", "complete"}
        assert node.attrs["insertion_point"] == name
        held_out = dataset.q.sel(sample=dataset.split == "test")
        assert held_out.sizes["sample"] == 6 and set(np.asarray(held_out.split.values).astype(object)) == {"test"}
        means = dataset.q.groupby("split").mean()
        np.testing.assert_allclose(means.sel(split="test").values, dataset.q.values[8:].mean(axis=0), rtol=1e-6)
        assert dataset.set_xindex("split").sel(split="train").sizes["sample"] == 8
    assert tree.attrs["family"] == "resnet" and tree.attrs["format"] == "growcert-gradient-store-2"


def test_a_failed_write_in_the_writer_thread_stops_the_dump_and_a_rerun_writes_the_same_store(
    prepared, checkpoint, tmp_path, monkeypatch
):
    """The dump's background writer fails on its second batch (a full disk) while passes go on: the error
    surfaces in the dump (no hang), no writer thread outlives it, nothing looks complete, and a rerun
    starts over and writes exactly the store of an undisturbed dump."""
    # 1024 examples in batches of 128: block0 and block1 fill a 256-sample chunk every second batch
    settings = {"train_examples": 600, "test_examples": 424, "batch_size": 128, "seed": 0, "points": None}
    dump_gradients(
        checkpoint,
        prepared("digits"),
        tmp_path / "reference.zarr",
        stage_settings("dump", settings),
        log=lambda _: None,
        device="cpu",
    )
    real_write_many, calls = StoreWriter.write_many, []

    def full_on_the_second_batch(self, items, workers=None):
        calls.append(len(items))
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write_many(self, items, workers)

    monkeypatch.setattr(StoreWriter, "write_many", full_on_the_second_batch)
    store, failed = tmp_path / "x.zarr", []

    def dump():
        try:
            dump_gradients(
                checkpoint,
                prepared("digits"),
                store,
                stage_settings("dump", settings),
                log=lambda _: None,
                device="cpu",
            )
        except OSError as error:
            failed.append(error)

    worker = threading.Thread(target=dump, daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "the dump hangs after its writer failed"
    assert len(failed) == 1 and "No space left on device" in str(failed[0]) and len(calls) == 2
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("growcert-dump-writer")]
    partial = tmp_path / "x.zarr.partial"
    assert not store.exists() and partial.is_dir()
    assert zarr.open_group(partial, mode="r").attrs["complete"] is False
    with pytest.raises(StoreError, match="partial write exists"):
        open_store(store)
    monkeypatch.undo()
    dump_gradients(
        checkpoint, prepared("digits"), store, stage_settings("dump", settings), log=lambda _: None, device="cpu"
    )
    assert not partial.exists()
    for group in open_store(store).attrs["groups"]:
        ours, theirs = open_group(store, group), open_group(tmp_path / "reference.zarr", group)
        for variable in ("q", "z", "loss", "label", "index"):
            np.testing.assert_array_equal(ours[variable].values, theirs[variable].values)


def test_a_non_finite_value_names_its_point_and_example():
    """The dump's finiteness check looks at each tensor's extremes first; an infinity anywhere is still named
    with its variable, point and example row."""
    from growcert.errors import NumericalError
    from growcert.models.capture import Captured
    from growcert.stages.dump import _check_finite

    z = {"block0": torch.zeros(6, 2, 3), "block1": torch.zeros(6, 4)}
    captured = Captured(z=z, q={name: value.clone() for name, value in z.items()}, loss=torch.zeros(6))
    _check_finite(captured, ("block0", "block1"), "s.zarr", 0)
    captured.z["block1"][4, 2] = -float("inf")
    with pytest.raises(NumericalError, match=r"store s\.zarr: non-finite z at block1 for examples \[14\] \(of 1"):
        _check_finite(captured, ("block0", "block1"), "s.zarr", 10)


def test_a_version_1_store_is_refused_in_one_line_naming_the_command_that_dumps_it_again(tmp_path, capsys):
    """A store of the previous format version (per-sample variables as data, attrs repeated per group) is never
    read as version 2: every opener, `growcert inspect` and a stage stop in one line naming the version and
    the re-dump command, exit status 2."""
    from growcert.cli import main

    path = tmp_path / "s.zarr"
    attrs = {"family": "resnet", "checkpoint": "runs/w1/step5.pt", "dataset": "digits"}
    writer = StoreWriter(
        path,
        SPECS,
        np.array(["train"] * 20 + ["test"] * 20, dtype=object),
        np.arange(40),
        np.arange(40) % 10,
        attrs,
        min_chunk_bytes=4096,
    )
    fill(writer)
    writer.finish()
    zarr.open_group(path, mode="r+").attrs["format"] = "growcert-gradient-store-1"
    for opener in (
        open_store,
        store_attrs,
        lambda p: open_group(p, "block0"),
        lambda p: list(iter_sample_chunks(p, "block0", "q")),
    ):
        with pytest.raises(StoreError) as caught:
            opener(path)
        assert "version 1" in str(caught.value) and "\n" not in str(caught.value)
    alignment = ["estimate-alignment", "--store", str(path), "--out", str(tmp_path / "a.csv")]
    for command in (["inspect", str(path)], alignment):
        assert main(command) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and f"store {path} is of store version 1" in lines[0], lines
        assert f"growcert dump --checkpoint runs/w1/step5.pt --data DATA --out {path}" in lines[0]
    assert not (tmp_path / "a.csv").exists()


def test_open_store_is_the_checked_datatree(tmp_path):
    """`growcert.open_store` returns the plain xarray DataTree of a finished store, and refuses one whose group is
    unfinished or lacks a variable in one line."""
    import growcert

    path = tmp_path / "s.zarr"
    writer = small_writer(path)
    values = fill(writer)
    writer.finish()
    tree = growcert.open_store(path)
    assert isinstance(tree, xr.DataTree) and sorted(tree.children) == ["block0", "block1"]
    np.testing.assert_array_equal(tree["block1"]["q"].values, values["block1"]["q"])
    np.testing.assert_array_equal(tree["block1"]["loss"].values, values["block1"]["loss"])
    assert "loss" in tree["block1"].to_dataset().coords
    zarr.open_group(path / "block1", mode="r+").attrs["complete"] = False
    with pytest.raises(StoreError, match=r"s\.zarr: group 'block1' incomplete$"):
        growcert.open_store(path)
    zarr.open_group(path / "block1", mode="r+").attrs["complete"] = True
    import shutil

    shutil.rmtree(path / "block0" / "label")
    with pytest.raises(StoreError, match=r"group 'block0' lacks label$"):
        growcert.open_store(path)


# Every name `growcert.store` exported when it was one module (the format, the writer and the reader in its
# __init__), before they moved to store.format, store.writer and store.reader: a user's import must not change.
EXPORTED_BEFORE_THE_SPLIT = [
    "ARRAY_VARIABLES",
    "FORMAT",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "IDENTITY",
    "MIN_CHUNK_BYTES",
    "POSITION_NAMES",
    "SAMPLE_VARIABLES",
    "ArrayChunks",
    "GroupSpec",
    "GrowcertError",
    "StoreError",
    "StoreOptions",
    "StoreWriter",
    "chunk_aligned",
    "damaged_chunk",
    "decode_block",
    "decode_dataset",
    "iter_sample_chunks",
    "open_group",
    "open_store",
    "position_attrs",
    "reading",
    "require_variable",
    "sample_chunk",
    "shard_samples",
    "split_of",
    "store_attrs",
    "store_identity",
    "stored_variables",
    "variable_attrs",
]


@pytest.mark.parametrize("name", EXPORTED_BEFORE_THE_SPLIT)
def test_every_name_the_store_exported_still_imports_from_the_package(name):
    import growcert.store

    assert getattr(growcert.store, name) is not None
    assert name in growcert.store.__all__
