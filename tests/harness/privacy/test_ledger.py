"""Ledger totals, the budget refusal, and the independent re-accounting verdicts."""

from __future__ import annotations

import math

import pytest

from dpgym import Budget, GaussianEvent, Guarantee, LaplaceEvent, Ledger, LedgerEntry, PrivacyViolation
from dpgym.privacy.mechanisms import calibrate_gaussian, gaussian_epsilon
from dpgym.privacy.reaccount import reaccount


def laplace(epsilon: float, sensitivity: float = 1.0) -> LedgerEntry:
    return LedgerEntry(LaplaceEvent(l1_sensitivity=sensitivity, scale=sensitivity / epsilon), epsilon, 0.0, "pure")


def gaussian(epsilon: float, delta: float, sensitivity: float = 1.0) -> LedgerEntry:
    sigma = calibrate_gaussian(epsilon, delta) * sensitivity
    return LedgerEntry(GaussianEvent(l2_sensitivity=sensitivity, sigma=sigma), epsilon, delta, "analytic")


def test_basic_composition_sums_entries():
    ledger = Ledger(Guarantee.FORMAL, [laplace(0.3), gaussian(0.5, 4e-6)])
    assert ledger.epsilon == pytest.approx(0.8) and ledger.delta == pytest.approx(4e-6)


def test_overspending_ledger_is_refused():
    ledger = Ledger(Guarantee.FORMAL, [laplace(0.6), laplace(0.6)])
    with pytest.raises(PrivacyViolation, match=r"spends \(ε=1.2.*over the budget \(ε=1"):
        ledger.check_within(Budget(1.0, 1e-5))
    assert reaccount(ledger, Budget(1.0, 1e-5)).verdict == "over_budget"


def test_underclaimed_ledger_is_caught_by_reaccounting():
    entry = laplace(1.0)
    lying = LedgerEntry(entry.event, 0.5, 0.0, "pure")  # parameters say ε = 1
    result = reaccount(Ledger(Guarantee.FORMAL, [lying]), Budget(1.0, 1e-5))
    assert result.verdict == "underclaimed" and result.epsilon == pytest.approx(1.0)


def test_analytic_gaussian_calibration_matches_independent_prv_accountant():
    for epsilon in (0.1, 1.0, 4.0):
        ledger = Ledger(Guarantee.FORMAL, [gaussian(epsilon, 1e-5, sensitivity=3.0)])
        result = reaccount(ledger, Budget(epsilon, 1e-5))
        assert result.verdict == "ok"
        assert result.epsilon == pytest.approx(epsilon, abs=5e-3)
    sigma = calibrate_gaussian(1.0, 1e-5)
    assert gaussian_epsilon(1e-5, sigma) <= 1.0 + 1e-9
    assert gaussian_epsilon(1e-5, sigma * 0.99) > 1.0


def test_joint_composition_is_no_looser_than_summing():
    entries = [gaussian(0.5, 5e-6), gaussian(0.5, 5e-6)]
    result = reaccount(Ledger(Guarantee.FORMAL, entries), Budget(1.0, 1e-5))
    assert result.verdict == "ok" and result.epsilon < 1.0


def test_non_private_ledger_only_under_infinite_budget():
    ledger = Ledger.non_private(Guarantee.FORMAL, "exact")
    assert reaccount(ledger, Budget(math.inf)).verdict == "ok"
    assert reaccount(ledger, Budget(1.0)).verdict == "over_budget"
    with pytest.raises(PrivacyViolation):
        ledger.check_within(Budget(1.0))


def test_reference_with_guarantee_none_is_not_bounded():
    ledger = Ledger.non_private(Guarantee.NONE, "real rows")
    ledger.check_within(Budget(1.0))
    assert reaccount(ledger, Budget(1.0)).verdict == "ok"


def test_json_round_trip_keeps_claims():
    ledger = Ledger(Guarantee.FORMAL, [gaussian(0.5, 5e-6), gaussian(0.5, 5e-6)])
    ledger.claim(0.8, 1e-5, "prv")
    again = Ledger.from_dict(ledger.to_dict())
    assert again.epsilon == 0.8 and again.composition == "prv" and again.entries == ledger.entries


def test_details_that_json_cannot_hold_are_refused_when_recorded():
    """A ledger is published as ledger.json, whose keys are strings."""
    with pytest.raises(TypeError, match=r"ledger entry 'laplace': details .* cannot be written as JSON: keys must be"):
        Ledger(Guarantee.PURE).record(LaplaceEvent(l1_sensitivity=1.0, scale=1.0), details={("noise", "scale"): 1.0})
