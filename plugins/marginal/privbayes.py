"""The model code of `privbayes`, imported only when a cell uses it. The method, its defaults and
where they come from: the docstring of `dpgym.plugins.generators.privbayes`, which holds the spec;
the sensitivities and the neighbouring relation they assume: docs/methods/privbayes.md.

Hand-written in numpy: no maintained library implements PrivBayes as the TODS paper states it
(DataSynthesizer fixes the degree and scores by mutual information under replace-one; dpmm's
`PrivBayes` selects cliques for a Private-PGM model with Gaussian noise), and the method is a few
counts, an exponential mechanism and a Laplace mechanism over the schema's domain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from dpgym import Budget, ExponentialEvent, Guarantee, LaplaceEvent, Ledger, Schema
from dpgym.plugins.marginal.domain import TableDomain
from dpgym.plugins.marginal.draws import inverse_cdf_draws
from dpgym.privacy import exponential_mechanism

# Under add/remove-one-row adjacency, R(X, Π) = ½·Σ|N(x, π) − N(x)·N(π)/N| on counts moves by less
# than 2 (docs/methods/privbayes.md derives it); each noisy joint table moves by 1 in L1.
R_SENSITIVITY = 2.0
COUNT_SENSITIVITY = 1.0


@dataclass(frozen=True)
class Conditional:
    """One attribute given its parents: P(attribute | parents) as a table with one row per joint
    configuration of the parents (in C order over `parents`) and one column per cell."""

    attribute: str
    parents: tuple[str, ...]
    table: np.ndarray


def r_score(joint: np.ndarray) -> float:
    """The TODS paper's R on counts: half the L1 distance between the joint counts of (Π, X) and the
    product of their marginals, scaled to the same total (0 for an empty table)."""
    total = joint.sum()
    if total <= 0:
        return 0.0
    independent = np.outer(joint.sum(axis=1), joint.sum(axis=0)) / total
    return 0.5 * float(np.abs(joint - independent).sum())


def maximal_parent_sets(candidates: tuple[str, ...], sizes: dict[str, int], limit: float) -> list[frozenset[str]]:
    """Every set of `candidates` whose joint domain has at most `limit` cells and that no further
    candidate can join without exceeding it (the TODS paper's Algorithm 5); none when even the empty
    set's single cell exceeds the limit."""

    @lru_cache(maxsize=None)
    def sets(remaining: tuple[str, ...], room: float) -> tuple[frozenset[str], ...]:
        if room < 1:
            return ()
        if not remaining:
            return (frozenset(),)
        first, rest = remaining[0], remaining[1:]
        without = list(sets(rest, room))
        for subset in sets(rest, room / sizes[first]):
            if subset in without:  # not maximal once `first` can join it
                without.remove(subset)
            without.append(subset | {first})
        return tuple(without)

    return list(sets(candidates, float(limit)))


class PrivBayes:
    """A Bayesian network chosen attribute by attribute with the exponential mechanism, its
    conditional distributions from Laplace-noised joint counts, rows drawn ancestrally."""

    def __init__(self, numeric_bins: int, structure_share: float, usefulness: float, max_cells: int):
        if numeric_bins < 1:
            raise ValueError(f"numeric_bins must be ≥ 1, got {numeric_bins}")
        if not 0 < structure_share < 1:
            raise ValueError(f"structure_share must lie in (0, 1), got {structure_share}")
        if usefulness <= 0:
            raise ValueError(f"usefulness must be > 0, got {usefulness}")
        if max_cells < 1:
            raise ValueError(f"max_cells must be ≥ 1, got {max_cells}")
        self.numeric_bins = numeric_bins
        self.structure_share = structure_share
        self.usefulness = usefulness
        self.max_cells = max_cells

    def cell_limit(self, rows: int, columns: int, epsilon: float) -> float:
        """θ-usefulness: a conditional's joint table over (X, Π) may have at most n·ε₂ / (d·θ) cells,
        so that its average count n / cells is at least θ times the Laplace scale d/ε₂ of its noise;
        capped at `max_cells` (what bounds the tables when ε is large or infinite)."""
        conditional_epsilon = (1 - self.structure_share) * epsilon
        return min(float(self.max_cells), rows * conditional_epsilon / (columns * self.usefulness))

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        rng = np.random.default_rng(seed)
        self.domain_ = TableDomain(schema, self.numeric_bins)
        cells = self.domain_.encode(train)
        sizes = self.domain_.sizes
        names = list(sizes)
        private = budget.is_private
        ledger = Ledger(Guarantee.PURE)
        # d − 1 draws share ε₁ = β·ε, d noisy joint tables share ε₂ = (1 − β)·ε; a one-column table has
        # no structure to draw, and its one table takes the whole budget.
        table_share = 1 - self.structure_share if len(names) > 1 else 1.0
        draw_epsilon = self.structure_share * budget.epsilon / max(len(names) - 1, 1)
        table_scale = len(names) / (table_share * budget.epsilon) if private else 0.0
        limit = self.cell_limit(len(train), len(names), budget.epsilon)

        network = self._network(cells, sizes, limit, draw_epsilon, rng, ledger if private else None)
        self.conditionals_ = []
        for position, (attribute, parents) in enumerate(network, 1):
            joint = joint_counts(cells, sizes, parents, attribute)
            if private:
                joint = joint + rng.laplace(0.0, table_scale, joint.shape)
                ledger.record(LaplaceEvent(l1_sensitivity=COUNT_SENSITIVITY, scale=table_scale),
                              description=f"PrivBayes: joint counts of attribute {position} of the network and its parents")
            self.conditionals_.append(Conditional(attribute, parents, conditional_table(joint)))
        if not private:
            return Ledger.non_private(Guarantee.PURE, "PrivBayes: exact network and conditionals (ε = ∞)")
        return ledger

    def _network(self, cells: dict[str, np.ndarray], sizes: dict[str, int], limit: float, epsilon: float,
                 rng: np.random.Generator, ledger: Ledger | None) -> list[tuple[str, tuple[str, ...]]]:
        """The TODS paper's greedy construction: a first attribute drawn uniformly (no data read), then
        each step draws one (attribute, parents) pair among every attribute not yet placed and each of
        its maximal θ-useful parent sets among those placed, ∝ exp(ε·R / (2·ΔR))."""
        names = list(sizes)
        first = names[int(rng.integers(len(names)))]
        network = [(first, ())]
        placed = [first]
        while len(placed) < len(names):
            pairs = []
            for attribute in names:
                if attribute in placed:
                    continue
                parent_sets = maximal_parent_sets(tuple(placed), sizes, limit / sizes[attribute]) or [frozenset()]
                pairs.extend((attribute, tuple(a for a in placed if a in parents)) for parents in parent_sets)
            scores = np.array([r_score(joint_counts(cells, sizes, parents, attribute)) if parents else 0.0
                               for attribute, parents in pairs])
            attribute, parents = pairs[exponential_mechanism(scores, epsilon, R_SENSITIVITY, rng)]
            if ledger is not None:
                ledger.record(ExponentialEvent(inverse_temperature=epsilon / (2 * R_SENSITIVITY),
                                               utility_sensitivity=R_SENSITIVITY),
                              description=f"PrivBayes: attribute {len(placed) + 1} of the network and its parents")
            network.append((attribute, parents))
            placed.append(attribute)
        return network

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        sizes = self.domain_.sizes
        drawn: dict[str, np.ndarray] = {}
        for conditional in self.conditionals_:
            parents = conditional.parents
            row = (np.ravel_multi_index([drawn[p] for p in parents], [sizes[p] for p in parents]) if parents
                   else np.zeros(n, dtype=np.int64))
            drawn[conditional.attribute] = inverse_cdf_draws(conditional.table, row, rng)
        return self.domain_.decode(drawn, rng)


def joint_counts(cells: dict[str, np.ndarray], sizes: dict[str, int], parents: tuple[str, ...],
                 attribute: str) -> np.ndarray:
    """The counts over (parents, attribute): one row per joint configuration of the parents (C order),
    one column per cell of the attribute."""
    shape = [sizes[a] for a in (*parents, attribute)]
    flat = np.ravel_multi_index([cells[a] for a in (*parents, attribute)], shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(float).reshape(-1, sizes[attribute])


def conditional_table(joint: np.ndarray) -> np.ndarray:
    """P(X | π) from noisy joint counts (post-processing): negative counts clipped to 0, each parent
    configuration's row normalised; a row left with no mass takes X's distribution over all rows (and
    uniform if that too is empty)."""
    clipped = np.clip(joint, 0.0, None)
    marginal = clipped.sum(axis=0)
    marginal = marginal / marginal.sum() if marginal.sum() > 0 else np.full(joint.shape[1], 1.0 / joint.shape[1])
    totals = clipped.sum(axis=1, keepdims=True)
    return np.where(totals > 0, clipped / np.where(totals > 0, totals, 1.0), marginal)
