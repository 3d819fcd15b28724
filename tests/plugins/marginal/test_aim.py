"""AIM: its rounds' budgets add up to the cell's, its candidates and their weights, the model-size
limit, reproducibility, and a model of the dependence that `independent` lacks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpgym import Budget
from dpgym.plugins.datasets import adult
from dpgym.plugins.generators import aim
from dpgym.plugins.marginal.domain import TableDomain
from dpgym.plugins.marginal.model import Measurements, estimate, marginal_counts, model_domain, model_size_mb
from dpgym.privacy import total_rho
from dpgym.privacy.reaccount import reaccount
from tests.plugins.marginal.support import (
    CORRELATED_SCHEMA,
    correlated_table,
    entry_rho,
    fidelity_beside_independent,
    kendall_gap,
)

PARAMS = {"numeric_bins": 16, "rounds_per_column": 4, "estimation_iters": 200}
BUDGET = Budget(1.0, 1e-5)


@pytest.fixture(scope="module")
def fitted(correlated):
    generator = aim.SPEC.build(PARAMS)
    return generator, generator.fit(correlated, CORRELATED_SCHEMA, BUDGET, seed=0)


def test_the_rounds_spend_exactly_the_cells_budget(fitted):
    _, ledger = fitted
    checked = reaccount(ledger, BUDGET)
    assert checked.verdict == "ok" and checked.epsilon == pytest.approx(BUDGET.epsilon, rel=1e-6)
    assert ledger.epsilon == pytest.approx(checked.epsilon, rel=1e-9)
    d = len(CORRELATED_SCHEMA.columns)
    oneway, rounds = ledger.entries[:d], ledger.entries[d:]
    assert [e.type for e in oneway] == ["gaussian"] * d
    assert [e.type for e in rounds] == ["exponential", "gaussian"] * (len(rounds) // 2)
    assert sum(entry_rho(e) for e in ledger.entries) == pytest.approx(total_rho(1.0, 1e-5), rel=1e-9)
    # every round, the last too, measures with 9 parts of its budget to 1 for selecting (α = 0.9)
    for selection, measurement in zip(rounds[::2], rounds[1::2]):
        assert entry_rho(measurement) / (entry_rho(measurement) + entry_rho(selection)) == pytest.approx(0.9)


def test_annealing_only_halves_the_noise_before_the_last_round(fitted):
    _, ledger = fitted
    sigmas = [e.event.sigma for e in ledger.entries if e.type == "gaussian"]
    ratios = [before / after for before, after in zip(sigmas[:-2], sigmas[1:-1])]
    assert all(r == pytest.approx(1.0) or r == pytest.approx(2.0) for r in ratios)
    assert any(r == pytest.approx(2.0) for r in ratios)  # on this table the model stalls at the first σ


def test_candidates_are_the_workloads_downward_closure_weighted_by_overlap():
    generator = aim.SPEC.build({**PARAMS, "max_cells": 100})
    candidates = generator.candidates({"a": 5, "b": 5, "c": 5, "big": 200})
    # workload: the pairs of at most 100 cells, (a, b), (a, c), (b, c); 'big' is in none, but its
    # 1-way marginal is measured first like every column's
    assert candidates == {("a",): 2.0, ("b",): 2.0, ("c",): 2.0, ("big",): 0.0,
                          ("a", "b"): 4.0, ("a", "c"): 4.0, ("b", "c"): 4.0}


def test_the_size_limit_keeps_candidates_the_model_holds_and_those_that_fit():
    generator = aim.SPEC.build(PARAMS)
    sizes = {"a": 4, "b": 40, "c": 17}
    rng = np.random.default_rng(0)
    cells = {name: rng.integers(0, size, 300) for name, size in sizes.items()}
    measurements = Measurements()
    for clique in [("a",), ("b",), ("c",), ("a", "b")]:
        measurements.add(clique, marginal_counts(cells, sizes, clique), 1.0)
    domain = model_domain(sizes)
    model = estimate(domain, measurements, 20)
    candidates = {("a", "b"): 1.0, ("b", "c"): 1.0, ("a", "c"): 1.0, ("a",): 1.0}
    tiny = 200 * 8 / 2**20  # MB: room for the a–b table (160 cells) but not for another one beside it
    assert generator.within_size_limit(candidates, model, domain, tiny) == {("a", "b"): 1.0, ("a",): 1.0}
    assert generator.within_size_limit(candidates, model, domain, 1.0) == candidates


def test_the_model_size_is_mbis_junction_tree_size():
    """The size the limit is checked against equals `mbi`'s own, over clique sets like AIM's (every
    1-way marginal or most of them, pairs, a few triples) on Adult's domain at the default bins."""
    from mbi.junction_tree import hypothetical_model_size  # after dpgym's model module set JAX up for mbi

    sizes = TableDomain(adult.schema(), 100).sizes
    domain, names = model_domain(sizes), list(sizes)
    rng = np.random.default_rng(0)
    for _ in range(100):
        cliques = [(a,) for a in names if rng.random() < 0.9]
        cliques += [tuple(rng.choice(names, int(rng.integers(2, 4)), replace=False)) for _ in range(rng.integers(0, 30))]
        assert model_size_mb(domain, cliques) == hypothetical_model_size(domain, cliques), cliques


