"""Every reference in code, configs and docs names a file of this repository, and every section it cites exists.

The scanner reads the repository's text (SCANNED) for path-like references: paths under a tracked top-level
folder (`docs/science.md`, `rules/common.smk`, `src/growcert/resources/report/<figure>.rst`), other paths with a folder
(`optim/adam.py`, resolved against any file of the repository), and bare file names of the kinds the
repository holds (`science.md`, `config.yaml`). A path with a placeholder (`{dataset}`, `<name>`, `*`, `…`)
must match at least one file as a glob. Section citations after a markdown path are resolved in that file:
`§N` against its numbered headings (`## N. …`), `#anchor` against its headings' GitHub anchors, and
`("Heading")` / `, "Heading"` against its heading texts. A `§N` after an upper-case word that is no path
(`DESIGN §4`) names a document by a name it does not have. Code and configs carry no issue numbers.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = (
    "src",
    "rules",
    "configs",
    "benchmarks",
    "tests",
    "docs",
    "report",
    "profiles",
    "envs",
    "README.md",
    "config.yaml",
    "Snakefile",
    "Makefile",
    "pyproject.toml",
)
SUFFIXES = {".py", ".smk", ".yaml", ".md", ".rst", ".sh", ".toml", ".txt", ""}
# Not scanned: the reference runs' own records (written by `growcert reference export` at the time of the run,
# including the config text of that day) and caches.
SKIPPED_PARTS = {"reference-results", "__pycache__", ".pytest_cache"}
TRACKED_DIRS = ("docs", "src", "configs", "rules", "benchmarks", "tests", "report", "profiles", "envs")
KINDS = "md|yaml|smk|rst|toml|py|sh"

# Paths that are meant not to exist (yet): keep this list short, each with its reason.
ALLOWED = {
    "profiles/mycluster": "the copy of profiles/slurm that docs/reproducing.md tells a user to make",
    "src/growcert/stats/__pycache__": "numba's cache of the compiled misalignment loops, written on their first "
    "compile (docs/reproducing.md says where it goes)",
}
# File names that commands write, wherever they are told to (a path ending in one is an output, not a reference)
OUTPUT_NAMES = {"advice.md": "the page `growcert advise` writes into the folder it is given (--out)"}
# This file holds deliberately dead references (the scanner's own check); tests/ is read for its docstrings and
# comments only, since its string literals name the temporary files the tests write.
SELF = Path(__file__).resolve()

URL = re.compile(r"https?://\S+")
CLOSING_TAG = re.compile(r"</\w+>")
PATH = re.compile(r"(?<![\w./-])((?:\.\./)*(?:[\w.{}<>*…-]+/)+[\w.{}<>*…-]*[\w}>*…/])")
BARE = re.compile(rf"(?<![\w./<>{{*-])([\w-]+(?:\.[\w-]+)*\.(?:{KINDS}))(?![\w/.-])")
MD_SECTION = re.compile(r"([\w./-]+\.md)(?:`|\))*\s*(?:§\s*(\d+)|section (\d+))")
MD_ANCHOR = re.compile(r"([\w./-]+\.md)#([\w-]+)")
MD_HEADING = re.compile(r"([\w./-]+\.md)(?:`|\)|\])*(?:,\s*|\s+)\(?\"([^\"\n]{1,90})\"")
STALE_SECTION = re.compile(r"\b([A-Z]{3,})(?:\.md)?\s+§\s*\d")
ISSUE = re.compile(r"\b[Ii]ssues?\s+#?\d+|(?<![\w&/#:])(?<!: )#\d{1,4}\b(?![;\w])")
PLACEHOLDER = re.compile(r"\{[^}/]*\}|<[^>/]*>|…|\.\.\.")


def prose(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of what a reader reads: every line, or for a test module its docstrings and comments."""
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = list(enumerate(text.splitlines(), 1))
    if path.suffix != ".py" or "tests" not in path.relative_to(ROOT).parts[:1]:
        return lines
    keep: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            keep.add(token.start[0])
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            keep.update(range(body[0].lineno, body[0].end_lineno + 1))
    return [(number, line) for number, line in lines if number in keep]


def scanned_files(root: Path = ROOT) -> list[Path]:
    files = []
    for name in SCANNED:
        path = root / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        files += [
            file
            for file in candidates
            if file.is_file()
            and file.suffix in SUFFIXES
            and not SKIPPED_PARTS & set(file.relative_to(root).parts)
            and file.resolve() != SELF
        ]
    return files


