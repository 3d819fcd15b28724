"""MST: its budget in thirds and its ledger, the schema-only domain, reproducibility, and a model of
the dependence that `independent` lacks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpgym import Budget
from dpgym.plugins.generators import mst
from dpgym.privacy import total_rho
from dpgym.privacy.reaccount import reaccount
from tests.plugins.marginal.support import (
    CORRELATED_SCHEMA,
    correlated_table,
    entry_rho,
    fidelity_beside_independent,
    kendall_gap,
)

# Few bins: with 100, most of `amount`'s bins hold fewer rows than 3σ at ε = 1, and MST merges them
# into one cell, decoded uniformly over its values.
PARAMS = {"numeric_bins": 16, "estimation_iters": 500, "selection_iters": 200}
BUDGET = Budget(1.0, 1e-5)


@pytest.fixture(scope="module")
def fitted(correlated):
    generator = mst.SPEC.build(PARAMS)
    return generator, generator.fit(correlated, CORRELATED_SCHEMA, BUDGET, seed=0)


def test_the_ledger_spends_the_cells_epsilon_in_three_equal_parts(fitted):
    _, ledger = fitted
    checked = reaccount(ledger, BUDGET)
    assert checked.verdict == "ok" and checked.epsilon == pytest.approx(BUDGET.epsilon, rel=1e-6)
    assert ledger.epsilon == pytest.approx(checked.epsilon, rel=1e-9)
    d = len(CORRELATED_SCHEMA.columns)
    kinds = [e.type for e in ledger.entries]
    assert kinds == ["gaussian"] * d + ["exponential"] * (d - 1) + ["gaussian"] * (d - 1)
    phases = [ledger.entries[:d], ledger.entries[d:2 * d - 1], ledger.entries[2 * d - 1:]]
    for phase in phases:  # 1-way marginals, the tree's edges drawn, its 2-way marginals
        assert sum(entry_rho(e) for e in phase) == pytest.approx(total_rho(1.0, 1e-5) / 3, rel=1e-9)
    assert all(e.event.utility_sensitivity == 1.0 for e in phases[1])


def test_the_domain_and_the_ledger_do_not_depend_on_the_rows(fitted):
    generator, ledger = fitted
    other = mst.SPEC.build(PARAMS)
    other_ledger = other.fit(correlated_table(rows=500, seed=7), CORRELATED_SCHEMA, BUDGET, seed=0)
    assert other.domain_.sizes == generator.domain_.sizes
    assert all(np.array_equal(a.kept_bins, b.kept_bins)
               for a, b in zip(other.domain_.attributes.values(), generator.domain_.attributes.values()))
    assert other_ledger.to_dict() == ledger.to_dict()
    # but the model does read the rows
    assert not other.sample(300, seed=1).equals(generator.sample(300, seed=1))


def test_the_same_seeds_give_the_same_rows_and_samples_stay_in_the_schema(fitted, correlated):
    generator, _ = fitted
    again = mst.SPEC.build(PARAMS)
    again.fit(correlated, CORRELATED_SCHEMA, BUDGET, seed=0)
    first, second = generator.sample(500, seed=3), again.sample(500, seed=3)
    pd.testing.assert_frame_equal(first, second)
    CORRELATED_SCHEMA.validate(first, "MST samples")
    assert not generator.sample(500, seed=4).equals(first)


def test_mst_models_the_dependence_independent_misses(fitted, correlated):
    scores = fidelity_beside_independent(fitted[0], correlated)
    assert scores["generator"].values["kendall_rmse"] < 0.75 * scores["independent"].values["kendall_rmse"]
    assert scores["generator"].values["marginal_tvd"] < 0.05
    # `echo` copies `group`: a dependence MST measures, and `independent` loses (they are independent given the label)
    assert kendall_gap(scores["generator"], "group|echo") < 0.2 < kendall_gap(scores["independent"], "group|echo")


def test_a_non_private_run_measures_exact_marginals(correlated):
    generator = mst.SPEC.build(PARAMS)
    ledger = generator.fit(correlated, CORRELATED_SCHEMA, Budget(math.inf, 1e-5), seed=0)
    assert ledger.is_non_private and not generator.merged_
    CORRELATED_SCHEMA.validate(generator.sample(200, seed=1), "MST samples at ε = ∞")
