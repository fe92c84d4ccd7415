"""The referee: which claims the pipeline judges and how a verdict is earned, below the report that presents them
(docs/design.md §2). It reads tidy rows and intervals, never networks or figures.

    claims.py            every paper claim and implementation check, and their row types (the registry)
    verdicts.py          the rule: the four verdict words and how an interval over seeds earns one
    families.py          one claim judged over its parts (readings, contexts, series), Holm-corrected
    looks.py             the level a claim judged again on more seeds (or a changed analysis) must use
    bounds.py            a claimed bound judged in every cell (P1's p̂ ≤ B_exact)
    grokking_effects.py  P2 grokking's effects and the designs registered before their seeds ran
"""
