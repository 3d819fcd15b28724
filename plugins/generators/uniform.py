"""Uniform over the public domain: the floor every private generator must beat. Reads no rows (ε = 0)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgym import Budget, Capability, ColumnKind, GeneratorSpec, Guarantee, Ledger, Schema, hookimpl


class Uniform:
    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        self.schema_ = schema
        return Ledger(Guarantee.PURE)  # nothing learned from the rows: no entries, ε = 0

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        columns = {}
        for col in self.schema_.columns:
            if col.kind is ColumnKind.CONTINUOUS:
                values = rng.uniform(col.min, col.max, n)
            elif col.kind is ColumnKind.INTEGER:
                values = rng.integers(int(np.ceil(col.min)), int(np.floor(col.max)), n, endpoint=True)
            else:
                values = pd.Categorical.from_codes(rng.integers(0, len(col.categories), n), dtype=col.dtype)
            columns[col.name] = pd.Series(values, dtype=col.dtype)
        return pd.DataFrame(columns)


SPEC = GeneratorSpec(
    name="uniform",
    version="1",
    factory=Uniform,
    guarantee=Guarantee.PURE,
    capabilities=frozenset({Capability.READS_NO_ROWS}),
    description="each column uniform over its public domain; uses no data (ε = 0)",
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
