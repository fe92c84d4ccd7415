"""Growth (PAPERS.md P3): a grown network is function-identical at insertion, and the comparison with
networks trained from scratch runs end to end on one budget."""


import pandas as pd
import pytest
import torch

from growcert.report.claims import ROW_COLUMNS
from growcert.config import stage_settings
from growcert.report.depth import ARMS, depth_claims, plot_growth
from growcert.stages.grow import COLUMNS, GrowthArm, evenly_spaced, grow_and_compare
from growcert.models import build_model
from growcert.models.blocks import GrowableBlock

LLAMA = {"head_dim": 8, "context": 16}
TINY_TRAIN = {"steps": 6, "batch_size": 4, "lr": 0.003, "warmup_steps": 1, "eval_every": 3, "eval_examples": 16}
EXPERIMENTS = {
    "llama": {"family": "llama", "dataset": "shakespeare", "width": 16, "base_depth": 1, "blocks": 1,
              "deeper_depth": 2, "model": LLAMA},
    "resnet": {"family": "resnet", "dataset": "digits", "width": 1, "base_depth": 8, "blocks": 2,
               "deeper_depth": None, "model": {}},
}


@pytest.mark.parametrize("family", ["resnet", "llama"])
def test_grown_model_is_function_identical_then_trains(prepared, family):
    experiment = EXPERIMENTS[family]
    data = prepared(experiment["dataset"])
    settings = stage_settings("grow", {**experiment, "train": TINY_TRAIN})
    context = LLAMA["context"] if family == "llama" else None
    torch.manual_seed(0)
    model = build_model(family, experiment["width"], experiment["base_depth"], data.info, experiment["model"])
    torch.set_num_threads(1)
    run = GrowthArm("grown_value", model, settings, data, seed=0, context=context)
    run.fit(1, 3, set(), lambda *_: None)
    probe, _ = run.trainer.batches.next()
    model.eval()
    with torch.no_grad():
        before = model(probe)
    points = list(model.points)[-2:]
    run.grow(points, seed=0, step=3, probe=probe)
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(probe), before) and run.change == 0.0
    blocks = [block for point in points for block in model.points[point].inserted]
    assert len(blocks) == 2 and all(isinstance(b, GrowableBlock) and b.w_in.requires_grad for b in blocks)
    # the new parameters are in the optimiser, and training moves them away from zero output
    in_optimizer = {id(p) for group in run.trainer.optimizer.param_groups for p in group["params"]}
    assert all(id(p) in in_optimizer for b in blocks for p in b.parameters())
    run.fit(4, 5, set(), lambda *_: None)
    assert all(float(b.weight.detach().abs().max()) > 0 for b in blocks)


def test_evenly_spaced_points():
    points = [f"block{i}" for i in range(4)]
    assert evenly_spaced(points, 3) == ["block0", "block2", "block3"]
    assert evenly_spaced(points[:2], 1) == ["block1"]
    assert evenly_spaced(points, 4) == points


@pytest.fixture(scope="module")
def grown(prepared, tmp_path_factory):
    experiment = EXPERIMENTS["llama"]
    out = tmp_path_factory.mktemp("grow")
    settings = {**experiment, "seeds": [0, 1], "select_examples": 8, "train": TINY_TRAIN}
    return grow_and_compare(settings, prepared(experiment["dataset"]), out, log=lambda _: None), out


def test_grow_and_compare_end_to_end(grown, tmp_path):
    table, out = grown
    assert list(table.columns) == COLUMNS and set(table["arm"]) == set(ARMS)
    final = table[table["step"] == 6]
    assert len(final) == 2 * len(ARMS) and final["examples_seen"].nunique() == 1  # one budget for every arm
    grown_arms = final[final["arm"].str.startswith("grown")]
    assert (grown_arms["insert_max_abs_change"] == 0).all() and (grown_arms["grown_at"] == 3).all()
    assert (final.loc[final["arm"] == "deeper", "depth"] == 2).all()
    assert (final.loc[final["arm"] != "deeper", "depth"] == 1).all()
    # the shared first phase is one run: identical held-out loss at the growth step
    at_growth = table[(table["step"] == 3) & table["arm"].isin(["shallow", "grown_value", "grown_uniform"])]
    assert at_growth.groupby("seed")["test_loss"].nunique().eq(1).all()
    # scratch is the grown_value architecture: same points, same parameter count
    for seed in (0, 1):
        by_arm = final[final["seed"] == seed].set_index("arm")
        assert by_arm.loc["scratch", "points"] == by_arm.loc["grown_value", "points"]
        assert by_arm.loc["scratch", "num_parameters"] == by_arm.loc["grown_value", "num_parameters"]
        assert by_arm.loc["grown_value", "num_parameters"] > by_arm.loc["shallow", "num_parameters"]
    selection = pd.read_csv(out / "selection.csv")
    assert selection.groupby("seed")["grown_value"].sum().eq(1).all()
    assert pd.read_csv(out / "growth.csv").shape == table.shape
    plot_growth(table, tmp_path / "growth.png")
    assert (tmp_path / "growth.png").stat().st_size > 1000


