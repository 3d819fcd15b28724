"""The DP-auto-GAN paper's metrics: golden values on real Adult (docs/methods/dp-auto-gan.md#diversity) and basic laws."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpgym import Column, ColumnKind, MetricContext, Schema
from dpgym.plugins.datasets.mimic import load_standin, standin_schema
from dpgym.plugins.metrics.dpautogan.compute import (
    category_distribution,
    diversity_columns,
    evaluate_diversity,
    evaluate_prediction,
    evaluate_probability,
    jsd,
    label_accuracy,
    labelled,
    smoothed_kl,
    smoothing,
)


@pytest.fixture(scope="module")
def adult_full(adult_split):
    return pd.concat([adult_split.train, adult_split.test], ignore_index=True)


@pytest.mark.parametrize(("column", "kl", "js"), [("race", 0.4654, 0.0531), ("native-country", 0.3640, 0.0369)])
def test_point_mass_on_the_majority_matches_the_papers_dp_syn_values(adult_full, adult_schema, column, kl, js):
    p = category_distribution(adult_full[column], adult_schema[column].categories)
    q = np.eye(len(p))[p.argmax()]
    assert smoothed_kl(p, q, smoothing(p)) == pytest.approx(kl, abs=5e-4)
    assert jsd(p, q) == pytest.approx(js, abs=5e-4)


def test_race_smoothing_is_about_one_thousandth(adult_full, adult_schema):
    assert smoothing(category_distribution(adult_full["race"], adult_schema["race"].categories)) == pytest.approx(1.0e-3, rel=0.02)


def test_diversity_sums_the_papers_eight_columns(adult_schema):
    assert diversity_columns(adult_schema) == ["workclass", "marital-status", "occupation", "relationship", "race",
                                               "sex", "native-country", "income"]


def test_diversity_of_the_real_data_itself_is_zero(adult_split, adult_schema, adult_full):
    ctx = MetricContext(adult_split.train, adult_split.test, adult_full, adult_schema, seed=0)
    values = evaluate_diversity(ctx).values
    assert values["diversity_kl_sum"] == pytest.approx(0, abs=1e-12)
    assert values["diversity_jsd_sum"] == pytest.approx(0, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=8), st.lists(st.floats(0, 1), min_size=2, max_size=8))
@example([0.0, 1.0], [5e-324, 1.0])  # a subnormal probability: (p + q)/2 underflowed to 0
def test_jsd_is_symmetric_and_at_most_ln2(a, b):
    n = min(len(a), len(b))
    p, q = np.array(a[:n]), np.array(b[:n])
    if p.sum() == 0 or q.sum() == 0:
        return
    p, q = p / p.sum(), q / q.sum()
    assert -1e-12 <= jsd(p, q) <= math.log(2) + 1e-12
    assert jsd(p, q) == pytest.approx(jsd(q, p), abs=1e-12)


def test_smoothed_kl_grows_when_minorities_are_missed():
    p = np.array([0.85, 0.1, 0.05])
    mu = smoothing(p)
    keeps, drops = np.array([0.8, 0.12, 0.08]), np.array([0.95, 0.05, 0.0])
    assert 0 < smoothed_kl(p, keeps, mu) < smoothed_kl(p, drops, mu) < smoothed_kl(p, np.array([1.0, 0, 0]), mu)


def test_salary_accuracy_of_a_constant_predictor_is_the_majority_rate(adult_split, adult_schema):
    only_low = adult_split.train[adult_split.train["income"] == "<=50K"].iloc[:200]
    assert label_accuracy(only_low, adult_split.test, adult_schema, 0) == pytest.approx(0.7638, abs=1e-4)


@pytest.mark.slow
def test_rows_without_a_label_are_left_out_of_the_salary_accuracy(adult_split, adult_schema):
    """A nullable target's missing labels once counted as one more class (code −1) on both sides."""
    schema = Schema(adult_schema.name, tuple(replace(c, nullable=True) if c.name == "income" else c
                                             for c in adult_schema.columns), target="income")
    train, test = adult_split.train.iloc[:600].copy(), adult_split.test.iloc[:400].copy()
    expected = label_accuracy(train.iloc[100:], test, adult_schema, 0)
    train.loc[train.index[:100], "income"] = None
    gaps = pd.concat([test, test.iloc[:50].assign(income=None)])
    assert label_accuracy(train.iloc[100:], gaps, schema, 0) == expected
    assert label_accuracy(train, gaps, schema, 0) == label_accuracy(train.iloc[100:], test, schema, 0)


