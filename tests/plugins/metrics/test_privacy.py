"""The privacy metric: released training rows read as copies, rows drawn from the schema alone as chance,
and the distance space follows from the public schema only."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpgym import Budget, Column, ColumnKind, Schema
from dpgym.plugins.generators.uniform import Uniform
from dpgym.plugins.metrics.privacy import SPEC
from dpgym.plugins.metrics.privacy import compute as privacy
from dpgym.specs import Direction, MetricContext

# A slice of Adult where the test split is twice the training rows: the holdout is then as large as the
# training split, every training row is a member, and released training rows show in full.
TRAIN_ROWS, TEST_ROWS = 1_000, 2_000


@pytest.fixture(scope="module")
def adult_slice(adult_split):
    return adult_split.train.iloc[:TRAIN_ROWS].reset_index(drop=True), adult_split.test.iloc[:TEST_ROWS].reset_index(drop=True)


def context(train: pd.DataFrame, test: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, seed: int = 0) -> MetricContext:
    return MetricContext(train=train, test=test, synthetic=synthetic, schema=schema, seed=seed)


def resampled(rows: pd.DataFrame, seed: int) -> pd.DataFrame:
    """What the `real` generator releases: the rows drawn with replacement."""
    return rows.iloc[np.random.default_rng(seed).integers(0, len(rows), len(rows))].reset_index(drop=True)


def test_released_training_rows_read_as_copies(adult_slice, adult_schema):
    train, test = adult_slice
    result = privacy.evaluate(context(train, test, resampled(train, 1), adult_schema))
    values = result.values
    assert result.detail["rows"]["train_members"] == TRAIN_ROWS
    assert values["dcr_share"] > 0.95
    assert values["dcr_ratio"] < 0.05
    assert values["exact_match_rate"] == 1.0
    # about 63% of the members are in a resample of their own size; each of those is found
    assert values["mia_auc"] > 0.75
    assert values["exact_match_rate_holdout"] < 0.01


def test_rows_drawn_from_the_schema_alone_score_chance(adult_slice, adult_schema):
    train, test = adult_slice
    generator = Uniform()
    generator.fit(train, adult_schema, Budget(1.0), seed=0)
    synthetic = adult_schema.conform(generator.sample(len(train), seed=1))
    values = privacy.evaluate(context(train, test, synthetic, adult_schema)).values
    assert abs(values["dcr_share"] - 0.5) < 0.08  # seeds 0-4 gave 0.47-0.53 on this slice
    assert abs(values["dcr_ratio"] - 1.0) < 0.05
    assert abs(values["mia_auc"] - 0.5) < 0.06
    assert values["exact_match_rate"] == values["exact_match_rate_holdout"] == 0.0


def test_the_same_seed_gives_the_same_values_and_another_seed_other_samples(adult_slice, adult_schema):
    train, test = adult_slice
    synthetic = resampled(train, 1)
    first, again = (privacy.evaluate(context(train, test, synthetic, adult_schema, seed=3)) for _ in range(2))
    assert first.values == again.values and first.detail == again.detail
    other = privacy.evaluate(context(train, test, synthetic, adult_schema, seed=4))
    assert other.values["mia_auc"] != first.values["mia_auc"]


def test_every_value_has_the_direction_of_less_risk():
    assert SPEC.directions == {"dcr_share": Direction.LOWER, "dcr_ratio": Direction.HIGHER, "mia_auc": Direction.LOWER,
                               "exact_match_rate": Direction.LOWER, "exact_match_rate_holdout": Direction.LOWER}


SCHEMA = Schema("public", columns=(
    Column("age", ColumnKind.INTEGER, min=0, max=100),
    Column("income", ColumnKind.CONTINUOUS, min=0.0, max=1e6, heavy_tailed=True),
    Column("rate", ColumnKind.CONTINUOUS, min=0.0, max=1.0, step=0.01, nullable=True),
    Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green", "blue")),
))


def rows(**columns) -> pd.DataFrame:
    return SCHEMA.conform(pd.DataFrame(columns))


def test_the_space_follows_from_the_schema_not_from_the_rows():
    space = privacy.DistanceSpace(SCHEMA)
    narrow = rows(age=[30, 40], income=[10.0, 20.0], rate=[0.2, 0.3], colour=["red", "blue"])
    wide = pd.concat([narrow, rows(age=[0, 100], income=[0.0, 1e6], rate=[0.0, 1.0], colour=["green", "green"])],
                     ignore_index=True)
    assert np.array_equal(space.encode(narrow), space.encode(wide)[:2])

    points = space.encode(rows(age=[0, 100, 50], income=[0.0, 1e6, 10.0], rate=[0.2, 0.2, 0.2],
                               colour=["red", "red", "blue"]))
    assert np.linalg.norm(points[0] - points[1]) == pytest.approx(math.sqrt(2.0))  # two full ranges
    assert points[2, space.encoder.block("income").start] == pytest.approx(math.log1p(10.0) / math.log1p(1e6))
    different_colour = np.linalg.norm(points[2] - points[0]) ** 2 - (0.5**2 + (math.log1p(10.0) / math.log1p(1e6)) ** 2)
    assert different_colour == pytest.approx(1.0)  # a category mismatch counts as a full range


def test_exact_matches_compare_on_the_public_step_grid_and_match_missing_with_missing():
    real = rows(age=[30, 40, 50], income=[10.0, 0.0, 5.0], rate=[0.2, None, 0.3], colour=["red", "red", "blue"])
    synthetic = rows(age=[30, 40, 50, 30], income=[10.0, -0.0, 5.0, 10.5],
                     rate=[0.2 + 1e-9, None, None, 0.2], colour=["red", "red", "blue", "red"])
    share = privacy.exact_match_share(privacy.exact_keys(synthetic, SCHEMA), privacy.exact_keys(real, SCHEMA))
    # rows 0 (the same grid point) and 1 (−0.0 = 0.0, missing = missing) match; row 2 misses a present rate, row 3
    # differs in income
    assert share == 0.5
