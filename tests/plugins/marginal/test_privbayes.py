"""PrivBayes: its pure ledger split β / 1 − β, the sensitivity of its score, θ-useful parent sets,
the schema-only domain, reproducibility, and a model of the dependence `independent` lacks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpgym import Budget
from dpgym.plugins.generators import privbayes
from dpgym.plugins.marginal.privbayes import R_SENSITIVITY, maximal_parent_sets, r_score
from dpgym.privacy.reaccount import reaccount
from tests.plugins.marginal.support import (
    CORRELATED_SCHEMA,
    correlated_table,
    fidelity_beside_independent,
    kendall_gap,
)

PARAMS = {"numeric_bins": 16}
BUDGET = Budget(1.0, 1e-5)


@pytest.fixture(scope="module")
def fitted(correlated):
    generator = privbayes.SPEC.build(PARAMS)
    return generator, generator.fit(correlated, CORRELATED_SCHEMA, BUDGET, seed=0)


def test_the_ledger_is_pure_and_spends_three_tenths_on_the_structure(fitted):
    _, ledger = fitted
    checked = reaccount(ledger, BUDGET)
    assert checked.verdict == "ok" and checked.accountant == "pure composition"
    assert ledger.epsilon == pytest.approx(1.0, rel=1e-12) and ledger.delta == 0
    d = len(CORRELATED_SCHEMA.columns)
    assert [e.type for e in ledger.entries] == ["exponential"] * (d - 1) + ["laplace"] * d
    assert sum(e.epsilon for e in ledger.entries[:d - 1]) == pytest.approx(0.3, rel=1e-12)
    assert sum(e.epsilon for e in ledger.entries[d - 1:]) == pytest.approx(0.7, rel=1e-12)
    assert all(e.event.utility_sensitivity == R_SENSITIVITY for e in ledger.entries[:d - 1])
    assert all(e.event.l1_sensitivity == 1.0 and e.event.scale == pytest.approx(d / 0.7) for e in ledger.entries[d - 1:])


def test_r_moves_by_less_than_its_sensitivity_when_a_row_is_added_or_removed():
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(2000):
        shape = tuple(rng.integers(1, 6, 2))
        joint = rng.integers(0, rng.integers(1, 30), shape).astype(float)
        if rng.random() < 0.3:  # an exactly independent table: the case that comes closest to the bound
            joint = np.outer(rng.integers(0, 5, shape[0]), rng.integers(0, 5, shape[1])).astype(float)
        cell = tuple(rng.integers(0, s) for s in shape)
        added = joint.copy()
        added[cell] += 1
        worst = max(worst, abs(r_score(added) - r_score(joint)))
    assert worst < R_SENSITIVITY
    # an independent table and a row in a new row and column of it: R moves by nearly 2
    joint = np.zeros((3, 3))
    joint[:2, :2] = 1000
    added = joint.copy()
    added[2, 2] += 1
    assert 1.99 < r_score(added) - r_score(joint) < R_SENSITIVITY


def test_parent_sets_are_the_maximal_ones_within_the_cell_limit():
    sizes = {"a": 2, "b": 3, "c": 10}
    found = {frozenset(s) for s in maximal_parent_sets(("a", "b", "c"), sizes, 10)}
    assert found == {frozenset({"a", "b"}), frozenset({"c"})}
    assert maximal_parent_sets(("a", "b"), sizes, 0.5) == []  # not even the empty set fits
    assert maximal_parent_sets((), sizes, 5) == [frozenset()]


def test_theta_usefulness_bounds_each_conditional_table(fitted, correlated):
    generator, _ = fitted
    sizes = generator.domain_.sizes
    limit = generator.cell_limit(len(correlated), len(sizes), 1.0)
    assert limit == pytest.approx(len(correlated) * 0.7 / (len(sizes) * 4))
    for conditional in generator.conditionals_:
        if conditional.parents:
            assert conditional.table.size <= limit
        assert np.allclose(conditional.table.sum(axis=1), 1.0)


def test_the_domain_and_the_ledger_do_not_depend_on_the_rows(fitted):
    generator, ledger = fitted
    other = privbayes.SPEC.build(PARAMS)
    other_ledger = other.fit(correlated_table(rows=500, seed=7), CORRELATED_SCHEMA, BUDGET, seed=0)
    assert other.domain_.sizes == generator.domain_.sizes
    assert other_ledger.to_dict() == ledger.to_dict()
    assert not other.sample(300, seed=1).equals(generator.sample(300, seed=1))


def test_the_same_seeds_give_the_same_rows_and_samples_stay_in_the_schema(fitted, correlated):
    generator, _ = fitted
    again = privbayes.SPEC.build(PARAMS)
    again.fit(correlated, CORRELATED_SCHEMA, BUDGET, seed=0)
    first, second = generator.sample(500, seed=3), again.sample(500, seed=3)
    pd.testing.assert_frame_equal(first, second)
    CORRELATED_SCHEMA.validate(first, "PrivBayes samples")
    assert not generator.sample(500, seed=4).equals(first)


def test_privbayes_models_the_dependence_independent_misses(fitted, correlated):
    scores = fidelity_beside_independent(fitted[0], correlated)
    assert scores["generator"].values["kendall_rmse"] < 0.75 * scores["independent"].values["kendall_rmse"]
    assert scores["generator"].values["marginal_tvd"] < 0.08
    assert kendall_gap(scores["generator"], "group|echo") < 0.2 < kendall_gap(scores["independent"], "group|echo")


def test_a_non_private_run_uses_exact_counts(correlated):
    generator = privbayes.SPEC.build(PARAMS)
    ledger = generator.fit(correlated, CORRELATED_SCHEMA, Budget(math.inf, 1e-5), seed=0)
    assert ledger.is_non_private
    assert all(c.table.size <= privbayes.DEFAULTS["max_cells"] for c in generator.conditionals_)
    CORRELATED_SCHEMA.validate(generator.sample(200, seed=1), "PrivBayes samples at ε = ∞")
