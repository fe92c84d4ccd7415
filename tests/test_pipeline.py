"""The pipeline's wiring (growcert.pipeline, rules/*.smk): each fact in one place.

- The run-folder template and every registered table, claims and checks file name are spelled in one file of src/
  and rules/: growcert/pipeline/artifacts.py.
- No model family is named in the rules, and none is compared or listed outside models/ and the schema: the rules'
  wildcards and choices come from the family records (growcert.models.FAMILIES). The schema lists no family
  either; its family-dependent parts (options per family, the pretrained section) agree with the registry.
- A new family is one module and one registry line: a toy family, added that way (in Snakemake's process through
  a sitecustomize, as tests/test_experiment_protocol.py adds a toy task), gets its jobs in the ci DAG.
- rules/common.smk only validates, imports and constrains (at most 100 lines), and no rule file defines a
  function: what a rule needs computed comes from growcert.pipeline.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
import yaml
from helpers import ci_dry_run, toy_site

from growcert import models
from growcert.models import FAMILIES, family_of, pretrained_family, trained_families
from growcert.pipeline import artifacts
from growcert.schema import load_schema

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(artifacts.__file__).resolve()


def sources() -> dict[Path, str]:
    """The text of every file of src/ and rules/ and the Snakefile (binary files spell nothing)."""
    texts = {}
    for path in [*(ROOT / "src").rglob("*"), *(ROOT / "rules").rglob("*"), ROOT / "Snakefile"]:
        if path.is_file() and "__pycache__" not in path.parts:
            try:
                texts[path.resolve()] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return texts


def test_the_run_folder_template_is_spelled_in_one_file():
    spellings = [artifacts.RUN_FOLDER, artifacts.RUN_FOLDER.replace("{", "{{").replace("}", "}}")]
    assert artifacts.RUN_FOLDER == "w{width}_d{depth}_s{seed}"
    found = {path: count for path, text in sources().items() if (count := sum(map(text.count, spellings)))}
    assert found == {ARTIFACTS: 1}, found


def code_strings(path: Path) -> list[str]:
    """The string constants of a Python file's code (f-string parts included), docstrings aside; for a rule file,
    its lines without their comments."""
    if path.suffix != ".py":
        return [line.split("#")[0] for line in path.read_text().splitlines()]
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


@pytest.mark.parametrize("name", [artifacts.INFO.name, artifacts.RUN_METRICS.name, artifacts.GROWTH_RUN_TABLE.name])
def test_a_run_or_dataset_file_name_is_spelled_in_code_in_one_file(name):
    """A prepared dataset's info file, a run's metrics and a growth experiment's table are named once, in
    artifacts.py: every writer, reader, rule and help line asks it (docstrings and comments may say the name)."""
    paths = [*(ROOT / "src").rglob("*.py"), *(ROOT / "rules").glob("*.smk"), ROOT / "Snakefile"]
    found = {
        path.resolve()
        for path in paths
        if any(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) for text in code_strings(path))
    }
    assert found == {ARTIFACTS}, found


def test_the_checkpoint_name_is_matched_by_the_pattern_artifacts_derives_from_it():
    assert artifacts.CHECKPOINT_NAME.fullmatch(artifacts.CHECKPOINT.at(step=120).name).group(1) == "120"
    assert not artifacts.CHECKPOINT_NAME.fullmatch("step12.pt.partial")
    found = {path.resolve() for path in (ROOT / "src").rglob("*.py") if r"step(\d+)" in path.read_text()}
    assert found == set(), found


def name_occurrences(stem: str, text: str) -> int:
    """How often `text` spells file name `stem` as a whole token (claim ids that equal it are another name)."""
    text = re.sub(
        rf'(?:Claim\(\s*|claim_row\(\s*|CLAIMS\[|check_row\(\s*|CHECKS\[|Check\(\s*)"{re.escape(stem)}"', "", text
    )
    return len(re.findall(rf"(?<![\w{{]){re.escape(stem)}(?![\w}}])", text))


@pytest.mark.parametrize(
    "artifact",
    [
        *artifacts.TABLES,
        *artifacts.CLAIMS_FILES,
        *artifacts.CHECKS_FILES,
        artifacts.task_table("preference"),  # a P2 task's (p2_<task>; most are also their task's claim keys)
        artifacts.task_claims("preference"),
    ],
    ids=lambda artifact: f"{artifact.kind}:{artifact.stem}",
)
def test_a_table_claims_or_checks_name_is_spelled_in_one_file(artifact):
    found = {
        path for path, text in sources().items() if name_occurrences(artifact.stem, text) and not path.suffix == ".rst"
    }  # a caption file may say which table it captions
    assert found <= {ARTIFACTS}, (artifact.stem, found)


def family_literals(text: str) -> list[str]:
    """Family names written as a whole token in `text` (not as part of `--hf`, `params.hf` or a longer name)."""
    return re.findall(rf"(?<![\w.{{-])({'|'.join(map(re.escape, FAMILIES))})(?![\w}}])", text)


def test_the_rules_name_no_family():
    for path in [*(ROOT / "rules").glob("*.smk"), ROOT / "Snakefile"]:
        strings = re.findall(r'"([^"\n]*)"|\'([^\'\n]*)\'', path.read_text())
        assert [name for pair in strings for text in pair for name in family_literals(text)] == [], path


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


# The one family named outside models/: P1's pre-registered primary analysis reads the llama family's rows (the
# paper's headline numbers are LLaMA-style; referee.claims.P1_PRIMARY_FAMILY). It is a fact of the claim registry, fixed
# before the reference runs, and report/ sits below models/ in the layers, so it cannot ask the family records.
PRE_REGISTERED = {"growcert/referee/claims.py": ["llama"]}


@pytest.mark.parametrize(
    "path",
    sorted(path for path in (ROOT / "src" / "growcert").rglob("*.py") if path.parent.name != "models"),
    ids=lambda path: str(path.relative_to(ROOT / "src")),
)
def test_no_family_is_compared_or_listed_outside_models(path):
    """A string that is a family's name, or a pattern or list of them ("resnet|llama"), is a family fact written
    outside its record; prose that mentions a family (a help text, a message) is not. The claim registry's
    pre-registered primary family is the one exception (PRE_REGISTERED)."""
    tree = ast.parse(path.read_text())
    docstrings = _docstrings(tree)
    names = set(FAMILIES)
    literals = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and (
            node.value in names
            or set(re.split(r"[|,\s]+", node.value.strip())) <= names
            and len(family_literals(node.value)) > 1
        )
    ]
    assert literals == PRE_REGISTERED.get(str(path.relative_to(ROOT / "src")), [])


def test_the_family_checker_finds_family_literals():
    assert family_literals('family="resnet|llama|hf"') == ["resnet", "llama", "hf"]
    assert family_literals('"--hf {params.hf:q} resnets model_hf"') == []


def schema_enums(schema, where="config"):
    """(key path, enum) of every enum in the schema."""
    if isinstance(schema, dict):
        if "enum" in schema:
            yield where, schema["enum"]
        for key, value in schema.items():
            yield from schema_enums(value, f"{where}.{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from schema_enums(value, f"{where}[{index}]")


def test_the_schema_and_the_registry_agree_on_the_families():
    """The registry is the list of families: no enum of the schema lists them (the pipeline's validation names the
    known ones), every per-family options section is a trained family's, and the pretrained section exists for
    the registry's pretrained family. The grokking task's architectures are named after the modules it builds
    (models.llama, models.classic), not families."""
    schema = load_schema()
    listing = {where: enum for where, enum in schema_enums(schema) if set(enum) & set(FAMILIES)}
    assert listing == {"config.properties.grokking.properties.model.properties.architecture": ["llama", "classic"]}
    properties = schema["properties"]
    for key in ("grids", "grow"):
        family = properties[key]["items"] if key == "grids" else properties[key]["properties"]["experiments"]["items"]
        assert "enum" not in family["properties"]["family"], key
    assert set(properties["models"]["properties"]) <= set(trained_families())
    assert ("pretrained" in properties) == (pretrained_family() is not None)
    assert all(family_of(name).name == name for name in FAMILIES)


def test_common_smk_only_validates_imports_and_constrains():
    assert len((ROOT / "rules" / "common.smk").read_text().splitlines()) <= 100
    for path in (ROOT / "rules").glob("*.smk"):
        text = path.read_text()
        assert re.findall(r"^\s*def \w+", text, flags=re.MULTILINE) == [], path
        assert "lambda" not in text, path


def test_config_and_store_import_no_model_family():
    package = ROOT / "src" / "growcert"
    for path in [package / "config.py", *(package / "store").glob("*.py")]:
        assert not re.search(r"^\s*(from growcert\.models|import growcert\.models)", path.read_text(), re.MULTILINE), (
            path
        )


TOY_FAMILY = '''"""Toy model family: a stack of `depth` linear maps of `width` features on flattened images."""

from torch import nn

from growcert.models import Family
from growcert.models.points import InsertionPoint, point_names


class Toy(nn.Module):
    family = "toy"

    def __init__(self, width, depth, data_info):
        super().__init__()
        features = 1
        for size in data_info["input_shape"]:
            features *= size
        self.stem = nn.Linear(features, width)
        self.points = nn.ModuleDict({name: InsertionPoint(name) for name in point_names(depth + 1)})
        self.head = nn.Linear(width, data_info["num_classes"])


FAMILY = Family(name="toy", data_kind="image", loss_name="cross_entropy", loss_description="the toy cross-entropy",
                native_dims=("feature",), channel_dim=-1,
                block_norm="identity", point_count=lambda depth: depth + 1,
                stream_features=lambda model, point: model.stem.out_features,
                depth_problem=lambda depth: None if depth <= 4 else f"toy depth must be at most 4, got {depth}",
                build=lambda width, depth, data_info, options: Toy(width, depth, data_info))
'''
REGISTRY_LINE = 'models.FAMILIES["toy"] = "toy_family"'


@pytest.fixture
def toy_family(tmp_path, monkeypatch):
    """The toy family's module on sys.path and its one registry line (this process and any Python it starts)."""
    folder = toy_site(
        tmp_path / "site", monkeypatch, "toy_family", TOY_FAMILY, "import growcert.models as models", REGISTRY_LINE
    )
    monkeypatch.setitem(models.FAMILIES, "toy", "toy_family")
    return folder


