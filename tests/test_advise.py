"""`growcert advise`: end to end on a tiny trained llama (its per-point figures are the pipeline stages' own, and
every option is predicted), from a text file on a tiny Hugging Face model, the first-order reading's words on a
store built with a known answer, bad inputs, and the Snakemake target. The predictions themselves are tested in
tests/test_advise_options.py."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from growcert.cli import main
from growcert.config import stage_settings
from growcert.report.advice import GROW, NO_EVIDENCE, TRAIN_ON, advice_table, first_order_recommendation
from growcert.stages.alignment import estimate_alignment
from growcert.stages.depth import estimate_depth
from growcert.store import GroupSpec, StoreWriter
from growcert.store.encoding import StoreOptions

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = 32
OUTPUTS = ("advice.csv", "advice.md", "advice.png", "provenance.json")


@pytest.fixture(scope="module")
def llama(tiny_llama):
    """(checkpoint, prepared folder) of the session's tiny llama (conftest.tiny_llama)."""
    return tiny_llama


@pytest.fixture(scope="module")
def advised(llama, tmp_path_factory):
    checkpoint, data = llama
    out = tmp_path_factory.mktemp("advise") / "out"
    assert (
        main(
            ["advise", "--model", str(checkpoint), "--data", str(data), "--out", str(out), "--examples", str(EXAMPLES)]
        )
        == 0
    )
    return out


def test_advise_writes_its_outputs_and_nothing_else(advised):
    assert sorted(path.name for path in advised.iterdir()) == sorted(OUTPUTS)  # the work folder is gone
    table = pd.read_csv(advised / "advice.csv", keep_default_na=False)
    assert list(table["option"]) == [TRAIN_ON, "grow at block0", "grow at block1", "grow at block2"]
    assert list(table["point"]) == ["", "block0", "block1", "block2"]
    # one decision for the model, on every row, and the row it chose marked (none for "no evidence")
    decision = table["decision"].iloc[0]
    assert (table["decision"] == decision).all() and decision in {*table["option"], NO_EVIDENCE}
    assert list(table.loc[table["chosen"], "option"]) == ([] if decision == NO_EVIDENCE else [decision])
    assert set(table["first_order"][1:]) <= {"grow here", "no evidence", "saturated"}
    assert table["first_order_why"][1:].str.len().min() > 20 and len(table["why"].iloc[0]) > 20
    for column in ("gain", "gain_lo", "gain_hi", "reach", "added"):
        values = pd.to_numeric(table[column][0 if column != "added" else 1 :])
        assert np.isfinite(values).all(), column
    assert (table["gain_lo"] <= table["gain"]).all() and (table["gain"] <= table["gain_hi"]).all()
    page = (advised / "advice.md").read_text()
    assert page.startswith("# Should I train on or grow") and all(f"| {o} |" in page for o in table["option"])
    assert all(f"| {point} |" in page for point in table["point"][1:])
    assert json.loads((advised / "provenance.json").read_text())["advice"]["n_test"] == EXAMPLES


