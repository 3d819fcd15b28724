"""The real training rows, resampled: the non-private ceiling (guarantee "none")."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgym import Budget, GeneratorSpec, Guarantee, Ledger, Schema, hookimpl


class Real:
    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        self.train_ = train
        return Ledger.non_private(Guarantee.NONE, "releases the real training rows")

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rows = np.random.default_rng(seed).integers(0, len(self.train_), n)
        return self.train_.iloc[rows].reset_index(drop=True)


SPEC = GeneratorSpec(
    name="real",
    version="1",
    factory=Real,
    guarantee=Guarantee.NONE,
    description="draws rows of the real training split with replacement; not private",
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
