"""The code of `dpgym.plugins.metrics.dpautogan`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.metrics.dpautogan`, which holds the spec."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pandas as pd
from scipy.stats import pearsonr
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import Lasso, LogisticRegression
from sklearn.metrics import accuracy_score, f1_score, r2_score, roc_auc_score

from dpgym import Column, ColumnKind, MetricContext, MetricResult, Schema
from dpgym.plugins.metrics.utility.compute import encode_features

PAPER_VIEWS: dict[str, tuple[str, ...]] = {"adult": ("fnlwgt", "education")}  # columns the paper drops
PREVALENCE_FLOOR = 0.01  # binary data: features with < 1% ones in real train are left out (App. D.1, Fig. 12)
SALARY_TREES = 800  # as the paper's code (docs/methods/dp-auto-gan.md#label-accuracy)


def view(schema: Schema) -> list[str]:
    dropped = PAPER_VIEWS.get(schema.name, ())
    return [c for c in schema.names if c not in dropped]


# ---------------------------------------------------------------------------------------------
# Diversity (paper Tables 2, 6, 7; docs/methods/dp-auto-gan.md#diversity)
# ---------------------------------------------------------------------------------------------

def smoothing(p: np.ndarray) -> float:
    """μ = exp(−1/(1−p₁)), p₁ the largest real category probability: a synthetic point mass then
    costs ≈ 1 on every column."""
    top = float(p.max())
    return 0.0 if top >= 1.0 else math.exp(-1.0 / (1.0 - top))


def smoothed_kl(p: np.ndarray, q: np.ndarray, mu: float) -> float:
    """D_KL^μ(P‖Q) = Σ_{x ∈ supp P} (P(x)+μ) ln((P(x)+μ)/(Q(x)+μ))."""
    support = p > 0
    a, b = p[support] + mu, q[support] + mu
    with np.errstate(divide="ignore"):
        return float(np.sum(a * np.log(a / b)))


def jsd(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen–Shannon divergence ½KL(P‖M) + ½KL(Q‖M), M = (P+Q)/2, natural log (the paper prints a
    symmetrised KL instead: docs/methods/dp-auto-gan.md#diversity).

    log M is taken as logaddexp(log P, log Q) − log 2: (P+Q)/2 underflows to 0 for a subnormal
    probability, which made the divergence infinite."""
    with np.errstate(divide="ignore"):
        log_p, log_q = np.log(p), np.log(q)
    log_m = np.logaddexp(log_p, log_q) - math.log(2)

    def kl(a: np.ndarray, log_a: np.ndarray) -> float:
        s = a > 0
        return float(np.sum(a[s] * (log_a[s] - log_m[s])))

    return 0.5 * kl(p, log_p) + 0.5 * kl(q, log_q)


def category_distribution(values: pd.Series, categories: tuple[str, ...]) -> np.ndarray:
    codes = pd.Categorical(values.astype(str), categories=list(categories)).codes
    counts = np.bincount(codes[codes >= 0], minlength=len(categories)).astype(float)
    return counts / max(counts.sum(), 1.0)


def diversity_columns(schema: Schema) -> list[str]:
    """Unordered discrete columns of the paper's view (ADULT: the 8 of Table 2)."""
    return [n for n in view(schema) if schema[n].kind in (ColumnKind.CATEGORICAL, ColumnKind.BINARY)]


def evaluate_diversity(ctx: MetricContext) -> MetricResult:
    real = pd.concat([ctx.train, ctx.test], ignore_index=True)  # P over all real rows, as the paper's tables
    per_column, skipped = {}, []
    for name in diversity_columns(ctx.schema):
        cats = ctx.schema[name].categories
        p, q = category_distribution(real[name], cats), category_distribution(ctx.synthetic[name], cats)
        if p.max() >= 1.0:  # one real category: μ = 0 and D_KL^μ is undefined (the paper's code warns at p₁ > 1 − 1e-6)
            skipped.append(name)
            continue
        mu = smoothing(p)
        per_column[name] = {"kl_mu": smoothed_kl(p, q, mu), "jsd": jsd(p, q), "mu": mu,
                            "synthetic_categories": int((q > 0).sum()), "real_categories": int((p > 0).sum())}
    return MetricResult(
        values={"diversity_kl_sum": sum(c["kl_mu"] for c in per_column.values()),
                "diversity_jsd_sum": sum(c["jsd"] for c in per_column.values())},
        detail={"columns": per_column, "skipped": skipped, "reference": "train + test"},
    )


