"""The unit of a P2 task: one optimizer arm at one seed, trained alone into a folder of its own, and the
aggregate that makes the task's folder from its units: a P2 task's (arm, seed) is its own job, so an executor
spreads the arms and seeds of a task over a cluster and a killed one resumes from its own folder.

A task with units (grokking, pinn) has, besides the protocol's four functions (`growcert.experiments`):

    units(settings) -> [(arm, seed)]        every unit, in the task's order (seeds outer, arms inner); `arm` is
                                            the unit's name, a path part (`unit_name`)
    unit_settings(settings, arm, seed)      the settings of that unit alone (what its job runs and its resume
                                            state and provenance are hashed with)
    run_unit(settings, out, arm, seed, **runtime)   train it: CURVES, PROVENANCE, SUMMARY in out (artifacts)

and, for a unit that reads others (grokking's paired caps: a gate reading reads its seed's AdamW unit),
`unit_inputs(settings, arm, seed) -> [(arm, seed)]`, whose summaries (artifacts.UNIT_SUMMARY) `run_unit` gets as
`inputs`.

A unit rebuilds everything its arm shares with the other arms of its seed (the split, the initial weights,
the batch order) from the seed, so a unit run alone is the unit run among the others, bit for bit. Its
resume state is its folder's `.resume` (`resume.UnitResume`): a killed unit continues where it stopped.
The folder of unit (arm, seed) in a task's folder is `pipeline.artifacts.TASK_UNIT`.

`aggregate_units` writes the task's curves and summary (artifacts.CURVES, SUMMARY) as its units' rows in the task's
order (their text as written, so the task's tables are those a run of every unit in one process writes), and a
provenance record (PROVENANCE) listing the units; the task's figure, claims and table then read the task folder as
before. `run_all_units` is `growcert <task>` without an arm: every unit in this process, a finished one (its summary
there, made under the same unit settings) kept, then the aggregate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from growcert.config import settings_hash
from growcert.errors import ConfigError
from growcert.files import write_text
from growcert.pipeline.artifacts import CURVES, PROVENANCE, RESUME, SUMMARY, TASK_UNIT
from growcert.provenance import provenance

UNIT_TABLES = (CURVES, SUMMARY)  # written by every unit, summary last


def unit_name(label: str) -> str:
    """An arm's label as a path part: each run of characters other than letters, digits, dots and dashes as _
    ('AdamW wd=0.15' -> 'AdamW_wd_0.15', 'Grokfast-EMA wd=0.005 (L2)' -> 'Grokfast-EMA_wd_0.005_L2')."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", label).strip("_")


def check_unit(module: ModuleType, task: str, settings: dict[str, Any], arm: str, seed: int) -> None:
    """A ConfigError naming the key when (arm, seed) is not a unit of these settings."""
    units = module.units(settings)
    arms = list(dict.fromkeys(name for name, _ in units))
    seeds = list(dict.fromkeys(unit_seed for _, unit_seed in units))
    if arm not in arms:
        raise ConfigError(f"--arm {arm!r} is not an arm of config key '{task}' (its arms: {', '.join(arms)})")
    if seed not in seeds:
        raise ConfigError(
            f"--seed {seed} is not a seed of config key '{task}' (its seeds: {', '.join(map(str, seeds))})"
        )


def add_unit_arguments(command) -> None:
    """The arguments of `growcert <task>` that run one unit (`run_unit_command`) or aggregate the finished ones."""
    command.add_argument(
        "--arm",
        default=None,
        help="train this arm alone (its unit name: growcert.experiments"
        ".units) at --seed into --out; no figure, claims or table",
    )
    command.add_argument("--seed", type=int, default=None, help="the seed of the unit --arm names")
    command.add_argument(
        "--unit-inputs",
        nargs="*",
        default=[],
        help=f"the {SUMMARY.name} of each unit this unit "
        "reads (grokking.cap paired: a gate reading's AdamW unit at its seed)",
    )
    command.add_argument(
        "--aggregate",
        action="store_true",
        help="train nothing: make --out's tables from "
        f"its finished units (--out/{TASK_UNIT.template}), then the figure, claims and table",
    )


def run_unit_command(module: ModuleType, args, log: Callable[[str], None]) -> bool:
    """Run the one unit that `args` names (--arm and --seed) into --out, checked first (`check_unit`); False when
    they name none. Both or neither, and never with --aggregate: a ConfigError otherwise."""
    unit = getattr(args, "arm", None), getattr(args, "seed", None)
    if unit == (None, None):
        return False
    if None in unit or getattr(args, "aggregate", False):
        raise ConfigError("--arm and --seed name one unit together (and without --aggregate)")
    check_unit(module, args.stage, args.settings, *unit)
    reads = {"inputs": [Path(path) for path in args.unit_inputs]} if hasattr(module, "unit_inputs") else {}
    module.run_unit(args.settings, Path(args.out), *unit, log=log, threads=args.threads, device=args.device, **reads)
    return True


