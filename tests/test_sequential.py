"""Group-sequential boundaries (growcert.stats.sequential) against published critical values, closed forms, an
independent multivariate-normal integration, and a simulation of the null."""

import math

import numpy as np
import pytest
from scipy import stats

from growcert.stats.sequential import (
    constant_boundary,
    crossing_probability,
    obrien_fleming_spending,
    pocock_spending,
    spending_boundary,
)

# Exact constant designs, equally spaced looks, two-sided α = 0.05 (Pocock 1977; O'Brien and Fleming 1979;
# Jennison and Turnbull 2000, Tables 2.1 and 2.3). Pocock's constants are also its published nominal p-value
# thresholds 0.0294 (K = 2) and 0.0158 (K = 5).
POCOCK = {2: 2.178, 3: 2.289, 4: 2.361, 5: 2.413}
OBRIEN_FLEMING = {2: (2.797, 1.977), 3: (3.471, 2.454, 2.004), 5: (4.562, 3.226, 2.634, 2.281, 2.040)}


@pytest.mark.parametrize("looks", sorted(POCOCK))
def test_pocock_exact_constants(looks):
    boundary = constant_boundary(looks, 0.05, "pocock")
    assert boundary.critical == pytest.approx([POCOCK[looks]] * looks, abs=5e-4)
    assert crossing_probability(boundary) == pytest.approx(0.05, abs=1e-8)


def test_pocock_nominal_levels():
    assert constant_boundary(2, 0.05, "pocock").nominal[0] == pytest.approx(0.0294, abs=5e-5)
    assert constant_boundary(5, 0.05, "pocock").nominal[0] == pytest.approx(0.0158, abs=5e-5)


@pytest.mark.parametrize("looks", sorted(OBRIEN_FLEMING))
def test_obrien_fleming_exact_constants(looks):
    boundary = constant_boundary(looks, 0.05, "obrien_fleming")
    assert boundary.critical == pytest.approx(OBRIEN_FLEMING[looks], abs=5e-4)


def test_obrien_fleming_spending_published_rpact():
    """rpact getDesignGroupSequential(kMax = 3, alpha = 0.025, sided = 1, typeOfDesign = "asOF"): efficacy bounds
    3.710, 2.511, 1.993; stage levels 0.0001, 0.0060, 0.0231; cumulative α spent 0.0001, 0.0060, 0.0250."""
    boundary = spending_boundary([1 / 3, 2 / 3, 1], 0.025, "obrien_fleming", sides=1)
    assert boundary.critical == pytest.approx([3.710, 2.511, 1.993], abs=5e-4)
    assert boundary.nominal == pytest.approx([0.0001, 0.0060, 0.0231], abs=5e-5)
    assert boundary.spent == pytest.approx([0.0001, 0.0060, 0.0250], abs=5e-5)


def test_spending_differs_from_exact_design():
    """The Lan–DeMets approximations are not the exact constants: O'Brien–Fleming-type spending at two equal looks
    spends 0.0056 at the first (c 2.772 against the exact 2.797)."""
    boundary = spending_boundary([0.5, 1.0], 0.05, "obrien_fleming")
    assert boundary.critical[0] == pytest.approx(2.772, abs=5e-4)
    assert boundary.critical[0] < OBRIEN_FLEMING[2][0] - 0.02


@pytest.mark.parametrize(
    "spending, function", [("obrien_fleming", obrien_fleming_spending), ("pocock", pocock_spending)]
)
def test_first_look_closed_form_and_cumulative_spending(spending, function):
    """The first look alone spends α(t_1): c_1 = Φ⁻¹(1 − α(t_1)/2); every look's cumulative crossing probability
    is the spending function at its fraction."""
    fractions = [0.3, 0.55, 0.8, 1.0]
    boundary = spending_boundary(fractions, 0.05, spending)
    spent = function(np.array(fractions), 0.05)
    assert boundary.critical[0] == pytest.approx(stats.norm.isf(spent[0] / 2), rel=1e-7)
    assert boundary.spent == pytest.approx(list(spent), abs=1e-8)
    assert spent[-1] == pytest.approx(0.05)


def _rectangle(critical, fractions):
    """P(|Z_k| < c_k for every k) by scipy's multivariate normal (Genz), corr sqrt(t_i/t_j): independent of the
    recursion."""
    t = np.array(fractions)
    corr = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    c = np.array(critical)
    return stats.multivariate_normal(mean=np.zeros(len(t)), cov=corr, abseps=1e-7, releps=1e-7, maxpts=2_000_000).cdf(
        c, lower_limit=-c
    )


@pytest.mark.parametrize(
    "fractions, spending",
    [([0.5, 1.0], "obrien_fleming"), ([0.25, 0.6, 1.0], "pocock"), ([3 / 16, 0.5, 1.0], "obrien_fleming")],
)
def test_boundary_against_multivariate_normal(fractions, spending):
    boundary = spending_boundary(fractions, 0.05, spending)
    assert 1 - _rectangle(boundary.critical, fractions) == pytest.approx(0.05, abs=2e-5)


def test_null_simulation_type_one_error():
    """Z_k = S(t_k)/√t_k with S a Brownian motion under the null: the chance of ever crossing is α within Monte
    Carlo error (4 standard errors), for spending at unequal looks and for the exact Pocock design; a fixed 1.96
    at every look crosses far more often."""
    rng = np.random.default_rng(20261206)
    draws = 200_000
    for boundary in (
        spending_boundary([0.3, 0.5, 1.0], 0.05, "obrien_fleming"),
        spending_boundary([0.2, 0.7, 1.0], 0.05, "pocock"),
        constant_boundary(5, 0.05, "pocock"),
    ):
        t = np.array(boundary.fractions)
        scores = np.cumsum(rng.standard_normal((draws, len(t))) * np.sqrt(np.diff(t, prepend=0.0)), axis=1)
        crossed = (np.abs(scores / np.sqrt(t)) >= np.array(boundary.critical)).any(axis=1).mean()
        assert abs(crossed - 0.05) < 4 * math.sqrt(0.05 * 0.95 / draws), boundary
    scores = np.cumsum(rng.standard_normal((draws, 5)) * math.sqrt(0.2), axis=1)
    naive = (np.abs(scores / np.sqrt(np.arange(1, 6) / 5)) >= 1.96).any(axis=1).mean()
    assert naive > 0.12  # five unadjusted looks: about 0.14 (Armitage, McPherson and Rowe 1969)


def test_bad_input():
    with pytest.raises(ValueError, match="information fractions"):
        spending_boundary([0.5, 0.5, 1.0])
    with pytest.raises(ValueError, match="information fractions"):
        spending_boundary([0.5, 0.9])
    with pytest.raises(ValueError, match="spending"):
        spending_boundary([0.5, 1.0], spending="haybittle")
