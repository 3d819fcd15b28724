"""The utility metric: train a classifier zoo on synthetic rows, score it on the real test split."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pluggy
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from dpgym import hookspecs
from dpgym.schema import Column, ColumnKind, Schema
from dpgym.specs import Direction, MetricContext
from dpgym.plugins.metrics import utility as utility_plugin
from dpgym.plugins.metrics.utility import check_options
from dpgym.plugins.metrics.utility import compute as utility

SCHEMA = Schema(
    "toy",
    columns=(
        Column("x", ColumnKind.CONTINUOUS, min=-4.0, max=4.0),
        Column("years", ColumnKind.INTEGER, min=0, max=50),
        Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green", "blue")),
        Column("label", ColumnKind.BINARY, categories=("no", "yes")),
    ),
    target="label",
)


def learnable_rows(n: int, seed: int) -> pd.DataFrame:
    """The label is a noisy threshold of x plus a colour effect: well above chance for any classifier."""
    rng = np.random.default_rng(seed)
    x = np.clip(rng.normal(size=n), -4, 4)
    colour = rng.choice(["red", "green", "blue"], size=n)
    logit = 3 * x + np.where(colour == "blue", 1.5, 0.0)
    label = np.where(logit + rng.logistic(size=n) > 0, "yes", "no")
    years = rng.integers(0, 51, size=n)
    return SCHEMA.conform(pd.DataFrame({"x": x, "years": years, "colour": colour, "label": label}))


def context(synthetic: pd.DataFrame, test: pd.DataFrame, seed: int = 0, schema: Schema = SCHEMA) -> MetricContext:
    return MetricContext(train=synthetic, test=test, synthetic=synthetic, schema=schema, seed=seed)


@pytest.fixture(scope="module")
def real_split() -> tuple[pd.DataFrame, pd.DataFrame]:
    return learnable_rows(1500, seed=0), learnable_rows(1000, seed=1)


@pytest.mark.slow
def test_real_training_rows_as_synthetic_score_high(real_split):
    train, test = real_split
    zoo = {**utility.OPTIONS, "classifiers": list(utility.CLASSIFIERS)}
    result = utility.evaluate(replace(context(train, test), options=zoo))
    assert result.values["tstr_auroc"] > 0.85
    assert result.values["tstr_macro_f1"] > 0.75
    assert result.detail["fallbacks"] == {}
    assert set(result.detail["per_classifier"]) == set(utility.CLASSIFIERS)
    assert all(scores["auroc"] > 0.7 for scores in result.detail["per_classifier"].values())
    default = utility.evaluate(context(train, test))
    assert set(default.detail["per_classifier"]) == {"logistic_regression", "decision_tree", "gaussian_nb",
                                                     "bernoulli_nb", "lda", "xgboost"}


@pytest.mark.slow
def test_random_labels_score_at_chance(real_split):
    train, test = real_split
    synthetic = train.copy()
    synthetic["label"] = synthetic["label"].to_numpy()[np.random.default_rng(3).permutation(len(train))]
    result = utility.evaluate(context(synthetic, test))
    assert result.values["tstr_auroc"] == pytest.approx(0.5, abs=0.06)


def test_single_class_synthetic_target_predicts_that_class(real_split):
    train, test = real_split
    synthetic = train.copy()
    synthetic["label"] = pd.Series(["no"] * len(train), dtype=SCHEMA["label"].dtype)
    result = utility.evaluate(context(synthetic, test))
    assert set(result.detail["fallbacks"]) == set(utility.OPTIONS["classifiers"])  # every classifier run
    assert result.values["tstr_auroc"] == pytest.approx(0.5)
    assert result.detail["synthetic_classes"] == ["no"]
    # Predicting "no" everywhere: F1 of "yes" is 0, so macro-F1 is half the F1 of "no".
    assert 0 < result.values["tstr_macro_f1"] < 0.5


def test_missing_synthetic_class_gets_zero_probability():
    model = LogisticRegression()
    x_train = np.array([[0.0], [0.1], [0.9], [1.0]])
    y_train = np.array([0, 0, 2, 2])  # class 1 of the schema never appears in the synthetic rows
    proba, fallback = utility.fit_predict_proba(model, x_train, y_train, np.array([[0.05], [0.95]]), n_classes=3)
    assert fallback is None
    assert proba.shape == (2, 3)
    np.testing.assert_allclose(proba[:, 1], 0.0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert list(proba.argmax(axis=1)) == [0, 2]


@pytest.mark.slow
def test_multiclass_target_with_a_class_absent_from_synthetic():
    schema = Schema(
        "three",
        columns=(Column("x", ColumnKind.CONTINUOUS, min=-4.0, max=4.0),
                 Column("grade", ColumnKind.ORDINAL, categories=("low", "mid", "high"))),
        target="grade",
    )
    rng = np.random.default_rng(0)

    def rows(n: int) -> pd.DataFrame:
        x = np.clip(rng.normal(size=n), -4, 4)
        grade = np.array(["low", "mid", "high"])[np.digitize(x + 0.3 * rng.normal(size=n), [-0.5, 0.5])]
        return schema.conform(pd.DataFrame({"x": x, "grade": grade}))

    train, test = rows(900), rows(600)
    synthetic = train[train["grade"] != "high"].reset_index(drop=True)
    result = utility.evaluate(context(synthetic, test, schema=schema))
    assert result.detail["synthetic_classes"] == ["low", "mid"]
    assert result.detail["fallbacks"] == {}
    assert all(np.isfinite(v) for v in result.values.values())
    # "high" is never predicted, so its one-vs-rest AUROC is 0.5 at best: the macro mean stays well below 1.
    assert 0.6 < result.values["tstr_auroc"] < 0.9
    # The per-class breakdown names the lost class; with every class in the test split its mean is macro-F1.
    per_class = result.detail["f1_per_class"]
    assert list(per_class) == ["low", "mid", "high"]
    assert per_class["high"] == 0.0
    assert per_class["low"] > 0.5 and per_class["mid"] > 0.5
    assert np.mean(list(per_class.values())) == pytest.approx(result.values["tstr_macro_f1"])


def test_multiclass_auroc_is_the_macro_one_vs_rest_mean():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=300)
    proba = rng.dirichlet(np.ones(3), size=300) + np.eye(3)[y]
    proba /= proba.sum(axis=1, keepdims=True)
    scores = utility.score(y, proba)
    assert scores["auroc"] == pytest.approx(roc_auc_score(y, proba, multi_class="ovr", average="macro"))


def test_binary_scores_use_the_second_schema_category_as_positive():
    y = np.array([0, 0, 1, 1])
    proba = np.array([[0.9, 0.1], [0.6, 0.4], [0.65, 0.35], [0.2, 0.8]])
    scores = utility.score(y, proba)
    assert scores["auroc"] == pytest.approx(roc_auc_score(y, proba[:, 1]))
    assert scores["auroc"] == pytest.approx(0.75)


def test_features_are_scaled_by_public_bounds_not_by_the_rows():
    frame = SCHEMA.conform(pd.DataFrame({"x": [0.0, 2.0], "years": [10, 20], "colour": ["blue", "red"], "label": ["no", "yes"]}))
    encoded = utility.encode_features(frame, SCHEMA.features)
    np.testing.assert_allclose(encoded, [[0.5, 0.2, 0, 0, 1], [0.75, 0.4, 1, 0, 0]])


def test_nullable_numeric_feature_gets_a_missing_indicator():
    schema = Schema("n", columns=(Column("w", ColumnKind.CONTINUOUS, min=0.0, max=10.0, nullable=True),))
    encoded = utility.encode_features(pd.DataFrame({"w": [5.0, np.nan]}), schema.features)
    np.testing.assert_allclose(encoded, [[0.5, 0.0], [0.0, 1.0]])


@pytest.mark.slow
def test_same_seed_gives_identical_scores(real_split):
    train, test = real_split
    first = utility.evaluate(context(train, test, seed=11))
    again = utility.evaluate(context(train, test, seed=11))
    assert first.values == again.values
    assert first.detail["per_classifier"] == again.detail["per_classifier"]


@pytest.mark.slow
def test_large_synthetic_sets_train_on_a_seeded_subsample(real_split, monkeypatch):
    monkeypatch.setattr(utility, "MAX_TRAIN_ROWS", 400)
    train, test = real_split
    first = utility.evaluate(context(train, test, seed=5))
    assert first.detail["train_rows"] == 400
    assert utility.evaluate(context(train, test, seed=5)).values == first.values


def test_plugin_hook_provides_the_utility_spec_with_higher_is_better():
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    manager.register(utility_plugin, name="utility")
    (specs,) = manager.hook.dpgym_metrics()
    (spec,) = specs
    assert spec.name == "utility" and spec.requires_target
    assert dict(spec.directions) == {
        name: Direction.HIGHER for name in ("tstr_macro_f1", "tstr_auroc", "tstr_apc")
    }


def test_tree_leaf_size_decides_whether_a_rare_class_is_learned():
    """A class with fewer training rows than a leaf cannot get a leaf of its own; at leaf 1 (sklearn's
    default, the `tree_min_samples_leaf` option) the trees learn it. The other classifiers are untouched."""
    schema = Schema(
        "rare",
        columns=(Column("x", ColumnKind.CONTINUOUS, min=0.0, max=10.0),
                 Column("kind", ColumnKind.CATEGORICAL, categories=("common", "rare"))),
        target="kind",
    )

    def rows(n_common: int, n_rare: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        x = np.concatenate([rng.uniform(0, 9, n_common), rng.uniform(9.5, 10, n_rare)])
        return schema.conform(pd.DataFrame({"x": x, "kind": ["common"] * n_common + ["rare"] * n_rare}))

    train, test = rows(2000, 8, seed=0), rows(1000, 50, seed=1)
    trees = list(utility.TREE_LEAF_PARAMS)
    scores = {}
    for leaf in (20, 1):
        options = {**utility.OPTIONS, "classifiers": [*trees, "gaussian_nb"], "tree_min_samples_leaf": leaf}
        ctx = MetricContext(train=train, test=test, synthetic=train, schema=schema, seed=0, options=options)
        scores[leaf] = utility.evaluate(ctx).detail["per_classifier"]
    for name in trees:
        assert scores[20][name]["macro_f1"] < 0.6  # "rare" is never predicted
        assert scores[1][name]["macro_f1"] > 0.9
    assert scores[1]["gaussian_nb"] == scores[20]["gaussian_nb"]
    assert utility.make_classifier("bagging", 0, 7).estimator.min_samples_leaf == 7
    assert utility.make_classifier("hist_gradient_boosting", 0, 1).min_samples_leaf == 20  # its own default


@pytest.mark.parametrize("leaf", [0, 2.5, True, "1"])
def test_tree_leaf_option_refuses_what_is_not_a_row_count(leaf):
    with pytest.raises(ValueError, match="tree_min_samples_leaf"):
        check_options({**utility.OPTIONS, "tree_min_samples_leaf": leaf})