@pytest.mark.slow
def test_the_same_seeds_give_the_same_rows(fitted, correlated):
    generator, _ = fitted
    again = aim.SPEC.build(PARAMS)
    again.fit(correlated, CORRELATED_SCHEMA, BUDGET, seed=0)
    first = generator.sample(500, seed=3)
    pd.testing.assert_frame_equal(first, again.sample(500, seed=3))
    CORRELATED_SCHEMA.validate(first, "AIM samples")
    assert not generator.sample(500, seed=4).equals(first)


@pytest.mark.slow
def test_other_rows_give_another_model_on_the_same_domain(fitted):
    generator, _ = fitted
    other = aim.SPEC.build(PARAMS)
    other.fit(correlated_table(rows=500, seed=7), CORRELATED_SCHEMA, BUDGET, seed=0)
    assert other.domain_.sizes == generator.domain_.sizes
    assert not other.sample(500, seed=3).equals(generator.sample(500, seed=3))


def test_aim_models_the_dependence_independent_misses(fitted, correlated):
    scores = fidelity_beside_independent(fitted[0], correlated)
    assert scores["generator"].values["kendall_rmse"] < 0.75 * scores["independent"].values["kendall_rmse"]
    assert scores["generator"].values["marginal_tvd"] < 0.05
    # `echo` copies `group`: a dependence AIM measures, and `independent` loses (they are independent given the label)
    assert kendall_gap(scores["generator"], "group|echo") < 0.2 < kendall_gap(scores["independent"], "group|echo")


@pytest.mark.slow
def test_a_non_private_run_measures_exact_marginals_for_the_planned_rounds(correlated):
    generator = aim.SPEC.build({**PARAMS, "rounds_per_column": 1})
    ledger = generator.fit(correlated, CORRELATED_SCHEMA, Budget(math.inf, 1e-5), seed=0)
    assert ledger.is_non_private
    CORRELATED_SCHEMA.validate(generator.sample(200, seed=1), "AIM samples at ε = ∞")


# A fit in a fresh interpreter: Python salts string hashing per process (PYTHONHASHSEED), so anything
# that iterates a set of column names differs between processes, never within one.
FIT_IN_A_PROCESS = """
import hashlib
from dpgym import Budget
from dpgym.plugins.generators import aim
from tests.plugins.marginal.support import CORRELATED_SCHEMA, correlated_table
generator = aim.SPEC.build({"numeric_bins": 8, "rounds_per_column": 2, "estimation_iters": 50})
generator.fit(correlated_table(1000), CORRELATED_SCHEMA, Budget(1.0, 1e-5), seed=0)
print(hashlib.sha256(generator.sample(300, seed=1).to_csv().encode()).hexdigest())
"""


@pytest.mark.slow
def test_a_seed_gives_the_same_rows_whatever_the_processs_string_hashing():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    digests = {subprocess.run([sys.executable, "-c", FIT_IN_A_PROCESS], capture_output=True, text=True, check=True,
                              cwd=root, env={**os.environ, "PYTHONHASHSEED": str(salt)}, timeout=600).stdout
               for salt in (1, 2, 3)}
    assert len(digests) == 1
