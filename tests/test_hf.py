"""The `hf` family: tiny GPT-NeoX (Pythia), GPT-2 and Qwen2 models built locally (random weights, no download),
saved with save_pretrained and read back through growcert's loader, dump, interventions, depth and workflow."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import transformers
import yaml
from helpers import relative_error, single_example

from growcert.config import stage_settings
from growcert.data import load_prepared, prepare_dataset
from growcert.errors import CheckpointError, ConfigError
from growcert.models.blocks import insert_blocks
from growcert.models.capture import capture_batch
from growcert.models.checkpoint import load_model
from growcert.models.hf import byte_token_ids, load_byte_level_lm, load_causal_lm, load_pretrained
from growcert.plan import validate_config
from growcert.stages.dump import dump_gradients
from growcert.stages.interventions import run_interventions
from growcert.store import open_group, open_store

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURES = ("gpt_neox", "gpt2", "qwen2")
CONTEXT = 16
DUMP = {"train_examples": 12, "test_examples": 12, "batch_size": 5, "seed": 1, "points": None}


def tiny_config(architecture: str, width: int, depth: int, vocab_size: int = 256):
    """A few-thousand-parameter config of a real architecture (heads of 8 features)."""
    heads = max(1, width // 8)
    if architecture == "gpt_neox":
        return transformers.GPTNeoXConfig(
            vocab_size=vocab_size,
            hidden_size=width,
            num_hidden_layers=depth,
            num_attention_heads=heads,
            intermediate_size=2 * width,
            max_position_embeddings=64,
            bos_token_id=0,
            eos_token_id=0,
        )
    if architecture == "gpt2":
        return transformers.GPT2Config(
            vocab_size=vocab_size,
            n_embd=width,
            n_layer=depth,
            n_head=heads,
            n_positions=64,
            bos_token_id=0,
            eos_token_id=0,
        )
    return transformers.Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=depth,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=64,
        bos_token_id=0,
        eos_token_id=0,
    )


def save_tiny(
    folder: Path, architecture: str, width: int = 16, depth: int = 2, seed: int = 0, vocab_size: int = 256
) -> Path:
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(tiny_config(architecture, width, depth, vocab_size))
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def shakespeare(tmp_path_factory):
    """(folder, PreparedDataset) of the Shakespeare text (the CLI needs the folder)."""
    folder = tmp_path_factory.mktemp("prepared-shakespeare-hf")
    prepare_dataset("shakespeare", folder, {})
    return folder, load_prepared(folder)


@pytest.fixture(scope="module", params=ARCHITECTURES)
def dumped(request, tmp_path_factory, shakespeare):
    """(architecture, checkpoint folder, store) of a tiny saved model of each architecture."""
    folder = save_tiny(tmp_path_factory.mktemp(f"hf-{request.param}") / "model", request.param)
    store = folder.parent / "step0.zarr"
    dump_gradients(
        folder,
        shakespeare[1],
        store,
        stage_settings("dump", DUMP),
        log=lambda _: None,
        hf={"context": CONTEXT},
        device="cpu",
    )
    return request.param, folder, store


def test_points_sit_on_the_residual_stream(dumped, shakespeare):
    """block0 is what enters layer 1, block{i} what leaves layer i; wrapping leaves the logits bit for bit."""
    _, folder, _ = dumped
    model, meta = load_pretrained(folder, {"context": CONTEXT})
    assert list(model.points) == ["block0", "block1", "block2"] and (model.width, model.depth) == (16, 2)
    assert meta["family"] == "hf" and meta["store_attrs"]["tokenizer"] == "bytes"
    plain = load_causal_lm(folder)
    tokens = torch.from_numpy(shakespeare[1].train_x[: 3 * CONTEXT].astype(np.int64)).view(3, CONTEXT)
    with torch.no_grad():
        reference = plain(input_ids=tokens, output_hidden_states=True, use_cache=False)
        assert torch.equal(model(tokens), reference.logits)
    captured = capture_batch(model, tokens, tokens)
    for index in range(model.depth):  # HF's last hidden state is after the final norm, so it is not compared
        assert torch.allclose(captured.z[f"block{index}"], reference.hidden_states[index], atol=1e-6), index


def test_stored_q_is_each_examples_own_gradient(dumped, shakespeare):
    _, folder, store = dumped
    model, meta, data = load_model(folder, shakespeare[1], {"context": CONTEXT})
    attrs = dict(open_store(store).attrs)
    assert (attrs["family"], attrs["width"], attrs["depth"], attrs["tokenizer"]) == ("hf", 16, 2, "bytes")
    from growcert.data.batches import fixed_examples

    train = fixed_examples(data, "train", DUMP["train_examples"], DUMP["seed"], CONTEXT)
    test = fixed_examples(data, "test", DUMP["test_examples"], DUMP["seed"], CONTEXT)
    for point in model.points:
        group = open_group(store, point)
        assert group["q"].dims == ("sample", "token", "feature") and group.sizes["sample"] == 24
        for sample, (examples, row) in {0: (train, 0), 7: (train, 7), 12: (test, 0), 23: (test, 11)}.items():
            z_alone, q_alone = single_example(model, examples.inputs[row], examples.targets[row], point)
            assert relative_error(group["q"][sample].values, q_alone) < 1e-5, (point, sample)
            assert relative_error(group["z"][sample].values, z_alone) < 1e-6, (point, sample)
            assert int(group["index"][sample].values) == examples.index[row]


def test_inserted_zero_output_block_leaves_logits_unchanged(dumped, shakespeare):
    """Zero W_out: logits identical; its autograd gradient is Σ q hᵀ from the captured (z, q); nonzero: they move."""
    _, folder, _ = dumped
    model, _ = load_pretrained(folder, {"context": CONTEXT})
    tokens = torch.from_numpy(shakespeare[1].test_x[: 2 * (CONTEXT + 1)].astype(np.int64)).view(2, CONTEXT + 1)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    with torch.no_grad():
        before = model(inputs)
    captured = capture_batch(model, inputs, targets)
    blocks = insert_blocks(model, list(model.points), seed=3)
    with torch.no_grad():
        assert torch.equal(model(inputs), before)
    loss = model.per_example_loss(model(inputs), targets).mean()
    gradients = torch.autograd.grad(loss, [block.weight for block in blocks])
    for point, block, gradient in zip(model.points, blocks, gradients):
        expected = block.weight_gradient(captured.z[point], captured.q[point])
        assert relative_error(gradient, expected) < 1e-5, point
    with torch.no_grad():
        blocks[-1].weight.normal_()
        assert not torch.allclose(model(inputs), before)


@pytest.mark.parametrize("dumped", ["gpt2"], indirect=True)  # one suffices: the intervention code is family-generic
def test_interventions_predict_the_held_out_change(dumped, shakespeare):
    _, folder, store = dumped
    settings = {"M": 4, "K": 4, "draws": 2, "epsilons": [1e-4, 1.0], "max_points": 2, "seed": 2}
    table = run_interventions(
        folder, store, shakespeare[1], settings, log=lambda _: None, hf={"context": CONTEXT}, device="cpu"
    )
    smallest = table[table["epsilon"] == 1e-4]
    assert set(smallest["variant"]) == {"shared", "per_position", "block"} and set(table["family"]) == {"hf"}
    assert np.allclose(smallest["ratio"], 1.0, atol=0.02), smallest[["point", "variant", "ratio"]]


def test_checkpoint_tokenizer_reads_the_text(tmp_path, shakespeare):
    """A checkpoint folder with a tokenizer: the text is re-read through it, chunk by chunk; the dump stores tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(
        [shakespeare[1].train_x[:200_000].tobytes().decode("utf-8", "replace")],
        trainers.WordLevelTrainer(vocab_size=300, special_tokens=["[UNK]"]),
    )
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]")
    folder = save_tiny(tmp_path / "worded", "gpt_neox", vocab_size=len(fast))
    fast.save_pretrained(folder)
    model, meta, data = load_model(folder, shakespeare[1], {"context": CONTEXT})
    assert meta["store_attrs"]["tokenizer"] == str(folder) and data.info["vocab_size"] == model.vocab_size
    first_chunk = (
        shakespeare[1].train_x[: shakespeare[1].segment_starts("train")[1]].tobytes().decode("utf-8", "replace")
    )
    expected = fast(first_chunk, add_special_tokens=False)["input_ids"]
    assert data.train_x[: len(expected)].tolist() == expected and len(data.train_x) < len(shakespeare[1].train_x) / 2
    store = dump_gradients(
        folder,
        shakespeare[1],
        tmp_path / "worded.zarr",
        stage_settings("dump", {**DUMP, "train_examples": 6, "test_examples": 6}),
        log=lambda _: None,
        hf={"context": CONTEXT},
        device="cpu",
    )
    group = open_group(store, "block1")
    offset = int(group["index"][0].values)  # a token offset in the tokenized training stream
    window = torch.from_numpy(data.train_x[offset : offset + CONTEXT + 1].astype(np.int64)).view(1, -1)  # int32 ids
    with torch.no_grad():
        loss = model.per_example_loss(model(window[:, :-1]), window[:, 1:])
    assert abs(float(loss) - float(group["loss"][0].values)) < 1e-5


