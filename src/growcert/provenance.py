"""Provenance that travels with every artifact: versions, code hash, config hash, seed, and what made the numbers
(the numerics mode, CPU model, torch's CPU capability, MKL's and oneDNN's settings: `growcert.numerics.record`).

`code_hash` hashes the package's own source files, so two artifacts made by the same
code agree even outside a git checkout; `git_commit` is recorded when there is one.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import growcert
from growcert import numerics
from growcert.config import settings_hash

PACKAGE_DIR = Path(growcert.__file__).resolve().parent


@functools.cache
def code_hash() -> str:
    """sha256 over the package's .py and .yaml files (sorted paths and contents)."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.suffix in {".py", ".yaml"} and "__pycache__" not in path.parts:
            digest.update(path.relative_to(PACKAGE_DIR).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def git_commit() -> str | None:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None


def versions() -> dict[str, str]:
    """Versions of the packages results depend on (from metadata: no need to import torch here)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version(), "growcert": growcert.__version__}
    for package in ("torch", "numpy", "zarr", "xarray", "scikit-learn"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def machine_record() -> dict[str, Any]:
    """The machine a long run ran on, for a reference run's provenance: platform, CPU model, CPUs, Python."""
    return {
        "platform": platform.platform(),
        "processor": numerics.cpu_model(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def provenance(settings: dict[str, Any], seed: int | None = None) -> dict[str, Any]:
    """The provenance block stored in checkpoints, tables' sidecars and store attrs."""
    return {
        "settings": settings,
        "config_hash": settings_hash(settings),
        "seed": seed if seed is not None else settings.get("seed"),
        "versions": versions(),
        "code_hash": code_hash(),
        "git_commit": git_commit(),
        "command": " ".join(sys.argv),
        "numerics": numerics.record(),
    }
