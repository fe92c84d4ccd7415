"""Per-example capture: stored q is each example's own gradient, stored z its own activation."""

import numpy as np
import pytest
import torch
from helpers import relative_error, single_example

from growcert.config import stage_settings
from growcert.data.batches import fixed_examples
from growcert.models.capture import capture_batch
from growcert.models.checkpoint import load_checkpoint
from growcert.stages.dump import dump_gradients
from growcert.store import open_group

DUMP = {"train_examples": 24, "test_examples": 16, "batch_size": 7, "seed": 1, "points": None}


NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture(
    scope="module",
    params=[
        ("resnet", "digits", 1, 14, "cpu"),
        ("llama", "shakespeare", 16, 3, "cpu"),
        pytest.param(("resnet", "digits", 1, 14, "cuda"), marks=[NEEDS_CUDA, pytest.mark.cuda]),
        pytest.param(("llama", "shakespeare", 16, 3, "cuda"), marks=[NEEDS_CUDA, pytest.mark.cuda]),
    ],
    ids=["resnet", "llama", "resnet-cuda", "llama-cuda"],
)
def dumped(request, prepared, tmp_path_factory, train_tiny):
    """A store dumped on the device; the tests compare it with single-example autograd on the CPU."""
    family, dataset, width, depth, device = request.param
    checkpoint = train_tiny(prepared(dataset), tmp_path_factory.mktemp(f"run-{family}"), family, dataset, width, depth)
    store = tmp_path_factory.mktemp(f"store-{family}-{device}") / "step8.zarr"
    dump_gradients(
        checkpoint, prepared(dataset), store, stage_settings("dump", DUMP), log=lambda _: None, device=device
    )
    return checkpoint, store, prepared(dataset)


def test_stored_q_is_each_examples_own_gradient(dumped):
    checkpoint, store, data = dumped
    model, meta = load_checkpoint(checkpoint)
    context = meta["model_options"].get("context") if data.info["kind"] == "text" else None
    train = fixed_examples(data, "train", DUMP["train_examples"], DUMP["seed"], context)
    test = fixed_examples(data, "test", DUMP["test_examples"], DUMP["seed"], context)
    points = list(model.points)
    checked = 0
    for point in (points[0], points[len(points) // 2], points[-1]):
        group = open_group(store, point)
        for sample, (examples, row) in {
            0: (train, 0),
            5: (train, 5),
            23: (train, 23),
            24: (test, 0),
            39: (test, 15),
        }.items():
            z_alone, q_alone = single_example(model, examples.inputs[row], examples.targets[row], point)
            assert relative_error(group["q"][sample].values, q_alone) < 1e-5, (point, sample)
            assert relative_error(group["z"][sample].values, z_alone) < 1e-6, (point, sample)
            assert int(group["index"][sample].values) == examples.index[row]
            checked += 1
        expected_split = ["train"] * 24 + ["test"] * 16
        assert list(np.asarray(group["split"].values).astype(object)) == expected_split
    assert checked == 15


def test_native_dims(dumped):
    _, store, data = dumped
    group = open_group(store, "block1")
    expected = (
        ("sample", "channel", "height", "width") if data.info["kind"] == "image" else ("sample", "token", "feature")
    )
    assert group["q"].dims == group["z"].dims == expected
    assert group["q"].dtype == np.float32 and group.sizes["sample"] == 40


def test_batch_capture_matches_single_examples_with_batchnorm_statistics(prepared):
    """BatchNorm with non-trivial running statistics, in eval mode: examples stay independent."""
    from growcert.models import build_model

    torch.manual_seed(0)
    data = prepared("digits")
    model = build_model("resnet", 1, 8, data.info)
    model.train()
    with torch.no_grad():
        model(torch.from_numpy(data.train_x[:64]) * 1.7 + 0.3)  # move the running statistics
    model.eval()
    inputs, targets = torch.from_numpy(data.test_x[:6]), torch.from_numpy(data.test_y[:6])
    captured = capture_batch(model, inputs, targets)
    for i in range(6):
        for point in ("block0", "block2"):
            z_alone, q_alone = single_example(model, inputs[i], targets[i], point)
            assert relative_error(captured.q[point][i], q_alone) < 1e-5
            assert relative_error(captured.z[point][i], z_alone) < 1e-6  # batched kernels round differently
    model.train()
    with pytest.raises(ValueError, match="eval mode"):
        capture_batch(model, inputs, targets)