SMALL = {"rows": 1500, "codes": 24}


@pytest.fixture(scope="module")
def standin():
    return load_standin(**SMALL)


def test_probability_and_prediction_score_real_data_as_perfect_on_the_standin(standin):
    ctx = MetricContext(standin.train, standin.test, standin.train, standin_schema(SMALL["codes"]), seed=0)
    prob = evaluate_probability(ctx).values
    assert prob["dimwise_prob_pearson"] == pytest.approx(1.0) and prob["dimwise_prob_mae"] == 0
    pred = evaluate_prediction(ctx)
    assert pred.values["dimwise_pred_gap_discrete"] == 0
    assert all(c["kind"] == "auroc" for c in pred.detail["columns"].values())
    assert 0.6 < pred.values["dimwise_pred_auroc_synthetic"] <= 1


def test_independent_columns_lose_prediction_but_keep_probability(standin):
    """Shuffling each column separately keeps every marginal and destroys the correlations."""
    rng = np.random.default_rng(0)
    shuffled = standin.train.apply(lambda col: col.sample(frac=1, random_state=int(rng.integers(1e9))).to_numpy())
    ctx = MetricContext(standin.train, standin.test, shuffled, standin_schema(SMALL["codes"]), seed=0)
    assert evaluate_probability(ctx).values["dimwise_prob_mae"] == pytest.approx(0, abs=1e-12)
    pred = evaluate_prediction(ctx).values
    assert pred["dimwise_pred_auroc_synthetic"] < 0.6 and pred["dimwise_pred_gap_discrete"] > 0.1


def test_diversity_skips_columns_with_a_single_real_category(standin):
    """μ = exp(−1/(1−p₁)) is 0 when p₁ = 1, and the measure undefined: such columns are left out."""
    schema = standin_schema(SMALL["codes"])
    train, test = standin.train.copy(), standin.test.copy()
    train["code000"], test["code000"] = "0", "0"
    synthetic = train.copy()
    synthetic.loc[:10, "code000"] = "1"
    result = evaluate_diversity(MetricContext(train, test, synthetic, schema, seed=0))
    assert math.isfinite(result.values["diversity_kl_sum"])
    assert "code000" in result.detail["skipped"]


NULLABLE = Schema("nullable", (Column("x", ColumnKind.CONTINUOUS, min=-10.0, max=10.0, nullable=True),
                               Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green", "blue"),
                                      nullable=True),
                               Column("label", ColumnKind.BINARY, categories=("no", "yes"))), target="label")


def nullable_rows(n, seed, missing=0.2):
    """`label` is `x > 0`; `colour` is blue for positive x and red or green otherwise; both predictors
    are missing in a share of the rows."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 2, n).clip(-10, 10)
    colour = np.where(x > 0, "blue", rng.choice(["red", "green"], n))
    frame = pd.DataFrame({"x": np.where(rng.random(n) < missing, np.nan, x),
                          "colour": np.where(rng.random(n) < missing, None, colour),
                          "label": np.where(x > 0, "yes", "no")})
    return NULLABLE.conform(frame)


def test_prediction_leaves_out_rows_missing_the_target_and_encodes_missing_predictors():
    train, test = nullable_rows(600, 0), nullable_rows(300, 1)
    result = evaluate_prediction(MetricContext(train, test, train, NULLABLE, seed=0))
    assert result.values["dimwise_pred_gap_discrete"] == 0 and result.values["dimwise_pred_gap_numeric"] == 0
    assert all(math.isfinite(c["real"]) for c in result.detail["columns"].values())


def test_a_missing_category_is_no_category_not_the_last_one():
    rows = NULLABLE.conform(pd.DataFrame({"x": [1.0], "colour": [None], "label": ["yes"]}))
    x, y = labelled(rows, NULLABLE["label"], [NULLABLE["colour"]])
    np.testing.assert_array_equal(x, [[0, 0, 0]])


def test_a_column_missing_in_every_synthetic_row_scores_nan_not_an_error():
    train, test = nullable_rows(600, 0), nullable_rows(300, 1)
    synthetic = train.assign(x=np.nan)
    columns = evaluate_prediction(MetricContext(train, test, synthetic, NULLABLE, seed=0)).detail["columns"]
    assert math.isnan(columns["x"]["synthetic"]) and math.isfinite(columns["x"]["real"])
