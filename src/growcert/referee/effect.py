"""What a claim measures (docs/science.md, "Verdicts"): the `Effect` every claim declares in the claims registry,
its name, the paper's value, the null (no effect), the scale it is judged on, how its interval over seeds is
formed, its estimand over seeds (the mean or the median) and its smallest effect of interest (SESOI): half the
paper's effect on the judged scale (for a ratio, on the log scale, so half of 4.9× is 2.21×) unless the registry
states another with its reason (a direction-only claim must), or, for an equivalence claim, its margin.
`boundaries` gives the values on the judged scale that an interval must clear, which the rule
(`growcert.referee.verdicts`) reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SIZE_FRACTION = 0.5  # the default SESOI: half the paper's effect on the judged scale
ESTIMANDS = ("mean", "median")


@dataclass(frozen=True)
class Effect:
    """What a claim measures: `name`, the paper's value of it (`paper`; None for a direction only), the `null`,
    the `scale` it is judged on ("linear" or "log"), the paper's side of the null (`direction`, +1 or −1, used
    when `paper` is None), the smallest effect of interest (`sesoi`, on the effect's own scale; None: half the
    paper's effect) with `sesoi_reason` when it is not the default, an equivalence `margin` (the claim is
    effect ≤ margin; with `margin_low` too, margin_low ≤ effect ≤ margin), its `estimand` over seeds ("mean" or
    "median", fixed in the registry) and how the interval over seeds is formed (`interval`, shown in the row)."""

    name: str
    paper: float | None
    null: float = 0.0
    scale: str = "linear"
    direction: int = 1
    margin: float | None = None
    margin_low: float | None = None
    interval: str = "Student t over seeds"
    sesoi: float | None = None
    sesoi_reason: str = ""
    estimand: str = "mean"

    def __post_init__(self):
        if self.estimand not in ESTIMANDS:
            raise ValueError(f"effect {self.name!r}: estimand {self.estimand!r}, one of {', '.join(ESTIMANDS)}")

    def transform(self, value: float) -> float:
        if self.scale == "log":
            return math.log(value) if value > 0 else (-math.inf if value == 0 else math.nan)
        return value

    def untransform(self, value: float) -> float:
        if self.scale != "log":
            return value
        with np.errstate(over="ignore"):
            return float(np.exp(value))

    def null_in_region(self) -> bool:
        """Whether an equivalence claim's null lies inside its claimed region (then it has no paper's side)."""
        if self.margin is None:
            return False
        null = self.transform(self.null)
        return null <= self.transform(self.margin) and (
            self.margin_low is None or null >= self.transform(self.margin_low)
        )

    def expected(self) -> float | None:
        """The paper's effect on the judged scale, for the design figures: its value, else for an equivalence claim
        the null when it lies inside the region (no change: a plateau) or the region's middle; None for a
        direction-only claim."""
        if self.paper is not None:
            return self.transform(self.paper)
        if self.margin is None:
            return None
        if self.null_in_region():
            return self.transform(self.null)
        edges = boundaries(self)
        return sum(edges) / len(edges) if len(edges) == 2 else None

    def side(self) -> int:
        """+1 when the paper's effect lies above the null on the judged scale, −1 below."""
        if self.paper is None:
            return self.direction
        return 1 if self.transform(self.paper) >= self.transform(self.null) else -1

    def smallest(self) -> float | None:
        """The SESOI on the effect's own scale: the registry's, else half the paper's effect on the judged scale;
        None for an equivalence claim (its margin is its SESOI) or a direction without one."""
        if self.sesoi is not None:
            return self.sesoi
        if self.paper is None or self.margin is not None:
            return None
        null = self.transform(self.null)
        return self.untransform(null + SIZE_FRACTION * (self.transform(self.paper) - null))

    def sesoi_text(self) -> str:
        """The SESOI as a row shows it, with where it comes from."""
        if self.margin is not None:
            return "the margin " + (
                f"{self.margin:.3g}" if self.margin_low is None else f"[{self.margin_low:.3g}, {self.margin:.3g}]"
            )
        smallest = self.smallest()
        if smallest is None:
            return "none"
        times = "×" if self.scale == "log" else ""
        return f"{smallest:.3g}{times}" + (
            f" ({self.sesoi_reason})" if self.sesoi is not None and self.sesoi_reason else " (half the paper's effect)"
        )


def boundaries(effect: Effect) -> list[float]:
    """The values on the judged scale that an interval must clear to be decided: the SESOI, or the margins."""
    if effect.margin is not None:
        return [effect.transform(v) for v in (effect.margin_low, effect.margin) if v is not None]
    return [effect.transform(effect.smallest())]


def equivalence_region(effect: Effect) -> str:
    """The claimed region of an equivalence effect, as shown in a row: "≤ 0.01" or "within [0.9, 1.11]"."""
    if effect.margin_low is None:
        return f"≤ {effect.margin:g}"
    return f"within [{effect.margin_low:.3g}, {effect.margin:.3g}]"
