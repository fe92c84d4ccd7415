"""Config validation: defaults filled in, one-line errors naming the key, grid expansion.

`validate_config` here is the pipeline's (growcert.plan): growcert.config's validation and stage checks,
then the grids' and families' rules.
"""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.plan import validate_config
from growcert.plan.grids import Run, train_settings, training_runs
from growcert.schema import SCHEMA_FILE, load_schema

SCHEMA = load_schema(SCHEMA_FILE)
ROOT = Path(__file__).resolve().parents[1]


def load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def merged(*paths):
    """config.yaml overlaid by other files, the way `snakemake --configfile` merges them."""

    def update(base, other):
        for key, value in other.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                update(base[key], value)
            else:
                base[key] = value
        return base

    config = {}
    for path in paths:
        update(config, load(path))
    return config


@pytest.mark.parametrize(
    "files",
    [["config.yaml"]] + [["config.yaml", f"configs/{path.name}"] for path in sorted((ROOT / "configs").glob("*.yaml"))],
    ids=lambda files: files[-1],
)
def test_shipped_configs_validate(files):
    config = validate_config(merged(*files), SCHEMA)
    assert config["grids"] and all("train" in grid for grid in config["grids"])


def test_defaults_fill_nested_keys():
    config = validate_config({"grids": [{"family": "llama", "dataset": "shakespeare", "widths": [32]}]}, SCHEMA)
    assert config["models"]["llama"]["head_dim"] == 16
    assert (
        config["grids"][0]["train"]["steps"]
        == SCHEMA["properties"]["grids"]["items"]["properties"]["train"]["properties"]["steps"]["default"]
    )
    assert config["datasets"]["digits"]["test_fraction"] == 0.3


def test_every_schema_key_has_type_description_default():
    def walk(schema, where):
        for key, sub in schema.get("properties", {}).items():
            assert "description" in sub, f"{where}.{key} has no description"
            assert "type" in sub or "enum" in sub, f"{where}.{key} has no type"
            walk(sub, f"{where}.{key}")
        if isinstance(schema.get("items"), dict):
            walk(schema["items"], f"{where}[]")

    walk(SCHEMA, "config")
    required = set(SCHEMA["properties"]["grids"]["items"]["required"])
    for key, sub in SCHEMA["properties"]["grids"]["items"]["properties"].items():
        assert key in required or "default" in sub, f"grids[].{key} has no default"


BASE = {"grids": [{"family": "resnet", "dataset": "digits", "widths": [1, 2], "depths": [8]}]}


