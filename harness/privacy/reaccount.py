"""Independent re-accounting of a ledger: the harness recomputes ε from each entry's recorded
parameters, with the tightest composition it can verify for the mechanisms present, and refuses a
cell whose claim is below that figure or whose spend exceeds its budget (`independent_epsilon`):
pure-DP entries add up, Gaussian-only ledgers compose exactly (μ-GDP), ledgers of Gaussian,
exponential-mechanism and zCDP entries add ρ, and any other mix is composed jointly by the
`prv-accountant` package (Gopi et al. 2021). An RDP figure (Opacus's analysis, all entries summed
per order) is reported beside it as a second opinion.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from numbers import Real
from typing import Any

import numpy as np
from prv_accountant import (
    GaussianMechanism,
    LaplaceMechanism,
    PoissonSubsampledGaussianMechanism,
    PRVAccountant,
)
from prv_accountant.privacy_random_variables import PrivacyRandomVariable
from scipy import optimize

from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.ledger import Ledger, LedgerEntry, PrivacyViolation
from dpgym.privacy.mechanisms import gaussian_epsilon

# A claim may sit this far below the independent figure before the cell is refused: the PRV
# estimate's own discretisation error, and float noise in the generator's accountant.
RELATIVE_TOLERANCE = 0.01
ABSOLUTE_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Reaccounting:
    epsilon: float
    delta: float
    accountant: str
    verdict: str  # "ok", "underclaimed" or "over_budget"
    detail: str = ""
    rdp_epsilon: float | None = None  # second opinion; None when some entry has no RDP rule

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "accountant": self.accountant,
                "verdict": self.verdict, "detail": self.detail, "rdp_epsilon": self.rdp_epsilon}


# The parameters re-accounting reads from each mechanism's entry. Each must be a finite number ≥ 0:
# the figures are sums over entries, so one negative sensitivity or ρ would cancel another entry's
# real spend, and NaN compares false with every bound.
ACCOUNTED_PARAMS = {
    "laplace": ("l1_sensitivity", "scale"),
    "gaussian": ("l2_sensitivity", "sigma"),
    "subsampled_gaussian": ("sample_rate", "noise_multiplier", "steps"),
    "exponential": ("inverse_temperature", "utility_sensitivity"),
    "zcdp": ("rho",),
}


def _malformed(ledger: Ledger) -> str:
    """What makes the ledger unaccountable from its recorded numbers, or "" when nothing does."""
    for name, value in (("claimed ε", ledger.epsilon), ("claimed δ", ledger.delta)):
        if isinstance(value, bool) or not (isinstance(value, Real) and value >= 0):  # NaN fails too
            return f"the ledger's {name} is {value!r}, not a number ≥ 0"
    for i, entry in enumerate(ledger.entries):
        where = f"entry {i} ({entry.mechanism})"
        for key in ACCOUNTED_PARAMS.get(entry.mechanism, ()):
            value = entry.params.get(key)
            if isinstance(value, bool) or not isinstance(value, Real):
                return f"{where}: parameter {key!r} is {value!r}, not a number"
            if not (math.isfinite(value) and value >= 0):
                return f"{where}: parameter {key!r} is {value!r}; it must be finite and ≥ 0"
        if entry.mechanism == "subsampled_gaussian":
            if entry.params["sample_rate"] > 1:
                return f"{where}: sample_rate {entry.params['sample_rate']!r} is above 1"
            if entry.params["steps"] != int(entry.params["steps"]):
                return f"{where}: steps {entry.params['steps']!r} is not a whole number"
    return ""


# The parameter that carries each mechanism's noise. At zero the mechanism releases its input
# exactly (ε = ∞), and the accountants divide by it: the PRV one at σ = 0 ran for minutes and
# exhausted memory instead of answering.
NOISE_PARAMS = {"laplace": "scale", "gaussian": "sigma", "subsampled_gaussian": "noise_multiplier"}


def _noise_free(entry: LedgerEntry) -> bool:
    key = NOISE_PARAMS.get(entry.mechanism)
    return key is not None and float(entry.params[key]) <= 0


def _pure_epsilon(entry: LedgerEntry) -> float | None:
    """ε of an entry that is pure DP by its parameters, else None."""
    p = entry.params
    if entry.mechanism == "laplace":
        return float(p["l1_sensitivity"]) / float(p["scale"])
    if entry.mechanism == "exponential":  # density ∝ exp(β·u): ε = 2·β·Δu (McSherry & Talwar 2007)
        return 2 * float(p["inverse_temperature"]) * float(p["utility_sensitivity"])
    return None


# mechanism name → (privacy random variable, number of self-compositions), from recorded parameters only
PRV_BUILDERS: dict[str, Callable[[dict[str, Any]], tuple[PrivacyRandomVariable, int]]] = {
    "laplace": lambda p: (LaplaceMechanism(mu=float(p["l1_sensitivity"]) / float(p["scale"])), 1),
    "gaussian": lambda p: (GaussianMechanism(noise_multiplier=float(p["sigma"]) / float(p["l2_sensitivity"])), 1),
    "subsampled_gaussian": lambda p: (
        PoissonSubsampledGaussianMechanism(
            sampling_probability=float(p["sample_rate"]), noise_multiplier=float(p["noise_multiplier"])
        ),
        int(p["steps"]),
    ),
}


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest ε for which ρ-zCDP gives (ε, δ)-DP by Canonne, Kamath & Steinke (2020), Prop. 12:
    δ = min over α > 1 of exp((α−1)(αρ−ε)) (1−1/α)^α / (α−1), solved for ε at each α. Every α gives
    a valid bound, so an imperfect minimisation only errs on the safe (larger) side."""
    if rho <= 0:
        return 0.0

    def epsilon_at(alpha: float) -> float:
        return alpha * rho + (math.log(1 / delta) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)) / (alpha - 1)

    grid = np.geomspace(1 + 1e-6, 1e6, 4000)
    best = int(np.argmin([epsilon_at(a) for a in grid]))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    refined = optimize.minimize_scalar(epsilon_at, bounds=(low, high), method="bounded", options={"xatol": 1e-12})
    return float(min(refined.fun, epsilon_at(grid[best])))


