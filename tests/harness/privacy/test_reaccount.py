"""Independent re-accounting of DP-SGD ledgers: joint over phases, an RDP second opinion beside the
PRV figure, and a refusal for claims below what the recorded mechanisms spend."""

import math

import pytest

from dpgym.privacy.accountants import Phase, PRVAccountant, RDPAccountant
from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.events import (
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    SubsampledGaussianEvent,
    ZcdpEvent,
)
from dpgym.privacy.ledger import Ledger, LedgerEntry, PrivacyViolation
from dpgym.privacy.reaccount import independent_epsilon, reaccount

AE, DISC = Phase(0.01, 1.2, 1000), Phase(0.02, 2.0, 1500)  # two phases, as an autoencoder then a GAN


def _dpsgd_ledger(phases, claimed: float, delta: float = 1e-5, composition: str = "rdp") -> Ledger:
    ledger = Ledger(Guarantee.FORMAL)
    for p in phases:
        ledger.record(SubsampledGaussianEvent(sample_rate=p.sample_rate, noise_multiplier=p.noise_multiplier,
                                              steps=p.steps, clip_norm=1.0),
                      epsilon=RDPAccountant().epsilon([p], delta), delta=delta, accountant="test",
                      details={"clipping": "per_layer"})
    ledger.claim(claimed, delta, composition)
    return ledger


@pytest.mark.slow
def test_multi_phase_ledger_is_re_accounted_jointly():
    joint_rdp = RDPAccountant().epsilon([AE, DISC], 1e-5)
    result = reaccount(_dpsgd_ledger([AE, DISC], joint_rdp), Budget(joint_rdp, 1e-5))
    assert result.verdict == "ok"
    assert result.epsilon == pytest.approx(PRVAccountant(eps_error=1e-3).epsilon([AE, DISC], 1e-5), abs=0.01 * joint_rdp)
    assert result.epsilon < result.rdp_epsilon == pytest.approx(joint_rdp)
    summed = sum(PRVAccountant().epsilon([p], 5e-6) for p in (AE, DISC))
    assert result.epsilon < summed  # composed, not added


@pytest.mark.slow
def test_claim_below_the_independent_figure_is_underclaimed():
    one_phase_only = RDPAccountant().epsilon([DISC], 1e-5)  # forgets the autoencoder phase
    result = reaccount(_dpsgd_ledger([AE, DISC], one_phase_only), Budget(10.0, 1e-5))
    assert result.verdict == "underclaimed"
    assert "claimed" in result.detail


@pytest.mark.slow
def test_claim_just_within_the_tolerance_is_accepted_and_beyond_it_refused():
    prv = PRVAccountant(eps_error=1e-3).epsilon([DISC], 1e-5)
    assert reaccount(_dpsgd_ledger([DISC], prv * 0.995), Budget(10.0, 1e-5)).verdict == "ok"
    assert reaccount(_dpsgd_ledger([DISC], prv * 0.97), Budget(10.0, 1e-5)).verdict == "underclaimed"


@pytest.mark.slow
def test_honest_claim_over_the_budget_is_refused():
    joint = RDPAccountant().epsilon([AE, DISC], 1e-5)
    assert reaccount(_dpsgd_ledger([AE, DISC], joint), Budget(joint / 2, 1e-5)).verdict == "over_budget"


def test_rdp_second_opinion_is_absent_for_mechanisms_without_an_rdp_rule():
    ledger = Ledger(Guarantee.PURE, [LedgerEntry(LaplaceEvent(l1_sensitivity=1.0, scale=2.0), 0.5, 0.0, "test")])
    result = reaccount(ledger, Budget(1.0, 1e-5))
    assert result.verdict == "ok" and result.rdp_epsilon is None


