"""What MST and AIM share around their mechanisms: the schema's discrete domain, the budget in
zCDP, the ledger, and sampling from the fitted model."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgym import Budget, Ledger, Schema
from dpgym.plugins.marginal.domain import TableDomain
from dpgym.plugins.marginal.model import ModelMarginals
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
        self.marginals_ = self._fit_model(self.domain_.encode(train), rho, ledger, rng)
        return ledger.claimed()

    def _fit_model(self, cells: dict[str, np.ndarray], rho: float, ledger: ZcdpLedger,
                   rng: np.random.Generator) -> ModelMarginals:
        raise NotImplementedError

    def _to_domain_cells(self, model_cells: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The schema domain's cells of the model's sampled cells (the same, unless the model's
        domain merged some)."""
        return model_cells

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        return self.domain_.decode(self._to_domain_cells(self.marginals_.sample(n, rng), rng), rng)
