"""The exceptions that mean "the user's input is wrong": one-line messages, exit status 2 in the CLI.

Defined here, in a module with no heavy imports, so the command line can catch them without
importing torch or zarr first; each stage module re-exports the one it raises.
"""

from __future__ import annotations

import json


class GrowcertError(Exception):
    """Base of user-facing errors. The message is forced onto one line: whatever was interpolated
    into it (an OS error text, a path) must not spill over several lines in logs or the CLI."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class ConfigError(GrowcertError, ValueError):
    """A configuration problem; the message names the key."""


class DatasetError(GrowcertError, RuntimeError):
    """A dataset is missing or malformed; the message names the dataset, key or path and the fix."""


class CheckpointError(GrowcertError, RuntimeError):
    """A checkpoint is missing or unreadable; the message names the file."""


class StoreError(GrowcertError, RuntimeError):
    """A gradient store is missing, incomplete, corrupted or not what the caller expects."""


class NumericalError(GrowcertError, FloatingPointError):
    """A loss or a stored value became NaN or infinite; the message names the run or store and the step."""


# OSError: a missing file, a full disk, a permission: the OS's own one-line message names the path.
USER_ERRORS: tuple[type[BaseException], ...] = (GrowcertError, json.JSONDecodeError, OSError)