# mechanism name → its ρ-zCDP from recorded parameters, for ledgers that mix Gaussian measurements and
# exponential-mechanism selections (the select–measure–generate methods): the PRV accountant has no
# exponential mechanism, and pure composition none for the Gaussian.
ZCDP_RHO: dict[str, Callable[[dict[str, Any]], float]] = {
    "gaussian": lambda p: float(p["l2_sensitivity"]) ** 2 / (2 * float(p["sigma"]) ** 2),  # Bun & Steinke 2016, Prop. 1.6
    # 2βΔu-bounded range, hence (2βΔu)²/8-zCDP (Cesar & Rogers 2021)
    "exponential": lambda p: (2 * float(p["inverse_temperature"]) * float(p["utility_sensitivity"])) ** 2 / 8,
    "zcdp": lambda p: float(p["rho"]),
}
ZCDP_COMPOSITION = ("zCDP composition (Gaussian ρ = Δ²/2σ², exponential mechanism (2βΔu)²/8 by bounded range: "
                    "Cesar & Rogers 2021), converted by Canonne, Kamath & Steinke (2020) Prop. 12")

EXACT_GAUSSIAN = "exact Gaussian composition (μ-GDP: Dong, Roth & Su 2019, Cor. 2; Balle & Wang 2018, Thm. 8)"
EXACT_SLACK = 1e-6  # relative: root-finding noise only, where the accountant has no error bar (PRV's
# ≥ 1e-4 absolute would swamp a claim of ε = 1e-4 or below, and refuse honest ones just above)


# prv-accountant refuses some large-ε ledgers of few compositions on a fine grid ("Discrete mean
# differs from continuous mean significantly"; q = 0.1, σ = 0.55, 10 steps, ε = 10). Its upper bound
# holds at any error bar, so re-accounting retries on these coarser grids before falling back on RDP.
PRV_COARSER_ERRORS = (0.01, 0.05, 0.25)


