"""Exact comparison of two results folders: every table, every store array, every checkpoint's weights.

The question it answers is the one a user asks after moving a run to another device, machine or commit:
did it reproduce, bit for bit? (`growcert compare-results A B`; the check that `device: cpu` and `auto` give the same
artifacts.)

- Tables: every CSV outside benchmarks/ and logs/, read with pandas and compared exactly (NaN equals NaN),
  without the columns that record when or with which code a row was made (VOLATILE_COLUMNS).
- Stores: every array of every `*.zarr` store, element for element. Attributes are not compared: they are
  provenance (device, versions, code hash), which differs by design.
- Checkpoints: every tensor of a growcert checkpoint's state dict (`torch.equal`); its provenance block is
  not compared, for the same reason. Any other `.pt` file is compared byte for byte.

Hidden files and folders (Snakemake's markers, `.partial` and `.resume` leftovers) are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import zarr

# wall-clock and CPU-time readings and the code hash: they differ between any two runs, and say nothing about results
VOLATILE_COLUMNS = frozenset({"seconds", "cpu_seconds", "seconds_per_step", "elapsed_s", "code_hash"})
SKIPPED_FOLDERS = ("benchmarks", "logs")


@dataclass
class Comparison:
    """What compared equal, what differed (with a reason), and what exists in one folder only."""

    identical: list[str] = field(default_factory=list)
    differ: list[tuple[str, str]] = field(default_factory=list)
    only_in_one: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.differ and not self.only_in_one


def _visible(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return not any(part.startswith(".") for part in parts) and parts[0] not in SKIPPED_FOLDERS


def _artifacts(root: Path) -> dict[str, set[str]]:
    """Relative paths of the tables, stores and checkpoints under `root` (none inside a store)."""
    stores = {path for path in root.rglob("*.zarr") if path.is_dir() and _visible(path, root)}
    inside = lambda path: any(store in path.parents for store in stores)  # noqa: E731
    found = {"tables": set(), "stores": {str(path.relative_to(root)) for path in stores}, "checkpoints": set()}
    for suffix, kind in ((".csv", "tables"), (".pt", "checkpoints")):
        found[kind] = {
            str(path.relative_to(root))
            for path in root.rglob(f"*{suffix}")
            if path.is_file() and _visible(path, root) and not inside(path)
        }
    return found


def compare_tables(a: Path, b: Path) -> str | None:
    """None when the two CSVs hold the same rows and columns (volatile columns aside), else why not."""
    try:
        x, y = pd.read_csv(a), pd.read_csv(b)
    except pd.errors.EmptyDataError:
        return None if a.read_bytes() == b.read_bytes() else "one of them is empty"
    x = x.drop(columns=[column for column in x.columns if column in VOLATILE_COLUMNS])
    y = y.drop(columns=[column for column in y.columns if column in VOLATILE_COLUMNS])
    if list(x.columns) != list(y.columns):
        return f"columns differ: {sorted(set(x.columns) ^ set(y.columns)) or 'order'}"
    if len(x) != len(y):
        return f"{len(x)} rows against {len(y)}"
    try:
        pd.testing.assert_frame_equal(x, y, check_exact=True)
    except AssertionError:
        changed = [column for column in x.columns if not x[column].equals(y[column])]
        return f"values differ in column(s) {', '.join(map(str, changed)) or 'dtypes'}"
    return None


def _arrays(group: zarr.Group, prefix: str = ""):
    for name, member in group.members():
        if isinstance(member, zarr.Group):
            yield from _arrays(member, f"{prefix}{name}/")
        else:
            yield f"{prefix}{name}", member


def compare_stores(a: Path, b: Path) -> str | None:
    """None when every array of store `a` equals the same array of store `b` (and neither has others)."""
    left, right = dict(_arrays(zarr.open_group(a, mode="r"))), dict(_arrays(zarr.open_group(b, mode="r")))
    if left.keys() != right.keys():
        return f"arrays differ: {sorted(set(left) ^ set(right))}"
    changed = [
        name
        for name in sorted(left)
        if left[name].shape != right[name].shape
        or not np.array_equal(left[name][...], right[name][...], equal_nan=left[name].dtype.kind in "fc")
    ]
    return f"values differ in {', '.join(changed)}" if changed else None


def compare_checkpoints(a: Path, b: Path) -> str | None:
    """None when both files hold the same weights (growcert checkpoints) or the same bytes (anything else)."""
    x, y = (torch.load(path, map_location="cpu", weights_only=False) for path in (a, b))
    if not (isinstance(x, dict) and isinstance(y, dict) and "state_dict" in x and "state_dict" in y):
        return None if a.read_bytes() == b.read_bytes() else "bytes differ"
    left, right = x["state_dict"], y["state_dict"]
    if left.keys() != right.keys():
        return f"weights differ in name: {sorted(set(left) ^ set(right))[:5]}"
    changed = [
        name
        for name in left
        if not (
            torch.is_tensor(left[name])
            and torch.is_tensor(right[name])
            and left[name].shape == right[name].shape
            and torch.equal(left[name], right[name])
        )
    ]
    return f"{len(changed)} tensor(s) differ, first {changed[0]}" if changed else None


COMPARE = {"tables": compare_tables, "stores": compare_stores, "checkpoints": compare_checkpoints}


def compare_results(a: str | Path, b: str | Path) -> Comparison:
    """Compare results folders `a` and `b` artifact by artifact (the module docstring says how)."""
    a, b = Path(a), Path(b)
    for folder in (a, b):
        if not folder.is_dir():
            raise FileNotFoundError(f"results folder {folder}: no such folder")
    mine, theirs = _artifacts(a), _artifacts(b)
    comparison = Comparison()
    for kind, compare in COMPARE.items():
        comparison.only_in_one += sorted(mine[kind] ^ theirs[kind])
        for name in sorted(mine[kind] & theirs[kind]):
            reason = compare(a / name, b / name)
            if reason is None:
                comparison.identical.append(name)
            else:
                comparison.differ.append((name, reason))
    return comparison


def comparison_lines(comparison: Comparison, a: str | Path, b: str | Path) -> list[str]:
    """The report `growcert compare-results` prints: a count line, then one line per difference."""
    lines = [
        f"{a} vs {b}: {len(comparison.identical)} identical, {len(comparison.differ)} differ, "
        f"{len(comparison.only_in_one)} in one folder only"
    ]
    lines += [f"differs: {name}: {reason}" for name, reason in comparison.differ]
    lines += [f"only in one: {name}" for name in comparison.only_in_one]
    return lines
