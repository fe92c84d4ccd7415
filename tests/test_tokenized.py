"""Token streams of a text dataset (data/tokenized.py) on a generated multi-file corpus with a real-format
byte-level BPE tokenizer: ids equal to tokenizing each chunk alone and to the former in-RAM function, memory-
mapped int32 streams, nothing straddling the split, peak memory bounded by a batch, the cache reused and
rebuilt, killed writes never read as complete; then an hf checkpoint dumped on the corpus end to end."""

import json
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from test_hf import CONTEXT, DUMP, save_tiny

from growcert.data import DatasetError, load_prepared, prepare_dataset
from growcert.data import tokenized as tokenized_module
from growcert.data.batches import fixed_examples
from growcert.data.tokenized import CACHE_FOLDER, chunk_batches, encoder, token_dtype, tokenized, tokenizer_identity
from growcert.models.hf import load_tokenizer

CHUNK = 2048
WORDS = ["growth", "certificate", "Größe", "déjà", "вектор", "梯度", "λ", "the", "of", "and", "\n", "to be"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """~300 KB in 16 UTF-8 files (multi-byte characters, so chunk boundaries cut some)."""
    folder = tmp_path_factory.mktemp("token-corpus")
    rng = np.random.default_rng(0)
    for number in range(16):
        content = " ".join(rng.choice(WORDS, size=int(rng.integers(2000, 4000))))
        (folder / f"doc{number:02d}.txt").write_text(content, encoding="utf-8")
    return folder


def bpe_folder(folder, corpus, vocab_size):
    """A byte-level BPE tokenizer trained on the corpus, saved as transformers saves a checkpoint's tokenizer."""
    from tokenizers import ByteLevelBPETokenizer

    trained = ByteLevelBPETokenizer()
    trained.train_from_iterator(
        [path.read_text(encoding="utf-8") for path in sorted(corpus.glob("*.txt"))[:4]],
        vocab_size=vocab_size,
        show_progress=False,
    )
    transformers.PreTrainedTokenizerFast(tokenizer_object=trained._tokenizer).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def bpe(tmp_path_factory, corpus):
    """The tokenizer as growcert loads it (AutoTokenizer from the folder)."""
    return load_tokenizer(str(bpe_folder(tmp_path_factory.mktemp("bpe"), corpus, 400)))


def prepare(folder, corpus, seed=0):
    prepare_dataset(
        "text", folder, {"path": str(corpus / "*.txt"), "chunk_bytes": CHUNK, "test_fraction": 0.2, "seed": seed}
    )
    return load_prepared(folder)


def chunk_texts(data, split):
    stream = data.train_x if split == "train" else data.test_x
    bounds = np.append(data.segment_starts(split), len(stream))
    return [stream[a:b].tobytes().decode("utf-8", errors="replace") for a, b in zip(bounds[:-1], bounds[1:])]


def in_ram_tokens(data, encode, split):
    """The former data/tokenized.py (before the cache), verbatim in substance: every chunk's ids in RAM,
    concatenated."""
    ids = [np.asarray(chunk, dtype=np.int64) for chunk in encode(chunk_texts(data, split))]
    return np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)


class Counting:
    """An encode that counts its calls and the characters of each (at most the stream bytes they were decoded
    from), and can fail on a given call."""

    def __init__(self, tokenizer, fail_on=None):
        self.encode, self.calls, self.fail_on = encoder(tokenizer), [], fail_on

    def __call__(self, texts):
        self.calls.append(sum(len(text) for text in texts))
        if self.fail_on is not None and len(self.calls) == self.fail_on:
            raise RuntimeError("tokenizer died")
        return self.encode(texts)


def entries(data):
    return sorted(path.name for path in (data.folder / CACHE_FOLDER).iterdir())


