"""Dataset layer: deterministic splits, train-only normalisation, own CIFAR/IDX readers, errors.

CIFAR and Fashion-MNIST are exercised on tiny files written here in the datasets'
own formats (CIFAR batches are pickled the way Python 2 wrote them), so the
readers are tested without downloads; the real Fashion-MNIST is read too when
Debian's dataset-fashion-mnist package is installed.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from growcert.data import (
    DATASETS,
    DatasetError,
    cifar,
    default_settings,
    load_prepared,
    prepare_dataset,
    prepared,
    shakespeare,
)

IMAGE_KEYS = {
    "name",
    "kind",
    "shape",
    "num_classes",
    "n_train",
    "n_test",
    "source",
    "sha256",
    "seed",
    "settings",
    "split",
    "mean",
    "std",
}
TEXT_KEYS = {"name", "kind", "vocab_size", "n_train", "n_test", "source", "sha256", "seed", "settings", "split"}


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and message.strip() == message
    return message


def npz_bytes(path: Path) -> bytes:
    return (path / "arrays.npz").read_bytes()


# ---------------------------------------------------------------- registry, settings


def test_registry_and_defaults():
    assert DATASETS == ("digits", "shakespeare", "fashion_mnist", "cifar10", "cifar100", "text")
    assert default_settings("digits") == {"test_fraction": 0.3, "seed": 0, "stratify": True}
    assert default_settings("shakespeare") == {
        "test_fraction": 0.1,
        "seed": 0,
        "chunk_bytes": 4096,
        "edition": "modern",
    }
    for name in ("fashion_mnist", "cifar10", "cifar100"):
        assert default_settings(name)["allow_download"] is False
    with pytest.raises(DatasetError) as excinfo:
        prepare_dataset("mnist", "/nonexistent/out", {})
    assert "unknown dataset 'mnist'" in one_line_error(excinfo)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"test_fraction": 1.5}, "datasets.digits.test_fraction"),
        ({"seed": True}, "datasets.digits.seed"),
        ({"seed": -1}, "datasets.digits.seed"),
        ({"test_fracton": 0.2}, "datasets.digits.test_fracton"),
    ],
)
def test_bad_settings_name_the_key(tmp_path, settings, key):
    with pytest.raises(DatasetError) as excinfo:
        prepare_dataset("digits", tmp_path / "out", settings)
    assert key in one_line_error(excinfo)
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- digits


@pytest.fixture(scope="module")
def digits_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("digits")
    for folder, seed in (("a", 0), ("b", 0), ("c", 1)):
        prepare_dataset("digits", base / folder, {"seed": seed})
    return base


def test_digits_same_seed_is_byte_identical(digits_dirs):
    assert npz_bytes(digits_dirs / "a") == npz_bytes(digits_dirs / "b")
    info_a = json.loads((digits_dirs / "a" / "info.json").read_text())
    info_b = json.loads((digits_dirs / "b" / "info.json").read_text())
    assert info_a == info_b
    assert hashlib.sha256(npz_bytes(digits_dirs / "a")).hexdigest() == info_a["arrays_sha256"]
    # Byte identity must not hinge on both runs falling in the same second: members carry a fixed time.
    with zipfile.ZipFile(digits_dirs / "a" / "arrays.npz") as archive:
        assert {member.date_time for member in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert sorted(p.name for p in (digits_dirs / "a").iterdir()) == ["arrays.npz", "info.json"]


def test_digits_split_is_seeded_disjoint_covering_and_stratified(digits_dirs):
    from sklearn.datasets import load_digits

    bunch = load_digits()
    a = load_prepared(digits_dirs / "a", normalize=False)
    c = load_prepared(digits_dirs / "c", normalize=False)
    assert not np.array_equal(a.test_index, c.test_index)
    for data in (a, c):
        assert np.intersect1d(data.train_index, data.test_index).size == 0
        assert np.array_equal(np.sort(np.concatenate([data.train_index, data.test_index])), np.arange(1797))
        assert data.test_index.size == 539  # round(0.3 * 1797)
        # Rows really are the source rows: pixels and labels match the loader at those indices.
        assert np.array_equal(data.train_x[:, 0], bunch.images[data.train_index].astype(np.uint8))
        assert np.array_equal(data.test_y, bunch.target[data.test_index])
        per_class_test = np.bincount(data.test_y, minlength=10)
        per_class_all = np.bincount(bunch.target, minlength=10)
        assert np.all(np.abs(per_class_test - 0.3 * per_class_all) <= 1)


def test_digits_normalised_with_train_statistics(digits_dirs):
    data = load_prepared(digits_dirs / "a")
    raw = load_prepared(digits_dirs / "a", normalize=False)
    info = data.info
    assert IMAGE_KEYS <= set(info) and info["kind"] == "image" and info["shape"] == [1, 8, 8]
    assert info["num_classes"] == 10 and (info["n_train"], info["n_test"]) == (1258, 539)
    assert info["source"]["package"] == "scikit-learn" and len(info["sha256"]) == 64
    assert data.train_x.dtype == np.float32 and data.train_x.shape == (1258, 1, 8, 8)
    assert data.train_y.dtype == np.int64 and data.train_index.dtype == np.int64
    assert raw.train_x.dtype == np.uint8
    assert abs(float(data.train_x.mean(dtype=np.float64))) < 1e-5
    assert abs(float(data.train_x.std(dtype=np.float64)) - 1.0) < 1e-5
    assert info["mean"][0] == pytest.approx(raw.train_x.mean(dtype=np.float64), rel=1e-12)
    # The test split reuses the train statistics, so it is not exactly centred itself.
    expected_test = (raw.test_x.astype(np.float64) - info["mean"][0]) / info["std"][0]
    np.testing.assert_allclose(data.test_x, expected_test, rtol=1e-5, atol=1e-5)
    assert abs(float(data.test_x.mean())) > 1e-4


# ---------------------------------------------------------------- shakespeare


@pytest.fixture(scope="module")
def shakespeare_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("shakespeare")
    for folder, seed in (("a", 0), ("b", 0), ("c", 7)):
        prepare_dataset("shakespeare", base / folder, {"seed": seed})
    return base


def test_shakespeare_deterministic_and_seeded(shakespeare_dirs):
    assert npz_bytes(shakespeare_dirs / "a") == npz_bytes(shakespeare_dirs / "b")
    a, c = load_prepared(shakespeare_dirs / "a"), load_prepared(shakespeare_dirs / "c")
    assert not np.array_equal(a.test_index, c.test_index)


def test_shakespeare_streams_are_the_corpus_split_by_chunks(shakespeare_dirs):
    data = load_prepared(shakespeare_dirs / "a")
    info = data.info
    assert TEXT_KEYS <= set(info) and info["kind"] == "text" and info["vocab_size"] == 256
    assert data.train_y is None and data.test_y is None
    assert data.train_x.dtype == np.uint8 and data.train_x.ndim == 1
    # Independent read of the corpus: the edition's files in sorted order, blank line between.
    files, _ = shakespeare.text_files("modern")
    corpus = b"\n\n".join(path.read_bytes() for path in files)
    assert info["corpus_bytes"] == len(corpus) == info["n_train"] + info["n_test"]
    assert info["n_train"] == data.train_x.size and info["n_test"] == data.test_x.size
    assert info["sha256"] and info["source"]["version"] == "0.6"

    chunk, n_chunks = info["settings"]["chunk_bytes"], info["split"]["n_chunks"]
    assert np.intersect1d(data.train_index, data.test_index).size == 0
    assert np.array_equal(np.sort(np.concatenate([data.train_index, data.test_index])), np.arange(n_chunks))
    assert data.test_index.size == round(0.1 * n_chunks)
    # Every chunk of each stream is exactly the corpus bytes of that chunk id, in corpus order.
    splits = (("train", data.train_x, data.train_index), ("test", data.test_x, data.test_index))
    for split, stream, ids in splits:
        starts = data.segment_starts(split)
        for chunk_id, start in zip(ids[[0, 1, -1]], starts[[0, 1, -1]]):
            expected = corpus[chunk_id * chunk : (chunk_id + 1) * chunk]
            assert stream[start : start + len(expected)].tobytes() == expected
    text = data.train_x.tobytes() + data.test_x.tobytes()
    assert b"Romeo" in text and b"HAMLET" in text.upper()
    assert b"Enter" in data.test_x.tobytes()  # the test stream is play text too


def test_shakespeare_chunk_larger_than_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(DatasetError) as excinfo:
        prepare_dataset("shakespeare", tmp_path / "out", {"chunk_bytes": 10**9})
    assert "datasets.shakespeare.chunk_bytes" in one_line_error(excinfo)


# ---------------------------------------------------------------- CIFAR (own pickle reader)


class Py2StylePickler(pickle._Pickler):
    """Pickles bytes as Python 2 `str` opcodes, as the real CIFAR files (written by Python 2) are.

    Loaded with encoding="latin1" those become str: dict keys like 'data', and numpy's raw
    array buffer on the path numpy keeps for Python 2 pickles.
    """

    dispatch = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj):
        size = len(obj)
        if size < 256:
            header = pickle.SHORT_BINSTRING + bytes([size])
        else:
            header = pickle.BINSTRING + struct.pack("<i", size)
        self.write(header + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def write_cifar_pickle(path: Path, entry: dict, style: str) -> None:
    if style == "py2":
        with open(path, "wb") as handle:
            Py2StylePickler(handle, protocol=2).dump(entry)
        # Real files name numpy's pre-2.0 module; GLOBAL opcodes are plain text, so rename in place.
        path.write_bytes(path.read_bytes().replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
    else:  # a Python 3 pickle with bytes keys, as `pickle.load(f, encoding="bytes")` users re-save them
        with open(path, "wb") as handle:
            pickle.dump(entry, handle, protocol=2)


def make_images(rng, count: int) -> np.ndarray:
    return rng.integers(0, 256, size=(count, 3, 32, 32), dtype=np.uint8)


def rows_of(images: np.ndarray) -> np.ndarray:
    """CIFAR's row layout written out by hand: R plane, G plane, B plane, each row-major."""
    rows = np.empty((images.shape[0], 3072), dtype=np.uint8)
    for n, image in enumerate(images):
        for c in range(3):
            for h in range(32):
                rows[n, c * 1024 + h * 32 : c * 1024 + h * 32 + 32] = image[c, h]
    return rows


