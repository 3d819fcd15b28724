"""A private Gaussian copula: DP marginals, then a DP correlation matrix of normal scores.

Both releases use the Gaussian mechanism under add/remove-one-row adjacency:
- all d marginal histograms at once: one row moves one count per column, L2 sensitivity √d;
- S = Σ z zᵀ over rows, z the row's normal scores clipped to [−c, c]: one row changes S by
  z zᵀ, whose Frobenius norm is ‖z‖² ≤ d c². The correlation is S normalised by its own
  diagonal, so the private row count is never needed.
The budget is split (ε·share, δ/2) and (ε·(1 − share), δ/2); the ledger records both.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from dpgym import Budget, ColumnKind, GaussianEvent, Guarantee, Ledger, Schema
from dpgym.privacy import calibrate_gaussian


class DPGaussianCopula:
    def __init__(self, numeric_bins: int, clip: float, marginal_share: float):
        if not 0 < marginal_share < 1:
            raise ValueError(f"marginal_share must lie in (0, 1), got {marginal_share}")
        self.numeric_bins, self.clip, self.marginal_share = numeric_bins, clip, marginal_share

    def _edges(self, col) -> np.ndarray | None:
        return None if not col.is_numeric else np.linspace(col.min, col.max, self.numeric_bins + 1)

    def _cells(self, col, values: pd.Series) -> np.ndarray:
        if not col.is_numeric:
            return values.cat.codes.to_numpy()
        edges = self._edges(col)
        return np.clip(np.searchsorted(edges, values.to_numpy(float), side="right") - 1, 0, len(edges) - 2)

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        rng = np.random.default_rng(seed)
        self.schema_ = schema
        d = len(schema.columns)
        cells = [self._cells(c, train[c.name]) for c in schema.columns]
        sizes = [len(c.categories) if not c.is_numeric else self.numeric_bins for c in schema.columns]
        counts = [np.bincount(x, minlength=k).astype(float) for x, k in zip(cells, sizes)]
        if budget.is_private:
            ledger = Ledger(Guarantee.FORMAL)
        else:
            ledger = Ledger.non_private(Guarantee.FORMAL, "exact marginals and correlation (ε = ∞)")
        if budget.is_private:
            eps_m, eps_c = budget.epsilon * self.marginal_share, budget.epsilon * (1 - self.marginal_share)
            sigma_m = calibrate_gaussian(eps_m, budget.delta / 2) * math.sqrt(d)
            counts = [c + rng.normal(0, sigma_m, c.shape) for c in counts]
            ledger.record(GaussianEvent(l2_sensitivity=math.sqrt(d), sigma=sigma_m), epsilon=eps_m,
                          delta=budget.delta / 2, accountant="analytic Gaussian", description=f"{d} marginal histograms")
        self.cdfs_ = [np.cumsum(_normalise(c)) for c in counts]
        # normal scores of each row from the (already released) noisy marginals: post-processing
        scores = np.column_stack([
            stats.norm.ppf(np.clip(cdf[x] - 0.5 * np.diff(np.concatenate([[0.0], cdf]))[x], 1e-6, 1 - 1e-6))
            for cdf, x in zip(self.cdfs_, cells)
        ])
        scores = np.clip(scores, -self.clip, self.clip)
        s = scores.T @ scores
        if budget.is_private:
            sensitivity = d * self.clip**2
            sigma_c = calibrate_gaussian(eps_c, budget.delta / 2) * sensitivity
            noise = rng.normal(0, sigma_c, s.shape)
            s = s + np.triu(noise) + np.triu(noise, 1).T  # symmetric noise: one release of the upper triangle
            ledger.record(GaussianEvent(l2_sensitivity=sensitivity, sigma=sigma_c), epsilon=eps_c,
                          delta=budget.delta / 2, accountant="analytic Gaussian",
                          description="sum of outer products of clipped normal scores")
        self.correlation_ = _nearest_correlation(s)
        return ledger

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        u = stats.norm.cdf(rng.multivariate_normal(np.zeros(len(self.cdfs_)), self.correlation_, n))
        columns = {}
        for j, col in enumerate(self.schema_.columns):
            cell = np.minimum(np.searchsorted(self.cdfs_[j], u[:, j]), len(self.cdfs_[j]) - 1)
            if not col.is_numeric:
                columns[col.name] = pd.Categorical.from_codes(cell, dtype=col.dtype)
                continue
            edges = self._edges(col)
            values = rng.uniform(edges[cell], edges[cell + 1])
            if col.kind is ColumnKind.INTEGER:
                values = np.clip(np.round(values), math.ceil(col.min), math.floor(col.max)).astype(np.int64)
            columns[col.name] = pd.Series(values, dtype=col.dtype)
        return pd.DataFrame(columns)


def _normalise(counts: np.ndarray) -> np.ndarray:
    clipped = np.clip(counts, 0, None)
    return clipped / clipped.sum() if clipped.sum() > 0 else np.full(len(counts), 1 / len(counts))


def _nearest_correlation(s: np.ndarray) -> np.ndarray:
    """A valid correlation matrix from a noisy scatter matrix: clip eigenvalues, rescale the diagonal."""
    values, vectors = np.linalg.eigh((s + s.T) / 2)
    psd = vectors @ np.diag(np.clip(values, 1e-6 * max(values.max(), 1e-12), None)) @ vectors.T
    scale = np.sqrt(np.diag(psd))
    return psd / np.outer(scale, scale)
