"""The rows a stage writes for the registered claims and checks (`growcert.referee.claims`): a claim row into
results/claims/*.csv, a check row into results/checks/*.csv.

Claim row columns (ROW_COLUMNS): claim_id, paper, claim (the registered text, plus its scope), role
(`primary`: the row that decides the claim in this run; `part`: a reading or context of the primary analysis,
judged at its Holm level; `secondary`: any other cell, shown, never deciding), paper_value, effect,
paper_effect, sesoi, estimate, low, high, level, seeds, verdict, direction (does the interval exclude the
null on the paper's side, the other, or neither; empty where the null has no paper's side),
seeds_to_reproduce and seeds_to_contradict (the design figures: seeds for 80 % power if the true effect is
the paper's, or nil; "12", "> 10,000", or empty), why, this_run, note.
Check row columns (CHECK_COLUMNS): check_id, paper, check, expected, passed, this_run, note.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from growcert.files import write_csv
from growcert.referee.claims import CHECKS, CLAIMS
from growcert.referee.effect import Effect, equivalence_region
from growcert.referee.verdicts import Judgement

ROW_COLUMNS = [
    "claim_id",
    "paper",
    "claim",
    "role",
    "paper_value",
    "effect",
    "paper_effect",
    "sesoi",
    "estimate",
    "low",
    "high",
    "level",
    "seeds",
    "verdict",
    "direction",
    "seeds_to_reproduce",
    "seeds_to_contradict",
    "why",
    "this_run",
    "note",
]
DESIGN_COLUMNS = ["seeds_to_reproduce", "seeds_to_contradict"]  # text: "12", "> 10,000" or empty
DESIGN_DTYPES = {column: str for column in DESIGN_COLUMNS}  # read them as text, never as floats ("242.0")
ROLES = ("primary", "part", "secondary")
CHECK_COLUMNS = ["check_id", "paper", "check", "expected", "passed", "this_run", "note"]


def _number(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def claim_row(
    key: str,
    judgement: Judgement,
    this_run: str,
    note: str,
    scope: str | None = None,
    role: str = "primary",
    effect: Effect | None = None,
) -> dict[str, Any]:
    """A row of results/claims/*.csv for registered claim `key` (KeyError for an unregistered one); `role` says
    whether it decides the claim (primary), is a part of the primary analysis (a reading, a context) or secondary;
    `effect` replaces the registry's where a secondary variant measures another (its name is shown)."""
    if role not in ROLES:
        raise ValueError(f"claim row role {role!r}: one of {', '.join(ROLES)}")
    claim = CLAIMS[key]
    effect = effect or claim.effect
    paper_effect = (
        equivalence_region(effect)
        if effect.margin is not None
        else f"{effect.paper:.3g}"
        if effect.paper is not None
        else ("> " if effect.direction > 0 else "< ") + f"{effect.null:g}"
    )
    return {
        "claim_id": key,
        "paper": claim.paper,
        "claim": claim.text + (f" ({scope})" if scope else ""),
        "role": role,
        "paper_value": claim.paper_value,
        "effect": effect.name,
        "paper_effect": paper_effect,
        "sesoi": effect.sesoi_text(),
        "estimate": _number(judgement.estimate),
        "low": _number(judgement.low),
        "high": _number(judgement.high),
        "level": judgement.level,
        "seeds": judgement.seeds,
        "verdict": judgement.verdict,
        "direction": judgement.direction,
        "seeds_to_reproduce": judgement.seeds_to_reproduce,
        "seeds_to_contradict": judgement.seeds_to_contradict,
        "why": judgement.why,
        "this_run": this_run,
        "note": note,
    }


def design_figure(value) -> str:
    """One design figure as text: "242" (a whole number even where a CSV reader took it for a float), "> 10,000",
    or "" where it has no meaning or no spread is known."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() in ("", "nan"):
        return ""
    text = str(value).strip()
    try:
        return f"{int(float(text)):,}"
    except ValueError:
        return text


def check_row(key: str, passed: bool, this_run: str, note: str, scope: str | None = None) -> dict[str, Any]:
    """A row of results/checks/*.csv for registered check `key`."""
    check = CHECKS[key]
    return {
        "check_id": key,
        "paper": check.paper,
        "check": check.text + (f" ({scope})" if scope else ""),
        "expected": check.expected,
        "passed": bool(passed),
        "this_run": this_run,
        "note": note,
    }


def write_rows(rows: list[dict[str, Any]], claims: str | Path | None = None, checks: str | Path | None = None) -> None:
    """Claim rows to `claims`, check rows (those with a check_id) to `checks`; a file given is always written,
    with its header even when no row is of its kind."""
    for path, key, columns in ((claims, "claim_id", ROW_COLUMNS), (checks, "check_id", CHECK_COLUMNS)):
        kind = [row for row in rows if key in row]
        if kind and path is None:
            raise ValueError(f"{len(kind)} rows with a {key} but no file to write them to")
        if path is not None:
            write_csv(pd.DataFrame(kind, columns=columns), path)
