"""Utility: train a zoo of classifiers on the synthetic rows and score them on the real test split (TSTR).

Values (all higher is better), each the mean over the classifiers of the `classifiers` option: by
default the six fast ones of `DEFAULT_CLASSIFIERS` (logistic regression, decision tree, Gaussian and
Bernoulli naive Bayes, LDA, xgboost); a suite names the whole ten-classifier zoo, `CLASSIFIER_NAMES`,
with `[metric_options.utility] classifiers = [...]`, as the paper suites do. Values over different
classifier sets are different numbers: the set enters the cell key, and the leaderboard never
averages one with the other.
- ``tstr_macro_f1``: macro-averaged F1 of the hard predictions (sklearn's default label set:
  classes in the test split or predicted).
- ``tstr_auroc``: area under the ROC curve of the predicted probability of the positive class
  (the schema's second category of a two-category target); for more classes the macro average
  of one-vs-rest AUROC over the classes present in the test split.
- ``tstr_apc``: average precision, with the same positive class / macro one-vs-rest convention.

Per-classifier scores, the spread across classifiers, the F1 of each target class averaged over
the classifiers (macro-F1 hides which classes a generator lost) and any fallbacks are in `detail`.
The zoo is dpgym's reconstruction of the nine classifiers DP-HFlow averages over
(docs/methods/dp-hflow.md#evaluation) plus xgboost; gradient boosting is sklearn's
HistGradientBoosting for speed.

The three tree classifiers (decision tree, random forest, bagging) stop at leaves of
``tree_min_samples_leaf`` rows, 20 by default (see `TREE_LEAF_PARAMS`); a suite may set 1, sklearn's
default, which the DP-MERF code's zoo used.

Features are encoded from the public schema only (one-hot for discrete columns, min-max by the
public bounds for numeric ones), so nothing is fitted on the real rows; classifiers that need it
standardize on the synthetic training rows inside their pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpgym import Deferred, Direction, MetricSpec, hookimpl

SCORES = ("macro_f1", "auroc", "apc")
# The zoo, in the order its scores are listed (built in `compute.CLASSIFIERS`).
CLASSIFIER_NAMES = ("logistic_regression", "decision_tree", "random_forest", "hist_gradient_boosting", "adaboost",
                    "gaussian_nb", "bernoulli_nb", "lda", "bagging", "xgboost")

# Trees stop at leaves of this many rows by default. Fully grown trees score every test row 0 or 1,
# which makes their AUROC and AP nearly meaningless, and on structureless synthetic data (uniform,
# independent marginals) they grow about a leaf per row: forests and bagging on Adult-sized noise
# took 1.4-1.7x the CPU time of leaves of 20. The price: a class with fewer training rows than a
# leaf is hard to isolate. Trained on real Intrusion rows (u2r: 13 of the 50k), the three trees
# score macro-F1 0.75-0.77 at 20 and 0.79-0.95 at 1 (10 seeds), u2r 0.00 and 0.54 on average.
MIN_SAMPLES_LEAF = 20

# The default set: the six whose fits cost least on Adult-sized data. The four left out (random
# forest, hist gradient boosting, AdaBoost, bagging) are ensembles that cost most of the ten's time,
# and a run without --metrics should spend its time on the generators (docs/metrics.md#utility).
DEFAULT_CLASSIFIERS = ("logistic_regression", "decision_tree", "gaussian_nb", "bernoulli_nb", "lda", "xgboost")

OPTIONS = {"classifiers": list(DEFAULT_CLASSIFIERS), "tree_min_samples_leaf": MIN_SAMPLES_LEAF}


def check_options(options: Mapping[str, Any]) -> None:
    chosen = options["classifiers"]
    if not isinstance(chosen, list | tuple) or not chosen:
        raise ValueError(f"'classifiers' must be a non-empty list of names from {sorted(CLASSIFIER_NAMES)}")
    unknown = sorted(set(chosen) - set(CLASSIFIER_NAMES))
    if unknown:
        raise ValueError(f"unknown classifiers {unknown} (known: {', '.join(CLASSIFIER_NAMES)})")
    leaf = options["tree_min_samples_leaf"]
    if isinstance(leaf, bool) or not isinstance(leaf, int) or leaf < 1:
        raise ValueError(f"'tree_min_samples_leaf' must be a whole number of rows >= 1, got {leaf!r}")


SPEC = MetricSpec(
    name="utility",
    version="2",
    evaluate=Deferred("dpgym.plugins.metrics.utility.compute:evaluate"),
    directions={f"tstr_{s}": Direction.HIGHER for s in SCORES},
    description=(
        "Train on synthetic, test on real: macro-F1, AUROC and average precision averaged over the "
        "classifiers of the `classifiers` option, by default six fast ones (logistic regression, decision "
        "tree, Gaussian and Bernoulli NB, LDA, xgboost; a suite may name the whole ten-classifier zoo, "
        "adding random forest, hist gradient boosting, AdaBoost and bagging); multiclass AUROC/AP are "
        "macro one-vs-rest; at most 50k synthetic training rows."
    ),
    requires_target=True,
    default=True,
    ranked_value="tstr_auroc",
    options=OPTIONS,
    validate_options=check_options,
)


@hookimpl
def dpgym_metrics() -> list[MetricSpec]:
    return [SPEC]