def test_per_point_figures_are_the_pipeline_stages_own(llama, advised, tmp_path, capsys):
    """The same checkpoint and examples through `growcert dump`, `estimate-alignment`, `estimate-misalignment`
    and `estimate-depth` with their defaults: the same functions on the same store, so equal to the last bit
    (CSV round trips of float64 are exact)."""
    checkpoint, data = llama
    dump = {
        "train_examples": EXAMPLES,
        "test_examples": EXAMPLES,
        **{key: stage_settings("advise")[key] for key in ("batch_size", "max_batch_mb", "seed")},
    }
    store, out = tmp_path / "store.zarr", {name: tmp_path / f"{name}.csv" for name in ("a", "m", "d")}
    assert (
        main(
            [
                "dump",
                "--checkpoint",
                str(checkpoint),
                "--data",
                str(data),
                "--settings",
                json.dumps(dump),
                "--out",
                str(store),
            ]
        )
        == 0
    )
    assert main(["estimate-alignment", "--store", str(store), "--out", str(out["a"])]) == 0
    assert (
        main(
            [
                "estimate-misalignment",
                "--store",
                str(store),
                "--alignment",
                str(out["a"]),
                "--settings",
                json.dumps({"MK": [[32, 32]], "replicates": 10}),
                "--out",
                str(out["m"]),
            ]
        )
        == 0
    )
    assert main(["estimate-depth", "--store", str(store), "--out", str(out["d"])]) == 0
    capsys.readouterr()
    advice = pd.read_csv(advised / "advice.csv").query("option != 'train on'").set_index("point")
    alignment = pd.read_csv(out["a"]).query("pool == 'test' and reduction == 'sum_positions'").set_index("point")
    certificates = pd.read_csv(out["m"]).query("reduction == 'sum_positions' and mode == 'iid'").set_index("point")
    depth = pd.read_csv(out["d"]).query("pool == 'test'").set_index("point")
    for column in ("n", "detectability", "mu_sq", "d_align_raw", "d_align_lo", "d_align_hi"):
        assert np.array_equal(advice[column], alignment.loc[advice.index, column]), column
    for column in ("b_exact", "b_align"):
        assert np.array_equal(advice[column], certificates.loc[advice.index, column], equal_nan=True), column
    for column in ("value", "value_se", "value_lo", "value_hi", "scaled_value", "scaled_value_lo", "scaled_value_hi"):
        assert np.array_equal(advice[column], depth.loc[advice.index, column]), column