def independent_epsilon(entries: list[LedgerEntry], delta: float, eps_error: float = 1e-3) -> tuple[float, str]:
    """ε of all entries composed, at total δ, computed from parameters alone: exact for plain Gaussian
    mechanisms, else the PRV upper bound (within 2·eps_error of the exact ε); zCDP entries, and Gaussian
    and exponential ones mixed with them or with each other, compose by adding ρ."""
    if not entries:
        return 0.0, "none"
    pure = [_pure_epsilon(e) for e in entries]
    if all(eps is not None for eps in pure):
        return float(sum(pure)), "pure composition"
    if all(e.mechanism == "gaussian" for e in entries):
        if delta <= 0:
            raise PrivacyViolation("the ledger has Gaussian mechanisms but claims δ = 0")
        mu = math.sqrt(sum((float(e.params["l2_sensitivity"]) / float(e.params["sigma"])) ** 2 for e in entries))
        return gaussian_epsilon(delta, 1.0 / mu), EXACT_GAUSSIAN  # k Gaussians compose to one at μ = √Σμ_i²
    if all(e.mechanism in ZCDP_RHO for e in entries):
        if delta <= 0:
            raise PrivacyViolation("the ledger has zCDP-accounted mechanisms but claims δ = 0")
        return zcdp_epsilon(sum(ZCDP_RHO[e.mechanism](e.params) for e in entries), delta), ZCDP_COMPOSITION
    unknown = sorted({e.mechanism for e in entries if e.mechanism not in PRV_BUILDERS})
    if unknown:
        raise PrivacyViolation(f"cannot re-account mechanisms {unknown}: no independent accountant for them")
    if delta <= 0:
        raise PrivacyViolation("the ledger has approximate-DP mechanisms but claims δ = 0")
    prvs, compositions = zip(*(PRV_BUILDERS[e.mechanism](e.params) for e in entries))
    compositions = list(compositions)
    failures = []
    for error in sorted({eps_error, *(e for e in PRV_COARSER_ERRORS if e > eps_error)}):
        try:
            accountant = PRVAccountant(
                prvs=list(prvs), max_self_compositions=compositions, eps_error=error, delta_error=delta * 1e-3
            )
            _, _, eps_upper = accountant.compute_epsilon(delta=delta, num_self_compositions=compositions)
        except RuntimeError as err:
            failures.append(f"eps_error {error:g}: {err}")
            continue
        coarser = f", eps_error {error:g} after finer grids failed" if failures else ""
        return float(eps_upper), f"prv-accountant {version('prv-accountant')} (joint PRV composition, upper bound{coarser})"
    rdp = rdp_epsilon(entries, delta)
    if rdp is None:
        raise PrivacyViolation(f"prv-accountant failed on every grid ({'; '.join(failures)}) and the ledger has "
                               "mechanisms without an RDP rule to fall back on")
    return rdp, f"Opacus RDP (an upper bound; prv-accountant failed on every grid: {failures[-1]})"


# mechanism name → (sample rate, noise multiplier, steps) for the subsampled-Gaussian RDP analysis
RDP_PHASES: dict[str, Callable[[dict[str, Any]], tuple[float, float, int]]] = {
    "gaussian": lambda p: (1.0, float(p["sigma"]) / float(p["l2_sensitivity"]), 1),
    "subsampled_gaussian": lambda p: (float(p["sample_rate"]), float(p["noise_multiplier"]), int(p["steps"])),
}


def rdp_epsilon(entries: list[LedgerEntry], delta: float) -> float | None:
    """ε of all entries from Opacus's subsampled-Gaussian RDP, summed per order and converted once
    (Balle et al. 2020 conversion); None if an entry has no RDP rule here or δ = 0.

    Opacus (and torch) are imported only when a ledger needs this, so `dpgym.privacy` stays light.
    """
    if not entries or delta <= 0 or any(e.mechanism not in RDP_PHASES for e in entries):
        return None
    from dpgym.privacy.accountants import Phase, RDPAccountant

    return RDPAccountant().epsilon([Phase(*RDP_PHASES[e.mechanism](e.params)) for e in entries], delta)


