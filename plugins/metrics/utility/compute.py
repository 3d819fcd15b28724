"""The code of `dpgym.plugins.metrics.utility`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.metrics.utility`, which holds the spec."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import (
    AdaBoostClassifier,
    BaggingClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, f1_score, roc_auc_score
from sklearn.naive_bayes import BernoulliNB, GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits
from xgboost import XGBClassifier

from dpgym import Column, MetricContext, MetricResult, Schema, cell_threads
from dpgym.plugins.metrics.utility import CLASSIFIER_NAMES, MIN_SAMPLES_LEAF, OPTIONS, SCORES

# Bounds the cost on large tables (Census, Covertype, Intrusion): above this many synthetic rows the
# classifiers train on a seeded uniform subsample without replacement.
MAX_TRAIN_ROWS = 50_000

# name -> factory(seed). Settings are library defaults except where noted; the tree classifiers'
# leaf size is set afterwards from the `tree_min_samples_leaf` option, through these parameters.
CLASSIFIERS: dict[str, Callable[[int], ClassifierMixin]] = {
    "logistic_regression": lambda seed: make_pipeline(
        StandardScaler(), LogisticRegression(max_iter=1000, random_state=seed)
    ),
    "decision_tree": lambda seed: DecisionTreeClassifier(random_state=seed),
    "random_forest": lambda seed: RandomForestClassifier(n_jobs=cell_threads(), random_state=seed),
    "hist_gradient_boosting": lambda seed: HistGradientBoostingClassifier(random_state=seed),
    "adaboost": lambda seed: AdaBoostClassifier(random_state=seed),
    "gaussian_nb": lambda seed: GaussianNB(),
    # Min-max features lie in [0, 1]: binarize numeric columns at the middle of their public range.
    "bernoulli_nb": lambda seed: BernoulliNB(binarize=0.5),
    "lda": lambda seed: LinearDiscriminantAnalysis(),
    # Serial: bagging parallelises over worker processes, each sent a copy of the training matrix,
    # while its ten trees take about a second of CPU on Adult.
    "bagging": lambda seed: BaggingClassifier(DecisionTreeClassifier(), random_state=seed),
    "xgboost": lambda seed: XGBClassifier(tree_method="hist", n_jobs=1, random_state=seed),
}
assert tuple(CLASSIFIERS) == CLASSIFIER_NAMES, "the zoo and the names its option accepts differ"
# HistGradientBoosting's own min_samples_leaf (library default 20) is left alone.
TREE_LEAF_PARAMS = {
    "decision_tree": "min_samples_leaf",
    "random_forest": "min_samples_leaf",
    "bagging": "estimator__min_samples_leaf",
}


def make_classifier(name: str, seed: int, tree_min_samples_leaf: int = MIN_SAMPLES_LEAF) -> ClassifierMixin:
    """A fresh, seeded classifier of the zoo, with the tree leaf size applied."""
    model = CLASSIFIERS[name](seed)
    if name in TREE_LEAF_PARAMS:
        model.set_params(**{TREE_LEAF_PARAMS[name]: tree_min_samples_leaf})
    return model


def encode_features(frame: pd.DataFrame, columns: Iterable[Column]) -> np.ndarray:
    """Schema-driven, data-independent encoding of the given feature columns.

    One-hot over the schema's categories (a missing value is all zeros); numeric columns min-max
    scaled by the public bounds, with a missing-indicator column when the column is nullable.
    `dpgym.data.encoding.TableEncoder` (the generators' encoding) instead gives a missing value a slot
    of its own; for these classifiers the two carry the same information.
    """
    blocks = []
    for col in columns:
        values = frame[col.name]
        if col.is_numeric:
            x = pd.to_numeric(values).to_numpy(dtype=float, na_value=np.nan)
            missing = np.isnan(x)
            blocks.append(np.where(missing, 0.0, (x - col.min) / (col.max - col.min))[:, None])
            if col.nullable:
                blocks.append(missing[:, None].astype(float))
        else:
            codes = values.astype(col.dtype).cat.codes.to_numpy()
            onehot = np.zeros((len(frame), len(col.categories)))
            present = codes >= 0
            onehot[np.flatnonzero(present), codes[present]] = 1.0
            blocks.append(onehot)
    return np.hstack(blocks) if blocks else np.empty((len(frame), 0))


def target_codes(frame: pd.DataFrame, schema: Schema) -> np.ndarray:
    """The target as schema category codes (-1 where missing); a schema's target is discrete."""
    col = schema.target_column
    if col is None:
        raise ValueError(f"utility needs a target column, and schema {schema.name!r} names none")
    return frame[col.name].astype(col.dtype).cat.codes.to_numpy()


def _labelled(frame: pd.DataFrame, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    y = target_codes(frame, schema)
    keep = y >= 0
    return encode_features(frame.loc[keep], schema.features), y[keep]


def fit_predict_proba(
    model: ClassifierMixin, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, n_classes: int
) -> tuple[np.ndarray, str | None]:
    """Fit on `y_train` and return test probabilities over all `n_classes` schema classes.

    Classes absent from the training rows get probability 0. When the training target has a
    single class, or the classifier cannot be fitted, the prior (a constant prediction) stands
    in for it; the reason is returned so it can be reported.
    """
    present, y_dense = np.unique(y_train, return_inverse=True)  # xgboost wants labels 0..k-1
    fallback = None
    if len(present) < 2:
        fallback = "single class in synthetic target: predicts it"
    else:
        try:
            model.fit(x_train, y_dense)
        except (ValueError, np.linalg.LinAlgError) as err:
            fallback = f"fit failed, predicts the prior: {type(err).__name__}: {err}"
    if fallback:
        model = DummyClassifier(strategy="prior").fit(x_train, y_dense)
    proba = np.zeros((len(x_test), n_classes))
    proba[:, present[model.classes_]] = model.predict_proba(x_test)
    return proba, fallback


def score(y_test: np.ndarray, proba: np.ndarray) -> dict[str, float]:
    """Macro-F1 of the arg-max prediction; AUROC and AP (binary, or macro one-vs-rest)."""
    predicted = proba.argmax(axis=1)
    out = {"macro_f1": float(f1_score(y_test, predicted, average="macro", zero_division=0))}
    positives = [1] if proba.shape[1] == 2 else range(proba.shape[1])
    # A one-vs-rest score is only defined for classes that are present and not the whole test split.
    defined = [k for k in positives if 0 < np.sum(y_test == k) < len(y_test)]
    if defined:
        out["auroc"] = float(np.mean([roc_auc_score(y_test == k, proba[:, k]) for k in defined]))
        out["apc"] = float(np.mean([average_precision_score(y_test == k, proba[:, k]) for k in defined]))
    else:
        out["auroc"] = out["apc"] = float("nan")
    return out


def _subsample(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    if len(frame) <= MAX_TRAIN_ROWS:
        return frame
    return frame.iloc[np.sort(np.random.default_rng(seed).choice(len(frame), size=MAX_TRAIN_ROWS, replace=False))]


def evaluate(ctx: MetricContext) -> MetricResult:
    schema = ctx.schema
    n_classes = len(schema.target_column.categories) if schema.target_column else 0
    x_train, y_train = _labelled(_subsample(ctx.synthetic, ctx.seed), schema)
    x_test, y_test = _labelled(ctx.test, schema)

    per_classifier: dict[str, dict[str, float]] = {}
    class_f1: dict[str, np.ndarray] = {}
    fallbacks: dict[str, str] = {}
    # Native pools (OpenMP, BLAS) spin-wait: with another process on the cores, 2-thread
    # HistGradientBoosting took 10-24 s on Adult against 2.5 s single-threaded, and 2-thread xgboost
    # burnt 7x the CPU time of 1 thread. Only the random forest builds trees in 2 joblib threads.
    options = {**OPTIONS, **ctx.options}
    with threadpool_limits(limits=1):
        for name in options["classifiers"]:
            model = make_classifier(name, ctx.seed, options["tree_min_samples_leaf"])
            proba, fallback = fit_predict_proba(model, x_train, y_train, x_test, n_classes)
            per_classifier[name] = score(y_test, proba)
            class_f1[name] = f1_score(y_test, proba.argmax(axis=1), labels=range(n_classes), average=None, zero_division=0)
            if fallback:
                fallbacks[name] = fallback

    table = pd.DataFrame(per_classifier).T  # classifiers x scores
    values = {f"tstr_{s}": float(table[s].mean()) for s in SCORES}
    detail: dict[str, Any] = {
        "per_classifier": per_classifier,
        **{f"tstr_{s}_std_classifiers": float(table[s].std(ddof=1)) for s in SCORES},
        # over the schema's classes, so a class absent from the test split shows as 0
        "f1_per_class": dict(zip(schema.target_column.categories, np.mean(list(class_f1.values()), axis=0).tolist())),
        "fallbacks": fallbacks,
        "train_rows": int(len(y_train)),
        "test_rows": int(len(y_test)),
        "synthetic_classes": sorted(schema.target_column.categories[k] for k in np.unique(y_train)),
    }
    return MetricResult(values=values, detail=detail)
