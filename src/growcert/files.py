"""Atomic writes, and the pooled read of many tidy tables: every table, figure, checkpoint, report and resume state is
written under a hidden temporary name beside its target and renamed into place, so a kill or a full disk mid-write
leaves no file that a later stage would read as complete (the temporary is removed when the write fails).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path to write `path` through: renamed onto `path` when the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.partial{path.suffix}")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_csv(table: pd.DataFrame, path: str | Path) -> None:
    with atomic_path(path) as temporary:
        table.to_csv(temporary, index=False)


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def read_csvs(paths: list[str | Path]) -> pd.DataFrame:
    """The tables at `paths`, one below the other (an empty frame for no path): a summary's pooled input."""
    return pd.concat([pd.read_csv(path) for path in paths], ignore_index=True) if paths else pd.DataFrame()
