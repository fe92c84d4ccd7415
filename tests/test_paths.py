"""One path vocabulary (docs/design.md §3): every file and folder name the pipeline reads or writes is
spelled once, in growcert.pipeline.artifacts, and everything else reaches it as `X.path(folder, **wildcards)`.

The names are read from artifacts itself (every `Place` and every registered figure, table, claims and checks file),
so the list grows with the artifacts. The code searched is every string literal of src/growcert (docstrings and
comments aside: they may name a file for the reader), rules/*.smk and the Snakefile. The five names that were
spelled most (the provenance record, summary, claim rows, reference table and curves) are not spelled even in prose:
every file under src/ but artifacts, the rules and the Snakefile name those by their constants (artifacts.PROVENANCE,
...), so a plain grep for them there gives 0. Tests keep their own fixtures' names. GROWCERT_PATHS_ROOT points the
search at another checkout (the names still come from this one's artifacts), which is how the test is shown failing
on the code before the vocabulary.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections import Counter
from pathlib import Path

from growcert.pipeline import artifacts

ROOT = Path(os.environ.get("GROWCERT_PATHS_ROOT") or Path(__file__).resolve().parents[1])
ARTIFACTS = ROOT / "src" / "growcert" / "pipeline" / "artifacts.py"


def registered() -> list[artifacts.Place | artifacts.Artifact]:
    """Every Place and Artifact artifacts defines, at module level or inside its dicts and tuples."""
    found = []
    for value in vars(artifacts).values():
        values = value.values() if isinstance(value, dict) else value if isinstance(value, tuple) else [value]
        found += [item for item in values if isinstance(item, (artifacts.Place, artifacts.Artifact))]
    return found


def registered_names() -> set[str]:
    """The file names (a part with a suffix and no wildcard) and the folder paths of more than one part that
    artifacts registers: what no other module may spell."""
    names = set()
    for item in registered():
        template = item.template if isinstance(item, artifacts.Place) else item.path("").lstrip("/")
        parts = template.split("/")
        names |= {part for part in parts if "." in part.strip(".") and "{" not in part}
        fixed = "/".join(part for part in parts[: next((i for i, p in enumerate(parts) if "{" in p), len(parts))])
        if fixed.count("/") and "." not in fixed.rsplit("/", 1)[-1]:
            names.add(fixed)  # a folder path such as docs/reference-results or advise-check/scores
    return names


def searched() -> list[Path]:
    """The code the pipeline runs: the package but artifacts, the rules and the Snakefile."""
    files = sorted((ROOT / "src" / "growcert").rglob("*.py")) + sorted((ROOT / "rules").glob("*.smk"))
    return [path for path in files if path != ARTIFACTS] + [ROOT / "Snakefile"]


def docstrings(text: str) -> set[tuple[int, int]]:
    """Where the docstrings of a Python module start (none for a Snakemake file, which ast cannot read)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    starts = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                starts.add((first.lineno, first.col_offset))
    return starts


def literals(text: str) -> list[tuple[int, str]]:
    """(line, text) of each string literal of `text` but its docstrings."""
    skip = docstrings(text)
    return [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.STRING and token.start not in skip
    ]


def spellings(text: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each registered name spelled in a string literal of `text` (a whole name: p1_alignment.csv
    does not spell alignment.csv)."""
    patterns = {name: re.compile(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-]|\.\w)") for name in names}
    return [
        (line, name)
        for line, literal in literals(text)
        for name, pattern in patterns.items()
        for _ in pattern.finditer(literal)
    ]


def test_the_names_come_from_the_artifacts():
    names = registered_names()
    # what the issue counted, and a sample of the rest: each registered in artifacts, none written out here
    for place in (
        artifacts.PROVENANCE,
        artifacts.SUMMARY,
        artifacts.CLAIM_ROWS,
        artifacts.REFERENCE_TABLE,
        artifacts.CURVES,
        artifacts.INFO,
        artifacts.RUN_METRICS,
        artifacts.STORE_ROOT,
        artifacts.README,
    ):
        assert place.name in names
    assert artifacts.TRAINING_GRID.file in names and artifacts.REFERENCE_RUNS.template in names
    assert len(names) > 50


def test_the_search_finds_a_spelling():
    code = 'DOC = 1\nx = folder / "{}"\ny = f"{{out}}/{}"\nz = "p1_{}"\n'
    name, other = artifacts.SUMMARY.name, artifacts.PROVENANCE.name
    assert spellings(code.format(name, other, name), {name, other}) == [(2, name), (3, other)]
    assert spellings(f'def f():\n    """Reads {name}."""\n    # and {name}\n', {name}) == []


def test_no_registered_name_is_spelled_outside_artifacts():
    names = registered_names()
    found = [
        (path.relative_to(ROOT), line, name)
        for path in searched()
        for line, name in spellings(path.read_text(encoding="utf-8"), names)
    ]
    counts = Counter(name for _, _, name in found)
    files = {name: len({path for path, _, spelled in found if spelled == name}) for name in counts}
    summary = ", ".join(f"{name} {count} times in {files[name]} files" for name, count in counts.most_common())
    assert not found, (
        f"{len(found)} spellings of registered names outside pipeline/artifacts.py ({summary}); "
        f"reach them as artifacts.X.path(folder): "
        + "; ".join(f"{path}:{line} {name}" for path, line, name in found[:40])
    )


# The names once spelled most, counted with a plain grep over src/: nowhere but artifacts, docstrings and comments too
COUNTED = (artifacts.PROVENANCE, artifacts.SUMMARY, artifacts.CLAIM_ROWS, artifacts.REFERENCE_TABLE, artifacts.CURVES)


def prose_searched() -> list[Path]:
    """searched() and every other file under src/ but artifacts (the schema, the report captions): the grep's files."""
    code = searched()
    others = [
        path
        for path in sorted((ROOT / "src").rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path != ARTIFACTS and path not in code
    ]
    return code + others


def test_the_issue_counted_names_are_not_even_in_prose():
    names = [place.name for place in COUNTED]
    found = [
        (path.relative_to(ROOT), number, name)
        for path in prose_searched()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for name in names
        for _ in range(line.count(name))
    ]
    assert not found, (
        f"{len(found)} substrings of {', '.join(names)} outside pipeline/artifacts.py, docstrings and comments "
        f"included; name the artifact by its constant (artifacts.PROVENANCE, ...): "
        + "; ".join(f"{path}:{number} {name}" for path, number, name in found)
    )