def test_zcdp_ledgers_compose_rho_and_convert_between_the_gaussian_and_the_bun_steinke_bound():
    from dpgym.privacy.mechanisms import gaussian_epsilon, zcdp_epsilon

    sigma, delta = 3.0, 1e-5
    rho = 1 / (2 * sigma**2)  # the Gaussian mechanism with noise multiplier σ is exactly ρ-zCDP
    converted = zcdp_epsilon(rho, delta)
    assert gaussian_epsilon(delta, sigma) < converted < rho + 2 * math.sqrt(rho * math.log(1 / delta))
    halves = Ledger(Guarantee.NOMINAL, [LedgerEntry(ZcdpEvent(rho=rho / 2), 0.0, delta / 2, "test")] * 2)
    halves.claim(converted, delta, "rdp")
    assert reaccount(halves, Budget(converted, delta)).verdict == "ok"
    halves.claim(converted * 0.9, delta, "rdp")
    assert reaccount(halves, Budget(converted, delta)).verdict == "underclaimed"


def test_gaussian_and_exponential_entries_compose_in_zcdp_as_computed_by_hand():
    """A select–measure–generate ledger (MST, AIM): ρ = Δ²/(2σ²) per Gaussian measurement and
    (2βΔu)²/8 per exponential-mechanism selection (bounded range, Cesar & Rogers 2021), added with
    any zCDP entry and converted once."""
    from dpgym.privacy.mechanisms import zcdp_epsilon

    delta = 1e-5
    entries = [LedgerEntry(GaussianEvent(l2_sensitivity=2.0, sigma=10.0), 0.9, delta, "test"),  # ρ = 4/200
               LedgerEntry(ExponentialEvent(inverse_temperature=0.25, utility_sensitivity=0.2), 0.1, 0.0, "test"),
               LedgerEntry(ZcdpEvent(rho=0.005), 0.3, delta, "test")]
    by_hand = zcdp_epsilon(4 / 200 + 0.1**2 / 8 + 0.005, delta)  # 2βΔu = 2 · 0.25 · 0.2 = 0.1
    ledger = Ledger(Guarantee.FORMAL, entries)
    ledger.claim(by_hand, delta, "rdp")
    result = reaccount(ledger, Budget(by_hand, delta))
    assert result.verdict == "ok" and result.epsilon == pytest.approx(by_hand, rel=1e-12)
    assert result.accountant.startswith("zCDP composition") and result.rdp_epsilon is None
    ledger.claim(by_hand * 0.98, delta, "rdp")
    assert reaccount(ledger, Budget(by_hand, delta)).verdict == "underclaimed"
    ledger.claim(by_hand, delta, "rdp")
    assert reaccount(ledger, Budget(by_hand * 0.98, delta)).verdict == "over_budget"


def test_pure_and_exact_gaussian_ledgers_keep_their_paths_and_a_mix_goes_to_zcdp():
    from dpgym.privacy.reaccount import EXACT_GAUSSIAN, independent_epsilon

    gaussian = GaussianEvent(l2_sensitivity=1.0, sigma=5.0)
    exponential = ExponentialEvent(inverse_temperature=0.1, utility_sensitivity=1.0)
    assert independent_epsilon([gaussian, gaussian], 1e-5)[1] == EXACT_GAUSSIAN
    assert independent_epsilon([exponential, exponential], 1e-5) == (pytest.approx(0.4), "pure composition")
    assert independent_epsilon([gaussian, exponential], 1e-5)[1].startswith("zCDP composition")
    with pytest.raises(PrivacyViolation, match="δ = 0"):
        independent_epsilon([gaussian, exponential], 0.0)


def test_zcdp_mixed_with_mechanisms_outside_zcdp_has_no_independent_accountant():
    ledger = Ledger(Guarantee.NOMINAL, [LedgerEntry(ZcdpEvent(rho=0.01), 0.5, 1e-6, "test"),
                                        LedgerEntry(SubsampledGaussianEvent(sample_rate=0.01, noise_multiplier=1.0,
                                                                            steps=10, clip_norm=1.0), 0.5, 0.0, "test")])
    assert reaccount(ledger, Budget(2.0, 1e-5)).verdict == "unaccountable"


