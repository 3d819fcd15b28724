"""Misbehaving plugins for tests: each breaks one rule the harness must catch."""

from __future__ import annotations

import pandas as pd

from harness import Budget, GeneratorSpec, Guarantee, Ledger, LedgerEntry, Schema, hookimpl
from plugins.generators.independent import SPEC as INDEPENDENT_SPEC
from plugins.generators.independent import Independent
from plugins.generators.uniform import Uniform


class Overspender(Uniform):
    """Claims the budget but runs a Laplace mechanism worth twice it."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        ledger = Ledger(Guarantee.FORMAL)
        ledger.record(LedgerEntry("laplace", budget.epsilon, 0.0,
                                  {"l1_sensitivity": 2.0, "scale": 1.0 / budget.epsilon}, "pure"))
        return ledger


class Crasher(Uniform):
    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        raise RuntimeError("model diverged")


class UnknownCategory(Uniform):
    """Emits a category its schema does not have, in the first categorical column."""

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        frame = super().sample(n, seed)
        column = next(c.name for c in self.schema_.columns if not c.is_numeric)
        frame[column] = frame[column].astype(str)
        frame.loc[0, column] = "Astronaut"
        return frame


class SeedIgnorer(Uniform):
    def sample(self, n: int, seed: int) -> pd.DataFrame:
        return super().sample(n, 0)


def _spec(name: str, factory: type, guarantee: Guarantee = Guarantee.FORMAL) -> GeneratorSpec:
    return GeneratorSpec(name=name, version="1", factory=factory, guarantee=guarantee)


class FaultyGenerators:
    @hookimpl
    def dpgym_generators(self) -> list[GeneratorSpec]:
        return [_spec("overspender", Overspender), _spec("crasher", Crasher),
                _spec("unknown_category", UnknownCategory, Guarantee.PURE),
                _spec("seed_ignorer", SeedIgnorer, Guarantee.PURE)]


class QuieterIndependent(Independent):
    """Adds 10% less noise than its ledger's ε allows, but still claims the same ε."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        ledger = super().fit(train, schema, budget, seed)
        (entry,) = ledger.entries
        quieter = {**entry.params, "sigma": entry.params["sigma"] * 0.9}
        return Ledger(ledger.guarantee, [LedgerEntry(entry.mechanism, entry.epsilon, entry.delta, quieter,
                                                     entry.accountant, entry.description)])


class QuieterGenerators:
    @hookimpl
    def dpgym_generators(self) -> list[GeneratorSpec]:
        return [GeneratorSpec(name="quieter_independent", version="1", factory=QuieterIndependent,
                              guarantee=Guarantee.FORMAL, defaults=INDEPENDENT_SPEC.defaults)]