def write_fake_cifar(root: Path, dataset: str, style: str, per_batch: int = 4, seed: int = 0):
    """Tiny CIFAR folder; returns (train images, train labels, test images, test labels)."""
    layout = cifar.LAYOUTS[dataset]
    folder = root / layout.folder
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    train_images, train_labels = [], []
    batches = [*layout.train_files, layout.test_file]
    for name in batches:
        images = make_images(rng, per_batch)
        labels = rng.integers(0, layout.num_classes, size=per_batch).tolist()
        entry = {
            b"batch_label": name.encode(),
            b"data": rows_of(images),
            layout.label_key.encode(): labels,
            b"filenames": [f"img_{i}.png".encode() for i in range(per_batch)],
        }
        if dataset == "cifar100":
            entry[b"coarse_labels"] = [label // 5 for label in labels]
        write_cifar_pickle(folder / name, entry, style)
        train_images.append(images)
        train_labels.append(labels)
    names = [f"class_{i}".encode() for i in range(layout.num_classes)]
    write_cifar_pickle(folder / layout.meta_file, {layout.names_key.encode(): names}, style)
    return (
        np.concatenate(train_images[:-1]),
        np.concatenate(train_labels[:-1]),
        train_images[-1],
        np.asarray(train_labels[-1]),
    )


@pytest.mark.parametrize("dataset", ["cifar10", "cifar100"])
@pytest.mark.parametrize("style", ["py2", "bytes_keys"])
def test_cifar_round_trip(tmp_path, dataset, style):
    train_images, train_labels, test_images, test_labels = write_fake_cifar(tmp_path / "raw", dataset, style)
    info = prepare_dataset(dataset, tmp_path / "out", {"root": str(tmp_path / "raw")})
    assert IMAGE_KEYS <= set(info) and info["shape"] == [3, 32, 32]
    assert info["num_classes"] == (10 if dataset == "cifar10" else 100)
    assert info["class_names"][:2] == ["class_0", "class_1"]
    raw = load_prepared(tmp_path / "out", normalize=False)
    assert np.array_equal(raw.train_x, train_images) and np.array_equal(raw.test_x, test_images)
    assert np.array_equal(raw.train_y, train_labels) and np.array_equal(raw.test_y, test_labels)
    assert np.array_equal(raw.train_index, np.arange(len(train_labels)))
    # One pixel by the format's own arithmetic: (c, h, w) is byte c*1024 + h*32 + w of the row.
    first_row = rows_of(train_images[:1])[0]
    assert raw.train_x[0, 2, 1, 30] == first_row[2 * 1024 + 1 * 32 + 30]
    assert raw.train_x[0, 0, 31, 0] == first_row[31 * 32]
    data = load_prepared(tmp_path / "out")
    flat = data.train_x.transpose(1, 0, 2, 3).reshape(3, -1).astype(np.float64)
    np.testing.assert_allclose(flat.mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(flat.std(axis=1), 1, atol=1e-5)


def test_cifar_limits_are_seeded_stratified_subsets(tmp_path):
    train_images, train_labels, _, _ = write_fake_cifar(tmp_path / "raw", "cifar10", "py2", per_batch=20)
    settings = {"root": str(tmp_path / "raw"), "limit_train": 30, "limit_test": 5, "seed": 3}
    prepare_dataset("cifar10", tmp_path / "a", settings)
    prepare_dataset("cifar10", tmp_path / "b", settings)
    prepare_dataset("cifar10", tmp_path / "c", {**settings, "seed": 4})
    assert npz_bytes(tmp_path / "a") == npz_bytes(tmp_path / "b")
    a, c = load_prepared(tmp_path / "a", normalize=False), load_prepared(tmp_path / "c", normalize=False)
    assert a.train_x.shape == (30, 3, 32, 32) and a.test_x.shape == (5, 3, 32, 32)
    assert np.all(np.diff(a.train_index) > 0) and not np.array_equal(a.train_index, c.train_index)
    assert np.array_equal(a.train_x, train_images[a.train_index])
    assert np.array_equal(a.train_y, train_labels[a.train_index])


def test_cifar_missing_root_names_the_key_and_does_not_download(tmp_path, monkeypatch):
    def no_download(*args):
        raise AssertionError("must not download when allow_download is false")

    monkeypatch.setattr(cifar, "download_with_torchvision", no_download)
    for dataset in ("cifar10", "cifar100"):
        with pytest.raises(DatasetError) as excinfo:
            prepare_dataset(dataset, tmp_path / "out", {"root": str(tmp_path / "nothing")})
        message = one_line_error(excinfo)
        assert f"datasets.{dataset}.root" in message and str(tmp_path / "nothing") in message
        assert f"datasets.{dataset}.allow_download" in message
    assert not (tmp_path / "out").exists()


def test_cifar_download_only_when_allowed(tmp_path, monkeypatch):
    calls = []

    def fake_download(dataset, class_name, root):
        calls.append((dataset, class_name, root))
        write_fake_cifar(root, dataset, "py2")

    monkeypatch.setattr(cifar, "download_with_torchvision", fake_download)
    settings = {"root": str(tmp_path / "dl"), "allow_download": True}
    info = prepare_dataset("cifar10", tmp_path / "out", settings)
    assert calls == [("cifar10", "CIFAR10", (tmp_path / "dl").resolve())]
    assert info["source"]["downloaded"] is True and info["n_train"] == 20


def test_cifar_refuses_foreign_pickles(tmp_path):
    write_fake_cifar(tmp_path / "raw", "cifar10", "py2")
    # A pickle that would call os.system on load must be refused, not executed.
    (tmp_path / "raw" / "cifar-10-batches-py" / "data_batch_3").write_bytes(
        b"cos\nsystem\n(S'touch " + str(tmp_path / "pwned").encode() + b"'\ntR."
    )
    with pytest.raises(DatasetError) as excinfo:
        prepare_dataset("cifar10", tmp_path / "out", {"root": str(tmp_path / "raw")})
    assert "data_batch_3" in one_line_error(excinfo) and not (tmp_path / "pwned").exists()


# ---------------------------------------------------------------- Fashion-MNIST (own IDX reader)


def write_idx(path: Path, array: np.ndarray, compress: bool = True) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(payload, mtime=0) if compress else payload)


def test_fashion_mnist_reads_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, size=(12, 28, 28), dtype=np.uint8)
    test = rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    train_labels, test_labels = rng.integers(0, 10, 12), rng.integers(0, 10, 5)
    raw = tmp_path / "FashionMNIST" / "raw"  # torchvision's layout under root
    raw.mkdir(parents=True)
    write_idx(raw / "train-images-idx3-ubyte.gz", train)
    write_idx(raw / "train-labels-idx1-ubyte.gz", train_labels)
    write_idx(raw / "t10k-images-idx3-ubyte", test, compress=False)  # plain files are read as well
    write_idx(raw / "t10k-labels-idx1-ubyte.gz", test_labels)
    info = prepare_dataset("fashion_mnist", tmp_path / "out", {"root": str(tmp_path)})
    assert info["shape"] == [1, 28, 28] and (info["n_train"], info["n_test"]) == (12, 5)
    data = load_prepared(tmp_path / "out", normalize=False)
    assert np.array_equal(data.train_x[:, 0], train) and np.array_equal(data.test_x[:, 0], test)
    assert np.array_equal(data.train_y, train_labels) and np.array_equal(data.test_y, test_labels)

    # A truncated file is an error naming it, not a short array.
    (raw / "t10k-images-idx3-ubyte").write_bytes((raw / "t10k-images-idx3-ubyte").read_bytes()[:-10])
    with pytest.raises(DatasetError) as excinfo:
        prepare_dataset("fashion_mnist", tmp_path / "out2", {"root": str(tmp_path)})
    assert "t10k-images-idx3-ubyte" in one_line_error(excinfo)


