"""What the marginal-based generators' tests share: a small table with strong dependence between
columns, how a generator's samples of it compare with `independent`'s, and a ledger entry's ρ."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgym import Budget, Column, ColumnKind, LedgerEntry, MetricContext, MetricResult, Schema
from dpgym.plugins.generators import independent
from dpgym.privacy import gaussian_rho, selection_rho
from dpgym.plugins.metrics.fidelity.compute import evaluate as fidelity

CORRELATED_SCHEMA = Schema(
    name="correlated",
    target="label",
    columns=(
        Column("group", ColumnKind.CATEGORICAL, categories=("a", "b", "c", "d")),
        Column("echo", ColumnKind.CATEGORICAL, categories=("a", "b", "c", "d")),
        Column("level", ColumnKind.INTEGER, min=0, max=39),
        Column("amount", ColumnKind.CONTINUOUS, min=0.0, max=1000.0, heavy_tailed=True, nullable=True),
        Column("coin", ColumnKind.BINARY, categories=("heads", "tails")),
        Column("label", ColumnKind.BINARY, categories=("no", "yes")),
    ),
)


def correlated_table(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    """`echo` repeats `group` nine times in ten, `level` grows with `group`, `amount` with `level`
    (missing one time in ten), `label` follows `level`; `coin` is independent of everything."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 4, rows)
    echo = np.where(rng.random(rows) < 0.9, group, rng.integers(0, 4, rows))
    level = np.clip(group * 10 + rng.integers(0, 10, rows), 0, 39)
    amount = np.clip(np.expm1(level / 6 + rng.normal(0, 0.3, rows)), 0, 1000)
    letters = np.array(["a", "b", "c", "d"])
    frame = pd.DataFrame({
        "group": letters[group], "echo": letters[echo], "level": level,
        "amount": np.where(rng.random(rows) < 0.1, np.nan, amount),
        "coin": np.array(["heads", "tails"])[rng.integers(0, 2, rows)],
        "label": np.where(level + rng.normal(0, 4, rows) > 20, "yes", "no"),
    })
    return CORRELATED_SCHEMA.conform(frame, "correlated table")


def fidelity_beside_independent(generator, table: pd.DataFrame) -> dict[str, MetricResult]:
    """The `fidelity` metric of a fitted generator's samples and of `independent`'s, fitted on the same
    rows at ε = 1 (seed 0), each with as many rows as the table."""
    baseline = independent.SPEC.build({})
    baseline.fit(table, CORRELATED_SCHEMA, Budget(1.0, 1e-5), seed=0)
    return {name: fidelity(MetricContext(train=table, test=table, synthetic=g.sample(len(table), 1),
                                         schema=CORRELATED_SCHEMA, seed=0))
            for name, g in (("generator", generator), ("independent", baseline))}


def kendall_gap(result: MetricResult, pair: str) -> float:
    return abs(result.detail["kendall_real"][pair] - result.detail["kendall_synthetic"][pair])


def entry_rho(entry: LedgerEntry) -> float:
    """The ρ a `gaussian` or `exponential` ledger entry spends, from its parameters."""
    if entry.type == "gaussian":
        return gaussian_rho(entry.event.sigma / entry.event.l2_sensitivity)
    return selection_rho(2 * entry.event.inverse_temperature * entry.event.utility_sensitivity)
