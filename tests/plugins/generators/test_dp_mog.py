"""dp_mog: the released statistics have the sensitivities the ledger states, the noise meets the
budget under both accountants, the ledger re-accounts, and the fitted mixture is a density."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgym import Budget, Column, ColumnKind, Guarantee, Schema
from dpgym.plugins.generators.dp_mog import SPEC
from dpgym.plugins.generators.dp_mog.model import (
    Mixture,
    SufficientStatistics,
    calibrate_noise,
    composed_epsilon,
    initial_mixture,
)
from dpgym.plugins.nn.space import project_to_unit_ball
from dpgym.privacy import gaussian_epsilon
from dpgym.privacy.reaccount import reaccount

SCHEMA = Schema("blobs", (Column("x", ColumnKind.CONTINUOUS, min=-4.0, max=4.0),
                          Column("y", ColumnKind.CONTINUOUS, min=-4.0, max=4.0),
                          Column("tag", ColumnKind.CATEGORICAL, categories=("a", "b"))))
CENTRES = np.array([[-2.0, -2.0], [2.0, -2.0], [0.0, 2.0]])


def blobs(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    xy = CENTRES[rng.integers(3, size=n)] + 0.3 * rng.standard_normal((n, 2))
    return pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1], "tag": pd.Categorical(rng.choice(["a", "b"], n), categories=["a", "b"])})


def _upper(second: np.ndarray) -> np.ndarray:
    rows, cols = np.triu_indices(second.shape[-1])
    return second[:, rows, cols]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), dim=st.integers(1, 6), k=st.integers(1, 5))
def test_one_row_moves_each_released_statistic_by_at_most_one(seed, dim, k):
    rng = np.random.default_rng(seed)
    rows = project_to_unit_ball(rng.uniform(-1, 1, (20, dim)) * rng.uniform(0.1, 3))
    mixture = initial_mixture(k, dim, rng)
    full = SufficientStatistics.of(rows, mixture.responsibilities(rows))
    less = SufficientStatistics.of(rows[1:], mixture.responsibilities(rows[1:]))
    assert np.linalg.norm(full.counts - less.counts) <= 1 + 1e-12
    assert np.linalg.norm(full.first - less.first) <= 1 + 1e-12
    assert np.linalg.norm(_upper(full.second) - _upper(less.second)) <= 1 + 1e-12


@pytest.mark.parametrize("accountant", ["exact", "rdp", "zcdp"])
@pytest.mark.parametrize("epsilon", [0.5, 4.0])
def test_calibrated_noise_spends_the_budget_and_no_more(accountant, epsilon):
    z = calibrate_noise(epsilon, 1e-5, 30, accountant)
    assert composed_epsilon(z, 30, 1e-5, accountant) <= epsilon
    assert composed_epsilon(z * 0.995, 30, 1e-5, accountant) > epsilon


def test_zcdp_is_looser_than_the_moments_accountant():
    assert calibrate_noise(1.0, 1e-5, 30, "zcdp") > calibrate_noise(1.0, 1e-5, 30, "rdp")


def test_ledger_has_one_gaussian_entry_per_release_and_reaccounts_within_the_claim():
    gen = SPEC.build({"iterations": 4})
    budget = Budget(1.0, 1e-5)
    ledger = gen.fit(blobs(2000), SCHEMA, budget, seed=0)
    assert ledger.guarantee is Guarantee.FORMAL and ledger.composition == "gdp"
    assert len(ledger.entries) == 3 * 4
    assert {e.type for e in ledger.entries} == {"gaussian"}
    assert all(e.event.l2_sensitivity == 1.0 and e.event.sigma == gen.noise_multiplier_ for e in ledger.entries)
    check = reaccount(ledger, budget)
    assert check.verdict == "ok"
    assert check.epsilon == pytest.approx(budget.epsilon, rel=1e-9)  # exact composition: the whole budget
    assert ledger.epsilon <= budget.epsilon


@pytest.mark.parametrize(("accountant", "spent"), [("exact", 1.0), ("rdp", 0.915), ("zcdp", 0.741)])
def test_exact_composition_spends_the_budget_the_paper_accountants_a_share(accountant, spent):
    """Thirty releases calibrated to ε = 1: the harness's exact re-accounting of each claim."""
    z = calibrate_noise(1.0, 1e-5, 30, accountant)
    assert gaussian_epsilon(1e-5, z / math.sqrt(30)) == pytest.approx(spent, abs=5e-4)


def test_non_private_em_finds_well_separated_components():
    gen = SPEC.build({"components": 3, "iterations": 100})
    ledger = gen.fit(blobs(3000), SCHEMA, Budget(math.inf), seed=1)
    assert ledger.is_non_private
    means = gen.mixture_.means * gen.space_.scale + gen.space_.centre
    for centre in CENTRES:
        assert np.linalg.norm(means - centre, axis=1).min() < 0.2


def test_private_fit_beats_a_single_wide_gaussian_at_large_epsilon():
    test = blobs(1000, seed=9)
    gen = SPEC.build({"components": 3})
    gen.fit(blobs(20_000), SCHEMA, Budget(4.0, 1e-5), seed=2)
    wide = -np.log(2 * math.pi * 2.5**2) - 0.5 * ((test[["x", "y"]].to_numpy() / 2.5) ** 2).sum(1)  # N(0, 2.5²I)
    assert gen.log_prob(test).mean() > wide.mean()


def test_log_prob_is_a_density_in_the_data_scale():
    gen = SPEC.build({})
    gen.fit(blobs(3000), SCHEMA, Budget(2.0, 1e-5), seed=3)
    grid = np.linspace(-12, 12, 601)  # beyond the bounds: noisy components can be wide
    xx, yy = np.meshgrid(grid, grid)
    frame = pd.DataFrame({"x": xx.ravel(), "y": yy.ravel()})
    mass = np.exp(gen.log_prob(frame)).sum() * (grid[1] - grid[0]) ** 2
    assert mass == pytest.approx(1.0, abs=0.02)


def test_fit_and_sample_are_deterministic_under_the_seed():
    a, b = SPEC.build({}), SPEC.build({})
    a.fit(blobs(1000), SCHEMA, Budget(1.0, 1e-5), seed=5)
    b.fit(blobs(1000), SCHEMA, Budget(1.0, 1e-5), seed=5)
    np.testing.assert_array_equal(a.mixture_.means, b.mixture_.means)
    pd.testing.assert_frame_equal(a.sample(50, seed=1), b.sample(50, seed=1))


def test_samples_conform_to_the_schema_with_unmodelled_columns_filled():
    gen = SPEC.build({})
    gen.fit(blobs(1000), SCHEMA, Budget(0.5, 1e-5), seed=0)
    sample = SCHEMA.conform(gen.sample(500, seed=0))
    assert set(sample["tag"].unique()) == {"a", "b"}


def test_mixture_log_prob_matches_scipy():
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(0)
    mix = Mixture(np.array([0.3, 0.7]), rng.standard_normal((2, 3)), np.stack([np.eye(3) * 0.5, np.diag([1.0, 2.0, 0.3])]))
    u = rng.standard_normal((10, 3))
    expected = np.log(sum(w * multivariate_normal(m, c).pdf(u) for w, m, c in zip(mix.weights, mix.means, mix.covariances)))
    np.testing.assert_allclose(mix.log_prob(u), expected, rtol=1e-10)


def test_unknown_accountant_is_refused():
    with pytest.raises(ValueError, match="accountant"):
        SPEC.build({"accountant": "gdp"})