def repository_files(root: Path = ROOT) -> set[str]:
    """Every file and folder of the working tree (relative, '/'-separated), outside caches and run outputs."""
    ignored = {".git", ".venv", "results", ".snakemake", "__pycache__", ".pytest_cache", "prepared", ".whl"}
    found = set()
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if ignored & set(relative.parts) or any(part.endswith(".egg-info") for part in relative.parts):
            continue
        found.add(relative.as_posix())
    return found


def headings(markdown: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", markdown.read_text(encoding="utf-8"), flags=re.S)
    return [line.lstrip("#").strip().replace("`", "") for line in text.splitlines() if re.match(r"#{1,6} ", line)]


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


class Scanner:
    def __init__(self, root: Path = ROOT, files: set[str] | None = None):
        self.root = root
        self.files = repository_files(root) if files is None else files
        self.basenames = {name.rsplit("/", 1)[-1] for name in self.files}

    def exists(self, reference: str, where: Path) -> bool:
        reference = reference.rstrip("/")
        if reference in ALLOWED or reference.rsplit("/", 1)[-1] in OUTPUT_NAMES:
            return True
        if reference.startswith("../"):  # relative to the referring file (a rule's caption): made root-relative
            reference = os.path.normpath(where.parent.relative_to(self.root) / reference)
            if reference.startswith(".."):
                return False
        if PLACEHOLDER.search(reference) or "*" in reference:
            parts = PLACEHOLDER.split(reference.replace("*", "<*>"))
            holes = PLACEHOLDER.findall(reference.replace("*", "<*>"))
            pattern = re.escape(parts[0]) + "".join(
                (".*" if hole in ("…", "...") else "[^/]*") + re.escape(part) for hole, part in zip(holes, parts[1:])
            )
            # under a tracked folder: from the root, or (as the docs list the package) from src/growcert
            regex = re.compile(
                rf"(?:src/growcert/)?{pattern}" if reference.split("/", 1)[0] in TRACKED_DIRS else rf"(?:.*/)?{pattern}"
            )
            return any(regex.fullmatch(name) for name in self.files)
        top = reference.split("/", 1)[0]
        if top in TRACKED_DIRS or "/" not in reference:
            if (
                reference in self.files
                or f"src/growcert/{reference}" in self.files
                or (where.parent / reference).exists()
            ):
                return True
            return "/" not in reference and reference in self.basenames
        return reference in self.files or any(name.endswith("/" + reference) for name in self.files)

    def markdown(self, reference: str, where: Path) -> Path | None:
        for base in (self.root, where.parent):
            if (base / reference).is_file():
                return base / reference
        matches = sorted(name for name in self.files if name.rsplit("/", 1)[-1] == reference)
        return self.root / matches[0] if len(matches) == 1 else None

    def problems(self, text: str, where: Path) -> list[str]:
        """What in `text` (a file at `where`) points nowhere, one line each."""
        found, text = [], CLOSING_TAG.sub("", URL.sub("", text))
        for match in PATH.finditer(text):
            reference = match.group(1)
            top = reference.lstrip("./").split("/", 1)[0]
            if reference.startswith("../") or top in TRACKED_DIRS:
                if not self.exists(reference, where):
                    found.append(f"{reference}: no such file or folder in the repository")
            elif re.search(rf"\.(?:{KINDS})$", reference) and not self.exists(reference, where):
                found.append(f"{reference}: no such file in the repository")
        for match in BARE.finditer(text):
            name = match.group(1)
            if not self.exists(name, where):
                found.append(f"{name}: no such file in the repository")
        for regex, kind in ((MD_SECTION, "section"), (MD_ANCHOR, "anchor"), (MD_HEADING, "heading")):
            for match in regex.finditer(text):
                document = self.markdown(match.group(1), where)
                if document is None:
                    continue  # the file itself is reported above when it is missing
                titles = headings(document)
                if kind == "section":
                    number = match.group(2) or match.group(3)
                    ok = any(re.match(rf"{number}\.\s", title) for title in titles)
                elif kind == "anchor":
                    ok = match.group(2) in {anchor(title) for title in titles}
                else:
                    ok = match.group(2).replace("`", "") in titles
                if not ok:
                    found.append(f"{match.group(0)!r}: {match.group(1)} has no such {kind}")
        for match in STALE_SECTION.finditer(text):
            if not self.exists(match.group(1) + ".md", where):
                found.append(f"{match.group(0)!r}: a section of a document that is not named by its path")
        return found


def issue_numbers(text: str) -> list[str]:
    return [match.group(0) for match in ISSUE.finditer(URL.sub("", text))]


@pytest.fixture(scope="module")
def scanner() -> Scanner:
    return Scanner()


def test_every_reference_names_a_repository_file(scanner):
    problems = []
    for path in scanned_files():
        for line_number, line in prose(path):
            problems += [
                f"{path.relative_to(ROOT)}:{line_number}: {problem}" for problem in scanner.problems(line, path)
            ]
    assert not problems, "references that lead nowhere:\n" + "\n".join(problems)


def test_no_issue_numbers_in_code_or_configs():
    code = [path for path in scanned_files() if path.suffix in {".py", ".smk", ".yaml", ".sh", ".toml", ""}]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {hit}"
        for path in code
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for hit in issue_numbers(line)
    ]
    assert not found, "issue numbers (say what the thing is instead):\n" + "\n".join(found)