def test_missing_checkpoint_is_one_line_naming_where_and_how(tmp_path, shakespeare):
    missing = tmp_path / "checkpoints" / "pythia-70m"
    with pytest.raises(CheckpointError) as error:
        load_causal_lm(missing, repo="growcert-tests/no-such-model")
    message = str(error.value)
    assert str(missing) in message and "hf download growcert-tests/no-such-model --local-dir" in message
    assert "allow_download" in message and "\n" not in message
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "growcert.cli",
            "dump",
            "--checkpoint",
            str(missing),
            "--hf",
            "{}",
            "--data",
            str(shakespeare[0]),
            "--out",
            str(tmp_path / "x.zarr"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("growcert dump: error: hf checkpoint") and str(missing) in lines[0]
    assert "hf download" in lines[0] and not (tmp_path / "x.zarr").exists()


def test_missing_relative_folder_is_not_mistaken_for_a_hub_repository(tmp_path, monkeypatch):
    # "checkpoints/pythia-70m" has the shape of a repository id; with a local checkpoints/ folder it is a
    # missing checkpoint folder, and the hint names the placeholder repository, not the path
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(CheckpointError) as error:
        load_causal_lm("checkpoints/pythia-70m")
    assert "hf download ORG/NAME --local-dir" in str(error.value) and "allow_download" not in str(error.value)


@pytest.mark.parametrize("dumped", ["gpt_neox"], indirect=True)
def test_declared_width_must_match_the_checkpoint(dumped):
    _, folder, _ = dumped
    with pytest.raises(CheckpointError, match="has width 16 .* declared with width 512"):
        load_pretrained(folder, {"width": 512, "name": "pythia-70m"})


def test_byte_level_lm_maps_bytes_to_the_tokenizers_byte_tokens(tmp_path, shakespeare):
    """load_byte_level_lm (the DPO task's loader): a byte-level BPE tokenizer's single-byte tokens decode to
    their byte, and byte_logits are the full logits at those tokens; no tokenizer: byte b is token b."""
    from tokenizers import ByteLevelBPETokenizer

    text = shakespeare[1].train_x[:50_000].tobytes().decode("utf-8", "replace")
    trained = ByteLevelBPETokenizer()
    trained.train_from_iterator([text], vocab_size=400, show_progress=False)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=trained._tokenizer)
    folder = save_tiny(tmp_path / "bpe", "qwen2", vocab_size=len(fast))
    fast.save_pretrained(folder)
    loaded = load_byte_level_lm(folder)
    assert loaded.mapping.startswith("byte-level BPE") and len(set(loaded.byte_to_id.tolist())) == 256
    assert [fast.decode([int(loaded.byte_to_id[byte])]) for byte in b"To be, or not"] == list("To be, or not")
    hello = torch.tensor([list(b"O Romeo")])
    with torch.no_grad():
        full = loaded.model(loaded.byte_to_id[hello])
        assert torch.equal(loaded.byte_logits(hello), full[..., loaded.byte_to_id])
    assert torch.equal(load_byte_level_lm(save_tiny(tmp_path / "plain", "gpt2")).byte_to_id, torch.arange(256))


