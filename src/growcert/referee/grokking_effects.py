"""P2 grokking's effects and the designs registered before their seeds ran, which the claims registry
(growcert.referee.claims) uses: the speed-up the paper's claim is judged on, the third look of the grokking reference
run (its seeds and plan), and the two optimizer comparisons a user asks for (growcert.experiments.grokking_choice),
each with its SESOI and why (docs/science.md, "Verdicts")."""

from __future__ import annotations

from dataclasses import dataclass

from growcert.referee.effect import Effect


@dataclass(frozen=True)
class PlannedLook:
    """A look registered before its seeds ran: the `date`, the reference `run` and the `config` that makes it, the
    `seeds` it adds and what else it holds (`plan`). The commit that adds it to the registry is its registration
    (`git log -S` finds it), earlier than every unit it plans."""

    date: str
    run: str
    config: str
    seeds: tuple[int, ...]
    plan: str


# The grokking reference run censors steps by design (a cap, and paired caps that stop a reading at its seed's AdamW
# step), and a median is what censoring leaves identifiable while a minority of seeds is censored: its estimand,
# whatever the data, fixed before that run is judged.
GROKKING_SPEEDUP = Effect(
    "median speed-up in steps to 95 % held-out (AdamW at the variant's own decay / variant)",
    29_450 / 5_950,
    null=1.0,
    scale="log",
    estimand="median",
    interval="interval-censored steps (verdicts.judge_steps)",
)

# Grokking's third look, registered before its seeds ran: seeds 14-21, every arm, the same config
# otherwise, under portable numerics. The two comparisons a user choosing an optimizer asks for are judged as primary
# on these seeds alone, because seeds 6-13 were seen (the best reading below was chosen on them).
THIRD_LOOK_SEEDS = tuple(range(14, 22))
GROKKING_THIRD_LOOK = PlannedLook(
    "2026-12-07",
    "grokking-calibrated",
    "configs/grokking-calibrated-seeds-14-21.yaml",
    THIRD_LOOK_SEEDS,
    "every arm of configs/grokking-calibrated.yaml (9), the same "
    "settings otherwise (p = 47, paired caps, cap 32,000 steps), portable numerics",
)
# The smallest speed-up that matters to a user choosing between two optimizers that both grok: a quarter fewer steps.
# Below it, the seeds' spread of steps to 95 % (about a factor of 2 between seeds of one arm here) and the evaluation
# grid (every 100 steps) decide more than the optimizer, and PopulationRiskAdam costs about 1.5 times Grokfast's CPU
# per step, so a smaller saving in steps is no saving in time.
USER_SESOI = 1.25
USER_SESOI_REASON = (
    "a quarter fewer steps: below it the seeds' spread and the 100-step evaluation grid decide more "
    "than the optimizer, and PopulationRiskAdam's 1.5x CPU per step over Grokfast eats a smaller "
    "saving; fixed before seeds 14-21 ran"
)
PEER_SPEEDUP = Effect(
    "median speed-up in steps to 95 % held-out (Grokfast-EMA / the best PopulationRiskAdam reading)",
    None,
    null=1.0,
    scale="log",
    direction=1,
    estimand="median",
    sesoi=USER_SESOI,
    sesoi_reason=USER_SESOI_REASON,
    interval=GROKKING_SPEEDUP.interval,
)
BEST_READING_PRIMARY = (
    "the best reading is poprisk-gradient-microbatch-wd0.15, chosen on seeds 6-13 (the lowest median "
    "step to 95 % of the readings there, 4,500, and the lowest CPU time to 95 %); on seeds 14-21, its "
    "median speed-up over Grokfast-EMA wd=0.005 (L2), paired by seed, steps as interval-censored "
    "bounds (a reading stopped at its seed's AdamW step is censored there), the order-statistic "
    "interval at 95 %; secondary rows: the same on all 16 seeds, and CPU seconds to 95 % (the "
    "unit's CPU seconds per step times its steps) in place of steps"
)
DECAY1_SPEEDUP = Effect(
    "median speed-up in steps to 95 % held-out (AdamW wd=1 / reading)",
    None,
    null=1.0,
    scale="log",
    direction=1,
    estimand="median",
    margin=USER_SESOI,
    sesoi_reason=USER_SESOI_REASON,
    interval=GROKKING_SPEEDUP.interval,
)
DECAY1_PRIMARY = (
    "each of the 6 readings (gate reading x variance source, decay 0.15) against AdamW wd=1 on seeds "
    "14-21, paired by seed, steps as interval-censored bounds (a reading stopped at its seed's AdamW "
    "wd=0.15 step is censored there), the order-statistic interval; the claim holds when every "
    "reading's interval lies below the margin 1.25x (Holm over the readings); secondary rows: all 16 "
    "seeds, and CPU seconds to 95 % in place of steps"
)
NO_READING = (
    "universal: 'no reading beats it' holds only if every reading stays below the margin; one reading "
    "shown faster by more than the margin contradicts it"
)
