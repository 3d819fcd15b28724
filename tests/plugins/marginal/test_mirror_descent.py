"""Private-PGM's mirror descent in numpy: its iterates are `mbi`'s, and a round's estimate stopped at
the convergence tolerance has the marginals of the full 1,000 iterations."""

from __future__ import annotations

import itertools
import math

import mbi
import numpy as np
import pytest

from dpgym import Budget
from dpgym.plugins.datasets import benefits
from dpgym.plugins.generators import mst
from dpgym.plugins.marginal.domain import TableDomain
from dpgym.plugins.marginal.mirror_descent import SummingTree, _into, _project, mirror_descent
from dpgym.plugins.marginal.model import Measurements, ModelMarginals, estimate, marginal_counts, measure, model_domain
from tests.plugins.marginal.support import CORRELATED_SCHEMA

PAIRS = [("group", "echo"), ("echo", "level"), ("level", "amount"), ("amount", "label"), ("group", "coin")]
QUERIES = [*PAIRS, ("group", "label"), ("echo", "amount"), ("coin", "label")]
SIGMA = 20.0


@pytest.fixture(scope="module")
def problem(correlated):
    """The correlated table's noisy 1-way marginals and four noisy 2-way ones, a 1,000-iteration
    estimate from them, and one more noisy 2-way marginal, as an AIM round adds one."""
    table = TableDomain(CORRELATED_SCHEMA, 16)
    cells, sizes = table.encode(correlated), table.sizes
    rng = np.random.default_rng(0)
    measurements = Measurements()
    for name in sizes:
        measurements.add((name,), measure(marginal_counts(cells, sizes, (name,)), SIGMA, rng), SIGMA)
    for pair in PAIRS[:-1]:
        measurements.add(pair, measure(marginal_counts(cells, sizes, pair), SIGMA, rng), SIGMA)
    domain = model_domain(sizes)
    first = estimate(domain, measurements, 1000)
    measurements.add(PAIRS[-1], measure(marginal_counts(cells, sizes, PAIRS[-1]), SIGMA, rng), SIGMA)
    return domain, measurements, first


def max_relative_gap(a, b) -> float:
    """The largest L1 distance between two models' marginals over `QUERIES`, over the total."""
    first, second = ModelMarginals(a), ModelMarginals(b)
    return max(np.abs(first.project(q) - second.project(q)).sum() for q in QUERIES) / a.total


def test_the_first_iterations_are_mbis_up_to_rounding(problem):
    domain, measurements, first = problem
    ours = estimate(domain, measurements, 50, warm_start=first)
    theirs = estimate(domain, measurements, 50, warm_start=first, estimator="mbi")
    assert max_relative_gap(ours, theirs) < 1e-12


def test_a_thousand_iterations_agree_with_mbis(problem):
    """Over 1,000 iterations rounding may flip an Armijo test (accept or halve) near its boundary,
    so the iterates part; both converge to the same optimum."""
    domain, measurements, first = problem
    ours = estimate(domain, measurements, 1000, warm_start=first)
    theirs = estimate(domain, measurements, 1000, warm_start=first, estimator="mbi")
    assert max_relative_gap(ours, theirs) < 1e-4


def test_stopping_at_the_tolerance_keeps_the_full_counts_marginals(problem):
    """At AIM's round_tolerance (1e-4) the estimate stops after 450 of 1,000 iterations here, its
    marginals within 0.0042·N in L1 of the full count's (a total-variation distance of 0.0021)."""
    domain, measurements, first = problem
    linear, total = measurements.linear(), measurements.total()
    full = mirror_descent(domain, linear, total, 1000, first)
    stopped = mirror_descent(domain, linear, total, 1000, first, tolerance=1e-4)
    assert full.iterations == 1000 and stopped.iterations < 1000
    assert max_relative_gap(full, stopped) < 1e-2


def test_a_summing_tree_reads_and_spreads_a_nodes_cliques_as_one_at_a_time_would():
    """A node holding many cliques (as AIM's junction trees do at ε = 4) sums shared attributes out
    once; every clique's table and the node's summed potentials are what summing each alone gives."""
    node = ("a", "b", "c", "d", "e")
    domain = mbi.Domain(node, [8, 8, 8, 8, 8])  # SUMMED_AT_ONCE cells: smaller nodes are read directly
    cliques = [("b", "a"), ("c", "e"), ("a", "d", "e"), ("d",), ("e", "b", "c"), node]
    cliques += [pair for pair in itertools.combinations(node, 2) if pair not in cliques and pair[::-1] not in cliques]
    tree = SummingTree(node, cliques, domain)
    rng = np.random.default_rng(0)
    table = rng.random(domain.shape)
    projected = tree.project(table)
    assert set(projected) == set(cliques)
    for clique in cliques:
        np.testing.assert_allclose(projected[clique], _project(table, node, clique), rtol=1e-12)
    # Shared sums: fewer cells read than one pass over the node per clique it does not equal.
    cells_read = sum(math.prod(domain[a] for a in larger) for larger, _, _ in tree.steps)
    assert cells_read < 0.5 * (len(cliques) - 1) * domain.size()
    potentials = {c: rng.normal(size=tuple(domain[a] for a in c)) for c in cliques}
    expected = sum(np.broadcast_to(_into(potentials[c], c, node), domain.shape) for c in cliques)
    np.testing.assert_allclose(tree.spread(potentials, domain.shape), expected, rtol=1e-12, atol=1e-12)  # sums of O(1) terms
    assert np.array_equal(SummingTree(node, [], domain).spread({}, domain.shape), np.zeros(domain.shape))


def test_a_proposal_whose_tables_all_but_underflow_gives_no_nan_counts():
    """MST on Benefits (seed 0) proposes steps after which a node's table sums to a denormal number;
    scaled to counts, its zeros became NaN (0 × inf). Such tables go through log space instead."""
    split = benefits.SPEC.load()
    with np.errstate(invalid="raise", divide="raise"):
        mst.SPEC.build({}).fit(split.train.copy(), benefits.schema(), Budget(1.0, 1e-5), seed=0)