def test_the_scanner_finds_what_is_missing(scanner):
    """The checks above can fail: each kind of dead reference in a given string is found."""
    where = ROOT / "src" / "growcert" / "cli.py"
    assert (
        scanner.problems("see docs/science.md and rules/common.smk, src/growcert/resources/report/<figure>.rst", where)
        == []
    )
    rule = ROOT / "rules" / "alignment.smk"
    assert scanner.problems('caption="../src/growcert/resources/report/p3_depth.rst"', rule) == []
    assert scanner.problems('caption="../report/p3_depth.rst"', rule)
    assert scanner.problems("see docs/nowhere.md", where) == [
        "docs/nowhere.md: no such file or folder in the repository"
    ]
    assert scanner.problems("formulas in PAPERS.md P1", where) == ["PAPERS.md: no such file in the repository"]
    assert scanner.problems("templates in report/<name>.txt", where)
    assert scanner.problems("the store: DESIGN §4", where)
    assert scanner.problems("layout in docs/design.md §2", where) == []
    assert scanner.problems("layout in docs/design.md §12", where)
    assert scanner.problems('the rule (docs/science.md, "Verdicts")', where) == []
    assert scanner.problems('the rule (docs/science.md, "Verdict rules")', where)
    assert scanner.problems("docs/science.md#verdicts", where) == []
    assert scanner.problems("docs/science.md#no-such-heading", where)
    assert scanner.problems("xarray's issue tracker: https://github.com/pydata/xarray/issues/8371", where) == []
    assert issue_numbers("the regime map (issue 21)") == ["issue 21"]
    assert issue_numbers("asked for in #27") == ["#27"]
    assert issue_numbers("color: #222; see https://github.com/snakemake/snakemake/issues/1978") == []


README_MAX_LINES = 160
MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(markdown: Path) -> list[str]:
    """The targets of `markdown`'s links that are neither web addresses nor in-page anchors, anchors dropped."""
    targets = MARKDOWN_LINK.findall(markdown.read_text(encoding="utf-8"))
    return [
        target.split("#", 1)[0] for target in targets if not re.match(r"[a-z]+:", target) and not target.startswith("#")
    ]


def test_the_readme_is_a_front_door():
    """README.md stays short (what growcert answers, the two commands, the claims, where to go next): the details
    live in docs/, which docs/README.md indexes."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move details to the doc they belong to"


def test_the_docs_index_lists_every_document():
    index = ROOT / "docs" / "README.md"
    listed = {target.rstrip("/") for target in relative_links(index)}
    documents = {path.name for path in (ROOT / "docs").glob("*.md") if path.name != "README.md"}
    missing = sorted((documents | {"reference-results"}) - listed)
    assert not missing, f"docs/README.md does not list {missing}"


@pytest.mark.parametrize("name", ["README.md", "docs/README.md"])
def test_every_relative_link_of_the_front_doors_resolves(name):
    markdown = ROOT / name
    links = relative_links(markdown)
    assert links, f"{name} links to nothing"
    dead = [
        target
        for target in links
        if not (markdown.parent / target).resolve().exists()
        or not (markdown.parent / target).resolve().is_relative_to(ROOT)
    ]
    assert not dead, f"{name}: links to nothing in the repository: {dead}"