def test_fashion_mnist_missing_root(tmp_path):
    with pytest.raises(DatasetError) as excinfo:
        prepare_dataset("fashion_mnist", tmp_path / "out", {"root": str(tmp_path / "none")})
    assert "datasets.fashion_mnist.root" in one_line_error(excinfo)


DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.mark.skipif(
    not (DEBIAN_FASHION / "train-images-idx3-ubyte.gz").is_file(),
    reason=f"needs {DEBIAN_FASHION} (apt-get install dataset-fashion-mnist)",
)
def test_fashion_mnist_real_debian_files(tmp_path):
    info = prepare_dataset("fashion_mnist", tmp_path / "out", {"limit_train": 200, "limit_test": 50})
    assert info["split"]["n_train_official"] == 60000 and info["split"]["n_test_official"] == 10000
    data = load_prepared(tmp_path / "out")
    assert data.train_x.shape == (200, 1, 28, 28) and data.test_x.shape == (50, 1, 28, 28)
    assert np.array_equal(np.bincount(data.train_y, minlength=10), np.full(10, 20))  # balanced classes
    assert data.train_index.max() < 60000 and data.test_index.max() < 10000
    # Spot-check one image against the file itself (row 16 + index * 784 bytes).
    with gzip.open(DEBIAN_FASHION / "train-images-idx3-ubyte.gz") as handle:
        handle.seek(16 + int(data.train_index[0]) * 784)
        first = np.frombuffer(handle.read(784), dtype=np.uint8).reshape(28, 28)
    raw = load_prepared(tmp_path / "out", normalize=False)
    assert np.array_equal(raw.train_x[0, 0], first)


# ---------------------------------------------------------------- prepared format


def test_load_prepared_missing_directory(tmp_path):
    with pytest.raises(DatasetError) as excinfo:
        load_prepared(tmp_path / "absent")
    assert str(tmp_path / "absent") in one_line_error(excinfo)


def test_corrupt_or_interrupted_output_is_detected(tmp_path, monkeypatch):
    out = tmp_path / "digits"
    prepare_dataset("digits", out, {})
    arrays = out / "arrays.npz"
    arrays.write_bytes(arrays.read_bytes()[:-100])
    with pytest.raises(DatasetError) as excinfo:
        load_prepared(out)
    assert str(arrays) in one_line_error(excinfo)

    # A job killed while writing leaves no info.json (the completeness marker) and no temp files.
    def killed(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(prepared, "_write_npz", killed)
    with pytest.raises(DatasetError):
        prepare_dataset("digits", out, {})
    assert sorted(p.name for p in out.iterdir()) == ["arrays.npz"]
    with pytest.raises(DatasetError) as excinfo:
        load_prepared(out)
    assert "incomplete" in one_line_error(excinfo) and str(out) in str(excinfo.value)