def unit_resume_folder(out: str | Path) -> Path:
    return RESUME.path(Path(out))


def finished(module: ModuleType, settings: dict[str, Any], out: str | Path, arm: str, seed: int) -> bool:
    """Whether unit folder `out` holds the unit's tables, made under its settings of now."""
    out = Path(out)
    if not all(table.path(out).is_file() for table in UNIT_TABLES) or not PROVENANCE.path(out).is_file():
        return False
    made = json.loads(PROVENANCE.path(out).read_text()).get("config_hash")
    return made == settings_hash(module.unit_settings(settings, arm, seed))


def run_all_units(
    module: ModuleType, settings: dict[str, Any], out: str | Path, log: Callable[[str], None] = print, **runtime: Any
) -> dict[str, Any]:
    """Every unit of the task in this process (a finished one kept), then `aggregate_units` into `out`; returns
    the task's tables (curves, summary) and its provenance record."""
    import pandas as pd

    for arm, seed in module.units(settings):
        folder = TASK_UNIT.path(str(out), arm=arm, seed=seed)
        if finished(module, settings, folder, arm, seed):
            log(f"unit {arm} seed {seed}: finished in {folder}, kept")
            continue
        reads = {"inputs": unit_inputs(module, settings, out, arm, seed)} if hasattr(module, "unit_inputs") else {}
        module.run_unit(settings, Path(folder), arm, seed, log=log, **reads, **runtime)
    aggregate_units(module, settings, out)
    out = Path(out)
    return {
        **{Path(table.name).stem: pd.read_csv(table.path(out)) for table in UNIT_TABLES},
        "provenance": json.loads(PROVENANCE.path(out).read_text()),
    }


def unit_inputs(
    module: ModuleType, settings: dict[str, Any], task_folder: str | Path, arm: str, seed: int
) -> list[Path]:
    """The summaries (artifacts.SUMMARY) of the units that unit (`arm`, `seed`) reads, in task folder `task_folder`
    (none for a task without `unit_inputs`); `units` orders a unit after those it reads."""
    read = module.unit_inputs(settings, arm, seed) if hasattr(module, "unit_inputs") else []
    return [SUMMARY.under(TASK_UNIT).path(Path(task_folder), arm=arm, seed=unit_seed) for arm, unit_seed in read]


def aggregate_units(module: ModuleType, settings: dict[str, Any], out: str | Path) -> list[str]:
    """The task's curves and summary (artifacts.CURVES, SUMMARY) in `out` from its units' (in `units` order; every
    unit must have finished), and its provenance record (PROVENANCE): the task's settings and each unit's folder,
    settings hash and record. Returns the unit folders."""
    out = Path(out)
    folders = [TASK_UNIT.path(str(out), arm=arm, seed=seed) for arm, seed in module.units(settings)]
    missing = [folder for folder in folders if not SUMMARY.path(Path(folder)).is_file()]
    if missing:
        raise ConfigError(
            f"{len(missing)} unit(s) of {out} have not finished (no {SUMMARY.name}), e.g. {missing[0]}; "
            "run them first (growcert <task> --arm ARM --seed SEED, or the whole task without --arm)"
        )
    records = [json.loads(PROVENANCE.path(Path(folder)).read_text()) for folder in folders]
    base = set(provenance({}))
    units = [
        {
            "folder": str(Path(folder).relative_to(out)),
            "config_hash": record["config_hash"],
            **{key: value for key, value in record.items() if key not in base},
        }
        for folder, record in zip(folders, records)
    ]
    shared = {
        key: value
        for key, value in units[0].items()
        if key not in ("folder", "config_hash") and all(unit.get(key) == value for unit in units)
    }  # num_parameters, device: one value for all
    out.mkdir(parents=True, exist_ok=True)
    write_text(PROVENANCE.path(out), json.dumps(provenance(settings) | shared | {"units": units}, indent=1))
    for table in UNIT_TABLES:  # summary last: the task is done when it is there
        write_text(table.path(out), concatenated_csv([table.path(Path(folder)) for folder in folders]))
    return folders


def concatenated_csv(files: list[Path]) -> str:
    """The rows of CSV files with one header, as written (a file with another header is an error)."""
    texts = [file.read_text() for file in files]
    header = texts[0].split("\n", 1)[0]
    rows = []
    for file, text in zip(files, texts):
        first, _, body = text.partition("\n")
        if first != header:
            raise ConfigError(f"{file}: its columns ({first}) are not those of {files[0]} ({header}); rerun it")
        rows.append(body if body.endswith("\n") or not body else body + "\n")
    return header + "\n" + "".join(rows)