def test_ids_equal_each_chunk_tokenized_alone_and_the_in_ram_result(tmp_path, corpus, bpe, monkeypatch):
    data = prepare(tmp_path / "p", corpus)
    monkeypatch.setattr(tokenized_module, "_BATCH_BYTES", 5 * CHUNK)  # many batches of several chunks
    encode = Counting(bpe)
    tokens = tokenized(data, encode, "bpe", len(bpe), tokenizer_identity(bpe))
    assert max(encode.calls) <= 5 * CHUNK and len(encode.calls) > 10
    for split in ("train", "test"):
        stream = getattr(tokens, f"{split}_x")
        assert isinstance(stream, np.memmap) and stream.dtype == np.int32 and not stream.flags.writeable
        alone = [bpe(text, add_special_tokens=False)["input_ids"] for text in chunk_texts(data, split)]
        assert stream.tolist() == [token for ids in alone for token in ids]
        assert np.array_equal(stream, in_ram_tokens(data, encoder(bpe), split))
        lengths = [len(ids) for ids in alone]
        assert np.array_equal(tokens.segment_starts(split), np.cumsum(lengths) - lengths)  # token offset of each chunk
    assert "\ufffd" in "".join(chunk_texts(data, "train"))  # some chunk boundary did cut a character
    record = tokens.info["tokenization"]
    assert (record["n_train_tokens"], record["dtype"]) == (len(tokens.train_x), "<i4")
    assert tokens.info["sha256"] == data.info["sha256"] and tokens.info["vocab_size"] == len(bpe)


def test_no_token_window_straddles_the_split(tmp_path, corpus, bpe):
    data = prepare(tmp_path / "p", corpus)
    tokens = tokenized(data, encoder(bpe), "bpe", len(bpe), tokenizer_identity(bpe))
    for split, own, other in (
        ("train", data.train_index, data.test_index),
        ("test", data.test_index, data.train_index),
    ):
        # The corpus chunk each token came from, by tokenizing each chunk alone.
        counts = [len(bpe(text, add_special_tokens=False)["input_ids"]) for text in chunk_texts(data, split)]
        origin = np.repeat(own, counts)
        examples = fixed_examples(tokens, split, 10**6, seed=0, context=CONTEXT)  # every window of the split
        windows = examples.index[:, None] + np.arange(CONTEXT + 1)
        assert len(examples.index) == (len(origin) - 1) // CONTEXT
        assert not np.isin(origin[windows], other).any() and np.isin(origin[windows], own).all()
        assert np.array_equal(examples.inputs.numpy(), np.asarray(getattr(tokens, f"{split}_x"))[windows[:, :-1]])


def test_peak_memory_is_a_batch_not_the_corpus(tmp_path, corpus, bpe, monkeypatch):
    data = prepare(tmp_path / "p", corpus)
    encode = encoder(bpe)
    tracemalloc.start()
    in_ram_tokens(data, encode, "train")
    in_ram_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    monkeypatch.setattr(tokenized_module, "_BATCH_BYTES", 4 * CHUNK)
    tokens = tokenized(data, encode, "bpe", len(bpe), tokenizer_identity(bpe))
    batched_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # The train split is ~28 batches: the former function holds every id at once, the cache one batch
    # (measured: ~0.2 MB against ~2.6 MB traced).
    assert len(data.train_x) > 25 * 4 * CHUNK and batched_peak < in_ram_peak / 8, (batched_peak, in_ram_peak)
    assert len(tokens.train_x) > 0


def test_cache_is_reused_then_rebuilt_when_the_data_or_the_tokenizer_change(tmp_path, corpus, bpe):
    data = prepare(tmp_path / "p", corpus)
    first = tokenized(data, encoder(bpe), "bpe", len(bpe), tokenizer_identity(bpe))
    (entry,) = entries(data)
    again = tokenized(load_prepared(tmp_path / "p"), Counting(bpe, fail_on=1), "bpe", len(bpe), tokenizer_identity(bpe))
    assert np.array_equal(again.train_x, first.train_x) and entries(data) == [entry]  # no encode call at all
    # A tokenizer of the same content in another folder is the same tokenizer; another vocabulary is not.
    copy = load_tokenizer(str(bpe_folder(tmp_path / "copy", corpus, 400)))
    assert tokenizer_identity(copy) == tokenizer_identity(bpe)
    other = load_tokenizer(str(bpe_folder(tmp_path / "other", corpus, 300)))
    assert tokenizer_identity(other) != tokenizer_identity(bpe)
    counting = Counting(other)
    with_other = tokenized(data, counting, "other", len(other), tokenizer_identity(other))
    assert counting.calls and len(entries(data)) == 2
    assert np.array_equal(with_other.train_x, in_ram_tokens(data, encoder(other), "train"))
    # Re-prepared with another split: new entries, and those of the old data are gone.
    reprepared = prepare(tmp_path / "p", corpus, seed=1)
    counting = Counting(bpe)
    rebuilt = tokenized(reprepared, counting, "bpe", len(bpe), tokenizer_identity(bpe))
    assert counting.calls and entry not in entries(data) and len(entries(data)) == 1
    assert np.array_equal(rebuilt.train_x, in_ram_tokens(reprepared, encoder(bpe), "train"))
    assert not np.array_equal(rebuilt.test_x[:100], first.test_x[:100])


