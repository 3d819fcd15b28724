"""The machinery MST and AIM share: the schema's discrete domain and the way back to values, the
model's marginals read from its junction tree, i.i.d. sampling, and the zCDP budget."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from dpgym import Column, ColumnKind, Schema
from dpgym.plugins.marginal.domain import TableDomain
from dpgym.plugins.marginal.model import ModelMarginals, fitted_from_mbi, mbi  # mbi as configured there (64-bit JAX)
from dpgym.privacy import exponential_mechanism, total_rho, zcdp_epsilon
from tests.plugins.marginal.support import CORRELATED_SCHEMA

GRID_SCHEMA = Schema(
    name="grid",
    columns=(
        Column("money", ColumnKind.INTEGER, min=0, max=99_999, heavy_tailed=True),
        Column("rate", ColumnKind.CONTINUOUS, min=0.0, max=1.0, step=0.01),
        Column("hours", ColumnKind.INTEGER, min=1, max=99, nullable=True),
        Column("weight", ColumnKind.CONTINUOUS, min=-5.0, max=5.0),
        Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green", "blue"), nullable=True),
    ),
)


def test_the_domain_comes_from_the_schema_alone():
    sizes = TableDomain(CORRELATED_SCHEMA, numeric_bins=100).sizes
    # level: 40 integers, one cell each; amount: 100 log1p-spaced bins and a missing cell
    assert sizes == {"group": 4, "echo": 4, "level": 40, "amount": 101, "coin": 2, "label": 2}
    grid = TableDomain(GRID_SCHEMA, numeric_bins=100).sizes
    assert grid["rate"] == 100 and grid["hours"] == 99 + 1 and grid["weight"] == 100 and grid["colour"] == 4
    assert grid["money"] < 100  # log-spaced bins narrower than 1 near 0 hold no integer: dropped


def test_decoded_values_lie_on_the_columns_grid_and_encode_back_into_their_cells():
    domain = TableDomain(GRID_SCHEMA, numeric_bins=100)
    rng = np.random.default_rng(0)
    cells = {name: rng.integers(0, size, 5000) for name, size in domain.sizes.items()}
    values = domain.decode(cells, rng)
    GRID_SCHEMA.validate(values, "decoded values")
    again = domain.encode(GRID_SCHEMA.conform(values))
    assert all(np.array_equal(again[name], cells[name]) for name in cells)
    rate_steps = values["rate"].to_numpy() / 0.01
    assert np.allclose(rate_steps, np.round(rate_steps))
    assert values["hours"].isna().sum() == (cells["hours"] == 99).sum() > 0
    assert values["money"].dtype == np.int64 and values["money"].min() >= 0


def test_every_bin_of_a_grid_column_holds_a_grid_value():
    money = TableDomain(GRID_SCHEMA, numeric_bins=100).attributes["money"]
    assert np.all(np.diff(money.grid_starts) >= 1) and money.grid_starts[-1] == 100_000


def random_model(sizes: dict[str, int], cliques: list[tuple[str, ...]], seed: int = 0) -> mbi.MarkovRandomField:
    domain = mbi.Domain(list(sizes), list(sizes.values()))
    rng = np.random.default_rng(seed)
    tables = {c: mbi.Factor(domain.project(c), rng.normal(0, 1.5, domain.project(c).shape)) for c in cliques}
    potentials = mbi.CliqueVector(domain, cliques, tables)
    return mbi.MarkovRandomField(potentials=potentials, total=500.0,
                                 marginals=mbi.marginal_oracles.message_passing_stable(potentials, 500.0))


# a cycle (its junction tree adds a chord), a pendant attribute, and an attribute in no clique
CYCLE = {"a": 3, "b": 4, "c": 2, "d": 3, "e": 2, "f": 3}, [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("d", "e")]


@pytest.mark.parametrize("attributes", [("a",), ("a", "c"), ("b", "d"), ("c", "e"), ("a", "e", "b"), ("e", "f")])
def test_marginals_from_the_junction_tree_equal_mbi_variable_elimination(attributes):
    model = random_model(*CYCLE)
    exact = np.asarray(mbi.marginal_oracles.variable_elimination(model.potentials, attributes, 500.0).values)
    np.testing.assert_allclose(ModelMarginals(fitted_from_mbi(model)).project(attributes), exact, rtol=1e-9, atol=1e-9)


# a ladder whose separators hold two attributes, so counts passed on keep one and sum the other,
# beside a part that shares no attribute with it
LADDER = ({"a": 3, "b": 2, "c": 4, "d": 3, "e": 2, "f": 3, "g": 2, "h": 3},
          [("a", "b", "c"), ("b", "c", "d"), ("c", "d", "e"), ("e", "f"), ("a", "g"), ("h",)])


@pytest.mark.parametrize("model", [CYCLE, LADDER], ids=["cycle", "ladder"])
def test_many_marginals_at_once_equal_the_whole_joint_tables_sums(model):
    sizes, cliques = model
    fitted = random_model(sizes, cliques, seed=3)
    queries = [*itertools.combinations(sizes, 2), *[(b, a) for a, b in itertools.combinations(sizes, 2)],
               *itertools.combinations(sizes, 1), ("a", "e", "b"), ("f", "a", "e")]
    answers = ModelMarginals(fitted_from_mbi(fitted)).project_many(queries)
    assert list(answers) == queries
    letters = "".join(sizes)  # one-letter attributes: einsum subscripts
    log_joint = np.zeros(tuple(sizes.values()))  # the whole joint table, small here: the exact answers
    for clique in cliques:
        order = sorted(clique, key=letters.index)
        potential = np.einsum(f"{''.join(clique)}->{''.join(order)}", np.asarray(fitted.potentials[clique].values))
        log_joint = log_joint + potential.reshape([sizes[a] if a in clique else 1 for a in letters])
    joint = np.exp(log_joint - log_joint.max())
    joint *= 500.0 / joint.sum()
    for query in queries:
        exact = np.einsum(f"{letters}->{''.join(query)}", joint)
        np.testing.assert_allclose(answers[query], exact, rtol=1e-9, atol=1e-9, err_msg=str(query))


def test_samples_are_iid_draws_from_the_model_and_follow_the_seed():
    marginals = ModelMarginals(fitted_from_mbi(random_model(*CYCLE)))
    rows = marginals.sample(200_000, np.random.default_rng(1))
    counts = pd.crosstab(rows["b"], rows["e"]).to_numpy() / 200_000
    assert np.abs(counts - marginals.project(("b", "e")) / 500.0).max() < 0.01
    again = marginals.sample(1000, np.random.default_rng(2))
    assert all(np.array_equal(again[a], marginals.sample(1000, np.random.default_rng(2))[a]) for a in again)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 8.0])
def test_the_total_rho_converts_back_to_the_budget(epsilon):
    assert zcdp_epsilon(total_rho(epsilon, 1e-5), 1e-5) == pytest.approx(epsilon, rel=1e-9)
    assert math.isinf(total_rho(math.inf, 1e-5))


def test_the_exponential_mechanism_favours_high_scores_and_picks_the_best_at_infinite_epsilon():
    rng = np.random.default_rng(0)
    scores = np.array([0.0, 10.0, 2.0])
    draws = [exponential_mechanism(scores, 1.0, 1.0, rng) for _ in range(2000)]
    assert np.bincount(draws, minlength=3)[1] / 2000 == pytest.approx(1 / (1 + np.exp(-5) + np.exp(-4)), abs=0.02)
    assert exponential_mechanism(scores, math.inf, 1.0, rng) == 1
