"""The reference generators: uniform, independent (DP marginals) and real."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpgym import Budget
from dpgym.privacy.reaccount import reaccount
from dpgym.schema import Column, ColumnKind, Schema
from dpgym.plugins.generators.independent import SPEC as INDEPENDENT
from dpgym.plugins.generators.real import Real
from dpgym.plugins.generators.uniform import Uniform
from dpgym.plugins.metrics.fidelity.compute import ks_statistic


def crosstab(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.crosstab(frame["income"], frame["relationship"], normalize="index")


def test_independent_without_noise_keeps_feature_given_label_marginals(adult_split, adult_schema):
    generator = INDEPENDENT.build({})
    generator.fit(adult_split.train, adult_schema, Budget(math.inf), seed=0)
    synthetic = generator.sample(len(adult_split.train), seed=1)
    assert np.abs(crosstab(synthetic) - crosstab(adult_split.train)).to_numpy().max() < 0.02


def test_independent_without_target_forgets_the_label_dependence(adult_split, adult_schema):
    generator = INDEPENDENT.build({"given_target": False})
    generator.fit(adult_split.train, adult_schema, Budget(math.inf), seed=0)
    synthetic = generator.sample(20000, seed=1)
    table = crosstab(synthetic)
    assert np.abs(table.loc["<=50K"] - table.loc[">50K"]).max() < 0.03


def test_independent_bins_a_heavy_tailed_column_in_log_scale_and_keeps_its_mass_at_zero(adult_split, adult_schema):
    """Adult's capital-gain is 0 in 92 % of rows. Even bins put 0 with everything up to 3,125 and drew
    uniformly across it (KS 0.92 at ε = 1); log1p-spaced bins give 0 a bin of its own."""
    generator = INDEPENDENT.build({})
    generator.fit(adult_split.train, adult_schema, Budget(1.0, 1e-5), seed=0)
    synthetic = generator.sample(len(adult_split.train), seed=1)
    for column in ("capital-gain", "capital-loss"):
        assert adult_schema[column].heavy_tailed
        assert ks_statistic(adult_split.train[column], synthetic[column]) < 0.05, column
        assert abs((synthetic[column] == 0).mean() - (adult_split.train[column] == 0).mean()) < 0.01, column


def test_independent_histograms_past_int8_category_codes():
    """Five target classes × 66 feature categories: the class-conditional cell index reaches 329, past
    the int8 category codes (Intrusion's `service` given its attack class failed with a negative index)."""
    schema = Schema("wide", columns=(
        Column("service", ColumnKind.CATEGORICAL, categories=tuple(f"s{i}" for i in range(66))),
        Column("attack", ColumnKind.CATEGORICAL, categories=("a", "b", "c", "d", "e")),
    ), target="attack")
    attack = np.repeat(list("abcde"), 66)
    service = [f"s{(i * 7 + k) % 66}" for k in range(5) for i in range(66)][: len(attack)]
    # class "e" only ever shows s65, so its conditional histogram must put all its mass there
    service = np.where(attack == "e", "s65", service)
    train = schema.conform(pd.DataFrame({"service": service, "attack": attack}))
    generator = INDEPENDENT.build({})
    generator.fit(train, schema, Budget(math.inf), seed=0)
    synthetic = generator.sample(5000, seed=1)
    assert set(synthetic.loc[synthetic["attack"] == "e", "service"]) == {"s65"}
    assert synthetic.loc[synthetic["attack"] == "a", "service"].nunique() > 50


def test_independent_keeps_the_share_of_missing_values_of_nullable_columns():
    """A missing value is one more histogram cell: a user's CSV with gaps no longer fails the fit."""
    schema = Schema("gaps", columns=(
        Column("score", ColumnKind.CONTINUOUS, min=0.0, max=1.0, nullable=True),
        Column("count", ColumnKind.INTEGER, min=0, max=5, nullable=True),
        Column("colour", ColumnKind.CATEGORICAL, categories=("red", "blue"), nullable=True),
        Column("label", ColumnKind.BINARY, categories=("no", "yes")),
    ), target="label")
    rng = np.random.default_rng(0)
    n = 4000
    train = schema.conform(pd.DataFrame({
        "score": np.where(rng.random(n) < 0.3, np.nan, rng.random(n)),
        "count": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 6, n)), dtype="Int64"),
        "colour": np.where(rng.random(n) < 0.2, None, rng.choice(["red", "blue"], n)),
        "label": rng.choice(["no", "yes"], n)}))
    generator = INDEPENDENT.build({})
    generator.fit(train, schema, Budget(math.inf), seed=0)
    synthetic = schema.conform(generator.sample(n, seed=1), "samples")
    for column, share in (("score", 0.3), ("count", 0.1), ("colour", 0.2)):
        assert abs(synthetic[column].isna().mean() - share) < 0.03, column
    assert synthetic["score"].dropna().between(0, 1).all() and synthetic["count"].dropna().between(0, 5).all()


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_independent_ledger_reaccounts_at_the_budget(adult_split, adult_schema, mechanism):
    generator = INDEPENDENT.build({"mechanism": mechanism})
    ledger = generator.fit(adult_split.train, adult_schema, Budget(0.5, 1e-5), seed=0)
    (entry,) = ledger.entries
    sensitivity = entry.event.l2_sensitivity if mechanism == "gaussian" else entry.event.l1_sensitivity
    assert sensitivity == pytest.approx(math.sqrt(15) if mechanism == "gaussian" else 15)
    check = reaccount(ledger, Budget(0.5, 1e-5))
    assert check.verdict == "ok" and check.epsilon == pytest.approx(0.5, abs=5e-3)
    adult_schema.validate(generator.sample(500, seed=2))


def test_uniform_covers_the_public_domain_without_reading_rows(adult_schema):
    generator = Uniform()
    ledger = generator.fit(pd.DataFrame(), adult_schema, Budget(1.0), seed=0)
    assert ledger.entries == [] and ledger.epsilon == 0
    synthetic = generator.sample(20000, seed=0)
    adult_schema.validate(synthetic)
    assert set(synthetic["native-country"]) == set(adult_schema["native-country"].categories)
    assert synthetic["age"].min() == 17 and synthetic["age"].max() == 90


def test_real_resamples_training_rows(adult_split, adult_schema):
    generator = Real()
    generator.fit(adult_split.train, adult_schema, Budget(1.0), seed=0)
    synthetic = generator.sample(100, seed=3)
    merged = synthetic.merge(adult_split.train.drop_duplicates(), how="left", indicator=True)
    assert (merged["_merge"] == "both").all()
