"""Generators with planted privacy faults that their ledgers do not show, for the empirical audit's
tests: each ledger is `independent`'s and re-accounts to the budget, so only the audit can catch them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from dpgym import Budget, GeneratorSpec, Ledger, Schema, hookimpl
from dpgym.plugins.generators.independent import SPEC as INDEPENDENT_SPEC
from dpgym.plugins.generators.independent.model import Independent, _normalise

QUIETER = 10.0  # how much less noise `independent_quiet` adds than its ledger records


class Resampler(Independent):
    """(a) Records `independent`'s ledger, then samples by resampling the training rows."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        self.train_ = train.reset_index(drop=True)
        return super().fit(train, schema, budget, seed)

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rows = np.random.default_rng(seed).integers(0, len(self.train_), n)
        return self.train_.iloc[rows].reset_index(drop=True)


class QuietIndependent(Independent):
    """(b) Gaussian noise `QUIETER` times smaller than the σ its ledger records."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        ledger = super().fit(train, schema, budget, seed)
        rng = np.random.default_rng(seed)
        sigma = ledger.entries[0].params["sigma"] / QUIETER
        self.probabilities_ = {k: _normalise(v + rng.normal(0.0, sigma, v.shape)) for k, v in self._counts(train).items()}
        return ledger


class PrivateBounds(Independent):
    """(c) Bins each numeric column between the private rows' min and max instead of its public bounds."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        columns = []
        for c in schema.columns:
            low, high = (float(train[c.name].min()), float(train[c.name].max())) if c.is_numeric else (None, None)
            columns.append(dataclasses.replace(c, min=low, max=high if high != low else low + 1) if c.is_numeric else c)
        return super().fit(train, dataclasses.replace(schema, columns=tuple(columns)), budget, seed)


def _like_independent(name: str, factory: type) -> GeneratorSpec:
    return dataclasses.replace(INDEPENDENT_SPEC, name=name, version="1", factory=factory,
                               description=f"independent with a planted fault: {factory.__doc__.split(')', 1)[1].strip()}")


class PlantedFaults:
    @hookimpl
    def dpgym_generators(self) -> list[GeneratorSpec]:
        return [_like_independent("resampler", Resampler), _like_independent("independent_quiet", QuietIndependent),
                _like_independent("independent_private_bounds", PrivateBounds)]


PLANTED = "tests.harness.audit_faults:PlantedFaults"