# ---------------------------------------------------------------------------------------------
# Dimension-wise probability (Choi et al.; paper §4.1, Fig. 2)
# ---------------------------------------------------------------------------------------------

def indicator_matrix(frame: pd.DataFrame, schema: Schema, names: list[str]) -> tuple[np.ndarray, list[str]]:
    """0/1 coordinates of every discrete column: one per category (one for a two-level column)."""
    blocks, labels = [], []
    for name in names:
        col = schema[name]
        if col.is_numeric:
            continue
        codes = pd.Categorical(frame[name].astype(str), categories=list(col.categories)).codes
        cats = col.categories[1:] if len(col.categories) == 2 else col.categories
        offset = 1 if len(col.categories) == 2 else 0
        for i, cat in enumerate(cats):
            blocks.append(codes == i + offset)
            labels.append(f"{name}={cat}")
    return (np.column_stack(blocks).astype(float) if blocks else np.zeros((len(frame), 0))), labels


def evaluate_probability(ctx: MetricContext) -> MetricResult:
    names = view(ctx.schema)
    real, labels = indicator_matrix(ctx.train, ctx.schema, names)
    syn, _ = indicator_matrix(ctx.synthetic, ctx.schema, names)
    p, q = real.mean(axis=0), syn.mean(axis=0)
    r = float(pearsonr(p, q).statistic) if len(p) > 1 and p.std() > 0 and q.std() > 0 else math.nan
    return MetricResult(
        values={"dimwise_prob_pearson": r, "dimwise_prob_mae": float(np.abs(p - q).mean()) if len(p) else math.nan},
        detail={"features": len(p), "worst": sorted(zip(labels, (q - p).round(5).tolist()),
                                                      key=lambda t: -abs(t[1]))[:10]},
    )


# ---------------------------------------------------------------------------------------------
# Dimension-wise prediction, train on synthetic, test on real (paper §4, App. C.2.1)
# ---------------------------------------------------------------------------------------------

def labelled(frame: pd.DataFrame, target: Column, predictors: list[Column]) -> tuple[np.ndarray, np.ndarray]:
    """Predictors, encoded from the schema alone as the utility metric encodes them, and target of
    the rows whose target is present: a missing value is neither a value to regress nor a class to
    predict (the utility metric leaves such rows out too)."""
    if target.is_numeric:
        y = pd.to_numeric(frame[target.name]).to_numpy(dtype=float, na_value=np.nan)
        present = ~np.isnan(y)
    else:
        y = pd.Categorical(frame[target.name].astype(str), categories=list(target.categories)).codes
        present = y >= 0
    return encode_features(frame, predictors)[present], y[present]


def _score(kind: str, model, x_train, y_train, x_test, y_test, seed: int) -> float:
    """One column's held-out score; a single-class training target predicts that class (as the paper's code). NaN
    when the column is missing in every training or every test row: nothing to learn or to score."""
    if len(y_train) == 0 or len(y_test) == 0:
        return math.nan
    if kind == "numeric":
        return float(r2_score(y_test, model.fit(x_train, y_train).predict(x_test)))
    classes = np.unique(y_train)
    if kind == "auroc":
        if len(np.unique(y_test)) < 2:
            return math.nan
        scores = np.full(len(y_test), float(classes[0])) if len(classes) < 2 else model.fit(x_train, y_train).predict_proba(x_test)[:, 1]
        return float(roc_auc_score(y_test, scores))
    predicted = np.full(len(y_test), classes[0]) if len(classes) < 2 else model.fit(x_train, y_train).predict(x_test)
    if kind == "binary_f1":
        return float(f1_score(y_test, predicted, pos_label=1, zero_division=0.0))
    return float(f1_score(y_test, predicted, average="micro"))


