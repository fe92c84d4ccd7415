"""The snakemake commands the docs give are ones Snakemake accepts.

`--configfile` and `--config` take every word after them (argparse nargs "+"), so a target written after their
values is read as one more config file or config entry, and the command fails before it starts. Every snakemake
command in the README, docs/, the configs' headers and the reference runs' READMEs and provenance is checked for
that statically, and the command `growcert reference export` writes into a run's README is run as a dry run.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from growcert.reference_runs.export import commands
from growcert.reference_runs.registry import RUNS

ROOT = Path(__file__).resolve().parents[1]
NARGS_OPTIONS = {"--config": lambda word: "=" in word, "--configfile": lambda word: re.search(r"\.ya?ml$", word)}


def logical_lines(text: str) -> list[str]:
    """`text`'s lines with backslash continuations joined and a leading comment mark (a config's header) dropped."""
    lines, pending = [], ""
    for line in text.splitlines():
        line = re.sub(r"^\s*#", "", line).strip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    return lines


def misplaced_targets(command: str) -> list[str]:
    """The words of a snakemake command that sit after --config/--configfile values where Snakemake would read them
    as more values: a target there (a word that is neither an option nor such a value)."""
    words = command.split()
    if "snakemake" not in words:
        return []
    misplaced, taking, nested = [], None, 0
    for word in words[words.index("snakemake") + 1 :]:
        if word.startswith("#"):
            break
        if word.startswith("$(") or nested:  # a command substitution: its words are its own command's
            nested += word.count("(") - word.count(")")
            if not nested and taking is not None:
                misplaced.append("$(...)")
            continue
        if word.startswith("-"):
            taking = NARGS_OPTIONS.get(word)
            continue
        if taking is not None and not taking(word):
            misplaced.append(word)
    return misplaced


def documented_commands() -> list[tuple[str, str]]:
    """(file, command) for every snakemake command of the docs, the configs' headers and the reference runs."""
    files = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "configs").glob("*.yaml")),
        *sorted((ROOT / "docs" / "reference-results").glob("**/README.md")),
    ]
    found = [
        (str(path.relative_to(ROOT)), line)
        for path in files
        if "/units" not in str(path)
        for line in logical_lines(path.read_text(encoding="utf-8"))
        if re.search(r"\bsnakemake\s", line)
    ]
    for path in sorted((ROOT / "docs" / "reference-results").glob("**/provenance.json")):
        if "/units" in str(path):
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        listed = record.get("commands") or []
        found += [(str(path.relative_to(ROOT)), command) for command in listed if isinstance(command, str)]
    return found


def test_no_documented_snakemake_command_puts_a_target_after_config_values():
    found = documented_commands()
    assert len(found) > 20  # the checker sees the commands it is meant to
    bad = [(name, command) for name, command in found if misplaced_targets(command)]
    assert not bad, bad


def test_the_checker_finds_a_target_after_config_values():
    assert misplaced_targets("snakemake --cores 2 --configfile c.yaml --config results=r summarize_regime") == [
        "summarize_regime"
    ]
    assert misplaced_targets("snakemake --configfile c.yaml results/claims/x.csv") == ["results/claims/x.csv"]
    assert misplaced_targets("snakemake summarize_regime --cores 2 --configfile c.yaml --config results=r") == []
    assert misplaced_targets("snakemake --config results=r $(growcert reference targets x --config c.yaml)") == [
        "$(...)"
    ]
    assert misplaced_targets("snakemake $(growcert reference targets x --config c.yaml) --config results=r") == []


def test_the_reproduce_command_an_export_writes_is_accepted_by_snakemake(tmp_path):
    """grokking-calibrated's first reproduce command, as `growcert reference export` writes it, run as a dry run:
    Snakemake plans one unit job per arm and seed."""
    run = RUNS["grokking-calibrated"]
    command = commands(run, run.configs[0], tmp_path / "results")[0]
    words = shlex.split(command)
    assert words[:3] == ["nice", "-n", "19"] and words[3] == "snakemake"
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", *words[4:], "-n"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    assert re.search(r"p2_unit\s+72", done.stdout)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_export_writes_its_targets_before_the_config_values(name, tmp_path):
    run = RUNS[name]
    for config_file in run.configs:
        assert misplaced_targets(commands(run, config_file, tmp_path / "results")[0]) == []
