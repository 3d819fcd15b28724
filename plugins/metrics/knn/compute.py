"""The code of `dpgym.plugins.metrics.knn`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.metrics.knn`, which holds the spec."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import mean_squared_error
from sklearn.neighbors import KNeighborsRegressor

from dpgym import MetricContext, MetricResult, Schema, cell_threads
from dpgym.plugins.metrics.knn import OPTIONS


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
