"""Density-estimation metrics of DP-NF (dp-nf spec §5): held-out log-likelihood and anomaly
detection by likelihood threshold, for generators that expose ``log_prob(frame) -> ndarray``
(log-density of the numeric columns, nats per row, in the data's own scale).

Values (omitted, not NaN, for generators without ``log_prob``; the detail says why):
- ``heldout_loglik``: mean log p(x) over the real test rows in the dataset's own scale. For Life
  Science that is DP-EM's max-norm space, the scale of DP-NF's Figure 1 (spec A1).
- ``heldout_loglik_zscored``: the same density after z-scoring each numeric column with the
  training fold's mean and std (log p_Z = log p_X + Σ log std_j), the scale DP-NF reports for the
  2-D sets, Power and Gowalla (spec §4 "Standardisation").
- ``anomaly_auc``: ROC AUC of log p(x) separating the test rows from as many tail-box anomalies
  (spec §3.2, A13): each coordinate uniform in the test set's [5, 30] or [70, 95] percentile band,
  the band picked with probability ½ per anomaly and dimension.

The metric sees real train and test rows (evaluation is not private); the generator only answers
log_prob queries, which is post-processing of its released model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from harness import Direction, MetricContext, MetricResult, MetricSpec, hookimpl

LOW_BAND, HIGH_BAND = (5, 30), (70, 95)


def numeric_columns(ctx: MetricContext) -> list[str]:
    return [c.name for c in ctx.schema.columns if c.is_numeric]


def tail_box_anomalies(test: pd.DataFrame, columns: list[str], n: int, rng: np.random.Generator) -> pd.DataFrame:
    """n rows whose numeric columns are uniform in a tail band of the test set (spec §3.2); the
    other columns are copied from randomly chosen test rows (log_prob ignores them)."""
    values = test[columns].to_numpy(dtype=float)
    bands = np.stack([np.percentile(values, [*LOW_BAND], axis=0), np.percentile(values, [*HIGH_BAND], axis=0)])  # (2, 2, D)
    upper = rng.random((n, len(columns))) < 0.5
    lo = np.where(upper, bands[1, 0], bands[0, 0])
    hi = np.where(upper, bands[1, 1], bands[0, 1])
    rows = test.iloc[rng.integers(len(test), size=n)].reset_index(drop=True).copy()
    rows[columns] = lo + (hi - lo) * rng.random((n, len(columns)))
    return rows


def evaluate(ctx: MetricContext) -> MetricResult:
    log_prob = getattr(ctx.generator, "log_prob", None)
    if log_prob is None:
        return MetricResult({}, {"skipped": "the generator has no log_prob: density metrics are omitted"})
    columns = numeric_columns(ctx)
    test_ll = np.asarray(log_prob(ctx.test), dtype=float)
    log_std = float(np.log(ctx.train[columns].to_numpy(dtype=float).std(axis=0)).sum())
    anomalies = tail_box_anomalies(ctx.test, columns, len(ctx.test), np.random.default_rng(ctx.seed))
    anomaly_ll = np.asarray(log_prob(anomalies), dtype=float)
    scores = np.nan_to_num(np.concatenate([test_ll, anomaly_ll]), nan=-np.inf)
    labels = np.concatenate([np.ones(len(test_ll)), np.zeros(len(anomaly_ll))])
    finite = np.isfinite(test_ll)
    values = {
        "heldout_loglik": float(test_ll.mean()),
        "heldout_loglik_zscored": float(test_ll.mean() + log_std),
        "anomaly_auc": float(roc_auc_score(labels, np.maximum(scores, -1e300))),
    }
    detail = {"columns": columns, "n_test": len(test_ll), "non_finite_test_rows": int((~finite).sum()),
              "heldout_loglik_std_over_rows": float(test_ll[finite].std()) if finite.any() else None,
              "zscore_log_std_sum": log_std, "n_anomalies": len(anomaly_ll),
              "anomaly_loglik_mean": float(anomaly_ll.mean())}
    return MetricResult(values, detail)


SPEC = MetricSpec(
    name="density",
    version="1",
    evaluate=evaluate,
    directions={"heldout_loglik": Direction.HIGHER, "heldout_loglik_zscored": Direction.HIGHER,
                "anomaly_auc": Direction.HIGHER},
    description="held-out log-likelihood (data and z-scored scale) and tail-box anomaly ROC AUC, for generators with log_prob",
)


@hookimpl
def dpgym_metrics() -> list[MetricSpec]:
    return [SPEC]
