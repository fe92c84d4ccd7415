"""Every `growcert <stage>`: a bad settings key and a missing input file each end in one line on stderr, exit
status 2, and nothing written; and the settings a bare stage uses are the pipeline's (no drift)."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from growcert.cli import build_parser, main, settings_stages
from growcert.config import stage_settings

ROOT = Path(__file__).resolve().parents[1]
RESNET_RUN = {"family": "resnet", "dataset": "digits", "width": 1, "depth": 8}
GROW_RUN = {"family": "resnet", "dataset": "digits", "width": 1, "base_depth": 8}
MISSING = "/nonexistent/growcert-input"


def torch_sees_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, train_tiny):
    """Real inputs for every stage: prepared digits, a tiny trained resnet, its store and its tables."""
    folder = tmp_path_factory.mktemp("cli-inputs")
    assert main(["prepare", "--dataset", "digits", "--out", str(folder / "digits")]) == 0
    from growcert.data import load_prepared

    checkpoint = train_tiny(load_prepared(folder / "digits"), folder / "run", "resnet", "digits", 1, 8)
    dump = {"train_examples": 16, "test_examples": 16, "batch_size": 8}
    assert (
        main(
            [
                "dump",
                "--checkpoint",
                str(checkpoint),
                "--data",
                str(folder / "digits"),
                "--settings",
                json.dumps(dump),
                "--out",
                str(folder / "store.zarr"),
            ]
        )
        == 0
    )
    (folder / "table.csv").write_text("a,b\n1,2\n")
    return {
        "D": str(folder / "digits"),
        "C": str(checkpoint),
        "R": str(folder / "run"),
        "S": str(folder / "store.zarr"),
        "A": str(folder / "table.csv"),
    }


# Per subcommand: its arguments with {D, C, R, S, A} inputs and {O} outputs, the settings that are valid
# for it (None: it takes none), and the input that the missing-file case replaces.
CASES = {
    "prepare": ("--dataset digits --out {O}", {}, "--settings"),
    "train": ("--data {D} --out {O}", RESNET_RUN, "{D}"),
    "dump": ("--checkpoint {C} --data {D} --out {O}/s.zarr", {}, "{C}"),
    "inspect": ("{S}", None, "{S}"),
    "compare-results": ("{R} {R}", None, "{R}"),
    "estimate-alignment": ("--store {S} --out {O}/a.csv", {}, "{S}"),
    "estimate-misalignment": ("--store {S} --alignment {A} --out {O}/m.csv", {}, "{A}"),
    "summarize-alignment": (
        "--alignment {A} --misalignment {A} --out-alignment {O}/a.csv --out-misalignment "
        "{O}/m.csv --out-summary {O}/s.csv --out-claims {O}/c.csv --out-checks {O}/k.csv --figures {O}",
        {},
        "{A}",
    ),
    "summarize-regime": (
        "--alignment {A} --training {A} --out-stats {O} --out-cells {O}/c.csv --out-claims "
        "{O}/k.csv --out-map {O}/m.json --figures {O}",
        None,
        "{A}",
    ),
    "intervene": ("--checkpoint {C} --store {S} --data {D} --out {O}/i.csv", {}, "{C}"),
    "summarize-interventions": (
        "{A} --out-table {O}/t.csv --out-summary {O}/s.csv --out-checks {O}/c.csv "
        "--out-claims {O}/k.csv --figure {O}/f.png",
        None,
        "{A}",
    ),
    "grokking": ("--out {O} --figure {O}/f.png --claims {O}/c.csv --table {O}/t.csv", {}, "--settings"),
    "pinn": ("--out {O} --figure {O}/f.png --claims {O}/c.csv --table {O}/t.csv", {}, "--settings"),
    "theory": ("--out {O} --figure {O}/f.png --claims {O}/c.csv --table {O}/t.csv", {}, "--settings"),
    "preference": ("--reference {R} --out {O} --figure {O}/f.png --claims {O}/c.csv --table {O}/t.csv", {}, "{R}"),
    "estimate-depth": ("--store {S} --out {O}/d.csv", {}, "{S}"),
    "summarize-depth": ("{A} --out-table {O}/t.csv --out-decision {O}/d.csv --figure {O}/f.png", {}, "{A}"),
    "grow": ("--data {D} --out {O}", GROW_RUN, "{D}"),
    "summarize-growth": (
        "{R} --depth {A} --out-table {O}/t.csv --out-claims {O}/c.csv --figure {O}/f.png",
        None,
        "{R}",
    ),
    "summarize-training": ("{R} --out {O}/t.csv", None, "{R}"),
    "plot-training": ("--table {A} --out {O}/f.png", None, "{A}"),
    "report": ("--results {R} --out {O}/r.html", None, "{R}"),
    "advise": ("--model {C} --data {D} --out {O}", {}, "{C}"),
    "advise-check": ("--model {C} --data {D} --out {O}", {}, "{C}"),
    "summarize-advise-check": ("{A} --out {O}", {}, "{A}"),
    "tune-advise-check": ("{A} --out {O}", {}, "{A}"),
    "reference": ("export p3-depth --results {R} --out {O}", None, "{R}"),
}


def test_every_subcommand_has_a_case():
    commands = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001 (argparse keeps them here)
    assert set(CASES) == set(commands)
    assert {name for name, (_, settings, _) in CASES.items() if settings is not None} == set(settings_stages()) | {
        "prepare"
    }


COMMANDS_FOLDER = ROOT / "src" / "growcert" / "commands"


def lookups_by_string(path: Path) -> list[str]:
    """What in `path` finds a module by a string at run time: importlib's import_module, __import__, or an
    import of importlib at all."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("importlib")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("importlib"):
            found.append(node.module)
        elif isinstance(node, (ast.Name, ast.Attribute)) and getattr(node, "id", getattr(node, "attr", None)) in (
            "import_module",
            "__import__",
        ):
            found.append(getattr(node, "id", getattr(node, "attr", None)))
    return found


