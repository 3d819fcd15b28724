"""What a generator's mechanism releases before post-processing (`Capability.RELEASE`): noisy answers
to queries on the training rows, each with its noise distribution and scale, so that an auditor who
knows two neighbouring tables can compute the exact likelihood ratio of the release between them.

The empirical audit (`dpgym audit --white-box`) attacks this release instead of the synthetic rows.
Everything a generator samples is post-processing of its release, so a lower bound on ε from the
release is a lower bound for the mechanism its ledger claims (docs/privacy.md#white-box-audits); the
synthetic rows can only be harder to attack.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

NOISES = ("gaussian", "laplace")


@dataclass(frozen=True)
class Measurement:
    """One noisy answer vector: `values` = `query(training rows)` + noise.

    `query` maps any table in schema form to its exact answers (the shape of `values`); `noise` is
    "gaussian" (`scale` its σ, `sensitivity` the query's L2 sensitivity the mechanism was calibrated
    to) or "laplace" (`scale` its b, `sensitivity` the L1 sensitivity), both under add/remove-one-row.
    """

    values: np.ndarray
    query: Callable[[pd.DataFrame], np.ndarray]
    noise: Literal["gaussian", "laplace"]
    scale: float
    sensitivity: float
    description: str = ""

    def __post_init__(self) -> None:
        if self.noise not in NOISES:
            raise ValueError(f"Measurement: noise must be one of {NOISES}, got {self.noise!r}")
        if not (self.scale > 0 and math.isfinite(self.scale)):
            raise ValueError(f"Measurement: scale must be positive and finite, got {self.scale!r}")

    def log_likelihood(self, frame: pd.DataFrame) -> float:
        """log p(values | the table is `frame`), up to a constant that does not depend on `frame`."""
        residual = np.asarray(self.values, dtype=float) - np.asarray(self.query(frame), dtype=float)
        if self.noise == "gaussian":
            return float(-(residual**2).sum() / (2 * self.scale**2))
        return float(-np.abs(residual).sum() / self.scale)


@dataclass(frozen=True)
class Release:
    """Every measurement a fit made on the training rows (independent noise in each)."""

    measurements: tuple[Measurement, ...]

    def log_likelihood_ratio(self, without: pd.DataFrame, with_target: pd.DataFrame) -> float:
        """log p(release | with_target) − log p(release | without): the Neyman–Pearson statistic for
        telling the two tables apart, exact for a release with no data-dependent choices and a valid
        (if weaker) test statistic otherwise."""
        return float(sum(m.log_likelihood(with_target) - m.log_likelihood(without) for m in self.measurements))

    def gaussian_mu(self) -> float:
        """μ of the Gaussian measurements' composition as μ-GDP (Dong, Roth & Su 2022): √Σ (Δ/σ)²."""
        return math.sqrt(sum((m.sensitivity / m.scale) ** 2 for m in self.measurements if m.noise == "gaussian"))

    def laplace_epsilon(self) -> float:
        """ε of the Laplace measurements' composition, pure DP: Σ Δ/b."""
        return float(sum(m.sensitivity / m.scale for m in self.measurements if m.noise == "laplace"))

    def epsilon(self, delta: float) -> float:
        """The ε at `delta` that the measurements' declared scales and sensitivities imply alone (a
        Laplace part and a Gaussian part composed by adding their ε, the Gaussian's at all of δ)."""
        mu = self.gaussian_mu()
        gaussian = float(_eps_from_mu(mu, delta)) if mu > 0 else 0.0
        return gaussian + self.laplace_epsilon()


def _eps_from_mu(mu: float, delta: float) -> float:
    from opacus.accountants.analysis.gdp import eps_from_mu

    return float(eps_from_mu(mu=mu, delta=delta))

