"""Dump options (config key dump: variables, dtype, shards): what each does to the files, that it is recorded in the
attrs, and that every reader (growcert inspect, the package's DataTree opener, the estimators) takes such a store."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import zarr

from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.plan import validate_config
from growcert.schema import load_schema
from growcert.stages.alignment import estimate_alignment
from growcert.stages.depth import estimate_depth
from growcert.stages.dump import dump_gradients
from growcert.store import GroupSpec, StoreError, StoreWriter, iter_sample_chunks, open_group, open_store
from growcert.store.encoding import StoreOptions, bfloat16_bits_to_float32, float32_to_bfloat16_bits

SPEC = GroupSpec("block0", ("channel", "height", "width"), (4, 8, 8))  # 1024 bytes per float32 sample
BASE = {"train_examples": 24, "test_examples": 24, "batch_size": 8, "seed": 0}


def test_bfloat16_rounding_is_torchs_and_decoding_is_exact():
    rng = np.random.default_rng(0)
    # Magnitudes from 1e-30 to 1e30: bfloat16 keeps float32's exponent range (float16 would flush these).
    values = (rng.standard_normal(200_000) * 10.0 ** rng.uniform(-30, 30, 200_000)).astype(np.float32)
    bits = float32_to_bfloat16_bits(values)
    expected = torch.from_numpy(values).to(torch.bfloat16)
    assert np.array_equal(bits, expected.view(torch.int16).numpy().view(np.uint16))
    assert np.array_equal(bfloat16_bits_to_float32(bits), expected.float().numpy())
    # Round to nearest: relative error at most half a unit in the 8th significant bit.
    assert np.max(np.abs(bfloat16_bits_to_float32(bits) / values - 1)) <= 2.0**-8


def test_sharded_bfloat16_q_only_writer_round_trip_and_files(tmp_path):
    n, rng = 40, np.random.default_rng(1)
    q = rng.standard_normal((n, *SPEC.shape)).astype(np.float32)
    split = np.array(["train"] * 20 + ["test"] * 20, dtype=object)
    options = StoreOptions(variables=("q",), dtype="bfloat16", shards=4)
    writer = StoreWriter(
        tmp_path / "s.zarr",
        [SPEC],
        split,
        np.arange(n),
        np.zeros(n),
        {"family": "resnet"},
        min_chunk_bytes=1024,
        options=options,
    )
    assert writer.chunks == {"block0": 2} and writer.shards == {"block0": 8}  # 1024 B / 512 B a bfloat16 sample
    with pytest.raises(ValueError, match="not aligned to chunks of 2"):
        writer.write("block0", 3, {"q": q[3:5], "loss": np.zeros(2, np.float32)})
    for start in range(0, n, 8):
        writer.write(
            "block0",
            start,
            {
                "q": q[start : start + 8],
                "z": q[start : start + 8],
                "loss": np.ones(len(q[start : start + 8]), np.float32),
            },
        )
    writer.finish()
    path = tmp_path / "s.zarr"
    raw = zarr.open_array(path / "block0" / "q", mode="r")
    assert raw.dtype == np.uint16 and raw.shards == (8, *SPEC.shape) and raw.chunks == (2, *SPEC.shape)
    assert len([f for f in (path / "block0" / "q" / "c").rglob("*") if f.is_file()]) == 5  # 20 chunks in 5 files
    assert not (path / "block0" / "z").exists()
    group = open_group(path, "block0")
    assert "z" not in group and group["q"].dtype == np.float32
    assert np.array_equal(group["q"].values, bfloat16_bits_to_float32(float32_to_bfloat16_bits(q)))
    for key, value in {"dump_variables": ["q"], "dump_dtype": "bfloat16", "dump_shards": 4}.items():
        assert key not in group.attrs and zarr.open_group(path, mode="r").attrs[key] == value  # the root holds it, once
    with pytest.raises(StoreError, match=r"s\.zarr: holds no z .*dump\.variables \['q'\]"):
        list(iter_sample_chunks(path, "block0", "z"))


@pytest.mark.parametrize("n", [6, 10, 16])
def test_a_group_shorter_than_one_shard_and_not_whole_chunks_is_one_shard_of_whole_chunks(tmp_path, n):
    """Zarr requires a shard to be a whole number of chunks: with 4 chunks of 4 samples per shard, 6 or 10 samples
    make one shard of 8 or 12 (past the end), 16 one shard of 16; every sample reads back."""
    writer = StoreWriter(
        tmp_path / "s.zarr",
        [SPEC],
        np.array(["test"] * n, dtype=object),
        np.arange(n),
        np.zeros(n),
        {},
        min_chunk_bytes=4096,
        options=StoreOptions(shards=4),
    )
    chunk = writer.chunks["block0"]
    assert chunk == 4 and writer.shards["block0"] == chunk * -(-n // chunk)
    q = np.random.default_rng(3).standard_normal((n, *SPEC.shape)).astype(np.float32)
    writer.write("block0", 0, {"q": q, "z": -q, "loss": np.zeros(n, np.float32)})
    writer.finish()
    assert zarr.open_array(tmp_path / "s.zarr" / "block0" / "q", mode="r").shards == (4 * -(-n // 4), *SPEC.shape)
    assert np.array_equal(open_group(tmp_path / "s.zarr", "block0")["q"].values, q)


def test_a_flipped_byte_inside_a_shard_is_named(tmp_path):
    n = 16
    writer = StoreWriter(
        tmp_path / "s.zarr",
        [SPEC],
        np.array(["test"] * n, dtype=object),
        np.arange(n),
        np.zeros(n),
        {},
        min_chunk_bytes=4096,
        options=StoreOptions(shards=2),
    )
    rng = np.random.default_rng(2)
    for start in range(0, n, 8):
        writer.write(
            "block0",
            start,
            {v: rng.standard_normal((8, *SPEC.shape)).astype(np.float32) for v in "qz"}
            | {"loss": np.zeros(8, np.float32)},
        )
    writer.finish()
    shard = sorted(f for f in (tmp_path / "s.zarr" / "block0" / "q" / "c").rglob("*") if f.is_file())[0]
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF  # inside the first inner chunk, whose CRC32C no longer matches
    shard.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"block0/q samples \[0, 4\) unreadable"):
        list(iter_sample_chunks(tmp_path / "s.zarr", "block0", "q"))


@pytest.fixture(scope="module")
def stores(prepared, train_tiny, tmp_path_factory):
    """A resnet checkpoint dumped twice: plain, and q-only + bfloat16 + sharded."""
    folder = tmp_path_factory.mktemp("options")
    data = prepared("digits")
    checkpoint = train_tiny(data, folder / "run", "resnet", "digits", 1, 8)
    plain, small = folder / "plain.zarr", folder / "small.zarr"
    dump_gradients(checkpoint, data, plain, stage_settings("dump", BASE), log=lambda _: None, device="cpu")
    dump_gradients(
        checkpoint,
        data,
        small,
        stage_settings("dump", {**BASE, "variables": ["q"], "dtype": "bfloat16", "shards": 2}),
        log=lambda _: None,
        device="cpu",
    )
    return {"plain": plain, "small": small, "checkpoint": checkpoint}


def test_options_round_trip_through_inspect_the_tree_and_the_estimators(stores):
    plain, small = stores["plain"], stores["small"]
    shown = subprocess.run(
        [sys.executable, "-m", "growcert.cli", "inspect", "--json", str(small)], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    described = json.loads(shown.stdout)
    assert {key: described["attrs"][key] for key in ("dump_variables", "dump_dtype", "dump_shards")} == {
        "dump_variables": ["q"],
        "dump_dtype": "bfloat16",
        "dump_shards": 2,
    }
    block = described["groups"]["block0"]["variables"]
    assert "z" not in block and block["q"]["dtype"] == "float32" and block["q"]["stored_dtype"] == "uint16"
    # 48 samples of a tiny model fit one 1 MB chunk, so the shard is capped at the group (multi-shard files: above).
    assert block["q"]["shards"][0] == min(48, 2 * block["q"]["chunks"][0])
    text = subprocess.run([sys.executable, "-m", "growcert.cli", "inspect", str(small)], capture_output=True, text=True)
    assert "dtype bfloat16, shards 2" in text.stdout and "(stored uint16)" in text.stdout
    tree = open_store(small)
    for name, node in tree.children.items():
        q_tree, q_plain = node.to_dataset()["q"], open_group(plain, name)["q"].values
        assert q_tree.dtype == np.float32 and "growcert_encoding" not in q_tree.attrs and "z" not in node.to_dataset()
        # bfloat16 keeps 8 significant bits: each value within 2^-8 of its float32 original, relatively.
        assert np.allclose(q_tree.values, q_plain, rtol=2.0**-8, atol=0)
    settings = {"reductions": ["sum_positions"]}
    exact, rounded = (
        estimate_alignment(plain, settings, log=lambda _: None),
        estimate_alignment(small, settings, log=lambda _: None),
    )
    assert list(rounded["n"]) == list(exact["n"])
    assert np.allclose(rounded["mu_sq"], exact["mu_sq"], rtol=0.02)


def test_depth_and_intervene_refuse_a_q_only_store_in_one_line(stores, prepared, tmp_path):
    with pytest.raises(StoreError, match=r"small\.zarr: holds no z .*estimate-depth"):
        estimate_depth(stores["small"], {}, log=lambda _: None, device="cpu")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "growcert.cli",
            "estimate-depth",
            "--store",
            str(stores["small"]),
            "--out",
            str(tmp_path / "d.csv"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "holds no z" in done.stderr
    assert not (tmp_path / "d.csv").exists()


def test_config_records_defaults_and_refuses_q_only_in_the_pipeline():
    config = validate_config({})
    assert config["dump"]["variables"] == ["q", "z"] and config["dump"]["dtype"] == "float32"
    assert config["dump"]["shards"] is None
    with pytest.raises(ConfigError, match=r"^config key 'dump\.variables': \['q'\] drops z"):
        validate_config({"dump": {"variables": ["q"]}})
    with pytest.raises(ConfigError, match="dump.variables"):
        validate_config({"dump": {"variables": ["z"]}}, load_schema())
