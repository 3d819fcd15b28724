"""Zero-concentrated DP (Bun & Steinke 2016): the conversion of ρ to (ε, δ), its inverse (a budget
in ρ), the ρ of the Gaussian and exponential mechanisms, and a ledger that composes them in ρ.

The select–measure–generate methods (MST, AIM, PrivSyn) compose in zCDP and convert the total ρ
once. Under add/remove-one-row adjacency a marginal's counts move by 1 in one cell, so the Gaussian
mechanism with noise σ on a marginal is ρ = 1/(2σ²)-zCDP; the exponential mechanism with density
∝ exp(β·u), utility sensitivity Δu, is (2βΔu)-bounded-range, hence (2βΔu)²/8-zCDP (Cesar & Rogers
2021). Both papers write the selection's parameter as ε = 2βΔu (the mechanism samples
∝ exp(ε·u / (2Δu))).

The harness's re-accounting adds the ρ of the events (`PrivacyEvent.zcdp_rho`) and converts the sum
with `zcdp_epsilon` (`dpgym.privacy.mechanisms`); `total_rho` inverts that conversion, so a cell at ε
spends exactly ε.
"""

from __future__ import annotations

import math

from scipy import optimize

from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.events import ExponentialEvent, GaussianEvent
from dpgym.privacy.ledger import Ledger
from dpgym.privacy.mechanisms import zcdp_epsilon

GAUSSIAN_ACCOUNTANT = "zCDP: the Gaussian mechanism is ρ = Δ²/(2σ²)-zCDP (Bun & Steinke 2016, Prop. 1.6)"
EXPONENTIAL_ACCOUNTANT = ("zCDP: the exponential mechanism is 2βΔu-bounded-range, hence (2βΔu)²/8-zCDP "
                          "(Cesar & Rogers 2021)")


def total_rho(epsilon: float, delta: float) -> float:
    """The ρ whose (ε, δ) conversion by `zcdp_epsilon` is `epsilon`: the whole budget in zCDP
    (infinite for a non-private run)."""
    if math.isinf(epsilon):
        return math.inf
    # zcdp_epsilon(ρ) ≥ ρ, so the root lies below ε; at 1e-30 the conversion is about 2·√(ρ·ln(1/δ)) ≪ ε.
    return optimize.brentq(lambda rho: zcdp_epsilon(rho, delta) - epsilon, 1e-30, epsilon, xtol=1e-15, rtol=1e-13)


def gaussian_rho(sigma: float) -> float:
    """ρ of one Gaussian measurement of L2 sensitivity 1 with noise σ (∞ for exact counts)."""
    return math.inf if sigma == 0 else 1.0 / (2.0 * sigma**2)


def gaussian_sigma(rho: float) -> float:
    """The noise σ that spends ρ on one measurement of L2 sensitivity 1 (0 at ρ = ∞: exact counts)."""
    return 0.0 if math.isinf(rho) else math.sqrt(1.0 / (2.0 * rho))


def selection_rho(epsilon: float) -> float:
    """ρ of one exponential mechanism with parameter ε = 2βΔu."""
    return epsilon**2 / 8.0


def selection_epsilon(rho: float) -> float:
    """The exponential mechanism's ε = 2βΔu that spends ρ (∞ at ρ = ∞: the best candidate)."""
    return math.inf if math.isinf(rho) else math.sqrt(8.0 * rho)


class ZcdpLedger:
    """The ledger of a zCDP mechanism: each measurement and selection recorded as it runs, with the ρ
    it spends added up, and the total claimed as that ρ converted once to (ε, δ). Under an infinite
    budget (a non-private run: exact marginals, the best candidates) nothing is recorded and the
    ledger says so."""

    def __init__(self, budget: Budget, method: str):
        self.budget = budget
        self.method = method
        self.rho = 0.0
        self.ledger = Ledger(Guarantee.FORMAL)

    def measurement(self, sigma: float, description: str) -> None:
        """A Gaussian measurement of one marginal (L2 sensitivity 1) with noise σ."""
        self.rho += gaussian_rho(sigma)
        if self.budget.is_private:
            self.ledger.record(GaussianEvent(l2_sensitivity=1.0, sigma=sigma), delta=self.budget.delta,
                               accountant=GAUSSIAN_ACCOUNTANT, description=description)

    def selection(self, epsilon: float, sensitivity: float, description: str) -> None:
        """An exponential mechanism with parameter ε = 2βΔu over scores of sensitivity Δu."""
        self.rho += selection_rho(epsilon)
        if self.budget.is_private:
            self.ledger.record(ExponentialEvent(inverse_temperature=epsilon / (2.0 * sensitivity),
                                                utility_sensitivity=sensitivity),
                               epsilon=epsilon, accountant=EXPONENTIAL_ACCOUNTANT, description=description)

    def claimed(self) -> Ledger:
        if not self.budget.is_private:
            return Ledger.non_private(Guarantee.FORMAL, f"{self.method}: exact marginals (ε = ∞)")
        # zCDP composes on the Rényi-divergence curve (ρ-zCDP is RDP of order α at αρ, for every α),
        # which the ledger's composition names "rdp".
        self.ledger.claim(zcdp_epsilon(self.rho, self.budget.delta), self.budget.delta, "rdp")
        return self.ledger
