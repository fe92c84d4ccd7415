"""A non-editable install works: the wheel carries the schema and the captions, and needs no repository.

The wheel is built from a copy of the package's sources (so the working tree gets no build folders) and
installed into a fresh virtual environment whose dependencies come from this environment's site-packages
(a path in a .pth file: nothing is downloaded, and this environment's editable growcert stays out of
reach). `growcert --help` (whose defaults come from the schema), `growcert prepare` on digits (settings
checked against the schema) and `growcert report` on an empty results folder (captions; no reference runs
outside the repository) then run from a folder outside the repository, with PYTHONPATH unset.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(command: list, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{command}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """(the new environment's bin folder, an environment without PYTHONPATH, a work folder outside the repository)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            tmp / "dist",
            source,
        ],
        cwd=tmp,
        env=env,
    )
    wheels = list((tmp / "dist").glob("growcert-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp, env=env)
    python = venv / "bin" / "python"
    site = Path(
        _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, env).stdout.strip()
    )
    (site / "growcert_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index", wheels[0]],
        cwd=tmp,
        env=env,
    )
    work = tmp / "work"
    work.mkdir()
    found = _run([python, "-c", "import growcert; print(growcert.__file__)"], work, env).stdout.strip()
    assert Path(found).is_relative_to(site), f"growcert imported from {found}, not from the installed wheel"
    return venv / "bin", env, work


def test_the_wheel_carries_its_package_data(installed):
    bin_folder, env, work = installed
    listed = _run(
        [
            bin_folder / "python",
            "-c",
            "from importlib import resources; "
            "root = resources.files('growcert') / 'resources'; "
            "print((root / 'config.schema.yaml').is_file(), len(list((root / 'report').iterdir())))",
        ],
        work,
        env,
    ).stdout.split()
    assert listed[0] == "True" and int(listed[1]) == len(list((ROOT / "src/growcert/resources/report").glob("*.rst")))


def test_help_and_a_stage_run_from_the_installed_wheel(installed):
    bin_folder, env, work = installed
    assert "prepare" in _run([bin_folder / "growcert", "--help"], work, env).stdout
    _run([bin_folder / "growcert", "prepare", "--dataset", "digits", "--out", work / "digits"], work, env)
    assert (work / "digits" / "arrays.npz").is_file() and (work / "digits" / "info.json").is_file()
    (work / "results").mkdir()
    _run([bin_folder / "growcert", "report", "--results", work / "results", "--out", work / "report.html"], work, env)
    text = (work / "report.html").read_text(encoding="utf-8")
    assert "No reference runs: this report was built without a reference-results folder" in text