def with_change(path, value):
    config = copy.deepcopy(BASE)
    node = config
    for part in path[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[path[-1]] = value
    return config


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (("grids", 0, "widths"), [1, -2], "config key 'grids[0].widths[1]': -2 is less than the minimum of 1"),
        (("grids", 0, "train", "steps"), "many", "config key 'grids[0].train.steps': 'many' is not of type 'integer'"),
        (("grids", 0, "train", "lr"), 0, "config key 'grids[0].train.lr'"),
        (("datasets", "digits", "tset_fraction"), 0.1, "config key 'datasets.digits.tset_fraction': unknown key"),
        (("gridz",), [], "config key 'gridz': unknown key"),
        (("grids", 0, "family"), "vgg", "config key 'grids[0].family'"),
        (("grids", 0, "depths"), [10], "config key 'grids[0].depths[0]': resnet depth must be 6n+2"),
        (("grids", 0, "train", "save_steps"), [5000], "config key 'grids[0].train.save_steps[0]': step 5000 is beyond"),
        (
            ("grids", 0, "dataset"),
            "shakespeare",
            "config key 'grids[0].dataset': family resnet cannot train on shakespeare",
        ),
        (
            ("grokking", "poprisk", "weight_decays"),
            [0.01, 0.5],
            "config key 'grokking.poprisk.weight_decays': 0.5 has no AdamW at that decay",
        ),
        (
            ("grokking", "batch_size"),
            5000,
            "config key 'grokking.batch_size': 5000 is not below the 1081 training equations",
        ),
        (
            ("alignment", "reference_mk"),
            [5, 5],
            "config key 'alignment.reference_mk': [5, 5] is not one of alignment.MK",
        ),
        (("intervene", "variants"), ["bias"], "config key 'intervene.variants[0]'"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(path, value, expected):
    with pytest.raises(ConfigError) as caught:
        validate_config(with_change(path, value), SCHEMA)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "path, value, old, new",
    [
        (("grids", 0, "train", "checkpoints"), [100], "grids[0].train.checkpoints", "grids[0].train.save_steps"),
        (("intervene", "checkpoints"), "all", "intervene.checkpoints", "intervene.analyse"),
        (("depth", "checkpoints"), "all", "depth.checkpoints", "depth.analyse"),
        (
            ("alignment", "misalignment_checkpoints"),
            "all",
            "alignment.misalignment_checkpoints",
            "alignment.analyse_misalignment",
        ),
        (("theory", "checkpoints"), 4, "theory.checkpoints", "theory.snapshots"),
        (("alignment", "reference_MK"), [32, 32], "alignment.reference_MK", "alignment.reference_mk"),
    ],
)
def test_a_renamed_key_is_refused_in_one_line_that_gives_the_new_name(path, value, old, new):
    with pytest.raises(ConfigError) as caught:
        validate_config(with_change(path, value), SCHEMA)
    assert str(caught.value) == f"config key '{old}' was renamed: use '{new}'"
    # the new name is accepted with the same value (grids: within the default budget)
    validate_config(with_change(path[:-1] + (new.rsplit(".", 1)[1],), value), SCHEMA)


def test_a_stage_refuses_a_renamed_key_too():
    with pytest.raises(ConfigError, match=r"^config key 'depth.checkpoints' was renamed: use 'depth.analyse'$"):
        stage_settings("depth", {"checkpoints": "all"})
    with pytest.raises(ConfigError, match=r"^config key 'train.checkpoints' was renamed: use 'train.save_steps'$"):
        stage_settings(
            "train", {"family": "resnet", "dataset": "digits", "width": 1, "depth": 8, "train": {"checkpoints": [10]}}
        )


def test_duplicate_family_dataset_pair_is_rejected():
    config = {"grids": [dict(BASE["grids"][0]), dict(BASE["grids"][0])]}
    with pytest.raises(ConfigError, match=r"grids\[1\].*already used by grids\[0\]"):
        validate_config(config, SCHEMA)


def test_a_width_grid_and_a_depth_grid_of_one_family_keep_their_own_budgets():
    width_grid = {
        "family": "llama",
        "dataset": "shakespeare",
        "widths": [32, 64],
        "depths": [2],
        "train": {"steps": 40, "save_steps": [40]},
    }
    depth_grid = {
        "family": "llama",
        "dataset": "shakespeare",
        "widths": [64],
        "depths": [1, 4],
        "train": {"steps": 20, "save_steps": [10, 20]},
    }
    config = validate_config({"models": {"llama": {"head_dim": 16}}, "grids": [width_grid, depth_grid]}, SCHEMA)
    steps = {(run.width, run.depth): train_settings(config, run)["train"]["steps"] for run in training_runs(config)}
    assert steps == {(32, 2): 40, (64, 2): 40, (64, 1): 20, (64, 4): 20}
    overlapping = {**depth_grid, "depths": [1, 2]}  # (64, 2) is the width grid's
    with pytest.raises(ConfigError) as caught:
        validate_config({"models": {"llama": {"head_dim": 16}}, "grids": [width_grid, overlapping]}, SCHEMA)
    assert str(caught.value) == (
        "config key 'grids[1]': family/dataset llama/shakespeare at width 64, depth 2, seed 0 "
        "is already used by grids[0]"
    )


def test_llama_width_must_fit_heads():
    config = {
        "models": {"llama": {"head_dim": 16}},
        "grids": [{"family": "llama", "dataset": "shakespeare", "widths": [32, 40], "depths": [1]}],
    }
    with pytest.raises(ConfigError, match=r"grids\[0\]\.widths\[1\].*head_dim=16"):
        validate_config(config, SCHEMA)


def test_grid_expansion_and_settings():
    config = validate_config(merged("config.yaml"), SCHEMA)
    runs = training_runs(config)
    resnet = [run for run in runs if run.family == "resnet"]
    llama = [run for run in runs if run.family == "llama"]
    # width scaling on P1's primary family (three llama widths); the ResNet shows two widths at three depths
    assert len({run.width for run in llama}) >= 3
    assert len({run.width for run in resnet}) >= 2 and len({run.depth for run in resnet}) >= 3
    assert len(set(runs)) == len(runs)
    settings = train_settings(config, Run("llama", "shakespeare", 64, 2, 0))
    assert settings["model"]["context"] == config["models"]["llama"]["context"]
    # one budget across widths within a grid (and within each context of a context sweep, whose batch
    # is tokens_per_step / context: the same tokens per step at every context)
    budgets = {
        (r.family, r.dataset, r.context, (s := train_settings(config, r)["train"])["steps"], s["batch_size"])
        for r in runs
    }
    assert len(budgets) == len(
        {
            (g["family"], g["dataset"], c, g["train"]["steps"], g["train"].get("batch_size"))
            for g in config["grids"]
            for c in g["contexts"] or [None]
        }
    )
    # P3 across depth for both families: a llama width with three depths (the depth grid beside the width grid)
    llama_depths = {
        width: {run.depth for run in llama if run.width == width and run.context is None}
        for width in {run.width for run in llama}
    }
    assert max(len(depths) for depths in llama_depths.values()) >= 3
    swept = [run for run in runs if run.context is not None]
    assert len({train_settings(config, run)["train"]["batch_size"] * run.context for run in swept}) == 1


def test_schema_dataset_defaults_match_the_dataset_modules():
    """The schema documents the data modules' own defaults; the two must never drift apart."""
    from growcert.data import DATASETS, default_settings

    config = validate_config({}, SCHEMA)
    for name in DATASETS:
        assert config["datasets"][name] == default_settings(name), name


@pytest.mark.parametrize("experiment", ["grokking", "pinn", "preference", "theory"])
def test_experiment_settings_are_checked_by_the_schema_with_one_line_naming_the_key(experiment, tmp_path):
    from growcert.config import stage_settings

    assert stage_settings(experiment, {}) == validate_config(copy.deepcopy(BASE), SCHEMA)[experiment]
    with pytest.raises(ConfigError, match=rf"^config key '{experiment}\.bogus': unknown key"):
        stage_settings(experiment, {"bogus": 1})
    with pytest.raises(ConfigError, match=rf"^config key '{experiment}\.seeds': \[\] should be non-empty"):
        stage_settings(experiment, {"seeds": []})
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "growcert.cli",
            experiment,
            "--settings",
            '{"seeds": "0"}',
            "--out",
            str(tmp_path),
            "--figure",
            str(tmp_path / "f.png"),
            "--claims",
            str(tmp_path / "c.csv"),
            "--table",
            str(tmp_path / "t.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"growcert {experiment}: error: config key '{experiment}.seeds': '0' is not of type 'array'"
    ], result.stderr
    assert not list(tmp_path.iterdir())  # nothing written before the settings are known to be good