def test_a_toy_family_is_one_module_and_one_registry_line_and_gets_its_jobs(toy_family, tmp_path, planned_jobs):
    from growcert.plan import Plan, validate_config

    config = yaml.safe_load((ROOT / "configs" / "ci.yaml").read_text())
    config["grids"].append(
        {
            "family": "toy",
            "dataset": "digits",
            "widths": [3],
            "depths": [2],
            "seeds": [0],
            "train": {"steps": 10, "save_steps": [5, 10], "eval_every": 5},
        }
    )
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump({"grids": config["grids"]}))
    assert "toy" in trained_families()
    with pytest.raises(Exception, match=r"grids\[0\]\.depths\[0\]': toy depth must be at most 4"):
        validate_config({"grids": [{"family": "toy", "dataset": "digits", "depths": [8]}]})
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(toy_family), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    results = tmp_path / "results"
    result = ci_dry_run(tmp_path, environment, str(tmp_path / "toy.yaml"))
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert planned_jobs(output)["train_model"] == 14  # the ci grids' 13 runs and the toy's one
    run = "toy/digits/w3_d2_s0"
    assert f"output: {results}/models/{run}\n" in output
    for step in (5, 10):
        for path in (f"grads/{run}/step{step}.zarr/zarr.json", f"stats/alignment/{run}/step{step}.csv"):
            assert f"{results}/{path}" in output, path
    for path in (f"stats/depth/{run}/step10.csv", f"interventions/{run}/step10.csv"):  # the last checkpoint only
        assert f"{results}/{path}" in output, path
    plan = Plan(validate_config({**config, "results": str(results)}))
    assert [run.family for run in plan.runs()].count("toy") == 1
