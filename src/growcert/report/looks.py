"""Looks at a claim: the level its judge must use when it is judged again on more seeds, and the row that keeps a
changed primary analysis's first registered form (docs/science.md, "Verdicts": looks).

Each claim's registry entry lists its looks (`claims.Look`: the day a committed reference run first judged it on a
number of seeds, the word, the commit). A claim judged on more seeds than at an earlier look of the same data is at
a later look, and uses the group-sequential boundary of the spending function registered here (`SPENDING`,
Lan–DeMets O'Brien–Fleming-type, `growcert.stats.sequential`). The past looks were not planned, so the
information fractions are the seeds at each earlier look over the seeds now, the current look treated as the final
one; the level is the nominal level of that boundary at the final look. Looks at one seed count share a fraction,
so they count once. A first look uses the stage's own level.

A primary analysis that changed after a result (`claims.FirstForm`) keeps its first form as a secondary row beside
the new one, with the date of the change and the reason (`first_form_scope`, `as_first_form`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from growcert.report.claims import CLAIMS, Look
from growcert.report.verdicts import percent
from growcert.stats.sequential import NAMES, spending_boundary

SPENDING = "obrien_fleming"  # registered project-wide before any later look is judged (docs/science.md, "Verdicts")
# The reference runs whose seeds include another run's (`--join`): p1-seeds reuses p1-regime's seeds 0-2
SEEDS_FROM = {"p1-seeds": ("p1-regime",)}
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


@dataclass(frozen=True)
class LookLevel:
    """The level a claim's judge uses at this look, which look it is, the information fractions of the boundary
    (empty at a first look) and the sentence a row's note carries ("" at a first look)."""

    level: float
    look: int
    fractions: tuple[float, ...]
    note: str


def earlier_looks(key: str, seeds: int, run: str | None) -> list[Look]:
    """The registered looks of claim `key` at `run` (or a run whose seeds `run` reuses) on fewer seeds than `seeds`:
    the earlier looks at the data that `run` now judges. None for `run` (not a reference run): no earlier look."""
    if run is None:
        return []
    runs = (run, *SEEDS_FROM.get(run, ()))
    return [look for look in CLAIMS[key].looks if look.run in runs and look.seeds < seeds]


def look_level(key: str, seeds: int, run: str | None, level: float) -> LookLevel:
    """The level claim `key`'s judge must use on `seeds` seeds in reference run `run`: `level` at a first look; at a
    later look, the nominal level at the final look of the `SPENDING` boundary of overall level `level`, at
    information fractions (seeds at each earlier look) / `seeds`, then 1."""
    earlier = earlier_looks(key, seeds, run)
    if not earlier:
        return LookLevel(level, 1, (), "")
    counts = sorted({look.seeds for look in earlier})
    fractions = tuple(count / seeds for count in counts) + (1.0,)
    boundary = spending_boundary(fractions, 1 - level, SPENDING)
    nominal = 1 - boundary.nominal[-1]
    look = len(fractions)
    name = ORDINALS[look - 1] if look <= len(ORDINALS) else f"look {look}"
    history = "; ".join(f"{look.date}, {look.seeds} seeds, {look.run} {look.commit}: {look.word}" for look in earlier)
    note = (f"{name.capitalize()} look: {NAMES[SPENDING]} boundary (Lan–DeMets spending, information fractions "
            f"{', '.join(f'{t:.3g}' for t in fractions)}: seeds at each look / {seeds}), nominal level "
            f"{percent(nominal)} for an overall {percent(level)}; earlier looks: {history}")
    return LookLevel(nominal, look, fractions, note)


def with_note(row: dict[str, Any], at: LookLevel) -> dict[str, Any]:
    """`row` with the look's sentence added to its note (unchanged at a first look)."""
    if not at.note:
        return row
    return {**row, "note": f"{row['note']} {at.note}." if row["note"] else f"{at.note}."}


def first_form_scope(key: str) -> str:
    """The scope of claim `key`'s first-form row: "first registered form (<name>), changed <date>: <reason>"."""
    form = CLAIMS[key].first_form
    if form is None:
        raise KeyError(f"claim {key} has no first registered form")
    return f"first registered form ({form.name}), changed {form.date}: {form.reason}"


def as_first_form(row: dict[str, Any], key: str, part: str | None = None) -> dict[str, Any]:
    """A claim row judged by claim `key`'s first registered form, made its first-form row: secondary (it never
    decides the claim), its claim text scoped by `part` (a family/dataset, a context) and `first_form_scope`."""
    scope = (f"{part}, " if part else "") + first_form_scope(key)
    form = CLAIMS[key].first_form
    return {**row, "role": "secondary", "claim": f"{CLAIMS[key].text} ({scope})",
            "note": f"{row['note']} First form: {form.text} (commit {form.commit})."}
