"""Independent re-accounting of a ledger: the harness recomputes ε from each entry's event
(`dpgym.privacy.events`), with the tightest composition it can verify for the events present, and
refuses a cell whose claim is below that figure or whose spend exceeds its budget
(`independent_epsilon`): pure-DP events add up, Gaussian-only ledgers compose exactly (μ-GDP), a mix
with an event that has no privacy random variable (the exponential mechanism, a zCDP release) adds
ρ, and any other mix is composed jointly by the `prv-accountant` package (Gopi et al. 2021). An RDP
figure (Opacus's analysis, all events summed per order) is reported beside it as a second opinion.
Each event knows its own conversions, so this module keeps no table of mechanisms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib.metadata import version
from numbers import Real

from prv_accountant import PRVAccountant

from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.events import PrivacyEvent
from dpgym.privacy.ledger import Ledger, PrivacyViolation, Reaccounting
from dpgym.privacy.mechanisms import gaussian_epsilon, zcdp_epsilon

# A claim may sit this far below the independent figure before the cell is refused: the PRV
# estimate's own discretisation error, and float noise in the generator's accountant.
RELATIVE_TOLERANCE = 0.01
ABSOLUTE_TOLERANCE = 1e-3


def _malformed(ledger: Ledger) -> str:
    """What makes the ledger's claim unreadable, or "" when nothing does (its entries checked
    themselves when they were recorded)."""
    for name, value in (("claimed ε", ledger.epsilon), ("claimed δ", ledger.delta)):
        if isinstance(value, bool) or not (isinstance(value, Real) and value >= 0):  # NaN fails too
            return f"the ledger's {name} is {value!r}, not a number ≥ 0"
    adjacencies = sorted({str(e.event.adjacency) for e in ledger.entries})
    if len(adjacencies) > 1:
        return (f"its events assume different neighbouring relations ({', '.join(adjacencies)}), which no "
                "accountant here composes")
    return ""


ZCDP_COMPOSITION = ("zCDP composition (Gaussian ρ = Δ²/2σ², exponential mechanism (2βΔu)²/8 by bounded range: "
                    "Cesar & Rogers 2021; pure ε-DP ε²/2), converted by Canonne, Kamath & Steinke (2020) Prop. 12")

EXACT_GAUSSIAN = "exact Gaussian composition (μ-GDP: Dong, Roth & Su 2019, Cor. 2; Balle & Wang 2018, Thm. 8)"
EXACT_SLACK = 1e-6  # relative: root-finding noise only, where the accountant has no error bar (PRV's
# ≥ 1e-4 absolute would swamp a claim of ε = 1e-4 or below, and refuse honest ones just above)


# prv-accountant refuses some large-ε ledgers of few compositions on a fine grid ("Discrete mean
# differs from continuous mean significantly"; q = 0.1, σ = 0.55, 10 steps, ε = 10). Its upper bound
# holds at any error bar, so re-accounting retries on these coarser grids before falling back on RDP.
PRV_COARSER_ERRORS = (0.01, 0.05, 0.25)


def independent_epsilon(events: Sequence[PrivacyEvent], delta: float, eps_error: float = 1e-3) -> tuple[float, str]:
    """ε of all events composed, at total δ, computed from their parameters alone, on the tightest
    accountant that reads every event: pure composition when all are pure; exact μ-GDP when all are
    Gaussian; else the PRV upper bound (within 2·eps_error of the exact ε), or, when some event has no
    privacy random variable (the exponential mechanism, a zCDP release), ρ added up in zCDP."""
    if not events:
        return 0.0, "none"
    pure = [e.pure_epsilon() for e in events]
    if all(eps is not None for eps in pure):
        return float(sum(pure)), "pure composition"  # type: ignore[arg-type]
    mus = [e.gdp_mu() for e in events]
    if all(mu is not None for mu in mus):
        if delta <= 0:
            raise PrivacyViolation("the ledger has Gaussian mechanisms but claims δ = 0")
        mu = math.sqrt(sum(m**2 for m in mus))  # type: ignore[operator]
        return gaussian_epsilon(delta, 1.0 / mu), EXACT_GAUSSIAN  # k Gaussians compose to one at μ = √Σμ_i²
    variables = [e.prv() for e in events]
    if any(v is None for v in variables):
        rhos = [e.zcdp_rho() for e in events]
        if any(rho is None for rho in rhos):
            unreadable = sorted({e.type for e, v, rho in zip(events, variables, rhos) if v is None or rho is None})
            raise PrivacyViolation(f"cannot re-account {unreadable} together with the ledger's other events: no "
                                   "accountant here reads them all")
        if delta <= 0:
            raise PrivacyViolation("the ledger has zCDP-accounted mechanisms but claims δ = 0")
        return zcdp_epsilon(sum(rhos), delta), ZCDP_COMPOSITION  # type: ignore[arg-type]
    if delta <= 0:
        raise PrivacyViolation("the ledger has approximate-DP mechanisms but claims δ = 0")
    prvs, compositions = zip(*variables)  # type: ignore[misc]
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
    rdp = rdp_epsilon(events, delta)
    if rdp is None:
        raise PrivacyViolation(f"prv-accountant failed on every grid ({'; '.join(failures)}) and the ledger has "
                               "mechanisms without an RDP rule to fall back on")
    return rdp, f"Opacus RDP (an upper bound; prv-accountant failed on every grid: {failures[-1]})"


def rdp_epsilon(events: Sequence[PrivacyEvent], delta: float) -> float | None:
    """ε of all events from Opacus's subsampled-Gaussian RDP, summed per order and converted once
    (Balle et al. 2020 conversion); None if an event has no RDP phase or δ = 0.

    Opacus (and torch) are imported only when a ledger needs this, so `dpgym.privacy` stays light.
    """
    phases = [e.rdp_phase() for e in events]
    if not events or delta <= 0 or any(p is None for p in phases):
        return None
    from dpgym.privacy.accountants import RDPAccountant

    return RDPAccountant().epsilon(phases, delta)  # type: ignore[arg-type]


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
    events = [e.event for e in ledger.entries]
    noise_free = sorted({e.type for e in events if e.noise_free})
    if noise_free:
        spent = f"{noise_free} entries add no noise, so they spend ε = ∞"
        if math.isfinite(ledger.epsilon):
            return Reaccounting(math.inf, delta, "none", "underclaimed", f"claimed ε={ledger.epsilon:.6g} but {spent}")
        if budget.is_private:
            return Reaccounting(math.inf, delta, "none", "over_budget", f"{spent}, over the budget ε={budget.epsilon:g}")
        return Reaccounting(math.inf, delta, "none", "ok", f"{spent}, within the budget ε = ∞")
    try:
        epsilon, accountant = independent_epsilon(events, delta, _eps_error(ledger.epsilon))
    except PrivacyViolation as err:
        return Reaccounting(math.nan, delta, "none", "unaccountable", str(err))
    rdp = rdp_epsilon(events, delta)
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

