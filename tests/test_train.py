"""The training loop: learning happens, runs are reproducible, batches follow the regime."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from growcert.config import stage_settings
from growcert.data.batches import TrainingBatches, examples_at, window_count
from growcert.models.checkpoint import CheckpointError, load_checkpoint
from growcert.stages.train import train_model
from growcert.training import warmup_factor


def settings(family, dataset, width, depth, seed=0, **train):
    base = {
        "steps": 40,
        "batch_size": 32,
        "lr": 0.003,
        "weight_decay": 0.0,
        "betas": [0.9, 0.95],
        "warmup_steps": 5,
        "grad_clip": 1.0,
        "save_steps": [20, 40],
        "eval_every": 20,
        "eval_examples": 128,
        "single_pass": True,
    }
    base.update(train)
    model = {"head_dim": 8, "context": 32, "mlp_hidden": None, "rope_base": 10000.0} if family == "llama" else {}
    return {
        "family": family,
        "dataset": dataset,
        "width": width,
        "depth": depth,
        "seed": seed,
        "model": model,
        "train": base,
    }


@pytest.mark.parametrize(
    "family, dataset, width, depth, steps, margin",
    [
        ("resnet", "digits", 1, 8, 60, 1.0),
        ("llama", "shakespeare", 32, 1, 80, 1.5),
    ],
)
def test_training_lowers_held_out_loss(prepared, tmp_path, family, dataset, width, depth, steps, margin):
    run = settings(family, dataset, width, depth, steps=steps, save_steps=[steps], eval_every=steps)
    metrics = train_model(run, prepared(dataset), tmp_path, log=lambda _: None, device="cpu")
    first, last = metrics["history"][0], metrics["history"][-1]
    assert first["step"] == 0 and last["step"] == steps
    # Untrained: ~ln(10) = 2.30 nats for digits, ~ln(256) = 5.55 for bytes. A real fall, not noise.
    assert last["test_loss"] < first["test_loss"] - margin, (first, last)
    assert last["test_acc"] > first["test_acc"]
    assert json.loads((tmp_path / "metrics.json").read_text())["history"] == metrics["history"]


def state(path):
    return torch.load(path, weights_only=False)["state_dict"]


NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
ON_CUDA = [NEEDS_CUDA, pytest.mark.cuda]


@pytest.mark.parametrize(
    "family, dataset, width, depth, device",
    [
        ("resnet", "digits", 1, 8, "cpu"),
        ("llama", "shakespeare", 16, 1, "cpu"),
        pytest.param("resnet", "digits", 1, 8, "cuda", marks=ON_CUDA),
        pytest.param("llama", "shakespeare", 16, 1, "cuda", marks=ON_CUDA),
    ],
)
def test_same_seed_gives_identical_checkpoints(prepared, tmp_path, family, dataset, width, depth, device):
    runs = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        train_model(
            settings(family, dataset, width, depth, seed=seed, steps=20, save_steps=[10, 20]),
            prepared(dataset),
            tmp_path / name,
            log=lambda _: None,
            device=device,
        )
        runs[name] = state(tmp_path / name / "step20.pt")
    assert runs["a"].keys() == runs["b"].keys()
    for key in runs["a"]:
        assert torch.equal(runs["a"][key], runs["b"][key]), key
    assert any(
        not torch.equal(runs["a"][key], runs["c"][key]) for key in runs["a"] if runs["a"][key].is_floating_point()
    )
    assert not all(torch.equal(state(tmp_path / "a" / "step10.pt")[k], runs["a"][k]) for k in runs["a"])


def test_device_auto_is_the_cpu_here_bit_for_bit_and_is_recorded(prepared, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("auto is the CPU only on a machine without CUDA")
    run = settings("resnet", "digits", 1, 8, steps=20, save_steps=[20])
    for device in ("cpu", "auto"):
        train_model(run, prepared("digits"), tmp_path / device, log=lambda _: None, device=device)
    cpu, auto = state(tmp_path / "cpu" / "step20.pt"), state(tmp_path / "auto" / "step20.pt")
    assert all(torch.equal(cpu[key], auto[key]) for key in cpu)
    metrics = json.loads((tmp_path / "auto" / "metrics.json").read_text())
    assert metrics["provenance"]["device"] == "cpu"
    assert torch.load(tmp_path / "auto" / "step20.pt", weights_only=False)["provenance"]["device"] == "cpu"


@pytest.mark.parametrize("family, dataset, width, depth", [("resnet", "digits", 1, 8), ("llama", "shakespeare", 16, 1)])
def test_bf16_autocasts_the_passes_and_keeps_fp32_weights_and_optimizer_state(
    prepared, tmp_path, family, dataset, width, depth
):
    from growcert.models import build_model
    from growcert.training import Trainer

    data = prepared(dataset)
    run = stage_settings("train", settings(family, dataset, width, depth, steps=30, save_steps=[30], precision="bf16"))
    context = run["model"].get("context") if data.info["kind"] == "text" else None
    seen = []
    torch.manual_seed(0)
    model = build_model(family, width, depth, data.info, run["model"])
    model.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    trainer = Trainer(model, run["train"], data, 0, context, label="bf16")
    losses = [trainer.step(step).item() for step in range(1, 31)]
    # the logits came out of autocast in bfloat16; the loss is taken in float32, and stays finite
    assert set(seen) == {torch.bfloat16} and all(np.isfinite(losses))
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    moments = [tensor for values in trainer.optimizer.state.values() for tensor in values.values() if tensor.ndim]
    assert moments and all(tensor.dtype == torch.float32 for tensor in moments)
    # and it is a different computation from fp32: the checkpoints differ
    for precision in ("fp32", "bf16"):
        train_model(
            settings(family, dataset, width, depth, steps=10, save_steps=[10], precision=precision),
            data,
            tmp_path / precision,
            log=lambda _: None,
            device="cpu",
        )
    fp32, bf16 = state(tmp_path / "fp32" / "step10.pt"), state(tmp_path / "bf16" / "step10.pt")
    assert any(not torch.equal(fp32[key], bf16[key]) for key in fp32 if fp32[key].is_floating_point())


def test_checkpoint_round_trip_and_provenance(prepared, tmp_path):
    data = prepared("digits")
    run = settings("resnet", "digits", 1, 8, steps=10, save_steps=[10], eval_every=10)
    train_model(run, data, tmp_path, log=lambda _: None, device="cpu")
    model, meta = load_checkpoint(tmp_path / "step10.pt")
    # the settings as trained: the given ones with the schema's defaults filled in (nothing else, nothing lost)
    assert meta["step"] == 10 and meta["provenance"]["settings"] == stage_settings("train", run)
    assert all(meta["provenance"]["settings"]["train"][key] == value for key, value in run["train"].items())
    assert {"config_hash", "code_hash", "versions", "seed"} <= set(meta["provenance"])
    inputs = torch.from_numpy(data.test_x[:8])
    reference = torch.load(tmp_path / "step10.pt", weights_only=False)
    assert torch.equal(model(inputs), load_checkpoint(tmp_path / "step10.pt")[0](inputs))
    assert not model.training and reference["family"] == "resnet"


def test_missing_or_corrupt_checkpoint_is_one_line(tmp_path):
    with pytest.raises(CheckpointError, match="no such file") as caught:
        load_checkpoint(tmp_path / "nothing.pt")
    assert str(tmp_path / "nothing.pt") in str(caught.value)
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="unreadable") as caught:
        load_checkpoint(tmp_path / "bad.pt")
    assert "\n" not in str(caught.value)


def test_single_pass_text_batches_never_repeat_a_window(prepared):
    data = prepared("shakespeare")
    context = 32
    available = window_count(data.train_x, context)
    batches = TrainingBatches(data, batch_size=64, steps=50, seed=3, context=context, single_pass=True)
    seen = np.concatenate([batches.order[: 64 * 50]])
    assert len(np.unique(seen)) == len(seen) <= available
    inputs, targets = batches.next()
    assert inputs.shape == targets.shape == (64, context)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])  # targets are the inputs shifted by one byte
    with pytest.raises(ValueError, match="single_pass"):
        TrainingBatches(data, batch_size=available, steps=2, seed=0, context=context, single_pass=True)


def test_text_examples_are_the_stream_bytes(prepared):
    data = prepared("shakespeare")
    examples = examples_at(data, "test", np.array([0, 5]), context=16)
    assert bytes(examples.inputs[1].numpy().astype(np.uint8)) == bytes(data.test_x[80:96])
    assert list(examples.index) == [0, 80]


def test_warmup_schedule():
    assert [warmup_factor(step, 4) for step in (1, 2, 4, 10)] == [0.25, 0.5, 1.0, 1.0]
    assert warmup_factor(1, 0) == 1.0


def test_cli_reports_a_missing_dataset_in_one_line(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "growcert.cli",
            "train",
            "--data",
            str(tmp_path / "absent"),
            "--settings",
            json.dumps(settings("resnet", "digits", 1, 8)),
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "absent" in lines[0], result.stderr


def test_runtime_sets_deterministic_algorithms_threads_and_seed_then_puts_them_back():
    from growcert.runtime import torch_runtime

    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.get_num_threads(),
    )
    with torch_runtime(1, seed=3, device="cpu"):
        assert (
            torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
        )
        assert torch.get_num_threads() == 1
        drawn = torch.rand(3)
    assert (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.get_num_threads(),
    ) == before
    torch.manual_seed(3)
    assert torch.equal(drawn, torch.rand(3))
    with torch_runtime(1, deterministic=False):
        assert not torch.are_deterministic_algorithms_enabled()
