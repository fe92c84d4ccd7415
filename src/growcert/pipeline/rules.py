"""What the rules derive inside Snakemake (only the rules import it; their `snakemake --report` marks are
growcert.report.labels.report_marks').

The parameters that name a folder (`input_folder`, `output_folder`, ...) derive it from the job's own input or
output file, as `snakemake --lint` asks: where a storage plugin maps files to other places (no shared
filesystem), the folder follows the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from growcert.pipeline.artifacts import CHECKPOINT, STORE_ROOT


def _first(files: Any) -> str:
    """A named input or output: its file, or the first of a list of files."""
    return files if isinstance(files, str) else files[0]


def input_folder(name: str) -> Callable[[Any, Any], str]:
    """The folder of the job's input `name` (the first file of a list)."""
    return lambda wildcards, input: os.path.dirname(_first(getattr(input, name)))


def output_folder(name: str, up: int = 1) -> Callable[[Any, Any], str]:
    """The folder of the job's output `name` (`up` = 2: the folder above it)."""

    def folder(wildcards: Any, output: Any) -> str:
        path = _first(getattr(output, name))
        for _ in range(up):
            path = os.path.dirname(path)
        return path

    return folder


def results_subfolder(output_name: str, folder: str) -> Callable[[Any, Any], str]:
    """`folder` beside the folder of output `output_name` (results/<folder> from results/claims/x.csv)."""
    above = output_folder(output_name, up=2)
    return lambda wildcards, output: os.path.join(above(wildcards, output), folder)


def _store_folder(path: str) -> str:
    """The store folder of a rule's store input or output (the folder, or its root zarr.json)."""
    return os.path.dirname(path) if os.path.basename(path) == STORE_ROOT.name else path


def input_store() -> Callable[[Any, Any], str]:
    """The store folder of the job's input `store`."""
    return lambda wildcards, input: _store_folder(input.store)


def output_store() -> Callable[[Any, Any], str]:
    """The store folder of the job's output `store`."""
    return lambda wildcards, output: _store_folder(output.store)


def input_checkpoint() -> Callable[[Any, Any], str]:
    """The checkpoint of step `step` in the job's input run folder `run`."""
    return lambda wildcards, input: CHECKPOINT.path(input.run, step=wildcards.step)
