"""The DP-auto-GAN paper's evaluation (Tantipongpipat et al. §4, App. C.2; docs/methods/dp-auto-gan.md#metrics):
dimension-wise probability, dimension-wise prediction (train on synthetic, test on real), the
diversity measures (μ-smoothed KL and Jensen–Shannon divergence per categorical column), and
random-forest accuracy on the label.

The paper evaluates ADULT on 13 columns: it drops `fnlwgt` and the string `education` (keeping
`education-num`). `PAPER_VIEWS` applies that view to the harness's 15-column Adult; other datasets
are evaluated on all their columns.

Dimension-wise prediction leaves a row out of a column's task when that column is missing in it,
and encodes missing predictors as the utility metric does (no category; a nullable numeric column
at its lower bound with a missing indicator).
"""

from __future__ import annotations

from dpgym import Deferred, Direction, MetricSpec, hookimpl

COMPUTE = "dpgym.plugins.metrics.dpautogan.compute"

SPECS = [
    MetricSpec("dimension_wise_probability", "1", Deferred(f"{COMPUTE}:evaluate_probability"),
               {"dimwise_prob_pearson": Direction.HIGHER, "dimwise_prob_mae": Direction.LOWER},
               "per-category frequency, real train vs synthetic: Pearson r and mean |Δ| (Choi et al.)"),
    MetricSpec("dimension_wise_prediction", "2", Deferred(f"{COMPUTE}:evaluate_prediction"),
               {"dimwise_pred_gap_discrete": Direction.LOWER, "dimwise_pred_gap_numeric": Direction.LOWER,
                "dimwise_pred_auroc_synthetic": Direction.HIGHER},
               "per column, train-on-synthetic vs train-on-real, tested on real: F1 (RF), R² (Lasso), AUROC (LR) gaps"),
    MetricSpec("diversity", "1", Deferred(f"{COMPUTE}:evaluate_diversity"),
               {"diversity_kl_sum": Direction.LOWER, "diversity_jsd_sum": Direction.LOWER},
               "μ-smoothed KL (μ = exp(−1/(1−p₁))) and JSD per categorical column, summed "
               "(docs/methods/dp-auto-gan.md#diversity)"),
    MetricSpec("rf_label_accuracy", "2", Deferred(f"{COMPUTE}:evaluate_label"),
               {"rf_label_accuracy": Direction.HIGHER, "rf_label_majority_rate": Direction.HIGHER,
                "rf_label_accuracy_real": Direction.HIGHER},
               "random forest (800 trees) trained on synthetic rows, accuracy on the real test label",
               requires_target=True),
]


@hookimpl
def dpgym_metrics() -> list[MetricSpec]:
    return SPECS
