"""The P1 regime map: context as a grid axis (runs, folders, settings, refusal for resnet) and
`growcert summarize-regime` on synthetic tables (growcert.report.regime)."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from growcert.errors import ConfigError
from growcert.plan import validate_config
from growcert.plan.grids import run_wildcards, train_settings, training_runs
from growcert.report import regime
from growcert.stages.summaries import summarize_regime

REPO = Path(__file__).resolve().parents[1]

SWEEP = {
    "family": "llama",
    "dataset": "shakespeare",
    "widths": [16, 32],
    "depths": [1],
    "seeds": [0],
    "contexts": [32, 64],
    "tokens_per_step": 256,
    "train": {"steps": 4, "save_steps": [2, 4], "eval_every": 2},
}


def config_with(*grids):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["grids"] = [copy.deepcopy(grid) for grid in grids]
    return validate_config(config)


def test_two_contexts_are_separate_runs_at_the_same_tokens_per_step():
    config = config_with(SWEEP)
    runs = training_runs(config)
    assert sorted({run.context for run in runs}) == [32, 64] and len(runs) == 4
    folders = {"w{width}_d{depth}_s{seed}{context_tag}".format(**run_wildcards(run)) for run in runs}
    assert folders == {"w16_d1_s0_c32", "w32_d1_s0_c32", "w16_d1_s0_c64", "w32_d1_s0_c64"}
    for run in runs:
        settings = train_settings(config, run)
        assert settings["context"] == settings["model"]["context"] == run.context
        assert settings["train"]["batch_size"] * run.context == SWEEP["tokens_per_step"]


def test_a_grid_without_contexts_keeps_its_folders_and_settings():
    fixed = {key: value for key, value in SWEEP.items() if key not in ("contexts", "tokens_per_step")}
    config = config_with(fixed, SWEEP)
    plain = [run for run in training_runs(config) if run.context is None]
    assert {run_wildcards(run)["context_tag"] for run in plain} == {""}
    settings = train_settings(config, plain[0])
    assert "context" not in settings and settings["train"]["batch_size"] == 64  # the schema default, untouched


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"family": "resnet", "dataset": "digits"},
            "config key 'grids[0].contexts': family resnet has no context length",
        ),
        ({"tokens_per_step": None}, "config key 'grids[0].tokens_per_step': required with grids[0].contexts"),
        ({"tokens_per_step": 100}, "config key 'grids[0].contexts[0]': 32 does not divide tokens_per_step 100"),
        ({"contexts": [32, 32]}, "config key 'grids[0].contexts': context lengths must be distinct"),
    ],
)
def test_bad_context_sweeps_name_the_key(change, message):
    with pytest.raises(ConfigError) as error:
        config_with({**SWEEP, **change})
    assert str(error.value).startswith(message)


def test_train_refuses_a_context_for_resnet_with_exit_2(tmp_path):
    settings = {"family": "resnet", "dataset": "digits", "width": 1, "depth": 8, "context": 64}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "growcert.cli",
            "train",
            "--data",
            str(tmp_path),
            "--settings",
            json.dumps(settings),
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "config key 'context': family resnet has no context length" in result.stderr.strip().splitlines()[-1]


def test_snakemake_dry_run_gives_each_context_its_runs_and_stores(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump({"grids": [SWEEP]}))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "summarize_regime",
            "--configfile",
            str(config),
            "--config",
            f"results={tmp_path / 'results'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    for context in (32, 64):
        assert f"models/llama/shakespeare/w32_d1_s0_c{context}" in result.stdout
        assert f"grads/llama/shakespeare/w16_d1_s0_c{context}/step4.zarr" in result.stdout
        assert f"stats/alignment/llama/shakespeare/w16_d1_s0_c{context}/step2.csv" in result.stdout
    assert "rule intervene" not in result.stdout and "rule estimate_depth" not in result.stdout


def synthetic_tables(slopes=None, widths=(16, 32, 64), seeds=(0, 1, 2), steps=(10, 20, 40)):
    """A pooled alignment table whose d_align = 0.05 · width^slope[context] · e^noise, and its training
    history, where wider and later models have a lower held-out loss."""
    slopes = slopes or {64: 1.0, 128: -1.0}
    rng = np.random.default_rng(0)
    alignment, training = [], []
    for context, slope in slopes.items():
        for width in widths:
            for seed in seeds:
                for step in steps:
                    d_align = 0.05 * width**slope * np.exp(rng.normal(0, 0.05)) * (step / 10) ** 0.2
                    for pool in ("test", "train"):
                        alignment.append(
                            {
                                "family": "llama",
                                "dataset": "shakespeare",
                                "context": context,
                                "width": width,
                                "depth": 1,
                                "seed": seed,
                                "step": step,
                                "point": "block1",
                                "reduction": "sum_positions",
                                "pool": pool,
                                "d_align": d_align,
                                "d_align_lo": d_align / 2,
                                "d_align_hi": d_align * 2,
                                "d_par": 2 * d_align,
                                "d_2": d_align,
                                "d_align_plugin": d_align + 1,
                            }
                        )
                    training.append(
                        {
                            "family": "llama",
                            "dataset": "shakespeare",
                            "context": context,
                            "width": width,
                            "depth": 1,
                            "seed": seed,
                            "step": step,
                            "test_loss": 3.0 - 0.5 * np.log2(step / 10) - 0.1 * np.log2(width / 16),
                        }
                    )
    return pd.DataFrame(alignment), pd.DataFrame(training)


def test_summarize_regime_judges_each_cell_and_draws_the_figures(tmp_path):
    alignment, training = synthetic_tables()
    alignment.to_csv(tmp_path / "alignment.csv", index=False)
    training.to_csv(tmp_path / "training.csv", index=False)
    line = summarize_regime(
        tmp_path / "alignment.csv",
        tmp_path / "training.csv",
        tmp_path,
        tmp_path / "cells.csv",
        tmp_path / "claims.csv",
        tmp_path / "map.json",
        tmp_path,
    )
    budget = pd.read_csv(tmp_path / "p1_regime_budget.csv")
    assert len(budget) == 2 * 3  # contexts x steps
    assert set(budget.loc[budget["context"] == 64, "trend"]) == {"rises"}
    assert set(budget.loc[budget["context"] == 128, "trend"]) == {"falls"}
    assert np.allclose(budget.loc[budget["context"] == 64, "slope"], 1.0, atol=0.1)
    loss = pd.read_csv(tmp_path / "p1_regime_loss.csv")
    assert set(loss.loc[loss["context"] == 64, "trend"]) == {"rises"} and len(loss) == 2 * regime.LOSS_LEVELS
    claims = pd.read_csv(tmp_path / "claims.csv")
    # per comparison: each context's primary cell (a part: the last step, or the lowest common loss level), then the
    # claim, universal across the two contexts; slope ≈ 1 at context 64 (above the SESOI 0.25), falling at 128: the
    # width trend does not hold at every context, so the claim is contradicted (a rise at one context is not enough)
    assert list(claims["claim_id"]) == ["p1_regime_budget"] * 3 + ["p1_regime_loss"] * 3
    assert list(claims["role"]) == ["part", "part", "primary"] * 2
    assert (
        list(claims["claim"].str.extract(r"\((context \d+), primary cell\)")[0].dropna())
        == ["context 64", "context 128"] * 2
    )
    assert list(claims["verdict"]) == ["reproduced", "contradicted", "contradicted"] * 2
    assert list(claims["direction"]) == ["as the paper's", "against the paper's", "against the paper's"] * 2
    assert "universal claim over 2 contexts" in claims["why"][2] and "contradicted by context 128" in claims["why"][2]
    # Holm over the two contexts: 1 − 0.05/2 for the first decided, 0.95 for the second
    assert (claims["seeds"] == 3).all() and sorted(claims["level"][:2]) == pytest.approx([0.95, 0.975])
    assert claims["this_run"][0].startswith("step 40, block1, sum_positions")  # the last checkpoint
    assert "matched budget" in claims["note"][0] and "matched held-out loss" in claims["note"][3]
    # d_align at width 64, context 64 is ≈ 0.05 · 64 · (step/10)^0.2 ≥ 1 at every step: three budget cells.
    assert "≥ 1 at the widest width in 3 cells" in claims["this_run"][0]
    cells = pd.read_csv(tmp_path / "cells.csv")
    assert set(cells.loc[cells["context"] == 64, "verdict"]) == {"reproduced"}
    assert cells["primary"].sum() == 4  # two contexts x (the last step, the lowest common loss level)
    assert set(cells.loc[cells["context"] == 128, "verdict"]) == {"contradicted"}
    spread = pd.read_csv(tmp_path / "p1_regime_spread.csv")
    assert len(spread) == 2 * 3 * 3 and (spread["seeds"] == 3).all()  # contexts x widths x steps
    facts = json.loads((tmp_path / "map.json").read_text())
    assert facts["coverage"].startswith("a slice of the map") and not any(facts["figures"].values())
    for stem in regime.WIDTH_FIGURES + regime.CONTEXT_FIGURES + regime.SEED_FIGURES:
        assert (tmp_path / f"{stem}.png").stat().st_size > 1000
    assert "figures not drawn: none" in line


def test_summarize_regime_without_a_sweep_draws_nothing_and_says_why(tmp_path):
    alignment, training = synthetic_tables(slopes={64: 1.0}, widths=(16,))
    alignment.drop(columns="context").to_csv(tmp_path / "alignment.csv", index=False)
    training.drop(columns="context").to_csv(tmp_path / "training.csv", index=False)
    summarize_regime(
        tmp_path / "alignment.csv",
        tmp_path / "training.csv",
        tmp_path,
        tmp_path / "cells.csv",
        tmp_path / "claims.csv",
        tmp_path / "map.json",
        tmp_path,
    )
    assert pd.read_csv(tmp_path / "claims.csv").empty
    facts = json.loads((tmp_path / "map.json").read_text())
    assert facts["coverage"].startswith("no grid sweeps context")
    assert all(facts["figures"].values()) and not list(tmp_path.glob("*.png"))
