"""Looks at a claim: the level its judge must use when it is judged again on more seeds, and the row that keeps a
changed primary analysis's first registered form (docs/science.md, "Verdicts": looks).

Each claim's registry entry lists its looks (`claims.Look`: the day a committed reference run first judged it on a
number of seeds, the word, the commit, the analysis form). A claim judged on more seeds than at an earlier look of
the same data, or on the same seeds after a look in another analysis form (a changed primary analysis: the first
form's judgement of those seeds was a look), is at a later look, and uses the group-sequential boundary of the
spending function registered here (`SPENDING`, Lan–DeMets O'Brien–Fleming-type, `growcert.stats.sequential`). The
past looks were not planned, so the information fraction of each look is its own seeds over the seeds now, the
current look treated as the final one; the level is the nominal level of that boundary at the final look. Looks
at one seed count (disjoint seed sets of one size, as p3-depth's seeds 0-2 then 3-5, or two analyses of the same
seeds) each count: they split their fraction's share of the level evenly (Bonferroni within a fraction). A first
look uses the stage's own level.

A primary analysis that changed after a result (`claims.FirstForm`) keeps its first form as a secondary row beside
the new one, with the date of the change and the reason (`first_form_scope`, `as_first_form`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from growcert.referee.claims import CLAIMS, Look
from growcert.referee.verdicts import percent
from growcert.stats.sequential import NAMES, spending_boundary

SPENDING = "obrien_fleming"  # registered project-wide before any later look is judged (docs/science.md, "Verdicts")
# The reference runs whose seeds include another run's (`--join`): p1-seeds reuses p1-regime's seeds 0-2
SEEDS_FROM = {"p1-seeds": ("p1-regime",)}
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


@dataclass(frozen=True)
class LookLevel:
    """The level a claim's judge uses at this look, which look it is, the information fractions of the boundary
    (empty at a first look), how many analyses judged each fraction's data and the sentence a row's note carries
    ("" at a first look)."""

    level: float
    look: int
    fractions: tuple[float, ...]
    note: str
    analyses: tuple[int, ...] = ()


def earlier_looks(key: str, seeds: int, run: str | None) -> list[Look]:
    """The registered looks of claim `key` at `run` (or a run whose seeds `run` reuses) before a judgement on `seeds`
    seeds in the primary analysis of today: those on fewer seeds, and those on as many in another analysis form (a
    re-judgement of seen seeds under a changed analysis spends level as a look does). A registered look on as many
    seeds in today's form is this judgement itself. None for `run` (not a reference run): no earlier look."""
    if run is None:
        return []
    runs = (run, *SEEDS_FROM.get(run, ()))
    return [
        look
        for look in CLAIMS[key].looks
        if look.run in runs and (look.seeds < seeds or (look.seeds == seeds and look.form))
    ]


def look_level(key: str, seeds: int, run: str | None, level: float) -> LookLevel:
    """The level claim `key`'s judge must use on `seeds` seeds in reference run `run`: `level` at a first look; at a
    later look, the nominal level at the final look of the `SPENDING` boundary of overall level `level`, at
    information fractions (seeds at each earlier look) / `seeds`, then 1, each fraction's share split among the
    analyses that judged data of that size (every earlier look at that seed count; at the final fraction, today's
    judgement and the earlier forms' judgements of the same seeds)."""
    earlier = earlier_looks(key, seeds, run)
    if not earlier:
        return LookLevel(level, 1, (), "")
    per_count = Counter(look.seeds for look in earlier)
    counts = sorted(count for count in per_count if count < seeds)
    fractions = tuple(count / seeds for count in counts) + (1.0,)
    analyses = tuple(per_count[count] for count in counts) + (1 + per_count[seeds],)
    boundary = spending_boundary(fractions, 1 - level, SPENDING, analyses=analyses)
    nominal = 1 - boundary.nominal[-1]
    look = len(earlier) + 1
    name = ORDINALS[look - 1] if look <= len(ORDINALS) else f"look {look}"
    history = "; ".join(
        f"{look.date}, {look.seeds} seeds, {look.run} {look.commit}"
        + (f" (first form: {look.form})" if look.form else "")
        + f": {look.word}"
        for look in earlier
    )
    shared = [f"{count} analyses at {t:.3g}" for t, count in zip(fractions, analyses) if count > 1]
    split = f"; {', '.join(shared)}, which split that fraction's share" if shared else ""
    note = (
        f"{name.capitalize()} look: {NAMES[SPENDING]} boundary (Lan–DeMets spending, information fractions "
        f"{', '.join(f'{t:.3g}' for t in fractions)}: seeds at each look / {seeds}{split}), nominal level "
        f"{percent(nominal)} for an overall {percent(level)}; earlier looks: {history}"
    )
    return LookLevel(nominal, look, fractions, note, analyses)


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
    return {
        **row,
        "role": "secondary",
        "claim": f"{CLAIMS[key].text} ({scope})",
        "note": f"{row['note']} First form: {form.text} (commit {form.commit}).",
    }
