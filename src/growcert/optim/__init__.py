"""Population-risk training (P2; docs/science.md, "PopulationRiskAdam (P2's optimiser, optim/)"): Adam gated by an
unbiased test of the population gradient.

Per parameter element k, with batch size b, batch-mean gradient μ_k and per-example batch variance
σ_k² (divisor b), element k takes a step only where

    μ_k² > σ_k² / (b − 1)      ⇔      μ_k² − s_k²/b > 0      (s² with divisor b − 1),

the unbiased estimate of the squared *population* gradient being positive. s²/b is the variance of
the batch mean. Under pure noise the gate still opens where |t| > 1 (~32 % of elements): it is an
unbiased positivity test, not a significance test.

What the paper's sentence supports and leaves open. P2 describes the optimizer in one sentence:
"a modification of Adam with one extra state vector (a streaming variance)", acting "as an SNR
preconditioner on top of Adam", with no threshold to tune. It fixes the test above and says the
variance is streamed in a single extra vector. It does not say (1) whether Adam's moments see the
raw or the gated gradient, (2) how the streaming variance is formed (its centre, its window, what
parameter drift does to it), (3) whether weight decay is gated, nor (4) what the first step does.
So `PopulationRiskAdam` names the readings and the sources, and every combination runs:

gate (the reading)
  "update"    Adam's m and v update from every gradient; the gate masks only the step m̂/(√v̂ + ε).
              Moments are estimators of the gradient stream: updating them only where the gate
              opened would select on the gradient's own value. Today's reading.
  "gradient"  "a preconditioner on top of Adam": Adam's moments see g ⊙ 1[open], so the direction and
              the step normalisation follow only the gradients that passed; the step itself is
              not masked (momentum still carries closed elements). The variance is still that of
              the *raw* gradient.
  "off"       plain Adam / AdamW steps, the gate still computed and logged (formerly gate=False).
Decoupled weight decay (AdamW) applies to every element in every reading: it is a deterministic
regulariser, not a noisy estimate.

variance (the source of s²/b), with the extra state vectors each costs beyond Adam's m and v:
  "exact"       s²/b of the batch itself, from Σ_i g_i² (`per_example_square_sums`: layer hooks, one
                forward and one backward, no b × P tensor) or from materialised per-example
                gradients. 0 state vectors: nothing is carried between steps.
  "streaming"   from successive batches, V̂ = ρ·v̂ (see `adam.py`). Under "update"/"off": 1 vector (ρ),
                because Adam's m is the centre and its v the scale. Under "gradient": 3 (ρ and the
                raw-gradient m and v), because Adam's moments then see the masked gradient and no
                longer describe the raw stream. Parameter drift between steps counts as noise.
  "microbatch"  from the K micro-batch means of one batch at the same parameters (the accumulation
                steps of a large-batch run; `microbatch_square_sums`), (Σ_j m_j² − K μ²)/(K(K − 1)),
                unbiased for the variance of the batch mean and free of drift, EMA-smoothed over
                steps: 1 vector (ν) under every reading.
So "one extra state vector" fits streaming under "update" and microbatch under any reading; the
paper's own pairing of streaming with "a preconditioner on top of Adam" needs three unless the
moments see the raw gradient.

Diagnostics: `last_gated_fraction` / `last_open_fraction` (per step, counted on demand),
`last_open` (the masks), `gate_variance()` (the V̂ the last gate used) and `variance_ratio(sums)`
(its median ratio to the exact s²/b of the same batch, for streaming and microbatch).
"""

from growcert.optim.adam import GATE_READINGS, VARIANCE_SOURCES, PopulationRiskAdam
from growcert.optim.per_example import per_example_gradients
from growcert.optim.square_sums import SquareSums, microbatch_square_sums, per_example_square_sums

__all__ = [
    "GATE_READINGS",
    "VARIANCE_SOURCES",
    "PopulationRiskAdam",
    "SquareSums",
    "microbatch_square_sums",
    "per_example_gradients",
    "per_example_square_sums",
]
