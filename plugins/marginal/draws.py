"""Drawing one category per row from the rows of a table of weights, without a Python loop: what
the marginal-based generators' samplers share (a model's conditional tables, a Bayesian network's
conditional distributions)."""

from __future__ import annotations

import numpy as np


def inverse_cdf_draws(weights: np.ndarray, row: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw from row `row[i]` of `weights` (unnormalised, rows of zero mass read as uniform) for
    each i. Row r's cumulative distribution shifted by r makes one increasing sequence, so a single
    searchsorted serves every row without an (n × columns) array."""
    totals = weights.sum(axis=1, keepdims=True)
    probabilities = np.where(totals > 0, weights / np.where(totals > 0, totals, 1.0), 1.0 / weights.shape[1])
    cdf = np.cumsum(probabilities, axis=1)
    cdf[:, -1] = 1.0
    shifted = (cdf + np.arange(len(cdf))[:, None]).ravel()
    position = np.searchsorted(shifted, row + rng.random(len(row)), side="right")
    return np.clip(position - row * weights.shape[1], 0, weights.shape[1] - 1)
