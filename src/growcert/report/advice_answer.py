"""advise-check's measured answer in plain words, one sentence per family (docs/science.md, "advise-check at
matched compute"): on the confirmation half of the seeds and the growth procedure advise's options stand for, what
advise said at its checkpoints, at how many of them training on lowered held-out loss and growth beat training on by
the claim's SESOI, and which rule's regret was lowest. The report's "Is the advice right?" section opens with it.

It reads the pooled advise-check table only (`report.advice_matched`'s choices and scores), so it says what the
committed run measured, whatever the run.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from growcert.referee.advise_effects import REGRET_SESOI
from growcert.report.advice import GROW_AT, NO_EVIDENCE, TRAIN_ON
from growcert.report.advice_matched import RULES, choices, loss_unit, primary_procedure
from growcert.stats.growth_outcomes import CONFIRMATION, seed_half

# the matched-compute columns it reads (a table from before matched compute has none of them)
NEEDED = ("advice", "train_on_observed", "train_on_observed_se", "observed_gain", "vs_train_on", "loss_unit")
RULE_WORDS = {
    "advise": "advise",
    "always_train_on": "always training on",
    "largest_value": "growing at the largest first-order value",
    "random": "growing at a random point",
    "last": "growing at the last point",
}


def answer_lines(table: pd.DataFrame, settings: dict[str, Any]) -> list[str]:
    """One plain sentence per family (none for a table without the matched-compute columns)."""
    if not set(NEEDED) <= set(table.columns):
        return []
    procedure = primary_procedure(settings)
    confirm = table[(table["variant"] == procedure) & (seed_half(table["train_seed"].to_numpy()) == CONFIRMATION)]
    if confirm.empty:
        return []
    picked = choices(confirm, settings)
    lines = []
    for family, mine in picked.groupby("family", sort=False):
        advised = mine[mine["rule"] == "advise"]
        count = len(advised)
        said = {word: int((advised["word"] == word).sum()) for word in (TRAIN_ON, GROW_AT, NO_EVIDENCE)}
        rows = confirm[confirm["family"] == family]
        per_checkpoint = rows.groupby("model")
        helped = int((per_checkpoint["train_on_observed"].first() > 0).sum())
        won = int((per_checkpoint["vs_train_on"].min() <= -REGRET_SESOI).sum())
        regret = mine.groupby("rule")["regret"].mean().reindex(list(RULES))
        best = regret.idxmin()
        ties = [RULE_WORDS[rule] for rule in RULES if regret[rule] <= regret[best] + 1e-12]
        lines.append(
            f"{family} ({count} checkpoints, procedure {procedure}, S = {settings['steps']} steps, "
            f"{loss_unit(table, family)}): advise said train on at {said[TRAIN_ON]}, grow at {said[GROW_AT]} and no "
            f"evidence at {said[NO_EVIDENCE]} (no evidence is scored as training on). Training on lowered held-out "
            f"loss at {helped} of {count}; growing somewhere beat training on by at least {REGRET_SESOI:g} at {won} "
            f"of {count}. Lowest mean regret: {' and '.join(ties)} ({regret[best]:.4g}); always training on "
            f"{regret['always_train_on']:.4g}, advise {regret['advise']:.4g}."
        )
    return lines