def _eps_error(claimed: float) -> float:
    """PRV error bar for re-accounting: a quarter of the slack an honest claim is allowed, so an exact
    claim is never refused (the upper bound sits at most 2·eps_error above the exact ε, half the
    slack). Not finer: the FFT grid grows as √(compositions)/eps_error, and a fixed 1e-3 costs 4-10 s
    on a 400-step DP-SGD ledger at ε = 4 and minutes on a 25,000-step one, against a few tenths of a
    second at this error bar."""
    if not math.isfinite(claimed):
        return 0.05
    return min(0.05, max(ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE * claimed) / 4)


def reaccount(ledger: Ledger, budget: Budget) -> Reaccounting:
    """Re-account `ledger`; the verdict says whether the cell may be ranked."""
    if ledger.guarantee is Guarantee.NONE:
        return Reaccounting(math.inf, 0.0, "none", "ok", "non-private reference (guarantee 'none')")
    if ledger.is_non_private:
        if budget.is_private:
            return Reaccounting(math.inf, 0.0, "none", "over_budget",
                                f"a non-private run under the finite budget ε={budget.epsilon:g}")
        return Reaccounting(math.inf, 0.0, "none", "ok", "non-private run (ε = ∞): nothing to account")
    delta = ledger.delta
    malformed = _malformed(ledger)
    if malformed:
        return Reaccounting(math.nan, delta, "none", "unaccountable", malformed)
    noise_free = sorted({e.mechanism for e in ledger.entries if _noise_free(e)})
    if noise_free:
        spent = f"{noise_free} entries add no noise, so they spend ε = ∞"
        if math.isfinite(ledger.epsilon):
            return Reaccounting(math.inf, delta, "none", "underclaimed", f"claimed ε={ledger.epsilon:.6g} but {spent}")
        if budget.is_private:
            return Reaccounting(math.inf, delta, "none", "over_budget", f"{spent}, over the budget ε={budget.epsilon:g}")
        return Reaccounting(math.inf, delta, "none", "ok", f"{spent}, within the budget ε = ∞")
    try:
        epsilon, accountant = independent_epsilon(ledger.entries, delta, _eps_error(ledger.epsilon))
    except PrivacyViolation as err:
        return Reaccounting(math.nan, delta, "none", "unaccountable", str(err))
    rdp = rdp_epsilon(ledger.entries, delta)
    slack = (EXACT_SLACK * epsilon + 1e-15 if accountant == EXACT_GAUSSIAN
             else max(ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE * epsilon))
    if ledger.epsilon < epsilon - slack:
        return Reaccounting(epsilon, delta, accountant, "underclaimed",
                            f"claimed ε={ledger.epsilon:.6g} but the mechanisms spend ε={epsilon:.6g}", rdp)
    if budget.is_private and (epsilon > budget.epsilon + slack or ledger.epsilon > budget.epsilon * (1 + 1e-9)
                              or delta > budget.delta * (1 + 1e-9)):
        return Reaccounting(epsilon, delta, accountant, "over_budget",
                            f"spends ε={max(epsilon, ledger.epsilon):.6g}, δ={delta:.3g} "
                            f"over the budget ε={budget.epsilon:g}, δ={budget.delta:g}", rdp)
    return Reaccounting(epsilon, delta, accountant, "ok", rdp_epsilon=rdp)


def enforce(ledger: Ledger, budget: Budget) -> Reaccounting:
    """Re-account and raise `PrivacyViolation` unless the verdict is ok."""
    result = reaccount(ledger, budget)
    if result.verdict != "ok":
        raise PrivacyViolation(f"privacy re-accounting refused the cell ({result.verdict}): {result.detail}")
    return result