def test_growth_claim_follows_the_paired_difference(grown):
    table, _ = grown
    final = table[table["step"] == 6]
    claims = depth_claims(pd.DataFrame(columns=["family", "dataset", "step", "pool"]), final)
    assert len(claims) == 1 and list(claims[0]) == ROW_COLUMNS
    better, worse = final.copy(), final.copy()
    scratch = final["arm"] == "scratch"
    better.loc[scratch, "test_loss"] += 1.0
    worse.loc[scratch, "test_loss"] -= 1.0
    assert depth_claims(pd.DataFrame(columns=["family", "dataset", "step", "pool"]), better)[0]["holds"]
    assert not depth_claims(pd.DataFrame(columns=["family", "dataset", "step", "pool"]), worse)[0]["holds"]


def depth_rows(scaled):
    """A depth table over a depth grid: raw falls 40× (the P3 pilot), scaled as given."""
    rows = []
    for (depth, raw), value in zip(((1, 341.0), (2, 81.0), (4, 20.0), (8, 8.2)), scaled):
        rows.append({"family": "llama", "dataset": "text", "width": 64, "step": 600, "pool": "test", "depth": depth,
                     "seed": 0, "point": f"block{depth}", "point_index": depth, "value": raw, "value_se": raw / 11,
                     "scaled_value": value, "scaled_value_se": 100.0})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("scaled, holds", [
    ([9000.0, 4000.0, 3100.0, 3000.0], True),    # falls, then a plateau within the grid
    ([3000.0, 3100.0, 2900.0, 3050.0], False),   # the P3 pilot: flat from the start, nothing falls
    ([9000.0, 7000.0, 5000.0, 3000.0], False),   # keeps falling: no plateau
])
def test_depth_claim_needs_a_fall_and_a_plateau_of_the_scale_invariant_value(scaled, holds):
    (claim,) = depth_claims(depth_rows(scaled), pd.DataFrame(columns=COLUMNS))
    assert claim["paper_value"] == "plateau" and claim["holds"] is holds
    assert "not saturated within the grid" in claim["note"]  # raw: 341 → 8.2 at 11 SE never plateaus


def test_a_continuation_starts_from_the_base_at_the_fork_not_from_where_the_base_went_on(prepared):
    """The optimiser state handed to a continuation is its own copy: the base training on (in place) must not
    move the continuation's moments or step count (torch's load_state_dict keeps the given tensors)."""
    data = prepared("digits")
    settings = stage_settings("grow", {**EXPERIMENTS["resnet"], "train": TINY_TRAIN})
    torch.manual_seed(0)
    base = GrowthArm("shallow", build_model("resnet", 1, 8, data.info, {}), settings, data, seed=0, context=None)
    base.fit(1, 3, set(), lambda *_: None)
    fork = base.trainer.state_dict()
    moments = {name: value.clone() for name, value in base.trainer.optimizer.state_dict()["state"][0].items()}
    torch.manual_seed(0)
    continuation = GrowthArm("grown_value", build_model("resnet", 1, 8, data.info, {}), settings, data, seed=0, context=None)
    continuation.trainer.load_state_dict(fork)
    base.fit(4, 6, set(), lambda *_: None)  # the base goes on, updating its own state in place
    kept = continuation.trainer.optimizer.state_dict()["state"][0]
    assert all(torch.equal(kept[name], moments[name]) for name in moments) and int(kept["step"]) == 3