@pytest.mark.parametrize("epsilon", [1e-6, 1e-4, 1e-2, 1.0])
def test_gaussian_releases_are_re_accounted_exactly_at_any_epsilon(epsilon):
    """The independent generator at the ExpM+NF grid's small ε: PRV's 1e-3 error bar refused honest
    cells at 1e-4…1e-2 and could not see a 10× overspend at 1e-5. Plain Gaussians compose exactly."""
    from dpgym.privacy.mechanisms import calibrate_gaussian

    def ledger(sigma: float) -> Ledger:
        out = Ledger(Guarantee.FORMAL)
        out.record(GaussianEvent(l2_sensitivity=3.9, sigma=sigma), epsilon=epsilon, delta=1e-5, accountant="analytic")
        out.claim(epsilon, 1e-5, "basic")
        return out

    honest = reaccount(ledger(3.9 * calibrate_gaussian(epsilon, 1e-5)), Budget(epsilon, 1e-5))
    assert honest.verdict == "ok" and honest.epsilon == pytest.approx(epsilon, rel=1e-6)
    assert reaccount(ledger(3.9 * calibrate_gaussian(epsilon, 1e-5) * 0.9), Budget(epsilon, 1e-5)).verdict == "underclaimed"


@pytest.mark.parametrize(("claimed", "budget", "verdict"), [
    (math.inf, math.inf, "ok"),  # DP-SGD run without noise under ε = ∞ (`dpsgd_lr` at ε = ∞)
    (math.inf, 1.0, "over_budget"),
    (1.0, 10.0, "underclaimed"),
])
def test_noise_free_entries_spend_infinite_epsilon_without_calling_an_accountant(claimed, budget, verdict):
    """At σ = 0 the PRV accountant ran for minutes and was killed for memory (a grid cell at 11 GB)."""
    ledger = _dpsgd_ledger([Phase(0.01, 1.2, 100)], claimed)
    ledger.record(SubsampledGaussianEvent(sample_rate=0.0106, noise_multiplier=0.0, steps=470, clip_norm=1.0),
                  epsilon=math.inf, delta=1e-5, accountant="test")
    ledger.record(LaplaceEvent(l1_sensitivity=1.0, scale=0.0), epsilon=math.inf, accountant="test")
    result = reaccount(ledger, Budget(budget, 1e-5))
    assert result.verdict == verdict and result.epsilon == math.inf
    assert "['laplace', 'subsampled_gaussian'] entries add no noise" in result.detail


def test_events_assuming_different_neighbouring_relations_are_unaccountable_together():
    """A replace-one sensitivity is not an add/remove one: composing them as if it were under-counts."""
    ledger = Ledger(Guarantee.PURE, [
        LedgerEntry(LaplaceEvent(l1_sensitivity=1.0, scale=2.0), 0.5, 0.0, "test"),
        LedgerEntry(ExponentialEvent(inverse_temperature=0.25, utility_sensitivity=1.0, adjacency="replace_one"),
                    0.5, 0.0, "test")])
    result = reaccount(ledger, Budget(2.0, 1e-5))
    assert result.verdict == "unaccountable" and "add_remove, replace_one" in result.detail


def test_a_nan_claim_is_unaccountable():
    ledger = _dpsgd_ledger([AE], math.nan)
    result = reaccount(ledger, Budget(10.0, 1e-5))
    assert result.verdict == "unaccountable" and "claimed ε is nan" in result.detail


@pytest.mark.slow
def test_a_large_epsilon_ledger_prv_cannot_grid_finely_is_re_accounted_on_a_coarser_grid():
    """prv-accountant raises on this honest ε = 10 ledger at error bars up to 1e-2; its upper bound
    holds at any error bar, so the figure comes from a coarser grid instead of a crash."""
    event = SubsampledGaussianEvent(sample_rate=0.1, noise_multiplier=0.5510, steps=10, clip_norm=1.0)
    ledger = Ledger(Guarantee.FORMAL, [LedgerEntry(event, 10.0, 1e-5, "t")])
    ledger.claim(10.0, 1e-5, "prv")
    epsilon, accountant = independent_epsilon([event], 1e-5, eps_error=1e-3)
    assert 9.5 < epsilon <= 10.1 and "after finer grids failed" in accountant
    result = reaccount(ledger, Budget(10.0, 1e-5))
    assert result.verdict == "ok" and 9.5 < result.epsilon <= 10.1


def test_a_nearly_noiseless_gaussian_release_is_unbounded_not_an_overflow():
    from dpgym.privacy.mechanisms import gaussian_epsilon

    assert gaussian_epsilon(1e-5, 0.01) == math.inf
    assert gaussian_epsilon(1e-5, 1.0) == pytest.approx(4.377, abs=0.001)