def test_a_failed_write_leaves_nothing_complete_and_a_rerun_rebuilds(tmp_path, corpus, bpe, monkeypatch):
    data = prepare(tmp_path / "p", corpus)
    monkeypatch.setattr(tokenized_module, "_BATCH_BYTES", 4 * CHUNK)
    with pytest.raises(RuntimeError, match="tokenizer died"):
        tokenized(data, Counting(bpe, fail_on=3), "bpe", len(bpe), tokenizer_identity(bpe))
    assert entries(data) == []  # the temporary folder was removed
    with pytest.raises(DatasetError, match=r"^dataset 'text': tokenizer bad produced ids outside \[0, 10\)$"):
        tokenized(data, encoder(bpe), "bad", 10, "bad")
    assert entries(data) == []
    done = tokenized(data, encoder(bpe), "bpe", len(bpe), tokenizer_identity(bpe))
    assert np.array_equal(done.train_x, in_ram_tokens(data, encoder(bpe), "train"))


def test_a_killed_job_leaves_a_hidden_partial_folder_that_is_never_read(tmp_path, corpus, bpe):
    """A real kill: the process exits on the spot (os._exit) in the middle of writing, with no cleanup."""
    data = prepare(tmp_path / "p", corpus)
    script = textwrap.dedent(f"""
        import os
        from growcert.data import load_prepared, tokenized as module
        from growcert.models.hf import load_tokenizer
        module._BATCH_BYTES = {4 * CHUNK}
        tokenizer, calls = load_tokenizer({str(bpe.name_or_path)!r}), []
        def encode(texts):
            calls.append(1)
            if len(calls) == 5:
                os._exit(9)
            return module.encoder(tokenizer)(texts)
        module.tokenized(load_prepared({str(data.folder)!r}), encode, "bpe", len(tokenizer),
        module.tokenizer_identity(tokenizer))
    """)
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert killed.returncode == 9, killed.stderr
    (partial,) = entries(data)
    assert partial.startswith(".") and partial.endswith(".partial")
    assert (data.folder / CACHE_FOLDER / partial / "train.bin").stat().st_size > 0
    assert not (data.folder / CACHE_FOLDER / partial / "info.json").exists()
    counting = Counting(bpe)
    done = tokenized(data, counting, "bpe", len(bpe), tokenizer_identity(bpe))
    assert counting.calls and np.array_equal(done.train_x, in_ram_tokens(data, encoder(bpe), "train"))


def test_two_jobs_building_one_entry_agree(tmp_path, corpus, bpe):
    """Another job finishes the same entry while this one builds: this one's rename fails, and it reads theirs."""
    data = prepare(tmp_path / "p", corpus)
    identity = tokenizer_identity(bpe)

    done = []

    def racing(texts):
        if not done:
            done.append(tokenized(load_prepared(data.folder), encoder(bpe), "bpe", len(bpe), identity))
        return encoder(bpe)(texts)

    tokens = tokenized(data, racing, "bpe", len(bpe), identity)
    assert len(entries(data)) == 1 and np.array_equal(tokens.train_x, in_ram_tokens(data, encoder(bpe), "train"))


def test_ids_are_int64_only_when_the_vocabulary_needs_it(tmp_path, corpus, bpe):
    assert token_dtype(2**31) == np.int32 and token_dtype(2**31 + 1) == np.int64
    data = prepare(tmp_path / "p", corpus)
    wide = tokenized(data, encoder(bpe), "bpe", 2**40, tokenizer_identity(bpe))
    assert wide.train_x.dtype == np.int64 and isinstance(wide.train_x, np.memmap)
    assert np.array_equal(wide.train_x, in_ram_tokens(data, encoder(bpe), "train"))


