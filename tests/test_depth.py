"""P3's first-order depth value: insertion is exact, the store-side value is the autograd gradient,
the estimator is its U-statistic definition, a planted null reads as zero, saturation decides."""

import numpy as np
import pandas as pd
import pytest
import torch

from growcert.block_features import block_features
from growcert.config import stage_settings
from growcert.data.batches import dump_examples
from growcert.models import build_model
from growcert.models.blocks import insert_block, insert_blocks, make_block
from growcert.models.checkpoint import load_checkpoint
from growcert.report.depth import plot_depth, recommend_depth
from growcert.stages.depth import COLUMNS, estimate_depth
from growcert.stages.dump import dump_gradients
from growcert.stats import depth as stats
from growcert.store import GroupSpec, StoreWriter, open_group, open_store

DUMP = {"train_examples": 24, "test_examples": 24, "batch_size": 8, "seed": 1, "points": None}
LLAMA = {"head_dim": 8, "context": 16, "mlp_hidden": None, "rope_base": 10000.0}  # same as conftest.LLAMA_TINY
FAMILIES = [("resnet", "digits", 1, 8), ("llama", "shakespeare", 16, 2)]


def tiny_model(prepared, family, dataset, width, depth):
    torch.manual_seed(0)
    model = build_model(family, width, depth, prepared(dataset).info, LLAMA if family == "llama" else {})
    return model.eval()


def some_inputs(prepared, dataset):
    data = prepared(dataset)
    if data.info["kind"] == "image":
        return torch.from_numpy(data.test_x[:6])
    return torch.from_numpy(data.test_x[: 6 * 16].astype(np.int64)).reshape(6, 16)


@pytest.mark.parametrize("family, dataset, width, depth", FAMILIES, ids=["resnet", "llama"])
def test_insertion_leaves_the_function_bit_identical(prepared, family, dataset, width, depth):
    model = tiny_model(prepared, family, dataset, width, depth)
    inputs = some_inputs(prepared, dataset)
    with torch.no_grad():
        before = model(inputs)
        blocks = insert_blocks(model, list(model.points), seed=3)
        blocks.append(insert_block(model, "block1", seed=4, trainable=True))  # two blocks at one point
        after = model(inputs)
    assert torch.equal(before, after)
    assert [type(b).__name__ for b in blocks[-2:]] == ["ZeroOutputBlock", "GrowableBlock"]
    with torch.no_grad():  # the blocks are on the path: a nonzero W_out moves the outputs
        blocks[0].weight.fill_(0.1)
        assert (model(inputs) - before).abs().max() > 1e-4


@pytest.fixture(scope="module", params=FAMILIES, ids=["resnet", "llama"])
def dumped(request, prepared, tmp_path_factory, train_tiny):
    """A tiny model trained for 8 steps, and its gradient store."""
    family, dataset, width, depth = request.param
    folder = tmp_path_factory.mktemp(f"depth-{family}")
    train_tiny(prepared(dataset), folder, family, dataset, width, depth, model=LLAMA if family == "llama" else {})
    dump_gradients(
        folder / "step8.pt",
        prepared(dataset),
        folder / "step8.zarr",
        stage_settings("dump", DUMP),
        log=lambda _: None,
        device="cpu",
    )
    return folder / "step8.pt", folder / "step8.zarr", prepared(dataset)


def test_autograd_gradient_of_inserted_w_out_equals_the_stored_estimate(dumped):
    checkpoint, store, data = dumped
    model, meta = load_checkpoint(checkpoint)
    context = meta["model_options"].get("context") if data.info["kind"] == "text" else None
    examples, split = dump_examples(data, DUMP, context)
    test = split == "test"
    table = estimate_depth(store, {"seed": 5, "pools": ["test"]}, log=lambda _: None, device="cpu")
    for point in model.points:
        block = insert_block(model, point, seed=5)
        loss = model.per_example_loss(model(examples.inputs[test]), examples.targets[test]).mean()
        (autograd,) = torch.autograd.grad(loss, block.weight)
        del model.points[point].inserted[0]  # the only block: back to the checkpoint's network

        group = open_group(store, point)
        z, q = (torch.from_numpy(group[v].values[test]).double() for v in ("z", "q"))
        offline = make_block(meta["family"], block.weight.shape[0], point, seed=5, dtype=torch.float64)
        g, _, _ = block_features(offline, z, q)
        stored = g.mean(dim=0)
        scale = float(stored.norm())
        assert scale > 0
        assert float((autograd.double() - stored).norm()) / scale < 1e-5, point
        assert float((offline.weight_gradient(z, q) - stored).norm()) / scale < 1e-10  # residual.py's formula
        row = table[table["point"] == point].iloc[0]
        assert row["value_plugin"] == pytest.approx(float(autograd.double().square().sum()), rel=1e-4)


