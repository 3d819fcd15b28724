"""Statistics every audit here rests on: exact binomial confidence intervals."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import beta as beta_dist

CONFIDENCE = 0.95


def clopper_pearson(hits: Any, trials: Any, confidence: float = CONFIDENCE) -> tuple[Any, Any]:
    """Two-sided exact binomial interval for a proportion: floats, or arrays for arrays of counts
    (the empirical audit bounds every threshold of a test at once)."""
    hits, trials = np.asarray(hits), np.asarray(trials)
    alpha = 1 - confidence
    with np.errstate(invalid="ignore"):  # the parameters are 0 exactly where np.where replaces the value
        lo = np.where(hits == 0, 0.0, beta_dist.ppf(alpha / 2, hits, trials - hits + 1))
        hi = np.where(hits == trials, 1.0, beta_dist.ppf(1 - alpha / 2, hits + 1, trials - hits))
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)
