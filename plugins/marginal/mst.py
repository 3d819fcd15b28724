"""The model code of `mst`, imported only when a cell uses it. The method, its defaults and where
they come from: the docstring of `dpgym.plugins.generators.mst`, which holds the spec."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from dpgym.plugins.marginal.generator import MarginalGenerator
from dpgym.plugins.marginal.model import (
    Clique, Measurements, ModelMarginals, estimate, linear_measurement, marginal_counts, measure, model_domain,
)
from dpgym.privacy import ZcdpLedger, exponential_mechanism, gaussian_sigma, selection_epsilon

if TYPE_CHECKING:
    import mbi

# A value whose noisy 1-way count is below this many noise deviations is merged with the column's
# other rare values (the MST paper's domain compression).
RARE_VALUE_DEVIATIONS = 3.0


@dataclass(frozen=True)
class MergedValues:
    """One column's cells in the model: the kept cells in order, then one cell for all rare ones."""

    kept: np.ndarray
    rare: np.ndarray

    @property
    def mapping(self) -> np.ndarray:
        """The model's cell of each of the column's cells."""
        mapping = np.full(len(self.kept) + len(self.rare), len(self.kept))
        mapping[self.kept] = np.arange(len(self.kept))
        return mapping

    def expand(self, model_cells: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The column's cells of the model's: the merged cell becomes one rare cell, drawn uniformly."""
        cells = np.empty(len(model_cells), dtype=np.int64)
        merged = model_cells == len(self.kept)
        cells[~merged] = self.kept[model_cells[~merged]]
        cells[merged] = rng.choice(self.rare, size=int(merged.sum()))
        return cells


class MST(MarginalGenerator):
    """1-way marginals, a spanning tree of 2-way ones drawn by the exponential mechanism, their
    2-way marginals: a third of ρ each."""

    method = "MST"

    def __init__(self, numeric_bins: int, estimation_iters: int, selection_iters: int):
        super().__init__(numeric_bins, estimation_iters)
        if selection_iters < 1:
            raise ValueError(f"selection_iters must be ≥ 1, got {selection_iters}")
        self.selection_iters = selection_iters

    def _fit_model(self, cells: dict[str, np.ndarray], rho: float, ledger: ZcdpLedger,
                   rng: np.random.Generator) -> ModelMarginals:
        sizes = self.domain_.sizes
        names = list(sizes)
        # One third each for the 1-way marginals, the tree's selection and its 2-way marginals; a
        # one-column table has no tree, and its one marginal takes the whole budget.
        phase_rho = rho / 3 if len(names) > 1 else rho

        oneway_sigma = gaussian_sigma(phase_rho / len(names))  # the d marginals share the phase equally
        oneway = []
        for name in names:
            noisy = measure(marginal_counts(cells, sizes, (name,)), oneway_sigma, rng)
            ledger.measurement(oneway_sigma, f"MST: 1-way marginal of {name!r}")
            self._released((name,), noisy, oneway_sigma)
            oneway.append(linear_measurement((name,), noisy, oneway_sigma))
        total = Measurements(fixed=oneway).total()

        self.merged_ = {}
        for measurement in oneway:
            kept = measurement.noisy_measurement >= RARE_VALUE_DEVIATIONS * oneway_sigma
            if not kept.all():
                self.merged_[measurement.clique[0]] = MergedValues(np.flatnonzero(kept), np.flatnonzero(~kept))
        mappings = {name: merged.mapping for name, merged in self.merged_.items()}
        domain = model_domain({name: int(mappings[name].max()) + 1 if name in mappings else size
                               for name, size in sizes.items()})
        cells = {name: mappings[name][c] if name in mappings else c for name, c in cells.items()}
        measurements = Measurements(fixed=[m.compress(mappings, model_domain(sizes)) for m in oneway])

        if len(names) > 1:
            edges = self._spanning_tree(cells, domain, measurements, total, phase_rho, ledger, rng)
            edge_sigma = gaussian_sigma(phase_rho / len(edges))
            for edge in edges:
                noisy = measure(marginal_counts(cells, domain.config, edge), edge_sigma, rng)
                measurements.add(edge, noisy, edge_sigma)
                ledger.measurement(edge_sigma, "MST: 2-way marginal of a selected tree edge")
                self._released(edge, noisy, edge_sigma, mappings)
        return ModelMarginals(estimate(domain, measurements, self.estimation_iters, total))

    def _spanning_tree(self, cells: dict[str, np.ndarray], domain: mbi.Domain, oneway: Measurements, total: float,
                       rho: float, ledger: ZcdpLedger, rng: np.random.Generator) -> list[Clique]:
        """Kruskal's algorithm with each edge drawn by the exponential mechanism: the d − 1 draws share
        ρ, and an edge's score is how far, in L1, the model of the 1-way marginals alone (columns
        independent) is from the edge's 2-way marginal; one row moves that by at most 1."""
        independent = ModelMarginals(estimate(domain, oneway, self.selection_iters, total))
        pairs = list(itertools.combinations(domain.attributes, 2))
        errors = np.array([np.abs(marginal_counts(cells, domain.config, pair) - independent.project(pair).ravel()).sum()
                           for pair in pairs])
        draws = len(domain.attributes) - 1
        epsilon = selection_epsilon(rho / draws)
        components = nx.utils.UnionFind(domain.attributes)
        edges = []
        for _ in range(draws):
            open_pairs = [i for i, (a, b) in enumerate(pairs) if components[a] != components[b]]
            edge = pairs[open_pairs[exponential_mechanism(errors[open_pairs], epsilon, 1.0, rng)]]
            ledger.selection(epsilon, 1.0, "MST: one edge of the spanning tree")
            components.union(*edge)
            edges.append(edge)
        return edges

    def _to_domain_cells(self, model_cells: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {name: self.merged_[name].expand(c, rng) if name in self.merged_ else c
                for name, c in model_cells.items()}