def test_estimate_depth_table_and_decision(dumped, tmp_path):
    _, store, _ = dumped
    table = estimate_depth(store, {}, log=lambda _: None, device="cpu")
    assert list(table.columns) == COLUMNS
    assert set(table["pool"]) == {"test", "train"} and (table["n"] == 24).all()
    assert (
        list(table["point"].unique()) == list(open_store(store).attrs["groups"])
        and len(table) == 2 * table["point"].nunique()
    )
    numeric = [
        "value",
        "value_se",
        "value_plugin",
        "scaled_value",
        "scaled_value_se",
        "explained_fraction",
        "grad_norm_sq",
        "grad_sq_mean",
        "mean_z_sq",
        "mean_h_sq",
    ]
    assert np.isfinite(table[numeric].to_numpy(float)).all()
    assert (table["value_lo"] <= table["value"]).all() and (table["value"] <= table["value_hi"]).all()
    assert (table["hidden"] == 2 * table["features"]).all()
    decision = recommend_depth(table, draws=50)
    assert set(decision["view"]) == {"within_model"} and set(decision["criterion"]) == {"value", "scaled_value"}
    plot_depth(table, tmp_path / "depth.png")
    assert (tmp_path / "depth.png").stat().st_size > 1000


def brute_force_value(q, h):
    """Σ_{i≠j} ⟨G_i, G_j⟩ / n(n−1), ⟨G_i, G_j⟩ by the Gram identity Σ_{t,s} (q_it·q_js)(h_it·h_js)."""
    n = len(q)
    total = 0.0
    for i in range(n):
        for j in range(n):
            if i != j:
                total += float(((q[i] @ q[j].T) * (h[i] @ h[j].T)).sum())
    return total / (n * (n - 1))


@pytest.mark.parametrize("family, shape", [("llama", (3, 4)), ("resnet", (4, 2, 3))])
def test_unbiased_value_is_its_u_statistic_definition(family, shape):
    generator = torch.Generator().manual_seed(0)
    z = torch.randn(7, *shape, generator=generator, dtype=torch.float64)
    q = torch.randn(7, *shape, generator=generator, dtype=torch.float64) + 0.3
    features = shape[0] if family == "resnet" else shape[-1]
    block = make_block(family, features, "block2", hidden=5, seed=1, dtype=torch.float64)
    g, h, q_positions = block_features(block, z, q)
    explicit = torch.stack([sum(torch.outer(q_positions[i, t], h[i, t]) for t in range(h.shape[1])) for i in range(7)])
    assert torch.allclose(g, explicit, rtol=1e-12, atol=1e-12)  # G_i = Σ_t q_t h_tᵀ
    row = stats.first_order_value(g.reshape(7, -1).numpy())
    assert row["value"] == pytest.approx(brute_force_value(q_positions.numpy(), h.numpy()), rel=1e-10)
    assert row["value_plugin"] == pytest.approx(float(g.mean(0).square().sum()), rel=1e-10)


