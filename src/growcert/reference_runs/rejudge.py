"""`growcert reference rejudge <name>`: judge a committed reference run again from its own tables, without retraining
(docs/reproducing.md, "Reference runs").

The run's judge (reference_runs.registry) rewrites its judged tables and claim rows (artifacts.CLAIM_ROWS) by the
current referee's rule; the README's verdict lines are rewritten from the new claim rows; its provenance record
(artifacts.PROVENANCE) keeps the run's own record (its date, commit and command are never rewritten) and gets a
`rejudged` entry: when, at which commit, by which command.
An earlier `rejudged` entry moves to `rejudged_earlier`.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from growcert.errors import ConfigError
from growcert.pipeline.artifacts import PROVENANCE
from growcert.provenance import git_commit
from growcert.reference_runs.readme import rewrite_verdicts
from growcert.reference_runs.registry import ReferenceRun


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def read_record(folder: Path) -> dict[str, Any]:
    """`folder`'s provenance record (artifacts.PROVENANCE); ConfigError when the folder holds no reference run."""
    path = PROVENANCE.path(folder)
    if not path.is_file():
        raise ConfigError(f"{folder}: no {PROVENANCE.name}, so no reference run to judge again")
    return json.loads(path.read_text(encoding="utf-8"))


def rejudged_record(run: ReferenceRun, folder: Path) -> dict[str, Any]:
    """When, at which commit and by which command `folder` was judged again."""
    command = f"growcert reference rejudge {run.name}" + ("" if folder == run.folder() else f" --out {folder}")
    return {"date": now(), "commit": git_commit(), "command": command}


def rejudge(run: ReferenceRun, folder: Path | None = None) -> Path:
    """Judge the committed run in `folder` (default docs/reference-results/<name>) again; returns the folder. A
    scratch copy must keep the run's name: the folder's name sets the level of a claim judged at a later look."""
    folder = Path(folder) if folder is not None else run.folder()
    record = read_record(folder)
    missing = [name for name in run.inputs if not (folder / name).is_file()]
    if missing:
        raise ConfigError(f"{folder}: {missing[0]} is missing, which {run.name} is judged from")
    run.judge(folder, record)
    if "rejudged" in record:
        record.setdefault("rejudged_earlier", []).append(record["rejudged"])
    record["rejudged"] = rejudged_record(run, folder)
    PROVENANCE.path(folder).write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
    rewrite_verdicts(folder, run, record["rejudged"])
    return folder