def test_the_command_line_finds_every_command_by_import():
    """The registry imports each command module by name (go-to-definition reaches it), with no lookup by string,
    and each command's name is spelled once: its module's NAME, not a key of the registry."""
    from growcert import commands

    for path in [ROOT / "src" / "growcert" / "cli.py", *sorted(COMMANDS_FOLDER.glob("*.py"))]:
        assert lookups_by_string(path) == [], f"{path.name} finds modules by string"
    declared = {path.stem for path in COMMANDS_FOLDER.glob("*.py") if "\nNAME = " in path.read_text()}
    registered = {module.__name__.rsplit(".", 1)[-1] for module in commands.COMMANDS if hasattr(module, "NAME")}
    assert declared - registered == set(), "a command module the registry does not import"
    registry = ast.parse((COMMANDS_FOLDER / "__init__.py").read_text())
    spelled = {node.value for node in ast.walk(registry) if isinstance(node, ast.Constant)}
    assert spelled & {module.NAME for module in commands.COMMANDS if hasattr(module, "NAME")} == set()


def test_growcert_help_lists_every_command_and_imports_no_torch():
    from growcert.commands import names

    code = (
        "import sys; from growcert import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
    )
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "COLUMNS": "200",
    }
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.startswith("    ") and line.split()}
    assert set(names()) <= listed and set(CASES) <= listed
    assert result.stdout.splitlines()[-1] == "no torch"


def run(argv: list[str], capsys) -> tuple[int, list[str]]:
    code = main(argv)
    return code, capsys.readouterr().err.strip().splitlines()


def argv_of(
    stage: str, inputs: dict[str, str], out: Path, settings: dict | None, missing: str | None = None
) -> list[str]:
    template, _, _ = CASES[stage]
    paths = dict(inputs)
    if missing and missing.startswith("{"):
        paths[missing.strip("{}")] = MISSING
    argv = [stage, *shlex.split(template.format(O=out, **paths))]
    if settings is not None:
        argv += ["--settings", f"@{MISSING}.yaml" if missing == "--settings" else json.dumps(settings)]
    return argv