def planted_store(path, n=400, tokens=6, features=8, signal=0.0, seed=0):
    """A store whose q is independent zero-mean noise (+ `signal` × the block's A h(z) in group block1)."""
    rng = np.random.default_rng(seed)
    split = np.array(["train"] * (n // 2) + ["test"] * (n // 2), dtype=object)
    specs = [GroupSpec(name, ("token", "feature"), (tokens, features)) for name in ("block0", "block1")]
    attrs = {"family": "llama", "dataset": "planted", "width": features, "depth": 1, "seed": 0, "step": 0}
    writer = StoreWriter(path, specs, split, np.arange(n), np.full(n, -1), attrs)
    truth = {}
    for name in ("block0", "block1"):
        z = rng.normal(0.0, 3.0, (n, tokens, features)).astype(np.float32)
        noise = rng.normal(0.0, 0.1, (n, tokens, features))
        planted = np.zeros_like(noise)
        if name == "block1" and signal:
            h = make_block("llama", features, name, seed=0, dtype=torch.float64).hidden(torch.from_numpy(z).double())
            planted = signal * (h.numpy() @ rng.standard_normal((2 * features, features)) / np.sqrt(2 * features))
        q = (planted + noise).astype(np.float32)
        truth[name] = float(np.square(planted).sum() / (np.square(planted).sum() + np.square(noise).sum()))
        writer.write(name, 0, {"z": z, "q": q, "loss": np.zeros(n, np.float32)})
    writer.finish()
    return truth


def test_planted_null_reads_as_zero_while_the_plugin_does_not(tmp_path):
    """E[q | z] = 0 by construction: the unbiased value's interval holds zero, the plug-in sits far above it."""
    truth = planted_store(tmp_path / "planted.zarr", signal=0.15)
    table = estimate_depth(tmp_path / "planted.zarr", {}, log=lambda _: None, device="cpu").set_index(["point", "pool"])
    for pool in ("test", "train"):
        null = table.loc[("block0", pool)]
        assert null["value_lo"] <= 0.0 <= null["value_hi"] and null["status"] == stats.STATUS_NULL
        assert null["scaled_value_lo"] <= 0.0 <= null["scaled_value_hi"]
        assert null["value_plugin"] > null["value_hi"] + 2 * null["value_se"]  # biased by tr Cov(G)/n
        assert null["explained_fraction"] < 0.0 < truth["block1"] - 0.1  # fitting noise only costs, held out
        signal = table.loc[("block1", pool)]
        assert signal["value_lo"] > 0 and signal["status"] == stats.STATUS_OK
        assert signal["explained_fraction"] == pytest.approx(truth["block1"], abs=0.03)  # held-out R² ≈ the truth


def test_null_value_is_unbiased_and_its_interval_covers_zero():
    """Over independent planted-null draws: the unbiased value averages to 0 (within 4 Monte Carlo SE), its 95 %
    interval holds 0 about 95 % of the time, and the plug-in fails the same unbiasedness check."""
    rng = np.random.default_rng(1)
    block = make_block("llama", 4, "block0", hidden=8, seed=0, dtype=torch.float64)
    rows = []
    for _ in range(60):
        z, q = torch.from_numpy(rng.normal(size=(120, 5, 4))), torch.from_numpy(rng.normal(size=(120, 5, 4)))
        g, _, _ = block_features(block, z, q)
        rows.append(stats.first_order_value(g.reshape(120, -1).numpy()))
    draws = pd.DataFrame(rows)
    for column, biased in (("value", False), ("value_plugin", True)):
        mean, se = draws[column].mean(), draws[column].std(ddof=1) / np.sqrt(len(draws))
        assert (abs(mean) > 4 * se) == biased, (column, mean, se)
    covered = ((draws["value_lo"] <= 0) & (draws["value_hi"] >= 0)).sum()
    assert covered >= 51  # binomial(60, 0.95) reaches 51 with probability > 0.99


@pytest.mark.parametrize(
    "values, ses, expected, status",
    [
        ([100, 30, 10, 10.2, 9.9], [1, 1, 0.5, 0.5, 0.5], 2, stats.SATURATED_PLATEAU),  # falls, then flat
        ([8, 4, 2, 1], [0.01] * 4, None, stats.NOT_SATURATED),  # keeps falling (P3 pilot's raw)
        ([5, 0.5, 0.01, -0.02], [0.1, 0.1, 0.05, 0.05], 2, stats.SATURATED_ZERO),  # falls to zero
        ([0.1, -0.05, 0.02], [0.1, 0.1, 0.1], 0, stats.SATURATED_ZERO),  # nothing anywhere
        ([3, 1, 1, 5], [0.1] * 4, None, stats.NOT_SATURATED),  # a rise breaks a plateau
    ],
)
def test_plateau_test(values, ses, expected, status):
    assert stats.plateau_index(values, ses) == (expected, status)


def test_recommend_depth_reports_raw_and_scale_invariant_decisions():
    """The P3 pilot's shape: raw falls 40× without a plateau, value × ‖z‖² stays flat."""
    rows = []
    for depth, raw, scaled in ((1, 341.0, 3000.0), (2, 81.0, 3100.0), (4, 20.0, 2900.0), (8, 8.2, 3050.0)):
        for seed, (factor, shift) in enumerate(((0.9, -150.0), (1.0, 0.0), (1.1, 150.0))):
            # within each store a tiny standard error: only the spread between seeds may decide
            rows.append(
                {
                    "family": "llama",
                    "dataset": "text",
                    "width": 64,
                    "step": 600,
                    "pool": "test",
                    "depth": depth,
                    "seed": seed,
                    "point": f"block{depth}",
                    "point_index": depth,
                    "value": raw * factor,
                    "value_se": raw / 1e4,
                    "scaled_value": scaled + shift,
                    "scaled_value_se": 1.0,
                }
            )
    table = pd.DataFrame(rows)
    decision = recommend_depth(table, draws=200).set_index("criterion")
    assert decision.loc["value", "status"] == stats.NOT_SATURATED and decision.loc["value", "falls"]
    assert decision.loc["scaled_value", "status"] == stats.SATURATED_PLATEAU
    assert decision.loc["scaled_value", "recommended"] == 1 and not decision.loc["scaled_value", "falls"]
    assert decision.loc["scaled_value", "decided_fraction"] > 0.5
    assert decision.loc["value", "levels"] == "1,2,4,8" and (decision["seeds"] == 3).all()
    # one seed: no between-seed interval, so no decision, whatever the stores' own standard errors say
    single = recommend_depth(table[table["seed"] == 0], draws=200)
    assert single["status"].str.startswith("not decided: 1 seed").all() and single["recommended"].isna().all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.cuda
def test_block_features_on_cuda_give_the_cpu_table(dumped):
    """The feature pass is float64 on either device (G kept in float32): the table agrees to float32 rounding."""
    _, store, _ = dumped
    on_cpu = estimate_depth(store, {"seed": 5}, log=lambda _: None, device="cpu")
    on_cuda = estimate_depth(store, {"seed": 5}, log=lambda _: None, device="cuda")
    numeric = on_cpu.select_dtypes("number").columns
    np.testing.assert_allclose(on_cuda[numeric].to_numpy(float), on_cpu[numeric].to_numpy(float), rtol=1e-5, atol=1e-12)
    assert (on_cuda["status"] == on_cpu["status"]).all()