def test_a_hugging_face_model_is_advised_from_a_text_file(prepared, tmp_path, capsys):
    from test_hf import save_tiny

    folder = save_tiny(tmp_path / "tiny-neox", "gpt_neox", width=16, depth=2)
    text = tmp_path / "corpus.txt"
    text.write_bytes(prepared("shakespeare").train_x[:6000].tobytes())
    out = tmp_path / "out"
    assert (
        main(
            [
                "advise",
                "--model",
                str(folder),
                "--data",
                str(text),
                "--out",
                str(out),
                "--examples",
                "8",
                "--settings",
                json.dumps({"context": 16}),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    table = pd.read_csv(out / "advice.csv").query("option != 'train on'")
    assert list(table["point"]) == ["block0", "block1", "block2"] and (table["n"] == 8).all()
    assert all(option in printed for option in table["option"]) and "advice.md" in printed
    assert table["decision"].iloc[0] in printed.lower()


def _constructed_store(path: Path, n: int = 128, positions: int = 4, features: int = 8) -> Path:
    """Two points of a llama-shaped store with a known answer, n held-out examples in antithetic pairs (the
    same z, noise ±ε), plus 8 training rows.

    block0: q_t = μ ± σε_t, μ = e_1. q does not depend on z, so E[q hᵀ] = μ E[Σ_t h_t]ᵀ, and E[h] ≠ 0 because
    h = GELU(W_in u(z)) has a positive mean for any symmetric, non-degenerate pre-activation. With σ = 0.1
    the mean is detectable by a wide margin (‖μ‖²/SE ≈ √n/2·‖4μ‖/(2σ) ≫ 2) and B_exact at (32, 32) is ≈ 0.
    block1: q_t = ±σε_t. Each pair sums to zero, so Σ_i q_i = 0 and Σ_i G_i = 0 exactly: the unbiased
    ‖μ‖² and value are −(Σ‖x_i‖²)/n(n−1) < 0, never detectable and never an interval above 0."""
    rng = np.random.default_rng(0)
    half = (n + 8) // 2
    z = np.repeat(rng.standard_normal((half, positions, features)), 2, axis=0).astype(np.float32)
    signs = np.tile([1.0, -1.0], half)[:, None, None]
    noise = signs * 0.1 * np.repeat(rng.standard_normal((half, positions, features)), 2, axis=0)
    mean = np.zeros(features)
    mean[0] = 1.0
    q = {"block0": (mean + noise).astype(np.float32), "block1": noise.astype(np.float32)}
    split = np.array(["train"] * 8 + ["test"] * n, dtype=object)
    specs = [GroupSpec(name, ("token", "feature"), (positions, features)) for name in q]
    attrs = {"family": "llama", "dataset": "constructed", "width": features, "depth": 1, "seed": 0, "step": 0}
    writer = StoreWriter(
        path,
        specs,
        split,
        np.arange(len(split)),
        np.full(len(split), -1),
        attrs,
        options=StoreOptions.from_settings(stage_settings("dump")),
    )
    for name in q:
        writer.write(name, 0, {"q": q[name], "z": z, "loss": np.zeros(len(split), np.float32)})
    return writer.finish()


def test_a_clear_first_order_value_grows_and_none_gives_no_evidence(tmp_path):
    store = _constructed_store(tmp_path / "constructed.zarr")
    alignment_settings = stage_settings("alignment", {"reductions": ["sum_positions"]})
    depth_settings = stage_settings("depth", {"pools": ["test"]})
    table = advice_table(
        estimate_alignment(store, alignment_settings, log=lambda _: None),
        estimate_depth(store, depth_settings, log=lambda _: None, device="cpu"),
        32,
        32,
        depth_settings["level"],
        alignment_settings["detect_threshold"],
    )
    assert list(table["decision"]) == [GROW, NO_EVIDENCE], table[["point", "decision", "why"]]
    assert table["value"].iloc[1] < 0 and table["mu_sq"].iloc[1] < 0  # exactly cancelled, as derived
    assert "no sample size would" in table["why"].iloc[1]
    line = first_order_recommendation(table, 0.95)
    assert line.startswith("Grow at block0") and "only point" in line


def test_samples_to_detect_reaches_the_threshold_at_the_observed_spread():
    from growcert.stats.certificates import samples_to_detect

    # SE ∝ 1/√n: at n' = n (2·SE/estimate)² the estimate is exactly 2 SE
    assert samples_to_detect(1.0, 1.0, 100, 2.0) == 400
    assert samples_to_detect(3.0, 1.0, 100, 2.0) == 100  # already detected
    assert samples_to_detect(-1.0, 1.0, 100, 2.0) is None and samples_to_detect(0.0, 1.0, 100, 2.0) is None


def _bad_inputs(llama, prepared, tmp_path):
    checkpoint, data = llama
    damaged = tmp_path / "step8.pt"
    damaged.write_bytes(Path(checkpoint).read_bytes()[:500])
    short = tmp_path / "short.txt"
    short.write_text("To be, or not to be")
    missing = tmp_path / "missing.pt"
    return {
        "missing model": (["--model", str(missing), "--data", str(data)], str(missing)),
        "damaged model": (["--model", str(damaged), "--data", str(data)], str(damaged)),
        "data of the wrong kind": (
            ["--model", str(checkpoint), "--data", str(prepared("digits").folder)],
            str(prepared("digits").folder),
        ),
        "text shorter than one context": (["--model", str(checkpoint), "--data", str(short)], str(short)),
        "growth beyond the stream's width": (
            ["--model", str(checkpoint), "--data", str(data), "--growth-dims", "17"],
            "--growth-dims 17",
        ),
        "no steps to spend": (
            ["--model", str(checkpoint), "--data", str(data), "--budget-steps", "0"],
            "advise.budget_steps",
        ),
        "gradients above the memory cap": (
            ["--model", str(checkpoint), "--data", str(data), "--settings", json.dumps({"max_gradient_mb": 0.01})],
            "advise.max_gradient_mb",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing model",
        "damaged model",
        "data of the wrong kind",
        "text shorter than one context",
        "growth beyond the stream's width",
        "no steps to spend",
        "gradients above the memory cap",
    ],
)
def test_a_bad_input_is_one_line_naming_it_exit_2_and_nothing_written(case, llama, prepared, tmp_path, capsys):
    argv, named = _bad_inputs(llama, prepared, tmp_path)[case]
    fresh, existing = tmp_path / "fresh", tmp_path / "existing"
    existing.mkdir()
    for out in (fresh, existing):
        assert main(["advise", *argv, "--out", str(out)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("growcert advise: error: ") and named in lines[0], lines
    assert not fresh.exists() and list(existing.iterdir()) == []


def test_the_snakemake_target_plans_one_advise_job(llama, tmp_path):
    checkpoint, data = llama
    configfile = tmp_path / "advise.yaml"
    configfile.write_text(
        json.dumps(
            {
                "results": str(tmp_path / "results"),
                "advise": {"model": str(checkpoint), "data": str(data), "test_examples": 64},
            }
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "advise", "--configfile", str(configfile)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    command = next(line for line in result.stdout.splitlines() if line.startswith("Shell command: growcert advise"))
    assert f"--model {checkpoint} --data {data}" in command and '"test_examples": 64' in command
    configfile.write_text(json.dumps({"results": str(tmp_path / "results")}))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "advise", "--configfile", str(configfile)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0 and "config key 'advise.model': null" in result.stdout + result.stderr


def test_a_text_split_shorter_than_one_context_stops_the_dump_naming_the_dataset():
    """Tokens can be fewer than bytes, so only the dump sees a tokenized split that holds no window."""
    from growcert.data import PreparedDataset
    from growcert.data.batches import dump_examples
    from growcert.errors import DatasetError

    stream = np.arange(200, dtype=np.uint8)
    data = PreparedDataset(
        "short", {"kind": "text"}, stream, None, stream[:16], None, np.zeros(1, np.int64), np.zeros(1, np.int64)
    )
    with pytest.raises(DatasetError, match="'short'.*test split holds no example .fewer than 16 \\+ 1 tokens"):
        dump_examples(data, stage_settings("dump"), 16)


def test_a_value_no_larger_than_the_deepest_points_is_saturated(tmp_path):
    """The constructed store's clear point, copied to three points with scale-invariant values 5, 5.5 and 5 (SE 1):
    every difference is within the plateau margin 1.96·√2, so block0 and block1 are saturated and the deepest
    (never saturated) is where to grow; with the deepest at 0.5 no point is saturated, block1 leads block0 by
    less than the margin, and the recommendation says so."""
    store = _constructed_store(tmp_path / "constructed.zarr")
    alignment = estimate_alignment(
        store, stage_settings("alignment", {"reductions": ["sum_positions"]}), log=lambda _: None
    ).query("point == 'block0'")
    depth = estimate_depth(store, {"pools": ["test"]}, log=lambda _: None, device="cpu").query("point == 'block0'")
    points = ["block0", "block1", "block2"]

    def decide(scaled, fourth_moment=None):
        held_out = alignment if fourth_moment is None else alignment.assign(mu_4=fourth_moment)
        copies = pd.concat([held_out.assign(point=point) for point in points])
        values = pd.concat(
            [
                depth.assign(point=point, point_index=i, scaled_value=v, scaled_value_se=1.0)
                for i, (point, v) in enumerate(zip(points, scaled))
            ]
        )
        table = advice_table(copies, values, 32, 32, 0.95, 2.0)
        return list(table["decision"]), first_order_recommendation(table, 0.95)

    decisions, line = decide([5.0, 5.5, 5.0])
    assert decisions == ["saturated", "saturated", GROW] and line.startswith("Grow at block2")
    decisions, line = decide([5.0, 5.5, 0.5])
    assert decisions == [GROW, GROW, GROW] and line.startswith("Grow at block1") and "within noise" in line
    # ‖μ‖⁴ ≪ V makes B_exact = V/(V + ‖μ‖⁴) ≈ 1: a clear value with a vacuous certificate is no evidence
    decisions, line = decide([5.0, 5.5, 0.5], fourth_moment=1e-12)
    assert decisions == [NO_EVIDENCE] * 3 and line.startswith("Do not grow") and "(3 no evidence)" in line
