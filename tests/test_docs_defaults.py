"""docs/reproducing.md's "Default" settings are generated from config.yaml over the schema's defaults.

Each passage between `<!-- defaults: SECTION -->` and `<!-- /defaults -->` is what `render(SECTION, config)`
writes from the validated default config (growcert.plan.validate_config fills in the schema's defaults),
so a changed default in config.yaml or src/growcert/resources/config.schema.yaml fails this test until the page says
it. To rewrite the passages after such a change:

    PYTHONPATH=src .venv/bin/python tests/test_docs_defaults.py
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from growcert.plan import validate_config

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reproducing.md"
PASSAGE = re.compile(r"(<!-- defaults: (\w+) -->)(.*?)(<!-- /defaults -->)", re.S)


def default_config() -> dict[str, Any]:
    """config.yaml with the schema's defaults filled in: what `make run` runs."""
    return validate_config(yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8")))


def _number(value: float) -> str:
    """0.001 -> 1e-3, 0.2 -> 0.2, 2000 -> 2,000, 0.0 -> 0."""
    if float(value).is_integer():
        return f"{int(value):,}"
    if value < 0.1:
        mantissa, exponent = f"{value:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{value:g}"


def _grid(values: list[float]) -> str:
    return "{" + ", ".join(_number(value) for value in values) + "}"


def _seeds(seeds: list[int]) -> str:
    return f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}"


def _variants(poprisk: dict[str, Any]) -> str:
    return f"reading ({' / '.join(poprisk['gates'])}) × variance source ({' / '.join(poprisk['variances'])})"


def _grokking(g: dict[str, Any]) -> str:
    arms = [f"AdamW wd {_grid(g['adamw']['weight_decays'])}"]
    if g["grokfast"]["enabled"]:
        arms.append(f"Grokfast-EMA (L2 decay {_number(g['grokfast']['weight_decay'])})")
    arms.append(f"PopulationRiskAdam wd {_grid(g['poprisk']['weight_decays'])} in every {_variants(g['poprisk'])}")
    return (
        f"p = {g['p']}, batch {g['batch_size']}, cap {_number(g['steps'])} steps per arm, {_seeds(g['seeds'])}; "
        f"arms {', '.join(arms)}"
    )


def _pinn(p: dict[str, Any]) -> str:
    return (
        f"β = {_number(p['beta'])}, noise std {_number(p['noise_std'])}, {p['depth']}×{p['width']} tanh PINN, "
        f"batch {p['batch_size']}, {_number(p['steps'])} steps, {_seeds(p['seeds'])}; lr grid "
        f"{_grid(p['adamw_lrs'])} for AdamW and {_grid(p['poprisk']['lrs'])} for PopulationRiskAdam in every "
        f"{_variants(p['poprisk'])}"
    )


def _preference(p: dict[str, Any]) -> str:
    return (
        f"{p['pairs_train']} train / {p['pairs_test']} held-out pairs, {round(100 * p['swap_rate'])} % of "
        f"training labels swapped, {_number(p['steps'])} steps of batch {p['batch_size']}, lr {_number(p['lr'])}, "
        f"{_seeds(p['seeds'])}; PopulationRiskAdam in every {_variants(p['poprisk'])}"
    )


def _grow(g: dict[str, Any]) -> str:
    experiments = g["experiments"]
    steps = {experiment["train"]["steps"] for experiment in experiments}
    each = f", {_number(steps.pop())} steps each" if len(steps) == 1 else ""
    parts = [
        f"{e['family']} w{e['width']} base depth {e['base_depth']} + {e['blocks']} block"
        f"{'s' if e['blocks'] != 1 else ''} (deeper control depth {e['deeper_depth']}) on {e['dataset']}"
        + ("" if each else f", {_number(e['train']['steps'])} steps")
        for e in experiments
    ]
    return f"{len(experiments)} experiments, {_seeds(g['seeds'])}{each}: {'; '.join(parts)}"


RENDER: dict[str, Callable[[dict[str, Any]], str]] = {
    "grokking": _grokking,
    "pinn": _pinn,
    "preference": _preference,
    "grow": _grow,
}


def render(section: str, config: dict[str, Any]) -> str:
    return RENDER[section](config[section])


def rewritten(page: str, config: dict[str, Any]) -> str:
    return PASSAGE.sub(lambda match: match.group(1) + render(match.group(2), config) + match.group(4), page)


def test_every_section_has_its_passage():
    found = [match.group(2) for match in PASSAGE.finditer(PAGE.read_text(encoding="utf-8"))]
    assert sorted(found) == sorted(RENDER)


def test_the_stated_defaults_are_the_configs():
    page = PAGE.read_text(encoding="utf-8")
    assert page == rewritten(page, default_config()), (
        "docs/reproducing.md states defaults that config.yaml and the schema no longer have; "
        "rewrite them with: PYTHONPATH=src .venv/bin/python tests/test_docs_defaults.py"
    )


def test_a_changed_default_is_caught():
    config = default_config()
    page = PAGE.read_text(encoding="utf-8")
    config["pinn"]["steps"] += 1
    assert rewritten(page, config) != page


if __name__ == "__main__":
    text = PAGE.read_text(encoding="utf-8")
    PAGE.write_text(rewritten(text, default_config()), encoding="utf-8")
    sys.exit(0)
