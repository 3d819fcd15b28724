"""knn_regression: the synthetic-trained regressor's MSE on real rows, against the real-data floor."""

import numpy as np
import pandas as pd
import pytest

from dpgym import Column, ColumnKind, MetricContext, Schema
from dpgym.specs import SpecError
from dpgym.plugins.metrics.knn import SPEC

SCHEMA = Schema("linear", (Column("x1", ColumnKind.CONTINUOUS, min=-5.0, max=5.0),
                           Column("x2", ColumnKind.CONTINUOUS, min=-5.0, max=5.0),
                           Column("y", ColumnKind.CONTINUOUS, min=-20.0, max=20.0)))


def rows(n, seed, noise=0.1, shuffled=False):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(n, 2))
    y = 3 * x[:, 0] - 2 * x[:, 1] + noise * rng.standard_normal(n)
    if shuffled:  # right marginals, no relation between y and the features
        y = rng.permutation(y)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "y": y})


def mse(synthetic, **options):
    ctx = MetricContext(train=rows(2000, 0), test=rows(1000, 1), synthetic=synthetic, schema=SCHEMA, seed=0,
                        options=options)
    return SPEC.evaluate(ctx)


def test_faithful_synthetic_rows_reach_the_real_floor_and_broken_ones_do_not():
    good = mse(rows(2000, 2))
    broken = mse(rows(2000, 3, shuffled=True))
    floor = good.detail["real_train_baseline_mse"]
    assert good.detail["target"] == "y" and good.detail["features"] == ["x1", "x2"]
    assert good.values["knn_mse"] == pytest.approx(floor, rel=0.3)
    assert broken.values["knn_mse"] > 10 * good.values["knn_mse"]
    # y independent of the features: the prediction averages 5 random targets, MSE = var·(1 + 1/5)
    assert broken.values["knn_mse"] == pytest.approx(1.2 * good.detail["test_target_variance"], rel=0.15)


def test_target_option_and_its_errors():
    assert mse(rows(500, 2), target="x1").detail["features"] == ["x2", "y"]
    with pytest.raises(ValueError, match="target 'z' is not a numeric column"):
        mse(rows(500, 2), target="z")
    with pytest.raises(SpecError, match="'neighbours' must be a positive integer"):
        SPEC.resolve_options({"neighbours": 0})


def test_a_dataset_with_one_numeric_column_gets_no_value_and_says_why():
    schema = Schema("onenum", (Column("x1", ColumnKind.CONTINUOUS, min=-5.0, max=5.0),
                               Column("label", ColumnKind.BINARY, categories=("no", "yes"))))
    frame = rows(100, 0)[["x1"]].assign(label="no")
    result = SPEC.evaluate(MetricContext(train=frame, test=frame, synthetic=frame, schema=schema, seed=0,
                                         options=SPEC.options))
    assert result.values == {} and "two numeric columns" in result.detail["skipped"]
