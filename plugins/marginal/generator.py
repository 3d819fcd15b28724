"""What MST and AIM share around their mechanisms: the schema's discrete domain, the budget in
zCDP, the ledger, and sampling from the fitted model."""

from __future__ import annotations

import numpy as np
import pandas as pd

from functools import partial

from dpgym import Budget, Ledger, Measurement, Release, Schema
from dpgym.plugins.marginal.domain import TableDomain
from dpgym.plugins.marginal.model import Clique, ModelMarginals, marginal_counts
from dpgym.privacy import ZcdpLedger, total_rho


class MarginalGenerator:
    """A select–measure–generate generator: `_fit_model` runs the method's mechanisms on the encoded
    rows within ρ, records each in the ledger, and returns the fitted model's marginals."""

    method = ""

    def __init__(self, numeric_bins: int, estimation_iters: int):
        if numeric_bins < 1:
            raise ValueError(f"numeric_bins must be ≥ 1, got {numeric_bins}")
        if estimation_iters < 1:
            raise ValueError(f"estimation_iters must be ≥ 1, got {estimation_iters}")
        self.numeric_bins = numeric_bins
        self.estimation_iters = estimation_iters

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        rng = np.random.default_rng(seed)
        self.domain_ = TableDomain(schema, self.numeric_bins)
        ledger = ZcdpLedger(budget, self.method)
        rho = total_rho(budget.epsilon, budget.delta)
        self.released_: list[tuple[Clique, np.ndarray, float, dict[str, np.ndarray]]] = []
        self.marginals_ = self._fit_model(self.domain_.encode(train), rho, ledger, rng)
        return ledger.claimed()

    def _fit_model(self, cells: dict[str, np.ndarray], rho: float, ledger: ZcdpLedger,
                   rng: np.random.Generator) -> ModelMarginals:
        raise NotImplementedError

    def _released(self, clique: Clique, noisy: np.ndarray, sigma: float,
                  mappings: dict[str, np.ndarray] | None = None) -> None:
        """Keeps a noisy marginal for `release`: its clique, values and σ, and the maps from the schema
        domain's cells to the ones it was measured on (MST's merged rare values). Exact counts (σ = 0,
        a non-private run) are no measurement."""
        if sigma > 0:
            self.released_.append((clique, noisy, sigma, {a: mappings[a] for a in clique if a in (mappings or {})}))

    def release(self) -> Release:
        """Every noisy marginal the fit measured, before Private-PGM's estimate: one row moves one count of
        each, so each has L2 sensitivity 1 under add/remove. The selections (exponential mechanism) that
        chose which marginals to measure are released too but not here: a test on the marginals alone is
        weaker, never invalid."""
        return Release(tuple(Measurement(noisy, partial(_marginal, self.domain_, clique, mappings), "gaussian", sigma,
                                         1.0, f"{self.method}: marginal of {', '.join(clique)}")
                             for clique, noisy, sigma, mappings in self.released_))

    def _to_domain_cells(self, model_cells: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The schema domain's cells of the model's sampled cells (the same, unless the model's
        domain merged some)."""
        return model_cells

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        return self.domain_.decode(self._to_domain_cells(self.marginals_.sample(n, rng), rng), rng)


def _marginal(domain: TableDomain, clique: Clique, mappings: dict[str, np.ndarray], frame: pd.DataFrame) -> np.ndarray:
    """The exact marginal of `clique` on `frame`, on the cells it was measured on (a release's query)."""
    cells = {a: domain.attributes[a].encode(frame[a]) for a in clique}
    cells = {a: mappings[a][c] if a in mappings else c for a, c in cells.items()}
    sizes = {a: int(mappings[a].max()) + 1 if a in mappings else domain.sizes[a] for a in clique}
    return marginal_counts(cells, sizes, clique)