@pytest.mark.parametrize("stage", [name for name, (_, settings, _) in CASES.items() if settings is not None])
def test_a_bad_settings_key_is_one_line_naming_it_and_nothing_is_written(stage, inputs, tmp_path, capsys):
    out = tmp_path / "out"
    code, lines = run(argv_of(stage, inputs, out, {**CASES[stage][1], "bogus_key": 1}), capsys)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"growcert {stage}: error: ") and "bogus_key" in lines[0], lines
    assert not out.exists()


@pytest.mark.parametrize("stage", list(CASES))
def test_a_missing_input_file_is_one_line_naming_it_and_nothing_is_written(stage, inputs, tmp_path, capsys):
    out = tmp_path / "out"
    code, lines = run(argv_of(stage, inputs, out, CASES[stage][1], missing=CASES[stage][2]), capsys)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"growcert {stage}: error: ") and MISSING in lines[0], lines
    assert not out.exists()


def test_the_dump_resolves_its_settings_once(inputs, tmp_path, monkeypatch):
    """The command resolves --settings before it reads any input and passes them down; the stage takes them as
    they are (no second resolution)."""
    import growcert.config
    import growcert.stages.dump

    resolved, resolve = [], growcert.config.stage_settings

    def counted(stage, overrides=None):
        resolved.append(stage)
        return resolve(stage, overrides)

    monkeypatch.setattr(growcert.config, "stage_settings", counted)
    monkeypatch.setattr(growcert.stages.dump, "stage_settings", counted, raising=False)
    assert main(argv_of("dump", inputs, tmp_path, {"train_examples": 8, "test_examples": 8, "batch_size": 8})) == 0
    assert resolved.count("dump") == 1


# The stages that run torch on the config's device (theory takes the option too and stays on the CPU).
DEVICE_STAGES = [
    "train",
    "dump",
    "intervene",
    "estimate-depth",
    "grow",
    "grokking",
    "pinn",
    "preference",
    "advise",
    "advise-check",
]


@pytest.mark.skipif(torch_sees_cuda(), reason="asserts the refusal on a machine without CUDA")
@pytest.mark.parametrize("stage", DEVICE_STAGES)
def test_device_cuda_without_cuda_is_one_line_naming_the_key_and_nothing_is_written(stage, inputs, tmp_path, capsys):
    from growcert.schema import top_level_default

    out = tmp_path / "out"
    argv = argv_of(stage, inputs, out, CASES[stage][1])
    assert build_parser().parse_args(argv).device == top_level_default("device")
    code, lines = run(argv + ["--device", "cuda"], capsys)
    assert code == 2 and lines == [
        f"growcert {stage}: error: config key 'device': 'cuda', but torch sees no CUDA "
        "device on this machine (torch.cuda.is_available() is False); use device: auto "
        "or cpu"
    ], lines
    assert not out.exists()


