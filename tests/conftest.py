"""Shared fixtures: datasets prepared once per test session, in a temporary folder."""

import pytest

from growcert.data import load_prepared, prepare_dataset


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    """prepared(name) -> PreparedDataset, prepared once per session with default settings."""
    cache = {}

    def get(name):
        if name not in cache:
            folder = tmp_path_factory.mktemp(f"prepared-{name}")
            prepare_dataset(name, folder, {})
            cache[name] = load_prepared(folder)
        return cache[name]

    return get