def test_byte_fallback_tokens_are_found():
    """SentencePiece-style vocabularies (LLaMA) name bytes <0x00> ... <0xFF>."""

    class Vocabulary:
        def get_vocab(self):
            return {"<unk>": 0, **{f"<0x{byte:02X}>": 3 + byte for byte in range(256)}, "▁the": 259}

    ids, mapping = byte_token_ids(Vocabulary(), 300)
    assert ids.tolist() == list(range(3, 259)) and mapping.startswith("byte-fallback")
    with pytest.raises(CheckpointError, match="vocabulary of 100"):
        byte_token_ids(None, 100)


def test_config_refuses_two_models_in_one_results_folder():
    models = [{"name": "a", "width": 16, "depth": 2}, {"name": "b", "width": 16, "depth": 2}]
    with pytest.raises(ConfigError, match=r"config key 'pretrained.models\[1\]': b has the width, depth"):
        validate_config({"pretrained": {"models": models}})


@pytest.mark.slow
def test_workflow_dumps_and_estimates_two_tiny_widths(tmp_path):
    """A real Snakemake run over a configfile pointing at two saved tiny models: dump -> alignment -> depth
    (and one intervention), then a second plan has nothing to do."""
    root = tmp_path / "checkpoints"
    save_tiny(root / "tiny-neox-16", "gpt_neox", width=16, depth=2)
    save_tiny(root / "tiny-neox-32", "gpt_neox", width=32, depth=2, seed=1)
    results = tmp_path / "results"
    configfile = tmp_path / "tiny.yaml"
    configfile.write_text(
        yaml.safe_dump(
            {
                "results": str(results),
                "prepared_data": str(tmp_path / "prepared"),
                "pretrained": {
                    "checkpoint_root": str(root),
                    "context": CONTEXT,
                    "intervene": True,
                    "dump": {"train_examples": 16, "test_examples": 16, "batch_size": 8},
                    "depth": {"block_hidden": 16},
                    "models": [
                        {"name": "tiny-neox-16", "width": 16, "depth": 2, "step": 7},
                        {"name": "tiny-neox-32", "width": 32, "depth": 2, "step": 7},
                    ],
                },
                "alignment": {"MK": [[4, 4]], "reference_mk": [4, 4], "replicates": 20},
                "intervene": {"M": 4, "K": 4, "draws": 2, "epsilons": [0.0001, 1.0], "max_points": 2},
            }
        )
    )
    tables = [
        f"{results}/stats/{kind}/hf/shakespeare/w{width}_d2_s0/step7.csv"
        for kind in ("alignment", "depth")
        for width in (16, 32)
    ]
    targets = tables + [f"{results}/interventions/hf/shakespeare/w16_d2_s0/step7.csv"]
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "HF_HOME": str(tmp_path / "hf")}
    command = [sys.executable, "-m", "snakemake", "--cores", "2", *targets, "--configfile", str(configfile)]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    depth = pd.concat([pd.read_csv(path) for path in tables[2:]])
    assert set(depth["family"]) == {"hf"} and set(depth["width"]) == {16, 32} and set(depth["step"]) == {7}
    assert set(depth["point"]) == {"block0", "block1", "block2"} and set(depth["hidden"]) == {16}
    alignment = pd.concat([pd.read_csv(path) for path in tables[:2]])
    assert set(alignment["width"]) == {16, 32} and set(alignment["reduction"]) == {"sum_positions", "flatten"}
    store = results / "grads" / "hf" / "shakespeare" / "w32_d2_s0" / "step7.zarr"
    assert open_store(store).attrs["model_name"] == "tiny-neox-32" and open_group(store, "block2").sizes["sample"] == 32
    interventions = pd.read_csv(targets[-1])
    assert set(interventions["family"]) == {"hf"} and len(interventions) == 2 * 3 * 2 * 2
    again = subprocess.run(command + ["--dry-run"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]