def test_the_command_line_prints_one_line_and_exits_2(tmp_path):
    """The same through a real process: what a Snakemake job's log shows."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "growcert.cli",
            "estimate-alignment",
            "--store",
            MISSING,
            "--settings",
            '{"level": 2}',
            "--out",
            str(tmp_path / "a.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "growcert estimate-alignment: error: config key 'alignment.level': 2 is greater than or equal to the "
        "maximum of 1"
    ], result.stderr
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ bare stage = pipeline stage (no drift)


def merged_config(*files: str) -> dict:
    """The config files as `snakemake --configfile` merges them: mappings merged, lists replaced."""

    def update(base: dict, other: dict) -> dict:
        for key, value in other.items():
            base[key] = (
                update(base.get(key, {}), value)
                if isinstance(value, dict) and isinstance(base.get(key), dict)
                else value
            )
        return base

    config: dict = {}
    for name in files:
        update(config, yaml.safe_load((ROOT / name).read_text()))
    return config


def explicit_settings(stage: str, raw: dict, settings: dict) -> dict:
    """The keys the config files set explicitly for this job: what a user passes to a bare `growcert <stage>`."""
    if stage == "train":
        swept = "context" in settings  # a context sweep's run: its grid sets contexts and tokens_per_step
        grid = next(
            g
            for g in raw["grids"]
            if (g["family"], g["dataset"]) == (settings["family"], settings["dataset"]) and ("contexts" in g) == swept
        )
        explicit = {
            **{key: settings[key] for key in ("family", "dataset", "width", "depth", "seed")},
            "model": dict(raw.get("models", {}).get(settings["family"], {})),
            "train": dict(grid.get("train", {})),
        }
        if swept:
            explicit["context"] = explicit["model"]["context"] = settings["context"]
            explicit["train"]["batch_size"] = grid["tokens_per_step"] // settings["context"]
        return explicit
    if stage == "grow":
        section = raw.get("grow", {})
        shared = {key: value for key, value in section.items() if key != "experiments"}
        experiments = section.get("experiments")
        if experiments is None:  # the schema's default experiments
            from growcert.schema import load_schema

            experiments = load_schema()["properties"]["grow"]["properties"]["experiments"]["default"]
        entry = next(e for e in experiments if all(e[key] == settings[key] for key in GROW_RUN))
        return {**shared, **entry, "model": raw.get("models", {}).get(settings["family"], {})}
    section = {
        "estimate-alignment": "alignment",
        "estimate-misalignment": "alignment",
        "summarize-alignment": "alignment",
        "estimate-depth": "depth",
        "summarize-depth": "depth",
    }.get(stage, stage)
    if stage == "intervene":  # `analyse` chooses which stores the pipeline intervenes on, not how
        return {key: value for key, value in raw.get(section, {}).items() if key != "analyse"}
    return raw.get(section, {})


@pytest.mark.parametrize("files", [["config.yaml"], ["config.yaml", "configs/ci.yaml"]])
def test_a_bare_stage_runs_the_pipeline_settings(files, tmp_path):
    """Every job of the planned DAG passes the settings that the bare command resolves from the keys the config
    files set: the schema is the only source of the rest (a section the files leave alone is exactly the bare
    stage's `--settings '{}'`)."""
    arguments = [arg for name in files[1:] for arg in ("--configfile", name)]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--printshellcmds",
            *arguments,
            "--config",
            f"results={tmp_path}/results",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    raw = merged_config(*files)
    checked, stages = set(), settings_stages()
    for line in (result.stdout + result.stderr).splitlines():
        command = line.removeprefix("Shell command: ").strip()
        words = shlex.split(command.split(" > ", 1)[0]) if command.startswith("growcert ") else []
        if len(words) < 2 or words[1] not in stages or "--settings" not in words:
            continue
        stage, pipeline = words[1], json.loads(words[words.index("--settings") + 1])
        if stage in ("estimate-alignment", "estimate-depth", "estimate-misalignment") and "/hf/" in line:
            continue  # pretrained models' depth overrides: config pretrained.depth, tested in test_hf
        section, explicit = stages[stage], explicit_settings(stage, raw, pipeline)
        if "--arm" in words:  # a P2 unit's job: the settings of that unit alone (growcert.experiments.units)
            from growcert.experiments import task

            arm, seed = words[words.index("--arm") + 1], int(words[words.index("--seed") + 1])
            explicit = task(stage).unit_settings(explicit, arm, seed)
        assert stage_settings(section, pipeline) == stage_settings(section, explicit), stage
        if not explicit and stage not in ("train", "grow"):
            assert stage_settings(section, pipeline) == stage_settings(section, {}), stage
        checked.add(stage)
    expected = {
        "train",
        "dump",
        "estimate-alignment",
        "estimate-misalignment",
        "summarize-alignment",
        "intervene",
        "estimate-depth",
        "summarize-depth",
        "grow",
        "grokking",
        "pinn",
        "theory",
        "preference",
    }
    assert checked == expected