def evaluate_prediction(ctx: MetricContext) -> MetricResult:
    names = view(ctx.schema)
    schema, seed = ctx.schema, ctx.seed
    all_binary = all(not schema[n].is_numeric and len(schema[n].categories) == 2 for n in names)
    per_column: dict[str, dict[str, float]] = {}
    for name in names:
        col = schema[name]
        predictors = [schema[n] for n in names if n != name]
        x_real, y_real = labelled(ctx.train, col, predictors)
        if col.is_numeric:
            kind, make = "numeric", lambda: Lasso(alpha=1.0)
        elif all_binary:
            if y_real.mean() < PREVALENCE_FLOOR:
                continue
            kind, make = "auroc", lambda: LogisticRegression(solver="liblinear", max_iter=100)
        else:
            kind = "binary_f1" if len(col.categories) == 2 else "micro_f1"
            make = lambda: RandomForestClassifier(n_estimators=10, random_state=seed, n_jobs=1)  # noqa: E731
        x_test, y_test = labelled(ctx.test, col, predictors)
        real = _score(kind, make(), x_real, y_real, x_test, y_test, seed)
        syn = _score(kind, make(), *labelled(ctx.synthetic, col, predictors), x_test, y_test, seed)
        per_column[name] = {"kind": kind, "real": real, "synthetic": syn}
    gaps = lambda kinds: [abs(c["real"] - c["synthetic"]) for c in per_column.values()  # noqa: E731
                          if c["kind"] in kinds and not (math.isnan(c["real"]) or math.isnan(c["synthetic"]))]
    mean = lambda xs: float(np.mean(xs)) if xs else math.nan  # noqa: E731
    values = {"dimwise_pred_gap_discrete": mean(gaps({"binary_f1", "micro_f1", "auroc"})),
              "dimwise_pred_gap_numeric": mean(gaps({"numeric"}))}
    if all_binary:
        values["dimwise_pred_auroc_synthetic"] = mean([c["synthetic"] for c in per_column.values()
                                                       if not math.isnan(c["synthetic"])])
    return MetricResult(values=values, detail={"columns": per_column, "prevalence_floor": PREVALENCE_FLOOR if all_binary else None})


# ---------------------------------------------------------------------------------------------
# Random-forest accuracy on the label (paper Table 3; docs/methods/dp-auto-gan.md#label-accuracy)
# ---------------------------------------------------------------------------------------------

def label_features(frame: pd.DataFrame, schema: Schema, predictors: list[str]) -> np.ndarray:
    """Categorical columns as integer codes, numeric columns raw (the reference code's RF input)."""
    return np.column_stack([
        frame[n].to_numpy(dtype=float) if schema[n].is_numeric
        else pd.Categorical(frame[n].astype(str), categories=list(schema[n].categories)).codes
        for n in predictors
    ])


def label_accuracy(train: pd.DataFrame, test: pd.DataFrame, schema: Schema, seed: int) -> float:
    target = schema.target
    predictors = [n for n in view(schema) if n != target]
    codes = lambda f: pd.Categorical(f[target].astype(str), categories=list(schema[target].categories)).codes  # noqa: E731
    train, test = (frame[frame[target].notna()] for frame in (train, test))  # a missing label is no class
    y_train = codes(train)
    if len(y_train) == 0 or len(test) == 0:
        return math.nan
    if len(np.unique(y_train)) < 2:
        predicted = np.full(len(test), y_train[0])
    else:
        forest = RandomForestClassifier(n_estimators=SALARY_TREES, random_state=seed, n_jobs=1)
        predicted = forest.fit(label_features(train, schema, predictors), y_train).predict(
            label_features(test, schema, predictors))
    return float(accuracy_score(codes(test), predicted))


@cache
def _real_accuracy(key: tuple[str, int, int], seed: int) -> float:
    return label_accuracy(*_REAL[key], seed)


_REAL: dict[tuple[str, int, int], tuple[pd.DataFrame, pd.DataFrame, Schema]] = {}


def evaluate_label(ctx: MetricContext) -> MetricResult:
    target = ctx.schema.target
    labelled = ctx.test[target].dropna()
    test_codes = pd.Categorical(labelled.astype(str), categories=list(ctx.schema[target].categories)).codes
    majority = float(np.bincount(test_codes).max() / len(test_codes)) if len(test_codes) else math.nan
    # The real-data reference is the same for every cell of a dataset: computed once per process.
    key = (ctx.schema.name, int(pd.util.hash_pandas_object(ctx.train).sum() % 2**61),
           int(pd.util.hash_pandas_object(ctx.test).sum() % 2**61))
    _REAL.setdefault(key, (ctx.train, ctx.test, ctx.schema))
    return MetricResult(
        values={"rf_label_accuracy": label_accuracy(ctx.synthetic, ctx.test, ctx.schema, 0),
                "rf_label_majority_rate": majority,
                "rf_label_accuracy_real": _real_accuracy(key, 0)},
        detail={"trees": SALARY_TREES, "random_state": 0, "predictors": [n for n in view(ctx.schema) if n != target]},
    )
