"""PrivSyn: its Gaussian ledger under exact composition and the paper's budget split, InDif's
sensitivity, DenseMarg, consistency, GUM, reproducibility, and a model of the dependence
`independent` lacks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from dpgym import Budget
from dpgym.plugins.generators import privsyn
from dpgym.plugins.marginal.privsyn import (
    INDIF_SENSITIVITY, NoisyMarginal, combine, dense_marg, gum, indif, make_consistent, norm_sub,
)
from dpgym.privacy import calibrate_gaussian
from dpgym.privacy.reaccount import EXACT_GAUSSIAN, reaccount
from tests.plugins.marginal.support import (
    CORRELATED_SCHEMA,
    correlated_table,
    fidelity_beside_independent,
    kendall_gap,
)

PARAMS = {"numeric_bins": 16, "update_rounds": 20}
BUDGET = Budget(1.0, 1e-5)


@pytest.fixture(scope="module")
def fitted(correlated):
    generator = privsyn.SPEC.build(PARAMS)
    return generator, generator.fit(correlated, CORRELATED_SCHEMA, BUDGET, seed=0)


def mu_squared(entry) -> float:
    return (entry.event.l2_sensitivity / entry.event.sigma) ** 2


def test_the_ledger_composes_exactly_and_splits_the_budget_as_the_paper(fitted):
    generator, ledger = fitted
    checked = reaccount(ledger, BUDGET)
    assert checked.verdict == "ok" and checked.accountant == EXACT_GAUSSIAN
    assert ledger.composition == "gdp" and ledger.epsilon == pytest.approx(1.0, rel=1e-6)
    assert all(e.type == "gaussian" for e in ledger.entries)
    total = calibrate_gaussian(1.0, 1e-5) ** -2  # μ² of the whole budget
    d = len(CORRELATED_SCHEMA.columns)
    indif_entry, oneway, selected = ledger.entries[0], ledger.entries[1:1 + d], ledger.entries[1 + d:]
    assert indif_entry.event.l2_sensitivity == pytest.approx(INDIF_SENSITIVITY * math.sqrt(d * (d - 1) / 2))
    assert mu_squared(indif_entry) == pytest.approx(0.1 * total)
    assert sum(mu_squared(e) for e in oneway) == pytest.approx(0.1 * total)
    assert sum(mu_squared(e) for e in selected) == pytest.approx(0.8 * total)
    # the selected marginals' shares grow as their cells to the power 2/3
    cells = [m.cells for m in generator.marginals_[d:]]
    ratios = [mu_squared(e) / c ** (2 / 3) for e, c in zip(selected, cells)]
    assert np.allclose(ratios, ratios[0])


def test_indif_moves_by_less_than_four_when_a_row_is_added():
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(2000):
        shape = tuple(rng.integers(1, 6, 2))
        joint = rng.integers(0, rng.integers(1, 30), shape).astype(float)
        added = joint.copy()
        added[tuple(rng.integers(0, s) for s in shape)] += 1
        worst = max(worst, abs(indif(added) - indif(joint)))
    assert worst < INDIF_SENSITIVITY


def test_dense_marg_keeps_strong_pairs_and_drops_weak_ones():
    pairs = [("a", "b"), ("a", "c"), ("b", "c")]
    chosen = dense_marg(pairs, np.array([5000.0, 3.0, -10.0]), np.array([4.0, 4.0, 4.0]), rho=0.5)
    assert chosen == [("a", "b")]
    assert dense_marg(pairs, np.array([5000.0, 3.0, 1.0]), np.array([4.0, 4.0, 4.0]), rho=math.inf) == pairs


def test_pairs_forming_a_small_clique_are_combined():
    sizes = {"a": 2, "b": 2, "c": 2, "d": 100}
    combined = combine([("a", "b"), ("a", "c"), ("b", "c"), ("c", "d")], sizes, max_cells=5000)
    assert combined == [("a", "b", "c"), ("c", "d")]
    assert combine([("a", "b"), ("a", "c"), ("b", "c")], sizes, max_cells=8) == [("a", "b"), ("a", "c"), ("b", "c")]


def test_norm_sub_keeps_the_total_and_makes_counts_non_negative():
    counts = np.array([10.0, -3.0, 4.0, 1.0])
    fixed = norm_sub(counts, 12.0)
    assert fixed.min() >= 0 and fixed.sum() == pytest.approx(12.0)
    assert fixed[0] - fixed[2] == pytest.approx(6.0)  # the positive cells lose one common amount


def test_consistent_marginals_agree_on_shared_attributes():
    rng = np.random.default_rng(2)
    sizes = {"a": 3, "b": 4, "c": 2}
    marginals = [NoisyMarginal(clique, rng.normal(50, 20, [sizes[x] for x in clique]), 3.0)
                 for clique in [("a",), ("b",), ("c",), ("a", "b"), ("b", "c")]]
    make_consistent(marginals, sizes, 501)
    totals = [m.counts.sum() for m in marginals]
    assert np.allclose(totals, totals[0]) and all(m.counts.min() >= 0 for m in marginals)
    for attribute in sizes:
        projections = [m.projection(attribute) for m in marginals if attribute in m.attributes]
        assert all(np.abs(p - projections[0]).max() < 1.0 for p in projections)


def test_gum_moves_records_towards_the_marginals():
    sizes = {"a": 2, "b": 2}
    target = np.array([[40.0, 10.0], [10.0, 40.0]])  # a and b agree four times in five
    marginals = [NoisyMarginal(("a",), target.sum(axis=1), 1.0), NoisyMarginal(("b",), target.sum(axis=0), 1.0),
                 NoisyMarginal(("a", "b"), target, 1.0)]
    rng = np.random.default_rng(3)
    start = gum(marginals, sizes, 1000, 0, 1.0, rng)
    records = gum(marginals, sizes, 1000, 20, 1.0, rng)
    agree = lambda r: float(np.mean(r[:, 0] == r[:, 1]))  # noqa: E731
    assert abs(agree(start) - 0.5) < 0.06 and abs(agree(records) - 0.8) < 0.03
    assert np.bincount(records[:, 0], minlength=2) == pytest.approx([500, 500], abs=30)


def test_the_domain_does_not_depend_on_the_rows_and_seeds_reproduce(fitted, correlated):
    generator, _ = fitted
    other = privsyn.SPEC.build(PARAMS)
    other.fit(correlated_table(rows=500, seed=7), CORRELATED_SCHEMA, BUDGET, seed=0)
    assert other.domain_.sizes == generator.domain_.sizes
    again = privsyn.SPEC.build(PARAMS)
    again.fit(correlated, CORRELATED_SCHEMA, BUDGET, seed=0)
    first, second = generator.sample(500, seed=3), again.sample(500, seed=3)
    pd.testing.assert_frame_equal(first, second)
    CORRELATED_SCHEMA.validate(first, "PrivSyn samples")
    assert not generator.sample(500, seed=4).equals(first)


def test_privsyn_models_the_dependence_independent_misses(fitted, correlated):
    scores = fidelity_beside_independent(fitted[0], correlated)
    assert scores["generator"].values["kendall_rmse"] < 0.5 * scores["independent"].values["kendall_rmse"]
    assert scores["generator"].values["marginal_tvd"] < 0.05
    assert kendall_gap(scores["generator"], "group|echo") < 0.1 < kendall_gap(scores["independent"], "group|echo")


def test_a_non_private_run_measures_every_pair_exactly(correlated):
    generator = privsyn.SPEC.build(PARAMS)
    ledger = generator.fit(correlated, CORRELATED_SCHEMA, Budget(math.inf, 1e-5), seed=0)
    assert ledger.is_non_private
    measured = {frozenset(p) for m in generator.marginals_ for p in itertools.combinations(m.attributes, 2)}
    assert len(measured) == math.comb(len(CORRELATED_SCHEMA.columns), 2)
    CORRELATED_SCHEMA.validate(generator.sample(200, seed=1), "PrivSyn samples at ε = ∞")