def test_chunk_batches_cover_every_chunk_once_within_the_budget():
    rng = np.random.default_rng(3)
    bounds = np.append(0, np.cumsum(rng.integers(1, 300, size=200)))
    ranges = chunk_batches(bounds, 1000)
    assert [first for first, _ in ranges[1:]] == [last for _, last in ranges[:-1]] and ranges[0][0] == 0
    assert ranges[-1][1] == 200
    for first, last in ranges:  # within the budget unless one chunk alone exceeds it, and never splittable further
        assert last - first == 1 or bounds[last] - bounds[first] <= 1000
    assert all(bounds[last + 1] - bounds[first] > 1000 for first, last in ranges[:-1])
    assert chunk_batches(np.array([0, 5000, 5001]), 1000) == [(0, 1), (1, 2)]


def test_identity_without_a_fast_backend_hashes_the_saved_files(tmp_path):
    class Saved:
        def __init__(self, vocabulary):
            self.vocabulary = vocabulary

        def save_pretrained(self, folder):
            (Path(folder) / "vocab.json").write_text(json.dumps(self.vocabulary))

    assert tokenizer_identity(Saved({"a": 0})) == tokenizer_identity(Saved({"a": 0}))
    assert tokenizer_identity(Saved({"a": 0})) != tokenizer_identity(Saved({"a": 1}))


def test_a_dataset_without_its_folder_is_refused(tmp_path, corpus, bpe):
    import dataclasses

    data = dataclasses.replace(prepare(tmp_path / "p", corpus), folder=None)
    with pytest.raises(DatasetError, match=r"^dataset 'text': tokenizing caches next to the prepared data"):
        tokenized(data, encoder(bpe), "bpe", len(bpe), "x")


def test_hf_checkpoint_dumped_on_a_text_corpus_round_trips(tmp_path, corpus, bpe):
    """`growcert dump` of a tiny GPT-NeoX with the BPE tokenizer on the `text` corpus, then inspect and estimators."""
    from growcert.models.checkpoint import load_model
    from growcert.stages.alignment import estimate_alignment
    from growcert.stages.depth import estimate_depth
    from growcert.store import open_group

    data = prepare(tmp_path / "prepared", corpus)
    checkpoint = save_tiny(tmp_path / "model", "gpt_neox", vocab_size=len(bpe))
    bpe.save_pretrained(checkpoint)
    store = tmp_path / "step0.zarr"
    command = [sys.executable, "-m", "growcert.cli"]
    dumped = subprocess.run(
        [
            *command,
            "dump",
            "--checkpoint",
            str(checkpoint),
            "--hf",
            json.dumps({"context": CONTEXT}),
            "--data",
            str(data.folder),
            "--settings",
            json.dumps(DUMP),
            "--out",
            str(store),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    (entry,) = entries(data)
    shown = subprocess.run([*command, "inspect", "--json", str(store)], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    described = json.loads(shown.stdout)
    attrs = described["attrs"]
    assert (attrs["family"], attrs["dataset"], attrs["tokenizer"]) == ("hf", "text", str(checkpoint))
    assert attrs["data_sha256"] == data.info["sha256"] and described["complete"] is True
    assert list(described["groups"]) == ["block0", "block1", "block2"]
    # The stored loss of a sample is the model's loss on the cached tokens at the stored token offset.
    model, _, tokens = load_model(checkpoint, load_prepared(data.folder), {"context": CONTEXT})
    assert tokens.info["tokenization"]["cache"] == f"{CACHE_FOLDER}/{entry}" and entries(data) == [entry]
    group = open_group(store, "block2")
    for sample in (0, DUMP["train_examples"]):  # the first train and the first test sample
        stream = tokens.train_x if sample < DUMP["train_examples"] else tokens.test_x
        offset = int(group["index"][sample].values)
        window = torch.from_numpy(stream[offset : offset + CONTEXT + 1].astype(np.int64)).view(1, -1)
        with torch.no_grad():
            loss = model.per_example_loss(model(window[:, :-1]), window[:, 1:])
        assert abs(float(loss) - float(group["loss"][sample].values)) < 1e-5
    alignment = estimate_alignment(
        store, {"MK": [[4, 4]], "reference_mk": [4, 4], "replicates": 20}, log=lambda _: None
    )
    assert set(alignment["point"]) == {"block0", "block1", "block2"}
    assert set(alignment["reduction"]) == {"sum_positions", "flatten"} and set(alignment["n"]) == {
        DUMP["train_examples"]
    }  # per pool
    depth = estimate_depth(store, {"block_hidden": 16}, log=lambda _: None, device="cpu")
    assert (
        set(depth["point"]) == {"block0", "block1", "block2"} and np.isfinite(depth.select_dtypes("number")).all().all()
    )
