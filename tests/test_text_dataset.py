"""The `text` dataset on a generated multi-file corpus: the chunk split (deterministic, nothing straddles it),
streams that match the corpus byte for byte, memory-mapped prepared arrays, and the single-pass budget checked
in one line both where the config is validated and where the corpus is prepared."""

import json
import subprocess
import sys

import numpy as np
import pytest

from growcert.data import DatasetError, load_prepared, prepare_dataset, text
from growcert.data.batches import TrainingBatches
from growcert.errors import ConfigError
from growcert.plan import validate_config

CHUNK = 512


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Twelve UTF-8 files of random sizes (multi-byte characters included), and their joined bytes."""
    folder = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    words = ["growth", "certificate", "Größe", "déjà", "вектор", "梯度", "λ", "the", "of", "\n"]
    parts = []
    for number in range(12):
        content = " ".join(rng.choice(words, size=int(rng.integers(200, 3000)))).encode("utf-8")
        (folder / f"doc{number:02d}.txt").write_bytes(content)
        parts.append(content)
    (folder / "notes.md").write_text("not matched by the glob")
    return folder, text.SEPARATOR.join(parts)


def settings(folder, **extra):
    return {"path": str(folder / "*.txt"), "chunk_bytes": CHUNK, "test_fraction": 0.2, **extra}


def test_streams_are_the_corpus_chunks_and_memory_mapped(corpus, tmp_path, monkeypatch):
    folder, joined = corpus
    monkeypatch.setattr(text, "_BLOCK", 1000)  # many blocks per file and blocks cutting chunks and characters
    info = prepare_dataset("text", tmp_path / "p", settings(folder))
    data = load_prepared(tmp_path / "p")
    assert isinstance(data.train_x, np.memmap) and isinstance(data.test_x, np.memmap)
    assert not data.train_x.flags.writeable
    assert sorted(path.name for path in (tmp_path / "p").iterdir()) == [
        "arrays.npz",
        "info.json",
        "test_x.npy",
        "train_x.npy",
    ]
    assert info["corpus_bytes"] == len(joined) and len(info["source"]["files"]) == 12
    # Brute force: each stream is its chunks of the joined corpus, in corpus order.
    chunks = [joined[i : i + CHUNK] for i in range(0, len(joined), CHUNK)]
    for stream, ids in ((data.train_x, data.train_index), (data.test_x, data.test_index)):
        assert bytes(stream) == b"".join(chunks[i] for i in ids)
    assert sorted([*data.train_index, *data.test_index]) == list(range(len(chunks)))
    assert len(data.test_index) == round(0.2 * len(chunks))


def test_split_is_deterministic_and_follows_the_seed(corpus, tmp_path):
    folder, _ = corpus
    for name in ("a", "b"):
        prepare_dataset("text", tmp_path / name, settings(folder))
    for file in ("arrays.npz", "train_x.npy", "test_x.npy"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()
    prepare_dataset("text", tmp_path / "c", settings(folder, seed=1))
    assert not np.array_equal(load_prepared(tmp_path / "a").test_index, load_prepared(tmp_path / "c").test_index)


def test_no_training_window_holds_a_test_byte(corpus, tmp_path):
    folder, joined = corpus
    prepare_dataset("text", tmp_path / "p", settings(folder))
    data = load_prepared(tmp_path / "p")
    # Where each train-stream byte came from in the corpus, and whether that chunk is a test chunk.
    origin = np.concatenate([np.arange(i * CHUNK, min((i + 1) * CHUNK, len(joined))) for i in data.train_index])
    is_test_chunk = np.isin(origin // CHUNK, data.test_index)
    context = 64
    batches = TrainingBatches(
        data, batch_size=4, steps=(len(data.train_x) - 1) // context // 4, seed=0, context=context
    )
    for _ in range(len(batches.order) // 4):
        inputs, targets = batches.next()
        assert inputs.shape == (4, context)
    windows = np.arange(batches.available)[:, None] * context + np.arange(context + 1)
    assert not is_test_chunk[windows].any()
    assert np.array_equal(np.frombuffer(joined, np.uint8)[origin[windows[3]]], np.asarray(data.train_x[windows[3]]))


def test_a_too_small_corpus_is_refused_in_one_line_naming_the_shortfall(corpus, tmp_path):
    folder, joined = corpus
    prepare_dataset("text", tmp_path / "ok", settings(folder))
    have = len(load_prepared(tmp_path / "ok").train_x) - 1
    with pytest.raises(DatasetError) as error:
        prepare_dataset("text", tmp_path / "p", settings(folder, single_pass_tokens=have + 1000))
    message = str(error.value)
    assert "\n" not in message and f"holds {have:,} single-pass tokens, 1,000 (" in message
    assert "datasets.text.single_pass_tokens" in message and not (tmp_path / "p" / "info.json").exists()
    assert not list((tmp_path / "p").glob(".*tmp"))
    prepare_dataset("text", tmp_path / "exact", settings(folder, single_pass_tokens=have))  # exactly enough
    # The command line: exit 2, one line.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "growcert.cli",
            "prepare",
            "--dataset",
            "text",
            "--out",
            str(tmp_path / "q"),
            "--settings",
            json.dumps(settings(folder, single_pass_tokens=10**9)),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "short of" in done.stderr


def test_config_checks_the_grids_against_the_stated_budget():
    grid = {
        "family": "llama",
        "dataset": "text",
        "widths": [64],
        "depths": [2],
        "train": {"steps": 100, "batch_size": 8, "save_steps": [100]},
    }
    config = {
        "grids": [grid],
        "models": {"llama": {"context": 64}},
        "datasets": {"text": {"single_pass_tokens": 51200}},
    }
    validate_config(json.loads(json.dumps(config)))  # 100 x 8 x 64 = 51,200: exactly the budget
    config["datasets"]["text"]["single_pass_tokens"] = 51000
    with pytest.raises(
        ConfigError,
        match=r"^config key 'grids\[0\]\.train': steps 100 x batch_size 8 x context 64 = "
        r"51,200 tokens, 200 more than datasets\.text\.single_pass_tokens=51,000$",
    ):
        validate_config(config)


def test_bad_sources_are_named_in_one_line(corpus, tmp_path):
    folder, _ = corpus
    with pytest.raises(DatasetError, match=r"^dataset 'text': datasets\.text\.path '.*nothing\*\.txt' matches no file"):
        prepare_dataset("text", tmp_path / "p", {"path": str(folder / "nothing*.txt")})
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.txt").write_bytes(b"fine text " * 200)
    (bad / "b.txt").write_bytes(b"ok \xff\xfe broken")
    with pytest.raises(DatasetError, match=r"b\.txt is not UTF-8 \(byte 3"):
        prepare_dataset("text", tmp_path / "p", {"path": str(bad / "*.txt"), "chunk_bytes": 64})
    assert not list((tmp_path / "p").glob(".*tmp"))
    saved = tmp_path / "saved"  # what datasets' save_to_disk writes: state.json naming Arrow stream files
    saved.mkdir()
    (saved / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(DatasetError, match=r"datasets folder, whose Arrow files need pyarrow \(not installed\)"):
            prepare_dataset("text", tmp_path / "p", {"path": str(saved)})


def test_a_datasets_folder_reads_like_the_same_text_in_files(tmp_path):
    """With pyarrow: rows of an Arrow stream file (the format save_to_disk writes) are documents."""
    pa = pytest.importorskip("pyarrow")
    rows = [f"document {i} " * (i + 20) for i in range(30)]
    saved = tmp_path / "saved"
    saved.mkdir()
    table = pa.table({"text": rows, "id": list(range(30))})
    with pa.OSFile(str(saved / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=7):
                writer.write_batch(batch)
    (saved / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    for number, row in enumerate(rows):
        (tmp_path / f"{number:02d}.txt").write_text(row)
    from_arrow = prepare_dataset("text", tmp_path / "a", {"path": str(saved), "chunk_bytes": 128})
    from_files = prepare_dataset("text", tmp_path / "f", {"path": str(tmp_path / "*.txt"), "chunk_bytes": 128})
    assert from_arrow["corpus_sha256"] == from_files["corpus_sha256"]
