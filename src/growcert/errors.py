"""The exceptions that mean "the user's input is wrong" (one-line messages, exit status 2)."""

from __future__ import annotations

import json


def _user_errors() -> tuple[type[BaseException], ...]:
    from growcert.checkpoint import CheckpointError
    from growcert.config import ConfigError
    from growcert.data import DatasetError
    from growcert.store import StoreError

    return (ConfigError, DatasetError, CheckpointError, StoreError, json.JSONDecodeError, FileNotFoundError)


USER_ERRORS = _user_errors()
