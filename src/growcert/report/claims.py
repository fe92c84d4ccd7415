"""The claims registry: every paper claim the pipeline checks, in one place, and the one row type.

A `Claim` is what a paper says (its text and its number, PAPERS.md) and how this project judges it
against a run. The stage that measures a claim writes rows with `claim_row(key, ...)` into
results/claims/*.csv; the report lists every registered claim in registry order, each with the rows
written for it (matched on `claim_id`), and says "not measured" for a claim no stage wrote. A row may
carry a `scope` (e.g. "llama/shakespeare width 32"): the same claim judged on one part of the grid.

Row columns: claim_id, paper, claim (the registered text, plus its scope), paper_value, this_run,
holds (True, False, or a word such as "undetermined" / "not reached"), note.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROW_COLUMNS = ["claim_id", "paper", "claim", "paper_value", "this_run", "holds", "note"]


@dataclass(frozen=True)
class Claim:
    """One claim of a paper: its text and number, and how `holds` is decided here."""

    key: str
    paper: str
    text: str
    paper_value: str
    judged: str
    stage: str  # the command whose output holds the rows
    evidence: tuple[str, ...] = ()  # figures and tables (file stems under results/figures, results/tables)


CLAIMS: dict[str, Claim] = {claim.key: claim for claim in [
    Claim("p1_dalign_width", "P1", "d_align increases with width", "≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072",
          "every (point, reduction) series with ≥ 2 determined widths rises (Spearman > 0), held-out pool, "
          "last checkpoint", "summarize-alignment",
          ("p1_dalign_vs_width", "p1_plugin_vs_unbiased", "p1_alignment_summary")),
    Claim("p1_regime_budget", "P1", "d_align increases with width, on the regime map at matched budget",
          "≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072",
          "per (context, step, point, reduction) cell, the seed-level 95 % t interval on the slope of log d_align "
          "vs log width: rises / falls when it excludes 0, flat when it holds 0; holds when every judged cell "
          "rises; magnitude: geometric mean over seeds at the widest width ≥ 1", "summarize-regime",
          ("p1_regime_dalign_vs_width", "p1_regime_dalign_vs_context", "p1_regime_dims_vs_width",
           "p1_regime_plugin_vs_unbiased", "p1_regime_cells")),
    Claim("p1_regime_loss", "P1", "d_align increases with width, on the regime map at matched held-out loss",
          "≈ 3.9 at N = 512 to ≈ 9.5 at N = 3072",
          "as at matched budget, with d_align interpolated (log-linear, first crossing) at held-out loss levels "
          "every width and seed of a context reaches, so widths are compared at the same training progress",
          "summarize-regime", ("p1_regime_dalign_vs_width", "p1_regime_cells")),
    Claim("p1_misalignment_width", "P1", "p̂ falls with width at fixed (M, K)", "falls with width",
          "every series falls (Spearman < 0) at the reference (M, K), iid mode", "summarize-alignment",
          ("p1_misalignment_vs_width", "p1_misalignment_vs_MK")),
    Claim("p1_certificate_iid", "P1", "B_align ≥ B_exact ≥ p̂ (iid)", "holds",
          "in every determined cell, p̂'s Wilson lower bound ≤ B_exact ≤ B_align", "summarize-alignment",
          ("p1_misalignment_vs_width", "p1_misalignment_vs_MK")),
    Claim("p1_certificate_train_test", "P1", "B_align ≥ B_exact ≥ p̂ (train → test)", "not covered by the theorem",
          "as the iid row, with M from the training rows", "summarize-alignment",
          ("p1_misalignment_vs_width", "p1_misalignment_vs_MK")),
    Claim("p1_intervention_ratio", "P1", "observed/predicted held-out change at small ε", "96–99 %",
          "median ratio at the smallest ε within 5 % of 1", "summarize-interventions",
          ("p1_interventions", "p1_interventions_summary")),
    Claim("p1_intervention_sign", "P1", "the alignment statistic predicts the sign of the held-out change",
          "sign predicted", "sign agreement ≥ 95 % at the smallest ε", "summarize-interventions",
          ("p1_interventions", "p1_interventions_summary")),
    Claim("p2_grokking", "P2", "grokking: steps to 95 % held-out, PopulationRiskAdam vs AdamW",
          "5,950 vs 29,450 (4.9×)", "one row per variant (gate reading × variance source × decay, the row's scope): "
          "median steps (not reached counted as beyond the cap) below AdamW's in the paper's small-decay regime "
          "and at the variant's own decay", "grokking",
          ("p2_grokking", "p2_grokking_gate")),
    Claim("p2_pinn", "P2", "PINN: steps to test ℓ2 ≤ 0.40 vs tuned AdamW", "2.4× faster",
          "one row per variant (its scope): median steps of the variant's best lr below those of the best AdamW lr",
          "pinn",
          ("p2_pinn", "p2_pinn_gate")),
    Claim("p2_dpo_accuracy", "P2", "noisy DPO: final reward accuracy", "0.566 → 0.641",
          "one row per variant (its scope): median final held-out reward accuracy above AdamW's", "preference",
          ("p2_preference", "p2_preference_gate")),
    Claim("p2_dpo_drift", "P2", "noisy DPO: mean absolute reward drift", "3.05× smaller",
          "one row per variant (its scope): median final drift below AdamW's", "preference",
          ("p2_preference", "p2_preference_gate")),
    Claim("p2_reservoir_invisible", "P2", "reservoir is invisible to the test set (G_Q on ker W_S)", "0 (Prop. 3.2)",
          "‖G_Q|ker‖/‖G_Q|range‖ < 1e-2 in every run with a reservoir", "theory",
          ("p2_theory",)),
    Claim("p2_benign_noise", "P2", "label noise in the reservoir is benign",
          "benign (reservoir noise invisible to the test set)",
          "test response to reservoir noise < 1e-2 × the response to channel noise of the same norm", "theory",
          ("p2_theory",)),
    Claim("p2_coupling_residual", "P2", "train–test coupling residual R_⊥ = 0 under squared loss",
          "0 (squared loss); not 0 in general", "every squared-loss run below its numerical-zero cap", "theory",
          ("p2_theory",)),
    Claim("p2_drift_diffusion", "P2", "SGD drift grows as T, fluctuation as √T", "T¹ and T^½",
          "fitted exponents within ±0.1 of 1 and 0.5 in every run", "theory",
          ("p2_theory",)),
    Claim("p3_depth_plateau", "P3", "first-order value of an inserted block falls with depth and plateaus",
          "plateau", "a significant fall from the shallowest to the deepest level and a plateau or zero within "
          "the grid, on the scale-invariant value", "summarize-growth",
          ("p3_depth", "p3_recommended_depth")),
    Claim("p3_grown_vs_scratch", "P3", "grown networks match networks trained from scratch", "match or beat",
          "grown exceeds scratch by at most max(z·SE over seeds, 1 % of scratch's loss)", "summarize-growth",
          ("p3_growth",)),
]}


def claim_row(key: str, this_run: str, holds: Any, note: str, scope: str | None = None) -> dict[str, Any]:
    """A row of results/claims/*.csv for registered claim `key` (KeyError for an unregistered one)."""
    claim = CLAIMS[key]
    return {"claim_id": key, "paper": claim.paper, "claim": claim.text + (f" ({scope})" if scope else ""),
            "paper_value": claim.paper_value, "this_run": this_run, "holds": holds, "note": note}
