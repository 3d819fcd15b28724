"""kNN regression, train on synthetic, test on real: DP-NF's downstream task (paper Fig. 2,
docs/methods/dp-nf.md#metrics).

A k-nearest-neighbours regressor (scikit-learn defaults: k = 5, uniform weights, Euclidean) learns
the target column from the other numeric columns of the synthetic rows and is scored by mean
squared error on the real test rows, in the dataset's own scale (for Life Science, DP-EM's
max-norm space, where the paper regresses pc10 on pc1..pc9).

Values (lower is better; omitted, not NaN, on a dataset with fewer than two numeric columns, where
the task does not exist; the detail says why):
- ``knn_mse``: the MSE of the synthetic-trained regressor.

Detail: the same regressor trained on the real training rows (the paper's "Baseline", a floor that
does not depend on the generator), the target and feature columns, and synthetic rows dropped for
missing values.

Options: ``target`` (default: the schema's last numeric column, pc10 on Life Science) and
``neighbours`` (default 5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import mean_squared_error
from sklearn.neighbors import KNeighborsRegressor

from dpgym import Direction, MetricContext, MetricResult, MetricSpec, Schema, cell_threads, hookimpl

OPTIONS: dict[str, Any] = {"target": None, "neighbours": 5}


def columns(schema: Schema, numeric: list[str], target: str | None) -> tuple[str, list[str]]:
    """(target, features) among the schema's numeric columns, the target last unless named."""
    target = numeric[-1] if target is None else target
    if target not in numeric:
        raise ValueError(f"knn_regression: target {target!r} is not a numeric column of {schema.name!r} ({numeric})")
    return target, [c for c in numeric if c != target]


def heldout_mse(train: pd.DataFrame, test: pd.DataFrame, target: str, features: list[str], neighbours: int) -> float:
    rows = train[[*features, target]].dropna()
    model = KNeighborsRegressor(n_neighbors=min(neighbours, len(rows)), n_jobs=cell_threads())
    model.fit(rows[features].to_numpy(dtype=float), rows[target].to_numpy(dtype=float))
    real = test[[*features, target]].dropna()
    return float(mean_squared_error(real[target].to_numpy(dtype=float), model.predict(real[features].to_numpy(dtype=float))))


def evaluate(ctx: MetricContext) -> MetricResult:
    options = {**OPTIONS, **ctx.options}
    numeric = [c.name for c in ctx.schema.columns if c.is_numeric]
    if len(numeric) < 2:  # not a failure of the cell: the task does not exist on this dataset
        return MetricResult({}, {"skipped": f"kNN regression needs two numeric columns (a target and a feature); "
                                            f"dataset {ctx.schema.name!r} has {numeric}"})
    target, features = columns(ctx.schema, numeric, options["target"])
    dropped = int(ctx.synthetic[[*features, target]].isna().any(axis=1).sum())
    if dropped == len(ctx.synthetic):
        return MetricResult({}, {"skipped": "every synthetic row misses the target or a feature"})
    values = {"knn_mse": heldout_mse(ctx.synthetic, ctx.test, target, features, options["neighbours"])}
    detail = {"target": target, "features": features, "neighbours": options["neighbours"],
              "real_train_baseline_mse": heldout_mse(ctx.train, ctx.test, target, features, options["neighbours"]),
              "synthetic_rows_dropped_for_missing_values": dropped,
              "test_target_variance": float(np.var(ctx.test[target].dropna().to_numpy(dtype=float)))}
    return MetricResult(values, detail)


def check_options(options: Mapping[str, Any]) -> None:
    k = options["neighbours"]
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"'neighbours' must be a positive integer, got {k!r}")
    if options["target"] is not None and not isinstance(options["target"], str):
        raise ValueError(f"'target' must be a column name, got {options['target']!r}")


SPEC = MetricSpec(
    name="knn_regression",
    version="1",
    evaluate=evaluate,
    directions={"knn_mse": Direction.LOWER},
    description="kNN regression (k = 5) of the last numeric column on the others, trained on synthetic, "
                "MSE on real test rows (DP-NF Fig. 2)",
    options=OPTIONS,
    validate_options=check_options,
)


@hookimpl
def dpgym_metrics() -> list[MetricSpec]:
    return [SPEC]
